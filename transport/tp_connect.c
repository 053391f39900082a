/* SPDX-License-Identifier: MIT */
/* Connection set-up, client side ([RT] Apply/Ack/Nack): reserve a context on the peer, commit
 * or give it up (Cancel). The server side: tp_accept.c. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

void tp_apply_fill(struct tp_link *l, uint32_t slot, uint8_t type, uint32_t pri,
		   uint32_t apply_flags, struct tp_pkt *p)
{
	struct tp_host_entry *e = &l->host->e[slot];

	memset(p, 0, sizeof(*p));
	p->type = type;
	p->msgid = e->msgid;
	p->pri = pri;
	p->client_slot = slot;
	p->client_nonce = e->nonce;
	tp_pkt_set_slot_off(p, tp_slot_off(l, slot));
	p->inline_n = l->geom.inline_n;
	p->qsize = l->geom.qsize;
	tp_pkt_set_pool(p, l, e);
	p->key = e->key;
	p->apply_flags = apply_flags;
}

static int apply_send_type(struct tp_link *l, uint32_t slot, const struct tp_tcxt *t,
			   uint8_t type, uint32_t apply_flags)
{
	struct tp_pkt p;

	tp_apply_fill(l, slot, type, t->pri, apply_flags, &p);
	/* (under the host lock) */
	atomic_store_explicit(&l->host->e[slot].result, 0, memory_order_relaxed);
	return tp_mbox_send(l, &p);
}

/* The client watches for the answer for TP_ACK_SPIN_NS after each Apply (ack_spin()): a peer
 * host that serves the link answers within tens of microseconds, and a futex sleep and wake-up
 * cost more than that. While it watches, the server answers without a ring (tp_mbox.c: a ring
 * would wake our helper for nothing). An answer later than that is found by the sleeps that
 * follow: the server rings while one of our set-ups sleeps (tp_mbox_sleepers()), and each sleep
 * lasts 1 ms at most. */
#define TP_ACK_SPIN_NS 150000u

static void apply_send(struct tp_link *l, uint32_t slot, const struct tp_tcxt *t, uint32_t flags)
{
	apply_send_type(l, slot, t, TP_PKT_APPLY, TP_APPLY_WATCH | flags);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Until END_NS, wait for the doorbell to move from SEEN_DB or the peer's mailbox index (raw
 * word) from SEEN_MBOX; true when one did. Lock-free: both words are only read here; what they
 * announce is read under the host lock by the caller. */
static bool ack_spin(struct tp_link *l, uint32_t seen_db, uint64_t seen_mbox, uint64_t end_ns)
{
	for (unsigned i = 1;; i++) {
		/* acquire (in both reads): pairs with the peer's release of the index / ring */
		if (tp_in_word(l, TP_OFF_MBOX_TX) != seen_mbox || ntb_db_read(l->ntb) != seen_db)
			return true;
		cpu_relax();
		if (i % 64u == 0 && mono_ns() >= end_ns)
			return false;
	}
}

/* The Cancel of a set-up given up, under the host lock. A server's accept() waits for an
 * Apply it answered until the client decides (tp_attach()): a Cancel that cannot be sent now
 * (the mailbox full, or the peer's heartbeat late on a starved host: the link looks down) is
 * tried again for TP_CANCEL_RETRY_MS, so that the server is not kept waiting (it gives up after
 * its setup_timeout_ms, staying tcp all the same). */
#define TP_CANCEL_RETRY_MS 500u

static void cancel_send(struct tp_link *l, uint32_t slot, const struct tp_tcxt *t)
{
	uint64_t end = tp_now_ms() + TP_CANCEL_RETRY_MS;

	while (apply_send_type(l, slot, t, TP_PKT_CANCEL, 0) < 0 && tp_now_ms() < end) {
		tp_host_unlock(l);
		usleep(1000);
		tp_link_refresh(l);
		tp_host_lock(l);
		tp_mbox_process(l); /* (frees mailbox slots; a new peer session resets indices) */
	}
	apply_send_type(l, slot, t, TP_PKT_CANCEL, 0);
}

/* One client set-up under way: its transmission context ([RT]) and its Apply's timing. */
struct setup {
	struct tp_tcxt t;
	struct tp_host_entry *e;
	uint32_t slot, apply_flags;
	uint64_t sent_ms, spin_end; /* the last Apply sent (tp_now_ms()), its spin's end (ns) */
};

