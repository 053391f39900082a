/* SPDX-License-Identifier: MIT */
/* A link's connections in this process: the list, the release of a finished one (the last
 * owner frees its context), the linger of closed ones until their FINs are acknowledged, and
 * the passes that run their timers and finish them. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "transport/tp_int.h"
#include "util/log.h"
#include "util/rawsys.h"

/* Under conns_lock: C at the head of L's list, and off it (C must be on it). */
static void conns_add(struct tp_link *l, struct tp_conn *c)
{
	c->prev = NULL;
	c->next = l->conns;
	if (l->conns)
		l->conns->prev = c;
	l->conns = c;
}

static void conns_remove(struct tp_link *l, struct tp_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

void tp_conn_register(struct tp_conn *c)
{
	pthread_mutex_lock(&c->link->conns_lock);
	conns_add(c->link, c);
	tp_act_register(c); /* (new: its set-up's commit, its first timers) */
	pthread_mutex_unlock(&c->link->conns_lock);
}

static __thread bool t_pass_locked; /* this thread runs a pass holding conns_lock */
/* (its address is this thread's token in tp_conn.pin_owner) */

bool tp_link_pass_locked(void)
{
	return t_pass_locked;
}

void tp_conn_unregister(struct tp_conn *c)
{
	pthread_mutex_lock(&c->link->conns_lock);
	/* a pass drives C's failover without conns_lock: wait until it is done with C (it takes no
	 * lock a caller here holds), unless this thread is that pass, which then forgets C */
	while (c->pin_owner) {
		if (c->pin_owner == &t_pass_locked) {
			*c->pin_slot = NULL;
			c->pin_owner = NULL;
			break;
		}
		pthread_mutex_unlock(&c->link->conns_lock);
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&c->link->conns_lock);
	}
	if (c->prev || c->link->conns == c) { /* (on the list) */
		conns_remove(c->link, c);
		tp_act_unregister(c);
	}
	pthread_mutex_unlock(&c->link->conns_lock);
}

void tp_conn_free_slot(struct tp_conn *c)
{
	struct tp_link *l = c->link;

	tp_host_lock(l);
	tp_slot_free(l, c->slot);
	tp_host_unlock(l);
	/* release: the freed slot before the flag; pairs with the acquire loads of slot_gone
	 * (tp_conn_timers(), tp_conn_release(), exit_pending(), atfork_prepare()) */
	atomic_store_explicit(&c->slot_gone, true, memory_order_release);
}

/* Drop this process's ownership of C's context; the last owner frees it. ST_FLAGS (RST/GONE)
 * tell the peer when the connection did not end with both FINs. Frees C. */
static int conn_release(struct tp_conn *c, uint32_t st_flags, bool try);

bool tp_conn_release(struct tp_conn *c, uint32_t st_flags)
{
	return conn_release(c, st_flags, false) > 0;
}

int tp_conn_release_try(struct tp_conn *c, uint32_t st_flags)
{
	return conn_release(c, st_flags, true);
}

/* Did C end with both FINs, its peer's sender done with the ring our pool granted it? Its FIN
 * validated (everything before it arrived and was read: else the close was a reset), no error,
 * no failover, the peer not lost (a stopped process may wake and write): the ring then goes
 * back on top of the pool and the next connection gets it again, its pages mapped already in
 * both processes. (A sequential client otherwise cycled through every ring of the pool, mapping
 * each anew on both hosts: a Node.js client's 10,000 B echo connections spent ~100 us each.) */
