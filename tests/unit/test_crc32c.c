/* SPDX-License-Identifier: MIT */
/* Unit tests for util/crc32c: known answers, every implementation against the reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/crc32c.h"
#include "util/crc32c_int.h"

#define MAX_SMALL 4096
#define LARGE ((3u << 20) + 64)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rng() >> 32);
}

/* Bit-at-a-time definition of CRC32C, independent of every table and instruction. */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (CRC32C_POLY_REFLECTED & (0u - (crc & 1)));
	}
	return ~crc;
}

/* Supported implementations, each tested on its own (the portable one included). */
static size_t supported_impls(const struct crc32c_impl **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; crc32c_impls[i] && n < max; i++)
		if (crc32c_impls[i]->supported())
			out[n++] = crc32c_impls[i];
	return n;
}

static void test_known_answers(void **state)
{
	/* RFC 3720 B.4 and the common check value. */
	static const uint8_t read_pdu[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	const struct crc32c_impl *impls[8];
	size_t n = supported_impls(impls, 8);
	uint8_t zeros[32], ones[32], inc[32], dec[32];

	(void)state;
	memset(zeros, 0, sizeof(zeros));
	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++) {
		inc[i] = (uint8_t)i;
		dec[i] = (uint8_t)(31 - i);
	}
	assert_true(n >= 1);
	for (size_t i = 0; i <= n; i++) {
		/* i == n tests the public, dispatched entry point. */
		uint32_t (*f)(uint32_t, const void *, size_t) = i < n ? impls[i]->crc : crc32c;

		assert_int_equal(f(0, "123456789", 9), 0xE3069283);
		assert_int_equal(f(0, zeros, 32), 0x8A9136AA);
		assert_int_equal(f(0, ones, 32), 0x62A8AB43);
		assert_int_equal(f(0, inc, 32), 0x46DD794E);
		assert_int_equal(f(0, dec, 32), 0x113FDB5C);
		assert_int_equal(f(0, read_pdu, 48), 0xD9963A56);
		assert_int_equal(f(0, "", 0), 0);
		assert_int_equal(f(0x12345678, NULL, 0), 0x12345678);
	}
	assert_int_equal(crc_bitwise(0, (const uint8_t *)"123456789", 9), 0xE3069283);
}

static void test_tables(void **state)
{
	(void)state;
	for (unsigned b = 0; b < 256; b++) {
		uint8_t buf[8] = { (uint8_t)b };

		for (int k = 0; k < 8; k++) {
			/* Raw register (no inversions) after byte b and k zero bytes. */
			uint32_t raw = ~crc_bitwise(~0u, buf, (size_t)k + 1);

			assert_int_equal(crc32c_table[k][b], raw);
		}
	}
	/* x^8 reflected is bit 31 - 8; each next entry is the square of the previous. */
	assert_int_equal(crc32c_x8n_table[0], 1u << 23);
	for (int k = 1; k < 64; k++)
		assert_int_equal(crc32c_x8n_table[k],
				 crc32c_multmodp(crc32c_x8n_table[k - 1], crc32c_x8n_table[k - 1]));
}

/* x^e mod P, bit-reflected, for e >= 7: x^7 shifted by (e - 7) / 8 bytes and the rest. */
static uint32_t xpow(uint64_t e)
{
	uint32_t r = crc32c_shift(1u << (31 - 7), (size_t)((e - 7) / 8));

	for (uint64_t k = 0; k < (e - 7) % 8; k++)
		r = crc32c_multmodp(r, 1u << 30);
	return r;
}

