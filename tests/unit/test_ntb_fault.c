/* SPDX-License-Identifier: MIT */
/* Unit tests for ntb/fault.c: the observed drop and corrupt rates (seen in the peer's inbound
 * window) match the configured ones within binomial bounds, every observed fault is counted,
 * the same seed gives the same faults and a different seed different ones; the cut (after a
 * number of bytes or milliseconds) drops every later write, control words included, so the
 * peer's link goes down. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
	uint64_t t0 = clock_mono_ns();
	for (uint32_t i = 0; i < 200; i++)
		assert_int_equal(ntb_write32(a, i * 4, i + 1), 0);
	uint64_t el = clock_mono_ns() - t0;
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

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Does a doorbell rung and a scratchpad written by A reach B? (Both or neither must.) */
static bool ctrl_reaches(struct ntb_link *a, struct ntb_link *b, uint32_t spad_val)
{
	uint32_t db = ntb_db_read(b), sp = 0;
	assert_int_equal(ntb_peer_db_ring(a), 0);
	assert_int_equal(ntb_peer_spad_write(a, 3, spad_val), 0);
	assert_int_equal(ntb_spad_read(b, 3, &sp), 0);
	bool rang = ntb_db_read(b) != db, written = sp == spad_val;
	assert_true(rang == written);
	return rang;
}

/* cut_after = 950 and 100-byte writes: the first 9 (900 bytes) land, the 10th would cross
 * 950 and is dropped whole, and so is everything after it, single stores, doorbells and
 * scratchpads included. */
static void test_cut_after_bytes(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .cut_after = 950, .seed = 3 };
	struct ntb_link *b, *a = open_pair(&f, &b);
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(b, &sz);
	struct ntb_fault_stats st;
	uint8_t buf[100];

	memset(buf, 0xa5, sizeof(buf));
	assert_true(ctrl_reaches(a, b, 1)); /* before the cut: control writes go */
	for (int k = 0; k < 20; k++) {
		assert_int_equal(ntb_write(a, (size_t)k * 128, buf, sizeof(buf)), 0);
		ntb_fault_stats(a, &st);
		assert_true(st.cut == (k >= 9));
	}
	assert_int_equal(ntb_write32(a, WIN - 4, 0x12345678), 0);
	assert_int_equal(ntb_write64(a, WIN - 16, ~0ull), 0);
	assert_int_equal(ntb_write8(a, WIN - 17, 0x11), 0);
	for (int k = 0; k < 20; k++)
		for (size_t i = 0; i < sizeof(buf); i++)
			if (in[(size_t)k * 128 + i] != (k < 9 ? 0xa5 : 0))
				fail_msg("write %d byte %zu: %#x", k, i, in[(size_t)k * 128 + i]);
	for (size_t i = WIN - 17; i < WIN; i++)
		assert_int_equal(in[i], 0);
	assert_false(ctrl_reaches(a, b, 2));
	ntb_fault_stats(a, &st);
	assert_int_equal(st.writes, 23);
	assert_int_equal(st.bytes, 900);
	assert_true(st.cut);
	assert_int_equal(st.cut_drops, 23 - 9);
	assert_int_equal(st.cut_ctrl_drops, 2); /* the doorbell and the scratchpad */
	assert_int_equal(st.dropped + st.corrupted + st.delayed, 0);
	/* the peer's writes are not cut */
	assert_true(ctrl_reaches(b, a, 5));
	ntb_link_close(a);
	ntb_link_close(b);

	/* a write that ends exactly at cut_after lands; the cut follows it at once */
	f.cut_after = 200;
	a = open_pair(&f, &b);
	in = ntb_in_window(b, &sz);
	assert_int_equal(ntb_write(a, 0, buf, 100), 0);
	assert_true(ctrl_reaches(a, b, 7));
	assert_int_equal(ntb_write(a, 100, buf, 100), 0);
	ntb_fault_stats(a, &st);
	assert_true(st.cut);
	assert_false(ctrl_reaches(a, b, 8));
	assert_int_equal(ntb_write(a, 200, buf, 1), 0);
	assert_int_equal(in[199], 0xa5);
	assert_int_equal(in[200], 0);
	ntb_fault_stats(a, &st);
	assert_int_equal(st.bytes, 200);
	assert_int_equal(st.cut_drops, 1);
	ntb_link_close(a);
	ntb_link_close(b);
}

