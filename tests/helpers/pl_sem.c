// SPDX-License-Identifier: MIT
/* Socket-semantics checker for preload/: a client and a server run a fixed script over one TCP
 * connection (MSG_PEEK, FIONREAD, SO_RCVTIMEO, MSG_DONTWAIT, MSG_WAITALL, dup, sendmmsg,
 * sendfile, splice, select, readv/writev, shutdown, EOF, EPIPE) and check every result the way
 * the kernel gives it. Run it without the library to check the checker.
 *   pl_sem server ADDR PORT      pl_sem client ADDR PORT
 *   pl_sem deadlisten ADDR PORT  pl_sem refused ADDR PORT   (a refused connect, both ways)
 *   pl_sem lingerserver ADDR PORT  pl_sem lingerclient ADDR PORT   (SO_LINGER 0 resets)
 *   pl_sem edgeserver ADDR PORT    pl_sem edgeclient ADDR PORT
 *       (readiness transcript: epoll edges, one-shot, nesting, threads; select, poll, MSG_PEEK
 *       and SIOCINQ after partial reads; the client prints it, the test compares it with the
 *       kernel's)
 *   pl_sem fairserver ADDR PORT    pl_sem fairclient ADDR PORT
 *       (which of more ready fds than maxevents each epoll_wait reports, a non-blocking
 *       connect's completion among them: a transcript, as above) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static int step;

#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "pl_sem %s: step %d: FAILED: %s (errno %s): ",   \
				role, step, #cond, strerror(errno));                     \
			fprintf(stderr, __VA_ARGS__);                                    \
			fprintf(stderr, "\n");                                           \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

static const char *role = "?";
static volatile sig_atomic_t sigpipes;

static char flood_flag[64]; /* side channel of the SO_SNDTIMEO step */
static char nb_flag[80];    /* and of the non-blocking flood */
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void ok(const char *what)
{
	printf("%s ok %d %s\n", role, step, what);
	fflush(stdout);
	step++;
}

static void read_all(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		CHECK(r > 0, "read_all got %zd after %zu of %zu", r, got, n);
		got += (size_t)r;
	}
}

static void write_all(int fd, const void *buf, size_t n)
{
	size_t put = 0;
	while (put < n) {
		ssize_t r = write(fd, (const char *)buf + put, n - put);
		CHECK(r > 0, "write_all");
		put += (size_t)r;
	}
}

static void sync_byte_send(int fd, char c) { write_all(fd, &c, 1); }
static void sync_byte_recv(int fd, char want)
{
	char c = 0;
	read_all(fd, &c, 1);
	CHECK(c == want, "sync byte %c, want %c", c, want);
}

static unsigned char pat(size_t i) { return (unsigned char)(i * 131 + (i >> 8) * 7 + 3); }

/* Full duplex from two threads on one socket: a thread sends 8 MiB while this one receives
 * the peer's 8 MiB. */
struct duplex {
	int fd;
	size_t n;
	size_t seed;
};

static void *duplex_sender(void *arg)
{
	struct duplex *d = arg;
	static unsigned char b[65536];
	for (size_t o = 0; o < d->n; o += sizeof(b)) {
		for (size_t j = 0; j < sizeof(b); j++)
			b[j] = pat(o + j + d->seed);
		write_all(d->fd, b, sizeof(b));
	}
	return NULL;
}

static void duplex(int fd, size_t mine, size_t peers)
{
	static unsigned char b[65536];
	struct duplex d = { fd, 8u << 20, mine };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, duplex_sender, &d) == 0, "pthread_create");
	for (size_t o = 0; o < d.n; o += sizeof(b)) {
		read_all(fd, b, sizeof(b));
		for (size_t j = 0; j < sizeof(b); j++)
			CHECK(b[j] == pat(o + j + peers), "duplex byte %zu", o + j);
	}
	CHECK(pthread_join(t, NULL) == 0, "join");
}

/* FD stays readable (a byte not yet read) while a pipe turns readable beside it: select, poll
 * and epoll must report the pipe too (the kernel does on every call; a user-space fast path
 * for a ready socket must still look at kernel fds), and keep reporting FD. */
static void ready_socket_and_pipe(int fd)
{
	int pp[2];
	CHECK(pipe(pp) == 0, "pipe");
	CHECK(write(pp[1], "p", 1) == 1, "pipe write");
	int hi = (fd > pp[0] ? fd : pp[0]) + 1;
	int sel_pipe = 0, poll_pipe = 0, ep_pipe = 0;
	for (int i = 0; i < 256; i++) {
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		FD_SET(pp[0], &rd);
		struct timeval tv = { 5, 0 };
		int n = select(hi, &rd, NULL, NULL, &tv);
		CHECK(n >= 1 && FD_ISSET(fd, &rd), "select with a pipe: socket readable (%d)", n);
		sel_pipe += FD_ISSET(pp[0], &rd) != 0;
		struct pollfd p[2] = { { .fd = pp[0], .events = POLLIN }, { .fd = fd, .events = POLLIN } };
		n = poll(p, 2, 5000);
		CHECK(n >= 1 && (p[1].revents & POLLIN), "poll with a pipe: socket readable (%d)", n);
		poll_pipe += (p[0].revents & POLLIN) != 0;
	}
	int ep = epoll_create1(0);
	CHECK(ep >= 0, "epoll_create1");
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl socket");
	ev.data.fd = pp[0];
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &ev) == 0, "epoll_ctl pipe");
	for (int i = 0; i < 256; i++) {
		struct epoll_event evs[4];
		int n = epoll_wait(ep, evs, 4, 5000);
		CHECK(n >= 1, "epoll_wait with a pipe: %d", n);
		for (int k = 0; k < n; k++)
			ep_pipe += evs[k].data.fd == pp[0];
	}
	/* 256 calls each: the kernel reports the pipe every time; allow a fast path to skip it on
	 * most calls, never on all of them. */
	CHECK(sel_pipe >= 2 && poll_pipe >= 2 && ep_pipe >= 2,
	      "pipe beside a ready socket reported by select %d, poll %d, epoll %d of 256 calls",
	      sel_pipe, poll_pipe, ep_pipe);
	close(ep);
	close(pp[0]);
	close(pp[1]);
}

static struct sockaddr_in addr_of(const char *a, const char *p)
{
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(p));
	inet_pton(AF_INET, a, &sa.sin_addr);
	return sa;
}

