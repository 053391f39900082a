/* SPDX-License-Identifier: MIT */
/* [RT] rules (doc/design.md §6), one table row per rule: context admission with priorities, the
 * sender's set-up state machine (Ack/Nack/timer, duplicated, stale and late answers), retry
 * epochs; then the receiver's mailbox rules on a real link pair (duplicated Apply, same
 * context with another MsgID, corrupted packets, no listener) and data-level rules (corrupted
 * data → Retry and retransmission, a duplicated Retry delivers nothing twice, a late
 * DetectAck). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"
#include "util/log.h"

/* --- admission ---------------------------------------------------------------------------- */
struct admit_row {
	const char *rule;
	uint32_t free_num, pri, cnct_pri;
	bool admit;
	uint32_t free_after, pri_after;
};

static const struct admit_row admit_rows[] = {
	{ "free > 1: anyone gets one",                 5, 0, 0, true, 4, 0 },
	{ "free > 1 even below RCxtPRI",               2, 3, 0, true, 1, 3 },
	{ "last context: priority ≥ RCxtPRI gets it",  1, 2, 2, true, 0, 0 },
	{ "last context: higher priority gets it",     1, 2, 5, true, 0, 0 },
	{ "last context kept from a lower priority",   1, 2, 1, false, 1, 2 },
	{ "none free: Nack raises RCxtPRI",            0, 1, 4, false, 0, 4 },
	{ "none free: lower priority leaves RCxtPRI",  0, 4, 1, false, 0, 4 },
	{ "last context, RCxtPRI 0: first comer",      1, 0, 0, true, 0, 0 },
};

static void test_admission_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(admit_rows) / sizeof(admit_rows[0]); i++) {
		const struct admit_row *r = &admit_rows[i];
		struct tp_rt_pool p = { r->free_num, r->pri };

		print_message("admit: %s\n", r->rule);
		assert_int_equal(tp_rt_admit(&p, r->cnct_pri), r->admit);
		assert_int_equal(p.free_num, r->free_after);
		assert_int_equal(p.pri, r->pri_after);
	}
}

/* Starvation, in the pure model: 4 contexts, 8 senders; holders release after a while; a
 * refused sender retries with CnctPRI + 1. Every sender is admitted within a bound. */
static void test_admission_no_starvation(void **state)
{
	struct tp_rt_pool pool = { 4, 0 };
	uint32_t pri[8] = { 0 }, tries[8] = { 0 }, held[8] = { 0 }, maxtries = 0;
	uint64_t rnd = 7;

	(void)state;
	for (int round = 0; round < 20000; round++) {
		int s = (int)(tl_rand(&rnd) % 8);

		if (held[s]) {
			if (--held[s] == 0)
				pool.free_num++;
			continue;
		}
		tries[s]++;
		if (tp_rt_admit(&pool, pri[s])) {
			if (tries[s] > maxtries)
				maxtries = tries[s];
			tries[s] = 0;
			pri[s] = 0;
			held[s] = 1 + (uint32_t)(tl_rand(&rnd) % 6);
		} else {
			pri[s]++;
		}
	}
	print_message("starvation model: max tries %u\n", maxtries);
	assert_true(maxtries <= 64);
}

/* --- sender set-up state machine ------------------------------------------------------------ */
struct tc_step {
	enum tp_rt_event ev;
	uint32_t msgid;
	bool resend;
	enum tp_tcxt_state state;
	uint32_t pri;
};
struct tc_row {
	const char *rule;
	struct tc_step steps[6];
	int n;
	enum tp_reason reason;
};

