/* SPDX-License-Identifier: MIT */
/* ntb/ — the link layer: one link joins this host to one peer host through two memory windows,
 * doorbells, scratchpads and a link state, in the vocabulary of Linux's include/linux/ntb.h.
 *
 * Rules (doc/design.md §3): never read the outbound window; every polled word lives in the inbound
 * window or our inbound control page; one writer per shared word; payload, barrier, then the
 * word that publishes it; everything read from inbound memory is untrusted.
 *
 * Functions return 0, a count, or a negative errno; none touches errno. No function here
 * reads the environment or a config file: the caller fills struct ntb_link_params. */
#ifndef NTBSOCK_NTB_H
#define NTBSOCK_NTB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NTB_NAME_MAX     63
#define NTB_PATH_MAX     255
#define NTB_SPAD_COUNT   16
#define NTB_BACKEND_NAME_MAX 15

/* Fault injection on outbound-window writes (the `fault` decorator). Rates in [0,1].
 * The cut: once CUT_AFTER bytes have been offered to the decorator (the write that would take
 * the count past it is dropped whole), or CUT_AFTER_MS after the decorator's first window
 * write, the link is cut for good: every later window write of this handle is dropped, and so
 * are its writes to the peer's control page (heartbeat, enable, epoch, doorbells, scratchpads):
 * the peer sees this side's heartbeat stop and its link goes down after link_timeout_ms. Only
 * this handle's writes stop; another process's handle of the same side keeps writing. */
struct ntb_fault_params {
	bool     enabled;
	double   drop;     /* probability a window write is silently skipped */
	double   corrupt;  /* probability a window write lands with one bit flipped */
	uint32_t delay_us; /* each window write is delayed by up to this many µs (0: none) */
	uint64_t seed;     /* same seed + same write sequence → same faults */
	uint64_t cut_after;    /* cut once this many window bytes were written (0: never) */
	uint32_t cut_after_ms; /* cut this long after the first window write (0: never) */
};

/* An emulated link speed (shm backend only; all zero: off, the default). Every window write of
 * this host's processes on the link takes LEN / BANDWIDTH seconds of one shared link clock (the
 * writer waits for its turn and its bytes); the first ntb_to_peer_barrier() after writes waits
 * LATENCY_NS more, so a publication reaches the peer one latency after its payload. A real
 * posted write does not stall its writer for the latency: for a stream of messages the model
 * is pessimistic by one latency per publication. */
struct ntb_speed_params {
	uint64_t bandwidth;  /* bytes per second; 0: unlimited */
	uint32_t latency_ns; /* one-way; 0: none */
};

struct ntb_link_params {
	char             name[NTB_NAME_MAX + 1];
	char             backend[NTB_BACKEND_NAME_MAX + 1]; /* a name ntb_backend_name() lists */
	int              side;          /* 0 or 1; -1: claim a free side (shm only) */
	size_t           window_size;   /* bytes per direction; a multiple of 4096; 0: accept an
					 * existing region's (never creates) */
	/* shm */
	char             path[NTB_PATH_MAX + 1]; /* "" → /dev/shm/ntbsock-<name> */
	mode_t           mode;          /* creation mode, 0 → 0600 */
	gid_t            group;         /* (gid_t)-1 → leave as created */
	bool             allow_foreign_owner; /* accept a file owned by another uid */
	/* the UNIX socket of an ivshmem server sharing this file with QEMU ivshmem-doorbell
	 * devices: join it as a peer for interrupt doorbells ("" → none) */
	char             ivshmem_server[NTB_PATH_MAX + 1];
	/* pci */
	char             device[NTB_NAME_MAX + 1]; /* "0000:00:04.0", "1af4:1110" or "class:0500" */
	int              bar;           /* -1 → the profile's default (ivshmem: 2) */
	/* both: use interrupt doorbells where there are some (default true) */
	bool             doorbell;
	/* link state */
	uint32_t         heartbeat_ms;  /* 0 → 100 */
	uint32_t         link_timeout_ms; /* peer silent this long → down; 0 → 500 */
	struct ntb_fault_params fault;
	struct ntb_speed_params speed;  /* shm only; zeroes: not modelled */
	/* Map and read the link state only (e.g. `ntbsock check`): no create, no claim,
	 * no writes at all, enable and window writes fail; side -1 → 0. Does not disturb a live
	 * link. */
	bool             inspect_only;
};

/* Fill P with defaults (backend "shm", side -1, 16 MiB windows, mode 0600, heartbeat 100 ms,
 * timeout 500 ms). */
