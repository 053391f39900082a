// SPDX-License-Identifier: MIT
/* Candidate sockets: TCP sockets not yet connected. Programs such as nginx and Go's runtime put
 * a socket into an epoll set before they connect() it; if the connect makes it an NTB
 * connection, its kernel registrations must move into the epoll shadows, or its readiness would
 * come from a kernel socket that never carries data. So registrations of candidates are
 * remembered, and moved by pl_cand_migrate().
 *
 *   pl_cand[fd]  set by socket(), cleared by connect/listen/close, dup2 onto it, close_range
 *                (relaxed: only read by calls on the same fd, which the program orders itself).
 *                Besides "candidate" it says what socket() left as it was, so that connect()
 *                need not ask the kernel (PL_CAND_*): dropped by the calls that change it, by a
 *                dup of the fd (the same socket then has another name), and by fork (the
 *                generation in the high bits: another process may change it)
 *   regs         under cand_lock; n_regs mirrors its length for a lock-free "none" test */
#include "preload/pl_int.h"

#include <stdlib.h>
#include <string.h>

struct cand_reg {
	int epfd, fd;
	struct epoll_event ev;
};

static _Atomic unsigned char *pl_cand;
static _Atomic int cand_hi;         /* above every fd marked (close_range clears up to it) */
static _Atomic unsigned cand_gen;   /* forks so far (mod 8), in each mark's high bits */

#define CAND_GEN_SHIFT 5
static pthread_mutex_t cand_lock = PTHREAD_MUTEX_INITIALIZER;

void pl_cand_atfork_child(void)
{
	pthread_mutex_init(&cand_lock, NULL); /* (another thread of the parent may have held it) */
}
static struct cand_reg *regs;
static int n_alloc;
static _Atomic int n_regs;

void pl_cand_init(void)
{
	pl_cand = pl_zero_pages((size_t)pl_nfds);
}

void pl_cand_mark(int fd, unsigned flags)
{
	if (!pl_cand || fd < 0 || fd >= pl_nfds)
		return;
	unsigned gen = atomic_load_explicit(&cand_gen, memory_order_relaxed) & 7u;
	atomic_store_explicit(&pl_cand[fd],
			      flags ? (unsigned char)(flags | gen << CAND_GEN_SHIFT) : 0,
			      memory_order_relaxed);
	int hi = atomic_load_explicit(&cand_hi, memory_order_relaxed);
	while (flags && fd >= hi &&
	       !atomic_compare_exchange_weak_explicit(&cand_hi, &hi, fd + 1, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

bool pl_cand_is(int fd)
{
	return pl_cand && fd >= 0 && fd < pl_nfds &&
	       (atomic_load_explicit(&pl_cand[fd], memory_order_relaxed) & PL_CAND_TCP);
}

unsigned pl_cand_flags(int fd)
{
	if (!pl_cand || fd < 0 || fd >= pl_nfds)
		return 0;
	unsigned v = atomic_load_explicit(&pl_cand[fd], memory_order_relaxed);
	unsigned gen = atomic_load_explicit(&cand_gen, memory_order_relaxed) & 7u;
	return v >> CAND_GEN_SHIFT == gen ? v & ((1u << CAND_GEN_SHIFT) - 1) : 0;
}

void pl_cand_drop(int fd, unsigned flags)
{
	if (pl_cand && fd >= 0 && fd < pl_nfds)
		atomic_fetch_and_explicit(&pl_cand[fd], (unsigned char)~flags, memory_order_relaxed);
}

_Atomic unsigned pl_fork_gen;

void pl_cand_forked(void)
{
	atomic_fetch_add_explicit(&cand_gen, 1, memory_order_relaxed);
	/* relaxed: read by this process's threads after the fork (pl_accept.c), one count */
	atomic_fetch_add_explicit(&pl_fork_gen, 1, memory_order_relaxed);
}

void pl_cand_closed_range(unsigned first, unsigned last)
{
	unsigned hi = (unsigned)atomic_load_explicit(&cand_hi, memory_order_relaxed);

	for (unsigned fd = first; fd <= last && fd < hi; fd++)
		pl_cand_closed((int)fd);
}

/* Drop the registrations matching FD as the registered fd (and, with AS_EPFD, as the set). */
static void purge(int fd, bool as_epfd)
{
	pthread_mutex_lock(&cand_lock);
	int n = atomic_load_explicit(&n_regs, memory_order_relaxed);
	for (int i = 0; i < n;) {
		if (regs[i].fd == fd || (as_epfd && regs[i].epfd == fd)) {
			regs[i] = regs[--n];
			continue;
		}
		i++;
	}
	atomic_store_explicit(&n_regs, n, memory_order_relaxed);
	pthread_mutex_unlock(&cand_lock);
}

void pl_cand_clear(int fd)
{
	if (!pl_cand_is(fd))
		return;
	atomic_store_explicit(&pl_cand[fd], 0, memory_order_relaxed);
	if (atomic_load_explicit(&n_regs, memory_order_relaxed))
		purge(fd, false);
}

void pl_cand_closed(int fd)
{
	if (pl_cand && fd >= 0 && fd < pl_nfds)
		atomic_store_explicit(&pl_cand[fd], 0, memory_order_relaxed);
	if (atomic_load_explicit(&n_regs, memory_order_relaxed))
		purge(fd, true); /* FD may also be an epoll set holding candidates */
}

void pl_cand_epoll(int epfd, int op, int fd, const struct epoll_event *ev)
{
	pthread_mutex_lock(&cand_lock);
	int n = atomic_load_explicit(&n_regs, memory_order_relaxed);
	int i;
	for (i = 0; i < n; i++)
		if (regs[i].epfd == epfd && regs[i].fd == fd)
			break;
	if (op == EPOLL_CTL_DEL) {
		if (i < n)
			regs[i] = regs[--n];
	} else if (ev) {
		if (i == n) {
			if (n == n_alloc) {
				int na = n_alloc ? n_alloc * 2 : 16;
				struct cand_reg *nr = realloc(regs, sizeof(*nr) * (size_t)na);
				if (!nr)
					goto out;
				regs = nr;
				n_alloc = na;
			}
			regs[n].epfd = epfd;
			regs[n].fd = fd;
			n++;
		}
		regs[i].ev = *ev;
	}
out:
	atomic_store_explicit(&n_regs, n, memory_order_relaxed);
	pthread_mutex_unlock(&cand_lock);
}

void pl_cand_migrate(int fd, struct pl_sock *s)
{
	struct cand_reg mine[16];
	int k = 0;

	if (!atomic_load_explicit(&n_regs, memory_order_relaxed))
		return;
	pthread_mutex_lock(&cand_lock);
	int n = atomic_load_explicit(&n_regs, memory_order_relaxed);
	for (int i = 0; i < n;) {
		if (regs[i].fd == fd && k < (int)ARRAY_SIZE(mine)) {
			mine[k++] = regs[i];
			regs[i] = regs[--n];
			continue;
		}
		i++;
	}
	atomic_store_explicit(&n_regs, n, memory_order_relaxed);
	pthread_mutex_unlock(&cand_lock);
	for (int i = 0; i < k; i++) {
		/* Still registered there? (a stale entry fails the DEL and is dropped) */
		if (pl_real.epoll_ctl(mine[i].epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
			continue;
		int r = pl_epoll_shadow_add(mine[i].epfd, fd, s, &mine[i].ev);
		if (r < 0)
			LOG(LL_WARN, "fd %d: cannot move its epoll registration (epoll fd %d): %s", fd,
			    mine[i].epfd, strerror(-r));
	}
}
