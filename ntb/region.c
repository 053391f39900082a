/* SPDX-License-Identifier: MIT */
/* The region layout shared by every backend: build, initialise in place, and validate a header
 * found in untrusted memory (see ntb_int.h for the layout and who initialises it). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntb/ntb_int.h"

size_t ntb_region_size_for(size_t win_size)
{
	return NTB_FIXED_SIZE + 2 * win_size;
}

size_t ntb_region_max_win(size_t mapped_size)
{
	if (mapped_size < NTB_FIXED_SIZE + 2 * NTB_PAGE)
		return 0;
	size_t avail = (mapped_size - NTB_FIXED_SIZE) / 2;
	size_t w = NTB_PAGE;
	while (w <= avail / 2)
		w *= 2;
	return w;
}

void ntb_region_hdr_build(struct ntb_region_hdr *h, size_t win_size)
{
	memset(h, 0, sizeof(*h));
	h->version = NTB_REGION_VERSION;
	h->hdr_size = NTB_HDR_SIZE;
	h->region_size = ntb_region_size_for(win_size);
	h->win_size = win_size;
	for (int s = 0; s < 2; s++) {
		h->local_off[s] = NTB_HDR_SIZE + (uint64_t)s * NTB_LOCAL_SIZE;
		h->ctrl_off[s] = NTB_HDR_SIZE + 2 * NTB_LOCAL_SIZE + (uint64_t)s * NTB_CTRL_SIZE;
		h->win_off[s] = NTB_FIXED_SIZE + (uint64_t)s * win_size;
	}
	h->local_size = NTB_LOCAL_SIZE;
	h->ctrl_size = NTB_CTRL_SIZE;
	h->spad_count = NTB_SPAD_COUNT;
	h->side_slots = NTB_SIDE_SLOTS;
}

static bool all_zero(const void *p, size_t len)
{
	const volatile uint8_t *b = p;
	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

#define FAIL(code, ...)                                                  \
	do {                                                             \
		if (detail)                                              \
			snprintf(detail, detail_len, __VA_ARGS__);       \
		return (code);                                           \
	} while (0)

struct area { uint64_t off, len; const char *name; };

int ntb_region_validate(const void *base, size_t mapped_size, size_t want_win,
			struct ntb_region_hdr *ret_hdr, char *detail, size_t detail_len)
{
	struct ntb_region_hdr h;

	if (!base || mapped_size < sizeof(h))
		FAIL(-EINVAL, "region too small (%zu bytes, header needs %zu): truncated",
		     mapped_size, sizeof(h));
	/* Copy first: the peer (or anyone with the file) may change it under us (rule 4).
	 * The acquire load of magic pairs with the release store in ntb_region_init(). */
	uint64_t magic = atomic_load_explicit(&((const struct ntb_region_hdr *)base)->magic,
					      memory_order_acquire);
	memcpy(&h, base, sizeof(h));
	atomic_init(&h.magic, magic); /* (a private copy) */
	if (magic == 0 && all_zero(base, offsetof(struct ntb_region_hdr, init_word)) &&
	    all_zero((const uint8_t *)base + offsetof(struct ntb_region_hdr, flags),
		     sizeof(h) - offsetof(struct ntb_region_hdr, flags)))
		FAIL(-EAGAIN, "region not initialised yet (header %s)",
		     atomic_load_explicit(&h.init_word, memory_order_relaxed) ?
		     "being initialised" : "all zero");
	if (magic != NTB_REGION_MAGIC)
		FAIL(-EPROTO, "not an ntbsock region (magic %016llx)", (unsigned long long)magic);
	if (h.version != NTB_REGION_VERSION)
		FAIL(-EPROTONOSUPPORT, "region version %u, this build speaks %u", h.version,
		     NTB_REGION_VERSION);
	if (h.hdr_size != NTB_HDR_SIZE || h.local_size != NTB_LOCAL_SIZE ||
	    h.ctrl_size != NTB_CTRL_SIZE || h.spad_count != NTB_SPAD_COUNT ||
	    h.side_slots != NTB_SIDE_SLOTS)
		FAIL(-EINVAL, "header sizes inconsistent (hdr %u local %u ctrl %u spads %u slots %u)",
		     h.hdr_size, h.local_size, h.ctrl_size, h.spad_count, h.side_slots);
	if (h.win_size == 0 || h.win_size % NTB_PAGE || h.win_size > (UINT64_C(1) << 40))
		FAIL(-EINVAL, "bad window size %llu", (unsigned long long)h.win_size);
	if (h.region_size < NTB_FIXED_SIZE || h.region_size > (UINT64_C(1) << 42))
		FAIL(-EINVAL, "bad region size %llu", (unsigned long long)h.region_size);
	if (h.region_size > mapped_size)
		FAIL(-EINVAL, "region needs %llu bytes, only %zu mapped: truncated",
		     (unsigned long long)h.region_size, mapped_size);

	struct area a[7] = {
		{ 0, h.hdr_size, "header" },
		{ h.local_off[0], h.local_size, "local[0]" },
		{ h.local_off[1], h.local_size, "local[1]" },
		{ h.ctrl_off[0], h.ctrl_size, "ctrl[0]" },
		{ h.ctrl_off[1], h.ctrl_size, "ctrl[1]" },
		{ h.win_off[0], h.win_size, "window[0]" },
		{ h.win_off[1], h.win_size, "window[1]" },
	};
	for (int i = 0; i < 7; i++) {
		/* Sizes are bounded above, so off + len cannot overflow once off is bounded. */
		if (a[i].off % NTB_PAGE || a[i].off > h.region_size ||
		    a[i].len > h.region_size - a[i].off)
			FAIL(-EINVAL, "%s at %llu+%llu outside region of %llu or misaligned",
			     a[i].name, (unsigned long long)a[i].off, (unsigned long long)a[i].len,
			     (unsigned long long)h.region_size);
		for (int j = 0; j < i; j++)
			if (a[i].off < a[j].off + a[j].len && a[j].off < a[i].off + a[i].len)
				FAIL(-EINVAL, "%s overlaps %s", a[i].name, a[j].name);
	}
	if (want_win && want_win != h.win_size)
		FAIL(-EMSGSIZE, "window size %llu, configured %zu",
		     (unsigned long long)h.win_size, want_win);
	if (ret_hdr)
		*ret_hdr = h;
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int ntb_region_init(void *base, size_t mapped_size, size_t win_size, int timeout_ms)
{
	struct ntb_region_hdr *hdr = base;
	uint32_t expect = 0;
	uint32_t me = (uint32_t)getpid();

	/* acquire: pairs with the release store of magic below (another initialiser's) or in
	 * shm_create() */
	uint64_t magic = atomic_load_explicit(&hdr->magic, memory_order_acquire);
	if (magic == NTB_REGION_MAGIC)
		return 0;
	if (ntb_region_size_for(win_size) > mapped_size || win_size == 0 || win_size % NTB_PAGE)
		return -EINVAL;
	/* Serialise initialisers on the init word (local atomics: only side-0-capable openers
	 * of one host initialise, see ntb_int.h). */
	/* acq_rel: pairs with the release stores of init_word below (another initialiser giving
	 * up, or done) */
	if (atomic_compare_exchange_strong_explicit(&hdr->init_word, &expect, me,
						    memory_order_acq_rel, memory_order_acquire)) {
		struct ntb_region_hdr h;
		/* Re-check under the init word: only an all-zero page is ours to fill. */
		if (magic != 0 || !all_zero(base, offsetof(struct ntb_region_hdr, init_word)) ||
		    !all_zero((uint8_t *)base + offsetof(struct ntb_region_hdr, flags),
			      NTB_HDR_SIZE - offsetof(struct ntb_region_hdr, flags))) {
			/* release: pairs with the next initialiser's CAS above */
			atomic_store_explicit(&hdr->init_word, 0, memory_order_release);
			return -EPROTO;
		}
		memset((uint8_t *)base + NTB_HDR_SIZE, 0, NTB_FIXED_SIZE - NTB_HDR_SIZE);
		ntb_region_hdr_build(&h, win_size);
		memcpy((uint8_t *)base + 8, (uint8_t *)&h + 8, offsetof(struct ntb_region_hdr,
								     init_word) - 8);
		/* Release: the header fields before the magic; pairs with the acquire load of
		 * magic in ntb_region_validate(). */
		atomic_store_explicit(&hdr->magic, NTB_REGION_MAGIC, memory_order_release);
		/* release: pairs with the CAS above of a later opener (it fails, reads DONE) */
		atomic_store_explicit(&hdr->init_word, NTB_INIT_DONE, memory_order_release);
		return 0;
	}
	if (expect == NTB_INIT_DONE && magic != NTB_REGION_MAGIC)
		return -EPROTO;
	/* Somebody else is initialising: wait for the magic. */
	for (int waited = 0; waited < timeout_ms; waited++) {
		/* acquire: pairs with the initialiser's release store of magic above */
		if (atomic_load_explicit(&hdr->magic, memory_order_acquire) == NTB_REGION_MAGIC)
			return 0;
		sleep_ms(1);
	}
	return -ETIMEDOUT;
}

int ntb_region_prepare(void *base, size_t mapped_size, size_t win_size, bool may_init,
		       struct ntb_region_hdr *ret_hdr)
{
	char detail[200];
	int rc = ntb_region_validate(base, mapped_size, win_size, ret_hdr, detail,
				     sizeof(detail));
	if (rc == -EAGAIN && may_init) {
		size_t w = win_size ? win_size : ntb_region_max_win(mapped_size);
		if (w == 0 || ntb_region_size_for(w) > mapped_size) {
			ntb_set_detail("region of %zu bytes too small for windows of %zu",
				       mapped_size, w);
			return -EINVAL;
		}
		rc = ntb_region_init(base, mapped_size, w, 2000);
		if (rc) {
			ntb_set_detail("initialising region: %s",
				       rc == -ETIMEDOUT ? "another initialiser did not finish"
							: "header changed under us");
			return rc;
		}
		rc = ntb_region_validate(base, mapped_size, win_size, ret_hdr, detail,
					 sizeof(detail));
	}
	if (rc)
		ntb_set_detail("%s", detail);
	return rc;
}
