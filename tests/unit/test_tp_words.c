/* SPDX-License-Identifier: MIT */
/* The ST word (tp_words.c, tp_host.c: tp_ent_st_add()): a side whose sends exhaust MaxErr and
 * which then closes leaves its peer, which only reads, with ECONNRESET within a bound, never a
 * wait for a FIN that never comes, each side in turn; the flags only accumulate, so the reclaim
 * of a dead owner (GONE) keeps the RST it wrote. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ntb/ntb_int.h"
#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

/* Both sides with the fault decorator on, dropping nothing until a test says so. MaxErr comes
 * quickly (3 probes 50 ms apart); no kernel socket (no witness): no failover, MaxErr resets. */
static void pair_open_fault(struct tl_pair *p, const char *name)
{
	struct tp_params tpp;
	struct ntb_link_params lp;

	tp_params_init(&tpp);
	tpp.contexts = 8;
	tpp.send_timeout_ms = 50;
	tpp.detect_timeout_ms = 50;
	tpp.max_err = 3;
	snprintf(p->path, sizeof(p->path), "/dev/shm/ntbsock-test-%s-%d", name, getpid());
	tl_unlink(p->path);
	for (int side = 0; side < 2; side++) {
		tl_params(&lp, p->path, side, 4u << 20);
		lp.fault.enabled = true;
		lp.fault.seed = 1;
		assert_int_equal(tp_link_open(&lp, &tpp, side ? &p->b : &p->a), 0);
	}
	assert_int_equal(tp_listen(p->b, 8080), 0);
	assert_int_equal(tl_wait_listen(p->a, 8080, 5000), 0);
	for (int i = 0; i < 2000 && !tp_link_is_up(p->b); i++)
		usleep(1000);
}

/* Every window write of L's handle is dropped from now on (RATE 1) or none (0): the heartbeat
 * and doorbells still go, so the link stays up. */
static void link_drop(struct tp_link *l, double rate)
{
	ntb_fault_set_drop(tp_link_ntb(l)->fault, rate);
}

struct reader {
	struct tp_conn *c;
	_Atomic bool stop;   /* the test gave up on it */
	_Atomic bool done;
	ssize_t end;         /* what its last tp_recv() returned: 0 (EOF) or an error */
	_Atomic size_t got;
	uint64_t done_ms;
	char buf[4096];
};

/* Only reads: tp_recv() in a loop, tp_wait() when there is nothing, until EOF or an error. */
static void *reader_main(void *arg)
{
	struct reader *r = arg;

	while (!atomic_load(&r->stop)) {
		struct iovec v = { r->buf, sizeof(r->buf) };
		ssize_t n = tp_recv(r->c, &v, 1, 0);

		if (n > 0) {
			atomic_fetch_add(&r->got, (size_t)n);
			continue;
		}
		if (n == -EAGAIN) {
			tp_wait(r->c, TP_EV_IN, 100);
			continue;
		}
		r->end = n;
		r->done_ms = tl_now_ms();
		break;
	}
	atomic_store(&r->done, true);
	return NULL;
}

/* FAIL's sends exhaust MaxErr (its link drops every write), the link heals, FAIL closes; the
 * reader of PEER, which has read 5 bytes before, ends with ECONNRESET within 15 s. */