static const struct tc_row tc_rows[] = {
	{ "Ack while CONNECTING → SENDING", { { TP_EV_ACK, 7, false, TP_TC_SENDING, 0 } }, 1, 0 },
	{ "Ack of another MsgID is stale: ignored",
	  { { TP_EV_ACK, 6, false, TP_TC_CONNECTING, 0 },
	    { TP_EV_ACK, 7, false, TP_TC_SENDING, 0 } }, 2, 0 },
	{ "duplicated Ack after SENDING changes nothing",
	  { { TP_EV_ACK, 7, false, TP_TC_SENDING, 0 },
	    { TP_EV_ACK, 7, false, TP_TC_SENDING, 0 } }, 2, 0 },
	{ "Nack → CnctPRI + 1 and Apply again",
	  { { TP_EV_NACK, 7, true, TP_TC_CONNECTING, 1 },
	    { TP_EV_NACK, 7, true, TP_TC_CONNECTING, 2 },
	    { TP_EV_ACK, 7, false, TP_TC_SENDING, 2 } }, 3, 0 },
	{ "reordered: Nack arriving after the Ack is ignored",
	  { { TP_EV_ACK, 7, false, TP_TC_SENDING, 0 },
	    { TP_EV_NACK, 7, false, TP_TC_SENDING, 0 } }, 2, 0 },
	{ "TimerCnct → Apply again",
	  { { TP_EV_TIMER, 0, true, TP_TC_CONNECTING, 0 },
	    { TP_EV_ACK, 7, false, TP_TC_SENDING, 0 } }, 2, 0 },
	{ "TimerCnct MaxErr times → give up (timeout)",
	  { { TP_EV_TIMER, 0, true, TP_TC_CONNECTING, 0 },
	    { TP_EV_TIMER, 0, true, TP_TC_CONNECTING, 0 },
	    { TP_EV_TIMER, 0, false, TP_TC_FAILED, 0 } }, 3, TP_REASON_TIMEOUT },
	{ "Nacks never exhaust: each raises CnctPRI (the set-up deadline bounds the wait)",
	  { { TP_EV_NACK, 7, true, TP_TC_CONNECTING, 1 },
	    { TP_EV_NACK, 7, true, TP_TC_CONNECTING, 2 },
	    { TP_EV_NACK, 7, true, TP_TC_CONNECTING, 3 },
	    { TP_EV_NACK, 7, true, TP_TC_CONNECTING, 4 },
	    { TP_EV_ACK, 7, false, TP_TC_SENDING, 4 } }, 5, 0 },
	{ "no listener → give up at once",
	  { { TP_EV_NACK_NOLISTEN, 7, false, TP_TC_FAILED, 0 } }, 1, TP_REASON_NO_LISTENER },
	{ "late Ack after giving up is ignored",
	  { { TP_EV_NACK_NOLISTEN, 7, false, TP_TC_FAILED, 0 },
	    { TP_EV_ACK, 7, false, TP_TC_FAILED, 0 } }, 2, TP_REASON_NO_LISTENER },
};

static void test_tcxt_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(tc_rows) / sizeof(tc_rows[0]); i++) {
		const struct tc_row *r = &tc_rows[i];
		/* past the quick repeats: each TimerCnct expiry counts toward MaxErr ([RT]) */
		struct tp_tcxt t = { .state = TP_TC_CONNECTING, .msgid = 7,
				     .expired = TP_CNCT_QUICK };

		print_message("tcxt: %s\n", r->rule);
		for (int k = 0; k < r->n; k++) {
			const struct tc_step *s = &r->steps[k];

			assert_int_equal(tp_rt_tcxt_event(&t, s->ev, s->msgid, 3), s->resend);
			assert_int_equal(t.state, s->state);
			assert_int_equal(t.pri, s->pri);
		}
		if (t.state == TP_TC_FAILED)
			assert_int_equal(t.reason, r->reason);
	}
}

/* TimerCnct as tp_connect() runs it: a lost packet is repeated several times within the set-up
 * deadline of a client whose kernel connect completed (100 ms: preload/), by quick repeats that
 * count no error; then every 16x the base, each one counting toward MaxErr. */
static uint64_t cnct_give_up_ms(const struct tp_params *tpp, uint32_t max_err,
				uint32_t *ret_within_100)
{
	struct tp_tcxt t = { .state = TP_TC_CONNECTING, .msgid = 7 };
	uint64_t at = 0;

	*ret_within_100 = 0;
	while (t.state == TP_TC_CONNECTING) {
		at += tp_rt_cnct_timer(tpp->cnct_timeout_ms, t.expired);
		if (tp_rt_tcxt_event(&t, TP_EV_TIMER, 0, max_err))
			*ret_within_100 += at < 100;
		assert_true(at < 100000);
	}
	assert_int_equal(t.reason, TP_REASON_TIMEOUT);
	return at;
}

