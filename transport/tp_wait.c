/* SPDX-License-Identifier: MIT */
/* Readiness and waiting: poll bits (arming the peer's doorbell), the spinning then sleeping
 * tp_wait(), readable / unacknowledged byte counts. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "transport/tp_int.h"
#include "util/log.h"

/* --- readiness --------------------------------------------------------------------------------- */

void tp_set_wait_flag(struct tp_conn *c, uint32_t word, bool *cur, bool on)
{
	if (*cur == on)
		return;
	*cur = on;
	tp_fb_wait_write(c, word, on);
}

bool tp_rx_ask_ring(struct tp_conn *c, bool evfd)
{
	int slot = -1;

	/* (not for a connection another process holds too: the word names one process) */
	if (evfd && c->ent) {
		/* relaxed: fork adds one before the child runs; a hint otherwise */
		uint32_t refs = atomic_load_explicit(&c->ent->refs, memory_order_relaxed);

		if (refs <= 1 || refs > 1000u)
			slot = tp_link_ev_slot(c->link);
	}
	/* asked already for a ring that wakes this asker too */
	if (c->rx_wait_set && (c->rx_wait_slot < 0 || c->rx_wait_slot == slot))
		return false;
	/* (a second kind of sleeper, or another slot: the doorbell, which wakes them all) */
	c->rx_wait_slot = (int16_t)(c->rx_wait_set ? -1 : slot);
	c->rx_wait_set = true;
	tp_fb_wait_write(c, TP_W_FB_WAIT, true);
	return true;
}

void tp_fb_wait_write(struct tp_conn *c, uint32_t word, bool on)
{
	uint32_t v = on ? TP_FBW_RING : 0;

	if (on && word == TP_W_FB_WAIT && c->rx_wait_slot >= 0)
		v = TP_FBW_EVENT | (uint32_t)c->rx_wait_slot << TP_FBW_EV_SHIFT;

	if (word == TP_W_FB_WAIT && c->rx_news)
		v |= TP_FBW_NEWS; /* (kept while the ring request comes and goes) */
	if (word == TP_W_FB_WAIT)
		v |= c->rx_wait_direct; /* (TP_FBW_DIRECT, TP_FBW_WORD or 0) */
	tp_out_word(c->link, c->out.slot_off + word, c->nonce_out, v);
	ntb_wc_flush(c->link->ntb);
	/* the flag store before our re-check of the rings: Dekker pair with the fence in
	 * wake_peer() on the peer */
	atomic_thread_fence(memory_order_seq_cst);
}

void tp_set_wait_direct(struct tp_conn *c, uint8_t bit)
{
	if (c->rx_wait_direct == bit)
		return;
	c->rx_wait_direct = bit;
	tp_fb_wait_write(c, TP_W_FB_WAIT, c->rx_wait_set);
}

void tp_rx_wait_clear(struct tp_conn *c)
{
	/* (the direct doorbell or word stays while a sleeper of tp_wait_one() counts: the last
	 * to leave takes it back) */
	uint8_t direct = c->rx_direct_n ? c->rx_wait_direct : 0;

	if (!c->rx_wait_set && c->rx_wait_direct == direct)
		return;
	c->rx_wait_set = false;
	c->rx_wait_direct = direct;
	c->rx_wait_slot = -1;
	tp_fb_wait_write(c, TP_W_FB_WAIT, false);
}

void tp_set_tx_wait(struct tp_conn *c, uint32_t bits)
{
	if (c->tx_wait_v == bits)
		return;
	c->tx_wait_v = bits;
	tp_out_word(c->link, c->out.slot_off + TP_W_TX_WAIT, c->nonce_out, bits);
	ntb_wc_flush(c->link->ntb);
	/* the flag store before our re-check of the rings: Dekker pair with the fence in
	 * rx_wake_sender() on the peer (tp_rx.c) */
	atomic_thread_fence(memory_order_seq_cst);
}

/* ms until C's next quick probe or re-ask of a Retry (tp_int.h), 0: none to come. */
static uint32_t quick_wait(struct tp_conn *c, uint64_t now)
{
	return tp_wait_min(tp_tx_quick_wait(c, now), tp_rx_reask_wait(c, now));
}

/* The earliest recovery timer (quick probe, re-ask) due among the connections this thread's
 * arming looks found since tp_arm_due_take() last took it; 0: none (CLOCK_MONOTONIC ns). */
