// SPDX-License-Identifier: MIT
/* Holds TCP connections open on a test's cue, for `ntbsock stat` tests:
 *   pl_hold ADDR PORT DIR [N]  connect N sockets (default 1), one after the other, printing
 *                              "fd F" for each; create DIR/connected; wait for DIR/close; close
 *                              them; create DIR/closed; wait for DIR/exit; exit 0.
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
	int n = argc == 5 ? atoi(argv[4]) : 1;
	int *fds;

	if ((argc != 4 && argc != 5) || n < 1) {
		fprintf(stderr, "usage: pl_hold ADDR PORT DIR [N]\n");
		return 2;
	}
	fds = calloc((size_t)n, sizeof(*fds));
	if (!fds)
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "pl_hold: bad address %s\n", argv[1]);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			fprintf(stderr, "pl_hold: connect %d of %d: %s\n", i + 1, n,
				strerror(errno));
			return 1;
		}
		printf("fd %d\n", fds[i]);
	}
	fflush(stdout);
	mark(argv[3], "connected");
	wait_for(argv[3], "close");
	for (int i = 0; i < n; i++)
		close(fds[i]);
	mark(argv[3], "closed");
	wait_for(argv[3], "exit");
	return 0;
}
