/* SPDX-License-Identifier: MIT */
/* Links of this process: open and close, their state, the per-process helper thread (heartbeat,
 * mailbox, timers, doorbell → event fd), exit and fork support, parameters. A link's
 * connections: tp_conns.c; link groups: tp_group.c. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "transport/tp_int.h"
#include "util/log.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

void tp_params_init(struct tp_params *p)
{
	memset(p, 0, sizeof(*p));
	p->queue_size = 0;          /* auto: the largest power of two the window allows, ≤ 1 MiB */
	p->inline_slots = 8;
	p->inline_max = TP_INLINE_MAX;
	p->short_max = 16384;
	p->contexts = 256;
	p->cnct_timeout_ms = 10;      /* then longer, up to 160 (tp_rt_cnct_timer()) */
	p->send_timeout_ms = 100;
	p->recv_timeout_ms = 50;
	p->detect_timeout_ms = 100;
	p->max_err = 32;
	p->spin_us = 200;
	p->setup_timeout_ms = 2000;
	p->peer_timeout_ms = 30000;
	p->retry_wait_us = TP_RETRY_WAIT_US;
}

const char *tp_reason_str(enum tp_reason r)
{
	switch (r) {
	case TP_REASON_NONE: return "ntb";
	case TP_REASON_NOT_CONFIGURED: return "not configured";
	case TP_REASON_RULE_TCP: return "rule says tcp";
	case TP_REASON_NO_LISTENER: return "no listener";
	case TP_REASON_NO_CONTEXT: return "no receive context";
	case TP_REASON_TIMEOUT: return "timeout";
	case TP_REASON_LINK_DOWN: return "link down";
	case TP_REASON_PEER_ERROR: return "peer error";
	case TP_REASON_LOCAL_ERROR: return "local error";
	case TP_REASON_ADMIN_DOWN: return "link down (admin)";
	case TP_REASON_HOST_BUSY: return "host lock held";
	}
	return "unknown";
}

/* --- process state ------------------------------------------------------------------------- */

pthread_mutex_t tp_links_lock = PTHREAD_MUTEX_INITIALIZER; /* links list, helper start */
struct tp_link *tp_links;
static int g_efd = -1;
static bool g_helper;
static bool g_helper_held;            /* tp_helper_hold() (under tp_links_lock, or before threads) */
static bool g_helper_waiting;         /* the helper sleeps on the links' doorbells (under
				       * tp_links_lock): tp_link_close() waits until it is off them */
static uint64_t g_helper_round;       /* its sleeps so far (under tp_links_lock): a later one is on a
				       * list without the link being closed */
/* Bumped (and futex-woken) to make the helper look at tp_links again: a link added or being
 * closed. Process-private; the helper sleeps on it beside the doorbells (ntb_db_wait_many()). */
static _Atomic uint32_t g_helper_kick;
/* The helper's planned sleep (ms) while it sleeps, INT_MAX from before it reads the links' flags
 * (helper_plan()) until it knows, 0 while it serves: tp_link_probe_soon() kicks a sleep longer
 * than TP_QUICK_PROBE_MS. */
