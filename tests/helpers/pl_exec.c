// SPDX-License-Identifier: MIT
/* Servers that hand an accepted connection across exec(), and a client that checks the stream
 * byte-exactly, for preload/ tests of exec adoption.
 *   pl_exec serve-exec ADDR PORT [CALL] accept one connection, echo its first 1000 bytes, dup
 *                                      it, then execv(self, "child", FD, DUPFD) while more
 *                                      input is still unread; CALL names another exec
 *                                      function (execve, execl, execle, execlp, execvp,
 *                                      execvpe, execveat, fexecve)
 *   pl_exec serve-execfail ADDR PORT   the same, but the exec fails (no such program): the
 *                                      server goes on echoing on its own connection
 *   pl_exec serve-exec-nolib ADDR PORT the same as serve-exec, the child run without LD_PRELOAD:
 *                                      the connection cannot be handed over and is reset
 *   pl_exec serve-cloexec ADDR PORT    accept, mark the fd FD_CLOEXEC, execv(self,
 *                                      "child-closed", FD): the exec closes the connection
 *   pl_exec serve-fork-exec ADDR PORT  accept, echo 1000 bytes, fork; the child execs as
 *                                      serve-exec does, the parent closes its copy only 1 s
 *                                      later (inetd-like servers) and waits for the child
 *   pl_exec serve-fork ADDR PORT [SECS] the same without exec: the child echoes itself and
 *                                      closes; the parent closes after SECS (default 1)
 *   pl_exec serve-fork-both ADDR PORT  as serve-fork, but the parent, 0.5 s after the fork
 *                                      while the child streams, also reads and writes: both
 *                                      must fail with EPERM (single-owner rule, ntbsock(7));
 *                                      it closes its copy 2 s after the fork
 *   pl_exec serve-daemon ADDR PORT     accept, echo 1000 bytes, fork; the parent exits at once
 *                                      (a daemon's first process), the child waits 1.5 s,
 *                                      then echoes until EOF and says how much
 *   pl_exec serve-listen-exec ADDR PORT listen, then execv(self, "child-accept", LFD): the new
 *                                      image accepts on the inherited listener and echoes
 *   pl_exec child FD DUPFD             (run by exec) close DUPFD, echo FD until EOF
 *   pl_exec child-accept LFD           (run by exec) accept one connection on LFD, echo it
 *   pl_exec child-closed FD            (run by exec) FD must be closed; exit 0 if so
 *   pl_exec client ADDR PORT BYTES     send BYTES of a pattern while reading the echo; the
 *                                      echo must equal what was sent, then EOF after SHUT_WR
 *   pl_exec client-eof ADDR PORT       connect and expect EOF (not a hang) within 10 s
 *   pl_exec exec-chain ADDR PORT N     connect, send one byte and read its echo, close, then
 *                                      exec itself with N - 1 (the same pid, N + 1 images,
 *                                      each opening the link) until N is 0 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "pl_exec: %s: %s\n", what, strerror(errno));
	exit(1);
}

static struct sockaddr_in addr_of(const char *a, const char *p)
{
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(p));
	if (inet_pton(AF_INET, a, &sa.sin_addr) != 1) {
		fprintf(stderr, "pl_exec: bad address %s\n", a);
		exit(2);
	}
	return sa;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + (i >> 9) * 7 + 1);
}

static int listen_on(const char *a, const char *p)
{
	struct sockaddr_in sa = addr_of(a, p);
	int one = 1;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 8) < 0)
		die("bind/listen");
	return l;
}

static int accept_one(const char *a, const char *p)
{
	int l = listen_on(a, p);
	int fd = accept(l, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(l);
	return fd;
}

static void write_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write");
		b += w;
		n -= (size_t)w;
	}
}

/* Echo until EOF (LIMIT: stop after that many bytes instead). Returns bytes echoed. */
static size_t echo(int fd, size_t limit)
{
	uint8_t buf[65536];
	size_t done = 0;

	while (done < limit) {
		size_t want = limit - done < sizeof(buf) ? limit - done : sizeof(buf);
		ssize_t r = read(fd, buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read");
		if (r == 0)
			break;
		write_all(fd, buf, (size_t)r);
		done += (size_t)r;
	}
	return done;
}

extern char **environ;

/* exec CARGV (4 arguments) as this program through the libc call named HOW (default execv);
 * the PATH-searching ones find it through PATH = this program's directory. */
static void exec_self(const char *how, char *const cargv[])
{
	char self[4096], dir[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		die("readlink");
	self[n] = 0;
	snprintf(dir, sizeof(dir), "%s", self);
	*strrchr(dir, '/') = 0;
	const char *base = strrchr(self, '/') + 1;
	setenv("PATH", dir, 1);
	if (!how || !strcmp(how, "execv"))
		execv(self, cargv);
	else if (!strcmp(how, "execve"))
		execve(self, cargv, environ);
	else if (!strcmp(how, "execl"))
		execl(self, cargv[0], cargv[1], cargv[2], cargv[3], (char *)NULL);
	else if (!strcmp(how, "execle"))
		execle(self, cargv[0], cargv[1], cargv[2], cargv[3], (char *)NULL, environ);
	else if (!strcmp(how, "execlp"))
		execlp(base, cargv[0], cargv[1], cargv[2], cargv[3], (char *)NULL);
	else if (!strcmp(how, "execvp"))
		execvp(base, cargv);
	else if (!strcmp(how, "execvpe"))
		execvpe(base, cargv, environ);
	else if (!strcmp(how, "execveat"))
		execveat(AT_FDCWD, self, cargv, environ, 0);
	else if (!strcmp(how, "fexecve")) {
		int efd = open(self, O_RDONLY | O_CLOEXEC);
		if (efd < 0)
			die("open self");
		fexecve(efd, cargv, environ);
	} else {
		fprintf(stderr, "pl_exec: unknown exec call %s\n", how);
		exit(2);
	}
	die(how);
}

static int serve_exec(char **argv, bool fail, bool nolib, bool forked, bool noexec)
{
	int fd = accept_one(argv[2], argv[3]);
	char fds[16], dups[16];

	if (echo(fd, 1000) != 1000) {
		fprintf(stderr, "pl_exec: early EOF before exec\n");
		return 1;
	}
	if (forked) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid > 0) {
			int st;
			/* serve-fork [SECONDS]: how long the parent holds its copy (default 1) */
			usleep(noexec && argv[4] ? (useconds_t)(atof(argv[4]) * 1e6) : 1000000u);
			close(fd);
			if (waitpid(pid, &st, 0) != pid)
				die("waitpid");
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		}
		if (noexec) {
			size_t n = echo(fd, SIZE_MAX);
			fprintf(stderr, "pl_exec fork child: echoed %zu bytes after fork\n", n);
			close(fd);
			return 0;
		}
	}
	int d = dup(fd);
	if (d < 0)
		die("dup");
	snprintf(fds, sizeof(fds), "%d", fd);
	snprintf(dups, sizeof(dups), "%d", d);
	if (fail) {
		char *cargv[] = { "pl_exec-missing", "child", fds, dups, NULL };
		execv("/nonexistent/pl_exec-missing", cargv);
		if (errno != ENOENT)
			die("exec of a missing program did not fail with ENOENT");
		fprintf(stderr, "pl_exec: exec failed as intended; serving here\n");
		close(d);
		echo(fd, SIZE_MAX);
		close(fd);
		return 0;
	}
	char *cargv[] = { argv[0], "child", fds, dups, NULL };
	if (nolib) {
		size_t n = 0, k = 0;
		while (environ[n])
			n++;
		char **env = calloc(n + 1, sizeof(char *));
		for (size_t i = 0; env && i < n; i++)
			if (strncmp(environ[i], "LD_PRELOAD=", 11))
				env[k++] = environ[i];
		execve("/proc/self/exe", cargv, env);
		die("execve");
	}
	exec_self(argv[4], cargv);
	return 1;
}

