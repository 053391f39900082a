/* SPDX-License-Identifier: MIT */
/* Transfer contexts ([RT]): the data rings of a host's window are a pool, granted to a
 * connection's sender per transfer (tp_int.h: TRANSFER CONTEXTS). The pool (host table, host
 * lock), the sender's side (tx_lock) and the receiver's (rx_lock), both run by the
 * connection's owner. */
#include <stdlib.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* --- the pool (host lock) -------------------------------------------------------------------- */

void tp_pool_init(struct tp_host *h, uint32_t n)
{
	/* (the stack pops ring 0 first) */
	for (uint32_t i = 0; i < n; i++)
		h->pool_stack[i] = (uint16_t)(n - 1u - i);
	h->pool_top = n;
	h->pool_pri = 0;
	atomic_store_explicit(&h->pool_free, n, memory_order_relaxed); /* (host lock) */
}

/*
 * A holder that died between the stack's change and the entry's (tp_pool_take(): the ring
 * popped, not yet granted; tp_pool_put(): the ring stacked, still granted, or a cold put's
 * memmove half done) leaves a ring lost or listed twice. The entries are what the peers write
 * by: a ring granted in one is not free; every other ring is, once. Those the stack still lists
 * keep their order (warm on top, cold below); the ones it lost go to the bottom (cold: their
 * last sender is not known to have stopped).
 */
void tp_pool_rebuild(struct tp_host *h)
{
	uint32_t n = h->pool_n, top = h->pool_top <= n ? h->pool_top : 0, k = 0, used;
	uint8_t *state; /* 0: free, not listed; 1: granted; 3: listed; 2: stacked again */
	uint16_t *stack;

	if (!n || n > TP_MAX_CONTEXTS)
		return;
	state = calloc(n, 1);
	stack = malloc(n * sizeof(*stack));
	if (!state || !stack) {
		free(state);
		free(stack);
		return; /* (as it was: tp_pool_take() and tp_pool_put() check their bounds) */
	}
	used = tp_host_used(h);
	for (uint32_t i = 0; i < used; i++) {
		const struct tp_host_entry *e = &h->e[i];

		if (e->state != TP_ES_FREE && e->ring && e->ring <= n)
			state[e->ring - 1u] = 1;
	}
	for (uint32_t j = 0; j < top; j++) /* listed (and not granted) */
		if (h->pool_stack[j] < n && !state[h->pool_stack[j]])
			state[h->pool_stack[j]] = 3;
	for (uint32_t r = 0; r < n; r++) /* the lost ones first: the bottom */
		if (!state[r])
			stack[k++] = (uint16_t)r;
	for (uint32_t j = 0; j < top; j++) { /* then the listed ones, in order, each once */
		uint16_t r = h->pool_stack[j];

		if (r < n && state[r] == 3) {
			stack[k++] = r;
			state[r] = 2;
		}
	}
	memcpy(h->pool_stack, stack, k * sizeof(*stack));
	h->pool_top = k;
	atomic_store_explicit(&h->pool_free, k, memory_order_relaxed); /* (host lock) */
	free(state);
	free(stack);
}

int tp_pool_take(struct tp_link *l, uint32_t pri, bool ask)
{
	struct tp_host *h = l->host;
	struct tp_rt_pool pool = { .free_num = h->pool_top, .pri = h->pool_pri };

	if (h->pool_top > h->pool_n || h->pool_top > TP_MAX_CONTEXTS)
		h->pool_top = 0; /* (spoilt: no ring; tp_pool_rebuild() after a holder's death) */
	if (!ask && (pool.free_num == 0 || (pool.pri && pool.free_num == 1)))
		return -1; /* (a set-up's ring: not a request, nobody is refused) */
	if (!tp_rt_admit(&pool, pri)) {
		h->pool_pri = pool.pri;
		/* relaxed: counters and a hint (others wait), read unlocked */
		atomic_store_explicit(&h->pool_refused_ms, tp_now_ms(), memory_order_relaxed);
		atomic_fetch_add_explicit(&h->pool_refusals, 1, memory_order_relaxed);
		return -1;
	}
	h->pool_pri = pool.pri;
	uint32_t r = h->pool_stack[--h->pool_top];

	/* relaxed: read unlocked as a hint (tp_link_load(), stat) */
	atomic_store_explicit(&h->pool_free, h->pool_top, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->pool_grants, 1, memory_order_relaxed);
	return r < h->pool_n ? (int)r : -1;
}