static bool ended_clean(struct tp_conn *c, uint32_t st_flags)
{
	/* acquire (error): pairs with the CAS in tp_set_error_at(); relaxed (fin_rcvd_v): the
	 * pass that decided the release read it already (linger_done()) */
	if (st_flags || atomic_load_explicit(&c->error, memory_order_acquire) ||
	    tp_fo_get(c) != TP_FO_NONE || !atomic_load_explicit(&c->fin_rcvd_v, memory_order_relaxed))
		return false;
	uint32_t st;

	/* what tp_conn_peer_lost() reads, without its failover requests (under the host lock),
	 * a word that fails its check counting as lost; relaxed: hints, as there */
	return tp_slot_word(c, TP_W_ST_FLAGS, &st) &&
	       !(st & (TP_ST_RST | TP_ST_GONE | TP_ST_FAILOVER | TP_ST_MOVING)) &&
	       !atomic_load_explicit(&c->peer_gone, memory_order_relaxed) &&
	       !atomic_load_explicit(&c->link->lost, memory_order_relaxed) &&
	       atomic_load_explicit(&c->link->peer_epoch, memory_order_relaxed) == c->peer_epoch;
}

static int conn_release(struct tp_conn *c, uint32_t st_flags, bool try)
{
	struct tp_link *l = c->link;
	bool closed = false;

	/* a shell (moved to another link): only the object is left */
	/* acquire: pairs with the release store in tp_conn_free_slot() */
	if (atomic_load_explicit(&c->slot_gone, memory_order_acquire)) {
		tp_conn_unregister(c);
		tp_fo_free(c);
		tp_conn_recycle(c);
		return 0;
	}
	struct tp_host_entry *e = c->ent;
	int me = tp_self_pid();
	/* acquire: pairs with the release store in tp_conn_own() / tp_conn_new() */
	bool owned = atomic_load_explicit(&c->owned, memory_order_acquire);
	int32_t active;
	bool last = true;

	tp_conn_unregister(c);
	if (!try) {
		tp_host_lock(l);
	} else if (!tp_host_lock_within(l, 0)) {
		/* held by a stopped process: back on the lists, for the next pass */
		tp_conn_register(c);
		return -1;
	}
	for (int i = 0; i < TP_OWNERS; i++)
		if (e->owners[i] == me)
			e->owners[i] = 0;
	/* acquire: pairs with the CAS in tp_conn_own() (a driver not in the owner list) */
	active = atomic_load_explicit(&e->active, memory_order_acquire);
	last = !tp_entry_owned(e) && (active == me || !tp_pid_alive(active));
	/* The owner ends the connection for everyone (nobody else can drive it); others only when
	 * they are the last holder. */
	if (st_flags && (last || owned))
		tp_conn_st_add(c, st_flags);
	if (last) {
		if (ended_clean(c, st_flags))
			tp_slot_free_ended(l, c->slot);
		else
			tp_slot_free(l, c->slot);
	} else if (atomic_load_explicit(&e->pid, memory_order_relaxed) == me) {
		/* relaxed: informational (as in tp_slot_alloc()) */
		for (int i = 0; i < TP_OWNERS; i++)
			if (e->owners[i])
				atomic_store_explicit(&e->pid, e->owners[i], memory_order_relaxed);
	}
	tp_host_unlock(l);
	tp_fo_free(c);
	if (c->keep_fd >= 0) {
		/* everything acknowledged: a clean end (else a reset stays armed: what the peer
		 * did not get is lost, tp_witness.c) */
		if (!tp_fo_get(c) && tp_fin_acked(c))
			tp_witness_rst(c, false, true);
		raw_close(c->keep_fd); /* the kernel's FIN (after any failover tail) */
		c->keep_fd = -1;
		closed = true;
	}
	tp_conn_recycle(c);
	return closed ? 1 : 0;
}

/* Has the peer acknowledged C's FIN (and so every byte before it)? (tx side state) */
bool tp_fin_acked(const struct tp_conn *c)
{
	return c->fin_sent && c->fb_ack - c->fin_msn - 1u < (1u << 31);
}

/* The kernel sockets a pass closes once conns_lock is released: a close sends the kernel's FIN,
 * and over the loopback the peer's receive of it runs in our system call (~10 us on a VM); a
 * pass that closed a dozen under the lock held the program's accept() (tp_conn_register())
 * for a few hundred microseconds every millisecond of a connection-rate load. */
#define TP_PASS_CLOSE 64

