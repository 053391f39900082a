/* SPDX-License-Identifier: MIT */
/* A connection moving from one link to another between the same two hosts
 * (transport/tp_failover.c, link to link): two shm link pairs in one process, each host's two
 * links in one group, a socketpair standing in for the TCP connection. The bytes each side's
 * program has not read arrive over the other link exactly once and in order, whichever side
 * starts and whether its link is still up, also with both directions' rings full (the tails
 * outgrow the new rings: the rest follows as the new connection's prefix) and across a second
 * move; a reader blocked through the move gets them; a FIN in flight ends the stream there; the
 * kernel socket carries nothing; a later failover header that resumes another connection of the
 * chain (the moves counted differ) resets rather than resuming wrong offsets. Where the peer has
 * no live link to go to, both sides go on over the socket instead, with the same bytes. A
 * re-attach Apply needs no listener (the listener of an accepted connection may be closed). */
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
#include "util/crc32c.h"

/* Both links (4 MiB windows); GROUP_B false: B's links are not grouped (B has nowhere to move). */
static void quad_open(struct quad *q, const char *name, bool group_b)
{
	quad_open_opts(q, name, &(struct quad_opts){ .window = 4u << 20, .group_b = group_b });
}

static void connect_one(struct quad *q, uint16_t cport, struct tp_conn **ca, struct tp_conn **cb,
			int sv[2])
{
	tu_connect_witnessed(&q->one, cport, 8080, ca, cb, sv);
}

/* Run both ends' timers until both moved (or moved to the socket); their final states. */
static void pump(struct tp_conn *ca, struct tp_conn *cb, int *ret_a, int *ret_b)
{
	uint64_t end = tl_now_ms() + 10000;

	while (tl_now_ms() < end) {
		tp_conn_timers(ca, tp_now_ms());
		tp_conn_timers(cb, tp_now_ms());
		if (ca->fo_state >= TP_FO_DONE && cb->fo_state >= TP_FO_DONE)
			break;
		usleep(200);
	}
	*ret_a = ca->fo_state;
	*ret_b = cb->fo_state;
}

/* The program's view of a move started by SIDE (0: the client, A; 1: the server, B) for WHY. */
static void move_exact(const char *name, uint16_t cport, int side, const char *why)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	int sv[2], fa, fb;
	uint8_t buf[64];
	size_t a_sent, b_sent, b_read = 0;

	quad_open(&q, name, true);
	connect_one(&q, cport, &ca, &cb, sv);
	a_sent = tu_send_mixed(ca, 11, 0, 3u << 20);
	b_sent = tu_send_mixed(cb, 22, 0, 100000);
	assert_true(a_sent > 100000 && b_sent > 50000);
	/* B's program reads part of A's stream, in odd pieces (a record read in part) */
	while (b_read < a_sent / 3) {
		size_t n = a_sent / 3 - b_read < 777 ? a_sent / 3 - b_read : 777;

		tu_read_check(cb, 11, b_read, n);
		b_read += n;
	}
	assert_true(tp_fo_request(side ? cb : ca, why));
	pump(ca, cb, &fa, &fb);
	assert_int_equal(fa, TP_FO_LINKED);
	assert_int_equal(fb, TP_FO_LINKED);
	/* both go on over the second link */
	assert_int_equal(tp_conn_moves(ca), 1);
	assert_int_equal(tp_conn_moves(cb), 1);
	assert_ptr_equal(tp_conn_link(ca), q.two.a);
	assert_ptr_equal(tp_conn_link(cb), q.two.b);
	assert_int_equal(tp_conn_failover_state(ca), TP_FO_NONE); /* (the new connection's) */
	/* B: A's stream from exactly what B's program read, to its last accepted byte; A: all of
	 * B's stream (A's program read none) */
	tu_read_check(cb, 11, b_read, a_sent - b_read);
	tu_read_check(ca, 22, 0, b_sent);
	struct iovec v = { buf, sizeof(buf) };
	assert_int_equal(tp_recv(cb, &v, 1, 0), -EAGAIN); /* nothing more, nothing twice */
	assert_int_equal(tp_recv(ca, &v, 1, 0), -EAGAIN);
	/* and the stream goes on there, both ways */
	size_t a_more = tu_send_mixed(ca, 11, a_sent, a_sent + 50000);

	assert_int_equal(a_more, a_sent + 50000);
	tu_read_check(cb, 11, a_sent, 50000);
	assert_int_equal(tl_send_all(cb, "end", 3), 0);
	assert_int_equal(tl_recv_some(ca, buf, 3, 5000), 3);
	assert_memory_equal(buf, "end", 3);
	/* the kernel socket carried nothing */
	tu_assert_socket_empty(sv[0]);
	tu_assert_socket_empty(sv[1]);
	/* the old link's slots are free again, the new link holds the connection */
	assert_int_equal(tp_link_load(q.one.a), 0);
	assert_int_equal(tp_link_load(q.two.a), 1);
	quad_end(&q, ca, cb, sv);
}

