/* SPDX-License-Identifier: MIT */
/* Process coordination among one side's processes: the side lock, claim slots (taken, released,
 * reaped when their process died or exec'ed), sessions and their epochs, and the join of a
 * forked child. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "ntb/ntb_int.h"
#include "util/log.h"
#include "util/proc.h"

static void sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000L };
	nanosleep(&ts, NULL);
}


/* --- the side lock (local atomics among one side's processes) ---------------------------------- */

int ntb_side_lock(struct ntb_side_local *l)
{
	uint32_t me = (uint32_t)getpid();
	uint64_t start = clock_mono_ns();
	for (unsigned i = 0;; i++) {
		uint32_t expect = 0;
		/* Acquire: pairs with the release in ntb_side_unlock(). */
		if (atomic_compare_exchange_weak_explicit(&l->lock, &expect, me,
							  memory_order_acquire,
							  memory_order_relaxed))
			return 0;
		if (expect != 0 && i % 16 == 15 && !proc_alive((pid_t)expect, 0) &&
		    atomic_compare_exchange_strong_explicit(&l->lock, &expect, me,
							    memory_order_acquire,
							    memory_order_relaxed)) {
			LOG(LL_DEBUG, "ntb: stole side lock from dead pid %u", expect);
			return 0;
		}
		if (clock_mono_ns() - start > 3000000000ull)
			return -EDEADLK;
		if (i < 64)
			sched_yield();
		else
			sleep_us(200);
	}
}

void ntb_side_unlock(struct ntb_side_local *l)
{
	/* Release: our slot/session updates before the lock is seen free. */
	atomic_store_explicit(&l->lock, 0, memory_order_release);
}

static uint32_t random_epoch(uint32_t not_this);

/* This program image's tag: random, non-zero, drawn once per image (exec starts a new one
 * with fresh statics; a forked child keeps it, but has its own pid). */
uint32_t ntb_image_tag(void)
{
	static _Atomic uint32_t tag;
	uint32_t t = atomic_load_explicit(&tag, memory_order_relaxed), mine = 0;

	if (t)
		return t;
	mine = random_epoch(0);
	/* relaxed: every value is as good; the first stored wins so all threads agree */
	if (!atomic_compare_exchange_strong_explicit(&tag, &t, mine, memory_order_relaxed,
						     memory_order_relaxed))
		return t;
	return mine;
}

/* Ours by pid but another image's: that program exec'ed (into us, or into a program that
 * exec'ed into us) and cannot release it any more. The process lives on, so its side does:
 * the slot is freed but still counts as live (no new session, no new epoch: the connections
 * the new image adopts across exec go on). */
static bool slot_replaced(struct ntb_side_slot *s)
{
	/* this process's start time (exec keeps it), cached with the pid it is for (a forked
	 * child inherits the cache) */
	static _Atomic uint64_t my_start;
	static _Atomic pid_t my_start_pid;
	pid_t me = getpid();
	/* acquire: pairs with the release store of owner in side_claim_locked() (image and
	 * starttime before it) */
	uint64_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
	uint32_t image = atomic_load_explicit(&s->image, memory_order_relaxed);
	uint64_t start;

	if (!owner || (pid_t)(owner & 0xffffffffu) != me || !image || image == ntb_image_tag())
		return false;
	/* (called under the side lock: one thread at a time fills the cache) */
	if (atomic_load_explicit(&my_start_pid, memory_order_relaxed) != me) {
		atomic_store_explicit(&my_start, proc_starttime(me, NULL), memory_order_relaxed);
		atomic_store_explicit(&my_start_pid, me, memory_order_relaxed);
	}
	start = atomic_load_explicit(&my_start, memory_order_relaxed);
	/* the same process, not a dead one whose pid we got: its start time is ours */
	return start && atomic_load_explicit(&s->starttime, memory_order_relaxed) == start;
}

static bool slot_live(struct ntb_side_slot *s)
{
	uint64_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
	if (!owner)
		return false;
	return proc_alive((pid_t)(owner & 0xffffffffu),
			 atomic_load_explicit(&s->starttime, memory_order_relaxed));
}

/* Slot S's process is gone: its threads that were counted in L's db_waiters are not waiting. */
static void waiters_take_back(struct ntb_side_local *l, struct ntb_side_slot *s)
{
	uint32_t w = atomic_exchange_explicit(&s->waiting, 0, memory_order_relaxed);
	uint32_t cur = atomic_load_explicit(&l->db_waiters, memory_order_relaxed);

	/* (never below 0: a count the peer's ringers read) */
	while (w && !atomic_compare_exchange_weak_explicit(&l->db_waiters, &cur,
							   cur > w ? cur - w : 0,
							   memory_order_relaxed, memory_order_relaxed))
		;
}

