// SPDX-License-Identifier: MIT
/* select and pselect: a select over fd sets holding NTB fds runs as a poll over their fds
 * (pl_poll_run()). */
#include "preload/pl_ready_int.h"

#include <stdlib.h>
#include <string.h>

#define POLLIN_SET (POLLRDNORM | POLLRDBAND | POLLIN | POLLHUP | POLLERR)
#define POLLOUT_SET (POLLWRBAND | POLLWRNORM | POLLOUT | POLLERR)

#define PL_SEL_STACK 64

/* Word W of SET as bits (0 for a NULL set). */
static unsigned long sel_word(const fd_set *set, int w)
{
	return set ? (unsigned long)__FDS_BITS(set)[w] : 0;
}

/* The fds of one select as pollfds, with their objects: on the stack up to PL_SEL_STACK fds,
 * then on the heap (room for FD_SETSIZE). */
struct sel_fds {
	struct pollfd pstack[PL_SEL_STACK], kstack[PL_SEL_STACK + 1], *p, *kfds;
	struct pl_sock *sstack[PL_SEL_STACK], **socks;
	int n;
};

static void sel_init(struct sel_fds *f)
{
	f->p = f->pstack;
	f->kfds = f->kstack;
	f->socks = f->sstack;
	f->n = 0;
}

/* From the stack to the heap. 0 or -ENOMEM (F unchanged). */
static int sel_grow(struct sel_fds *f)
{
	struct pollfd *p = malloc(sizeof(*p) * FD_SETSIZE);
	struct pollfd *kfds = malloc(sizeof(*kfds) * (FD_SETSIZE + 1));
	struct pl_sock **socks = malloc(sizeof(*socks) * FD_SETSIZE);

	if (!p || !kfds || !socks) {
		free(p);
		free(kfds);
		free(socks);
		return -ENOMEM;
	}
	memcpy(p, f->pstack, sizeof(*p) * (size_t)f->n);
	memcpy(socks, f->sstack, sizeof(*socks) * (size_t)f->n);
	f->p = p;
	f->kfds = kfds;
	f->socks = socks;
	return 0;
}

/* Drop the objects' references and the heap arrays. */
static void sel_free(struct sel_fds *f)
{
	for (int i = 0; i < f->n; i++)
		pl_sock_put(f->socks[i]);
	if (f->p != f->pstack) {
		free(f->p);
		free(f->kfds);
		free(f->socks);
	}
}

/* The fds of RD, WR and EX below NFDS into F. 1 when one of them is carried in user space, 0
 * when none is, -ENOMEM. */
static int sel_collect(struct sel_fds *f, int nfds, const fd_set *rd, const fd_set *wr,
		       const fd_set *ex)
{
	int hi = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);
	bool any = false;

	/* Word by word, set bits only: a select over a few fds spread up to NFDS costs a few
	 * loads, not NFDS bit tests. */
	for (int w = 0; w * NFDBITS < nfds; w++) {
		unsigned long all = sel_word(rd, w) | sel_word(wr, w) | sel_word(ex, w);
		if (nfds - w * NFDBITS < NFDBITS)
			all &= (1UL << (nfds - w * NFDBITS)) - 1;
		for (; all; all &= all - 1) {
			int fd = w * NFDBITS + __builtin_ctzl(all), n = f->n;

			if (n == PL_SEL_STACK && f->p == f->pstack && sel_grow(f) < 0)
				return -ENOMEM;
			f->p[n].fd = fd;
			f->p[n].events = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
						 (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
						 (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
			f->p[n].revents = 0;
			f->socks[n] = fd < hi ? pl_sock_get_user(fd) : NULL;
			any |= f->socks[n] != NULL;
			f->n++;
		}
	}
	return any;
}

/* The poll results of F into RD, WR and EX, as the kernel writes them: the number of bits
 * set, or -EBADF. */
static int sel_report(const struct sel_fds *f, int nfds, fd_set *rd, fd_set *wr, fd_set *ex)
{
	const struct pollfd *p = f->p;
	int r = 0;

	for (int i = 0; i < f->n; i++)
		if (p[i].revents & POLLNVAL)
			return -EBADF;
	/* As the kernel: only the words covering NFDS are written back (FD_ZERO's 128-byte
	 * clears were a visible part of a select() that finds a socket ready). */
	size_t words = ((size_t)nfds + NFDBITS - 1) / NFDBITS;
	for (size_t w = 0; w < words; w++) {
		if (rd)
			__FDS_BITS(rd)[w] = 0;
		if (wr)
			__FDS_BITS(wr)[w] = 0;
		if (ex)
			__FDS_BITS(ex)[w] = 0;
	}
	for (int i = 0; i < f->n; i++) {
		if (rd && (p[i].events & POLLIN) && (p[i].revents & POLLIN_SET)) {
			FD_SET(p[i].fd, rd);
			r++;
		}
		if (wr && (p[i].events & POLLOUT) && (p[i].revents & POLLOUT_SET)) {
			FD_SET(p[i].fd, wr);
			r++;
		}
		if (ex && (p[i].events & POLLPRI) && (p[i].revents & POLLPRI)) {
			FD_SET(p[i].fd, ex);
			r++;
		}
	}
	return r;
}

/* select over fd sets as a poll over their fds. *RET_OURS: false when no fd of the sets is
 * carried in user space (then nothing was done: the caller passes the call to the kernel). */
static int select_impl(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
		       const sigset_t *mask, int64_t *ret_wait_ns, bool *ret_ours)
{
	struct sel_fds f;
	int r;

	*ret_ours = false;
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0 || !pl_active())
		return 0;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	sel_init(&f);
	r = sel_collect(&f, nfds, rd, wr, ex);
	if (r <= 0) {
		*ret_ours = r < 0;
		sel_free(&f);
		return r;
	}
	*ret_ours = true;
	r = pl_poll_run(f.p, (nfds_t)f.n, f.socks, f.kfds, tmo, mask, ret_wait_ns);
	r = r < 0 ? -errno : sel_report(&f, nfds, rd, wr, ex);
	sel_free(&f);
	return r;
}

NTB_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tmo)
{
	struct timespec ts, *tp = NULL;
	if (tmo) {
		if (tmo->tv_sec < 0 || tmo->tv_usec < 0)
			return (int)pl_ret(-EINVAL);
		ts.tv_sec = tmo->tv_sec;
		ts.tv_nsec = tmo->tv_usec * 1000;
		tp = &ts;
	}
	int64_t waited = 0;
	bool ours;
	int r = select_impl(nfds, rd, wr, ex, tp, NULL, &waited, &ours);
	if (!ours)
		return pl_real.select(nfds, rd, wr, ex, tmo);
	if (tmo && waited) {
		/* Linux writes back the time left (a call that did not wait leaves it as is). */
		int64_t left = (int64_t)tmo->tv_sec * 1000000 + tmo->tv_usec - waited / 1000;
		if (left < 0)
			left = 0;
		tmo->tv_sec = left / 1000000;
		tmo->tv_usec = left % 1000000;
	}
	return (int)pl_ret(r);
}

NTB_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
		       const sigset_t *mask)
{
	bool ours;
	if (tmo && (tmo->tv_sec < 0 || tmo->tv_nsec < 0 || tmo->tv_nsec >= 1000000000L))
		return (int)pl_ret(-EINVAL);
	int r = select_impl(nfds, rd, wr, ex, tmo, mask, NULL, &ours);
	if (!ours)
		return pl_real.pselect(nfds, rd, wr, ex, tmo, mask);
	return (int)pl_ret(r);
}
