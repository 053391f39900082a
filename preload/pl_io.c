// SPDX-License-Identifier: MIT
/* Data calls: read/write/send/recv and their vector, message, multi-message, sendfile, splice
 * and _FORTIFY_SOURCE variants. NTB connections go to the transport with kernel socket
 * semantics (blocking, timeouts, flags, SIGPIPE); every other fd goes to libc unchanged. */
#include "preload/pl_ready_int.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define PL_IOV_WIN 64

static size_t iov_total(const struct iovec *iov, int iovcnt, bool *ret_bad)
{
	size_t t = 0;
	*ret_bad = iovcnt < 0 || (iovcnt > 0 && !iov);
	for (int i = 0; i < iovcnt && !*ret_bad; i++) {
		if (t + iov[i].iov_len < t || iov[i].iov_len > SSIZE_MAX)
			*ret_bad = true;
		t += iov[i].iov_len;
	}
	if (t > SSIZE_MAX)
		*ret_bad = true;
	return t;
}

/* Up to PL_IOV_WIN entries of IOV starting at byte OFF, empty entries dropped. */
static int iov_window(const struct iovec *iov, int iovcnt, size_t off, struct iovec *out)
{
	int i = 0, n = 0;

	while (i < iovcnt && off >= iov[i].iov_len) {
		off -= iov[i].iov_len;
		i++;
	}
	for (; i < iovcnt && n < PL_IOV_WIN; i++) {
		out[n].iov_base = (char *)iov[i].iov_base + off;
		out[n].iov_len = iov[i].iov_len - off;
		off = 0;
		if (out[n].iov_len)
			n++;
	}
	return n;
}

/* Where an I/O call on S goes: 1 NTB, 0 the kernel (not a connection, or a failed connect),
 * or a negative errno while a connect is still in progress. */
static int pl_route_io(struct pl_sock *s, int fd, bool nonblock)
{
	if (s->kind != PL_CONN)
		return 0;
	for (;;) {
		int st = atomic_load_explicit(&s->state, memory_order_acquire); /* pairs with pl_set_state */
		if (st == PL_CS_PENDING)
			st = pl_check_pending(s, fd);
		if (st == PL_CS_OPEN)
			return 1;
		if (st == PL_CS_FAILED)
			return 0;
		if (nonblock)
			return -EAGAIN;
		/* Never let a blocking kernel send run on it: bytes would enter the TCP stream. */
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (pl_real.poll(&p, 1, -1) < 0 && errno == EINTR)
			return -EINTR;
	}
}

/* A blocking wait was interrupted by a signal handler. The kernel restarts the call when that
 * handler has SA_RESTART and the socket has no timeout for this direction. We cannot tell which
 * signal it was, so we restart only when every caught signal has SA_RESTART. (Rare path: the
 * 64 sigaction look-ups do not matter.) */
static bool restart_after_signal(int timeout_ms)
{
	if (timeout_ms > 0)
		return false;
	for (int sig = 1; sig < _NSIG; sig++) {
		struct sigaction sa;
		/* Fault signals are raised by a faulting instruction of their thread, never while it
		 * waits in the kernel; crash handlers and sanitizer runtimes install them without
		 * SA_RESTART, which must not turn every restartable interruption into EINTR. */
		if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS ||
		    sig == SIGFPE || sig == SIGILL || sigaction(sig, NULL, &sa) < 0)
			continue;
		if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN &&
		    !(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}

/* Wait for EVENTS on S: spin for the configured budget, yielding the CPU every few rounds so
 * a peer that shares this core can run (pl_spinning(), as poll, select and epoll), then sleep
 * in tp_wait() (the transport's own spin is set to 0: see pl_tp_params()). Same results as
 * tp_wait().
 * Waiting for input spins on tp_readable_hint(), for output on tp_poll_dir(): neither asks
 * the peer to ring us (as tp_poll() does), so the peer's calls stay free of doorbells while we
 * spin. The hint validates nothing: the receive that follows checks the message as it copies
 * it straight into the caller's buffer (tp_recv()'s fast path), where a validating look here
 * (tp_readable_bytes()) would queue it and cost a second copy. End of stream and errors are
 * seen by tp_wait() when the spin ends. */
static int pl_wait(struct pl_sock *s, unsigned events, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };
	struct pl_timing tm = { .tmo = timeout_ms < 0 ? NULL : &ts };
	bool kcheck;

	events |= TP_EV_ERR | TP_EV_HUP;
	if (!pl_spin_us)
		return tp_wait(s->conn, events, timeout_ms);
	do {
		if (events & TP_EV_IN) {
			if (tp_readable_hint(s->conn)) {
				pl_timing_done(&tm);
				return TP_EV_IN;
			}
		} else {
			/* (no arming: tp_wait() arms before it sleeps) */
			unsigned ev = tp_poll_dir(s->conn, events, false);
			if (ev & events) {
				pl_timing_done(&tm);
				return (int)(ev & events);
			}
		}
	} while (pl_spinning(&tm, &kcheck));
	int r = tp_wait(s->conn, events, timeout_ms);

	pl_timing_done(&tm);
	return r;
}


