/* SPDX-License-Identifier: MIT */
/* The connections a pass visits: a link's active list (those whose timers may have work), the
 * idle ones' table and its scan, and the full passes that bring them all back.
 *
 * A pass over every connection every few milliseconds (doorbells, quick probes, lingering
 * closes) cost the helper O(connections), most of them idle. A pass now visits only the active
 * list. What gives a connection timer work, and what puts it on the list:
 *   - unacknowledged or unpublished data, a held message, a FIN to send (tx_lock): tp_send(),
 *     tp_prefix_flush(), tp_shutdown() call tp_act_mark() after their work;
 *   - feedback to publish or republish, a Retry outstanding, a discarding reader (rx_lock):
 *     tp_act_note_rx() under the lock where a read, a poll or a shutdown ran the receive side;
 *   - a close (it lingers, then the pass releases it): tp_act_hold(), for good;
 *   - a failover, a moved connection's prefix, a commit to repeat, ownership after a fork
 *     (atomics): tp_act_mark_sync() after the store;
 *   - a new connection: on the list when registered;
 *   - a transfer context (tp_ring.c: tp_tx_ring_quiet(), tp_rx_ring_quiet()): the sender's
 *     request open (refused, it asks again; unanswered, it repeats), deferred for a quantum, a
 *     ring asked back, RING_RET repeated for a second; the receiver's request unanswered or
 *     refused (the re-asks ring no doorbell: its timers watch the word), a ring it granted
 *     asked back, or whose sender is gone, or that others want (a refusal within two
 *     quanta): tp_act_mark() where tp_ring.c makes that work (ask, defer, yield seen, give
 *     back, answer); a ring held while nobody waits is no work (for ever, as in §6);
 *   - the peer: a Detect (TX_EPOCH), ST flags (RST, GONE, FAILOVER, MOVING...), a ring request
 *     (TX_RING_REQ: its first ask, or a repeat of an unanswered one), a ring asked back
 *     (FB_GRANT's YIELD) or a ring given back unasked (TX_RING_RET: a sender with no memory
 *     for its shadow), each written before the peer rings: when the doorbell rang, the next
 *     pass (TP_ACT_SCAN_MS after the
 *     last scan at the soonest, as the doorbell's passes came when they visited all: a ring
 *     sooner waits for a later pass, which comes for the peer's next probe, at the latest the
 *     100 ms one) compares those five words of each idle connection with what they were when
 *     it was taken off (tp_act_take()): loads of our own window from a table, no walk of the
 *     connections;
 *   - the pool: a request for a ring of this host's pool refused (by any of its processes:
 *     pool_refused_ms changed since the last pass) brings back the idle ones that held a ring
 *     of it, to be asked back after their quantum;
 *   - the link: the peer silent (the witness look, held timers), lost or restarted, the link
 *     taken down (admin): every pass is a full one while so (and once after a restart);
 *   - and every act_sweep_ms (TP_ACT_SWEEP_MS) a full pass anyway: a safety net for anything
 *     missed, which costs what one pass over all cost before, once a second.
 * A pass takes a connection off (tp_act_settle()) when, after its timers ran, nothing of the
 * above is left: under both its locks (tried: a busy one keeps it on) the send side has
 * nothing unacknowledged, held, unpublished or unsent (FIN), no reset armed; the receive side
 * has no feedback unpublished or not yet republished, no Retry outstanding, no Detect
 * unanswered, no reader shut with data to discard; neither side has ring work (above); and no
 * failover runs, no prefix, commit or closing is pending. (A connection in error, not owned
 * since a fork, or moved, has nothing for the timers either.) It records then the fill levels
 * `ntbsock stat` shows (they change only with work that puts it back), the five words the scan
 * compares and whether it holds a ring of our pool.
 *
 * WHO WRITES / WHO READS
 *   field                 writer                                   reader
 *   c->act_on             markers (exchange false -> true),        markers (hint), passes
 *                         a pass (store false under tx_lock and
 *                         rx_lock; CAS back), unregister (true)
 *   c->act_hold           tp_close() (once)                        passes
 *   c->act_next/act_prev  act_lock; while the pass holds the list  the pass, flush_held()
 *   c->act_listed, dead   act_lock                                 push, unregister
 *   c->act_ix, act_visits conns_lock (passes, unregister)          same
 *   l->act_head           act_lock                                 take, flush_held()
 *   l->act_idle[]         conns_lock (passes, unregister)          the scan (conns_lock)
 *   l->act_scan           the helper (on a ring)                   the next pass (exchange)
 *   l->act_refused        conns_lock (passes)                      same
 *
 * A connection is on exactly one of: the active list, a pass's own list (taken), nowhere but
 * the idle table (act_on false), or off everything (unregistered: act_on true, act_dead). The
 * idle table may also keep an entry of one put back on the list since (the scan only marks it
 * again); a pass drops that entry when it takes it.
 *
 * Ordering. Work made under a connection's lock: the pass clears act_on under both locks, a
 * marker loads act_on after making its work under one of them (or under it): if the marker's
 * critical section came first the pass sees the work and keeps the connection; if the pass's
 * came first the marker's load comes after the clearing (the lock orders them) and it puts the
 * connection back. Work that is an atomic stored without the locks: the marker stores it,
 * fences, loads act_on; the pass clears act_on, fences, loads those atomics again (and puts the
 * connection back itself when one is set): with a fence between store and load on both sides,
 * at least one sees the other's store.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* The words of an idle connection's slot (our inbound window) the scan compares: a Detect
 * (TX_EPOCH), ST flags, a ring request (TX_RING_REQ), a grant asked back (FB_GRANT), a ring
 * given back (TX_RING_RET). */
