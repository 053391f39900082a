/* SPDX-License-Identifier: MIT */
/* conf/ — the per-host config file (doc/design.md §8): load and validate it (libconfig syntax),
 * apply the NTBSOCK_* environment overrides, print the resolved view, and route a destination
 * address to ntb or tcp.
 *
 * conf/ depends only on util/. Its structs are plain and map 1:1 onto struct ntb_link_params
 * (struct conf_link, struct conf_fault) and struct tp_params (struct conf_tunables); preload/
 * and tools/ copy the fields across. Every value in a loaded struct conf is resolved: defaults
 * are filled in, references are checked, names are NUL-terminated.
 *
 * Functions return 0 or a negative errno and never touch errno. Out-parameters (ret_*) are
 * written only on success, except struct conf_error, which is filled on failure. The file
 * format, every key, its default and its range are in man/ntbsock.conf.5. */
#ifndef NTBSOCK_CONF_H
#define NTBSOCK_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#define CONF_NAME_MAX   63   /* host, link and peer names; == NTB_NAME_MAX */
#define CONF_PATH_MAX   255  /* file paths; == NTB_PATH_MAX */
#define CONF_MAX_ADDRS  16   /* addresses per host / per peer */
#define CONF_MAX_LINKS  64
#define CONF_MAX_PEER_LINKS 8 /* links one peer may name (`links = [ ... ]`) */
#define CONF_MAX_PEERS  256
#define CONF_MAX_RULES  1024

/* The build's SYSCONFDIR (make SYSCONFDIR=...) names the directory; /etc by default. */
#ifndef NTBSOCK_SYSCONFDIR
#define NTBSOCK_SYSCONFDIR "/etc"
#endif
#define CONF_DEFAULT_PATH NTBSOCK_SYSCONFDIR "/ntbsock.conf"

/* --- errors --------------------------------------------------------------------------------- */

/* Why a load / override failed. Fields not known are "" (line: 0). TEXT is the full line:
 *   "FILE:LINE: key 'KEY': MESSAGE (value 'VALUE')"
 * with ":LINE", " key 'KEY':" and " (value 'VALUE')" left out when unknown; syntax errors read
 *   "FILE:LINE: syntax error: MESSAGE". For environment overrides FILE is "environment". */
struct conf_error {
	char file[CONF_PATH_MAX + 1];
	int  line;
	char key[128];     /* dotted path with list indices, e.g. "links[0].window_size" */
	char value[128];   /* the offending value as written (truncated) */
	char msg[256];
	char text[1024];
};

/* --- values --------------------------------------------------------------------------------- */

struct conf_addr {
	sa_family_t family;  /* AF_INET or AF_INET6 */
	union {
		struct in_addr  v4;
		struct in6_addr v6;
	} u;
};

struct conf_prefix {
	struct conf_addr addr; /* host bits beyond len are zero; family AF_UNSPEC: "any" */
	int              len;  /* 0..32 (IPv4) or 0..128 (IPv6); 0 for "any" */
};

/* Fault injection of one link; maps 1:1 onto struct ntb_fault_params. */
struct conf_fault {
	bool     enabled;   /* a fault group is present (or NTBSOCK_FAULT set it) */
	double   drop;      /* [0,1] */
	double   corrupt;   /* [0,1] */
	uint32_t delay_us;  /* 0..1000000 */
	uint64_t seed;
	uint64_t cut_after;    /* cut the link after this many window bytes; 0: never */
	uint32_t cut_after_ms; /* ... or this long after its first window write; 0: never */
};

/* An emulated link speed (shm backend only; the `speed` group of a link); maps 1:1 onto
 * struct ntb_speed_params. Off unless bandwidth is set. */
struct conf_speed {
	uint64_t bandwidth;   /* bytes per second this host writes into the link; 0: unlimited */
	uint32_t latency_ns;  /* one-way latency added before each publication; 0..1000000000 */
};

/* One link; maps 1:1 onto struct ntb_link_params. */
struct conf_link {
	char              name[CONF_NAME_MAX + 1];
	/* A backend's name, as written: whether ntb/ has it is checked where the config meets the
	 * link layer (glue_check_backends()), with BACKEND_FILE and BACKEND_LINE for the error.
	 * Only the keys of "shm" and "pci" below are known here. */
	char              backend[CONF_NAME_MAX + 1];
	char              backend_file[CONF_PATH_MAX + 1];
	int               backend_line;
	int               side;          /* 0 or 1; -1: claim a free side (shm only) */
	size_t            window_size;   /* bytes, multiple of 4096; default 16M */
	/* shm */
	char              path[CONF_PATH_MAX + 1]; /* resolved: default /dev/shm/ntbsock-<name> */
	mode_t            mode;          /* default 0600 */
	gid_t             group;         /* (gid_t)-1: not set */
	char              group_name[CONF_NAME_MAX + 1]; /* as written; "" when not set */
	bool              allow_foreign_owner; /* default false */
	bool              loopback;      /* this host joined to itself: every process opens both
					  * sides, connects from side 0, listens and accepts on
					  * side 1; side stays -1 (default false) */
	char              ivshmem_server[CONF_PATH_MAX + 1]; /* UNIX socket; "" none */
	/* pci */
	char              device[CONF_NAME_MAX + 1]; /* BDF, vendor:device or class:XXXX */
	int               bar;           /* -1: the profile's default */
	bool              doorbell;      /* interrupt doorbells where there are some; default true */
	/* link state */
	uint32_t          heartbeat_ms;  /* default 100 */
	uint32_t          link_timeout_ms; /* default 500 */
	struct conf_fault fault;
	struct conf_speed speed;         /* shm only; zeroes: not modelled (the default) */
	int               line;          /* where it was defined (0: unknown) */
};

