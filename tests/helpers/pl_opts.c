// SPDX-License-Identifier: MIT
/* Socket options around connection set-up, as a program sees them, for tests that run each
 * mode over kernel TCP and over ntb and compare (tests/integration/test_pl_opts_*.sh):
 *   pl_opts serve ADDR PORT            accept until killed; each connection (a thread): read to
 *                                      end of stream, then close
 *   pl_opts defer-race ADDR PORT N     one connection to settle the link, then N more; on each,
 *                                      two threads start at once: one reads TCP_DEFER_ACCEPT
 *                                      four times, the other sets it (3 s, then 7 s) and reads it
 *                                      back after each set. A read may give only 0 or a value
 *                                      the program set; the other thread's reads after its set
 *                                      and a last read after both ended give what it set last.
 *                                      Prints "armed A of N, bad B" (A: sockets whose kernel
 *                                      value was still the library's 1 before the race, read
 *                                      past the library); exit 1 when B > 0
 *   pl_opts listen-opts ADDR PORT [fork|backlog|early] listen, then set options on the
 *                                      listener (in a forked child with "fork": the listener is
 *                                      then shared; with "backlog" only once a connection waits
 *                                      in the backlog: it keeps the options it had; with
 *                                      "early" before listen() instead); accept one
 *                                      connection and print what the program sees of it:
 *                                      options, a recv with no data (SO_RCVTIMEO), then close
 *                                      it (SO_LINGER 0: a reset)
 *   pl_opts listen-opts-client ADDR PORT connect; recv (after 3 s without anything, send one
 *                                      byte and recv again); print how the recv ended
 *   pl_opts accept-nb ADDR PORT        blocking listener; accept4(SOCK_NONBLOCK) one connection,
 *                                      accept() a second; print each one's O_NONBLOCK, the
 *                                      listener's, and how a recv before the client's byte ends
 *   pl_opts accept-nb-client ADDR PORT two connections one after the other: connect, wait
 *                                      0.5 s, send one byte, read to end of stream
 *   pl_opts defer-exec ADDR PORT [nolib] one connection to settle the link, then another; print
 *                                      "armed K" (K: the kernel value read past the library),
 *                                      then exec self "defer-child FD" (with "nolib": without
 *                                      LD_PRELOAD)
 *   pl_opts defer-child FD             (run by exec) print "defer V" (getsockopt
 *                                      TCP_DEFER_ACCEPT on FD), send one byte, close
 *   pl_opts defer-fork ADDR PORT       one connection to settle the link, then two more, each
 *                                      shared by a fork: one process (the parent on the first
 *                                      connection, the child on the second) sets
 *                                      TCP_DEFER_ACCEPT to 3, the other then reads it and sets
 *                                      7, the first reads it; prints per connection "armed K"
 *                                      (as defer-exec) and the two reads */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sockaddr_in sa;

static void die(const char *what)
{
	fprintf(stderr, "pl_opts: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void set_listener_opts(int ls);

/* A listener on SA; with EARLY, set_listener_opts() before its listen(). */
static int listener_opts(bool early)
{
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);

	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	if (early)
		set_listener_opts(ls);
	if (listen(ls, 512) < 0)
		die("listen");
	return ls;
}

static int listener(void)
{
	return listener_opts(false);
}

static int connect_one(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	return fd;
}

/* --- serve ---------------------------------------------------------------------------------- */

static void *sink_one(void *arg)
{
	int fd = (int)(long)arg;
	char buf[4096];

	while (recv(fd, buf, sizeof(buf), 0) > 0)
		;
	close(fd);
	return NULL;
}

static int serve(void)
{
	int ls = listener();

	for (;;) {
		pthread_t t;
		int fd = accept(ls, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		if (pthread_create(&t, NULL, sink_one, (void *)(long)fd) != 0) {
			sink_one((void *)(long)fd);
			continue;
		}
		pthread_detach(t);
	}
	return 1;
}

/* --- TCP_DEFER_ACCEPT ----------------------------------------------------------------------- */

/* FD's TCP_DEFER_ACCEPT through the library (libc's getsockopt), or -1. */
static int defer_get(int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &l) < 0)
		return -1;
	return v;
}

/* The same read past the library (the system call itself): what the kernel holds now. */
static int defer_get_kernel(int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);

	if (syscall(SYS_getsockopt, fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &l) < 0)
		return -1;
	return v;
}

