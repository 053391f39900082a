/* SPDX-License-Identifier: MIT */
/* [DRB] balancing: one connection's stream over two links to the same peer host.
 *
 * When both hosts' configs say `balance = true` for each other, a connection set up over a
 * link of the group is *framed* (TP_APPLY_FRAMED in its Apply, echoed by the Ack): every byte
 * of its stream travels inside numbered frames {magic, length, sequence} + payload, as [DRB]
 * numbers its packets so that the receiver restores their order. Frames go through the
 * connection itself (sub 0) and, once its sender found the link congested, through a second
 * connection to the same peer on another link of the group, the *stripe* (sub 1): set up by
 * the client with a re-attach Apply under the connection's key marked as the stripe's
 * (stripe_key()), taken by the server with tp_attach() when the client's ST word says
 * TP_ST_STRIPE_UP. A server whose sends find the link congested asks for it with
 * TP_ST_STRIPE_WANT.
 *
 * Sender (tx_lock): each frame goes to the connection whose link is not congested, the first
 * one preferred ([DRB]'s expansion onto another path when the path is congested, and its
 * contraction when the congestion ends). A link is congested when its modelled speed keeps
 * writes waiting (its clock is more than half its queue ahead: ntb_speed_backlog()) or when
 * the connection has no room for the frame (its receiver's ring is full: the sender would
 * wait for credit). Each is a congestion notice, counted. A frame is written whole: its
 * length is what the connection takes now (tp_tx_room()); a rest that was not taken
 * nonetheless (a race with the ring's grant) is kept here and goes first next time (pend).
 *
 * Receiver (rx_lock): reads the 16-byte header at the head of each connection; the frame
 * whose number is the next one is delivered, then its successor is looked for. A frame's
 * payload goes straight into the caller's buffers. End of stream: both connections ended
 * after whole frames. Anything else (a bad header, a connection that ends inside a frame or
 * while the next frame is still due from it) is a reset, never a short stream.
 *
 * Failures: each connection moves to another live link of the group by itself
 * (tp_failover.c), its frames going with its tail as bytes. Neither goes to the kernel socket
 * with its own tail (its program would read frames): when no link is left (or at exit, or
 * when the stripe is lost), part 0 takes the whole stream there, unframed: the program's
 * bytes from the first one not surely consumed by the peer, gathered from both parts'
 * shadows by the map of frames each part still holds (tp_stripe_fo_tail()), against the
 * program's bytes the peer's stream delivered. Not exported across exec (tp_conn_export()
 * refuses: the program's connection is reset).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tp_int.h"
#include "util/log.h"

#define TP_FRAME_MAGIC   0x4d52464eu /* "NFRM" little-endian */
#define TP_FRAME_HDR     16u
#define TP_FRAME_MAX     65536u  /* payload bytes of one frame at most */
#define TP_STRIPE_SETUP_MS 200u  /* the client's set-up of the stripe, at most */
#define TP_STRIPE_RETRY_MS 1000u /* a set-up that failed is tried again no sooner */
#define TP_STRIPE_SLICE_MS 1     /* a wait that does not know which connection brings the next
				  * frame looks at each in turn, this long */

struct frame_hdr {
	uint32_t magic;
	uint32_t len;
	uint64_t seq;
};
static_assert(sizeof(struct frame_hdr) == TP_FRAME_HDR, "frame header size");

/* A frame a part still holds unacknowledged (or may): its header's offset in the part's bytes,
 * its payload's in the program's stream, its length. */
struct frame_rec {
	uint64_t part_off, app_off;
	uint32_t len;
};

struct frame_map {
	struct frame_rec *v;
	size_t head, n, cap;  /* a FIFO in v[head .. head + n) modulo cap */
	uint32_t since_prune;
};

struct tp_stripe {
	pthread_mutex_t tx_lock, rx_lock;
	struct tp_conn *sub0;            /* the connection (the handle) */
	struct tp_conn *_Atomic sub1;    /* the stripe, NULL until set up (release) */
	bool client;
	struct tp_key key1;              /* the stripe's key */
	/* send side (tx_lock) */
	uint64_t tx_seq;
	int tx_cur;
	uint8_t *pend[2];                /* the rest of a frame not taken at once */
	uint32_t pend_len[2], pend_off[2];
	uint64_t try_ms;                 /* the last set-up attempt (client) */
	bool want_sent;                  /* server: TP_ST_STRIPE_WANT written */
	uint64_t part_tx[2];             /* bytes each part took (headers included) */
	uint64_t app_tx;                 /* the program's bytes the stream took */
	struct frame_map map[2];
	bool fo_taken;                   /* part 0 took the tail to the kernel socket: no more */
	/* receive side (rx_lock) */
	uint64_t rx_seq;
	struct frame_hdr hdr[2];
	uint32_t hdr_got[2];
	int rx_cur;
	uint32_t rx_rem;                 /* payload bytes of the current frame still to read */
	bool rx_eof[2];
	_Atomic int rx_err;              /* a framing error: sticky (written under rx_lock) */
	_Atomic uint64_t rx_app;         /* the program's bytes delivered (under rx_lock) */
	/* counters (relaxed) */
	_Atomic uint64_t frames[2], bytes[2], notices, expansions;
	/* Lifetime. REFS: the connections whose sp_of names this (each part's, and what each
	 * moved to; the handle is part 0's first); the last one recycled frees it, so a part that
	 * outlives its closed handle (lingering with bytes unacknowledged) still finds it. CUR:
	 * each part's connection now (moves update it, its recycling clears it), for the
	 * failover paths, which run also after the handle was closed; under parts_lock, which a
	 * user holds while it uses the connection (recycling waits for it). ENDED: the handle was
	 * closed or aborted (its parts are ended once). */
	_Atomic int refs;
	pthread_mutex_t parts_lock;
	struct tp_conn *cur[2];
	atomic_bool ended;
};

static struct tp_conn *sub_get(struct tp_stripe *sp, int i)
{
	/* acquire: the stripe's state before the pointer (pairs with the release in set_sub1()) */
	return i == 0 ? sp->sub0 : atomic_load_explicit(&sp->sub1, memory_order_acquire);
}

/* The stripe's key: the connection's, marked in bytes 34..35 (zero in every connection key:
 * transport.h), so that both hosts derive it and it never names another connection. */
static void stripe_key(const struct tp_key *k, struct tp_key *ret)
{
	*ret = *k;
	ret->bytes[34] = 'S';
	ret->bytes[35] = '1';
}