static int64_t deadline_of(int ms)
{
	return ms > 0 ? pl_now_ns() + (int64_t)ms * 1000000 : -1;
}

/* A send refused for want of room, yet the connection polls writable: the room is in the inline
 * ring, which takes only small writes. Put a small piece of ITER (from DONE on) there, so that
 * POLLOUT stays truthful and a sender never spins on it (the ring fills, then waits arm
 * properly). Returns the bytes sent, 0 when none. */
static ssize_t send_inline_piece(struct pl_sock *s, const struct iovec *iov, int iovcnt,
				 size_t done)
{
	struct iovec piece[PL_IOV_WIN];
	size_t lim = pl_tpp.inline_max, acc = 0;
	int pn;

	/* (not arming: the wait that may follow arms only if it has to sleep) */
	if (!lim || !(tp_poll_dir(s->conn, TP_EV_OUT, false) & TP_EV_OUT))
		return 0;
	pn = iov_window(iov, iovcnt, done, piece);
	for (int i = 0; i < pn; i++) {
		if (acc + piece[i].iov_len > lim)
			piece[i].iov_len = lim - acc;
		acc += piece[i].iov_len;
		if (acc == lim) {
			pn = i + 1;
			break;
		}
	}
	ssize_t r = tp_send(s->conn, piece, pn);
	return r > 0 ? r : 0;
}

/* Back-off of a blocking send between wake-ups that found no usable room ("futile": the
 * transport reported room, e.g. the peer's consumer index moved, that a send of this size
 * cannot use yet). The first PL_FUTILE_RETRIES look again at once (the peer is releasing more
 * as we look); until the PL_FUTILE_YIELDS-th each yields the CPU (a receiver that shares this
 * core drains the ring meanwhile); past that the receiver is not running beside us
 * (descheduled, or a slow peer): sleep, PL_FUTILE_STEP_US longer each round up to
 * PL_FUTILE_MAX_US, so that a long wait looks at most 1000 times a second instead of burning
 * a core. FUTILE counts from 1. */
#define PL_FUTILE_RETRIES 2u
#define PL_FUTILE_YIELDS  64u
#define PL_FUTILE_STEP_US 50u
#define PL_FUTILE_MAX_US  1000u

static void futile_backoff(unsigned futile)
{
	if (futile <= PL_FUTILE_RETRIES)
		return;
	if (futile < PL_FUTILE_YIELDS) {
		sched_yield();
		return;
	}
	unsigned steps = futile - PL_FUTILE_YIELDS + 1;

	usleep(steps < PL_FUTILE_MAX_US / PL_FUTILE_STEP_US ? steps * PL_FUTILE_STEP_US
							    : PL_FUTILE_MAX_US);
}

/* A blocking send of S (DONE bytes sent so far) found no room: wait for it, until *DEADLINE
 * (-2: not read yet; SO_SNDTIMEO). 0: look again; else the negative errno the send ends with
 * (-EAGAIN when SO_SNDTIMEO expired). *FUTILE counts the wake-ups since the last progress. */
