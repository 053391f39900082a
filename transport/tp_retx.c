/* SPDX-License-Identifier: MIT */
/* The send side's recovery: the receiver's feedback (released space, CmpAck, Retry), the
 * retransmission a Retry asks for, Detect, and the send side's timers. */
#include "transport/tp_int.h"
#include "transport/tp_tx_int.h"
#include "util/log.h"

/* Inline slots [from, to) (free-running) from the shadow, whole (the sequence bytes with
 * them), in one or two writes. */
static void write_inline_range(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t n = c->out.inline_n, cnt = to - from;
	uint32_t first = from & (n - 1), run = cnt < n - first ? cnt : n - first;

	if (run)
		ntb_write(c->link->ntb, tp_out_inline_off(c, from), c->sh_inline + first * 128u,
			  (size_t)run * 128u);
	if (cnt > run)
		ntb_write(c->link->ntb, tp_out_inline_off(c, 0), c->sh_inline, (size_t)(cnt - run) * 128u);
}

/* Rewrites of the same message in a row that a Retry with confirmed positions may ask for
 * before everything unreleased is rewritten (retransmit_selective()) */
#define TP_SEL_REPEAT 4u

/*
 * Selective repeat: the receiver said where its validation stopped (FB_RETRY_D / FB_RETRY_I,
 * written before the epoch): the message it misses is the one at either position, so only the
 * inline slot there and the data-ring message there are rewritten; what follows them is in its
 * window already (a further loss there is found when validation reaches it: another Retry).
 * Under a lossy link a go-back-N of the whole unreleased rings (up to the ring: a megabyte for
 * one lost word) is what kept a stream at a fifth of its clean rate. Falls back to everything
 * (false) when the words are missing (a peer that does not write them), out of the unreleased
 * ranges, not at a message boundary in our shadow, or the same as the last selective rewrite
 * when the positions are not known to be this Retry's (a stale word, or more than one message
 * missing there), or the same TP_SEL_REPEAT times in a row.
 */
static bool retransmit_selective(struct tp_conn *c)
{
	uint32_t rd, ri, q = c->out.qsize;
	struct tp_desc d;

	if (!tp_slot_word(c, TP_W_FB_RETRY_D, &rd) || !tp_slot_word(c, TP_W_FB_RETRY_I, &ri) ||
	    rd - c->fb_rx_d > c->tx_d - c->fb_rx_d || ri - c->fb_rx_i > c->tx_i - c->fb_rx_i)
		return false;
	if (c->sel_valid && rd == c->sel_d && ri == c->sel_i) {
		/* Asked again for the same message. With the positions bound to this Retry's
		 * epoch (FB_RETRY_EP: retry_put_off()) they are not stale: the link spoilt the
		 * rewrite too (a Retry is one write per message, as likely spoilt as the first),
		 * so rewrite the one message again, up to TP_SEL_REPEAT times in a row */
		if (!c->retry_pos_ok || ++c->sel_repeat > TP_SEL_REPEAT) {
			c->sel_valid = false; /* next time selective again */
			c->sel_repeat = 0;
			return false;
		}
	} else {
		c->sel_repeat = 0;
	}
	if (rd != c->tx_d) {
		memcpy(&d, c->sh_data + (rd & (q - 1)), sizeof(d)); /* never wraps: 16-aligned */
		if ((d.type != TP_MT_SHORT && d.type != TP_MT_LONG) ||
		    d.msn - c->fb_ack >= c->msn_next - c->fb_ack ||
		    tp_footprint(d.type, rd, d.len) > c->tx_d - rd)
			return false;
		tp_tx_write_data(c, rd, rd + tp_footprint(d.type, rd, d.len));
	}
	if (ri != c->tx_i)
		write_inline_range(c, ri, ri + 1);
	c->sel_d = rd;
	c->sel_i = ri;
	c->sel_valid = true;
	return true;
}

static void send_detect(struct tp_conn *c);
static bool tx_pending(const struct tp_conn *c);

static void retry_wait_end(struct tp_conn *c)
{
	c->retry_wait = false;
	atomic_store_explicit(&c->retry_wait_hint, false, memory_order_relaxed); /* (a hint) */
}

/* Under tx_lock, a Retry of epoch EP seen: put it off (true) while its positions have not
 * come (FB_RETRY_EP is not EP: one of the three words was lost or spoilt, and FB_RETRY_D/_I
 * may name an earlier Retry's message, when retransmit_selective() would rewrite the wrong
 * one and then every unreleased byte, up to the ring). The receiver writes them again with
 * each re-ask (TP_REASK_US after the Retry, at once when it sees us write meanwhile); after
 * retry_wait_us (TP_RETRY_WAIT_US) without them (a peer that never writes FB_RETRY_EP) the
 * Retry is answered with what there is. */