static void server(int fd)
{
	char buf[256];
	int n = -1;

	/* 0: writev from the client arrives whole; FIONREAD sees it; MSG_PEEK leaves it. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLIN), "poll POLLIN");
	for (int i = 0; i < 1000; i++) {
		CHECK(ioctl(fd, FIONREAD, &n) == 0, "FIONREAD");
		if (n == 11)
			break;
		usleep(2000);
	}
	CHECK(n == 11, "FIONREAD %d", n);
	CHECK(recv(fd, buf, 5, MSG_PEEK) == 5 && !memcmp(buf, "hello", 5), "peek");
	CHECK(recv(fd, buf, sizeof(buf), 0) == 11 && !memcmp(buf, "hello world", 11), "recv");
	ok("writev/FIONREAD/MSG_PEEK");

	/* 1: nothing pending: MSG_DONTWAIT → EAGAIN; SO_RCVTIMEO → EAGAIN. */
	errno = 0;
	CHECK(recv(fd, buf, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN, "dontwait");
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK on");
	errno = 0;
	CHECK(read(fd, buf, 1) == -1 && errno == EAGAIN, "O_NONBLOCK read");
	CHECK(fcntl(fd, F_SETFL, fl) == 0, "O_NONBLOCK off");
	int on = 1;
	CHECK(ioctl(fd, FIONBIO, &on) == 0, "FIONBIO on");
	errno = 0;
	CHECK(recv(fd, buf, 1, 0) == -1 && errno == EAGAIN, "FIONBIO recv");
	on = 0;
	CHECK(ioctl(fd, FIONBIO, &on) == 0, "FIONBIO off");
	struct timeval tv = { 0, 200000 };
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "rcvtimeo");
	errno = 0;
	CHECK(recv(fd, buf, 1, 0) == -1 && errno == EAGAIN, "rcvtimeo recv");
	tv.tv_usec = 0;
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "rcvtimeo off");
	sync_byte_send(fd, 'A');
	ok("MSG_DONTWAIT/SO_RCVTIMEO");

	/* 2: MSG_WAITALL collects 100000 bytes sent in pieces. */
	static unsigned char big[100000];
	CHECK(recv(fd, big, sizeof(big), MSG_WAITALL) == (ssize_t)sizeof(big), "waitall");
	for (size_t i = 0; i < sizeof(big); i++)
		CHECK(big[i] == pat(i), "waitall byte %zu", i);
	ok("MSG_WAITALL");

	/* 3: a dup shares the connection; closing the original keeps it open. */
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 200);
	CHECK(hi >= 200, "F_DUPFD_CLOEXEC");
	CHECK(dup2(fd, hi + 1) == hi + 1 && dup3(fd, hi + 2, O_CLOEXEC) == hi + 2, "dup2/dup3");
	CHECK(close_range((unsigned)hi, (unsigned)hi + 10, 0) == 0, "close_range");
	errno = 0;
	CHECK(write(hi + 1, "q", 1) == -1 && errno == EBADF, "closed by close_range");
	int d = dup(fd);
	CHECK(d >= 0, "dup");
	CHECK(close(fd) == 0, "close original");
	fd = d;
	write_all(fd, "dup", 3);
	ok("dup/F_DUPFD/dup2/dup3/close_range");

	/* 4: sendmmsg from the client: 6 bytes. */
	struct iovec rv[2] = { { buf, 2 }, { buf + 2, 4 } };
	struct msghdr mh;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = rv;
	mh.msg_iovlen = 2;
	CHECK(recvmsg(fd, &mh, MSG_WAITALL) == 6 && !memcmp(buf, "abbccc", 6), "recvmsg");
	ok("sendmmsg");

	/* 5: sendfile 1 MiB to the client. */
	char tmpl[] = "/tmp/pl_sem_XXXXXX";
	int f = mkstemp(tmpl);
	CHECK(f >= 0, "mkstemp");
	unlink(tmpl);
	static unsigned char mb[1 << 20];
	for (size_t i = 0; i < sizeof(mb); i++)
		mb[i] = pat(i + 5);
	write_all(f, mb, sizeof(mb));
	off_t off = 0;
	size_t sent = 0;
	while (sent < sizeof(mb)) {
		ssize_t r = sendfile(fd, f, &off, sizeof(mb) - sent);
		CHECK(r > 0, "sendfile");
		sent += (size_t)r;
	}
	CHECK(off == (off_t)sizeof(mb), "sendfile offset");
	close(f);
	ok("sendfile");

	/* 6: splice from the client's pipe: 4096 bytes. */
	static unsigned char pg[4096];
	read_all(fd, pg, sizeof(pg));
	for (size_t i = 0; i < sizeof(pg); i++)
		CHECK(pg[i] == pat(i + 9), "splice byte %zu", i);
	ok("splice");

	/* 7: the client selects; we send one byte a bit later. */
	sync_byte_recv(fd, 'S');
	usleep(100000);
	sync_byte_send(fd, 'T');
	ok("select");

	/* 7a: the client's blocking reads are interrupted by signals. */
	sync_byte_recv(fd, 'I');
	usleep(600000);
	write_all(fd, "R", 1);
	sync_byte_recv(fd, 'J');
	usleep(600000);
	write_all(fd, "S", 1);
	ok("EINTR");

	/* 7c: the client fills the queue under SO_SNDTIMEO; we read it all once it says so. */
	sync_byte_recv(fd, 'W');
	/* Not reading until the client saw its timeout: it says so through a file, as the
	 * stream itself is full. */
	for (int i = 0; i < 600 && access(flood_flag, F_OK) != 0; i++)
		usleep(100000);
	CHECK(access(flood_flag, F_OK) == 0, "flood flag %s", flood_flag);
	unlink(flood_flag);
	{
		static unsigned char fb[65536];
		size_t flood = 0;
		for (;;) {
			/* Peek, so that nothing after the sentinel (the next step's data) is eaten. */
			ssize_t r = recv(fd, fb, sizeof(fb), MSG_PEEK);
			CHECK(r > 0, "flood peek");
			unsigned char *z = memchr(fb, 0, (size_t)r);
			size_t take = z ? (size_t)(z - fb) + 1 : (size_t)r;
			CHECK(recv(fd, fb, take, MSG_WAITALL) == (ssize_t)take, "flood read");
			flood += z ? take - 1 : take;
			if (z)
				break;
		}
		uint64_t sent = 0;
		read_all(fd, &sent, sizeof(sent));
		CHECK(sent == flood, "flood: %zu bytes arrived, %llu sent", flood,
		      (unsigned long long)sent);
	}
	ok("SO_SNDTIMEO");

	/* 7d: the client floods non-blocking 1 KiB writes; we drain once it says so. */
	sync_byte_recv(fd, 'N');
	for (int i = 0; i < 600 && access(nb_flag, F_OK) != 0; i++)
		usleep(100000);
	CHECK(access(nb_flag, F_OK) == 0, "nb flag %s", nb_flag);
	unlink(nb_flag);
	{
		static unsigned char fb[65536];
		size_t flood = 0;
		for (;;) {
			ssize_t r = recv(fd, fb, sizeof(fb), MSG_PEEK);
			CHECK(r > 0, "nb flood peek");
			unsigned char *z = memchr(fb, 0, (size_t)r);
			size_t take = z ? (size_t)(z - fb) + 1 : (size_t)r;
			CHECK(recv(fd, fb, take, MSG_WAITALL) == (ssize_t)take, "nb flood read");
			size_t data = z ? take - 1 : take;
			for (size_t i = 0; i < data; i++)
				CHECK(fb[i] == 0xcd, "nb flood byte %zu", flood + i);
			flood += z ? take - 1 : take;
			if (z)
				break;
		}
		uint64_t sent = 0;
		read_all(fd, &sent, sizeof(sent));
		CHECK(sent == flood, "nb flood: %zu bytes arrived, %llu sent", flood,
		      (unsigned long long)sent);
	}
	ok("non-blocking flood, POLLOUT");

	/* 7b: two threads, one socket, both directions at once. */
	duplex(fd, 100, 200);
	ok("threads, full duplex");

	/* 8: the client's epoll checks need a byte now and then. */
	sync_byte_recv(fd, 'E');
	write_all(fd, "x", 1);
	sync_byte_recv(fd, 'F');
	write_all(fd, "y", 1);
	ok("epoll");

	/* 9: half-close: our FIN, then the client still talks to us. */
	write_all(fd, "last", 4);
	CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
	read_all(fd, buf, 3);
	CHECK(!memcmp(buf, "bye", 3), "after half-close");
	ok("shutdown(SHUT_WR)");

	/* 10: the client closes: EOF. */
	CHECK(read(fd, buf, sizeof(buf)) == 0, "EOF");
	p.fd = fd;
	p.events = POLLIN | POLLRDHUP;
	CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLIN), "POLLIN at EOF");
	ok("EOF");

	/* 11: writing to a closed peer fails: EPIPE (or ECONNRESET first), SIGPIPE without
	 * MSG_NOSIGNAL. */
	int e = 0;
	for (int i = 0; i < 200 && !e; i++) {
		if (send(fd, "z", 1, MSG_NOSIGNAL) < 0)
			e = errno;
		else
			usleep(10000);
	}
	CHECK(e == EPIPE || e == ECONNRESET, "send to a closed peer: %s", strerror(e));
	sigpipes = 0;
	errno = 0;
	CHECK(write(fd, "z", 1) == -1 && errno == EPIPE, "write after EPIPE");
	CHECK(sigpipes == 1, "SIGPIPE count %d", sigpipes);
	errno = 0;
	CHECK(send(fd, "z", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE && sigpipes == 1,
	      "MSG_NOSIGNAL");
	ok("EPIPE/SIGPIPE");
	close(fd);
}

