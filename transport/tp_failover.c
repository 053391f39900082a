/* SPDX-License-Identifier: MIT */
/* Failover of a connection to its kernel TCP socket (doc/design.md §5.8): when the NTB path breaks
 * while both programs live (link lost, retries exhausted, `ntbsock link down`, the peer moved),
 * or at exit with bytes unacknowledged, both ends go on over the TCP socket that was made
 * beside the connection and never carried a byte.
 *
 * On that socket each side writes, once: a header {magic, version, START} and then every byte
 * of its stream from offset START on, taken from its retransmission copies (the shadows hold
 * every message the receiver has not released, so START is at or before what the peer has
 * consumed), and, when its writing was shut, the kernel's FIN. Each side reads the peer's
 * header, drops the bytes it already delivered to its program (its consumed count minus START)
 * and leaves the rest in the kernel: from then on the kernel socket IS the stream, and preload/
 * hands the descriptor back to the kernel (tp_send()/tp_recv() say -EXDEV). A START beyond what
 * was consumed means bytes are missing: the connection fails with ECONNRESET, never a short
 * end of stream.
 *
 * Who runs what: tp_fo_request() only marks the connection (any thread, any lock held); the
 * timers (helper thread, wait loops) call tp_fo_progress(), which takes the snapshot under the
 * connection's locks and then moves bytes with non-blocking calls on a private duplicate of
 * the socket, so a peer that reads slowly never blocks the helper. While it runs, sends and
 * receives wait (-EAGAIN) and poll reports nothing; when done, everything reports ready and the
 * calls return -EXDEV.
 *
 * Link to link (a move): when C's link is lost or taken down and another live link joins the
 * same two hosts (tp_link_alt(): the link's group), the same header and tail go over a new NTB
 * connection on that link instead of the kernel socket, bound to C by C's key (the TCP 4-tuple,
 * which both sides know): the client sets it up with a re-attach Apply (TP_APPLY_REATTACH: no
 * listener needed), the server takes it with tp_attach() as it comes. Each side then reads the
 * peer's header from the new connection, drops the bytes it already delivered, and from then on
 * the new connection IS the stream: C becomes a shell (state LINKED, c->moved_to), its slot is
 * freed, and every public call on C goes to the new one (tp_conn_cur()). The side that starts
 * writes TP_ST_MOVING into the old slot, so that a peer whose link still works joins. The kernel
 * socket stays the last resort: a move that cannot be set up (no answer within the time, the
 * new connection failing before it carries the stream, the peer's header arriving on the kernel
 * socket instead) goes on there with the same tail, as if it had started there.
 *
 * Fields: c->fo (struct tp_fo) is set once by the CAS in tp_fo_request() and freed with the
 * connection; its contents are under fo->lock (one worker at a time). c->fo_state is written
 * with release by fo_set() and read with acquire by tp_fo_get().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/tp_int.h"
#include "util/fdpark.h"
#include "util/rawsys.h"
#include "util/log.h"

#define TP_FO_MAGIC   0x4f46544eu /* "NTFO" little-endian */
#define TP_FO_VERSION 1u

struct tp_fo_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;    /* the writer's moves to another link so far (c->moves): both sides'
			    * counts agree, or they would resume different streams (a second
			    * link lost during a move: fo_rx_switch() resets then) */
	uint64_t start;    /* stream offset of the first byte after this header */
	uint64_t consumed; /* bytes of the peer's stream delivered here so far (diagnostics) */
	uint32_t reserved;
	uint32_t crc;      /* crc32c(0, bytes 0..27) */
};
static_assert(sizeof(struct tp_fo_hdr) == 32, "failover header size");

struct tp_fo {
	pthread_mutex_t lock;
	const char *why;
	int fd;            /* private duplicate of the kernel socket, -1 once closed */
	bool snap;         /* the tail below was taken */
	uint8_t *tx;       /* header + tail */
	size_t tx_len, tx_off;
	bool shut_done;
	uint8_t hdr[sizeof(struct tp_fo_hdr)];
	unsigned hdr_got;
	bool hdr_ok;
	uint64_t skip;
	uint64_t start_ms;  /* requested at (the log says how long it took) */
	/* a move to another link (else to the kernel socket) */
	bool to_link;
	struct tp_link *to;   /* that link */
	struct tp_conn *next; /* the connection set up there (ours until mv_finish()) */
	uint64_t move_end_ms; /* not carrying the stream by then: the kernel socket */
	struct tp_key key;    /* C's (both sides know it: the TCP 4-tuple) */
	bool client;          /* C's role: the client re-attaches, the server takes it */
	/* a framed stream's part 0 whose move gave way to the kernel socket: its tail (taken for
	 * the move, the part's bytes) is to be taken again as the stream's (tp_stripe.c) */
	bool resnap;
};

/* How long a move may take before the kernel socket is used instead: the client's set-up
 * attempt, and the whole move (the server waits that long for the client's re-attach). */
#define TP_MOVE_SETUP_MS 500u
#define TP_MOVE_MS       4000u

void tp_fo_lock(struct tp_fo *fo)
{
	pthread_mutex_lock(&fo->lock);
}

void tp_fo_unlock(struct tp_fo *fo)
{
	pthread_mutex_unlock(&fo->lock);
}

