/* SPDX-License-Identifier: MIT */
/* Link open/close, side claiming with crash recovery, per-side sessions and epochs, heartbeat
 * link state, windows, barriers, doorbells and scratchpads — the backend-independent part of
 * ntb/ (layout and protocol described in ntb_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "ntb/ntb_int.h"
#include "util/log.h"
#include "util/crc32c.h"
#include "util/mapguard.h"
#include "util/proc.h"
#include "util/rawsys.h"

static __thread char detail_buf[256];

void ntb_set_detail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail_buf, sizeof(detail_buf), fmt, ap);
	va_end(ap);
	LOG(LL_DEBUG, "ntb: %s", detail_buf);
}

const char *ntb_strerror_detail(void)
{
	return detail_buf;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000L };
	nanosleep(&ts, NULL);
}

void ntb_link_params_init(struct ntb_link_params *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->backend, sizeof(p->backend), "shm");
	p->side = -1;
	p->window_size = 16u << 20;
	p->mode = 0600;
	p->group = (gid_t)-1;
	p->bar = -1;
	p->heartbeat_ms = 100;
	p->link_timeout_ms = 500;
	p->doorbell = true;
}

/* --- the side lock (local atomics among one side's processes) ---------------------------------- */

static int side_lock(struct ntb_side_local *l)
{
	uint32_t me = (uint32_t)getpid();
	uint64_t start = clock_mono_ns();
	for (unsigned i = 0;; i++) {
		uint32_t expect = 0;
		/* Acquire: pairs with the release in side_unlock(). */
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

static void side_unlock(struct ntb_side_local *l)
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

/* Under the side lock: free the slots of dead processes; return the number of live ones. */
static int side_reap(struct ntb_side_local *l, int *ret_enabled)
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
			atomic_store_explicit(&s->owner, 0, memory_order_release);
			live++;
			continue;
		}
		if (!slot_live(s)) {
			LOG(LL_DEBUG, "ntb: reaping slot %d of dead pid %llu", i,
			    (unsigned long long)(atomic_load(&s->owner) & 0xffffffffu));
			atomic_store_explicit(&s->enabled, 0, memory_order_relaxed);
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
		/* Release: starttime before owner; pairs with the acquire in slot_live(). */
		atomic_store_explicit(&s->owner, owner, memory_order_release);
		link->slot = i;
		link->owner = owner;
		link->epoch = atomic_load_explicit(&l->session_epoch, memory_order_relaxed);
		return 0;
	}
	return -EUSERS;
}

static struct ntb_side_local *local_of(struct ntb_link *link, int side)
{
	return (struct ntb_side_local *)(link->base + link->hdr.local_off[side]);
}

