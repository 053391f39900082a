/* SPDX-License-Identifier: MIT */
/* CRC32C (Castagnoli, iSCSI polynomial 0x1EDC6F41) with runtime CPU dispatch. */
#ifndef NTBSOCK_UTIL_CRC32C_H
#define NTBSOCK_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * The entry points are named for what the caller needs; each chooses its path by length
 * inside util/: up to CRC32C_INLINE_MAX bytes (headers, checked words, inline messages,
 * short data messages) one serial chain of crc32 instructions compiled into the caller
 * (util/crc32c_inline.h), longer buffers the implementation selected once per process from
 * CPUID, or named by NTBSOCK_CRC (crc32c_impl_name(), crc32c_pick()). A constant length
 * decides at compile time. Every path gives the same result for any length and alignment.
 */

/*
 * crc32c() - checksum @len bytes at @buf, continuing from @crc.
 * Start with crc = 0. The initial and final inversion are done inside, so
 * crc32c(crc32c(0, a, la), b, lb) == crc32c(0, a||b, la + lb), and
 * crc32c(0, "123456789", 9) == 0xE3069283. Any alignment, any length (0 returns @crc).
 * Thread-safe.
 */
static inline uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * crc32c_copy() - copy @len bytes from @src to @dst and return the checksum of them,
 * continuing from @crc, in one pass over the data. Same result as
 * memcpy(dst, src, len); crc32c(crc, src, len). @dst and @src must not overlap.
 * The bytes checksummed are those read from @src (never re-read from @dst, which may be
 * a window that is slow to read). A receiver's verified copy out of a window is this, with
 * the header's fields added by crc32c_word().
 */
static inline uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/*
 * crc32c_copy2() - copy @len bytes from @src to both @dst and @dst2 and return their
 * checksum, continuing from @crc, reading @src once. Same result as
 * crc32c_copy(crc, dst2, src, len); memcpy(dst, dst2, len). Both copies hold exactly the
 * bytes checksummed, even if @src changes meanwhile. No two buffers may overlap. @dst is
 * never read (it may be a window). For a sender that keeps a retransmission copy. How it
 * copies depends on the length and the CPU: short buffers one load and two stores per word;
 * on the AVX2 and AVX-512 paths one pass storing each vector twice below 4 KiB, and from
 * 4 KiB on the checksumming copy to @dst2 and then memcpy() from @dst2 to @dst (Zen 5, the
 * peer's core reading @dst: AVX-512 34-36 GB/s against 25 for one pass; AVX2 at 64 KiB
 * 13-15 GB/s against 3-4, whose 32-byte stores write each of @dst's lines in two halves).
 */
static inline uint32_t crc32c_copy2(uint32_t crc, void *dst, void *dst2, const void *src,
				    size_t len);

/*
 * crc32c_word() - crc32c() of the low @n (1..8) bytes of @v in little-endian order, from a
 * register: for header fields just computed (no store-forwarding stall when the bytes were
 * just stored as separate fields).
 */
static inline uint32_t crc32c_word(uint32_t crc, uint64_t v, unsigned n);

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
 * crc32c_copy2_split_len() - the length from which the selected implementation's own
 * crc32c_copy2() switches to two passes (the checksumming copy to @dst2, then a memcpy() of
 * the whole block from there to @dst, which writes whole lines of @dst without reading them
 * first); SIZE_MAX when it has no such switch. For a sender that prefetches the lines of its
 * next write: worth it only below the switch (transport/tp_tx.c). The copy-then-memcpy() of the
 * implementations without a @copy2 of their own is not counted: none was measured.
 */
size_t crc32c_copy2_split_len(void);

/* The selected implementation for any length: what the entry points above call for long
 * buffers (and on a CPU without SSE4.2 for all). Callers use the entry points above. */
uint32_t crc32c_long(uint32_t crc, const void *buf, size_t len);
uint32_t crc32c_copy_long(uint32_t crc, void *dst, const void *src, size_t len);
uint32_t crc32c_copy2_long(uint32_t crc, void *dst, void *dst2, const void *src, size_t len);

#include "util/crc32c_inline.h"

static inline uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (crc32c_inl_use(len))
		return ~crc32c_inl_raw(~crc, NULL, NULL, buf, len);
	return crc32c_long(crc, buf, len);
}

static inline uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (crc32c_inl_use(len))
		return ~crc32c_inl_raw(~crc, dst, NULL, src, len);
	return crc32c_copy_long(crc, dst, src, len);
}

static inline uint32_t crc32c_copy2(uint32_t crc, void *dst, void *dst2, const void *src,
				    size_t len)
{
	if (crc32c_inl_use(len))
		return ~crc32c_inl_raw(~crc, dst, dst2, src, len); /* one load, two stores */
	return crc32c_copy2_long(crc, dst, dst2, src, len);
}

static inline uint32_t crc32c_word(uint32_t crc, uint64_t v, unsigned n)
{
	unsigned char b[8];

	if (crc32c_inl_use(n))
		return ~crc32c_inl_raw_word(~crc, v, n);
	for (unsigned i = 0; i < n; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return crc32c_long(crc, b, n);
}

#endif
