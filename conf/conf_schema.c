// SPDX-License-Identifier: MIT
/* The config schema: every section, its keys, types, defaults and ranges, checked against the
 * parsed libconfig tree and copied into struct conf. The man page ntbsock.conf(5) mirrors it. */
#include "conf/conf_int.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

#define KIB (1024ull)
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* --- addresses --- */

/* KEY in G: one address string, or an array / list of them. */
static int get_addrs(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		     bool required, struct conf_addr *addrs, int *ret_n)
{
	config_setting_t *s = config_setting_get_member(g, key);
	int n, count;

	if (!s)
		return required ? conf_err_missing(ctx, g, key) : 1;
	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		n = 1;
	} else if (config_setting_type(s) == CONFIG_TYPE_ARRAY ||
		   config_setting_type(s) == CONFIG_TYPE_LIST) {
		n = config_setting_length(s);
	} else {
		return conf_err_at(ctx, s, "must be an address string or a list [ \"a\", \"b\" ]");
	}
	if (n == 0 && required)
		return conf_err_at(ctx, s, "must list at least one address");
	if (n > CONF_MAX_ADDRS)
		return conf_err_at(ctx, s, "too many addresses (at most %d)", CONF_MAX_ADDRS);
	count = 0;
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_type(s) == CONFIG_TYPE_STRING
					  ? s : config_setting_get_elem(s, (unsigned)i);
		struct conf_addr a;

		if (config_setting_type(e) != CONFIG_TYPE_STRING)
			return conf_err_at(ctx, e, "must be an address string");
		if (conf_parse_addr(config_setting_get_string(e), &a))
			return conf_err_at(ctx, e, "not an IPv4 or IPv6 address");
		for (int j = 0; j < count; j++)
			if (conf_addr_equal(&addrs[j], &a))
				return conf_err_at(ctx, e, "address listed twice");
		addrs[count++] = a;
	}
	*ret_n = count;
	return 0;
}

/* --- host --- */

static int parse_host(struct conf_ctx *ctx, const config_setting_t *root)
{
	static const char *const keys[] = { "name", "addresses", NULL };
	config_setting_t *g = config_setting_get_member(root, "host");
	struct conf *c = ctx->c;
	int rc;

	if (!g)
		return conf_err_missing(ctx, root, "host");
	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)))
		return rc;
	rc = conf_get_name(ctx, g, "name", true, c->host_name);
	if (rc < 0)
		return rc;
	rc = get_addrs(ctx, g, "addresses", false, c->host_addrs, &c->n_host_addrs);
	return rc < 0 ? rc : 0;
}

/* --- tunables --- */

void conf_tunables_defaults(struct conf_tunables *t)
{
	/* Keep equal to tp_params_init() (transport/tp_link.c), but for spin_us: 200 there, the
	 * transport's own measurement's (ntbsock perf without -c; ntbsock.conf(5) says so). */
	t->queue_size = 0; /* auto: the largest power of two the window allows, at most 1 MiB */
	t->inline_slots = 8;
	t->inline_max = 116;
	t->short_max = 16 * KIB;
	t->contexts = 256;
	t->connections = 0; /* auto: as many as a quarter of the window holds, at most 16384 */
	t->cnct_timeout_ms = 10;
	t->send_timeout_ms = 100;
	t->recv_timeout_ms = 50;
	t->detect_timeout_ms = 100;
	t->max_err = 32;
	t->spin_us = 50;
	t->setup_timeout_ms = 2000;
	t->peer_timeout_ms = 30000;
}

static int get_u32(struct conf_ctx *ctx, const config_setting_t *g, const char *key, bool size,
		   uint64_t lo, uint64_t hi, uint32_t *field)
{
	uint64_t v;
	int rc = conf_get_u64(ctx, g, key, false, size, lo, hi, &v);

	if (rc == 0)
		*field = (uint32_t)v;
	return rc < 0 ? rc : 0;
}

/* queue_size: "auto" or 0 (default), or a size 4K..1G. */
static int get_queue_size(struct conf_ctx *ctx, const config_setting_t *g, uint32_t *field)
{
	const config_setting_t *s = config_setting_get_member(g, "queue_size");
	uint64_t v;
	int rc;

	if (s && config_setting_type(s) == CONFIG_TYPE_STRING &&
	    strcmp(config_setting_get_string(s), "auto") == 0) {
		*field = 0;
		return 0;
	}
	if (s && (config_setting_type(s) == CONFIG_TYPE_INT ||
		  config_setting_type(s) == CONFIG_TYPE_INT64) && config_setting_get_int64(s) == 0) {
		*field = 0;
		return 0;
	}
	rc = conf_get_u64(ctx, g, "queue_size", false, true, 4 * KIB, 1 * GIB, &v);
	if (rc == 0)
		*field = (uint32_t)v;
	return rc < 0 ? rc : 0;
}

