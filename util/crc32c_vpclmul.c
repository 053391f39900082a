/* SPDX-License-Identifier: MIT */
/* CRC32C for x86-64 with VPCLMULQDQ folding and SSE4.2 crc32 chains running side by side. */
#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <string.h>

#include "util/compiler.h"
#include "util/crc32c_int.h"

/*
 * Folding with 256-bit carry-less multiplies and the scalar crc32 instruction use
 * different execution units, and each alone does about 8 bytes per cycle here (Zen 3).
 * So a block is split in two: a vector part of 256*I bytes folded in eight ymm
 * accumulators, and three scalar lanes of 64*I bytes each, and one loop advances all of
 * them (I = 1..32 iterations). The lanes start at 0, the vector part at the incoming
 * register, and the four partial CRCs are joined as in crc32c_x86.c:
 *     reg = v * x^(8*3S) ^ a * x^(8*2S) ^ b * x^(8*S) ^ c,   S = 64*I.
 *
 * Folding (bit-reflected, 16-byte lane X = H*x^64 + L, H in the low quadword):
 * moving X forward by F bytes is X*x^(8F) = clmul(H, x^(8F+31)) ^ clmul(L, x^(8F-33))
 * (mod P), because clmul of 64-bit reflected H with a 32-bit reflected constant in the
 * low half of a quadword multiplies by the constant times x^33. The last 16-byte lane is
 * turned into a register with two crc32q (X*x^32 mod P).
 *
 * crc32c_copy() uses the folding alone: see copy_fold(); crc32c_copy2() the same with a
 * second store of each vector: see copy2_fold().
 */
#define TARGET __attribute__((target("avx2,vpclmulqdq,sse4.2,pclmul")))

#define STEP_VEC 256 /* vector bytes per iteration */
#define STEP_LANE 64 /* bytes per scalar lane per iteration */
#define STEP (STEP_VEC + 3 * STEP_LANE)
#define MAX_ITERS 32
/* Below this the sse4.2 path is as fast (the vector reduction and join cost ~40 cycles). */
#define MIN_LEN (2 * STEP)
/* crc32c_copy() folds only (see copy_fold()), from here on. */
#define MIN_COPY_LEN 512
_Static_assert(MIN_COPY_LEN >= STEP_VEC + 31, "copy_raw() needs one whole step after aligning");
_Static_assert(MIN_LEN >= STEP + 31, "crc_raw() needs one whole block after aligning");

/* crc32c_hybrid_shift[I - 1] = { x^(8S-33), x^(16S-33), x^(24S-33) } mod P, S = 64*I. */
const uint32_t crc32c_hybrid_shift[MAX_ITERS][3] = {
	{ 0x9e4addf8, 0x0d3b6092, 0xab7aff2a }, /*  1 */
	{ 0x0d3b6092, 0xb9e02b86, 0xd270f1a2 }, /*  2 */
	{ 0xab7aff2a, 0xd270f1a2, 0x271d9844 }, /*  3 */
	{ 0xb9e02b86, 0xdd7e3b0c, 0xd7a4825c }, /*  4 */
	{ 0xbac2fd7b, 0x6b749fb2, 0x3771e98f }, /*  5 */
	{ 0xd270f1a2, 0xd7a4825c, 0x86d8e4d2 }, /*  6 */
	{ 0x1b03397f, 0x68bce87a, 0xc9c8b782 }, /*  7 */
	{ 0xdd7e3b0c, 0x170076fa, 0x9ef68d35 }, /*  8 */
	{ 0x271d9844, 0x86d8e4d2, 0x00bcf5f6 }, /*  9 */
	{ 0x6b749fb2, 0xdd66cbbb, 0xf48642e9 }, /* 10 */
	{ 0xe6fc4e6a, 0xd813b325, 0x021ac5ef }, /* 11 */
	{ 0xd7a4825c, 0x9ef68d35, 0xbedc6ba1 }, /* 12 */
	{ 0x26f6a60a, 0x363bd6b3, 0x4be7fd90 }, /* 13 */
	{ 0x68bce87a, 0xaa7c7ad5, 0x889774e1 }, /* 14 */
	{ 0x3771e98f, 0xf48642e9, 0x465a4eee }, /* 15 */
	{ 0x170076fa, 0xa51b6135, 0x359674f7 }, /* 16 */
	{ 0xff0dba97, 0xcbbe4ee1, 0x95ffd7dc }, /* 17 */
	{ 0x86d8e4d2, 0xbedc6ba1, 0x7f47463d }, /* 18 */
	{ 0xb3af077a, 0x63d097e9, 0x4ce8bfe5 }, /* 19 */
	{ 0xdd66cbbb, 0x22c3799f, 0x23d5e7e5 }, /* 20 */
	{ 0xc9c8b782, 0x889774e1, 0x24e6fe8f }, /* 21 */
	{ 0xd813b325, 0x8515c07f, 0x195bc82d }, /* 22 */
	{ 0x6d9a4957, 0xc00df280, 0x4a9d4498 }, /* 23 */
	{ 0x9ef68d35, 0x359674f7, 0x005bb964 }, /* 24 */
	{ 0x2664fd8b, 0xf8448640, 0xf6e6d69e }, /* 25 */
	{ 0x363bd6b3, 0x5f0e0438, 0x87d07ae0 }, /* 26 */
	{ 0x00bcf5f6, 0x7f47463d, 0x480e7e4d }, /* 27 */
	{ 0xaa7c7ad5, 0x96a1f19b, 0x0e0126b2 }, /* 28 */
	{ 0x6d390dec, 0xb58ac6fe, 0xf5c40599 }, /* 29 */
	{ 0xf48642e9, 0x23d5e7e5, 0x6bce9345 }, /* 30 */
	{ 0x9a5ede41, 0xc776b648, 0xb4b09dc1 }, /* 31 */
	{ 0xa51b6135, 0x82f89c77, 0xb9d68d49 }, /* 32 */
};

