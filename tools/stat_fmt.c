// SPDX-License-Identifier: MIT
/* Output of `ntbsock stat`: the links' admin state, the human table and the JSON document. */
#include "tools/tools_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const char *const proto_names[3] = { "inline", "short", "long" };

/* An endpoint of a key: a 16-byte IPv6 address (IPv4 as ::ffff:a.b.c.d) at ADDR and a port in
 * network byte order at PORT. */
static void key_half_str(const uint8_t *addr, const uint8_t *port_be, char *buf, size_t len)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const uint8_t *p = addr;
	char a[INET6_ADDRSTRLEN];
	unsigned port = (unsigned)port_be[0] << 8 | port_be[1];

	if (memcmp(p, mapped, 12) == 0) {
		inet_ntop(AF_INET, p + 12, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, port);
	} else {
		inet_ntop(AF_INET6, p, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, port);
	}
}

void tool_key_endpoints(const uint8_t key[40], bool server, char *local, char *remote,
			size_t len)
{
	char client[64], srv[64];
	/* transport.h's layout puts the server port at 38..39 (34..37 zero); an older layout
	 * had it right after the server address, at 34..35. */
	const uint8_t *srv_port = (key[38] | key[39]) ? key + 38 : key + 34;

	key_half_str(key, key + 16, client, sizeof(client));
	key_half_str(key + 18, srv_port, srv, sizeof(srv));
	snprintf(local, len, "%s", server ? srv : client);
	snprintf(remote, len, "%s", server ? client : srv);
}

void tool_stat_print_links(FILE *out, const struct tool_stat_link *links, int n,
			   uint64_t tcp_setups)
{
	for (int i = 0; i < n; i++) {
		const struct tool_stat_link *l = &links[i];

		fprintf(out, "link %s: admin %s\n", l->name,
			l->admin_down ? "down (connections use tcp)" : "up");
		fprintf(out, "link %s: conns %" PRIu64 " setups %" PRIu64 " tx_bytes %" PRIu64
			" rx_bytes %" PRIu64 " transfers %" PRIu64 " congestion %" PRIu64
			" failovers %" PRIu64 " expansions %" PRIu64 "\n", l->name, l->conns,
			l->setups, l->tx_bytes, l->rx_bytes, l->transfers, l->congestion,
			l->failovers, l->expansions);
		fprintf(out, "link %s: rings %" PRIu64 " free %" PRIu64 " grants %" PRIu64
			" refused %" PRIu64 " asked_back %" PRIu64 "\n", l->name, l->rings,
			l->rings_free, l->ring_grants, l->ring_refusals, l->ring_yields);
		fprintf(out, "link %s: offers held %" PRIu64 " claimed %" PRIu64 "\n", l->name,
			l->offers_held, l->offer_claims);
	}
	fprintf(out, "tcp: setups %" PRIu64 "\n", tcp_setups);
}

void tool_stat_print_table(FILE *out, const struct tool_stat_row *rows, int n)
{
	char tx_msgs[64], rx_msgs[64], fill[32];

	if (n == 0) {
		fprintf(out, "no connections\n");
		return;
	}
	fprintf(out, "%-7s %-4s %-21s %-21s %-4s %-10s %12s %12s %-20s %-20s %5s %5s %-13s %s\n",
		"PID", "FD", "LOCAL", "REMOTE", "MODE", "STATE", "TX_BYTES", "RX_BYTES",
		"TX_MSGS(i/s/l)", "RX_MSGS(i/s/l)", "RETX", "CRC", "QFILL(tx/rx)", "LINK/REASON");
	for (int i = 0; i < n; i++) {
		const struct tool_stat_row *r = &rows[i];

		snprintf(tx_msgs, sizeof(tx_msgs), "%" PRIu64 "/%" PRIu64 "/%" PRIu64,
			 r->tx_msgs[0], r->tx_msgs[1], r->tx_msgs[2]);
		snprintf(rx_msgs, sizeof(rx_msgs), "%" PRIu64 "/%" PRIu64 "/%" PRIu64,
			 r->rx_msgs[0], r->rx_msgs[1], r->rx_msgs[2]);
		snprintf(fill, sizeof(fill), "%" PRIu32 "/%" PRIu32, r->tx_queue_fill,
			 r->rx_queue_fill);
		fprintf(out, "%-7d %-4d %-21s %-21s %-4s %-10s %12" PRIu64 " %12" PRIu64
			" %-20s %-20s %5" PRIu64 " %5" PRIu64 " %-13s %s%s\n",
			(int)r->pid, r->fd, r->local, r->remote, r->ntb ? "ntb" : "tcp",
			r->state[0] ? r->state : "-",
			r->tx_bytes, r->rx_bytes, r->ntb ? tx_msgs : "-", r->ntb ? rx_msgs : "-",
			r->retransmits, r->crc_errors, r->ntb ? fill : "-",
			r->ntb ? r->link : r->reason, r->ntb && r->stripe ? " (stripe)" : "");
	}
}

