/* SPDX-License-Identifier: MIT */
/* The geometry a peer announces in its Apply / Ack (tp_mbox.c): 64-bit slot offsets on the wire
 * and in the host table, tp_geom_valid()'s verdicts around 4 GiB and the window's end, the
 * link's own slot layout in windows above 4 GiB, and a connection whose slots lie above 4 GiB
 * (an 8 GiB window of 4096 contexts, sparse on tmpfs) carrying bytes to the right place; an
 * Apply of another wire version is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/helpers/tp_testlib.h"
#include "transport/tp_int.h"
#include "util/log.h"

#define GIB (UINT64_C(1) << 30)

/* The packet carries all 64 bits of a slot offset, low half at byte 32, high half at byte 92. */
static void test_pkt_slot_off_64(void **state)
{
	uint64_t offs[] = { TP_OFF_SLOTS, 0xffffff80u, UINT64_C(0x100000000),
			    UINT64_C(0x102c0a000), 63 * GIB + 0x10080 };
	struct tp_pkt p;
	uint32_t lo, hi;

	(void)state;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		memset(&p, 0, sizeof(p));
		tp_pkt_set_slot_off(&p, offs[i]);
		assert_true(tp_pkt_slot_off(&p) == offs[i]);
		memcpy(&lo, (uint8_t *)&p + 32, 4);
		memcpy(&hi, (uint8_t *)&p + 92, 4);
		assert_true(((uint64_t)hi << 32 | lo) == offs[i]);
		/* sealed and checked like any packet: the high half is under the CRC */
		p.seq = 1;
		tp_pkt_seal(&p, 0x1234);
		assert_true(tp_pkt_valid(&p, 0x1234, 1));
		p.slot_off_hi ^= 1;
		assert_false(tp_pkt_valid(&p, 0x1234, 1));
	}
}

/* Slot offsets of a link's own geometry in 64 bits: slot 4095 of 1 MiB + 8.5 KiB slots. */
static void test_slot_off_above_4g(void **state)
{
	struct tp_link l;

	(void)state;
	memset(&l, 0, sizeof(l));
	l.slot_size = TP_SLOT_RINGS + 64 * 128u + (1u << 20);
	for (uint32_t s = 0; s < TP_MAX_CONTEXTS; s += 97)
		assert_true(tp_slot_off(&l, s) == TP_OFF_SLOTS + (uint64_t)s * l.slot_size);
	assert_true(tp_slot_off(&l, 4095) == UINT64_C(0x10000) + UINT64_C(4095) * 1057280u);
	assert_true(tp_slot_off(&l, 4095) > UINT64_C(0xffffffff));
}

/* tp_geom_valid(), tp_pool_valid(): slots and pools anywhere in the outbound window, above
 * 4 GiB too; nothing that reaches past its end, however the sum would wrap. */