static _Atomic int g_helper_slice;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* Set once a waiter was handed the event fd (tp_event_fd()): until then nobody can sleep on it,
 * and tp_event_signal() writes nothing — most set-ups of a program that never polls signalled
 * it twice, a system call each (#21 item 3). */
static _Atomic bool g_efd_used;

static int event_fd_make(void)
{
	pthread_mutex_lock(&tp_links_lock);
	if (g_efd < 0)
		g_efd = fd_park(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	pthread_mutex_unlock(&tp_links_lock);
	return g_efd < 0 ? -EMFILE : g_efd;
}

int tp_event_fd(void)
{
	int fd = event_fd_make();

	if (fd >= 0) {
		if (!atomic_load_explicit(&g_efd_used, memory_order_relaxed))
			atomic_store_explicit(&g_efd_used, true, memory_order_relaxed);
		/* the waiter half of a Dekker pair with tp_event_signal(): the flag before the
		 * looks at the connections that follow (its caller's, before it sleeps); by every
		 * waiter, not only the first (C11 orders nothing for one that only read the flag;
		 * it sleeps in a system call next) */
		atomic_thread_fence(memory_order_seq_cst);
	}
	return fd;
}

int tp_link_ev_slot(struct tp_link *l)
{
	/* relaxed: a cache of what ntb_event_publish() answered (a racing first call publishes
	 * the same again) */
	int slot = atomic_load_explicit(&l->ev_slot, memory_order_relaxed);

	if (!ntb_event_peer_rings(l->ntb))
		return -1;
	if (slot != -2)
		return slot;
	/* (the event fd exists: a sleeper on it asks) */
	int fd = g_efd;

	if (fd < 0)
		return -1;
	slot = ntb_event_publish(l->ntb, fd);
	if (slot < 0)
		slot = -1;
	atomic_store_explicit(&l->ev_slot, slot, memory_order_relaxed);
	return slot;
}

void tp_event_ack(void)
{
	uint64_t v;

	if (g_efd >= 0 && raw_read(g_efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending */
	}
}

static _Atomic unsigned g_state_gen;

unsigned tp_state_gen(void)
{
	/* acquire: pairs with the release in tp_event_signal() (what changed, before) */
	return atomic_load_explicit(&g_state_gen, memory_order_acquire);
}

static void event_write(void);

/* Every caller but the helper's doorbell signals a change of state (tp_state_gen()). */
void tp_event_signal(void)
{
	atomic_fetch_add_explicit(&g_state_gen, 1, memory_order_release);
	event_write();
}

static void event_write(void)
{
	uint64_t one = 1;

	/* relaxed, then (when unset) again after a full fence: the signaller half of the Dekker
	 * pair with tp_event_fd() (what the signal is about was seen before the flag's load; a
	 * waiter that set the flag after that load looks at the connections after it) */
	if (!atomic_load_explicit(&g_efd_used, memory_order_relaxed)) {
		atomic_thread_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&g_efd_used, memory_order_relaxed))
			return;
	}
	if (g_efd >= 0 && raw_write(g_efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: counter saturated, already readable */
	}
}

/* Tick the link and cache its state for the data path (tp_conn_peer_lost()). */
bool tp_link_refresh(struct tp_link *l)
{
	bool up = ntb_link_tick(l->ntb);
	uint64_t now = tp_now_ms();

	uint64_t since = 0;

	if (up) {
		/* while down the peer epoch reads 0: keep the last one seen. Relaxed (the link's
		 * state words here): a cache of what ntb_link_tick() saw, each word on its own;
		 * nothing is published with them, and sleepers are woken by tp_event_signal() */
		uint32_t pe = ntb_link_peer_epoch(l->ntb);

		if (atomic_exchange_explicit(&l->peer_epoch, pe, memory_order_relaxed) != pe)
			tp_event_signal(); /* (a restarted peer: its connections are lost) */
		atomic_store_explicit(&l->down_since_ms, 0, memory_order_relaxed);
	} else {
		uint64_t zero = 0;

		since = now;
		if (!atomic_compare_exchange_strong_explicit(&l->down_since_ms, &zero, now,
							     memory_order_relaxed,
							     memory_order_relaxed))
			since = zero; /* the first thread to see it down set the time */
	}
	/* A stall shorter than the grace (a starved heartbeat on a loaded host) does not end
	 * connections: retransmission covers it. Down for longer: no new connection uses the
	 * link. Its connections are lost then too, unless the peer is only silent (its
	 * heartbeat stale, nothing announced): a process stopped (SIGSTOP, a debugger) or starved
	 * looks the same as a dead host, and a kernel TCP connection would wait for it. Those
	 * wait up to peer_timeout_ms; a peer process that died is seen sooner, through the TCP
	 * socket (tp_witness_look()) or its host's reclaim (GONE). */
	bool grace_up = up || clock_age_ms(now, since) < l->down_grace_ms;
	bool silent = !up && ntb_link_peer_silent(l->ntb);

	atomic_store_explicit(&l->up, grace_up, memory_order_relaxed);
	bool lost = atomic_load_explicit(&l->region_bad, memory_order_relaxed) ||
		    (!grace_up && (!silent || clock_age_ms(now, since) >= l->params.peer_timeout_ms));

	if (lost && !atomic_exchange_explicit(&l->lost, true, memory_order_relaxed))
		tp_event_signal(); /* sleeping waiters look again and see the loss */
	else if (!lost)
		atomic_store_explicit(&l->lost, false, memory_order_relaxed);
	return up;
}

/* The host lock for the helper's mailbox work. Never a blocking lock: a process of this host
 * stopped while holding it must not stop our heartbeat and timers. But a rung doorbell may be an
 * Apply that waits for us (the server's accept() cannot run before the client has its answer),
 * and the holder keeps the lock for microseconds: worth a few yields before giving up (then
 * link_service() tries again within a millisecond, mbox_missed). */
static bool mbox_lock(struct tp_link *l)
{
	for (int i = 0; i < 16; i++) {
		if (tp_host_trylock(l))
			return true;
		sched_yield();
	}
	return false;
}

/* What a walk of the active list does with one connection this process drives. */
typedef void (*owned_fn)(struct tp_link *l, struct tp_conn *c);

/* Call FN for each connection on L's active list (tp_active.c) that this process drives. Only
 * the active list: the work of both callers (a held message, a Retry of unacknowledged data)
 * is timer work, and the tp_send() that made it put the connection there; a walk of every
 * connection on each doorbell cost a link of thousands O(connections) per ring. Under
 * conns_lock the list's links change only at its head (a push, under act_lock, which the head
 * is read under). */
static void active_owned_walk(struct tp_link *l, owned_fn fn)
{
	pthread_mutex_lock(&l->conns_lock);
	pthread_mutex_lock(&l->act_lock);
	struct tp_conn *first = l->act_head;

	pthread_mutex_unlock(&l->act_lock);
	for (struct tp_conn *c = first; c; c = c->act_next)
		/* acquire: pairs with the release store in tp_conn_own() (single-owner rule) */
		if (atomic_load_explicit(&c->owned, memory_order_acquire))
			fn(l, c);
	pthread_mutex_unlock(&l->conns_lock);
}

/* flush_held() for one connection. A busy tx lock is a sender that publishes or looks at the
 * feedback itself, unless it looked just before this ring: then the helper comes back within
 * TP_QUICK_PROBE_MS (probe_soon). */
static void flush_held_conn(struct tp_link *l, struct tp_conn *c)
{
	/* relaxed held: a hint, read again under the lock */
	if (!atomic_load_explicit(&c->held, memory_order_relaxed))
		return;
	/* relaxed: only asks the helper to come sooner */
	if (!tp_tx_flush_held_ready(c))
		atomic_store_explicit(&l->probe_soon, true, memory_order_relaxed);
}

/* Publish the held (merged) messages of L's connections that this process drives. */
static void flush_held(struct tp_link *l)
{
	active_owned_walk(l, flush_held_conn);
}

/* answer_retries() for one connection. */
static void answer_retry_conn(struct tp_link *l, struct tp_conn *c)
{
	(void)l;
	/* acquire: pairs with the release store of slot_gone in tp_conn_free_slot() */
	if (atomic_load_explicit(&c->slot_gone, memory_order_acquire))
		return;
	tp_tx_retry_check(c);
	tp_tx_epoch_again(c); /* (a re-ask of a Retry already answered) */
}

/* The peer rang: a Retry of what our connections sent may be what it rang for. Each owned
 * connection's FB epoch word is compared with what its sender last saw (one load while none
 * came: tp_tx_retry_check()), and a Retry is answered now, from its arrival, rather than at
 * the next timer pass (every 5 ms on doorbells, 1 ms while quick probes are due): a sender
 * whose program does something else (a stream's writer waiting on another socket for its next
 * command) left the last messages of its burst to the helper, and each of their losses cost
 * the stream one or two milliseconds. */
static void answer_retries(struct tp_link *l)
{
	active_owned_walk(l, answer_retry_conn);
}

static void owners_later(struct tp_link *l);

/* Serve link L at NOW (RUNG: its doorbell moved): the mailbox, maintenance, held messages,
 * Retries and the timer pass. */
static void link_service(struct tp_link *l, uint64_t now, bool rung)
{
	bool timers, lingering;

	tp_link_refresh(l);
	if (now - l->admin_ms >= 100) {
		l->admin_ms = now;
		owners_later(l);
		tp_link_admin_down(l);
		ntb_event_sweep(l->ntb); /* (the peer processes' eventfds that are gone) */
		int mc = ntb_link_check_mapping(l->ntb);

		/* relaxed: a sticky flag (logged once); readers take it as a hint */
		if (mc < 0 && mc != -EINVAL && mc != -ENOTSUP &&
		    !atomic_exchange_explicit(&l->region_bad, true, memory_order_relaxed))
			LOG(LL_DEBUG, "transport: link region no longer valid (%d)", mc);
	}
	if (rung || l->mbox_missed || now - l->last_mbox_ms >= 100) {
		if (!(rung || l->mbox_missed ? mbox_lock(l) : tp_host_trylock(l))) {
			l->mbox_missed = true; /* helper_main() comes back within 1 ms */
			goto timers;
		}
		l->mbox_missed = false;
		l->last_mbox_ms = now;
		tp_mbox_process(l);
		bool maint = now - l->last_maint_ms >= 500;

		if (maint) {
			l->last_maint_ms = now;
			/* once per 500 ms for the whole host (struct tp_host's maint_ms; another
			 * process's reading may be later than our NOW: then it just did it) */
			if (now >= l->host->maint_ms + 500) {
				l->host->maint_ms = now;
				tp_host_reclaim_tick(l);
				tp_listen_publish(l, true); /* repairs lost words */
				tp_mbox_republish(l);
			}
		}
		tp_host_unlock(l);
		if (maint)
			tp_conn_cache_trim(l); /* (not under the host lock: it frees memory) */
	}
timers:
	/* the peer rang: it may have released what our held messages wait for (tp_tx.c) */
	if (rung && atomic_load_explicit(&l->held_conns, memory_order_relaxed) > 0)
		flush_held(l);
	if (rung)
		answer_retries(l);
	/* connection timers every 100 ms, and on doorbells (at most every 5 ms: a busy link
	 * rings often); every 5 ms while closed connections linger: they hold receive contexts
	 * (both hosts'), which a host making connections one after another runs short of when
	 * they are released only every 100 ms. A ring while closed ones linger gets a pass after
	 * 1 ms: the peer may be waiting for us to acknowledge its FIN (an exiting process waits
	 * for that, tp_exit_drain(), and rings every millisecond; a short-lived client's exit
	 * took up to 5 ms more than over kernel TCP). A pass visits the active connections; a ring (the
	 * peer's Detect or ST flags for an idle one) makes the next pass scan the idle ones too,
	 * at most every TP_ACT_SCAN_MS (tp_active.c). Relaxed: a request a pass takes. */
	if (rung)
		atomic_store_explicit(&l->act_scan, true, memory_order_relaxed);
	/* relaxed (lingering, tp_fo_active, probe_soon): hints for how soon the pass runs; it
	 * runs every 100 ms anyway */
	lingering = atomic_load_explicit(&l->lingering, memory_order_relaxed);
	timers = now - l->last_timers_ms >= 100 ||
		 atomic_load_explicit(&tp_fo_active, memory_order_relaxed) > 0 ||
		 ((rung || lingering) && now - l->last_timers_ms >= 5) ||
		 (rung && lingering && now - l->last_timers_ms >= 1) ||
		 (atomic_load_explicit(&l->probe_soon, memory_order_relaxed) &&
		  now - l->last_timers_ms >= TP_QUICK_PROBE_MS);
	if (!timers)
		return;
	l->last_timers_ms = now;
	if (!tp_link_conns_pass(l, now, false, false))
		/* another thread's pass: come again soon (relaxed: setting it only asks for
		 * a pass sooner) */
		atomic_store_explicit(&l->lingering, true, memory_order_relaxed);
}

/* Wake the helper from its sleep on the doorbells: tp_links changed. */
static void helper_kick(void)
{
	/* release: pairs with the acquire load in ntb_db_wait_many() (the list change first) */
	atomic_fetch_add_explicit(&g_helper_kick, 1, memory_order_release);
	syscall(SYS_futex, &g_helper_kick, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void tp_link_probe_soon(struct tp_link *l)
{
	/* seq_cst (store or fence), then seq_cst load of the slice: a Dekker pair with
	 * helper_main()'s store of INT_MAX and fence before helper_plan() reads probe_soon. Either
	 * its plan sees the flag (a sleep of TP_QUICK_PROBE_MS), or we see its slice and kick */
	if (!atomic_load_explicit(&l->probe_soon, memory_order_relaxed))
		atomic_store_explicit(&l->probe_soon, true, memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
	/* (the exchange: one kick per sleep, however many waiters arm) */
	if (atomic_load_explicit(&g_helper_slice, memory_order_seq_cst) > (int)TP_QUICK_PROBE_MS &&
	    atomic_exchange_explicit(&g_helper_slice, 0, memory_order_relaxed) >
	    (int)TP_QUICK_PROBE_MS)
		helper_kick();
}

void tp_exec_release_closed(void)
{
	/* A pass of another thread's tp_link_reap() (the helper's run under tp_links_lock) makes ours
	 * wait: up to ~100 ms in all. The list lock is taken with a deadline, as in
	 * tp_exit_drain(): a holder that never lets go leaves the connections as they were. */
	for (int tries = 0; tries < 200; tries++) {
		struct timespec abs;
		bool all = true;

		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_sec += 1;
		if (pthread_mutex_timedlock(&tp_links_lock, &abs))
			return;
		for (struct tp_link *l = tp_links; l; l = l->next_link)
			all &= tp_link_conns_pass(l, tp_now_ms(), true, true);
		pthread_mutex_unlock(&tp_links_lock);
		if (all)
			return;
		usleep(500);
	}
}

void tp_exec_claims(bool release)
{
	pthread_mutex_lock(&tp_links_lock);
	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		if (release) {
			ntb_link_release_claim(l->ntb);
		} else {
			int rc = ntb_link_rejoin(l->ntb);

			if (rc)
				LOG(LL_INFO, "transport: exec failed: no claim on the link's side again "
				    "(%s): %s", strerror(-rc), ntb_strerror_detail());
		}
		/* (an event fd published under the claim: withdrawn with it; again on demand) */
		atomic_store_explicit(&l->ev_slot, -2, memory_order_relaxed);
	}
	pthread_mutex_unlock(&tp_links_lock);
}

/* The witnesses' set is looked at once per TP_WATCH_GAP_NS at most: each look is a system call,
 * and a helper woken for every set-up made one per set-up (#21 item 3). A look put off makes
 * the next sleep short (helper_plan()): a failover header waits 1 ms more at most (an idle
 * helper's sleep of up to 100 ms delayed it before, as now). Under tp_links_lock. */
#define TP_WATCH_GAP_NS 1000000u
static uint64_t g_watch_ns; /* the last look */
static bool g_watch_owed;   /* a look was put off */

/* Under tp_links_lock: a peer's failover header arrived on the kernel socket of some connection
 * (tp_failover.c): that connection moves too. An end of stream there is tp_witness_look()'s. */
static void watched_events(void)
{
	uint64_t ids[64];
	uint64_t t = clock_mono_ns();

	g_watch_owed = t - g_watch_ns < TP_WATCH_GAP_NS;
	if (g_watch_owed)
		return;
	g_watch_ns = t;
	int n = tp_fo_watched_events(ids, 64);

	if (n == 64) {
		g_watch_ns = 0; /* more may wait: the next pass looks again */
		g_watch_owed = true;
	}

	for (int k = 0; k < n; k++) {
		for (struct tp_link *l = tp_links; l; l = l->next_link) {
			pthread_mutex_lock(&l->conns_lock);
			for (struct tp_conn *c = l->conns; c; c = c->next)
				if (c->fo_id == ids[k] && !tp_fo_get(c) && tp_fo_peer_spoke(c))
					tp_fo_request(c, "peer moved to tcp");
			pthread_mutex_unlock(&l->conns_lock);
		}
	}
}

bool tp_link_admin_down(struct tp_link *l)
{
	struct stat st;
	/* (the flag file's existence, as tp_link_admin_get(), without building its path again) */
	bool down = l->admin_path[0] && lstat(l->admin_path, &st) == 0;

	/* relaxed: a flag nothing is published with (readers: a set-up, the timers) */
	atomic_store_explicit(&l->admin_down, down, memory_order_relaxed);
	return down;
}

bool tp_link_admin_down_recent(struct tp_link *l)
{
	uint64_t now = tp_now_ms();
	uint64_t last = atomic_load_explicit(&l->admin_look_ms, memory_order_relaxed);

	if (last && now - last < TP_ADMIN_LOOK_MS)
		return atomic_load_explicit(&l->admin_down, memory_order_relaxed); /* (a flag) */
	atomic_store_explicit(&l->admin_look_ms, now, memory_order_relaxed);
	return tp_link_admin_down(l);
}

/* What the helper sleeps on in one round: planned under tp_links_lock (helper_plan()). */
struct helper_round {
	struct tp_link *first;     /* the link slept on alone where links cannot be together */
	uint32_t seen;             /* its doorbell as last seen */
	struct ntb_link *wait_on[NTB_DB_WAIT_MAX];
	uint32_t wait_seen[NTB_DB_WAIT_MAX];
	unsigned nwait;
	uint32_t kick_seen;        /* g_helper_kick before the links were read */
	int slice;                 /* the longest sleep (ms) */
};

/* Under tp_links_lock: the link to sleep on alone. With several links (a loopback link's two sides),
 * the one that receives Applies for this process's listeners, else one that this process's own
 * sends do not ring; the others are polled. NULL when there is no link. */
static struct tp_link *helper_first(void)
{
	struct tp_link *first = tp_links;

	for (struct tp_link *l = tp_links; l; l = l->next_link)
		if (atomic_load_explicit(&l->listening, memory_order_relaxed) > 0) {
			first = l;
			break;
		}
	/* relaxed (listening, self_rung): hints for which doorbell to sleep on */
	if (first && first == tp_links &&
	    !atomic_load_explicit(&first->listening, memory_order_relaxed) &&
	    atomic_load_explicit(&first->self_rung, memory_order_relaxed))
		for (struct tp_link *l = tp_links; l; l = l->next_link)
			if (!atomic_load_explicit(&l->self_rung, memory_order_relaxed)) {
				first = l;
				break;
			}
	return first;
}

/* Under tp_links_lock: R's doorbells to sleep on and the longest sleep, from what the links have to do
 * (closed connections lingering, held messages, quick probes, failovers, FIN waits). */
static void helper_plan(struct helper_round *r)
{
	r->nwait = 0;
	r->slice = 100;
	/* acquire: pairs with the release in helper_kick() (a kick before this load is not
	 * slept through: the list is read after it) */
	r->kick_seen = atomic_load_explicit(&g_helper_kick, memory_order_acquire);
	r->first = helper_first();
	r->seen = r->first ? r->first->db_seen : 0;
	/* Every link's doorbell is slept on together, but for one this process's own sends
	 * ring and where it has no listener (a loopback link's side 1 in a process that only
	 * connects): each send would wake us. Such a link is polled every 25 ms. */
	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		/* relaxed (every flag and count here): hints for the sleep's length; a pass
		 * comes at the latest after 100 ms */
		bool own = atomic_load_explicit(&l->self_rung, memory_order_relaxed) &&
			   !atomic_load_explicit(&l->listening, memory_order_relaxed);

		if (!own && r->nwait < NTB_DB_WAIT_MAX) {
			r->wait_on[r->nwait] = l->ntb;
			r->wait_seen[r->nwait++] = l->db_seen;
		} else if (r->slice > 25) {
			r->slice = 25; /* polled */
		}
		if (atomic_load_explicit(&l->lingering, memory_order_relaxed) && r->slice > 5)
			r->slice = 5; /* closed connections to finish (link_service()) */
		if (own && atomic_load_explicit(&l->held_conns, memory_order_relaxed) > 0 &&
		    r->slice > 1)
			r->slice = 1; /* polled, yet held messages wait for its rings */
		if (atomic_load_explicit(&l->probe_soon, memory_order_relaxed) &&
		    r->slice > (int)TP_QUICK_PROBE_MS)
			r->slice = (int)TP_QUICK_PROBE_MS; /* quick probes (tp_int.h) */
		if (l->mbox_missed)
			r->slice = 1; /* link_service() could not take a host lock */
	}
	if (atomic_load_explicit(&tp_fo_active, memory_order_relaxed) > 0 && r->slice > 2)
		r->slice = 2; /* failovers move bytes on kernel sockets (tp_failover.c) */
	if (tp_finwait_pending() && r->slice > 2)
		r->slice = 2; /* closes wait for the peer's FIN (tp_finwait.c) */
	if (g_watch_owed && r->slice > 1)
		r->slice = 1; /* a look at the witnesses was put off (watched_events()) */
}

/* Sleep as R plans. One thread sleeps on every link's doorbell (and the kick); where they cannot
 * be waited on together, on the first one's, the others polled every 25 ms. The helper does not
 * stand by (spin) after answering an Apply, although the next client's Apply would then find it
 * awake: a busy CPU made the wake-up of the server's accept() an interprocessor interrupt where
 * an idle one polls, and on the development VM that standby (300 µs, 8d79e8e) cost set-ups
 * a fifth of their rate and the client a quarter more CPU (bench/README, "Set-up without the
 * helper's standby"). */
static void helper_sleep(const struct helper_round *r)
{
	struct tp_link *first = r->first;
	int rc = 0;

	if (first) {
		rc = ntb_db_wait_many(r->wait_on, r->wait_seen, r->nwait,
				      &g_helper_kick, r->kick_seen, r->slice);
		if (rc == -ENOTSUP)
			rc = ntb_db_wait(first->ntb, r->seen,
					 first->next_link && r->slice > 25 ? 25 : r->slice);
	}
	if (!first || rc == -ENOLINK || rc == -EINVAL || rc == -ENOTSUP)
		usleep(first ? (useconds_t)r->slice * 1000u : 100000u);
}

/* Under tp_links_lock: has a link's doorbell rung since the last service? Notes each value read
 * (db_early) for helper_rung_since(). */
static bool helper_rung(void)
{
	bool rung = false;

	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		l->db_early = ntb_db_read(l->ntb);
		rung |= l->db_early != l->db_seen;
	}
	return rung;
}

/* Under tp_links_lock, after helper_service(): did a doorbell ring after helper_rung() read it
 * (the service took that ring as seen: its sleeper, woken by the early event and asleep again,
 * needs another)? */
static bool helper_rung_since(void)
{
	for (struct tp_link *l = tp_links; l; l = l->next_link)
		if (l->db_seen != l->db_early)
			return true;
	return false;
}

/* Under tp_links_lock: serve every link at NOW after a sleep (doorbells read, link_service()); true
 * when one rang. */
static bool helper_service(uint64_t now)
{
	bool signal = false;

	watched_events();
	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		uint32_t db = ntb_db_read(l->ntb);
		bool rung = db != l->db_seen;

		if (rung)
			ntb_link_beat_soon(l->ntb); /* (a new peer process may wait for it) */
		l->db_seen = db;
		signal |= rung;
		link_service(l, now, rung);
	}
	return signal;
}

static _Atomic int g_helper_tid; /* the helper thread's tid, 0 before it runs */
static __thread bool t_helper;   /* this thread is the helper */

bool tp_on_helper(void)
{
	return t_helper;
}

int tp_helper_tid(void)
{
	/* relaxed: an id for diagnostics and tests */
	return atomic_load_explicit(&g_helper_tid, memory_order_relaxed);
}

/* The helper thread is SCHED_BATCH at the nice of the thread that started it: a woken batch
 * thread does not preempt the running one (the scheduler's tick does), and it keeps its full
 * share of a busy CPU. Woken by every doorbell ring, as SCHED_OTHER it preempted the program's
 * thread on the same CPU (a process pinned to one CPU, or a busy machine) in the middle of what
 * that thread was doing for the same ring, a retransmission among them (50-70 µs per Retry on
 * a VM). At nice +10 instead (c07ae94) it did not preempt either, but on a CPU kept busy by
 * nice-0 threads it got a tenth of their share: a 20-connection move to another link took
 * over a second, and its heartbeat went stale long enough for the peer to take the surviving
 * link for down and send the moves to TCP (tests/run_load.sh, make check-load). A thread may
 * always switch between SCHED_OTHER and SCHED_BATCH; raising its nice back would need
 * CAP_SYS_NICE. Only a SCHED_OTHER thread switches: a real-time program's helper stays
 * real-time. A failure leaves it as it is. */
static void helper_set_batch(void)
{
	struct sched_param sp = { .sched_priority = 0 };

	/* (0: the calling thread; Linux schedules threads, not processes) */
	if (sched_getscheduler(0) == SCHED_OTHER)
		(void)sched_setscheduler(0, SCHED_BATCH, &sp);
}

static void *helper_main(void *arg)
{
	struct helper_round r;

	(void)arg;
	t_helper = true;
	helper_set_batch();
	atomic_store_explicit(&g_helper_tid, (int)gettid(), memory_order_relaxed); /* (an id) */
	for (;;) {
		bool signal;

		pthread_mutex_lock(&tp_links_lock);
		/* (tp_link_probe_soon(): a flag set from here on is seen by the plan, or kicks) */
		atomic_store_explicit(&g_helper_slice, INT_MAX, memory_order_seq_cst);
		atomic_thread_fence(memory_order_seq_cst);
		helper_plan(&r);
		/* relaxed: a kick after helper_plan()'s read of the kick count ends the sleep
		 * anyway; this only spares one */
		atomic_store_explicit(&g_helper_slice, r.slice, memory_order_relaxed);
		g_helper_waiting = true; /* tp_link_close() waits until we are off the links */
		g_helper_round++;
		pthread_mutex_unlock(&tp_links_lock);
		helper_sleep(&r);
		atomic_store_explicit(&g_helper_slice, 0, memory_order_relaxed); /* (awake) */
		uint64_t now = tp_now_ms();

		pthread_mutex_lock(&tp_links_lock);
		g_helper_waiting = false;
		/* A doorbell: the event first, then the pass. What a poll or epoll sleeper wakes for
		 * is news in the slots, which it reads itself; what a pass changes for it signals
		 * on its own (tp_event_signal()). After the pass, the sleeper woke only when it was
		 * done: an epoll server's request waited for every link's pass. */
		bool early = helper_rung();

		if (early)
			event_write(); /* (doorbells: news for epoll sets is in the slots) */
		signal = helper_service(now);
		if (early)
			signal = helper_rung_since();
		pthread_mutex_unlock(&tp_links_lock);
		if (signal)
			event_write();
		tp_finwait_service();
	}
	return NULL;
}


/* fork, before: every connection gains a reference (the child inherits it, as a kernel
 * socket's file reference) and loses its owner: the first process to use it afterwards drives
 * it (single-owner rule, tp_int.h). The lists and every connection's locks stay held across
 * fork, so that both copies are the same consistent state (order as in link_service():
 * tp_links_lock, conns_lock, then a connection's locks). */
static void atfork_prepare(void)
{
	uint64_t now = tp_now_ms();

	/* (first: the FIN-wait service holds sockets it took off its list until it closed them,
	 * which a child would inherit and never close; the child re-initialises the lock) */
	tp_finwait_fork_lock(true);
	pthread_mutex_lock(&tp_links_lock);
	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		pthread_mutex_lock(&l->conns_lock);
		for (struct tp_conn *c = l->conns; c; c = c->next) {
			tp_mutex_lock(&c->tx_lock);
			tp_mutex_lock(&c->rx_lock);
			/* acquire: pairs with the store of closed in tp_close() and the release
			 * store of slot_gone in tp_conn_free_slot() */
			if (atomic_load_explicit(&c->closed, memory_order_acquire) ||
			    atomic_load_explicit(&c->slot_gone, memory_order_acquire))
				continue; /* lingering here: stays ours, the child drops it; or a shell
					   * (moved to another link: its entry is another's now) */
			/* the release held back by the lazy rx_release() goes out now: after the
			 * fork nobody may drive this connection (no timers) for a while */
			/* acquire: pairs with the release store in tp_conn_own() (owned) and the
			 * CAS in tp_set_error_at() (error) */
			if (atomic_load_explicit(&c->owned, memory_order_acquire) &&
			    !atomic_load_explicit(&c->error, memory_order_acquire)) {
				tp_rx_flush_feedback(c);
				tp_tx_flush_held_locked(c); /* and a merged message held back */
			}
			/* acq_rel: pairs with the decrements in shared_elsewhere() (tp_close.c) */
			atomic_fetch_add_explicit(&c->ent->refs, 1, memory_order_acq_rel);
			/* release: pairs with the acquire loads of fork_ms in shared_elsewhere()
			 * and tp_entry_owned() */
			atomic_store_explicit(&c->ent->fork_ms, now, memory_order_release);
			/* both copies start unowned (the child inherits this); relaxed owned: this
			 * process's flag, under the connection's locks; release active: pairs with
			 * the CAS in tp_conn_own() of the first user */
			atomic_store_explicit(&c->owned, false, memory_order_relaxed);
			atomic_store_explicit(&c->ent->active, 0, memory_order_release);
		}
		/* last (a leaf lock): a set-up or a close in another thread may be taking a shadow
		 * from the pool or giving one back (tp_shadow_get()) */
		pthread_mutex_lock(&l->sh_lock);
	}
	tp_shadow_slab_atfork(0); /* (last: a leaf lock, no lock is taken under it) */
}

