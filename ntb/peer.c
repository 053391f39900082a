/* SPDX-License-Identifier: MIT */
/* The peer's liveness: our heartbeat written, the peer's observed (link up, down, silent), this
 * host's record of it shared by its processes, and the peer's state (up, dead, absent). */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "util/clock.h"
#include "ntb/ntb_int.h"
#include "util/log.h"
#include "util/mapguard.h"

void ntb_heartbeat_write(struct ntb_link *link)
{
	if (ntb_ctrl_cut(link))
		return; /* the peer sees our heartbeat stop: its link goes down */
	uint64_t v = atomic_fetch_add_explicit(&link->local->hb_seq, 1, memory_order_relaxed) + 1;
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	atomic_store_explicit(&link->ctrl_out->hb_wall.v, (uint32_t)wall.tv_sec,
			      memory_order_relaxed);
	uint32_t mono = (uint32_t)(clock_mono_ns() / 1000000u);
	atomic_store_explicit(&link->ctrl_out->hb_mono.v, mono ? mono : 1u, memory_order_relaxed);
	/* Release: epoch/enable/caps/stamps before the heartbeat; pairs with the acquire load of
	 * the heartbeat in observe_peer() and ntb_link_peer_state(). */
	atomic_store_explicit(&link->ctrl_out->heartbeat.v, (uint32_t)v, memory_order_release);
}

/* --- the host's record of the peer's heartbeat (side_local.peer_hb_seen) ----------------------
 * Sound for NTB_PEER_DEAD because each heartbeat value is written once (the peer side's hb_seq
 * only grows) and the record's time is read after the value was: when the peer's word still
 * holds the recorded value, the peer has not written since before that time. A record whose
 * time is later than it might be (a slow observer, the CAS race below) only makes the heartbeat
 * look younger: the caller waits, as it did before there was a record. */

static uint32_t mono_ms31(void)
{
	return (uint32_t)(clock_mono_ns() / 1000000u) & 0x7fffffffu;
}

/* Record that a process of this host saw heartbeat value HB (CHANGED: replacing another value
 * it had seen), unless the record already holds it as well. */
void ntb_hb_record(struct ntb_link *link, uint32_t hb, bool changed)
{
	_Atomic uint64_t *w = &link->local->peer_hb_seen;
	uint64_t old = atomic_load_explicit(w, memory_order_relaxed);

	if (link->inspect)
		return; /* (a read-only look: `ntbsock check` of the other side's file) */
	if (old && NTB_HB_SEEN_VALUE(old) == hb && (NTB_HB_SEEN_CHANGED(old) || !changed))
		return;
	/* (the time after the caller's load of HB; a lost CAS leaves a record as good) */
	atomic_compare_exchange_strong_explicit(w, &old, NTB_HB_SEEN(hb, changed, mono_ms31()),
						memory_order_relaxed, memory_order_relaxed);
}

/* Milliseconds since REC's sighting (mod 2^31: a record older than 24 days looks young). */
static uint32_t hb_record_age_ms(uint64_t rec)
{
	return (mono_ms31() - NTB_HB_SEEN_MS(rec)) & 0x7fffffffu;
}

uint32_t ntb_link_dead_ms(const struct ntb_link *link)
{
	uint32_t ms = link->params.link_timeout_ms * 2u;
	return ms < 1000u ? 1000u : ms;
}

/* --- the peer's clock (link->clk_*) ------------------------------------------------------------
 * A sighting of a new heartbeat at our time T (taken after the heartbeat was loaded) gives
 * T - hb_mono = offset + how late we looked, so the smallest such difference is the offset plus
 * our quickest look: the peer's last heartbeat is dated from its own stamp, within that quickest
 * look, however late the look that saw it was (a starved helper). The bound may grow by 1 ms a
 * second (far more than two clocks drift) when no look is as quick again; an age read from it
 * takes that growth and 2 ms of truncation off, so that it errs younger (a clean death is never
 * read as one behind a silent link for want of a millisecond). The bound belongs to one peer
 * session and needs a stamp that moves with the heartbeat. */

