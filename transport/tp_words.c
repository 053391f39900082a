/* SPDX-License-Identifier: MIT */
/* Checked words of a connection's slot units (read ours, write the peer's), connection error
 * and peer-loss state, doorbell on demand, and the sender's shadow queues. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tp_int.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/log.h"

/*
 * WHO WRITES / ORDERING of the words that cross the link (each in the reader's inbound window,
 * each with one writer host: doc/design.md §3 rules 1-2). Stores are tp_out_word() (relaxed, a
 * 64-bit checked word); loads tp_in_word() / tp_slot_word() (acquire). "after barrier": the
 * writer's ntb_to_peer_barrier() orders what the word publishes before it; "after reads": its
 * ntb_from_peer_barrier() orders its reads of the space the word hands back before it.
 *
 *   word (unit)          writer (holder)         after      what it publishes / partner load
 *   inline seq byte 127  sender (tx_lock)        barrier    the slot: inline_publish()
 *                                                           (release store on a plain window)
 *                                                           / rx_inline(), tp_rx_seq_ready()
 *   TX_D                 sender (tx_lock)        barrier    data ring up to it: tp_tx_publish(),
 *                                                           send_detect(), the timers' republish
 *                                                           / rx_data(), tp_rx_quiet()
 *   TX_NEXT_MSN, TX_EPOCH (epoch | detect seq)
 *                        sender (tx_lock)        barrier    a Detect, the rewritten rings of a
 *                                                           retransmit() / tp_rx_progress()
 *   TX_WAIT              sender (tx_lock)        -          Dekker flag (TP_TXW_* bits): store,
 *                                                           seq_cst fence, re-check
 *                                                           (tp_set_tx_wait()) / the receiver's
 *                                                           fence + load (rx_wake_sender())
 *   FB_RX_I, FB_RX_D, FB_ACK_MSN
 *                        receiver (rx_lock)      reads      ring space handed back:
 *                                                           fb_publish_words() / tp_tx_feedback()
 *   FB_EPOCH (epoch | detect ack)
 *                        receiver (rx_lock)      reads      Retry, DetectAck: rx_fail_at(),
 *                                                           fb_publish_words() / tp_tx_feedback()
 *   FB_RETRY_D, FB_RETRY_I
 *                        receiver (rx_lock)      -          where validation stopped, before
 *                                                           the Retry's FB_EPOCH (barrier):
 *                                                           rx_fail_at() / retransmit()
 *   FB_WAIT              receiver (rx_lock)      -          Dekker flag, as TX_WAIT (TP_FBW_* bits)
 *   NEWS (the array      sender (tx_lock), and   fence      that it published something: after
 *   below the pool)      with ST_FLAGS; the                 the fence and FB_WAIT's load in
 *                        slot's word alone: a               tp_wake_peer() / tp_rx_news_arm(),
 *                        Detect's answer                    preload/'s epoll sets, a reader
 *                        (rx_lock, WORD)                    asleep on it (TP_FBW_WORD: the
 *                                                           futex compares; acquire)
 *   ST_FLAGS             any process of the      barrier    RST/GONE/CLOSING/FAILOVER, the flags
 *                        writer host, flags                 accumulated (tp_ent_st_add(),
 *                        only accumulate                    tp_host.c) / tp_st_flags(),
 *                                                           tp_rx_death_end() before the TX words
 *   MBOX_TX, packets     host (host lock)        barrier    tp_mbox.c (its table)
 *   MBOX_RX              host (host lock)        reads      mailbox slots handed back
 *   LISTEN words         host (host lock)        -          a port bitmap: publishes nothing else
 *
 * The wc_raw[] cache (tp_slot_word()) is process-local: relaxed, a torn pair only misses.
 */

/* --- words -------------------------------------------------------------------------------- */

uint64_t tp_in_word(const struct tp_link *l, uint64_t off)
{
	/* acquire: a word published after a barrier is read before what it publishes; pairs
	 * with the writer's ntb_to_peer_barrier() / ntb_from_peer_barrier() (table above) */
	return atomic_load_explicit((const _Atomic uint64_t *)(const void *)(l->in + off),
				    memory_order_acquire);
}

