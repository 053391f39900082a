/* SPDX-License-Identifier: MIT */
/* The receive side's validation: messages in MSN order across both rings into the record
 * queue (private copies, bounds checked), the feedback (release of space, Retry, Detect
 * answers) and the receive timers. Reading is tp_recv.c, the wait probes tp_probe.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tp_int.h"
#include "transport/tp_rx_int.h"
#include "util/crc32c.h"
#include "util/log.h"

/* --- receive side --------------------------------------------------------------------------- */

/* Copy LEN bytes at data-ring position POS out of the window (wrap aware), fusing the CRC. */
uint32_t tp_rx_data_copy(const struct tp_conn *c, uint8_t *dst, uint32_t pos, uint32_t len,
			 uint32_t crc, bool copy)
{
	uint32_t q = c->link->geom.qsize, p = pos & (q - 1);
	uint32_t first = len < q - p ? len : q - p;
	const uint8_t *base = (const uint8_t *)tp_rx_ring(c);

	if (copy) {
		crc = crc32c_copy(crc, dst, base + p, first);
		if (len > first)
			crc = crc32c_copy(crc, dst + first, base, len - first);
	} else {
		crc = crc32c(crc, base + p, first);
		if (len > first)
			crc = crc32c(crc, base, len - first);
	}
	return crc;
}

int tp_rx_bounce_reserve(struct tp_conn *c, uint32_t len)
{
	if (c->rx_bounce_cap >= len)
		return 0;
	uint32_t cap = (uint32_t)ALIGN_UP(len, 4096u);
	uint8_t *b = malloc(cap);

	if (!b)
		return -ENOMEM;
	free(c->rx_bounce);
	c->rx_bounce = b;
	c->rx_bounce_cap = cap;
	c->rx_bounce_ok = false;
	return 0;
}

/* After a publication of the feedback: ring the sender if it asks for it (TX_WAIT), at once
 * unless all it does is hold a merged message (TP_TXW_HELD alone): its own next write sees the
 * release, and a ring would wake its helper for each message (a futex wake here and a switch
 * there: half of a 1 KiB stream's rate). That ring is owed until it publishes again, and paid
 * when we wait (tp_rx_idle()). */
static void rx_wake_sender(struct tp_conn *c, bool all)
{
	uint32_t v;

	if (all) {
		/* a republication (timers, Retry re-ask, Detect answer): its caller rings, which
		 * pays any debt (a debt made here could outlive a receiver already asleep) */
		c->held_owe = false;
		return;
	}
	/* the feedback's stores before the flag's load: Dekker pair with the fence after the
	 * sender's flag store (tp_set_tx_wait()) */
	atomic_thread_fence(memory_order_seq_cst);
	if (!tp_slot_word(c, TP_W_TX_WAIT, &v) || !v)
		return;
	if (v != TP_TXW_HELD) {
		ntb_peer_db_ring(c->link->ntb);
		c->held_owe = false;
		return;
	}
	/* (the idle time counts from the last look after this release: a debt left from an
	 * earlier hold would ring at our first look) */
	c->held_owe = true;
	c->owe_idle_ns = 0;
	c->owe_vi = c->v_i;
	c->owe_vd = c->v_d;
}

void tp_rx_idle(struct tp_conn *c, bool sleep)
{
	uint32_t v;

	if (likely(!c->held_owe))
		return;
	if (c->v_i != c->owe_vi || c->v_d != c->owe_vd) {
		c->held_owe = false; /* it published since: its writes see our releases */
		return;
	}
	if (!sleep) {
		uint64_t now = clock_mono_ns();

		if (!c->owe_idle_ns) {
			c->owe_idle_ns = now;
			return;
		}
		if (now - c->owe_idle_ns < TP_HELD_RING_NS)
			return;
	}
	c->held_owe = false;
	if (tp_slot_word(c, TP_W_TX_WAIT, &v) && v)
		ntb_peer_db_ring(c->link->ntb);
}

/* Where validation stopped (v_d, v_i: they stay while gated) and the Retry's epoch they belong
 * to, then a barrier: the epoch word that asks comes after them (the sender reads them when it
 * sees the epoch: pairs with its acquire loads in tp_retx.c). */
static void retry_words(struct tp_conn *c)
{
	tp_peer_word(c, TP_W_FB_RETRY_D, c->v_d);
	tp_peer_word(c, TP_W_FB_RETRY_I, c->v_i);
	tp_peer_word(c, TP_W_FB_RETRY_EP, (uint32_t)(uint16_t)c->rx_epoch);
	ntb_to_peer_barrier(c->link->ntb);
}

/* Publish the feedback words (released space, CmpAck, epoch | detect ack). Unchanged words
 * are skipped unless ALL (timer republish, Detect answer: a write may have been lost). */
static void fb_publish_words(struct tp_conn *c, bool all)
{
	uint32_t ep = (uint32_t)c->rx_epoch | (uint32_t)c->det_seen << 16;

	/* release: every read of the rings (rec_copy(), tp_rx_data_copy(), the inline slots) before
	 * the words that hand their space back (FB_RX_I, FB_RX_D) and acknowledge it (ACK_MSN):
	 * the sender rewrites that space once it sees them. Pairs with the acquire loads of the
	 * FB words in tp_tx_feedback() (tp_slot_word()) before its next writes. No instruction on
	 * x86. */
	ntb_from_peer_barrier();
	if (all || c->c_i != c->pub_i)
		tp_peer_word(c, TP_W_FB_RX_I, c->c_i);
	if (all || c->c_d != c->pub_d)
		tp_peer_word(c, TP_W_FB_RX_D, c->c_d);
	if (all || c->v_msn != c->pub_ack)
		tp_peer_word(c, TP_W_FB_ACK_MSN, c->v_msn);
	if (all || ep != c->pub_ep)
		tp_peer_word(c, TP_W_FB_EPOCH, ep);
	if (all)
		tp_rx_ring_republish(c);
	ntb_wc_flush(c->link->ntb);
	c->pub_i = c->c_i;
	c->pub_d = c->c_d;
	c->pub_ack = c->v_msn;
	c->pub_ep = ep;
	c->pub_tick = clock_ticks();
	c->fb_dirty = true;
	rx_wake_sender(c, all);
}

