// SPDX-License-Identifier: MIT
/* `ntbsock perf`: the transport's own measurement — both ends of one connection over a
 * private shm link, a message-size sweep of verified one-way streaming and ping-pong latency,
 * and the reference limits (memcpy bandwidth, cache-line latency) measured in the same run. */
#include "tools/perf_int.h"
#include "glue/conf_params.h"
#include "tools/tools_int.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf/conf.h"
#include "ntb/ntb.h"
#include "transport/transport.h"
#include "util/crc32c.h"
#include "util/crc32c_int.h"
#include "util/log.h"

#define PERF_DEFAULT_COUNT  5000
#define PERF_MAX_COUNT      100000000ull
#define PERF_WARMUP         16         /* ping-pongs before the measured ones */
#define PERF_PATTERN_SEED   0x6e7462736f636bull
#define PERF_REF_BUF        (4u << 20) /* L3-resident memcpy buffers */
#define PERF_REF_NS         300000000ull
#define PERF_REF_ROUNDS     200000u
#define PERF_PIPE_MSG       (64u << 10) /* the pipeline reference: the streaming goal's size, */
#define PERF_PIPE_RING      (1u << 20)  /* the auto queue size of the private link, */
#define PERF_PIPE_NS        40000000ull /* 40 ms bursts, */
#define PERF_STREAM_BLOCKS  4u          /* one before each block of that size's stream and one after */
#define PERF_LAT_BLOCKS     10         /* ping-pong blocks per size, each after a reference burst */
#define PERF_LAT_MIN_BLOCK  300        /* round trips per block at least: fewer blocks if need be */
#define PERF_BURST_WARM     1          /* unmeasured batches at the start of each burst */
#define PERF_BURST_BATCHES  8          /* timed batches of TOOL_REF_BATCH round trips per burst */

struct perf_result {
	size_t   size;
	uint64_t count;
	double   mbps, msgs_per_s, p50_us, p99_us;
	uint64_t retransmits, crc_errors;
	bool     verified;
	bool     done;            /* measured (false: aborted before this size) */
	double   ref_us;          /* cache-line one-way interleaved with the ping-pong; 0: failed */
	double   pipe_mbps;       /* copy+CRC pipeline interleaved with the stream; 0: none */
	int      pipe_err;        /* why there is none: a negative errno, 0: not asked */
	double   ticks_per_ns;    /* the ping-pong's clock, calibrated over its run */
	bool     tsc;             /* timed with the TSC (else CLOCK_MONOTONIC) */
	bool     track_stall;     /* time every streamed message (only with --fault) */
	uint64_t stall_ns;        /* the stream's longest wait for one message */
	char     first_bad[160];  /* where verification first failed, for the error report */
};

/* Describe the first difference between GOT and WANT (LEN bytes) into R->first_bad, once. */
static void note_mismatch(struct perf_result *r, const char *phase, uint64_t msg_no,
			  const uint8_t *got, const uint8_t *want, size_t len)
{
	size_t i = 0;

	if (r->first_bad[0])
		return;
	while (i < len && got[i] == want[i])
		i++;
	snprintf(r->first_bad, sizeof(r->first_bad),
		 "%zu-byte messages: %s message %" PRIu64 ": first wrong byte at %zu", r->size,
		 phase, msg_no, i);
}

/* --- the parent: listens, receives and verifies, measures ----------------------------------- */

static int parent_accept(struct tp_link *link, pid_t self, struct tp_conn **ret_conn)
{
	struct tp_key key;
	uint64_t start = clock_mono_ns();
	int rc;

	perf_key(&key, self);
	while ((rc = tp_attach(link, &key, ret_conn)) == -ENOENT) {
		if (clock_mono_ns() - start > (uint64_t)PERF_SETUP_MS * 1000000u)
			return -ETIMEDOUT;
		usleep(200);
	}
	return rc;
}

/* Ask the child for a phase: COUNT messages of SIZE bytes numbered from FIRST. */
static int ctl_run(int ctl, uint32_t cmd, size_t size, uint64_t count, uint64_t first)
{
	struct perf_ctl m = { .cmd = cmd, .size = size, .count = count, .first = first };

	return perf_full_write(ctl, &m, sizeof(m));
}

