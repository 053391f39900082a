/* SPDX-License-Identifier: MIT */
/* Connections: listeners, set-up ([RT] Apply/Ack/Nack, sender side), attach, shutdown,
 * close and abort (readiness and waiting: tp_wait.c). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* --- listeners ------------------------------------------------------------------------------ */

int tp_listen(struct tp_link *l, uint16_t port)
{
	struct tp_host *h = l->host;
	int me = tp_self_pid(), free_i = -1, rc = 0;

	tp_host_lock(l);
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		if (h->listen[i].count && h->listen[i].pid == me && h->listen[i].port == port) {
			h->listen[i].count++;
			atomic_fetch_add(&l->listening, 1);
			goto out;
		}
		if (!h->listen[i].count && free_i < 0)
			free_i = (int)i;
	}
	if (free_i < 0) {
		rc = -ENOSPC;
		goto out;
	}
	h->listen[free_i].pid = me;
	h->listen[free_i].port = port;
	h->listen[free_i].count = 1;
	atomic_fetch_add(&l->listening, 1);
	tp_listen_publish(l, false);
out:
	tp_host_unlock(l);
	return rc;
}

int tp_unlisten(struct tp_link *l, uint16_t port)
{
	struct tp_host *h = l->host;
	int me = tp_self_pid(), rc = -ENOENT;

	tp_host_lock(l);
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		if (h->listen[i].count && h->listen[i].pid == me && h->listen[i].port == port) {
			h->listen[i].count--;
			atomic_fetch_sub(&l->listening, 1);
			rc = 0;
			break;
		}
	}
	tp_listen_publish(l, false);
	tp_host_unlock(l);
	return rc;
}

/* A word of the peer's listener bitmap that fails its check was spoilt on the way (a faulty
 * link) or is left from an earlier session of the peer: the peer rewrites the whole bitmap every
 * 500 ms (link_service()), so wait for a good copy before saying "no listener": three rewrites,
 * as a rewrite can be spoilt too and a loaded peer's helper runs late. A word never written (0)
 * or a good one answers at once. */
#define TP_LISTEN_REPAIR_MS 1600u

bool tp_peer_listens(struct tp_link *l, uint16_t port)
{
	uint32_t off = TP_OFF_LISTEN + (port / 32u) * 8u, bits;
	uint64_t start = tp_now_ms(), w;

	for (;;) {
		w = tp_in_word(l, off);
		if (tp_cw_check(ntb_link_peer_epoch(l->ntb), w, &bits))
			return bits & (1u << (port % 32u));
		if (w == 0 || !tp_link_refresh(l))
			return false;
		if (clock_age_ms(tp_now_ms(), start) >= TP_LISTEN_REPAIR_MS) {
			LOG(LL_DEBUG, "transport: listener word of port %u spoilt for %u ms", port,
			    TP_LISTEN_REPAIR_MS);
			return false;
		}
		usleep(2000);
	}
}

/* --- set-up ----------------------------------------------------------------------------------- */

/* --- connection objects ------------------------------------------------------------------------
 * A connection's private state is large (the record queue, the sender's shadow rings: ~180 KiB
 * with the demo's geometry), and allocating and zeroing it afresh for every set-up — page
 * faults included, as the heap shrinks and grows back — was a good part of a set-up's cost. So a
 * link keeps up to TP_CONN_CACHE connections this process finished (tp_conn_recycle()), and a
 * set-up whose peer geometry matches reuses one (conn_take()). conn_reset() gives it the state of
 * a new one: every field zero except the record queue, whose entries are only read between
 * rec_head and rec_tail (both reset), and the buffers, which are kept: the inline shadow is
 * zeroed again (tp_conn_init_queues()); the data shadow is read only where the send path wrote
 * first, and the bounce buffer only while rx_bounce_ok (reset) says it holds the head record.
 * The cache is under conns_lock; it holds at most what the process had lingering at once, and
 * half of it is freed every 500 ms it went unused (tp_conn_cache_trim()). */
#define TP_CONN_CACHE 64u

static void conn_destroy(struct tp_conn *c)
{
	tp_conn_free_queues(c);
	free(c);
}

void tp_conn_recycle(struct tp_conn *c)
{
	struct tp_link *l = c->link;
	bool kept = false;

	if (c->pre_buf || atomic_load(&c->pre_on))
		tp_prefix_drop(c);
	tp_tx_hold_drop(c);
	if (c->dmaq && ntb_dmaq_state(c->dmaq) != NTB_DMAQ_IDLE) {
		ntb_dmaq_destroy(c->dmaq); /* left mid-transfer: the next user gets a new one */
		c->dmaq = NULL;
	}
	pthread_mutex_lock(&l->conns_lock);
	if (l->conn_cache_n < TP_CONN_CACHE && c->sh_inline && c->sh_data) {
		c->next = l->conn_cache;
		l->conn_cache = c;
		l->conn_cache_n++;
		kept = true;
	}
	pthread_mutex_unlock(&l->conns_lock);
	if (!kept)
		conn_destroy(c);
}

/* A cached connection of L whose shadows fit a peer slot of INLINE_N slots and QSIZE bytes, or
 * NULL (one of another geometry is freed: the peer host's geometry changed). */