static ssize_t send_wait_room(struct pl_sock *s, size_t done, int64_t *deadline,
			      unsigned *futile)
{
	pl_note_nospace(s); /* (a writer that sleeps: its room is an edge too) */
	if (*deadline == -2)
		*deadline = deadline_of(atomic_load_explicit(&s->sndtimeo_ms, memory_order_relaxed));
	futile_backoff(++*futile);
	int w = pl_wait(s, TP_EV_OUT, pl_ms_left(*deadline));
	/* (the deadline is checked here too: "room" that the next send cannot use must not keep
	 * us past SO_SNDTIMEO) */
	if (w > 0 && (*deadline < 0 || pl_now_ns() < *deadline))
		return 0;
	if (w == -EINTR && !done &&
	    restart_after_signal(atomic_load_explicit(&s->sndtimeo_ms, memory_order_relaxed)))
		return 0;
	return w >= 0 ? -EAGAIN : w; /* (w >= 0: SO_SNDTIMEO expired) */
}

ssize_t pl_send(struct pl_sock *s, int fd, const struct iovec *iov, int iovcnt, int flags)
{
	bool bad;
	size_t total = iov_total(iov, iovcnt, &bad), done = 0;
	bool nb = (flags & MSG_DONTWAIT) || atomic_load_explicit(&s->nonblock, memory_order_relaxed);
	int64_t deadline = -2;
	struct pl_spin spin_until = { 0 };
	unsigned futile = 0;
	bool full = false; /* stopped for want of room: an EPOLLOUT edge follows the room */
	struct iovec win[PL_IOV_WIN];

	if (bad)
		return -EINVAL;
	if (flags & MSG_ZEROCOPY)
		return -EOPNOTSUPP; /* no zero-copy notifications over NTB: say so */
	if (flags & MSG_OOB) {
		/* Urgent data: only the kernel's TCP carries it (the urgent pointer, the peer's
		 * SO_OOBINLINE, SIOCATMARK, SIGURG). The connection moves to its kernel socket first,
		 * as a failover does (every byte sent before goes there first, none lost or
		 * reordered; the peer follows), and this send then goes there whole (-EXDEV below,
		 * pl_moved_send()). Meanwhile a non-blocking send says EAGAIN (POLLOUT follows the
		 * move), a blocking one waits. */
		PL_ENTER();
		bool moving = tp_conn_to_kernel(s->conn, "urgent data");
		PL_LEAVE();
		if (!moving)
			return -EOPNOTSUPP;
	}
	if (total == 0)
		return 0;
	unsigned wl = total < UINT_MAX ? (unsigned)total : UINT_MAX;
	if (atomic_load_explicit(&s->wlen, memory_order_relaxed) != wl)
		atomic_store_explicit(&s->wlen, wl, memory_order_relaxed);
	PL_ENTER();
	for (;;) {
		const struct iovec *v = iov;
		int n = iovcnt;
		if (done || iovcnt > PL_IOV_WIN) {
			n = iov_window(iov, iovcnt, done, win);
			v = win;
		}
		/* Rather than let the transport cut a write for want of room (the rest of a cut
		 * goes as a second message, or inline, and every later message boundary then falls
		 * inside the reader's buffers: a second copy per read), a blocking send waits a
		 * moment for room for all of it, and a non-blocking one says EAGAIN, as its
		 * POLLOUT does (pl_revents() asks the same of the last write's size). */
		if (!tp_send_fits(s->conn, total - done, false)) {
			if (!nb && pl_room_spin(&spin_until))
				continue;
			if (nb) {
				full = true;
				break;
			}
		}
		ssize_t r = tp_send(s->conn, v, n);
		if (unlikely(r == -EXDEV)) { /* moved to the kernel socket (pl_failover.c) */
			PL_LEAVE();
			pl_conn_moved(s, fd);
			/* (the kernel's epoll reports its edges from now on) */
			return pl_moved_send(fd, iov, iovcnt, done, flags);
		}
		if (r == 0 || r == -EAGAIN) {
			/* Blocking: wait a moment for the data ring rather than split the write
			 * (below): a write cut into an inline piece and a rest shifts every later
			 * message boundary against the reader's buffers, and a message that
			 * straddles two reads costs the reader a second copy (tp_recv()'s bounce). */
			if (!nb && total - done > pl_tpp.inline_max && pl_room_spin(&spin_until))
				continue;
			ssize_t piece = send_inline_piece(s, iov, iovcnt, done);
			if (piece > 0)
				r = piece;
		}
		if (r > 0) {
			futile = 0;
			done += (size_t)r;
			if (done >= total)
				break;
			continue;
		}
		if (r == 0 || r == -EAGAIN) {
			if (nb) {
				full = true;
				break;
			}
			r = send_wait_room(s, done, &deadline, &futile);
			if (r == 0)
				continue;
		}
		if (done)
			break;
		PL_LEAVE();
		r = pl_err_take(s, r, -EPIPE); /* (a reset reported: then a broken pipe) */
		if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
			raise(SIGPIPE);
		return r;
	}
	PL_LEAVE();
	if (full)
		pl_note_nospace(s);
	if (!done)
		return -EAGAIN;
	return (ssize_t)done;
}

