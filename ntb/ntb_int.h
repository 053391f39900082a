/* SPDX-License-Identifier: MIT */
/* ntb/ internals: the binary region layout shared by every backend, the backend ops table, and
 * struct ntb_link — private to ntb/ (and its unit tests).
 *
 * ---------------------------------------------------------------------------------------------
 * REGION LAYOUT (version 1). One contiguous region, identical for the shm file and a PCI BAR
 * (ivshmem BAR2), so a shm process and a pci process mapping the same memory interoperate.
 * All fields little-endian, fixed width. Offsets below are the ones ntb_region_init() writes;
 * readers take them from the (validated) header, never assume them.
 *
 *   0x0000  struct ntb_region_hdr     4 KiB   magic/version/sizes/offsets; written once by the
 *                                             initialiser, then read-only
 *   0x1000  struct ntb_side_local[0]  4 KiB   host-local coordination of side 0's processes
 *   0x2000  struct ntb_side_local[1]  4 KiB   host-local coordination of side 1's processes
 *   0x3000  struct ntb_ctrl_page[0]   4 KiB   side 0's INBOUND control page, written only by
 *                                             side 1: epoch, enable, heartbeat, doorbell, spads
 *   0x4000  struct ntb_ctrl_page[1]   4 KiB   side 1's inbound control page, written by side 0
 *   0x5000  window[0]                 W       side 0's inbound window, written only by side 1
 *   0x5000+W window[1]                W       side 1's inbound window, written only by side 0
 *   region_size = 0x5000 + 2 W (W a multiple of 4096). A shm file or BAR may be larger than
 *   region_size (an ivshmem BAR is a power of two); the tail is unused.
 *
 * Each independently written control field sits in its own 128-byte unit (WC_UNIT).
 *
 * WHO INITIALISES THE HEADER
 *   shm: the creator. It creates a temporary file next to the target (O_CREAT|O_EXCL|O_NOFOLLOW,
 *        the configured mode), sizes it, writes the header with magic last, then link()s it into
 *        place (atomic; EEXIST → somebody else won, use theirs) and unlinks the temporary. A
 *        file that exists but whose first page is all zero (e.g. created by QEMU's
 *        memory-backend-file before any ntbsock process) is initialised in place by a side-0
 *        opener (or an auto-side opener) under the init word: CAS 0 → pid, fill, magic last
 *        (release), init word → NTB_INIT_DONE. Side 1 openers return -EAGAIN ("not initialised
 *        yet") on a zero region.
 *   pci: side 0 initialises if the header page is all zero (same init-word protocol, through
 *        ntb_region_prepare()), otherwise validates; side 1 only validates (-EAGAIN while zero).
 *   Nobody ever rewrites an initialised header.
 *
 * SIDES, SESSIONS, EPOCHS, HEARTBEAT (per host, not per process)
 *   Many processes of one host may open the same side at once (everything of host A under the
 *   preload library is side 0). They coordinate through their side's struct ntb_side_local,
 *   which only processes of that side touch (doc/design.md §3 rule 2: local atomics among the
 *   processes of one host), with:
 *   - a lock word (pid of the holder; a dead holder's lock is stolen),
 *   - claim slots, one per open link handle: owner = (generation << 32) | pid, plus the
 *     process start time (from /proc) so a recycled pid is not mistaken for the claimer, and
 *     a random tag of the program image that claimed it. A slot whose process is dead is
 *     reaped by the next opener (crash recovery); so is one of our own pid with another
 *     image's tag: the program that claimed it was replaced by exec (the pid and its start
 *     time stay) and will never release it;
 *   - the SESSION: the first opener of a side that finds no live slot starts a new session
 *     and picks a new random non-zero session epoch (never equal to the previous one). Later
 *     openers join it. When the last slot is released (or reaped), the session ends.
 *     ntb_link_epoch() is the session epoch: it changes exactly when the whole side restarted.
 *     The peer sees it in its inbound control page; transport treats a peer epoch change as
 *     "the peer host's state is gone" and one process of many exiting is invisible to it.
 *   - the heartbeat sequence and its due time: whichever enabled process of the side calls
 *     ntb_link_tick() after the due time wins a CAS on hb_due_ns and writes the next value of
 *     hb_seq into the peer's control page, so one heartbeat per heartbeat_ms per side.
 *   - the doorbell sequence: a ring takes the next value with a local fetch_add and stores it
 *     into the peer's doorbell word (each ring writes a distinct value, so a waiter that saw
 *     V is woken by any later ring);
 *   - enabled count (number of enabled handles): the link is announced down (enable = 0)
 *     when the last enabled handle of the side disables or closes; a crash of the last one
 *     is seen through heartbeat staleness.
 *   A forked child inherits the handle but not the claim; ntb_link_atfork_child() gives it its
 *   own slot in the same session. Claims are checked against pids of this pid namespace
 *   (processes of one side must share it). At most NTB_SIDE_SLOTS handles per side.
 *   The peer is UP for a process when: our handle is enabled, the peer's enable word is 1,
 *   its epoch is non-zero, and its heartbeat word changed within link_timeout_ms of this
 *   process's monotonic clock (every process observes independently; a fresh opener needs to
 *   see one change, i.e. up to one heartbeat_ms). Enabling writes epoch, enable, then
 *   (release) heartbeat; the observer loads heartbeat (acquire), then enable and epoch.
 *
 * DOORBELLS: ctrl.doorbell is a futex word. A shm writer advertises NTB_CAP_FUTEX_WAKE in the
 *   caps word of the page it writes; a shm waiter whose peer lacks it (a pci peer) sleeps in
 *   1 ms slices instead of one futex wait. Waiters count themselves in side_local.db_waiters so
 *   a shm ringer skips the FUTEX_WAKE syscall when nobody sleeps (Dekker pair: waiter
 *   increments then re-reads the doorbell; ringer stores the doorbell, full fence, reads
 *   db_waiters).
 *   A writer that receives doorbells as interrupts (an ivshmem-doorbell device: the pci backend
 *   through vfio-pci in a guest, the shm backend as a client of the ivshmem server on the host)
 *   also advertises NTB_CAP_EVENT_DB and writes its ivshmem peer id + 1 into ctrl.db_id; the
 *   other side then rings that id (BAR0 doorbell register, or the id's eventfd) after every
 *   doorbell store, and waits on its own interrupt eventfd instead of a timer. Several processes
 *   of one side: the last to enable the link publishes its id (side_local.db_owner says which);
 *   the others keep waiting on timers.
 *
 * DIRECT DOORBELL: ctrl.db_direct, a second futex word bumped by the same sequence. A thread that
 *   sleeps for one connection's data sleeps on both words (futex_waitv) and may ask the peer
 *   (transport: FB_WAIT's TP_FBW_DIRECT) to ring only this one, which the process's other
 *   sleepers (its helper thread, on the doorbell) do not wait on: a request's doorbell woke the
 *   helper beside the reader, which on two CPUs then queued behind it (request/answer p50 50
 *   against 20 µs without). Only between shm writers that wake futexes, for a waiter that does
 *   not take interrupt doorbells (ntb_db_direct_ok()); elsewhere ntb_peer_db_ring_direct()
 *   rings the doorbell. A writer advertises NTB_CAP_DB_DIRECT when its side rings the direct
 *   doorbell on request: a peer that predates it ignores the request, and with a connection's
 *   news word asked for as well it would ring nothing (its rule: news alone needs no ring).
 *
 * WORD WAKE: a window word as a futex of its own. A thread that sleeps for one connection's data
 *   sleeps on the doorbell and on a word of its inbound window that the connection's sender
 *   rewrites (transport: the slot's NEWS word, FB_WAIT's TP_FBW_WORD), and the sender wakes
 *   that word alone (ntb_peer_word_wake()): no other reader of the side wakes for it, where the
 *   direct doorbell woke every reader of every connection of the side (a JVM's 16 threads,
 *   each blocked in read() on its own connection, woke ~20 times per connection). Same
 *   conditions as the direct doorbell: shm writers that wake futexes, a waiter without
 *   interrupt doorbells, futex_waitv (ntb_word_wake_ok()). The word lies in the shared file, so
 *   the futex key (file, offset) is the same in both processes' mappings. A writer advertises
 *   NTB_CAP_WORD_WAKE when its side wakes words on request; ntb_peer_word_wake() on a side that
 *   cannot rings the direct doorbell.
 *
 * EVENT DOORBELL: a process of a shm side publishes the eventfd its poll and epoll sleepers wait
 *   on (ntb_event_publish(): the fd + 1 in its claim slot's ev_fd, its eventfd-id + 1 in the
 *   peer's ctrl.ev_id[slot]). A ringer of the other side, on the same host, may write that
 *   eventfd itself (ntb_peer_event_ring(): a duplicate taken once with pidfd_getfd(2)) instead of
 *   ringing the doorbell, whose waker in that process (its helper thread) would then write it:
 *   one wake-up instead of two, and the helper sleeps on (an epoll server's request took the
 *   doorbell, the helper, then the eventfd, stacked on one CPU). The duplicate is taken only
 *   when the slot's process is the one that claimed it (its start time) and the file is the
 *   eventfd it published (the eventfd-id in /proc/self/fdinfo): a recycled pid, an exec'd
 *   image, another pid namespace get the doorbell. A duplicate is kept among the library's own
 *   numbers (util/fdpark.h); where the program holds all of those (a server with thousands of
 *   sockets) it cannot be kept, and the rings go to the doorbell for NTB_EV_RETRY_MS before the
 *   next try (each try costs ~10 system calls and three /proc reads). A writer advertises
 *   NTB_CAP_EV_RING when its side rings eventfds on request (transport: FB_WAIT's
 *   TP_FBW_EVENT).
 *
 * SIGBUS: a shm file truncated by someone else makes accesses beyond its end fault. Callers
 *   that want to be defensive call ntb_link_check_mapping() (fstat size, and whether the path
 *   still names our file) e.g. from a housekeeping thread; full SIGBUS handling is not done.
 * --------------------------------------------------------------------------------------------- */
