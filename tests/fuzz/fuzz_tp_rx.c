/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the transport's receive path fed with hostile inbound-window contents
 * (doc/design.md §3 rule 4). One connection is set up once between the two sides of a shm
 * link in this process, with the helper thread held (the harness drives everything by direct
 * calls); each input is then a program of "peer" writes into the receiver's slot — checked words (TX index,
 * epoch/detect, next MSN, ST flags) with valid or broken checks, inline slots and data-ring
 * descriptors with chosen lengths, MSNs, sequence bytes and CRCs, raw bytes, control packets
 * into the mailbox — interleaved with receives, polls, timers and genuine sends. The receiver
 * may fail the connection; it must never crash, touch memory outside the window, break the
 * tp_recv() contract or its record queue's invariants (rx_check()).
 *
 * Between inputs everything an input can change is put back from a snapshot taken after the
 * set-up (fz_restore()): both connections' private state, the sender's shadow rings, both
 * connections' slots in the two inbound windows, the mailbox areas and both host tables. No
 * file, no thread, no sleep per input. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

#define FZ_PORT 5000u

static struct {
	char path[128];
	struct tp_link *a, *b;    /* a: side 0 (the hostile peer), b: side 1 (the receiver) */
	struct tp_params tpp;
	struct tp_conn *ca, *cb;  /* the connection: a's end (genuine sends), b's (under test) */
	struct ntb_link *out;     /* a's link: its outbound window is b's inbound window */
	struct ntb_link *back;    /* b's link: its outbound window is a's inbound window */
	bool open;
	/* --- the snapshot taken after the set-up (fz_snap()) */
	struct tp_conn snap_ca, snap_cb;
	uint8_t *slot_b, *slot_a; /* cb's slot in b's inbound window, ca's in a's */
	uint8_t *head_b, *head_a; /* each inbound window below the slots: indices, listener
				   * bitmap, mailbox */
	uint8_t *host_b, *host_a; /* each host table from peer_epoch on (what its lock guards) */
	uint8_t *sh_inline, *sh_data; /* ca's shadow rings */
	uint64_t ms;              /* tp_now_ms() when taken */
	bool dirty_mbox, dirty_send; /* what the current input touched beyond the slots */
} fz;

static void fz_unlink(void)
{
	if (fz.open)
		tl_unlink(fz.path);
}

/* The set-up's server side: b's mailbox, served while a's tp_connect() waits for the Ack
 * (there is no helper thread to do it). */
static _Atomic bool fz_serving;

static void *fz_serve(void *arg)
{
	(void)arg;
	while (atomic_load(&fz_serving)) {
		tp_host_lock(fz.b);
		tp_mbox_process(fz.b);
		tp_host_unlock(fz.b);
		usleep(200);
	}
	return NULL;
}

static int fz_connect(void)
{
	uint64_t end = tl_now_ms() + 10000;
	enum tp_reason why;
	struct tp_key k;
	pthread_t th;
	int rc;

	if (tp_listen(fz.b, FZ_PORT))
		return -1;
	while (!(tp_link_refresh(fz.a) & tp_link_refresh(fz.b))) {
		if (tl_now_ms() > end)
			return -1;
		usleep(1000);
	}
	if (tl_wait_listen(fz.a, FZ_PORT, 10000))
		return -1;
	tl_key(&k, 40000, FZ_PORT);
	atomic_store(&fz_serving, true);
	if (pthread_create(&th, NULL, fz_serve, NULL))
		return -1;
	rc = tp_connect(fz.a, &k, 5000, &fz.ca, &why);
	atomic_store(&fz_serving, false);
	pthread_join(th, NULL);
	if (rc || tp_conn_confirm(fz.ca) || tp_attach(fz.b, &k, &fz.cb))
		return -1;
	return 0;
}

static uint8_t *fz_dup(const volatile uint8_t *src, size_t len)
{
	uint8_t *d = malloc(len);

	if (!d)
		abort();
	memcpy(d, (const void *)src, len);
	return d;
}

static size_t host_body(const struct tp_link *l)
{
	return l->host_size - offsetof(struct tp_host, peer_epoch);
}