#define PL_TRUNC_CHUNK (64u << 10)

/* recv() with MSG_TRUNC, as the kernel's TCP does it: up to TOTAL bytes discarded, the
 * caller's buffer untouched, the count returned (with MSG_PEEK: how many could be read, up to
 * TOTAL, nothing consumed). FLAGS without MSG_TRUNC; waits as a receive with them waits. */
static ssize_t pl_recv_trunc(struct pl_sock *s, int fd, size_t total, int flags)
{
	uint8_t one, *b;
	size_t done = 0;

	if (total == 0)
		return 0;
	if (flags & MSG_PEEK) {
		struct iovec v = { &one, 1 };
		ssize_t r = pl_recv(s, fd, &v, 1, flags); /* (waits for a byte, as it would) */

		if (r <= 0)
			return r;
		if (!pl_is_ntb(s, fd)) {
			/* (moved to the kernel socket meanwhile: its own answer; it reads no buffer) */
			struct iovec k = { NULL, total };

			return pl_moved_recv(fd, &k, 1, flags | MSG_TRUNC);
		}
		PL_ENTER();
		size_t n = tp_readable_bytes(s->conn);
		PL_LEAVE();
		return (ssize_t)(n > total ? total : n ? n : 1);
	}
	b = malloc(total < PL_TRUNC_CHUNK ? total : PL_TRUNC_CHUNK);
	if (!b)
		return -ENOMEM;
	while (done < total) {
		size_t want = total - done < PL_TRUNC_CHUNK ? total - done : PL_TRUNC_CHUNK;
		struct iovec v = { b, want };
		/* (the first piece waits as the call does; later ones take only what is there,
		 * unless MSG_WAITALL asks for all) */
		ssize_t r = pl_recv(s, fd, &v, 1,
				    done && !(flags & MSG_WAITALL) ? flags | MSG_DONTWAIT : flags);

		if (r <= 0) {
			if (!done) {
				free(b);
				return r;
			}
			break;
		}
		done += (size_t)r;
		if ((size_t)r < want && !(flags & MSG_WAITALL))
			break;
	}
	free(b);
	return (ssize_t)done;
}

ssize_t pl_recv(struct pl_sock *s, int fd, const struct iovec *iov, int iovcnt, int flags)
{
	bool bad;
	size_t total = iov_total(iov, iovcnt, &bad), done = 0;
	bool nb = (flags & MSG_DONTWAIT) || atomic_load_explicit(&s->nonblock, memory_order_relaxed);
	bool peek = flags & MSG_PEEK;
	bool waitall = (flags & MSG_WAITALL) && !peek && !nb;
	int64_t deadline = -2;
	unsigned futile = 0;
	struct iovec win[PL_IOV_WIN];
	ssize_t r = 0;

	if (bad)
		return -EINVAL;
	if (flags & MSG_OOB)
		return -EINVAL;   /* no urgent data on an NTB stream, as the kernel without any */
	if (flags & MSG_ERRQUEUE)
		return -EAGAIN;
	if (flags & MSG_TRUNC)
		return pl_recv_trunc(s, fd, total, flags & ~MSG_TRUNC); /* (the buffer unused) */
	if (total == 0)
		return 0;
	PL_ENTER();
	for (;;) {
		const struct iovec *v = iov;
		int n = iovcnt;
		if (done || iovcnt > PL_IOV_WIN) {
			n = iov_window(iov, iovcnt, done, win);
			v = win;
		}
		r = tp_recv(s->conn, v, n, peek ? TP_RECV_PEEK : 0);
		if (unlikely(r == -EXDEV)) { /* moved to the kernel socket (pl_failover.c) */
			PL_LEAVE();
			pl_conn_moved(s, fd);
			if (done && !waitall)
				return (ssize_t)done;
			n = iov_window(iov, iovcnt, done, win);
			r = pl_moved_recv(fd, win, n, flags);
			if (r < 0 && done)
				r = 0;
			return r < 0 ? r : (ssize_t)done + r;
		}
		if (r > 0) {
			futile = 0;
			done += (size_t)r;
			if (!waitall || done >= total)
				break;
			continue;
		}
		if (r == 0)
			break; /* end of stream */
		if (r != -EAGAIN || nb || (done && !waitall))
			break;
		if (deadline == -2)
			deadline = deadline_of(atomic_load_explicit(&s->rcvtimeo_ms, memory_order_relaxed));
		if (futile++ > 1) { /* readiness the next receive could not use: back off */
			if (futile < 64)
				sched_yield();
			else
				usleep(futile < 84 ? 50u * (futile - 63) : 1000u);
		}
		int w = pl_wait(s, TP_EV_IN | TP_EV_RDHUP, pl_ms_left(deadline));
		if (w > 0 && (deadline < 0 || pl_now_ns() < deadline))
			continue;
		if (w == -EINTR && !done &&
		    restart_after_signal(atomic_load_explicit(&s->rcvtimeo_ms, memory_order_relaxed)))
			continue;
		r = w >= 0 ? -EAGAIN : w;
		break;
	}
	PL_LEAVE();
	if (done)
		return (ssize_t)done;
	if (r == -EAGAIN && !peek) /* the next readable data is an edge (pl_epoll_wait.c) */
		atomic_fetch_add_explicit(&s->rx_eagain, 1, memory_order_relaxed);
	return pl_err_take(s, r, 0); /* (a reset reported: then the end of the stream) */
}

