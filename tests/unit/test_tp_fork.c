/* SPDX-License-Identifier: MIT */
/* fork and the single-owner rule (tp_int.h): a forked child streams 64 MiB byte-exact while the
 * parent holds its copy for 2 s; a parent that uses its copy too gets -EPERM and the child's
 * stream stays exact; export/adopt keep the fork's reference count; a close still lingering
 * at a fork is finished by the process that closed it. */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

#define STREAM_BYTES (64u << 20)
#define SEED 0x5eedf0cull

static void pair_open(struct tl_pair *p, const char *name)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.contexts = 8;
	tpp.setup_timeout_ms = 2000;
	assert_int_equal(tl_pair_open(p, name, 4u << 20, &tpp, 8080), 0);
}

static void connect_pair(struct tl_pair *p, uint16_t cport, struct tp_conn **ca, struct tp_conn **cb)
{
	struct tp_key k;
	enum tp_reason why;

	tl_key(&k, cport, 8080);
	assert_int_equal(tp_connect(p->a, &k, 3000, ca, &why), 0);
	assert_int_equal(tp_attach(p->b, &k, cb), 0);
}

/* Both ends used before the fork (as a server that reads a request first). */
static void warm_up(struct tp_conn *ca, struct tp_conn *cb)
{
	char buf[16];

	assert_int_equal(tl_send_all(ca, "request", 7), 0);
	assert_int_equal(tl_recv_some(cb, buf, sizeof(buf), 5000), 7);
	assert_int_equal(tl_send_all(cb, "ok", 2), 0);
	assert_int_equal(tl_recv_some(ca, buf, sizeof(buf), 5000), 2);
}

/* Child: send STREAM_BYTES of the pattern on CB, tell the parent through TOLD after the first
 * send, close, then stay alive (lingering) until the parent writes to HOLD or 20 s pass. */
static _Noreturn void child_stream(struct tp_conn *cb, int told, int hold)
{
	static uint8_t buf[256 * 1024];
	char one = 1;
	struct pollfd pf = { .fd = hold, .events = POLLIN };

	for (size_t off = 0; off < STREAM_BYTES; off += sizeof(buf)) {
		tl_fill(buf, sizeof(buf), SEED, off);
		if (tl_send_all(cb, buf, sizeof(buf)))
			_exit(2);
		if (off == 0 && write(told, &one, 1) != 1)
			_exit(3);
	}
	tp_close(cb);
	poll(&pf, 1, 20000);
	_exit(0);
}

/* Parent: receive the whole stream on CA, byte-exact, then EOF. */
static void recv_stream(struct tp_conn *ca)
{
	static uint8_t buf[200000], want[sizeof(buf)];
	size_t off = 0;

	for (;;) {
		ssize_t n = tl_recv_some(ca, buf, sizeof(buf), 10000);

		assert_true(n >= 0);
		if (n == 0)
			break;
		assert_true(off + (size_t)n <= STREAM_BYTES);
		tl_fill(want, (size_t)n, SEED, off);
		if (memcmp(buf, want, (size_t)n)) {
			for (ssize_t i = 0; i < n; i++)
				if (buf[i] != want[i])
					fail_msg("byte %zu differs", off + (size_t)i);
		}
		off += (size_t)n;
	}
	assert_int_equal(off, STREAM_BYTES);
}

struct late {
	struct tp_conn *cb;
	int told;       /* the child's "I sent" pipe (-1: do not wait) */
	bool use_it;    /* also try I/O on the copy, which must fail with -EPERM */
	int io_rc[5];   /* recv, send, shutdown, poll (bits), conn_error */
};

/* Parent's second thread: hold the copy for 2 s after the fork (optionally using it), close. */
static void *late_close(void *arg)
{
	struct late *t = arg;
	char one, buf[8] = { 0 };
	struct iovec v = { buf, sizeof(buf) };

	if (t->use_it) {
		struct pollfd pf = { .fd = t->told, .events = POLLIN };

		poll(&pf, 1, 10000);
		if (read(t->told, &one, 1) != 1)
			one = 0;
		usleep(200000);
		t->io_rc[0] = (int)tp_recv(t->cb, &v, 1, 0);
		t->io_rc[1] = (int)tp_send(t->cb, &v, 1);
		t->io_rc[2] = tp_shutdown(t->cb, SHUT_WR);
		t->io_rc[3] = (int)tp_poll(t->cb);
		t->io_rc[4] = tp_conn_error(t->cb);
	}
	sleep(2);
	tp_close(t->cb);
	return NULL;
}

/* Whether H's registry of owner processes (the reclaim's) lists PID, read under the lock. */
static bool proc_listed(struct tp_link *l, int pid)
{
	bool found = false;

	tp_host_lock(l);
	for (uint32_t i = 0; i < TP_HOST_PROCS; i++)
		found |= l->host->procs[i] == pid;
	tp_host_unlock(l);
	return found;
}