/* Relaxed (ntb_write64()): the caller's named barrier orders it (table above). */
void tp_out_word(struct tp_link *l, uint64_t off, uint32_t seed, uint32_t v)
{
	ntb_write64(l->ntb, off, tp_cw_make(seed, v));
}

void tp_news_write(struct tp_link *l, uint64_t news_off, uint32_t peer_slot, uint32_t seed,
		   uint32_t v, uint32_t n)
{
	uint64_t tag = tp_news_tag(peer_slot, seed, n);

	tp_out_word(l, news_off, seed, v);
	/* the slot's word, then its group's, then the summary: a reader that reads them the other
	 * way round (acquire) and finds one changed finds the ones below it changed too */
	ntb_to_peer_barrier(l->ntb);
	ntb_write64(l->ntb, tp_news_grp_off(peer_slot), tag);
	ntb_to_peer_barrier(l->ntb);
	ntb_write64(l->ntb, TP_OFF_NEWS_SUM, tag);
}

void tp_write_st(struct tp_link *l, uint64_t peer_slot_off, uint64_t news_off, uint32_t peer_slot,
		 uint32_t peer_nonce, uint32_t flags)
{
	/* everything this side published before (TX words, a FIN) before the flags: a GONE peer's
	 * reader checks the TX words after the flag (tp_rx_death_end()). Pairs with the acquire
	 * load in tp_st_flags() (tp_slot_word()). A rare path: the barrier costs nothing that
	 * matters. */
	ntb_to_peer_barrier(l->ntb);
	tp_out_word(l, peer_slot_off + TP_W_ST_FLAGS, peer_nonce, flags);
	/* news for an epoll set that passes over the connection (tp_news_off()): a value its
	 * messages' sequence numbers are unlikely to have had, after the flags */
	if (news_off) {
		uint32_t v = (uint32_t)clock_mono_ns() | 0x80000000u;

		tp_news_write(l, news_off, peer_slot, peer_nonce, v, v);
	}
	ntb_wc_flush(l->ntb);
	/* CLOSING and COMMIT alone wake nobody (a server's tp_attach() that waits for COMMIT
	 * polls); CLOSING: it is only looked at (a close, a witness's look), the FIN
	 * that tp_close() sends next wakes a reader that waits, and a peer that does not read is
	 * rung when the FIN stays unacknowledged (TP_FIN_NUDGE_MS). Every other flag ends or
	 * moves the connection: a sleeping reader must see it at once. */
	if (flags & ~(TP_ST_CLOSING | TP_ST_COMMIT))
		ntb_peer_db_ring(l->ntb);
}

/* tp_slot_word() (tp_int.h) when RAW is not the cached reading of word W: check and cache it. */
bool tp_slot_word_check(struct tp_conn *c, uint32_t w, uint64_t raw, uint32_t *ret)
{
	unsigned i = w / 8u;

	if (!tp_cw_check(c->nonce_in, raw, ret))
		return false;
	if (i < TP_WCACHE) /* relaxed: a cache, a hint (tp_wc_raw()) */
		atomic_store_explicit(&c->wc_raw[i], raw, memory_order_relaxed);
	return true;
}

/* Write word W of the peer's slot (seeded with its nonce). */
void tp_peer_word(struct tp_conn *c, uint32_t w, uint32_t v)
{
	tp_out_word(c->link, c->out.slot_off + w, c->nonce_out, v);
}

uint32_t tp_st_flags(struct tp_conn *c)
{
	uint32_t f;

	return tp_slot_word(c, TP_W_ST_FLAGS, &f) ? f : 0;
}

bool tp_peer_closing(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	return (tp_st_flags(c) & TP_ST_CLOSING) != 0;
}