static void fz_snap(void)
{
	/* no record queued: the records array (most of struct tp_conn) need not be restored */
	if (fz.ca->rec_head != fz.ca->rec_tail || fz.cb->rec_head != fz.cb->rec_tail ||
	    fz.ca->fo || fz.cb->fo)
		abort();
	fz.snap_ca = *fz.ca;
	fz.snap_cb = *fz.cb;
	fz.slot_b = fz_dup(fz.b->in + tp_slot_off(fz.b, fz.cb->slot), fz.b->slot_size);
	fz.slot_a = fz_dup(fz.a->in + tp_slot_off(fz.a, fz.ca->slot), fz.a->slot_size);
	fz.head_b = fz_dup(fz.b->in, TP_OFF_SLOTS);
	fz.head_a = fz_dup(fz.a->in, TP_OFF_SLOTS);
	fz.host_b = fz_dup((const uint8_t *)&fz.b->host->peer_epoch, host_body(fz.b));
	fz.host_a = fz_dup((const uint8_t *)&fz.a->host->peer_epoch, host_body(fz.a));
	fz.sh_inline = fz_dup(fz.ca->sh_inline, (size_t)fz.ca->out.inline_n * 128u);
	fz.sh_data = fz_dup(fz.ca->sh_data, fz.ca->out.qsize);
	fz.ms = tp_now_ms();
}

/* Put C back as SNAP holds it, all but its records (none was queued then; those the input
 * queued are past rec_tail again) and its bounce buffer (kept, not valid: a later input
 * finds it allocated instead of allocating it, which only skips a malloc). The clock went
 * on: every stamp moves by the time since the snapshot, so that an input meets the same
 * timers however long the run has been going. */
static void conn_restore(struct tp_conn *c, const struct tp_conn *snap, uint64_t shift)
{
	const size_t r0 = offsetof(struct tp_conn, recs), r1 = r0 + sizeof(c->recs);
	uint8_t *bounce = c->rx_bounce;
	uint32_t cap = c->rx_bounce_cap;

	if (c->fo) /* no witness socket: a failover cannot start (tp_fo_request()) */
		abort();
	memcpy((void *)c, snap, r0);
	memcpy((uint8_t *)c + r1, (const uint8_t *)snap + r1, sizeof(*c) - r1);
	c->rx_bounce = bounce;
	c->rx_bounce_cap = cap;
	c->rx_bounce_ok = false;
#define FZ_SHIFT(f) do { if (c->f) c->f += shift; } while (0)
	FZ_SHIFT(closed_ms);
	FZ_SHIFT(last_wake_ms);
	FZ_SHIFT(last_ack_ms);
	FZ_SHIFT(last_tx_pub_ms);
	FZ_SHIFT(progress_ms);
	FZ_SHIFT(gate_deadline_ms);
#undef FZ_SHIFT
	if (atomic_load(&c->witness_ms))
		atomic_fetch_add(&c->witness_ms, shift);
}

