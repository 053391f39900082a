// SPDX-License-Identifier: MIT
/* What an epoll set's shadow reports (pl_epoll.c keeps it): its entries' readiness with the
 * edge-triggered and one-shot rules, and epoll_wait, epoll_pwait and epoll_pwait2 over NTB fds
 * and kernel fds together: collect the shadow's events, spin, then sleep in the kernel's
 * epoll_pwait() with the transport's event fd in the set. */
#include "preload/pl_epoll_int.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

/* Does entry E's fd still hold the object it was added as? (A reference in *RET_CUR if so.) */
static bool ep_entry_valid(const struct pl_ep_entry *e, struct pl_sock **ret_cur)
{
	struct pl_sock *cur = pl_sock_get(e->fd);

	if (cur != e->s || atomic_load_explicit(&cur->gen, memory_order_relaxed) != e->gen) {
		pl_sock_put(cur);
		return false;
	}
	*ret_cur = cur;
	return true;
}

static uint64_t ep_stamp(struct pl_epoll *ep, bool arm);

/* The arrival stamp of S for an edge-triggered entry registered for input: changes with every
 * message the peer publishes (tp_rx_arrivals()) and with every receive that said EAGAIN (a
 * message seen arriving may not be readable yet: one that came spoilt is read only once its
 * retransmission came, which the peer does not publish anew, and the kernel reports an edge
 * for any data readable after an EAGAIN); for an epoll set, with every arrival at its enabled
 * entries (the kernel wakes a set's watchers on each wake-up of an entry; adding, removing or
 * re-arming an entry there may raise a spurious edge). ARM: the caller sleeps next, waiting for
 * an arrival: the peers are asked to ring for their next message. */
static uint64_t sock_rx_stamp(struct pl_sock *s, bool arm)
{
	if (s->kind == PL_EPOLL)
		return s->ep ? ep_stamp(s->ep, arm) : 0;
	if (s->kind != PL_CONN ||
	    /* pairs with the release in pl_set_state() */
	    atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_OPEN)
		return 0;
	PL_ENTER();
	uint64_t st = arm ? tp_rx_arm_arrival(s->conn) : tp_rx_arrivals(s->conn);
	PL_LEAVE();
	return st + atomic_load_explicit(&s->rx_eagain, memory_order_relaxed);
}

static uint64_t ep_stamp(struct pl_epoll *ep, bool arm)
{
	uint64_t sum = 0;

	pthread_mutex_lock(&ep->lock);
	for (int i = 0; i < ep->n; i++) {
		struct pl_ep_entry *e = &ep->v[i];
		struct pl_sock *cur;

		if (e->disabled || !ep_entry_valid(e, &cur))
			continue;
		if (e->events & (EPOLLIN | EPOLLRDHUP))
			sum += sock_rx_stamp(cur, arm);
		if (e->events & EPOLLOUT)
			sum += atomic_load_explicit(&cur->room_gen, memory_order_relaxed);
		pl_sock_put(cur);
	}
	pthread_mutex_unlock(&ep->lock);
	return sum;
}

/* Under ep->lock: what entry E (object CUR) reports now, 0 for nothing, or PL_REV_KERNEL. Level
 * entries report whatever is ready; edge ones only after an edge (see struct pl_ep_entry), and
 * CONSUME then records it as reported (a wait; a look from poll or a nesting set does not). */
