// SPDX-License-Identifier: MIT
/* Readiness: poll/ppoll/select/pselect/epoll over NTB fds mixed with kernel fds. NTB readiness
 * is read in user space (tp_poll); when nothing is ready the thread spins for the configured
 * budget, then sleeps in the real call with the transport's event fd added, and re-checks.
 * epoll keeps a user-space shadow of the NTB fds registered in each epoll set. */
#include "util/clock.h"
#include "preload/pl_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define PL_REV_KERNEL (1u << 31) /* this fd's readiness comes from the kernel (pending connect) */
#define PL_SLEEP_CAP_MS 100      /* bound on a sleep: covers a wake-up another waiter consumed */
#define PL_EP_TAG 0x6e7462736f636b21ULL /* epoll data of our event fd inside an epoll set */

/* How often a wait that finds NTB fds ready also asks the kernel about the kernel fds of the
 * same call (zero timeout): on every PL_KCHECK_EVERY-th such call, and at least once per tick
 * of the coarse clock (1-4 ms), so ready NTB fds never starve kernel fds; a call that finds
 * nothing ready always asks the kernel. The count is prime, so that a thread alternating
 * between a few poll or select calls (sets) still checks each of them in turn. (Each look is a
 * ppoll(): with 61, an iperf3 receiver's select() spent ~2 % of its time there. 127 still
 * looks at least twice in 256 calls, which test_pl_semantics asserts.) */
#define PL_KCHECK_EVERY 127u

struct pl_kturn {
	unsigned calls;
	int64_t tick; /* the coarse monotonic clock at the last look, in ms */
};

/* Is it the kernel fds' turn? The coarse clock is read from the vDSO's data page: no syscall
 * and no TSC read. */
static bool kernel_turn(struct pl_kturn *k)
{
	int64_t now = (int64_t)clock_coarse_ms();
	if (++k->calls % PL_KCHECK_EVERY != 0 && now == k->tick)
		return false;
	k->tick = now;
	return true;
}

static unsigned tp_to_poll(unsigned ev)
{
	unsigned r = 0;
	if (ev & TP_EV_IN)
		r |= POLLIN | POLLRDNORM;
	if (ev & TP_EV_OUT)
		r |= POLLOUT | POLLWRNORM;
	if (ev & TP_EV_RDHUP)
		r |= POLLRDHUP;
	if (ev & TP_EV_HUP)
		r |= POLLHUP;
	if (ev & TP_EV_ERR)
		r |= POLLERR;
	return r;
}

/* --- epoll shadow --------------------------------------------------------------------------------- */

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
};

/* Who touches what: everything under LOCK (epoll_ctl and the waits of this set). */
struct pl_epoll {
	pthread_mutex_t lock;
	struct pl_ep_entry *v;
	int n, cap;
	unsigned rr;         /* where the next collection starts (fairness) */
	struct pl_kturn kturn; /* when the kernel's side is looked at although NTB fds are ready */
	bool evfd_added;
	bool nested;         /* an epoll set was added to it once (ep_nested_filter()) */
};

void pl_epoll_free(struct pl_epoll *ep)
{
	if (!ep)
		return;
	free(ep->v);
	free(ep);
}

static int ep_find(struct pl_epoll *ep, int fd)
{
	for (int i = 0; i < ep->n; i++)
		if (ep->v[i].fd == fd)
			return i;
	return -1;
}

static void ep_remove(struct pl_epoll *ep, int i)
{
	ep->v[i] = ep->v[ep->n - 1];
	ep->n--;
}

static unsigned ep_ready_mask(struct pl_epoll *ep, bool *ret_pending, bool arm);
static bool ep_moved(struct pl_sock *cur);
static void ep_migrate_fd(int epfd, int fd);

/* Readiness of S at FD in poll(2) bits, or PL_REV_KERNEL. ARM: ask the peers to ring us for
 * what is not ready (only right before a sleep); spinning and fast checks leave the peers'
 * sends free of doorbells. QUICK (a spinning round between two full looks): a connection polled
 * for input alone is looked at through tp_readable_hint() only. */