static bool retry_put_off(struct tp_conn *c, uint16_t ep)
{
	uint64_t now = clock_mono_ns();
	uint32_t v;

	/* (acquire inside tp_slot_word(): the positions, written before it, are read after) */
	if (tp_slot_word(c, TP_W_FB_RETRY_EP, &v) && (uint16_t)v == ep) {
		retry_wait_end(c);
		c->retry_pos_ok = true;
		return false;
	}
	c->retry_pos_ok = false;
	if (!c->retry_wait || c->retry_wait_ep != ep) {
		c->retry_wait = true;
		c->retry_wait_ep = ep;
		c->retry_wait_ns = now;
		/* relaxed: hints (tp_tx_retry_check() looks again; the helper comes within
		 * TP_QUICK_PROBE_MS to end the wait) */
		atomic_store_explicit(&c->retry_wait_hint, true, memory_order_relaxed);
		atomic_store_explicit(&c->link->probe_soon, true, memory_order_relaxed);
		LOG(LL_DEBUG, "transport: slot %u: Retry %u without its positions: waiting for them",
		    c->slot, ep);
		/* a gated receiver answers a Detect with its Retry again, positions included
		 * (rx_gated()): one round trip instead of its re-ask's interval */
		send_detect(c);
		return true;
	}
	if (now - c->retry_wait_ns < (uint64_t)c->link->params.retry_wait_us * 1000u)
		return true;
	retry_wait_end(c);
	return false;
}

/* A sample of how long C's receiver took to acknowledge (NS): into C's and its link's running
 * means (1/8 of the difference). Over TP_QUICK_PROBE_MAX_US it is no sample: most likely the
 * sender did not look meanwhile (it went idle after its send, and reads the acknowledgement at
 * its next one), and the probe's delay stops there anyway; over half of it, it counts as that
 * half (the probe's delay stops at twice it). */
/* Running mean M (0: none yet) moved by 1/8 towards sample US. */
static uint32_t mean_add(uint32_t m, uint32_t us)
{
	return m ? (uint32_t)((int32_t)m + ((int32_t)us - (int32_t)m) / 8) : us;
}

static void ack_sample(struct tp_conn *c, uint64_t ns)
{
	if (ns > TP_QUICK_PROBE_MAX_US * 1000u)
		return;
	uint32_t us = ns >= TP_QUICK_PROBE_MAX_US / 2u * 1000u ? TP_QUICK_PROBE_MAX_US / 2u :
								 (uint32_t)(ns / 1000u);
	/* relaxed: a hint, a lost update among racing connections costs nothing */
	uint32_t l = atomic_load_explicit(&c->link->ack_us, memory_order_relaxed);

	c->ack_us = mean_add(c->ack_us, us);
	atomic_store_explicit(&c->link->ack_us, mean_add(l, us), memory_order_relaxed);
}

/* The peer asked for a retry (newer epoch): rewrite what it misses from the shadows (the
 * message where its validation stopped, else every unreleased byte), then announce the epoch.
 * Rewriting is idempotent: the shadow is what the window should hold. */