static struct tp_conn *conn_take(struct tp_link *l, uint32_t inline_n, uint32_t qsize)
{
	struct tp_conn *c;

	pthread_mutex_lock(&l->conns_lock);
	c = l->conn_cache;
	if (c) {
		l->conn_cache = c->next;
		l->conn_cache_n--;
	}
	l->conn_cache_used = true;
	pthread_mutex_unlock(&l->conns_lock);
	if (c && (c->out.inline_n != inline_n || c->out.qsize != qsize)) {
		conn_destroy(c);
		c = NULL;
	}
	return c;
}

/* Everything of C as calloc() would leave it, but the record queue and the buffers. */
static void conn_reset(struct tp_conn *c)
{
	uint8_t *sh_inline = c->sh_inline, *sh_data = c->sh_data, *bounce = c->rx_bounce;
	uint32_t bounce_cap = c->rx_bounce_cap;
	struct ntb_dmaq *dmaq = c->dmaq;
	size_t recs = offsetof(struct tp_conn, recs), recs_end = recs + sizeof(c->recs);

	memset(c, 0, recs);
	memset((uint8_t *)c + recs_end, 0, sizeof(*c) - recs_end);
	c->sh_inline = sh_inline;
	c->sh_data = sh_data;
	c->rx_bounce = bounce;
	c->rx_bounce_cap = bounce_cap;
	c->dmaq = dmaq;
}

/* Free KEEP_NONE ? all : half (rounded up) of the connections cached by L. */
static void cache_free(struct tp_link *l, bool keep_none)
{
	struct tp_conn *c, *next, *drop = NULL;

	pthread_mutex_lock(&l->conns_lock);
	for (uint32_t n = keep_none ? l->conn_cache_n : (l->conn_cache_n + 1) / 2; n; n--) {
		c = l->conn_cache;
		l->conn_cache = c->next;
		l->conn_cache_n--;
		c->next = drop;
		drop = c;
	}
	pthread_mutex_unlock(&l->conns_lock);
	for (c = drop; c; c = next) {
		next = c->next;
		conn_destroy(c);
	}
}

void tp_conn_cache_drain(struct tp_link *l)
{
	cache_free(l, true);
}

void tp_conn_cache_trim(struct tp_link *l)
{
	bool used;

	pthread_mutex_lock(&l->conns_lock);
	used = l->conn_cache_used;
	l->conn_cache_used = false;
	pthread_mutex_unlock(&l->conns_lock);
	if (!used)
		cache_free(l, false);
}

static struct tp_conn *conn_new(struct tp_link *l, uint32_t slot)
{
	struct tp_host_entry *e = &l->host->e[slot];
	struct tp_conn *c = conn_take(l, e->peer_inline_n, e->peer_qsize);

	if (c)
		conn_reset(c);
	else
		c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->link = l;
	c->keep_fd = -1;
	c->slot = slot;
	c->ent = e;
	c->st = &e->stats;
	c->nonce_in = e->nonce;
	c->nonce_out = e->peer_nonce;
	c->out.slot_off = e->peer_slot_off;
	c->out.inline_n = e->peer_inline_n;
	c->out.log2n = (uint32_t)__builtin_ctz(e->peer_inline_n);
	c->out.qsize = e->peer_qsize;
	c->peer_epoch = e->peer_epoch;
	c->tx_epoch = (uint16_t)e->epoch;
	c->rx_epoch = (uint16_t)e->epoch;
	c->fo_id = tp_fo_new_id(); /* (a recycled one gets a new key: old events miss it) */
	if (tp_conn_init_queues(c)) {
		conn_destroy(c);
		return NULL;
	}
	/* this process drives it (set-up, adopt): the release pairs with the CAS in
	 * tp_conn_own() of a process forked later */
	__atomic_store_n(&e->active, (int32_t)tp_self_pid(), __ATOMIC_RELEASE);
	__atomic_store_n(&c->owned, true, __ATOMIC_RELEASE); /* read by the helper */
	return c;
}

/* A new connection (set-up, attach) has one holder; adopt keeps the count it had (fork). */
static struct tp_conn *conn_new_first(struct tp_link *l, uint32_t slot)
{
	struct tp_conn *c = conn_new(l, slot);

	if (c)
		__atomic_store_n(&l->host->e[slot].refs, 1, __ATOMIC_RELEASE);
	return c;
}

int tp_conn_own_slow(struct tp_conn *c)
{
	int32_t me, cur = 0;

	me = (int32_t)tp_self_pid();
	/* CAS 0 → me: the first user after a fork wins; acq_rel pairs with the release store of
	 * 0 in atfork_prepare() and with the other claimant's CAS */
	if (__atomic_compare_exchange_n(&c->ent->active, &cur, me, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE) || cur == me) {
		c->ent->pid = me; /* informational (ntbsock stat) */
		__atomic_store_n(&c->owned, true, __ATOMIC_RELEASE);
		return 0;
	}
	if (!atomic_load(&c->error))
		LOG(LL_DEBUG, "transport: slot %u is driven by process %d since a fork: "
		    "not usable here", c->slot, cur);
	tp_set_error(c, -EPERM);
	return -EPERM;
}