enum { ACT_W_EP, ACT_W_ST, ACT_W_REQ, ACT_W_GRANT, ACT_W_RET, ACT_NW };
static const uint32_t act_words[ACT_NW] = { TP_W_TX_EPOCH, TP_W_ST_FLAGS, TP_W_TX_RING_REQ,
					    TP_W_FB_GRANT, TP_W_TX_RING_RET };

/* An idle connection as the scan sees it. */
struct tp_act_idle {
	const volatile uint8_t *slot; /* its slot in our inbound window */
	uint64_t raw[ACT_NW];         /* those words' raw values when it was taken off */
	struct tp_conn *c;
	bool ring_in;                 /* it held a ring of our pool (a refusal brings it back) */
};

/* Word W (an offset in the slot) of SLOT, raw. Relaxed: what the scan compares, a hint (a
 * visit reads the words checked). */
static uint64_t slot_raw(const volatile uint8_t *slot, uint32_t w)
{
	return atomic_load_explicit((const _Atomic uint64_t *)(const void *)(slot + w),
				    memory_order_relaxed);
}

void tp_act_link_init(struct tp_link *l)
{
	pthread_mutex_init(&l->act_lock, NULL);
	l->act_sweep_ms = TP_ACT_SWEEP_MS;
	l->act_sweep_last = tp_now_ms();
}

void tp_act_link_free(struct tp_link *l)
{
	free(l->act_idle);
	l->act_idle = NULL;
	l->act_idle_n = l->act_idle_cap = 0;
	pthread_mutex_destroy(&l->act_lock);
}

/* Under act_lock: C at the head of the list. */
static void list_add(struct tp_link *l, struct tp_conn *c)
{
	c->act_prev = NULL;
	c->act_next = l->act_head;
	if (l->act_head)
		l->act_head->act_prev = c;
	l->act_head = c;
	c->act_listed = true;
}

void tp_act_push(struct tp_conn *c)
{
	struct tp_link *l = c->link;

	/* acq_rel: the one that turns it on links it (a pass's CAS back is the other contender);
	 * acquire pairs with the release store of false in tp_act_settle(): the pass's last
	 * writes of act_next before ours */
	if (atomic_exchange_explicit(&c->act_on, true, memory_order_acq_rel))
		return;
	pthread_mutex_lock(&l->act_lock);
	if (!c->act_dead) /* (unregistered meanwhile: nothing may hold it any more) */
		list_add(l, c);
	pthread_mutex_unlock(&l->act_lock);
}

