/* SPDX-License-Identifier: MIT */
/* Parking the library's own descriptors high (util/fdpark.h). */
#include "util/fdpark.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>

#include "util/rawsys.h"

#define PARK_SPAN 128 /* numbers recorded from the base up (a few are used) */

static _Atomic int g_base = -2;                       /* -2: not computed yet */
static _Atomic uint64_t g_bits[PARK_SPAN / 64];

int fd_park_base(void)
{
	/* relaxed: computed from the limit, the same value whichever thread computes it */
	int b = atomic_load_explicit(&g_base, memory_order_relaxed);

	if (b == -2) {
		struct rlimit rl;
		rlim_t lim = 1024;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < lim)
			lim = rl.rlim_cur;
		b = lim >= 128 ? (int)lim - 64 : -1;
		atomic_store_explicit(&g_base, b, memory_order_relaxed);
	}
	return b;
}

static void mark(int fd, bool on)
{
	int b = fd_park_base();

	if (b < 0 || fd < b || fd >= b + PARK_SPAN)
		return;
	unsigned i = (unsigned)(fd - b);
	uint64_t bit = 1ull << (i % 64u);

	/* relaxed: each bit is its descriptor's, set before the number is handed to anyone
	 * else in the library and cleared before it is closed */
	if (on)
		atomic_fetch_or_explicit(&g_bits[i / 64u], bit, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&g_bits[i / 64u], ~bit, memory_order_relaxed);
}

int fd_park(int fd)
{
	int b = fd_park_base();

	if (fd < 0 || b < 0)
		return fd;
	if (fd < b) {
		int nfd = raw_dupfd_cloexec(fd, b);

		if (nfd < 0)
			return fd; /* (nothing free up there: it stays where it is) */
		raw_close(fd);
		fd = nfd;
	}
	mark(fd, true);
	return fd;
}

int fd_dup_high(int fd)
{
	int b = fd_park_base(), nfd = b >= 0 ? raw_dupfd_cloexec(fd, b) : -1;

	return nfd >= 0 ? nfd : raw_dupfd_cloexec(fd, 3);
}

bool fd_parked(int fd)
{
	int b = atomic_load_explicit(&g_base, memory_order_relaxed);

	if (b < 0 || fd < b || fd >= b + PARK_SPAN)
		return false;
	unsigned i = (unsigned)(fd - b);

	return (atomic_load_explicit(&g_bits[i / 64u], memory_order_relaxed) >> (i % 64u)) & 1u;
}

int fd_parked_first(unsigned first, unsigned last)
{
	int b = atomic_load_explicit(&g_base, memory_order_relaxed);

	if (b < 0 || last < (unsigned)b)
		return -1;
	for (unsigned fd = first < (unsigned)b ? (unsigned)b : first;
	     fd <= last && fd < (unsigned)b + PARK_SPAN; fd++)
		if (fd_parked((int)fd))
			return (int)fd;
	return -1;
}

void fd_close_own(int fd)
{
	if (fd < 0)
		return;
	mark(fd, false);
	raw_close(fd);
}