static int defer_set(int fd, int v)
{
	return setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof(v));
}

/* The values the race's setter uses; the kernel keeps the option as a count of SYN-ACK
 * retransmissions and reads it back in seconds, and these two come back unchanged (checked). */
#define DEFER_A 3
#define DEFER_B 7

struct race {
	int fd;
	unsigned conn;
	atomic_int ready;
	atomic_int bad;
	int last_set;
};

static void start_together(struct race *r)
{
	atomic_fetch_add(&r->ready, 1);
	while (atomic_load(&r->ready) < 2)
		;
}

static void race_bad(struct race *r, const char *who, int v, const char *want)
{
	fprintf(stderr, "connection %u: %s read %d, expected %s\n", r->conn, who, v, want);
	atomic_fetch_add(&r->bad, 1);
}

static void *race_reader(void *arg)
{
	struct race *r = arg;

	start_together(r);
	for (int k = 0; k < 4; k++) {
		int v = defer_get(r->fd);
		if (v != 0 && v != DEFER_A && v != DEFER_B)
			race_bad(r, "reader", v, "0, 3 or 7 (what the program set)");
	}
	return NULL;
}

static void *race_setter(void *arg)
{
	struct race *r = arg;
	const int vals[2] = { DEFER_A, DEFER_B };

	start_together(r);
	/* every other connection, the setter reads first too: two first reads race then */
	if (r->conn % 2) {
		int v = defer_get(r->fd);
		if (v != 0)
			race_bad(r, "setter before its set", v, "0");
	}
	for (int k = 0; k < 2; k++) {
		if (defer_set(r->fd, vals[k]) < 0) {
			fprintf(stderr, "connection %u: setsockopt: %s\n", r->conn, strerror(errno));
			atomic_fetch_add(&r->bad, 1);
			return NULL;
		}
		r->last_set = vals[k];
		int v = defer_get(r->fd);
		if (v != vals[k])
			race_bad(r, "setter after its set", v, k ? "7" : "3");
	}
	return NULL;
}

static int defer_race(unsigned n)
{
	unsigned armed = 0, bad = 0;
	int probe = socket(AF_INET, SOCK_STREAM, 0);

	/* the two values must read back as set on this kernel */
	if (probe < 0 || defer_set(probe, DEFER_A) < 0 || defer_get(probe) != DEFER_A ||
	    defer_set(probe, DEFER_B) < 0 || defer_get(probe) != DEFER_B) {
		fprintf(stderr, "pl_opts: TCP_DEFER_ACCEPT %d and %d do not read back as set\n",
			DEFER_A, DEFER_B);
		return 2;
	}
	close(probe);
	close(connect_one()); /* (the library reserves after the kernel connect from now on) */
	for (unsigned i = 0; i < n; i++) {
		struct race r = { .fd = connect_one(), .conn = i };
		pthread_t t1, t2;

		armed += defer_get_kernel(r.fd) == 1;
		if (pthread_create(&t1, NULL, race_reader, &r) != 0 ||
		    pthread_create(&t2, NULL, race_setter, &r) != 0)
			die("pthread_create");
		pthread_join(t1, NULL);
		pthread_join(t2, NULL);
		int v = defer_get(r.fd);
		if (v != r.last_set)
			race_bad(&r, "the last read", v, r.last_set == DEFER_A ? "3" : "7");
		bad += (unsigned)atomic_load(&r.bad);
		close(r.fd);
	}
	printf("armed %u of %u, bad %u\n", armed, n, bad);
	return bad ? 1 : 0;
}

static int defer_exec(const char *self, bool nolib)
{
	close(connect_one()); /* (the library reserves after the kernel connect from now on) */
	int fd = connect_one();
	char num[16];

	printf("armed %d\n", defer_get_kernel(fd));
	fflush(stdout);
	snprintf(num, sizeof(num), "%d", fd);
	if (nolib)
		unsetenv("LD_PRELOAD");
	execl(self, self, "defer-child", num, (char *)NULL);
	die("exec");
	return 2;
}

static int defer_child(int fd)
{
	int v = defer_get(fd);

	printf("defer %d\n", v);
	if (v < 0)
		printf("getsockopt: %s\n", strerror(errno));
	send(fd, "x", 1, MSG_NOSIGNAL); /* (a reset connection, without the library, fails) */
	close(fd);
	return 0;
}

