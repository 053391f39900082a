/* SPDX-License-Identifier: MIT */
/* The per-connection tx/rx locks: taking and releasing one is an inline locked instruction each
 * (no call, no owner or user-count bookkeeping as in pthread_mutex_t); a contended lock spins a
 * little, then sleeps on a process-private futex. */
#ifndef NTBSOCK_TRANSPORT_TP_MUTEX_H
#define NTBSOCK_TRANSPORT_TP_MUTEX_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include "util/compiler.h"

/* 0: free, 1: held, 2: held and a thread may sleep on it (the releaser must wake one). */
struct tp_mutex {
	_Atomic uint32_t v;
};

static inline void tp_mutex_init(struct tp_mutex *m)
{
	atomic_init(&m->v, 0);
}

/* 0 when taken, EBUSY when held (as pthread_mutex_trylock()). */
static inline int tp_mutex_trylock(struct tp_mutex *m)
{
	uint32_t free_v = 0;

	/* acquire: pairs with the release exchange in tp_mutex_unlock() */
	return atomic_compare_exchange_strong_explicit(&m->v, &free_v, 1, memory_order_acquire,
						       memory_order_relaxed) ? 0 : EBUSY;
}

void tp_mutex_lock_slow(struct tp_mutex *m);
void tp_mutex_wake(struct tp_mutex *m);

static inline void tp_mutex_lock(struct tp_mutex *m)
{
	if (unlikely(tp_mutex_trylock(m)))
		tp_mutex_lock_slow(m);
}

static inline void tp_mutex_unlock(struct tp_mutex *m)
{
	/* release: pairs with the acquiring exchanges in tp_mutex_trylock() and
	 * tp_mutex_lock_slow(); 2 means a thread may sleep in the futex: wake one */
	if (unlikely(atomic_exchange_explicit(&m->v, 0, memory_order_release) == 2))
		tp_mutex_wake(m);
}

#endif
