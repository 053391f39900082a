/* SPDX-License-Identifier: MIT */
/* A hostile or broken peer (doc/design.md §3 rule 4): garbage and forged-but-well-checked words in our
 * inbound window never crash us, never make us read outside the window, never hang; the
 * connection either recovers or fails with ECONNRESET. Run under ASan to catch stray reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

static void pair_open(struct tl_pair *p, const char *name)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.contexts = 4;
	tpp.max_err = 8;
	assert_int_equal(tl_pair_open(p, name, 4u << 20, &tpp, 7), 0);
	assert_int_equal(tl_pair_connect(p, 7, 7, false), 0);
}

/* Drive the receiver for up to MS: returns the last recv result. */
static ssize_t drive_rx(struct tp_conn *c, int ms)
{
	uint64_t end = tl_now_ms() + (uint64_t)ms;
	static uint8_t buf[1 << 16];
	ssize_t n = -EAGAIN;

	while (tl_now_ms() < end) {
		struct iovec v = { buf, sizeof(buf) };

		n = tp_recv(c, &v, 1, 0);
		if (n == -ECONNRESET || n == 0)
			break;
		tp_poll(c);
		tp_readable_bytes(c);
		usleep(500);
	}
	return n;
}

/* After an attack the connection is either reset, or (the honest sender's retransmission
 * having rewritten what it owns) still carries a stream exactly. */
static void reset_or_exact(struct tl_pair *p, ssize_t last)
{
	char out[64];

	assert_true(last == -EAGAIN || last == -ECONNRESET);
	if (last == -ECONNRESET) {
		assert_int_equal(tp_conn_error(p->cb), -ECONNRESET);
		return;
	}
	assert_int_equal(tl_send_all(p->ca, "honest bytes", 12), 0);
	ssize_t n = tl_recv_some(p->cb, out, sizeof(out), 3000);

	if (n == -ECONNRESET)
		return;
	assert_int_equal(n, 12);
	assert_memory_equal(out, "honest bytes", 12);
}

static void test_garbage_rings(void **state)
{
	struct tl_pair p;
	uint64_t rnd = 99;
	static uint8_t junk[1 << 16];

	(void)state;
	pair_open(&p, "hostile1");
	uint64_t slot_off = p.ca->out.slot_off;
	uint32_t span = TP_SLOT_RINGS + p.ca->out.inline_n * 128u + p.ca->out.qsize;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)tl_rand(&rnd);
	/* random bytes all over the rings, plus well-checked words with absurd values */
	for (int round = 0; round < 50; round++) {
		uint32_t off = (uint32_t)(tl_rand(&rnd) % (span - 4096)) & ~7u;

		ntb_write(p.a->ntb, slot_off + off, junk + (tl_rand(&rnd) % 1024), 2048);
		tp_out_word(p.a, slot_off + TP_W_TX_D, p.ca->nonce_out, (uint32_t)tl_rand(&rnd));
		tp_out_word(p.a, slot_off + TP_W_TX_EPOCH, p.ca->nonce_out, (uint32_t)tl_rand(&rnd));
		tp_out_word(p.a, slot_off + TP_W_TX_NEXT_MSN, p.ca->nonce_out,
			    (uint32_t)tl_rand(&rnd));
		drive_rx(p.cb, 5);
	}
	ssize_t n = drive_rx(p.cb, 3000);
	print_message("garbage rings: last recv %zd, error %d\n", n, tp_conn_error(p.cb));
	reset_or_exact(&p, n);
	tl_pair_close(&p);
}

static void test_forged_descriptors(void **state)
{
	struct tl_pair p;
	struct tp_desc d;

	(void)state;
	pair_open(&p, "hostile2");
	uint64_t data_off = p.ca->out.slot_off + TP_SLOT_RINGS + p.ca->out.inline_n * 128u;
	/* a descriptor claiming 1 GiB, published by a well-formed tx index */
	memset(&d, 0, sizeof(d));
	d.type = TP_MT_SHORT;
	d.len = 1u << 30;
	ntb_write(p.a->ntb, data_off, &d, sizeof(d));
	tp_out_word(p.a, p.ca->out.slot_off + TP_W_TX_D, p.ca->nonce_out, 64);
	reset_or_exact(&p, drive_rx(p.cb, 1000));
	tl_pair_close(&p);

	pair_open(&p, "hostile3");
	data_off = p.ca->out.slot_off + TP_SLOT_RINGS + p.ca->out.inline_n * 128u;
	/* a long message whose payload runs past the published index */
	d.type = TP_MT_LONG;
	d.len = 100000;
	ntb_write(p.a->ntb, data_off, &d, sizeof(d));
	tp_out_word(p.a, p.ca->out.slot_off + TP_W_TX_D, p.ca->nonce_out, 4096);
	reset_or_exact(&p, drive_rx(p.cb, 1000));
	tl_pair_close(&p);
}