static unsigned ep_entry_report(struct pl_ep_entry *e, struct pl_sock *cur, bool arm, bool quick,
				bool consume)
{
	bool et = e->events & EPOLLET;
	bool in = et && (e->events & (EPOLLIN | EPOLLRDHUP));
	bool out = et && (e->events & EPOLLOUT) && cur->kind == PL_CONN;
	/* Registered for both: the arrival stamp before the look too, for an event that reports
	 * output alone (see the consume rule below). An entry for input alone reads it only when
	 * the look finds input: an idle one costs no more than a level-triggered one. */
	uint64_t rx0 = in && out ? sock_rx_stamp(cur, false) : 0, rx1 = rx0;
	unsigned tx0 = out ? atomic_load_explicit(&cur->room_gen, memory_order_relaxed) : 0, tx1;
	unsigned rev = pl_revents(cur, e->fd, arm, e->events, quick);

	if (rev & PL_REV_KERNEL)
		return PL_REV_KERNEL;
	unsigned want = rev & (e->events | EPOLLERR | EPOLLHUP);
	if (!et)
		return want;
	if (!want) {
		if (consume)
			e->last = 0;
		return 0; /* nothing to report; an edge stays pending */
	}
	/* (room found by this look bumped room_gen) */
	tx1 = out ? atomic_load_explicit(&cur->room_gen, memory_order_relaxed) : 0;
	bool rx_known = in && (out || (want & EPOLLIN));
	if (in && (want & EPOLLIN))
		rx1 = sock_rx_stamp(cur, false); /* (what arrived until the data the look saw) */
	unsigned hup = want & (EPOLLERR | EPOLLHUP | EPOLLRDHUP);
	bool edge = e->fresh || (hup & ~e->last) || (rx_known && rx1 != e->rx_seen) ||
		    (out && tx1 != e->tx_seen);
	if (!edge && arm && in && (want & EPOLLIN)) {
		/* Readable, nothing new, and the caller sleeps next: the look (tp_poll()) asked no
		 * peer to ring, as data is there; the next arrival must end the sleep. */
		rx1 = sock_rx_stamp(cur, true);
		edge = rx1 != e->rx_seen;
	}
	if (!consume)
		return edge ? want : 0;
	e->last = hup;
	if (!edge)
		return 0;
	/* Reported: what the event covers is seen. An arrival or room the look did not show
	 * (after it) stays news for the next wait. */
	e->fresh = false;
	if (rx_known)
		e->rx_seen = (want & EPOLLIN) ? rx1 : rx0;
	e->tx_seen = (want & EPOLLOUT) ? tx1 : tx0;
	return want;
}

/* Under ep->lock: OR of the poll bits of every enabled entry that would report now (for poll on
 * an epoll fd and for nesting: the kernel calls a set readable while it holds an event). */
static unsigned ep_ready_mask(struct pl_epoll *ep, bool *ret_pending, bool arm)
{
	unsigned m = 0;
	for (int i = 0; i < ep->n; i++) {
		struct pl_ep_entry *e = &ep->v[i];
		struct pl_sock *cur;

		if (e->disabled || !ep_entry_valid(e, &cur))
			continue;
		unsigned rev = ep_entry_report(e, cur, arm, false, false);
		if (rev & PL_REV_KERNEL) {
			if (ret_pending && cur->kind == PL_CONN)
				*ret_pending = true;
		} else {
			m |= rev;
		}
		pl_sock_put(cur);
	}
	return m;
}

bool pl_epoll_ready(struct pl_epoll *ep, bool arm)
{
	pthread_mutex_lock(&ep->lock);
	unsigned m = ep_ready_mask(ep, NULL, arm);
	pthread_mutex_unlock(&ep->lock);
	return m != 0;
}

int pl_epoll_size(struct pl_epoll *ep)
{
	return ep->n; /* (read without the lock: a wait looks again under it) */
}

/* Full looks no more often than this (see struct pl_epoll). */
#define PL_EP_FULL_MIN_NS 1000000
/* An entry goes idle only after its looks found nothing for longer than this on the coarse
 * clock (1 to 2 of its ticks, 1-8 ms): a connection in a ping-pong stays looked at directly
 * (its peer then writes no news word, and the data is seen one cache-line transfer sooner than
 * the word written after it), one that waits longer is passed over. */
#define PL_EP_IDLE_MS 1u

/* NTBSOCK_EPOLL_FULL_MS, a test's knob: a full look every that many ms exactly (so that a test
 * sees wake-ups that only news brings); 0 (unset): the default rule. */
static int64_t ep_full_fixed_ns(void)
{
	static _Atomic int64_t v = -1;
	int64_t ns = atomic_load_explicit(&v, memory_order_relaxed); /* (the same each time) */

	if (ns < 0) {
		const char *e = getenv("NTBSOCK_EPOLL_FULL_MS");
		long ms = e ? strtol(e, NULL, 10) : 0;

		ns = ms > 0 && ms < 86400000L ? (int64_t)ms * 1000000 : 0;
		atomic_store_explicit(&v, ns, memory_order_relaxed);
	}
	return ns;
}

_Atomic unsigned pl_nospace_gen;

