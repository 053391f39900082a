/* SPDX-License-Identifier: MIT */
/* The host table's indexes: its FREE entries queued in release order, and its server entries
 * hashed by the peer's slot and by key, so that a set-up finds what it needs without a scan of
 * every context (4096 entries of the table are 4096 cache misses and more).
 *
 * Everything here runs under the host lock, in memory shared by this host's processes. A
 * process that dies holding the lock (the lock is robust) may leave an index half-updated:
 * tp_host_lock() then rebuilds them all from the entries, which stay the truth. A walk also
 * stops at a number out of range or after more steps than there are entries (a cycle), and
 * the callers check every entry they are given. */
#include <stdlib.h>
#include <string.h>

#include "transport/tp_int.h"
#include "util/crc32c.h"

/* The bucket count of each hash index: a power of two ≥ CONTEXTS (from the table's contexts,
 * which tp_host_open() checked against the mapping's size; never a count read from the table). */
static uint32_t buckets_for(uint32_t contexts)
{
	return contexts <= 16u ? 16u : 1u << (32 - __builtin_clz(contexts - 1u));
}

size_t tp_hidx_size(uint32_t contexts)
{
	return 2u * (size_t)buckets_for(contexts) * sizeof(uint32_t);
}

/* The heads of the peer-slot buckets, then those of the key buckets, after e[contexts]. */
static uint32_t *peer_heads(const struct tp_host *h)
{
	return (uint32_t *)(uintptr_t)&h->e[h->contexts];
}

static uint32_t *key_heads(const struct tp_host *h)
{
	return peer_heads(h) + buckets_for(h->contexts);
}

static uint32_t peer_bucket(const struct tp_host *h, uint32_t peer_slot)
{
	return (peer_slot * 0x9e3779b1u >> 7) & (buckets_for(h->contexts) - 1u);
}

static uint32_t key_bucket(const struct tp_host *h, const struct tp_key *key)
{
	return crc32c(0, key->bytes, sizeof(key->bytes)) & (buckets_for(h->contexts) - 1u);
}

static void free_push(struct tp_host *h, uint32_t slot)
{
	h->e[slot].free_next = 0;
	if (h->free_tail && h->free_tail <= h->contexts)
		h->e[h->free_tail - 1].free_next = slot + 1;
	else
		h->free_head = slot + 1;
	h->free_tail = slot + 1;
}

void tp_hidx_init(struct tp_host *h)
{
	h->free_head = h->free_tail = 0;
	/* every entry free, none in the queue (tp_hidx_free_pop()); relaxed: the table is not
	 * published yet (host_init()'s magic) */
	atomic_store_explicit(&h->e_used, 0, memory_order_relaxed);
	/* mapped in one call first: the first process of every session (each short-lived client
	 * of a host with no other) took a fault per 4 KiB page of them here, 9 in the demo's */
	ntb_prefault_mem(peer_heads(h), tp_hidx_size(h->contexts));
	memset(peer_heads(h), 0, tp_hidx_size(h->contexts));
}

static int by_release(const void *a, const void *b, void *arg)
{
	const struct tp_host *h = arg;
	uint64_t ra = h->e[*(const uint32_t *)a].released_ms;
	uint64_t rb = h->e[*(const uint32_t *)b].released_ms;

	return ra < rb ? -1 : ra > rb;
}

static bool is_server(const struct tp_host_entry *e)
{
	return e->state != TP_ES_FREE && e->role == 1;
}

/* (malloc and qsort_r under the host lock: only after a holder died or a queue lied; glibc's are
 * safe in a forked child too, where tp_atfork_child() may come here) */
void tp_hidx_rebuild(struct tp_host *h)
{
	uint32_t *order = malloc(h->contexts * sizeof(*order)), n = 0;

	memset(peer_heads(h), 0, tp_hidx_size(h->contexts));
	h->free_head = h->free_tail = 0;
	uint32_t offers = 0, used = tp_host_used(h), free_n = h->contexts - used;

	for (uint32_t i = 0; i < used; i++) {
		struct tp_host_entry *e = &h->e[i];

		e->peer_next = e->key_next = 0;
		free_n += e->state == TP_ES_FREE;
		if (e->state == TP_ES_FREE && order)
			order[n++] = i;
		else if (e->state == TP_ES_FREE)
			free_push(h, i); /* (no memory to sort: in table order) */
		else if (is_server(e))
			tp_hidx_add_server(h, i);
		else if (e->state == TP_ES_PENDING && e->role == TP_ROLE_OFFER)
			offers++;
	}
	/* (the offers counted again: a holder that died between an offer's change and its count;
	 * relaxed, under the host lock) */
	atomic_store_explicit(&h->offers_held, offers, memory_order_relaxed);
	/* (and the free count, which a holder that died between a slot's change and its count
	 * left off by one: entries never used in this session, and those free) */
	atomic_store_explicit(&h->free_num, free_n, memory_order_relaxed);
	if (order) {
		qsort_r(order, n, sizeof(*order), by_release, h);
		for (uint32_t k = 0; k < n; k++)
			free_push(h, order[k]);
		free(order);
	}
}

