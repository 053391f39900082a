/* SPDX-License-Identifier: MIT */
/* tools/ — private to `ntbsock perf`: the options both processes share, the control messages
 * between them, the transport I/O helpers, and side 1's process (perf_side.c). */
#ifndef NTBSOCK_TOOLS_PERF_INT_H
#define NTBSOCK_TOOLS_PERF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ntb/ntb.h"
#include "transport/transport.h"

#define PERF_MAX_SIZES      64
#define PERF_PORT           7          /* synthetic: the private link has no other listener */
#define PERF_STALL_MS       10000      /* no progress this long: the run failed */
#define PERF_SETUP_MS       10000

struct perf_opts {
	size_t   sizes[PERF_MAX_SIZES];
	int      n_sizes;
	uint64_t count;
	bool     csv;
	struct ntb_link_params lp;  /* both sides; path private, side set per process */
	struct tp_params tpp;
};

/* Control messages between the two processes (a socketpair beside the link). */
enum perf_cmd { PERF_CMD_STREAM = 1, PERF_CMD_ECHO, PERF_CMD_QUIT };

struct perf_ctl {
	uint32_t cmd;
	uint32_t pad;
	uint64_t size, count;
	uint64_t first;       /* number of the first message: ECHO runs in blocks */
};

struct perf_report {          /* child → parent after each phase, and after set-up */
	int32_t  status;      /* 0 or a negative errno */
	uint32_t verified;    /* the child saw every byte it expected (echo: what it got back) */
	uint64_t retransmits, crc_errors;
	char     msg[160];
};

/* Write / read exactly LEN bytes on the control socket FD; 0, -EPIPE or -errno. */
int perf_full_write(int fd, const void *buf, size_t len);
int perf_full_read(int fd, void *buf, size_t len);

/* The synthetic connection key both sides use (client 127.0.0.1:PID, server
 * 127.0.0.2:PERF_PORT, laid out as preload/ does it). */
void perf_key(struct tp_key *k, pid_t pid);

/* Send all LEN bytes / receive exactly LEN bytes, waiting through tp_wait(); 0, -EPIPE at a
 * premature end of stream, -ETIMEDOUT after PERF_STALL_MS without progress, or an errno. */
int perf_send_all(struct tp_conn *c, const uint8_t *buf, size_t len);
int perf_recv_all(struct tp_conn *c, uint8_t *buf, size_t len);

/* Retransmissions and checksum errors of C so far. */
void perf_conn_counters(struct tp_conn *c, uint64_t *ret_retx, uint64_t *ret_crc);

/* Side 1 (the forked process): open side 1 of O's link, connect, report on CTL, then stream
 * or echo on command until PERF_CMD_QUIT or EOF. Returns the process exit status. */
int perf_child_main(const struct perf_opts *o, int ctl, const uint8_t *pattern, size_t max_size,
		    int cpu);

#endif