static void retransmit(struct tp_conn *c, uint16_t epoch)
{
	/* counted first: the peer may see the data before we return */
	TP_STAT_ADD(c->st->retransmits, 1);
	c->ack_stamp_ns = 0; /* (Karn: the acknowledgement may be the retransmission's) */

	/* Whole slots (the sequence bytes with them): the receiver is gated until the epoch
	 * below is published after a barrier, so it never sees a slot half rewritten; fewer
	 * writes also give a lossy link fewer chances to spoil the retry. */
	if (!retransmit_selective(c)) {
		write_inline_range(c, c->fb_rx_i, c->tx_i);
		tp_tx_write_data(c, c->fb_rx_d, c->tx_d);
	}
	/* TX_D, then (tp_tx_publish(), once epoch_unconfirmed is set) the epoch that lifts the
	 * receiver's gate, after the rewritten rings: it is written again with every publication
	 * until the receiver's feedback moves (a lost one would leave the receiver gated until a
	 * probe) */
	c->tx_epoch = epoch;
	c->epoch_unconfirmed = true;
	atomic_store_explicit(&c->epoch_hint, true, memory_order_relaxed); /* (a hint) */
	c->epoch_msn = c->msn_next;
	c->epoch_db = ntb_db_read(c->link->ntb); /* (a re-ask from now on: tp_tx_epoch_again()) */
	tp_tx_publish(c);
	/* the epoch word once more (tp_tx_publish() wrote it after its barrier): it is what
	 * lifts the receiver's gate, and with it lost the receiver waits for its re-ask timer;
	 * 8 bytes once per retransmission */
	tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch | (uint32_t)c->detect_seq << 16);
	ntb_wc_flush(c->link->ntb);
	ntb_peer_db_ring(c->link->ntb);
	c->last_ack_ms = tp_now_ms();
	c->quick_n = 0; /* quick probes again for what was just sent again */
	c->quick_ns = clock_mono_ns();
	/* ... also when this thread goes on to other things: the helper runs them (the epoch word
	 * above may be lost too, and the receiver stays gated until it sees it) */
	atomic_store_explicit(&c->link->probe_soon, true, memory_order_relaxed); /* a hint */
	LOG(LL_DEBUG, "transport: slot %u retransmit epoch %u inline %u data %u", c->slot, epoch,
	    c->tx_i - c->fb_rx_i, c->tx_d - c->fb_rx_d);
}

/* Read the feedback unit (under tx_lock): released space, CmpAck, retry epoch, detect ack.
 * Acquire loads (tp_slot_word()): the receiver's reads of the space a word hands back happen
 * before our next writes into it; pairs with ntb_from_peer_barrier() in fb_publish_words() and
 * tp_rx_fail_at() (tp_rx.c). */
void tp_tx_feedback(struct tp_conn *c)
{
	uint32_t v;
	bool progress = false;

	if (tp_slot_word(c, TP_W_FB_RX_I, &v) && v != c->fb_rx_i &&
	    v - c->fb_rx_i <= c->tx_i - c->fb_rx_i) {
		c->fb_rx_i = v;
		progress = true;
	}
	if (tp_slot_word(c, TP_W_FB_RX_D, &v) && v != c->fb_rx_d &&
	    v - c->fb_rx_d <= c->tx_d - c->fb_rx_d) {
		c->fb_rx_d = v;
		progress = true;
	}
	if (tp_slot_word(c, TP_W_FB_ACK_MSN, &v) && v != c->fb_ack &&
	    v - c->fb_ack <= c->msn_next - c->fb_ack) {
		c->fb_ack = v;
		progress = true;
	}
	uint64_t ep_raw = tp_slot_raw(c, TP_W_FB_EPOCH);
	bool ep_new = c->fb_ep_read && ep_raw != c->fb_ep_raw;

	c->fb_ep_raw = ep_raw;
	c->fb_ep_read = true;
	if (!tp_slot_word(c, TP_W_FB_EPOCH, &v)) {
		/* a new value that fails its check: the receiver wrote the word (a Retry, a
		 * Detect's answer) and the link spoilt it; while we wait for feedback, ask for all
		 * of it again at once (a Detect) rather than wait for the receiver's re-ask */
		if (ep_new && tx_pending(c) && !tp_conn_err(c))
			send_detect(c);
	} else {
		uint16_t ep = (uint16_t)v, det = (uint16_t)(v >> 16);

		/* DetectAck: the receiver is alive, only not consuming: probe less often. A late
		 * answer (to an earlier probe: the next one went out before it came) counts too,
		 * once: else a receiver that always answers a little after the next timer tick
		 * (a loaded host) would reach MaxErr while answering every probe. The echoed
		 * sequence only moves forward; a new one within the probes sent since the last
		 * answer is an answer. */
		if (det != c->det_acked &&
		    (uint16_t)(c->detect_seq - det) <= c->link->params.max_err) {
			c->det_acked = det;
			if (c->terr) {
				c->terr = 0;
				if (c->det_backoff < 16)
					c->det_backoff++;
			}
		}
		if (tp_rt_epoch_newer(ep, c->tx_epoch) && !retry_put_off(c, ep)) {
			if (++c->terr > c->link->params.max_err * 4u) {
				tp_conn_maxerr(c, -ECONNRESET);
				return;
			}
			retransmit(c, ep);
		}
	}
	if (progress) {
		/* (the ms clock for TimerSendData, the ns one for the quick probes, which count
		 * from it TP_QUICK_PROBE_US apart; a feedback change is one per several
		 * messages) */
		c->last_ack_ms = tp_now_ms();
		c->progress_ms = c->last_ack_ms;
		/* the receiver validated all that retransmit() rewrote: it saw the epoch (it
		 * validates nothing while it waits for it) */
		if ((int32_t)(c->fb_ack - c->epoch_msn) >= 0) {
			c->epoch_unconfirmed = false;
			/* relaxed: a hint (tp_tx_epoch_again()) */
			atomic_store_explicit(&c->epoch_hint, false, memory_order_relaxed);
		}
		uint64_t ns = clock_mono_ns();

		/* how long the receiver took to acknowledge the timed message (none timed, or its
		 * time void: tp_tx_timers_start()) */
		if (c->ack_stamp_ns && (int32_t)(c->fb_ack - c->ack_msn) > 0) {
			if (ns > c->ack_stamp_ns)
				ack_sample(c, ns - c->ack_stamp_ns);
			c->ack_stamp_ns = 0;
		}
		c->terr = 0;
		c->det_backoff = 0;
		c->quick_n = 0;
		c->quick_ns = ns;
	}
	/* the receiver answers our probes again, or validated everything: our death is a clean
	 * end again (the timers do it when the witness lock is busy); relaxed: a hint, see
	 * tp_int.h */
	if (unlikely(atomic_load_explicit(&c->rst_armed, memory_order_relaxed)) &&
	    (c->det_acked == c->detect_seq || c->msn_next == c->fb_ack))
		tp_witness_rst(c, false, false);
	tp_tx_ring_feedback(c); /* a data ring granted, refused or asked back (tp_ring.c) */
}