/* The constants the fast paths were generated with, recomputed from their definitions. */
static void test_fast_path_constants(void **state)
{
	(void)state;
	assert_int_equal(xpow(7), 1u << 24);
	assert_int_equal(xpow(33), crc32c_multmodp(xpow(32), 1u << 30));
#if defined(__x86_64__) && defined(__GNUC__)
	for (int j = 0; j < CRC32C_LANE_SIZES; j++) {
		uint64_t len = crc32c_lane_shifts[j].len;

		assert_int_equal(crc32c_lane_shifts[j].k1, xpow(8 * len - 33));
		assert_int_equal(crc32c_lane_shifts[j].k2, xpow(16 * len - 33));
	}
	for (uint64_t i = 1; i < 64; i++) {
		assert_int_equal(crc32c_short_shifts[i][0], xpow(64 * i - 33));
		assert_int_equal(crc32c_short_shifts[i][1], xpow(128 * i - 33));
	}
	for (uint64_t i = 1; i <= 32; i++) {
		uint64_t lane = 64 * i;

		assert_int_equal(crc32c_hybrid_shift[i - 1][0], xpow(8 * lane - 33));
		assert_int_equal(crc32c_hybrid_shift[i - 1][1], xpow(16 * lane - 33));
		assert_int_equal(crc32c_hybrid_shift[i - 1][2], xpow(24 * lane - 33));
	}
	/* x^(8 * 2^k - 33) = x^7 * x^(8 * (2^k - 5)); the exponent itself would overflow. */
	for (int k = 3; k < 64; k++)
		assert_int_equal(crc32c_x8n33_table[k],
				 crc32c_shift(1u << (31 - 7), (size_t)((1ull << k) - 5)));
	for (int j = 0; j < 5; j++) {
		uint64_t f = 16u << j;

		assert_int_equal(crc32c_fold_consts[j][0], xpow(8 * f + 31));
		assert_int_equal(crc32c_fold_consts[j][1], xpow(8 * f - 33));
	}
#endif
}

/* crc32c_pick(): NTBSOCK_CRC's names and aliases, the best path for none. */
static void test_pick(void **state)
{
	const struct crc32c_impl *impls[8] = { NULL };
	size_t n = supported_impls(impls, 8);

	(void)state;
	assert_ptr_equal(crc32c_pick(NULL), impls[0]);
	assert_ptr_equal(crc32c_pick(""), impls[0]);
	for (size_t i = 0; i < n; i++)
		assert_ptr_equal(crc32c_pick(impls[i]->name), impls[i]);
	assert_ptr_equal(crc32c_pick("portable"), &crc32c_impl_portable);
	assert_null(crc32c_pick("fastest"));
	assert_null(crc32c_pick("AVX2")); /* names are exact */
	assert_null(crc32c_pick("avx2 "));
#if defined(__x86_64__) && defined(__GNUC__)
	assert_ptr_equal(crc32c_pick("avx512"),
			 crc32c_impl_avx512.supported() ? &crc32c_impl_avx512 : NULL);
	assert_ptr_equal(crc32c_pick("avx2"),
			 crc32c_impl_hybrid.supported() ? &crc32c_impl_hybrid : NULL);
	assert_ptr_equal(crc32c_pick("sse4.2"),
			 crc32c_impl_sse42.supported() ? &crc32c_impl_sse42 : NULL);
	assert_string_equal(crc32c_impl_avx512.name, "vpclmul-avx512+sse4.2");
	assert_string_equal(crc32c_impl_hybrid.name, "vpclmul-avx2+sse4.2");
	assert_string_equal(crc32c_impl_sse42.name, "sse4.2-3way");
#else
	assert_null(crc32c_pick("avx2"));
#endif
}

static void test_impl_name(void **state)
{
	const struct crc32c_impl *impls[8];
	size_t n = supported_impls(impls, 8);
	const char *name = crc32c_impl_name();
	const char *env = getenv("NTBSOCK_CRC");
	const struct crc32c_impl *want = crc32c_pick(env);

	(void)state;
	assert_true(n >= 1);
	assert_non_null(name);
	/* The best supported implementation (first in the list) must be the one selected, or the
	 * one NTBSOCK_CRC names (the suite run again under it tests the entry points on that
	 * path). */
	assert_string_equal(name, want ? want->name : impls[0]->name);
	/* its two-pass switch, as the sender's prefetch reads it: 4 KiB on the AVX-512 and AVX2
	 * paths, none for the others (transport/tp_tx.c) */
	assert_int_equal(crc32c_copy2_split_len(),
			 strcmp(name, "vpclmul-avx512+sse4.2") && strcmp(name, "vpclmul-avx2+sse4.2")
				 ? SIZE_MAX
				 : (size_t)4096);
	assert_string_equal(crc32c_impl_portable.name, "portable");
#if defined(__x86_64__) && defined(__GNUC__)
	/* Our CPUID reading agrees with the compiler's. */
	__builtin_cpu_init();
	assert_int_equal(!!(crc32c_x86_features() & CRC32C_X86_SSE42),
			 !!__builtin_cpu_supports("sse4.2"));
	assert_int_equal(!!(crc32c_x86_features() & CRC32C_X86_PCLMUL),
			 !!__builtin_cpu_supports("pclmul"));
	assert_int_equal(!!(crc32c_x86_features() & CRC32C_X86_AVX2),
			 !!__builtin_cpu_supports("avx2"));
	assert_int_equal(!!(crc32c_x86_features() & CRC32C_X86_VPCLMULQDQ),
			 !!__builtin_cpu_supports("vpclmulqdq"));
	assert_int_equal(!!(crc32c_x86_features() & CRC32C_X86_AVX512),
			 !!__builtin_cpu_supports("avx512f"));
	if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") &&
	    !(env && *env && crc32c_pick(env)))
		assert_string_not_equal(name, "portable");
