// SPDX-License-Identifier: MIT
/* Addresses: the 4-tuple key both sides' set-up names a connection by, printable forms for the
 * log, and the host's own addresses (what a connect binds to before it reserves its path). */
#include "preload/pl_int.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/urcu-bp.h>
#include <urcu/rculfhash.h> /* (after the flavour's header; declarations only: see src_urcu_load()) */

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
 * leaves) and kept for pl_src_ttl_ns; PL_SRC_N destinations, replaced in src_keep_rank() order.
 *
 * Every thread reads it on every NTB connect; it changes once per destination per TTL. So it is
 * liburcu's lock-free hash table (cds_lfht) with the urcu-bp flavour (#21 item 2): a lookup is a
 * read-side section and no lock; a writer, under src_write_lock (writers only), publishes a new
 * entry with cds_lfht_add_replace() (an entry never changes once published) and frees the entry
 * it replaced, or the oldest it evicted, after urcu_bp_synchronize_rcu() outside its read-side
 * section. No liburcu thread: the table has a fixed size (no CDS_LFHT_AUTO_RESIZE, so no resize
 * worker) and nothing uses call_rcu() (no call_rcu worker). liburcu is not linked but loaded
 * by the first write (src_urcu_load()): linked, liburcu-bp's constructor would create a
 * pthread key and register the process for membarrier(2) in every program the library is
 * preloaded into. Until then no lookup enters a read-side section, so a program that never
 * connects over ntbsock neither loads liburcu nor registers a thread with it.
 *
 *   what           written by                                  read by
 *   pl_src_ht      src_table(), once, under src_write_lock     src_lookup(), fork handlers
 *   urcu           src_urcu_load(), before pl_src_ht           whoever saw pl_src_ht set
 *   the table      src_learn() under src_write_lock            src_lookup() (read-side section)
 *   an entry       src_learn(), before publishing it; never    src_lookup() (read-side section)
 *                  after
 */
#define PL_SRC_N       16
#define PL_SRC_BUCKETS 32 /* fixed: init, minimum and maximum number of buckets */

int64_t pl_src_ttl_ns = 10 * 1000000000LL;

struct pl_src_ent {
	struct cds_lfht_node node;
	uint8_t addr[16]; /* the destination, IPv4 as IPv4-mapped */
	int family;       /* the socket's */
	uint32_t scope;   /* the destination's IPv6 scope (its interface: fe80::1 on two links
			   * are two destinations), 0 for IPv4 */
	bool host;        /* the kernel's source for it is one of this host's addresses */
	int64_t at_ns;    /* learned then */
};

struct src_key {
	const uint8_t *addr;
	int family;
	uint32_t scope;
};

static _Atomic(struct cds_lfht *) pl_src_ht;
static pthread_mutex_t src_write_lock = PTHREAD_MUTEX_INITIALIZER;

/* The liburcu calls used here, by the names liburcu 0.13 (soname 8) exports. */
#define PL_URCU_BP_SO  "liburcu-bp.so.8"
#define PL_URCU_CDS_SO "liburcu-cds.so.8"

static struct {
	__typeof__(&urcu_bp_read_lock) read_lock;
	__typeof__(&urcu_bp_read_unlock) read_unlock;
	__typeof__(&urcu_bp_synchronize_rcu) synchronize;
	__typeof__(&urcu_bp_before_fork) before_fork;
	__typeof__(&urcu_bp_after_fork_parent) after_fork_parent;
	__typeof__(&urcu_bp_after_fork_child) after_fork_child;
	const struct rcu_flavor_struct *flavor;
	__typeof__(&_cds_lfht_new) lfht_new;
	__typeof__(&cds_lfht_lookup) lookup;
	__typeof__(&cds_lfht_add_replace) add_replace;
	__typeof__(&cds_lfht_del) del;
	__typeof__(&cds_lfht_first) first;
	__typeof__(&cds_lfht_next) next;
} urcu;

/* Load liburcu-bp and liburcu-cds and fill URCU, once; 0, or -ENOENT when either or a name is
 * missing (then nothing is cached: every connect probes). Under src_write_lock. */