static void fz_restore(void)
{
	uint64_t shift = tp_now_ms() - fz.ms;

	conn_restore(fz.ca, &fz.snap_ca, shift);
	conn_restore(fz.cb, &fz.snap_cb, shift);
	ntb_write(fz.out, tp_slot_off(fz.b, fz.cb->slot), fz.slot_b, fz.b->slot_size);
	ntb_write(fz.back, tp_slot_off(fz.a, fz.ca->slot), fz.slot_a, fz.a->slot_size);
	memcpy(&fz.b->host->peer_epoch, fz.host_b, host_body(fz.b));
	memcpy(&fz.a->host->peer_epoch, fz.host_a, host_body(fz.a));
	if (fz.dirty_mbox) {
		ntb_write(fz.out, 0, fz.head_b, TP_OFF_SLOTS);
		ntb_write(fz.back, 0, fz.head_a, TP_OFF_SLOTS);
	}
	if (fz.dirty_send) {
		memcpy(fz.ca->sh_inline, fz.sh_inline, (size_t)fz.ca->out.inline_n * 128u);
		memcpy(fz.ca->sh_data, fz.sh_data, fz.ca->out.qsize);
	}
	fz.dirty_mbox = fz.dirty_send = false;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	tp_params_init(&fz.tpp);
	fz.tpp.contexts = 16;
	fz.tpp.queue_size = 16u << 10; /* small: wraps often, and cheap to restore */
	fz.tpp.inline_slots = 16;
	fz.tpp.short_max = 1024;
	/* the input drives the timers (op TIMERS), with a clock of its own */
	fz.tpp.cnct_timeout_ms = 500;
	fz.tpp.send_timeout_ms = 60000;
	fz.tpp.recv_timeout_ms = 60000;
	fz.tpp.detect_timeout_ms = 60000;
	fz.tpp.max_err = 4;
	fz.tpp.spin_us = 0;
	snprintf(fz.path, sizeof(fz.path), "/dev/shm/ntbsock-test-fuzz-tprx-%d", (int)getpid());
	tl_unlink(fz.path);
	tp_helper_hold(true); /* the harness alone drives the link */
	if (tl_open(fz.path, 0, 4u << 20, &fz.tpp, &fz.a) ||
	    tl_open(fz.path, 1, 4u << 20, &fz.tpp, &fz.b)) {
		fprintf(stderr, "fuzz_tp_rx: cannot open the link pair\n");
		exit(1);
	}
	fz.open = true;
	atexit(fz_unlink);
	if (fz_connect()) {
		fprintf(stderr, "fuzz_tp_rx: cannot set up the connection\n");
		exit(1);
	}
	fz.out = tp_link_ntb(fz.a);
	fz.back = tp_link_ntb(fz.b);
	fz_snap();
	return 0;
}

/* --- input reader ---------------------------------------------------------------------------- */
struct rd {
	const uint8_t *p;
	size_t n;
};
static uint8_t rd8(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}
static uint16_t rd16(struct rd *r) { return (uint16_t)(rd8(r) | rd8(r) << 8); }
static uint32_t rd32(struct rd *r) { return (uint32_t)rd16(r) | (uint32_t)rd16(r) << 16; }
/* Bytes past the input's end: a fixed pattern (byte i is i * 37 + 11), copied from a table
 * rather than computed per byte (a loop per byte is a traced comparison per byte). */
static uint8_t fill_pat[1u << 15];

static void rdbytes(struct rd *r, uint8_t *dst, size_t n)
{
	size_t k = r->n < n ? r->n : n;

	if (n > sizeof(fill_pat))
		abort(); /* the harness asks for at most a data ring */
	memcpy(dst, r->p, k);
	r->p += k, r->n -= k;
	if (!fill_pat[0])
		for (size_t i = 0; i < sizeof(fill_pat); i++)
			fill_pat[i] = (uint8_t)(i * 37 + 11);
	memcpy(dst + k, fill_pat + k, n - k);
}

/* --- the hostile peer's writes ------------------------------------------------------------- */
struct ctx {
	struct tp_conn *ca, *cb;
	struct ntb_link *out;      /* a's link: its outbound window is b's inbound window */
	uint32_t slot_off;         /* cb's slot in b's inbound window */
	uint32_t slot_size, inline_n, log2n, qsize;
	uint64_t sent;
};

static void snap(struct ctx *x, uint32_t *v_i, uint32_t *v_d, uint32_t *v_msn, uint16_t *ep)
{
	tp_mutex_lock(&x->cb->rx_lock);
	*v_i = x->cb->v_i;
	*v_d = x->cb->v_d;
	*v_msn = x->cb->v_msn;
	*ep = x->cb->rx_epoch;
	tp_mutex_unlock(&x->cb->rx_lock);
}

static void fz_peer_write(struct ctx *x, uint32_t off, const void *src, size_t len)
{
	if (ntb_write(x->out, x->slot_off + off, src, len))
		abort(); /* the harness stays inside the slot */
}

/* Words go as single 64-bit stores, as the real sender publishes them. */
static void put_word(struct ctx *x, uint32_t w, uint64_t word)
{
	if (ntb_write64(x->out, x->slot_off + w, word))
		abort();
}

/* Write LEN bytes at data-ring position POS (wraps at the ring's end). */
static void put_ring(struct ctx *x, uint32_t pos, const uint8_t *src, uint32_t len)
{
	uint32_t base = TP_SLOT_RINGS + x->inline_n * 128u, q = x->qsize;

	while (len) {
		uint32_t p = pos & (q - 1), n = len < q - p ? len : q - p;

		fz_peer_write(x, base + p, src, n);
		pos += n, src += n, len -= n;
	}
}