static __thread uint64_t t_arm_due_ns;

uint64_t tp_arm_due_take(void)
{
	uint64_t due = t_arm_due_ns;

	t_arm_due_ns = 0;
	return due;
}

/* The caller may sleep: if C has unacknowledged data (or waits gated for a retransmission), its
 * next quick probe (re-ask) is due at some microsecond. A timer already due runs now (the
 * caller of poll, select or epoll_wait woke for it: tp_arm_due_take()); the next one is noted
 * for the caller's sleep to end by, and the helper comes too, on its millisecond clock, for a
 * caller that does not look again (the link's flag, and a kick when the helper already sleeps
 * for longer: tp_link_probe_soon(); the helper clears the flag when nothing needs it). Two
 * trylocks, only before a sleep (the flag found up from an earlier wait is not enough: the
 * helper's pass may be about to clear it, or its sleep was planned without it). No lock of
 * ours is held here; the caller's (an epoll set's) may be: the timers take only the
 * transport's, and those with trylocks. */
static void arm_quick_probe(struct tp_conn *c)
{
	bool urgent = false;
	uint64_t due = tp_conn_recovery_due_ns(c, &urgent);

	if (!due)
		return;
	if (due <= clock_mono_ns()) {
		tp_conn_timers(c, tp_now_ms());
		due = tp_conn_recovery_due_ns(c, &urgent);
		if (!due)
			return;
	}
	tp_link_probe_soon(c->link);
	/* (not while the peer is silent: its timers are held, each run setting the next probe
	 * 250 µs ahead again, tp_timers.c; the helper watches it) */
	if (ntb_link_peer_silent(c->link->ntb))
		return;
	if (!t_arm_due_ns || due < t_arm_due_ns)
		t_arm_due_ns = due;
}

/* Readiness of C. Only the directions in WANT are looked at (TP_EV_OUT: the send side and its
 * feedback words; TP_EV_IN: the receive side, which is always checked as it also yields
 * RDHUP/HUP); ARM asks the peer to ring for what WANT lacks. */
/* How the caller of poll_bits_dir() that arms sleeps: on the event fd (poll, epoll: the
 * default), on the doorbell (tp_wait_one()), reading alone on the doorbell and the direct
 * doorbell (TP_SLEEP_DIRECT) or the connection's NEWS word (TP_SLEEP_WORD). */
#define TP_SLEEP_EVFD   0
#define TP_SLEEP_DB     1
#define TP_SLEEP_DIRECT 2
#define TP_SLEEP_WORD   3

static unsigned poll_bits_now(struct tp_conn *c, bool arm, int sleep, unsigned want);

/* poll_bits_now(), with no room reported while the rest of a moved connection's tail is still
 * going out (pushed on here too). */
static unsigned poll_bits_dir(struct tp_conn *c, bool arm, int sleep, unsigned want)
{
	if (likely(!atomic_load_explicit(&c->pre_on, memory_order_relaxed)))
		return poll_bits_now(c, arm, sleep, want);
	tp_prefix_flush(c);
	/* relaxed: tp_prefix_flush() just looked under the prefix lock; a stale yes only hides
	 * the room until the next poll */
	if (!atomic_load_explicit(&c->pre_on, memory_order_relaxed))
		return poll_bits_now(c, arm, sleep, want);
	return poll_bits_now(c, arm, sleep, want & ~TP_EV_OUT) & ~TP_EV_OUT;
}

static unsigned poll_bits(struct tp_conn *c, bool arm, unsigned want)
{
	return poll_bits_dir(c, arm, TP_SLEEP_EVFD, want);
}

/* ARM: the caller may sleep, ask the peer to ring for what WANT lacks; SLEEP: how it sleeps
 * (TP_SLEEP_*): on the event fd, the peer may be asked to write it (TP_FBW_EVENT); reading alone
 * in tp_wait_one(), it asks for data on the direct doorbell (TP_FBW_DIRECT) or the connection's
 * NEWS word (TP_FBW_WORD) unless another waiter of this connection asked for a ring already. */
