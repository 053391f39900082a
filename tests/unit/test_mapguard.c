// SPDX-License-Identifier: MIT
/* Tests for util/mapguard: a truncated guarded mapping reads zeros instead of SIGBUS, an
 * unguarded one still dies with SIGBUS, a late second fault does not wipe the new pages,
 * removal stops guarding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/mapguard.h"

#define MAP_LEN (64 * 1024)

static void *map_tmp(int *ret_fd)
{
	char path[] = "/dev/shm/ntbsock-test-mapguard-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, MAP_LEN), 0);
	void *p = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0xA5, MAP_LEN);
	*ret_fd = fd;
	return p;
}

static void test_truncated_guarded_reads_zero(void **state)
{
	(void)state;
	int fd;
	volatile unsigned char *p = map_tmp(&fd);
	unsigned long before = mapguard_faults();

	assert_int_equal(mapguard_add((void *)p, MAP_LEN), 0);
	assert_false(mapguard_lost((void *)p));
	assert_int_equal(p[MAP_LEN - 1], 0xA5);
	assert_int_equal(ftruncate(fd, 0), 0);
	/* Would be SIGBUS without the guard. */
	assert_int_equal(p[MAP_LEN - 1], 0);
	assert_int_equal(p[0], 0);
	p[100] = 7; /* writes land in private zero pages */
	assert_int_equal(p[100], 7);
	assert_true(mapguard_lost((void *)p));
	assert_int_equal(mapguard_faults(), before + 1);
	/* A second thread whose access faulted on the old pages reaches the handler only after
	 * the replacement (and writes made since): it must not map zeros again. Its late SIGBUS
	 * is queued to ourselves with si_addr in the mapping. (Here, not in a test of its own:
	 * cmocka installs its own SIGBUS handler before each test; the guard's is installed
	 * once, in this first test.) */
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGBUS;
	si.si_code = BUS_ADRERR;
	si.si_addr = (void *)(p + 4096);
	assert_int_equal(syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid),
				 SIGBUS, &si), 0);
	assert_int_equal(p[100], 7);
	assert_int_equal(mapguard_faults(), before + 1);
	mapguard_remove((void *)p);
	assert_false(mapguard_lost((void *)p));
	munmap((void *)p, MAP_LEN);
	close(fd);
}

/* Run outside CMocka (which installs its own SIGBUS handler): a fault in a mapping that is
 * not registered must kill the process with SIGBUS, as without the library. */
static int child_unguarded(void)
{
	int fd, fd2;
	signal(SIGBUS, SIG_DFL);
	volatile unsigned char *guarded = map_tmp(&fd);
	if (mapguard_add((void *)guarded, MAP_LEN) != 0) /* installs the handler */
		return 2;
	volatile unsigned char *plain = map_tmp(&fd2);
	if (ftruncate(fd2, 0) != 0)
		return 2;
	unsigned char v = plain[MAP_LEN - 1]; /* not ours: must die with SIGBUS */
	return v == 0 ? 3 : 4;
}

static void test_unguarded_still_sigbus(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_mapguard", "--child-unguarded", (char *)NULL);
		_exit(9);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGBUS);
}

static int chained_hits;
static void app_handler(int sig)
{
	(void)sig;
	chained_hits++;
	_exit(42);
}

static void test_chains_to_program_handler(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd;
		volatile unsigned char *g = map_tmp(&fd);
		mapguard_add((void *)g, MAP_LEN);
		/* The program's handler was installed before ours in real life; here we check
		 * that a handler installed over ours still works (ours is simply replaced) and
		 * that ours forwards when it is the active one — see test above for SIG_DFL. */
		signal(SIGBUS, app_handler);
		int fd2;
		volatile unsigned char *plain = map_tmp(&fd2);
		if (ftruncate(fd2, 0) != 0)
			_exit(2);
		(void)plain[0];
		_exit(5);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 42);
}
static void test_remove_unknown_and_null(void **state)
{
	(void)state;
	int x;
	mapguard_remove(NULL);
	mapguard_remove(&x);
	assert_false(mapguard_lost(&x));
	assert_false(mapguard_lost(NULL));
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--child-unguarded") == 0)
		return child_unguarded();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_truncated_guarded_reads_zero),
		cmocka_unit_test(test_unguarded_still_sigbus),
		cmocka_unit_test(test_chains_to_program_handler),
		cmocka_unit_test(test_remove_unknown_and_null),
	};
	return cmocka_run_group_tests_name("mapguard", tests, NULL, NULL);
}