static void op_word(struct ctx *x, struct rd *r)
{
	static const uint32_t words[] = { TP_W_TX_D, TP_W_TX_EPOCH, TP_W_TX_NEXT_MSN,
					  TP_W_TX_WAIT, TP_W_ST_FLAGS, TP_W_TX_HELD,
					  TP_W_TX_HELD2 };
	uint8_t sel = rd8(r), mode = rd8(r);
	uint32_t val = rd32(r), v_i, v_d, v_msn, w = words[sel % 7];
	uint16_t ep;

	snap(x, &v_i, &v_d, &v_msn, &ep);
	if (w == TP_W_TX_HELD || w == TP_W_TX_HELD2) {
		/* raw words (a dead sender's held message, read at its death: ST_FLAGS GONE):
		 * near our next MSN with a short length, or anything */
		uint64_t hw = (uint64_t)rd32(r) << 32;

		hw |= mode & 1 ? (uint64_t)(val & 0x3fffu) << 16 |
				 (uint16_t)(v_msn + (uint32_t)(int8_t)(val >> 24)) : val;
		put_word(x, w, hw);
		ntb_peer_db_ring(x->out);
		return;
	}
	if (mode & 1) { /* near the receiver's own state: the interesting values */
		if (w == TP_W_TX_D)
			val = v_d + (uint32_t)(int16_t)val;
		else if (w == TP_W_TX_NEXT_MSN)
			val = v_msn + (uint32_t)(int8_t)val;
		else if (w == TP_W_TX_EPOCH)
			val = (uint32_t)(uint16_t)(ep + (int8_t)val) | (val & 0xffff0000u);
		else if (w == TP_W_ST_FLAGS)
			val &= 3;
	}
	if (mode & 2)
		put_word(x, w, (uint64_t)val | (uint64_t)rd32(r) << 32); /* broken check */
	else
		put_word(x, w, tp_cw_make(x->cb->nonce_in, val));
	ntb_peer_db_ring(x->out);
}

static void op_inline(struct ctx *x, struct rd *r)
{
	uint8_t slot[128], dpos = rd8(r), len = rd8(r), dmsn = rd8(r), flags = rd8(r);
	uint8_t mode = rd8(r), seq;
	uint32_t v_i, v_d, v_msn, pos, crc;
	uint16_t ep;
	unsigned l = len % (TP_INLINE_MAX + 1);

	snap(x, &v_i, &v_d, &v_msn, &ep);
	pos = v_i + dpos % 8u;
	memset(slot, 0, sizeof(slot));
	rdbytes(r, slot + tp_inline_off(l), l);
	seq = (mode & 1) ? rd8(r) : tp_inline_seq(pos, x->log2n, x->cb->seq_base_in);
	crc = crc32c(x->cb->nonce_in, slot + tp_inline_off(l), l);
	tp_inline_finish(slot, l, v_msn + (uint32_t)(int8_t)dmsn, flags & 1, seq, crc);
	if (mode & 2) /* a hostile length / crc / flags byte after the fact */
		slot[TP_INL_LEN + rd8(r) % 11] = rd8(r);
	fz_peer_write(x, TP_SLOT_RINGS + (pos & (x->inline_n - 1)) * 128u, slot, 127);
	ntb_to_peer_barrier(x->out);
	fz_peer_write(x, TP_SLOT_RINGS + (pos & (x->inline_n - 1)) * 128u + TP_INL_SEQ, &slot[TP_INL_SEQ], 1);
	ntb_peer_db_ring(x->out);
}