static void fb_publish(struct tp_conn *c)
{
	fb_publish_words(c, false);
}

/* Gated: gate_inl := the inline position after the last one published (a lost slot may lie
 * before it), so that its becoming published is an arrival. A ring's worth of sequence bytes:
 * only when gated and asking. */
static void gate_inline_frontier(struct tp_conn *c)
{
	uint32_t n = c->link->geom.inline_n, last = 0;

	for (uint32_t k = 0; k < n; k++)
		if (tp_rx_seq_ready(c, c->v_i + k))
			last = k + 1;
	c->gate_inl = c->v_i + last;
}

/* Data missing or corrupt: bump the epoch and ask for a retransmission (Retry). */
void tp_rx_fail_at(struct tp_conn *c, bool crc, const char *file, int line)
{
	LOG(LL_DEBUG, "transport: slot %u retry (epoch %u, msn %u, %s:%d)", c->slot,
	    c->rx_epoch + 1u, c->v_msn, file, line);
	if (crc)
		TP_STAT_ADD(c->st->crc_errors, 1);
	if (++c->rerr > c->link->params.max_err) {
		LOG(LL_DEBUG, "transport: slot %u: MaxErr reached", c->slot);
		tp_conn_maxerr(c, -ECONNRESET);
		return;
	}
	uint64_t now = tp_now_ms();

	c->rx_epoch++;
	c->gated = true;
	c->gate_deadline_ms = now + c->link->params.recv_timeout_ms;
	c->gate_reask_ns = clock_mono_ns() + (uint64_t)TP_REASK_US * 1000u;
	c->gate_reask_n = 0;
	c->gate_txd = tp_in_word(c->link, tp_slot_off(c->link, c->slot) + TP_W_TX_D);
	c->gate_ep_raw = tp_slot_raw(c, TP_W_TX_EPOCH);
	gate_inline_frontier(c);
	c->pub_ep = (uint32_t)c->rx_epoch | (uint32_t)c->det_seen << 16;
	/* release: our reads of the bad message before the Retry that makes the sender rewrite
	 * it; pairs with the acquire load of FB_EPOCH in tp_tx_feedback() */
	ntb_from_peer_barrier();
	/* where validation stopped, before the epoch that asks (the sender reads them when it
	 * sees the epoch: pairs with its acquire loads in retransmit()) */
	retry_words(c);
	/* twice: the epoch word is what announces the Retry, and with it lost both sides wait
	 * for a timer (the re-ask); a second write costs 8 bytes once per Retry */
	tp_peer_word(c, TP_W_FB_EPOCH, c->pub_ep);
	tp_peer_word(c, TP_W_FB_EPOCH, c->pub_ep);
	ntb_wc_flush(c->link->ntb);
	ntb_peer_db_ring(c->link->ntb);
}

/* Look at inline position POS for message MSN; the slot is copied to BUF (128 B, private) and
 * validated there. */
static enum tp_rx_look rx_inline(struct tp_conn *c, uint32_t pos, uint32_t msn, struct tp_rec *r,
			    uint8_t *buf)
{
	const volatile uint8_t *s = tp_rx_inline_at(c, pos);
	uint8_t flags;
	unsigned len;
	uint32_t m;

	if (!tp_rx_seq_ready(c, pos))
		return TP_RX_NONE;
	memcpy(buf, (const void *)s, 128); /* private copy, then validate */
	if (tp_inline_check(buf, c->nonce_in, &len, &m, &flags))
		return TP_RX_BAD;
	if (m != msn)
		return TP_RX_OTHER;
	r->msn = m;
	r->len = len;
	r->pos = pos;
	r->payload = tp_inline_off(len);
	r->ring = 0;
	r->flags = flags;
	r->type = 0;
	r->footprint = 1;
	return TP_RX_OK;
}

/* A receive context is reused with whatever its previous connection left in the inline ring.
 * Where a slot of the first lap carries the sequence byte this connection expects there (the
 * nonce is chosen so that none does, but a late write may) yet fails its check, note it: a
 * readiness hint that saw only the byte would call the connection readable, and a program
 * that then reads a blocking socket would block on a quiet connection (a select() loop's
 * control socket: iperf3's client hung so). Runs at set-up, before the reader looks; a real
 * message already there passes the check and is not noted. */