void tp_pool_put(struct tp_link *l, uint32_t idx, bool cold)
{
	struct tp_host *h = l->host;

	if (idx >= h->pool_n || h->pool_top >= h->pool_n)
		return;
	if (cold) {
		/* at the bottom: granted again last (its old sender may not have seen the end of
		 * its connection yet, and a late write would spoil another's messages; a clean
		 * end's ring goes on top, tp_slot_free_ended()) */
		memmove(&h->pool_stack[1], &h->pool_stack[0], h->pool_top * sizeof(h->pool_stack[0]));
		h->pool_stack[0] = (uint16_t)idx;
		h->pool_top++;
	} else {
		h->pool_stack[h->pool_top++] = (uint16_t)idx;
	}
	atomic_store_explicit(&h->pool_free, h->pool_top, memory_order_relaxed); /* (above) */
}

/* The host lock without waiting long (the data path's callers hold a connection's lock, which
 * nothing takes under the host lock today; a busy lock is tried again by the timers). */
static bool pool_lock(struct tp_link *l)
{
	for (int i = 0; i < 8; i++) {
		if (tp_host_trylock(l))
			return true;
		cpu_relax();
	}
	return false;
}

static uint16_t gen_next(uint32_t gen)
{
	uint16_t g = (uint16_t)(gen + 1u);

	return g ? g : 1u;
}

/* --- both sides: the cached view of the entry ------------------------------------------------ */

static void out_ring_load(struct tp_conn *c)
{
	struct tp_host_entry *e = c->ent;

	c->out_ring_ok = e->peer_ring && e->peer_ring <= e->peer_pool_n && !e->peer_yield;
	if (c->out_ring_ok && !c->sh_data) {
		/* its shadow (tp_shadow_get()); without one (no memory) the ring goes back at
		 * once, drained as it is (tp_tx_ring_feedback()), and is asked for again later */
		c->sh_data = tp_shadow_get(c->link, c->out.qsize, &c->sh_mapped);
		if (!c->sh_data) {
			c->out_ring_ok = false;
			e->peer_yield = 1;
		}
	}
	if (e->peer_ring) {
		c->out_ring_off = e->peer_pool_off + (uint64_t)(e->peer_ring - 1u) * c->out.qsize;
		c->dseed_out = tp_ring_seed(c->nonce_out, e->peer_ring_gen);
	}
}

static void in_ring_load(struct tp_conn *c)
{
	struct tp_host_entry *e = c->ent;
	struct tp_link *l = c->link;

	if (e->ring && e->ring <= l->geom.pool_n) {
		c->in_ring = l->in + l->geom.pool_off + (uint64_t)(e->ring - 1u) * l->geom.qsize;
		c->dseed_in = tp_ring_seed(c->nonce_in, e->ring_gen);
		c->rx_grant_vd = c->v_d; /* (tp_rx_lapped()) */
		c->rx_lapped = false;
		c->rx_unpub = TP_UNPUB_UNKNOWN; /* (tp_rx_unpublished_next()) */
	} else {
		c->in_ring = NULL;
	}
}

void tp_ring_conn_init(struct tp_conn *c)
{
	c->out.pool_off = c->ent->peer_pool_off;
	c->out.pool_n = c->ent->peer_pool_n;
	c->news_out = tp_news_off(c->out.pool_off, c->ent->peer_slot);
	c->news_slot = c->ent->peer_slot;
	out_ring_load(c);
	in_ring_load(c);
	c->rq_raw = 0;
	c->tx_faulted = c->rx_faulted = c->tx_ring_mapped = false;
}

