/* SPDX-License-Identifier: MIT */
/* Spinning waits: a probe arms on a connection's words (the next inline slot's sequence
 * byte, TX_D, the feedback) and reports which changed, without locks or validation. */
#include "transport/tp_int.h"
#include "transport/tp_rx_int.h"

void tp_probe_arm(struct tp_conn *c, struct tp_probe *p, unsigned events)
{
	tp_mutex_lock(&c->rx_lock);
	p->seq_at = tp_rx_inline_at(c, c->v_i) + TP_INL_SEQ;
	p->seq_want = tp_inline_seq(c->v_i, c->link->geom.log2n, c->seq_base_in);
	/* records already queued (or end of stream) are not news either: the caller must look */
	p->seq_stale = tp_inline_stale(c, c->v_i, p->seq_at - TP_INL_SEQ);
	p->seq_was = (tp_rx_seq_ready(c, c->v_i) && !p->seq_stale) || c->rec_head != c->rec_tail ||
		     c->eof;
	tp_mutex_unlock(&c->rx_lock);
	p->events = events;
	p->tx_d = events & TP_EV_IN ? tp_slot_raw(c, TP_W_TX_D) : 0;
	p->fb_rx_i = events & TP_EV_OUT ? tp_slot_raw(c, TP_W_FB_RX_I) : 0;
	p->fb_rx_d = events & TP_EV_OUT ? tp_slot_raw(c, TP_W_FB_RX_D) : 0;
	p->tx_wait = events & TP_EV_IN ? tp_slot_raw(c, TP_W_TX_WAIT) : 0;
	p->db = ntb_db_read(c->link->ntb);
}

/* Only window words and the doorbell, no locks, no CRC: cheap enough for every spin. Returns
 * TP_EV_IN (a message was published), TP_EV_OUT (space was released), TP_EV_ERR (something
 * else moved: doorbell, error) or 0. */
unsigned tp_probe_hit(const struct tp_conn *c, const struct tp_probe *p)
{
	unsigned hit = 0;

	if (p->events & TP_EV_IN) {
		if (!p->seq_was && !p->seq_stale) {
			/* acquire: pairs with the release in inline_publish() (tp_tx.c) */
			uint8_t seq = atomic_load_explicit(
				(const _Atomic uint8_t *)(const void *)p->seq_at, memory_order_acquire);

			/* Also load the slot's first line (payload of 53-116-byte messages) in the
			 * same round: its miss overlaps the sequence byte's instead of following it
			 * when rx_inline() copies the slot. Only a prefetch: the copy re-reads it.
			 * (acquire above: pairs with the barrier before the sequence byte in
			 * write_inline_slot(); what it publishes is validated under rx_lock later) */
			(void)*(p->seq_at - TP_INL_SEQ);
			if (seq == p->seq_want)
				return TP_EV_IN; /* at once: the caller's tp_recv() sees the rest */
		}
		if (tp_slot_raw(c, TP_W_TX_D) != p->tx_d)
			hit |= TP_EV_IN;
		/* the sender holds a merged message until we release: the caller's poll_bits()
		 * publishes the release (tp_rx_release()) */
		if (tp_slot_raw(c, TP_W_TX_WAIT) != p->tx_wait)
			hit |= TP_EV_ERR;
	}
	if ((p->events & TP_EV_OUT) && (tp_slot_raw(c, TP_W_FB_RX_I) != p->fb_rx_i ||
					tp_slot_raw(c, TP_W_FB_RX_D) != p->fb_rx_d))
		hit |= TP_EV_OUT;
	/* (relaxed: a probe is a hint; the caller's full look reads the error with tp_conn_err()) */
	if (ntb_db_read(c->link->ntb) != p->db ||
	    atomic_load_explicit(&c->error, memory_order_relaxed))
		hit |= TP_EV_ERR;
	return hit;
}