bool tp_stripe_wanted(struct tp_link *l)
{
	struct tp_link *others[1];

	/* relaxed: a setting (tp_link_set_balance()) */
	return atomic_load_explicit(&l->balance, memory_order_relaxed) &&
	       tp_link_group_others(l, others, 1) > 0;
}

int tp_stripe_new(struct tp_conn *c, bool client)
{
	struct tp_stripe *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return -ENOMEM;
	pthread_mutex_init(&sp->tx_lock, NULL);
	pthread_mutex_init(&sp->rx_lock, NULL);
	pthread_mutex_init(&sp->parts_lock, NULL);
	atomic_init(&sp->refs, 1);
	sp->cur[0] = c;
	sp->sub0 = c;
	sp->client = client;
	stripe_key(&c->ent->key, &sp->key1);
	c->framed_part = true;
	c->sp_of = sp;
	c->sp_idx = 0;
	c->sp = sp;
	return 0;
}

void tp_stripe_ref(struct tp_stripe *sp)
{
	/* relaxed: the caller holds a reference already (its own connection's) */
	atomic_fetch_add_explicit(&sp->refs, 1, memory_order_relaxed);
}

void tp_stripe_moved(struct tp_stripe *sp, int idx, struct tp_conn *n)
{
	pthread_mutex_lock(&sp->parts_lock);
	sp->cur[idx] = n;
	pthread_mutex_unlock(&sp->parts_lock);
}

