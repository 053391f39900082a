/* SPDX-License-Identifier: MIT */
/* The control mailbox as a ring on a real link pair: a producer never writes into a slot its
 * consumer has not been seen to release, also when the consumer index it reads (MBOX_RX) fails
 * its check (spoilt, lost, never written); a lost consumer index is written again, so that the
 * ring does not stop for good; a lost producer index does not hide the packet it published. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"

static void pair_open(struct tl_pair *p, const char *name)
{
	struct tp_params tpp;

	tp_params_init(&tpp);
	tpp.contexts = 4;
	assert_int_equal(tl_pair_open(p, name, 4u << 20, &tpp, 0), 0);
}

static volatile uint64_t *in_word(struct tp_link *l, uint32_t off)
{
	return (volatile uint64_t *)(void *)(l->in + off);
}

/* The seed of what L's host reads from its mailbox area (written by the peer). */
static uint32_t in_seed(struct tp_link *l)
{
	return tp_mbox_seed(ntb_link_peer_epoch(l->ntb), ntb_link_epoch(l->ntb));
}

/* A packet nobody acts on (a Cancel of no reservation), numbered N in its MsgID; L's host
 * lock held. */
static int send_one_locked(struct tp_link *l, uint32_t n)
{
	struct tp_pkt k;

	memset(&k, 0, sizeof(k));
	k.type = TP_PKT_CANCEL;
	k.msgid = n;
	k.client_slot = 0xffffffffu;
	tp_mbox_process(l); /* (as tp_connect(): the indices follow the peer's session first) */
	return tp_mbox_send(l, &k);
}

static int send_one(struct tp_link *l, uint32_t n)
{
	int rc;

	tp_host_lock(l);
	rc = send_one_locked(l, n);
	tp_host_unlock(l);
	return rc;
}

/* Packets L's host consumed from its mailbox so far. */
static uint32_t consumed(struct tp_link *l)
{
	uint32_t n;

	tp_host_lock(l);
	tp_mbox_process(l);
	n = l->host->mbox_cons;
	tp_host_unlock(l);
	return n;
}

/* Wait until B consumed WANT packets (its helper thread reads the mailbox too). */
static bool wait_consumed(struct tl_pair *p, uint32_t want, int ms)
{
	uint64_t end = tl_now_ms() + (uint64_t)ms;

	while (consumed(p->b) != want) {
		if (tl_now_ms() >= end)
			return false;
		usleep(1000);
	}
	return true;
}

/* Send packets from A until the mailbox says full; returns how many went (at most LIMIT). */
static uint32_t fill(struct tl_pair *p, uint32_t first, uint32_t limit)
{
	uint32_t n = 0;

	while (n < limit && send_one(p->a, first + n) == 0)
		n++;
	return n;
}

/* The packet in B's mailbox that carries sequence number SEQ (producer index + 1). */
static void peek_pkt(struct tl_pair *p, uint32_t seq, struct tp_pkt *ret)
{
	memcpy(ret, (const void *)(p->b->in + TP_OFF_MBOX + ((seq - 1) % TP_MBOX_SLOTS) * TP_MBOX_PKT),
	       sizeof(*ret));
}

/* Every packet B has not consumed yet (FIRST..A's producer index) is in its slot, intact. */
static void assert_unread_intact(struct tl_pair *p, uint32_t first, uint32_t first_msgid)
{
	uint32_t prod = p->a->host->mbox_prod;
	struct tp_pkt k;

	assert_true(prod - first + 1 <= TP_MBOX_SLOTS);
	for (uint32_t seq = first; seq != prod + 1; seq++) {
		peek_pkt(p, seq, &k);
		assert_int_equal(k.seq, seq);
		assert_int_equal(k.msgid, first_msgid + (seq - first));
		assert_true(tp_pkt_valid(&k, in_seed(p->b), seq));
	}
}

/* B stops reading its mailbox; A's view of B's consumer index fails its check (a bit flipped
 * on the way, or a write lost before any was seen): A fills at most the slots B was seen to
 * release, then refuses, without overwriting a packet B has still to read. */
static void test_spoilt_rx_frees_nothing(void **state)
{
	struct tl_pair p;
	uint32_t base;

	(void)state;
	pair_open(&p, "mboxfull");
	assert_int_equal(send_one(p.a, 1), 0);
	assert_true(wait_consumed(&p, 1, 3000));
	base = p.a->host->mbox_prod;
	assert_int_equal(base, 1);

	tp_host_lock(p.b); /* B's host reads no mailbox meanwhile */
	*in_word(p.a, TP_OFF_MBOX_RX) ^= 1ull << 40; /* spoilt: fails its check */
	uint32_t sent = fill(&p, 1000, 2 * TP_MBOX_SLOTS);
	print_message("spoilt MBOX_RX: %u packets went before the mailbox said full\n", sent);
	/* (A saw B's index at 0 or 1 before it was spoilt) */
	assert_true(sent == TP_MBOX_SLOTS || sent == TP_MBOX_SLOTS - 1);
	assert_int_equal(send_one(p.a, 9999), -EAGAIN);
	assert_unread_intact(&p, base + 1, 1000);

	/* a word never written (0) frees nothing either */
	*in_word(p.a, TP_OFF_MBOX_RX) = 0;
	assert_int_equal(send_one(p.a, 9999), -EAGAIN);
	assert_unread_intact(&p, base + 1, 1000);
	tp_host_unlock(p.b);

	/* B reads all of them (none lost) and says so: room again */
	assert_true(wait_consumed(&p, base + sent, 3000));
	assert_int_equal(send_one(p.a, 2000), 0);
	tl_pair_close(&p);
}

