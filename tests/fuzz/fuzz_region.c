/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the region header validation (ntb_region_validate, ntb_region_prepare) fed
 * with hostile mappings. Input: byte 0 selects the wanted window size, the rest is the mapping.
 * On success the validated header must describe areas inside the mapping: we touch them all. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ntb/ntb_int.h"

static size_t want_of(uint8_t b)
{
	switch (b & 7) {
	case 0: return 0;
	case 1: return 4096;
	case 2: return 8192;
	case 3: return 1u << 20;
	default: return (size_t)4096 << (b >> 3);
	}
}

/* A validated header's areas lie inside the mapping, aligned, not overlapping. */
static void check_hdr(const struct ntb_region_hdr *h, const uint8_t *base, size_t size)
{
	volatile uint8_t sink = 0;
	uint64_t start[6], len[6];

	if (h->region_size > size || h->win_size % 4096 || h->win_size == 0)
		abort();
	for (int s = 0; s < 2; s++) {
		start[s] = h->local_off[s], len[s] = h->local_size;
		start[2 + s] = h->ctrl_off[s], len[2 + s] = h->ctrl_size;
		start[4 + s] = h->win_off[s], len[4 + s] = h->win_size;
	}
	for (int i = 0; i < 6; i++) {
		if (start[i] % 4096 || len[i] == 0 || start[i] + len[i] > h->region_size ||
		    start[i] + len[i] < start[i] || start[i] < NTB_HDR_SIZE)
			abort();
		for (int j = 0; j < i; j++)
			if (start[i] < start[j] + len[j] && start[j] < start[i] + len[i])
				abort();
		sink ^= base[start[i]];
		sink ^= base[start[i] + len[i] - 1];
	}
	(void)sink;
}

/* Does another initialiser hold the init word of this (all-zero otherwise) header? */
static bool init_held(const uint8_t *buf)
{
	uint32_t w;

	memcpy(&w, buf + offsetof(struct ntb_region_hdr, init_word), sizeof(w));
	return w != 0 && w != NTB_INIT_DONE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ntb_region_hdr h;
	char detail[160];
	uint8_t *buf;
	size_t n, want;
	int rc;

	if (size < 1)
		return 0;
	want = want_of(data[0]);
	n = size - 1;
	/* an exactly sized private copy: reading past the mapping is an ASan report */
	buf = malloc(n ? n : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, n);
	rc = ntb_region_validate(buf, n, want, &h, detail, sizeof(detail));
	if (rc == 0) {
		check_hdr(&h, buf, n);
		if (want && h.win_size != want)
			abort();
	} else if (rc != -EAGAIN && rc != -EPROTO && rc != -EPROTONOSUPPORT && rc != -EINVAL &&
		   rc != -EMSGSIZE) {
		abort();
	}
	/* prepare may initialise an all-zero header page in place (side 0); never on a foreign
	 * one, and what it accepts validates. A header whose init word another initialiser
	 * holds makes it wait 2 s for that one: the same call without the wait instead. */
	if (rc == -EAGAIN && (data[0] & 0x80) && init_held(buf)) {
		size_t w = want ? want : ntb_region_max_win(n);

		rc = ntb_region_init(buf, n, w, 0);
		if (rc != -ETIMEDOUT && rc != -EINVAL)
			abort();
		free(buf);
		return 0;
	}
	rc = ntb_region_prepare(buf, n, want, (data[0] & 0x80) != 0, &h);
	if (rc == 0) {
		check_hdr(&h, buf, n);
		if (ntb_region_validate(buf, n, want, NULL, NULL, 0) != 0)
			abort();
	}
	free(buf);
	return 0;
}