/* Active entry I (E, object CUR) reported nothing at NOW: may collections pass over it until
 * its news word changes (struct pl_ep_news)? Quiet past PL_EP_IDLE_MS, registered for input
 * (and for output only edge-triggered, with no send or look since its last edge that found no
 * room: an EPOLLOUT edge needs that first, pl_note_nospace(), which makes the next collection
 * a full one), an open NTB connection, settled (tp_rx_news_arm(): with ARM its peer rings for
 * the next message too). Then it goes idle (pl_ep_idle_add()). */
static void ep_entry_idle(struct pl_epoll *ep, int i, struct pl_sock *cur, bool arm, uint64_t now)
{
	struct pl_ep_entry *e = &ep->v[i];

	if (!e->quiet_ms)
		e->quiet_ms = now;
	bool out = e->events & (EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND);

	if (now - e->quiet_ms <= PL_EP_IDLE_MS || cur->kind != PL_CONN ||
	    (out && (!(e->events & EPOLLET) ||
		     atomic_load_explicit(&cur->nospace, memory_order_relaxed))) ||
	    !(e->events & (EPOLLIN | EPOLLRDNORM)) ||
	    /* pairs with the release in pl_set_state() */
	    atomic_load_explicit(&cur->state, memory_order_acquire) != PL_CS_OPEN)
		return;
	struct tp_news_sums sums;
	uint64_t seen;

	PL_ENTER();
	const void *w = tp_rx_news_arm(cur->conn, arm, &seen, &sums);
	PL_LEAVE();
	if (w)
		pl_ep_idle_add(ep, i, w, seen, &sums, arm);
}

/* Entries that left during a collection (closed, or moved to the kernel's set: 2 i + 1): removed
 * after it, highest index first (each removal moves the last entry into its place). */
static int ep_int_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x < y) - (x > y);
}

/* Under ep->lock: fill EVS with ready shadow entries, applying edge and one-shot rules. ARM:
 * see pl_revents(). Looks at the active entries (ep->act) and at the idle ones whose news word
 * changed (pl_ep_idle_news(): a word per link while none did); a full look (every entry active
 * again, then idle again as they qualify) when tp_state_gen() changed or one is due. A closed
 * idle entry is dropped by the next full look or epoll_ctl. */
static int ep_collect(struct pl_epoll *ep, int epfd, struct epoll_event *evs, int max,
		      bool *ret_pending, bool arm, bool quick)
{
	int n = 0, k, ndead = 0;
	/* acquire: pairs with the release in pl_note_nospace() */
	unsigned gen = tp_state_gen() +
		       atomic_load_explicit(&pl_nospace_gen, memory_order_acquire);
	/* (the coarse clock: the vDSO's data page, no TSC read on every round of a spin; the
	 * precise one, t0, only for a full look's cost) */
	uint64_t now_ms = clock_coarse_ms();
	bool full = gen != ep->gen_seen || now_ms >= ep->full_due_ms;
	int64_t t0 = full ? pl_now_ns() : 0;

	ep->st_collects++;
	if (full)
		pl_ep_idle_reset(ep);
	else
		pl_ep_idle_news(ep, arm);
	/* This collection's order: the active list from where the last one stopped (TMP's first
	 * half); entries that leave go to its second half. */
	int cnt = ep->nact, *order = ep->tmp, *dead = ep->tmp + ep->cap;
	int start = cnt ? (int)(ep->rr % (unsigned)cnt) : 0;

	for (k = 0; k < cnt; k++)
		order[k] = ep->act[(start + k) % cnt];
	for (k = 0; k < cnt && n < max; k++) {
		int i = order[k];
		struct pl_ep_entry *e = &ep->v[i];
		struct pl_sock *cur;

		if (!ep_entry_valid(e, &cur)) {
			/* Closed: the kernel drops closed fds from epoll sets, so do we. */
			dead[ndead++] = 2 * i;
			continue;
		}
		unsigned report = ep_entry_report(e, cur, arm, quick, true);
		if ((report & PL_REV_KERNEL) && pl_ep_moved(cur)) {
			pl_sock_put(cur);
			dead[ndead++] = 2 * i + 1; /* (moved: to the kernel's set) */
			continue;
		}
		if (report & PL_REV_KERNEL) {
			if (cur->kind == PL_CONN)
				*ret_pending = true;
			pl_sock_put(cur);
			continue;
		}
		if (!report)
			ep_entry_idle(ep, i, cur, arm, now_ms);
		else
			e->quiet_ms = 0;
		pl_sock_put(cur);
		if (!report)
			continue;
		evs[n].events = report;
		evs[n].data = e->data;
		n++;
		if (e->events & EPOLLONESHOT) {
			pl_ep_detach(ep, i);
			e->disabled = true;
		}
	}
	/* The next collection starts after the last entry this one looked at, as the kernel's
	 * ready list sends a reported entry to its back: with more entries ready than MAX, each is
	 * looked at (a pending connect decided, an event reported) within ceil(n / MAX) calls.
	 * A collection that looked at every entry moves the start by one. */
	ep->rr = (unsigned)start + (unsigned)(k < cnt ? k : 1);
	if (ndead) {
		qsort(dead, (size_t)ndead, sizeof(*dead), ep_int_desc);
		for (int d = 0; d < ndead; d++) {
			if (dead[d] & 1)
				pl_ep_migrate(ep, epfd, dead[d] / 2);
			else
				pl_ep_remove(ep, dead[d] / 2);
		}
	}
	if (full && k >= cnt) {
		/* (one that stopped at MAX events looked at part of the set: another comes next) */
		int64_t t1 = pl_now_ns();

		ep->gen_seen = gen;
		ep->full_every_ns = (t1 - t0) * 20 > PL_EP_FULL_MIN_NS ? (t1 - t0) * 20
									: PL_EP_FULL_MIN_NS;
		if (ep_full_fixed_ns())
			ep->full_every_ns = ep_full_fixed_ns();
		ep->full_due_ms = now_ms + (uint64_t)(ep->full_every_ns / 1000000);
	}
	return n;
}

