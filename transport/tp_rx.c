/* SPDX-License-Identifier: MIT */
/* The receive side: validation in MSN order across both rings (private copies, bounds
 * checked), delivery with the CRC fused into the copy, release of space, Retry. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tp_int.h"
#include "util/crc32c.h"
#include "util/log.h"

/* --- receive side --------------------------------------------------------------------------- */

static const volatile uint8_t *in_slot(const struct tp_conn *c)
{
	return c->link->in + tp_slot_off(c->link, c->slot);
}

static const volatile uint8_t *in_inline(const struct tp_conn *c, uint32_t pos)
{
	return tp_in_inline(c->link, c->slot, pos);
}

static const volatile uint8_t *in_data(const struct tp_conn *c)
{
	return in_slot(c) + TP_SLOT_RINGS + c->link->geom.inline_n * 128u;
}

/* Copy LEN bytes at data-ring position POS out of the window (wrap aware), fusing the CRC. */
static uint32_t data_copy(const struct tp_conn *c, uint8_t *dst, uint32_t pos, uint32_t len,
			  uint32_t crc, bool copy)
{
	uint32_t q = c->link->geom.qsize, p = pos & (q - 1);
	uint32_t first = len < q - p ? len : q - p;
	const uint8_t *base = (const uint8_t *)in_data(c);

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

/* Publish the feedback words (released space, CmpAck, epoch | detect ack). Unchanged words
 * are skipped unless ALL (timer republish, Detect answer: a write may have been lost). */
static void fb_publish_words(struct tp_conn *c, bool all)
{
	uint32_t ep = (uint32_t)c->rx_epoch | (uint32_t)c->det_seen << 16;

	/* release: every read of the rings (rec_copy(), data_copy(), the inline slots) before
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
	ntb_wc_flush(c->link->ntb);
	c->pub_i = c->c_i;
	c->pub_d = c->c_d;
	c->pub_ack = c->v_msn;
	c->pub_ep = ep;
	c->fb_dirty = true;
	tp_wake_peer(c, TP_W_TX_WAIT);
}

static void fb_publish(struct tp_conn *c)
{
	fb_publish_words(c, false);
}

static bool inline_seq_ready(const struct tp_conn *c, uint32_t pos);

/* Gated: gate_inl := the inline position after the last one published (a lost slot may lie
 * before it), so that its becoming published is an arrival. A ring's worth of sequence bytes:
 * only when gated and asking. */
static void gate_inline_frontier(struct tp_conn *c)
{
	uint32_t n = c->link->geom.inline_n, last = 0;

	for (uint32_t k = 0; k < n; k++)
		if (inline_seq_ready(c, c->v_i + k))
			last = k + 1;
	c->gate_inl = c->v_i + last;
}

/* Data missing or corrupt: bump the epoch and ask for a retransmission (Retry). */
#define rx_fail(c, crc) rx_fail_at((c), (crc), __LINE__)
static void rx_fail_at(struct tp_conn *c, bool crc, int line)
{
	LOG(LL_DEBUG, "transport: slot %u retry (epoch %u, msn %u, tp_rx.c:%d)", c->slot,
	    c->rx_epoch + 1u, c->v_msn, line);
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
	c->gate_reask_ms = now + TP_REASK_MS;
	c->gate_reask_n = 0;
	c->gate_txd = tp_in_word(c->link, tp_slot_off(c->link, c->slot) + TP_W_TX_D);
	gate_inline_frontier(c);
	c->pub_ep = (uint32_t)c->rx_epoch | (uint32_t)c->det_seen << 16;
	/* release: our reads of the bad message before the Retry that makes the sender rewrite
	 * it; pairs with the acquire load of FB_EPOCH in tp_tx_feedback() */
	ntb_from_peer_barrier();
	/* where validation stopped, before the epoch that asks (the sender reads them when it
	 * sees the epoch: pairs with its acquire loads in retransmit()) */
	tp_peer_word(c, TP_W_FB_RETRY_D, c->v_d);
	tp_peer_word(c, TP_W_FB_RETRY_I, c->v_i);
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_FB_EPOCH, c->pub_ep);
	ntb_wc_flush(c->link->ntb);
	ntb_peer_db_ring(c->link->ntb);
}

enum probe { PR_NONE, PR_OK, PR_OTHER, PR_BAD };

/* Whether the sequence byte of inline position POS says the slot is written. */
static bool inline_seq_ready(const struct tp_conn *c, uint32_t pos)
{
	/* acquire: the sequence byte before the slot it publishes; pairs with the barrier in
	 * write_inline_slot() */
	return __atomic_load_n((const uint8_t *)in_inline(c, pos) + TP_INL_SEQ, __ATOMIC_ACQUIRE) ==
	       tp_inline_seq(pos, c->link->geom.log2n, c->seq_base_in);
}

/* Look at inline position POS for message MSN; the slot is copied to BUF (128 B, private) and
 * validated there. */
static enum probe rx_inline(struct tp_conn *c, uint32_t pos, uint32_t msn, struct tp_rec *r,
			    uint8_t *buf)
{
	const volatile uint8_t *s = in_inline(c, pos);
	uint8_t flags;
	unsigned len;
	uint32_t m;

	if (!inline_seq_ready(c, pos))
		return PR_NONE;
	memcpy(buf, (const void *)s, 128); /* private copy, then validate */
	if (tp_inline_check(buf, c->nonce_in, &len, &m, &flags))
		return PR_BAD;
	if (m != msn)
		return PR_OTHER;
	r->msn = m;
	r->len = len;
	r->pos = pos;
	r->payload = tp_inline_off(len);
	r->ring = 0;
	r->flags = flags;
	r->type = 0;
	r->footprint = 1;
	return PR_OK;
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
		if (!inline_seq_ready(c, pos))
			continue;
		memcpy(buf, (const void *)in_inline(c, pos), sizeof(buf));
		if (!tp_inline_check(buf, c->nonce_in, &len, &msn, &flags))
			continue;
		/* a slot being written as we copied it (the peer's first messages may be on
		 * their way already) is not noted: only one that stays the same */
		memcpy(again, (const void *)in_inline(c, pos), sizeof(again));
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
	c->rx_txd = *ret;
	return true;
}

static enum probe rx_data(struct tp_conn *c, uint32_t msn, struct tp_rec *r, bool check)
{
	uint32_t q = c->link->geom.qsize, txd, avail, fp, crc;
	struct tp_desc d;

	/* acquire (tp_rx_txd(), when it reads the word): TX_D before the descriptor and payload it
	 * publishes; pairs with ntb_to_peer_barrier() in publish_tx() */
	if (!tp_rx_txd(c, &txd))
		return PR_NONE;
	avail = txd - c->v_d;
	if (avail == 0)
		return PR_NONE;
	if (avail > q || avail < TP_DESC_SIZE)
		return PR_BAD;
	memcpy(&d, (const void *)(in_data(c) + (c->v_d & (q - 1))), sizeof(d));
	if (d.msn != msn)
		return PR_OTHER;
	if ((d.type != TP_MT_SHORT && d.type != TP_MT_LONG) || d.len > q)
		return PR_BAD;
	fp = tp_footprint(d.type, c->v_d, d.len);
	if (fp > avail)
		return PR_BAD;
	if (check) {
		crc = data_copy(c, NULL, c->v_d + tp_payload_gap(d.type, c->v_d), d.len,
				c->nonce_in, false);
		if (tp_desc_crc(crc, &d) != d.crc)
			return PR_BAD;
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
	return PR_OK;
}

/* Gated, the sender's answer to our Retry (its epoch) not seen yet. */
static void rx_gated(struct tp_conn *c, bool have_epoch, uint16_t det)
{
	uint64_t now = tp_now_ms(),
		 txd = tp_in_word(c->link, tp_slot_off(c->link, c->slot) + TP_W_TX_D);

	if (now > c->gate_deadline_ms) {
		rx_fail(c, false); /* TimerRcvData: ask again, with a new epoch */
		return;
	}
	if (have_epoch && det != c->det_seen) {
		/* a Detect while we wait for the sender's retransmission: it has not seen our
		 * Retry (its word lost?): answer with all the feedback words, the Retry's epoch
		 * among them, and ring */
		c->det_seen = det;
	} else if (txd == c->gate_txd && now < c->gate_reask_ms &&
		   (c->gate_inl - c->v_i >= c->link->geom.inline_n ||
		    !inline_seq_ready(c, c->gate_inl))) {
		return;
	}
	/* The sender publishes data (TX_D moved, or a slot past those published at the Retry) it
	 * wrote after our Retry without the epoch that answers it (the Retry's word, or its epoch
	 * word, was lost), or it stays silent past the re-ask interval: the same epoch again,
	 * with every feedback word, and the doorbell. A sender that already retransmitted for it
	 * writes its epoch word again with its next data (publish_tx(), send_inline()); one that
	 * never saw the Retry retransmits now. No error is counted: TimerRcvData
	 * (gate_deadline_ms) stays what bounds the wait. */
	c->gate_txd = txd;
	gate_inline_frontier(c);
	if (c->gate_reask_n < 16)
		c->gate_reask_n++;
	c->gate_reask_ms = now + ((uint64_t)TP_REASK_MS << c->gate_reask_n);
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
		c->fin_rcvd_v = true;
}

/* A new Detect number DET: still missing what the sender says it sent → Retry; else
 * DetectAck. Either way all our feedback words again, and the doorbell. */
static void rx_detect_answer(struct tp_conn *c, uint16_t det, uint32_t want)
{
	uint32_t next;

	c->det_seen = det;
	if (tp_slot_word(c, TP_W_TX_NEXT_MSN, &next) && next != c->v_msn &&
	    next - c->v_msn < (1u << 31) && !c->fin_rcvd_v && !c->gated && c->rec_bytes < want)
		rx_fail(c, c->inline_bad);
	fb_publish_words(c, true);
	/* the prober waits for this answer (it may not have asked to be rung: a sender that
	 * waits for input, as a ping-pong's does) */
	ntb_peer_db_ring(c->link->ntb);
}

/* Validate ahead (under rx_lock): move messages in MSN order from the rings to the private
 * record queue; on evidence of loss or corruption, Retry. Also answers Detect. */
void tp_rx_progress(struct tp_conn *c, uint32_t want)
{
	uint32_t v;
	uint16_t txe = 0, det;
	bool have_epoch;

	if (atomic_load(&c->error))
		return;
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
	while (c->rec_tail - c->rec_head < TP_RECS && !c->fin_rcvd_v && c->rec_bytes < want) {
		struct tp_rec r;
		uint8_t scratch[128];
		/* the head record's slot is validated in the hold it is delivered from */
		bool head = c->rec_tail == c->rec_head;
		uint8_t *buf = head ? c->inl_hold : scratch;
		enum probe pi;

		if (head)
			c->inl_hold_ok = false;
		pi = rx_inline(c, c->v_i, c->v_msn, &r, buf);

		if (pi == PR_OK) {
			c->v_i++;
		} else {
			enum probe pd = rx_data(c, c->v_msn, &r, true);

			/* The inline probe came first: a later data message seen now (tx_d read with
			 * acquire) proves an inline one published before it is visible by now. */
			if (pd == PR_OTHER && pi == PR_NONE &&
			    (pi = rx_inline(c, c->v_i, c->v_msn, &r, buf)) == PR_OK) {
				c->v_i++;
				goto take;
			}
			if (pd == PR_OK) {
				c->v_d += r.footprint;
			} else if (pd == PR_BAD || pd == PR_OTHER || pi == PR_OTHER) {
				LOG(LL_DEBUG, "transport: slot %u msn %u: inline %d data %d (v_i %u v_d %u)",
				    c->slot, c->v_msn, pi, pd, c->v_i, c->v_d);
				rx_fail(c, pd == PR_BAD || pi == PR_BAD);
				return;
			} else {
				/* nothing in the data ring: an unreadable or unpublished inline slot is
				 * an error only if a later message shows up behind it (acquire on its
				 * sequence byte: the sender wrote ours before it, so ours was lost) */
				struct tp_rec r2;

				if (rx_inline(c, c->v_i + 1, c->v_msn + 1, &r2, scratch) == PR_OK) {
					rx_fail(c, pi == PR_BAD);
					return;
				}
				c->inline_bad = pi == PR_BAD;
				break;
			}
		}
take:
		rec_take(c, &r, head);
	}
	if (have_epoch && det != c->det_seen)
		rx_detect_answer(c, det, want);
}

/* A record was consumed entirely: release its ring space. */
static void rec_done(struct tp_conn *c, const struct tp_rec *r)
{
	if (r->ring == 0) {
		c->c_i = r->pos + 1;
		TP_STAT_ADD(c->st->rx_msgs_inline, 1);
	} else {
		c->c_d = r->pos + r->footprint;
		if (r->type == TP_MT_LONG)
			TP_STAT_ADD(c->st->rx_msgs_long, 1);
		else
			TP_STAT_ADD(c->st->rx_msgs_short, 1);
	}
	if (r->flags & TP_MSG_FIN)
		c->eof = true;
	c->rec_bytes -= r->len + 1;
	c->rec_head++;
	c->rec_off = 0;
	c->rx_bounce_ok = false;
	c->inl_hold_ok = false;
}

static bool bounce_holds(const struct tp_conn *c, const struct tp_rec *r)
{
	return c->rx_bounce_ok && c->rx_bounce_pos == r->pos && c->rx_bounce_msn == r->msn;
}

/* Copy bytes OFF … OFF+N of record R to DST. The record was validated in the window, but the
 * window may have changed since (rule 3.4: a peer, a retransmission corrupted on the way, a
 * truncated shm file), so every byte delivered is CRC-checked on the copy that delivers it:
 * inline slots are copied privately and validated again; a data record taken whole is checked
 * while copied to DST (nothing counted on mismatch); one taken in parts is copied whole to the
 * bounce buffer, checked there, and served from it. 0, -EBADMSG (window changed) or -ENOMEM. */
static int rec_copy(struct tp_conn *c, const struct tp_rec *r, uint32_t off, uint8_t *dst,
		    size_t n)
{
	uint32_t crc;

	if (r->ring == 0) {
		uint8_t s[128], fl;
		unsigned len;
		uint32_t msn;

		if (c->inl_hold_ok && c->inl_hold_pos == r->pos && c->inl_hold_msn == r->msn) {
			/* validated when it was taken (tp_rx_progress), never changed since */
			memcpy(dst, c->inl_hold + r->payload + off, n);
			return 0;
		}
		memcpy(s, (const void *)in_inline(c, r->pos), sizeof(s));
		if (tp_inline_check(s, c->nonce_in, &len, &msn, &fl) || msn != r->msn ||
		    len != r->len || fl != r->flags)
			return -EBADMSG;
		memcpy(dst, s + r->payload + off, n);
		return 0;
	}
	if (bounce_holds(c, r)) {
		memcpy(dst, c->rx_bounce + off, n);
		return 0;
	}
	if (off == 0 && n == r->len) { /* common case: one pass, CRC fused into the copy */
		crc = data_copy(c, dst, r->pos + r->payload, r->len, c->nonce_in, true);
		return tp_desc_crc(crc, &r->desc) == r->desc.crc ? 0 : -EBADMSG;
	}
	if (c->rx_bounce_cap < r->len) { /* r->len ≤ qsize: checked by rx_data() */
		uint32_t cap = (uint32_t)ALIGN_UP(r->len, 4096u);
		uint8_t *b = malloc(cap);

		if (!b)
			return -ENOMEM;
		free(c->rx_bounce);
		c->rx_bounce = b;
		c->rx_bounce_cap = cap;
	}
	c->rx_bounce_ok = false;
	crc = data_copy(c, c->rx_bounce, r->pos + r->payload, r->len, c->nonce_in, true);
	if (tp_desc_crc(crc, &r->desc) != r->desc.crc)
		return -EBADMSG;
	c->rx_bounce_ok = true;
	c->rx_bounce_pos = r->pos;
	c->rx_bounce_msn = r->msn;
	memcpy(dst, c->rx_bounce + off, n);
	return 0;
}

/* A queued record no longer matches its CRC: the window changed after validation. Drop every
 * queued record (none is released: the sender still holds them all in its shadows), rewind
 * validation to the first one, and Retry; SKIP bytes of it were already delivered and are
 * skipped when it is validated again (as after exec). */
static void rx_rewind(struct tp_conn *c, uint32_t skip)
{
	LOG(LL_DEBUG, "transport: slot %u msn %u changed in the window after validation",
	    c->slot, c->recs[c->rec_head % TP_RECS].msn);
	c->v_msn = c->recs[c->rec_head % TP_RECS].msn;
	c->v_i = c->c_i; /* = position of the first queued inline record, or v_i if none */
	c->v_d = c->c_d; /* the same for the data ring */
	c->rec_tail = c->rec_head;
	c->rec_bytes = 0;
	c->rec_off = 0;
	c->rec_skip = skip;
	c->fin_rcvd_v = false;
	c->inline_bad = false;
	c->rx_bounce_ok = false;
	c->inl_hold_ok = false;
	rx_fail(c, true);
}

static bool fb_pending(const struct tp_conn *c)
{
	return c->c_d != c->pub_d || c->c_i != c->pub_i || c->v_msn != c->pub_ack;
}

/* Release what was consumed, lazily: every feedback write costs the sender a cache miss (and
 * us a fence), so a message is not worth one. Published when a quarter of the inline ring or
 * an eighth of the data ring was consumed since the last time (so a sender never finds the
 * ring full while we have drained it: what we hold back is less than half of either ring),
 * when the sender says it waits for room (TX_WAIT), at end of stream (its linger waits for
 * the FIN's CmpAck), and by tp_rx_flush_feedback() before we sleep and from the timers. */
static void rx_release(struct tp_conn *c)
{
	uint32_t qs = c->link->geom.qsize, n = c->link->geom.inline_n, waits;

	if (!fb_pending(c))
		return;
	if (c->c_d - c->pub_d >= qs / 8u || c->c_i - c->pub_i >= n / 4u || c->eof ||
	    (tp_slot_word(c, TP_W_TX_WAIT, &waits) && waits))
		fb_publish(c);
}

void tp_rx_release(struct tp_conn *c)
{
	rx_release(c);
}

void tp_rx_flush_feedback(struct tp_conn *c)
{
	if (fb_pending(c))
		fb_publish(c);
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Largest data-ring message rx_short_direct() takes (as the sender's send_short_direct()). */
#define RX_SHORT_DIRECT_MAX 1024u

/* rx_direct() for one buffer and a small short message that does not wrap at the ring's end:
 * the payload from the window straight into DST (ROOM bytes) with the CRC fused, the
 * descriptor's part of the CRC from registers. The same checks as rx_data() + rx_direct() (the
 * caller's buffer is the private copy: on a mismatch nothing is counted, and the validating
 * path delivers over it). Returns bytes delivered, 0 if not taken (the general path then). */
static size_t rx_short_direct(struct tp_conn *c, uint8_t *dst, size_t room)
{
	uint32_t q = c->link->geom.qsize, txd, p, crc, fp;
	const uint8_t *base;
	struct tp_desc d;

	if (c->gated || c->fin_rcvd_v || c->rec_head != c->rec_tail || c->rec_skip ||
	    atomic_load_explicit(&c->error, memory_order_relaxed))
		return 0;
	/* acquire (tp_slot_word()): TX_D before the descriptor and payload it publishes; pairs
	 * with the release before the sender's store of TX_D */
	if (!tp_rx_txd(c, &txd) || txd - c->v_d < TP_DESC_SIZE || txd - c->v_d > q)
		return 0;
	p = c->v_d & (q - 1);
	base = (const uint8_t *)in_data(c);
	memcpy(&d, base + p, sizeof(d)); /* private copy, then validate */
	if (d.type != TP_MT_SHORT || d.flags || d.msn != c->v_msn || d.len == 0 ||
	    d.len > RX_SHORT_DIRECT_MAX || d.len > room)
		return 0;
	fp = TP_DESC_SIZE + (uint32_t)ALIGN_UP(d.len, TP_DATA_ALIGN);
	if (fp > txd - c->v_d || p + fp > q)
		return 0;
	crc = crc32c_copy(c->nonce_in, dst, base + p + TP_DESC_SIZE, d.len);
	crc = crc32c_word(crc, (uint64_t)d.type | (uint64_t)d.len << 32, 8);
	crc = crc32c_word(crc, d.msn, 4);
	if (crc != d.crc)
		return 0; /* (the validating path finds it again and asks for a Retry) */
	c->v_d += fp;
	c->v_msn++;
	c->rerr = 0;
	c->c_d = c->v_d;
	TP_STAT_ADD(c->st->rx_msgs_short, 1);
	return d.len;
}
#endif

/* Fast path (record queue empty): the next data message fits in the caller's buffers, so
 * check its CRC while copying it there (one pass). Returns bytes delivered, 0 if not taken. */
static size_t rx_direct(struct tp_conn *c, const struct iovec *iov, int iovcnt, int vi,
			size_t voff)
{
	struct tp_rec r;
	size_t room = 0;
	uint32_t crc, left, pos;

	if (c->gated || c->fin_rcvd_v || atomic_load(&c->error) || c->rec_head != c->rec_tail ||
	    c->rec_skip)
		return 0;
	/* (a published inline slot does not stop us: the descriptor's MSN says whether the next
	 * message is this one; a later inline message, or a bad slot, is the next call's) */
	if (rx_data(c, c->v_msn, &r, false) != PR_OK || r.len == 0)
		return 0;
	for (int i = vi; i < iovcnt && room < r.len; i++)
		room += iov[i].iov_len - (i == vi ? voff : 0);
	if (room < r.len)
		return 0;
	crc = c->nonce_in;
	left = r.len;
	pos = r.pos + r.payload;
	for (int i = vi; left; i++) {
		size_t o = i == vi ? voff : 0, n = iov[i].iov_len - o;

		if (n > left)
			n = left;
		crc = data_copy(c, (uint8_t *)iov[i].iov_base + o, pos, (uint32_t)n, crc, true);
		pos += (uint32_t)n;
		left -= (uint32_t)n;
	}
	if (tp_desc_crc(crc, &r.desc) != r.desc.crc) {
		rx_fail(c, true);
		return 0;
	}
	c->v_d += r.footprint;
	c->v_msn++;
	c->rerr = 0;
	c->c_d = c->v_d;
	if (r.type == TP_MT_LONG)
		TP_STAT_ADD(c->st->rx_msgs_long, 1);
	else
		TP_STAT_ADD(c->st->rx_msgs_short, 1);
	if (r.flags & TP_MSG_FIN) {
		c->fin_rcvd_v = true;
		c->eof = true;
	}
	return r.len;
}

/* Fast path for inline messages (record queue empty): when the next inline slot is published
 * and holds the next MSN, copy it once to a private buffer (header first, then only the
 * payload part the table says is written), check its CRC there (inline crc32 instructions)
 * and copy the payload straight to the caller's buffers: no record, no hold, no second CRC.
 * The CRC is checked on the private copy the bytes are delivered from (rule 3.4), so a slot
 * changed after its sequence byte was seen is either caught or delivered self-consistent.
 * Anything unusual (not published, bad CRC, other MSN, FIN, does not fit ROOM bytes of the
 * caller's buffers) is left to the validating path (tp_rx_progress), which owns the Retry
 * logic. Under rx_lock. Returns the bytes delivered, 0 if not taken. */
static size_t rx_inline_direct(struct tp_conn *c, const struct iovec *iov, int iovcnt, int vi,
			       size_t voff, size_t room)
{
	const volatile uint8_t *s;
	uint8_t buf[128], *dst = (uint8_t *)iov[vi].iov_base + voff;
	uint16_t len;
	uint32_t msn, crc, want;
	unsigned off;

	if (c->gated || c->fin_rcvd_v || c->rec_head != c->rec_tail || c->rec_skip ||
	    atomic_load_explicit(&c->error, memory_order_relaxed))
		return 0;
	s = in_inline(c, c->v_i);
	/* acquire: the sequence byte before the slot it publishes; pairs with the barrier in
	 * write_inline_slot() */
	if (__atomic_load_n((const uint8_t *)s + TP_INL_SEQ, __ATOMIC_ACQUIRE) !=
	    tp_inline_seq(c->v_i, c->link->geom.log2n, c->seq_base_in))
		return 0;
	/* the header (one 16-byte move into private memory: what is checked is what is used) */
	memcpy(buf + 112, (const void *)(s + 112), 16);
	memcpy(&len, buf + TP_INL_LEN, 2);
	if (len == 0 || len > TP_INLINE_MAX || len > room)
		return 0;
	off = tp_inline_off(len);
	memcpy(&msn, buf + TP_INL_MSN, 4);
	memcpy(&crc, buf + TP_INL_CRC, 4);
	if (iov[vi].iov_len - voff >= len) {
		/* One buffer takes it: the payload goes from the window straight there, each
		 * byte read once and checksummed as stored (rule 3.4: the caller's buffer is
		 * the private copy; on a mismatch nothing is delivered, and what was written
		 * there is overwritten by the validating path's delivery, as rx_direct()). */
		want = crc32c_copy(c->nonce_in, dst, (const void *)(s + off), len);
	} else {
		/* scattered: a private copy first, checked, then delivered piece by piece
		 * (fixed-size moves: the first line only for 53-116-byte messages) */
		memcpy(buf + 64, (const void *)(s + 64), 48);
		if (off == 0)
			memcpy(buf, (const void *)s, 64);
		want = crc32c(c->nonce_in, buf + off, len);
	}
	/* header bytes as tp_inline_hdr_crc(): length, MSN, flags */
	want = crc32c_word(want, (uint64_t)len | (uint64_t)msn << 16, 6);
	want = crc32c_word(want, buf[TP_INL_FLAGS], 1);
	if (want != crc || msn != c->v_msn || (buf[TP_INL_FLAGS] & TP_MSG_FIN))
		return 0;
	if (iov[vi].iov_len - voff < len) {
		for (size_t done = 0; done < len; vi++, voff = 0) {
			size_t n = iov[vi].iov_len - voff;

			if (n > len - done)
				n = len - done;
			memcpy((uint8_t *)iov[vi].iov_base + voff, buf + off + done, n);
			done += n;
		}
	}
	(void)iovcnt;
	c->v_i++;
	c->c_i = c->v_i;
	c->v_msn++;
	c->rerr = 0;
	c->inline_bad = false;
	TP_STAT_ADD(c->st->rx_msgs_inline, 1);
	return len;
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
	/* a death (its TCP socket ended, or its host reclaimed it), not a reset or a lost link */
	if ((st & TP_ST_RST) || !(atomic_load(&c->peer_died) || (st & TP_ST_GONE)) ||
	    c->rec_head != c->rec_tail)
		return false;
	/* alive but silent before it died: what it wrote meanwhile may never have arrived */
	if (atomic_load(&c->silent_alive))
		return false;
	tp_rx_progress(c, UINT32_MAX);
	if (c->rec_head != c->rec_tail)
		return false;
	/* everything it published was validated: no Retry pending, no bad slot, the data ring's
	 * index and (when it said one) its next MSN reached */
	if (c->gated || c->inline_bad)
		return false;
	if (tp_slot_word(c, TP_W_TX_D, &v) ? v != c->v_d : c->v_d != 0)
		return false;
	if (tp_slot_word(c, TP_W_TX_NEXT_MSN, &v) && (int32_t)(v - c->v_msn) > 0)
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
	c->fin_rcvd_v = true;
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
	const uint64_t *base = (const uint64_t *)(const void *)(in_slot(c));
	uint64_t txd, txe;

	/* (the slot after the next one too: published behind a lost one, it is news: the loss,
	 * which tp_rx_progress() answers with a Retry at once) */
	if (c->gated || inline_seq_ready(c, c->v_i) || inline_seq_ready(c, c->v_i + 1))
		return false;
	/* data-ring messages known published and not validated yet (tp_rx_txd()): no load */
	if (c->rx_txd != c->v_d && c->rx_txd - c->v_d <= c->link->geom.qsize)
		return false;
	/* acquire: as tp_in_word() (pairs with the barrier before the sender publishes) */
	txd = __atomic_load_n(&base[TP_W_TX_D / 8u], __ATOMIC_ACQUIRE);
	txe = __atomic_load_n(&base[TP_W_TX_EPOCH / 8u], __ATOMIC_ACQUIRE);
	/* (a word never written is 0: no data yet, no epoch or Detect published yet) */
	if (txd ? txd != __atomic_load_n(&c->wc_raw[TP_W_TX_D / 8u], __ATOMIC_RELAXED) ||
		  (uint32_t)txd != c->v_d : c->v_d != 0)
		return false;
	return !txe || (txe == __atomic_load_n(&c->wc_raw[TP_W_TX_EPOCH / 8u], __ATOMIC_RELAXED) &&
			(uint16_t)(txe >> 16) == c->det_seen);
}

/* A read's progress: through the caller's iovecs (VI, VOFF; GOT bytes so far) and the record
 * queue (record H, OFF bytes into it). */
struct rx_read {
	const struct iovec *iov;
	int iovcnt, vi;
	size_t voff, got;
	uint32_t h, off;
	bool peek, skip_inline, bad;
};

/* Under rx_lock: may this read go on? If not, *RC is what it returns. */
static bool recv_refused(struct tp_conn *c, ssize_t *rc)
{
	if ((*rc = tp_conn_own(c))) /* single-owner rule after fork (tp_int.h) */
		return true;
	if (unlikely(tp_fo_get(c))) { /* moving to the kernel socket (tp_failover.c) */
		int fo = tp_fo_get(c);

		if (fo == TP_FO_FAILED)
			*rc = atomic_load(&c->error) ? atomic_load(&c->error) : -ECONNRESET;
		else
			*rc = fo == TP_FO_DONE ? -EXDEV : -EAGAIN;
		return true;
	}
	if (c->rd_shut) { /* as Linux: reads after shutdown(SHUT_RD) see end of stream */
		*rc = 0;
		return true;
	}
	return false;
}

/* Fast path (one buffer, nothing queued): the next inline message straight into it. True
 * when the read is complete: it filled the buffer, or nothing else is published yet. */
static bool recv_fast(struct tp_conn *c, struct rx_read *rd)
{
	const struct iovec *iov = rd->iov;

	if (rd->peek || rd->iovcnt != 1 || rd->h != c->rec_tail || !iov[0].iov_len)
		return false;
	rd->got = rx_inline_direct(c, iov, 1, 0, 0, iov[0].iov_len);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* nothing inline: a small data-ring message the same way */
	if (!rd->got)
		rd->got = rx_short_direct(c, iov[0].iov_base, iov[0].iov_len);
#endif
	rd->voff = rd->got;
	/* a full buffer, or (the usual case of a reader with a larger buffer) nothing else
	 * published yet: the loop of tp_recv() would find no more */
	if (rd->got == iov[0].iov_len || (rd->got && tp_rx_quiet(c)))
		return true;
	/* nothing inline just now: the loop's first look goes to the data ring (a slot
	 * published meanwhile is found by the validation, or by the next call) */
	rd->skip_inline = !rd->got;
	return false;
}

/* N bytes delivered straight into the iovecs at the read's position. */
static void recv_advance(struct rx_read *rd, size_t n)
{
	rd->got += n;
	while (n) {
		size_t k = rd->iov[rd->vi].iov_len - rd->voff;

		if (k > n)
			k = n;
		rd->voff += k;
		n -= k;
		if (rd->voff == rd->iov[rd->vi].iov_len && n) {
			rd->vi++;
			rd->voff = 0;
		}
	}
}

enum recv_step { RECV_STOP, RECV_AGAIN, RECV_COPY };

/* The record queue is empty: deliver the next message directly (RECV_AGAIN), or validate
 * what was published into records (RECV_COPY: record H is there to copy), or stop. */
static enum recv_step recv_empty(struct tp_conn *c, struct rx_read *rd)
{
	size_t n = 0;

	if (!rd->peek) {
		size_t room = rd->iov[rd->vi].iov_len - rd->voff;

		for (int i = rd->vi + 1; i < rd->iovcnt && room < TP_INLINE_MAX; i++)
			room += rd->iov[i].iov_len;
		n = rd->skip_inline ? 0 : rx_inline_direct(c, rd->iov, rd->iovcnt, rd->vi,
							    rd->voff, room);
		rd->skip_inline = false;
		if (!n)
			n = rx_direct(c, rd->iov, rd->iovcnt, rd->vi, rd->voff);
	}
	if (n) {
		recv_advance(rd, n);
		return RECV_AGAIN; /* (released by tp_recv(), once for the whole call) */
	}
	/* As kernel TCP, a read takes what has arrived up to the end of its buffer, across
	 * message boundaries: a peek whatever was published, a read a published inline
	 * message too (split from its validated copy). A data-ring message that did not
	 * fit whole is left to the next call: split, it would cost a second copy of all
	 * of it (rec_copy()'s bounce). */
	if (rd->got && !rd->peek && !inline_seq_ready(c, c->v_i))
		return RECV_STOP; /* (one load: the slot the direct copy just looked at) */
	if (tp_rx_quiet(c))
		return RECV_STOP; /* nothing published since the last look: what we have, or -EAGAIN */
	tp_rx_progress(c, rd->got ? c->rec_bytes + 1 : 1);
	if (rd->h == c->rec_tail)
		return RECV_STOP;
	if (rd->got && !rd->peek && c->recs[rd->h % TP_RECS].ring != 0)
		return RECV_STOP; /* (validated: the next call copies it) */
	if (rd->h == c->rec_head)
		rd->off = c->rec_off; /* an adopted connection may start inside it */
	return RECV_COPY;
}

/* Copy what fits of record R from the read's offset in it; false when the read stops here
 * (the iovecs are full, or the copy failed: RD->bad). */
static bool recv_copy(struct tp_conn *c, struct rx_read *rd, const struct tp_rec *r)
{
	uint32_t left = r->len - rd->off;

	while (left && rd->vi < rd->iovcnt) {
		size_t room = rd->iov[rd->vi].iov_len - rd->voff, n = left < room ? left : room;

		if (room == 0) {
			rd->vi++;
			rd->voff = 0;
			continue;
		}
		int e = rec_copy(c, r, rd->off, (uint8_t *)rd->iov[rd->vi].iov_base + rd->voff, n);

		if (e == -ENOMEM) {
			tp_set_error(c, e);
			rd->bad = true;
			break;
		}
		if (e) {
			rx_rewind(c, rd->peek ? c->rec_off : rd->off);
			rd->off = 0;
			rd->bad = true;
			break;
		}
		rd->voff += n;
		rd->off += (uint32_t)n;
		left -= (uint32_t)n;
		rd->got += n;
	}
	return !left && !rd->bad;
}

/* Under rx_lock, after the copies: what the read returns. */
static ssize_t recv_result(struct tp_conn *c, const struct rx_read *rd)
{
	ssize_t rc;

	if (rd->got) {
		if (!rd->peek)
			TP_STAT_ADD(c->st->rx_bytes, rd->got);
		/* reading without polling: the peer need not ring for us any more */
		if (c->rx_wait_set)
			tp_set_wait_flag(c, TP_W_FB_WAIT, &c->rx_wait_set, false);
		return (ssize_t)rd->got;
	}
	if (c->eof)
		return 0;
	if ((rc = atomic_load(&c->error)))
		return rc;
	if (c->rec_head != c->rec_tail || !tp_conn_peer_lost(c))
		return -EAGAIN;
	tp_rx_progress(c, 1); /* whatever arrived before the loss is still delivered */
	if (c->rec_head != c->rec_tail)
		return -EAGAIN;
	if (tp_rx_death_end(c))
		return 0;
	LOG(LL_DEBUG, "transport: slot %u: peer lost (flags %#x, died %d)", c->slot,
	    tp_st_flags(c), (int)atomic_load(&c->peer_died));
	tp_set_error(c, -ECONNRESET);
	return -ECONNRESET;
}

ssize_t tp_recv(struct tp_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	struct rx_read rd = { .iov = iov, .iovcnt = iovcnt, .peek = flags & TP_RECV_PEEK };
	ssize_t rc;

	/* a read: this connection is not a one-way stream of writes, whose small writes merge
	 * (tp_tx.c), and what we hold goes out now, the peer may be waiting for it to answer
	 * (before rx_lock: the tx lock is taken first) */
	if (__atomic_load_n(&c->tx_streak, __ATOMIC_RELAXED))
		__atomic_store_n(&c->tx_streak, false, __ATOMIC_RELAXED);
	tp_tx_flush_held(c);
	tp_mutex_lock(&c->rx_lock);
	if (recv_refused(c, &rc)) {
		tp_mutex_unlock(&c->rx_lock);
		return rc;
	}
	rd.h = c->rec_head;
	rd.off = c->rec_off;
	if (!recv_fast(c, &rd)) {
		for (;;) {
			while (rd.vi < iovcnt && rd.voff == iov[rd.vi].iov_len) {
				rd.vi++;
				rd.voff = 0;
			}
			if (rd.vi == iovcnt || (c->eof && rd.h == c->rec_tail))
				break;
			if (rd.h == c->rec_tail) {
				enum recv_step st = recv_empty(c, &rd);

				if (st == RECV_STOP)
					break;
				if (st == RECV_AGAIN)
					continue;
			}
			struct tp_rec *r = &c->recs[rd.h % TP_RECS];

			if (!recv_copy(c, &rd, r))
				break;
			if (rd.peek) {
				if (r->flags & TP_MSG_FIN)
					break;
				rd.h++;
				rd.off = 0;
				continue;
			}
			rec_done(c, r);
			rd.h = c->rec_head;
			rd.off = 0;
			rx_release(c);
		}
	}
	if (!rd.peek)
		c->rec_off = rd.off;
	rc = recv_result(c, &rd);
	rx_release(c);
	tp_mutex_unlock(&c->rx_lock);
	return rc;
}


/* --- spinning waits --------------------------------------------------------------------------- */

void tp_probe_arm(struct tp_conn *c, struct tp_probe *p, unsigned events)
{
	tp_mutex_lock(&c->rx_lock);
	p->seq_at = in_inline(c, c->v_i) + TP_INL_SEQ;
	p->seq_want = tp_inline_seq(c->v_i, c->link->geom.log2n, c->seq_base_in);
	/* records already queued (or end of stream) are not news either: the caller must look */
	p->seq_stale = tp_inline_stale(c, c->v_i, p->seq_at - TP_INL_SEQ);
	p->seq_was = (inline_seq_ready(c, c->v_i) && !p->seq_stale) || c->rec_head != c->rec_tail ||
		     c->eof;
	tp_mutex_unlock(&c->rx_lock);
	p->events = events;
	p->tx_d = events & TP_EV_IN ? tp_slot_raw(c, TP_W_TX_D) : 0;
	p->fb_rx_i = events & TP_EV_OUT ? tp_slot_raw(c, TP_W_FB_RX_I) : 0;
	p->fb_rx_d = events & TP_EV_OUT ? tp_slot_raw(c, TP_W_FB_RX_D) : 0;
	p->tx_wait = events & TP_EV_IN ? tp_slot_raw(c, TP_W_TX_WAIT) : 0;
	p->db = ntb_db_read(c->link->ntb);
}

/* Only window words and the doorbell, no locks, no CRC: cheap enough for every spin. Returns
 * TP_EV_IN (a message was published), TP_EV_OUT (space was released), TP_EV_ERR (something
 * else moved: doorbell, error) or 0. */
unsigned tp_probe_hit(const struct tp_conn *c, const struct tp_probe *p)
{
	unsigned hit = 0;

	if (p->events & TP_EV_IN) {
		if (!p->seq_was && !p->seq_stale) {
			uint8_t seq = __atomic_load_n((const uint8_t *)p->seq_at, __ATOMIC_ACQUIRE);

			/* Also load the slot's first line (payload of 53-116-byte messages) in the
			 * same round: its miss overlaps the sequence byte's instead of following it
			 * when rx_inline() copies the slot. Only a prefetch: the copy re-reads it.
			 * (acquire above: pairs with the barrier before the sequence byte in
			 * write_inline_slot(); what it publishes is validated under rx_lock later) */
			(void)*(p->seq_at - TP_INL_SEQ);
			if (seq == p->seq_want)
				return TP_EV_IN; /* at once: the caller's tp_recv() sees the rest */
		}
		if (tp_slot_raw(c, TP_W_TX_D) != p->tx_d)
			hit |= TP_EV_IN;
		/* the sender holds a merged message until we release: the caller's poll_bits()
		 * publishes the release (tp_rx_release()) */
		if (tp_slot_raw(c, TP_W_TX_WAIT) != p->tx_wait)
			hit |= TP_EV_ERR;
	}
	if ((p->events & TP_EV_OUT) && (tp_slot_raw(c, TP_W_FB_RX_I) != p->fb_rx_i ||
					tp_slot_raw(c, TP_W_FB_RX_D) != p->fb_rx_d))
		hit |= TP_EV_OUT;
	if (ntb_db_read(c->link->ntb) != p->db ||
	    atomic_load_explicit(&c->error, memory_order_relaxed))
		hit |= TP_EV_ERR;
	return hit;
}

/* TimerRcvData, Detect answers, discarding for closed readers, feedback republication. */
/* Under rx_lock: as tp_rx_reask_wait(). */
static uint32_t reask_next(const struct tp_conn *c, uint64_t now)
{
	if (!c->gated)
		return 0;
	return c->gate_reask_ms > now ? (uint32_t)(c->gate_reask_ms - now) : 1u;
}

uint32_t tp_rx_reask_wait(struct tp_conn *c, uint64_t now)
{
	uint32_t w = 0;

	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		w = reask_next(c, now);
		tp_mutex_unlock(&c->rx_lock);
	}
	return w;
}

uint32_t tp_rx_timers(struct tp_conn *c)
{
	uint32_t next = 0;

	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		bool discard = c->rd_shut || atomic_load(&c->closed);
		uint32_t v;
		/* Validation (a CRC pass over the data) is the reader's job, done on its own core
		 * when it reads: the timers validate only to answer a Detect (is data missing?) and
		 * to discard for a reader that is gone. The epoch gate and TimerRcvData run always. */
		bool detect = tp_slot_word(c, TP_W_TX_EPOCH, &v) && (uint16_t)(v >> 16) != c->det_seen;

		tp_rx_progress(c, detect || discard ? 1 : 0);
		if (discard) {
			/* nobody will read: discard, so the peer's sender is not blocked */
			while (c->rec_head != c->rec_tail) {
				/* counted: a failover resends from what was consumed */
				c->rx_discarded += c->recs[c->rec_head % TP_RECS].len - c->rec_off;
				rec_done(c, &c->recs[c->rec_head % TP_RECS]);
			}
		}
		/* what was consumed since the last release (rx_release() is lazy) */
		tp_rx_flush_feedback(c);
		if (c->fb_dirty) {
			fb_publish_words(c, true);
			c->fb_dirty = false;
		}
		next = c->gated ? reask_next(c, tp_now_ms()) : 0;
		tp_mutex_unlock(&c->rx_lock);
	}
	return next;
}