/* connections: "auto" (or 0) or 1..16384 */
static int get_connections(struct conf_ctx *ctx, const config_setting_t *g, uint32_t *field)
{
	const config_setting_t *s = config_setting_get_member(g, "connections");

	if (s && config_setting_type(s) == CONFIG_TYPE_STRING &&
	    strcmp(config_setting_get_string(s), "auto") == 0) {
		*field = 0;
		return 0;
	}
	return get_u32(ctx, g, "connections", false, 0, 16384, field);
}

static int parse_tunables(struct conf_ctx *ctx, const config_setting_t *root)
{
	static const char *const keys[] = {
		"queue_size", "inline_slots", "inline_max", "short_max", "contexts", "connections",
		"cnct_timeout_ms", "send_timeout_ms", "recv_timeout_ms", "detect_timeout_ms",
		"max_err", "spin_us", "setup_timeout_ms", "peer_timeout_ms", NULL
	};
	config_setting_t *g = config_setting_get_member(root, "tunables");
	struct conf_tunables *t = &ctx->c->tunables;
	int rc;

	if (!g)
		return 0;
	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)))
		return rc;
	if ((rc = get_queue_size(ctx, g, &t->queue_size)) ||
	    (rc = get_u32(ctx, g, "inline_slots", false, 2, 65536, &t->inline_slots)) ||
	    (rc = get_u32(ctx, g, "inline_max", false, 0, 116, &t->inline_max)) ||
	    (rc = get_u32(ctx, g, "short_max", true, 0, 1 * GIB, &t->short_max)) ||
	    (rc = get_u32(ctx, g, "contexts", false, 1, 4096, &t->contexts)) ||
	    (rc = get_connections(ctx, g, &t->connections)) ||
	    (rc = get_u32(ctx, g, "cnct_timeout_ms", false, 1, 600000, &t->cnct_timeout_ms)) ||
	    (rc = get_u32(ctx, g, "send_timeout_ms", false, 1, 600000, &t->send_timeout_ms)) ||
	    (rc = get_u32(ctx, g, "recv_timeout_ms", false, 1, 600000, &t->recv_timeout_ms)) ||
	    (rc = get_u32(ctx, g, "detect_timeout_ms", false, 1, 600000, &t->detect_timeout_ms)) ||
	    (rc = get_u32(ctx, g, "max_err", false, 1, 1000, &t->max_err)) ||
	    (rc = get_u32(ctx, g, "spin_us", false, 0, 1000000, &t->spin_us)) ||
	    (rc = get_u32(ctx, g, "setup_timeout_ms", false, 1, 600000, &t->setup_timeout_ms)) ||
	    (rc = get_u32(ctx, g, "peer_timeout_ms", false, 1, 86400000, &t->peer_timeout_ms)))
		return rc;
	if (t->queue_size && !is_pow2(t->queue_size))
		return conf_err_at(ctx, config_setting_get_member(g, "queue_size"),
				   "must be a power of two");
	if (!is_pow2(t->inline_slots))
		return conf_err_at(ctx, config_setting_get_member(g, "inline_slots"),
				   "must be a power of two");
	if (t->queue_size && t->short_max > t->queue_size &&
	    !config_setting_get_member(g, "short_max"))
		t->short_max = t->queue_size; /* the default follows a smaller queue */
	if (t->queue_size && t->short_max > t->queue_size) {
		char q[32];

		conf_fmt_size(t->queue_size, q, sizeof(q));
		return conf_err_at(ctx, config_setting_get_member(g, "short_max"),
				   "must not exceed queue_size (%s)", q);
	}
	return 0;
}

/* --- links --- */