void tp_act_hold(struct tp_conn *c)
{
	/* relaxed: the fence in tp_act_mark_sync() orders it before the load of act_on */
	atomic_store_explicit(&c->act_hold, true, memory_order_relaxed);
	tp_act_mark_sync(c);
}

/* Under tx_lock: nothing for the send side's timers (tp_tx_timers(), the commit repeat, the
 * ring's: tp_tx_ring_quiet() with GRANT_RAW, the FB_GRANT word the scan will compare). */
static bool tx_quiet(struct tp_conn *c, uint64_t grant_raw)
{
	/* relaxed rst_armed: a hint, as in tp_tx_timers() (only the timers arm it) */
	return c->msn_next == c->fb_ack && c->tx_i == c->fb_rx_i && c->tx_d == c->fb_rx_d &&
	       !tp_tx_held(c) && !c->tx_dirty && !(c->wr_shut && !c->fin_sent) &&
	       !atomic_load_explicit(&c->rst_armed, memory_order_relaxed) &&
	       tp_tx_ring_quiet(c, grant_raw);
}

/* Under rx_lock: the raw TX_EPOCH word; true when it holds a Detect not answered yet. */
static bool detect_pending(struct tp_conn *c, uint64_t *ret_raw)
{
	const volatile uint8_t *p = c->link->in + tp_slot_off(c->link, c->slot);
	uint32_t v;
	/* acquire: as tp_slot_word() (pairs with the barrier before the sender's TX_EPOCH) */
	uint64_t raw = atomic_load_explicit((const _Atomic uint64_t *)(const void *)
					    (p + TP_W_TX_EPOCH), memory_order_acquire);

	*ret_raw = raw;
	/* (the reading tp_slot_word() last checked valid needs no check: its low half is the
	 * value) */
	if (!raw || (raw != tp_wc_raw(c, TP_W_TX_EPOCH) && !tp_cw_check(c->nonce_in, raw, &v)))
		return false;
	return (uint16_t)((uint32_t)raw >> 16) != c->det_seen; /* (epoch | detect << 16) */
}

/* Is RAW, the ST word now, a valid one other than what the timers last read (tp_st_flags())? */
static bool st_unseen(struct tp_conn *c, uint64_t raw)
{
	return tp_slot_raw_new(c, TP_W_ST_FLAGS, raw);
}

/* Under rx_lock: nothing for the receive side's timers (tp_rx_timers(); the ring's:
 * tp_rx_ring_quiet() with REQ_RAW, the TX_RING_REQ word the scan will compare). */
static bool rx_quiet(struct tp_conn *c, uint64_t req_raw, uint64_t *ret_ep_raw)
{
	return !c->gated && !c->fb_dirty && c->c_d == c->pub_d && c->c_i == c->pub_i &&
	       c->v_msn == c->pub_ack && !(c->rd_shut && !c->eof) &&
	       tp_rx_ring_quiet(c, req_raw) && !detect_pending(c, ret_ep_raw);
}

void tp_act_note_rx(struct tp_conn *c)
{
	uint64_t raw;

	/* relaxed: see tp_act_mark() (we hold rx_lock, under which a pass clears it) */
	if (!atomic_load_explicit(&c->act_on, memory_order_relaxed) &&
	    !rx_quiet(c, tp_slot_raw(c, TP_W_TX_RING_REQ), &raw))
		tp_act_push(c);
}

/* Timer work held in atomics of C, stored without its locks (see the ordering above). */
static bool busy_atomic(const struct tp_conn *c)
{
	/* relaxed (all): flags and stamps, each ordered by the fences (tp_act_mark_sync() /
	 * tp_act_settle()) or looked at again by the next pass; closed also pairs with its
	 * seq_cst store in tp_close() as act_hold does */
	if (atomic_load_explicit(&c->act_hold, memory_order_relaxed) ||
	    atomic_load_explicit(&c->closed, memory_order_relaxed) ||
	    atomic_load_explicit(&c->fo_state, memory_order_relaxed) == TP_FO_RUN)
		return true;
	/* (what only the timers of a connection we drive, not in error, act on) */
	if (!atomic_load_explicit(&c->owned, memory_order_relaxed) ||
	    atomic_load_explicit(&c->error, memory_order_relaxed))
		return false;
	return atomic_load_explicit(&c->pre_on, memory_order_relaxed) ||
	       atomic_load_explicit(&c->commit_ms, memory_order_relaxed) ||
	       atomic_load_explicit(&c->silent_alive, memory_order_relaxed) ||
	       atomic_load_explicit(&c->watch_due_ms, memory_order_relaxed);
}

