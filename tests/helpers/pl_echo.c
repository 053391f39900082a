// SPDX-License-Identifier: MIT
/* Echo servers and a many-connection client for preload/ tests.
 *   pl_echo et ADDR PORT                  non-blocking edge-triggered epoll server (one thread)
 *   pl_echo dropet ADDR PORT USER         become USER as a daemon started as root does
 *                                         (setgroups, setgid, setuid; memcached -u), say
 *                                         "uid N", then serve as et (socket, bind and listen
 *                                         only after the change, as memcached does)
 *   pl_echo fork ADDR PORT                accept → fork → parent closes → child serves
 *   pl_echo prefork ADDR PORT N           N pre-forked workers accepting on one listener
 *   pl_echo client ADDR PORT NCONN BYTES  NCONN non-blocking connects at once, driven by poll;
 *                                         each sends BYTES of its own pattern and must read
 *                                         them back exactly; exit 0 when all did.
 *   pl_echo eclient ADDR PORT NCONN BYTES the same, each socket in an edge-triggered epoll set
 *                                         before connect() (as nginx and Go do)
 *   pl_echo dupdrain ADDR PORT [dup2|range]
 *                                         accept one connection, move it to another descriptor
 *                                         (F_DUPFD, then close the accepted one; with "dup2",
 *                                         dup2() another socket onto the accepted one instead
 *                                         of closing it; with "range", close_range() from the
 *                                         accepted one up to the new one's predecessor), read
 *                                         until end of stream or an error, say which, exit 0
 * Servers run until killed (the fork servers exit with the test's timeout). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "pl_echo: %s: %s\n", what, strerror(errno));
	exit(1);
}

static struct sockaddr_in addr_of(const char *a, const char *p)
{
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(p));
	if (inet_pton(AF_INET, a, &sa.sin_addr) != 1)
		die("address");
	return sa;
}

static int listener(struct sockaddr_in *sa, bool nonblock)
{
	int one = 1;
	int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (s < 0)
		die("socket");
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)sa, sizeof(*sa)) < 0)
		die("bind");
	if (listen(s, 1024) < 0)
		die("listen");
	return s;
}

/* Blocking echo of one connection until EOF. */
static void serve_blocking(int c)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(c, buf, sizeof(buf));
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		for (ssize_t o = 0; o < n;) {
			ssize_t w = write(c, buf + o, (size_t)(n - o));
			if (w < 0)
				die("write");
			o += w;
		}
	}
	close(c);
}

/* --- edge-triggered epoll server ------------------------------------------------------------ */

struct econn {
	int fd;
	char buf[16384];
	size_t len, off;     /* pending echo bytes buf[off..len) */
	bool eof;
};

static void et_close(int ep, struct econn *e)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, e->fd, NULL);
	close(e->fd);
	free(e);
}

/* Read and write until EAGAIN (the edge-triggered contract). Returns false when closed. */
static bool et_pump(int ep, struct econn *e)
{
	for (;;) {
		while (e->off < e->len) {
			ssize_t w = write(e->fd, e->buf + e->off, e->len - e->off);
			if (w < 0) {
				if (errno == EAGAIN)
					return true; /* EPOLLOUT edge will call us again */
				et_close(ep, e);
				return false;
			}
			e->off += (size_t)w;
		}
		e->off = e->len = 0;
		if (e->eof) {
			et_close(ep, e);
			return false;
		}
		ssize_t n = read(e->fd, e->buf, sizeof(e->buf));
		if (n < 0) {
			if (errno == EAGAIN)
				return true;
			et_close(ep, e);
			return false;
		}
		if (n == 0)
			e->eof = true;
		e->len = (size_t)n;
	}
}

static _Noreturn void run_et(struct sockaddr_in *sa)
{
	int l = listener(sa, true);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = NULL };
	struct epoll_event evs[64];

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) < 0)
		die("epoll");
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			if (!evs[i].data.ptr) {
				for (;;) {
					int c = accept4(l, NULL, NULL, SOCK_NONBLOCK);
					if (c < 0) {
						if (errno != EAGAIN && errno != EINTR)
							die("accept4");
						break;
					}
					struct econn *e = calloc(1, sizeof(*e));
					if (!e)
						die("calloc");
					e->fd = c;
					struct epoll_event ce = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP |
										EPOLLET,
								  .data.ptr = e };
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) < 0)
						die("epoll_ctl conn");
					et_pump(ep, e);
				}
				continue;
			}
			et_pump(ep, evs[i].data.ptr);
		}
	}
}

/* --- fork servers ------------------------------------------------------------------------------- */

static _Noreturn void run_fork(struct sockaddr_in *sa)
{
	int l = listener(sa, false);
	signal(SIGCHLD, SIG_IGN); /* no zombies */
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		pid_t p = fork();
		if (p < 0)
			die("fork");
		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			close(l);
			serve_blocking(c);
			_exit(0);
		}
		close(c); /* the child owns the connection now */
	}
}

