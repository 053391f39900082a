/* SPDX-License-Identifier: MIT */
/* Unit tests for conf/: the examples parse to the expected values, malformed configs give the
 * exact error and line, routing, environment overrides, and robustness against garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf/conf.h"
#include "util/log.h"

/* Examples are found relative to the source root (tests run from it, as `make check` does). */
#define EX(name) "conf/examples/" name

static char tmpdir[128];

static int setup_tmpdir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ntbsock-test-conf-%d", (int)getpid());
	mkdir(tmpdir, 0700);
	return 0;
}

static int teardown_tmpdir(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static struct conf *load_ok(const char *text)
{
	struct conf *c = NULL;
	struct conf_error e;
	int rc = conf_load_string(text, "t.conf", &c, &e);

	if (rc)
		fail_msg("unexpected error: %s", e.text);
	assert_non_null(c);
	return c;
}

static struct sockaddr_storage sa4(const char *ip, uint16_t port, socklen_t *len)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
	*len = sizeof(*in);
	return ss;
}

static struct sockaddr_storage sa6(const char *ip, uint16_t port, socklen_t *len)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
	*len = sizeof(*in6);
	return ss;
}

static void route(const struct conf *c, const char *ip, uint16_t port, struct conf_route *r)
{
	socklen_t len;
	struct sockaddr_storage ss = strchr(ip, ':') ? sa6(ip, port, &len) : sa4(ip, port, &len);

	assert_int_equal(conf_route(c, (struct sockaddr *)&ss, len, r), 0);
}

static void expect_route(const struct conf *c, const char *ip, uint16_t port,
			 enum conf_action action, const char *peer, int rule, const char *reason);

/* --- examples ------------------------------------------------------------------------------ */

static void check_demo(const char *path, const char *host, const char *self, const char *peer,
		       const char *peer_ip, int side)
{
	struct conf *c = NULL;
	struct conf_error e;
	struct conf_route r;
	char buf[64];
	int rc = conf_load(path, &c, &e);

	if (rc)
		fail_msg("%s: %s", path, e.text);
	assert_string_equal(c->path, path);
	assert_string_equal(c->host_name, host);
	assert_int_equal(c->n_host_addrs, 1);
	assert_string_equal(conf_addr_str(&c->host_addrs[0], buf, sizeof(buf)), self);
	assert_int_equal(c->n_links, 1);
	assert_string_equal(c->links[0].name, "ab");
	assert_string_equal(c->links[0].backend, "shm");
	assert_int_equal(c->links[0].side, side);
	assert_int_equal(c->links[0].window_size, 256u << 20);
	assert_string_equal(c->links[0].path, "/dev/shm/ntbsock-demo");
	assert_int_equal(c->links[0].mode, 0600);
	assert_int_equal(c->links[0].group, (gid_t)-1);
	assert_int_equal(c->links[0].bar, -1);
	assert_int_equal(c->links[0].heartbeat_ms, 100);
	assert_int_equal(c->links[0].link_timeout_ms, 500);
	assert_false(c->links[0].fault.enabled);
	assert_int_equal(c->n_peers, 1);
	assert_string_equal(c->peers[0].name, peer);
	assert_string_equal(c->peers[0].link_name, "ab");
	assert_int_equal(c->peers[0].link_index, 0);
	assert_int_equal(c->peers[0].n_addrs, 1);
	assert_string_equal(conf_addr_str(&c->peers[0].addrs[0], buf, sizeof(buf)), peer_ip);
	assert_false(c->rules_default);
	assert_int_equal(c->n_rules, 1);
	assert_int_equal(c->rules[0].port_lo, 1);
	assert_int_equal(c->rules[0].port_hi, 65535);
	assert_int_equal(c->rules[0].action, CONF_ACTION_NTB);
	assert_int_equal(c->rules[0].match.len, 32);
	assert_int_equal(c->fallback, CONF_FALLBACK_TCP);
	assert_int_equal(c->log_level, LL_WARN);
	assert_string_equal(c->log_file, "");
	assert_false(c->disabled);
	/* every TCP port to the peer goes over the link, nothing else does */
	route(c, peer_ip, 5201, &r);
	assert_int_equal(r.action, CONF_ACTION_NTB);
	assert_ptr_equal(r.peer, &c->peers[0]);
	assert_int_equal(r.link_index, 0);
	route(c, peer_ip, 1, &r);
	assert_int_equal(r.action, CONF_ACTION_NTB);
	route(c, "127.0.0.3", 5201, &r);
	assert_int_equal(r.action, CONF_ACTION_TCP);
	conf_free(c);
}

static void test_example_demo_a(void **state)
{
	(void)state;
	check_demo(EX("demo-a.conf"), "A", "127.0.0.1", "B", "127.0.0.2", 0);
}

static void test_example_demo_b(void **state)
{
	(void)state;
	check_demo(EX("demo-b.conf"), "B", "127.0.0.2", "A", "127.0.0.1", 1);
}

/* The 4-host mesh: every pair joined, hosts 1 and 2 by two links. */
static void test_example_mesh(void **state)
{
	static const char *const h12[] = { "h1h2a", "h1h2b" };
	char path[64], buf[64];

	(void)state;
	for (int h = 1; h <= 4; h++) {
		struct conf *c = NULL;
		struct conf_error e;
		struct conf_route r;

		snprintf(path, sizeof(path), EX("mesh/host%d.conf"), h);
		if (conf_load(path, &c, &e))
			fail_msg("%s: %s", path, e.text);
		assert_int_equal(c->n_links, h <= 2 ? 4 : 3);
		assert_int_equal(c->n_peers, 3);
		snprintf(buf, sizeof(buf), "127.0.0.%d", h);
		route(c, buf, 5201, &r);
		assert_int_equal(r.action, CONF_ACTION_TCP); /* itself: not a peer */
		for (int o = 1; o <= 4; o++) {
			char want[32], ip[32];
			int a = h < o ? h : o, b = h < o ? o : h;

			if (o == h)
				continue;
			snprintf(ip, sizeof(ip), "127.0.0.%d", o);
			route(c, ip, 5201, &r);
			assert_int_equal(r.action, CONF_ACTION_NTB);
			assert_non_null(r.peer);
			snprintf(want, sizeof(want), "host%d", o);
			assert_string_equal(r.peer->name, want);
			if (a == 1 && b == 2) {
				assert_int_equal(r.peer->n_links, 2);
				for (int k = 0; k < 2; k++) {
					const struct conf_link *l = &c->links[r.peer->link_indices[k]];

					assert_string_equal(l->name, h12[k]);
					assert_int_equal(l->side, h == a ? 0 : 1);
				}
			} else {
				const struct conf_link *l = &c->links[r.peer->link_index];

				assert_int_equal(r.peer->n_links, 1);
				snprintf(want, sizeof(want), "h%dh%d", a, b);
				assert_string_equal(l->name, want);
				assert_int_equal(l->side, h == a ? 0 : 1);
				snprintf(want, sizeof(want), "/dev/shm/ntbsock-mesh-h%dh%d", a, b);
				assert_string_equal(l->path, want);
			}
			assert_int_equal(r.link_index, r.peer->link_indices[0]);
		}
		for (int i = 0; i < c->n_links; i++)
			assert_int_equal(c->links[i].speed.bandwidth, 0); /* off by default */
		conf_free(c);
	}
}

/* A speed group is read as written; a link without one is not modelled. */
static void test_speed_group(void **state)
{
	struct conf *c = NULL;
	struct conf_error e;
	int rc;

	(void)state;
	rc = conf_load_string("host = { name = \"A\"; };\n"
			      "links = ( { name = \"a\"; backend = \"shm\";\n"
			      "  speed = { bandwidth = \"3500M\"; latency_ns = 800; }; },\n"
			      "  { name = \"b\"; backend = \"shm\"; speed = { latency_ns = 5; }; },\n"
			      "  { name = \"c\"; backend = \"shm\"; } );\n", "t.conf", &c, &e);
	if (rc)
		fail_msg("%s", e.text);
	assert_int_equal(c->links[0].speed.bandwidth, 3500ull << 20);
	assert_int_equal(c->links[0].speed.latency_ns, 800);
	assert_int_equal(c->links[1].speed.bandwidth, 0);
	assert_int_equal(c->links[1].speed.latency_ns, 5);
	assert_int_equal(c->links[2].speed.bandwidth, 0);
	assert_int_equal(c->links[2].speed.latency_ns, 0);
	conf_free(c);
}

