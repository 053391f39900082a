/* SPDX-License-Identifier: MIT */
/* Connection objects: creation, the cache of finished ones, ownership (single-owner rule) and
 * accessors. Set-up: tp_connect.c, tp_accept.c; the end: tp_close.c. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* --- connection objects ------------------------------------------------------------------------
 * A connection's private state is large (the record queue, the sender's shadow rings: ~180 KiB
 * with the demo's geometry), and allocating and zeroing it afresh for every set-up — page
 * faults included, as the heap shrinks and grows back — was a good part of a set-up's cost. So a
 * link keeps up to TP_CONN_CACHE connections this process finished (tp_conn_recycle()), and a
 * set-up whose peer geometry matches reuses one (conn_take()). conn_reset() gives it the state of
 * a new one: every field zero except the record queue, whose entries are only read between
 * rec_head and rec_tail (both reset), and the buffers, which are kept: the inline shadow is
 * zeroed again (tp_conn_init_queues()); the data shadow is read only where the send path wrote
 * first, and the bounce buffer only while rx_bounce_ok (reset) says it holds the head record.
 * The cache is under conns_lock; it holds at most what the process had lingering at once, and
 * half of it is freed every 500 ms it went unused (tp_conn_cache_trim()). */
#define TP_CONN_CACHE 64u

static void conn_destroy(struct tp_conn *c)
{
	tp_stripe_free(c);
	tp_conn_free_queues(c);
	free(c);
}

void tp_conn_recycle(struct tp_conn *c)
{
	struct tp_link *l = c->link;
	bool kept = false;

	/* relaxed: C is finished, no other thread of ours uses it any more */
	if (c->pre_buf || atomic_load_explicit(&c->pre_on, memory_order_relaxed))
		tp_prefix_drop(c);
	tp_tx_hold_drop(c);
	tp_stripe_free(c);
	c->framed_part = false;
	if (c->dmaq && ntb_dmaq_state(c->dmaq) != NTB_DMAQ_IDLE) {
		ntb_dmaq_destroy(c->dmaq); /* left mid-transfer: the next user gets a new one */
		c->dmaq = NULL;
	}
	pthread_mutex_lock(&l->conns_lock);
	if (l->conn_cache_n < TP_CONN_CACHE && c->sh_inline) {
		/* (its shadow to the pool: the next grant may go to another connection) */
		tp_shadow_put(l, c->sh_data, c->out.qsize, c->sh_mapped, c->out.pool_n);
		c->sh_data = NULL;
		c->sh_mapped = 0;
		c->next = l->conn_cache;
		l->conn_cache = c;
		l->conn_cache_n++;
		kept = true;
	}
	pthread_mutex_unlock(&l->conns_lock);
	if (!kept)
		conn_destroy(c);
}

/* A cached connection of L whose shadows fit a peer slot of INLINE_N slots and QSIZE bytes, or
 * NULL (one of another geometry is freed: the peer host's geometry changed). */
static struct tp_conn *conn_take(struct tp_link *l, uint32_t inline_n, uint32_t qsize)
{
	struct tp_conn *c;

	pthread_mutex_lock(&l->conns_lock);
	c = l->conn_cache;
	if (c) {
		l->conn_cache = c->next;
		l->conn_cache_n--;
	}
	l->conn_cache_used = true;
	pthread_mutex_unlock(&l->conns_lock);
	if (c && (c->out.inline_n != inline_n || c->out.qsize != qsize)) {
		conn_destroy(c);
		c = NULL;
	}
	return c;
}

/* Everything of C as calloc() would leave it, but the record queue: no record is read before it
 * was written (rec_head..rec_tail), and its 40 KiB are most of a connection's heap. Left alone,
 * a new connection's queue is pages nobody touched until its records use them: set-up clears
 * no 40 KiB (a page fault per 4 KiB page of a growing heap: a quarter of the client's CPU when
 * one process opened thousands of connections, bench section 8), and an idle connection holds
 * no resident memory for it. */
static void conn_zero(struct tp_conn *c)
{
	size_t recs = offsetof(struct tp_conn, recs), recs_end = recs + sizeof(c->recs);

	memset(c, 0, recs);
	memset((uint8_t *)c + recs_end, 0, sizeof(*c) - recs_end);
}