void tp_rx_note_stale(struct tp_conn *c)
{
	uint8_t buf[128], again[128];
	unsigned len;
	uint32_t msn;
	uint8_t flags;

	c->n_stale = 0;
	for (uint32_t pos = 0; pos < c->link->geom.inline_n && c->n_stale < TP_STALE_MAX; pos++) {
		if (!tp_rx_seq_ready(c, pos))
			continue;
		memcpy(buf, (const void *)tp_rx_inline_at(c, pos), sizeof(buf));
		if (!tp_inline_check(buf, c->nonce_in, &len, &msn, &flags))
			continue;
		/* a slot being written as we copied it (the peer's first messages may be on
		 * their way already) is not noted: only one that stays the same */
		memcpy(again, (const void *)tp_rx_inline_at(c, pos), sizeof(again));
		if (memcmp(buf, again, sizeof(buf)) != 0)
			continue;
		c->stale_pos[c->n_stale] = pos;
		memcpy(&c->stale_sig[c->n_stale], buf + 120, 8);
		c->n_stale++;
	}
	if (c->n_stale)
		LOG(LL_DEBUG, "transport: slot %u: %u first-lap inline slot(s) left by an earlier "
		    "connection look published", c->slot, c->n_stale);
}

/*
 * The sender writes TX_D after every data-ring message, so a receiver that read the word for
 * every message moved its cache line between the cores twice a message (the sender's store,
 * our load) beside the message's own lines: the data ring's messages cost about twice the
 * transfers of inline ones, which publish themselves (their sequence byte). What a reading of
 * TX_D covered stays published until we release it (the sender writes only released space;
 * a retransmission rewrites it while we are gated, and the epoch that ends the gate is read
 * with acquire after the rewrite), so while validation is behind the last reading the reading
 * serves; the word is read again (acquire: pairs with the release before the sender's store)
 * only once validation reached it. Under rx_lock.
 */
bool tp_rx_txd(struct tp_conn *c, uint32_t *ret)
{
	uint32_t ahead = c->rx_txd - c->v_d;

	if (ahead != 0 && ahead <= c->link->geom.qsize) {
		*ret = c->rx_txd;
		return true;
	}
	if (!tp_slot_word(c, TP_W_TX_D, ret))
		return false;
	if (c->v_d - *ret <= c->link->geom.qsize) {
		/* behind: messages validated before it published them (tp_recv.c:
		 * rx_short_direct()); the cache says nothing ahead (not the word's value, which
		 * would read as ahead once v_d went on ~4 GiB) */
		c->rx_txd = c->v_d;
		*ret = c->v_d;
		return true;
	}
	c->rx_txd = *ret;
	return true;
}

enum tp_rx_look tp_rx_data(struct tp_conn *c, uint32_t msn, struct tp_rec *r, bool check)
{
	uint32_t q = c->link->geom.qsize, txd, avail, fp, crc;
	struct tp_desc d;

	/* acquire (tp_rx_txd(), when it reads the word): TX_D before the descriptor and payload it
	 * publishes; pairs with ntb_to_peer_barrier() in publish_tx() */
	if (!c->in_ring || !tp_rx_txd(c, &txd))
		return TP_RX_NONE; /* (no data ring granted: the sender writes none) */
	avail = txd - c->v_d;
	if (avail == 0)
		return TP_RX_NONE;
	if (avail > q || avail < TP_DESC_SIZE)
		return TP_RX_BAD;
	if (__builtin_expect(!c->rx_faulted, 0))
		/* the ring's pages the published bytes reach, in a call per part of the ring, not a
		 * fault per page (a fresh process), once per part and process */
		c->rx_faulted = tp_link_ring_prefault(c->link, false, c->ent->ring,
						      (uint64_t)(tp_rx_ring(c) - c->link->in), q,
						      c->v_d, avail);
	memcpy(&d, (const void *)(tp_rx_ring(c) + (c->v_d & (q - 1))), sizeof(d));
	if (d.msn != msn)
		return TP_RX_OTHER;
	if ((d.type != TP_MT_SHORT && d.type != TP_MT_LONG) || d.len > q)
		return TP_RX_BAD;
	fp = tp_footprint(d.type, c->v_d, d.len);
	if (fp > avail)
		return TP_RX_BAD;
	if (check) {
		/* the head message for a read smaller than it: checked as it is copied into the
		 * bounce buffer it will be read from (one pass, not a check now and the bounce's
		 * checked copy at the read) */
		bool bounce = c->rx_bounce_want && c->rec_head == c->rec_tail &&
			      tp_rx_bounce_reserve(c, d.len) == 0;

		c->rx_bounce_want = false;
		if (bounce)
			c->rx_bounce_ok = false;
		crc = tp_rx_data_copy(c, bounce ? c->rx_bounce : NULL,
				      c->v_d + tp_payload_gap(d.type, c->v_d), d.len, c->dseed_in,
				      bounce);
		if (tp_desc_crc(crc, &d) != d.crc)
			return TP_RX_BAD;
		if (!bounce)
			c->rx_checks++;
		if (bounce) {
			c->rx_bounce_ok = true;
			c->rx_bounce_pos = c->v_d;
			c->rx_bounce_msn = msn;
		}
	}
	r->desc = d;
	r->msn = msn;
	r->len = d.len;
	r->pos = c->v_d;
	r->payload = tp_payload_gap(d.type, c->v_d);
	r->footprint = fp;
	r->ring = 1;
	r->flags = d.flags;
	r->type = d.type;
	return TP_RX_OK;
}

