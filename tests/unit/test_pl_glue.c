// SPDX-License-Identifier: MIT
/* Unit tests of preload/ glue that needs no link: the canonical connection key, config →
 * layer parameter conversion, and the fd table's reference counting and recycling. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload/pl_int.h"
#include "preload/pl_ready_int.h"
#include "glue/conf_params.h"

static struct sockaddr_in v4(const char *a, uint16_t port)
{
	struct sockaddr_in in;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons(port);
	inet_pton(AF_INET, a, &in.sin_addr);
	return in;
}

static struct sockaddr_in6 v6(const char *a, uint16_t port)
{
	struct sockaddr_in6 in6;
	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_port = htons(port);
	inet_pton(AF_INET6, a, &in6.sin6_addr);
	return in6;
}

static void test_key_layout(void **state)
{
	(void)state;
	struct sockaddr_in c = v4("127.0.0.1", 40000), s = v4("127.0.0.2", 5201);
	struct tp_key k;

	assert_int_equal(pl_key_build((struct sockaddr *)&c, (struct sockaddr *)&s, &k), 0);
	static const uint8_t want_c[18] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
					    127, 0, 0, 1, 40000 >> 8, 40000 & 0xff };
	assert_memory_equal(k.bytes, want_c, 18);
	static const uint8_t want_s[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
					    127, 0, 0, 2 };
	assert_memory_equal(k.bytes + 18, want_s, 16);
	assert_int_equal(k.bytes[34] | k.bytes[35] | k.bytes[36] | k.bytes[37], 0);
	assert_int_equal(tp_key_server_port(&k), 5201);
}

static void test_key_mapped_equals_v4(void **state)
{
	(void)state;
	struct sockaddr_in c4 = v4("127.0.0.1", 1234), s4 = v4("127.0.0.2", 80);
	struct sockaddr_in6 c6 = v6("::ffff:127.0.0.1", 1234), s6 = v6("::ffff:127.0.0.2", 80);
	struct tp_key a, b, c;

	assert_int_equal(pl_key_build((struct sockaddr *)&c4, (struct sockaddr *)&s4, &a), 0);
	assert_int_equal(pl_key_build((struct sockaddr *)&c6, (struct sockaddr *)&s6, &b), 0);
	assert_memory_equal(a.bytes, b.bytes, sizeof(a.bytes));
	/* Both ends build it from their own view: client (local, remote) = server (remote, local). */
	assert_int_equal(pl_key_build((struct sockaddr *)&c4, (struct sockaddr *)&s6, &c), 0);
	assert_memory_equal(a.bytes, c.bytes, sizeof(a.bytes));
	/* Swapping ends gives a different key. */
	assert_int_equal(pl_key_build((struct sockaddr *)&s4, (struct sockaddr *)&c4, &c), 0);
	assert_memory_not_equal(a.bytes, c.bytes, sizeof(a.bytes));
}

static void test_key_v6_and_bad_family(void **state)
{
	(void)state;
	struct sockaddr_in6 c = v6("fd00::1", 7), s = v6("fd00::2", 65535);
	struct sockaddr un = { .sa_family = AF_UNIX };
	struct tp_key k, untouched;

	assert_int_equal(pl_key_build((struct sockaddr *)&c, (struct sockaddr *)&s, &k), 0);
	assert_memory_equal(k.bytes, &c.sin6_addr, 16);
	assert_memory_equal(k.bytes + 18, &s.sin6_addr, 16);
	assert_int_equal(tp_key_server_port(&k), 65535);
	memset(&untouched, 0xaa, sizeof(untouched));
	k = untouched;
	assert_int_equal(pl_key_build(&un, (struct sockaddr *)&s, &k), -EAFNOSUPPORT);
	assert_memory_equal(k.bytes, untouched.bytes, sizeof(k.bytes)); /* ret_* untouched */
	assert_int_equal(pl_key_build(NULL, (struct sockaddr *)&s, &k), -EAFNOSUPPORT);
}

