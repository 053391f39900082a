/* SPDX-License-Identifier: MIT */
/* tp_fast.c. tp_readable_hint(): true for published but unvalidated messages (data ring and
 * inline ring) and for queued records, false when there is nothing, after the reader consumed
 * everything, at end of stream, after shutdown(SHUT_RD), while another thread holds the receive
 * lock, and for a failed connection; the read after a true hint delivers the bytes.
 * tp_send_fits(): true exactly while tp_send() would send the write as one message; with ARM a
 * false answer asks the receiver to ring, and the receiver's release then makes it true.
 * tp_writable_hint(): true only while the cached credits show room for the size, false for
 * sizes it does not judge, a busy lock, shutdown. */
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "ntb/ntb_int.h"
#include "tests/helpers/ev_probe.h"
#include "transport/tp_int.h"
#include "util/clock.h"

static void pair_open(struct tl_pair *p, const char *name, uint16_t cport)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.inline_slots = 64; /* (these cases count on a long inline ring) */
	assert_int_equal(tl_pair_open(p, name, 16u << 20, &tpp, 5000), 0);
	assert_int_equal(tl_pair_connect(p, cport, 5000, true), 0);
}

static void send_bytes(struct tp_conn *c, size_t n, uint64_t seed)
{
	uint8_t buf[4096];

	assert_true(n <= sizeof(buf));
	tl_fill(buf, n, seed, 0);
	assert_int_equal(tl_send_all(c, buf, n), 0);
}

/* Read exactly N bytes without waiting (they were published before) and check them. */
static void recv_bytes(struct tp_conn *c, size_t n, uint64_t seed)
{
	uint8_t buf[4096], want[4096];
	struct iovec v = { buf, sizeof(buf) };

	assert_int_equal(tp_recv(c, &v, 1, 0), (ssize_t)n);
	tl_fill(want, n, seed, 0);
	assert_memory_equal(buf, want, n);
}

/* tp_tx_quick_due_ns(), looked at again while it says 0 (it does too while the helper holds
 * the tx lock): whether a probe is due at all. */
static bool probe_due(struct tp_conn *c)
{
	bool urgent = false;

	for (int i = 0; i < 200; i++) {
		if (tp_tx_quick_due_ns(c, &urgent))
			return true;
		usleep(500);
	}
	return false;
}

static void test_hint_data_ring(void **state)
{
	struct tl_pair p;

	(void)state;
	pair_open(&p, "fast-data", 40001);
	assert_false(tp_readable_hint(p.cb));
	send_bytes(p.ca, 1024, 1); /* > inline_max: a data-ring message */
	assert_true(tp_readable_hint(p.cb));
	assert_int_equal(p.cb->rec_head, p.cb->rec_tail); /* the hint validated nothing */
	assert_true(tp_readable_hint(p.cb)); /* and says so again */
	recv_bytes(p.cb, 1024, 1);
	assert_false(tp_readable_hint(p.cb));
	/* the other direction too */
	assert_false(tp_readable_hint(p.ca));
	send_bytes(p.cb, 3000, 2);
	assert_true(tp_readable_hint(p.ca));
	recv_bytes(p.ca, 3000, 2);
	assert_false(tp_readable_hint(p.ca));
	tl_pair_close(&p);
}

static void test_hint_inline_and_queued(void **state)
{
	struct tl_pair p;

	(void)state;
	pair_open(&p, "fast-inline", 40002);
	send_bytes(p.ca, 10, 3); /* inline */
	assert_true(tp_readable_hint(p.cb));
	recv_bytes(p.cb, 10, 3);
	assert_false(tp_readable_hint(p.cb));
	/* validated by a full poll: queued records count as readable */
	send_bytes(p.ca, 2000, 4);
	assert_true(tp_poll_dir(p.cb, TP_EV_IN, false) & TP_EV_IN);
	assert_true(p.cb->rec_head != p.cb->rec_tail);
	assert_true(tp_readable_hint(p.cb));
	recv_bytes(p.cb, 2000, 4);
	assert_false(tp_readable_hint(p.cb));
	tl_pair_close(&p);
}

static void test_hint_busy_lock(void **state)
{
	struct tl_pair p;

	(void)state;
	pair_open(&p, "fast-lock", 40003);
	send_bytes(p.ca, 1500, 5);
	tp_mutex_lock(&p.cb->rx_lock); /* a reader is at work: no waiting for it */
	assert_false(tp_readable_hint(p.cb));
	tp_mutex_unlock(&p.cb->rx_lock);
	assert_true(tp_readable_hint(p.cb));
	recv_bytes(p.cb, 1500, 5);
	tl_pair_close(&p);
}

static void test_hint_end_of_stream(void **state)
{
	struct tl_pair p;
	uint8_t b[16];
	struct iovec v = { b, sizeof(b) };

	(void)state;
	pair_open(&p, "fast-eof", 40004);
	send_bytes(p.ca, 600, 6);
	assert_int_equal(tp_shutdown(p.ca, SHUT_WR), 0);
	assert_true(tp_readable_hint(p.cb)); /* the data, then the FIN */
	recv_bytes(p.cb, 600, 6);
	/* FIN published, not yet validated: readable (the read returns 0) */
	unsigned ev = tp_poll_dir(p.cb, TP_EV_IN, false);
	assert_true(ev & TP_EV_IN);
	assert_true(ev & TP_EV_RDHUP);
	/* validated: the full poll answers (RDHUP) */
	assert_false(tp_readable_hint(p.cb));
	assert_int_equal(tp_recv(p.cb, &v, 1, 0), 0);
	assert_false(tp_readable_hint(p.cb));
	tl_pair_close(&p);
}

static void test_hint_shut_rd_and_error(void **state)
{
	struct tl_pair p;

	(void)state;
	pair_open(&p, "fast-shut", 40005);
	send_bytes(p.ca, 800, 7);
	assert_true(tp_readable_hint(p.cb));
	assert_int_equal(tp_shutdown(p.cb, SHUT_RD), 0);
	assert_false(tp_readable_hint(p.cb));
	send_bytes(p.cb, 900, 8);
	assert_true(tp_readable_hint(p.ca));
	atomic_store(&p.ca->error, -ECONNRESET); /* as tp_set_error() leaves it */
	assert_false(tp_readable_hint(p.ca));
	assert_true(tp_poll_dir(p.ca, TP_EV_IN, false) & TP_EV_ERR); /* the full poll says why */
	tl_pair_close(&p);
}