static unsigned sock_revents_now(struct pl_sock *s, int fd, bool arm, unsigned events,
				 bool quick)
{
	if (s->kind == PL_EPOLL) {
		if (!s->ep)
			return PL_REV_KERNEL;
		pthread_mutex_lock(&s->ep->lock);
		unsigned m = ep_ready_mask(s->ep, NULL, arm);
		pthread_mutex_unlock(&s->ep->lock);
		return m ? POLLIN : PL_REV_KERNEL;
	}
	if (s->kind != PL_CONN)
		return PL_REV_KERNEL;
	int st = atomic_load_explicit(&s->state, memory_order_acquire); /* pairs with set_state */
	if (st == PL_CS_PENDING)
		st = pl_check_pending(s, fd);
	if (st == PL_CS_FAILED && s->pending_err)
		return POLLOUT | POLLERR | POLLHUP; /* a failed connect, as the kernel shows it */
	if (st != PL_CS_OPEN)
		return PL_REV_KERNEL;
	/* Polled for input alone and not about to sleep: a message the peer published is enough
	 * (tp_readable_hint()), so the read that follows validates it once, while it copies it,
	 * instead of here and again there. POLLRDHUP, errors and end of stream take the full
	 * look below (the hint says false for them). */
	if (!arm && !(events & (POLLOUT | POLLWRNORM | POLLWRBAND | POLLRDHUP)) &&
	    (events & (POLLIN | POLLRDNORM))) {
		if (tp_readable_hint(s->conn))
			return POLLIN | POLLRDNORM;
		if (quick)
			return 0; /* (the next full look sees end of stream, errors) */
	}
	/* Polled for output alone (a sender's select): room the cached credits show for a write
	 * as large as the last one is enough (tp_writable_hint()); else the full look below. */
	if (!arm && (events & (POLLOUT | POLLWRNORM)) &&
	    !(events & (POLLIN | POLLRDNORM | POLLRDHUP | POLLPRI)) &&
	    tp_writable_hint(s->conn, atomic_load_explicit(&s->wlen, memory_order_relaxed)))
		return POLLOUT | POLLWRNORM;
	/* Only what EVENTS asks for: a socket polled for input alone leaves the send side (and
	 * the feedback words the peer keeps writing) alone. POLLHUP/POLLERR come with input. */
	unsigned want = TP_EV_IN;
	if (events & (POLLOUT | POLLWRNORM | POLLWRBAND))
		want |= TP_EV_OUT;
	PL_ENTER();
	unsigned ev = tp_poll_dir(s->conn, want, arm);
	PL_LEAVE();
	/* (a connection that moved to its kernel socket reports both: the kernel answers now) */
	if (unlikely((ev & (TP_EV_IN | TP_EV_OUT)) == (TP_EV_IN | TP_EV_OUT)) &&
	    pl_conn_check_moved(s, fd))
		return PL_REV_KERNEL;
	PL_ENTER();
	/* Writable means room for a write as large as the last one in one message (the kernel,
	 * too, reports POLLOUT only for a good amount of room): pl_send() refuses to cut a write
	 * for want of room, so POLLOUT and the send agree (no EAGAIN after POLLOUT, no lost
	 * edge for EPOLLET). Errors and hang-ups go as they are. */
	if ((ev & TP_EV_OUT) && !(ev & (TP_EV_ERR | TP_EV_HUP)) &&
	    !tp_send_fits(s->conn, atomic_load_explicit(&s->wlen, memory_order_relaxed), arm))
		ev &= ~TP_EV_OUT;
	PL_LEAVE();
	return tp_to_poll(ev);
}

/* sock_revents(), and for a look at output: no room is remembered (pl_note_nospace()); room
 * found afterwards bumps room_gen, the EPOLLOUT edge of edge-triggered entries. */