static void atfork_parent(void)
{
	tp_shadow_slab_atfork(1);
	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		pthread_mutex_unlock(&l->sh_lock);
		for (struct tp_conn *c = l->conns; c; c = c->next) {
			tp_mutex_unlock(&c->rx_lock);
			tp_mutex_unlock(&c->tx_lock);
		}
		pthread_mutex_unlock(&l->conns_lock);
	}
	pthread_mutex_unlock(&tp_links_lock);
	tp_finwait_fork_lock(false);
}

static void atfork_init(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, tp_atfork_child);
}

/* g_helper's copy for tp_helper_on(), readable under any lock (a pass holds tp_links_lock) */
static _Atomic bool g_helper_on;

bool tp_helper_on(void)
{
	/* relaxed: a hint (a witness's watch added at once or by a later pass) */
	return atomic_load_explicit(&g_helper_on, memory_order_relaxed);
}

bool tp_helper_running(void)
{
	/* Not under tp_links_lock, which the helper holds for its whole round: a close handing
	 * its socket to the helper (tp_close_after_fin()) waited there for the round's passes,
	 * hundreds of microseconds under a connection-rate load. Relaxed: set with g_helper, and a
	 * helper once running stays (a stale false only makes the caller wait for the FIN itself). */
	return atomic_load_explicit(&g_helper_on, memory_order_relaxed);
}