static void test_example_full(void **state)
{
	struct conf *c = NULL;
	struct conf_error e;
	struct conf_tunables d;
	char buf[64];
	int rc;

	(void)state;
	rc = conf_load(EX("ntbsock.conf"), &c, &e);
	if (rc)
		fail_msg("%s", e.text);
	assert_string_equal(c->host_name, "A");
	assert_int_equal(c->n_host_addrs, 2);
	assert_string_equal(conf_addr_str(&c->host_addrs[1], buf, sizeof(buf)), "fd00::1");
	assert_int_equal(c->n_links, 2);
	assert_string_equal(c->links[0].path, "/dev/shm/ntbsock-ab");
	assert_int_equal(c->links[0].mode, 0660);
	assert_false(c->links[0].fault.enabled);
	assert_int_equal(c->links[0].fault.seed, 7);
	assert_string_equal(c->links[1].backend, "pci");
	assert_string_equal(c->links[1].device, "1af4:1110");
	assert_int_equal(c->links[1].bar, 2);
	assert_int_equal(c->links[1].side, 1);
	assert_int_equal(c->links[1].window_size, 16u << 20);
	assert_int_equal(c->n_peers, 2);
	assert_int_equal(c->peers[1].link_index, 1);
	assert_int_equal(c->peers[1].n_addrs, 2);
	assert_int_equal(c->n_rules, 3);
	assert_int_equal(c->rules[0].port_lo, 22);
	assert_int_equal(c->rules[0].port_hi, 22);
	assert_int_equal(c->rules[0].action, CONF_ACTION_TCP);
	assert_int_equal(c->rules[2].match.addr.family, AF_INET6);
	assert_int_equal(c->rules[2].match.len, 64);
	assert_int_equal(c->rules[2].port_lo, 0);
	assert_int_equal(c->rules[2].port_hi, 65535);
	/* the example shows the defaults */
	conf_tunables_defaults(&d);
	assert_memory_equal(&c->tunables, &d, sizeof(d));
	assert_int_equal(d.contexts, 256);
	assert_int_equal(d.inline_max, 116);
	assert_int_equal(d.queue_size, 0); /* auto */
	assert_int_equal(d.short_max, 16u << 10);
	assert_int_equal(d.inline_slots, 8);
	assert_int_equal(d.connections, 0); /* auto */
	assert_int_equal(d.max_err, 32);
	assert_int_equal(d.setup_timeout_ms, 2000);
	assert_int_equal(d.peer_timeout_ms, 30000);
	assert_int_equal(c->fallback, CONF_FALLBACK_TCP);
	assert_int_equal(c->log_level, LL_WARN);
	conf_free(c);
}

static void test_example_ivshmem(void **state)
{
	struct conf *c = NULL;
	struct conf_error e;
	int rc;

	(void)state;
	rc = conf_load(EX("ivshmem.conf"), &c, &e);
	if (rc)
		fail_msg("%s", e.text);
	assert_string_equal(c->links[0].backend, "pci");
	assert_string_equal(c->links[0].device, "1af4:1110");
	assert_int_equal(c->links[0].bar, 2);
	assert_true(c->links[0].fault.enabled);
	assert_true(c->links[0].fault.drop == 0.001);
	assert_int_equal(c->links[0].fault.seed, 1);
	expect_route(c, "10.0.0.2", 22, CONF_ACTION_TCP, "guest2", 0, "rule 1 says tcp");
	expect_route(c, "10.0.0.2", 80, CONF_ACTION_NTB, "guest2", 1, "rule 2 says ntb");
	assert_int_equal(c->tunables.contexts, 32);
	assert_int_equal(c->fallback, CONF_FALLBACK_ERROR);
	assert_int_equal(c->log_level, LL_INFO);
	assert_string_equal(c->log_file, "/var/log/ntbsock.log");
	conf_free(c);
}

static void test_defaults_minimal(void **state)
{
	struct conf *c;
	struct conf_route r;

	(void)state;
	c = load_ok("host = { name = \"A\"; };\n"
		    "links = ( { name = \"l\"; backend = \"shm\"; } );\n"
		    "peers = ( { name = \"B\"; addresses = \"10.1.1.1\"; link = \"l\"; } );\n");
	assert_int_equal(c->n_host_addrs, 0);
	assert_int_equal(c->links[0].side, -1);
	assert_int_equal(c->links[0].window_size, 16u << 20);
	assert_string_equal(c->links[0].path, "/dev/shm/ntbsock-l");
	assert_int_equal(c->links[0].mode, 0600);
	assert_true(c->rules_default);
	assert_int_equal(c->n_rules, 0);
	route(c, "10.1.1.1", 80, &r);
	assert_int_equal(r.action, CONF_ACTION_NTB);
	assert_int_equal(r.rule_index, -1);
	assert_string_equal(r.reason, "default: peer B");
	conf_free(c);
}

/* A loopback link: the host's own addresses may be a peer's; side stays -1 (both). */
static void test_loopback_link(void **state)
{
	struct conf *c;
	struct conf_route rt;
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(80) };

	(void)state;
	c = load_ok("host = { name = \"A\"; addresses = [ \"127.0.0.1\" ]; };\n"
		    "links = ( { name = \"lo\"; backend = \"shm\"; loopback = true; },\n"
		    "  { name = \"ab\"; backend = \"shm\"; side = 0; } );\n"
		    "peers = ( { name = \"self\"; addresses = \"127.0.0.1\"; link = \"lo\"; },\n"
		    "  { name = \"B\"; addresses = \"127.0.0.2\"; link = \"ab\"; } );\n");
	assert_true(c->links[0].loopback);
	assert_int_equal(c->links[0].side, -1);
	assert_false(c->links[1].loopback);
	dst.sin_addr.s_addr = htonl(0x7f000001);
	assert_int_equal(conf_route(c, (struct sockaddr *)&dst, sizeof(dst), &rt), 0);
	assert_int_equal(rt.action, CONF_ACTION_NTB);
	assert_int_equal(rt.link_index, 0);
	assert_string_equal(conf_peer_by_addr(c, (struct sockaddr *)&dst)->name, "self");
	conf_free(c);
}

