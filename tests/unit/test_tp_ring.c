/* SPDX-License-Identifier: MIT */
/* Transfer contexts (transport/tp_ring.c): data rings from a per-host pool, granted per
 * transfer. Set-up grants while the pool has rings; a connection without one still moves every
 * byte (inline slots) and asks; a pool smaller than the number of streaming senders rotates
 * among them ([RT]'s priority rule, grants asked back after a quantum) with no sender starved
 * and every byte exact; a message written with an earlier grant's seed never validates; every
 * ring returns to the pool. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "tests/unit/tp_unitlib.h"
#include "transport/tp_int.h"
#include "transport/tp_rx_int.h"
#include "util/crc32c.h"
#include "util/log.h"

#define NCONN 6

/* Shadow allocations to fail (tp_shadow_get(): aligned_alloc() of a ring's size, FAIL_SIZE),
 * for the out-of-memory case of a grant. This program's aligned_alloc() replaces the C
 * library's for everything linked into it. */
static _Atomic int fail_allocs;
static size_t fail_size;

void *aligned_alloc(size_t align, size_t size)
{
	void *p = NULL;

	if (size == fail_size && atomic_load(&fail_allocs) > 0) {
		atomic_fetch_sub(&fail_allocs, 1);
		errno = ENOMEM;
		return NULL;
	}
	return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) ? NULL : p;
}

/* Takes every shadow of Q bytes left in the process's huge-page slab (tp_conn.c) into TAKEN
 * (at most MAX), so that the next ones come from aligned_alloc(); returns how many. */
static int slab_take_all(struct tp_link *l, uint32_t q, uint8_t **taken, int max)
{
	int n = 0;
	uint64_t m;

	while (n < max && tp_shadow_slab_free() > 0) {
		taken[n] = tp_shadow_get(l, q, &m); /* (M: the chunks an earlier user mapped) */
		assert_non_null(taken[n]);
		n++;
	}
	return n;
}

/* C's out_ring_ok, read under its tx lock (the helper's timers write it under that lock). */
static bool ring_ok(struct tp_conn *c)
{
	tp_mutex_lock(&c->tx_lock);
	bool ok = c->out_ring_ok;

	tp_mutex_unlock(&c->tx_lock);
	return ok;
}

static void open_pool(struct tl_pair *p, const char *name, uint32_t rings)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.contexts = rings;
	tpp.connections = 64;
	tpp.queue_size = 64u << 10;
	assert_int_equal(tl_pair_open(p, name, 16u << 20, &tpp, 7000), 0);
}

static void connect_n(struct tl_pair *p, struct tp_conn **ca, struct tp_conn **cb, int n)
{
	for (int i = 0; i < n; i++) {
		assert_int_equal(tl_pair_connect(p, (uint16_t)(41000 + i), 7000, true), 0);
		ca[i] = p->ca;
		cb[i] = p->cb;
	}
}

static uint32_t pool_free(struct tp_link *l)
{
	/* relaxed: a counter the test reads while nothing else changes it */
	return atomic_load_explicit(&l->host->pool_free, memory_order_relaxed);
}

/* Move MSG (LEN bytes) from TX to RX in writes of at most CHUNK, checking every byte. */
static void move_checked(struct tp_conn *tx, struct tp_conn *rx, const uint8_t *msg, size_t len,
			 size_t chunk, uint8_t *got)
{
	for (size_t sent = 0, rcvd = 0; rcvd < len;) {
		if (sent < len) {
			struct iovec v = { (void *)(msg + sent), len - sent < chunk ? len - sent : chunk };
			ssize_t n = tp_send(tx, &v, 1);

			assert_true(n > 0 || n == -EAGAIN);
			if (n > 0)
				sent += (size_t)n;
		}
		ssize_t n = tl_recv_some(rx, got + rcvd, len - rcvd, 3000);

		assert_true(n > 0);
		rcvd += (size_t)n;
	}
	assert_memory_equal(got, msg, len);
}

/* Set-up takes rings while the pool has them; the next connection has none either way. Its
 * writes up to TP_RING_ASK_BYTES go through the inline slots without asking; a larger one asks
 * and waits for the ring (not writable meanwhile), which B's pool refuses while both are held,
 * then asks back from the idle holders after their quantum and grants. Every byte exact, every
 * ring back in its pool at the end. */
