/* SPDX-License-Identifier: MIT */
/* CRC32C public entry points: one-time selection of the implementation, and combine. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/compiler.h"
#include "util/crc32c.h"
#include "util/crc32c_int.h"

const struct crc32c_impl *const crc32c_impls[] = {
#if defined(__x86_64__) && defined(__GNUC__)
	&crc32c_impl_avx512,
	&crc32c_impl_hybrid,
	&crc32c_impl_sse42,
#endif
	&crc32c_impl_portable,
	NULL,
};

/*
 * The selected implementation; NULL until the first call. Written by crc32c_select()
 * in whatever thread gets there first (racing threads store the same value), read by
 * every entry point. No constructor: this library is preloaded into arbitrary programs
 * and may be called before constructors have run.
 */
static _Atomic(const struct crc32c_impl *) crc32c_active;

/* Short names for NTBSOCK_CRC, in crc32c_impls[] order of their implementations. */
static const struct {
	const char *alias;
	const char *name;
} crc32c_aliases[] = {
	{ "avx512", "vpclmul-avx512+sse4.2" },
	{ "avx2", "vpclmul-avx2+sse4.2" },
	{ "sse4.2", "sse4.2-3way" },
};

const struct crc32c_impl *crc32c_pick(const char *want)
{
	const char *name = want;

	if (!want || !*want) {
		for (size_t i = 0; crc32c_impls[i]; i++)
			if (crc32c_impls[i]->supported())
				return crc32c_impls[i];
		return &crc32c_impl_portable;
	}
	for (size_t i = 0; i < sizeof(crc32c_aliases) / sizeof(crc32c_aliases[0]); i++) {
		if (!strcmp(want, crc32c_aliases[i].alias)) {
			name = crc32c_aliases[i].name;
			break;
		}
	}
	for (size_t i = 0; crc32c_impls[i]; i++)
		if (!strcmp(name, crc32c_impls[i]->name))
			return crc32c_impls[i]->supported() ? crc32c_impls[i] : NULL;
	return NULL;
}

static const struct crc32c_impl *crc32c_select(void)
{
	/* NTBSOCK_CRC names the implementation (benchmarks of the slower paths on a CPU that has a
	 * faster one); a name this CPU cannot run, an unknown one or none leaves the best one.
	 * secure_getenv(): a set-uid program keeps its best path whatever its caller says. The
	 * preload library selects from its initialisation (pl_init_once()), before any thread of
	 * its own runs or it changes the environment. */
	const struct crc32c_impl *impl = crc32c_pick(secure_getenv("NTBSOCK_CRC"));

	if (!impl)
		impl = crc32c_pick(NULL);
	/* Pairs with the acquire in crc32c_get(); the impl structs are constant anyway. */
	atomic_store_explicit(&crc32c_active, impl, memory_order_release);
	return impl;
}

static inline const struct crc32c_impl *crc32c_get(void)
{
	/* Pairs with the release in crc32c_select(). */
	const struct crc32c_impl *impl =
		atomic_load_explicit(&crc32c_active, memory_order_acquire);

	return likely(impl) ? impl : crc32c_select();
}

uint32_t crc32c_long(uint32_t crc, const void *buf, size_t len)
{
	return crc32c_get()->crc(crc, buf, len);
}

uint32_t crc32c_copy_long(uint32_t crc, void *dst, const void *src, size_t len)
{
	return crc32c_get()->copy(crc, dst, src, len);
}

uint32_t crc32c_impl_copy2(const struct crc32c_impl *impl, uint32_t crc, void *dst, void *dst2,
			   const void *src, size_t len)
{
	if (impl->copy2 && (!impl->copy2_split || len < impl->copy2_split))
		return impl->copy2(crc, dst, dst2, src, len);
	/* both copies from the one read of @src: @dst2 is local memory, cheap to read back, and
	 * memcpy() writes @dst's lines whole (the AVX-512 and AVX2 paths' reason to switch: their
	 * source files give the figures) */
	crc = impl->copy(crc, dst2, src, len);
	memcpy(dst, dst2, len);
	return crc;
}

uint32_t crc32c_copy2_long(uint32_t crc, void *dst, void *dst2, const void *src, size_t len)
{
	return crc32c_impl_copy2(crc32c_get(), crc, dst, dst2, src, len);
}

size_t crc32c_copy2_split_len(void)
{
	const struct crc32c_impl *impl = crc32c_get();

	return impl->copy2 && impl->copy2_split ? impl->copy2_split : SIZE_MAX;
}

const char *crc32c_impl_name(void)
{
	return crc32c_get()->name;
}

uint32_t crc32c_multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	/* Bit 31 of a reflected polynomial is x^0: walk a from low to high degree. */
	for (; m; m >>= 1) {
		if (a & m)
			p ^= b;
		b = (b & 1) ? (b >> 1) ^ CRC32C_POLY_REFLECTED : b >> 1;
	}
	return p;
}

uint32_t crc32c_shift(uint32_t crc, size_t len)
{
	for (unsigned k = 0; len; k++, len >>= 1) {
		if (len & 1)
			crc = crc32c_multmodp(crc32c_x8n_table[k], crc);
	}
	return crc;
}

/*
 * With the inversions, crc(A||B) = crc(A) * x^(8|B|) ^ crc(B): the ~0 initial values
 * and final xors cancel, so no correction term is needed.
 */
uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2)
{
	return crc32c_get()->shift(crc1, len2) ^ crc2;
}