/* --- wrappers ------------------------------------------------------------------------------------ */

/* Look FD up; when it is an NTB connection run EXPR (which uses s) and return its result the
 * libc way; otherwise fall through to the real call after the macro. */
#define PL_IO(fd, nonblock_flags, expr)                                                  \
	do {                                                                             \
		struct pl_sock *s = pl_lookup(fd);                                       \
		if (unlikely(s != NULL)) {                                               \
			bool nb_ = ((nonblock_flags) & MSG_DONTWAIT) ||                  \
				   atomic_load_explicit(&s->nonblock, memory_order_relaxed); \
			int how_ = pl_route_io(s, (fd), nb_);                            \
			long r_ = how_ < 0 ? how_ : 0;                                   \
			if (how_ > 0)                                                    \
				r_ = (long)(expr);                                       \
			pl_sock_put(s);                                                  \
			if (how_ != 0)                                                   \
				return pl_ret(r_);                                       \
		}                                                                        \
	} while (0)

NTB_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct iovec v = { buf, len };
	PL_IO(fd, 0, pl_recv(s, fd, &v, 1, 0));
	return pl_real.read(fd, buf, len);
}

NTB_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		abort(); /* what glibc's __chk_fail does, without its message */
	return read(fd, buf, len);
}

NTB_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };
	PL_IO(fd, 0, pl_send(s, fd, &v, 1, 0));
	return pl_real.write(fd, buf, len);
}

NTB_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	PL_IO(fd, 0, pl_recv(s, fd, iov, iovcnt, 0));
	return pl_real.readv(fd, iov, iovcnt);
}

NTB_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	PL_IO(fd, 0, pl_send(s, fd, iov, iovcnt, 0));
	return pl_real.writev(fd, iov, iovcnt);
}

NTB_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct iovec v = { (void *)buf, len };
	PL_IO(fd, flags, pl_send(s, fd, &v, 1, flags));
	return pl_real.send(fd, buf, len, flags);
}

NTB_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct iovec v = { buf, len };
	PL_IO(fd, flags, pl_recv(s, fd, &v, 1, flags));
	return pl_real.recv(fd, buf, len, flags);
}

NTB_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		abort();
	return recv(fd, buf, len, flags);
}

NTB_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			  __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	struct iovec v = { (void *)buf, len };
	/* A connected stream ignores the address, as TCP does. */
	PL_IO(fd, flags, pl_send(s, fd, &v, 1, flags));
	return pl_real.sendto(fd, buf, len, flags, addr, alen);
}

static ssize_t recv_noaddr(struct pl_sock *s, int fd, void *buf, size_t len, int flags,
			   socklen_t *alen)
{
	struct iovec v = { buf, len };
	ssize_t r = pl_recv(s, fd, &v, 1, flags);
	if (r >= 0 && alen)
		*alen = 0; /* a stream has no source address per read: the kernel reports none */
	return r;
}