/* Can a set-up start on L at all? 0, or the error with *RET_REASON. */
static int connect_check(struct tp_link *l, const struct tp_key *key, uint32_t apply_flags,
			 enum tp_reason *ret_reason)
{
	/* relaxed region_bad: the helper's verdict, a flag nothing is published with */
	if (!tp_link_refresh(l) || atomic_load_explicit(&l->region_bad, memory_order_relaxed)) {
		*ret_reason = TP_REASON_LINK_DOWN;
		return -ENOLINK;
	}
	if (tp_link_admin_down_recent(l)) {
		*ret_reason = TP_REASON_ADMIN_DOWN;
		return -ENOLINK;
	}
	if (!(apply_flags & TP_APPLY_REATTACH) && !tp_peer_listens(l, tp_key_server_port(key))) {
		*ret_reason = TP_REASON_NO_LISTENER;
		return -ECONNREFUSED;
	}
	return 0;
}

/* Take a context of our host for the set-up: its slot, with the host lock held; or a negative
 * error (the lock released) with *RET_REASON. */
static int slot_reserve(struct tp_link *l, enum tp_reason *ret_reason)
{
	/* relaxed: a hint (see struct tp_link) */
	uint64_t busy = atomic_load_explicit(&l->host_busy_ms, memory_order_relaxed), now;
	int slot;

	/* A process of this host stopped while it holds the lock keeps it while it stays
	 * stopped: the connection goes tcp once the wait finds the holder stopped (after
	 * TP_HOST_WAIT_MS; within TP_HOST_BUSY_MS of such a find, at once), instead of every
	 * connect() of the host hanging */
	if (!tp_host_lock_within(l, busy && clock_age_ms(tp_now_ms(), busy) < TP_HOST_BUSY_MS ?
				    0 : TP_HOST_WAIT_MS)) {
		now = tp_now_ms();
		if (!busy || clock_age_ms(now, busy) >= TP_HOST_BUSY_MS) {
			LOG(busy ? LL_DEBUG : LL_WARN, "transport: the host lock is held by a "
			    "stopped process (pid %d): new connections go tcp while it stays so",
			    (int)atomic_load_explicit(&l->host->lock_pid, memory_order_relaxed));
			atomic_store_explicit(&l->host_busy_ms, now ? now : 1, memory_order_relaxed);
		}
		*ret_reason = TP_REASON_HOST_BUSY;
		return -EAGAIN;
	}
	if (busy)
		atomic_store_explicit(&l->host_busy_ms, 0, memory_order_relaxed);
	if (tp_host_lost(l)) { /* (checked under the lock: taking it may be what faults) */
		tp_host_unlock(l);
		*ret_reason = TP_REASON_LOCAL_ERROR;
		return -EIO;
	}
	tp_mbox_process(l);
	slot = tp_slot_alloc(l, TP_ES_CONNECTING, tp_self_pid());
	if (slot < 0) {
		/* our closed connections may hold the contexts until the helper's next pass:
		 * finish those that are done, then look again */
		tp_host_unlock(l);
		tp_link_reap(l);
		tp_host_lock(l);
		if (!tp_host_lost(l)) {
			tp_host_reclaim_if_short(l); /* and those of dead processes */
			slot = tp_slot_alloc(l, TP_ES_CONNECTING, tp_self_pid());
		}
	}
	if (slot < 0) {
		tp_host_unlock(l);
		*ret_reason = TP_REASON_NO_CONTEXT;
		return -EAGAIN;
	}
	return slot;
}

/* Under the host lock: send S's Apply (again) at NOW and spin for its answer afresh. */
static void apply_again(struct tp_link *l, struct setup *s, uint64_t now)
{
	apply_send(l, s->slot, &s->t, s->apply_flags);
	s->sent_ms = now;
	s->spin_end = mono_ns() + TP_ACK_SPIN_NS;
}

/* Under the host lock: the peer's answer RES to S's Apply (Ack, Nack, or none yet: its timer at
 * NOW) applied to S's context ([RT]); an Apply is sent again where the protocol says so. */
