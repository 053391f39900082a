/* SPDX-License-Identifier: MIT */
/* Unit tests for ntb/link.c and ntb/shm.c in one process: parameters, file creation and
 * validation, side claiming and crash recovery, sessions and epochs, link state, windows,
 * doorbells, scratchpads, inspect-only handles, mapping checks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "ntb/ntb_int.h"
#include "tests/helpers/ev_probe.h"
#include "util/crc32c.h"
#include "util/fdpark.h"

#define WIN (256u * 1024)

static char path[128];
static int path_no;

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-link-%d-%d", (int)getpid(), path_no++);
	unlink(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static void params(struct ntb_link_params *p, int side)
{
	ntb_link_params_init(p);
	snprintf(p->name, sizeof(p->name), "test");
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->side = side;
	p->window_size = WIN;
	p->heartbeat_ms = 10;
	p->link_timeout_ms = 300;
}

static struct ntb_link *open_side(int side)
{
	struct ntb_link_params p;
	struct ntb_link *l = NULL;
	params(&p, side);
	int rc = ntb_link_open(&p, &l);
	if (rc)
		fail_msg("open side %d: %d %s", side, rc, ntb_strerror_detail());
	return l;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Tick both until both are up or 2 s pass. */
static bool both_up(struct ntb_link *a, struct ntb_link *b)
{
	for (int i = 0; i < 400; i++) {
		bool ua = ntb_link_tick(a), ub = ntb_link_tick(b);
		if (ua && ub)
			return true;
		sleep_ms(5);
	}
	return false;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Tick A (and B, when given) until A has seen B's heartbeat move since now: returns the time of
 * B's last tick before that. */
static uint64_t see_peer_move(struct ntb_link *a, struct ntb_link *b)
{
	uint32_t hb = atomic_load(&a->ctrl_in->heartbeat.v);
	uint64_t t_b = 0;
	for (int i = 0; i < 400; i++) {
		t_b = mono_ms();
		ntb_link_tick(b);
		ntb_link_tick(a);
		if (atomic_load(&a->peer_hb_last) != hb)
			return t_b;
		sleep_ms(5);
	}
	fail_msg("the peer's heartbeat never moved");
	return 0;
}

/* A peer side nobody has enabled, or whose last process closed the link, is absent: known at
 * once, no waiting (a wait would take the 60 s given here). */
static void test_peer_absent(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_peer_state(a), NTB_PEER_ABSENT);
	assert_int_equal(ntb_link_wait_peer(a, 60000), -EHOSTDOWN);
	assert_int_equal(ntb_link_enable(b), 0);
	assert_int_equal(ntb_link_wait_peer(a, 60000), 0);
	assert_int_equal(ntb_link_peer_state(a), NTB_PEER_UP);
	ntb_link_close(b);
	assert_int_equal(ntb_link_peer_state(a), NTB_PEER_ABSENT);
	assert_int_equal(ntb_link_wait_peer(a, 60000), -EHOSTDOWN);
	ntb_link_close(a);
}

/* B's helper thread, as the transport's: sleeps on B's doorbell, and when rung asks for a
 * heartbeat at once (ntb_link_beat_soon()) before its tick. */
struct beat_helper {
	struct ntb_link *b;
	_Atomic bool stop;
	_Atomic int rings;
};

static void *beat_helper_main(void *arg)
{
	struct beat_helper *h = arg;
	uint32_t seen = ntb_db_read(h->b);

	while (!atomic_load(&h->stop)) {
		ntb_db_wait(h->b, seen, 10);
		uint32_t db = ntb_db_read(h->b);
		if (db != seen) {
			seen = db;
			atomic_fetch_add(&h->rings, 1);
			ntb_link_beat_soon(h->b);
		}
		ntb_link_tick(h->b);
	}
	return NULL;
}

/* A new handle that never saw the live peer's heartbeat move (the first process of its host to
 * look) rings the peer, which beats at once: it is up long before the peer's next heartbeat
 * (5 s here; it waited for that before, up to heartbeat_ms: 100 ms by default). */
static void test_peer_beats_when_rung(void **state)
{
	(void)state;
	struct ntb_link_params pa, pb;
	struct ntb_link *a = NULL, *b = NULL;
	struct beat_helper h = { 0 };
	pthread_t t;

	params(&pb, 1);
	pb.heartbeat_ms = 5000;
	pb.link_timeout_ms = 20000;
	assert_int_equal(ntb_link_open(&pb, &b), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	h.b = b;
	assert_int_equal(pthread_create(&t, NULL, beat_helper_main, &h), 0);
	params(&pa, 0);
	pa.heartbeat_ms = 5000;
	pa.link_timeout_ms = 20000;
	assert_int_equal(ntb_link_open(&pa, &a), 0);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_peer_state(a), NTB_PEER_UNKNOWN); /* seen, never moving */
	uint64_t t0 = mono_ms();
	assert_int_equal(ntb_link_wait_peer(a, 3000), 0);
	assert_true(mono_ms() - t0 < 3000);
	assert_true(atomic_load(&h.rings) >= 1);
	/* a ring that asks for nothing (the data path's) writes no heartbeat (after a pause: a
	 * second request the wait made just before it returned is served first) */
	sleep_ms(60);
	uint32_t hb0 = atomic_load_explicit(&b->ctrl_out->heartbeat.v, memory_order_acquire);
	int rings = atomic_load(&h.rings);
	ntb_peer_db_ring(a);
	for (int i = 0; i < 200 && atomic_load(&h.rings) == rings; i++)
		sleep_ms(5);
	assert_true(atomic_load(&h.rings) > rings);
	sleep_ms(20); /* (its tick after the ring) */
	assert_int_equal(atomic_load_explicit(&b->ctrl_out->heartbeat.v, memory_order_acquire),
			 hb0);
	atomic_store(&h.stop, true);
	pthread_join(t, NULL);
	/* at most one extra heartbeat per NTB_BEAT_SOON_NS, however often it is asked */
	uint64_t t1 = mono_ms();
	for (uint32_t i = 0; i < 100; i++) {
		atomic_store_explicit(&a->ctrl_out->beat_req.v, 2u * i + 3u, memory_order_relaxed);
		ntb_link_beat_soon(b);
		ntb_link_tick(b);
	}
	uint32_t hb1 = atomic_load_explicit(&b->ctrl_out->heartbeat.v, memory_order_acquire);
	assert_true(hb1 != hb0); /* asked: it beat */
	assert_true(hb1 - hb0 <= (uint32_t)(mono_ms() - t1) + 2u);
	ntb_link_close(a);
	ntb_link_close(b);
}

/* A peer whose heartbeat stops (its processes killed or stopped: nothing announced) is only
 * "unknown" while the heartbeat may just be late (a loaded host), dead once it stood still for
 * ntb_link_dead_ms(); a new process of this host knows that at once from the host's record. */
static void test_peer_dead_after_silence(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	uint32_t dead_ms = ntb_link_dead_ms(a);
	assert_int_equal(dead_ms, 1000); /* 2 x 300 ms, raised to the 1 s floor */
	uint64_t last_b = see_peer_move(a, b); /* from here on B never ticks */
	for (;;) {
		enum ntb_peer_state st = ntb_link_peer_state(a);
		uint64_t after = mono_ms();
		if (after - last_b < dead_ms) /* (B's last heartbeat is at most this old) */
			assert_int_not_equal(st, NTB_PEER_DEAD);
		if (st == NTB_PEER_DEAD)
			break;
		assert_true(after - last_b < dead_ms + 5000);
		sleep_ms(20);
	}
	assert_int_equal(ntb_link_wait_peer(a, 60000), -EHOSTDOWN);
	/* a new handle of this host: dead at its first look */
	struct ntb_link *a2 = open_side(0);
	assert_int_equal(ntb_link_enable(a2), 0);
	assert_int_equal(ntb_link_peer_state(a2), NTB_PEER_DEAD);
	/* the peer ticks again: alive */
	ntb_link_tick(b);
	assert_int_not_equal(ntb_link_peer_state(a2), NTB_PEER_DEAD);
	assert_int_equal(ntb_link_wait_peer(a2, 60000), 0);
	ntb_link_close(a2);
	ntb_link_close(b);
	ntb_link_close(a);
}