/* A closed connection kept a duplicate of its kernel socket for a failover (tp_close()); once
 * its FIN and every byte before it are acknowledged nothing is left to hand over: close it,
 * so that the kernel's FIN goes out as soon as it would have without the library (the peer's
 * close() waits for it: preload/pl_sock.c, await_peer_fin()). Trylocks: the helper's pass. The
 * descriptor goes into FDS (*NFDS of TP_PASS_CLOSE), closed by the caller after the pass; a
 * full list leaves it for the next pass. */
static void keep_release_if_acked(struct tp_conn *c, int *fds, int *nfds)
{
	bool acked;

	if (c->keep_fd < 0 || tp_fo_get(c) || tp_mutex_trylock(&c->tx_lock))
		return;
	acked = tp_fin_acked(c);
	tp_mutex_unlock(&c->tx_lock);
	if (!acked || tp_mutex_trylock(&c->witness_lock))
		return;
	if (!tp_fo_get(c) && c->keep_fd >= 0) { /* (under witness_lock: fo_dup_socket()) */
		tp_witness_rst_locked(c, false); /* (all acknowledged: a clean end, FIN) */
		/* On the helper, closed after the pass (ours until then: the number is not
		 * reused; a fork waits for the helper's round, under tp_links_lock). A program
		 * thread's pass (tp_link_reap()) closes it here: a fork from another thread
		 * could come between. */
		if (tp_on_helper() && *nfds < TP_PASS_CLOSE)
			fds[(*nfds)++] = c->keep_fd;
		else
			raw_close(c->keep_fd);
		c->keep_fd = -1;
	}
	tp_mutex_unlock(&c->witness_lock);
}

/* Milliseconds since C was closed. NOW was read before the pass, and tp_close() may have
 * stamped closed_ms since (an age of 2^64 - 1 ms released a connection closed a moment ago
 * as gone, before its last bytes were delivered). */
static uint64_t closed_age(const struct tp_conn *c, uint64_t now)
{
	return clock_age_ms(now, c->closed_ms);
}

/* Is a closed connection finished: FIN acknowledged and the peer's FIN seen (or gone)? */
static bool linger_done(struct tp_conn *c, uint64_t now, uint32_t *ret_flags)
{
	bool acked, peer_done;

	*ret_flags = 0;
	/* acquire: pairs with the CAS in tp_set_error_at() */
	if (atomic_load_explicit(&c->error, memory_order_acquire))
		return true;
	int fo = tp_fo_get(c);

	if (fo == TP_FO_LINKED)
		return tp_fo_idle(c); /* (a tp_close() finishing under the move's lock: next time) */
	if (fo == TP_FO_DONE || fo == TP_FO_FAILED)
		return true; /* the kernel socket carries (or ended) the rest */
	if (fo == TP_FO_RUN)
		return closed_age(c, now) > 5000u + c->link->params.setup_timeout_ms;
	/* (a silent peer, maybe stopped, is waited for as long as its open connections are) */
	uint64_t bound = 5000u + c->link->params.setup_timeout_ms;

	if (ntb_link_peer_silent(c->link->ntb) && bound < c->link->params.peer_timeout_ms)
		bound = c->link->params.peer_timeout_ms;
	if (closed_age(c, now) > bound) {
		LOG(LL_DEBUG, "transport: slot %u: unfinished %llu ms after close: gone", c->slot,
		    (unsigned long long)closed_age(c, now));
		*ret_flags = TP_ST_GONE;
		return true;
	}
	acked = tp_fin_acked(c);
	peer_done = c->fin_rcvd_v;
	if (tp_conn_peer_lost(c))
		return true;
	/* (data for closed C, which had none unread when it closed: tp_close(); a busy receive
	 * lock is looked at again on the next pass) */
	if (tp_rx_unread(c, true)) {
		LOG(LL_DEBUG, "transport: slot %u: data arrived after close: reset", c->slot);
		*ret_flags = TP_ST_RST; /* as the kernel answers data for a closed socket */
		return true;
	}
	if (acked && peer_done)
		return true;
	if (acked && closed_age(c, now) > 1000u) {
		LOG(LL_DEBUG, "transport: slot %u: no FIN from the peer %llu ms after close: gone",
		    c->slot, (unsigned long long)closed_age(c, now));
		*ret_flags = TP_ST_GONE; /* we stopped reading: the peer's later sends fail */
		return true;
	}
	return false;
}