/* Gated, the sender's answer to our Retry (its epoch) not seen yet. */
static void rx_gated(struct tp_conn *c, bool have_epoch, uint16_t det)
{
	uint64_t now = tp_now_ms(), now_ns = clock_mono_ns(),
		 txd = tp_in_word(c->link, tp_slot_off(c->link, c->slot) + TP_W_TX_D),
		 ep_raw = tp_slot_raw(c, TP_W_TX_EPOCH);
	/* the sender wrote its epoch word (its answer, probably) and the link spoilt it */
	bool ep_spoilt = !have_epoch && ep_raw != c->gate_ep_raw;

	c->gate_ep_raw = ep_raw;

	if (now > c->gate_deadline_ms) {
		tp_rx_fail(c, false); /* TimerRcvData: ask again, with a new epoch */
		return;
	}
	if (have_epoch && det != c->det_seen) {
		/* a Detect while we wait for the sender's retransmission: it has not seen our
		 * Retry (its word lost?): answer with all the feedback words, the Retry's epoch
		 * among them, and ring */
		c->det_seen = det;
	} else if (!ep_spoilt && txd == c->gate_txd && now_ns < c->gate_reask_ns &&
		   (c->gate_inl - c->v_i >= c->link->geom.inline_n ||
		    !tp_rx_seq_ready(c, c->gate_inl))) {
		return;
	}
	/* The sender publishes data (TX_D moved, or a slot past those published at the Retry) it
	 * wrote after our Retry without the epoch that answers it (the Retry's word, or its epoch
	 * word, was lost), its epoch word came spoilt, or it stays silent past the re-ask
	 * interval: the same epoch again,
	 * with every feedback word, and the doorbell. A sender that already retransmitted for it
	 * writes its epoch word again with its next data (publish_tx(), send_inline()); one that
	 * never saw the Retry retransmits now. No error is counted: TimerRcvData
	 * (gate_deadline_ms) stays what bounds the wait. */
	c->gate_txd = txd;
	gate_inline_frontier(c);
	if (c->gate_reask_n < TP_REASK_MAX_SHIFT)
		c->gate_reask_n++;
	c->gate_reask_ns = now_ns + ((uint64_t)TP_REASK_US * 1000u << c->gate_reask_n);
	retry_words(c); /* (one of them lost: the sender waits for these) */
	fb_publish_words(c, true);
	ntb_peer_db_ring(c->link->ntb);
}

/* Message R, validated, joins the record queue (HEAD: it is its first record, validated in
 * the inline hold). */
static void rec_take(struct tp_conn *c, const struct tp_rec *r, bool head)
{
	if (head && r->ring == 0) {
		c->inl_hold_ok = true;
		c->inl_hold_pos = r->pos;
		c->inl_hold_msn = r->msn;
	}
	c->recs[c->rec_tail % TP_RECS] = *r;
	if (c->rec_skip && c->rec_tail == c->rec_head) {
		/* adopted after exec: the old image had consumed this much of it */
		c->rec_off = c->rec_skip < r->len ? c->rec_skip : r->len;
		c->rec_skip = 0;
	}
	c->rec_tail++;
	c->rec_bytes += r->len + 1; /* +1: a FIN counts as something to read */
	c->v_msn++;
	c->rerr = 0;
	if (r->flags & TP_MSG_FIN)
		/* relaxed: under rx_lock (tp_rx_fin_seen()) */
		atomic_store_explicit(&c->fin_rcvd_v, true, memory_order_relaxed);
}

/* A new Detect number DET: still missing what the sender says it sent → Retry; else
 * DetectAck. Either way all our feedback words again, and the doorbell. */
static void rx_detect_answer(struct tp_conn *c, uint16_t det, uint32_t want)
{
	uint32_t next;

	c->det_seen = det;
	if (tp_slot_word(c, TP_W_TX_NEXT_MSN, &next) && next != c->v_msn &&
	    next - c->v_msn < (1u << 31) && !tp_rx_fin_seen(c) && !c->gated && c->rec_bytes < want)
		tp_rx_fail(c, c->inline_bad);
	fb_publish_words(c, true);
	/* the prober waits for this answer (it may not have asked to be rung: a sender that
	 * waits for input, as a ping-pong's does); asleep in tp_wait() on this connection's
	 * word, that word alone (the doorbell woke every reader of its side) */
	if (!tp_wake_word_only(c))
		ntb_peer_db_ring(c->link->ntb);
}

/* Validate ahead (under rx_lock): move messages in MSN order from the rings to the private
 * record queue; on evidence of loss or corruption, Retry. Also answers Detect. */
void tp_rx_progress(struct tp_conn *c, uint32_t want)
{
	uint32_t v;
	uint16_t txe = 0, det;
	bool have_epoch;

	if (tp_conn_err(c))
		return;
	tp_rx_ring_service(c, false); /* a request for a data ring, or its return */
	have_epoch = tp_slot_word(c, TP_W_TX_EPOCH, &v);
	if (have_epoch)
		txe = (uint16_t)v;
	det = have_epoch ? (uint16_t)(v >> 16) : c->det_seen;
	if (c->gated) {
		if (have_epoch && tp_rt_epoch_ok(c->rx_epoch, txe)) {
			c->gated = false;
		} else {
			rx_gated(c, have_epoch, det);
			return;
		}
	}
	while (c->rec_tail - c->rec_head < TP_RECS && !tp_rx_fin_seen(c) && c->rec_bytes < want) {
		struct tp_rec r;
		uint8_t scratch[128];
		/* the head record's slot is validated in the hold it is delivered from */
		bool head = c->rec_tail == c->rec_head;
		uint8_t *buf = head ? c->inl_hold : scratch;
		enum tp_rx_look pi;

		if (head)
			c->inl_hold_ok = false;
		pi = rx_inline(c, c->v_i, c->v_msn, &r, buf);

		if (pi == TP_RX_OK) {
			c->v_i++;
		} else {
			enum tp_rx_look pd = tp_rx_data(c, c->v_msn, &r, true);

			/* The inline probe came first: a later data message seen now (tx_d read with
			 * acquire) proves an inline one published before it is visible by now. */
			if (pd == TP_RX_OTHER && pi == TP_RX_NONE &&
			    (pi = rx_inline(c, c->v_i, c->v_msn, &r, buf)) == TP_RX_OK) {
				c->v_i++;
				goto take;
			}
			if (pd == TP_RX_OK) {
				c->v_d += r.footprint;
			} else if (pd == TP_RX_BAD || pd == TP_RX_OTHER || pi == TP_RX_OTHER) {
				LOG(LL_DEBUG, "transport: slot %u msn %u: inline %d data %d (v_i %u v_d %u)",
				    c->slot, c->v_msn, pi, pd, c->v_i, c->v_d);
				tp_rx_fail(c, pd == TP_RX_BAD || pi == TP_RX_BAD);
				return;
			} else {
				/* nothing in the data ring: an unreadable or unpublished inline slot is
				 * an error only if a later message shows up behind it (acquire on its
				 * sequence byte: the sender wrote ours before it, so ours was lost) */
				struct tp_rec r2;

				if (rx_inline(c, c->v_i + 1, c->v_msn + 1, &r2, scratch) == TP_RX_OK) {
					tp_rx_fail(c, pi == TP_RX_BAD);
					return;
				}
				c->inline_bad = pi == TP_RX_BAD;
				break;
			}
		}
take:
		rec_take(c, &r, head);
	}
	if (have_epoch && det != c->det_seen)
		rx_detect_answer(c, det, want);
}