/* A new handle finds a live peer up at its first tick when another process of this host saw
 * the heartbeat move within link_timeout_ms (before, it waited for a move of its own). */
static void test_peer_up_from_host_record(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	uint64_t t = see_peer_move(a, b);
	struct ntb_link *a2 = open_side(0);
	assert_int_equal(ntb_link_enable(a2), 0);
	bool up = ntb_link_tick(a2);
	if (mono_ms() - t < 300) /* (the record is younger than link_timeout_ms) */
		assert_true(up);
	ntb_link_close(a2);
	ntb_link_close(b);
	ntb_link_close(a);
}

/* With no sighting on this host that dates the peer's heartbeat, its wall-clock stamp decides:
 * older than ntb_link_dead_ms() + NTB_WALL_SLACK_S → dead; recent, or not written → unknown;
 * a recent sighting of a move outweighs an old stamp. */
static void test_peer_dead_by_wall_stamp(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	ntb_link_close(a);
	/* B falls silent (never ticks again); this host's record is forgotten */
	struct ntb_link *a2 = open_side(0);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	atomic_store(&a2->local->peer_hb_seen, 0);
	atomic_store(&a2->ctrl_in->hb_wall.v, (uint32_t)now.tv_sec);
	assert_int_equal(ntb_link_enable(a2), 0);
	atomic_store(&a2->local->peer_hb_seen, 0);
	assert_int_not_equal(ntb_link_peer_state(a2), NTB_PEER_DEAD);
	atomic_store(&a2->ctrl_in->hb_wall.v, (uint32_t)now.tv_sec - 4u - NTB_WALL_SLACK_S);
	assert_int_equal(ntb_link_peer_state(a2), NTB_PEER_DEAD);
	atomic_store(&a2->ctrl_in->hb_wall.v, 0); /* a writer without the stamp */
	assert_int_equal(ntb_link_peer_state(a2), NTB_PEER_UNKNOWN);
	/* a move seen just now (a recent record of another value) */
	atomic_store(&a2->ctrl_in->hb_wall.v, (uint32_t)now.tv_sec - 100u);
	uint32_t hb = atomic_load(&a2->ctrl_in->heartbeat.v);
	struct timespec m;
	clock_gettime(CLOCK_MONOTONIC, &m);
	uint32_t ms31 = (uint32_t)(((uint64_t)m.tv_sec * 1000u + (uint64_t)m.tv_nsec / 1000000u) &
				   0x7fffffffu);
	atomic_store(&a2->local->peer_hb_seen, NTB_HB_SEEN(hb - 1u, true, ms31));
	assert_int_equal(ntb_link_peer_state(a2), NTB_PEER_UNKNOWN);
	/* ... or of this very value: the peer counts as up (a new process needs no move of
	 * its own) */
	atomic_store(&a2->local->peer_hb_seen, NTB_HB_SEEN(hb, true, ms31));
	assert_int_equal(ntb_link_peer_state(a2), NTB_PEER_UP);
	ntb_link_close(a2);
	ntb_link_close(b);
}

/* The age of the peer's last heartbeat does not depend on how late this side looked: B's last
 * heartbeats are seen by A only 300 ms after B fell silent (A's observer starved), and A still
 * dates them 300 ms back by B's stamp (a sighting-based age would say "just now"). */
static void test_peer_hb_age_by_stamp(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	for (int i = 0; i < 100; i++) { /* prompt looks: the offset bound is tight */
		ntb_link_tick(a);
		ntb_link_tick(b);
		sleep_ms(1);
	}
	/* A stops looking; B goes on for 60 ms (several new heartbeats), then falls silent */
	for (int i = 0; i < 60; i++) {
		ntb_link_tick(b);
		sleep_ms(1);
	}
	uint64_t silent = mono_ms();
	sleep_ms(300);
	int64_t age0 = ntb_link_peer_hb_age_ms(a); /* before A's late look */
	ntb_link_tick(a); /* the late look: it sees B's last heartbeat for the first time */
	int64_t age = ntb_link_peer_hb_age_ms(a);
	int64_t real = (int64_t)(mono_ms() - silent);
	/* about the silence: B's last heartbeat precedes it by up to a period (10 ms) and a
	 * sleep's overshoot; the bound on the offset is our quickest look (under a ms when idle,
	 * more on a loaded machine); ms truncation on both clocks. A sighting-based age is ~0. */
	if (age0 < 300 || age < 250 || age > real + 30)
		fail_msg("peer heartbeat age %lld ms before the late look, %lld after it; silent "
			 "for %lld ms", (long long)age0, (long long)age, (long long)real);
	ntb_link_close(b);
	ntb_link_close(a);
}

/* A peer whose heartbeat moves while its stamp does not (a writer that predates the stamp, over
 * a control page a newer one stamped) gives no stamp-based age: dated from that frozen stamp,
 * its heartbeat would look older and older (a clean death read as one behind a silent link). */
static void test_peer_hb_frozen_stamp(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	for (int i = 0; i < 200; i++) {
		ntb_link_tick(b);
		atomic_store(&a->ctrl_in->hb_mono.v, 12345u); /* (B's writes undone) */
		ntb_link_tick(a);
		sleep_ms(1);
	}
	uint64_t last = mono_ms();
	sleep_ms(100);
	int64_t age = ntb_link_peer_hb_age_ms(a);
	int64_t real = (int64_t)(mono_ms() - last) + 10; /* (+ one heartbeat period) */
	if (age > real + 5)
		fail_msg("peer heartbeat age %lld ms from a frozen stamp: older than the %lld ms "
			 "it can be", (long long)age, (long long)real);
	ntb_link_close(b);
	ntb_link_close(a);
}

static void test_params_init(void **state)
{
	(void)state;
	struct ntb_link_params p;
	memset(&p, 0x5a, sizeof(p));
	ntb_link_params_init(&p);
	assert_int_equal(p.side, -1);
	assert_int_equal(p.window_size, 16u << 20);
	assert_int_equal(p.mode, 0600);
	assert_int_equal(p.group, (gid_t)-1);
	assert_int_equal(p.bar, -1);
	assert_int_equal(p.heartbeat_ms, 100);
	assert_int_equal(p.link_timeout_ms, 500);
	assert_string_equal(p.backend, "shm");
	assert_false(p.fault.enabled);
	assert_false(p.inspect_only);
	assert_false(p.allow_foreign_owner);
	assert_string_equal(p.path, "");
}

static void test_bad_params(void **state)
{
	(void)state;
	struct ntb_link_params p;
	struct ntb_link *l = (struct ntb_link *)0x1;

	params(&p, 0); p.name[0] = 0;
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	params(&p, 0); snprintf(p.name, sizeof(p.name), "../etc");
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	assert_non_null(strstr(ntb_strerror_detail(), "only letters"));
	params(&p, 2);
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	params(&p, 0); p.window_size = 5000;
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	params(&p, 0); p.link_timeout_ms = 10;
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	params(&p, 0); p.fault.enabled = true; p.fault.drop = 1.5;
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	params(&p, 0); snprintf(p.backend, sizeof(p.backend), "rdma");
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	assert_non_null(strstr(ntb_strerror_detail(), "no backend \"rdma\""));
	assert_int_equal(ntb_link_open(NULL, &l), -EINVAL);
	assert_ptr_equal(l, (struct ntb_link *)0x1); /* ret_link untouched on failure */
	assert_int_equal(access(path, F_OK), -1);  /* nothing created */
	ntb_link_close(NULL);
}

