// SPDX-License-Identifier: MIT
/* Connection set-up (doc/design.md §5): route a connect() to ntb or tcp, reserve the NTB path
 * before the kernel connect, attach accepted connections, advertise listeners, and log one
 * line per connection saying which path it took and why. */
#include "preload/pl_int.h"
#include "glue/conf_params.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* --- config → layer parameters --------------------------------------------------------------- */

void pl_link_params(const struct conf_link *cl, struct ntb_link_params *p)
{
	glue_link_params(cl, p);
}

void pl_tp_params(const struct conf_tunables *t, struct tp_params *p)
{
	glue_tp_params(t, p);
	/* preload spins itself, yielding the CPU (pl_wait(), poll/epoll); the transport's waits
	 * then sleep at once. */
	pl_spin_us = t->spin_us;
	p->spin_us = 0;
}

uint32_t pl_spin_us;

/* --- links --------------------------------------------------------------------------------------- */

struct pl_link {
	struct tp_link *tp;
	int64_t opened_ns;
	int64_t failed_ns;   /* last open failure: retried after a second */
	bool waited_up;      /* a connect already waited for this link to come up */
	/* A set-up over it was answered quickly: the peer host serves the link (connect_late()
	 * has 100 ms, which a peer that only now sees the link come up may need). A hint:
	 * relaxed. */
	_Atomic bool settled;
	_Atomic bool both_up;  /* side 1 of a loopback link: loopback_open() waited for both */
};
/* Slot I is config link I on its configured side (side 0 of a loopback link); slot
 * CONF_MAX_LINKS + I is side 1 of loopback link I, where this process listens and accepts. */
#define PL_SLOTS (2 * CONF_MAX_LINKS)
static struct pl_link pl_links[PL_SLOTS];

static bool is_loopback(int index)
{
	return pl_conf && index >= 0 && index < pl_conf->n_links && index < CONF_MAX_LINKS &&
	       pl_conf->links[index].loopback;
}

/* The slot where this process listens on and accepts from config link INDEX. */
static int listen_slot(int index)
{
	return is_loopback(index) ? CONF_MAX_LINKS + index : index;
}

static bool slot_valid(int slot)
{
	if (slot >= CONF_MAX_LINKS)
		return is_loopback(slot - CONF_MAX_LINKS);
	return pl_conf && slot >= 0 && slot < pl_conf->n_links;
}
static pthread_once_t pl_atfork_once = PTHREAD_ONCE_INIT;
static void pl_atfork_links_child(void);

static void pl_atfork_register(void)
{
	pthread_atfork(NULL, NULL, pl_atfork_links_child);
}
static pthread_mutex_t pl_link_lock = PTHREAD_MUTEX_INITIALIZER;

#define PL_FRESH_NS 3000000000LL /* a link opened this recently may still be coming up */

/* pl_links_open_all() holds the transport's helper thread back (tp_helper_hold()); the first
 * socket that needs a link lets it start (pl_link_get()). The flag is read without the lock on
 * every pl_link_get() (relaxed: a hint; helper_hold() decides under the lock). */
static pthread_mutex_t pl_hold_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool pl_helper_held;

static void helper_hold(bool hold)
{
	pthread_mutex_lock(&pl_hold_lock);
	if (atomic_load_explicit(&pl_helper_held, memory_order_relaxed) != hold) {
		PL_ENTER();
		tp_helper_hold(hold);
		PL_LEAVE();
		atomic_store_explicit(&pl_helper_held, hold, memory_order_relaxed);
	}
	pthread_mutex_unlock(&pl_hold_lock);
}

static struct tp_link *link_get(int slot, bool wait_up, bool *ret_fresh);

struct tp_link *pl_link_get(int index, bool wait_up, bool *ret_fresh)
{
	return pl_link_get_at(index, false, wait_up, ret_fresh);
}

#define PL_GONE_ABSENT "link down: no ntbsock on the peer host"
#define PL_GONE_DEAD   "link down: peer heartbeat stopped"

/* Before a connect opens link LP (creating its file, claiming a side, starting the helper
 * thread: most of a millisecond), a look that maps the link read-only, if it exists: the
 * reason when the peer side is known to be gone (no link file, nobody on the peer host has it
 * enabled, or its heartbeat stopped: ntb_link_peer_state()), else NULL. */
static const char *peer_gone(const struct ntb_link_params *lp)
{
	struct ntb_link_params p = *lp;
	struct ntb_link *n = NULL;
	const char *why = NULL;

	if (p.side < 0)
		return NULL; /* (our side is known only once claimed) */
	p.inspect_only = true;
	PL_ENTER();
	int r = ntb_link_open(&p, &n);
	if (r == -ENOENT && !strcmp(p.backend, "shm")) {
		why = PL_GONE_ABSENT; /* a peer side would have created it */
	} else if (r == 0) {
		enum ntb_peer_state st = ntb_link_peer_state(n);
		why = st == NTB_PEER_ABSENT ? PL_GONE_ABSENT : st == NTB_PEER_DEAD ? PL_GONE_DEAD : NULL;
		ntb_link_close(n);
	}
	PL_LEAVE();
	return why;
}

