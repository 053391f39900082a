// SPDX-License-Identifier: MIT
/* Unit tests of tools/parse.c: size lists, counts, `link`'s arguments and JSON strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tools/parse.c"

static void test_size_list_values(void **state)
{
	size_t s[8];

	(void)state;
	assert_int_equal(tool_parse_size_list("64", s, 8), 1);
	assert_int_equal(s[0], 64);
	assert_int_equal(tool_parse_size_list("64,4K,1M,2k,3KiB,1G", s, 8), 6);
	assert_int_equal(s[0], 64);
	assert_int_equal(s[1], 4096);
	assert_int_equal(s[2], 1 << 20);
	assert_int_equal(s[3], 2048);
	assert_int_equal(s[4], 3072);
	assert_int_equal(s[5], 1 << 30);
}

static void test_size_list_errors(void **state)
{
	size_t s[4];

	(void)state;
	s[0] = 7;
	assert_int_equal(tool_parse_size_list("", s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list(NULL, s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list("0", s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list("64,", s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list(",64", s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list("4X", s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list("4KB", s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list("-4", s, 4), -EINVAL);
	assert_int_equal(tool_parse_size_list("2G", s, 4), -ERANGE);
	assert_int_equal(tool_parse_size_list("99999999999999999999", s, 4), -ERANGE);
	assert_int_equal(tool_parse_size_list("1,2,3,4,5", s, 4), -E2BIG);
	/* nothing written on failure */
	assert_int_equal(s[0], 7);
}

static void test_count(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(tool_parse_count("5000", 1000000, &v), 0);
	assert_int_equal(v, 5000);
	assert_int_equal(tool_parse_count("1000000", 1000000, &v), 0);
	assert_int_equal(v, 1000000);
	assert_int_equal(tool_parse_count("1000001", 1000000, &v), -ERANGE);
	assert_int_equal(tool_parse_count("0", 10, &v), -EINVAL);
	assert_int_equal(tool_parse_count("", 10, &v), -EINVAL);
	assert_int_equal(tool_parse_count("5x", 10, &v), -EINVAL);
	assert_int_equal(tool_parse_count("-1", 10, &v), -EINVAL);
}

static void test_json_string(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	tool_json_string(f, "a\"b\\c\nd\x01");
	fclose(f);
	assert_string_equal(buf, "\"a\\\"b\\\\c\\u000ad\\u0001\"");
	free(buf);
}

/* Parse the NULL-terminated words W (copied: getopt permutes them) as `ntbsock link`'s. */
static int parse_link(const char *const *w, struct tool_link_args *ret, char *err, size_t len)
{
	static char words[8][64];
	static char *argv[9];
	int argc = 0;

	for (; w[argc]; argc++) {
		snprintf(words[argc], sizeof(words[argc]), "%s", w[argc]);
		argv[argc] = words[argc];
	}
	argv[argc] = NULL;
	return tool_parse_link_args(argc, argv, ret, err, len);
}

static void test_link_args(void **state)
{
	struct tool_link_args a;
	char err[128];

	(void)state;
	assert_int_equal(parse_link((const char *[]){ "link", "down", "ab", NULL }, &a, err,
				    sizeof(err)), 0);
	assert_true(a.down);
	assert_false(a.help);
	assert_string_equal(a.name, "ab");
	assert_null(a.conf);
	assert_int_equal(parse_link((const char *[]){ "link", "up", "ab", "-c", "a.conf", NULL },
				    &a, err, sizeof(err)), 0);
	assert_false(a.down);
	assert_string_equal(a.name, "ab");
	assert_string_equal(a.conf, "a.conf");
	/* options before the action, the long form, `--' */
	assert_int_equal(parse_link((const char *[]){ "link", "-c", "x.conf", "down", "cd", NULL },
				    &a, err, sizeof(err)), 0);
	assert_true(a.down);
	assert_string_equal(a.name, "cd");
	assert_string_equal(a.conf, "x.conf");
	assert_int_equal(parse_link((const char *[]){ "link", "down", "--conf=y.conf", "ab", NULL },
				    &a, err, sizeof(err)), 0);
	assert_string_equal(a.conf, "y.conf");
	assert_string_equal(a.name, "ab");
	assert_int_equal(parse_link((const char *[]){ "link", "up", "--", "-ab", NULL }, &a, err,
				    sizeof(err)), 0);
	assert_false(a.down);
	assert_string_equal(a.name, "-ab");
	/* help wins over what is missing */
	assert_int_equal(parse_link((const char *[]){ "link", "--help", NULL }, &a, err,
				    sizeof(err)), 0);
	assert_true(a.help);
	assert_int_equal(parse_link((const char *[]){ "link", "down", "-h", NULL }, &a, err,
				    sizeof(err)), 0);
	assert_true(a.help);
}

/* Each error is -EINVAL with a message naming what is wrong; RET untouched. */
static void expect_link_error(const char *const *w, const char *msg)
{
	struct tool_link_args a = { .name = "untouched" };
	char err[128] = "";

	assert_int_equal(parse_link(w, &a, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, msg);
	assert_string_equal(a.name, "untouched");
}

static void test_link_args_errors(void **state)
{
	(void)state;
	expect_link_error((const char *[]){ "link", NULL }, "missing action: down or up");
	expect_link_error((const char *[]){ "link", "-c", "a.conf", NULL },
			  "missing action: down or up");
	expect_link_error((const char *[]){ "link", "sideways", "ab", NULL },
			  "unknown action 'sideways' (down or up)");
	expect_link_error((const char *[]){ "link", "ab", "down", NULL },
			  "unknown action 'ab' (down or up)");
	expect_link_error((const char *[]){ "link", "down", NULL }, "missing link name");
	expect_link_error((const char *[]){ "link", "up", "", NULL }, "empty link name");
	expect_link_error((const char *[]){ "link", "down", "ab", "cd", NULL },
			  "unexpected argument 'cd'");
	expect_link_error((const char *[]){ "link", "down", "ab", "-x", NULL },
			  "unknown option or missing argument: '-x'");
	expect_link_error((const char *[]){ "link", "down", "ab", "-c", NULL },
			  "unknown option or missing argument: '-c'");
	expect_link_error((const char *[]){ "link", "down", "ab", "--frob", NULL },
			  "unknown option or missing argument: '--frob'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_list_values),
		cmocka_unit_test(test_size_list_errors),
		cmocka_unit_test(test_count),
		cmocka_unit_test(test_json_string),
		cmocka_unit_test(test_link_args),
		cmocka_unit_test(test_link_args_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
