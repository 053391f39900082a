/* SPDX-License-Identifier: MIT */
/* Doorbells: ring the peer, read and wait for ours (futex, futex_waitv over several links, or
 * an interrupt eventfd). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "ntb/ntb_int.h"
#include "util/log.h"
#include "util/rawsys.h"

/* --- doorbells -------------------------------------------------------------------------------- */

int ntb_peer_db_ring(struct ntb_link *link)
{
	if (link->inspect)
		return -EPERM;
	if (ntb_ctrl_cut(link))
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
	return ntb_db_wait_us(link, seen, timeout_ms < 0 ? -1 : (long)timeout_ms * 1000L);
}

/* A waiter of LINK counts itself (D = 1) in its side's db_waiters, which the peer's ringers
 * read (seq_cst: the waiter half of the Dekker pair with the ringer's fence + load in the shm
 * backend's db_wake: count, then re-read the word), and in its process's slot, or uncounts
 * itself (D = -1, relaxed). */
static void waiter_count(struct ntb_link *link, int d)
{
	struct ntb_side_slot *s = link->slot >= 0 ? &link->local->slots[link->slot] : NULL;

	if (d > 0) {
		if (s) /* (first: a reaper never takes back more than was counted) */
			atomic_fetch_add_explicit(&s->waiting, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&link->local->db_waiters, 1, memory_order_seq_cst);
	} else {
		atomic_fetch_sub_explicit(&link->local->db_waiters, 1, memory_order_relaxed);
		if (s)
			atomic_fetch_sub_explicit(&s->waiting, 1, memory_order_relaxed);
	}
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

/* Sleep on the doorbell and a second word W2 (the direct doorbell, a window word) together for
 * SLICE_US: 0 (moved, woken, or slice over), -EINTR, or -ENOTSUP (no futex_waitv, or a word the
 * kernel cannot read). */
static int wait_both(struct ntb_link *link, uint32_t seen, const _Atomic uint32_t *w2,
		     uint32_t seen2, long slice_us)
{
	struct db_waitv w[2] = {
		{ .val = seen, .uaddr = (uintptr_t)&link->ctrl_in->doorbell.v, .flags = DB_FUTEX_32 },
		{ .val = seen2, .uaddr = (uintptr_t)w2, .flags = DB_FUTEX_32 },
	};
	struct timespec abs;

	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_sec += slice_us / 1000000L;
	abs.tv_nsec += (slice_us % 1000000L) * 1000L;
	if (abs.tv_nsec >= 1000000000L) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000L;
	}
	/* (as in ntb_db_wait_many(): each word compared and slept on atomically) */
	if (syscall(SYS_futex_waitv, w, 2, 0, &abs, CLOCK_MONOTONIC) < 0) {
		if (errno == EINTR)
			return -EINTR;
		if (errno == EFAULT)
			return -ENOTSUP; /* (a mapping gone bad, as in ntb_db_wait_many()) */
		if (errno != EAGAIN && errno != ETIMEDOUT) {
			/* ENOSYS (before 5.16), EPERM (a seccomp filter), EINVAL: never again in
			 * this process (returned as a wake-up, the caller would spin) */
			atomic_store_explicit(&db_waitv_missing, true, memory_order_relaxed);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* ntb_db_wait_us(), and with W2 (the direct doorbell, a window word) that word too, while it
 * reads SEEN2. */
static int db_wait(struct ntb_link *link, uint32_t seen, const _Atomic uint32_t *w2,
		   uint32_t seen2, long timeout_us)
{
	_Atomic uint32_t *db = &link->ctrl_in->doorbell.v;
	uint64_t start = clock_mono_ns();
	int rc;
	if (!link->inspect)
		waiter_count(link, 1);
	for (;;) {
		if (atomic_load_explicit(db, memory_order_seq_cst) != seen ||
		    (w2 && atomic_load_explicit(w2, memory_order_seq_cst) != seen2)) {
			rc = 0;
			break;
		}
		if (!ntb_link_tick(link)) {
			rc = -ENOLINK;
			break;
		}
		/* Sleep at most half a heartbeat so our own heartbeat (written by the tick above)
		 * keeps its period while we wait. */
		long slice = (long)(link->params.heartbeat_ms + 1) / 2 * 1000L;
		if (timeout_us >= 0) {
			uint64_t el = (clock_mono_ns() - start) / 1000u;
			if (el >= (uint64_t)timeout_us) {
				rc = -ETIMEDOUT;
				break;
			}
			if ((uint64_t)slice > (uint64_t)timeout_us - el)
				slice = (long)((uint64_t)timeout_us - el);
		}
		/* relaxed: written before enable (release) and read after observe_peer()'s
		 * acquire of enable in the tick above; a stale reading only polls */
		uint32_t caps = atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed);
		bool peer_wakes = caps & (NTB_CAP_FUTEX_WAKE | NTB_CAP_EVENT_DB);
		rc = -ENOTSUP;
		if (w2 && (caps & NTB_CAP_FUTEX_WAKE) &&
		    !atomic_load_explicit(&db_waitv_missing, memory_order_relaxed))
			rc = wait_both(link, seen, w2, seen2, slice);
		if (rc != -ENOTSUP) {
			/* (slept on both) */
		} else if (w2) {
			/* the peer may wake the second word, which one futex wait would not see:
			 * polled (1 ms at most), until the caller asks for the doorbell */
			struct timespec ts = { 0, (slice < 1000 ? slice : 1000) * 1000L };
			rc = nanosleep(&ts, NULL) && errno == EINTR ? -EINTR : 0;
		} else if (link->ops->db_wait_slice && peer_wakes) {
			rc = link->ops->db_wait_slice(link, db, seen, (int)slice);
		} else {
			/* The peer cannot wake us (pci): poll in short slices (1 ms at most). */
			struct timespec ts = { 0, (slice < 1000 ? slice : 1000) * 1000L };
			rc = nanosleep(&ts, NULL) && errno == EINTR ? -EINTR : 0;
		}
		if (rc == -EINTR)
			break;
	}
	if (!link->inspect)
		waiter_count(link, -1);
	return rc;
}

int ntb_db_wait_us(struct ntb_link *link, uint32_t seen, long timeout_us)
{
	return db_wait(link, seen, NULL, 0, timeout_us);
}

/* --- the direct doorbell (ntb_int.h) ---------------------------------------------------------- */

bool ntb_db_direct_ok(const struct ntb_link *link)
{
	/* relaxed: as in db_wait() (a stale reading only has the peer ring the doorbell) */
	const uint32_t both = NTB_CAP_FUTEX_WAKE | NTB_CAP_DB_DIRECT;

	return !link->inspect && (link->caps & NTB_CAP_FUTEX_WAKE) &&
	       (atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed) & both) ==
		       both &&
	       !ntb_db_event_mine(link) &&
	       !atomic_load_explicit(&db_waitv_missing, memory_order_relaxed);
}

int ntb_peer_db_ring_direct(struct ntb_link *link)
{
	if (link->inspect)
		return -EPERM;
	/* (a peer that takes interrupts, or a side whose ring wakes no futex: the doorbell) */
	if (!(link->caps & NTB_CAP_FUTEX_WAKE) || !link->ops->db_wake ||
	    ntb_peer_db_target(link))
		return ntb_peer_db_ring(link);
	if (ntb_ctrl_cut(link))
		return 0;
	uint32_t v = atomic_fetch_add_explicit(&link->local->db_seq, 1, memory_order_relaxed) + 1;
	/* Release: window writes before the ring; pairs with the acquire in ntb_db_direct_read()
	 * (and the waiter's seq_cst re-read in db_wait()). */
	atomic_store_explicit(&link->ctrl_out->db_direct.v, v, memory_order_release);
	link->ops->db_wake(link, &link->ctrl_out->db_direct.v);
	return 0;
}

uint32_t ntb_db_direct_read(const struct ntb_link *link)
{
	/* Acquire: pairs with the release store in the peer's ntb_peer_db_ring_direct(). */
	return atomic_load_explicit(&link->ctrl_in->db_direct.v, memory_order_acquire);
}

int ntb_db_wait_direct_us(struct ntb_link *link, uint32_t seen, uint32_t seen_direct,
			  long timeout_us)
{
	return db_wait(link, seen, &link->ctrl_in->db_direct.v, seen_direct, timeout_us);
}

/* --- the word wake (ntb_int.h) ---------------------------------------------------------------- */

bool ntb_word_wake_ok(const struct ntb_link *link)
{
	/* relaxed: as in ntb_db_direct_ok() (a stale reading only has the peer ring the direct
	 * doorbell, which the waiter does not sleep on: its slice and the doorbell bound it) */
	return ntb_db_direct_ok(link) &&
	       (atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed) &
		NTB_CAP_WORD_WAKE);
}