static int parse_fault(struct conf_ctx *ctx, const config_setting_t *link, struct conf_fault *f)
{
	static const char *const keys[] = { "enabled", "drop", "corrupt", "delay_us", "seed",
					    "cut_after", "cut_after_ms", NULL };
	config_setting_t *g = config_setting_get_member(link, "fault");
	uint64_t v;
	int rc;

	if (!g)
		return 0;
	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)))
		return rc;
	f->enabled = true;
	if ((rc = conf_get_bool(ctx, g, "enabled", false, &f->enabled)) < 0 ||
	    (rc = conf_get_double(ctx, g, "drop", false, 0, 1, &f->drop)) < 0 ||
	    (rc = conf_get_double(ctx, g, "corrupt", false, 0, 1, &f->corrupt)) < 0)
		return rc;
	rc = conf_get_u64(ctx, g, "delay_us", false, false, 0, 1000000, &v);
	if (rc < 0)
		return rc;
	if (rc == 0)
		f->delay_us = (uint32_t)v;
	rc = conf_get_u64(ctx, g, "seed", false, false, 0, INT64_MAX, &v);
	if (rc < 0)
		return rc;
	if (rc == 0)
		f->seed = v;
	/* a group with only a cut is a fault group too: the decorator runs for it */
	rc = conf_get_u64(ctx, g, "cut_after", false, true, 0, INT64_MAX, &v);
	if (rc < 0)
		return rc;
	if (rc == 0)
		f->cut_after = v;
	rc = conf_get_u64(ctx, g, "cut_after_ms", false, false, 0, 86400000, &v);
	if (rc < 0)
		return rc;
	if (rc == 0)
		f->cut_after_ms = (uint32_t)v;
	return 0;
}

/* The emulated speed of a shm link: { bandwidth = "3500M"; latency_ns = 800; } (bytes per
 * second this host writes into the link, one-way latency). */
static int parse_speed(struct conf_ctx *ctx, const config_setting_t *link, struct conf_speed *sp)
{
	static const char *const keys[] = { "bandwidth", "latency_ns", NULL };
	config_setting_t *g = config_setting_get_member(link, "speed");
	uint64_t v;
	int rc;

	if (!g)
		return 0;
	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)))
		return rc;
	rc = conf_get_u64(ctx, g, "bandwidth", false, true, 1 * MIB, 1024 * GIB, &v);
	if (rc < 0)
		return rc;
	if (rc == 0)
		sp->bandwidth = v;
	rc = conf_get_u64(ctx, g, "latency_ns", false, false, 0, 1000000000, &v);
	if (rc < 0)
		return rc;
	if (rc == 0)
		sp->latency_ns = (uint32_t)v;
	return 0;
}

static int parse_mode(struct conf_ctx *ctx, const config_setting_t *g, mode_t *mode)
{
	config_setting_t *s = config_setting_get_member(g, "mode");
	const char *v;
	unsigned m = 0;

	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return conf_err_at(ctx, s, "must be an octal string like \"0600\"");
	v = config_setting_get_string(s);
	if (!*v || strlen(v) > 4)
		return conf_err_at(ctx, s, "must be an octal string like \"0600\"");
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '7')
			return conf_err_at(ctx, s, "must be an octal string like \"0600\"");
		m = m * 8 + (unsigned)(*p - '0');
	}
	if (m > 0777)
		return conf_err_at(ctx, s, "out of range (allowed 0000..0777)");
	if ((m & 0600) != 0600)
		return conf_err_at(ctx, s, "the owner must be able to read and write (0600)");
	*mode = (mode_t)m;
	return 0;
}

static int parse_group(struct conf_ctx *ctx, const config_setting_t *g, struct conf_link *l)
{
	config_setting_t *s = config_setting_get_member(g, "group");
	int t;

	if (!s)
		return 0;
	t = config_setting_type(s);
	if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
		long long v = config_setting_get_int64(s);

		if (v < 0 || v >= 0xffffffffLL)
			return conf_err_at(ctx, s, "out of range (allowed 0..4294967294)");
		l->group = (gid_t)v;
		snprintf(l->group_name, sizeof(l->group_name), "%lld", v);
		return 0;
	}
	if (t != CONFIG_TYPE_STRING)
		return conf_err_at(ctx, s, "must be a group name or a numeric gid");
	const char *name = config_setting_get_string(s);
	char msg[128];
	if (conf_check_name(name, msg, sizeof(msg)))
		return conf_err_at(ctx, s, "%s", msg);
	struct group gr, *res = NULL;
	char buf[4096];
	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return conf_err_at(ctx, s, "no such group");
	l->group = res->gr_gid;
	snprintf(l->group_name, sizeof(l->group_name), "%s", name);
	return 0;
}