/* For a connect over link INDEX: when this process has not opened it yet, peer_gone(). */
static const char *link_peek_gone(int index)
{
	struct ntb_link_params lp;

	if (!pl_conf || index < 0 || index >= pl_conf->n_links || index >= CONF_MAX_LINKS)
		return NULL;
	pthread_mutex_lock(&pl_link_lock);
	bool open = pl_links[index].tp != NULL;
	pthread_mutex_unlock(&pl_link_lock);
	if (open)
		return NULL;
	pl_link_params(&pl_conf->links[index], &lp);
	const char *why = peer_gone(&lp);
	if (why)
		LOG(LL_DEBUG, "link %s: %s: not opened", lp.name, why);
	return why;
}

/* Open both sides of loopback link INDEX; the first time both are open, wait until each sees
 * the other up (at once, both being here): a connection attached before its side saw the
 * link up would take the peer epoch it then learns for a restart. */
static void loopback_open(int index)
{
	struct tp_link *a = link_get(index, false, NULL);
	struct tp_link *b = link_get(listen_slot(index), false, NULL);
	struct pl_link *flag = &pl_links[listen_slot(index)]; /* (its waited_up is unused) */

	if (!a || !b || atomic_exchange(&flag->both_up, true))
		return;
	PL_ENTER();
	for (int i = 0; i < 2; i++) {
		struct tp_link *l = i ? b : a;
		if (!tp_link_is_up(l)) {
			ntb_link_wait_up(tp_link_ntb(l), 1000);
			tp_link_is_up(l); /* (caches the peer epoch) */
		}
	}
	PL_LEAVE();
}

struct tp_link *pl_link_get_at(int index, bool listen_side, bool wait_up, bool *ret_fresh)
{
	if (unlikely(atomic_load_explicit(&pl_helper_held, memory_order_relaxed)))
		helper_hold(false);
	/* A loopback link's far side is this host: its two sides open together, so the link is up
	 * while this process lives, and a port nobody listens on says "no listener". */
	if (is_loopback(index))
		loopback_open(index);
	return link_get(listen_side ? listen_slot(index) : index, wait_up, ret_fresh);
}

/* Link SLOT, just opened as TL, joins the other links to its peer (when it has several): a
 * connection moves among them when its own is lost (transport's failover). */
static void link_group(int slot, struct tp_link *tl)
{
	for (int p = 0; p < pl_conf->n_peers; p++) {
		const struct conf_peer *pe = &pl_conf->peers[p];

		if (pe->n_links < 2)
			continue;
		for (int k = 0; k < pe->n_links; k++) {
			if (pe->link_indices[k] != slot)
				continue;
			PL_ENTER();
			tp_link_set_group(tl, (unsigned)p + 1);
			PL_LEAVE();
			return;
		}
	}
}

int pl_link_index_of(struct tp_link *tl)
{
	int idx = -1;

	pthread_mutex_lock(&pl_link_lock);
	for (int i = 0; i < PL_SLOTS && idx < 0; i++)
		if (pl_links[i].tp == tl)
			idx = i % CONF_MAX_LINKS;
	pthread_mutex_unlock(&pl_link_lock);
	return idx;
}

static struct tp_link *link_get(int slot, bool wait_up, bool *ret_fresh)
{
	struct tp_link *tl;
	int64_t now = pl_now_ns();

	if (!slot_valid(slot))
		return NULL;
	pthread_mutex_lock(&pl_link_lock);
	struct pl_link *l = &pl_links[slot];
	if (!l->tp && (!l->failed_ns || now - l->failed_ns > 1000000000LL)) {
		const struct conf_link *cl = &pl_conf->links[slot % CONF_MAX_LINKS];
		struct ntb_link_params lp;
		pl_link_params(cl, &lp);
		if (cl->loopback)
			lp.side = slot >= CONF_MAX_LINKS; /* both sides, one handle each */
		PL_ENTER();
		int r = tp_link_open(&lp, &pl_tpp, &l->tp);
		PL_LEAVE();
		if (r < 0) {
			l->tp = NULL;
			l->failed_ns = now;
			const char *d = ntb_strerror_detail();
			bool has = d && *d;
			LOG(LL_WARN, "link %s: cannot open: %s%s%s", lp.name, strerror(-r),
			    has ? ": " : "", has ? d : "");
		} else {
			l->opened_ns = now;
			if (cl->loopback && slot >= CONF_MAX_LINKS)
				tp_link_set_self_rung(l->tp); /* our clients write into side 1 */
			LOG(LL_DEBUG, "link %s: opened (side %d)", lp.name, ntb_link_side(tp_link_ntb(l->tp)));
			if (!cl->loopback)
				link_group(slot, l->tp);
			/* After the transport's own fork handler (registered as it opened the link):
			 * child handlers run in registration order. */
			pthread_once(&pl_atfork_once, pl_atfork_register);
		}
	}
	tl = l->tp;
	bool fresh = tl && now - l->opened_ns < PL_FRESH_NS;
	/* Only the first connect after the open waits for the link to come up, and only while
	 * the peer side may be alive (ntb_link_wait_peer()): a peer host with no ntbsock process
	 * on the link, or whose heartbeat stopped, is known at once and costs no wait. */
	bool wait = wait_up && fresh && !l->waited_up;
	if (wait)
		l->waited_up = true;
	pthread_mutex_unlock(&pl_link_lock);
	if (tl && wait && !tp_link_is_up(tl)) {
		int ms = (int)pl_tpp.setup_timeout_ms;
		PL_ENTER();
		int wr = ntb_link_wait_peer(tp_link_ntb(tl), ms > 0 ? ms : 1000);
		if (wr == -EHOSTDOWN)
			LOG(LL_DEBUG, "link %s: peer side %s: not waiting for it",
			    pl_conf->links[slot % CONF_MAX_LINKS].name,
			    ntb_link_peer_state(tp_link_ntb(tl)) == NTB_PEER_DEAD ?
			    "silent (heartbeat stopped)" : "absent");
		PL_LEAVE();
	}
	if (ret_fresh)
		*ret_fresh = fresh;
	return tl;
}