/* Under the side lock: free the slots of dead processes; return the number of live ones. */
int ntb_side_reap(struct ntb_side_local *l, int *ret_enabled)
{
	int live = 0, enabled = 0;
	for (int i = 0; i < NTB_SIDE_SLOTS; i++) {
		struct ntb_side_slot *s = &l->slots[i];
		if (!atomic_load_explicit(&s->owner, memory_order_acquire))
			continue;
		if (slot_replaced(s)) {
			LOG(LL_DEBUG, "ntb: freeing slot %d of pid %d's image before its exec", i,
			    (int)getpid());
			atomic_store_explicit(&s->enabled, 0, memory_order_relaxed);
			waiters_take_back(l, s); /* (an exec ends every thread) */
			atomic_store_explicit(&s->owner, 0, memory_order_release);
			live++;
			continue;
		}
		if (!slot_live(s)) {
			/* relaxed: for the log (under the side lock) */
			uint64_t dead = atomic_load_explicit(&s->owner, memory_order_relaxed);

			LOG(LL_DEBUG, "ntb: reaping slot %d of dead pid %llu", i,
			    (unsigned long long)(dead & 0xffffffffu));
			atomic_store_explicit(&s->enabled, 0, memory_order_relaxed);
			waiters_take_back(l, s);
			atomic_store_explicit(&s->owner, 0, memory_order_release);
			continue;
		}
		live++;
		if (atomic_load_explicit(&s->enabled, memory_order_relaxed))
			enabled++;
	}
	if (ret_enabled)
		*ret_enabled = enabled;
	return live;
}

static uint32_t random_epoch(uint32_t not_this)
{
	uint32_t e = 0;
	while (e == 0 || e == not_this) {
		if (getrandom(&e, sizeof(e), GRND_NONBLOCK) != sizeof(e)) {
			uint64_t x = clock_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)&e;
			x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
			e = (uint32_t)x;
		}
	}
	return e;
}

/* Under the side lock: take a free slot; start a new session when none is live. */
static int side_claim_locked(struct ntb_link *link, struct ntb_side_local *l, int live)
{
	if (live == 0) {
		uint32_t old = atomic_load_explicit(&l->session_epoch, memory_order_relaxed);
		atomic_store_explicit(&l->session_epoch, random_epoch(old), memory_order_relaxed);
		atomic_store_explicit(&l->hb_due_ns, 0, memory_order_relaxed);
		/* (nobody of this side lives: nobody waits; counts a dead process left) */
		atomic_store_explicit(&l->db_waiters, 0, memory_order_relaxed);
	}
	for (int i = 0; i < NTB_SIDE_SLOTS; i++) {
		struct ntb_side_slot *s = &l->slots[i];
		if (atomic_load_explicit(&s->owner, memory_order_relaxed))
			continue;
		uint32_t gen = atomic_fetch_add_explicit(&l->generation, 1,
							 memory_order_relaxed) + 1;
		uint64_t owner = ((uint64_t)gen << 32) | (uint32_t)getpid();
		atomic_store_explicit(&s->starttime, proc_starttime(getpid(), NULL),
				      memory_order_relaxed);
		atomic_store_explicit(&s->image, ntb_image_tag(), memory_order_relaxed);
		atomic_store_explicit(&s->enabled, 0, memory_order_relaxed);
		atomic_store_explicit(&s->waiting, 0, memory_order_relaxed);
		atomic_store_explicit(&s->ev_fd, 0, memory_order_relaxed); /* (nothing published) */
		/* Release: starttime before owner; pairs with the acquire in slot_live(). */
		atomic_store_explicit(&s->owner, owner, memory_order_release);
		link->slot = i;
		link->owner = owner;
		link->epoch = atomic_load_explicit(&l->session_epoch, memory_order_relaxed);
		return 0;
	}
	return -EUSERS;
}

struct ntb_side_local *ntb_side_local_of(struct ntb_link *link, int side)
{
	return (struct ntb_side_local *)(link->base + link->hdr.local_off[side]);
}

