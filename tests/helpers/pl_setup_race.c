// SPDX-License-Identifier: MIT
/* Many short connections, each carrying a known payload both ways, for the set-up race test
 * (both ends of a connection must take the same path, ntb or tcp):
 *   pl_setup_race server ADDR PORT         accept until killed; each connection (a thread):
 *                                          read to end of stream, echo it back, close
 *   pl_setup_race client ADDR PORT COUNT   COUNT connections one after the other: send
 *                                          PL_RACE_LEN bytes (connection number and a pattern),
 *                                          shut down writing, read the echo to end of stream
 *                                          and compare; prints "OK BAD"
 *   pl_setup_race both ADDR PORT COUNT     a server thread and the client in one process
 * Every read gives up after 5 s (a connection whose ends disagree reads nothing). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define PL_RACE_LEN 200

static struct sockaddr_in sa;

static void rcv_timeout(int fd)
{
	struct timeval tv = { .tv_sec = 5 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Read to end of stream (at most CAP bytes); the count, or -1 on an error or a timeout. */
static long read_all(int fd, unsigned char *buf, size_t cap)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = recv(fd, buf + n, cap - n, 0);

		if (r == 0)
			return (long)n;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		n += (size_t)r;
		if (n == cap)
			return (long)n;
	}
}

static void *serve_one(void *arg)
{
	int fd = (int)(long)arg;
	unsigned char buf[2 * PL_RACE_LEN];
	long n;

	rcv_timeout(fd);
	n = read_all(fd, buf, sizeof(buf));
	if (n < 0)
		fprintf(stderr, "server fd %d: read: %s\n", fd, strerror(errno));
	else if (n != PL_RACE_LEN)
		fprintf(stderr, "server fd %d: read %ld bytes, expected %d\n", fd, n, PL_RACE_LEN);
	if (n > 0 && send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
		fprintf(stderr, "server fd %d: send: %s\n", fd, strerror(errno));
	close(fd);
	return NULL;
}

static void *serve(void *arg)
{
	int ls = (int)(long)arg;

	for (;;) {
		pthread_t t;
		int fd = accept(ls, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("pl_setup_race: accept");
			exit(1);
		}
		if (pthread_create(&t, NULL, serve_one, (void *)(long)fd) != 0) {
			serve_one((void *)(long)fd);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

static int listener(void)
{
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);

	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 512) < 0) {
		perror("pl_setup_race: listen");
		exit(1);
	}
	return ls;
}

/* One connection: true when the echo is exactly what was sent. */
static int one_conn(unsigned i)
{
	unsigned char out[PL_RACE_LEN], in[2 * PL_RACE_LEN];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	long n;

	for (unsigned k = 0; k < sizeof(out); k++)
		out[k] = (unsigned char)(i * 131u + k * 7u);
	memcpy(out, &i, sizeof(i));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "client %u: connect: %s\n", i, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rcv_timeout(fd);
	if (send(fd, out, sizeof(out), MSG_NOSIGNAL) != (ssize_t)sizeof(out) ||
	    shutdown(fd, SHUT_WR) < 0) {
		fprintf(stderr, "client %u: send: %s\n", i, strerror(errno));
		close(fd);
		return 0;
	}
	n = read_all(fd, in, sizeof(in));
	close(fd);
	if (n != (long)sizeof(out) || memcmp(in, out, sizeof(out))) {
		fprintf(stderr, "client %u: echo of %ld bytes%s%s\n", i, n,
			n < 0 ? ": " : "", n < 0 ? strerror(errno) : " differs");
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	unsigned count = 0, ok = 0;

	if (argc < 4 || (strcmp(argv[1], "server") && argc < 5)) {
		fprintf(stderr, "usage: pl_setup_race server|client|both ADDR PORT [COUNT]\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1)
		return 2;
	if (!strcmp(argv[1], "server")) {
		serve((void *)(long)listener());
		return 1;
	}
	if (!strcmp(argv[1], "both")) {
		pthread_t t;

		if (pthread_create(&t, NULL, serve, (void *)(long)listener()) != 0)
			return 1;
	}
	count = (unsigned)atoi(argv[4]);
	for (unsigned i = 0; i < count; i++)
		ok += one_conn(i);
	printf("%u %u\n", ok, count - ok);
	return ok == count ? 0 : 1;
}
