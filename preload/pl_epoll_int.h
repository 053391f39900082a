/* SPDX-License-Identifier: MIT */
/* The epoll shadow that pl_epoll.c (epoll_create, epoll_ctl) keeps and pl_epoll_wait.c
 * (epoll_wait and poll of an epoll fd) reads. */
#ifndef NTBSOCK_PRELOAD_PL_EPOLL_INT_H
#define NTBSOCK_PRELOAD_PL_EPOLL_INT_H

#include "preload/pl_ready_int.h"

#define PL_EP_TAG 0x6e7462736f636b21ULL /* epoll data of our event fd inside an epoll set */

struct pl_ep_entry {
	int fd;
	struct pl_sock *s;   /* not a reference: validated against the fd table by gen */
	unsigned gen;
	uint32_t events;
	epoll_data_t data;
	bool disabled;       /* EPOLLONESHOT fired */
	/* EPOLLET, as the kernel: an event when something happened since the last one (added or
	 * modified; new data arrived; room came after a send or look found none; error, hang-up
	 * or end of stream appeared) and the fd is ready for what it is registered for. Reading,
	 * writing and peeking alone raise none. */
	bool fresh;          /* added or modified since the last event */
	unsigned last;       /* EPOLLERR|EPOLLHUP|EPOLLRDHUP seen at the last look */
	uint64_t rx_seen;    /* arrival stamp at the last event (sock_rx_stamp()) */
	unsigned tx_seen;    /* room_gen at the last event */
	bool news_ring;      /* idle (its struct pl_ep_news), and its peer rings for the next
			      * message */
	uint64_t quiet_ms;   /* since when its looks found nothing, coarse clock (0: the last
			      * one found something); idle only past PL_EP_IDLE_MS of that */
};
/* Entry I's news (ep->nw[I], beside ep->v[I]: a collection reads only these of an idle entry).
 * Idle: an NTB connection whose looks found nothing to report for a while, settled
 * (ep_entry_idle(), tp_rx_news_arm()): its news word W and the value SEEN it had then. Until the word
 * changes (or a full look is due, ep_collect()) a collection passes over it without a look.
 * W NULL: looked at each time (active, in EP->ACT at POS), or disabled (POS -1). Idle entries
 * are indexed by the summaries of their words (struct tp_news_sums): entry I is at POS in the
 * list of its group GRP (pl_epoll_idle.c), and a collection reads an idle entry's word only
 * when its group's word changed, a group's only when its link's summary changed. */
struct pl_ep_news {
	const void *w;
	uint64_t seen;
	int pos;
	int grp;
};

/* A group of slots of one link that holds idle entries of a set (struct tp_news_sums): its
 * word GW and the value SEEN it had when last looked at (or when its first idle entry came),
 * the summary it is under (index SUM in ep->sums), its idle entries ENT (N of CAP). */
struct pl_ep_grp {
	const void *gw;
	uint64_t seen;
	int sum;
	int *ent;
	int n, cap;
};
/* A link's summary word SW, the value SEEN as for a group, NIDLE idle entries under it (none:
 * unused, its word is not read), GIX: group number -> index in ep->grps + 1 (NG numbers). */
struct pl_ep_sum {
	const void *sw;
	uint64_t seen;
	int nidle;
	int *gix;
	int ng;
};

/* Who touches what: everything under LOCK (epoll_ctl and the waits of this set). */
struct pl_epoll {
	pthread_mutex_t lock;
	struct pl_ep_entry *v;
	struct pl_ep_news *nw; /* (beside v: as many) */
	int n, cap;
	int *ix;             /* fd -> its entry's index + 1 (0: none), IX_CAP fds (pl_ep_find()) */
	int ix_cap;
	unsigned rr;         /* where the next collection starts (fairness) */
	struct pl_kturn kturn; /* when the kernel's side is looked at although NTB fds are ready */
	bool evfd_added;
	bool nested;         /* an epoll set was added to it once (ep_nested_filter()) */
	/* Full looks, which pass over no entry (ep_collect()): when tp_state_gen() (plus
	 * pl_nospace_gen) is no longer GEN_SEEN, and every FULL_EVERY_NS (20 times what the last
	 * one cost, no less than PL_EP_FULL_MIN_NS): a news word the link lost costs at most
	 * that. FULL_DUE_MS on the coarse clock (a collection reads no TSC for it). */
	unsigned gen_seen;
	uint64_t full_due_ms;
	int64_t full_every_ns;
	/* The entries a collection looks at (struct pl_ep_news): ACT (NACT of them, room for CAP),
	 * and the index of idle ones: GRPS (NGRPS), SUMS (NSUMS); NORING idle entries whose peer
	 * was not asked to ring (a collection before a sleep looks at them once). TMP: CAP * 2 ints
	 * for a collection's own use. */
	int *act, nact;
	int *tmp;
	struct pl_ep_grp *grps;
	int ngrps;
	struct pl_ep_sum *sums;
	int nsums;
	int noring;
	/* For the log when the set closes: collections, idle entries they held (summed), the
	 * idle entries' words they read. */
	uint64_t st_collects, st_idle, st_words;
};

/* Under ep->lock: the index of FD's entry in EP, or -1. */
int pl_ep_find(struct pl_epoll *ep, int fd);
/* Under ep->lock: remove entry I of EP (the last one takes its place). */
void pl_ep_remove(struct pl_epoll *ep, int i);
/* pl_epoll_idle.c, under ep->lock. Room for CAP entries in ACT and TMP (0 or -ENOMEM). */
int pl_ep_room(struct pl_epoll *ep, int cap);
/* Entry I (neither active nor idle) becomes active. */
void pl_ep_act_add(struct pl_epoll *ep, int i);
/* Entry I leaves the active list or the idle index (W NULL, POS -1). */
void pl_ep_detach(struct pl_epoll *ep, int i);
/* Active entry I goes idle: its news word W (value SEEN) under SUMS; false (it stays active)
 * when memory is short. */
bool pl_ep_idle_add(struct pl_epoll *ep, int i, const void *w, uint64_t seen,
		    const struct tp_news_sums *sums, bool ring);
/* Every enabled entry active again, the idle index empty (a full look). */
void pl_ep_idle_reset(struct pl_epoll *ep);
/* Idle entries whose words changed (and, with ARM, those whose peer was not asked to ring)
 * become active: reads each summary of the index, the groups under a changed one, the words
 * under a changed group. */
void pl_ep_idle_news(struct pl_epoll *ep, bool arm);
/* Has connection CUR moved to its kernel socket (pl_failover.c)? */
bool pl_ep_moved(struct pl_sock *cur);
/* Under ep->lock: entry I's connection moved to its kernel socket: its registration goes to
 * the kernel's set EPFD as it stands (a fired one-shot stays disabled). */
void pl_ep_migrate(struct pl_epoll *ep, int epfd, int i);

#endif
