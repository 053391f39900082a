/* SPDX-License-Identifier: MIT */
/* Offers: [RT]'s Ack made ahead of the Apply. A server host keeps a few reservations ready for
 * its peer and publishes each as a record in the peer's window; a client set-up takes the next
 * one and claims it instead of applying, so that a new connection costs no round trip to a
 * thread of the server host (woken from sleep, or waiting behind the program on its CPU: most of
 * a set-up's time on a 2-CPU machine). The client side: tp_connect.c.
 *
 * WHO WRITES / ORDERING
 *   records     server host (under its host lock)   published by OFFER_TX (barrier first)
 *   OFFER_TX    server host: records published       acquire load by the client (checked word)
 *   OFFER_RX    client host: records it took         read by the server before its mailbox
 *   Claim       client host, through the mailbox     read back before OFFER_RX is written
 *
 * The client decides between ntb and tcp before it lets the TCP handshake complete
 * (preload/pl_connect_late.c), and the server's accept() must then find the reservation. An Ack
 * proved that the server made it; a Claim is answered by nothing, so the client reads it back
 * from the server's memory (ntb_read_back(): across a bridge a non-posted read, ordered behind
 * the writes) and commits only once it is there: the server's accept() processes its mailbox
 * before it looks for the reservation, and finds it. A Claim that did not land (a link that
 * drops writes) makes the client apply as before, with the same MsgID: the server answers that
 * Apply with the claimed offer if the Claim came first, and ignores the Claim if it came after.
 *
 * The server frees an offer the client counted taken (OFFER_RX) without a Claim; it reads
 * OFFER_RX before its mailbox, and the client writes it after the Claim landed, so an offer
 * claimed is never freed for that. Offers are never withdrawn otherwise within a peer session
 * (the client could be claiming one): a new session of either side frees them (records and
 * words are seeded with both sessions, as the mailbox's). They are made only while a quarter of
 * the connection slots stay free and no Apply was refused, so [RT]'s admission rule still
 * decides when slots are short. A client that takes no offers (before them) never writes
 * OFFER_RX, and gets none. */
#include <errno.h>
#include <string.h>

#include "transport/tp_int.h"
#include "util/log.h"

bool tp_offer_rx_read(struct tp_link *l, uint32_t *ret_rx)
{
	/* acquire (tp_in_word()): pairs with the client's barrier after its Claim landed */
	return tp_cw_check(tp_mbox_seed_in(l), tp_in_word(l, TP_OFF_OFFER_RX), ret_rx);
}

/* Free the offer of record number K unless it was claimed (or freed) since. */
static void offer_free(struct tp_link *l, uint32_t k)
{
	struct tp_host *h = l->host;
	uint32_t slot = h->offer_slot[k % TP_OFFER_SLOTS];

	if (slot >= tp_host_used(h))
		return;
	struct tp_host_entry *e = &h->e[slot];

	if (e->state == TP_ES_PENDING && e->role == TP_ROLE_OFFER &&
	    e->peer_epoch == h->peer_epoch)
		tp_slot_free(l, slot);
}

void tp_offer_reset(struct tp_link *l)
{
	struct tp_host *h = l->host;
	uint32_t n = h->offer_prod - h->offer_peer_rx;

	for (uint32_t k = 0; k < n && k < TP_OFFER_SLOTS; k++)
		offer_free(l, h->offer_peer_rx + k);
	h->offer_prod = h->offer_peer_rx = h->offer_cons = 0;
}

bool tp_offer_listed(const struct tp_host *h, uint32_t slot)
{
	uint32_t n = h->offer_prod - h->offer_peer_rx;

	for (uint32_t k = 0; k < n && k < TP_OFFER_SLOTS; k++)
		if (h->offer_slot[(h->offer_peer_rx + k) % TP_OFFER_SLOTS] == slot)
			return true;
	return false;
}

