// SPDX-License-Identifier: MIT
/* Descriptors passed to another process over a Unix socket (SCM_RIGHTS).
 *
 * What travels is the kernel socket only. An NTB connection's bytes and state live in this
 * process (its rings, its library): a receiver would read nothing from the socket, and what it
 * wrote there would reach the peer as a broken failover header (the peer resets). So before
 * sendmsg() passes one, the connection moves to its kernel socket as a failover does (reason
 * "passed to another process"; every byte sent before goes there first, every byte not read
 * yet the peer sends again, none lost or duplicated), and the call waits for the move: from
 * then on it is an ordinary TCP connection in every process that holds it (at kernel speed).
 *
 * A listener: whoever holds it accepts from one kernel queue, and a connection its client set
 * up over NTB must be accepted by a process whose library finds the set-up, or the client
 * sends over NTB what the server reads from TCP. A receiver without the library cannot, so the
 * sender withdraws its own advertisement of the port (its accepts still attach any NTB set-up
 * they find), and a receiver under the library adopts the listener when recvmsg() returns it
 * (advertised again, under the receiver's pid) if the sender runs the library too: passed
 * between such processes, the port stays NTB; otherwise clients get TCP. */
#include "preload/pl_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

/* How long a non-blocking sendmsg() waits for a passed connection's move before EAGAIN (a
 * blocking one waits until it ends; it needs the peer's answer, ~1 ms here). */
#define PL_PASS_NB_WAIT_MS 100

#define PL_PASS_WHY "passed to another process"

/* Calls F(fd, arg) for each descriptor of MSG's SCM_RIGHTS messages until it returns < 0. */
static int each_fd(const struct msghdr *msg, int (*f)(int, void *), void *arg)
{
	struct msghdr m = *msg; /* (CMSG_NXTHDR() takes a non-const header) */

	if (!m.msg_control || m.msg_controllen < sizeof(struct cmsghdr))
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const unsigned char *p = CMSG_DATA(c);

		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, p + i * sizeof(int), sizeof(fd));
			int r = f(fd, arg);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

int pl_conn_to_kernel_wait(struct pl_sock *s, int fd, const char *why, int wait_ms)
{
	int64_t end = pl_now_ns() + (int64_t)wait_ms * 1000000;
	bool asked = false;

	for (;;) {
		/* acquire: pairs with pl_set_state() (conn final once open) */
		int st = atomic_load_explicit(&s->state, memory_order_acquire);

		if (st == PL_CS_PENDING)
			st = pl_check_pending(s, fd);
		if (st == PL_CS_FAILED || (st == PL_CS_OPEN && pl_conn_check_moved(s, fd)))
			return 0; /* the kernel's already */
		if (st == PL_CS_OPEN) {
			PL_ENTER();
			int fo = tp_conn_failover_state(s->conn);
			/* (0: none, or a move to another link finished: the kernel socket now) */
			bool ok = fo == 3 || (fo == 1 && asked) || tp_conn_to_kernel(s->conn, why);
			PL_LEAVE();
			if (fo == 3)
				return 0; /* failed: reset; the socket is all there is */
			if (!ok) {
				LOG(LL_WARN, "fd %d %s: cannot move to its kernel socket (%s): a "
				    "balanced stream stays on its links", fd, s->desc, why);
				return -EOPNOTSUPP;
			}
			asked = true;
		}
		if (wait_ms >= 0 && pl_now_ns() >= end)
			return -EAGAIN;
		if (st == PL_CS_OPEN) {
			PL_ENTER();
			tp_wait(s->conn, TP_EV_OUT, 10); /* (nothing is ready while it moves) */
			PL_LEAVE();
		} else {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			pl_real.poll(&p, 1, 10); /* the kernel connect, then its NTB confirm */
		}
	}
}

void pl_listener_withdraw(struct pl_sock *s, int fd, const char *why)
{
	if (!atomic_exchange_explicit(&s->unadvertised, true, memory_order_relaxed)) {
		pl_listener_links(s, false);
		LOG(LL_DEBUG, "fd %d: listener on port %u %s: advertisement withdrawn", fd, s->port,
		    why);
	}
}

struct pass_ctx {
	int ufd, flags, nb; /* nb: -1 until asked */
};

