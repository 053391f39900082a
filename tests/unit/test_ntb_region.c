/* SPDX-License-Identifier: MIT */
/* Unit tests for ntb/region.c: the region header is built, initialised in place and validated
 * against truncated, foreign, wrong-version and hostile headers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ntb/ntb_int.h"

#define WIN (64u * 1024)

static void *mk_region(size_t win, size_t *ret_size)
{
	size_t size = ntb_region_size_for(win);
	void *base = aligned_alloc(NTB_PAGE, size);
	assert_non_null(base);
	memset(base, 0, size);
	assert_int_equal(ntb_region_init(base, size, win, 100), 0);
	*ret_size = size;
	return base;
}

static void test_layout_constants(void **state)
{
	(void)state;
	struct ntb_region_hdr h;
	ntb_region_hdr_build(&h, WIN);
	assert_int_equal(NTB_FIXED_SIZE, 0x5000);
	assert_int_equal(h.region_size, 0x5000 + 2 * WIN);
	assert_int_equal(h.local_off[0], 0x1000);
	assert_int_equal(h.local_off[1], 0x2000);
	assert_int_equal(h.ctrl_off[0], 0x3000);
	assert_int_equal(h.ctrl_off[1], 0x4000);
	assert_int_equal(h.win_off[0], 0x5000);
	assert_int_equal(h.win_off[1], 0x5000 + WIN);
	assert_int_equal(ntb_region_size_for(WIN), 0x5000 + 2 * WIN);
	/* largest power-of-two window that fits */
	assert_int_equal(ntb_region_max_win(64u << 20), 16u << 20);
	assert_int_equal(ntb_region_max_win((32u << 20) + 0x5000), 16u << 20);
	assert_int_equal(ntb_region_max_win((32u << 20) + 0x4fff), 8u << 20);
	assert_int_equal(ntb_region_max_win(0x5000 + 2 * 4096), 4096);
	assert_int_equal(ntb_region_max_win(0x5000 + 4096), 0);
}

static void test_init_and_validate(void **state)
{
	(void)state;
	size_t size;
	uint8_t *base = mk_region(WIN, &size);
	struct ntb_region_hdr h;
	char why[200];
	assert_int_equal(ntb_region_validate(base, size, 0, &h, why, sizeof(why)), 0);
	assert_int_equal(h.magic, NTB_REGION_MAGIC);
	assert_int_equal(h.win_size, WIN);
	assert_int_equal(h.init_word, NTB_INIT_DONE);
	assert_int_equal(ntb_region_validate(base, size, WIN, NULL, NULL, 0), 0);
	/* a larger mapping (power-of-two BAR) is fine */
	assert_int_equal(ntb_region_validate(base, size + 4096 * 3, WIN, NULL, NULL, 0), 0);
	/* window size mismatch */
	assert_int_equal(ntb_region_validate(base, size, 2 * WIN, NULL, why, sizeof(why)),
			 -EMSGSIZE);
	assert_non_null(strstr(why, "window size"));
	/* init again: already initialised, nothing changes */
	assert_int_equal(ntb_region_init(base, size, 2 * WIN, 10), 0);
	assert_int_equal(ntb_region_validate(base, size, WIN, NULL, NULL, 0), 0);
	free(base);
}

static void test_zero_and_truncated(void **state)
{
	(void)state;
	size_t size = ntb_region_size_for(WIN);
	uint8_t *base = calloc(1, size);
	char why[200];
	assert_int_equal(ntb_region_validate(base, size, 0, NULL, why, sizeof(why)), -EAGAIN);
	assert_non_null(strstr(why, "not initialised"));
	/* being initialised by someone (init word set): still -EAGAIN */
	((struct ntb_region_hdr *)base)->init_word = 12345;
	assert_int_equal(ntb_region_validate(base, size, 0, NULL, why, sizeof(why)), -EAGAIN);
	assert_non_null(strstr(why, "being initialised"));
	/* and init waits for it, then times out */
	assert_int_equal(ntb_region_init(base, size, WIN, 20), -ETIMEDOUT);
	((struct ntb_region_hdr *)base)->init_word = 0;
	/* too small to hold the windows */
	assert_int_equal(ntb_region_init(base, size - 4096, WIN, 10), -EINVAL);
	assert_int_equal(ntb_region_init(base, size, WIN, 10), 0);
	/* truncated mapping */
	assert_int_equal(ntb_region_validate(base, size - 4096, 0, NULL, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "truncated"));
	assert_int_equal(ntb_region_validate(base, 100, 0, NULL, why, sizeof(why)), -EINVAL);
	assert_int_equal(ntb_region_validate(NULL, size, 0, NULL, NULL, 0), -EINVAL);
	free(base);
}