static void test_create_file(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal((size_t)st.st_size, ntb_region_size_for(WIN));
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(ntb_link_side(a), 0);
	assert_string_equal(ntb_link_name(a), "test");
	assert_string_equal(ntb_link_backend(a), "shm");
	assert_int_not_equal(ntb_link_epoch(a), 0);
	assert_int_equal(ntb_link_peer_epoch(a), 0);
	assert_int_equal(ntb_out_size(a), WIN);
	size_t in_size = 0;
	assert_non_null(ntb_in_window(a, &in_size));
	assert_int_equal(in_size, WIN);
	assert_int_equal(ntb_spad_count(a), NTB_SPAD_COUNT);
	assert_int_equal(ntb_db_fd(a), -ENOTSUP);
	assert_int_equal(ntb_link_check_mapping(a), 0);
	struct ntb_fault_stats fs;
	memset(&fs, 0xff, sizeof(fs));
	ntb_fault_stats(a, &fs);
	assert_int_equal(fs.writes + fs.dropped + fs.corrupted + fs.delayed, 0);
	ntb_link_close(a);
	/* no temporary files left behind */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ls %s.tmp.* 2>/dev/null | grep -q .", path);
	assert_int_not_equal(system(cmd), 0);
	/* the file stays for the peer */
	assert_int_equal(access(path, F_OK), 0);
}

static void test_create_mode(void **state)
{
	(void)state;
	struct ntb_link_params p;
	struct ntb_link *a;
	struct stat st;
	params(&p, 0);
	p.mode = 0660;
	p.group = getegid();
	assert_int_equal(ntb_link_open(&p, &a), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0660);
	assert_int_equal(st.st_gid, getegid());
	ntb_link_close(a);
}

static void test_two_sides_up(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	assert_int_equal(ntb_link_side(b), 1);
	assert_int_not_equal(ntb_link_epoch(a), ntb_link_epoch(b));
	assert_false(ntb_link_tick(a));
	assert_int_equal(ntb_link_wait_up(a, 30), -ETIMEDOUT);
	assert_int_equal(ntb_link_enable(a), 0);
	assert_int_equal(ntb_link_enable(a), 0); /* idempotent */
	sleep_ms(30);
	assert_false(ntb_link_tick(a)); /* peer not enabled */
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	assert_true(ntb_link_is_up(a));
	assert_int_equal(ntb_link_peer_epoch(a), ntb_link_epoch(b));
	assert_int_equal(ntb_link_peer_epoch(b), ntb_link_epoch(a));
	assert_int_equal(ntb_link_wait_up(b, 1000), 0);

	struct ntb_link_info info;
	assert_int_equal(ntb_link_info(a, &info), 0);
	assert_true(info.up);
	assert_true(info.enabled);
	assert_true(info.peer_enabled);
	assert_int_equal(info.side, 0);
	assert_int_equal(info.window_size, WIN);
	assert_int_equal(info.epoch, ntb_link_epoch(a));
	assert_int_equal(info.peer_epoch, ntb_link_epoch(b));
	assert_int_equal(info.claims[0], 1);
	assert_int_equal(info.claims[1], 1);
	assert_string_equal(info.location, path);
	assert_true(info.peer_hb_age_ms >= 0 && info.peer_hb_age_ms < 1000);

	/* disable: the peer sees down at its next check */
	assert_int_equal(ntb_link_disable(b), 0);
	assert_false(ntb_link_tick(a));
	assert_int_equal(ntb_link_peer_epoch(a), 0);
	assert_false(ntb_link_tick(b));
	/* re-enable: same epoch (same session) */
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	assert_int_equal(ntb_link_peer_epoch(a), ntb_link_epoch(b));

	/* heartbeat staleness: b stops ticking → a sees down after the timeout */
	uint64_t t0 = clock_mono_ns();
	while (ntb_link_tick(a)) {
		sleep_ms(5);
		assert_true(clock_mono_ns() - t0 < 1000000000ull);
	}
	uint64_t took = clock_mono_ns() - t0;
	assert_true(took >= 50000000ull); /* not before roughly the timeout */
	assert_true(ntb_link_tick(b) || true);
	assert_true(both_up(a, b)); /* resumes */

	/* close: the last handle of side 1 announces down at once */
	ntb_link_close(b);
	assert_false(ntb_link_tick(a));
	ntb_link_close(a);
}

static void test_claims_and_sessions(void **state)
{
	(void)state;
	struct ntb_link *a1 = open_side(-1), *b1 = open_side(-1);
	assert_int_equal(ntb_link_side(a1), 0);
	assert_int_equal(ntb_link_side(b1), 1);
	struct ntb_link_params p;
	struct ntb_link *x;
	params(&p, -1);
	assert_int_equal(ntb_link_open(&p, &x), -EBUSY);
	assert_non_null(strstr(ntb_strerror_detail(), "both sides"));
	/* an explicit side joins the side's session (several processes of one host) */
	struct ntb_link *a2 = open_side(0);
	assert_int_equal(ntb_link_epoch(a2), ntb_link_epoch(a1));
	uint32_t e_a = ntb_link_epoch(a1), e_b = ntb_link_epoch(b1);

	assert_int_equal(ntb_link_enable(a1), 0);
	assert_int_equal(ntb_link_enable(a2), 0);
	assert_int_equal(ntb_link_enable(b1), 0);
	assert_true(both_up(a1, b1));
	assert_true(both_up(a2, b1));
	/* one of two handles of side 0 closes: the link stays up, same epoch */
	ntb_link_close(a1);
	assert_true(ntb_link_tick(b1));
	assert_int_equal(ntb_link_peer_epoch(b1), e_a);
	assert_true(both_up(a2, b1));
	assert_int_equal(ntb_link_peer_epoch(b1), e_a);
	/* the last one closes: session ends; a new opener starts a new epoch */
	ntb_link_close(a2);
	assert_false(ntb_link_tick(b1));
	struct ntb_link *a3 = open_side(0);
	assert_int_not_equal(ntb_link_epoch(a3), e_a);
	assert_int_not_equal(ntb_link_epoch(a3), 0);
	assert_int_equal(ntb_link_enable(a3), 0);
	assert_true(both_up(a3, b1));
	assert_int_equal(ntb_link_peer_epoch(b1), ntb_link_epoch(a3));
	assert_int_equal(ntb_link_epoch(b1), e_b);
	ntb_link_close(a3);
	ntb_link_close(b1);
}

static void test_dead_claim_reaped(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0);
	uint32_t e = ntb_link_epoch(a);
	/* Forge a claim on side 1 by a process that does not exist and a stale lock. */
	struct ntb_side_local *l1 = (struct ntb_side_local *)(a->base + a->hdr.local_off[1]);
	atomic_store(&l1->slots[5].owner, (7ull << 32) | 4000000u);
	atomic_store(&l1->slots[5].enabled, 1);
	atomic_store(&l1->lock, 4000001u);
	/* and a claim on side 0 by a live process with a wrong start time (recycled pid) */
	struct ntb_side_local *l0 = a->local;
	atomic_store(&l0->slots[9].owner, (3ull << 32) | (uint32_t)getppid());
	atomic_store(&l0->slots[9].starttime, 1);
	struct ntb_link *b = open_side(-1); /* side 0 is live (us), side 1 reclaimable */
	assert_int_equal(ntb_link_side(b), 1);
	assert_int_equal(atomic_load(&l1->slots[5].owner), 0);
	assert_int_equal(atomic_load(&l1->lock), 0);
	ntb_link_close(a);
	/* a's close reaped the recycled-pid slot, so side 0 starts a new session */
	struct ntb_link *a2 = open_side(0);
	assert_int_equal(atomic_load(&l0->slots[9].owner), 0);
	assert_int_not_equal(ntb_link_epoch(a2), e);
	ntb_link_close(a2);
	ntb_link_close(b);
}