static int apply_send_type(struct tp_link *l, uint32_t slot, const struct tp_tcxt *t,
			   uint8_t type, uint32_t apply_flags)
{
	struct tp_host_entry *e = &l->host->e[slot];
	struct tp_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	p.msgid = t->msgid;
	p.pri = t->pri;
	p.client_slot = slot;
	p.client_nonce = e->nonce;
	tp_pkt_set_slot_off(&p, tp_slot_off(l, slot));
	p.inline_n = l->geom.inline_n;
	p.qsize = l->geom.qsize;
	p.key = e->key;
	p.apply_flags = apply_flags;
	e->result = 0;
	return tp_mbox_send(l, &p);
}

/* The client watches for the answer for TP_ACK_SPIN_NS after each Apply (ack_spin()): a peer
 * host that serves the link answers within microseconds, and a futex sleep and wake-up cost more
 * than that. Meanwhile the answer comes without a doorbell (TP_APPLY_WATCH: it would only wake
 * our helper thread); an answer later than that is found by the 1 ms sleeps that follow. */
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

/* tp_connect_reserve(), or with APPLY_FLAGS TP_APPLY_REATTACH a live connection's re-attachment
 * (tp_connect_reattach(): the server need not listen any more). */
static int connect_reserve(struct tp_link *l, const struct tp_key *key, int timeout_ms,
			   uint32_t apply_flags, struct tp_conn **ret_conn,
			   enum tp_reason *ret_reason)
{
	const struct tp_params *pp = &l->params;
	struct tp_tcxt t = { .state = TP_TC_CONNECTING };
	uint64_t start = tp_now_ms(), deadline, sent_ms, spin_end;
	struct tp_host_entry *e;
	struct tp_conn *c;
	int slot;