void ntb_link_params_init(struct ntb_link_params *p);

/* The backends this build has (ntb/backend/backends.c): the name of the I-th, NULL past the
 * last. ntb_backend_known(): is NAME one of them? */
const char *ntb_backend_name(int i);
bool ntb_backend_known(const char *name);

struct ntb_link;

/* The emulated link's backlog: how far its clock runs ahead of now (writes queued on the link,
 * in ns), and the queue a writer may run ahead by before it waits (SPEED_AHEAD_BYTES' time).
 * False when the link has no modelled bandwidth. */
bool ntb_speed_backlog(struct ntb_link *link, uint64_t *ret_backlog_ns, uint64_t *ret_ahead_ns);

/* Open (and for shm, create if absent) the link described by P. The region header is
 * validated: a foreign, truncated or mismatched region is -EPROTO/-EINVAL/-EEXIST, never
 * mapped blindly. The link starts disabled (ntb_link_enable()).
 * Also: -EPROTONOSUPPORT (region version), -EMSGSIZE (window size differs from P's; 0 in P
 * accepts any), -EAGAIN (region all zero and we are side 1: side 0 initialises it), -EPERM
 * (shm file owned by another uid), -ELOOP (symlink), -EBUSY (side -1, both sides live).
 * -EINVAL also when P->backend names no backend of this build.
 * ntb_strerror_detail() says why in one line. Several processes may open the same side (all
 * processes of one host share it); they share the side's session epoch (see ntb_int.h).
 * All functions but open/close/atfork may be called from several threads on one handle;
 * struct ntb_dmaq is single-owner. */
int ntb_link_open(const struct ntb_link_params *p, struct ntb_link **ret_link);

/* Announce link down to the peer, release our side, unmap. Accepts NULL. */
void ntb_link_close(struct ntb_link *link);

/* Call in a forked child that keeps using LINK (the handle is inherited, the claim on
 * the side is not): claims a slot for the child in the same session, so the side stays alive
 * (same epoch) when the parent exits. 0, -EUSERS (no free slot: the handle still works but
 * does not keep the side alive), -ESTALE (the side restarted meanwhile). Without it, the
 * child's close/disable never touches the parent's claim. */
int ntb_link_atfork_child(struct ntb_link *link);
/* Before an exec that hands nothing of LINK over: give up this process's claim on its side (a
 * claim outlives exec with the pid: kept by a program that never uses the link, it would hold a
 * slot, and the side up for the peer, for that program's life). ntb_link_rejoin() takes one
 * again in the same session if the exec fails: 0, -EUSERS, -ESTALE as above. */
void ntb_link_release_claim(struct ntb_link *link);
int ntb_link_rejoin(struct ntb_link *link);

/* A human-readable last error for open failures ("shm file /dev/shm/x: owned by uid 5"). */
const char *ntb_strerror_detail(void);

/* --- windows ---------------------------------------------------------------------------- */

/* Our inbound window: local memory the peer writes; read only here. */
const volatile void *ntb_in_window(const struct ntb_link *link, size_t *ret_size);

/* Size of the outbound window (the peer's inbound window); never read through. */
size_t ntb_out_size(const struct ntb_link *link);

/* Copy LEN bytes from SRC to outbound offset OFF. -EINVAL when out of bounds.
 * The fault decorator, when enabled, may drop, corrupt or delay the write. */
int ntb_write(struct ntb_link *link, size_t off, const void *src, size_t len);

/* Copy LEN bytes from SRC both to outbound offset OFF and to local memory SHADOW, reading SRC
 * once, and store in *RET_CRC their CRC32C continuing from CRC (util/crc32c.h conventions).
 * The result is that of crc32c_copy(crc, shadow, src, len) then ntb_write(link, off, shadow,
 * len): the shadow always receives the bytes checksummed, the window write goes through the
 * fault decorator like any ntb_write() (one write), and the window is never read. For a
 * sender that keeps a retransmission copy: one pass instead of two (crc32c_copy2()). 0, or the
 * errors of ntb_write() (nothing is copied then). */
int ntb_write_dup_crc(struct ntb_link *link, size_t off, void *shadow, const void *src,
		      size_t len, uint32_t crc, uint32_t *ret_crc);

/* Single aligned stores (OFF must be aligned to the width): used to publish indices and
 * sequence bytes. Also subject to the fault decorator. Relaxed: they order nothing by
 * themselves; a word that publishes writes is preceded by ntb_to_peer_barrier(), one that hands
 * back space it read by ntb_from_peer_barrier(). */
