/* SPDX-License-Identifier: MIT */
/* A connection's timers, run by the helper thread and the wait loops. */

#include "transport/tp_int.h"
#include "util/log.h"

/* A silent peer (tp_link_refresh()): no timer counts an error against it (their stamps move
 * with the clock, so the timers' housekeeping still runs: FIN, feedback, discards).
 * TimerSendData, TimerDetect and TimerRcvData start again when it speaks; then at most one of
 * each may run out before its answer comes (a stopped process resumes). */
static void hold_timers(struct tp_conn *c, uint64_t now)
{
	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		c->last_ack_ms = now;
		c->quick_ns = clock_mono_ns();
		tp_mutex_unlock(&c->tx_lock);
	}
	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		if (c->gated)
			c->gate_deadline_ms = now + c->link->params.recv_timeout_ms;
		tp_mutex_unlock(&c->rx_lock);
	}
}

/* Queue fill levels for `ntbsock stat`: the cursors are read under their locks (trylock: a
 * busy side keeps its last value until the next tick; callers may hold a lock). */
static void show_fill(struct tp_conn *c)
{
	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		TP_STAT_SET(c->st->tx_queue_fill,
			    (c->tx_d - c->fb_rx_d) + (c->tx_i - c->fb_rx_i) * 128u);
		tp_mutex_unlock(&c->tx_lock);
	}
	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		TP_STAT_SET(c->st->rx_queue_fill, (c->v_d - c->c_d) + (c->v_i - c->c_i) * 128u);
		tp_mutex_unlock(&c->rx_lock);
	}
}

static uint32_t conn_timers(struct tp_conn *c, uint64_t now)
{
	uint32_t next;

	/* acquire (error): pairs with the CAS in tp_set_error_at(); (owned): with the release
	 * store in tp_conn_own(): never for a connection another process drives (our copy of its
	 * state is stale) */
	if (atomic_load_explicit(&c->error, memory_order_acquire) ||
	    !atomic_load_explicit(&c->owned, memory_order_acquire))
		return 0;
	/* relaxed: a flag the helper refreshes every 100 ms */
	if (!tp_fo_get(c) && atomic_load_explicit(&c->link->admin_down, memory_order_relaxed))
		tp_fo_request(c, "link down (admin)");
	if (tp_fo_get(c)) {
		/* (a move takes another link's locks: never under a pass's conns_lock) */
		if (tp_link_pass_locked())
			return 1; /* (the pass runs it after releasing the lock) */
		tp_fo_progress(c);
		return 0;
	}
	/* (sticky once true: also for a connection nobody calls into) */
	bool lost = tp_conn_peer_lost(c);

	if (!lost && ntb_link_peer_silent(c->link->ntb)) {
		tp_witness_look(c, now);
		hold_timers(c, now); /* then the housekeeping below, which now counts nothing */
	} else if (!lost && atomic_load_explicit(&c->silent_alive, memory_order_relaxed)) {
		/* relaxed: a hint (as its store in tp_witness_look()); it speaks again: its writes
		 * arrive */
		atomic_store_explicit(&c->silent_alive, false, memory_order_relaxed);
	}
	tp_conn_commit_repeat(c, now, lost);
	if (atomic_load_explicit(&c->pre_on, memory_order_relaxed))
		tp_prefix_flush(c); /* (a moved connection's tail, before the program's bytes) */
	next = tp_tx_timers(c, now);
	/* (a gated receiver's re-asks count as quick probes: the helper comes for them too) */
	return tp_wait_min(next, tp_rx_timers(c));
}

uint32_t tp_conn_timers(struct tp_conn *c, uint64_t now)
{
	/* acquire: pairs with the release store of slot_gone in tp_conn_free_slot() */
	if (atomic_load_explicit(&c->slot_gone, memory_order_acquire))
		return 0; /* a shell (moved to another link): its entry is another's now */

	uint32_t next = conn_timers(c, now);

	/* (after the timers, which read the feedback: before them, the levels shown lagged a pass
	 * behind, and a connection whose next pass is far, backed off, showed them so for long;
	 * not when the timers finished a move: its entry, and the statistics in it, may be
	 * another connection's now) */
	if (!atomic_load_explicit(&c->slot_gone, memory_order_acquire))
		show_fill(c);
	return next;
}

uint64_t tp_conn_recovery_due_ns(struct tp_conn *c, bool *ret_urgent)
{
	uint64_t tx = tp_tx_quick_due_ns(c, ret_urgent), rx = tp_rx_reask_due_ns(c, ret_urgent);

	return !tx ? rx : !rx ? tx : tx < rx ? tx : rx;
}