static uint64_t msgs_sent(struct tp_conn *c)
{
	struct tp_stats st;

	tp_conn_stats(c, &st);
	return st.tx_msgs_inline + st.tx_msgs_short + st.tx_msgs_long;
}

/* tp_rx_arrivals() changes with every message published (inline, data ring, FIN), validated
 * or not, and never with reading, peeking or polling; tp_rx_arm_arrival() asks the peer to ring
 * (its wait word) although data is unread, and returns the same stamp. */
static void test_arrivals(void **state)
{
	struct tl_pair p;
	uint8_t buf[64];
	struct iovec v = { buf, 4 };
	uint64_t s0, s1, s2;

	(void)state;
	pair_open(&p, "fast-arrivals", 40008);
	s0 = tp_rx_arrivals(p.cb);
	assert_int_equal(tp_rx_arrivals(p.cb), s0);
	send_bytes(p.ca, 10, 1);
	s1 = tp_rx_arrivals(p.cb);
	assert_true(s1 != s0);
	assert_int_equal(tp_recv(p.cb, &v, 1, TP_RECV_PEEK), 4);
	assert_int_equal(tp_recv(p.cb, &v, 1, 0), 4); /* a partial read */
	(void)tp_poll(p.cb);
	assert_int_equal(tp_rx_arrivals(p.cb), s1);
	send_bytes(p.ca, 10, 2); /* while 6 bytes are unread */
	s2 = tp_rx_arrivals(p.cb);
	assert_true(s2 != s1);
	assert_false(p.cb->rx_wait_set);
	assert_int_equal(tp_rx_arm_arrival(p.cb), s2);
	assert_true(p.cb->rx_wait_set);
	send_bytes(p.ca, 1024, 3); /* a data-ring message */
	s1 = tp_rx_arrivals(p.cb);
	assert_true(s1 != s2);
	for (size_t left = 6 + 10 + 1024; left;) {
		uint8_t big[2048];
		struct iovec bv = { big, sizeof(big) };
		ssize_t r = tp_recv(p.cb, &bv, 1, 0);

		assert_true(r > 0 && (size_t)r <= left);
		left -= (size_t)r;
	}
	assert_int_equal(tp_rx_arrivals(p.cb), s1);
	assert_int_equal(tp_shutdown(p.ca, SHUT_WR), 0);
	assert_true(tp_rx_arrivals(p.cb) != s1);
	tl_pair_close(&p);
}

static void test_send_fits(void **state)
{
	struct tl_pair p;
	uint8_t buf[1024];
	struct iovec v = { buf, sizeof(buf) };
	int whole = 0;

	(void)state;
	pair_open(&p, "fast-fits", 40006);
	memset(buf, 0x5a, sizeof(buf));
	/* room at the start; sizes the output hint does not judge */
	assert_true(tp_writable_hint(p.ca, sizeof(buf)));
	assert_false(tp_writable_hint(p.ca, 0));
	assert_false(tp_writable_hint(p.ca, 64u << 10));
	tp_mutex_lock(&p.ca->tx_lock);
	assert_false(tp_writable_hint(p.ca, sizeof(buf))); /* a sender is at work */
	tp_mutex_unlock(&p.ca->tx_lock);
	/* sizes it does not judge */
	assert_true(tp_send_fits(p.ca, 1, false));
	assert_true(tp_send_fits(p.ca, 116, false));
	assert_true(tp_send_fits(p.ca, 64u << 20, false));
	/* fill the data ring with whole 1 KiB messages while it says they fit */
	while (tp_send_fits(p.ca, sizeof(buf), false)) {
		uint64_t m0 = msgs_sent(p.ca);

		assert_int_equal(tp_send(p.ca, &v, 1), (ssize_t)sizeof(buf));
		/* one message each, or (the receiver behind: merging, tp_tx_merge.c) appended whole to
		 * the message held back */
		assert_true(msgs_sent(p.ca) - m0 == 1 ||
			    (msgs_sent(p.ca) == m0 && p.ca->held));
		whole++;
		assert_true(whole < 100000);
	}
	assert_true(whole > 8);
	assert_true(tp_data_room(p.ca, TP_MT_SHORT) < sizeof(buf));
	assert_false(tp_writable_hint(p.ca, sizeof(buf))); /* no room for 1 KiB */
	assert_true(tp_writable_hint(p.ca, 10));           /* the inline ring has some */
	/* what it refuses, tp_send() would have cut (or refused) */
	uint64_t m0 = msgs_sent(p.ca);
	ssize_t r = tp_send(p.ca, &v, 1);
	assert_true(r < (ssize_t)sizeof(buf) || msgs_sent(p.ca) - m0 >= 2);
	assert_false(tp_send_fits(p.ca, sizeof(buf), false));
	assert_int_equal(p.ca->tx_wait_v, 0);
	/* armed: the receiver is asked to ring, and its reads release the space */
	assert_false(tp_send_fits(p.ca, sizeof(buf), true));
	assert_int_equal(p.ca->tx_wait_v, TP_TXW_ROOM);
	uint8_t in[8192];
	struct iovec vi = { in, sizeof(in) };
	while (tp_recv(p.cb, &vi, 1, 0) > 0)
		;
	assert_true(tp_send_fits(p.ca, sizeof(buf), false));
	assert_true(tp_send(p.ca, &v, 1) == (ssize_t)sizeof(buf));
	assert_int_equal(p.ca->tx_wait_v, 0); /* a send clears it */
	assert_true(tp_writable_hint(p.ca, sizeof(buf)));
	/* failed or shut: tp_send() says why */
	assert_int_equal(tp_shutdown(p.ca, SHUT_WR), 0);
	assert_true(tp_send_fits(p.ca, sizeof(buf), false));
	assert_false(tp_writable_hint(p.ca, sizeof(buf)));
	tl_pair_close(&p);
}

/* A full ring whose reader is gone: "fits" (no room will come), and tp_send() says why. */
static void test_send_fits_peer_lost(void **state)
{
	struct tl_pair p;
	uint8_t buf[1024];
	struct iovec v = { buf, sizeof(buf) };

	(void)state;
	pair_open(&p, "fast-lost", 40007);
	memset(buf, 0x33, sizeof(buf));
	for (int i = 0; i < 100000 && tp_send_fits(p.ca, sizeof(buf), false); i++)
		assert_int_equal(tp_send(p.ca, &v, 1), (ssize_t)sizeof(buf));
	assert_false(tp_send_fits(p.ca, sizeof(buf), false));
	tp_abort(p.cb);
	uint64_t end = tl_now_ms() + 5000;
	while (!tp_send_fits(p.ca, sizeof(buf), false) && tl_now_ms() < end)
		usleep(1000);
	assert_true(tp_send_fits(p.ca, sizeof(buf), false));
	ssize_t r = tp_send(p.ca, &v, 1);
	assert_true(r == -ECONNRESET || r == -EPIPE);
	tl_pair_close(&p);
}

