/* SPDX-License-Identifier: MIT */
/* The link's public API: open and close, enable and disable, what a link is (info, names) and
 * the scratchpads — the backend-independent part of ntb/ (layout and protocol described in
 * ntb_int.h) with side.c (process coordination), peer.c (the peer's liveness), window.c
 * (window writes and barriers) and doorbell.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "ntb/ntb_int.h"
#include "util/log.h"
#include "util/crc32c.h"
#include "util/mapguard.h"
#include "util/proc.h"
#include "util/rawsys.h"

static __thread char detail_buf[256];

void ntb_set_detail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail_buf, sizeof(detail_buf), fmt, ap);
	va_end(ap);
	LOG(LL_DEBUG, "ntb: %s", detail_buf);
}

const char *ntb_strerror_detail(void)
{
	return detail_buf;
}


void ntb_link_params_init(struct ntb_link_params *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->backend, sizeof(p->backend), "shm");
	p->side = -1;
	p->window_size = 16u << 20;
	p->mode = 0600;
	p->group = (gid_t)-1;
	p->bar = -1;
	p->heartbeat_ms = 100;
	p->link_timeout_ms = 500;
	p->doorbell = true;
}

/* --- open / close ---------------------------------------------------------------------------- */

static int check_params(const struct ntb_link_params *p)
{
	size_t n = strnlen(p->name, sizeof(p->name));
	if (n == 0 || n > NTB_NAME_MAX) {
		ntb_set_detail("link name empty or longer than %d", NTB_NAME_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		char c = p->name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.') || (i == 0 && c == '.')) {
			ntb_set_detail("link name \"%.*s\": only letters, digits, - _ . allowed",
				       (int)n, p->name);
			return -EINVAL;
		}
	}
	if (p->side < -1 || p->side > 1) {
		ntb_set_detail("link %s: side %d (want 0, 1 or -1)", p->name, p->side);
		return -EINVAL;
	}
	if (p->window_size % NTB_PAGE || p->window_size > (UINT64_C(1) << 40)) {
		ntb_set_detail("link %s: window size %zu not a multiple of 4096 (or > 1 TiB)",
			       p->name, p->window_size);
		return -EINVAL;
	}
	const struct ntb_fault_params *f = &p->fault;
	if (f->enabled && (!(f->drop >= 0.0 && f->drop <= 1.0) ||
			   !(f->corrupt >= 0.0 && f->corrupt <= 1.0) || f->delay_us > 1000000)) {
		ntb_set_detail("link %s: fault rates must be in [0,1], delay ≤ 1 s", p->name);
		return -EINVAL;
	}
	return 0;
}

static void link_layout(struct ntb_link *link)
{
	int s = link->side, o = 1 - s;
	link->local = ntb_side_local_of(link, s);
	link->peer_local = ntb_side_local_of(link, o);
	link->ctrl_in = (struct ntb_ctrl_page *)(link->base + link->hdr.ctrl_off[s]);
	link->ctrl_out = (struct ntb_ctrl_page *)(link->base + link->hdr.ctrl_off[o]);
	link->in = link->base + link->hdr.win_off[s];
	link->out = link->base + link->hdr.win_off[o];
	link->win_size = link->hdr.win_size;
	link->out_size = link->inspect ? 0 : link->win_size;
}

int ntb_link_open(const struct ntb_link_params *p, struct ntb_link **ret_link)
{
	const struct ntb_backend_ops *ops;

	if (!p)
		return -EINVAL;
	ops = ntb_backend_find(p->backend);
	if (!ops) {
		ntb_set_detail("link %s: no backend \"%.*s\" in this build", p->name,
			       NTB_BACKEND_NAME_MAX, p->backend);
		return -EINVAL;
	}
	return ntb_link_open_ops(p, ops, ret_link);
}


int ntb_link_open_ops(const struct ntb_link_params *p, const struct ntb_backend_ops *ops,
		      struct ntb_link **ret_link)
{
	int rc;