NTB_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG addr,
			    socklen_t *alen)
{
	PL_IO(fd, flags, recv_noaddr(s, fd, buf, len, flags, alen));
	return pl_real.recvfrom(fd, buf, len, flags, addr, alen);
}

NTB_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				  __SOCKADDR_ARG addr, socklen_t *alen)
{
	if (len > buflen)
		abort();
	return recvfrom(fd, buf, len, flags, addr, alen);
}

static ssize_t send_msg(struct pl_sock *s, int fd, const struct msghdr *msg, int flags)
{
	if (!msg)
		return -EFAULT;
	if (msg->msg_controllen)
		return -EOPNOTSUPP; /* no ancillary data over NTB: fail clearly */
	return pl_send(s, fd, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

static ssize_t recv_msg(struct pl_sock *s, int fd, struct msghdr *msg, int flags)
{
	if (!msg)
		return -EFAULT;
	ssize_t r = pl_recv(s, fd, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	return r;
}

/* Descriptors in MSG (SCM_RIGHTS) made fit to leave: false with errno set (pl_pass.c). */
static bool pass_out(int fd, const struct msghdr *msg, int flags)
{
	int r = msg && msg->msg_controllen ? pl_pass_out(fd, msg, flags) : 0;

	if (r < 0)
		errno = -r;
	return r == 0;
}

NTB_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	PL_IO(fd, flags, send_msg(s, fd, msg, flags));
	if (!pass_out(fd, msg, flags))
		return -1;
	return pl_real.sendmsg(fd, msg, flags);
}

NTB_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	PL_IO(fd, flags, recv_msg(s, fd, msg, flags));
	ssize_t r = pl_real.recvmsg(fd, msg, flags);
	if (r >= 0 && msg->msg_controllen)
		pl_pass_in(fd, msg); /* listeners received (pl_pass.c) */
	return r;
}

static long send_mmsg(struct pl_sock *s, int fd, struct mmsghdr *vec, unsigned vlen, int flags)
{
	unsigned i;
	for (i = 0; i < vlen && i < 1024; i++) {
		ssize_t r = send_msg(s, fd, &vec[i].msg_hdr, flags);
		if (r < 0)
			return i ? (long)i : r;
		vec[i].msg_len = (unsigned)r;
	}
	return (long)i;
}

static long recv_mmsg(struct pl_sock *s, int fd, struct mmsghdr *vec, unsigned vlen, int flags,
		      struct timespec *tmo)
{
	int64_t deadline = tmo ? pl_now_ns() + tmo->tv_sec * 1000000000LL + tmo->tv_nsec : -1;
	int f = flags & ~MSG_WAITFORONE;
	unsigned i;

	for (i = 0; i < vlen && i < 1024; i++) {
		ssize_t r = recv_msg(s, fd, &vec[i].msg_hdr, f);
		if (r < 0)
			return i ? (long)i : r;
		vec[i].msg_len = (unsigned)r;
		if (r == 0)
			return (long)i + 1;
		if (flags & MSG_WAITFORONE)
			f |= MSG_DONTWAIT;
		if (deadline >= 0 && pl_now_ns() >= deadline)
			return (long)i + 1;
	}
	return (long)i;
}

NTB_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	PL_IO(fd, flags, send_mmsg(s, fd, vec, vlen, flags));
	for (unsigned i = 0; vec && i < vlen && i < 1024; i++)
		if (!pass_out(fd, &vec[i].msg_hdr, flags))
			return -1;
	return pl_real.sendmmsg(fd, vec, vlen, flags);
}

NTB_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
			struct timespec *tmo)
{
	PL_IO(fd, flags, recv_mmsg(s, fd, vec, vlen, flags, tmo));
	int r = pl_real.recvmmsg(fd, vec, vlen, flags, tmo);
	for (int i = 0; i < r; i++)
		if (vec[i].msg_hdr.msg_controllen)
			pl_pass_in(fd, &vec[i].msg_hdr);
	return r;
}

/* --- sendfile / splice onto (or from) an NTB socket ------------------------------------------ */

#define PL_COPY_CHUNK (256 * 1024)