void tp_stripe_free(struct tp_conn *c)
{
	struct tp_stripe *sp = c->sp_of;

	c->sp = NULL;
	if (!sp)
		return;
	c->sp_of = NULL;
	pthread_mutex_lock(&sp->parts_lock);
	for (int i = 0; i < 2; i++)
		if (sp->cur[i] == c)
			sp->cur[i] = NULL;
	pthread_mutex_unlock(&sp->parts_lock);
	/* acq_rel: every user's writes before the free */
	if (atomic_fetch_sub_explicit(&sp->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_destroy(&sp->parts_lock);
	free(sp->pend[0]);
	free(sp->pend[1]);
	free(sp->map[0].v);
	free(sp->map[1].v);
	pthread_mutex_destroy(&sp->tx_lock);
	pthread_mutex_destroy(&sp->rx_lock);
	free(sp);
}

static void set_sub1(struct tp_stripe *sp, struct tp_conn *n)
{
	n->framed_part = true;
	n->sp_of = sp;
	n->sp_idx = 1;
	tp_stripe_ref(sp);
	tp_stripe_moved(sp, 1, n);
	/* relaxed: a counter for `ntbsock stat` (host-local memory, several processes add) */
	atomic_fetch_add_explicit(&n->link->host->totals.expansions, 1, memory_order_relaxed);
	/* release: pairs with the acquire in sub_get() */
	atomic_store_explicit(&sp->sub1, n, memory_order_release);
}

/* Client: set the stripe up on another live link of the group (at most TP_STRIPE_SETUP_MS,
 * once a TP_STRIPE_RETRY_MS). */
static void stripe_setup(struct tp_stripe *sp)
{
	uint64_t now = tp_now_ms();
	struct tp_conn *cur = tp_conn_cur(sp->sub0), *n = NULL;
	struct tp_link *l2;

	if (sub_get(sp, 1) || (sp->try_ms && now - sp->try_ms < TP_STRIPE_RETRY_MS))
		return;
	sp->try_ms = now;
	l2 = tp_link_alt(cur->link);
	if (!l2)
		return;
	if (tp_connect_reattach(l2, &sp->key1, TP_STRIPE_SETUP_MS, &n)) {
		LOG(LL_DEBUG, "transport: slot %u: no stripe on the other link", cur->slot);
		return;
	}
	set_sub1(sp, n);
	tp_conn_st_add(cur, TP_ST_STRIPE_UP);
	LOG(LL_DEBUG, "transport: slot %u: stripe set up (slot %u)", cur->slot, n->slot);
}

/* Server: the client's stripe, when its ST word says it is up. */
static void stripe_accept(struct tp_stripe *sp)
{
	struct tp_conn *cur = tp_conn_cur(sp->sub0), *n = NULL;
	struct tp_link *others[TP_GROUP_LINKS];
	int k;

	if (sp->client || sub_get(sp, 1) || !(tp_st_flags(cur) & TP_ST_STRIPE_UP))
		return;
	k = tp_link_group_others(cur->link, others, TP_GROUP_LINKS);
	for (int i = 0; i < k; i++) {
		if (tp_attach(others[i], &sp->key1, &n) == 0) {
			set_sub1(sp, n);
			LOG(LL_DEBUG, "transport: slot %u: stripe attached (slot %u)", cur->slot,
			    n->slot);
			return;
		}
	}
	/* (a stripe that moved off its link: the move re-attaches it on ours, also ours) */
	if (tp_attach(cur->link, &sp->key1, &n) == 0)
		set_sub1(sp, n);
}

/* The stripe is wanted: the client sets it up, the server asks the client (once) and attaches
 * it once the client says it is up. */
static void stripe_want(struct tp_stripe *sp)
{
	if (sub_get(sp, 1))
		return;
	if (sp->client) {
		stripe_setup(sp);
		return;
	}
	if (!sp->want_sent) {
		sp->want_sent = true;
		tp_conn_st_add(tp_conn_cur(sp->sub0), TP_ST_STRIPE_WANT);
	}
	stripe_accept(sp);
}

/* Client: the server asked for the stripe. */
static void stripe_look(struct tp_stripe *sp)
{
	if (sub_get(sp, 1))
		return;
	if (sp->client) {
		if (tp_st_flags(tp_conn_cur(sp->sub0)) & TP_ST_STRIPE_WANT)
			stripe_setup(sp);
	} else {
		stripe_accept(sp);
	}
}

/* Part 0's failover to the kernel socket with the stream's tail: 0 (none), -EAGAIN (under
 * way), -EXDEV (done: the caller goes on over the socket), or its error (failed). */
static int stream_fo(struct tp_stripe *sp)
{
	struct tp_conn *c0 = tp_conn_cur(sp->sub0);
	int st = tp_fo_get(c0);

	if (st == TP_FO_NONE)
		return 0;
	if (st == TP_FO_DONE)
		return -EXDEV;
	if (st == TP_FO_FAILED)
		return tp_conn_err(c0) ? tp_conn_err(c0) : -ECONNRESET;
	return -EAGAIN;
}

/* A part's error as the framed stream reports it: part 0's failover as stream_fo() says;
 * anything else of part 0 as it is. Part 1's end or error sends part 0 to the kernel socket
 * (its bytes are in that tail): -EAGAIN meanwhile. */
static ssize_t sub_err_at(struct tp_stripe *sp, int i, ssize_t r)
{
	if (i == 1 && r < 0 && r != -EAGAIN && r != -ENOMEM) {
		tp_stripe_part_lost(sp, "stripe lost");
		return -EAGAIN;
	}
	if (r == -EXDEV) {
		int f = stream_fo(sp);

		return f ? f : -ECONNRESET;
	}
	return r;
}

int tp_stripe_part0_fo(struct tp_stripe *sp)
{
	pthread_mutex_lock(&sp->parts_lock);
	int st = sp->cur[0] ? tp_fo_get(sp->cur[0]) : TP_FO_FAILED;

	pthread_mutex_unlock(&sp->parts_lock);
	return st;
}

void tp_stripe_part_lost(struct tp_stripe *sp, const char *why)
{
	/* (part 0's connection now: also after the handle was closed; none: it ended) */
	pthread_mutex_lock(&sp->parts_lock);
	struct tp_conn *c0 = sp->cur[0];

	if (c0 && tp_fo_get(c0) == TP_FO_NONE)
		tp_fo_request(c0, why);
	pthread_mutex_unlock(&sp->parts_lock);
}

/* --- sending ----------------------------------------------------------------------------------- */

/* Is connection S's link congested for a frame of LEN bytes? */
static bool congested(struct tp_conn *s, size_t len, size_t *ret_room)
{
	struct tp_conn *cur = tp_conn_cur(s);
	uint64_t backlog, ahead;

	*ret_room = tp_tx_room(cur);
	if (ntb_speed_backlog(cur->link->ntb, &backlog, &ahead) && backlog > ahead / 2u)
		return true;
	return *ret_room < len + TP_FRAME_HDR;
}

/* Under tx_lock: send what is left of sub I's frame; 0 when none is left, else -EAGAIN or
 * the connection's error. */
static int pend_flush(struct tp_stripe *sp, int i)
{
	while (sp->pend_off[i] < sp->pend_len[i]) {
		struct iovec v = { sp->pend[i] + sp->pend_off[i], sp->pend_len[i] - sp->pend_off[i] };
		ssize_t r = tp_send_one(sub_get(sp, i), &v, 1);

		if (r <= 0)
			return r == 0 ? -EAGAIN : (int)sub_err_at(sp, i, r);
		sp->pend_off[i] += (uint32_t)r;
		sp->part_tx[i] += (uint64_t)r;
	}
	sp->pend_len[i] = sp->pend_off[i] = 0;
	return 0;
}

static int pend_flush_all(struct tp_stripe *sp)
{
	int r = 0;

	for (int i = 0; i < 2; i++) {
		if (!sp->pend_len[i] || !sub_get(sp, i))
			continue;
		int e = pend_flush(sp, i);

		if (e && (r == 0 || r == -EAGAIN))
			r = e;
	}
	return r;
}

/* Frames of part I whose bytes the part surely no longer holds (the peer released them) leave
 * the map: those ending at or before its bytes less what is unacknowledged there. Only while
 * the part is plain (no failover, no rest of a moved tail going out: what it holds is then
 * what tp_unacked_bytes_one() counts, inline slots at 128 bytes, more than they carry). */
static void map_prune(struct tp_stripe *sp, int i)
{
	struct frame_map *m = &sp->map[i];
	struct tp_conn *cur = tp_conn_cur(sub_get(sp, i));

	m->since_prune = 0;
	/* relaxed pre_on: a hint, looked at again after the count */
	if (tp_fo_get(cur) || atomic_load_explicit(&cur->pre_on, memory_order_relaxed))
		return;
	uint64_t held = tp_unacked_bytes_one(cur);

	if (tp_fo_get(cur) || atomic_load_explicit(&cur->pre_on, memory_order_relaxed) ||
	    held > sp->part_tx[i])
		return;
	uint64_t keep_from = sp->part_tx[i] - held;

	while (m->n) {
		const struct frame_rec *f = &m->v[m->head];

		if (f->part_off + TP_FRAME_HDR + f->len > keep_from)
			break;
		m->head = (m->head + 1) % m->cap;
		m->n--;
	}
}

/* A frame sent on part I (or about to be): into the map. -ENOMEM. */
static int map_add(struct tp_stripe *sp, int i, uint64_t part_off, uint64_t app_off, uint32_t len)
{
	struct frame_map *m = &sp->map[i];

	if (m->n && ++m->since_prune >= 64u)
		map_prune(sp, i);
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2u : 256u;
		struct frame_rec *v = malloc(cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t k = 0; k < m->n; k++)
			v[k] = m->v[(m->head + k) % m->cap];
		free(m->v);
		m->v = v;
		m->head = 0;
		m->cap = cap;
	}
	m->v[(m->head + m->n) % m->cap] = (struct frame_rec){ part_off, app_off, len };
	m->n++;
	return 0;
}

/* Keep the rest of a frame that connection I did not take: the header's and payload's bytes
 * from offset DONE of the frame (header HDR, payload the first LEN bytes of IOV). */
static int pend_keep(struct tp_stripe *sp, int i, const struct frame_hdr *hdr,
		     const struct iovec *iov, int iovcnt, size_t len, size_t done)
{
	size_t total = TP_FRAME_HDR + len, o = 0;
	uint8_t *b = realloc(sp->pend[i], total);

	if (!b)
		return -ENOMEM;
	sp->pend[i] = b;
	memcpy(b, hdr, TP_FRAME_HDR);
	o = TP_FRAME_HDR;
	for (int k = 0; k < iovcnt && o < total; k++) {
		size_t n = iov[k].iov_len < total - o ? iov[k].iov_len : total - o;

		memcpy(b + o, iov[k].iov_base, n);
		o += n;
	}
	sp->pend_len[i] = (uint32_t)total;
	sp->pend_off[i] = (uint32_t)done;
	return 0;
}

/* The IOV array's first LEN bytes, starting SKIP bytes in, as at most 64 iovecs in OUT. */
static int iov_window(const struct iovec *iov, int iovcnt, size_t skip, size_t len,
		      struct iovec *out, int max)
{
	int n = 0;

	for (int k = 0; k < iovcnt && len && n < max; k++) {
		size_t l = iov[k].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		size_t take = l - skip < len ? l - skip : len;

		out[n].iov_base = (uint8_t *)iov[k].iov_base + skip;
		out[n].iov_len = take;
		n++;
		len -= take;
		skip = 0;
	}
	return n;
}

/* Under tx_lock: one frame of up to LEN bytes of IOV (from SKIP) on connection I, whose room
 * is ROOM: the payload bytes taken (the frame's length), or -EAGAIN / an error (none taken). */
static ssize_t frame_send(struct tp_stripe *sp, int i, const struct iovec *iov, int iovcnt,
			  size_t skip, size_t len, size_t room)
{
	struct tp_conn *s = sub_get(sp, i);
	struct iovec v[65];
	int n;
	ssize_t r;

	if (len > TP_FRAME_MAX)
		len = TP_FRAME_MAX;
	if (room < TP_FRAME_HDR + 1)
		return -EAGAIN;
	if (len > room - TP_FRAME_HDR)
		len = room - TP_FRAME_HDR;
	struct frame_hdr h = { TP_FRAME_MAGIC, (uint32_t)len, sp->tx_seq };

	n = iov_window(iov, iovcnt, skip, len, v + 1, 64);
	len = 0;
	for (int k = 1; k <= n; k++)
		len += v[k].iov_len;
	h.len = (uint32_t)len;
	v[0].iov_base = &h;
	v[0].iov_len = TP_FRAME_HDR;
	if (map_add(sp, i, sp->part_tx[i], sp->app_tx, (uint32_t)len))
		return -ENOMEM;
	/* a small frame in one message; a larger one's header in its own, so that reading the
	 * header does not split the payload's message (a split one is copied twice) */
	if (TP_FRAME_HDR + len <= s->link->params.inline_max || len <= 1024u) {
		r = tp_send_one(s, v, n + 1);
	} else {
		r = tp_send_one(s, v, 1);
		if (r == TP_FRAME_HDR) {
			ssize_t p = tp_send_one(s, v + 1, n);

			r = p > 0 ? TP_FRAME_HDR + p : TP_FRAME_HDR;
		}
	}
	if (r <= 0) {
		sp->map[i].n--; /* (not sent: not held) */
		return r == 0 ? -EAGAIN : sub_err_at(sp, i, r);
	}
	sp->part_tx[i] += (uint64_t)r;
	sp->app_tx += len;
	if ((size_t)r < TP_FRAME_HDR + len) {
		struct iovec w[64];
		int m = iov_window(iov, iovcnt, skip, len, w, 64);

		if (pend_keep(sp, i, &h, w, m, len, (size_t)r))
			return -ENOMEM; /* (bytes of the frame went: the stream is broken) */
	}
	sp->tx_seq++;
	atomic_fetch_add_explicit(&sp->frames[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sp->bytes[i], len, memory_order_relaxed);
	return (ssize_t)len;
}

/* Which connection takes the next frame of LEN bytes: the first unless its link is congested
 * and the stripe's is not ([DRB]: expand when congested, contract when it ends); -1: neither
 * has room. */
static int pick(struct tp_stripe *sp, size_t len, size_t room[2])
{
	struct tp_conn *s1 = sub_get(sp, 1);
	bool c0 = congested(sp->sub0, len, &room[0]), c1;

	room[1] = 0;
	if (!c0)
		return 0;
	atomic_fetch_add_explicit(&sp->notices, 1, memory_order_relaxed);
	if (!s1 || tp_conn_err(tp_conn_cur(s1)) || tp_fo_get(tp_conn_cur(s1)) || sp->pend_len[1]) {
		stripe_want(sp);
		return room[0] >= TP_FRAME_HDR + 1 && !sp->pend_len[0] ? 0 : -1;
	}
	c1 = congested(s1, len, &room[1]);
	if (!c1 || room[1] > room[0] || sp->pend_len[0]) {
		if (sp->tx_cur == 0)
			atomic_fetch_add_explicit(&sp->expansions, 1, memory_order_relaxed);
		return room[1] >= TP_FRAME_HDR + 1 ? 1 : -1;
	}
	return room[0] >= TP_FRAME_HDR + 1 ? 0 : -1;
}

static ssize_t stripe_send(struct tp_stripe *sp, const struct iovec *iov, int iovcnt)
{
	size_t total = 0, done = 0;
	ssize_t r = 0;

	for (int k = 0; k < iovcnt; k++)
		total += iov[k].iov_len;
	pthread_mutex_lock(&sp->tx_lock);
	int e = sp->fo_taken || stream_fo(sp) ? stream_fo(sp) : pend_flush_all(sp);

	if (sp->fo_taken && !e)
		e = -EAGAIN; /* (the tail is taken: nothing more goes out here) */
	if (e && e != -EAGAIN) {
		pthread_mutex_unlock(&sp->tx_lock);
		return e;
	}
	if (e && (sp->fo_taken || stream_fo(sp))) {
		pthread_mutex_unlock(&sp->tx_lock);
		return e;
	}
	if (total == 0) { /* (errors and shutdown as a one-connection send reports them) */
		r = e ? e : tp_send_one(sp->sub0, iov, iovcnt);
		pthread_mutex_unlock(&sp->tx_lock);
		return sub_err_at(sp, 0, r);
	}
	while (done < total) {
		size_t room[2], want = total - done;
		int i;

		if (want > TP_FRAME_MAX)
			want = TP_FRAME_MAX;
		i = pick(sp, want, room);
		if (i < 0) {
			r = -EAGAIN;
			break;
		}
		if (sp->pend_len[i]) {
			r = -EAGAIN;
			break;
		}
		r = frame_send(sp, i, iov, iovcnt, done, want, room[i]);
		if (r <= 0)
			break;
		sp->tx_cur = i;
		done += (size_t)r;
	}
	pthread_mutex_unlock(&sp->tx_lock);
	if (done)
		return (ssize_t)done;
	if (r == -EAGAIN) {
		/* nothing taken: the stripe may be wanted now (a sender that waits for credit) */
		pthread_mutex_lock(&sp->tx_lock);
		stripe_look(sp);
		pthread_mutex_unlock(&sp->tx_lock);
	}
	return r;
}

/* --- receiving --------------------------------------------------------------------------------- */

/* Under rx_lock: fill connection I's header; 1: whole, 0: not yet (-EAGAIN from it), or its
 * end (rx_eof[I]) or error (< 0). */
static int hdr_fill(struct tp_stripe *sp, int i)
{
	struct tp_conn *s = sub_get(sp, i);

	if (!s)
		return 0;
	while (sp->hdr_got[i] < TP_FRAME_HDR) {
		struct iovec v = { (uint8_t *)&sp->hdr[i] + sp->hdr_got[i],
				   TP_FRAME_HDR - sp->hdr_got[i] };
		ssize_t r = tp_recv_one(s, &v, 1, 0);

		if (r == -EAGAIN)
			return 0;
		if (r < 0)
			return (int)sub_err_at(sp, i, r);
		if (r == 0) {
			if (sp->hdr_got[i] && i == 1) {
				tp_stripe_part_lost(sp, "stripe lost");
				return 0;
			}
			if (sp->hdr_got[i])
				return -ECONNRESET; /* (ended inside a header) */
			sp->rx_eof[i] = true;
			return 0;
		}
		sp->hdr_got[i] += (uint32_t)r;
	}
	if (sp->hdr[i].magic != TP_FRAME_MAGIC || sp->hdr[i].len > TP_FRAME_MAX) {
		LOG(LL_WARN, "transport: framed stream: bad frame header (magic %#x, length %u)",
		    sp->hdr[i].magic, sp->hdr[i].len);
		return -ECONNRESET;
	}
	return 1;
}

/* Under rx_lock: find the next frame (rx_rem, rx_cur set); 1, 0 (not yet), or an error. End of
 * stream: 0 with both connections ended (rx_eof). */
static int next_frame(struct tp_stripe *sp)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < 2; k++) {
			int i = (sp->rx_cur + k) & 1, h = hdr_fill(sp, i);

			if (h == -EAGAIN)
				continue; /* (part 1 lost: part 0 takes the stream to the socket) */
			if (h < 0)
				return h;
			if (h == 0)
				continue;
			if (sp->hdr[i].seq != sp->rx_seq) {
				if (sp->rx_eof[i ^ 1] && sub_get(sp, i ^ 1))
					return -ECONNRESET; /* (the frame due can no longer come) */
				continue;
			}
			sp->hdr_got[i] = 0;
			sp->rx_seq++;
			sp->rx_cur = i;
			sp->rx_rem = sp->hdr[i].len;
			if (sp->rx_rem)
				return 1;
			k = -1; /* (an empty frame: look again from it) */
		}
		if (pass == 0 && !sub_get(sp, 1))
			stripe_accept(sp); /* (a server's first frame from the stripe) */
	}
	return 0;
}