void tp_helper_start(void)
{
	pthread_t t;
	pthread_attr_t a;

	if (g_helper || g_helper_held)
		return;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 * 1024);
	/* The helper takes none of the program's signals: the kernel gives a process-directed one
	 * (kill's SIGTERM, SIGINT, SIGALRM...) to any thread that does not block it, and the
	 * program's handler would run on our thread (iperf3's SIGTERM handler did, racing with
	 * its main thread: check-tsan). The new thread inherits the mask; the faults of its own
	 * accesses (SIGBUS of a truncated link file, SIGSEGV...) stay deliverable. */
	sigset_t all, old;

	sigfillset(&all);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&t, &a, helper_main, NULL) == 0) {
		g_helper = true;
		atomic_store_explicit(&g_helper_on, true, memory_order_relaxed);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
}

void tp_helper_hold(bool hold)
{
	pthread_mutex_lock(&tp_links_lock);
	/* A running helper stays, and is not held for a forked child either (its connections
	 * need one: tp_atfork_child()). */
	g_helper_held = hold && !g_helper;
	if (!hold && tp_links)
		tp_helper_start();
	pthread_mutex_unlock(&tp_links_lock);
}

/* Under the host lock (and conns_lock, or in a forked child's one thread): ME among the holders
 * of each connection of L's list (a forked child's: its inherited ones). */