static void json_msgs(FILE *out, const uint64_t msgs[3])
{
	fputc('{', out);
	for (int p = 0; p < 3; p++)
		fprintf(out, "%s\"%s\":%" PRIu64, p ? "," : "", proto_names[p], msgs[p]);
	fputc('}', out);
}

void tool_stat_print_json(FILE *out, const struct tool_stat_row *rows, int n,
			  const struct tool_stat_link *links, int n_links, uint64_t tcp_setups)
{
	fprintf(out, "{\"connections\":[");
	for (int i = 0; i < n; i++) {
		const struct tool_stat_row *r = &rows[i];

		fprintf(out, "%s\n  {\"pid\":%d,\"fd\":%d,\"local\":", i ? "," : "", (int)r->pid,
			r->fd);
		tool_json_string(out, r->local);
		fprintf(out, ",\"remote\":");
		tool_json_string(out, r->remote);
		fprintf(out, ",\"mode\":\"%s\",\"state\":", r->ntb ? "ntb" : "tcp");
		tool_json_string(out, r->state);
		fprintf(out, ",\"reason\":");
		tool_json_string(out, r->reason);
		fprintf(out, ",\"link\":");
		tool_json_string(out, r->link);
		fprintf(out, ",\"stripe\":%s", r->stripe ? "true" : "false");
		fprintf(out, ",\"tx\":{\"bytes\":%" PRIu64 ",\"msgs\":", r->tx_bytes);
		json_msgs(out, r->tx_msgs);
		fprintf(out, ",\"queue_fill\":%" PRIu32 "},\"rx\":{\"bytes\":%" PRIu64 ",\"msgs\":",
			r->tx_queue_fill, r->rx_bytes);
		json_msgs(out, r->rx_msgs);
		fprintf(out, ",\"queue_fill\":%" PRIu32 "},\"retransmits\":%" PRIu64
			",\"crc_errors\":%" PRIu64 "}",
			r->rx_queue_fill, r->retransmits, r->crc_errors);
	}
	fprintf(out, "%s],\"links\":[", n ? "\n" : "");
	for (int i = 0; i < n_links; i++) {
		fprintf(out, "%s{\"name\":", i ? "," : "");
		tool_json_string(out, links[i].name);
		fprintf(out, ",\"admin\":\"%s\",\"conns\":%" PRIu64 ",\"setups\":%" PRIu64
			",\"tx_bytes\":%" PRIu64 ",\"rx_bytes\":%" PRIu64 ",\"transfers\":%" PRIu64
			",\"congestion\":%" PRIu64 ",\"failovers\":%" PRIu64
			",\"expansions\":%" PRIu64
			",\"rings\":{\"total\":%" PRIu64 ",\"free\":%" PRIu64 ",\"grants\":%" PRIu64
			",\"refused\":%" PRIu64 ",\"asked_back\":%" PRIu64 "}"
			",\"offers\":{\"held\":%" PRIu64 ",\"claimed\":%" PRIu64 "}}",
			links[i].admin_down ? "down" : "up", links[i].conns, links[i].setups,
			links[i].tx_bytes, links[i].rx_bytes, links[i].transfers, links[i].congestion,
			links[i].failovers, links[i].expansions, links[i].rings, links[i].rings_free,
			links[i].ring_grants,
			links[i].ring_refusals, links[i].ring_yields, links[i].offers_held,
			links[i].offer_claims);
	}
	fprintf(out, "],\"tcp\":{\"setups\":%" PRIu64 "}}\n", tcp_setups);
}

