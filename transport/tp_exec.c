/* SPDX-License-Identifier: MIT */
/* A connection across exec(): export its state into the host entry, adopt it in the new
 * program. */
#include <errno.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

int tp_conn_export_one(struct tp_conn *c, int timeout_ms, uint64_t *ret_token)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	if (tp_fo_get(c))
		return -EBUSY; /* moving to (or moved to) the kernel socket: not exported */
	struct tp_export *x = &c->ent->ex;
	uint64_t end = tp_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	int rc;

	if ((rc = tp_conn_own(c)))
		return rc; /* another process drives it since a fork: our state is stale */
	for (;;) {
		tp_mutex_lock(&c->tx_lock);
		tp_tx_flush_held_locked(c); /* a merged message held back goes out first */
		/* the next program starts with no TX_WAIT bits (tp_conn_adopt()): none may stay
		 * in the peer's window either */
		tp_set_tx_wait(c, 0);
		tp_tx_feedback(c);
		bool drained = c->fb_rx_i == c->tx_i && c->fb_rx_d == c->tx_d;

		if (drained || tp_now_ms() >= end)
			break; /* keeps tx_lock */
		tp_mutex_unlock(&c->tx_lock);
		tp_conn_timers(c, tp_now_ms());
		usleep(1000);
	}
	/* relaxed: a hint (tp_int.h). Everything is acknowledged: the next program's library
	 * does not know the socket was armed to reset (tp_witness.c), so it is disarmed now (the
	 * witness lock after tx_lock, never inside it) */
	if ((c->fb_rx_i == c->tx_i && c->fb_rx_d == c->tx_d) &&
	    atomic_load_explicit(&c->rst_armed, memory_order_relaxed)) {
		tp_mutex_unlock(&c->tx_lock);
		tp_witness_rst(c, false, true);
		tp_mutex_lock(&c->tx_lock);
	}
	if (c->fb_rx_i != c->tx_i || c->fb_rx_d != c->tx_d) {
		tp_mutex_unlock(&c->tx_lock);
		return -EBUSY;
	}
	/* acquire: pairs with the CAS in tp_set_error_at() */
	if ((rc = atomic_load_explicit(&c->error, memory_order_acquire))) {
		tp_mutex_unlock(&c->tx_lock);
		return rc;
	}
	tp_mutex_lock(&c->rx_lock);
	x->msn_next = c->msn_next;
	x->tx_i = c->tx_i;
	x->tx_d = c->tx_d;
	x->fin_msn = c->fin_msn;
	x->tx_epoch = c->tx_epoch;
	x->detect_seq = c->detect_seq;
	x->wr_shut = c->wr_shut;
	x->fin_sent = c->fin_sent;
	/* the receive side restarts at the first unconsumed message (re-validated after exec) */
	x->c_i = c->c_i;
	x->c_d = c->c_d;
	x->c_msn = c->v_msn - (c->rec_tail - c->rec_head);
	x->rec_off = c->rec_head != c->rec_tail ? c->rec_off : c->rec_skip; /* skip: rewound */
	x->rx_epoch = c->rx_epoch;
	x->det_seen = c->det_seen;
	x->rd_shut = c->rd_shut;
	x->eof = c->eof;
	/* a ring a held message's sender is owed (tp_rx.c: tp_rx_idle()) would be forgotten: the
	 * next program's connection starts without the debt */
	tp_rx_idle(c, true);
	tp_mutex_unlock(&c->rx_lock);
	tp_mutex_unlock(&c->tx_lock);
	*ret_token = (uint64_t)c->slot << 32 | c->nonce_in;
	/* release: the state before the flag; pairs with the acquire load in tp_conn_adopt() */
	atomic_store_explicit(&x->valid, 1, memory_order_release);
	tp_conn_unregister(c);
	tp_conn_recycle(c);
	return 0;
}

int tp_conn_adopt(struct tp_link *l, uint64_t token, struct tp_conn **ret_conn)
{
	uint32_t slot = (uint32_t)(token >> 32), nonce = (uint32_t)token;
	struct tp_host_entry *e;
	struct tp_export x;
	struct tp_conn *c;

	if (slot >= l->contexts || slot >= tp_host_used(l->host))
		return -ENOENT;
	e = &l->host->e[slot];
	tp_host_lock(l);
	if (e->state != TP_ES_OPEN || e->nonce != nonce ||
	    /* acquire: pairs with the release store in tp_conn_export() */
	    !atomic_load_explicit(&e->ex.valid, memory_order_acquire)) {
		tp_host_unlock(l);
		return -ENOENT;
	}
	x = e->ex;
	atomic_store_explicit(&e->ex.valid, 0, memory_order_relaxed); /* (under the host lock) */
	/* relaxed: informational, read without the host lock by a move's helper and `ntbsock
	 * stat` (stored also without it: tp_conn_own(), tp_conn_set_owner()) */
	atomic_store_explicit(&e->pid, tp_self_pid(), memory_order_relaxed);
	tp_entry_own(l, e, tp_self_pid());
	tp_host_unlock(l);
	c = tp_conn_new(l, slot); /* refs unchanged: other processes may share it (fork) */
	if (!c)
		return -ENOMEM;
	c->msn_next = x.msn_next;
	c->tx_i = c->fb_rx_i = x.tx_i;
	c->tx_d = c->fb_rx_d = c->tx_d_pub = x.tx_d;
	c->fb_ack = x.msn_next;
	c->fin_msn = x.fin_msn;
	c->tx_epoch = x.tx_epoch;
	c->detect_seq = c->det_acked = x.detect_seq;
	c->wr_shut = x.wr_shut;
	c->fin_sent = x.fin_sent;
	c->c_i = c->v_i = c->pub_i = x.c_i;
	c->c_d = c->v_d = c->pub_d = x.c_d;
	c->rx_txd = c->v_d; /* (nothing read yet: tp_rx_txd() reads the word) */
	c->rx_grant_vd = c->v_d; /* (a ring's lap from here on: tp_rx_lapped()) */
	c->rx_lapped = false;
	c->rx_unpub = TP_UNPUB_UNKNOWN;
	c->v_msn = x.c_msn;
	c->rec_skip = x.rec_off;
	c->rx_epoch = x.rx_epoch;
	c->det_seen = x.det_seen;
	c->rd_shut = x.rd_shut;
	c->eof = x.eof;
	c->fin_rcvd_v = x.eof;
	tp_conn_register(c);
	*ret_conn = c;
	return 0;
}