bool tp_conn_peer_lost(struct tp_conn *c)
{
	uint32_t st = tp_st_flags(c);

	if (tp_fo_get(c))
		return false; /* moving (or moved) to the kernel socket: the failover decides */
	if (st & (TP_ST_RST | TP_ST_GONE))
		return true;
	if (atomic_load_explicit(&c->peer_gone, memory_order_relaxed))
		return true;
	if ((st & TP_ST_FAILOVER) && tp_fo_request(c, "peer moved to tcp"))
		return false;
	if ((st & TP_ST_MOVING) && tp_fo_request(c, "peer moved link"))
		return false;
	/* link state as the helper thread last saw it (every ≤ 100 ms): cheap on the data path */
	bool down = atomic_load_explicit(&c->link->lost, memory_order_relaxed);

	if (!down &&
	    atomic_load_explicit(&c->link->peer_epoch, memory_order_relaxed) == c->peer_epoch)
		return false;
	/* both programs may live on: the connection goes on over its kernel socket */
	const char *why = atomic_load_explicit(&c->link->region_bad, memory_order_relaxed) ?
			  "link region gone" : down ? "link down" : "link restarted";

	if (tp_fo_request(c, why))
		return false;
	/* sticky: a peer that speaks again after its connections were given up must not find
	 * them alive on this side */
	atomic_store_explicit(&c->peer_gone, true, memory_order_relaxed);
	return true;
}

/* Retries exhausted (MaxErr) on C, on either side: move to the kernel socket, else fail with
 * ERR and say RST to the peer (added to the flags written so far: a peer that only reads must
 * not wait for a FIN that never comes). */
void tp_conn_maxerr(struct tp_conn *c, int err)
{
	if (tp_fo_request(c, "retries exhausted"))
		return;
	tp_set_error(c, err);
	tp_conn_st_add(c, TP_ST_RST);
}

void tp_set_error_at(struct tp_conn *c, int err, const char *file, int line)
{
	int zero = 0;

	LOG(LL_DEBUG, "transport: slot %u error %d (%s:%d)", c->slot, err, file, line);

	/* release: what the caller did before (state, the failed operation) before the error;
	 * pairs with the acquire load in tp_conn_err(). Acquire on failure: the first error
	 * stays, and is read as tp_conn_err() reads it. */
	if (atomic_compare_exchange_strong_explicit(&c->error, &zero, err, memory_order_acq_rel,
						    memory_order_acquire))
		tp_event_signal();
}

/* Full fence, then the peer's "sleeping" flag in our inbound slot: ring only when set.
 * Dekker pair with the waiter's flag store + seq_cst fence + re-check in tp_set_wait_flag()
 * (our published words before the flag's load; its flag store before its re-check). */
void tp_wake_peer(struct tp_conn *c, uint32_t flag_word)
{
	uint32_t v;

	atomic_thread_fence(memory_order_seq_cst);
	if (!tp_slot_word(c, flag_word, &v) || !v)
		return;
	if (flag_word == TP_W_FB_WAIT && (v & (TP_FBW_NEWS | TP_FBW_WORD)) && c->news_out) {
		/* (after the fence, so after what was published: a receiver that reads the new
		 * value reads the message too; the message sequence number is new each time, and
		 * the words are written once per message: tp_news_tag()) */
		if (!c->news_done || c->news_msn != c->msn_next) {
			c->news_done = true;
			c->news_msn = c->msn_next;
			tp_news_write(c->link, c->news_out, c->news_slot, c->nonce_out,
				      c->msn_next, c->msn_next);
			ntb_wc_flush(c->link->ntb);
		} else if (v & TP_FBW_WORD) {
			/* a sleeper on the word compares it with what it read before its last
			 * look: a message's second wake (a merged message grown, a call that
			 * publishes twice) changes it too */
			tp_news_fresh(c);
		}
		if (!(v & (TP_FBW_RING | TP_FBW_DIRECT | TP_FBW_EVENT | TP_FBW_WORD)))
			return;
	}
	if (flag_word == TP_W_FB_WAIT && !(v & TP_FBW_RING) &&
	    (v & (TP_FBW_DIRECT | TP_FBW_EVENT | TP_FBW_WORD))) {
		/* sleepers on their process's event fd: that eventfd, written here (ntb_int.h:
		 * EVENT DOORBELL), not through the helper thread's doorbell */
		if ((v & TP_FBW_EVENT) &&
		    ntb_peer_event_ring(c->link->ntb, (v >> TP_FBW_EV_SHIFT) & 0xffu)) {
			ntb_peer_db_ring(c->link->ntb); /* (not possible: the doorbell wakes all) */
			return;
		}
		/* a reader asleep in tp_wait() alone: the word it sleeps on (ntb_int.h: WORD
		 * WAKE), or its direct doorbell, not the one its helper sleeps on too */
		if (v & TP_FBW_WORD) {
			/* (no word to wake: the doorbell, which its sleeper waits on too) */
			if (c->news_out)
				ntb_peer_word_wake(c->link->ntb, c->news_out + TP_NEWS_FUTEX);
			else
				ntb_peer_db_ring(c->link->ntb);
		} else if (v & TP_FBW_DIRECT) {
			ntb_peer_db_ring_direct(c->link->ntb);
		}
		return;
	}
	ntb_peer_db_ring(c->link->ntb);
}

