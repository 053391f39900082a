// SPDX-License-Identifier: MIT
/* The emulated link speed of the shm backend (struct ntb_speed_params): bandwidth and one-way
 * latency, so that two emulated links differ from one and a link can be congested on one
 * machine.
 *
 * Bandwidth: this side's processes share one link clock, pace_ns in their side's local page
 * (host-local memory: doc/design.md §3 rule 2 allows local atomics among one host's processes). A write
 * of LEN bytes claims the interval [max(now - SPEED_SLACK_NS, pace_ns), + LEN / bandwidth) by
 * a CAS and its writer waits until the interval ends less SPEED_AHEAD_BYTES' worth of time: as
 * a posted-write or DMA queue that deep lets a CPU go on (to another link, say) while its
 * writes drain. Bytes enter the peer's window no faster than the bandwidth over any span
 * longer than the slack and the queue, whichever process writes; a message may become visible
 * up to the queue's time early. Latency: the first
 * ntb_to_peer_barrier() after writes of this handle waits latency_ns more, so the word it
 * orders (a publication) lands one latency after its payload. Waits shorter than
 * SPEED_SPIN_NS spin on the clock, longer ones sleep most of the way.
 *
 *   field          written by                       read by
 *   pace_ns        every writer of this side (CAS)  every writer of this side
 *   dirty          writers (relaxed store)          barriers (exchange)
 *   stats          writers / barriers (relaxed add) ntb_speed_get_stats()
 *
 * Off (no speed group) nothing here runs: the link keeps the backend's own ops. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "ntb/ntb_int.h"

#define SPEED_SPIN_NS 50000u  /* sleep through the part of a wait beyond this */
#define SPEED_AHEAD_BYTES 131072u /* the queue a writer may run ahead of the link by */
#define SPEED_SLACK_NS 500000u /* a clock behind now by up to this is not caught up: a wait
				* that overslept (a sleep ends late) is made good by the next
				* writes, as a link's queue would drain */

struct ntb_speed {
	struct ntb_backend_ops ops;         /* the backend's, with write and barrier paced */
	const struct ntb_backend_ops *base; /* the backend's own */
	uint64_t bandwidth;
	uint64_t ahead_ns;                  /* SPEED_AHEAD_BYTES at the bandwidth */
	uint32_t latency_ns;
	_Atomic bool dirty;                 /* writes since the last barrier */
	_Atomic uint64_t bytes, bw_wait_ns, lat_wait_ns, barriers;
};

/* Wait until the monotonic clock reads UNTIL; returns how long that took. */
static uint64_t wait_until(uint64_t until)
{
	uint64_t start = clock_mono_ns(), t = start;

	while (t < until) {
		uint64_t left = until - t;

		if (left > SPEED_SPIN_NS) {
			uint64_t ns = left - SPEED_SPIN_NS / 2;
			struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

			nanosleep(&ts, NULL);
		} else {
			cpu_relax();
		}
		t = clock_mono_ns();
	}
	return t - start;
}

/* Claim LEN bytes' time on the link clock; returns when its interval ends. */
static uint64_t pace_claim(struct ntb_link *link, struct ntb_speed *sp, size_t len)
{
	uint64_t cost = (uint64_t)((unsigned __int128)len * 1000000000u / sp->bandwidth);
	uint64_t now = clock_mono_ns();
	/* relaxed: the clock orders nothing but itself; the CAS makes the intervals disjoint */
	uint64_t old = atomic_load_explicit(&link->local->pace_ns, memory_order_relaxed), end;

	do {
		uint64_t floor = now > SPEED_SLACK_NS ? now - SPEED_SLACK_NS : 0;

		end = (old > floor ? old : floor) + cost;
	} while (!atomic_compare_exchange_weak_explicit(&link->local->pace_ns, &old, end,
							memory_order_relaxed,
							memory_order_relaxed));
	return end;
}