/*
 * For a thread that waits to read (tp_wait() without TP_EV_OUT: a request sent, its answer
 * awaited): when the FB epoch word moved since the send path last read it, read the feedback
 * now, so that a Retry for what we sent is answered at once instead of at the helper's next
 * timer pass (1-3 ms later: the ping-pong p99 under 1 % corruption). One load while nothing
 * moved; skipped while a sender holds the tx lock (its next send reads the word itself).
 */
void tp_tx_retry_check(struct tp_conn *c)
{
	uint64_t raw = tp_slot_raw(c, TP_W_FB_EPOCH);

	/* relaxed: hints (a change sends us to the feedback, read under tx_lock; so does a Retry
	 * put off until its positions come: retry_put_off()) */
	if ((raw == atomic_load_explicit(&c->tx_seen_ep, memory_order_relaxed) &&
	     !atomic_load_explicit(&c->retry_wait_hint, memory_order_relaxed)) ||
	    tp_mutex_trylock(&c->tx_lock) != 0)
		return;
	atomic_store_explicit(&c->tx_seen_ep, raw, memory_order_relaxed); /* (the hint above) */
	tp_tx_feedback(c);
	tp_mutex_unlock(&c->tx_lock);
}

void tp_tx_epoch_again_locked(struct tp_conn *c)
{
	uint32_t db;

	if (likely(!c->epoch_unconfirmed) || tp_conn_err(c))
		return;
	/* once per ring of the doorbell since the last write of the word: what a gated
	 * receiver's re-ask rings */
	db = ntb_db_read(c->link->ntb);
	if (db == c->epoch_db)
		return;
	c->epoch_db = db;
	/* after the rewritten data, which another thread may have written (its fence does not
	 * order our store); pairs with the acquire load of TX_EPOCH in tp_rx_progress() */
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch | (uint32_t)c->detect_seq << 16);
	ntb_wc_flush(c->link->ntb);
}

void tp_tx_epoch_again(struct tp_conn *c)
{
	/* relaxed: a hint (the flag itself is read under tx_lock) */
	if (!atomic_load_explicit(&c->epoch_hint, memory_order_relaxed) ||
	    tp_mutex_trylock(&c->tx_lock) != 0)
		return;
	tp_tx_epoch_again_locked(c);
	tp_mutex_unlock(&c->tx_lock);
}

/* Detect: the receiver answers with its feedback (and a Retry when data it was told of is
 * missing). Under tx_lock. */