struct conf_peer {
	char             name[CONF_NAME_MAX + 1];
	struct conf_addr addrs[CONF_MAX_ADDRS];
	int              n_addrs;        /* ≥ 1 */
	char             link_name[CONF_NAME_MAX + 1]; /* the first of its links */
	int              link_index;     /* index into conf.links of the first, resolved */
	/* every link to this peer (`link = "x"` gives one, `links = [ ... ]` up to
	 * CONF_MAX_PEER_LINKS), in the order written; link_indices[0] == link_index. A link
	 * belongs to at most one peer. */
	int              link_indices[CONF_MAX_PEER_LINKS];
	int              n_links;        /* >= 1 */
	/* `balance = true`: a connection's stream may spread over several of its links ([DRB],
	 * transport/tp_stripe.c); both hosts must say so. Needs at least two links. */
	bool             balance;
	int              line;
};

enum conf_action {
	CONF_ACTION_TCP = 0,
	CONF_ACTION_NTB = 1,
};

struct conf_rule {
	struct conf_prefix match;
	uint16_t           port_lo, port_hi; /* inclusive; "1-65535" → 1..65535; "any" (default)
					      * → 0..65535 */
	enum conf_action   action;
	int                line;
};

/* Tunables; map 1:1 onto struct tp_params, with the same defaults as tp_params_init()
 * (conf_tunables_defaults(); man/ntbsock.conf.5). */
struct conf_tunables {
	uint32_t queue_size;       /* 0 (default): auto; else a power of two, 4K..1G */
	uint32_t inline_slots;     /* default 8, power of two, 2..65536 */
	uint32_t inline_max;       /* default 116, 0..116 */
	uint32_t short_max;        /* default 16K (queue_size if smaller), 0..1G,
				    * ≤ queue_size when that is set */
	uint32_t contexts;         /* transfer contexts (data rings): default 256, 1..4096 */
	uint32_t connections;      /* connection slots: default 0 (auto), 1..16384 */
	uint32_t cnct_timeout_ms;  /* default 10 */
	uint32_t send_timeout_ms;  /* default 100 */
	uint32_t recv_timeout_ms;  /* default 50 */
	uint32_t detect_timeout_ms; /* default 100 */
	uint32_t max_err;          /* default 32 */
	uint32_t spin_us;          /* default 50 */
	uint32_t setup_timeout_ms; /* default 2000 */
	uint32_t peer_timeout_ms;  /* default 30000 */
};

enum conf_fallback {
	CONF_FALLBACK_TCP = 0,   /* NTB set-up failed → carry on over TCP (default) */
	CONF_FALLBACK_ERROR = 1, /* NTB set-up failed → the connect fails */
};

struct conf {
	char                 path[CONF_PATH_MAX + 1]; /* the file it came from ("" if a string) */
	char                 host_name[CONF_NAME_MAX + 1];
	struct conf_addr     host_addrs[CONF_MAX_ADDRS];
	int                  n_host_addrs;
	struct conf_link    *links;
	int                  n_links;
	struct conf_peer    *peers;
	int                  n_peers;
	struct conf_rule    *rules;
	int                  n_rules;
	bool                 rules_default;  /* no `rules` key: every peer address, all ports → ntb */
	struct conf_tunables tunables;
	enum conf_fallback   fallback;
	int                  log_level;      /* enum log_level; default LL_WARN */
	char                 log_file[CONF_PATH_MAX + 1]; /* "" → stderr */
	bool                 disabled;       /* NTBSOCK_DISABLE=1: pass everything through */
};

/* --- loading ---------------------------------------------------------------------------------- */

/* Where the config is: EXPLICIT_PATH (from -c) if non-NULL and non-empty, else $NTBSOCK_CONF if
 * set and non-empty, else /etc/ntbsock.conf if it exists. The first two are returned even when
 * the file does not exist (conf_load() then reports it). Copies the path into BUF.
 * Returns 0, -ENOENT (no config anywhere: pass-through) or -ENAMETOOLONG. */
int conf_find_path(const char *explicit_path, char *buf, size_t len);