static void test_ring_setup_and_inline_only(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[3], *cb[3];
	struct tp_stats st0, st1;
	static uint8_t msg[40000], got[40000];

	(void)state;
	open_pool(&p, "ringsetup", 2);
	assert_int_equal(pool_free(p.a), 2);
	connect_n(&p, ca, cb, 3);
	/* the first: a ring each way (A's pool for B's bytes, B's for A's); the second: A's ring
	 * for B's bytes (the client grants from its own pool), none from B's (a server's
	 * reservation takes one only while more than half of its pool is free: nobody could ask
	 * it back before accept()) */
	assert_true(ring_ok(ca[0]) && ring_ok(cb[0]));
	assert_non_null(ca[0]->in_ring);
	assert_non_null(cb[0]->in_ring);
	assert_true(ring_ok(cb[1]));
	assert_false(ring_ok(ca[1]));
	assert_int_equal(pool_free(p.a), 0);
	assert_int_equal(pool_free(p.b), 1);
	/* the second asks for B's last ring (a write past 4 KiB) and gets it at once */
	tl_fill(msg, sizeof(msg), 34, 0);
	struct iovec v1 = { msg, 8192 };

	assert_int_equal(tp_send(ca[1], &v1, 1), -EAGAIN); /* (waits for the ring it asked for) */
	for (int i = 0; i < 2000 && !ring_ok(ca[1]); i++) {
		tp_mutex_lock(&ca[1]->tx_lock);
		tp_tx_feedback(ca[1]);
		tp_mutex_unlock(&ca[1]->tx_lock);
		usleep(1000);
	}
	assert_true(ring_ok(ca[1]));
	assert_int_equal(pool_free(p.b), 0);
	move_checked(ca[1], cb[1], msg, 8192, 8192, got);
	/* the third: none */
	assert_false(ring_ok(ca[2]));
	assert_false(ring_ok(cb[2]));
	assert_null(ca[2]->in_ring);
	/* writes of 4 KiB: writable, inline alone, no ask */
	assert_true(tp_send_fits(ca[2], 4096, false));
	/* (a set-up that claimed an offer counts the Claim's request: tp_offer.c) */
	uint32_t rq0 = ca[2]->ent->rq;

	tp_conn_stats(ca[2], &st0);
	tl_fill(msg, sizeof(msg), 33, 0);
	move_checked(ca[2], cb[2], msg, 20000, 4096, got);
	tp_conn_stats(ca[2], &st1);
	assert_int_equal(st1.tx_msgs_short + st1.tx_msgs_long, st0.tx_msgs_short + st0.tx_msgs_long);
	assert_true(st1.tx_msgs_inline - st0.tx_msgs_inline >= 20000 / TP_INLINE_MAX);
	assert_int_equal(ca[2]->ent->rq, rq0);
	/* a 16 KiB write asks (RING_REQ) and waits: nothing sent, not writable for it */
	struct iovec v = { msg, 16384 };

	assert_int_equal(tp_send(ca[2], &v, 1), -EAGAIN);
	assert_true(ca[2]->ent->rq != rq0);
	assert_false(tp_send_fits(ca[2], 16384, false));
	/* B's pool refuses it ([RT]: Nack; B's reader or helper answers), asks the idle holders'
	 * rings back after their quantum and grants one */
	uint64_t end = tl_now_ms() + 5000;

	while (!ring_ok(ca[2]) && tl_now_ms() < end) {
		tp_mutex_lock(&ca[2]->tx_lock);
		tp_tx_feedback(ca[2]);
		tp_mutex_unlock(&ca[2]->tx_lock);
		usleep(1000);
	}
	assert_true(ring_ok(ca[2]));
	assert_true(atomic_load_explicit(&p.b->host->pool_refusals, memory_order_relaxed) > 0);
	assert_true(atomic_load_explicit(&p.b->host->pool_yields, memory_order_relaxed) > 0);
	assert_true(tp_send_fits(ca[2], 16384, false));
	tp_conn_stats(ca[2], &st0);
	move_checked(ca[2], cb[2], msg + 20000, 20000, 16384, got);
	tp_conn_stats(ca[2], &st1);
	assert_true(st1.tx_msgs_short + st1.tx_msgs_long > st0.tx_msgs_short + st0.tx_msgs_long);
	for (int i = 0; i < 3; i++) {
		tp_close(ca[i]);
		tp_close(cb[i]);
	}
	/* every ring back in its pool once the connections are released */
	for (int i = 0; i < 3000 && (pool_free(p.a) != 2 || pool_free(p.b) != 2); i++)
		usleep(1000);
	assert_int_equal(pool_free(p.a), 2);
	assert_int_equal(pool_free(p.b), 2);
	tl_pair_close(&p);
}