static void op_data(struct ctx *x, struct rd *r)
{
	static uint8_t buf[512 + (64u << 10)];
	uint16_t dpos = rd16(r), len = rd16(r);
	uint8_t type = rd8(r), flags = rd8(r), dmsn = rd8(r), mode = rd8(r);
	uint32_t v_i, v_d, v_msn, pos, gap, fp, pcrc;
	uint16_t ep;
	struct tp_desc d;

	snap(x, &v_i, &v_d, &v_msn, &ep);
	pos = (mode & 8) ? v_d + dpos : v_d + (uint32_t)(dpos % 64u) * TP_DATA_ALIGN;
	memset(&d, 0, sizeof(d));
	d.type = (mode & 4) ? type : (uint8_t)(1 + (type & 1));
	d.flags = flags & 1;
	d.len = (mode & 16) ? rd32(r) : (uint32_t)len % 4096u;
	d.msn = v_msn + (uint32_t)(int8_t)dmsn;
	gap = tp_payload_gap(d.type == TP_MT_LONG ? TP_MT_LONG : TP_MT_SHORT, pos);
	fp = d.len <= x->qsize ? gap + (uint32_t)ALIGN_UP(d.len, TP_DATA_ALIGN) : gap;
	if (fp > sizeof(buf) - 256)
		fp = gap;
	memset(buf, 0, fp);
	if (d.len <= x->qsize && gap + d.len <= sizeof(buf))
		rdbytes(r, buf + gap, d.len);
	pcrc = d.len <= x->qsize && gap + d.len <= sizeof(buf)
		? crc32c(x->cb->nonce_in, buf + gap, d.len) : 0;
	d.crc = tp_desc_crc(pcrc, &d);
	if (mode & 2)
		d.crc ^= 1u << (rd8(r) & 31);
	memcpy(buf, &d, sizeof(d));
	put_ring(x, pos, buf, fp);
	ntb_to_peer_barrier(x->out);
	if (mode & 1) /* publish it */
		put_word(x, TP_W_TX_D, tp_cw_make(x->cb->nonce_in, pos + fp));
	if (mode & 32) /* and the epoch as the receiver expects it */
		put_word(x, TP_W_TX_EPOCH, tp_cw_make(x->cb->nonce_in, ep));
	ntb_peer_db_ring(x->out);
}

static void op_raw(struct ctx *x, struct rd *r)
{
	uint8_t b[64];
	uint32_t off = rd16(r) % x->slot_size, len = rd8(r) % sizeof(b) + 1;

	if (off + len > x->slot_size)
		len = x->slot_size - off;
	rdbytes(r, b, len);
	fz_peer_write(x, off, b, len);
}

static void check_recv(ssize_t n, size_t cap)
{
	if (n > (ssize_t)cap || (n < 0 && n != -EAGAIN && n != -ECONNRESET && n != -EPIPE &&
				  n != -ETIMEDOUT && n != -EPROTO && n != -EBADMSG))
		abort();
}

static void op_recv(struct ctx *x, struct rd *r)
{
	static uint8_t b1[70000], b2[300];
	uint16_t cap = rd16(r);
	uint8_t fl = rd8(r);
	struct iovec v[2] = { { b1, (size_t)cap + 1 }, { b2, fl % sizeof(b2) } };
	ssize_t n = tp_recv(x->cb, v, (fl & 0x80) ? 2 : 1, (fl & 0x40) ? TP_RECV_PEEK : 0);

	check_recv(n, v[0].iov_len + ((fl & 0x80) ? v[1].iov_len : 0));
}

static void op_send(struct ctx *x, struct rd *r)
{
	static uint8_t b[5000];
	uint16_t len = rd16(r) % sizeof(b) + 1;
	struct iovec v = { b, len };
	ssize_t n;

	tl_fill(b, len, 7, x->sent);
	fz.dirty_send = true;
	n = tp_send(x->ca, &v, 1);
	if (n > 0)
		x->sent += (uint64_t)n;
	else if (n != -EAGAIN && n != -EPIPE && n != -ECONNRESET && n != -ETIMEDOUT)
		abort();
}

/* A well-framed control packet with hostile fields, sent through a's real mailbox. */
static void op_pkt(struct ctx *x, struct rd *r)
{
	struct tp_pkt p;

	memset(&p, 0, sizeof(p));
	rdbytes(r, (uint8_t *)&p, offsetof(struct tp_pkt, reserved));
	p.type = (uint8_t)(p.type % 5u); /* 0 (invalid), Apply, Ack, Nack, Cancel */
	if (p.type == TP_PKT_APPLY && (p.pad & 1)) { /* plausible geometry: gets further */
		tp_pkt_set_slot_off(&p, TP_OFF_SLOTS + (p.slot_off_lo % 16u) * (uint64_t)x->slot_size);
		p.inline_n = x->inline_n;
		p.qsize = x->qsize;
		p.key.bytes[38] = 5000 >> 8;
		p.key.bytes[39] = 5000 & 0xff;
	}
	fz.dirty_mbox = true;
	tp_host_lock(fz.a);
	tp_mbox_send(fz.a, &p);
	tp_host_unlock(fz.a);
	tp_host_lock(fz.b);
	tp_mbox_process(fz.b);
	tp_host_unlock(fz.b);
}