/* Under tx_lock, after a Detect's words: news for an epoll set that passes over the connection
 * (an entry gone idle, preload/pl_epoll_wait.c, is looked at again only when its news word
 * changes). Without it the Detect of a sender whose message was lost was answered by the
 * receiver's helper at its next pass after the ring, up to TP_ACT_SCAN_MS later: an epoll
 * ping-pong under 1 % loss spent ~4.5 ms on one exchange in a thousand. A value its messages'
 * sequence numbers are unlikely to have had (as tp_write_st()'s), and the next message writes
 * its own again. The fence: our words before the load of the receiver's flag, as in
 * tp_wake_peer().
 * A reader of the peer asleep in tp_wait() for this connection alone (FB_WAIT's TP_FBW_WORD,
 * no other kind of sleeper) is woken on its word, and answers the Detect itself (its look:
 * tp_rx_quiet() sees the Detect): false, the doorbell is not rung. Every reader of the peer's
 * side sleeps on the doorbell, and its helper thread: the quick probes of a JVM's requests
 * whose answers took over TP_QUICK_PROBE_US woke all its 16 blocked threads each. True: ring
 * the doorbell. */
static bool detect_wake(struct tp_conn *c)
{
	uint32_t v, n;

	if (!c->news_out)
		return true;
	atomic_thread_fence(memory_order_seq_cst);
	if (!tp_slot_word(c, TP_W_FB_WAIT, &v) || !(v & (TP_FBW_NEWS | TP_FBW_WORD)))
		return true;
	if (v & TP_FBW_NEWS) {
		n = (uint32_t)clock_mono_ns() | 0x80000000u;
		tp_news_write(c->link, c->news_out, c->news_slot, c->nonce_out, n, n);
		c->news_done = false;
	} else {
		tp_news_fresh(c);
	}
	if (!(v & TP_FBW_WORD) || (v & (TP_FBW_RING | TP_FBW_EVENT)))
		return true;
	ntb_wc_flush(c->link->ntb);
	ntb_peer_word_wake(c->link->ntb, c->news_out + TP_NEWS_FUTEX);
	return false;
}

static void send_detect(struct tp_conn *c)
{
	if (tp_tx_held(c))
		tp_tx_publish(c); /* (TX_D below covers it) */
	c->detect_seq++;
	c->ack_stamp_ns = 0; /* (Karn: the acknowledgement may be the probe's answer) */
	/* TX_D publishes the data ring again: after the data, which another thread may have
	 * written under tx_lock (the fence in its tp_tx_publish() does not order our store); pairs
	 * with the acquire load of TX_D in rx_data() */
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_TX_NEXT_MSN, c->msn_next);
	tp_peer_word(c, TP_W_TX_D, c->tx_d);
	/* NEXT_MSN and TX_D before the Detect they come with; pairs with the acquire load of
	 * TX_EPOCH in tp_rx_progress() */
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch | (uint32_t)c->detect_seq << 16);
	if (detect_wake(c)) {
		ntb_wc_flush(c->link->ntb);
		ntb_peer_db_ring(c->link->ntb);
	}
}

static bool tx_pending(const struct tp_conn *c)
{
	return c->msn_next != c->fb_ack || c->tx_i != c->fb_rx_i || c->tx_d != c->fb_rx_d;
}

/* Under tx_lock: CLOCK_MONOTONIC (ns) at which the next quick probe is due, 0: none to come. */
static uint64_t quick_due(const struct tp_conn *c)
{
	uint64_t at_us = tp_quick_base_us(c) << (c->quick_n < 20 ? c->quick_n : 20);

	/* (also after a retransmission, TErrCnt > 0: a retransmission the link dropped is found
	 * the same way) */
	if (!tx_pending(c) || tp_conn_err(c) ||
	    at_us >= (uint64_t)c->link->params.send_timeout_ms * 1000u)
		return 0;
	return c->quick_ns + at_us * 1000u;
}

/* Under tx_lock: as returned by tp_tx_timers(): ms until the next quick probe (at least 1, the
 * millisecond it falls in rounded up), 0: none. */
static uint32_t quick_next(const struct tp_conn *c)
{
	uint64_t due = quick_due(c), now;

	if (!due)
		return 0;
	now = clock_mono_ns();
	return due <= now ? 1u : (uint32_t)((due - now + 999999u) / 1000000u);
}

uint32_t tp_tx_quick_wait(struct tp_conn *c, uint64_t now)
{
	uint32_t w = 0;

	(void)now; /* (the probes run on the fine clock) */
	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		w = quick_next(c);
		tp_mutex_unlock(&c->tx_lock);
	}
	return w;
}

uint64_t tp_tx_quick_due_ns(struct tp_conn *c, bool *urgent)
{
	uint64_t due = 0;

	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		/* (the feedback first: a peer that read our bytes since our last look has most
		 * likely published that, and a sleeper woke for a probe it then did not send) */
		if (tx_pending(c))
			tp_tx_feedback(c);
		due = quick_due(c);
		if (due && c->epoch_unconfirmed)
			*urgent = true;
		tp_mutex_unlock(&c->tx_lock);
	}
	return due;
}

