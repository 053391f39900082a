// SPDX-License-Identifier: MIT
/* `ntbsock perf` reference measurements: single-core memcpy bandwidth and the cache-line
 * round trip between two processes pinned to different cores — the physical limits the
 * transport is compared with. Also CPU selection and pinning, and the time-stamp counter the
 * ping-pong is timed with. */
#include "util/clock.h"
#include "tools/tools_int.h"
#include "util/compiler.h"

#include <errno.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
	start = clock_mono_ns();
	do {
		for (int i = 0; i < 8; i++) {
			memcpy(dst, src, buf_size);
			/* keep the copy from being elided: the source changes a little each time */
			src[(bytes / buf_size) % buf_size]++;
			bytes += buf_size;
		}
		elapsed = clock_mono_ns() - start;
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
 * the responder); only one side writes at a time, so a plain atomic store suffices. READY is
 * set once by the responder when it runs on its own CPU. */
struct pingpong_line {
	_Atomic uint64_t seq;
	_Atomic uint32_t ready;
	char pad[64 - sizeof(uint64_t) - sizeof(uint32_t)];
} __attribute__((aligned(64)));

/* Wait for the other side's WANT; false when that side is gone (PEER > 0: our child, reaped
 * here; PEER < 0: -(our parent's pid), re-parented away). Spins, or yields when we share one
 * core with the other side. The peer is checked every 2^16 rounds. */