static void clk_sighting(struct ntb_link *link, uint32_t ep, uint32_t hb_mono, uint64_t now)
{
	uint32_t now_ms = (uint32_t)(now / 1000000u), d = now_ms - hb_mono;

	if (pthread_mutex_trylock(&link->clk_mu))
		return;
	/* (a stamp that differs from the last one seen, or from the one there when the link was
	 * opened; the first one after a zero is taken on trust until the next sighting) */
	bool moved = hb_mono && hb_mono != link->clk_stamp;

	link->clk_stamp = hb_mono;
	if (link->clk_valid && (link->clk_epoch != ep || !moved))
		link->clk_valid = false; /* another session, or a stamp that does not move */
	if (moved) {
		uint32_t since = now_ms - link->clk_base_ms;

		if (!link->clk_valid || (int32_t)(d - (link->clk_off + since / 1000u)) <= 0) {
			link->clk_valid = true;
			link->clk_epoch = ep;
			link->clk_off = d;
			link->clk_base_ms = now_ms;
		}
	}
	pthread_mutex_unlock(&link->clk_mu);
}

/* Milliseconds since the peer wrote its last heartbeat that reached us, by its own stamp and
 * the offset bound, erring younger; -1: no stamp or no bound (or its lock busy). */
static int64_t clk_hb_age_ms(struct ntb_link *link, uint64_t now)
{
	uint32_t now_ms = (uint32_t)(now / 1000000u);
	int64_t age = -1;

	if (pthread_mutex_trylock(&link->clk_mu))
		return -1;
	/* relaxed: the peer's words as they stand; a stamp newer than the bound's sightings only
	 * dates a younger heartbeat */
	uint32_t ep = atomic_load_explicit(&link->ctrl_in->epoch.v, memory_order_relaxed);
	uint32_t hb_mono = atomic_load_explicit(&link->ctrl_in->hb_mono.v, memory_order_relaxed);

	if (link->clk_valid && link->clk_epoch == ep && hb_mono) {
		uint32_t slack = (now_ms - link->clk_base_ms) / 1000u + 2u;
		int32_t a = (int32_t)(now_ms - (hb_mono + link->clk_off)) - (int32_t)slack;

		age = a < 0 ? 0 : a;
	}
	pthread_mutex_unlock(&link->clk_mu);
	return age;
}

static void observe_peer(struct ntb_link *link, uint64_t now)
{
	struct ntb_ctrl_page *c = link->ctrl_in;
	/* Acquire: pairs with the release store of the heartbeat in ntb_heartbeat_write(). */
	uint32_t hb = atomic_load_explicit(&c->heartbeat.v, memory_order_acquire);
	bool moved = hb != atomic_load_explicit(&link->peer_hb_last, memory_order_relaxed);
	/* relaxed: stored before the heartbeat, which the acquire load above read */
	uint32_t hb_mono = atomic_load_explicit(&c->hb_mono.v, memory_order_relaxed);
	/* the sighting's time after the loads (NOW may precede the peer's write: a sighting
	 * dated before it would make the heartbeat look older than it is) */
	uint64_t seen_at = moved ? clock_mono_ns() : now;
	if (moved) {
		atomic_store_explicit(&link->peer_hb_last, hb, memory_order_relaxed);
		atomic_store_explicit(&link->peer_hb_change_ns, seen_at, memory_order_relaxed);
		ntb_hb_record(link, hb, true);
	} else if (!atomic_load_explicit(&link->peer_hb_change_ns, memory_order_relaxed)) {
		/* No change seen by this handle yet: one that another process of this host saw
		 * counts the same (a new process finds a live link up at once). */
		uint64_t rec = atomic_load_explicit(&link->local->peer_hb_seen, memory_order_relaxed);
		uint64_t age = rec ? (uint64_t)hb_record_age_ms(rec) * 1000000u : 0;
		if (rec && NTB_HB_SEEN_VALUE(rec) == hb && NTB_HB_SEEN_CHANGED(rec) &&
		    age <= link->timeout_ns && age < now) {
			uint64_t zero = 0;
			atomic_compare_exchange_strong_explicit(&link->peer_hb_change_ns, &zero,
								now - age, memory_order_relaxed,
								memory_order_relaxed);
		}
	}
	uint64_t changed = atomic_load_explicit(&link->peer_hb_change_ns, memory_order_relaxed);
	/* Acquire: pairs with the release store of enable in ntb_link_enable(). */
	uint32_t en = atomic_load_explicit(&c->enable.v, memory_order_acquire);
	uint32_t ep = atomic_load_explicit(&c->epoch.v, memory_order_relaxed);
	/* A racing tick may have stored a later `changed` than our `now`: that is fresh too. */
	bool fresh = changed && (now < changed || now - changed <= link->timeout_ns);
	bool ours = link->inspect ? atomic_load_explicit(&link->ctrl_out->enable.v,
							  memory_order_relaxed) == 1
				  : atomic_load_explicit(&link->enabled, memory_order_relaxed);
	/* A mapping that faulted (file truncated) now reads zeros: the link is gone. */
	bool up = ours && en == 1 && ep != 0 && fresh && !mapguard_lost(link->base);
	bool was = atomic_exchange_explicit(&link->up, up, memory_order_relaxed);
	uint32_t old_ep = atomic_exchange_explicit(&link->peer_epoch, up ? ep : 0,
						   memory_order_relaxed);
	if (up)
		atomic_store_explicit(&link->peer_epoch_seen, ep, memory_order_relaxed);
	if (moved && up)
		clk_sighting(link, ep, hb_mono, seen_at);
	/* stale heartbeat alone (the peer was up before, with this epoch) */
	bool silent = !up && ours && en == 1 && ep != 0 && changed && !fresh &&
		      ep == atomic_load_explicit(&link->peer_epoch_seen, memory_order_relaxed) &&
		      !mapguard_lost(link->base);
	atomic_store_explicit(&link->peer_silent, silent, memory_order_relaxed);
	if (up != was || (up && ep != old_ep))
		LOG(LL_DEBUG, "ntb: link %s %s (peer epoch %08x)", link->params.name,
		    up ? "up" : "down", ep);
}

