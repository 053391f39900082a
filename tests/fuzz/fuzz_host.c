/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the host table (a file every process of a host using the link maps and
 * writes) as tp_host_open() checks it (tp_host_adopt(): rebuild a stale one, take a live one's
 * queue geometry) and as `ntbsock stat` reads it (tp_stat_table()). The table is a malloc'd
 * buffer of the size a mapping would have: a read past it is an ASan report; no file per input.
 * A geometry adopted from the table must fit the window and be one the peer accepts.
 *
 * Input: byte 0 the link's contexts (1..64), byte 1 mode (bit 0: a header of this session and
 * layout, so that the geometry check is reached; bit 1: also a map only as large as the input
 * describes, for the stat reader; bits 2-7: the entries handed out, e_used, times 2, plus bit 7
 * of byte 0: up to 127, more than there are, as a table could say), then the table's first FZ_HEAD bytes (magic to slot_size, what
 * the two read of the header) and the bytes of its entries (the 16 KiB between, lock, mailbox
 * indices and listeners, stay zero: neither reads them). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tp_int.h"

#define FZ_EPOCH   0x5eed1234u
#define FZ_INLINE  16u
#define FZ_QSIZE   (64u << 10)
#define FZ_WINDOW  (4u << 20)
#define FZ_HEAD    offsetof(struct tp_host, lock)

/* The table (or map) of SIZE bytes the input describes: header bytes, then entries. */
static void fill(uint8_t *t, size_t size, const uint8_t *data, size_t n)
{
	size_t head = n < FZ_HEAD ? n : FZ_HEAD, rest = n - head;
	size_t room = size - offsetof(struct tp_host, e);

	memcpy(t, data, head);
	memcpy(t + offsetof(struct tp_host, e), data + head, rest < room ? rest : room);
}

static size_t table_size(uint32_t contexts)
{
	return ALIGN_UP(sizeof(struct tp_host) + contexts * sizeof(struct tp_host_entry) +
				tp_hidx_size(contexts),
			(size_t)4096);
}

/* What the link must hold after tp_host_adopt() accepted a table. */
static void check_geom(const struct tp_link *l)
{
	uint32_t n = l->geom.inline_n, q = l->geom.qsize;

	/* (slots hold the inline rings; the data rings are the pool's, after the slots and their
	 * NEWS words: tp_link.c's layout since transfer contexts) */
	if (n < 2 || n > 65536 || (n & (n - 1)) || l->geom.log2n != (uint32_t)__builtin_ctz(n) ||
	    q < 4096 || q > (1u << 30) || (q & (q - 1)) || l->slot_size % 128u ||
	    l->slot_size < TP_SLOT_RINGS + n * 128u ||
	    (uint64_t)(l->slot_size + 8u) * l->contexts + TP_OFF_SLOTS > l->geom.pool_off ||
	    l->geom.pool_n == 0 || l->geom.pool_off > l->in_size ||
	    (uint64_t)l->geom.pool_n * q > l->in_size - l->geom.pool_off)
		abort();
}

static void stat_read(const void *map, size_t size)
{
	struct tp_stat_entry out[8];
	int n = tp_stat_table(map, size, 1, out, 8);

	if (n < 0)
		abort();
	for (int i = 0; i < n && i < 8; i++)
		if (!out[i].state || !out[i].role || out[i].slot >= 64u * 1024)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_link l;
	struct tp_host *h;
	size_t tsize;
	uint8_t mode;
	uint32_t used;
	int rc;

	if (size < 2)
		return 0;
	memset(&l, 0, sizeof(l));
	l.contexts = 1u + data[0] % 64u;
	l.geom.inline_n = FZ_INLINE;
	l.geom.log2n = (uint32_t)__builtin_ctz(FZ_INLINE);
	/* the link's own layout, as tp_link.c makes it: slots of inline rings, then a pool of one
	 * data ring per connection slot that fits the window */
	l.slot_size = ALIGN_UP(TP_SLOT_RINGS + FZ_INLINE * 128u, 128u);
	l.geom.pool_off = ALIGN_UP((uint64_t)(l.slot_size + 8u) * l.contexts + TP_OFF_SLOTS, 4096u);
	l.geom.qsize = FZ_QSIZE;
	while ((uint64_t)l.geom.qsize * l.contexts > FZ_WINDOW - l.geom.pool_off)
		l.geom.qsize /= 2;
	l.geom.pool_n = l.contexts;
	l.in_size = l.out_size = FZ_WINDOW;
	mode = data[1];
	used = (uint32_t)(mode >> 2) * 2u + (data[0] >> 7); /* (odd ones too) */
	data += 2, size -= 2;

	/* the stat reader on a map just as large as the input describes */
	if (mode & 2) {
		size_t rsize = offsetof(struct tp_host, e) + (size > FZ_HEAD ? size - FZ_HEAD : 0);
		uint8_t *raw = calloc(1, rsize);

		if (!raw)
			return 0;
		fill(raw, rsize, data, size);
		atomic_store_explicit(&((struct tp_host *)raw)->e_used, used, memory_order_relaxed);
		stat_read(raw, rsize);
		free(raw);
	}

	tsize = table_size(l.contexts);
	h = calloc(1, tsize);
	if (!h)
		return 0;
	fill((uint8_t *)h, tsize, data, size);
	atomic_store_explicit(&h->e_used, used, memory_order_relaxed);
	if (mode & 1) {
		h->magic = TP_HOST_MAGIC;
		h->version = TP_HOST_VERSION;
		h->size = (uint32_t)tsize;
		h->session_epoch = FZ_EPOCH;
		h->contexts = l.contexts;
	}
	stat_read(h, tsize);
	rc = tp_host_adopt(&l, h, tsize, FZ_EPOCH, "fuzz");
	if (rc == 0) {
		check_geom(&l);
		if (h->magic != TP_HOST_MAGIC || h->contexts != l.contexts || h->size != tsize)
			abort();
		stat_read(h, tsize);
	} else if (rc != -EINVAL && rc != -EPROTONOSUPPORT && rc != -EBUSY) {
		/* (-EBUSY: another session's table that live processes may use, left to them) */
		abort();
	}
	pthread_mutex_destroy(&h->lock);
	free(h);
	return 0;
}