/* A grant whose shadow cannot be allocated (out of memory) is given back at once, drained as it
 * is, and asked for again later: the ring does not stay held unused by a connection that cannot
 * write into it (with no inline slots, its writes would have stalled for good), and once memory
 * is there again the connection gets a ring and every byte arrives. (The write that asks again
 * comes after the ring is seen back: asked for again at once, it would be granted again before
 * the loop below looked, on a slow machine.) */
static void test_ring_shadow_oom(void **state)
{
	struct tl_pair p;
	static uint8_t msg[40000], got[40000];

	(void)state;
	open_pool(&p, "ringoom", 2);
	/* (the slab's shadows first: no aligned_alloc() would be asked for them) */
	uint8_t *slab_sh[32];
	int slab_n = slab_take_all(p.a, p.a->geom.qsize, slab_sh, 32);

	fail_size = p.a->geom.qsize;
	atomic_store(&fail_allocs, 2); /* (both sides' first grant at set-up) */
	assert_int_equal(tl_pair_connect(&p, 41500, 7000, true), 0);
	struct tp_conn *ca = p.ca, *cb = p.cb;

	/* granted at set-up, but no shadow: not usable, and going back (the feedback, ours or
	 * the helper's timers', gives it back: nothing written into it) */
	assert_false(ring_ok(ca));
	assert_int_equal(atomic_load(&fail_allocs), 0);
	for (int i = 0; i < 3000 && pool_free(p.b) != 2; i++) {
		tp_mutex_lock(&ca->tx_lock);
		tp_tx_feedback(ca);
		tp_mutex_unlock(&ca->tx_lock);
		usleep(1000);
	}
	assert_int_equal(pool_free(p.b), 2); /* the ring came back to B's pool */
	/* memory again: a write past the inline slots asks, is granted, uses it; every byte
	 * exact */
	tl_fill(msg, sizeof(msg), 35, 0);
	struct iovec v = { msg, 16384 };

	assert_int_equal(tp_send(ca, &v, 1), -EAGAIN);
	for (int i = 0; i < 5000 && !ring_ok(ca); i++) {
		tp_mutex_lock(&ca->tx_lock);
		tp_tx_feedback(ca);
		tp_mutex_unlock(&ca->tx_lock);
		usleep(1000);
	}
	assert_true(ring_ok(ca));
	assert_non_null(ca->sh_data);
	assert_int_equal(pool_free(p.b), 1);
	move_checked(ca, cb, msg, sizeof(msg), 16384, got);
	tp_close(ca);
	tp_close(cb);
	for (int i = 0; i < slab_n; i++)
		tp_shadow_put(p.a, slab_sh[i], p.a->geom.qsize, 0, 0); /* (to the slab) */
	tl_pair_close(&p);
}

/* Does the kernel give transparent huge pages on request (madvise(MADV_HUGEPAGE))? */
static bool thp_on_request(void)
{
	char b[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (f) {
		if (!fgets(b, sizeof(b), f))
			b[0] = 0;
		fclose(f);
	}
	return strstr(b, "[always]") || strstr(b, "[madvise]");
}

/* The "THPeligible" of the mapping holding P in /proc/self/smaps (-1: not found). */
static int thp_eligible(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false;
	int r = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		else if (in && sscanf(line, "THPeligible: %d", &r) == 1)
			break;
	}
	fclose(f);
	return r;
}