static void test_forged_feedback(void **state)
{
	struct tl_pair p;
	char buf[4096];

	(void)state;
	memset(buf, 'q', sizeof(buf));
	pair_open(&p, "hostile4");
	assert_int_equal(tl_send_all(p.ca, buf, sizeof(buf)), 0);
	/* the receiver "releases" far more than was sent: ignored, not trusted */
	uint64_t fb = p.cb->out.slot_off;
	tp_out_word(p.b, fb + TP_W_FB_RX_D, p.cb->nonce_out, 0x7fffffff);
	tp_out_word(p.b, fb + TP_W_FB_RX_I, p.cb->nonce_out, 0x12345678);
	tp_out_word(p.b, fb + TP_W_FB_ACK_MSN, p.cb->nonce_out, 0xdeadbeef);
	struct iovec v = { buf, 16 };
	assert_int_equal(tp_send(p.ca, &v, 1), 16);
	assert_true(tp_unacked_bytes(p.ca) > 0); /* still waiting for the real release */
	/* the stream is intact */
	size_t got = 0;
	static char out[8192];
	while (got < sizeof(buf) + 16) {
		ssize_t n = tl_recv_some(p.cb, out + got, sizeof(out) - got, 3000);

		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_memory_equal(out, buf, sizeof(buf));
	tl_pair_close(&p);
}

/* Offset (in the sender's view of the receiver's window) of payload byte OFF of the queued
 * record R of the receiver CB, whose peer (the writer) is CA. */
static uint32_t rec_window_off(const struct tp_conn *ca, const struct tp_rec *r, uint32_t off)
{
	uint64_t rings = ca->out.slot_off + TP_SLOT_RINGS;

	if (r->ring == 0)
		return rings + (r->pos & (ca->out.inline_n - 1)) * 128u + r->payload + off;
	return rings + ca->out.inline_n * 128u +
	       ((r->pos + r->payload + off) & (ca->out.qsize - 1));
}

/* Send a data-ring message (300 B) and an inline one (50 B), let the receiver validate and
 * queue both, then change payload bytes of both in its window (time of check ≠ time of use).
 * CHUNK bytes per recv, PRE bytes read before the change; only unchanged bytes may arrive. */
static void toctou_round(struct tl_pair *p, const uint8_t *msg, size_t chunk, size_t pre)
{
	static const uint8_t evil[8] = "EVILEVIL";
	uint8_t out[350];
	size_t got = 0;
	uint64_t end;

	assert_int_equal(tl_send_all(p->ca, msg, 300), 0);
	assert_int_equal(tl_send_all(p->ca, msg + 300, 50), 0);
	end = tl_now_ms() + 3000;
	while (tp_readable_bytes(p->cb) < 350 && tl_now_ms() < end)
		usleep(200);
	assert_int_equal(tp_readable_bytes(p->cb), 350); /* both validated and queued */
	tp_mutex_lock(&p->cb->rx_lock);
	assert_int_equal(p->cb->rec_tail - p->cb->rec_head, 2);
	struct tp_rec r0 = p->cb->recs[p->cb->rec_head % TP_RECS];
	struct tp_rec r1 = p->cb->recs[(p->cb->rec_head + 1) % TP_RECS];
	tp_mutex_unlock(&p->cb->rx_lock);
	assert_int_equal(r0.ring, 1);
	assert_int_equal(r0.len, 300);
	assert_int_equal(r1.ring, 0);
	assert_int_equal(r1.len, 50);
	/* PRE bytes of the first message are read before the window changes (served later from
	 * the checked private copy) */
	while (got < pre) {
		ssize_t n = tl_recv_some(p->cb, out + got, pre - got < chunk ? pre - got : chunk, 3000);

		assert_true(n > 0);
		got += (size_t)n;
	}
	uint64_t crc_err = p->cb->st->crc_errors;
	ntb_write(p->a->ntb, rec_window_off(p->ca, &r0, 150), evil, sizeof(evil));
	ntb_write(p->a->ntb, rec_window_off(p->ca, &r1, 10), evil, sizeof(evil));
	ntb_wc_flush(p->a->ntb);
	while (got < sizeof(out)) {
		size_t want = sizeof(out) - got < chunk ? sizeof(out) - got : chunk;
		ssize_t n = tl_recv_some(p->cb, out + got, want, 3000);

		if (n == -ECONNRESET)
			break; /* acceptable: what was delivered is checked below */
		assert_true(n > 0);
		got += (size_t)n;
	}
	print_message("toctou chunk %zu: %zu of 350 bytes, error %d\n", chunk, got,
		      tp_conn_error(p->cb));
	assert_memory_equal(out, msg, got); /* never the changed bytes */
	assert_true(got == sizeof(out) || tp_conn_error(p->cb) == -ECONNRESET);
	assert_true(p->cb->st->crc_errors > crc_err); /* the change was seen, not missed */
}

/* A round may end in a reset (a retransmission that lost the race with the change: slower
 * under a sanitizer): the next one needs a new connection. */
static void reopen_if_reset(struct tl_pair *p, const char *name)
{
	if (tp_conn_error(p->cb) == 0 && tp_conn_error(p->ca) == 0)
		return;
	tl_pair_close(p);
	pair_open(p, name);
}

/* Bytes delivered from a record are checked on the copy that delivers them, not only when the
 * record was validated in the window (rule 3.4): whole-record reads. */
static void test_toctou_whole(void **state)
{
	struct tl_pair p;
	uint8_t msg[350];
	uint64_t seed = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)('a' + tl_rand(&seed) % 26);
	pair_open(&p, "hostile5");
	toctou_round(&p, msg, sizeof(msg), 0);
	toctou_round(&p, msg, sizeof(msg), 0); /* and the stream goes on */
	tl_pair_close(&p);
}

