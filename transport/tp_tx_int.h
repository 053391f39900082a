/* SPDX-License-Identifier: MIT */
/* What the send side's files (tp_tx.c, tp_tx_merge.c, tp_retx.c) share. */
#ifndef NTBSOCK_TRANSPORT_TP_TX_INT_H
#define NTBSOCK_TRANSPORT_TP_TX_INT_H

#include <sys/uio.h>

#include "transport/tp_int.h"

#define TX_MERGE_WRITE 1024u /* writes up to this size merge (tp_tx_merge.c) */

/* Window offsets in the peer's slot (64 bits: the slot may lie above 4 GiB). */
static inline uint64_t tp_out_inline_off(const struct tp_conn *c, uint32_t pos)
{
	return c->out.slot_off + TP_SLOT_RINGS + (uint64_t)(pos & (c->out.inline_n - 1)) * 128u;
}

/* The data ring granted to us (tp_ring.c): only while there is one. */
static inline uint64_t tp_out_data_base(const struct tp_conn *c)
{
	return c->out_ring_off;
}

/* A cursor over the caller's iovecs. */
struct iov_cur {
	const struct iovec *iov;
	int cnt, i;
	size_t off;
};

/* Free inline slots and data-ring bytes, as the last feedback read says (and SO_SNDBUF). */
static inline uint32_t tp_tx_inline_free(const struct tp_conn *c)
{
	return c->out.inline_n - (c->tx_i - c->fb_rx_i);
}

static inline uint32_t tp_tx_data_free(const struct tp_conn *c)
{
	if (!c->out_ring_ok)
		return 0; /* no data ring (or it was asked back): inline slots only */
	uint32_t used = c->tx_d - c->fb_rx_d, fr = c->out.qsize - used;
	/* relaxed: a limit the program sets now and then (tp_conn_set_sndbuf()) */
	uint32_t cap = atomic_load_explicit(&c->tx_cap, memory_order_relaxed);

	if (cap && fr > (cap > used ? cap - used : 0))
		fr = cap > used ? cap - used : 0;
	return fr;
}

/* Has the receiver, as its feedback says, not released everything published? (While a message
 * is held the receiver publishes its release at once: exact then.) */
static inline bool tp_tx_rx_behind(const struct tp_conn *c)
{
	return c->fb_rx_i != c->tx_i || c->fb_rx_d != c->tx_d_pub;
}

/* Is the receiver behind for sure, before it was asked to publish at once? Its lazy release
 * (tp_rx.c: rx_release()) holds back fewer than tp_inline_keep() inline slots and less than an
 * eighth of the data ring it consumed, so more than that unreleased is unconsumed: a receiver
 * that caught up is never taken for a busy one (its release may simply not be published). */
static inline bool tp_tx_rx_surely_behind(const struct tp_conn *c)
{
	uint32_t in_keep = tp_inline_keep(c->out.inline_n), d_keep = c->out.qsize / 8u;

	return c->tx_i - c->fb_rx_i >= in_keep ||
	       c->tx_d_pub - c->fb_rx_d >= (d_keep ? d_keep : 1u);
}

/* tp_tx.c */
/* Publish the data ring up to tx_d (TX_D after a barrier; the epoch word again while a
 * retransmission's may have been lost). Under tx_lock. */
void tp_tx_publish(struct tp_conn *c);
/* Data-ring bytes [FROM, TO) (free-running) from the shadow to the window. */
void tp_tx_write_data(struct tp_conn *c, uint32_t from, uint32_t to);
/* LEN bytes from the cursor to data-ring position POS of shadow and window, fusing the CRC. */
uint32_t tp_tx_gather_out(struct tp_conn *c, struct iov_cur *ic, uint32_t pos, uint32_t len,
			  uint32_t crc);
/* The shadow's alignment gaps around a message as zeros. */
void tp_tx_zero_gaps(struct tp_conn *c, uint32_t pos, uint32_t gap, uint32_t len);

/* tp_tx_merge.c */
/* Merge the next N bytes of the cursor into the held message; false when it cannot take
 * them (the message that could not is published first). Under tx_lock. */
bool tp_tx_merge(struct tp_conn *c, struct iov_cur *ic, uint32_t n);

#endif