/* A new process's first shadows come from one 2 MiB block the kernel may back with a huge page
 * (a shadow-paging VM traps at the first touch of each 4 KiB page even after
 * MADV_POPULATE_WRITE: ~0.65 ms per 512 KiB shadow on the test VM), and go back to it when the
 * pool lets them go; the slab once empty, shadows come from the heap. Without huge pages on
 * request, no slab. */
static void test_ring_shadow_slab(void **state)
{
	struct tl_pair p;
	uint8_t *sh[40];
	uint64_t m;

	(void)state;
	open_pool(&p, "ringslab", 2);
	uint32_t q = p.a->geom.qsize; /* (64 KiB: 32 shadows in the slab) */
	/* (the earlier tests' links gave theirs back when they closed: tp_conn_cache_drain()) */
	uint32_t free0 = tp_shadow_slab_free();
	uint8_t *first = tp_shadow_get(p.a, q, &m);

	assert_non_null(first);
	if (!thp_on_request()) {
		assert_int_equal(m, 0); /* a new heap shadow: nothing mapped yet */
		assert_int_equal(tp_shadow_slab_free(), 0); /* from the heap */
		tp_shadow_put(p.a, first, q, m, 0);
		tl_pair_close(&p);
		return;
	}
	uintptr_t base = (uintptr_t)first & ~(uintptr_t)((2u << 20) - 1u);

	/* the slab's: the first of a 2 MiB-aligned block the kernel may back with a huge page */
	assert_int_equal((uintptr_t)first, base);
	assert_int_equal(thp_eligible(first), 1);
	int n = 1 + slab_take_all(p.a, q, sh, 40);

	/* 32 of them in all (the slab made by an earlier test, or now), every one in the one
	 * 2 MiB-aligned block */
	assert_true(free0 == 0 || free0 == 32);
	assert_int_equal(n, 32);
	for (int i = 0; i < n - 1; i++)
		assert_true((uintptr_t)sh[i] >= base && (uintptr_t)sh[i] + q <= base + (2u << 20));
	/* the slab empty: from the heap, to be mapped chunk by chunk */
	uint8_t *heap = tp_shadow_get(p.a, q, &m);

	assert_non_null(heap);
	assert_int_equal(m, 0);
	assert_true((uintptr_t)heap < base || (uintptr_t)heap >= base + (2u << 20));
	/* given back: straight to the slab, nothing written into it (a pool's link in its first
	 * bytes would bring the huge page in for a connection that never used it), its mapped
	 * chunks kept; a heap shadow to the link's pool; a slab shadow is taken before the pool's */
	first[0] = 0x5a;
	tp_shadow_put(p.a, first, q, 0x3, 0);
	assert_int_equal(tp_shadow_slab_free(), 1);
	assert_int_equal(first[0], 0x5a);
	tp_shadow_put(p.a, heap, q, 0, 0);
	assert_int_equal(p.a->sh_pool_n, 1);
	uint8_t *again = tp_shadow_get(p.a, q, &m);

	assert_ptr_equal(again, first);
	assert_int_equal(m, 0x3);
	assert_int_equal(p.a->sh_pool_n, 1);
	/* a shadow of another size: not from the slab */
	uint8_t *other = tp_shadow_get(p.b, 2u * q, &m);

	assert_non_null(other);
	assert_int_equal(m, 0);
	tp_shadow_put(p.b, other, 2u * q, 0, 0);
	tp_shadow_put(p.a, again, q, 0, 0);
	for (int i = 0; i < n - 1; i++)
		tp_shadow_put(p.a, sh[i], q, 0, 0);
	assert_int_equal(tp_shadow_slab_free(), 32);
	tp_conn_cache_drain(p.a);
	tp_conn_cache_drain(p.b);
	assert_int_equal(p.a->sh_pool_n, 0);
	tl_pair_close(&p);
}