	detail_buf[0] = 0;
	if (!p || !ret_link || !ops || !ops->open || !ops->close)
		return -EINVAL;
	rc = check_params(p);
	if (rc)
		return rc;
	struct ntb_link *link = calloc(1, sizeof(*link));
	if (!link) {
		ntb_set_detail("out of memory");
		return -ENOMEM;
	}
	link->params = *p;
	if (!link->params.heartbeat_ms)
		link->params.heartbeat_ms = 100;
	if (!link->params.link_timeout_ms)
		link->params.link_timeout_ms = 500;
	if (link->params.link_timeout_ms <= link->params.heartbeat_ms) {
		ntb_set_detail("link %s: link_timeout_ms %u must exceed heartbeat_ms %u", p->name,
			       link->params.link_timeout_ms, link->params.heartbeat_ms);
		free(link);
		return -EINVAL;
	}
	link->inspect = p->inspect_only;
	if (link->inspect && link->params.side < 0)
		link->params.side = 0;
	link->slot = -1;
	link->side_hint = -1;
	link->hb_period_ns = (uint64_t)link->params.heartbeat_ms * 1000000u;
	link->timeout_ns = (uint64_t)link->params.link_timeout_ms * 1000000u;
	link->ops = ops;

	rc = link->ops->open(link);
	if (rc)
		goto err_free;
	if (link->inspect) {
		link->side = link->params.side;
	} else {
		rc = ntb_side_claim(link);
		if (rc)
			goto err_close;
	}
	link_layout(link);
	if (!link->inspect && (p->speed.bandwidth || p->speed.latency_ns)) {
		rc = ntb_speed_create(link);
		if (rc) {
			ntb_set_detail("link %s: speed model: %s", p->name,
				       rc == -EINVAL ? "shm backend only" : "out of memory");
			goto err_release;
		}
	}
	if (!link->inspect && p->fault.enabled) {
		rc = ntb_fault_create(&p->fault, &link->fault);
		if (rc) {
			ntb_set_detail("link %s: fault decorator: out of memory", p->name);
			goto err_release;
		}
	}
	/* Start observing: the current heartbeat value is "old" until it changes. This host's
	 * record learns the value (if new to it) and when it was first seen here. */
	uint32_t hb0 = atomic_load_explicit(&link->ctrl_in->heartbeat.v, memory_order_acquire);
	atomic_store_explicit(&link->peer_hb_last, hb0, memory_order_relaxed);
	atomic_store_explicit(&link->peer_hb_change_ns, 0, memory_order_relaxed);
	pthread_mutex_init(&link->clk_mu, NULL);
	/* (relaxed: the stamp beside hb0; a first sighting whose stamp differs has a moving one) */
	link->clk_stamp = atomic_load_explicit(&link->ctrl_in->hb_mono.v, memory_order_relaxed);
	/* (relaxed: a request from before we opened was for an earlier process of ours) */
	atomic_store_explicit(&link->beat_req_seen,
			      atomic_load_explicit(&link->ctrl_in->beat_req.v, memory_order_relaxed),
			      memory_order_relaxed);
	ntb_hb_record(link, hb0, false);
	LOG(LL_DEBUG, "ntb: link %s open (%s, side %d, windows %zu, epoch %08x%s)", p->name,
	    link->ops->name, link->side, link->win_size, link->epoch,
	    link->inspect ? ", inspect" : "");
	*ret_link = link;
	return 0;

err_release:
	ntb_side_release(link);
err_close:
	link->ops->close(link);
err_free:
	ntb_speed_destroy(link->speed);
	pthread_mutex_destroy(&link->clk_mu);
	free(link);
	return rc;
}

void ntb_link_close(struct ntb_link *link)
{
	if (!link)
		return;
	if (!link->inspect) {
		ntb_link_disable(link);
		ntb_side_release(link);
	}
	ntb_fault_destroy(link->fault);
	link->ops->close(link);
	ntb_speed_destroy(link->speed);
	ntb_ev_cache_free(atomic_load_explicit(&link->evc, memory_order_relaxed));
	free(link);
}

