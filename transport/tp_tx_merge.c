/* SPDX-License-Identifier: MIT */
/* The send side's merging of small writes into one held data-ring message while the receiver
 * is behind, and its publication. */
#include "transport/tp_int.h"
#include "transport/tp_tx_int.h"
#include "util/crc32c.h"

void tp_tx_held_word(struct tp_conn *c, uint64_t w)
{
	ntb_write64(c->link->ntb, c->out.slot_off + TP_W_TX_HELD, w);
	ntb_write64(c->link->ntb, c->out.slot_off + TP_W_TX_HELD2, w);
}

void tp_tx_hold_drop(struct tp_conn *c)
{
	if (!tp_tx_held(c))
		return;
	/* relaxed: under tx_lock (tp_tx_held()); held_conns a count the helper reads as a hint */
	atomic_store_explicit(&c->held, false, memory_order_relaxed);
	atomic_fetch_sub_explicit(&c->link->held_conns, 1, memory_order_relaxed);
}

/*
 * The short protocol's coalescing ([MQ]): a small write that finds the receiver behind (more
 * unreleased than its lazy release holds back: tp_tx_rx_surely_behind()) and the previous call on
 * this connection a send
 * goes into one data-ring message that is written but not published: the held message. Later
 * small writes append to it (payload after payload, the descriptor rewritten with the new
 * length and CRC) while the receiver stays behind; it is published (TX_D) as soon as anything
 * shows the receiver caught up, so nothing waits for a timer:
 *   - each write that merges asks the receiver to publish its release at once (TX_WAIT's HELD
 *     bit, which its rx_release(), polls, arrival checks and spin probes honour), then reads
 *     the feedback once more (Dekker pair: our flag store and fence, then its words; its words
 *     and fence, then our flag): a receiver that caught up is seen here or by our next write;
 *     if no write comes, the receiver rings our doorbell once it waits for data itself or
 *     found none for TP_HELD_RING_NS (tp_rx.c: tp_rx_idle(); not at each release: a ring
 *     wakes our helper, a futex wake there and a switch here, which halved a 1 KiB stream),
 *     and the helper publishes (tp_tx_flush_held());
 *   - any other message (inline, larger writes, FIN, Detect, retransmission), a read, wait or
 *     poll on the connection, the timers, fork and export publish it first.
 * The receiver cannot have read a held message (TX_D does not cover it), so rewriting it is
 * safe; once published it is an ordinary short message, and the shadow holds it whole for
 * retransmission and failover from the start. If this process dies holding it, its bytes
 * (which our send()s accepted) are in the receiver's window without a descriptor there: each
 * merge leaves the descriptor's length, CRC and MSN in TP_W_TX_HELD, by which the receiver
 * delivers them, then the end of the stream (tp_rx.c: rx_held_take()).
 */
#define TX_MERGE_MAX   (16u << 10)  /* a held message grows to this at most */

/* The held message's descriptor for LEN payload bytes (its CRC from held_crc). */
static void held_desc(struct tp_conn *c, uint32_t len)
{
	uint32_t q = c->out.qsize;
	uint8_t *s = c->sh_data + (c->held_pos & (q - 1));
	uint64_t w0, w1;
	/* (from registers: tp_desc_crc_words()) */
	uint32_t dcrc = tp_desc_crc_words(c->held_crc, TP_MT_SHORT, len, c->msn_next - 1u, &w0,
					  &w1);

	/* to the shadow only: the window gets it once, when tp_tx_publish() publishes the message. An
	 * earlier length written there and not overwritten (a write the link lost) would check
	 * out over a prefix of the payload and leave the receiver inside the message. */
	memcpy(s, &w0, 8); /* never wraps: 16-aligned */
	memcpy(s + 8, &w1, 8);
	/* what a death of ours leaves the receiver to deliver it by (TP_W_TX_HELD): after the
	 * payload, which its CRC covers (a word that arrived before it does not check out there:
	 * a reset, no byte invented) */
	tp_tx_held_word(c, TP_HELD_WORD(dcrc, len, c->msn_next - 1u));
	c->held_len = len;
	c->tx_d = c->held_pos + TP_DESC_SIZE + (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);
}

/* Zero the shadow's padding after LEN payload bytes of the held message (retransmissions
 * rewrite it whole: tp_tx_zero_gaps()). After the payload's copy: the bytes before LEN are
 * payload already. */
static void held_pad(struct tp_conn *c, uint32_t len)
{
	uint32_t q = c->out.qsize, end = (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);

	if (end != len)
		memset(c->sh_data + ((c->held_pos + TP_DESC_SIZE + len) & (q - 1)), 0, end - len);
}

/* Start a held message with the next N bytes of IC; false (nothing written) when it would
 * wrap at the ring's end or does not fit. */
