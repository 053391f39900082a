/* SPDX-License-Identifier: MIT */
/* [DRB] balancing (transport/tp_stripe.c): two shm link pairs in one process, each host's two
 * links in one group with balance on. A connection between them is framed; a sender that
 * finds its ring full (the receiver does not read) sets the stripe up on the other link and
 * spreads its frames over both; the receiver gets every byte exactly once and in order, in
 * pieces of every size. The server's sends get the stripe too (it asks, the client sets it up,
 * it attaches). Without balance on both hosts a connection is not framed. When the stream goes
 * to the kernel socket (the stripe lost), it goes there unframed: each socket carries the
 * other side's stream from exactly what its program read, gathered from both parts. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "tests/unit/tp_unitlib.h"
#include "tests/unit/tp_quadlib.h"
#include "transport/tp_int.h"
#include "util/log.h"

/* Both links (8 MiB windows, rings of 256 KiB: a ring fills after a few frames), both hosts
 * grouped; balance on A's links, and on B's when BAL_B. */
static void quad_open(struct quad *q, const char *name, bool bal_b)
{
	quad_open_opts(q, name, &(struct quad_opts){ .window = 8u << 20, .queue_size = 256u << 10,
						     .group_b = true, .balance_a = true,
						     .balance_b = bal_b });
}

/* The quad (balance on B's side when BAL_B) and a connection A -> B from client port CPORT,
 * a socketpair standing in for its TCP connection. */
static void open_conn(struct quad *q, const char *name, bool bal_b, uint16_t cport,
		      struct tp_conn **ca, struct tp_conn **cb, int sv[2])
{
	quad_open(q, name, bal_b);
	tu_connect_witnessed(&q->one, cport, 8080, ca, cb, sv);
}

/* TOTAL bytes of pattern SEED from TX to RX: the writer fills what it can, the reader takes a
 * part in odd pieces, in turn, then the reader drains the rest; every byte checked. */
static void pump_stream(struct tp_conn *tx, struct tp_conn *rx, uint64_t seed, size_t total)
{
	size_t sent = 0, got = 0;
	uint64_t end = tl_now_ms() + 30000;

	while (got < total) {
		assert_true(tl_now_ms() < end);
		sent = tu_send_mixed(tx, seed, sent, total);
		/* read less than was sent: the writer keeps finding a full ring */
		size_t n = sent == total ? sent - got : (sent - got) / 3;

		for (size_t piece = 1; n; piece = piece * 7 % 65521 + 1) {
			size_t k = piece < n ? piece : n;

			tu_read_check(rx, seed, got, k);
			got += k;
			n -= k;
		}
	}
}

static void test_client_stream_spreads(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	struct tp_stripe_stats sa, sb;
	int sv[2];
	const size_t total = 24u << 20;

	(void)state;
	open_conn(&q, "strc", true, 41001, &ca, &cb, sv);
	tp_stripe_stats(ca, &sa);
	assert_true(sa.framed);
	assert_false(sa.striped);
	pump_stream(ca, cb, 31, total);
	tp_stripe_stats(ca, &sa);
	tp_stripe_stats(cb, &sb);
	assert_true(sa.striped && sb.striped);
	assert_ptr_equal(sa.link1, q.two.a);
	assert_ptr_equal(sb.link1, q.two.b);
	/* every payload byte in exactly one frame, both connections used */
	assert_int_equal(sa.bytes[0] + sa.bytes[1], total);
	assert_true(sa.frames[1] > 0 && sa.bytes[1] > 0 && sa.bytes[0] > 0);
	assert_true(sa.notices > 0 && sa.expansions > 0);
	/* and back, on the same connection: B's frames go through both as well */
	pump_stream(cb, ca, 32, 8u << 20);
	tp_stripe_stats(cb, &sb);
	assert_int_equal(sb.bytes[0] + sb.bytes[1], 8u << 20);
	/* orderly end: each side reads EOF after the last byte */
	assert_int_equal(tp_shutdown(ca, SHUT_WR), 0);
	assert_int_equal(tl_recv_some(cb, (uint8_t[16]){ 0 }, 16, 5000), 0);
	assert_int_equal(tp_shutdown(cb, SHUT_WR), 0);
	assert_int_equal(tl_recv_some(ca, (uint8_t[16]){ 0 }, 16, 5000), 0);
	quad_end(&q, ca, cb, sv);
}

/* The server is the sender: it asks for the stripe, the client sets it up on its next read,
 * the server attaches it at its next send. */
static void test_server_stream_spreads(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	struct tp_stripe_stats sa, sb;
	int sv[2];
	const size_t total = 24u << 20;

	(void)state;
	open_conn(&q, "strs", true, 41002, &ca, &cb, sv);
	pump_stream(cb, ca, 41, total);
	tp_stripe_stats(ca, &sa);
	tp_stripe_stats(cb, &sb);
	assert_true(sa.striped && sb.striped);
	assert_int_equal(sb.bytes[0] + sb.bytes[1], total);
	assert_true(sb.bytes[1] > 0 && sb.bytes[0] > 0);
	assert_int_equal(sa.bytes[0] + sa.bytes[1], 0); /* (A sent nothing) */
	quad_end(&q, ca, cb, sv);
}

