// SPDX-License-Identifier: MIT
/* Unit tests of tools/stat_fmt.c: the links' admin state, the table and JSON output of
 * `ntbsock stat`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tools/parse.c"
#include "tools/stat_fmt.c"

static struct tool_stat_row rows[2] = {
	{ .pid = 4242, .fd = 7, .local = "127.0.0.1:40000", .remote = "127.0.0.2:5201",
	  .ntb = true, .state = "open", .link = "ab", .tx_bytes = 1048576, .rx_bytes = 37,
	  .tx_msgs = { 1, 2, 8 }, .rx_msgs = { 3, 0, 0 }, .retransmits = 5, .crc_errors = 2,
	  .tx_queue_fill = 4096, .rx_queue_fill = 0, .stripe = true },
	{ .pid = 4243, .fd = 9, .local = "127.0.0.1:40001", .remote = "127.0.0.2:22",
	  .ntb = false, .reason = "rule 2 says \"tcp\"", .tx_bytes = 10, .rx_bytes = 20 },
};

static struct tool_stat_link links[2] = {
	{ .name = "ab", .admin_down = false, .conns = 3, .setups = 10, .tx_bytes = 1048576,
	  .rx_bytes = 37, .transfers = 11, .congestion = 4, .failovers = 1, .expansions = 2, .rings = 256,
	  .rings_free = 250, .ring_grants = 40, .ring_refusals = 7, .ring_yields = 3,
	  .offers_held = 8, .offer_claims = 99 },
	{ .name = "c\"d", .admin_down = true },
};

static int g_links; /* how many of LINKS print_json() passes */
static uint64_t g_tcp; /* the TCP table's count print_json() passes */

static void print_json(FILE *out, const struct tool_stat_row *r, int n)
{
	tool_stat_print_json(out, r, n, links, g_links, g_tcp);
}

static char *capture(void (*fn)(FILE *, const struct tool_stat_row *, int), int n)
{
	/* static: open_memstream() keeps pointers to them until fclose() */
	static char *buf;
	static size_t len;
	FILE *f;

	buf = NULL;
	len = 0;
	f = open_memstream(&buf, &len);
	fn(f, rows, n);
	fclose(f);
	return buf;
}

static void test_table_empty(void **state)
{
	char *s = capture(tool_stat_print_table, 0);

	(void)state;
	assert_string_equal(s, "no connections\n");
	free(s);
}

static void test_table_rows(void **state)
{
	char *s = capture(tool_stat_print_table, 2);
	char *l1, *l2;

	(void)state;
	assert_true(strncmp(s, "PID ", 4) == 0);
	l1 = strchr(s, '\n') + 1;
	l2 = strchr(l1, '\n') + 1;
	/* one header and two rows */
	assert_non_null(strchr(l2, '\n'));
	assert_string_equal(strchr(l2, '\n'), "\n");
	assert_true(strncmp(l1, "4242 ", 5) == 0);
	assert_non_null(strstr(l1, " ntb  open "));
	assert_non_null(strstr(l1, " 1048576 "));
	assert_non_null(strstr(l1, " 1/2/8 "));
	assert_non_null(strstr(l1, " 3/0/0 "));
	assert_non_null(strstr(l1, " 4096/0 "));
	assert_true(l2 - l1 > 5 && strstr(l1, " ab (stripe)\n") != NULL); /* (a stripe row) */
	assert_true(strncmp(l2, "4243 ", 5) == 0);
	assert_non_null(strstr(l2, " tcp "));
	assert_non_null(strstr(l2, "rule 2 says \"tcp\"\n"));
	free(s);
}

static void test_links(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	tool_stat_print_links(f, links, 2, 12345);
	tool_stat_print_links(f, links, 0, 0);
	fclose(f);
	assert_string_equal(buf, "link ab: admin up\n"
				 "link ab: conns 3 setups 10 tx_bytes 1048576 rx_bytes 37 "
				 "transfers 11 congestion 4 failovers 1 expansions 2\n"
				 "link ab: rings 256 free 250 grants 40 refused 7 asked_back 3\n"
				 "link ab: offers held 8 claimed 99\n"
				 "link c\"d: admin down (connections use tcp)\n"
				 "link c\"d: conns 0 setups 0 "
				 "tx_bytes 0 rx_bytes 0 transfers 0 congestion 0 failovers 0 expansions 0\n"
				 "link c\"d: rings 0 free 0 grants 0 refused 0 asked_back 0\n"
				 "link c\"d: offers held 0 claimed 0\n"
				 "tcp: setups 12345\n"
				 "tcp: setups 0\n");
	free(buf);
}

