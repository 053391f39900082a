/* SPDX-License-Identifier: MIT */
/* The host table's indexes (tp_host_index.c): the free queue gives the entry released longest
 * ago, the server indexes find exactly the entries with a peer slot or a key, and a table whose
 * indexes a dying lock holder left half-updated (a lying queue head, a bucket that loops) is
 * rebuilt from its entries, and so is the pool of transfer contexts (tp_pool_rebuild()). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "transport/tp_int.h"

#define N 64u

static struct tp_host *table(void)
{
	size_t size = sizeof(struct tp_host) + N * sizeof(struct tp_host_entry) + tp_hidx_size(N);
	struct tp_host *h = calloc(1, size);

	assert_non_null(h);
	h->contexts = N;
	tp_hidx_init(h);
	return h;
}

/* Take entry I as a server entry with peer slot PS and a key made from KV. */
static void serve(struct tp_host *h, uint32_t i, uint32_t ps, uint32_t kv)
{
	struct tp_host_entry *e = &h->e[i];

	e->state = TP_ES_OPEN;
	e->role = 1;
	e->peer_slot = ps;
	memset(&e->key, 0, sizeof(e->key));
	memcpy(e->key.bytes, &kv, sizeof(kv));
	tp_hidx_add_server(h, i);
}

static void release(struct tp_host *h, uint32_t i, uint64_t ms)
{
	h->e[i].state = TP_ES_FREE;
	h->e[i].released_ms = ms;
	tp_hidx_freed(h, i);
}

/* Bit I set for each entry the peer-slot index lists under PS (and has that peer slot). */
static uint64_t peer_set(const struct tp_host *h, uint32_t ps)
{
	uint64_t set = 0;
	uint32_t steps = 0;

	for (uint32_t n = tp_hidx_peer_first(h, ps); n && steps++ < N; n = tp_hidx_peer_next(h, n))
		if (n <= tp_host_used(h) && h->e[n - 1].peer_slot == ps && h->e[n - 1].state != TP_ES_FREE)
			set |= 1ull << (n - 1);
	return set;
}

static uint64_t key_set(const struct tp_host *h, uint32_t kv)
{
	struct tp_key k;
	uint64_t set = 0;
	uint32_t steps = 0;

	memset(&k, 0, sizeof(k));
	memcpy(k.bytes, &kv, sizeof(kv));
	for (uint32_t n = tp_hidx_key_first(h, &k); n && steps++ < N; n = tp_hidx_key_next(h, n))
		if (n <= tp_host_used(h) && !memcmp(&h->e[n - 1].key, &k, sizeof(k)) &&
		    h->e[n - 1].state != TP_ES_FREE)
			set |= 1ull << (n - 1);
	return set;
}

/* The expected sets: entries I with I % 8 == PS (peer slots 0..7), I % 5 == KV (keys 0..4). */
static uint64_t want(uint32_t mod, uint32_t r, uint64_t live)
{
	uint64_t set = 0;

	for (uint32_t i = 0; i < N; i++)
		if (i % mod == r)
			set |= 1ull << i;
	return set & live;
}

static void test_free_queue_order(void **state)
{
	(void)state;
	struct tp_host *h = table();

	for (uint32_t i = 0; i < N; i++) /* a new table: in entry order */
		assert_int_equal(tp_hidx_free_pop(h), (int)i);
	assert_int_equal(tp_hidx_free_pop(h), -1);
	for (uint32_t i = 0; i < N; i++)
		h->e[i].state = TP_ES_OPEN;
	release(h, 17, 100);
	release(h, 3, 200);
	release(h, 40, 300);
	assert_int_equal(tp_hidx_free_pop(h), 17);
	release(h, 9, 400);
	assert_int_equal(tp_hidx_free_pop(h), 3);
	assert_int_equal(tp_hidx_free_pop(h), 40);
	assert_int_equal(tp_hidx_free_pop(h), 9);
	assert_int_equal(tp_hidx_free_pop(h), -1);
	free(h);
}

static void test_server_lookup(void **state)
{
	(void)state;
	struct tp_host *h = table();
	uint64_t live = ~0ull;

	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(tp_hidx_free_pop(h), (int)i);
		serve(h, i, i % 8u, i % 5u);
	}
	for (uint32_t ps = 0; ps < 8; ps++)
		assert_true(peer_set(h, ps) == want(8, ps, live));
	for (uint32_t kv = 0; kv < 5; kv++)
		assert_true(key_set(h, kv) == want(5, kv, live));
	/* freed ones leave both indexes (first, middle and last of chains among them) */
	for (uint32_t i = 0; i < N; i += 3) {
		release(h, i, i);
		live &= ~(1ull << i);
	}
	for (uint32_t ps = 0; ps < 8; ps++)
		assert_true(peer_set(h, ps) == want(8, ps, live));
	for (uint32_t kv = 0; kv < 5; kv++)
		assert_true(key_set(h, kv) == want(5, kv, live));
	/* ... and are reused in the order they were released */
	assert_int_equal(tp_hidx_free_pop(h), 0);
	assert_int_equal(tp_hidx_free_pop(h), 3);
	free(h);
}