int ntb_write8(struct ntb_link *link, size_t off, uint8_t v);
int ntb_write32(struct ntb_link *link, size_t off, uint32_t v);
int ntb_write64(struct ntb_link *link, size_t off, uint64_t v);

/* Read LEN bytes at outbound offset OFF back into DST: what the peer's memory holds there now.
 * Across a real bridge a slow non-posted read, which PCIe orders after this CPU's earlier
 * posted writes: once it returns, those writes have landed and the peer will read what it
 * read. Never on the data path (rule 1 of doc/design.md §3): a set-up uses it to know that a
 * claim it wrote is in the peer's memory before it lets the TCP handshake complete
 * (transport/tp_offer.c). Write-combining buffers are drained first. -EINVAL out of bounds,
 * -ENOTSUP where the window is not mapped for reading. */
int ntb_read_back(struct ntb_link *link, size_t off, void *dst, size_t len);

/* Order all previous window writes before any later one (payload before publish): a release
 * fence (x86 write-back: no instruction), sfence on a write-combining mapping, the backend's op.
 * Its partner is the peer's acquire load of the word written after it. */
void ntb_to_peer_barrier(struct ntb_link *link);
/* Order all previous reads of our inbound window before any later window write: the write that
 * hands the space read back to the peer (a consumer index), after which the peer overwrites it.
 * Its partner is the peer's acquire load of that index before it writes the space again. A
 * release fence: on x86 (loads are not reordered with later stores, posted writes included) no
 * instruction, only a compiler barrier, so it stays inline on the receive path; on ARM (dmb)
 * and POWER (lwsync) a real fence. (An outbound window mapped as device memory on ARM would
 * want dmb osh, beyond the inner-shareable release fence: a backend op then, as for
 * ntb_to_peer_barrier().) */
static inline void ntb_from_peer_barrier(void)
{
	atomic_thread_fence(memory_order_release);
}
/* The outbound window (ntb_out_size() bytes) as plain write-back memory that the caller may
 * store into directly, the stores reaching the peer in program order (a release fence before
 * a publishing store is all ntb_to_peer_barrier() would do); NULL when writes must go through
 * ntb_write*() (fault decorator, a backend write or barrier op, a write-combining mapping).
 * Fixed for the life of the link. */
uint8_t *ntb_out_direct(struct ntb_link *link);

/* Map the pages of [OFF, OFF + LEN) of the outbound (OUT) or inbound window into this process
 * ahead of use: one system call where each 4 KiB page would fault on first touch (a fresh
 * process's first megabytes through a ring). Best effort: a mapping that cannot be populated
 * (a device's BAR, an old kernel) is left as it is. */
void ntb_prefault(struct ntb_link *link, bool out, uint64_t off, size_t len);

/* The same for LEN bytes of this process's own memory at P (a shadow of a ring), for writing. */
void ntb_prefault_mem(void *p, size_t len);

/* Drain write-combining buffers (sfence on a WC mapping; compiler+store fence on shm). */
void ntb_wc_flush(struct ntb_link *link);

/* --- doorbells ---------------------------------------------------------------------------- */

/* Ring the peer: bump the doorbell counter in the peer's control page and wake its waiters. */
int ntb_peer_db_ring(struct ntb_link *link);

/* Current value of our inbound doorbell counter (written by the peer). */
uint32_t ntb_db_read(const struct ntb_link *link);

/* Wait until our doorbell counter differs from SEEN, or TIMEOUT_MS passes (-1: forever).
 * Returns 0 when rung, -ETIMEDOUT, -EINTR, or -ENOLINK when the link went down. */
int ntb_db_wait(struct ntb_link *link, uint32_t seen, int timeout_ms);
/* The same with TIMEOUT_US in microseconds (-1: forever): a waiter whose next timer is due
 * within the millisecond (a recovery's re-ask, a quick probe) sleeps until then, not longer. */
int ntb_db_wait_us(struct ntb_link *link, uint32_t seen, long timeout_us);

/* The direct doorbell (ntb_int.h): may this process sleep on it (the peer wakes futexes, our
 * doorbells are no interrupts, futex_waitv works)? */
bool ntb_db_direct_ok(const struct ntb_link *link);
/* Ring the peer's direct doorbell (its doorbell where the peer takes interrupts or this side
 * wakes no futexes). */
