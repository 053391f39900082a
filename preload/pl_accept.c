// SPDX-License-Identifier: MIT
/* accept() and listen(): attach an accepted connection to the reservation its client made,
 * advertise listening ports on the links. */
#include "preload/pl_int.h"

#include <stdio.h>
#include <string.h>

/* The connection the client at KEY reserved on one of PEER's links (pl_connect(), pick_link():
 * looked for on each) into *RET_CONN, its link's index into *RET_LINK. NULL, or why the
 * connection stays TCP; *RET_RESERVED false when nothing is left reserved under KEY. */
static const char *accept_attach(const struct conf_peer *peer, const struct tp_key *key,
				 struct tp_conn **ret_conn, int *ret_link, bool *ret_reserved)
{
	bool any_open = false;
	int r = -ENOENT;

	for (int k = 0; k < peer->n_links; k++) {
		struct tp_link *link = pl_link_get_at(peer->link_indices[k], true, false, NULL);
		if (!link)
			continue;
		any_open = true;
		PL_ENTER();
		/* Look at the link now: a process forked before the link came up (pre-forked
		 * workers) may not have seen it up yet, and would take its new connection's peer
		 * for lost. */
		tp_link_is_up(link); /* (refreshes the transport's cached link state) */
		r = tp_attach(link, key, ret_conn);
		PL_LEAVE();
		if (r != -ENOENT) {
			*ret_link = peer->link_indices[k];
			break;
		}
	}
	if (!any_open)
		return tp_reason_str(TP_REASON_LINK_DOWN);
	if (r == -ENOENT) {
		*ret_reserved = false; /* nothing reserved under it */
		return "client did not set up ntb";
	}
	if (r == -ETIMEDOUT) {
		*ret_reserved = false; /* refused by tp_attach() */
		return "client did not decide in time";
	}
	return r < 0 ? "peer error" : NULL;
}

/* The options of S, accepted from LISTENER with accept4() FLAGS, without asking the kernel: an
 * accepted socket's file is new (O_NONBLOCK only from FLAGS), and its SO_RCVTIMEO, SO_SNDTIMEO
 * and SO_LINGER are copies of the listener's (the kernel clones the listening sock), which
 * LISTENER holds, loaded at listen() (pl_listened(), or its adoption after exec). The kernel
 * copies them when the handshake completes, so once the program changed them on the listener
 * a connection accepted later may have either the old or the new ones; and a listener another
 * process may hold too (this one forked since, or it came through exec) may have had them
 * changed there. In both cases the kernel is asked, as for the accepted fd NFD. */