static bool fb_pending(const struct tp_conn *c)
{
	return c->c_d != c->pub_d || c->c_i != c->pub_i || c->v_msn != c->pub_ack;
}

/* Release what was consumed, lazily: every feedback write costs the sender a cache miss (and
 * us a fence), so a message is not worth one. Published when a quarter of the inline ring (half
 * of a small one: tp_inline_keep()) or an eighth of the data ring was consumed since the last
 * time (so a sender never finds the ring full while we have drained it: what we hold back is
 * less than half of either ring),
 * when the sender asks for it (TX_WAIT: it waits for room, or holds a merged message), at end
 * of stream (its linger waits for the FIN's CmpAck), and by tp_rx_flush_feedback() before we
 * sleep and from the timers. */
static void rx_release(struct tp_conn *c)
{
	uint32_t qs = c->link->geom.qsize, n = c->link->geom.inline_n, waits;

	if (!fb_pending(c))
		return;
	if (c->c_d - c->pub_d >= qs / 8u || c->c_i - c->pub_i >= tp_inline_keep(n) || c->eof ||
	    (tp_slot_word(c, TP_W_TX_WAIT, &waits) && waits))
		fb_publish(c);
}

void tp_rx_release(struct tp_conn *c)
{
	rx_release(c);
}

/* A request answered, or an answer read, waits for no quarter of a ring: the peer that sent it
 * goes quiet now (it waits for our answer, or thinks before its next request), and what it sees
 * unacknowledged its quick probe asks about after TP_QUICK_PROBE_US (a Detect: a doorbell, and
 * the helper of a peer that is busy elsewhere woken to answer it: 1.8 Detects per exchange of
 * a client that paused 0.5 ms between requests). So the read that consumed everything
 * validated publishes at once when the connection takes turns, once per turn, unless the last
 * publication is recent (TP_TURN_TICKS): a fast ping-pong's lazy releases come often enough, and
 * a publication before each answer cost it 0.09 µs one-way (its stores drain to lines the peer
 * holds). A one-way stream's reader (it never sends) keeps the lazy release. */
void tp_rx_release_turn(struct tp_conn *c)
{
	if ((c->rx_turn || c->rx_first) && c->rec_head == c->rec_tail) {
		bool first = c->rx_first;

		c->rx_turn = false;
		c->rx_first = false;
		/* (signed: a stamp another CPU's counter made a little ahead is recent; the set-up's
		 * publication does not count against the first read's: tp_conn_new()) */
		if (fb_pending(c) &&
		    (first || (int64_t)(clock_ticks() - c->pub_tick) >= (int64_t)TP_TURN_TICKS)) {
			fb_publish(c);
			return;
		}
	}
	rx_release(c);
}

void tp_rx_flush_feedback(struct tp_conn *c)
{
	if (fb_pending(c))
		fb_publish(c);
}

/* Raw word W of the sender's that only a death reads (TP_W_TX_HELD, TX_HELD2, TX_SENT). */
static uint64_t held_word(const struct tp_conn *c, uint32_t w)
{
	const volatile uint8_t *p = c->link->in + tp_slot_off(c->link, c->slot) + w;

	/* acquire: read after the words that say the sender is dead and what it published */
	return atomic_load_explicit((const _Atomic uint64_t *)(const void *)p,
				    memory_order_acquire);
}

/* What held-message word W says against our next MSN: 0 nothing held (0, or a message we
 * validated already: the sender died between publishing it and clearing the word, or the clear
 * was lost), 1 the next message, -1 a later one (messages before it that we never saw: a lost
 * inline slot). A word further ahead than the inline ring reaches is taken for a stale one (a
 * clear lost 32768 messages ago reads so): 0. */
static int held_says(const struct tp_conn *c, uint64_t w)
{
	uint16_t ahead = (uint16_t)((uint16_t)w - (uint16_t)c->v_msn);

	if (!w || ahead >= 0x8000u || ahead > c->link->geom.inline_n)
		return 0;
	return ahead ? -1 : 1;
}

bool tp_rx_held_next(const struct tp_conn *c)
{
	return held_says(c, held_word(c, TP_W_TX_HELD)) ||
	       held_says(c, held_word(c, TP_W_TX_HELD2));
}

