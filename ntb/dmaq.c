/* SPDX-License-Identifier: MIT */
/* The DMA queue (doc/design.md §3): a batch of transfers into the outbound window, gathered, posted
 * and completed by an engine; the default engine copies with the CPU through ntb_write().
 *
 * Transitions (anything else returns an error and changes nothing):
 *   create              → Idle
 *   enqueue  Idle|Gather → Gather     (-EBUSY when Posted, -EINVAL from Done/Aborted/Error,
 *                                      -ENOSPC when full, -EINVAL for a bad entry)
 *   post     Gather      → Posted     (-EBUSY when Posted, -EINVAL otherwise)
 *   poll/wait Posted     → Done|Error (Posted: -EINPROGRESS / -ETIMEDOUT and no change;
 *                                      Done: 0, Error: its error, Aborted: -ECANCELED,
 *                                      Idle/Gather: -EINVAL — none of these change state)
 *   abort    Posted      → Aborted    (-EINVAL otherwise)
 *   reset    Done|Aborted|Error → Idle (-EBUSY when Posted, -EINVAL from Idle/Gather)
 *   destroy  any state (a posted queue is abandoned).
 * The engine runs inside poll/wait (≤ 1 MiB per poll), so an abort between polls stops it at
 * an entry boundary or mid-entry; the window then holds a prefix of the batch.
 * A queue belongs to one thread at a time (no internal locking). */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "ntb/ntb_int.h"

#define DMAQ_POLL_BUDGET (1u << 20)

struct dmaq_entry {
	size_t dst_off;
	const void *src;
	size_t len;
};

struct ntb_dmaq {
	struct ntb_link *link;
	enum ntb_dmaq_state state;
	unsigned max, count;
	unsigned cur;          /* entry being copied */
	size_t cur_done;       /* bytes of it copied */
	int error;             /* Error state's cause */
	ntb_dmaq_engine_fn engine;
	struct dmaq_entry ent[];
};

static ssize_t cpu_copy_engine(struct ntb_link *link, size_t dst_off, const void *src, size_t len)
{
	size_t n = len < DMAQ_POLL_BUDGET ? len : DMAQ_POLL_BUDGET;
	int rc = ntb_write(link, dst_off, src, n);
	return rc ? rc : (ssize_t)n;
}

int ntb_dmaq_create(struct ntb_link *link, unsigned max_entries,
			       struct ntb_dmaq **ret_q)
{
	if (!link || !ret_q || max_entries == 0 || max_entries > (1u << 20))
		return -EINVAL;
	struct ntb_dmaq *q = calloc(1, sizeof(*q) + max_entries * sizeof(q->ent[0]));
	if (!q)
		return -ENOMEM;
	q->link = link;
	q->max = max_entries;
	q->state = NTB_DMAQ_IDLE;
	q->engine = cpu_copy_engine;
	*ret_q = q;
	return 0;
}

void ntb_dmaq_destroy(struct ntb_dmaq *q)
{
	free(q);
}

bool ntb_dmaq_cpu_engine(const struct ntb_dmaq *q)
{
	return q && q->engine == cpu_copy_engine;
}

void ntb_dmaq_set_engine(struct ntb_dmaq *q, ntb_dmaq_engine_fn fn)
{
	q->engine = fn ? fn : cpu_copy_engine;
}

int ntb_dmaq_enqueue(struct ntb_dmaq *q, size_t dst_off, const void *src, size_t len)
{
	if (q->state == NTB_DMAQ_POSTED)
		return -EBUSY;
	if (q->state != NTB_DMAQ_IDLE && q->state != NTB_DMAQ_GATHER)
		return -EINVAL;
	size_t out = ntb_out_size(q->link);
	if (!src || len == 0 || dst_off > out || len > out - dst_off)
		return -EINVAL;
	if (q->count == q->max)
		return -ENOSPC;
	q->ent[q->count++] = (struct dmaq_entry){ dst_off, src, len };
	q->state = NTB_DMAQ_GATHER;
	return 0;
}

int ntb_dmaq_post(struct ntb_dmaq *q)
{
	if (q->state == NTB_DMAQ_POSTED)
		return -EBUSY;
	if (q->state != NTB_DMAQ_GATHER)
		return -EINVAL;
	q->cur = 0;
	q->cur_done = 0;
	q->error = 0;
	q->state = NTB_DMAQ_POSTED;
	return 0;
}

static int settled(const struct ntb_dmaq *q)
{
	switch (q->state) {
	case NTB_DMAQ_DONE:    return 0;
	case NTB_DMAQ_ERROR:   return q->error;
	case NTB_DMAQ_ABORTED: return -ECANCELED;
	default:               return -EINVAL;
	}
}

int ntb_dmaq_poll(struct ntb_dmaq *q)
{
	if (q->state != NTB_DMAQ_POSTED)
		return settled(q);
	size_t budget = DMAQ_POLL_BUDGET;
	while (q->cur < q->count && budget > 0) {
		struct dmaq_entry *e = &q->ent[q->cur];
		size_t left = e->len - q->cur_done;
		ssize_t n = q->engine(q->link, e->dst_off + q->cur_done,
				      (const uint8_t *)e->src + q->cur_done,
				      left < budget ? left : budget);
		if (n <= 0) {
			q->error = n < 0 ? (int)n : -EIO;
			q->state = NTB_DMAQ_ERROR;
			return q->error;
		}
		q->cur_done += (size_t)n;
		budget -= (size_t)n < budget ? (size_t)n : budget;
		if (q->cur_done == e->len) {
			q->cur++;
			q->cur_done = 0;
		}
	}
	if (q->cur < q->count)
		return -EINPROGRESS;
	q->state = NTB_DMAQ_DONE;
	return 0;
}

int ntb_dmaq_wait(struct ntb_dmaq *q, int timeout_ms)
{
	uint64_t start = clock_mono_ns();
	for (;;) {
		int rc = ntb_dmaq_poll(q);
		if (rc != -EINPROGRESS)
			return rc;
		if (timeout_ms >= 0 && clock_mono_ns() - start >= (uint64_t)timeout_ms * 1000000u)
			return -ETIMEDOUT;
	}
}

int ntb_dmaq_abort(struct ntb_dmaq *q)
{
	if (q->state != NTB_DMAQ_POSTED)
		return -EINVAL;
	q->state = NTB_DMAQ_ABORTED;
	return 0;
}

int ntb_dmaq_reset(struct ntb_dmaq *q)
{
	if (q->state == NTB_DMAQ_POSTED)
		return -EBUSY;
	if (q->state != NTB_DMAQ_DONE && q->state != NTB_DMAQ_ABORTED &&
	    q->state != NTB_DMAQ_ERROR)
		return -EINVAL;
	q->count = 0;
	q->cur = 0;
	q->cur_done = 0;
	q->error = 0;
	q->state = NTB_DMAQ_IDLE;
	return 0;
}

enum ntb_dmaq_state ntb_dmaq_state(const struct ntb_dmaq *q)
{
	return q->state;
}

const char *ntb_dmaq_state_name(enum ntb_dmaq_state s)
{
	static const char *const names[] = { "idle", "gather", "posted", "done", "aborted",
					     "error" };
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "invalid";
}