#endif
}

/* Portable path against the bit-at-a-time definition. */
static void test_portable_vs_bitwise(void **state)
{
	uint8_t *buf = malloc(MAX_SMALL + 64);

	(void)state;
	assert_non_null(buf);
	fill_random(buf, MAX_SMALL + 64);
	for (size_t len = 0; len <= 600; len++) {
		size_t off = rng() % 64;
		uint32_t init = (uint32_t)rng();

		assert_int_equal(crc32c_portable(init, buf + off, len),
				 crc_bitwise(init, buf + off, len));
	}
	assert_int_equal(crc32c_portable(7, buf + 3, MAX_SMALL), crc_bitwise(7, buf + 3, MAX_SMALL));
	free(buf);
}

/* Every implementation, and the public entry point (inline chain up to CRC32C_INLINE_MAX
 * bytes, the selected implementation beyond) and its out-of-line half crc32c_long() at every
 * length, equals the portable one for all lengths 0..4096, any offset. */
static void test_impls_small(void **state)
{
	const struct crc32c_impl *impls[8];
	size_t n = supported_impls(impls, 8);
	uint8_t *buf = malloc(MAX_SMALL + 64);

	(void)state;
	assert_non_null(buf);
	fill_random(buf, MAX_SMALL + 64);
	for (size_t i = 0; i < n; i++) {
		for (size_t len = 0; len <= MAX_SMALL; len++) {
			size_t off = rng() % 64;
			uint32_t init = (uint32_t)rng();

			assert_int_equal(impls[i]->crc(init, buf + off, len),
					 crc32c_portable(init, buf + off, len));
			assert_int_equal(impls[i]->crc(0, buf + (len & 7), len),
					 crc32c_portable(0, buf + (len & 7), len));
		}
	}
	for (size_t len = 0; len <= MAX_SMALL; len++) {
		size_t off = rng() % 64;
		uint32_t init = (uint32_t)rng(), ref = crc32c_portable(init, buf + off, len);

		assert_int_equal(crc32c(init, buf + off, len), ref);
		assert_int_equal(crc32c_long(init, buf + off, len), ref);
	}
	free(buf);
}

/* Large buffers cross every block size the fast paths use (12 KiB lanes and more). */
static void test_impls_large(void **state)
{
	static const size_t lens[] = { 12287, 12288, 12289, 3 * 12288 + 1535, 65536, 65536 + 191,
				       1 << 20, (1 << 20) + 13, LARGE - 64 };
	const struct crc32c_impl *impls[8];
	size_t n = supported_impls(impls, 8);
	uint8_t *buf = malloc(LARGE);

	(void)state;
	assert_non_null(buf);
	fill_random(buf, LARGE);
	for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
		for (size_t off = 0; off < 64; off += 9) {
			uint32_t ref = crc32c_portable(0, buf + off, lens[j]);

			for (size_t i = 0; i < n; i++)
				assert_int_equal(impls[i]->crc(0, buf + off, lens[j]), ref);
			assert_int_equal(crc32c(0, buf + off, lens[j]), ref);
		}
	}
	/* Every block shape of the hybrid path: 448 bytes per iteration, 1..32 iterations. */
	for (size_t it = 1; it <= 40; it++) {
		size_t len = 448 * it + rng() % 448, off = rng() % 64;
		uint32_t init = (uint32_t)rng(), ref = crc32c_portable(init, buf + off, len);

		for (size_t i = 0; i < n; i++)
			assert_int_equal(impls[i]->crc(init, buf + off, len), ref);
	}
	/* One large buffer against the definition itself, not only against portable. */
	assert_int_equal(crc32c(0, buf + 5, (1 << 20) + 3), crc_bitwise(0, buf + 5, (1 << 20) + 3));
	free(buf);
}

