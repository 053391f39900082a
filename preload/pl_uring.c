// SPDX-License-Identifier: MIT
/* Programs that use io_uring.
 *
 * A send, receive, accept or connect submitted through an io_uring never passes through the C
 * library: on an NTB connection the send reached the kernel socket, which the peer's library
 * took for a broken failover header (both ends got ECONNRESET), a receive waited for bytes
 * that travel over NTB, an accept took an NTB client for a TCP one. The library cannot see what
 * a ring carries, so once the process sets up a ring it stops carrying sockets: open NTB
 * connections move to their kernel sockets as a failover does (no byte lost or duplicated;
 * reason "io_uring in this process"), listeners withdraw their advertisement (new clients use
 * TCP at once), and new connections, made or accepted, stay on TCP with that reason.
 *
 * A ring is seen where it is made: liburing's io_uring_queue_init*() and io_uring_setup()
 * (Debian's liburing makes the system call itself, not through the C library), and the raw
 * system call through the C library's syscall() (what Rust's io-uring crate uses). A program
 * that makes the system call with its own instruction is not seen.
 *
 * NTBSOCK_IO_URING=ignore keeps the sockets on NTB: for a program that uses io_uring for files
 * only (its socket calls through the C library work as ever). */
#include "preload/pl_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif

/* How long the set-up of a ring waits for the open connections' moves (each needs its peer's
 * answer, ~1 ms; one whose peer is stopped goes on moving after that) */
#define PL_URING_MOVE_WAIT_MS 1000

static _Atomic bool pl_uring;      /* a ring was set up: sockets stay on TCP */
static _Atomic int pl_uring_ignore = -1; /* NTBSOCK_IO_URING=ignore (-1: not read yet) */

bool pl_uring_on(void)
{
	/* relaxed: a flag set once; a set-up that misses it by a hair is one made before the
	 * ring, which the moves of pl_uring_note() then take */
	return atomic_load_explicit(&pl_uring, memory_order_relaxed);
}

static bool uring_ignored(void)
{
	/* relaxed: the same value from every thread */
	int v = atomic_load_explicit(&pl_uring_ignore, memory_order_relaxed);

	if (v < 0) {
		const char *e = getenv("NTBSOCK_IO_URING");

		v = e && !strcmp(e, "ignore");
		atomic_store_explicit(&pl_uring_ignore, v, memory_order_relaxed);
	}
	return v;
}

/* The open NTB connections to their kernel sockets, the listeners' advertisements withdrawn. */
static void uring_release_all(void)
{
	int64_t end = pl_now_ns() + (int64_t)PL_URING_MOVE_WAIT_MS * 1000000;
	int n = pl_fd_max(), moved = 0, left = 0;

	for (int fd = 0; fd < n; fd++) {
		struct pl_sock *s = pl_sock_get(fd);

		if (!s)
			continue;
		if (s->kind == PL_LISTENER) {
			pl_listener_withdraw(s, fd, PL_URING_WHY);
		} else if (s->kind == PL_CONN && s->conn) {
			int64_t ms = (end - pl_now_ns()) / 1000000;
			int r = pl_conn_to_kernel_wait(s, fd, PL_URING_WHY, ms > 0 ? (int)ms : 0);

			if (r == 0)
				moved++;
			else
				left++;
		}
		pl_sock_put(s);
	}
	if (moved || left)
		LOG(left ? LL_WARN : LL_INFO, "io_uring: %d connection(s) moved to their kernel "
		    "sockets%s", moved + left, left ? ", some still moving" : "");
}

void pl_uring_note(const char *how)
{
	if (uring_ignored())
		return;
	/* (one ring is enough; later ones find everything on the kernel already. Set also
	 * before the library is active: a ring made in another constructor counts) */
	if (atomic_exchange_explicit(&pl_uring, true, memory_order_relaxed) || !pl_active())
		return;
	LOG(LL_INFO, "io_uring set up (%s): sockets stay on TCP from now on "
	    "(NTBSOCK_IO_URING=ignore keeps them on NTB)", how);
	uring_release_all();
}

/* The C library's syscall(): the kernel's, with io_uring_setup noted first. Made here with the
 * instruction (the library's own calls come here too: no lookup, no recursion). The six
 * arguments are read whatever the call passes, as the C library's own syscall() does. */
NTB_EXPORT long syscall(long nr, ...)
{
	va_list ap;
	long a[6];
	unsigned long ret;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (unlikely(nr == __NR_io_uring_setup))
		pl_uring_note("io_uring_setup system call");
#if defined(__x86_64__)
	register long r10 __asm__("r10") = a[3];
	register long r8 __asm__("r8") = a[4];
	register long r9 __asm__("r9") = a[5];

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if (ret > -4096UL) {
		errno = -(int)ret;
		return -1;
	}
	return (long)ret;
#else
	static long (*next)(long, ...);

	if (!next)
		next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	(void)ret;
	return next(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
#endif
}

/* liburing's entry points that make a ring: noted, then liburing's own. */
static void *uring_next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

struct io_uring;
struct io_uring_params;

NTB_EXPORT int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	int (*f)(unsigned, struct io_uring *, unsigned) =
		(int (*)(unsigned, struct io_uring *, unsigned))uring_next("io_uring_queue_init");

	if (!f)
		return -ENOSYS;
	pl_uring_note("liburing");
	return f(entries, ring, flags);
}

NTB_EXPORT int io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
					  struct io_uring_params *p)
{
	int (*f)(unsigned, struct io_uring *, struct io_uring_params *) =
		(int (*)(unsigned, struct io_uring *, struct io_uring_params *))uring_next(
			"io_uring_queue_init_params");

	if (!f)
		return -ENOSYS;
	pl_uring_note("liburing");
	return f(entries, ring, p);
}

NTB_EXPORT int io_uring_queue_init_mem(unsigned entries, struct io_uring *ring,
				       struct io_uring_params *p, void *buf, size_t buf_size)
{
	int (*f)(unsigned, struct io_uring *, struct io_uring_params *, void *, size_t) =
		(int (*)(unsigned, struct io_uring *, struct io_uring_params *, void *, size_t))
			uring_next("io_uring_queue_init_mem");

	if (!f)
		return -ENOSYS;
	pl_uring_note("liburing");
	return f(entries, ring, p, buf, buf_size);
}

NTB_EXPORT int io_uring_setup(unsigned entries, struct io_uring_params *p)
{
	int (*f)(unsigned, struct io_uring_params *) =
		(int (*)(unsigned, struct io_uring_params *))uring_next("io_uring_setup");

	if (!f)
		return -ENOSYS;
	pl_uring_note("liburing");
	return f(entries, p);
}
