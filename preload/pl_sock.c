// SPDX-License-Identifier: MIT
/* Socket control calls: creation, connect/accept/listen hooks, close and dup families, fcntl,
 * ioctl, socket options, fork. Each keeps the fd table in step with the kernel's fds. */
#include "preload/pl_int.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>

NTB_EXPORT int socket(int domain, int type, int protocol)
{
	/* (an AF_UNIX or netlink socket, a program's first look at its name service or log,
	 * does not initialise the library: only what could become an NTB socket does) */
	bool act = domain == AF_INET || domain == AF_INET6 ? pl_active() : pl_inited();
	int fd = pl_real.socket(domain, type, protocol);
	if (act && fd >= 0) {
		pl_fd_fresh(fd);
		bool tcp = (domain == AF_INET || domain == AF_INET6) &&
			   (type & 0xf) == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP);
		pl_cand_mark(fd, !tcp ? 0 : PL_CAND_TCP | PL_CAND_UNBOUND | PL_CAND_DEFOPTS |
				 (type & SOCK_NONBLOCK ? PL_CAND_NONBLOCK : 0) |
				 (domain == AF_INET6 ? PL_CAND_V6 : 0));
	}
	return fd;
}

NTB_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	const struct sockaddr *sa = addr.__sockaddr__;

	if (!sa || len < sizeof(sa_family_t) ||
	    (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) || !pl_active())
		return pl_real.connect(fd, addr, len);
	struct pl_sock *s = pl_sock_get(fd);
	if (s) {
		/* connect() again on a connection we track (non-blocking completion check; or, after
		 * a disconnect, a new handshake, whose ACK our option would delay) */
		pl_defer_clear(s, fd);
		int r = pl_real.connect(fd, addr, len);
		int e = errno;
		if (s->kind == PL_CONN && (r == 0 || e == EISCONN)) {
			int st = pl_check_pending(s, fd);
			if (st == PL_CS_FAILED && s->pending_err) {
				r = -1;
				e = s->pending_err;
			}
		}
		pl_sock_put(s);
		errno = e;
		return r;
	}
	int r = pl_connect(fd, sa, len);
	if (pl_cand_is(fd)) {
		int e = errno;
		pl_cand_clear(fd); /* decided: its registrations stay where they now are */
		errno = e;
	}
	return r;
}

static int do_accept(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags, bool four)
{
	struct pl_sock *s = pl_lookup(fd);
	bool listener = s && s->kind == PL_LISTENER;
	/* The client's address, which the set-up needs, comes with the accept: into our own
	 * buffer when the caller passed none, else read from the caller's once the kernel has
	 * written it whole (no getpeername() then). */
	struct sockaddr_storage own;
	/* (LEN read only with an address, as the kernel does: a bad LEN without one is no fault) */
	socklen_t own_len = sizeof(own), given = listener && addr.__sockaddr__ && len ? *len : 0;
	bool use_own = listener && !addr.__sockaddr__;
	struct sockaddr *a = use_own ? (struct sockaddr *)&own : addr.__sockaddr__;
	socklen_t *l = use_own ? &own_len : len;
	int nfd = four ? pl_real.accept4(fd, a, l, flags) : pl_real.accept(fd, a, l);

	if (nfd >= 0 && pl_fds) {
		pl_fd_fresh(nfd);
		pl_cand_mark(nfd, 0); /* (not made by socket(): connect() asks the kernel) */
		if (listener) {
			int saved = errno;
			const struct sockaddr *peer = NULL;
			socklen_t peer_len = 0;

			if (use_own) {
				peer = a;
				peer_len = own_len;
			} else if (a && len && *len <= given) {
				peer = a;
				peer_len = *len;
			}
			pl_accepted(fd, nfd, s, flags, peer, peer_len);
			errno = saved;
		}
	}
	pl_sock_put(s);
	return nfd;
}

NTB_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return do_accept(fd, addr, len, 0, false);
}

NTB_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	return do_accept(fd, addr, len, flags, true);
}

NTB_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	pl_cand_drop(fd, PL_CAND_UNBOUND);
	return pl_real.bind(fd, addr, len);
}

