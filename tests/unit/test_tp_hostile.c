/* SPDX-License-Identifier: MIT */
/* A hostile or broken peer (DESIGN rule 4): garbage and forged-but-well-checked words in our
 * inbound window never crash us, never make us read outside the window, never hang; the
 * connection either recovers or fails with ECONNRESET. Run under ASan to catch stray reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

struct pair {
	char path[128];
	struct tp_link *a, *b;
	struct tp_conn *ca, *cb;
};

static void pair_open(struct pair *p, const char *name)
{
	struct tp_params tpp;
	struct tp_key k;
	enum tp_reason why;

	tp_params_init(&tpp);
	tpp.contexts = 4;
	tpp.max_err = 8;
	snprintf(p->path, sizeof(p->path), "/dev/shm/ntbsock-test-%s-%d", name, getpid());
	tl_unlink(p->path);
	assert_int_equal(tl_open(p->path, 0, 4u << 20, &tpp, &p->a), 0);
	assert_int_equal(tl_open(p->path, 1, 4u << 20, &tpp, &p->b), 0);
	assert_int_equal(tp_listen(p->b, 7), 0);
	assert_int_equal(tl_wait_listen(p->a, 7, 5000), 0);
	tl_key(&k, 7, 7);
	assert_int_equal(tp_connect(p->a, &k, 3000, &p->ca, &why), 0);
	assert_int_equal(tp_attach(p->b, &k, &p->cb), 0);
}

static void pair_close(struct pair *p)
{
	tp_link_close(p->a);
	tp_link_close(p->b);
	tl_unlink(p->path);
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
static void reset_or_exact(struct pair *p, ssize_t last)
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
	struct pair p;
	uint64_t rnd = 99;
	static uint8_t junk[1 << 16];

	(void)state;
	pair_open(&p, "hostile1");
	uint32_t slot_off = p.ca->out.slot_off;
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
	pair_close(&p);
}

static void test_forged_descriptors(void **state)
{
	struct pair p;
	struct tp_desc d;

	(void)state;
	pair_open(&p, "hostile2");
	uint32_t data_off = p.ca->out.slot_off + TP_SLOT_RINGS + p.ca->out.inline_n * 128u;
	/* a descriptor claiming 1 GiB, published by a well-formed tx index */
	memset(&d, 0, sizeof(d));
	d.type = TP_MT_SHORT;
	d.len = 1u << 30;
	ntb_write(p.a->ntb, data_off, &d, sizeof(d));
	tp_out_word(p.a, p.ca->out.slot_off + TP_W_TX_D, p.ca->nonce_out, 64);
	reset_or_exact(&p, drive_rx(p.cb, 1000));
	pair_close(&p);

	pair_open(&p, "hostile3");
	data_off = p.ca->out.slot_off + TP_SLOT_RINGS + p.ca->out.inline_n * 128u;
	/* a long message whose payload runs past the published index */
	d.type = TP_MT_LONG;
	d.len = 100000;
	ntb_write(p.a->ntb, data_off, &d, sizeof(d));
	tp_out_word(p.a, p.ca->out.slot_off + TP_W_TX_D, p.ca->nonce_out, 4096);
	reset_or_exact(&p, drive_rx(p.cb, 1000));
	pair_close(&p);
}

static void test_forged_feedback(void **state)
{
	struct pair p;
	char buf[4096];

	(void)state;
	memset(buf, 'q', sizeof(buf));
	pair_open(&p, "hostile4");
	assert_int_equal(tl_send_all(p.ca, buf, sizeof(buf)), 0);
	/* the receiver "releases" far more than was sent: ignored, not trusted */
	uint32_t fb = p.cb->out.slot_off;
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
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_garbage_rings),
		cmocka_unit_test(test_forged_descriptors),
		cmocka_unit_test(test_forged_feedback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