static unsigned poll_bits_now(struct tp_conn *c, bool arm, int sleep, unsigned want)
{
	unsigned ev = 0;
	bool turn = false;
	int err = tp_conn_own(c);

	if (!err)
		err = tp_conn_err(c);

	if (err)
		return TP_EV_ERR | TP_EV_HUP | TP_EV_IN | TP_EV_OUT;
	if (unlikely(tp_fo_get(c))) /* running: nothing yet; done: the calls say -EXDEV */
		return tp_fo_get(c) == TP_FO_DONE || tp_fo_get(c) == TP_FO_LINKED ?
		       TP_EV_IN | TP_EV_OUT : 0;
	if (!(want & TP_EV_OUT)) {
		/* waiting for input alone: not a one-way stream (tp_tx_merge.c), and what we
		 * hold goes out (the peer may answer it) */
		if (atomic_load_explicit(&c->tx_streak, memory_order_relaxed)) {
			atomic_store_explicit(&c->tx_streak, false, memory_order_relaxed);
			turn = true;
		}
		tp_tx_flush_held(c);
	} else if (arm) {
		tp_tx_flush_held(c); /* the caller may sleep */
	}
	tp_mutex_lock(&c->rx_lock);
	c->rx_turn |= turn; /* (the read after this wait releases at once: tp_rx_release_turn()) */
	/* (tp_rx_quiet(): nothing published since the last look, nothing to validate) */
	if (!tp_rx_quiet(c))
		tp_rx_progress(c, 1);
	tp_rx_release(c); /* (at once while the sender holds a merged message for it) */
	if (arm)
		tp_rx_flush_feedback(c); /* the caller may sleep: nothing held back meanwhile */
	if (c->rec_head == c->rec_tail && !c->eof)
		tp_rx_idle(c, arm);
	if (arm && (want & TP_EV_IN) && c->rec_head == c->rec_tail && !c->eof) {
		/* nothing to read: ask the peer to ring, then look once more */
		if (sleep >= TP_SLEEP_DIRECT && !c->rx_wait_set)
			tp_set_wait_direct(c, sleep == TP_SLEEP_WORD ? TP_FBW_WORD : TP_FBW_DIRECT);
		else
			tp_rx_ask_ring(c, sleep == TP_SLEEP_EVFD);
		if (!tp_rx_quiet(c)) /* (fresh loads of the ring words: the Dekker re-check) */
			tp_rx_progress(c, 1);
	}
	if (c->rec_head != c->rec_tail || c->eof) {
		ev |= TP_EV_IN;
		tp_rx_wait_clear(c);
	}
	if (tp_rx_fin_seen(c))
		ev |= TP_EV_RDHUP;
	if (c->rd_shut) /* (shutdown(SHUT_RD): reads return 0, as the kernel's poll says) */
		ev |= TP_EV_IN | TP_EV_RDHUP;
	tp_act_note_rx(c); /* (what it validated is acknowledged lazily: tp_active.c) */
	tp_mutex_unlock(&c->rx_lock);
	if (!(want & TP_EV_OUT)) {
		/* waiting to read: leave the send side (and its feedback words) alone, but for a
		 * Retry of what we sent (one load while none came), and, before a sleep, the
		 * feedback a probe of our unacknowledged bytes is timed by (arm_quick_probe():
		 * tp_tx_quick_due_ns()) */
		tp_tx_retry_check(c);
		tp_tx_epoch_again(c); /* (a re-ask of a Retry answered) */
		if (arm)
			arm_quick_probe(c);
		if (ev & TP_EV_RDHUP) {
			tp_mutex_lock(&c->tx_lock);
			if (c->wr_shut && c->fin_sent)
				ev |= TP_EV_HUP;
			tp_mutex_unlock(&c->tx_lock);
		}
		goto lost;
	}
	tp_mutex_lock(&c->tx_lock);
	tp_tx_feedback(c);
	tp_tx_epoch_again_locked(c); /* (a re-ask of a Retry answered) */
	/* Room in the data ring, which every write can use; free inline slots count only while
	 * the writer writes small (its last write fitted one): a larger write would get EAGAIN
	 * there, and a writer waiting here would come straight back and spin on tp_send()
	 * without ever sleeping, so its timers, the quick probes among them, would not run (a
	 * stream under loss stalled so until the helper got the lock, 50-300 ms) */
	bool small = c->tx_last_len <= c->link->params.inline_max ||
		     /* (no data ring: writes go inline, but for a large one that waits for the
		      * ring it asked for, tp_ring.c) */
		     (!c->out_ring_ok && c->link->params.inline_max &&
		      !tp_tx_ring_hold_big(c, c->tx_last_len));
	bool room = tp_data_room(c, TP_MT_SHORT) > 0 ||
		    (small && c->out.inline_n - (c->tx_i - c->fb_rx_i) > 0);
	if (arm && !room && !c->wr_shut) {
		tp_set_tx_wait(c, c->tx_wait_v | TP_TXW_ROOM);
		tp_tx_feedback(c);
		room = tp_data_room(c, TP_MT_SHORT) > 0 ||
		       (small && c->out.inline_n - (c->tx_i - c->fb_rx_i) > 0);
	}
	if (room || c->wr_shut) {
		ev |= TP_EV_OUT;
		/* (a held message asks for the receiver's release: tp_tx_merge.c) */
		tp_set_tx_wait(c, tp_tx_held(c) ? c->tx_wait_v & TP_TXW_HELD : 0);
	}
	bool wr_done = c->wr_shut && c->fin_sent;
	tp_mutex_unlock(&c->tx_lock);
	if (arm)
		arm_quick_probe(c);
	if ((ev & TP_EV_RDHUP) && wr_done)
		ev |= TP_EV_HUP;
lost:
	if (tp_conn_peer_lost(c) && !(ev & TP_EV_IN)) {
		/* a peer process that died with nothing missing ends like a FIN (tp_rx.c) */
		tp_mutex_lock(&c->rx_lock);
		if (tp_rx_death_end(c))
			ev |= TP_EV_IN | TP_EV_RDHUP;
		tp_act_note_rx(c); /* (as above) */
		tp_mutex_unlock(&c->rx_lock);
	}
	if (tp_conn_peer_lost(c)) {
		/* writes fail; recv delivers what arrived, then EOF (FIN seen) or ECONNRESET */
		ev |= TP_EV_OUT | TP_EV_HUP;
		if (!(ev & TP_EV_IN))
			ev |= TP_EV_IN | (tp_rx_fin_seen(c) ? 0 : TP_EV_ERR);
		/* a reset: pending at once, data still to read or not, as the kernel shows it */
		if (tp_st_flags(c) & TP_ST_RST)
			ev |= TP_EV_ERR;
	}
	return ev;
}