/* crc32c_fold_consts[j] = { x^(8F+31), x^(8F-33) } mod P for F = 16 << j bytes. */
const uint32_t crc32c_fold_consts[5][2] = {
	{ 0xf20c0dfe, 0x493c7d27 }, /* F = 16 */
	{ 0x3da6d0cb, 0xba4fc28e }, /* F = 32 */
	{ 0x740eef02, 0x9e4addf8 }, /* F = 64 */
	{ 0x6992cea2, 0x0d3b6092 }, /* F = 128 */
	{ 0xdcb17aa4, 0xb9e02b86 }, /* F = 256 */
};

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return w;
}

TARGET static inline __m256i fold_k(int j)
{
	uint32_t h = crc32c_fold_consts[j][0], l = crc32c_fold_consts[j][1];

	return _mm256_setr_epi32((int)h, 0, (int)l, 0, (int)h, 0, (int)l, 0);
}

/* acc moved forward by F bytes (k = fold_k(F)), then data added. */
TARGET static inline __m256i fold(__m256i acc, __m256i k, __m256i data)
{
	__m256i hi = _mm256_clmulepi64_epi128(acc, k, 0x00);
	__m256i lo = _mm256_clmulepi64_epi128(acc, k, 0x11);

	return _mm256_xor_si256(_mm256_xor_si256(hi, lo), data);
}

TARGET static inline __m256i load256(const uint8_t *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/* Load 32 bytes at p + off and store them at d + off: the copy rides on the fold's load. */
TARGET static inline __m256i load_store256(uint8_t *d, const uint8_t *p, size_t off)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)(p + off));

	_mm256_storeu_si256((__m256i *)(d + off), v);
	return v;
}

/* The same, storing the vector to @d2 + off as well. */
TARGET static inline __m256i load_store2_256(uint8_t *d, uint8_t *d2, const uint8_t *p, size_t off)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)(p + off));

	_mm256_storeu_si256((__m256i *)(d + off), v);
	_mm256_storeu_si256((__m256i *)(d2 + off), v);
	return v;
}

/* Eight accumulators (256 consecutive bytes) down to a 32-bit register. */
TARGET static inline uint32_t reduce(__m256i x[8])
{
	__m256i k128 = fold_k(3), k64 = fold_k(2), k32 = fold_k(1);
	__m128i k16 = _mm_setr_epi32((int)crc32c_fold_consts[0][0], 0,
				     (int)crc32c_fold_consts[0][1], 0);
	__m128i lo, hi, v;
	uint64_t r;

	#pragma GCC unroll 8
	for (int i = 0; i < 4; i++)
		x[i + 4] = fold(x[i], k128, x[i + 4]);
	x[6] = fold(x[4], k64, x[6]);
	x[7] = fold(x[5], k64, x[7]);
	x[7] = fold(x[6], k32, x[7]);
	lo = _mm256_castsi256_si128(x[7]);
	hi = _mm256_extracti128_si256(x[7], 1);
	v = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(lo, k16, 0x00),
					_mm_clmulepi64_si128(lo, k16, 0x11)), hi);
	r = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(v));
	r = _mm_crc32_u64(r, (uint64_t)_mm_extract_epi64(v, 1));
	return (uint32_t)r;
}

