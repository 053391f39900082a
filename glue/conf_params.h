/* SPDX-License-Identifier: MIT */
/* The one place that turns the config file's plain structs (conf/) into the parameter structs
 * of ntb/ and transport/. conf/ may not include those layers, so this header sits above all
 * three and is used by preload/ and tools/ alike: a field added to a link or to the tunables is
 * mapped here once. */
#ifndef NTBSOCK_GLUE_CONF_PARAMS_H
#define NTBSOCK_GLUE_CONF_PARAMS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "ntb/ntb.h"
#include "transport/transport.h"

/* Is every link's backend one that ntb/ has (ntb/backend/backends.c)? 0, or -EINVAL with ERR
 * filled: "FILE:LINE: key 'links[I].backend': no such backend in this build (shm, pci)
 * (value 'X')".
 * conf/ takes any name for a backend; call this after conf_load(), where the two meet. */
static inline int glue_check_backends(const struct conf *c, struct conf_error *err)
{
	char names[128] = "";
	size_t used = 0;

	for (int i = 0; i < c->n_links; i++) {
		const struct conf_link *l = &c->links[i];

		if (ntb_backend_known(l->backend))
			continue;
		for (int k = 0; ntb_backend_name(k) && used < sizeof(names); k++)
			used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
						 k ? ", " : "", ntb_backend_name(k));
		char key[32];

		snprintf(key, sizeof(key), "links[%d].backend", i);
		conf_err_set(err, l->backend_file, l->backend_line, key, l->backend,
			     "no such backend in this build (%s)", names);
		return -EINVAL;
	}
	return 0;
}

/* Fill RET with the ntb parameters of config link CL (defaults first, then every field). */
static inline void glue_link_params(const struct conf_link *cl, struct ntb_link_params *ret)
{
	ntb_link_params_init(ret);
	snprintf(ret->name, sizeof(ret->name), "%s", cl->name);
	/* (every backend's name fits; glue_check_backends() has refused the others) */
	snprintf(ret->backend, sizeof(ret->backend), "%.*s", NTB_BACKEND_NAME_MAX, cl->backend);
	ret->side = cl->side;
	ret->window_size = cl->window_size;
	snprintf(ret->path, sizeof(ret->path), "%s", cl->path);
	ret->mode = cl->mode;
	ret->group = cl->group;
	ret->allow_foreign_owner = cl->allow_foreign_owner;
	snprintf(ret->ivshmem_server, sizeof(ret->ivshmem_server), "%s", cl->ivshmem_server);
	ret->doorbell = cl->doorbell;
	snprintf(ret->device, sizeof(ret->device), "%s", cl->device);
	ret->bar = cl->bar;
	ret->heartbeat_ms = cl->heartbeat_ms;
	ret->link_timeout_ms = cl->link_timeout_ms;
	ret->fault.enabled = cl->fault.enabled;
	ret->fault.drop = cl->fault.drop;
	ret->fault.corrupt = cl->fault.corrupt;
	ret->fault.delay_us = cl->fault.delay_us;
	ret->fault.seed = cl->fault.seed;
	ret->fault.cut_after = cl->fault.cut_after;
	ret->fault.cut_after_ms = cl->fault.cut_after_ms;
	ret->speed.bandwidth = cl->speed.bandwidth;
	ret->speed.latency_ns = cl->speed.latency_ns;
}

/* Fill RET with the transport tunables of T (same names, one to one). */
static inline void glue_tp_params(const struct conf_tunables *t, struct tp_params *ret)
{
	tp_params_init(ret);
	ret->queue_size = t->queue_size;
	ret->inline_slots = t->inline_slots;
	ret->inline_max = t->inline_max;
	ret->short_max = t->short_max;
	ret->contexts = t->contexts;
	ret->connections = t->connections;
	ret->cnct_timeout_ms = t->cnct_timeout_ms;
	ret->send_timeout_ms = t->send_timeout_ms;
	ret->recv_timeout_ms = t->recv_timeout_ms;
	ret->detect_timeout_ms = t->detect_timeout_ms;
	ret->max_err = t->max_err;
	ret->spin_us = t->spin_us;
	ret->setup_timeout_ms = t->setup_timeout_ms;
	ret->peer_timeout_ms = t->peer_timeout_ms;
}

#endif