static void wait_turn(int rfd)
{
	char c;

	if (read(rfd, &c, 1) != 1)
		die("read (turn)");
}

static void give_turn(int wfd)
{
	if (write(wfd, "t", 1) != 1)
		die("write (turn)");
}

/* One connection FD shared by a fork: the first process (the child when CHILD_FIRST) sets 3,
 * the second reads it and sets 7, the first reads that. */
static void defer_fork_one(int fd, bool child_first)
{
	int to_child[2], to_parent[2], st;

	if (pipe(to_child) < 0 || pipe(to_parent) < 0)
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	bool child = pid == 0;
	int rfd = child ? to_child[0] : to_parent[0], wfd = child ? to_parent[1] : to_child[1];
	const char *who = child ? "child" : "parent";
	if (child == child_first) {
		if (defer_set(fd, DEFER_A) < 0)
			die("setsockopt");
		give_turn(wfd);
		wait_turn(rfd);
		printf("%s (set 3 first) reads %d\n", who, defer_get(fd));
		give_turn(wfd);
	} else {
		wait_turn(rfd);
		printf("%s (second) reads %d\n", who, defer_get(fd));
		if (defer_set(fd, DEFER_B) < 0)
			die("setsockopt");
		give_turn(wfd);
		wait_turn(rfd);
	}
	fflush(stdout);
	if (child)
		_exit(0);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("child");
	close(to_child[0]), close(to_child[1]), close(to_parent[0]), close(to_parent[1]);
}

static int defer_fork(void)
{
	close(connect_one()); /* (the library reserves after the kernel connect from now on) */
	for (int k = 0; k < 2; k++) {
		int fd = connect_one();

		printf("armed %d\n", defer_get_kernel(fd));
		fflush(stdout);
		defer_fork_one(fd, k == 1);
		close(fd);
	}
	return 0;
}

/* --- listener options ----------------------------------------------------------------------- */

static void set_listener_opts(int ls)
{
	struct timeval rt = { .tv_usec = 200000 }, st = { .tv_sec = 1, .tv_usec = 500000 };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int one = 1, rcvbuf = 50000, idle = 77;

	if (setsockopt(ls, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0 ||
	    setsockopt(ls, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(ls, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
	    setsockopt(ls, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
	    setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt)) < 0 ||
	    setsockopt(ls, SOL_SOCKET, SO_SNDTIMEO, &st, sizeof(st)) < 0 ||
	    setsockopt(ls, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
		die("setsockopt on the listener");
}

static int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, level, name, &v, &l) < 0)
		return -1;
	return v;
}

/* How a recv on FD ended, as one word. */
static const char *recv_outcome(int fd, int flags)
{
	static char buf[64];
	char c;
	ssize_t n = recv(fd, &c, 1, flags);

	if (n > 0)
		return "data";
	if (n == 0)
		return "eof";
	snprintf(buf, sizeof(buf), "error %s", errno == EAGAIN ? "EAGAIN" : strerror(errno));
	return buf;
}

static int listen_opts(bool in_child, bool backlog, bool early)
{
	int ls = listener_opts(early);
	struct timeval tv;
	struct linger lg;
	socklen_t l;

	if (backlog) {
		struct pollfd p = { .fd = ls, .events = POLLIN };

		printf("listening\n");
		fflush(stdout);
		/* until the client's connection waits in the backlog */
		if (poll(&p, 1, 20000) != 1)
			die("poll (no connection)");
		set_listener_opts(ls);
	} else if (in_child) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			set_listener_opts(ls);
			_exit(0);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			return 2;
	} else if (!early) {
		set_listener_opts(ls);
	}
	if (!backlog)
		printf("listening\n");
	fflush(stdout);
	/* (SO_RCVTIMEO ends a waiting accept() too: wait on) */
	int fd;
	while ((fd = accept(ls, NULL, NULL)) < 0 && (errno == EAGAIN || errno == EINTR))
		;
	if (fd < 0)
		die("accept");
	printf("rcvbuf %d\n", get_int(fd, SOL_SOCKET, SO_RCVBUF));
	printf("nodelay %d\n", get_int(fd, IPPROTO_TCP, TCP_NODELAY));
	printf("keepalive %d\n", get_int(fd, SOL_SOCKET, SO_KEEPALIVE));
	printf("keepidle %d\n", get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE));
	l = sizeof(tv);
	if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) == 0)
		printf("rcvtimeo %ld.%06ld\n", (long)tv.tv_sec, (long)tv.tv_usec);
	l = sizeof(tv);
	if (getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) == 0)
		printf("sndtimeo %ld.%06ld\n", (long)tv.tv_sec, (long)tv.tv_usec);
	l = sizeof(lg);
	if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l) == 0)
		printf("linger %d %d\n", lg.l_onoff, lg.l_linger);
	printf("nonblock %d\n", !!(fcntl(fd, F_GETFL) & O_NONBLOCK));
	/* the client sends nothing for 3 s: SO_RCVTIMEO (0.2 s) ends this recv first */
	printf("recv %s\n", recv_outcome(fd, 0));
	fflush(stdout);
	close(fd); /* SO_LINGER 0: the client sees a reset */
	return 0;
}

