// SPDX-License-Identifier: MIT
/* Unit tests of tools/perf_data.c, tools/perf_ref.c and tools/perf_pipe.c: payload pattern,
 * percentiles, and the reference measurements' plumbing (values, not speed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tools/perf_data.c"
#include "tools/perf_ref.c"
#include "tools/perf_pipe.c"

#define PERF_TEST_SEED 0x6e7462736f636bull

static void test_pattern_deterministic_and_seeded(void **state)
{
	uint8_t a[4096], b[4096], c[4096];
	int same = 0;

	(void)state;
	tool_pattern_fill(a, sizeof(a), 7);
	tool_pattern_fill(b, sizeof(b), 7);
	tool_pattern_fill(c, sizeof(c), 8);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_not_equal(a, c, sizeof(a));
	/* not a constant or short-period fill: bytes 8 apart mostly differ */
	for (size_t i = 0; i + 8 < sizeof(a); i++)
		same += a[i] == a[i + 8];
	assert_true(same < 64);
}

static void test_pattern_offsets_distinguish_neighbours(void **state)
{
	size_t len = tool_pattern_len(256);
	uint8_t *buf = malloc(len);

	(void)state;
	assert_int_equal(len, 256 + TOOL_PATTERN_PERIOD * TOOL_PATTERN_STRIDE);
	assert_int_equal(tool_pattern_offset(0), 0);
	assert_int_equal(tool_pattern_offset(1), TOOL_PATTERN_STRIDE);
	assert_int_equal(tool_pattern_offset(TOOL_PATTERN_PERIOD), 0);
	assert_int_equal(tool_pattern_offset(TOOL_PATTERN_PERIOD - 1),
			 (TOOL_PATTERN_PERIOD - 1) * TOOL_PATTERN_STRIDE);
	tool_pattern_fill(buf, len, 1);
	/* message n and n+1 (a swap or a duplicate) never look the same at 64 bytes */
	for (uint64_t n = 0; n < TOOL_PATTERN_PERIOD; n++) {
		assert_true(tool_pattern_offset(n) + 256 <= len);
		assert_memory_not_equal(buf + tool_pattern_offset(n),
					buf + tool_pattern_offset(n + 1), 64);
	}
	free(buf);
}

static void test_percentile(void **state)
{
	uint64_t s[100];

	(void)state;
	for (int i = 0; i < 100; i++)
		s[i] = (uint64_t)(100 - i); /* 100..1, unsorted */
	assert_int_equal(tool_percentile(s, 100, 50), 50);
	assert_int_equal(tool_percentile(s, 100, 99), 99);
	assert_int_equal(tool_percentile(s, 100, 100), 100);
	assert_int_equal(tool_percentile(s, 100, 0), 1);
	uint64_t one = 42;
	assert_int_equal(tool_percentile(&one, 1, 99), 42);
	assert_int_equal(tool_percentile(NULL, 0, 50), 0);
	uint64_t three[3] = { 30, 10, 20 };
	assert_int_equal(tool_percentile(three, 3, 50), 20);
	assert_int_equal(three[0], 10); /* sorted in place */
}

static void test_reference_values(void **state)
{
	double mbps = 0, us = 0;
	int a = -1, b = -1;

	(void)state;
	assert_int_equal(tool_ref_memcpy(1 << 20, 1000000, &mbps), 0);
	assert_true(mbps > 0);
	if (tool_pick_cpus(&a, &b) == 0) {
		assert_true(a >= 0 && b > a);
	} else {
		a = b = -1;
	}
	assert_int_equal(tool_ref_cacheline(a, b, 1000, &us), 0);
	assert_true(us > 0);
}

/* The pipeline reference: a burst moves real messages (the ring holds the source, every
 * one taken), twice in a row on the same receiver; bad shapes are refused; one CPU has no
 * pipeline. */
static void test_pipe_reference(void **state)
{
	struct tool_pipe_peer p;
	double mbps = 0;
	int a = -1, b = -1;

	(void)state;
	if (tool_pick_cpus(&a, &b) < 0) {
		assert_int_equal(tool_pipe_start(&p, 0, 0, 4096, 65536, -1), -ENODEV);
		assert_int_equal(p.pid, -1);
		return;
	}
	assert_int_equal(tool_pipe_start(&p, a, b, 4000, 64000, -1), -EINVAL); /* not 64-aligned */
	assert_int_equal(tool_pipe_start(&p, a, b, 4096, 4096, -1), -EINVAL);  /* one message */
	assert_int_equal(tool_pipe_start(&p, a, b, 4096, 4096 * 65, -1), -EINVAL);
	assert_int_equal(tool_pipe_start(&p, a, a, 4096, 65536, -1), -ENODEV); /* one CPU */
	tool_pipe_stop(&p); /* a peer that never started */
	assert_int_equal(tool_pipe_start(&p, a, b, 4096, 65536, -1), 0);
	assert_true(p.pid > 0);
	for (int burst = 0; burst < 2; burst++) {
		struct pipe_ctl *ctl = (struct pipe_ctl *)(void *)p.map;
		uint64_t h0 = ctl->head;

		mbps = 0;
		assert_int_equal(tool_pipe_burst(&p, 2000000, &mbps), 0);
		assert_true(mbps > 0);
		assert_true(ctl->head > h0 + p.slots); /* a ring's worth unmeasured, then more */
		assert_true(ctl->tail == ctl->head);
		assert_memory_equal(p.map + sizeof(*ctl), p.src, 4096);
		assert_memory_equal(p.shadow, p.src, 4096);
	}
	tool_pipe_stop(&p);
	assert_int_equal(p.pid, -1);
	assert_int_equal(tool_pipe_burst(&p, 1000, &mbps), -ECHILD);
}

