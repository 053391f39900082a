/* SPDX-License-Identifier: MIT */
/* The connections a pass visits (transport/tp_active.c), on a real link pair with the safety
 * net's full passes off: idle connections leave the active list and are not visited while
 * another connection streams (and `ntbsock stat` shows their fill levels as they are); a lost
 * message of an idle connection is still recovered by the helper alone (quick probes, the
 * idle receiver's Detect answer found by the scan, Retry, retransmission); closing idle
 * connections still releases them, and an idle connection still moves to its kernel socket
 * when the link is taken down; a sender refused a data ring gets one from idle holders. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "tests/unit/tp_unitlib.h"
#include "transport/tp_int.h"
#include "util/log.h"

#define PORT 8090
#define NIDLE 16

static void pair_open(struct tl_pair *p, const char *name)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.contexts = 64;
	tpp.setup_timeout_ms = 1000;
	assert_int_equal(tl_pair_open(p, name, 16u << 20, &tpp, PORT), 0);
	tu_set_sweep(p->a, 0);
	tu_set_sweep(p->b, 0);
}

static void connect_pair(struct tl_pair *p, uint16_t cport, struct tp_conn **ca,
			 struct tp_conn **cb)
{
	assert_int_equal(tl_pair_connect(p, cport, PORT, true), 0);
	*ca = p->ca;
	*cb = p->cb;
}

/* One byte each way (the set-up is answered: no commit repeats are left to run). */
static void exchange_byte(struct tp_conn *ca, struct tp_conn *cb)
{
	uint8_t b = 0x5a, in = 0;
	struct iovec v = { &b, 1 };

	assert_int_equal(tp_send(ca, &v, 1), 1);
	assert_int_equal(tl_recv_some(cb, &in, 1, 3000), 1);
	assert_int_equal(tp_send(cb, &v, 1), 1);
	assert_int_equal(tl_recv_some(ca, &in, 1, 3000), 1);
	assert_int_equal(in, 0x5a);
}

static uint32_t visits(struct tp_conn *c)
{
	pthread_mutex_lock(&c->link->conns_lock);
	uint32_t v = c->act_visits;

	pthread_mutex_unlock(&c->link->conns_lock);
	return v;
}

static uint64_t link_visits(struct tp_link *l)
{
	pthread_mutex_lock(&l->conns_lock);
	uint64_t v = l->act_visits;

	pthread_mutex_unlock(&l->conns_lock);
	return v;
}

/* A's and B's fill levels as `ntbsock stat` reads them (the host table's statistics). */
static void shown_fill(struct tp_conn *c, uint32_t *ret_tx, uint32_t *ret_rx)
{
	struct tp_stats st;

	tp_stats_load(&st, c->st);
	*ret_tx = st.tx_queue_fill;
	*ret_rx = st.rx_queue_fill;
}

struct streamer {
	struct tp_conn *c;
	atomic_bool stop;
	uint64_t sent;
};

/* Small messages with short pauses: the reader sleeps between them, so each one rings. */
static void *stream_main(void *arg)
{
	struct streamer *s = arg;
	uint8_t buf[64];

	memset(buf, 0x33, sizeof(buf));
	while (!atomic_load(&s->stop)) {
		if (tl_send_all(s->c, buf, sizeof(buf)))
			break;
		s->sent += sizeof(buf);
		usleep(300);
	}
	return NULL;
}

/* (a) Idle connections leave the active list and no pass visits them while another connection
 * of the link streams (the passes its doorbells bring visit only that one); their fill levels
 * show what they hold: 0, or the unread message of the one that has one (whose sender stays
 * on the list: it probes the receiver that does not read). */
