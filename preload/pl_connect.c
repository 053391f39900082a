// SPDX-License-Identifier: MIT
/* connect() (doc/design.md §5): route it to ntb or tcp, reserve the NTB path before the kernel
 * connect and confirm it after (or hand it to pl_connect_late.c when the kernel chooses the
 * port); log one line per connection saying which path it took and why. */
#include "preload/pl_int.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *route_reason_tcp(const struct conf_route *rt)
{
	return rt->reason[0] ? rt->reason : "rule says tcp";
}

/* The kernel's connect for a connection that stays TCP, listed for `ntbsock stat` when it
 * succeeds or is in progress. */
static int connect_tcp(int fd, const struct sockaddr *dst, socklen_t dlen, const char *reason,
		       int saved_errno)
{
	errno = saved_errno;
	int r = pl_real.connect(fd, dst, dlen);
	if (r == 0 || errno == EINPROGRESS)
		pl_tcpstat_add(fd, dst, reason); /* keeps errno */
	return r;
}

/* The link a new connection to RT's peer goes on: with several, the least loaded live one
 * (connections of this host on it, tp_link_load()), the first of equals; else, or when none is
 * live, the peer's first link (whose state then decides, as for a single link). */
static int pick_link(const struct conf_route *rt)
{
	const struct conf_peer *p = rt->peer;
	int best = rt->link_index, best_load = INT_MAX;

	if (!p || p->n_links <= 1)
		return rt->link_index;
	/* First without waiting: a live link of the peer's is taken as it is, nobody waits for
	 * the others to come up (a connect made while one of them waits for its first time would
	 * wait with it). Only when none is live, a second pass that may wait, as for one link. */
	for (int pass = 0; pass < 2 && best_load == INT_MAX; pass++) {
		for (int k = 0; k < p->n_links; k++) {
			int idx = p->link_indices[k];
			struct tp_link *l = pl_link_get(idx, pass == 1, NULL);
			int load;

			if (!l)
				continue;
			PL_ENTER();
			load = tp_link_load(l);
			PL_LEAVE();
			if (load >= 0 && load < best_load) {
				best = idx;
				best_load = load;
			}
		}
	}
	return best;
}

/* One connect() under way: what its steps share. */
struct pl_connecting {
	int fd;
	const struct sockaddr *dst;
	socklen_t dlen;
	int saved_errno;
	unsigned cf;                   /* pl_cand_flags(): what our socket() made, unchanged since */
	struct conf_route rt;
	struct tp_link *link;
	struct sockaddr_storage local; /* the source address */
	char desc[128];                /* the destination, then "source -> destination" */
	/* why the connection stays TCP: REASON when set, else WHY */
	enum tp_reason why;
	const char *reason;
};

/* The link for C's destination, up and with an ntbsock listener on its port; NULL (C->why,
 * C->reason say why) when the connection stays TCP. */
static struct tp_link *connect_link(struct pl_connecting *c)
{
	struct tp_link *link;

	c->rt.link_index = pick_link(&c->rt);
	/* not worth opening the link (most of a millisecond) when nobody serves it */
	c->reason = pl_link_peek_gone(c->rt.link_index);
	if (c->reason) {
		c->why = TP_REASON_LINK_DOWN;
		return NULL;
	}
	link = pl_link_get(c->rt.link_index, true, NULL);
	/* tp_link_is_up() also refreshes the transport's cached view (a forked child's). */
	if (!link || !tp_link_is_up(link)) {
		c->why = TP_REASON_LINK_DOWN;
		if (link)
			c->reason = pl_link_down_reason(link);
		return NULL;
	}
	/* The peer's listeners are in our inbound window as soon as the link is up: no waiting
	 * here (a port without an ntbsock listener must not delay the TCP connect). */
	if (!tp_peer_listens(link, pl_sa_port(c->dst))) {
		c->why = TP_REASON_NO_LISTENER;
		return NULL;
	}
	return link;
}

enum connect_source {
	CONNECT_TCP,   /* the source address cannot be carried (C->reason) */
	CONNECT_BOUND, /* address and port known: reserve the path before the kernel connect */
	CONNECT_LATE,  /* the kernel's connect picks the port: pl_connect_late() */
};

/* C's source address into C->local, bound to this host's address when the socket was not. */
static enum connect_source connect_source(struct pl_connecting *c)
{
	struct sockaddr *local = (struct sockaddr *)&c->local;
	socklen_t llen = sizeof(c->local);