static void test_geom_valid(void **state)
{
	struct tp_link l;
	uint32_t q = 1u << 20, n = 64, size = TP_SLOT_RINGS + n * 128u;

	(void)state;
	memset(&l, 0, sizeof(l));
	l.out_size = (size_t)(8 * GIB);
	assert_true(tp_geom_valid(&l, TP_OFF_SLOTS, n, q));
	assert_true(tp_geom_valid(&l, UINT64_C(0x100000000), n, q));        /* at 4 GiB */
	assert_true(tp_geom_valid(&l, UINT64_C(0x102c0a000), n, q));        /* above it */
	assert_true(tp_geom_valid(&l, 8 * GIB - size, n, q));              /* ends at the end */
	assert_false(tp_geom_valid(&l, 8 * GIB - size + 128u, n, q));
	assert_false(tp_geom_valid(&l, 8 * GIB, n, q));
	assert_false(tp_geom_valid(&l, 9 * GIB, n, q));
	assert_false(tp_geom_valid(&l, UINT64_C(0x100000000) + 64, n, q));   /* misaligned */
	assert_false(tp_geom_valid(&l, UINT64_MAX - 127, n, q));             /* end would wrap */
	assert_false(tp_geom_valid(&l, UINT64_C(1) << 63, n, q));
	assert_false(tp_geom_valid(&l, TP_OFF_SLOTS - 128u, n, q));          /* control area */
	assert_false(tp_geom_valid(&l, TP_OFF_SLOTS, 3, q));
	assert_false(tp_geom_valid(&l, TP_OFF_SLOTS, n, q + 1));
	assert_false(tp_geom_valid(&l, TP_OFF_SLOTS, 1u << 17, q));
	/* the pool of data rings */
	assert_true(tp_pool_valid(&l, UINT64_C(0x100000), 4096, q, 0));
	assert_true(tp_pool_valid(&l, UINT64_C(0x100000), 4096, q, 4096));
	assert_false(tp_pool_valid(&l, UINT64_C(0x100000), 4096, q, 4097));   /* no such ring */
	assert_true(tp_pool_valid(&l, 8 * GIB - 4096 * (uint64_t)q, 4096, q, 1)); /* ends at the end */
	assert_false(tp_pool_valid(&l, 8 * GIB - 4096 * (uint64_t)q + 4096, 4096, q, 1));
	assert_false(tp_pool_valid(&l, UINT64_C(0x100000), 4097, q, 1));     /* too many */
	assert_false(tp_pool_valid(&l, UINT64_C(0x100000), 0, q, 0));
	assert_false(tp_pool_valid(&l, UINT64_C(0x100800), 1, q, 1));        /* misaligned */
	assert_false(tp_pool_valid(&l, TP_OFF_SLOTS - 4096, 1, q, 1));       /* control area */
	assert_false(tp_pool_valid(&l, UINT64_MAX - 4095, 1, q, 1));         /* would wrap */
	assert_false(tp_pool_valid(&l, 8 * GIB, 1, q, 1));
	/* a 4 GiB window: the offset a 32-bit sum wrapped to is no longer a stand-in */
	l.out_size = (size_t)(4 * GIB);
	assert_false(tp_geom_valid(&l, UINT64_C(0x102c0a000), n, q));
	assert_false(tp_pool_valid(&l, UINT64_C(0x100000000), 1, q, 1));
}

/* Room for two sparse windows of WIN bytes on /dev/shm (tmpfs allocates only what is written). */
static bool shm_room(uint64_t win)
{
	struct statvfs v;

	return statvfs("/dev/shm", &v) == 0 && (uint64_t)v.f_bsize * v.f_blocks >= win / 4;
}

/* The layout of windows above 4 GiB: the ring a window of 4 GiB + 128 KiB leaves one
 * context (a 32-bit quotient left 64 KiB of it), and a pool of 4096 rings in an 8 GiB window
 * that stays inside it. */
static void test_link_geometry_big(void **state)
{
	struct tp_params tpp;
	struct tp_link *a;
	char path[128];

	(void)state;
	if (!shm_room(8 * GIB))
		skip();
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-biggeom-%d", getpid());
	tl_unlink(path);
	tp_params_init(&tpp);
	tpp.contexts = 1;
	assert_int_equal(tl_open(path, 0, (size_t)(4 * GIB + (128u << 10)), &tpp, &a), 0);
	assert_int_equal(a->geom.qsize, 1u << 20);
	assert_true(a->geom.pool_off + a->geom.qsize <= a->in_size);
	assert_true(tp_slot_off(a, a->contexts - 1) + a->slot_size <= a->geom.pool_off);
	tp_link_close(a);
	tl_unlink(path);

	tpp.contexts = TP_MAX_CONTEXTS;
	assert_int_equal(tl_open(path, 0, (size_t)(8 * GIB), &tpp, &a), 0);
	assert_int_equal(a->geom.qsize, 1u << 20);
	assert_int_equal(a->geom.pool_n, TP_MAX_CONTEXTS);
	assert_true(a->geom.pool_off + (TP_MAX_CONTEXTS - 1u) * (uint64_t)a->geom.qsize >
		    UINT64_C(0xffffffff));
	assert_true(a->geom.pool_off + TP_MAX_CONTEXTS * (uint64_t)a->geom.qsize <= a->in_size);
	tp_link_close(a);
	tl_unlink(path);
}

