// SPDX-License-Identifier: MIT
/* Routing: does a connection to an address and port go over NTB or TCP, and why. */
#include "conf/conf_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int peer_of(const struct conf *c, const struct conf_addr *a)
{
	for (int i = 0; i < c->n_peers; i++)
		for (int k = 0; k < c->peers[i].n_addrs; k++)
			if (conf_addr_equal(&c->peers[i].addrs[k], a))
				return i;
	return -1;
}

const struct conf_peer *conf_peer_by_addr(const struct conf *c, const struct sockaddr *addr)
{
	struct conf_addr a;
	socklen_t len;
	int i;

	if (!c || !addr)
		return NULL;
	len = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (conf_sockaddr_to_addr(addr, len, &a, NULL))
		return NULL;
	i = peer_of(c, &a);
	return i < 0 ? NULL : &c->peers[i];
}

const struct conf_link *conf_link_by_name(const struct conf *c, const char *name)
{
	if (!c || !name)
		return NULL;
	for (int i = 0; i < c->n_links; i++)
		if (strcmp(c->links[i].name, name) == 0)
			return &c->links[i];
	return NULL;
}

int conf_route(const struct conf *c, const struct sockaddr *dst, socklen_t len,
	       struct conf_route *ret)
{
	struct conf_route r = { .action = CONF_ACTION_TCP, .peer_index = -1, .link_index = -1,
				.rule_index = -1 };
	struct conf_addr a;
	char as[64];
	uint16_t port;
	int rc;

	if (!c || !ret)
		return -EINVAL;
	if (c->disabled) {
		snprintf(r.reason, sizeof(r.reason), "disabled");
		goto out;
	}
	rc = conf_sockaddr_to_addr(dst, len, &a, &port);
	if (rc == -EAFNOSUPPORT) {
		snprintf(r.reason, sizeof(r.reason), "not an IP address");
		goto out;
	}
	if (rc)
		return rc;
	conf_addr_str(&a, as, sizeof(as));
	r.peer_index = peer_of(c, &a);
	if (r.peer_index < 0) {
		snprintf(r.reason, sizeof(r.reason), "not configured: no peer for address %s", as);
		goto out;
	}
	r.peer = &c->peers[r.peer_index];
	r.link_index = r.peer->link_index;
	if (c->rules_default) {
		r.action = CONF_ACTION_NTB;
		snprintf(r.reason, sizeof(r.reason), "default: peer %s", r.peer->name);
		goto out;
	}
	for (int i = 0; i < c->n_rules; i++) {
		const struct conf_rule *rule = &c->rules[i];

		if (port < rule->port_lo || port > rule->port_hi ||
		    !conf_prefix_match(&rule->match, &a))
			continue;
		r.rule_index = i;
		r.action = rule->action;
		snprintf(r.reason, sizeof(r.reason), "rule %d says %s", i + 1,
			 conf_action_name(rule->action));
		goto out;
	}
	snprintf(r.reason, sizeof(r.reason), "no rule matches");
out:
	*ret = r;
	return 0;
}