	if (timeout_ms < 0 || (uint32_t)timeout_ms > pp->setup_timeout_ms)
		timeout_ms = (int)pp->setup_timeout_ms;
	deadline = start + (uint64_t)timeout_ms;
	if (!tp_link_refresh(l) || atomic_load(&l->region_bad)) {
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
	tp_host_lock(l);
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
	e = &l->host->e[slot];
	e->key = *key;
	e->role = 0;
	t.msgid = e->msgid = l->host->msgid_next++;
	apply_send(l, (uint32_t)slot, &t, apply_flags);
	tp_host_unlock(l);
	sent_ms = tp_now_ms();
	spin_end = mono_ns() + TP_ACK_SPIN_NS;
	for (;;) {
		uint32_t seen = ntb_db_read(l->ntb), res;
		uint64_t seen_mbox = tp_in_word(l, TP_OFF_MBOX_TX), now;

		tp_host_lock(l);
		tp_mbox_process(l);
		/* acquire: pairs with the release store of result in on_answer() */
		res = __atomic_load_n(&e->result, __ATOMIC_ACQUIRE);
		now = tp_now_ms();
		if (res == TP_PKT_ACK) {
			tp_rt_tcxt_event(&t, TP_EV_ACK, t.msgid, pp->max_err);
		} else if (res == TP_PKT_NACK) {
			enum tp_rt_event ev = e->result_reason == TP_REASON_NO_LISTENER ?
				TP_EV_NACK_NOLISTEN : TP_EV_NACK;

			if (e->result_reason == TP_REASON_PEER_ERROR) {
				t.state = TP_TC_FAILED;
				t.reason = TP_REASON_PEER_ERROR;
			} else if (tp_rt_tcxt_event(&t, ev, t.msgid, pp->max_err)) {
				/* Nack: CnctPRI + 1 and Apply again after a pause that grows to 5 ms */
				tp_host_unlock(l);
				usleep(t.pri < 25u ? 200u * t.pri : 5000u);
				tp_host_lock(l);
				apply_send(l, (uint32_t)slot, &t, apply_flags);
				sent_ms = now;
				spin_end = mono_ns() + TP_ACK_SPIN_NS;
			}
		} else if (now - sent_ms >= tp_rt_cnct_timer(pp->cnct_timeout_ms, t.expired)) {
			if (tp_rt_tcxt_event(&t, TP_EV_TIMER, t.msgid, pp->max_err)) {
				LOG(LL_DEBUG, "transport: Apply msgid %u unanswered for %llu ms: "
				    "again", t.msgid, (unsigned long long)(now - sent_ms));
				apply_send(l, (uint32_t)slot, &t, apply_flags); /* TimerCnct: same MsgID */
				sent_ms = now;
				spin_end = mono_ns() + TP_ACK_SPIN_NS;
			}
		}
		if (t.state == TP_TC_CONNECTING && now >= deadline) {
			t.state = TP_TC_FAILED;
			t.reason = t.pri ? TP_REASON_NO_CONTEXT : TP_REASON_TIMEOUT;
		}
		if (t.state == TP_TC_SENDING) {
			if (!tp_geom_valid(l, e->peer_slot_off, e->peer_inline_n, e->peer_qsize)) {
				t.state = TP_TC_FAILED;
				t.reason = TP_REASON_PEER_ERROR;
			} else {
				e->state = TP_ES_OPEN;
			}
		}
		if (t.state == TP_TC_FAILED) {
			if (e->result == TP_PKT_ACK) /* answered after all: tell the peer */
				tp_ent_st_add(l, e, TP_ST_RST);
			else if (t.reason == TP_REASON_TIMEOUT || t.reason == TP_REASON_NO_CONTEXT)
				/* unanswered (or the answer is late): the peer may still reserve a
				 * context for this Apply; withdraw it before the caller's TCP connect
				 * lets the server accept. Nothing answers a Cancel, nor repeats one
				 * the link loses: twice (the second finds nothing to withdraw). */
				cancel_send(l, (uint32_t)slot, &t);
			tp_slot_free(l, (uint32_t)slot);
			tp_host_unlock(l);
			*ret_reason = t.reason;
			LOG(LL_DEBUG, "transport: connect failed: %s", tp_reason_str(t.reason));
			return t.reason == TP_REASON_TIMEOUT ? -ETIMEDOUT :
			       t.reason == TP_REASON_NO_CONTEXT ? -EAGAIN : -ECONNREFUSED;
		}
		tp_host_unlock(l);
		if (t.state == TP_TC_SENDING)
			break;
		if (mono_ns() < spin_end && ack_spin(l, seen, seen_mbox, spin_end))
			continue;
		ntb_db_wait(l->ntb, seen, 1); /* (an answer to a watched Apply does not ring) */
	}
	c = conn_new_first(l, (uint32_t)slot);
	if (!c) {
		tp_host_lock(l);
		tp_ent_st_add(l, e, TP_ST_RST);
		tp_slot_free(l, (uint32_t)slot);
		tp_host_unlock(l);
		*ret_reason = TP_REASON_LOCAL_ERROR;
		return -ENOMEM;
	}
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
	atomic_store(&c->commit_ms, tp_now_ms());
}

/* The timers of a client connection committed less than the server's longest wait ago: the
 * ST word again (every flag so far), in case the link lost or spoilt the first write. */
#define TP_COMMIT_REPEAT_MS 20u

static void commit_repeat(struct tp_conn *c, uint64_t now, bool lost)
{
	uint64_t t = atomic_load(&c->commit_ms);

	if (!t)
		return;
	/* Not once the server answered (its acknowledgements) or refused (a reset): the server
	 * slot may be released and reused by another connection after that, whose word this
	 * must not overwrite. (The acknowledgements: under tx_lock, tried; busy: next time.) */
	bool answered;

	if (tp_mutex_trylock(&c->tx_lock))
		return;
	answered = c->fb_ack != 0 || c->fb_rx_i != 0 || c->fb_rx_d != 0;
	tp_mutex_unlock(&c->tx_lock);
	if (answered || lost || clock_age_ms(now, t) > c->link->params.setup_timeout_ms) {
		atomic_store(&c->commit_ms, 0);
		return;
	}
	uint64_t rep = atomic_load(&c->commit_rep_ms);

	/* (every TP_COMMIT_REPEAT_MS at most; one thread wins each) */
	if (clock_age_ms(now, rep) >= TP_COMMIT_REPEAT_MS &&
	    atomic_compare_exchange_strong(&c->commit_rep_ms, &rep, now))
		tp_ent_st_add(c->link, c->ent, 0);
}

int tp_conn_confirm(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	return c ? atomic_load(&c->error) : -EINVAL;
}

/* Under the host lock: the first reservation under KEY the client has not given up, or -1.
 * *RET_FLAGS: the ST flags the client wrote into it. */
static int pending_find(struct tp_link *l, const struct tp_key *key, uint32_t *ret_flags)
{
	struct tp_host *h = l->host;

	for (uint32_t i = 0; i < h->contexts; i++) {
		if (h->e[i].state != TP_ES_PENDING || memcmp(&h->e[i].key, key, sizeof(*key)))
			continue;
		uint32_t f = tp_slot_st_flags(l, i, h->e[i].nonce);

		if (f & (TP_ST_RST | TP_ST_GONE)) {
			tp_slot_free(l, i); /* the client gave up (its set-up or TCP connect failed) */
			continue;
		}
		*ret_flags = f;
		return (int)i;
	}
	return -1;
}

/*
 * The decision between ntb and tcp is the client's, and it is final once written: COMMIT (ntb)
 * or RST / a Cancel (tcp), written before the client lets the TCP handshake complete
 * (preload/pl_setup.c: connect_late()). The server only follows it: a reservation found
 * undecided is waited for. A reservation made after the accept (the client's ACK went out
 * before its Apply was answered: the kernel's delayed ACK) is never committed: the client
 * sees its ACK gone and gives it up.
 */
#define TP_ATTACH_POLL_US 200u

int tp_attach(struct tp_link *l, const struct tp_key *key, struct tp_conn **ret_conn)
{
	struct tp_host *h = l->host;
	struct tp_conn *c;
	uint64_t end = tp_now_ms() + l->params.setup_timeout_ms;
	uint32_t flags = 0;
	int slot;

	for (;;) {
		tp_host_lock(l);
		if (tp_host_lost(l)) {
			tp_host_unlock(l);
			return -ENOENT;
		}
		tp_mbox_process(l); /* (a Cancel, a repeated Apply) */
		slot = pending_find(l, key, &flags);
		if (slot < 0) {
			tp_host_unlock(l);
			return -ENOENT;
		}
		if (flags & TP_ST_COMMIT)
			break; /* keeps the host lock */
		if (tp_now_ms() >= end) {
			/* a client stalled (stopped) between its answer and its decision: refused;
			 * it reads a reset if it commits after all */
			LOG(LL_DEBUG, "transport: slot %d: the client did not decide within %u ms: "
			    "refused", slot, l->params.setup_timeout_ms);
			tp_ent_st_add(l, &h->e[slot], TP_ST_RST);
			tp_slot_free(l, (uint32_t)slot);
			tp_host_unlock(l);
			return -ETIMEDOUT;
		}
		tp_host_unlock(l);
		usleep(TP_ATTACH_POLL_US);
	}
	h->e[slot].state = TP_ES_OPEN;
	h->e[slot].pid = tp_self_pid();
	h->e[slot].owners[0] = tp_self_pid();
	tp_host_unlock(l);
	c = conn_new_first(l, (uint32_t)slot);
	if (!c) {
		tp_host_lock(l);
		tp_ent_st_add(l, &h->e[slot], TP_ST_RST);
		tp_slot_free(l, (uint32_t)slot);
		tp_host_unlock(l);
		return -ENOMEM;
	}
	tp_conn_register(c);
	*ret_conn = c;
	return 0;
}

int tp_refuse(struct tp_link *l, const struct tp_key *key)
{
	uint32_t flags;
	int slot, rc = -ENOENT;

	tp_host_lock(l);
	if (!tp_host_lost(l)) {
		tp_mbox_process(l);
		while ((slot = pending_find(l, key, &flags)) >= 0) {
			tp_ent_st_add(l, &l->host->e[slot], TP_ST_RST);
			tp_slot_free(l, (uint32_t)slot);
			rc = 0;
		}
	}
	tp_host_unlock(l);
	return rc;
}

int tp_process_id(void)
{
	return tp_self_pid();
}

void tp_conn_set_owner(struct tp_conn *c, int pid, int fd)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	if (!c)
		return;
	c->ent->pid = pid;
	c->ent->fd = fd;
}