static int listen_opts_client(void)
{
	struct timeval tv = { .tv_sec = 3 };
	int fd = connect_one();

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	const char *o = recv_outcome(fd, 0);
	if (!strcmp(o, "error EAGAIN")) {
		/* the server still waits for data: give it a byte, so that nobody hangs */
		printf("client: nothing in 3 s, sent a byte\n");
		send(fd, "x", 1, MSG_NOSIGNAL);
		o = recv_outcome(fd, 0);
	}
	printf("client recv %s\n", o);
	close(fd);
	return 0;
}

/* --- accept4(SOCK_NONBLOCK) ------------------------------------------------------------------ */

static void accept_nb_one(int ls, bool nb)
{
	int fd = nb ? accept4(ls, NULL, NULL, SOCK_NONBLOCK) : accept(ls, NULL, NULL);
	struct pollfd p;
	const char *w = nb ? "accept4-nonblock" : "accept";

	if (fd < 0)
		die("accept");
	printf("%s: fd nonblock %d, listener nonblock %d\n", w, !!(fcntl(fd, F_GETFL) & O_NONBLOCK),
	       !!(fcntl(ls, F_GETFL) & O_NONBLOCK));
	/* the client's byte comes 0.5 s after its connect: a blocking recv waits for it */
	const char *o = recv_outcome(fd, 0);
	printf("%s: first recv %s\n", w, o);
	if (!strcmp(o, "error EAGAIN")) {
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		poll(&p, 1, 10000);
		printf("%s: recv after poll %s\n", w, recv_outcome(fd, 0));
	}
	fflush(stdout);
	close(fd);
}

static int accept_nb(void)
{
	int ls = listener();

	printf("listening\n");
	fflush(stdout);
	accept_nb_one(ls, true);
	accept_nb_one(ls, false);
	return 0;
}

static int accept_nb_client(void)
{
	for (int k = 0; k < 2; k++) {
		int fd = connect_one();
		char buf[64];

		usleep(500000);
		if (send(fd, "x", 1, MSG_NOSIGNAL) != 1)
			die("send");
		while (recv(fd, buf, sizeof(buf), 0) > 0)
			;
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "defer-child"))
		return defer_child(atoi(argv[2]));
	if (argc < 4) {
		fprintf(stderr, "usage: pl_opts MODE ADDR PORT [ARG] (see the source)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1)
		return 2;
	const char *m = argv[1];
	if (!strcmp(m, "serve"))
		return serve();
	if (!strcmp(m, "defer-race") && argc == 5)
		return defer_race((unsigned)atoi(argv[4]));
	if (!strcmp(m, "defer-fork"))
		return defer_fork();
	if (!strcmp(m, "defer-exec"))
		return defer_exec(argv[0], argc == 5 && !strcmp(argv[4], "nolib"));
	if (!strcmp(m, "listen-opts"))
		return listen_opts(argc == 5 && !strcmp(argv[4], "fork"),
				   argc == 5 && !strcmp(argv[4], "backlog"),
				   argc == 5 && !strcmp(argv[4], "early"));
	if (!strcmp(m, "listen-opts-client"))
		return listen_opts_client();
	if (!strcmp(m, "accept-nb"))
		return accept_nb();
	if (!strcmp(m, "accept-nb-client"))
		return accept_nb_client();
	fprintf(stderr, "pl_opts: unknown mode %s\n", m);
	return 2;
}