/* Room for one more idle entry; false when out of memory (the connection stays on). */
static bool idle_reserve(struct tp_link *l)
{
	if (l->act_idle_n < l->act_idle_cap)
		return true;
	uint32_t cap = l->act_idle_cap ? l->act_idle_cap * 2u : 64u;
	struct tp_act_idle *n = realloc(l->act_idle, (size_t)cap * sizeof(*n));

	if (!n)
		return false;
	l->act_idle = n;
	l->act_idle_cap = cap;
	return true;
}

/* Under conns_lock: C's idle entry goes (the last one takes its place). */
static void idle_drop(struct tp_link *l, struct tp_conn *c)
{
	uint32_t i = c->act_ix - 1;

	c->act_ix = 0;
	if (i != --l->act_idle_n) {
		l->act_idle[i] = l->act_idle[l->act_idle_n];
		l->act_idle[i].c->act_ix = i + 1;
	}
}

bool tp_act_settle(struct tp_conn *c)
{
	struct tp_link *l = c->link;
	const volatile uint8_t *slot = l->in + tp_slot_off(l, c->slot);
	uint64_t raw[ACT_NW] = { 0 };
	bool quiet, owned, ring_in = false;

	if (!idle_reserve(l) || busy_atomic(c))
		return false;
	/* acquire: pairs with the release stores of owned (tp_conn_new(), tp_conn_own_slow()) */
	owned = atomic_load_explicit(&c->owned, memory_order_acquire);
	if (tp_mutex_trylock(&c->tx_lock))
		return false;
	if (tp_mutex_trylock(&c->rx_lock)) {
		tp_mutex_unlock(&c->tx_lock);
		return false;
	}
	/* (acquire slot_gone: pairs with the release store in tp_conn_free_slot()) */
	bool gone = atomic_load_explicit(&c->slot_gone, memory_order_acquire);

	/* The ST, ring request, grant and return words as the scan will compare them: read now,
	 * so that a later write is a change. One the timers have not seen (ST, the grant: not the
	 * reading tp_slot_word() last checked valid; the request: not the one
	 * tp_rx_ring_service() last looked at; the return: one naming the ring we hold, which
	 * tp_rx_ring_quiet() counts as work), written since this visit's timers looked, is work
	 * for the next visit. (ST first: the ring's test may read ST checked, which moves what
	 * st_unseen() compares.) */
	raw[ACT_W_ST] = slot_raw(slot, TP_W_ST_FLAGS);
	raw[ACT_W_REQ] = slot_raw(slot, TP_W_TX_RING_REQ);
	raw[ACT_W_GRANT] = slot_raw(slot, TP_W_FB_GRANT);
	raw[ACT_W_RET] = slot_raw(slot, TP_W_TX_RING_RET);
	quiet = !owned || tp_conn_err(c) || tp_fo_get(c) || gone ||
		(!st_unseen(c, raw[ACT_W_ST]) && tx_quiet(c, raw[ACT_W_GRANT]) &&
		 rx_quiet(c, raw[ACT_W_REQ], &raw[ACT_W_EP]));
	if (quiet && owned && !gone) {
		ring_in = c->ent->ring != 0; /* (rx_lock) */
		/* what `ntbsock stat` shows until it is visited again: the fill levels now, which
		 * only work that puts it back on changes (a send, a read, a validation). (Not for
		 * a shell, whose entry is another's now, nor one another process drives.) */
		TP_STAT_SET(c->st->tx_queue_fill,
			    (c->tx_d - c->fb_rx_d) + (c->tx_i - c->fb_rx_i) * 128u);
		TP_STAT_SET(c->st->rx_queue_fill, (c->v_d - c->c_d) + (c->v_i - c->c_i) * 128u);
	}
	if (quiet) {
		if (!raw[ACT_W_EP])
			raw[ACT_W_EP] = slot_raw(slot, TP_W_TX_EPOCH);
		/* release: our writes of act_next before it; pairs with the acquire of the
		 * exchange in tp_act_push() (and see the ordering above: under both locks) */
		atomic_store_explicit(&c->act_on, false, memory_order_release);
	}
	tp_mutex_unlock(&c->rx_lock);
	tp_mutex_unlock(&c->tx_lock);
	if (!quiet)
		return false;
	/* seq_cst fence: pairs with the one in tp_act_mark_sync() (our clearing before the
	 * second look at the atomics, their store before its load of act_on) */
	atomic_thread_fence(memory_order_seq_cst);
	/* relaxed owned: after the fence (a claim since is work to look at again) */
	if (busy_atomic(c) || (!owned && atomic_load_explicit(&c->owned, memory_order_relaxed))) {
		bool off = false;

		/* back on: the pass keeps it, unless a marker put it on the list already.
		 * acq_rel: as the exchange in tp_act_push() */
		return !atomic_compare_exchange_strong_explicit(&c->act_on, &off, true,
								 memory_order_acq_rel,
								 memory_order_relaxed);
	}
	struct tp_act_idle *e = &l->act_idle[l->act_idle_n];

	e->slot = slot;
	memcpy(e->raw, raw, sizeof(e->raw));
	e->c = c;
	e->ring_in = ring_in;
	c->act_ix = ++l->act_idle_n;
	return true;
}

