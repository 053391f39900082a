// SPDX-License-Identifier: MIT
/* Holds one TCP connection open on a test's cue, for `ntbsock stat` tests:
 *   pl_hold ADDR PORT DIR   connect; create DIR/connected; wait for DIR/close; close the
 *                           socket; create DIR/closed; wait for DIR/exit; exit 0.
 * Every wait gives up (exit 1) after 60 s. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void mark(const char *dir, const char *name)
{
	char p[4096];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		fprintf(stderr, "pl_hold: %s: %s\n", p, strerror(errno));
		exit(1);
	}
	close(fd);
}

static void wait_for(const char *dir, const char *name)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	for (int i = 0; i < 3000; i++) {
		if (access(p, F_OK) == 0)
			return;
		usleep(20000);
	}
	fprintf(stderr, "pl_hold: no %s\n", p);
	exit(1);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: pl_hold ADDR PORT DIR\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "pl_hold: bad address %s\n", argv[1]);
		return 2;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "pl_hold: connect: %s\n", strerror(errno));
		return 1;
	}
	printf("fd %d\n", fd);
	fflush(stdout);
	mark(argv[3], "connected");
	wait_for(argv[3], "close");
	close(fd);
	mark(argv[3], "closed");
	wait_for(argv[3], "exit");
	return 0;
}
