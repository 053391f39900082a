/* SPDX-License-Identifier: MIT */
/* The windows: bounds-checked writes into the peer's window, direct access, and the named
 * barriers that order them. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "ntb/ntb_int.h"
#include "util/crc32c.h"

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
 *                           epoch (ntb_heartbeat_write()), acquire load in observe_peer()
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

int ntb_read_back(struct ntb_link *link, size_t off, void *dst, size_t len)
{
	if (unlikely(off > link->out_size || len > link->out_size - off))
		return bounds_error(link);
	if (!link->out)
		return -ENOTSUP;
	ntb_wc_flush(link);
	/* seq_cst: our earlier stores into the window before these loads (store→load), as the
	 * non-posted read is ordered behind the posted writes on a bridge */
	atomic_thread_fence(memory_order_seq_cst);
	const volatile uint8_t *src = link->out + off;
	uint8_t *d = dst;

	for (size_t i = 0; i < len; i++)
		d[i] = src[i];
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
			atomic_store_explicit((_Atomic type *)(link->out + off), v,         \
					      memory_order_relaxed);                        \
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

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  /* Linux 5.14 */
#define MADV_POPULATE_WRITE 23
#endif

void ntb_prefault(struct ntb_link *link, bool out, uint64_t off, size_t len)
{
	const volatile uint8_t *base = out ? link->out : link->in;
	size_t size = out ? link->out_size : link->win_size;

	if (!base || off >= size)
		return;
	if (len > size - off)
		len = size - off;
	uintptr_t a = (uintptr_t)(base + off) & ~(uintptr_t)4095;
	uintptr_t e = ((uintptr_t)(base + off) + len + 4095) & ~(uintptr_t)4095;
	/* (a device's BAR, or a kernel before 5.14, refuses: its pages then fault one by one) */
	madvise((void *)a, e - a, out ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}

void ntb_prefault_mem(void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
	uintptr_t e = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;

	madvise((void *)a, e - a, MADV_POPULATE_WRITE); /* (best effort, as ntb_prefault()) */
}

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