static void client(int fd)
{
	char buf[256];

	/* 0 */
	struct iovec iov[2] = { { "hello ", 6 }, { "world", 5 } };
	CHECK(writev(fd, iov, 2) == 11, "writev");
	int outq = -1;
	/* Unacknowledged bytes: at most what was sent (the kernel); the transport counts an
	 * unacknowledged inline message as its 128-byte slot, hence the looser bound. */
	CHECK(ioctl(fd, SIOCOUTQ, &outq) == 0 && outq >= 0 && outq <= 128, "SIOCOUTQ %d", outq);
	ok("writev");
	/* 1 */
	sync_byte_recv(fd, 'A');
	ok("sync");
	/* 2: 100000 bytes in pieces, with pauses */
	static unsigned char big[100000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = pat(i);
	for (size_t o = 0; o < sizeof(big); o += 25000) {
		write_all(fd, big + o, 25000);
		usleep(20000);
	}
	ok("pieces");
	/* 3 */
	read_all(fd, buf, 3);
	CHECK(!memcmp(buf, "dup", 3), "dup bytes");
	ok("dup");
	/* 4 */
	struct iovec v[3] = { { "a", 1 }, { "bb", 2 }, { "ccc", 3 } };
	struct mmsghdr mm[3];
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < 3; i++) {
		mm[i].msg_hdr.msg_iov = &v[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	CHECK(sendmmsg(fd, mm, 3, 0) == 3 && mm[2].msg_len == 3, "sendmmsg");
	ok("sendmmsg");
	/* 5 */
	static unsigned char mb[1 << 20];
	CHECK(recv(fd, mb, sizeof(mb), MSG_WAITALL) == (ssize_t)sizeof(mb), "sendfile bytes");
	for (size_t i = 0; i < sizeof(mb); i++)
		CHECK(mb[i] == pat(i + 5), "sendfile byte %zu", i);
	ok("sendfile");
	/* 6 */
	int pp[2];
	CHECK(pipe(pp) == 0, "pipe");
	static unsigned char pg[4096];
	for (size_t i = 0; i < sizeof(pg); i++)
		pg[i] = pat(i + 9);
	write_all(pp[1], pg, sizeof(pg));
	size_t moved = 0;
	while (moved < sizeof(pg)) {
		ssize_t r = splice(pp[0], NULL, fd, NULL, sizeof(pg) - moved, 0);
		CHECK(r > 0, "splice");
		moved += (size_t)r;
	}
	close(pp[0]);
	close(pp[1]);
	ok("splice");
	/* 7 */
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(fd, &rd);
	struct timeval tv = { 0, 0 };
	CHECK(select(fd + 1, &rd, NULL, NULL, &tv) == 0, "select: nothing yet");
	sync_byte_send(fd, 'S');
	FD_SET(fd, &rd);
	tv.tv_sec = 10;
	CHECK(select(fd + 1, &rd, NULL, NULL, &tv) == 1 && FD_ISSET(fd, &rd), "select readable");
	ready_socket_and_pipe(fd);
	sync_byte_recv(fd, 'T');
	ok("select");
	/* 7a: a handler without SA_RESTART interrupts a blocking recv (EINTR); with SA_RESTART
	 * the recv goes on and returns the data. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
	sync_byte_send(fd, 'I');
	ualarm(200000, 0);
	errno = 0;
	CHECK(recv(fd, buf, 1, 0) == -1 && errno == EINTR && alarms == 1, "EINTR without SA_RESTART");
	CHECK(recv(fd, buf, 1, 0) == 1 && buf[0] == 'R', "data after EINTR");
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction restart");
	sync_byte_send(fd, 'J');
	ualarm(200000, 0);
	CHECK(recv(fd, buf, 1, 0) == 1 && buf[0] == 'S' && alarms == 2, "restarted by SA_RESTART");
	signal(SIGALRM, SIG_DFL);
	ok("EINTR / SA_RESTART");
	/* 7c: SO_SNDTIMEO: with nobody reading, a blocking send returns what it queued, then
	 * -1 EAGAIN once the timeout expires with nothing sent. */
	{
		static unsigned char fb[65536];
		memset(fb, 0xab, sizeof(fb));
		struct timeval stv = { 0, 200000 };
		CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof(stv)) == 0, "sndtimeo");
		sync_byte_send(fd, 'W');
		size_t flood = 0;
		for (int i = 0; i < 100000; i++) {
			ssize_t r = send(fd, fb, sizeof(fb), 0);
			if (r < 0) {
				CHECK(errno == EAGAIN, "send under SO_SNDTIMEO");
				break;
			}
			flood += (size_t)r;
		}
		CHECK(flood > 0 && flood < 100000u * sizeof(fb), "flood %zu", flood);
		stv.tv_usec = 0;
		CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof(stv)) == 0, "sndtimeo off");
		int ff = open(flood_flag, O_CREAT | O_WRONLY, 0600);
		CHECK(ff >= 0, "flood flag");
		close(ff);
		sync_byte_send(fd, 0);
		uint64_t sent = flood;
		write_all(fd, &sent, sizeof(sent));
	}
	ok("SO_SNDTIMEO");
	/* 7d: non-blocking 1 KiB writes with nobody reading, until EAGAIN. POLLOUT (poll, and
	 * EPOLLOUT edge-triggered) then means the next write does not fail with EAGAIN; over NTB
	 * also that it goes whole (no POLLOUT for less room than the last write's size). Once
	 * the server drains, both report it. */
	{
		static unsigned char kb[1024];
		bool ntb = getenv("NTBSOCK_CONF") != NULL;
		memset(kb, 0xcd, sizeof(kb));
		int fl = fcntl(fd, F_GETFL);
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLOUT | EPOLLET, .data.u64 = 7 }, out[2];
		CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll ET");
		CHECK(epoll_wait(ep, out, 2, 5000) == 1 && out[0].data.u64 == 7, "first edge");
		sync_byte_send(fd, 'N');
		CHECK(fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
		size_t flood = 0;
		ssize_t r;
		for (int round = 0; round < 3; round++) {
			while ((r = write(fd, kb, sizeof(kb))) > 0)
				flood += (size_t)r;
			CHECK(r < 0 && errno == EAGAIN, "non-blocking flood ends in EAGAIN");
			struct pollfd po = { .fd = fd, .events = POLLOUT };
			int pr = poll(&po, 1, 0);
			CHECK(pr >= 0, "poll");
			/* (POLLOUT may come right away when the receiver's helper thread released
			 * held-back space meanwhile — its timers do for a reader that stopped
			 * reading; over NTB it must then be room for the whole write) */
			if (pr == 1) {
				r = write(fd, kb, sizeof(kb));
				CHECK(r > 0, "POLLOUT, then EAGAIN");
				CHECK(!ntb || r == (ssize_t)sizeof(kb),
				      "POLLOUT right after EAGAIN for less than the write: %zd", r);
				flood += (size_t)r;
			}
		}
		int ff = open(nb_flag, O_CREAT | O_WRONLY, 0600);
		CHECK(ff >= 0, "nb flag");
		close(ff);
		struct pollfd po = { .fd = fd, .events = POLLOUT };
		CHECK(poll(&po, 1, 10000) == 1 && (po.revents & POLLOUT), "POLLOUT once drained");
		CHECK(epoll_wait(ep, out, 2, 10000) >= 1 && (out[0].events & EPOLLOUT),
		      "EPOLLOUT edge once drained");
		r = write(fd, kb, sizeof(kb));
		CHECK(r > 0 && (!ntb || r == (ssize_t)sizeof(kb)), "write after POLLOUT: %zd", r);
		flood += (size_t)r;
		close(ep);
		CHECK(fcntl(fd, F_SETFL, fl) == 0, "blocking again");
		sync_byte_send(fd, 0);
		uint64_t sent = flood;
		write_all(fd, &sent, sizeof(sent));
	}
	ok("non-blocking flood, POLLOUT");
	/* 7b */
	duplex(fd, 200, 100);
	ok("threads, full duplex");
	/* 8: epoll: level, one-shot, edge, several sets, nesting, MOD/DEL, EPOLLOUT. */
	{
		int ep1 = epoll_create1(0), ep2 = epoll_create1(0), ep3 = epoll_create1(0);
		int ep4 = epoll_create1(0);
		struct epoll_event ev, out[4];
		CHECK(ep1 >= 0 && ep2 >= 0 && ep3 >= 0 && ep4 >= 0, "epoll_create1");
		ev.events = EPOLLIN; ev.data.u64 = 1;
		CHECK(epoll_ctl(ep1, EPOLL_CTL_ADD, fd, &ev) == 0, "add ep1");
		ev.data.u64 = 2;
		CHECK(epoll_ctl(ep2, EPOLL_CTL_ADD, fd, &ev) == 0, "add ep2");
		errno = 0;
		CHECK(epoll_ctl(ep2, EPOLL_CTL_ADD, fd, &ev) == -1 && errno == EEXIST, "EEXIST");
		ev.data.u64 = 3;
		CHECK(epoll_ctl(ep3, EPOLL_CTL_ADD, ep1, &ev) == 0, "nest ep1 in ep3");
		ev.events = EPOLLOUT; ev.data.u64 = 9;
		CHECK(epoll_ctl(ep4, EPOLL_CTL_ADD, fd, &ev) == 0, "add ep4");
		CHECK(epoll_wait(ep4, out, 4, 5000) == 1 && (out[0].events & EPOLLOUT) &&
		      out[0].data.u64 == 9, "EPOLLOUT with room");
		CHECK(epoll_wait(ep1, out, 4, 0) == 0, "ep1 idle");
		CHECK(epoll_wait(ep3, out, 4, 0) == 0, "ep3 idle");
		sync_byte_send(fd, 'E');
		CHECK(epoll_wait(ep1, out, 4, 5000) == 1 && (out[0].events & EPOLLIN) &&
		      out[0].data.u64 == 1, "ep1 ready");
		CHECK(epoll_wait(ep1, out, 4, 0) == 1, "level-triggered: again");
		CHECK(epoll_wait(ep2, out, 4, 0) == 1 && out[0].data.u64 == 2, "second set");
		CHECK(epoll_wait(ep3, out, 4, 0) == 1 && out[0].data.u64 == 3, "nested set");
		struct pollfd pe = { .fd = ep1, .events = POLLIN };
		CHECK(poll(&pe, 1, 0) == 1 && (pe.revents & POLLIN), "poll on an epoll fd");
		ev.events = EPOLLIN | EPOLLONESHOT; ev.data.u64 = 4;
		CHECK(epoll_ctl(ep1, EPOLL_CTL_MOD, fd, &ev) == 0, "mod oneshot");
		CHECK(epoll_wait(ep1, out, 4, 0) == 1 && out[0].data.u64 == 4, "oneshot fires");
		CHECK(epoll_wait(ep1, out, 4, 0) == 0, "oneshot disarmed");
		CHECK(epoll_ctl(ep1, EPOLL_CTL_MOD, fd, &ev) == 0, "re-arm");
		CHECK(epoll_wait(ep1, out, 4, 0) == 1, "re-armed fires");
		ev.events = EPOLLIN | EPOLLET; ev.data.u64 = 5;
		CHECK(epoll_ctl(ep2, EPOLL_CTL_MOD, fd, &ev) == 0, "mod edge");
		CHECK(epoll_wait(ep2, out, 4, 0) == 1 && out[0].data.u64 == 5, "edge fires");
		CHECK(epoll_wait(ep2, out, 4, 0) == 0, "edge: no new data, no event");
		CHECK(epoll_ctl(ep1, EPOLL_CTL_DEL, fd, NULL) == 0, "del");
		CHECK(epoll_wait(ep1, out, 4, 0) == 0, "deleted: no event");
		errno = 0;
		CHECK(epoll_ctl(ep1, EPOLL_CTL_DEL, fd, NULL) == -1 && errno == ENOENT, "ENOENT");
		CHECK(read(fd, buf, 1) == 1 && buf[0] == 'x', "x");
		sync_byte_send(fd, 'F');
		CHECK(epoll_wait(ep2, out, 4, 5000) == 1 && out[0].data.u64 == 5, "new data: edge");
		CHECK(read(fd, buf, 1) == 1 && buf[0] == 'y', "y");
		close(ep1); close(ep2); close(ep3); close(ep4);
	}
	ok("epoll");

	/* 9: data, then EOF from the server's SHUT_WR; we may still send. */
	read_all(fd, buf, 4);
	CHECK(!memcmp(buf, "last", 4), "last");
	CHECK(read(fd, buf, sizeof(buf)) == 0, "EOF after SHUT_WR");
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLIN) && (p.revents & POLLRDHUP),
	      "POLLIN|POLLRDHUP at EOF (revents %#x)", p.revents);
	write_all(fd, "bye", 3);
	ok("half-close");
	/* 10 */
	close(fd);
	ok("close");
}

