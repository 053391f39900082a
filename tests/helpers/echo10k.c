// SPDX-License-Identifier: MIT
/* Thousands of connections held open at once and echoed on, each from one epoll thread: issue
 * #21's "connections at scale" test (tests/integration/test_conns_many.sh) and bench row.
 *
 *   echo10k server PORT [ADDR]
 *     A single-threaded epoll echo server on ADDR (default 0.0.0.0): non-blocking accept loop,
 *     every byte read is written back; what a write leaves over waits in a buffer of its
 *     connection, whose reading stops until it is flushed. Prints "listening ADDR:PORT", then
 *     serves until SIGTERM or SIGINT and prints
 *     "echo10k server: accepted=A max_open=M bytes=B errors=E rss_kb=R"; exit 0 unless E > 0.
 *
 *   echo10k client ADDR PORT N ROUNDS SIZES [DIR]
 *     Connects N sockets (blocking connect, one after the other), and keeps all of them open
 *     until the end. Then ROUNDS rounds: in each, every connection sends one message of
 *     SIZES[round % count] bytes (SIZES: sizes separated by commas, e.g. 64,2000) whose bytes
 *     are a function of (connection, round, offset), and the round ends when every
 *     connection got its message back, checked byte for byte. One epoll loop drives all of
 *     them (non-blocking, partial writes resumed). With DIR: after the rounds it creates
 *     DIR/ready and waits (up to 600 s) for DIR/go before it closes the connections, so that
 *     a test can look at them (`ntbsock stat`) while all are open.
 *     Prints "connected N in S s (each connect: p50 X, p99 Y, max Z ms)", one
 *     "round R size S: T ms" per round, and
 *     "echo10k client: conns=N echoes=E errors=K setup_s=S round_ms=T secs=S rss_kb=R"
 *     (echoes: messages that came back intact; round_ms: the mean of the rounds).
 *     Exit 0 only when every echo came back intact; 1 on a mismatch, a short read, an error
 *     or a stalled round (no progress for 60 s); 2 on bad arguments or when N connections do
 *     not fit the descriptor limit (RLIMIT_NOFILE: the soft limit is raised to the hard one).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
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

#define FD_SPARE       64        /* descriptors beyond the connections: stdio, epoll, library */
#define MAX_SIZES      16
#define MAX_MSG        (1u << 20)
#define STALL_SECONDS  60
#define HOLD_SECONDS   600
#define MAX_REPORTED   10        /* errors printed one by one; the rest are only counted */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* VmRSS of this process in KiB (0 if unknown). */
static long rss_kb(void)
{
	char line[256];
	long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Raise the soft descriptor limit to the hard one; the limit, or -1 when NEED does not fit. */
static long raise_nofile(long need)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -1;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			return -1;
	}
	if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < need) {
		fprintf(stderr, "echo10k: %ld descriptors needed, but the hard limit of open files "
			"(RLIMIT_NOFILE, ulimit -Hn) is %llu: lower N or raise the limit as root\n",
			need, (unsigned long long)rl.rlim_max);
		return -1;
	}
	return rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int parse_addr(const char *addr, const char *port, struct sockaddr_in *ret_sa)
{
	char *end;
	long p = strtol(port, &end, 10);
	struct sockaddr_in sa = { .sin_family = AF_INET };

	if (*end || p < 1 || p > 65535 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "echo10k: bad address %s:%s\n", addr, port);
		return -1;
	}
	sa.sin_port = htons((uint16_t)p);
	*ret_sa = sa;
	return 0;
}

/* --- server ---------------------------------------------------------------------------------- */

struct srv_conn {
	bool open;
	uint8_t *pending;   /* bytes read but not yet written back (NULL: none) */
	size_t pending_len, pending_off;
};

static volatile sig_atomic_t srv_stop;

static void on_stop(int sig)
{
	(void)sig;
	srv_stop = 1;
}

struct srv {
	int ep, lfd;
	long nfd;               /* size of conns: the descriptor limit */
	struct srv_conn *conns; /* by descriptor */
	long accepted, open, max_open, errors;
	unsigned long long bytes;
};

static void srv_error(struct srv *s, int fd, const char *what, int err)
{
	if (++s->errors <= MAX_REPORTED)
		fprintf(stderr, "echo10k server: fd %d: %s: %s\n", fd, what, strerror(err));
}