/* tp_rx_news_arm(): NULL while anything is to read or arrived unread; for a settled connection
 * its news word, which then changes with each message the peer publishes (inline, data ring,
 * FIN) and with the peer's ST flags (abort), and not with our own sends or reads, and so do its
 * group's word and the link's summary (read before it); RING asks
 * the peer to ring as well. tp_state_gen() changes with a shutdown, after which the connection
 * polls readable (RDHUP too). */
static void test_news(void **state)
{
	struct tl_pair p;
	uint64_t seen, seen2;
	const void *w;

	(void)state;
	struct tp_news_sums ns, ns2;

	assert_true(tp_event_fd() >= 0); /* (an epoll set holds it) */
	pair_open(&p, "fast-news", 40008);
	w = tl_news_settled(p.cb, false, &seen, &ns);
	assert_non_null(w);
	assert_true(tp_news_read(w) == seen);
	/* its summaries: the slot's group and the link's word, unchanged until news */
	assert_ptr_equal(ns.sum, p.cb->link->in + TP_OFF_NEWS_SUM);
	assert_ptr_equal(ns.grp, p.cb->link->in + TP_OFF_NEWS_GRP +
					 8u * (p.cb->slot / TP_NEWS_GRP_SLOTS));
	assert_true(tp_news_read(ns.sum) == ns.sum_seen && tp_news_read(ns.grp) == ns.grp_seen);
	assert_false(p.cb->rx_wait_set); /* (no ring asked) */
	send_bytes(p.cb, 100, 20); /* our own send: no news */
	assert_true(tp_news_read(w) == seen);
	assert_true(tp_news_read(ns.sum) == ns.sum_seen && tp_news_read(ns.grp) == ns.grp_seen);
	/* (nor settled while it is unacknowledged: test_news_detect()) */
	assert_null(tp_rx_news_arm(p.cb, false, &seen2, NULL));
	recv_bytes(p.ca, 100, 20);
	assert_true(tp_news_read(w) == seen); /* (the peer reading: no news) */
	tp_conn_timers(p.ca, tp_now_ms()); /* (its release, lazy, published) */
	send_bytes(p.ca, 100, 21); /* inline */
	assert_true(tp_news_read(w) != seen);
	/* ...and both summaries with it, to a value that names the slot */
	assert_true(tp_news_read(ns.sum) != ns.sum_seen && tp_news_read(ns.grp) != ns.grp_seen);
	assert_true(tp_news_read(ns.sum) == tp_news_read(ns.grp));
	/* written once per message: the sender ringing again for the same message leaves the
	 * summary to whoever wrote it since (X, Y, X again would bring back a value a reader saw
	 * and hide Y's news) */
	uint64_t s1 = tp_news_read(ns.sum);
	uint32_t other = p.cb->slot + 1u;

	tp_news_write(p.ca->link, tp_news_off(p.ca->out.pool_off, other), other, 12345u, 7u, 7u);
	assert_true(tp_news_read(ns.sum) != s1);
	tp_wake_peer(p.ca, TP_W_FB_WAIT);
	assert_true(tp_news_read(ns.sum) != s1);
	assert_null(tp_rx_news_arm(p.cb, false, &seen2, NULL)); /* unread */
	recv_bytes(p.cb, 100, 21);
	assert_true(tp_rx_news_arm(p.cb, false, &seen, &ns) == w);
	send_bytes(p.ca, 1000, 22); /* data ring */
	assert_true(tp_news_read(w) != seen);
	assert_true(tp_news_read(ns.sum) != ns.sum_seen && tp_news_read(ns.grp) != ns.grp_seen);
	recv_bytes(p.cb, 1000, 22);
	assert_true(tp_rx_news_arm(p.cb, true, &seen, &ns2) == w);
	/* (read before the word: what they were when the word was seen) */
	assert_true(tp_news_read(ns2.sum) == ns2.sum_seen && ns2.sum_seen != ns.sum_seen);
	assert_true(p.cb->rx_wait_set); /* RING: the peer rings too (the set's event fd) */
	uint32_t fbw = 0;
	assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &fbw));
	int evs = tp_link_ev_slot(p.cb->link);

	assert_int_equal(fbw, TP_FBW_NEWS | (evs >= 0 ? TP_FBW_EVENT | (uint32_t)evs << TP_FBW_EV_SHIFT :
							 TP_FBW_RING));
	assert_int_equal(tp_shutdown(p.ca, SHUT_WR), 0); /* FIN */
	assert_true(tp_news_read(w) != seen);
	assert_null(tp_rx_news_arm(p.cb, false, &seen, NULL));
	tl_pair_close(&p);

	/* ST flags (an abort) and local state changes */
	pair_open(&p, "fast-news2", 40009);
	w = tl_news_settled(p.cb, false, &seen, NULL);
	assert_non_null(w);
	unsigned gen = tp_state_gen();
	assert_int_equal(tp_shutdown(p.cb, SHUT_RD), 0);
	assert_true(tp_state_gen() != gen);
	assert_null(tp_rx_news_arm(p.cb, false, &seen2, NULL)); /* (shut: not settled) */
	/* (readable, as the kernel's poll says after SHUT_RD: reads return 0) */
	assert_int_equal(tp_poll_dir(p.cb, TP_EV_IN, false) & (TP_EV_IN | TP_EV_RDHUP),
			 TP_EV_IN | TP_EV_RDHUP);
	w = tl_news_settled(p.ca, false, &seen, &ns);
	assert_non_null(w);
	tp_abort(p.cb);
	assert_true(tp_news_read(w) != seen);
	/* (the ST write's news reaches the summaries too) */
	assert_true(tp_news_read(ns.sum) != ns.sum_seen && tp_news_read(ns.grp) != ns.grp_seen);
	assert_null(tp_rx_news_arm(p.ca, false, &seen, NULL));
	tl_pair_close(&p);
}

/* Quick probes and idle epoll entries (preload/pl_epoll_wait.c passes over a settled connection
 * until its news word changes): a connection whose own bytes are unacknowledged is not settled
 * (the looks that arm its quick probes go on), and the Detect of a sender whose message did
 * not come changes the receiver's news word, so that the receiver's thread answers it, not its
 * helper's next pass (up to TP_ACT_SCAN_MS later: an epoll ping-pong under 1 % loss spent
 * ~4.5 ms on one exchange in a thousand). */