/* --- keys ----------------------------------------------------------------------------------------- */

/* 16-byte address (IPv4 as IPv4-mapped IPv6) at ADDR, port in network order at PORT. */
static int key_part(const struct sockaddr *sa, uint8_t *addr, uint8_t *port)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		memcpy(addr, mapped, 12);
		memcpy(addr + 12, &in->sin_addr, 4);
		memcpy(port, &in->sin_port, 2);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		memcpy(addr, &in6->sin6_addr, 16);
		memcpy(port, &in6->sin6_port, 2);
		return 0;
	}
	return -EAFNOSUPPORT;
}

/* Layout (transport reads only the server port, tp_key_server_port()): 0..15 client address,
 * 16..17 client port, 18..33 server address, 34..37 zero, 38..39 server port. */
int pl_key_build(const struct sockaddr *client, const struct sockaddr *server,
		 struct tp_key *ret_key)
{
	struct tp_key k;

	memset(&k, 0, sizeof(k));
	if (!client || !server || key_part(client, k.bytes, k.bytes + 16) < 0 ||
	    key_part(server, k.bytes + 18, k.bytes + TP_KEY_PORT_OFF) < 0)
		return -EAFNOSUPPORT;
	*ret_key = k;
	return 0;
}

static void addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		port = ntohs(in->sin_port);
		snprintf(buf, len, "%s:%u", a, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		port = ntohs(in6->sin6_port);
		snprintf(buf, len, "[%s]:%u", a, port);
	} else {
		snprintf(buf, len, "?");
	}
}

void pl_desc_pair(char *buf, size_t len, const struct sockaddr *from, const struct sockaddr *to)
{
	char a[60], b[60];
	addr_str(from, a, sizeof(a));
	addr_str(to, b, sizeof(b));
	snprintf(buf, len, "%s -> %s", a, b);
}

static uint16_t sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

static bool sa_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return true;
}

bool pl_is_tcp_stream(int fd)
{
	int type = 0, proto = 0;
	socklen_t l1 = sizeof(type), l2 = sizeof(proto);

	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 || type != SOCK_STREAM)
		return false;
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l2) < 0)
		return false;
	return proto == IPPROTO_TCP;
}

/* Bind FD to this host's address (family of DST), so that the peer recognises our source
 * address. With NO_PORT the port is left to connect(), which picks it with the 4-tuple check
 * and may reuse ports in TIME_WAIT; without, the kernel picks it now. */
static int bind_host_addr(int fd, const struct sockaddr *dst, bool no_port)
{
	int fam_sock = dst->sa_family, one = 1;
	bool want_v4 = dst->sa_family == AF_INET ||
		       (dst->sa_family == AF_INET6 &&
			IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)dst)->sin6_addr));

	for (int i = 0; i < pl_conf->n_host_addrs; i++) {
		const struct conf_addr *ha = &pl_conf->host_addrs[i];
		struct sockaddr_storage ss;
		socklen_t len;

		memset(&ss, 0, sizeof(ss));
		if (want_v4 && ha->family == AF_INET && fam_sock == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;
			in->sin_family = AF_INET;
			in->sin_addr = ha->u.v4;
			len = sizeof(*in);
		} else if (want_v4 && ha->family == AF_INET && fam_sock == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
			in6->sin6_family = AF_INET6;
			in6->sin6_addr.s6_addr[10] = 0xff;
			in6->sin6_addr.s6_addr[11] = 0xff;
			memcpy(&in6->sin6_addr.s6_addr[12], &ha->u.v4, 4);
			len = sizeof(*in6);
		} else if (!want_v4 && ha->family == AF_INET6 && fam_sock == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
			in6->sin6_family = AF_INET6;
			in6->sin6_addr = ha->u.v6;
			len = sizeof(*in6);
		} else {
			continue;
		}
		if (no_port && pl_real.setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
						  sizeof(one)) < 0)
			return -errno;
		if (pl_real.bind(fd, (struct sockaddr *)&ss, len) == 0)
			return 0;
		return -errno;
	}
	return -EADDRNOTAVAIL;
}

