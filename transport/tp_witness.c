/* SPDX-License-Identifier: MIT */
/* The TCP witness: the program's kernel socket of a connection, looked at while the link is
 * silent to tell a dead peer process from a quiet one. */
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/rawsys.h"
#include "util/log.h"

/*
 * The witness's epoll watch (tp_fo_watch.c: a peer's failover header arriving on the socket)
 * is added TP_WATCH_DELAY_MS after the witness is set, by a pass of the helper
 * (tp_witness_watch_due()), not at once: a connection that lives less — most of a busy
 * server's — pays neither the epoll_ctl ADD nor the DEL at its close (#21 item 3). A header
 * that came meanwhile is reported when the watch is added (epoll reports what is ready at
 * once, edge-triggered too), and the peer's FAILOVER flag in the slot says the same through the
 * pass's scan while the link lives. Without a helper (nobody would add it) it is added at once.
 */
void tp_conn_set_witness(struct tp_conn *c, int fd)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	struct stat st;
	bool later = false;

	if (!c)
		return;
	tp_mutex_lock(&c->witness_lock); /* after any look in progress (tp_witness_look()) */
	later = fd >= 0 && tp_helper_on(); /* (a pass calls us under tp_links_lock) */
	/* the set itself now, even when the watch comes later: the process's descriptors are
	 * then the same after its first connection as after any longer one (a program that
	 * counts its descriptors to find leaks sees none appear later) */
	if (later)
		tp_fo_watch_make();
	/* (before the old descriptor is forgotten: it leaves the set) */
	tp_fo_watch(c, later ? -1 : fd);
	/* relaxed: under witness_lock; a reader without it (a hint) finds no witness */
	atomic_store_explicit(&c->witness_fd1, 0, memory_order_relaxed);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
		/* relaxed: under witness_lock, where the look reads it */
		atomic_store_explicit(&c->witness_ino, (uint64_t)st.st_ino, memory_order_relaxed);
		/* release: the inode before the descriptor; pairs with the acquire loads of
		 * witness_fd1 without the lock (tp_witness_look(), tp_failover.c) */
		atomic_store_explicit(&c->witness_fd1, fd + 1, memory_order_release);
	} else {
		later = false;
	}
	/* relaxed: ordered before the load of act_on by tp_act_mark_sync()'s fence below */
	atomic_store_explicit(&c->watch_due_ms, later ? tp_now_ms() + TP_WATCH_DELAY_MS : 0,
			      memory_order_relaxed);
	tp_mutex_unlock(&c->witness_lock);
	if (later)
		tp_act_mark_sync(c); /* a pass must come to add it (tp_active.c: busy_atomic()) */
}

bool tp_witness_watch_due(struct tp_conn *c, uint64_t now)
{
	/* relaxed: a hint, read again under the lock */
	uint64_t due = atomic_load_explicit(&c->watch_due_ms, memory_order_relaxed);
	struct stat st;

	if (!due)
		return false;
	if (now < due || tp_mutex_trylock(&c->witness_lock))
		return true;
	/* relaxed (all): under witness_lock, which their writers hold */
	int fd1 = atomic_load_explicit(&c->witness_fd1, memory_order_relaxed);

	/* still the socket it was set to (a descriptor closed behind our back, its number
	 * reused, is not watched) */
	if (atomic_load_explicit(&c->watch_due_ms, memory_order_relaxed) && fd1 &&
	    fstat(fd1 - 1, &st) == 0 &&
	    (uint64_t)st.st_ino == atomic_load_explicit(&c->witness_ino, memory_order_relaxed))
		tp_fo_watch(c, fd1 - 1);
	atomic_store_explicit(&c->watch_due_ms, 0, memory_order_relaxed);
	tp_mutex_unlock(&c->witness_lock);
	return false;
}

/* The peer is silent: is its kernel socket closed (the process died) rather than only quiet
 * (stopped, starved, or the host gone)? Looked at every 100 ms, never read: MSG_PEEK, and
 * through the system call itself, since the preload library interposes recv(). */
