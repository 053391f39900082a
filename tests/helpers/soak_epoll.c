/* SPDX-License-Identifier: MIT */
/* Soak traffic with epoll (run under libntbsock.so): an edge-triggered epoll echo server, and a
 * ping-pong client that keeps CONNS connections busy with request/response messages of random
 * sizes and verifies every echoed byte.
 *
 *   soak_epoll server ADDR PORT
 *   soak_epoll client ADDR PORT -c CONNS -t SECONDS [-m MAXMSG] [-s SEED]
 *     prints "END msgs=N bytes=N bad=N errors=N maxwait_ms=N" (the longest any message took
 *     or still waited at the end) and exits 0 only if bad == errors == 0 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 4096

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* --- server: echo ------------------------------------------------------------------------- */
struct sconn {
	uint8_t *buf;
	size_t len, off; /* pending echo bytes */
};

static void sclose(int ep, struct sconn *cs, int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	free(cs[fd].buf);
	memset(&cs[fd], 0, sizeof(cs[fd]));
}

/* Flush pending bytes; false when the connection is dead. */
static bool sflush(struct sconn *s, int fd)
{
	while (s->off < s->len) {
		ssize_t w = send(fd, s->buf + s->off, s->len - s->off, MSG_NOSIGNAL);

		if (w < 0)
			return errno == EAGAIN || errno == EINTR;
		s->off += (size_t)w;
	}
	s->len = s->off = 0;
	return true;
}

static int server(struct sockaddr_in *sin)
{
	static struct sconn cs[MAXFD];
	struct epoll_event ev, evs[64];
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), ep = epoll_create1(0);

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)sin, sizeof(*sin)) || listen(l, 128)) {
		perror("soak_epoll: bind/listen");
		return 1;
	}
	nonblock(l);
	ev.events = EPOLLIN;
	ev.data.fd = l;
	epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == l) {
				int c;

				while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					if (c >= MAXFD) {
						close(c);
						continue;
					}
					ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
					ev.data.fd = c;
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
				}
				continue;
			}
			struct sconn *s = &cs[fd];
			bool dead = !sflush(s, fd);

			/* edge-triggered: read until EAGAIN, but only while nothing is pending */
			while (!dead && s->len == 0) {
				uint8_t tmp[65536];
				ssize_t r = recv(fd, tmp, sizeof(tmp), 0);

				if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
					dead = true;
				} else if (r < 0) {
					break;
				} else {
					s->buf = realloc(s->buf, (size_t)r);
					memcpy(s->buf, tmp, (size_t)r);
					s->len = (size_t)r;
					s->off = 0;
					dead = !sflush(s, fd);
				}
			}
			if (dead)
				sclose(ep, cs, fd);
		}
	}
}

/* --- client: ping-pong ------------------------------------------------------------------- */
struct cconn {
	uint64_t seed, msg, t0_ms; /* t0_ms: when the message in flight started */
	size_t len, sent, got;
	uint8_t *out;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9E3779B97F4A7C15ull;
	return x ^ (x >> 29);
}

static void cnext(struct cconn *c, size_t maxmsg)
{
	uint64_t r = mix(c->seed * 1000003u + c->msg);

	c->len = 1 + r % maxmsg;
	if ((r >> 40) % 4 == 0)
		c->len = 1 + c->len % 116; /* inline-sized */
	for (size_t i = 0; i < c->len; i++)
		c->out[i] = (uint8_t)mix(r + i);
	c->sent = c->got = 0;
	c->t0_ms = now_ms();
}

static int client(struct sockaddr_in *sin, int conns, int secs, size_t maxmsg, uint64_t seed)
{
	static struct cconn cc[MAXFD];
	struct epoll_event ev, evs[64];
	uint64_t msgs = 0, bytes = 0, bad = 0, errors = 0, end = now_ms() + (uint64_t)secs * 1000u;
	uint64_t maxwait = 0; /* the longest any message took, or waits still (a stall, a hang) */
	int ep = epoll_create1(0), live = 0;
	uint8_t *in = malloc(maxmsg);

	for (int i = 0; i < conns; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (connect(fd, (struct sockaddr *)sin, sizeof(*sin)) || fd >= MAXFD) {
			perror("soak_epoll: connect");
			errors++;
			close(fd);
			continue;
		}
		nonblock(fd);
		cc[fd].seed = seed * 7919u + (uint64_t)i;
		cc[fd].msg = 0;
		cc[fd].out = malloc(maxmsg);
		cnext(&cc[fd], maxmsg);
		ev.events = EPOLLIN | EPOLLOUT; /* level-triggered here; the server is edge */
		ev.data.fd = fd;
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		live++;
	}
	while (live > 0 && now_ms() < end) {
		int n = epoll_wait(ep, evs, 64, 1000);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			struct cconn *c = &cc[fd];
			bool dead = false;

			if (c->sent < c->len && (evs[i].events & EPOLLOUT)) {
				ssize_t w = send(fd, c->out + c->sent, c->len - c->sent, MSG_NOSIGNAL);

				if (w < 0 && errno != EAGAIN && errno != EINTR)
					dead = true;
				else if (w > 0)
					c->sent += (size_t)w;
			}
			if (!dead && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
				ssize_t r = recv(fd, in, c->sent - c->got ? c->sent - c->got : 1, 0);

				if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
					dead = true;
				} else if (r > 0) {
					if ((size_t)r > c->sent - c->got || memcmp(in, c->out + c->got, (size_t)r))
						bad++;
					c->got += (size_t)r;
					bytes += (uint64_t)r;
				}
			}
			if (!dead && c->got == c->len) {
				uint64_t w = now_ms() - c->t0_ms;

				maxwait = w > maxwait ? w : maxwait;
				msgs++;
				c->msg++;
				cnext(c, maxmsg);
			}
			if (dead) {
				errors++;
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
				free(c->out);
				c->out = NULL;
				live--;
			}
		}
	}
	for (int fd = 0; fd < MAXFD; fd++)
		if (cc[fd].out) {
			uint64_t w = now_ms() - cc[fd].t0_ms; /* (its last message, unanswered) */

			maxwait = w > maxwait ? w : maxwait;
			close(fd);
			free(cc[fd].out);
		}
	printf("END msgs=%llu bytes=%llu bad=%llu errors=%llu maxwait_ms=%llu\n",
	       (unsigned long long)msgs, (unsigned long long)bytes, (unsigned long long)bad,
	       (unsigned long long)errors, (unsigned long long)maxwait);
	free(in);
	return bad || errors || msgs == 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int conns = 4, secs = 10, opt;
	size_t maxmsg = 16384;
	uint64_t seed = 1;

	if (argc < 4 || inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1) {
		fprintf(stderr, "usage: soak_epoll server|client ADDR PORT [-c N -t S -m MAX -s SEED]\n");
		return 64;
	}
	sin.sin_port = htons((uint16_t)atoi(argv[3]));
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	optind = 4;
	while ((opt = getopt(argc, argv, "c:t:m:s:")) != -1) {
		switch (opt) {
		case 'c': conns = atoi(optarg); break;
		case 't': secs = atoi(optarg); break;
		case 'm': maxmsg = strtoul(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: return 64;
		}
	}
	if (maxmsg == 0 || maxmsg > (1u << 20))
		maxmsg = 16384;
	if (!strcmp(argv[1], "server"))
		return server(&sin);
	return client(&sin, conns, secs, maxmsg, seed);
}