static void test_idle_not_visited(void **state)
{
	struct tl_pair p;
	struct tp_conn *ia[NIDLE], *ib[NIDLE], *sa, *sb, *all[2 * NIDLE];
	/* (ALL: the idle ones A, B, A, B...; the last A is the unread message's sender) */
	uint32_t va[NIDLE], vb[NIDLE], tx, rx;
	uint8_t msg[40], buf[4096];
	struct iovec v = { msg, sizeof(msg) };

	(void)state;
	pair_open(&p, "actidle");
	for (int i = 0; i < NIDLE; i++) {
		connect_pair(&p, (uint16_t)(41000 + i), &ia[i], &ib[i]);
		exchange_byte(ia[i], ib[i]);
		all[2 * i] = ia[i];
		all[2 * i + 1] = ib[i];
	}
	/* the last one holds an unread message on B (validated by a look: a poll) */
	memset(msg, 7, sizeof(msg));
	assert_int_equal(tp_send(ia[NIDLE - 1], &v, 1), (ssize_t)sizeof(msg));
	for (int i = 0; i < 300 && !(tp_poll(ib[NIDLE - 1]) & TP_EV_IN); i++)
		usleep(1000);
	assert_true(tp_poll(ib[NIDLE - 1]) & TP_EV_IN);
	connect_pair(&p, 42000, &sa, &sb);
	exchange_byte(sa, sb);
	/* (all but the sender of the unread message: its unreleased message is probed, with
	 * back-off, while the receiver does not read, as TimerSendData wants) */
	assert_true(tu_wait_idle(all, 2 * NIDLE - 2, 3000));
	assert_true(tu_wait_idle(&ib[NIDLE - 1], 1, 3000));
	/* A side may settle before its peer's first republication of the feedback reached it:
	 * with it comes the first write of the grant word (a set-up's grant travels in its Ack),
	 * which the scans watch, and the first doorbells bring the idle side back once. A read
	 * that takes its turn publishes at once, and the republication may then come after the
	 * peer settled. The stream's first message rings them; then all settle again, and only
	 * from there on must no pass visit them. */
	memset(buf, 0x33, sizeof(buf));
	assert_int_equal(tl_send_all(sa, buf, sizeof(buf)), 0);
	for (size_t got = 0; got < sizeof(buf);) {
		(void)tp_poll_dir(sb, TP_EV_IN, true);
		ssize_t n = tl_recv_some(sb, buf, sizeof(buf) - got, 3000);

		assert_true(n > 0);
		got += (size_t)n;
	}
	usleep(TP_ACT_SCAN_MS * 3000u);
	assert_true(tu_wait_idle(all, 2 * NIDLE - 2, 3000));
	assert_true(tu_wait_idle(&ib[NIDLE - 1], 1, 3000));
	for (int i = 0; i < NIDLE; i++) {
		va[i] = visits(ia[i]);
		vb[i] = visits(ib[i]);
		shown_fill(ia[i], &tx, &rx);
		/* (an inline message counts its slot: 128 bytes, as tp_conn_stats() says) */
		assert_int_equal(tx, i == NIDLE - 1 ? 128u : 0u);
		assert_int_equal(rx, 0);
		shown_fill(ib[i], &tx, &rx);
		assert_int_equal(tx, 0);
		assert_int_equal(rx, i == NIDLE - 1 ? 128u : 0u);
	}
	uint64_t la = link_visits(p.a), lb = link_visits(p.b);

	struct streamer s = { .c = sa };
	pthread_t t;
	uint64_t got = 0, end = tl_now_ms() + 600;

	assert_int_equal(pthread_create(&t, NULL, stream_main, &s), 0);
	while (tl_now_ms() < end) {
		/* (armed as a poll or epoll reader arms: the stream's doorbells ring the one the
		 * helper sleeps on, and bring its passes; a blocked read alone is woken by the
		 * direct doorbell, without them) */
		(void)tp_poll_dir(sb, TP_EV_IN, true);
		ssize_t n = tl_recv_some(sb, buf, sizeof(buf), 3000);

		assert_true(n > 0);
		got += (uint64_t)n;
	}
	atomic_store(&s.stop, true);
	pthread_join(t, NULL);
	print_message("streamed %llu bytes; passes visited %llu (A) and %llu (B) connections\n",
		      (unsigned long long)got, (unsigned long long)(link_visits(p.a) - la),
		      (unsigned long long)(link_visits(p.b) - lb));
	assert_true(got > 0);
	/* the passes came (the stream's connection was visited), the idle ones stayed out */
	assert_true(link_visits(p.a) - la >= 10);
	assert_true(link_visits(p.b) - lb >= 10);
	for (int i = 0; i < NIDLE - 1; i++) {
		assert_int_equal(visits(ia[i]), va[i]);
		assert_int_equal(visits(ib[i]), vb[i]);
		assert_false(tp_act_on(ia[i]));
		assert_false(tp_act_on(ib[i]));
	}
	/* the unread message's pair: its sender probes on (TimerSendData, backed off: an alive
	 * receiver that does not read), and each probe has the idle receiver visited once to
	 * answer it (the scan) */
	print_message("unread message: sender visited %u times, receiver %u times\n",
		      visits(ia[NIDLE - 1]) - va[NIDLE - 1], visits(ib[NIDLE - 1]) - vb[NIDLE - 1]);
	assert_true(visits(ia[NIDLE - 1]) > va[NIDLE - 1]);
	assert_true(visits(ib[NIDLE - 1]) > vb[NIDLE - 1]);
	/* and the unread message is still there, intact */
	memset(buf, 0, sizeof(msg));
	assert_int_equal(tl_recv_some(ib[NIDLE - 1], buf, sizeof(buf), 3000), (ssize_t)sizeof(msg));
	assert_memory_equal(buf, msg, sizeof(msg));
	/* read: the release makes it active until the pass has published it, then idle with
	 * nothing shown */
	struct tp_conn *last = ib[NIDLE - 1];

	assert_true(tu_wait_idle(&last, 1, 3000));
	shown_fill(last, &tx, &rx);
	assert_int_equal(rx, 0);
	tl_pair_close(&p);
}