static bool all_zero(const volatile uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Make RING the data ring the next grant of L's pool takes (the top of its stack). */
static void prefer_ring(struct tp_link *l, uint32_t ring)
{
	struct tp_host *h = l->host;

	tp_host_lock(l);
	for (uint32_t i = 0; i < h->pool_top; i++) {
		if (h->pool_stack[i] == ring) {
			h->pool_stack[i] = h->pool_stack[h->pool_top - 1];
			h->pool_stack[h->pool_top - 1] = (uint16_t)ring;
		}
	}
	tp_host_unlock(l);
}

/* A connection granted the last data rings of an 8 GiB window (4096 of 1 MiB): both above
 * 4 GiB. Its bytes arrive, in both directions, at the ring's offset in the receiver's window;
 * the offset a 32-bit sum wraps to (another ring or the slots) stays untouched. */
static void test_conn_above_4g(void **state)
{
	const uint32_t last = TP_MAX_CONTEXTS - 1;
	uint8_t msg[3000], small[40], both[3040];
	struct tp_params tpp;
	struct tl_pair p;
	struct tp_key k;
	enum tp_reason why;
	size_t wa, wb;

	(void)state;
	if (!shm_room(8 * GIB))
		skip();
	snprintf(p.path, sizeof(p.path), "/dev/shm/ntbsock-test-big4g-%d", getpid());
	tl_unlink(p.path);
	tp_params_init(&tpp);
	tpp.contexts = TP_MAX_CONTEXTS;
	assert_int_equal(tl_open(p.path, 0, (size_t)(8 * GIB), &tpp, &p.a), 0);
	assert_int_equal(tl_open(p.path, 1, (size_t)(8 * GIB), &tpp, &p.b), 0);
	assert_int_equal(tp_listen(p.b, 5000), 0);
	assert_int_equal(tl_wait_listen(p.a, 5000, 5000), 0);
	prefer_ring(p.a, last);
	prefer_ring(p.b, last);
	tl_key(&k, 40000, 5000);
	assert_int_equal(tp_connect(p.a, &k, 5000, &p.ca, &why), 0);
	assert_int_equal(tp_attach(p.b, &k, &p.cb), 0);
	uint64_t off = p.a->geom.pool_off + (uint64_t)last * p.a->geom.qsize;

	assert_true(off > UINT64_C(0xffffffff));
	assert_true(p.ca->out_ring_off == p.b->geom.pool_off + (uint64_t)last * p.b->geom.qsize);
	assert_true(p.cb->out_ring_off == off);
	assert_true(p.a->host->e[p.ca->slot].ring == last + 1u);
	assert_true(p.ca->in_ring == p.a->in + off);

	tl_fill(msg, sizeof(msg), 7, 0);
	tl_fill(small, sizeof(small), 8, 0);
	for (int dir = 0; dir < 2; dir++) {
		struct tp_conn *tx = dir ? p.cb : p.ca, *rx = dir ? p.ca : p.cb;
		const volatile uint8_t *win = ntb_in_window(tp_link_ntb(dir ? p.a : p.b),
							    dir ? &wa : &wb);
		uint64_t at = rx->link->geom.pool_off + (uint64_t)last * rx->link->geom.qsize;
		uint64_t wrapped = at & 0xffffffffu;

		assert_int_equal(tl_send_all(tx, small, sizeof(small)), 0);   /* inline */
		assert_int_equal(tl_send_all(tx, msg, sizeof(msg)), 0);       /* data ring */
		for (size_t got = 0; got < sizeof(both);) {
			ssize_t n = tl_recv_some(rx, both + got, sizeof(both) - got, 3000);

			assert_true(n > 0);
			got += (size_t)n;
		}
		assert_memory_equal(both, small, sizeof(small));
		assert_memory_equal(both + sizeof(small), msg, sizeof(msg));
		/* the data ring's first message: descriptor at the ring's start, payload after */
		const volatile uint8_t *data = win + at;

		for (size_t i = 0; i < sizeof(msg); i++)
			assert_int_equal(data[TP_DESC_SIZE + i], msg[i]);
		/* nothing at the wrapped offset */
		assert_true(all_zero(win + wrapped, sizeof(msg) + TP_DESC_SIZE));
	}
	tl_pair_close(&p);
}

/* An Apply of another wire version (a build with 32-bit offsets or the old inline sequence:
 * version 0) is refused with "peer error", not admitted; the same Apply of our version is
 * admitted. Written raw into B's mailbox (tp_mbox_send() stamps our version). */
static uint32_t apply_raw(struct tp_link *a, uint16_t port, uint32_t version)
{
	struct tp_host *h = a->host;
	struct tp_pkt k;
	int slot;

	tp_host_lock(a);
	tp_mbox_process(a); /* (the peer's session, which seeds the mailbox: tp_mbox_seed()) */
	uint32_t seed = tp_mbox_seed(ntb_link_epoch(tp_link_ntb(a)), h->peer_epoch);
	slot = tp_slot_alloc(a, TP_ES_CONNECTING, getpid());
	assert_true(slot >= 0);
	struct tp_host_entry *e = &h->e[slot];
	e->msgid = h->msgid_next++;
	memset(&k, 0, sizeof(k));
	k.type = TP_PKT_APPLY;
	k.msgid = e->msgid;
	k.client_slot = (uint32_t)slot;
	k.client_nonce = e->nonce;
	tp_pkt_set_slot_off(&k, tp_slot_off(a, (uint32_t)slot));
	k.inline_n = a->geom.inline_n;
	k.qsize = a->geom.qsize;
	tp_pkt_set_pool(&k, a, e);
	tl_key(&k.key, 999, port);
	k.version = version;
	k.seq = h->mbox_prod + 1;
	tp_pkt_seal(&k, seed);
	assert_int_equal(ntb_write(tp_link_ntb(a), TP_OFF_MBOX + (h->mbox_prod % TP_MBOX_SLOTS) *
				   TP_MBOX_PKT, &k, sizeof(k)), 0);
	h->mbox_prod++;
	tp_out_word(a, TP_OFF_MBOX_TX, seed, h->mbox_prod);
	tp_host_unlock(a);
	return (uint32_t)slot;
}

/* Both sides of a small link (4 contexts, 4 connections) named after TAG, at PATH. */
static void small_links_open(const char *tag, char *path, size_t len, struct tp_link **a,
			     struct tp_link **b)
{
	struct tp_params tpp;

	snprintf(path, len, "/dev/shm/ntbsock-test-%s-%d", tag, getpid());
	tl_unlink(path);
	tp_params_init(&tpp);
	tpp.contexts = 4;
	tpp.connections = 4;
	assert_int_equal(tl_open(path, 0, 4u << 20, &tpp, a), 0);
	assert_int_equal(tl_open(path, 1, 4u << 20, &tpp, b), 0);
}

static void test_apply_other_version_refused(void **state)
{
	struct tp_link *a, *b;
	char path[128];

	(void)state;
	small_links_open("wirever", path, sizeof(path), &a, &b);
	assert_int_equal(tp_listen(b, 443), 0);
	assert_int_equal(tl_wait_listen(a, 443, 5000), 0);
	for (int i = 0; i < 2000 && !tp_link_is_up(b); i++)
		usleep(1000);
	tp_host_lock(b);
	uint32_t free_b = b->host->free_num;
	tp_host_unlock(b);
	uint32_t old = apply_raw(a, 443, 0), cur = apply_raw(a, 443, TP_WIRE_VERSION);

	for (int i = 0; i < 2000; i++) {
		bool both;

		tp_host_lock(b);
		tp_mbox_process(b);
		tp_host_unlock(b);
		tp_host_lock(a);
		tp_mbox_process(a);
		both = a->host->e[old].result && a->host->e[cur].result; /* (under A's lock) */
		tp_host_unlock(a);
		if (both)
			break;
		usleep(1000);
	}
	/* (read under each host's lock: the helpers write these under it) */
	tp_host_lock(a);
	uint32_t r_old = a->host->e[old].result, why_old = a->host->e[old].result_reason;
	uint32_t r_cur = a->host->e[cur].result;
	uint64_t off_cur = a->host->e[cur].peer_slot_off;
	tp_host_unlock(a);
	tp_host_lock(b);
	uint32_t free_now = b->host->free_num;
	tp_host_unlock(b);
	assert_int_equal(r_old, TP_PKT_NACK);
	assert_int_equal(why_old, TP_REASON_PEER_ERROR);
	assert_int_equal(r_cur, TP_PKT_ACK);
	assert_true(off_cur >= TP_OFF_SLOTS);
	assert_int_equal(free_now, free_b - 1); /* only the second took a context */
	tp_link_close(a);
	tp_link_close(b);
	tl_unlink(path);
}

/* tp_listen_veto(): the port leaves the published bitmap and the host's admission while the
 * vetoing process lives, whoever else listens on it (a process with an io_uring that shares
 * the listener); this process's own references come and go beside it untouched. */
static void test_listen_veto(void **state)
{
	struct tp_link *a, *b;
	char path[128];

	(void)state;
	small_links_open("veto", path, sizeof(path), &a, &b);
	assert_int_equal(tp_listen(b, 8080), 0);
	assert_int_equal(tp_listen(b, 8081), 0);
	assert_int_equal(tl_wait_listen(a, 8080, 5000), 0);
	assert_true(tp_mbox_host_listens(b->host, 8080));
	assert_int_equal(tp_listen_veto(b, 8080), 0);
	assert_int_equal(tp_listen_veto(b, 8080), 0); /* (once is enough: the same entry) */
	assert_false(tp_mbox_host_listens(b->host, 8080));
	assert_true(tp_mbox_host_listens(b->host, 8081));
	tp_host_lock(b);
	uint32_t pub = b->host->listen_pub[8080 / 32u], pub1 = b->host->listen_pub[8081 / 32u];
	int n = 0;

	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++)
		n += b->host->listen[i].count == TP_LISTEN_VETO;
	tp_host_unlock(b);
	assert_int_equal(pub & (1u << (8080 % 32u)), 0);
	assert_int_not_equal(pub1 & (1u << (8081 % 32u)), 0);
	assert_int_equal(n, 1);
	/* another listen() and unlisten() of ours beside it: still vetoed, the veto kept */
	assert_int_equal(tp_listen(b, 8080), 0);
	assert_false(tp_mbox_host_listens(b->host, 8080));
	assert_int_equal(tp_unlisten(b, 8080), 0);
	assert_int_equal(tp_unlisten(b, 8080), 0);
	assert_int_equal(tp_unlisten(b, 8080), -ENOENT);
	assert_false(tp_mbox_host_listens(b->host, 8080));
	tp_host_lock(b);
	n = 0;
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++)
		n += b->host->listen[i].count == TP_LISTEN_VETO;
	tp_host_unlock(b);
	assert_int_equal(n, 1);
	tp_link_close(a);
	tp_link_close(b);
	tl_unlink(path);
}

int main(void)
{
	if (getenv("TP_DEBUG"))
		log_set_level(LL_DEBUG);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pkt_slot_off_64),
		cmocka_unit_test(test_slot_off_above_4g),
		cmocka_unit_test(test_geom_valid),
		cmocka_unit_test(test_link_geometry_big),
		cmocka_unit_test(test_conn_above_4g),
		cmocka_unit_test(test_apply_other_version_refused),
		cmocka_unit_test(test_listen_veto),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
