// SPDX-License-Identifier: MIT
/* The socket options an NTB connection honours itself (O_NONBLOCK, SO_RCVTIMEO, SO_SNDTIMEO,
 * SO_LINGER 0), copied from the kernel socket into its object. */
#include "preload/pl_int.h"

static int tv_ms(const struct timeval *tv)
{
	int64_t ms = (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

void pl_sock_load_opts(struct pl_sock *s, int fd)
{
	struct timeval tv;
	struct linger lg;
	socklen_t l;
	int saved = errno;

	int fl = pl_real.fcntl(fd, F_GETFL);
	atomic_store_explicit(&s->nonblock, fl >= 0 && (fl & O_NONBLOCK), memory_order_relaxed);
	l = sizeof(tv);
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) == 0)
		atomic_store_explicit(&s->rcvtimeo_ms, tv_ms(&tv), memory_order_relaxed);
	l = sizeof(tv);
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) == 0)
		atomic_store_explicit(&s->sndtimeo_ms, tv_ms(&tv), memory_order_relaxed);
	l = sizeof(lg);
	/* (the program's value, not the {1, 0} the transport may hold there: transport.h) */
	bool got = false;

	if (s->kind == PL_CONN && s->conn) {
		PL_ENTER();
		got = tp_conn_linger_get(s->conn, fd, &lg) == 0;
		PL_LEAVE();
	}
	if (got || pl_real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l) == 0)
		atomic_store_explicit(&s->linger_abort, lg.l_onoff && lg.l_linger == 0,
				      memory_order_relaxed);
	errno = saved;
}

/* S's options for FD: as socket() left them when its PL_CAND_* flags CF say so (no system
 * call), else from the kernel. */
void pl_sock_opts_init(struct pl_sock *s, int fd, unsigned cf)
{
	if (!(cf & PL_CAND_DEFOPTS)) {
		pl_sock_load_opts(s, fd);
		return;
	}
	atomic_store_explicit(&s->nonblock, !!(cf & PL_CAND_NONBLOCK), memory_order_relaxed);
	atomic_store_explicit(&s->rcvtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->sndtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->linger_abort, false, memory_order_relaxed);
}