/* B: a listener that stops listening (shutdown) but is still advertised to the peer host. */
static int dead_listener(struct sockaddr_in *sa)
{
	int one = 1;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(bind(s, (struct sockaddr *)sa, sizeof(*sa)) == 0, "bind");
	CHECK(listen(s, 8) == 0, "listen");
	CHECK(shutdown(s, SHUT_RDWR) == 0, "shutdown listener");
	printf("deadlisten: ready\n");
	fflush(stdout);
	pause();
	return 0;
}

/* A: connects that the kernel refuses report it like the kernel: blocking → ECONNREFUSED;
 * non-blocking → EINPROGRESS, then epoll EPOLLOUT|EPOLLERR and SO_ERROR once. */
static int refused(struct sockaddr_in *sa)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	errno = 0;
	CHECK(connect(s, (struct sockaddr *)sa, sizeof(*sa)) == -1 && errno == ECONNREFUSED,
	      "blocking connect refused");
	close(s);
	ok("blocking refused");

	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int r = connect(s, (struct sockaddr *)sa, sizeof(*sa));
	CHECK(r == -1 && (errno == EINPROGRESS || errno == ECONNREFUSED), "non-blocking connect");
	if (errno == EINPROGRESS) {
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = 7 }, out;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0, "epoll add");
		CHECK(epoll_wait(ep, &out, 1, 5000) == 1 && (out.events & EPOLLERR) &&
		      out.data.u64 == 7, "EPOLLERR for a refused connect (events %#x)", out.events);
		int err = 0;
		socklen_t el = sizeof(err);
		CHECK(getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == ECONNREFUSED,
		      "SO_ERROR %d", err);
		el = sizeof(err);
		CHECK(getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0,
		      "SO_ERROR reported once (%d)", err);
		close(ep);
	}
	close(s);
	ok("non-blocking refused");
	return 0;
}

/* SO_LINGER {1, 0}: close() resets; the peer reads ECONNRESET, not a clean EOF. Before it, the
 * accepted socket's SO_RCVTIMEO is the one the listener had (the kernel copies it): a read with
 * nothing sent ends with EAGAIN (else it would wait for ever: the client sends nothing before
 * the 'L'). */
static int linger_server(struct sockaddr_in *sa)
{
	int one = 1;
	char buf[4096];
	struct timeval tv = { 0, 200000 };
	int s = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "listener rcvtimeo");
	CHECK(bind(s, (struct sockaddr *)sa, sizeof(*sa)) == 0, "bind");
	CHECK(listen(s, 8) == 0, "listen");
	/* a buffer too short for the address: the kernel writes what fits and the full length */
	struct sockaddr_in pa, pb;
	socklen_t pal = 4, pbl = sizeof(pb);
	memset(&pa, 0xee, sizeof(pa));
	int c;
	while ((c = accept(s, (struct sockaddr *)&pa, &pal)) < 0 && errno == EAGAIN)
		pal = 4; /* (the listener's SO_RCVTIMEO bounds accept() too) */
	CHECK(c >= 0, "accept");
	CHECK(getpeername(c, (struct sockaddr *)&pb, &pbl) == 0, "getpeername");
	CHECK(pal == sizeof(pa) && !memcmp(&pa, &pb, 4) && pa.sin_addr.s_addr == 0xeeeeeeeeu,
	      "accept's truncated address (%u bytes)", (unsigned)pal);
	ok("accept's address truncated as the kernel does");
	ssize_t n = read(c, buf, 1);
	CHECK(n == -1 && errno == EAGAIN, "read with the listener's SO_RCVTIMEO: %zd", n);
	ok("SO_RCVTIMEO inherited from the listener");
	tv.tv_usec = 0;
	CHECK(setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "rcvtimeo off");
	sync_byte_send(c, 'L');
	usleep(300000); /* the client has closed by now */
	ssize_t r;
	while ((r = read(c, buf, sizeof(buf))) > 0)
		;
	CHECK(r == -1 && errno == ECONNRESET, "read after an abortive close: %zd", r);
	ok("SO_LINGER 0 → ECONNRESET");
	close(c);
	return 0;
}

static int linger_client(struct sockaddr_in *sa)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(s, (struct sockaddr *)sa, sizeof(*sa)) == 0, "connect");
	sync_byte_recv(s, 'L');
	write_all(s, "unread", 6);
	struct linger lg = { 1, 0 };
	CHECK(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0, "SO_LINGER");
	CHECK(close(s) == 0, "close");
	ok("abortive close");
	return 0;
}