/* Accept one connection on ADDR PORT (ARGV[2], ARGV[3]) into *FD, echo its first 1000 bytes,
 * fork: fork()'s result, or -1 after an early end of file. */
static pid_t accept_echo_fork(char **argv, int *fd)
{
	*fd = accept_one(argv[2], argv[3]);
	if (echo(*fd, 1000) != 1000) {
		fprintf(stderr, "pl_exec: early EOF before fork\n");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	return pid;
}

static int serve_fork_both(char **argv)
{
	int fd, st;
	uint8_t b[16] = { 0 };
	pid_t pid = accept_echo_fork(argv, &fd);

	if (pid < 0)
		return 1;
	if (pid == 0) {
		size_t n = echo(fd, SIZE_MAX);
		fprintf(stderr, "pl_exec fork child: echoed %zu bytes after fork\n", n);
		close(fd);
		return 0;
	}
	usleep(500000);
	errno = 0;
	ssize_t r = read(fd, b, sizeof(b));
	int rerr = errno;
	errno = 0;
	ssize_t w = write(fd, b, sizeof(b));
	int werr = errno;
	fprintf(stderr, "pl_exec fork parent: read %zd (%s), write %zd (%s)\n", r, strerror(rerr),
		w, strerror(werr));
	usleep(1500000);
	close(fd);
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	if (r != -1 || rerr != EPERM || w != -1 || werr != EPERM) {
		fprintf(stderr, "pl_exec fork parent: expected EPERM from both\n");
		return 1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int serve_daemon(char **argv)
{
	int fd;
	pid_t pid = accept_echo_fork(argv, &fd);

	if (pid < 0)
		return 1;
	if (pid > 0)
		_exit(0);
	usleep(1500000); /* (the test starts another process of this host meanwhile) */
	size_t n = echo(fd, SIZE_MAX);
	fprintf(stderr, "pl_exec daemon child: echoed %zu bytes after fork\n", n);
	close(fd);
	return 0;
}

static int serve_cloexec(char **argv)
{
	int fd = accept_one(argv[2], argv[3]);
	char fds[16];

	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		die("F_SETFD");
	snprintf(fds, sizeof(fds), "%d", fd);
	char *cargv[] = { argv[0], "child-closed", fds, NULL };
	execv("/proc/self/exe", cargv);
	die("execv");
	return 1;
}

static int serve_listen_exec(char **argv)
{
	int l = listen_on(argv[2], argv[3]);
	char ls[16];

	snprintf(ls, sizeof(ls), "%d", l);
	char *cargv[] = { argv[0], "child-accept", ls, NULL };
	execv("/proc/self/exe", cargv);
	die("execv");
	return 1;
}

static int child_accept(char **argv)
{
	int l = atoi(argv[2]);
	int fd = accept(l, NULL, NULL);
	if (fd < 0)
		die("accept on the inherited listener");
	close(l);
	size_t n = echo(fd, SIZE_MAX);
	fprintf(stderr, "pl_exec child-accept: echoed %zu bytes\n", n);
	close(fd);
	return 0;
}

static int child(char **argv)
{
	int fd = atoi(argv[2]), d = atoi(argv[3]);

	if (close(d) < 0)
		die("close of the dup");
	size_t n = echo(fd, SIZE_MAX);
	fprintf(stderr, "pl_exec child: echoed %zu bytes after exec\n", n);
	close(fd);
	return 0;
}

static int child_closed(char **argv)
{
	int fd = atoi(argv[2]);
	if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) {
		fprintf(stderr, "pl_exec: fd %d is still open after exec with FD_CLOEXEC\n", fd);
		return 1;
	}
	sleep(3); /* stay alive: the peer's EOF must not come from our death */
	return 0;
}

static int connect_to(const char *a, const char *p)
{
	struct sockaddr_in sa = addr_of(a, p);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	return fd;
}

static int client(char **argv)
{
	int fd = connect_to(argv[2], argv[3]);
	size_t total = strtoull(argv[4], NULL, 10), sent = 0, got = 0;
	uint8_t buf[65536];
	bool shut = false;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN | (sent < total ? POLLOUT : 0) };
		int r = poll(&p, 1, 20000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "pl_exec client: stalled at sent %zu, got %zu\n", sent, got);
			return 1;
		}
		if (sent < total && (p.revents & POLLOUT)) {
			size_t n = total - sent < sizeof(buf) ? total - sent : sizeof(buf);
			if (n > 4096 && sent < 1000)
				n = 1000 - sent; /* the server echoes 1000 bytes before exec */
			for (size_t i = 0; i < n; i++)
				buf[i] = pattern(sent + i);
			ssize_t w = write(fd, buf, n);
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				die("write");
			if (w > 0)
				sent += (size_t)w;
		}
		if (sent == total && !shut) {
			if (shutdown(fd, SHUT_WR) < 0)
				die("shutdown");
			shut = true;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die("read");
			if (n == 0)
				break;
			for (ssize_t i = 0; i < n; i++, got++)
				if (buf[i] != pattern(got)) {
					fprintf(stderr, "pl_exec client: byte %zu differs\n", got);
					return 1;
				}
		}
	}
	if (got != total) {
		fprintf(stderr, "pl_exec client: EOF after %zu of %zu bytes\n", got, total);
		return 1;
	}
	printf("echoed %zu bytes exactly\n", got);
	return 0;
}