/* A key that only makes sense for one backend. */
static int only_for(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		    const char *backend)
{
	config_setting_t *s = config_setting_get_member(g, key);

	if (s)
		return conf_err_at(ctx, s, "only valid with backend \"%s\"", backend);
	return 0;
}

static int parse_link_shm(struct conf_ctx *ctx, const config_setting_t *g, struct conf_link *l)
{
	const char *path;
	int rc;

	if ((rc = only_for(ctx, g, "device", "pci")) || (rc = only_for(ctx, g, "bar", "pci")) ||
	    (rc = parse_speed(ctx, g, &l->speed)))
		return rc;
	rc = conf_get_string(ctx, g, "path", false, &path);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		const config_setting_t *s = config_setting_get_member(g, "path");

		if (path[0] != '/')
			return conf_err_at(ctx, s, "must be an absolute path");
		if (strlen(path) > CONF_PATH_MAX)
			return conf_err_at(ctx, s, "too long (at most %d characters)", CONF_PATH_MAX);
		if (path[strlen(path) - 1] == '/')
			return conf_err_at(ctx, s, "must name a file, not a directory");
		snprintf(l->path, sizeof(l->path), "%s", path);
	} else {
		snprintf(l->path, sizeof(l->path), "/dev/shm/ntbsock-%s", l->name);
	}
	if ((rc = parse_mode(ctx, g, &l->mode)) || (rc = parse_group(ctx, g, l)))
		return rc;
	rc = conf_get_bool(ctx, g, "allow_foreign_owner", false, &l->allow_foreign_owner);
	if (rc < 0)
		return rc;
	rc = conf_get_string(ctx, g, "ivshmem_server", false, &path);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		const config_setting_t *s = config_setting_get_member(g, "ivshmem_server");

		if (path[0] != '/')
			return conf_err_at(ctx, s, "must be an absolute path");
		if (strlen(path) > 107)
			return conf_err_at(ctx, s, "too long for a UNIX socket (at most 107 characters)");
		snprintf(l->ivshmem_server, sizeof(l->ivshmem_server), "%s", path);
	}
	rc = conf_get_bool(ctx, g, "loopback", false, &l->loopback);
	if (rc < 0)
		return rc;
	if (l->loopback && config_setting_get_member(g, "side"))
		return conf_err_at(ctx, config_setting_get_member(g, "side"),
				   "a loopback link is both sides: leave side out");
	return 0;
}

static int parse_link_pci(struct conf_ctx *ctx, const config_setting_t *g, struct conf_link *l)
{
	static const char *const shm_only[] = { "path", "mode", "group", "allow_foreign_owner",
						"ivshmem_server", "loopback", "speed", NULL };
	const char *dev;
	int64_t bar;
	int rc;

	for (const char *const *k = shm_only; *k; k++)
		if ((rc = only_for(ctx, g, *k, "shm")))
			return rc;
	if ((rc = conf_get_string(ctx, g, "device", true, &dev)))
		return rc;
	if (conf_check_device(dev))
		return conf_err_at(ctx, config_setting_get_member(g, "device"),
				   "not a PCI device (\"0000:00:04.0\", \"1af4:1110\" or \"class:0500\")");
	snprintf(l->device, sizeof(l->device), "%s", dev);
	rc = conf_get_i64(ctx, g, "bar", false, 0, 5, &bar);
	if (rc < 0)
		return rc;
	if (rc == 0)
		l->bar = (int)bar;
	if (!config_setting_get_member(g, "side"))
		return conf_err_missing(ctx, g, "side");
	return 0;
}

/* A backend this file has no keys for (ntb/ may have it: glue_check_backends() decides): none
 * of the keys of shm and pci. */
static int parse_link_other(struct conf_ctx *ctx, const config_setting_t *g, struct conf_link *l)
{
	static const char *const shm_only[] = { "path", "mode", "group", "allow_foreign_owner",
						"loopback", "speed", NULL };
	int rc;

	(void)l;
	for (const char *const *k = shm_only; *k; k++)
		if ((rc = only_for(ctx, g, *k, "shm")))
			return rc;
	if ((rc = only_for(ctx, g, "device", "pci")) || (rc = only_for(ctx, g, "bar", "pci")))
		return rc;
	return 0;
}

/* The backends with keys of their own (struct conf_link's shm and pci parts): the lowest side
 * a link may name (-1: claim a free one) and the parser of its keys. */
struct backend_keys {
	const char *name;
	int         side_min;
	int       (*parse)(struct conf_ctx *ctx, const config_setting_t *g, struct conf_link *l);
};