static void accept_opts(struct pl_sock *s, const struct pl_sock *listener, int flags, int nfd)
{
	/* relaxed: set by setsockopt() in this process before the accept that must see it */
	if (listener->opts_shared ||
	    atomic_load_explicit(&listener->opts_set_late, memory_order_relaxed) ||
	    listener->opts_gen != atomic_load_explicit(&pl_fork_gen, memory_order_relaxed)) {
		pl_sock_load_opts(s, nfd);
		return;
	}
	atomic_store_explicit(&s->nonblock, !!(flags & SOCK_NONBLOCK), memory_order_relaxed);
	atomic_store_explicit(&s->rcvtimeo_ms,
			      atomic_load_explicit(&listener->rcvtimeo_ms, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&s->sndtimeo_ms,
			      atomic_load_explicit(&listener->sndtimeo_ms, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&s->linger_abort,
			      atomic_load_explicit(&listener->linger_abort, memory_order_relaxed),
			      memory_order_relaxed);
}

/* Accepted fd NFD carries CONN (over link LINK_INDEX, described DESC) from now on, accepted
 * from LISTENER with accept4() FLAGS. NULL, or why it stays TCP (CONN then aborted). */
static const char *accept_install(int nfd, struct tp_conn *conn, int link_index,
				  const char *desc, const struct pl_sock *listener, int flags)
{
	struct pl_sock *s = pl_sock_alloc(PL_CONN);

	if (!s) {
		PL_ENTER();
		tp_abort(conn);
		PL_LEAVE();
		return "out of memory";
	}
	tp_conn_set_witness(conn, nfd); /* a silent peer's end is seen there (transport.h) */
	s->conn = conn;
	s->link_index = link_index;
	s->link_listen_side = pl_link_is_loopback(link_index);
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
	accept_opts(s, listener, flags, nfd);
	atomic_store_explicit(&s->state, PL_CS_OPEN, memory_order_relaxed);
	pl_fd_install(nfd, s);
	PL_ENTER();
	tp_conn_set_owner(conn, tp_process_id(), nfd);
	PL_LEAVE();
	pl_sock_put(s);
	return NULL;
}

void pl_accepted(int fd, int nfd, struct pl_sock *listener, int flags,
		 const struct sockaddr *client, socklen_t client_len)
{
	struct sockaddr_storage cli, srv;
	socklen_t cl = sizeof(cli), sl = sizeof(srv);
	const struct conf_peer *peer;
	struct tp_conn *conn = NULL;
	struct tp_key key;
	bool have_key = false;
	char desc[128] = "?";
	const char *reason = NULL;

	if (client && client_len <= cl) {
		memset(&cli, 0, sizeof(cli));
		memcpy(&cli, client, client_len);
	} else if (pl_real.getpeername(nfd, (struct sockaddr *)&cli, &cl) < 0) {
		reason = "getpeername failed";
		goto tcp;
	}
	/* (the local address is asked for: the listener's own may differ, e.g. under TPROXY or an
	 * sk_lookup program, and a wrong key would miss the client's reservation) */
	if (pl_real.getsockname(nfd, (struct sockaddr *)&srv, &sl) < 0) {
		reason = "getsockname failed";
		goto tcp;
	}
	pl_desc_pair(desc, sizeof(desc), (struct sockaddr *)&srv, (struct sockaddr *)&cli);
	if (pl_key_build((struct sockaddr *)&cli, (struct sockaddr *)&srv, &key) < 0) {
		reason = "not an IP address";
		goto tcp;
	}
	have_key = true;
	if (pl_uring_on()) {
		reason = PL_URING_WHY; /* (its set-up refused: the client goes on over TCP) */
		goto tcp;
	}
	if (nfd >= pl_nfds) {
		reason = "fd beyond the fd table";
		goto tcp;
	}
	PL_ENTER();
	peer = conf_peer_by_addr(pl_conf, (struct sockaddr *)&cli);
	PL_LEAVE();
	if (!peer) {
		reason = "not configured: no peer for the client address";
		goto tcp;
	}
	int link_index = -1;
	reason = accept_attach(peer, &key, &conn, &link_index, &have_key);
	if (!reason) {
		reason = accept_install(nfd, conn, link_index, desc, listener, flags);
		if (reason)
			have_key = false; /* aborted: nothing left reserved */
	}
	if (reason)
		goto tcp;
	LOG(LL_INFO, "fd %d %s: ntb (link %s, accepted on fd %d)", nfd, desc,
	    pl_conf->links[link_index].name, fd);
	pl_uring_recheck(nfd);
	return;
tcp:
	LOG(LL_INFO, "fd %d %s: tcp (%s, accepted on fd %d)", nfd, desc, reason, fd);
	pl_tcpstat_add(nfd, NULL, reason);
	if (have_key)
		pl_links_refuse(&key);
}

/* FD listens (or is about to): advertise its port on every link and track it. SHARED: it came
 * from another process, which may change its options (accept() then asks the kernel). */
static bool listener_install(int fd, bool shared)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct pl_sock *s = pl_sock_get(fd);

	if (s) {
		pl_sock_put(s);  /* listen() again on a listener: already advertised */
		return false;
	}
	if (!pl_is_tcp_stream(fd) || pl_real.getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return false;
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return false;
	uint16_t port = pl_sa_port((struct sockaddr *)&ss);
	if (port == 0)
		return false; /* listen() picks it: advertised after the kernel listen */
	s = pl_sock_alloc(PL_LISTENER);
	if (!s)
		return false;
	s->port = port;
	pl_sock_load_opts(s, fd); /* what accepted sockets inherit (accept_opts()) */
	s->opts_gen = atomic_load_explicit(&pl_fork_gen, memory_order_relaxed);
	s->opts_shared = shared;
	bool uring = pl_uring_on();
	/* (tracked, not advertised: clients of its port use TCP; marked before it is listed,
	 * where a link opening meanwhile looks) */
	atomic_store_explicit(&s->unadvertised, uring, memory_order_relaxed);
	pl_listener_add(s);
	if (uring) {
		LOG(LL_DEBUG, "fd %d: port %u not advertised (%s)", fd, s->port, PL_URING_WHY);
		pl_fd_install(fd, s);
		pl_sock_put(s);
		return true;
	}
	/* Listed first, then advertised on the open links: a link whose open fails now
	 * advertises it when it opens (pl_link.c, listeners_sweep()). */
	for (int i = 0; i < pl_conf->n_links && i < CONF_MAX_LINKS; i++)
		pl_link_get_at(i, true, false, NULL);
	pl_fd_install(fd, s);
	pl_listener_links(s, true);
	LOG(LL_DEBUG, "fd %d: port %u listened", fd, s->port);
	pl_sock_put(s);
	return true;
}

bool pl_listened(int fd)
{
	return listener_install(fd, false);
}

bool pl_listener_adopt(int fd)
{
	if (!listener_install(fd, true))
		return false;
	LOG(LL_DEBUG, "fd %d: listener received from another process, advertised", fd);
	return true;
}