/*
 * A dead sender's held merged message (tp_tx_merge.c), at the end of what it published (all of
 * it validated): its bytes, which its send()s accepted, are in our window, its descriptor only
 * in TP_W_TX_HELD (twice: TX_HELD2). Under rx_lock. 1: the message, checked against that CRC,
 * joins the record queue as the stream's last (a FIN after its bytes, as the sender's kernel
 * would end it); 0: nothing held (held_says()); -1: a held message that does not check out,
 * is not next, or whose two copies differ (a lost write): bytes lost, and a reset says so (an
 * end of stream would hide them).
 */
static int rx_held_take(struct tp_conn *c)
{
	uint64_t w = held_word(c, TP_W_TX_HELD), w2 = held_word(c, TP_W_TX_HELD2);
	int says = held_says(c, w), says2 = held_says(c, w2);
	uint32_t q = c->link->geom.qsize, len = (uint16_t)(w >> 16), fp;
	struct tp_desc d = { .type = TP_MT_SHORT, .len = len, .msn = c->v_msn,
			     .crc = (uint32_t)(w >> 32) };
	struct tp_rec r;

	if (!says && !says2)
		return 0;
	fp = tp_footprint(TP_MT_SHORT, c->v_d, len);
	/* (the copies differ: one write of them was lost, and which says what the sender held
	 * is unknown) */
	if (w != w2 || says != 1 || !c->in_ring || !len || (c->v_d & (q - 1)) + fp > q ||
	    fp > q - (c->v_d - c->c_d) ||
	    tp_desc_crc(tp_rx_data_copy(c, NULL, c->v_d + TP_DESC_SIZE, len, c->dseed_in, false),
			&d) != d.crc) {
		LOG(LL_INFO, "transport: slot %u: the peer process died holding a merged message "
		    "that does not check out (%u bytes, msn %u/%u, ours %u): reset", c->slot, len,
		    (unsigned)(uint16_t)w, (unsigned)(uint16_t)w2, c->v_msn);
		return -1;
	}
	LOG(LL_DEBUG, "transport: slot %u: the peer process died holding a merged message of %u "
	    "bytes: delivered, then end of stream", c->slot, len);
	r = (struct tp_rec){ .desc = d, .msn = c->v_msn, .len = len, .pos = c->v_d,
			     .payload = tp_payload_gap(TP_MT_SHORT, c->v_d), .footprint = fp,
			     .ring = 1, .flags = TP_MSG_FIN, .type = TP_MT_SHORT };
	/* (the FIN in the record's flags only: its descriptor stays the one its CRC covers, which
	 * the copy checks again, rec_copy()) */
	rec_take(c, &r, c->rec_tail == c->rec_head);
	c->v_d += fp;
	return 1;
}

/* Does the sender's TP_W_TX_SENT name an inline message after everything we validated? A word
 * that fails its check (another connection's, a spoilt write), never written (0), or further
 * ahead than the inline ring holds says nothing: with a data-ring message between, the gap
 * gates the reader or TX_D shows it (tp_rx_death_end()). */
static bool rx_sent_ahead(const struct tp_conn *c)
{
	uint64_t w = held_word(c, TP_W_TX_SENT);
	uint32_t ahead = (uint32_t)w - c->v_msn;

	return w && w == TP_SENT_WORD(c->nonce_in, (uint32_t)w) && ahead &&
	       ahead <= c->link->geom.inline_n;
}

/*
 * A data-ring message written and not published may lie at v_d: a descriptor there names the
 * next MSN (in D, its footprint in *RET_FP, its payload's offset in *RET_GAP) while TX_D does not
 * cover it (its sender died between the two stores, or TX_D's write was lost), whole, and its
 * CRC checks out under this grant's seed. Asked only of a ring nothing writes into any more (its
 * sender dead or gone, or drained and giving it back), so the answer is kept for the place
 * (rx_unpub at rx_unpub_vd; a grant clears it): the CRC is computed once. Before the ring's
 * first lap in this grant (tp_rx_lapped()) a place may hold a descriptor an earlier holder left
 * with the same MSN: only the seed tells it apart (tp_ring_seed(): the grant's generation), and
 * does but for one time in 2^32, the odds of any spoilt message passing its CRC; the live
 * reader's look before TX_D (rx_short_direct()), which comes again and again, waits for the
 * lap instead. Under rx_lock.
 */
bool tp_rx_unpublished_next(struct tp_conn *c, struct tp_desc *d, uint32_t *ret_fp,
			    uint32_t *ret_gap)
{
	uint32_t q = c->link->geom.qsize, fp, gap;

	if (!c->in_ring || (c->rx_unpub == TP_UNPUB_NO && c->rx_unpub_vd == c->v_d))
		return false;
	memcpy(d, (const void *)(tp_rx_ring(c) + (c->v_d & (q - 1))), sizeof(*d));
	if (d->msn != c->v_msn || (d->type != TP_MT_SHORT && d->type != TP_MT_LONG) ||
	    d->len > q)
		return false;
	/* acquire: the descriptor before the payload (the sender's order of stores) */
	atomic_thread_fence(memory_order_acquire);
	fp = tp_footprint(d->type, c->v_d, d->len);
	gap = tp_payload_gap(d->type, c->v_d);
	if (fp > q - (c->v_d - c->c_d))
		return false; /* (not whole: over what is still unread) */
	if (c->rx_unpub != TP_UNPUB_YES || c->rx_unpub_vd != c->v_d) {
		c->rx_unpub_vd = c->v_d;
		c->rx_unpub = tp_desc_crc(tp_rx_data_copy(c, NULL, c->v_d + gap, d->len, c->dseed_in,
							  false), d) == d->crc ? TP_UNPUB_YES
										: TP_UNPUB_NO;
		if (c->rx_unpub == TP_UNPUB_NO)
			return false;
	}
	*ret_fp = fp;
	*ret_gap = gap;
	return true;
}

