/* SPDX-License-Identifier: MIT */
/* Unit tests for ntb/dmaq.c: every operation from every state (table-driven: legal ones move
 * as doc/design.md §3 says, illegal ones return an error and change nothing), the CPU-copy engine's
 * data, multi-poll progress, abort mid-transfer, errors from the engine, faults applying. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ntb/ntb_int.h"

#define WIN (4u << 20)

static char path[128];
static struct ntb_link *a, *b;
static const volatile uint8_t *bin; /* b's inbound window = a's outbound */

static int setup(void **state)
{
	(void)state;
	struct ntb_link_params p;
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-dmaq-%d", (int)getpid());
	unlink(path);
	ntb_link_params_init(&p);
	snprintf(p.name, sizeof(p.name), "dmaq");
	snprintf(p.path, sizeof(p.path), "%s", path);
	p.window_size = WIN;
	p.side = 0;
	if (ntb_link_open(&p, &a))
		return -1;
	p.side = 1;
	if (ntb_link_open(&p, &b))
		return -1;
	size_t sz;
	bin = ntb_in_window(b, &sz);
	unlink(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ntb_link_close(a);
	ntb_link_close(b);
	return 0;
}

/* Clear the first LEN bytes of a's outbound window (through a clean write). */
static void clear_out(size_t len)
{
	static uint8_t zero[1 << 16];
	for (size_t off = 0; off < len; off += sizeof(zero))
		ntb_write(a, off, zero, len - off < sizeof(zero) ? len - off : sizeof(zero));
}

static ssize_t failing_engine(struct ntb_link *l, size_t off, const void *src, size_t len)
{
	(void)l; (void)off; (void)src; (void)len;
	return -EIO;
}

static const uint8_t payload[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
#define PAYLOAD_OFF 4096

enum op { OP_ENQUEUE, OP_POST, OP_POLL, OP_WAIT, OP_ABORT, OP_RESET, OP_COUNT };
static const char *const op_names[] = { "enqueue", "post", "poll", "wait", "abort", "reset" };

/* A queue in state S with (for Gather and later) one entry of `payload`. */
static struct ntb_dmaq *queue_in(enum ntb_dmaq_state s)
{
	struct ntb_dmaq *q;
	clear_out(PAYLOAD_OFF + 4096);
	assert_int_equal(ntb_dmaq_create(a, 4, &q), 0);
	if (s == NTB_DMAQ_IDLE)
		goto out;
	assert_int_equal(ntb_dmaq_enqueue(q, PAYLOAD_OFF, payload, sizeof(payload)), 0);
	if (s == NTB_DMAQ_GATHER)
		goto out;
	if (s == NTB_DMAQ_ERROR)
		ntb_dmaq_set_engine(q, failing_engine);
	assert_int_equal(ntb_dmaq_post(q), 0);
	if (s == NTB_DMAQ_POSTED)
		goto out;
	if (s == NTB_DMAQ_ABORTED)
		assert_int_equal(ntb_dmaq_abort(q), 0);
	else if (s == NTB_DMAQ_ERROR)
		assert_int_equal(ntb_dmaq_poll(q), -EIO);
	else
		assert_int_equal(ntb_dmaq_poll(q), 0);
out:
	assert_int_equal(ntb_dmaq_state(q), s);
	return q;
}

static int do_op(struct ntb_dmaq *q, enum op op)
{
	switch (op) {
	case OP_ENQUEUE: return ntb_dmaq_enqueue(q, PAYLOAD_OFF + 8, payload, sizeof(payload));
	case OP_POST:    return ntb_dmaq_post(q);
	case OP_POLL:    return ntb_dmaq_poll(q);
	case OP_WAIT:    return ntb_dmaq_wait(q, 1000);
	case OP_ABORT:   return ntb_dmaq_abort(q);
	case OP_RESET:   return ntb_dmaq_reset(q);
	default:         return -999;
	}
}

struct expect { int rc; enum ntb_dmaq_state to; };
#define I NTB_DMAQ_IDLE
#define G NTB_DMAQ_GATHER
#define P NTB_DMAQ_POSTED
#define D NTB_DMAQ_DONE
#define A NTB_DMAQ_ABORTED
#define E NTB_DMAQ_ERROR

/* table[state][op] */
static const struct expect table[6][OP_COUNT] = {
	/*            enqueue          post             poll                wait                abort            reset */
	[I] = { { 0, G },        { -EINVAL, I }, { -EINVAL, I },     { -EINVAL, I },     { -EINVAL, I }, { -EINVAL, I } },
	[G] = { { 0, G },        { 0, P },       { -EINVAL, G },     { -EINVAL, G },     { -EINVAL, G }, { -EINVAL, G } },
	[P] = { { -EBUSY, P },   { -EBUSY, P },  { 0, D },           { 0, D },           { 0, A },       { -EBUSY, P } },
	[D] = { { -EINVAL, D },  { -EINVAL, D }, { 0, D },           { 0, D },           { -EINVAL, D }, { 0, I } },
	[A] = { { -EINVAL, A },  { -EINVAL, A }, { -ECANCELED, A },  { -ECANCELED, A },  { -EINVAL, A }, { 0, I } },
	[E] = { { -EINVAL, E },  { -EINVAL, E }, { -EIO, E },        { -EIO, E },        { -EINVAL, E }, { 0, I } },
};

static void test_transition_table(void **state)
{
	(void)state;
	for (int s = 0; s < 6; s++) {
		for (int op = 0; op < OP_COUNT; op++) {
			struct ntb_dmaq *q = queue_in((enum ntb_dmaq_state)s);
			int rc = do_op(q, (enum op)op);
			const struct expect *x = &table[s][op];
			if (rc != x->rc || ntb_dmaq_state(q) != x->to)
				fail_msg("%s from %s: rc %d state %s, expected rc %d state %s",
					 op_names[op], ntb_dmaq_state_name((enum ntb_dmaq_state)s),
					 rc, ntb_dmaq_state_name(ntb_dmaq_state(q)), x->rc,
					 ntb_dmaq_state_name(x->to));
			/* "changes nothing": a queue left in Gather still holds exactly its
			 * entries; finish it and look at the window */
			if (ntb_dmaq_state(q) == G) {
				assert_int_equal(ntb_dmaq_post(q), 0);
				assert_int_equal(ntb_dmaq_wait(q, 1000), 0);
			}
			if (ntb_dmaq_state(q) == D) {
				bool has_second = (s == I || s == G) && op == OP_ENQUEUE;
				bool has_first = s != I;
				for (int i = 0; i < 8; i++) {
					assert_int_equal(bin[PAYLOAD_OFF + i], has_first ? payload[i] : 0);
					assert_int_equal(bin[PAYLOAD_OFF + 8 + i],
							 has_second ? payload[i] : 0);
				}
			}
			/* nothing landed from an aborted or failed batch */
			if (s == A || s == E)
				assert_int_equal(bin[PAYLOAD_OFF], 0);
			ntb_dmaq_destroy(q);
		}
	}
}

static void test_create_args_and_names(void **state)
{
	(void)state;
	struct ntb_dmaq *q = (struct ntb_dmaq *)0x1;
	assert_int_equal(ntb_dmaq_create(NULL, 4, &q), -EINVAL);
	assert_int_equal(ntb_dmaq_create(a, 0, &q), -EINVAL);
	assert_ptr_equal(q, (struct ntb_dmaq *)0x1);
	ntb_dmaq_destroy(NULL);
	assert_string_equal(ntb_dmaq_state_name(NTB_DMAQ_IDLE), "idle");
	assert_string_equal(ntb_dmaq_state_name(NTB_DMAQ_GATHER), "gather");
	assert_string_equal(ntb_dmaq_state_name(NTB_DMAQ_POSTED), "posted");
	assert_string_equal(ntb_dmaq_state_name(NTB_DMAQ_DONE), "done");
	assert_string_equal(ntb_dmaq_state_name(NTB_DMAQ_ABORTED), "aborted");
	assert_string_equal(ntb_dmaq_state_name(NTB_DMAQ_ERROR), "error");
	assert_string_equal(ntb_dmaq_state_name((enum ntb_dmaq_state)42), "invalid");
}

static void test_bad_entries(void **state)
{
	(void)state;
	struct ntb_dmaq *q;
	assert_int_equal(ntb_dmaq_create(a, 2, &q), 0);
	assert_int_equal(ntb_dmaq_enqueue(q, WIN - 4, payload, 8), -EINVAL);
	assert_int_equal(ntb_dmaq_enqueue(q, SIZE_MAX - 4, payload, 8), -EINVAL);
	assert_int_equal(ntb_dmaq_enqueue(q, 0, payload, 0), -EINVAL);
	assert_int_equal(ntb_dmaq_enqueue(q, 0, NULL, 8), -EINVAL);
	assert_int_equal(ntb_dmaq_state(q), NTB_DMAQ_IDLE); /* nothing changed */
	assert_int_equal(ntb_dmaq_enqueue(q, 0, payload, 8), 0);
	assert_int_equal(ntb_dmaq_enqueue(q, 8, payload, 8), 0);
	assert_int_equal(ntb_dmaq_enqueue(q, 16, payload, 8), -ENOSPC);
	assert_int_equal(ntb_dmaq_state(q), NTB_DMAQ_GATHER);
	ntb_dmaq_destroy(q);
}

static void test_large_transfer(void **state)
{
	(void)state;
	size_t len1 = (3u << 20) + 123, len2 = 5000;
	uint8_t *src = malloc(len1);
	for (size_t i = 0; i < len1; i++)
		src[i] = (uint8_t)(i * 131 + (i >> 13));
	struct ntb_dmaq *q;
	assert_int_equal(ntb_dmaq_create(a, 8, &q), 0);
	for (int round = 0; round < 2; round++) {
		clear_out(WIN);
		assert_int_equal(ntb_dmaq_enqueue(q, 0, src, len1), 0);
		assert_int_equal(ntb_dmaq_enqueue(q, WIN - len2, src + 7, len2), 0);
		assert_int_equal(ntb_dmaq_post(q), 0);
		/* the engine works in slices: several polls for > 1 MiB */
		assert_int_equal(ntb_dmaq_poll(q), -EINPROGRESS);
		assert_int_equal(ntb_dmaq_state(q), NTB_DMAQ_POSTED);
		assert_int_equal(ntb_dmaq_wait(q, -1), 0);
		assert_int_equal(ntb_dmaq_state(q), NTB_DMAQ_DONE);
		for (size_t i = 0; i < len1; i++)
			if (bin[i] != src[i])
				fail_msg("byte %zu differs", i);
		for (size_t i = 0; i < len2; i++)
			assert_int_equal(bin[WIN - len2 + i], src[7 + i]);
		assert_int_equal(ntb_dmaq_reset(q), 0); /* reusable */
		assert_int_equal(ntb_dmaq_state(q), NTB_DMAQ_IDLE);
	}
	/* wait with a zero timeout on a long batch times out and stays Posted */
	assert_int_equal(ntb_dmaq_enqueue(q, 0, src, len1), 0);
	assert_int_equal(ntb_dmaq_post(q), 0);
	assert_int_equal(ntb_dmaq_wait(q, 0), -ETIMEDOUT);
	assert_int_equal(ntb_dmaq_state(q), NTB_DMAQ_POSTED);
	assert_int_equal(ntb_dmaq_wait(q, -1), 0);
	ntb_dmaq_destroy(q);
	free(src);
}

static void test_abort_mid_transfer(void **state)
{
	(void)state;
	size_t len = 3u << 20;
	uint8_t *src = malloc(len);
	memset(src, 0x5c, len);
	clear_out(WIN);
	struct ntb_dmaq *q;
	assert_int_equal(ntb_dmaq_create(a, 2, &q), 0);
	assert_int_equal(ntb_dmaq_enqueue(q, 0, src, len), 0);
	assert_int_equal(ntb_dmaq_post(q), 0);
	assert_int_equal(ntb_dmaq_poll(q), -EINPROGRESS);
	assert_int_equal(ntb_dmaq_abort(q), 0);
	assert_int_equal(ntb_dmaq_poll(q), -ECANCELED);
	assert_int_equal(ntb_dmaq_wait(q, 100), -ECANCELED);
	/* a prefix landed, the rest never will */
	assert_int_equal(bin[0], 0x5c);
	assert_int_equal(bin[len - 1], 0);
	assert_int_equal(ntb_dmaq_reset(q), 0);
	ntb_dmaq_destroy(q);
	free(src);
}

static void test_faults_apply(void **state)
{
	(void)state;
	struct ntb_link_params p;
	struct ntb_link *fa, *fb;
	char fpath[160];
	snprintf(fpath, sizeof(fpath), "%s-fault", path);
	ntb_link_params_init(&p);
	snprintf(p.name, sizeof(p.name), "dmaqf");
	snprintf(p.path, sizeof(p.path), "%s", fpath);
	p.window_size = 65536;
	p.side = 0;
	p.fault.enabled = true;
	p.fault.drop = 1.0;
	assert_int_equal(ntb_link_open(&p, &fa), 0);
	p.side = 1;
	p.fault.enabled = false;
	assert_int_equal(ntb_link_open(&p, &fb), 0);
	unlink(fpath);
	struct ntb_dmaq *q;
	assert_int_equal(ntb_dmaq_create(fa, 2, &q), 0);
	assert_int_equal(ntb_dmaq_enqueue(q, 0, payload, 8), 0);
	assert_int_equal(ntb_dmaq_post(q), 0);
	assert_int_equal(ntb_dmaq_wait(q, 1000), 0);
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(fb, &sz);
	assert_int_equal(in[0], 0);
	struct ntb_fault_stats st;
	ntb_fault_stats(fa, &st);
	assert_int_equal(st.dropped, 1);
	ntb_dmaq_destroy(q);
	ntb_link_close(fa);
	ntb_link_close(fb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transition_table),
		cmocka_unit_test(test_create_args_and_names),
		cmocka_unit_test(test_bad_entries),
		cmocka_unit_test(test_large_transfer),
		cmocka_unit_test(test_abort_mid_transfer),
		cmocka_unit_test(test_faults_apply),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
