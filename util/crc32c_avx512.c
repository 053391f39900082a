/* SPDX-License-Identifier: MIT */
/* CRC32C for x86-64 with AVX-512 VPCLMULQDQ folding: checksum, copy and double copy. */
#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include "util/compiler.h"
#include "util/crc32c_int.h"

/*
 * The folding of crc32c_vpclmul.c on 512-bit registers: four zmm accumulators take 256
 * consecutive bytes per step, each moved forward 256 bytes per step (two carry-less
 * multiplies per 128-bit lane and one three-way xor), and the copy rides on the fold's
 * loads: one 64-byte load and one (two for crc32c_copy2()) 64-byte stores per 64 bytes.
 * Heads (to align) and tails (under one step) go through the SSE4.2 crc32 chain. Zen 5,
 * 64 KiB in L2: crc32c 68 GB/s against 56 on the AVX2 path, crc32c_copy 67 against 34.
 * Eight accumulators measured the same (the multiplies' throughput is the limit), and
 * three scalar crc32 lanes beside the fold, as on the AVX2 path, slower (55).
 *
 * Folding (bit-reflected, 16-byte lane X = H*x^64 + L, H in the low quadword): moving X
 * forward by F bytes is clmul(H, x^(8F+31)) ^ clmul(L, x^(8F-33)) mod P; the constants
 * are crc32c_fold_consts[] (F = 16 << j).
 */
#define TARGET __attribute__((target("avx512f,avx2,vpclmulqdq,sse4.2,pclmul")))

#define STEP 256 /* bytes per step: four 64-byte accumulators */
/* From here on the zmm path (shorter buffers: the SSE4.2 chain; the AVX2 path's threshold). */
#define MIN_LEN 512
_Static_assert(MIN_LEN >= STEP + 63, "a whole step must remain after aligning");

TARGET static inline __m512i fold_k512(int j)
{
	uint32_t h = crc32c_fold_consts[j][0], l = crc32c_fold_consts[j][1];

	return _mm512_broadcast_i32x4(_mm_setr_epi32((int)h, 0, (int)l, 0));
}

/* acc moved forward by F bytes (k = fold_k512(F)), then data added. */
TARGET static inline __m512i fold512(__m512i acc, __m512i k, __m512i data)
{
	__m512i hi = _mm512_clmulepi64_epi128(acc, k, 0x00);
	__m512i lo = _mm512_clmulepi64_epi128(acc, k, 0x11);

	return _mm512_ternarylogic_epi64(hi, lo, data, 0x96); /* hi ^ lo ^ data */
}

TARGET static inline __m256i fold256(__m256i acc, __m512i k, __m256i data)
{
	__m256i k256 = _mm512_castsi512_si256(k);
	__m256i hi = _mm256_clmulepi64_epi128(acc, k256, 0x00);
	__m256i lo = _mm256_clmulepi64_epi128(acc, k256, 0x11);

	return _mm256_xor_si256(_mm256_xor_si256(hi, lo), data);
}

/* Four accumulators (256 consecutive bytes, x[0] first) down to a 32-bit register. */
TARGET static inline uint32_t reduce4(__m512i x[4])
{
	__m512i k128 = fold_k512(3), k64 = fold_k512(2), k32 = fold_k512(1);
	__m128i k16 = _mm512_castsi512_si128(fold_k512(0)), lo, hi, v;
	__m256i y;
	uint64_t r;

	x[2] = fold512(x[0], k128, x[2]);
	x[3] = fold512(x[1], k128, x[3]);
	x[3] = fold512(x[2], k64, x[3]);
	y = fold256(_mm512_castsi512_si256(x[3]), k32, _mm512_extracti64x4_epi64(x[3], 1));
	lo = _mm256_castsi256_si128(y);
	hi = _mm256_extracti128_si256(y, 1);
	v = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(lo, k16, 0x00),
					_mm_clmulepi64_si128(lo, k16, 0x11)), hi);
	r = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(v));
	r = _mm_crc32_u64(r, (uint64_t)_mm_extract_epi64(v, 1));
	return (uint32_t)r;
}