/* (b) Both ends idle (off the active list), A sends one message that the link loses (its
 * sequence byte overwritten), and nobody calls into either end again: A's quick probes reach
 * idle B (the scan finds the Detect), B asks for a Retry, A retransmits, and B acknowledges it,
 * all within the usual few milliseconds, without any full pass. */
static void test_lost_message_idle_recovers(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb, *both[2];
	uint8_t a[64], out[64];
	struct iovec va = { a, sizeof(a) };
	struct tp_stats st;

	(void)state;
	pair_open(&p, "actlost");
	connect_pair(&p, 41100, &ca, &cb);
	exchange_byte(ca, cb);
	both[0] = ca;
	both[1] = cb;
	assert_true(tu_wait_idle(both, 2, 3000));
	uint16_t ep = cb->rx_epoch; /* (B's receive side is quiet: nothing changes it) */
	uint32_t vb = visits(cb);

	memset(a, 0x42, sizeof(a));
	uint32_t pos = ca->tx_i;
	size_t at = ca->out.slot_off + TP_SLOT_RINGS + (pos & (ca->out.inline_n - 1)) * 128u +
		    TP_INL_SEQ;
	const volatile uint8_t *win = ntb_in_window(tp_link_ntb(p.b), NULL);

	tp_mutex_lock(&cb->rx_lock); /* (B's helper: not before the loss) */
	assert_int_equal(tp_send(ca, &va, 1), 64);
	/* lost: the slot's sequence byte as if the write never came (a fault of the link) */
	uint8_t stale = (uint8_t)(win[at] ^ 0x80);

	assert_int_equal(ntb_write(tp_link_ntb(p.a), at, &stale, 1), 0);
	tp_mutex_unlock(&cb->rx_lock);
	uint64_t t0 = tl_now_ms(), acked_ms = 0;

	while (tl_now_ms() - t0 < 3000) {
		tp_mutex_lock(&ca->tx_lock);
		bool acked = ca->fb_ack == ca->msn_next;

		tp_mutex_unlock(&ca->tx_lock);
		if (acked) {
			acked_ms = tl_now_ms() - t0;
			break;
		}
		usleep(500);
	}
	tp_conn_stats(ca, &st);
	print_message("lost message acknowledged after %llu ms (retransmits %llu)\n",
		      (unsigned long long)acked_ms, (unsigned long long)st.retransmits);
	assert_true(acked_ms > 0 && acked_ms < 1000);
	assert_true(st.retransmits >= 1);
	assert_int_not_equal(cb->rx_epoch, ep); /* B asked for it (a Retry) */
	assert_true(visits(cb) > vb);           /* (the helper visited idle B: the scan) */
	assert_false(tp_conn_err(ca));
	memset(out, 0, sizeof(out));
	assert_int_equal(tl_recv_some(cb, out, sizeof(out), 3000), 64);
	assert_memory_equal(out, a, sizeof(a));
	tl_pair_close(&p);
}

