// SPDX-License-Identifier: MIT
/* Socket I/O through io_uring (liburing), for test_pl_uring: a process whose sends, receives
 * and accepts bypass the C library.
 *
 *   uring_io client ADDR PORT BYTES HOW WHEN
 *       connects with connect(2), sends BYTES of a pattern through the ring (IORING_OP_SEND,
 *       64 KiB each), reads the echo through the ring (IORING_OP_RECV) and checks it, then
 *       closes. HOW: "liburing" (io_uring_queue_init()) or "raw" (the io_uring_setup system
 *       call through syscall(), then io_uring_queue_mmap()); "files": a liburing ring that
 *       writes to a pipe only, the socket's I/O through send(2)/recv(2); "fail": two set-ups
 *       the kernel refuses, the socket's I/O through the C library. WHEN: "before" (the
 *       ring is made before connect()) or "after" (after it, the connection then open).
 *   uring_io server PORT COUNT HOW [WHEN]
 *       makes the ring, listens on 0.0.0.0:PORT with listen(2), then accepts COUNT connections
 *       one after the other through the ring (IORING_OP_ACCEPT) and echoes each through it
 *       until the client's end of stream. WHEN "after": listens first, then makes the ring;
 *       "fork": listens, makes a ring, forks, and the child makes its own ring and serves;
 *       "fork-child": listens and forks without a ring, the child makes one and serves.
 * Prints "ok BYTES" (client) or "served COUNT" (server); exits 2 on corrupt bytes, 1 on
 * errors (with the failing step). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK 65536

static struct io_uring ring;

static void die(const char *step, int err)
{
	fprintf(stderr, "uring_io: %s: %s\n", step, strerror(err));
	exit(1);
}

static void ring_make(const char *how)
{
	int r;

	if (!strcmp(how, "fail")) {
		struct io_uring_params p;

		/* a probe the kernel refuses (no entries), both ways: nothing is made */
		memset(&p, 0, sizeof(p));
		if (io_uring_queue_init(0, &ring, 0) >= 0 ||
		    syscall(__NR_io_uring_setup, 0, &p) >= 0 || errno != EINVAL)
			die("a refused ring", EEXIST);
		return;
	}
	if (!strcmp(how, "files")) {
		struct io_uring_sqe *sqe;
		struct io_uring_cqe *cqe;
		int pfd[2];

		if (pipe(pfd) < 0)
			die("pipe", errno);
		r = io_uring_queue_init(8, &ring, 0);
		if (r < 0)
			die("ring", -r);
		sqe = io_uring_get_sqe(&ring);
		io_uring_prep_write(sqe, pfd[1], "file", 4, 0);
		io_uring_submit(&ring);
		r = io_uring_wait_cqe(&ring, &cqe);
		if (r < 0 || cqe->res != 4)
			die("ring write", r < 0 ? -r : EIO);
		io_uring_cqe_seen(&ring, cqe);
		return;
	}
	if (!strcmp(how, "raw")) {
		struct io_uring_params p;
		int fd;

		memset(&p, 0, sizeof(p));
		fd = (int)syscall(__NR_io_uring_setup, 8, &p);
		if (fd < 0)
			die("io_uring_setup", errno);
		r = io_uring_queue_mmap(fd, &p, &ring);
		/* (io_uring_queue_init() also maps each submission slot to its entry; this
		 * liburing's io_uring_queue_mmap() leaves that to the caller) */
		for (unsigned i = 0; r == 0 && i < *ring.sq.kring_entries; i++)
			ring.sq.array[i] = i;
	} else {
		r = io_uring_queue_init(8, &ring, 0);
	}
	if (r < 0)
		die("ring", -r);
}

static bool libc_io; /* "files": the socket's I/O through the C library */

/* One operation through the ring (or the C library's send/recv): its result (bytes, fd, or
 * -errno). */
