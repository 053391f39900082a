// SPDX-License-Identifier: MIT
/* Unit tests of tools/run_env.c: LD_PRELOAD composition and library candidate paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tools/run_env.c"

#define LIB "/opt/ntb/libntbsock.so"

static void join(const char *existing, const char *expect)
{
	char buf[512];

	assert_int_equal(tool_preload_join(LIB, existing, buf, sizeof(buf)), 0);
	assert_string_equal(buf, expect);
}

static void test_join_empty(void **state)
{
	(void)state;
	join(NULL, LIB);
	join("", LIB);
	join(" : ", LIB);
}

static void test_join_prepends_colon_and_space_lists(void **state)
{
	(void)state;
	join("/a.so", LIB ":/a.so");
	join("/a.so:/b.so", LIB ":/a.so:/b.so");
	join("/a.so /b.so", LIB ":/a.so:/b.so");
	join(" /a.so::/b.so ", LIB ":/a.so:/b.so");
}

static void test_join_drops_copies_of_lib(void **state)
{
	(void)state;
	join(LIB, LIB);
	join("/a.so:" LIB " /b.so", LIB ":/a.so:/b.so");
	/* a different path that merely starts with ours is kept */
	join(LIB "x", LIB ":" LIB "x");
}

static void test_join_too_long(void **state)
{
	char buf[30];

	(void)state;
	assert_int_equal(tool_preload_join(LIB, "/a.so", buf, 10), -ENAMETOOLONG);
	assert_int_equal(tool_preload_join(LIB, "/aaaaaaaaaaaaa.so", buf, sizeof(buf)),
			 -ENAMETOOLONG);
	assert_int_equal(tool_preload_join(LIB, NULL, buf, sizeof(buf)), 0);
}

static void test_candidates_build_tree(void **state)
{
	char paths[4][4096];

	(void)state;
	assert_int_equal(tool_lib_candidates("/src/ntbsock/build/ntbsock", "/usr/local/lib",
					     "/usr/local/bin", paths, 4), 3);
	assert_string_equal(paths[0], "/src/ntbsock/build/libntbsock.so");
	assert_string_equal(paths[1], "/usr/local/lib/ntbsock/libntbsock.so");
	assert_string_equal(paths[2], "/src/ntbsock/build/../lib/ntbsock/libntbsock.so");
}

static void test_candidates_installed_and_staged(void **state)
{
	char paths[4][4096];

	(void)state;
	assert_int_equal(tool_lib_candidates("/usr/bin/ntbsock", "/usr/lib/x86_64-linux-gnu/",
					     "/usr/bin/", paths, 4), 3);
	assert_string_equal(paths[1], "/usr/lib/x86_64-linux-gnu/ntbsock/libntbsock.so");
	/* make install DESTDIR=/tmp/stage */
	assert_int_equal(tool_lib_candidates("/tmp/stage/usr/local/bin/ntbsock", "/usr/local/lib",
					     "/usr/local/bin", paths, 4), 3);
	assert_string_equal(paths[1], "/tmp/stage/usr/local/lib/ntbsock/libntbsock.so");
	/* no LIBDIR compiled in: only the directory of the executable and ../lib */
	assert_int_equal(tool_lib_candidates("/x/bin/ntbsock", NULL, NULL, paths, 4), 2);
	assert_string_equal(paths[1], "/x/bin/../lib/ntbsock/libntbsock.so");
	/* MAX is honoured */
	assert_int_equal(tool_lib_candidates("/x/bin/ntbsock", "/l", "/b", paths, 1), 1);
	assert_string_equal(paths[0], "/x/bin/libntbsock.so");
}

static void test_find_library_env_override(void **state)
{
	char buf[4096], err[512];

	(void)state;
	setenv("NTBSOCK_LIB", "/dev/null", 1);
	assert_int_equal(tool_find_library(buf, sizeof(buf), err, sizeof(err)), 0);
	assert_string_equal(buf, "/dev/null");
	setenv("NTBSOCK_LIB", "/nonexistent/libntbsock.so", 1);
	assert_int_equal(tool_find_library(buf, sizeof(buf), err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "NTBSOCK_LIB=/nonexistent/libntbsock.so"));
	unsetenv("NTBSOCK_LIB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_empty),
		cmocka_unit_test(test_join_prepends_colon_and_space_lists),
		cmocka_unit_test(test_join_drops_copies_of_lib),
		cmocka_unit_test(test_join_too_long),
		cmocka_unit_test(test_candidates_build_tree),
		cmocka_unit_test(test_candidates_installed_and_staged),
		cmocka_unit_test(test_find_library_env_override),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
