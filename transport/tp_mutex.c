/* SPDX-License-Identifier: MIT */
/* Contended side of struct tp_mutex (tp_mutex.h): spin briefly, then sleep on the futex. */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/tp_mutex.h"

#define TP_MUTEX_SPINS 100 /* rounds of looking before sleeping: critical sections are short */

static void futex_op(struct tp_mutex *m, int op, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)&m->v, op, val, NULL, NULL, 0);
}

void tp_mutex_lock_slow(struct tp_mutex *m)
{
	for (int i = 0; i < TP_MUTEX_SPINS; i++) {
		cpu_relax();
		if (atomic_load_explicit(&m->v, memory_order_relaxed) == 0 && tp_mutex_trylock(m) == 0)
			return;
	}
	/* Mark the lock contended and sleep while it is held. Taking it with the exchange to 2
	 * (not 1) is conservative: the next unlock may wake a thread that need not wake, never
	 * fail to wake one that sleeps. acquire: pairs with the release in tp_mutex_unlock(). */
	while (atomic_exchange_explicit(&m->v, 2, memory_order_acquire) != 0)
		futex_op(m, FUTEX_WAIT_PRIVATE, 2); /* returns at once unless still 2 */
}

void tp_mutex_wake(struct tp_mutex *m)
{
	futex_op(m, FUTEX_WAKE_PRIVATE, 1);
}
