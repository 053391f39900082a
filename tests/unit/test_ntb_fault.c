/* SPDX-License-Identifier: MIT */
/* Unit tests for ntb/fault.c: the observed drop and corrupt rates (seen in the peer's inbound
 * window) match the configured ones within binomial bounds, every observed fault is counted,
 * the same seed gives the same faults and a different seed different ones. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ntb/ntb_int.h"
#include "util/crc32c.h"

#define WIN (1u << 20)
#define N32 100000u /* 4-byte writes, each to its own slot */

static char path[128];
static int path_no;

static struct ntb_link *open_pair(const struct ntb_fault_params *f, struct ntb_link **ret_b)
{
	struct ntb_link_params p;
	struct ntb_link *a, *b;
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-fault-%d-%d", (int)getpid(), path_no++);
	unlink(path);
	ntb_link_params_init(&p);
	snprintf(p.name, sizeof(p.name), "fault");
	snprintf(p.path, sizeof(p.path), "%s", path);
	p.window_size = WIN;
	p.side = 0;
	if (f)
		p.fault = *f;
	assert_int_equal(ntb_link_open(&p, &a), 0);
	p.side = 1;
	memset(&p.fault, 0, sizeof(p.fault));
	assert_int_equal(ntb_link_open(&p, &b), 0);
	unlink(path); /* mappings stay valid */
	*ret_b = b;
	return a;
}

static uint32_t value_of(uint32_t i)
{
	/* non-zero and never a single set bit: a drop (0) and a flip are both recognisable */
	return (i * 2654435761u) | 0x80000001u;
}

/* Outcome per write: 0 ok, 1 dropped, 2 + bit corrupted. */
struct outcome {
	uint32_t dropped, corrupted;
	uint8_t *pattern;
};

static void run_writes32(struct ntb_link *a, struct ntb_link *b, struct outcome *o)
{
	size_t sz;
	const volatile uint32_t *in = ntb_in_window(b, &sz);
	o->dropped = o->corrupted = 0;
	o->pattern = calloc(N32, 1);
	static_assert(N32 <= WIN / 4, "every write has its own slot");
	for (uint32_t i = 0; i < N32; i++)
		assert_int_equal(ntb_write32(a, (size_t)i * 4, value_of(i)), 0);
	for (uint32_t i = 0; i < N32; i++) {
		uint32_t got = in[i], want = value_of(i);
		if (got == want)
			continue;
		if (got == 0) {
			o->dropped++;
			o->pattern[i] = 1;
			continue;
		}
		uint32_t diff = got ^ want;
		assert_int_equal(__builtin_popcount(diff), 1);
		o->corrupted++;
		o->pattern[i] = (uint8_t)(2 + __builtin_ctz(diff));
	}
}

static void assert_binomial(uint64_t k, uint64_t n, double p, const char *what)
{
	double mean = (double)n * p, sd = sqrt((double)n * p * (1 - p));
	if (fabs((double)k - mean) > 5 * sd + 1)
		fail_msg("%s: observed %llu of %llu, expected %.1f ± 5×%.1f", what,
			 (unsigned long long)k, (unsigned long long)n, mean, sd);
}

static void test_rates(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .drop = 0.03, .corrupt = 0.05,
				      .seed = 12345 };
	struct ntb_link *b, *a = open_pair(&f, &b);
	struct outcome o;
	run_writes32(a, b, &o);
	struct ntb_fault_stats st;
	ntb_fault_stats(a, &st);
	assert_int_equal(st.writes, N32);
	assert_int_equal(st.delayed, 0);
	/* every write lands in its own slot, so observation == statistics */
	assert_int_equal(o.dropped, st.dropped);
	assert_int_equal(o.corrupted, st.corrupted);
	assert_binomial(o.dropped, N32, 0.03, "drops");
	/* corruption applies to the writes that were not dropped */
	assert_binomial(o.corrupted, N32 - o.dropped, 0.05, "corruptions");
	/* the peer's faults are not ours: b writes clean */
	ntb_fault_stats(b, &st);
	assert_int_equal(st.writes, 0);
	free(o.pattern);
	ntb_link_close(a);
	ntb_link_close(b);
}

static void test_large_writes_corrupt_one_bit(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .corrupt = 1.0, .seed = 7 };
	struct ntb_link *b, *a = open_pair(&f, &b);
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(b, &sz);
	uint8_t buf[4096];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + 3);
	for (int k = 0; k < 200; k++) {
		size_t len = 1 + (size_t)k * 17 % sizeof(buf);
		size_t off = (size_t)k * 4096;
		assert_int_equal(ntb_write(a, off, buf, len), 0);
		int flipped = 0;
		for (size_t i = 0; i < len; i++)
			flipped += __builtin_popcount(in[off + i] ^ buf[i]);
		assert_int_equal(flipped, 1);
	}
	/* the source buffer is never modified */
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], (uint8_t)(i * 31 + 3));
	struct ntb_fault_stats st;
	ntb_fault_stats(a, &st);
	assert_int_equal(st.corrupted, 200);
	assert_int_equal(st.dropped, 0);
	ntb_link_close(a);
	ntb_link_close(b);
}

/* ntb_write_dup_crc() goes through the decorator as ONE write of the checksummed bytes: the
 * window sees the fault, the shadow and the CRC never do. */