int ntb_peer_db_ring_direct(struct ntb_link *link);
/* Current value of our inbound direct doorbell. */
uint32_t ntb_db_direct_read(const struct ntb_link *link);
/* As ntb_db_wait_us(), woken also when the direct doorbell differs from SEEN_DIRECT. */
int ntb_db_wait_direct_us(struct ntb_link *link, uint32_t seen, uint32_t seen_direct,
			  long timeout_us);

/* The word wake (ntb_int.h): may this process sleep on a word of its inbound window that the
 * peer wakes (the peer advertises NTB_CAP_WORD_WAKE, and ntb_db_direct_ok()'s conditions)? */
bool ntb_word_wake_ok(const struct ntb_link *link);
/* The 32-bit word at OFF (4-aligned) of our inbound window (acquire), 0 outside it. */
uint32_t ntb_word_read(const struct ntb_link *link, uint64_t off);
/* After a store to the 32-bit word at OFF of the peer's window: wake the peer's sleepers on it
 * (its doorbell, which they sleep on too, where this side wakes no futexes or the peer takes
 * interrupts). */
int ntb_peer_word_wake(struct ntb_link *link, uint64_t off);
/* As ntb_db_wait_us(), woken also when ntb_word_read(OFF) differs from SEEN_WORD. */
int ntb_db_wait_word_us(struct ntb_link *link, uint32_t seen, uint64_t off, uint32_t seen_word,
			long timeout_us);

/* Sleep until one of N links' doorbells differs from its SEEN[i], or *KICK (when not NULL: a
 * futex word private to this process, bumped and woken by another of its threads) differs from
 * KICK_SEEN, or TIMEOUT_MS passes (-1: no limit), for at most half a heartbeat of each link
 * (whose heartbeats it keeps writing). One thread sleeps on every link at once, where
 * ntb_db_wait() watches one. Returns 0 (rung, kicked or time up: the caller looks at each
 * link), -EINTR, or -ENOTSUP when the links cannot be waited on together (a backend without
 * futex doorbells, an inspect handle, more than NTB_DB_WAIT_MAX, a kernel without
 * futex_waitv): the caller then uses ntb_db_wait(). */
#define NTB_DB_WAIT_MAX 64u
int ntb_db_wait_many(struct ntb_link *const *links, const uint32_t *seen, unsigned n,
		     const _Atomic uint32_t *kick, uint32_t kick_seen, int timeout_ms);

/* The event doorbell (ntb_int.h): publish EFD, this process's eventfd that its poll and epoll
 * sleepers wait on, so that the peer's ringers (on this host, shm) may write it directly. The
 * claim slot's index (what the peer is told to ring), or -ENOTSUP (not shm, no claim, no
 * eventfd-id in /proc/self/fdinfo), -EBADF. */
int ntb_event_publish(struct ntb_link *link, int efd);
/* Does the peer's side write published eventfds (NTB_CAP_EV_RING)? */
bool ntb_event_peer_rings(const struct ntb_link *link);
/* Write the eventfd that the peer's process in claim slot SLOT published: 0, or -errno (none
 * published, not that process's any more, pidfd_getfd(2) refused): ring the doorbell then. */
int ntb_peer_event_ring(struct ntb_link *link, unsigned slot);
/* Close the duplicates whose publication is gone (the peer process closed the link, exited or
 * published another eventfd): from a maintenance pass, every 100 ms or so. */
void ntb_event_sweep(struct ntb_link *link);
/* In a forked child, before it rings: the locks of the event doorbell's cache re-created (a
 * thread of the parent may have held one at the fork). */
void ntb_event_atfork_child(struct ntb_link *link);

/* A pollable fd (an eventfd) that turns readable when the peer rings, or -ENOTSUP. Only
 * links with interrupt doorbells have one: a pci link on an ivshmem-doorbell device bound to
 * vfio-pci, and a shm link that joined an ivshmem server (params.ivshmem_server). Readable
 * means "look at ntb_db_read()": drain it with read(2) of 8 bytes (non-blocking) before
 * re-checking. The peer rings only the process of this side that last enabled the link with
 * a doorbell: another process's fd may stay quiet, so wait on it with a timeout. Without an
 * fd, poll ntb_db_read() or sleep in ntb_db_wait(). Owned by the link: do not close it. */
int ntb_db_fd(const struct ntb_link *link);

/* --- scratchpads ---------------------------------------------------------------------------- */