static void owners_add(struct tp_link *l, int me)
{
	for (struct tp_conn *c = l->conns; c; c = c->next)
		/* acquire: pairs with the release store of slot_gone in tp_conn_free_slot() (a
		 * shell, moved to another link: its entry is another connection's now) */
		if (!atomic_load_explicit(&c->slot_gone, memory_order_acquire))
			tp_entry_own(l, c->ent, me);
}

/* The helper: a forked child's holder names that its fork could not add (the host lock's
 * holder was stopped: tp_atfork_child()), once the lock is free. Try-locks (conns_lock, then
 * the host lock: never waited for under the former). */
static void owners_later(struct tp_link *l)
{
	/* relaxed: a flag set once at fork, cleared here */
	if (!atomic_load_explicit(&l->owners_due, memory_order_relaxed))
		return;
	if (pthread_mutex_trylock(&l->conns_lock))
		return;
	if (tp_host_trylock(l)) {
		owners_add(l, tp_self_pid());
		tp_host_unlock(l);
		atomic_store_explicit(&l->owners_due, false, memory_order_relaxed);
	}
	pthread_mutex_unlock(&l->conns_lock);
}

void tp_atfork_child(void)
{
	int me;

	tp_proc_forked(); /* first: the cached pid is the parent's */
	me = tp_self_pid();
	tp_fo_atfork_child();
	tp_finwait_atfork_child();
	tp_shadow_slab_atfork(2);
	pthread_mutex_init(&tp_links_lock, NULL);
	g_helper = false;
	atomic_store_explicit(&g_helper_on, false, memory_order_relaxed);
	g_helper_waiting = false;
	if (g_efd >= 0) {
		/* own event counter, same fd number (callers may have cached it) */
		int nfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

		if (nfd >= 0) {
			raw_dup3(nfd, g_efd, O_CLOEXEC);
			raw_close(nfd);
		}
	}
	for (struct tp_link *l = tp_links; l; l = l->next_link) {
		pthread_mutex_init(&l->conns_lock, NULL);
		pthread_mutex_init(&l->sh_lock, NULL);
		/* a set-up's tp_link_reap() in another thread of the parent may have been running */
		atomic_store_explicit(&l->pass_busy, false, memory_order_relaxed); /* (one thread) */
		for (struct tp_conn **pp = &l->conns, *c; (c = *pp); pp = &c->next) {
			/* relaxed: the child's one thread (state copied at fork) */
			while (c && atomic_load_explicit(&c->closed, memory_order_relaxed)) {
				/* the parent's lingering close: not ours (left allocated: its DMA
				 * queue belongs to the parent's threads). Our copy of its kept
				 * kernel socket goes: nobody here would close it, and the socket's
				 * FIN would wait for our exit. (The parent keeps its own.) */
				if (c->keep_fd >= 0)
					raw_close(c->keep_fd);
				*pp = c = c->next;
			}
			if (!c)
				break;
			c->pin_owner = NULL; /* (a parent's pass may have pinned it: its thread is
					      * not here) */
			tp_mutex_init(&c->tx_lock);
			tp_mutex_init(&c->rx_lock);
			tp_mutex_init(&c->witness_lock); /* a look may have been running */
			/* relaxed: the child's one thread */
			int w1 = atomic_load_explicit(&c->witness_fd1, memory_order_relaxed);

			if (w1)
				tp_fo_watch(c, w1 - 1); /* our own set */
			atomic_store_explicit(&c->watch_due_ms, 0, memory_order_relaxed); /* (so) */
			/* c->owned is false: atfork_prepare() cleared it */
		}
		tp_act_atfork_child(l); /* (the list without the parent's lingering ones) */
		/* (its own event counter, published again when a sleeper asks, under its own
		 * claim slot: without one, not at all) */
		atomic_store_explicit(&l->ev_slot, -2, memory_order_relaxed);
		/* (fork copies no page table of a shared mapping: the child maps its rings anew) */
		memset((void *)l->ring_mapped, 0, sizeof(l->ring_mapped));
		/* Our name among the inherited connections' holders, under the host lock; a
		 * holder of it that is a stopped process would keep this child (a server's worker,
		 * a backend per connection) in fork() for as long: the helper adds it later then
		 * (owners_later()) */
		if (tp_host_lock_within(l, TP_HOST_WAIT_MS)) {
			owners_add(l, me);
			tp_host_unlock(l);
		} else {
			atomic_store_explicit(&l->owners_due, true, memory_order_relaxed);
			LOG(LL_INFO, "transport: forked child: the host lock is held by a stopped "
			    "process: this process is named among its connections' holders later");
		}
		/* Our own claim on the link's side, in the parent's session (after the host lock:
		 * the side lock is never taken under it). Without one, a parent that exits (a
		 * daemon's first process) left the side with no live process while we used it:
		 * the next process of the host to open the link started a new session, and our
		 * connections were lost on both hosts; our doorbell sleepers were also counted in
		 * the parent's slot, taken back at its death. Without a free slot (96 per side) we
		 * go on unclaimed, as before. */
		int rc = ntb_link_atfork_child(l->ntb);

		if (rc)
			LOG(LL_INFO, "transport: forked child: no claim of its own on the link's "
			    "side (%s): %s", strerror(-rc), ntb_strerror_detail());
	}
	if (tp_links)
		tp_helper_start();
}