/* The 32-bit word at OFF of our inbound window as a futex word, NULL outside the window. */
static const _Atomic uint32_t *in_word(const struct ntb_link *link, uint64_t off)
{
	if (!link->in || off % 4u || off > link->win_size || 4u > link->win_size - off)
		return NULL;
	return (const _Atomic uint32_t *)(const void *)(link->in + off);
}

uint32_t ntb_word_read(const struct ntb_link *link, uint64_t off)
{
	const _Atomic uint32_t *w = in_word(link, off);

	/* Acquire: the peer stores the word after what it publishes (its fence) */
	return w ? atomic_load_explicit(w, memory_order_acquire) : 0;
}

int ntb_peer_word_wake(struct ntb_link *link, uint64_t off)
{
	if (link->inspect)
		return -EPERM;
	/* (a peer that takes interrupts, a side whose ring wakes no futex, a word outside the
	 * window: the doorbell, which a sleeper on the word sleeps on too; a backend that writes
	 * through a call, the speed model, still stores into the mapping) */
	if (!(link->caps & NTB_CAP_FUTEX_WAKE) || !link->ops->db_wake || !link->out ||
	    ntb_peer_db_target(link) || off % 4u || off > link->out_size ||
	    4u > link->out_size - off)
		return ntb_peer_db_ring(link);
	if (ntb_ctrl_cut(link))
		return 0;
	/* the caller stored the word; db_wake's fence orders that store before its load of the
	 * peer's db_waiters, which a sleeper raises before its re-read (db_wait()) */
	link->ops->db_wake(link, (_Atomic uint32_t *)(void *)(link->out + off));
	return 0;
}

int ntb_db_wait_word_us(struct ntb_link *link, uint32_t seen, uint64_t off, uint32_t seen_word,
			long timeout_us)
{
	const _Atomic uint32_t *w = in_word(link, off);

	return w ? db_wait(link, seen, w, seen_word, timeout_us) :
		   db_wait(link, seen, NULL, 0, timeout_us);
}

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
		waiter_count(links[i], 1); /* (as in ntb_db_wait(): count, then re-read) */
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
		else if (errno != EAGAIN && errno != ETIMEDOUT && errno != EFAULT) {
			/* ENOSYS (before 5.16), EPERM (a seccomp filter), EINVAL: as 0, the
			 * helper would spin */
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
		waiter_count(links[i], -1);
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