/* Claim LINK->params.side, or (side -1) a side with no live process. */
int ntb_side_claim(struct ntb_link *link)
{
	int want = link->params.side;
	int order[2] = { 0, 1 };
	if (want < 0 && link->side_hint == 1) {
		order[0] = 1;
		order[1] = 0;
	}
	for (int k = 0; k < 2; k++) {
		int side = want >= 0 ? want : order[k];
		struct ntb_side_local *l = ntb_side_local_of(link, side);
		int rc = ntb_side_lock(l);
		if (rc) {
			ntb_set_detail("link %s: side %d lock held by a live process for 3 s",
				       link->params.name, side);
			return rc;
		}
		int live = ntb_side_reap(l, NULL);
		if (want < 0 && live > 0) {
			ntb_side_unlock(l);
			continue;
		}
		rc = side_claim_locked(link, l, live);
		ntb_side_unlock(l);
		if (rc) {
			ntb_set_detail("link %s: side %d has all %d slots in use",
				       link->params.name, side, NTB_SIDE_SLOTS);
			return rc;
		}
		link->side = side;
		return 0;
	}
	ntb_set_detail("link %s: both sides are in use by live processes", link->params.name);
	return -EBUSY;
}


/* Does this process own LINK's claim slot? (A forked child inherits the handle, not the
 * claim, until ntb_link_atfork_child().) */
bool ntb_side_owns_slot(const struct ntb_link *link)
{
	return link->slot >= 0 && (uint32_t)link->owner == (uint32_t)getpid();
}

void ntb_side_release(struct ntb_link *link)
{
	if (!ntb_side_owns_slot(link))
		return;
	struct ntb_side_local *l = link->local;
	struct ntb_side_slot *s = &l->slots[link->slot];
	bool locked = ntb_side_lock(l) == 0;
	/* Only clear the slot if it is still ours (a reaper may have taken it if we looked
	 * dead, which cannot happen while we run, but be exact). */
	uint64_t expect = link->owner;
	atomic_store_explicit(&s->enabled, 0, memory_order_relaxed);
	/* (the event doorbell's publication withdrawn: ntb/evring.c) */
	if (link->ctrl_out)
		atomic_store_explicit(&link->ctrl_out->ev_id[link->slot], 0, memory_order_relaxed);
	atomic_store_explicit(&s->ev_fd, 0, memory_order_relaxed);
	atomic_compare_exchange_strong_explicit(&s->owner, &expect, 0, memory_order_release,
						memory_order_relaxed);
	if (locked)
		ntb_side_unlock(l);
	link->slot = -1;
}

void ntb_link_release_claim(struct ntb_link *link)
{
	if (link && !link->inspect)
		ntb_side_release(link);
}

int ntb_link_atfork_child(struct ntb_link *link)
{
	if (!link)
		return -EINVAL;
	/* (a thread of the parent may have held it at the fork: not in this process) */
	pthread_mutex_init(&link->clk_mu, NULL);
	ntb_event_atfork_child(link);
	return ntb_link_rejoin(link);
}

int ntb_link_rejoin(struct ntb_link *link)
{
	if (!link)
		return -EINVAL;
	if (link->inspect || ntb_side_owns_slot(link))
		return 0;
	link->slot = -1;
	struct ntb_side_local *l = link->local;
	int rc = ntb_side_lock(l);
	if (rc)
		return rc;
	if (atomic_load_explicit(&l->session_epoch, memory_order_relaxed) != link->epoch) {
		/* Our side restarted between the fork and now: this handle is stale. */
		ntb_side_unlock(l);
		ntb_set_detail("link %s: side %d restarted since the fork", link->params.name,
			       link->side);
		return -ESTALE;
	}
	/* Join the session (never start a new one: the epoch must stay). The slots of dead
	 * processes are reaped only when none is free: a reap looks at every live claimer's
	 * /proc entry, and a server forking per connection pays this at each fork. */
	rc = side_claim_locked(link, l, 1);
	if (rc == -EUSERS && ntb_side_reap(l, NULL) >= 0)
		rc = side_claim_locked(link, l, 1);
	/* relaxed: this handle's flag (as in ntb_link_enable()) */
	if (rc == 0 && atomic_load_explicit(&link->enabled, memory_order_relaxed))
		atomic_store_explicit(&l->slots[link->slot].enabled, 1, memory_order_relaxed);
	ntb_side_unlock(l);
	if (rc)
		ntb_set_detail("link %s: side %d has all %d slots in use", link->params.name,
			       link->side, NTB_SIDE_SLOTS);
	return rc;
}