static void test_cnct_timer(void **state)
{
	struct tp_params tpp;
	uint32_t within_100;
	uint64_t at;

	(void)state;
	tp_params_init(&tpp);
	assert_int_equal(tp_rt_cnct_timer(10, 0), 10);
	assert_int_equal(tp_rt_cnct_timer(10, 3), 10);
	assert_int_equal(tp_rt_cnct_timer(10, 4), 20);
	assert_int_equal(tp_rt_cnct_timer(10, 8), 40);
	assert_int_equal(tp_rt_cnct_timer(10, 12), 80);
	assert_int_equal(tp_rt_cnct_timer(10, 16), 160);
	assert_int_equal(tp_rt_cnct_timer(10, 1000), 160);
	assert_int_equal(tp_rt_cnct_timer(600000, 1000), 9600000); /* the largest: no overflow */
	at = cnct_give_up_ms(&tpp, tpp.max_err, &within_100);
	print_message("TimerCnct: %u repeats within 100 ms; MaxErr %u reached at %llu ms\n",
		      within_100, tpp.max_err, (unsigned long long)at);
	assert_true(within_100 >= 6);
	/* the set-up deadline, not MaxErr, ends a set-up nobody answers */
	assert_true(at > tpp.setup_timeout_ms);
	/* a small MaxErr still gives up no sooner than 8 × 200 ms */
	at = cnct_give_up_ms(&tpp, 8, &within_100);
	print_message("TimerCnct: MaxErr 8 reached at %llu ms\n", (unsigned long long)at);
	assert_true(at >= 1600);
}

static void test_epochs(void **state)
{
	(void)state;
	assert_true(tp_rt_epoch_newer(1, 0));
	assert_false(tp_rt_epoch_newer(0, 0));     /* same epoch: no retransmission */
	assert_false(tp_rt_epoch_newer(3, 5));     /* stale Retry */
	assert_true(tp_rt_epoch_newer(0, 65535));  /* wraps */
	assert_true(tp_rt_epoch_ok(4, 4));
	assert_false(tp_rt_epoch_ok(5, 4));        /* data of an old epoch is not accepted */
}

/* --- the receiver's mailbox rules on a real link pair ----------------------------------- */
static void pair_open(struct tl_pair *p, const char *name, uint32_t contexts)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.contexts = contexts;
	tpp.connections = contexts; /* (the set-up's admission: connection slots) */
	assert_int_equal(tl_pair_open(p, name, 4u << 20, &tpp, 443), 0);
}

static uint32_t g_apply_flags; /* the next Applies' apply_flags */

/* Reserve a CONNECTING entry on A and send an Apply for it (optionally corrupted). */
static int apply_from(struct tl_pair *p, uint16_t port, uint32_t msgid, bool corrupt, int slot)
{
	struct tp_pkt k;
	struct tp_host_entry *e;

	tp_host_lock(p->a);
	tp_mbox_process(p->a); /* (as tp_connect(): the indices follow the peer's session first) */
	if (slot < 0)
		slot = tp_slot_alloc(p->a, TP_ES_CONNECTING, getpid());
	assert_true(slot >= 0);
	e = &p->a->host->e[slot];
	e->msgid = msgid;
	e->result = 0;
	memset(&k, 0, sizeof(k));
	k.type = TP_PKT_APPLY;
	k.msgid = msgid;
	k.client_slot = (uint32_t)slot;
	k.client_nonce = e->nonce;
	tp_pkt_set_slot_off(&k, tp_slot_off(p->a, (uint32_t)slot));
	k.inline_n = p->a->geom.inline_n;
	k.qsize = p->a->geom.qsize;
	tp_pkt_set_pool(&k, p->a, e);
	tl_key(&k.key, 999, port);
	k.apply_flags = g_apply_flags;
	if (corrupt) {
		/* seal it, then flip a bit, as a corrupting link would */
		struct tp_host *h = p->a->host;
		uint32_t off = TP_OFF_MBOX + (h->mbox_prod % TP_MBOX_SLOTS) * TP_MBOX_PKT;

		k.seq = h->mbox_prod + 1;
		tp_pkt_seal(&k, tp_mbox_seed(ntb_link_epoch(p->a->ntb), h->peer_epoch));
		k.pri ^= 0x100;
		ntb_write(p->a->ntb, off, &k, sizeof(k));
		h->mbox_prod++;
		tp_out_word(p->a, TP_OFF_MBOX_TX, tp_mbox_seed(ntb_link_epoch(p->a->ntb), h->peer_epoch),
			    h->mbox_prod);
	} else {
		assert_int_equal(tp_mbox_send(p->a, &k), 0);
	}
	tp_host_unlock(p->a);
	return slot;
}