static const struct backend_keys *backend_keys_of(const char *name)
{
	static const struct backend_keys table[] = {
		{ "shm", -1, parse_link_shm },
		{ "pci", 0, parse_link_pci },
	};
	static const struct backend_keys other = { "", -1, parse_link_other };

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return &other;
}

/* The window must hold the connection slots and the pool of transfer contexts. Mirrors
 * transport's layout (tp_int.h: a 64 KiB header, per connection 512 bytes of control words and
 * the inline ring, per context a data ring of queue_size, at least 4 KiB when auto; with
 * connections auto, at least one slot per context); transport re-checks at open. */
static int check_window_fits(struct conf_ctx *ctx, const config_setting_t *g,
			     const struct conf_link *l)
{
	const struct conf_tunables *t = &ctx->c->tunables;
	uint64_t q = t->queue_size ? t->queue_size : 4 * KIB;
	uint64_t conns = t->connections ? t->connections : t->contexts;
	uint64_t need = 64 * KIB + conns * (512 + 128ull * t->inline_slots) + 4 * KIB +
			(uint64_t)t->contexts * q;
	const config_setting_t *s = config_setting_get_member(g, "window_size");
	char w[32], n[32], qs[32];

	if (l->window_size >= need)
		return 0;
	conf_fmt_size(l->window_size, w, sizeof(w));
	conf_fmt_size(need, n, sizeof(n));
	conf_fmt_size(q, qs, sizeof(qs));
	return conf_err_at(ctx, s ? s : g, "window %s too small for tunables (%u contexts x %s "
			   "queues + %llu connections x %u inline slots need %s)", w, t->contexts,
			   qs, (unsigned long long)conns, t->inline_slots, n);
}

static int parse_link(struct conf_ctx *ctx, const config_setting_t *g, struct conf_link *l)
{
	static const char *const keys[] = {
		"name", "backend", "side", "window_size", "path", "mode", "group",
		"allow_foreign_owner", "loopback", "device", "bar", "heartbeat_ms", "link_timeout_ms",
		"fault", "ivshmem_server", "doorbell", "speed", NULL
	};
	const struct backend_keys *bk;
	const config_setting_t *bs;
	int rc;
	int64_t side;
	uint64_t v;

	memset(l, 0, sizeof(*l));
	l->side = -1;
	l->window_size = 16 * MIB;
	l->mode = 0600;
	l->group = (gid_t)-1;
	l->bar = -1;
	l->doorbell = true;
	l->heartbeat_ms = 100;
	l->link_timeout_ms = 500;
	l->line = config_setting_source_line(g);

	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)) ||
	    (rc = conf_get_name(ctx, g, "name", true, l->name)) ||
	    (rc = conf_get_name(ctx, g, "backend", true, l->backend)))
		return rc;
	bs = config_setting_get_member(g, "backend");
	snprintf(l->backend_file, sizeof(l->backend_file), "%s", conf_setting_file(ctx, bs));
	l->backend_line = config_setting_source_line(bs);
	bk = backend_keys_of(l->backend);
	rc = conf_get_i64(ctx, g, "side", false, bk->side_min, 1, &side);
	if (rc < 0)
		return rc;
	if (rc == 0)
		l->side = (int)side;
	rc = conf_get_u64(ctx, g, "window_size", false, true, 64 * KIB, 64 * GIB, &v);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		if (v % 4096)
			return conf_err_at(ctx, config_setting_get_member(g, "window_size"),
					   "must be a multiple of 4096");
		l->window_size = (size_t)v;
	}
	rc = bk->parse(ctx, g, l);
	if (rc)
		return rc;
	rc = conf_get_bool(ctx, g, "doorbell", false, &l->doorbell);
	if (rc < 0)
		return rc;
	if ((rc = get_u32(ctx, g, "heartbeat_ms", false, 1, 60000, &l->heartbeat_ms)) ||
	    (rc = get_u32(ctx, g, "link_timeout_ms", false, 1, 600000, &l->link_timeout_ms)))
		return rc;
	if (l->link_timeout_ms <= l->heartbeat_ms) {
		const config_setting_t *s = config_setting_get_member(g, "link_timeout_ms");

		if (!s)
			s = config_setting_get_member(g, "heartbeat_ms");
		return conf_err_at(ctx, s, "link_timeout_ms (%u) must be greater than heartbeat_ms (%u)",
				   l->link_timeout_ms, l->heartbeat_ms);
	}
	if ((rc = check_window_fits(ctx, g, l)))
		return rc;
	return parse_fault(ctx, g, &l->fault);
}