/*
 * A dead sender's message written whole and not published (tp_rx_unpublished_next()): its
 * send() may have returned. Taken (a record: the reader delivers it, and the next look goes on
 * from there), as rx_short_direct() takes one before TX_D. Under rx_lock, record queue empty.
 * Returns whether one was taken. One that does not check out (spoilt, or not written whole when
 * the sender died) is nothing taken: as before, an end of file short by it.
 */
static bool rx_unpublished_take(struct tp_conn *c)
{
	uint32_t fp, gap;
	struct tp_desc d;
	struct tp_rec r;

	if (!tp_rx_unpublished_next(c, &d, &fp, &gap))
		return false;
	if (c->v_d == 0)
		c->rx_unpub_from0 = true; /* (the death end's test of TX_D) */
	LOG(LL_DEBUG, "transport: slot %u: the peer process died after writing message %u (%u "
	    "bytes) and before publishing it: delivered", c->slot, c->v_msn, d.len);
	r = (struct tp_rec){ .desc = d, .msn = c->v_msn, .len = d.len, .pos = c->v_d,
			     .payload = gap, .footprint = fp, .ring = 1, .flags = d.flags,
			     .type = d.type };
	rec_take(c, &r, true);
	c->v_d += fp;
	return true;
}

/* Whether tp_rx_progress() would find nothing to do (under rx_lock, record queue empty): not
 * gated, the next inline slot not published, and the TX_D and TX_EPOCH words exactly as their
 * last valid reading (tp_slot_word()'s cache), with no Detect pending in the latter. Loads of
 * our own window only (cache hits while the sender is quiet): the -EAGAIN path of a reader
 * that waits in a loop (or spins on tp_readable_bytes()) skips the checked-word and ring
 * probes of the full validation. */
bool tp_rx_death_end(struct tp_conn *c)
{
	uint32_t st = tp_st_flags(c), v;
	bool unread;

	if (c->eof)
		return true;
	/* a death (its TCP socket ended, or its host reclaimed it), not a reset or a lost link
	 * (acquire: pairs with the store of peer_died in tp_witness_look(), tp_witness.c, after its
	 * look at the peer) */
	if ((st & TP_ST_RST) ||
	    !(atomic_load_explicit(&c->peer_died, memory_order_acquire) || (st & TP_ST_GONE)) ||
	    c->rec_head != c->rec_tail)
		return false;
	/* alive but silent before it died: what it wrote meanwhile may never have arrived */
	/* (acquire: pairs with the store of silent_alive in tp_witness_look(), tp_witness.c) */
	if (atomic_load_explicit(&c->silent_alive, memory_order_acquire))
		return false;
	tp_rx_progress(c, UINT32_MAX);
	if (c->rec_head != c->rec_tail)
		return false;
	/* everything it published was validated: no Retry pending, no bad slot, the data ring's
	 * index and (when it said one) its next MSN reached */
	if (c->gated || c->inline_bad)
		return false;
	/* (TX_D behind v_d: it died after a message's descriptor and before TX_D, and the
	 * message was validated by its descriptor: rx_short_direct(), rx_unpublished_take(). TX_D
	 * not valid: nothing validated from the ring, or everything was taken unpublished from
	 * its start with TX_D never read valid here (the connection's first messages' TX_D never
	 * came); otherwise a spoilt TX_D may hide published messages: a reset.) */
	if (tp_slot_word(c, TP_W_TX_D, &v) ? v != c->v_d && c->v_d - v > c->link->geom.qsize
					    : c->v_d != 0 && !(c->rx_unpub_from0 &&
							       !tp_wc_raw(c, TP_W_TX_D)))
		return false;
	/* a message it wrote and did not publish (the reader reads it, then looks again) */
	if (rx_unpublished_take(c))
		return true;
	if (tp_slot_word(c, TP_W_TX_NEXT_MSN, &v) && (int32_t)(v - c->v_msn) > 0)
		return false;
	/* it held a merged message: delivered, then the end (or a reset if it does not check
	 * out) */
	switch (rx_held_take(c)) {
	case 1:
		return true;
	case -1:
		return false;
	default:
		break;
	}
	/* an inline message with bytes that it sent after everything we validated: its slot's
	 * write was lost (a reset: an end of file would hide its bytes) */
	if (rx_sent_ahead(c))
		return false;
	/* bytes we sent that it never read: its kernel would have reset the connection */
	if (tp_mutex_trylock(&c->tx_lock))
		return false;
	unread = c->tx_i != c->fb_rx_i || c->tx_d != c->fb_rx_d;
	tp_mutex_unlock(&c->tx_lock);
	if (unread)
		return false;
	LOG(LL_DEBUG, "transport: slot %u: peer process died with every byte delivered: end of "
	    "stream", c->slot);
	c->eof = true;
	/* relaxed: under rx_lock (tp_rx_fin_seen()) */
	atomic_store_explicit(&c->fin_rcvd_v, true, memory_order_relaxed);
	return true;
}

bool tp_rx_unread(struct tp_conn *c, bool try)
{
	size_t n;

	if (try ? tp_mutex_trylock(&c->rx_lock) != 0 : (tp_mutex_lock(&c->rx_lock), false))
		return false;
	n = tp_rx_queued(c);
	tp_mutex_unlock(&c->rx_lock);
	return n > 0;
}