/* The same with reads smaller than a record (a private checked copy serves the parts), with
 * and without part of the record read before the window changes; and MSG_PEEK. */
static void test_toctou_partial(void **state)
{
	struct tl_pair p;
	uint8_t msg[350], out[64];
	uint64_t seed = 8;

	(void)state;
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)('A' + tl_rand(&seed) % 26);
	pair_open(&p, "hostile6");
	toctou_round(&p, msg, 20, 0);
	reopen_if_reset(&p, "hostile6b");
	toctou_round(&p, msg, 100, 100);
	reopen_if_reset(&p, "hostile6c");
	toctou_round(&p, msg, 7, 7);
	reopen_if_reset(&p, "hostile6d");
	/* peek: queue both, change the window, peek must not show the changed bytes */
	assert_int_equal(tl_send_all(p.ca, msg, 300), 0);
	assert_int_equal(tl_send_all(p.ca, msg + 300, 50), 0);
	uint64_t end = tl_now_ms() + 3000;
	while (tp_readable_bytes(p.cb) < 350 && tl_now_ms() < end)
		usleep(200);
	assert_int_equal(tp_readable_bytes(p.cb), 350);
	struct tp_rec r0 = p.cb->recs[p.cb->rec_head % TP_RECS];
	uint8_t evil[8] = "EVILEVIL";
	ntb_write(p.a->ntb, rec_window_off(p.ca, &r0, 0), evil, sizeof(evil));
	ntb_wc_flush(p.a->ntb);
	struct iovec v = { out, sizeof(out) };
	ssize_t n = tp_recv(p.cb, &v, 1, TP_RECV_PEEK);
	assert_true(n == -EAGAIN || n == -ECONNRESET || (n > 0 && !memcmp(out, msg, (size_t)n)));
	static uint8_t all[350];
	size_t got = 0;
	while (got < sizeof(all)) {
		n = tl_recv_some(p.cb, all + got, sizeof(all) - got, 3000);
		if (n == -ECONNRESET)
			break;
		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_memory_equal(all, msg, got);
	assert_true(got == sizeof(all) || tp_conn_error(p.cb) == -ECONNRESET);
	tl_pair_close(&p);
}

/* An inline message validated as the head of the queue is delivered from the private copy it
 * was validated in (copied out of the window and CRC-checked once): a change in the window
 * after validation never reaches the reader, and the stream goes on. */
static void test_toctou_inline_head(void **state)
{
	static const uint8_t evil[8] = "EVILEVIL";
	struct tl_pair p;
	uint8_t msg[60], out[64];
	uint64_t seed = 9, end;

	(void)state;
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)('a' + tl_rand(&seed) % 26);
	pair_open(&p, "hostile7");
	for (int round = 0; round < 3; round++) {
		assert_int_equal(tl_send_all(p.ca, msg, sizeof(msg)), 0);
		end = tl_now_ms() + 3000;
		while (tp_readable_bytes(p.cb) < sizeof(msg) && tl_now_ms() < end)
			usleep(200);
		assert_int_equal(tp_readable_bytes(p.cb), sizeof(msg)); /* validated, queued */
		tp_mutex_lock(&p.cb->rx_lock);
		assert_int_equal(p.cb->rec_tail - p.cb->rec_head, 1);
		struct tp_rec r = p.cb->recs[p.cb->rec_head % TP_RECS];
		tp_mutex_unlock(&p.cb->rx_lock);
		assert_int_equal(r.ring, 0);
		ntb_write(p.a->ntb, rec_window_off(p.ca, &r, 5), evil, sizeof(evil));
		ntb_wc_flush(p.a->ntb);
		assert_int_equal(tl_recv_some(p.cb, out, sizeof(out), 3000), (ssize_t)sizeof(msg));
		assert_memory_equal(out, msg, sizeof(msg)); /* the checked bytes, not the window's */
	}
	assert_int_equal(tp_conn_error(p.cb), 0);
	/* validated once: the later change was never read, so no checksum error and no Retry */
	assert_int_equal(p.cb->st->crc_errors, 0);
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_garbage_rings),
		cmocka_unit_test(test_forged_descriptors),
		cmocka_unit_test(test_forged_feedback),
		cmocka_unit_test(test_toctou_whole),
		cmocka_unit_test(test_toctou_partial),
		cmocka_unit_test(test_toctou_inline_head),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