/* --- end of a connection ----------------------------------------------------------------------- */

int tp_shutdown(struct tp_conn *c, int how)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (tp_conn_own(c))
		return -EPERM;
	if (how != SHUT_WR) {
		tp_mutex_lock(&c->rx_lock);
		c->rd_shut = true;
		tp_mutex_unlock(&c->rx_lock);
	}
	if (how != SHUT_RD && atomic_load(&c->pre_on)) {
		/* the rest of a moved connection's tail is still going out: the FIN after it */
		tp_prefix_lock(c);
		bool pending = atomic_load(&c->pre_on);

		if (pending)
			atomic_store(&c->pre_fin, true);
		tp_prefix_unlock(c);
		if (pending)
			return 0;
	}
	if (how != SHUT_RD) {
		tp_mutex_lock(&c->tx_lock);
		if (__atomic_load_n(&c->moved_to, __ATOMIC_ACQUIRE)) {
			/* it moved meanwhile (mv_finish() reads wr_shut under this lock): there */
			tp_mutex_unlock(&c->tx_lock);
			return tp_shutdown(c, SHUT_WR);
		}
		if (!c->wr_shut) {
			c->wr_shut = true;
			/* (while moving to the kernel socket, its FIN says it: tp_failover.c) */
			if (!atomic_load(&c->error) && !tp_fo_get(c))
				tp_tx_fin(c); /* -EAGAIN: the timers send it when room frees */
		}
		tp_mutex_unlock(&c->tx_lock);
	}
	return 0;
}

/* Drop this process's reference to C (fork shares it). True when another process still
 * holds one and is alive (or was forked just now and may not have registered yet): then
 * closing here only releases our share, as closing one copy of a kernel socket does. */
static bool shared_elsewhere(struct tp_conn *c)
{
	struct tp_host_entry *e = c->ent;
	int me = tp_self_pid();
	bool other = false;
	uint32_t refs = __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL);

	if (refs == 0 || refs > 1000u) /* last reference (or never counted) */
		return false;
	tp_host_lock(c->link);
	for (int i = 0; i < TP_OWNERS; i++)
		if (e->owners[i] && e->owners[i] != me && tp_pid_alive(e->owners[i]))
			other = true;
	if (tp_now_ms() - __atomic_load_n(&e->fork_ms, __ATOMIC_ACQUIRE) < 2000u)
		other = true;
	tp_host_unlock(c->link);
	return other;
}

/* Single-owner rule at close: does this process end the connection? Its owner does, even while
 * other processes hold copies (they cannot drive it); one that nobody used since the last fork
 * is ended by its last holder (SHARED false), which claims it; any other process only drops its
 * reference (release_share()). */
static bool close_drives(struct tp_conn *c, bool shared)
{
	/* acquire: pairs with the release store in tp_conn_own() / conn_new() */
	if (__atomic_load_n(&c->owned, __ATOMIC_ACQUIRE))
		return true;
	return !shared && tp_conn_own(c) == 0;
}