/* A process that died asleep on the doorbell (killed in ntb_db_wait()) stays counted in its
 * side's db_waiters: each ring of the peer then made a futex wake system call for nobody, for
 * the life of the link file (the second 10,000-connection run on a link whose server had been
 * killed: twice as long per echo round). The reaper of its claim takes its count back; a new
 * session starts with none. */
static void test_dead_waiter_uncounted(void **state)
{
	(void)state;
	struct ntb_link *b = open_side(1);
	struct ntb_side_local *l1 = b->local;

	/* a dead process of side 1 that had 2 threads asleep, beside our live claim */
	atomic_store(&l1->slots[7].owner, (9ull << 32) | 4000002u);
	atomic_store(&l1->slots[7].waiting, 2);
	atomic_fetch_add(&l1->db_waiters, 2);
	uint32_t before = atomic_load(&l1->db_waiters) - 2u;
	struct ntb_link *b2 = open_side(1); /* its claim reaps slot 7 */
	assert_int_equal(atomic_load(&l1->slots[7].owner), 0);
	assert_int_equal(atomic_load(&l1->db_waiters), before);
	/* our own waiter counts itself in our slot, and uncounts itself */
	uint32_t seen = ntb_db_read(b2);
	assert_int_equal(ntb_db_wait_us(b2, seen, 200), -ENOLINK); /* (link down: at once) */
	assert_int_equal(atomic_load(&l1->slots[b2->slot].waiting), 0);
	ntb_link_close(b2);
	ntb_link_close(b);
	/* a side whose every process died: the new session counts nobody */
	struct ntb_link *a = open_side(0);
	struct ntb_side_local *l1a = (struct ntb_side_local *)(a->base + a->hdr.local_off[1]);

	atomic_store(&l1a->slots[3].owner, (5ull << 32) | 4000003u);
	atomic_store(&l1a->db_waiters, 5); /* (more than any slot says: counts of an older build) */
	struct ntb_link *b3 = open_side(1);
	assert_int_equal(atomic_load(&l1a->db_waiters), 0);
	ntb_link_close(b3);
	ntb_link_close(a);
}

/* A claim of our own pid but another program image is one that exec replaced: reaped, so a
 * process that execs again and again does not run out of slots; one of this image, or with
 * no image recorded (an older library), is live. */
static void test_exec_image_reaped(void **state)
{
	(void)state;
	uint32_t tag = ntb_image_tag(), other = tag ^ 0x5a5a5a5au;
	struct ntb_link *a = open_side(0);
	struct ntb_side_local *l = a->local;
	uint64_t me_start = atomic_load(&l->slots[a->slot].starttime);

	assert_int_not_equal(tag, 0);
	assert_int_equal(ntb_image_tag(), tag); /* one per image */
	assert_int_equal(atomic_load(&l->slots[a->slot].image), tag);
	if (!other)
		other = 1;
	/* every other slot: claims of earlier images of this process (exec'ed away), but slot K
	 * without an image tag */
	int k = a->slot == 7 ? 8 : 7;

	for (int i = 0; i < NTB_SIDE_SLOTS; i++) {
		if (i == a->slot)
			continue;
		atomic_store(&l->slots[i].owner, ((uint64_t)(100 + i) << 32) | (uint32_t)getpid());
		atomic_store(&l->slots[i].starttime, me_start);
		atomic_store(&l->slots[i].image, i == k ? 0 : other);
		atomic_store(&l->slots[i].enabled, 1);
	}
	/* a new handle of this image finds them stale and takes one; a's and slot K stay */
	struct ntb_link *b = open_side(0);

	assert_non_null(b);
	assert_int_equal(ntb_link_epoch(b), ntb_link_epoch(a)); /* the same session */
	for (int i = 0; i < NTB_SIDE_SLOTS; i++) {
		uint64_t owner = atomic_load(&l->slots[i].owner);

		if (i == a->slot || i == b->slot)
			assert_int_equal(owner & 0xffffffffu, (uint32_t)getpid());
		else if (i == k)
			assert_int_equal(owner, ((uint64_t)(100 + k) << 32) | (uint32_t)getpid());
		else
			assert_int_equal(owner, 0);
	}
	assert_int_equal(atomic_load(&l->slots[b->slot].image), tag);
	atomic_store(&l->slots[k].owner, 0);
	ntb_link_close(b);
	ntb_link_close(a);
}

/* The session: a side whose only claim is a replaced image's lives on (same epoch: the
 * connections the new program adopts go on); one whose only claim is a dead process's that
 * had our pid (another start time) starts a new session. */
static void test_exec_image_session(void **state)
{
	(void)state;
	uint32_t other = ntb_image_tag() ^ 0x5a5a5a5au;

	if (!other)
		other = 1;
	struct ntb_link *a = open_side(0);
	uint32_t e = ntb_link_epoch(a);
	struct ntb_side_slot *sa = &a->local->slots[a->slot];

	atomic_store(&sa->image, other); /* a: the program before our exec */
	struct ntb_link *b = open_side(0);

	assert_int_equal(ntb_link_epoch(b), e);
	assert_int_not_equal(atomic_load(&sa->owner), a->owner); /* freed (maybe b's now) */
	ntb_link_close(a); /* (its slot is no longer its own: nothing changes) */
	assert_int_equal(atomic_load(&b->local->slots[b->slot].owner), b->owner);
	/* b's slot: our pid, another image, another start time: a dead process's */
	struct ntb_side_slot *sb = &b->local->slots[b->slot];

	atomic_store(&sb->image, other);
	atomic_store(&sb->starttime, 1);
	struct ntb_link *c = open_side(0);

	assert_int_not_equal(ntb_link_epoch(c), e);
	ntb_link_close(b);
	ntb_link_close(c);
}