#ifndef NTBSOCK_NTB_INT_H
#define NTBSOCK_NTB_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ntb/ntb.h"
#include "util/clock.h"
#include "util/compiler.h"

#define NTB_REGION_MAGIC    0x314e4b4c4b4f534eULL /* "NSOKLKN1" little-endian */
#define NTB_REGION_VERSION  1u
#define NTB_PAGE            4096u
#define NTB_HDR_SIZE        NTB_PAGE
#define NTB_LOCAL_SIZE      NTB_PAGE
#define NTB_CTRL_SIZE       NTB_PAGE
#define NTB_FIXED_SIZE      (NTB_HDR_SIZE + 2 * NTB_LOCAL_SIZE + 2 * NTB_CTRL_SIZE) /* 0x5000 */
#define NTB_SIDE_SLOTS      96
#define NTB_INIT_DONE       0xffffffffu /* init word after initialisation */

/* ctrl.caps bits (written by the writer of the page, describe the writer) */
#define NTB_CAP_FUTEX_WAKE  0x1u /* the writer issues FUTEX_WAKE after a doorbell store */
#define NTB_CAP_EVENT_DB    0x2u /* the writer rings ivshmem doorbells and takes them at db_id */
#define NTB_CAP_DB_DIRECT   0x4u /* the writer's side rings the direct doorbell when asked */
#define NTB_CAP_EV_RING     0x8u /* the writer's side writes the eventfds of the event doorbell */
#define NTB_CAP_WORD_WAKE   0x10u /* the writer's side wakes a futex on a window word when asked */

