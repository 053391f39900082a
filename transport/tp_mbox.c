/* SPDX-License-Identifier: MIT */
/* The link's control mailbox: Apply/Ack/Nack packets in the peer's inbound window, sent and
 * consumed under the host lock, and the receiver half of [RT]'s set-up (context admission). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

/*
 * WHO WRITES / ORDERING (each host writes the peer's mailbox, under its host lock):
 *   packet slots   sender host, ntb_write()     published by MBOX_TX
 *   MBOX_TX        sender host (mbox_prod)      release: ntb_to_peer_barrier() after the
 *                                               packet; acquire load in tp_mbox_process()
 *   MBOX_RX        receiver host (mbox_cons)    release: ntb_from_peer_barrier() after the
 *                                               packet copies, handing the slots back; acquire
 *                                               load in tp_mbox_send() before it rewrites them
 */

/* Seeds of what we write into the peer's mailbox area and of what we read from ours: both
 * sides' sessions (tp_mbox_seed()), the peer's as our indices last counted it. */
static uint32_t seed_out(const struct tp_link *l)
{
	return tp_mbox_seed(ntb_link_epoch(l->ntb), l->host->peer_epoch);
}

static uint32_t seed_in(const struct tp_link *l)
{
	return tp_mbox_seed(l->host->peer_epoch, ntb_link_epoch(l->ntb));
}

uint32_t tp_mbox_seed_out(const struct tp_link *l)
{
	return seed_out(l);
}

uint32_t tp_mbox_seed_in(const struct tp_link *l)
{
	return seed_in(l);
}

/* Packets in the peer's mailbox it has not consumed, as far as we know. Its consumer index
 * (MBOX_RX) counts when the word passes its check and lies between the last valid one and our
 * producer index. Any other word frees nothing: one spoilt or lost on the way (a faulty link), or
 * one of another session of either side (tp_mbox_process() resets both indices when the peer's
 * changes, and the peer writes 0 when it sees ours), says nothing about slots the peer may still
 * have to read. */
static uint32_t mbox_unconsumed(struct tp_link *l)
{
	struct tp_host *h = l->host;
	uint32_t rx;

	if (tp_cw_check(seed_in(l), tp_in_word(l, TP_OFF_MBOX_RX), &rx) &&
	    rx - h->mbox_peer_rx <= h->mbox_prod - h->mbox_peer_rx)
		h->mbox_peer_rx = rx;
	return h->mbox_prod - h->mbox_peer_rx;
}

/* Send P through the peer's mailbox, ringing its doorbell if RING; the packet's window offset
 * into *RET_OFF (may be NULL). */
static int mbox_send_at(struct tp_link *l, struct tp_pkt *p, bool ring, uint32_t *ret_off)
{
	struct tp_host *h = l->host;
	uint32_t seed = seed_out(l);
	uint32_t off = TP_OFF_MBOX + (h->mbox_prod % TP_MBOX_SLOTS) * TP_MBOX_PKT;

	/* our indices count in the peer session tp_mbox_process() last saw: none while the link
	 * is down, none for a new session before they were reset for it */
	if (!h->peer_epoch || h->peer_epoch != ntb_link_peer_epoch(l->ntb))
		return -ENOTCONN;
	/* acquire (tp_in_word() in mbox_unconsumed()): the peer's copies of the slots it hands
	 * back before our write into them below; pairs with ntb_from_peer_barrier() in
	 * tp_mbox_process() */
	if (mbox_unconsumed(l) >= TP_MBOX_SLOTS)
		return -EAGAIN; /* full: never overwrite (TimerCnct repeats an Apply, and so its answer) */
	p->seq = h->mbox_prod + 1;
	p->version = TP_WIRE_VERSION;
	tp_pkt_seal(p, seed);
	ntb_write(l->ntb, off, p, sizeof(*p));
	/* packet before the index that publishes it; pairs with the acquire load of MBOX_TX in
	 * tp_mbox_process() on the peer */
	ntb_to_peer_barrier(l->ntb);
	h->mbox_prod++;
	tp_out_word(l, TP_OFF_MBOX_TX, seed, h->mbox_prod);
	ntb_wc_flush(l->ntb);
	if (ring)
		ntb_peer_db_ring(l->ntb);
	if (ret_off)
		*ret_off = off;
	return 0;
}