static void speed_write(struct ntb_link *link, size_t off, const void *src, size_t len)
{
	struct ntb_speed *sp = link->speed;

	if (sp->bandwidth && len) {
		uint64_t end = pace_claim(link, sp, len);
		uint64_t waited = wait_until(end > sp->ahead_ns ? end - sp->ahead_ns : 0);

		atomic_fetch_add_explicit(&sp->bw_wait_ns, waited, memory_order_relaxed);
	}
	if (sp->base->write) {
		sp->base->write(link, off, src, len);
	} else if (len == 8 && off % 8 == 0) {
		uint64_t v;

		/* one store, as ntb_write64() makes it without the model (a word another thread
		 * of this host may write too: ST_FLAGS; relaxed, the caller's barrier orders it) */
		memcpy(&v, src, 8);
		atomic_store_explicit((_Atomic uint64_t *)(void *)(link->out + off), v,
				      memory_order_relaxed);
	} else if (len == 4 && off % 4 == 0) {
		uint32_t v;

		memcpy(&v, src, 4);
		atomic_store_explicit((_Atomic uint32_t *)(void *)(link->out + off), v,
				      memory_order_relaxed);
	} else {
		memcpy(link->out + off, src, len);
	}
	atomic_fetch_add_explicit(&sp->bytes, len, memory_order_relaxed);
	atomic_store_explicit(&sp->dirty, true, memory_order_relaxed);
}

static void speed_barrier(struct ntb_link *link)
{
	struct ntb_speed *sp = link->speed;

	if (sp->latency_ns && atomic_exchange_explicit(&sp->dirty, false, memory_order_relaxed)) {
		uint64_t waited = wait_until(clock_mono_ns() + sp->latency_ns);

		atomic_fetch_add_explicit(&sp->lat_wait_ns, waited, memory_order_relaxed);
		atomic_fetch_add_explicit(&sp->barriers, 1, memory_order_relaxed);
	}
	if (sp->base->to_peer_barrier) {
		sp->base->to_peer_barrier(link);
		return;
	}
	/* as ntb_to_peer_barrier() without an op on a write-back mapping (shm is never
	 * write-combined): payload stores before the publishing store (pairs with the reader's
	 * acquire load of the published word) */
	atomic_thread_fence(memory_order_release);
}

int ntb_speed_create(struct ntb_link *link)
{
	struct ntb_speed *sp;

	if (strcmp(link->params.backend, "shm") != 0)
		return -EINVAL;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->base = link->ops;
	sp->ops = *link->ops;
	sp->ops.write = speed_write;
	sp->ops.to_peer_barrier = speed_barrier;
	sp->bandwidth = link->params.speed.bandwidth;
	if (sp->bandwidth)
		sp->ahead_ns = (uint64_t)SPEED_AHEAD_BYTES * 1000000000u / sp->bandwidth;
	sp->latency_ns = link->params.speed.latency_ns;
	link->speed = sp;
	link->ops = &sp->ops;
	return 0;
}

void ntb_speed_destroy(struct ntb_speed *sp)
{
	free(sp);
}

void ntb_speed_get_stats(const struct ntb_link *link, struct ntb_speed_stats *ret)
{
	struct ntb_speed *sp = link->speed;

	memset(ret, 0, sizeof(*ret));
	if (!sp)
		return;
	ret->bytes = atomic_load_explicit(&sp->bytes, memory_order_relaxed);
	ret->bw_wait_ns = atomic_load_explicit(&sp->bw_wait_ns, memory_order_relaxed);
	ret->lat_wait_ns = atomic_load_explicit(&sp->lat_wait_ns, memory_order_relaxed);
	ret->barriers = atomic_load_explicit(&sp->barriers, memory_order_relaxed);
}

bool ntb_speed_backlog(struct ntb_link *link, uint64_t *ret_backlog_ns, uint64_t *ret_ahead_ns)
{
	struct ntb_speed *sp = link->speed;

	if (!sp || !sp->bandwidth)
		return false;
	/* relaxed: a reading of the clock, a hint for a sender choosing among links */
	uint64_t pace = atomic_load_explicit(&link->local->pace_ns, memory_order_relaxed);
	uint64_t now = clock_mono_ns();

	*ret_backlog_ns = pace > now ? pace - now : 0;
	*ret_ahead_ns = sp->ahead_ns;
	return true;
}
