// SPDX-License-Identifier: MIT
/* Tests for transport/tp_tcpstat.c, the host-wide table of connections that stayed TCP: it
 * grows past its first 1024 rows, processes adding rows at once each keep all of theirs, and
 * the slots of a process that died are taken over instead of growing the table. Each scenario
 * runs in a child process of its own (the table's mapping is per process) and exits 0 when all
 * its checks held. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "transport/transport.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			_exit(1); } } while (0)

static char path[64];
static struct tp_tcpstat_entry ents[8192];

/* An fd of this process to register, and its inode (the table drops rows whose fd is gone). */
static int probe_fd(uint64_t *ret_ino)
{
	int p[2];
	struct stat st;

	CHECK(pipe(p) == 0);
	CHECK(fstat(p[0], &st) == 0);
	*ret_ino = (uint64_t)st.st_ino;
	return p[0];
}

static int add_rows(int n, int *ids)
{
	uint64_t ino;
	int fd = probe_fd(&ino);

	for (int i = 0; i < n; i++) {
		int id = tp_tcpstat_add(path, (int)getpid(), fd, ino, NULL, NULL, "test");

		if (id < 0)
			return id;
		if (ids)
			ids[i] = id;
	}
	return 0;
}

static int count_pid(int n, pid_t pid)
{
	int c = 0;

	for (int i = 0; i < n; i++)
		c += ents[i].pid == pid;
	return c;
}

static void run_scenario(void (*fn)(void))
{
	int st;
	pid_t pid;

	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-tcpstat-%d", (int)getpid());
	unlink(path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	unlink(path);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* 3000 rows: all listed; 1000 deleted are gone and their slots are reused. */
static void grows(void)
{
	static int ids[3000];
	static char seen[3000];

	CHECK(add_rows(3000, ids) == 0);
	for (int i = 0; i < 3000; i++) {
		CHECK(ids[i] >= 0 && ids[i] < 3000);
		CHECK(!seen[ids[i]]);
		seen[ids[i]] = 1;
	}
	uint64_t added = 0;

	CHECK(tp_tcpstat_list(path, ents, 8192, &added) == 3000);
	CHECK(added == 3000);
	CHECK(tp_tcpstat_list(path, ents, 10, NULL) == 3000); /* the total, beyond MAX */
	for (int i = 0; i < 1000; i++)
		tp_tcpstat_del(ids[i], (int)getpid());
	CHECK(tp_tcpstat_list(path, ents, 8192, NULL) == 2000);
	CHECK(add_rows(1000, ids) == 0);
	for (int i = 0; i < 1000; i++)
		CHECK(ids[i] < 3000);
	/* the count since the file was created: deleted rows stay counted, reused slots count
	 * again */
	CHECK(tp_tcpstat_list(path, ents, 8192, &added) == 3000);
	CHECK(added == 4000);
}

static void test_grows_past_first_rows(void **state)
{
	(void)state;
	run_scenario(grows);
}

/* Four processes add 1500 rows each at the same time, then wait for a byte: every row of each
 * is listed. */
static void concurrent(void)
{
	pid_t kids[4];
	int go[2], held[2], done[2];
	char b = 0;

	CHECK(pipe(go) == 0 && pipe(held) == 0 && pipe(done) == 0);
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		CHECK(kids[k] >= 0);
		if (kids[k] == 0) {
			close(go[1]);
			close(done[1]);
			CHECK(read(go[0], &b, 1) == 1);
			CHECK(add_rows(1500, NULL) == 0);
			CHECK(write(held[1], &b, 1) == 1);
			close(held[1]); /* a sibling that fails must not leave the reader waiting */
			CHECK(read(done[0], &b, 1) == 1);
			_exit(0);
		}
	}
	close(held[1]);
	CHECK(write(go[1], "gggg", 4) == 4);
	for (int k = 0; k < 4; k++)
		CHECK(read(held[0], &b, 1) == 1);
	int n = tp_tcpstat_list(path, ents, 8192, NULL);
	CHECK(n == 6000);
	for (int k = 0; k < 4; k++)
		CHECK(count_pid(n, kids[k]) == 1500);
	CHECK(write(done[1], "dddd", 4) == 4);
	for (int k = 0; k < 4; k++) {
		int st;

		CHECK(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	uint64_t added = 0;

	CHECK(tp_tcpstat_list(path, ents, 8192, &added) == 0); /* all dead */
	CHECK(added == 6000); /* every process's adds, none lost to the others' */
}

static void test_processes_add_at_once(void **state)
{
	(void)state;
	run_scenario(concurrent);
}

/* A process that exits without removing its 1500 rows: they are not listed, and another
 * process's rows take over its slots rather than growing the table. */
static void dead(void)
{
	static int ids[1500];
	pid_t kid = fork();
	int st;

	CHECK(kid >= 0);
	if (kid == 0) {
		CHECK(add_rows(1500, NULL) == 0);
		_exit(0);
	}
	CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(tp_tcpstat_list(path, ents, 8192, NULL) == 0);
	CHECK(add_rows(1500, ids) == 0);
	for (int i = 0; i < 1500; i++)
		CHECK(ids[i] < 1500);
	CHECK(tp_tcpstat_list(path, ents, 8192, NULL) == 1500);
	CHECK(count_pid(1500, getpid()) == 1500);
}

static void test_dead_process_slots_reused(void **state)
{
	(void)state;
	run_scenario(dead);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grows_past_first_rows),
		cmocka_unit_test(test_processes_add_at_once),
		cmocka_unit_test(test_dead_process_slots_reused),
	};
	return cmocka_run_group_tests_name("tp_tcpstat", tests, NULL, NULL);
}