bool tp_fo_idle(struct tp_conn *c)
{
	/* acquire: pairs with the CAS in tp_fo_request() */
	struct tp_fo *fo = atomic_load_explicit(&c->fo, memory_order_acquire);

	if (!fo)
		return true;
	if (pthread_mutex_trylock(&fo->lock))
		return false;
	pthread_mutex_unlock(&fo->lock);
	return true;
}

_Atomic int tp_fo_active;

/* Why a connection moves, as `ntbsock stat` shows it (the host entry keeps the index). */
static const char *const fo_reasons[] = {
	"link broke", "link down", "link region gone", "link restarted", "retries exhausted",
	"link down (admin)", "peer moved to tcp", "exit", "peer moved link", "urgent data",
	"passed to another process",
};

const char *tp_fo_reason(uint32_t code)
{
	return fo_reasons[code < sizeof(fo_reasons) / sizeof(fo_reasons[0]) ? code : 0];
}

static uint32_t fo_reason_code(const char *why)
{
	for (uint32_t i = 0; i < sizeof(fo_reasons) / sizeof(fo_reasons[0]); i++)
		if (why && strcmp(why, fo_reasons[i]) == 0)
			return i;
	return 0;
}

static void fo_set(struct tp_conn *c, int state)
{
	atomic_store_explicit(&c->fo_state, state, memory_order_release); /* pairs with tp_fo_get */
}

/* The kernel socket of C, duplicated (the program may close its descriptor meanwhile). */
static int fo_dup_socket(struct tp_conn *c)
{
	int fd = -1;

	tp_mutex_lock(&c->witness_lock);
	/* relaxed: under witness_lock, which its writer holds */
	int w = atomic_load_explicit(&c->witness_fd1, memory_order_relaxed) - 1;

	if (w < 0)
		w = c->keep_fd;
	/* the stream goes on over the socket: its close must end it cleanly (FIN after the
	 * data), not reset it (tp_witness.c: an abort at exit says so itself, tp_fo_abandon()) */
	c->rst_off = true; /* (not armed again: a timer pass may be at it now) */
	tp_witness_rst_locked(c, false);
	if (w >= 0)
		fd = fd_dup_high(w);
	tp_mutex_unlock(&c->witness_lock);
	return fd;
}

bool tp_fo_request(struct tp_conn *c, const char *why)
{
	int st = tp_fo_get(c);

	if (st != TP_FO_NONE)
		return st != TP_FO_FAILED;
	/* acquire: pairs with the release store in tp_conn_own() (single-owner rule) and the CAS
	 * in tp_set_error_at() */
	if (!atomic_load_explicit(&c->owned, memory_order_acquire) ||
	    atomic_load_explicit(&c->error, memory_order_acquire))
		return false;
	struct tp_fo *fo = calloc(1, sizeof(*fo)), *none = NULL;

	if (!fo)
		return false;
	/* (the kernel socket: at exit, after the peer, for a closed connection, for a framed
	 * stream whose stripe was lost, or when no other link lives) */
	/* acquire: pairs with the store of closed in tp_close() */
	bool sock = !strcmp(why, "exit") || !strcmp(why, "peer moved to tcp") ||
		    !strcmp(why, "stripe lost") || !strcmp(why, "urgent data") ||
		    !strcmp(why, "passed to another process") ||
		    atomic_load_explicit(&c->closed, memory_order_acquire);
	/* A framed stream's part (tp_stripe.c): its kernel socket's program would read frames.
	 * Part 0 takes the stream there unframed (fo_build_tail()); part 1 never goes there (its
	 * bytes are in part 0's tail): part 0 goes instead; a part whose handle was closed goes to
	 * another link or nowhere. */
	bool part1 = c->sp_of && c->sp_idx == 1;

	if (c->framed_part && (sock || !tp_link_alt(c->link)) && (part1 || !c->sp_of)) {
		free(fo);
		if (part1)
			tp_stripe_part_lost(c->sp_of, !strcmp(why, "exit") ? "exit" : "stripe lost");
		return false;
	}
	/* (a socket for a plain connection and a framed stream's part 0; the others only move) */
	bool no_sock = c->framed_part && (!c->sp_of || c->sp_idx == 1);

	fo->fd = no_sock ? -1 : fo_dup_socket(c);
	if (fo->fd < 0 && !no_sock) {
		free(fo);
		return false;
	}
	pthread_mutex_init(&fo->lock, NULL);
	fo->why = why;
	fo->start_ms = tp_now_ms();
	/* another link to the peer first; never at exit (the kernel outlives us), nor for a
	 * closed connection (the kernel socket's duplicate carries its rest), nor when the peer
	 * went to its kernel socket already */
	/* acquire: pairs with the store of closed in tp_close() */
	if (!sock) {
		fo->key = c->ent->key;
		fo->client = c->ent->role == 0;
		fo->to = tp_link_alt(c->link);
		fo->to_link = fo->to != NULL;
		fo->move_end_ms = fo->start_ms + TP_MOVE_MS;
	}
	/* acq_rel: FO's fields before the pointer (pairs with the acquire loads of c->fo); a
	 * loser sees the winner's */
	if (!atomic_compare_exchange_strong_explicit(&c->fo, &none, fo, memory_order_acq_rel,
						     memory_order_acquire)) {
		raw_close(fo->fd);
		free(fo);
		return tp_fo_get(c) != TP_FO_FAILED;
	}
	/* relaxed: a count for the helper's sleep (tp_link.c), nothing is published with it */
	atomic_fetch_add_explicit(&tp_fo_active, 1, memory_order_relaxed);
	fo_set(c, TP_FO_RUN);
	tp_act_mark_sync(c); /* (the pass drives it: tp_active.c) */
	LOG(LL_DEBUG, "transport: slot %u: failover to %s requested (%s)", c->slot,
	    fo->to_link ? "another link" : "tcp", why);
	tp_event_signal();
	return true;
}

