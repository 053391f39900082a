// SPDX-License-Identifier: MIT
/* `ntbsock perf` reference measurements: single-core memcpy bandwidth and the cache-line
 * round trip between two processes pinned to different cores — the physical limits the
 * transport is compared with. Also CPU selection and pinning. */
#include "tools/tools_int.h"
#include "util/compiler.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t tool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int tool_pick_cpus(int *ret_a, int *ret_b)
{
	cpu_set_t set;
	int found = 0, cpus[2] = { -1, -1 };

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -errno;
	for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[found++] = c;
	if (found < 2)
		return -ENODEV;
	*ret_a = cpus[0];
	*ret_b = cpus[1];
	return 0;
}

int tool_pin_cpu(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0 ? 0 : -errno;
}

int tool_ref_memcpy(size_t buf_size, uint64_t min_ns, double *ret_mbps)
{
	char *src = malloc(buf_size), *dst = malloc(buf_size);
	uint64_t start, elapsed, bytes = 0;

	if (!src || !dst) {
		free(src);
		free(dst);
		return -ENOMEM;
	}
	memset(src, 0x5a, buf_size);
	memset(dst, 0xa5, buf_size);
	memcpy(dst, src, buf_size); /* warm the caches and the page tables */
	start = tool_now_ns();
	do {
		for (int i = 0; i < 8; i++) {
			memcpy(dst, src, buf_size);
			/* keep the copy from being elided: the source changes a little each time */
			src[(bytes / buf_size) % buf_size]++;
			bytes += buf_size;
		}
		elapsed = tool_now_ns() - start;
	} while (elapsed < min_ns);
	/* read the destination so the compiler must perform the copies */
	if (dst[0] != src[0])
		bytes++;
	*ret_mbps = (double)bytes / ((double)elapsed / 1e9) / 1e6;
	free(src);
	free(dst);
	return 0;
}

/* The shared cache line: SEQ is written by both sides in turn (odd by the initiator, even by
 * the responder); only one side writes at a time, so a plain atomic store suffices. */
struct pingpong_line {
	uint64_t seq;
	char pad[64 - sizeof(uint64_t)];
} __attribute__((aligned(64)));

/* Wait until LINE->seq == WANT; spin, yielding when we share one core with the other side. */
/* Wait for the other side's WANT; false when that side is gone (PEER > 0: our child, reaped
 * here; PEER < 0: -(our parent's pid), re-parented away). Checked every 2^16 rounds. */
static bool wait_seq(struct pingpong_line *line, uint64_t want, bool yield, pid_t peer)
{
	/* acquire: pairs with the release stores of the other side in tool_ref_cacheline() */
	for (uint32_t n = 1; __atomic_load_n(&line->seq, __ATOMIC_ACQUIRE) != want; n++) {
		if (yield)
			sched_yield();
		else
			cpu_relax();
		if ((n & 0xffffu) == 0 &&
		    (peer > 0 ? waitpid(peer, NULL, WNOHANG) == peer : getppid() != -peer))
			return false;
	}
	return true;
}

#define REF_BATCH 64u /* round trips per timed batch */

int tool_ref_cacheline(int cpu_a, int cpu_b, unsigned rounds, double *ret_oneway_us)
{
	struct pingpong_line *line;
	bool yield = cpu_a < 0 || cpu_a == cpu_b;
	uint64_t start, elapsed;
	pid_t child;
	int status, rc = 0;

	line = mmap(NULL, sizeof(*line), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (line == MAP_FAILED)
		return -errno;
	line->seq = 0;
	pid_t parent = getpid();
	child = fork();
	if (child < 0) {
		rc = -errno;
		munmap(line, sizeof(*line));
		return rc;
	}
	if (child == 0) {
		tool_pin_cpu(cpu_b);
		for (uint64_t i = 0; i < rounds; i++) {
			if (!wait_seq(line, 2 * i + 1, yield, -parent))
				_exit(1); /* the initiator died: do not spin on */
			/* release: pairs with the acquire load in the initiator's wait_seq() */
			__atomic_store_n(&line->seq, 2 * i + 2, __ATOMIC_RELEASE);
		}
		_exit(0);
	}
	cpu_set_t saved;
	bool restore = sched_getaffinity(0, sizeof(saved), &saved) == 0;
	/* Timed in batches of REF_BATCH round trips (the clock is read once per batch, not per
	 * round, so it barely adds to an ~80 ns round trip); the result is the median batch, as
	 * the transport's figure is a median: a preempted batch on a busy machine does not count
	 * more than a preempted ping-pong does. */
	size_t nb = 0, max_b = rounds / REF_BATCH + 1;
	uint64_t *batch = malloc(max_b * sizeof(*batch)), mark;

	tool_pin_cpu(cpu_a);
	start = mark = tool_now_ns();
	for (uint64_t i = 0; i < rounds; i++) {
		/* release: pairs with the acquire load in the responder's wait_seq() */
		__atomic_store_n(&line->seq, 2 * i + 1, __ATOMIC_RELEASE);
		if (!wait_seq(line, 2 * i + 2, yield, child)) {
			child = -1; /* died and reaped: no answer will come */
			break;
		}
		if (batch && (i + 1) % REF_BATCH == 0) {
			uint64_t now = tool_now_ns();

			batch[nb++] = now - mark;
			mark = now;
		}
	}
	elapsed = tool_now_ns() - start;
	if (restore)
		sched_setaffinity(0, sizeof(saved), &saved);
	if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		rc = -ECHILD;
	munmap(line, sizeof(*line));
	if (rc == 0 && nb >= 5)
		*ret_oneway_us = (double)tool_percentile(batch, nb, 50) / REF_BATCH / 2.0 / 1000.0;
	else if (rc == 0) /* too few rounds for batches (or no memory): the mean */
		*ret_oneway_us = (double)elapsed / rounds / 2.0 / 1000.0;
	free(batch);
	return rc;
}