/* (b') A message idle B's program does not read for longer than TimerSendData: A's probes are
 * answered all along (B idle: the scan finds each Detect), so A counts no error and stays
 * healthy; the message is acknowledged (validated by B's timers for the Detect answer). */
static void test_unread_probes_answered(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb, *both[2];
	uint8_t a[2000], out[2000];
	struct iovec va = { a, sizeof(a) };

	(void)state;
	pair_open(&p, "actunread");
	connect_pair(&p, 41200, &ca, &cb);
	exchange_byte(ca, cb);
	both[0] = ca;
	both[1] = cb;
	assert_true(tu_wait_idle(both, 2, 3000));
	memset(a, 0x17, sizeof(a));
	assert_int_equal(tp_send(ca, &va, 1), (ssize_t)sizeof(a));
	usleep(450 * 1000); /* TimerSendData (100 ms) several times over */
	tp_mutex_lock(&ca->tx_lock);
	uint32_t terr = ca->terr, ack = ca->fb_ack, next = ca->msn_next;
	uint16_t det = ca->detect_seq, det_acked = ca->det_acked;

	tp_mutex_unlock(&ca->tx_lock);
	print_message("after 450 ms unread: terr %u, detects %u (answered %u), acked %d\n", terr,
		      det, det_acked, ack == next);
	assert_true(terr <= 1);
	assert_int_equal(ack, next);
	assert_false(tp_conn_err(ca));
	assert_int_equal(tl_recv_some(cb, out, sizeof(out), 3000), (ssize_t)sizeof(out));
	assert_memory_equal(out, a, sizeof(a));
	tl_pair_close(&p);
}

/* (c) Closing idle connections releases them: their contexts return to both hosts' pools
 * without a full pass. Both ends closed; and one end alone (its FIN acknowledged by the idle
 * peer, which then closes later). */
static void test_close_idle_releases(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb, *both[2];

	(void)state;
	pair_open(&p, "actclose");
	/* (slots free or offered: an offer claimed is made again, tp_offer.c) */
	uint32_t fa = tp_host_free_conns(p.a->host), fb = tp_host_free_conns(p.b->host);

	for (int round = 0; round < 2; round++) {
		connect_pair(&p, (uint16_t)(41300 + round), &ca, &cb);
		exchange_byte(ca, cb);
		both[0] = ca;
		both[1] = cb;
		assert_true(tu_wait_idle(both, 2, 3000));
		tp_close(ca);
		if (round == 0) {
			tp_close(cb);
		} else {
			/* B idle meanwhile: A's FIN is acknowledged by B's timers (its probes) */
			uint64_t end = tl_now_ms() + 3000;
			bool fin = false;

			while (!fin && tl_now_ms() < end) {
				usleep(2000);
				fin = tp_rx_fin_seen(cb);
			}
			assert_true(fin);
			tp_close(cb);
		}
		uint64_t t0 = tl_now_ms();

		/* relaxed loads of the pools' counts: a hint, polled */
		while ((tp_host_free_conns(p.a->host) != fa || tp_host_free_conns(p.b->host) != fb) &&
		       tl_now_ms() - t0 < 5000)
			usleep(2000);
		print_message("round %d: released after %llu ms\n", round,
			      (unsigned long long)(tl_now_ms() - t0));
		assert_int_equal(tp_host_free_conns(p.a->host), fa);
		assert_int_equal(tp_host_free_conns(p.b->host), fb);
	}
	tl_pair_close(&p);
}