int ntb_spad_count(const struct ntb_link *link);
/* Read our inbound scratchpad IDX (written by the peer). */
int ntb_spad_read(const struct ntb_link *link, int idx, uint32_t *ret_val);
/* Write the peer's scratchpad IDX. */
int ntb_peer_spad_write(struct ntb_link *link, int idx, uint32_t val);

/* --- link state ---------------------------------------------------------------------------- */

/* Start the handshake: publish our epoch and heartbeat. The epoch is the side's session epoch:
 * new whenever a side is opened with no other live handle on it (a restarted host), shared by
 * all handles of that side meanwhile (many processes of one host). */
int ntb_link_enable(struct ntb_link *link);
/* Announce down; the peer sees it at its next check. */
int ntb_link_disable(struct ntb_link *link);

/* Refresh: write our heartbeat if due, look at the peer's. Cheap; call from wait loops and
 * from one helper thread at least every heartbeat_ms. Returns ntb_link_is_up(). */
bool ntb_link_tick(struct ntb_link *link);

/* The peer rang our doorbell: when a process of the peer host asked for a heartbeat with it (it
 * waits to see ours move, ntb_link_wait_peer(), and changes the control page's beat_req before
 * it rings, instead of waiting up to heartbeat_ms), our next tick writes the heartbeat at once,
 * if the last one is NTB_BEAT_SOON_NS old or more. Rings of the data path cost a load. */
#define NTB_BEAT_SOON_NS 1000000u
void ntb_link_beat_soon(struct ntb_link *link);

/* Both sides enabled and the peer's heartbeat fresh. */
bool ntb_link_is_up(struct ntb_link *link);

/* Wait for link up; 0, -ETIMEDOUT or -EINTR. */
int ntb_link_wait_up(struct ntb_link *link, int timeout_ms);

/* What this handle can tell about the peer side now, without waiting (refreshes like
 * ntb_link_tick()). */
enum ntb_peer_state {
	NTB_PEER_UP,      /* the link is up */
	NTB_PEER_UNKNOWN, /* down, and the peer side may be alive: coming up, or slow (a loaded
			   * host whose heartbeat is late), or only just gone */
	NTB_PEER_ABSENT,  /* no process of the peer host has the link enabled (never did, or the
			   * last one closed it), or our mapping is lost: it cannot come up
			   * before one opens it */
	NTB_PEER_DEAD,    /* enabled, but its heartbeat has stood still for ntb_link_dead_ms(),
			   * as the processes of this host saw it (one record per host, so a new
			   * process knows at once); or, with no such record, the wall-clock stamp
			   * of its last heartbeat is older than that by NTB_WALL_SLACK_S */
};
#define NTB_WALL_SLACK_S 2
enum ntb_peer_state ntb_link_peer_state(struct ntb_link *link);
/* How long a heartbeat must stand still for NTB_PEER_DEAD: twice link_timeout_ms, at least
 * 1000 ms (a late heartbeat of a loaded host is only down, NTB_PEER_UNKNOWN). */
uint32_t ntb_link_dead_ms(const struct ntb_link *link);
/* Wait for link up only while the peer side may be alive: 0 (up), -EHOSTDOWN as soon as the
 * peer is ABSENT or DEAD, -ETIMEDOUT, -EINTR. */
int ntb_link_wait_peer(struct ntb_link *link, int timeout_ms);

int ntb_link_side(const struct ntb_link *link);          /* 0 or 1 */
uint32_t ntb_link_epoch(const struct ntb_link *link);    /* ours (the side's session) */
uint32_t ntb_link_peer_epoch(const struct ntb_link *link); /* 0 while down */
/* Down only because the peer's heartbeat went stale at the last tick: the peer never announced
 * down, its epoch is the one last seen up, the mapping is intact. A silent peer may be a dead
 * host, one whose processes exited or died without closing the link (only ntb_link_disable()
 * announces down), or a live one whose processes are stopped or starved; the caller decides
 * how long to wait. False while up and for any other kind of down. */
bool ntb_link_peer_silent(const struct ntb_link *link);
/* Milliseconds since the peer wrote the last heartbeat that reached this side (-1: not known
 * yet), erring younger, and at least the age of this handle's sighting of it; a peer that
 * stamps its heartbeats (hb_mono) is dated by its own clock, so a late look does not make it
 * younger than that. */
int64_t ntb_link_peer_hb_age_ms(struct ntb_link *link);
uint32_t ntb_link_heartbeat_ms(const struct ntb_link *link);
const char *ntb_link_name(const struct ntb_link *link);
const char *ntb_link_backend(const struct ntb_link *link); /* its backend's name */