/* A ring given back unasked (its sender lost its shadow: the state out_ring_load() leaves on
 * out of memory) while the receiver's connection is idle, off its link's active list, on a link
 * that makes no periodic full pass: the return itself brings the connection back to the
 * helper's pass (the scan compares TX_RING_RET), and the ring is the pool's again. Before, it
 * stayed out of the pool until the sender's next request or the once-a-second full pass.
 * LOST: the link lost the RING_RET write (the receiver's window keeps the word it had, and the
 * doorbell's scan finds nothing changed): the sender's repeat, a scan interval later, rings
 * again. Before, the repeats rang nobody, and only a full pass would have seen them. */
static void returned_to_idle(bool lost)
{
	struct tl_pair p;
	static uint8_t msg[20000], got[20000];
	struct tp_conn *cs[1];
	uint8_t old[8];

	open_pool(&p, lost ? "ringlost" : "ringidle", 2);
	tu_set_sweep(p.b, 0);
	assert_int_equal(tl_pair_connect(&p, 41600, 7000, true), 0);
	struct tp_conn *ca = p.ca, *cb = p.cb;
	size_t ret_at = ca->out.slot_off + TP_W_TX_RING_RET;
	const volatile uint8_t *win_b = ntb_in_window(tp_link_ntb(p.b), NULL);

	assert_true(ring_ok(ca)); /* (granted at set-up) */
	tl_fill(msg, sizeof(msg), 36, 0);
	move_checked(ca, cb, msg, sizeof(msg), 16384, got);
	assert_int_equal(pool_free(p.b), 1);
	cs[0] = cb;
	assert_true(tu_wait_idle(cs, 1, 5000));
	if (lost) /* (B's passes, its scan among them, wait until the word is lost) */
		pthread_mutex_lock(&p.b->conns_lock);
	tp_mutex_lock(&ca->tx_lock); /* (A's timers: no repeat until we let them) */
	for (int i = 0; i < 8; i++)
		old[i] = win_b[ret_at + (size_t)i];
	ca->out_ring_ok = false;
	ca->ent->peer_yield = 1;
	tp_tx_feedback(ca); /* (drained: given back now) */
	assert_int_equal(ca->ent->peer_ring, 0);
	if (lost) {
		assert_int_equal(ntb_write(tp_link_ntb(p.a), ret_at, old, sizeof(old)), 0);
		pthread_mutex_unlock(&p.b->conns_lock);
		usleep(20000); /* (B's pass for the doorbell: nothing changed) */
		assert_int_equal(pool_free(p.b), 1);
	}
	tp_mutex_unlock(&ca->tx_lock);
	for (int i = 0; i < 3000 && pool_free(p.b) != 2; i++)
		usleep(1000);
	assert_int_equal(pool_free(p.b), 2);
	tp_close(ca);
	tp_close(cb);
	tl_pair_close(&p);
}

static void test_ring_returned_to_idle(void **state)
{
	(void)state;
	returned_to_idle(false);
	returned_to_idle(true);
}

/* NCONN senders streaming both ways through pools of 2 rings: every byte exact, every
 * connection's data went through a data ring at some point (rings rotated: asked back,
 * given back, granted to the refused), and no stream starved. */
