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
#include <sys/stat.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/log.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int *ids;                     /* by fd: slot id + 1; 0 none */
static _Atomic int refs[TP_TCPSTAT_MAX];     /* this process's fds naming each slot */
static char path[256];                       /* "" = TP_TCPSTAT_PATH */

static void init(void)
{
	/* secure_getenv: a set-uid program must not write where its caller says. */
	const char *p = secure_getenv("NTBSOCK_STAT_TCP");

	if (p && strlen(p) < sizeof(path))
		strcpy(path, p);
	if (pl_nfds > 0)
		ids = calloc((size_t)pl_nfds, sizeof(*ids));
}

void pl_tcpstat_add(int fd, const struct sockaddr *remote, const char *reason)
{
	struct sockaddr_storage l, r;
	socklen_t ll = sizeof(l), rl = sizeof(r);
	struct stat st;
	int saved = errno, id;

	pthread_once(&once, init);
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
	int old = atomic_exchange_explicit(&ids[fd], id + 1, memory_order_relaxed);
	if (old > 0 && atomic_fetch_sub_explicit(&refs[old - 1], 1, memory_order_relaxed) == 1)
		tp_tcpstat_del(old - 1, (int)getpid());
out:
	errno = saved;
}

void pl_tcpstat_closed(int fd)
{
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
	int x;

	pl_tcpstat_closed(newfd); /* dup2/dup3 closed whatever NEWFD was */
	if (!ids || oldfd < 0 || oldfd >= pl_nfds || newfd < 0 || newfd >= pl_nfds)
		return;
	x = atomic_load_explicit(&ids[oldfd], memory_order_relaxed);
	if (x > 0) {
		atomic_fetch_add_explicit(&refs[x - 1], 1, memory_order_relaxed);
		atomic_store_explicit(&ids[newfd], x, memory_order_relaxed);
	}
}
