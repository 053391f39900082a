// SPDX-License-Identifier: MIT
/* The fd table: fd → struct pl_sock, read without locks on every wrapped call, and the
 * type-stable pool of pl_sock objects behind it.
 *
 *   pl_fds[fd]   written by install/take (exchange, release)   read by pl_sock_get (acquire)
 *   s->refs      one per table slot + one per call in flight; the object is recycled at 0
 *   free list    under pl_pool_lock (alloc and final put only, never the data path) */
#include "preload/pl_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

_Atomic(struct pl_sock *) *pl_fds;
int pl_nfds;
_Atomic int pl_nsocks;
_Atomic int pl_fd_hi;   /* one above the highest fd ever installed: bounds table scans */

static pthread_mutex_t pl_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_sock *pl_free_list;

#define PL_FDS_CAP (1 << 20)

void pl_fdtab_init(void)
{
	struct rlimit rl;
	size_t n = 65536;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > n)
		n = rl.rlim_max;
	if (n > PL_FDS_CAP)
		n = PL_FDS_CAP;
	pl_fds = pl_zero_pages(n * sizeof(*pl_fds));
	if (pl_fds) {
		pl_nfds = (int)n;
		pl_cand_init();
	}
}

/* LEN bytes of zero pages that stay mapped for the process's life, NULL when none are left. Not
 * calloc(): it clears a block it takes from the heap, which it does for large ones once the
 * program freed an mmap'ed block larger than them (glibc then raises its mmap threshold; the
 * library's config buffer once did that before our tables were made: ~60 page faults at every
 * start). Only the pages of descriptors in use are touched. */
void *pl_zero_pages(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int pl_fd_max(void)
{
	return pl_nfds;
}

struct pl_sock *pl_sock_alloc(enum pl_kind kind)
{
	struct pl_sock *s;

	pthread_mutex_lock(&pl_pool_lock);
	s = pl_free_list;
	if (s)
		pl_free_list = s->next_free;
	pthread_mutex_unlock(&pl_pool_lock);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		pthread_mutex_init(&s->lock, NULL);
	}
	/* refs stays 0 until pl_fd_install(): lookups that still see an older incarnation
	 * fail their increment-if-non-zero and re-read the slot. */
	atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
	s->next_free = NULL;
	s->kind = kind;
	/* relaxed: published by the install's release exchange, as the other fields */
	atomic_store_explicit(&s->kind_hint, (int)kind, memory_order_relaxed);
	atomic_store_explicit(&s->state, PL_CS_PENDING, memory_order_relaxed);
	atomic_store_explicit(&s->nonblock, 0, memory_order_relaxed);
	atomic_store_explicit(&s->rcvtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->sndtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->linger_abort, 0, memory_order_relaxed);
	atomic_store_explicit(&s->wlen, 0, memory_order_relaxed);
	atomic_store_explicit(&s->nospace, false, memory_order_relaxed);
	atomic_store_explicit(&s->rx_eagain, 0, memory_order_relaxed);
	atomic_store_explicit(&s->err_taken, false, memory_order_relaxed);
	s->conn = NULL;
	s->link_index = -1;
	s->port = 0;
	s->adv_links = 0;
	s->adv_next = NULL;
	s->pending_err = 0;
	s->moved = false;
	s->opts_gen = 0;
	s->opts_shared = false;
	atomic_store_explicit(&s->opts_set_late, false, memory_order_relaxed);
	/* relaxed: the slot is being reset, not in use by a connection yet */
	atomic_store_explicit(&s->link_moves, 0, memory_order_relaxed);
	atomic_store_explicit(&s->defer_left, false, memory_order_relaxed);
	atomic_store_explicit(&s->unadvertised, false, memory_order_relaxed);
	s->desc[0] = 0;
	s->ep = NULL;
	atomic_store_explicit(&s->refs, 1, memory_order_relaxed); /* the creator's */
	atomic_fetch_add_explicit(&pl_nsocks, 1, memory_order_relaxed);
	return s;
}