static void test_json(void **state)
{
	char *s;

	g_links = 0;
	s = capture(print_json, 2);

	(void)state;
	assert_string_equal(s,
		"{\"connections\":[\n"
		"  {\"pid\":4242,\"fd\":7,\"local\":\"127.0.0.1:40000\",\"remote\":\"127.0.0.2:5201\","
		"\"mode\":\"ntb\",\"state\":\"open\",\"reason\":\"\",\"link\":\"ab\",\"stripe\":true,"
		"\"tx\":{\"bytes\":1048576,\"msgs\":{\"inline\":1,\"short\":2,\"long\":8},"
		"\"queue_fill\":4096},"
		"\"rx\":{\"bytes\":37,\"msgs\":{\"inline\":3,\"short\":0,\"long\":0},"
		"\"queue_fill\":0},\"retransmits\":5,\"crc_errors\":2},\n"
		"  {\"pid\":4243,\"fd\":9,\"local\":\"127.0.0.1:40001\",\"remote\":\"127.0.0.2:22\","
		"\"mode\":\"tcp\",\"state\":\"\",\"reason\":\"rule 2 says \\\"tcp\\\"\",\"link\":\"\",\"stripe\":false,"
		"\"tx\":{\"bytes\":10,\"msgs\":{\"inline\":0,\"short\":0,\"long\":0},"
		"\"queue_fill\":0},"
		"\"rx\":{\"bytes\":20,\"msgs\":{\"inline\":0,\"short\":0,\"long\":0},"
		"\"queue_fill\":0},\"retransmits\":0,\"crc_errors\":0}\n"
		"],\"links\":[],\"tcp\":{\"setups\":0}}\n");
	free(s);
	s = capture(print_json, 0);
	assert_string_equal(s, "{\"connections\":[],\"links\":[],\"tcp\":{\"setups\":0}}\n");
	free(s);
	/* each link with its admin state, names escaped */
	g_links = 2;
	g_tcp = 77;
	s = capture(print_json, 0);
	assert_string_equal(s, "{\"connections\":[],\"links\":[{\"name\":\"ab\",\"admin\":\"up\","
			       "\"conns\":3,\"setups\":10,\"tx_bytes\":1048576,\"rx_bytes\":37,"
			       "\"transfers\":11,\"congestion\":4,\"failovers\":1,\"expansions\":2,"
			       "\"rings\":{\"total\":256,\"free\":250,\"grants\":40,\"refused\":7,"
			       "\"asked_back\":3},\"offers\":{\"held\":8,\"claimed\":99}},"
			       "{\"name\":\"c\\\"d\",\"admin\":\"down\",\"conns\":0,\"setups\":0,"
			       "\"tx_bytes\":0,\"rx_bytes\":0,\"transfers\":0,\"congestion\":0,"
			       "\"failovers\":0,\"expansions\":0,\"rings\":{\"total\":0,\"free\":0,\"grants\":0,"
			       "\"refused\":0,\"asked_back\":0},\"offers\":{\"held\":0,\"claimed\":0}}],"
			       "\"tcp\":{\"setups\":77}}\n");
	free(s);
}

/* --summary: counts per mode, per link (the config's first, even at 0) and per reason. */
static void test_summary(void **state)
{
	static struct tool_stat_row r[5] = {
		{ .ntb = true, .link = "ab" },
		{ .ntb = false, .reason = "no listener" },
		{ .ntb = true, .link = "ab" },
		{ .ntb = false, .reason = "rule 2 says \"tcp\"" },
		{ .ntb = false, .reason = "no listener" },
	};
	const char *links[2] = { "cd", "ab" };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_int_equal(tool_stat_print_summary(f, r, 5, links, 2), 0);
	fclose(f);
	assert_string_equal(buf,
		"KIND       COUNT  NAME\n"
		"total          5\n"
		"mode           2  ntb\n"
		"mode           3  tcp\n"
		"link           0  cd\n"
		"link           2  ab\n"
		"reason         2  no listener\n"
		"reason         1  rule 2 says \"tcp\"\n");
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	assert_int_equal(tool_stat_print_summary_json(f, r, 5, links, 2), 0);
	fclose(f);
	assert_string_equal(buf,
		"{\"summary\":{\"total\":5,\"mode\":{\"ntb\":2,\"tcp\":3},"
		"\"link\":{\"cd\":0,\"ab\":2},"
		"\"reason\":{\"no listener\":2,\"rule 2 says \\\"tcp\\\"\":1}}}\n");
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	assert_int_equal(tool_stat_print_summary_json(f, r, 0, NULL, 0), 0);
	fclose(f);
	assert_string_equal(buf, "{\"summary\":{\"total\":0,\"mode\":{\"ntb\":0,\"tcp\":0},"
			    "\"link\":{},\"reason\":{}}}\n");
	free(buf);
}

static void test_key_endpoints(void **state)
{
	uint8_t key[40] = { 0 };
	char local[64], remote[64];

	(void)state;
	/* client 127.0.0.1:40000, server 127.0.0.2:5201 (port at 38..39) */
	memcpy(key, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\0\0\x01\x9c\x40", 18);
	memcpy(key + 18, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\0\0\x02", 16);
	key[38] = 0x14;
	key[39] = 0x51;
	tool_key_endpoints(key, false, local, remote, sizeof(local));
	assert_string_equal(local, "127.0.0.1:40000");
	assert_string_equal(remote, "127.0.0.2:5201");
	tool_key_endpoints(key, true, local, remote, sizeof(local));
	assert_string_equal(local, "127.0.0.2:5201");
	assert_string_equal(remote, "127.0.0.1:40000");
	/* IPv6 ::1 port 80 as the server, port right after the address (older layout) */
	memset(key + 18, 0, 22);
	key[18 + 15] = 1;
	key[18 + 17] = 80;
	tool_key_endpoints(key, false, local, remote, sizeof(local));
	assert_string_equal(remote, "[::1]:80");
	assert_string_equal(local, "127.0.0.1:40000");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_empty),
		cmocka_unit_test(test_table_rows),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_summary),
		cmocka_unit_test(test_key_endpoints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