/* Claim LINK->params.side, or (side -1) a side with no live process. */
static int side_claim(struct ntb_link *link)
{
	int want = link->params.side;
	int order[2] = { 0, 1 };
	if (want < 0 && link->side_hint == 1) {
		order[0] = 1;
		order[1] = 0;
	}
	for (int k = 0; k < 2; k++) {
		int side = want >= 0 ? want : order[k];
		struct ntb_side_local *l = local_of(link, side);
		int rc = side_lock(l);
		if (rc) {
			ntb_set_detail("link %s: side %d lock held by a live process for 3 s",
				       link->params.name, side);
			return rc;
		}
		int live = side_reap(l, NULL);
		if (want < 0 && live > 0) {
			side_unlock(l);
			continue;
		}
		rc = side_claim_locked(link, l, live);
		side_unlock(l);
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

static bool owns_slot(const struct ntb_link *link);

static void side_release(struct ntb_link *link)
{
	if (!owns_slot(link))
		return;
	struct ntb_side_local *l = link->local;
	struct ntb_side_slot *s = &l->slots[link->slot];
	bool locked = side_lock(l) == 0;
	/* Only clear the slot if it is still ours (a reaper may have taken it if we looked
	 * dead, which cannot happen while we run, but be exact). */
	uint64_t expect = link->owner;
	atomic_store_explicit(&s->enabled, 0, memory_order_relaxed);
	atomic_compare_exchange_strong_explicit(&s->owner, &expect, 0, memory_order_release,
						memory_order_relaxed);
	if (locked)
		side_unlock(l);
	link->slot = -1;
}

/* --- open / close ---------------------------------------------------------------------------- */

static int check_params(const struct ntb_link_params *p)
{
	size_t n = strnlen(p->name, sizeof(p->name));
	if (n == 0 || n > NTB_NAME_MAX) {
		ntb_set_detail("link name empty or longer than %d", NTB_NAME_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		char c = p->name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.') || (i == 0 && c == '.')) {
			ntb_set_detail("link name \"%.*s\": only letters, digits, - _ . allowed",
				       (int)n, p->name);
			return -EINVAL;
		}
	}
	if (p->side < -1 || p->side > 1) {
		ntb_set_detail("link %s: side %d (want 0, 1 or -1)", p->name, p->side);
		return -EINVAL;
	}
	if (p->window_size % NTB_PAGE || p->window_size > (UINT64_C(1) << 40)) {
		ntb_set_detail("link %s: window size %zu not a multiple of 4096 (or > 1 TiB)",
			       p->name, p->window_size);
		return -EINVAL;
	}
	const struct ntb_fault_params *f = &p->fault;
	if (f->enabled && (!(f->drop >= 0.0 && f->drop <= 1.0) ||
			   !(f->corrupt >= 0.0 && f->corrupt <= 1.0) || f->delay_us > 1000000)) {
		ntb_set_detail("link %s: fault rates must be in [0,1], delay ≤ 1 s", p->name);
		return -EINVAL;
	}
	return 0;
}

static void link_layout(struct ntb_link *link)
{
	int s = link->side, o = 1 - s;
	link->local = local_of(link, s);
	link->peer_local = local_of(link, o);
	link->ctrl_in = (struct ntb_ctrl_page *)(link->base + link->hdr.ctrl_off[s]);
	link->ctrl_out = (struct ntb_ctrl_page *)(link->base + link->hdr.ctrl_off[o]);
	link->in = link->base + link->hdr.win_off[s];
	link->out = link->base + link->hdr.win_off[o];
	link->win_size = link->hdr.win_size;
	link->out_size = link->inspect ? 0 : link->win_size;
}

int ntb_link_open(const struct ntb_link_params *p, struct ntb_link **ret_link)
{
	const struct ntb_backend_ops *ops;

	if (!p)
		return -EINVAL;
	ops = ntb_backend_find(p->backend);
	if (!ops) {
		ntb_set_detail("link %s: no backend \"%.*s\" in this build", p->name,
			       NTB_BACKEND_NAME_MAX, p->backend);
		return -EINVAL;
	}
	return ntb_link_open_ops(p, ops, ret_link);
}

static void hb_record(struct ntb_link *link, uint32_t hb, bool changed);

int ntb_link_open_ops(const struct ntb_link_params *p, const struct ntb_backend_ops *ops,
		      struct ntb_link **ret_link)
{
	int rc;

	detail_buf[0] = 0;
	if (!p || !ret_link || !ops || !ops->open || !ops->close)
		return -EINVAL;
	rc = check_params(p);
	if (rc)
		return rc;
	struct ntb_link *link = calloc(1, sizeof(*link));
	if (!link) {
		ntb_set_detail("out of memory");
		return -ENOMEM;
	}
	link->params = *p;
	if (!link->params.heartbeat_ms)
		link->params.heartbeat_ms = 100;
	if (!link->params.link_timeout_ms)
		link->params.link_timeout_ms = 500;
	if (link->params.link_timeout_ms <= link->params.heartbeat_ms) {
		ntb_set_detail("link %s: link_timeout_ms %u must exceed heartbeat_ms %u", p->name,
			       link->params.link_timeout_ms, link->params.heartbeat_ms);
		free(link);
		return -EINVAL;
	}
	link->inspect = p->inspect_only;
	if (link->inspect && link->params.side < 0)
		link->params.side = 0;
	link->slot = -1;
	link->side_hint = -1;
	link->hb_period_ns = (uint64_t)link->params.heartbeat_ms * 1000000u;
	link->timeout_ns = (uint64_t)link->params.link_timeout_ms * 1000000u;
	link->ops = ops;

	rc = link->ops->open(link);
	if (rc)
		goto err_free;
	if (link->inspect) {
		link->side = link->params.side;
	} else {
		rc = side_claim(link);
		if (rc)
			goto err_close;
	}
	link_layout(link);
	if (!link->inspect && (p->speed.bandwidth || p->speed.latency_ns)) {
		rc = ntb_speed_create(link);
		if (rc) {
			ntb_set_detail("link %s: speed model: %s", p->name,
				       rc == -EINVAL ? "shm backend only" : "out of memory");
			goto err_release;
		}
	}
	if (!link->inspect && p->fault.enabled) {
		rc = ntb_fault_create(&p->fault, &link->fault);
		if (rc) {
			ntb_set_detail("link %s: fault decorator: out of memory", p->name);
			goto err_release;
		}
	}
	/* Start observing: the current heartbeat value is "old" until it changes. This host's
	 * record learns the value (if new to it) and when it was first seen here. */
	uint32_t hb0 = atomic_load_explicit(&link->ctrl_in->heartbeat.v, memory_order_acquire);
	atomic_store_explicit(&link->peer_hb_last, hb0, memory_order_relaxed);
	atomic_store_explicit(&link->peer_hb_change_ns, 0, memory_order_relaxed);
	hb_record(link, hb0, false);
	LOG(LL_DEBUG, "ntb: link %s open (%s, side %d, windows %zu, epoch %08x%s)", p->name,
	    link->ops->name, link->side, link->win_size, link->epoch,
	    link->inspect ? ", inspect" : "");
	*ret_link = link;
	return 0;

err_release:
	side_release(link);
err_close:
	link->ops->close(link);
err_free:
	ntb_speed_destroy(link->speed);
	free(link);
	return rc;
}

void ntb_link_close(struct ntb_link *link)
{
	if (!link)
		return;
	if (!link->inspect) {
		ntb_link_disable(link);
		side_release(link);
	}
	ntb_fault_destroy(link->fault);
	link->ops->close(link);
	ntb_speed_destroy(link->speed);
	free(link);
}

int ntb_link_check_mapping(struct ntb_link *link)
{
	if (!link)
		return -EINVAL;
	return link->ops->check_mapping ? link->ops->check_mapping(link) : 0;
}

/* --- windows and barriers -------------------------------------------------------------------- */
/*
 * WHO WRITES / ORDERING of what crosses the link (the transport's words: transport/tp_words.c)
 *   outbound window bytes   this side, ntb_write*() (relaxed); published by a word written
 *                           after ntb_to_peer_barrier() (release / sfence), which the peer
 *                           loads with acquire; space handed back after ntb_from_peer_barrier()
 *   ctrl page enable, epoch, caps, writer_pid
 *                           this side's enabled handle (side lock); enable is a release store
 *                           after the others, loaded with acquire in observe_peer()
 *   ctrl page heartbeat     the side's CAS winner of hb_due_ns; release store after enable and
 *                           epoch (write_heartbeat()), acquire load in observe_peer()
 *   ctrl page doorbell      any process of this side (distinct values from side_local.db_seq);
 *                           release store after the window writes it announces, acquire load
 *                           in ntb_db_read(); seq_cst Dekker pair with db_waiters (shm.c)
 *   ctrl page spad[i]       this side; release store, acquire load (ntb_spad_read())
 *   side_local slots, lock, session_epoch, hb_due_ns, db_waiters
 *                           processes of one side (local atomics, side lock: acquire CAS,
 *                           release store)
 */
/* Store fence for a write-combining mapping: sfence on x86; elsewhere a full fence (no
 * portable store-only fence: dmb ish on ARM, sync on POWER), as pci_wc_flush() does. */
static inline void store_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_sfence();
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}


const volatile void *ntb_in_window(const struct ntb_link *link, size_t *ret_size)
{
	if (ret_size)
		*ret_size = link->win_size;
	return link->in;
}

size_t ntb_out_size(const struct ntb_link *link)
{
	return link->out_size;
}

static int bounds_error(const struct ntb_link *link)
{
	return link->inspect ? -EPERM : -EINVAL;
}

int ntb_write(struct ntb_link *link, size_t off, const void *src, size_t len)
{
	if (unlikely(off > link->out_size || len > link->out_size - off))
		return bounds_error(link);
	if (unlikely(link->fault))
		ntb_fault_write(link, off, src, len);
	else if (link->ops->write)
		link->ops->write(link, off, src, len);
	else
		memcpy(link->out + off, src, len);
	return 0;
}

int ntb_write_dup_crc(struct ntb_link *link, size_t off, void *shadow, const void *src,
				 size_t len, uint32_t crc, uint32_t *ret_crc)
{
	if (unlikely(off > link->out_size || len > link->out_size - off))
		return bounds_error(link);
	if (unlikely(link->fault) || link->ops->write) {
		/* the decorator (or backend) sees one write of the checksummed bytes */
		crc = crc32c_copy(crc, shadow, src, len);
		if (link->fault)
			ntb_fault_write(link, off, shadow, len);
		else
			link->ops->write(link, off, shadow, len);
	} else {
		crc = crc32c_copy2(crc, link->out + off, shadow, src, len);
	}
	*ret_crc = crc;
	return 0;
}

/* One aligned store of WIDTH bytes (single instruction on x86-64). Relaxed: the ordering is the
 * caller's, a named barrier before a publishing store (ntb_to_peer_barrier() after the writes
 * it publishes, ntb_from_peer_barrier() after the reads of the space it hands back); the
 * peer's partner is its acquire load of the word. */
#define NTB_WRITE_N(fn, type)                                                              \
	int fn(struct ntb_link *link, size_t off, type v)                                    \
	{                                                                                   \
		if (unlikely(off % sizeof(type) || off > link->out_size ||                    \
			     sizeof(type) > link->out_size - off))                          \
			return off % sizeof(type) ? -EINVAL : bounds_error(link);           \
		if (unlikely(link->fault) || link->ops->write)                               \
			ntb_fault_or_raw_store(link, off, &v, sizeof(type));                \
		else                                                                        \
			__atomic_store_n((type *)(link->out + off), v, __ATOMIC_RELAXED);    \
		return 0;                                                                   \
	}

static void ntb_fault_or_raw_store(struct ntb_link *link, size_t off, const void *v, size_t len)
{
	if (link->fault)
		ntb_fault_write(link, off, v, len);
	else
		link->ops->write(link, off, v, len);
}

NTB_WRITE_N(ntb_write8, uint8_t)
NTB_WRITE_N(ntb_write32, uint32_t)
NTB_WRITE_N(ntb_write64, uint64_t)

uint8_t *ntb_out_direct(struct ntb_link *link)
{
	/* plain write-back memory whose writes need nothing but the stores themselves, in order:
	 * no fault decorator (fixed at open), no backend write or barrier op, not write-combined */
	if (link->fault || link->ops->write || link->ops->to_peer_barrier || link->wc || !link->out)
		return NULL;
	return link->out;
}

void ntb_to_peer_barrier(struct ntb_link *link)
{
	if (link->ops->to_peer_barrier) {
		link->ops->to_peer_barrier(link);
		return;
	}
	/* Payload stores before the publishing store. On a write-back mapping x86 keeps stores
	 * in order (glibc fences its own non-temporal copies), so a release fence suffices (no
	 * instruction there; dmb ish on ARM, lwsync on POWER); a WC mapping needs sfence.
	 * Pairs with the reader's acquire load of the published word (tp_slot_word(),
	 * tp_in_word(), the inline sequence byte in rx_inline()). */
	if (link->wc)
		store_fence();
	else
		atomic_thread_fence(memory_order_release);
}

void ntb_wc_flush(struct ntb_link *link)
{
	if (link->ops->wc_flush) {
		link->ops->wc_flush(link);
		return;
	}
	/* Drains write-combining buffers; on shm this is a store fence plus compiler barrier.
	 * (Not an ordering point of its own: every publishing store is preceded by
	 * ntb_to_peer_barrier() or ntb_from_peer_barrier(); this pushes what was written out.) */
	store_fence();
	atomic_signal_fence(memory_order_seq_cst);
}

/* --- link state ----------------------------------------------------------------------------- */

/* The fault decorator cut the link: this handle's writes to the peer's control page vanish
 * like its window writes (ntb_fault_ctrl_pass() counts each). */
static bool ctrl_cut(struct ntb_link *link)
{
	return unlikely(link->fault) && !ntb_fault_ctrl_pass(link);
}

static void write_heartbeat(struct ntb_link *link)
{
	if (ctrl_cut(link))
		return; /* the peer sees our heartbeat stop: its link goes down */
	uint64_t v = atomic_fetch_add_explicit(&link->local->hb_seq, 1, memory_order_relaxed) + 1;
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	atomic_store_explicit(&link->ctrl_out->hb_wall.v, (uint32_t)wall.tv_sec,
			      memory_order_relaxed);
	/* Release: epoch/enable/caps/wall stamp before the heartbeat; pairs with the acquire load
	 * of the heartbeat in observe_peer() and ntb_link_peer_state(). */
	atomic_store_explicit(&link->ctrl_out->heartbeat.v, (uint32_t)v, memory_order_release);
}

/* Does this process own LINK's claim slot? (A forked child inherits the handle, not the
 * claim, until ntb_link_atfork_child().) */
static bool owns_slot(const struct ntb_link *link)
{
	return link->slot >= 0 && (uint32_t)link->owner == (uint32_t)getpid();
}

int ntb_link_enable(struct ntb_link *link)
{
	if (link->inspect)
		return -EPERM;
	if (atomic_load(&link->enabled))
		return 0;
	int rc = side_lock(link->local);
	if (rc)
		return rc;
	if (owns_slot(link))
		atomic_store_explicit(&link->local->slots[link->slot].enabled, 1,
				      memory_order_relaxed);
	struct ntb_ctrl_page *c = link->ctrl_out;
	uint32_t caps = link->caps;
	if (link->db_id)
		/* Interrupt doorbells: this process takes them from now on (under the side lock). */
		atomic_store_explicit(&link->local->db_owner, link->db_id, memory_order_relaxed);
	else if (atomic_load_explicit(&link->local->db_owner, memory_order_relaxed))
		caps |= NTB_CAP_EVENT_DB; /* another process of this side takes them: keep its id */
	if (!ctrl_cut(link)) {
		if (link->db_id)
			atomic_store_explicit(&c->db_id.v, link->db_id, memory_order_relaxed);
		atomic_store_explicit(&c->caps.v, caps, memory_order_relaxed);
		atomic_store_explicit(&c->writer_pid.v, (uint32_t)getpid(), memory_order_relaxed);
		atomic_store_explicit(&c->epoch.v, link->epoch, memory_order_relaxed);
		/* Release: epoch before enable; pairs with the acquire load of enable in
		 * observe_peer(). */
		atomic_store_explicit(&c->enable.v, 1, memory_order_release);
	}
	write_heartbeat(link);
	atomic_store_explicit(&link->local->hb_due_ns, clock_mono_ns() + link->hb_period_ns,
			      memory_order_relaxed);
	atomic_store(&link->enabled, true);
	side_unlock(link->local);
	return 0;
}

int ntb_link_disable(struct ntb_link *link)
{
	if (link->inspect)
		return -EPERM;
	if (!atomic_load(&link->enabled))
		return 0;
	int locked = side_lock(link->local);
	int enabled = 0;
	if (owns_slot(link))
		atomic_store_explicit(&link->local->slots[link->slot].enabled, 0,
				      memory_order_relaxed);
	side_reap(link->local, &enabled);
	/* The last enabled handle of the side announces down (pairs with observe_peer()); a cut
	 * one cannot: the peer sees its heartbeat stop instead. */
	if (enabled == 0 && !ctrl_cut(link))
		atomic_store_explicit(&link->ctrl_out->enable.v, 0, memory_order_release);
	atomic_store(&link->enabled, false);
	atomic_store(&link->up, false);
	atomic_store(&link->peer_epoch, 0);
	atomic_store(&link->peer_silent, false);
	if (locked == 0)
		side_unlock(link->local);
	return 0;
}

int ntb_link_atfork_child(struct ntb_link *link)
{
	if (!link)
		return -EINVAL;
	if (link->inspect || owns_slot(link))
		return 0;
	link->slot = -1;
	struct ntb_side_local *l = link->local;
	int rc = side_lock(l);
	if (rc)
		return rc;
	int live = side_reap(l, NULL);
	if (atomic_load_explicit(&l->session_epoch, memory_order_relaxed) != link->epoch) {
		/* Our side restarted between the fork and now: this handle is stale. */
		side_unlock(l);
		ntb_set_detail("link %s: side %d restarted since the fork", link->params.name,
			       link->side);
		return -ESTALE;
	}
	/* Join the session (never start a new one: the epoch must stay). */
	rc = side_claim_locked(link, l, live > 0 ? live : 1);
	if (rc == 0 && atomic_load(&link->enabled))
		atomic_store_explicit(&l->slots[link->slot].enabled, 1, memory_order_relaxed);
	side_unlock(l);
	if (rc)
		ntb_set_detail("link %s: side %d has all %d slots in use", link->params.name,
			       link->side, NTB_SIDE_SLOTS);
	return rc;
}

/* --- the host's record of the peer's heartbeat (side_local.peer_hb_seen) ----------------------
 * Sound for NTB_PEER_DEAD because each heartbeat value is written once (the peer side's hb_seq
 * only grows) and the record's time is read after the value was: when the peer's word still
 * holds the recorded value, the peer has not written since before that time. A record whose
 * time is later than it might be (a slow observer, the CAS race below) only makes the heartbeat
 * look younger: the caller waits, as it did before there was a record. */

static uint32_t mono_ms31(void)
{
	return (uint32_t)(clock_mono_ns() / 1000000u) & 0x7fffffffu;
}

/* Record that a process of this host saw heartbeat value HB (CHANGED: replacing another value
 * it had seen), unless the record already holds it as well. */
static void hb_record(struct ntb_link *link, uint32_t hb, bool changed)
{
	_Atomic uint64_t *w = &link->local->peer_hb_seen;
	uint64_t old = atomic_load_explicit(w, memory_order_relaxed);

	if (link->inspect)
		return; /* (a read-only look: `ntbsock check` of the other side's file) */
	if (old && NTB_HB_SEEN_VALUE(old) == hb && (NTB_HB_SEEN_CHANGED(old) || !changed))
		return;
	/* (the time after the caller's load of HB; a lost CAS leaves a record as good) */
	atomic_compare_exchange_strong_explicit(w, &old, NTB_HB_SEEN(hb, changed, mono_ms31()),
						memory_order_relaxed, memory_order_relaxed);
}

/* Milliseconds since REC's sighting (mod 2^31: a record older than 24 days looks young). */
static uint32_t hb_record_age_ms(uint64_t rec)
{
	return (mono_ms31() - NTB_HB_SEEN_MS(rec)) & 0x7fffffffu;
}

uint32_t ntb_link_dead_ms(const struct ntb_link *link)
{
	uint32_t ms = link->params.link_timeout_ms * 2u;
	return ms < 1000u ? 1000u : ms;
}

static void observe_peer(struct ntb_link *link, uint64_t now)
{
	struct ntb_ctrl_page *c = link->ctrl_in;
	/* Acquire: pairs with the release store of the heartbeat in write_heartbeat(). */
	uint32_t hb = atomic_load_explicit(&c->heartbeat.v, memory_order_acquire);
	if (hb != atomic_load_explicit(&link->peer_hb_last, memory_order_relaxed)) {
		atomic_store_explicit(&link->peer_hb_last, hb, memory_order_relaxed);
		atomic_store_explicit(&link->peer_hb_change_ns, now, memory_order_relaxed);
		hb_record(link, hb, true);
	} else if (!atomic_load_explicit(&link->peer_hb_change_ns, memory_order_relaxed)) {
		/* No change seen by this handle yet: one that another process of this host saw
		 * counts the same (a new process finds a live link up at once). */
		uint64_t rec = atomic_load_explicit(&link->local->peer_hb_seen, memory_order_relaxed);
		uint64_t age = rec ? (uint64_t)hb_record_age_ms(rec) * 1000000u : 0;
		if (rec && NTB_HB_SEEN_VALUE(rec) == hb && NTB_HB_SEEN_CHANGED(rec) &&
		    age <= link->timeout_ns && age < now) {
			uint64_t zero = 0;
			atomic_compare_exchange_strong_explicit(&link->peer_hb_change_ns, &zero,
								now - age, memory_order_relaxed,
								memory_order_relaxed);
		}
	}
	uint64_t changed = atomic_load_explicit(&link->peer_hb_change_ns, memory_order_relaxed);
	/* Acquire: pairs with the release store of enable in ntb_link_enable(). */
	uint32_t en = atomic_load_explicit(&c->enable.v, memory_order_acquire);
	uint32_t ep = atomic_load_explicit(&c->epoch.v, memory_order_relaxed);
	/* A racing tick may have stored a later `changed` than our `now`: that is fresh too. */
	bool fresh = changed && (now < changed || now - changed <= link->timeout_ns);
	bool ours = link->inspect ? atomic_load_explicit(&link->ctrl_out->enable.v,
							  memory_order_relaxed) == 1
				  : atomic_load_explicit(&link->enabled, memory_order_relaxed);
	/* A mapping that faulted (file truncated) now reads zeros: the link is gone. */
	bool up = ours && en == 1 && ep != 0 && fresh && !mapguard_lost(link->base);
	bool was = atomic_exchange_explicit(&link->up, up, memory_order_relaxed);
	uint32_t old_ep = atomic_exchange_explicit(&link->peer_epoch, up ? ep : 0,
						   memory_order_relaxed);
	if (up)
		atomic_store_explicit(&link->peer_epoch_seen, ep, memory_order_relaxed);
	/* stale heartbeat alone (the peer was up before, with this epoch) */
	bool silent = !up && ours && en == 1 && ep != 0 && changed && !fresh &&
		      ep == atomic_load_explicit(&link->peer_epoch_seen, memory_order_relaxed) &&
		      !mapguard_lost(link->base);
	atomic_store_explicit(&link->peer_silent, silent, memory_order_relaxed);
	if (up != was || (up && ep != old_ep))
		LOG(LL_DEBUG, "ntb: link %s %s (peer epoch %08x)", link->params.name,
		    up ? "up" : "down", ep);
}

bool ntb_link_tick(struct ntb_link *link)
{
	uint64_t now = clock_mono_ns();
	if (atomic_load_explicit(&link->enabled, memory_order_relaxed)) {
		uint64_t due = atomic_load_explicit(&link->local->hb_due_ns, memory_order_relaxed);
		/* One heartbeat per period for the whole side: the CAS winner writes it. */
		if (now >= due &&
		    atomic_compare_exchange_strong_explicit(&link->local->hb_due_ns, &due,
							    now + link->hb_period_ns,
							    memory_order_relaxed,
							    memory_order_relaxed))
			write_heartbeat(link);
	}
	observe_peer(link, now);
	return atomic_load_explicit(&link->up, memory_order_relaxed);
}

bool ntb_link_is_up(struct ntb_link *link)
{
	return ntb_link_tick(link);
}

int ntb_link_wait_up(struct ntb_link *link, int timeout_ms)
{
	uint64_t start = clock_mono_ns();
	for (;;) {
		if (ntb_link_tick(link))
			return 0;
		uint64_t el = clock_mono_ns() - start;
		if (timeout_ms >= 0 && el >= (uint64_t)timeout_ms * 1000000u)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 5000000 };
		if (nanosleep(&ts, NULL) && errno == EINTR)
			return -EINTR;
	}
}