	if (c->cf & PL_CAND_UNBOUND) {
		memset(&c->local, 0, sizeof(c->local)); /* the wildcard address, port 0 */
		c->local.ss_family = c->cf & PL_CAND_V6 ? AF_INET6 : AF_INET;
	} else if (pl_real.getsockname(c->fd, local, &llen) < 0) {
		c->reason = "getsockname failed";
		return CONNECT_TCP;
	}
	if (pl_sa_port(local) == 0 && pl_sa_is_any(local) && !pl_link_settled(c->rt.link_index) &&
	    pl_bind_host_addr(c->fd, c->dst, false) == 0) {
		/* Until the peer host answered quickly, the port is bound now and the path reserved
		 * before the kernel connect, which waits as long as the set-up needs. (When the
		 * bind finds no port, connect() picks one below.) */
		llen = sizeof(c->local);
		if (pl_real.getsockname(c->fd, local, &llen) < 0) {
			c->reason = "getsockname failed";
			return CONNECT_TCP;
		}
	}
	if (pl_sa_port(local) == 0) {
		/* No port yet: connect() picks it (as for any TCP client), and the reservation
		 * follows the kernel connect. */
		if (pl_sa_is_any(local)) {
			/* (not under the "error" policy: there a route that changed would fail the
			 * connect, where the bind would have kept it ntb) */
			if (pl_conf->fallback != CONF_FALLBACK_ERROR &&
			    pl_src_is_host(c->dst, c->dlen, c->local.ss_family))
				return CONNECT_LATE; /* the kernel picks our address itself */
			int r = pl_bind_host_addr(c->fd, c->dst, true);

			if (r < 0) {
				c->reason = r == -EADDRNOTAVAIL ? "no host address of that family"
							        : "cannot bind the host address";
				return CONNECT_TCP;
			}
		} else if (!pl_is_host_addr(local)) {
			c->reason = "socket bound to an address that is not this host's";
			return CONNECT_TCP;
		}
		return CONNECT_LATE;
	}
	if (pl_sa_is_any(local)) {
		/* A port on the wildcard address (an FTP client's active data port, a program that
		 * fixes its source port): the kernel picks our address as it connects, ntb when
		 * that is this host's (the late path reads the 4-tuple after the connect; as for an
		 * unbound socket, not under the "error" policy) */
		if (pl_conf->fallback != CONF_FALLBACK_ERROR &&
		    pl_src_is_host(c->dst, c->dlen, c->local.ss_family))
			return CONNECT_LATE;
		c->reason = "socket bound to the wildcard address";
		return CONNECT_TCP;
	}
	if (!pl_is_host_addr(local)) {
		/* The peer would not know this source address and would stay TCP. */
		c->reason = "socket bound to an address that is not this host's";
		return CONNECT_TCP;
	}
	return CONNECT_BOUND;
}

/* The kernel connect of C, whose reserved connection object S sits at its fd: confirmed when
 * the connect completes at once, by pl_check_pending() when it completes in the background.
 * Returns the kernel connect's result the libc way; takes the caller's reference on S. */
static int connect_kernel(struct pl_connecting *c, struct pl_sock *s)
{
	struct pl_sock *t;
	int r, e;

	errno = c->saved_errno;
	r = pl_real.connect(c->fd, c->dst, c->dlen);
	if (r == 0) {
		PL_ENTER();
		r = tp_conn_confirm(s->conn);
		PL_LEAVE();
		if (r < 0) {
			LOG(LL_INFO, "fd %d %s: tcp (peer error: confirm failed: %s)", c->fd, c->desc,
			    strerror(-r));
			pl_tcpstat_add(c->fd, c->dst, "peer error: confirm failed");
			t = pl_fd_take(c->fd);
			pl_set_state(s, PL_CS_FAILED);
			pl_sock_put(t);
			pl_sock_put(s);
			errno = c->saved_errno;
			return 0;
		}
		pl_set_state(s, PL_CS_OPEN);
		LOG(LL_INFO, "fd %d %s: ntb (link %s)", c->fd, c->desc,
		    pl_conf->links[c->rt.link_index].name);
		pl_sock_put(s);
		errno = c->saved_errno;
		return 0;
	}
	e = errno;
	if (e == EINPROGRESS || e == EINTR || e == EALREADY) {
		/* Completes in the background: confirmed by pl_check_pending(). */
		pl_sock_put(s);
		errno = e;
		return -1;
	}
	t = pl_fd_take(c->fd);
	pl_sock_put(t);       /* releases conn: tp_abort (state is still PENDING) */
	pl_sock_put(s);
	errno = e;
	return -1;
}

/* C, its source address bound (CONNECT_BOUND): reserve the NTB path, install the connection
 * at C's fd, then the kernel connect. Returns 1 when the connection stays TCP (C->why,
 * C->reason), else the kernel connect's result the libc way. */
static int connect_bound(struct pl_connecting *c)
{
	struct tp_conn *conn = NULL;
	struct pl_sock *s;
	struct tp_key key;
	int r;

	pl_desc_pair(c->desc, sizeof(c->desc), (struct sockaddr *)&c->local, c->dst);
	if (pl_key_build((struct sockaddr *)&c->local, c->dst, &key) < 0) {
		c->reason = "not an IP address";
		return 1;
	}
	int64_t setup_ns = pl_now_ns();
	PL_ENTER();
	r = tp_connect(c->link, &key, (int)pl_tpp.setup_timeout_ms, &conn, &c->why);
	PL_LEAVE();
	pl_link_note_setup(c->rt.link_index, r, c->why,
			   pl_now_ns() - setup_ns < PL_HOLD_OK_MS * 1000000LL);
	if (r < 0) {
		if (c->why == TP_REASON_NONE)
			c->why = TP_REASON_LOCAL_ERROR;
		return 1;
	}
	s = pl_sock_alloc(PL_CONN);
	if (!s) {
		tp_abort(conn);
		c->reason = "out of memory";
		return 1;
	}
	pl_sock_opts_init(s, c->fd, c->cf);
	tp_conn_set_witness(conn, c->fd); /* a silent peer's end is seen there (transport.h) */
	s->conn = conn;
	s->link_index = c->rt.link_index;
	snprintf(s->desc, sizeof(s->desc), "%s", c->desc);
	pl_fd_install(c->fd, s);
	pl_cand_migrate(c->fd, s); /* epoll sets it joined before connect() now see NTB readiness */
	PL_ENTER();
	tp_conn_set_owner(conn, tp_process_id(), c->fd);
	PL_LEAVE();
	return connect_kernel(c, s);
}