/* Region header, offset 0. Written once by the initialiser (magic last, release), then never. */
struct ntb_region_hdr {
	_Atomic uint64_t magic;  /* 0x00 NTB_REGION_MAGIC, written last */
	uint32_t version;        /* 0x08 NTB_REGION_VERSION */
	uint32_t hdr_size;       /* 0x0c NTB_HDR_SIZE */
	uint64_t region_size;    /* 0x10 bytes used from offset 0 */
	uint64_t win_size;       /* 0x18 bytes per window, multiple of 4096 */
	uint64_t local_off[2];   /* 0x20 struct ntb_side_local of side s */
	uint64_t ctrl_off[2];    /* 0x30 side s's inbound struct ntb_ctrl_page */
	uint64_t win_off[2];     /* 0x40 side s's inbound window */
	uint32_t local_size;     /* 0x50 NTB_LOCAL_SIZE */
	uint32_t ctrl_size;      /* 0x54 NTB_CTRL_SIZE */
	uint32_t spad_count;     /* 0x58 NTB_SPAD_COUNT */
	uint32_t side_slots;     /* 0x5c NTB_SIDE_SLOTS */
	_Atomic uint32_t init_word; /* 0x60 0: virgin; pid: initialising; NTB_INIT_DONE */
	uint32_t flags;          /* 0x64 reserved, 0 */
	uint8_t  reserved[NTB_HDR_SIZE - 0x68];
};
static_assert(offsetof(struct ntb_region_hdr, version) == 0x08, "hdr layout");
static_assert(offsetof(struct ntb_region_hdr, region_size) == 0x10, "hdr layout");
static_assert(offsetof(struct ntb_region_hdr, win_size) == 0x18, "hdr layout");
static_assert(offsetof(struct ntb_region_hdr, local_off) == 0x20, "hdr layout");
static_assert(offsetof(struct ntb_region_hdr, ctrl_off) == 0x30, "hdr layout");
static_assert(offsetof(struct ntb_region_hdr, win_off) == 0x40, "hdr layout");
static_assert(offsetof(struct ntb_region_hdr, local_size) == 0x50, "hdr layout");
static_assert(offsetof(struct ntb_region_hdr, init_word) == 0x60, "hdr layout");
static_assert(sizeof(struct ntb_region_hdr) == NTB_HDR_SIZE, "hdr size");

