// SPDX-License-Identifier: MIT
/* A new process's first megabytes (#22 goal 6): one connection between two new processes, the
 * client writing MIB mebibytes in WRITE-byte writes, the server reading them in 64 KiB reads.
 * Each side notes, for every mebibyte, the time it took and the page faults (minor and major) it
 * caused in its own process. Run with and without the library: a first mebibyte slower than the
 * rest by more than kernel TCP's is a cost of the transport's first use in a process.
 *
 *   firstmb server ADDR PORT MIB
 *       accepts one connection, reads MIB MiB, answers one byte, prints
 *       "server FIRST_US REST_MEDIAN_US RATIO FAULTS_FIRST FAULTS_REST_MAX" (the first MiB's time
 *       from the first byte read, the median of the other MiBs, FIRST / REST, the first MiB's
 *       page faults and the most of any other MiB)
 *   firstmb client ADDR PORT MIB [WRITE]
 *       connects, writes, waits for the answer; prints the same line for its writes, "client"
 *       first (the first MiB's time from the connect()'s return)
 *
 * FIRSTMB_ALL=1 prints every MiB's "mib US FAULTS" to stderr; FIRSTMB_TRACE=1 each read of the
 * server's first MiB, "read US BYTES FAULTS @CLOCK_US" from the first byte, and each write of the
 * client's, "write START_US TOOK_US BYTES FAULTS @CLOCK_US" (CLOCK_US: CLOCK_MONOTONIC, to line
 * the two up).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MIB (1u << 20)

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static long faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt + ru.ru_majflt;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Prints WHO's line for N MiBs that took US[i] and caused FL[i] faults. */
static void report(const char *who, const double *us, const long *fl, int n)
{
	double *rest = malloc(sizeof(*rest) * (size_t)(n > 1 ? n - 1 : 1));
	long fmax = 0;

	if (getenv("FIRSTMB_ALL"))
		for (int i = 0; i < n; i++)
			fprintf(stderr, "%s %d %.1f %ld\n", who, i, us[i], fl[i]);
	for (int i = 1; i < n; i++) {
		rest[i - 1] = us[i];
		if (fl[i] > fmax)
			fmax = fl[i];
	}
	qsort(rest, (size_t)(n - 1), sizeof(*rest), cmp_d);
	double med = n > 1 ? rest[(n - 1) / 2] : us[0];
	printf("%s %.1f %.1f %.2f %ld %ld\n", who, us[0], med, us[0] / med, fl[0], fmax);
	free(rest);
}

/* BYTES moved in all: for each of the N MiBs it completed since, its time and faults into
 * US[*M] and FL[*M], from *T and *F (then moved on to now). */
static void mib_done(uint64_t bytes, int n, int *m, double *t, long *f, double *us, long *fl)
{
	while (*m < n && bytes >= (uint64_t)(*m + 1) * MIB) {
		double t2 = now_us();
		long f2 = faults();

		us[*m] = t2 - *t;
		fl[(*m)++] = f2 - *f;
		*t = t2;
		*f = f2;
	}
}

static int addr_of(const char *ip, const char *port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)atoi(port));
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static int serve(const struct sockaddr_in *sa, int n)
{
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0), c;
	static char buf[1 << 16];
	double *us = calloc((size_t)n, sizeof(*us));
	long *fl = calloc((size_t)n, sizeof(*fl));

	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(ls, 4) < 0 ||
	    (c = accept(ls, NULL, NULL)) < 0) {
		perror("firstmb server");
		return 1;
	}
	uint64_t got = 0, total = (uint64_t)n * MIB;
	double t = 0;
	long f = 0;
	int m = 0;
	bool trace = getenv("FIRSTMB_TRACE") != NULL;

	while (got < total) {
		size_t want = total - got < sizeof(buf) ? (size_t)(total - got) : sizeof(buf);
		ssize_t r = read(c, buf, want);

		if (r <= 0) {
			fprintf(stderr, "firstmb server: read: %s after %llu bytes\n",
				r ? strerror(errno) : "end of stream", (unsigned long long)got);
			return 1;
		}
		if (got == 0) {
			t = now_us();
			f = faults();
		}
		if (trace && got < MIB)
			fprintf(stderr, "read %.1f %zd %ld @%.1f\n", now_us() - t, r, faults() - f,
				now_us());
		got += (uint64_t)r;
		mib_done(got, n, &m, &t, &f, us, fl);
	}
	if (write(c, "k", 1) != 1)
		return 1;
	report("server", us, fl, n);
	close(c);
	close(ls);
	return 0;
}

static int client(const struct sockaddr_in *sa, int n, size_t wsz)
{
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);
	char *buf = malloc(wsz), ack;
	double *us = calloc((size_t)n, sizeof(*us));
	long *fl = calloc((size_t)n, sizeof(*fl));

	memset(buf, 0x5a, wsz);
	if (s < 0 || setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    connect(s, (const struct sockaddr *)sa, sizeof(*sa)) < 0) {
		perror("firstmb client");
		return 1;
	}
	double t = now_us();
	long f = faults();
	uint64_t sent = 0, total = (uint64_t)n * MIB;
	int m = 0;
	bool trace = getenv("FIRSTMB_TRACE") != NULL;

	while (sent < total) {
		size_t want = total - sent < wsz ? (size_t)(total - sent) : wsz;
		double tw = trace && sent < MIB ? now_us() : 0;
		ssize_t r = write(s, buf, want);

		if (trace && sent < MIB)
			fprintf(stderr, "write %.1f %.1f %zd %ld @%.1f\n", tw - t, now_us() - tw, r,
				faults() - f, tw);
		if (r <= 0) {
			perror("firstmb client: write");
			return 1;
		}
		sent += (uint64_t)r;
		mib_done(sent, n, &m, &t, &f, us, fl);
	}
	if (read(s, &ack, 1) != 1) {
		fprintf(stderr, "firstmb client: no answer\n");
		return 1;
	}
	report("client", us, fl, n);
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;

	if (argc >= 5 && !strcmp(argv[1], "server") && !addr_of(argv[2], argv[3], &sa))
		return serve(&sa, atoi(argv[4]) > 1 ? atoi(argv[4]) : 2);
	if (argc >= 5 && !strcmp(argv[1], "client") && !addr_of(argv[2], argv[3], &sa))
		return client(&sa, atoi(argv[4]) > 1 ? atoi(argv[4]) : 2,
			      argc > 5 && atoi(argv[5]) > 0 ? (size_t)atoi(argv[5]) : 65536);
	fprintf(stderr, "usage: firstmb server ADDR PORT MIB | client ADDR PORT MIB [WRITE]\n");
	return 2;
}