static unsigned sock_revents(struct pl_sock *s, int fd, bool arm, unsigned events, bool quick)
{
	unsigned rev = sock_revents_now(s, fd, arm, events, quick);

	if (!(events & (POLLOUT | POLLWRNORM)) || (rev & PL_REV_KERNEL) || s->kind != PL_CONN)
		return rev;
	if (!(rev & (POLLOUT | POLLERR | POLLHUP))) {
		pl_note_nospace(s);
	} else if (unlikely(atomic_load_explicit(&s->nospace, memory_order_relaxed))) {
		atomic_store_explicit(&s->nospace, false, memory_order_relaxed);
		atomic_store_explicit(&s->room_gen,
				      atomic_load_explicit(&s->room_gen, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	}
	return rev;
}

unsigned pl_sock_revents(struct pl_sock *s, int fd)
{
	return sock_revents(s, fd, true, POLLIN | POLLOUT, false);
}

/* Is S (found at FD) carried in user space? Failed connects and listeners are kernel fds. */
static bool user_space(struct pl_sock *s)
{
	if (s->kind == PL_CONN)
		/* pairs with the release in set_state() (pl_setup.c) */
		return atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_FAILED;
	return s->kind == PL_EPOLL && s->ep && s->ep->n > 0;
}

/* --- poll ------------------------------------------------------------------------------------------ */

/* Spin rounds between two looks at the kernel fds, clock reads and yields of a spinning wait. */
#define PL_SPIN_ROUND 16u

/* Deadlines of one waiting call, read from the clock only once the call has to wait: a call
 * that finds something ready at once never reads the clock. */
struct pl_timing {
	const struct timespec *tmo; /* NULL: no timeout */
	bool init;
	int64_t start;
	int64_t deadline;           /* -1: none */
	int64_t spin_until;
	unsigned spins;
};

static bool zero_timeout(const struct timespec *tmo)
{
	return tmo && !tmo->tv_sec && !tmo->tv_nsec;
}

static void timing_init(struct pl_timing *t)
{
	if (t->init)
		return;
	int64_t now = pl_now_ns();
	t->init = true;
	t->start = now;
	t->deadline = t->tmo ? now + t->tmo->tv_sec * 1000000000LL + t->tmo->tv_nsec : -1;
	t->spin_until = zero_timeout(t->tmo) ? 0 : now + (int64_t)pl_spin_us * 1000;
	if (t->deadline >= 0 && t->spin_until > t->deadline)
		t->spin_until = t->deadline;
}

/* Nothing is ready: true while the spin budget lasts (the caller looks again without a
 * syscall). Every PL_SPIN_ROUND rounds it reads the clock and yields the CPU, so a peer that
 * shares this core can run; *RET_KCHECK is then set: time to look at the kernel fds. */
static bool spinning(struct pl_timing *t, bool *ret_kcheck)
{
	timing_init(t);
	*ret_kcheck = false;
	if (t->spin_until == 0)
		return false;
	if (++t->spins % PL_SPIN_ROUND) {
		cpu_relax();
		return true;
	}
	*ret_kcheck = true;
	if (pl_now_ns() >= t->spin_until) {
		t->spin_until = 0;
		return false;
	}
	sched_yield();
	return true;
}

/* Sleep length for the real call: the time left, capped. */
static int sleep_ms(struct pl_timing *t, bool cap_short)
{
	timing_init(t);
	int ms = pl_ms_left(t->deadline);
	int cap = cap_short ? 1 : PL_SLEEP_CAP_MS;
	if (ms < 0 || ms > cap)
		ms = cap;
	return ms;
}

static bool timed_out(struct pl_timing *t)
{
	timing_init(t);
	return t->deadline >= 0 && pl_now_ns() >= t->deadline;
}

static __thread struct pl_kturn pl_kturn __attribute__((tls_model("initial-exec")));

/* poll_run(): a first scan in full on every PL_FULL_EVERY-th call of the thread, else quick. */
#define PL_FULL_EVERY 32u
static __thread unsigned pl_full_turn __attribute__((tls_model("initial-exec")));

/* What one scan found besides the ready count. */
struct pl_scan {
	int nkernel;    /* fds the kernel answers for */
	bool ep_kernel; /* one of them is an epoll set that may hold our event fd */
};

/* One pass over FDS: NTB readiness into fds[].revents, the rest copied into KFDS for the
 * kernel (our fds there as -1). ARM: see sock_revents(). Returns how many fds are ready. */
static int poll_scan(struct pollfd *fds, nfds_t nfds, struct pl_sock **socks, struct pollfd *kfds,
		     bool arm, bool quick, struct pl_scan *ret_scan)
{
	int nready = 0;

	ret_scan->nkernel = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		kfds[i] = fds[i];
		kfds[i].revents = 0;
		fds[i].revents = 0;
		if (!socks[i]) {
			ret_scan->nkernel += fds[i].fd >= 0;
			continue;
		}
		unsigned rev = sock_revents(socks[i], fds[i].fd, arm, (unsigned)fds[i].events,
					    quick);
		if (rev & PL_REV_KERNEL) {
			ret_scan->nkernel++;
			ret_scan->ep_kernel |= socks[i]->kind == PL_EPOLL;
			continue; /* the kernel answers for it (pending connect, epoll's kernel side) */
		}
		kfds[i].fd = -1;
		fds[i].revents = (short)(rev & ((unsigned)fds[i].events | POLLERR | POLLHUP));
		if (fds[i].revents)
			nready++;
	}
	return nready;
}

/* Ask the kernel about the kernel fds of KFDS (plus EVFD when >= 0), waiting at most MS, and
 * merge its answers into FDS. Returns the number of fds it made ready, or -1 (errno). */
static int poll_kernel(struct pollfd *fds, nfds_t nfds, struct pl_sock **socks,
		       struct pollfd *kfds, int evfd, int ms, const sigset_t *mask)
{
	nfds_t kn = nfds;
	int nready = 0;

	if (evfd >= 0) {
		kfds[nfds].fd = evfd;
		kfds[nfds].events = POLLIN;
		kfds[nfds].revents = 0;
		kn++;
	}
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	int r = pl_real.ppoll(kfds, kn, &ts, mask);
	if (r < 0)
		return -1;
	for (nfds_t i = 0; r > 0 && i < nfds; i++) {
		if (kfds[i].fd < 0 || !kfds[i].revents)
			continue;
		fds[i].revents = kfds[i].revents;
		if (socks[i] && socks[i]->kind == PL_CONN) {
			/* A pending connect completed: its readiness is now NTB's. */
			unsigned rev = sock_revents(socks[i], fds[i].fd, false,
						    (unsigned)fds[i].events, false);
			if (!(rev & PL_REV_KERNEL))
				fds[i].revents = (short)(rev & ((unsigned)fds[i].events |
								POLLERR | POLLHUP));
		}
		if (fds[i].revents)
			nready++;
	}
	return nready;
}

/* Look up the fds of FDS into SOCKS (references; NULL for kernel fds). True when one of them
 * is carried in user space. */
static bool poll_lookup(const struct pollfd *fds, nfds_t nfds, struct pl_sock **socks)
{
	bool any = false;

	for (nfds_t i = 0; i < nfds; i++) {
		socks[i] = fds[i].fd >= 0 ? pl_sock_get(fds[i].fd) : NULL;
		if (socks[i] && !user_space(socks[i])) {
			pl_sock_put(socks[i]);
			socks[i] = NULL;
		}
		any |= socks[i] != NULL;
	}
	return any;
}

/* The wait of poll/select over FDS, whose objects SOCKS (poll_lookup()) include at least one
 * user-space fd; KFDS has room for NFDS + 1 entries. *RET_WAIT_NS (when not NULL): how long it
 * waited, 0 when it returned at once without reading the clock (for select's write-back of the
 * time left). */
static int poll_run(struct pollfd *fds, nfds_t nfds, struct pl_sock **socks, struct pollfd *kfds,
		    const struct timespec *tmo, const sigset_t *mask, int64_t *ret_wait_ns)
{
	struct pl_timing tm = { .tmo = tmo };
	/* Quick looks (sock_revents()) answer an input-only NTB fd from tp_readable_hint() alone:
	 * a quiet connection beside a busy one (iperf3's control socket beside its data socket)
	 * then costs no full look per call. "Not ready" stands only with a full look, so a quick
	 * first scan that finds nothing is repeated in full at once, and every PL_FULL_EVERY-th
	 * call starts with a full scan: what the hint does not tell (a reset, a lost peer, a
	 * Retry's timer) waits at most that many calls. */
	bool quick = ++pl_full_turn % PL_FULL_EVERY != 0;
	int ret = 0;

	for (;;) {
		struct pl_scan sc = { 0 };
		bool kcheck = false;
		int nready = poll_scan(fds, nfds, socks, kfds, false, quick, &sc);

		if (!nready && quick && !tm.init) {
			quick = false; /* the first scan: nothing ready, so look in full */
			continue;
		}

		if (nready) {
			/* The fast path: no clock, no syscall, unless it is the kernel fds' turn. */
			if (sc.nkernel == 0 || !kernel_turn(&pl_kturn)) {
				ret = nready;
				break;
			}
			if (sc.ep_kernel) {
				/* an unconsumed event fd would make that epoll set look readable */
				PL_ENTER();
				tp_event_ack();
				PL_LEAVE();
			}
			int r = poll_kernel(fds, nfds, socks, kfds, -1, 0, mask);
			ret = nready + (r > 0 ? r : 0);
			break;
		}
		if (spinning(&tm, &kcheck)) {
			quick = !kcheck;
			if (!kcheck || sc.nkernel == 0)
				continue;
			if (sc.ep_kernel) {
				PL_ENTER();
				tp_event_ack();
				PL_LEAVE();
			}
			int r = poll_kernel(fds, nfds, socks, kfds, -1, 0, mask);
			if (r != 0) {
				ret = r;
				break;
			}
			continue;
		}
		if (zero_timeout(tmo)) {
			/* A check, not a wait: no arming, no event fd. */
			if (sc.ep_kernel) {
				PL_ENTER();
				tp_event_ack();
				PL_LEAVE();
			}
			ret = sc.nkernel ? poll_kernel(fds, nfds, socks, kfds, -1, 0, mask) : 0;
			break;
		}
		/* About to sleep: consume the event fd, then look again arming the doorbells, so a
		 * doorbell after this point makes the event fd readable and ends the sleep. */
		PL_ENTER();
		int evfd = tp_event_fd();
		tp_event_ack();
		PL_LEAVE();
		nready = poll_scan(fds, nfds, socks, kfds, true, false, &sc);
		int ms = nready ? 0 : sleep_ms(&tm, evfd < 0);
		if (nready && sc.nkernel == 0) {
			ret = nready;
			break;
		}
		int r = poll_kernel(fds, nfds, socks, kfds, ms ? evfd : -1, ms, mask);
		if (r < 0) {
			ret = nready ? nready : -1;
			break;
		}
		if (nready + r > 0) {
			ret = nready + r;
			break;
		}
		if (timed_out(&tm)) {
			ret = 0;
			break;
		}
	}
	if (ret_wait_ns)
		*ret_wait_ns = tm.init ? pl_now_ns() - tm.start : 0;
	return ret;
}

int pl_poll_impl(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		 const sigset_t *mask)
{
	struct pl_sock *sstack[32], **socks = sstack;
	struct pollfd kstack[33], *kfds = kstack;
	int ret;

	if (nfds > 32) {
		socks = calloc(nfds, sizeof(*socks));
		kfds = calloc(nfds + 1, sizeof(*kfds));
		if (!socks || !kfds) {
			free(socks);
			free(kfds);
			return pl_real.ppoll(fds, nfds, tmo, mask);
		}
	}
	if (poll_lookup(fds, nfds, socks))
		ret = poll_run(fds, nfds, socks, kfds, tmo, mask, NULL);
	else
		ret = pl_real.ppoll(fds, nfds, tmo, mask);
	for (nfds_t i = 0; i < nfds; i++)
		pl_sock_put(socks[i]);
	if (socks != sstack) {
		free(socks);
		free(kfds);
	}
	return ret;
}

static bool poll_has_ours(struct pollfd *fds, nfds_t nfds)
{
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0 || !pl_active())
		return false;
	(void)fds;
	(void)nfds;
	return true;
}