enum ntb_peer_state ntb_link_peer_state(struct ntb_link *link)
{
	struct ntb_ctrl_page *c = link->ctrl_in;

	if (ntb_link_tick(link))
		return NTB_PEER_UP;
	if (mapguard_lost(link->base))
		return NTB_PEER_ABSENT;
	/* Acquire: pairs with the release store of the heartbeat in write_heartbeat(): the wall
	 * stamp read below is the one stored with this value or a later one. */
	uint32_t hb = atomic_load_explicit(&c->heartbeat.v, memory_order_acquire);
	if (atomic_load_explicit(&c->enable.v, memory_order_relaxed) != 1 ||
	    atomic_load_explicit(&c->epoch.v, memory_order_relaxed) == 0)
		return NTB_PEER_ABSENT;
	uint32_t wall = atomic_load_explicit(&c->hb_wall.v, memory_order_relaxed);
	uint64_t rec = atomic_load_explicit(&link->local->peer_hb_seen, memory_order_relaxed);
	uint32_t dead_ms = ntb_link_dead_ms(link);
	if (rec && NTB_HB_SEEN_VALUE(rec) == hb) {
		if (hb_record_age_ms(rec) >= dead_ms)
			return NTB_PEER_DEAD; /* standing still since this host first saw it */
		if (NTB_HB_SEEN_CHANGED(rec))
			return NTB_PEER_UNKNOWN; /* it moved recently */
	} else if (rec && hb_record_age_ms(rec) < dead_ms) {
		return NTB_PEER_UNKNOWN; /* moved since a recent sighting */
	}
	/* No sighting tells the value's age: the peer's own wall-clock stamp may (hosts of one
	 * link keep their clocks in step; a skewed one makes this guess wrong only until a
	 * process of this host has seen the heartbeat move, which takes one heartbeat_ms). */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int32_t behind_s = (int32_t)((uint32_t)now.tv_sec - wall);
	if (wall && behind_s > (int32_t)((dead_ms + 999u) / 1000u) + NTB_WALL_SLACK_S)
		return NTB_PEER_DEAD;
	return NTB_PEER_UNKNOWN;
}

