// SPDX-License-Identifier: MIT
/* Addresses: the 4-tuple key both sides' set-up names a connection by, printable forms for the
 * log, and the host's own addresses (what a connect binds to before it reserves its path). */
#include "preload/pl_int.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

void pl_addr_str(const struct sockaddr *sa, char *buf, size_t len)
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
	pl_addr_str(from, a, sizeof(a));
	pl_addr_str(to, b, sizeof(b));
	snprintf(buf, len, "%s -> %s", a, b);
}

uint16_t pl_sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

bool pl_sa_is_any(const struct sockaddr *sa)
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
int pl_bind_host_addr(int fd, const struct sockaddr *dst, bool no_port)
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

/* --- the kernel's own choice of source address ----------------------------------------------- */

/* Where the kernel's route to a destination already picks one of this host's addresses, the bind
 * of pl_bind_host_addr() changes nothing but costs two system calls per set-up (#21 item 3):
 * a connect then leaves the socket unbound, and pl_connect_late() checks the address the kernel
 * chose (a route changed meanwhile, or the socket's own routing differs from the probe's: that
 * connection stays TCP and the next ones to that destination bind again, pl_src_not_host()).
 * Learned once per destination address and socket family by a UDP socket's connect (no packet
 * leaves) and kept for PL_SRC_TTL_NS; PL_SRC_N destinations, the oldest replaced. */
#define PL_SRC_N      16
#define PL_SRC_TTL_NS (10 * 1000000000LL)

struct pl_src_ent {
	uint8_t addr[16]; /* the destination, IPv4 as IPv4-mapped */
	int family;       /* the socket's */
	bool host;        /* the kernel's source for it is one of this host's addresses */
	int64_t at_ns;    /* learned then; 0: unused */
};

static pthread_mutex_t pl_src_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_src_ent pl_src[PL_SRC_N];

static struct pl_src_ent *src_find(const uint8_t *addr, int family)
{
	for (int i = 0; i < PL_SRC_N; i++)
		if (pl_src[i].at_ns && pl_src[i].family == family && !memcmp(pl_src[i].addr, addr, 16))
			return &pl_src[i];
	return NULL;
}

/* What a socket of FAMILY connecting to ADDR gets, learned at NOW (its entry, else the oldest). */
static void src_learn(const uint8_t *addr, int family, bool host, int64_t now)
{
	struct pl_src_ent *e;

	pthread_mutex_lock(&pl_src_lock);
	e = src_find(addr, family);
	if (!e) {
		e = &pl_src[0];
		for (int i = 1; i < PL_SRC_N; i++)
			if (pl_src[i].at_ns < e->at_ns)
				e = &pl_src[i];
	}
	memcpy(e->addr, addr, 16);
	e->family = family;
	e->host = host;
	e->at_ns = now ? now : 1;
	pthread_mutex_unlock(&pl_src_lock);
}

/* Does a socket of FAMILY connected to DST get one of this host's addresses from the kernel? */
static bool src_probe(const struct sockaddr *dst, socklen_t dlen, int family)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	int fd = pl_real.socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool host;

	if (fd < 0)
		return false;
	host = pl_real.connect(fd, dst, dlen) == 0 &&
	       pl_real.getsockname(fd, (struct sockaddr *)&local, &llen) == 0 &&
	       pl_is_host_addr((struct sockaddr *)&local);
	pl_real.close(fd);
	return host;
}

bool pl_src_is_host(const struct sockaddr *dst, socklen_t dlen, int family)
{
	uint8_t addr[16], port[2];
	int64_t now = pl_now_ns();
	struct pl_src_ent *e;
	bool host;

	if (key_part(dst, addr, port) < 0)
		return false;
	pthread_mutex_lock(&pl_src_lock);
	e = src_find(addr, family);
	if (e && now - e->at_ns < PL_SRC_TTL_NS) {
		host = e->host;
		pthread_mutex_unlock(&pl_src_lock);
		return host;
	}
	pthread_mutex_unlock(&pl_src_lock);
	host = src_probe(dst, dlen, family); /* (outside the lock: a few system calls) */
	src_learn(addr, family, host, now);
	return host;
}

void pl_src_not_host(const struct sockaddr *dst, int family)
{
	uint8_t addr[16], port[2];

	if (key_part(dst, addr, port) < 0)
		return;
	/* Remembered as "not the host's" for PL_SRC_TTL_NS, not dropped: a probe now would find
	 * the host's address again wherever the difference is the socket's own (SO_BINDTODEVICE,
	 * SO_MARK, a policy rule on ipproto tcp or the ports, a cgroup connect hook), and every
	 * connect to DST would stay TCP; the next ones bind instead. */
	src_learn(addr, family, false, pl_now_ns());
}

void pl_addr_atfork_child(void)
{
	pthread_mutex_init(&pl_src_lock, NULL); /* (another thread of the parent may have held it) */
}

/* Is SA (port ignored) one of this host's configured addresses? IPv4-mapped counts as IPv4. */
bool pl_is_host_addr(const struct sockaddr *sa)
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