/* Both connections ended after whole frames (a server whose client set a stripe up waits for
 * it: its frames may still come). */
static bool at_end(struct tp_stripe *sp)
{
	if (!sp->rx_eof[0])
		return false;
	if (sub_get(sp, 1))
		return sp->rx_eof[1];
	return !(tp_st_flags(tp_conn_cur(sp->sub0)) & TP_ST_STRIPE_UP);
}

static ssize_t stripe_recv(struct tp_stripe *sp, const struct iovec *iov, int iovcnt, int flags)
{
	size_t room = 0, got = 0;
	ssize_t r = 0;

	for (int k = 0; k < iovcnt; k++)
		room += iov[k].iov_len;
	/* what we keep of a frame goes first: the peer may answer it */
	pthread_mutex_lock(&sp->tx_lock);
	pend_flush_all(sp);
	stripe_look(sp);
	pthread_mutex_unlock(&sp->tx_lock);
	pthread_mutex_lock(&sp->rx_lock);
	if (sp->rx_err) {
		pthread_mutex_unlock(&sp->rx_lock);
		return sp->rx_err;
	}
	if ((r = stream_fo(sp))) { /* (the stream goes on over the kernel socket) */
		pthread_mutex_unlock(&sp->rx_lock);
		return r;
	}
	if (room == 0) { /* (errors, end of stream as a one-connection read reports them) */
		r = tp_recv_one(sp->sub0, iov, iovcnt, flags);
		pthread_mutex_unlock(&sp->rx_lock);
		return sub_err_at(sp, 0, r);
	}
	while (got < room) {
		if (!sp->rx_rem) {
			if (got && (flags & TP_RECV_PEEK))
				break; /* (a peek stays in one frame) */
			int f = next_frame(sp);

			if (f < 0) {
				r = f;
				if (f != -EAGAIN && f != -ENOMEM && f != -EPERM)
					sp->rx_err = f;
				break;
			}
			if (f == 0) {
				r = at_end(sp) ? 0 : -EAGAIN;
				break;
			}
		}
		struct iovec v[64];
		size_t want = room - got < sp->rx_rem ? room - got : sp->rx_rem;
		int n = iov_window(iov, iovcnt, got, want, v, 64);

		r = tp_recv_one(sub_get(sp, sp->rx_cur), v, n, flags);
		if (r == 0 && sp->rx_cur == 1) { /* (part 1 ended inside a frame: part 0 takes
						  * the stream to the kernel socket) */
			tp_stripe_part_lost(sp, "stripe lost");
			r = -EAGAIN;
			break;
		}
		if (r == 0) { /* (ended inside a frame: bytes are missing) */
			sp->rx_err = -ECONNRESET; /* (apart: clang takes r = an _Atomic int as an error) */
			r = -ECONNRESET;
			break;
		}
		if (r < 0) {
			r = sub_err_at(sp, sp->rx_cur, r);
			break;
		}
		if (flags & TP_RECV_PEEK) {
			got += (size_t)r;
			break;
		}
		sp->rx_rem -= (uint32_t)r;
		got += (size_t)r;
		/* relaxed: under rx_lock; a failover's switch reads it under the same lock */
		atomic_fetch_add_explicit(&sp->rx_app, (uint64_t)r, memory_order_relaxed);
		if ((size_t)r < want)
			break; /* (nothing more published there yet) */
	}
	pthread_mutex_unlock(&sp->rx_lock);
	return got ? (ssize_t)got : r;
}