static void test_news_detect(void **state)
{
	struct tl_pair p;
	uint64_t seen, seen2;
	const void *w;

	(void)state;
	pair_open(&p, "fast-news3", 40011);
	p.cb->rx_first = false; /* (its first read would publish at once: test_turn_release) */
	send_bytes(p.ca, 100, 30);
	recv_bytes(p.cb, 100, 30);
	assert_true(probe_due(p.ca)); /* (as far as A knows) */
	assert_null(tp_rx_news_arm(p.ca, false, &seen, NULL));
	w = tl_news_settled(p.cb, false, &seen, NULL);
	assert_non_null(w);
	/* A's quick probe, due: its Detect */
	uint16_t det = p.ca->detect_seq;

	p.ca->quick_ns -= tp_quick_base_us(p.ca) * 4000u;
	tp_conn_timers(p.ca, tp_now_ms());
	assert_int_equal((uint16_t)(p.ca->detect_seq - det), 1);
	assert_true(tp_news_read(w) != seen);
	/* B's look answers it (its feedback): then A, its bytes acknowledged, settles */
	assert_int_equal(tp_poll_dir(p.cb, TP_EV_IN, true) & TP_EV_IN, 0);
	assert_non_null(tl_news_settled(p.cb, false, &seen2, NULL));
	tp_conn_timers(p.ca, tp_now_ms());
	assert_false(probe_due(p.ca));
	assert_non_null(tl_news_settled(p.ca, false, &seen, NULL));
	tl_pair_close(&p);
}

/* A sleeper's arming look (tp_poll_dir() with ARM: poll, select, epoll) notes when the next
 * quick probe of its unacknowledged bytes is due (tp_arm_due_take(), to end its kernel sleep
 * then), and a look after that time sends the probe itself: the loss recovery of a poll/epoll
 * sleeper no longer waits for the helper's millisecond clock. */
static void test_arm_due(void **state)
{
	struct tl_pair p;
	uint64_t now, due;

	(void)state;
	pair_open(&p, "fast-armdue", 40012);
	(void)tp_arm_due_take();
	tp_poll_dir(p.ca, TP_EV_IN, true);
	assert_true(tp_arm_due_take() == 0); /* (nothing sent: nothing to probe) */
	now = clock_mono_ns();
	send_bytes(p.ca, 100, 40);
	tp_poll_dir(p.ca, TP_EV_IN, false);
	assert_true(tp_arm_due_take() == 0); /* (a look that does not arm notes nothing) */
	tp_poll_dir(p.ca, TP_EV_IN, true);
	due = tp_arm_due_take();
	/* (the next probe after the send: tp_quick_base_us() << quick_n, quick_n 0 unless this
	 * thread was held up past it and the look sent the first) */
	assert_true(due > now &&
		    due == p.ca->quick_ns + (tp_quick_base_us(p.ca) * 1000u << p.ca->quick_n));
	assert_true(tp_arm_due_take() == 0); /* (taken) */
	/* past it: the arming look sends the probe and notes the next, later one */
	uint16_t det = p.ca->detect_seq;

	/* (the first probe 1.2 x its delay ago, the next at twice it: still ahead) */
	uint64_t base = tp_quick_base_us(p.ca);

	now = clock_mono_ns();
	p.ca->quick_n = 0;
	p.ca->quick_ns = now - base * 1200u;
	tp_poll_dir(p.ca, TP_EV_IN, true);
	assert_int_equal((uint16_t)(p.ca->detect_seq - det), 1);
	due = tp_arm_due_take();
	assert_true(due > now && due <= now + base * 1000u);
	tl_pair_close(&p);
}

/* The long spin of a connection that woke recently (TP_SPIN_ACTIVE_US) stops after
 * TP_SPIN_LOST_MAX waits in a row spun it out for nothing (requests half a millisecond or more
 * apart cost a server 0.3 ms of spinning each); a wait whose bytes were there at once leaves
 * the count. (A wait that ends within TP_SPIN_ACTIVE_US clears it: not asserted, it depends on
 * when another thread's bytes come.) */
static void test_spin_lost(void **state)
{
	struct tl_pair p;

	(void)state;
	pair_open(&p, "fast-spinlost", 40013);
	assert_int_equal(atomic_load(&p.cb->spin_lost), 0);
	for (unsigned i = 1; i <= TP_SPIN_LOST_MAX + 1; i++) {
		assert_int_equal(tp_wait(p.cb, TP_EV_IN, 2), 0); /* (nothing comes) */
		assert_int_equal(atomic_load(&p.cb->spin_lost),
				 i < TP_SPIN_LOST_MAX ? i : TP_SPIN_LOST_MAX);
	}
	send_bytes(p.ca, 10, 50);
	assert_int_equal(tp_wait(p.cb, TP_EV_IN, 1000) & TP_EV_IN, TP_EV_IN);
	recv_bytes(p.cb, 10, 50);
	/* (readable at once: the counter stays) */
	assert_int_equal(tp_wait(p.cb, TP_EV_IN, 2), 0);
	assert_int_equal(atomic_load(&p.cb->spin_lost), TP_SPIN_LOST_MAX);
	tl_pair_close(&p);
}

/* A read that catches up publishes its release at once when the connection takes turns (it sent
 * since its last such read: a request answered, an answer read) and its last publication is
 * TP_TURN_TICKS old, so that the peer's quick probe of what it sent finds it acknowledged
 * instead of sending a Detect; also when the read that catches up comes after one that found
 * nothing (a blocking read's first try). A fast exchange (a publication just now) and a
 * one-way stream's reader keep the lazy release. And a sleeper's look for its next probe reads
 * the feedback first (tp_tx_quick_due_ns()): no probe is due for bytes the peer acknowledged. */
/* (the receive side's state under rx_lock: the helper's timers may publish meanwhile) */
static void set_pub_tick(struct tp_conn *c, uint64_t t)
{
	tp_mutex_lock(&c->rx_lock);
	c->pub_tick = t;
	tp_mutex_unlock(&c->rx_lock);
}

static void age_pub(struct tl_pair *p)
{
	set_pub_tick(p->ca, clock_ticks() - 2u * TP_TURN_TICKS);
	set_pub_tick(p->cb, clock_ticks() - 2u * TP_TURN_TICKS);
}

/* (a publication "just now" however long the test takes: a stamp ahead of the clock) */
static void fresh_pub(struct tl_pair *p)
{
	set_pub_tick(p->ca, clock_ticks() + (1ull << 50));
	set_pub_tick(p->cb, clock_ticks() + (1ull << 50));
}