static int mbox_send(struct tp_link *l, struct tp_pkt *p, bool ring)
{
	return mbox_send_at(l, p, ring, NULL);
}

/* How many times the index is written again when its read-back differs (a link that drops or
 * spoils writes: the fault decorator), and how long the last read-back may wait for a write the
 * link delays. */
#define TP_LANDED_TRIES 3
#define TP_LANDED_WAIT_NS 200000u

int tp_mbox_send_landed(struct tp_link *l, struct tp_pkt *p)
{
	struct tp_host *h = l->host;
	uint32_t off;
	int rc = mbox_send_at(l, p, false, &off);

	if (rc < 0)
		return rc;
	uint64_t want_tx = tp_cw_make(seed_out(l), h->mbox_prod);
	uint64_t end = 0;

	for (int tries = 0;;) {
		struct tp_pkt back;
		uint64_t tx;

		if (ntb_read_back(l->ntb, off, &back, sizeof(back)) < 0 ||
		    ntb_read_back(l->ntb, TP_OFF_MBOX_TX, &tx, sizeof(tx)) < 0)
			return -EIO;
		/* The packet is never written again: the peer may have read a spoilt one already
		 * (published by an index that landed) and passed over it for good; the same bytes
		 * rewritten would be taken for landed but never read. A packet that differs is a
		 * Claim lost (the caller applies); only the index is written again (a packet just
		 * beyond it is read all the same: tp_mbox_process()). */
		if (memcmp(&back, p, sizeof(back)))
			return -EIO;
		/* (a later packet of ours may have moved the index on: not here, under our lock) */
		if (tx == want_tx)
			return 0;
		if (++tries >= TP_LANDED_TRIES) {
			uint64_t now = clock_mono_ns();

			if (!end)
				end = now + TP_LANDED_WAIT_NS;
			if (now >= end)
				return -EIO;
			cpu_relax();
			continue;
		}
		tp_out_word(l, TP_OFF_MBOX_TX, seed_out(l), h->mbox_prod);
		ntb_wc_flush(l->ntb);
	}
}

int tp_mbox_send(struct tp_link *l, struct tp_pkt *p)
{
	return mbox_send(l, p, true);
}

/*
 * Does the peer want a ring for an answer to an Apply it watches for (TP_APPLY_WATCH)? Only
 * while one of its set-ups sleeps (MBOX_RING not a valid 0): the watching client sees the
 * index move by itself, and a ring would only wake its helper (a switch on its CPU, for nothing,
 * at every connection). A Dekker pair with tp_mbox_sleepers(): our index (written by the
 * caller) and a fence, then its word; its word and a fence, then our index. A link that
 * delays both writes past both reads (posted writes: no fence waits for them) leaves the
 * client asleep until its 1 ms timeout (tp_connect.c), not for good.
 */
static bool peer_wants_ring(const struct tp_link *l)
{
	uint32_t n;

	atomic_thread_fence(memory_order_seq_cst);
	return !tp_cw_check(seed_in(l), tp_in_word(l, TP_OFF_MBOX_RING), &n) || n != 0;
}

void tp_mbox_sleepers(struct tp_link *l, uint32_t slot, bool asleep)
{
	struct tp_host *h = l->host;
	struct tp_host_entry *e = &h->e[slot];

	if (tp_host_lost(l))
		return; /* (a table no longer shared: its count is nobody's) */
	if (asleep != (e->asleep != 0)) {
		e->asleep = asleep;
		if (asleep)
			h->mbox_sleepers++;
		else if (h->mbox_sleepers)
			h->mbox_sleepers--;
	}
	tp_out_word(l, TP_OFF_MBOX_RING, seed_out(l), h->mbox_sleepers);
	ntb_wc_flush(l->ntb);
	/* (our word before the caller's look at the index: the other half of the pair above) */
	atomic_thread_fence(memory_order_seq_cst);
}

bool tp_mbox_host_listens(struct tp_host *h, uint16_t port)
{
	int me = tp_self_pid();

	bool any = false;

	/* (our own listener needs no liveness check: the admission often runs in its process) */
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		if (!h->listen[i].count || h->listen[i].port != port ||
		    !(h->listen[i].pid == me || tp_pid_alive(h->listen[i].pid)))
			continue;
		if (h->listen[i].count == TP_LISTEN_VETO)
			return false; /* (a process that may accept it cannot serve NTB) */
		any = true;
	}
	return any;
}