void tp_offer_republish(struct tp_link *l)
{
	struct tp_host *h = l->host;
	uint32_t seed = tp_mbox_seed_out(l);

	/* (the records before their index: written long ago, the barrier orders them anyway) */
	ntb_to_peer_barrier(l->ntb);
	tp_out_word(l, TP_OFF_OFFER_TX, seed, h->offer_prod);
	tp_out_word(l, TP_OFF_OFFER_RX, seed, h->offer_cons);
	ntb_wc_flush(l->ntb);
}

/* How many offers H keeps outstanding: TP_OFFER_KEEP, at most a sixteenth of its connection
 * slots (a peer that never connects here leaves them unused). */
static uint32_t offer_keep(const struct tp_host *h)
{
	return h->contexts / 16u < TP_OFFER_KEEP ? h->contexts / 16u : TP_OFFER_KEEP;
}

/* Publish one more offer; false when no slot may be offered now. */
static bool offer_make(struct tp_link *l)
{
	struct tp_host *h = l->host;
	/* relaxed free_num: under the host lock */
	uint32_t free = atomic_load_explicit(&h->free_num, memory_order_relaxed);

	if (free <= h->contexts / 4u + TP_OFFER_KEEP || h->rcxt_pri)
		return false;
	int slot = tp_slot_alloc(l, TP_ES_PENDING, 0);

	if (slot < 0)
		return false;
	/* relaxed: a counter for display; a set-up is counted when its offer is claimed */
	atomic_fetch_sub_explicit(&h->totals.setups, 1, memory_order_relaxed);
	struct tp_host_entry *e = &h->e[slot];
	struct tp_pkt p;

	/* A data ring for the client's bytes waits in the offer when the pool has plenty (more
	 * than half of it free, a set-up's rule, beside as many as offers may hold), and the
	 * record carries it, as an Ack does: the client's first write after connect() goes into
	 * it at once, as into a kernel socket's buffer, instead of EAGAIN until the server's
	 * process has read the Claim (tens of µs to milliseconds). Nobody can ask it back before
	 * the claim: at most offer_keep() rings per link wait in offers, and never out of the half
	 * that Applies (a move's re-attachment among them) take theirs from. Without one the
	 * client's sender asks as after an Ack that granted none (tp_ring.c). */
	if (e->ring && h->pool_top < h->pool_n / 2u + offer_keep(h)) {
		tp_pool_put(l, e->ring - 1u, false);
		e->ring = 0;
		e->ring_gen = 0;
	}
	e->role = TP_ROLE_OFFER;
	/* relaxed: under the host lock, read without it as a hint (tp_host_free_conns()) */
	atomic_fetch_add_explicit(&h->offers_held, 1, memory_order_relaxed);
	e->epoch = 0;
	e->peer_epoch = h->peer_epoch;
	h->offer_slot[h->offer_prod % TP_OFFER_SLOTS] = (uint32_t)slot;
	memset(&p, 0, sizeof(p));
	p.type = TP_PKT_OFFER;
	p.server_slot = (uint32_t)slot;
	p.server_nonce = e->nonce;
	tp_pkt_set_slot_off(&p, tp_slot_off(l, (uint32_t)slot));
	p.inline_n = l->geom.inline_n;
	p.qsize = l->geom.qsize;
	p.epoch = e->epoch;
	tp_pkt_set_pool(&p, l, e);
	p.seq = h->offer_prod + 1u;
	p.version = TP_WIRE_VERSION;
	tp_pkt_seal(&p, tp_mbox_seed_out(l));
	ntb_write(l->ntb, TP_OFF_OFFER + (h->offer_prod % TP_OFFER_SLOTS) * TP_MBOX_PKT, &p,
		  sizeof(p));
	h->offer_prod++;
	return true;
}