NTB_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	if (!poll_has_ours(fds, nfds))
		return pl_real.poll(fds, nfds, timeout);
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
	return pl_poll_impl(fds, nfds, timeout < 0 ? NULL : &ts, NULL);
}

NTB_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		     const sigset_t *mask)
{
	if (!poll_has_ours(fds, nfds))
		return pl_real.ppoll(fds, nfds, tmo, mask);
	return pl_poll_impl(fds, nfds, tmo, mask);
}

NTB_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		abort();
	return poll(fds, nfds, timeout);
}

NTB_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
			   const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		abort();
	return ppoll(fds, nfds, tmo, mask);
}

/* --- select ----------------------------------------------------------------------------------------- */

#define POLLIN_SET (POLLRDNORM | POLLRDBAND | POLLIN | POLLHUP | POLLERR)
#define POLLOUT_SET (POLLWRBAND | POLLWRNORM | POLLOUT | POLLERR)

#define PL_SEL_STACK 64

/* Word W of SET as bits (0 for a NULL set). */
static unsigned long sel_word(const fd_set *set, int w)
{
	return set ? (unsigned long)__FDS_BITS(set)[w] : 0;
}

/* select over fd sets as a poll over their fds. *RET_OURS: false when no fd of the sets is
 * carried in user space (then nothing was done: the caller passes the call to the kernel). */