/* Under conns_lock: every idle connection back on the list (a full pass). */
static void wake_all(struct tp_link *l)
{
	pthread_mutex_lock(&l->act_lock);
	for (uint32_t i = 0; i < l->act_idle_n; i++) {
		struct tp_conn *c = l->act_idle[i].c;

		c->act_ix = 0;
		/* acq_rel: as in tp_act_push() (a marker may have put it back already) */
		if (!atomic_exchange_explicit(&c->act_on, true, memory_order_acq_rel))
			list_add(l, c);
	}
	l->act_idle_n = 0;
	pthread_mutex_unlock(&l->act_lock);
}

/* Under conns_lock: the idle connections whose Detect, ST, ring request, grant or return word
 * changed since they were taken off back on the list. Loads of our own window (five per
 * connection, from a table: no walk of the connections). */
static void scan(struct tp_link *l)
{
	for (uint32_t i = 0; i < l->act_idle_n; i++) {
		const struct tp_act_idle *e = &l->act_idle[i];

		for (int w = 0; w < ACT_NW; w++) {
			/* (a change is only a reason to visit; the visit reads them checked) */
			if (slot_raw(e->slot, act_words[w]) != e->raw[w]) {
				tp_act_push(e->c);
				break;
			}
		}
	}
}

/* Under conns_lock: a request for a ring of our pool was refused since the last pass (by any
 * process of this host): the idle connections that held one back on the list, so that their
 * grants are asked back after their quantum (tp_rx_ring_service()). A refused sender asks
 * again every few ms while it waits, so a holder this misses (granted as the refusal came) is
 * found at the next one. */
static void refusals(struct tp_link *l)
{
	/* relaxed: a hint, as tp_rx_ring_quiet() reads it; the same word read later in this pass
	 * (a settle) is no older (coherence), so a refusal after this load is seen either by the
	 * settle (the holder stays) or by the next pass's load (it comes back) */
	uint64_t r = atomic_load_explicit(&l->host->pool_refused_ms, memory_order_relaxed);

	if (r == l->act_refused)
		return;
	l->act_refused = r;
	for (uint32_t i = 0; i < l->act_idle_n; i++)
		if (l->act_idle[i].ring_in)
			tp_act_push(l->act_idle[i].c);
}

/* Must this pass visit every connection? Link events the connections' timers answer each for
 * itself (tp_conn_timers(): the witness look while the peer is silent, the failover of a lost,
 * restarted or downed link), and the periodic safety net. */