unsigned tp_poll_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	/* arm the peer's doorbell for what is not ready: the caller may sleep on tp_event_fd() */
	return poll_bits(c, true, TP_EV_IN | TP_EV_OUT);
}

unsigned tp_poll_peek_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	/* (preload/ spins on this and arms with tp_poll() only right before it sleeps) */
	return poll_bits(c, false, TP_EV_IN | TP_EV_OUT);
}

unsigned tp_poll_dir_one(struct tp_conn *c, unsigned want, bool arm)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	return poll_bits(c, arm, want);
}

static int woke(struct tp_conn *c, unsigned ev)
{
	/* relaxed: a time stamp read as a hint (spin or not) */
	atomic_store_explicit(&c->last_wake_ms, clock_coarse_ms(), memory_order_relaxed);
	return (int)ev;
}

#define TP_SLEEP_MIN_US 50 /* the shortest sleep for a recovery timer: the kernel's timer
			    * slack is 50 µs anyway, and a timer that stays due (its lock busy)
			    * wakes the waiter no more than 20000 times a second */
#define TP_SPIN_FULL_EVERY 64u /* spins between full looks (errors, peer loss) and clock reads */

/* Spin for the budget: each round reads only the probe (a few words of our inbound window and
 * the doorbell). A message or released space the probe sees is reported at once (IN / OUT:
 * the caller's tp_recv()/tp_send() validates it, under its lock, only once; should it turn out
 * unusable, the caller gets -EAGAIN and waits again with the probe re-armed past it). Anything
 * else, and every TP_SPIN_FULL_EVERY rounds with the clock check, gets a full poll_bits().
 * Returns the ready bits, or 0 when the budget ran out or the clock reached *DUE_NS (a recovery
 * timer's, 0: none known; looked up again at each clock check while none is). */
/* A spin longer than TP_SPIN_YIELD_NS yields the CPU every TP_SPIN_YIELD_NS: a thread this
 * CPU was given meanwhile runs (the peer's reader, woken by our request onto the CPU we spin
 * on, which then answered only when our 300 µs spin ended: with spin_us = 0, whose spin in
 * preload/ yields, a request and answer with pauses took 0.35 ms at p50 against 0.05). A
 * wait of a ping-pong, a few microseconds, yields never. */
#define TP_SPIN_YIELD_NS 20000u
static __thread uint64_t t_spin_yield_ns;