static int select_impl(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
		       const sigset_t *mask, int64_t *ret_wait_ns, bool *ret_ours)
{
	struct pollfd pstack[PL_SEL_STACK], kstack[PL_SEL_STACK + 1], *p = pstack, *kfds = kstack;
	struct pl_sock *sstack[PL_SEL_STACK], **socks = sstack;
	int n = 0, r = 0;
	bool any = false;

	*ret_ours = false;
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0 || !pl_active())
		return 0;
	int hi = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	/* Word by word, set bits only: a select over a few fds spread up to NFDS costs a few
	 * loads, not NFDS bit tests. */
	for (int w = 0; w * NFDBITS < nfds; w++) {
		unsigned long all = sel_word(rd, w) | sel_word(wr, w) | sel_word(ex, w);
		if (nfds - w * NFDBITS < NFDBITS)
			all &= (1UL << (nfds - w * NFDBITS)) - 1;
		for (; all; all &= all - 1) {
			int fd = w * NFDBITS + __builtin_ctzl(all);
			short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
					   (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
					   (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
			if (n == PL_SEL_STACK && p == pstack) {
				p = malloc(sizeof(*p) * FD_SETSIZE);
				kfds = malloc(sizeof(*kfds) * (FD_SETSIZE + 1));
				socks = malloc(sizeof(*socks) * FD_SETSIZE);
				if (!p || !kfds || !socks) {
					free(p);
					free(kfds);
					free(socks);
					for (int i = 0; i < n; i++)
						pl_sock_put(sstack[i]);
					*ret_ours = true;
					return -ENOMEM;
				}
				memcpy(p, pstack, sizeof(*p) * (size_t)n);
				memcpy(socks, sstack, sizeof(*socks) * (size_t)n);
			}
			p[n].fd = fd;
			p[n].events = ev;
			p[n].revents = 0;
			socks[n] = fd < hi ? pl_sock_get(fd) : NULL;
			if (socks[n] && !user_space(socks[n])) {
				pl_sock_put(socks[n]);
				socks[n] = NULL;
			}
			any |= socks[n] != NULL;
			n++;
		}
	}
	if (!any)
		goto out;
	*ret_ours = true;
	r = poll_run(p, (nfds_t)n, socks, kfds, tmo, mask, ret_wait_ns);
	if (r < 0) {
		r = -errno;
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (p[i].revents & POLLNVAL) {
			r = -EBADF;
			goto out;
		}
	/* As the kernel: only the words covering NFDS are written back (FD_ZERO's 128-byte
	 * clears were a visible part of a select() that finds a socket ready). */
	size_t words = ((size_t)nfds + NFDBITS - 1) / NFDBITS;
	for (size_t w = 0; w < words; w++) {
		if (rd)
			__FDS_BITS(rd)[w] = 0;
		if (wr)
			__FDS_BITS(wr)[w] = 0;
		if (ex)
			__FDS_BITS(ex)[w] = 0;
	}
	r = 0;
	for (int i = 0; i < n; i++) {
		if (rd && (p[i].events & POLLIN) && (p[i].revents & POLLIN_SET)) {
			FD_SET(p[i].fd, rd);
			r++;
		}
		if (wr && (p[i].events & POLLOUT) && (p[i].revents & POLLOUT_SET)) {
			FD_SET(p[i].fd, wr);
			r++;
		}
		if (ex && (p[i].events & POLLPRI) && (p[i].revents & POLLPRI)) {
			FD_SET(p[i].fd, ex);
			r++;
		}
	}
out:
	for (int i = 0; i < n; i++)
		pl_sock_put(socks[i]);
	if (p != pstack) {
		free(p);
		free(kfds);
		free(socks);
	}
	return r;
}

NTB_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tmo)
{
	struct timespec ts, *tp = NULL;
	if (tmo) {
		if (tmo->tv_sec < 0 || tmo->tv_usec < 0)
			return (int)pl_ret(-EINVAL);
		ts.tv_sec = tmo->tv_sec;
		ts.tv_nsec = tmo->tv_usec * 1000;
		tp = &ts;
	}
	int64_t waited = 0;
	bool ours;
	int r = select_impl(nfds, rd, wr, ex, tp, NULL, &waited, &ours);
	if (!ours)
		return pl_real.select(nfds, rd, wr, ex, tmo);
	if (tmo && waited) {
		/* Linux writes back the time left (a call that did not wait leaves it as is). */
		int64_t left = (int64_t)tmo->tv_sec * 1000000 + tmo->tv_usec - waited / 1000;
		if (left < 0)
			left = 0;
		tmo->tv_sec = left / 1000000;
		tmo->tv_usec = left % 1000000;
	}
	return (int)pl_ret(r);
}

NTB_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
		       const sigset_t *mask)
{
	bool ours;
	if (tmo && (tmo->tv_sec < 0 || tmo->tv_nsec < 0 || tmo->tv_nsec >= 1000000000L))
		return (int)pl_ret(-EINVAL);
	int r = select_impl(nfds, rd, wr, ex, tmo, mask, NULL, &ours);
	if (!ours)
		return pl_real.pselect(nfds, rd, wr, ex, tmo, mask);
	return (int)pl_ret(r);
}