/* Is the geometry a peer announced for its slot inside our outbound window and sane? */
bool tp_geom_valid(const struct tp_link *l, uint64_t slot_off, uint32_t inline_n, uint32_t q)
{
	/* (no wrap: slot_off is checked against the window first, and the window is at most
	 * TP_WINDOW_MAX) */
	uint64_t end = slot_off + TP_SLOT_RINGS + (uint64_t)inline_n * 128u;

	return slot_off >= TP_OFF_SLOTS && slot_off < l->out_size && slot_off % 128u == 0 &&
	       l->out_size <= TP_WINDOW_MAX && inline_n >= 2 &&
	       inline_n <= 65536 && (inline_n & (inline_n - 1)) == 0 && q >= 4096 &&
	       (q & (q - 1)) == 0 && q <= (1u << 30) && end <= l->out_size;
}

bool tp_pool_valid(const struct tp_link *l, uint64_t pool_off, uint32_t pool_n, uint32_t q,
		   uint32_t ring)
{
	/* (q is checked by tp_geom_valid(): a power of two of at most 1 GiB; pool_off against the
	 * window first, pool_n against TP_MAX_CONTEXTS: no wrap) */
	return pool_off >= TP_OFF_SLOTS && pool_off < l->out_size && pool_off % 4096u == 0 &&
	       pool_n >= 1 && pool_n <= TP_MAX_CONTEXTS && q <= (1u << 30) &&
	       (uint64_t)pool_n * q <= l->out_size - pool_off && ring <= pool_n;
}

/* The pool of our window, and the ring of it granted to the peer for entry E (set-up). */
void tp_pkt_set_pool(struct tp_pkt *p, const struct tp_link *l, const struct tp_host_entry *e)
{
	p->pool_off_lo = (uint32_t)l->geom.pool_off;
	p->pool_off_hi = (uint32_t)(l->geom.pool_off >> 32);
	p->pool_n = l->geom.pool_n;
	p->ring = e->ring;
	p->ring_gen = e->ring_gen;
}

/* The peer's pool and the ring it granted us, from its Apply or Ack (checked: tp_pool_valid()). */
void tp_ent_peer_pool(struct tp_host_entry *e, const struct tp_pkt *p)
{
	e->peer_pool_off = tp_pkt_pool_off(p);
	e->peer_pool_n = p->pool_n;
	e->peer_ring = p->ring;
	e->peer_ring_gen = p->ring ? p->ring_gen : 0;
}

static void reply(struct tp_link *l, const struct tp_pkt *in, uint8_t type, uint8_t reason,
		  const struct tp_host_entry *e, uint32_t slot)
{
	struct tp_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	p.reason = reason;
	p.msgid = in->msgid;
	p.client_slot = in->client_slot;
	p.client_nonce = in->client_nonce;
	p.key = in->key;
	if (e) {
		p.server_slot = slot;
		p.server_nonce = e->nonce;
		tp_pkt_set_slot_off(&p, tp_slot_off(l, slot));
		p.inline_n = l->geom.inline_n;
		p.qsize = l->geom.qsize;
		p.epoch = e->epoch;
		tp_pkt_set_pool(&p, l, e);
		p.apply_flags = e->framed ? TP_APPLY_FRAMED : 0;
	}
	if (!(in->apply_flags & TP_APPLY_WATCH)) {
		tp_mbox_send(l, &p);
	} else if (mbox_send(l, &p, false) == 0 && peer_wants_ring(l)) {
		ntb_peer_db_ring(l->ntb);
	}
}

bool tp_mbox_apply_valid(const struct tp_link *l, const struct tp_pkt *p)
{
	return p->version == TP_WIRE_VERSION &&
	       tp_geom_valid(l, tp_pkt_slot_off(p), p->inline_n, p->qsize) &&
	       tp_pool_valid(l, tp_pkt_pool_off(p), p->pool_n, p->qsize, p->ring) &&
	       p->client_slot < (l->out_size - TP_OFF_SLOTS) / 128u;
}

