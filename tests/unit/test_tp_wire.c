/* SPDX-License-Identifier: MIT */
/* Wire encodings: checked words, inline slot layout for every size 1…116 (offset and bytes
 * copied, checked in the receiver's real window), descriptors, mailbox packet seals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

static void test_checked_words(void **state)
{
	uint32_t v = 0;
	uint64_t w = tp_cw_make(0x1234, 77);

	(void)state;
	assert_true(tp_cw_check(0x1234, w, &v));
	assert_int_equal(v, 77);
	/* another connection's (nonce's) word never validates */
	assert_false(tp_cw_check(0x1235, w, &v));
	/* every single-bit flip is caught */
	for (int b = 0; b < 64; b++) {
		v = 12345;
		assert_false(tp_cw_check(0x1234, w ^ (1ull << b), &v));
		assert_int_equal(v, 12345);
	}
	/* fresh (zero) memory is no value */
	assert_false(tp_cw_check(0x1234, 0, &v));
}

static void test_inline_offsets_table(void **state)
{
	(void)state;
	for (unsigned len = 0; len <= 116; len++) {
		unsigned off = tp_inline_off(len);

		if (len <= 4)
			assert_int_equal(off, 112);
		else if (len <= 52)
			assert_int_equal(off, 64);
		else
			assert_int_equal(off, 0);
		assert_int_equal(tp_inline_copy(len), 128 - off);
		assert_true(off + len <= TP_INL_LEN); /* payload never overlaps the header */
	}
}

static void test_inline_roundtrip_and_corruption(void **state)
{
	uint8_t slot[128], pay[116];

	(void)state;
	for (unsigned len = 1; len <= 116; len++) {
		unsigned l2;
		uint32_t msn;
		uint8_t fl;

		memset(slot, 0xee, sizeof(slot));
		for (unsigned i = 0; i < len; i++)
			pay[i] = (uint8_t)(i * 7 + len);
		memcpy(slot + tp_inline_off(len), pay, len);
		tp_inline_finish(slot, len, 1000 + len, 0, 9, crc32c(0xabcd, pay, len));
		assert_int_equal(tp_inline_check(slot, 0xabcd, &l2, &msn, &fl), 0);
		assert_int_equal(l2, len);
		assert_int_equal(msn, 1000 + len);
		/* a flipped payload or header bit, or the wrong nonce, is rejected */
		slot[tp_inline_off(len) + len - 1] ^= 0x10;
		assert_int_equal(tp_inline_check(slot, 0xabcd, &l2, &msn, &fl), -EBADMSG);
		slot[tp_inline_off(len) + len - 1] ^= 0x10;
		slot[TP_INL_MSN] ^= 1;
		assert_int_equal(tp_inline_check(slot, 0xabcd, &l2, &msn, &fl), -EBADMSG);
		slot[TP_INL_MSN] ^= 1;
		assert_int_equal(tp_inline_check(slot, 0xabce, &l2, &msn, &fl), -EBADMSG);
	}
}

static void test_inline_seq_never_zero_changes_per_lap(void **state)
{
	(void)state;
	for (uint32_t base = 0; base < 255; base += 17) {
		for (uint32_t lap = 0; lap < 600; lap++) {
			uint8_t s = tp_inline_seq(lap << 6, 6, base);

			assert_true(s != 0);
			assert_true(s != tp_inline_seq((lap + 1) << 6, 6, base));
			assert_int_equal(s, tp_inline_seq((lap << 6) + 63, 6, base));
		}
	}
}

/* For every ring size the configuration accepts (inline_slots: powers of two, 2 … 65536), the
 * byte of each lap differs from the next one's, also from the last lap before the 2^32 wrap of
 * the positions to the first after it (with a cycle of 255, 256 and 65536 slots gave both the
 * same byte there: a stale slot read as published), all slots of a lap share it, never 0. */