static int ctl_report(int ctl, struct perf_report *rep)
{
	int rc = perf_full_read(ctl, rep, sizeof(*rep));

	if (rc < 0) {
		memset(rep, 0, sizeof(*rep));
		rep->status = rc;
		snprintf(rep->msg, sizeof(rep->msg), "side 1 exited");
	}
	return rep->status;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The pipeline reference's burst before a block of the stream (and after the last). */
static void pipe_burst(struct tool_pipe_peer *pipe, struct perf_result *r, double *mbps,
		       unsigned *n)
{
	int rc = tool_pipe_burst(pipe, PERF_PIPE_NS, &mbps[*n]);

	if (rc == 0)
		(*n)++;
	else if (r->pipe_err != -EILSEQ) /* (a failed check is reported whatever came after) */
		r->pipe_err = rc;
}

/*
 * One size's stream: COUNT messages from side 1, every byte verified here. For the pipeline
 * reference's message size (PIPE present) the stream runs in PERF_STREAM_BLOCKS blocks, each
 * after a burst of the reference (and one more at the end): a VM whose vCPUs change place
 * every few seconds can make both figures differ 4x from one moment to the next, so the two
 * are only comparable measured side by side. The rate is that of the blocks' time together.
 */
static int measure_stream(struct tp_conn *c, int ctl, const uint8_t *pattern, uint8_t *buf,
			  struct perf_result *r, struct tool_pipe_peer *pipe, char *err,
			  size_t errlen)
{
	struct perf_report rep;
	uint64_t elapsed = 0, done = 0, retx0, crc0, retx1, crc1;
	bool il = pipe && pipe->pid > 0 && r->size == pipe->msg;
	unsigned blocks = il ? PERF_STREAM_BLOCKS : 1, n_pipe = 0;
	double pipe_mbps[PERF_STREAM_BLOCKS + 1];
	bool ok = true;
	int rc = 0;

	perf_conn_counters(c, &retx0, &crc0);
	for (unsigned b = 0; b < blocks && rc == 0; b++) {
		uint64_t n_b = (r->count - done) / (blocks - b), t0;

		if (il)
			pipe_burst(pipe, r, pipe_mbps, &n_pipe);
		t0 = clock_mono_ns();
		rc = ctl_run(ctl, PERF_CMD_STREAM, r->size, n_b, done);
		uint64_t last = clock_mono_ns();

		for (uint64_t n = done; rc == 0 && n < done + n_b; n++) {
			rc = perf_recv_all(c, buf, r->size);
			if (r->track_stall) {
				/* the longest wait for one message: what a loss costs the stream (a
				 * clock read per message, so only under --fault) */
				uint64_t now = clock_mono_ns();

				if (now - last > r->stall_ns)
					r->stall_ns = now - last;
				last = now;
			}
			/* every byte against its expected value, recomputed rather than read from
			 * the pattern buffer: one stream of loads instead of memcmp's two */
			if (rc == 0 && !tool_pattern_check(buf, r->size, tool_pattern_offset(n),
							   PERF_PATTERN_SEED)) {
				note_mismatch(r, "streamed", n, buf,
					      pattern + tool_pattern_offset(n), r->size);
				ok = false;
			}
		}
		elapsed += clock_mono_ns() - t0;
		if (rc < 0) {
			snprintf(err, errlen, "stream of %zu-byte messages: receive: %s", r->size,
				 strerror(-rc));
			return rc;
		}
		rc = ctl_report(ctl, &rep);
		if (rc < 0) {
			snprintf(err, errlen, "stream of %zu-byte messages: %s", r->size, rep.msg);
			return rc;
		}
		r->retransmits += rep.retransmits;
		r->crc_errors += rep.crc_errors;
		done += n_b;
	}
	if (il)
		pipe_burst(pipe, r, pipe_mbps, &n_pipe);
	if (n_pipe) {
		/* the median (the upper one of an even count) */
		qsort(pipe_mbps, n_pipe, sizeof(pipe_mbps[0]), cmp_double);
		r->pipe_mbps = pipe_mbps[n_pipe / 2];
	}
	perf_conn_counters(c, &retx1, &crc1);
	r->mbps = (double)r->size * (double)r->count / ((double)elapsed / 1e9) / 1e6;
	r->msgs_per_s = (double)r->count / ((double)elapsed / 1e9);
	r->retransmits += retx1 - retx0;
	r->crc_errors += crc1 - crc0;
	r->verified = ok;
	return 0;
}

/* Up to this size the previous echo is verified while the next ping travels (its check then
 * costs the round trip nothing); larger echoes are verified outside the timed interval. */
#define PERF_VERIFY_IN_FLIGHT 4096u

/* One size's ping-pong, run in blocks. */
struct lat_run {
	struct tp_conn     *c;
	int                 ctl;
	const uint8_t      *pattern;
	uint8_t            *bufs[2];   /* echo n lands in bufs[n & 1] while echo n - 1 is checked */
	bool                in_flight; /* verify echo n - 1 while ping n travels */
	bool                tsc;
	bool                ok;        /* every echo this side checked was intact */
	struct perf_result *r;
};

/*
 * One block: PERF_WARMUP unmeasured round trips (side 1 may have gone to sleep on its control
 * socket; its wake-up is not a sample), then N measured ones into RTT (tool_stamp() units),
 * messages numbered from FIRST. One timestamp per round trip: a round trip ends when its echo
 * is delivered, and the next one starts there (one-way = RTT / 2, as the cache-line
 * reference). Reading the clock twice per round trip added half a clock read to the one-way
 * figure of small messages.
 */
static int ping_block(struct lat_run *lr, uint64_t first, uint64_t n_meas, uint64_t *rtt,
		      char *err, size_t errlen)
{
	const uint8_t *pattern = lr->pattern;
	struct perf_result *r = lr->r;
	struct perf_report rep;
	uint64_t total = PERF_WARMUP + n_meas, t_start, t_end;
	int rc;

	rc = ctl_run(lr->ctl, PERF_CMD_ECHO, r->size, total, first);
	t_start = tool_stamp(lr->tsc);
	for (uint64_t j = 0; rc == 0 && j < total; j++) {
		uint64_t n = first + j;
		const uint8_t *msg = pattern + tool_pattern_offset(n);
		uint8_t *echo = lr->bufs[j & 1], *prev = lr->bufs[(j - 1) & 1];

		rc = perf_send_all(lr->c, msg, r->size);
		if (rc == 0 && lr->in_flight && j > 0 &&
		    memcmp(prev, pattern + tool_pattern_offset(n - 1), r->size) != 0) {
			note_mismatch(r, "echoed", n - 1, prev, pattern + tool_pattern_offset(n - 1),
				      r->size);
			lr->ok = false;
		}
		if (rc == 0)
			rc = perf_recv_all(lr->c, echo, r->size);
		t_end = tool_stamp(lr->tsc);
		if (j >= PERF_WARMUP)
			rtt[j - PERF_WARMUP] = t_end - t_start;
		t_start = t_end;
		if (rc == 0 && (!lr->in_flight || j + 1 == total) &&
		    memcmp(echo, msg, r->size) != 0) {
			note_mismatch(r, "echoed", n, echo, msg, r->size);
			lr->ok = false;
		}
		if (!lr->in_flight)
			t_start = tool_stamp(lr->tsc); /* the check is not part of the next round trip */
	}
	if (rc < 0) {
		snprintf(err, errlen, "ping-pong of %zu-byte messages: %s", r->size, strerror(-rc));
		return rc;
	}
	rc = ctl_report(lr->ctl, &rep);
	if (rc < 0) {
		snprintf(err, errlen, "ping-pong of %zu-byte messages: %s", r->size, rep.msg);
		return rc;
	}
	r->retransmits += rep.retransmits;
	r->crc_errors += rep.crc_errors;
	if (!rep.verified && !r->first_bad[0])
		snprintf(r->first_bad, sizeof(r->first_bad),
			 "%zu-byte messages: side 1 received a ping that differs", r->size);
	lr->ok = lr->ok && rep.verified;
	return 0;
}

/*
 * Ping-pong latency, with the cache-line reference interleaved: the round trips run in up to
 * PERF_LAT_BLOCKS blocks, each preceded by a short burst of the cache-line ping-pong between
 * the same two CPUs with PEER (side 1 then waits in a read() on its control socket, so the
 * burst has its CPU; PEER waits in one while the transport runs). Both figures thus sample the same moments of the run — on a VM whose vCPUs change host
 * placement every few seconds, a reference measured at another time can differ 5x. The
 * reference is the median of all the size's batches, the latency the percentiles of all its
 * round trips; with an invariant TSC the round trips are timed with it, at a rate calibrated
 * against CLOCK_MONOTONIC over this whole measurement.
 */
static int measure_latency(struct tp_conn *c, int ctl, const uint8_t *pattern, uint8_t *buf,
			   struct perf_result *r, struct tool_ref_peer *peer, char *err,
			   size_t errlen)
{
	uint64_t blocks = r->count / PERF_LAT_MIN_BLOCK, done = 0, msg_no = 0, retx0, crc0;
	uint64_t retx1, crc1;
	struct lat_run lr = { .c = c, .ctl = ctl, .pattern = pattern, .ok = true, .r = r,
			      .in_flight = r->size <= PERF_VERIFY_IN_FLIGHT,
			      .tsc = tool_tsc_usable() };
	struct tool_clock clk;
	uint64_t *rtt = malloc(r->count * sizeof(*rtt)), *ref;
	size_t n_ref = 0;
	bool ref_ok = true;
	int rc = 0;

	blocks = blocks < 1 ? 1 : blocks > PERF_LAT_BLOCKS ? PERF_LAT_BLOCKS : blocks;
	ref = malloc(blocks * PERF_BURST_BATCHES * sizeof(*ref));
	lr.bufs[0] = buf;
	lr.bufs[1] = lr.in_flight ? malloc(r->size ? r->size : 1) : buf;
	if (!rtt || !ref || !lr.bufs[1]) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	perf_conn_counters(c, &retx0, &crc0);
	tool_clock_start(&clk, lr.tsc);
	for (uint64_t b = 0; b < blocks; b++) {
		uint64_t n = r->count / blocks + (b < r->count % blocks);

		if (tool_ref_peer_burst(peer, PERF_BURST_WARM, PERF_BURST_BATCHES, ref + n_ref) == 0)
			n_ref += PERF_BURST_BATCHES;
		else
			ref_ok = false;
		rc = ping_block(&lr, msg_no, n, rtt + done, err, errlen);
		if (rc < 0)
			goto out;
		msg_no += PERF_WARMUP + n;
		done += n;
	}
	tool_clock_stop(&clk);
	perf_conn_counters(c, &retx1, &crc1);
	r->tsc = lr.tsc;
	r->ticks_per_ns = clk.ticks_per_ns;
	/* one-way = round trip / 2 */
	r->p50_us = (double)tool_percentile(rtt, r->count, 50) / clk.ticks_per_ns / 2.0 / 1000.0;
	r->p99_us = (double)tool_percentile(rtt, r->count, 99) / clk.ticks_per_ns / 2.0 / 1000.0;
	r->ref_us = ref_ok && n_ref ? (double)tool_percentile(ref, n_ref, 50) / TOOL_REF_BATCH /
				      2.0 / 1000.0 : 0;
	r->retransmits += retx1 - retx0;
	r->crc_errors += crc1 - crc0;
	r->verified = r->verified && lr.ok;
out:
	if (lr.in_flight)
		free(lr.bufs[1]);
	free(ref);
	free(rtt);
	return rc;
}

/* --- output ----------------------------------------------------------------------------------- */

static void print_csv(const struct perf_result *res, int n)
{
	printf("size,count,mbps,msgs_per_s,p50_us,p99_us,retransmits,crc_errors,verified\n");
	for (int i = 0; i < n; i++) {
		const struct perf_result *r = &res[i];

		if (!r->done)
			continue;
		printf("%zu,%" PRIu64 ",%.1f,%.0f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",%s\n", r->size,
		       r->count, r->mbps, r->msgs_per_s, r->p50_us, r->p99_us, r->retransmits,
		       r->crc_errors, r->verified ? "yes" : "no");
	}
}

static void print_table_head(const struct perf_opts *o, int cpu_a, int cpu_b)
{
	char win[32], q[32];

	if (o->tpp.queue_size)
		tool_size_str(o->tpp.queue_size, q, sizeof(q));
	else
		snprintf(q, sizeof(q), "auto");
	printf("ntbsock perf: private shm link %s (window %s, queue %s), %" PRIu64
	       " messages per size, ", o->lp.path, tool_size_str(o->lp.window_size, win, sizeof(win)),
	       q, o->count);
	if (cpu_a >= 0)
		printf("sides pinned to CPUs %d and %d\n", cpu_a, cpu_b);
	else
		printf("one CPU: sides not pinned\n");
	printf("CRC32C path: %s\n", crc32c_impl_name());
	if (o->lp.fault.enabled) {
		printf("faults: drop %g, corrupt %g, delay up to %u us, seed %" PRIu64,
		       o->lp.fault.drop, o->lp.fault.corrupt, o->lp.fault.delay_us, o->lp.fault.seed);
		if (o->lp.fault.cut_after)
			printf(", cut after %" PRIu64 " bytes", o->lp.fault.cut_after);
		if (o->lp.fault.cut_after_ms)
			printf(", cut %u ms after the first write", o->lp.fault.cut_after_ms);
		printf("\n");
	}
	printf("%10s %9s %10s %12s %9s %9s %8s %8s  %s\n", "size", "count", "MB/s", "msgs/s",
	       "p50 us", "p99 us", "retx", "crc_err", "verified");
}

static void print_table_row(const struct perf_result *r)
{
	char size[32];

	printf("%10s %9" PRIu64 " %10.1f %12.0f %9.2f %9.2f %8" PRIu64 " %8" PRIu64 "  %s\n",
	       tool_size_str(r->size, size, sizeof(size)), r->count, r->mbps, r->msgs_per_s,
	       r->p50_us, r->p99_us, r->retransmits, r->crc_errors, r->verified ? "yes" : "no");
	fflush(stdout);
}

static void print_reference(int cpu_a, int cpu_b)
{
	double mbps = 0, us = 0;
	char buf[32];

	if (tool_ref_memcpy(PERF_REF_BUF, PERF_REF_NS, &mbps) < 0)
		printf("reference: memcpy: out of memory\n");
	else
		printf("reference (same run): memcpy %.0f MB/s on one core (%s buffers)\n", mbps,
		       tool_size_str(PERF_REF_BUF, buf, sizeof(buf)));
	if (tool_ref_cacheline(cpu_a, cpu_b, PERF_REF_ROUNDS, &us) < 0)
		printf("reference: cache-line ping-pong failed\n");
	else if (cpu_a >= 0)
		printf("reference (same run): cache line one-way %.3f us (round trip %.3f us) "
		       "between CPUs %d and %d\n", us, 2 * us, cpu_a, cpu_b);
	else
		printf("reference (same run): cache line one-way %.3f us (round trip %.3f us), "
		       "one CPU\n", us, 2 * us);
}

/* The pipeline reference next to the stream of its size, when that size was measured. */
static void print_pipe(const struct perf_result *res, int n, int start_err)
{
	char size[32], ring[32];

	tool_size_str(PERF_PIPE_MSG, size, sizeof(size));
	tool_size_str(PERF_PIPE_RING, ring, sizeof(ring));
	for (int i = 0; i < n; i++) {
		const struct perf_result *r = &res[i];
		int e = r->pipe_err ? r->pipe_err : start_err;

		if (!r->done || r->size != PERF_PIPE_MSG)
			continue;
		if (r->pipe_err == -EILSEQ)
			printf("reference (interleaved with the %s stream): copy+CRC32C pipeline: "
			       "FAILED: a message did not pass the receiver's CRC or pattern check "
			       "(the copy kernels are broken on this machine)\n", size);
		else if (r->pipe_mbps > 0)
			printf("reference (interleaved with the %s stream): copy+CRC32C pipeline %.0f "
			       "MB/s (the transport's copy kernels, %s ring, no protocol); %s stream "
			       "%.0f MB/s = %.0f%%\n", size, r->pipe_mbps, ring, size, r->mbps,
			       100.0 * r->mbps / r->pipe_mbps);
		else
			printf("reference (interleaved with the %s stream): copy+CRC32C pipeline: "
			       "%s\n", size, e == -ENODEV ? "one CPU, no pipeline" :
			       strerror(e ? -e : ECHILD));
		return;
	}
}

/* The interleaved reference next to the smallest size's latency (the latency goal's
 * comparison), and the clock the round trips were timed with. */
static void print_interleaved(const struct perf_result *res, int n, int pipe_err)
{
	const struct perf_result *r = NULL;
	char size[32];

	for (int i = 0; i < n; i++)
		if (res[i].done && (!r || res[i].size < r->size))
			r = &res[i];
	if (!r)
		return;
	tool_size_str(r->size, size, sizeof(size));
	/* "cache-line", not "cache line": scripts take the end-of-run figure from the one line
	 * matching "cache line one-way N us" */
	if (r->ref_us > 0)
		printf("reference (interleaved with the %s ping-pong): cache-line one-way %.3f us; "
		       "%s one-way p50 %.3f us = %.1fx\n", size, r->ref_us, size, r->p50_us,
		       r->p50_us / r->ref_us);
	else
		printf("reference (interleaved with the %s ping-pong): cache-line ping-pong "
		       "failed\n", size);
	print_pipe(res, n, pipe_err);
	if (r->tsc)
		printf("clock: round trips timed with the invariant TSC, %.1f MHz against "
		       "CLOCK_MONOTONIC\n", r->ticks_per_ns * 1000.0);
	else
		printf("clock: round trips timed with CLOCK_MONOTONIC\n");
}

/* --- options ---------------------------------------------------------------------------------- */

static int apply_conf(const char *conf_arg, struct perf_opts *o)
{
	char path[PATH_MAX];
	struct conf *conf = NULL;
	int rc = tool_load_conf("perf", conf_arg, path, sizeof(path), &conf);

	if (rc < 0)
		return rc;
	glue_tp_params(&conf->tunables, &o->tpp);
	if (conf->n_links > 0) {
		struct ntb_link_params lp;

		/* The link's shape and faults; name, path and side stay private to this run. */
		glue_link_params(&conf->links[0], &lp);
		o->lp.window_size = lp.window_size;
		o->lp.heartbeat_ms = lp.heartbeat_ms;
		o->lp.link_timeout_ms = lp.link_timeout_ms;
		o->lp.fault = lp.fault;
	}
	conf_free(conf);
	return 0;
}

static int parse_opts(int argc, char **argv, struct perf_opts *o)
{
	static const struct option opts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "sizes", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "fault", required_argument, NULL, 'f' },
		{ "csv", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf_arg = NULL, *fault = NULL;
	int opt, rc;

	memset(o, 0, sizeof(*o));
	for (size_t s = 64; s <= 512 * 1024; s *= 2)
		o->sizes[o->n_sizes++] = s;
	o->count = PERF_DEFAULT_COUNT;
	ntb_link_params_init(&o->lp);
	tp_params_init(&o->tpp);
	/* One connection needs one receive context; keep the private link small. */
	o->tpp.contexts = 8;
	o->lp.window_size = 32u << 20;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf_arg = optarg;
			break;
		case 's':
			rc = tool_parse_size_list(optarg, o->sizes, PERF_MAX_SIZES);
			if (rc < 0)
				return tool_usage_error("perf", "--sizes '%s': %s", optarg,
							rc == -E2BIG ? "too many sizes" :
							rc == -ERANGE ? "a size is over 1 GiB" :
							"expected sizes like 64,4K,1M");
			o->n_sizes = rc;
			break;
		case 'n':
			if (tool_parse_count(optarg, PERF_MAX_COUNT, &o->count) < 0)
				return tool_usage_error("perf", "--count '%s': expected 1..%llu",
							optarg, PERF_MAX_COUNT);
			break;
		case 'f':
			fault = optarg;
			break;
		case 'v':
			o->csv = true;
			break;
		case 'h':
			tool_print_usage(tool_find_cmd("perf"), stdout);
			return -1;
		default:
			return tool_usage_error("perf", "unknown option or missing argument: '%s'",
						argv[optind - 1]);
		}
	}
	if (optind < argc)
		return tool_usage_error("perf", "unexpected argument '%s'", argv[optind]);
	if (conf_arg && apply_conf(conf_arg, o) < 0)
		return TOOL_EXIT_FAIL;
	if (fault) {
		struct conf_fault f;
		char msg[256];

		if (conf_parse_fault(fault, &f, msg, sizeof(msg)) < 0)
			return tool_usage_error("perf", "--fault '%s': %s", fault, msg);
		o->lp.fault.enabled = f.enabled;
		o->lp.fault.drop = f.drop;
		o->lp.fault.corrupt = f.corrupt;
		o->lp.fault.delay_us = f.delay_us;
		o->lp.fault.seed = f.seed;
		o->lp.fault.cut_after = f.cut_after;
		o->lp.fault.cut_after_ms = f.cut_after_ms;
	}
	snprintf(o->lp.name, sizeof(o->lp.name), "perf-%d", (int)getpid());
	snprintf(o->lp.path, sizeof(o->lp.path), "/dev/shm/ntbsock-perf-%d-%llx", (int)getpid(),
		 (unsigned long long)(clock_mono_ns() & 0xffffffffu));
	o->lp.mode = 0600;
	return 0;
}