static int pass_one(int fd, void *arg)
{
	struct pass_ctx *x = arg;
	struct pl_sock *s = fd >= 0 ? pl_sock_get(fd) : NULL;
	int r = 0;

	if (!s)
		return 0;
	if (s->kind == PL_LISTENER) {
		pl_listener_withdraw(s, fd, "passed to another process");
	} else if (s->kind == PL_CONN && s->conn) {
		if (x->nb < 0) {
			int fl = (int)syscall(SYS_fcntl, x->ufd, F_GETFL);
			x->nb = (x->flags & MSG_DONTWAIT) || (fl >= 0 && (fl & O_NONBLOCK));
		}
		r = pl_conn_to_kernel_wait(s, fd, PL_PASS_WHY, x->nb ? PL_PASS_NB_WAIT_MS : -1);
	}
	pl_sock_put(s);
	return r;
}

int pl_pass_out(int ufd, const struct msghdr *msg, int flags)
{
	struct pass_ctx x = { ufd, flags, -1 };

	if (!msg || !pl_fds || !atomic_load_explicit(&pl_nsocks, memory_order_relaxed))
		return 0;
	return each_fd(msg, pass_one, &x);
}

/* Does process PID run the library (its memory maps name it)? False when that cannot be told
 * (gone, or its maps not ours to read). */
static bool pid_runs_lib(pid_t pid)
{
	char path[32], buf[8192];
	size_t keep = 0;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	for (;;) {
		ssize_t n = pl_real.read(fd, buf + keep, sizeof(buf) - 1 - keep);

		if (n <= 0)
			break;
		size_t len = keep + (size_t)n;
		buf[len] = 0;
		if (strstr(buf, "libntbsock")) {
			found = true;
			break;
		}
		keep = len < 16 ? len : 16; /* (a name cut by the read) */
		memmove(buf, buf + len - keep, keep);
	}
	pl_real.close(fd);
	return found;
}

struct adopt_ctx {
	int ufd, sender_ok; /* sender_ok: -1 until asked */
};

/* A listener adopted only from a sender under the library: one without it may accept on it
 * too, and would take for TCP what our advertisement sets up over NTB (that sender's peer is
 * asked: SO_PEERCRED names the process that connected or created the Unix socket). */
static int adopt_one(int fd, void *arg)
{
	struct adopt_ctx *x = arg;
	int acc = 0;
	socklen_t al = sizeof(acc);

	if (fd < 0 || fd >= pl_nfds || atomic_load_explicit(&pl_fds[fd], memory_order_relaxed) ||
	    pl_real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc)
		return 0;
	if (x->sender_ok < 0) {
		struct ucred uc;
		socklen_t ul = sizeof(uc);

		x->sender_ok = pl_real.getsockopt(x->ufd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0 &&
			       uc.pid > 0 && (uc.pid == getpid() || pid_runs_lib(uc.pid));
	}
	if (!x->sender_ok) {
		LOG(LL_DEBUG, "fd %d: listener received from a process without the library: not "
		    "advertised (its connections stay tcp)", fd);
		return 0;
	}
	pl_listener_adopt(fd);
	return 0;
}

void pl_pass_in(int ufd, const struct msghdr *msg)
{
	int saved = errno;
	struct adopt_ctx x = { ufd, -1 };

	if (msg && pl_active())
		each_fd(msg, adopt_one, &x);
	errno = saved;
}

/* systemd's socket activation (sd_listen_fds(3)): LISTEN_PID names this process and LISTEN_FDS
 * counts the descriptors from 3 on that its service manager opened for it. The manager runs
 * without the library and does not accept on a listener it passes (Accept=no; with Accept=yes
 * the program gets a connected socket instead), so the program's library adopts them as
 * listen() would have them: their clients get NTB. (Not unset: the program reads them.) */
void pl_pass_listen_fds(void)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");

	if (!pid || !n || atol(pid) != (long)getpid())
		return;
	long k = atol(n);
	for (long i = 0; i < k && i < 4096 && 3 + i < pl_nfds; i++) {
		int fd = (int)(3 + i), acc = 0;
		socklen_t al = sizeof(acc);

		if (!atomic_load_explicit(&pl_fds[fd], memory_order_relaxed) &&
		    pl_real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 && acc &&
		    pl_listener_adopt(fd))
			LOG(LL_INFO, "fd %d: listener from socket activation (LISTEN_FDS), "
			    "advertised", fd);
	}
}