/* The port is advertised BEFORE the kernel listens (when bind() chose it): a client that finds
 * the kernel listener then also finds the advertisement, instead of falling back to TCP for
 * "no listener" in the moment between the two. A port that listen() itself picks is advertised
 * after. A failed listen withdraws the early advertisement. */
NTB_EXPORT int listen(int fd, int backlog)
{
	bool act = pl_active(), early = false;
	int saved = errno;

	if (act) {
		struct pl_sock *d = pl_lookup(fd);

		if (d) /* (a disconnected connection: a listener would defer its accepts) */
			pl_defer_clear(d, fd);
		pl_sock_put(d);
		early = pl_listened(fd);
	}
	errno = saved;
	int r = pl_real.listen(fd, backlog);
	if (act) {
		saved = errno;
		if (r == 0) {
			pl_cand_clear(fd);
			if (!early)
				pl_listened(fd);
		} else if (early) {
			pl_sock_put(pl_fd_take(fd));
		}
		errno = saved;
	}
	return r;
}

/* S's descriptors LO..HI go away (close, close_range, or dup2 onto one), their table entries
 * already taken. If that is not S's last reference (a dup of the socket lives on, or a call is
 * in flight), the connection's witness must not stay on them, or a silent peer's death would
 * go unseen until peer_timeout_ms: it moves to another descriptor of S outside LO..HI.
 * (tp_conn_set_witness() checks that the descriptor is a socket and keeps its inode, so a
 * stale find is harmless.) */
static void witness_move_outside(struct pl_sock *s, unsigned lo, unsigned hi)
{
	/* (acquire: pairs with pl_set_state(); an open connection's conn is final) */
	if (s->kind == PL_CONN &&
	    atomic_load_explicit(&s->state, memory_order_acquire) == PL_CS_OPEN &&
	    atomic_load_explicit(&s->refs, memory_order_relaxed) > 1 && s->conn) {
		int other = pl_fd_find_outside(s, lo, hi);

		if (other >= 0)
			tp_conn_set_witness(s->conn, other);
	}
}

static void witness_move(struct pl_sock *s, int fd)
{
	witness_move_outside(s, (unsigned)fd, (unsigned)fd);
}

/* Whether closing S (taken out of the table, ours the only reference) ends a connection the
 * peer closed first. */
static bool peer_closed_first(struct pl_sock *s)
{
	/* (acquire: pairs with pl_set_state(); an open connection's conn is final) */
	if (s->kind != PL_CONN ||
	    atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_OPEN || !s->conn ||
	    atomic_load_explicit(&s->refs, memory_order_relaxed) != 1 || pl_depth != 0 ||
	    atomic_load_explicit(&s->linger_abort, memory_order_relaxed))
		return false; /* (SO_LINGER 0: our close resets, no TIME_WAIT either way) */
	PL_ENTER();
	bool closing = tp_peer_closing(s->conn);
	PL_LEAVE();
	return closing;
}

/*
 * The peer closed first: its NTB close is in our window, and its TCP socket's FIN follows it
 * by microseconds (pl_sock.c's close() on its side: NTB first, then the kernel). Our TCP socket
 * closes only after that FIN, bounded (the helper thread does it: tp_close_after_fin(); here
 * when it cannot), so that it ends as the passive side, as it
 * would without the library: TIME_WAIT stays with the side that closed first. Closing at once
 * could send our FIN first, and a TIME_WAIT on a server's port makes a server restarted there
 * without SO_REUSEADDR fail to bind (sockperf's did, 1 run in ~8 of test_pl_sockperf).
 * Not done by close_range(), dup2() onto the descriptor, exec or exit: those close at once.
 */
static void await_peer_fin(int fd, bool nocancel)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	int64_t end = pl_now_ns() + (int64_t)PL_PEER_FIN_WAIT_MS * 1000000;

	for (;;) {
		int ms = pl_ms_left(end);
		int r = nocancel ? raw_poll(&p, 1, ms) : pl_real.poll(&p, 1, ms);

		if (r < 0 && errno == EINTR)
			continue;
		/* the FIN (no data ever comes on the TCP socket of an NTB connection: readable is
		 * the end), an error, or the time is up */
		return;
	}
}

