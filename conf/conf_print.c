// SPDX-License-Identifier: MIT
/* The resolved view of a config, for `ntbsock check`: every value, defaults included. */
#include "conf/conf_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

static void print_size(FILE *out, const char *key, uint64_t v)
{
	char s[32];

	conf_fmt_size(v, s, sizeof(s));
	fprintf(out, "    %-20s %s (%" PRIu64 " bytes)\n", key, s, v);
}

static void print_addrs(FILE *out, const struct conf_addr *a, int n)
{
	char buf[64];

	if (n == 0)
		fprintf(out, "(none)");
	for (int i = 0; i < n; i++)
		fprintf(out, "%s%s", i ? ", " : "", conf_addr_str(&a[i], buf, sizeof(buf)));
	fprintf(out, "\n");
}

static void print_link(FILE *out, const struct conf_link *l)
{
	fprintf(out, "  link %s\n", l->name);
	fprintf(out, "    %-20s %s\n", "backend", l->backend);
	if (l->loopback)
		fprintf(out, "    %-20s both (loopback: connects on side 0, listens on side 1)\n",
			"side");
	else if (l->side < 0)
		fprintf(out, "    %-20s auto\n", "side");
	else
		fprintf(out, "    %-20s %d\n", "side", l->side);
	print_size(out, "window_size", l->window_size);
	if (strcmp(l->backend, "shm") == 0) {
		fprintf(out, "    %-20s %s\n", "path", l->path);
		fprintf(out, "    %-20s %04o\n", "mode", (unsigned)l->mode);
		if (l->group_name[0])
			fprintf(out, "    %-20s %s (gid %u)\n", "group", l->group_name,
				(unsigned)l->group);
		else
			fprintf(out, "    %-20s (unchanged)\n", "group");
		fprintf(out, "    %-20s %s\n", "allow_foreign_owner",
			l->allow_foreign_owner ? "true" : "false");
		fprintf(out, "    %-20s %s\n", "loopback", l->loopback ? "true" : "false");
		fprintf(out, "    %-20s %s\n", "ivshmem_server",
			l->ivshmem_server[0] ? l->ivshmem_server : "(none)");
		if (l->speed.bandwidth || l->speed.latency_ns) {
			char bw[32] = "unlimited";

			if (l->speed.bandwidth)
				conf_fmt_size(l->speed.bandwidth, bw, sizeof(bw));
			fprintf(out, "    %-20s bandwidth=%s%s latency_ns=%u (emulated)\n", "speed", bw,
				l->speed.bandwidth ? "/s" : "", l->speed.latency_ns);
		} else {
			fprintf(out, "    %-20s not modelled\n", "speed");
		}
	} else if (strcmp(l->backend, "pci") == 0) {
		fprintf(out, "    %-20s %s\n", "device", l->device);
		if (l->bar < 0)
			fprintf(out, "    %-20s default\n", "bar");
		else
			fprintf(out, "    %-20s %d\n", "bar", l->bar);
	}
	fprintf(out, "    %-20s %s\n", "doorbell", l->doorbell ? "true" : "false");
	fprintf(out, "    %-20s %u ms\n", "heartbeat_ms", l->heartbeat_ms);
	fprintf(out, "    %-20s %u ms\n", "link_timeout_ms", l->link_timeout_ms);
	if (l->fault.enabled) {
		char cut[32];

		conf_fmt_size(l->fault.cut_after, cut, sizeof(cut));
		fprintf(out, "    %-20s drop=%g corrupt=%g delay_us=%u seed=%" PRIu64
			" cut_after=%s cut_after_ms=%u\n", "fault", l->fault.drop, l->fault.corrupt,
			l->fault.delay_us, l->fault.seed, cut, l->fault.cut_after_ms);
	} else
		fprintf(out, "    %-20s off\n", "fault");
}