/* Is the mapping still backed? shm: -EIO when the file was truncated below the region
 * (accesses would SIGBUS), -ESTALE when the path no longer names our file (unlinked or
 * replaced); pci: 0. Not on the fast path; call from housekeeping, e.g. when the link is down. */
int ntb_link_check_mapping(struct ntb_link *link);

/* A snapshot of the link state for display (`ntbsock check`); refreshes like
 * ntb_link_tick(). Works on inspect_only handles (then `enabled`/`epoch` are those our side
 * announced). claims[s]: handles holding side s (processes of that host). */
struct ntb_link_info {
	char     backend[NTB_BACKEND_NAME_MAX + 1];
	int      side;
	size_t   window_size, region_size, map_size;
	bool     up, enabled, peer_enabled;
	uint32_t epoch, peer_epoch;     /* peer_epoch: 0 while down */
	uint32_t peer_epoch_word;       /* the peer's epoch word even while down */
	uint32_t peer_heartbeat;
	int64_t  peer_hb_age_ms;        /* since this handle saw it change; -1: not yet */
	int      claims[2];
	char     location[NTB_PATH_MAX + 1]; /* shm path or pci device */
};
int ntb_link_info(struct ntb_link *link, struct ntb_link_info *ret_info);

/* Statistics of the fault decorator (all zero when disabled). WRITES counts every window write
 * offered to it and BYTES their bytes; DROPPED, CORRUPTED and DELAYED the random faults (of
 * the writes before the cut); CUT_DROPS the window writes dropped by the cut, CUT_CTRL_DROPS
 * the control-page writes (heartbeats, enable, doorbells, scratchpads) it suppressed. */
struct ntb_fault_stats {
	uint64_t writes, dropped, corrupted, delayed;
	uint64_t bytes;
	bool     cut;          /* the link has been cut */
	uint64_t cut_drops, cut_ctrl_drops;
};
void ntb_fault_stats(const struct ntb_link *link, struct ntb_fault_stats *ret_stats);

/* --- DMA queue (doc/design.md §3) ----------------------------------------------------------------
 * Idle → enqueue → Gather → post → Posted → wait/poll → Done | Error; abort: Posted → Aborted;
 * reset: Done/Aborted/Error → Idle. Illegal transitions return -EBUSY or -EINVAL and change
 * nothing. The CPU-copy engine writes through ntb_write(), so faults apply. */
enum ntb_dmaq_state {
	NTB_DMAQ_IDLE, NTB_DMAQ_GATHER, NTB_DMAQ_POSTED,
	NTB_DMAQ_DONE, NTB_DMAQ_ABORTED, NTB_DMAQ_ERROR,
};
struct ntb_dmaq;
int ntb_dmaq_create(struct ntb_link *link, unsigned max_entries, struct ntb_dmaq **ret_q);
void ntb_dmaq_destroy(struct ntb_dmaq *q);
int ntb_dmaq_enqueue(struct ntb_dmaq *q, size_t dst_off, const void *src, size_t len);
int ntb_dmaq_post(struct ntb_dmaq *q);
/* Poll: -EINPROGRESS while posted, 0 when Done, the transfer's error when Error. */
int ntb_dmaq_poll(struct ntb_dmaq *q);
int ntb_dmaq_wait(struct ntb_dmaq *q, int timeout_ms);
int ntb_dmaq_abort(struct ntb_dmaq *q);
int ntb_dmaq_reset(struct ntb_dmaq *q);
enum ntb_dmaq_state ntb_dmaq_state(const struct ntb_dmaq *q);
/* True when Q's engine is the default CPU copy: a transfer through Q then costs the same CPU
 * work as the caller's own write (e.g. ntb_write_dup_crc()) plus the state machine. */
bool ntb_dmaq_cpu_engine(const struct ntb_dmaq *q);
const char *ntb_dmaq_state_name(enum ntb_dmaq_state s);

/* --- PCI discovery (for `ntbsock check --pci`) ---------------------------------------------- */
struct ntb_pci_dev_info {
	char     bdf[16];     /* "0000:00:04.0" */
	uint16_t vendor, device;
	char     profile[32]; /* "ivshmem" */
	int      bar;
	uint64_t bar_size;
};
/* Fill up to MAX entries with devices a profile matches; returns the count or -errno. */
int ntb_pci_list(struct ntb_pci_dev_info *ret_devs, int max);

#endif
