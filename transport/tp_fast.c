/* SPDX-License-Identifier: MIT */
/* Cheap readiness hints for the readiness calls of preload/ (select/poll/epoll): what a waiter
 * may report without validating messages, so that the reader validates each message once, on
 * the copy that delivers it (tp_recv()), instead of once in the poll and again in the read.
 * Ordering: loads only, of words the peer writes (tp_words.c's table): relaxed where only a
 * hint (the read that follows loads again with acquire), acquire through tp_slot_word(). */
#include <pthread.h>

#include "transport/tp_int.h"
#include "transport/tp_rx_int.h"
#include "transport/tp_tx_int.h"

/* Has the peer published inline position POS? (The sequence byte only: no copy, no check.) */
static bool inline_published(const struct tp_conn *c, uint32_t pos)
{
	const struct tp_link *l = c->link;
	const volatile uint8_t *slot = tp_in_inline(l, c->slot, pos);

	/* relaxed: only a hint; tp_recv() reads the byte again with acquire (rx_inline(),
	 * tp_rx_seq_ready(): pairs with the release in inline_publish()) */
	return atomic_load_explicit((const _Atomic uint8_t *)(const void *)(slot + TP_INL_SEQ),
				    memory_order_relaxed) ==
	       tp_inline_seq(pos, l->geom.log2n, c->seq_base_in);
}

bool tp_readable_hint_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	bool ready = false;
	uint32_t txd;

	/* Not owned (after fork) or failed: the full poll says what (tp_conn_own(), errors).
	 * acquire: pairs with the release stores of c->owned in tp_conn.c (as tp_conn_own()) */
	if (!atomic_load_explicit(&c->owned, memory_order_acquire) ||
	    atomic_load_explicit(&c->error, memory_order_relaxed) || tp_fo_get(c))
		return false;
	/* A reader holding the lock is consuming: let the full poll wait for it. */
	if (tp_mutex_trylock(&c->rx_lock))
		return false;
	/* A Retry of ours in progress: look for the sender's answer (its epoch word) now, as the
	 * full poll would (tp_rx_progress() lifts the gate, or asks again when the re-ask is
	 * due), and report the first message validated after it. Left to the full poll, the
	 * answer waited for the end of the caller's spin (spin_us, 50 µs by default) on every
	 * loss: most of what a Retry cost a stream read through preload/ (#22 goal 3). */
	if (c->gated && !tp_rx_fin_seen(c) && !c->eof && !c->rd_shut) {
		tp_rx_progress(c, 1);
		ready = !c->gated && c->rec_head != c->rec_tail;
	}
	/* End of stream, shut reads, a Retry still in progress: the full poll reports them
	 * (RDHUP, HUP; gated data may be stale). */
	else if (!c->gated && !tp_rx_fin_seen(c) && !c->eof && !c->rd_shut) {
		if (c->rec_head != c->rec_tail)
			ready = true; /* validated already */
		else if (inline_published(c, c->v_i) &&
			 !tp_inline_stale(c, c->v_i, tp_in_inline(c->link, c->slot, c->v_i)))
			ready = true; /* (not a slot an earlier connection left: tp_rx_note_stale()) */
		else if (tp_rx_txd(c, &txd) && txd != c->v_d)
			/* (acquire: pairs with ntb_to_peer_barrier() in tp_tx_publish(); a hint,
			 * the read validates again) */
			ready = true; /* a data-ring message (tx_d published after its payload) */
	}
	if (!ready) {
		tp_rx_release(c); /* (at once while the sender holds a merged message for it) */
		tp_rx_idle(c, false);
	}
	tp_mutex_unlock(&c->rx_lock);
	return ready;
}

/* Under rx_lock (ARM: the caller may sleep after it). */
static uint64_t arrivals(struct tp_conn *c, bool arm)
{
	const uint32_t n = c->link->geom.inline_n;
	uint32_t pos, k, txd;

	/* Inline messages: the first position from the validation cursor on that the peer has not
	 * published (each new one moves it; one load per slot, the usual scan is one or two). A
	 * slot an earlier connection left looking published is not one until it changes
	 * (tp_rx_note_stale()): else the message that overwrites it would move nothing. */
	pos = c->v_i;
	for (k = 0; k < n && inline_published(c, pos) &&
		    !tp_inline_stale(c, pos, tp_in_inline(c->link, c->slot, pos)); k++)
		pos++;
	/* Data-ring messages: the peer's tail, published after each message's payload. A word that
	 * fails its check counts as what was validated so far. */
	/* (acquire, tp_slot_word(): pairs with ntb_to_peer_barrier() in tp_tx_publish()) */
	if (!tp_slot_word(c, TP_W_TX_D, &txd))
		txd = c->v_d;
	tp_rx_release(c); /* (at once while the sender holds a merged message for it) */
	/* (TX_D behind v_d: validated before it was published, rx_short_direct(); nothing new.
	 * The stamp keeps TX_D's own value: it changes when the sender publishes, not as we
	 * read) */
	if (pos == c->v_i && c->v_d - txd <= c->link->geom.qsize && c->rec_head == c->rec_tail)
		tp_rx_idle(c, arm);
	return (uint64_t)pos << 32 | txd;
}