static void test_rebuild_after_dead_holder(void **state)
{
	(void)state;
	struct tp_host *h = table();
	uint64_t live = 0;

	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(tp_hidx_free_pop(h), (int)i);
	for (uint32_t i = 0; i < N; i++) {
		if (i % 4 == 0) {
			release(h, i, 1000 - i); /* released in the reverse order of their number */
		} else {
			serve(h, i, i % 8u, i % 5u);
			live |= 1ull << i;
		}
	}
	/* a queue head naming a busy entry: the pop rebuilds and gives the longest released */
	h->free_head = 2;
	assert_int_equal(tp_hidx_free_pop(h), 60);
	h->e[60].state = TP_ES_CONNECTING; /* (as tp_slot_alloc() takes it: a client's) */
	/* a bucket that loops, and one cut short: walks end, the rebuild restores them */
	h->e[1].peer_next = 2;
	h->e[1].key_next = 2;
	for (uint32_t ps = 0; ps < 8; ps++)
		peer_set(h, ps); /* (must end) */
	uint32_t b = tp_hidx_peer_first(h, 5);
	h->e[b - 1].peer_next = 0;
	/* and a free count a dead holder left wrong: counted again from the entries */
	uint32_t free_want = h->contexts - tp_host_used(h);

	for (uint32_t i = 0; i < tp_host_used(h); i++)
		free_want += h->e[i].state == TP_ES_FREE;
	atomic_store(&h->free_num, free_want + 3u);
	tp_hidx_rebuild(h);
	assert_int_equal(atomic_load(&h->free_num), free_want);
	assert_int_equal(free_want, h->contexts - N + N / 4u - 1u); /* (60 was taken) */
	for (uint32_t ps = 0; ps < 8; ps++)
		assert_true(peer_set(h, ps) == want(8, ps, live));
	for (uint32_t kv = 0; kv < 5; kv++)
		assert_true(key_set(h, kv) == want(5, kv, live));
	assert_int_equal(tp_hidx_free_pop(h), 56); /* (60 was taken) */
	assert_int_equal(tp_hidx_free_pop(h), 52);
	free(h);
}

/* A new session (tp_hidx_init() over a table an earlier session left) clears no entry: each is
 * cleared when first handed out, the never-used ones first, and no walk, chain or rebuild looks
 * at an entry beyond those handed out, whatever it holds. */
static void test_new_session_leaves_entries(void **state)
{
	(void)state;
	struct tp_host *h = table();
	struct tp_host_entry zero, *old = malloc(N * sizeof(*old));

	assert_non_null(old);
	memset(&zero, 0, sizeof(zero));
	for (uint32_t i = 0; i < N; i++) { /* the earlier session's: live-looking servers */
		memset(&h->e[i], 0xa5, sizeof(h->e[i]));
		h->e[i].state = TP_ES_OPEN;
		h->e[i].role = 1;
		h->e[i].peer_slot = 5;
		memset(&h->e[i].key, 0, sizeof(h->e[i].key));
		h->e[i].key.bytes[0] = 2;
		h->e[i].peer_next = h->e[i].key_next = (i + 1u) % N + 1u;
	}
	memcpy(old, h->e, N * sizeof(*old));
	tp_hidx_init(h);
	assert_memory_equal(h->e, old, N * sizeof(*old)); /* nothing cleared */
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(tp_hidx_free_pop(h), (int)i);
		assert_memory_equal(&h->e[i], &zero, sizeof(zero)); /* cleared when handed out */
		serve(h, i, 5, 2);
	}
	assert_memory_equal(&h->e[4], &old[4], (N - 4) * sizeof(*old));
	assert_true(peer_set(h, 5) == 0xf);
	assert_true(key_set(h, 2) == 0xf);
	/* a chain that leads into the unused entries ends there (the last served is first) */
	h->e[3].peer_next = N;
	assert_true(peer_set(h, 5) == 0x8);
	assert_int_equal(tp_hidx_peer_next(h, N), 0); /* (not read: beyond those handed out) */
	/* a rebuild takes the servers from the entries handed out only */
	release(h, 1, tp_now_ms());
	tp_hidx_rebuild(h);
	assert_true(peer_set(h, 5) == 0xd);
	assert_true(key_set(h, 2) == 0xd);
	/* never-used entries before one released less than TP_SLOT_REUSE_MS ago, in order */
	assert_int_equal(tp_hidx_free_pop(h), 4);
	assert_memory_equal(&h->e[4], &zero, sizeof(zero));
	/* ... and after one released longer ago (its window pages touched: no page fault) */
	h->e[1].released_ms = tp_now_ms() - TP_SLOT_REUSE_MS;
	assert_int_equal(tp_hidx_free_pop(h), 1);
	assert_int_equal(tp_hidx_free_pop(h), 5);
	free(old);
	free(h);
}

