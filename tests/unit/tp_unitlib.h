/* SPDX-License-Identifier: MIT */
/* CMocka helpers of the transport unit tests that move pattern streams through connections
 * (test_tp_failover.c, test_tp_move.c...), and of the active list's tests (test_tp_active.c,
 * test_tp_ring.c): include after <cmocka.h> and tp_testlib.h. */
#ifndef NTBSOCK_TP_UNITLIB_H
#define NTBSOCK_TP_UNITLIB_H

#include <pthread.h>

#include "transport/tp_int.h"

/* Send the pattern SEED from OFF in messages of mixed sizes (each side of the inline, short and
 * long boundaries) until the rings are full or TOTAL is reached; returns the new offset. */
static inline size_t tu_send_mixed(struct tp_conn *c, uint64_t seed, size_t off, size_t total)
{
	static const size_t sizes[] = { 1, 4, 5, 52, 53, 116, 117, 1000, 4096, 20000, 65536 };
	uint8_t buf[65536];

	for (unsigned i = 0; off < total; i++) {
		size_t n = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];

		if (n > total - off)
			n = total - off;
		tl_fill(buf, n, seed, off);
		struct iovec v = { buf, n };
		ssize_t r = tp_send(c, &v, 1);

		if (r == -EAGAIN)
			break;
		assert_true(r > 0);
		off += (size_t)r;
	}
	return off;
}

/* Read LEN bytes of pattern SEED from offset OFF off C (blocking, 5 s a piece) and check them. */
static inline void tu_read_check(struct tp_conn *c, uint64_t seed, size_t off, size_t len)
{
	uint8_t *buf = malloc(65536), *want = malloc(65536);

	assert_non_null(buf);
	assert_non_null(want);
	while (len) {
		ssize_t n = tl_recv_some(c, buf, len < 65536 ? len : 65536, 5000);

		assert_true(n > 0);
		tl_fill(want, (size_t)n, seed, off);
		assert_memory_equal(buf, want, (size_t)n);
		off += (size_t)n;
		len -= (size_t)n;
	}
	free(buf);
	free(want);
}

/* The stand-in TCP socket FD holds nothing to read. */
static inline void tu_assert_socket_empty(int fd)
{
	char b;

	assert_int_equal(recv(fd, &b, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
}

/* Connect P (side 0 from CPORT to PORT on side 1) as tl_pair_connect() does, with a socketpair
 * SV standing in for the program's TCP connection as each end's witness. */
static inline void tu_connect_witnessed(struct tl_pair *p, uint16_t cport, uint16_t port,
					struct tp_conn **ca, struct tp_conn **cb, int sv[2])
{
	assert_int_equal(tl_pair_connect(p, cport, port, false), 0);
	*ca = p->ca;
	*cb = p->cb;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	tp_conn_set_witness(*ca, sv[0]);
	tp_conn_set_witness(*cb, sv[1]);
}

/* A link's full passes: every SWEEP_MS (0: only for link events). */
static inline void tu_set_sweep(struct tp_link *l, uint32_t sweep_ms)
{
	pthread_mutex_lock(&l->conns_lock);
	l->act_sweep_ms = sweep_ms;
	l->act_sweep_last = tp_now_ms();
	pthread_mutex_unlock(&l->conns_lock);
}

/* Wait (up to MS) until every connection of CS is off its link's active list. */
static inline bool tu_wait_idle(struct tp_conn **cs, int n, int ms)
{
	uint64_t end = tl_now_ms() + (uint64_t)ms;

	while (tl_now_ms() < end) {
		bool all = true;

		for (int i = 0; i < n; i++)
			all &= !tp_act_on(cs[i]);
		if (all)
			return true;
		usleep(2000);
	}
	return false;
}

#endif