static void apply_answer(struct tp_link *l, struct setup *s, uint32_t res, uint64_t now)
{
	const struct tp_params *pp = &l->params;

	if (res == TP_PKT_ACK) {
		tp_rt_tcxt_event(&s->t, TP_EV_ACK, s->t.msgid, pp->max_err);
	} else if (res == TP_PKT_NACK) {
		/* relaxed: under the host lock, as its write (on_answer()) */
		uint32_t why = atomic_load_explicit(&s->e->result_reason, memory_order_relaxed);
		enum tp_rt_event ev = why == TP_REASON_NO_LISTENER ? TP_EV_NACK_NOLISTEN : TP_EV_NACK;

		if (why == TP_REASON_PEER_ERROR) {
			s->t.state = TP_TC_FAILED;
			s->t.reason = TP_REASON_PEER_ERROR;
		} else if (tp_rt_tcxt_event(&s->t, ev, s->t.msgid, pp->max_err)) {
			/* Nack: CnctPRI + 1 and Apply again after a pause that grows to 5 ms */
			tp_host_unlock(l);
			usleep(s->t.pri < 25u ? 200u * s->t.pri : 5000u);
			tp_host_lock(l);
			apply_again(l, s, now);
		}
	} else if (now - s->sent_ms >= tp_rt_cnct_timer(pp->cnct_timeout_ms, s->t.expired)) {
		if (tp_rt_tcxt_event(&s->t, TP_EV_TIMER, s->t.msgid, pp->max_err)) {
			LOG(LL_DEBUG, "transport: Apply msgid %u unanswered for %llu ms: "
			    "again", s->t.msgid, (unsigned long long)(now - s->sent_ms));
			apply_again(l, s, now); /* TimerCnct: same MsgID */
		}
	}
}

/* Under the host lock: S fails at DEADLINE; once answered (SENDING) the peer's geometry must fit
 * our window, and the context opens. */
static void apply_decide(struct tp_link *l, struct setup *s, uint64_t now, uint64_t deadline)
{
	struct tp_host_entry *e = s->e;

	if (s->t.state == TP_TC_CONNECTING && now >= deadline) {
		s->t.state = TP_TC_FAILED;
		s->t.reason = s->t.pri ? TP_REASON_NO_CONTEXT : TP_REASON_TIMEOUT;
	}
	if (s->t.state == TP_TC_SENDING) {
		if (!tp_geom_valid(l, e->peer_slot_off, e->peer_inline_n, e->peer_qsize) ||
		    !tp_pool_valid(l, e->peer_pool_off, e->peer_pool_n, e->peer_qsize,
				   e->peer_ring)) {
			s->t.state = TP_TC_FAILED;
			s->t.reason = TP_REASON_PEER_ERROR;
		} else {
			e->state = TP_ES_OPEN;
		}
	}
}

/* Under the host lock, which it releases: S failed; its context is freed (the peer told when it
 * may hold one for it). The error for the caller, with *RET_REASON. */
static int apply_failed(struct tp_link *l, struct setup *s, enum tp_reason *ret_reason)
{
	/* relaxed: under the host lock, as every write of result */
	if (atomic_load_explicit(&s->e->result, memory_order_relaxed) == TP_PKT_ACK)
		/* answered after all: tell the peer */
		tp_ent_st_add(l, s->e, TP_ST_RST);
	else if (s->t.reason == TP_REASON_TIMEOUT || s->t.reason == TP_REASON_NO_CONTEXT)
		/* unanswered (or the answer is late): the peer may still reserve a context for
		 * this Apply; withdraw it before the caller's TCP connect lets the server accept.
		 * Nothing answers a Cancel, nor repeats one the link loses: twice (the second
		 * finds nothing to withdraw). */
		cancel_send(l, s->slot, &s->t);
	tp_slot_free(l, s->slot);
	tp_host_unlock(l);
	*ret_reason = s->t.reason;
	LOG(LL_DEBUG, "transport: connect failed: %s", tp_reason_str(s->t.reason));
	return s->t.reason == TP_REASON_TIMEOUT ? -ETIMEDOUT :
	       s->t.reason == TP_REASON_NO_CONTEXT ? -EAGAIN : -ECONNREFUSED;
}

/* Send S's first Apply and wait for the set-up to be decided by DEADLINE: 0 once answered (the
 * context open), or the error of apply_failed(). Called with the host lock held; returns
 * without it. */
