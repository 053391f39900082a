/* SPDX-License-Identifier: MIT */
/* The data path: inline/short/long messages into the peer's rings, validation and delivery
 * by MSN, feedback (released space, CmpAck), retry epochs, Detect, and the per-connection
 * timers (DESIGN §4, §6). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tp_int.h"
#include "util/crc32c.h"
#include "util/log.h"

/* --- words -------------------------------------------------------------------------------- */

uint64_t tp_in_word(const struct tp_link *l, uint32_t off)
{
	/* acquire: a word published after a barrier is read before what it publishes */
	return __atomic_load_n((const uint64_t *)(const void *)(l->in + off), __ATOMIC_ACQUIRE);
}

void tp_out_word(struct tp_link *l, uint32_t off, uint32_t seed, uint32_t v)
{
	ntb_write64(l->ntb, off, tp_cw_make(seed, v));
}

void tp_write_st(struct tp_link *l, uint32_t peer_slot_off, uint32_t peer_nonce, uint32_t flags)
{
	tp_out_word(l, peer_slot_off + TP_W_ST_FLAGS, peer_nonce, flags);
	ntb_wc_flush(l->ntb);
	ntb_peer_db_ring(l->ntb);
}

/* A word of our own slot (written by the peer, seeded with our nonce); false if invalid. */
static bool slot_word(struct tp_conn *c, uint32_t w, uint32_t *ret)
{
	uint32_t off = TP_OFF_SLOTS + c->slot * c->link->slot_size + w;
	uint64_t raw = tp_in_word(c->link, off);
	unsigned i = w / 8u;

	/* unchanged since the last check (the common case): skip the CRC. The cache is racy
	 * between the tx and rx threads of a connection only in its hit rate: a pair is
	 * written raw then value, and a torn pair just misses. */
	if (i < TP_WCACHE && raw == __atomic_load_n(&c->wc_raw[i], __ATOMIC_RELAXED) && raw) {
		*ret = (uint32_t)raw;
		return true;
	}
	if (!tp_cw_check(c->nonce_in, raw, ret))
		return false;
	if (i < TP_WCACHE)
		__atomic_store_n(&c->wc_raw[i], raw, __ATOMIC_RELAXED);
	return true;
}

/* Write word W of the peer's slot (seeded with its nonce). */
static void peer_word(struct tp_conn *c, uint32_t w, uint32_t v)
{
	tp_out_word(c->link, c->out.slot_off + w, c->nonce_out, v);
}

uint32_t tp_st_flags(struct tp_conn *c)
{
	uint32_t f;

	return slot_word(c, TP_W_ST_FLAGS, &f) ? f : 0;
}

bool tp_conn_peer_lost(struct tp_conn *c)
{
	if (tp_st_flags(c) & (TP_ST_RST | TP_ST_GONE))
		return true;
	/* link state as the helper thread last saw it (every ≤ 100 ms): cheap on the data path */
	return !atomic_load_explicit(&c->link->up, memory_order_relaxed) ||
	       atomic_load_explicit(&c->link->peer_epoch, memory_order_relaxed) != c->peer_epoch;
}

#define set_error(c, e) set_error_at((c), (e), __LINE__)
static void set_error_at(struct tp_conn *c, int err, int line)
{
	int zero = 0;

	LOG(LL_DEBUG, "transport: slot %u error %d (tp_data.c:%d)", c->slot, err, line);

	if (atomic_compare_exchange_strong(&c->error, &zero, err))
		tp_event_signal();
}

/* Full fence, then the peer's "sleeping" flag in our inbound slot: ring only when set.
 * Dekker pair with the waiter's flag store + fence + re-check in tp_arm(). */
static void wake_peer(struct tp_conn *c, uint32_t flag_word)
{
	uint32_t v;

	atomic_thread_fence(memory_order_seq_cst);
	if (slot_word(c, flag_word, &v) && v)
		ntb_peer_db_ring(c->link->ntb);
}

/* --- queues -------------------------------------------------------------------------------- */