static void test_windows(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	size_t sz;
	const volatile uint8_t *bin = ntb_in_window(b, &sz);
	const volatile uint8_t *ain = ntb_in_window(a, &sz);
	uint8_t buf[1000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(ntb_write(a, 100, buf, sizeof(buf)), 0);
	ntb_to_peer_barrier(a);
	ntb_wc_flush(a);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(bin[100 + i], buf[i]);
	assert_int_equal(ain[100], 0); /* a's own inbound window untouched */
	assert_int_equal(ntb_write(a, WIN - 10, buf, 10), 0);
	assert_int_equal(bin[WIN - 1], buf[9]);
	assert_int_equal(ntb_write(a, 0, buf, 0), 0);
	assert_int_equal(ntb_write(a, WIN, buf, 0), 0);
	/* bounds */
	assert_int_equal(ntb_write(a, WIN - 9, buf, 10), -EINVAL);
	assert_int_equal(ntb_write(a, WIN + 1, buf, 0), -EINVAL);
	assert_int_equal(ntb_write(a, SIZE_MAX - 2, buf, 10), -EINVAL);
	assert_int_equal(ntb_write(a, 8, buf, SIZE_MAX), -EINVAL);
	/* one pass to the window and a shadow, with the CRC (every length path of the copy) */
	static uint8_t src[70000], shadow[70000 + 64];
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 11 + 3);
	for (size_t len = 0; len <= sizeof(src); len = len * 3 + 7) {
		uint32_t crc = 1;
		memset(shadow, 0x5a, sizeof(shadow));
		assert_int_equal(ntb_write_dup_crc(a, 4096 + len % 61, shadow + 1, src, len, 42, &crc), 0);
		assert_int_equal(crc, crc32c(42, src, len));
		assert_memory_equal(shadow + 1, src, len);
		assert_int_equal(shadow[0], 0x5a);
		assert_int_equal(shadow[len + 1], 0x5a);
		for (size_t i = 0; i < len; i++)
			if (bin[4096 + len % 61 + i] != src[i])
				fail_msg("len %zu: window byte %zu differs", len, i);
	}
	/* bounds: nothing copied, the CRC out-parameter untouched */
	uint32_t crc = 5;
	memset(shadow, 0x5a, sizeof(shadow));
	assert_int_equal(ntb_write_dup_crc(a, WIN - 9, shadow, src, 10, 0, &crc), -EINVAL);
	assert_int_equal(ntb_write_dup_crc(a, SIZE_MAX - 2, shadow, src, 10, 0, &crc), -EINVAL);
	assert_int_equal(crc, 5);
	assert_int_equal(shadow[0], 0x5a);
	/* single stores */
	assert_int_equal(ntb_write8(b, 3, 0xab), 0);
	assert_int_equal(ntb_write32(b, 8, 0x12345678u), 0);
	assert_int_equal(ntb_write64(b, 16, 0x1122334455667788ull), 0);
	assert_int_equal(ain[3], 0xab);
	assert_int_equal(*(const volatile uint32_t *)(ain + 8), 0x12345678u);
	assert_int_equal(*(const volatile uint64_t *)(ain + 16), 0x1122334455667788ull);
	assert_int_equal(ntb_write8(b, WIN - 1, 1), 0);
	assert_int_equal(ntb_write8(b, WIN, 1), -EINVAL);
	assert_int_equal(ntb_write32(b, 6, 1), -EINVAL);  /* misaligned */
	assert_int_equal(ntb_write64(b, 12, 1), -EINVAL); /* misaligned */
	assert_int_equal(ntb_write32(b, WIN, 1), -EINVAL);
	assert_int_equal(ntb_write64(b, WIN - 8, 5), 0);
	assert_int_equal(ntb_write64(b, WIN, 5), -EINVAL);
	ntb_link_close(a);
	ntb_link_close(b);
}

static void test_spads(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	uint32_t v = 99;
	for (int i = 0; i < NTB_SPAD_COUNT; i++)
		assert_int_equal(ntb_peer_spad_write(a, i, 0x1000u + (uint32_t)i), 0);
	for (int i = 0; i < NTB_SPAD_COUNT; i++) {
		assert_int_equal(ntb_spad_read(b, i, &v), 0);
		assert_int_equal(v, 0x1000u + (uint32_t)i);
		assert_int_equal(ntb_spad_read(a, i, &v), 0);
		assert_int_equal(v, 0); /* a's own inbound scratchpads */
	}
	v = 7;
	assert_int_equal(ntb_spad_read(b, -1, &v), -EINVAL);
	assert_int_equal(ntb_spad_read(b, NTB_SPAD_COUNT, &v), -EINVAL);
	assert_int_equal(v, 7);
	assert_int_equal(ntb_peer_spad_write(a, NTB_SPAD_COUNT, 1), -EINVAL);
	assert_int_equal(ntb_peer_spad_write(a, -3, 1), -EINVAL);
	ntb_link_close(a);
	ntb_link_close(b);
}

struct ringer { struct ntb_link *l; int delay_ms; };

static void *ring_later(void *arg)
{
	struct ringer *r = arg;
	sleep_ms(r->delay_ms);
	ntb_peer_db_ring(r->l);
	return NULL;
}

static void test_doorbells(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0), *b = open_side(1);
	uint32_t seen = ntb_db_read(b);
	assert_int_equal(ntb_peer_db_ring(a), 0);
	assert_int_not_equal(ntb_db_read(b), seen);
	assert_int_equal(ntb_db_read(a), 0);
	/* already rung: returns at once, even while the link is down */
	assert_int_equal(ntb_db_wait(b, seen, 1000), 0);
	seen = ntb_db_read(b);
	/* link down: -ENOLINK */
	assert_int_equal(ntb_db_wait(b, seen, 1000), -ENOLINK);
	ntb_link_enable(a);
	ntb_link_enable(b);
	assert_true(both_up(a, b));
	assert_int_equal(ntb_db_wait(b, seen, 30), -ETIMEDOUT);
	/* microseconds: 300 µs is not 300 ms (the bound is generous: a loaded machine) nor
	 * nothing */
	uint64_t u0 = clock_mono_ns();

	assert_int_equal(ntb_db_wait_us(b, seen, 300), -ETIMEDOUT);
	assert_true(clock_mono_ns() - u0 >= 300000u);
	assert_true(clock_mono_ns() - u0 < 100000000u);
	/* a ring from another thread wakes the futex waiter */
	pthread_t th;
	struct ringer r = { a, 50 };
	pthread_create(&th, NULL, ring_later, &r);
	uint64_t t0 = clock_mono_ns();
	int rc;
	do { /* keep a's heartbeat alive is a's thread job; tick a here in slices */
		ntb_link_tick(a);
		rc = ntb_db_wait(b, seen, 20);
	} while (rc == -ETIMEDOUT && clock_mono_ns() - t0 < 2000000000ull);
	assert_int_equal(rc, 0);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&b->local->db_waiters), 0);
	/* every ring changes the value */
	for (int i = 0; i < 100; i++) {
		uint32_t s = ntb_db_read(b);
		ntb_peer_db_ring(a);
		assert_int_not_equal(ntb_db_read(b), s);
	}
	ntb_link_close(a);
	ntb_link_close(b);
}

struct kicker { _Atomic uint32_t *word; int delay_ms; };