static int run_prefork(struct sockaddr_in *sa, int workers)
{
	int l = listener(sa, false);
	for (int i = 0; i < workers; i++) {
		pid_t p = fork();
		if (p < 0)
			die("fork");
		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGTERM); /* die with the parent the test kills */
			for (;;) {
				int c = accept(l, NULL, NULL);
				if (c < 0) {
					if (errno == EINTR)
						continue;
					die("accept");
				}
				serve_blocking(c);
			}
		}
	}
	close(l);
	for (;;) {
		if (wait(NULL) < 0 && errno == ECHILD)
			return 1;
	}
}

/* --- client --------------------------------------------------------------------------------------- */

struct cconn {
	int fd;
	size_t sent, got;
	bool connected, done;
};

static unsigned char pat(int id, size_t i) { return (unsigned char)(i * 7 + (size_t)id * 13 + (i >> 9)); }

static int run_client(struct sockaddr_in *sa, int nconn, size_t bytes)
{
	struct cconn *cs = calloc((size_t)nconn, sizeof(*cs));
	struct pollfd *p = calloc((size_t)nconn, sizeof(*p));
	unsigned char buf[16384];
	int left = nconn;

	if (!cs || !p)
		die("calloc");
	for (int i = 0; i < nconn; i++) {
		cs[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (cs[i].fd < 0)
			die("socket");
		if (connect(cs[i].fd, (struct sockaddr *)sa, sizeof(*sa)) == 0)
			cs[i].connected = true;
		else if (errno != EINPROGRESS)
			die("connect");
	}
	while (left > 0) {
		for (int i = 0; i < nconn; i++) {
			p[i].fd = cs[i].done ? -1 : cs[i].fd;
			p[i].events = POLLIN | (cs[i].connected && cs[i].sent == bytes ? 0 : POLLOUT);
			p[i].revents = 0;
		}
		int n = poll(p, (nfds_t)nconn, 20000);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (n == 0) {
			fprintf(stderr, "pl_echo: client stalled with %d connections left\n", left);
			return 1;
		}
		for (int i = 0; i < nconn; i++) {
			struct cconn *c = &cs[i];
			if (c->done || !p[i].revents)
				continue;
			if (!c->connected) {
				int err = 0;
				socklen_t el = sizeof(err);
				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
				if (err) {
					errno = err;
					die("non-blocking connect");
				}
				c->connected = true;
			}
			while (c->sent < bytes) {
				size_t k = bytes - c->sent < sizeof(buf) ? bytes - c->sent : sizeof(buf);
				for (size_t j = 0; j < k; j++)
					buf[j] = pat(i, c->sent + j);
				ssize_t w = send(c->fd, buf, k, MSG_NOSIGNAL);
				if (w < 0) {
					if (errno == EAGAIN)
						break;
					die("send");
				}
				c->sent += (size_t)w;
			}
			for (;;) {
				ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
				if (r < 0) {
					if (errno == EAGAIN)
						break;
					die("recv");
				}
				if (r == 0) {
					fprintf(stderr, "pl_echo: conn %d: EOF after %zu of %zu\n", i, c->got,
						bytes);
					return 1;
				}
				for (ssize_t j = 0; j < r; j++)
					if (buf[j] != pat(i, c->got + (size_t)j)) {
						fprintf(stderr, "pl_echo: conn %d: byte %zu differs\n", i,
							c->got + (size_t)j);
						return 1;
					}
				c->got += (size_t)r;
			}
			if (c->got == bytes) {
				close(c->fd);
				c->done = true;
				left--;
			}
		}
	}
	printf("pl_echo: %d connections x %zu bytes echoed exactly\n", nconn, bytes);
	return 0;
}

/* Like run_client, the way nginx and Go do it: each socket joins an edge-triggered epoll set
 * BEFORE connect(), and is driven by epoll events alone. */
static bool drive(struct cconn *c, int i, size_t bytes, unsigned char *buf, size_t blen)
{
	while (c->sent < bytes) {
		size_t k = bytes - c->sent < blen ? bytes - c->sent : blen;
		for (size_t j = 0; j < k; j++)
			buf[j] = pat(i, c->sent + j);
		ssize_t w = send(c->fd, buf, k, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN)
				break;
			die("send");
		}
		c->sent += (size_t)w;
	}
	for (;;) {
		ssize_t r = recv(c->fd, buf, blen, 0);
		if (r < 0) {
			if (errno == EAGAIN)
				break;
			die("recv");
		}
		if (r == 0) {
			fprintf(stderr, "pl_echo: conn %d: EOF after %zu of %zu\n", i, c->got, bytes);
			exit(1);
		}
		for (ssize_t j = 0; j < r; j++)
			if (buf[j] != pat(i, c->got + (size_t)j)) {
				fprintf(stderr, "pl_echo: conn %d: byte %zu differs\n", i, c->got + (size_t)j);
				exit(1);
			}
		c->got += (size_t)r;
	}
	return c->got == bytes;
}

