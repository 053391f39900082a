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
	atomic_store_explicit(&c->pre_busy, false, memory_order_release);
}

void tp_prefix_set(struct tp_conn *c, uint8_t *buf, size_t len, size_t off, bool fin)
{
	tp_prefix_lock(c);
	c->pre_buf = buf;
	c->pre_len = len;
	c->pre_off = off;
	atomic_store(&c->pre_fin, fin);
	atomic_fetch_add(&tp_fo_active, 1); /* (the helper comes often until it is out) */
	atomic_store(&c->pre_on, true);
	tp_prefix_unlock(c);
}

/* Under the prefix lock: the prefix is out; the FIN after it if due. */
static void prefix_done(struct tp_conn *c)
{
	free(c->pre_buf);
	c->pre_buf = NULL;
	atomic_store(&c->pre_on, false);
	atomic_fetch_sub(&tp_fo_active, 1);
	if (atomic_load(&c->pre_fin)) {
		tp_mutex_lock(&c->tx_lock);
		if (!c->wr_shut) {
			c->wr_shut = true;
			tp_tx_fin(c); /* -EAGAIN: the timers send it when room frees */
		}
		tp_mutex_unlock(&c->tx_lock);
	}
	tp_event_signal(); /* writers waiting for room look again */
}

int tp_prefix_flush(struct tp_conn *c)
{
	bool busy = false;
	int rc = 0;

	if (!atomic_load(&c->pre_on))
		return 0;
	/* acquire: pairs with the release in tp_prefix_unlock() */
	if (!atomic_compare_exchange_strong_explicit(&c->pre_busy, &busy, true,
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
	tp_prefix_unlock(c);
	return rc;
}

void tp_prefix_drop(struct tp_conn *c)
{
	tp_prefix_lock(c);
	if (c->pre_buf) {
		free(c->pre_buf);
		c->pre_buf = NULL;
		atomic_fetch_sub(&tp_fo_active, 1);
	}
	atomic_store(&c->pre_on, false);
	tp_prefix_unlock(c);
}
