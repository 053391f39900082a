// SPDX-License-Identifier: MIT
/* connect() with the port chosen by the kernel (pl_connect() hands it over): the kernel connect
 * first, the NTB reservation under the 4-tuple it gives, the handshake's last ACK held until
 * the client has decided between ntb and tcp. */
#include "preload/pl_int.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* How long tp_connect_reserve() may take (see below). */
#define PL_HOLD_GIVEUP_MS 150

/* The NTB set-up is keyed by the 4-tuple, and the server's accept() looks the key up at once. An
 * explicit bind to port 0 would give the 4-tuple before the connect, but such a bind cannot
 * reuse a port in TIME_WAIT (it scans the whole ephemeral range when that is full), and with
 * ntbsock the client often closes first. So the port is left to connect(), and the server is
 * kept from accepting until the reservation exists: TCP_DEFER_ACCEPT on a connecting socket
 * makes the kernel hold back the ACK that completes the handshake (connect() itself still
 * completes on the SYN-ACK); once tp_connect() has reserved the path under the now known
 * 4-tuple, setting TCP_QUICKACK sends that ACK. The option is cleared again at once where the
 * connection stays tcp or its connect is still in progress. Where it is ntb and established,
 * the option is left set (a system call per set-up saved): the kernel reads it on a connecting
 * socket only in SYN_SENT (tcp_rcv_synsent_state_process()) and on a listener, so on the
 * established socket nothing looks at it but the program, and pl_defer_clear() clears it
 * before anything that could (getsockopt(), a connect() after a disconnect, listen(), fork,
 * after which two processes would each clear it once, exec, which hands the socket to a
 * program that does not know it). A value the program set before the connect (read then unless
 * socket() left the options untouched: PL_CAND_DEFOPTS) is put back instead of 0, at once.
 *
 * Both ends must then agree on the path, also when the set-up is slow (a stalled peer,
 * contexts short, a client descheduled or stopped at any point). The client decides, and its
 * decision is final once written into the server's reservation (transport: COMMIT for ntb, a
 * reset or a Cancel for tcp); the server's accept() follows it, waiting for it if the
 * reservation is still undecided (tp_attach()). The client commits only while the ACK is
 * still held: a reservation then existed before the server could accept. When the ACK went
 * out first (the kernel's delayed-ACK timer releases it at 200 ms; handshake_acked() says so),
 * the server may have accepted without finding a reservation and stayed tcp, so the client
 * gives its reservation up (tcp on both ends). tp_connect() gives up after PL_HOLD_GIVEUP_MS
 * (then a reservation made late is withdrawn by a Cancel before the ACK is released). No
 * timing margin decides, so a starved process on either side cannot split a connection. */

/* struct tcp_info as the kernel fills it since Linux 4.2 (glibc's stops at tcpi_total_retrans). */
struct pl_tcp_info {
	struct tcp_info base;
	uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
	uint32_t segs_out, segs_in;
};

/* Send the held ACK, if any (only in ESTABLISHED: else a no-op); TCP_DEFER_ACCEPT stays. */
static void release_ack(int fd)
{
	int one = 1;

	pl_real.setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

/* FD's TCP_DEFER_ACCEPT back to OWN, the program's value (0: it set none). */
static void defer_accept_put(int fd, int own)
{
	pl_real.setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &own, sizeof(own));
}

/* The TCP_DEFER_ACCEPT the program set on FD before its connect, or 0: none when its PL_CAND_*
 * flags CF say socket() left it so (no system call). */
static int defer_accept_own(int fd, unsigned cf)
{
	int v = 0;
	socklen_t l = sizeof(v);

	if ((cf & PL_CAND_DEFOPTS) ||
	    pl_real.getsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &l) < 0)
		return 0;
	return v;
}

/* The check and the clear are one step under S's lock, and the flag drops only once the kernel's
 * option is 0: a thread that finds it down (acquire; pairs with the release below) or waited
 * for the lock makes its own call on the option after the clear. Else another thread's
 * getsockopt() could read our 1 between a first thread's check and its clear, or its
 * setsockopt() be undone by that clear. */
