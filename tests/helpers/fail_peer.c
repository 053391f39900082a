/* SPDX-License-Identifier: MIT */
/* A plain TCP peer for failure and soak tests (run under libntbsock.so): both directions
 * stream a deterministic pattern at once and each side verifies what it receives, byte for
 * byte; how the stream ended is printed as one line:
 *   END reason=eof|reset|error:<errno name> rx=N tx=N bad=0|1 t=<CLOCK_REALTIME ms>
 * so a test can tell EOF/ECONNRESET from a hang and check that what arrived was exact.
 *
 *   fail_peer server ADDR PORT [-n CONNS]   accept CONNS connections (0: forever), one by one
 *   fail_peer client ADDR PORT [-b BYTES] [-w MAXWRITE] [-p POLL_MS] [-s SEED]
 *     -b: send BYTES, then shutdown(SHUT_WR) and read until the peer's EOF (else: forever)
 *     -p: poll timeout; every expiry prints "TIMEOUT t=<ms>" (the peer is silent)
 *   both: -t FILE: the bytes send() has accepted on the current connection, stored in FILE
 *     (8 bytes, host order) after each send, so that a test can tell, after a kill -9, what
 *     the survivor must have received before an end of file
 * The server echoes its mode from the client: it sends until the client's EOF, then closes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Byte I of the stream with SEED. */
static inline uint8_t pat(uint64_t seed, uint64_t i)
{
	uint64_t x = (i >> 3) * 0x9E3779B97F4A7C15ull ^ seed;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	return (uint8_t)(x >> ((i & 7) * 8));
}

static void fill(uint8_t *b, size_t n, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, off + i);
}

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

struct opts {
	uint64_t bytes;     /* 0: forever */
	size_t maxw;
	int poll_ms;
	uint64_t seed;
	volatile uint64_t *sent; /* -t: the shared count of accepted bytes, or NULL */
};

static const char *errname(int e)
{
	switch (e) {
	case ECONNRESET: return "reset";
	case EPIPE: return "error:EPIPE";
	case ETIMEDOUT: return "error:ETIMEDOUT";
	case ECONNABORTED: return "error:ECONNABORTED";
	case ENOTCONN: return "error:ENOTCONN";
	default: {
		static char b[32];

		snprintf(b, sizeof(b), "error:%d", e);
		return b;
	}
	}
}

/* Stream both ways on FD; TX_SEED for what we send, RX_SEED for what we expect. */
static int duplex(int fd, const struct opts *o, uint64_t tx_seed, uint64_t rx_seed, bool is_server)
{
	static uint8_t out[1 << 16], in[1 << 16], want[1 << 16];
	uint64_t rx = 0, tx = 0;
	bool wr_done = false, bad = false;
	const char *reason = NULL;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (o->sent)
		*o->sent = 0;
	while (!reason) {
		struct pollfd p = { fd, POLLIN | (wr_done ? 0 : POLLOUT), 0 };
		int r = poll(&p, 1, o->poll_ms);

		if (r == 0) {
			printf("TIMEOUT t=%llu\n", (unsigned long long)now_ms());
			fflush(stdout);
			continue;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			reason = errname(errno);
			break;
		}
		if (p.revents & POLLIN || p.revents & (POLLHUP | POLLERR)) {
			ssize_t n = read(fd, in, sizeof(in));

			if (n == 0) {
				reason = "eof";
			} else if (n < 0) {
				if (errno != EAGAIN && errno != EINTR)
					reason = errname(errno);
			} else {
				fill(want, (size_t)n, rx_seed, rx);
				if (memcmp(in, want, (size_t)n))
					bad = true;
				rx += (uint64_t)n;
			}
			if (reason)
				break;
		}
		if (!wr_done && p.revents & POLLOUT) {
			size_t n = 1 + rnd() % o->maxw;
			ssize_t w;

			if (o->bytes && n > o->bytes - tx)
				n = (size_t)(o->bytes - tx);
			fill(out, n, tx_seed, tx);
			w = n ? send(fd, out, n, MSG_NOSIGNAL) : 0;
			if (w < 0) {
				if (errno != EAGAIN && errno != EINTR)
					reason = errname(errno);
			} else {
				tx += (uint64_t)w;
				if (o->sent)
					*o->sent = tx;
			}
			if (o->bytes && tx == o->bytes && !is_server) {
				shutdown(fd, SHUT_WR);
				wr_done = true;
			}
		}
	}
	if (is_server && !strcmp(reason, "eof"))
		shutdown(fd, SHUT_WR); /* the client finished: so do we */
	printf("END reason=%s rx=%llu tx=%llu bad=%d t=%llu\n", reason, (unsigned long long)rx,
	       (unsigned long long)tx, bad, (unsigned long long)now_ms());
	fflush(stdout);
	return bad ? 2 : 0;
}

static int parse_addr(const char *a, const char *port, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)atoi(port));
	return inet_pton(AF_INET, a, &sin->sin_addr) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct opts o = { .bytes = 0, .maxw = 65536, .poll_ms = 10000, .seed = 1 };
	struct sockaddr_in sin;
	long conns = 0;
	int opt, fd, rc = 0;

	if (argc < 4 || parse_addr(argv[2], argv[3], &sin)) {
		fprintf(stderr, "usage: fail_peer server|client ADDR PORT [options]\n");
		return 64;
	}
	optind = 4;
	while ((opt = getopt(argc, argv, "n:b:w:p:s:t:")) != -1) {
		switch (opt) {
		case 'n': conns = atol(optarg); break;
		case 'b': o.bytes = strtoull(optarg, NULL, 0); break;
		case 'w': o.maxw = strtoul(optarg, NULL, 0); break;
		case 'p': o.poll_ms = atoi(optarg); break;
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 't': {
			int tf = open(optarg, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			void *m;

			if (tf < 0 || ftruncate(tf, 4096) ||
			    (m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, tf, 0)) ==
				    MAP_FAILED) {
				perror("fail_peer: -t");
				return 64;
			}
			o.sent = m;
			close(tf);
			break;
		}
		default: return 64;
		}
	}
	if (o.maxw == 0 || o.maxw > 65536)
		o.maxw = 65536;
	rnd_state ^= o.seed * 0x2545F4914F6CDD1Dull + (uint64_t)getpid();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "server")) {
		int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) || listen(l, 16)) {
			perror("fail_peer: bind/listen");
			return 1;
		}
		for (long i = 0; conns == 0 || i < conns; i++) {
			uint64_t seeds[2];

			fd = accept(l, NULL, NULL);
			if (fd < 0) {
				if (errno == EINTR)
					continue;
				perror("fail_peer: accept");
				return 1;
			}
			/* the client's first 8 bytes name its seed: both directions derive from it */
			if (recv(fd, seeds, 8, MSG_WAITALL) != 8) {
				printf("END reason=error:handshake rx=0 tx=0 bad=0 t=%llu\n",
				       (unsigned long long)now_ms());
				close(fd);
				continue;
			}
			printf("ACCEPT t=%llu\n", (unsigned long long)now_ms());
			o.bytes = 0;
			rc |= duplex(fd, &o, seeds[0] * 2 + 1, seeds[0] * 2, true);
			close(fd);
		}
		return rc;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("fail_peer: connect");
		return 1;
	}
	if (send(fd, &o.seed, 8, MSG_NOSIGNAL) != 8) {
		perror("fail_peer: send seed");
		return 1;
	}
	printf("CONNECTED t=%llu\n", (unsigned long long)now_ms());
	rc = duplex(fd, &o, o.seed * 2, o.seed * 2 + 1, false);
	close(fd);
	return rc;
}