/* How far C's published acknowledgement is behind what it validated (0: all published), and
 * whether the space it consumed is published too (*SPACE). */
static uint32_t ack_behind(struct tp_conn *c, bool *space)
{
	tp_mutex_lock(&c->rx_lock);
	uint32_t d = c->v_msn - c->pub_ack;

	if (space)
		*space = c->pub_i == c->c_i && c->pub_d == c->c_d;
	tp_mutex_unlock(&c->rx_lock);
	return d;
}

static void test_turn_release(void **state)
{
	struct tl_pair p;
	uint8_t buf[64];
	struct iovec v = { buf, sizeof(buf) };

	(void)state;
	pair_open(&p, "fast-turn", 40014);
	/* a fresh connection's first read that catches up publishes at once, whatever came
	 * before it (a server's first request: its answer and the client's close then find it
	 * acknowledged, tp_conn_new()) */
	fresh_pub(&p);
	send_bytes(p.ca, 100, 59);
	recv_bytes(p.cb, 100, 59);
	bool space = false;

	assert_int_equal(ack_behind(p.cb, &space), 0);
	/* (the space handed back: only the read's release publishes it, not an answer to a
	 * Detect of A's that a slow run let come first) */
	assert_true(space);
	tp_mutex_lock(&p.cb->rx_lock);
	assert_false(p.cb->rx_first);
	tp_mutex_unlock(&p.cb->rx_lock);
	age_pub(&p);
	/* B has sent nothing since: the lazy release */
	send_bytes(p.ca, 100, 60);
	recv_bytes(p.cb, 100, 60);
	assert_true(ack_behind(p.cb, NULL) != 0);
	assert_true(probe_due(p.ca));
	/* B answers: its send publishes no release; A reads the answer: its turn */
	send_bytes(p.cb, 100, 61);
	assert_true(ack_behind(p.cb, NULL) != 0);
	assert_true(probe_due(p.ca));
	recv_bytes(p.ca, 100, 61);
	assert_int_equal(ack_behind(p.ca, NULL), 0);
	assert_false(probe_due(p.cb)); /* B's answer acknowledged */
	/* A's next request, read first without its answer (EAGAIN), then with it */
	age_pub(&p);
	send_bytes(p.ca, 100, 62);
	assert_int_equal(tp_recv(p.ca, &v, 1, 0), -EAGAIN);
	recv_bytes(p.cb, 100, 62);
	assert_int_equal(ack_behind(p.cb, NULL), 0); /* B answered before: its turn */
	assert_false(probe_due(p.ca));
	send_bytes(p.cb, 100, 63);
	recv_bytes(p.ca, 100, 63); /* (the turn noted by the read that found nothing) */
	assert_int_equal(ack_behind(p.ca, NULL), 0);
	assert_false(probe_due(p.cb));
	/* a fast exchange: the publications just made hold the next turns back */
	fresh_pub(&p);
	send_bytes(p.ca, 100, 64);
	recv_bytes(p.cb, 100, 64);
	send_bytes(p.cb, 100, 65);
	recv_bytes(p.ca, 100, 65);
	assert_true(ack_behind(p.ca, NULL) != 0);
	assert_true(ack_behind(p.cb, NULL) != 0);
	/* a one-way stream from A: B reads each message, publishes at most at its first */
	age_pub(&p);
	for (unsigned i = 0; i < 4; i++) {
		send_bytes(p.ca, 100, 66 + i);
		recv_bytes(p.cb, 100, 66 + i);
	}
	assert_true(ack_behind(p.cb, NULL) >= 3);
	tl_pair_close(&p);
}

struct waiter {
	struct tp_conn *c;
	int rc;
};

static void *wait_in(void *arg)
{
	struct waiter *w = arg;

	w->rc = tp_wait(w->c, TP_EV_IN | TP_EV_ERR | TP_EV_HUP, 10000);
	return NULL;
}

/* A thread asleep in tp_wait() for input asks for a wake of its connection's NEWS word
 * (FB_WAIT's TP_FBW_WORD), and the sender's message rewrites that word and wakes it, moving
 * neither the doorbell the helper thread sleeps on (but for a Detect of the sender's) nor the
 * direct doorbell every reader of the side sleeps on; the reader wakes with the bytes, within
 * its 50 ms sleep (a wake it missed would end none of three before its slice), and takes the
 * request back. Against a peer that does not advertise NTB_CAP_WORD_WAKE (one that predates
 * it), the reader asks for the direct doorbell (TP_FBW_DIRECT), which the message rings. A look
 * that arms for a poll or epoll sleeper (tp_poll_dir()) asks for its event fd (TP_FBW_EVENT:
 * test_event_wake()). */