/* B without balance: the connection is not framed (its Ack does not carry the flag), and its
 * bytes go as plain bytes over one link. */
static void test_one_side_balance_not_framed(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	struct tp_stripe_stats sa, sb;
	int sv[2];

	(void)state;
	open_conn(&q, "strn", false, 41003, &ca, &cb, sv);
	tp_stripe_stats(ca, &sa);
	tp_stripe_stats(cb, &sb);
	assert_false(sa.framed);
	assert_false(sb.framed);
	pump_stream(ca, cb, 51, 4u << 20);
	quad_end(&q, ca, cb, sv);
}

/* Run both ends' timers until B went to the socket (and A too, with ALL; or failed); their
 * states. (A's tail may outgrow the socket's buffer: it is done once B's program reads.) */
static void pump_fo(struct tp_conn *ca, struct tp_conn *cb, bool all, int *ret_a, int *ret_b)
{
	uint64_t end = tl_now_ms() + 10000;

	while (tl_now_ms() < end) {
		tp_conn_timers(tp_conn_cur(ca), tp_now_ms());
		tp_conn_timers(tp_conn_cur(cb), tp_now_ms());
		if ((!all || tp_conn_failover_state(ca) >= TP_FO_DONE) &&
		    tp_conn_failover_state(cb) >= TP_FO_DONE)
			break;
		usleep(200);
	}
	*ret_a = tp_conn_failover_state(ca);
	*ret_b = tp_conn_failover_state(cb);
}

/* Read LEN bytes of pattern SEED from offset OFF off socket FD, then nothing more. */
static void socket_check(int fd, uint64_t seed, size_t off, size_t len)
{
	uint8_t *buf = malloc(len + 1), *want = malloc(len + 1);
	size_t got = 0;

	assert_non_null(buf);
	assert_non_null(want);
	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		assert_int_equal(poll(&p, 1, 5000), 1);
		ssize_t n = read(fd, buf + got, len - got);

		assert_true(n > 0);
		got += (size_t)n;
	}
	tl_fill(want, len, seed, off);
	assert_memory_equal(buf, want, len);
	tu_assert_socket_empty(fd);
	free(buf);
	free(want);
}

static void test_stream_to_socket_unframed(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	struct tp_stripe_stats sa;
	int sv[2], fa, fb;
	size_t a_sent = 0, b_read = 0, b_sent;

	(void)state;
	if (getenv("TP_STRIPE_DEBUG"))
		log_set_level(LL_DEBUG);
	open_conn(&q, "strf", true, 41004, &ca, &cb, sv);
	/* A's stream spread over both links, B's program reading part of it in odd pieces */
	for (int round = 0; round < 6; round++) {
		a_sent = tu_send_mixed(ca, 61, a_sent, 64u << 20);
		for (size_t piece = 3; b_read < a_sent / 2; piece = piece * 7 % 9973 + 1) {
			size_t k = piece < a_sent / 2 - b_read ? piece : a_sent / 2 - b_read;

			tu_read_check(cb, 61, b_read, k);
			b_read += k;
		}
	}
	a_sent = tu_send_mixed(ca, 61, a_sent, 64u << 20);
	tp_stripe_stats(ca, &sa);
	assert_true(sa.striped && sa.bytes[1] > 0);
	b_sent = tu_send_mixed(cb, 62, 0, 100000);
	assert_true(b_sent > 1000);
	/* the stripe lost: A takes the stream to the socket; B follows (the flag) */
	tp_stripe_part_lost(ca->sp, "stripe lost");
	pump_fo(ca, cb, false, &fa, &fb);
	assert_int_equal(fb, TP_FO_DONE);
	/* each socket: the rest of the other's stream, unframed, from what its program read */
	socket_check(sv[1], 61, b_read, a_sent - b_read);
	pump_fo(ca, cb, true, &fa, &fb);
	assert_int_equal(fa, TP_FO_DONE);
	socket_check(sv[0], 62, 0, b_sent);
	struct iovec v = { (uint8_t[16]){ 0 }, 16 };

	assert_int_equal(tp_send(ca, &v, 1), -EXDEV);
	assert_int_equal(tp_recv(cb, &v, 1, 0), -EXDEV);
	quad_end(&q, ca, cb, sv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_client_stream_spreads, quad_teardown),
		cmocka_unit_test_teardown(test_server_stream_spreads, quad_teardown),
		cmocka_unit_test_teardown(test_one_side_balance_not_framed, quad_teardown),
		cmocka_unit_test_teardown(test_stream_to_socket_unframed, quad_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