void tp_witness_look(struct tp_conn *c, uint64_t now)
{
	/* acquire: pairs with the release store in tp_conn_set_witness() */
	int fd1 = atomic_load_explicit(&c->witness_fd1, memory_order_acquire);
	struct stat st;
	char b;

	/* relaxed (witness_ms, its CAS below): one look per 100 ms, nothing is published with
	 * it; down_since_ms and peer_gone: flags read as hints */
	uint64_t last = atomic_load_explicit(&c->witness_ms, memory_order_relaxed);

	/* one look per 100 ms, by whichever thread wins it */
	/* From the moment the link is down (the first look tells a death, which stopped the
	 * heartbeat, from a process alive behind a silent link: silent_alive), and not once the
	 * peer said it closed (TP_ST_CLOSING): then its TCP socket's end is that close, and its
	 * connection still lingers on the NTB side (data, FIN), to be waited for. */
	if (!fd1 || !atomic_load_explicit(&c->link->down_since_ms, memory_order_relaxed) ||
	    (tp_st_flags(c) & TP_ST_CLOSING) || clock_age_ms(now, last) < 100u ||
	    atomic_load_explicit(&c->peer_gone, memory_order_relaxed) ||
	    !atomic_compare_exchange_strong_explicit(&c->witness_ms, &last, now,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	/* a busy lock: the witness is being changed (the descriptor may be closing) */
	if (tp_mutex_trylock(&c->witness_lock))
		return;
	/* relaxed (fd1, ino): under witness_lock, which their writer holds */
	fd1 = atomic_load_explicit(&c->witness_fd1, memory_order_relaxed);
	if (!fd1 || fstat(fd1 - 1, &st) ||
	    (uint64_t)st.st_ino != atomic_load_explicit(&c->witness_ino, memory_order_relaxed)) {
		tp_mutex_unlock(&c->witness_lock);
		return; /* gone, closed or reused: nothing to learn from it */
	}
	long r = raw_recv(fd1 - 1, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	int e = errno;

	/* the same socket still (not closed and reused between the two calls)? */
	bool same = fstat(fd1 - 1, &st) == 0 &&
		    (uint64_t)st.st_ino == atomic_load_explicit(&c->witness_ino, memory_order_relaxed);
	bool dead = same && (r == 0 || (r < 0 && (e == ECONNRESET || e == EPIPE || e == ETIMEDOUT)));

	/* A closing peer writes CLOSING, then its socket ends: an end seen here may be a close
	 * whose CLOSING came after the look at the flags above (the flags are read again now,
	 * after the end: the kernel orders its close after that write) */
	if (dead && (tp_st_flags(c) & TP_ST_CLOSING)) {
		tp_mutex_unlock(&c->witness_lock);
		return;
	}
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	bool dead_late = false;

	memset(&ti, 0, sizeof(ti));
	if (dead && raw_getsockopt(fd1 - 1, IPPROTO_TCP, TCP_INFO, &ti, &tl))
		dead_late = true; /* no age of its end: take it as after a silence */
	/* a reset, not a close: the peer died with bytes unacknowledged for a while (its socket
	 * was armed for that: tp_witness_rst()) or its program closed it abortively; kernel TCP
	 * gives ECONNRESET after the delivered data either way, never an end of stream. Told by
	 * the error, or by the state (CLOSE, where a FIN leaves CLOSE_WAIT) once another look
	 * took the error (tp_fo_peer_spoke()'s MSG_PEEK clears it); a reset does not move
	 * tcpi_last_ack_recv, so the age test below could not tell it */
	if (dead && ((r < 0 && e == ECONNRESET) || ti.tcpi_state == TCP_CLOSE)) {
		dead_late = true;
		LOG(LL_INFO, "transport: slot %u: the peer's TCP socket was reset (it died with bytes "
		    "unacknowledged, or aborted): what it wrote may be missing", c->slot);
	}
	tp_mutex_unlock(&c->witness_lock);
	/* Did it die while its link still spoke? Its FIN (or reset) is the last segment the
	 * socket received (tcpi_last_ack_recv: ms since), the last heartbeat that reached us is the
	 * last sign of the link (dated by the peer's own stamp, so a look of ours that came late
	 * does not make it younger: ntb_link_peer_hb_age_ms()): a heartbeat older than the death by
	 * more than two periods means the link was silent before it died, and what it wrote then
	 * may never have arrived. */
	if (dead && !dead_late) {
		int64_t hb_age = ntb_link_peer_hb_age_ms(c->link->ntb);
		int64_t gap = hb_age - (int64_t)ti.tcpi_last_ack_recv;

		dead_late = hb_age < 0 || gap > 2 * (int64_t)ntb_link_heartbeat_ms(c->link->ntb) + 50;
		LOG(LL_DEBUG, "transport: slot %u: peer dead: its last heartbeat %lld ms ago, its "
		    "end %u ms ago", c->slot, (long long)hb_age, ti.tcpi_last_ack_recv);
		if (dead_late)
			LOG(LL_INFO, "transport: slot %u: the link was silent %lld ms before the peer "
			    "died: what it wrote meanwhile may be missing", c->slot, (long long)gap);
	}
	/* relaxed: published by the release store of peer_died below, or a hint alone */
	if ((!dead && same) || dead_late)
		atomic_store_explicit(&c->silent_alive, true, memory_order_relaxed);
	if (dead) {
		LOG(LL_INFO, "transport: slot %u: peer silent and its TCP socket closed (%s, fd %d, "
		    "tcp state %u): the peer process is gone", c->slot,
		    r == 0 ? "end of stream" : strerror(e), fd1 - 1, ti.tcpi_state);
		/* release: silent_alive before it; pairs with the load of peer_died before
		 * silent_alive in tp_rx.c (the end of a dead peer's stream) */
		atomic_store_explicit(&c->peer_died, true, memory_order_release);
		/* relaxed: a sticky flag (as in tp_conn_peer_lost()); the event wakes the waiters */
		atomic_store_explicit(&c->peer_gone, true, memory_order_relaxed);
		tp_event_signal(); /* waiters look again and see the loss */
	}
}

/*
 * The writer's half. A peer behind a silent link tells our death after the silence (what we
 * wrote then is lost: it reads a reset) from a clean one (an end of stream) by the age of our
 * last heartbeat against our socket's end; a death within two heartbeats of the silence looks
 * clean, and the bytes we wrote in between are missing behind an end of stream. So while bytes
 * we sent wait and the receiver does not answer our probes (our second quick probe finds the
 * first unanswered: tp_retx.c), our kernel socket holds SO_LINGER {1, 0}: our process's death
 * then resets it, and a reset is never taken for a clean end (tp_witness_look()). An answer,
 * or everything validated, puts the program's value back (a receiver that answers has what we
 * wrote in its window, read or not), as do a failover to the socket (for good) and an exec
 * hand-over; the program's own SO_LINGER meanwhile is kept aside (tp_conn_linger_set()).
 */
static int rst_fd(const struct tp_conn *c)
{
	/* relaxed (fd1, ino): under witness_lock, which their writer holds */
	int w = atomic_load_explicit(&c->witness_fd1, memory_order_relaxed) - 1;
	struct stat st;

	/* the program's descriptor may have been closed and its number reused by another
	 * socket (another thread's call still held the connection, so the witness stayed) */
	if (w >= 0 && fstat(w, &st) == 0 &&
	    (uint64_t)st.st_ino == atomic_load_explicit(&c->witness_ino, memory_order_relaxed))
		return w;
	return c->keep_fd;
}

/* Under witness_lock: arm (ON) or disarm. */
static void rst_set(struct tp_conn *c, bool on)
{
	static const struct linger abort_lg = { .l_onoff = 1, .l_linger = 0 };
	/* relaxed: under witness_lock, which every writer holds */
	bool armed = atomic_load_explicit(&c->rst_armed, memory_order_relaxed);
	int fd = rst_fd(c);

	if (armed == on || (on && c->rst_off))
		return;
	if (fd < 0) {
		if (!on) /* (no socket left to put it back on) */
			atomic_store_explicit(&c->rst_armed, false, memory_order_relaxed);
		return;
	}
	if (on) {
		socklen_t l = sizeof(c->rst_saved);

		if (raw_getsockopt(fd, SOL_SOCKET, SO_LINGER, &c->rst_saved, &l) ||
		    raw_setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_lg, sizeof(abort_lg)))
			return;
	} else {
		raw_setsockopt(fd, SOL_SOCKET, SO_LINGER, &c->rst_saved, sizeof(c->rst_saved));
	}
	atomic_store_explicit(&c->rst_armed, on, memory_order_relaxed);
	LOG(LL_DEBUG, "transport: slot %u: %s", c->slot, on ?
	    "bytes unacknowledged without progress: our death now resets the TCP socket" :
	    "reset on death disarmed");
}

bool tp_witness_rst(struct tp_conn *c, bool on, bool wait)
{
	/* relaxed: a hint, checked again under the lock */
	if (atomic_load_explicit(&c->rst_armed, memory_order_relaxed) == on)
		return true;
	if (wait)
		tp_mutex_lock(&c->witness_lock);
	else if (tp_mutex_trylock(&c->witness_lock))
		return false;
	rst_set(c, on);
	tp_mutex_unlock(&c->witness_lock);
	return true;
}

void tp_witness_rst_locked(struct tp_conn *c, bool on)
{
	rst_set(c, on);
}

/* Under witness_lock: whether the socket holds our {1, 0} now. Our flag says so, and the
 * kernel agrees: after a fork the process that disarmed is not always the one asking (the
 * flag is per process, the option per socket); a stale flag is dropped here. */
static bool armed_now(struct tp_conn *c, int fd)
{
	struct linger k;
	socklen_t l = sizeof(k);

	/* relaxed: under witness_lock */
	if (!atomic_load_explicit(&c->rst_armed, memory_order_relaxed))
		return false;
	if (raw_getsockopt(fd, SOL_SOCKET, SO_LINGER, &k, &l) == 0 && k.l_onoff && !k.l_linger)
		return true;
	atomic_store_explicit(&c->rst_armed, false, memory_order_relaxed);
	return false;
}

int tp_conn_linger_set(struct tp_conn *c, int fd, const struct linger *lg)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	int r = 0;

	tp_mutex_lock(&c->witness_lock);
	if (armed_now(c, fd))
		c->rst_saved = *lg; /* put back when disarmed; the socket keeps resetting meanwhile */
	else if (raw_setsockopt(fd, SOL_SOCKET, SO_LINGER, lg, sizeof(*lg)))
		r = -errno;
	tp_mutex_unlock(&c->witness_lock);
	return r;
}

int tp_conn_linger_get(struct tp_conn *c, int fd, struct linger *lg)
{
	c = tp_conn_cur(c);
	socklen_t l = sizeof(*lg);
	int r = 0;

	/* (under the lock: not armed between our look at the flag and the kernel's value) */
	tp_mutex_lock(&c->witness_lock);
	if (armed_now(c, fd))
		*lg = c->rst_saved;
	else if (raw_getsockopt(fd, SOL_SOCKET, SO_LINGER, lg, &l))
		r = -errno;
	tp_mutex_unlock(&c->witness_lock);
	return r;
}