void pl_sock_put(struct pl_sock *s)
{
	if (!s)
		return;
	/* acq_rel: the last put sees every write made under earlier references. */
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	pl_sock_release(s);
	atomic_fetch_sub_explicit(&pl_nsocks, 1, memory_order_relaxed);
	pthread_mutex_lock(&pl_pool_lock);
	s->next_free = pl_free_list;
	pl_free_list = s;
	pthread_mutex_unlock(&pl_pool_lock);
}

struct pl_sock *pl_sock_get(int fd)
{
	if (unlikely(fd < 0 || fd >= pl_nfds || !pl_fds))
		return NULL;
	for (;;) {
		/* acquire pairs with the release exchange in pl_fd_install(). */
		struct pl_sock *s = atomic_load_explicit(&pl_fds[fd], memory_order_acquire);
		if (likely(!s))
			return NULL;
		int r = atomic_load_explicit(&s->refs, memory_order_relaxed);
		bool got = false;
		while (r > 0) {
			/* acquire: with the reference taken, the fields written before the
			 * install are visible (pairs with the release exchange in pl_fd_install) */
			if (atomic_compare_exchange_weak_explicit(&s->refs, &r, r + 1,
								  memory_order_acquire,
								  memory_order_relaxed)) {
				got = true;
				break;
			}
		}
		if (got) {
			/* Still the object at FD? (it may have been recycled for another fd) */
			/* re-check pairs with the exchanges in pl_fd_install / pl_fd_take */
			if (atomic_load_explicit(&pl_fds[fd], memory_order_acquire) == s)
				return s;
			pl_sock_put(s);
		}
	}
}

void pl_fd_install(int fd, struct pl_sock *s)
{
	if (fd < 0 || fd >= pl_nfds)
		return;
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	int hi = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);
	while (hi <= fd && !atomic_compare_exchange_weak_explicit(&pl_fd_hi, &hi, fd + 1,
								 memory_order_relaxed,
								 memory_order_relaxed))
		;
	/* release pairs with the acquire load in pl_sock_get(): fields are set up before. */
	struct pl_sock *old = atomic_exchange_explicit(&pl_fds[fd], s, memory_order_acq_rel);
	pl_sock_put(old);
}

struct pl_sock *pl_fd_take(int fd)
{
	if (fd < 0 || fd >= pl_nfds || !pl_fds)
		return NULL;
	/* pairs with the acquire loads in pl_sock_get(): later lookups miss the object */
	return atomic_exchange_explicit(&pl_fds[fd], NULL, memory_order_acq_rel);
}

int pl_fd_find_outside(const struct pl_sock *s, unsigned lo, unsigned hi)
{
	int top = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);

	for (int fd = 0; pl_fds && fd < top && fd < pl_nfds; fd++)
		/* relaxed: a hint (the caller checks the descriptor's socket itself) */
		if (((unsigned)fd < lo || (unsigned)fd > hi) &&
		    atomic_load_explicit(&pl_fds[fd], memory_order_relaxed) == s)
			return fd;
	return -1;
}

int pl_fd_find(const struct pl_sock *s, int skip)
{
	return pl_fd_find_outside(s, (unsigned)skip, (unsigned)skip);
}

void pl_fdtab_atfork_child(void)
{
	/* Only this thread survives: a lock another thread held is never released. */
	pthread_mutex_init(&pl_pool_lock, NULL);
}

/* The last reference is gone: end the connection / withdraw the listener. */
void pl_sock_release(struct pl_sock *s)
{
	PL_ENTER();
	switch (s->kind) {
	case PL_CONN:
		if (s->conn) {
			/* last reference: pairs with pl_set_state(); conn and state are final */
			if (atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_OPEN ||
			    atomic_load_explicit(&s->linger_abort, memory_order_relaxed))
				tp_abort(s->conn);
			else
				tp_close(s->conn);
		}
		s->conn = NULL;
		break;
	case PL_LISTENER:
		pl_listener_gone(s); /* (withdrawn: nothing left to withdraw) */
		break;
	case PL_EPOLL:
		pl_epoll_free(s->ep);
		s->ep = NULL;
		break;
	}
	PL_LEAVE();
}