static void test_chaining(void **state)
{
	const struct crc32c_impl *impls[8];
	size_t n = supported_impls(impls, 8);
	size_t total = 20000;
	uint8_t *buf = malloc(total);

	(void)state;
	assert_non_null(buf);
	fill_random(buf, total);
	for (size_t i = 0; i < n; i++) {
		uint32_t whole = impls[i]->crc(0, buf, total);

		for (int t = 0; t < 300; t++) {
			size_t cut1 = rng() % (total + 1), cut2 = rng() % (total + 1);
			uint32_t c;

			if (cut1 > cut2) {
				size_t x = cut1;

				cut1 = cut2;
				cut2 = x;
			}
			c = impls[i]->crc(0, buf, cut1);
			c = impls[i]->crc(c, buf + cut1, cut2 - cut1);
			c = impls[i]->crc(c, buf + cut2, total - cut2);
			assert_int_equal(c, whole);
		}
		for (size_t cut = 0; cut <= 300; cut++)
			assert_int_equal(impls[i]->crc(impls[i]->crc(0, buf, cut), buf + cut, 300 - cut),
					 impls[i]->crc(0, buf, 300));
	}
	free(buf);
}

/* crc32c_copy: same value as crc32c, exact copy, no byte outside [dst, dst + len) touched. */
static void check_copy(const struct crc32c_impl *impl, uint8_t *dst_area, const uint8_t *src,
		       size_t len, size_t dst_off)
{
	uint32_t init = (uint32_t)rng();
	uint8_t *dst = dst_area + dst_off;

	memset(dst_area, 0xA5, len + 128);
	assert_int_equal(impl->copy(init, dst, src, len), crc32c_portable(init, src, len));
	assert_memory_equal(dst, src, len);
	for (size_t k = 0; k < dst_off; k++)
		assert_int_equal(dst_area[k], 0xA5);
	for (size_t k = dst_off + len; k < len + 128; k++)
		assert_int_equal(dst_area[k], 0xA5);
}

static void test_copy(void **state)
{
	const struct crc32c_impl *impls[8];
	size_t n = supported_impls(impls, 8);
	uint8_t *src = malloc(LARGE), *dst = malloc(LARGE + 128);

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	fill_random(src, LARGE);
	for (size_t i = 0; i <= n + 1; i++) {
		/* i == n: the public entry point (inline chain for short buffers); n + 1: its
		 * out-of-line half, the selected implementation, at every length */
		struct crc32c_impl pub = { "public", NULL, crc32c, crc32c_copy, crc32c_shift,
					   NULL, 0 };
		struct crc32c_impl lng = { "long", NULL, crc32c_long, crc32c_copy_long, crc32c_shift,
					   NULL, 0 };
		const struct crc32c_impl *impl = i < n ? impls[i] : i == n ? &pub : &lng;

		for (size_t len = 0; len <= MAX_SMALL; len++)
			check_copy(impl, dst, src + (rng() % 64), len, rng() % 64);
		for (size_t it = 1; it <= 40; it++)
			check_copy(impl, dst, src + rng() % 64, 448 * it + rng() % 448, rng() % 64);
		for (size_t s = 0; s < 8; s++)
			for (size_t d = 0; d < 8; d++)
				check_copy(impl, dst, src + s, 3 * 4096 + 64 * 3 + 13, d);
		check_copy(impl, dst, src + 3, LARGE - 64, 61);
		check_copy(impl, dst, src, 1 << 20, 0);
	}
	free(src);
	free(dst);
}