int tp_conn_init_queues(struct tp_conn *c)
{
	c->sh_inline = aligned_alloc(128, (size_t)c->out.inline_n * 128u);
	c->sh_data = aligned_alloc(4096, c->out.qsize);
	if (!c->sh_inline || !c->sh_data) {
		tp_conn_free_queues(c);
		return -ENOMEM;
	}
	memset(c->sh_inline, 0, (size_t)c->out.inline_n * 128u);
	if (ntb_dmaq_create(c->link->ntb, 4, &c->dmaq))
		c->dmaq = NULL; /* long messages are then copied by the CPU directly */
	pthread_mutex_init(&c->tx_lock, NULL);
	pthread_mutex_init(&c->rx_lock, NULL);
	c->seq_base_in = c->nonce_in % 255u;
	c->seq_base_out = c->nonce_out % 255u;
	c->last_ack_ms = tp_now_ms();
	return 0;
}

void tp_conn_free_queues(struct tp_conn *c)
{
	ntb_dmaq_destroy(c->dmaq);
	c->dmaq = NULL;
	free(c->sh_inline);
	free(c->sh_data);
	c->sh_inline = NULL;
	c->sh_data = NULL;
}

/* --- send side ------------------------------------------------------------------------------ */

static uint32_t out_inline_off(const struct tp_conn *c, uint32_t pos)
{
	return c->out.slot_off + TP_SLOT_RINGS + (pos & (c->out.inline_n - 1)) * 128u;
}

static uint32_t out_data_base(const struct tp_conn *c)
{
	return c->out.slot_off + TP_SLOT_RINGS + c->out.inline_n * 128u;
}

/* Write data-ring bytes [from, to) (free-running positions) from the shadow to the window. */
static void write_data_range(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t q = c->out.qsize, len = to - from, p = from & (q - 1);
	uint32_t first = len < q - p ? len : q - p;

	if (len == 0)
		return;
	ntb_write(c->link->ntb, out_data_base(c) + p, c->sh_data + p, first);
	if (len > first)
		ntb_write(c->link->ntb, out_data_base(c), c->sh_data, len - first);
}

/* The same as write_data_range() through the link's DMA queue (Idle → Gather → Posted →
 * Done → Idle). False when the queue is unavailable or failed: the caller copies instead. */
static bool dma_range(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t q = c->out.qsize, len = to - from, p = from & (q - 1);
	uint32_t first = len < q - p ? len : q - p;
	bool ok;

	if (!c->dmaq || len == 0)
		return false;
	ok = ntb_dmaq_enqueue(c->dmaq, out_data_base(c) + p, c->sh_data + p, first) == 0 &&
	     (len == first ||
	      ntb_dmaq_enqueue(c->dmaq, out_data_base(c), c->sh_data, len - first) == 0) &&
	     ntb_dmaq_post(c->dmaq) == 0 && ntb_dmaq_wait(c->dmaq, -1) == 0;
	if (ntb_dmaq_state(c->dmaq) == NTB_DMAQ_POSTED)
		ntb_dmaq_abort(c->dmaq);
	if (ntb_dmaq_state(c->dmaq) != NTB_DMAQ_IDLE && ntb_dmaq_reset(c->dmaq) != 0) {
		ntb_dmaq_destroy(c->dmaq); /* a queue stuck in a state: stop using it */
		c->dmaq = NULL;
	}
	return ok;
}

static void write_inline_slot(struct tp_conn *c, uint32_t pos)
{
	uint8_t *s = c->sh_inline + (pos & (c->out.inline_n - 1)) * 128u;
	uint16_t len;
	unsigned off;

	memcpy(&len, s + TP_INL_LEN, 2);
	off = tp_inline_off(len > TP_INLINE_MAX ? TP_INLINE_MAX : len);
	ntb_write(c->link->ntb, out_inline_off(c, pos) + off, s + off, TP_INL_SEQ - off);
	/* payload and header before the sequence byte that publishes the slot; pairs with the
	 * acquire load of the sequence byte in rx_inline() */
	ntb_to_peer_barrier(c->link->ntb);
	ntb_write8(c->link->ntb, out_inline_off(c, pos) + TP_INL_SEQ, s[TP_INL_SEQ]);
}

/* Gather LEN bytes from the iovec cursor into DST, fusing the CRC; returns the CRC. */
struct iov_cur {
	const struct iovec *iov;
	int cnt, i;
	size_t off;
};

