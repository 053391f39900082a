/* SPDX-License-Identifier: MIT */
/* Replays every seed and regression input of the libFuzzer targets (tests/fuzz/<target>/) through
 * the same target code under gcc (and under ASan/UBSan in `make check-asan`): a crash once found
 * by `make fuzz` stays fixed. The targets abort() on a broken contract, so a regression fails
 * the run. Corpus files are looked up under $NTBSOCK_SRCDIR (default: the working directory). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define LLVMFuzzerInitialize fuzz_conf_init
#define LLVMFuzzerTestOneInput fuzz_conf_one
#include "tests/fuzz/fuzz_conf.c"
#undef LLVMFuzzerInitialize
#undef LLVMFuzzerTestOneInput

#define LLVMFuzzerTestOneInput fuzz_region_one
#include "tests/fuzz/fuzz_region.c"
#undef LLVMFuzzerTestOneInput

#define LLVMFuzzerInitialize fuzz_tp_rx_init
#define LLVMFuzzerTestOneInput fuzz_tp_rx_one
#include "tests/fuzz/fuzz_tp_rx.c"
#undef LLVMFuzzerInitialize
#undef LLVMFuzzerTestOneInput

#define LLVMFuzzerInitialize fuzz_mbox_init
#define LLVMFuzzerTestOneInput fuzz_mbox_one
#include "tests/fuzz/fuzz_mbox.c"
#undef LLVMFuzzerInitialize
#undef LLVMFuzzerTestOneInput

#define LLVMFuzzerTestOneInput fuzz_host_one
#include "tests/fuzz/fuzz_host.c"
#undef LLVMFuzzerTestOneInput

#define LLVMFuzzerInitialize fuzz_tcpstat_init
#define LLVMFuzzerTestOneInput fuzz_tcpstat_one
#include "tests/fuzz/fuzz_tcpstat.c"
#undef LLVMFuzzerInitialize
#undef LLVMFuzzerTestOneInput

#define LLVMFuzzerTestOneInput fuzz_fo_hdr_one
#include "tests/fuzz/fuzz_fo_hdr.c"
#undef LLVMFuzzerTestOneInput

/* Run ONE on every file of tests/fuzz/TARGET; returns how many. */
static int replay(const char *target, int (*one)(const uint8_t *, size_t))
{
	const char *src = getenv("NTBSOCK_SRCDIR");
	char dir[512], path[1024];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/tests/fuzz/%s", src && *src ? src : ".", target);
	d = opendir(dir);
	if (!d)
		fail_msg("corpus %s: %s (run from the source tree or set NTBSOCK_SRCDIR)", dir,
			 strerror(errno));
	while ((de = readdir(d))) {
		FILE *f;
		uint8_t *buf;
		long len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		f = fopen(path, "rb");
		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		rewind(f);
		buf = malloc(len > 0 ? (size_t)len : 1);
		assert_non_null(buf);
		assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
		fclose(f);
		print_message("replay %s\n", path);
		one(buf, (size_t)len);
		free(buf);
		n++;
	}
	closedir(d);
	return n;
}

static void test_replay_conf(void **state)
{
	(void)state;
	fuzz_conf_init(NULL, NULL);
	assert_true(replay("conf", fuzz_conf_one) >= 5);
}

static void test_replay_region(void **state)
{
	(void)state;
	assert_true(replay("region", fuzz_region_one) >= 3);
}

static void test_replay_tp_rx(void **state)
{
	(void)state;
	fuzz_tp_rx_init(NULL, NULL);
	assert_true(replay("tp_rx", fuzz_tp_rx_one) >= 5);
}

static void test_replay_mbox(void **state)
{
	(void)state;
	fuzz_mbox_init(NULL, NULL);
	assert_true(replay("mbox", fuzz_mbox_one) >= 5);
}

static void test_replay_host(void **state)
{
	(void)state;
	assert_true(replay("host", fuzz_host_one) >= 5);
}

static void test_replay_tcpstat(void **state)
{
	(void)state;
	fuzz_tcpstat_init(NULL, NULL);
	assert_true(replay("tcpstat", fuzz_tcpstat_one) >= 5);
}

static void test_replay_fo_hdr(void **state)
{
	(void)state;
	assert_true(replay("fo_hdr", fuzz_fo_hdr_one) >= 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replay_conf),
		cmocka_unit_test(test_replay_region),
		cmocka_unit_test(test_replay_tp_rx),
		cmocka_unit_test(test_replay_mbox),
		cmocka_unit_test(test_replay_host),
		cmocka_unit_test(test_replay_tcpstat),
		cmocka_unit_test(test_replay_fo_hdr),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
