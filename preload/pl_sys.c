// SPDX-License-Identifier: MIT
/* syscall() fallbacks for every intercepted call, and the real-function table that starts out
 * pointing at them: used until dlsym(RTLD_NEXT) has resolved the real libc function (calls from
 * other constructors, or from inside our own init). The calls util/rawsys.h has (the layers
 * below use them) come from there. */
#include "preload/pl_int.h"
#include "util/rawsys.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

static int sys_socket(int domain, int type, int protocol)
{ return raw_socket(domain, type, protocol); }
static int sys_connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{ return raw_connect(fd, addr.__sockaddr__, len); }
static int sys_accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{ return (int)syscall(SYS_accept4, fd, addr.__sockaddr__, len, 0); }
static int sys_accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{ return (int)syscall(SYS_accept4, fd, addr.__sockaddr__, len, flags); }
static int sys_bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{ return (int)syscall(SYS_bind, fd, addr.__sockaddr__, len); }
static int sys_listen(int fd, int backlog)
{ return (int)syscall(SYS_listen, fd, backlog); }
static int sys_close(int fd)
{ return raw_close(fd); }
static int sys_shutdown(int fd, int how)
{ return raw_shutdown(fd, how); }
static ssize_t sys_read(int fd, void *buf, size_t len)
{ return raw_read(fd, buf, len); }
static ssize_t sys_write(int fd, const void *buf, size_t len)
{ return raw_write(fd, buf, len); }
static ssize_t sys_readv(int fd, const struct iovec *iov, int iovcnt)
{ return syscall(SYS_readv, fd, iov, iovcnt); }
static ssize_t sys_writev(int fd, const struct iovec *iov, int iovcnt)
{ return syscall(SYS_writev, fd, iov, iovcnt); }
static ssize_t sys_send(int fd, const void *buf, size_t len, int flags)
{ return raw_send(fd, buf, len, flags); }
static ssize_t sys_recv(int fd, void *buf, size_t len, int flags)
{ return raw_recv(fd, buf, len, flags); }
static ssize_t sys_sendto(int fd, const void *buf, size_t len, int flags,
			  __CONST_SOCKADDR_ARG addr, socklen_t alen)
{ return syscall(SYS_sendto, fd, buf, len, flags, addr.__sockaddr__, alen); }
static ssize_t sys_recvfrom(int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG addr,
			    socklen_t *alen)
{ return syscall(SYS_recvfrom, fd, buf, len, flags, addr.__sockaddr__, alen); }
static ssize_t sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{ return syscall(SYS_sendmsg, fd, msg, flags); }
static ssize_t sys_recvmsg(int fd, struct msghdr *msg, int flags)
{ return raw_recvmsg(fd, msg, flags); }
static int sys_sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{ return (int)syscall(SYS_sendmmsg, fd, vec, vlen, flags); }
static int sys_recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
			struct timespec *tmo)
{ return (int)syscall(SYS_recvmmsg, fd, vec, vlen, flags, tmo); }
static ssize_t sys_sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{ return syscall(SYS_sendfile, out_fd, in_fd, offset, count); }
static ssize_t sys_sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{ return syscall(SYS_sendfile, out_fd, in_fd, offset, count); }
static ssize_t sys_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			  unsigned int flags)
{ return syscall(SYS_splice, fd_in, off_in, fd_out, off_out, len, flags); }
static int sys_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		     const sigset_t *mask)
{ return (int)syscall(SYS_ppoll, fds, nfds, tmo, mask, _NSIG / 8); }
static int sys_poll(struct pollfd *fds, nfds_t nfds, int timeout)
{ return raw_poll(fds, nfds, timeout); }
static int sys_pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
		       const sigset_t *mask)
{
	struct { const sigset_t *set; size_t len; } sig = { mask, _NSIG / 8 };
	struct timespec ts, *tp = NULL;
	if (tmo) {
		ts = *tmo; /* the kernel writes the remaining time back */
		tp = &ts;
	}
	return (int)syscall(SYS_pselect6, nfds, rd, wr, ex, tp, mask ? &sig : NULL);
}
static int sys_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tmo)
{ return (int)syscall(SYS_select, nfds, rd, wr, ex, tmo); }
static int sys_epoll_create(int size)
{ return size <= 0 ? (errno = EINVAL, -1) : (int)syscall(SYS_epoll_create1, 0); }
static int sys_epoll_create1(int flags)
{ return (int)syscall(SYS_epoll_create1, flags); }
static int sys_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{ return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev); }
static int sys_epoll_pwait(int epfd, struct epoll_event *evs, int maxevents, int timeout,
			   const sigset_t *mask)
{ return (int)syscall(SYS_epoll_pwait, epfd, evs, maxevents, timeout, mask, _NSIG / 8); }
static int sys_epoll_wait(int epfd, struct epoll_event *evs, int maxevents, int timeout)
{ return sys_epoll_pwait(epfd, evs, maxevents, timeout, NULL); }
static int sys_epoll_pwait2(int epfd, struct epoll_event *evs, int maxevents,
			    const struct timespec *tmo, const sigset_t *mask)
{ return (int)syscall(SYS_epoll_pwait2, epfd, evs, maxevents, tmo, mask, _NSIG / 8); }
static int sys_dup(int fd)
{ return (int)syscall(SYS_dup, fd); }
static int sys_dup2(int fd, int fd2)
{ return (int)syscall(SYS_dup2, fd, fd2); }
static int sys_dup3(int fd, int fd2, int flags)
{ return raw_dup3(fd, fd2, flags); }
static int sys_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}
static int sys_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return (int)syscall(SYS_ioctl, fd, req, arg);
}
static int sys_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{ return raw_getsockopt(fd, level, name, val, len); }
static int sys_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{ return raw_setsockopt(fd, level, name, val, len); }
static int sys_getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{ return (int)syscall(SYS_getsockname, fd, addr.__sockaddr__, len); }
static int sys_getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{ return (int)syscall(SYS_getpeername, fd, addr.__sockaddr__, len); }
static int sys_close_range(unsigned int first, unsigned int last, int flags)
{ return raw_close_range(first, last, flags); }
static pid_t sys_fork(void)
{ return (pid_t)syscall(SYS_fork); }
static ssize_t sys___read_chk(int fd, void *buf, size_t len, size_t buflen)
{ (void)buflen; return sys_read(fd, buf, len); }
static ssize_t sys___recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{ (void)buflen; return sys_recv(fd, buf, len, flags); }
static ssize_t sys___recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				  __SOCKADDR_ARG addr, socklen_t *alen)
{ (void)buflen; return sys_recvfrom(fd, buf, len, flags, addr, alen); }
static int sys___poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{ (void)fdslen; return sys_poll(fds, nfds, timeout); }
static int sys___ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
			   const sigset_t *mask, size_t fdslen)
{ (void)fdslen; return sys_ppoll(fds, nfds, tmo, mask); }

