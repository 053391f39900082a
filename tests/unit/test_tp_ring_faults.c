/* SPDX-License-Identifier: MIT */
/* Transfer contexts (transport/tp_ring.c) under faults and misuse, from the review of the
 * change (each case failed on the branch before its fix):
 *
 *   lost_yield      a GRANT|YIELD word the link lost is written again (the timers) for an idle
 *                   holder: the refused sender gets the ring
 *   lost_ret        a RING_RET word the link lost is written again by an idle sender for a
 *                   second: the receiver frees the ring
 *   forged_ret      a RING_RET while the receiver holds validated data-ring records does not
 *                   free the ring under them (it stays; nothing lost, no crash)
 *   inline_max_0    inline_max 0 and no ring: the write waits for a ring and is not reported
 *                   writable meanwhile (no spinning writer)
 *   pending_holders set-up grants to connections not accepted yet stay below half the pool, so
 *                   an accepted stream gets one
 *   dead_sender     the ring of a connection whose peer process died (GONE) goes back to the
 *                   pool once what it held was read, while the program keeps the socket open
 *   hold_big_deadlock  a large write that waits for a ring held by another connection's unread
 *                   bytes, which the program reads only after this one, trickles through the
 *                   inline slots after TP_RING_HOLD_MS (kernel TCP's per-socket buffers never
 *                   tie two connections; the wait alone deadlocked)
 * Durations: REVIEW_WAIT_MS (3000).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"
#include "transport/tp_rx_int.h"
#include "util/crc32c.h"
#include "util/log.h"

static void open_pool2(struct tl_pair *p, const char *name, uint32_t rings, uint32_t conns,
		       uint32_t inline_max)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.contexts = rings;
	tpp.connections = conns;
	tpp.queue_size = 64u << 10;
	tpp.inline_max = inline_max;
	assert_int_equal(tl_pair_open(p, name, 16u << 20, &tpp, 7000), 0);
}

static void connect_n(struct tl_pair *p, struct tp_conn **ca, struct tp_conn **cb, int n)
{
	for (int i = 0; i < n; i++) {
		assert_int_equal(tl_pair_connect(p, (uint16_t)(42000 + i), 7000, true), 0);
		ca[i] = p->ca;
		cb[i] = p->cb;
	}
}

/* Stream TX → RX (16 KiB writes, reads as they come) for up to MS or until COND(ARG). */
static size_t pumped; /* bytes pump_until() received */

static bool pump_until(struct tp_conn *tx, struct tp_conn *rx, int ms,
		       bool (*cond)(void *), void *arg)
{
	static uint8_t buf[16384];
	uint64_t end = tl_now_ms() + (uint64_t)ms;

	pumped = 0;
	while (tl_now_ms() < end) {
		if (cond && cond(arg))
			return true;
		struct iovec v = { buf, sizeof(buf) };
		ssize_t r = tp_send(tx, &v, 1);

		assert_true(r > 0 || r == -EAGAIN);
		struct iovec w = { buf, sizeof(buf) };

		r = tp_recv(rx, &w, 1, 0);
		assert_true(r > 0 || r == -EAGAIN);
		if (r > 0)
			pumped += (size_t)r;
		usleep(200);
	}
	return cond && cond(arg);
}

/* The ring state the link's helper thread changes is read here under the locks it takes for
 * it (tp_ring.c): the sender's (out_ring_ok, the entry's peer_ring, peer_yield, ret_gen,
 * rq_open) under the connection's tx_lock, the receiver's (the entry's ring, ring_gen,
 * ring_yield; in_ring, the records) under its rx_lock. */

/* Has receiving connection A asked its ring back (GRANT|YIELD)? */
static bool rx_yield_asked(void *a)
{
	struct tp_conn *c = a;

	tp_mutex_lock(&c->rx_lock);
	bool yield = c->ent->ring_yield != 0;

	tp_mutex_unlock(&c->rx_lock);
	return yield;
}

