// SPDX-License-Identifier: MIT
/* `ntbsock perf` reference: the copy-and-checksum pipeline between two cores, without the
 * protocol. The emulated link's data path is two fused copies: the sender copies the caller's
 * bytes into the ring and its retransmission copy while it computes the CRC32C
 * (crc32c_copy2()), the receiver copies them out of the ring while it recomputes it
 * (crc32c_copy()). Between two cores those copies run slower than on one, by how far apart the
 * cores are; this measures them alone, so that the transport's streaming figure can be read
 * against what its own kernels allow on this machine, in the same run. */
#include "tools/tools_int.h"
#include "util/compiler.h"
#include "util/crc32c.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIPE_SLOTS_MAX 64u
#define PIPE_SEED      1u /* every message is the pattern's first MSG bytes of this seed */

/* Shared by the two processes; each index in its own 128-byte unit (the ring's MSG_HEAD
 * layout). HEAD and CRC[] are written by the sender only, TAIL by the receiver. A burst ends
 * when STOP reaches the burst's number and the ring is empty. */
struct pipe_ctl {
	_Atomic uint64_t head __attribute__((aligned(128)));
	_Atomic uint64_t tail __attribute__((aligned(128)));
	_Atomic uint64_t stop __attribute__((aligned(128)));
	uint32_t crc[PIPE_SLOTS_MAX] __attribute__((aligned(128)));
};

/* Whether the other side is still there: PEER > 0 our child (reaped here), PEER < 0
 * -(our parent's pid). */
static bool peer_alive(pid_t peer)
{
	return peer > 0 ? waitpid(peer, NULL, WNOHANG) == 0 : getppid() == -peer;
}

/* One burst on the receiver's side: copies each published message out with the CRC, compares
 * it with the sender's and checks every byte against the pattern (as `ntbsock perf`'s stream
 * receiver does: the reference does the same work but the protocol), releases the slot, until
 * the sender says stop. Returns the messages that failed a check, or -1 when the sender is
 * gone. */
static int64_t pipe_recv_burst(struct pipe_ctl *ctl, const uint8_t *ring, uint8_t *dst,
			       size_t msg, uint32_t slots, uint64_t burst, pid_t parent)
{
	/* relaxed: TAIL is ours (only the receiver writes it) */
	uint64_t t = atomic_load_explicit(&ctl->tail, memory_order_relaxed);
	int64_t bad = 0;

	for (uint32_t n = 1;; n++) {
		/* acquire: pairs with the release store of HEAD after the message and its CRC */
		if (atomic_load_explicit(&ctl->head, memory_order_acquire) == t) {
			/* acquire: pairs with the sender's STOP, stored after its last HEAD */
			if (atomic_load_explicit(&ctl->stop, memory_order_acquire) == burst &&
			    atomic_load_explicit(&ctl->head, memory_order_acquire) == t)
				return bad;
			if ((n & 0xffffu) == 0 && !peer_alive(-parent))
				return -1;
			cpu_relax();
			continue;
		}
		uint32_t i = (uint32_t)(t % slots);

		if (crc32c_copy(0, dst, ring + (size_t)i * msg, msg) != ctl->crc[i] ||
		    !tool_pattern_check(dst, msg, 0, PIPE_SEED))
			bad++;
		t++;
		/* release: the slot is free once our copy of it is done */
		atomic_store_explicit(&ctl->tail, t, memory_order_release);
	}
}

/* The receiver: pinned to CPU, asleep in a read() on FD until a burst is asked for (its
 * number, a uint64_t); answers each with its CRC mismatches (an int64_t). EOF ends it. */
static void __attribute__((noreturn)) pipe_main(struct pipe_ctl *ctl, const uint8_t *ring,
						size_t msg, uint32_t slots, int fd, int cpu,
						pid_t parent)
{
	uint8_t *dst = malloc(msg);

	if (!dst)
		_exit(1);
	memset(dst, 0, msg);
	tool_pin_cpu(cpu);
	for (;;) {
		uint64_t burst = tool_responder_next(fd);
		int64_t bad = pipe_recv_burst(ctl, ring, dst, msg, slots, burst, parent);

		if (bad < 0 || write(fd, &bad, sizeof(bad)) != (ssize_t)sizeof(bad))
			_exit(1);
	}
}