bool tp_conn_to_kernel(struct tp_conn *c, const char *why)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	/* (a balanced stream's parts carry frames: its kernel socket's program would read them
	 * unframed only after part 0 took the whole stream there, which a lost stripe does) */
	if (c->sp || c->framed_part)
		return false;
	return tp_fo_request(c, why);
}

unsigned tp_conn_moves(struct tp_conn *c)
{
	unsigned n = 0;

	/* acquire: pairs with the release store in mv_finish() */
	while (c && (c = atomic_load_explicit(&c->moved_to, memory_order_acquire)))
		n++;
	return n;
}

struct tp_link *tp_conn_link(struct tp_conn *c)
{
	return tp_conn_cur(c)->link;
}

const char *tp_conn_failover_reason(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	/* acquire: pairs with the CAS in tp_fo_request() */
	struct tp_fo *fo = atomic_load_explicit(&c->fo, memory_order_acquire);

	return fo ? fo->why : NULL;
}

int tp_conn_failover_state_one(struct tp_conn *c)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	return tp_fo_get(c);
}

static void fo_end(struct tp_conn *c, struct tp_fo *fo, int state, int err)
{
	if (fo->fd >= 0) {
		raw_close(fo->fd);
		fo->fd = -1;
	}
	free(fo->tx);
	fo->tx = NULL;
	if (err)
		tp_set_error(c, err);
	if (state == TP_FO_DONE) {
		/* `ntbsock stat` lists it as tcp from now on (tp_stat_list()); the reason first
		 * (relaxed), then the result, release: pairs with the relaxed reads of an entry
		 * copy there, which only a torn copy can see in the wrong order (then it shows
		 * the older state once) */
		atomic_store_explicit(&c->ent->result_reason, fo_reason_code(fo->why),
				      memory_order_relaxed);
		atomic_store_explicit(&c->ent->result, TP_ENT_MOVED, memory_order_release);
	}
	fo_set(c, state);
	atomic_fetch_sub_explicit(&tp_fo_active, 1, memory_order_relaxed); /* (a count) */
	LOG(LL_DEBUG, "transport: slot %u: failover %s (%s) %llu ms after it was requested",
	    c->slot, state == TP_FO_DONE ? "done" : state == TP_FO_LINKED ? "to another link done" :
	    "failed", fo->why,
	    (unsigned long long)(tp_now_ms() - fo->start_ms));
	tp_event_signal();
}

/* One unreleased message of the send side, in the shadows. */
struct fo_msg {
	uint32_t msn, len;
	const uint8_t *a;   /* payload: A (LA bytes), then B (the ring's wrap) */
	uint32_t la;
	const uint8_t *b;
};

static bool fo_inline_msg(const struct tp_conn *c, uint32_t pos, struct fo_msg *m)
{
	const uint8_t *s = c->sh_inline + (pos & (c->out.inline_n - 1)) * 128u;
	uint16_t len;

	memcpy(&len, s + TP_INL_LEN, 2);
	memcpy(&m->msn, s + TP_INL_MSN, 4);
	if (len > TP_INLINE_MAX)
		return false;
	m->len = len;
	m->a = s + tp_inline_off(len);
	m->la = len;
	m->b = NULL;
	return true;
}

static bool fo_data_msg(const struct tp_conn *c, uint32_t pos, struct fo_msg *m, uint32_t *fp)
{
	uint32_t q = c->out.qsize;
	struct tp_desc d;

	memcpy(&d, c->sh_data + (pos & (q - 1)), sizeof(d));
	if ((d.type != TP_MT_SHORT && d.type != TP_MT_LONG) || d.len > q)
		return false;
	uint32_t p = (pos + tp_payload_gap(d.type, pos)) & (q - 1);

	m->msn = d.msn;
	m->len = d.len;
	m->a = c->sh_data + p;
	m->la = d.len < q - p ? d.len : q - p;
	m->b = c->sh_data;
	*fp = tp_footprint(d.type, pos, d.len);
	return true;
}

/* (System calls, not libc: preload/ wraps those, and the helper runs outside its guard.) */