/* Does sending connection A hold a usable ring? */
static bool conn_has_ring(void *a)
{
	struct tp_conn *c = a;

	tp_mutex_lock(&c->tx_lock);
	bool ok = c->out_ring_ok;

	tp_mutex_unlock(&c->tx_lock);
	return ok;
}

/* Hold the ring state of connection TX → RX (TX's sender side, RX's receiver side) still for
 * a look at it, as above; undone by views_unlock(). */
static void views_lock(struct tp_conn *tx, struct tp_conn *rx)
{
	tp_mutex_lock(&tx->tx_lock);
	tp_mutex_lock(&rx->rx_lock);
}

static void views_unlock(struct tp_conn *tx, struct tp_conn *rx)
{
	tp_mutex_unlock(&rx->rx_lock);
	tp_mutex_unlock(&tx->tx_lock);
}

static uint32_t pool_free(struct tp_link *l)
{
	return atomic_load_explicit(&l->host->pool_free, memory_order_relaxed);
}

#define IDLE_MAX 4000

static int wait_ms(void)
{
	const char *e = getenv("REVIEW_WAIT_MS");

	return e ? atoi(e) : 3000;
}

/* --- lost_yield ---------------------------------------------------------------------------- */

static void test_lost_yield(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[2], *cb[2];

	(void)state;
	open_pool2(&p, "rvyield", 1, 64, TP_INLINE_MAX);
	connect_n(&p, ca, cb, 2);
	assert_true(conn_has_ring(ca[0]));
	assert_false(conn_has_ring(ca[1]));
	/* A's side of conn 0 does not look at its feedback for a moment */
	tp_mutex_lock(&ca[0]->tx_lock);
	assert_true(pump_until(ca[1], cb[1], 5000, rx_yield_asked, cb[0]));
	/* ... in which the GRANT|YIELD word B wrote is lost: A's window keeps the plain grant */
	struct tp_host_entry *eb = cb[0]->ent;

	tp_mutex_lock(&cb[0]->rx_lock);
	tp_out_word(p.b, cb[0]->out.slot_off + TP_W_FB_GRANT, cb[0]->nonce_out,
		    (eb->ring - 1u) | eb->ring_gen << 16);
	tp_mutex_unlock(&cb[0]->rx_lock);
	tp_mutex_unlock(&ca[0]->tx_lock);
	/* conn 1 keeps streaming and asking: it should get the ring within a few quanta */
	bool got = pump_until(ca[1], cb[1], wait_ms(), conn_has_ring, ca[1]);

	print_message("lost_yield: conn1 moved %zu bytes in %d ms\n", pumped, wait_ms());
	views_lock(ca[0], cb[0]);
	print_message("lost_yield: conn1 got a ring: %d; conn0 at A: peer_ring %u yield %u; at B: "
		      "ring %u yield %u; B pool free %u yields %llu refusals %llu\n", got,
		      ca[0]->ent->peer_ring, ca[0]->ent->peer_yield, eb->ring, eb->ring_yield,
		      pool_free(p.b), (unsigned long long)p.b->host->pool_yields,
		      (unsigned long long)p.b->host->pool_refusals);
	views_unlock(ca[0], cb[0]);
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tp_abort(ca[1]);
	tp_abort(cb[1]);
	tl_pair_close(&p);
	assert_true(got);
}

/* --- lost_ret ------------------------------------------------------------------------------ */