/* Is SA (port ignored) one of this host's configured addresses? IPv4-mapped counts as IPv4. */
static bool is_host_addr(const struct sockaddr *sa)
{
	struct in_addr v4;
	bool is_v4 = false;

	if (sa->sa_family == AF_INET) {
		v4 = ((const struct sockaddr_in *)sa)->sin_addr;
		is_v4 = true;
	} else if (sa->sa_family == AF_INET6 &&
		   IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr)) {
		memcpy(&v4, &((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr[12], 4);
		is_v4 = true;
	}
	for (int i = 0; i < pl_conf->n_host_addrs; i++) {
		const struct conf_addr *ha = &pl_conf->host_addrs[i];
		if (is_v4 && ha->family == AF_INET && ha->u.v4.s_addr == v4.s_addr)
			return true;
		if (!is_v4 && sa->sa_family == AF_INET6 && ha->family == AF_INET6 &&
		    !memcmp(&ha->u.v6, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16))
			return true;
	}
	return false;
}

static const char *route_reason_tcp(const struct conf_route *rt)
{
	return rt->reason[0] ? rt->reason : "rule says tcp";
}

static void set_state(struct pl_sock *s, int st)
{
	/* release pairs with the acquire in pl_is_ntb(): conn is set before. */
	atomic_store_explicit(&s->state, st, memory_order_release);
}

static int tv_ms(const struct timeval *tv)
{
	int64_t ms = (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

void pl_sock_load_opts(struct pl_sock *s, int fd)
{
	struct timeval tv;
	struct linger lg;
	socklen_t l;
	int saved = errno;

	int fl = pl_real.fcntl(fd, F_GETFL);
	atomic_store_explicit(&s->nonblock, fl >= 0 && (fl & O_NONBLOCK), memory_order_relaxed);
	l = sizeof(tv);
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) == 0)
		atomic_store_explicit(&s->rcvtimeo_ms, tv_ms(&tv), memory_order_relaxed);
	l = sizeof(tv);
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) == 0)
		atomic_store_explicit(&s->sndtimeo_ms, tv_ms(&tv), memory_order_relaxed);
	l = sizeof(lg);
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l) == 0)
		atomic_store_explicit(&s->linger_abort, lg.l_onoff && lg.l_linger == 0,
				      memory_order_relaxed);
	errno = saved;
}

/* S's options for FD: as socket() left them when its PL_CAND_* flags CF say so (no system
 * call), else from the kernel. */
static void sock_opts(struct pl_sock *s, int fd, unsigned cf)
{
	if (!(cf & PL_CAND_DEFOPTS)) {
		pl_sock_load_opts(s, fd);
		return;
	}
	atomic_store_explicit(&s->nonblock, !!(cf & PL_CAND_NONBLOCK), memory_order_relaxed);
	atomic_store_explicit(&s->rcvtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->sndtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->linger_abort, false, memory_order_relaxed);
}

/* --- connect ------------------------------------------------------------------------------------- */

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

/* Limits of the late set-up, see "connect with the port chosen by the kernel". */
#define PL_HOLD_OK_MS 100
#define PL_HOLD_GIVEUP_MS 150

/* A tp_connect() that started at START_NS ended with R / WHY: a quick answer settles the link
 * (see struct pl_link), a timeout unsettles it. */
static void link_note_setup(int index, int r, enum tp_reason why, int64_t start_ns)
{
	if (r == 0 && pl_now_ns() - start_ns < PL_HOLD_OK_MS * 1000000LL)
		atomic_store_explicit(&pl_links[index].settled, true, memory_order_relaxed);
	else if (r < 0 && why == TP_REASON_TIMEOUT)
		atomic_store_explicit(&pl_links[index].settled, false, memory_order_relaxed);
}

/* --- connect with the port chosen by the kernel ---------------------------------------------------
 *
 * The NTB set-up is keyed by the 4-tuple, and the server's accept() looks the key up at once. An
 * explicit bind to port 0 would give the 4-tuple before the connect, but such a bind cannot
 * reuse a port in TIME_WAIT (it scans the whole ephemeral range when that is full), and with
 * ntbsock the client often closes first. So the port is left to connect(), and the server is
 * kept from accepting until the reservation exists: TCP_DEFER_ACCEPT on a connecting socket
 * makes the kernel hold back the ACK that completes the handshake (connect() itself still
 * completes on the SYN-ACK); once tp_connect() has reserved the path under the now known
 * 4-tuple, clearing it and setting TCP_QUICKACK sends that ACK.
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

static void hold_ack(int fd, bool hold)
{
	int on = hold, one = 1;

	/* sends the held ACK, if any (only in ESTABLISHED: else a no-op); first, as the server
	 * waits for it */
	if (!hold)
		pl_real.setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	pl_real.setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &on, sizeof(on));
}

