/* SPDX-License-Identifier: MIT */
/* tp_finwait.c: a socket kept for its peer's FIN stays open after the caller's close (the peer
 * sees no end of stream), is closed once the peer's end arrives or its time is up, and at
 * drain; a full table refuses (the caller then waits itself). Stream socket pairs stand in for
 * the TCP sockets (the same poll() events). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