/* The timers of the connections a pass pinned (in a failover), with conns_lock released; then
 * unpinned. One of them released from inside its failover drops out of PINS
 * (tp_conn_unregister()). */
static void pass_pinned(struct tp_link *l, struct tp_conn **pins, int n, uint64_t now)
{
	for (int i = 0; i < n; i++)
		if (pins[i])
			tp_conn_timers(pins[i], now);
	pthread_mutex_lock(&l->conns_lock);
	for (int i = 0; i < n; i++)
		if (pins[i])
			pins[i]->pin_owner = NULL;
	pthread_mutex_unlock(&l->conns_lock);
}

/* Under conns_lock: pin C (in a failover) into PINS for pass_pinned(); false when PINS is full
 * (the next pass takes it). */
static bool pass_pin(struct tp_conn *c, struct tp_conn **pins, int *npins)
{
	if (*npins >= TP_PASS_PINS)
		return false;
	c->pin_owner = &t_pass_locked;
	c->pin_slot = &pins[*npins];
	pins[(*npins)++] = c;
	return true;
}

bool tp_walk_begin(struct tp_link *l)
{
	bool busy = false;

	/* acq_rel: as in tp_link_conns_pass() */
	if (!atomic_compare_exchange_strong_explicit(&l->pass_busy, &busy, true,
						     memory_order_acq_rel, memory_order_relaxed))
		return false;
	if (pthread_mutex_trylock(&l->conns_lock)) {
		/* release: pairs with the CAS above in the next pass */
		atomic_store_explicit(&l->pass_busy, false, memory_order_release);
		return false;
	}
	t_pass_locked = true;
	return true;
}

bool tp_walk_pin(struct tp_conn *c, struct tp_conn **pins, int *npins)
{
	return pass_pin(c, pins, npins);
}

void tp_walk_unlock(struct tp_link *l)
{
	t_pass_locked = false;
	pthread_mutex_unlock(&l->conns_lock);
}

void tp_walk_end(struct tp_link *l, struct tp_conn **pins, int npins)
{
	if (npins) {
		pthread_mutex_lock(&l->conns_lock);
		for (int i = 0; i < npins; i++)
			if (pins[i])
				pins[i]->pin_owner = NULL;
		pthread_mutex_unlock(&l->conns_lock);
	}
	/* release: as at the end of tp_link_conns_pass() */
	atomic_store_explicit(&l->pass_busy, false, memory_order_release);
}

/* The closed connections a pass of L took off the list (DONE, linked by next, their ST flags
 * in release_fl) are released, each back on the list first (tp_conn_release() unregisters). */
static void pass_release(struct tp_link *l, struct tp_conn *done)
{
	struct tp_conn *c, *next;
	bool held = false;

	for (c = done; c; c = next) {
		next = c->next;
		if (held) {
			tp_conn_register(c); /* (back on the lists, untried: the next pass) */
			continue;
		}
		pthread_mutex_lock(&l->conns_lock);
		conns_add(l, c);
		pthread_mutex_unlock(&l->conns_lock);
		/* the CPU offered to the program after each, as after a pass's closes: a release
		 * takes the host lock, writes the peer's slot and often closes the kernel socket;
		 * measured, yielding only after those that closed one lost most of the gain
		 * (connrate 16.2 against 15.2 k/s) */
		if (tp_conn_release_try(c, c->release_fl) < 0) {
			/* the host lock is held by a stopped process of this host: the helper must
			 * not stop with it (its links' heartbeats and every other connection's
			 * timers are its work); this one and the rest wait for the next pass, 5 ms
			 * on, which decides again (seq_cst: as the store in tp_close()) */
			held = true;
			atomic_store_explicit(&l->lingering, true, memory_order_seq_cst);
			continue;
		}
		if (tp_on_helper())
			sched_yield();
	}
}