void pl_defer_clear(struct pl_sock *s, int fd)
{
	if (!atomic_load_explicit(&s->defer_left, memory_order_acquire))
		return;
	pthread_mutex_lock(&s->lock);
	if (atomic_load_explicit(&s->defer_left, memory_order_relaxed)) { /* (under the lock) */
		int saved = errno;

		defer_accept_put(fd, 0);
		errno = saved;
		/* release: pairs with the acquire above; the clear is done before */
		atomic_store_explicit(&s->defer_left, false, memory_order_release);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Before a fork (the fork() wrapper): each process would keep its own copy of the flag, and its
 * first look would clear the option again after the other process had set it on the shared
 * socket. So it is cleared now, in the parent, and both copies start down. (Runs in the thread
 * that forks, while others may run: the lookups are the data path's.) */
void pl_defer_clear_all(void)
{
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0)
		return;
	int hi = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);
	for (int fd = 0; fd < hi && fd < pl_nfds; fd++) {
		/* relaxed: a hint that skips the reference for nearly every fd (the memory is
		 * type-stable); pl_defer_clear() decides under the socket's lock */
		struct pl_sock *s = atomic_load_explicit(&pl_fds[fd], memory_order_relaxed);
		if (!s || !atomic_load_explicit(&s->defer_left, memory_order_relaxed))
			continue;
		s = pl_sock_get(fd);
		if (s && s->kind == PL_CONN)
			pl_defer_clear(s, fd);
		pl_sock_put(s);
	}
}

/* True when the option was set (HOLD: the ACK is held from now on; else the option goes back to
 * OWN, the program's value). */
static bool hold_ack(int fd, bool hold, int own)
{
	int on = hold ? 1 : own, one = 1;

	/* sends the held ACK, if any (only in ESTABLISHED: else a no-op); first, as the server
	 * waits for it */
	if (!hold)
		pl_real.setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	return pl_real.setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &on, sizeof(on)) == 0;
}

/* Has FD's kernel sent the ACK completing its handshake? It has sent only SYNs until then: one,
 * plus each retransmission. True when that cannot be told. Always asked of the kernel: the
 * held ACK normally leaves with the delayed-ACK timer (200 ms by default), but that timer can be
 * shortened (a route's rto_min, TCP_BPF_DELACK_MAX), and a duplicated or early-retransmitted
 * SYN-ACK makes the kernel acknowledge at once: no bound on the clock is sound here. */
static bool handshake_acked(int fd)
{
	struct pl_tcp_info ti;
	socklen_t l = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (pl_real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0 ||
	    l < offsetof(struct pl_tcp_info, segs_in))
		return true;
	if (ti.base.tcpi_state == TCP_SYN_SENT)
		return false;
	return ti.segs_out > 1u + ti.base.tcpi_total_retrans;
}

/* The NTB set-up failed after the kernel connect (R, errno E) was made: release the held ACK,
 * and under the "error" fall-back policy dissolve the TCP connection again (connect(AF_UNSPEC):
 * the server never accepted it) and fail. */
static int connect_late_tcp(int fd, const struct sockaddr *dst, int r, int e, const char *desc,
			    const char *reason, enum tp_reason why, int own)
{
	hold_ack(fd, false, own);
	if (!reason)
		reason = tp_reason_str(why);
	LOG(LL_INFO, "fd %d %s: tcp (%s)", fd, desc, reason);
	if (pl_conf->fallback == CONF_FALLBACK_ERROR) {
		struct sockaddr unspec = { .sa_family = AF_UNSPEC };
		pl_real.connect(fd, &unspec, sizeof(unspec));
		errno = why == TP_REASON_LINK_DOWN ? ENETUNREACH : ECONNREFUSED;
		return -1;
	}
	pl_tcpstat_add(fd, dst, reason);
	errno = e;
	return r;
}

/* The late set-up of FD decided for ntb (CONN committed, the held ACK released), its kernel
 * connect having returned R with errno E: install CONN at FD, confirmed at once when the
 * connect completed. Same results as pl_connect(). */
static int connect_late_install(int fd, const struct sockaddr *dst, struct tp_conn *conn,
				int link_index, unsigned cf, const char *desc, int r, int e,
				int saved_errno, int own)
{
	struct pl_sock *s = pl_sock_alloc(PL_CONN);

	if (!s) {
		PL_ENTER();
		tp_abort(conn);
		PL_LEAVE();
		defer_accept_put(fd, own);
		LOG(LL_INFO, "fd %d %s: tcp (out of memory)", fd, desc);
		pl_tcpstat_add(fd, dst, "out of memory");
		errno = e;
		return r;
	}
	pl_sock_opts_init(s, fd, cf);
	/* relaxed: before the install (its release store publishes it); the program's own value
	 * was put back already */
	atomic_store_explicit(&s->defer_left, r == 0 && !own, memory_order_relaxed);
	tp_conn_set_witness(conn, fd); /* a silent peer's end is seen there (transport.h) */
	s->conn = conn;
	s->link_index = link_index;
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
	if (r == 0) {
		PL_ENTER();
		int cr = tp_conn_confirm(conn);
		PL_LEAVE();
		if (cr < 0) {
			defer_accept_put(fd, own);
			LOG(LL_INFO, "fd %d %s: tcp (peer error: confirm failed: %s)", fd, desc,
			    strerror(-cr));
			pl_tcpstat_add(fd, dst, "peer error: confirm failed");
			pl_sock_put(s); /* never installed: releases conn (tp_abort, state PENDING) */
			errno = saved_errno;
			return 0;
		}
		pl_set_state(s, PL_CS_OPEN);
		LOG(LL_INFO, "fd %d %s: ntb (link %s)", fd, desc, pl_conf->links[link_index].name);
	}
	/* else completes in the background: confirmed by pl_check_pending() */
	pl_fd_install(fd, s);
	pl_cand_migrate(fd, s); /* epoll sets it joined before connect() now see NTB readiness */
	PL_ENTER();
	tp_conn_set_owner(conn, tp_process_id(), fd);
	PL_LEAVE();
	pl_sock_put(s);
	errno = r == 0 ? saved_errno : e;
	return r;
}