/* Has FD's kernel sent the ACK completing its handshake? It has sent only SYNs until then:
 * one, plus each retransmission. True when that cannot be told. */
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
			    const char *reason, enum tp_reason why)
{
	hold_ack(fd, false);
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

/* FD is bound to a host address without a port (IP_BIND_ADDRESS_NO_PORT): connect, reserve
 * the NTB path under the 4-tuple, then let the handshake complete. Same results as
 * pl_connect(). */
static int connect_late(int fd, const struct sockaddr *dst, socklen_t dlen, struct tp_link *link,
			int link_index, unsigned cf, int saved_errno)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	enum tp_reason why = TP_REASON_NONE;
	struct tp_conn *conn = NULL;
	struct tp_key key;
	char desc[128];
	int r, e;

	hold_ack(fd, true);
	errno = saved_errno;
	r = pl_real.connect(fd, dst, dlen);
	e = errno;
	if (r < 0 && e != EINPROGRESS && e != EINTR) {
		/* refused, unreachable, no port left...: as over TCP */
		hold_ack(fd, false);
		addr_str(dst, desc, sizeof(desc));
		LOG(LL_DEBUG, "fd %d -> %s: connect failed: %s", fd, desc, strerror(e));
		errno = e;
		return -1;
	}
	/* The port is assigned now, also for a connect still in progress. */
	if (pl_real.getsockname(fd, (struct sockaddr *)&local, &llen) < 0 ||
	    pl_key_build((struct sockaddr *)&local, dst, &key) < 0) {
		addr_str(dst, desc, sizeof(desc));
		return connect_late_tcp(fd, dst, r, e, desc, "getsockname failed", why);
	}
	pl_desc_pair(desc, sizeof(desc), (struct sockaddr *)&local, dst);
	int tmo = (int)pl_tpp.setup_timeout_ms;
	if (tmo > PL_HOLD_GIVEUP_MS)
		tmo = PL_HOLD_GIVEUP_MS;
	int64_t setup_ns = pl_now_ns();
	PL_ENTER();
	int tr = tp_connect_reserve(link, &key, tmo, &conn, &why);
	PL_LEAVE();
	link_note_setup(link_index, tr, why, setup_ns);
	if (tr < 0)
		return connect_late_tcp(fd, dst, r, e, desc, NULL,
					why == TP_REASON_NONE ? TP_REASON_LOCAL_ERROR : why);
	/* The decision, final once written (the server's tp_attach() waits for it): an ACK
	 * already sent (the kernel's delayed ACK) may have let the server accept before the
	 * reservation existed, so that it stayed tcp: give it up. Else commit it before the ACK
	 * goes out. */
	if (handshake_acked(fd)) {
		PL_ENTER();
		tp_abort(conn);
		PL_LEAVE();
		return connect_late_tcp(fd, dst, r, e, desc,
					"ntb set-up slower than the TCP handshake may wait", why);
	}
	PL_ENTER();
	tp_conn_commit(conn);
	PL_LEAVE();
	hold_ack(fd, false);

	struct pl_sock *s = pl_sock_alloc(PL_CONN);
	if (!s) {
		PL_ENTER();
		tp_abort(conn);
		PL_LEAVE();
		LOG(LL_INFO, "fd %d %s: tcp (out of memory)", fd, desc);
		pl_tcpstat_add(fd, dst, "out of memory");
		errno = e;
		return r;
	}
	sock_opts(s, fd, cf);
	tp_conn_set_witness(conn, fd); /* a silent peer's end is seen there (transport.h) */
	s->conn = conn;
	s->link_index = link_index;
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
	if (r == 0) {
		PL_ENTER();
		int cr = tp_conn_confirm(conn);
		PL_LEAVE();
		if (cr < 0) {
			LOG(LL_INFO, "fd %d %s: tcp (peer error: confirm failed: %s)", fd, desc,
			    strerror(-cr));
			pl_tcpstat_add(fd, dst, "peer error: confirm failed");
			pl_sock_put(s); /* never installed: releases conn (tp_abort, state PENDING) */
			errno = saved_errno;
			return 0;
		}
		set_state(s, PL_CS_OPEN);
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

/* The link a new connection to RT's peer goes on: with several, the least loaded live one
 * (connections of this host on it, tp_link_load()), the first of equals; else, or when none is
 * live, the peer's first link (whose state then decides, as for a single link). */
static int pick_link(const struct conf_route *rt)
{
	const struct conf_peer *p = rt->peer;
	int best = rt->link_index, best_load = INT_MAX;

	if (!p || p->n_links <= 1)
		return rt->link_index;
	for (int k = 0; k < p->n_links; k++) {
		int idx = p->link_indices[k];
		struct tp_link *l = pl_link_get(idx, true, NULL);
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
	return best;
}

/* Why LINK is down, when the peer side is known to be gone; NULL: just down. */
static const char *link_down_reason(struct tp_link *link)
{
	switch (ntb_link_peer_state(tp_link_ntb(link))) {
	case NTB_PEER_ABSENT:
		return PL_GONE_ABSENT;
	case NTB_PEER_DEAD:
		return PL_GONE_DEAD;
	default:
		return NULL;
	}
}

/* Returns the kernel connect's result the libc way (0 or -1 + errno), having tried NTB first. */
int pl_connect(int fd, const struct sockaddr *dst, socklen_t dlen)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	struct conf_route rt;
	enum tp_reason why = TP_REASON_NONE;
	const char *reason = NULL;
	struct tp_conn *conn = NULL;
	struct tp_link *link;
	struct tp_key key;
	char desc[128];
	int saved_errno = errno;
	int r;
	/* what our socket() made and nothing changed since: no need to ask the kernel */
	unsigned cf = pl_cand_flags(fd);

	if (fd >= pl_nfds || (!(cf & PL_CAND_TCP) && !pl_is_tcp_stream(fd))) {
		/* (an fd beyond the table cannot be tracked: it stays TCP) */
		errno = saved_errno;
		return pl_real.connect(fd, dst, dlen);
	}

	PL_ENTER();
	r = conf_route(pl_conf, dst, dlen, &rt);
	PL_LEAVE();
	addr_str(dst, desc, sizeof(desc));
	if (r < 0 || rt.action != CONF_ACTION_NTB) {
		reason = r < 0 ? "not an IP address" : route_reason_tcp(&rt);
		LOG(LL_INFO, "fd %d -> %s: tcp (%s)", fd, desc, reason);
		return connect_tcp(fd, dst, dlen, reason, saved_errno);
	}
	rt.link_index = pick_link(&rt);
	/* not worth opening the link (most of a millisecond) when nobody serves it */
	reason = link_peek_gone(rt.link_index);
	if (reason) {
		why = TP_REASON_LINK_DOWN;
		goto tcp;
	}
	link = pl_link_get(rt.link_index, true, NULL);
	/* tp_link_is_up() also refreshes the transport's cached view (a forked child's). */
	if (!link || !tp_link_is_up(link)) {
		why = TP_REASON_LINK_DOWN;
		if (link)
			reason = link_down_reason(link);
		goto tcp;
	}
	uint16_t port = sa_port(dst);
	/* The peer's listeners are in our inbound window as soon as the link is up: no waiting
	 * here (a port without an ntbsock listener must not delay the TCP connect). */
	if (!tp_peer_listens(link, port)) {
		why = TP_REASON_NO_LISTENER;
		goto tcp;
	}
	if (cf & PL_CAND_UNBOUND) {
		memset(&local, 0, sizeof(local)); /* the wildcard address, port 0 */
		local.ss_family = cf & PL_CAND_V6 ? AF_INET6 : AF_INET;
	} else if (pl_real.getsockname(fd, (struct sockaddr *)&local, &llen) < 0) {
		reason = "getsockname failed";
		goto tcp;
	}
	if (sa_port((struct sockaddr *)&local) == 0 && sa_is_any((struct sockaddr *)&local) &&
	    !atomic_load_explicit(&pl_links[rt.link_index].settled, memory_order_relaxed) &&
	    bind_host_addr(fd, dst, false) == 0) {
		/* Until the peer host answered quickly, the port is bound now and the path reserved
		 * before the kernel connect, which waits as long as the set-up needs. (When the
		 * bind finds no port, connect() picks one below.) */
		llen = sizeof(local);
		if (pl_real.getsockname(fd, (struct sockaddr *)&local, &llen) < 0) {
			reason = "getsockname failed";
			goto tcp;
		}
	}
	if (sa_port((struct sockaddr *)&local) == 0) {
		/* No port yet: connect() picks it (as for any TCP client), and the reservation
		 * follows the kernel connect. */
		if (sa_is_any((struct sockaddr *)&local)) {
			r = bind_host_addr(fd, dst, true);
			if (r < 0) {
				reason = r == -EADDRNOTAVAIL ? "no host address of that family"
							     : "cannot bind the host address";
				goto tcp;
			}
		} else if (!is_host_addr((struct sockaddr *)&local)) {
			reason = "socket bound to an address that is not this host's";
			goto tcp;
		}
		return connect_late(fd, dst, dlen, link, rt.link_index, cf, saved_errno);
	} else if (sa_is_any((struct sockaddr *)&local)) {
		reason = "socket bound to the wildcard address";
		goto tcp;
	} else if (!is_host_addr((struct sockaddr *)&local)) {
		/* The peer would not know this source address and would stay TCP. */
		reason = "socket bound to an address that is not this host's";
		goto tcp;
	}
	pl_desc_pair(desc, sizeof(desc), (struct sockaddr *)&local, dst);
	if (pl_key_build((struct sockaddr *)&local, dst, &key) < 0) {
		reason = "not an IP address";
		goto tcp;
	}
	int64_t setup_ns = pl_now_ns();
	PL_ENTER();
	r = tp_connect(link, &key, (int)pl_tpp.setup_timeout_ms, &conn, &why);
	PL_LEAVE();
	link_note_setup(rt.link_index, r, why, setup_ns);
	if (r < 0) {
		if (why == TP_REASON_NONE)
			why = TP_REASON_LOCAL_ERROR;
		goto tcp;
	}

	struct pl_sock *s = pl_sock_alloc(PL_CONN);
	if (!s) {
		tp_abort(conn);
		reason = "out of memory";
		goto tcp;
	}
	sock_opts(s, fd, cf);
	tp_conn_set_witness(conn, fd); /* a silent peer's end is seen there (transport.h) */
	s->conn = conn;
	s->link_index = rt.link_index;
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
	pl_fd_install(fd, s);
	pl_cand_migrate(fd, s); /* epoll sets it joined before connect() now see NTB readiness */
	PL_ENTER();
	tp_conn_set_owner(conn, tp_process_id(), fd);
	PL_LEAVE();

	errno = saved_errno;
	r = pl_real.connect(fd, dst, dlen);
	if (r == 0) {
		PL_ENTER();
		r = tp_conn_confirm(conn);
		PL_LEAVE();
		if (r < 0) {
			LOG(LL_INFO, "fd %d %s: tcp (peer error: confirm failed: %s)", fd, desc,
			    strerror(-r));
			pl_tcpstat_add(fd, dst, "peer error: confirm failed");
			struct pl_sock *t = pl_fd_take(fd);
			set_state(s, PL_CS_FAILED);
			pl_sock_put(t);
			pl_sock_put(s);
			errno = saved_errno;
			return 0;
		}
		set_state(s, PL_CS_OPEN);
		LOG(LL_INFO, "fd %d %s: ntb (link %s)", fd, desc, pl_conf->links[rt.link_index].name);
		pl_sock_put(s);
		errno = saved_errno;
		return 0;
	}
	int e = errno;
	if (e == EINPROGRESS || e == EINTR || e == EALREADY) {
		/* Completes in the background: confirmed by pl_check_pending(). */
		pl_sock_put(s);
		errno = e;
		return -1;
	}
	struct pl_sock *t = pl_fd_take(fd);
	pl_sock_put(t);       /* releases conn: tp_abort (state is still PENDING) */
	pl_sock_put(s);
	errno = e;
	return -1;

tcp:
	LOG(LL_INFO, "fd %d %s: tcp (%s)", fd, desc, reason ? reason : tp_reason_str(why));
	if (pl_conf->fallback == CONF_FALLBACK_ERROR) {
		errno = why == TP_REASON_LINK_DOWN ? ENETUNREACH : ECONNREFUSED;
		return -1;
	}
	return connect_tcp(fd, dst, dlen, reason ? reason : tp_reason_str(why), saved_errno);
}

int pl_check_pending(struct pl_sock *s, int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int st;

	pthread_mutex_lock(&s->lock);
	st = atomic_load_explicit(&s->state, memory_order_acquire); /* pairs with set_state() */
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
	set_state(s, st);
out:
	pthread_mutex_unlock(&s->lock);
	return st;
}

/* --- accept / listen ----------------------------------------------------------------------------- */

/* The server stays TCP although the client may have reserved NTB under KEY: end that
 * reservation, so the client sees a reset instead of waiting on a path nobody serves. */
static void reject_reservation(const struct tp_key *key)
{
	for (int i = 0; i < PL_SLOTS; i++) {
		struct tp_link *l = pl_links[i].tp;
		if (!l)
			continue;
		PL_ENTER();
		if (tp_refuse(l, key) == 0)
			LOG(LL_INFO, "link %s: refused the client's ntb reservation",
			    pl_conf->links[i % CONF_MAX_LINKS].name);
		PL_LEAVE();
	}
}

void pl_accepted(int fd, int nfd, struct pl_sock *listener, int flags)
{
	struct sockaddr_storage cli, srv;
	socklen_t cl = sizeof(cli), sl = sizeof(srv);
	const struct conf_peer *peer;
	struct tp_conn *conn = NULL;
	struct tp_key key;
	bool have_key = false;
	char desc[128] = "?";
	const char *reason = NULL;
	int r;

	(void)listener;
	if (pl_real.getpeername(nfd, (struct sockaddr *)&cli, &cl) < 0 ||
	    pl_real.getsockname(nfd, (struct sockaddr *)&srv, &sl) < 0) {
		reason = "getpeername failed";
		goto tcp;
	}
	pl_desc_pair(desc, sizeof(desc), (struct sockaddr *)&srv, (struct sockaddr *)&cli);
	if (pl_key_build((struct sockaddr *)&cli, (struct sockaddr *)&srv, &key) < 0) {
		reason = "not an IP address";
		goto tcp;
	}
	have_key = true;
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
	/* The client reserved the connection on one of the peer's links (pick_link()): look on
	 * each. */
	int link_index = -1;
	bool any_open = false;
	r = -ENOENT;
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
		r = tp_attach(link, &key, &conn);
		PL_LEAVE();
		if (r != -ENOENT) {
			link_index = peer->link_indices[k];
			break;
		}
	}
	if (!any_open) {
		reason = tp_reason_str(TP_REASON_LINK_DOWN);
		goto tcp;
	}
	if (r == -ENOENT) {
		reason = "client did not set up ntb";
		have_key = false; /* nothing reserved under it */
		goto tcp;
	}
	if (r == -ETIMEDOUT) {
		reason = "client did not decide in time";
		have_key = false; /* refused by tp_attach() */
		goto tcp;
	}
	if (r < 0) {
		reason = "peer error";
		goto tcp;
	}
	struct pl_sock *s = pl_sock_alloc(PL_CONN);
	if (!s) {
		PL_ENTER();
		tp_abort(conn);
		PL_LEAVE();
		reason = "out of memory";
		have_key = false; /* aborted above */
		goto tcp;
	}
	tp_conn_set_witness(conn, nfd); /* a silent peer's end is seen there (transport.h) */
	s->conn = conn;
	s->link_index = link_index;
	s->link_listen_side = is_loopback(link_index);
	snprintf(s->desc, sizeof(s->desc), "%s", desc);
	pl_sock_load_opts(s, nfd);
	atomic_store_explicit(&s->nonblock, !!(flags & SOCK_NONBLOCK), memory_order_relaxed);
	atomic_store_explicit(&s->state, PL_CS_OPEN, memory_order_relaxed);
	pl_fd_install(nfd, s);
	PL_ENTER();
	tp_conn_set_owner(conn, tp_process_id(), nfd);
	PL_LEAVE();
	pl_sock_put(s);
	LOG(LL_INFO, "fd %d %s: ntb (link %s, accepted on fd %d)", nfd, desc,
	    pl_conf->links[link_index].name, fd);
	return;
tcp:
	LOG(LL_INFO, "fd %d %s: tcp (%s, accepted on fd %d)", nfd, desc, reason, fd);
	pl_tcpstat_add(nfd, NULL, reason);
	if (have_key)
		reject_reservation(&key);
}

bool pl_listened(int fd)
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
	uint16_t port = sa_port((struct sockaddr *)&ss);
	if (port == 0)
		return false; /* listen() picks it: advertised after the kernel listen */
	s = pl_sock_alloc(PL_LISTENER);
	if (!s)
		return false;
	s->port = port;
	for (int i = 0; i < pl_conf->n_links && i < CONF_MAX_LINKS; i++) {
		struct tp_link *l = pl_link_get_at(i, true, false, NULL);
		if (!l)
			continue;
		PL_ENTER();
		int r = tp_listen(l, s->port);
		PL_LEAVE();
		if (r < 0)
			LOG(LL_WARN, "fd %d: cannot advertise port %u on link %s: %s", fd, s->port,
			    pl_conf->links[i].name, strerror(-r));
		else
			LOG(LL_DEBUG, "fd %d: port %u advertised on link %s", fd, s->port,
			    pl_conf->links[i].name);
	}
	pl_fd_install(fd, s);
	pl_sock_put(s);
	return true;
}