static uint32_t gather_crc(struct iov_cur *ic, uint8_t *dst, size_t len, uint32_t crc)
{
	while (len) {
		const struct iovec *v = &ic->iov[ic->i];
		size_t n = v->iov_len - ic->off;

		if (n == 0) {
			ic->i++;
			ic->off = 0;
			continue;
		}
		if (n > len)
			n = len;
		crc = crc32c_copy(crc, dst, (const uint8_t *)v->iov_base + ic->off, n);
		dst += n;
		len -= n;
		ic->off += n;
	}
	return crc;
}

static void publish_tx(struct tp_conn *c);

static void send_inline(struct tp_conn *c, struct iov_cur *ic, unsigned len, uint8_t flags)
{
	/* MSN order across rings: earlier data-ring messages are published before this one */
	if (c->tx_d != c->tx_d_pub)
		publish_tx(c);
	uint32_t pos = c->tx_i;
	uint8_t *s = c->sh_inline + (pos & (c->out.inline_n - 1)) * 128u;
	uint32_t crc = gather_crc(ic, s + tp_inline_off(len), len, c->nonce_out);

	tp_inline_finish(s, len, c->msn_next, flags,
			 tp_inline_seq(pos, c->out.log2n, c->seq_base_out), crc);
	write_inline_slot(c, pos);
	c->tx_i++;
	c->msn_next++;
	c->st->tx_msgs_inline++;
}

static void send_data(struct tp_conn *c, struct iov_cur *ic, uint32_t len, uint8_t type,
		      uint8_t flags)
{
	uint32_t q = c->out.qsize, pos = c->tx_d;
	uint32_t gap = tp_payload_gap(type, pos), fp = tp_footprint(type, pos, len);
	uint32_t pp = (pos + gap) & (q - 1), first = len < q - pp ? len : q - pp;
	struct tp_desc d = { .type = type, .flags = flags, .len = len, .msn = c->msn_next };
	uint32_t crc = gather_crc(ic, c->sh_data + pp, first, c->nonce_out);

	if (len > first)
		crc = gather_crc(ic, c->sh_data, len - first, crc);
	d.crc = tp_desc_crc(crc, &d);
	memcpy(c->sh_data + (pos & (q - 1)), &d, sizeof(d)); /* never wraps: 16-aligned */
	if (type == TP_MT_LONG) {
		/* descriptor, then the payload from its 128-byte boundary through the DMA queue */
		write_data_range(c, pos, pos + TP_DESC_SIZE);
		if (!dma_range(c, pos + gap, pos + gap + len))
			write_data_range(c, pos + gap, pos + gap + len);
		c->st->tx_msgs_long++;
	} else {
		write_data_range(c, pos, pos + gap + len);
		c->st->tx_msgs_short++;
	}
	c->tx_d = pos + fp;
	c->msn_next++;
}

/* Publish tx_d after the data it covers; pairs with the acquire load in rx_data(). */
static void publish_tx(struct tp_conn *c)
{
	ntb_to_peer_barrier(c->link->ntb);
	peer_word(c, TP_W_TX_D, c->tx_d);
	c->tx_d_pub = c->tx_d;
	ntb_wc_flush(c->link->ntb);
	c->tx_dirty = true;
	c->last_tx_pub_ms = tp_now_ms();
}

/* The peer asked for a retry (newer epoch): rewrite every unreleased byte from the shadows,
 * then announce the epoch. Rewriting is idempotent: the shadow is what the window should hold. */
static void retransmit(struct tp_conn *c, uint16_t epoch)
{
	/* Whole slots in one or two writes (the sequence bytes with them): the receiver is gated
	 * until the epoch below is published after a barrier, so it never sees a slot half
	 * rewritten; fewer writes also give a lossy link fewer chances to spoil the retry. */
	uint32_t n = c->out.inline_n, cnt = c->tx_i - c->fb_rx_i;
	uint32_t first = c->fb_rx_i & (n - 1), run = cnt < n - first ? cnt : n - first;

	c->st->retransmits++; /* counted first: the peer may see the data before we return */

	if (run)
		ntb_write(c->link->ntb, out_inline_off(c, c->fb_rx_i), c->sh_inline + first * 128u,
			  (size_t)run * 128u);
	if (cnt > run)
		ntb_write(c->link->ntb, out_inline_off(c, 0), c->sh_inline, (size_t)(cnt - run) * 128u);
	write_data_range(c, c->fb_rx_d, c->tx_d);
	publish_tx(c);
	ntb_to_peer_barrier(c->link->ntb);
	c->tx_epoch = epoch;
	peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch | (uint32_t)c->detect_seq << 16);
	ntb_wc_flush(c->link->ntb);
	ntb_peer_db_ring(c->link->ntb);
	c->last_ack_ms = tp_now_ms();
	LOG(LL_DEBUG, "transport: slot %u retransmit epoch %u inline %u data %u", c->slot, epoch,
	    c->tx_i - c->fb_rx_i, c->tx_d - c->fb_rx_d);
}