static void test_lost_ret(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[2], *cb[2];

	(void)state;
	open_pool2(&p, "rvret", 1, 64, TP_INLINE_MAX);
	connect_n(&p, ca, cb, 2);
	assert_true(conn_has_ring(ca[0]));
	tp_mutex_lock(&ca[0]->tx_lock);
	assert_true(pump_until(ca[1], cb[1], 5000, rx_yield_asked, cb[0]));
	/* B does not look at conn 0's words for a moment; A sees the yield and gives back */
	tp_mutex_lock(&cb[0]->rx_lock);
	tp_mutex_unlock(&ca[0]->tx_lock);
	uint32_t peer_ring = 1;

	for (int i = 0; i < 3000 && peer_ring; i++) {
		tp_mutex_lock(&ca[0]->tx_lock);
		peer_ring = ca[0]->ent->peer_ring;
		tp_mutex_unlock(&ca[0]->tx_lock);
		if (peer_ring)
			usleep(1000);
	}
	assert_int_equal(peer_ring, 0);
	/* ... and the RING_RET word A wrote is lost: B's window keeps what it had (never written) */
	assert_int_equal(ntb_write64(tp_link_ntb(p.a), ca[0]->out.slot_off + TP_W_TX_RING_RET, 0), 0);
	tp_mutex_unlock(&cb[0]->rx_lock);
	bool got = pump_until(ca[1], cb[1], wait_ms(), conn_has_ring, ca[1]);

	print_message("lost_ret: conn1 moved %zu bytes in %d ms\n", pumped, wait_ms());
	views_lock(ca[0], cb[0]);
	print_message("lost_ret: conn1 got a ring: %d; conn0 at A: peer_ring %u ret_gen %u rq_open "
		      "%u; at B: ring %u gen %u yield %u; B pool free %u\n", got,
		      ca[0]->ent->peer_ring, ca[0]->ent->ret_gen, ca[0]->ent->rq_open,
		      cb[0]->ent->ring, cb[0]->ent->ring_gen, cb[0]->ent->ring_yield,
		      pool_free(p.b));
	views_unlock(ca[0], cb[0]);
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tp_abort(ca[1]);
	tp_abort(cb[1]);
	tl_pair_close(&p);
	assert_true(got);
}

/* --- forged_ret ---------------------------------------------------------------------------- */