int tp_fo_collect(struct tp_conn *c, size_t hdr, uint8_t **ret, size_t *ret_len,
		  uint64_t *ret_start)
{
	uint32_t i = c->fb_rx_i, d = c->fb_rx_d;
	uint64_t total = 0;
	size_t cap = hdr;
	uint8_t *buf;

	/* (a merged message held back is in the tail: tx_d covers it; not for a death of ours to
	 * deliver any more, and the peer's data ring is not kept for it: tp_rx_held_next()) */
	if (tp_tx_held(c))
		tp_tx_held_word(c, 0);
	tp_tx_hold_drop(c);
	/* the tail is at most what the rings hold */
	cap += (size_t)(c->tx_i - c->fb_rx_i) * 128u + (size_t)(c->tx_d - c->fb_rx_d);
	if (c->pre_buf) /* (and the rest of an earlier move's tail: tp_fo_snapshot()) */
		cap += c->pre_len - c->pre_off;
	buf = malloc(cap ? cap : 1);
	if (!buf)
		return -ENOMEM;
	uint8_t *o = buf + hdr;

	while (i != c->tx_i || d != c->tx_d) {
		struct fo_msg mi, md;
		uint32_t fp = 0;
		bool hi = i != c->tx_i && fo_inline_msg(c, i, &mi);
		bool hd = d != c->tx_d && fo_data_msg(c, d, &md, &fp);

		if ((i != c->tx_i && !hi) || (d != c->tx_d && !hd)) {
			free(buf);
			return -EPROTO; /* our own shadow makes no sense: a bug, never guess */
		}
		bool take_i = hi && (!hd || (int32_t)(mi.msn - md.msn) < 0);
		struct fo_msg *m = take_i ? &mi : &md;

		memcpy(o, m->a, m->la);
		if (m->len > m->la)
			memcpy(o + m->la, m->b, m->len - m->la);
		o += m->len;
		total += m->len;
		if (take_i) {
			i++;
		} else {
			d += fp;
			if (d - c->fb_rx_d > c->tx_d - c->fb_rx_d) {
				free(buf);
				return -EPROTO;
			}
		}
	}
	struct tp_stats st;

	tp_stats_load(&st, c->st); /* (relaxed; we hold tx_lock, the writer's lock) */
	uint64_t sent = st.tx_bytes;

	if (total > sent) {
		free(buf);
		return -EPROTO;
	}
	if (c->pre_buf) { /* the bytes that follow what was sent here */
		memcpy(o, c->pre_buf + c->pre_off, c->pre_len - c->pre_off);
		o += c->pre_len - c->pre_off;
	}
	*ret = buf;
	*ret_len = (size_t)(o - buf) - hdr;
	*ret_start = sent - total;
	return 0;
}

/* Does C's failover FO carry a framed stream to the kernel socket (its bytes unframed)? */
static bool fo_framed(const struct tp_conn *c, const struct tp_fo *fo)
{
	return c->sp_of && c->sp_idx == 0 && !fo->to_link;
}

/* Under tx_lock: the header and every unreleased byte in MSN order (a framed stream's part 0
 * going to the kernel socket: the stream's bytes, unframed, from both parts: tp_stripe.c). */
static int fo_build_tail(struct tp_conn *c, struct tp_fo *fo, uint64_t consumed)
{
	const size_t hl = sizeof(struct tp_fo_hdr);
	uint64_t start;
	size_t len;
	int rc = fo_framed(c, fo) ?
		 tp_stripe_fo_tail(c->sp_of, c, hl, &fo->tx, &len, &start) :
		 tp_fo_collect(c, hl, &fo->tx, &len, &start);

	if (rc)
		return rc;
	struct tp_fo_hdr h = {
		.magic = TP_FO_MAGIC, .version = TP_FO_VERSION, .flags = c->moves,
		.start = start, .consumed = consumed,
	};

	h.crc = crc32c(0, &h, offsetof(struct tp_fo_hdr, crc));
	memcpy(fo->tx, &h, sizeof(h));
	fo->tx_len = hl + len;
	fo->tx_off = 0;
	LOG(LL_DEBUG, "transport: slot %u: failover tail from %llu, %llu bytes%s", c->slot,
	    (unsigned long long)h.start, (unsigned long long)len,
	    fo_framed(c, fo) ? " (a framed stream's, unframed)" : "");
	return 0;
}

static uint64_t rx_consumed(const struct tp_conn *c, const struct tp_fo *fo)
{
	struct tp_stats st;

	if (fo_framed(c, fo)) /* (a framed stream: the program's bytes it delivered) */
		return tp_stripe_rx_app(c->sp_of);

	tp_stats_load(&st, c->st); /* (relaxed; the callers hold rx_lock, the writer's lock) */
	return st.rx_bytes + c->rx_discarded;
}

/* Under both locks, once: what goes out, and the NTB side stops (the peer learns it). A
 * connection an earlier move went to may still hold the rest of that tail (its prefix): it
 * follows in the tail, and its FIN becomes ours. -EAGAIN: its flusher is busy, next time. */
static int fo_snapshot(struct tp_conn *c, struct tp_fo *fo)
{
	/* relaxed: a hint, decided under the prefix lock taken below */
	bool busy = false, pre = atomic_load_explicit(&c->pre_on, memory_order_relaxed);

	/* acquire: pairs with the release in tp_prefix_unlock() (a try: a flusher holding it
	 * waits for the tx lock we hold) */
	if (pre && !atomic_compare_exchange_strong_explicit(&c->pre_busy, &busy, true,
							    memory_order_acquire,
							    memory_order_relaxed))
		return -EAGAIN;
	/* The tail's place in each stream comes from the connection's counters in the host table
	 * (tx_bytes, rx_bytes: shared with the processes that held it before a fork or exec). A
	 * table another session of this side rebuilt (its processes all gone by its count: an
	 * unclaimed process, as a forked child was before it claimed its own, went on using it)
	 * holds zeros there: a header built from them put the tail at the wrong place of the
	 * peer's stream (a client read 1000 bytes again, as new). Reset instead. */
	int rc = c->link->host->session_epoch != ntb_link_epoch(c->link->ntb) ? -ESTALE :
		 fo_build_tail(c, fo, rx_consumed(c, fo));

	if (rc == -ESTALE)
		LOG(LL_INFO, "transport: slot %u: failover: the host table was rebuilt by a new "
		    "session of this side: the stream's position is lost: reset", c->slot);

	if (pre && !rc) {
		/* relaxed (pre_fin, pre_on): under the prefix lock, which every writer holds */
		if (atomic_load_explicit(&c->pre_fin, memory_order_relaxed))
			c->wr_shut = true; /* (the kernel's FIN after the tail: fo_io_tx()) */
		free(c->pre_buf);
		c->pre_buf = NULL;
		if (atomic_exchange_explicit(&c->pre_on, false, memory_order_relaxed))
			atomic_fetch_sub_explicit(&tp_fo_active, 1, memory_order_relaxed);
	}
	if (pre)
		tp_prefix_unlock(c);
	if (rc)
		return rc;
	/* a peer whose link still works learns it at once (else from its TCP socket, or its own
	 * view of the link) */
	tp_conn_st_add(c, fo->to_link ? TP_ST_MOVING : TP_ST_FAILOVER);
	/* the link's counter (tp_link_stat()): host-local, shared by this host's processes */
	atomic_fetch_add_explicit(&c->link->host->totals.failovers, 1, memory_order_relaxed);
	ntb_peer_db_ring(c->link->ntb);
	fo->snap = true;
	return 0;
}