/* Read the feedback unit (under tx_lock): released space, CmpAck, retry epoch, detect ack. */
void tp_tx_feedback(struct tp_conn *c)
{
	uint32_t v;
	bool progress = false;

	if (slot_word(c, TP_W_FB_RX_I, &v) && v != c->fb_rx_i &&
	    v - c->fb_rx_i <= c->tx_i - c->fb_rx_i) {
		c->fb_rx_i = v;
		progress = true;
	}
	if (slot_word(c, TP_W_FB_RX_D, &v) && v != c->fb_rx_d &&
	    v - c->fb_rx_d <= c->tx_d - c->fb_rx_d) {
		c->fb_rx_d = v;
		progress = true;
	}
	if (slot_word(c, TP_W_FB_ACK_MSN, &v) && v != c->fb_ack &&
	    v - c->fb_ack <= c->msn_next - c->fb_ack) {
		c->fb_ack = v;
		progress = true;
	}
	if (slot_word(c, TP_W_FB_EPOCH, &v)) {
		uint16_t ep = (uint16_t)v, det = (uint16_t)(v >> 16);

		if (det == c->detect_seq && c->terr) {
			/* DetectAck: the receiver is alive, only not consuming: probe less often */
			c->terr = 0;
			if (c->det_backoff < 16)
				c->det_backoff++;
		}
		if (tp_rt_epoch_newer(ep, c->tx_epoch)) {
			if (++c->terr > c->link->params.max_err * 4u) {
				set_error(c, -ECONNRESET);
				return;
			}
			retransmit(c, ep);
		}
	}
	if (progress) {
		c->last_ack_ms = tp_now_ms();
		c->terr = 0;
		c->det_backoff = 0;
	}
}

static uint32_t inline_free(const struct tp_conn *c)
{
	return c->out.inline_n - (c->tx_i - c->fb_rx_i);
}

static uint32_t data_free(const struct tp_conn *c)
{
	return c->out.qsize - (c->tx_d - c->fb_rx_d);
}

/* Largest payload a data message at tx_d may carry now (0: none fits). */
uint32_t tp_data_room(const struct tp_conn *c, uint8_t type)
{
	uint32_t fr = data_free(c), gap = tp_payload_gap(type, c->tx_d);

	if (fr <= gap + TP_DATA_ALIGN)
		return 0;
	return (fr - gap) & ~(TP_DATA_ALIGN - 1);
}

static int tx_check(struct tp_conn *c)
{
	int err = atomic_load(&c->error);

	if (err)
		return err;
	if (c->wr_shut)
		return -EPIPE;
	if (tp_conn_peer_lost(c)) {
		/* not c->error: the receive side still delivers what arrived, then ends */
		atomic_store(&c->peer_gone, true);
		return -ECONNRESET;
	}
	return 0;
}

int tp_tx_fin(struct tp_conn *c)
{
	struct iov_cur ic = { 0 };

	if (c->fin_sent)
		return 0;
	if (inline_free(c) > 0) {
		c->fin_msn = c->msn_next;
		send_inline(c, &ic, 0, TP_MSG_FIN);
	} else if (tp_data_room(c, TP_MT_SHORT) > 0) {
		c->fin_msn = c->msn_next;
		send_data(c, &ic, 0, TP_MT_SHORT, TP_MSG_FIN);
		publish_tx(c);
	} else {
		return -EAGAIN;
	}
	c->fin_sent = true;
	wake_peer(c, TP_W_FB_WAIT);
	return 0;
}

