/* SPDX-License-Identifier: MIT */
/* Close-then-exit (run under libntbsock.so): a writer fills the connection until send() would
 * block, closes its socket and exits at once; the reader starts reading only later. With a
 * full queue the FIN cannot go out at close(): the writer's library must still send it before
 * the process is gone, so that the reader gets every byte and then end-of-file, as with a
 * kernel socket.
 *
 *   pl_close_exit writer ADDR PORT FLAG [exec]
 *     fills, closes, creates the file FLAG, then exits (exec: execs /bin/true instead);
 *     prints "SENT <bytes>" before it closes
 *   pl_close_exit reader ADDR PORT FLAG
 *     accepts one connection, waits until FLAG exists (the writer closed and is ending), reads
 *     to the end and prints "END reason=eof|reset|<error> rx=<bytes> bad=0|1" (bad: a byte
 *     off the pattern) */
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
#include <unistd.h>

static inline uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 7u + (i >> 9));
}

static int addr(const char *a, const char *port, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)atoi(port));
	return inet_pton(AF_INET, a, &sin->sin_addr) == 1 ? 0 : -1;
}

/* Send chunks of LEN until the queue is full (EAGAIN twice, 20 ms apart). */
static int fill(int fd, size_t len, uint64_t *off)
{
	static uint8_t buf[65536];
	int full = 0;

	while (full < 2) {
		for (size_t i = 0; i < len; i++)
			buf[i] = pat(*off + i);
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n > 0) {
			*off += (uint64_t)n;
			full = 0;
		} else if (n < 0 && errno == EAGAIN) {
			full++;
			usleep(20000);
		} else {
			perror("pl_close_exit: send");
			return -1;
		}
	}
	return 0;
}

static int writer(const struct sockaddr_in *sin, const char *flag, bool do_exec)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint64_t off = 0;

	if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof(*sin))) {
		perror("pl_close_exit: connect");
		return 1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	/* large writes fill the data ring, small ones then the inline ring */
	if (fill(fd, 65536, &off) || fill(fd, 1000, &off) || fill(fd, 64, &off))
		return 1;
	printf("SENT %llu\n", (unsigned long long)off);
	fflush(stdout);
	close(fd);
	int ff = open(flag, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

	if (ff < 0) {
		perror("pl_close_exit: flag");
		return 1;
	}
	close(ff);
	if (do_exec) {
		execl("/bin/true", "true", (char *)NULL);
		perror("pl_close_exit: exec /bin/true");
		return 1;
	}
	exit(0); /* at once: the FIN is still to be sent */
}

static int reader(const struct sockaddr_in *sin, const char *flag)
{
	static uint8_t buf[65536];
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), fd;
	uint64_t rx = 0;
	int bad = 0;
	const char *reason = "eof";

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (const struct sockaddr *)sin, sizeof(*sin)) || listen(l, 4)) {
		perror("pl_close_exit: listen");
		return 1;
	}
	fd = accept(l, NULL, NULL);
	if (fd < 0) {
		perror("pl_close_exit: accept");
		return 1;
	}
	/* not a byte read before the writer closed and is on its way out */
	for (int i = 0; i < 3000 && access(flag, F_OK) != 0; i++)
		usleep(10000);
	if (access(flag, F_OK) != 0) {
		fprintf(stderr, "pl_close_exit: no flag %s after 30 s\n", flag);
		return 1;
	}
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			reason = errno == ECONNRESET ? "reset" : strerror(errno);
			break;
		}
		for (ssize_t i = 0; i < n; i++)
			bad |= buf[i] != pat(rx + (uint64_t)i);
		rx += (uint64_t)n;
	}
	printf("END reason=%s rx=%llu bad=%d\n", reason, (unsigned long long)rx, bad);
	close(fd);
	close(l);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin;

	if (argc < 5 || addr(argv[2], argv[3], &sin)) {
		fprintf(stderr, "usage: pl_close_exit writer|reader ADDR PORT FLAG [exec]\n");
		return 64;
	}
	if (!strcmp(argv[1], "writer"))
		return writer(&sin, argv[4], argc > 5 && !strcmp(argv[5], "exec"));
	if (!strcmp(argv[1], "reader"))
		return reader(&sin, argv[4]);
	fprintf(stderr, "pl_close_exit: unknown mode %s\n", argv[1]);
	return 64;
}
