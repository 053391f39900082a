// SPDX-License-Identifier: MIT
/* Unit tests of preload/pl_addr.c's cache of the kernel's source address per destination
 * (pl_src_is_host(), pl_src_not_host()): what the loopback routes give, IPv4 and IPv4-mapped,
 * what a connect that found another source leaves for the next one, liburcu loaded by the first
 * write only, expiry, readers beside a writer, and a fork. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload/pl_int.h"

/* Threads of the sanitizer's own runtime: TSan runs a background thread once the program has
 * started one (so under TSan a liburcu worker is caught only beside it; the plain build counts
 * exactly). */
#ifdef __SANITIZE_THREAD__
#define SAN_THREADS 1
#else
#define SAN_THREADS 0
#endif

static struct conf cf; /* (static: pl_conf points at it for the whole run) */

static void host_addr(const char *a)
{
	struct conf_addr *ha = &cf.host_addrs[cf.n_host_addrs++];

	ha->family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, a, &ha->u.v4), 1);
}

static struct sockaddr_in v4(const char *a, uint16_t port)
{
	struct sockaddr_in in;

	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, a, &in.sin_addr), 1);
	return in;
}

static int setup(void **state)
{
	(void)state;
	memset(&cf, 0, sizeof(cf));
	host_addr("127.0.0.1"); /* the loopback routes' source (ip route get 127.0.0.2) */
	pl_conf = &cf;
	return 0;
}

static int n_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* liburcu is loaded by the cache's first write, not before (the library is not linked with it:
 * its constructor would run in every program); and neither the table nor anything else of
 * liburcu starts a thread. (First test: nothing has used the cache yet.) */
static void test_urcu_loaded_by_first_write(void **state)
{
	struct sockaddr_in d = v4("127.0.0.7", 5003);

	(void)state;
	assert_null(dlopen("liburcu-bp.so.8", RTLD_LAZY | RTLD_NOLOAD));
	assert_null(dlopen("liburcu-cds.so.8", RTLD_LAZY | RTLD_NOLOAD));
	assert_true(pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET));
	assert_non_null(dlopen("liburcu-bp.so.8", RTLD_LAZY | RTLD_NOLOAD));
	assert_non_null(dlopen("liburcu-cds.so.8", RTLD_LAZY | RTLD_NOLOAD));
	pl_src_not_host((struct sockaddr *)&d, AF_INET); /* (a replacement: a grace period) */
	assert_false(pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET));
	assert_true(n_threads() <= 1 + SAN_THREADS);
}

/* The loopback route to 127.0.0.2 picks 127.0.0.1, this host's address: no bind needed. To
 * 127.0.0.1 itself it picks 127.0.0.1 too; an AF_INET6 socket to the IPv4-mapped form gets the
 * mapped 127.0.0.1, which counts as IPv4. */
static void test_route_source_is_host(void **state)
{
	struct sockaddr_in d = v4("127.0.0.2", 5000), d1 = v4("127.0.0.1", 5000);

	(void)state;
	assert_true(pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET));
	assert_true(pl_src_is_host((struct sockaddr *)&d1, sizeof(d1), AF_INET));
	int fd = socket(AF_INET6, SOCK_DGRAM, 0);

	if (fd < 0)
		return; /* (no IPv6 here) */
	close(fd);
	struct sockaddr_in6 m;

	memset(&m, 0, sizeof(m));
	m.sin6_family = AF_INET6;
	m.sin6_port = htons(5000);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.2", &m.sin6_addr), 1);
	assert_true(pl_src_is_host((struct sockaddr *)&m, sizeof(m), AF_INET6));
}

/* The same IPv6 address with another scope id (the interface of a link-local address: fe80::1
 * on two links are two destinations) is another entry: "not host" recorded for one does not
 * answer for the other, whose probe still says "host" (the kernel ignores the scope of a
 * mapped address, so both probes would say so). */
static void test_scope_is_part_of_key(void **state)
{
	struct sockaddr_in6 m0, m7;
	int fd = socket(AF_INET6, SOCK_DGRAM, 0);

	(void)state;
	if (fd < 0)
		return; /* (no IPv6 here) */
	close(fd);
	memset(&m0, 0, sizeof(m0));
	m0.sin6_family = AF_INET6;
	m0.sin6_port = htons(5001);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.3", &m0.sin6_addr), 1);
	m7 = m0;
	m7.sin6_scope_id = 7;
	assert_true(pl_src_is_host((struct sockaddr *)&m7, sizeof(m7), AF_INET6)); /* the probe */
	pl_src_not_host((struct sockaddr *)&m0, AF_INET6);
	assert_false(pl_src_is_host((struct sockaddr *)&m0, sizeof(m0), AF_INET6));
	assert_true(pl_src_is_host((struct sockaddr *)&m7, sizeof(m7), AF_INET6));
}