/* --- readiness --------------------------------------------------------------------------------- */

/* Is input ready: a frame's bytes, the end of stream, or an error? */
static bool in_ready(struct tp_stripe *sp, bool arm)
{
	bool ready = false;

	pthread_mutex_lock(&sp->rx_lock);
	if (sp->rx_err) {
		ready = true;
	} else if (sp->rx_rem || next_frame(sp) != 0) {
		/* (an error of next_frame(): the read reports it) */
		ready = !sp->rx_rem ||
			(tp_poll_dir_one(sub_get(sp, sp->rx_cur), TP_EV_IN, arm) & TP_EV_IN);
	} else if (at_end(sp)) {
		ready = true;
	} else if (arm) {
		for (int i = 0; i < 2; i++)
			if (sub_get(sp, i))
				tp_poll_dir_one(sub_get(sp, i), TP_EV_IN, true);
	}
	pthread_mutex_unlock(&sp->rx_lock);
	return ready;
}

static unsigned stripe_poll(struct tp_stripe *sp, unsigned want, bool arm)
{
	unsigned ev = 0, b0;
	struct tp_conn *s1 = sub_get(sp, 1);
	int f = stream_fo(sp);

	if (f == -EAGAIN)
		return tp_poll_dir_one(sp->sub0, want, arm); /* (nothing: part 0's failover runs) */
	if (f)
		return TP_EV_IN | TP_EV_OUT; /* (the calls say what became of it) */

	pthread_mutex_lock(&sp->tx_lock);
	pend_flush_all(sp);
	pthread_mutex_unlock(&sp->tx_lock);
	b0 = tp_poll_dir_one(sp->sub0, want & TP_EV_OUT, arm && !s1);
	ev |= b0 & (TP_EV_OUT | TP_EV_ERR | TP_EV_HUP);
	if (s1 && (want & TP_EV_OUT) && !(ev & TP_EV_OUT))
		ev |= tp_poll_dir_one(s1, TP_EV_OUT, arm) & TP_EV_OUT;
	if ((want & TP_EV_IN) && in_ready(sp, arm)) {
		ev |= TP_EV_IN;
		pthread_mutex_lock(&sp->rx_lock);
		if (sp->rx_err)
			ev |= TP_EV_ERR;
		else if (!sp->rx_rem && at_end(sp))
			ev |= TP_EV_RDHUP;
		pthread_mutex_unlock(&sp->rx_lock);
	}
	return ev;
}