/* --- epoll ------------------------------------------------------------------------------------------- */

NTB_EXPORT int epoll_create(int size)
{
	bool act = pl_active();
	int fd = pl_real.epoll_create(size);
	if (act && fd >= 0)
		pl_fd_fresh(fd);
	return fd;
}

NTB_EXPORT int epoll_create1(int flags)
{
	bool act = pl_active();
	int fd = pl_real.epoll_create1(flags);
	if (act && fd >= 0)
		pl_fd_fresh(fd);
	return fd;
}

/* The shadow of EPFD, created on first use (a new PL_EPOLL object at EPFD). */
static struct pl_sock *ep_get(int epfd, bool create)
{
	struct pl_sock *s = pl_sock_get(epfd);
	if (s || !create)
		return s;
	s = pl_sock_alloc(PL_EPOLL);
	if (!s)
		return NULL;
	s->ep = calloc(1, sizeof(*s->ep));
	if (!s->ep) {
		pl_sock_put(s);
		return NULL;
	}
	pthread_mutex_init(&s->ep->lock, NULL);
	pl_fd_install(epfd, s);
	return s;
}

static int ep_ctl_shadow(int epfd, struct pl_sock *ep_s, int op, int fd, struct pl_sock *t,
			 struct epoll_event *ev)
{
	struct pl_epoll *ep = ep_s->ep;
	int r = 0;

	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	pthread_mutex_lock(&ep->lock);
	int i = ep_find(ep, fd);
	if (i >= 0 && (pl_fds[fd] != ep->v[i].s ||
		       atomic_load_explicit(&ep->v[i].s->gen, memory_order_relaxed) != ep->v[i].gen)) {
		ep_remove(ep, i); /* stale: the fd was closed and reused */
		i = -1;
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (i >= 0) {
			r = -EEXIST;
			break;
		}
		if (ep->n == ep->cap) {
			int nc = ep->cap ? ep->cap * 2 : 16;
			struct pl_ep_entry *nv = realloc(ep->v, sizeof(*nv) * (size_t)nc);
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			ep->v = nv;
			ep->cap = nc;
		}
		i = ep->n++;
		memset(&ep->v[i], 0, sizeof(ep->v[i]));
		ep->v[i].fd = fd;
		ep->v[i].s = t;
		ep->v[i].gen = atomic_load_explicit(&t->gen, memory_order_relaxed);
		ep->v[i].events = ev->events;
		ep->v[i].data = ev->data;
		ep->v[i].fresh = true; /* the kernel polls a new entry at once */
		ep->nested |= t->kind == PL_EPOLL;
		break;
	case EPOLL_CTL_MOD:
		if (i < 0) {
			r = -ENOENT;
			break;
		}
		ep->v[i].events = ev->events;
		ep->v[i].data = ev->data;
		ep->v[i].disabled = false;
		ep->v[i].fresh = true; /* (re-armed: an event if ready now, as the kernel) */
		break;
	case EPOLL_CTL_DEL:
		if (i < 0)
			r = -ENOENT;
		else
			ep_remove(ep, i);
		break;
	default:
		r = -EINVAL;
	}
	if (r == 0 && !ep->evfd_added) {
		PL_ENTER();
		int evfd = tp_event_fd();
		PL_LEAVE();
		struct epoll_event e = { .events = EPOLLIN, .data.u64 = PL_EP_TAG };
		if (evfd >= 0 && pl_real.epoll_ctl(epfd, EPOLL_CTL_ADD, evfd, &e) == 0)
			ep->evfd_added = true;
	}
	pthread_mutex_unlock(&ep->lock);
	return r;
}