static void test_forged_ret(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[1], *cb[1];
	static uint8_t buf[65536];
	int status = 0;

	(void)state;
	open_pool2(&p, "rvforge", 2, 64, TP_INLINE_MAX);
	connect_n(&p, ca, cb, 1);
	tl_fill(buf, 20000, 9, 0);
	assert_int_equal(tl_send_all(ca[0], buf, 20000), 0);
	for (int i = 0; i < 2000 && tp_readable_bytes(cb[0]) < 20000; i++)
		usleep(1000);
	assert_int_equal(tp_readable_bytes(cb[0]), 20000); /* validated into records */
	/* a RING_RET of the current generation (a peer that breaks the rule, or a bug there) */
	tp_mutex_lock(&cb[0]->rx_lock);
	uint32_t gen = cb[0]->ent->ring_gen;

	tp_mutex_unlock(&cb[0]->rx_lock);
	tp_out_word(p.a, ca[0]->out.slot_off + TP_W_TX_RING_RET, ca[0]->nonce_out, gen);
	for (int i = 0; i < 2000; i++) {
		tp_mutex_lock(&cb[0]->rx_lock);
		bool in_ring = cb[0]->in_ring != NULL;

		tp_mutex_unlock(&cb[0]->rx_lock);
		if (!in_ring)
			break;
		usleep(1000);
	}
	tp_mutex_lock(&cb[0]->rx_lock);
	print_message("forged_ret: B freed the ring under its records: in_ring %p, records %u, "
		      "pool free %u\n", (void *)cb[0]->in_ring, cb[0]->rec_tail - cb[0]->rec_head,
		      pool_free(p.b));
	tp_mutex_unlock(&cb[0]->rx_lock);
	pid_t pid = fork();

	if (pid == 0) {
		struct iovec v = { buf, sizeof(buf) };

		signal(SIGSEGV, SIG_DFL); /* (cmocka's handler would carry on with the next tests) */
		signal(SIGBUS, SIG_DFL);

		(void)tp_recv(cb[0], &v, 1, 0);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	print_message("forged_ret: reader %s (signal %d)\n",
		      WIFSIGNALED(status) ? "killed" : "exited", WIFSIGNALED(status) ?
		      WTERMSIG(status) : 0);
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tl_pair_close(&p);
	assert_false(WIFSIGNALED(status));
}

/* --- inline_max_0 -------------------------------------------------------------------------- */

static void test_inline_max_zero(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[2], *cb[2];
	static uint8_t buf[30000];
	size_t sent = 0;
	unsigned ready = 0, eagain = 0;

	(void)state;
	open_pool2(&p, "rvinl0", 1, 64, 0);
	connect_n(&p, ca, cb, 2);
	assert_true(conn_has_ring(ca[0]));
	assert_false(conn_has_ring(ca[1]));
	/* conn 0's ring holds bytes its reader does not read yet: it cannot be given back */
	assert_int_equal(tl_send_all(ca[0], buf, 30000), 0);
	uint64_t end = tl_now_ms() + 2000;

	while (tl_now_ms() < end && !sent) {
		struct iovec v = { buf, 1000 };
		ssize_t n = tp_send(ca[1], &v, 1);

		if (n > 0)
			sent += (size_t)n;
		else
			eagain++;
		if (tp_wait(ca[1], TP_EV_OUT, 100) > 0)
			ready++;
	}
	print_message("inline_max_0: conn1 sent %zu bytes in 2 s; EAGAIN %u times while "
		      "tp_wait(OUT) said ready %u times, tp_send_fits %d\n", sent, eagain, ready,
		      tp_send_fits(ca[1], 1000, false));
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tp_abort(ca[1]);
	tp_abort(cb[1]);
	tl_pair_close(&p);
	/* a writer that cannot write must not be told it can (it spins), nor wait for ever */
	assert_true(sent > 0 || ready < 50);
}

/* --- pending_holders ---------------------------------------------------------------------- */

/* Connections the server has not accepted yet (PENDING entries, nobody drives them) took B's
 * rings at set-up; an accepted connection that streams is refused for as long as they wait,
 * though they carry nothing: nobody can ask them back. */
static void test_pending_holders(void **state)
{
	struct tl_pair p;
	struct tp_conn *pa[2], *ca[1], *cb[1];

	(void)state;
	open_pool2(&p, "rvpend", 2, 64, TP_INLINE_MAX);
	for (int i = 0; i < 2; i++) {
		struct tp_key k;
		enum tp_reason why;

		tl_key(&k, (uint16_t)(43000 + i), 7000);
		assert_int_equal(tp_connect(p.a, &k, 5000, &pa[i], &why), 0);
		assert_int_equal(tp_conn_confirm(pa[i]), 0);
	}
	print_message("pending_holders: B's pool free after 2 unaccepted set-ups: %u\n",
		      pool_free(p.b));
	connect_n(&p, ca, cb, 1);
	bool got = pump_until(ca[0], cb[0], wait_ms(), conn_has_ring, ca[0]);

	print_message("pending_holders: the accepted stream moved %zu bytes in %d ms\n", pumped,
		      wait_ms());
	print_message("pending_holders: the accepted stream got a ring: %d (B refusals %llu, yields "
		      "%llu)\n", got, (unsigned long long)p.b->host->pool_refusals,
		      (unsigned long long)p.b->host->pool_yields);
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tp_abort(pa[0]);
	tp_abort(pa[1]);
	tl_pair_close(&p);
	assert_true(got);
}

/* --- dead_sender ---------------------------------------------------------------------------- */

/* The peer process that held B's ring died (its host wrote GONE; it answers nothing now); B's
 * program keeps the socket open (it has not read the end yet, or keeps idle sockets). The ring
 * had nothing in it, yet it stays with the dead connection: refused streams wait for ever. */
static void test_dead_sender(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[2], *cb[2];

	(void)state;
	open_pool2(&p, "rvdead", 1, 64, TP_INLINE_MAX);
	connect_n(&p, ca, cb, 2);
	assert_true(conn_has_ring(ca[0]));
	/* A's side of conn 0 is dead: it never runs again, and A's host says GONE */
	tp_mutex_lock(&ca[0]->tx_lock);
	tp_mutex_lock(&ca[0]->rx_lock);
	tp_write_st(p.a, ca[0]->out.slot_off, ca[0]->news_out, ca[0]->news_slot, ca[0]->nonce_out,
		    TP_ST_GONE);
	bool got = pump_until(ca[1], cb[1], wait_ms(), conn_has_ring, ca[1]);

	print_message("dead_sender: conn1 moved %zu bytes in %d ms\n", pumped, wait_ms());
	tp_mutex_lock(&cb[0]->rx_lock);
	print_message("dead_sender: conn1 got a ring: %d; B's conn0 ring %u yield %u, B sees "
		      "flags %#x\n", got, cb[0]->ent->ring, cb[0]->ent->ring_yield, tp_st_flags(cb[0]));
	tp_mutex_unlock(&cb[0]->rx_lock);
	tp_mutex_unlock(&ca[0]->rx_lock);
	tp_mutex_unlock(&ca[0]->tx_lock);
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tp_abort(ca[1]);
	tp_abort(cb[1]);
	tl_pair_close(&p);
	assert_true(got);
}

/* --- hold_big_deadlock ---------------------------------------------------------------------- */

/* Two connections A → B, B's pool of one ring. A's program writes 30000 bytes on conn 0 (into
 * the ring), then a 20000-byte message on conn 1; B's program reads conn 1's message first, then
 * conn 0 (any request/response framing that reads one socket at a time does this). Kernel TCP
 * (per-socket buffers) and the inline slots (3fa0755) complete; since a9a7b3a conn 1's write
 * waits for a ring that conn 0 can only give back once B reads conn 0: neither moves. */
static void test_hold_big_deadlock(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca[2], *cb[2];
	static uint8_t buf[30000], got[20000];
	size_t sent = 0, rcvd = 0;

	(void)state;
	open_pool2(&p, "rvhold", 1, 64, TP_INLINE_MAX);
	connect_n(&p, ca, cb, 2);
	assert_true(conn_has_ring(ca[0]));
	assert_false(conn_has_ring(ca[1]));
	assert_int_equal(tl_send_all(ca[0], buf, sizeof(buf)), 0);
	uint64_t end = tl_now_ms() + (uint64_t)wait_ms();

	while (tl_now_ms() < end && rcvd < sizeof(got)) {
		if (sent < sizeof(got)) {
			struct iovec v = { buf, sizeof(got) - sent };
			ssize_t n = tp_send(ca[1], &v, 1);

			assert_true(n > 0 || n == -EAGAIN);
			if (n > 0)
				sent += (size_t)n;
		}
		struct iovec w = { got + rcvd, sizeof(got) - rcvd };
		ssize_t n = tp_recv(cb[1], &w, 1, 0);

		assert_true(n > 0 || n == -EAGAIN);
		if (n > 0)
			rcvd += (size_t)n;
		usleep(200);
	}
	tp_mutex_lock(&ca[0]->tx_lock);
	tp_mutex_lock(&ca[1]->tx_lock);
	print_message("hold_big_deadlock: conn1's 20000-byte message: %zu sent, %zu received in %d "
		      "ms (conn0 yield %u, conn1 rq_open %u)\n", sent, rcvd, wait_ms(),
		      ca[0]->ent->peer_yield, ca[1]->ent->rq_open);
	tp_mutex_unlock(&ca[1]->tx_lock);
	tp_mutex_unlock(&ca[0]->tx_lock);
	tp_abort(ca[0]);
	tp_abort(cb[0]);
	tp_abort(ca[1]);
	tp_abort(cb[1]);
	tl_pair_close(&p);
	assert_int_equal(rcvd, sizeof(got));
}

int main(void)
{
	if (getenv("TP_DEBUG"))
		log_set_level(LL_DEBUG);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_yield),
		cmocka_unit_test(test_lost_ret),
		cmocka_unit_test(test_forged_ret),
		cmocka_unit_test(test_inline_max_zero),
		cmocka_unit_test(test_pending_holders),
		cmocka_unit_test(test_dead_sender),
		cmocka_unit_test(test_hold_big_deadlock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