static int stripe_wait(struct tp_stripe *sp, unsigned events, int timeout_ms)
{
	uint64_t start = tp_now_ms();
	unsigned turn = 0;

	for (;;) {
		unsigned ev = stripe_poll(sp, events, false);
		struct tp_conn *s1 = sub_get(sp, 1), *on = sp->sub0;
		int slice = timeout_ms, r;

		if (ev & (events | TP_EV_ERR | TP_EV_HUP))
			return (int)ev;
		if (timeout_ms >= 0 && tp_now_ms() - start >= (uint64_t)timeout_ms)
			return 0;
		if (s1) {
			/* input: the connection the current frame comes from; else the first (a
			 * frame goes to the stripe only while the first's link is congested: a
			 * request and its answer come there), every other slice the stripe after
			 * a frame from it */
			pthread_mutex_lock(&sp->rx_lock);
			int cur = sp->rx_rem && (events & TP_EV_IN) ? sp->rx_cur : -1;
			bool last1 = sp->rx_cur == 1;

			pthread_mutex_unlock(&sp->rx_lock);
			on = cur >= 0 ? sub_get(sp, cur) : last1 && (turn++ & 1) ? s1 : sp->sub0;
			if (cur < 0)
				slice = TP_STRIPE_SLICE_MS;
		}
		if (slice < 0 || slice > 50)
			slice = 50; /* (a look at both every 50 ms: a stripe set up meanwhile) */
		if (timeout_ms >= 0 && (uint64_t)slice > start + (uint64_t)timeout_ms - tp_now_ms())
			slice = (int)(start + (uint64_t)timeout_ms - tp_now_ms());
		r = tp_wait_one(on, events, slice);
		if (r < 0)
			return r;
	}
}

/* --- the public calls on a framed connection --------------------------------------------------- */

ssize_t tp_send(struct tp_conn *c, const struct iovec *iov, int iovcnt)
{
	if (unlikely(c->sp))
		return stripe_send(c->sp, iov, iovcnt);
	return tp_send_one(c, iov, iovcnt);
}

ssize_t tp_recv(struct tp_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	if (unlikely(c->sp))
		return stripe_recv(c->sp, iov, iovcnt, flags);
	return tp_recv_one(c, iov, iovcnt, flags);
}

unsigned tp_poll(struct tp_conn *c)
{
	if (unlikely(c->sp))
		return stripe_poll(c->sp, TP_EV_IN | TP_EV_OUT, true);
	return tp_poll_one(c);
}

unsigned tp_poll_peek(struct tp_conn *c)
{
	if (unlikely(c->sp))
		return stripe_poll(c->sp, TP_EV_IN | TP_EV_OUT, false);
	return tp_poll_peek_one(c);
}

unsigned tp_poll_dir(struct tp_conn *c, unsigned want, bool arm)
{
	if (unlikely(c->sp))
		return stripe_poll(c->sp, want, arm);
	return tp_poll_dir_one(c, want, arm);
}

int tp_wait(struct tp_conn *c, unsigned events, int timeout_ms)
{
	if (unlikely(c->sp))
		return stripe_wait(c->sp, events, timeout_ms);
	return tp_wait_one(c, events, timeout_ms);
}

size_t tp_readable_bytes(struct tp_conn *c)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_readable_bytes_one(c);
	size_t n = 0;

	pthread_mutex_lock(&sp->rx_lock);
	if (sp->rx_rem || next_frame(sp) > 0) {
		n = tp_readable_bytes_one(sub_get(sp, sp->rx_cur));
		if (n > sp->rx_rem)
			n = sp->rx_rem;
	}
	pthread_mutex_unlock(&sp->rx_lock);
	return n;
}

bool tp_readable_hint(struct tp_conn *c)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_readable_hint_one(c);
	struct tp_conn *s1 = sub_get(sp, 1);

	/* (a hint: a header of a later frame counts; the read then says -EAGAIN) */
	return tp_readable_hint_one(sp->sub0) || (s1 && tp_readable_hint_one(s1));
}

uint64_t tp_rx_arrivals(struct tp_conn *c)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_rx_arrivals_one(c);
	struct tp_conn *s1 = sub_get(sp, 1);

	return tp_rx_arrivals_one(sp->sub0) + (s1 ? tp_rx_arrivals_one(s1) : 0);
}

const void *tp_rx_news_arm(struct tp_conn *c, bool ring, uint64_t *ret_seen,
			   struct tp_news_sums *ret_sums)
{
	/* (striped: two words; the caller looks every time) */
	return likely(!c->sp) ? tp_rx_news_arm_one(c, ring, ret_seen, ret_sums) : NULL;
}