static void test_direct_wake(void **state)
{
	struct tl_pair p;
	uint64_t fastest = UINT64_MAX;

	(void)state;
	pair_open(&p, "fast-direct", 40015);
	assert_true(ntb_db_direct_ok(p.cb->link->ntb));
	assert_true(ntb_word_wake_ok(p.cb->link->ntb));
	uint64_t news = tp_news_off(p.cb->link->geom.pool_off, p.cb->slot);

	assert_true(news != 0);
	for (unsigned k = 0; k < 4; k++) {
		struct waiter w = { .c = p.cb };
		pthread_t t;
		uint32_t v = 0, ask = k < 3 ? TP_FBW_WORD : TP_FBW_DIRECT;

		if (k == 3) /* (A's side as one that predates the word wake) */
			atomic_fetch_and_explicit(&p.ca->link->ntb->ctrl_out->caps.v,
						  ~NTB_CAP_WORD_WAKE, memory_order_relaxed);
		assert_int_equal(ntb_word_wake_ok(p.cb->link->ntb), k < 3);
		assert_int_equal(pthread_create(&t, NULL, wait_in, &w), 0);
		for (int i = 0; i < 5000; i++) {
			if (tp_slot_word(p.ca, TP_W_FB_WAIT, &v) && (v & ask))
				break;
			usleep(1000);
		}
		assert_int_equal(v & (TP_FBW_DIRECT | TP_FBW_RING | TP_FBW_WORD), ask);
		usleep(20000); /* (asleep by now: its spin is 300 µs at most) */
		uint32_t db = ntb_db_read(p.cb->link->ntb);
		uint32_t dd = ntb_db_direct_read(p.cb->link->ntb);
		uint32_t nw = ntb_word_read(p.cb->link->ntb, news + TP_NEWS_FUTEX);
		uint16_t det = p.ca->detect_seq;
		uint64_t t0 = clock_mono_ns();

		send_bytes(p.ca, 100, 70 + k);
		pthread_join(t, NULL);
		uint64_t took = clock_mono_ns() - t0;

		fastest = took < fastest ? took : fastest;
		assert_int_equal(w.rc & TP_EV_IN, TP_EV_IN);
		if (k < 3) {
			assert_int_not_equal(ntb_word_read(p.cb->link->ntb, news + TP_NEWS_FUTEX), nw);
			assert_int_equal(ntb_db_direct_read(p.cb->link->ntb), dd);
		} else {
			assert_int_not_equal(ntb_db_direct_read(p.cb->link->ntb), dd);
		}
		assert_true(ntb_db_read(p.cb->link->ntb) == db || p.ca->detect_seq != det);
		assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &v));
		assert_int_equal(v & (TP_FBW_DIRECT | TP_FBW_RING | TP_FBW_WORD), 0);
		recv_bytes(p.cb, 100, 70 + k);
	}
	assert_true(fastest < 25000000u);
	/* a poll's arming look: the doorbell */
	uint32_t v = 0;

	assert_true(tp_event_fd() >= 0);
	assert_int_equal(tp_poll_dir(p.cb, TP_EV_IN, true) & TP_EV_IN, 0);
	assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &v));
	assert_int_equal(v & (TP_FBW_DIRECT | TP_FBW_RING | TP_FBW_EVENT),
			 tp_link_ev_slot(p.cb->link) >= 0 ? TP_FBW_EVENT : TP_FBW_RING);
	/* and a reader that sleeps in tp_wait() after it: the doorbell, which wakes both */
	struct waiter w = { .c = p.cb };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, wait_in, &w), 0);
	for (int i = 0; i < 5000; i++) {
		if (tp_slot_word(p.ca, TP_W_FB_WAIT, &v) && (v & TP_FBW_RING))
			break;
		usleep(1000);
	}
	assert_int_equal(v & (TP_FBW_DIRECT | TP_FBW_RING | TP_FBW_EVENT), TP_FBW_RING);
	send_bytes(p.ca, 100, 80);
	pthread_join(t, NULL);
	assert_int_equal(w.rc & TP_EV_IN, TP_EV_IN);
	recv_bytes(p.cb, 100, 80);
	tl_pair_close(&p);
}

/* Voluntary context switches of thread TID of this process so far (-1: not read). */
static long vol_switches(pid_t tid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

struct herd_reader {
	struct tp_conn *c;
	unsigned n;
	_Atomic unsigned got;
	_Atomic pid_t tid;
	int rc;
};

/* Wait for input (tp_wait()) and read one byte, N times (or until a wait or read fails: RC). */
static void *herd_read(void *arg)
{
	struct herd_reader *r = arg;
	uint8_t b;
	struct iovec v = { &b, 1 };

	atomic_store(&r->tid, (pid_t)syscall(SYS_gettid));
	for (unsigned i = 0; i < r->n; i++) {
		int ev = tp_wait(r->c, TP_EV_IN | TP_EV_ERR | TP_EV_HUP, 10000);

		if (!(ev & TP_EV_IN) || tp_recv(r->c, &v, 1, 0) != 1 || b != (uint8_t)i) {
			r->rc = -1;
			return NULL;
		}
		atomic_store(&r->got, i + 1);
	}
	return NULL;
}

/* Until FB_WAIT on C's peer asks for a wake of one of BITS (5 s at most): the reader is about
 * to sleep. */
static bool fb_wait_asks(struct tp_conn *c, uint32_t bits)
{
	uint32_t v;

	for (int i = 0; i < 500000; i++) {
		if (tp_slot_word(c, TP_W_FB_WAIT, &v) && (v & bits))
			return true;
		usleep(10);
	}
	return false;
}

/* The word wake wakes one connection's reader alone: a thread blocked in tp_wait() on one
 * connection sleeps on while another thread reads 200 messages on a second connection of the
 * same link, each sent while that reader slept (its wake asked for). With the direct doorbell,
 * which every reader of the side sleeps on, each message woke both (a JVM's 16 threads each
 * blocked on its own connection: ~20 wake-ups per connection). The idle reader may wake for
 * its 50 ms slices alone (counted with a margin, for a slow sanitizer run), and still wakes
 * for its own connection's message. */
static void test_word_wake_alone(void **state)
{
	struct tl_pair p;
	struct herd_reader idle = { .n = 1 }, busy = { .n = 200 };
	pthread_t ti, tb;

	(void)state;
	pair_open(&p, "fast-herd", 40016);
	idle.c = p.cb;
	struct tp_conn *ca1 = p.ca;

	assert_int_equal(tl_pair_connect(&p, 40017, 5000, true), 0);
	busy.c = p.cb;
	assert_true(ntb_word_wake_ok(p.cb->link->ntb));
	assert_int_equal(pthread_create(&ti, NULL, herd_read, &idle), 0);
	assert_true(fb_wait_asks(ca1, TP_FBW_WORD | TP_FBW_DIRECT));
	usleep(20000); /* (asleep by now: its spin is 300 µs at most) */
	long sw0 = vol_switches(atomic_load(&idle.tid));
	uint64_t t0 = clock_mono_ns();

	assert_true(sw0 >= 0);
	assert_int_equal(pthread_create(&tb, NULL, herd_read, &busy), 0);
	for (unsigned i = 0; i < busy.n; i++) {
		uint8_t b = (uint8_t)i;

		assert_true(fb_wait_asks(p.ca, TP_FBW_WORD | TP_FBW_DIRECT));
		assert_int_equal(tl_send_all(p.ca, &b, 1), 0);
		for (int k = 0; k < 500000 && atomic_load(&busy.got) <= i && !busy.rc; k++)
			usleep(10);
		assert_int_equal(busy.rc, 0);
		assert_int_equal(atomic_load(&busy.got), i + 1);
	}
	pthread_join(tb, NULL);
	long woke = vol_switches(atomic_load(&idle.tid)) - sw0;
	uint64_t ms = (clock_mono_ns() - t0) / 1000000u;

	/* its slices: one per 50 ms, doubled, and a few */
	assert_true(woke >= 0);
	if (woke > 5 + (long)(ms / 25u))
		fail_msg("the idle reader woke %ld times in %llu ms for 200 messages on another "
			 "connection", woke, (unsigned long long)ms);
	/* and for its own */
	uint8_t b = 0;

	assert_int_equal(atomic_load(&idle.got), 0);
	assert_int_equal(tl_send_all(ca1, &b, 1), 0);
	pthread_join(ti, NULL);
	assert_int_equal(idle.rc, 0);
	assert_int_equal(atomic_load(&idle.got), 1);
	tl_pair_close(&p);
}

/* Send a 0 byte from P's side A 5 ms on (the reader R, thread T, asleep by then) and join T: R
 * got it, within 20 ms of the send (a missed wake ends only with its 50 ms slice). */
static void wake_within(struct tl_pair *p, struct herd_reader *r, pthread_t t)
{
	uint8_t b = 0;
	uint64_t t0;

	usleep(5000);
	t0 = clock_mono_ns();
	assert_int_equal(tl_send_all(p->ca, &b, 1), 0);
	pthread_join(t, NULL);
	uint64_t took = clock_mono_ns() - t0;

	assert_int_equal(r->rc, 0);
	assert_int_equal(atomic_load(&r->got), 1);
	if (took > 20000000u)
		fail_msg("the reader woke %llu us after the message", (unsigned long long)(took / 1000u));
}

/* Two readers asleep on one connection's word: the one whose wait times out leaves the request
 * to the other (the last to leave takes it back), which then wakes for the message at once, not
 * at the end of its 50 ms slice. */
static void test_word_wake_two_readers(void **state)
{
	struct tl_pair p;
	struct herd_reader stay = { .n = 1 };
	pthread_t ts;
	uint32_t v = 0;

	(void)state;
	pair_open(&p, "fast-two", 40018);
	stay.c = p.cb;
	assert_int_equal(pthread_create(&ts, NULL, herd_read, &stay), 0);
	assert_true(fb_wait_asks(p.ca, TP_FBW_WORD));
	/* a second reader, 30 ms */
	assert_int_equal(tp_wait(p.cb, TP_EV_IN | TP_EV_ERR | TP_EV_HUP, 30) & TP_EV_IN, 0);
	assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &v));
	assert_int_equal(v & TP_FBW_WORD, TP_FBW_WORD);
	wake_within(&p, &stay, ts);
	/* the last reader gone with its data: nothing asked for any more */
	assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &v));
	assert_int_equal(v & (TP_FBW_WORD | TP_FBW_DIRECT | TP_FBW_RING), 0);
	tl_pair_close(&p);
}