/* Raw bytes over the mailbox area or its index words. */
static void op_mbox_raw(struct ctx *x, struct rd *r)
{
	uint8_t b[32];
	uint8_t sel = rd8(r);
	uint32_t off;

	fz.dirty_mbox = true;
	rdbytes(r, b, sizeof(b));
	if (sel & 1)
		off = (sel & 2) ? TP_OFF_MBOX_TX : TP_OFF_MBOX_RX;
	else
		off = TP_OFF_MBOX + (uint32_t)(sel >> 2) * 97u % (TP_MBOX_SLOTS * TP_MBOX_PKT - 32u);
	ntb_write(x->out, off, b, (sel & 1) ? 8 : sizeof(b));
	tp_host_lock(fz.b);
	tp_mbox_process(fz.b);
	tp_host_unlock(fz.b);
}

/* The receiver's record queue after any step: within its array, each record's length within
 * its ring, their byte count as kept. (Not the validated cursors against the released ones: a
 * hostile peer that writes past the space it was given makes the receiver validate records
 * over unreleased ones, v_i - c_i above inline_n or v_d - c_d above qsize; every byte is
 * checked again on delivery, rec_copy(), so that only ends its own connection.) */
static void rx_check(const struct tp_conn *c, bool walk)
{
	const struct tp_geom *g = &c->link->geom;
	uint32_t bytes = 0;

	if (c->rec_tail - c->rec_head > TP_RECS)
		abort();
	if (!walk) /* after each step: only the O(1) part */
		return;
	for (uint32_t i = c->rec_head; i != c->rec_tail; i++) {
		const struct tp_rec *r = &c->recs[i % TP_RECS];

		if (r->len > (r->ring ? g->qsize : TP_INLINE_MAX))
			abort();
		bytes += r->len + 1;
	}
	if (bytes != c->rec_bytes)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };
	struct ctx x;
	int ops = 0;

	if (!fz.open)
		LLVMFuzzerInitialize(NULL, NULL);
	memset(&x, 0, sizeof(x));
	x.ca = fz.ca;
	x.cb = fz.cb;
	x.out = fz.out;
	x.slot_off = (uint32_t)x.ca->out.slot_off;
	x.slot_size = fz.b->slot_size;
	x.inline_n = fz.b->geom.inline_n;
	x.log2n = fz.b->geom.log2n;
	x.qsize = fz.b->geom.qsize;
	while (r.n && ops++ < 64) {
		switch (rd8(&r) % 10) {
		case 0: op_word(&x, &r); break;
		case 1: op_inline(&x, &r); break;
		case 2: op_data(&x, &r); break;
		case 3: op_raw(&x, &r); break;
		case 4: op_recv(&x, &r); break;
		case 5: tp_conn_timers(x.cb, tp_now_ms() + (uint64_t)rd16(&r) * 8u); break;
		case 6: op_send(&x, &r); break;
		case 7: op_pkt(&x, &r); break;
		case 8: op_mbox_raw(&x, &r); break;
		case 9: {
			unsigned ev = tp_poll(x.cb);
			int w = tp_wait(x.cb, TP_EV_IN, 0);

			if (ev & ~0x1fu || (w > 0 && (unsigned)w & ~0x1fu))
				abort();
			(void)tp_readable_bytes(x.cb);
			break;
		}
		}
		rx_check(x.cb, false);
	}
	rx_check(x.cb, true);
	/* drain what the receiver accepts */
	for (int i = 0; i < 64; i++) {
		static uint8_t b[70000];
		struct iovec v = { b, sizeof(b) };
		ssize_t n = tp_recv(x.cb, &v, 1, 0);

		check_recv(n, sizeof(b));
		if (n <= 0)
			break;
	}
	rx_check(x.cb, true);
	fz_restore();
	return 0;
}