/* C stays TCP (C->why, C->reason): the kernel's connect, or the error the config asks for. */
static int connect_fallback(struct pl_connecting *c)
{
	const char *reason = c->reason ? c->reason : tp_reason_str(c->why);

	LOG(LL_INFO, "fd %d %s: tcp (%s)", c->fd, c->desc, reason);
	if (pl_conf->fallback == CONF_FALLBACK_ERROR) {
		errno = c->why == TP_REASON_LINK_DOWN ? ENETUNREACH : ECONNREFUSED;
		return -1;
	}
	return connect_tcp(c->fd, c->dst, c->dlen, reason, c->saved_errno);
}

/* Returns the kernel connect's result the libc way (0 or -1 + errno), having tried NTB first. */
int pl_connect(int fd, const struct sockaddr *dst, socklen_t dlen)
{
	struct pl_connecting c = { .fd = fd, .dst = dst, .dlen = dlen, .why = TP_REASON_NONE };
	int r;

	c.saved_errno = errno;
	c.cf = pl_cand_flags(fd); /* what our socket() made and nothing changed since: no need to
				   * ask the kernel */
	if (fd >= pl_nfds || (!(c.cf & PL_CAND_TCP) && !pl_is_tcp_stream(fd))) {
		/* (an fd beyond the table cannot be tracked: it stays TCP) */
		errno = c.saved_errno;
		return pl_real.connect(fd, dst, dlen);
	}
	PL_ENTER();
	r = conf_route(pl_conf, dst, dlen, &c.rt);
	PL_LEAVE();
	pl_addr_str(dst, c.desc, sizeof(c.desc));
	if (r < 0 || c.rt.action != CONF_ACTION_NTB || pl_uring_on()) {
		const char *reason = r < 0 ? "not an IP address" :
				     c.rt.action != CONF_ACTION_NTB ? route_reason_tcp(&c.rt) :
				     PL_URING_WHY;

		LOG(LL_INFO, "fd %d -> %s: tcp (%s)", fd, c.desc, reason);
		return connect_tcp(fd, dst, dlen, reason, c.saved_errno);
	}
	c.link = connect_link(&c);
	if (!c.link)
		return connect_fallback(&c);
	switch (connect_source(&c)) {
	case CONNECT_LATE:
		r = pl_connect_late(fd, dst, dlen, c.link, c.rt.link_index, c.cf, c.saved_errno);
		break;
	case CONNECT_BOUND:
		r = connect_bound(&c);
		if (r > 0)
			return connect_fallback(&c);
		break;
	case CONNECT_TCP:
	default:
		return connect_fallback(&c);
	}
	int e = errno;

	pl_uring_recheck(fd); /* (a ring made meanwhile) */
	errno = e;
	return r;
}

int pl_check_pending(struct pl_sock *s, int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int st;

	pthread_mutex_lock(&s->lock);
	st = atomic_load_explicit(&s->state, memory_order_acquire); /* pairs with pl_set_state() */
	if (st != PL_CS_PENDING)
		goto out;
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	if (pl_real.poll(&p, 1, 0) <= 0 || !(p.revents & (POLLOUT | POLLERR | POLLHUP)))
		goto out;
	if (pl_real.getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		PL_ENTER();
		int r = tp_conn_confirm(s->conn);
		PL_LEAVE();
		if (r == 0) {
			st = PL_CS_OPEN;
			LOG(LL_INFO, "fd %d %s: ntb (link %s)", fd, s->desc,
			    pl_conf->links[s->link_index].name);
		} else {
			st = PL_CS_FAILED;
			LOG(LL_INFO, "fd %d %s: tcp (peer error: confirm failed: %s)", fd, s->desc,
			    strerror(-r));
			pl_tcpstat_add(fd, NULL, "peer error: confirm failed");
		}
	} else {
		int err = 0;
		socklen_t el = sizeof(err);
		pl_real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
		s->pending_err = err ? err : ECONNREFUSED;
		st = PL_CS_FAILED;
		LOG(LL_DEBUG, "fd %d %s: connect failed: %s", fd, s->desc, strerror(s->pending_err));
	}
	if (st == PL_CS_FAILED) {
		PL_ENTER();
		tp_abort(s->conn);
		PL_LEAVE();
		s->conn = NULL;
	}
	pl_set_state(s, st);
out:
	pthread_mutex_unlock(&s->lock);
	return st;
}