static void run_fork_stream(const char *name, uint16_t cport, bool use_it)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb;
	struct late t = { 0 };
	int told[2], hold[2], st;
	pthread_t th;
	pid_t pid;

	pair_open(&p, name);
	connect_pair(&p, cport, &ca, &cb);
	warm_up(ca, cb);
	assert_int_equal(pipe(told), 0);
	assert_int_equal(pipe(hold), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		child_stream(cb, told[1], hold[0]);
	t.cb = cb;
	t.told = told[0];
	t.use_it = use_it;
	assert_int_equal(pthread_create(&th, NULL, late_close, &t), 0);
	recv_stream(ca);
	/* the child holds cb's entry with us: the reclaim's registry lists it (its fork's
	 * handler, or its helper once the host lock was free) */
	for (int i = 0; i < 1000 && !proc_listed(p.b, pid); i++)
		usleep(1000);
	assert_true(proc_listed(p.b, pid));
	pthread_join(th, NULL);
	assert_int_equal(write(hold[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	if (use_it) {
		assert_int_equal(t.io_rc[0], -EPERM);
		assert_int_equal(t.io_rc[1], -EPERM);
		assert_int_equal(t.io_rc[2], -EPERM);
		assert_true(t.io_rc[3] & TP_EV_ERR);
		assert_int_equal(t.io_rc[4], -EPERM);
	}
	tp_close(ca);
	close(told[0]);
	close(told[1]);
	close(hold[0]);
	close(hold[1]);
	tl_pair_close(&p);
}

/* The parent holds its copy for 2 s after the fork, without using it. */
static void test_fork_late_close(void **state)
{
	(void)state;
	run_fork_stream("forklate", 11, false);
}

/* The parent uses its copy while the child streams: -EPERM here, the stream stays exact. */
static void test_fork_second_user(void **state)
{
	(void)state;
	run_fork_stream("forkboth", 12, true);
}

/* Export/adopt (exec) keeps the reference count a fork added; the copy held by the child is
 * not the owner: its close leaves the parent's stream working, byte-exact. */
static void test_adopt_keeps_refs(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb, *cb2;
	char buf[64];
	uint64_t tok;
	int go[2], st;
	pid_t pid;

	(void)state;
	pair_open(&p, "forkadopt");
	connect_pair(&p, 13, &ca, &cb);
	warm_up(ca, cb);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pollfd pf = { .fd = go[0], .events = POLLIN };

		poll(&pf, 1, 20000);
		tp_close(cb); /* not the owner: drops its reference only */
		_exit(0);
	}
	uint32_t slot = cb->slot;
	struct tp_host_entry *e = &p.b->host->e[slot];

	assert_int_equal(__atomic_load_n(&e->refs, __ATOMIC_ACQUIRE), 2);
	assert_int_equal(tp_conn_export(cb, 2000, &tok), 0); /* claims it: the parent drives */
	assert_int_equal(tp_conn_adopt(p.b, tok, &cb2), 0);
	assert_int_equal(__atomic_load_n(&e->refs, __ATOMIC_ACQUIRE), 2);
	assert_int_equal(__atomic_load_n(&e->active, __ATOMIC_ACQUIRE), getpid());
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(__atomic_load_n(&e->refs, __ATOMIC_ACQUIRE), 1);
	for (int i = 0; i < 20; i++) {
		char msg[32];
		int len = snprintf(msg, sizeof(msg), "after child close %d", i);

		assert_int_equal(tl_send_all(cb2, msg, (size_t)len), 0);
		assert_int_equal(tl_recv_some(ca, buf, (size_t)len, 5000), len);
		assert_memory_equal(buf, msg, (size_t)len);
	}
	tp_close(cb2);
	assert_int_equal(tl_recv_some(ca, buf, sizeof(buf), 5000), 0); /* FIN */
	tp_close(ca);
	close(go[0]);
	close(go[1]);
	tl_pair_close(&p);
}

/* A fork while a closed connection lingers (FIN sent, the peer's not yet): the closing process
 * still finishes and releases it, the child does not take it, nor keeps open the duplicate of
 * its kernel socket (bytes unacknowledged at the close: kept for a failover) that it inherited. */
static void test_fork_during_linger(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb;
	char buf[16];
	uint64_t end;
	int st, sv[2];
	pid_t pid;
	struct stat ks;

	(void)state;
	pair_open(&p, "forklinger");
	connect_pair(&p, 14, &ca, &cb);
	warm_up(ca, cb);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	tp_conn_set_witness(ca, sv[0]); /* (its "kernel socket") */
	assert_int_equal(tl_send_all(ca, "xyz", 3), 0); /* not read yet: unacknowledged */
	tp_close(ca); /* lingers: cb does not close */
	int kfd = ca->keep_fd;

	assert_true(kfd >= 0);
	assert_int_equal(fstat(kfd, &ks), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* the child has no copy of the closing connection, nor of its kept socket */
		pthread_mutex_lock(&p.a->conns_lock);
		bool listed = p.a->conns != NULL;
		pthread_mutex_unlock(&p.a->conns_lock);
		struct stat cs;
		bool kept = fstat(kfd, &cs) == 0 && cs.st_ino == ks.st_ino && cs.st_dev == ks.st_dev;

		usleep(100000);
		_exit(listed ? 1 : kept ? 2 : 0);
	}
	assert_int_equal(tl_recv_some(cb, buf, sizeof(buf), 5000), 3);
	assert_memory_equal(buf, "xyz", 3);
	assert_int_equal(tl_recv_some(cb, buf, sizeof(buf), 5000), 0); /* ca's FIN */
	end = tl_now_ms() + 8000;
	for (;;) {
		pthread_mutex_lock(&p.a->conns_lock);
		bool listed = p.a->conns != NULL;
		pthread_mutex_unlock(&p.a->conns_lock);
		if (!listed)
			break;
		assert_true(tl_now_ms() < end); /* the linger was never finished */
		usleep(20000);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	tp_close(cb);
	close(sv[0]);
	close(sv[1]);
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_late_close),
		cmocka_unit_test(test_fork_second_user),
		cmocka_unit_test(test_adopt_keeps_refs),
		cmocka_unit_test(test_fork_during_linger),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
