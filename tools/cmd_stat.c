// SPDX-License-Identifier: MIT
/* `ntbsock stat`: the live connections of every process on this host under the library: NTB
 * ones from the host-local connection tables of the config's links (tp_stat_list()), those
 * that stayed TCP from the host-wide TCP table (tp_tcpstat_list()). */
#include "tools/tools_int.h"
#include "glue/conf_params.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "conf/conf.h"
#include "ntb/ntb.h"
#include "transport/transport.h"

/* Rows of all links and of the TCP table together. */
#define STAT_MAX_ROWS (4 * TP_TCPSTAT_MAX)

struct stat_rows {
	struct tool_stat_row *v;
	int n, cap;
};

static struct tool_stat_row *rows_add(struct stat_rows *r)
{
	if (r->n == r->cap) {
		int cap = r->cap ? 2 * r->cap : 64;
		struct tool_stat_row *v;

		if (cap > STAT_MAX_ROWS)
			return NULL;
		v = realloc(r->v, (size_t)cap * sizeof(*v));
		if (!v)
			return NULL;
		r->v = v;
		r->cap = cap;
	}
	memset(&r->v[r->n], 0, sizeof(r->v[0]));
	return &r->v[r->n++];
}

/* Append the connections of link CL to ROWS (both sides' tables when the config lets this
 * host claim either side). */
static int collect_link(const struct conf_link *cl, struct stat_rows *rows)
{
	struct ntb_link_params lp;
	struct tp_stat_entry *ents = NULL;
	int max = 256, n;

	glue_link_params(cl, &lp);
	for (;;) {
		struct tp_stat_entry *e = realloc(ents, (size_t)max * sizeof(*e));

		if (!e) {
			free(ents);
			return -ENOMEM;
		}
		ents = e;
		n = tp_stat_list(&lp, ents, max);
		if (n < 0 || n <= max || max >= STAT_MAX_ROWS)
			break;
		max = n < STAT_MAX_ROWS ? n : STAT_MAX_ROWS;
	}
	for (int i = 0; i < n && i < max; i++) {
		const struct tp_stat_entry *e = &ents[i];
		struct tool_stat_row *r = rows_add(rows);

		if (!r) {
			free(ents);
			return -ENOMEM;
		}
		r->pid = e->pid;
		r->fd = e->fd;
		/* a connection that moved to its kernel socket is tcp now, and says why */
		r->ntb = !e->failed_over;
		if (e->failed_over)
			snprintf(r->reason, sizeof(r->reason), "failed over: %s", e->failed_over);
		tool_key_endpoints(e->key.bytes, e->role && strcmp(e->role, "server") == 0,
				   r->local, r->remote, sizeof(r->local));
		snprintf(r->state, sizeof(r->state), "%s", e->state ? e->state : "");
		snprintf(r->link, sizeof(r->link), "%s", cl->name);
		/* (a stripe's key: the connection's, marked in bytes 34..35: tp_stripe.c) */
		r->stripe = e->key.bytes[34] == 'S' && e->key.bytes[35] == '1';
		r->tx_bytes = e->stats.tx_bytes;
		r->rx_bytes = e->stats.rx_bytes;
		r->tx_msgs[0] = e->stats.tx_msgs_inline;
		r->tx_msgs[1] = e->stats.tx_msgs_short;
		r->tx_msgs[2] = e->stats.tx_msgs_long;
		r->rx_msgs[0] = e->stats.rx_msgs_inline;
		r->rx_msgs[1] = e->stats.rx_msgs_short;
		r->rx_msgs[2] = e->stats.rx_msgs_long;
		r->retransmits = e->stats.retransmits;
		r->crc_errors = e->stats.crc_errors;
		r->tx_queue_fill = e->stats.tx_queue_fill;
		r->rx_queue_fill = e->stats.rx_queue_fill;
	}
	free(ents);
	return n < 0 ? n : 0;
}

/* "a.b.c.d:port" / "[v6]:port" of a stored sockaddr, "-" when unknown. */
static void fmt_addr(const uint8_t b[28], char *out, size_t len)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	char a[INET6_ADDRSTRLEN];
	sa_family_t fam;

	memcpy(&fam, b, sizeof(fam));
	if (fam == AF_INET) {
		memcpy(&s4, b, sizeof(s4));
		inet_ntop(AF_INET, &s4.sin_addr, a, sizeof(a));
		snprintf(out, len, "%s:%u", a, (unsigned)ntohs(s4.sin_port));
	} else if (fam == AF_INET6) {
		memcpy(&s6, b, sizeof(s6));
		inet_ntop(AF_INET6, &s6.sin6_addr, a, sizeof(a));
		snprintf(out, len, "[%s]:%u", a, (unsigned)ntohs(s6.sin6_port));
	} else {
		snprintf(out, len, "-");
	}
}

/* Append the connections that stayed TCP (NTBSOCK_STAT_TCP names the table, as for the
 * library) to ROWS. */
