// SPDX-License-Identifier: MIT
/* Unit tests of tools/parse.c: size lists, counts and JSON strings. */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_list_values),
		cmocka_unit_test(test_size_list_errors),
		cmocka_unit_test(test_count),
		cmocka_unit_test(test_json_string),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
