/* SPDX-License-Identifier: MIT */
/* Listeners: this host's table of listening ports (published to the peer as a bitmap) and
 * the look at the peer's bitmap before a set-up. */
#include <errno.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* Under the host lock: this process's entry for PORT of kind VETO (a veto, or references), or a
 * free one made so with COUNT; NULL when the table is full. *RET_NEW: it was free. */
static struct tp_host_listen *listen_entry(struct tp_host *h, uint16_t port, bool veto,
					   uint16_t count, bool *ret_new)
{
	int me = tp_self_pid();
	struct tp_host_listen *free_e = NULL;

	*ret_new = false;
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		struct tp_host_listen *e = &h->listen[i];

		if (e->count && e->pid == me && e->port == port &&
		    (veto ? e->count == TP_LISTEN_VETO : tp_listen_refs(e)))
			return e;
		if (!e->count && !free_e)
			free_e = e;
	}
	if (free_e) {
		free_e->pid = me;
		free_e->port = port;
		free_e->count = count;
		*ret_new = true;
	}
	return free_e;
}

int tp_listen_take(struct tp_link *l, uint16_t port, uint32_t owned)
{
	struct tp_host *h = l->host;
	int me = tp_self_pid(), rc = -ENOSPC;
	uint32_t held = 0;
	bool fresh;

	tp_host_lock(l);
	for (uint32_t i = 0; owned != UINT32_MAX && i < TP_MAX_LISTEN; i++)
		if (tp_listen_refs(&h->listen[i]) && h->listen[i].pid == me &&
		    h->listen[i].port == port)
			held += h->listen[i].count;
	if (held > owned) {
		rc = 1; /* one nobody owns: taken over */
	} else {
		struct tp_host_listen *e = listen_entry(h, port, false, 1, &fresh);

		if (e) {
			if (!fresh)
				e->count++;
			if (fresh)
				tp_listen_publish(l, false);
			rc = 0;
		}
	}
	if (rc >= 0)
		/* relaxed: a count for the helper's choice of link to sleep on */
		atomic_fetch_add_explicit(&l->listening, 1, memory_order_relaxed);
	tp_host_unlock(l);
	return rc;
}

int tp_listen(struct tp_link *l, uint16_t port)
{
	return tp_listen_take(l, port, UINT32_MAX);
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
	bool fresh;

	tp_host_lock(l);
	struct tp_host_listen *e = listen_entry(l->host, port, true, TP_LISTEN_VETO, &fresh);

	if (e && fresh)
		tp_listen_publish(l, false);
	tp_host_unlock(l);
	return e ? 0 : -ENOSPC;
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