static int apply_until_decided(struct tp_link *l, struct setup *s, uint64_t deadline,
			       enum tp_reason *ret_reason)
{
	apply_send(l, s->slot, &s->t, s->apply_flags);
	tp_host_unlock(l);
	s->sent_ms = tp_now_ms();
	s->spin_end = mono_ns() + TP_ACK_SPIN_NS;
	for (;;) {
		uint32_t seen = ntb_db_read(l->ntb);
		uint64_t seen_mbox = tp_in_word(l, TP_OFF_MBOX_TX), now;
		uint32_t res;

		tp_host_lock(l);
		tp_mbox_process(l);
		/* acquire: pairs with the release store of result in on_answer() */
		res = atomic_load_explicit(&s->e->result, memory_order_acquire);
		now = tp_now_ms();
		apply_answer(l, s, res, now);
		apply_decide(l, s, now, deadline);
		if (s->t.state == TP_TC_FAILED)
			return apply_failed(l, s, ret_reason);
		tp_host_unlock(l);
		if (s->t.state == TP_TC_SENDING)
			return 0;
		if (mono_ns() < s->spin_end && ack_spin(l, seen, seen_mbox, s->spin_end))
			continue;
		/* asleep: the server rings for answers from now on; an answer written before it
		 * read our word is seen here (the look after the fence in tp_mbox_sleepers()) */
		tp_host_lock(l);
		tp_mbox_sleepers(l, s->slot, true);
		tp_host_unlock(l);
		int rc = tp_in_word(l, TP_OFF_MBOX_TX) == seen_mbox ? ntb_db_wait(l->ntb, seen, 1) : 0;

		tp_host_lock(l);
		tp_mbox_sleepers(l, s->slot, false);
		tp_host_unlock(l);
		if (rc == -ENOLINK)
			usleep(1000); /* (no doorbell to sleep on: the link went down) */
	}
}

/* tp_connect_reserve(), or with APPLY_FLAGS TP_APPLY_REATTACH a live connection's re-attachment
 * (tp_connect_reattach(): the server need not listen any more). */
static int connect_reserve(struct tp_link *l, const struct tp_key *key, int timeout_ms,
			   uint32_t apply_flags, struct tp_conn **ret_conn,
			   enum tp_reason *ret_reason)
{
	struct setup s = { .t = { .state = TP_TC_CONNECTING }, .apply_flags = apply_flags };
	bool claimed = false;
	uint64_t start = tp_now_ms();
	struct tp_conn *c;
	int slot, rc;

	if (timeout_ms < 0 || (uint32_t)timeout_ms > l->params.setup_timeout_ms)
		timeout_ms = (int)l->params.setup_timeout_ms;
	if ((rc = connect_check(l, key, apply_flags, ret_reason)))
		return rc;
	if ((slot = slot_reserve(l, ret_reason)) < 0)
		return slot;
	s.slot = (uint32_t)slot;
	s.e = &l->host->e[slot];
	s.e->key = *key;
	s.e->role = 0;
	s.e->framed = 0; /* (the server's Ack says so: on_answer()) */
	if (!(apply_flags & TP_APPLY_REATTACH) && tp_stripe_wanted(l))
		s.apply_flags |= TP_APPLY_FRAMED;
	s.t.msgid = s.e->msgid = l->host->msgid_next++;
	/* The peer's offer, claimed (tp_offer.c): no round trip. Not for a re-attachment (no
	 * listener needed) nor a framed connection (the server's Ack agrees to the framing). */
	if (!(s.apply_flags & (TP_APPLY_REATTACH | TP_APPLY_FRAMED)) &&
	    tp_offer_claim(l, s.slot) == 0) {
		uint64_t now = tp_now_ms();

		claimed = true;
		tp_rt_tcxt_event(&s.t, TP_EV_ACK, s.t.msgid, l->params.max_err);
		apply_decide(l, &s, now, start + (uint64_t)timeout_ms);
		if (s.t.state == TP_TC_FAILED)
			return apply_failed(l, &s, ret_reason);
		tp_host_unlock(l);
	} else if ((rc = apply_until_decided(l, &s, start + (uint64_t)timeout_ms, ret_reason))) {
		return rc; /* (a Claim that did not land: the Apply has its MsgID) */
	}
	c = tp_conn_new_first(l, s.slot);
	if (!c || (s.e->framed && tp_stripe_new(c, true))) {
		if (c)
			tp_conn_recycle(c);
		tp_host_lock(l);
		tp_ent_st_add(l, s.e, TP_ST_RST);
		tp_slot_free(l, s.slot);
		tp_host_unlock(l);
		*ret_reason = TP_REASON_LOCAL_ERROR;
		return -ENOMEM;
	}
	/* (the Claim's ring request: answered at once or never; none when the offer carried
	 * a ring) */
	c->rq_claim = claimed && !s.e->peer_ring;
	tp_conn_register(c);
	*ret_conn = c;
	*ret_reason = TP_REASON_NONE;
	return 0;
}