/* --- sender (tx_lock) ------------------------------------------------------------------------ */

/* Ask for a ring (RING_REQ) with CnctPRI PRI. The first ask of a transfer rings the receiver
 * (its helper or reader answers), and so does a repeat of one left unanswered (the word or the
 * doorbell lost: an idle receiver's helper looks at the word only when rung, tp_active.c); the
 * repeats after a refusal do not: its timers look at the word while it refused one (thousands
 * of waiting senders would otherwise ring it thousands of times a ms). */
static void tx_request(struct tp_conn *c, uint32_t pri, bool ring)
{
	struct tp_host_entry *e = c->ent;

	e->rq = gen_next(e->rq);
	e->rq_pri = pri > 0xffffu ? 0xffffu : pri;
	e->rq_open = 1;
	c->rq_ms = tp_now_ms();
	tp_peer_word(c, TP_W_TX_RING_REQ, e->rq | e->rq_pri << 16);
	ntb_wc_flush(c->link->ntb);
	if (ring)
		ntb_peer_db_ring(c->link->ntb);
	/* our timers ask again if it is refused or lost (relaxed: a hint for the helper), so the
	 * connection is on the active list (tp_active.c) until it is granted */
	atomic_store_explicit(&c->link->probe_soon, true, memory_order_relaxed);
	tp_act_mark(c);
}

void tp_tx_ring_want(struct tp_conn *c, size_t backlog)
{
	struct tp_host_entry *e = c->ent;

	if (e->peer_ring || e->rq_open)
		return; /* granted (maybe asked back: given back once drained), or asked */
	/* a write the inline slots carry in a few laps goes without one (the ring's grant and
	 * return would cost more than it saves); a larger one, or a stream of them, asks */
	if (backlog <= TP_RING_ASK_BYTES && c->rq_inline_bytes <= TP_RING_ASK_STREAM)
		return;
	/* a ring we gave back because others waited: not asked for again before they had a
	 * quantum's chance (their asks repeat every few ms; two rings free at once would go to
	 * whoever asks first, [RT]'s rule, which would be us) */
	if (c->ret_ms && clock_age_ms(tp_now_ms(), c->ret_ms) < TP_GRANT_QUANTUM_MS) {
		if (!c->rq_deferred)
			c->hold_ms = tp_now_ms();
		c->rq_deferred = true; /* (the timers ask then) */
		atomic_store_explicit(&c->link->probe_soon, true, memory_order_relaxed); /* a hint */
		tp_act_mark(c);
		return;
	}
	c->rq_deferred = false;
	c->rq_claim = false;
	c->rq_inline_bytes = 0;
	c->rq_nacks = 0;
	c->hold_ms = tp_now_ms();
	tx_request(c, 0, true);
}

/* Give the ring back: everything written into it was released (so acknowledged space, nothing
 * to retransmit from it). */
static void tx_give_back(struct tp_conn *c)
{
	struct tp_host_entry *e = c->ent;

	e->ret_gen = e->peer_ring_gen;
	e->peer_ring = 0;
	e->peer_yield = 0;
	c->ret_ms = tp_now_ms();
	c->ret_rung = false;
	c->hold_ms = c->ret_ms;
	c->out_ring_ok = false;
	/* our last writes into the ring (and their release) before the word that frees it */
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_TX_RING_RET, e->ret_gen);
	ntb_wc_flush(c->link->ntb);
	ntb_peer_db_ring(c->link->ntb);
	tp_act_mark(c); /* (the timers repeat RING_RET for a second: a poll may give it back) */
	/* drained: its shadow holds nothing to send again (tp_shadow_get()) */
	tp_shadow_put(c->link, c->sh_data, c->out.qsize, c->sh_mapped, c->out.pool_n);
	c->sh_data = NULL;
	c->sh_mapped = 0;
	c->tx_faulted = false;
}