/* cut_after_ms counts from the first window write, not from the open; until then and until
 * it passes, writes land; after it, nothing does. */
static void test_cut_after_ms(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .cut_after_ms = 40, .seed = 5 };
	struct ntb_link *b, *a = open_pair(&f, &b);
	size_t sz;
	const volatile uint32_t *in = ntb_in_window(b, &sz);
	struct ntb_fault_stats st;

	sleep_ms(60); /* longer than cut_after_ms, but no window write yet: no cut */
	assert_true(ctrl_reaches(a, b, 1));
	uint64_t t0 = clock_mono_ns();
	assert_int_equal(ntb_write32(a, 0, 1), 0);
	assert_int_equal(in[0], 1);
	/* (the check below is only meaningful while we are still inside the 40 ms) */
	if (clock_mono_ns() - t0 < 30000000u) {
		assert_int_equal(ntb_write32(a, 4, 2), 0);
		assert_int_equal(in[1], 2);
		assert_true(ctrl_reaches(a, b, 2));
	}
	sleep_ms(50);
	/* past the time: a control write alone notices it */
	assert_false(ctrl_reaches(a, b, 3));
	assert_int_equal(ntb_write32(a, 8, 3), 0);
	assert_int_equal(in[2], 0);
	ntb_fault_stats(a, &st);
	assert_true(st.cut);
	assert_int_equal(st.cut_drops, 1);
	assert_int_equal(st.cut_ctrl_drops, 2);
	ntb_link_close(a);
	ntb_link_close(b);
}

/* Cut and random faults together: up to the cut the faults are exactly those of the same seed
 * without a cut (the cut draws nothing from the PRNG), from the cut on every write is lost;
 * and two runs give the same result. */
static void test_cut_with_rates_deterministic(void **state)
{
	(void)state;
	struct ntb_fault_params f = { .enabled = true, .drop = 0.05, .corrupt = 0.05,
				      .seed = 4242 };
	const uint32_t keep = N32 / 3;
	struct outcome plain, cut1, cut2;
	struct ntb_fault_stats st;
	struct ntb_link *b, *a;
	uint32_t dropped_before = 0, corrupted_before = 0;

	a = open_pair(&f, &b);
	run_writes32(a, b, &plain);
	ntb_link_close(a);
	ntb_link_close(b);
	f.cut_after = (uint64_t)keep * 4;
	a = open_pair(&f, &b);
	run_writes32(a, b, &cut1);
	ntb_fault_stats(a, &st);
	ntb_link_close(a);
	ntb_link_close(b);
	a = open_pair(&f, &b);
	run_writes32(a, b, &cut2);
	ntb_link_close(a);
	ntb_link_close(b);

	for (uint32_t i = 0; i < keep; i++) {
		dropped_before += plain.pattern[i] == 1;
		corrupted_before += plain.pattern[i] >= 2;
	}
	assert_true(dropped_before > 100 && corrupted_before > 100);
	assert_memory_equal(cut1.pattern, plain.pattern, keep);
	for (uint32_t i = keep; i < N32; i++)
		if (cut1.pattern[i] != 1)
			fail_msg("write %u after the cut: outcome %u", i, cut1.pattern[i]);
	assert_memory_equal(cut1.pattern, cut2.pattern, N32);
	assert_int_equal(st.writes, N32);
	assert_int_equal(st.bytes, (uint64_t)keep * 4);
	assert_true(st.cut);
	assert_int_equal(st.cut_drops, N32 - keep);
	assert_int_equal(st.dropped, dropped_before);
	assert_int_equal(st.corrupted, corrupted_before);
	free(plain.pattern);
	free(cut1.pattern);
	free(cut2.pattern);
}