void tp_offer_refill(struct tp_link *l, bool rx_ok, uint32_t rx)
{
	struct tp_host *h = l->host;

	/* a client that takes no offers, a spoilt word, or one beyond what we published */
	if (!rx_ok || rx - h->offer_peer_rx > h->offer_prod - h->offer_peer_rx)
		return;
	while (h->offer_peer_rx != rx) /* taken: those not claimed (mailbox read just before) */
		offer_free(l, h->offer_peer_rx++);
	/* relaxed: a flag the helper refreshes (`ntbsock link down` here: no new offers) */
	if (h->offer_prod - h->offer_peer_rx >= offer_keep(h) ||
	    atomic_load_explicit(&l->admin_down, memory_order_relaxed))
		return;
	bool made = false;

	while (h->offer_prod - h->offer_peer_rx < offer_keep(h) && offer_make(l))
		made = true;
	if (!made)
		return;
	/* the records before the index that publishes them; pairs with the acquire load of
	 * OFFER_TX in tp_offer_claim() on the peer */
	ntb_to_peer_barrier(l->ntb);
	tp_out_word(l, TP_OFF_OFFER_TX, tp_mbox_seed_out(l), h->offer_prod);
	ntb_wc_flush(l->ntb);
}

void tp_offer_on_claim(struct tp_link *l, const struct tp_pkt *p)
{
	struct tp_host *h = l->host;
	uint32_t slot = p->server_slot;

	if (slot >= tp_host_used(h))
		return;
	struct tp_host_entry *e = &h->e[slot];

	if (e->state != TP_ES_PENDING || e->role != TP_ROLE_OFFER || e->nonce != p->server_nonce ||
	    e->peer_epoch != h->peer_epoch)
		return; /* not an offer of ours (stale, or another session's) */
	/* The same client set-up reserved through an Apply already (its Claim did not land in
	 * time, tp_mbox_send_landed()): the offer stays unclaimed, freed once counted taken. */
	uint32_t steps = 0;

	for (uint32_t n = tp_hidx_peer_first(h, p->client_slot); n && n <= tp_host_used(h) &&
	     steps++ < h->contexts; n = tp_hidx_peer_next(h, n)) {
		const struct tp_host_entry *o = &h->e[n - 1];

		if ((o->state == TP_ES_PENDING || o->state == TP_ES_OPEN) && o->role == 1 &&
		    o->peer_slot == p->client_slot && o->peer_nonce == p->client_nonce)
			return;
	}
	if (!tp_mbox_apply_valid(l, p)) {
		tp_slot_free(l, slot); /* (a broken peer: nowhere to write a reset) */
		return;
	}
	tp_mbox_reserve(l, e, slot, p); /* (role 1 from here: no longer an offer) */
	atomic_fetch_sub_explicit(&h->offers_held, 1, memory_order_relaxed); /* (as above) */
	atomic_fetch_add_explicit(&h->totals.setups, 1, memory_order_relaxed); /* (offer_make()) */
	/* a reservation from now: the backstop of the reclaim counts from the claim, not from the
	 * offer (which may be minutes old), and so does the quantum of the ring it carries */
	e->created_ms = tp_now_ms();
	if (e->ring)
		e->ring_ms = e->created_ms;
	/* the Claim's ring request (TP_OFFER_RQ) is answered here, granted or not: the client's
	 * next request has the next number */
	e->rq_ans = TP_OFFER_RQ;
	if (!tp_mbox_host_listens(h, tp_key_server_port(&p->key))) {
		/* The port's listener closed since the client looked (its bitmap): as after an
		 * accept that cannot attach (tp_refuse()), the client reads a reset. */
		LOG(LL_DEBUG, "transport: Claim msgid %u of slot %u: no listener on port %u", p->msgid,
		    slot, tp_key_server_port(&p->key));
		tp_ent_st_add(l, e, TP_ST_RST);
		tp_slot_free(l, slot);
		return;
	}
	/* A Claim also asks for a data ring (its sender's request TP_OFFER_RQ, tp_offer_claim()):
	 * granted now by a set-up's rule (while the pool is at least half free), as an Ack
	 * carries one; else its sender asks again as for any request unanswered (tp_ring.c). */
	if (!e->ring && h->pool_top > h->pool_n / 2u) {
		int r = tp_pool_take(l, 0, false);

		if (r >= 0) {
			e->ring = (uint32_t)r + 1u;
			e->ring_gen = 1;
			e->ring_ms = tp_now_ms();
		}
	}
	if (e->ring) {
		tp_out_word(l, e->peer_slot_off + TP_W_FB_GRANT, e->peer_nonce,
			    (e->ring - 1u) | e->ring_gen << 16);
		e->rans = TP_OFFER_RQ;
		/* the grant before the answer that sends the sender to it (tp_rx_ring_service()) */
		ntb_to_peer_barrier(l->ntb);
		tp_out_word(l, e->peer_slot_off + TP_W_FB_RANS, e->peer_nonce, e->rans);
		ntb_wc_flush(l->ntb);
	}
	LOG(LL_DEBUG, "transport: Claim msgid %u → slot %u, ring %u", p->msgid, slot, e->ring);
}

