// SPDX-License-Identifier: MIT
/* Which entries of an epoll set's shadow a collection looks at (#21 item 2: a wait in O(ready)):
 * the active ones, listed in ep->act, and of the idle ones (struct pl_ep_news) only those whose
 * news word changed, found through the words that summarise it (struct tp_news_sums): the
 * link's summary word, read once per collection, then only the groups of 64 slots under a
 * summary that changed, then only the entries of a group whose word changed. A set with
 * thousands of idle connections reads one word per link while nothing arrives. Everything here
 * runs under ep->lock. */
#include "preload/pl_epoll_int.h"

#include <stdlib.h>

int pl_ep_room(struct pl_epoll *ep, int cap)
{
	int *na = realloc(ep->act, sizeof(*na) * (size_t)cap);

	if (!na)
		return -ENOMEM;
	ep->act = na;
	int *nt = realloc(ep->tmp, sizeof(*nt) * 2u * (size_t)cap);

	if (!nt)
		return -ENOMEM;
	ep->tmp = nt;
	return 0;
}

void pl_ep_act_add(struct pl_epoll *ep, int i)
{
	ep->nw[i].pos = ep->nact;
	ep->act[ep->nact++] = i;
}

static void act_del(struct pl_epoll *ep, int i)
{
	int p = ep->nw[i].pos, last = ep->act[--ep->nact];

	ep->act[p] = last;
	ep->nw[last].pos = p;
}

static void idle_del(struct pl_epoll *ep, int i)
{
	struct pl_ep_news *nw = &ep->nw[i];
	struct pl_ep_grp *g = &ep->grps[nw->grp];
	int last = g->ent[--g->n];

	g->ent[nw->pos] = last;
	ep->nw[last].pos = nw->pos;
	ep->sums[g->sum].nidle--;
	if (!ep->v[i].news_ring)
		ep->noring--;
	nw->w = NULL;
}

void pl_ep_detach(struct pl_epoll *ep, int i)
{
	struct pl_ep_news *nw = &ep->nw[i];

	if (nw->w)
		idle_del(ep, i);
	else if (nw->pos >= 0)
		act_del(ep, i);
	nw->pos = -1;
}

/* The index of the summary word SW in EP->sums, added if new; -1 when memory is short. */
static int sum_find(struct pl_epoll *ep, const void *sw)
{
	int k, unused = -1;

	for (k = 0; k < ep->nsums; k++) {
		if (ep->sums[k].sw == sw)
			return k;
		if (!ep->sums[k].nidle && unused < 0)
			unused = k;
	}
	if (unused >= 0) {
		/* (a link's window seen at another address: the old word is no longer read) */
		struct pl_ep_sum *s = &ep->sums[unused];

		for (int g = 0; g < s->ng; g++)
			if (s->gix[g])
				ep->grps[s->gix[g] - 1].gw = NULL;
		free(s->gix);
		*s = (struct pl_ep_sum){ .sw = sw };
		return unused;
	}
	struct pl_ep_sum *ns = realloc(ep->sums, sizeof(*ns) * (size_t)(ep->nsums + 1));

	if (!ns)
		return -1;
	ep->sums = ns;
	ns[ep->nsums] = (struct pl_ep_sum){ .sw = sw };
	return ep->nsums++;
}

/* The index in EP->grps of group G (word GW) under summary SI, added if new; -1: no memory. */
static int grp_find(struct pl_epoll *ep, int si, uint32_t g, const void *gw)
{
	struct pl_ep_sum *s = &ep->sums[si];

	if (g >= TP_NEWS_GROUPS)
		return -1;
	if ((int)g < s->ng && s->gix[g])
		return s->gix[g] - 1;
	if ((int)g >= s->ng) {
		int *nx = realloc(s->gix, sizeof(*nx) * (g + 1u));

		if (!nx)
			return -1;
		for (int k = s->ng; k <= (int)g; k++)
			nx[k] = 0;
		s->gix = nx;
		s->ng = (int)g + 1;
	}
	int gi;

	for (gi = 0; gi < ep->ngrps && ep->grps[gi].gw; gi++)
		; /* (a free one: its summary went to another address) */
	if (gi == ep->ngrps) {
		struct pl_ep_grp *ng = realloc(ep->grps, sizeof(*ng) * (size_t)(ep->ngrps + 1));

		if (!ng)
			return -1;
		ep->grps = ng;
		ng[ep->ngrps++] = (struct pl_ep_grp){ 0 };
	}
	struct pl_ep_grp *gr = &ep->grps[gi];

	gr->gw = gw;
	gr->sum = si;
	gr->n = 0;
	s->gix[g] = gi + 1;
	return gi;
}