/* --- the first write after connect (firstserver / firstclient) --------------------------------
 * The client makes FIRST_N connections one after the other (offers carry data rings while the
 * pool keeps more than half of them free beside what offers hold: 8 of the tests' 32, and the
 * connections of earlier cases may still hold some: 4 is well within) and, right after each
 * connect(), makes the socket non-blocking and writes FIRST_LEN bytes at once, before the
 * server has accepted any (it waits for the client's flag file): a kernel socket takes such a
 * write whole (its buffers), so must an NTB connection (a data ring that came with the set-up,
 * not one asked for at the first large write: EAGAIN meanwhile). The server then accepts them
 * all and checks every byte. */
#define FIRST_N   4
#define FIRST_LEN (32u << 10)
static char first_flag[80];
static unsigned char first_byte(unsigned conn, unsigned i)
{
	return (unsigned char)(conn * 31u + i * 7u + 1u);
}

static int first_client(struct sockaddr_in *sa)
{
	static unsigned char buf[FIRST_LEN];
	int fds[FIRST_N], whole = 0;
	for (unsigned k = 0; k < FIRST_N; k++) {
		fds[k] = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fds[k] >= 0, "socket");
		int r = -1;
		for (int i = 0; i < 100 && r < 0; i++)
			if ((r = connect(fds[k], (struct sockaddr *)sa, sizeof(*sa))) < 0)
				usleep(50000); /* (the listener not up yet: only before the first) */
		CHECK(r == 0, "connect %u", k);
		CHECK(fcntl(fds[k], F_SETFL, fcntl(fds[k], F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
		for (unsigned i = 0; i < FIRST_LEN; i++)
			buf[i] = first_byte(k, i);
		ssize_t n = send(fds[k], buf, FIRST_LEN, 0);
		if (n == (ssize_t)FIRST_LEN)
			whole++;
		else
			printf("firstclient: connection %u: send right after connect: %zd (%s)\n", k, n,
			       n < 0 ? strerror(errno) : "partial");
		CHECK(n == (ssize_t)FIRST_LEN, "the first write of connection %u not taken whole", k);
	}
	FILE *f = fopen(first_flag, "w");
	CHECK(f != NULL, "flag");
	fclose(f);
	printf("firstclient: %d of %d writes of %u bytes right after connect taken whole\n", whole,
	       FIRST_N, FIRST_LEN);
	for (unsigned k = 0; k < FIRST_N; k++) {
		char c;
		/* (blocking again: the server's end of stream once it checked everything) */
		CHECK(fcntl(fds[k], F_SETFL, fcntl(fds[k], F_GETFL) & ~O_NONBLOCK) == 0, "blocking");
		CHECK(read(fds[k], &c, 1) == 0, "end of stream from the server");
		close(fds[k]);
	}
	return 0;
}

static int first_server(struct sockaddr_in *sa)
{
	static unsigned char buf[FIRST_LEN];
	int one = 1;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(bind(s, (struct sockaddr *)sa, sizeof(*sa)) == 0, "bind");
	CHECK(listen(s, FIRST_N + 8) == 0, "listen");
	for (int i = 0; i < 600 && access(first_flag, F_OK) != 0; i++)
		usleep(50000);
	CHECK(access(first_flag, F_OK) == 0, "the client's flag");
	unlink(first_flag);
	for (unsigned k = 0; k < FIRST_N; k++) {
		int c = accept(s, NULL, NULL);
		CHECK(c >= 0, "accept");
		size_t got = 0;
		while (got < FIRST_LEN) {
			ssize_t r = read(c, buf + got, FIRST_LEN - got);
			CHECK(r > 0, "read: %zd", r);
			got += (size_t)r;
		}
		/* (accepted in the order they connected: the backlog is a queue) */
		for (unsigned i = 0; i < FIRST_LEN; i++)
			CHECK(buf[i] == first_byte(k, i), "connection %u: byte %u", k, i);
		close(c);
	}
	ok("every first write arrived exact");
	close(s);
	return 0;
}

/* --- urgent data (oobserver / oobclient) --------------------------------------------------------
 * The client writes OOB_BULK bytes, then one urgent byte with send(MSG_OOB) (non-blocking: it
 * waits for POLLOUT on EAGAIN, as a program must), then "after", and closes. The server (with
 * SO_OOBINLINE for role oobserver-inline) reads the bulk, then prints what poll (POLLPRI),
 * select (exceptfds), SIOCATMARK, SIGURG (F_SETOWN) and recv(MSG_OOB) say and what the reads
 * return, one line each: the test compares the transcript with kernel TCP's. Over NTB the
 * urgent byte moves the connection to its kernel socket (only the kernel's TCP carries it),
 * every byte before it first. */
#define OOB_BULK (200u << 10)
static volatile sig_atomic_t sigurgs;
static void on_sigurg(int sig)
{
	(void)sig;
	sigurgs++;
}

static int oob_client(struct sockaddr_in *sa)
{
	static unsigned char bulk[OOB_BULK];
	int s = socket(AF_INET, SOCK_STREAM, 0), r = -1;
	CHECK(s >= 0, "socket");
	for (int i = 0; i < 100 && r < 0; i++)
		if ((r = connect(s, (struct sockaddr *)sa, sizeof(*sa))) < 0)
			usleep(50000);
	CHECK(r == 0, "connect");
	for (unsigned i = 0; i < OOB_BULK; i++)
		bulk[i] = (unsigned char)(i * 11u + 7u);
	write_all(s, bulk, OOB_BULK);
	CHECK(fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	ssize_t n;
	while ((n = send(s, "!", 1, MSG_OOB)) < 0 && errno == EAGAIN) {
		struct pollfd p = { .fd = s, .events = POLLOUT };
		CHECK(poll(&p, 1, 10000) == 1, "POLLOUT after EAGAIN of send(MSG_OOB)");
	}
	CHECK(n == 1, "send(MSG_OOB): %zd (%s)", n, n < 0 ? strerror(errno) : "");
	CHECK(fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) == 0, "blocking");
	write_all(s, "after", 5);
	close(s);
	ok("urgent byte sent between the bulk and \"after\"");
	return 0;
}

static int oob_server(struct sockaddr_in *sa, bool inl)
{
	static unsigned char bulk[OOB_BULK];
	int one = 1, at = -1;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sigaction su;
	memset(&su, 0, sizeof(su));
	su.sa_handler = on_sigurg;
	su.sa_flags = SA_RESTART;
	sigaction(SIGURG, &su, NULL);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(bind(s, (struct sockaddr *)sa, sizeof(*sa)) == 0, "bind");
	CHECK(listen(s, 8) == 0, "listen");
	int c = accept(s, NULL, NULL);
	CHECK(c >= 0, "accept");
	CHECK(fcntl(c, F_SETOWN, getpid()) == 0, "F_SETOWN");
	if (inl)
		CHECK(setsockopt(c, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)) == 0, "OOBINLINE");
	read_all(c, bulk, OOB_BULK);
	for (unsigned i = 0; i < OOB_BULK; i++)
		CHECK(bulk[i] == (unsigned char)(i * 11u + 7u), "bulk byte %u", i);
	printf("oob: bulk of %u bytes exact\n", OOB_BULK);
	struct pollfd p = { .fd = c, .events = POLLPRI };
	int pr;
	/* (SIGURG may end the wait: the urgent byte comes while we read the bulk, or while we
	 * wait here, on kernel TCP as over NTB, where the move makes it a little later) */
	while ((pr = poll(&p, 1, 10000)) < 0 && errno == EINTR)
		;
	printf("oob: poll(POLLPRI) %d revents%s%s\n", pr, p.revents & POLLPRI ? " PRI" : "",
	       p.revents & POLLIN ? " IN" : "");
	fd_set ex;
	FD_ZERO(&ex);
	FD_SET(c, &ex);
	struct timeval tv = { 5, 0 };
	int sr = select(c + 1, NULL, NULL, &ex, &tv); /* (the byte is there: no wait) */
	printf("oob: select exceptfds %d %s\n", sr, FD_ISSET(c, &ex) ? "set" : "clear");
	CHECK(ioctl(c, SIOCATMARK, &at) == 0, "SIOCATMARK");
	printf("oob: SIOCATMARK %d\n", at);
	char o = 0, rest[16];
	ssize_t n = recv(c, &o, 1, MSG_OOB);
	if (n == 1)
		printf("oob: recv(MSG_OOB) '%c'\n", o);
	else
		printf("oob: recv(MSG_OOB) %zd %s\n", n, strerror(errno));
	size_t got = 0, want = inl ? 6 : 5;
	while (got < want) {
		ssize_t r = read(c, rest + got, want - got);
		CHECK(r > 0, "read after the mark: %zd", r);
		got += (size_t)r;
	}
	rest[got] = 0;
	printf("oob: then read \"%s\"\n", rest);
	CHECK(read(c, rest, 1) == 0, "end of stream");
	printf("oob: end of stream; SIGURG %s\n", sigurgs ? "delivered" : "none");
	close(c);
	close(s);
	return 0;
}

/* --- readiness transcripts (edgeserver / edgeclient) -------------------------------------------
 * The client drives: it sends the server two-byte commands and prints what epoll (level, edge,
 * one-shot, nested, shared by threads), select, poll, MSG_PEEK and SIOCINQ report, one line per
 * call. The test runs the pair on kernel TCP first, then over NTB, and compares the client's
 * transcripts. Every step is deterministic on the kernel: the server's writes are separated by
 * sleeps (each one arrives on its own), a step that expects nothing waits for nothing new. */

static unsigned edge_pos; /* bytes the server wrote so far: the content is edge_byte(pos) */
static unsigned char edge_byte(unsigned i) { return (unsigned char)('a' + i % 26); }
static char edge_flag[80]; /* the client's flood is over: the server drains (command 'D') */

static void edge_server(int fd)
{
	unsigned char cmd[2], b[64];
	for (;;) {
		ssize_t r = recv(fd, cmd, 2, MSG_WAITALL);
		if (r == 0)
			return;
		CHECK(r == 2, "command: %zd", r);
		switch (cmd[0]) {
		case 'w': /* one write of ARG bytes */
		case 'W': /* ARG writes of 4 bytes, 150 ms apart */
			for (unsigned k = 0; k < (cmd[0] == 'w' ? 1u : cmd[1]); k++) {
				unsigned n = cmd[0] == 'w' ? cmd[1] : 4;
				unsigned char *p = n <= sizeof(b) ? b : malloc(n);
				CHECK(p != NULL, "malloc");
				for (unsigned i = 0; i < n; i++)
					p[i] = edge_byte(edge_pos + i);
				edge_pos += n;
				if (k)
					usleep(150000);
				write_all(fd, p, n);
				if (p != b)
					free(p);
			}
			break;
		case 'D': { /* the client floods; drain once it says so, up to its 0 byte */
			static unsigned char fb[65536];
			for (int i = 0; i < 600 && access(edge_flag, F_OK) != 0; i++)
				usleep(20000);
			CHECK(access(edge_flag, F_OK) == 0, "edge flag %s", edge_flag);
			unlink(edge_flag);
			for (bool end = false; !end;) {
				/* (peek, so that the next command after the 0 stays queued) */
				r = recv(fd, fb, sizeof(fb), MSG_PEEK);
				CHECK(r > 0, "drain peek");
				unsigned char *z = memchr(fb, 0, (size_t)r);
				size_t take = z ? (size_t)(z - fb) + 1 : (size_t)r;
				CHECK(recv(fd, fb, take, MSG_WAITALL) == (ssize_t)take, "drain");
				end = z != NULL;
			}
			break;
		}
		case 'n':
			break;
		default:
			CHECK(0, "command %c", cmd[0]);
		}
	}
}

static void edge_cmd(int fd, char op, unsigned arg)
{
	unsigned char c[2] = { (unsigned char)op, (unsigned char)arg };
	write_all(fd, c, 2);
}

static const char *ev_names(uint32_t ev)
{
	static char s[64];
	s[0] = 0;
	if (ev & EPOLLIN) strcat(s, "IN|");
	if (ev & EPOLLOUT) strcat(s, "OUT|");
	if (ev & EPOLLRDHUP) strcat(s, "RDHUP|");
	if (ev & EPOLLHUP) strcat(s, "HUP|");
	if (ev & EPOLLERR) strcat(s, "ERR|");
	if (ev & ~(uint32_t)(EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		strcat(s, "other|");
	size_t n = strlen(s);
	if (n)
		s[n - 1] = 0;
	else
		strcpy(s, "-");
	return s;
}

/* epoll_wait on EP (what the transcript says: count, tags and events), TIMEOUT ms */
static int ew(const char *what, int ep, int timeout)
{
	struct epoll_event out[4];
	int n = epoll_wait(ep, out, 4, timeout);
	printf("%s: epoll_wait(%d) = %d", what, timeout, n);
	for (int i = 0; i < n; i++)
		printf(" [%llu %s]", (unsigned long long)out[i].data.u64, ev_names(out[i].events));
	printf("\n");
	fflush(stdout);
	return n;
}

static void ep_set(int ep, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };
	CHECK(epoll_ctl(ep, op, fd, &ev) == 0, "epoll_ctl %d fd %d", op, fd);
}

static void inq(const char *what, int fd)
{
	int n = -1;
	CHECK(ioctl(fd, SIOCINQ, &n) == 0, "SIOCINQ");
	printf("%s: SIOCINQ %d\n", what, n);
	fflush(stdout);
}

/* Read (or peek) up to N bytes; print what came. Returns the bytes read (0 for a peek). */
static unsigned rd(const char *what, int fd, size_t n, int flags)
{
	char b[1024];
	CHECK(n <= sizeof(b), "rd size");
	ssize_t r = recv(fd, b, n, flags);
	printf("%s: recv(%zu%s) = %zd", what, n, flags & MSG_PEEK ? ", MSG_PEEK" : "", r);
	if (r > 0 && r <= 40)
		printf(" \"%.*s\"", (int)r, b);
	else if (r > 40)
		printf(" \"%.20s...%.10s\"", b, b + r - 10);
	printf("\n");
	fflush(stdout);
	return r > 0 && !(flags & MSG_PEEK) ? (unsigned)r : 0;
}

static void sel_poll(const char *what, int fd)
{
	fd_set rd, wr;
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(fd, &rd);
	FD_SET(fd, &wr);
	struct timeval tv = { 0, 0 };
	int n = select(fd + 1, &rd, &wr, NULL, &tv);
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	int m = poll(&p, 1, 0);
	printf("%s: select = %d%s%s, poll = %d%s%s%s\n", what, n, FD_ISSET(fd, &rd) ? " rd" : "",
	       FD_ISSET(fd, &wr) ? " wr" : "", m, p.revents & POLLIN ? " IN" : "",
	       p.revents & POLLOUT ? " OUT" : "", p.revents & POLLRDHUP ? " RDHUP" : "");
	fflush(stdout);
}

/* Wait until FD has N bytes to read (the end of a server write of several segments). */
static void wait_inq(int fd, int n)
{
	int have = -1;
	for (int i = 0; i < 2500; i++) {
		CHECK(ioctl(fd, SIOCINQ, &have) == 0, "SIOCINQ");
		if (have >= n)
			return;
		usleep(2000);
	}
	CHECK(0, "%d bytes never arrived (%d)", n, have);
}

/* Drain what is left of the server's writes (so that the next case starts empty). */
static void drain_to(int fd, unsigned *pos, unsigned until)
{
	char b[1024];
	while (*pos < until) {
		size_t want = until - *pos < sizeof(b) ? until - *pos : sizeof(b);
		ssize_t r = recv(fd, b, want, 0);
		CHECK(r > 0, "drain_to");
		*pos += (unsigned)r;
	}
}

struct ep_thread {
	int ep;
	_Atomic int events;
	_Atomic bool stop;
};

static void *ep_thread_main(void *arg)
{
	struct ep_thread *t = arg;
	while (!atomic_load(&t->stop)) {
		struct epoll_event ev;
		if (epoll_wait(t->ep, &ev, 1, 100) == 1)
			atomic_fetch_add(&t->events, 1);
	}
	return NULL;
}

static void edge_client(int fd)
{
	unsigned got = 0, sent = 0; /* bytes of the server's read; of its writes */

	/* E1: EPOLLIN|EPOLLET: a partial read raises nothing; new data while unread data remains
	 * raises an edge (a reader that waits for the rest of a message). */
	{
		int ep = epoll_create1(0);
		ep_set(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 1);
		ew("E1 idle", ep, 0);
		edge_cmd(fd, 'w', 10); sent += 10;
		ew("E1 header arrives", ep, 5000);
		ew("E1 again", ep, 0);
		got += rd("E1 read part", fd, 4, 0);
		inq("E1", fd);
		ew("E1 after partial read", ep, 0);
		edge_cmd(fd, 'w', 10); sent += 10;
		ew("E1 rest arrives, unread data left", ep, 5000);
		ew("E1 again", ep, 0);
		inq("E1", fd);
		got += rd("E1 read all", fd, 16, 0);
		ew("E1 after reading all", ep, 0);
		drain_to(fd, &got, sent);
		close(ep);
	}
	/* E2: each arrival (writes 150 ms apart) is an edge, read or not. */
	{
		int ep = epoll_create1(0);
		ep_set(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET | EPOLLRDHUP, 2);
		ew("E2 idle", ep, 0);
		edge_cmd(fd, 'W', 3); sent += 12;
		ew("E2 first", ep, 5000);
		ew("E2 second", ep, 5000);
		ew("E2 third", ep, 5000);
		ew("E2 no more", ep, 300);
		inq("E2", fd);
		got += rd("E2 read", fd, 12, 0);
		ew("E2 after reading all", ep, 0);
		drain_to(fd, &got, sent);
		close(ep);
	}
	/* E3: EPOLLOUT edges. Registered writable: one event; our writes and their
	 * acknowledgements raise none; an arrival reports IN with OUT; EAGAIN, then room, is an
	 * edge (once). */
	{
		int ep = epoll_create1(0);
		ep_set(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLET, 3);
		ew("E3 added", ep, 0);
		ew("E3 again", ep, 0);
		edge_cmd(fd, 'n', 0);
		usleep(100000);
		ew("E3 after a write", ep, 0);
		edge_cmd(fd, 'w', 8); sent += 8;
		ew("E3 arrival", ep, 5000);
		got += rd("E3 read", fd, 8, 0);
		ew("E3 after reading all", ep, 0);
		drain_to(fd, &got, sent);
		close(ep);
		ep = epoll_create1(0);
		ep_set(ep, EPOLL_CTL_ADD, fd, EPOLLOUT | EPOLLET, 4);
		ew("E3 out-only added", ep, 0);
		edge_cmd(fd, 'D', 0);
		int fl = fcntl(fd, F_GETFL);
		CHECK(fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
		static unsigned char kb[1024];
		memset(kb, 0xcd, sizeof(kb));
		ssize_t r;
		while ((r = write(fd, kb, sizeof(kb))) > 0)
			;
		CHECK(r < 0 && errno == EAGAIN, "flood ends in EAGAIN");
		printf("E3 flood: EAGAIN\n");
		ew("E3 full", ep, 0);
		int ff = open(edge_flag, O_CREAT | O_WRONLY, 0600);
		CHECK(ff >= 0, "edge flag");
		close(ff);
		ew("E3 drained", ep, 10000);
		ew("E3 again", ep, 200);
		CHECK(fcntl(fd, F_SETFL, fl) == 0, "blocking again");
		write_all(fd, "", 1); /* the end of the flood */
		usleep(100000);
		ew("E3 after a write", ep, 0);
		close(ep);
	}
	/* E4: EPOLLONESHOT (edge and level) and its re-arming by EPOLL_CTL_MOD. */
	{
		int ep = epoll_create1(0);
		ep_set(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET | EPOLLONESHOT, 5);
		ew("E4 idle", ep, 0);
		edge_cmd(fd, 'w', 6); sent += 6;
		ew("E4 arrival", ep, 5000);
		got += rd("E4 read part", fd, 2, 0);
		edge_cmd(fd, 'w', 6); sent += 6;
		ew("E4 disarmed", ep, 300);
		ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLET | EPOLLONESHOT, 6);
		ew("E4 re-armed, data unread", ep, 0);
		ew("E4 fired", ep, 0);
		got += rd("E4 read part", fd, 3, 0);
		ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLET | EPOLLONESHOT, 7);
		ew("E4 re-armed after a partial read", ep, 0);
		ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLET, 8);
		ew("E4 edge, not one-shot", ep, 0);
		got += rd("E4 read part", fd, 3, 0);
		ew("E4 after a partial read", ep, 0);
		edge_cmd(fd, 'w', 4); sent += 4;
		ew("E4 arrival", ep, 5000);
		ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 9);
		ew("E4 level one-shot", ep, 0);
		ew("E4 disarmed", ep, 0);
		inq("E4", fd);
		drain_to(fd, &got, sent);
		ep_set(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLET | EPOLLONESHOT, 10);
		ew("E4 re-armed, nothing to read", ep, 0);
		edge_cmd(fd, 'w', 4); sent += 4;
		ew("E4 arrival", ep, 5000);
		drain_to(fd, &got, sent);
		close(ep);
	}
	/* E5: nested sets: an edge-triggered entry in an inner set; the outer set sees the inner
	 * one readable while it holds an event not yet collected. */
	{
		int in = epoll_create1(0), out = epoll_create1(0), oet = epoll_create1(0);
		ep_set(in, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 11);
		ep_set(out, EPOLL_CTL_ADD, in, EPOLLIN, 12);
		ew("E5 outer idle", out, 0);
		edge_cmd(fd, 'w', 8); sent += 8;
		ew("E5 outer", out, 5000);
		ew("E5 outer again", out, 0);
		ew("E5 inner", in, 0);
		ew("E5 outer after the inner's event", out, 0);
		struct pollfd p = { .fd = in, .events = POLLIN };
		printf("E5 poll(inner) = %d\n", poll(&p, 1, 0));
		got += rd("E5 read part", fd, 3, 0);
		ew("E5 outer after a partial read", out, 0);
		ew("E5 inner after a partial read", in, 0);
		edge_cmd(fd, 'w', 8); sent += 8;
		ew("E5 outer, new data", out, 5000);
		ew("E5 inner, new data", in, 0);
		ew("E5 outer", out, 0);
		drain_to(fd, &got, sent);
		/* an edge-triggered outer set over a level-triggered inner entry: every arrival */
		ep_set(in, EPOLL_CTL_MOD, fd, EPOLLIN, 13);
		ep_set(oet, EPOLL_CTL_ADD, in, EPOLLIN | EPOLLET, 14);
		ew("E5 edge outer idle", oet, 0);
		edge_cmd(fd, 'W', 2); sent += 8;
		ew("E5 edge outer first", oet, 5000);
		ew("E5 edge outer second", oet, 5000);
		ew("E5 edge outer no more", oet, 300);
		ew("E5 inner level", in, 0);
		drain_to(fd, &got, sent);
		close(oet);
		close(out);
		close(in);
	}
	/* E6: one edge-triggered set, two threads waiting in it: each arrival wakes one. */
	{
		struct ep_thread t = { .ep = epoll_create1(0) };
		pthread_t th[2];
		ep_set(t.ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 15);
		for (int i = 0; i < 2; i++)
			CHECK(pthread_create(&th[i], NULL, ep_thread_main, &t) == 0, "thread");
		usleep(100000);
		edge_cmd(fd, 'w', 6); sent += 6;
		usleep(400000);
		printf("E6 threads: %d event(s)\n", atomic_load(&t.events));
		got += rd("E6 read part", fd, 2, 0);
		usleep(300000);
		printf("E6 threads after a partial read: %d event(s)\n", atomic_load(&t.events));
		edge_cmd(fd, 'w', 6); sent += 6;
		usleep(400000);
		printf("E6 threads after new data: %d event(s)\n", atomic_load(&t.events));
		atomic_store(&t.stop, true);
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		drain_to(fd, &got, sent);
		close(t.ep);
	}
	/* S: select and poll after partial reads; MSG_PEEK then a partial read; SIOCINQ after
	 * each; an edge-triggered set beside them sees no event from any of it. */
	{
		int ep = epoll_create1(0);
		ep_set(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 16);
		sel_poll("S idle", fd);
		inq("S idle", fd);
		edge_cmd(fd, 'w', 12); sent += 12;
		ew("S arrival", ep, 5000);
		inq("S", fd);
		sel_poll("S", fd);
		rd("S peek", fd, 5, MSG_PEEK);
		inq("S after peek", fd);
		sel_poll("S after peek", fd);
		ew("S after peek", ep, 0);
		got += rd("S read part", fd, 3, 0);
		inq("S after a partial read", fd);
		sel_poll("S after a partial read", fd);
		ew("S after a partial read", ep, 0);
		rd("S peek more than there is", fd, 20, MSG_PEEK);
		inq("S after peek", fd);
		edge_cmd(fd, 'w', 4); sent += 4;
		ew("S second arrival", ep, 5000);
		rd("S peek across both writes", fd, 20, MSG_PEEK);
		inq("S", fd);
		got += rd("S read part", fd, 5, 0);
		inq("S after a partial read", fd);
		sel_poll("S after a partial read", fd);
		got += rd("S read the rest", fd, 100, 0);
		inq("S after reading all", fd);
		sel_poll("S after reading all", fd);
		ew("S after reading all", ep, 0);
		drain_to(fd, &got, sent);
		/* a data-ring message over NTB (more than an inline slot holds) */
		edge_cmd(fd, 'w', 200); sent += 200;
		ew("S 200 bytes", ep, 5000);
		wait_inq(fd, 200);
		inq("S", fd);
		rd("S peek", fd, 50, MSG_PEEK);
		inq("S after peek", fd);
		got += rd("S read part", fd, 30, 0);
		inq("S after a partial read", fd);
		sel_poll("S after a partial read", fd);
		ew("S after a partial read", ep, 0);
		rd("S peek", fd, 300, MSG_PEEK);
		got += rd("S read part", fd, 169, 0);
		inq("S one byte left", fd);
		sel_poll("S one byte left", fd);
		got += rd("S read the last byte", fd, 1, 0);
		inq("S after reading all", fd);
		sel_poll("S after reading all", fd);
		ew("S after reading all", ep, 0);
		drain_to(fd, &got, sent);
		close(ep);
	}
	CHECK(got == sent, "read %u of %u bytes", got, sent);
	printf("edge transcript: end\n");
	close(fd);
}