int tp_hidx_free_pop(struct tp_host *h)
{
	uint32_t fresh = atomic_load_explicit(&h->e_used, memory_order_relaxed); /* (ours: lock) */
	uint32_t head = h->free_head;
	/* A fresh entry is a connection slot whose window pages nobody touched yet: a page fault
	 * on each host at its set-up (a set-up loop of 16384 slots ran 5 % slower than of 4096,
	 * all of them reused). So the entry released longest ago comes first once it was
	 * released TP_SLOT_REUSE_MS ago (late writes of its last peer have long stopped, and the
	 * new nonce rejects any); a fresh one only while none was. */
	bool reuse = head && head <= tp_host_used(h) && h->e[head - 1].state == TP_ES_FREE &&
		     clock_age_ms(tp_now_ms(), h->e[head - 1].released_ms) >= TP_SLOT_REUSE_MS;

	if (fresh < h->contexts && !reuse) {
		/* one never used in this session: cleared before it counts, so that a holder's
		 * death in between leaves no garbage among the entries walks look at */
		memset(&h->e[fresh], 0, sizeof(h->e[fresh]));
		/* release: pairs with the acquire in tp_host_used() */
		atomic_store_explicit(&h->e_used, fresh + 1u, memory_order_release);
		return (int)fresh;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		uint32_t n = h->free_head;

		/* an empty queue while the count says otherwise lost a link (a holder's death
		 * the rebuild at the lock did not see): from the entries again */
		if (!n && attempt == 0 &&
		    atomic_load_explicit(&h->free_num, memory_order_relaxed) > 0) {
			tp_hidx_rebuild(h);
			continue;
		}
		if (!n)
			break;
		if (n <= tp_host_used(h) && h->e[n - 1].state == TP_ES_FREE) {
			h->free_head = h->e[n - 1].free_next;
			if (!h->free_head)
				h->free_tail = 0;
			h->e[n - 1].free_next = 0;
			return (int)(n - 1);
		}
		tp_hidx_rebuild(h); /* a queue that lies: from the entries again */
	}
	return -1;
}

/* Drop entry number + 1 N from the chain at *HEAD linked through the field at NEXT_OFF. */
static void chain_drop(struct tp_host *h, uint32_t *head, size_t next_off, uint32_t n)
{
	uint32_t *link = head;

	for (uint32_t steps = 0; *link && steps <= h->contexts; steps++) {
		if (*link > tp_host_used(h))
			break;
		uint32_t *next = (uint32_t *)((char *)&h->e[*link - 1] + next_off);

		if (*link == n) {
			*link = *next;
			*next = 0;
			return;
		}
		link = next;
	}
}

void tp_hidx_freed(struct tp_host *h, uint32_t slot)
{
	struct tp_host_entry *e = &h->e[slot];

	if (e->role == 1) {
		chain_drop(h, &peer_heads(h)[peer_bucket(h, e->peer_slot)],
			   offsetof(struct tp_host_entry, peer_next), slot + 1);
		chain_drop(h, &key_heads(h)[key_bucket(h, &e->key)],
			   offsetof(struct tp_host_entry, key_next), slot + 1);
	}
	free_push(h, slot);
}

void tp_hidx_add_server(struct tp_host *h, uint32_t slot)
{
	struct tp_host_entry *e = &h->e[slot];
	uint32_t *ph = &peer_heads(h)[peer_bucket(h, e->peer_slot)];
	uint32_t *kh = &key_heads(h)[key_bucket(h, &e->key)];

	e->peer_next = *ph;
	*ph = slot + 1;
	e->key_next = *kh;
	*kh = slot + 1;
}

uint32_t tp_hidx_peer_first(const struct tp_host *h, uint32_t peer_slot)
{
	return peer_heads(h)[peer_bucket(h, peer_slot)];
}

uint32_t tp_hidx_key_first(const struct tp_host *h, const struct tp_key *key)
{
	return key_heads(h)[key_bucket(h, key)];
}
