/* SPDX-License-Identifier: MIT */
/* Internals of CRC32C shared by its implementations and its unit test. */
#ifndef NTBSOCK_UTIL_CRC32C_INT_H
#define NTBSOCK_UTIL_CRC32C_INT_H

#include <stddef.h>
#include <stdint.h>

/* The Castagnoli polynomial 0x1EDC6F41, bit-reflected. */
#define CRC32C_POLY_REFLECTED 0x82F63B78u

/*
 * One implementation. @crc, @copy and @copy2 have the public semantics of crc32c(),
 * crc32c_copy() and crc32c_copy2() (inversion inside); @shift those of crc32c_shift().
 * @copy2 may be NULL: crc32c_copy2() then copies to @dst2 with @copy and from there to
 * @dst. @copy2_split: from this length on, crc32c_copy2() does the same instead of calling
 * @copy2 (two passes: @dst written by memcpy(), whole lines without reading them); 0 where it
 * never does (crc32c_impl_copy2()). @supported() says whether this CPU can run it; it must be
 * cheap, thread-safe and free of side effects.
 */
struct crc32c_impl {
	const char *name;
	int (*supported)(void);
	uint32_t (*crc)(uint32_t crc, const void *buf, size_t len);
	uint32_t (*copy)(uint32_t crc, void *dst, const void *src, size_t len);
	uint32_t (*shift)(uint32_t crc, size_t len);
	uint32_t (*copy2)(uint32_t crc, void *dst, void *dst2, const void *src, size_t len);
	size_t copy2_split;
};

/* Every implementation compiled in, best first, NULL-terminated; the last is portable. */
extern const struct crc32c_impl *const crc32c_impls[];

extern const struct crc32c_impl crc32c_impl_portable;

/* crc32c_copy2() on IMPL: its @copy2 below its @copy2_split, else @copy to @dst2 and memcpy()
 * from there to @dst. */
uint32_t crc32c_impl_copy2(const struct crc32c_impl *impl, uint32_t crc, void *dst, void *dst2,
			   const void *src, size_t len);

/*
 * crc32c_pick() - the implementation named @want (an implementation's name, or "avx512",
 * "avx2", "sse4.2"; "portable" is its own name), NULL if none has that name or this CPU cannot
 * run it; the best this CPU can run when @want is NULL or empty. The library selects
 * crc32c_pick(getenv("NTBSOCK_CRC")), or the best where that is NULL, once per process.
 */
const struct crc32c_impl *crc32c_pick(const char *want);
#if defined(__x86_64__) && defined(__GNUC__)
extern const struct crc32c_impl crc32c_impl_sse42;
extern const struct crc32c_impl crc32c_impl_hybrid;
extern const struct crc32c_impl crc32c_impl_avx512;

/* crc32c_x86_features() - CRC32C_X86_* bits this CPU and OS support; thread-safe, pure. */
#define CRC32C_X86_SSE42 (1u << 0)
#define CRC32C_X86_PCLMUL (1u << 1)
#define CRC32C_X86_AVX2 (1u << 2)
#define CRC32C_X86_VPCLMULQDQ (1u << 3)
#define CRC32C_X86_AVX512 (1u << 4) /* AVX512F, with the OS saving ZMM state */
unsigned crc32c_x86_features(void);

/* crc32c_shift() with PCLMULQDQ; [k] = x^(8 * 2^k - 33) mod P for k >= 3. */
uint32_t crc32c_shift_sse42(uint32_t crc, size_t len);
extern const uint32_t crc32c_x8n33_table[64];

/* Raw-register SSE4.2 paths (no inversions), also the tails of the hybrid path. */
uint32_t crc32c_sse42_raw(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crc32c_sse42_copy_raw(uint32_t reg, uint8_t *d, const uint8_t *p, size_t n);
uint32_t crc32c_sse42_copy2_raw(uint32_t reg, uint8_t *d, uint8_t *d2, const uint8_t *p,
			       size_t n);

/* Lanes of len bytes joined with k1 = x^(8*len - 33), k2 = x^(16*len - 33) mod P. */
struct crc32c_lane_shift {
	uint32_t len;
	uint32_t k1;
	uint32_t k2;
};
#define CRC32C_LANE_SIZES 2
extern const struct crc32c_lane_shift crc32c_lane_shifts[CRC32C_LANE_SIZES];
/* [i] = x^(64i - 33), x^(128i - 33) mod P: lanes of 8*i bytes, i = 1..63. */
extern const uint32_t crc32c_short_shifts[64][2];

/* Hybrid path: [I-1] = x^(8S-33), x^(16S-33), x^(24S-33) mod P with S = 64*I bytes. */
extern const uint32_t crc32c_hybrid_shift[32][3];
/* Hybrid path: [j] = x^(8F+31), x^(8F-33) mod P with F = 16 << j bytes. */
extern const uint32_t crc32c_fold_consts[5][2];
#endif

/* The portable slicing-by-8 path, callable directly (tests, reference). */
uint32_t crc32c_portable(uint32_t crc, const void *buf, size_t len);
uint32_t crc32c_copy_portable(uint32_t crc, void *dst, const void *src, size_t len);

/* crc32c_shift() - @crc * x^(8 * @len) mod P: the register after @len zero bytes (raw). */
uint32_t crc32c_shift(uint32_t crc, size_t len);

/* crc32c_multmodp() - a * b mod P for bit-reflected polynomials. */
uint32_t crc32c_multmodp(uint32_t a, uint32_t b);

/* Generated tables (util/crc32c_table.c). */
extern const uint32_t crc32c_table[8][256];
extern const uint32_t crc32c_x8n_table[64];

#endif