static void test_params_conversion(void **state)
{
	(void)state;
	struct conf_link cl;
	struct conf_tunables t;
	struct ntb_link_params lp;
	struct tp_params tp;

	memset(&cl, 0, sizeof(cl));
	strcpy(cl.name, "ab");
	strcpy(cl.backend, "shm");
	cl.side = 1;
	cl.window_size = 64 << 20;
	strcpy(cl.path, "/dev/shm/x");
	cl.mode = 0640;
	cl.group = 5;
	cl.bar = -1;
	cl.heartbeat_ms = 7;
	cl.link_timeout_ms = 77;
	cl.fault.enabled = true;
	cl.fault.drop = 0.25;
	cl.fault.seed = 99;
	cl.fault.cut_after = 64 << 20;
	cl.fault.cut_after_ms = 250;
	pl_link_params(&cl, &lp);
	assert_string_equal(lp.name, "ab");
	assert_string_equal(lp.backend, "shm");
	strcpy(cl.backend, "pci");
	pl_link_params(&cl, &lp);
	assert_string_equal(lp.backend, "pci");
	strcpy(cl.backend, "shm");
	pl_link_params(&cl, &lp);
	assert_int_equal(lp.side, 1);
	assert_int_equal(lp.window_size, 64 << 20);
	assert_string_equal(lp.path, "/dev/shm/x");
	assert_int_equal(lp.mode, 0640);
	assert_int_equal(lp.group, 5);
	assert_int_equal(lp.heartbeat_ms, 7);
	assert_int_equal(lp.link_timeout_ms, 77);
	assert_true(lp.fault.enabled);
	assert_true(lp.fault.drop == 0.25);
	assert_int_equal(lp.fault.seed, 99);
	assert_int_equal(lp.fault.cut_after, 64 << 20);
	assert_int_equal(lp.fault.cut_after_ms, 250);

	conf_tunables_defaults(&t);
	t.queue_size = 1 << 22;
	t.spin_us = 123;
	t.setup_timeout_ms = 456;
	t.peer_timeout_ms = 789;
	pl_tp_params(&t, &tp);
	assert_int_equal(tp.queue_size, 1 << 22);
	assert_int_equal(tp.inline_max, t.inline_max);
	assert_int_equal(tp.contexts, t.contexts);
	/* preload spins itself (yielding); the transport's waits sleep at once */
	assert_int_equal(tp.spin_us, 0);
	assert_int_equal(pl_spin_us, 123);
	assert_int_equal(tp.setup_timeout_ms, 456);
	assert_int_equal(tp.peer_timeout_ms, 789);
}

/* conf/ takes any backend name; glue_check_backends() is where an unknown one becomes an error
 * naming the file and line of the key, as the loaders of preload/ and tools/ report it. */
static void test_unknown_backend(void **state)
{
	(void)state;
	static const char text[] =
		"host = { name = \"A\"; addresses = [ \"10.0.0.1\" ]; };\n"
		"links = ( { name = \"ab\"; backend = \"shm\"; },\n"
		"  { name = \"cd\";\n"
		"    backend = \"rdma\"; side = 0; } );\n";
	struct conf_error err;
	struct conf *c = NULL;

	memset(&err, 0, sizeof(err));
	assert_int_equal(conf_load_string(text, "t.conf", &c, &err), 0);
	assert_non_null(c);
	assert_string_equal(c->links[1].backend, "rdma");
	assert_int_equal(glue_check_backends(c, &err), -EINVAL);
	assert_string_equal(err.text, "t.conf:4: key 'links[1].backend': no such backend in this "
				      "build (shm, pci) (value 'rdma')");
	/* the table's names are known */
	strcpy(c->links[1].backend, "pci");
	assert_int_equal(glue_check_backends(c, &err), 0);
	assert_true(ntb_backend_known("shm"));
	assert_true(ntb_backend_known("pci"));
	assert_false(ntb_backend_known("rdma"));
	assert_false(ntb_backend_known(""));
	assert_string_equal(ntb_backend_name(0), "shm");
	assert_string_equal(ntb_backend_name(1), "pci");
	assert_null(ntb_backend_name(2));
	conf_free(c);
}