/* The futex compares a NEWS word's check, not its value: a value left in the word by the slot's
 * previous connection (another seed) equal to the one the next message writes (a message number,
 * which starts at 0 again) still wakes the sleeper, at once rather than at its slice's end. */
static void test_word_wake_stale_value(void **state)
{
	struct tl_pair p;
	struct herd_reader r = { .n = 1 };
	pthread_t t;

	(void)state;
	pair_open(&p, "fast-stale", 40019);
	/* (the value the next message writes: its sequence number + 1, under another seed) */
	tp_mutex_lock(&p.ca->tx_lock);
	tp_out_word(p.ca->link, p.ca->news_out, p.ca->nonce_out ^ 0x5a5a5a5au, p.ca->msn_next + 1u);
	tp_mutex_unlock(&p.ca->tx_lock);
	r.c = p.cb;
	assert_int_equal(pthread_create(&t, NULL, herd_read, &r), 0);
	assert_true(fb_wait_asks(p.ca, TP_FBW_WORD));
	wake_within(&p, &r, t);
	tl_pair_close(&p);
}

/* The word wake on a link with the speed model (link.speed: its writes go through a call, into
 * the same mapping): the sender still wakes the word (a fallback to the direct doorbell, which
 * the word's sleeper does not wait on, left it asleep until its slice ended). */
static void test_word_wake_speed(void **state)
{
	struct tl_pair p;
	struct tp_params tpp;
	pthread_t t;

	(void)state;
	memset(&p, 0, sizeof(p));
	tp_params_init(&tpp);
	snprintf(p.path, sizeof(p.path), "/dev/shm/ntbsock-test-fast-speed-%d", getpid());
	tl_unlink(p.path);
	for (int side = 0; side < 2; side++) {
		struct ntb_link_params lp;

		tl_params(&lp, p.path, side, 16u << 20);
		lp.speed.latency_ns = 1000;
		assert_int_equal(tp_link_open(&lp, &tpp, side ? &p.b : &p.a), 0);
	}
	assert_int_equal(tp_listen(p.b, 5000), 0);
	assert_int_equal(tl_wait_listen(p.a, 5000, 5000), 0);
	for (int i = 0; i < 5000 && !(tp_link_is_up(p.a) && tp_link_is_up(p.b)); i++)
		usleep(1000);
	assert_int_equal(tl_pair_connect(&p, 40020, 5000, true), 0);
	assert_non_null(p.a->ntb->speed);
	for (unsigned k = 0; k < 3; k++) {
		struct herd_reader r = { .c = p.cb, .n = 1 };

		assert_int_equal(pthread_create(&t, NULL, herd_read, &r), 0);
		assert_true(fb_wait_asks(p.ca, TP_FBW_WORD));
		wake_within(&p, &r, t);
	}
	tl_pair_close(&p);
}

/* A sleeper on the process's event fd (poll, epoll: a look that arms, tp_poll_dir()) asks for
 * its event fd (FB_WAIT's TP_FBW_EVENT, with the claim slot its process published it under),
 * and the sender's message writes that eventfd itself (ntb_peer_event_ring()): the event fd
 * turns readable and the doorbell, which the helper thread sleeps on, does not move (but for a
 * Detect of the sender's). The read takes the request back. A publication that names another
 * file gets the doorbell instead. */
static void test_event_wake(void **state)
{
	struct tl_pair p;
	int efd = tp_event_fd();
	uint32_t v = 0;

	(void)state;
	if (!ev_probe())
		skip(); /* (pidfd_getfd refused, or no eventfd-id: the doorbell only) */
	assert_true(efd >= 0);
	pair_open(&p, "fast-event", 40016);
	int slot = tp_link_ev_slot(p.cb->link);

	assert_true(slot >= 0);
	for (unsigned k = 0; k < 3; k++) {
		tp_event_ack();
		assert_int_equal(tp_poll_dir(p.cb, TP_EV_IN, true) & TP_EV_IN, 0);
		assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &v));
		assert_int_equal(v & (TP_FBW_DIRECT | TP_FBW_RING | TP_FBW_EVENT), TP_FBW_EVENT);
		assert_int_equal(v >> TP_FBW_EV_SHIFT & 0xffu, (unsigned)slot);
		uint32_t db = ntb_db_read(p.cb->link->ntb);
		uint16_t det = p.ca->detect_seq;
		struct pollfd pf = { .fd = efd, .events = POLLIN };

		send_bytes(p.ca, 100, 90 + k);
		assert_int_equal(poll(&pf, 1, 10000), 1);
		assert_true(ntb_db_read(p.cb->link->ntb) == db || p.ca->detect_seq != det);
		recv_bytes(p.cb, 100, 90 + k);
		assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &v));
		assert_int_equal(v & (TP_FBW_RING | TP_FBW_EVENT), 0);
	}
	/* the publication spoilt (an id that is not the event fd's): the doorbell */
	struct ntb_link *nb = p.cb->link->ntb;

	atomic_fetch_add(&nb->ctrl_out->ev_id[slot], 1000u);
	tp_event_ack();
	assert_int_equal(tp_poll_dir(p.cb, TP_EV_IN, true) & TP_EV_IN, 0);
	uint32_t db = ntb_db_read(nb);

	send_bytes(p.ca, 100, 95);
	assert_int_not_equal(ntb_db_read(nb), db);
	recv_bytes(p.cb, 100, 95);
	atomic_fetch_sub(&nb->ctrl_out->ev_id[slot], 1000u);
	tl_pair_close(&p);
}