TARGET static inline __m512i load512(const uint8_t *p)
{
	return _mm512_loadu_si512((const void *)p);
}

/* The incoming register enters the first 4 bytes (reflected: the low bits of lane 0). */
TARGET static inline __m512i with_reg(__m512i x, uint32_t s)
{
	return _mm512_xor_si512(x, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)s)));
}

/* @steps >= 1 steps of 256 bytes from @p, continuing from register @s. */
TARGET static uint32_t crc_fold(uint32_t s, const uint8_t *p, size_t steps)
{
	__m512i k256 = fold_k512(4), x[4];

	#pragma GCC unroll 4
	for (int j = 0; j < 4; j++)
		x[j] = load512(p + 64 * j);
	x[0] = with_reg(x[0], s);
	for (size_t i = 1; i < steps; i++)
		#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			x[j] = fold512(x[j], k256, load512(p + STEP * i + 64 * j));
	return reduce4(x);
}

/* Load 64 bytes at p + off and store them at d + off: the copy rides on the fold's load. */
TARGET static inline __m512i load_store512(uint8_t *d, const uint8_t *p, size_t off)
{
	__m512i v = load512(p + off);

	_mm512_storeu_si512((void *)(d + off), v);
	return v;
}

TARGET static uint32_t copy_fold(uint32_t s, uint8_t *d, const uint8_t *p, size_t steps)
{
	__m512i k256 = fold_k512(4), x[4];

	#pragma GCC unroll 4
	for (int j = 0; j < 4; j++)
		x[j] = load_store512(d, p, 64 * j);
	x[0] = with_reg(x[0], s);
	for (size_t i = 1; i < steps; i++)
		#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			x[j] = fold512(x[j], k256, load_store512(d, p, STEP * i + 64 * j));
	return reduce4(x);
}

/* The same, storing each vector to @d2 + off as well. */
TARGET static inline __m512i load_store2_512(uint8_t *d, uint8_t *d2, const uint8_t *p,
					     size_t off)
{
	__m512i v = load512(p + off);

	_mm512_storeu_si512((void *)(d + off), v);
	_mm512_storeu_si512((void *)(d2 + off), v);
	return v;
}

TARGET static uint32_t copy2_fold(uint32_t s, uint8_t *d, uint8_t *d2, const uint8_t *p,
				  size_t steps)
{
	__m512i k256 = fold_k512(4), x[4];

	#pragma GCC unroll 4
	for (int j = 0; j < 4; j++)
		x[j] = load_store2_512(d, d2, p, 64 * j);
	x[0] = with_reg(x[0], s);
	for (size_t i = 1; i < steps; i++)
		#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			x[j] = fold512(x[j], k256, load_store2_512(d, d2, p, STEP * i + 64 * j));
	return reduce4(x);
}

static inline size_t head_to_64(const void *p)
{
	return (64 - ((uintptr_t)p & 63)) & 63;
}

/* Aligned on the source: no load splits a cache line. */
static uint32_t crc_raw(uint32_t s, const uint8_t *p, size_t n)
{
	size_t head = head_to_64(p), steps;

	s = crc32c_sse42_raw(s, p, head);
	p += head;
	n -= head;
	steps = n / STEP;
	s = crc_fold(s, p, steps);
	return crc32c_sse42_raw(s, p + steps * STEP, n - steps * STEP);
}

/* Aligned on the source, as crc_raw(). */
static uint32_t copy_raw(uint32_t s, uint8_t *d, const uint8_t *p, size_t n)
{
	size_t head = head_to_64(p), steps;

	s = crc32c_sse42_copy_raw(s, d, p, head);
	p += head;
	d += head;
	n -= head;
	steps = n / STEP;
	s = copy_fold(s, d, p, steps);
	return crc32c_sse42_copy_raw(s, d + steps * STEP, p + steps * STEP, n - steps * STEP);
}