static void test_fdtab_refcount(void **state)
{
	(void)state;
	if (!pl_fds)
		pl_fdtab_init();
	assert_non_null(pl_fds);
	int base = atomic_load(&pl_nsocks);

	struct pl_sock *s = pl_sock_alloc(PL_LISTENER); /* no transport object behind it */
	assert_non_null(s);
	assert_int_equal(atomic_load(&pl_nsocks), base + 1);
	pl_fd_install(100, s);
	pl_fd_install(101, s); /* a dup */
	pl_sock_put(s);        /* the creator's reference */
	assert_int_equal(atomic_load(&s->refs), 2);

	struct pl_sock *g = pl_sock_get(100);
	assert_ptr_equal(g, s);
	assert_int_equal(atomic_load(&s->refs), 3);
	pl_sock_put(g);
	assert_null(pl_sock_get(102));
	assert_null(pl_sock_get(-1));
	assert_null(pl_sock_get(pl_nfds));

	pl_sock_put(pl_fd_take(100));
	assert_null(pl_sock_get(100));
	assert_ptr_equal(pl_sock_get(101), s);
	pl_sock_put(s);
	unsigned gen = atomic_load(&s->gen);
	pl_sock_put(pl_fd_take(101)); /* last reference: back to the pool */
	assert_int_equal(atomic_load(&pl_nsocks), base);

	/* The pool hands the same memory out again, with a new generation. */
	struct pl_sock *t = pl_sock_alloc(PL_LISTENER);
	assert_ptr_equal(t, s);
	assert_int_not_equal(atomic_load(&t->gen), gen);
	pl_fd_install(100, t);
	/* Installing over a slot drops what was there. */
	struct pl_sock *u = pl_sock_alloc(PL_LISTENER);
	pl_fd_install(100, u);
	assert_ptr_equal(pl_sock_get(100), u);
	pl_sock_put(u);
	pl_sock_put(t); /* creator's ref; the slot's went with the overwrite */
	pl_sock_put(u);
	pl_sock_put(pl_fd_take(100));
	assert_int_equal(atomic_load(&pl_nsocks), base);
	assert_true(atomic_load(&pl_fd_hi) >= 102);
}

/* A blocking send's wait for room (pl_room_spin()) ends and stays ended: a sender descheduled
 * past the wait's end before its first look at the clock (a loaded host) once got "pause and
 * retry" on 15 of every 16 later calls, so a send that alternates between two such waits never
 * reached its SO_SNDTIMEO wait (test_pl_semantics step 9 hung until the peer died). */
static void test_room_spin_ends(void **state)
{
	uint32_t saved = pl_spin_us;
	struct pl_spin sp;
	int falses = 0, trues_after = 0;

	(void)state;
	pl_spin_us = 50;
	memset(&sp, 0, sizeof(sp));
	assert_true(pl_room_spin(&sp)); /* the wait starts (1 ms) */
	usleep(5000);                   /* descheduled past its end */
	for (int i = 0; i < 100; i++) {
		if (!pl_room_spin(&sp))
			falses++;
		else if (falses)
			trues_after++;
	}
	assert_true(falses > 0);
	assert_int_equal(trues_after, 0);

	/* undisturbed: it spins, yields, and ends within about 1 ms, then stays ended */
	memset(&sp, 0, sizeof(sp));
	int calls = 0;
	while (pl_room_spin(&sp) && calls < 10000000)
		calls++;
	assert_true(calls < 10000000);
	for (int i = 0; i < 32; i++)
		assert_false(pl_room_spin(&sp));

	/* spin_us 0: no wait at all */
	pl_spin_us = 0;
	memset(&sp, 0, sizeof(sp));
	assert_false(pl_room_spin(&sp));
	pl_spin_us = saved;
}

