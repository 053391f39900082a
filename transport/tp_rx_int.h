/* SPDX-License-Identifier: MIT */
/* What the receive side's files (tp_rx.c, tp_recv.c, tp_probe.c) share. */
#ifndef NTBSOCK_TRANSPORT_TP_RX_INT_H
#define NTBSOCK_TRANSPORT_TP_RX_INT_H

#include "transport/tp_int.h"

/* Our own slot in the window (written by the peer), its inline slot at POS, its data ring. */
static inline const volatile uint8_t *tp_rx_slot(const struct tp_conn *c)
{
	return c->link->in + tp_slot_off(c->link, c->slot);
}

static inline const volatile uint8_t *tp_rx_inline_at(const struct tp_conn *c, uint32_t pos)
{
	return tp_in_inline(c->link, c->slot, pos);
}

/* The ring of our pool granted to the peer's sender (tp_ring.c); only while there is one. */
static inline const volatile uint8_t *tp_rx_ring(const struct tp_conn *c)
{
	return c->in_ring;
}

/* Whether a live reader may take descriptors in our ring before TX_D publishes them (tp_recv.c:
 * rx_short_direct()): once this grant's sender wrote a whole ring. Before, a place may hold an
 * earlier holder's descriptor of the same MSN (every connection starts at MSN 0 and position 0:
 * uniform message sizes line up), which only its CRC's seed would tell apart (one chance in
 * 2^32 of taking it, drawn at every look). A dead sender's message is checked once and taken
 * without the lap (tp_rx.c: tp_rx_unpublished_next()). */
static inline bool tp_rx_lapped(struct tp_conn *c)
{
	if (!c->rx_lapped && c->v_d - c->rx_grant_vd >= c->link->geom.qsize)
		c->rx_lapped = true;
	return c->rx_lapped;
}

/* What a look at the next message's place found: nothing yet, the message, another one
 * (or something unreadable in its place), or one that fails its checks. */
enum tp_rx_look { TP_RX_NONE, TP_RX_OK, TP_RX_OTHER, TP_RX_BAD };

/* Whether the sequence byte of inline position POS says the slot is written. */
static inline bool tp_rx_seq_ready(const struct tp_conn *c, uint32_t pos)
{
	const volatile uint8_t *seq = tp_rx_inline_at(c, pos) + TP_INL_SEQ;

	/* acquire: the sequence byte before the slot it publishes; pairs with the release in
	 * inline_publish() (tp_tx.c) */
	return atomic_load_explicit((const _Atomic uint8_t *)(const void *)seq,
				    memory_order_acquire) ==
	       tp_inline_seq(pos, c->link->geom.log2n, c->seq_base_in);
}

/* tp_rx.c */
/* Copy LEN bytes at data-ring position POS out of the window (wrap aware; only checksum them
 * unless COPY), fusing the CRC. */
uint32_t tp_rx_data_copy(const struct tp_conn *c, uint8_t *dst, uint32_t pos, uint32_t len,
			 uint32_t crc, bool copy);
/* Look at the data ring for message MSN (its descriptor into *R; CHECK: its CRC too). */
enum tp_rx_look tp_rx_data(struct tp_conn *c, uint32_t msn, struct tp_rec *r, bool check);
/* rx_bounce holds at least LEN bytes (0), or -ENOMEM. */
int tp_rx_bounce_reserve(struct tp_conn *c, uint32_t len);
/* Evidence of loss or corruption (CRC: a CRC error): Retry, or MaxErr. */
void tp_rx_fail_at(struct tp_conn *c, bool crc, const char *file, int line);
#define tp_rx_fail(c, crc) tp_rx_fail_at((c), (crc), __FILE__, __LINE__)

/* tp_recv.c */
/* Record R was consumed entirely: release its ring space (under rx_lock). */
void tp_rx_rec_done(struct tp_conn *c, const struct tp_rec *r);

#endif