int pl_epoll_shadow_add(int epfd, int fd, struct pl_sock *t, const struct epoll_event *ev)
{
	struct epoll_event e = *ev;
	struct pl_sock *ep_s = ep_get(epfd, true);
	int r;

	if (!ep_s || ep_s->kind != PL_EPOLL || !ep_s->ep)
		r = ep_s ? -EINVAL : -ENOMEM;
	else
		r = ep_ctl_shadow(epfd, ep_s, EPOLL_CTL_ADD, fd, t, &e);
	pl_sock_put(ep_s);
	return r;
}

/* A kernel fd: the kernel's epoll_ctl; a candidate's registrations are remembered. */
static int ctl_kernel(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = pl_real.epoll_ctl(epfd, op, fd, ev);
	if (r == 0 && pl_cand_is(fd)) {
		int saved = errno;
		pl_cand_epoll(epfd, op, fd, ev);
		errno = saved;
	}
	return r;
}

NTB_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct pl_sock *t = pl_lookup(fd);
	if (!t)
		return ctl_kernel(epfd, op, fd, ev);
	if (!(t->kind == PL_CONN || (t->kind == PL_EPOLL && t->ep)) ||
	    (t->kind == PL_CONN &&
	     /* pairs with the release in set_state() */
	     atomic_load_explicit(&t->state, memory_order_acquire) == PL_CS_FAILED)) {
		if (ep_moved(t))
			ep_migrate_fd(epfd, fd); /* (its shadow entry, if still there) */
		pl_sock_put(t);
		return ctl_kernel(epfd, op, fd, ev);
	}
	if (fd == epfd) {
		pl_sock_put(t);
		return (int)pl_ret(-EINVAL);
	}
	int r = 0;
	if (t->kind == PL_EPOLL) {
		/* A nested epoll set: the kernel sees its kernel fds, the shadow its NTB fds. */
		r = pl_real.epoll_ctl(epfd, op, fd, ev);
		if (r < 0) {
			pl_sock_put(t);
			return r;
		}
	}
	struct pl_sock *ep_s = ep_get(epfd, op == EPOLL_CTL_ADD);
	if (!ep_s || ep_s->kind != PL_EPOLL || !ep_s->ep) {
		r = ep_s ? -EINVAL : (op == EPOLL_CTL_ADD ? -ENOMEM : -ENOENT);
	} else {
		r = ep_ctl_shadow(epfd, ep_s, op, fd, t, ev);
	}
	pl_sock_put(ep_s);
	pl_sock_put(t);
	return (int)pl_ret(r);
}

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
 * message the peer publishes (tp_rx_arrivals()); for an epoll set, with every arrival at its
 * enabled entries (the kernel wakes a set's watchers on each wake-up of an entry; adding,
 * removing or re-arming an entry there may raise a spurious edge). ARM: the caller sleeps next,
 * waiting for an arrival: the peers are asked to ring for their next message. */