static void spin_yield(uint64_t t0, uint64_t now)
{
	if (now - t0 < TP_SPIN_YIELD_NS || now - t_spin_yield_ns < TP_SPIN_YIELD_NS)
		return;
	sched_yield();
	t_spin_yield_ns = clock_mono_ns();
}

static unsigned spin_wait(struct tp_conn *c, unsigned events, uint64_t t0, long budget_us,
			  uint64_t *due_ns)
{
	struct tp_probe pr;

	tp_probe_arm(c, &pr, events);
	if (pr.seq_was) {
		/* a slot arrived since the caller's last look: not news to the probe, so look */
		unsigned ev = poll_bits(c, false, events);

		if (ev & events)
			return ev & events;
	}
	for (unsigned spins = 1;; spins++) {
		unsigned hit = tp_probe_hit(c, &pr);

		if (hit & events & (TP_EV_IN | TP_EV_OUT))
			return hit & events & (TP_EV_IN | TP_EV_OUT);
		if (hit || spins % TP_SPIN_FULL_EVERY == 0) {
			unsigned ev = poll_bits(c, false, events);

			if (ev & events)
				return ev & events;
			if (spins % TP_SPIN_FULL_EVERY == 0) {
				uint64_t now = clock_mono_ns();

				if (now - t0 >= (uint64_t)budget_us * 1000u ||
				    (*due_ns && now >= *due_ns))
					return 0;
				spin_yield(t0, now);
				/* none known: a recovery may have begun since (a Retry of ours in
				 * the look above), or the lock was busy when the caller asked */
				if (!*due_ns) {
					bool urgent = false;

					*due_ns = tp_conn_recovery_due_ns(c, &urgent);
				}
			}
			if (hit)
				tp_probe_arm(c, &pr, events); /* not for us after all (yet) */
		}
		cpu_relax();
	}
}

#define TP_SPIN_LEAN 64u /* rounds of the lean input spin before the full tp_wait() */

/* Waiting only for input: spin on the probe alone (the next sequence byte, TX_D, the doorbell,
 * the error word) for TP_SPIN_LEAN rounds, before the full wait's lock, progress and clock
 * work: a message that arrives within a few microseconds (ping-pong, a reader that caught up
 * with its writer) is reported after one lock (the arming) instead of three and no clock read.
 * Returns TP_EV_IN on a hit; 0 (anything else, nothing yet, or records already queued) sends
 * the caller down the full path, which sees errors, peer loss and end of stream. */
static unsigned spin_in_lean(struct tp_conn *c)
{
	struct tp_probe pr;

	if (tp_conn_own(c) || tp_conn_err(c))
		return 0;
	tp_probe_arm(c, &pr, TP_EV_IN);
	if (pr.seq_was)
		return 0;
	for (unsigned i = 0; i < TP_SPIN_LEAN; i++) {
		unsigned hit = tp_probe_hit(c, &pr);

		if (hit != TP_EV_IN) {
			if (hit)
				return 0;
			cpu_relax();
			continue;
		}
		/* the streaming stamp of woke() costs a clock read (~10 ns here): on the lean
		 * path only every 16th ring slot (the position of the slot the probe watched) */
		if ((((uintptr_t)pr.seq_at >> 7) & 15u) == 0)
			woke(c, TP_EV_IN);
		return TP_EV_IN;
	}
	return 0;
}

static int wait_sleep(struct tp_conn *c, unsigned events, int timeout_ms, int sleep, uint64_t word,
		      uint64_t t0);