bool tp_link_ring_prefault(struct tp_link *l, bool out, uint32_t ring, uint64_t off, uint32_t q,
			   uint32_t pos, uint32_t len)
{
	if (!ring || ring > TP_MAX_CONTEXTS || q < TP_RING_PARTS)
		return true;
	static_assert(64u % TP_RING_PARTS == 0, "a ring's bits in one word");
	uint32_t bit0 = (ring - 1u) * TP_RING_PARTS, part = q / TP_RING_PARTS;
	_Atomic uint64_t *w = &l->ring_mapped[out ? 0 : 1][bit0 / 64u];
	uint64_t all = ((UINT64_C(1) << TP_RING_PARTS) - 1u) << (bit0 % 64u);
	/* relaxed (all): a hint, mapping twice costs a system call, nothing more */
	uint64_t have = atomic_load_explicit(w, memory_order_relaxed);
	uint32_t p = pos & (q - 1u), first = p / part;
	uint32_t cnt = len >= q ? TP_RING_PARTS : (p % part + len + part - 1u) / part;

	for (uint32_t k = 0; k < cnt && k < TP_RING_PARTS && (have & all) != all; k++) {
		uint32_t i = (first + k) % TP_RING_PARTS;
		uint64_t bit = UINT64_C(1) << (bit0 % 64u + i);

		if (have & bit)
			continue;
		ntb_prefault(l->ntb, out, off + (uint64_t)i * part, part);
		have = atomic_fetch_or_explicit(w, bit, memory_order_relaxed) | bit;
	}
	return (have & all) == all;
}