static void srv_close(struct srv *s, int fd)
{
	struct srv_conn *c = &s->conns[fd];

	epoll_ctl(s->ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	free(c->pending);
	memset(c, 0, sizeof(*c));
	s->open--;
}

static int srv_watch(struct srv *s, int fd, uint32_t events, int op)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(s->ep, op, fd, &ev);
}

/* Write back what FD's connection holds; 0 when all went (reading resumes), 1 when some is
 * left (the kernel or the link is full: wait for EPOLLOUT), -1 on an error. */
static int srv_flush(struct srv *s, int fd)
{
	struct srv_conn *c = &s->conns[fd];

	while (c->pending_off < c->pending_len) {
		ssize_t w = send(fd, c->pending + c->pending_off, c->pending_len - c->pending_off,
				 MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1;
		if (w < 0) {
			srv_error(s, fd, "send", errno);
			return -1;
		}
		c->pending_off += (size_t)w;
		s->bytes += (unsigned long long)w;
	}
	free(c->pending);
	c->pending = NULL;
	c->pending_len = c->pending_off = 0;
	return srv_watch(s, fd, EPOLLIN, EPOLL_CTL_MOD) < 0 ? -1 : 0;
}

/* Echo what FD has to read: one read (level-triggered, so the others get their turn), then
 * its write; the unwritten rest is kept and reading stops until it is flushed. */
static void srv_echo(struct srv *s, int fd, uint8_t *buf, size_t cap)
{
	struct srv_conn *c = &s->conns[fd];
	ssize_t r = read(fd, buf, cap), w;

	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (r <= 0) {
		if (r < 0 && errno != ECONNRESET)
			srv_error(s, fd, "read", errno);
		srv_close(s, fd);
		return;
	}
	w = send(fd, buf, (size_t)r, MSG_NOSIGNAL);
	if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
		srv_error(s, fd, "send", errno);
		srv_close(s, fd);
		return;
	}
	if (w < 0)
		w = 0;
	s->bytes += (unsigned long long)w;
	if (w == r)
		return;
	c->pending = malloc((size_t)(r - w));
	if (!c->pending) {
		srv_error(s, fd, "malloc", ENOMEM);
		srv_close(s, fd);
		return;
	}
	memcpy(c->pending, buf + w, (size_t)(r - w));
	c->pending_len = (size_t)(r - w);
	c->pending_off = 0;
	if (srv_watch(s, fd, EPOLLOUT, EPOLL_CTL_MOD) < 0) {
		srv_error(s, fd, "epoll_ctl", errno);
		srv_close(s, fd);
	}
}

/* Accept until the backlog is empty. -1 when the descriptor limit is reached (fatal). */
static int srv_accept(struct srv *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
			       errno == ECONNABORTED))
			return 0;
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			fprintf(stderr, "echo10k server: accept: %s after %ld open connections "
				"(descriptor limit %ld)\n", strerror(errno), s->open, s->nfd);
			return -1;
		}
		if (fd < 0) {
			srv_error(s, s->lfd, "accept", errno);
			return 0;
		}
		if (fd >= s->nfd || srv_watch(s, fd, EPOLLIN, EPOLL_CTL_ADD) < 0) {
			srv_error(s, fd, "epoll_ctl", fd >= s->nfd ? EMFILE : errno);
			close(fd);
			continue;
		}
		s->conns[fd].open = true;
		s->accepted++;
		if (++s->open > s->max_open)
			s->max_open = s->open;
	}
}