static int src_urcu_load(void)
{
	static int tried; /* (under src_write_lock) */

	if (tried++)
		return urcu.next ? 0 : -ENOENT;
	void *bp = dlopen(PL_URCU_BP_SO, RTLD_NOW | RTLD_LOCAL);
	void *cds = bp ? dlopen(PL_URCU_CDS_SO, RTLD_NOW | RTLD_LOCAL) : NULL;
	const struct { void *lib, **fn; const char *name; } sym[] = {
		{ bp, (void **)&urcu.read_lock, "urcu_bp_read_lock" },
		{ bp, (void **)&urcu.read_unlock, "urcu_bp_read_unlock" },
		{ bp, (void **)&urcu.synchronize, "urcu_bp_synchronize_rcu" },
		{ bp, (void **)&urcu.before_fork, "urcu_bp_before_fork" },
		{ bp, (void **)&urcu.after_fork_parent, "urcu_bp_after_fork_parent" },
		{ bp, (void **)&urcu.after_fork_child, "urcu_bp_after_fork_child" },
		{ bp, (void **)&urcu.flavor, "urcu_bp_flavor" },
		{ cds, (void **)&urcu.lfht_new, "_cds_lfht_new" },
		{ cds, (void **)&urcu.lookup, "cds_lfht_lookup" },
		{ cds, (void **)&urcu.add_replace, "cds_lfht_add_replace" },
		{ cds, (void **)&urcu.del, "cds_lfht_del" },
		{ cds, (void **)&urcu.first, "cds_lfht_first" },
		{ cds, (void **)&urcu.next, "cds_lfht_next" },
	};

	for (size_t i = 0; i < sizeof(sym) / sizeof(sym[0]); i++)
		if (!sym[i].lib || !(*sym[i].fn = dlsym(sym[i].lib, sym[i].name))) {
			LOG(LL_DEBUG, "%s: not found (%s): no cache of source addresses",
			    sym[i].name, sym[i].lib ? dlerror() : PL_URCU_BP_SO " or " PL_URCU_CDS_SO);
			urcu.next = NULL;
			return -ENOENT;
		}
	return 0;
}

static unsigned long src_hash(const uint8_t *addr, int family, uint32_t scope)
{
	uint64_t a, b, h;

	memcpy(&a, addr, 8);
	memcpy(&b, addr + 8, 8);
	h = (a * 0x9e3779b97f4a7c15ULL) ^ (b + (uint64_t)family + ((uint64_t)scope << 32));
	h *= 0xff51afd7ed558ccdULL; /* (the table picks the bucket by the low bits) */
	return (unsigned long)(h ^ (h >> 33));
}

static int src_match(struct cds_lfht_node *node, const void *key)
{
	const struct pl_src_ent *e = caa_container_of(node, struct pl_src_ent, node);
	const struct src_key *k = key;

	return e->family == k->family && e->scope == k->scope && !memcmp(e->addr, k->addr, 16);
}

/* The entry for K, or NULL. Inside a read-side section (the entry lives until it ends). */
static struct pl_src_ent *src_find(struct cds_lfht *ht, const struct src_key *k)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	urcu.lookup(ht, src_hash(k->addr, k->family, k->scope), src_match, k, &it);
	n = cds_lfht_iter_get_node(&it);
	return n ? caa_container_of(n, struct pl_src_ent, node) : NULL;
}

/* What a socket of FAMILY connecting to ADDR gets, as learned less than pl_src_ttl_ns before NOW:
 * 1 one of this host's addresses, 0 another, -1 unknown (no entry, or too old). */
static int src_lookup(const uint8_t *addr, int family, uint32_t scope, int64_t now)
{
	/* acquire: pairs with the release store in src_table() (the table is initialised) */
	struct cds_lfht *ht = atomic_load_explicit(&pl_src_ht, memory_order_acquire);
	struct src_key k = { addr, family, scope };
	struct pl_src_ent *e;
	int ret = -1;

	if (!ht)
		return -1;
	urcu.read_lock();
	e = src_find(ht, &k); /* (published by cds_lfht_add_replace(), whose barriers order the
			       * entry's fields before it; the lookup reads it with
			       * rcu_dereference()) */
	if (e && now - e->at_ns < pl_src_ttl_ns)
		ret = e->host;
	urcu.read_unlock();
	return ret;
}

/* The table, made on first use. Under src_write_lock. NULL without liburcu or memory. */
static struct cds_lfht *src_table(void)
{
	/* relaxed: under src_write_lock, which every store holds */
	struct cds_lfht *ht = atomic_load_explicit(&pl_src_ht, memory_order_relaxed);

	if (ht)
		return ht;
	if (src_urcu_load() < 0)
		return NULL;
	ht = urcu.lfht_new(PL_SRC_BUCKETS, PL_SRC_BUCKETS, PL_SRC_BUCKETS, 0, NULL, urcu.flavor, NULL);
	/* release: pairs with the acquire load in src_lookup() */
	if (ht)
		atomic_store_explicit(&pl_src_ht, ht, memory_order_release);
	return ht;
}

/* The order in which entries are replaced, lowest first: one past its TTL, then a "host" (a
 * probe finds it again), then a fresh "not host" (no probe can find it again: the next connect
 * there would stay TCP instead of binding, pl_src_not_host()). */
static int src_keep_rank(const struct pl_src_ent *e, int64_t now)
{
	if (now - e->at_ns >= pl_src_ttl_ns)
		return 0;
	return e->host ? 1 : 2;
}

/* With more than PL_SRC_N entries, unlink the first to replace (src_keep_rank(), the oldest
 * within a rank) but KEEP, and return it (NULL otherwise). Under src_write_lock, inside a
 * read-side section. */