int tp_fo_hdr_parse(const uint8_t *b, size_t len, uint64_t *ret_start)
{
	struct tp_fo_hdr h;

	if (len != sizeof(h))
		return -EPROTO;
	memcpy(&h, b, sizeof(h)); /* (a private copy: the bytes came from another host) */
	if (h.magic != TP_FO_MAGIC || h.version != TP_FO_VERSION ||
	    h.crc != crc32c(0, &h, offsetof(struct tp_fo_hdr, crc)))
		return -EPROTO;
	*ret_start = h.start;
	return 0;
}

int tp_fo_rx_skip(const uint8_t *b, size_t len, uint64_t consumed, uint64_t *ret_skip)
{
	uint64_t start;

	if (tp_fo_hdr_parse(b, len, &start))
		return -EPROTO;
	if (start > consumed)
		return -ECONNRESET; /* the peer resends from beyond what we have: bytes missing */
	*ret_skip = consumed - start;
	return 0;
}

/* Under rx_lock, with the peer's header: drop everything the NTB side holds (the kernel
 * stream carries it again), and what to skip of the peer's tail. */
static int fo_rx_switch(struct tp_conn *c, struct tp_fo *fo)
{
	uint64_t have = rx_consumed(c, fo), skip;
	int rc = tp_fo_rx_skip(fo->hdr, sizeof(fo->hdr), have, &skip);
	uint16_t moves;

	if (rc == -EPROTO)
		return rc;
	if (c->link->host->session_epoch != ntb_link_epoch(c->link->ntb))
		return -ESTALE; /* (the count read zeros: as in fo_snapshot()) */
	memcpy(&moves, fo->hdr + offsetof(struct tp_fo_hdr, flags), sizeof(moves));
	if (!rc && moves != c->moves) {
		/* the peer resumes another connection of the chain than we do (one side had
		 * finished a move when the new link was lost too): offsets of different streams */
		LOG(LL_DEBUG, "transport: slot %u: failover: the peer resumes after %u moves, we "
		    "after %u: reset", c->slot, moves, c->moves);
		rc = -ECONNRESET;
	}
	c->rec_tail = c->rec_head;
	c->rec_bytes = 0;
	c->rec_off = 0;
	c->rx_bounce_ok = false;
	c->inl_hold_ok = false;
	if (rc) {
		LOG(LL_DEBUG, "transport: slot %u: failover: the peer resends from beyond the %llu "
		    "bytes consumed: bytes missing", c->slot, (unsigned long long)have);
		return rc;
	}
	fo->skip = skip;
	fo->hdr_ok = true;
	return 0;
}

/* The way the tail and the peer's header go: the connection on the other link (a move), else
 * the kernel socket. Bytes, 0 (the peer's end), or a negative errno (-EAGAIN: later). */
static long fo_send(struct tp_fo *fo, const void *b, size_t n)
{
	if (fo->to_link) {
		struct iovec v = { .iov_base = (void *)b, .iov_len = n };

		return tp_send(fo->next, &v, 1);
	}
	long r = raw_send(fo->fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);

	return r < 0 ? -errno : r;
}

static long fo_recv(struct tp_fo *fo, void *b, size_t n)
{
	if (fo->to_link) {
		struct iovec v = { .iov_base = b, .iov_len = n };

		return tp_recv(fo->next, &v, 1, 0);
	}
	long r = raw_recv(fo->fd, b, n, MSG_DONTWAIT);

	return r < 0 ? -errno : r;
}

static void fo_shut(struct tp_fo *fo)
{
	if (fo->to_link)
		tp_shutdown(fo->next, SHUT_WR); /* (its FIN follows the tail) */
	else
		raw_shutdown(fo->fd, SHUT_WR);
}

/* The header and tail out, then the FIN when the writing was shut: 0, or a negative errno. */
static int fo_io_tx(struct tp_conn *c, struct tp_fo *fo)
{
	while (fo->tx_off < fo->tx_len) {
		long n = fo_send(fo, fo->tx + fo->tx_off, fo->tx_len - fo->tx_off);

		if (n == -EAGAIN || n == -EINTR)
			break;
		if (n <= 0)
			return -ECONNRESET;
		fo->tx_off += (size_t)n;
	}
	if (fo->tx_off == fo->tx_len && !fo->shut_done && tp_mutex_trylock(&c->tx_lock) == 0) {
		bool shut = c->wr_shut;

		tp_mutex_unlock(&c->tx_lock);
		if (shut) {
			fo_shut(fo);
			fo->shut_done = true;
		}
	}
	return 0;
}