int ntb_link_wait_peer(struct ntb_link *link, int timeout_ms)
{
	uint64_t start = clock_mono_ns();
	for (;;) {
		enum ntb_peer_state st = ntb_link_peer_state(link);
		if (st == NTB_PEER_UP)
			return 0;
		if (st == NTB_PEER_ABSENT || st == NTB_PEER_DEAD)
			return -EHOSTDOWN;
		uint64_t el = clock_mono_ns() - start;
		if (timeout_ms >= 0 && el >= (uint64_t)timeout_ms * 1000000u)
			return -ETIMEDOUT;
		/* (a live peer's heartbeat moves every heartbeat_ms: look often enough to see it
		 * within a small part of that) */
		struct timespec ts = { 0, 1000000 };
		if (nanosleep(&ts, NULL) && errno == EINTR)
			return -EINTR;
	}
}

int ntb_link_side(const struct ntb_link *link)
{
	return link->side;
}

uint32_t ntb_link_epoch(const struct ntb_link *link)
{
	return link->epoch;
}

bool ntb_link_peer_silent(const struct ntb_link *link)
{
	return atomic_load_explicit(&link->peer_silent, memory_order_relaxed);
}

int64_t ntb_link_peer_hb_age_ms(const struct ntb_link *link)
{
	uint64_t changed = atomic_load_explicit(&link->peer_hb_change_ns, memory_order_relaxed);
	uint64_t now = clock_mono_ns();

	return changed ? (int64_t)((now > changed ? now - changed : 0) / 1000000u) : -1;
}

