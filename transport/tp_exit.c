/* SPDX-License-Identifier: MIT */
/* Exit: closed connections still owed to the peer (FIN, unacknowledged data) are announced,
 * drained, or handed to the kernel socket before the process ends. */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* Does closed connection C still need this process at exit: its FIN not out yet, or data or the
 * FIN not acknowledged (only the sender can retransmit)? Under its tx lock; a busy lock counts
 * as pending (the holder is about to change it). */
static bool exit_pending(struct tp_conn *c)
{
	bool pending;

	/* nor for a peer down past the grace: a silent one may be stopped for long, and a
	 * kernel socket's close does not hold up exit either */
	/* acquire (slot_gone, error): pair with the release store in tp_conn_free_slot() and
	 * the CAS in tp_set_error_at(); relaxed up: the link's state, a cache */
	if (atomic_load_explicit(&c->slot_gone, memory_order_acquire) ||
	    atomic_load_explicit(&c->error, memory_order_acquire) || tp_conn_peer_lost(c) ||
	    !atomic_load_explicit(&c->link->up, memory_order_relaxed))
		return false; /* (a shell: the connection it moved to is looked at on its link) */
	if (tp_mutex_trylock(&c->tx_lock))
		return true;
	pending = !tp_fin_acked(c);
	tp_mutex_unlock(&c->tx_lock);
	return pending;
}

void tp_exit_announce(void)
{
	if (pthread_mutex_trylock(&tp_links_lock))
		return;
	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		if (pthread_mutex_trylock(&l->conns_lock))
			continue;
		bool idle = l->conns == NULL;
		pthread_mutex_unlock(&l->conns_lock);
		if (idle)
			ntb_link_disable(l->ntb);
	}
	pthread_mutex_unlock(&tp_links_lock);
}

/* Drive the failovers pinned in a walk (conns_lock released: a move takes the other link's
 * locks): how many still run. On the LAST round those are abandoned: the peer gets a reset,
 * never a short end. */
static int drive_pinned(struct tp_conn **pins, int npins, bool last)
{
	int left = 0;

	for (int i = 0; i < npins; i++) {
		struct tp_conn *c = pins[i];

		if (!c)
			continue; /* (released by this thread meanwhile) */
		tp_fo_progress(c);
		if (tp_fo_get(c) == TP_FO_RUN && last)
			tp_fo_abandon(c);
		else if (tp_fo_get(c) == TP_FO_RUN)
			left++;
	}
	return left;
}

int tp_exit_drain(int timeout_ms)
{
	uint64_t end = tp_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	int left;

	/* Only timers and looks, with trylocks below tp_links_lock: this runs at exit, maybe while
	 * another thread (or a signal-interrupted caller) holds a lock, and must not hang. The
	 * helper thread releases the finished connections as usual. */
	for (;;) {
		uint64_t now = tp_now_ms();
		struct timespec abs;

		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_sec += (time_t)((end > now ? end - now : 0) / 1000u + 1u);
		if (pthread_mutex_timedlock(&tp_links_lock, &abs))
			return -ETIMEDOUT;
		left = 0;
		for (struct tp_link *l = tp_links; l; l = l->next_link) {
			struct tp_conn *pins[TP_PASS_PINS];
			int npins = 0;

			tp_link_refresh(l);
			if (!tp_walk_begin(l)) {
				left++; /* a pass or a set-up is on the list: look again */
				continue;
			}
			for (struct tp_conn *c = l->conns; c; c = c->next) {
				/* acquire (closed): pairs with the store in tp_close(); (owned): with
				 * the release store in tp_conn_own() */
				if (!atomic_load_explicit(&c->closed, memory_order_acquire) ||
				    !atomic_load_explicit(&c->owned, memory_order_acquire))
					continue;
				/* the FIN goes out when room frees (the helper may be asleep for
				 * its slice, or absent) */
				tp_conn_timers(c, now);
				/* a failover (started here or before): driven below, as the
				 * helper would (at exec there may be none) */
				if (tp_fo_get(c) == TP_FO_RUN)
					tp_walk_pin(c, pins, &npins);
				if (exit_pending(c))
					left++;
			}
			tp_walk_unlock(l);
			drive_pinned(pins, npins, false); /* (counted by exit_pending() alone) */
			tp_walk_end(l, pins, npins);
		}
		pthread_mutex_unlock(&tp_links_lock);
		if (!left || now >= end)
			break;
		usleep(1000);
	}
	return left;
}

/* At exit, for C (owned, on the list): 0 when the peer has acknowledged everything (and the
 * FIN of a closed one), 1 while it is acknowledging (feedback moved within TP_EXIT_STALL_MS:
 * a loaded peer is still worth waiting for, over the link), 2 when its bytes must go to the
 * kernel (no progress: a peer that stopped reading, or a lossy link). */