static void test_ring_rotation_no_starvation(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[NCONN], *cb[NCONN];
	size_t sent[2][NCONN] = { { 0 } }, rcvd[2][NCONN] = { { 0 } };
	const size_t total = 6u << 20;
	static uint8_t buf[65536], want[65536];
	uint64_t end;
	bool done = false;

	(void)state;
	open_pool(&p, "ringrot", 2);
	connect_n(&p, ca, cb, NCONN);
	end = tl_now_ms() + 60000;
	while (!done && tl_now_ms() < end) {
		done = true;
		for (int dir = 0; dir < 2; dir++) {
			for (int i = 0; i < NCONN; i++) {
				struct tp_conn *tx = dir ? cb[i] : ca[i], *rx = dir ? ca[i] : cb[i];
				uint64_t seed = (uint64_t)(dir * 100 + i + 1);

				if (sent[dir][i] < total) {
					size_t n = total - sent[dir][i];

					n = n < 16384 ? n : 16384;
					tl_fill(buf, n, seed, sent[dir][i]);
					struct iovec v = { buf, n };
					ssize_t r = tp_send(tx, &v, 1);

					assert_true(r > 0 || r == -EAGAIN);
					if (r > 0)
						sent[dir][i] += (size_t)r;
				}
				struct iovec v = { buf, sizeof(buf) };
				ssize_t r = tp_recv(rx, &v, 1, 0);

				assert_true(r > 0 || r == -EAGAIN);
				if (r > 0) {
					tl_fill(want, (size_t)r, seed, rcvd[dir][i]);
					assert_memory_equal(buf, want, (size_t)r);
					rcvd[dir][i] += (size_t)r;
				}
				if (rcvd[dir][i] < total)
					done = false;
			}
		}
	}
	for (int dir = 0; dir < 2; dir++)
		for (int i = 0; i < NCONN; i++)
			assert_int_equal(rcvd[dir][i], total);
	for (int i = 0; i < NCONN; i++) {
		struct tp_stats sa, sb;

		tp_conn_stats(ca[i], &sa);
		tp_conn_stats(cb[i], &sb);
		print_message("conn %d: a short %llu long %llu inline %llu; b short %llu long %llu "
			      "inline %llu\n", i, (unsigned long long)sa.tx_msgs_short,
			      (unsigned long long)sa.tx_msgs_long,
			      (unsigned long long)sa.tx_msgs_inline,
			      (unsigned long long)sb.tx_msgs_short,
			      (unsigned long long)sb.tx_msgs_long,
			      (unsigned long long)sb.tx_msgs_inline);
		/* each one's data went through a data ring at some point */
		assert_true(sa.tx_msgs_short + sa.tx_msgs_long > 0);
		assert_true(sb.tx_msgs_short + sb.tx_msgs_long > 0);
	}
	print_message("pools: A grants %llu refusals %llu yields %llu; B grants %llu refusals "
		      "%llu yields %llu\n",
		      (unsigned long long)p.a->host->pool_grants,
		      (unsigned long long)p.a->host->pool_refusals,
		      (unsigned long long)p.a->host->pool_yields,
		      (unsigned long long)p.b->host->pool_grants,
		      (unsigned long long)p.b->host->pool_refusals,
		      (unsigned long long)p.b->host->pool_yields);
	assert_true(p.a->host->pool_yields > 0 && p.b->host->pool_yields > 0);
	for (int i = 0; i < NCONN; i++) {
		tp_close(ca[i]);
		tp_close(cb[i]);
	}
	for (int i = 0; i < 3000 && (pool_free(p.a) != 2 || pool_free(p.b) != 2); i++)
		usleep(1000);
	assert_int_equal(pool_free(p.a), 2);
	assert_int_equal(pool_free(p.b), 2);
	tl_pair_close(&p);
}

/* A message in the granted ring is valid only under the grant's seed: the same bytes written
 * under an earlier generation (a late write into a ring granted again) fail their check. */
static void test_ring_stale_grant_rejected(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[1], *cb[1];
	uint8_t pay[200];
	struct tp_rec r;

	(void)state;
	open_pool(&p, "ringstale", 2);
	connect_n(&p, ca, cb, 1);
	struct tp_conn *rx = cb[0];
	struct tp_host_entry *e = rx->ent;

	assert_non_null(rx->in_ring);
	tl_fill(pay, sizeof(pay), 5, 0);
	for (int k = 0; k < 2; k++) {
		/* k 0: the seed of an earlier grant; k 1: the current one */
		uint32_t gen = k ? e->ring_gen : (uint16_t)(e->ring_gen - 1u) ? e->ring_gen - 1u : 0xffffu;
		uint32_t seed = tp_ring_seed(rx->nonce_in, gen);
		struct tp_desc d = { .type = TP_MT_SHORT, .len = sizeof(pay), .msn = rx->v_msn };
		uint64_t at = (uint64_t)(rx->in_ring - p.b->in) + (rx->v_d & (p.b->geom.qsize - 1));

		d.crc = tp_desc_crc(crc32c(seed, pay, sizeof(pay)), &d);
		assert_int_equal(ntb_write(tp_link_ntb(p.a), at + TP_DESC_SIZE, pay, sizeof(pay)), 0);
		assert_int_equal(ntb_write(tp_link_ntb(p.a), at, &d, sizeof(d)), 0);
		/* TX_D as the sender would publish it (the sender itself sent nothing) */
		tp_out_word(p.a, ca[0]->out.slot_off + TP_W_TX_D, ca[0]->nonce_out,
			    rx->v_d + tp_footprint(TP_MT_SHORT, rx->v_d, sizeof(pay)));
		tp_mutex_lock(&rx->rx_lock);
		enum tp_rx_look look = tp_rx_data(rx, rx->v_msn, &r, true);

		tp_mutex_unlock(&rx->rx_lock);
		assert_int_equal(look, k ? TP_RX_OK : TP_RX_BAD);
	}
	/* (the pair is closed without reading: the crafted TX_D is the sender's no more) */
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tl_pair_close(&p);
}

