/* SPDX-License-Identifier: MIT */
/* The fault decorator: drops, corrupts (one bit flipped) or delays outbound window writes at
 * configured rates, from a per-link seeded PRNG, so the same seed and the same sequence of
 * writes give the same faults; and cuts the link after a number of bytes or milliseconds,
 * after which nothing this handle writes reaches the peer. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntb/ntb_int.h"
#include "util/log.h"

struct ntb_fault {
	struct ntb_fault_params p;
	pthread_mutex_t mu;      /* PRNG and stats; the decorator is a test tool, not fast path */
	uint64_t state;          /* splitmix64 */
	uint64_t first_ns;       /* CLOCK_MONOTONIC of the first window write; 0: none yet */
	struct ntb_fault_stats st; /* st.cut: the link is cut, for good */
};

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double unit(uint64_t *s)
{
	return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

int ntb_fault_create(const struct ntb_fault_params *p, struct ntb_fault **ret_f)
{
	struct ntb_fault *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->p = *p;
	f->state = p->seed;
	pthread_mutex_init(&f->mu, NULL);
	*ret_f = f;
	return 0;
}

void ntb_fault_destroy(struct ntb_fault *f)
{
	if (!f)
		return;
	pthread_mutex_destroy(&f->mu);
	free(f);
}

void ntb_fault_set_drop(struct ntb_fault *f, double rate)
{
	pthread_mutex_lock(&f->mu);
	f->p.drop = rate;
	pthread_mutex_unlock(&f->mu);
}

void ntb_fault_set_delay(struct ntb_fault *f, uint32_t delay_us)
{
	pthread_mutex_lock(&f->mu);
	f->p.delay_us = delay_us;
	pthread_mutex_unlock(&f->mu);
}

void ntb_fault_get_stats(const struct ntb_fault *f, struct ntb_fault_stats *ret)
{
	pthread_mutex_lock((pthread_mutex_t *)&f->mu);
	*ret = f->st;
	pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
}

/* Store LEN bytes: a single store for aligned 1/4/8-byte values (ntb_write8/32/64 keep their
 * single-store semantics under the decorator), else the raw write. */
static void emit(struct ntb_link *link, size_t off, const void *src, size_t len)
{
	if (!link->ops->write && len == 8 && off % 8 == 0) {
		uint64_t v;
		memcpy(&v, src, 8);
		/* relaxed: the caller's named barrier orders it (as ntb_write64()) */
		atomic_store_explicit((_Atomic uint64_t *)(link->out + off), v,
				      memory_order_relaxed);
	} else if (!link->ops->write && len == 4 && off % 4 == 0) {
		uint32_t v;
		memcpy(&v, src, 4);
		/* relaxed: the caller's named barrier orders it (as ntb_write32()) */
		atomic_store_explicit((_Atomic uint32_t *)(link->out + off), v,
				      memory_order_relaxed);
	} else {
		ntb_raw_write(link, off, src, len);
	}
}

static void delay_us(uint32_t us)
{
	if (us < 100) {
		/* nanosleep overshoots short delays by ~50 µs: spin on the clock instead */
		uint64_t end = clock_mono_ns() + (uint64_t)us * 1000u;
		while (clock_mono_ns() < end)
			cpu_relax();
		return;
	}
	struct timespec ts = { 0, (long)us * 1000L };
	if (us >= 1000000) {
		ts.tv_sec = us / 1000000;
		ts.tv_nsec = (long)(us % 1000000) * 1000L;
	}
	nanosleep(&ts, NULL);
}

/* Under f->mu: has cut_after_ms passed since the first window write? */
static bool cut_time_due(const struct ntb_fault *f, uint64_t now)
{
	return f->p.cut_after_ms && f->first_ns && now >= f->first_ns &&
	       now - f->first_ns >= (uint64_t)f->p.cut_after_ms * 1000000u;
}

/* Under f->mu: is the window write of LEN bytes at NOW cut? Cuts the link when it is the
 * first write past a threshold; counts the bytes of a write that passes. */
static bool cut_window_write(struct ntb_fault *f, size_t len, uint64_t now)
{
	if (!f->st.cut && (cut_time_due(f, now) ||
			   (f->p.cut_after && len > f->p.cut_after - f->st.bytes)))
		f->st.cut = true;
	if (f->st.cut)
		return true;
	if (!f->first_ns)
		f->first_ns = now;
	f->st.bytes += len;
	/* exactly cut_after bytes written: nothing more goes, not even a heartbeat */
	if (f->p.cut_after && f->st.bytes >= f->p.cut_after)
		f->st.cut = true;
	return false;
}

static void log_cut(const struct ntb_link *link, uint64_t bytes)
{
	LOG(LL_DEBUG, "ntb: link %s cut by the fault decorator after %llu window bytes",
	    link->params.name, (unsigned long long)bytes);
}

bool ntb_fault_ctrl_pass(struct ntb_link *link)
{
	struct ntb_fault *f = link->fault;
	bool was, cut;
	uint64_t bytes;

	pthread_mutex_lock(&f->mu);
	was = f->st.cut;
	if (!was && cut_time_due(f, clock_mono_ns()))
		f->st.cut = true;
	cut = f->st.cut;
	if (cut)
		f->st.cut_ctrl_drops++;
	bytes = f->st.bytes;
	pthread_mutex_unlock(&f->mu);
	if (cut && !was)
		log_cut(link, bytes);
	return !cut;
}

void ntb_fault_write(struct ntb_link *link, size_t off, const void *src, size_t len)
{
	struct ntb_fault *f = link->fault;
	uint32_t delay = 0;
	bool drop, corrupt, was_cut, cut;
	uint64_t bit = 0, bytes, now = f->p.cut_after_ms ? clock_mono_ns() : 0;

	/* Draw order is fixed (delay?, drop, corrupt?, bit?) so the fault sequence depends only
	 * on the seed and the sequence of writes (their lengths); a cut write draws nothing. */
	pthread_mutex_lock(&f->mu);
	f->st.writes++;
	was_cut = f->st.cut;
	if (cut_window_write(f, len, now)) {
		f->st.cut_drops++;
		bytes = f->st.bytes;
		pthread_mutex_unlock(&f->mu);
		if (!was_cut)
			log_cut(link, bytes);
		return;
	}
	cut = f->st.cut; /* this write reached cut_after exactly: it goes, nothing after it */
	bytes = f->st.bytes;
	if (f->p.delay_us) {
		delay = (uint32_t)(splitmix64(&f->state) % ((uint64_t)f->p.delay_us + 1));
		if (delay)
			f->st.delayed++;
	}
	drop = unit(&f->state) < f->p.drop;
	corrupt = !drop && len > 0 && unit(&f->state) < f->p.corrupt;
	if (corrupt)
		bit = splitmix64(&f->state) % ((uint64_t)len * 8);
	if (drop)
		f->st.dropped++;
	if (corrupt)
		f->st.corrupted++;
	pthread_mutex_unlock(&f->mu);

	if (cut)
		log_cut(link, bytes);
	if (delay)
		delay_us(delay);
	if (drop)
		return;
	if (!corrupt) {
		emit(link, off, src, len);
		return;
	}
	/* Never read the outbound window (rule 1): flip the bit in a private copy of the byte
	 * (or of the whole value for single-store writes). */
	if (len <= 8) {
		uint8_t tmp[8];
		memcpy(tmp, src, len);
		tmp[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		emit(link, off, tmp, len);
	} else {
		uint8_t b = ((const uint8_t *)src)[bit / 8] ^ (uint8_t)(1u << (bit % 8));
		ntb_raw_write(link, off, src, len);
		ntb_raw_write(link, off + bit / 8, &b, 1);
	}
}
