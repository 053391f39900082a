/* SPDX-License-Identifier: MIT */
/* Portable CRC32C: slicing-by-8 over the generated tables, for CPUs without SSE4.2. */
#include <string.h>

#include "util/crc32c_int.h"

#define T crc32c_table

/* Little-endian 64-bit load from any address; one mov on x86. */
static inline uint64_t load_le64(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
	       (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
	       (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint32_t crc_byte(uint32_t s, uint8_t b)
{
	return (s >> 8) ^ T[0][(s ^ b) & 0xff];
}

/* Eight bytes at once: the first byte still has seven bytes to travel, hence T[7]. */
static inline uint32_t crc_word(uint32_t s, uint64_t w)
{
	w ^= s;
	return T[7][w & 0xff] ^ T[6][(w >> 8) & 0xff] ^ T[5][(w >> 16) & 0xff] ^
	       T[4][(w >> 24) & 0xff] ^ T[3][(w >> 32) & 0xff] ^ T[2][(w >> 40) & 0xff] ^
	       T[1][(w >> 48) & 0xff] ^ T[0][w >> 56];
}

static uint32_t crc_raw(uint32_t s, const uint8_t *p, size_t n)
{
	for (; n && ((uintptr_t)p & 7); n--)
		s = crc_byte(s, *p++);
	for (; n >= 8; n -= 8, p += 8)
		s = crc_word(s, load_le64(p));
	while (n--)
		s = crc_byte(s, *p++);
	return s;
}

uint32_t crc32c_portable(uint32_t crc, const void *buf, size_t len)
{
	return ~crc_raw(~crc, buf, len);
}

uint32_t crc32c_copy_portable(uint32_t crc, void *dst, const void *src, size_t len)
{
	const uint8_t *s = src;
	uint8_t *d = dst;
	uint32_t r = ~crc;

	for (; len && ((uintptr_t)s & 7); len--) {
		uint8_t b = *s++;

		*d++ = b;
		r = crc_byte(r, b);
	}
	for (; len >= 8; len -= 8, s += 8, d += 8) {
		uint64_t w;

		memcpy(&w, s, 8);
		memcpy(d, &w, 8);
		r = crc_word(r, load_le64(s));
	}
	while (len--) {
		uint8_t b = *s++;

		*d++ = b;
		r = crc_byte(r, b);
	}
	return ~r;
}

static int portable_supported(void)
{
	return 1;
}

const struct crc32c_impl crc32c_impl_portable = {
	.name = "portable",
	.supported = portable_supported,
	.crc = crc32c_portable,
	.copy = crc32c_copy_portable,
	.shift = crc32c_shift,
};