static void test_foreign(void **state)
{
	(void)state;
	size_t size = ntb_region_size_for(WIN);
	uint8_t *base = calloc(1, size);
	char why[200];
	memcpy(base, "\x7f" "ELF\x02\x01\x01", 7); /* somebody else's data */
	assert_int_equal(ntb_region_validate(base, size, 0, NULL, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "not an ntbsock region"));
	/* never initialised over */
	assert_int_equal(ntb_region_init(base, size, WIN, 10), -EPROTO);
	assert_memory_equal(base, "\x7f" "ELF", 4);
	/* zero magic but other bytes present: foreign too */
	memset(base, 0, 8);
	base[200] = 1;
	assert_int_equal(ntb_region_validate(base, size, 0, NULL, NULL, 0), -EPROTO);
	assert_int_equal(ntb_region_init(base, size, WIN, 10), -EPROTO);
	assert_int_equal(base[200], 1);
	free(base);
}

static void test_wrong_version(void **state)
{
	(void)state;
	size_t size;
	uint8_t *base = mk_region(WIN, &size);
	struct ntb_region_hdr *h = (struct ntb_region_hdr *)base;
	char why[200];
	h->version = 2;
	assert_int_equal(ntb_region_validate(base, size, 0, NULL, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "version 2"));
	free(base);
}

/* Each mutation of a good header must be rejected with -EINVAL. */
struct mutation {
	const char *name;
	void (*apply)(struct ntb_region_hdr *h);
};

static void m_hdr_size(struct ntb_region_hdr *h) { h->hdr_size = 8192; }
static void m_ctrl_size(struct ntb_region_hdr *h) { h->ctrl_size = 64; }
static void m_local_size(struct ntb_region_hdr *h) { h->local_size = 0; }
static void m_spads(struct ntb_region_hdr *h) { h->spad_count = 1000; }
static void m_slots(struct ntb_region_hdr *h) { h->side_slots = 7; }
static void m_win_zero(struct ntb_region_hdr *h) { h->win_size = 0; }
static void m_win_unaligned(struct ntb_region_hdr *h) { h->win_size = WIN + 1; }
static void m_win_huge(struct ntb_region_hdr *h) { h->win_size = UINT64_MAX & ~4095ull; }
static void m_region_small(struct ntb_region_hdr *h) { h->region_size = 4096; }
static void m_region_huge(struct ntb_region_hdr *h) { h->region_size = UINT64_MAX; }
static void m_win_out(struct ntb_region_hdr *h) { h->win_off[1] = h->region_size; }
static void m_win_past(struct ntb_region_hdr *h) { h->win_off[1] += 4096; }
static void m_win_wrap(struct ntb_region_hdr *h) { h->win_off[0] = UINT64_MAX - 4095; }
static void m_win_overlap(struct ntb_region_hdr *h) { h->win_off[1] = h->win_off[0]; }
static void m_win_overlap_part(struct ntb_region_hdr *h) { h->win_off[1] -= 4096; }
static void m_ctrl_overlap(struct ntb_region_hdr *h) { h->ctrl_off[1] = h->ctrl_off[0]; }
static void m_ctrl_in_win(struct ntb_region_hdr *h) { h->ctrl_off[0] = h->win_off[0]; }
static void m_ctrl_in_hdr(struct ntb_region_hdr *h) { h->ctrl_off[0] = 0; }
static void m_local_in_ctrl(struct ntb_region_hdr *h) { h->local_off[1] = h->ctrl_off[1]; }
static void m_unaligned(struct ntb_region_hdr *h) { h->ctrl_off[1] += 8; }
static void m_local_out(struct ntb_region_hdr *h) { h->local_off[0] = 1ull << 50; }

