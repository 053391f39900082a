// SPDX-License-Identifier: MIT
/* Connection set-up rate for bench/bench.sh and tests: a client that connects, sends one byte,
 * reads the server's one-byte answer and closes, as fast as it can; a server that accepts,
 * answers and closes. The byte exchange makes each connection carry data, so ntbsock must
 * finish its NTB negotiation for every connection. Run both with and without the library.
 *
 *   connrate server ADDR PORT [eof]
 *       serves until killed; with "eof" it closes only after the client's end of stream, so
 *       the client always closes first (its ports go to TIME_WAIT)
 *   connrate client ADDR PORT SECONDS [COUNT [MAX_PER_S]]
 *       stops after SECONDS or COUNT connections (0: no limit), at most MAX_PER_S connections
 *       per second (0: no limit); prints "CONNECTIONS_PER_S CONNECTIONS FAILED CPU_US", CPU_US
 *       the client process's CPU time (user + system, all its threads) per connection
 *
 *   connrate first ADDR PORT
 *       one connection, as the client makes them; prints "MICROSECONDS" from before the
 *       connect() to the server's answer (the first connection of a new process: what a
 *       short-lived program pays, e.g. for a fallback decision)
 *
 * CONNRATE_REPORT=SECONDS makes the client print "ELAPSED_S CONNECTIONS_PER_S CONNECTIONS" to
 * stderr for every interval of that length (the rate over time). CONNRATE_LAT=1 makes it print
 * "latency_us p50 P50 p99 P99 max MAX" to stderr at the end: each connection's time from socket()
 * to close() (the first 1,000,000). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int addr_of(const char *ip, const char *port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)atoi(port));
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static int serve(const struct sockaddr_in *sa, int wait_eof)
{
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);

	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(ls, 512) < 0) {
		perror("connrate server");
		return 1;
	}
	for (;;) {
		char c;
		int fd = accept(ls, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("accept");
			return 1;
		}
		if (read(fd, &c, 1) == 1 && write(fd, &c, 1) == 1 && wait_eof)
			while (read(fd, &c, 1) > 0)
				;
		close(fd);
	}
}

static int one_connection(const struct sockaddr_in *sa)
{
	static int reported;
	char c = 'x';
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	const char *step = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) ? "connect" :
			   write(fd, &c, 1) != 1 ? "write" : read(fd, &c, 1) != 1 ? "read" : NULL;
	if (step && reported++ < 5) /* (read: 0 is an early end of stream) */
		fprintf(stderr, "connrate client: %s: %s\n", step, strerror(errno));
	close(fd);
	return step ? -1 : 0;
}

/* CPU time of this process (all threads: ntbsock's helper too) per connection, microseconds. */
static double cpu_us_per(long n)
{
	struct rusage ru;

	if (n <= 0 || getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
		ru.ru_stime.tv_usec) / n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define LAT_MAX 1000000
static double *lat_us;
static long lat_n;

static void lat_print(void)
{
	if (!lat_us || !lat_n)
		return;
	qsort(lat_us, (size_t)lat_n, sizeof(*lat_us), cmp_double);
	fprintf(stderr, "latency_us p50 %.1f p99 %.1f max %.1f\n", lat_us[lat_n / 2],
		lat_us[lat_n * 99 / 100], lat_us[lat_n - 1]);
}

static int client(const struct sockaddr_in *sa, double secs, long count, double max_rate)
{
	const char *rep = getenv("CONNRATE_REPORT");
	double t0 = now_s(), t = t0, every = rep ? atof(rep) : 0, next = t0 + every;
	long n = 0, failed = 0, n_last = 0;

	if (getenv("CONNRATE_LAT"))
		lat_us = malloc(LAT_MAX * sizeof(*lat_us));
	while (t - t0 < secs && (count <= 0 || n + failed < count)) {
		double c0 = lat_us ? now_s() : 0;

		if (one_connection(sa) == 0) {
			if (lat_us && lat_n < LAT_MAX)
				lat_us[lat_n++] = (now_s() - c0) * 1e6;
			n++;
		} else if (++failed > 100) {
			perror("connrate client");
			printf("%.1f %ld %ld %.1f\n", n / (t - t0), n, failed, cpu_us_per(n));
			lat_print();
			return 1;
		}
		t = now_s();
		if (max_rate > 0 && (n + failed) / max_rate > t - t0) {
			double d = (n + failed) / max_rate - (t - t0);
			struct timespec ts = { (time_t)d, (long)((d - (time_t)d) * 1e9) };
			nanosleep(&ts, NULL);
			t = now_s();
		}
		if (every > 0 && t >= next) {
			fprintf(stderr, "%.1f %.1f %ld\n", t - t0, (n - n_last) / (t - next + every), n);
			n_last = n;
			next = t + every;
		}
	}
	printf("%.1f %ld %ld %.1f\n", n / (t - t0), n, failed, cpu_us_per(n));
	lat_print();
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;

	if (argc < 4 || addr_of(argv[2], argv[3], &sa) < 0 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "first") &&
	     (strcmp(argv[1], "client") || argc < 5))) {
		fprintf(stderr, "usage: connrate server ADDR PORT [eof] | "
			"client ADDR PORT SECONDS [COUNT [MAX_PER_S]] | first ADDR PORT\n");
		return 2;
	}
	if (!strcmp(argv[1], "first")) {
		double t0 = now_s();
		if (one_connection(&sa) < 0)
			return 1;
		printf("%.0f\n", (now_s() - t0) * 1e6);
		return 0;
	}
	if (argv[1][0] == 's')
		return serve(&sa, argc > 4 && !strcmp(argv[4], "eof"));
	return client(&sa, atof(argv[4]), argc > 5 ? atol(argv[5]) : 0,
		      argc > 6 ? atof(argv[6]) : 0);
}
