// SPDX-License-Identifier: MIT
/* Unit tests of preload/pl_addr.c's cache of the kernel's source address per destination
 * (pl_src_is_host(), pl_src_not_host()): what the loopback routes give, IPv4 and IPv4-mapped,
 * and what a connect that found another source leaves for the next one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>
#include <unistd.h>

#include "preload/pl_int.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_route_source_is_host),
		cmocka_unit_test(test_other_source_makes_next_bind),
		cmocka_unit_test(test_route_source_not_host),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