/* A wait's spin whose rounds are slow (an epoll set of thousands of entries) reads the clock
 * and yields every round once 16 rounds took over 16 µs: it ends on time (within a round of its
 * budget) and lets a thread that shares its CPU run; fast rounds keep the every-16th rule. */
static void test_spin_slow_rounds(void **state)
{
	uint32_t saved = pl_spin_us;
	struct timespec tmo = { 10, 0 };
	struct pl_timing t = { .tmo = &tmo };
	bool kcheck;
	int rounds = 0, checks = 0;

	(void)state;
	pl_spin_us = 20000; /* 20 ms */
	int64_t t0 = pl_now_ns();
	while (pl_spinning(&t, &kcheck)) {
		usleep(2000); /* a round of 2 ms or more */
		rounds++;
		checks += kcheck;
	}
	int64_t spent = pl_now_ns() - t0;
	assert_int_equal(t.step, 1);
	/* 16 rounds before the first clock read (at least 32 ms: the budget is gone by then), so
	 * the spin ends at that first read; with the old rule it would have taken 16 more */
	assert_int_equal(rounds, 15);
	assert_int_equal(checks, 0);
	assert_true(spent >= 30 * 1000000LL);

	/* once slow, every round reads the clock: a budget of 20 ms ends within 20 rounds */
	struct pl_timing t2 = { .tmo = &tmo };
	rounds = 0;
	while (pl_spinning(&t2, &kcheck) && rounds < 1000) {
		if (t2.step == 1)
			assert_true(kcheck); /* (each round a look at the kernel fds too) */
		usleep(t2.step == 1 ? 1000 : 200);
		rounds++;
	}
	assert_int_equal(t2.step, 1);
	assert_true(rounds < 60);
	pl_spin_us = saved;
}

/* sched_yield() as the preload objects linked here call it: the real one, unless a test fakes
 * it (counted): returning at once (nobody else to run) or after yield_busy_ns (another thread
 * ran for that long). */
static bool yield_fake;
static unsigned yields;
static int64_t yield_busy_ns;

int sched_yield(void)
{
	if (!yield_fake)
		return (int)syscall(SYS_sched_yield);
	yields++;
	if (yield_busy_ns) {
		int64_t end = pl_now_ns() + yield_busy_ns;

		while (pl_now_ns() < end)
			;
	}
	return 0;
}

/* Spin for MS milliseconds in waits of WAIT_US each (a ping-pong's waits), each round ~0.5 µs;
 * returns the yields they made, and in *CHECKS the looks at the clock (every 16 rounds, or
 * every round once rounds are slow), at which a yield may come. */
static unsigned spin_yields(int ms, int wait_us, unsigned *checks)
{
	uint32_t saved = pl_spin_us;
	struct timespec tmo = { 10, 0 };
	int64_t end = pl_now_ns() + (int64_t)ms * 1000000;
	bool kcheck;

	pl_spin_us = 1000000;
	yields = 0;
	*checks = 0;
	while (pl_now_ns() < end) {
		struct pl_timing t = { .tmo = &tmo };
		int64_t wend = pl_now_ns() + (int64_t)wait_us * 1000;

		while (pl_now_ns() < wend && pl_spinning(&t, &kcheck)) {
			int64_t r = pl_now_ns() + 500;

			*checks += kcheck;
			while (pl_now_ns() < r)
				;
		}
	}
	pl_spin_us = saved;
	return yields;
}

/* A spinning wait yields so that a thread sharing its CPU can run. Yields that let nobody run
 * (they return at once) space out, up to one per 100 µs, across the thread's waits: each costs
 * a system call (1.2 µs in some guests) that a message arriving meanwhile waits for. A yield
 * that took long (somebody ran) brings back a yield at every check. As shares of the checks
 * (a loaded machine stretches the wall-clock gaps between them), three tries each. */