uint32_t ntb_link_heartbeat_ms(const struct ntb_link *link)
{
	return link->params.heartbeat_ms;
}

uint32_t ntb_link_peer_epoch(const struct ntb_link *link)
{
	return atomic_load_explicit(&link->peer_epoch, memory_order_relaxed);
}

const char *ntb_link_name(const struct ntb_link *link)
{
	return link->params.name;
}

const char *ntb_link_backend(const struct ntb_link *link)
{
	return link->params.backend;
}

int ntb_link_info(struct ntb_link *link, struct ntb_link_info *ret)
{
	if (!link || !ret)
		return -EINVAL;
	struct ntb_link_info info;
	memset(&info, 0, sizeof(info));
	info.up = ntb_link_tick(link);
	snprintf(info.backend, sizeof(info.backend), "%s", link->params.backend);
	info.side = link->side;
	info.window_size = link->win_size;
	info.region_size = link->hdr.region_size;
	info.map_size = link->map_size;
	info.enabled = link->inspect ? atomic_load(&link->ctrl_out->enable.v) == 1
				     : atomic_load(&link->enabled);
	info.epoch = link->inspect ? atomic_load(&link->local->session_epoch) : link->epoch;
	info.peer_epoch = atomic_load(&link->peer_epoch);
	info.peer_enabled = atomic_load(&link->ctrl_in->enable.v) == 1;
	info.peer_epoch_word = atomic_load(&link->ctrl_in->epoch.v);
	info.peer_heartbeat = atomic_load(&link->peer_hb_last);
	uint64_t changed = atomic_load(&link->peer_hb_change_ns), now = clock_mono_ns();
	info.peer_hb_age_ms = changed ? (int64_t)((now > changed ? now - changed : 0) / 1000000u)
				      : -1;
	for (int s = 0; s < 2; s++) {
		struct ntb_side_local *l = local_of(link, s);
		for (int i = 0; i < NTB_SIDE_SLOTS; i++)
			if (atomic_load_explicit(&l->slots[i].owner, memory_order_relaxed))
				info.claims[s]++;
	}
	snprintf(info.location, sizeof(info.location), "%s",
		 link->ops->location ? link->ops->location(link) : "");
	*ret = info;
	return 0;
}