static bool tx_drained(const struct tp_conn *c)
{
	return c->fb_rx_d == c->tx_d && c->tx_d == c->tx_d_pub && !tp_tx_held(c);
}

void tp_tx_ring_feedback(struct tp_conn *c)
{
	struct tp_host_entry *e = c->ent;
	uint32_t v, g;

	/* (RQ_CLAIM: the grant a claimed offer may have brought, tp_offer.c; never refused) */
	if ((e->rq_open || c->rq_claim) && tp_slot_word(c, TP_W_FB_RANS, &v) &&
	    (v & 0xffffu) == e->rq) {
		if (v & TP_RANS_NACK) {
			c->rq_nacked = true; /* the timers ask again, CnctPRI + 1 */
		} else if (tp_slot_word(c, TP_W_FB_GRANT, &g) && (g >> 16) &&
			   (g >> 16) != e->ret_gen && (g & 0xfffu) < e->peer_pool_n &&
			   !e->peer_ring) {
			/* granted: the ring is ours until asked back */
			e->peer_ring = (g & 0xfffu) + 1u;
			e->peer_ring_gen = g >> 16;
			e->peer_yield = 0;
			e->rq_open = 0;
			c->rq_claim = false;
			c->rq_nacked = false;
			/* (its pages: tp_tx_prefault()) */
			c->tx_faulted = c->tx_ring_mapped = false;
			out_ring_load(c);
		}
	}
	/* asked back: no new message goes into it; given back once drained */
	if (e->peer_ring && !e->peer_yield && tp_slot_word(c, TP_W_FB_GRANT, &g) &&
	    (g & TP_GRANT_YIELD) && (g >> 16) == e->peer_ring_gen) {
		e->peer_yield = 1;
		c->out_ring_ok = false;
		c->hold_ms = tp_now_ms();
		tp_act_mark(c); /* (given back once drained: timer work until then) */
	}
	if (e->peer_ring && e->peer_yield && tx_drained(c))
		tx_give_back(c);
}

void tp_tx_ring_timers(struct tp_conn *c, uint64_t now, bool republish)
{
	struct tp_host_entry *e = c->ent;

	/* refused (the priority rises: [RT]'s Nack), or unanswered (a lost word): ask again,
	 * after 1 ms, then at doubling intervals up to 16 ms while refused (several asks per
	 * quantum of the holders); a RING_RET the link lost goes again first */
	uint32_t wait = 1u << (c->rq_nacks < 4 ? c->rq_nacks : 4);

	if (e->rq_open && clock_age_ms(now, c->rq_ms) >= (c->rq_nacked ? wait : 4u)) {
		if (e->ret_gen)
			tp_peer_word(c, TP_W_TX_RING_RET, e->ret_gen);
		if (c->rq_nacked)
			c->rq_nacks++;
		tx_request(c, e->rq_pri + (c->rq_nacked ? 1u : 0u), !c->rq_nacked);
		c->rq_nacked = false;
		return;
	}
	if (c->rq_deferred && !e->peer_ring && !e->rq_open &&
	    clock_age_ms(now, c->ret_ms) >= TP_GRANT_QUANTUM_MS) {
		c->rq_deferred = false;
		c->rq_inline_bytes = 0;
		c->rq_nacks = 0;
		tx_request(c, 0, true);
		return;
	}
	/* a RING_RET again for a second after it (the receiver keeps the ring, asked back, until
	 * it sees one: a lost word would hold it for ever); once, a scan interval after it, with
	 * the doorbell: an idle receiver compares the word only after a ring (tp_active.c), and
	 * one whose first word was lost would see the repeats at its next full pass only */
	if (e->ret_gen && c->ret_ms && clock_age_ms(now, c->ret_ms) < 1000u) {
		tp_peer_word(c, TP_W_TX_RING_RET, e->ret_gen);
		if (!c->ret_rung && clock_age_ms(now, c->ret_ms) >= TP_ACT_SCAN_MS) {
			c->ret_rung = true;
			ntb_wc_flush(c->link->ntb);
			ntb_peer_db_ring(c->link->ntb);
		}
	}
	if (republish) {
		if (e->rq)
			tp_peer_word(c, TP_W_TX_RING_REQ, e->rq | e->rq_pri << 16);
		if (e->ret_gen)
			tp_peer_word(c, TP_W_TX_RING_RET, e->ret_gen);
	}
}