/* A process that does not drive C drops its share. If it was the last holder, the owner is
 * gone without ending it: tell the peer (GONE), as the reclaim of a dead owner would. */
static void release_share(struct tp_conn *c)
{
	/* (written only by the last holder, added to what the owner wrote: an RST of an owner
	 * that failed stays) */
	tp_conn_release(c, TP_ST_GONE);
}

/* A shell C (moved to another link): the connection it moved to ends (CLOSE or abort), and the
 * shell with it, its slot being freed already. */
static void shell_end(struct tp_conn *c, bool close)
{
	/* acquire: pairs with the release store in mv_finish() */
	struct tp_conn *n = __atomic_load_n(&c->moved_to, __ATOMIC_ACQUIRE);

	if (close)
		tp_close(n);
	else
		tp_abort(n);
	tp_conn_release(c, 0);
}

void tp_close(struct tp_conn *c)
{
	if (!c)
		return;
	if (__atomic_load_n(&c->moved_to, __ATOMIC_ACQUIRE)) { /* (pairs with mv_finish()) */
		shell_end(c, true);
		return;
	}
	/* Bytes not yet acknowledged must outlive the descriptor, as a kernel socket's do: a
	 * private duplicate of the socket stays for a failover at exit (tp_exit_handoff()), or
	 * for one under way, until the connection is released. */
	/* acquire: pairs with the release store in tp_conn_own() / conn_new() */
	bool mine = __atomic_load_n(&c->owned, __ATOMIC_ACQUIRE);

	tp_mutex_lock(&c->tx_lock);
	bool unacked = c->tx_i != c->fb_rx_i || c->tx_d != c->fb_rx_d || atomic_load(&c->pre_on);

	tp_mutex_unlock(&c->tx_lock);
	int fo = tp_fo_get(c);

	if (mine && (fo == TP_FO_RUN || (fo == TP_FO_NONE && unacked))) {
		tp_mutex_lock(&c->witness_lock);
		int w = atomic_load(&c->witness_fd1) - 1;

		if (w >= 0 && c->keep_fd < 0)
			c->keep_fd = (int)syscall(SYS_fcntl, w, F_DUPFD_CLOEXEC, 3);
		tp_mutex_unlock(&c->witness_lock);
	}
	/* the caller's descriptor (the witness) closes next: no look may still use it */
	tp_conn_set_witness(c, -1);
	if (!close_drives(c, shared_elsewhere(c))) {
		release_share(c);
		return;
	}
	if (!tp_fo_get(c) && tp_rx_unread(c, false)) {
		/* as the kernel's close() with bytes in its receive queue: a reset (tp_abort()) */
		LOG(LL_DEBUG, "transport: slot %u closed with bytes unread: reset", c->slot);
		atomic_store(&c->error, -ECONNRESET);
		tp_conn_release(c, TP_ST_RST);
		return;
	}
	/* the peer's witness will see our TCP socket's end now: say it was a close, not a death;
	 * before the FIN, so a peer that reads the end of stream finds it (preload/: its close()
	 * then waits for our TCP socket's FIN) */
	if (!tp_fo_get(c))
		tp_conn_st_add(c, TP_ST_CLOSING);
	tp_shutdown(c, SHUT_WR);
	c->closed_ms = tp_now_ms();
	/* Once closed is set, C is the helper's: its next pass may release it (linger_done() is
	 * true at once for a connection in error or moved to TCP) and the cache may reuse or free
	 * it. So nothing of C is read after the store: the link (which outlives its connections)
	 * is taken before. */
	struct tp_link *l = c->link;
	/* A move to another link under way: it ends here or there. Under its lock, so that the move
	 * either sees closed (and closes where it went) or has gone and says where (the close goes
	 * there too); the helper leaves a moving connection whose lock is taken alone. */
	/* acquire: pairs with the CAS in tp_fo_request() */
	struct tp_fo *mv = __atomic_load_n(&c->fo, __ATOMIC_ACQUIRE);
	struct tp_conn *moved = NULL;

	if (mv)
		tp_fo_lock(mv);
	if (mv)
		moved = __atomic_load_n(&c->moved_to, __ATOMIC_ACQUIRE); /* (pairs with mv_finish) */
	/* release: the helper sees closed_ms and the shutdown state; pairs with its load */
	atomic_store(&c->closed, true);
	if (mv)
		tp_fo_unlock(mv);
	if (moved)
		tp_close(moved);
	/* after closed: a pass that cleared lingering before it saw closed comes again soon */
	atomic_store(&l->lingering, true); /* (tp_link.c: link_service()) */
}

void tp_abort(struct tp_conn *c)
{
	if (!c)
		return;
	if (__atomic_load_n(&c->moved_to, __ATOMIC_ACQUIRE)) { /* (pairs with mv_finish()) */
		shell_end(c, false);
		return;
	}
	tp_conn_set_witness(c, -1); /* as tp_close() */
	if (!close_drives(c, shared_elsewhere(c))) {
		release_share(c);
		return;
	}
	atomic_store(&c->error, -ECONNRESET);
	tp_conn_release(c, tp_fo_get(c) ? 0 : TP_ST_RST);
}