/* Aligned on @d2, two stores per load: a sender's window and shadow offsets are equal
 * modulo 128, so neither store splits a line (the loads may). */
static uint32_t copy2_raw(uint32_t s, uint8_t *d, uint8_t *d2, const uint8_t *p, size_t n)
{
	size_t head = head_to_64(d2), steps;

	s = crc32c_sse42_copy2_raw(s, d, d2, p, head);
	p += head;
	d += head;
	d2 += head;
	n -= head;
	steps = n / STEP;
	s = copy2_fold(s, d, d2, p, steps);
	return crc32c_sse42_copy2_raw(s, d + steps * STEP, d2 + steps * STEP, p + steps * STEP,
				      n - steps * STEP);
}

/* Short buffers go straight to the SSE4.2 path, without entering AVX-512 code at all. */
static uint32_t crc32c_avx512(uint32_t crc, const void *buf, size_t len)
{
	if (len < MIN_LEN)
		return ~crc32c_sse42_raw(~crc, buf, len);
	return ~crc_raw(~crc, buf, len);
}

static uint32_t crc32c_copy_avx512(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (len < MIN_LEN)
		return ~crc32c_sse42_copy_raw(~crc, dst, src, len);
	return ~copy_raw(~crc, dst, src, len);
}

/*
 * From COPY2_SPLIT_LEN on, two passes beat the fused one (crc32c_impl_copy2() makes them from
 * @copy and memcpy()): the checksumming copy to @dst2
 * (local memory), then memcpy() from @dst2 to @dst. Two stores per load into two rings
 * overflow the store path, while the libc copy of this size (rep movsb on Zen 5) writes
 * whole lines without reading them first, which matters for @dst, whose lines the peer's
 * core holds. Zen 5, 1 MiB rings, the receiver copying out on the other core: 8 KiB
 * messages 30 GB/s against 22, 64 KiB 34-35 against 25, 256 KiB 33-36 against 25. On far
 * cores (a cache line one-way 0.2 us; `ntbsock perf`, the sender's prefetch of the next
 * write's lines below the switch either way) 4 KiB 6.1-6.3 GB/s against 4.4-4.8 with the
 * switch at 8 KiB, 6 KiB 8.6-8.8 against 3.7-4.1; 2 KiB even (hence 4 KiB). On near cores
 * (0.037 us) 4 KiB lost (11.1-13.6 against 10.3-16.3, three runs) and 6 KiB gained
 * (13.9-18.1 against 10.6-13.4); iperf3 -l 4K and -l 6K even there. A third pass (memcpy()
 * to @dst2, then its checksum) measured 26-28 at 64 KiB.
 */
#define COPY2_SPLIT_LEN 4096u

static uint32_t crc32c_copy2_avx512(uint32_t crc, void *dst, void *dst2, const void *src,
				    size_t len)
{
	if (len < MIN_LEN)
		return ~crc32c_sse42_copy2_raw(~crc, dst, dst2, src, len);
	return ~copy2_raw(~crc, dst, dst2, src, len); /* (below COPY2_SPLIT_LEN: crc32c.c) */
}

static int avx512_supported(void)
{
	unsigned need = CRC32C_X86_SSE42 | CRC32C_X86_PCLMUL | CRC32C_X86_AVX2 |
			CRC32C_X86_VPCLMULQDQ | CRC32C_X86_AVX512;

	return (crc32c_x86_features() & need) == need;
}

const struct crc32c_impl crc32c_impl_avx512 = {
	.name = "vpclmul-avx512+sse4.2",
	.supported = avx512_supported,
	.crc = crc32c_avx512,
	.copy = crc32c_copy_avx512,
	.copy2 = crc32c_copy2_avx512,
	.copy2_split = COPY2_SPLIT_LEN,
	.shift = crc32c_shift_sse42,
};

#endif