/* What a pass does with a connection of its list. */
enum pass_fate { PASS_KEEP, PASS_SETTLE, PASS_DONE };

/* The state one pass gathers while it visits. */
struct pass_state {
	uint64_t now;
	bool closed_only, force;
	bool lingering, quick, nudge;
	struct tp_conn *done;              /* finished closed ones, linked by next */
	/* Connections in a failover: their timers run after conns_lock is released, for a move
	 * takes the other link's locks (under ours, a pass over that link moving a connection here
	 * would take them in the other order). Pinned meanwhile: not released by anyone. */
	struct tp_conn *pins[TP_PASS_PINS];
	int npins;
	int close_fds[TP_PASS_CLOSE];      /* kernel sockets to close after the pass */
	int nclose;
};

/* Under conns_lock: one connection's visit: its timers, and for a closed one its linger, its
 * release (PASS_DONE: off L's list, onto ps->done) or not yet. PASS_SETTLE: it may leave the
 * active list (tp_act_settle()). */
static enum pass_fate pass_visit(struct tp_link *l, struct tp_conn *c, struct pass_state *ps)
{
	uint32_t fl;
	/* single-owner rule: nothing runs here for a connection another process drives (or
	 * nobody since a fork). Acquire: pairs with the release store in tp_conn_own(). */
	bool owned = atomic_load_explicit(&c->owned, memory_order_acquire);
	/* seq_cst: see the store of lingering in tp_link_conns_pass(); it also pairs with the store
	 * in tp_close() as an acquire would (closed_ms, the shutdown state) */
	bool closed = atomic_load_explicit(&c->closed, memory_order_seq_cst);

	if (ps->closed_only && !closed)
		return PASS_KEEP;
	c->act_visits++;
	l->act_visits++;
	fl = TP_ST_GONE;
	/* closed here while a fork cleared its owner: finish it unless the child took it (not
	 * one whose close only gave up our share: tp_close.c, release_share()) */
	if (closed && !owned && !c->share_only)
		owned = tp_conn_own(c) == 0;
	if (owned && tp_fo_get(c) != TP_FO_RUN)
		ps->quick |= tp_conn_timers(c, ps->now) != 0; /* (it may start a failover) */
	if (owned && tp_fo_get(c) == TP_FO_RUN) {
		if (!pass_pin(c, ps->pins, &ps->npins))
			ps->quick = true; /* (the next pass, soon) */
		ps->lingering |= closed;
		return PASS_KEEP;
	}
	if (closed && owned)
		keep_release_if_acked(c, ps->close_fds, &ps->nclose);
	bool finished = closed && owned && linger_done(c, ps->now, &fl);

	if (closed && owned && !finished && !c->fin_nudged &&
	    closed_age(c, ps->now) >= TP_FIN_NUDGE_MS) {
		c->fin_nudged = true; /* (our closing rang nothing: tp_write_st()) */
		ps->nudge = true;
	}

	if (closed && owned && !finished && ps->force) {
		LOG(LL_DEBUG, "transport: slot %u: release forced before its end", c->slot);
		fl = TP_ST_GONE; /* forced before the end: the peer learns it is gone */
	}
	if (closed && !owned)
		LOG(LL_DEBUG, "transport: slot %u: closed here, driven elsewhere", c->slot);
	if (closed && (!owned || finished || ps->force) && !tp_fo_idle(c)) {
		/* tp_close() stores closed under the move's lock and releases the lock after:
		 * the release would free that lock (tp_fo_free()) under it. Next pass. */
		ps->lingering = true;
		return PASS_KEEP;
	}
	if (closed && (!owned || finished || ps->force)) {
		conns_remove(l, c);
		c->next = ps->done;
		c->release_fl = fl; /* (for the release below) */
		ps->done = c;
		return PASS_DONE;
	}
	ps->lingering |= closed;
	if (!closed && owned && tp_witness_watch_due(c, ps->now))
		return PASS_KEEP; /* its witness's watch to add at a later pass */
	return closed ? PASS_KEEP : PASS_SETTLE;
}