/* The receiver's checks: a message whose CRC differs from the sender's is counted, so is one
 * whose bytes are not the pattern's (with a CRC that matches them), the others are not; the
 * burst ends once STOP names it and the ring is empty. */
static void test_pipe_receiver_counts_mismatches(void **state)
{
	size_t msg = 256;
	struct pipe_ctl *ctl = aligned_alloc(128, sizeof(*ctl));
	uint8_t ring[4 * 256], dst[256];

	(void)state;
	memset(ctl, 0, sizeof(*ctl));
	for (uint32_t i = 0; i < 4; i++)
		tool_pattern_fill(ring + i * msg, msg, PIPE_SEED);
	ring[1 * msg + 100] ^= 0x40; /* slot 1: not the pattern, its CRC right */
	for (uint32_t i = 0; i < 4; i++)
		ctl->crc[i] = crc32c(0, ring + i * msg, msg);
	ctl->crc[2] ^= 1; /* slot 2: the pattern, its CRC wrong */
	ctl->head = 4;
	ctl->stop = 7;
	assert_int_equal(pipe_recv_burst(ctl, ring, dst, msg, 4, 7, getppid()), 2);
	assert_int_equal(ctl->tail, 4);
	assert_memory_equal(dst, ring + 3 * msg, msg);
	/* the next burst: two more, both intact */
	ring[1 * msg + 100] ^= 0x40;
	ctl->crc[0] = crc32c(0, ring, msg);
	ctl->crc[1] = crc32c(0, ring + msg, msg);
	ctl->head = 6;
	ctl->stop = 8;
	assert_int_equal(pipe_recv_burst(ctl, ring, dst, msg, 4, 8, getppid()), 0);
	assert_int_equal(ctl->tail, 6);
	free(ctl);
}

/* tool_pattern_check() says yes exactly for the pattern's bytes at the given position: every
 * start (aligned or not) and length against a memcmp with the filled buffer, and no for a
 * single changed byte anywhere, another position or another seed. */
static void test_pattern_check_matches_buffer(void **state)
{
	size_t len = 4096 + 64;
	uint8_t *pat = malloc(len), *b = malloc(len);

	(void)state;
	tool_pattern_fill(pat, len, 5);
	for (size_t pos = 0; pos < 40; pos++) {
		for (size_t n = 0; n <= 600; n++) {
			memcpy(b, pat + pos, n);
			assert_true(tool_pattern_check(b, n, pos, 5));
			if (n == 0)
				continue;
			assert_false(tool_pattern_check(b, n, pos, 6));
			if (pos + 8 + n <= len)
				assert_false(tool_pattern_check(b, n, pos + 8, 5));
		}
	}
	/* one byte changed, at every place of windows that take each path (bytes, words, ymm) */
	for (size_t pos = 0; pos < 16; pos += 3) {
		size_t n = 3000;

		memcpy(b, pat + pos, n);
		for (size_t i = 0; i < n; i++) {
			b[i] ^= (uint8_t)(1u << (i % 8));
			assert_false(tool_pattern_check(b, n, pos, 5));
			b[i] ^= (uint8_t)(1u << (i % 8));
		}
		assert_true(tool_pattern_check(b, n, pos, 5));
	}
	free(pat);
	free(b);
}

/* The word loops alone (the scalar one is the fallback without AVX2), and large messages at
 * the offsets the perf tool uses. */
static void test_pattern_check_paths_and_large(void **state)
{
	size_t max = 512 * 1024, len = tool_pattern_len(max);
	uint8_t *pat = malloc(len);
	uint64_t m = pattern_mix(PERF_TEST_SEED);

	(void)state;
	tool_pattern_fill(pat, len, PERF_TEST_SEED);
	assert_true(check_words_scalar(pat + 64, 1000, 8, m));
	assert_false(check_words_scalar(pat + 64, 1000, 9, m));
#if defined(__x86_64__) && defined(__GNUC__)
	if (have_avx2()) {
		assert_true(check_words_avx2(pat + 64, 1024, 8, m));
		assert_false(check_words_avx2(pat + 64, 1024, 9, m));
		pat[64 + 8 * 1023 + 7] ^= 0x80;
		assert_false(check_words_avx2(pat + 64, 1024, 8, m));
		pat[64 + 8 * 1023 + 7] ^= 0x80;
	}
#endif
	for (uint64_t n = 0; n < TOOL_PATTERN_PERIOD; n += 409) {
		size_t off = tool_pattern_offset(n);

		assert_true(tool_pattern_check(pat + off, max, off, PERF_TEST_SEED));
		assert_true(tool_pattern_check(pat + off, 65536, off, PERF_TEST_SEED));
		/* the neighbour's message, or this one with its last byte wrong */
		assert_false(tool_pattern_check(pat + off + TOOL_PATTERN_STRIDE, 65536, off,
						PERF_TEST_SEED));
		pat[off + 65535] ^= 1;
		assert_false(tool_pattern_check(pat + off, 65536, off, PERF_TEST_SEED));
		pat[off + 65535] ^= 1;
	}
	free(pat);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pattern_deterministic_and_seeded),
		cmocka_unit_test(test_pattern_offsets_distinguish_neighbours),
		cmocka_unit_test(test_pattern_check_matches_buffer),
		cmocka_unit_test(test_pattern_check_paths_and_large),
		cmocka_unit_test(test_percentile),
		cmocka_unit_test(test_reference_values),
		cmocka_unit_test(test_pipe_reference),
		cmocka_unit_test(test_pipe_receiver_counts_mismatches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