/* One claim slot: a link handle of a process of this side. */
struct ntb_side_slot {
	_Atomic uint64_t owner;     /* (generation << 32) | pid; 0 = free */
	_Atomic uint64_t starttime; /* /proc/<pid>/stat field 22 (0: unknown) */
	_Atomic uint32_t enabled;   /* 1 while this handle is enabled */
	_Atomic uint32_t image;     /* the claimer's program image (ntb_image_tag()); 0: unknown */
	/* how many of the db_waiters are this process's threads (ntb_side_reap() takes back
	 * those of a process that died asleep: left counted, every ring of the peer made a wake
	 * system call for nobody, for the life of the link file) */
	_Atomic uint32_t waiting;
	/* the eventfd the claimer's poll and epoll sleepers wait on, + 1 (0: none; see EVENT
	 * DOORBELL), written by the claimer, read by the peer's ringers */
	_Atomic uint32_t ev_fd;
};
static_assert(sizeof(struct ntb_side_slot) == 32, "slot size");

/* Host-local state of one side: touched only by that side's processes (local atomics).
 * Field          writer                          reader
 * lock           any process of the side (CAS)   same
 * generation     claimers (fetch_add)            -
 * session_epoch  lock holder                     openers of the side (under lock)
 * hb_seq/hb_due  tickers (fetch_add / CAS)       tickers
 * db_seq         ringers (fetch_add)             -
 * db_waiters     waiters (fetch_add/sub)         shm peer ringers (skip the wake syscall)
 * db_owner       enablers (under lock)           waiters (use the interrupt eventfd or not)
 * peer_hb_seen   observers of the peer (CAS)     ntb_link_peer_state(), observe_peer()
 * slots          lock holder                     lock holder, ntb_link_info() */
struct ntb_side_local {
	_Atomic uint32_t lock;          /* 0x000 pid of holder, 0 free */
	uint32_t pad0[31];
	_Atomic uint32_t generation;    /* 0x080 */
	_Atomic uint32_t session_epoch; /* 0x084 0: no session */
	uint32_t pad1[30];
	_Atomic uint64_t hb_seq;        /* 0x100 */
	_Atomic uint64_t hb_due_ns;     /* 0x108 CLOCK_MONOTONIC of the next heartbeat */
	uint32_t pad2[28];
	_Atomic uint32_t db_seq;        /* 0x180 */
	uint32_t pad3[31];
	_Atomic uint32_t db_waiters;    /* 0x200 */
	uint32_t pad4[31];
	/* 0x280 the emulated link's clock (ntb/speed.c): CLOCK_MONOTONIC ns at which the last
	 * write of this side's processes is through; 0 in a region that never used the model */
	_Atomic uint64_t pace_ns;
	uint32_t pad6[30];
	_Atomic uint32_t db_owner;      /* 0x300 ivshmem id + 1 published in ctrl.db_id; 0 none */
	uint32_t pad7[31];
	/* 0x380 The peer's heartbeat as this host first saw it: NTB_HB_SEEN(value, changed, ms):
	 * the value, whether the observer saw it replace another value it had seen (else it was
	 * there when the observer opened the link), and this host's CLOCK_MONOTONIC in ms (mod
	 * 2^31) at that sighting, read after the value. 0: none. Lets a new process tell at once
	 * how long the peer's heartbeat has stood still (ntb_link_peer_state()). */
	_Atomic uint64_t peer_hb_seen;
	uint8_t  pad5[0x400 - 0x388];
	struct ntb_side_slot slots[NTB_SIDE_SLOTS]; /* 0x400 */
};
static_assert(offsetof(struct ntb_side_local, generation) == 0x080, "local layout");
static_assert(offsetof(struct ntb_side_local, hb_seq) == 0x100, "local layout");
static_assert(offsetof(struct ntb_side_local, db_seq) == 0x180, "local layout");
static_assert(offsetof(struct ntb_side_local, db_waiters) == 0x200, "local layout");
static_assert(offsetof(struct ntb_side_local, pace_ns) == 0x280, "local layout");
static_assert(offsetof(struct ntb_side_local, db_owner) == 0x300, "local layout");
static_assert(offsetof(struct ntb_side_local, peer_hb_seen) == 0x380, "local layout");
static_assert(offsetof(struct ntb_side_local, slots) == 0x400, "local layout");

#define NTB_HB_SEEN(hb, changed, ms) \
	(((uint64_t)(hb) << 32) | ((uint64_t)!!(changed) << 31) | ((uint64_t)(ms) & 0x7fffffffu))