size_t tp_rx_queued(struct tp_conn *c)
{
	size_t n = 0;

	/* (a reader spinning on this finds nothing new most of the time: skip the validation) */
	if (!tp_rx_quiet(c))
		tp_rx_progress(c, UINT32_MAX);
	for (uint32_t h = c->rec_head; h != c->rec_tail; h++)
		n += c->recs[h % TP_RECS].len;
	return n - c->rec_off;
}

bool tp_rx_quiet(struct tp_conn *c)
{
	const _Atomic uint64_t *base = (const _Atomic uint64_t *)(const void *)tp_rx_slot(c);
	uint64_t txd, txe;

	/* (the slot after the next one too: published behind a lost one, it is news: the loss,
	 * which tp_rx_progress() answers with a Retry at once) */
	if (c->gated || tp_rx_seq_ready(c, c->v_i) || tp_rx_seq_ready(c, c->v_i + 1))
		return false;
	/* data-ring messages known published and not validated yet (tp_rx_txd()): no load */
	if (c->rx_txd != c->v_d && c->rx_txd - c->v_d <= c->link->geom.qsize)
		return false;
	/* acquire: as tp_in_word() (pairs with the barrier before the sender publishes: in
	 * tp_tx_publish(), the release fence in send_short_direct()) */
	txd = atomic_load_explicit(&base[TP_W_TX_D / 8u], memory_order_acquire);
	txe = atomic_load_explicit(&base[TP_W_TX_EPOCH / 8u], memory_order_acquire);
	/* A valid word other than its last valid reading is news for the full look; one that fails
	 * its check reads as that reading (tp_slot_raw_new(): an earlier connection's in a reused
	 * slot, taken for news, kept every connection there that never used a data ring from ever
	 * being quiet, and an epoll set looked at each of them on every wait) */
	if (tp_slot_raw_new(c, TP_W_TX_D, txd) || tp_slot_raw_new(c, TP_W_TX_EPOCH, txe))
		return false;
	txd = tp_wc_raw(c, TP_W_TX_D);
	txe = tp_wc_raw(c, TP_W_TX_EPOCH);
	/* (none valid yet is 0: no data yet, no epoch or Detect published yet) */
	/* (behind v_d: messages validated before it published them, tp_recv.c:
	 * rx_short_direct(): nothing new) */
	if (txd ? (uint32_t)txd != c->v_d && c->v_d - (uint32_t)txd > c->link->geom.qsize
		: c->v_d != 0)
		return false;
	return !txe || (uint16_t)(txe >> 16) == c->det_seen;
}

/* TimerRcvData, Detect answers, discarding for closed readers, feedback republication. */
/* Under rx_lock: as tp_rx_reask_wait() (the millisecond the re-ask falls in, rounded up). */
static uint32_t reask_next(const struct tp_conn *c)
{
	uint64_t now;

	if (!c->gated)
		return 0;
	now = clock_mono_ns();
	return c->gate_reask_ns > now ? (uint32_t)((c->gate_reask_ns - now + 999999u) / 1000000u)
				      : 1u;
}

uint32_t tp_rx_reask_wait(struct tp_conn *c, uint64_t now)
{
	uint32_t w = 0;

	(void)now; /* (re-asks run on the fine clock) */
	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		w = reask_next(c);
		tp_mutex_unlock(&c->rx_lock);
	}
	return w;
}

uint64_t tp_rx_reask_due_ns(struct tp_conn *c, bool *urgent)
{
	uint64_t due = 0;

	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		due = c->gated ? c->gate_reask_ns : 0;
		if (c->gated)
			*urgent = true;
		tp_mutex_unlock(&c->rx_lock);
	}
	return due;
}

uint32_t tp_rx_timers(struct tp_conn *c)
{
	uint32_t next = 0;

	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		/* acquire: pairs with the store of closed in tp_close() (tp_close.c): the program
		 * closed it, nobody will read */
		bool discard = c->rd_shut || atomic_load_explicit(&c->closed, memory_order_acquire);
		uint32_t v;
		/* Validation (a CRC pass over the data) is the reader's job, done on its own core
		 * when it reads: the timers validate only to answer a Detect (is data missing?) and
		 * to discard for a reader that is gone. The epoch gate and TimerRcvData run always. */
		bool detect = tp_slot_word(c, TP_W_TX_EPOCH, &v) && (uint16_t)(v >> 16) != c->det_seen;

		tp_rx_progress(c, detect || discard ? 1 : 0);
		tp_rx_ring_service(c, true); /* (and a grant asked back while others wait) */
		if (discard) {
			/* nobody will read: discard, so the peer's sender is not blocked */
			while (c->rec_head != c->rec_tail) {
				/* counted: a failover resends from what was consumed */
				c->rx_discarded += c->recs[c->rec_head % TP_RECS].len - c->rec_off;
				tp_rx_rec_done(c, &c->recs[c->rec_head % TP_RECS]);
			}
		}
		/* what was consumed since the last release (rx_release() is lazy) */
		tp_rx_flush_feedback(c);
		if (c->fb_dirty) {
			fb_publish_words(c, true);
			c->fb_dirty = false;
			/* (a lost release may be what a sender waiting for room, or holding a merged
			 * message, still waits for: as rx_wake_sender() would have rung) */
			tp_wake_peer(c, TP_W_TX_WAIT);
		}
		next = reask_next(c);
		tp_mutex_unlock(&c->rx_lock);
	}
	return next;
}