int pl_connect_late(int fd, const struct sockaddr *dst, socklen_t dlen, struct tp_link *link,
			int link_index, unsigned cf, int saved_errno)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	enum tp_reason why = TP_REASON_NONE;
	struct tp_conn *conn = NULL;
	struct tp_key key;
	char desc[128];
	int r, e;
	int own = defer_accept_own(fd, cf); /* put back where ours would be cleared */

	hold_ack(fd, true, own);

	errno = saved_errno;
	r = pl_real.connect(fd, dst, dlen);
	e = errno;
	if (r < 0 && e != EINPROGRESS && e != EINTR) {
		/* refused, unreachable, no port left...: as over TCP */
		hold_ack(fd, false, own);
		pl_addr_str(dst, desc, sizeof(desc));
		LOG(LL_DEBUG, "fd %d -> %s: connect failed: %s", fd, desc, strerror(e));
		errno = e;
		return -1;
	}
	/* The port is assigned now, also for a connect still in progress. */
	if (pl_real.getsockname(fd, (struct sockaddr *)&local, &llen) < 0 ||
	    pl_key_build((struct sockaddr *)&local, dst, &key) < 0) {
		pl_addr_str(dst, desc, sizeof(desc));
		return connect_late_tcp(fd, dst, r, e, desc, "getsockname failed", why, own);
	}
	pl_desc_pair(desc, sizeof(desc), (struct sockaddr *)&local, dst);
	if (!pl_is_host_addr((struct sockaddr *)&local)) {
		/* left unbound (pl_src_is_host()), and the kernel's route changed since or this
		 * socket's routing is not the probe's: the next connects there bind */
		pl_src_not_host(dst, local.ss_family);
		return connect_late_tcp(fd, dst, r, e, desc,
					"route gives a source not this host's",
					why, own);
	}
	int tmo = (int)pl_tpp.setup_timeout_ms;
	if (tmo > PL_HOLD_GIVEUP_MS)
		tmo = PL_HOLD_GIVEUP_MS;
	int64_t setup_ns = pl_now_ns();
	PL_ENTER();
	int tr = tp_connect_reserve(link, &key, tmo, &conn, &why);
	PL_LEAVE();
	int64_t reserved_ns = pl_now_ns();

	pl_link_note_setup(link_index, tr, why,
			   reserved_ns - setup_ns < PL_HOLD_OK_MS * 1000000LL);
	if (tr < 0)
		return connect_late_tcp(fd, dst, r, e, desc, NULL,
					why == TP_REASON_NONE ? TP_REASON_LOCAL_ERROR : why, own);
	/* The decision, final once written (the server's tp_attach() waits for it): an ACK
	 * already sent (the kernel's delayed ACK) may have let the server accept before the
	 * reservation existed, so that it stayed tcp: give it up. Else commit it before the ACK
	 * goes out. */
	if (handshake_acked(fd)) {
		PL_ENTER();
		tp_abort(conn);
		PL_LEAVE();
		return connect_late_tcp(fd, dst, r, e, desc,
					"ntb set-up slower than the TCP handshake may wait", why, own);
	}
	PL_ENTER();
	tp_conn_commit(conn);
	PL_LEAVE();
	if (r != 0)
		hold_ack(fd, false, own); /* still in SYN_SENT: ours would delay the ACK by 200 ms */
	else if (!own)
		release_ack(fd); /* established: the option no longer acts (see the top) */
	else
		hold_ack(fd, false, own);
	return connect_late_install(fd, dst, conn, link_index, cf, desc, r, e, saved_errno, own);
}