/* Both directions full (mixed inline and data messages, nothing read) when the move starts: each
 * side's tail is as large as its rings hold. */
static void test_move_both_full(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	int sv[2], fa, fb;
	size_t a_sent, b_sent;

	(void)state;
	quad_open(&q, "mv-full", true);
	connect_one(&q, 7, &ca, &cb, sv);
	a_sent = tu_send_mixed(ca, 66, 0, 8u << 20);
	b_sent = tu_send_mixed(cb, 77, 0, 8u << 20);
	assert_true(a_sent < 8u << 20 && b_sent < 8u << 20); /* (both stopped for room) */
	assert_true(tp_fo_request(ca, "link down"));
	pump(ca, cb, &fa, &fb);
	assert_int_equal(fa, TP_FO_LINKED);
	assert_int_equal(fb, TP_FO_LINKED);
	tu_read_check(cb, 66, 0, a_sent);
	tu_read_check(ca, 77, 0, b_sent);
	tu_assert_socket_empty(sv[0]);
	tu_assert_socket_empty(sv[1]);
	quad_end(&q, ca, cb, sv);
}

/* A connection moves twice (to the second link, then back to the first), its rings full both
 * times: the handle follows both moves, every byte arrives once. */
static void test_move_twice(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	int sv[2], fa, fb;
	size_t a1, b1, a2, b2;

	(void)state;
	quad_open(&q, "mv-twice", true);
	connect_one(&q, 8, &ca, &cb, sv);
	a1 = tu_send_mixed(ca, 88, 0, 8u << 20);
	b1 = tu_send_mixed(cb, 99, 0, 8u << 20);
	assert_true(tp_fo_request(ca, "link down (admin)"));
	pump(ca, cb, &fa, &fb);
	assert_int_equal(fa, TP_FO_LINKED);
	assert_int_equal(fb, TP_FO_LINKED);
	/* more on top, and the second move starts at once (the first tail may still be going
	 * out as the new connection's prefix) */
	a2 = tu_send_mixed(ca, 88, a1, a1 + (4u << 20));
	b2 = tu_send_mixed(cb, 99, b1, b1 + (4u << 20));
	struct tp_conn *na = tp_conn_cur(ca), *nb = tp_conn_cur(cb);

	assert_true(tp_fo_request(nb, "link down"));
	pump(na, nb, &fa, &fb);
	assert_int_equal(fa, TP_FO_LINKED);
	assert_int_equal(fb, TP_FO_LINKED);
	assert_int_equal(tp_conn_moves(ca), 2);
	assert_int_equal(tp_conn_moves(cb), 2);
	assert_ptr_equal(tp_conn_link(ca), q.one.a);
	assert_ptr_equal(tp_conn_link(cb), q.one.b);
	tu_read_check(cb, 88, 0, a2);
	tu_read_check(ca, 99, 0, b2);
	tu_assert_socket_empty(sv[0]);
	tu_assert_socket_empty(sv[1]);
	quad_end(&q, ca, cb, sv);
}

static void test_move_client_starts(void **state)
{
	(void)state;
	move_exact("mv-cli", 1, 0, "link down (admin)");
}

static void test_move_server_starts(void **state)
{
	(void)state;
	move_exact("mv-srv", 2, 1, "link down");
}

struct reader {
	struct tp_conn *c;
	size_t len;
	int ok;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint8_t *buf = malloc(r->len), *want = malloc(r->len);
	size_t got = 0;