#define NTB_HB_SEEN_VALUE(rec)   ((uint32_t)((rec) >> 32))
#define NTB_HB_SEEN_CHANGED(rec) (((rec) >> 31) & 1u)
#define NTB_HB_SEEN_MS(rec)      ((uint32_t)(rec) & 0x7fffffffu)
static_assert(sizeof(struct ntb_side_local) == NTB_LOCAL_SIZE, "local size");

/* A 32-bit word alone in its 128-byte unit. */
struct ntb_ctrl_word {
	_Atomic uint32_t v;
	uint32_t pad[WC_UNIT / 4 - 1];
};
static_assert(sizeof(struct ntb_ctrl_word) == WC_UNIT, "ctrl word");

/* A side's inbound control page: every field written only by the PEER (one writer per word; any
 * process of the peer's side may write beat_req, each a whole new value),
 * read only by this side. */
struct ntb_ctrl_page {
	struct ntb_ctrl_word epoch;      /* 0x000 peer's session epoch (non-zero) */
	struct ntb_ctrl_word enable;     /* 0x080 1: peer enabled, 0: disabled / never */
	struct ntb_ctrl_word heartbeat;  /* 0x100 changes every heartbeat_ms while enabled */
	struct ntb_ctrl_word doorbell;   /* 0x180 futex word, bumped per ring */
	struct ntb_ctrl_word caps;       /* 0x200 NTB_CAP_* of the writer */
	struct ntb_ctrl_word writer_pid; /* 0x280 informational (a pid on the peer host) */
	struct ntb_ctrl_word spad[NTB_SPAD_COUNT]; /* 0x300 .. 0xb00 */
	struct ntb_ctrl_word db_id;      /* 0xb00 writer's ivshmem peer id + 1 (EVENT_DB); 0 none */
	/* 0xb80 the peer's CLOCK_REALTIME in seconds (mod 2^32) at its last heartbeat, stored
	 * before it; 0: not written (a writer that predates the field) */
	struct ntb_ctrl_word hb_wall;
	/* 0xc00 the peer's CLOCK_MONOTONIC in ms (mod 2^32, never 0) at its last heartbeat, stored
	 * before it; 0: not written. Dates the peer's last heartbeat on this host's clock
	 * (ntb_link_peer_hb_age_ms()), however late this side looked. */
	struct ntb_ctrl_word hb_mono;
	/* 0xc80 changed by a process of the writer's side that waits for our heartbeat to move
	 * (ntb_link_wait_peer()) before it rings: our next tick beats at once
	 * (ntb_link_beat_soon()); 0 from a writer that predates the field (its processes wait
	 * for our heartbeat as before) */
	struct ntb_ctrl_word beat_req;
	/* 0xd00 the direct doorbell: a second futex word the peer rings instead of the doorbell
	 * for a waiter that sleeps for one connection's data and asked for it (see DIRECT
	 * DOORBELL above); 0 from a writer that predates the field (it rings the doorbell) */
	struct ntb_ctrl_word db_direct;
	/* 0xd80 the event doorbell (see EVENT DOORBELL above): per claim slot of the writer's
	 * side, the eventfd-id + 1 of the eventfd that slot's process published in its slot's
	 * ev_fd (written by that process, one writer per word); 0: none */
	_Atomic uint32_t ev_id[NTB_SIDE_SLOTS];
	uint8_t reserved[NTB_CTRL_SIZE - 0xd80 - 4 * NTB_SIDE_SLOTS];
};
static_assert(offsetof(struct ntb_ctrl_page, enable) == 0x080, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, heartbeat) == 0x100, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, doorbell) == 0x180, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, caps) == 0x200, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, spad) == 0x300, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, db_id) == 0xb00, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, hb_wall) == 0xb80, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, hb_mono) == 0xc00, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, beat_req) == 0xc80, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, db_direct) == 0xd00, "ctrl layout");
static_assert(offsetof(struct ntb_ctrl_page, ev_id) == 0xd80, "ctrl layout");
static_assert(sizeof(struct ntb_ctrl_page) == NTB_CTRL_SIZE, "ctrl size");

/* --- region helpers (ntb/region.c) ----------------------------------------------------------- */

/* region_size for windows of WIN_SIZE bytes. */
size_t ntb_region_size_for(size_t win_size);

/* Largest window (a power of two, ≥ 4096) whose region fits in MAPPED_SIZE; 0 if none. */
size_t ntb_region_max_win(size_t mapped_size);