void tp_conn_abort(struct tp_conn *c)
{
	tp_abort(c);
}

int tp_conn_error(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	int err = atomic_load(&c->error);

	if (!err && atomic_load(&c->peer_gone) && !c->fin_rcvd_v)
		err = -ECONNRESET; /* the peer vanished without an orderly FIN */
	return err;
}

void tp_conn_stats(const struct tp_conn *cc, struct tp_stats *ret_stats)
{
	const struct tp_conn *c = tp_conn_cur((struct tp_conn *)cc);

	/* the cursors are written under their locks: read them there (the API keeps C const; the
	 * mutexes are the only thing touched) */
	struct tp_conn *m = (struct tp_conn *)c;

	tp_stats_load(ret_stats, c->st);
	tp_mutex_lock(&m->tx_lock);
	ret_stats->tx_queue_fill = (c->tx_d - c->fb_rx_d) + (c->tx_i - c->fb_rx_i) * 128u;
	tp_mutex_unlock(&m->tx_lock);
	tp_mutex_lock(&m->rx_lock);
	ret_stats->rx_queue_fill = (c->v_d - c->c_d) + (c->v_i - c->c_i) * 128u;
	tp_mutex_unlock(&m->rx_lock);
}

/* --- exec: export / adopt ---------------------------------------------------------------------- */

int tp_conn_export(struct tp_conn *c, int timeout_ms, uint64_t *ret_token)
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
		tp_tx_feedback(c);
		bool drained = c->fb_rx_i == c->tx_i && c->fb_rx_d == c->tx_d;

		if (drained || tp_now_ms() >= end)
			break; /* keeps tx_lock */
		tp_mutex_unlock(&c->tx_lock);
		tp_conn_timers(c, tp_now_ms());
		usleep(1000);
	}
	if (c->fb_rx_i != c->tx_i || c->fb_rx_d != c->tx_d) {
		tp_mutex_unlock(&c->tx_lock);
		return -EBUSY;
	}
	if ((rc = atomic_load(&c->error))) {
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
	tp_mutex_unlock(&c->rx_lock);
	tp_mutex_unlock(&c->tx_lock);
	*ret_token = (uint64_t)c->slot << 32 | c->nonce_in;
	/* release: the state before the flag tp_conn_adopt() checks */
	__atomic_store_n(&x->valid, 1, __ATOMIC_RELEASE);
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

	if (slot >= l->contexts)
		return -ENOENT;
	e = &l->host->e[slot];
	tp_host_lock(l);
	if (e->state != TP_ES_OPEN || e->nonce != nonce ||
	    !__atomic_load_n(&e->ex.valid, __ATOMIC_ACQUIRE)) {
		tp_host_unlock(l);
		return -ENOENT;
	}
	x = e->ex;
	e->ex.valid = 0;
	e->pid = tp_self_pid();
	tp_host_unlock(l);
	c = conn_new(l, slot); /* refs unchanged: other processes may share it (fork) */
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

void tp_conn_set_witness(struct tp_conn *c, int fd)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	struct stat st;

	if (!c)
		return;
	tp_mutex_lock(&c->witness_lock); /* after any look in progress (witness_look()) */
	tp_fo_watch(c, fd); /* (before the old descriptor is forgotten: it leaves the set) */
	atomic_store(&c->witness_fd1, 0);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
		atomic_store(&c->witness_ino, (uint64_t)st.st_ino);
		/* seq_cst store after the inode: witness_look() reads the fd first, then the
		 * inode */
		atomic_store(&c->witness_fd1, fd + 1);
	}
	tp_mutex_unlock(&c->witness_lock);
}

/* The peer is silent: is its kernel socket closed (the process died) rather than only quiet
 * (stopped, starved, or the host gone)? Looked at every 100 ms, never read: MSG_PEEK, and
 * through the system call itself, since the preload library interposes recv(). */