/* Let both hosts process their mailboxes (the helper thread does too). */
static void settle(struct tl_pair *p)
{
	for (int i = 0; i < 3; i++) {
		tp_host_lock(p->b);
		tp_mbox_process(p->b);
		tp_host_unlock(p->b);
		tp_host_lock(p->a);
		tp_mbox_process(p->a);
		tp_host_unlock(p->a);
		usleep(2000);
	}
}

/* B answers A's Apply for SLOT (its mailbox processed here; the helper may be first): true
 * once A's entry holds the answer. A's own mailbox is not processed: its index is looked at. */
static bool answered(struct tl_pair *p, uint64_t mbox_tx0)
{
	for (int i = 0; i < 1000; i++) {
		tp_host_lock(p->b);
		tp_mbox_process(p->b);
		tp_host_unlock(p->b);
		if (tp_in_word(p->a, TP_OFF_MBOX_TX) != mbox_tx0)
			return true;
		usleep(1000);
	}
	return false;
}

/* A's Apply (MSGID, the slot into *RET_SLOT when given) answered by B: did the answer ring A's
 * doorbell? (A ring the helper would make late is waited for.) */
static bool apply_rang(struct tl_pair *p, uint32_t msgid, int *ret_slot)
{
	uint32_t db0 = ntb_db_read(p->a->ntb);
	uint64_t tx0 = tp_in_word(p->a, TP_OFF_MBOX_TX);
	int slot = apply_from(p, 443, msgid, false, -1);

	if (ret_slot)
		*ret_slot = slot;
	assert_true(answered(p, tx0));
	if (ntb_db_read(p->a->ntb) == db0)
		usleep(20000);
	return ntb_db_read(p->a->ntb) != db0;
}

/* An answer to an Apply whose client watches for it (TP_APPLY_WATCH) rings the client's doorbell
 * only while one of the client host's set-ups sleeps (MBOX_RING, tp_mbox_sleepers()): a ring
 * would only wake its helper. An Apply that does not watch is rung for as before. */
static void test_watched_answer_rings_sleepers_only(void **state)
{
	struct tl_pair p;
	int slot;

	(void)state;
	pair_open(&p, "rtring", 4);
	settle(&p);
	tp_host_lock(p.a);
	int sleeper = tp_slot_alloc(p.a, TP_ES_CONNECTING, getpid()); /* (a set-up that sleeps) */
	assert_true(sleeper >= 0);
	tp_mbox_sleepers(p.a, (uint32_t)sleeper, false); /* (a valid 0 under this session's seed) */
	tp_host_unlock(p.a);
	/* watched, nobody asleep: answered, not rung */
	g_apply_flags = TP_APPLY_WATCH;
	assert_false(apply_rang(&p, 700, &slot));
	tp_host_lock(p.a);
	tp_mbox_process(p.a);
	assert_int_equal(p.a->host->e[slot].result, TP_PKT_ACK);
	tp_host_unlock(p.a);
	/* watched, a set-up asleep: rung */
	tp_host_lock(p.a);
	tp_mbox_sleepers(p.a, (uint32_t)sleeper, true);
	tp_mbox_sleepers(p.a, (uint32_t)sleeper, true); /* (counted once) */
	assert_int_equal(p.a->host->mbox_sleepers, 1);
	tp_host_unlock(p.a);
	assert_true(apply_rang(&p, 701, NULL));
	/* its process died asleep: the freed entry leaves the count; not rung again */
	tp_host_lock(p.a);
	tp_slot_free(p.a, (uint32_t)sleeper);
	assert_int_equal(p.a->host->mbox_sleepers, 0);
	tp_host_unlock(p.a);
	assert_false(apply_rang(&p, 703, NULL));
	/* not watched: rung */
	g_apply_flags = 0;
	assert_true(apply_rang(&p, 702, NULL));
	tl_pair_close(&p);
}

