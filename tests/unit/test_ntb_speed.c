/* SPDX-License-Identifier: MIT */
/* Unit tests for ntb/speed.c, the emulated link speed of the shm backend: off by default (the
 * backend's own ops, direct stores), the link clock's accounting (every window byte takes its
 * time on one clock shared by all handles of a side), the latency charged once per publication
 * after writes, and the bytes arriving intact. Asserted on the model's values; the only timed
 * check is a lower bound the waits guarantee. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ntb/ntb_int.h"

#define WIN (1024u * 1024)

static char path[128];
static int path_no;

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-speed-%d-%d", (int)getpid(), path_no++);
	unlink(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static struct ntb_link *open_side(int side, uint64_t bandwidth, uint32_t latency_ns)
{
	struct ntb_link_params p;
	struct ntb_link *l = NULL;

	ntb_link_params_init(&p);
	snprintf(p.name, sizeof(p.name), "speed");
	snprintf(p.path, sizeof(p.path), "%s", path);
	p.side = side;
	p.window_size = WIN;
	p.speed.bandwidth = bandwidth;
	p.speed.latency_ns = latency_ns;
	int rc = ntb_link_open(&p, &l);
	if (rc)
		fail_msg("open side %d: %d %s", side, rc, ntb_strerror_detail());
	return l;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* No speed group: no model, the backend's ops, direct stores allowed. */
static void test_off_by_default(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0, 0, 0);
	struct ntb_speed_stats st;

	assert_null(a->speed);
	assert_ptr_equal(a->ops, &ntb_shm_ops);
	assert_non_null(ntb_out_direct(a));
	assert_int_equal(ntb_write(a, 0, "x", 1), 0);
	ntb_speed_get_stats(a, &st);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(a->local->pace_ns, 0);
	ntb_link_close(a);
}

/* 8 MiB at 64 MiB/s: the side's clock moves by at least 125 ms of link time, the writer waited
 * for it less the queue it may run ahead by (128 KiB: 2 ms), the bytes landed whole in the
 * peer's window. */
static void test_bandwidth_accounting(void **state)
{
	(void)state;
	const uint64_t bw = 64ull << 20, chunk = 64 * 1024, total = 8ull << 20;
	struct ntb_link *a = open_side(0, bw, 0);
	struct ntb_link *b = open_side(1, 0, 0);
	struct ntb_speed_stats st;
	uint8_t *buf = malloc(chunk);
	size_t in_size;
	const volatile uint8_t *in = ntb_in_window(b, &in_size);

	assert_non_null(a->speed);
	assert_null(ntb_out_direct(a)); /* every store goes through the model */
	assert_non_null(buf);
	uint64_t t0 = mono_ns();
	for (uint64_t done = 0; done < total; done += chunk) {
		memset(buf, (int)(done / chunk) & 0xff, chunk);
		assert_int_equal(ntb_write(a, (size_t)(done % (WIN / 2)), buf, chunk), 0);
		assert_int_equal(in[done % (WIN / 2)], (uint8_t)(done / chunk));
		assert_int_equal(in[done % (WIN / 2) + chunk - 1], (uint8_t)(done / chunk));
	}
	uint64_t t1 = mono_ns();
	uint64_t cost = total * 1000000000ull / bw; /* 125 ms */
	uint64_t ahead = 131072ull * 1000000000ull / bw; /* the queue the writer may run ahead by */

	ntb_speed_get_stats(a, &st);
	assert_int_equal(st.bytes, total);
	/* the clock: intervals are disjoint and none starts before t0 */
	assert_true(a->local->pace_ns >= t0 + cost - 500000); /* (less the clock's slack) */
	assert_true(a->local->pace_ns <= t1 + ahead);
	/* the writer waited for its bytes (all but the queue's and the first chunk's worth) */
	assert_true(t1 - t0 >= cost - 500000 - ahead);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	/* instrumented: the writer's own copies and checks take much of the modelled time, and
	 * what they take is not waited for; it still waited */
	assert_true(st.bw_wait_ns > 0);
#else
	/* most of the modelled time was waited for (the rest: the writer's own copies, and any
	 * time it was descheduled outside its waits, which on a loaded machine exceeded the
	 * cost / 64 this allowed before: one failure seen in a helper's runs) */
	assert_true(st.bw_wait_ns >= cost / 2);
#endif
	/* the reading side is not modelled and kept its own clock */
	assert_int_equal(b->local->pace_ns, 0);
	free(buf);
	ntb_link_close(b);
	ntb_link_close(a);
}