static struct pl_src_ent *src_evict(struct cds_lfht *ht, const struct pl_src_ent *keep, int64_t now)
{
	struct pl_src_ent *e, *oldest = NULL;
	struct cds_lfht_iter it;
	int n = 0, rank = 3;

	for (urcu.first(ht, &it); cds_lfht_iter_get_node(&it); urcu.next(ht, &it)) {
		e = caa_container_of(cds_lfht_iter_get_node(&it), struct pl_src_ent, node);
		n++;
		if (e == keep)
			continue;
		int r = src_keep_rank(e, now);
		if (r < rank || (r == rank && e->at_ns < oldest->at_ns)) {
			oldest = e;
			rank = r;
		}
	}
	if (n <= PL_SRC_N || !oldest || urcu.del(ht, &oldest->node) != 0)
		return NULL;
	return oldest;
}

/* Record what a socket of FAMILY connecting to ADDR gets, learned at NOW. A fresh "not host" is
 * kept against a probe's "host" (another thread's connect found it while this probe ran; the
 * probe says "host" again wherever the difference is the socket's own, pl_src_not_host()).
 * Out of memory: nothing kept. */
static void src_learn(const uint8_t *addr, int family, uint32_t scope, bool host, int64_t now)
{
	struct pl_src_ent *e = malloc(sizeof(*e)), *cur, *old = NULL;
	struct src_key k = { addr, family, scope };
	struct cds_lfht_node *n;
	struct cds_lfht *ht;

	if (!e)
		return;
	cds_lfht_node_init(&e->node);
	memcpy(e->addr, addr, 16);
	e->family = family;
	e->scope = scope;
	e->host = host;
	e->at_ns = now;
	pthread_mutex_lock(&src_write_lock);
	ht = src_table();
	if (!ht) {
		pthread_mutex_unlock(&src_write_lock);
		free(e);
		return;
	}
	urcu.read_lock(); /* (the table's updates and walks want one) */
	cur = src_find(ht, &k);
	if (cur && host && !cur->host && now - cur->at_ns < pl_src_ttl_ns) {
		old = e; /* (never published: freed at once) */
	} else {
		n = urcu.add_replace(ht, src_hash(addr, family, scope), src_match, &k, &e->node);
		old = n ? caa_container_of(n, struct pl_src_ent, node) : src_evict(ht, e, pl_now_ns());
	}
	urcu.read_unlock();
	if (old && old != e)
		urcu.synchronize(); /* (readers may still hold OLD) */
	pthread_mutex_unlock(&src_write_lock);
	free(old);
}

/* DST's IPv6 scope id (the interface of a link-local address), 0 for IPv4. */
static uint32_t dst_scope(const struct sockaddr *dst)
{
	return dst->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)dst)->sin6_scope_id : 0;
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
	int known;
	bool host;

	if (key_part(dst, addr, port) < 0)
		return false;
	known = src_lookup(addr, family, dst_scope(dst), now);
	if (known >= 0)
		return known;
	host = src_probe(dst, dlen, family); /* (a few system calls) */
	src_learn(addr, family, dst_scope(dst), host, now);
	return host;
}

void pl_src_not_host(const struct sockaddr *dst, int family)
{
	uint8_t addr[16], port[2];

	if (key_part(dst, addr, port) < 0)
		return;
	/* Remembered as "not the host's" for pl_src_ttl_ns, not dropped: a probe now would find
	 * the host's address again wherever the difference is the socket's own (SO_BINDTODEVICE,
	 * SO_MARK, a policy rule on ipproto tcp or the ports, a cgroup connect hook), and every
	 * connect to DST would stay TCP; the next ones bind instead. */
	src_learn(addr, family, dst_scope(dst), false, pl_now_ns());
}

/* fork(): src_write_lock is held across it (no table made, no grace period running meanwhile),
 * and, once the table exists, urcu-bp's own locks (urcu_bp_before_fork(): a thread's first
 * read-side section registers it under them). */
void pl_addr_atfork_prepare(void)
{
	pthread_mutex_lock(&src_write_lock);
	/* relaxed: under src_write_lock, which every store holds */
	if (atomic_load_explicit(&pl_src_ht, memory_order_relaxed))
		urcu.before_fork();
}

void pl_addr_atfork_parent(void)
{
	/* relaxed: under src_write_lock, held since pl_addr_atfork_prepare() */
	if (atomic_load_explicit(&pl_src_ht, memory_order_relaxed))
		urcu.after_fork_parent();
	pthread_mutex_unlock(&src_write_lock);
}

void pl_addr_atfork_child(void)
{
	/* relaxed: under src_write_lock, held since pl_addr_atfork_prepare() */
	if (atomic_load_explicit(&pl_src_ht, memory_order_relaxed))
		urcu.after_fork_child(); /* (forgets the parent's other threads) */
	pthread_mutex_init(&src_write_lock, NULL);
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