static void *kick_later(void *arg)
{
	struct kicker *k = arg;

	sleep_ms(k->delay_ms);
	atomic_fetch_add(k->word, 1);
	syscall(SYS_futex, k->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	return NULL;
}

/* Open both sides of a link at PATH2 with a slow heartbeat (slices of 20 s): a wait on it
 * returns early only when woken. */
static void open_slow_pair(const char *path2, struct ntb_link **ret_a, struct ntb_link **ret_b)
{
	struct ntb_link_params p;

	unlink(path2);
	params(&p, 0);
	snprintf(p.path, sizeof(p.path), "%s", path2);
	p.heartbeat_ms = 40000;
	p.link_timeout_ms = 80000;
	assert_int_equal(ntb_link_open(&p, ret_a), 0);
	p.side = 1;
	assert_int_equal(ntb_link_open(&p, ret_b), 0);
	ntb_link_enable(*ret_a);
	ntb_link_enable(*ret_b);
	assert_true(both_up(*ret_a, *ret_b));
}

static void *ring_direct_later(void *arg)
{
	struct ringer *r = arg;

	sleep_ms(r->delay_ms);
	ntb_peer_db_ring_direct(r->l);
	return NULL;
}

/* The direct doorbell: a ring of it wakes a sleeper on both doorbells (ntb_db_wait_direct_us())
 * and leaves the doorbell, on which the helper thread sleeps alone, unrung: a sleeper there
 * sleeps its whole slice. A ring of the doorbell wakes the sleeper on both. Each wait below
 * would last 20 s if nothing woke it. */
static void test_doorbell_direct(void **state)
{
	(void)state;
	char p2[sizeof(path) + 4];
	struct ntb_link *a, *b;

	snprintf(p2, sizeof(p2), "%s-d", path);
	open_slow_pair(p2, &a, &b);
	assert_true(ntb_db_direct_ok(b));
	uint32_t seen = ntb_db_read(b), seen_d = ntb_db_direct_read(b);

	/* rung before: at once; the doorbell unchanged */
	assert_int_equal(ntb_peer_db_ring_direct(a), 0);
	assert_int_not_equal(ntb_db_direct_read(b), seen_d);
	assert_int_equal(ntb_db_read(b), seen);
	assert_int_equal(ntb_db_wait_direct_us(b, seen, seen_d, 60000000L), 0);
	seen_d = ntb_db_direct_read(b);

	/* from another thread: wakes the sleeper on both, not one on the doorbell */
	pthread_t th;
	struct ringer r = { a, 50 };
	uint64_t t0 = clock_mono_ns();

	pthread_create(&th, NULL, ring_direct_later, &r);
	assert_int_equal(ntb_db_wait_direct_us(b, seen, seen_d, 60000000L), 0);
	assert_true(clock_mono_ns() - t0 < 10000000000ull);
	pthread_join(th, NULL);
	assert_int_not_equal(ntb_db_direct_read(b), seen_d);
	seen_d = ntb_db_direct_read(b);
	r.delay_ms = 20;
	pthread_create(&th, NULL, ring_direct_later, &r);
	t0 = clock_mono_ns();
	assert_int_equal(ntb_db_wait_us(b, seen, 300000L), -ETIMEDOUT);
	assert_true(clock_mono_ns() - t0 >= 300000000ull);
	pthread_join(th, NULL);
	assert_int_equal(ntb_db_read(b), seen);
	seen_d = ntb_db_direct_read(b);

	/* the doorbell wakes the sleeper on both */
	r.delay_ms = 50;
	pthread_create(&th, NULL, ring_later, &r);
	t0 = clock_mono_ns();
	assert_int_equal(ntb_db_wait_direct_us(b, seen, seen_d, 60000000L), 0);
	assert_true(clock_mono_ns() - t0 < 10000000000ull);
	pthread_join(th, NULL);
	assert_int_not_equal(ntb_db_read(b), seen);
	assert_int_equal(atomic_load(&b->local->db_waiters), 0);
	ntb_link_close(a);
	ntb_link_close(b);
	unlink(p2);
}

/* How many descriptors this process has open. */
static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The 8-byte count an eventfd holds (drained), 0 when it holds none. */
static uint64_t efd_take(int fd)
{
	uint64_t v = 0;

	if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

/* The event doorbell in a program whose descriptors fill the numbers the library keeps its own
 * at (fd_park_base(): a server holding thousands of sockets): the duplicate cannot be kept, the
 * ring says so once (-EMFILE), and the rings after it go to the doorbell without trying again
 * (-EAGAIN) for NTB_EV_RETRY_MS: each try is ~10 system calls and three /proc reads, and made
 * at every ring it made echo10k's rounds 10x as long. Once numbers are free it is taken. */
static void test_event_doorbell_no_number(void **state)
{
	(void)state;
	char p2[sizeof(path) + 4];
	struct ntb_link *a, *b;
	int base = fd_park_base(), taken[128], nt = 0;

	if (!ev_probe() || base < 0)
		skip(); /* (pidfd_getfd refused, or no eventfd-id: the doorbell only) */
	snprintf(p2, sizeof(p2), "%s-n", path);
	open_slow_pair(p2, &a, &b);
	int e1 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	assert_true(e1 >= 0);
	int slot = ntb_event_publish(b, e1);

	assert_true(slot >= 0);
	/* every number of the parked range taken, as the program's sockets would */
	for (int fd = base; fd < base + 128; fd++)
		if (fcntl(fd, F_GETFD) < 0 && dup2(e1, fd) == fd)
			taken[nt++] = fd;
	uint32_t db = ntb_db_read(b);

	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), -EMFILE);
	for (int i = 0; i < 100; i++)
		assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), -EAGAIN);
	assert_int_equal(efd_take(e1), 0);
	assert_int_equal(ntb_db_read(b), db); /* (the caller rings the doorbell on an error) */
	/* numbers free again: taken at the first ring after the wait */
	for (int i = 0; i < nt; i++)
		close(taken[i]);
	usleep((NTB_EV_RETRY_MS + 20u) * 1000u);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), 0);
	assert_int_equal(efd_take(e1), 1);
	ntb_link_close(b);
	ntb_link_close(a);
	close(e1);
	unlink(p2);
}

/* The event doorbell: nothing published, nothing rung (-ENOENT); B publishes an eventfd, A's
 * ring writes it (B's doorbell unchanged), again without taking it anew; a new eventfd published
 * in the slot gets the next ring, the old one none; a publication whose number now holds another
 * eventfd (an exec'd image, a closed and reused number) is refused (-ESTALE) and that file left
 * alone; a released slot (B closed) is not rung, and its duplicate is closed by the sweep. */
static void test_event_doorbell(void **state)
{
	(void)state;
	char p2[sizeof(path) + 4];
	struct ntb_link *a, *b;

	if (!ev_probe())
		skip(); /* (pidfd_getfd refused, or no eventfd-id: the doorbell only) */
	snprintf(p2, sizeof(p2), "%s-e", path);
	open_slow_pair(p2, &a, &b);
	assert_true(ntb_event_peer_rings(b)); /* (both shm) */
	int e1 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), e2 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int slot;

	assert_true(e1 >= 0 && e2 >= 0);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)b->slot), -ENOENT);
	assert_int_equal(ntb_peer_event_ring(a, NTB_SIDE_SLOTS), -ENOTSUP);
	slot = ntb_event_publish(b, e1);
	assert_int_equal(slot, b->slot);
	uint32_t db = ntb_db_read(b);

	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), 0);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), 0);
	assert_int_equal(efd_take(e1), 2);
	assert_int_equal(ntb_db_read(b), db);
	/* another eventfd published: the ring goes there */
	assert_int_equal(ntb_event_publish(b, e2), slot);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), 0);
	assert_int_equal(efd_take(e2), 1);
	assert_int_equal(efd_take(e1), 0);
	/* e1's number now another eventfd, the published id still e1's: refused, untouched */
	assert_int_equal(ntb_event_publish(b, e1), slot);
	int e3 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	assert_true(e3 >= 0);
	assert_int_equal(dup3(e3, e1, O_CLOEXEC), e1);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), -ESTALE);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), -ESTALE); /* (not retried) */
	assert_int_equal(efd_take(e1), 0);
	assert_int_equal(efd_take(e3), 0);
	/* published again (e1's number, e3's id now): rung */
	assert_int_equal(ntb_event_publish(b, e1), slot);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), 0);
	assert_int_equal(efd_take(e3), 1);
	/* a released slot (B closed) is not rung, and the sweep closes its duplicate */
	ntb_link_close(b);
	assert_int_equal(ntb_peer_event_ring(a, (unsigned)slot), -ENOENT);
	assert_int_equal(efd_take(e3), 0);
	int fds = fd_count();

	ntb_event_sweep(a);
	assert_int_equal(fd_count(), fds - 1);
	ntb_event_sweep(a);
	assert_int_equal(fd_count(), fds - 1);
	ntb_link_close(a);
	close(e1);
	close(e2);
	close(e3);
	unlink(p2);
}

/* One sleeper on two links' doorbells and a kick word: a ring on the second link (which
 * ntb_db_wait() on the first would not see) or the kick wakes it. Each wait below would last
 * 20 s if nothing woke it; a wake-up is asserted within 10 s. */