void pl_listener_links(uint16_t port, bool advertise)
{
	for (int i = 0; pl_conf && i < pl_conf->n_links && i < CONF_MAX_LINKS; i++) {
		struct tp_link *l = pl_links[listen_slot(i)].tp;
		if (!l)
			continue;
		PL_ENTER();
		if (advertise)
			tp_listen(l, port);
		else
			tp_unlisten(l, port);
		PL_LEAVE();
	}
}

int pl_links_open_all(void)
{
	int n = 0;

	/* Before a credential change: glibc would abort the program if the helper thread's
	 * set*id failed where the caller's succeeded (tp_helper_hold()). No effect on a helper
	 * already running; held until a socket needs the links. */
	helper_hold(true);
	for (int i = 0; i < PL_SLOTS; i++)
		n += slot_valid(i) && link_get(i, false, NULL) != NULL;
	return n;
}

/* The last reference is gone: end the connection / withdraw the listener. */
void pl_sock_release(struct pl_sock *s)
{
	PL_ENTER();
	switch (s->kind) {
	case PL_CONN:
		if (s->conn) {
			/* last reference: pairs with set_state(); conn and state are final */
			if (atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_OPEN ||
			    atomic_load_explicit(&s->linger_abort, memory_order_relaxed))
				tp_abort(s->conn);
			else
				tp_close(s->conn);
		}
		s->conn = NULL;
		break;
	case PL_LISTENER:
		for (int i = 0; pl_conf && i < pl_conf->n_links && i < CONF_MAX_LINKS; i++)
			if (pl_links[listen_slot(i)].tp)
				tp_unlisten(pl_links[listen_slot(i)].tp, s->port);
		break;
	case PL_EPOLL:
		pl_epoll_free(s->ep);
		s->ep = NULL;
		break;
	}
	PL_LEAVE();
}