/* Our consumer index of the peer's offers, written after the Claim it counts landed. */
static void offer_rx_publish(struct tp_link *l)
{
	ntb_to_peer_barrier(l->ntb);
	tp_out_word(l, TP_OFF_OFFER_RX, tp_mbox_seed_out(l), l->host->offer_cons);
	ntb_wc_flush(l->ntb);
}

int tp_offer_claim(struct tp_link *l, uint32_t slot)
{
	struct tp_host *h = l->host;
	struct tp_host_entry *e = &h->e[slot];
	uint32_t seed = tp_mbox_seed_in(l), ptx;
	struct tp_pkt o, c;

	/* the offers of the peer session the mailbox counts in (a new one resets both first) */
	if (!h->peer_epoch || h->peer_epoch != ntb_link_peer_epoch(l->ntb))
		return -ENOENT;
	/* acquire (tp_in_word()): the index before the records it publishes */
	if (!tp_cw_check(seed, tp_in_word(l, TP_OFF_OFFER_TX), &ptx) ||
	    ptx - h->offer_cons - 1u >= TP_OFFER_SLOTS)
		return -ENOENT; /* none (or a spoilt, stale or hostile index) */
	memcpy(&o, (const void *)(l->in + TP_OFF_OFFER + (h->offer_cons % TP_OFFER_SLOTS) *
				  TP_MBOX_PKT), sizeof(o));
	/* taken, whatever it holds: the server frees an offer counted taken without a Claim */
	h->offer_cons++;
	if (!tp_pkt_valid(&o, seed, h->offer_cons) || o.type != TP_PKT_OFFER ||
	    o.version != TP_WIRE_VERSION ||
	    !tp_geom_valid(l, tp_pkt_slot_off(&o), o.inline_n, o.qsize) ||
	    !tp_pool_valid(l, tp_pkt_pool_off(&o), o.pool_n, o.qsize, o.ring)) {
		offer_rx_publish(l);
		return -ENOENT;
	}
	tp_apply_fill(l, slot, TP_PKT_CLAIM, 0, 0, &c);
	c.server_slot = o.server_slot;
	c.server_nonce = o.server_nonce;
	int rc = tp_mbox_send_landed(l, &c);

	offer_rx_publish(l);
	if (rc == -EIO)
		/* the Claim may land after all and be answered (the server's next request number
		 * is then TP_OFFER_RQ + 1, whichever way the Apply is answered) */
		e->rq = TP_OFFER_RQ;
	if (rc < 0)
		return rc == -EIO ? -EIO : -ENOENT;
	tp_mbox_take_ack(l, e, &o); /* answered, as by an Ack (framed: no, the record says) */
	/* our sender's first request for a data ring is the Claim's (tp_offer_on_claim()): not open,
	 * answered at once or never (struct tp_conn: rq_claim) */
	e->rq = TP_OFFER_RQ;
	/* relaxed result_reason, release result: as on_answer() (under the host lock) */
	atomic_store_explicit(&e->result_reason, 0, memory_order_relaxed);
	atomic_store_explicit(&e->result, TP_PKT_ACK, memory_order_release);
	/* relaxed: a counter for display */
	atomic_fetch_add_explicit(&h->offer_claims, 1, memory_order_relaxed);
	return 0;
}