static bool wait_seq(struct pingpong_line *line, uint64_t want, bool yield, pid_t peer)
{
	/* acquire: pairs with the release stores of the other side: cacheline_run() and
	 * cacheline_child(), tool_ref_peer_burst() and peer_main() */
	for (uint32_t n = 1; atomic_load_explicit(&line->seq, memory_order_acquire) != want; n++) {
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

/* The responder: pinned to CPU, answers ROUNDS round trips, then exits. */
static void __attribute__((noreturn)) cacheline_child(struct pingpong_line *line, int cpu,
						      uint64_t rounds, bool yield, pid_t parent)
{
	tool_pin_cpu(cpu);
	/* release: pairs with the acquire load of the initiator's wait for READY */
	atomic_store_explicit(&line->ready, 1, memory_order_release);
	for (uint64_t i = 0; i < rounds; i++) {
		if (!wait_seq(line, 2 * i + 1, yield, -parent))
			_exit(1); /* the initiator died: do not spin on */
		/* release: pairs with the acquire load in the initiator's wait_seq() */
		atomic_store_explicit(&line->seq, 2 * i + 2, memory_order_release);
	}
	_exit(0);
}

/*
 * The cache-line ping-pong: fork a responder pinned to CPU_B, pin this process to CPU_A
 * (restored after), wait until the responder runs, then ROUNDS round trips, timed in batches
 * of TOOL_REF_BATCH (the clock is read once per batch, not per round, so it barely adds to an
 * ~80 ns round trip): up to MAX_B batch durations in ns go to BATCH, their number to *RET_NB,
 * the whole to *RET_ELAPSED. 0 or a negative errno.
 */
static int cacheline_run(int cpu_a, int cpu_b, uint64_t rounds, uint64_t *batch, size_t max_b,
			 size_t *ret_nb, uint64_t *ret_elapsed)
{
	struct pingpong_line *line;
	bool yield = cpu_a < 0 || cpu_a == cpu_b;
	uint64_t total = rounds, start, mark;
	size_t nb = 0;
	pid_t parent = getpid(), child;
	int status, rc = 0;

	line = mmap(NULL, sizeof(*line), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (line == MAP_FAILED)
		return -errno;
	atomic_init(&line->seq, 0); /* (not shared yet: before the fork) */
	atomic_init(&line->ready, 0);
	child = fork();
	if (child < 0) {
		rc = -errno;
		munmap(line, sizeof(*line));
		return rc;
	}
	if (child == 0)
		cacheline_child(line, cpu_b, total, yield, parent);

	cpu_set_t saved;
	bool restore = sched_getaffinity(0, sizeof(saved), &saved) == 0;

	tool_pin_cpu(cpu_a);
	/* The new child starts on our CPU: yield until it has moved to its own, so that the
	 * first round trips do not wait for a time slice. acquire: pairs with the release store
	 * of READY in cacheline_child(). */
	while (!atomic_load_explicit(&line->ready, memory_order_acquire)) {
		if (waitpid(child, NULL, WNOHANG) != 0) {
			child = -1; /* died (and reaped) before it started: no round trips */
			total = 0;
			break;
		}
		sched_yield();
	}
	start = mark = clock_mono_ns();
	for (uint64_t i = 0; i < total; i++) {
		/* release: pairs with the acquire load in the responder's wait_seq() */
		atomic_store_explicit(&line->seq, 2 * i + 1, memory_order_release);
		if (!wait_seq(line, 2 * i + 2, yield, child)) {
			child = -1; /* died and reaped: no answer will come */
			break;
		}
		if ((i + 1) % TOOL_REF_BATCH == 0 && nb < max_b) {
			uint64_t now = clock_mono_ns();

			batch[nb++] = now - mark;
			mark = now;
		}
	}
	*ret_elapsed = clock_mono_ns() - start;
	if (restore)
		sched_setaffinity(0, sizeof(saved), &saved);
	if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		rc = -ECHILD;
	munmap(line, sizeof(*line));
	*ret_nb = nb;
	return rc;
}

int tool_ref_cacheline(int cpu_a, int cpu_b, unsigned rounds, double *ret_oneway_us)
{
	/* The result is the median batch, as the transport's figure is a median: a preempted
	 * batch on a busy machine does not count more than a preempted ping-pong does. */
	size_t nb = 0, max_b = rounds / TOOL_REF_BATCH + 1;
	uint64_t *batch = malloc(max_b * sizeof(*batch)), elapsed = 0;
	int rc;

	rc = cacheline_run(cpu_a, cpu_b, rounds, batch, batch ? max_b : 0, &nb, &elapsed);
	if (rc == 0 && nb >= 5)
		*ret_oneway_us = (double)tool_percentile(batch, nb, 50) / TOOL_REF_BATCH / 2.0 /
				 1000.0;
	else if (rc == 0) /* too few rounds for batches (or no memory): the mean */
		*ret_oneway_us = (double)elapsed / (rounds ? rounds : 1) / 2.0 / 1000.0;
	free(batch);
	return rc;
}

/* --- a responder kept alive for interleaved bursts ------------------------------------------- */

/* The responder of tool_ref_peer_start(): pinned to CPU, it sleeps in a read() on FD until a
 * burst is asked for (a uint64_t: the number of round trips), answers it, and sleeps again;
 * EOF ends it. SEQ runs on across bursts. */
static void __attribute__((noreturn)) peer_main(struct pingpong_line *line, int fd, int cpu,
						bool yield, pid_t parent)
{
	uint64_t seq = 0;

	tool_pin_cpu(cpu);
	for (;;) {
		uint64_t rounds = tool_responder_next(fd);

		for (uint64_t i = 0; i < rounds; i++) {
			if (!wait_seq(line, seq + 1, yield, -parent))
				_exit(1); /* the initiator died: do not spin on */
			seq += 2;
			/* release: pairs with the acquire load in tool_ref_peer_burst()'s wait_seq() */
			atomic_store_explicit(&line->seq, seq, memory_order_release);
		}
	}
}

pid_t tool_fork_responder(int *ret_fd, int close_fd)
{
	int sv[2], e;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		e = errno;
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (pid == 0) {
		close(sv[1]);
		if (close_fd >= 0)
			close(close_fd); /* another responder's: it must see EOF when the caller ends */
		*ret_fd = sv[0];
		return 0;
	}
	close(sv[0]);
	*ret_fd = sv[1];
	return pid;
}

int tool_ref_peer_start(struct tool_ref_peer *peer, int cpu_a, int cpu_b)
{
	struct pingpong_line *line;
	int fd, rc;
	pid_t parent = getpid(), pid;

	peer->pid = -1;
	peer->fd = -1;
	peer->line = NULL;
	line = mmap(NULL, sizeof(*line), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (line == MAP_FAILED)
		return -errno;
	atomic_init(&line->seq, 0); /* (not shared yet: before the fork) */
	pid = tool_fork_responder(&fd, -1);
	if (pid < 0) {
		rc = (int)pid;
		goto err_line;
	}
	if (pid == 0)
		peer_main(line, fd, cpu_b, cpu_a < 0 || cpu_a == cpu_b, parent);
	peer->pid = pid;
	peer->fd = fd;
	peer->line = line;
	peer->seq = 0;
	peer->yield = cpu_a < 0 || cpu_a == cpu_b;
	return 0;
err_line:
	munmap(line, sizeof(*line));
	return rc;
}

int tool_ref_peer_burst(struct tool_ref_peer *peer, unsigned warm, unsigned n,
			uint64_t *ret_batch_ns)
{
	uint64_t skip = (uint64_t)warm * TOOL_REF_BATCH, rounds = skip + (uint64_t)n * TOOL_REF_BATCH;
	uint64_t mark = 0;
	size_t nb = 0;
	int rc = tool_responder_cmd(peer->pid, peer->fd, rounds);

	if (rc < 0)
		return rc;
	for (uint64_t i = 0; i < rounds; i++) {
		if (i == skip)
			mark = clock_mono_ns();
		/* release: pairs with the acquire load in peer_main()'s wait_seq() */
		atomic_store_explicit(&peer->line->seq, peer->seq + 1, memory_order_release);
		if (!wait_seq(peer->line, peer->seq + 2, peer->yield, peer->pid)) {
			peer->pid = -1; /* died and reaped */
			return -ECHILD;
		}
		peer->seq += 2;
		if (i >= skip && (i + 1 - skip) % TOOL_REF_BATCH == 0) {
			uint64_t now = clock_mono_ns();

			ret_batch_ns[nb++] = now - mark;
			mark = now;
		}
	}
	return 0;
}

uint64_t tool_responder_next(int fd)
{
	for (;;) {
		uint64_t cmd;
		ssize_t n = read(fd, &cmd, sizeof(cmd));

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(cmd))
			_exit(n == 0 ? 0 : 1); /* EOF: the run is over */
		return cmd;
	}
}

int tool_responder_cmd(pid_t pid, int fd, uint64_t cmd)
{
	ssize_t w;

	if (pid <= 0)
		return -ECHILD;
	do /* MSG_NOSIGNAL: a dead responder is an error here, not a SIGPIPE */
		w = send(fd, &cmd, sizeof(cmd), MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)sizeof(cmd) ? 0 : -EPIPE;
}

void tool_end_responder(pid_t *pid, int *fd)
{
	if (*fd >= 0)
		close(*fd); /* the responder sees EOF and leaves */
	if (*pid > 0)
		waitpid(*pid, NULL, 0);
	*pid = -1;
	*fd = -1;
}

void tool_ref_peer_stop(struct tool_ref_peer *peer)
{
	tool_end_responder(&peer->pid, &peer->fd);
	if (peer->line)
		munmap(peer->line, sizeof(*peer->line));
	peer->line = NULL;
}

/* --- the time-stamp counter ------------------------------------------------------------------- */

/* Whether /proc/cpuinfo's flags list both constant_tsc and nonstop_tsc. */
static bool cpuinfo_tsc_invariant(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, "flags", 5) == 0)
			found = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
	fclose(f);
	return found;
}

bool tool_tsc_usable(void)
{
	const char *force = getenv("NTBSOCK_PERF_CLOCK");

	if (force && strcmp(force, "monotonic") == 0)
		return false;
#if defined(__x86_64__)
	unsigned a, b, c, d;

	/* CPUID 0x80000007 EDX bit 8: invariant TSC (constant rate in every P-, C- and T-state) */
	if (__get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)))
		return true;
	return cpuinfo_tsc_invariant();
#else
	(void)cpuinfo_tsc_invariant;
	return false;
#endif
}

/* A (TSC, CLOCK_MONOTONIC) pair: the TSC read on both sides of the clock, averaged. */
static void clock_pair(bool tsc, uint64_t *ret_ticks, uint64_t *ret_ns)
{
	uint64_t a = tool_stamp(tsc), ns = clock_mono_ns(), b = tool_stamp(tsc);

	*ret_ticks = a + (b - a) / 2;
	*ret_ns = ns;
}

void tool_clock_start(struct tool_clock *clk, bool tsc)
{
	clk->tsc = tsc;
	clk->ticks_per_ns = 1.0;
	clock_pair(tsc, &clk->ticks0, &clk->ns0);
}

void tool_clock_stop(struct tool_clock *clk)
{
	uint64_t ticks, ns;

	clock_pair(clk->tsc, &ticks, &ns);
	if (clk->tsc && ns > clk->ns0 && ticks > clk->ticks0)
		clk->ticks_per_ns = (double)(ticks - clk->ticks0) / (double)(ns - clk->ns0);
}