/* --- doorbells -------------------------------------------------------------------------------- */

int ntb_peer_db_ring(struct ntb_link *link)
{
	if (link->inspect)
		return -EPERM;
	if (ctrl_cut(link))
		return 0; /* rung into the void, as across a cut cable */
	uint32_t v = atomic_fetch_add_explicit(&link->local->db_seq, 1, memory_order_relaxed) + 1;
	/* Release: window writes before the doorbell; pairs with the acquire in ntb_db_read(). */
	atomic_store_explicit(&link->ctrl_out->doorbell.v, v, memory_order_release);
	if (link->ops->db_wake)
		link->ops->db_wake(link, &link->ctrl_out->doorbell.v);
	return 0;
}

uint32_t ntb_db_read(const struct ntb_link *link)
{
	/* Acquire: pairs with the release store in the peer's ntb_peer_db_ring(). */
	return atomic_load_explicit(&link->ctrl_in->doorbell.v, memory_order_acquire);
}

int ntb_db_wait(struct ntb_link *link, uint32_t seen, int timeout_ms)
{
	_Atomic uint32_t *db = &link->ctrl_in->doorbell.v;
	uint64_t start = clock_mono_ns();
	int rc;

	if (!link->inspect)
		/* seq_cst: the waiter half of the Dekker pair with the ringer's fence + load of
		 * db_waiters in the shm backend's db_wake (increment, then re-read the word). */
		atomic_fetch_add_explicit(&link->local->db_waiters, 1, memory_order_seq_cst);
	for (;;) {
		if (atomic_load_explicit(db, memory_order_seq_cst) != seen) {
			rc = 0;
			break;
		}
		if (!ntb_link_tick(link)) {
			rc = -ENOLINK;
			break;
		}
		/* Sleep at most half a heartbeat so our own heartbeat (written by the tick above)
		 * keeps its period while we wait. */
		int slice = (int)(link->params.heartbeat_ms + 1) / 2;
		if (timeout_ms >= 0) {
			uint64_t el = (clock_mono_ns() - start) / 1000000u;
			if (el >= (uint64_t)timeout_ms) {
				rc = -ETIMEDOUT;
				break;
			}
			if ((uint64_t)slice > timeout_ms - el)
				slice = (int)(timeout_ms - el);
		}
		/* relaxed: written before enable (release) and read after observe_peer()'s
		 * acquire of enable in the tick above; a stale reading only polls */
		bool peer_wakes = atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed) &
				  (NTB_CAP_FUTEX_WAKE | NTB_CAP_EVENT_DB);
		if (link->ops->db_wait_slice && peer_wakes) {
			rc = link->ops->db_wait_slice(link, db, seen, slice);
		} else {
			/* The peer cannot wake us (pci): poll in short slices. */
			struct timespec ts = { 0, 1000000 };
			rc = nanosleep(&ts, NULL) && errno == EINTR ? -EINTR : 0;
		}
		if (rc == -EINTR)
			break;
	}
	if (!link->inspect)
		atomic_fetch_sub_explicit(&link->local->db_waiters, 1, memory_order_relaxed);
	return rc;
}

