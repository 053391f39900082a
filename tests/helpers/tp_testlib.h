/* SPDX-License-Identifier: MIT */
/* Shared helpers of the transport tests (included by tests/unit/test_tp_*.c and
 * tests/helpers/tp_*.c): a two-sided shm link in one process or two, keys, byte streams. */
#ifndef NTBSOCK_TP_TESTLIB_H
#define NTBSOCK_TP_TESTLIB_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ntb/ntb.h"
#include "transport/transport.h"
#include "util/crc32c.h"

static inline void tl_params(struct ntb_link_params *lp, const char *path, int side, size_t win)
{
	ntb_link_params_init(lp);
	snprintf(lp->name, sizeof(lp->name), "tptest");
	snprintf(lp->path, sizeof(lp->path), "%s", path);
	lp->side = side;
	lp->window_size = win;
	lp->link_timeout_ms = 2000; /* a loaded test machine may stall heartbeats */
}

static inline void tl_unlink(const char *path)
{
	char p[512];

	unlink(path);
	snprintf(p, sizeof(p), "%s.side0", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s.side1", path);
	unlink(p);
}

/* Both sides of one shm link (A = side 0, the client host; B = side 1) and, for the tests
 * that open one, a connection between them. */
struct tl_pair {
	char path[128];
	struct tp_link *a, *b;
	struct tp_conn *ca, *cb;
};

/* Close both links (and with them their connections) and remove the link's files. */
static inline void tl_pair_close(struct tl_pair *p)
{
	tp_link_close(p->a);
	tp_link_close(p->b);
	tl_unlink(p->path);
}

static inline int tl_open(const char *path, int side, size_t win, const struct tp_params *tpp,
			  struct tp_link **ret)
{
	struct ntb_link_params lp;

	tl_params(&lp, path, side, win);
	return tp_link_open(&lp, tpp, ret);
}

static inline void tl_key(struct tp_key *k, uint16_t cport, uint16_t sport)
{
	memset(k, 0, sizeof(*k));
	k->bytes[0] = 127;
	k->bytes[3] = 1;
	k->bytes[16] = (uint8_t)(cport >> 8);
	k->bytes[17] = (uint8_t)cport;
	k->bytes[38] = (uint8_t)(sport >> 8);
	k->bytes[39] = (uint8_t)sport;
}

static inline uint64_t tl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* tp_rx_news_arm(C, RING, SEEN, SUMS) until it says settled (non-NULL), for up to 2 s: a look
 * that finds the receive lock busy (the helper's timers, a sanitizer's slow run) answers NULL
 * for "look again", so one NULL proves nothing. NULL when it never settled. */
static inline const void *tl_news_settled(struct tp_conn *c, bool ring, uint64_t *seen,
					  struct tp_news_sums *sums)
{
	uint64_t end = tl_now_ms() + 2000u;
	const void *w;

	while (!(w = tp_rx_news_arm(c, ring, seen, sums)) && tl_now_ms() < end)
		usleep(1000);
	return w;
}

/* Wait for the link to be up and the peer to advertise PORT. */
static inline int tl_wait_listen(struct tp_link *l, uint16_t port, int timeout_ms)
{
	uint64_t end = tl_now_ms() + (uint64_t)timeout_ms;

	while (tl_now_ms() < end) {
		if (tp_link_is_up(l) && tp_peer_listens(l, port))
			return 0;
		usleep(2000);
	}
	return -ETIMEDOUT;
}

/* Open both sides of a fresh shm link NAME (window WIN bytes, parameters TPP: NULL for the
 * defaults) into P; with PORT non-zero, side 1 listens on it and side 0 waits to see that. Waits
 * (up to 5 s) until both sides see the link up. 0, or the first failure's negative errno. */
static inline int tl_pair_open(struct tl_pair *p, const char *name, size_t win,
			       const struct tp_params *tpp, uint16_t port)
{
	struct tp_params def;
	int rc;

	if (!tpp) {
		tp_params_init(&def);
		tpp = &def;
	}
	memset(p, 0, sizeof(*p));
	snprintf(p->path, sizeof(p->path), "/dev/shm/ntbsock-test-%s-%d", name, getpid());
	tl_unlink(p->path);
	if ((rc = tl_open(p->path, 0, win, tpp, &p->a)) || (rc = tl_open(p->path, 1, win, tpp, &p->b)))
		return rc;
	if (port && ((rc = tp_listen(p->b, port)) || (rc = tl_wait_listen(p->a, port, 5000))))
		return rc;
	for (int i = 0; i < 5000 && !(tp_link_is_up(p->a) && tp_link_is_up(p->b)); i++)
		usleep(1000);
	return tp_link_is_up(p->a) && tp_link_is_up(p->b) ? 0 : -ETIMEDOUT;
}

/* Connect side 0 of P from CPORT to PORT on side 1 (set-up waits up to 5 s), confirm the
 * connection when CONFIRM (the program's TCP connect succeeded) and attach side 1's end: P->ca
 * and P->cb. 0, or the failing call's negative errno. */
static inline int tl_pair_connect(struct tl_pair *p, uint16_t cport, uint16_t port, bool confirm)
{
	struct tp_key k;
	enum tp_reason why;
	int rc;

	tl_key(&k, cport, port);
	if ((rc = tp_connect(p->a, &k, 5000, &p->ca, &why)))
		return rc;
	if (confirm && (rc = tp_conn_confirm(p->ca)))
		return rc;
	return tp_attach(p->b, &k, &p->cb);
}

static inline uint64_t tl_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Deterministic stream content: byte i of stream SEED (fast: 8 bytes per step). */
static inline uint64_t tl_word(uint64_t seed, uint64_t w)
{
	uint64_t x = (w + 1) * 0x9E3779B97F4A7C15ull ^ seed;

	x ^= x >> 31;
	return x * 0xBF58476D1CE4E5B9ull;
}

static inline void tl_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	size_t i = 0;

	while (i < len && ((off + i) & 7)) {
		buf[i] = (uint8_t)(tl_word(seed, (off + i) >> 3) >> (((off + i) & 7) * 8));
		i++;
	}
	for (; i + 8 <= len; i += 8) {
		uint64_t x = tl_word(seed, (off + i) >> 3);

		memcpy(buf + i, &x, 8);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)(tl_word(seed, (off + i) >> 3) >> (((off + i) & 7) * 8));
}

