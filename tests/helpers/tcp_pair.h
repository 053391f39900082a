/* SPDX-License-Identifier: MIT */
/* A connected pair of loopback TCP sockets for unit tests (a connection's witness, a socket
 * whose FIN the library waits for): the accepted end in *OURS, the connecting one in *PEER. */
#ifndef NTBSOCK_TESTS_TCP_PAIR_H
#define NTBSOCK_TESTS_TCP_PAIR_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* 0, or the first failure's negative errno (nothing left open). */
static inline int tl_tcp_pair(int *ours, int *peer)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	*ours = *peer = -1;
	if (ls < 0)
		return -errno;
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1) ||
	    getsockname(ls, (struct sockaddr *)&sa, &sl) ||
	    (*peer = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(*peer, (struct sockaddr *)&sa, sizeof(sa)) ||
	    (*ours = accept4(ls, NULL, NULL, SOCK_CLOEXEC)) < 0) {
		rc = -errno;
		if (*peer >= 0)
			close(*peer);
		*ours = *peer = -1;
	}
	close(ls);
	return rc;
}

#endif