/* --- epoll_wait with more fds ready than maxevents (fairserver / fairclient) --------------------
 * FAIR_N connections with a byte unread (level-triggered EPOLLIN) and one non-blocking connect
 * that completed (edge-triggered EPOLLOUT, joined before the connect, as nginx and Go do) in one
 * set; epoll_wait with maxevents FAIR_MAX, FAIR_CALLS times. The kernel keeps ready fds in a
 * list and sends a reported one to its back: each is reported within ceil(ready / FAIR_MAX)
 * calls, in the order they became ready. The client prints which fds each call reports. */
#define FAIR_N 6
#define FAIR_MAX 2
#define FAIR_CALLS 6

static void fair_server(int ls, int ctl)
{
	int c[FAIR_N + 1];

	for (int i = 0; i < FAIR_N; i++) {
		c[i] = accept(ls, NULL, NULL);
		CHECK(c[i] >= 0, "accept %d", i);
		write_all(c[i], "x", 1);
	}
	c[FAIR_N] = accept(ls, NULL, NULL); /* the non-blocking connect: complete on both ends */
	CHECK(c[FAIR_N] >= 0, "accept of the non-blocking connect");
	write_all(ctl, "A", 1);
	sync_byte_recv(ctl, 'E');
	for (int i = 0; i <= FAIR_N; i++)
		close(c[i]);
	close(ctl);
}

