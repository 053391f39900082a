/* SPDX-License-Identifier: MIT */
/* The clocks every layer reads: CLOCK_MONOTONIC in nanoseconds and milliseconds, and the coarse
 * monotonic clock (a few ms of resolution, no system call cost beyond the vDSO read) for
 * timers that tolerate its tick. */
#ifndef NTBSOCK_UTIL_CLOCK_H
#define NTBSOCK_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline uint64_t clock_coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A cheap counter for "has much time passed since" hints (no unit to rely on): the time-stamp
 * counter on x86-64 (~10 ns to read against ~25 for the vDSO's clock here; at 1-4 GHz, a tick
 * is 0.25-1 ns, and its rate or a difference between CPUs only moves a hint), nanoseconds
 * elsewhere. */
static inline uint64_t clock_ticks(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#else
	return clock_mono_ns();
#endif
}

/* NOW - THEN for a stamp THEN that another thread or process may have taken after NOW was
 * read: such a stamp is age 0, never a wrap to an age of 2^64 - 1 ms. */
static inline uint64_t clock_age_ms(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

#endif
