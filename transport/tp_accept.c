/* SPDX-License-Identifier: MIT */
/* Connection set-up, server side: follow the client's decision on a reservation it made
 * (attach on COMMIT, drop on RST or a Cancel). The client side: tp_connect.c. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* Under the host lock: a reservation under KEY the client has not given up (the newest, if a
 * stale one shares the key), or -1.
 * *RET_FLAGS: the ST flags the client wrote into it. */
static int pending_find(struct tp_link *l, const struct tp_key *key, uint32_t *ret_flags)
{
	struct tp_host *h = l->host;
	uint32_t steps = 0;

	/* (the key's bucket; at most every entry: a bucket that loops ends there) */
	for (uint32_t n = tp_hidx_key_first(h, key), next; n && steps++ < h->contexts; n = next) {
		uint32_t i = n - 1;

		next = tp_hidx_key_next(h, n); /* (before the entry may be freed below) */
		if (i >= tp_host_used(h))
			break;
		if (h->e[i].state != TP_ES_PENDING || h->e[i].role != 1 ||
		    memcmp(&h->e[i].key, key, sizeof(*key)))
			continue;
		uint32_t f = tp_slot_st_flags(l, i, h->e[i].nonce);

		if (f & (TP_ST_RST | TP_ST_GONE)) {
			tp_slot_free(l, i); /* the client gave up (its set-up or TCP connect failed) */
			continue;
		}
		*ret_flags = f;
		return (int)i;
	}
	return -1;
}

/*
 * The decision between ntb and tcp is the client's, and it is final once written: COMMIT (ntb)
 * or RST / a Cancel (tcp), written before the client lets the TCP handshake complete
 * (preload/pl_connect_late.c). The server only follows it: a reservation found
 * undecided is waited for. A reservation made after the accept (the client's ACK went out
 * before its Apply was answered: the kernel's delayed ACK) is never committed: the client
 * sees its ACK gone and gives it up.
 */
#define TP_ATTACH_POLL_US 200u

int tp_attach(struct tp_link *l, const struct tp_key *key, struct tp_conn **ret_conn)
{
	struct tp_host *h = l->host;
	struct tp_conn *c;
	uint64_t end = tp_now_ms() + l->params.setup_timeout_ms;
	uint32_t flags = 0;
	int slot;

	for (;;) {
		tp_host_lock(l);
		if (tp_host_lost(l)) {
			tp_host_unlock(l);
			return -ENOENT;
		}
		tp_mbox_process(l); /* (a Cancel, a repeated Apply) */
		slot = pending_find(l, key, &flags);
		if (slot < 0) {
			tp_host_unlock(l);
			return -ENOENT;
		}
		if (flags & TP_ST_COMMIT)
			break; /* keeps the host lock */
		if (tp_now_ms() >= end) {
			/* a client stalled (stopped) between its answer and its decision: refused;
			 * it reads a reset if it commits after all */
			LOG(LL_DEBUG, "transport: slot %d: the client did not decide within %u ms: "
			    "refused", slot, l->params.setup_timeout_ms);
			tp_ent_st_add(l, &h->e[slot], TP_ST_RST);
			tp_slot_free(l, (uint32_t)slot);
			tp_host_unlock(l);
			return -ETIMEDOUT;
		}
		tp_host_unlock(l);
		usleep(TP_ATTACH_POLL_US);
	}
	h->e[slot].state = TP_ES_OPEN;
	/* relaxed: informational, read without the host lock by a move's helper and `ntbsock
	 * stat` (stored also without it: tp_conn_own(), tp_conn_set_owner()) */
	atomic_store_explicit(&h->e[slot].pid, tp_self_pid(), memory_order_relaxed);
	h->e[slot].owners[0] = tp_self_pid();
	tp_host_proc_note(h, tp_self_pid());
	tp_host_unlock(l);
	c = tp_conn_new_first(l, (uint32_t)slot);
	if (c && h->e[slot].framed && tp_stripe_new(c, false)) {
		tp_conn_recycle(c);
		c = NULL;
	}
	if (!c) {
		tp_host_lock(l);
		tp_ent_st_add(l, &h->e[slot], TP_ST_RST);
		tp_slot_free(l, (uint32_t)slot);
		tp_host_unlock(l);
		return -ENOMEM;
	}
	tp_conn_register(c);
	/* Attached: our first word in the client's slot (FB_WAIT, nothing asked) tells it so, and
	 * it stops repeating its COMMIT (tp_conn_commit_repeat()), which otherwise kept every new
	 * connection that carried nothing yet on its timers' active list for setup_timeout_ms. */
	tp_mutex_lock(&c->rx_lock);
	tp_fb_wait_write(c, TP_W_FB_WAIT, c->rx_wait_set);
	tp_mutex_unlock(&c->rx_lock);
	*ret_conn = c;
	return 0;
}

int tp_refuse(struct tp_link *l, const struct tp_key *key)
{
	uint32_t flags;
	int slot, rc = -ENOENT;

	tp_host_lock(l);
	if (!tp_host_lost(l)) {
		tp_mbox_process(l);
		while ((slot = pending_find(l, key, &flags)) >= 0) {
			tp_ent_st_add(l, &l->host->e[slot], TP_ST_RST);
			tp_slot_free(l, (uint32_t)slot);
			rc = 0;
		}
	}
	tp_host_unlock(l);
	return rc;
}