/* conn_zero(), the buffers kept (a cached connection's). */
static void conn_reset(struct tp_conn *c)
{
	uint8_t *sh_inline = c->sh_inline, *sh_data = c->sh_data, *bounce = c->rx_bounce;
	uint32_t bounce_cap = c->rx_bounce_cap;
	struct ntb_dmaq *dmaq = c->dmaq;

	conn_zero(c);
	c->sh_inline = sh_inline;
	c->sh_data = sh_data;
	c->rx_bounce = bounce;
	c->rx_bounce_cap = bounce_cap;
	c->dmaq = dmaq;
}

/* Free KEEP_NONE ? all : half (rounded up) of the connections cached by L. */
static void cache_free(struct tp_link *l, bool keep_none)
{
	struct tp_conn *c, *next, *drop = NULL;

	pthread_mutex_lock(&l->conns_lock);
	for (uint32_t n = keep_none ? l->conn_cache_n : (l->conn_cache_n + 1) / 2; n; n--) {
		c = l->conn_cache;
		l->conn_cache = c->next;
		l->conn_cache_n--;
		c->next = drop;
		drop = c;
	}
	pthread_mutex_unlock(&l->conns_lock);
	for (c = drop; c; c = next) {
		next = c->next;
		conn_destroy(c);
	}
}

/* Data shadows. A connection needs one only while a data ring is granted to it (its copy of
 * what it wrote there, for retransmission), and a ring is given back only drained, when the
 * shadow holds nothing anyone reads again. So a connection takes one at a grant and gives it
 * back with the ring: 10,000 connections that share 256 rings need about as many shadows as
 * rings, not one each (an mmap() and up to q bytes of page clearing per set-up). A pooled
 * shadow is kept in its own first bytes; the pool keeps as many as the peer has rings (no
 * shadow freed and allocated again while they go round) or TP_SHADOW_POOL_BYTES of them, half
 * freed with the connection cache when unused. */
#define TP_SHADOW_POOL_BYTES (32u << 20)

struct tp_shadow_free {
	struct tp_shadow_free *next;
	uint64_t mapped;
};

/* A new process's first shadows from one huge page. A shadow's pages, mapped by
 * MADV_POPULATE_WRITE before its first lap (tp_tx_prefault()), can still cost a trap each at
 * their first touch where the hypervisor keeps the page tables (a shadow-paging VM: ~5 us per
 * 4 KiB page on this project's test VM, ~0.65 ms per 512 KiB shadow, the first megabyte of a
 * new process 18x slower than the next). One 2 MiB transparent huge page is one such trap, and
 * one TLB entry. So the first shadows a process needs come from a 2 MiB slab made once (the
 * first chunk mapped brings the whole huge page; a connection that never wrote past its inline
 * slots brings none), taken before the link's pool and given back straight to the slab, its
 * mapped chunks kept beside it: at most 2 MiB per process, and only where the kernel gives huge
 * pages on request (transparent_hugepage "always" or "madvise"); the others, and all of them
 * without huge pages, from the pool and the heap. */
#define TP_SHADOW_SLAB  (2u << 20)
#define TP_SHADOW_SLAB_MAX 32u /* shadows in the slab at most (one bit each) */

static pthread_mutex_t slab_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf lock */
static uint8_t *slab;           /* (under slab_lock, all six) */
static uint32_t slab_q, slab_n, slab_free;
static uint64_t slab_mapped[TP_SHADOW_SLAB_MAX]; /* each shadow's mapped chunks, kept here */
static int slab_state;          /* 0: not tried; 1: made; -1: none in this process */

static bool thp_on_request(void)
{
	char b[128];
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	bool on = false;

	if (f) {
		on = fgets(b, sizeof(b), f) && (strstr(b, "[always]") || strstr(b, "[madvise]"));
		fclose(f);
	}
	return on;
}

/* Q fits the slab: a power of two from 4 KiB to half the slab (two shadows at least). */
static bool slab_fits(uint32_t q)
{
	return q >= 4096u && !(q & (q - 1u)) && q <= TP_SHADOW_SLAB / 2u;
}

/* The slab for shadows of Q bytes (slab_fits()), made at the first such call (under slab_lock):
 * slab_state 1, or -1 for good (no huge pages on request, no memory). errno kept. */