/* Drop our event fd's entries from a kernel result; returns the new count. */
static int ep_filter(struct epoll_event *evs, int n, bool *ret_woken)
{
	int j = 0;
	for (int i = 0; i < n; i++) {
		if (evs[i].data.u64 == PL_EP_TAG) {
			*ret_woken = true;
			continue;
		}
		evs[j++] = evs[i];
	}
	return j;
}

/* Kernel events of nested epoll sets in EVS (N): the kernel side of such a set holds our event
 * fd, which makes it readable on every doorbell of any connection, so an edge-triggered
 * watcher of it saw an edge that was none. Each is kept only if the set is still readable with
 * the event fd consumed (its NTB side is reported by the shadow). Returns the new count. */
static int ep_nested_filter(struct pl_epoll *ep, struct epoll_event *evs, int n)
{
	bool acked = false;
	int j = 0;

	for (int i = 0; i < n; i++) {
		int nfd = -1;
		pthread_mutex_lock(&ep->lock);
		for (int k = 0; k < ep->n && nfd < 0; k++)
			if (ep->v[k].s->kind == PL_EPOLL && ep->v[k].data.u64 == evs[i].data.u64)
				nfd = ep->v[k].fd;
		pthread_mutex_unlock(&ep->lock);
		if (nfd >= 0) {
			if (!acked) {
				PL_ENTER();
				tp_event_ack();
				PL_LEAVE();
				acked = true;
			}
			struct pollfd p = { .fd = nfd, .events = POLLIN };
			struct timespec zero = { 0, 0 };
			if (pl_real.ppoll(&p, 1, &zero, NULL) != 1)
				continue;
		}
		evs[j++] = evs[i];
	}
	return j;
}

#define PL_EP_NOT_OURS (-1000)

/* epoll_pwait2 failed other than by a signal: a kernel without it (before 5.11), or a seccomp
 * filter older than it that refuses it (EPERM) */
static atomic_bool ep_pwait2_missing;

/* The kernel's wait on the set for NS: epoll_pwait2() where NS is no whole number of
 * milliseconds (a recovery timer's microsecond: pl_sleep_ns()), else (or without it, the sleep
 * rounded up) epoll_pwait(), which the program's own call would have made. */
static int ep_sleep(int epfd, struct epoll_event *evs, int max, int64_t ns, const sigset_t *mask)
{
	/* relaxed: a sticky flag, read again after any failure */
	if (ns % 1000000 && !atomic_load_explicit(&ep_pwait2_missing, memory_order_relaxed)) {
		struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
		int r = pl_real.epoll_pwait2(epfd, evs, max, &ts, mask);

		if (r >= 0 || (errno != ENOSYS && errno != EPERM))
			return r; /* (a signal, or what epoll_pwait would say too: EBADF...) */
		atomic_store_explicit(&ep_pwait2_missing, true, memory_order_relaxed);
	}
	return pl_real.epoll_pwait(epfd, evs, max, (int)((ns + 999999) / 1000000), mask);
}