/* --- links ----------------------------------------------------------------------------------- */

int tp_geometry(const struct tp_params *p, uint64_t window, struct tp_geometry *g)
{
	uint32_t n = p->inline_slots, slot, q, conns;
	uint64_t avail, pool_off;

	if (p->contexts == 0 || p->contexts > TP_MAX_CONTEXTS || n < 2 || (n & (n - 1)) ||
	    n > 65536 || p->inline_max > TP_INLINE_MAX || p->connections > TP_MAX_CONNS)
		return -EINVAL;
	if (window <= TP_OFF_SLOTS)
		return -ENOSPC;
	if (window > TP_WINDOW_MAX) {
		/* (ntb/ refuses these already; offsets here are sized for this bound) */
		LOG(LL_DEBUG, "transport: window of %llu bytes: more than the %llu the transport "
		    "drives", (unsigned long long)window, (unsigned long long)TP_WINDOW_MAX);
		return -EFBIG;
	}
	if (p->queue_size && ((p->queue_size & (p->queue_size - 1)) || p->queue_size < 4096))
		return -EINVAL;
	slot = TP_SLOT_RINGS + n * 128u;
	avail = window - TP_OFF_SLOTS;
	conns = p->connections;
	if (!conns) {
		/* as many as a quarter of the window holds (as many as the pool's rings leave room
		 * for when queue_size is set), up to TP_MAX_CONNS */
		uint64_t room = avail / 4u;

		if (p->queue_size) {
			uint64_t rings = (uint64_t)p->queue_size * p->contexts + 4096u;

			room = rings < avail ? avail - rings : 0;
		}
		room /= slot + 8u; /* (and its NEWS word) */
		conns = room > TP_AUTO_CONNS ? TP_AUTO_CONNS : room ? (uint32_t)room : 1u;
	}
	/* the slots, then their NEWS words right below the pool (tp_news_off()) */
	pool_off = ALIGN_UP(TP_OFF_SLOTS + (uint64_t)conns * (slot + 8u), (uint64_t)4096);
	if (pool_off >= window)
		return -ENOSPC;
	avail = (window - pool_off) / p->contexts;
	if (avail < 4096u)
		return -ENOSPC;
	for (q = 4096; (uint64_t)q * 2 <= avail && q < (1u << 30); q *= 2)
		;
	if (p->queue_size) {
		if (p->queue_size > q) {
			LOG(LL_DEBUG, "transport: queue_size %u does not fit: window %llu / %u "
			    "contexts beside %u connections leaves %u", p->queue_size,
			    (unsigned long long)window, p->contexts, conns, q);
			return -ENOSPC;
		}
		q = p->queue_size;
	} else if (q > (1u << 20)) {
		q = 1u << 20;
	}
	g->contexts = p->contexts;
	g->inline_slots = n;
	g->queue_size = q;
	g->slot_size = slot;
	g->connections = conns;
	g->pool_off = pool_off;
	return 0;
}

