/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the set-up mailbox (tp_mbox_process() reading struct tp_pkt from the inbound
 * window, doc/design.md §3 rule 4): Apply, Ack, Nack, Cancel and Claim packets, sealed or broken, and the
 * mailbox index the peer publishes. One shm link pair is opened once, with the helper thread held
 * (the harness drives the receiver itself; where a helper runs anyway, as in the replay of `make
 * check`, each input holds the receiver's host lock); between inputs its host table is restored from
 * a snapshot and the mailbox bytes the input wrote are zeroed again: no file, no sleep, no
 * connection per input. The receiver may refuse anything; it must never crash, read outside the
 * window, lose a context or admit a geometry it did not check.
 *
 * Input: byte 0 flags (bit 0: START, the receiver's consumer index, from the next 4 bytes; bit 1:
 * the producer index from the next 4 bytes instead of START + packets; bit 2: a broken check on
 * that word; bit 3: the link administratively down), then packets: a mode byte, 124 bytes of
 * packet and, unless sealed, its CRC (see mb_pkt_of()). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

#define MB_PORT    5000u
#define MB_MAXPKT  24u   /* packets per input */

static struct {
	char path[128];
	struct tp_link *a, *b;  /* a: side 0 (the hostile peer), b: side 1 (the receiver) */
	struct tp_params tpp;
	struct ntb_link *out;   /* a's outbound window: b's inbound */
	uint8_t *snap;          /* b's host table after the set-up */
	size_t snap_len;
	uint32_t conn_slot;     /* a CONNECTING entry of b's, for Ack/Nack answers */
	bool open;
} mb;

static void mb_unlink(void)
{
	if (mb.open)
		tl_unlink(mb.path);
}

static int mb_open(void)
{
	uint64_t end = tl_now_ms() + 10000;
	int slot;

	snprintf(mb.path, sizeof(mb.path), "/dev/shm/ntbsock-test-fuzz-mbox-%d", (int)getpid());
	tl_unlink(mb.path);
	tp_helper_hold(true); /* the harness alone runs the mailbox */
	if (tl_open(mb.path, 0, 4u << 20, &mb.tpp, &mb.a))
		return -1;
	if (tl_open(mb.path, 1, 4u << 20, &mb.tpp, &mb.b))
		return -1;
	mb.open = true;
	if (tp_listen(mb.b, MB_PORT))
		return -1;
	while (!(tp_link_refresh(mb.a) & tp_link_refresh(mb.b))) {
		if (tl_now_ms() > end)
			return -1;
		usleep(1000);
	}
	mb.out = tp_link_ntb(mb.a);
	tp_host_lock(mb.b);
	tp_mbox_process(mb.b); /* adopt the peer's session: indices start at 0 */
	slot = tp_slot_alloc(mb.b, TP_ES_CONNECTING, tp_self_pid());
	if (slot >= 0) {
		mb.conn_slot = (uint32_t)slot;
		mb.b->host->e[slot].msgid = 77;
	}
	tp_host_unlock(mb.b);
	if (slot < 0)
		return -1;
	/* (offers for Claims to take: the client says it takes them, OFFER_RX, at its look at the
	 * session; then the refill runs with our mailbox) */
	tp_host_lock(mb.a);
	tp_mbox_process(mb.a);
	tp_host_unlock(mb.a);
	tp_host_lock(mb.b);
	tp_mbox_process(mb.b);
	tp_host_unlock(mb.b);
	if (!atomic_load(&mb.b->host->offers_held))
		fprintf(stderr, "fuzz_mbox: no offer made: Claims will find none\n");
	mb.snap_len = mb.b->host_size;
	mb.snap = malloc(mb.snap_len);
	if (!mb.snap)
		return -1;
	memcpy(mb.snap, mb.b->host, mb.snap_len);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	tp_params_init(&mb.tpp);
	mb.tpp.contexts = 8;
	mb.tpp.connections = 64; /* (room for offers: tp_offer.c keeps one per 16 connections) */
	mb.tpp.queue_size = 64u << 10;
	mb.tpp.inline_slots = 16;
	mb.tpp.spin_us = 0;
	if (mb_open()) {
		fprintf(stderr, "fuzz_mbox: cannot open the link pair\n");
		exit(1);
	}
	atexit(mb_unlink);
	return 0;
}

struct mb_rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t mb_rd8(struct mb_rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static uint32_t mb_rd32(struct mb_rd *r)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)mb_rd8(r) << (8 * i);
	return v;
}

/* The next packet of the input, made plausible as its mode byte asks: bit 0 seal it as the peer
 * would (sequence and CRC), bit 1 a geometry inside our outbound window, bit 2 the port we listen
 * on, bit 3 an answer to our connecting entry (for a Claim: one of the offers we hold), bit 4 our
 * wire version and a known type (bits 5-7). */