static void test_inline_seq_changes_across_wrap(void **state)
{
	const uint32_t bases[] = { 0, 1, 17, 127, 200, 253 };

	(void)state;
	for (unsigned log2n = 1; log2n <= 16; log2n++) {
		uint32_t n = 1u << log2n;

		for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
			uint32_t base = bases[b];

			/* the 8 laps before the wrap and the 8 after it, every slot of each */
			for (uint32_t lap = (uint32_t)-8 << log2n;; lap += n) {
				uint32_t next = lap + n; /* (wraps to 0 after the last lap) */
				uint8_t s = tp_inline_seq(lap, log2n, base);

				assert_int_not_equal(s, 0);
				assert_int_not_equal(s, tp_inline_seq(next, log2n, base));
				for (uint32_t k = 1; k < n; k += k < 64 ? 1 : n / 64)
					assert_int_equal(tp_inline_seq(lap + k, log2n, base), s);
				if (lap == 7u << log2n)
					break;
			}
			/* and laps spread over the whole cycle */
			for (uint32_t i = 0; i < 4096; i++) {
				uint32_t pos = (uint32_t)(i * 0x9E3779B9u) & ~(n - 1);

				assert_int_not_equal(tp_inline_seq(pos, log2n, base), 0);
				assert_int_not_equal(tp_inline_seq(pos, log2n, base),
						     tp_inline_seq(pos + n, log2n, base));
			}
		}
	}
}

static void test_descriptor_layout(void **state)
{
	(void)state;
	assert_int_equal(tp_payload_gap(TP_MT_SHORT, 0), 16);
	assert_int_equal(tp_payload_gap(TP_MT_LONG, 0), 128);
	assert_int_equal(tp_payload_gap(TP_MT_LONG, 112), 16);   /* desc ends on the boundary */
	assert_int_equal(tp_payload_gap(TP_MT_LONG, 128), 128);
	assert_int_equal(tp_payload_gap(TP_MT_LONG, 48), 80);
	assert_int_equal(tp_footprint(TP_MT_SHORT, 0, 1), 32);
	assert_int_equal(tp_footprint(TP_MT_SHORT, 0, 0), 16);
	assert_int_equal(tp_footprint(TP_MT_LONG, 16, 4096), 112 + 4096);
	for (uint32_t pos = 0; pos < 1024; pos += 16)
		assert_int_equal((pos + tp_payload_gap(TP_MT_LONG, pos)) % 128, 0);
}

/* The senders' descriptor from registers (tp_desc_crc_words(): the direct short path and the
 * merged message) is the descriptor tp_desc_crc() checks, byte for byte. */
static void test_descriptor_from_registers(void **state)
{
	uint32_t x = 0x9e3779b9u;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		x = x * 1664525u + 1013904223u;
		uint32_t crc0 = x, len = (x >> 7) % 70000u, msn = x * 2654435761u;
		uint8_t type = i % 2 ? TP_MT_SHORT : TP_MT_LONG;
		struct tp_desc d = { .type = type, .len = len, .msn = msn };
		uint64_t w[2];

		d.crc = tp_desc_crc(crc0, &d);
		assert_int_equal(tp_desc_crc_words(crc0, type, len, msn, &w[0], &w[1]), d.crc);
		assert_memory_equal(w, &d, sizeof(d));
	}
}

static void test_packet_seal(void **state)
{
	struct tp_pkt p;

	(void)state;
	memset(&p, 0, sizeof(p));
	p.type = TP_PKT_APPLY;
	p.seq = 5;
	p.msgid = 99;
	tp_pkt_seal(&p, 0x777);
	assert_true(tp_pkt_valid(&p, 0x777, 5));
	assert_false(tp_pkt_valid(&p, 0x777, 6));   /* stale/duplicate ring position */
	assert_false(tp_pkt_valid(&p, 0x778, 5));   /* another peer session */
	for (size_t b = 0; b < 124 * 8; b += 13) {
		((uint8_t *)&p)[b / 8] ^= (uint8_t)(1u << (b % 8));
		assert_false(tp_pkt_valid(&p, 0x777, 5));
		((uint8_t *)&p)[b / 8] ^= (uint8_t)(1u << (b % 8));
	}
	/* the mailbox seed names both sessions: a new one of either side, or the other
	 * direction, gives another */
	uint32_t s = tp_mbox_seed(0x1111, 0x2222);

	assert_int_equal(tp_mbox_seed(0x1111, 0x2222), s);
	assert_true(tp_mbox_seed(0x1112, 0x2222) != s);
	assert_true(tp_mbox_seed(0x1111, 0x2223) != s);
	assert_true(tp_mbox_seed(0x2222, 0x1111) != s);
	tp_pkt_seal(&p, s);
	assert_true(tp_pkt_valid(&p, s, 5));
	assert_false(tp_pkt_valid(&p, tp_mbox_seed(0x1111, 0x2223), 5));
}