static int ring_op(int op, int fd, void *buf, size_t len)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int r;

	if (libc_io && op != IORING_OP_ACCEPT) {
		ssize_t n = op == IORING_OP_SEND ? send(fd, buf, len, 0) : recv(fd, buf, len, 0);

		return n < 0 ? -errno : (int)n;
	}
	sqe = io_uring_get_sqe(&ring);
	if (!sqe)
		die("get_sqe", EBUSY);
	if (op == IORING_OP_SEND)
		io_uring_prep_send(sqe, fd, buf, len, 0);
	else if (op == IORING_OP_RECV)
		io_uring_prep_recv(sqe, fd, buf, len, 0);
	else
		io_uring_prep_accept(sqe, fd, NULL, NULL, 0);
	r = io_uring_submit(&ring);
	if (r < 0)
		die("submit", -r);
	r = io_uring_wait_cqe(&ring, &cqe);
	if (r < 0)
		die("wait_cqe", -r);
	r = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	return r;
}

static unsigned char pat(size_t i)
{
	return (unsigned char)(i * 131u + (i >> 12) * 7u + 1u);
}

static int client(const char *addr, int port, size_t bytes, const char *how, const char *when)
{
	static unsigned char buf[CHUNK];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	size_t sent = 0, got = 0;
	int fd, r;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		die("address", EINVAL);
	libc_io = !strcmp(how, "files") || !strcmp(how, "fail");
	if (!strcmp(when, "before"))
		ring_make(how);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect", errno);
	if (strcmp(when, "before"))
		ring_make(how);
	/* sends and receives alternate, so that neither side's buffers fill */
	while (got < bytes) {
		if (sent < bytes) {
			size_t n = bytes - sent < CHUNK ? bytes - sent : CHUNK;

			for (size_t i = 0; i < n; i++)
				buf[i] = pat(sent + i);
			r = ring_op(IORING_OP_SEND, fd, buf, n);
			if (r <= 0)
				die("send", r < 0 ? -r : EPIPE);
			sent += (size_t)r;
		}
		r = ring_op(IORING_OP_RECV, fd, buf, sent - got < CHUNK ? sent - got : CHUNK);
		if (r < 0)
			die("recv", -r);
		if (r == 0) {
			fprintf(stderr, "uring_io: end of stream after %zu of %zu bytes\n", got, bytes);
			return 2;
		}
		for (int i = 0; i < r; i++)
			if (buf[i] != pat(got + (size_t)i)) {
				fprintf(stderr, "uring_io: byte %zu differs (%u, not %u; sent %zu)\n",
					got + (size_t)i, buf[i], pat(got + (size_t)i), sent);
				return 2;
			}
		got += (size_t)r;
	}
	close(fd);
	printf("ok %zu\n", got);
	return 0;
}

static int server(int port, int count, const char *how, const char *when)
{
	static unsigned char buf[CHUNK];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, l;

	if (!strcmp(when, "before"))
		ring_make(how);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 16) < 0)
		die("listen", errno);
	if (!strcmp(when, "after") || !strcmp(when, "fork"))
		ring_make(how);
	if (!strcmp(when, "fork") || !strcmp(when, "fork-child")) {
		int st;
		pid_t pid = fork();

		if (pid < 0)
			die("fork", errno);
		if (pid > 0) {
			if (waitpid(pid, &st, 0) < 0)
				die("waitpid", errno);
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		}
		if (!strcmp(when, "fork"))
			io_uring_queue_exit(&ring);
		ring_make(how);
	}
	printf("listening\n");
	fflush(stdout);
	for (int k = 0; k < count; k++) {
		int c = ring_op(IORING_OP_ACCEPT, l, NULL, 0), r;

		if (c < 0)
			die("accept", -c);
		while ((r = ring_op(IORING_OP_RECV, c, buf, sizeof(buf))) > 0)
			for (int off = 0; off < r;) {
				int w = ring_op(IORING_OP_SEND, c, buf + off, (size_t)(r - off));

				if (w <= 0)
					die("send", w < 0 ? -w : EPIPE);
				off += w;
			}
		if (r < 0)
			die("recv", -r);
		close(c);
	}
	printf("served %d\n", count);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10), argv[5], argv[6]);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), atoi(argv[3]), argv[4], argc == 6 ? argv[5] : "before");
	fprintf(stderr, "usage: uring_io client ADDR PORT BYTES liburing|raw|files before|after\n"
			"       uring_io server PORT COUNT liburing|raw [before|after|fork|fork-child]\n");
	return 1;
}
