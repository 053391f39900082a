/* SPDX-License-Identifier: MIT */
/* CRC32C (Castagnoli, iSCSI polynomial 0x1EDC6F41) with runtime CPU dispatch. */
#ifndef NTBSOCK_UTIL_CRC32C_H
#define NTBSOCK_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * crc32c() - checksum @len bytes at @buf, continuing from @crc.
 * Start with crc = 0. The initial and final inversion are done inside, so
 * crc32c(crc32c(0, a, la), b, lb) == crc32c(0, a||b, la + lb), and
 * crc32c(0, "123456789", 9) == 0xE3069283. Any alignment, any length (0 returns @crc).
 * Thread-safe; the implementation is chosen once per process from CPUID.
 */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * crc32c_copy() - copy @len bytes from @src to @dst and return the checksum of them,
 * continuing from @crc, in one pass over the data. Same result as
 * memcpy(dst, src, len); crc32c(crc, src, len). @dst and @src must not overlap.
 * The bytes checksummed are those read from @src (never re-read from @dst, which may be
 * a window that is slow to read).
 */
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/*
 * crc32c_copy2() - copy @len bytes from @src to both @dst and @dst2 and return their
 * checksum, continuing from @crc, reading @src once. Same result as
 * crc32c_copy(crc, dst2, src, len); memcpy(dst, dst2, len). Both copies hold exactly the
 * bytes checksummed, even if @src changes meanwhile. No two buffers may overlap. @dst is
 * never read (it may be a window). For a sender that keeps a retransmission copy. How it
 * copies depends on the CPU: one pass storing each vector twice on the AVX2 path (~22 GB/s
 * against ~15 for crc32c_copy() + memcpy() on Zen 3 at 4-256 KiB into 1 MiB rings); on the
 * AVX-512 path from 8 KiB on, the checksumming copy to @dst2 and then memcpy() from @dst2 to
 * @dst (Zen 5: 34-36 GB/s against 25 for one pass, with the peer's core reading @dst).
 */
uint32_t crc32c_copy2(uint32_t crc, void *dst, void *dst2, const void *src, size_t len);

/*
 * crc32c_combine() - given crc1 = crc32c(0, A) and crc2 = crc32c(0, B) with |B| = @len2,
 * return crc32c(0, A||B). One carry-less multiply per set bit of @len2: 13-60 ns with
 * PCLMULQDQ, about ten times that on the portable path.
 */
uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2);

/*
 * crc32c_impl_name() - the implementation in use: "vpclmul-avx512+sse4.2" (AVX-512
 * VPCLMULQDQ folding), "vpclmul-avx2+sse4.2" (AVX2 and VPCLMULQDQ folding beside crc32
 * chains), "sse4.2-3way" or "portable" (slicing-by-8). 64 KiB buffers, L2-resident
 * (bench/crc_bench.c, `make crc-bench`): on Zen 5 avx512 crc32c ~68 GB/s and crc32c_copy
 * ~67 GB/s, avx2 ~56 and ~34; on Zen 3 avx2 ~35 and ~25. 256 B: 15-20 GB/s.
 */
const char *crc32c_impl_name(void);

/*
 * crc32c_small() / crc32c_small_copy() - crc32c() / crc32c_copy() for short buffers (headers,
 * checked words, inline messages: up to a few hundred bytes), inlined into the caller: one
 * serial chain of crc32 instructions, no call through the dispatch table. Same results as
 * crc32c() / crc32c_copy() for any length; on a CPU without SSE4.2 (or not x86-64) they call
 * those. Each translation unit caches the CPUID answer in its own flag (benign race: every
 * writer stores the same value). crc32c_small_val(crc, v, n) is crc32c() of the low N (1..8)
 * bytes of V in little-endian order, from a register (no store-forwarding stall when the bytes
 * were just stored as separate fields).
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <string.h>

static int crc32c_small_hw_flag; /* 0 unknown, 1 SSE4.2, 2 none (per translation unit) */

static __attribute__((unused, noinline, cold)) int crc32c_small_probe(void)
{
	unsigned a, b, c, d;
	int f = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2) ? 1 : 2;

	__atomic_store_n(&crc32c_small_hw_flag, f, __ATOMIC_RELAXED);
	return f;
}

static inline int crc32c_small_hw(void)
{
	int f = __atomic_load_n(&crc32c_small_hw_flag, __ATOMIC_RELAXED);

	return (__builtin_expect(f != 0, 1) ? f : crc32c_small_probe()) == 1;
}

/* Raw register update (no inversions) over N bytes at P; copies them to D when D != NULL, and
 * to D2 as well when D2 != NULL (D2 only with D; a constant NULL costs nothing once inlined). */
