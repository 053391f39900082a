/* SPDX-License-Identifier: MIT */
/*
 * The inline half of util/crc32c.h: one serial chain of SSE4.2 crc32 instructions for short
 * buffers (headers, checked words, inline messages, short data messages), compiled into the
 * caller with no call through the dispatch table. Only util/crc32c.h includes this file;
 * callers use the entry points declared there, which choose between this and the selected
 * implementation by length.
 */
#ifndef NTBSOCK_UTIL_CRC32C_INLINE_H
#define NTBSOCK_UTIL_CRC32C_INLINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Up to this many bytes the inline chain beats the selected implementation (whose alignment
 * prologue, lane set-up and combination cost more than they save). */
#define CRC32C_INLINE_MAX 256u

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* 0 unknown, 1 SSE4.2, 2 none; one per translation unit. Relaxed: every thread that probes
 * stores the same value, and nothing else is published with it. */
static _Atomic int crc32c_inl_flag;

static __attribute__((unused, noinline, cold)) int crc32c_inl_probe(void)
{
	unsigned a, b, c, d;
	int f = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2) ? 1 : 2;

	/* relaxed: an idempotent cache of CPUID (see crc32c_inl_flag) */
	atomic_store_explicit(&crc32c_inl_flag, f, memory_order_relaxed);
	return f;
}

/* Can this CPU run the inline chain? */
static inline int crc32c_inl_hw(void)
{
	/* relaxed: an idempotent cache of CPUID (see crc32c_inl_flag) */
	int f = atomic_load_explicit(&crc32c_inl_flag, memory_order_relaxed);

	return (__builtin_expect(f != 0, 1) ? f : crc32c_inl_probe()) == 1;
}

/* Raw register update (no inversions) over N bytes at P; copies them to D when D != NULL, and
 * to D2 as well when D2 != NULL (D2 only with D; a constant NULL costs nothing once inlined).
 * One load and one or two stores per word. */
static inline uint32_t crc32c_inl_raw(uint32_t reg, void *d, void *d2, const void *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	unsigned char *o = (unsigned char *)d, *o2 = (unsigned char *)d2;
	uint64_t r = reg;

	/* 16 bytes a round, the copies decided once (fewer loop instructions per byte: these run
	 * on every inline message and header) */
	if (o2) {
		for (; n >= 16; n -= 16, s += 16, o += 16, o2 += 16) {
			uint64_t v0, v1;

			memcpy(&v0, s, 8);
			memcpy(&v1, s + 8, 8);
			memcpy(o, &v0, 8);
			memcpy(o + 8, &v1, 8);
			memcpy(o2, &v0, 8);
			memcpy(o2 + 8, &v1, 8);
			__asm__("crc32q %1, %0" : "+r"(r) : "rm"(v0));
			__asm__("crc32q %1, %0" : "+r"(r) : "rm"(v1));
		}
	} else if (o) {
		for (; n >= 16; n -= 16, s += 16, o += 16) {
			uint64_t v0, v1;

			memcpy(&v0, s, 8);
			memcpy(&v1, s + 8, 8);
			memcpy(o, &v0, 8);
			memcpy(o + 8, &v1, 8);
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

/* Raw register update over the low N (1..8) bytes of V, least significant byte first. */
static inline uint32_t crc32c_inl_raw_word(uint32_t reg, uint64_t v, unsigned n)
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

/* Take the inline chain for LEN bytes? (A constant LEN decides at compile time.) */
static inline int crc32c_inl_use(size_t len)
{
	return len <= CRC32C_INLINE_MAX && crc32c_inl_hw();
}
#else
static inline int crc32c_inl_use(size_t len)
{
	(void)len;
	return 0;
}

static inline uint32_t crc32c_inl_raw(uint32_t reg, void *d, void *d2, const void *p, size_t n)
{
	(void)d;
	(void)d2;
	(void)p;
	(void)n;
	return reg; /* never called: crc32c_inl_use() is 0 */
}

static inline uint32_t crc32c_inl_raw_word(uint32_t reg, uint64_t v, unsigned n)
{
	(void)v;
	(void)n;
	return reg; /* never called: crc32c_inl_use() is 0 */
}
#endif

#endif