TARGET static inline uint64_t clmul32(uint32_t a, uint32_t k)
{
	return (uint64_t)_mm_cvtsi128_si64(_mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a),
								 _mm_cvtsi32_si128((int)k), 0x00));
}

/* One block of iters * STEP bytes from @p, continuing from register @s. */
TARGET static uint32_t block(uint32_t s, const uint8_t *p, size_t iters)
{
	const size_t lane = STEP_LANE * iters, vlen = STEP_VEC * iters;
	const size_t oa = vlen, ob = vlen + lane, oc = vlen + 2 * lane;
	const uint32_t *k = crc32c_hybrid_shift[iters - 1];
	__m256i k256 = fold_k(4), x[8];
	uint64_t a = 0, b = 0, c = 0, t;

	#pragma GCC unroll 8
	for (int j = 0; j < 8; j++)
		x[j] = load256(p + 32 * j);
	x[0] = _mm256_xor_si256(x[0], _mm256_setr_epi32((int)s, 0, 0, 0, 0, 0, 0, 0));
	for (size_t i = 0; i < iters; i++) {
		if (i) {
			size_t o = STEP_VEC * i;

			#pragma GCC unroll 8
			for (int j = 0; j < 8; j++)
				x[j] = fold(x[j], k256, load256(p + o + 32 * j));
		}
		for (size_t o = STEP_LANE * i; o < STEP_LANE * (i + 1); o += 8) {
			a = _mm_crc32_u64(a, load64(p + oa + o));
			b = _mm_crc32_u64(b, load64(p + ob + o));
			c = _mm_crc32_u64(c, load64(p + oc + o));
		}
	}
	t = clmul32(reduce(x), k[2]) ^ clmul32((uint32_t)a, k[1]) ^ clmul32((uint32_t)b, k[0]);
	return (uint32_t)(c ^ _mm_crc32_u64(0, t));
}

static inline size_t iters_for(size_t n)
{
	size_t i = n / STEP;

	return i > MAX_ITERS ? MAX_ITERS : i;
}

TARGET static uint32_t crc_raw(uint32_t s, const uint8_t *p, size_t n)
{
	if (n >= MIN_LEN) {
		/* Align to 32 so no load in the loop splits a cache line. */
		size_t head = (32 - ((uintptr_t)p & 31)) & 31;

		s = crc32c_sse42_raw(s, p, head);
		p += head;
		n -= head;
		while (n >= MIN_LEN) {
			size_t it = iters_for(n);

			s = block(s, p, it);
			p += it * STEP;
			n -= it * STEP;
		}
	}
	return crc32c_sse42_raw(s, p, n);
}

/*
 * Copy and fold only, without scalar lanes: the stores come free with the vector loads,
 * while the lanes' extra loads and stores cost more than the lanes gain (measured on
 * Zen 3: ~24 GB/s this way against ~20 GB/s hybrid). @steps >= 1 blocks of 256 bytes.
 */
TARGET static uint32_t copy_fold(uint32_t s, uint8_t *d, const uint8_t *p, size_t steps)
{
	__m256i k256 = fold_k(4), x[8];

	#pragma GCC unroll 8
	for (int j = 0; j < 8; j++)
		x[j] = load_store256(d, p, 32 * j);
	x[0] = _mm256_xor_si256(x[0], _mm256_setr_epi32((int)s, 0, 0, 0, 0, 0, 0, 0));
	for (size_t i = 1; i < steps; i++)
		#pragma GCC unroll 8
		for (int j = 0; j < 8; j++)
			x[j] = fold(x[j], k256, load_store256(d, p, STEP_VEC * i + 32 * j));
	return reduce(x);
}

TARGET static uint32_t copy_raw(uint32_t s, uint8_t *d, const uint8_t *p, size_t n)
{
	size_t head = (32 - ((uintptr_t)p & 31)) & 31, steps;

	s = crc32c_sse42_copy_raw(s, d, p, head);
	p += head;
	d += head;
	n -= head;
	steps = n / STEP_VEC;
	s = copy_fold(s, d, p, steps);
	p += steps * STEP_VEC;
	d += steps * STEP_VEC;
	return crc32c_sse42_copy_raw(s, d, p, n - steps * STEP_VEC);
}