/* close(), or with NOCANCEL the close of syscall(SYS_close) (preload/pl_uring.c): the same
 * bookkeeping, then the kernel's close without the C library's (a cancellation point, which a
 * caller of the system call, libuv's uv__close_nocancel(), avoids on purpose). */
static int close_fd(int fd, bool nocancel)
{
	/* One of the library's own (util/fdpark.h): not the program's to close, which it cannot
	 * know it has (a daemon's loop over every number): as for a number not open. */
	if (unlikely(fd_parked(fd))) {
		errno = EBADF;
		return -1;
	}
	/* Out of the table first: a concurrent socket() reusing FD must not find us. */
	struct pl_sock *s = pl_fds ? pl_fd_take(fd) : NULL;
	pl_tcpstat_closed(fd);
	/* Our reference goes before the kernel socket: when it is the last, the connection's
	 * close (FIN after the data, and the ST word saying "closed") is in the peer's window
	 * before our TCP socket ends. A peer that is silent just then looks at that socket as
	 * its witness (tp_conn_set_witness()): it must find the close, not take the end of the
	 * socket for our death. */
	if (s) {
		int saved = errno;
		bool passive = peer_closed_first(s);

		witness_move(s, fd);
		pl_sock_put(s);
		if (passive) {
			/* the helper thread closes the socket after the FIN; else wait here */
			PL_ENTER();
			int kept = tp_close_after_fin(fd, PL_PEER_FIN_WAIT_MS);
			PL_LEAVE();
			if (kept < 0)
				await_peer_fin(fd, nocancel);
		}
		errno = saved;
	}
	int r = nocancel ? raw_close(fd) : pl_real.close(fd);
	if (pl_fds) {
		int saved = errno;
		pl_cand_closed(fd);
		errno = saved;
	}
	return r;
}

NTB_EXPORT int close(int fd)
{
	return close_fd(fd, false);
}

int pl_close_nocancel(int fd)
{
	return close_fd(fd, true);
}

NTB_EXPORT int shutdown(int fd, int how)
{
	struct pl_sock *s = pl_lookup(fd);
	if (s) {
		long r = 1;
		if (s->kind == PL_CONN && pl_is_ntb(s, fd)) {
			if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
				r = -EINVAL;
			} else {
				PL_ENTER();
				r = tp_shutdown(s->conn, how);
				PL_LEAVE();
			}
		}
		pl_sock_put(s);
		if (r <= 0)
			return (int)pl_ret(r);
	}
	return pl_real.shutdown(fd, how);
}

/* After a successful dup into NEWFD: NEWFD refers to what OLDFD does. */
static void dup_track(int oldfd, int newfd)
{
	if (!pl_fds || newfd < 0 || newfd == oldfd)
		return;
	int saved = errno;
	pl_cand_closed(newfd); /* whatever it was is closed; NEWFD is no candidate */
	pl_cand_drop(oldfd, PL_CAND_UNBOUND | PL_CAND_DEFOPTS); /* changeable through NEWFD */
	struct pl_sock *prev = pl_fd_take(newfd); /* dup2/dup3 closed whatever NEWFD was */
	if (prev)
		witness_move(prev, newfd);
	pl_sock_put(prev);
	pl_tcpstat_dup(oldfd, newfd);
	struct pl_sock *s = pl_sock_get(oldfd);
	if (s) {
		pl_fd_install(newfd, s);
		pl_sock_put(s);
	}
	errno = saved;
}

NTB_EXPORT int dup(int fd)
{
	int r = pl_real.dup(fd);
	dup_track(fd, r);
	return r;
}

NTB_EXPORT int dup2(int fd, int fd2)
{
	int r = pl_real.dup2(fd, fd2);
	dup_track(fd, r);
	return r;
}

NTB_EXPORT int dup3(int fd, int fd2, int flags)
{
	int r = pl_real.dup3(fd, fd2, flags);
	dup_track(fd, r);
	return r;
}

