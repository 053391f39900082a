/* SPDX-License-Identifier: MIT */
/* The witnesses watched for a peer's failover header: one epoll set per process over the kernel
 * sockets beside the connections, waited on by the helper (tp_failover.c moves the connection
 * whose socket spoke). */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

/* The set is made (and its entries changed) under g_wep_lock by the threads that set
 * witnesses; the helper only waits on it (tp_fo_watched_events(), without the lock): g_wep is
 * written once per process (and once more in a forked child, before it has threads). */
static _Atomic int g_wep = -1;   /* epoll set of the witnesses, EPOLLET (one per process) */
static pthread_mutex_t g_wep_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t g_fo_ids;

uint64_t tp_fo_new_id(void)
{
	return atomic_fetch_add_explicit(&g_fo_ids, 1, memory_order_relaxed) + 1;
}

/* Under g_wep_lock: the set, made if there is none yet. */
static int wep_make(void)
{
	int wep = atomic_load_explicit(&g_wep, memory_order_relaxed); /* (ours: under the lock) */

	if (wep < 0) {
		wep = fd_park((int)syscall(SYS_epoll_create1, EPOLL_CLOEXEC));
		/* release: pairs with the acquire load in tp_fo_watched_events() */
		atomic_store_explicit(&g_wep, wep, memory_order_release);
	}
	return wep;
}

void tp_fo_watch_make(void)
{
	/* relaxed: a hint; made (or not) under the lock */
	if (atomic_load_explicit(&g_wep, memory_order_relaxed) >= 0)
		return;
	pthread_mutex_lock(&g_wep_lock);
	wep_make();
	pthread_mutex_unlock(&g_wep_lock);
}

void tp_fo_watch(struct tp_conn *c, int fd)
{
	/* relaxed: under witness_lock (tp_conn_set_witness()) or in a fork's child alone */
	int old = atomic_load_explicit(&c->witness_fd1, memory_order_relaxed) - 1;

	pthread_mutex_lock(&g_wep_lock);
	int wep = fd >= 0 ? wep_make() : atomic_load_explicit(&g_wep, memory_order_relaxed);

	/* (only what is in the set: a witness whose watch was never added costs no call) */
	if (wep >= 0 && old >= 0 && c->fo_watched)
		syscall(SYS_epoll_ctl, wep, EPOLL_CTL_DEL, old, NULL);
	c->fo_watched = false;
	if (wep >= 0 && fd >= 0) {
		/* (fo_id: set by tp_conn_new() before the connection was registered, constant) */
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET,
					  .data.u64 = c->fo_id };

		c->fo_watched = syscall(SYS_epoll_ctl, wep, EPOLL_CTL_ADD, fd, &ev) == 0;
	}
	pthread_mutex_unlock(&g_wep_lock);
}

void tp_fo_atfork_child(void)
{
	/* the set is shared with the parent: ours is made anew as witnesses are set */
	int wep = atomic_exchange_explicit(&g_wep, -1, memory_order_relaxed);

	fd_close_own(wep);
	pthread_mutex_init(&g_wep_lock, NULL);
}

int tp_fo_watched_events(uint64_t *ids, int max)
{
	struct epoll_event ev[64];
	/* acquire: pairs with the release store in tp_fo_watch() */
	int wep = atomic_load_explicit(&g_wep, memory_order_acquire);
	int n;

	if (wep < 0)
		return 0;
	if (max > 64)
		max = 64;
	n = (int)syscall(SYS_epoll_pwait, wep, ev, max, 0, NULL, (size_t)8);
	for (int i = 0; i < n; i++)
		ids[i] = ev[i].data.u64;
	return n < 0 ? 0 : n;
}

/* Data (not only an end) on C's socket: the peer's failover header. */
bool tp_fo_peer_spoke(struct tp_conn *c)
{
	/* acquire: pairs with the release store in tp_conn_set_witness() */
	int fd1 = atomic_load_explicit(&c->witness_fd1, memory_order_acquire);
	char b;

	if (!fd1)
		return false;
	return raw_recv(fd1 - 1, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}