static int server(const char *port, const char *addr)
{
	static uint8_t buf[1 << 16];
	struct sigaction sa = { .sa_handler = on_stop };
	struct epoll_event evs[512];
	struct sockaddr_in sin;
	struct srv s = { .lfd = -1 };
	int one = 1, rc = 1;

	if (parse_addr(addr, port, &sin) < 0)
		return 2;
	s.nfd = raise_nofile(FD_SPARE);
	if (s.nfd < 0)
		return 2;
	s.conns = calloc((size_t)s.nfd, sizeof(*s.conns));
	s.ep = epoll_create1(EPOLL_CLOEXEC);
	s.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!s.conns || s.ep < 0 || s.lfd < 0 ||
	    setsockopt(s.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s.lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(s.lfd, 65535) < 0 ||
	    set_nonblock(s.lfd) < 0 || srv_watch(&s, s.lfd, EPOLLIN, EPOLL_CTL_ADD) < 0) {
		fprintf(stderr, "echo10k server: %s:%s: %s\n", addr, port, strerror(errno));
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("listening %s:%s\n", addr, port);
	fflush(stdout);
	while (!srv_stop) {
		int k = epoll_wait(s.ep, evs, 512, 500);

		if (k < 0 && errno != EINTR) {
			fprintf(stderr, "echo10k server: epoll_wait: %s\n", strerror(errno));
			goto out;
		}
		for (int i = 0; i < k; i++) {
			int fd = evs[i].data.fd;

			if (fd == s.lfd) {
				if (srv_accept(&s) < 0)
					goto out;
				continue;
			}
			if (!s.conns[fd].open)
				continue;       /* closed earlier in this batch */
			if (s.conns[fd].pending) {
				if (srv_flush(&s, fd) < 0)
					srv_close(&s, fd);
				continue;
			}
			srv_echo(&s, fd, buf, sizeof(buf));
		}
	}
	rc = 0;
out:
	printf("echo10k server: accepted=%ld max_open=%ld bytes=%llu errors=%ld rss_kb=%ld\n",
	       s.accepted, s.max_open, s.bytes, s.errors, rss_kb());
	return rc || s.errors ? 1 : 0;
}

/* --- client ---------------------------------------------------------------------------------- */

struct cli_conn {
	int fd;
	uint32_t sent, rcvd;  /* bytes of this round's message */
	bool done, failed, want_out;
};

struct cli {
	int ep;
	long n;
	struct cli_conn *conns;
	long errors, echoes;
	uint8_t *msg;         /* this round's message of the connection being sent */
};

/* The message of connection CONN in round ROUND: LEN bytes from offset OFF into OUT. A
 * splitmix64 of (connection, round, word index): no two connections or rounds send alike. */
static void msg_bytes(uint32_t conn, uint32_t round, uint32_t off, uint32_t len, uint8_t *out)
{
	uint64_t seed = ((uint64_t)conn << 32) ^ ((uint64_t)round << 20) ^ 0x9e3779b97f4a7c15ull;

	for (uint32_t k = off; k < off + len;) {
		uint64_t z = seed + (uint64_t)(k >> 3) * 0x9e3779b97f4a7c15ull;

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		for (uint32_t b = k & 7; b < 8 && k < off + len; b++, k++)
			out[k - off] = (uint8_t)(z >> (8 * b));
	}
}

static void cli_fail(struct cli *c, long i, const char *fmt, const char *detail)
{
	struct cli_conn *cc = &c->conns[i];

	if (++c->errors <= MAX_REPORTED) {
		fprintf(stderr, "echo10k client: connection %ld (fd %d): ", i, cc->fd);
		fprintf(stderr, fmt, detail);
		fprintf(stderr, "\n");
	}
	cc->failed = true;
	epoll_ctl(c->ep, EPOLL_CTL_DEL, cc->fd, NULL);
}

static void cli_watch(struct cli *c, long i, bool out)
{
	struct cli_conn *cc = &c->conns[i];
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.u64 = (uint64_t)i };

	if (cc->want_out == out)
		return;
	if (epoll_ctl(c->ep, EPOLL_CTL_MOD, cc->fd, &ev) < 0)
		cli_fail(c, i, "epoll_ctl: %s", strerror(errno));
	cc->want_out = out;
}

/* Send what connection I has left of its message of SIZE bytes in round R. */
static void cli_send(struct cli *c, long i, uint32_t r, uint32_t size)
{
	struct cli_conn *cc = &c->conns[i];

	while (cc->sent < size) {
		uint32_t len = size - cc->sent;
		ssize_t w;

		msg_bytes((uint32_t)i, r, cc->sent, len, c->msg);
		w = send(cc->fd, c->msg, len, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w < 0) {
			cli_fail(c, i, "send: %s", strerror(errno));
			return;
		}
		cc->sent += (uint32_t)w;
	}
	cli_watch(c, i, cc->sent < size);
}

/* Read what connection I has, checking it against its message of SIZE bytes in round R.
 * Returns 1 when the whole message is back. */
