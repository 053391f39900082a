/* SPDX-License-Identifier: MIT */
/* Listeners: this host's table of listening ports (published to the peer as a bitmap) and
 * the look at the peer's bitmap before a set-up. */
#include <errno.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

int tp_listen(struct tp_link *l, uint16_t port)
{
	struct tp_host *h = l->host;
	int me = tp_self_pid(), free_i = -1, rc = 0;

	tp_host_lock(l);
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		if (tp_listen_refs(&h->listen[i]) && h->listen[i].pid == me &&
		    h->listen[i].port == port) {
			h->listen[i].count++;
			/* relaxed: a count for the helper's choice of link to sleep on */
			atomic_fetch_add_explicit(&l->listening, 1, memory_order_relaxed);
			goto out;
		}
		if (!h->listen[i].count && free_i < 0)
			free_i = (int)i;
	}
	if (free_i < 0) {
		rc = -ENOSPC;
		goto out;
	}
	h->listen[free_i].pid = me;
	h->listen[free_i].port = port;
	h->listen[free_i].count = 1;
	atomic_fetch_add_explicit(&l->listening, 1, memory_order_relaxed); /* (as above) */
	tp_listen_publish(l, false);
out:
	tp_host_unlock(l);
	return rc;
}

int tp_unlisten(struct tp_link *l, uint16_t port)
{
	struct tp_host *h = l->host;
	int me = tp_self_pid(), rc = -ENOENT;

	tp_host_lock(l);
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		if (tp_listen_refs(&h->listen[i]) && h->listen[i].pid == me &&
		    h->listen[i].port == port) {
			h->listen[i].count--;
			/* relaxed: as in tp_listen() */
			atomic_fetch_sub_explicit(&l->listening, 1, memory_order_relaxed);
			rc = 0;
			break;
		}
	}
	tp_listen_publish(l, false);
	tp_host_unlock(l);
	return rc;
}

int tp_listen_veto(struct tp_link *l, uint16_t port)
{
	struct tp_host *h = l->host;
	int me = tp_self_pid(), free_i = -1, rc = 0;

	tp_host_lock(l);
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		if (h->listen[i].count == TP_LISTEN_VETO && h->listen[i].pid == me &&
		    h->listen[i].port == port)
			goto out; /* (ours already) */
		if (!h->listen[i].count && free_i < 0)
			free_i = (int)i;
	}
	if (free_i < 0) {
		rc = -ENOSPC;
		goto out;
	}
	h->listen[free_i].pid = me;
	h->listen[free_i].port = port;
	h->listen[free_i].count = TP_LISTEN_VETO;
	tp_listen_publish(l, false);
out:
	tp_host_unlock(l);
	return rc;
}

/* A word of the peer's listener bitmap that fails its check was spoilt on the way (a faulty
 * link) or is left from an earlier session of the peer: the peer rewrites the whole bitmap every
 * 500 ms (link_service()), so wait for a good copy before saying "no listener": three rewrites,
 * as a rewrite can be spoilt too and a loaded peer's helper runs late. A word never written (0)
 * or a good one answers at once. */
#define TP_LISTEN_REPAIR_MS 1600u

bool tp_peer_listens(struct tp_link *l, uint16_t port)
{
	uint32_t off = TP_OFF_LISTEN + (port / 32u) * 8u, bits;
	uint64_t start = tp_now_ms(), w;

	for (;;) {
		w = tp_in_word(l, off);
		if (tp_cw_check(ntb_link_peer_epoch(l->ntb), w, &bits))
			return bits & (1u << (port % 32u));
		if (w == 0 || !tp_link_refresh(l))
			return false;
		if (clock_age_ms(tp_now_ms(), start) >= TP_LISTEN_REPAIR_MS) {
			LOG(LL_DEBUG, "transport: listener word of port %u spoilt for %u ms", port,
			    TP_LISTEN_REPAIR_MS);
			return false;
		}
		usleep(2000);
	}
}
