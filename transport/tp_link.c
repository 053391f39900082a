/* SPDX-License-Identifier: MIT */
/* Links of this process, the per-process helper thread (heartbeat, mailbox, timers, doorbell →
 * event fd), parameters and fork support. */
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
#include "util/rawsys.h"

void tp_params_init(struct tp_params *p)
{
	memset(p, 0, sizeof(*p));
	p->queue_size = 0;          /* auto: the largest power of two the window allows, ≤ 1 MiB */
	p->inline_slots = 64;
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
	}
	return "unknown";
}

/* --- process state ------------------------------------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* links list, helper start */
static struct tp_link *g_links;
static int g_efd = -1;
static bool g_helper;
static bool g_helper_held;            /* tp_helper_hold() (under g_lock, or before threads) */
static bool g_helper_waiting;         /* the helper sleeps on the links' doorbells (under
				       * g_lock): tp_link_close() waits until it is off them */
static uint64_t g_helper_round;       /* its sleeps so far (under g_lock): a later one is on a
				       * list without the link being closed */
/* Bumped (and futex-woken) to make the helper look at g_links again: a link added or being
 * closed. Process-private; the helper sleeps on it beside the doorbells (ntb_db_wait_many()). */
static _Atomic uint32_t g_helper_kick;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

int tp_event_fd(void)
{
	pthread_mutex_lock(&g_lock);
	if (g_efd < 0)
		g_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pthread_mutex_unlock(&g_lock);
	return g_efd < 0 ? -EMFILE : g_efd;
}

