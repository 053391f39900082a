/* SPDX-License-Identifier: MIT */
/* CRC32C for x86-64 with SSE4.2 crc32 in three interleaved chains, joined by PCLMULQDQ. */
#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <string.h>

#include "util/compiler.h"
#include "util/crc32c_int.h"

/*
 * The crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so
 * one serial chain runs at a third of the possible speed. A block of 3*L bytes is split
 * into three lanes A, B, C of L bytes each, run as three independent chains
 * (A continues from the incoming register, B and C start from 0), then joined:
 *     reg = a * x^(8*2L) ^ b * x^(8*L) ^ c   (mod P).
 * The shifts use one carry-less multiply each: for a bit-reflected 32-bit a and K,
 * clmul(a, K) read as a 64-bit reflected polynomial is a*K*x, and crc32q(0, v) is
 * v*x^32 mod P, so with K = x^(8n-33) mod P, crc32q(0, clmul(a, K)) = a*x^(8n) mod P.
 * The constants below were generated that way; test_crc32c recomputes them.
 */
#define TARGET __attribute__((target("sse4.2,pclmul")))

const struct crc32c_lane_shift crc32c_lane_shifts[3] = {
	{ 4096, 0x82f89c77, 0x54a86326 },
	{ 512, 0xdd7e3b0c, 0x170076fa },
	{ 64, 0x9e4addf8, 0x0d3b6092 },
};

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return w;
}

static inline void store64(uint8_t *p, uint64_t w)
{
	memcpy(p, &w, 8);
}

TARGET static inline uint32_t lanes_join(uint64_t a, uint64_t b, uint64_t c,
					 const struct crc32c_lane_shift *k)
{
	__m128i pa = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a),
					  _mm_cvtsi32_si128((int)k->k2), 0x00);
	__m128i pb = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)b),
					  _mm_cvtsi32_si128((int)k->k1), 0x00);
	uint64_t v = (uint64_t)_mm_cvtsi128_si64(_mm_xor_si128(pa, pb));

	return (uint32_t)(c ^ _mm_crc32_u64(0, v));
}

/* Three chains over [p, p + 3L): L is a compile-time constant at every call site. */
TARGET static inline uint32_t crc_3way(uint32_t s, const uint8_t *p, size_t L,
				       const struct crc32c_lane_shift *k)
{
	uint64_t a = s, b = 0, c = 0;

	for (size_t i = 0; i < L; i += 16) {
		a = _mm_crc32_u64(a, load64(p + i));
		b = _mm_crc32_u64(b, load64(p + L + i));
		c = _mm_crc32_u64(c, load64(p + 2 * L + i));
		a = _mm_crc32_u64(a, load64(p + i + 8));
		b = _mm_crc32_u64(b, load64(p + L + i + 8));
		c = _mm_crc32_u64(c, load64(p + 2 * L + i + 8));
	}
	return lanes_join(a, b, c, k);
}

/* Same, copying each word to @d as it is checksummed. */
TARGET static inline uint32_t copy_3way(uint32_t s, uint8_t *d, const uint8_t *p, size_t L,
					const struct crc32c_lane_shift *k)
{
	uint64_t a = s, b = 0, c = 0;

	for (size_t i = 0; i < L; i += 16) {
		uint64_t wa0 = load64(p + i), wb0 = load64(p + L + i);
		uint64_t wc0 = load64(p + 2 * L + i), wa1 = load64(p + i + 8);
		uint64_t wb1 = load64(p + L + i + 8), wc1 = load64(p + 2 * L + i + 8);

		store64(d + i, wa0);
		store64(d + i + 8, wa1);
		store64(d + L + i, wb0);
		store64(d + L + i + 8, wb1);
		store64(d + 2 * L + i, wc0);
		store64(d + 2 * L + i + 8, wc1);
		a = _mm_crc32_u64(a, wa0);
		b = _mm_crc32_u64(b, wb0);
		c = _mm_crc32_u64(c, wc0);
		a = _mm_crc32_u64(a, wa1);
		b = _mm_crc32_u64(b, wb1);
		c = _mm_crc32_u64(c, wc1);
	}
	return lanes_join(a, b, c, k);
}

TARGET uint32_t crc32c_sse42_raw(uint32_t s, const uint8_t *p, size_t n)
{
	/* Head: align the source so the lanes' loads never split a cache line. */
	for (; n && ((uintptr_t)p & 7); n--)
		s = _mm_crc32_u8(s, *p++);
	for (; n >= 3 * 4096; n -= 3 * 4096, p += 3 * 4096)
		s = crc_3way(s, p, 4096, &crc32c_lane_shifts[0]);
	for (; n >= 3 * 512; n -= 3 * 512, p += 3 * 512)
		s = crc_3way(s, p, 512, &crc32c_lane_shifts[1]);
	for (; n >= 3 * 64; n -= 3 * 64, p += 3 * 64)
		s = crc_3way(s, p, 64, &crc32c_lane_shifts[2]);
	for (; n >= 8; n -= 8, p += 8)
		s = (uint32_t)_mm_crc32_u64(s, load64(p));
	while (n--)
		s = _mm_crc32_u8(s, *p++);
	return s;
}

TARGET uint32_t crc32c_sse42_copy_raw(uint32_t s, uint8_t *d, const uint8_t *p, size_t n)
{
	for (; n && ((uintptr_t)p & 7); n--) {
		uint8_t b = *p++;

		*d++ = b;
		s = _mm_crc32_u8(s, b);
	}
	for (; n >= 3 * 4096; n -= 3 * 4096, p += 3 * 4096, d += 3 * 4096)
		s = copy_3way(s, d, p, 4096, &crc32c_lane_shifts[0]);
	for (; n >= 3 * 512; n -= 3 * 512, p += 3 * 512, d += 3 * 512)
		s = copy_3way(s, d, p, 512, &crc32c_lane_shifts[1]);
	for (; n >= 3 * 64; n -= 3 * 64, p += 3 * 64, d += 3 * 64)
		s = copy_3way(s, d, p, 64, &crc32c_lane_shifts[2]);
	for (; n >= 8; n -= 8, p += 8, d += 8) {
		uint64_t w = load64(p);

		store64(d, w);
		s = (uint32_t)_mm_crc32_u64(s, w);
	}
	while (n--) {
		uint8_t b = *p++;

		*d++ = b;
		s = _mm_crc32_u8(s, b);
	}
	return s;
}

static uint32_t crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
	return ~crc32c_sse42_raw(~crc, buf, len);
}

static uint32_t crc32c_copy_sse42(uint32_t crc, void *dst, const void *src, size_t len)
{
	return ~crc32c_sse42_copy_raw(~crc, dst, src, len);
}

static int sse42_supported(void)
{
	/* __builtin_cpu_supports needs the CPU model data set up; init is idempotent. */
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
}

const struct crc32c_impl crc32c_impl_sse42 = {
	.name = "sse4.2-3way",
	.supported = sse42_supported,
	.crc = crc32c_sse42,
	.copy = crc32c_copy_sse42,
};

#endif
