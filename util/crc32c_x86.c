/* SPDX-License-Identifier: MIT */
/* CRC32C for x86-64 with SSE4.2 crc32 in three interleaved chains, joined by PCLMULQDQ. */
#if defined(__x86_64__) && defined(__GNUC__)

#include <cpuid.h>
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
 *
 * Blocks of 3 x 4096 bytes, then of 3 x 512, then one block of three lanes as long as
 * the rest allows (n / 24 words each), then at most 23 bytes one chain. The hybrid path
 * (crc32c_vpclmul.c) uses these functions for its head and tail.
 */
#define TARGET __attribute__((target("sse4.2,pclmul")))

const struct crc32c_lane_shift crc32c_lane_shifts[CRC32C_LANE_SIZES] = {
	{ 4096, 0x82f89c77, 0x54a86326 },
	{ 512, 0xdd7e3b0c, 0x170076fa },
};

/* crc32c_short_shifts[i] = { x^(64i - 33), x^(128i - 33) } mod P: lanes of 8*i bytes. */
const uint32_t crc32c_short_shifts[64][2] = {
	{ 0, 0 }, /* unused */
	{ 0x00000001, 0x493c7d27 }, /*   8 */
	{ 0x493c7d27, 0xba4fc28e }, /*  16 */
	{ 0xf20c0dfe, 0xddc0152b }, /*  24 */
	{ 0xba4fc28e, 0x9e4addf8 }, /*  32 */
	{ 0x3da6d0cb, 0x39d3b296 }, /*  40 */
	{ 0xddc0152b, 0x0715ce53 }, /*  48 */
	{ 0x1c291d04, 0x47db8317 }, /*  56 */
	{ 0x9e4addf8, 0x0d3b6092 }, /*  64 */
	{ 0x740eef02, 0xc96cfdc0 }, /*  72 */
	{ 0x39d3b296, 0x878a92a7 }, /*  80 */
	{ 0x083a6eec, 0xdaece73e }, /*  88 */
	{ 0x0715ce53, 0xab7aff2a }, /*  96 */
	{ 0xc49f4f67, 0x2162d385 }, /* 104 */
	{ 0x47db8317, 0x83348832 }, /* 112 */
	{ 0x2ad91c30, 0x299847d5 }, /* 120 */
	{ 0x0d3b6092, 0xb9e02b86 }, /* 128 */
	{ 0x6992cea2, 0x18b33a4e }, /* 136 */
	{ 0xc96cfdc0, 0xb6dd949b }, /* 144 */
	{ 0x7e908048, 0x78d9ccb7 }, /* 152 */
	{ 0x878a92a7, 0xbac2fd7b }, /* 160 */
	{ 0x1b3d8f29, 0xa60ce07b }, /* 168 */
	{ 0xdaece73e, 0xce7f39f4 }, /* 176 */
	{ 0xf1d0f55e, 0x61d82e56 }, /* 184 */
	{ 0xab7aff2a, 0xd270f1a2 }, /* 192 */
	{ 0xa87ab8a8, 0xc619809d }, /* 200 */
	{ 0x2162d385, 0x2b3cac5d }, /* 208 */
	{ 0x8462d800, 0x65863b64 }, /* 216 */
	{ 0x83348832, 0x1b03397f }, /* 224 */
	{ 0x71d111a8, 0xebb883bd }, /* 232 */
	{ 0x299847d5, 0xb3e32c28 }, /* 240 */
	{ 0xffd852c6, 0x064f7f26 }, /* 248 */
	{ 0xb9e02b86, 0xdd7e3b0c }, /* 256 */
	{ 0xdcb17aa4, 0xf285651c }, /* 264 */
	{ 0x18b33a4e, 0x10746f3c }, /* 272 */
	{ 0xf37c5aee, 0xc7a68855 }, /* 280 */
	{ 0xb6dd949b, 0x271d9844 }, /* 288 */
	{ 0x6051d5a2, 0x8e766a0c }, /* 296 */
	{ 0x78d9ccb7, 0x93a5f730 }, /* 304 */
	{ 0x18b0d4ff, 0x6cb08e5c }, /* 312 */
	{ 0xbac2fd7b, 0x6b749fb2 }, /* 320 */
	{ 0x21f3d99c, 0x1393e203 }, /* 328 */
	{ 0xa60ce07b, 0xcec3662e }, /* 336 */
	{ 0x8f158014, 0x96c515bb }, /* 344 */
	{ 0xce7f39f4, 0xe6fc4e6a }, /* 352 */
	{ 0xa00457f7, 0x8227bb8a }, /* 360 */
	{ 0x61d82e56, 0xb0cd4768 }, /* 368 */
	{ 0x8d6d2c43, 0x39c7ff35 }, /* 376 */
	{ 0xd270f1a2, 0xd7a4825c }, /* 384 */
	{ 0x00ac29cf, 0x0ab3844b }, /* 392 */
	{ 0xc619809d, 0x0167d312 }, /* 400 */
	{ 0xe9adf796, 0xf6076544 }, /* 408 */
	{ 0x2b3cac5d, 0x26f6a60a }, /* 416 */
	{ 0x96638b34, 0xa741c1bf }, /* 424 */
	{ 0x65863b64, 0x98d8d9cb }, /* 432 */
	{ 0xe0e9f351, 0x49c3cc9c }, /* 440 */
	{ 0x1b03397f, 0x68bce87a }, /* 448 */
	{ 0x9af01f2d, 0x57a3d037 }, /* 456 */
	{ 0xebb883bd, 0x6956fc3b }, /* 464 */
	{ 0x2cff42cf, 0x42d98888 }, /* 472 */
	{ 0xb3e32c28, 0x3771e98f }, /* 480 */
	{ 0x88f25a3a, 0xb42ae3d9 }, /* 488 */
	{ 0x064f7f26, 0x2178513a }, /* 496 */
	{ 0x4e36f0b0, 0xe0ac139e }, /* 504 */
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

/* k1 = x^(8L-33), k2 = x^(16L-33) mod P for lanes of L bytes. */
TARGET static inline uint32_t lanes_join(uint64_t a, uint64_t b, uint64_t c, uint32_t k1,
					 uint32_t k2)
{
	__m128i pa = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a),
					  _mm_cvtsi32_si128((int)k2), 0x00);
	__m128i pb = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)b),
					  _mm_cvtsi32_si128((int)k1), 0x00);
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
	return lanes_join(a, b, c, k->k1, k->k2);
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
	return lanes_join(a, b, c, k->k1, k->k2);
}

