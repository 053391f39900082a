/* SPDX-License-Identifier: MIT */
/* The end of a connection: shutdown, close and abort, with the single-owner rule for
 * connections shared by fork. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/fdpark.h"
#include "util/rawsys.h"
#include "util/log.h"

int tp_shutdown_one(struct tp_conn *c, int how)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (tp_conn_own(c))
		return -EPERM;
	if (how != SHUT_WR) {
		tp_mutex_lock(&c->rx_lock);
		c->rd_shut = true;
		tp_act_note_rx(c); /* (a reader shut: its timers discard what comes) */
		tp_mutex_unlock(&c->rx_lock);
		tp_event_signal(); /* (readable now: epoll sets that passed over it look) */
	}
	/* relaxed: a hint, looked at again under the prefix lock */
	if (how != SHUT_RD && atomic_load_explicit(&c->pre_on, memory_order_relaxed)) {
		/* the rest of a moved connection's tail is still going out: the FIN after it */
		tp_prefix_lock(c);
		/* relaxed (both): under the prefix lock, which every writer of them holds */
		bool pending = atomic_load_explicit(&c->pre_on, memory_order_relaxed);

		if (pending)
			atomic_store_explicit(&c->pre_fin, true, memory_order_relaxed);
		tp_prefix_unlock(c);
		if (pending)
			return 0;
	}
	if (how != SHUT_RD) {
		tp_mutex_lock(&c->tx_lock);
		/* acquire: pairs with the release store in mv_finish() */
		if (atomic_load_explicit(&c->moved_to, memory_order_acquire)) {
			/* it moved meanwhile (mv_finish() reads wr_shut under this lock): there */
			tp_mutex_unlock(&c->tx_lock);
			return tp_shutdown(c, SHUT_WR);
		}
		if (!c->wr_shut) {
			c->wr_shut = true;
			/* (while moving to the kernel socket, its FIN says it: tp_failover.c) */
			/* acquire: pairs with the CAS in tp_set_error_at() */
			if (!atomic_load_explicit(&c->error, memory_order_acquire) && !tp_fo_get(c))
				tp_tx_fin(c); /* -EAGAIN: the timers send it when room frees */
		}
		tp_mutex_unlock(&c->tx_lock);
		tp_act_mark(c); /* (the FIN, sent or owed: timer work, tp_active.c) */
	}
	return 0;
}

/* Drop this process's reference to C (fork shares it). True when another process still
 * holds one and is alive (or was forked just now and may not have registered yet): then
 * closing here only releases our share, as closing one copy of a kernel socket does. */
static bool shared_elsewhere(struct tp_conn *c, bool *ret_held)
{
	struct tp_host_entry *e = c->ent;
	int me = tp_self_pid();
	bool other = false;
	/* acq_rel: pairs with the other holders' decrements here, the increment in
	 * atfork_prepare() and the release store in tp_conn_new_first() */
	uint32_t refs = atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) - 1;

	if (refs == 0 || refs > 1000u) /* last reference (or never counted) */
		return false;
	if (!tp_host_lock_within(c->link, TP_HOST_WAIT_MS)) {
		*ret_held = true; /* (its holder is a stopped process: taken for shared) */
		return true;
	}
	for (int i = 0; i < TP_OWNERS; i++)
		if (e->owners[i] && e->owners[i] != me && tp_pid_alive(e->owners[i]))
			other = true;
	/* acquire: pairs with the release store of fork_ms in atfork_prepare() */
	if (tp_now_ms() - atomic_load_explicit(&e->fork_ms, memory_order_acquire) < 2000u)
		other = true;
	tp_host_unlock(c->link);
	return other;
}

/* Single-owner rule at close: does this process end the connection? Its owner does, even while
 * other processes hold copies (they cannot drive it); one that nobody used since the last fork
 * is ended by its last holder (SHARED false), which claims it; any other process only drops its
 * reference (release_share()). */
static bool close_drives(struct tp_conn *c, bool shared)
{
	/* acquire: pairs with the release store in tp_conn_own() / tp_conn_new() */
	if (atomic_load_explicit(&c->owned, memory_order_acquire))
		return true;
	return !shared && tp_conn_own(c) == 0;
}

/* A process that does not drive C drops its share. If it was the last holder, the owner is
 * gone without ending it: tell the peer (GONE), as the reclaim of a dead owner would. */