/* Read from IN_FD at *POS (or its file position) and send; the file position / *POS advance
 * by the bytes actually sent. */
static long send_file(struct pl_sock *s, int out_fd, int in_fd, off_t *offset, size_t count)
{
	off_t pos = offset ? *offset : lseek(in_fd, 0, SEEK_CUR);
	bool seekable = offset || pos >= 0;
	size_t chunk = count < PL_COPY_CHUNK ? count : PL_COPY_CHUNK;
	size_t sent = 0;
	long err = 0;
	char *buf;

	if (count == 0)
		return 0;
	buf = malloc(chunk);
	if (!buf)
		return -ENOMEM;
	while (sent < count) {
		size_t want = count - sent < chunk ? count - sent : chunk;
		ssize_t n = seekable ? pread(in_fd, buf, want, pos + (off_t)sent)
				     : pl_real.read(in_fd, buf, want);
		if (n <= 0) {
			err = n < 0 ? -errno : 0;
			break;
		}
		struct iovec v = { buf, (size_t)n };
		ssize_t w = pl_send(s, out_fd, &v, 1, sent ? MSG_NOSIGNAL : 0);
		if (w < 0) {
			err = w;
			break;
		}
		sent += (size_t)w;
		if (w < n)
			break; /* non-blocking and the queue is full */
	}
	free(buf);
	if (seekable) {
		if (offset)
			*offset = pos + (off_t)sent;
		else
			lseek(in_fd, pos + (off_t)sent, SEEK_SET);
	}
	return sent ? (long)sent : err;
}

NTB_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	PL_IO(out_fd, 0, send_file(s, out_fd, in_fd, offset, count));
	return pl_real.sendfile(out_fd, in_fd, offset, count);
}

NTB_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	PL_IO(out_fd, 0, send_file(s, out_fd, in_fd, (off_t *)offset, count));
	return pl_real.sendfile64(out_fd, in_fd, offset, count);
}

/* Pipe → NTB: whatever is read from the pipe is sent completely (blocking), so nothing is lost. */
static long splice_out(struct pl_sock *s, int out_fd, int in_fd, size_t len)
{
	size_t chunk = len < PL_COPY_CHUNK ? len : PL_COPY_CHUNK;
	char *buf = malloc(chunk ? chunk : 1);
	if (!buf)
		return -ENOMEM;
	ssize_t n = pl_real.read(in_fd, buf, chunk);
	long r = n < 0 ? -errno : 0;
	size_t sent = 0;
	while (n > 0 && sent < (size_t)n) {
		struct iovec v = { buf + sent, (size_t)n - sent };
		ssize_t w = pl_send(s, out_fd, &v, 1, 0);
		if (w == -EAGAIN) {
			PL_ENTER();
			pl_wait(s, TP_EV_OUT, -1);
			PL_LEAVE();
			continue;
		}
		if (w < 0) {
			r = w;
			break;
		}
		sent += (size_t)w;
	}
	free(buf);
	return sent ? (long)sent : r;
}

/* NTB → pipe: peek, write what the pipe takes, then consume exactly that much. */
static long splice_in(struct pl_sock *s, int in_fd, int out_fd, size_t len, unsigned flags)
{
	size_t chunk = len < PL_COPY_CHUNK ? len : PL_COPY_CHUNK;
	char *buf = malloc(chunk ? chunk : 1);
	if (!buf)
		return -ENOMEM;
	struct iovec v = { buf, chunk };
	ssize_t n = pl_recv(s, in_fd, &v, 1, MSG_PEEK | ((flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0));
	long r = n;
	if (n > 0) {
		ssize_t w = pl_real.write(out_fd, buf, (size_t)n);
		if (w < 0) {
			r = -errno;
		} else {
			v.iov_len = (size_t)w;
			r = w ? pl_recv(s, in_fd, &v, 1, MSG_DONTWAIT) : 0;
		}
	}
	free(buf);
	return r;
}

NTB_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			  unsigned int flags)
{
	PL_IO(fd_out, (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0,
	      off_in ? -ESPIPE : splice_out(s, fd_out, fd_in, len));
	PL_IO(fd_in, (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0,
	      off_out ? -ESPIPE : splice_in(s, fd_in, fd_out, len, flags));
	return pl_real.splice(fd_in, off_in, fd_out, off_out, len, flags);
}