static uint32_t free_num(struct tp_link *l)
{
	uint32_t n;

	tp_host_lock(l);
	n = l->host->free_num;
	tp_host_unlock(l);
	return n;
}

static void test_mailbox_rules(void **state)
{
	struct tl_pair p;
	int slot, slot2;
	uint32_t f0;

	(void)state;
	pair_open(&p, "rtmbox", 4);
	f0 = free_num(p.b);
	assert_int_equal(f0, 4);

	print_message("mailbox: Apply → Ack, one context taken\n");
	slot = apply_from(&p, 443, 100, false, -1);
	settle(&p);
	assert_int_equal(p.a->host->e[slot].result, TP_PKT_ACK);
	assert_int_equal(free_num(p.b), 3);
	uint32_t server_slot = p.a->host->e[slot].peer_slot;

	print_message("mailbox: duplicated Apply (same MsgID) → the same Ack again, no new context\n");
	p.a->host->e[slot].result = 0;
	apply_from(&p, 443, 100, false, slot);
	settle(&p);
	assert_int_equal(p.a->host->e[slot].result, TP_PKT_ACK);
	assert_int_equal(p.a->host->e[slot].peer_slot, server_slot);
	assert_int_equal(free_num(p.b), 3);

	print_message("mailbox: same context, another MsgID → dropped\n");
	apply_from(&p, 443, 101, false, slot);
	settle(&p);
	assert_int_equal(p.a->host->e[slot].result, 0);
	assert_int_equal(free_num(p.b), 3);

	print_message("mailbox: corrupted Apply → dropped, no context\n");
	slot2 = apply_from(&p, 443, 200, true, -1);
	settle(&p);
	assert_int_equal(p.a->host->e[slot2].result, 0);
	assert_int_equal(free_num(p.b), 3);

	print_message("mailbox: the next good packet after a corrupted one is processed\n");
	apply_from(&p, 443, 201, false, slot2);
	settle(&p);
	assert_int_equal(p.a->host->e[slot2].result, TP_PKT_ACK);
	assert_int_equal(free_num(p.b), 2);

	print_message("mailbox: no listener on the port → Nack(no listener)\n");
	int slot3 = apply_from(&p, 444, 300, false, -1);
	settle(&p);
	assert_int_equal(p.a->host->e[slot3].result, TP_PKT_NACK);
	assert_int_equal(p.a->host->e[slot3].result_reason, TP_REASON_NO_LISTENER);
	assert_int_equal(free_num(p.b), 2);

	print_message("mailbox: last context kept for a higher priority → Nack(no context)\n");
	tp_host_lock(p.b);
	p.b->host->rcxt_pri = 5;
	p.b->host->free_num = 1; /* pretend one is left */
	tp_host_unlock(p.b);
	p.a->host->e[slot3].result = 0;
	apply_from(&p, 443, 301, false, slot3);
	settle(&p);
	assert_int_equal(p.a->host->e[slot3].result, TP_PKT_NACK);
	assert_int_equal(p.a->host->e[slot3].result_reason, TP_REASON_NO_CONTEXT);
	tl_pair_close(&p);
}

/* A reservation whose client slot the client reuses for another connection (its earlier one was
 * given up: a lost Cancel, a repeated Apply read late) is freed by the new Apply: it would hold
 * one of the server's contexts for minutes. */