static void release_share(struct tp_conn *c, bool held)
{
	if (held) {
		/* the host lock is held by a stopped process: the helper's passes release our
		 * share once they can take it (only our share: share_only) */
		struct tp_link *l = c->link;

		c->share_only = true;
		c->closed_ms = tp_now_ms();
		tp_act_hold(c);
		/* seq_cst: as the stores of closed and lingering in tp_close_one() */
		atomic_store_explicit(&c->closed, true, memory_order_seq_cst);
		atomic_store_explicit(&l->lingering, true, memory_order_seq_cst);
		return;
	}
	/* (written only by the last holder, added to what the owner wrote: an RST of an owner
	 * that failed stays) */
	tp_conn_release(c, TP_ST_GONE);
}

/* A shell C (moved to another link): the connection it moved to ends (CLOSE or abort), and the
 * shell with it, its slot being freed already. */
static void shell_end(struct tp_conn *c, bool close)
{
	/* acquire: pairs with the release store in mv_finish() */
	struct tp_conn *n = atomic_load_explicit(&c->moved_to, memory_order_acquire);

	if (close)
		tp_close(n);
	else
		tp_abort(n);
	tp_conn_release(c, 0);
}

void tp_close_one(struct tp_conn *c)
{
	if (!c)
		return;
	/* acquire: pairs with the release store in mv_finish() */
	if (atomic_load_explicit(&c->moved_to, memory_order_acquire)) {
		shell_end(c, true);
		return;
	}
	/* Bytes not yet acknowledged must outlive the descriptor, as a kernel socket's do: a
	 * private duplicate of the socket stays for a failover at exit (tp_exit_handoff()), or
	 * for one under way, until the connection is released. */
	/* acquire: pairs with the release store in tp_conn_own() / tp_conn_new() */
	bool mine = atomic_load_explicit(&c->owned, memory_order_acquire);

	tp_mutex_lock(&c->tx_lock);
	/* What the receiver released is read again first when our copy says something is out:
	 * a peer that answered and closed has published its releases (its close flushes them),
	 * and a duplicate kept for nothing costs two system calls (here and the helper's close).
	 * Only when it matters: an owner with no failover to run. */
	if (mine && tp_fo_get(c) == TP_FO_NONE &&
	    (c->tx_i != c->fb_rx_i || c->tx_d != c->fb_rx_d))
		tp_tx_feedback(c);
	/* relaxed pre_on: a tail still going out (its writers hold the prefix lock, not this
	 * one: a tail that just went out counts as unacknowledged, which only keeps a duplicate) */
	bool unacked = c->tx_i != c->fb_rx_i || c->tx_d != c->fb_rx_d ||
		       atomic_load_explicit(&c->pre_on, memory_order_relaxed);

	tp_mutex_unlock(&c->tx_lock);
	int fo = tp_fo_get(c);

	/* Everything acknowledged and no duplicate kept: the program's close ends the socket now,
	 * cleanly. The feedback's reader disarms the reset of an answering peer's socket only
	 * when its lock is free (tp_tx_feedback()); here it waits for it. Relaxed: a hint, as
	 * there (the witness lock decides). */
	if (mine && fo == TP_FO_NONE && !unacked &&
	    atomic_load_explicit(&c->rst_armed, memory_order_relaxed))
		tp_witness_rst(c, false, true);
	if (mine && (fo == TP_FO_RUN || (fo == TP_FO_NONE && unacked))) {
		tp_mutex_lock(&c->witness_lock);
		/* relaxed: under witness_lock, which its writer holds */
		int w = atomic_load_explicit(&c->witness_fd1, memory_order_relaxed) - 1;

		if (w >= 0 && c->keep_fd < 0)
			c->keep_fd = fd_dup_high(w);
		tp_mutex_unlock(&c->witness_lock);
	}
	/* the caller's descriptor (the witness) closes next: no look may still use it */
	tp_conn_set_witness(c, -1);
	bool held = false;

	if (!close_drives(c, shared_elsewhere(c, &held))) {
		release_share(c, held);
		return;
	}
	if (!tp_fo_get(c) && tp_rx_unread(c, false)) {
		/* as the kernel's close() with bytes in its receive queue: a reset (tp_abort()) */
		LOG(LL_DEBUG, "transport: slot %u closed with bytes unread: reset", c->slot);
		/* release: pairs with the acquire loads of error (tp_conn_error(), the waiters) */
		atomic_store_explicit(&c->error, -ECONNRESET, memory_order_release);
		tp_conn_release(c, TP_ST_RST);
		return;
	}
	if (!tp_fo_get(c) && !atomic_load_explicit(&c->error, memory_order_acquire)) {
		/* the release held back by the lazy rx_release() goes out now (acquire above: pairs
		 * with the CAS in tp_set_error_at()): the peer sees what it sent consumed (its
		 * retransmission state, and a close of its own that reads its feedback), so that
		 * its kernel FIN is not held back for it (the TIME_WAIT then stays with the side
		 * that closed first, as over kernel TCP) */
		tp_mutex_lock(&c->rx_lock);
		tp_rx_flush_feedback(c);
		tp_mutex_unlock(&c->rx_lock);
	}
	/* the peer's witness will see our TCP socket's end now: say it was a close, not a death;
	 * before the FIN, so a peer that reads the end of stream finds it (preload/: its close()
	 * then waits for our TCP socket's FIN) */
	if (!tp_fo_get(c))
		tp_conn_st_add(c, TP_ST_CLOSING);
	tp_shutdown(c, SHUT_WR);
	c->closed_ms = tp_now_ms();
	/* no descriptor of the program's any more: `ntbsock stat` says "closing" while it lingers
	 * (relaxed: informational, as the other fields of the entry stat reads) */
	atomic_store_explicit(&c->ent->fd, TP_ENT_FD_CLOSED, memory_order_relaxed);
	/* Once closed is set, C is the helper's: its next pass may release it (linger_done() is
	 * true at once for a connection in error or moved to TCP) and the cache may reuse or free
	 * it. So nothing of C is read after the store: the link (which outlives its connections)
	 * is taken before; the move's lock, released after it, is waited for by the pass
	 * (tp_fo_idle()) before it frees it. */
	struct tp_link *l = c->link;
	/* A move to another link under way: it ends here or there. Under its lock, so that the move
	 * either sees closed (and closes where it went) or has gone and says where (the close goes
	 * there too); the helper leaves a moving connection whose lock is taken alone. */
	/* acquire: pairs with the CAS in tp_fo_request() */
	struct tp_fo *mv = atomic_load_explicit(&c->fo, memory_order_acquire);
	struct tp_conn *moved = NULL;

	/* on the active list for good, before closed: a pass may release it from then on, and
	 * only passes that visit it do (tp_active.c) */
	tp_act_hold(c);
	if (mv)
		tp_fo_lock(mv);
	if (mv)
		/* acquire: pairs with the release store in mv_finish() */
		moved = atomic_load_explicit(&c->moved_to, memory_order_acquire);
	/* seq_cst: the helper sees closed_ms and the shutdown state (pairs with its load of
	 * closed in tp_link_conns_pass()); and with the store of lingering below against the
	 * pass's clearing of lingering before it reads closed (store, store / store, load: only
	 * a single total order keeps a pass from both missing closed and clearing our flag) */
	atomic_store_explicit(&c->closed, true, memory_order_seq_cst);
	if (mv)
		tp_fo_unlock(mv);
	if (moved)
		tp_close(moved);
	/* after closed: a pass that cleared lingering before it saw closed comes again soon */
	/* seq_cst: see the store of closed above (tp_link.c: tp_link_conns_pass()) */
	atomic_store_explicit(&l->lingering, true, memory_order_seq_cst);
}

void tp_abort_one(struct tp_conn *c)
{
	if (!c)
		return;
	/* acquire: pairs with the release store in mv_finish() */
	if (atomic_load_explicit(&c->moved_to, memory_order_acquire)) {
		shell_end(c, false);
		return;
	}
	tp_conn_set_witness(c, -1); /* as tp_close() */
	bool held = false;

	if (!close_drives(c, shared_elsewhere(c, &held))) {
		release_share(c, held);
		return;
	}
	/* release: pairs with the acquire loads of error (tp_conn_error(), the waiters) */
	atomic_store_explicit(&c->error, -ECONNRESET, memory_order_release);
	tp_conn_release(c, tp_fo_get(c) ? 0 : TP_ST_RST);
}

void tp_conn_abort(struct tp_conn *c)
{
	tp_abort(c);
}
