/* SPDX-License-Identifier: MIT */
/* Microbenchmark: GB/s of crc32c, crc32c_copy, crc32c_copy2 and memcpy at a few buffer sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/crc32c.h"
#include "util/crc32c_int.h"

/*
 * Usage: crc_bench [-p] [-s SIZE,...] [seconds-per-point]. -p also measures the portable
 * path; -s replaces the default sizes (bytes, at most 1 MiB).
 * Run pinned: taskset -c 1 build/bench/crc_bench. Numbers only; nothing is asserted.
 */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum op { OP_CRC, OP_COPY, OP_COPY2, OP_COPY_MEMCPY, OP_MEMCPY };
static const char *const op_names[] = { "crc32c", "crc32c_copy", "crc32c_copy2",
					"copy+memcpy" };

static unsigned char *dst2; /* the second destination of OP_COPY2 / OP_COPY_MEMCPY */

static volatile uint32_t sink;

static uint32_t once(const struct crc32c_impl *impl, enum op op, unsigned char *dst,
		     const unsigned char *src, size_t size, uint32_t acc)
{
	switch (op) {
	case OP_CRC:
		return impl->crc(acc, src, size);
	case OP_COPY:
		return impl->copy(acc, dst, src, size);
	case OP_COPY2:
		/* crc32c_copy2() on this implementation: its fused pass, or two from its switch */
		return crc32c_impl_copy2(impl, acc, dst, dst2, src, size);
	case OP_COPY_MEMCPY:
		/* what a sender did before crc32c_copy2(): fused copy to the shadow, then a copy
		 * from it to the window */
		acc = impl->copy(acc, dst2, src, size);
		memcpy(dst, dst2, size);
		__asm__ volatile("" : : "r"(dst) : "memory");
		return acc;
	case OP_MEMCPY:
		memcpy(dst, src, size);
		/* keep the compiler from eliding the copies */
		__asm__ volatile("" : : "r"(dst) : "memory");
		return acc + dst[size - 1];
	}
	return acc;
}

/*
 * GB/s (1e9 B/s) of the best of many short trials (~32 KiB..1 MiB of work each) over
 * about @secs seconds: the machine is shared, and the fastest trial is the one nobody
 * interrupted. Buffers are reused, so this is the cache-resident speed.
 */
static double run(const struct crc32c_impl *impl, enum op op, unsigned char *dst,
		  const unsigned char *src, size_t size, double secs)
{
	size_t reps = size >= (1 << 20) ? 1 : ((1 << 20) / size) / 4 + 1;
	double best = 1e9, start = now();
	uint32_t acc = 0;

	acc = once(impl, op, dst, src, size, acc); /* warm the caches */
	do {
		double t0 = now(), t;

		for (size_t i = 0; i < reps; i++)
			acc = once(impl, op, dst, src, size, acc);
		t = now() - t0;
		if (t < best)
			best = t;
	} while (now() - start < secs);
	sink = acc;
	return (double)reps * size / best / 1e9;
}

int main(int argc, char **argv)
{
	size_t sizes[16] = { 256, 4096, 65536, 1 << 20 }, nsizes = 4;
	int with_portable = 0;
	double secs = 0.5;
	unsigned char *src, *dst;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-p")) {
			with_portable = 1;
		} else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			char *tok = argv[++i];

			for (nsizes = 0; nsizes < 16 && *tok; tok += *tok == ',') {
				size_t v = strtoul(tok, &tok, 0);

				if (v < 1 || v > (1 << 20))
					return 2;
				sizes[nsizes++] = v;
			}
		} else {
			secs = atof(argv[i]);
		}
	}
	src = aligned_alloc(4096, (1 << 20) + 4096);
	dst = aligned_alloc(4096, (1 << 20) + 4096);
	dst2 = aligned_alloc(4096, (1 << 20) + 4096);
	if (!src || !dst || !dst2)
		return 1;
	for (size_t i = 0; i < (1 << 20) + 4096; i++) {
		src[i] = (unsigned char)(i * 2654435761u >> 13);
		dst[i] = dst2[i] = 0;
	}
	printf("selected implementation: %s\n", crc32c_impl_name());
	printf("%-32s", "operation \\ bytes (GB/s)");
	for (size_t s = 0; s < nsizes; s++)
		printf(" %9zu", sizes[s]);
	printf("\n");
	for (size_t k = 0; crc32c_impls[k]; k++) {
		const struct crc32c_impl *impl = crc32c_impls[k];

		if (!impl->supported())
			continue;
		if (impl == &crc32c_impl_portable && !with_portable && k > 0)
			continue;
		for (int op = OP_CRC; op <= OP_COPY_MEMCPY; op++) {
			printf("%-12s %-19s", op_names[op], impl->name);
			for (size_t s = 0; s < nsizes; s++)
				printf(" %9.2f", run(impl, op, dst, src, sizes[s], secs));
			printf("\n");
		}
	}
	printf("%-32s", "memcpy");
	for (size_t s = 0; s < nsizes; s++)
		printf(" %9.2f", run(NULL, OP_MEMCPY, dst, src, sizes[s], secs));
	printf("\n");
	return 0;
}