/* A list ( { ... }, ... ) under KEY, or absent. */
static int get_list(struct conf_ctx *ctx, const config_setting_t *root, const char *key, int max,
		    config_setting_t **ret, int *ret_n)
{
	config_setting_t *s = config_setting_get_member(root, key);

	*ret = s;
	*ret_n = 0;
	if (!s)
		return 1;
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return conf_err_at(ctx, s, "must be a list ( { ... }, { ... } )");
	*ret_n = config_setting_length(s);
	if (*ret_n > max)
		return conf_err_at(ctx, s, "too many entries (at most %d)", max);
	return 0;
}

static int parse_links(struct conf_ctx *ctx, const config_setting_t *root)
{
	struct conf *c = ctx->c;
	config_setting_t *list;
	int n, rc = get_list(ctx, root, "links", CONF_MAX_LINKS, &list, &n);

	if (rc)
		return rc < 0 ? rc : 0;
	c->links = calloc((size_t)n + 1, sizeof(*c->links));
	if (!c->links)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(list, (unsigned)i);

		if ((rc = parse_link(ctx, g, &c->links[i])))
			return rc;
		c->n_links = i + 1;
		for (int j = 0; j < i; j++)
			if (strcmp(c->links[j].name, c->links[i].name) == 0)
				return conf_err_at(ctx, config_setting_get_member(g, "name"),
						   "duplicate link name (first defined at line %d)",
						   c->links[j].line);
	}
	return 0;
}

/* --- peers --- */

/* The link called NAME (setting E, for errors) as the next of P's links. */
static int add_peer_link(struct conf_ctx *ctx, const config_setting_t *e, const char *name,
			 struct conf_peer *p)
{
	const struct conf *c = ctx->c;
	int idx = -1;

	for (int i = 0; i < c->n_links; i++)
		if (strcmp(c->links[i].name, name) == 0)
			idx = i;
	if (idx < 0)
		return conf_err_at(ctx, e, "no link with this name");
	for (int k = 0; k < p->n_links; k++)
		if (p->link_indices[k] == idx)
			return conf_err_at(ctx, e, "link named twice");
	p->link_indices[p->n_links++] = idx;
	return 0;
}

/* `link = "x"` or `links = [ "x", "y" ]` (exactly one of the two). */
static int get_peer_links(struct conf_ctx *ctx, const config_setting_t *g, struct conf_peer *p)
{
	const config_setting_t *one = config_setting_get_member(g, "link");
	const config_setting_t *list = config_setting_get_member(g, "links");
	char name[CONF_NAME_MAX + 1], msg[128];
	int n, rc;

	if (one && list)
		return conf_err_at(ctx, list, "give either link or links, not both");
	if (!list) {
		if ((rc = conf_get_name(ctx, g, "link", true, name)))
			return rc;
		return add_peer_link(ctx, one, name, p);
	}
	if (config_setting_type(list) != CONFIG_TYPE_ARRAY &&
	    config_setting_type(list) != CONFIG_TYPE_LIST)
		return conf_err_at(ctx, list, "must be a list of link names [ \"a\", \"b\" ]");
	n = config_setting_length(list);
	if (n == 0)
		return conf_err_at(ctx, list, "must name at least one link");
	if (n > CONF_MAX_PEER_LINKS)
		return conf_err_at(ctx, list, "too many links (at most %d)", CONF_MAX_PEER_LINKS);
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
		const char *v;

		if (config_setting_type(e) != CONFIG_TYPE_STRING)
			return conf_err_at(ctx, e, "must be a link name");
		v = config_setting_get_string(e);
		if (conf_check_name(v, msg, sizeof(msg)))
			return conf_err_at(ctx, e, "%s", msg);
		if ((rc = add_peer_link(ctx, e, v, p)))
			return rc;
	}
	return 0;
}