static int ep_wait(int epfd, struct epoll_event *evs, int max, const struct timespec *tmo,
		   const sigset_t *mask)
{
	struct pl_sock *s = pl_lookup(epfd);

	if (!s || s->kind != PL_EPOLL || !s->ep) {
		pl_sock_put(s);
		return PL_EP_NOT_OURS;
	}
	if (max <= 0 || !evs) {
		pl_sock_put(s);
		return (int)pl_ret(-EINVAL);
	}
	struct pl_epoll *ep = s->ep;
	struct pl_timing tm = { .tmo = tmo };
	struct pl_sighold sh = { .held = false };
	bool quick = false; /* as in pl_poll_run() */
	int ret;

	for (;;) {
		bool pending = false, woken = false, kcheck = false;
		pthread_mutex_lock(&ep->lock);
		int n = ep_collect(ep, epfd, evs, max, &pending, false, quick);
		bool evfd_ok = ep->evfd_added;
		/* Kernel fds are looked at in their turn (pl_kernel_turn()) when NTB events were found,
		 * and always when none was: neither side starves, and the common case needs no
		 * syscall. */
		bool look = n && pl_kernel_turn(&ep->kturn);
		pthread_mutex_unlock(&ep->lock);
		if (n && !look) {
			ret = n;
			break;
		}
		int64_t ns = 0;
		bool spin = !n && pl_spinning(&tm, &kcheck);
		quick = spin && !kcheck;
		if (spin && !kcheck)
			continue;
		if (!n && !spin && !pl_zero_timeout(tmo)) {
			/* About to sleep: consume the event fd, then look again arming the doorbells
			 * (see poll_wait()); from here on a signal ends the wait (pl_sig_hold()). */
			pl_sig_hold(&sh);
			PL_ENTER();
			tp_event_ack();
			PL_LEAVE();
			(void)tp_arm_due_take(); /* (what the look below finds) */
			pthread_mutex_lock(&ep->lock);
			n = ep_collect(ep, epfd, evs, max, &pending, true, false);
			pthread_mutex_unlock(&ep->lock);
			ns = n ? 0 : pl_sleep_ns(&tm, pending || !evfd_ok);
		}
		int r = ep_sleep(epfd, evs + n, max - n, ns, pl_sig_wait_mask(&sh, mask));
		if (r < 0) {
			ret = n ? n : -1;
			break;
		}
		r = ep_filter(evs + n, r, &woken);
		if (r > 0 && ep->nested)
			r = ep_nested_filter(ep, evs + n, r);
		if (woken) {
			/* Consumed only when the kernel saw it: while readable it would make this set
			 * (and a set nesting it) look readable to the kernel. */
			PL_ENTER();
			tp_event_ack();
			PL_LEAVE();
		}
		if (n + r > 0) {
			ret = n + r;
			break;
		}
		if (spin)
			continue;
		if (pl_timed_out(&tm)) {
			ret = 0;
			break;
		}
	}
	pl_sig_release(&sh);
	pl_timing_done(&tm);
	pl_sock_put(s);
	return ret;
}

NTB_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int maxevents, int timeout)
{
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0)
		return pl_real.epoll_wait(epfd, evs, maxevents, timeout);
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
	int r = ep_wait(epfd, evs, maxevents, timeout < 0 ? NULL : &ts, NULL);
	return r != PL_EP_NOT_OURS ? r : pl_real.epoll_wait(epfd, evs, maxevents, timeout);
}

NTB_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int maxevents, int timeout,
			   const sigset_t *mask)
{
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0)
		return pl_real.epoll_pwait(epfd, evs, maxevents, timeout, mask);
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
	int r = ep_wait(epfd, evs, maxevents, timeout < 0 ? NULL : &ts, mask);
	return r != PL_EP_NOT_OURS ? r : pl_real.epoll_pwait(epfd, evs, maxevents, timeout, mask);
}

NTB_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int maxevents,
			    const struct timespec *tmo, const sigset_t *mask)
{
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0)
		return pl_real.epoll_pwait2(epfd, evs, maxevents, tmo, mask);
	int r = ep_wait(epfd, evs, maxevents, tmo, mask);
	return r != PL_EP_NOT_OURS ? r : pl_real.epoll_pwait2(epfd, evs, maxevents, tmo, mask);
}