static void test_dup_crc_faults(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .corrupt = 1.0, .seed = 9 };
	struct ntb_link *b, *a = open_pair(&f, &b);
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(b, &sz);
	static uint8_t src[70000], shadow[70000];
	struct ntb_fault_stats st;
	uint32_t crc = 0;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 13 + 5);
	assert_int_equal(ntb_write_dup_crc(a, 4096, shadow, src, sizeof(src), 77, &crc), 0);
	assert_int_equal(crc, crc32c(77, src, sizeof(src)));
	assert_memory_equal(shadow, src, sizeof(src));
	int flipped = 0;
	for (size_t i = 0; i < sizeof(src); i++)
		flipped += __builtin_popcount(in[4096 + i] ^ src[i]);
	assert_int_equal(flipped, 1);
	ntb_fault_stats(a, &st);
	assert_int_equal(st.writes, 1);
	assert_int_equal(st.corrupted, 1);
	ntb_link_close(a);
	ntb_link_close(b);

	f.corrupt = 0;
	f.drop = 1.0;
	a = open_pair(&f, &b);
	in = ntb_in_window(b, &sz);
	memset(shadow, 0, sizeof(shadow));
	assert_int_equal(ntb_write_dup_crc(a, 0, shadow, src, 5000, 0, &crc), 0);
	assert_int_equal(crc, crc32c(0, src, 5000));
	assert_memory_equal(shadow, src, 5000);
	for (size_t i = 0; i < 5000; i++)
		if (in[i])
			fail_msg("byte %zu landed despite drop = 1", i);
	ntb_fault_stats(a, &st);
	assert_int_equal(st.writes, 1);
	assert_int_equal(st.dropped, 1);
	ntb_link_close(a);
	ntb_link_close(b);
}

static void test_drop_all_and_disabled(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .drop = 1.0, .seed = 1 };
	struct ntb_link *b, *a = open_pair(&f, &b);
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(b, &sz);
	uint8_t buf[64];
	memset(buf, 0xee, sizeof(buf));
	for (int k = 0; k < 100; k++) {
		assert_int_equal(ntb_write(a, (size_t)k * 64, buf, 64), 0);
		assert_int_equal(ntb_write8(a, WIN - 1 - (size_t)k, 0x11), 0);
		assert_int_equal(ntb_write64(a, WIN / 2 + (size_t)k * 8, ~0ull), 0);
	}
	for (size_t i = 0; i < WIN; i++)
		if (in[i])
			fail_msg("byte %zu landed despite drop = 1", i);
	/* bounds errors are reported before the decorator and not counted */
	assert_int_equal(ntb_write(a, WIN, buf, 1), -EINVAL);
	struct ntb_fault_stats st;
	ntb_fault_stats(a, &st);
	assert_int_equal(st.writes, 300);
	assert_int_equal(st.dropped, 300);
	ntb_link_close(a);
	ntb_link_close(b);

	/* rates configured but not enabled: no faults */
	f.enabled = false;
	a = open_pair(&f, &b);
	in = ntb_in_window(b, &sz);
	assert_int_equal(ntb_write(a, 0, buf, 64), 0);
	assert_int_equal(in[63], 0xee);
	ntb_fault_stats(a, &st);
	assert_int_equal(st.writes, 0);
	ntb_link_close(a);
	ntb_link_close(b);
}

static void test_same_seed_same_faults(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .drop = 0.02, .corrupt = 0.02,
				      .seed = 0xdeadbeef };
	struct outcome o1, o2, o3;
	struct ntb_link *b, *a;

	a = open_pair(&f, &b);
	run_writes32(a, b, &o1);
	ntb_link_close(a);
	ntb_link_close(b);
	a = open_pair(&f, &b);
	run_writes32(a, b, &o2);
	ntb_link_close(a);
	ntb_link_close(b);
	f.seed++;
	a = open_pair(&f, &b);
	run_writes32(a, b, &o3);
	ntb_link_close(a);
	ntb_link_close(b);

	assert_true(o1.dropped + o1.corrupted > 100);
	assert_int_equal(o1.dropped, o2.dropped);
	assert_int_equal(o1.corrupted, o2.corrupted);
	assert_memory_equal(o1.pattern, o2.pattern, N32);
	assert_memory_not_equal(o1.pattern, o3.pattern, N32);
	free(o1.pattern);
	free(o2.pattern);
	free(o3.pattern);
}

static void test_delay(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .delay_us = 200, .seed = 99 };
	struct ntb_link *b, *a = open_pair(&f, &b);
	size_t sz;
	const volatile uint32_t *in = ntb_in_window(b, &sz);
	uint64_t t0 = ntb_now_ns();
	for (uint32_t i = 0; i < 200; i++)
		assert_int_equal(ntb_write32(a, i * 4, i + 1), 0);
	uint64_t el = ntb_now_ns() - t0;
	for (uint32_t i = 0; i < 200; i++)
		assert_int_equal(in[i], i + 1); /* delayed, never lost */
	struct ntb_fault_stats st;
	ntb_fault_stats(a, &st);
	assert_int_equal(st.writes, 200);
	assert_int_equal(st.dropped + st.corrupted, 0);
	/* P(delay 0) = 1/201 */
	assert_binomial(200 - st.delayed, 200, 1.0 / 201, "undelayed writes");
	/* delays are uniform in [0,200] µs: ~20 ms in total; sleeping never takes less */
	assert_true(el >= 5000000ull);
	ntb_link_close(a);
	ntb_link_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_large_writes_corrupt_one_bit),
		cmocka_unit_test(test_drop_all_and_disabled),
		cmocka_unit_test(test_dup_crc_faults),
		cmocka_unit_test(test_same_seed_same_faults),
		cmocka_unit_test(test_delay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