int ntb_link_check_mapping(struct ntb_link *link)
{
	if (!link)
		return -EINVAL;
	return link->ops->check_mapping ? link->ops->check_mapping(link) : 0;
}

/* --- link state ----------------------------------------------------------------------------- */

int ntb_link_enable(struct ntb_link *link)
{
	if (link->inspect)
		return -EPERM;
	/* relaxed: this handle's flag, changed under the side lock (taken below); a racing
	 * enable of the same handle finds it again there */
	if (atomic_load_explicit(&link->enabled, memory_order_relaxed))
		return 0;
	int rc = ntb_side_lock(link->local);
	if (rc)
		return rc;
	if (ntb_side_owns_slot(link))
		atomic_store_explicit(&link->local->slots[link->slot].enabled, 1,
				      memory_order_relaxed);
	struct ntb_ctrl_page *c = link->ctrl_out;
	uint32_t caps = link->caps;
	if (link->db_id)
		/* Interrupt doorbells: this process takes them from now on (under the side lock). */
		atomic_store_explicit(&link->local->db_owner, link->db_id, memory_order_relaxed);
	else if (atomic_load_explicit(&link->local->db_owner, memory_order_relaxed))
		caps |= NTB_CAP_EVENT_DB; /* another process of this side takes them: keep its id */
	if (!ntb_ctrl_cut(link)) {
		if (link->db_id)
			atomic_store_explicit(&c->db_id.v, link->db_id, memory_order_relaxed);
		atomic_store_explicit(&c->caps.v, caps, memory_order_relaxed);
		atomic_store_explicit(&c->writer_pid.v, (uint32_t)getpid(), memory_order_relaxed);
		atomic_store_explicit(&c->epoch.v, link->epoch, memory_order_relaxed);
		/* Release: epoch before enable; pairs with the acquire load of enable in
		 * observe_peer(). */
		atomic_store_explicit(&c->enable.v, 1, memory_order_release);
	}
	ntb_heartbeat_write(link);
	atomic_store_explicit(&link->local->hb_due_ns, clock_mono_ns() + link->hb_period_ns,
			      memory_order_relaxed);
	/* relaxed: under the side lock; ntb_link_tick() reads it as a hint */
	atomic_store_explicit(&link->enabled, true, memory_order_relaxed);
	ntb_side_unlock(link->local);
	return 0;
}

int ntb_link_disable(struct ntb_link *link)
{
	if (link->inspect)
		return -EPERM;
	/* relaxed: as in ntb_link_enable() */
	if (!atomic_load_explicit(&link->enabled, memory_order_relaxed))
		return 0;
	int locked = ntb_side_lock(link->local);
	int enabled = 0;
	if (ntb_side_owns_slot(link))
		atomic_store_explicit(&link->local->slots[link->slot].enabled, 0,
				      memory_order_relaxed);
	ntb_side_reap(link->local, &enabled);
	/* The last enabled handle of the side announces down (pairs with observe_peer()); a cut
	 * one cannot: the peer sees its heartbeat stop instead. */
	if (enabled == 0 && !ntb_ctrl_cut(link))
		atomic_store_explicit(&link->ctrl_out->enable.v, 0, memory_order_release);
	/* relaxed: this handle's view, which observe_peer() writes relaxed too (nothing is
	 * published with it) */
	atomic_store_explicit(&link->enabled, false, memory_order_relaxed);
	atomic_store_explicit(&link->up, false, memory_order_relaxed);
	atomic_store_explicit(&link->peer_epoch, 0, memory_order_relaxed);
	atomic_store_explicit(&link->peer_silent, false, memory_order_relaxed);
	if (locked == 0)
		ntb_side_unlock(link->local);
	return 0;
}