ssize_t tp_send(struct tp_conn *c, const struct iovec *iov, int iovcnt)
{
	const struct tp_params *pp = &c->link->params;
	struct iov_cur ic = { .iov = iov, .cnt = iovcnt };
	size_t total = 0, sent = 0;
	bool data_pub = false, any = false;
	ssize_t rc;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	pthread_mutex_lock(&c->tx_lock);
	__atomic_store_n(&c->used, true, __ATOMIC_RELAXED); /* read by the helper */
	rc = tx_check(c);
	if (rc)
		goto out;
	tp_tx_feedback(c);
	if ((rc = atomic_load(&c->error)))
		goto out;
	if (total == 0)
		goto out;
	while (sent < total) {
		size_t left = total - sent;
		uint32_t max_msg = c->out.qsize / 2u;

		if (left <= pp->inline_max && inline_free(c) > 0) {
			send_inline(c, &ic, (unsigned)left, 0);
			sent += left;
			any = true;
			continue;
		}
		uint8_t type = TP_MT_SHORT;
		uint32_t room;

		while (ic.i < iovcnt && ic.off == iov[ic.i].iov_len) {
			ic.i++;
			ic.off = 0;
		}
		if (left > pp->short_max &&
		    ((uintptr_t)iov[ic.i].iov_base + ic.off) % 4u == 0)
			type = TP_MT_LONG;
		room = tp_data_room(c, type);
		if (room == 0 && type == TP_MT_LONG) {
			type = TP_MT_SHORT;
			room = tp_data_room(c, type);
		}
		if (room > max_msg)
			room = max_msg;
		if (room == 0)
			break;
		uint32_t n = left < room ? (uint32_t)left : room;

		if (type == TP_MT_LONG && n <= pp->short_max)
			type = TP_MT_SHORT;
		send_data(c, &ic, n, type, 0);
		sent += n;
		data_pub = true;
		any = true;
	}
	if (data_pub)
		publish_tx(c);
	if (any) {
		c->st->tx_bytes += sent;
		wake_peer(c, TP_W_FB_WAIT);
		tp_set_wait_flag(c, TP_W_TX_WAIT, &c->tx_wait_set, false);
	}
	rc = sent ? (ssize_t)sent : -EAGAIN;
out:
	pthread_mutex_unlock(&c->tx_lock);
	return rc;
}

/* --- receive side --------------------------------------------------------------------------- */

static const volatile uint8_t *in_slot(const struct tp_conn *c)
{
	return c->link->in + TP_OFF_SLOTS + (size_t)c->slot * c->link->slot_size;
}

static const volatile uint8_t *in_inline(const struct tp_conn *c, uint32_t pos)
{
	return in_slot(c) + TP_SLOT_RINGS + (pos & (c->link->geom.inline_n - 1)) * 128u;
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

	if (all || c->c_i != c->pub_i)
		peer_word(c, TP_W_FB_RX_I, c->c_i);
	if (all || c->c_d != c->pub_d)
		peer_word(c, TP_W_FB_RX_D, c->c_d);
	if (all || c->v_msn != c->pub_ack)
		peer_word(c, TP_W_FB_ACK_MSN, c->v_msn);
	if (all || ep != c->pub_ep)
		peer_word(c, TP_W_FB_EPOCH, ep);
	ntb_wc_flush(c->link->ntb);
	c->pub_i = c->c_i;
	c->pub_d = c->c_d;
	c->pub_ack = c->v_msn;
	c->pub_ep = ep;
	c->fb_dirty = true;
	wake_peer(c, TP_W_TX_WAIT);
}

static void fb_publish(struct tp_conn *c)
{
	fb_publish_words(c, false);
}

/* Data missing or corrupt: bump the epoch and ask for a retransmission (Retry). */
#define rx_fail(c, crc) rx_fail_at((c), (crc), __LINE__)
static void rx_fail_at(struct tp_conn *c, bool crc, int line)
{
	LOG(LL_DEBUG, "transport: slot %u retry (epoch %u, msn %u, tp_data.c:%d)", c->slot,
	    c->rx_epoch + 1u, c->v_msn, line);
	if (crc)
		c->st->crc_errors++;
	if (++c->rerr > c->link->params.max_err) {
		LOG(LL_DEBUG, "transport: slot %u: MaxErr reached", c->slot);
		set_error(c, -ECONNRESET);
		tp_write_st(c->link, c->out.slot_off, c->nonce_out, TP_ST_RST);
		return;
	}
	c->rx_epoch++;
	c->gated = true;
	c->gate_deadline_ms = tp_now_ms() + c->link->params.recv_timeout_ms;
	c->pub_ep = (uint32_t)c->rx_epoch | (uint32_t)c->det_seen << 16;
	peer_word(c, TP_W_FB_EPOCH, c->pub_ep);
	ntb_wc_flush(c->link->ntb);
	ntb_peer_db_ring(c->link->ntb);
}