static void slab_make(uint32_t q)
{
	int saved = errno;

	slab_state = -1;
	if (!thp_on_request()) {
		errno = saved;
		return;
	}
	/* twice the size, to cut a 2 MiB-aligned 2 MiB out of it */
	size_t len = 2u * TP_SHADOW_SLAB;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED) {
		errno = saved;
		return;
	}
	uint8_t *a = (uint8_t *)(((uintptr_t)m + TP_SHADOW_SLAB - 1u) &
				 ~(uintptr_t)(TP_SHADOW_SLAB - 1u));
	size_t head = (size_t)(a - m), tail = len - head - TP_SHADOW_SLAB;

	if (head)
		munmap(m, head);
	if (tail)
		munmap(a + TP_SHADOW_SLAB, tail);
	if (madvise(a, TP_SHADOW_SLAB, MADV_HUGEPAGE) < 0) {
		munmap(a, TP_SHADOW_SLAB);
		errno = saved;
		return;
	}
	/* (not mapped now: a connection's set-up takes a shadow with its grant, and most never
	 * write past the inline slots; the first chunk a message maps, tp_tx_prefault(), brings
	 * the whole huge page, or its small page alone if the kernel had none free) */
	slab = a;
	slab_q = q;
	slab_n = TP_SHADOW_SLAB / q < TP_SHADOW_SLAB_MAX ? TP_SHADOW_SLAB / q : TP_SHADOW_SLAB_MAX;
	slab_free = slab_n == 32u ? UINT32_MAX : (UINT32_C(1) << slab_n) - 1u;
	slab_state = 1;
	errno = saved;
}

/* A free shadow of Q bytes from the slab (its mapped chunks in *RET_MAPPED), or NULL. */
static uint8_t *slab_get(uint32_t q, uint64_t *ret_mapped)
{
	uint8_t *p = NULL;

	if (!slab_fits(q))
		return NULL; /* (another link's geometry may fit it later) */
	pthread_mutex_lock(&slab_lock);
	if (!slab_state)
		slab_make(q);
	if (slab_state > 0 && slab_q == q && slab_free) {
		uint32_t i = (uint32_t)__builtin_ctz(slab_free);

		slab_free &= ~(UINT32_C(1) << i);
		p = slab + (size_t)i * q;
		*ret_mapped = slab_mapped[i];
	}
	pthread_mutex_unlock(&slab_lock);
	return p;
}

/* SH (chunks MAPPED mapped) back to the slab if it came from there: true. Nothing is written
 * into it (a pool's link in its first bytes would bring the huge page in at the close of a
 * connection that never used it). */
static bool slab_put(uint8_t *sh, uint64_t mapped)
{
	pthread_mutex_lock(&slab_lock);
	uintptr_t p = (uintptr_t)sh, b = (uintptr_t)slab;
	bool ours = slab && p >= b && p < b + (size_t)slab_n * slab_q;

	if (ours) {
		uint32_t i = (uint32_t)((p - b) / slab_q), bit = UINT32_C(1) << i;

		/* (a pointer inside a shadow, or one given back twice: kept out, not handed out
		 * twice) */
		if ((p - b) % slab_q == 0 && !(slab_free & bit)) {
			slab_free |= bit;
			slab_mapped[i] = mapped;
		} else {
			LOG(LL_ERROR, "transport: a shadow given back to the slab twice or misplaced "
			    "(%p): left out of it", (void *)sh);
		}
	}
	pthread_mutex_unlock(&slab_lock);
	return ours;
}

void tp_shadow_slab_atfork(int phase)
{
	if (phase == 0)
		pthread_mutex_lock(&slab_lock);
	else if (phase == 1)
		pthread_mutex_unlock(&slab_lock);
	else
		pthread_mutex_init(&slab_lock, NULL); /* (held by the forking thread: a copy) */
}

uint32_t tp_shadow_slab_free(void)
{
	pthread_mutex_lock(&slab_lock);
	uint32_t n = slab_state > 0 ? (uint32_t)__builtin_popcount(slab_free) : 0;

	pthread_mutex_unlock(&slab_lock);
	return n;
}

uint8_t *tp_shadow_get(struct tp_link *l, uint32_t q, uint64_t *ret_mapped)
{
	struct tp_shadow_free *f = NULL;
	uint8_t *sh = slab_get(q, ret_mapped); /* (first: the pool holds heap shadows only) */

	if (sh)
		return sh;
	pthread_mutex_lock(&l->sh_lock);
	if (l->sh_pool && l->sh_pool_q == q) {
		f = l->sh_pool;
		l->sh_pool = f->next;
		l->sh_pool_n--;
		l->sh_pool_used = true;
	}
	pthread_mutex_unlock(&l->sh_lock);
	if (f) {
		*ret_mapped = f->mapped;
		return (uint8_t *)f;
	}
	*ret_mapped = 0;
	return aligned_alloc(4096, q);
}