/*
 * Below 3 * 512 bytes: three lanes of @words 8-byte words each (1..63). Worth it from
 * four words a lane on: the join costs about as much as 8 serial words.
 */
#define SHORT_MIN_WORDS 4

TARGET static inline uint32_t crc_3way_short(uint32_t s, const uint8_t *p, size_t words)
{
	const size_t L = 8 * words;
	uint64_t a = s, b = 0, c = 0;

	for (size_t i = 0; i < L; i += 8) {
		a = _mm_crc32_u64(a, load64(p + i));
		b = _mm_crc32_u64(b, load64(p + L + i));
		c = _mm_crc32_u64(c, load64(p + 2 * L + i));
	}
	return lanes_join(a, b, c, crc32c_short_shifts[words][0], crc32c_short_shifts[words][1]);
}

TARGET static inline uint32_t copy_3way_short(uint32_t s, uint8_t *d, const uint8_t *p,
					      size_t words)
{
	const size_t L = 8 * words;
	uint64_t a = s, b = 0, c = 0;

	for (size_t i = 0; i < L; i += 8) {
		uint64_t wa = load64(p + i), wb = load64(p + L + i), wc = load64(p + 2 * L + i);

		store64(d + i, wa);
		store64(d + L + i, wb);
		store64(d + 2 * L + i, wc);
		a = _mm_crc32_u64(a, wa);
		b = _mm_crc32_u64(b, wb);
		c = _mm_crc32_u64(c, wc);
	}
	return lanes_join(a, b, c, crc32c_short_shifts[words][0], crc32c_short_shifts[words][1]);
}

/* crc32c_x8n33_table[k] = x^(8 * 2^k - 33) mod P for k >= 3 (below, unused). */
const uint32_t crc32c_x8n33_table[64] = {
	0x00000000, 0x00000000, 0x00000000, 0x00000001, 0x493c7d27, 0xba4fc28e,
	0x9e4addf8, 0x0d3b6092, 0xb9e02b86, 0xdd7e3b0c, 0x170076fa, 0xa51b6135,
	0x82f89c77, 0x54a86326, 0x1dc403cc, 0x5ae703ab, 0xc5013a36, 0xac2ac6dd,
	0x9b4615a9, 0x688d1c61, 0xf6af14e6, 0xb6ffe386, 0xb717425b, 0x478b0d30,
	0x54cc62e5, 0x7b2102ee, 0x8a99adef, 0xa7568c8f, 0xd610d67e, 0x6b086b3f,
	0xd94f3c0b, 0xbf818109, 0x780d5a4d, 0x05ec76f1, 0x00000001, 0x493c7d27,
	0xba4fc28e, 0x9e4addf8, 0x0d3b6092, 0xb9e02b86, 0xdd7e3b0c, 0x170076fa,
	0xa51b6135, 0x82f89c77, 0x54a86326, 0x1dc403cc, 0x5ae703ab, 0xc5013a36,
	0xac2ac6dd, 0x9b4615a9, 0x688d1c61, 0xf6af14e6, 0xb6ffe386, 0xb717425b,
	0x478b0d30, 0x54cc62e5, 0x7b2102ee, 0x8a99adef, 0xa7568c8f, 0xd610d67e,
	0x6b086b3f, 0xd94f3c0b, 0xbf818109, 0x780d5a4d,
};

