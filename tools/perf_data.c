// SPDX-License-Identifier: MIT
/* `ntbsock perf` data: the verifiable payload pattern and latency percentiles. */
#include "tools/tools_int.h"

#include <stdlib.h>

size_t tool_pattern_len(size_t max_size)
{
	return max_size + (size_t)TOOL_PATTERN_PERIOD * TOOL_PATTERN_STRIDE;
}

size_t tool_pattern_offset(uint64_t msg_no)
{
	return (size_t)(msg_no % TOOL_PATTERN_PERIOD) * TOOL_PATTERN_STRIDE;
}

void tool_pattern_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed ? seed : 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0) {
			x ^= x >> 12;
			x ^= x << 25;
			x ^= x >> 27;
		}
		buf[i] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> (8 * (i % 8)));
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t tool_percentile(uint64_t *samples, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	qsort(samples, n, sizeof(*samples), cmp_u64);
	/* nearest rank: the smallest sample with at least P% of the samples at or below it */
	rank = (size_t)((p / 100.0) * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return samples[rank - 1];
}