static int link_geometry(struct tp_link *l)
{
	struct tp_geometry g;
	int rc;

	if (l->out_size != l->in_size)
		return -ENOSPC;
	if ((rc = tp_geometry(&l->params, l->in_size, &g)))
		return rc;
	l->contexts = g.connections;
	l->geom.inline_n = g.inline_slots;
	l->geom.log2n = (uint32_t)__builtin_ctz(g.inline_slots);
	l->geom.qsize = g.queue_size;
	l->geom.pool_off = g.pool_off;
	l->geom.pool_n = g.contexts;
	l->slot_size = g.slot_size;
	return 0;
}

int tp_link_open(const struct ntb_link_params *lp, const struct tp_params *tpp,
		 struct tp_link **ret_link)
{
	struct tp_link *l = calloc(1, sizeof(*l));
	int rc;

	if (!l)
		return -ENOMEM;
	pthread_once(&g_atfork_once, atfork_init);
	if (tpp)
		l->params = *tpp;
	else
		tp_params_init(&l->params);
	if (l->params.max_err == 0)
		l->params.max_err = 1;
	if (l->params.peer_timeout_ms == 0)
		l->params.peer_timeout_ms = 30000;
	l->host_fd = -1;
	atomic_init(&l->ev_slot, -2);
	l->down_grace_ms = lp->link_timeout_ms ? lp->link_timeout_ms : 500u; /* dead at 2x */
	pthread_mutex_init(&l->conns_lock, NULL);
	pthread_mutex_init(&l->sh_lock, NULL);
	tp_act_link_init(l);
	rc = ntb_link_open(lp, &l->ntb);
	if (rc)
		goto err_free;
	l->in = ntb_in_window(l->ntb, &l->in_size);
	l->out_size = ntb_out_size(l->ntb);
	l->out_direct = ntb_out_direct(l->ntb);
	rc = link_geometry(l);
	if (rc)
		goto err_ntb;
	/* The windows' control areas (mailboxes, offers, listener bitmaps: below TP_OFF_SLOTS),
	 * which every process uses from its first connection on, mapped in one call each: a new
	 * process faulted on them page by page, a dozen traps at its first connect */
	ntb_prefault(l->ntb, true, 0, TP_OFF_SLOTS);
	ntb_prefault(l->ntb, false, 0, TP_OFF_SLOTS);
	rc = ntb_link_enable(l->ntb);
	if (rc)
		goto err_ntb;
	rc = tp_host_open(l, lp);
	if (rc)
		goto err_ntb;
	if (tp_link_admin_path(lp, l->admin_path, sizeof(l->admin_path)))
		l->admin_path[0] = '\0'; /* (too long: never down by admin) */
	/* relaxed: a flag (the link is not published yet) */
	atomic_store_explicit(&l->admin_down, tp_link_admin_down(l), memory_order_relaxed);
	l->db_seen = ntb_db_read(l->ntb);
	/* this process's first maintenance look 100 ms from now, not at the helper's first wake
	 * (a short-lived client's first connection waited for that pass under the host lock); the
	 * host's own period decides whether it runs then (struct tp_host's maint_ms) */
	l->last_maint_ms = tp_now_ms() - 400u;
	l->geom.slot_off = TP_OFF_SLOTS;
	tp_link_refresh(l);
	event_fd_make();
	pthread_mutex_lock(&tp_links_lock);
	l->next_link = tp_links;
	tp_links = l;
	tp_helper_start();
	pthread_mutex_unlock(&tp_links_lock);
	helper_kick(); /* a running helper sleeps on the links it knew: this one too */
	tp_host_lock(l);
	tp_listen_publish(l, true);
	tp_host_unlock(l);
	*ret_link = l;
	return 0;
err_ntb:
	ntb_link_close(l->ntb);
err_free:
	tp_act_link_free(l);
	free(l);
	return rc;
}

void tp_link_close(struct tp_link *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&tp_links_lock);
	for (struct tp_link **pp = &tp_links; *pp; pp = &(*pp)->next_link) {
		if (*pp == l) {
			*pp = l->next_link;
			break;
		}
	}
	for (uint64_t round = g_helper_round; g_helper_waiting && g_helper_round == round;) {
		helper_kick(); /* it sleeps on every link's doorbell: off them, and not on L again */
		pthread_mutex_unlock(&tp_links_lock);
		usleep(200);
		pthread_mutex_lock(&tp_links_lock);
	}
	pthread_mutex_unlock(&tp_links_lock);
	tp_link_set_group(l, 0);
	while (l->conns)
		tp_abort(l->conns);
	tp_conn_cache_drain(l);
	tp_act_link_free(l);
	tp_host_lock(l);
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++)
		if (l->host->listen[i].pid == tp_self_pid())
			l->host->listen[i].count = 0;
	tp_listen_publish(l, false);
	tp_host_unlock(l);
	tp_host_close(l);
	ntb_link_close(l->ntb);
	free(l);
}

bool tp_link_is_up(struct tp_link *l)
{
	return tp_link_refresh(l);
}

int tp_link_load(struct tp_link *l)
{
	/* relaxed: the helper's verdict, a flag */
	if (!tp_link_refresh(l) || atomic_load_explicit(&l->region_bad, memory_order_relaxed) ||
	    tp_link_admin_down(l))
		return -ENETDOWN;
	/* relaxed: a hint; the pool's count changes under the host lock, a placement racing
	 * with another process's set-up may both pick the same link */
	uint32_t free_num = tp_host_free_conns(l->host); /* (offers are no load) */

	return free_num < l->host->contexts ? (int)(l->host->contexts - free_num) : 0;
}

void tp_link_set_self_rung(struct tp_link *l)
{
	/* relaxed: a hint read by the helper (helper_first()) */
	atomic_store_explicit(&l->self_rung, true, memory_order_relaxed);
}

struct ntb_link *tp_link_ntb(struct tp_link *l)
{
	return l->ntb;
}