static int cli_recv(struct cli *c, long i, uint32_t r, uint32_t size, uint8_t *buf, uint8_t *want)
{
	struct cli_conn *cc = &c->conns[i];
	char what[96];

	for (;;) {
		ssize_t n = recv(cc->fd, buf, MAX_MSG, 0);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0) {
			cli_fail(c, i, "recv: %s", strerror(errno));
			return 0;
		}
		if (n == 0) {
			snprintf(what, sizeof(what), "%u of %u bytes", cc->rcvd, size);
			cli_fail(c, i, "end of stream after %s of the echo", what);
			return 0;
		}
		if (cc->rcvd + (uint64_t)n > size) {
			snprintf(what, sizeof(what), "%zd bytes with %u of %u expected", n,
				 size - cc->rcvd, size);
			cli_fail(c, i, "more echoed than sent: %s", what);
			return 0;
		}
		msg_bytes((uint32_t)i, r, cc->rcvd, (uint32_t)n, want);
		if (memcmp(buf, want, (size_t)n)) {
			ssize_t k = 0;

			while (buf[k] == want[k])
				k++;
			snprintf(what, sizeof(what), "offset %zd of round %u: 0x%02x, expected 0x%02x",
				 (ssize_t)cc->rcvd + k, r, buf[k], want[k]);
			cli_fail(c, i, "echo differs at %s", what);
			return 0;
		}
		cc->rcvd += (uint32_t)n;
		if (cc->rcvd == size)
			return 1;
	}
}

/* One round: every live connection sends its message of SIZE bytes and gets it back. */
static int cli_round(struct cli *c, uint32_t r, uint32_t size, uint8_t *buf, uint8_t *want)
{
	struct epoll_event evs[1024];
	long left = 0;
	double last_progress = now_s();

	for (long i = 0; i < c->n; i++) {
		struct cli_conn *cc = &c->conns[i];

		cc->sent = cc->rcvd = 0;
		cc->done = cc->failed;
		if (!cc->failed) {
			left++;
			cli_send(c, i, r, size);
			if (cc->failed)
				left--;
		}
	}
	while (left > 0) {
		int k = epoll_wait(c->ep, evs, 1024, 1000);

		if (k < 0 && errno != EINTR) {
			fprintf(stderr, "echo10k client: epoll_wait: %s\n", strerror(errno));
			return -1;
		}
		if (k > 0)
			last_progress = now_s();
		for (int j = 0; j < k; j++) {
			long i = (long)evs[j].data.u64;
			struct cli_conn *cc = &c->conns[i];

			if (cc->done)
				continue;
			if ((evs[j].events & EPOLLOUT) && cc->sent < size)
				cli_send(c, i, r, size);
			if (!cc->failed && (evs[j].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
			    cli_recv(c, i, r, size, buf, want)) {
				c->echoes++;
				cc->done = true;
				left--;
			}
			if (cc->failed && !cc->done) {
				cc->done = true;
				left--;
			}
		}
		if (now_s() - last_progress > STALL_SECONDS) {
			fprintf(stderr, "echo10k client: round %u: %ld connections without their echo "
				"after %d s without progress\n", r, left, STALL_SECONDS);
			for (long i = 0, shown = 0; i < c->n && shown < MAX_REPORTED; i++)
				if (!c->conns[i].done) {
					fprintf(stderr, "  connection %ld (fd %d): sent %u, got %u of %u\n",
						i, c->conns[i].fd, c->conns[i].sent, c->conns[i].rcvd, size);
					shown++;
				}
			c->errors += left;
			return -1;
		}
	}
	return 0;
}

/* After the last round: nothing more may come back on any connection. */
static void cli_check_quiet(struct cli *c, uint8_t *buf)
{
	for (long i = 0; i < c->n; i++) {
		ssize_t n;

		if (c->conns[i].failed)
			continue;
		n = recv(c->conns[i].fd, buf, MAX_MSG, MSG_DONTWAIT);
		if (n > 0)
			cli_fail(c, i, "%s", "bytes echoed after the last message");
		else if (n == 0)
			cli_fail(c, i, "%s", "end of stream while held");
		else if (errno != EAGAIN && errno != EWOULDBLOCK)
			cli_fail(c, i, "recv: %s", strerror(errno));
	}
}

/* Create DIR/ready, wait for DIR/go. */
static int cli_hold(const char *dir)
{
	char p[4096];
	int fd;

	snprintf(p, sizeof(p), "%s/ready", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "echo10k client: %s: %s\n", p, strerror(errno));
		return -1;
	}
	close(fd);
	snprintf(p, sizeof(p), "%s/go", dir);
	for (int i = 0; i < HOLD_SECONDS * 50; i++) {
		if (access(p, F_OK) == 0)
			return 0;
		usleep(20000);
	}
	fprintf(stderr, "echo10k client: no %s within %d s\n", p, HOLD_SECONDS);
	return -1;
}