bool tp_tx_unacked(struct tp_conn *c)
{
	bool due = true; /* (a busy lock: look again next time) */

	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		tp_tx_feedback(c);
		due = quick_due(c) != 0;
		tp_mutex_unlock(&c->tx_lock);
	}
	return due;
}

/* TimerSendData / TimerDetect, quick probes, and republication of the tx index (helper, wait
 * loops). */
uint32_t tp_tx_timers(struct tp_conn *c, uint64_t now)
{
	const struct tp_params *pp = &c->link->params;
	uint32_t next = 0;

	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		tp_tx_feedback(c);
		/* a ring the helper could not act on (tx lock busy: flush_held()) */
		if (tp_tx_held(c) && !tp_tx_rx_behind(c))
			tp_tx_flush_held_locked(c);
		if (c->wr_shut && !c->fin_sent && !tp_conn_err(c))
			tp_tx_fin(c);
		/* unacknowledged or unreleased data without progress: Detect (the answer also
		 * republishes the receiver's feedback, whose last write may have been lost) */
		bool pending = tx_pending(c);

		if (pending && !tp_conn_err(c)) {
			uint32_t to = c->terr ? pp->detect_timeout_ms : pp->send_timeout_ms;

			/* an alive receiver that does not read: up to ~2 s between probes */
			to += (c->det_backoff < 16 ? c->det_backoff : 16) * 120u;

			bool probed = false;
			uint64_t qd;
			uint16_t prev = c->detect_seq; /* our last probe before this run's */

			if (clock_age_ms(now, c->last_ack_ms) > to) {
				/* TimerSendData / TimerDetect: PROBING, send Detect */
				if (++c->terr > pp->max_err) {
					tp_conn_maxerr(c, -ECONNRESET);
				} else {
					send_detect(c);
					c->last_ack_ms = now;
					probed = true;
				}
			} else if ((qd = quick_due(c)) && clock_mono_ns() >= qd) {
				/* a quick probe: no error counted, the next after twice as long */
				send_detect(c);
				c->quick_n++;
				probed = true;
			}
			/* our previous probe found no answer (the quick probe at 2 ms, or
			 * TimerSendData, finds none): the link may be losing what we write, and our
			 * death resets our socket from now on (tp_witness.c), unless a failover is to
			 * carry the bytes over it. A receiver that answers has what we wrote in its
			 * window, read or not (a death then is a clean end, as over kernel TCP) */
			if (probed && (c->terr || (c->quick_n >= 2 &&
					 tp_quick_base_us(c) << (c->quick_n - 1 < 20 ?
								 c->quick_n - 1 : 20) >=
						 TP_QUICK_RST_US)) &&
			    c->det_acked != prev &&
			    c->msn_next != c->fb_ack && !tp_fo_get(c))
				tp_witness_rst(c, true, false);
			next = quick_next(c);
		} else if (c->tx_dirty && !c->last_tx_pub_ms) {
			c->last_tx_pub_ms = now; /* published since the last run: stamp it now */
		} else if (c->tx_dirty && clock_age_ms(now, c->last_tx_pub_ms) > 50) {
			/* republish: a dropped index write must not stall the peer. After a barrier
			 * of our own: the data was written by the thread that published it first
			 * (pairs with the acquire load of TX_D in rx_data()) */
			ntb_to_peer_barrier(c->link->ntb);
			tp_peer_word(c, TP_W_TX_D, c->tx_d_pub); /* (not a held message) */
			tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch |
				  (uint32_t)c->detect_seq << 16);
			tp_tx_ring_timers(c, now, true);
			c->tx_dirty = false;
		}
		if (!tp_conn_err(c)) {
			tp_tx_ring_timers(c, now, false); /* a refused or lost request: again */
			uint32_t rn = tp_tx_ring_next(c, now);

			if (rn && (!next || rn < next))
				next = rn; /* (the helper comes back for it) */
		}
		/* (relaxed: a hint) answered, or everything validated: a death is clean again (a
		 * disarm the feedback's reader could not do: tp_tx_feedback()) */
		if ((c->det_acked == c->detect_seq || c->msn_next == c->fb_ack) &&
		    atomic_load_explicit(&c->rst_armed, memory_order_relaxed))
			tp_witness_rst(c, false, false);
		tp_mutex_unlock(&c->tx_lock);
	}
	return next;
}