/* A link taken down (`ntbsock link down`: a link-level event) moves idle connections to their
 * kernel sockets too (a full pass while it is down). */
static void test_admin_down_moves_idle(void **state)
{
	struct tl_pair p;
	struct ntb_link_params lp;
	struct tp_conn *ca, *cb, *both[2];
	int sv[2];

	(void)state;
	pair_open(&p, "actadmin");
	tu_connect_witnessed(&p, 41400, PORT, &ca, &cb, sv);
	exchange_byte(ca, cb);
	both[0] = ca;
	both[1] = cb;
	assert_true(tu_wait_idle(both, 2, 3000));
	tl_params(&lp, p.path, 0, 16u << 20);
	assert_int_equal(tp_link_admin_set(&lp, true), 0);
	uint64_t t0 = tl_now_ms();

	while ((tp_conn_failover_state(ca) != TP_FO_DONE ||
		tp_conn_failover_state(cb) != TP_FO_DONE) && tl_now_ms() - t0 < 5000)
		usleep(2000);
	assert_int_equal(tp_link_admin_set(&lp, false), 0);
	print_message("moved to the kernel socket after %llu ms\n",
		      (unsigned long long)(tl_now_ms() - t0));
	assert_int_equal(tp_conn_failover_state(ca), TP_FO_DONE);
	assert_int_equal(tp_conn_failover_state(cb), TP_FO_DONE);
	tp_close(ca);
	tp_close(cb);
	close(sv[0]);
	close(sv[1]);
	tl_pair_close(&p);
}

/* A pool of transfer contexts smaller than its senders, every holder idle, full passes off:
 * (e) a sender refused a ring still gets one. B's pool has 2 rings, both held by idle
 * connections (set-up's grant, and one granted to an ask of idle B: the scan finds the request);
 * a third connection's 16 KiB write asks, B refuses it (its timers watch the re-asks, which
 * ring no doorbell), the refusal brings B's idle holders back to be asked back after their
 * quantum, idle A sees the YIELD (the scan finds the grant word), gives the ring back, and B
 * grants it to the refused one: the write goes through a data ring, every byte exact. */