static bool held_start(struct tp_conn *c, struct iov_cur *ic, uint32_t n)
{
	uint32_t q = c->out.qsize, pos = c->tx_d;
	uint32_t fp = TP_DESC_SIZE + (uint32_t)ALIGN_UP(n, TP_DATA_ALIGN);

	if ((pos & (q - 1)) + fp > q || tp_tx_data_free(c) < fp || c->tx_d != c->tx_d_pub)
		return false;
	c->held_pos = pos;
	c->held_crc = tp_tx_gather_out(c, ic, pos + TP_DESC_SIZE, n, c->dseed_out);
	held_pad(c, n);
	c->msn_next++;
	held_desc(c, n);
	/* relaxed: as tp_tx_hold_drop() */
	atomic_store_explicit(&c->held, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->link->held_conns, 1, memory_order_relaxed);
	TP_STAT_ADD(c->st->tx_msgs_short, 1);
	/* the helper runs the quick probes while we hold: a release the link lost (the receiver
	 * rang, but its words say it is behind) is answered by the next Detect, which publishes
	 * the held message first (send_detect()), within TP_QUICK_PROBE_MS, not at the helper's
	 * 100 ms pass */
	if (!atomic_load_explicit(&c->link->probe_soon, memory_order_relaxed))
		atomic_store_explicit(&c->link->probe_soon, true, memory_order_relaxed); /* a hint */
	return true;
}

/* Append the next N bytes of IC to the held message; false (nothing written) when it would
 * pass TX_MERGE_MAX or the ring's end, or the room. */
static bool held_append(struct tp_conn *c, struct iov_cur *ic, uint32_t n)
{
	uint32_t q = c->out.qsize, len = c->held_len + n;
	uint32_t end = TP_DESC_SIZE + (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);
	uint32_t grow = (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN) -
			(uint32_t)ALIGN_UP(c->held_len, TP_DATA_ALIGN);

	if (len > TX_MERGE_MAX || (c->held_pos & (q - 1)) + end > q || tp_tx_data_free(c) < grow)
		return false;
	c->held_crc = tp_tx_gather_out(c, ic, c->held_pos + TP_DESC_SIZE + c->held_len, n,
				 c->held_crc);
	held_pad(c, len);
	held_desc(c, len);
	return true;
}

/* Under tx_lock: N bytes of IC (a small write, the receiver behind or a message held) merged
 * into the held message; false when they were not (the caller sends them as usual; a held
 * message that could not take them is published first). */
bool tp_tx_merge(struct tp_conn *c, struct iov_cur *ic, uint32_t n)
{
	if (tp_tx_held(c) ? !held_append(c, ic, n) : !held_start(c, ic, n)) {
		if (tp_tx_held(c))
			tp_tx_publish(c);
		return false;
	}
	if (!(c->tx_wait_v & TP_TXW_HELD)) {
		/* ask the receiver to publish its release at once, then look at it again (the
		 * flag's store and fence, then the words: see above) */
		tp_set_tx_wait(c, c->tx_wait_v | TP_TXW_HELD);
		tp_tx_feedback(c);
	} else if (tp_slot_raw_new(c, TP_W_FB_RX_I, tp_slot_raw(c, TP_W_FB_RX_I)) ||
		   tp_slot_raw_new(c, TP_W_FB_RX_D, tp_slot_raw(c, TP_W_FB_RX_D))) {
		/* the flag stood: a release the receiver published since is read here (two loads
		 * while nothing moved); it rings only once it waits (tp_rx_idle()) */
		tp_tx_feedback(c);
	}
	if (!tp_tx_rx_behind(c) && tp_tx_held(c))
		tp_tx_publish(c); /* (the feedback may have published it: a Retry) */
	return true;
}

void tp_tx_flush_held_locked(struct tp_conn *c)
{
	if (!tp_tx_held(c))
		return;
	tp_tx_publish(c);
	/* (published by a read, wait, poll or the helper, not by a write of the stream: the
	 * receiver need not release at once nor owe us a ring any more; a waiter for room keeps
	 * its bit) */
	tp_set_tx_wait(c, c->tx_wait_v & ~TP_TXW_HELD);
	tp_wake_peer(c, TP_W_FB_WAIT);
}

bool tp_tx_flush_held_ready(struct tp_conn *c)
{
	if (tp_mutex_trylock(&c->tx_lock))
		return false;
	if (tp_tx_held(c)) {
		tp_tx_feedback(c);
		if (tp_tx_held(c) && !tp_tx_rx_behind(c))
			tp_tx_flush_held_locked(c);
	}
	tp_mutex_unlock(&c->tx_lock);
	return true;
}

void tp_tx_flush_held(struct tp_conn *c)
{
	/* relaxed: a hint; the lock's acquire orders what tp_tx_publish() reads */
	if (!atomic_load_explicit(&c->held, memory_order_relaxed))
		return;
	tp_mutex_lock(&c->tx_lock);
	tp_tx_flush_held_locked(c);
	tp_mutex_unlock(&c->tx_lock);
}