/* Parse and validate the file at PATH. On success *RET_CONF is a new, fully resolved config
 * (free with conf_free()). On failure returns -ENOENT (file missing), -EACCES, -EISDIR,
 * -EINVAL (syntax or validation error, or not a regular file), -EFBIG (over 1 MiB),
 * -ENAMETOOLONG or -ENOMEM, and fills *RET_ERR (may be NULL). Never crashes on any input.
 * Does not apply the environment (conf_apply_env()). @include "X" is looked up in PATH's
 * directory. */
int conf_load(const char *path, struct conf **ret_conf, struct conf_error *ret_err);

/* Fill ERR (may be NULL) with an error at FILE:LINE about KEY and VALUE (both may be NULL) and
 * format its text: for checks made on a loaded config by the layers above. */
void conf_err_set(struct conf_error *err, const char *file, int line, const char *key,
		  const char *value, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Same, from a string; NAME is used as the file name in errors (NULL → "<string>").
 * @include paths are relative to the current directory. */
int conf_load_string(const char *text, const char *name, struct conf **ret_conf,
		     struct conf_error *ret_err);

/* Free a config. Accepts NULL. */
void conf_free(struct conf *c);

/* Fill T with the default tunables. */
void conf_tunables_defaults(struct conf_tunables *t);

/* Apply the environment to C:
 *   NTBSOCK_LOG=error|warn|info|debug   → c->log_level
 *   NTBSOCK_LOG_FILE=PATH               → c->log_file
 *   NTBSOCK_FAULT=drop=..,corrupt=..,delay_us=..,seed=..,cut_after=..,cut_after_ms=..
 *                                        → every link's fault (wins over the file); "off" →
 *                                          faults disabled on every link
 *   NTBSOCK_DISABLE=1|0                 → c->disabled
 * Empty variables are ignored; NTBSOCK_LOG_FILE and NTBSOCK_FAULT are read with
 * secure_getenv() (ignored in set-uid/set-gid programs).
 * Returns 0 or -EINVAL with *ERR filled (file "environment",
 * key = the variable name); C is then left partly updated. */
int conf_apply_env(struct conf *c, struct conf_error *err);

/* Parse a fault spec "drop=0.01,corrupt=0.001,delay_us=5,seed=7,cut_after=64M,cut_after_ms=500"
 * (any subset, any order; missing fields are 0; cut_after takes K/M/G suffixes; "off" →
 * enabled=false). On success *RET has enabled=true (unless
 * "off"). On failure returns -EINVAL and writes a message into ERRBUF (LEN bytes). */
int conf_parse_fault(const char *spec, struct conf_fault *ret, char *errbuf, size_t len);

/* Parse a size: a plain non-negative integer or a string "64M", "4K", "1G", "512" (also
 * "KiB"/"MiB"/"GiB"). Returns 0 or -EINVAL / -ERANGE. */
int conf_parse_size(const char *s, uint64_t *ret);

/* Print the resolved config (host, links with every parameter, peers, rules or the default
 * rule, tunables, fallback, logging) in a stable, human-readable form. */
void conf_print(const struct conf *c, FILE *out);

/* --- routing ---------------------------------------------------------------------------------- */

struct conf_route {
	enum conf_action        action;
	const struct conf_peer *peer;       /* NULL when no peer owns the address */
	int                     peer_index; /* -1 when none */
	int                     link_index; /* -1 when none; the peer's first link (a caller
					     * with several picks among peer->link_indices) */
	int                     rule_index; /* the rule that decided (0-based), -1: default/none */
	char                    reason[128]; /* "rule 2 says tcp", "not configured: no peer for
					      * address 10.0.0.1", "rule 1 says ntb", "default: peer
					      * B", "no rule matches", "disabled", "not an IP address" */
};

/* Route a connect() to DST (sockaddr_in or sockaddr_in6; an IPv4-mapped IPv6 address counts
 * as IPv4): the address must belong to a peer (else tcp "not configured"), then the first rule
 * whose prefix and port range match decides; with no rules configured, ntb; with rules but
 * none matching, tcp "no rule matches". With c->disabled, always tcp "disabled".
 * Returns 0 (RET filled) or -EINVAL (bad arguments). */
int conf_route(const struct conf *c, const struct sockaddr *dst, socklen_t len,
	       struct conf_route *ret);

/* Server side: the peer an address (a client's source address; sockaddr_in/in6, port ignored)
 * belongs to, or NULL. */
const struct conf_peer *conf_peer_by_addr(const struct conf *c, const struct sockaddr *addr);

/* The link called NAME, or NULL. */
const struct conf_link *conf_link_by_name(const struct conf *c, const char *name);

/* Names for printing. */
const char *conf_action_name(enum conf_action a);     /* "ntb", "tcp" */
const char *conf_fallback_name(enum conf_fallback f); /* "tcp", "error" */

/* Format ADDR into BUF ("127.0.0.1", "fe80::1"); returns BUF. */
const char *conf_addr_str(const struct conf_addr *addr, char *buf, size_t len);

#endif