static void mb_pkt_of(struct mb_rd *r, struct tp_pkt *p, uint32_t seq, uint32_t seed)
{
	uint8_t mode = mb_rd8(r);
	size_t n = r->n < offsetof(struct tp_pkt, crc) ? r->n : offsetof(struct tp_pkt, crc);
	const struct tp_host_entry *ce = &mb.b->host->e[mb.conn_slot];

	memset(p, 0, sizeof(*p));
	memcpy(p, r->p, n);
	r->p += n, r->n -= n;
	if (mode & 2) { /* a geometry inside our outbound window */
		tp_pkt_set_slot_off(p, TP_OFF_SLOTS + (p->slot_off_lo % 16u) * (uint64_t)mb.b->slot_size);
		p->inline_n = mb.b->geom.inline_n;
		p->qsize = mb.b->geom.qsize;
		p->client_slot %= 64u;
		/* and a pool of data rings there (the peer's geometry is ours), a ring of it or
		 * none (wire version 5: without them every Apply and Claim failed its check) */
		p->pool_off_lo = (uint32_t)mb.b->geom.pool_off;
		p->pool_off_hi = (uint32_t)(mb.b->geom.pool_off >> 32);
		p->pool_n = mb.b->geom.pool_n;
		p->ring %= mb.b->geom.pool_n + 1u;
	}
	if (mode & 4) {
		p->key.bytes[38] = MB_PORT >> 8;
		p->key.bytes[39] = MB_PORT & 0xff;
	}
	if (mode & 8) { /* an answer to our own connecting entry */
		p->client_slot = mb.conn_slot;
		p->msgid = ce->msgid;
		p->client_nonce = ce->nonce;
	}
	if (mode & 16) {
		p->version = TP_WIRE_VERSION;
		/* 0 (invalid), Apply, Ack, Nack, Cancel, Offer (never sent through a mailbox),
		 * Claim (a client taking one of our offers: tp_offer_on_claim()) */
		p->type = (uint8_t)(mode >> 5) % 7u;
	}
	if (p->type == TP_PKT_CLAIM && (mode & 8)) {
		/* a Claim of an offer we hold (bit 3 names no connecting entry of ours for one) */
		const struct tp_host *h = mb.b->host;

		for (uint32_t i = 0; i < tp_host_used(h); i++) {
			if (h->e[i].state == TP_ES_PENDING && h->e[i].role == TP_ROLE_OFFER) {
				p->server_slot = i;
				p->server_nonce = h->e[i].nonce;
				break;
			}
		}
	}
	if (mode & 1) {
		p->seq = seq;
		tp_pkt_seal(p, seed);
	} else {
		memcpy(&p->crc, r->p, r->n < 4 ? r->n : 4);
		r->p += r->n < 4 ? r->n : 4, r->n -= r->n < 4 ? r->n : 4;
	}
}

/* The receiver's host table is consistent: its free count matches, what it admitted fits. */
static void mb_check_host(void)
{
	const struct tp_host *h = mb.b->host;
	uint32_t free_n = 0;

	uint32_t used = tp_host_used(h), offers = 0;

	free_n = h->contexts - used; /* (never handed out: free, not read) */
	for (uint32_t i = 0; i < used; i++) {
		const struct tp_host_entry *e = &h->e[i];

		if (e->state == TP_ES_FREE) {
			free_n++;
			continue;
		}
		if (e->state == TP_ES_PENDING && e->role == TP_ROLE_OFFER) {
			offers++; /* (no peer yet: no geometry) */
			continue;
		}
		if (e->state == TP_ES_PENDING &&
		    !tp_geom_valid(mb.b, e->peer_slot_off, e->peer_inline_n, e->peer_qsize))
			abort();
	}
	if (free_n != h->free_num || offers != atomic_load(&h->offers_held)) {
		fprintf(stderr, "fuzz_mbox: free %u (counted %u), offers %u (counted %u)\n",
			(unsigned)h->free_num, free_n, (unsigned)atomic_load(&h->offers_held), offers);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mb_rd r = { data, size };
	uint32_t seed, start = 0, ptx, npkt = 0, used[MB_MAXPKT];
	uint8_t flags;
	uint64_t word;

	if (!mb.open)
		LLVMFuzzerInitialize(NULL, NULL);
	seed = tp_mbox_seed_in(mb.b); /* what b checks the peer's words and packets with */
	/* (all under b's host lock: where a helper thread runs, as in the replay of the corpora in
	 * `make check`, it leaves the mailbox to us meanwhile) */
	tp_host_lock(mb.b);
	flags = mb_rd8(&r);
	if (flags & 1)
		start = mb_rd32(&r);
	ptx = (flags & 2) ? mb_rd32(&r) : 0;
	mb.b->host->mbox_cons = start;
	atomic_store(&mb.b->admin_down, (flags & 8) != 0);
	while (r.n && npkt < MB_MAXPKT) {
		struct tp_pkt p;
		uint32_t slot = (start + npkt) % TP_MBOX_SLOTS;

		mb_pkt_of(&r, &p, start + npkt + 1, seed);
		ntb_write(mb.out, TP_OFF_MBOX + slot * TP_MBOX_PKT, &p, sizeof(p));
		used[npkt++] = slot;
	}
	if (!(flags & 2))
		ptx = start + npkt;
	word = tp_cw_make(seed, ptx);
	if (flags & 4)
		word ^= 1ull << (63 - (ptx & 31));
	ntb_to_peer_barrier(mb.out);
	ntb_write64(mb.out, TP_OFF_MBOX_TX, word);

	(void)tp_mbox_process(mb.b);
	mb_check_host();

	/* back to the state after the set-up */
	for (uint32_t i = 0; i < npkt; i++) {
		static const struct tp_pkt zero;

		ntb_write(mb.out, TP_OFF_MBOX + used[i] * TP_MBOX_PKT, &zero, sizeof(zero));
	}
	ntb_write64(mb.out, TP_OFF_MBOX_TX, 0);
	atomic_store(&mb.b->admin_down, false);
	memcpy((uint8_t *)mb.b->host + offsetof(struct tp_host, peer_epoch),
	       mb.snap + offsetof(struct tp_host, peer_epoch),
	       mb.snap_len - offsetof(struct tp_host, peer_epoch));
	tp_host_unlock(mb.b);
	return 0;
}