static int collect_tcp(struct stat_rows *rows, uint64_t *ret_added)
{
	const char *path = getenv("NTBSOCK_STAT_TCP");
	struct tp_tcpstat_entry *ents = NULL;
	int max = 1024, n;

	/* The table grows while we read it: ask again with room for what it said it holds. */
	for (;;) {
		struct tp_tcpstat_entry *e = realloc(ents, (size_t)max * sizeof(*e));

		if (!e) {
			free(ents);
			return -ENOMEM;
		}
		ents = e;
		n = tp_tcpstat_list(path && path[0] ? path : NULL, ents, max, ret_added);
		if (n <= max || max >= TP_TCPSTAT_MAX)
			break;
		max = n + n / 8 < TP_TCPSTAT_MAX ? n + n / 8 : TP_TCPSTAT_MAX;
	}
	for (int i = 0; i < n && i < max; i++) {
		struct tool_stat_row *r = rows_add(rows);

		if (!r) {
			free(ents);
			return -ENOMEM;
		}
		r->pid = ents[i].pid;
		r->fd = ents[i].fd;
		r->ntb = false;
		fmt_addr(ents[i].local.bytes, r->local, sizeof(r->local));
		fmt_addr(ents[i].remote.bytes, r->remote, sizeof(r->remote));
		snprintf(r->state, sizeof(r->state), "open");
		snprintf(r->reason, sizeof(r->reason), "%s", ents[i].reason);
	}
	free(ents);
	return 0;
}

/* The admin state of each link of CONF into LINKS (CONF_MAX_LINKS); returns how many. */
static int collect_links(const struct conf *conf, struct tool_stat_link *links)
{
	struct ntb_link_params lp;

	for (int i = 0; i < conf->n_links; i++) {
		struct tp_link_stat ls;

		glue_link_params(&conf->links[i], &lp);
		memset(&links[i], 0, sizeof(links[i]));
		snprintf(links[i].name, sizeof(links[i].name), "%s", conf->links[i].name);
		links[i].admin_down = tp_link_admin_get(&lp) == 1;
		if (tp_link_stat(&lp, &ls) == 0) {
			links[i].conns = ls.conns;
			links[i].setups = ls.setups;
			links[i].tx_bytes = ls.tx_bytes;
			links[i].rx_bytes = ls.rx_bytes;
			links[i].transfers = ls.transfers;
			links[i].congestion = ls.congestion;
			links[i].failovers = ls.failovers;
			links[i].expansions = ls.expansions;
			links[i].rings = ls.rings;
			links[i].rings_free = ls.rings_free;
			links[i].ring_grants = ls.ring_grants;
			links[i].ring_refusals = ls.ring_refusals;
			links[i].ring_yields = ls.ring_yields;
			links[i].offers_held = ls.offers_held;
			links[i].offer_claims = ls.offer_claims;
		}
	}
	return conf->n_links;
}

static int print_summary(const struct conf *conf, const struct stat_rows *rows, bool json)
{
	const char *links[CONF_MAX_LINKS];
	int n = 0, rc;

	for (int i = 0; i < conf->n_links && n < CONF_MAX_LINKS; i++)
		links[n++] = conf->links[i].name;
	rc = json ? tool_stat_print_summary_json(stdout, rows->v, rows->n, links, n)
		  : tool_stat_print_summary(stdout, rows->v, rows->n, links, n);
	if (rc < 0)
		fprintf(stderr, "ntbsock stat: summary: %s\n", strerror(-rc));
	return rc;
}

int cmd_stat(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "summary", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf_arg = NULL;
	char path[PATH_MAX];
	struct stat_rows rows = { 0 };
	struct conf *conf = NULL;
	bool json = false, summary = false;
	uint64_t tcp_setups = 0;
	int opt, rc = 0;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf_arg = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 's':
			summary = true;
			break;
		case 'h':
			tool_print_usage(tool_find_cmd("stat"), stdout);
			return TOOL_EXIT_OK;
		default:
			return tool_usage_error("stat", "unknown option or missing argument: '%s'",
						argv[optind - 1]);
		}
	}
	if (optind < argc)
		return tool_usage_error("stat", "unexpected argument '%s'", argv[optind]);
	if (tool_load_conf("stat", conf_arg, path, sizeof(path), &conf) < 0)
		return TOOL_EXIT_FAIL;
	for (int i = 0; i < conf->n_links && rc == 0; i++) {
		rc = collect_link(&conf->links[i], &rows);
		if (rc < 0)
			fprintf(stderr, "ntbsock stat: link %s: %s\n", conf->links[i].name,
				strerror(-rc));
	}
	if (rc == 0 && (rc = collect_tcp(&rows, &tcp_setups)) < 0)
		fprintf(stderr, "ntbsock stat: tcp connections: %s\n", strerror(-rc));
	if (rc == 0 && summary) {
		rc = print_summary(conf, &rows, json);
	} else if (rc == 0) {
		struct tool_stat_link links[CONF_MAX_LINKS];
		int n_links = collect_links(conf, links);

		if (json) {
			tool_stat_print_json(stdout, rows.v, rows.n, links, n_links, tcp_setups);
		} else {
			tool_stat_print_links(stdout, links, n_links, tcp_setups);
			tool_stat_print_table(stdout, rows.v, rows.n);
		}
	}
	free(rows.v);
	conf_free(conf);
	return rc == 0 ? TOOL_EXIT_OK : TOOL_EXIT_FAIL;
}