/* crc32c_copy2 (an implementation's own, or the generic fallback through the public entry
 * point): crc32c's value, both copies exact, nothing outside either range touched, for
 * lengths across every path (small, head/tail, plain and non-temporal folding) and for
 * every alignment of source and second destination relative to each other. */
static void check_copy2(const struct crc32c_impl *impl, uint8_t *a_area, uint8_t *b_area,
			const uint8_t *src, size_t len, size_t a_off, size_t b_off)
{
	uint32_t init = (uint32_t)rng(), got;
	uint8_t *a = a_area + a_off, *b = b_area + b_off;

	memset(a_area, 0xA5, len + 128);
	memset(b_area, 0x5A, len + 128);
	got = crc32c_impl_copy2(impl, init, a, b, src, len); /* its fused pass or two */
	assert_int_equal(got, crc32c_portable(init, src, len));
	assert_memory_equal(a, src, len);
	assert_memory_equal(b, src, len);
	for (size_t k = 0; k < a_off; k++)
		assert_int_equal(a_area[k], 0xA5);
	for (size_t k = a_off + len; k < len + 128; k++)
		assert_int_equal(a_area[k], 0xA5);
	for (size_t k = 0; k < b_off; k++)
		assert_int_equal(b_area[k], 0x5A);
	for (size_t k = b_off + len; k < len + 128; k++)
		assert_int_equal(b_area[k], 0x5A);
}

static void test_copy2(void **state)
{
	const struct crc32c_impl *impls[8];
	size_t n = supported_impls(impls, 8);
	uint8_t *src = malloc(LARGE), *a = aligned_alloc(64, LARGE + 128);
	uint8_t *b = aligned_alloc(64, LARGE + 128);

	(void)state;
	assert_non_null(src);
	assert_non_null(a);
	assert_non_null(b);
	fill_random(src, LARGE);
	for (size_t i = 0; i <= n + 1; i++) {
		/* i == n: the public entry point (copy2 NULL → crc32c_copy2(): the inline chain
		 * for short buffers); n + 1: its out-of-line half at every length */
		struct crc32c_impl pub = { "public", NULL, crc32c, crc32c_copy, crc32c_shift,
					   NULL, 0 };
		struct crc32c_impl lng = { "long", NULL, crc32c_long, crc32c_copy_long, crc32c_shift,
					   crc32c_copy2_long, 0 };
		const struct crc32c_impl *impl = i < n ? impls[i] : i == n ? &pub : &lng;

		for (size_t len = 0; len <= MAX_SMALL; len++)
			check_copy2(impl, a, b, src + rng() % 64, len, rng() % 64, rng() % 64);
		for (size_t it = 1; it <= 40; it++)
			check_copy2(impl, a, b, src + rng() % 64, 448 * it + rng() % 448, rng() % 64,
				    rng() % 64);
		for (size_t s = 0; s < 4; s++)
			for (size_t d = 0; d < 36; d += 5)
				check_copy2(impl, a, b, src + s * 7, 4096 + 256 + 13, d, 35 - d);
		/* the same below the two-pass switch: the fused pass's alignment on @dst2 */
		for (size_t s = 0; s < 4; s++)
			for (size_t d = 0; d < 36; d += 5)
				check_copy2(impl, a, b, src + s * 7, 2048 + 256 + 13, d, 35 - d);
		/* either side of the vector paths' switch to two passes (crc32c_copy2_split_len()) */
		assert_true(impl->copy2_split == 0 || impl->copy2_split == 4096);
		for (size_t len = 4096 - 2; len <= 4096 + 2; len++)
			check_copy2(impl, a, b, src + rng() % 64, len, rng() % 64, rng() % 64);
		check_copy2(impl, a, b, src + 3, LARGE - 64, 61, 0);
		check_copy2(impl, a, b, src, 1 << 20, 0, 32);
	}
	free(src);
	free(a);
	free(b);
}

/* The entry points around CRC32C_INLINE_MAX, where they change path: crc32c()'s value for
 * every length, alignment and seed; the copying forms copy exactly, nothing past either end;
 * crc32c_word() equals the CRC of its little-endian bytes. */