static void test_doorbells_many(void **state)
{
	(void)state;
	char p2[sizeof(path) + 4], p3[sizeof(path) + 4];
	struct ntb_link *a2, *b2, *a3, *b3;

	snprintf(p2, sizeof(p2), "%s-2", path);
	snprintf(p3, sizeof(p3), "%s-3", path);
	open_slow_pair(p2, &a2, &b2);
	open_slow_pair(p3, &a3, &b3);

	_Atomic uint32_t kick = 5;
	struct ntb_link *on[2] = { b2, b3 };
	uint32_t seen[2] = { ntb_db_read(b2), ntb_db_read(b3) };

	/* rung before: at once */
	ntb_peer_db_ring(a3);
	assert_int_equal(ntb_db_wait_many(on, seen, 2, &kick, 5, 60000), 0);
	assert_int_not_equal(ntb_db_read(b3), seen[1]);
	seen[1] = ntb_db_read(b3);
	/* nothing rings: the whole timeout, 0 */
	uint64_t t0 = clock_mono_ns();
	assert_int_equal(ntb_db_wait_many(on, seen, 2, &kick, 5, 30), 0);
	assert_true(clock_mono_ns() - t0 >= 25000000ull);

	/* a ring on the second link wakes a sleeper on both */
	pthread_t th;
	struct ringer r = { a3, 50 };

	pthread_create(&th, NULL, ring_later, &r);
	t0 = clock_mono_ns();
	assert_int_equal(ntb_db_wait_many(on, seen, 2, &kick, 5, 60000), 0);
	assert_true(clock_mono_ns() - t0 < 10000000000ull);
	pthread_join(th, NULL);
	assert_int_not_equal(ntb_db_read(b3), seen[1]);
	assert_int_equal(ntb_db_read(b2), seen[0]);
	/* it counted itself as a waiter of both (the ringer woke it) and no longer does */
	assert_int_equal(atomic_load(&b2->local->db_waiters), 0);
	assert_int_equal(atomic_load(&b3->local->db_waiters), 0);
	seen[1] = ntb_db_read(b3);

	/* the kick wakes it */
	struct kicker k = { &kick, 50 };

	pthread_create(&th, NULL, kick_later, &k);
	t0 = clock_mono_ns();
	assert_int_equal(ntb_db_wait_many(on, seen, 2, &kick, 5, 60000), 0);
	assert_true(clock_mono_ns() - t0 < 10000000000ull);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&kick), 6);
	/* a kick word that moved since: at once */
	assert_int_equal(ntb_db_wait_many(on, seen, 2, &kick, 5, 60000), 0);

	/* more links than it takes: the caller falls back */
	struct ntb_link *many[NTB_DB_WAIT_MAX + 1];
	uint32_t mseen[NTB_DB_WAIT_MAX + 1] = { 0 };

	for (unsigned i = 0; i <= NTB_DB_WAIT_MAX; i++)
		many[i] = b2;
	assert_int_equal(ntb_db_wait_many(many, mseen, NTB_DB_WAIT_MAX + 1, NULL, 0, 10),
			 -ENOTSUP);
	ntb_link_close(a2);
	ntb_link_close(b2);
	ntb_link_close(a3);
	ntb_link_close(b3);
	unlink(p2);
	unlink(p3);
}

static void test_inspect(void **state)
{
	(void)state;
	struct ntb_link_params p;
	struct ntb_link *i;
	params(&p, -1);
	p.inspect_only = true;
	assert_int_equal(ntb_link_open(&p, &i), -ENOENT); /* never creates */
	assert_int_equal(access(path, F_OK), -1);

	struct ntb_link *a = open_side(0), *b = open_side(1);
	ntb_link_enable(a);
	ntb_link_enable(b);
	assert_true(both_up(a, b));
	p.window_size = 0; /* accept whatever the file has */
	assert_int_equal(ntb_link_open(&p, &i), 0);
	assert_int_equal(ntb_link_side(i), 0);
	assert_int_equal(ntb_out_size(i), 0);
	struct ntb_link_info info;
	for (int k = 0; k < 100 && !ntb_link_tick(i); k++) {
		ntb_link_tick(a);
		ntb_link_tick(b);
		sleep_ms(5);
	}
	assert_int_equal(ntb_link_info(i, &info), 0);
	assert_true(info.up);
	assert_int_equal(info.peer_epoch, ntb_link_epoch(b));
	assert_int_equal(info.epoch, ntb_link_epoch(a));
	assert_int_equal(info.claims[0], 1); /* the inspector claimed nothing */
	assert_int_equal(info.claims[1], 1);
	/* it cannot write anything */
	uint8_t x = 1;
	assert_int_equal(ntb_write(i, 0, &x, 1), -EPERM);
	assert_int_equal(ntb_write32(i, 0, 1), -EPERM);
	assert_int_equal(ntb_link_enable(i), -EPERM);
	assert_int_equal(ntb_link_disable(i), -EPERM);
	assert_int_equal(ntb_peer_db_ring(i), -EPERM);
	assert_int_equal(ntb_peer_spad_write(i, 0, 1), -EPERM);
	ntb_link_close(i);
	/* the live link is undisturbed */
	assert_true(ntb_link_tick(a));
	assert_true(ntb_link_tick(b));
	assert_int_equal(ntb_link_peer_epoch(b), ntb_link_epoch(a));
	ntb_link_close(a);
	ntb_link_close(b);
}

static void write_file(const char *data, size_t len, size_t total)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)total), 0);
	if (len)
		assert_int_equal(pwrite(fd, data, len, 0), (ssize_t)len);
	close(fd);
}

static void test_bad_files(void **state)
{
	(void)state;
	struct ntb_link_params p;
	struct ntb_link *l;
	params(&p, 0);

	/* foreign content */
	write_file("#!/bin/sh\necho hello\n", 21, ntb_region_size_for(WIN));
	assert_int_equal(ntb_link_open(&p, &l), -EPROTO);
	assert_non_null(strstr(ntb_strerror_detail(), path));
	assert_non_null(strstr(ntb_strerror_detail(), "not an ntbsock region"));
	/* too small */
	write_file("x", 1, 100);
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	assert_non_null(strstr(ntb_strerror_detail(), "truncated"));
	/* a valid header but the file cut short */
	unlink(path);
	l = open_side(0);
	ntb_link_close(l);
	assert_int_equal(truncate(path, (off_t)ntb_region_size_for(WIN) - 4096), 0);
	assert_int_equal(ntb_link_open(&p, &l), -EINVAL);
	assert_non_null(strstr(ntb_strerror_detail(), "truncated"));
	/* wrong version */
	unlink(path);
	l = open_side(0);
	ntb_link_close(l);
	int fd = open(path, O_RDWR);
	uint32_t v2 = 2;
	assert_int_equal(pwrite(fd, &v2, 4, 8), 4);
	close(fd);
	assert_int_equal(ntb_link_open(&p, &l), -EPROTONOSUPPORT);
	/* window size mismatch */
	unlink(path);
	l = open_side(0);
	ntb_link_close(l);
	p.window_size = 2 * WIN;
	assert_int_equal(ntb_link_open(&p, &l), -EMSGSIZE);
	p.window_size = WIN;
	/* a symbolic link is refused */
	char target[160];
	snprintf(target, sizeof(target), "%s-target", path);
	rename(path, target);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(ntb_link_open(&p, &l), -ELOOP);
	assert_non_null(strstr(ntb_strerror_detail(), "symbolic link"));
	unlink(path);
	unlink(target);
	/* not a regular file */
	assert_int_equal(mkdir(path, 0700), 0);
	assert_true(ntb_link_open(&p, &l) < 0);
	rmdir(path);
}