/* One entry of futex_waitv(2) (the kernel's struct futex_waitv, not in every libc's headers). */
struct db_waitv {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};
#define DB_FUTEX_32       2u   /* FUTEX2_SIZE_U32 */
#define DB_FUTEX_PRIVATE  128u /* FUTEX2_PRIVATE */
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

static _Atomic bool db_waitv_missing; /* the kernel has no futex_waitv (before 5.16) */

int ntb_db_wait_many(struct ntb_link *const *links, const uint32_t *seen, unsigned n,
		     const _Atomic uint32_t *kick, uint32_t kick_seen, int timeout_ms)
{
	struct db_waitv w[NTB_DB_WAIT_MAX + 1];
	int slice = timeout_ms < 0 ? INT_MAX : timeout_ms, rc = 0;
	unsigned i;

	if (n > NTB_DB_WAIT_MAX || atomic_load_explicit(&db_waitv_missing, memory_order_relaxed))
		return -ENOTSUP;
	for (i = 0; i < n; i++)
		if (links[i]->inspect || !(links[i]->caps & NTB_CAP_FUTEX_WAKE))
			return -ENOTSUP; /* its doorbell is no futex word of ours (pci: polled) */
	for (i = 0; i < n; i++)
		/* seq_cst: the waiter half of the Dekker pair with the ringer's fence + load of
		 * db_waiters in shm_db_wake(), as in ntb_db_wait() (count, then re-read) */
		atomic_fetch_add_explicit(&links[i]->local->db_waiters, 1, memory_order_seq_cst);
	for (i = 0; i < n; i++) {
		struct ntb_link *link = links[i];
		_Atomic uint32_t *db = &link->ctrl_in->doorbell.v;

		if (atomic_load_explicit(db, memory_order_seq_cst) != seen[i])
			goto out; /* rung already */
		bool up = ntb_link_tick(link);
		/* relaxed, as in ntb_db_wait(): a stale reading only polls */
		bool peer_wakes = atomic_load_explicit(&link->ctrl_in->caps.v,
						       memory_order_relaxed) & NTB_CAP_FUTEX_WAKE;
		int hb = (int)(link->params.heartbeat_ms + 1) / 2; /* our heartbeat keeps its period */

		if (up && !peer_wakes) {
			if (ntb_db_fd(link) >= 0) {
				rc = -ENOTSUP; /* it rings our eventfd (ivshmem): ntb_db_wait() */
				goto out;
			}
			if (slice > 1)
				slice = 1; /* a peer that cannot wake us (pci) is polled, as
					    * ntb_db_wait() does */
		}
		if (slice > hb)
			slice = hb;
		w[i] = (struct db_waitv){ .val = seen[i], .uaddr = (uintptr_t)db,
					  .flags = DB_FUTEX_32 }; /* shared: the peer's processes */
	}
	if (kick) {
		/* acquire: pairs with the kicker's release increment */
		if (atomic_load_explicit(kick, memory_order_acquire) != kick_seen)
			goto out;
		w[i++] = (struct db_waitv){ .val = kick_seen, .uaddr = (uintptr_t)kick,
					    .flags = DB_FUTEX_32 | DB_FUTEX_PRIVATE };
	}
	if (!i || slice <= 0)
		goto out;
	struct timespec abs;

	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_sec += slice / 1000;
	abs.tv_nsec += (long)(slice % 1000) * 1000000L;
	if (abs.tv_nsec >= 1000000000L) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000L;
	}
	/* As FUTEX_WAIT for each word: the kernel compares each with its value and sleeps
	 * atomically, so a ring stored after our re-read above is either seen (EAGAIN) or followed
	 * by its FUTEX_WAKE (we counted ourselves in db_waiters first). */
	if (syscall(SYS_futex_waitv, w, i, 0, &abs, CLOCK_MONOTONIC) < 0) {
		if (errno == EINTR)
			rc = -EINTR;
		else if (errno == ENOSYS) {
			atomic_store_explicit(&db_waitv_missing, true, memory_order_relaxed);
			rc = -ENOTSUP;
		} else if (errno == EFAULT) {
			rc = -ENOTSUP; /* a doorbell the kernel cannot read (a mapping gone bad): the
					* caller's ntb_db_wait() sleeps its slice instead of spinning */
		}
		/* else EAGAIN (a word moved), ETIMEDOUT (slice over): the caller looks */
	}