static int client_eof(char **argv)
{
	int fd = connect_to(argv[2], argv[3]);
	char c;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 10000) != 1) {
		fprintf(stderr, "pl_exec client-eof: no EOF within 10 s\n");
		return 1;
	}
	ssize_t r = read(fd, &c, 1);
	if (r != 0) {
		fprintf(stderr, "pl_exec client-eof: read gave %zd (%s), not EOF\n", r,
			r < 0 ? strerror(errno) : "data");
		return 1;
	}
	printf("EOF\n");
	return 0;
}

static int exec_chain(char **argv)
{
	int n = atoi(argv[4]), fd = connect_to(argv[2], argv[3]);
	char b = (char)n, e = 0;

	if (write(fd, &b, 1) != 1 || read(fd, &e, 1) != 1 || e != b)
		die("one byte's echo");
	close(fd);
	if (n <= 0)
		return 0;
	char left[16];

	snprintf(left, sizeof(left), "%d", n - 1);
	char *cargv[] = { argv[0], "exec-chain", argv[2], argv[3], left, NULL };
	execv("/proc/self/exe", cargv);
	die("execv");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "exec-chain"))
		return exec_chain(argv);
	if (argc >= 4 && !strcmp(argv[1], "serve-exec"))
		return serve_exec(argv, false, false, false, false);
	if (argc >= 4 && !strcmp(argv[1], "serve-execfail"))
		return serve_exec(argv, true, false, false, false);
	if (argc >= 4 && !strcmp(argv[1], "serve-exec-nolib"))
		return serve_exec(argv, false, true, false, false);
	if (argc >= 4 && !strcmp(argv[1], "serve-fork-exec"))
		return serve_exec(argv, false, false, true, false);
	if (argc >= 4 && !strcmp(argv[1], "serve-fork-both"))
		return serve_fork_both(argv);
	if (argc >= 4 && !strcmp(argv[1], "serve-fork"))
		return serve_exec(argv, false, false, true, true);
	if (argc >= 4 && !strcmp(argv[1], "serve-daemon"))
		return serve_daemon(argv);
	if (argc >= 4 && !strcmp(argv[1], "serve-cloexec"))
		return serve_cloexec(argv);
	if (argc >= 4 && !strcmp(argv[1], "serve-listen-exec"))
		return serve_listen_exec(argv);
	if (argc >= 3 && !strcmp(argv[1], "child-accept"))
		return child_accept(argv);
	if (argc >= 4 && !strcmp(argv[1], "child"))
		return child(argv);
	if (argc >= 3 && !strcmp(argv[1], "child-closed"))
		return child_closed(argv);
	if (argc >= 5 && !strcmp(argv[1], "client"))
		return client(argv);
	if (argc >= 4 && !strcmp(argv[1], "client-eof"))
		return client_eof(argv);
	fprintf(stderr, "usage: see the comment at the top of tests/helpers/pl_exec.c\n");
	return 2;
}
