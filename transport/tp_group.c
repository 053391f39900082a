/* SPDX-License-Identifier: MIT */
/* Link groups: the links of this process to the same peer host, and the choice of another
 * one for a connection to move to. */
#include <pthread.h>

#include "transport/tp_int.h"
#include "util/log.h"

/* The grouped links of this process (tp_link_set_group()): a leaf lock, taken with any other
 * held (tp_link_alt() runs from the timers), never held while taking another. */
static pthread_mutex_t g_group_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_link *g_group[TP_GROUP_LINKS];

void tp_link_set_group(struct tp_link *l, unsigned group)
{
	int free_i = -1;

	pthread_mutex_lock(&g_group_lock);
	l->group = group;
	for (int i = 0; i < TP_GROUP_LINKS; i++) {
		if (g_group[i] == l) {
			if (!group)
				g_group[i] = NULL;
			free_i = -2;
			break;
		}
		if (!g_group[i] && free_i == -1)
			free_i = i;
	}
	if (group && free_i >= 0)
		g_group[free_i] = l;
	pthread_mutex_unlock(&g_group_lock);
}

int tp_link_group_others(struct tp_link *l, struct tp_link **out, int max)
{
	int n = 0;

	pthread_mutex_lock(&g_group_lock);
	for (int i = 0; i < TP_GROUP_LINKS && n < max && l->group; i++)
		if (g_group[i] && g_group[i] != l && g_group[i]->group == l->group)
			out[n++] = g_group[i];
	pthread_mutex_unlock(&g_group_lock);
	return n;
}

struct tp_link *tp_link_alt(struct tp_link *l)
{
	struct tp_link *cand[TP_GROUP_LINKS], *best = NULL;
	int n = tp_link_group_others(l, cand, TP_GROUP_LINKS), best_load = 0;

	for (int i = 0; i < n; i++) {
		/* (not lost, not admin down, up: tp_link_load()) */
		/* relaxed: the link's state, a cache (tp_link_refresh()) */
		int load = atomic_load_explicit(&cand[i]->lost, memory_order_relaxed) ? -1 :
			   tp_link_load(cand[i]);

		if (load >= 0 && (!best || load < best_load)) {
			best = cand[i];
			best_load = load;
		}
	}
	return best;
}

void tp_link_set_balance(struct tp_link *l, bool on)
{
	/* relaxed: a setting read by set-ups, nothing is published with it */
	atomic_store_explicit(&l->balance, on, memory_order_relaxed);
}