bool ntb_link_tick(struct ntb_link *link)
{
	uint64_t now = clock_mono_ns();
	if (atomic_load_explicit(&link->enabled, memory_order_relaxed)) {
		uint64_t due = atomic_load_explicit(&link->local->hb_due_ns, memory_order_relaxed);
		/* One heartbeat per period for the whole side: the CAS winner writes it. */
		if (now >= due &&
		    atomic_compare_exchange_strong_explicit(&link->local->hb_due_ns, &due,
							    now + link->hb_period_ns,
							    memory_order_relaxed,
							    memory_order_relaxed))
			ntb_heartbeat_write(link);
	}
	observe_peer(link, now);
	return atomic_load_explicit(&link->up, memory_order_relaxed);
}

void ntb_link_beat_soon(struct ntb_link *link)
{
	/* relaxed: the request carries nothing but itself (any new value asks for a beat); it was
	 * stored before the ring that brought us here (the doorbell's acquire in ntb_db_read(),
	 * helper_service()) */
	uint32_t req = atomic_load_explicit(&link->ctrl_in->beat_req.v, memory_order_relaxed);

	if (req == atomic_load_explicit(&link->beat_req_seen, memory_order_relaxed))
		return; /* a ring for something else: the data path rings all the time */
	atomic_store_explicit(&link->beat_req_seen, req, memory_order_relaxed);
	uint64_t now = clock_mono_ns();
	/* relaxed: a time for the CAS winner of ntb_link_tick(), as there */
	uint64_t due = atomic_load_explicit(&link->local->hb_due_ns, memory_order_relaxed);
	uint64_t last = due - link->hb_period_ns; /* (the last write: due is set a period on) */

	if (!atomic_load_explicit(&link->enabled, memory_order_relaxed) || now >= due ||
	    now - last < NTB_BEAT_SOON_NS)
		return;
	atomic_compare_exchange_strong_explicit(&link->local->hb_due_ns, &due, now,
						memory_order_relaxed, memory_order_relaxed);
}

bool ntb_link_is_up(struct ntb_link *link)
{
	return ntb_link_tick(link);
}

int ntb_link_wait_up(struct ntb_link *link, int timeout_ms)
{
	uint64_t start = clock_mono_ns();
	for (;;) {
		if (ntb_link_tick(link))
			return 0;
		uint64_t el = clock_mono_ns() - start;
		if (timeout_ms >= 0 && el >= (uint64_t)timeout_ms * 1000000u)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 5000000 };
		if (nanosleep(&ts, NULL) && errno == EINTR)
			return -EINTR;
	}
}

enum ntb_peer_state ntb_link_peer_state(struct ntb_link *link)
{
	struct ntb_ctrl_page *c = link->ctrl_in;