/* A connect left unbound found a source that is not this host's (pl_connect_late()): the next
 * connect to that destination binds, as the commit that made the cache says ("a connect that
 * finds another source stays TCP and the next binds"). Re-learning the route by the UDP probe
 * would say "host" again wherever the difference is the socket's own (SO_BINDTODEVICE, SO_MARK,
 * a policy rule on ipproto tcp or the source port, a cgroup connect hook): every connect would
 * stay TCP. */
static void test_other_source_makes_next_bind(void **state)
{
	struct sockaddr_in d = v4("127.0.0.3", 5001);

	(void)state;
	assert_true(pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET));
	pl_src_not_host((struct sockaddr *)&d, AF_INET);
	assert_false(pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET));
	/* (another destination, or the same for another socket family, is not affected) */
	struct sockaddr_in o = v4("127.0.0.4", 5001);

	assert_true(pl_src_is_host((struct sockaddr *)&o, sizeof(o), AF_INET));
}

/* Not this host's: the route's source is 127.0.0.1, the host has 127.0.0.5 only. */
static void test_route_source_not_host(void **state)
{
	struct sockaddr_in d = v4("127.0.0.6", 5002);

	(void)state;
	memset(&cf, 0, sizeof(cf));
	host_addr("127.0.0.5");
	assert_false(pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET));
	setup(NULL);
}

/* "Not host" lasts pl_src_ttl_ns from when it was recorded; then the probe is asked again. */
static void test_entry_expires(void **state)
{
	struct sockaddr_in d = v4("127.0.0.8", 5004);
	int64_t ttl = pl_src_ttl_ns;

	(void)state;
	pl_src_ttl_ns = 50 * 1000000LL;
	pl_src_not_host((struct sockaddr *)&d, AF_INET);
	int64_t t0 = pl_now_ns();
	bool host = pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET);

	if (pl_now_ns() - t0 < pl_src_ttl_ns)
		assert_false(host);
	usleep(60 * 1000);
	assert_true(pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET));
	pl_src_ttl_ns = ttl;
}

/* A fresh "not host" outlives newer "host" entries: more destinations than the cache holds are
 * probed after the mark ("host", found again by a probe), and the mark must still be there.
 * (Replaced as the oldest, it made the next connect stay TCP instead of binding.) */
static void test_not_host_replaced_last(void **state)
{
	struct sockaddr_in n = v4("127.0.4.1", 6002);
	int64_t ttl = pl_src_ttl_ns;
	char a[32];

	(void)state;
	pl_src_ttl_ns = 3600 * 1000000000LL;
	pl_src_not_host((struct sockaddr *)&n, AF_INET);
	for (int i = 0; i < 40; i++) {
		snprintf(a, sizeof(a), "127.0.5.%d", 1 + i);
		struct sockaddr_in h = v4(a, 6002);
		assert_true(pl_src_is_host((struct sockaddr *)&h, sizeof(h), AF_INET));
	}
	assert_false(pl_src_is_host((struct sockaddr *)&n, sizeof(n), AF_INET));
	pl_src_ttl_ns = ttl;
}

/* Readers beside one writer. Readers look up 4 destinations whose probe says "host" (a hit, or a
 * miss that probes and inserts); the writer records "not host" for destinations it then reads
 * back (false while the TTL, 100 ms here, has not passed: a fresh "not host" is replaced last)
 * and cycles through 40 more destinations, more than the cache holds: entries replaced,
 * evicted, expired and freed under the readers' feet; readers look those up too (ASan sees a
 * use after free). */
#define RD_THREADS 3
#define RD_ROUNDS  20000
#define WR_ROUNDS  3000

static _Atomic int rd_bad, wr_bad;

static void *reader(void *arg)
{
	char a[32];
	struct sockaddr_in d[4];

	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "127.0.1.%d", 1 + i + 4 * (int)(intptr_t)arg);
		d[i] = v4(a, 6000);
	}
	for (int r = 0; r < RD_ROUNDS; r++) {
		if (!pl_src_is_host((struct sockaddr *)&d[r % 4], sizeof(d[0]), AF_INET))
			atomic_fetch_add_explicit(&rd_bad, 1, memory_order_relaxed);
		/* (the writer's: replaced as read, the answer either; for ASan) */
		snprintf(a, sizeof(a), "127.0.2.%d", 1 + r % 8);
		struct sockaddr_in w = v4(a, 6001);
		pl_src_is_host((struct sockaddr *)&w, sizeof(w), AF_INET);
	}
	return NULL;
}