/* --- --summary ------------------------------------------------------------------------------- */

struct name_count {
	const char *name;
	int count;
};

/* Count NAME in V (N entries, room for one more): a new name is appended with count 1. */
static void count_name(struct name_count *v, int *n, const char *name)
{
	for (int i = 0; i < *n; i++) {
		if (strcmp(v[i].name, name) == 0) {
			v[i].count++;
			return;
		}
	}
	v[*n].name = name;
	v[*n].count = 1;
	(*n)++;
}

/* Most first; equal counts by name. */
static int by_count(const void *a, const void *b)
{
	const struct name_count *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->name, y->name);
}

struct summary {
	int total, ntb, tcp;
	struct name_count *links, *reasons; /* links: LINKS' order first, then any others */
	int n_links, n_reasons;
};

static bool summarize(const struct tool_stat_row *rows, int n, const char *const *links,
		      int n_links, struct summary *s)
{
	memset(s, 0, sizeof(*s));
	s->links = calloc((size_t)(n + n_links) + 1, sizeof(*s->links));
	s->reasons = calloc((size_t)n + 1, sizeof(*s->reasons));
	if (!s->links || !s->reasons) {
		free(s->links);
		free(s->reasons);
		return false;
	}
	for (int i = 0; i < n_links; i++)
		s->links[s->n_links++] = (struct name_count){ links[i], 0 };
	for (int i = 0; i < n; i++) {
		const struct tool_stat_row *r = &rows[i];

		if (r->ntb && r->stripe) { /* part of a connection counted already: its link only */
			count_name(s->links, &s->n_links, r->link);
			continue;
		}
		s->total++;
		if (r->ntb) {
			s->ntb++;
			count_name(s->links, &s->n_links, r->link);
		} else {
			s->tcp++;
			count_name(s->reasons, &s->n_reasons, r->reason[0] ? r->reason : "unknown");
		}
	}
	qsort(s->reasons, (size_t)s->n_reasons, sizeof(*s->reasons), by_count);
	return true;
}

int tool_stat_print_summary(FILE *out, const struct tool_stat_row *rows, int n,
			    const char *const *links, int n_links)
{
	struct summary s;

	if (!summarize(rows, n, links, n_links, &s))
		return -ENOMEM;
	fprintf(out, "%-7s %8s  %s\n", "KIND", "COUNT", "NAME");
	fprintf(out, "%-7s %8d\n", "total", s.total);
	fprintf(out, "%-7s %8d  %s\n", "mode", s.ntb, "ntb");
	fprintf(out, "%-7s %8d  %s\n", "mode", s.tcp, "tcp");
	for (int i = 0; i < s.n_links; i++)
		fprintf(out, "%-7s %8d  %s\n", "link", s.links[i].count, s.links[i].name);
	for (int i = 0; i < s.n_reasons; i++)
		fprintf(out, "%-7s %8d  %s\n", "reason", s.reasons[i].count, s.reasons[i].name);
	free(s.links);
	free(s.reasons);
	return 0;
}

static void json_counts(FILE *out, const struct name_count *v, int n)
{
	fputc('{', out);
	for (int i = 0; i < n; i++) {
		if (i)
			fputc(',', out);
		tool_json_string(out, v[i].name);
		fprintf(out, ":%d", v[i].count);
	}
	fputc('}', out);
}

int tool_stat_print_summary_json(FILE *out, const struct tool_stat_row *rows, int n,
				 const char *const *links, int n_links)
{
	struct summary s;

	if (!summarize(rows, n, links, n_links, &s))
		return -ENOMEM;
	fprintf(out, "{\"summary\":{\"total\":%d,\"mode\":{\"ntb\":%d,\"tcp\":%d},\"link\":",
		s.total, s.ntb, s.tcp);
	json_counts(out, s.links, s.n_links);
	fprintf(out, ",\"reason\":");
	json_counts(out, s.reasons, s.n_reasons);
	fprintf(out, "}}\n");
	free(s.links);
	free(s.reasons);
	return 0;
}