static void test_foreign_owner(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	struct ntb_link_params p;
	struct ntb_link *l = open_side(0);
	ntb_link_close(l);
	assert_int_equal(chown(path, 12345, 12345), 0);
	params(&p, 0);
	assert_int_equal(ntb_link_open(&p, &l), -EPERM);
	assert_non_null(strstr(ntb_strerror_detail(), "owned by uid 12345"));
	p.allow_foreign_owner = true;
	assert_int_equal(ntb_link_open(&p, &l), 0);
	ntb_link_close(l);
}

/* A zero-filled file (as QEMU's memory-backend-file creates it): side 0 initialises. */
static void test_zero_file(void **state)
{
	(void)state;
	struct ntb_link_params p;
	struct ntb_link *a, *b;
	write_file(NULL, 0, 1u << 20);
	params(&p, 1);
	p.window_size = 0;
	assert_int_equal(ntb_link_open(&p, &b), -EAGAIN);
	assert_non_null(strstr(ntb_strerror_detail(), "not initialised"));
	params(&p, 0);
	p.window_size = 0;
	assert_int_equal(ntb_link_open(&p, &a), 0);
	assert_int_equal(ntb_out_size(a), 256u * 1024);
	params(&p, 1);
	p.window_size = 256u * 1024;
	assert_int_equal(ntb_link_open(&p, &b), 0);
	struct stat st;
	stat(path, &st);
	assert_int_equal(st.st_size, 1u << 20); /* never resized */
	ntb_link_close(a);
	ntb_link_close(b);
}

static void test_check_mapping(void **state)
{
	(void)state;
	struct ntb_link *a = open_side(0);
	assert_int_equal(ntb_link_check_mapping(a), 0);
	assert_int_equal(truncate(path, 8192), 0);
	assert_int_equal(ntb_link_check_mapping(a), -EIO);
	assert_non_null(strstr(ntb_strerror_detail(), "truncated"));
	assert_int_equal(truncate(path, (off_t)ntb_region_size_for(WIN)), 0);
	assert_int_equal(ntb_link_check_mapping(a), 0);
	unlink(path);
	assert_int_equal(ntb_link_check_mapping(a), -ESTALE);
	ntb_link_close(a);
	assert_int_equal(ntb_link_check_mapping(NULL), -EINVAL);
}


/* --- a wrapped backend: shm mapping, but behaving like pci (no futex wakes, WC) -------------- */
static int calls_write, calls_barrier, calls_flush, calls_check;

static int wrapped_open(struct ntb_link *l)
{
	int rc = ntb_shm_ops.open(l);
	if (rc == 0) {
		l->caps = 0; /* like pci: our doorbells wake nobody */
		l->wc = true;
	}
	return rc;
}

static void wrapped_write(struct ntb_link *l, size_t off, const void *src, size_t len)
{
	calls_write++;
	memcpy(l->out + off, src, len);
}

static void wrapped_barrier(struct ntb_link *l) { (void)l; calls_barrier++; }
static void wrapped_flush(struct ntb_link *l) { (void)l; calls_flush++; }
static int wrapped_check(struct ntb_link *l) { (void)l; calls_check++; return -ENXIO; }

static const struct ntb_backend_ops wrapped_ops = {
	.name = "wrapped",
	.open = wrapped_open,
	.close = NULL, /* set in the test from ntb_shm_ops */
};

static void test_backend_ops_dispatch(void **state)
{
	(void)state;
	struct ntb_backend_ops ops = wrapped_ops;
	ops.close = ntb_shm_ops.close;
	ops.write = wrapped_write;
	ops.to_peer_barrier = wrapped_barrier;
	ops.wc_flush = wrapped_flush;
	ops.check_mapping = wrapped_check;
	struct ntb_link_params p;
	struct ntb_link *a, *b;
	params(&p, 0);
	p.heartbeat_ms = 4000; /* a futex sleep slice would be 2 s */
	p.link_timeout_ms = 10000;
	assert_int_equal(ntb_link_open_ops(&p, NULL, &a), -EINVAL);
	assert_int_equal(ntb_link_open_ops(&p, &ops, &a), 0);
	params(&p, 1);
	p.heartbeat_ms = 4000;
	p.link_timeout_ms = 10000;
	assert_int_equal(ntb_link_open(&p, &b), 0);
	size_t sz;
	const volatile uint8_t *bin = ntb_in_window(b, &sz);

	uint8_t buf[16] = { 9, 8, 7 };
	assert_int_equal(ntb_write(a, 64, buf, sizeof(buf)), 0);
	assert_int_equal(calls_write, 1);
	assert_int_equal(bin[65], 8);
	assert_int_equal(ntb_write32(a, 128, 0xcafef00du), 0);
	assert_int_equal(calls_write, 2);
	assert_int_equal(*(const volatile uint32_t *)(bin + 128), 0xcafef00du);
	/* the one-pass window + shadow copy still goes through the backend's write, once */
	uint8_t big[1000], shadow[1000];
	uint32_t crc = 0;
	memset(big, 0x3c, sizeof(big));
	assert_int_equal(ntb_write_dup_crc(a, 4096, shadow, big, sizeof(big), 0, &crc), 0);
	assert_int_equal(calls_write, 3);
	assert_int_equal(crc, crc32c(0, big, sizeof(big)));
	assert_int_equal(bin[4096 + 999], 0x3c);
	assert_memory_equal(shadow, big, sizeof(big));
	calls_write = 2;
	ntb_to_peer_barrier(a);
	ntb_wc_flush(a);
	ntb_wc_flush(a);
	assert_int_equal(calls_barrier, 1);
	assert_int_equal(calls_flush, 2);
	assert_int_equal(ntb_link_check_mapping(a), -ENXIO);
	assert_int_equal(calls_check, 1);
	/* the plain shm handle does not go through them */
	assert_int_equal(ntb_write(b, 0, buf, 4), 0);
	ntb_to_peer_barrier(b);
	assert_int_equal(calls_write + calls_barrier, 3);

	/* A shm waiter whose peer cannot wake futexes polls: a ring from the wrapped side is
	 * seen long before a futex slice (2 s) would end. */
	ntb_link_enable(a);
	ntb_link_enable(b);
	assert_true(both_up(a, b));
	uint32_t seen = ntb_db_read(b);
	pthread_t th;
	struct ringer r = { a, 50 };
	pthread_create(&th, NULL, ring_later, &r);
	uint64_t t0 = clock_mono_ns();
	assert_int_equal(ntb_db_wait(b, seen, 8000), 0);
	uint64_t ms = (clock_mono_ns() - t0) / 1000000u;
	pthread_join(th, NULL);
	assert_true(ms < 1500);
	ntb_link_close(a);
	ntb_link_close(b);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_params_init),      T(test_bad_params),     T(test_create_file),
		T(test_create_mode),      T(test_two_sides_up),   T(test_peer_absent),
		T(test_peer_beats_when_rung),
		T(test_peer_dead_after_silence), T(test_peer_up_from_host_record),
		T(test_peer_dead_by_wall_stamp),
		T(test_peer_hb_age_by_stamp),
		T(test_peer_hb_frozen_stamp),   T(test_claims_and_sessions),
		T(test_dead_claim_reaped), T(test_dead_waiter_uncounted),
		T(test_windows),        T(test_spads),
		T(test_doorbells),
		T(test_doorbells_many),
		T(test_doorbell_direct), T(test_event_doorbell), T(test_event_doorbell_no_number),
		T(test_inspect),        T(test_bad_files),
		T(test_foreign_owner),    T(test_exec_image_reaped), T(test_exec_image_session),    T(test_zero_file),      T(test_check_mapping),
		T(test_backend_ops_dispatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