static void move_checked(struct tp_conn *tx, struct tp_conn *rx, const uint8_t *msg, size_t len,
			 uint8_t *got)
{
	for (size_t sent = 0, rcvd = 0; rcvd < len;) {
		if (sent < len) {
			struct iovec v = { (void *)(msg + sent), len - sent };
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

/* Wait (up to MS) until C's sender may write into a data ring; only C's answer is looked at
 * (the feedback, under tx_lock): everything else is the helpers'. */
static bool wait_ring(struct tp_conn *c, int ms)
{
	uint64_t end = tl_now_ms() + (uint64_t)ms;
	bool ok = false;

	while (!ok && tl_now_ms() < end) {
		tp_mutex_lock(&c->tx_lock);
		tp_tx_feedback(c);
		ok = c->out_ring_ok;
		tp_mutex_unlock(&c->tx_lock);
		if (!ok)
			usleep(1000);
	}
	return ok;
}

static void test_refused_gets_idle_holders_ring(void **state)
{
	struct tl_pair p;
	struct tp_params tpp;
	struct tp_conn *ca[3], *cb[3], *all[6];
	struct tp_stats st0, st1;
	static uint8_t msg[16384], got[16384];

	(void)state;
	tp_params_init(&tpp);
	tpp.contexts = 2;
	tpp.queue_size = 64u << 10;
	tpp.setup_timeout_ms = 1000;
	assert_int_equal(tl_pair_open(&p, "actring", 16u << 20, &tpp, PORT), 0);
	tu_set_sweep(p.a, 0);
	tu_set_sweep(p.b, 0);
	for (int i = 0; i < 3; i++) {
		connect_pair(&p, (uint16_t)(41500 + i), &ca[i], &cb[i]);
		all[2 * i] = ca[i];
		all[2 * i + 1] = cb[i];
	}
	assert_true(tu_wait_idle(all, 6, 3000));
	/* set-up: B's pool granted the first one's sender, not the others (a server's reservation
	 * takes a ring only while more than half its pool is free; B's decision: the sender sees
	 * it with the Ack, or at its first look at the feedback after a claimed offer's grant) */
	assert_true(cb[0]->ent->ring != 0);
	assert_true(cb[1]->ent->ring == 0);
	assert_true(cb[2]->ent->ring == 0);
	/* the second asks for B's last ring: idle B answers (its helper's scan of the request) */
	struct iovec v1 = { msg, 8192 };

	tl_fill(msg, sizeof(msg), 71, 0);
	assert_int_equal(tp_send(ca[1], &v1, 1), -EAGAIN); /* (asks, waits for the ring) */
	assert_true(wait_ring(ca[1], 1000));
	move_checked(ca[1], cb[1], msg, 8192, got);
	assert_int_equal(atomic_load_explicit(&p.b->host->pool_free, memory_order_relaxed), 0);
	/* both holders idle again, nobody refused yet */
	assert_true(tu_wait_idle(all, 6, 3000));
	uint64_t refusals = atomic_load_explicit(&p.b->host->pool_refusals, memory_order_relaxed);
	struct iovec v = { msg, sizeof(msg) };
	uint64_t t0 = tl_now_ms();

	assert_int_equal(tp_send(ca[2], &v, 1), -EAGAIN); /* (asks, waits for the ring) */
	bool granted = wait_ring(ca[2], 3000);

	print_message("refused sender granted after %llu ms (refusals %llu, yields %llu)\n",
		      (unsigned long long)(tl_now_ms() - t0),
		      (unsigned long long)(atomic_load_explicit(&p.b->host->pool_refusals,
								memory_order_relaxed) - refusals),
		      (unsigned long long)atomic_load_explicit(&p.b->host->pool_yields,
							       memory_order_relaxed));
	assert_true(granted);
	assert_true(atomic_load_explicit(&p.b->host->pool_refusals, memory_order_relaxed) >
		    refusals);
	assert_true(atomic_load_explicit(&p.b->host->pool_yields, memory_order_relaxed) > 0);
	/* the write goes through the ring */
	tp_conn_stats(ca[2], &st0);
	tl_fill(msg, sizeof(msg), 72, 0);
	move_checked(ca[2], cb[2], msg, sizeof(msg), got);
	tp_conn_stats(ca[2], &st1);
	assert_true(st1.tx_msgs_short + st1.tx_msgs_long > st0.tx_msgs_short + st0.tx_msgs_long);
	/* and when all are idle again, both of B's rings are held or free, none lost */
	assert_true(tu_wait_idle(all, 6, 3000));
	for (int i = 0; i < 3; i++) {
		tp_close(ca[i]);
		tp_close(cb[i]);
	}
	for (int i = 0; i < 3000 &&
	     atomic_load_explicit(&p.b->host->pool_free, memory_order_relaxed) != 2; i++)
		usleep(1000);
	assert_int_equal(atomic_load_explicit(&p.b->host->pool_free, memory_order_relaxed), 2);
	tl_pair_close(&p);
}

int main(void)
{
	if (getenv("TP_DEBUG"))
		log_set_level(LL_DEBUG);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_not_visited),
		cmocka_unit_test(test_lost_message_idle_recovers),
		cmocka_unit_test(test_unread_probes_answered),
		cmocka_unit_test(test_close_idle_releases),
		cmocka_unit_test(test_admin_down_moves_idle),
		cmocka_unit_test(test_refused_gets_idle_holders_ring),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