/* Two handles of one side share its clock: together they cannot exceed the bandwidth. */
/* A write within the queue a writer may run ahead by (128 KiB) claims its time on the clock
 * without waiting: one thread can feed two links at once. */
static void test_queue_ahead(void **state)
{
	(void)state;
	const uint64_t bw = 1ull << 20, chunk = 64 * 1024; /* 62.5 ms of link time */
	struct ntb_link *a = open_side(0, bw, 0);
	struct ntb_speed_stats st;
	static uint8_t buf[64 * 1024];

	uint64_t t0 = mono_ns();
	assert_int_equal(ntb_write(a, 0, buf, chunk), 0);
	ntb_speed_get_stats(a, &st);
	assert_int_equal(st.bw_wait_ns, 0);
	assert_true(a->local->pace_ns >= t0 + chunk * 1000000000ull / bw - 500000); /* (slack) */
	/* the next 128 KiB go beyond the queue: that write waits */
	assert_int_equal(ntb_write(a, 0, buf, chunk), 0);
	assert_int_equal(ntb_write(a, 0, buf, chunk), 0);
	ntb_speed_get_stats(a, &st);
	assert_true(st.bw_wait_ns > 0);
	ntb_link_close(a);
}

static void test_shared_clock(void **state)
{
	(void)state;
	const uint64_t bw = 32ull << 20, chunk = 32 * 1024;
	struct ntb_link *a1 = open_side(0, bw, 0);
	struct ntb_link *a2 = open_side(0, bw, 0);
	static uint8_t buf[32 * 1024];

	uint64_t t0 = mono_ns();
	for (int i = 0; i < 64; i++)
		assert_int_equal(ntb_write(i % 2 ? a2 : a1, 0, buf, chunk), 0);
	uint64_t cost = 64 * chunk * 1000000000ull / bw; /* 62.5 ms */

	assert_int_equal(a1->local->pace_ns, a2->local->pace_ns); /* one clock in the file */
	assert_true(a1->local->pace_ns >= t0 + cost - 500000);
	assert_true(mono_ns() - t0 >= cost - 500000 - 131072ull * 1000000000ull / bw);
	ntb_link_close(a2);
	ntb_link_close(a1);
}

/* Latency: the first barrier after writes waits it, a barrier with nothing written does not. */
static void test_latency_per_publication(void **state)
{
	(void)state;
	const uint32_t lat = 200000; /* 200 µs */
	struct ntb_link *a = open_side(0, 0, lat);
	struct ntb_speed_stats st;

	ntb_to_peer_barrier(a);
	ntb_speed_get_stats(a, &st);
	assert_int_equal(st.barriers, 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(ntb_write32(a, 128, (uint32_t)i), 0);
		assert_int_equal(ntb_write32(a, 256, (uint32_t)i), 0);
		ntb_to_peer_barrier(a);
		ntb_to_peer_barrier(a); /* nothing new: no wait */
	}
	ntb_speed_get_stats(a, &st);
	assert_int_equal(st.barriers, 10);
	assert_int_equal(st.bytes, 80);
	assert_true(st.lat_wait_ns >= 10ull * lat);
	assert_int_equal(st.bw_wait_ns, 0); /* bandwidth unlimited */
	ntb_link_close(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_off_by_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bandwidth_accounting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_ahead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared_clock, setup, teardown),
		cmocka_unit_test_setup_teardown(test_latency_per_publication, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