static int run_eclient(struct sockaddr_in *sa, int nconn, size_t bytes)
{
	struct cconn *cs = calloc((size_t)nconn, sizeof(*cs));
	unsigned char buf[16384];
	struct epoll_event evs[64];
	int left = nconn;
	int ep = epoll_create1(0);

	if (!cs || ep < 0)
		die("setup");
	for (int i = 0; i < nconn; i++) {
		cs[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (cs[i].fd < 0)
			die("socket");
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					  .data.u32 = (uint32_t)i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev) < 0)
			die("epoll_ctl before connect");
		if (connect(cs[i].fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 && errno != EINPROGRESS)
			die("connect");
	}
	while (left > 0) {
		int n = epoll_wait(ep, evs, 64, 20000);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		if (n == 0) {
			fprintf(stderr, "pl_echo: eclient stalled with %d connections left\n", left);
			return 1;
		}
		for (int k = 0; k < n; k++) {
			int i = (int)evs[k].data.u32;
			struct cconn *c = &cs[i];
			if (c->done)
				continue;
			if (evs[k].events & EPOLLERR) {
				int err = 0;
				socklen_t el = sizeof(err);
				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
				errno = err;
				die("connect (EPOLLERR)");
			}
			if (drive(c, i, bytes, buf, sizeof(buf))) {
				close(c->fd);
				c->done = true;
				left--;
			}
		}
	}
	printf("pl_echo: %d connections x %zu bytes echoed exactly (epoll before connect)\n", nconn,
	       bytes);
	return 0;
}

/* One connection, read through a duplicate of the accepted descriptor only. */
static int run_dupdrain(struct sockaddr_in *sa, const char *how)
{
	bool over = how && strcmp(how, "dup2") == 0, range = how && strcmp(how, "range") == 0;
	int l = listener(sa, false), c = accept(l, NULL, NULL), d;
	char buf[65536];
	unsigned long long total = 0;

	if (c < 0)
		die("accept");
	d = fcntl(c, F_DUPFD, c + 20);
	if (d < 0)
		die("F_DUPFD");
	if (over) {
		int x = socket(AF_INET, SOCK_DGRAM, 0);

		if (x < 0 || dup2(x, c) != c)
			die("dup2");
		close(x); /* C stays open, now another socket */
	} else if (range) {
		if (close_range((unsigned)c, (unsigned)d - 1, 0) != 0)
			die("close_range");
	} else {
		close(c);
	}
	printf("pl_echo: reading on fd %d (accepted as %d)\n", d, c);
	fflush(stdout);
	for (;;) {
		ssize_t n = read(d, buf, sizeof(buf));

		if (n > 0) {
			total += (unsigned long long)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			printf("pl_echo: end of stream after %llu bytes\n", total);
		else
			printf("pl_echo: %s after %llu bytes\n", strerror(errno), total);
		return 0;
	}
}

/* Give up root for USER's uid and gid, with no supplementary groups but USER's gid. */
static void become(const char *user)
{
	struct passwd *pw = getpwnam(user);

	if (!pw)
		die("getpwnam");
	if (setgroups(1, &pw->pw_gid) < 0)
		die("setgroups");
	if (setgid(pw->pw_gid) < 0)
		die("setgid");
	if (setuid(pw->pw_uid) < 0)
		die("setuid");
	if (pw->pw_uid != 0 && setuid(0) == 0) {
		errno = EPERM;
		die("root regained after setuid");
	}
	printf("uid %u gid %u\n", (unsigned)getuid(), (unsigned)getgid());
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: pl_echo et|dropet|fork|prefork|client|eclient|dupdrain ADDR PORT [...]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_in sa = addr_of(argv[2], argv[3]);
	if (!strcmp(argv[1], "et"))
		run_et(&sa);
	if (!strcmp(argv[1], "dropet") && argc == 5) {
		become(argv[4]);
		run_et(&sa);
	}
	if (!strcmp(argv[1], "fork"))
		run_fork(&sa);
	if (!strcmp(argv[1], "prefork") && argc == 5)
		return run_prefork(&sa, atoi(argv[4]));
	if (!strcmp(argv[1], "eclient") && argc == 6)
		return run_eclient(&sa, atoi(argv[4]), (size_t)atol(argv[5]));
	if (!strcmp(argv[1], "dupdrain"))
		return run_dupdrain(&sa, argc == 5 ? argv[4] : NULL);
	if (!strcmp(argv[1], "client") && argc == 6)
		return run_client(&sa, atoi(argv[4]), (size_t)atol(argv[5]));
	fprintf(stderr, "pl_echo: bad arguments\n");
	return 2;
}