void tp_mbox_reserve(struct tp_link *l, struct tp_host_entry *e, uint32_t slot,
		     const struct tp_pkt *p)
{
	e->role = 1;
	e->key = p->key;
	e->peer_slot = p->client_slot;
	e->peer_nonce = p->client_nonce;
	e->peer_slot_off = tp_pkt_slot_off(p);
	e->peer_inline_n = p->inline_n;
	e->peer_qsize = p->qsize;
	tp_ent_peer_pool(e, p);
	e->msgid = p->msgid;
	e->pri = p->pri;
	/* the session whose mailbox it came through (the link may look down here meanwhile:
	 * tp_mbox_process()) */
	e->peer_epoch = l->host->peer_epoch;
	/* relaxed: a setting (tp_link_set_balance()) */
	e->framed = (p->apply_flags & TP_APPLY_FRAMED) &&
		    atomic_load_explicit(&l->balance, memory_order_relaxed);
	tp_hidx_add_server(l->host, slot);
}

static void on_apply(struct tp_link *l, const struct tp_pkt *p)
{
	struct tp_host *h = l->host;
	struct tp_rt_pool pool;
	int slot;

	/* An Apply matching a context we hold: same MsgID → repeat the Ack, else drop it. (Its
	 * bucket of the peer-slot index; at most every entry: a bucket that loops ends there.) */
	uint32_t steps = 0;
	for (uint32_t n = tp_hidx_peer_first(h, p->client_slot), next; n && steps++ < h->contexts;
	     n = next) {
		uint32_t i = n - 1;
		struct tp_host_entry *e = &h->e[i];

		next = tp_hidx_peer_next(h, n); /* (before E may be freed below) */
		if (i >= tp_host_used(h))
			break;
		if ((e->state != TP_ES_PENDING && e->state != TP_ES_OPEN) || e->role != 1 ||
		    e->peer_slot != p->client_slot)
			continue;
		if (e->peer_nonce == p->client_nonce) {
			if (e->msgid == p->msgid)
				reply(l, p, TP_PKT_ACK, 0, e, i);
			return;
		}
		/* The client uses that slot for another connection now: the reservation made for
		 * the slot's earlier one will not be attached by anyone that could use it (a
		 * repeated Apply seen late, a lost Cancel); it would hold a context until the
		 * reclaim's backstop. */
		if (e->state == TP_ES_PENDING) {
			LOG(LL_DEBUG, "transport: slot %u: its client slot %u is reused: freed", i,
			    p->client_slot);
			tp_slot_free(l, i);
		}
	}
	/* (a re-attachment: a connection accepted here moves from another link, maybe after
	 * its listener closed) */
	if (!(p->apply_flags & TP_APPLY_REATTACH) &&
	    !tp_mbox_host_listens(h, tp_key_server_port(&p->key))) {
		reply(l, p, TP_PKT_NACK, TP_REASON_NO_LISTENER, NULL, 0);
		return;
	}
	/* relaxed: a flag the helper refreshes every 100 ms; nothing is published with it */
	if (atomic_load_explicit(&l->admin_down, memory_order_relaxed)) {
		/* `ntbsock link down` here: new ones go tcp */
		reply(l, p, TP_PKT_NACK, TP_REASON_ADMIN_DOWN, NULL, 0);
		return;
	}
	if (!tp_mbox_apply_valid(l, p)) {
		reply(l, p, TP_PKT_NACK, TP_REASON_PEER_ERROR, NULL, 0);
		return;
	}
	tp_host_reclaim_if_short(l);
	pool.free_num = atomic_load_explicit(&h->free_num, memory_order_relaxed); /* (host lock) */
	pool.pri = h->rcxt_pri;
	if (!tp_rt_admit(&pool, p->pri)) {
		h->rcxt_pri = pool.pri;
		reply(l, p, TP_PKT_NACK, TP_REASON_NO_CONTEXT, NULL, 0);
		return;
	}
	h->rcxt_pri = pool.pri;
	slot = tp_slot_alloc(l, TP_ES_PENDING, 0);
	if (slot < 0) {
		reply(l, p, TP_PKT_NACK, TP_REASON_NO_CONTEXT, NULL, 0);
		return;
	}
	struct tp_host_entry *e = &h->e[slot];
	e->epoch = 0;
	tp_mbox_reserve(l, e, (uint32_t)slot, p);
	LOG(LL_DEBUG, "transport: Apply msgid %u pri %u → slot %d", p->msgid, p->pri, slot);
	reply(l, p, TP_PKT_ACK, 0, e, (uint32_t)slot);
}