/* Two links over one shm file, side A with cut_after: once A's writes cross it, B sees A's
 * heartbeat stop and its link go down within link_timeout (silent, never announced: A's
 * close cannot announce down either), while A, whose inbound side is intact, stays up. */
static void test_cut_takes_peer_link_down(void **state)
{
	(void)state;
	const uint32_t timeout_ms = 150;
	struct ntb_link_params p;
	struct ntb_link *a, *b;
	struct ntb_fault_stats st;
	uint8_t buf[256];

	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-fault-%d-%d", (int)getpid(), path_no++);
	unlink(path);
	ntb_link_params_init(&p);
	snprintf(p.name, sizeof(p.name), "cut");
	snprintf(p.path, sizeof(p.path), "%s", path);
	p.window_size = WIN;
	p.heartbeat_ms = 10;
	p.link_timeout_ms = timeout_ms;
	p.side = 0;
	p.fault = (struct ntb_fault_params){ .enabled = true, .cut_after = 1024, .seed = 1 };
	assert_int_equal(ntb_link_open(&p, &a), 0);
	p.side = 1;
	memset(&p.fault, 0, sizeof(p.fault));
	assert_int_equal(ntb_link_open(&p, &b), 0);
	unlink(path);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	bool up = false;
	for (int i = 0; i < 400 && !up; i++) {
		up = ntb_link_tick(a) & ntb_link_tick(b);
		if (!up)
			sleep_ms(5);
	}
	assert_true(up);
	/* up for a few heartbeats with writes below the threshold: stays up */
	memset(buf, 0x5a, sizeof(buf));
	for (int k = 0; k < 4; k++) {
		assert_int_equal(ntb_write(a, (size_t)k * 256, buf, 200), 0);
		sleep_ms(20);
		assert_true(ntb_link_tick(a));
		assert_true(ntb_link_tick(b));
	}
	ntb_fault_stats(a, &st);
	assert_false(st.cut);
	/* 800 + 256 > 1024: the cut */
	assert_int_equal(ntb_write(a, 4096, buf, sizeof(buf)), 0);
	uint64_t t0 = clock_mono_ns(), down_ns = 0;
	while (clock_mono_ns() - t0 < 3000000000ull) {
		bool ua = ntb_link_tick(a), ub = ntb_link_tick(b);
		if (!ub) {
			down_ns = clock_mono_ns() - t0;
			break;
		}
		assert_true(ua);
		sleep_ms(5);
	}
	if (!down_ns)
		fail_msg("B's link still up 3 s after A's cut");
	/* ≥ timeout minus one heartbeat (the last one landed before the cut); ≤ timeout plus
	 * slack for a loaded machine */
	assert_true(down_ns >= (uint64_t)(timeout_ms - 10) * 1000000u);
	assert_true(down_ns <= (uint64_t)(timeout_ms + 250) * 1000000u);
	assert_true(ntb_link_peer_silent(b));
	assert_true(ntb_link_tick(a)); /* B's heartbeat still reaches A */
	ntb_fault_stats(a, &st);
	assert_true(st.cut);
	assert_true(st.cut_ctrl_drops >= 1); /* heartbeats */
	ntb_link_close(a); /* cannot announce down: B still sees a silent peer */
	assert_false(ntb_link_tick(b));
	assert_true(ntb_link_peer_silent(b));
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
		cmocka_unit_test(test_cut_after_bytes),
		cmocka_unit_test(test_cut_after_ms),
		cmocka_unit_test(test_cut_with_rates_deterministic),
		cmocka_unit_test(test_cut_takes_peer_link_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