static void witness_look(struct tp_conn *c, uint64_t now)
{
	int fd1 = atomic_load(&c->witness_fd1);
	struct stat st;
	char b;

	uint64_t last = atomic_load(&c->witness_ms);

	/* one look per 100 ms, by whichever thread wins it */
	/* From the moment the link is down (the first look tells a death, which stopped the
	 * heartbeat, from a process alive behind a silent link: silent_alive), and not once the
	 * peer said it closed (TP_ST_CLOSING): then its TCP socket's end is that close, and its
	 * connection still lingers on the NTB side (data, FIN), to be waited for. */
	if (!fd1 || !atomic_load(&c->link->down_since_ms) || (tp_st_flags(c) & TP_ST_CLOSING) ||
	    clock_age_ms(now, last) < 100u || atomic_load(&c->peer_gone) ||
	    !atomic_compare_exchange_strong(&c->witness_ms, &last, now))
		return;
	/* a busy lock: the witness is being changed (the descriptor may be closing) */
	if (tp_mutex_trylock(&c->witness_lock))
		return;
	fd1 = atomic_load(&c->witness_fd1);
	if (!fd1 || fstat(fd1 - 1, &st) || (uint64_t)st.st_ino != atomic_load(&c->witness_ino)) {
		tp_mutex_unlock(&c->witness_lock);
		return; /* gone, closed or reused: nothing to learn from it */
	}
	long r = syscall(SYS_recvfrom, fd1 - 1, &b, 1, MSG_PEEK | MSG_DONTWAIT, NULL, NULL);
	int e = errno;

	/* the same socket still (not closed and reused between the two calls)? */
	bool same = fstat(fd1 - 1, &st) == 0 && (uint64_t)st.st_ino == atomic_load(&c->witness_ino);
	bool dead = same && (r == 0 || (r < 0 && (e == ECONNRESET || e == EPIPE || e == ETIMEDOUT)));
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	bool dead_late = false;

	memset(&ti, 0, sizeof(ti));
	if (dead && syscall(SYS_getsockopt, fd1 - 1, IPPROTO_TCP, TCP_INFO, &ti, &tl))
		dead_late = true; /* no age of its end: take it as after a silence */
	tp_mutex_unlock(&c->witness_lock);
	/* Did it die while its link still spoke? Its FIN (or reset) is the last segment the
	 * socket received (tcpi_last_ack_recv: ms since), the heartbeat's last change is the last
	 * sign of the link: a heartbeat older than the death by more than two periods means the
	 * link was silent before it died, and what it wrote then may never have arrived. */
	if (dead && !dead_late) {
		int64_t hb_age = ntb_link_peer_hb_age_ms(c->link->ntb);
		int64_t gap = hb_age - (int64_t)ti.tcpi_last_ack_recv;

		dead_late = hb_age < 0 || gap > 2 * (int64_t)ntb_link_heartbeat_ms(c->link->ntb) + 50;
		if (dead_late)
			LOG(LL_INFO, "transport: slot %u: the link was silent %lld ms before the peer "
			    "died: what it wrote meanwhile may be missing", c->slot, (long long)gap);
	}
	if ((!dead && same) || dead_late)
		atomic_store(&c->silent_alive, true);
	if (dead) {
		LOG(LL_INFO, "transport: slot %u: peer silent and its TCP socket closed (%s, fd %d, "
		    "tcp state %u): the peer process is gone", c->slot,
		    r == 0 ? "end of stream" : strerror(e), fd1 - 1, ti.tcpi_state);
		atomic_store(&c->peer_died, true);
		atomic_store(&c->peer_gone, true);
		tp_event_signal(); /* waiters look again and see the loss */
	}
}

/* --- timers (helper thread and wait loops) ----------------------------------------------- */

/* A silent peer (tp_link_refresh()): no timer counts an error against it (their stamps move
 * with the clock, so the timers' housekeeping still runs: FIN, feedback, discards).
 * TimerSendData, TimerDetect and TimerRcvData start again when it speaks; then at most one of
 * each may run out before its answer comes (a stopped process resumes). */
static void hold_timers(struct tp_conn *c, uint64_t now)
{
	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		c->last_ack_ms = now;
		tp_mutex_unlock(&c->tx_lock);
	}
	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		if (c->gated)
			c->gate_deadline_ms = now + c->link->params.recv_timeout_ms;
		tp_mutex_unlock(&c->rx_lock);
	}
}

uint32_t tp_conn_timers(struct tp_conn *c, uint64_t now)
{
	uint32_t next;

	if (atomic_load(&c->slot_gone))
		return 0; /* a shell (moved to another link): its entry is another's now */

	/* queue fill levels for `ntbsock stat`: the cursors are read under their locks (trylock:
	 * a busy side keeps its last value until the next tick; callers may hold a lock) */
	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		TP_STAT_SET(c->st->tx_queue_fill,
			    (c->tx_d - c->fb_rx_d) + (c->tx_i - c->fb_rx_i) * 128u);
		tp_mutex_unlock(&c->tx_lock);
	}
	if (tp_mutex_trylock(&c->rx_lock) == 0) {
		TP_STAT_SET(c->st->rx_queue_fill, (c->v_d - c->c_d) + (c->v_i - c->c_i) * 128u);
		tp_mutex_unlock(&c->rx_lock);
	}
	/* acquire: pairs with the release store in tp_conn_own(); never for a connection another
	 * process drives (our copy of its state is stale) */
	if (atomic_load(&c->error) || !__atomic_load_n(&c->owned, __ATOMIC_ACQUIRE))
		return 0;
	if (!tp_fo_get(c) && atomic_load(&c->link->admin_down))
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
		witness_look(c, now);
		hold_timers(c, now); /* then the housekeeping below, which now counts nothing */
	} else if (!lost && atomic_load_explicit(&c->silent_alive, memory_order_relaxed)) {
		atomic_store(&c->silent_alive, false); /* it speaks again: its writes arrive */
	}
	commit_repeat(c, now, lost);
	if (atomic_load_explicit(&c->pre_on, memory_order_relaxed))
		tp_prefix_flush(c); /* (a moved connection's tail, before the program's bytes) */
	next = tp_tx_timers(c, now);
	/* (a gated receiver's re-asks count as quick probes: the helper comes for them too) */
	return tp_wait_min(next, tp_rx_timers(c));
}