static int parse_peer(struct conf_ctx *ctx, const config_setting_t *g, struct conf_peer *p)
{
	static const char *const keys[] = { "name", "addresses", "link", "links", "balance", NULL };
	struct conf *c = ctx->c;
	int rc;

	memset(p, 0, sizeof(*p));
	p->line = config_setting_source_line(g);
	p->link_index = -1;
	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)) ||
	    (rc = conf_get_name(ctx, g, "name", true, p->name)) ||
	    (rc = get_addrs(ctx, g, "addresses", true, p->addrs, &p->n_addrs)) ||
	    (rc = get_peer_links(ctx, g, p)))
		return rc;
	if ((rc = conf_get_bool(ctx, g, "balance", false, &p->balance)) < 0)
		return rc;
	if (p->balance && p->n_links < 2)
		return conf_err_at(ctx, config_setting_get_member(g, "balance"),
				   "balance needs at least two links (links = [ \"a\", \"b\" ])");
	if (strcmp(p->name, c->host_name) == 0)
		return conf_err_at(ctx, config_setting_get_member(g, "name"),
				   "a peer cannot have this host's name");
	p->link_index = p->link_indices[0];
	snprintf(p->link_name, sizeof(p->link_name), "%s", c->links[p->link_index].name);
	return 0;
}

/* A link joins this host to one peer host: two peers cannot share it. */
static int check_peer_links(struct conf_ctx *ctx, const config_setting_t *g, int idx)
{
	const struct conf *c = ctx->c;
	const struct conf_peer *p = &c->peers[idx];
	const config_setting_t *list = config_setting_get_member(g, "links");

	for (int k = 0; k < p->n_links; k++) {
		const config_setting_t *e = list ? config_setting_get_elem(list, (unsigned)k)
						 : config_setting_get_member(g, "link");

		for (int j = 0; j < idx; j++)
			for (int m = 0; m < c->peers[j].n_links; m++)
				if (c->peers[j].link_indices[m] == p->link_indices[k])
					return conf_err_at(ctx, e, "link already belongs to peer '%s' "
							   "(line %d): a link joins one peer",
							   c->peers[j].name, c->peers[j].line);
	}
	return 0;
}

/* An address may belong to one peer only, and never to this host, unless the peer's link is a
 * loopback link (this host joined to itself: its peers are this host's own addresses). */
static int check_peer_addrs(struct conf_ctx *ctx, const config_setting_t *g, int idx)
{
	const struct conf *c = ctx->c;
	const struct conf_peer *p = &c->peers[idx];
	const config_setting_t *as = config_setting_get_member(g, "addresses");

	for (int k = 0; k < p->n_addrs; k++) {
		const config_setting_t *e = config_setting_type(as) == CONFIG_TYPE_STRING
					  ? as : config_setting_get_elem(as, (unsigned)k);

		for (int h = 0; h < c->n_host_addrs && !c->links[p->link_index].loopback; h++)
			if (conf_addr_equal(&c->host_addrs[h], &p->addrs[k]))
				return conf_err_at(ctx, e, "address belongs to this host (a link "
						   "joining this host to itself says loopback = true)");
		for (int j = 0; j < idx; j++)
			for (int m = 0; m < c->peers[j].n_addrs; m++)
				if (conf_addr_equal(&c->peers[j].addrs[m], &p->addrs[k]))
					return conf_err_at(ctx, e, "address already belongs to peer '%s'",
							   c->peers[j].name);
	}
	return 0;
}

static int parse_peers(struct conf_ctx *ctx, const config_setting_t *root)
{
	struct conf *c = ctx->c;
	config_setting_t *list;
	int n, rc = get_list(ctx, root, "peers", CONF_MAX_PEERS, &list, &n);

	if (rc)
		return rc < 0 ? rc : 0;
	c->peers = calloc((size_t)n + 1, sizeof(*c->peers));
	if (!c->peers)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(list, (unsigned)i);

		if ((rc = parse_peer(ctx, g, &c->peers[i])))
			return rc;
		c->n_peers = i + 1;
		for (int j = 0; j < i; j++)
			if (strcmp(c->peers[j].name, c->peers[i].name) == 0)
				return conf_err_at(ctx, config_setting_get_member(g, "name"),
						   "duplicate peer name (first defined at line %d)",
						   c->peers[j].line);
		if ((rc = check_peer_addrs(ctx, g, i)) || (rc = check_peer_links(ctx, g, i)))
			return rc;
	}
	return 0;
}

/* --- rules --- */