/* Send one inline message of each size 1…116 and look at the receiver's real window: the
 * payload sits at the table's offset, bytes before it in the slot were not written, the rest
 * of the table's range was (padding as zeros, the header as in the sender's shadow). */
static void test_inline_window_layout(void **state)
{
	char path[128];
	struct tp_link *a, *b;
	struct tp_conn *ca, *cb;
	struct tp_params tpp;
	struct tp_key k;
	enum tp_reason why;
	uint8_t pay[116];

	(void)state;
	tp_params_init(&tpp);
	tpp.contexts = 4;
	tpp.inline_slots = 128;
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-wire-%d", getpid());
	tl_unlink(path);
	assert_int_equal(tl_open(path, 0, 4u << 20, &tpp, &a), 0);
	assert_int_equal(tl_open(path, 1, 4u << 20, &tpp, &b), 0);
	assert_int_equal(tp_listen(b, 80), 0);
	assert_int_equal(tl_wait_listen(a, 80, 5000), 0);
	tl_key(&k, 1, 80);
	assert_int_equal(tp_connect(a, &k, 5000, &ca, &why), 0);
	assert_int_equal(tp_attach(b, &k, &cb), 0);
	size_t wsz;
	const volatile uint8_t *win = ntb_in_window(tp_link_ntb(b), &wsz);
	const volatile uint8_t *ring = win + cb->out.slot_off * 0 + TP_OFF_SLOTS +
				       (size_t)cb->slot * b->slot_size + TP_SLOT_RINGS;

	assert_int_equal(ca->out.slot_off, TP_OFF_SLOTS + cb->slot * b->slot_size);
	/* an shm link without faults: the slots go by plain stores (write_inline_slot()) */
	assert_non_null(a->out_direct);
	for (unsigned len = 1; len <= 116; len++) {
		const volatile uint8_t *s = ring + (len - 1) * 128u;
		struct iovec v = { pay, len };
		unsigned off = tp_inline_off(len);
		uint8_t out[116];

		const uint8_t *sh = ca->sh_inline + (len - 1) * 128u;

		for (unsigned i = 0; i < len; i++)
			pay[i] = (uint8_t)(0x80 | (i + len));
		for (unsigned i = 0; i < TP_INL_SEQ; i++)
			((volatile uint8_t *)s)[i] = 0xa5;        /* the sequence byte stays 0 */
		assert_int_equal(tp_send(ca, &v, 1), (ssize_t)len);
		for (unsigned i = 0; i < off; i++)
			assert_int_equal(s[i], 0xa5);              /* not copied */
		for (unsigned i = 0; i < len; i++)
			assert_int_equal(s[off + i], pay[i]);     /* payload at the offset */
		for (unsigned i = off + len; i < TP_INL_LEN; i++)
			assert_int_equal(s[i], 0);                 /* padding: copied, zeros */
		for (unsigned i = TP_INL_LEN; i < 128; i++)
			assert_int_equal(s[i], sh[i]);            /* header as the shadow's */
		assert_true(s[TP_INL_SEQ] != 0);
		assert_int_equal(tl_recv_some(cb, out, sizeof(out), 2000), (ssize_t)len);
		assert_memory_equal(out, pay, len);
	}
	tp_link_close(a);
	tp_link_close(b);
	tl_unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checked_words),
		cmocka_unit_test(test_inline_offsets_table),
		cmocka_unit_test(test_inline_roundtrip_and_corruption),
		cmocka_unit_test(test_inline_seq_never_zero_changes_per_lap),
		cmocka_unit_test(test_inline_seq_changes_across_wrap),
		cmocka_unit_test(test_descriptor_layout),
		cmocka_unit_test(test_descriptor_from_registers),
		cmocka_unit_test(test_packet_seal),
		cmocka_unit_test(test_inline_window_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