enum probe { PR_NONE, PR_OK, PR_OTHER, PR_BAD };

/* Look at inline position POS for message MSN. */
static enum probe rx_inline(struct tp_conn *c, uint32_t pos, uint32_t msn, struct tp_rec *r)
{
	const volatile uint8_t *s = in_inline(c, pos);
	uint8_t buf[128], flags;
	unsigned len;
	uint32_t m;

	/* acquire: the sequence byte before the slot it publishes; pairs with the barrier in
	 * write_inline_slot() */
	if (__atomic_load_n((const uint8_t *)s + TP_INL_SEQ, __ATOMIC_ACQUIRE) !=
	    tp_inline_seq(pos, c->link->geom.log2n, c->seq_base_in))
		return PR_NONE;
	memcpy(buf, (const void *)s, sizeof(buf)); /* private copy, then validate */
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

static enum probe rx_data(struct tp_conn *c, uint32_t msn, struct tp_rec *r, bool check)
{
	uint32_t q = c->link->geom.qsize, txd, avail, fp, crc;
	struct tp_desc d;

	if (!slot_word(c, TP_W_TX_D, &txd))
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

/* Validate ahead (under rx_lock): move messages in MSN order from the rings to the private
 * record queue; on evidence of loss or corruption, Retry. Also answers Detect. */
void tp_rx_progress(struct tp_conn *c, uint32_t want)
{
	uint32_t v;
	uint16_t txe = 0, det;
	bool have_epoch;

	if (atomic_load(&c->error))
		return;
	have_epoch = slot_word(c, TP_W_TX_EPOCH, &v);
	if (have_epoch)
		txe = (uint16_t)v;
	det = have_epoch ? (uint16_t)(v >> 16) : c->det_seen;
	if (c->gated) {
		if (have_epoch && tp_rt_epoch_ok(c->rx_epoch, txe)) {
			c->gated = false;
		} else {
			if (tp_now_ms() > c->gate_deadline_ms)
				rx_fail(c, false); /* TimerRcvData: ask again */
			return;
		}
	}
	while (c->rec_tail - c->rec_head < TP_RECS && !c->fin_rcvd_v && c->rec_bytes < want) {
		struct tp_rec r;
		enum probe pi = rx_inline(c, c->v_i, c->v_msn, &r);

		if (pi == PR_OK) {
			c->v_i++;
		} else {
			enum probe pd = rx_data(c, c->v_msn, &r, true);

			/* The inline probe came first: a later data message seen now (tx_d read with
			 * acquire) proves an inline one published before it is visible by now. */
			if (pd == PR_OTHER && pi == PR_NONE &&
			    (pi = rx_inline(c, c->v_i, c->v_msn, &r)) == PR_OK) {
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
				/* nothing in the data ring: an unreadable inline slot is an error only
				 * if a later message shows up behind it */
				struct tp_rec r2;

				if (pi != PR_NONE &&
				    rx_inline(c, c->v_i + 1, c->v_msn + 1, &r2) == PR_OK) {
					rx_fail(c, pi == PR_BAD);
					return;
				}
				c->inline_bad = pi == PR_BAD;
				break;
			}
		}
take:
		c->recs[c->rec_tail % TP_RECS] = r;
		if (c->rec_skip && c->rec_tail == c->rec_head) {
			/* adopted after exec: the old image had consumed this much of it */
			c->rec_off = c->rec_skip < r.len ? c->rec_skip : r.len;
			c->rec_skip = 0;
		}
		c->rec_tail++;
		c->rec_bytes += r.len + 1; /* +1: a FIN counts as something to read */
		c->v_msn++;
		c->rerr = 0;
		if (r.flags & TP_MSG_FIN)
			c->fin_rcvd_v = true;
	}
	if (have_epoch && det != c->det_seen) {
		/* Detect: still missing what the sender says it sent → Retry; else DetectAck */
		uint32_t next;

		c->det_seen = det;
		if (slot_word(c, TP_W_TX_NEXT_MSN, &next) && next != c->v_msn &&
		    next - c->v_msn < (1u << 31) && !c->fin_rcvd_v && !c->gated &&
		    c->rec_bytes < want) {
			rx_fail(c, c->inline_bad);
		}
		fb_publish_words(c, true);
	}
}

/* A record was consumed entirely: release its ring space. */
static void rec_done(struct tp_conn *c, const struct tp_rec *r)
{
	if (r->ring == 0) {
		c->c_i = r->pos + 1;
		c->st->rx_msgs_inline++;
	} else {
		c->c_d = r->pos + r->footprint;
		if (r->type == TP_MT_LONG)
			c->st->rx_msgs_long++;
		else
			c->st->rx_msgs_short++;
	}
	if (r->flags & TP_MSG_FIN)
		c->eof = true;
	c->rec_bytes -= r->len + 1;
	c->rec_head++;
	c->rec_off = 0;
}

static size_t rec_copy(struct tp_conn *c, const struct tp_rec *r, uint32_t off, uint8_t *dst,
		       size_t n)
{
	if (r->ring == 0)
		memcpy(dst, (const void *)(in_inline(c, r->pos) + r->payload + off), n);
	else
		data_copy(c, dst, r->pos + r->payload + off, (uint32_t)n, 0, true);
	return n;
}

/* Release what was consumed: in big steps while data keeps coming, at once when drained. */
static void rx_release(struct tp_conn *c, bool drained)
{
	uint32_t qs = c->link->geom.qsize, n = c->link->geom.inline_n;

	if (c->c_d - c->pub_d >= qs / 8u || c->c_i - c->pub_i >= n / 4u ||
	    ((c->c_d != c->pub_d || c->c_i != c->pub_i) && drained))
		fb_publish(c);
}

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
	if (rx_inline(c, c->v_i, c->v_msn, &r) != PR_NONE)
		return 0; /* inline (or trouble): the validating path handles it */
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
		c->st->rx_msgs_long++;
	else
		c->st->rx_msgs_short++;
	if (r.flags & TP_MSG_FIN) {
		c->fin_rcvd_v = true;
		c->eof = true;
	}
	return r.len;
}

ssize_t tp_recv(struct tp_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	bool peek = flags & TP_RECV_PEEK;
	size_t got = 0, voff = 0;
	int vi = 0;
	ssize_t rc;
	uint32_t h, off;

	pthread_mutex_lock(&c->rx_lock);
	__atomic_store_n(&c->used, true, __ATOMIC_RELAXED); /* read by the helper */
	if (c->rd_shut) { /* as Linux: reads after shutdown(SHUT_RD) see end of stream */
		pthread_mutex_unlock(&c->rx_lock);
		return 0;
	}
	h = c->rec_head;
	off = c->rec_off;
	for (;;) {
		while (vi < iovcnt && voff == iov[vi].iov_len) {
			vi++;
			voff = 0;
		}
		if (vi == iovcnt || (c->eof && h == c->rec_tail))
			break;
		if (h == c->rec_tail) {
			size_t n = peek ? 0 : rx_direct(c, iov, iovcnt, vi, voff);

			if (n) {
				got += n;
				while (n) {
					size_t k = iov[vi].iov_len - voff;

					if (k > n)
						k = n;
					voff += k;
					n -= k;
					if (voff == iov[vi].iov_len && n) {
						vi++;
						voff = 0;
					}
				}
				rx_release(c, false);
				continue;
			}
			tp_rx_progress(c, 1);
			if (h == c->rec_tail)
				break;
			if (h == c->rec_head)
				off = c->rec_off; /* an adopted connection may start inside it */
		}
		struct tp_rec *r = &c->recs[h % TP_RECS];
		uint32_t left = r->len - off;

		while (left && vi < iovcnt) {
			size_t room = iov[vi].iov_len - voff, n = left < room ? left : room;

			if (room == 0) {
				vi++;
				voff = 0;
				continue;
			}
			rec_copy(c, r, off, (uint8_t *)iov[vi].iov_base + voff, n);
			voff += n;
			off += (uint32_t)n;
			left -= (uint32_t)n;
			got += n;
		}
		if (left)
			break;
		if (peek) {
			if (r->flags & TP_MSG_FIN)
				break;
			h++;
			off = 0;
			continue;
		}
		rec_done(c, r);
		h = c->rec_head;
		off = 0;
		rx_release(c, false);
	}
	if (!peek)
		c->rec_off = off;
	if (got) {
		if (!peek)
			c->st->rx_bytes += got;
		rc = (ssize_t)got;
		/* reading without polling: the peer need not ring for us any more */
		tp_set_wait_flag(c, TP_W_FB_WAIT, &c->rx_wait_set, false);
	} else if (c->eof) {
		rc = 0;
	} else if ((rc = atomic_load(&c->error))) {
		;
	} else if (c->rec_head == c->rec_tail && tp_conn_peer_lost(c)) {
		tp_rx_progress(c, 1); /* whatever arrived before the loss is still delivered */
		rc = c->rec_head == c->rec_tail ? -ECONNRESET : -EAGAIN;
		if (rc == -ECONNRESET)
			set_error(c, -ECONNRESET);
	} else {
		rc = -EAGAIN;
	}
	rx_release(c, c->rec_head == c->rec_tail);
	pthread_mutex_unlock(&c->rx_lock);
	return rc;
}

/* --- timers (helper thread and wait loops) ------------------------------------------------- */

void tp_conn_timers(struct tp_conn *c, uint64_t now)
{
	const struct tp_params *pp = &c->link->params;

	/* queue fill levels for `ntbsock stat` (racy reads of counters: a snapshot) */
	c->st->tx_queue_fill = (c->tx_d - c->fb_rx_d) + (c->tx_i - c->fb_rx_i) * 128u;
	c->st->rx_queue_fill = (c->v_d - c->c_d) + (c->v_i - c->c_i) * 128u;

	if (atomic_load(&c->error))
		return;
	if (pthread_mutex_trylock(&c->tx_lock) == 0) {
		tp_tx_feedback(c);
		if (c->wr_shut && !c->fin_sent && !atomic_load(&c->error))
			tp_tx_fin(c);
		/* unacknowledged or unreleased data without progress: Detect (the answer also
		 * republishes the receiver's feedback, whose last write may have been lost) */
		bool pending = c->msn_next != c->fb_ack || c->tx_i != c->fb_rx_i ||
			       c->tx_d != c->fb_rx_d;

		if (pending && !atomic_load(&c->error)) {
			uint32_t to = c->terr ? pp->detect_timeout_ms : pp->send_timeout_ms;

			/* an alive receiver that does not read: up to ~2 s between probes */
			to += (c->det_backoff < 16 ? c->det_backoff : 16) * 120u;

			if (now - c->last_ack_ms > to) {
				/* TimerSendData / TimerDetect: PROBING, send Detect */
				if (++c->terr > pp->max_err) {
					set_error(c, -ECONNRESET);
				} else {
					c->detect_seq++;
					peer_word(c, TP_W_TX_NEXT_MSN, c->msn_next);
					peer_word(c, TP_W_TX_D, c->tx_d);
					ntb_to_peer_barrier(c->link->ntb);
					peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch |
						  (uint32_t)c->detect_seq << 16);
					ntb_wc_flush(c->link->ntb);
					ntb_peer_db_ring(c->link->ntb);
					c->last_ack_ms = now;
				}
			}
		} else if (c->tx_dirty && now - c->last_tx_pub_ms > 50) {
			/* republish: a dropped index write must not stall the peer */
			peer_word(c, TP_W_TX_D, c->tx_d);
			peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch |
				  (uint32_t)c->detect_seq << 16);
			c->tx_dirty = false;
		}
		pthread_mutex_unlock(&c->tx_lock);
	}
	if (pthread_mutex_trylock(&c->rx_lock) == 0) {
		tp_rx_progress(c, 1);
		if (c->rd_shut || atomic_load(&c->closed)) {
			/* nobody will read: discard, so the peer's sender is not blocked */
			while (c->rec_head != c->rec_tail)
				rec_done(c, &c->recs[c->rec_head % TP_RECS]);
			if (c->c_d != c->pub_d || c->c_i != c->pub_i)
				fb_publish(c);
		}
		if (c->fb_dirty) {
			fb_publish_words(c, true);
			c->fb_dirty = false;
		}
		pthread_mutex_unlock(&c->rx_lock);
	}
}