uint32_t tp_tx_ring_next(const struct tp_conn *c, uint64_t now)
{
	uint32_t wait = c->rq_nacked ? 1u << (c->rq_nacks < 4 ? c->rq_nacks : 4) : 4u, age;

	if (c->rq_deferred)
		wait = TP_GRANT_QUANTUM_MS;
	else if (!c->ent->rq_open)
		return c->ret_ms && clock_age_ms(now, c->ret_ms) < 1000u ? 100u : 0u;
	age = (uint32_t)clock_age_ms(now, c->rq_deferred ? c->ret_ms : c->rq_ms);
	return age >= wait ? 1u : wait - age;
}

bool tp_tx_ring_hold_big(const struct tp_conn *c, size_t len)
{
	const struct tp_host_entry *e = c->ent;

	if (len <= TP_RING_ASK_BYTES || c->out_ring_ok ||
	    !(e->rq_open || c->rq_deferred || (e->peer_ring && e->peer_yield)))
		return false;
	/* not for longer than TP_RING_HOLD_MS: a program that reads its sockets one at a time can
	 * wait for this one while the ring it needs holds another's unread bytes (kernel TCP's
	 * per-socket buffers never tie them): the write then trickles through the inline slots */
	return c->hold_ms && clock_age_ms(tp_now_ms(), c->hold_ms) < TP_RING_HOLD_MS;
}

bool tp_tx_ring_waiting(const struct tp_conn *c)
{
	return c->ent->rq_open || c->rq_deferred;
}

bool tp_tx_ring_quiet(struct tp_conn *c, uint64_t grant_raw)
{
	const struct tp_host_entry *e = c->ent;
	uint32_t v;

	/* a request open (asked again when refused or unanswered), one deferred for a quantum, a
	 * ring asked back (given back once drained), RING_RET repeated for a second after it */
	if (e->rq_open || c->rq_deferred || (e->peer_ring && e->peer_yield) ||
	    (e->ret_gen && c->ret_ms && tp_tx_ring_next(c, tp_now_ms())))
		return false;
	/* a ring held: a grant word the timers have not read (a YIELD written since this visit's
	 * feedback looked) is work for the next visit; after it, the scan finds the change (the
	 * receiver rings with each YIELD) */
	return !e->peer_ring || !grant_raw || grant_raw == tp_wc_raw(c, TP_W_FB_GRANT) ||
	       !tp_cw_check(c->nonce_in, grant_raw, &v);
}

/* --- receiver (rx_lock) ---------------------------------------------------------------------- */

static void rx_grant_publish(struct tp_conn *c)
{
	struct tp_host_entry *e = c->ent;

	tp_peer_word(c, TP_W_FB_GRANT, (e->ring - 1u) | (e->ring_yield ? TP_GRANT_YIELD : 0u) |
				       e->ring_gen << 16);
}

void tp_rx_ring_republish(struct tp_conn *c)
{
	struct tp_host_entry *e = c->ent;

	if (e->ring)
		rx_grant_publish(c);
	if (e->rq_ans)
		tp_peer_word(c, TP_W_FB_RANS, e->rans);
}