uint64_t tp_rx_arrivals_one(struct tp_conn *c)
{
	uint64_t r;

	c = tp_conn_cur(c); /* (moved to another link: that one) */
	tp_mutex_lock(&c->rx_lock);
	r = arrivals(c, false);
	tp_mutex_unlock(&c->rx_lock);
	return r;
}

uint64_t tp_rx_arm_arrival_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	tp_mutex_lock(&c->rx_lock);
	/* (tp_poll() asks for a ring only when nothing is readable; tp_recv() and a poll that
	 * finds data readable take the request back) */
	if (!tp_conn_own(c))
		tp_rx_ask_ring(c, true); /* (the caller sleeps on the event fd) */
	uint64_t r = arrivals(c, true);

	tp_mutex_unlock(&c->rx_lock);
	return r;
}

/* Under a send-buffer limit (tp_conn_set_sndbuf()), a write as large as half of it is
 * writable when half of it is free, as the kernel's POLLOUT needs. */
static size_t sndbuf_clamp(const struct tp_conn *c, size_t len)
{
	uint32_t cap = atomic_load_explicit(&c->tx_cap, memory_order_relaxed); /* (as data_free()) */

	return cap && len > cap / 2u ? cap / 2u : len;
}

/* Room for a write of LEN: in the data ring; without one (tp_ring.c), an inline slot (the
 * write goes through them). Under tx_lock. */
static bool fits_now(const struct tp_conn *c, size_t len)
{
	if (!c->out_ring_ok) /* (inline_max 0: nothing goes before a ring comes) */
		return c->link->params.inline_max && !tp_tx_ring_hold_big(c, len) &&
		       c->out.inline_n - (c->tx_i - c->fb_rx_i) > 0;
	return tp_data_room(c, TP_MT_SHORT) >= len;
}

size_t tp_tx_room(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	size_t room = SIZE_MAX / 2; /* (an error, shutdown, a failover: tp_send() says which) */

	tp_mutex_lock(&c->tx_lock);
	/* acquire: as tp_send_fits() */
	if (atomic_load_explicit(&c->owned, memory_order_acquire) &&
	    !atomic_load_explicit(&c->error, memory_order_relaxed) && !c->wr_shut && !tp_fo_get(c)) {
		tp_tx_feedback(c);
		if (c->out_ring_ok) {
			/* a write is cut into messages of at most an eighth of the ring, each with
			 * a descriptor and up to 128 bytes of alignment (long), beside the first
			 * message's gap at the ring's end */
			uint32_t fr = tp_tx_data_free(c), piece = c->out.qsize / 8u;
			uint64_t over = ((uint64_t)fr / (piece ? piece : 1u) + 2u) * 256u;

			room = fr > over ? (size_t)(fr - over) : 0;
		} else if (c->link->params.inline_max) {
			uint32_t n = c->out.inline_n - (c->tx_i - c->fb_rx_i);

			room = (size_t)n * c->link->params.inline_max;
			if (room > TP_RING_ASK_BYTES) /* (a larger write waits for a ring) */
				room = TP_RING_ASK_BYTES;
		} else {
			room = 0;
		}
	}
	tp_mutex_unlock(&c->tx_lock);
	return room;
}

bool tp_send_fits_one(struct tp_conn *c, size_t len, bool arm)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	bool fits;

	/* Only writes that go whole into one data-ring message are worth waiting for; inline
	 * ones and large ones (which tp_send() cuts anyway) go as they are. */
	if (len <= c->link->params.inline_max || len > c->link->params.short_max ||
	    len > c->out.qsize / 4u)
		return true;
	len = sndbuf_clamp(c, len);
	tp_mutex_lock(&c->tx_lock);
	/* acquire: pairs with the release stores of c->owned in tp_conn.c (as tp_conn_own()); a
	 * connection another process drives, or a failed one, is tp_send()'s to report */
	if (!atomic_load_explicit(&c->owned, memory_order_acquire) ||
	    atomic_load_explicit(&c->error, memory_order_relaxed) || c->wr_shut || tp_fo_get(c)) {
		tp_mutex_unlock(&c->tx_lock);
		return true;
	}
	fits = fits_now(c, len);
	if (!fits) {
		tp_tx_feedback(c); /* the cached credits ran out: what did the receiver release? */
		fits = fits_now(c, len);
	}
	if (!fits && (atomic_load_explicit(&c->peer_gone, memory_order_relaxed) ||
		      tp_conn_peer_lost(c)))
		fits = true; /* no room will come: tp_send() reports the loss (EPIPE, reset) */
	if (!fits && arm) {
		/* The caller may sleep: ask the receiver to ring when it releases space (its
		 * rx_release() publishes at once while TX_WAIT is set), then look once more, as
		 * poll_bits() does for "no room at all". tp_send() clears the flag. */
		tp_set_tx_wait(c, c->tx_wait_v | TP_TXW_ROOM);
		tp_tx_feedback(c);
		fits = fits_now(c, len);
	}
	tp_mutex_unlock(&c->tx_lock);
	return fits;
}

