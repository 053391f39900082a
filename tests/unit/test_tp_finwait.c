/* SPDX-License-Identifier: MIT */
/* tp_finwait.c: a socket kept for its peer's FIN stays open after the caller's close (the peer
 * sees no end of stream), is closed once the peer's end arrives or its time is up, and at
 * drain; a full table refuses (the caller then waits itself). Stream socket pairs stand in for
 * the TCP sockets (the same poll() events), except for tp_close_after_fin() with the peer's
 * end already in, which runs on loopback TCP connections and is compared with a plain close. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/helpers/tcp_pair.h"
#include "transport/tp_int.h"

/* Has the other end of PEER's pair gone (end of stream readable), within WAIT_MS? */
static bool ended(int peer, int wait_ms)
{
	struct pollfd p = { .fd = peer, .events = POLLIN };
	char c;

	if (poll(&p, 1, wait_ms) != 1)
		return false;
	return read(peer, &c, 1) == 0;
}

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* Kept after close: the peer sees no end until it closes its side (its "FIN"); then the
 * service closes ours. */
static void test_closed_at_peer_fin(void **state)
{
	(void)state;
	int sv[2];

	pair(sv);
	assert_int_equal(tp_finwait_add(sv[0], 60000), 0);
	assert_true(tp_finwait_pending());
	close(sv[0]);
	tp_finwait_service();
	assert_false(ended(sv[1], 50)); /* still open through the duplicate */
	assert_int_equal(shutdown(sv[1], SHUT_WR), 0); /* the peer's FIN */
	for (int i = 0; i < 100 && tp_finwait_pending(); i++) {
		tp_finwait_service();
		usleep(1000);
	}
	assert_false(tp_finwait_pending());
	assert_true(ended(sv[1], 1000));
	close(sv[1]);
}

/* No FIN: closed when its time is up, not before. */
static void test_closed_at_deadline(void **state)
{
	(void)state;
	int sv[2];

	pair(sv);
	assert_int_equal(tp_finwait_add(sv[0], 200), 0);
	close(sv[0]);
	tp_finwait_service();
	assert_true(tp_finwait_pending()); /* (200 ms cannot have passed) */
	assert_false(ended(sv[1], 0));
	usleep(250000);
	tp_finwait_service();
	assert_false(tp_finwait_pending());
	assert_true(ended(sv[1], 1000));
	close(sv[1]);
}

/* Drain (exit, exec): returns once every kept socket is closed, at its FIN or its time. */
static void test_drain(void **state)
{
	(void)state;
	int a[2], b[2];

	pair(a);
	pair(b);
	assert_int_equal(tp_finwait_add(a[0], 60000), 0);
	assert_int_equal(tp_finwait_add(b[0], 100), 0);
	close(a[0]);
	close(b[0]);
	assert_int_equal(shutdown(a[1], SHUT_WR), 0);
	tp_finwait_drain();
	assert_false(tp_finwait_pending());
	assert_true(ended(a[1], 0));
	assert_true(ended(b[1], 0));
	close(a[1]);
	close(b[1]);
}

/* At most a quarter of the descriptor limit is kept: beyond, -ENOSPC (nothing kept). */
static void test_cap(void **state)
{
	(void)state;
	int sv[2], n = 0, rc = 0;
	int kept[64];

	/* fill until refused (the cap was computed at the first add: 1024 / 4) */
	for (n = 0; n < 300; n++) {
		pair(sv);
		rc = tp_finwait_add(sv[0], 60000);
		close(sv[0]);
		if (rc) {
			close(sv[1]);
			break;
		}
		if (n < 64)
			kept[n] = sv[1];
		else
			close(sv[1]); /* (its kept end then reads the peer's end: closed at service) */
	}
	assert_int_equal(rc, -ENOSPC);
	assert_int_equal(n, 1024 / 4); /* (main() set the limit to 1024) */
	for (int i = 0; i < n && i < 64; i++)
		close(kept[i]); /* their FINs */
	tp_finwait_drain();
	assert_false(tp_finwait_pending());
}

/* A loopback TCP connection: *OURS (the accepted end) and *PEER. */
static void tcp_pair(int *ours, int *peer)
{
	assert_int_equal(tl_tcp_pair(ours, peer), 0);
}

static unsigned local_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	return ntohs(sa.sin_port);
}

/* The kernel's state of the loopback connection from port LOCAL to port REMOTE
 * (/proc/net/tcp, 6 = TIME_WAIT), or -1 when there is none. */