/* Free our ring of C (host lock; rx_lock) unless something in it is still to be read: a sender
 * gives it back only drained, so a RING_RET with unread records or unvalidated published bytes
 * in it is not believed (a peer's fault: the ring stays, nothing is lost). DEAD_UNREAD: its
 * sender is gone and did not reset (it may have died: what it held or wrote and did not publish
 * is delivered from there, tp_rx_death_end()); not for a ring given back drained, which holds
 * neither (nor a reset's: nothing is delivered after one). COLD: to the pool's bottom
 * (tp_pool_put()). */
static void rx_ring_free(struct tp_conn *c, const char *why, bool dead_unread, bool cold)
{
	struct tp_host_entry *e = c->ent;
	struct tp_desc d;
	uint32_t txd, fp, gap;

	if (c->c_d != c->v_d || (tp_rx_txd(c, &txd) && txd != c->v_d) ||
	    (dead_unread && (tp_rx_held_next(c) || tp_rx_unpublished_next(c, &d, &fp, &gap))))
		return;
	if (!pool_lock(c->link))
		return; /* (the next look) */
	LOG(LL_DEBUG, "transport: slot %u: ring %u %s", c->slot, e->ring - 1u, why);
	tp_pool_put(c->link, e->ring - 1u, cold);
	e->ring = 0;
	e->ring_yield = 0;
	tp_host_unlock(c->link);
	c->in_ring = NULL;
	/* others wait (it was asked back): the timers of this host's connections look at their
	 * requests soon (relaxed: a hint for the helper's next pass, within 5 ms) */
	atomic_store_explicit(&c->link->lingering, true, memory_order_relaxed);
}

/* Did the sender give our ring back (RING_RET = its generation)? */
static bool rx_ring_given_back(struct tp_conn *c)
{
	uint32_t v;

	return c->ent->ring && tp_slot_word(c, TP_W_TX_RING_RET, &v) && v == c->ent->ring_gen;
}

/* The sender gave our ring back once it was drained. */
static void rx_ring_returned(struct tp_conn *c)
{
	if (rx_ring_given_back(c))
		rx_ring_free(c, "given back", false, false);
}