#define TP_EXIT_STALL_MS 200u
/* At exit the peer's doorbell is rung once (a peer whose program does not read, its helper
 * asleep, acknowledges a FIN only at its next pass otherwise); a connection counts as stalled
 * only TP_EXIT_NUDGE_MS after that. */
#define TP_EXIT_NUDGE_MS 20u
static int handoff_needed(struct tp_conn *c, uint64_t now, uint64_t t0)
{
	int need = 0;

	/* acquire: pairs with the CAS in tp_set_error_at() */
	if (atomic_load_explicit(&c->error, memory_order_acquire) || tp_mutex_trylock(&c->tx_lock))
		return 0;
	/* (stalled: no progress for TP_EXIT_STALL_MS, and none since the nudge at T0 either) */
	/* (a moved connection's tail still going out first counts as unacknowledged) */
	/* relaxed pre_on: a tail still going out (a hint; its writers hold the prefix lock) */
	if (c->msn_next != c->fb_ack || (c->wr_shut && !c->fin_sent) ||
	    atomic_load_explicit(&c->pre_on, memory_order_relaxed))
		need = clock_age_ms(now, c->progress_ms ? c->progress_ms : c->last_ack_ms) >
			       TP_EXIT_STALL_MS &&
		       clock_age_ms(now, t0) > TP_EXIT_NUDGE_MS ? 2 : 1;
	tp_mutex_unlock(&c->tx_lock);
	return need;
}

/* One round of tp_exit_handoff() over L's connections: how many are still to be waited for.
 * Failovers are driven after conns_lock is released, as a pass does (a move takes the other
 * link's locks). */
static int handoff_link(struct tp_link *l, uint64_t now, uint64_t t0, uint64_t hand_by,
			bool last, int *handed)
{
	struct tp_conn *pins[TP_PASS_PINS];
	int npins = 0, left = 0;
	bool got = tp_walk_begin(l);

	/* the last round may not miss a connection in a failover (its abandon): wait for another
	 * thread's pass, a while */
	for (int i = 0; !got && last && i < 200; i++) {
		usleep(1000);
		got = tp_walk_begin(l);
	}
	if (!got)
		return 1;
	for (struct tp_conn *c = l->conns; c; c = c->next) {
		/* acquire: pairs with the release store in tp_conn_own() */
		if (!atomic_load_explicit(&c->owned, memory_order_acquire))
			continue;
		if (!tp_fo_get(c) && c->sp_of && c->sp_idx == 1) {
			/* a framed stream's part 1: its bytes go in part 0's tail (tp_stripe.c) */
			tp_conn_timers(c, now);
			int need = handoff_needed(c, now, t0);

			if (need == 1 && now < hand_by) {
				left++;
				continue;
			}
			if (need) {
				tp_stripe_part_lost(c->sp_of, "exit");
				/* (part 0's failover is driven where its link is walked: once more) */
				if (tp_stripe_part0_fo(c->sp_of) <= TP_FO_RUN)
					left++;
			}
			continue;
		}
		if (!tp_fo_get(c)) {
			tp_conn_timers(c, now); /* retransmissions, Detect, the FIN */
			int need = handoff_needed(c, now, t0);

			if (need == 1 && now < hand_by) {
				left++;
				continue;
			}
			if (need && !tp_fo_request(c, "exit"))
				continue;
			*handed += need != 0;
		}
		if (tp_fo_get(c) != TP_FO_RUN)
			continue;
		if (!tp_walk_pin(c, pins, &npins))
			left++; /* (the next round) */
	}
	tp_walk_unlock(l);
	left += drive_pinned(pins, npins, last);
	tp_walk_end(l, pins, npins);
	return left;
}

int tp_exit_handoff(int timeout_ms, int *ret_handed)
{
	int handed = 0;

	uint64_t t0 = tp_now_ms(), budget = (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	uint64_t end = t0 + budget;
	/* the last quarter (at most 500 ms) is for the hand-overs themselves */
	uint64_t hand_by = end - (budget / 4u < 500u ? budget / 4u : 500u);
	int left = 0;

	for (bool first = true;; first = false) {
		uint64_t now = tp_now_ms();
		struct timespec abs;
		bool last = now >= end;

		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_sec += 1;
		if (pthread_mutex_timedlock(&tp_links_lock, &abs))
			return -ETIMEDOUT;
		left = 0;
		for (struct tp_link *l = tp_links; l; l = l->next_link) {
			if (first && l->conns)
				ntb_peer_db_ring(l->ntb); /* the nudge (TP_EXIT_NUDGE_MS) */
			left += handoff_link(l, now, t0, hand_by, last, &handed);
		}
		pthread_mutex_unlock(&tp_links_lock);
		if (!left || last)
			break;
		usleep(1000);
	}
	if (ret_handed)
		*ret_handed = handed;
	return left;
}
