/* SPDX-License-Identifier: MIT */
/* Two-process tests of the shm backend (the peer is a forked child): link up, doorbell
 * wake-up across processes, peer crash (kill -9) seen as link down within 1 s, restart seen
 * as link up with a new epoch, and 1 GiB through a single-producer ring over the windows,
 * checksummed with CRC32C. */
#include <errno.h>
#include <setjmp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ntb/ntb_int.h"
#include "util/crc32c.h"

#define WIN (4u << 20)

/* scratchpads the child writes into the parent's inbound control page */
#define SP_EPOCH   0 /* child's epoch */
#define SP_DB_SEEN 1 /* child saw our doorbell: 1 */
#define SP_CRC     2 /* consumer's checksum */
#define SP_DONE    3 /* consumer finished: 1 */
/* scratchpads the parent writes into the child's */
#define SP_QUIT    0

static char path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-peer-%d", (int)getpid());
	unlink(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static void params(struct ntb_link_params *p, int side, uint32_t hb_ms, uint32_t timeout_ms)
{
	ntb_link_params_init(p);
	snprintf(p->name, sizeof(p->name), "peer");
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->side = side;
	p->window_size = WIN;
	p->heartbeat_ms = hb_ms;
	p->link_timeout_ms = timeout_ms;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static struct ntb_link *child_open(void)
{
	struct ntb_link_params p;
	struct ntb_link *l;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	params(&p, 1, 100, 500); /* the defaults: what a real peer uses */
	if (ntb_link_open(&p, &l) || ntb_link_enable(l))
		_exit(10);
	ntb_peer_spad_write(l, SP_EPOCH, ntb_link_epoch(l));
	return l;
}

/* Child: stay up (ticking) until told to quit or killed. */
static void child_idle(void)
{
	struct ntb_link *l = child_open();
	uint32_t quit = 0;
	for (int i = 0; i < 60000 / 5; i++) {
		ntb_link_tick(l);
		ntb_spad_read(l, SP_QUIT, &quit);
		if (quit)
			break;
		sleep_ms(5);
	}
	ntb_link_close(l);
	_exit(quit ? 0 : 11);
}

/* Child: sleep in ntb_db_wait (futex) until rung, report, ring back. */
static void child_doorbell(void)
{
	struct ntb_link *l = child_open();
	if (ntb_link_wait_up(l, 5000))
		_exit(12);
	uint32_t seen = ntb_db_read(l);
	ntb_peer_spad_write(l, SP_DONE, 1); /* "I am about to wait" */
	int rc;
	do
		rc = ntb_db_wait(l, seen, 10000);
	while (rc == -EINTR);
	if (rc != 0)
		_exit(13);
	ntb_peer_spad_write(l, SP_DB_SEEN, 1);
	ntb_peer_db_ring(l);
	/* stay up a little so the parent sees the ring while up */
	for (int i = 0; i < 100; i++) {
		uint32_t quit = 0;
		ntb_spad_read(l, SP_QUIT, &quit);
		if (quit)
			break;
		ntb_link_tick(l);
		sleep_ms(5);
	}
	ntb_link_close(l);
	_exit(0);
}

static pid_t spawn(void (*fn)(void))
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		fn();
	return pid;
}

static int reap(pid_t pid)
{
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static struct ntb_link *parent_open(void)
{
	struct ntb_link_params p;
	struct ntb_link *l;
	params(&p, 0, 100, 500);
	assert_int_equal(ntb_link_open(&p, &l), 0);
	assert_int_equal(ntb_link_enable(l), 0);
	return l;
}

static uint32_t wait_spad(struct ntb_link *l, int idx, int timeout_ms)
{
	uint32_t v = 0;
	for (int i = 0; i < timeout_ms / 2 && !v; i++) {
		ntb_link_tick(l);
		ntb_spad_read(l, idx, &v);
		if (!v)
			sleep_ms(2);
	}
	return v;
}

static void test_link_up_and_quit(void **state)
{
	(void)state;
	struct ntb_link *l = parent_open();
	pid_t pid = spawn(child_idle);
	assert_int_equal(ntb_link_wait_up(l, 5000), 0);
	uint32_t child_epoch = wait_spad(l, SP_EPOCH, 2000);
	assert_int_not_equal(child_epoch, 0);
	assert_int_equal(ntb_link_peer_epoch(l), child_epoch);
	/* stays up while the child ticks */
	for (int i = 0; i < 50; i++) {
		assert_true(ntb_link_tick(l));
		sleep_ms(10);
	}
	ntb_peer_spad_write(l, SP_QUIT, 1);
	assert_int_equal(reap(pid), 0);
	/* orderly close: down at once */
	assert_false(ntb_link_tick(l));
	ntb_link_close(l);
}

static void test_doorbell_wakeup(void **state)
{
	(void)state;
	struct ntb_link *l = parent_open();
	pid_t pid = spawn(child_doorbell);
	assert_int_equal(ntb_link_wait_up(l, 5000), 0);
	assert_int_equal(wait_spad(l, SP_DONE, 5000), 1);
	sleep_ms(50); /* let the child go to sleep in the futex */
	uint32_t seen = ntb_db_read(l);
	assert_int_equal(ntb_peer_db_ring(l), 0);
	int rc;
	do
		rc = ntb_db_wait(l, seen, 5000);
	while (rc == -EINTR);
	assert_int_equal(rc, 0);
	uint32_t v = 0;
	assert_int_equal(ntb_spad_read(l, SP_DB_SEEN, &v), 0);
	assert_int_equal(v, 1);
	ntb_peer_spad_write(l, SP_QUIT, 1);
	assert_int_equal(reap(pid), 0);
	ntb_link_close(l);
}

static void test_crash_and_restart(void **state)
{
	(void)state;
	struct ntb_link *l = parent_open();
	pid_t pid = spawn(child_idle);
	assert_int_equal(ntb_link_wait_up(l, 5000), 0);
	uint32_t e1 = wait_spad(l, SP_EPOCH, 2000);
	assert_int_equal(ntb_link_peer_epoch(l), e1);

	/* kill -9: no goodbye; seen through the heartbeat within 1 s (not reaped yet, so
	 * nothing but the heartbeat tells) */
	assert_int_equal(kill(pid, SIGKILL), 0);
	uint64_t t0 = clock_mono_ns();
	while (ntb_link_tick(l)) {
		sleep_ms(5);
		if (clock_mono_ns() - t0 > 3000000000ull)
			break;
	}
	uint64_t took_ms = (clock_mono_ns() - t0) / 1000000u;
	print_message("peer crash seen as link down after %llu ms\n", (unsigned long long)took_ms);
	assert_false(ntb_link_tick(l));
	assert_true(took_ms < 1000);
	assert_int_equal(ntb_link_peer_epoch(l), 0);
	assert_int_equal(reap(pid), 128 + SIGKILL);

	/* restart: the dead claim is reaped, the new peer has a new epoch */
	ntb_peer_spad_write(l, SP_QUIT, 0);
	pid = spawn(child_idle);
	assert_int_equal(ntb_link_wait_up(l, 5000), 0);
	uint32_t e2 = ntb_link_peer_epoch(l);
	assert_int_not_equal(e2, 0);
	assert_int_not_equal(e2, e1);
	for (int i = 0; i < 200 && wait_spad(l, SP_EPOCH, 10) != e2; i++)
		;
	uint32_t sp = 0;
	ntb_spad_read(l, SP_EPOCH, &sp);
	assert_int_equal(sp, e2);
	ntb_peer_spad_write(l, SP_QUIT, 1);
	assert_int_equal(reap(pid), 0);
	ntb_link_close(l);
}

/* --- 1 GiB through a ring ------------------------------------------------------------------ *
 * The ring lives in the consumer's inbound window (written by the producer): RING bytes of
 * data at offset 0 and the producer's tx index at TX_OFF. The consumer's rx index goes into
 * the producer's inbound window at RX_OFF. Free-running 64-bit byte counters. */
#define TOTAL   (1ull << 30)
#define RING    (2u << 20)
#define CHUNK   (64u * 1024)
#define TX_OFF  RING
#define RX_OFF  0

static void fill(uint64_t *buf, size_t words, uint64_t pos)
{
	for (size_t i = 0; i < words; i++) {
		uint64_t z = pos + i + 0x9e3779b97f4a7c15ULL;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		buf[i] = z ^ (z >> 31);
	}
}

static void child_consumer(void)
{
	struct ntb_link *l = child_open();
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(l, &sz);
	const _Atomic uint64_t *tx_word = (const _Atomic uint64_t *)(in + TX_OFF);
	uint64_t rx = 0;
	uint32_t crc = 0;
	unsigned idle = 0;
	static uint8_t buf[CHUNK];
	while (rx < TOTAL) {
		/* Acquire: pairs with the producer's to_peer_barrier before publishing tx. */
		uint64_t tx = atomic_load_explicit(tx_word, memory_order_acquire);
		if (tx == rx) {
			if ((++idle & 255) == 0) {
				ntb_link_tick(l);
				sched_yield();
			}
			continue;
		}
		if (tx - rx > RING)
			_exit(20); /* a bad index from the peer */
		while (rx < tx) {
			size_t n = tx - rx < CHUNK ? (size_t)(tx - rx) : CHUNK;
			size_t off = (size_t)(rx % RING);
			if (n > RING - off)
				n = RING - off;
			/* copy out before checksumming (never trust memory the peer can rewrite) */
			crc = crc32c_copy(crc, buf, (const void *)(in + off), n);
			rx += n;
		}
		/* Release: our reads of the slots before handing them back. */
		ntb_to_peer_barrier(l);
		ntb_write64(l, RX_OFF, rx);
		ntb_link_tick(l);
	}
	ntb_peer_spad_write(l, SP_CRC, crc);
	ntb_peer_spad_write(l, SP_DONE, 1);
	for (int i = 0; i < 2000; i++) {
		uint32_t quit = 0;
		ntb_spad_read(l, SP_QUIT, &quit);
		if (quit)
			break;
		ntb_link_tick(l);
		sleep_ms(5);
	}
	ntb_link_close(l);
	_exit(0);
}

static void test_gib_ring(void **state)
{
	(void)state;
	struct ntb_link *l = parent_open();
	pid_t pid = spawn(child_consumer);
	assert_int_equal(ntb_link_wait_up(l, 5000), 0);
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(l, &sz);
	const _Atomic uint64_t *rx_word = (const _Atomic uint64_t *)(in + RX_OFF);
	uint64_t *chunk = malloc(CHUNK);
	uint64_t tx = 0, rx = 0;
	uint32_t crc = 0;
	unsigned idle = 0;
	uint64_t t0 = clock_mono_ns();
	while (tx < TOTAL) {
		if (RING - (tx - rx) < CHUNK) {
			/* Acquire: pairs with the consumer's barrier before it publishes rx. */
			rx = atomic_load_explicit(rx_word, memory_order_acquire);
			if (RING - (tx - rx) < CHUNK) {
				if ((++idle & 255) == 0) {
					ntb_link_tick(l);
					sched_yield();
				}
				continue;
			}
		}
		fill(chunk, CHUNK / 8, tx / 8);
		crc = crc32c(crc, chunk, CHUNK);
		assert_int_equal(ntb_write(l, (size_t)(tx % RING), chunk, CHUNK), 0);
		tx += CHUNK;
		/* Payload before the index that publishes it (doc/design.md §3 rule 3). */
		ntb_to_peer_barrier(l);
		assert_int_equal(ntb_write64(l, TX_OFF, tx), 0);
		if ((tx & ((1u << 20) - 1)) == 0)
			ntb_link_tick(l);
	}
	assert_int_equal(wait_spad(l, SP_DONE, 30000), 1);
	double secs = (double)(clock_mono_ns() - t0) / 1e9;
	uint32_t their = 0;
	ntb_spad_read(l, SP_CRC, &their);
	print_message("1 GiB through the ring in %.2f s, crc32c %08x / %08x\n", secs, crc, their);
	assert_int_equal(their, crc);
	ntb_peer_spad_write(l, SP_QUIT, 1);
	assert_int_equal(reap(pid), 0);
	free(chunk);
	ntb_link_close(l);
}


/* --- fork: the child keeps the side alive after the parent's handle closes ------------------ */
static int fork_sync[2];

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

static void test_fork_keeps_session(void **state)
{
	(void)state;
	struct ntb_link_params p;
	struct ntb_link *a, *b;
	params(&p, 0, 20, 400);
	assert_int_equal(ntb_link_open(&p, &a), 0);
	assert_int_equal(ntb_link_enable(a), 0);
	params(&p, 1, 20, 400);
	assert_int_equal(ntb_link_open(&p, &b), 0);
	assert_int_equal(ntb_link_enable(b), 0);
	assert_true(both_up(a, b));
	uint32_t ea = ntb_link_epoch(a);
	assert_int_equal(pipe(fork_sync), 0);

	/* 1. a child that does NOT call atfork and closes: the parent's claim survives */
	pid_t pid = fork();
	if (pid == 0) {
		ntb_link_close(a); /* must not release the parent's slot nor announce down */
		_exit(0);
	}
	assert_int_equal(reap(pid), 0);
	struct ntb_link_info info;
	assert_int_equal(ntb_link_info(b, &info), 0);
	assert_int_equal(info.claims[0], 1);
	assert_true(both_up(a, b));

	/* 2. a child that calls atfork keeps the session (same epoch) when the parent closes */
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (ntb_link_atfork_child(a))
			_exit(30);
		char c = 0;
		if (write(fork_sync[1], &c, 1) != 1)
			_exit(31);
		uint32_t quit = 0;
		for (int i = 0; i < 2000 && !quit; i++) {
			ntb_link_tick(a);
			ntb_spad_read(a, SP_QUIT, &quit);
			sleep_ms(5);
		}
		ntb_link_close(a);
		_exit(quit ? 0 : 32);
	}
	char c;
	assert_int_equal(read(fork_sync[0], &c, 1), 1);
	assert_int_equal(ntb_link_info(b, &info), 0);
	assert_int_equal(info.claims[0], 2);
	ntb_link_close(a); /* parent's handle goes; the child still holds side 0 enabled */
	for (int i = 0; i < 100; i++) { /* 2.5 × the link timeout */
		assert_true(ntb_link_tick(b));
		assert_int_equal(ntb_link_peer_epoch(b), ea);
		sleep_ms(10);
	}
	/* a new opener of side 0 joins the child's session */
	params(&p, 0, 20, 400);
	assert_int_equal(ntb_link_open(&p, &a), 0);
	assert_int_equal(ntb_link_epoch(a), ea);
	ntb_peer_spad_write(b, SP_QUIT, 1);
	assert_int_equal(reap(pid), 0);
	ntb_link_close(a);
	/* the child closed last and announced down */
	assert_false(ntb_link_tick(b));
	ntb_link_close(b);
	close(fork_sync[0]);
	close(fork_sync[1]);
}


/* --- concurrent first openers: one file, one session, auto sides distinct ------------------- */
#define RACERS 8

static void test_concurrent_open(void **state)
{
	(void)state;
	for (int mode = 0; mode < 2; mode++) { /* 0: all explicit side 0; 1: all side -1 */
		int go[2], res[2], done[2];
		assert_int_equal(pipe(go), 0);
		assert_int_equal(pipe(res), 0);
		assert_int_equal(pipe(done), 0);
		unlink(path);
		pid_t pids[RACERS];
		for (int i = 0; i < RACERS; i++) {
			pids[i] = fork();
			assert_true(pids[i] >= 0);
			if (pids[i] == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				close(go[1]);
				close(done[1]);
				char c;
				if (read(go[0], &c, 1) != 0) /* EOF = go */
					_exit(40);
				struct ntb_link_params p;
				struct ntb_link *l = NULL;
				params(&p, mode ? -1 : 0, 100, 500);
				int rc = ntb_link_open(&p, &l);
				uint32_t msg[3] = { (uint32_t)rc, 0, 0 };
				if (rc == 0) {
					msg[1] = (uint32_t)ntb_link_side(l);
					msg[2] = ntb_link_epoch(l);
				}
				if (write(res[1], msg, sizeof(msg)) != sizeof(msg))
					_exit(41);
				if (read(done[0], &c, 1) != 0)
					_exit(42);
				ntb_link_close(l);
				_exit(0);
			}
		}
		close(go[0]);
		close(done[0]);
		close(res[1]);
		close(go[1]); /* all start at once */
		uint32_t epochs[RACERS];
		int ok = 0, busy = 0, side_count[2] = { 0, 0 };
		for (int i = 0; i < RACERS; i++) {
			uint32_t msg[3];
			assert_int_equal(read(res[0], msg, sizeof(msg)), (ssize_t)sizeof(msg));
			if ((int)msg[0] == 0) {
				assert_true(msg[1] <= 1);
				assert_int_not_equal(msg[2], 0);
				epochs[ok++] = msg[2];
				side_count[msg[1]]++;
			} else {
				assert_int_equal((int)msg[0], -EBUSY);
				busy++;
			}
		}
		close(done[1]);
		for (int i = 0; i < RACERS; i++)
			assert_int_equal(reap(pids[i]), 0);
		close(res[0]);
		if (mode == 0) {
			assert_int_equal(ok, RACERS);
			for (int i = 1; i < ok; i++)
				assert_int_equal(epochs[i], epochs[0]); /* one session */
		} else {
			assert_int_equal(ok, 2);
			assert_int_equal(busy, RACERS - 2);
			assert_int_equal(side_count[0], 1);
			assert_int_equal(side_count[1], 1);
		}
		/* a sane file remains, and no temporaries */
		struct ntb_link_params p;
		struct ntb_link *l;
		params(&p, 0, 100, 500);
		assert_int_equal(ntb_link_open(&p, &l), 0);
		ntb_link_close(l);
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "ls %s.tmp.* 2>/dev/null | grep -q .", path);
		assert_int_not_equal(system(cmd), 0);
	}
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_link_up_and_quit),
		T(test_doorbell_wakeup),
		T(test_crash_and_restart),
		T(test_fork_keeps_session),
		T(test_concurrent_open),
		T(test_gib_ring),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