static int tcp_state(unsigned local, unsigned remote)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	char line[256];
	int st = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned la, lp, ra, rp, s;

		if (sscanf(line, " %*u: %8X:%4X %8X:%4X %2X", &la, &lp, &ra, &rp, &s) == 5 &&
		    lp == local && rp == remote)
			st = (int)s;
	}
	fclose(f);
	return st;
}

/* What the side that closed first sees when ours closes after its FIN (or reset, RESET) is in:
 * how its read of our end ended, and where the TIME_WAIT is. */
struct close_view {
	int close_after_fin;  /* tp_close_after_fin()'s result (0 for the plain close) */
	bool kept;            /* a duplicate was kept (tp_finwait_pending()) */
	long peer_read;       /* the peer's read after our close: 0 (end), or -errno */
	bool peer_time_wait;  /* the peer's side is in TIME_WAIT */
	bool ours_time_wait;  /* ours is */
};

static struct close_view close_after_peer(bool through_finwait, bool reset)
{
	struct close_view v = { 0 };
	struct pollfd p;
	int ours, peer;
	char c;

	tcp_pair(&ours, &peer);
	unsigned op = local_port(ours), pp = local_port(peer);
	if (reset) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		assert_int_equal(setsockopt(peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
		close(peer);
		peer = -1;
	} else {
		assert_int_equal(shutdown(peer, SHUT_WR), 0); /* its FIN; it reads on */
	}
	/* until its end is in */
	p = (struct pollfd){ .fd = ours, .events = POLLIN | POLLRDHUP };
	assert_int_equal(poll(&p, 1, 5000), 1);
	if (through_finwait) {
		v.close_after_fin = tp_close_after_fin(ours, 60000);
		v.kept = tp_finwait_pending();
	}
	close(ours);
	if (peer >= 0) {
		p = (struct pollfd){ .fd = peer, .events = POLLIN };
		assert_int_equal(poll(&p, 1, 5000), 1);
		ssize_t r = read(peer, &c, 1);
		v.peer_read = r < 0 ? -errno : (long)r;
		/* (our LAST_ACK ends with the peer's ACK: on loopback, at once) */
		for (int i = 0; i < 1000 && tcp_state(op, pp) != -1 && tcp_state(op, pp) != 6; i++)
			usleep(1000);
		v.peer_time_wait = tcp_state(pp, op) == 6;
		v.ours_time_wait = tcp_state(op, pp) == 6;
		close(peer);
	}
	return v;
}

/* The peer closed first and its FIN is in: nothing is kept (the caller's close is the socket's
 * last), and the peer sees what a plain close gives it: a clean end of stream, the TIME_WAIT
 * on its side, none on ours. */
static void test_close_after_fin_in(void **state)
{
	(void)state;
	struct close_view k = close_after_peer(false, false);
	struct close_view t = close_after_peer(true, false);

	assert_int_equal(k.peer_read, 0);
	assert_true(k.peer_time_wait);
	assert_false(k.ours_time_wait);
	assert_int_equal(t.close_after_fin, 0);
	assert_false(t.kept);
	assert_int_equal(t.peer_read, k.peer_read);
	assert_int_equal(t.peer_time_wait, k.peer_time_wait);
	assert_int_equal(t.ours_time_wait, k.ours_time_wait);
}

/* The peer reset instead: the same (nothing to wait for), no TIME_WAIT on our side. */
static void test_close_after_reset_in(void **state)
{
	(void)state;
	struct close_view t = close_after_peer(true, true);

	assert_int_equal(t.close_after_fin, 0);
	assert_false(t.kept);
}

/* Nothing in yet and no helper thread to close it later: refused (-EAGAIN, nothing kept), so
 * that the caller waits itself; the peer still sees the socket open. */
static void test_close_after_fin_not_in(void **state)
{
	(void)state;
	int ours, peer;

	assert_false(tp_helper_running());
	tcp_pair(&ours, &peer);
	assert_int_equal(tp_close_after_fin(ours, 60000), -EAGAIN);
	assert_false(tp_finwait_pending());
	assert_false(ended(peer, 50));
	close(ours);
	assert_true(ended(peer, 5000));
	close(peer);
}

int main(void)
{
	/* a limit of 1024 descriptors, as by default: the cap is a quarter of it */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max >= 1024) {
		rl.rlim_cur = 1024;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closed_at_peer_fin),
		cmocka_unit_test(test_closed_at_deadline),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_close_after_fin_in),
		cmocka_unit_test(test_close_after_reset_in),
		cmocka_unit_test(test_close_after_fin_not_in),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