static void print_rules(FILE *out, const struct conf *c)
{
	char buf[64];

	fprintf(out, "rules:\n");
	if (c->rules_default) {
		fprintf(out, "  (default) every peer address, all ports -> ntb\n");
		return;
	}
	if (c->n_rules == 0)
		fprintf(out, "  (empty: every connection -> tcp)\n");
	for (int i = 0; i < c->n_rules; i++) {
		const struct conf_rule *r = &c->rules[i];

		fprintf(out, "  rule %d: match ", i + 1);
		if (r->match.addr.family == AF_UNSPEC)
			fprintf(out, "any");
		else
			fprintf(out, "%s/%d", conf_addr_str(&r->match.addr, buf, sizeof(buf)),
				r->match.len);
		if (r->port_lo == 0 && r->port_hi == 65535)
			fprintf(out, " ports any");
		else if (r->port_lo == r->port_hi)
			fprintf(out, " ports %u", r->port_lo);
		else
			fprintf(out, " ports %u-%u", r->port_lo, r->port_hi);
		fprintf(out, " -> %s\n", conf_action_name(r->action));
	}
	fprintf(out, "  (otherwise: tcp)\n");
}

static void print_tunables(FILE *out, const struct conf_tunables *t)
{
	fprintf(out, "tunables:\n");
	if (t->queue_size)
		print_size(out, "queue_size", t->queue_size);
	else
		fprintf(out, "    %-20s auto\n", "queue_size");
	fprintf(out, "    %-20s %u\n", "inline_slots", t->inline_slots);
	fprintf(out, "    %-20s %u\n", "inline_max", t->inline_max);
	print_size(out, "short_max", t->short_max);
	fprintf(out, "    %-20s %u\n", "contexts", t->contexts);
	if (t->connections)
		fprintf(out, "    %-20s %u\n", "connections", t->connections);
	else
		fprintf(out, "    %-20s auto\n", "connections");
	fprintf(out, "    %-20s %u ms\n", "cnct_timeout_ms", t->cnct_timeout_ms);
	fprintf(out, "    %-20s %u ms\n", "send_timeout_ms", t->send_timeout_ms);
	fprintf(out, "    %-20s %u ms\n", "recv_timeout_ms", t->recv_timeout_ms);
	fprintf(out, "    %-20s %u ms\n", "detect_timeout_ms", t->detect_timeout_ms);
	fprintf(out, "    %-20s %u\n", "max_err", t->max_err);
	fprintf(out, "    %-20s %u us\n", "spin_us", t->spin_us);
	fprintf(out, "    %-20s %u ms\n", "setup_timeout_ms", t->setup_timeout_ms);
	fprintf(out, "    %-20s %u ms\n", "peer_timeout_ms", t->peer_timeout_ms);
}

void conf_print(const struct conf *c, FILE *out)
{
	if (!c || !out)
		return;
	fprintf(out, "config: %s\n", c->path[0] ? c->path : "(string)");
	if (c->disabled)
		fprintf(out, "disabled: yes (NTBSOCK_DISABLE): every socket passes through\n");
	fprintf(out, "host: %s\n  addresses: ", c->host_name);
	print_addrs(out, c->host_addrs, c->n_host_addrs);
	fprintf(out, "links: %d\n", c->n_links);
	for (int i = 0; i < c->n_links; i++)
		print_link(out, &c->links[i]);
	fprintf(out, "peers: %d\n", c->n_peers);
	for (int i = 0; i < c->n_peers; i++) {
		const struct conf_peer *p = &c->peers[i];

		fprintf(out, "  peer %s via link%s ", p->name, p->n_links > 1 ? "s" : "");
		for (int k = 0; k < p->n_links; k++)
			fprintf(out, "%s%s", k ? ", " : "", c->links[p->link_indices[k]].name);
		if (p->n_links > 1)
			fprintf(out, " (new connections: least loaded live link%s)",
				p->balance ? "; balance: one stream spreads over two" : "");
		fprintf(out, ": ");
		print_addrs(out, p->addrs, p->n_addrs);
	}
	print_rules(out, c);
	print_tunables(out, &c->tunables);
	fprintf(out, "fallback: %s\n", conf_fallback_name(c->fallback));
	fprintf(out, "log: level %s, file %s\n", log_level_name(c->log_level),
		c->log_file[0] ? c->log_file : "(stderr)");
}