void tp_shadow_put(struct tp_link *l, uint8_t *sh, uint32_t q, uint64_t mapped, uint32_t rings)
{
	if (!sh || slab_put(sh, mapped))
		return;
	pthread_mutex_lock(&l->sh_lock);
	if ((!l->sh_pool_n || l->sh_pool_q == q) &&
	    ((l->sh_pool_n + 1u) * (uint64_t)q <= TP_SHADOW_POOL_BYTES || l->sh_pool_n < rings)) {
		struct tp_shadow_free *f = (struct tp_shadow_free *)(void *)sh;

		f->next = l->sh_pool;
		f->mapped = mapped;
		l->sh_pool = f;
		l->sh_pool_n++;
		l->sh_pool_q = q;
		sh = NULL;
	}
	pthread_mutex_unlock(&l->sh_lock);
	free(sh); /* (a heap shadow: the slab's went back above) */
}

/* Free KEEP_NONE ? all : half (rounded up) of L's pooled shadows. */
static void shadow_pool_free(struct tp_link *l, bool keep_none)
{
	struct tp_shadow_free *f, *drop = NULL;

	pthread_mutex_lock(&l->sh_lock);
	for (uint32_t n = keep_none ? l->sh_pool_n : (l->sh_pool_n + 1) / 2; n && l->sh_pool; n--) {
		f = l->sh_pool;
		l->sh_pool = f->next;
		l->sh_pool_n--;
		f->next = drop;
		drop = f;
	}
	pthread_mutex_unlock(&l->sh_lock);
	while ((f = drop)) {
		drop = f->next;
		free(f); /* (the pool holds heap shadows only) */
	}
}

void tp_conn_cache_drain(struct tp_link *l)
{
	cache_free(l, true);
	shadow_pool_free(l, true);
}

void tp_conn_cache_trim(struct tp_link *l)
{
	bool used;

	pthread_mutex_lock(&l->conns_lock);
	used = l->conn_cache_used;
	l->conn_cache_used = false;
	pthread_mutex_unlock(&l->conns_lock);
	if (!used)
		cache_free(l, false);
	pthread_mutex_lock(&l->sh_lock);
	used = l->sh_pool_used;
	l->sh_pool_used = false;
	pthread_mutex_unlock(&l->sh_lock);
	if (!used)
		shadow_pool_free(l, false);
}

struct tp_conn *tp_conn_new(struct tp_link *l, uint32_t slot)
{
	struct tp_host_entry *e = &l->host->e[slot];
	struct tp_conn *c = conn_take(l, e->peer_inline_n, e->peer_qsize);

	if (c)
		conn_reset(c);
	else if ((c = malloc(sizeof(*c))))
		conn_zero(c);
	if (!c)
		return NULL;
	c->link = l;
	c->keep_fd = -1;
	c->slot = slot;
	c->ent = e;
	c->st = &e->stats;
	c->nonce_in = e->nonce;
	c->nonce_out = e->peer_nonce;
	c->out.slot_off = e->peer_slot_off;
	c->out.inline_n = e->peer_inline_n;
	c->out.log2n = (uint32_t)__builtin_ctz(e->peer_inline_n);
	c->out.qsize = e->peer_qsize;
	c->peer_epoch = e->peer_epoch;
	c->tx_epoch = (uint16_t)e->epoch;
	c->rx_epoch = (uint16_t)e->epoch;
	c->fo_id = tp_fo_new_id(); /* (a recycled one gets a new key: old events miss it) */
	/* The first read that catches up publishes its release at once (tp_rx_release_turn()),
	 * as one after a send of ours does: a server's answer to the first request then finds
	 * the request acknowledged, and so does the client's close that follows it, which keeps
	 * no duplicate of its socket for bytes out (tp_close.c: two system calls per set-up, the
	 * duplicate and the helper's close of it, bench/connrate). Once per connection, however
	 * recent the set-up's own publication. */
	c->rx_first = true;
	if (tp_conn_init_queues(c)) {
		conn_destroy(c);
		return NULL;
	}
	tp_ring_conn_init(c); /* the data rings granted, each way (tp_ring.c) */
	/* no held message of ours (a word a dead sender left in this peer slot names one of its
	 * MSNs, which this connection's also pass through: tp_rx.c, rx_held_take()). A
	 * connection adopted across exec may hold one: tp_exec.c publishes it first. */
	tp_tx_held_word(c, 0);
	/* this process drives it (set-up, adopt): the release pairs with the CAS in
	 * tp_conn_own() of a process forked later */
	atomic_store_explicit(&e->active, (int32_t)tp_self_pid(), memory_order_release);
	/* release: pairs with the acquire loads of owned (tp_conn_own(), the helper's pass) */
	atomic_store_explicit(&c->owned, true, memory_order_release);
	return c;
}