int tp_wait_one(struct tp_conn *c, unsigned events, int timeout_ms)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	long budget = (long)c->link->params.spin_us;
	uint64_t t0;
	unsigned ev;

	if (!(events & TP_EV_OUT))
		tp_tx_flush_held(c); /* waiting for input: the peer may answer what we hold */

	events |= TP_EV_ERR | TP_EV_HUP;
	if ((events & (TP_EV_IN | TP_EV_OUT)) == TP_EV_IN && budget > 0 && timeout_ms != 0 &&
	    (ev = spin_in_lean(c)))
		return (int)ev;
	ev = poll_bits(c, false, events);
	if (ev & events)
		return woke(c, ev & events);
	t0 = clock_mono_ns();
	/* Adaptive spinning: a connection that was waited on and woke within the last few ms is
	 * streaming; sleeping there costs the peer a wake-up per message and us two context
	 * switches per ring turn, so spin longer (still bounded: an idle connection sleeps). Not
	 * after TP_SPIN_LOST_MAX waits in a row that spun that long for nothing and slept:
	 * requests that come half a millisecond or more apart (a server between a client's calls)
	 * cost 0.3 ms of spinning each (a Python echo server answering requests 0.5 ms apart:
	 * 2.3 s of CPU in 3 s, 0.9 s without). A wait that ends within TP_SPIN_ACTIVE_US,
	 * spinning or asleep, spins long again. Relaxed (spin_lost): a hint for how long to spin,
	 * from whichever thread waited last. */
	if (clock_coarse_ms() - atomic_load_explicit(&c->last_wake_ms, memory_order_relaxed) <= 8u &&
	    budget < TP_SPIN_ACTIVE_US &&
	    atomic_load_explicit(&c->spin_lost, memory_order_relaxed) < TP_SPIN_LOST_MAX)
		budget = TP_SPIN_ACTIVE_US;
	/* The spin runs the recovery timers when they are due (a quick probe, a re-ask: at the
	 * microsecond, tp_int.h), and spins on for the rest of its budget, or up to the next
	 * such timer of a recovery under way. */
	while (budget > 0 && timeout_ms != 0) {
		bool urgent = false;
		uint64_t due = tp_conn_recovery_due_ns(c, &urgent), now;

		/* (never past the caller's timeout: a recovery spins no longer than it asked) */
		if (urgent && due > t0 + (uint64_t)budget * 1000u &&
		    due - t0 <= (uint64_t)TP_RECOVERY_SPIN_US * 1000u &&
		    (timeout_ms < 0 || due - t0 < (uint64_t)timeout_ms * 1000000u))
			budget = (long)((due - t0) / 1000u) + 1;
		ev = spin_wait(c, events, t0, budget, &due);
		if (ev) {
			atomic_store_explicit(&c->spin_lost, 0, memory_order_relaxed);
			return woke(c, ev);
		}
		now = clock_mono_ns();
		if (!due || now < due || now - t0 >= (uint64_t)budget * 1000u)
			break;
		tp_conn_timers(c, tp_now_ms());
	}
	uint8_t lost = atomic_load_explicit(&c->spin_lost, memory_order_relaxed);

	if (lost < TP_SPIN_LOST_MAX)
		atomic_store_explicit(&c->spin_lost, (uint8_t)(lost + 1), memory_order_relaxed);
	/* reading alone: asleep on the doorbell and the connection's NEWS word, which the sender
	 * wakes for its data (neither the helper thread, on the doorbell, nor the readers of other
	 * connections wake for it), or where the peer cannot, the direct doorbell (which wakes
	 * every reader of the side, but not the helper) */
	int sleep = TP_SLEEP_DB, rc;
	uint64_t news = 0;

	if ((events & (TP_EV_IN | TP_EV_OUT)) == TP_EV_IN && ntb_db_direct_ok(c->link->ntb)) {
		sleep = TP_SLEEP_DIRECT;
		if (ntb_word_wake_ok(c->link->ntb) &&
		    (news = tp_news_off(c->link->geom.pool_off, c->slot)))
			sleep = TP_SLEEP_WORD;
	}
	if (sleep == TP_SLEEP_DB)
		return wait_sleep(c, events, timeout_ms, sleep, 0, t0);
	/* counted while it may sleep on its own word or the direct doorbell: the request for
	 * them stays while any such sleeper does (another thread's return, with data or not,
	 * would leave it asleep with nobody to wake it), and goes with the last (the peer
	 * would wake nobody, and a Detect of its that woke only the word would wait for the
	 * helper's pass) */
	tp_mutex_lock(&c->rx_lock);
	c->rx_direct_n++;
	tp_mutex_unlock(&c->rx_lock);
	rc = wait_sleep(c, events, timeout_ms, sleep, news + TP_NEWS_FUTEX, t0);
	tp_mutex_lock(&c->rx_lock);
	if (!--c->rx_direct_n)
		tp_set_wait_direct(c, 0);
	tp_mutex_unlock(&c->rx_lock);
	return rc;
}

/* tp_wait_one()'s sleep (TP_SLEEP_*), from T0 (its start), on the doorbell and, with
 * TP_SLEEP_WORD, the 32-bit word at WORD of the inbound window. */