bool tp_writable_hint_one(struct tp_conn *c, size_t len)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	bool ready = false;

	if (len == 0 || len > c->link->params.short_max || len > c->out.qsize / 4u)
		return false; /* (no size to judge by, or one tp_send() cuts anyway: full poll) */
	len = sndbuf_clamp(c, len);
	/* acquire: pairs with the release stores of c->owned in tp_conn.c (as tp_conn_own()) */
	if (!atomic_load_explicit(&c->owned, memory_order_acquire) ||
	    atomic_load_explicit(&c->error, memory_order_relaxed) ||
	    atomic_load_explicit(&c->peer_gone, memory_order_relaxed) || tp_fo_get(c) ||
	    atomic_load_explicit(&c->pre_on, memory_order_relaxed))
		return false;
	if (tp_mutex_trylock(&c->tx_lock))
		return false;
	/* The cached credits only (no feedback words read): room they show is room. */
	if (!c->wr_shut)
		ready = tp_data_room(c, TP_MT_SHORT) >= len ||
			((len <= c->link->params.inline_max || !c->out_ring_ok) &&
			 c->out.inline_n - (c->tx_i - c->fb_rx_i) > 0);
	tp_mutex_unlock(&c->tx_lock);
	return ready;
}

/* --- news for epoll sets (tp_news_off()) ----------------------------------------------------- */

const void *tp_rx_news_arm_one(struct tp_conn *c, bool ring, uint64_t *ret_seen,
			       struct tp_news_sums *ret_sums)
{
	const void *w = NULL;

	c = tp_conn_cur(c); /* (moved to another link: that one; a move bumps tp_state_gen()) */
	/* acquire: as tp_readable_hint_one() (tp_conn_own()) */
	if (!atomic_load_explicit(&c->owned, memory_order_acquire) ||
	    atomic_load_explicit(&c->error, memory_order_relaxed) || tp_fo_get(c))
		return NULL;
	uint64_t off = tp_news_off(c->link->geom.pool_off, c->slot);

	if (!off || tp_mutex_trylock(&c->rx_lock))
		return NULL; /* (a reader is consuming: look again next time) */
	/* the flag, then (after its fence) the word and the re-check below: Dekker pair with the
	 * sender's fence and flag load in tp_wake_peer() (the set sleeps on the event fd) */
	bool news_new = !c->rx_news;

	c->rx_news = true;
	if (!(ring && tp_rx_ask_ring(c, true)) && news_new)
		tp_fb_wait_write(c, TP_W_FB_WAIT, c->rx_wait_set);
	const _Atomic uint64_t *news =
		(const _Atomic uint64_t *)(const void *)(c->link->in + off);
	if (ret_sums) {
		/* the summary, the group, then the word: the sender writes them the other way round
		 * (tp_news_write()), so a change after these reads changes what they read */
		ret_sums->sum = (const void *)(c->link->in + TP_OFF_NEWS_SUM);
		ret_sums->grp = (const void *)(c->link->in + tp_news_grp_off(c->slot));
		ret_sums->g = c->slot / TP_NEWS_GRP_SLOTS;
		ret_sums->sum_seen = tp_news_read(ret_sums->sum);
		ret_sums->grp_seen = tp_news_read(ret_sums->grp);
	}
	/* acquire: the sender writes it after what it published (its fence), so what we read
	 * next is at least that */
	*ret_seen = atomic_load_explicit(news, memory_order_acquire);
	/* Settled: nothing published since the last look (tp_rx_quiet(): no message, no epoch or
	 * Detect; not gated), nothing to read, no end of stream, no flag that ends or moves the
	 * connection, a live link. Anything later changes the word (messages, ST flags) or
	 * tp_state_gen() (errors, link loss, failover, shutdown). */
	uint32_t st = tp_st_flags(c);

	tp_rx_idle(c, ring); /* (a ring owed to a sender that holds a merged message: paid now, or
			      * not settled: looks go on until it is) */
	if (tp_rx_quiet(c) && c->rec_head == c->rec_tail && !c->eof && !c->rd_shut && !c->held_owe &&
	    !tp_rx_fin_seen(c) && !(st & ~(TP_ST_CLOSING | TP_ST_COMMIT)) &&
	    !atomic_load_explicit(&c->peer_gone, memory_order_relaxed) &&
	    !atomic_load_explicit(&c->link->lost, memory_order_relaxed) &&
	    atomic_load_explicit(&c->link->peer_epoch, memory_order_relaxed) == c->peer_epoch)
		w = (const void *)news;
	tp_mutex_unlock(&c->rx_lock);
	/* nor what we sent unacknowledged, its quick probes to come: the looks that arm them
	 * (tp_poll()) go on, so that a sleeper wakes for each (tp_arm_due_take()) rather than
	 * leaving them to the helper's millisecond clock (under 1 % loss, an epoll ping-pong's
	 * exchanges that took over 2 ms: from ~30 to ~5 in 90,000) */
	if (w && tp_tx_unacked(c))
		w = NULL;
	return w;
}
