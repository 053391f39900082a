/* SPDX-License-Identifier: MIT */
/* A minimal ivshmem server (QEMU docs/specs/ivshmem-spec.rst, "The ivshmem Client-Server
 * Protocol") for the doorbell test: Debian 12's QEMU packages do not ship contrib/ivshmem-server.
 *
 * Usage: ivshmem_server --socket PATH --shm FILE [--vectors N]
 *
 * Listens on the UNIX socket PATH. Each client gets an id (0, 1, ...), N eventfds of its own,
 * and, in order: the protocol version 0; its id; -1 with the fd of FILE (the shared memory);
 * a connect notification (id repeated N times, one eventfd each) for every other client; its
 * own id N times with its own eventfds (interrupt setup). The other clients get the newcomer's
 * connect notification, and a disconnect notification (its id, no fd) when it goes. Every
 * message is one little-endian int64, the fd in SCM_RIGHTS. Prints "IVSHMEM-SERVER ready"
 * once listening and one line per client; runs until killed. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CLIENTS 16
#define MAX_VECTORS 8

struct client {
	int sock;             /* -1: free slot */
	int64_t id;
	int evfd[MAX_VECTORS];
};

static struct client clients[MAX_CLIENTS];
static int nvectors = 1;
static int shm_fd = -1;
static int64_t next_id;

/* One protocol message: VALUE as little-endian int64, FD (or -1: none) in SCM_RIGHTS. */
static int send_msg(int sock, int64_t value, int fd)
{
	uint8_t le[8];
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { le, sizeof(le) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)((uint64_t)value >> (8 * i));
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(le) ? 0 : -1;
}

static void drop_client(struct client *c)
{
	printf("IVSHMEM-SERVER client %lld left\n", (long long)c->id);
	fflush(stdout);
	close(c->sock);
	c->sock = -1;
	for (int v = 0; v < nvectors; v++)
		close(c->evfd[v]);
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i].sock >= 0)
			send_msg(clients[i].sock, c->id, -1);
}

/* Connect notification for PEER, sent to TO. */
static int announce(int to, const struct client *peer)
{
	for (int v = 0; v < nvectors; v++)
		if (send_msg(to, peer->id, peer->evfd[v]) < 0)
			return -1;
	return 0;
}

static void add_client(int sock)
{
	struct client *c = NULL;

	for (int i = 0; i < MAX_CLIENTS && c == NULL; i++)
		if (clients[i].sock < 0)
			c = &clients[i];
	if (c == NULL || next_id > 65535) {
		close(sock);
		return;
	}
	c->id = next_id++;
	for (int v = 0; v < nvectors; v++) {
		c->evfd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (c->evfd[v] < 0) {
			while (v-- > 0)
				close(c->evfd[v]);
			close(sock);
			return;
		}
	}
	c->sock = sock;
	int rc = send_msg(sock, 0, -1);              /* protocol version */
	rc = rc ? rc : send_msg(sock, c->id, -1);    /* the client's id */
	rc = rc ? rc : send_msg(sock, -1, shm_fd);   /* the shared memory */
	for (int i = 0; i < MAX_CLIENTS && rc == 0; i++)
		if (clients[i].sock >= 0 && &clients[i] != c)
			rc = announce(sock, &clients[i]);
	rc = rc ? rc : announce(sock, c);            /* interrupt set-up: its own eventfds */
	if (rc) {
		drop_client(c);
		return;
	}
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i].sock >= 0 && &clients[i] != c && announce(clients[i].sock, c) < 0)
			drop_client(&clients[i]);
	printf("IVSHMEM-SERVER client %lld joined\n", (long long)c->id);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "shm", required_argument, NULL, 'm' },
		{ "vectors", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock_path = NULL, *shm_path = NULL;
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock_path = optarg; break;
		case 'm': shm_path = optarg; break;
		case 'n': nvectors = atoi(optarg); break;
		default: return 2;
		}
	}
	if (sock_path == NULL || shm_path == NULL || nvectors < 1 || nvectors > MAX_VECTORS) {
		fprintf(stderr, "usage: ivshmem_server --socket PATH --shm FILE [--vectors 1..%d]\n",
			MAX_VECTORS);
		return 2;
	}
	shm_fd = open(shm_path, O_RDWR | O_CLOEXEC);
	if (shm_fd < 0) {
		fprintf(stderr, "ivshmem_server: %s: %s\n", shm_path, strerror(errno));
		return 1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(sock_path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "ivshmem_server: socket path too long\n");
		return 1;
	}
	strcpy(sa.sun_path, sock_path);
	int lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(sock_path);
	if (lsock < 0 || bind(lsock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lsock, 8) < 0) {
		fprintf(stderr, "ivshmem_server: %s: %s\n", sock_path, strerror(errno));
		return 1;
	}
	for (int i = 0; i < MAX_CLIENTS; i++)
		clients[i].sock = -1;
	printf("IVSHMEM-SERVER ready %s vectors=%d\n", sock_path, nvectors);
	fflush(stdout);
	for (;;) {
		struct pollfd pfd[MAX_CLIENTS + 1];
		int map[MAX_CLIENTS + 1], n = 0;

		pfd[n].fd = lsock;
		pfd[n].events = POLLIN;
		map[n++] = -1;
		for (int i = 0; i < MAX_CLIENTS; i++)
			if (clients[i].sock >= 0) {
				pfd[n].fd = clients[i].sock;
				pfd[n].events = POLLIN;
				map[n++] = i;
			}
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (int k = 1; k < n; k++) {
			if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[64];
			/* Clients send nothing: readable means end of file (or error). */
			if (recv(pfd[k].fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
				drop_client(&clients[map[k]]);
		}
		if (pfd[0].revents & POLLIN) {
			int s = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
			if (s >= 0)
				add_client(s);
		}
	}
}