/* The client withdrew its Apply: free the reservation it named, unless accept() took it. */
static void on_cancel(struct tp_link *l, const struct tp_pkt *p)
{
	struct tp_host *h = l->host;

	uint32_t steps = 0;
	for (uint32_t n = tp_hidx_peer_first(h, p->client_slot); n && n <= tp_host_used(h) &&
	     steps++ < h->contexts; n = tp_hidx_peer_next(h, n)) {
		uint32_t i = n - 1;
		struct tp_host_entry *e = &h->e[i];

		if (e->state == TP_ES_PENDING && e->role == 1 && e->peer_slot == p->client_slot &&
		    e->peer_nonce == p->client_nonce && e->msgid == p->msgid &&
		    !memcmp(&e->key, &p->key, sizeof(e->key))) {
			LOG(LL_DEBUG, "transport: Cancel msgid %u → slot %u freed", p->msgid, i);
			tp_slot_free(l, i);
			return;
		}
	}
}

void tp_mbox_take_ack(struct tp_link *l, struct tp_host_entry *e, const struct tp_pkt *p)
{
	e->peer_slot = p->server_slot;
	e->peer_nonce = p->server_nonce;
	e->peer_slot_off = tp_pkt_slot_off(p);
	/* a server of another wire version: its geometry is refused later (tp_connect():
	 * tp_geom_valid() fails, RST to its reservation, TCP) */
	e->peer_inline_n = p->version == TP_WIRE_VERSION ? p->inline_n : 0;
	e->peer_qsize = p->qsize;
	tp_ent_peer_pool(e, p);
	e->epoch = p->epoch;
	e->peer_epoch = l->host->peer_epoch; /* (as in tp_mbox_reserve()) */
	e->framed = (p->apply_flags & TP_APPLY_FRAMED) != 0;
}

static void on_answer(struct tp_link *l, const struct tp_pkt *p)
{
	struct tp_host *h = l->host;
	struct tp_host_entry *e;

	if (p->client_slot >= tp_host_used(h))
		return;
	e = &h->e[p->client_slot];
	/* relaxed result: under the host lock, as its every write */
	if (e->state != TP_ES_CONNECTING || e->msgid != p->msgid || e->nonce != p->client_nonce ||
	    atomic_load_explicit(&e->result, memory_order_relaxed))
		return; /* stale, duplicated or foreign */
	if (p->type == TP_PKT_ACK)
		tp_mbox_take_ack(l, e, p);
	atomic_store_explicit(&e->result_reason, p->reason, memory_order_relaxed); /* (lock) */
	/* release: the answer fields before the result word the connecting thread polls;
	 * pairs with the acquire load in tp_connect() */
	atomic_store_explicit(&e->result, p->type, memory_order_release);
}