/* Running hash of a stream (CRC32C continued: chunking does not matter). */
static inline uint64_t tl_hash(uint64_t h, const uint8_t *p, size_t n)
{
	return crc32c((uint32_t)h, p, n);
}

/* Send all of BUF (blocking through tp_wait). 0 or a negative errno; -ETIMEDOUT after 10 s
 * without progress (tp_wait() may report room in the inline ring, which a larger write cannot
 * use: a receiver that stopped reading must end the test, not spin it). */
static inline int tl_send_all(struct tp_conn *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t last = tl_now_ms();

	while (len) {
		struct iovec v = { (void *)p, len };
		ssize_t n = tp_send(c, &v, 1);

		if (n == -EAGAIN) {
			int r = tp_wait(c, TP_EV_OUT, 10000);

			if (r == 0 || tl_now_ms() - last > 10000u)
				return -ETIMEDOUT;
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return (int)n;
		p += n;
		len -= (size_t)n;
		last = tl_now_ms();
	}
	return 0;
}

/* Receive into BUF up to LEN bytes (at least 1, blocking): count, 0 at EOF, or -errno. */
/* (a wait that keeps reporting readiness the read then refuses is a busy loop in a program's
 * blocking recv(): after a million such rounds and the timeout passed, the test fails with
 * what the wait reported instead of spinning for ever) */
static inline ssize_t tl_recv_some(struct tp_conn *c, void *buf, size_t len, int timeout_ms)
{
	uint64_t t0 = tl_now_ms();

	for (unsigned long rounds = 0;; rounds++) {
		struct iovec v = { buf, len };
		ssize_t n = tp_recv(c, &v, 1, 0);

		if (n != -EAGAIN)
			return n;
		int r = tp_wait(c, TP_EV_IN, timeout_ms);

		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0)
			return r;
		if (rounds >= 1000000 && timeout_ms >= 0 &&
		    tl_now_ms() - t0 > (uint64_t)timeout_ms + 1000u) {
			fprintf(stderr, "tl_recv_some: tp_wait() reported 0x%x %lu times, tp_recv() "
				"said EAGAIN each time (error %d)\n", (unsigned)r, rounds,
				tp_conn_error(c));
			abort();
		}
	}
}

#endif