static void fair_client(int ctl, const struct sockaddr_in *sa)
{
	struct epoll_event ev, evs[FAIR_MAX];
	int c[FAIR_N + 1];
	int ep = epoll_create1(0);

	CHECK(ep >= 0, "epoll_create1");
	for (int i = 0; i < FAIR_N; i++) {
		c[i] = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(c[i] >= 0 && connect(c[i], (const struct sockaddr *)sa, sizeof(*sa)) == 0,
		      "connect %d", i);
		/* its byte is there before it joins the set: the set's ready list is in join order */
		struct pollfd p = { .fd = c[i], .events = POLLIN };
		CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLIN), "byte on %d", i);
		ev.events = EPOLLIN;
		ev.data.u64 = (uint64_t)i;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c[i], &ev) == 0, "epoll add %d", i);
	}
	c[FAIR_N] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(c[FAIR_N] >= 0, "socket");
	ev.events = EPOLLOUT | EPOLLET;
	ev.data.u64 = FAIR_N;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c[FAIR_N], &ev) == 0, "epoll add before connect");
	int r = connect(c[FAIR_N], (const struct sockaddr *)sa, sizeof(*sa));
	CHECK(r == 0 || errno == EINPROGRESS, "non-blocking connect");
	sync_byte_recv(ctl, 'A'); /* the server accepted it: the handshake is complete */
	/* TCP_DEFER_ACCEPT as the kernel leaves a connected socket: off (ntbsock's own use of
	 * it during the set-up does not show) */
	for (int i = 0; i <= FAIR_N; i++) {
		int v = -1;
		socklen_t vl = sizeof(v);

		CHECK(getsockopt(c[i], IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &vl) == 0 && v == 0 &&
		      vl == sizeof(v), "TCP_DEFER_ACCEPT of connection %d: %d", i, v);
	}
	for (int k = 1; k <= FAIR_CALLS; k++) {
		int n = epoll_wait(ep, evs, FAIR_MAX, 5000);
		CHECK(n > 0, "epoll_wait %d: %d", k, n);
		printf("fair: call %d:", k);
		for (int j = 0; j < n; j++)
			printf(" %llu%s", (unsigned long long)evs[j].data.u64,
			       evs[j].events == EPOLLIN ? "in" : evs[j].events == EPOLLOUT ? "out" : "?");
		printf("\n");
	}
	fflush(stdout);
	int err = -1;
	socklen_t el = sizeof(err);
	CHECK(getsockopt(c[FAIR_N], SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0,
	      "the non-blocking connect's SO_ERROR %d", err);
	write_all(ctl, "E", 1);
	for (int i = 0; i <= FAIR_N; i++)
		close(c[i]);
	close(ep);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: pl_sem server|client ADDR PORT\n");
		return 2;
	}
	struct sigaction sp;
	memset(&sp, 0, sizeof(sp));
	sp.sa_handler = on_sigpipe;
	sp.sa_flags = SA_RESTART;
	sigaction(SIGPIPE, &sp, NULL);
	role = argv[1];
	struct sockaddr_in sa = addr_of(argv[2], argv[3]);
	snprintf(flood_flag, sizeof(flood_flag), "/tmp/pl_sem-flood-%s", argv[3]);
	snprintf(nb_flag, sizeof(nb_flag), "/tmp/pl_sem-nbflood-%s", argv[3]);
	snprintf(edge_flag, sizeof(edge_flag), "/tmp/pl_sem-edgeflood-%s", argv[3]);
	if (!strcmp(role, "deadlisten"))
		return dead_listener(&sa);
	if (!strcmp(role, "refused"))
		return refused(&sa);
	if (!strcmp(role, "lingerserver"))
		return linger_server(&sa);
	if (!strcmp(role, "lingerclient"))
		return linger_client(&sa);
	snprintf(first_flag, sizeof(first_flag), "/tmp/pl_sem-first-%s", argv[3]);
	if (!strcmp(role, "firstserver"))
		return first_server(&sa);
	if (!strcmp(role, "firstclient"))
		return first_client(&sa);
	if (!strcmp(role, "oobserver") || !strcmp(role, "oobserver-inline"))
		return oob_server(&sa, !strcmp(role, "oobserver-inline"));
	if (!strcmp(role, "oobclient"))
		return oob_client(&sa);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0, "socket");
	bool edge = !strcmp(role, "edgeserver") || !strcmp(role, "edgeclient");
	bool fair = !strcmp(role, "fairserver") || !strcmp(role, "fairclient");
	if (!strcmp(role, "server") || !strcmp(role, "edgeserver") || !strcmp(role, "fairserver")) {
		int one = 1;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		CHECK(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind");
		CHECK(listen(s, 8) == 0, "listen");
		/* the client's address as accept() gives it, equal to getpeername()'s */
		struct sockaddr_in pa, pb;
		socklen_t pal = sizeof(pa), pbl = sizeof(pb);
		int c = accept(s, (struct sockaddr *)&pa, &pal);
		CHECK(c >= 0, "accept");
		CHECK(getpeername(c, (struct sockaddr *)&pb, &pbl) == 0, "getpeername");
		CHECK(pal == sizeof(pa) && pbl == pal && !memcmp(&pa, &pb, sizeof(pa)) &&
		      pa.sin_family == AF_INET, "accept's address (%u bytes, family %d)",
		      (unsigned)pal, pa.sin_family);
		if (edge)
			edge_server(c);
		else if (fair)
			fair_server(s, c);
		else
			server(c);
		close(s);
	} else {
		int r = -1;
		for (int i = 0; i < 100 && r < 0; i++) {
			r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
			if (r < 0) {
				close(s);
				usleep(50000);
				s = socket(AF_INET, SOCK_STREAM, 0);
			}
		}
		CHECK(r == 0, "connect");
		if (edge)
			edge_client(s);
		else if (fair)
			fair_client(s, &sa);
		else
			client(s);
	}
	printf("%s: all ok\n", role);
	return 0;
}