uint64_t tp_rx_arm_arrival(struct tp_conn *c)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_rx_arm_arrival_one(c);
	struct tp_conn *s1 = sub_get(sp, 1);

	return tp_rx_arm_arrival_one(sp->sub0) + (s1 ? tp_rx_arm_arrival_one(s1) : 0);
}

bool tp_send_fits(struct tp_conn *c, size_t len, bool arm)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_send_fits_one(c, len, arm);
	struct tp_conn *s1 = sub_get(sp, 1);

	return tp_send_fits_one(sp->sub0, len + TP_FRAME_HDR, arm) ||
	       (s1 && tp_send_fits_one(s1, len + TP_FRAME_HDR, arm));
}

bool tp_writable_hint(struct tp_conn *c, size_t len)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_writable_hint_one(c, len);
	struct tp_conn *s1 = sub_get(sp, 1);

	return tp_writable_hint_one(sp->sub0, len + TP_FRAME_HDR) ||
	       (s1 && tp_writable_hint_one(s1, len + TP_FRAME_HDR));
}

size_t tp_unacked_bytes(struct tp_conn *c)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_unacked_bytes_one(c);
	struct tp_conn *s1 = sub_get(sp, 1);
	size_t n = tp_unacked_bytes_one(sp->sub0) + (s1 ? tp_unacked_bytes_one(s1) : 0);

	pthread_mutex_lock(&sp->tx_lock);
	n += sp->pend_len[0] - sp->pend_off[0] + sp->pend_len[1] - sp->pend_off[1];
	pthread_mutex_unlock(&sp->tx_lock);
	return n;
}

/* The handle is closed or aborted: the stripe is the first caller's to end; no later call on
 * the handle (a lingering connection's, the link's close) reaches it, it may be gone by then.
 * The parts keep the stream (sp_of) for their failovers while they linger. */
static struct tp_conn *stripe_detach(struct tp_stripe *sp)
{
	/* (acq_rel: one caller takes it) */
	if (atomic_exchange_explicit(&sp->ended, true, memory_order_acq_rel))
		return NULL;
	return sub_get(sp, 1);
}

/* Before a FIN: the rest of a kept frame goes out (waiting for room, at most TIMEOUT_MS). */
static int pend_drain(struct tp_stripe *sp, int timeout_ms)
{
	uint64_t end = tp_now_ms() + (uint64_t)timeout_ms;
	int r;

	for (;;) {
		pthread_mutex_lock(&sp->tx_lock);
		r = pend_flush_all(sp);
		int i = sp->pend_len[0] ? 0 : 1;

		pthread_mutex_unlock(&sp->tx_lock);
		if (r != -EAGAIN || tp_now_ms() >= end)
			return r;
		tp_wait_one(sub_get(sp, i), TP_EV_OUT, 10);
	}
}

int tp_shutdown(struct tp_conn *c, int how)
{
	struct tp_stripe *sp = c->sp;

	if (likely(!sp))
		return tp_shutdown_one(c, how);
	struct tp_conn *s1;
	int r;

	if (how != SHUT_RD && pend_drain(sp, 1000) == -EAGAIN)
		return -EAGAIN;
	r = tp_shutdown_one(sp->sub0, how);
	if (!r && (s1 = sub_get(sp, 1)))
		tp_shutdown_one(s1, how);
	return r;
}

void tp_close(struct tp_conn *c)
{
	struct tp_stripe *sp = c ? c->sp : NULL;

	if (likely(!sp)) {
		tp_close_one(c);
		return;
	}
	pend_drain(sp, 1000);
	struct tp_conn *s1 = stripe_detach(sp);

	if (s1)
		tp_close_one(s1);
	tp_close_one(c);
}

void tp_abort(struct tp_conn *c)
{
	struct tp_stripe *sp = c ? c->sp : NULL;

	if (likely(!sp)) {
		tp_abort_one(c);
		return;
	}
	struct tp_conn *s1 = stripe_detach(sp);

	if (s1)
		tp_abort_one(s1);
	tp_abort_one(c);
}

int tp_conn_failover_state(struct tp_conn *c)
{
	/* (a framed stream's: part 0's, which takes the whole stream to the socket) */
	return tp_conn_failover_state_one(c);
}

int tp_conn_export(struct tp_conn *c, int timeout_ms, uint64_t *ret_token)
{
	if (c->sp)
		return -EOPNOTSUPP; /* (the frames' state is not handed across exec) */
	return tp_conn_export_one(c, timeout_ms, ret_token);
}

void tp_conn_set_sndbuf(struct tp_conn *c, uint32_t bytes)
{
	struct tp_stripe *sp = c->sp;

	tp_conn_set_sndbuf_one(c, bytes);
	if (sp && sub_get(sp, 1))
		tp_conn_set_sndbuf_one(sub_get(sp, 1), bytes);
}

int tp_conn_error(struct tp_conn *c)
{
	struct tp_stripe *sp = c->sp;
	int e = tp_conn_error_one(c);

	if (e || !sp)
		return e;
	struct tp_conn *s1 = sub_get(sp, 1);

	if (s1 && (e = tp_conn_error_one(s1)))
		return e;
	/* relaxed: a framing error, sticky (rx_lock; a read of it here is a report) */
	return sp->rx_err;
}

void tp_stripe_stats(struct tp_conn *c, struct tp_stripe_stats *ret)
{
	struct tp_stripe *sp = c->sp;

	memset(ret, 0, sizeof(*ret));
	if (!sp)
		return;
	ret->framed = true;
	ret->striped = sub_get(sp, 1) != NULL;
	for (int i = 0; i < 2; i++) {
		ret->frames[i] = atomic_load_explicit(&sp->frames[i], memory_order_relaxed);
		ret->bytes[i] = atomic_load_explicit(&sp->bytes[i], memory_order_relaxed);
	}
	ret->notices = atomic_load_explicit(&sp->notices, memory_order_relaxed);
	ret->expansions = atomic_load_explicit(&sp->expansions, memory_order_relaxed);
	if (ret->striped)
		ret->link1 = tp_conn_link(sub_get(sp, 1));
}

/* --- failover of the stream to the kernel socket ------------------------------------------------ */

uint64_t tp_stripe_rx_app(struct tp_stripe *sp)
{
	/* relaxed: its writer holds rx_lock, which a failover's switch holds too */
	return atomic_load_explicit(&sp->rx_app, memory_order_relaxed);
}

int tp_stripe_rx_trylock(struct tp_stripe *sp)
{
	return pthread_mutex_trylock(&sp->rx_lock);
}