/* The real path: a process that dies holding the host lock mid-update (its queue emptied, a
 * bucket made to loop) leaves the next holder (EOWNERDEAD) indexes rebuilt from the entries. */
/* A table of N entries in memory shared with forked children, its robust lock made, and L a
 * link that reaches it (the lock calls' only need); SIZE its mapping's. */
static struct tp_host *shared_table(struct tp_link *l, size_t *size)
{
	struct tp_host *h;
	pthread_mutexattr_t a;

	*size = sizeof(struct tp_host) + N * sizeof(struct tp_host_entry) + tp_hidx_size(N);
	h = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(h != MAP_FAILED);
	memset(l, 0, sizeof(*l));
	l->host = h;
	h->contexts = N;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->lock, &a);
	pthread_mutexattr_destroy(&a);
	tp_hidx_init(h);
	return h;
}

static void test_lock_holder_death(void **state)
{
	(void)state;
	struct tp_link l;
	size_t size;
	struct tp_host *h = shared_table(&l, &size);
	uint64_t live = 0;

	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(tp_hidx_free_pop(h), (int)i);
	for (uint32_t i = 0; i < N; i++) {
		if (i % 4 == 0) {
			release(h, i, 1000 - i);
		} else {
			serve(h, i, i % 8u, i % 5u);
			live |= 1ull << i;
		}
	}
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		tp_host_lock(&l);
		h->free_head = h->free_tail = 0;
		uint32_t b = tp_hidx_peer_first(h, 3);
		h->e[b - 1].peer_next = b; /* (loops on itself) */
		_exit(0); /* holding the lock */
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	tp_host_lock(&l);
	for (uint32_t ps = 0; ps < 8; ps++)
		assert_true(peer_set(h, ps) == want(8, ps, live));
	assert_int_equal(tp_hidx_free_pop(h), 60);
	tp_host_unlock(&l);
	munmap(h, size);
}

/* A holder that died in the pool's update (tp_ring.c): a ring popped and never granted, a ring
 * granted and stacked again, a ring listed twice. The next holder's pool lists every ring that
 * no entry holds, once: the lost ones at the bottom, the others in their order. */
static void test_pool_after_dead_holder(void **state)
{
	(void)state;
	struct tp_link l;
	size_t size;
	struct tp_host *h = shared_table(&l, &size);
	const uint32_t rings = 16;

	h->pool_n = rings;
	tp_pool_init(h, rings);
	/* entries 0..5 granted rings 0..5 (the stack pops ring 0 first) */
	for (uint32_t i = 0; i < 6; i++) {
		assert_int_equal(tp_hidx_free_pop(h), (int)i);
		serve(h, i, i, i);
		h->e[i].ring = (uint32_t)tp_pool_take(&l, 0, false) + 1u;
		assert_int_equal(h->e[i].ring, i + 1u);
	}
	assert_int_equal(h->pool_top, rings - 6);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		tp_host_lock(&l);
		h->pool_top -= 2;                     /* rings 6 and 7 popped, never granted */
		h->pool_stack[h->pool_top++] = 2;     /* ring 2 stacked, still granted */
		h->pool_stack[h->pool_top++] = 9;     /* ring 9 listed twice */
		_exit(0);                             /* holding the lock */
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	tp_host_lock(&l);
	/* rings 8..15 free and listed (15 at the bottom, 8 on top), 6 and 7 lost: 10 in all */
	assert_int_equal(h->pool_top, rings - 6);
	assert_int_equal(atomic_load(&h->pool_free), rings - 6);
	const uint16_t want_stack[] = { 6, 7, 15, 14, 13, 12, 11, 10, 9, 8 };

	assert_memory_equal(h->pool_stack, want_stack, sizeof(want_stack));
	/* the next grants: the warm ones first, the lost ones last */
	assert_int_equal(tp_pool_take(&l, 0, true), 8);
	tp_host_unlock(&l);
	munmap(h, size);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_queue_order),
		cmocka_unit_test(test_server_lookup),
		cmocka_unit_test(test_rebuild_after_dead_holder),
		cmocka_unit_test(test_lock_holder_death),
		cmocka_unit_test(test_pool_after_dead_holder),
		cmocka_unit_test(test_new_session_leaves_entries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
