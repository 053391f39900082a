/* SPDX-License-Identifier: MIT */
/* Kernel sockets whose close waits for the peer's FIN: kept open through a private duplicate and
 * closed by the helper thread once the FIN (or anything else) arrived or the time is up, so that
 * the closing thread does not wait and TIME_WAIT still stays with the side that closed first.
 *
 * WHO WRITES / WHO READS
 *   fw_list[0 .. fw_n)   appended under fw_lock by closers; entries removed only by
 *                        tp_finwait_service() (the helper's, or at exit), under fw_lock and
 *                        fw_service_lock; it polls a snapshot of the first n entries outside
 *                        fw_lock: appends never move them, and no other service runs
 *   fw_pending           mirrors fw_n (relaxed) for a lock-free "none" test by the helper */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

#define FW_MAX   4096 /* pending closes at most; more wait in the caller, as before */
#define FW_BATCH 256  /* sockets looked at per poll() */

struct fw_entry {
	int fd;
	uint64_t deadline_ms;
};

static pthread_mutex_t fw_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fw_service_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fw_entry *fw_list;
static int fw_n, fw_alloc;
static _Atomic int fw_pending;

/* The most sockets kept at once: a quarter of the descriptor limit (each takes a descriptor
 * the program may want), at most FW_MAX. */
static int fw_cap(void)
{
	static int cap; /* (under fw_lock) */

	if (!cap) {
		struct rlimit rl;
		long n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ?
			 (long)(rl.rlim_cur / 4) : FW_MAX;
		cap = n < 1 ? 1 : n > FW_MAX ? FW_MAX : (int)n;
	}
	return cap;
}

int tp_close_after_fin(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	/* The peer's FIN follows its NTB close by microseconds and is usually here already: then
	 * nothing is to be kept (one look instead of a duplicate, the helper's poll and close) */
	if (raw_poll(&p, 1, 0) == 1)
		return 0;
	if (!tp_helper_running())
		return -EAGAIN; /* nobody would close it */
	return tp_finwait_add(fd, timeout_ms);
}

int tp_finwait_add(int fd, int timeout_ms)
{
	int kfd, rc = 0;

	pthread_mutex_lock(&fw_lock);
	if (fw_n >= fw_cap()) {
		rc = -ENOSPC;
		goto out;
	}
	if (fw_n == fw_alloc) {
		int n = fw_alloc ? fw_alloc * 2 : 64;
		struct fw_entry *p = n <= FW_MAX ? realloc(fw_list, (size_t)n * sizeof(*p)) : NULL;
		if (!p) {
			rc = -ENOSPC;
			goto out;
		}
		fw_list = p;
		fw_alloc = n;
	}
	/* (the lowest free number from 3, as the other private duplicates: tp_close()) */
	kfd = fd_dup_high(fd);
	if (kfd < 0) {
		rc = -errno;
		goto out;
	}
	fw_list[fw_n].fd = kfd;
	fw_list[fw_n].deadline_ms = tp_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	fw_n++;
	atomic_store_explicit(&fw_pending, fw_n, memory_order_relaxed);
out:
	pthread_mutex_unlock(&fw_lock);
	return rc;
}

bool tp_finwait_pending(void)
{
	return atomic_load_explicit(&fw_pending, memory_order_relaxed) > 0;
}

/* The first FW_BATCH kept sockets as poll entries (for their FIN or reset), and into *FIRST
 * (when given) the earliest of their deadlines; returns how many. */
static int fw_snapshot(struct pollfd *p, uint64_t *first)
{
	int n;

	pthread_mutex_lock(&fw_lock);
	n = fw_n < FW_BATCH ? fw_n : FW_BATCH;
	for (int i = 0; i < n; i++) {
		p[i].fd = fw_list[i].fd;
		p[i].events = POLLIN | POLLRDHUP;
		p[i].revents = 0;
		if (first && fw_list[i].deadline_ms < *first)
			*first = fw_list[i].deadline_ms;
	}
	pthread_mutex_unlock(&fw_lock);
	return n;
}

void tp_finwait_service(void)
{
	struct pollfd p[FW_BATCH];
	int n;

	if (!tp_finwait_pending())
		return;
	/* one service at a time (the helper's, or tp_finwait_drain()'s at exit): the entries
	 * polled must stay where they are until they are looked at */
	pthread_mutex_lock(&fw_service_lock);
	n = fw_snapshot(p, NULL);
	if (raw_poll(p, (nfds_t)n, 0) < 0) {
		pthread_mutex_unlock(&fw_service_lock);
		return;
	}
	uint64_t now = tp_now_ms();
	int done[FW_BATCH], nd = 0;

	pthread_mutex_lock(&fw_lock);
	/* back to front: removing entry i moves the last one into it, which was looked at (or is
	 * beyond the snapshot) */
	for (int i = n - 1; i >= 0; i--) {
		if (!p[i].revents && now < fw_list[i].deadline_ms)
			continue;
		done[nd++] = fw_list[i].fd;
		fw_list[i] = fw_list[--fw_n]; /* (one looked at already, or a newer one) */
	}
	atomic_store_explicit(&fw_pending, fw_n, memory_order_relaxed);
	pthread_mutex_unlock(&fw_lock);
	/* Closed outside fw_lock: a close sends our FIN (over the loopback the peer's receive of it
	 * runs in this call, ~10 us on a VM), and a dozen under the lock held the program's next
	 * close() (tp_finwait_add()) for a few hundred microseconds every couple of milliseconds
	 * of a connection-rate load. (No yield between them, unlike a pass's closes: measured,
	 * the switches cost the program more than they saved it here.) */
	for (int i = 0; i < nd; i++)
		raw_close(done[i]);
	pthread_mutex_unlock(&fw_service_lock);
}

void tp_finwait_drain(void)
{
	struct pollfd p[FW_BATCH];

	while (tp_finwait_pending()) {
		uint64_t now = tp_now_ms(), first = UINT64_MAX;
		int n;

		n = fw_snapshot(p, &first);
		if (n == 0)
			continue; /* (the helper closed them meanwhile) */
		/* until the first deadline among them (each is at most its timeout away), looking
		 * again every 10 ms: the helper may close some of them meanwhile */
		uint64_t wait = first > now ? first - now : 0;
		if (raw_poll(p, (nfds_t)n, (int)(wait < 10 ? wait : 10)) < 0 &&
		    errno != EINTR)
			return;
		tp_finwait_service();
	}
}

void tp_finwait_fork_lock(bool lock)
{
	if (lock)
		pthread_mutex_lock(&fw_service_lock);
	else
		pthread_mutex_unlock(&fw_service_lock);
}

void tp_finwait_atfork_child(void)
{
	/* The parent closes its sockets; the child's copies of the duplicates would keep them
	 * open (no FIN) for as long as the child lives. */
	pthread_mutex_init(&fw_lock, NULL);
	pthread_mutex_init(&fw_service_lock, NULL);
	for (int i = 0; i < fw_n; i++)
		raw_close(fw_list[i].fd);
	fw_n = 0;
	atomic_store_explicit(&fw_pending, 0, memory_order_relaxed);
}