/* One connection of a sequential client on pair P (client port CPORT): set-up, 10,000 bytes each
 * way through the rings, then a clean end (A's FIN read by B, B's by A) or, with ABORT, a reset
 * by A. Returns, through RA and RB, the rings it held: A's pool's (B's sender) and B's. */
static void one_conn(struct tl_pair *p, uint16_t cport, bool abort_it, uint32_t *ra, uint32_t *rb)
{
	static uint8_t msg[10000], got[10000];

	assert_int_equal(tl_pair_connect(p, cport, 7000, true), 0);
	struct tp_conn *a = p->ca, *b = p->cb;

	*ra = a->ent->ring;
	*rb = b->ent->ring;
	assert_true(*ra != 0 && *rb != 0); /* (set-up grants while the pool has rings) */
	tl_fill(msg, sizeof(msg), cport, 0);
	move_checked(a, b, msg, sizeof(msg), sizeof(msg), got);
	move_checked(b, a, msg, sizeof(msg), sizeof(msg), got);
	if (abort_it) {
		tp_abort(a);
		assert_int_equal(tl_recv_some(b, got, sizeof(got), 3000), -ECONNRESET);
		tp_close(b);
	} else {
		assert_int_equal(tp_shutdown(a, SHUT_WR), 0);
		assert_int_equal(tl_recv_some(b, got, sizeof(got), 3000), 0);
		tp_close(b);
		assert_int_equal(tl_recv_some(a, got, sizeof(got), 3000), 0);
		tp_close(a);
	}
	for (int i = 0; i < 3000 && (pool_free(p->a) != 8 || pool_free(p->b) != 8); i++)
		usleep(1000);
	assert_int_equal(pool_free(p->a), 8);
	assert_int_equal(pool_free(p->b), 8);
}

/* A connection that ended with both FINs gives its rings back on top of the pools: the next
 * connection gets the same ones, whose pages both processes mapped already (a sequential client
 * otherwise went through every ring of the pool, mapping each anew). A reset puts them at the
 * bottom (its peer's sender may still write): the next connection gets others. */
static void test_ring_reused_after_clean_end(void **state)
{
	struct tl_pair p;
	uint32_t ra0, rb0, ra, rb;

	(void)state;
	open_pool(&p, "ringreuse", 8);
	one_conn(&p, 41100, false, &ra0, &rb0);
	for (uint16_t k = 1; k < 4; k++) {
		one_conn(&p, (uint16_t)(41100 + k), false, &ra, &rb);
		assert_int_equal(ra, ra0);
		assert_int_equal(rb, rb0);
	}
	one_conn(&p, 41110, true, &ra, &rb);
	assert_int_equal(ra, ra0);
	assert_int_equal(rb, rb0);
	one_conn(&p, 41111, false, &ra, &rb);
	assert_int_not_equal(ra, ra0);
	assert_int_not_equal(rb, rb0);
	tl_pair_close(&p);
}

int main(void)
{
	if (getenv("TP_DEBUG"))
		log_set_level(LL_DEBUG);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_setup_and_inline_only),
		cmocka_unit_test(test_ring_shadow_oom),
		cmocka_unit_test(test_ring_shadow_slab),
		cmocka_unit_test(test_ring_returned_to_idle),
		cmocka_unit_test(test_ring_rotation_no_starvation),
		cmocka_unit_test(test_ring_stale_grant_rejected),
		cmocka_unit_test(test_ring_reused_after_clean_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