/* Validate the header at BASE against a mapping of MAPPED_SIZE bytes (any mapping: shm file or
 * PCI BAR). Copies the header to private memory first and checks only the copy: magic,
 * version, sizes, every area 4096-aligned, inside region_size ≤ MAPPED_SIZE, no two areas
 * overlapping, no arithmetic overflow. WANT_WIN: required window size, 0 = any. On success
 * writes the copy to RET_HDR (may be NULL). Returns 0, -EAGAIN (header page all zero: not
 * initialised yet), -EPROTO (foreign: bad magic, or initialisation in progress too long is
 * the caller's call), -EPROTONOSUPPORT (version), -EINVAL (hostile/inconsistent sizes or
 * offsets, or too small: truncated), -EMSGSIZE (window size differs from WANT_WIN). DETAIL, if
 * non-NULL, receives a one-line reason. */
int ntb_region_validate(const void *base, size_t mapped_size, size_t want_win,
			struct ntb_region_hdr *ret_hdr, char *detail, size_t detail_len);

/* Fill a private header for windows of WIN_SIZE (init_word and magic left 0). */
void ntb_region_hdr_build(struct ntb_region_hdr *h, size_t win_size);

/* Initialise a ZEROED region in place under the init word: CAS init_word 0 → pid, zero the
 * fixed area, write the header, magic last (release), init_word → NTB_INIT_DONE. If another
 * process is initialising, waits up to TIMEOUT_MS for the magic. Returns 0 when the region is
 * initialised (by us or another), -EPROTO if the header page is not all zero and carries no
 * valid magic, -ETIMEDOUT. Then call ntb_region_validate(). */
int ntb_region_init(void *base, size_t mapped_size, size_t win_size, int timeout_ms);

/* The policy both backends use on a mapping they did not just create: if the header page is
 * all zero and MAY_INIT (side 0, or auto side) → ntb_region_init() with WIN_SIZE (0 → the
 * largest that fits); then ntb_region_validate(). -EAGAIN when zero and !MAY_INIT.
 * Sets the detail string (ntb_set_detail()) on failure. */
int ntb_region_prepare(void *base, size_t mapped_size, size_t win_size, bool may_init,
		       struct ntb_region_hdr *ret_hdr);

/* --- backends ------------------------------------------------------------------------------ */

struct ntb_link;

/* What a backend implements. Mandatory: open, close. NULL means "the default" for the rest:
 * write → memcpy into the outbound window, barriers → see link.c, db_wake → nothing (the peer
 * polls), db_wait_slice → sleep in slices of at most 1 ms, check_mapping → 0. */
struct ntb_backend_ops {
	const char *name;
	/* Map the region for LINK->params and leave it initialised and validated: set
	 * link->base, link->map_size, link->hdr (validated copy, e.g. via ntb_region_prepare()),
	 * link->wc (outbound writes go to a write-combining mapping), link->caps (NTB_CAP_*
	 * this backend provides), link->side_hint (for side -1: the side to try first, or -1),
	 * link->priv. On failure: unmap, set ntb_set_detail(), return -errno. */
	int  (*open)(struct ntb_link *link);
	/* Unmap and free link->priv. */
	void (*close)(struct ntb_link *link);
	/* Raw outbound-window write at window offset OFF (already bounds-checked). */
	void (*write)(struct ntb_link *link, size_t off, const void *src, size_t len);
	void (*to_peer_barrier)(struct ntb_link *link);
	void (*wc_flush)(struct ntb_link *link);
	/* Called after the doorbell word in the peer's control page was stored. */
	void (*db_wake)(struct ntb_link *link, _Atomic uint32_t *peer_db);
	/* Sleep until *DB != SEEN or up to SLICE_US (microseconds); return 0 (woken or slice
	 * over) or -EINTR. */
	int  (*db_wait_slice)(struct ntb_link *link, _Atomic uint32_t *db, uint32_t seen,
			      int slice_us);
	/* Is the mapping still backed (shm: file size, path identity)? 0 or -errno. */
	int  (*check_mapping)(struct ntb_link *link);
	/* What ntb_link_info() shows as the link's location (a file, a device); NULL: "". */
	const char *(*location)(const struct ntb_link *link);
	/* The eventfd that turns readable when the peer rings our ivshmem doorbell, or -ENOTSUP. */
	int  (*db_fd)(const struct ntb_link *link);
};

/* This program image's random non-zero tag, stored in the claim slots it takes (link.c). */
uint32_t ntb_image_tag(void);

/* ntb_link_open() with an explicit ops table (P->backend is then only reported): for tests
 * with a fake or wrapped backend. */
int ntb_link_open_ops(const struct ntb_link_params *p, const struct ntb_backend_ops *ops,
		      struct ntb_link **ret_link);

/* The table of backends (ntb/backend/backends.c): the ops of the backend called NAME, or NULL. */
const struct ntb_backend_ops *ntb_backend_find(const char *name);