static void test_reused_client_slot_frees_reservation(void **state)
{
	struct tl_pair p;
	int slot;

	(void)state;
	pair_open(&p, "rtreuse", 4);
	slot = apply_from(&p, 443, 500, false, -1);
	settle(&p);
	assert_int_equal(p.a->host->e[slot].result, TP_PKT_ACK);
	assert_int_equal(free_num(p.b), 3);
	/* the client gives the slot up without a word reaching the server, and reuses it */
	tp_host_lock(p.a);
	p.a->host->e[slot].nonce ^= 0x5a5a5a5au;
	p.a->host->e[slot].result = 0;
	tp_host_unlock(p.a);
	apply_from(&p, 443, 501, false, slot);
	settle(&p);
	assert_int_equal(p.a->host->e[slot].result, TP_PKT_ACK);
	assert_int_equal(free_num(p.b), 3); /* the new reservation, and not the orphan */
	tl_pair_close(&p);
}

/* --- data-level rules ------------------------------------------------------------------------- */
static void conn_pair(struct tl_pair *p, struct tp_conn **ca, struct tp_conn **cb)
{
	struct tp_key k;
	enum tp_reason why;

	tl_key(&k, 5555, 443);
	assert_int_equal(tp_connect(p->a, &k, 5000, ca, &why), 0);
	assert_int_equal(tp_attach(p->b, &k, cb), 0);
}

static void test_corrupted_data_retry(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb;
	struct tp_stats sa, sb;
	char msg[40] = "0123456789abcdefghijklmnopqrstuvwxyzABC", out[64];
	struct iovec v = { msg, sizeof(msg) };

	(void)state;
	pair_open(&p, "rtdata", 4);
	conn_pair(&p, &ca, &cb);
	assert_int_equal(tp_send(ca, &v, 1), (ssize_t)sizeof(msg));
	/* flip a payload bit in the receiver's window, as a corrupting link would */
	size_t wsz;
	volatile uint8_t *win = (volatile uint8_t *)ntb_in_window(tp_link_ntb(p.b), &wsz);
	volatile uint8_t *slot0 = win + TP_OFF_SLOTS + (size_t)cb->slot * p.b->slot_size +
				  TP_SLOT_RINGS;
	slot0[tp_inline_off(sizeof(msg)) + 3] ^= 0x04;
	/* the receiver sees a bad CRC, asks for a retry; the sender rewrites; all arrives once */
	assert_int_equal(tl_recv_some(cb, out, sizeof(out), 3000), (ssize_t)sizeof(msg));
	assert_memory_equal(out, msg, sizeof(msg));
	tp_conn_stats(ca, &sa);
	tp_conn_stats(cb, &sb);
	assert_true(sb.crc_errors >= 1);
	assert_true(sa.retransmits >= 1);
	v.iov_len = 5;
	assert_int_equal(tp_send(ca, &v, 1), 5);
	assert_int_equal(tl_recv_some(cb, out, sizeof(out), 3000), 5);
	assert_memory_equal(out, msg, 5);
	tl_pair_close(&p);
}

/* RETRANSMITS of A's connection, waiting up to 1 ms for WANT (a helper pass that held the tx
 * lock at our look finishes within that). */
static uint64_t retransmits_soon(struct tp_conn *c, uint64_t want)
{
	struct tp_stats st;

	for (int i = 0; i < 100; i++) {
		tp_conn_stats(c, &st);
		if (st.retransmits >= want)
			break;
		usleep(10);
	}
	return st.retransmits;
}

/* A sender that waits to read (the answer to what it sent: tp_poll_dir() with TP_EV_IN only)
 * answers the receiver's Retry at once (tp_tx_retry_check()). Without it the Retry waited
 * for the helper's timers (doorbells trigger them at most every 5 ms, and in this process the
 * helper sleeps on the other link's doorbell): 1-3 ms per corrupted request in a ping-pong.
 * Each round corrupts the first of two messages (a bad slot with a good one behind it is a
 * corruption, not a write still landing), and checks within 1 ms; and that quick probes
 * are armed after the retransmission. */
