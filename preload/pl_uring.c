// SPDX-License-Identifier: MIT
/* Programs that use io_uring.
 *
 * A send, receive, accept or connect submitted through an io_uring never passes through the C
 * library: on an NTB connection the send reached the kernel socket, which the peer's library
 * took for a broken failover header (both ends got ECONNRESET), a receive waited for bytes
 * that travel over NTB, an accept took an NTB client for a TCP one. The library cannot see what
 * a ring carries, so once the process sets up a ring it stops carrying sockets: open NTB
 * connections move to their kernel sockets as a failover does (no byte lost or duplicated;
 * reason "io_uring in this process"), listeners withdraw their advertisement for the whole host
 * while the process lives (a parent that listened and forked it advertises them no more: new
 * clients use TCP at once), and new connections, made or accepted, stay on TCP with that
 * reason.
 *
 * A ring is seen where it is made: liburing's io_uring_queue_init*() and io_uring_setup()
 * (Debian's liburing makes the system call itself, not through the C library), and the raw
 * system call through the C library's syscall() (what Rust's io-uring crate uses). A program
 * that makes the system call with its own instruction is not seen.
 *
 * NTBSOCK_IO_URING=ignore keeps the sockets on NTB: for a program that uses io_uring for files
 * only (its socket calls through the C library work as ever). */
#include "preload/pl_int.h"
#include "util/rawsys.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#define PL_STR_(x) #x
#define PL_STR(x) PL_STR_(x)

/* How long the set-up of a ring waits for the open connections' moves (each needs its peer's
 * answer, ~1 ms; one whose peer is stopped goes on moving after that) */
#define PL_URING_MOVE_WAIT_MS 1000

static _Atomic bool pl_uring;      /* a ring was set up: sockets stay on TCP */
static _Atomic int pl_uring_ignore = -1; /* NTBSOCK_IO_URING=ignore (-1: not read yet) */

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

bool pl_uring_on(void)
{
	/* seq_cst: against pl_uring_note()'s exchange, then its scan of the fd table (see
	 * pl_uring_recheck()) */
	return atomic_load_explicit(&pl_uring, memory_order_seq_cst);
}