static void test_spin_yields_adapt(void **state)
{
	unsigned checks = 0, quiet = 0, busy = 0;
	bool quiet_ok = false, busy_ok = false;

	(void)state;
	yield_fake = true;
	/* nobody else: 40 µs waits, a check every ~8 µs: a yield at each would be all of them,
	 * one per 100 µs about one in twelve */
	yield_busy_ns = 0;
	spin_yields(5, 40, &checks); /* (settle the gap) */
	for (int i = 0; i < 3 && !quiet_ok; i++) {
		quiet = spin_yields(20, 40, &checks);
		quiet_ok = quiet >= 1 && checks >= 100 && quiet * 4 <= checks;
	}
	/* somebody runs at each yield (10 µs): every check yields again */
	yield_busy_ns = 10000;
	for (int i = 0; i < 3 && !busy_ok; i++) {
		busy = spin_yields(20, 50, &checks);
		busy_ok = checks >= 100 && busy * 10 >= checks * 9;
	}
	yield_busy_ns = 0;
	yield_fake = false;
	if (!quiet_ok || !busy_ok)
		print_error("quiet %u, busy %u yields (last checks %u)\n", quiet, busy, checks);
	assert_true(quiet_ok);
	assert_true(busy_ok);
}

/* One wait of T: spin until the budget runs out (SPIN_OUT), then "sleep" SLEEP_US more, end;
 * the spin budget it was given (µs). */
static int64_t one_wait(bool spin_out, unsigned sleep_us)
{
	struct pl_timing t = { .tmo = NULL };
	bool kcheck;
	bool spinning = pl_spinning(&t, &kcheck);
	int64_t budget = (t.spin_until - t.start) / 1000;

	assert_true(spinning);
	while (spin_out && pl_spinning(&t, &kcheck))
		;
	if (sleep_us)
		usleep(sleep_us);
	pl_timing_done(&t);
	return budget;
}

/* The adaptive spin: after PL_SPIN_LOST_MAX waits in a row that spun out and waited long past
 * twice the budget, a thread's waits spin PL_SPIN_SHORT_US; one caught by its spin, or whose
 * event came within twice the full budget, gives the full budget back. Fewer lost waits in a
 * row keep it. (The budget is read from the wait's own deadline: no timing is asserted.) */
static void test_spin_adapts(void **state)
{
	uint32_t saved = pl_spin_us;

	(void)state;
	pl_spin_us = 50;
	assert_int_equal(one_wait(false, 0), 50); /* (caught: a clean start) */
	for (unsigned i = 0; i < PL_SPIN_LOST_MAX - 1; i++)
		assert_int_equal(one_wait(true, 300), 50);
	assert_int_equal(one_wait(false, 0), 50); /* caught: the count starts again */
	for (unsigned i = 0; i < PL_SPIN_LOST_MAX; i++)
		assert_int_equal(one_wait(true, 300), 50);
	assert_int_equal(one_wait(true, 300), PL_SPIN_SHORT_US);
	assert_int_equal(one_wait(false, 0), PL_SPIN_SHORT_US); /* caught by the short spin */
	assert_int_equal(one_wait(false, 0), 50);
	/* spun out, but the event came within 2 x 50 µs (a thread preempted there for that long
	 * misses it: tried again) */
	bool back = false;

	for (int k = 0; k < 5 && !back; k++) {
		for (unsigned i = 0; i < PL_SPIN_LOST_MAX; i++)
			one_wait(true, 300);
		assert_int_equal(one_wait(true, 0), PL_SPIN_SHORT_US);
		back = one_wait(false, 0) == 50;
	}
	assert_true(back);
	pl_spin_us = saved;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_layout),
		cmocka_unit_test(test_key_mapped_equals_v4),
		cmocka_unit_test(test_key_v6_and_bad_family),
		cmocka_unit_test(test_params_conversion),
		cmocka_unit_test(test_unknown_backend),
		cmocka_unit_test(test_fdtab_refcount),
		cmocka_unit_test(test_room_spin_ends),
		cmocka_unit_test(test_spin_adapts),
		cmocka_unit_test(test_spin_slow_rounds),
		cmocka_unit_test(test_spin_yields_adapt),
	};
	return cmocka_run_group_tests_name("pl_glue", tests, NULL, NULL);
}
