/* SPDX-License-Identifier: MIT */
/* Many streams at once, for fairness: a client writes as fast as it can on N connections (one
 * epoll loop, non-blocking sockets), a server reads them all (edge-triggered epoll) and checks
 * every byte against the pattern. Once every connection has delivered a first byte, the server
 * waits WARM seconds, then counts the bytes each connection delivers in the next SECS seconds.
 *
 *   streams server ADDR PORT N WARM SECS
 *     prints "FAIR n=N secs=S min=B mean=B max=B min/mean=R max/mean=R MB/s=X" (bytes per
 *     connection in the window), then, after every connection ended,
 *     "END conns=N bytes=B bad=K" and exits 0 only when no byte was bad
 *   streams client ADDR PORT N SECONDS [LEN]
 *     prints "CLIENT conns=N bytes=B errors=E"
 *
 * The stream of every connection is the same pattern: the byte at position P is P % 251. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PAT 251u

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void raise_nofile(int need)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)need + 64) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)need + 64 ? rl.rlim_max : (rlim_t)need + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static struct sockaddr_in addr_of(const char *a, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

	if (inet_pton(AF_INET, a, &sa.sin_addr) != 1) {
		fprintf(stderr, "streams: bad address %s\n", a);
		exit(2);
	}
	return sa;
}

/* A buffer of the pattern long enough to start at any phase: pat + (pos % PAT). */
static uint8_t *pattern(size_t len)
{
	uint8_t *p = malloc(len + PAT);

	if (!p)
		exit(2);
	for (size_t i = 0; i < len + PAT; i++)
		p[i] = (uint8_t)(i % PAT);
	return p;
}

struct rconn {
	int fd;
	uint64_t pos;   /* bytes received */
	uint64_t mark;  /* pos at the start of the window */
	bool open;
};

static int server(const char *a, int port, int n, double warm, double secs)
{
	struct sockaddr_in sa = addr_of(a, port);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), ep = epoll_create1(0);
	struct rconn *cs = calloc((size_t)n, sizeof(*cs));
	static uint8_t buf[1 << 16];
	uint8_t *pat = pattern(sizeof(buf));
	uint64_t bad = 0, total = 0;
	int accepted = 0, open = 0, started = 0, phase = 0; /* 0: warming, 1: window, 2: done */
	double t_phase = 0;

	raise_nofile(n + 16);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!cs || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 4096)) {
		perror("streams: bind/listen");
		return 2;
	}
	nonblock(lfd);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX };

	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 100);

		for (int i = 0; i < k; i++) {
			if (evs[i].data.u64 == UINT64_MAX) {
				int fd;

				while ((fd = accept(lfd, NULL, NULL)) >= 0) {
					if (accepted == n) {
						close(fd);
						continue;
					}
					nonblock(fd);
					cs[accepted] = (struct rconn){ .fd = fd, .open = true };
					ev.events = EPOLLIN | EPOLLET;
					ev.data.u64 = (uint64_t)accepted++;
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
					open++;
				}
				continue;
			}
			struct rconn *c = &cs[evs[i].data.u64];

			for (;;) {
				ssize_t r = read(c->fd, buf, sizeof(buf));

				if (r > 0) {
					const uint8_t *want = pat + c->pos % PAT;

					if (memcmp(buf, want, (size_t)r))
						for (ssize_t j = 0; j < r; j++)
							bad += buf[j] != want[j];
					if (c->pos == 0)
						started++;
					c->pos += (uint64_t)r;
					total += (uint64_t)r;
					continue;
				}
				if (r < 0 && errno == EAGAIN)
					break;
				if (r < 0)
					fprintf(stderr, "streams: read: %s\n", strerror(errno));
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				c->open = false;
				open--;
				break;
			}
		}
		double t = now_s();

		if (phase == 0 && started == n && accepted == n) {
			if (t_phase == 0) {
				t_phase = t;
			} else if (t - t_phase >= warm) {
				for (int j = 0; j < n; j++)
					cs[j].mark = cs[j].pos;
				phase = 1;
				t_phase = t;
			}
		} else if (phase == 1 && t - t_phase >= secs) {
			uint64_t mn = UINT64_MAX, mx = 0, sum = 0;

			for (int j = 0; j < n; j++) {
				uint64_t d = cs[j].pos - cs[j].mark;

				mn = d < mn ? d : mn;
				mx = d > mx ? d : mx;
				sum += d;
			}
			double mean = (double)sum / n, el = t - t_phase;

			printf("FAIR n=%d secs=%.2f min=%llu mean=%.0f max=%llu min/mean=%.3f "
			       "max/mean=%.3f MB/s=%.1f\n", n, el, (unsigned long long)mn, mean,
			       (unsigned long long)mx, mean > 0 ? (double)mn / mean : 0.0,
			       mean > 0 ? (double)mx / mean : 0.0, (double)sum / el / 1e6);
			fflush(stdout);
			phase = 2;
		}
		if (accepted == n && open == 0)
			break;
	}
	printf("END conns=%d bytes=%llu bad=%llu\n", accepted, (unsigned long long)total,
	       (unsigned long long)bad);
	return bad || phase != 2 ? 1 : 0;
}

static int client(const char *a, int port, int n, double secs, size_t len)
{
	struct sockaddr_in sa = addr_of(a, port);
	int ep = epoll_create1(0), *fds = calloc((size_t)n, sizeof(int));
	uint64_t *pos = calloc((size_t)n, sizeof(uint64_t)), total = 0, errors = 0;
	uint8_t *pat = pattern(len);

	raise_nofile(n + 16);
	if (!fds || !pos)
		return 2;
	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&sa, sizeof(sa))) {
			fprintf(stderr, "streams: connect %d: %s\n", i, strerror(errno));
			return 2;
		}
		nonblock(fds[i]);
		struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = (uint32_t)i };

		epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
	}
	double end = now_s() + secs;

	while (now_s() < end) {
		struct epoll_event evs[256];
		int k = epoll_wait(ep, evs, 256, 100);

		for (int j = 0; j < k; j++) {
			uint32_t i = evs[j].data.u32;
			ssize_t w = write(fds[i], pat + pos[i] % PAT, len);

			if (w > 0) {
				pos[i] += (uint64_t)w;
				total += (uint64_t)w;
			} else if (w < 0 && errno != EAGAIN) {
				errors++;
				epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
			}
		}
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	printf("CLIENT conns=%d bytes=%llu errors=%llu\n", n, (unsigned long long)total,
	       (unsigned long long)errors);
	return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 7 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]), atof(argv[6]));
	if (argc >= 6 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]),
			      argc > 6 ? (size_t)atol(argv[6]) : 16384u);
	fprintf(stderr, "usage: streams server ADDR PORT N WARM SECS | "
		"streams client ADDR PORT N SECONDS [LEN]\n");
	return 2;
}