void tp_event_ack(void)
{
	uint64_t v;

	if (g_efd >= 0 && raw_read(g_efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending */
	}
}

void tp_event_signal(void)
{
	uint64_t one = 1;

	if (g_efd >= 0 && raw_write(g_efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: counter saturated, already readable */
	}
}

void tp_conn_register(struct tp_conn *c)
{
	pthread_mutex_lock(&c->link->conns_lock);
	c->next = c->link->conns;
	c->link->conns = c;
	pthread_mutex_unlock(&c->link->conns_lock);
}

static __thread bool t_pass_locked; /* this thread runs a pass holding conns_lock */
/* (its address is this thread's token in tp_conn.pin_owner) */

bool tp_link_pass_locked(void)
{
	return t_pass_locked;
}

void tp_conn_unregister(struct tp_conn *c)
{
	pthread_mutex_lock(&c->link->conns_lock);
	/* a pass drives C's failover without conns_lock: wait until it is done with C (it takes no
	 * lock a caller here holds), unless this thread is that pass, which then forgets C */
	while (c->pin_owner) {
		if (c->pin_owner == &t_pass_locked) {
			*c->pin_slot = NULL;
			c->pin_owner = NULL;
			break;
		}
		pthread_mutex_unlock(&c->link->conns_lock);
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&c->link->conns_lock);
	}
	for (struct tp_conn **pp = &c->link->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	pthread_mutex_unlock(&c->link->conns_lock);
}

void tp_conn_free_slot(struct tp_conn *c)
{
	struct tp_link *l = c->link;

	tp_host_lock(l);
	tp_slot_free(l, c->slot);
	tp_host_unlock(l);
	atomic_store(&c->slot_gone, true);
}

/* Drop this process's ownership of C's context; the last owner frees it. ST_FLAGS (RST/GONE)
 * tell the peer when the connection did not end with both FINs. Frees C. */
void tp_conn_release(struct tp_conn *c, uint32_t st_flags)
{
	struct tp_link *l = c->link;

	/* a shell (moved to another link): only the object is left */
	if (atomic_load(&c->slot_gone)) {
		tp_conn_unregister(c);
		tp_fo_free(c);
		tp_conn_recycle(c);
		return;
	}
	struct tp_host_entry *e = c->ent;
	int me = tp_self_pid();
	/* acquire: pairs with the release store in tp_conn_own() / conn_new() */
	bool owned = __atomic_load_n(&c->owned, __ATOMIC_ACQUIRE);
	int32_t active;
	bool last = true;

	tp_conn_unregister(c);
	tp_host_lock(l);
	for (int i = 0; i < TP_OWNERS; i++)
		if (e->owners[i] == me)
			e->owners[i] = 0;
	/* acquire: pairs with the CAS in tp_conn_own() (a driver not in the owner list) */
	active = __atomic_load_n(&e->active, __ATOMIC_ACQUIRE);
	last = !tp_entry_owned(e) && (active == me || !tp_pid_alive(active));
	/* The owner ends the connection for everyone (nobody else can drive it); others only when
	 * they are the last holder. */
	if (st_flags && (last || owned))
		tp_conn_st_add(c, st_flags);
	if (last) {
		tp_slot_free(l, c->slot);
	} else if (e->pid == me) {
		for (int i = 0; i < TP_OWNERS; i++)
			if (e->owners[i])
				e->pid = e->owners[i];
	}
	tp_host_unlock(l);
	tp_fo_free(c);
	if (c->keep_fd >= 0) {
		raw_close(c->keep_fd); /* the kernel's FIN (after any failover tail) */
		c->keep_fd = -1;
	}
	tp_conn_recycle(c);
}

/* Has the peer acknowledged C's FIN (and so every byte before it)? (tx side state) */
static bool fin_acked(const struct tp_conn *c)
{
	return c->fin_sent && c->fb_ack - c->fin_msn - 1u < (1u << 31);
}

/* A closed connection kept a duplicate of its kernel socket for a failover (tp_close()); once
 * its FIN and every byte before it are acknowledged nothing is left to hand over: close it,
 * so that the kernel's FIN goes out as soon as it would have without the library (the peer's
 * close() waits for it: preload/pl_sock.c, await_peer_fin()). Trylocks: the helper's pass. */
static void keep_release_if_acked(struct tp_conn *c)
{
	bool acked;

	if (c->keep_fd < 0 || tp_fo_get(c) || tp_mutex_trylock(&c->tx_lock))
		return;
	acked = fin_acked(c);
	tp_mutex_unlock(&c->tx_lock);
	if (!acked || tp_mutex_trylock(&c->witness_lock))
		return;
	if (!tp_fo_get(c) && c->keep_fd >= 0) { /* (under witness_lock: fo_dup_socket()) */
		raw_close(c->keep_fd);
		c->keep_fd = -1;
	}
	tp_mutex_unlock(&c->witness_lock);
}

/* Milliseconds since C was closed. NOW was read before the pass, and tp_close() may have
 * stamped closed_ms since (an age of 2^64 - 1 ms released a connection closed a moment ago
 * as gone, before its last bytes were delivered). */
static uint64_t closed_age(const struct tp_conn *c, uint64_t now)
{
	return clock_age_ms(now, c->closed_ms);
}

/* Is a closed connection finished: FIN acknowledged and the peer's FIN seen (or gone)? */
static bool linger_done(struct tp_conn *c, uint64_t now, uint32_t *ret_flags)
{
	bool acked, peer_done;

	*ret_flags = 0;
	if (atomic_load(&c->error))
		return true;
	int fo = tp_fo_get(c);

	if (fo == TP_FO_LINKED)
		return tp_fo_idle(c); /* (a tp_close() finishing under the move's lock: next time) */
	if (fo == TP_FO_DONE || fo == TP_FO_FAILED)
		return true; /* the kernel socket carries (or ended) the rest */
	if (fo == TP_FO_RUN)
		return closed_age(c, now) > 5000u + c->link->params.setup_timeout_ms;
	/* (a silent peer, maybe stopped, is waited for as long as its open connections are) */
	uint64_t bound = 5000u + c->link->params.setup_timeout_ms;

	if (ntb_link_peer_silent(c->link->ntb) && bound < c->link->params.peer_timeout_ms)
		bound = c->link->params.peer_timeout_ms;
	if (closed_age(c, now) > bound) {
		LOG(LL_DEBUG, "transport: slot %u: unfinished %llu ms after close: gone", c->slot,
		    (unsigned long long)closed_age(c, now));
		*ret_flags = TP_ST_GONE;
		return true;
	}
	acked = fin_acked(c);
	peer_done = c->fin_rcvd_v;
	if (tp_conn_peer_lost(c))
		return true;
	/* (data for closed C, which had none unread when it closed: tp_close(); a busy receive
	 * lock is looked at again on the next pass) */
	if (tp_rx_unread(c, true)) {
		LOG(LL_DEBUG, "transport: slot %u: data arrived after close: reset", c->slot);
		*ret_flags = TP_ST_RST; /* as the kernel answers data for a closed socket */
		return true;
	}
	if (acked && peer_done)
		return true;
	if (acked && closed_age(c, now) > 1000u) {
		LOG(LL_DEBUG, "transport: slot %u: no FIN from the peer %llu ms after close: gone",
		    c->slot, (unsigned long long)closed_age(c, now));
		*ret_flags = TP_ST_GONE; /* we stopped reading: the peer's later sends fail */
		return true;
	}
	return false;
}

/* Tick the link and cache its state for the data path (tp_conn_peer_lost()). */
bool tp_link_refresh(struct tp_link *l)
{
	bool up = ntb_link_tick(l->ntb);
	uint64_t now = tp_now_ms();

	uint64_t since = 0;

	if (up) {
		/* while down the peer epoch reads 0: keep the last one seen */
		atomic_store(&l->peer_epoch, ntb_link_peer_epoch(l->ntb));
		atomic_store(&l->down_since_ms, 0);
	} else {
		uint64_t zero = 0;

		since = now;
		if (!atomic_compare_exchange_strong(&l->down_since_ms, &zero, now))
			since = zero; /* the first thread to see it down set the time */
	}
	/* A stall shorter than the grace (a starved heartbeat on a loaded host) does not end
	 * connections: retransmission covers it. Down for longer: no new connection uses the
	 * link. Its connections are lost then too, unless the peer is only silent (its
	 * heartbeat stale, nothing announced): a process stopped (SIGSTOP, a debugger) or starved
	 * looks the same as a dead host, and a kernel TCP connection would wait for it. Those
	 * wait up to peer_timeout_ms; a peer process that died is seen sooner, through the TCP
	 * socket (witness_look()) or its host's reclaim (GONE). */
	bool grace_up = up || clock_age_ms(now, since) < l->down_grace_ms;
	bool silent = !up && ntb_link_peer_silent(l->ntb);

	atomic_store(&l->up, grace_up);
	bool lost = atomic_load(&l->region_bad) ||
		    (!grace_up && (!silent || clock_age_ms(now, since) >= l->params.peer_timeout_ms));

	if (lost && !atomic_exchange(&l->lost, true))
		tp_event_signal(); /* sleeping waiters look again and see the loss */
	else if (!lost)
		atomic_store(&l->lost, false);
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

/* Publish the held (merged) messages of L's connections that this process drives. A busy tx
 * lock is a sender that publishes or looks at the feedback itself, unless it looked just
 * before this ring: then the helper comes back within TP_QUICK_PROBE_MS (probe_soon). */
static void flush_held(struct tp_link *l)
{
	pthread_mutex_lock(&l->conns_lock);
	for (struct tp_conn *c = l->conns; c; c = c->next) {
		/* acquire: pairs with the release store in tp_conn_own() (single-owner rule);
		 * relaxed held: a hint, read again under the lock */
		if (!__atomic_load_n(&c->owned, __ATOMIC_ACQUIRE) ||
		    !__atomic_load_n(&c->held, __ATOMIC_RELAXED))
			continue;
		if (!tp_tx_flush_held_ready(c))
			atomic_store(&l->probe_soon, true);
	}
	pthread_mutex_unlock(&l->conns_lock);
}

/* Returns true when it answered an Apply (a server host taking connections). QUICK: the helper
 * stood by and saw this doorbell at once (helper_spin()). */

static bool link_service(struct tp_link *l, uint64_t now, bool rung, bool quick)
{

	bool timers, lingering, applied = false;

	tp_link_refresh(l);
	if (now - l->admin_ms >= 100) {
		l->admin_ms = now;
		tp_link_admin_down(l);
		int mc = ntb_link_check_mapping(l->ntb);

		if (mc < 0 && mc != -EINVAL && mc != -ENOTSUP && !atomic_exchange(&l->region_bad, true))
			LOG(LL_DEBUG, "transport: link region no longer valid (%d)", mc);
	}
	if (rung || l->mbox_missed || now - l->last_mbox_ms >= 100) {
		if (!(rung || l->mbox_missed ? mbox_lock(l) : tp_host_trylock(l))) {
			l->mbox_missed = true; /* helper_main() comes back within 1 ms */
			goto timers;
		}
		l->mbox_missed = false;
		l->last_mbox_ms = now;
		l->mbox_quick = quick; /* (read under this lock by tp_mbox.c: reply()) */
		applied = tp_mbox_process(l) > 0;
		l->mbox_quick = false;
		bool maint = now - l->last_maint_ms >= 500;

		if (maint) {
			tp_host_reclaim(l);
			tp_listen_publish(l, true); /* every 500 ms: repairs lost words */
			tp_mbox_republish(l);
			l->last_maint_ms = now;
		}
		tp_host_unlock(l);
		if (maint)
			tp_conn_cache_trim(l); /* (not under the host lock: it frees memory) */
	}
timers:
	/* the peer rang: it may have released what our held messages wait for (tp_tx.c) */
	if (rung && atomic_load_explicit(&l->held_conns, memory_order_relaxed) > 0)
		flush_held(l);
	/* connection timers every 100 ms, and on doorbells (at most every 5 ms: a busy link
	 * rings often, the timers are O(connections)); every 5 ms while closed connections
	 * linger: they hold receive contexts (both hosts'), which a host making connections one
	 * after another runs short of when they are released only every 100 ms */
	lingering = atomic_load(&l->lingering);
	timers = now - l->last_timers_ms >= 100 || atomic_load(&tp_fo_active) > 0 ||
		 ((rung || lingering) && now - l->last_timers_ms >= 5) ||
		 (atomic_load(&l->probe_soon) && now - l->last_timers_ms >= TP_QUICK_PROBE_MS);
	if (!timers)
		return applied;
	l->last_timers_ms = now;
	if (!tp_link_conns_pass(l, now, false, false))
		atomic_store(&l->lingering, true); /* another thread's pass: come again soon */
	return applied;
}

/* The timers of the connections a pass pinned (in a failover), with conns_lock released; then
 * unpinned. One of them released from inside its failover drops out of PINS
 * (tp_conn_unregister()). */
static void pass_pinned(struct tp_link *l, struct tp_conn **pins, int n, uint64_t now)
{
	for (int i = 0; i < n; i++)
		if (pins[i])
			tp_conn_timers(pins[i], now);
	pthread_mutex_lock(&l->conns_lock);
	for (int i = 0; i < n; i++)
		if (pins[i])
			pins[i]->pin_owner = NULL;
	pthread_mutex_unlock(&l->conns_lock);
}

/* One pass over L's connections: their timers (only the closed ones' when CLOSED_ONLY), and the
 * release of closed ones that are finished (with FORCE, of every closed one: an unfinished one
 * with TP_ST_GONE). One pass at a time (the released ones leave the list for a moment): false
 * when another thread's pass runs. */
bool tp_link_conns_pass(struct tp_link *l, uint64_t now, bool closed_only, bool force)
{
	struct tp_conn *done = NULL, *c, *next;
	/* Connections in a failover: their timers run after conns_lock is released, for a move
	 * takes the other link's locks (under ours, a pass over that link moving a connection here
	 * would take them in the other order). Pinned meanwhile: not released by anyone. */
	struct tp_conn *pins[TP_PASS_PINS];
	int npins = 0;
	bool lingering = false, busy = false, quick = false, nudge = false;

	/* acq_rel: pairs with the release store that ends the other pass */
	if (!atomic_compare_exchange_strong(&l->pass_busy, &busy, true))
		return false;
	/* cleared first: a tp_close() from now on sets it again (pairs with its store) */
	atomic_store(&l->lingering, false);
	pthread_mutex_lock(&l->conns_lock);
	t_pass_locked = true;
	for (struct tp_conn **pp = &l->conns; (c = *pp);) {
		uint32_t fl;

		/* single-owner rule: nothing runs here for a connection another process drives (or
		 * nobody since a fork). Acquire: pairs with the release store in tp_conn_own(). */
		bool owned = __atomic_load_n(&c->owned, __ATOMIC_ACQUIRE);
		bool closed = atomic_load(&c->closed);

		if (closed_only && !closed) {
			pp = &c->next;
			continue;
		}
		fl = TP_ST_GONE;
		/* closed here while a fork cleared its owner: finish it unless the child took it */
		if (closed && !owned)
			owned = tp_conn_own(c) == 0;
		if (owned && tp_fo_get(c) != TP_FO_RUN)
			quick |= tp_conn_timers(c, now) != 0; /* (it may start a failover) */
		if (owned && tp_fo_get(c) == TP_FO_RUN) {
			if (npins < TP_PASS_PINS) {
				c->pin_owner = &t_pass_locked;
				c->pin_slot = &pins[npins];
				pins[npins++] = c;
			} else {
				quick = true; /* (the next pass, soon) */
			}
			lingering |= closed;
			pp = &c->next;
			continue;
		}
		if (closed && owned)
			keep_release_if_acked(c);
		bool finished = closed && owned && linger_done(c, now, &fl);

		if (closed && owned && !finished && !c->fin_nudged &&
		    closed_age(c, now) >= TP_FIN_NUDGE_MS) {
			c->fin_nudged = true; /* (our closing rang nothing: tp_write_st()) */
			nudge = true;
		}

		if (closed && owned && !finished && force) {
			LOG(LL_DEBUG, "transport: slot %u: release forced before its end", c->slot);
			fl = TP_ST_GONE; /* forced before the end: the peer learns it is gone */
		}
		if (closed && !owned)
			LOG(LL_DEBUG, "transport: slot %u: closed here, driven elsewhere", c->slot);
		if (closed && (!owned || finished || force)) {
			*pp = c->next;
			c->next = done;
			c->closed_ms = fl; /* reuse: flags for the release below */
			done = c;
			continue;
		}
		lingering |= closed;
		pp = &c->next;
	}
	t_pass_locked = false;
	pthread_mutex_unlock(&l->conns_lock);
	if (npins)
		pass_pinned(l, pins, npins, now);
	if (nudge)
		ntb_peer_db_ring(l->ntb); /* one ring for every connection that needs it */
	if (lingering)
		atomic_store(&l->lingering, true);
	/* quick probes still to come on some connection: keep coming (a sleeper may set it again
	 * meanwhile: a pass at most TP_QUICK_PROBE_MS later clears it once more) */
	if (!closed_only)
		atomic_store(&l->probe_soon, quick);
	for (c = done; c; c = next) {
		next = c->next;
		c->next = NULL;
		pthread_mutex_lock(&l->conns_lock);
		c->next = l->conns; /* tp_conn_release() unregisters */
		l->conns = c;
		pthread_mutex_unlock(&l->conns_lock);
		tp_conn_release(c, (uint32_t)c->closed_ms);
	}
	atomic_store(&l->pass_busy, false);
	return true;
}

/* Wake the helper from its sleep on the doorbells: g_links changed. */
static void helper_kick(void)
{
	/* release: pairs with the acquire load in ntb_db_wait_many() (the list change first) */
	atomic_fetch_add_explicit(&g_helper_kick, 1, memory_order_release);
	syscall(SYS_futex, &g_helper_kick, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void tp_link_reap(struct tp_link *l)
{
	tp_link_conns_pass(l, tp_now_ms(), true, false);
}

void tp_exec_release_closed(void)
{
	/* A pass of another thread's tp_link_reap() (the helper's run under g_lock) makes ours
	 * wait: up to ~100 ms in all. The list lock is taken with a deadline, as in
	 * tp_exit_drain(): a holder that never lets go leaves the connections as they were. */
	for (int tries = 0; tries < 200; tries++) {
		struct timespec abs;
		bool all = true;

		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_sec += 1;
		if (pthread_mutex_timedlock(&g_lock, &abs))
			return;
		for (struct tp_link *l = g_links; l; l = l->next_link)
			all &= tp_link_conns_pass(l, tp_now_ms(), true, true);
		pthread_mutex_unlock(&g_lock);
		if (all)
			return;
		usleep(500);
	}
}

/* After answering an Apply the helper stands by for TP_HELPER_SPIN_NS, watching the doorbell
 * instead of sleeping on it: a host taking connections one after another gets the next Apply
 * within that time, and its client waits for the answer (its TCP handshake is held until then)
 * — a futex sleep and wake-up on each were a good part of a set-up. Yielding between looks:
 * the process's own threads (its accept()) go first. Returns true when the doorbell moved. */
#define TP_HELPER_SPIN_NS 300000u

static bool helper_spin(struct ntb_link *n, uint32_t seen, uint64_t until_ns)
{
	while (clock_mono_ns() < until_ns) {
		for (int i = 0; i < 32; i++) {
			/* acquire inside ntb_db_read(): pairs with the ringer's release */
			if (ntb_db_read(n) != seen)
				return true;
			cpu_relax();
		}
		sched_yield();
	}
	return false;
}

/* Under g_lock: a peer's failover header arrived on the kernel socket of some connection
 * (tp_failover.c): that connection moves too. An end of stream there is witness_look()'s. */
static void watched_events(void)
{
	uint64_t ids[64];
	int n = tp_fo_watched_events(ids, 64);

	for (int k = 0; k < n; k++) {
		for (struct tp_link *l = g_links; l; l = l->next_link) {
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

	atomic_store(&l->admin_down, down);
	return down;
}

bool tp_link_admin_down_recent(struct tp_link *l)
{
	uint64_t now = tp_now_ms();
	uint64_t last = atomic_load_explicit(&l->admin_look_ms, memory_order_relaxed);

	if (last && now - last < TP_ADMIN_LOOK_MS)
		return atomic_load(&l->admin_down);
	atomic_store_explicit(&l->admin_look_ms, now, memory_order_relaxed);
	return tp_link_admin_down(l);
}

static void *helper_main(void *arg)
{
	uint64_t spin_until = 0; /* stand-by after an Apply (helper_spin()) */
	bool quick = false;      /* the stand-by saw the doorbell move */

	(void)arg;
	for (;;) {
		struct tp_link *first;
		struct ntb_link *wait_on[NTB_DB_WAIT_MAX];
		uint32_t seen = 0, wait_seen[NTB_DB_WAIT_MAX], kick_seen;
		unsigned nwait = 0;
		bool signal = false;
		int rc = 0;

		int slice = 100;

		pthread_mutex_lock(&g_lock);
		/* acquire: pairs with the release in helper_kick() (a kick before this load is not
		 * slept through: the list is read after it) */
		kick_seen = atomic_load_explicit(&g_helper_kick, memory_order_acquire);
		first = g_links;
		/* With several links (a loopback link's two sides), the one that receives Applies
		 * for this process's listeners is the one to sleep on, else one that this process's
		 * own sends do not ring; the others are polled. */
		for (struct tp_link *l = g_links; l; l = l->next_link)
			if (atomic_load_explicit(&l->listening, memory_order_relaxed) > 0) {
				first = l;
				break;
			}
		if (first && first == g_links && !atomic_load(&first->listening) &&
		    atomic_load(&first->self_rung))
			for (struct tp_link *l = g_links; l; l = l->next_link)
				if (!atomic_load(&l->self_rung)) {
					first = l;
					break;
				}
		if (first)
			seen = first->db_seen;
		/* Every link's doorbell is slept on together, but for one this process's own sends
		 * ring and where it has no listener (a loopback link's side 1 in a process that only
		 * connects): each send would wake us. Such a link is polled every 25 ms. */
		for (struct tp_link *l = g_links; l; l = l->next_link) {
			bool own = atomic_load(&l->self_rung) && !atomic_load(&l->listening);

			if (!own && nwait < NTB_DB_WAIT_MAX) {
				wait_on[nwait] = l->ntb;
				wait_seen[nwait++] = l->db_seen;
			} else if (slice > 25) {
				slice = 25; /* polled */
			}
			if (atomic_load(&l->lingering) && slice > 5)
				slice = 5; /* closed connections to finish (link_service()) */
			if (own && atomic_load(&l->held_conns) > 0 && slice > 1)
				slice = 1; /* polled, yet held messages wait for its rings */
			if (atomic_load(&l->probe_soon) && slice > (int)TP_QUICK_PROBE_MS)
				slice = (int)TP_QUICK_PROBE_MS; /* quick probes (tp_int.h) */
			if (l->mbox_missed)
				slice = 1; /* link_service() could not take a host lock */
		}
		if (atomic_load(&tp_fo_active) > 0 && slice > 2)
			slice = 2; /* failovers move bytes on kernel sockets (tp_failover.c) */
		if (tp_finwait_pending() && slice > 2)
			slice = 2; /* closes wait for the peer's FIN (tp_finwait.c) */
		g_helper_waiting = true; /* tp_link_close() waits until we are off the links */
		g_helper_round++;
		pthread_mutex_unlock(&g_lock);
		quick = first && spin_until && helper_spin(first->ntb, seen, spin_until);
		/* One thread sleeps on every link's doorbell (and the kick); where they cannot be
		 * waited on together, on the first one's, the others polled every 25 ms. */
		if (first && !quick) {
			rc = ntb_db_wait_many(wait_on, wait_seen, nwait, &g_helper_kick, kick_seen,
					      slice);
			if (rc == -ENOTSUP)
				rc = ntb_db_wait(first->ntb, seen,
						 first->next_link && slice > 25 ? 25 : slice);
		}
		spin_until = 0;
		if (!first || rc == -ENOLINK || rc == -EINVAL || rc == -ENOTSUP)
			usleep(first ? (useconds_t)slice * 1000u : 100000u);
		uint64_t now = tp_now_ms();

		pthread_mutex_lock(&g_lock);
		g_helper_waiting = false;
		watched_events();
		for (struct tp_link *l = g_links; l; l = l->next_link) {
			uint32_t db = ntb_db_read(l->ntb);
			bool rung = db != l->db_seen;

			l->db_seen = db;
			signal |= rung;
			if (link_service(l, now, rung, quick && l == first))
				spin_until = clock_mono_ns() + TP_HELPER_SPIN_NS;
		}
		pthread_mutex_unlock(&g_lock);
		if (signal)
			tp_event_signal();
		tp_finwait_service();
	}
	return NULL;
}

/* Does closed connection C still need this process at exit: its FIN not out yet, or data or the
 * FIN not acknowledged (only the sender can retransmit)? Under its tx lock; a busy lock counts
 * as pending (the holder is about to change it). */
static bool exit_pending(struct tp_conn *c)
{
	bool pending;

	/* nor for a peer down past the grace: a silent one may be stopped for long, and a
	 * kernel socket's close does not hold up exit either */
	if (atomic_load(&c->slot_gone) || atomic_load(&c->error) || tp_conn_peer_lost(c) ||
	    !atomic_load(&c->link->up))
		return false; /* (a shell: the connection it moved to is looked at on its link) */
	if (tp_mutex_trylock(&c->tx_lock))
		return true;
	pending = !fin_acked(c);
	tp_mutex_unlock(&c->tx_lock);
	return pending;
}

void tp_exit_announce(void)
{
	if (pthread_mutex_trylock(&g_lock))
		return;
	for (struct tp_link *l = g_links; l; l = l->next_link) {
		if (pthread_mutex_trylock(&l->conns_lock))
			continue;
		bool idle = l->conns == NULL;
		pthread_mutex_unlock(&l->conns_lock);
		if (idle)
			ntb_link_disable(l->ntb);
	}
	pthread_mutex_unlock(&g_lock);
}

int tp_exit_drain(int timeout_ms)
{
	uint64_t end = tp_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	int left;

	/* Only timers and looks, with trylocks below g_lock: this runs at exit, maybe while
	 * another thread (or a signal-interrupted caller) holds a lock, and must not hang. The
	 * helper thread releases the finished connections as usual. */
	for (;;) {
		uint64_t now = tp_now_ms();
		struct timespec abs;

		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_sec += (time_t)((end > now ? end - now : 0) / 1000u + 1u);
		if (pthread_mutex_timedlock(&g_lock, &abs))
			return -ETIMEDOUT;
		left = 0;
		for (struct tp_link *l = g_links; l; l = l->next_link) {
			tp_link_refresh(l);
			if (pthread_mutex_trylock(&l->conns_lock)) {
				left++; /* a pass or a set-up is on the list: look again */
				continue;
			}
			for (struct tp_conn *c = l->conns; c; c = c->next) {
				/* acquire: pairs with the release store in tp_conn_own() */
				if (!atomic_load(&c->closed) ||
				    !__atomic_load_n(&c->owned, __ATOMIC_ACQUIRE))
					continue;
				/* the FIN goes out when room frees (the helper may be asleep for
				 * its slice, or absent) */
				tp_conn_timers(c, now);
				if (exit_pending(c))
					left++;
			}
			pthread_mutex_unlock(&l->conns_lock);
		}
		pthread_mutex_unlock(&g_lock);
		if (!left || now >= end)
			break;
		usleep(1000);
	}
	return left;
}

/* At exit, for C (owned, on the list): 0 when the peer has acknowledged everything (and the
 * FIN of a closed one), 1 while it is acknowledging (feedback moved within TP_EXIT_STALL_MS:
 * a loaded peer is still worth waiting for, over the link), 2 when its bytes must go to the
 * kernel (no progress: a peer that stopped reading, or a lossy link). */
#define TP_EXIT_STALL_MS 200u
/* At exit the peer's doorbell is rung once (a peer whose program does not read, its helper
 * asleep, acknowledges a FIN only at its next pass otherwise); a connection counts as stalled
 * only TP_EXIT_NUDGE_MS after that. */
#define TP_EXIT_NUDGE_MS 20u
static int handoff_needed(struct tp_conn *c, uint64_t now, uint64_t t0)
{
	int need = 0;

	if (atomic_load(&c->error) || tp_mutex_trylock(&c->tx_lock))
		return 0;
	/* (stalled: no progress for TP_EXIT_STALL_MS, and none since the nudge at T0 either) */
	/* (a moved connection's tail still going out first counts as unacknowledged) */
	if (c->msn_next != c->fb_ack || (c->wr_shut && !c->fin_sent) || atomic_load(&c->pre_on))
		need = clock_age_ms(now, c->progress_ms ? c->progress_ms : c->last_ack_ms) >
			       TP_EXIT_STALL_MS &&
		       clock_age_ms(now, t0) > TP_EXIT_NUDGE_MS ? 2 : 1;
	tp_mutex_unlock(&c->tx_lock);
	return need;
}

int tp_exit_handoff(int timeout_ms, int *ret_handed)
{
	int handed = 0;

	uint64_t t0 = tp_now_ms(), budget = (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	uint64_t end = t0 + budget;
	/* the last quarter (at most 500 ms) is for the hand-overs themselves */
	uint64_t hand_by = end - (budget / 4u < 500u ? budget / 4u : 500u);
	int left = 0;

	for (bool first = true;; first = false) {
		uint64_t now = tp_now_ms();
		struct timespec abs;
		bool last = now >= end;

		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_sec += 1;
		if (pthread_mutex_timedlock(&g_lock, &abs))
			return -ETIMEDOUT;
		left = 0;
		for (struct tp_link *l = g_links; l; l = l->next_link) {
			if (first && l->conns)
				ntb_peer_db_ring(l->ntb); /* the nudge (TP_EXIT_NUDGE_MS) */
			if (pthread_mutex_trylock(&l->conns_lock)) {
				left++;
				continue;
			}
			for (struct tp_conn *c = l->conns; c; c = c->next) {
				/* acquire: pairs with the release store in tp_conn_own() */
				if (!__atomic_load_n(&c->owned, __ATOMIC_ACQUIRE))
					continue;
				if (!tp_fo_get(c)) {
					tp_conn_timers(c, now); /* retransmissions, Detect, the FIN */
					int need = handoff_needed(c, now, t0);

					if (need == 1 && now < hand_by) {
						left++;
						continue;
					}
					if (need && !tp_fo_request(c, "exit"))
						continue;
					handed += need != 0;
				}
				if (tp_fo_get(c) != TP_FO_RUN)
					continue;
				tp_fo_progress(c);
				if (tp_fo_get(c) == TP_FO_RUN && last)
					tp_fo_abandon(c); /* the peer gets a reset, never a short end */
				else if (tp_fo_get(c) == TP_FO_RUN)
					left++;
			}
			pthread_mutex_unlock(&l->conns_lock);
		}
		pthread_mutex_unlock(&g_lock);
		if (!left || last)
			break;
		usleep(1000);
	}
	if (ret_handed)
		*ret_handed = handed;
	return left;
}

/* fork, before: every connection gains a reference (the child inherits it, as a kernel
 * socket's file reference) and loses its owner: the first process to use it afterwards drives
 * it (single-owner rule, tp_int.h). The lists and every connection's locks stay held across
 * fork, so that both copies are the same consistent state (order as in link_service():
 * g_lock, conns_lock, then a connection's locks). */
static void atfork_prepare(void)
{
	uint64_t now = tp_now_ms();

	pthread_mutex_lock(&g_lock);
	for (struct tp_link *l = g_links; l; l = l->next_link) {
		pthread_mutex_lock(&l->conns_lock);
		for (struct tp_conn *c = l->conns; c; c = c->next) {
			tp_mutex_lock(&c->tx_lock);
			tp_mutex_lock(&c->rx_lock);
			if (atomic_load(&c->closed) || atomic_load(&c->slot_gone))
				continue; /* lingering here: stays ours, the child drops it; or a shell
					   * (moved to another link: its entry is another's now) */
			/* the release held back by the lazy rx_release() goes out now: after the
			 * fork nobody may drive this connection (no timers) for a while */
			if (__atomic_load_n(&c->owned, __ATOMIC_ACQUIRE) && !atomic_load(&c->error)) {
				tp_rx_flush_feedback(c);
				tp_tx_flush_held_locked(c); /* and a merged message held back */
			}
			__atomic_add_fetch(&c->ent->refs, 1, __ATOMIC_ACQ_REL);
			__atomic_store_n(&c->ent->fork_ms, now, __ATOMIC_RELEASE);
			/* both copies start unowned (the child inherits this); release: pairs with
			 * the CAS in tp_conn_own() of the first user */
			__atomic_store_n(&c->owned, false, __ATOMIC_RELAXED);
			__atomic_store_n(&c->ent->active, 0, __ATOMIC_RELEASE);
		}
	}
}

static void atfork_parent(void)
{
	for (struct tp_link *l = g_links; l; l = l->next_link) {
		for (struct tp_conn *c = l->conns; c; c = c->next) {
			tp_mutex_unlock(&c->rx_lock);
			tp_mutex_unlock(&c->tx_lock);
		}
		pthread_mutex_unlock(&l->conns_lock);
	}
	pthread_mutex_unlock(&g_lock);
}

static void atfork_init(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, tp_atfork_child);
}

bool tp_helper_running(void)
{
	pthread_mutex_lock(&g_lock);
	bool on = g_helper;
	pthread_mutex_unlock(&g_lock);
	return on;
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
	if (pthread_create(&t, &a, helper_main, NULL) == 0)
		g_helper = true;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
}

void tp_helper_hold(bool hold)
{
	pthread_mutex_lock(&g_lock);
	/* A running helper stays, and is not held for a forked child either (its connections
	 * need one: tp_atfork_child()). */
	g_helper_held = hold && !g_helper;
	if (!hold && g_links)
		tp_helper_start();
	pthread_mutex_unlock(&g_lock);
}

void tp_atfork_child(void)
{
	int me;

	tp_proc_forked(); /* first: the cached pid is the parent's */
	me = tp_self_pid();
	tp_fo_atfork_child();
	tp_finwait_atfork_child();
	pthread_mutex_init(&g_lock, NULL);
	g_helper = false;
	g_helper_waiting = false;
	if (g_efd >= 0) {
		/* own event counter, same fd number (callers may have cached it) */
		int nfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

		if (nfd >= 0) {
			raw_dup3(nfd, g_efd, O_CLOEXEC);
			raw_close(nfd);
		}
	}
	for (struct tp_link *l = g_links; l; l = l->next_link) {
		pthread_mutex_init(&l->conns_lock, NULL);
		/* a set-up's tp_link_reap() in another thread of the parent may have been running */
		atomic_store(&l->pass_busy, false);
		tp_host_lock(l);
		for (struct tp_conn **pp = &l->conns, *c; (c = *pp); pp = &c->next) {
			while (c && atomic_load(&c->closed)) {
				/* the parent's lingering close: not ours (left allocated: its DMA
				 * queue belongs to the parent's threads) */
				*pp = c = c->next;
			}
			if (!c)
				break;
			tp_mutex_init(&c->tx_lock);
			tp_mutex_init(&c->rx_lock);
			tp_mutex_init(&c->witness_lock); /* a look may have been running */
			if (atomic_load(&c->witness_fd1))
				tp_fo_watch(c, atomic_load(&c->witness_fd1) - 1); /* our own set */
			/* c->owned is false: atfork_prepare() cleared it */
			for (int i = 0; i < TP_OWNERS; i++) {
				if (c->ent->owners[i] == me)
					break;
				if (!c->ent->owners[i] || !tp_pid_alive(c->ent->owners[i])) {
					c->ent->owners[i] = me;
					break;
				}
			}
		}
		tp_host_unlock(l);
	}
	if (g_links)
		tp_helper_start();
}

/* --- links ----------------------------------------------------------------------------------- */

int tp_geometry(const struct tp_params *p, uint64_t window, struct tp_geometry *g)
{
	uint32_t n = p->inline_slots, base, q;
	uint64_t avail;

	if (p->contexts == 0 || p->contexts > TP_MAX_CONTEXTS || n < 2 || (n & (n - 1)) ||
	    n > 65536 || p->inline_max > TP_INLINE_MAX)
		return -EINVAL;
	if (window <= TP_OFF_SLOTS)
		return -ENOSPC;
	if (window > TP_WINDOW_MAX) {
		/* (ntb/ refuses these already; offsets here are sized for this bound) */
		LOG(LL_DEBUG, "transport: window of %llu bytes: more than the %llu the transport "
		    "drives", (unsigned long long)window, (unsigned long long)TP_WINDOW_MAX);
		return -EFBIG;
	}
	base = TP_SLOT_RINGS + n * 128u;
	/* 64 bits: a window above 4 GiB leaves a slot more than 4 GiB (the ring is capped below) */
	avail = (window - TP_OFF_SLOTS) / p->contexts;
	if (avail < base + 4096u)
		return -ENOSPC;
	for (q = 4096; (uint64_t)q * 2 <= avail - base && q < (1u << 30); q *= 2)
		;
	if (p->queue_size) {
		if ((p->queue_size & (p->queue_size - 1)) || p->queue_size < 4096)
			return -EINVAL;
		if (p->queue_size > q) {
			LOG(LL_DEBUG, "transport: queue_size %u does not fit: window %llu / %u "
			    "contexts leaves %u", p->queue_size, (unsigned long long)window,
			    p->contexts, q);
			return -ENOSPC;
		}
		q = p->queue_size;
	} else if (q > (1u << 20)) {
		q = 1u << 20;
	}
	g->contexts = p->contexts;
	g->inline_slots = n;
	g->queue_size = q;
	g->slot_size = base + q;
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
	l->contexts = g.contexts;
	l->geom.inline_n = g.inline_slots;
	l->geom.log2n = (uint32_t)__builtin_ctz(g.inline_slots);
	l->geom.qsize = g.queue_size;
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
	l->down_grace_ms = lp->link_timeout_ms ? lp->link_timeout_ms : 500u; /* dead at 2x */
	pthread_mutex_init(&l->conns_lock, NULL);
	rc = ntb_link_open(lp, &l->ntb);
	if (rc)
		goto err_free;
	l->in = ntb_in_window(l->ntb, &l->in_size);
	l->out_size = ntb_out_size(l->ntb);
	l->out_direct = ntb_out_direct(l->ntb);
	rc = link_geometry(l);
	if (rc)
		goto err_ntb;
	rc = ntb_link_enable(l->ntb);
	if (rc)
		goto err_ntb;
	rc = tp_host_open(l, lp);
	if (rc)
		goto err_ntb;
	if (tp_link_admin_path(lp, l->admin_path, sizeof(l->admin_path)))
		l->admin_path[0] = '\0'; /* (too long: never down by admin) */
	atomic_store(&l->admin_down, tp_link_admin_down(l));
	l->db_seen = ntb_db_read(l->ntb);
	l->geom.slot_off = TP_OFF_SLOTS;
	tp_link_refresh(l);
	tp_event_fd();
	pthread_mutex_lock(&g_lock);
	l->next_link = g_links;
	g_links = l;
	tp_helper_start();
	pthread_mutex_unlock(&g_lock);
	helper_kick(); /* a running helper sleeps on the links it knew: this one too */
	tp_host_lock(l);
	tp_listen_publish(l, true);
	tp_host_unlock(l);
	*ret_link = l;
	return 0;
err_ntb:
	ntb_link_close(l->ntb);
err_free:
	free(l);
	return rc;
}

void tp_link_close(struct tp_link *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&g_lock);
	for (struct tp_link **pp = &g_links; *pp; pp = &(*pp)->next_link) {
		if (*pp == l) {
			*pp = l->next_link;
			break;
		}
	}
	for (uint64_t round = g_helper_round; g_helper_waiting && g_helper_round == round;) {
		helper_kick(); /* it sleeps on every link's doorbell: off them, and not on L again */
		pthread_mutex_unlock(&g_lock);
		usleep(200);
		pthread_mutex_lock(&g_lock);
	}
	pthread_mutex_unlock(&g_lock);
	tp_link_set_group(l, 0);
	while (l->conns)
		tp_abort(l->conns);
	tp_conn_cache_drain(l);
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
	if (!tp_link_refresh(l) || atomic_load(&l->region_bad) || tp_link_admin_down(l))
		return -ENETDOWN;
	/* relaxed: a hint; the pool's count changes under the host lock, a placement racing
	 * with another process's set-up may both pick the same link */
	uint32_t free_num = __atomic_load_n(&l->host->free_num, __ATOMIC_RELAXED);

	return free_num < l->host->contexts ? (int)(l->host->contexts - free_num) : 0;
}

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
		int load = atomic_load(&cand[i]->lost) ? -1 : tp_link_load(cand[i]);

		if (load >= 0 && (!best || load < best_load)) {
			best = cand[i];
			best_load = load;
		}
	}
	return best;
}

void tp_link_set_self_rung(struct tp_link *l)
{
	atomic_store(&l->self_rung, true); /* read by helper_main() */
}

struct ntb_link *tp_link_ntb(struct tp_link *l)
{
	return l->ntb;
}
