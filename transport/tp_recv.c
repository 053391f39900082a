/* SPDX-License-Identifier: MIT */
/* Reading: tp_recv() delivers validated records (rec_copy()) and, with nothing queued, the
 * next message straight from the window into the caller's buffers (rx_inline_direct(),
 * rx_short_direct(), rx_direct()), checked as it is copied. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tp_int.h"
#include "transport/tp_rx_int.h"
#include "util/crc32c.h"
#include "util/log.h"

/* A record was consumed entirely: release its ring space. */
void tp_rx_rec_done(struct tp_conn *c, const struct tp_rec *r)
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
		memcpy(s, (const void *)tp_rx_inline_at(c, r->pos), sizeof(s));
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
		crc = tp_rx_data_copy(c, dst, r->pos + r->payload, r->len, c->dseed_in, true);
		return tp_desc_crc(crc, &r->desc) == r->desc.crc ? 0 : -EBADMSG;
	}
	if (tp_rx_bounce_reserve(c, r->len) < 0) /* r->len ≤ qsize: checked by tp_rx_data() */
		return -ENOMEM;
	c->rx_bounce_ok = false;
	crc = tp_rx_data_copy(c, c->rx_bounce, r->pos + r->payload, r->len, c->dseed_in, true);
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
	/* relaxed: under rx_lock (tp_rx_fin_seen()) */
	atomic_store_explicit(&c->fin_rcvd_v, false, memory_order_relaxed);
	c->inline_bad = false;
	c->rx_bounce_ok = false;
	c->inl_hold_ok = false;
	tp_rx_fail(c, true);
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Largest data-ring message rx_short_direct() takes (as the sender's send_short_direct()). */
#define RX_SHORT_DIRECT_MAX 1024u

/* rx_direct() for one buffer and a small short message that does not wrap at the ring's end:
 * the payload from the window straight into DST (ROOM bytes) with the CRC fused, the
 * descriptor's part of the CRC from registers. The same checks as tp_rx_data() + rx_direct() (the
 * caller's buffer is the private copy: on a mismatch nothing is counted, and the validating
 * path delivers over it). Returns bytes delivered, 0 if not taken (the general path then). */
static size_t rx_short_direct(struct tp_conn *c, uint8_t *dst, size_t room)
{
	uint32_t q = c->link->geom.qsize, txd, p, crc, fp;
	const uint8_t *base;
	struct tp_desc d;
	bool spec;

	/* (relaxed error: a fast path declines; the validating path reads it with tp_conn_err()) */
	if (c->gated || tp_rx_fin_seen(c) || c->rec_head != c->rec_tail || c->rec_skip ||
	    !c->in_ring || atomic_load_explicit(&c->error, memory_order_relaxed))
		return 0;
	p = c->v_d & (q - 1);
	base = (const uint8_t *)tp_rx_ring(c);
	/*
	 * The descriptor first, not TX_D: one carrying the next MSN is this message, written (the
	 * payload before it, TX_D after) whether or not TX_D published it yet, and its CRC over the
	 * payload says whether all of it arrived. Only once the sender wrote a whole ring in this
	 * grant (tp_rx_lapped()): from then on every descriptor in the ring is this grant's, of an
	 * earlier MSN unless it is this message (an MSN is used once; a retransmission rewrites
	 * the same bytes). Reading TX_D first put its cache miss before the descriptor's,
	 * one after the other on every message of a stream (#22 goal 5: 256 B writes ran at 0.6 of
	 * 116 B ones). A message that does not check out here is the validating path's, which
	 * waits for TX_D before it counts anything as lost or corrupt (tp_rx_data()); v_d ahead of
	 * TX_D meanwhile reads as nothing new (tp_rx_txd()).
	 */
	spec = false;
	if (!c->rx_dry) {
		memcpy(&d, base + p, sizeof(d)); /* private copy, then validate */
		spec = d.msn == c->v_msn && !(c->rx_spec_missed && c->rx_spec_miss == c->v_d) &&
		       tp_rx_lapped(c);
	}
	if (spec) {
		/* acquire: the descriptor before the payload it describes; pairs with the order
		 * of the sender's stores (payload, then descriptor: send_short_direct()) */
		atomic_thread_fence(memory_order_acquire);
		txd = c->v_d + q;
	} else {
		/* acquire (tp_slot_word()): TX_D before the descriptor and payload it publishes;
		 * pairs with the release before the sender's store of TX_D */
		if (!tp_rx_txd(c, &txd) || txd - c->v_d < TP_DESC_SIZE || txd - c->v_d > q) {
			c->rx_dry = true;
			return 0;
		}
		memcpy(&d, base + p, sizeof(d));
	}
	c->rx_dry = false;
	if (d.type != TP_MT_SHORT || d.flags || d.msn != c->v_msn || d.len == 0 ||
	    d.len > RX_SHORT_DIRECT_MAX || d.len > room)
		return 0;
	fp = TP_DESC_SIZE + (uint32_t)ALIGN_UP(d.len, TP_DATA_ALIGN);
	if (fp > txd - c->v_d || p + fp > q)
		return 0;
	crc = crc32c_copy(c->dseed_in, dst, base + p + TP_DESC_SIZE, d.len);
	crc = crc32c_word(crc, (uint64_t)d.type | (uint64_t)d.len << 32, 8);
	crc = crc32c_word(crc, d.msn, 4);
	if (crc != d.crc) {
		/* (the validating path finds it again and asks for a Retry once TX_D covers it;
		 * one taken before TX_D was not whole yet, or is a stale one of an earlier holder
		 * of the ring at the same place and MSN: not checked again here, at each read of an
		 * idle connection, until v_d moves) */
		if (spec) {
			c->rx_spec_missed = true;
			c->rx_spec_miss = c->v_d;
		}
		return 0;
	}
	c->v_d += fp;
	c->v_msn++;
	c->rerr = 0;
	c->c_d = c->v_d;
	/* (a TX_D read before, now behind: nothing known ahead. Left as it was, ~4 GiB of
	 * messages taken before their TX_D later it would read as ahead again: tp_rx_txd()) */
	if (c->rx_txd - c->v_d > q)
		c->rx_txd = c->v_d;
	TP_STAT_ADD(c->st->rx_msgs_short, 1);
	return d.len;
}
#endif

/* Fast path (record queue empty): the next data message fits in the caller's buffers, so
 * check its CRC while copying it there (one pass). Returns bytes delivered, 0 if not taken;
 * *RET_NOFIT: not taken because it is larger than the room left. */
static size_t rx_direct(struct tp_conn *c, const struct iovec *iov, int iovcnt, int vi,
			size_t voff, bool *ret_nofit)
{
	struct tp_rec r;
	size_t room = 0;
	uint32_t crc, left, pos;

	if (c->gated || tp_rx_fin_seen(c) || tp_conn_err(c) || c->rec_head != c->rec_tail ||
	    c->rec_skip)
		return 0;
	/* (a published inline slot does not stop us: the descriptor's MSN says whether the next
	 * message is this one; a later inline message, or a bad slot, is the next call's) */
	if (tp_rx_data(c, c->v_msn, &r, false) != TP_RX_OK || r.len == 0)
		return 0;
	for (int i = vi; i < iovcnt && room < r.len; i++)
		room += iov[i].iov_len - (i == vi ? voff : 0);
	if (room < r.len) {
		*ret_nofit = true;
		return 0;
	}
	crc = c->dseed_in;
	left = r.len;
	pos = r.pos + r.payload;
	for (int i = vi; left; i++) {
		size_t o = i == vi ? voff : 0, n = iov[i].iov_len - o;

		if (n > left)
			n = left;
		crc = tp_rx_data_copy(c, (uint8_t *)iov[i].iov_base + o, pos, (uint32_t)n, crc, true);
		pos += (uint32_t)n;
		left -= (uint32_t)n;
	}
	if (tp_desc_crc(crc, &r.desc) != r.desc.crc) {
		tp_rx_fail(c, true);
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
		/* relaxed: under rx_lock (tp_rx_fin_seen()) */
		atomic_store_explicit(&c->fin_rcvd_v, true, memory_order_relaxed);
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

	/* (relaxed error: a fast path declines; the validating path reads it with tp_conn_err()) */
	if (c->gated || tp_rx_fin_seen(c) || c->rec_head != c->rec_tail || c->rec_skip ||
	    atomic_load_explicit(&c->error, memory_order_relaxed))
		return 0;
	s = tp_rx_inline_at(c, c->v_i);
	/* acquire: the sequence byte before the slot it publishes; pairs with the release in
	 * inline_publish() (tp_tx.c) */
	if (atomic_load_explicit((const _Atomic uint8_t *)(const void *)(s + TP_INL_SEQ),
				 memory_order_acquire) !=
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
			*rc = tp_conn_err(c) ? tp_conn_err(c) : -ECONNRESET;
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
	/* a sender that asks for a data ring is answered by its reader too, not only the
	 * timers: one load of a word that seldom changes (tp_ring.c) */
	if (unlikely(tp_slot_raw(c, TP_W_TX_RING_REQ) != c->rq_raw))
		tp_rx_ring_service(c, false);
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
	bool nofit = false;

	if (!rd->peek) {
		size_t room = rd->iov[rd->vi].iov_len - rd->voff;

		for (int i = rd->vi + 1; i < rd->iovcnt && room < TP_INLINE_MAX; i++)
			room += rd->iov[i].iov_len;
		n = rd->skip_inline ? 0 : rx_inline_direct(c, rd->iov, rd->iovcnt, rd->vi,
							    rd->voff, room);
		rd->skip_inline = false;
		if (!n)
			n = rx_direct(c, rd->iov, rd->iovcnt, rd->vi, rd->voff, &nofit);
	}
	if (n) {
		recv_advance(rd, n);
		return RECV_AGAIN; /* (released by tp_recv(), once for the whole call) */
	}
	/* the next message is a data-ring one larger than the room left: after bytes already
	 * read, the next call takes it (validated now, it would be checked twice); into an empty
	 * read, its validation copies it to the bounce buffer the read takes its part from */
	if (nofit && rd->got)
		return RECV_STOP;
	/* As kernel TCP, a read takes what has arrived up to the end of its buffer, across
	 * message boundaries: a peek whatever was published, a read a published inline
	 * message too (split from its validated copy). A data-ring message that did not
	 * fit whole is left to the next call: split, it would cost a second copy of all
	 * of it (rec_copy()'s bounce). */
	if (rd->got && !rd->peek && !tp_rx_seq_ready(c, c->v_i))
		return RECV_STOP; /* (one load: the slot the direct copy just looked at) */
	if (tp_rx_quiet(c))
		return RECV_STOP; /* nothing published since the last look: what we have, or -EAGAIN */
	c->rx_bounce_want = nofit;
	tp_rx_progress(c, rd->got ? c->rec_bytes + 1 : 1);
	c->rx_bounce_want = false;
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
		tp_rx_wait_clear(c);
		return (ssize_t)rd->got;
	}
	if (c->eof)
		return 0;
	if ((rc = tp_conn_err(c)))
		return rc;
	if (c->rec_head != c->rec_tail || !tp_conn_peer_lost(c))
		return -EAGAIN;
	tp_rx_progress(c, 1); /* whatever arrived before the loss is still delivered */
	if (c->rec_head != c->rec_tail)
		return -EAGAIN;
	if (tp_rx_death_end(c))
		/* (a dead sender's held message may have joined the queue: the caller reads it) */
		return c->rec_head != c->rec_tail ? -EAGAIN : 0;
	/* (relaxed: for the log) */
	LOG(LL_DEBUG, "transport: slot %u: peer lost (flags %#x, died %d)", c->slot,
	    tp_st_flags(c), (int)atomic_load_explicit(&c->peer_died, memory_order_relaxed));
	tp_set_error(c, -ECONNRESET);
	return -ECONNRESET;
}

ssize_t tp_recv_one(struct tp_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	struct rx_read rd = { .iov = iov, .iovcnt = iovcnt, .peek = flags & TP_RECV_PEEK };
	bool retried = false;
	ssize_t rc;

	/* a read: this connection is not a one-way stream of writes, whose small writes merge
	 * (tp_tx_merge.c), and what we hold goes out now, the peer may be waiting for it to answer
	 * (before rx_lock: the tx lock is taken first) */
	bool turn = atomic_load_explicit(&c->tx_streak, memory_order_relaxed);

	if (turn)
		atomic_store_explicit(&c->tx_streak, false, memory_order_relaxed);
	tp_tx_flush_held(c);
	tp_mutex_lock(&c->rx_lock);
	c->rx_turn |= turn; /* (kept by a read that finds nothing: for the read after its wait) */
	if (recv_refused(c, &rc)) {
		tp_mutex_unlock(&c->rx_lock);
		return rc;
	}
again:
	rd.h = c->rec_head;
	rd.off = c->rec_off; /* (again: the queued record may come with an offset, rec_skip) */
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
			tp_rx_rec_done(c, r);
			rd.h = c->rec_head;
			rd.off = 0;
			tp_rx_release(c);
		}
	}
	if (!rd.peek)
		c->rec_off = rd.off;
	rc = recv_result(c, &rd);
	if (rc == -EAGAIN && rd.h != c->rec_tail && !retried) {
		/* records the result's look queued (a dead sender's held message): read them */
		retried = true;
		goto again;
	}
	if (rc > 0 && !rd.peek)
		tp_rx_release_turn(c); /* (a turn of request and answer: at once) */
	else
		tp_rx_release(c);
	if (rc == -EAGAIN)
		tp_rx_idle(c, false);
	tp_act_note_rx(c); /* (what it consumed is released lazily: tp_active.c) */
	tp_mutex_unlock(&c->rx_lock);
	return rc;
}