static void test_retry_seen_by_waiting_reader(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb;
	struct tp_stats sa, sb;
	char msg[40] = "0123456789abcdefghijklmnopqrstuvwxyzABC", out[2 * sizeof(msg)];
	struct iovec v = { msg, sizeof(msg) }, o = { out, sizeof(out) };

	(void)state;
	pair_open(&p, "rtwait", 4);
	conn_pair(&p, &ca, &cb);
	for (int round = 0; round < 5; round++) {
		/* the inline slot the next message lands in */
		volatile uint8_t *slot = (volatile uint8_t *)tp_in_inline(p.b, cb->slot, cb->v_i);
		size_t got = 0;

		msg[0] = (char)('a' + round);
		assert_int_equal(tp_send(ca, &v, 1), (ssize_t)sizeof(msg));
		slot[tp_inline_off(sizeof(msg)) + 5] ^= 0x10; /* as a corrupting link would */
		assert_int_equal(tp_send(ca, &v, 1), (ssize_t)sizeof(msg));
		tp_conn_stats(ca, &sa);
		/* B reads: a bad CRC, a Retry; then A waits to read and sees the Retry */
		assert_int_equal(tp_recv(cb, &o, 1, 0), -EAGAIN);
		tp_conn_stats(cb, &sb);
		assert_int_equal(sb.crc_errors, (uint64_t)round + 1);
		(void)tp_poll_dir(ca, TP_EV_IN, false);
		assert_int_equal(retransmits_soon(ca, sa.retransmits + 1), sa.retransmits + 1);
		/* the retransmission's own words may be lost: quick probes follow it, run by the
		 * helper as nobody waits on A (the data stays pending until B reads below) */
		assert_true(atomic_load(&p.a->probe_soon));
		while (got < sizeof(out)) {
			ssize_t n = tl_recv_some(cb, out + got, sizeof(out) - got, 3000);

			assert_true(n > 0);
			got += (size_t)n;
		}
		assert_memory_equal(out, msg, sizeof(msg));
		assert_memory_equal(out + sizeof(msg), msg, sizeof(msg));
	}
	tl_pair_close(&p);
}

/* The receiver echoes the sender's Detect sequence in its feedback (DetectAck). An answer
 * that comes after the next probe went out (a receiver answering late, as on a loaded host)
 * still shows the receiver alive: TErrCnt starts over, once per answer; an answer seen
 * before does not count again. */
static void test_late_detect_ack(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb;

	(void)state;
	pair_open(&p, "rtlate", 4);
	conn_pair(&p, &ca, &cb);
	/* both locks held: the helper's timers (trylock) stay off both ends meanwhile */
	tp_mutex_lock(&cb->rx_lock);
	tp_mutex_lock(&ca->tx_lock);
	uint16_t base = ca->det_acked;

	/* probes base+1 and base+2 went out unanswered; the receiver answers base+1 */
	ca->detect_seq = (uint16_t)(base + 2);
	ca->terr = 2;
	cb->det_seen = (uint16_t)(base + 1);
	cb->pub_ep = (uint32_t)cb->rx_epoch | (uint32_t)cb->det_seen << 16;
	tp_peer_word(cb, TP_W_FB_EPOCH, cb->pub_ep);
	tp_tx_feedback(ca);
	assert_int_equal(ca->terr, 0);
	assert_int_equal(ca->det_acked, (uint16_t)(base + 1));
	assert_int_equal(ca->det_backoff, 1);
	/* the same answer read again is not a new one */
	ca->terr = 3;
	tp_tx_feedback(ca);
	assert_int_equal(ca->terr, 3);
	/* nor one older than the probes that could still be outstanding (MaxErr of them) */
	ca->detect_seq = (uint16_t)(base + 2 + p.a->params.max_err);
	cb->det_seen = (uint16_t)(base + 1);
	ca->det_acked = base;
	tp_tx_feedback(ca);
	assert_int_equal(ca->terr, 3);
	/* the answer to the latest probe counts, as the first one did */
	cb->det_seen = ca->detect_seq;
	cb->pub_ep = (uint32_t)cb->rx_epoch | (uint32_t)cb->det_seen << 16;
	tp_peer_word(cb, TP_W_FB_EPOCH, cb->pub_ep);
	tp_tx_feedback(ca);
	assert_int_equal(ca->terr, 0);
	assert_int_equal(ca->det_acked, ca->detect_seq);
	tp_mutex_unlock(&ca->tx_lock);
	tp_mutex_unlock(&cb->rx_lock);
	tl_pair_close(&p);
}