	while (got < r->len) {
		ssize_t n = tl_recv_some(r->c, buf + got, r->len - got, 10000);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	tl_fill(want, r->len, 33, 0);
	r->ok = got == r->len && memcmp(buf, want, r->len) == 0 &&
		tl_recv_some(r->c, buf, 1, 10000) == 0; /* then the end of stream */
	free(buf);
	free(want);
	return NULL;
}

/* A reader blocked in tp_wait() through the move wakes up on the new link and reads
 * everything, then the end of stream. */
static void test_move_blocked_reader(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	int sv[2], fa, fb;
	pthread_t th;
	struct reader r = { 0 };

	(void)state;
	quad_open(&q, "mv-blk", true);
	connect_one(&q, 3, &ca, &cb, sv);
	r.c = cb;
	r.len = 60000;
	assert_int_equal(pthread_create(&th, NULL, reader_main, &r), 0);
	assert_int_equal(tu_send_mixed(ca, 33, 0, 30000), 30000);
	usleep(200000); /* (read, and waiting for more) */
	assert_true(tp_fo_request(ca, "link down (admin)"));
	pump(ca, cb, &fa, &fb);
	assert_int_equal(fa, TP_FO_LINKED);
	assert_int_equal(fb, TP_FO_LINKED);
	assert_int_equal(tu_send_mixed(ca, 33, 30000, 60000), 60000);
	assert_int_equal(tp_shutdown(ca, SHUT_WR), 0);
	pthread_join(th, NULL);
	assert_true(r.ok);
	tu_assert_socket_empty(sv[1]);
	quad_end(&q, ca, cb, sv);
}

/* A FIN in flight (sent, not yet read) moves with the bytes before it. */
static void test_move_fin_in_flight(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	int sv[2], fa, fb;
	pthread_t th;
	struct reader r = { 0 };

	(void)state;
	quad_open(&q, "mv-fin", true);
	connect_one(&q, 6, &ca, &cb, sv);
	assert_int_equal(tu_send_mixed(ca, 33, 0, 60000), 60000);
	assert_int_equal(tp_shutdown(ca, SHUT_WR), 0);
	assert_true(tp_fo_request(cb, "link down")); /* the reader's side moves first */
	pump(ca, cb, &fa, &fb);
	assert_int_equal(fa, TP_FO_LINKED);
	assert_int_equal(fb, TP_FO_LINKED);
	r.c = cb;
	r.len = 60000;
	assert_int_equal(pthread_create(&th, NULL, reader_main, &r), 0);
	pthread_join(th, NULL);
	assert_true(r.ok);
	tu_assert_socket_empty(sv[1]);
	quad_end(&q, ca, cb, sv);
}

/* B has no other link to go to: A's re-attachment is never taken, B's failover header arrives on
 * the kernel socket, and both go on there with the bytes the other lacks. */
static void test_move_gives_way_to_tcp(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	int sv[2], fa, fb;
	uint8_t *buf = malloc(1u << 20), *want = malloc(1u << 20);
	size_t a_sent, b_sent;

	(void)state;
	quad_open(&q, "mv-tcp", false);
	connect_one(&q, 4, &ca, &cb, sv);
	a_sent = tu_send_mixed(ca, 44, 0, 200000);
	b_sent = tu_send_mixed(cb, 55, 0, 70000);
	assert_true(tp_fo_request(ca, "link down (admin)"));
	pump(ca, cb, &fa, &fb);
	assert_int_equal(fa, TP_FO_DONE);
	assert_int_equal(fb, TP_FO_DONE);
	assert_int_equal(tp_conn_moves(ca), 0);
	struct iovec v = { buf, 16 };
	assert_int_equal(tp_send(ca, &v, 1), -EXDEV);
	assert_int_equal(tp_recv(cb, &v, 1, 0), -EXDEV);
	/* each socket: the other's whole stream (nobody read), exactly once */
	for (int s = 0; s < 2; s++) {
		size_t len = s ? a_sent : b_sent, got = 0;

		while (got < len) {
			struct pollfd p = { .fd = sv[s], .events = POLLIN };

			assert_int_equal(poll(&p, 1, 5000), 1);
			ssize_t n = read(sv[s], buf + got, len - got);

			assert_true(n > 0);
			got += (size_t)n;
		}
		tl_fill(want, len, s ? 44 : 55, 0);
		assert_memory_equal(buf, want, len);
		tu_assert_socket_empty(sv[s]);
	}
	/* the re-attachment A made on the second link is given back */
	for (int i = 0; i < 200 && tp_link_load(q.two.a) != 0; i++)
		usleep(5000);
	assert_int_equal(tp_link_load(q.two.a), 0);
	quad_end(&q, ca, cb, sv);
	free(buf);
	free(want);
}

/* After a move, a failover header from a peer that resumes the connection before the move (it
 * counts no move: a second link lost while only one side had finished moving) resets the
 * connection instead of resuming another stream's offsets. */
static void test_move_generation_mismatch_resets(void **state)
{
	struct quad q;
	struct tp_conn *ca, *cb;
	int sv[2], fa, fb;
	uint8_t h[32], buf[64];
	uint32_t magic = 0x4f46544eu, crc;
	uint16_t version = 1, flags = 0;
	uint64_t start = 0, consumed = 0;
	uint32_t reserved = 0;

	(void)state;
	quad_open(&q, "mv-gen", true);
	connect_one(&q, 9, &ca, &cb, sv);
	assert_int_equal(tu_send_mixed(ca, 12, 0, 5000), 5000);
	assert_true(tp_fo_request(ca, "link down (admin)"));
	pump(ca, cb, &fa, &fb);
	assert_int_equal(fb, TP_FO_LINKED);
	tu_read_check(cb, 12, 0, 5000);
	/* A's side says (on the socket) it resumes from offset 0 of the stream before the move */
	memcpy(h, &magic, 4);
	memcpy(h + 4, &version, 2);
	memcpy(h + 6, &flags, 2);
	memcpy(h + 8, &start, 8);
	memcpy(h + 16, &consumed, 8);
	memcpy(h + 24, &reserved, 4);
	crc = crc32c(0, h, 28);
	memcpy(h + 28, &crc, 4);
	assert_int_equal(write(sv[0], h, sizeof(h)), (ssize_t)sizeof(h));
	struct tp_conn *nb = tp_conn_cur(cb);

	assert_true(tp_fo_request(nb, "peer moved to tcp"));
	for (int i = 0; i < 5000 && tp_conn_failover_state(nb) == TP_FO_RUN; i++) {
		tp_conn_timers(nb, tp_now_ms());
		usleep(200);
	}
	assert_int_equal(tp_conn_failover_state(cb), TP_FO_FAILED);
	struct iovec v = { buf, sizeof(buf) };
	assert_int_equal(tp_recv(cb, &v, 1, 0), -ECONNRESET);
	tp_abort(ca);
	tp_abort(cb);
	close(sv[0]);
	close(sv[1]);
	quad_close(&q);
}

/* A re-attach Apply is admitted on a port nobody listens on (an ordinary one is refused). */
static void test_reattach_needs_no_listener(void **state)
{
	struct quad q;
	struct tp_key k;
	struct tp_conn *ca, *cb;
	enum tp_reason why;

	(void)state;
	quad_open(&q, "mv-nol", true);
	tl_key(&k, 5, 8080); /* B listens on 8080 over the first link only */
	assert_int_equal(tp_connect(q.two.a, &k, 1000, &ca, &why), -ECONNREFUSED);
	assert_int_equal(why, TP_REASON_NO_LISTENER);
	assert_int_equal(tp_connect_reattach(q.two.a, &k, 1000, &ca), 0);
	assert_int_equal(tp_attach(q.two.b, &k, &cb), 0);
	assert_int_equal(tl_send_all(ca, "hello", 5), 0);
	char buf[8];
	assert_int_equal(tl_recv_some(cb, buf, 5, 5000), 5);
	assert_memory_equal(buf, "hello", 5);
	tp_close(ca);
	tp_close(cb);
	quad_close(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_move_client_starts, quad_teardown),
		cmocka_unit_test_teardown(test_move_both_full, quad_teardown),
		cmocka_unit_test_teardown(test_move_twice, quad_teardown),
		cmocka_unit_test_teardown(test_move_server_starts, quad_teardown),
		cmocka_unit_test_teardown(test_move_blocked_reader, quad_teardown),
		cmocka_unit_test_teardown(test_move_fin_in_flight, quad_teardown),
		cmocka_unit_test_teardown(test_move_gives_way_to_tcp, quad_teardown),
		cmocka_unit_test_teardown(test_move_generation_mismatch_resets, quad_teardown),
		cmocka_unit_test_teardown(test_reattach_needs_no_listener, quad_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
