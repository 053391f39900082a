/* SPDX-License-Identifier: MIT */
/* struct tp_mutex (transport/tp_mutex.h): mutual exclusion under contention (threads that spin
 * and threads that sleep in the futex), trylock semantics, every sleeper woken. */
#include <pthread.h> /* (pthread_timedjoin_np: _GNU_SOURCE from the Makefile) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "transport/tp_mutex.h"

#define THREADS 4
#define ROUNDS  20000

/* Join T, failing (not hanging) when it does not end within 20 s: a lost wake-up. */
static void join_or_fail(pthread_t t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	assert_int_equal(pthread_timedjoin_np(t, NULL, &ts), 0);
}

struct shared {
	struct tp_mutex m;
	uint64_t counter;  /* plain: only ever touched under m */
	int inside;        /* plain: threads inside the critical section now */
	int overlaps;      /* times a thread found another one inside */
};

static void *worker(void *p)
{
	struct shared *sh = p;

	for (int i = 0; i < ROUNDS; i++) {
		tp_mutex_lock(&sh->m);
		if (sh->inside++)
			sh->overlaps++;
		uint64_t v = sh->counter;

		/* every 64th round holds the lock long enough for the others to go to sleep */
		if (i % 64 == 0)
			usleep(20);
		sh->counter = v + 1;
		sh->inside--;
		tp_mutex_unlock(&sh->m);
	}
	return NULL;
}

static void test_mutual_exclusion(void **state)
{
	struct shared sh = { .counter = 0 };
	pthread_t t[THREADS];

	(void)state;
	tp_mutex_init(&sh.m);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, &sh), 0);
	for (int i = 0; i < THREADS; i++)
		join_or_fail(t[i]);
	assert_int_equal(sh.overlaps, 0);
	assert_int_equal(sh.counter, (uint64_t)THREADS * ROUNDS);
	assert_int_equal(atomic_load(&sh.m.v), 0); /* released, no waiter mark left */
}

struct holder {
	struct tp_mutex *m;
	volatile int go;
};

static void *take_and_release(void *p)
{
	struct holder *h = p;

	tp_mutex_lock(h->m); /* sleeps: the test thread holds it */
	h->go = 1;
	tp_mutex_unlock(h->m);
	return NULL;
}

static void test_trylock_and_sleeper(void **state)
{
	struct tp_mutex m;
	struct holder h = { .m = &m, .go = 0 };
	pthread_t t;

	(void)state;
	tp_mutex_init(&m);
	assert_int_equal(tp_mutex_trylock(&m), 0);
	assert_int_equal(tp_mutex_trylock(&m), EBUSY); /* not recursive */
	assert_int_equal(pthread_create(&t, NULL, take_and_release, &h), 0);
	/* the other thread says it waits (the word at 2) before it sleeps */
	for (int i = 0; i < 10000 && atomic_load(&m.v) != 2; i++)
		usleep(500);
	assert_int_equal(atomic_load(&m.v), 2);
	assert_int_equal(h.go, 0);
	tp_mutex_unlock(&m);
	join_or_fail(t);
	assert_int_equal(h.go, 1);
	assert_int_equal(tp_mutex_trylock(&m), 0);
	tp_mutex_unlock(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutual_exclusion),
		cmocka_unit_test(test_trylock_and_sleeper),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