int ntb_link_side(const struct ntb_link *link)
{
	return link->side;
}

uint32_t ntb_link_epoch(const struct ntb_link *link)
{
	return link->epoch;
}


const char *ntb_link_name(const struct ntb_link *link)
{
	return link->params.name;
}

const char *ntb_link_backend(const struct ntb_link *link)
{
	return link->params.backend;
}

int ntb_link_info(struct ntb_link *link, struct ntb_link_info *ret)
{
	if (!link || !ret)
		return -EINVAL;
	struct ntb_link_info info;
	memset(&info, 0, sizeof(info));
	info.up = ntb_link_tick(link);
	snprintf(info.backend, sizeof(info.backend), "%s", link->params.backend);
	info.side = link->side;
	info.window_size = link->win_size;
	info.region_size = link->hdr.region_size;
	info.map_size = link->map_size;
	/* relaxed (all of these): a snapshot for display, each word on its own */
	info.enabled = link->inspect ?
		atomic_load_explicit(&link->ctrl_out->enable.v, memory_order_relaxed) == 1 :
		atomic_load_explicit(&link->enabled, memory_order_relaxed);
	info.epoch = link->inspect ?
		atomic_load_explicit(&link->local->session_epoch, memory_order_relaxed) :
		link->epoch;
	info.peer_epoch = atomic_load_explicit(&link->peer_epoch, memory_order_relaxed);
	info.peer_enabled = atomic_load_explicit(&link->ctrl_in->enable.v,
						 memory_order_relaxed) == 1;
	info.peer_epoch_word = atomic_load_explicit(&link->ctrl_in->epoch.v, memory_order_relaxed);
	info.peer_heartbeat = atomic_load_explicit(&link->peer_hb_last, memory_order_relaxed);
	uint64_t changed = atomic_load_explicit(&link->peer_hb_change_ns, memory_order_relaxed);
	uint64_t now = clock_mono_ns();
	info.peer_hb_age_ms = changed ? (int64_t)((now > changed ? now - changed : 0) / 1000000u)
				      : -1;
	for (int s = 0; s < 2; s++) {
		struct ntb_side_local *l = ntb_side_local_of(link, s);
		for (int i = 0; i < NTB_SIDE_SLOTS; i++)
			if (atomic_load_explicit(&l->slots[i].owner, memory_order_relaxed))
				info.claims[s]++;
	}
	snprintf(info.location, sizeof(info.location), "%s",
		 link->ops->location ? link->ops->location(link) : "");
	*ret = info;
	return 0;
}

/* --- scratchpads ------------------------------------------------------------------------------ */

int ntb_spad_count(const struct ntb_link *link)
{
	(void)link;
	return NTB_SPAD_COUNT;
}

int ntb_spad_read(const struct ntb_link *link, int idx, uint32_t *ret_val)
{
	if (idx < 0 || idx >= NTB_SPAD_COUNT || !ret_val)
		return -EINVAL;
	/* Acquire: pairs with the release in the peer's ntb_peer_spad_write(). */
	*ret_val = atomic_load_explicit(&link->ctrl_in->spad[idx].v, memory_order_acquire);
	return 0;
}

int ntb_peer_spad_write(struct ntb_link *link, int idx, uint32_t val)
{
	if (idx < 0 || idx >= NTB_SPAD_COUNT)
		return -EINVAL;
	if (link->inspect)
		return -EPERM;
	if (ntb_ctrl_cut(link))
		return 0;
	/* Release: earlier writes before the scratchpad; pairs with ntb_spad_read(). */
	atomic_store_explicit(&link->ctrl_out->spad[idx].v, val, memory_order_release);
	return 0;
}

void ntb_fault_stats(const struct ntb_link *link, struct ntb_fault_stats *ret_stats)
{
	if (link->fault)
		ntb_fault_get_stats(link->fault, ret_stats);
	else
		memset(ret_stats, 0, sizeof(*ret_stats));
}