static void test_entry_points_inline(void **state)
{
	uint8_t src[320 + 8], dst[320 + 8], dst2[320 + 8];

	(void)state;
	fill_random(src, sizeof(src));
	for (size_t len = 0; len <= 300; len++) {
		for (unsigned al = 0; al < 8; al += 3) {
			uint32_t seed = (uint32_t)rng();
			uint32_t ref = crc32c_portable(seed, src + al, len);

			assert_int_equal(crc32c(seed, src + al, len), ref);
			memset(dst, 0xee, sizeof(dst));
			assert_int_equal(crc32c_copy(seed, dst + al, src + al, len), ref);
			assert_memory_equal(dst + al, src + al, len);
			assert_int_equal(dst[al + len], 0xee); /* nothing written past the end */
			memset(dst, 0xee, sizeof(dst));
			memset(dst2, 0xdd, sizeof(dst2));
			assert_int_equal(crc32c_copy2(seed, dst + al, dst2 + 5, src + al, len), ref);
			assert_memory_equal(dst + al, src + al, len);
			assert_memory_equal(dst2 + 5, src + al, len);
			assert_int_equal(dst[al + len], 0xee);
			assert_int_equal(dst2[5 + len], 0xdd);
			assert_int_equal(dst2[4], 0xdd);
		}
	}
	assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283);
	assert_int_equal(crc32c_word(0, 0x3837363534333231ull, 8),
			 crc32c_portable(0, "12345678", 8));
	for (unsigned n = 1; n <= 8; n++) {
		for (int k = 0; k < 50; k++) {
			uint64_t v = rng();
			uint32_t seed = (uint32_t)rng();
			uint8_t b[8];

			for (unsigned i = 0; i < 8; i++)
				b[i] = (uint8_t)(v >> (8 * i));
			assert_int_equal(crc32c_word(seed, v, n), crc32c_portable(seed, b, n));
		}
	}
}

static void test_combine(void **state)
{
	size_t total = 70000;
	uint8_t *buf = malloc(total);

	(void)state;
	assert_non_null(buf);
	fill_random(buf, total);
	for (int t = 0; t < 200; t++) {
		size_t cut = t < 3 ? (size_t[]){ 0, total, 1 }[t] : rng() % (total + 1);
		uint32_t a = crc32c(0, buf, cut), b = crc32c(0, buf + cut, total - cut);

		assert_int_equal(crc32c_combine(a, b, total - cut), crc32c(0, buf, total));
	}
	/* Shifting composes: shift by m then n equals shift by m + n, even beyond 4 GiB. */
	for (int t = 0; t < 100; t++) {
		uint32_t c = (uint32_t)rng();
		size_t m = rng() >> 20, k = rng() >> 20;

		assert_int_equal(crc32c_shift(crc32c_shift(c, m), k), crc32c_shift(c, m + k));
	}
	/* Every implementation's shift equals the portable one, for small and huge lengths. */
	{
		const struct crc32c_impl *impls[8];
		size_t n = supported_impls(impls, 8);

		for (size_t i = 0; i < n; i++) {
			for (size_t len = 0; len < 300; len++) {
				uint32_t c = (uint32_t)rng();

				assert_int_equal(impls[i]->shift(c, len), crc32c_shift(c, len));
			}
			for (int t = 0; t < 300; t++) {
				uint32_t c = (uint32_t)rng();
				size_t len = (size_t)(rng() >> (rng() % 64));

				assert_int_equal(impls[i]->shift(c, len), crc32c_shift(c, len));
			}
			assert_int_equal(impls[i]->shift(0x12345678, SIZE_MAX),
					 crc32c_shift(0x12345678, SIZE_MAX));
		}
	}
	/* Shifting the raw register by n bytes is processing n zero bytes. */
	memset(buf, 0, 5000);
	for (size_t len = 0; len < 5000; len += 37) {
		uint32_t c = (uint32_t)rng();

		assert_int_equal(crc32c_shift(c, len), ~crc32c(~c, buf, len));
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_tables),
		cmocka_unit_test(test_fast_path_constants),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_impl_name),
		cmocka_unit_test(test_portable_vs_bitwise),
		cmocka_unit_test(test_impls_small),
		cmocka_unit_test(test_impls_large),
		cmocka_unit_test(test_chaining),
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_copy2),
		cmocka_unit_test(test_entry_points_inline),
		cmocka_unit_test(test_combine),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