void tp_news_fresh(struct tp_conn *c)
{
	tp_out_word(c->link, c->news_out, c->nonce_out, (uint32_t)clock_mono_ns() | 0x80000000u);
	ntb_wc_flush(c->link->ntb);
}

bool tp_wake_word_only(struct tp_conn *c)
{
	uint32_t v;

	if (!c->news_out)
		return false;
	atomic_thread_fence(memory_order_seq_cst);
	if (!tp_slot_word(c, TP_W_FB_WAIT, &v) || !(v & TP_FBW_WORD) ||
	    (v & (TP_FBW_RING | TP_FBW_EVENT)))
		return false;
	tp_news_fresh(c);
	ntb_peer_word_wake(c->link->ntb, c->news_out + TP_NEWS_FUTEX);
	return true;
}

/* --- queues -------------------------------------------------------------------------------- */

/* A recycled connection (tp_conn.c: conn_take()) comes with its shadows, of the same geometry,
 * and its DMA queue (idle): only what is missing is allocated. */
int tp_conn_init_queues(struct tp_conn *c)
{
	if (!c->sh_inline)
		c->sh_inline = aligned_alloc(128, (size_t)c->out.inline_n * 128u);
	/* (sh_data comes with a data ring: tp_shadow_get()) */
	if (!c->sh_inline) {
		tp_conn_free_queues(c);
		return -ENOMEM;
	}
	/* (whole slots are rewritten on retransmission: no byte of an earlier use goes out) */
	memset(c->sh_inline, 0, (size_t)c->out.inline_n * 128u);
	/* sh_data is not cleared (up to 1 GiB per grant): each message zeroes its own gaps and
	 * padding in it as it is written (tp_tx.c: tp_tx_zero_gaps()), so what a retransmission
	 * rewrites, [fb_rx_d, tx_d), holds none of the heap's or an earlier use's bytes */
	if (!c->dmaq && ntb_dmaq_create(c->link->ntb, 4, &c->dmaq))
		c->dmaq = NULL; /* long messages are then copied by the CPU directly */
	/* (a recycled one: another slot's pages now) */
	c->tx_faulted = c->rx_faulted = c->tx_ring_mapped = false;
	tp_mutex_init(&c->tx_lock);
	tp_mutex_init(&c->rx_lock);
	tp_mutex_init(&c->witness_lock);
	c->seq_base_in = tp_inline_seq_base(c->nonce_in);
	c->seq_base_out = tp_inline_seq_base(c->nonce_out);
	tp_rx_note_stale(c);
	c->last_ack_ms = tp_now_ms();
	c->quick_ns = clock_mono_ns();
	return 0;
}

void tp_conn_free_queues(struct tp_conn *c)
{
	ntb_dmaq_destroy(c->dmaq);
	c->dmaq = NULL;
	free(c->sh_inline);
	tp_shadow_put(c->link, c->sh_data, c->out.qsize, c->sh_mapped, c->out.pool_n);
	c->sh_inline = NULL;
	c->sh_data = NULL;
	c->sh_mapped = 0;
	free(c->rx_bounce); /* tp_recv.c: rec_copy() */
	c->rx_bounce = NULL;
	c->rx_bounce_cap = 0;
	c->rx_bounce_ok = false;
}