static void test_sizes_and_values(void **state)
{
	struct conf *c;
	uint64_t v;

	(void)state;
	c = load_ok("host = { name = \"A\"; };\n"
		    "links = ( { name = \"x\"; backend = \"shm\"; window_size = 131072; side = 1;\n"
		    "  mode = \"640\"; heartbeat_ms = 10; link_timeout_ms = 30; allow_foreign_owner = true;\n"
		    "  group = 0; fault = { drop = 0; corrupt = 0.5; delay_us = 5; seed = 12345678901L; }; },\n"
		    "  { name = \"y\"; backend = \"shm\"; window_size = \"1G\";\n"
		    "    ivshmem_server = \"/run/ivshmem.sock\"; },\n"
		    "  { name = \"z\"; backend = \"pci\"; device = \"0000:00:04.0\"; side = 0;\n"
		    "    doorbell = false; } );\n"
		    "tunables = { queue_size = \"32K\"; short_max = 4096; inline_slots = 64; inline_max = 0;\n"
		    "  contexts = 1; max_err = 1000; spin_us = 0; setup_timeout_ms = 600000;\n"
		    "  peer_timeout_ms = 86400000; };\n"
		    "fallback = \"error\";\n"
		    "log = { level = \"debug\"; file = \"/tmp/x.log\"; };\n");
	assert_int_equal(c->links[0].window_size, 131072);
	assert_int_equal(c->links[0].mode, 0640);
	assert_int_equal(c->links[0].group, 0);
	assert_string_equal(c->links[0].group_name, "0");
	assert_true(c->links[0].allow_foreign_owner);
	assert_true(c->links[0].fault.enabled);
	assert_true(c->links[0].fault.corrupt == 0.5);
	assert_int_equal(c->links[0].fault.delay_us, 5);
	assert_int_equal(c->links[0].fault.seed, 12345678901ull);
	assert_int_equal(c->links[0].fault.cut_after, 0);
	assert_int_equal(c->links[0].fault.cut_after_ms, 0);
	assert_int_equal(c->links[1].window_size, 1ull << 30);
	assert_string_equal(c->links[0].ivshmem_server, "");
	assert_string_equal(c->links[1].ivshmem_server, "/run/ivshmem.sock");
	assert_true(c->links[0].doorbell);
	assert_true(c->links[1].doorbell);
	assert_false(c->links[2].doorbell);
	assert_string_equal(c->links[2].backend, "pci");
	assert_string_equal(c->links[2].device, "0000:00:04.0");
	assert_int_equal(c->links[2].bar, -1);
	assert_int_equal(c->tunables.queue_size, 32768);
	assert_int_equal(c->tunables.short_max, 4096);
	assert_int_equal(c->tunables.inline_slots, 64);
	assert_int_equal(c->tunables.inline_max, 0);
	assert_int_equal(c->tunables.contexts, 1);
	assert_int_equal(c->tunables.max_err, 1000);
	assert_int_equal(c->tunables.spin_us, 0);
	assert_int_equal(c->tunables.setup_timeout_ms, 600000);
	assert_int_equal(c->tunables.peer_timeout_ms, 86400000);
	assert_int_equal(c->tunables.cnct_timeout_ms, 10); /* untouched default */
	assert_int_equal(c->fallback, CONF_FALLBACK_ERROR);
	assert_int_equal(c->log_level, LL_DEBUG);
	assert_string_equal(c->log_file, "/tmp/x.log");
	conf_free(c);

	/* a queue smaller than short_max's default takes the default down with it (it crashed
	 * the loader: the error pointed at a short_max the file does not have) */
	c = load_ok("host = { name = \"A\"; };\ntunables = { queue_size = \"8K\"; };\n");
	assert_int_equal(c->tunables.queue_size, 8192);
	assert_int_equal(c->tunables.short_max, 8192);
	conf_free(c);
	c = load_ok("host = { name = \"A\"; };\ntunables = { queue_size = \"64K\"; };\n");
	assert_int_equal(c->tunables.short_max, 16u << 10);
	conf_free(c);

	assert_int_equal(conf_parse_size("64M", &v), 0);
	assert_int_equal(v, 64ull << 20);
	assert_int_equal(conf_parse_size("4k", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(conf_parse_size("2GiB", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(conf_parse_size("512", &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(conf_parse_size("", &v), -EINVAL);
	assert_int_equal(conf_parse_size("-1K", &v), -EINVAL);
	assert_int_equal(conf_parse_size("1.5M", &v), -EINVAL);
	assert_int_equal(conf_parse_size("12X", &v), -EINVAL);
	assert_int_equal(conf_parse_size("99999999999999999999", &v), -ERANGE);
	assert_int_equal(conf_parse_size("17179869184G", &v), -ERANGE);
}


/* --- malformed configs --------------------------------------------------------------------- */

#define H "host = { name = \"A\"; addresses = [ \"10.0.0.1\" ]; };\n"       /* line 1 */
#define L "links = ( { name = \"ab\"; backend = \"shm\"; } );\n"             /* line 2 */
#define LNK(body) "links = ( { name = \"ab\"; backend = \"shm\";\n" body " } );\n" /* 2, 3 */
#define PCI(body) "links = ( { name = \"p\"; backend = \"pci\";\n" body " } );\n"
#define P "peers = ( { name = \"B\"; addresses = [ \"10.0.0.2\" ]; link = \"ab\"; } );\n" /* 3 */
#define RULE(body) "rules = ( { action = \"ntb\";\n" body " } );\n"

struct bad_case {
	const char *text;
	int         line;
	const char *expect; /* substring of conf_error.text */
};

static const struct bad_case bad_cases[] = {
	/* syntax */
	{ "host = { name = ; };\n", 1, "t.conf:1: syntax error: " },
	{ H "links = ( { name = \"ab\"; backend = = \"shm\"; } );\n", 2, "t.conf:2: syntax error: unexpected" },
	{ H "links = ( { name = \"ab\" backend = \"shm\"; }\n", 3, "t.conf:3: syntax error: unexpected" },
	{ "host = { name = \"A\";\n name = \"B\"; };\n", 2, "t.conf:2: syntax error: duplicate setting name" },
	{ H "\nx = \"unterminated;\n", 3, "t.conf:3: syntax error: unterminated string" },
	{ H "links = ( { name = \"ab\"; backend = \"shm\";\n mode = 0600; } );\n", 3,
	  "t.conf:3: syntax error: number with a leading zero (octal is not supported" },
	{ H LNK("window_size = 99999999999;"), 3,
	  "t.conf:3: syntax error: integer out of range (beyond 32 bits" },
	{ H LNK("fault = { seed = 99999999999999999999L; };"), 3,
	  "syntax error: integer out of range (beyond 64 bits" },
	{ H "\n\n@include \"ntbsock-no-such-file.conf\"\n", 4,
	  "t.conf:4: syntax error: cannot open include file: no such file (value 'ntbsock-no-such-file.conf')" },
	/* unknown keys at every level */
	{ H "bogus = 1;\n", 2, "t.conf:2: key 'bogus': unknown key (value '1')" },
	{ "host = { name = \"A\";\n colour = \"red\"; };\n", 2, "t.conf:2: key 'host.colour': unknown key (value 'red')" },
	{ H LNK("windowsize = \"64M\";"), 3, "t.conf:3: key 'links[0].windowsize': unknown key (did you mean 'window_size'?) (value '64M')" },
	{ H LNK("fault = { drop = 0.1;\n dropp = 0.2; };"), 4, "key 'links[0].fault.dropp': unknown key (did you mean 'drop'?)" },
	{ H "tunables = {\n queue = 5; };\n", 3, "key 'tunables.queue': unknown key (value '5')" },
	{ H "log = { level = \"info\";\n path = \"/x\"; };\n", 3, "key 'log.path': unknown key" },
	{ H L "peers = ( { name = \"B\"; addresses = [ \"10.0.0.2\" ]; link = \"ab\";\n port = 1; } );\n", 4,
	  "key 'peers[0].port': unknown key" },
	{ H RULE("match = \"any\"; peer = \"B\";"), 3, "key 'rules[0].peer': unknown key (value 'B')" },
	/* missing required keys */
	{ "links = ();\n", 0, "t.conf: key 'host': required key is missing" },
	{ "host = {\n addresses = [ \"10.0.0.1\" ]; };\n", 1, "t.conf:1: key 'host.name': required key is missing" },
	{ H "links = (\n { name = \"ab\";\n side = 0; } );\n", 3, "t.conf:3: key 'links[0].backend': required key is missing" },
	{ H L "peers = (\n { name = \"B\"; addresses = [ \"10.0.0.2\" ]; } );\n", 4, "key 'peers[0].link': required key is missing" },
	{ H "rules = (\n { match = \"any\"; } );\n", 3, "key 'rules[0].action': required key is missing" },
	{ H PCI("side = 0;"), 2, "t.conf:2: key 'links[0].device': required key is missing" },
	{ H PCI("device = \"1af4:1110\";"), 2, "key 'links[0].side': required key is missing" },
	/* wrong types */
	{ "host = { name = 5; };\n", 1, "t.conf:1: key 'host.name': must be a string (value '5')" },
	{ "host = \"A\";\n", 1, "key 'host': must be a group { ... } (value 'A')" },
	{ H "links = { name = \"ab\"; };\n", 2, "key 'links': must be a list ( { ... }, { ... } )" },
	{ H "rules = ( \"x\" );\n", 2, "key 'rules[0]': must be a group { ... } (value 'x')" },
	{ H LNK("window_size = true;"), 3, "key 'links[0].window_size': must be an integer or a size string like \"64M\" (value 'true')" },
	{ H LNK("heartbeat_ms = \"100\";"), 3, "key 'links[0].heartbeat_ms': must be an integer (value '100')" },
	{ H LNK("allow_foreign_owner = 1;"), 3, "must be true or false (value '1')" },
	{ H LNK("fault = { drop = \"x\"; };"), 3, "key 'links[0].fault.drop': must be a number (value 'x')" },
	{ H LNK("mode = 384;"), 3, "key 'links[0].mode': must be an octal string like \"0600\" (value '384')" },
	{ H "host2 = 1;\n", 2, "key 'host2': unknown key" },
	/* ranges and formats */
	{ H LNK("window_size = 100000;"), 3, "key 'links[0].window_size': must be a multiple of 4096 (value '100000')" },
	{ H LNK("window_size = \"4K\";"), 3, "out of range (allowed 64K..64G) (value '4K')" },
	{ H LNK("window_size = 99999999999L;"), 3, "out of range (allowed 64K..64G) (value '99999999999')" },
	{ H LNK("window_size = \"64Q\";"), 3, "not a size (an integer, or a string like \"64M\") (value '64Q')" },
	{ H LNK("window_size = -4096;"), 3, "out of range (allowed 64K..64G) (value '-4096')" },
	{ H LNK("window_size = \"1M\";"), 3, "key 'links[0].window_size': window 1M too small for tunables (256 contexts x 4K queues + 256 connections x 8 inline slots need 1476K) (value '1M')" },
	{ H "tunables = { queue_size = \"1M\"; contexts = 64; };\n" LNK("window_size = \"64M\";"), 4, "window 64M too small for tunables (64 contexts x 1M queues + 64 connections x 8 inline slots need" },
	{ H "tunables = { connections = 16385; };\n", 2, "key 'tunables.connections': out of range (allowed 0..16384) (value '16385')" },
	{ H "tunables = { connections = \"many\"; };\n", 2, "key 'tunables.connections'" },
	{ H "tunables = { connections = 12000; };\n" LNK("window_size = \"16M\";"), 4, "window 16M too small for tunables (256 contexts x 4K queues + 12000 connections x 8 inline slots need" },
	{ H "tunables = { queue_size = 3; };\n", 2, "out of range (allowed 4K..1G) (value '3')" },
	{ H "tunables = { peer_timeout_ms = 0; };\n", 2, "key 'tunables.peer_timeout_ms': out of range (allowed 1..86400000) (value '0')" },
	{ H "tunables = {\n queue_size = \"3M\"; };\n", 3, "key 'tunables.queue_size': must be a power of two (value '3M')" },
	{ H "tunables = { inline_slots = 100; };\n", 2, "key 'tunables.inline_slots': must be a power of two (value '100')" },
	{ H "tunables = { inline_max = 117; };\n", 2, "key 'tunables.inline_max': out of range (allowed 0..116) (value '117')" },
	{ H "tunables = { contexts = 0; };\n", 2, "out of range (allowed 1..4096) (value '0')" },
	{ H "tunables = { contexts = -5; };\n", 2, "out of range (allowed 1..4096) (value '-5')" },
	{ H "tunables = { queue_size = \"64K\"; short_max = \"128K\"; };\n", 2, "key 'tunables.short_max': must not exceed queue_size (64K)" },
	{ H "tunables = { max_err = 1001; };\n", 2, "out of range (allowed 1..1000)" },
	{ H LNK("fault = { drop = 1.5; };"), 3, "key 'links[0].fault.drop': out of range (allowed 0..1) (value '1.5')" },
	{ H LNK("fault = { delay_us = 2000000; };"), 3, "out of range (allowed 0..1000000)" },
	{ H LNK("fault = { cut_after = \"64X\"; };"), 3, "key 'links[0].fault.cut_after': not a size (an integer, or a string like \"64M\") (value '64X')" },
	{ H LNK("fault = { cut_after = -1; };"), 3, "key 'links[0].fault.cut_after': out of range (allowed 0..9223372036854775807) (value '-1')" },
	{ H LNK("fault = { cut_after_ms = 86400001; };"), 3, "key 'links[0].fault.cut_after_ms': out of range (allowed 0..86400000) (value '86400001')" },
	{ H LNK("fault = { cut_after_ms = \"250\"; };"), 3, "key 'links[0].fault.cut_after_ms': must be an integer (value '250')" },
	{ H LNK("fault = { cut_after_ms = 250;\n cut = 1; };"), 4, "key 'links[0].fault.cut': unknown key" },
	{ H LNK("side = 2;"), 3, "key 'links[0].side': out of range (allowed -1..1) (value '2')" },
	{ H PCI("device = \"1af4:1110\"; side = -1;"), 3, "key 'links[0].side': out of range (allowed 0..1)" },
	{ H PCI("device = \"1af4:1110\"; side = 0; bar = 6;"), 3, "key 'links[0].bar': out of range (allowed 0..5)" },
	{ H PCI("device = \"zz\"; side = 0;"), 3, "key 'links[0].device': not a PCI device" },
	{ H PCI("device = \"1af4:1110\"; side = 0; path = \"/dev/shm/x\";"), 3, "key 'links[0].path': only valid with backend \"shm\"" },
	{ H LNK("device = \"1af4:1110\";"), 3, "key 'links[0].device': only valid with backend \"pci\"" },
	{ H PCI("device = \"1af4:1110\"; side = 0; ivshmem_server = \"/s\";"), 3, "key 'links[0].ivshmem_server': only valid with backend \"shm\"" },
	{ H LNK("ivshmem_server = \"ivshmem.sock\";"), 3, "key 'links[0].ivshmem_server': must be an absolute path (value 'ivshmem.sock')" },
	{ H LNK("doorbell = 1;"), 3, "key 'links[0].doorbell': must be true or false (value '1')" },
	{ H LNK("mode = \"0999\";"), 3, "must be an octal string like \"0600\" (value '0999')" },
	{ H LNK("mode = \"0400\";"), 3, "the owner must be able to read and write (0600) (value '0400')" },
	{ H LNK("mode = \"0260\";"), 3, "the owner must be able to read and write (0600) (value '0260')" },
	{ H LNK("path = \"shm/x\";"), 3, "key 'links[0].path': must be an absolute path (value 'shm/x')" },
	{ H LNK("heartbeat_ms = 500; link_timeout_ms = 400;"), 3, "link_timeout_ms (400) must be greater than heartbeat_ms (500)" },
	{ H LNK("group = \"ntbsock-no-such-group\";"), 3, "key 'links[0].group': no such group" },
	/* a backend conf/ has no keys for (whether ntb/ has it: test_pl_glue.c) takes neither
	 * shm's keys nor pci's */
	{ H "links = ( { name = \"ab\"; backend = \"rdma\";\n path = \"/dev/shm/x\"; } );\n", 3, "key 'links[0].path': only valid with backend \"shm\"" },
	{ H "links = ( { name = \"ab\"; backend = \"rdma\";\n side = 0; bar = 2; } );\n", 3, "key 'links[0].bar': only valid with backend \"pci\"" },
	{ H "links = ( { name = \"ab\"; backend = \"shm mem\"; } );\n", 2, "key 'links[0].backend'" },
	{ H "fallback = \"maybe\";\n", 2, "key 'fallback': must be \"tcp\" or \"error\" (value 'maybe')" },
	{ H "log = { level = \"verbose\"; };\n", 2, "key 'log.level': must be \"error\", \"warn\", \"info\" or \"debug\"" },
	{ H "log = { file = \"x.log\"; };\n", 2, "key 'log.file': must be an absolute path" },
	{ H RULE("match = \"any\"; action2 = 1;"), 3, "unknown key" },
	/* names */
	{ "host = { name = \"0123456789012345678901234567890123456789012345678901234567890123\"; };\n", 1,
	  "key 'host.name': too long (64 characters, at most 63)" },
	{ H "links = ( { name = \"a/b\"; backend = \"shm\"; } );\n", 2, "key 'links[0].name': invalid character" },
	{ H "links = ( { name = \"\"; backend = \"shm\"; } );\n", 2, "key 'links[0].name': must not be empty" },
	{ H "links = ( { name = \"ab\"; backend = \"shm\"; },\n { name = \"ab\"; backend = \"shm\"; } );\n", 3,
	  "key 'links[1].name': duplicate link name (first defined at line 2) (value 'ab')" },
	{ H L "peers = ( { name = \"B\"; addresses = \"10.0.0.2\"; link = \"ab\"; },\n"
	  "  { name = \"B\"; addresses = \"10.0.0.3\"; link = \"ab\"; } );\n", 4,
	  "key 'peers[1].name': duplicate peer name (first defined at line 3)" },
	{ H L "peers = ( { name = \"A\"; addresses = \"10.0.0.2\"; link = \"ab\"; } );\n", 3, "a peer cannot have this host's name" },
	/* references and addresses */
	{ H L "peers = ( { name = \"B\"; addresses = [ \"10.0.0.2\" ];\n link = \"zz\"; } );\n", 4,
	  "t.conf:4: key 'peers[0].link': no link with this name (value 'zz')" },
	{ H L "peers = ( { name = \"B\"; addresses = [ \"127.0.0.300\" ]; link = \"ab\"; } );\n", 3,
	  "key 'peers[0].addresses[0]': not an IPv4 or IPv6 address (value '127.0.0.300')" },
	{ H L "peers = ( { name = \"B\"; addresses = [ ]; link = \"ab\"; } );\n", 3, "must list at least one address" },
	{ H L "peers = ( { name = \"B\"; addresses = 5; link = \"ab\"; } );\n", 3, "must be an address string or a list" },
	{ H L "peers = ( { name = \"B\"; addresses = [ \"10.0.0.1\" ]; link = \"ab\"; } );\n", 3,
	  "key 'peers[0].addresses[0]': address belongs to this host (a link joining this host to "
	  "itself says loopback = true) (value '10.0.0.1')" },
	/* loopback links: no side, shm only, and only they may make the host its own peer */
	{ H LNK("loopback = true; side = 1;"), 3, "key 'links[0].side': a loopback link is both sides: leave side out" },
	{ H "links = ( { name = \"ab\"; backend = \"pci\"; device = \"1af4:1110\"; side = 0;\n"
	  " loopback = true; } );\n", 3, "key 'links[0].loopback': only valid with backend \"shm\"" },
	{ H LNK("loopback = 1;"), 3, "key 'links[0].loopback': must be true or false" },
	{ H L P "peers2 = 1;\n", 4, "unknown key" },
	{ H L "peers = ( { name = \"B\"; addresses = \"10.0.0.2\"; link = \"ab\"; },\n"
	  "  { name = \"C\"; addresses = [ \"10.0.0.3\", \"10.0.0.2\" ]; link = \"ab\"; } );\n", 4,
	  "key 'peers[1].addresses[1]': address already belongs to peer 'B'" },
	{ H L "peers = ( { name = \"B\"; addresses = [ \"10.0.0.2\", \"10.0.0.2\" ]; link = \"ab\"; } );\n", 3,
	  "address listed twice" },
	/* several links per peer */
#define L2 "links = ( { name = \"ab\"; backend = \"shm\"; }, { name = \"ab2\"; backend = \"shm\"; } );\n"
	{ H L2 "peers = ( { name = \"B\"; addresses = \"10.0.0.2\";\n links = [ \"ab\", \"ab2\", \"ab\" ]; } );\n", 4,
	  "t.conf:4: key 'peers[0].links[2]': link named twice (value 'ab')" },
	{ H L2 "peers = ( { name = \"B\"; addresses = \"10.0.0.2\"; links = [ \"ab\" ]; },\n"
	  "  { name = \"C\"; addresses = \"10.0.0.3\";\n links = [ \"ab2\", \"ab\" ]; } );\n", 5,
	  "t.conf:5: key 'peers[1].links[1]': link already belongs to peer 'B' (line 3): a link joins one peer (value 'ab')" },
	{ H L2 "peers = ( { name = \"B\"; addresses = \"10.0.0.2\"; link = \"ab\"; },\n"
	  "  { name = \"C\"; addresses = \"10.0.0.3\";\n link = \"ab\"; } );\n", 5,
	  "t.conf:5: key 'peers[1].link': link already belongs to peer 'B' (line 3)" },
	{ H L2 "peers = ( { name = \"B\"; addresses = \"10.0.0.2\"; link = \"ab\";\n links = [ \"ab2\" ]; } );\n", 4,
	  "key 'peers[0].links': give either link or links, not both" },
	{ H L2 "peers = ( { name = \"B\"; addresses = \"10.0.0.2\";\n links = [ ]; } );\n", 4,
	  "key 'peers[0].links': must name at least one link" },
	{ H L2 "peers = ( { name = \"B\"; addresses = \"10.0.0.2\";\n links = [ \"ab\", \"zz\" ]; } );\n", 4,
	  "t.conf:4: key 'peers[0].links[1]': no link with this name (value 'zz')" },
	{ H L2 "peers = ( { name = \"B\"; addresses = \"10.0.0.2\";\n links = \"ab\"; } );\n", 4,
	  "key 'peers[0].links': must be a list of link names" },
	/* emulated speed */
	{ H LNK("speed = { bandwidth = \"512K\"; };"), 3, "key 'links[0].speed.bandwidth': out of range (allowed 1M..1T)" },
	{ H LNK("speed = { bandwidth = \"1G\";\n latency_ns = 2000000000; };"), 4, "key 'links[0].speed.latency_ns': out of range" },
	{ H LNK("speed = { rate = 5; };"), 3, "key 'links[0].speed.rate': unknown key" },
	{ H PCI("device = \"1af4:1110\"; side = 0;\n speed = { bandwidth = \"1G\"; };"), 4,
	  "key 'links[0].speed': only valid with backend \"shm\"" },
	{ H RULE("match = \"10.0.0.0/33\";"), 3, "key 'rules[0].match': bad prefix length (allowed 0..32) (value '10.0.0.0/33')" },
	{ H RULE("match = \"fd00::/129\";"), 3, "bad prefix length (allowed 0..128)" },
	{ H RULE("match = \"10.0.0.1/8\";"), 3, "key 'rules[0].match': host bits set beyond /8 (value '10.0.0.1/8')" },
	{ H RULE("match = \"10.0.0.0/x\";"), 3, "bad prefix length" },
	{ H RULE("match = \"example.com\";"), 3, "not an address or prefix" },
	{ H RULE("match = \"any\"; ports = \"70000\";"), 3, "key 'rules[0].ports': port out of range (allowed 1..65535) (value '70000')" },
	{ H RULE("match = \"any\"; ports = \"20-10\";"), 3, "empty port range (first port above last) (value '20-10')" },
	{ H RULE("match = \"any\"; ports = \"abc\";"), 3, "not a port or port range" },
	{ H RULE("match = \"any\"; ports = 0;"), 3, "port out of range (allowed 1..65535) (value '0')" },
	{ H RULE("match = \"any\"; ports = \"1-\";"), 3, "not a port or port range" },
	{ H RULE("match = \"any\"; action = \"udp\";"), 3, "t.conf:3: syntax error: duplicate setting name" },
	{ H "rules = ( { match = \"any\";\n action = \"udp\"; } );\n", 3, "key 'rules[0].action': must be \"tcp\" or \"ntb\" (value 'udp')" },
};

static void test_bad_configs(void **state)
{
	int failures = 0;

	(void)state;
	assert_true(sizeof(bad_cases) / sizeof(bad_cases[0]) >= 30);
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		struct conf *c = NULL;
		struct conf_error e;
		int rc;

		memset(&e, 0x5a, sizeof(e));
		rc = conf_load_string(bc->text, "t.conf", &c, &e);
		if (rc == 0) {
			print_error("case %zu: loaded, expected \"%s\"\n", i, bc->expect);
			conf_free(c);
			failures++;
			continue;
		}
		if (rc != -EINVAL || e.line != bc->line || !strstr(e.text, bc->expect)) {
			print_error("case %zu: rc %d line %d (want %d)\n  got:  %s\n  want: %s\n", i, rc,
				    e.line, bc->line, e.text, bc->expect);
			failures++;
		}
		assert_null(c);
	}
	assert_int_equal(failures, 0);
}

/* The full format of one error, and each field. */
static void test_error_format(void **state)
{
	struct conf *c = NULL;
	struct conf_error e;

	(void)state;
	assert_int_equal(conf_load_string(H LNK("window_size = \"3K\";"), "x.conf", &c, &e), -EINVAL);
	assert_string_equal(e.text,
			    "x.conf:3: key 'links[0].window_size': out of range (allowed 64K..64G) (value '3K')");
	assert_string_equal(e.file, "x.conf");
	assert_int_equal(e.line, 3);
	assert_string_equal(e.key, "links[0].window_size");
	assert_string_equal(e.value, "3K");
	assert_string_equal(e.msg, "out of range (allowed 64K..64G)");
	assert_null(c);
}

/* --- files, includes and robustness -------------------------------------------------------- */

static void test_files_and_includes(void **state)
{
	char main_path[256], inc_path[256], path[256];
	struct conf *c = NULL;
	struct conf_error e;
	const char *inc = "\n\ntunables = { contexts = 7; };\n";

	(void)state;
	/* missing file */
	snprintf(path, sizeof(path), "%s/none.conf", tmpdir);
	assert_int_equal(conf_load(path, &c, &e), -ENOENT);
	assert_non_null(strstr(e.text, "cannot read config: no such file"));
	/* a directory */
	assert_int_equal(conf_load(tmpdir, &c, &e), -EISDIR);
	/* includes are found beside the main file, and errors inside them name them */
	snprintf(inc_path, sizeof(inc_path), "%s/inc.conf", tmpdir);
	write_file(inc_path, inc, strlen(inc));
	snprintf(main_path, sizeof(main_path), "%s/main.conf", tmpdir);
	write_file(main_path, H "@include \"inc.conf\"\n", strlen(H "@include \"inc.conf\"\n"));
	assert_int_equal(conf_load(main_path, &c, &e), 0);
	assert_int_equal(c->tunables.contexts, 7);
	conf_free(c);
	c = NULL;
	write_file(inc_path, "\n\ntunables = { contexts = 0; };\n", 31);
	assert_int_equal(conf_load(main_path, &c, &e), -EINVAL);
	assert_int_equal(e.line, 3);
	assert_non_null(strstr(e.text, "inc.conf:3: key 'tunables.contexts': out of range"));
	/* an include of itself: depth limit, no hang */
	write_file(inc_path, "@include \"inc.conf\"\n", 20);
	assert_int_equal(conf_load(main_path, &c, &e), -EINVAL);
	assert_non_null(strstr(e.text, "@include nested too deeply"));
	/* includes of special files are refused without opening them for reading */
	write_file(main_path, "@include \"../../../dev/zero\"\n", 29);
	assert_int_equal(conf_load(main_path, &c, &e), -EINVAL);
	assert_non_null(strstr(e.text, "cannot open include file: not a regular file"));
	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	write_file(main_path, "@include \"fifo\"\n", 16);
	assert_int_equal(conf_load(main_path, &c, &e), -EINVAL);
	assert_non_null(strstr(e.text, "not a regular file"));
	assert_int_equal(conf_load(path, &c, &e), -EINVAL); /* a FIFO as the main file */
	/* a NUL byte */
	write_file(main_path, H "\n\0x", sizeof(H "\n\0x") - 1);
	assert_int_equal(conf_load(main_path, &c, &e), -EINVAL);
	assert_int_equal(e.line, 3);
	assert_non_null(strstr(e.text, "binary data (NUL byte)"));
	/* too many lines for libconfig's line numbers */
	{
		size_t n = 70000;
		char *many = malloc(n + sizeof(H));

		assert_non_null(many);
		memcpy(many, H, sizeof(H) - 1);
		memset(many + sizeof(H) - 1, '\n', n);
		write_file(main_path, many, n + sizeof(H) - 1);
		free(many);
	}
	assert_int_equal(conf_load(main_path, &c, &e), -EINVAL);
	assert_non_null(strstr(e.text, "too many lines (at most 65535)"));
	/* too large */
	{
		size_t n = (1u << 20) + 10;
		char *huge = malloc(n);

		assert_non_null(huge);
		memset(huge, '\n', n);
		write_file(main_path, huge, n);
		free(huge);
	}
	assert_int_equal(conf_load(main_path, &c, &e), -EFBIG);
	assert_non_null(strstr(e.text, "larger than 1 MiB"));
	assert_null(c);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

static void try_load(const char *text)
{
	struct conf *c = NULL;
	struct conf_error e;
	int rc = conf_load_string(text, "fuzz.conf", &c, &e);

	if (rc == 0) {
		FILE *null = fopen("/dev/null", "w");

		conf_print(c, null);
		fclose(null);
		conf_free(c);
	} else {
		assert_true(rc == -EINVAL);
		assert_null(c);
		assert_non_null(strstr(e.text, "fuzz.conf"));
	}
}

static void test_robust_garbage(void **state)
{
	static const char alphabet[] = "{}()[];=,\"\\/#*@-+.0123456789abcxyzLe \n\t:";
	char *buf = malloc(4097);
	char *text;
	size_t len;

	(void)state;
	assert_non_null(buf);
	/* random bytes (no NUL: strings end there) */
	for (int i = 0; i < 500; i++) {
		size_t n = rng() % 4096;

		for (size_t k = 0; k < n; k++)
			buf[k] = (char)(rng() % 255 + 1);
		buf[n] = '\0';
		try_load(buf);
	}
	/* random config-ish tokens */
	for (int i = 0; i < 2000; i++) {
		size_t n = rng() % 512;

		for (size_t k = 0; k < n; k++)
			buf[k] = alphabet[rng() % (sizeof(alphabet) - 1)];
		buf[n] = '\0';
		try_load(buf);
	}
	/* mutations of the full example: byte flips, deletions, truncations */
	{
		FILE *f = fopen(EX("ntbsock.conf"), "r");
		char *orig = malloc(1 << 16);

		assert_non_null(f);
		assert_non_null(orig);
		len = fread(orig, 1, (1 << 16) - 1, f);
		fclose(f);
		orig[len] = '\0';
		text = malloc(len + 1);
		assert_non_null(text);
		for (int i = 0; i < 3000; i++) {
			memcpy(text, orig, len + 1);
			for (int m = 0; m < 1 + (int)(rng() % 4); m++) {
				size_t at = rng() % len;

				switch (rng() % 3) {
				case 0:
					text[at] = alphabet[rng() % (sizeof(alphabet) - 1)];
					break;
				case 1:
					memmove(text + at, text + at + 1, len - at);
					break;
				default:
					text[at] = '\0';
				}
			}
			try_load(text);
		}
		free(text);
		free(orig);
	}
	free(buf);
}

static void test_robust_deep_and_huge(void **state)
{
	size_t depth = 200000;
	char *t = malloc(depth * 4 + 64);
	size_t o = 0;

	(void)state;
	assert_non_null(t);
	o += (size_t)sprintf(t, "a = ");
	for (size_t i = 0; i < depth; i++)
		t[o++] = '(';
	for (size_t i = 0; i < depth; i++)
		t[o++] = ')';
	strcpy(t + o, ";\n");
	try_load(t);
	o = (size_t)sprintf(t, "host = ");
	for (size_t i = 0; i < depth; i++)
		o += (size_t)sprintf(t + o, "{x=");
	strcpy(t + o, "1;");
	try_load(t);
	free(t);
	try_load(H LNK("window_size = 1e999;"));
	try_load(H LNK("fault = { drop = -1e999; };"));
	try_load(H LNK("window_size = \"99999999999999999999999999G\";"));
	try_load(H "links = ( " "{ name = \"a\"; backend = \"shm\"; }, " "{ name = \"b\"; backend = \"shm\"; } );\n"
		 "peers = ( { name = \"B\"; addresses = [ \"1.1.1.1\", \"1.1.1.2\", \"1.1.1.3\", \"1.1.1.4\","
		 " \"1.1.1.5\", \"1.1.1.6\", \"1.1.1.7\", \"1.1.1.8\", \"1.1.1.9\", \"1.1.1.10\", \"1.1.1.11\","
		 " \"1.1.1.12\", \"1.1.1.13\", \"1.1.1.14\", \"1.1.1.15\", \"1.1.1.16\", \"1.1.1.17\" ]; link = \"a\"; } );\n");
}

/* --- routing -------------------------------------------------------------------------------- */

static const char route_conf[] =
	"host = { name = \"A\"; addresses = [ \"10.0.0.1\", \"fd00::1\" ]; };\n"
	"links = ( { name = \"l1\"; backend = \"shm\"; }, { name = \"l2\"; backend = \"shm\"; },\n"
	"          { name = \"l3\"; backend = \"shm\"; } );\n"
	"peers = ( { name = \"B\"; addresses = [ \"10.0.0.2\", \"fd00::2\" ]; link = \"l1\"; },\n"
	"          { name = \"C\"; addresses = [ \"10.0.1.3\" ]; link = \"l2\"; },\n"
	"          { name = \"D\"; addresses = [ \"192.168.7.7\" ]; link = \"l3\"; } );\n"
	"rules = (\n"
	"  { match = \"0.0.0.0/0\"; ports = \"22\"; action = \"tcp\"; },\n"     /* rule 1 */
	"  { match = \"10.0.0.0/24\"; ports = \"1000-2000\"; action = \"ntb\"; },\n" /* rule 2 */
	"  { match = \"10.0.0.0/16\"; ports = 5201; action = \"ntb\"; },\n"    /* rule 3 */
	"  { match = \"10.0.0.2\"; ports = \"any\"; action = \"tcp\"; },\n"     /* rule 4 */
	"  { match = \"fd00::/120\"; ports = \"80\"; action = \"ntb\"; },\n"    /* rule 5 */
	"  { match = \"any\"; ports = \"9000-9001\"; action = \"ntb\"; }\n"     /* rule 6 */
	");\n";

static void expect_route(const struct conf *c, const char *ip, uint16_t port,
			 enum conf_action action, const char *peer, int rule, const char *reason)
{
	struct conf_route r;

	route(c, ip, port, &r);
	if (r.action != action || strcmp(r.reason, reason) != 0 || r.rule_index != rule)
		fail_msg("%s:%u: got %s rule %d \"%s\", want %s rule %d \"%s\"", ip, port,
			 conf_action_name(r.action), r.rule_index, r.reason, conf_action_name(action),
			 rule, reason);
	if (peer) {
		assert_non_null(r.peer);
		assert_string_equal(r.peer->name, peer);
		assert_int_equal(r.link_index, r.peer->link_index);
	} else {
		assert_null(r.peer);
		assert_int_equal(r.link_index, -1);
		assert_int_equal(r.peer_index, -1);
	}
}

static void test_routing(void **state)
{
	struct conf *c;
	struct conf_route r;
	struct sockaddr_storage ss;
	socklen_t len;

	(void)state;
	c = load_ok(route_conf);
	expect_route(c, "10.0.0.2", 22, CONF_ACTION_TCP, "B", 0, "rule 1 says tcp");
	expect_route(c, "10.0.0.2", 1000, CONF_ACTION_NTB, "B", 1, "rule 2 says ntb");
	expect_route(c, "10.0.0.2", 2000, CONF_ACTION_NTB, "B", 1, "rule 2 says ntb");
	expect_route(c, "10.0.0.2", 2001, CONF_ACTION_TCP, "B", 3, "rule 4 says tcp");
	expect_route(c, "10.0.0.2", 999, CONF_ACTION_TCP, "B", 3, "rule 4 says tcp");
	expect_route(c, "10.0.0.2", 5201, CONF_ACTION_NTB, "B", 2, "rule 3 says ntb");
	/* 10.0.1.3 is outside the /24 of rule 2 but inside the /16 of rule 3 */
	expect_route(c, "10.0.1.3", 1500, CONF_ACTION_TCP, "C", -1, "no rule matches");
	expect_route(c, "10.0.1.3", 5201, CONF_ACTION_NTB, "C", 2, "rule 3 says ntb");
	expect_route(c, "192.168.7.7", 9001, CONF_ACTION_NTB, "D", 5, "rule 6 says ntb");
	expect_route(c, "192.168.7.7", 9002, CONF_ACTION_TCP, "D", -1, "no rule matches");
	/* not a peer: tcp even though rule 6 would match */
	expect_route(c, "10.0.0.9", 9000, CONF_ACTION_TCP, NULL, -1,
		     "not configured: no peer for address 10.0.0.9");
	/* IPv6 */
	expect_route(c, "fd00::2", 80, CONF_ACTION_NTB, "B", 4, "rule 5 says ntb");
	expect_route(c, "fd00::2", 81, CONF_ACTION_TCP, "B", -1, "no rule matches");
	expect_route(c, "fd00::2", 22, CONF_ACTION_TCP, "B", -1, "no rule matches"); /* rule 1 is v4 */
	expect_route(c, "fd00::2", 9000, CONF_ACTION_NTB, "B", 5, "rule 6 says ntb");
	expect_route(c, "fd00::3", 80, CONF_ACTION_TCP, NULL, -1,
		     "not configured: no peer for address fd00::3");
	/* IPv4-mapped IPv6 counts as IPv4 */
	expect_route(c, "::ffff:10.0.0.2", 1500, CONF_ACTION_NTB, "B", 1, "rule 2 says ntb");
	/* server side */
	ss = sa4("10.0.1.3", 40000, &len);
	assert_string_equal(conf_peer_by_addr(c, (struct sockaddr *)&ss)->name, "C");
	ss = sa6("fd00::2", 1, &len);
	assert_string_equal(conf_peer_by_addr(c, (struct sockaddr *)&ss)->name, "B");
	ss = sa4("10.0.0.1", 1, &len);
	assert_null(conf_peer_by_addr(c, (struct sockaddr *)&ss));
	assert_ptr_equal(conf_link_by_name(c, "l2"), &c->links[1]);
	assert_ptr_equal(conf_link_by_name(c, "l3"), &c->links[2]);
	assert_null(conf_link_by_name(c, "l4"));
	/* non-IP and short addresses */
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNIX;
	assert_int_equal(conf_route(c, (struct sockaddr *)&ss, sizeof(ss), &r), 0);
	assert_int_equal(r.action, CONF_ACTION_TCP);
	assert_string_equal(r.reason, "not an IP address");
	ss = sa4("10.0.0.2", 1000, &len);
	assert_int_equal(conf_route(c, (struct sockaddr *)&ss, 4, &r), -EINVAL);
	/* disabled */
	c->disabled = true;
	expect_route(c, "10.0.0.2", 1000, CONF_ACTION_TCP, NULL, -1, "disabled");
	conf_free(c);

	/* an empty rule list sends everything to tcp */
	c = load_ok(H L P "rules = ();\n");
	expect_route(c, "10.0.0.2", 80, CONF_ACTION_TCP, "B", -1, "no rule matches");
	conf_free(c);
}

static void test_prefix_edges(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("host = { name = \"A\"; };\n"
		    "links = ( { name = \"l\"; backend = \"shm\"; } );\n"
		    "peers = ( { name = \"B\"; addresses = [ \"10.128.0.1\", \"10.127.255.255\", \"2001:db8::8001\" ]; link = \"l\"; } );\n"
		    "rules = ( { match = \"10.128.0.0/9\"; action = \"ntb\"; },\n"
		    "          { match = \"2001:db8::8000/113\"; action = \"ntb\"; },\n"
		    "          { match = \"::/0\"; ports = \"443\"; action = \"ntb\"; } );\n");
	expect_route(c, "10.128.0.1", 1, CONF_ACTION_NTB, "B", 0, "rule 1 says ntb");
	expect_route(c, "10.127.255.255", 1, CONF_ACTION_TCP, "B", -1, "no rule matches");
	expect_route(c, "2001:db8::8001", 1, CONF_ACTION_NTB, "B", 1, "rule 2 says ntb");
	conf_free(c);
}

/* The fault group's cut: cut_after takes sizes, cut_after_ms milliseconds; a group with only a
 * cut enables the decorator; `ntbsock check` shows both. */
static void test_fault_cut_group(void **state)
{
	struct conf *c;
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	c = load_ok(H "links = ( { name = \"a\"; backend = \"shm\"; fault = { cut_after = \"64M\"; }; },\n"
		    "  { name = \"b\"; backend = \"shm\"; fault = { cut_after_ms = 250; }; },\n"
		    "  { name = \"c\"; backend = \"shm\"; fault = { drop = 0.01; cut_after = 65536;\n"
		    "    cut_after_ms = 500; seed = 4; }; },\n"
		    "  { name = \"d\"; backend = \"shm\"; fault = { enabled = false; cut_after = \"1G\"; }; } );\n");
	assert_true(c->links[0].fault.enabled);
	assert_int_equal(c->links[0].fault.cut_after, 64ull << 20);
	assert_int_equal(c->links[0].fault.cut_after_ms, 0);
	assert_true(c->links[0].fault.drop == 0 && c->links[0].fault.corrupt == 0);
	assert_true(c->links[1].fault.enabled);
	assert_int_equal(c->links[1].fault.cut_after, 0);
	assert_int_equal(c->links[1].fault.cut_after_ms, 250);
	assert_true(c->links[2].fault.drop == 0.01);
	assert_int_equal(c->links[2].fault.cut_after, 65536);
	assert_int_equal(c->links[2].fault.cut_after_ms, 500);
	assert_int_equal(c->links[2].fault.seed, 4);
	assert_false(c->links[3].fault.enabled);
	assert_int_equal(c->links[3].fault.cut_after, 1ull << 30);
	f = open_memstream(&out, &len);
	assert_non_null(f);
	conf_print(c, f);
	fclose(f);
	assert_non_null(strstr(out, "    fault                drop=0 corrupt=0 delay_us=0 seed=0 "
				    "cut_after=64M cut_after_ms=0\n"));
	assert_non_null(strstr(out, "    fault                drop=0 corrupt=0 delay_us=0 seed=0 "
				    "cut_after=0 cut_after_ms=250\n"));
	assert_non_null(strstr(out, "    fault                drop=0.01 corrupt=0 delay_us=0 seed=4 "
				    "cut_after=64K cut_after_ms=500\n"));
	free(out);
	conf_free(c);
}

/* --- environment --------------------------------------------------------------------------- */

static void clear_env(void)
{
	unsetenv("NTBSOCK_LOG");
	unsetenv("NTBSOCK_LOG_FILE");
	unsetenv("NTBSOCK_FAULT");
	unsetenv("NTBSOCK_DISABLE");
	unsetenv("NTBSOCK_CONF");
}

static void test_env_overrides(void **state)
{
	struct conf *c;
	struct conf_error e;

	(void)state;
	clear_env();
	c = load_ok(H "links = ( { name = \"a\"; backend = \"shm\"; fault = { drop = 0.5; seed = 1; }; },\n"
		    "  { name = \"b\"; backend = \"shm\"; } );\n"
		    "log = { level = \"error\"; file = \"/tmp/a.log\"; };\n");
	assert_int_equal(conf_apply_env(c, &e), 0);
	assert_int_equal(c->log_level, LL_ERROR);
	assert_true(c->links[0].fault.drop == 0.5);

	setenv("NTBSOCK_LOG", "debug", 1);
	setenv("NTBSOCK_LOG_FILE", "/tmp/b.log", 1);
	setenv("NTBSOCK_FAULT", "drop=0.01,corrupt=0.001,delay_us=5,seed=7", 1);
	setenv("NTBSOCK_DISABLE", "1", 1);
	assert_int_equal(conf_apply_env(c, &e), 0);
	assert_int_equal(c->log_level, LL_DEBUG);
	assert_string_equal(c->log_file, "/tmp/b.log");
	assert_true(c->disabled);
	for (int i = 0; i < 2; i++) {
		assert_true(c->links[i].fault.enabled);
		assert_true(c->links[i].fault.drop == 0.01);
		assert_true(c->links[i].fault.corrupt == 0.001);
		assert_int_equal(c->links[i].fault.delay_us, 5);
		assert_int_equal(c->links[i].fault.seed, 7);
	}
	setenv("NTBSOCK_FAULT", "off", 1);
	setenv("NTBSOCK_DISABLE", "0", 1);
	assert_int_equal(conf_apply_env(c, &e), 0);
	assert_false(c->links[0].fault.enabled);
	assert_false(c->links[1].fault.enabled);
	assert_false(c->disabled);

	setenv("NTBSOCK_LOG", "loud", 1);
	assert_int_equal(conf_apply_env(c, &e), -EINVAL);
	assert_string_equal(e.text, "environment: key 'NTBSOCK_LOG': must be \"error\", \"warn\", "
				    "\"info\" or \"debug\" (value 'loud')");
	unsetenv("NTBSOCK_LOG");
	setenv("NTBSOCK_DISABLE", "maybe", 1);
	assert_int_equal(conf_apply_env(c, &e), -EINVAL);
	assert_non_null(strstr(e.text, "key 'NTBSOCK_DISABLE': must be 1 or 0"));
	unsetenv("NTBSOCK_DISABLE");
	setenv("NTBSOCK_FAULT", "drop=2", 1);
	assert_int_equal(conf_apply_env(c, &e), -EINVAL);
	assert_string_equal(e.text, "environment: key 'NTBSOCK_FAULT': drop: '2' is not a rate in "
				    "0..1 (value 'drop=2')");
	/* a cut alone is a fault setting: the decorator runs for it */
	setenv("NTBSOCK_FAULT", "cut_after=64M", 1);
	assert_int_equal(conf_apply_env(c, &e), 0);
	for (int i = 0; i < 2; i++) {
		assert_true(c->links[i].fault.enabled);
		assert_int_equal(c->links[i].fault.cut_after, 64ull << 20);
		assert_int_equal(c->links[i].fault.cut_after_ms, 0);
		assert_true(c->links[i].fault.drop == 0 && c->links[i].fault.corrupt == 0);
	}
	setenv("NTBSOCK_FAULT", "cut_after=lots", 1);
	assert_int_equal(conf_apply_env(c, &e), -EINVAL);
	assert_string_equal(e.text, "environment: key 'NTBSOCK_FAULT': cut_after: 'lots' is not a "
				    "size (bytes, or with K, M or G: \"64M\") (value 'cut_after=lots')");
	clear_env();
	conf_free(c);
}

static void test_fault_spec(void **state)
{
	static const struct {
		const char *spec, *err;
	} bad[] = {
		{ "", "empty fault spec" },
		{ "drop", "'drop' is not key=value" },
		{ "drop=", "drop: bad value ''" },
		{ "drop=-0.1", "drop: bad value '-0.1'" },
		{ "drop=0.1x", "drop: '0.1x' is not a rate in 0..1" },
		{ "drop=nan", "drop: 'nan' is not a rate in 0..1" },
		{ "corrupt=1.01", "corrupt: '1.01' is not a rate in 0..1" },
		{ "delay_us=1000001", "delay_us: '1000001' is not an integer in 0..1000000" },
		{ "delay_us=5.5", "delay_us: '5.5' is not an integer" },
		{ "seed=99999999999999999999", "seed: '99999999999999999999' is not an integer" },
		{ "loss=0.1", "unknown field 'loss' (known: drop, corrupt, delay_us, seed, cut_after, "
			      "cut_after_ms)" },
		{ "cut_after=64X", "cut_after: '64X' is not a size (bytes, or with K, M or G: \"64M\")" },
		{ "cut_after=", "cut_after: bad value ''" },
		{ "cut_after=-1", "cut_after: bad value '-1'" },
		{ "cut_after=1.5M", "cut_after: '1.5M' is not a size" },
		{ "cut_after=99999999999999999999", "cut_after: '99999999999999999999' is not a size" },
		{ "cut_after=16777216T", "cut_after: '16777216T' is not a size" },
		{ "cut_after_ms=1.5", "cut_after_ms: '1.5' is not an integer in 0..86400000" },
		{ "cut_after_ms=86400001", "cut_after_ms: '86400001' is not an integer in 0..86400000" },
		{ "cut_after_ms=5s", "cut_after_ms: '5s' is not an integer in 0..86400000" },
		{ "cut_after=1M,cut_after=2M", "field 'cut_after' given twice" },
		{ "cut_after_ms=1,cut_after_ms=1", "field 'cut_after_ms' given twice" },
		{ "cut=1", "unknown field 'cut'" },
		{ "cut_after_mss=1", "unknown field 'cut_after_mss'" },
		{ "drop=0.1,,seed=1", "empty field" },
		{ "drop=0.1,", "trailing comma" },
		{ "drop=0.1,drop=0.2", "field 'drop' given twice" },
		{ " drop=0.1", "unknown field ' drop'" },
	};
	struct conf_fault f;
	char err[200];

	(void)state;
	assert_int_equal(conf_parse_fault("drop=0.01,corrupt=0.001,delay_us=5,seed=7", &f, err,
					  sizeof(err)), 0);
	assert_true(f.enabled);
	assert_true(f.drop == 0.01);
	assert_true(f.corrupt == 0.001);
	assert_int_equal(f.delay_us, 5);
	assert_int_equal(f.seed, 7);
	assert_int_equal(conf_parse_fault("seed=3,corrupt=1", &f, err, sizeof(err)), 0);
	assert_true(f.enabled);
	assert_true(f.drop == 0);
	assert_true(f.corrupt == 1);
	assert_int_equal(f.seed, 3);
	assert_int_equal(conf_parse_fault("off", &f, err, sizeof(err)), 0);
	assert_false(f.enabled);
	assert_int_equal(conf_parse_fault("cut_after=64M", &f, err, sizeof(err)), 0);
	assert_true(f.enabled);
	assert_int_equal(f.cut_after, 64ull << 20);
	assert_int_equal(f.cut_after_ms, 0);
	assert_true(f.drop == 0 && f.corrupt == 0);
	assert_int_equal(conf_parse_fault("cut_after_ms=250", &f, err, sizeof(err)), 0);
	assert_true(f.enabled);
	assert_int_equal(f.cut_after_ms, 250);
	assert_int_equal(f.cut_after, 0);
	/* with every other field, corrupt and cut_after not taken for one another */
	assert_int_equal(conf_parse_fault("corrupt=0.1,cut_after=4096,drop=0.2,cut_after_ms=5,"
					  "delay_us=3,seed=9", &f, err, sizeof(err)), 0);
	assert_true(f.corrupt == 0.1 && f.drop == 0.2);
	assert_int_equal(f.cut_after, 4096);
	assert_int_equal(f.cut_after_ms, 5);
	assert_int_equal(f.delay_us, 3);
	assert_int_equal(f.seed, 9);
	assert_int_equal(conf_parse_fault("cut_after=1g", &f, err, sizeof(err)), 0);
	assert_int_equal(f.cut_after, 1ull << 30);
	assert_int_equal(conf_parse_fault("cut_after=2K,cut_after_ms=86400000", &f, err,
					  sizeof(err)), 0);
	assert_int_equal(f.cut_after, 2048);
	assert_int_equal(f.cut_after_ms, 86400000);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&f, 0x77, sizeof(f));
		err[0] = '\0';
		assert_int_equal(conf_parse_fault(bad[i].spec, &f, err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].err))
			fail_msg("spec '%s': got \"%s\", want \"%s\"", bad[i].spec, err, bad[i].err);
	}
}

static void test_find_path(void **state)
{
	char buf[300];
	struct stat st;

	(void)state;
	clear_env();
	assert_int_equal(conf_find_path("/x/explicit.conf", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/x/explicit.conf");
	setenv("NTBSOCK_CONF", "/y/env.conf", 1);
	assert_int_equal(conf_find_path("/x/explicit.conf", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/x/explicit.conf");
	assert_int_equal(conf_find_path(NULL, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/y/env.conf");
	assert_int_equal(conf_find_path("", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/y/env.conf");
	assert_int_equal(conf_find_path(NULL, buf, 5), -ENAMETOOLONG);
	setenv("NTBSOCK_CONF", "", 1);
	if (stat(CONF_DEFAULT_PATH, &st) == 0) {
		assert_int_equal(conf_find_path(NULL, buf, sizeof(buf)), 0);
		assert_string_equal(buf, CONF_DEFAULT_PATH);
	} else {
		assert_int_equal(conf_find_path(NULL, buf, sizeof(buf)), -ENOENT);
	}
	clear_env();
}

static void test_print(void **state)
{
	struct conf *c = NULL;
	struct conf_error e;
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(conf_load(EX("ntbsock.conf"), &c, &e), 0);
	f = open_memstream(&out, &len);
	assert_non_null(f);
	conf_print(c, f);
	fclose(f);
	assert_non_null(strstr(out, "host: A\n  addresses: 10.0.0.1, fd00::1\n"));
	assert_non_null(strstr(out, "  link ab\n    backend              shm\n"));
	assert_non_null(strstr(out, "    window_size          64M (67108864 bytes)\n"));
	assert_non_null(strstr(out, "    device               1af4:1110\n"));
	assert_non_null(strstr(out, "    mode                 0660\n"));
	assert_non_null(strstr(out, "  peer C via link pcilink: 10.0.0.3, fd00::3\n"));
	assert_non_null(strstr(out, "  rule 1: match 0.0.0.0/0 ports 22 -> tcp\n"));
	assert_non_null(strstr(out, "  rule 3: match fd00::/64 ports any -> ntb\n"));
	assert_non_null(strstr(out, "    contexts             256\n"));
	assert_non_null(strstr(out, "    setup_timeout_ms     2000 ms\n"));
	assert_non_null(strstr(out, "    peer_timeout_ms      30000 ms\n"));
	assert_non_null(strstr(out, "    queue_size           auto\n"));
	assert_non_null(strstr(out, "fallback: tcp\n"));
	assert_non_null(strstr(out, "log: level warn, file (stderr)\n"));
	free(out);
	conf_free(c);
	conf_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_example_demo_a),
		cmocka_unit_test(test_example_demo_b),
		cmocka_unit_test(test_example_full),
		cmocka_unit_test(test_example_mesh),
		cmocka_unit_test(test_speed_group),
		cmocka_unit_test(test_example_ivshmem),
		cmocka_unit_test(test_defaults_minimal),
		cmocka_unit_test(test_loopback_link),
		cmocka_unit_test(test_sizes_and_values),
		cmocka_unit_test(test_fault_cut_group),
		cmocka_unit_test(test_bad_configs),
		cmocka_unit_test(test_error_format),
		cmocka_unit_test(test_files_and_includes),
		cmocka_unit_test(test_robust_garbage),
		cmocka_unit_test(test_robust_deep_and_huge),
		cmocka_unit_test(test_routing),
		cmocka_unit_test(test_prefix_edges),
		cmocka_unit_test(test_env_overrides),
		cmocka_unit_test(test_fault_spec),
		cmocka_unit_test(test_find_path),
		cmocka_unit_test(test_print),
	};

	return cmocka_run_group_tests(tests, setup_tmpdir, teardown_tmpdir);
}