out:
	for (i = 0; i < n; i++)
		atomic_fetch_sub_explicit(&links[i]->local->db_waiters, 1, memory_order_relaxed);
	return rc;
}

int ntb_db_fd(const struct ntb_link *link)
{
	return link->ops->db_fd ? link->ops->db_fd(link) : -ENOTSUP;
}

int ntb_evfd_wait_slice(int fd, _Atomic uint32_t *db, uint32_t seen, int slice_ms)
{
	uint64_t count;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	/* Drain first, then look: a ring after the drain leaves the fd readable, so the poll
	 * below cannot miss it (the eventfd is level-triggered). */
	while (raw_read(fd, &count, sizeof(count)) == (long)sizeof(count))
		;
	/* acquire: pairs with the peer's release store of the doorbell in its ring */
	if (atomic_load_explicit(db, memory_order_acquire) != seen)
		return 0;
	if (raw_poll(&pfd, 1, slice_ms) < 0 && errno == EINTR)
		return -EINTR;
	return 0;
}

uint32_t ntb_peer_db_target(const struct ntb_link *link)
{
	/* relaxed: both written by the peer before its enable (release), read after
	 * observe_peer()'s acquire of enable; a stale reading rings a stale id (ignored by the
	 * device) or none, and the peer's waiter then wakes on its timer */
	if (!(atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed) & NTB_CAP_EVENT_DB))
		return 0;
	uint32_t id = atomic_load_explicit(&link->ctrl_in->db_id.v, memory_order_relaxed);
	return id <= 65536 ? id : 0; /* untrusted: ivshmem ids are 16 bits */
}

bool ntb_db_event_mine(const struct ntb_link *link)
{
	return link->db_id != 0 &&
	       (atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed) &
		NTB_CAP_EVENT_DB) &&
	       atomic_load_explicit(&link->local->db_owner, memory_order_relaxed) == link->db_id;
}

/* --- scratchpads ------------------------------------------------------------------------------ */

int ntb_spad_count(const struct ntb_link *link)
{
	(void)link;
	return NTB_SPAD_COUNT;
}

int ntb_spad_read(const struct ntb_link *link, int idx, uint32_t *ret_val)
{
	if (idx < 0 || idx >= NTB_SPAD_COUNT || !ret_val)
		return -EINVAL;
	/* Acquire: pairs with the release in the peer's ntb_peer_spad_write(). */
	*ret_val = atomic_load_explicit(&link->ctrl_in->spad[idx].v, memory_order_acquire);
	return 0;
}

int ntb_peer_spad_write(struct ntb_link *link, int idx, uint32_t val)
{
	if (idx < 0 || idx >= NTB_SPAD_COUNT)
		return -EINVAL;
	if (link->inspect)
		return -EPERM;
	if (ctrl_cut(link))
		return 0;
	/* Release: earlier writes before the scratchpad; pairs with ntb_spad_read(). */
	atomic_store_explicit(&link->ctrl_out->spad[idx].v, val, memory_order_release);
	return 0;
}

void ntb_fault_stats(const struct ntb_link *link, struct ntb_fault_stats *ret_stats)
{
	if (link->fault)
		ntb_fault_get_stats(link->fault, ret_stats);
	else
		memset(ret_stats, 0, sizeof(*ret_stats));
}