bool pl_ep_idle_add(struct pl_epoll *ep, int i, const void *w, uint64_t seen,
		    const struct tp_news_sums *sums, bool ring)
{
	int si = sum_find(ep, sums->sum);
	int gi = si >= 0 ? grp_find(ep, si, sums->g, sums->grp) : -1;

	if (gi < 0)
		return false;
	struct pl_ep_grp *g = &ep->grps[gi];

	if (g->n == g->cap) {
		int nc = g->cap ? g->cap * 2 : 8;
		int *ne = realloc(g->ent, sizeof(*ne) * (size_t)nc);

		if (!ne)
			return false;
		g->ent = ne;
		g->cap = nc;
	}
	struct pl_ep_sum *s = &ep->sums[si];

	/* A summary or group that held no idle entry takes the value read before this entry's
	 * word; one that did keeps its older value (a change since shows as news: at worst a look
	 * for nothing). */
	if (!s->nidle)
		s->seen = sums->sum_seen;
	if (!g->n)
		g->seen = sums->grp_seen;
	act_del(ep, i);
	ep->nw[i].w = w;
	ep->nw[i].seen = seen;
	ep->nw[i].grp = gi;
	ep->nw[i].pos = g->n;
	g->ent[g->n++] = i;
	s->nidle++;
	ep->v[i].news_ring = ring;
	if (!ring)
		ep->noring++;
	return true;
}

void pl_ep_idle_reset(struct pl_epoll *ep)
{
	for (int k = 0; k < ep->ngrps; k++)
		ep->grps[k].n = 0;
	for (int k = 0; k < ep->nsums; k++)
		ep->sums[k].nidle = 0;
	ep->noring = 0;
	ep->nact = 0;
	for (int i = 0; i < ep->n; i++) {
		ep->nw[i].w = NULL;
		ep->nw[i].pos = -1;
		if (!ep->v[i].disabled)
			pl_ep_act_add(ep, i);
	}
}

/* Group GI's idle entries: those whose word changed (with ARM, and those whose peer does not
 * ring) become active. */
static void grp_news(struct pl_epoll *ep, struct pl_ep_grp *g, bool arm)
{
	/* (backwards: an entry that leaves takes the last one, already looked at, in its place) */
	for (int j = g->n - 1; j >= 0; j--) {
		int i = g->ent[j];
		struct pl_ep_news *nw = &ep->nw[i];

		ep->st_words++;
		if (tp_news_read(nw->w) != nw->seen || (arm && !ep->v[i].news_ring)) {
			idle_del(ep, i);
			pl_ep_act_add(ep, i);
		}
	}
}

void pl_ep_idle_news(struct pl_epoll *ep, bool arm)
{
	bool all = arm && ep->noring > 0; /* (each such entry is looked at once, then rings) */

	for (int si = 0; si < ep->nsums; si++) {
		struct pl_ep_sum *s = &ep->sums[si];

		if (!s->nidle)
			continue;
		ep->st_idle += (uint64_t)s->nidle;
		uint64_t sv = tp_news_read(s->sw);

		if (sv == s->seen && !all)
			continue;
		s->seen = sv; /* (read before the groups: a change after it shows next time) */
		for (int g = 0; g < s->ng; g++) {
			if (!s->gix[g])
				continue;
			struct pl_ep_grp *gr = &ep->grps[s->gix[g] - 1];

			if (!gr->n)
				continue;
			uint64_t gv = tp_news_read(gr->gw);

			if (gv == gr->seen && !all)
				continue;
			gr->seen = gv;
			grp_news(ep, gr, arm);
		}
	}
}