void tp_stripe_rx_unlock(struct tp_stripe *sp)
{
	pthread_mutex_unlock(&sp->rx_lock);
}

/* A run of the program's bytes found in a part's tail. */
struct app_seg {
	uint64_t app_off;
	const uint8_t *p;
	size_t n;
};

static int seg_cmp(const void *a, const void *b)
{
	const struct app_seg *x = a, *y = b;

	return x->app_off < y->app_off ? -1 : x->app_off > y->app_off;
}

/* The program's bytes in part I's tail: its unreleased bytes TAIL (TN bytes, the last the part
 * took) and the kept rest of a frame, mapped through the part's frames into SEGS. */
static size_t part_segs(struct tp_stripe *sp, int i, const uint8_t *tail, size_t tn,
			struct app_seg *segs)
{
	const struct frame_map *m = &sp->map[i];
	uint64_t lo = sp->part_tx[i] - tn, mid = sp->part_tx[i];
	uint64_t hi = mid + (sp->pend_len[i] - sp->pend_off[i]);
	size_t k = 0;

	for (size_t j = 0; j < m->n; j++) {
		const struct frame_rec *f = &m->v[(m->head + j) % m->cap];
		uint64_t a = f->part_off + TP_FRAME_HDR, b = a + f->len;

		if (a < lo)
			a = lo;
		if (b > hi)
			b = hi;
		/* (the part's bytes A..B: before MID in the tail, after it in the kept rest) */
		while (a < b) {
			uint64_t e = a < mid ? (b < mid ? b : mid) : b;
			const uint8_t *src = a < mid ? tail + (a - lo) :
					     sp->pend[i] + sp->pend_off[i] + (a - mid);

			segs[k++] = (struct app_seg){ f->app_off + (a - f->part_off - TP_FRAME_HDR),
						      src, (size_t)(e - a) };
			a = e;
		}
	}
	return k;
}

int tp_stripe_fo_tail(struct tp_stripe *sp, struct tp_conn *c, size_t hdr, uint8_t **ret,
		      size_t *ret_len, uint64_t *ret_start)
{
	return tp_stripe_fo_tail_from(sp, c, NULL, 0, hdr, ret, ret_len, ret_start);
}

int tp_stripe_fo_tail_from(struct tp_stripe *sp, struct tp_conn *c, const uint8_t *part0,
			   size_t part0_len, size_t hdr, uint8_t **ret, size_t *ret_len,
			   uint64_t *ret_start)
{
	uint8_t *tail[2] = { NULL, NULL }, *buf;
	size_t tn[2] = { 0, 0 }, nseg = 0;
	struct app_seg *segs = NULL;
	uint64_t dummy, start;
	int rc = 0;

	if (pthread_mutex_trylock(&sp->tx_lock))
		return -EAGAIN; /* (a sender: next time) */
	if (pthread_mutex_trylock(&sp->parts_lock)) {
		pthread_mutex_unlock(&sp->tx_lock);
		return -EAGAIN;
	}
	for (int i = 0; i < 2 && !rc; i++) {
		/* (part 0: C, which takes the stream there; part 1: its connection now, held by
		 * parts_lock against its recycling) */
		struct tp_conn *cur = i == 0 ? c : sp->cur[1];

		if (!cur)
			continue;
		if (i == 0 && part0) { /* (what part 0 took for its move) */
			tail[0] = malloc(part0_len ? part0_len : 1);
			if (!tail[0]) {
				rc = -ENOMEM;
				break;
			}
			memcpy(tail[0], part0, part0_len);
			tn[0] = part0_len;
			if (tn[0] > sp->part_tx[0])
				rc = -EPROTO;
			continue;
		}
		/* (part 1 moving: its tail is in its failover since it took it) */
		if (cur != c && tp_fo_get(cur) != TP_FO_NONE &&
		    (rc = tp_fo_snap_tail(cur, &tail[i], &tn[i])) != -ENOENT) {
			if (!rc && tn[i] > sp->part_tx[i])
				rc = -EPROTO;
			continue;
		}
		rc = 0;
		if (cur != c && tp_mutex_trylock(&cur->tx_lock)) {
			rc = -EAGAIN;
			break;
		}
		rc = tp_fo_collect(cur, 0, &tail[i], &tn[i], &dummy);
		if (cur != c)
			tp_mutex_unlock(&cur->tx_lock);
		if (!rc && tn[i] > sp->part_tx[i])
			rc = -EPROTO; /* (more held than ever taken: never guess) */
	}
	if (!rc) {
		/* at most one run per frame and piece (tail, kept rest) */
		size_t cap = 2u * (sp->map[0].n + sp->map[1].n) + 1u;

		segs = malloc(cap * sizeof(*segs));
		if (!segs)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&sp->parts_lock);
	if (rc) {
		pthread_mutex_unlock(&sp->tx_lock);
		free(tail[0]);
		free(tail[1]);
		return rc;
	}
	nseg = part_segs(sp, 0, tail[0], tn[0], segs);
	nseg += part_segs(sp, 1, tail[1], tn[1], segs + nseg);
	qsort(segs, nseg, sizeof(*segs), seg_cmp);
	/* the tail: the longest run of the program's bytes held without a gap up to the last */
	start = sp->app_tx;
	for (size_t k = nseg; k-- > 0;) {
		if (segs[k].app_off + segs[k].n < start)
			break; /* (a gap: the peer released what lies between) */
		if (segs[k].app_off < start)
			start = segs[k].app_off;
	}
	buf = malloc(hdr + (size_t)(sp->app_tx - start) + 1u);
	if (!buf) {
		rc = -ENOMEM;
	} else {
		for (size_t k = 0; k < nseg; k++) {
			uint64_t a = segs[k].app_off, e = a + segs[k].n;

			if (e <= start)
				continue;
			size_t skip = a < start ? (size_t)(start - a) : 0;

			memcpy(buf + hdr + (a + skip - start), segs[k].p + skip, segs[k].n - skip);
		}
		*ret = buf;
		*ret_len = (size_t)(sp->app_tx - start);
		*ret_start = start;
		sp->fo_taken = true;
		LOG(LL_DEBUG, "transport: framed stream to tcp: the program's bytes %llu..%llu "
		    "(parts held %zu and %zu bytes)", (unsigned long long)start,
		    (unsigned long long)sp->app_tx, tn[0], tn[1]);
	}
	pthread_mutex_unlock(&sp->tx_lock);
	free(segs);
	free(tail[0]);
	free(tail[1]);
	return rc;
}
