/* SPDX-License-Identifier: MIT */
/* A host process as a peer of an ivshmem server (QEMU docs/specs/ivshmem-spec.rst): the shm
 * backend joins it to ring ivshmem-doorbell devices in guests and to be interrupted by them,
 * through the eventfds the server hands out. Only vector 0 is used. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "ntb/backend/shm_int.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

/* Raw system calls (util/rawsys.h): the preload library interposes libc's socket calls, read
 * and write. */
static void close_fd(int *fd)
{
	fd_close_own(*fd);
	*fd = -1;
}

/* One message: a little-endian int64 and maybe a descriptor (-1 when none). 0, -EAGAIN when
 * DONTWAIT and nothing is there, -EPIPE on end of file, -errno. */
static int recv_msg(int sock, bool dontwait, int64_t *ret_value, int *ret_fd)
{
	uint8_t le[8];
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { le, sizeof(le) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	int avail = 0;

	/* Whole messages only: a message split by the stream is read once it is all there. */
	if (dontwait && (raw_ioctl(sock, FIONREAD, &avail) < 0 || avail < 8))
		return -EAGAIN;
	long n = raw_recvmsg(sock, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
	if (n == 0)
		return -EPIPE;
	*ret_fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int)))
			memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
	if (n != (long)sizeof(le)) {
		close_fd(ret_fd);
		return -EPROTO;
	}
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | le[i];
	*ret_value = (int64_t)v;
	return 0;
}

/* A message after the set-up: our own vectors, or a peer's connect / disconnect. */
static void handle(struct ntb_ivs_client *c, int64_t id, int fd)
{
	if (id == (int64_t)c->own_id) {
		if (c->rx_fd < 0 && fd >= 0)
			c->rx_fd = fd_park(fd); /* vector 0: what peers ring us on */
		else
			close_fd(&fd);          /* vectors we do not use */
		return;
	}
	int free_slot = -1;
	for (int i = 0; i < NTB_IVS_PEERS; i++) {
		if (c->peer_id[i] == id) {
			if (fd < 0) {            /* disconnect */
				close_fd(&c->peer_fd[i]);
				c->peer_id[i] = -1;
			} else {
				close_fd(&fd);   /* vector 1.. of a known peer */
			}
			return;
		}
		if (c->peer_id[i] < 0 && free_slot < 0)
			free_slot = i;
	}
	if (fd < 0)
		return;
	if (free_slot < 0) {
		close_fd(&fd);
		return;
	}
	c->peer_id[free_slot] = id;     /* its first descriptor: vector 0 */
	c->peer_fd[free_slot] = fd_park(fd); /* (kept: among the library's, util/fdpark.h) */
}

/* Read what the server sent since, without blocking. */
static void drain(struct ntb_ivs_client *c)
{
	int64_t id;
	int fd;

	while (c->sock >= 0 && recv_msg(c->sock, true, &id, &fd) == 0)
		handle(c, id, fd);
}

int ntb_ivs_join(const char *path, struct ntb_ivs_client *c, int *ret_shm_fd, char *err,
		 size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 2, 0 };
	int64_t v;
	int fd = -1, rc;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->rx_fd = -1;
	for (int i = 0; i < NTB_IVS_PEERS; i++) {
		c->peer_id[i] = -1;
		c->peer_fd[i] = -1;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "ivshmem server %s: path too long", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path));
	c->sock = fd_park(raw_socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (c->sock < 0 ||
	    raw_setsockopt(c->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    raw_connect(c->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "ivshmem server %s: %s", path, strerror(errno));
		goto err;
	}
	/* Version 0, our id, -1 with the shared memory; then connect notifications of the
	 * other peers and our own vectors (the first of which ends the set-up for us). */
	if ((rc = recv_msg(c->sock, false, &v, &fd)) || v != 0) {
		snprintf(err, errlen, "ivshmem server %s: %s", path,
			 rc ? strerror(-rc) : "unknown protocol version");
		rc = rc ? rc : -EPROTO;
		goto err;
	}
	close_fd(&fd);
	if ((rc = recv_msg(c->sock, false, &v, &fd)) || v < 0 || v > 65535) {
		snprintf(err, errlen, "ivshmem server %s: no peer id", path);
		rc = rc ? rc : -EPROTO;
		goto err;
	}
	close_fd(&fd);
	c->own_id = (uint32_t)v;
	if ((rc = recv_msg(c->sock, false, &v, &fd)) || v != -1 || fd < 0) {
		snprintf(err, errlen, "ivshmem server %s: no shared memory descriptor", path);
		rc = rc ? rc : -EPROTO;
		goto err;
	}
	*ret_shm_fd = fd;
	while (c->rx_fd < 0) {
		if ((rc = recv_msg(c->sock, false, &v, &fd))) {
			snprintf(err, errlen, "ivshmem server %s: no interrupt set-up: %s", path,
				 strerror(-rc));
			close_fd(ret_shm_fd);
			goto err;
		}
		handle(c, v, fd);
	}
	return 0;

err:
	ntb_ivs_leave(c);
	return rc;
}

int ntb_ivs_ring(struct ntb_ivs_client *c, uint32_t peer_id)
{
	uint64_t one = 1;
	int rc = -ENOENT;

	pthread_mutex_lock(&c->lock);
	for (int pass = 0; pass < 2 && rc == -ENOENT; pass++) {
		if (pass == 1)
			drain(c); /* a peer we have not heard of yet: read the notifications */
		for (int i = 0; i < NTB_IVS_PEERS; i++)
			if (c->peer_id[i] == (int64_t)peer_id) {
				rc = raw_write(c->peer_fd[i], &one, sizeof(one)) ==
				     (long)sizeof(one) ? 0 : -EIO;
				break;
			}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void ntb_ivs_leave(struct ntb_ivs_client *c)
{
	close_fd(&c->sock);
	close_fd(&c->rx_fd);
	for (int i = 0; i < NTB_IVS_PEERS; i++) {
		close_fd(&c->peer_fd[i]);
		c->peer_id[i] = -1;
	}
	pthread_mutex_destroy(&c->lock);
}