static bool full_due(struct tp_link *l, uint64_t now)
{
	/* relaxed: the helper's flags (tp_link_refresh(), tp_link_admin_down()), as the
	 * connections' timers read them */
	return (l->act_sweep_ms && clock_age_ms(now, l->act_sweep_last) >= l->act_sweep_ms) ||
	       atomic_load_explicit(&l->admin_down, memory_order_relaxed) ||
	       atomic_load_explicit(&l->lost, memory_order_relaxed) ||
	       atomic_load_explicit(&l->region_bad, memory_order_relaxed) ||
	       ntb_link_peer_silent(l->ntb) ||
	       atomic_load_explicit(&l->peer_epoch, memory_order_relaxed) != l->act_epoch;
}

struct tp_conn *tp_act_take(struct tp_link *l, uint64_t now, bool closed_only)
{
	struct tp_conn *list, *c;

	if (!closed_only && full_due(l, now)) {
		l->act_sweep_last = now;
		/* relaxed: as in full_due() */
		l->act_epoch = atomic_load_explicit(&l->peer_epoch, memory_order_relaxed);
		atomic_store_explicit(&l->act_scan, false, memory_order_relaxed); /* (all of them) */
		wake_all(l);
	} else if (!closed_only && clock_age_ms(now, l->act_scan_last) >= TP_ACT_SCAN_MS &&
		   /* relaxed: a request a pass takes, nothing is published with it (sooner than
		    * TP_ACT_SCAN_MS after the last scan it waits for a later pass: the next ring's,
		    * the 100 ms one) */
		   atomic_exchange_explicit(&l->act_scan, false, memory_order_relaxed)) {
		l->act_scan_last = now;
		scan(l);
	}
	if (!closed_only && l->host)
		refusals(l);
	pthread_mutex_lock(&l->act_lock);
	list = l->act_head;
	l->act_head = NULL;
	for (c = list; c; c = c->act_next)
		c->act_listed = false;
	pthread_mutex_unlock(&l->act_lock);
	for (c = list; c; c = c->act_next)
		if (c->act_ix)
			idle_drop(l, c); /* (put back on since it was taken off) */
	return list;
}

void tp_act_put_back(struct tp_link *l, struct tp_conn *list)
{
	struct tp_conn *c, *next;

	if (!list)
		return;
	pthread_mutex_lock(&l->act_lock);
	for (c = list; c; c = next) {
		next = c->act_next;
		list_add(l, c);
	}
	pthread_mutex_unlock(&l->act_lock);
}

void tp_act_register(struct tp_conn *c)
{
	struct tp_link *l = c->link;

	pthread_mutex_lock(&l->act_lock);
	c->act_dead = false;
	c->act_ix = 0;
	/* relaxed: under act_lock; a mark before (none is made: set-up registers first) found it
	 * off and listed it already */
	atomic_store_explicit(&c->act_on, true, memory_order_relaxed);
	if (!c->act_listed)
		list_add(l, c);
	pthread_mutex_unlock(&l->act_lock);
}

void tp_act_unregister(struct tp_conn *c)
{
	struct tp_link *l = c->link;

	pthread_mutex_lock(&l->act_lock);
	c->act_dead = true;
	/* relaxed: marks from now on find it on and do nothing (act_dead under the lock for one
	 * that turned it on before) */
	atomic_store_explicit(&c->act_on, true, memory_order_relaxed);
	if (c->act_listed) {
		if (c->act_prev)
			c->act_prev->act_next = c->act_next;
		else
			l->act_head = c->act_next;
		if (c->act_next)
			c->act_next->act_prev = c->act_prev;
		c->act_listed = false;
	}
	c->act_next = c->act_prev = NULL;
	pthread_mutex_unlock(&l->act_lock);
	if (c->act_ix)
		idle_drop(l, c);
}

void tp_act_atfork_child(struct tp_link *l)
{
	struct tp_conn *prev = NULL;

	pthread_mutex_init(&l->act_lock, NULL); /* (another thread of the parent may have held it) */
	l->act_head = NULL;
	l->act_idle_n = 0;
	for (struct tp_conn *c = l->conns; c; prev = c, c = c->next) {
		c->prev = prev;
		c->act_ix = 0;
		c->act_dead = false;
		/* relaxed: the child's one thread */
		atomic_store_explicit(&c->act_on, true, memory_order_relaxed);
		list_add(l, c);
	}
}