/* One pass over L's active connections (tp_active.c; all of them when a full pass is due):
 * their timers (only the closed ones' when CLOSED_ONLY), and the release of closed ones that
 * are finished (with FORCE, of every closed one: an unfinished one with TP_ST_GONE); those
 * left without timer work leave the active list. One pass at a time (the released ones leave
 * the list for a moment): false when another thread's pass runs. */
bool tp_link_conns_pass(struct tp_link *l, uint64_t now, bool closed_only, bool force)
{
	struct pass_state ps = { .now = now, .closed_only = closed_only, .force = force };
	struct tp_conn *c, *next, *keep = NULL;
	bool busy = false;

	/* acq_rel: pairs with the release store that ends the other pass */
	if (!atomic_compare_exchange_strong_explicit(&l->pass_busy, &busy, true,
						     memory_order_acq_rel, memory_order_relaxed))
		return false;
	/* cleared first: a tp_close() from now on sets it again. seq_cst, as the load of each
	 * closed in pass_visit(): against tp_close()'s seq_cst stores of closed, then lingering
	 * (a pass must not both clear a close's flag and miss its connection; a closing one is on
	 * the active list from before its closed store: tp_act_hold()) */
	atomic_store_explicit(&l->lingering, false, memory_order_seq_cst);
	/* probe_soon too, for the same reason: a waiter's flag (tp_link_probe_soon()) stored after
	 * our visit of its connection must outlive the pass. Stored at the end (our visits' result)
	 * a flag set meanwhile was lost, and the helper slept up to 50 ms on the quick probes of a
	 * poll/epoll sleeper whose request the link dropped. seq_cst: as lingering's. */
	if (!closed_only)
		atomic_store_explicit(&l->probe_soon, false, memory_order_seq_cst);
	pthread_mutex_lock(&l->conns_lock);
	t_pass_locked = true;
	for (c = tp_act_take(l, now, closed_only); c; c = next) {
		next = c->act_next;
		enum pass_fate f = pass_visit(l, c, &ps);

		if (f == PASS_DONE || (f == PASS_SETTLE && tp_act_settle(c)))
			continue; /* (off the active list: not linked again below) */
		c->act_next = keep;
		keep = c;
	}
	tp_act_put_back(l, keep);
	t_pass_locked = false;
	pthread_mutex_unlock(&l->conns_lock);
	/* (the kernel's FIN: TP_PASS_CLOSE). The helper is SCHED_BATCH and, having slept, often
	 * has the lower vruntime: a program thread woken on this CPU (a server's accept()) waited
	 * for the whole pass, a dozen closes of ~10 us; a yield after each lets it run. */
	for (int i = 0; i < ps.nclose; i++) {
		raw_close(ps.close_fds[i]);
		sched_yield();
	}
	if (ps.npins)
		pass_pinned(l, ps.pins, ps.npins, now);
	if (ps.nudge)
		ntb_peer_db_ring(l->ntb); /* one ring for every connection that needs it */
	if (ps.lingering) /* (relaxed: setting it only asks for a pass sooner) */
		atomic_store_explicit(&l->lingering, true, memory_order_relaxed);
	/* quick probes still to come on some connection: keep coming (cleared above; a sleeper
	 * may set it meanwhile: a pass at most TP_QUICK_PROBE_MS later clears it once more) */
	if (!closed_only && ps.quick) /* (relaxed: a hint for the helper's sleep) */
		atomic_store_explicit(&l->probe_soon, true, memory_order_relaxed);
	pass_release(l, ps.done);
	/* release: pairs with the CAS that starts the next pass */
	atomic_store_explicit(&l->pass_busy, false, memory_order_release);
	return true;
}

void tp_link_reap(struct tp_link *l)
{
	tp_link_conns_pass(l, tp_now_ms(), true, false);
}
