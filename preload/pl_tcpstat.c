// SPDX-License-Identifier: MIT
/* Registers this process's connections that stayed TCP in the host-wide table
 * (transport/tp_tcpstat.c) so `ntbsock stat` lists them with their reason; only at
 * connect/accept/dup/close, never on the data path, and silently nothing on any problem. */
#include "preload/pl_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/log.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int *_Atomic ids_map;        /* by fd: slot id + 1; 0 none (set once) */
static _Atomic int *refs;                    /* by slot id: this process's fds naming it (set
					      * before ids_map, read after it) */
static char path[256];                       /* "" = TP_TCPSTAT_PATH */
static _Atomic int fd_hi;                    /* above every fd ever given an id */

static void init(void)
{
	/* secure_getenv: a set-uid program must not write where its caller says. */
	const char *p = secure_getenv("NTBSOCK_STAT_TCP");

	if (p && strlen(p) < sizeof(path))
		strcpy(path, p);
	if (pl_nfds > 0) {
		/* Zero pages, untouched until used (pl_zero_pages(): calloc() cleared them from
		 * the heap, 1.25 MiB at the first tcp connection of every process) */
		_Atomic int *m = pl_zero_pages((size_t)pl_nfds * sizeof(*m));

		refs = m ? pl_zero_pages(TP_TCPSTAT_MAX * sizeof(*refs)) : NULL;
		if (!refs) {
			if (m)
				munmap(m, (size_t)pl_nfds * sizeof(*m));
			return;
		}
		/* Release pairs with the acquire load in map(): both zeroed arrays are seen
		 * whole. */
		atomic_store_explicit(&ids_map, m, memory_order_release);
	}
}

static void raise_hi(int fd)
{
	int hi = atomic_load_explicit(&fd_hi, memory_order_relaxed);

	while (hi <= fd && !atomic_compare_exchange_weak_explicit(&fd_hi, &hi, fd + 1,
			memory_order_relaxed, memory_order_relaxed))
		;
}

static _Atomic int *map(void)
{
	/* acquire: pairs with the release store of ids_map where it is created (its zeroed
	 * slots before the pointer) */
	return atomic_load_explicit(&ids_map, memory_order_acquire);
}

void pl_tcpstat_add(int fd, const struct sockaddr *remote, const char *reason)
{
	struct sockaddr_storage l, r;
	socklen_t ll = sizeof(l), rl = sizeof(r);
	struct stat st;
	int saved = errno, id;
	_Atomic int *ids;

	pthread_once(&once, init);
	ids = map();
	if (!ids || fd < 0 || fd >= pl_nfds || strcmp(path, "off") == 0)
		goto out;
	memset(&l, 0, sizeof(l));
	memset(&r, 0, sizeof(r));
	if (pl_real.getsockname(fd, (struct sockaddr *)&l, &ll) < 0)
		memset(&l, 0, sizeof(l));
	if (pl_real.getpeername(fd, (struct sockaddr *)&r, &rl) < 0) {
		memset(&r, 0, sizeof(r));
		if (remote && (remote->sa_family == AF_INET || remote->sa_family == AF_INET6))
			memcpy(&r, remote, remote->sa_family == AF_INET ?
			       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	}
	id = tp_tcpstat_add(path[0] ? path : NULL, (int)getpid(), fd,
			    fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0,
			    (struct sockaddr *)&l, (struct sockaddr *)&r, reason);
	if (id < 0) {
		LOG(LL_DEBUG, "fd %d: not listed for `ntbsock stat` (%s)", fd, strerror(-id));
		goto out;
	}
	atomic_store_explicit(&refs[id], 1, memory_order_relaxed);
	raise_hi(fd);
	int old = atomic_exchange_explicit(&ids[fd], id + 1, memory_order_relaxed);
	if (old > 0 && atomic_fetch_sub_explicit(&refs[old - 1], 1, memory_order_relaxed) == 1)
		tp_tcpstat_del(old - 1, (int)getpid());
out:
	errno = saved;
}

void pl_tcpstat_open(void)
{
	int saved = errno;

	pthread_once(&once, init);
	PL_ENTER();
	int r = map() && strcmp(path, "off") != 0 ? tp_tcpstat_open(path[0] ? path : NULL) : 0;
	PL_LEAVE();
	if (r < 0)
		LOG(LL_DEBUG, "the table of tcp connections for `ntbsock stat` cannot be opened");
	errno = saved;
}

void pl_tcpstat_closed(int fd)
{
	_Atomic int *ids = map();
	int x;

	if (!ids || fd < 0 || fd >= pl_nfds ||
	    !atomic_load_explicit(&ids[fd], memory_order_relaxed))
		return;
	x = atomic_exchange_explicit(&ids[fd], 0, memory_order_relaxed);
	if (x > 0 && atomic_fetch_sub_explicit(&refs[x - 1], 1, memory_order_relaxed) == 1) {
		int saved = errno;
		tp_tcpstat_del(x - 1, (int)getpid());
		errno = saved;
	}
}

void pl_tcpstat_dup(int oldfd, int newfd)
{
	_Atomic int *ids = map();
	int x;

	pl_tcpstat_closed(newfd); /* dup2/dup3 closed whatever NEWFD was */
	if (!ids || oldfd < 0 || oldfd >= pl_nfds || newfd < 0 || newfd >= pl_nfds)
		return;
	x = atomic_load_explicit(&ids[oldfd], memory_order_relaxed);
	if (x > 0) {
		atomic_fetch_add_explicit(&refs[x - 1], 1, memory_order_relaxed);
		raise_hi(newfd);
		atomic_store_explicit(&ids[newfd], x, memory_order_relaxed);
	}
}

void pl_tcpstat_closed_range(unsigned first, unsigned last)
{
	unsigned hi = (unsigned)atomic_load_explicit(&fd_hi, memory_order_relaxed);

	for (unsigned fd = first; fd <= last && fd < hi; fd++)
		pl_tcpstat_closed((int)fd);
}