/* Remove the private link's files: the region and the transport's per-side host tables. */
static void remove_link_files(const char *path)
{
	char p[PATH_MAX];

	unlink(path);
	for (int s = 0; s < 2; s++) {
		snprintf(p, sizeof(p), "%s.side%d", path, s);
		unlink(p);
	}
}

/* Interrupted (Ctrl-C, kill): remove the private link and stop side 1 before leaving. Only
 * async-signal-safe calls; the paths are prepared before the handler is installed. */
static char cleanup_paths[3][PATH_MAX];
static volatile sig_atomic_t cleanup_child;

static void on_signal(int sig)
{
	for (int i = 0; i < 3; i++)
		unlink(cleanup_paths[i]);
	if (cleanup_child > 0)
		kill((pid_t)cleanup_child, SIGTERM);
	_exit(128 + sig);
}

static void install_cleanup(const char *path, pid_t child)
{
	struct sigaction sa;

	snprintf(cleanup_paths[0], PATH_MAX, "%s", path);
	snprintf(cleanup_paths[1], PATH_MAX, "%s.side0", path);
	snprintf(cleanup_paths[2], PATH_MAX, "%s.side1", path);
	cleanup_child = child;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* --- the run ---------------------------------------------------------------------------------- */

/*
 * Before the first size: an unmeasured, verified stream of twice the data ring from side 1,
 * then as many unmeasured round trips of the same size, so that no size pays for the first
 * touch of the rings' pages in either direction, in the windows and in the senders' shadows
 * (page faults: without this the first size above the inline limit streamed at a third of
 * its rate, and its ping-pong p99 was ~2 us against ~0.2).
 */
static int warm_ring(const struct perf_opts *o, struct tp_conn *c, int ctl, const uint8_t *pattern,
		     uint8_t *buf, char *err, size_t errlen)
{
	size_t qsize = o->tpp.queue_size ? o->tpp.queue_size : PERF_PIPE_RING, max = 0;
	struct perf_result warm = { .size = qsize / 8 < PERF_PIPE_MSG ? qsize / 8 : PERF_PIPE_MSG };
	int rc;

	for (int i = 0; i < o->n_sizes; i++)
		max = o->sizes[i] > max ? o->sizes[i] : max;
	if (warm.size > max) /* the buffers hold the largest size measured */
		warm.size = max;
	warm.count = 2 * qsize / warm.size;
	if (warm.count > 16384) /* (sizes under 128 B go inline: the data ring needs no warming) */
		warm.count = 16384;
	rc = measure_stream(c, ctl, pattern, buf, &warm, NULL, err, errlen);
	if (rc == 0 && warm.verified) {
		struct lat_run lr = { .c = c, .ctl = ctl, .pattern = pattern, .bufs = { buf, buf },
				      .tsc = tool_tsc_usable(), .ok = true, .r = &warm };
		uint64_t *rtt = malloc(warm.count * sizeof(*rtt));

		rc = rtt ? ping_block(&lr, 0, warm.count, rtt, err, errlen) : -ENOMEM;
		free(rtt);
		warm.verified = lr.ok;
	}
	if (rc == 0 && !warm.verified) {
		snprintf(err, errlen, "warm-up stream: %s", warm.first_bad);
		rc = -EILSEQ;
	}
	return rc;
}

static int run_sweep(const struct perf_opts *o, struct tp_conn *c, int ctl, const uint8_t *pattern,
		     uint8_t *buf, struct perf_result *res, struct tool_ref_peer *peer,
		     struct tool_pipe_peer *pipe, char *err, size_t errlen)
{
	int rc = warm_ring(o, c, ctl, pattern, buf, err, errlen);

	if (rc < 0)
		return rc;
	for (int i = 0; i < o->n_sizes; i++) {
		struct perf_result *r = &res[i];
		int rc;

		r->size = o->sizes[i];
		r->count = o->count;
		r->track_stall = o->lp.fault.enabled;
		rc = measure_stream(c, ctl, pattern, buf, r, pipe, err, errlen);
		if (rc == 0)
			rc = measure_latency(c, ctl, pattern, buf, r, peer, err, errlen);
		if (rc < 0)
			return rc;
		r->done = true;
		if (!o->csv)
			print_table_row(r);
	}
	return 0;
}

/* The end of a run: the CSV (or the reference lines after the table), then the errors.
 * Returns whether every size was measured and verified. */
static bool report_end(const struct perf_opts *o, const struct perf_result *res, bool completed,
		       const char *err, int cpu_a, int cpu_b, int pipe_err)
{
	bool all_ok = true;

	if (o->csv)
		print_csv(res, o->n_sizes);
	for (int i = 0; i < o->n_sizes; i++)
		all_ok = all_ok && res[i].done && res[i].verified;
	if (completed && !o->csv) {
		print_reference(cpu_a, cpu_b);
		print_interleaved(res, o->n_sizes, pipe_err);
	}
	if (err[0])
		fprintf(stderr, "ntbsock perf: %s\n", err);
	for (int i = 0; i < o->n_sizes; i++)
		if (res[i].first_bad[0])
			fprintf(stderr, "ntbsock perf: verification failed: %s\n", res[i].first_bad);
	fflush(NULL);
	return all_ok;
}

/* What the fault decorator did to side 0's writes (side 1's are its own): on stdout after the
 * table, on stderr after a CSV (which stays pure CSV). */
static void print_fault_stats(const struct perf_opts *o, struct tp_link *link,
			      const struct perf_result *res)
{
	struct ntb_fault_stats st;
	FILE *out = o->csv ? stderr : stdout;

	if (!o->lp.fault.enabled || !link)
		return;
	for (int i = 0; i < o->n_sizes; i++) {
		char sz[32];

		if (res[i].done)
			fprintf(out, "longest stall of the %s stream: %.3f ms (the longest wait for one "
				"message)\n", tool_size_str(res[i].size, sz, sizeof(sz)),
				(double)res[i].stall_ns / 1e6);
	}
	ntb_fault_stats(tp_link_ntb(link), &st);
	fprintf(out, "faults on side 0's writes: %" PRIu64 " writes (%" PRIu64 " bytes before any "
		"cut), %" PRIu64 " dropped, %" PRIu64 " corrupted, %" PRIu64 " delayed",
		st.writes, st.bytes, st.dropped, st.corrupted, st.delayed);
	if (o->lp.fault.cut_after || o->lp.fault.cut_after_ms)
		fprintf(out, "; %s: %" PRIu64 " window writes and %" PRIu64
			" control writes (heartbeats, doorbells) dropped by it",
			st.cut ? "link cut" : "not cut", st.cut_drops, st.cut_ctrl_drops);
	fprintf(out, "\n");
}

/* Side 0: open the link, listen, let side 1 connect (it reports the outcome), attach. */
static int parent_setup(const struct perf_opts *o, int ctl, struct tp_link **ret_link,
			struct tp_conn **ret_conn, char *err, size_t errlen)
{
	struct ntb_link_params lp = o->lp;
	struct perf_report rep;
	int rc;

	lp.side = 0;
	rc = tp_link_open(&lp, &o->tpp, ret_link);
	if (rc < 0) {
		snprintf(err, errlen, "side 0: tp_link_open %s: %s%s%s", lp.path, strerror(-rc),
			 *ntb_strerror_detail() ? ": " : "", ntb_strerror_detail());
		return rc;
	}
	rc = tp_listen(*ret_link, PERF_PORT);
	if (rc < 0) {
		snprintf(err, errlen, "side 0: tp_listen: %s", strerror(-rc));
		return rc;
	}
	rc = ctl_run(ctl, 0, 0, 0, 0);
	if (rc < 0) {
		snprintf(err, errlen, "side 1 exited early");
		return rc;
	}
	rc = ctl_report(ctl, &rep);
	if (rc < 0) {
		snprintf(err, errlen, "%s", rep.msg);
		return rc;
	}
	rc = parent_accept(*ret_link, getpid(), ret_conn);
	if (rc < 0)
		snprintf(err, errlen, "side 0: tp_attach: %s", strerror(-rc));
	return rc;
}

/* NTBSOCK_LOG and NTBSOCK_LOG_FILE as for the library (ntbsock(1)): the transport's lines of
 * both sides, e.g. each Retry and retransmission under --fault. 0, or an exit status. */
static int perf_env_log(void)
{
	const char *lv = getenv("NTBSOCK_LOG"), *lf = getenv("NTBSOCK_LOG_FILE");
	int rc;

	if (lv && *lv) {
		rc = log_parse_level(lv);
		if (rc < 0) {
			fprintf(stderr, "ntbsock perf: NTBSOCK_LOG=%s: not a level (error, warn, "
				"info, debug)\n", lv);
			return TOOL_EXIT_USAGE;
		}
		log_set_level(rc);
	}
	if (lf && *lf) {
		rc = log_set_file(lf);
		if (rc < 0) {
			fprintf(stderr, "ntbsock perf: NTBSOCK_LOG_FILE=%s: %s\n", lf, strerror(-rc));
			return TOOL_EXIT_FAIL;
		}
	}
	return 0;
}

/* NTBSOCK_CRC: the library quietly keeps the best CRC32C path when the name is one this CPU
 * cannot run; a measurement that asked for a path says so instead. 0, or an exit status. */
static int perf_env_crc(void)
{
	const char *want = getenv("NTBSOCK_CRC");

	if (want && *want && !crc32c_pick(want)) {
		fprintf(stderr, "ntbsock perf: NTBSOCK_CRC=%s: not a CRC32C path this CPU runs "
			"(avx512, avx2, sse4.2, portable; this CPU's best: %s)\n", want,
			crc32c_pick(NULL)->name);
		return TOOL_EXIT_USAGE;
	}
	return 0;
}

/* One `ntbsock perf` run: what its steps share. */
struct perf_run {
	const struct perf_opts *o;
	struct perf_result res[PERF_MAX_SIZES];
	struct tool_ref_peer peer;  /* the interleaved cache-line reference's responder */
	struct tool_pipe_peer pipe; /* the pipeline reference's receiver */
	int pipe_err;               /* why the pipeline reference could not start (0: it did) */
	struct tp_link *link;
	struct tp_conn *c;
	uint8_t *pattern, *buf;     /* the payload, and side 0's receive buffer */
	size_t max_size;
	int cpu_a, cpu_b;
	char err[512];
};

/* The payload pattern and the receive buffer, for the largest size measured. 0, or -ENOMEM
 * (said on stderr). */
static int perf_alloc(struct perf_run *r)
{
	for (int i = 0; i < r->o->n_sizes; i++)
		if (r->o->sizes[i] > r->max_size)
			r->max_size = r->o->sizes[i];
	r->pattern = malloc(tool_pattern_len(r->max_size));
	r->buf = malloc(r->max_size);
	if (!r->pattern || !r->buf) {
		fprintf(stderr, "ntbsock perf: out of memory\n");
		free(r->pattern);
		free(r->buf);
		return -ENOMEM;
	}
	tool_pattern_fill(r->pattern, tool_pattern_len(r->max_size), PERF_PATTERN_SEED);
	return 0;
}

/* The reference peers, forked first: before the control socket (they must not hold side 1's
 * other end) and before any transport call (a fork with an open connection takes part in the
 * transport's fork protocol). Without the interleaved cache-line responder its line reports a
 * failure; the rest of the run does not depend on it. The pipeline's receiver only when its
 * message size is measured. */
static void perf_refs_start(struct perf_run *r)
{
	tool_ref_peer_start(&r->peer, r->cpu_a, r->cpu_b);
	memset(&r->pipe, 0, sizeof(r->pipe));
	r->pipe.pid = r->pipe.fd = -1;
	for (int i = 0; i < r->o->n_sizes && !r->o->csv; i++) /* (the CSV has no reference lines) */
		if (r->o->sizes[i] == PERF_PIPE_MSG && r->pipe.pid < 0)
			r->pipe_err = tool_pipe_start(&r->pipe, r->cpu_a, r->cpu_b, PERF_PIPE_MSG,
						      PERF_PIPE_RING, r->peer.fd);
}

/* Fork the side-1 process (perf_child_main()) before any transport call: each process opens
 * its own side of the link. Returns its pid, with our end of the control socket in *RET_CTL;
 * -1 on failure (said on stderr). */
static pid_t perf_fork_side1(struct perf_run *r, int *ret_ctl)
{
	int sv[2];
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		fprintf(stderr, "ntbsock perf: socketpair: %s\n", strerror(errno));
		return -1;
	}
	child = fork();
	if (child < 0) {
		fprintf(stderr, "ntbsock perf: fork: %s\n", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (child == 0) {
		close(sv[0]);
		if (r->peer.fd >= 0)
			close(r->peer.fd); /* the responder sees EOF when the parent closes it */
		if (r->pipe.fd >= 0)
			close(r->pipe.fd); /* the same for the pipeline's receiver */
		_exit(perf_child_main(r->o, sv[1], r->pattern, r->max_size, r->cpu_b));
	}
	close(sv[1]);
	*ret_ctl = sv[0];
	return child;
}

/* Side 0's part, over control socket CTL: set up the connection and measure every size. 0, or
 * negative with r->err saying why. */
static int perf_measure(struct perf_run *r, int ctl)
{
	int rc = parent_setup(r->o, ctl, &r->link, &r->c, r->err, sizeof(r->err));

	if (rc < 0)
		return rc;
	if (!r->o->csv)
		print_table_head(r->o, r->cpu_a, r->cpu_b);
	rc = run_sweep(r->o, r->c, ctl, r->pattern, r->buf, r->res, &r->peer, &r->pipe, r->err,
		       sizeof(r->err));
	if (rc == 0)
		ctl_run(ctl, PERF_CMD_QUIT, 0, 0, 0);
	return rc;
}

int cmd_perf(int argc, char **argv)
{
	struct perf_opts o;
	struct perf_run run;
	struct perf_run *r = &run;
	int ctl, status, rc;
	bool all_ok;
	pid_t child;

	memset(r, 0, sizeof(*r));
	r->cpu_a = r->cpu_b = -1;
	r->o = &o;
	rc = parse_opts(argc, argv, &o);
	if (rc < 0)
		return TOOL_EXIT_OK; /* --help */
	if (rc > 0)
		return rc;
	rc = perf_env_log();
	if (rc > 0)
		return rc;
	rc = perf_env_crc();
	if (rc > 0)
		return rc;
	if (perf_alloc(r) < 0)
		return TOOL_EXIT_FAIL;
	if (tool_pick_cpus(&r->cpu_a, &r->cpu_b) < 0)
		r->cpu_a = r->cpu_b = -1;
	fflush(NULL);
	perf_refs_start(r);
	child = perf_fork_side1(r, &ctl);
	if (child < 0) {
		tool_ref_peer_stop(&r->peer);
		tool_pipe_stop(&r->pipe);
		free(r->pattern);
		free(r->buf);
		return TOOL_EXIT_FAIL;
	}
	install_cleanup(r->o->lp.path, child);
	tool_pin_cpu(r->cpu_a);
	rc = perf_measure(r, ctl);
	close(ctl); /* the child sees EOF on its control socket and leaves */
	if (rc < 0)
		kill(child, SIGTERM);
	waitpid(child, &status, 0);
	tool_ref_peer_stop(&r->peer);
	tool_pipe_stop(&r->pipe);
	remove_link_files(r->o->lp.path);
	all_ok = report_end(r->o, r->res, rc == 0, r->err, r->cpu_a, r->cpu_b, r->pipe_err);
	print_fault_stats(r->o, r->link, r->res);
	/* Last: the side-1 process is gone, so this only releases our own resources. */
	tp_close(r->c);
	tp_link_close(r->link);
	free(r->pattern);
	free(r->buf);
	return rc == 0 && all_ok ? TOOL_EXIT_OK : TOOL_EXIT_FAIL;
}