static void *writer(void *arg)
{
	char a[32];

	(void)arg;
	for (int r = 0; r < WR_ROUNDS; r++) {
		snprintf(a, sizeof(a), "127.0.2.%d", 1 + r % 8);
		struct sockaddr_in n = v4(a, 6001);
		int64_t t0 = pl_now_ns();

		pl_src_not_host((struct sockaddr *)&n, AF_INET);
		bool host = pl_src_is_host((struct sockaddr *)&n, sizeof(n), AF_INET);
		if (host && pl_now_ns() - t0 < pl_src_ttl_ns)
			atomic_fetch_add_explicit(&wr_bad, 1, memory_order_relaxed);
		snprintf(a, sizeof(a), "127.0.3.%d", 1 + r % 40);
		struct sockaddr_in c = v4(a, 6001);
		if (!pl_src_is_host((struct sockaddr *)&c, sizeof(c), AF_INET))
			atomic_fetch_add_explicit(&wr_bad, 1, memory_order_relaxed);
	}
	return NULL;
}

static void test_readers_beside_writer(void **state)
{
	pthread_t rd[RD_THREADS], wr;
	int64_t ttl = pl_src_ttl_ns;

	(void)state;
	pl_src_ttl_ns = 100 * 1000000LL;
	for (intptr_t i = 0; i < RD_THREADS; i++)
		assert_int_equal(pthread_create(&rd[i], NULL, reader, (void *)i), 0);
	assert_int_equal(pthread_create(&wr, NULL, writer, NULL), 0);
	for (int i = 0; i < RD_THREADS; i++)
		pthread_join(rd[i], NULL);
	pthread_join(wr, NULL);
	pl_src_ttl_ns = ttl;
	assert_int_equal(atomic_load_explicit(&rd_bad, memory_order_relaxed), 0);
	assert_int_equal(atomic_load_explicit(&wr_bad, memory_order_relaxed), 0);
	assert_true(n_threads() <= 1 + SAN_THREADS); /* (no liburcu worker left behind) */
}

/* fork() while another thread is in and out of read-side sections: the child keeps the parent's
 * entries and can still replace them (its grace periods do not wait for the parent's threads,
 * urcu_bp_after_fork_child(); a registry lock left held would hang it: wait_child() fails). */
static _Atomic bool fk_stop;

static void *fork_reader(void *arg)
{
	struct sockaddr_in d = v4("127.0.0.9", 5005);

	(void)arg;
	while (!atomic_load_explicit(&fk_stop, memory_order_relaxed))
		pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET);
	return NULL;
}

/* Wait up to 10 s for PID (a grace period blocks every signal: alarm() in the child cannot end
 * it); false, and PID killed, when it did not end by then. */
static bool wait_child(pid_t pid, int *ret_status)
{
	for (int ms = 0; ms < 10000; ms++) {
		if (waitpid(pid, ret_status, WNOHANG) == pid)
			return true;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, ret_status, 0);
	return false;
}

static void test_fork_child_keeps_and_replaces(void **state)
{
	struct sockaddr_in d = v4("127.0.0.10", 5005), e = v4("127.0.0.11", 5005);
	pthread_t th;
	int status;

	(void)state;
	pl_src_not_host((struct sockaddr *)&d, AF_INET);
	assert_int_equal(pthread_create(&th, NULL, fork_reader, NULL), 0);
	for (int round = 0; round < 20; round++) {
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0) {
			bool ok = !pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET);
			pl_src_not_host((struct sockaddr *)&e, AF_INET);
			pl_src_not_host((struct sockaddr *)&d, AF_INET); /* (replaces: a grace period) */
			ok = ok && !pl_src_is_host((struct sockaddr *)&e, sizeof(e), AF_INET) &&
			     !pl_src_is_host((struct sockaddr *)&d, sizeof(d), AF_INET);
			_exit(ok ? 0 : 1);
		}
		assert_true(wait_child(pid, &status));
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		pl_src_not_host((struct sockaddr *)&d, AF_INET); /* (and the parent still can) */
	}
	atomic_store_explicit(&fk_stop, true, memory_order_relaxed);
	pthread_join(th, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urcu_loaded_by_first_write),
		cmocka_unit_test(test_route_source_is_host),
		cmocka_unit_test(test_scope_is_part_of_key),
		cmocka_unit_test(test_other_source_makes_next_bind),
		cmocka_unit_test(test_route_source_not_host),
		cmocka_unit_test(test_entry_expires),
		cmocka_unit_test(test_not_host_replaced_last),
		cmocka_unit_test(test_readers_beside_writer),
		cmocka_unit_test(test_fork_child_keeps_and_replaces),
	};

	/* (as pl_init_once() does for the library) */
	pthread_atfork(pl_addr_atfork_prepare, pl_addr_atfork_parent, pl_addr_atfork_child);
	return cmocka_run_group_tests(tests, setup, NULL);
}