/* The event doorbell between two processes: a forked child (its own pid, its own claim slot on
 * side 0) writes this process's event fd, taken from here with pidfd_getfd() after the checks
 * of its start time and the eventfd-id in /proc/PID/fdinfo; the doorbell does not move (but
 * for a Detect of the child's). */
static void test_event_wake_child(void **state)
{
	char path[96];
	int go[2], done[2];
	char b = 0;

	(void)state;
	if (!ev_probe())
		skip();
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-fast-evc-%d", getpid());
	tl_unlink(path);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* (side 1 is opened after the fork: the child holds side 0 alone) */
		struct tp_link *l;
		struct tp_conn *c;
		struct tp_key k;
		enum tp_reason why;
		uint8_t buf[100];

		close(go[1]); /* (a parent that fails ends the child's reads) */
		close(done[1]);
		if (tl_open(path, 0, 16u << 20, NULL, &l) || tl_wait_listen(l, 6020, 5000))
			_exit(2);
		tl_key(&k, 1000, 6020);
		if (tp_connect(l, &k, 5000, &c, &why))
			_exit(3);
		for (int i = 0; i < 2; i++) {
			if (read(go[0], &b, 1) != 1)
				_exit(4);
			tl_fill(buf, sizeof(buf), 100u + (unsigned)i, 0);
			if (tl_send_all(c, buf, sizeof(buf)))
				_exit(5);
		}
		if (read(done[0], &b, 1) != 1)
			_exit(6);
		tp_close(c);
		tp_link_close(l);
		_exit(0);
	}
	struct tp_link *l;
	struct tp_conn *c = NULL;
	struct tp_key k;
	int efd = tp_event_fd();

	close(go[0]);
	close(done[0]);

	assert_true(efd >= 0);
	assert_int_equal(tl_open(path, 1, 16u << 20, NULL, &l), 0);
	assert_int_equal(tp_listen(l, 6020), 0);
	tl_key(&k, 1000, 6020);
	for (int i = 0; i < 5000 && tp_attach(l, &k, &c); i++)
		usleep(1000);
	assert_non_null(c);
	int slot = tp_link_ev_slot(l);

	assert_true(slot >= 0);
	for (unsigned i = 0; i < 2; i++) {
		uint32_t ep0 = 0, ep1 = 0;
		struct pollfd pf = { .fd = efd, .events = POLLIN };

		tp_event_ack();
		assert_int_equal(tp_poll_dir(c, TP_EV_IN, true) & TP_EV_IN, 0);
		uint32_t db = ntb_db_read(l->ntb);

		/* (the child's Detect count: a word it may not have written yet) */
		bool e0 = tp_slot_word(c, TP_W_TX_EPOCH, &ep0);

		assert_int_equal(write(go[1], "g", 1), 1);
		assert_int_equal(poll(&pf, 1, 10000), 1);
		bool e1 = tp_slot_word(c, TP_W_TX_EPOCH, &ep1);

		assert_true(ntb_db_read(l->ntb) == db || e0 != e1 || (ep0 >> 16) != (ep1 >> 16));
		for (int t = 0; t < 1000 && !(tp_poll_dir(c, TP_EV_IN, false) & TP_EV_IN); t++)
			usleep(1000);
		recv_bytes(c, 100, 100u + i);
	}
	assert_int_equal(write(done[1], "d", 1), 1);
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tp_close(c);
	tp_link_close(l);
	tl_unlink(path);
	close(go[1]);
	close(done[1]);
}

/* A client's COMMIT is repeated by its timers until the server shows it attached: its first
 * word in the client's slot, written by tp_attach(), ends the repeats at the next timer look,
 * although no byte went either way (the connection then leaves the timers' active list; before,
 * every new connection stayed on it for setup_timeout_ms). */
static void test_commit_repeats_end_at_attach(void **state)
{
	struct tl_pair p;
	uint32_t v;

	(void)state;
	pair_open(&p, "fast-commit", 40010);
	assert_true(tp_slot_word(p.ca, TP_W_FB_WAIT, &v)); /* the server's word is there */
	assert_int_equal(v, 0);
	atomic_store(&p.ca->commit_ms, tp_now_ms()); /* (as tp_conn_commit() left it) */
	tp_conn_commit_repeat(p.ca, tp_now_ms(), false);
	assert_int_equal(atomic_load(&p.ca->commit_ms), 0);
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hint_data_ring),
		cmocka_unit_test(test_hint_inline_and_queued),
		cmocka_unit_test(test_hint_busy_lock),
		cmocka_unit_test(test_hint_end_of_stream),
		cmocka_unit_test(test_hint_shut_rd_and_error),
		cmocka_unit_test(test_arrivals),
		cmocka_unit_test(test_send_fits),
		cmocka_unit_test(test_send_fits_peer_lost),
		cmocka_unit_test(test_news_detect),
		cmocka_unit_test(test_arm_due),
		cmocka_unit_test(test_spin_lost),
		cmocka_unit_test(test_turn_release),
		cmocka_unit_test(test_direct_wake),
		cmocka_unit_test(test_word_wake_alone),
		cmocka_unit_test(test_word_wake_two_readers),
		cmocka_unit_test(test_word_wake_stale_value),
		cmocka_unit_test(test_word_wake_speed),
		cmocka_unit_test(test_event_wake),
		cmocka_unit_test(test_event_wake_child),
		cmocka_unit_test(test_news),
		cmocka_unit_test(test_commit_repeats_end_at_attach),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