/* The peer's header in, and the receive side switched: 1, 0 (not yet), or a negative errno. */
static int fo_io_hdr(struct tp_conn *c, struct tp_fo *fo)
{
	while (!fo->hdr_ok) {
		if (fo->hdr_got < sizeof(fo->hdr)) {
			long n = fo_recv(fo, fo->hdr + fo->hdr_got, sizeof(fo->hdr) - fo->hdr_got);

			if (n == -EAGAIN || n == -EINTR)
				return 0;
			if (n <= 0)
				return -ECONNRESET; /* the peer's socket ended without its header */
			fo->hdr_got += (unsigned)n;
			continue;
		}
		/* (whole: switch the receive side, once its lock is free; a framed stream's too,
		 * taken first as its readers do) */
		bool framed = fo_framed(c, fo);

		if (framed && tp_stripe_rx_trylock(c->sp_of))
			return 0;
		if (tp_mutex_trylock(&c->rx_lock)) {
			if (framed)
				tp_stripe_rx_unlock(c->sp_of);
			return 0; /* a reader is finishing: next time (hdr_got stays complete) */
		}
		int rc = fo_rx_switch(c, fo);

		tp_mutex_unlock(&c->rx_lock);
		if (framed)
			tp_stripe_rx_unlock(c->sp_of);
		if (rc)
			return rc;
	}
	return 1;
}

/* Move what can move without blocking. 0 (more to do), 1 (done) or a negative errno.
 *
 * On another link the client writes only once the server's header is in: from then on neither
 * side gives the move up for time (mv_step()), so that a server whose header went out never
 * finds the client gone to the kernel socket while it took the new connection for the stream. */
static int fo_io(struct tp_conn *c, struct tp_fo *fo)
{
	bool answer = fo->to_link && fo->client && !fo->hdr_ok;
	int rc;

	if (!answer && (rc = fo_io_tx(c, fo)))
		return rc;
	rc = fo_io_hdr(c, fo);
	if (rc <= 0)
		return rc;
	if (answer && (rc = fo_io_tx(c, fo)))
		return rc;
	while (fo->skip) {
		uint8_t junk[16384];
		long n = fo_recv(fo, junk, fo->skip < sizeof(junk) ? fo->skip : sizeof(junk));

		if (n == -EAGAIN || n == -EINTR)
			return 0;
		if (n <= 0)
			return -ECONNRESET;
		fo->skip -= (uint64_t)n;
	}
	/* On another link the rest of the tail may follow as the new connection's prefix
	 * (mv_finish()): waiting for it here could wait for ever, each side's tail filling the
	 * other's ring while neither program may read yet. */
	if (fo->to_link)
		return 1;
	if (fo->tx_off < fo->tx_len)
		return 0;
	bool shut;

	if (tp_mutex_trylock(&c->tx_lock))
		return 0;
	shut = c->wr_shut;
	tp_mutex_unlock(&c->tx_lock);
	return shut && !fo->shut_done ? 0 : 1;
}

/* --- a move to another link ------------------------------------------------------------------ */

/* The server's side: the client's re-attachment on any other link of the group. 1 taken, 0 not
 * there (yet), -1 failed. */
static int mv_attach(struct tp_conn *c, struct tp_fo *fo)
{
	struct tp_link *others[TP_GROUP_LINKS];
	int n = tp_link_group_others(c->link, others, TP_GROUP_LINKS);

	for (int i = 0; i < n; i++) {
		int rc = tp_attach(others[i], &fo->key, &fo->next);

		if (rc == 0) {
			fo->to = others[i];
			return 1;
		}
		if (rc != -ENOENT)
			return -1;
	}
	return 0;
}

/* Under fo->lock: the connection on the other link, made or taken. 1 ready, 0 wait, -1: the
 * kernel socket instead (no answer in time, the new one failed, or the peer chose it). */
static int mv_step(struct tp_conn *c, struct tp_fo *fo)
{
	if (tp_fo_peer_spoke(c))
		return -1; /* the peer's failover header is on the kernel socket */
	/* Time runs out only while the other side may still give up: for the server until it took
	 * the re-attachment (then it answers at once, and the client's header follows its own),
	 * for the client until the server's header is in (fo_io()). A new connection that fails
	 * ends the move at any time (the peer sees it fail too). */
	bool committed = fo->client ? fo->hdr_ok : fo->next != NULL;

	if (!committed && tp_now_ms() >= fo->move_end_ms)
		return -1;
	if (fo->next)
		return tp_conn_error(fo->next) || tp_fo_get(fo->next) ? -1 : 1;
	int rc = fo->client ? tp_connect_reattach(fo->to, &fo->key, TP_MOVE_SETUP_MS, &fo->next) :
		 mv_attach(c, fo);

	if (rc < 0) {
		LOG(LL_DEBUG, "transport: slot %u: no re-attachment on the other link (%d)", c->slot,
		    rc);
		fo->next = NULL;
		return -1;
	}
	if (!fo->next)
		return 0; /* (the server: not there yet) */
	fo->next->moves = c->moves + 1; /* (before anything can fail it over: fo_build_tail()) */
	fo->next->framed_part = c->framed_part;
	fo->next->sp_of = c->sp_of;
	fo->next->sp_idx = c->sp_idx;
	if (c->sp_of)
		tp_stripe_ref(c->sp_of); /* (dropped when it is recycled: tp_stripe_free()) */
	return 1;
}

