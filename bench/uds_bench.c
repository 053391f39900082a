// SPDX-License-Identifier: MIT
/* Unix-domain stream socket baseline for bench/bench.sh: throughput and ping-pong latency
 * between two processes pinned to two cores, shaped like iperf3 -l SIZE and sockperf pp -m SIZE.
 *
 *   uds_bench tp SIZE SECONDS [CPU_CLIENT CPU_SERVER]   -> "GBIT_PER_S BYTES"
 *   uds_bench pp SIZE SECONDS [CPU_CLIENT CPU_SERVER]   -> "P50_US P99_US MESSAGES" (one-way)
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* Read exactly LEN bytes; 0 on success, -1 at EOF or error. */
static int read_full(int fd, char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = read(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Server side: sink (tp) or echo (pp) until EOF. */
static void serve(int fd, int echo, char *buf, size_t size)
{
	for (;;) {
		if (!echo) {
			if (read(fd, buf, size) <= 0)
				return;
		} else if (read_full(fd, buf, size) < 0 || write_full(fd, buf, size) < 0) {
			return;
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int run_tp(int fd, char *buf, size_t size, double secs)
{
	double t0 = now_s(), t;
	uint64_t bytes = 0;

	do {
		for (int i = 0; i < 64; i++) {
			if (write_full(fd, buf, size) < 0)
				return -1;
			bytes += size;
		}
		t = now_s();
	} while (t - t0 < secs);
	shutdown(fd, SHUT_WR);
	/* The receiver has everything once it closes its end. */
	while (read(fd, buf, size) > 0)
		;
	t = now_s();
	printf("%.4f %llu\n", bytes * 8 / (t - t0) / 1e9, (unsigned long long)bytes);
	return 0;
}

static int run_pp(int fd, char *buf, size_t size, double secs)
{
	size_t cap = 1 << 20, n = 0;
	double *lat = malloc(cap * sizeof(*lat));
	double t0 = now_s(), warm = t0 + 0.2, t = t0;

	if (!lat)
		return -1;
	while (t - t0 < secs + 0.2) {
		double s = now_s();

		if (write_full(fd, buf, size) < 0 || read_full(fd, buf, size) < 0)
			return -1;
		t = now_s();
		if (s >= warm && n < cap)
			lat[n++] = (t - s) / 2 * 1e6;
	}
	if (n == 0)
		return -1;
	qsort(lat, n, sizeof(*lat), cmp_double);
	printf("%.3f %.3f %zu\n", lat[n / 2], lat[(size_t)(n * 0.99)], n);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	int sv[2], status, rc;
	size_t size;
	double secs;
	char *buf;
	pid_t child;

	if (argc < 4 || (strcmp(argv[1], "tp") && strcmp(argv[1], "pp"))) {
		fprintf(stderr, "usage: uds_bench tp|pp SIZE SECONDS [CPU_CLIENT CPU_SERVER]\n");
		return 2;
	}
	size = strtoul(argv[2], NULL, 0);
	secs = atof(argv[3]);
	buf = calloc(1, size ? size : 1);
	if (!size || !buf || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("uds_bench");
		return 1;
	}
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		close(sv[0]);
		pin(argc > 5 ? atoi(argv[5]) : -1);
		serve(sv[1], argv[1][0] == 'p', buf, size);
		_exit(0);
	}
	close(sv[1]);
	pin(argc > 4 ? atoi(argv[4]) : -1);
	rc = argv[1][0] == 't' ? run_tp(sv[0], buf, size, secs) : run_pp(sv[0], buf, size, secs);
	close(sv[0]);
	waitpid(child, &status, 0);
	if (rc < 0)
		fprintf(stderr, "uds_bench: transfer failed\n");
	return rc < 0;
}