static int do_fcntl(int (*real)(int, int, ...), int fd, int cmd, unsigned long arg)
{
	int r = real(fd, cmd, arg);
	if (r < 0 || !pl_fds)
		return r;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
		dup_track(fd, r);
	} else if (cmd == F_SETFL) {
		pl_cand_drop(fd, PL_CAND_DEFOPTS);
		struct pl_sock *s = pl_lookup(fd);
		if (s) {
			atomic_store_explicit(&s->nonblock, !!(arg & O_NONBLOCK), memory_order_relaxed);
			pl_sock_put(s);
		}
	}
	return r;
}

NTB_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long); /* every fcntl argument fits a register */
	va_end(ap);
	return do_fcntl(pl_real.fcntl, fd, cmd, arg);
}

NTB_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	return do_fcntl(pl_real.fcntl64, fd, cmd, arg);
}

NTB_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);

	if (req == FIONBIO)
		pl_cand_drop(fd, PL_CAND_DEFOPTS);
	struct pl_sock *s = pl_lookup(fd);
	if (s) {
		long r = 1;
		if (req == FIONBIO) {
			r = pl_real.ioctl(fd, req, arg);
			if (r == 0 && arg)
				atomic_store_explicit(&s->nonblock, *(int *)arg != 0, memory_order_relaxed);
			r = r < 0 ? -errno : 0;
		} else if ((req == FIONREAD || req == SIOCOUTQ) && pl_is_ntb(s, fd)) {
			size_t n;
			PL_ENTER();
			n = req == FIONREAD ? tp_readable_bytes(s->conn) : tp_unacked_bytes(s->conn);
			PL_LEAVE();
			if (!arg) {
				r = -EFAULT;
			} else {
				*(int *)arg = n > INT32_MAX ? INT32_MAX : (int)n;
				r = 0;
			}
		}
		pl_sock_put(s);
		if (r <= 0)
			return (int)pl_ret(r);
	}
	return pl_real.ioctl(fd, req, arg);
}

NTB_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (level == IPPROTO_TCP && name == TCP_DEFER_ACCEPT) {
		struct pl_sock *d = pl_lookup(fd);

		if (d)
			pl_defer_clear(d, fd); /* the program sees the kernel's value, 0 */
		pl_sock_put(d);
	}
	if (level == SOL_SOCKET && name == SO_LINGER && val && len &&
	    *len >= (socklen_t)sizeof(struct linger)) {
		/* while the connection's socket is armed to reset on our death (transport.h), the
		 * kernel holds {1, 0}: the program sees its own value */
		struct pl_sock *g = pl_lookup(fd);
		struct linger lg;
		bool mine = false;

		if (g && pl_is_ntb(g, fd)) {
			PL_ENTER();
			mine = tp_conn_linger_get(g->conn, fd, &lg) == 0;
			PL_LEAVE();
		}
		pl_sock_put(g);
		if (mine) {
			memcpy(val, &lg, sizeof(lg));
			*len = sizeof(lg);
			return 0;
		}
	}
	struct pl_sock *s = (level == SOL_SOCKET && name == SO_ERROR) ? pl_lookup(fd) : NULL;
	if (s && s->kind == PL_CONN) {
		long r = 1;
		int err = 0;
		int st = atomic_load_explicit(&s->state, memory_order_acquire); /* pl_set_state() */
		if (st == PL_CS_PENDING)
			st = pl_check_pending(s, fd);
		if (st == PL_CS_FAILED) {
			err = s->pending_err;
			s->pending_err = 0;
			if (err) {
				/* Reported once; afterwards the socket is plain kernel TCP. */
				struct pl_sock *t = pl_fd_take(fd);
				if (t == s)
					pl_sock_put(t);
				else if (t)
					pl_fd_install(fd, t), pl_sock_put(t);
			}
			r = 0;
		} else if (st == PL_CS_OPEN) {
			PL_ENTER();
			err = -(int)pl_err_take(s, tp_conn_error(s->conn), 0);
			PL_LEAVE();
			r = 0;
		} else {
			r = 0; /* in progress: no error yet */
		}
		pl_sock_put(s);
		if (r == 0) {
			if (!val || !len || *len < sizeof(int))
				return (int)pl_ret(-EINVAL);
			*(int *)val = err;
			*len = sizeof(int);
			return 0;
		}
	} else {
		pl_sock_put(s);
	}
	return pl_real.getsockopt(fd, level, name, val, len);
}