int tp_connect_reserve(struct tp_link *l, const struct tp_key *key, int timeout_ms,
		       struct tp_conn **ret_conn, enum tp_reason *ret_reason)
{
	return connect_reserve(l, key, timeout_ms, 0, ret_conn, ret_reason);
}

int tp_connect_reattach(struct tp_link *l, const struct tp_key *key, int timeout_ms,
			struct tp_conn **ret_conn)
{
	enum tp_reason why;
	int r = connect_reserve(l, key, timeout_ms, TP_APPLY_REATTACH, ret_conn, &why);

	if (r == 0)
		tp_conn_commit(*ret_conn);
	return r;
}

int tp_connect(struct tp_link *l, const struct tp_key *key, int timeout_ms,
	       struct tp_conn **ret_conn, enum tp_reason *ret_reason)
{
	int r = tp_connect_reserve(l, key, timeout_ms, ret_conn, ret_reason);

	if (r == 0)
		tp_conn_commit(*ret_conn);
	return r;
}

void tp_conn_commit(struct tp_conn *c)
{
	/* (accumulates with what is written later: a CLOSING or RST keeps COMMIT) */
	tp_ent_st_add(c->link, c->ent, TP_ST_COMMIT);
	/* relaxed: a time stamp for this process's timers; the ST word has its own ordering */
	atomic_store_explicit(&c->commit_ms, tp_now_ms(), memory_order_relaxed);
	tp_act_mark_sync(c); /* (the repeats are its timers' work: tp_active.c) */
}

/* The timers of a client connection committed less than the server's longest wait ago: the
 * ST word again (every flag so far), in case the link lost or spoilt the first write. */
#define TP_COMMIT_REPEAT_MS 20u

void tp_conn_commit_repeat(struct tp_conn *c, uint64_t now, bool lost)
{
	/* relaxed (commit_ms, commit_rep_ms): time stamps, nothing is published with them */
	uint64_t t = atomic_load_explicit(&c->commit_ms, memory_order_relaxed);

	if (!t)
		return;
	/* Not once the server attached (its first word in our slot, tp_attach()), answered (its
	 * acknowledgements) or refused (a reset): the server slot may be released and reused by
	 * another connection after that, whose word this must not overwrite. (The
	 * acknowledgements: under tx_lock, tried; busy: next time.) */
	bool answered;
	uint32_t v;

	if (tp_mutex_trylock(&c->tx_lock))
		return;
	answered = c->fb_ack != 0 || c->fb_rx_i != 0 || c->fb_rx_d != 0 ||
		   tp_slot_word(c, TP_W_FB_WAIT, &v);
	tp_mutex_unlock(&c->tx_lock);
	if (answered || lost || clock_age_ms(now, t) > c->link->params.setup_timeout_ms) {
		atomic_store_explicit(&c->commit_ms, 0, memory_order_relaxed);
		return;
	}
	uint64_t rep = atomic_load_explicit(&c->commit_rep_ms, memory_order_relaxed);

	/* (every TP_COMMIT_REPEAT_MS at most; one thread wins each) */
	if (clock_age_ms(now, rep) >= TP_COMMIT_REPEAT_MS &&
	    atomic_compare_exchange_strong_explicit(&c->commit_rep_ms, &rep, now,
						    memory_order_relaxed, memory_order_relaxed))
		tp_ent_st_add(c->link, c->ent, 0);
}

int tp_conn_confirm(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	/* acquire: pairs with the CAS in tp_set_error_at() */
	return c ? atomic_load_explicit(&c->error, memory_order_acquire) : -EINVAL;
}