/* Under fo->lock: a framed stream's part 0 whose move gave way to the kernel socket takes its
 * tail again as the stream's, its own part of it being what it took for the move (its shadows
 * may have been released since). 0, -EAGAIN (a lock busy: next time), or an error. */
static int fo_resnap(struct tp_conn *c, struct tp_fo *fo)
{
	const size_t hl = sizeof(struct tp_fo_hdr);
	uint8_t *tx;
	size_t len;
	uint64_t start;
	int rc;

	if (!c->sp_of)
		return -ECONNRESET; /* (its handle was closed meanwhile) */
	rc = tp_stripe_fo_tail_from(c->sp_of, c, fo->tx + hl, fo->tx_len - hl, hl, &tx, &len,
				    &start);
	if (rc)
		return rc;
	struct tp_fo_hdr h = {
		.magic = TP_FO_MAGIC, .version = TP_FO_VERSION, .flags = c->moves,
		.start = start, .consumed = tp_stripe_rx_app(c->sp_of),
	};

	h.crc = crc32c(0, &h, offsetof(struct tp_fo_hdr, crc));
	memcpy(tx, &h, sizeof(h));
	free(fo->tx);
	fo->tx = tx;
	fo->tx_len = hl + len;
	fo->tx_off = 0;
	fo->resnap = false;
	LOG(LL_DEBUG, "transport: slot %u: failover tail from %llu, %zu bytes (a framed "
	    "stream's, unframed, after a move)", c->slot, (unsigned long long)start, len);
	return 0;
}

/* Under fo->lock: the move gives way to the kernel socket; the tail goes there from its start
 * (nothing was delivered from the other link: the peer's header only counts when whole). */
static void mv_to_tcp(struct tp_conn *c, struct tp_fo *fo)
{
	bool framed = c->framed_part;

	/* No kernel socket for a framed stream's part 1 (nor for a part whose handle was
	 * closed): it fails (the peer reads a reset), and part 1's loss sends part 0 to the
	 * kernel socket with the stream's tail. Part 0 goes there itself, its tail taken again
	 * as the stream's (fo->resnap: tp_fo_progress()). */
	if (framed && !(c->sp_of && c->sp_idx == 0)) {
		LOG(LL_DEBUG, "transport: slot %u: framed: the move failed, no tcp: reset", c->slot);
		if (fo->next)
			tp_abort(fo->next);
		fo->next = NULL;
		fo->to_link = false;
		tp_conn_st_add(c, TP_ST_RST);
		ntb_peer_db_ring(c->link->ntb);
		fo_end(c, fo, TP_FO_FAILED, -ECONNRESET);
		if (c->sp_of && c->sp_idx == 1)
			tp_stripe_part_lost(c->sp_of, "stripe lost");
		return;
	}
	LOG(LL_DEBUG, "transport: slot %u: the move to another link gives way to tcp%s", c->slot,
	    framed ? " (a framed stream's tail)" : "");
	if (fo->next)
		tp_abort(fo->next);
	fo->next = NULL;
	fo->to_link = false;
	fo->tx_off = 0;
	fo->shut_done = false;
	fo->hdr_got = 0;
	fo->hdr_ok = false;
	fo->skip = 0;
	if (framed)
		fo->resnap = fo->snap; /* (not taken yet: fo_snapshot() takes it so) */
	tp_conn_st_add(c, TP_ST_FAILOVER);
	ntb_peer_db_ring(c->link->ntb);
}

/* Under fo->lock, the peer's header in and what we had of its tail skipped: the new connection
 * carries the stream from now on (the rest of our tail first, as its prefix); C's slot is freed
 * and C becomes its shell. */