/*
 * copy_fold() with a second destination, below COPY2_SPLIT_LEN. Plain stores: non-temporal
 * ones to @d2 (a ring of 1 MiB beside a 1 MiB window ring, 4-256 KiB per call) measured
 * 12-20 GB/s against 22-23 with plain stores on Zen 3 (and need a closing sfence).
 */
TARGET static uint32_t copy2_fold(uint32_t s, uint8_t *d, uint8_t *d2, const uint8_t *p,
				  size_t steps)
{
	__m256i k256 = fold_k(4), x[8];

	#pragma GCC unroll 8
	for (int j = 0; j < 8; j++)
		x[j] = load_store2_256(d, d2, p, 32 * j);
	x[0] = _mm256_xor_si256(x[0], _mm256_setr_epi32((int)s, 0, 0, 0, 0, 0, 0, 0));
	for (size_t i = 1; i < steps; i++)
		#pragma GCC unroll 8
		for (int j = 0; j < 8; j++)
			x[j] = fold(x[j], k256, load_store2_256(d, d2, p, STEP_VEC * i + 32 * j));
	return reduce(x);
}

/* Aligned on @d2, unlike copy_raw(): two stores per load, and a sender's window and shadow
 * offsets are equal modulo 128, so neither store splits a line (the loads may; measured ~10 %
 * faster than aligning the source for a 16-mod-32 source). */
TARGET static uint32_t copy2_raw(uint32_t s, uint8_t *d, uint8_t *d2, const uint8_t *p,
				 size_t n)
{
	size_t head = (32 - ((uintptr_t)d2 & 31)) & 31, steps;

	s = crc32c_sse42_copy2_raw(s, d, d2, p, head);
	p += head;
	d += head;
	d2 += head;
	n -= head;
	steps = n / STEP_VEC;
	s = copy2_fold(s, d, d2, p, steps);
	p += steps * STEP_VEC;
	d += steps * STEP_VEC;
	d2 += steps * STEP_VEC;
	return crc32c_sse42_copy2_raw(s, d, d2, p, n - steps * STEP_VEC);
}

/*
 * From COPY2_SPLIT_LEN on, two passes (crc32c_impl_copy2()), as on the AVX-512 path: the
 * checksumming copy to @dst2, then memcpy() from @dst2 to @dst. The fused pass writes each
 * 64-byte line of @dst in two 32-byte halves while the peer's core reads the lines before
 * them. Zen 5 on far cores (NTBSOCK_CRC=avx2, `ntbsock perf`): 64 KiB 13-15 GB/s against 3-4
 * fused, 8 KiB 9.2-9.5 against 2.9, 4 KiB 5.7-5.8 against 4.0-4.2; 1-2 KiB better fused. Not
 * measured on an AVX2-only CPU (the fused pass measured 22-23 GB/s against ~15 on one Zen 3
 * core, with no peer reading @dst).
 */
#define COPY2_SPLIT_LEN 4096u

/* Short buffers go straight to the SSE4.2 path, without entering AVX code at all. */
static uint32_t crc32c_hybrid(uint32_t crc, const void *buf, size_t len)
{
	if (len < MIN_LEN)
		return ~crc32c_sse42_raw(~crc, buf, len);
	return ~crc_raw(~crc, buf, len);
}

static uint32_t crc32c_copy_hybrid(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (len < MIN_COPY_LEN)
		return ~crc32c_sse42_copy_raw(~crc, dst, src, len);
	return ~copy_raw(~crc, dst, src, len);
}

static uint32_t crc32c_copy2_hybrid(uint32_t crc, void *dst, void *dst2, const void *src,
				    size_t len)
{
	if (len < MIN_COPY_LEN)
		return ~crc32c_sse42_copy2_raw(~crc, dst, dst2, src, len);
	return ~copy2_raw(~crc, dst, dst2, src, len); /* (below COPY2_SPLIT_LEN: crc32c.c) */
}

static int hybrid_supported(void)
{
	unsigned need = CRC32C_X86_SSE42 | CRC32C_X86_PCLMUL | CRC32C_X86_AVX2 |
			CRC32C_X86_VPCLMULQDQ;

	return (crc32c_x86_features() & need) == need;
}

const struct crc32c_impl crc32c_impl_hybrid = {
	.name = "vpclmul-avx2+sse4.2",
	.supported = hybrid_supported,
	.crc = crc32c_hybrid,
	.copy = crc32c_copy_hybrid,
	.copy2 = crc32c_copy2_hybrid,
	.copy2_split = COPY2_SPLIT_LEN,
	.shift = crc32c_shift_sse42,
};

#endif
