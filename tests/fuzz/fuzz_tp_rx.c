/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the transport's receive path fed with hostile inbound-window contents
 * (doc/design.md §3 rule 4). A connection is set up between the two sides of a shm link in this
 * process; the input is then a program of "peer" writes into the receiver's slot — checked
 * words (TX index, epoch/detect, next MSN, ST flags) with valid or broken checks, inline slots
 * and data-ring descriptors with chosen lengths, MSNs, sequence bytes and CRCs, raw bytes,
 * control packets into the mailbox — interleaved with receives, polls, timers and genuine
 * sends. The receiver may fail the connection; it must never crash, touch memory outside the
 * window, or break the tp_recv() contract. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

static struct {
	char path[128];
	struct tp_link *a, *b;    /* a: side 0 (the hostile peer), b: side 1 (the receiver) */
	struct tp_params tpp;
	uint16_t cport;
	bool open;
} fz;

/* Old pairs are abandoned, not closed: tp_link_close() while the transport's helper thread
 * sleeps in ntb_db_wait() on that link is a use-after-free (reported; ASan shows it in
 * test_tp_stream). Only their files are removed. */
static void fz_unlink(void)
{
	if (fz.open)
		tl_unlink(fz.path);
}

static int fz_open(void)
{
	static int gen;

	fz_unlink();
	fz.open = false;
	snprintf(fz.path, sizeof(fz.path), "/dev/shm/ntbsock-test-fuzz-tprx-%d-%d", (int)getpid(),
		 gen++);
	tl_unlink(fz.path);
	if (tl_open(fz.path, 0, 4u << 20, &fz.tpp, &fz.a))
		return -1;
	if (tl_open(fz.path, 1, 4u << 20, &fz.tpp, &fz.b)) {
		tl_unlink(fz.path);
		return -1;
	}
	fz.open = true;
	if (tp_listen(fz.b, 5000) || tl_wait_listen(fz.a, 5000, 10000))
		return -1;
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	tp_params_init(&fz.tpp);
	fz.tpp.contexts = 16;
	fz.tpp.queue_size = 64u << 10;
	fz.tpp.inline_slots = 16;
	fz.tpp.short_max = 1024;
	/* background timers stay out of the way; the input drives them (op TIMERS) */
	fz.tpp.cnct_timeout_ms = 500;
	fz.tpp.send_timeout_ms = 60000;
	fz.tpp.recv_timeout_ms = 60000;
	fz.tpp.detect_timeout_ms = 60000;
	fz.tpp.max_err = 4;
	fz.tpp.spin_us = 0;
	if (fz_open()) {
		fprintf(stderr, "fuzz_tp_rx: cannot open the link pair\n");
		exit(1);
	}
	atexit(fz_unlink);
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
static void rdbytes(struct rd *r, uint8_t *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = r->n ? rd8(r) : (uint8_t)(i * 37 + 11);
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
					  TP_W_TX_WAIT, TP_W_ST_FLAGS };
	uint8_t sel = rd8(r), mode = rd8(r);
	uint32_t val = rd32(r), v_i, v_d, v_msn, w = words[sel % 5];
	uint16_t ep;

	snap(x, &v_i, &v_d, &v_msn, &ep);
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

	(void)x;
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

static int connect_pair(struct ctx *x)
{
	struct tp_key k;
	enum tp_reason why;

	for (int tries = 0; tries < 3; tries++) {
		fz.cport = (uint16_t)(fz.cport + 1);
		tl_key(&k, (uint16_t)(10000 + fz.cport % 50000), 5000);
		if (tp_connect(fz.a, &k, 3000, &x->ca, &why) == 0) {
			if (tp_conn_confirm(x->ca) == 0 && tp_attach(fz.b, &k, &x->cb) == 0)
				return 0;
			tp_abort(x->ca);
		}
		if (fz_open()) /* a previous input wrecked the mailbox or the pools: start over */
			abort();
	}
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };
	struct ctx x;
	int ops = 0;

	if (!fz.open)
		LLVMFuzzerInitialize(NULL, NULL);
	memset(&x, 0, sizeof(x));
	if (connect_pair(&x))
		abort();
	x.out = tp_link_ntb(fz.a);
	x.slot_off = x.ca->out.slot_off;
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
	}
	/* drain what the receiver accepts */
	for (int i = 0; i < 64; i++) {
		static uint8_t b[70000];
		struct iovec v = { b, sizeof(b) };
		ssize_t n = tp_recv(x.cb, &v, 1, 0);

		check_recv(n, sizeof(b));
		if (n <= 0)
			break;
	}
	tp_abort(x.ca);
	tp_abort(x.cb);
	return 0;
}