static int parse_rule(struct conf_ctx *ctx, const config_setting_t *g, struct conf_rule *r)
{
	static const char *const keys[] = { "match", "ports", "action", NULL };
	static const char *const actions[] = { "tcp", "ntb", NULL };
	const config_setting_t *ps;
	const char *match;
	char msg[160];
	int action, rc;

	memset(r, 0, sizeof(*r));
	r->line = config_setting_source_line(g);
	r->port_hi = 65535;
	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)) ||
	    (rc = conf_get_string(ctx, g, "match", true, &match)))
		return rc;
	if (conf_parse_prefix(match, &r->match, msg, sizeof(msg)))
		return conf_err_at(ctx, config_setting_get_member(g, "match"), "%s", msg);
	ps = config_setting_get_member(g, "ports");
	if (ps) {
		int t = config_setting_type(ps);

		if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
			long long v = config_setting_get_int64(ps);

			if (v < 1 || v > 65535)
				return conf_err_at(ctx, ps, "port out of range (allowed 1..65535)");
			r->port_lo = r->port_hi = (uint16_t)v;
		} else if (t == CONFIG_TYPE_STRING) {
			if (conf_parse_ports(config_setting_get_string(ps), &r->port_lo, &r->port_hi,
					     msg, sizeof(msg)))
				return conf_err_at(ctx, ps, "%s", msg);
		} else {
			return conf_err_at(ctx, ps, "must be a port number or a string like \"1-1024\"");
		}
	}
	if ((rc = conf_get_choice(ctx, g, "action", true, actions, &action)))
		return rc;
	r->action = action == 1 ? CONF_ACTION_NTB : CONF_ACTION_TCP;
	return 0;
}

static int parse_rules(struct conf_ctx *ctx, const config_setting_t *root)
{
	struct conf *c = ctx->c;
	config_setting_t *list;
	int n, rc = get_list(ctx, root, "rules", CONF_MAX_RULES, &list, &n);

	if (rc < 0)
		return rc;
	if (rc == 1) {
		c->rules_default = true;
		return 0;
	}
	c->rules = calloc((size_t)n + 1, sizeof(*c->rules));
	if (!c->rules)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		if ((rc = parse_rule(ctx, config_setting_get_elem(list, (unsigned)i), &c->rules[i])))
			return rc;
		c->n_rules = i + 1;
	}
	return 0;
}

/* --- fallback, log --- */

static int parse_fallback(struct conf_ctx *ctx, const config_setting_t *root)
{
	static const char *const choices[] = { "tcp", "error", NULL };
	int v, rc = conf_get_choice(ctx, root, "fallback", false, choices, &v);

	if (rc == 0)
		ctx->c->fallback = v == 1 ? CONF_FALLBACK_ERROR : CONF_FALLBACK_TCP;
	return rc < 0 ? rc : 0;
}

static int parse_log(struct conf_ctx *ctx, const config_setting_t *root)
{
	static const char *const keys[] = { "level", "file", NULL };
	static const char *const levels[] = { "error", "warn", "info", "debug", NULL };
	config_setting_t *g = config_setting_get_member(root, "log");
	const char *file;
	int level, rc;

	if (!g)
		return 0;
	if ((rc = conf_want_group(ctx, g)) || (rc = conf_check_keys(ctx, g, keys)))
		return rc;
	rc = conf_get_choice(ctx, g, "level", false, levels, &level);
	if (rc < 0)
		return rc;
	if (rc == 0)
		ctx->c->log_level = level; /* same order as enum log_level */
	rc = conf_get_string(ctx, g, "file", false, &file);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		const config_setting_t *s = config_setting_get_member(g, "file");

		if (file[0] && file[0] != '/')
			return conf_err_at(ctx, s, "must be an absolute path (or \"\" for stderr)");
		if (strlen(file) > CONF_PATH_MAX)
			return conf_err_at(ctx, s, "too long (at most %d characters)", CONF_PATH_MAX);
		snprintf(ctx->c->log_file, sizeof(ctx->c->log_file), "%s", file);
	}
	return 0;
}

int conf_parse_root(struct conf_ctx *ctx, const config_setting_t *root)
{
	static const char *const keys[] = { "host", "links", "peers", "rules", "tunables",
					    "fallback", "log", NULL };
	int rc;

	ctx->c->log_level = LL_WARN;
	ctx->c->fallback = CONF_FALLBACK_TCP;
	conf_tunables_defaults(&ctx->c->tunables);
	if ((rc = conf_check_keys(ctx, root, keys)) || (rc = parse_host(ctx, root)) ||
	    (rc = parse_tunables(ctx, root)) || (rc = parse_links(ctx, root)) ||
	    (rc = parse_peers(ctx, root)) || (rc = parse_rules(ctx, root)) ||
	    (rc = parse_fallback(ctx, root)) || (rc = parse_log(ctx, root)))
		return rc;
	return 0;
}
