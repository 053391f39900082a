// SPDX-License-Identifier: MIT
/* `ntbsock perf` data: the verifiable payload pattern and latency percentiles. */
#include "tools/tools_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

size_t tool_pattern_len(size_t max_size)
{
	return max_size + (size_t)TOOL_PATTERN_PERIOD * TOOL_PATTERN_STRIDE;
}

size_t tool_pattern_offset(uint64_t msg_no)
{
	return (size_t)(msg_no % TOOL_PATTERN_PERIOD) * TOOL_PATTERN_STRIDE;
}

/*
 * The pattern is a sequence of 64-bit little-endian words, word W being (W + M) * K with M
 * from the seed: every word differs from every other (K is odd), so a message delivered at
 * the wrong offset, a stale or duplicated piece, a lost or shifted byte all show as a
 * mismatch. Unlike a table it can be recomputed in registers, so checking a received
 * message reads the message only (half the loads of a memcmp against the buffer).
 */
#define PATTERN_K 0x9e3779b97f4a7c15ull

static uint64_t pattern_mix(uint64_t seed)
{
	uint64_t z = seed + 0x6a09e667f3bcc909ull; /* splitmix64 */

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t pattern_word(uint64_t w, uint64_t m)
{
	return (w + m) * PATTERN_K;
}

static inline uint8_t pattern_byte(size_t pos, uint64_t m)
{
	return (uint8_t)(pattern_word(pos / 8, m) >> (8 * (pos % 8)));
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

void tool_pattern_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t m = pattern_mix(seed);

	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_byte(i, m);
}

/* Words [W, W + N) at P: whether all match (no early exit: a mismatch is the rare case). */
static bool check_words_scalar(const uint8_t *p, size_t n, uint64_t w, uint64_t m)
{
	uint64_t diff = 0, v = pattern_word(w, m);

	for (size_t i = 0; i < n; i++, v += PATTERN_K)
		diff |= load_le64(p + 8 * i) ^ v;
	return diff == 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The same, 16 words (128 bytes) a round in four ymm lanes, two accumulators; N % 16 == 0. */
__attribute__((target("avx2"))) static bool check_words_avx2(const uint8_t *p, size_t n,
							     uint64_t w, uint64_t m)
{
	uint64_t v = pattern_word(w, m);
	__m256i step = _mm256_set1_epi64x((long long)(16 * PATTERN_K));
	__m256i v0 = _mm256_setr_epi64x((long long)v, (long long)(v + PATTERN_K),
					(long long)(v + 2 * PATTERN_K), (long long)(v + 3 * PATTERN_K));
	__m256i k4 = _mm256_set1_epi64x((long long)(4 * PATTERN_K));
	__m256i v1 = _mm256_add_epi64(v0, k4), v2 = _mm256_add_epi64(v1, k4);
	__m256i v3 = _mm256_add_epi64(v2, k4), a0 = _mm256_setzero_si256(), a1 = a0;

	for (size_t i = 0; i < 8 * n; i += 128) {
		const __m256i *q = (const __m256i *)(p + i);

		a0 = _mm256_or_si256(a0, _mm256_xor_si256(_mm256_loadu_si256(q), v0));
		a1 = _mm256_or_si256(a1, _mm256_xor_si256(_mm256_loadu_si256(q + 1), v1));
		a0 = _mm256_or_si256(a0, _mm256_xor_si256(_mm256_loadu_si256(q + 2), v2));
		a1 = _mm256_or_si256(a1, _mm256_xor_si256(_mm256_loadu_si256(q + 3), v3));
		v0 = _mm256_add_epi64(v0, step);
		v1 = _mm256_add_epi64(v1, step);
		v2 = _mm256_add_epi64(v2, step);
		v3 = _mm256_add_epi64(v3, step);
	}
	a0 = _mm256_or_si256(a0, a1);
	return _mm256_testz_si256(a0, a0);
}

static bool have_avx2(void)
{
	static int cached = -1; /* the tool is single-threaded */

	if (cached < 0)
		cached = __builtin_cpu_supports("avx2") ? 1 : 0;
	return cached;
}
#endif

bool tool_pattern_check(const uint8_t *buf, size_t len, size_t pos, uint64_t seed)
{
	uint64_t m = pattern_mix(seed);
	size_t i = 0, words;
	bool ok = true;

	for (; i < len && (pos + i) % 8; i++)
		ok &= buf[i] == pattern_byte(pos + i, m);
	words = (len - i) / 8;
#if defined(__x86_64__) && defined(__GNUC__)
	if (words >= 16 && have_avx2()) {
		size_t n = words & ~(size_t)15;

		ok &= check_words_avx2(buf + i, n, (pos + i) / 8, m);
		i += 8 * n;
		words -= n;
	}
#endif
	ok &= check_words_scalar(buf + i, words, (pos + i) / 8, m);
	i += 8 * words;
	for (; i < len; i++)
		ok &= buf[i] == pattern_byte(pos + i, m);
	return ok;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t tool_percentile(uint64_t *samples, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	qsort(samples, n, sizeof(*samples), cmp_u64);
	/* nearest rank: the smallest sample with at least P% of the samples at or below it */
	rank = (size_t)((p / 100.0) * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return samples[rank - 1];
}