	if (ntb_link_tick(link))
		return NTB_PEER_UP;
	if (mapguard_lost(link->base))
		return NTB_PEER_ABSENT;
	/* Acquire: pairs with the release store of the heartbeat in ntb_heartbeat_write(): the wall
	 * stamp read below is the one stored with this value or a later one. */
	uint32_t hb = atomic_load_explicit(&c->heartbeat.v, memory_order_acquire);
	if (atomic_load_explicit(&c->enable.v, memory_order_relaxed) != 1 ||
	    atomic_load_explicit(&c->epoch.v, memory_order_relaxed) == 0)
		return NTB_PEER_ABSENT;
	uint32_t wall = atomic_load_explicit(&c->hb_wall.v, memory_order_relaxed);
	uint64_t rec = atomic_load_explicit(&link->local->peer_hb_seen, memory_order_relaxed);
	uint32_t dead_ms = ntb_link_dead_ms(link);
	if (rec && NTB_HB_SEEN_VALUE(rec) == hb) {
		if (hb_record_age_ms(rec) >= dead_ms)
			return NTB_PEER_DEAD; /* standing still since this host first saw it */
		if (NTB_HB_SEEN_CHANGED(rec))
			return NTB_PEER_UNKNOWN; /* it moved recently */
	} else if (rec && hb_record_age_ms(rec) < dead_ms) {
		return NTB_PEER_UNKNOWN; /* moved since a recent sighting */
	}
	/* No sighting tells the value's age: the peer's own wall-clock stamp may (hosts of one
	 * link keep their clocks in step; a skewed one makes this guess wrong only until a
	 * process of this host has seen the heartbeat move, which takes one heartbeat_ms). */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int32_t behind_s = (int32_t)((uint32_t)now.tv_sec - wall);
	if (wall && behind_s > (int32_t)((dead_ms + 999u) / 1000u) + NTB_WALL_SLACK_S)
		return NTB_PEER_DEAD;
	return NTB_PEER_UNKNOWN;
}

/* While waiting for a live peer's heartbeat to move, its doorbell is rung every this often: a
 * peer side of this version beats at once (ntb_link_beat_soon()), else it comes within
 * heartbeat_ms. A new process that was the first of its host to look (no sighting recorded by
 * another) waited up to a whole period, 100 ms by default, for its first connection. */
#define NTB_WAIT_RING_NS 20000000u

int ntb_link_wait_peer(struct ntb_link *link, int timeout_ms)
{
	uint64_t start = clock_mono_ns(), rang = 0;
	for (;;) {
		enum ntb_peer_state st = ntb_link_peer_state(link);
		if (st == NTB_PEER_UP)
			return 0;
		if (st == NTB_PEER_ABSENT || st == NTB_PEER_DEAD)
			return -EHOSTDOWN;
		uint64_t el = clock_mono_ns() - start;
		if (!rang || el - rang >= NTB_WAIT_RING_NS) {
			if (!link->inspect && !ntb_ctrl_cut(link))
				/* relaxed: a new value is the whole request (the ring follows it, and
				 * a ring that overtakes it is repeated 20 ms later) */
				atomic_store_explicit(&link->ctrl_out->beat_req.v,
						      (uint32_t)(clock_mono_ns() >> 10) | 1u,
						      memory_order_relaxed);
			ntb_to_peer_barrier(link); /* (the request before the ring, on any mapping) */
			ntb_peer_db_ring(link); /* (fails harmlessly where the link cannot ring) */
			rang = el ? el : 1;
		}
		if (timeout_ms >= 0 && el >= (uint64_t)timeout_ms * 1000000u)
			return -ETIMEDOUT;
		/* (a live peer's heartbeat moves every heartbeat_ms: look often enough to see it
		 * within a small part of that; every 100 µs for the first 2 ms after a ring, when a
		 * peer that beats on request answers: its helper's wake-up and one write) */
		struct timespec ts = { 0, el < rang + 2000000u ? 100000 : 1000000 };
		if (nanosleep(&ts, NULL) && errno == EINTR)
			return -EINTR;
	}
}

bool ntb_link_peer_silent(const struct ntb_link *link)
{
	return atomic_load_explicit(&link->peer_silent, memory_order_relaxed);
}

int64_t ntb_link_peer_hb_age_ms(struct ntb_link *link)
{
	uint64_t changed = atomic_load_explicit(&link->peer_hb_change_ns, memory_order_relaxed);
	uint64_t now = clock_mono_ns();
	int64_t seen = changed ? (int64_t)((now > changed ? now - changed : 0) / 1000000u) : -1;
	int64_t stamped = clk_hb_age_ms(link, now);

	/* both err younger (a sighting is after the write; the stamp's bound is taken so): the
	 * larger is the closer */
	return stamped > seen ? stamped : seen;
}

uint32_t ntb_link_heartbeat_ms(const struct ntb_link *link)
{
	return link->params.heartbeat_ms;
}

uint32_t ntb_link_peer_epoch(const struct ntb_link *link)
{
	return atomic_load_explicit(&link->peer_epoch, memory_order_relaxed);
}