/*
 * crc * x^(8 * len) mod P, for crc32c_combine(): the low three bits of @len with crc32
 * of zero bytes (which multiplies the register by x^8, x^16, x^32), each higher set bit
 * with one clmul and one crc32q, as in lanes_join(). About 7 cycles per set bit.
 */
TARGET uint32_t crc32c_shift_sse42(uint32_t crc, size_t len)
{
	if (len & 1)
		crc = _mm_crc32_u8(crc, 0);
	if (len & 2)
		crc = _mm_crc32_u16(crc, 0);
	if (len & 4)
		crc = _mm_crc32_u32(crc, 0);
	len >>= 3;
	for (unsigned k = 3; len; k++, len >>= 1) {
		if (len & 1) {
			__m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)crc),
							 _mm_cvtsi32_si128((int)crc32c_x8n33_table[k]),
							 0x00);

			crc = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(p));
		}
	}
	return crc;
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
	if (n >= 3 * 8 * SHORT_MIN_WORDS) {
		/* One last 3-lane block as large as possible; at most 23 bytes stay serial. */
		size_t words = n / 24;

		s = crc_3way_short(s, p, words);
		p += 24 * words;
		n -= 24 * words;
	}
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
	if (n >= 3 * 8 * SHORT_MIN_WORDS) {
		size_t words = n / 24;

		s = copy_3way_short(s, d, p, words);
		p += 24 * words;
		d += 24 * words;
		n -= 24 * words;
	}
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

/* Through @d2 (local memory), then to @d: heads and tails of the vector paths' crc32c_copy2(). */
uint32_t crc32c_sse42_copy2_raw(uint32_t s, uint8_t *d, uint8_t *d2, const uint8_t *p, size_t n)
{
	s = crc32c_sse42_copy_raw(s, d2, p, n);
	memcpy(d, d2, n);
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

/*
 * CPU features from CPUID and XGETBV directly: no shared state (unlike libgcc's
 * __builtin_cpu_supports, whose lazily filled model struct is written without locks),
 * so any thread may call this at any time.
 */
unsigned crc32c_x86_features(void)
{
	unsigned eax, ebx, ecx, edx, f = 0;

	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
		return 0;
	if (ecx & bit_SSE4_2)
		f |= CRC32C_X86_SSE42;
	if (ecx & bit_PCLMUL)
		f |= CRC32C_X86_PCLMUL;
	/* AVX registers are usable only if the OS saves XMM and YMM state (XCR0 bits 1, 2). */
	if ((ecx & bit_OSXSAVE) && (ecx & bit_AVX)) {
		unsigned xcr0_lo, xcr0_hi;

		__asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
		if ((xcr0_lo & 6) == 6 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
			if (ebx & bit_AVX2)
				f |= CRC32C_X86_AVX2;
			if (ecx & bit_VPCLMULQDQ)
				f |= CRC32C_X86_VPCLMULQDQ;
			/* ZMM registers: XCR0 bits 5-7 (opmask, upper halves, ZMM16-31) too. */
			if ((ebx & bit_AVX512F) && (xcr0_lo & 0xe6) == 0xe6)
				f |= CRC32C_X86_AVX512;
		}
	}
	return f;
}

static int sse42_supported(void)
{
	unsigned need = CRC32C_X86_SSE42 | CRC32C_X86_PCLMUL;

	return (crc32c_x86_features() & need) == need;
}

const struct crc32c_impl crc32c_impl_sse42 = {
	.name = "sse4.2-3way",
	.supported = sse42_supported,
	.crc = crc32c_sse42,
	.copy = crc32c_copy_sse42,
	.shift = crc32c_shift_sse42,
};

#endif