/* B's consumer index is lost on the way (A still reads an older valid one) while A's view is
 * full: B writes it again by itself (every 500 ms), so the mailbox does not stop for good. */
static void test_lost_rx_written_again(void **state)
{
	struct tl_pair p;
	uint64_t old_rx;

	(void)state;
	pair_open(&p, "mboxrx");
	assert_int_equal(send_one(p.a, 1), 0);
	assert_true(wait_consumed(&p, 1, 3000));
	old_rx = *in_word(p.a, TP_OFF_MBOX_RX);
	tp_host_lock(p.b);
	assert_int_equal(fill(&p, 100, 2 * TP_MBOX_SLOTS), TP_MBOX_SLOTS);
	tp_host_unlock(p.b);
	assert_true(wait_consumed(&p, 1 + TP_MBOX_SLOTS, 3000));
	*in_word(p.a, TP_OFF_MBOX_RX) = old_rx; /* the write that said so was dropped */
	assert_int_equal(send_one(p.a, 500), -EAGAIN);
	uint64_t t0 = tl_now_ms(), end = t0 + 3000;
	int rc;

	while ((rc = send_one(p.a, 500)) == -EAGAIN && tl_now_ms() < end)
		usleep(5000);
	print_message("lost MBOX_RX written again after %llu ms\n",
		      (unsigned long long)(tl_now_ms() - t0));
	assert_int_equal(rc, 0);
	tl_pair_close(&p);
}

/* A's producer index is lost on the way: B reads the packet all the same (it checks out whole
 * with the next sequence number). A packet spoilt on the way whose index was lost too stops B
 * only until A writes its index again by itself (every 500 ms), even when A sends nothing more. */
static void test_lost_tx_not_hidden(void **state)
{
	struct tl_pair p;
	uint64_t old_tx;

	(void)state;
	pair_open(&p, "mboxtx");
	assert_int_equal(send_one(p.a, 1), 0);
	assert_true(wait_consumed(&p, 1, 3000));

	/* (both helpers held off; the locks always taken A first, then B) */
	tp_host_lock(p.a); /* (A's helper writes nothing meanwhile) */
	tp_host_lock(p.b);
	old_tx = *in_word(p.b, TP_OFF_MBOX_TX);
	assert_int_equal(send_one_locked(p.a, 2), 0);
	*in_word(p.b, TP_OFF_MBOX_TX) = old_tx; /* the index write was dropped */
	tp_host_unlock(p.b);
	assert_int_equal(consumed(p.b), 2);
	tp_host_unlock(p.a);

	tp_host_lock(p.a);
	tp_host_lock(p.b);
	old_tx = *in_word(p.b, TP_OFF_MBOX_TX);
	assert_int_equal(send_one_locked(p.a, 3), 0);
	*in_word(p.b, TP_OFF_MBOX_TX) = old_tx; /* dropped, and the packet spoilt */
	((volatile uint8_t *)(void *)(p.b->in + TP_OFF_MBOX + 2 * TP_MBOX_PKT))[20] ^= 4;
	tp_host_unlock(p.b);
	assert_int_equal(consumed(p.b), 2);
	tp_host_unlock(p.a);
	uint64_t t0 = tl_now_ms();

	assert_true(wait_consumed(&p, 3, 3000));
	print_message("spoilt packet with a lost index passed over after %llu ms\n",
		      (unsigned long long)(tl_now_ms() - t0));
	assert_int_equal(send_one(p.a, 4), 0);
	assert_true(wait_consumed(&p, 4, 3000));
	tl_pair_close(&p);
}

/* B's host restarts (a new session) while A's goes on: what A wrote into B's mailbox area in B's
 * earlier session (packets and their index) does not check out in the new one, so B does not
 * read those packets a second time (old Applies would each reserve a context again); the
 * mailbox starts over in both directions. */
static void test_restart_reads_no_stale_packets(void **state)
{
	struct tl_pair p;
	struct tp_params tpp;
	uint32_t old_epoch;

	(void)state;
	pair_open(&p, "mboxrestart");
	for (uint32_t i = 1; i <= 3; i++)
		assert_int_equal(send_one(p.a, i), 0);
	assert_true(wait_consumed(&p, 3, 3000));
	old_epoch = ntb_link_epoch(p.b->ntb);
	tp_link_close(p.b);
	tp_params_init(&tpp);
	tpp.contexts = 4;
	assert_int_equal(tl_open(p.path, 1, 4u << 20, &tpp, &p.b), 0);
	assert_true(ntb_link_epoch(p.b->ntb) != old_epoch);
	for (int i = 0; i < 5000 && !(tp_link_is_up(p.b) &&
				       ntb_link_peer_epoch(p.a->ntb) == ntb_link_epoch(p.b->ntb)); i++)
		usleep(1000);
	assert_int_equal(ntb_link_peer_epoch(p.a->ntb), ntb_link_epoch(p.b->ntb));
	assert_int_equal(consumed(p.b), 0);
	usleep(250000); /* (both helpers come by meanwhile) */
	assert_int_equal(consumed(p.b), 0);
	/* A sees the new session, starts over, and B reads what A sends now */
	assert_int_equal(consumed(p.a), 0);
	assert_int_equal(send_one(p.a, 4), 0);
	assert_true(wait_consumed(&p, 1, 3000));
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spoilt_rx_frees_nothing),
		cmocka_unit_test(test_lost_rx_written_again),
		cmocka_unit_test(test_lost_tx_not_hidden),
		cmocka_unit_test(test_restart_reads_no_stale_packets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