int tool_pipe_start(struct tool_pipe_peer *peer, int cpu_a, int cpu_b, size_t msg,
		    size_t ring_size, int close_fd)
{
	uint32_t slots = msg ? (uint32_t)(ring_size / msg) : 0;
	int fd, rc;
	pid_t parent = getpid(), pid;

	memset(peer, 0, sizeof(*peer));
	peer->pid = -1;
	peer->fd = -1;
	if (cpu_a < 0 || cpu_a == cpu_b)
		return -ENODEV; /* one CPU: there is no pipeline to measure */
	if (slots < 2 || slots > PIPE_SLOTS_MAX || msg % 64u || slots * msg != ring_size)
		return -EINVAL;
	peer->map_len = sizeof(struct pipe_ctl) + ring_size;
	peer->map = mmap(NULL, peer->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
	if (peer->map == MAP_FAILED) {
		peer->map = NULL;
		return -errno;
	}
	memset(peer->map, 0, peer->map_len);
	peer->shadow = malloc(ring_size);
	peer->src = malloc(msg);
	if (!peer->shadow || !peer->src) {
		rc = -ENOMEM;
		goto err;
	}
	memset(peer->shadow, 0, ring_size);
	tool_pattern_fill(peer->src, msg, PIPE_SEED);
	peer->msg = msg;
	peer->slots = slots;
	pid = tool_fork_responder(&fd, close_fd);
	if (pid < 0) {
		rc = (int)pid;
		goto err;
	}
	if (pid == 0)
		pipe_main((struct pipe_ctl *)(void *)peer->map, peer->map + sizeof(struct pipe_ctl),
			  msg, slots, fd, cpu_b, parent);
	peer->pid = pid;
	peer->fd = fd;
	return 0;
err:
	tool_pipe_stop(peer);
	return rc;
}

/* The sender's part of a burst: messages until MIN_NS passed (the clock read every 16
 * messages; the first ring's worth unmeasured), then until the receiver took them all.
 * Returns the messages timed, 0 when the receiver died. */
static uint64_t pipe_send_burst(struct tool_pipe_peer *peer, uint64_t min_ns,
				uint64_t *ret_elapsed)
{
	struct pipe_ctl *ctl = (struct pipe_ctl *)(void *)peer->map;
	uint8_t *ring = peer->map + sizeof(*ctl);
	/* relaxed: HEAD is ours (only the sender writes it) */
	uint64_t h = atomic_load_explicit(&ctl->head, memory_order_relaxed);
	uint64_t first = h + peer->slots, start = 0;
	size_t msg = peer->msg;

	for (uint32_t spins = 1;; spins++) {
		/* acquire: pairs with the receiver's release of TAIL (its copy of the slot done) */
		if (h - atomic_load_explicit(&ctl->tail, memory_order_acquire) >= peer->slots) {
			if ((spins & 0xffffu) == 0 && !peer_alive(peer->pid))
				return 0;
			cpu_relax();
			continue;
		}
		if (h == first)
			start = clock_mono_ns();
		if (h > first && h % 16u == 0 && clock_mono_ns() - start >= min_ns)
			break;
		uint32_t i = (uint32_t)(h % peer->slots);

		ctl->crc[i] = crc32c_copy2(0, ring + (size_t)i * msg, peer->shadow + (size_t)i * msg,
					   peer->src, msg);
		h++;
		/* release: the message and its CRC before the index that publishes them */
		atomic_store_explicit(&ctl->head, h, memory_order_release);
	}
	/* acquire: pairs with the receiver's release of TAIL (everything copied out) */
	for (uint32_t spins = 1; atomic_load_explicit(&ctl->tail, memory_order_acquire) != h; spins++) {
		if ((spins & 0xffffu) == 0 && !peer_alive(peer->pid))
			return 0;
		cpu_relax();
	}
	*ret_elapsed = clock_mono_ns() - start;
	return h - first;
}

int tool_pipe_burst(struct tool_pipe_peer *peer, uint64_t min_ns, double *ret_mbps)
{
	struct pipe_ctl *ctl = (struct pipe_ctl *)(void *)peer->map;
	uint64_t burst = ++peer->bursts, sent, elapsed = 0;
	int64_t bad = -1;
	ssize_t w;
	int rc = tool_responder_cmd(peer->pid, peer->fd, burst);

	if (rc < 0)
		return rc;
	sent = pipe_send_burst(peer, min_ns, &elapsed);
	if (!sent) {
		peer->pid = -1; /* died and reaped */
		return -ECHILD;
	}
	/* release: after the last HEAD; the receiver returns once it took everything */
	atomic_store_explicit(&ctl->stop, burst, memory_order_release);
	do
		w = read(peer->fd, &bad, sizeof(bad));
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)sizeof(bad))
		return -EPIPE;
	if (bad != 0)
		return -EILSEQ;
	*ret_mbps = (double)sent * (double)peer->msg / ((double)elapsed / 1e9) / 1e6;
	return 0;
}

void tool_pipe_stop(struct tool_pipe_peer *peer)
{
	tool_end_responder(&peer->pid, &peer->fd);
	if (peer->map)
		munmap(peer->map, peer->map_len);
	free(peer->shadow);
	free(peer->src);
	memset(peer, 0, sizeof(*peer));
	peer->pid = -1;
	peer->fd = -1;
}
