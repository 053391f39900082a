/* SPDX-License-Identifier: MIT */
/* The prefix: the rest of a moved connection's tail (tp_failover.c), sent on its new
 * connection before anything the program writes next, and the FIN that may follow it. */
#include <sched.h>
#include <stdlib.h>

#include "transport/tp_int.h"

void tp_prefix_lock(struct tp_conn *c)
{
	bool busy = false;

	/* acquire: pairs with the release in tp_prefix_unlock() */
	while (!atomic_compare_exchange_weak_explicit(&c->pre_busy, &busy, true,
						      memory_order_acquire, memory_order_relaxed)) {
		busy = false;
		sched_yield();
	}
}

void tp_prefix_unlock(struct tp_conn *c)
{
	/* release: the prefix's fields before the lock is free; pairs with the acquire
	 * compare-and-exchange in tp_prefix_lock() / tp_prefix_flush() */
	atomic_store_explicit(&c->pre_busy, false, memory_order_release);
}

void tp_prefix_set(struct tp_conn *c, uint8_t *buf, size_t len, size_t off, bool fin)
{
	tp_prefix_lock(c);
	c->pre_buf = buf;
	c->pre_len = len;
	c->pre_off = off;
	/* release: pairs with the acquire load of pre_fin in tp_send() */
	atomic_store_explicit(&c->pre_fin, fin, memory_order_release);
	/* relaxed: a count the helper reads as a hint (it comes often until the tail is out) */
	atomic_fetch_add_explicit(&tp_fo_active, 1, memory_order_relaxed);
	/* release: the fields above before the flag; pairs with the acquire load of pre_on in
	 * tp_prefix_flush() (the lock orders them for the flushers that take it) */
	atomic_store_explicit(&c->pre_on, true, memory_order_release);
	tp_prefix_unlock(c);
	tp_act_mark_sync(c); /* (pre_on: work for its timers, tp_active.c) */
}

/* Under the prefix lock: the prefix is out; the FIN after it if due. */
static void prefix_done(struct tp_conn *c)
{
	free(c->pre_buf);
	c->pre_buf = NULL;
	/* relaxed: under the prefix lock; a reader without it sees a hint (it looks again
	 * under the lock: tp_prefix_flush()) */
	atomic_store_explicit(&c->pre_on, false, memory_order_relaxed);
	atomic_fetch_sub_explicit(&tp_fo_active, 1, memory_order_relaxed); /* (a hint, above) */
	/* acquire: pairs with the release stores of pre_fin in tp_prefix_set() and
	 * tp_shutdown() (tp_close.c; without the prefix lock) */
	if (atomic_load_explicit(&c->pre_fin, memory_order_acquire)) {
		tp_mutex_lock(&c->tx_lock);
		if (!c->wr_shut) {
			c->wr_shut = true;
			tp_tx_fin(c); /* -EAGAIN: the timers send it when room frees */
		}
		tp_mutex_unlock(&c->tx_lock);
	}
	tp_event_signal(); /* writers waiting for room look again */
}

/* Send what fits of C's prefix; WAIT: for another thread sending it (else -EAGAIN then). */
static int prefix_flush(struct tp_conn *c, bool wait)
{
	bool busy = false;
	int rc = 0;

	/* acquire: pairs with the release store of pre_on in tp_prefix_set() */
	if (!atomic_load_explicit(&c->pre_on, memory_order_acquire))
		return 0;
	if (wait)
		tp_prefix_lock(c);
	/* acquire: pairs with the release in tp_prefix_unlock() */
	else if (!atomic_compare_exchange_strong_explicit(&c->pre_busy, &busy, true,
							  memory_order_acquire, memory_order_relaxed))
		return -EAGAIN;
	while (c->pre_buf && c->pre_off < c->pre_len) {
		struct iovec v = { c->pre_buf + c->pre_off, c->pre_len - c->pre_off };
		ssize_t n = tp_tx_send(c, &v, 1);

		if (n < 0) {
			rc = (int)n;
			break;
		}
		c->pre_off += (size_t)n;
	}
	if (c->pre_buf && c->pre_off >= c->pre_len) {
		prefix_done(c);
		rc = 0;
	}
	tp_act_mark(c); /* (what went out, and the FIN, are timer work: tp_active.c) */
	tp_prefix_unlock(c);
	return rc;
}

int tp_prefix_flush(struct tp_conn *c)
{
	return prefix_flush(c, false);
}

int tp_prefix_flush_wait(struct tp_conn *c)
{
	return prefix_flush(c, true);
}

void tp_prefix_drop(struct tp_conn *c)
{
	tp_prefix_lock(c);
	if (c->pre_buf) {
		free(c->pre_buf);
		c->pre_buf = NULL;
		atomic_fetch_sub_explicit(&tp_fo_active, 1, memory_order_relaxed); /* (a hint) */
	}
	/* relaxed: under the prefix lock (as prefix_done()) */
	atomic_store_explicit(&c->pre_on, false, memory_order_relaxed);
	tp_prefix_unlock(c);
}