extern const struct ntb_backend_ops ntb_shm_ops; /* ntb/backend/shm.c */
extern const struct ntb_backend_ops ntb_pci_ops; /* ntb/backend/pci.c */

struct ntb_fault; /* ntb/fault.c */
struct ntb_speed; /* ntb/speed.c */

/* The emulated speed (ntb/speed.c): when LINK->params.speed is set, wrap LINK->ops in a copy
 * whose write and to_peer_barrier pace the link (LINK->speed; the backend's ops stay below).
 * 0, -EINVAL (not the shm backend) or -ENOMEM. ntb_speed_destroy() accepts NULL. */
int ntb_speed_create(struct ntb_link *link);
void ntb_speed_destroy(struct ntb_speed *sp);
/* Counters of the model in this handle: bytes paced, nanoseconds waited for bandwidth and
 * for latency (0 when off). */
struct ntb_speed_stats {
	uint64_t bytes, bw_wait_ns, lat_wait_ns, barriers;
};
void ntb_speed_get_stats(const struct ntb_link *link, struct ntb_speed_stats *ret);

struct ntb_link {
	struct ntb_link_params params;
	const struct ntb_backend_ops *ops;
	void   *priv;                 /* backend private */
	/* set by ops->open */
	uint8_t *base;                /* region start */
	size_t  map_size;
	struct ntb_region_hdr hdr;    /* validated private copy */
	bool    wc;
	uint32_t caps;
	uint32_t db_id;               /* our ivshmem peer id + 1 (with NTB_CAP_EVENT_DB); 0 none */
	int     side_hint;
	/* derived by link.c from hdr */
	int     side;
	bool    inspect;
	struct ntb_side_local *local;      /* our side's */
	struct ntb_side_local *peer_local; /* the peer side's (shm: for db_waiters only) */
	struct ntb_ctrl_page *ctrl_in;     /* ours, written by the peer */
	struct ntb_ctrl_page *ctrl_out;    /* the peer's, written by us */
	const volatile uint8_t *in;
	uint8_t *out;
	size_t  win_size;
	size_t  out_size;                  /* win_size, or 0 for inspect handles */
	/* claim */
	int     slot;                      /* -1: none */
	uint64_t owner;
	uint32_t epoch;                    /* session epoch */
	_Atomic bool enabled;              /* this handle; changed under the side lock */
	/* this process's view of the peer: written by any thread that ticks (relaxed; every
	 * value a racing tick stores is a valid observation) */
	_Atomic uint32_t peer_hb_last;
	_Atomic uint64_t peer_hb_change_ns; /* 0: no change observed yet */
	_Atomic uint32_t beat_req_seen;     /* the peer's beat_req as last acted upon */
	/* The offset of the peer's monotonic clock (its hb_mono) from ours, as an upper bound
	 * (peer.c: clk_sighting()), under clk_mu: taken by trylock only (a tick or a look that
	 * finds it busy does without; a forked child re-creates it). */
	pthread_mutex_t clk_mu;
	bool clk_valid;
	uint32_t clk_epoch;   /* the peer session it belongs to */
	uint32_t clk_off;     /* the smallest (our ms at a sighting - the peer's hb_mono), mod 2^32 */
	uint32_t clk_base_ms; /* our ms when clk_off was taken */
	uint32_t clk_stamp;   /* the peer's hb_mono at the last sighting: 0, or one that did not
			       * move with the heartbeat (a writer that predates the stamp, over a
			       * page a newer one stamped), gives no bound */
	_Atomic uint32_t peer_epoch;       /* 0 while down */
	_Atomic bool up;
	/* down only because the peer's heartbeat is stale: still enabled, same epoch as when it
	 * was last up, mapping intact (a stopped or starved peer looks the same as a dead host) */
	_Atomic bool peer_silent;
	_Atomic uint32_t peer_epoch_seen;  /* the peer epoch when last up; 0: never up */
	uint64_t hb_period_ns, timeout_ns;
	/* fault decorator (NULL: plain writes) */
	struct ntb_fault *fault;
	/* emulated speed (NULL: off; ops then is the backend's own) */
	struct ntb_speed *speed;
	/* the event doorbell's duplicates of the peer processes' eventfds (ntb/evring.c) */
	_Atomic(struct ntb_ev_cache *) evc;
};

/* Set the thread's detail string for ntb_strerror_detail(). */
void ntb_set_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- fault decorator (ntb/fault.c) ---------------------------------------------------------- */
int  ntb_fault_create(const struct ntb_fault_params *p, struct ntb_fault **ret_f);
void ntb_fault_destroy(struct ntb_fault *f);
/* Perform one outbound write through the decorator (may drop/corrupt/delay; nothing after the
 * cut). */