static uint64_t sock_rx_stamp(struct pl_sock *s, bool arm)
{
	if (s->kind == PL_EPOLL)
		return s->ep ? ep_stamp(s->ep, arm) : 0;
	if (s->kind != PL_CONN ||
	    /* pairs with the release in set_state() (pl_setup.c) */
	    atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_OPEN)
		return 0;
	PL_ENTER();
	uint64_t st = arm ? tp_rx_arm_arrival(s->conn) : tp_rx_arrivals(s->conn);
	PL_LEAVE();
	return st;
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
	unsigned rev = sock_revents(cur, e->fd, arm, e->events, quick);

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

/* Under ep->lock: fill EVS with ready shadow entries, applying edge and one-shot rules. ARM:
 * see sock_revents(). */
/* Under ep->lock: entry I's connection moved to its kernel socket (pl_failover.c): its
 * registration goes to the kernel's set as it stands (a fired one-shot stays disabled). */
static void ep_migrate(struct pl_epoll *ep, int epfd, int i)
{
	struct pl_ep_entry *e = &ep->v[i];
	struct epoll_event ev = { .events = e->disabled ? 0 : e->events, .data = e->data };

	if (pl_real.epoll_ctl(epfd, EPOLL_CTL_ADD, e->fd, &ev) < 0 && errno != EEXIST)
		LOG(LL_WARN, "fd %d: cannot move its epoll registration to the kernel: %s", e->fd,
		    strerror(errno));
	ep_remove(ep, i);
}

static bool ep_moved(struct pl_sock *cur)
{
	/* state first: moved is written under s->lock (pl_conn_moved()), before the release
	 * store of FAILED, which this acquire load pairs with; a socket that failed otherwise
	 * (a connect) never has moved written again */
	return cur->kind == PL_CONN &&
	       atomic_load_explicit(&cur->state, memory_order_acquire) == PL_CS_FAILED &&
	       cur->moved;
}

/* A moved connection's registration in EPFD's shadow, if any, goes to the kernel first. */
static void ep_migrate_fd(int epfd, int fd)
{
	struct pl_sock *ep_s = pl_sock_get(epfd);

	if (ep_s && ep_s->kind == PL_EPOLL && ep_s->ep) {
		pthread_mutex_lock(&ep_s->ep->lock);
		int i = ep_find(ep_s->ep, fd);

		if (i >= 0)
			ep_migrate(ep_s->ep, epfd, i);
		pthread_mutex_unlock(&ep_s->ep->lock);
	}
	pl_sock_put(ep_s);
}

static int ep_collect(struct pl_epoll *ep, int epfd, struct epoll_event *evs, int max,
		      bool *ret_pending, bool arm, bool quick)
{
	int n = 0, k;
	int cnt = ep->n;

	for (k = 0; k < cnt && n < max && ep->n > 0; k++) {
		int i = (int)((ep->rr + (unsigned)k) % (unsigned)ep->n);
		struct pl_ep_entry *e = &ep->v[i];
		struct pl_sock *cur;
		if (!ep_entry_valid(e, &cur)) {
			/* Closed: the kernel drops closed fds from epoll sets, so do we. */
			ep_remove(ep, i);
			cnt--;
			k--;
			continue;
		}
		if (e->disabled) {
			pl_sock_put(cur);
			continue;
		}
		unsigned report = ep_entry_report(e, cur, arm, quick, true);
		if ((report & PL_REV_KERNEL) && ep_moved(cur)) {
			pl_sock_put(cur);
			ep_migrate(ep, epfd, i);
			cnt--;
			k--;
			continue;
		}
		if (report & PL_REV_KERNEL) {
			if (cur->kind == PL_CONN)
				*ret_pending = true;
			pl_sock_put(cur);
			continue;
		}
		pl_sock_put(cur);
		if (!report)
			continue;
		evs[n].events = report;
		evs[n].data = e->data;
		n++;
		if (e->events & EPOLLONESHOT)
			e->disabled = true;
	}
	/* The next collection starts after the last entry this one looked at, as the kernel's
	 * ready list sends a reported entry to its back: with more entries ready than MAX, each is
	 * looked at (a pending connect decided, an event reported) within ceil(n / MAX) calls.
	 * (Starting one further each call instead left the entries beyond the first MAX ready
	 * ones unseen for up to n - MAX calls.) A collection that looked at every entry moves the
	 * start by one. */
	if (ep->n > 0)
		ep->rr = (ep->rr + (unsigned)(k < cnt ? k : 1)) % (unsigned)ep->n;
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
	bool quick = false; /* as in poll_run() */
	int ret;

	for (;;) {
		bool pending = false, woken = false, kcheck = false;
		pthread_mutex_lock(&ep->lock);
		int n = ep_collect(ep, epfd, evs, max, &pending, false, quick);
		bool evfd_ok = ep->evfd_added;
		/* Kernel fds are looked at in their turn (kernel_turn()) when NTB events were found,
		 * and always when none was: neither side starves, and the common case needs no
		 * syscall. */
		bool look = n && kernel_turn(&ep->kturn);
		pthread_mutex_unlock(&ep->lock);
		if (n && !look) {
			ret = n;
			break;
		}
		int ms = 0;
		bool spin = !n && spinning(&tm, &kcheck);
		quick = spin && !kcheck;
		if (spin && !kcheck)
			continue;
		if (!n && !spin && !zero_timeout(tmo)) {
			/* About to sleep: consume the event fd, then look again arming the doorbells
			 * (see poll_wait()). */
			PL_ENTER();
			tp_event_ack();
			PL_LEAVE();
			pthread_mutex_lock(&ep->lock);
			n = ep_collect(ep, epfd, evs, max, &pending, true, false);
			pthread_mutex_unlock(&ep->lock);
			ms = n ? 0 : sleep_ms(&tm, pending || !evfd_ok);
		}
		int r = pl_real.epoll_pwait(epfd, evs + n, max - n, ms, mask);
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
		if (timed_out(&tm)) {
			ret = 0;
			break;
		}
	}
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