unsigned tp_mbox_process(struct tp_link *l)
{
	struct tp_host *h = l->host;
	uint32_t peer_epoch = ntb_link_peer_epoch(l->ntb);
	uint32_t ptx, start, offer_rx;
	unsigned applies = 0;
	bool offer_ok;

	/* no admissions from a table that is no longer shared (see tp_host_lost()) */
	if (tp_host_lost(l))
		return 0;
	/* While the link looks down here (the peer's heartbeat late on a starved host, or a
	 * process that has not seen it move yet), the packets of the session we know are still
	 * read: a Claim must be found by the accept() that follows it (tp_offer.c). Answers and
	 * offers wait for the link (tp_mbox_send() refuses, tp_offer_refill() makes none). */
	bool live = peer_epoch != 0;

	if (!live) {
		if (!h->peer_epoch)
			return 0;
		peer_epoch = h->peer_epoch;
	}
	if (h->peer_epoch != peer_epoch) {
		/* a new peer session: its mailbox indices start over, and so do ours; it learns at
		 * once that it may fill its mailbox here (its MBOX_RX of our mailbox is 0); the
		 * offers of the last session are freed first (they carry its epoch), and both our
		 * offer words start over (OFFER_RX at 0 tells the peer that we take offers) */
		tp_offer_reset(l);
		h->peer_epoch = peer_epoch;
		h->mbox_cons = 0;
		h->mbox_prod = 0;
		h->mbox_peer_rx = 0;
		tp_out_word(l, TP_OFF_MBOX_RX, seed_out(l), 0);
		/* (our sleepers' word, under the new session's seed: else it fails its check there,
		 * which only costs rings) */
		tp_out_word(l, TP_OFF_MBOX_RING, seed_out(l), h->mbox_sleepers);
		tp_listen_publish(l, true);
		tp_offer_republish(l);
	}
	/* (before the packets: a Claim is in the mailbox before the client counts its offer
	 * taken, so every offer counted here without a Claim below was taken without one) */
	offer_ok = tp_offer_rx_read(l, &offer_rx);
	/* acquire: MBOX_TX before the packets it publishes; pairs with the barrier in
	 * tp_mbox_send() on the peer */
	if (!tp_cw_check(seed_in(l), tp_in_word(l, TP_OFF_MBOX_TX), &ptx) ||
	    h->mbox_cons - ptx <= TP_MBOX_SLOTS)
		ptx = h->mbox_cons; /* spoilt, or not beyond what we read (see below) */
	else if (ptx - h->mbox_cons > TP_MBOX_SLOTS) /* lost track (or hostile): skip ahead */
		h->mbox_cons = ptx - TP_MBOX_SLOTS;
	start = h->mbox_cons;
	for (;;) {
		struct tp_pkt p;
		uint32_t off = TP_OFF_MBOX + (h->mbox_cons % TP_MBOX_SLOTS) * TP_MBOX_PKT;
		bool published = ptx - h->mbox_cons - 1u < TP_MBOX_SLOTS; /* (cons < ptx) */

		memcpy(&p, (const void *)(l->in + off), sizeof(p));
		/* Beyond the published index: a packet whose index write the link lost is read all
		 * the same when it checks out whole with the next sequence number (no acquire
		 * needed: a packet still being written fails its CRC and is looked at again later).
		 * An answer then does not wait for the next packet's index. */
		if (!published && (h->mbox_cons - start >= TP_MBOX_SLOTS ||
				   !tp_pkt_valid(&p, seed_in(l), h->mbox_cons + 1)))
			break; /* (a lap at most: a peer that keeps writing cannot hold us here) */
		h->mbox_cons++;
		if (published && !tp_pkt_valid(&p, seed_in(l), h->mbox_cons))
			continue; /* dropped or corrupted: the sender's TimerCnct repeats it */
		if (p.type == TP_PKT_APPLY && live)
			on_apply(l, &p), applies++;
		else if (p.type == TP_PKT_APPLY)
			; /* (no answer can go out now: the client's TimerCnct repeats it) */
		else if (p.type == TP_PKT_ACK || p.type == TP_PKT_NACK)
			on_answer(l, &p);
		else if (p.type == TP_PKT_CANCEL)
			on_cancel(l, &p);
		else if (p.type == TP_PKT_CLAIM)
			tp_offer_on_claim(l, &p), applies++;
	}
	if (start != h->mbox_cons) {
		/* release: the packet copies above before the index that hands their slots
		 * back; pairs with the acquire load of MBOX_RX in tp_mbox_send() on the peer */
		ntb_from_peer_barrier();
		tp_out_word(l, TP_OFF_MBOX_RX, seed_out(l), h->mbox_cons);
	}
	if (live)
		tp_offer_refill(l, offer_ok, offer_rx);
	return applies;
}

void tp_mbox_republish(struct tp_link *l)
{
	struct tp_host *h = l->host;
	uint32_t peer_epoch = ntb_link_peer_epoch(l->ntb), seed = seed_out(l);

	/* (indices of another peer session are reset by the next tp_mbox_process() first) */
	if (!peer_epoch || peer_epoch != h->peer_epoch || tp_host_lost(l))
		return;
	tp_out_word(l, TP_OFF_MBOX_RX, seed, h->mbox_cons);
	/* (packets before their index: written long ago, the barrier orders them anyway) */
	ntb_to_peer_barrier(l->ntb);
	tp_out_word(l, TP_OFF_MBOX_TX, seed, h->mbox_prod);
	/* (and the count of our set-ups asleep: a lost write of it cost every sleep its 1 ms) */
	tp_out_word(l, TP_OFF_MBOX_RING, seed, h->mbox_sleepers);
	tp_offer_republish(l);
	ntb_wc_flush(l->ntb);
}