static inline uint32_t crc32c_small_raw2(uint32_t reg, void *d, void *d2, const void *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	unsigned char *o = (unsigned char *)d, *o2 = (unsigned char *)d2;
	uint64_t r = reg;

	/* 16 bytes a round, the copy decided once (fewer loop instructions per byte: these run
	 * on every inline message and header) */
	if (o) {
		for (; n >= 16; n -= 16, s += 16, o += 16) {
			uint64_t v0, v1;

			memcpy(&v0, s, 8);
			memcpy(&v1, s + 8, 8);
			memcpy(o, &v0, 8);
			memcpy(o + 8, &v1, 8);
			if (o2) {
				memcpy(o2, &v0, 8);
				memcpy(o2 + 8, &v1, 8);
				o2 += 16;
			}
			__asm__("crc32q %1, %0" : "+r"(r) : "rm"(v0));
			__asm__("crc32q %1, %0" : "+r"(r) : "rm"(v1));
		}
	} else {
		for (; n >= 16; n -= 16, s += 16) {
			uint64_t v0, v1;

			memcpy(&v0, s, 8);
			memcpy(&v1, s + 8, 8);
			__asm__("crc32q %1, %0" : "+r"(r) : "rm"(v0));
			__asm__("crc32q %1, %0" : "+r"(r) : "rm"(v1));
		}
	}
	if (n >= 8) {
		uint64_t v;

		memcpy(&v, s, 8);
		if (o) {
			memcpy(o, &v, 8);
			o += 8;
		}
		if (o2) {
			memcpy(o2, &v, 8);
			o2 += 8;
		}
		__asm__("crc32q %1, %0" : "+r"(r) : "rm"(v));
		s += 8;
		n -= 8;
	}
	if (n >= 4) {
		uint32_t v;
		uint32_t r32 = (uint32_t)r;

		memcpy(&v, s, 4);
		if (o) {
			memcpy(o, &v, 4);
			o += 4;
		}
		if (o2) {
			memcpy(o2, &v, 4);
			o2 += 4;
		}
		__asm__("crc32l %1, %0" : "+r"(r32) : "rm"(v));
		r = r32;
		s += 4;
		n -= 4;
	}
	for (; n; n--, s++) {
		uint8_t v = *s;
		uint32_t r32 = (uint32_t)r;

		if (o)
			*o++ = v;
		if (o2)
			*o2++ = v;
		__asm__("crc32b %1, %0" : "+r"(r32) : "rm"(v));
		r = r32;
	}
	return (uint32_t)r;
}

static inline uint32_t crc32c_small_raw(uint32_t reg, void *d, const void *p, size_t n)
{
	return crc32c_small_raw2(reg, d, NULL, p, n);
}

/* Raw register update over the low N (1..8) bytes of V, least significant byte first. */
static inline uint32_t crc32c_small_raw_val(uint32_t reg, uint64_t v, unsigned n)
{
	uint64_t r = reg;

	if (n == 8) {
		__asm__("crc32q %1, %0" : "+r"(r) : "r"(v));
		return (uint32_t)r;
	}
	uint32_t r32 = reg;

	if (n >= 4) {
		__asm__("crc32l %1, %0" : "+r"(r32) : "r"((uint32_t)v));
		v >>= 32;
		n -= 4;
	}
	if (n >= 2) {
		__asm__("crc32w %1, %0" : "+r"(r32) : "r"((uint16_t)v));
		v >>= 16;
		n -= 2;
	}
	if (n)
		__asm__("crc32b %1, %0" : "+r"(r32) : "r"((uint8_t)v));
	return r32;
}

static inline uint32_t crc32c_small(uint32_t crc, const void *buf, size_t len)
{
	if (__builtin_expect(!crc32c_small_hw(), 0))
		return crc32c(crc, buf, len);
	return ~crc32c_small_raw(~crc, NULL, buf, len);
}

static inline uint32_t crc32c_small_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (__builtin_expect(!crc32c_small_hw(), 0))
		return crc32c_copy(crc, dst, src, len);
	return ~crc32c_small_raw(~crc, dst, src, len);
}

/* crc32c_copy2() for short buffers: one load, two stores per word (a sender's shadow and
 * window written from the same registers). */
static inline uint32_t crc32c_small_copy2(uint32_t crc, void *dst, void *dst2, const void *src,
					  size_t len)
{
	if (__builtin_expect(!crc32c_small_hw(), 0))
		return crc32c_copy2(crc, dst, dst2, src, len);
	return ~crc32c_small_raw2(~crc, dst, dst2, src, len);
}

static inline uint32_t crc32c_small_val(uint32_t crc, uint64_t v, unsigned n)
{
	if (__builtin_expect(!crc32c_small_hw(), 0)) {
		unsigned char b[8];

		for (unsigned i = 0; i < n; i++)
			b[i] = (unsigned char)(v >> (8 * i));
		return crc32c(crc, b, n);
	}
	return ~crc32c_small_raw_val(~crc, v, n);
}
#else
static inline uint32_t crc32c_small(uint32_t crc, const void *buf, size_t len)
{
	return crc32c(crc, buf, len);
}

static inline uint32_t crc32c_small_copy2(uint32_t crc, void *dst, void *dst2, const void *src,
					  size_t len)
{
	return crc32c_copy2(crc, dst, dst2, src, len);
}

static inline uint32_t crc32c_small_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	return crc32c_copy(crc, dst, src, len);
}

static inline uint32_t crc32c_small_val(uint32_t crc, uint64_t v, unsigned n)
{
	unsigned char b[8];

	for (unsigned i = 0; i < n; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return crc32c(crc, b, n);
}
#endif

#endif
