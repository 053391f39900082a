/* SPDX-License-Identifier: MIT */
/* tools/ — private declarations shared by the files of the ntbsock command: the subcommand
 * table, the subcommands, and small helpers that the unit tests exercise directly.
 *
 * Exit codes of every subcommand: 0 success, 1 failure (invalid config, run-time error),
 * 2 usage error; `run` also returns 126 (program not executable) and 127 (program not
 * found), as a shell does. */
#ifndef NTBSOCK_TOOLS_INT_H
#define NTBSOCK_TOOLS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "util/clock.h"

#define TOOL_EXIT_OK      0
#define TOOL_EXIT_FAIL    1
#define TOOL_EXIT_USAGE   2
#define TOOL_EXIT_NOEXEC  126
#define TOOL_EXIT_NOTFOUND 127

struct tool_cmd {
	const char *name;
	const char *summary;   /* one line for `ntbsock --help` */
	const char *usage;     /* full help text of the subcommand */
	int (*fn)(int argc, char **argv); /* argv[0] is the subcommand name */
};

/* The subcommand called NAME, or NULL. */
const struct tool_cmd *tool_find_cmd(const char *name);

/* Print CMD's help text to OUT. */
void tool_print_usage(const struct tool_cmd *cmd, FILE *out);

/* Report a usage error for subcommand NAME ("ntbsock NAME: MSG" + hint) and return 2. */
int tool_usage_error(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_perf(int argc, char **argv);
int cmd_link(int argc, char **argv);

/* --- run_env.c: finding the library and building the child's environment ------------------ */

/* Build the new LD_PRELOAD value: LIB first, then every entry of EXISTING (entries separated
 * by ':' or ' ', as ld.so accepts) except empty ones and copies of LIB, joined with ':'.
 * EXISTING may be NULL. Writes into BUF (LEN bytes); returns 0 or -ENAMETOOLONG. */
int tool_preload_join(const char *lib, const char *existing, char *buf, size_t len);

/* Candidate paths of libntbsock.so for an ntbsock executable at EXE (absolute), in the order
 * they are tried: the directory of EXE (build tree), then the installed location
 * LIBDIR/ntbsock/libntbsock.so — relative to a DESTDIR-style root when EXE sits in
 * ROOT/BINDIR — then EXE/../lib/ntbsock/libntbsock.so. LIBDIR or BINDIR may be NULL.
 * Fills up to MAX paths of CAP bytes each into PATHS; returns the number filled. */
int tool_lib_candidates(const char *exe, const char *libdir, const char *bindir,
			char paths[][4096], int max);

/* Find libntbsock.so: $NTBSOCK_LIB when set (must exist), else the first existing candidate
 * for /proc/self/exe. Writes the absolute path into BUF; returns 0, or -ENOENT with a message
 * naming the places tried in ERRBUF. */
int tool_find_library(char *buf, size_t len, char *errbuf, size_t errlen);

/* --- parse.c: option values ------------------------------------------------------------------- */

/* Parse a size list "64,4K,1M" (each a conf_parse_size() size ≥ 1, at most MAX entries) into
 * RET_SIZES; returns the count or -EINVAL / -E2BIG. */
int tool_parse_size_list(const char *s, size_t *ret_sizes, int max);

/* Parse a positive decimal count ≤ LIMIT; returns 0 or -EINVAL / -ERANGE. */
int tool_parse_count(const char *s, uint64_t limit, uint64_t *ret);

/* `ntbsock link down|up NAME [-c CONF]`. */
struct tool_link_args {
	bool        help;  /* -h/--help: the rest is not parsed */
	bool        down;  /* down, else up */
	const char *name;  /* the link's name (in ARGV) */
	const char *conf;  /* -c CONF (in ARGV), NULL when absent */
};

/* Parse the arguments of `link` (ARGV[0] is "link"; options may come anywhere, `--' ends
 * them). 0, or -EINVAL with a one-line message in ERRBUF (LEN bytes). */
int tool_parse_link_args(int argc, char **argv, struct tool_link_args *ret, char *errbuf,
			 size_t errlen);

/* --- load_conf.c: the config of stat and link ------------------------------------------------- */

struct conf;

/* Find the config (CONF_ARG, else $NTBSOCK_CONF, else /etc/ntbsock.conf; its path into PATH,
 * LEN bytes), load it and apply the NTBSOCK_* overrides. 0, or a negative errno after a
 * message on stderr starting "ntbsock CMD: ". */
int tool_load_conf(const char *cmd, const char *conf_arg, char *path, size_t len,
		   struct conf **ret_conf);

/* --- cmd_check.c: shared with stat and perf --------------------------------------------------- */

struct conf_link;
struct ntb_link_params;

/* Copy a config link into ntb link parameters (the structs map 1:1). */

/* "16 MiB", "4 KiB", "12345 B" (the largest binary unit that divides V). */
const char *tool_size_str(uint64_t v, char *buf, size_t len);

/* --- stat_fmt.c: `ntbsock stat` output ------------------------------------------------------- */

/* One connection as `ntbsock stat` shows it. */
struct tool_stat_row {
	pid_t    pid;
	int      fd;
	char     local[64], remote[64];   /* "127.0.0.1:5201", "[::1]:80" */
	bool     ntb;                     /* mode: ntb, or tcp with REASON */
	char     state[16];               /* "open", "pending", "connecting"; "" unknown */
	char     reason[96];              /* why tcp ("" for ntb) */
	char     link[64];                /* link name ("" for tcp) */
	uint64_t tx_bytes, rx_bytes;
	uint64_t tx_msgs[3], rx_msgs[3];  /* inline, short, long */
	uint64_t retransmits, crc_errors;
	uint32_t tx_queue_fill, rx_queue_fill;
	bool     stripe;                  /* the stripe of a balanced connection (its stream's
					   * frames through a second link: transport/tp_stripe.c) */
};

/* Decode a connection key (transport.h's layout: 0..15 client address, 16..17 client port,
 * 18..33 server address, 38..39 server port — addresses as IPv6, IPv4 mapped ::ffff:a.b.c.d,
 * ports big-endian) into "addr:port" strings seen from the client's or the server's end. */
void tool_key_endpoints(const uint8_t key[40], bool server, char *local, char *remote,
			size_t len);

/* One link of the config as `ntbsock stat` shows it. */
struct tool_stat_link {
	char name[64];
	bool admin_down;  /* `ntbsock link down` (its flag file exists) */
	/* this host's counters on the link (tp_link_stat()) */
	uint64_t conns, setups, tx_bytes, rx_bytes, transfers, congestion, failovers, expansions;
	uint64_t rings, rings_free, ring_grants, ring_refusals, ring_yields;
	uint64_t offers_held, offer_claims;
};

/* Print four lines per link: "link NAME: admin up" or "link NAME: admin down (connections use
 * tcp)", then "link NAME: conns N setups N tx_bytes N rx_bytes N transfers N congestion N
 * failovers N", then "link NAME: rings N free N grants N refused N asked_back N" (the pool of
 * transfer contexts), then "link NAME: offers held N claimed N"; after the links "tcp: setups
 * N" (TCP_SETUPS: connections this host's processes kept on TCP since the host-wide TCP table
 * was created). */
void tool_stat_print_links(FILE *out, const struct tool_stat_link *links, int n,
			   uint64_t tcp_setups);

/* Print ROWS as the human table (a header line, then one line per connection; "no
 * connections" when N is 0). */
void tool_stat_print_table(FILE *out, const struct tool_stat_row *rows, int n);

/* Print ROWS and LINKS as one JSON document:
 * {"connections":[{...},...],"links":[{"name":"ab","admin":"up","conns":N,"setups":N,
 *  "tx_bytes":N,"rx_bytes":N,"transfers":N,"congestion":N,"failovers":N},...],
 *  "tcp":{"setups":TCP_SETUPS}}. */
void tool_stat_print_json(FILE *out, const struct tool_stat_row *rows, int n,
			  const struct tool_stat_link *links, int n_links, uint64_t tcp_setups);

/* `--summary`: count ROWS in total, per mode (ntb, tcp, both always shown), per link (ntb
 * ones; LINKS, the config's N_LINKS link names, first and in order, even when 0, then any
 * other), per reason (tcp ones; most first). The table has a header line, then one line per
 * count: "KIND COUNT NAME" (KIND total, mode, link or reason; total has no name; a reason may
 * contain spaces). The JSON document: {"summary":{"total":N,"mode":{"ntb":N,"tcp":N},
 * "link":{NAME:N,...},"reason":{NAME:N,...}}}. 0 or -ENOMEM (nothing printed). */
int tool_stat_print_summary(FILE *out, const struct tool_stat_row *rows, int n,
			    const char *const *links, int n_links);
int tool_stat_print_summary_json(FILE *out, const struct tool_stat_row *rows, int n,
				 const char *const *links, int n_links);

/* --- perf_ref.c: reference measurements, CPUs ----------------------------------------------- */

/* The first two CPUs this process may run on; -ENODEV when there is only one. */
int tool_pick_cpus(int *ret_a, int *ret_b);

/* Pin the calling process to CPU (no-op when CPU < 0); 0 or -errno. */
int tool_pin_cpu(int cpu);

/* Single-core memcpy bandwidth in MB/s (10^6 bytes/s) copying between two BUF_SIZE buffers
 * for at least MIN_NS nanoseconds. 0 or -ENOMEM. */
int tool_ref_memcpy(size_t buf_size, uint64_t min_ns, double *ret_mbps);

/* One-way cache-line latency in µs: this process (pinned to CPU_A for the measurement,
 * then restored) and a forked child (pinned to CPU_B) ping-pong one shared cache line
 * ROUNDS times; one-way = round trip / 2. CPU_A < 0: no pinning (the sides yield while
 * waiting). 0 or a negative errno. */
int tool_ref_cacheline(int cpu_a, int cpu_b, unsigned rounds, double *ret_oneway_us);

/* The transport's copy-and-checksum kernels between two cores, without the protocol, in
 * bursts interleaved with another measurement: a receiver forked once (before anything a fork
 * would copy, such as a transport link), pinned to CPU_B, asleep in a read() between bursts,
 * copies MSG-byte messages out of a shared ring of RING_SIZE bytes with crc32c_copy() and
 * checks each CRC; the caller, running on CPU_A, writes them into the ring and a private
 * retransmission copy with crc32c_copy2(). */
struct tool_pipe_peer {
	pid_t    pid;     /* the receiver; -1: none (gone) */
	int      fd;      /* its command socket */
	uint8_t *map;     /* shared: control block, then the ring */
	size_t   map_len;
	uint8_t *shadow;  /* the sender's retransmission copy of the ring */
	uint8_t *src;     /* the message sent, MSG bytes of the pattern */
	size_t   msg;
	uint32_t slots;   /* messages in the ring */
	uint64_t bursts;
};

/* Fork the receiver (it closes CLOSE_FD unless < 0: the caller's end of another responder's
 * socket); 0, -ENODEV (one CPU), -EINVAL (MSG not a multiple of 64, or RING_SIZE not 2..64
 * messages) or another negative errno (PEER then has no receiver: pid -1). */
int tool_pipe_start(struct tool_pipe_peer *peer, int cpu_a, int cpu_b, size_t msg,
		    size_t ring_size, int close_fd);

/* One burst of at least MIN_NS nanoseconds (after one unmeasured ring's worth): MB/s (10^6
 * bytes/s) of messages received intact. 0, -EILSEQ (a CRC differed), or -ECHILD / -EPIPE when
 * the receiver is gone. */
int tool_pipe_burst(struct tool_pipe_peer *peer, uint64_t min_ns, double *ret_mbps);

/* End the receiver (EOF on its socket) and release PEER; accepts a PEER without one. */
void tool_pipe_stop(struct tool_pipe_peer *peer);

/* Round trips per timed batch of the cache-line ping-pong. */
#define TOOL_REF_BATCH 64u

/* The same ping-pong in short bursts, interleaved with another measurement: a responder
 * forked once (before the caller opens anything a fork would copy, such as a transport link),
 * pinned to CPU_B, asleep in a read() between bursts. The caller must run on CPU_A while it
 * asks for bursts, and close FD in any other child it forks later. */
struct pingpong_line;
struct tool_ref_peer {
	pid_t                 pid;   /* the responder; -1: none (gone) */
	int                   fd;    /* its command socket */
	struct pingpong_line *line;  /* the shared cache line */
	uint64_t              seq;   /* the last value the responder wrote */
	bool                  yield; /* one CPU: both sides yield while waiting */
};

/* Fork a responder with a command socket (a socketpair, close-on-exec): in the parent the
 * child's pid and *RET_FD our end; in the child 0, *RET_FD its end (CLOSE_FD, unless < 0,
 * closed there: another responder's socket, whose responder must see EOF when we end); or a
 * negative errno. */
pid_t tool_fork_responder(int *ret_fd, int close_fd);

/* In a responder: the next command from its socket FD; ends the process at EOF (exit 0) or
 * on an error (exit 1). */
uint64_t tool_responder_next(int fd);

/* Send a responder command CMD (a uint64_t) over its socket FD: 0, -ECHILD (no responder:
 * PID <= 0) or -EPIPE (it is gone). */
int tool_responder_cmd(pid_t pid, int fd, uint64_t cmd);

/* End a responder: close its command socket *FD (it sees EOF and leaves), wait for *PID
 * (unless <= 0), and set both to -1. */
void tool_end_responder(pid_t *pid, int *fd);

/* Fork the responder; 0 or a negative errno (PEER then has no responder: pid -1, fd -1). */
int tool_ref_peer_start(struct tool_ref_peer *peer, int cpu_a, int cpu_b);

/* One burst: WARM unmeasured batches of TOOL_REF_BATCH round trips, then N timed ones whose
 * durations in ns (round trips, not one-way) go to RET_BATCH_NS[0..N-1]. 0, or -ECHILD /
 * -EPIPE when the responder is gone. */
int tool_ref_peer_burst(struct tool_ref_peer *peer, unsigned warm, unsigned n,
			uint64_t *ret_batch_ns);

/* End the responder (EOF on its socket) and release PEER; accepts a PEER without one. */
void tool_ref_peer_stop(struct tool_ref_peer *peer);

/* Whether intervals can be timed with the time-stamp counter: x86-64 with an invariant TSC
 * (CPUID 0x80000007 EDX bit 8, or constant_tsc and nonstop_tsc in /proc/cpuinfo), unless
 * NTBSOCK_PERF_CLOCK=monotonic asks for the system clock. */
bool tool_tsc_usable(void);

/* A timestamp: the TSC when TSC (only where tool_tsc_usable()), else CLOCK_MONOTONIC in ns.
 * A bare rdtsc, ~12 ns where clock_gettime() costs ~30 and lfence + rdtsc ~24 on a VM: it may
 * execute a little before the loads ahead of it complete, but the ping-pong reads one stamp
 * per round trip (each ends where the next starts), so a stamp read early shortens one round
 * trip and lengthens the next by as much: the median does not move (the tail by a few ns at
 * most), whereas the cost of the read is in every round trip. */
static inline uint64_t tool_stamp(bool tsc)
{
#if defined(__x86_64__)
	if (tsc)
		return __rdtsc();
#else
	(void)tsc;
#endif
	return clock_mono_ns();
}

/* Converts tool_stamp() units to ns, calibrated against CLOCK_MONOTONIC over the interval
 * between tool_clock_start() and tool_clock_stop() (ticks_per_ns 1 for the system clock). */
struct tool_clock {
	bool     tsc;
	uint64_t ticks0, ns0;
	double   ticks_per_ns;
};
void tool_clock_start(struct tool_clock *clk, bool tsc);
void tool_clock_stop(struct tool_clock *clk);

/* --- perf_data.c: payload pattern and statistics ---------------------------------------------- */

/* Messages are windows into one pseudo-random pattern buffer: message number N of a run
 * starts at tool_pattern_offset(N), so reordered, duplicated or lost messages show up as a
 * mismatch. The buffer needs tool_pattern_len(MAX_SIZE) bytes. */
#define TOOL_PATTERN_STRIDE 8u
#define TOOL_PATTERN_PERIOD 4093u /* prime: offsets repeat only after this many messages */
size_t tool_pattern_len(size_t max_size);
size_t tool_pattern_offset(uint64_t msg_no);
/* Fill BUF with the LEN first bytes of the pattern of SEED (distinct 64-bit words). */
void tool_pattern_fill(uint8_t *buf, size_t len, uint64_t seed);
/* Whether the LEN bytes at BUF are bytes POS … POS+LEN-1 of the pattern of SEED: every byte
 * compared, the expected ones recomputed (not read from a pattern buffer). */
bool tool_pattern_check(const uint8_t *buf, size_t len, size_t pos, uint64_t seed);

/* The P-th percentile (0..100, nearest rank) of N samples; sorts SAMPLES. 0 when N is 0. */
uint64_t tool_percentile(uint64_t *samples, size_t n, double p);

/* --- output helpers --------------------------------------------------------------------------- */

/* Write S as a JSON string literal (with quotes) to OUT. */
void tool_json_string(FILE *out, const char *s);

#endif