static void mv_finish(struct tp_conn *c, struct tp_fo *fo)
{
	struct tp_conn *n = fo->next;
	/* acquire: pairs with the release store in tp_conn_set_witness() */
	int w = atomic_load_explicit(&c->witness_fd1, memory_order_acquire) - 1;

	/* relaxed: informational (stat), set by the program's thread (tp_conn_set_owner()) */
	atomic_store_explicit(&n->ent->pid, atomic_load_explicit(&c->ent->pid, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&n->ent->fd, atomic_load_explicit(&c->ent->fd, memory_order_relaxed),
			      memory_order_relaxed);
	n->tx_cap = c->tx_cap;
	if (c->rd_shut)
		tp_shutdown(n, SHUT_RD);
	tp_conn_set_witness(c, -1);
	if (w >= 0)
		tp_conn_set_witness(n, w);
	tp_conn_free_slot(c);
	/* (under C's tx lock: a shutdown(SHUT_WR) of C either came before, and its FIN follows
	 * the tail, or finds C moved and goes to N: tp_shutdown()) */
	tp_mutex_lock(&c->tx_lock);
	bool fin = c->wr_shut && !fo->shut_done;

	if (fo->tx_off < fo->tx_len || fin) {
		tp_prefix_set(n, fo->tx, fo->tx_len, fo->tx_off, fin);
		fo->tx = NULL;
	}
	/* release: the new connection's state before the pointer; pairs with tp_conn_cur() */
	atomic_store_explicit(&c->moved_to, n, memory_order_release);
	if (c->sp_of) /* (a framed stream's part: its failovers find it there now) */
		tp_stripe_moved(c->sp_of, c->sp_idx, n);
	tp_mutex_unlock(&c->tx_lock);
	fo->next = NULL; /* (n's now: closing C closes it) */
	fo_end(c, fo, TP_FO_LINKED, 0);
	/* acquire: pairs with the store of closed in tp_close() (under fo->lock, as here) */
	if (atomic_load_explicit(&c->closed, memory_order_acquire))
		tp_close(n); /* closed while it moved (tp_close() takes fo->lock) */
}

void tp_fo_progress(struct tp_conn *c)
{
	/* acquire: pairs with the CAS in tp_fo_request() */
	struct tp_fo *fo = atomic_load_explicit(&c->fo, memory_order_acquire);
	int rc = 0;

	if (!fo || tp_fo_get(c) != TP_FO_RUN || pthread_mutex_trylock(&fo->lock))
		return;
	if (tp_fo_get(c) != TP_FO_RUN)
		goto out;
	if (!fo->snap) {
		/* both sides quiet: a send or receive under way finishes first */
		if (tp_mutex_trylock(&c->tx_lock))
			goto out;
		if (tp_mutex_trylock(&c->rx_lock)) {
			tp_mutex_unlock(&c->tx_lock);
			goto out;
		}
		rc = fo_snapshot(c, fo);
		tp_mutex_unlock(&c->rx_lock);
		tp_mutex_unlock(&c->tx_lock);
		if (rc == -EAGAIN)
			goto out;
		if (rc)
			goto fail;
	}
	if (fo->to_link) {
		rc = mv_step(c, fo);
		if (rc == 0)
			goto out;
		if (rc < 0)
			mv_to_tcp(c, fo);
		if (tp_fo_get(c) != TP_FO_RUN)
			goto out; /* (a framed stream's part: failed there) */
	}
	if (fo->resnap) {
		rc = fo_resnap(c, fo);
		if (rc == -EAGAIN)
			goto out;
		if (rc)
			goto fail;
	}
	rc = fo_io(c, fo);
	if (rc == 1 && fo->to_link) {
		mv_finish(c, fo);
	} else if (rc == 1) {
		fo_end(c, fo, TP_FO_DONE, 0);
	} else if (rc < 0 && fo->to_link) {
		mv_to_tcp(c, fo); /* (the new connection broke: the kernel socket next time) */
	} else if (rc < 0) {
		goto fail;
	}
out:
	pthread_mutex_unlock(&fo->lock);
	return;
fail:
	fo_end(c, fo, TP_FO_FAILED, rc == -ENOMEM ? -ENOMEM : -ECONNRESET);
	pthread_mutex_unlock(&fo->lock);
}

void tp_fo_abandon(struct tp_conn *c)
{
	/* acquire: pairs with the CAS in tp_fo_request() */
	struct tp_fo *fo = atomic_load_explicit(&c->fo, memory_order_acquire);
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (!fo || pthread_mutex_trylock(&fo->lock))
		return;
	if (tp_fo_get(c) == TP_FO_RUN && fo->fd >= 0) {
		/* (no shutdown: a FIN now would end the peer's stream short) */
		raw_setsockopt(fo->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		LOG(LL_DEBUG, "transport: slot %u: failover not finished at exit: reset", c->slot);
	}
	pthread_mutex_unlock(&fo->lock);
}

void tp_fo_free(struct tp_conn *c)
{
	/* relaxed: C is finished, this is its last user */
	struct tp_fo *fo = atomic_load_explicit(&c->fo, memory_order_relaxed);

	if (!fo)
		return;
	if (tp_fo_get(c) == TP_FO_RUN) {
		if (fo->fd >= 0)
			raw_close(fo->fd);
		if (fo->next)
			tp_abort(fo->next); /* a move under way ends with C */
		atomic_fetch_sub_explicit(&tp_fo_active, 1, memory_order_relaxed); /* (a count) */
	}
	free(fo->tx);
	pthread_mutex_destroy(&fo->lock);
	free(fo);
	atomic_store_explicit(&c->fo, NULL, memory_order_relaxed); /* (as above) */
}

/* (ordering: tp_write_st()'s barrier before the word; tp_st_flags() loads it with acquire) */
void tp_conn_st_add(struct tp_conn *c, uint32_t flags)
{
	/* (the entry names the same peer slot and nonce as c->out.slot_off, c->nonce_out) */
	tp_ent_st_add(c->link, c->ent, flags);
}

int tp_fo_snap_tail(struct tp_conn *c, uint8_t **ret, size_t *ret_len)
{
	/* acquire: pairs with the CAS in tp_fo_request() */
	struct tp_fo *fo = atomic_load_explicit(&c->fo, memory_order_acquire);
	int rc = -ENOENT;

	if (!fo)
		return -ENOENT;
	if (pthread_mutex_trylock(&fo->lock))
		return -EAGAIN;
	if (fo->snap && fo->tx && fo->tx_len >= sizeof(struct tp_fo_hdr)) {
		size_t n = fo->tx_len - sizeof(struct tp_fo_hdr);

		*ret = malloc(n ? n : 1);
		if (*ret) {
			memcpy(*ret, fo->tx + sizeof(struct tp_fo_hdr), n);
			*ret_len = n;
			rc = 0;
		} else {
			rc = -ENOMEM;
		}
	} else if (fo->snap) {
		rc = -EPROTO; /* (its tail is gone with a failed move: never guess) */
	}
	pthread_mutex_unlock(&fo->lock);
	return rc;
}