void pl_uring_recheck(int fd)
{
	/* The socket is in the fd table: a Dekker pair with pl_uring_note() (its flag, then its
	 * scan). Either the scan finds this socket, or this load finds the flag */
	atomic_thread_fence(memory_order_seq_cst);
	if (likely(!pl_uring_on()) || uring_ignored())
		return;
	struct pl_sock *s = pl_sock_get(fd);

	if (s && s->kind == PL_CONN && s->conn)
		(void)pl_conn_to_kernel_wait(s, fd, PL_URING_WHY, PL_URING_MOVE_WAIT_MS);
	pl_sock_put(s);
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
			/* (and for the host: another process that shares it, a parent that
			 * listened before it forked us, must not bring NTB clients we may accept) */
			pl_listener_withdraw(s, fd, PL_URING_WHY);
			pl_listener_veto(s->port);
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

/* A ring was made (after the call succeeded: a program that only probes for io_uring, and
 * is refused, keeps NTB; the program submits nothing before the call returns). errno as the
 * call left it. */
void pl_uring_note(const char *how)
{
	int saved = errno;

	if (uring_ignored())
		return;
	/* (one ring is enough; later ones find everything on the kernel already. Set also
	 * before the library is active: a ring made in another constructor counts. seq_cst:
	 * see pl_uring_recheck()) */
	if (atomic_exchange_explicit(&pl_uring, true, memory_order_seq_cst) || !pl_active()) {
		errno = saved;
		return;
	}
	LOG(LL_INFO, "io_uring set up (%s): sockets stay on TCP from now on "
	    "(NTBSOCK_IO_URING=ignore keeps them on NTB)", how);
	uring_release_all();
	errno = saved;
}

/* The C library's syscall(): the kernel's, with a successful io_uring_setup noted, and a close
 * or close_range the program makes through it taken by our close() / close_range() as the
 * named calls are: libuv (Node.js) closes every socket with syscall(SYS_close), and an NTB
 * connection closed behind our back never ended (its peer waited for an end of file for ever,
 * where over TCP the close sends a FIN). The library's own closes do not come here
 * (util/rawsys.h: raw_close()). An assembly stub as the C library's own is (it takes the
 * seventh argument from the stack whatever the caller passed: in C that read would be a
 * variable argument the caller did not pass, which a sanitizer may report); the library's
 * other calls come here too (no lookup, no recursion). The rare paths are C: an error result
 * (errno), io_uring_setup (the system call, then the note) and the closes. */
#if defined(__x86_64__)
__attribute__((used)) static long uring_syscall_err(unsigned long ret)
{
	errno = -(int)ret;
	return -1;
}

__attribute__((used)) static long uring_syscall_setup(long entries, long params)
{
	long ret = raw_sys3(__NR_io_uring_setup, entries, params, 0); /* (-1 and errno) */

	if (ret >= 0)
		pl_uring_note("io_uring_setup system call"); /* (keeps errno) */
	return ret;
}

__attribute__((used)) static long uring_syscall_close(long fd)
{
	return pl_close_nocancel((int)fd);
}

__attribute__((used)) static long uring_syscall_close_range(long first, long last, long flags)
{
	return close_range((unsigned int)first, (unsigned int)last, (int)flags);
}

__asm__(".text\n"
	".globl syscall\n"
	".type syscall, @function\n"
	"syscall:\n"
	"	cmpq $" PL_STR(__NR_io_uring_setup) ", %rdi\n"
	"	je 2f\n"
	"	cmpq $" PL_STR(__NR_close) ", %rdi\n"
	"	je 3f\n"
	"	cmpq $" PL_STR(__NR_close_range) ", %rdi\n"
	"	je 4f\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	movq %r8, %r10\n"
	"	movq %r9, %r8\n"
	"	movq 8(%rsp), %r9\n"
	"	syscall\n"
	"	cmpq $-4095, %rax\n"
	"	jae 1f\n"
	"	ret\n"
	"1:	movq %rax, %rdi\n"
	"	jmp uring_syscall_err\n"
	"2:	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	jmp uring_syscall_setup\n"
	"3:	movq %rsi, %rdi\n"
	"	jmp uring_syscall_close\n"
	"4:	movq %rsi, %rdi\n"
	"	movq %rdx, %rsi\n"
	"	movq %rcx, %rdx\n"
	"	jmp uring_syscall_close_range\n"
	".size syscall, .-syscall\n");
#else
NTB_EXPORT long syscall(long nr, ...)
{
	static long (*next)(long, ...);
	va_list ap;
	long a[6], r;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!next)
		next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	r = next(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (nr == __NR_io_uring_setup && r >= 0)
		pl_uring_note("io_uring_setup system call");
	return r;
}
#endif

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
	int r = f(entries, ring, flags);

	if (r >= 0)
		pl_uring_note("liburing");
	return r;
}

NTB_EXPORT int io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
					  struct io_uring_params *p)
{
	int (*f)(unsigned, struct io_uring *, struct io_uring_params *) =
		(int (*)(unsigned, struct io_uring *, struct io_uring_params *))uring_next(
			"io_uring_queue_init_params");

	if (!f)
		return -ENOSYS;
	int r = f(entries, ring, p);

	if (r >= 0)
		pl_uring_note("liburing");
	return r;
}

NTB_EXPORT int io_uring_queue_init_mem(unsigned entries, struct io_uring *ring,
				       struct io_uring_params *p, void *buf, size_t buf_size)
{
	int (*f)(unsigned, struct io_uring *, struct io_uring_params *, void *, size_t) =
		(int (*)(unsigned, struct io_uring *, struct io_uring_params *, void *, size_t))
			uring_next("io_uring_queue_init_mem");

	if (!f)
		return -ENOSYS;
	int r = f(entries, ring, p, buf, buf_size);

	if (r >= 0)
		pl_uring_note("liburing");
	return r;
}

NTB_EXPORT int io_uring_setup(unsigned entries, struct io_uring_params *p)
{
	int (*f)(unsigned, struct io_uring_params *) =
		(int (*)(unsigned, struct io_uring_params *))uring_next("io_uring_setup");

	if (!f)
		return -ENOSYS;
	int r = f(entries, p);

	if (r >= 0)
		pl_uring_note("liburing");
	return r;
}