void ntb_fault_write(struct ntb_link *link, size_t off, const void *src, size_t len);
/* May a write to the peer's control page go out? False (and counted) once the link is cut;
 * checks the time-based cut first. */
bool ntb_fault_ctrl_pass(struct ntb_link *link);
void ntb_fault_get_stats(const struct ntb_fault *f, struct ntb_fault_stats *ret);
/* Change the drop rate of window writes from now on (tests). */
void ntb_fault_set_drop(struct ntb_fault *f, double rate);
void ntb_fault_set_delay(struct ntb_fault *f, uint32_t delay_us);

/* The fault decorator cut the link: this handle's writes to the peer's control page vanish
 * like its window writes (ntb_fault_ctrl_pass() counts each). */
static inline bool ntb_ctrl_cut(struct ntb_link *link)
{
	return unlikely(link->fault) && !ntb_fault_ctrl_pass(link);
}

/* The event doorbell's duplicates in this process (ntb/evring.c), NULL until the first ring. */
struct ntb_ev_cache;
/* A publication that could not be taken for want of a descriptor number or memory is tried
 * again this long after (ms); the rings meanwhile go to the doorbell (-EAGAIN). */
#define NTB_EV_RETRY_MS 1000u
void ntb_ev_cache_free(struct ntb_ev_cache *c);

/* --- process coordination among one side's processes (ntb/side.c) ----------------------------- */
/* The side lock: 0, or -EDEADLK when a live process held it for 3 s (a dead holder's is
 * taken over). */
int ntb_side_lock(struct ntb_side_local *l);
void ntb_side_unlock(struct ntb_side_local *l);
/* Under the side lock: free the slots of dead processes; the number of live ones (*RET_ENABLED,
 * when not NULL: how many of those are enabled). */
int ntb_side_reap(struct ntb_side_local *l, int *ret_enabled);
/* The process-local area of SIDE in LINK's region. */
struct ntb_side_local *ntb_side_local_of(struct ntb_link *link, int side);
/* Claim LINK->params.side, or (side -1) a side with no live process: sets link->side, slot,
 * owner and epoch. */
int ntb_side_claim(struct ntb_link *link);
/* Give LINK's claim slot back, when this process owns it. */
void ntb_side_release(struct ntb_link *link);
/* Does this process own LINK's claim slot? (A forked child inherits the handle, not the
 * claim, until ntb_link_atfork_child().) */
bool ntb_side_owns_slot(const struct ntb_link *link);

/* --- the peer's liveness (ntb/peer.c) --------------------------------------------------------- */
/* Write this side's next heartbeat (release: after enable, epoch, caps and the wall stamp). */
void ntb_heartbeat_write(struct ntb_link *link);
/* Record that a process of this host saw the peer's heartbeat value HB (CHANGED: replacing
 * another value it had seen). */
void ntb_hb_record(struct ntb_link *link, uint32_t hb, bool changed);

/* The peer's ivshmem id + 1 to ring, or 0 when it takes no interrupt doorbells
 * (ntb/doorbell.c). */
uint32_t ntb_peer_db_target(const struct ntb_link *link);

/* Whether a waiter of this process should sleep on its interrupt eventfd: the peer rings
 * interrupts and the id it rings is ours (ntb/doorbell.c). */
bool ntb_db_event_mine(const struct ntb_link *link);

/* Wait on the interrupt eventfd FD until *DB != SEEN or SLICE_MS passes: drain FD, re-check
 * DB (acquire), ppoll. 0 (rung, or slice over) or -EINTR (ntb/doorbell.c). */
int ntb_evfd_wait_slice(int fd, _Atomic uint32_t *db, uint32_t seen, int slice_ms);

/* Raw write (no decorator): backend op or memcpy. */
static inline void ntb_raw_write(struct ntb_link *link, size_t off, const void *src, size_t len)
{
	if (link->ops->write)
		link->ops->write(link, off, src, len);
	else
		__builtin_memcpy(link->out + off, src, len);
}

/* --- DMA queue engine hook (ntb/dmaq.c) ----------------------------------------------------- */
/* An engine moves the first bytes (any amount ≥ 1, ≤ LEN) of SRC to outbound offset DST_OFF;
 * returns the bytes moved or -errno (the queue goes to Error). Polling calls it repeatedly
 * with the rest. The default engine copies (≤ 1 MiB per call) through ntb_write(). */
typedef ssize_t (*ntb_dmaq_engine_fn)(struct ntb_link *link, size_t dst_off, const void *src,
				      size_t len);
void ntb_dmaq_set_engine(struct ntb_dmaq *q, ntb_dmaq_engine_fn fn);

#endif