/* The program sized FD's send buffer: an NTB connection keeps no more unconsumed bytes in flight
 * than the kernel's buffer would hold (its value as the kernel set it: doubled, clamped), so
 * a writer to a reader that stopped is held back as over TCP. */
static void pl_sock_sndbuf(int fd)
{
	struct pl_sock *s = pl_lookup(fd);
	int saved = errno, v = 0;
	socklen_t l = sizeof(v);

	if (!s)
		return;
	if (s->kind == PL_CONN && pl_real.getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &l) == 0 &&
	    v > 0) {
		pthread_mutex_lock(&s->lock);
		if (s->conn) {
			PL_ENTER();
			tp_conn_set_sndbuf(s->conn, (uint32_t)v);
			PL_LEAVE();
			LOG(LL_DEBUG, "fd %d %s: at most %d bytes in flight (SO_SNDBUF)", fd, s->desc, v);
		}
		pthread_mutex_unlock(&s->lock);
	}
	pl_sock_put(s);
	errno = saved;
}

NTB_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (level == SOL_SOCKET || (level == IPPROTO_TCP && name == TCP_DEFER_ACCEPT))
		pl_cand_drop(fd, PL_CAND_DEFOPTS); /* (any SOL_SOCKET option: a few matter) */
	if (level == IPPROTO_TCP && name == TCP_DEFER_ACCEPT) {
		struct pl_sock *d = pl_lookup(fd);

		if (d) /* the program's value replaces ours (an error leaves it cleared, at 0) */
			pl_defer_clear(d, fd);
		pl_sock_put(d);
	}
	int r;
	struct pl_sock *g = level == SOL_SOCKET && name == SO_LINGER && val &&
			    len >= (socklen_t)sizeof(struct linger) ? pl_lookup(fd) : NULL;

	if (g && pl_is_ntb(g, fd)) {
		/* (the transport sets it: it may hold {1, 0} there meanwhile, transport.h) */
		PL_ENTER();
		r = (int)pl_ret(tp_conn_linger_set(g->conn, fd, val));
		PL_LEAVE();
	} else {
		r = pl_real.setsockopt(fd, level, name, val, len);
	}
	pl_sock_put(g);
	if (r == 0 && level == SOL_SOCKET &&
	    (name == SO_RCVTIMEO || name == SO_SNDTIMEO || name == SO_LINGER
#ifdef SO_RCVTIMEO_NEW
	     || name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW
#endif
	     )) {
		struct pl_sock *s = pl_lookup(fd);
		if (s) {
			pl_sock_load_opts(s, fd);
			if (s->kind == PL_LISTENER) /* (relaxed: see accept_opts()) */
				atomic_store_explicit(&s->opts_set_late, true,
						      memory_order_relaxed);
			pl_sock_put(s);
		}
	}
	if (r == 0 && level == SOL_SOCKET && name == SO_SNDBUF)
		pl_sock_sndbuf(fd);
	return r;
}

NTB_EXPORT int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return pl_real.getsockname(fd, addr, len);
}

NTB_EXPORT int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return pl_real.getpeername(fd, addr, len);
}

/* Whether the kernel has close_range() (Linux >= 5.9): an empty range at the top of the
 * descriptor space closes nothing where it exists. Cached; the probe is a system call. */
static bool close_range_works(void)
{
	static _Atomic int known; /* 0 unknown, 1 yes, 2 no (benign race: same answer) */
	int k = atomic_load_explicit(&known, memory_order_relaxed);

	if (!k) {
		int saved = errno;

		k = pl_real.close_range(~0u, ~0u, 0) == 0 ? 1 : 2;
		errno = saved;
		atomic_store_explicit(&known, k, memory_order_relaxed);
	}
	return k == 1;
}

