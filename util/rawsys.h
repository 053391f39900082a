/* SPDX-License-Identifier: MIT */
/* The kernel calls that code below preload/ (transport/, ntb/, util/) makes on descriptors:
 * raw system calls, never libc's wrappers, because inside a program running under the preload
 * library those names are the interposer's (preload/intercept.def) and would take our own
 * descriptors for the program's. Each returns what the system call returns, as libc would:
 * the result, or -1 with errno set. tests/check_rawsys.sh fails the build's checks when a file
 * below preload/ calls an interposed name, or syscall() for one, outside this header. */
#ifndef NTBSOCK_UTIL_RAWSYS_H
#define NTBSOCK_UTIL_RAWSYS_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_THREAD__
/* ThreadSanitizer's hook for a close it does not intercept: without it, the number of a
 * descriptor we closed (fd_park()) was still the old file's to TSan, and another thread's
 * socket() that reused it looked like a race with our eventfd(). */
void __sanitizer_syscall_pre_impl_close(long fd);
#endif

/* A system call of up to three arguments made here, not through syscall(): inside a program,
 * syscall() is the preload library's (preload/pl_uring.c), which takes a close or close_range
 * for the program's own (libuv closes its sockets with syscall(SYS_close)) and so would refuse
 * the library's own descriptors (util/fdpark.h). Elsewhere than on x86-64, syscall(), whose
 * preload version does not look at closes there. */
static inline long raw_sys3(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	if ((unsigned long)r > -4096UL) {
		errno = -(int)r;
		return -1;
	}
	return r;
#else
	return syscall(nr, a, b, c);
#endif
}

static inline int raw_close(int fd)
{
#ifdef __SANITIZE_THREAD__
	__sanitizer_syscall_pre_impl_close(fd);
#endif
	return (int)raw_sys3(SYS_close, fd, 0, 0);
}

static inline int raw_close_range(unsigned int first, unsigned int last, int flags)
{
	return (int)raw_sys3(SYS_close_range, (long)first, (long)last, (long)flags);
}

static inline ssize_t raw_read(int fd, void *buf, size_t len)
{
	return syscall(SYS_read, fd, buf, len);
}

static inline ssize_t raw_write(int fd, const void *buf, size_t len)
{
	return syscall(SYS_write, fd, buf, len);
}

/* open(2) is not interposed; it is here so that a file below preload/ that opens, reads and
 * closes does all three the same way. */
static inline int raw_open(const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static inline int raw_dup3(int fd, int fd2, int flags)
{
	return (int)syscall(SYS_dup3, fd, fd2, flags);
}

/* fcntl(fd, F_DUPFD_CLOEXEC, min): a close-on-exec duplicate numbered min or above. */
static inline int raw_dupfd_cloexec(int fd, int min)
{
	return (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, min);
}

/* ioctl(2); ARG is a pointer or an integer, as the request wants. */
#define raw_ioctl(fd, req, arg) ((int)syscall(SYS_ioctl, (fd), (req), (arg)))

/* poll(2) through ppoll: some architectures have no poll system call. timeout_ms < 0 waits
 * for ever. */
static inline int raw_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };

	return (int)syscall(SYS_ppoll, fds, nfds, timeout_ms < 0 ? NULL : &ts, NULL, (size_t)8);
}

static inline int raw_socket(int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}

static inline int raw_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	return (int)syscall(SYS_connect, fd, addr, len);
}

static inline int raw_shutdown(int fd, int how)
{
	return (int)syscall(SYS_shutdown, fd, how);
}

static inline int raw_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return (int)syscall(SYS_getsockopt, fd, level, name, val, len);
}

static inline int raw_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return (int)syscall(SYS_setsockopt, fd, level, name, val, len);
}

static inline ssize_t raw_send(int fd, const void *buf, size_t len, int flags)
{
	return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static inline ssize_t raw_recv(int fd, void *buf, size_t len, int flags)
{
	return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static inline ssize_t raw_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return syscall(SYS_recvmsg, fd, msg, flags);
}

#endif