void tp_rx_ring_service(struct tp_conn *c, bool timers)
{
	struct tp_host_entry *e = c->ent;
	uint64_t raw = tp_slot_raw(c, TP_W_TX_RING_REQ);
	uint32_t v, rq;

	/* given back: asked back, or unasked (a sender with no memory for its shadow), seen by
	 * the timers, and before a new request is answered (the sender asks only after it gave
	 * back what it held: answered with that ring, it would refuse the grant and ask again) */
	if (e->ring && (e->ring_yield || timers || raw != c->rq_raw))
		rx_ring_returned(c);
	if (raw != c->rq_raw && tp_slot_word(c, TP_W_TX_RING_REQ, &v) && (rq = v & 0xffffu) &&
	    rq != e->rq_ans) {
		if (!e->ring) {
			int r;

			if (!pool_lock(c->link))
				return; /* (rq_raw unchanged: the next look tries again) */
			r = tp_pool_take(c->link, v >> 16, true);
			if (r >= 0) {
				e->ring = (uint32_t)r + 1u;
				e->ring_gen = gen_next(e->ring_gen);
				e->ring_ms = tp_now_ms();
				e->ring_yield = 0;
			}
			tp_host_unlock(c->link);
			if (r >= 0) {
				in_ring_load(c);
				c->rx_faulted = false;
			}
		}
		if (e->ring) {
			/* (also a grant the sender has not seen: this answers it again) */
			rx_grant_publish(c);
			e->rans = rq;
		} else {
			e->rans = rq | TP_RANS_NACK;
		}
		LOG(LL_DEBUG, "transport: slot %u: ring request %u pri %u: %s %u gen %u", c->slot,
		    rq, v >> 16, e->ring ? "ring" : "refused", e->ring ? e->ring - 1u : 0u,
		    e->ring_gen);
		e->rq_ans = rq;
		/* the grant before the answer that sends the sender to it */
		ntb_to_peer_barrier(c->link->ntb);
		tp_peer_word(c, TP_W_FB_RANS, e->rans);
		ntb_wc_flush(c->link->ntb);
		ntb_peer_db_ring(c->link->ntb);
		/* timer work (tp_rx_ring_quiet()): a refused sender's asks ring no doorbell, and a
		 * grant is asked back after its quantum; a pass that takes the connection off again
		 * records that it holds a ring (a refusal brings it back: tp_active.c) */
		tp_act_mark(c);
	}
	c->rq_raw = raw;
	if (!timers || !e->ring)
		return;
	uint32_t st = tp_st_flags(c);

	if (atomic_load_explicit(&c->peer_gone, memory_order_relaxed) ||
	    atomic_load_explicit(&c->peer_died, memory_order_relaxed) ||
	    (st & (TP_ST_RST | TP_ST_GONE))) {
		/* its sender is gone: once what it wrote was read, the ring is the pool's, at the
		 * bottom (a sender that reset or was lost may still write late, as at
		 * tp_slot_free(); relaxed: sticky flags, a late look frees it at the next pass) */
		rx_ring_free(c, "freed: its sender is gone", !(st & TP_ST_RST), true);
		return;
	}
	if (e->ring_yield) {
		/* asked back, not given back yet: the word again (the link may have lost it; an idle
		 * sender looks when rung) */
		rx_grant_publish(c);
		ntb_wc_flush(c->link->ntb);
		ntb_peer_db_ring(c->link->ntb);
		return;
	}
	/* relaxed: a hint (when a request was last refused here) */
	uint64_t refused = atomic_load_explicit(&c->link->host->pool_refused_ms,
						memory_order_relaxed), now = tp_now_ms();

	if (clock_age_ms(now, e->ring_ms) >= TP_GRANT_QUANTUM_MS && refused &&
	    clock_age_ms(now, refused) < 2u * TP_GRANT_QUANTUM_MS) {
		/* others wait: ours goes back after its quantum */
		e->ring_yield = 1;
		LOG(LL_DEBUG, "transport: slot %u: ring %u asked back", c->slot, e->ring - 1u);
		atomic_fetch_add_explicit(&c->link->host->pool_yields, 1, memory_order_relaxed);
		rx_grant_publish(c);
		ntb_wc_flush(c->link->ntb);
		ntb_peer_db_ring(c->link->ntb);
	}
}

/* Its sender is gone (its ring is the pool's once what it wrote was read). */
static bool rx_sender_gone(struct tp_conn *c)
{
	/* relaxed: sticky flags, as in tp_rx_ring_service() */
	return atomic_load_explicit(&c->peer_gone, memory_order_relaxed) ||
	       atomic_load_explicit(&c->peer_died, memory_order_relaxed) ||
	       (tp_st_flags(c) & (TP_ST_RST | TP_ST_GONE));
}

bool tp_rx_ring_quiet(struct tp_conn *c, uint64_t req_raw)
{
	const struct tp_host_entry *e = c->ent;

	/* a request not answered yet (a lost doorbell, a busy host lock), or refused: its sender
	 * asks again with no doorbell, and only the timers look */
	if (req_raw != c->rq_raw || (e->rq_ans && (e->rans & TP_RANS_NACK)))
		return false;
	if (!e->ring)
		return true;
	/* asked back (RING_RET awaited, GRANT | YIELD written again), given back unasked (the
	 * timers free it; the scan compares the word only from the settle on), or its sender
	 * gone */
	if (e->ring_yield || rx_ring_given_back(c) || rx_sender_gone(c))
		return false;
	/* others refused lately: asked back after its quantum (relaxed: a hint, as there) */
	uint64_t refused = atomic_load_explicit(&c->link->host->pool_refused_ms,
						memory_order_relaxed);

	return !refused || clock_age_ms(tp_now_ms(), refused) >= 2u * TP_GRANT_QUANTUM_MS;
}