static int parse_sizes(const char *text, uint32_t *sizes)
{
	int count = 0;
	const char *p = text;

	while (*p && count < MAX_SIZES) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || v < 1 || v > MAX_MSG || (*end && *end != ','))
			return -1;
		sizes[count++] = (uint32_t)v;
		p = *end ? end + 1 : end;
	}
	return *p ? -1 : count;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Open the N connections one after the other; each connect()'s time (s) into RET_TIMES. */
static int cli_connect(struct cli *c, const struct sockaddr_in *sin, double *ret_times)
{
	for (long i = 0; i < c->n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)i };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		double t = now_s();

		if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) < 0) {
			fprintf(stderr, "echo10k client: connection %ld of %ld: %s\n", i + 1, c->n,
				strerror(errno));
			return -1;
		}
		ret_times[i] = now_s() - t;
		if (set_nonblock(fd) < 0 || epoll_ctl(c->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			fprintf(stderr, "echo10k client: connection %ld of %ld: %s\n", i + 1, c->n,
				strerror(errno));
			return -1;
		}
		c->conns[i].fd = fd;
	}
	return 0;
}

static int client(char **argv, int argc)
{
	uint32_t sizes[MAX_SIZES];
	struct sockaddr_in sin;
	struct cli c = { .ep = -1 };
	char *end;
	long rounds = strtol(argv[5], &end, 10);
	int nsizes = parse_sizes(argv[6], sizes);
	double t0, t_setup, t_rounds = 0, *times;
	uint8_t *buf, *want;

	c.n = strtol(argv[4], NULL, 10);
	if (parse_addr(argv[2], argv[3], &sin) < 0 || c.n < 1 || *end || rounds < 0 ||
	    nsizes < 1) {
		fprintf(stderr, "echo10k client: bad N, ROUNDS or SIZES (1..%u bytes each)\n",
			MAX_MSG);
		return 2;
	}
	if (raise_nofile(c.n + FD_SPARE) < 0)
		return 2;
	c.conns = calloc((size_t)c.n, sizeof(*c.conns));
	c.msg = malloc(MAX_MSG);
	buf = malloc(MAX_MSG);
	want = malloc(MAX_MSG);
	times = calloc((size_t)c.n, sizeof(*times));
	c.ep = epoll_create1(EPOLL_CLOEXEC);
	if (!c.conns || !c.msg || !buf || !want || !times || c.ep < 0) {
		fprintf(stderr, "echo10k client: %s\n", strerror(errno ? errno : ENOMEM));
		return 2;
	}
	t0 = now_s();
	if (cli_connect(&c, &sin, times) < 0)
		return 1;
	t_setup = now_s() - t0;
	qsort(times, (size_t)c.n, sizeof(*times), cmp_double);
	printf("connected %ld in %.3f s (each connect: p50 %.3f ms, p99 %.3f ms, max %.3f ms)\n",
	       c.n, t_setup, times[c.n / 2] * 1e3, times[c.n * 99 / 100] * 1e3,
	       times[c.n - 1] * 1e3);
	fflush(stdout);
	for (long r = 0; r < rounds; r++) {
		uint32_t size = sizes[r % nsizes];
		double t = now_s();
		int rc = cli_round(&c, (uint32_t)r, size, buf, want);

		t = now_s() - t;
		t_rounds += t;
		printf("round %ld size %u: %.1f ms\n", r, size, t * 1e3);
		fflush(stdout);
		if (rc < 0)
			break;
	}
	cli_check_quiet(&c, buf);
	if (argc > 7 && cli_hold(argv[7]) < 0)
		c.errors++;
	printf("echo10k client: conns=%ld echoes=%ld errors=%ld setup_s=%.3f round_ms=%.1f "
	       "secs=%.2f rss_kb=%ld\n", c.n, c.echoes, c.errors, t_setup,
	       rounds ? t_rounds * 1e3 / (double)rounds : 0.0, now_s() - t0, rss_kb());
	fflush(stdout);
	for (long i = 0; i < c.n; i++)
		close(c.conns[i].fd);
	return c.errors || c.echoes != c.n * rounds ? 1 : 0;
}

int main(int argc, char **argv)
{
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "server"))
		return server(argv[2], argc == 4 ? argv[3] : "0.0.0.0");
	if ((argc == 7 || argc == 8) && !strcmp(argv[1], "client"))
		return client(argv, argc);
	fprintf(stderr, "usage: echo10k server PORT [ADDR]\n"
		"       echo10k client ADDR PORT N ROUNDS SIZE[,SIZE...] [DIR]\n");
	return 2;
}