/* As close() for each descriptor of the range: out of the table, the witness of a connection
 * still open through a descriptor outside the range moved there, our reference dropped, then
 * the kernel's close (so a last close's FIN is in the peer's window before its TCP socket
 * ends). Only where the call cannot fail after that: flags 0, first <= last, and a kernel that
 * has it; otherwise (CLOSE_RANGE_UNSHARE may fail for memory, an old kernel says ENOSYS and
 * the program then closes one by one) the kernel's close comes first, as it was. Nothing is
 * allocated here (this runs in children between fork and exec); a last reference's close may
 * free memory, as after fork it may. */
NTB_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	/* The library's own descriptors in the range stay open (util/fdpark.h): the range is
	 * closed around them (close-on-exec, which they have, may go over them) */
	int own = first <= last && !(flags & CLOSE_RANGE_CLOEXEC) ? fd_parked_first(first, last)
								    : -1;

	if (unlikely(own >= 0)) {
		int r = 0;

		if ((unsigned)own > first)
			r = close_range(first, (unsigned)own - 1u, flags);
		if (r == 0 && (unsigned)own < last)
			r = close_range((unsigned)own + 1u, last, flags & ~CLOSE_RANGE_UNSHARE);
		return r;
	}
	bool early = pl_fds && flags == 0 && first <= last &&
		     atomic_load_explicit(&pl_nsocks, memory_order_relaxed) > 0 && close_range_works();

	if (early) {
		int saved = errno;
		unsigned hi = (unsigned)atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);

		for (unsigned fd = first; fd <= last && fd < hi; fd++) {
			struct pl_sock *s = pl_fd_take((int)fd);

			if (s) {
				/* (the range's later entries are still in the table: skipped) */
				witness_move_outside(s, first, last);
				pl_sock_put(s);
			}
		}
		pl_tcpstat_closed_range(first, last);
		pl_cand_closed_range(first, last);
		errno = saved;
	}
	int r = pl_real.close_range(first, last, flags);
	if (!early && r == 0 && pl_fds && !(flags & CLOSE_RANGE_CLOEXEC)) {
		int saved = errno;
		unsigned hi = (unsigned)atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);
		for (unsigned fd = first; fd <= last && fd < hi; fd++)
			pl_sock_put(pl_fd_take((int)fd));
		pl_tcpstat_closed_range(first, last);
		pl_cand_closed_range(first, last);
		errno = saved;
	}
	return r;
}

/* The child's handlers run from pthread_atfork (the transport makes the child a co-owner of
 * every connection there). The parent must not go on before they ran: a parent that accepts,
 * forks and at once closes its copy would otherwise be the last owner and end the connection
 * under the child. So the child reports through a pipe once fork() returned in it. */
NTB_EXPORT pid_t fork(void)
{
	int pfd[2];

	/* (no socket of ours: nothing to hand the child; not initialised, nothing to start) */
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0 || !pl_active())
		return pl_real.fork();
	/* Here, not in a pthread_atfork() handler: the transport's holds every connection's locks
	 * across the fork, and a thread holding a socket's lock may wait for one of them. */
	pl_defer_clear_all();
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return pl_real.fork();
	pid_t pid = pl_real.fork();
	int saved = errno;
	if (pid == 0) {
		char c = 1;
		while (pl_real.write(pfd[1], &c, 1) < 0 && errno == EINTR)
			;
	} else if (pid > 0) {
		pl_real.close(pfd[1]);
		pfd[1] = -1;
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		/* Readable when the child wrote, or EOF if it died first; 5 s is a safety bound. */
		while (pl_real.poll(&p, 1, 5000) < 0 && errno == EINTR)
			;
	}
	pl_real.close(pfd[0]);
	if (pfd[1] >= 0)
		pl_real.close(pfd[1]);
	errno = saved;
	return pid;
}

/* vfork's child would run our code on the parent's stack: give it fork semantics. */
NTB_EXPORT pid_t vfork(void)
{
	return fork();
}