static void fail_while_peer_reads(struct tp_link *fail_link, struct tp_conn *fail,
				  struct tp_conn *peer)
{
	static char big[3000];
	struct iovec hello = { (void *)"hello", 5 }, v = { big, sizeof(big) };
	struct reader r = { .c = peer };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, reader_main, &r), 0);
	assert_int_equal(tp_send(fail, &hello, 1), 5);
	for (int i = 0; i < 2000 && r.got < 5; i++)
		usleep(1000);
	assert_int_equal(r.got, 5);

	link_drop(fail_link, 1.0);
	assert_int_equal(tp_send(fail, &v, 1), (ssize_t)sizeof(big)); /* accepted, never arrives */
	uint64_t end = tl_now_ms() + 10000;

	while (tp_conn_error(fail) == 0 && tl_now_ms() < end)
		usleep(5000);
	assert_int_equal(tp_conn_error(fail), -ECONNRESET); /* MaxErr on its send side */
	link_drop(fail_link, 0.0);
	tp_close(fail);

	uint64_t closed = tl_now_ms();

	while (!atomic_load(&r.done) && tl_now_ms() < closed + 15000)
		usleep(5000);
	bool done = atomic_load(&r.done);

	atomic_store(&r.stop, true);
	pthread_join(t, NULL);
	assert_true(done); /* no hang: the reader learnt the connection ended */
	/* a byte send() accepted was never delivered: a reset, never an end of stream */
	assert_int_equal(r.end, -ECONNRESET);
	assert_int_equal(r.got, 5);
	/* within the bound after the close, or already before it (the reset of the send side's
	 * MaxErr may reach the reader first); unsigned: the earlier case must not wrap */
	assert_true(r.done_ms <= closed || r.done_ms - closed < 15000);
}

static void test_maxerr_send_then_close_resets_reader(void **state)
{
	struct tl_pair p;
	struct tp_key k;
	enum tp_reason why;
	struct tp_conn *ca, *cb;

	(void)state;
	pair_open_fault(&p, "stmaxerr");
	/* the client side fails, the server side reads */
	tl_key(&k, 1, 8080);
	assert_int_equal(tp_connect(p.a, &k, 3000, &ca, &why), 0);
	assert_int_equal(tp_attach(p.b, &k, &cb), 0);
	fail_while_peer_reads(p.a, ca, cb);
	tp_close(cb);
	/* then the server side fails, the client side reads */
	tl_key(&k, 2, 8080);
	assert_int_equal(tp_connect(p.a, &k, 3000, &ca, &why), 0);
	assert_int_equal(tp_attach(p.b, &k, &cb), 0);
	fail_while_peer_reads(p.b, cb, ca);
	tp_close(ca);
	tl_pair_close(&p);
}

/* An owner that said RST (MaxErr) and then died: the reclaim of its context adds GONE to the
 * RST, so the peer reads ECONNRESET, not a death's end of stream (GONE alone). */
static void test_reclaim_keeps_rst(void **state)
{
	struct tl_pair p;
	struct tp_key k;
	enum tp_reason why;
	struct tp_conn *ca, *cb;
	char buf[16];
	pid_t dead = fork();

	(void)state;
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);

	pair_open_fault(&p, "streclaim");
	tl_key(&k, 3, 8080);
	assert_int_equal(tp_connect(p.a, &k, 3000, &ca, &why), 0);
	assert_int_equal(tp_attach(p.b, &k, &cb), 0);
	tp_conn_maxerr(ca, -ECONNRESET); /* (no kernel socket: no failover) */
	assert_int_equal(tp_st_flags(cb) & TP_ST_RST, TP_ST_RST);

	/* its owner is gone: the host's reclaim frees the context and says GONE. A dead owner's
	 * connection has no timers; this process's helper still runs ca's (its rx side reads the
	 * entry's ring, which the reclaim clears): held off by the locks it takes for them */
	tp_mutex_lock(&ca->tx_lock);
	tp_mutex_lock(&ca->rx_lock);
	tp_host_lock(p.a);
	for (int i = 0; i < TP_OWNERS; i++)
		ca->ent->owners[i] = 0;
	ca->ent->owners[0] = dead;
	__atomic_store_n(&ca->ent->active, (int32_t)dead, __ATOMIC_RELEASE);
	tp_host_reclaim(p.a);
	uint32_t ent_state = ca->ent->state;

	tp_host_unlock(p.a);
	tp_mutex_unlock(&ca->rx_lock);
	tp_mutex_unlock(&ca->tx_lock);
	assert_int_equal(ent_state, TP_ES_FREE);

	assert_int_equal(tp_st_flags(cb) & (TP_ST_RST | TP_ST_GONE), TP_ST_RST | TP_ST_GONE);
	assert_int_equal(tl_recv_some(cb, buf, sizeof(buf), 3000), -ECONNRESET);
	tp_close(cb);
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_maxerr_send_then_close_resets_reader),
		cmocka_unit_test(test_reclaim_keeps_rst),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