static void test_duplicate_retry_no_duplicate_data(void **state)
{
	struct tl_pair p;
	struct tp_conn *ca, *cb;
	char big[3000], out[4096];
	struct iovec v = { big, sizeof(big) };
	struct iovec s = { (void *)"tiny", 4 };

	(void)state;
	memset(big, 'x', sizeof(big));
	pair_open(&p, "rtdup", 4);
	conn_pair(&p, &ca, &cb);
	assert_int_equal(tp_send(ca, &s, 1), 4);
	assert_int_equal(tp_send(ca, &v, 1), (ssize_t)sizeof(big));
	/* a (duplicated / stale) Retry with a newer epoch lands in the sender's feedback unit:
	 * the sender rewrites everything unreleased; the receiver must not deliver it twice */
	size_t wsz;
	_Atomic uint64_t *fb = (_Atomic uint64_t *)(void *)((volatile uint8_t *)
		ntb_in_window(tp_link_ntb(p.a), &wsz) + TP_OFF_SLOTS +
		(size_t)ca->slot * p.a->slot_size + TP_W_FB_EPOCH);
	/* its FB_RETRY_EP says epoch 1 too (and no position: everything unreleased is rewritten);
	 * without it the sender would wait for positions a receiver that never asked does not
	 * send, and the receiver's next feedback would overwrite the forged epoch */
	_Atomic uint64_t *fb_rep = fb + (TP_W_FB_RETRY_EP - TP_W_FB_EPOCH) / 8;

	atomic_store_explicit(fb_rep, tp_cw_make(ca->nonce_in, 1), memory_order_relaxed);
	/* (atomic: the helper's doorbell look, answer_retries(), loads the word meanwhile; the
	 * peer's word store is one 8-byte write) */
	atomic_store_explicit(fb, tp_cw_make(ca->nonce_in, 1), memory_order_seq_cst);
	assert_int_equal(tp_send(ca, &s, 1), 4);
	/* the sender reads its feedback lazily (when credits run short, every few sends, and in
	 * its timers): drive the timers until it has seen the Retry */
	struct tp_stats sa;
	uint64_t end = tl_now_ms() + 3000;

	tp_conn_stats(ca, &sa);
	while (sa.retransmits == 0 && tl_now_ms() < end) {
		tp_conn_timers(ca, tp_now_ms());
		tp_conn_stats(ca, &sa);
	}
	assert_true(sa.retransmits == 1); /* the epoch is adopted once */
	size_t got = 0;
	while (got < 4 + sizeof(big) + 4) {
		ssize_t n = tl_recv_some(cb, out + got, sizeof(out) - got, 3000);

		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_int_equal(got, 4 + sizeof(big) + 4);
	assert_memory_equal(out, "tiny", 4);
	assert_memory_equal(out + 4 + sizeof(big), "tiny", 4);
	struct iovec r = { out, sizeof(out) };
	assert_int_equal(tp_recv(cb, &r, 1, 0), -EAGAIN); /* nothing more: no duplicates */
	tl_pair_close(&p);
}

int main(void)
{
	if (getenv("TP_DEBUG"))
		log_set_level(LL_DEBUG);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_admission_table),
		cmocka_unit_test(test_admission_no_starvation),
		cmocka_unit_test(test_tcxt_table),
		cmocka_unit_test(test_cnct_timer),
		cmocka_unit_test(test_epochs),
		cmocka_unit_test(test_mailbox_rules),
		cmocka_unit_test(test_reused_client_slot_frees_reservation),
		cmocka_unit_test(test_corrupted_data_retry),
		cmocka_unit_test(test_retry_seen_by_waiting_reader),
		cmocka_unit_test(test_duplicate_retry_no_duplicate_data),
		cmocka_unit_test(test_late_detect_ack),
		cmocka_unit_test(test_watched_answer_rings_sleepers_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