static int wait_sleep(struct tp_conn *c, unsigned events, int timeout_ms, int sleep, uint64_t word,
		      uint64_t t0)
{
	uint64_t start = t0 / 1000000u;
	unsigned ev;

	for (;;) {
		uint32_t seen = ntb_db_read(c->link->ntb);
		/* (before the arming's flag and re-check: a message after them changes it) */
		uint32_t seen_d = sleep == TP_SLEEP_WORD ? ntb_word_read(c->link->ntb, word) :
				  sleep == TP_SLEEP_DIRECT ? ntb_db_direct_read(c->link->ntb) : 0;
		uint64_t now = tp_now_ms();
		/* (a failover, or a moved connection's tail going out first: short slices;
		 * relaxed: pre_on picks a slice length, a hint) */
		bool fast = tp_fo_get(c) || atomic_load_explicit(&c->pre_on, memory_order_relaxed);
		long slice = fast ? 2000 : 50000; /* µs */
		bool urgent = false;
		uint64_t due;
		int rc;

		ev = poll_bits_dir(c, true, sleep, events);
		if (ev & events) {
			/* (soon enough that a long spin would have seen it) */
			if (clock_mono_ns() - t0 < (uint64_t)TP_SPIN_ACTIVE_US * 1000u)
				atomic_store_explicit(&c->spin_lost, 0, memory_order_relaxed);
			return woke(c, ev & events);
		}
		/* unacknowledged data: wake for its next quick probe; gated: for the next re-ask
		 * of the Retry (tp_int.h) — at the microsecond it is due (a sleep in whole
		 * milliseconds left a recovery whose words were lost waiting up to 1 ms more),
		 * at least TP_SLEEP_MIN_US */
		if ((due = tp_conn_recovery_due_ns(c, &urgent))) {
			uint64_t ns = clock_mono_ns();
			long d = due > ns ? (long)((due - ns + 999u) / 1000u) : 0;

			if (d < slice)
				slice = d > TP_SLEEP_MIN_US ? d : TP_SLEEP_MIN_US;
		} else {
			uint32_t quick = quick_wait(c, now); /* (the lock was busy: the ms bound) */

			if (quick && (long)quick * 1000 < slice)
				slice = (long)quick * 1000;
		}
		if (timeout_ms >= 0) {
			if (now - start >= (uint64_t)timeout_ms)
				return 0;
			if ((uint64_t)slice > (start + (uint64_t)timeout_ms - now) * 1000u)
				slice = (long)((start + (uint64_t)timeout_ms - now) * 1000u);
		}
		rc = sleep == TP_SLEEP_WORD ?
			     ntb_db_wait_word_us(c->link->ntb, seen, word, seen_d, slice) :
		     sleep == TP_SLEEP_DIRECT ?
			     ntb_db_wait_direct_us(c->link->ntb, seen, seen_d, slice) :
			     ntb_db_wait_us(c->link->ntb, seen, slice);
		if (rc == -EINTR)
			return -EINTR;
		if (rc == -ENOLINK || rc == -EINVAL)
			usleep((useconds_t)slice);
		tp_conn_timers(c, tp_now_ms());
	}
}

size_t tp_readable_bytes_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	size_t n;

	if (tp_conn_own(c) || tp_fo_get(c))
		return 0; /* (the error is reported by the next call) */
	tp_mutex_lock(&c->rx_lock);
	n = tp_rx_queued(c);
	/* (relaxed: a sticky flag; the death path reads it again with acquire) */
	if (!n && atomic_load_explicit(&c->peer_died, memory_order_relaxed)) {
		/* a dead sender's held message joins the queue here as at a read or a poll
		 * (tp_rx.c: rx_held_take()); one flag load, not tp_conn_peer_lost()'s word
		 * reads, for a reader that polls FIONREAD */
		tp_rx_death_end(c);
		n = tp_rx_queued(c);
	}
	tp_act_note_rx(c); /* (as in poll_bits_now()) */
	tp_mutex_unlock(&c->rx_lock);
	return n;
}

size_t tp_unacked_bytes_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	size_t n;

	if (tp_conn_own(c) || tp_fo_get(c))
		return 0;
	tp_mutex_lock(&c->tx_lock);
	tp_tx_feedback(c);
	n = (size_t)(c->tx_d - c->fb_rx_d) + (size_t)(c->tx_i - c->fb_rx_i) * 128u;
	tp_mutex_unlock(&c->tx_lock);
	return n;
}