static const struct mutation mutations[] = {
	{ "hdr_size", m_hdr_size },         { "ctrl_size", m_ctrl_size },
	{ "local_size", m_local_size },     { "spads", m_spads },
	{ "slots", m_slots },               { "win zero", m_win_zero },
	{ "win unaligned", m_win_unaligned }, { "win huge", m_win_huge },
	{ "region small", m_region_small }, { "region huge", m_region_huge },
	{ "win out", m_win_out },           { "win past end", m_win_past },
	{ "win wraps", m_win_wrap },        { "win overlap", m_win_overlap },
	{ "win partial overlap", m_win_overlap_part },
	{ "ctrl overlap", m_ctrl_overlap }, { "ctrl in window", m_ctrl_in_win },
	{ "ctrl in header", m_ctrl_in_hdr }, { "local in ctrl", m_local_in_ctrl },
	{ "unaligned", m_unaligned },       { "local out", m_local_out },
};

static void test_hostile(void **state)
{
	(void)state;
	size_t size;
	uint8_t *base = mk_region(WIN, &size);
	struct ntb_region_hdr good;
	memcpy(&good, base, sizeof(good));
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
		struct ntb_region_hdr h = good;
		mutations[i].apply(&h);
		memcpy(base, &h, sizeof(h));
		struct ntb_region_hdr out;
		memset(&out, 0xa5, sizeof(out));
		char why[200] = "";
		int rc = ntb_region_validate(base, size, 0, &out, why, sizeof(why));
		if (rc != -EINVAL)
			fail_msg("mutation '%s': rc %d (%s)", mutations[i].name, rc, why);
		assert_true(why[0] != 0);
		/* ret_hdr untouched on failure */
		assert_int_equal(((uint8_t *)&out)[0], 0xa5);
	}
	memcpy(base, &good, sizeof(good));
	assert_int_equal(ntb_region_validate(base, size, 0, NULL, NULL, 0), 0);
	free(base);
}

/* Random garbage in the header never validates and never crashes. */
static void test_fuzz(void **state)
{
	(void)state;
	size_t size;
	uint8_t *base = mk_region(WIN, &size);
	struct ntb_region_hdr good;
	memcpy(&good, base, sizeof(good));
	uint64_t x = 42;
	int accepted = 0;
	for (int i = 0; i < 20000; i++) {
		struct ntb_region_hdr h = good;
		uint64_t *w = (uint64_t *)&h;
		for (int k = 0; k < 3; k++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			int idx = 1 + (int)((x >> 33) % 12); /* words 1..12 (after magic) */
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			w[idx] ^= (x >> 11) << (x % 23);
		}
		memcpy(base, &h, sizeof(h));
		struct ntb_region_hdr out;
		if (ntb_region_validate(base, size, 0, &out, NULL, 0) == 0) {
			accepted++;
			/* whatever is accepted is internally consistent and inside the mapping */
			assert_true(out.region_size <= size);
			for (int s = 0; s < 2; s++) {
				assert_true(out.win_off[s] + out.win_size <= out.region_size);
				assert_true(out.ctrl_off[s] + out.ctrl_size <= out.region_size);
			}
			assert_true(out.win_off[0] + out.win_size <= out.win_off[1] ||
				    out.win_off[1] + out.win_size <= out.win_off[0]);
		}
	}
	(void)accepted;
	free(base);
}

static void test_prepare(void **state)
{
	(void)state;
	size_t size = 1u << 20; /* a power-of-two "BAR" */
	uint8_t *base = calloc(1, size);
	struct ntb_region_hdr h;
	/* side 1 must not initialise */
	assert_int_equal(ntb_region_prepare(base, size, 0, false, &h), -EAGAIN);
	assert_non_null(strstr(ntb_strerror_detail(), "not initialised"));
	/* side 0 initialises with the largest window that fits */
	assert_int_equal(ntb_region_prepare(base, size, 0, true, &h), 0);
	assert_int_equal(h.win_size, 256u * 1024);
	assert_true(h.region_size <= size);
	/* later openers validate, wanting any or the same size */
	assert_int_equal(ntb_region_prepare(base, size, 0, false, &h), 0);
	assert_int_equal(ntb_region_prepare(base, size, 256u * 1024, true, &h), 0);
	assert_int_equal(ntb_region_prepare(base, size, 128u * 1024, true, &h), -EMSGSIZE);
	/* explicit window too large for the mapping */
	memset(base, 0, size);
	assert_int_equal(ntb_region_prepare(base, size, 1u << 20, true, &h), -EINVAL);
	free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_constants),
		cmocka_unit_test(test_init_and_validate),
		cmocka_unit_test(test_zero_and_truncated),
		cmocka_unit_test(test_foreign),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_fuzz),
		cmocka_unit_test(test_prepare),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