/* fork(), early handler: our own locks. */
void pl_atfork_child(void)
{
	pthread_mutex_init(&pl_link_lock, NULL);
	pthread_mutex_init(&pl_hold_lock, NULL);
	pl_fdtab_atfork_child();
}

/* fork(), after the transport's handler (which registers itself and calls tp_atfork_child(),
 * so we do not call it twice): the child takes its own reference on every advertised port
 * (pre-forked workers) and owns its inherited connections for `ntbsock stat`. */
static void pl_atfork_links_child(void)
{
	PL_ENTER();
	int hi = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);
	for (int fd = 0; fd < hi && fd < pl_nfds; fd++) {
		struct pl_sock *s = atomic_load_explicit(&pl_fds[fd], memory_order_relaxed);
		if (s && s->kind == PL_CONN && s->conn)
			tp_conn_set_owner(s->conn, tp_process_id(), fd);
		if (!s || s->kind != PL_LISTENER)
			continue;
		bool seen = false; /* once per listener object, not per fd */
		for (int j = 0; j < fd && !seen; j++)
			seen = atomic_load_explicit(&pl_fds[j], memory_order_relaxed) == s;
		for (int i = 0; !seen && i < pl_conf->n_links && i < CONF_MAX_LINKS; i++)
			if (pl_links[listen_slot(i)].tp)
				tp_listen(pl_links[listen_slot(i)].tp, s->port);
	}
	PL_LEAVE();
}