static int sys_execve(const char *path, char *const argv[], char *const envp[])
{ return (int)syscall(SYS_execve, path, argv, envp); }
static int sys_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			int flags)
{ return (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags); }
static int sys_fexecve(int fd, char *const argv[], char *const envp[])
{ return sys_execveat(fd, "", argv, envp, AT_EMPTY_PATH); }
static int sys_execv(const char *path, char *const argv[])
{ return sys_execve(path, argv, environ); }
/* A plain PATH search (no shell for scripts without #!): only until dlsym has resolved libc's. */
static int sys_execvpe(const char *file, char *const argv[], char *const envp[])
{
	const char *path = getenv("PATH");
	char buf[4096];
	int err = ENOENT;

	if (!*file || strchr(file, '/'))
		return sys_execve(file, argv, envp);
	for (const char *p = path && *path ? path : "/bin:/usr/bin"; ; ) {
		const char *end = strchrnul(p, ':');
		int n = snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(end - p), p,
				 end > p ? "/" : "", file);
		if (n > 0 && (size_t)n < sizeof(buf)) {
			sys_execve(buf, argv, envp);
			if (errno != ENOENT && errno != ENOTDIR)
				err = errno;
		}
		if (!*end)
			break;
		p = end + 1;
	}
	errno = err;
	return -1;
}
static int sys_execvp(const char *file, char *const argv[])
{ return sys_execvpe(file, argv, environ); }

/* execl*: the wrappers (pl_exec.c) collect the arguments themselves and never call these. */
static int sys_execl(const char *path, const char *arg, ...)
{ (void)path; (void)arg; errno = ENOSYS; return -1; }
#define sys_execlp sys_execl
#define sys_execle sys_execl

/* set*id: the kernel changes the calling thread only (libc's functions change every thread);
 * these run only before dlsym has resolved libc's, when the process has one thread. */
static int sys_setuid(uid_t uid)
{ return (int)syscall(SYS_setuid, uid); }
static int sys_seteuid(uid_t uid)
{ return (int)syscall(SYS_setresuid, (uid_t)-1, uid, (uid_t)-1); }
static int sys_setreuid(uid_t ruid, uid_t euid)
{ return (int)syscall(SYS_setreuid, ruid, euid); }
static int sys_setresuid(uid_t ruid, uid_t euid, uid_t suid)
{ return (int)syscall(SYS_setresuid, ruid, euid, suid); }
static int sys_setgid(gid_t gid)
{ return (int)syscall(SYS_setgid, gid); }
static int sys_setegid(gid_t gid)
{ return (int)syscall(SYS_setresgid, (gid_t)-1, gid, (gid_t)-1); }
static int sys_setregid(gid_t rgid, gid_t egid)
{ return (int)syscall(SYS_setregid, rgid, egid); }
static int sys_setresgid(gid_t rgid, gid_t egid, gid_t sgid)
{ return (int)syscall(SYS_setresgid, rgid, egid, sgid); }
static int sys_setgroups(size_t n, const gid_t *groups)
{ return (int)syscall(SYS_setgroups, n, groups); }
/* initgroups needs the group database (NSS): only libc's. */
static int sys_initgroups(const char *user, gid_t group)
{ (void)user; (void)group; errno = ENOSYS; return -1; }

#define sys_fcntl64 sys_fcntl
#define sys_vfork sys_fork

#define PL_CALL(name, ret, params, args) .name = sys_##name,
struct pl_real_table pl_real = {
#include "preload/intercept.def"
};
#undef PL_CALL