/* A new connection (set-up, attach) has one holder; adopt keeps the count it had (fork). */
struct tp_conn *tp_conn_new_first(struct tp_link *l, uint32_t slot)
{
	struct tp_conn *c = tp_conn_new(l, slot);

	/* release: pairs with the acq_rel decrement in shared_elsewhere() (tp_close.c) and the
	 * increment in atfork_prepare() */
	if (c)
		atomic_store_explicit(&l->host->e[slot].refs, 1, memory_order_release);
	return c;
}

int tp_conn_own_slow(struct tp_conn *c)
{
	int32_t me, cur = 0;

	me = (int32_t)tp_self_pid();
	/* CAS 0 → me: the first user after a fork wins; acq_rel pairs with the release store of
	 * 0 in atfork_prepare() and with the other claimant's CAS */
	if (atomic_compare_exchange_strong_explicit(&c->ent->active, &cur, me, memory_order_acq_rel,
						    memory_order_acquire) || cur == me) {
		/* relaxed: informational (ntbsock stat), stored without the host lock as by
		 * tp_conn_set_owner() */
		atomic_store_explicit(&c->ent->pid, me, memory_order_relaxed);
		/* release: pairs with the acquire loads of owned (tp_conn_own(), the helper) */
		atomic_store_explicit(&c->owned, true, memory_order_release);
		/* (what it had before the fork is ours to drive now: tp_active.c) */
		tp_act_mark_sync(c);
		return 0;
	}
	/* relaxed: only whether to log */
	if (!atomic_load_explicit(&c->error, memory_order_relaxed))
		LOG(LL_DEBUG, "transport: slot %u is driven by process %d since a fork: "
		    "not usable here", c->slot, cur);
	tp_set_error(c, -EPERM);
	return -EPERM;
}

int tp_process_id(void)
{
	return tp_self_pid();
}

void tp_conn_set_owner(struct tp_conn *c, int pid, int fd)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	if (!c)
		return;
	/* relaxed: informational (stat); a move copies them (mv_finish()) */
	atomic_store_explicit(&c->ent->pid, pid, memory_order_relaxed);
	atomic_store_explicit(&c->ent->fd, fd, memory_order_relaxed);
}

int tp_conn_error_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	/* acquire: pairs with the CAS in tp_set_error_at() and the release stores in tp_close.c */
	int err = atomic_load_explicit(&c->error, memory_order_acquire);

	/* relaxed peer_gone: a sticky flag, nothing is published with it */
	if (!err && atomic_load_explicit(&c->peer_gone, memory_order_relaxed) && !c->fin_rcvd_v)
		err = -ECONNRESET; /* the peer vanished without an orderly FIN */
	return err;
}

void tp_conn_stats(const struct tp_conn *cc, struct tp_stats *ret_stats)
{
	const struct tp_conn *c = tp_conn_cur((struct tp_conn *)cc);

	/* the cursors are written under their locks: read them there (the API keeps C const; the
	 * mutexes are the only thing touched) */
	struct tp_conn *m = (struct tp_conn *)c;

	tp_stats_load(ret_stats, c->st);
	tp_mutex_lock(&m->tx_lock);
	ret_stats->tx_queue_fill = (c->tx_d - c->fb_rx_d) + (c->tx_i - c->fb_rx_i) * 128u;
	tp_mutex_unlock(&m->tx_lock);
	tp_mutex_lock(&m->rx_lock);
	ret_stats->rx_queue_fill = (c->v_d - c->c_d) + (c->v_i - c->c_i) * 128u;
	tp_mutex_unlock(&m->rx_lock);
}
