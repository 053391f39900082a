// SPDX-License-Identifier: MIT
/* A connection whose NTB path broke and moved to its kernel TCP socket (transport's failover,
 * doc/design.md §5.8): from then on the descriptor is an ordinary kernel socket. The transport says so
 * with -EXDEV from tp_send()/tp_recv() (or tp_conn_failover_state()); this file turns the
 * socket over to the kernel once (state PL_CS_FAILED: every wrapper then passes it through),
 * says it in the log, and finishes the call that found it. */
#include "preload/pl_int.h"

#include <stdio.h>
#include <string.h>


void pl_conn_moved(struct pl_sock *s, int fd)
{
	char reason[TP_TCPSTAT_REASON];

	pthread_mutex_lock(&s->lock);
	/* pairs with the acquire loads of the data path (pl_route_io(), pl_is_ntb()) */
	if (atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_OPEN || s->moved) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->moved = true;
	PL_ENTER();
	const char *why = tp_conn_failover_reason(s->conn);
	PL_LEAVE();
	snprintf(reason, sizeof(reason), "failed over: %s", why ? why : "link broke");
	/* release: the move's record (moved, the kernel socket in place) before the state; pairs
	 * with the acquire loads of s->state on the calls' paths (as the check above) */
	atomic_store_explicit(&s->state, PL_CS_FAILED, memory_order_release);
	pthread_mutex_unlock(&s->lock);
	LOG(LL_INFO, "fd %d %s: tcp (%s)", fd, s->desc, reason);
	/* (`ntbsock stat` lists it as tcp from its host entry: tp_stat_list()) */
}

/* S's connection moved to another link (MOVES times so far): say it once per move. */
static void conn_linked(struct pl_sock *s, int fd, unsigned moves)
{
	PL_ENTER();
	struct tp_link *tl = tp_conn_link(s->conn);
	PL_LEAVE();
	int idx = pl_link_index_of(tl);

	/* (under the lock: a thread that finds the count current finds the link current; the
	 * exec hand-over names it: pl_exec.c, after pl_is_ntb()) */
	pthread_mutex_lock(&s->lock);
	/* relaxed: written under s->lock, held here (the unlocked look below is a hint) */
	bool news = atomic_load_explicit(&s->link_moves, memory_order_relaxed) < moves;

	if (news) {
		atomic_store_explicit(&s->link_moves, moves, memory_order_relaxed);
		if (idx >= 0)
			s->link_index = idx;
	}
	pthread_mutex_unlock(&s->lock);
	if (!news)
		return;
	LOG(LL_INFO, "fd %d %s: ntb (moved to link %s)", fd, s->desc,
	    idx >= 0 ? pl_conf->links[idx].name : "?");
}

bool pl_conn_check_moved(struct pl_sock *s, int fd)
{
	PL_ENTER();
	int st = tp_conn_failover_state(s->conn);
	unsigned moves = tp_conn_moves(s->conn);
	PL_LEAVE();
	if (unlikely(moves != atomic_load_explicit(&s->link_moves, memory_order_relaxed)))
		conn_linked(s, fd, moves);
	if (st != 2)
		return false;
	pl_conn_moved(s, fd);
	return true;
}

/* The rest of a send (DONE bytes were sent over NTB) through the kernel socket. */
ssize_t pl_moved_send(int fd, const struct iovec *iov, int iovcnt, size_t done, int flags)
{
	struct iovec win[64];
	int n = 0;
	size_t off = done;

	for (int i = 0; i < iovcnt && n < 64; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		win[n].iov_base = (char *)iov[i].iov_base + off;
		win[n++].iov_len = iov[i].iov_len - off;
		off = 0;
	}
	struct msghdr m = { .msg_iov = win, .msg_iovlen = (size_t)n };
	ssize_t r = n ? pl_real.sendmsg(fd, &m, flags) : 0;

	if (r < 0)
		return done ? (ssize_t)done : -errno;
	return (ssize_t)done + r;
}

ssize_t pl_moved_recv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t r = pl_real.recvmsg(fd, &m, flags);

	return r < 0 ? -errno : r;
}
