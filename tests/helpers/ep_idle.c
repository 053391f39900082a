// SPDX-License-Identifier: MIT
/* Events for idle connections of an epoll set: the client holds N connections in one set, all
 * idle (registered for input alone: ntbsock's shadow passes over them until their peer
 * publishes something), sleeps in epoll_wait, and prints what each wake-up reports:
 *   1. the server writes one byte on connection 37, 200 ms into the client's sleep;
 *   2. another thread of the client shuts connection 12 for reading (shutdown(SHUT_RD));
 *   3. the server closes connection 45;
 *   4. the server process ends without closing anything (_exit): every other connection ends.
 * The transcript is the same over kernel TCP and over ntbsock (test_pl_epoll_idle.sh). With
 * "et", the client registers each connection as nginx does (EPOLLIN | EPOLLOUT | EPOLLRDHUP |
 * EPOLLET) and first collects the EPOLLOUT edge of each.
 *   ep_idle server ADDR PORT     ep_idle client ADDR PORT [et] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define N 64

#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "ep_idle: FAILED: %s (errno %s): ", #cond,       \
				strerror(errno));                                        \
			fprintf(stderr, __VA_ARGS__);                                    \
			fprintf(stderr, "\n");                                           \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

static struct sockaddr_in addr_of(const char *a, const char *p)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(p)) };

	CHECK(inet_pton(AF_INET, a, &sa.sin_addr) == 1, "address %s", a);
	return sa;
}

/* Server: accept N connections (each first sends its index), then obey commands on
 * connection 0: 'W' write a byte on 37, 'C' close 45, 'K' exit without closing; each after
 * 200 ms (the client sleeps in epoll_wait by then). */
static void server(const struct sockaddr_in *sa)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1, fd[N];

	CHECK(ls >= 0, "socket");
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(bind(ls, (const struct sockaddr *)sa, sizeof(*sa)) == 0, "bind");
	CHECK(listen(ls, N) == 0, "listen");
	for (int i = 0; i < N; i++) {
		int c = accept(ls, NULL, NULL);
		unsigned char k;

		CHECK(c >= 0, "accept");
		CHECK(read(c, &k, 1) == 1 && k < N, "index");
		fd[k] = c;
	}
	for (;;) {
		char cmd;

		CHECK(read(fd[0], &cmd, 1) == 1, "command");
		usleep(200 * 1000);
		if (cmd == 'W')
			CHECK(write(fd[37], "x", 1) == 1, "write 37");
		else if (cmd == 'C')
			close(fd[45]);
		else if (cmd == 'K')
			_exit(0);
	}
}

static void *shut_later(void *arg)
{
	usleep(200 * 1000);
	CHECK(shutdown(*(int *)arg, SHUT_RD) == 0, "shutdown");
	return NULL;
}

static int ep, fd[N];
static int ended[N];
static int et;

/* One epoll_wait (up to 10 s): print what it reported, as "tag: i EVENTS ...". */
static int wait_print(const char *tag, struct epoll_event *evs)
{
	int n = epoll_wait(ep, evs, N, 10000);

	CHECK(n >= 0, "epoll_wait");
	printf("%s:", tag);
	for (int i = 0; i < n; i++)
		printf(" %u%s%s%s%s%s", evs[i].data.u32, evs[i].events & EPOLLIN ? " IN" : "",
		       evs[i].events & EPOLLOUT ? " OUT" : "",
		       evs[i].events & EPOLLRDHUP ? " RDHUP" : "",
		       evs[i].events & EPOLLHUP ? " HUP" : "", evs[i].events & EPOLLERR ? " ERR" : "");
	printf("\n");
	fflush(stdout);
	return n;
}

static void client(const struct sockaddr_in *sa)
{
	struct epoll_event evs[N];
	char b;

	ep = epoll_create1(0);
	CHECK(ep >= 0, "epoll_create1");
	for (int i = 0; i < N; i++) {
		unsigned char k = (unsigned char)i;

		fd[i] = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fd[i] >= 0, "socket");
		CHECK(connect(fd[i], (const struct sockaddr *)sa, sizeof(*sa)) == 0, "connect %d", i);
		CHECK(write(fd[i], &k, 1) == 1, "index");
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
		if (et)
			ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev) == 0, "add %d", i);
	}
	if (et) {
		/* each connection's first EPOLLOUT edge */
		int outs = 0;

		while (outs < N) {
			int n = epoll_wait(ep, evs, N, 10000);

			CHECK(n > 0, "first edges: %d of %d", outs, N);
			for (int i = 0; i < n; i++)
				CHECK(evs[i].events == EPOLLOUT, "first edge of %u: %#x", evs[i].data.u32,
				      evs[i].events);
			outs += n;
		}
		printf("first edges: %d OUT\n", outs);
	}
	/* idle: nothing to report (and the shadow learns that every entry is idle) */
	for (int i = 0; i < 3; i++)
		CHECK(epoll_wait(ep, evs, N, 100) == 0, "idle set reports something");
	printf("idle: %d connections\n", N);

	/* 1: data on 37 */
	CHECK(write(fd[0], "W", 1) == 1, "W");
	CHECK(wait_print("data", evs) == 1 && evs[0].data.u32 == 37, "only 37");
	CHECK(read(fd[37], &b, 1) == 1 && b == 'x', "read 37");
	CHECK(epoll_wait(ep, evs, N, 100) == 0, "idle again");

	/* 2: our own shutdown(SHUT_RD) of 12, from another thread */
	pthread_t t;
	CHECK(pthread_create(&t, NULL, shut_later, &fd[12]) == 0, "thread");
	CHECK(wait_print("shutdown", evs) == 1 && evs[0].data.u32 == 12, "only 12");
	pthread_join(t, NULL);
	CHECK(read(fd[12], &b, 1) == 0, "read 12 after SHUT_RD");
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd[12], NULL) == 0, "del 12");
	ended[12] = 1;

	/* 3: the server closes 45 */
	CHECK(write(fd[0], "C", 1) == 1, "C");
	CHECK(wait_print("close", evs) == 1 && evs[0].data.u32 == 45, "only 45");
	CHECK(read(fd[45], &b, 1) == 0, "end of 45");
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd[45], NULL) == 0, "del 45");
	ended[45] = 1;

	/* 4: the server process ends: every other connection ends (in one or more wake-ups) */
	CHECK(write(fd[0], "K", 1) == 1, "K");
	int left = N - 2;
	while (left > 0) {
		int n = epoll_wait(ep, evs, N, 10000);

		CHECK(n > 0, "epoll_wait after the server's exit: %d left", left);
		for (int i = 0; i < n; i++) {
			unsigned k = evs[i].data.u32;
			ssize_t r = read(fd[k], &b, 1);

			CHECK(r == 0, "connection %u after the server's exit: %zd", k, r);
			CHECK(!ended[k], "connection %u reported twice", k);
			CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd[k], NULL) == 0, "del %u", k);
			ended[k] = 1;
			left--;
		}
	}
	printf("exit: %d connections ended\n", N - 2);
	for (int i = 0; i < N; i++)
		close(fd[i]);
	close(ep);
}

int main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "et"))) {
		fprintf(stderr, "usage: ep_idle server|client ADDR PORT [et]\n");
		return 2;
	}
	et = argc == 5;
	struct sockaddr_in sa = addr_of(argv[2], argv[3]);

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "server"))
		server(&sa);
	else if (!strcmp(argv[1], "client"))
		client(&sa);
	else
		return 2;
	return 0;
}
