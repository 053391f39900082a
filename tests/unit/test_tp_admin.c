/* SPDX-License-Identifier: MIT */
/* Unit tests of transport/tp_admin.c: the admin-down flag's path for shm and pci links, and
 * setting, clearing and reading it (idempotent both ways, mode 0644, no symlink followed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/transport.h"

static char g_dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof(g_dir), "/tmp/ntbsock-test-admin-XXXXXX");
	return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void shm_params(struct ntb_link_params *lp, const char *name, const char *path)
{
	ntb_link_params_init(lp);
	snprintf(lp->name, sizeof(lp->name), "%s", name);
	snprintf(lp->path, sizeof(lp->path), "%s", path);
}

static void test_path(void **state)
{
	struct ntb_link_params lp;
	char buf[NTB_PATH_MAX + 32];

	(void)state;
	shm_params(&lp, "ab", "/dev/shm/ntbsock-demo");
	assert_int_equal(tp_link_admin_path(&lp, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/dev/shm/ntbsock-demo.admin-down");
	/* no path: the shm default */
	shm_params(&lp, "ab", "");
	assert_int_equal(tp_link_admin_path(&lp, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/dev/shm/ntbsock-ab.admin-down");
	/* pci: the shm default, whatever PATH holds */
	shm_params(&lp, "cd", "/somewhere/else");
	snprintf(lp.backend, sizeof(lp.backend), "pci");
	assert_int_equal(tp_link_admin_path(&lp, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/dev/shm/ntbsock-cd.admin-down");
}

static void test_path_too_long(void **state)
{
	struct ntb_link_params lp;
	char buf[33], big[NTB_PATH_MAX + 32];

	(void)state;
	shm_params(&lp, "ab", "/dev/shm/ntbsock-demo");
	/* 32 bytes hold 31 characters: one short of the 32-character name; 33 hold it */
	assert_int_equal(tp_link_admin_path(&lp, buf, 32), -ENAMETOOLONG);
	assert_int_equal(tp_link_admin_path(&lp, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/dev/shm/ntbsock-demo.admin-down");
	/* the longest link path fits the callers' NTB_PATH_MAX + 32 buffers */
	memset(lp.path, 'x', NTB_PATH_MAX);
	lp.path[0] = '/';
	lp.path[NTB_PATH_MAX] = '\0';
	assert_int_equal(tp_link_admin_path(&lp, big, sizeof(big)), 0);
	assert_int_equal(strlen(big), NTB_PATH_MAX + strlen(TP_ADMIN_SUFFIX));
	/* a name too long for its file cannot be down */
	assert_int_equal(tp_link_admin_get(&lp), 0);
}

static void test_set_get(void **state)
{
	struct ntb_link_params lp;
	char link[128], flag[160];
	struct stat st;
	mode_t old;

	(void)state;
	snprintf(link, sizeof(link), "%s/link", g_dir);
	snprintf(flag, sizeof(flag), "%s.admin-down", link);
	shm_params(&lp, "ab", link);
	assert_int_equal(tp_link_admin_get(&lp), 0);
	/* up when already up */
	assert_int_equal(tp_link_admin_set(&lp, false), 0);
	assert_int_equal(tp_link_admin_get(&lp), 0);

	old = umask(022);
	assert_int_equal(tp_link_admin_set(&lp, true), 0);
	umask(old);
	assert_int_equal(stat(flag, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(tp_link_admin_get(&lp), 1);
	/* down when already down */
	assert_int_equal(tp_link_admin_set(&lp, true), 0);
	assert_int_equal(tp_link_admin_get(&lp), 1);
	/* the link file itself is never created */
	assert_int_equal(access(link, F_OK), -1);

	assert_int_equal(tp_link_admin_set(&lp, false), 0);
	assert_int_equal(access(flag, F_OK), -1);
	assert_int_equal(tp_link_admin_get(&lp), 0);
	assert_int_equal(tp_link_admin_set(&lp, false), 0);
}

static void test_set_symlink(void **state)
{
	struct ntb_link_params lp;
	char link[128], flag[160], target[160];

	(void)state;
	snprintf(link, sizeof(link), "%s/sym", g_dir);
	snprintf(flag, sizeof(flag), "%s.admin-down", link);
	snprintf(target, sizeof(target), "%s/target", g_dir);
	assert_int_equal(symlink(target, flag), 0);
	shm_params(&lp, "ab", link);
	assert_int_equal(tp_link_admin_set(&lp, true), -ELOOP);
	assert_int_equal(access(target, F_OK), -1);
	/* the entry is there: down (not followed to its missing target) */
	assert_int_equal(tp_link_admin_get(&lp), 1);
	/* up removes the symlink, never its target */
	assert_int_equal(tp_link_admin_set(&lp, false), 0);
	assert_int_equal(tp_link_admin_get(&lp), 0);
}

static void test_set_errors(void **state)
{
	struct ntb_link_params lp;
	char link[128];

	(void)state;
	/* a directory that does not exist: the flag cannot be created */
	snprintf(link, sizeof(link), "%s/none/link", g_dir);
	shm_params(&lp, "ab", link);
	assert_int_equal(tp_link_admin_set(&lp, true), -ENOENT);
	assert_int_equal(tp_link_admin_get(&lp), 0);
	/* up of a flag that cannot exist is fine */
	assert_int_equal(tp_link_admin_set(&lp, false), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_path_too_long),
		cmocka_unit_test_setup_teardown(test_set_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
