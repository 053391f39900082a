// SPDX-License-Identifier: MIT
/* Guarded shared mappings: a SIGBUS inside a registered mapping is absorbed by mapping zero
 * pages over it; anything else goes to the program's previous SIGBUS disposition. */
#include "util/mapguard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Who writes / who reads:
 *   state  — mapguard_add() claims FREE→BUSY (CAS), fills base/len, then publishes ACTIVE
 *            (release); mapguard_remove() stores FREE; the handler reads it (acquire).
 *   base, len — written only while BUSY by the claimer; read by the handler after ACTIVE.
 *   lost   — INTACT until a fault; the handler that wins the CAS INTACT→REPLACING maps the
 *            zero pages and stores REPLACED; other faulting threads only return (their access
 *            re-executes, and faults again until the winner is done). Read by mapguard_lost().
 *            mapguard_add() resets it while BUSY. */
enum { MG_FREE = 0, MG_BUSY = 1, MG_ACTIVE = 2 };
enum { MG_INTACT = 0, MG_REPLACING = 1, MG_REPLACED = 2 };

struct mg_entry {
	_Atomic int       state;
	_Atomic uintptr_t base;
	_Atomic size_t    len;
	_Atomic int       lost;
};

static struct mg_entry mg_tab[MAPGUARD_MAX];
static struct sigaction mg_old;
static _Atomic unsigned long mg_faults;
static pthread_once_t mg_once = PTHREAD_ONCE_INIT;
static int mg_install_rc;

static void mg_chain(int sig, siginfo_t *info, void *ctx)
{
	if (mg_old.sa_flags & SA_SIGINFO) {
		if (mg_old.sa_sigaction)
			mg_old.sa_sigaction(sig, info, ctx);
		return;
	}
	if (mg_old.sa_handler == SIG_DFL || mg_old.sa_handler == SIG_IGN) {
		/* Back to the default; returning re-executes the faulting access, which now
		 * kills the process exactly as it would have without us. */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		sigaction(SIGBUS, &dfl, NULL);
		return;
	}
	mg_old.sa_handler(sig);
}

static void mg_handler(int sig, siginfo_t *info, void *ctx)
{
	uintptr_t addr = (uintptr_t)info->si_addr;
	int saved = errno;

	for (int i = 0; i < MAPGUARD_MAX; i++) {
		struct mg_entry *e = &mg_tab[i];
		/* Acquire: pairs with the release store of MG_ACTIVE in mapguard_add(). */
		if (atomic_load_explicit(&e->state, memory_order_acquire) != MG_ACTIVE)
			continue;
		uintptr_t base = atomic_load_explicit(&e->base, memory_order_relaxed);
		size_t len = atomic_load_explicit(&e->len, memory_order_relaxed);
		if (addr < base || addr - base >= len)
			continue;
		/* One replacement per mapping: a second thread that faulted on the old pages must
		 * not map zeros again over what the first one's thread wrote since (a lock it took
		 * in a host table). Losers return: the access re-executes, on the new pages or
		 * (winner not done yet) into this handler again. */
		int expect = MG_INTACT;
		if (!atomic_compare_exchange_strong_explicit(&e->lost, &expect, MG_REPLACING,
							     memory_order_relaxed,
							     memory_order_relaxed)) {
			errno = saved;
			return;
		}
		/* The raw system call (async-signal-safe) rather than mmap(): a sanitizer's mmap
		 * interceptor would record the new pages as written by this thread, and TSan then
		 * reports every later access of another thread as a race with it. The pages change
		 * under every thread at once, like memory another process writes. */
		long p = syscall(SYS_mmap, base, len, PROT_READ | PROT_WRITE,
				 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == (long)base) {
			atomic_fetch_add_explicit(&mg_faults, 1, memory_order_relaxed);
			/* Release: pairs with the acquire load in mapguard_lost(). */
			atomic_store_explicit(&e->lost, MG_REPLACED, memory_order_release);
			errno = saved;
			return;
		}
		atomic_store_explicit(&e->lost, MG_INTACT, memory_order_relaxed);
		break;
	}
	errno = saved;
	mg_chain(sig, info, ctx);
}

static void mg_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = mg_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &mg_old) < 0)
		mg_install_rc = -errno;
}

int mapguard_add(void *base, size_t len)
{
	pthread_once(&mg_once, mg_install);
	if (mg_install_rc)
		return mg_install_rc;
	for (int i = 0; i < MAPGUARD_MAX; i++) {
		struct mg_entry *e = &mg_tab[i];
		int expect = MG_FREE;
		if (!atomic_compare_exchange_strong_explicit(&e->state, &expect, MG_BUSY,
							     memory_order_relaxed,
							     memory_order_relaxed))
			continue;
		atomic_store_explicit(&e->base, (uintptr_t)base, memory_order_relaxed);
		atomic_store_explicit(&e->len, len, memory_order_relaxed);
		atomic_store_explicit(&e->lost, MG_INTACT, memory_order_relaxed);
		/* Release: pairs with the acquire load in mg_handler() and mapguard_lost(). */
		atomic_store_explicit(&e->state, MG_ACTIVE, memory_order_release);
		return 0;
	}
	return -ENOSPC;
}

static struct mg_entry *mg_find(const void *base)
{
	if (!base)
		return NULL;
	for (int i = 0; i < MAPGUARD_MAX; i++) {
		struct mg_entry *e = &mg_tab[i];
		/* Acquire: pairs with the release store in mapguard_add(). */
		if (atomic_load_explicit(&e->state, memory_order_acquire) == MG_ACTIVE &&
		    atomic_load_explicit(&e->base, memory_order_relaxed) == (uintptr_t)base)
			return e;
	}
	return NULL;
}

void mapguard_remove(void *base)
{
	struct mg_entry *e = mg_find(base);
	/* release: the entry's last use before it is free; pairs with the acquire loads of
	 * state in the lookups and the compare-and-exchange that takes a free entry */
	if (e)
		atomic_store_explicit(&e->state, MG_FREE, memory_order_release);
}

bool mapguard_lost(const void *base)
{
	/* Cheap in the common case: nothing ever faulted. */
	if (!atomic_load_explicit(&mg_faults, memory_order_relaxed))
		return false;
	struct mg_entry *e = mg_find(base);
	/* Acquire: pairs with the release store of MG_REPLACED in mg_handler(). (REPLACING
	 * counts as lost too: the zero pages are on their way.) */
	return e && atomic_load_explicit(&e->lost, memory_order_acquire) != MG_INTACT;
}

unsigned long mapguard_faults(void)
{
	return atomic_load_explicit(&mg_faults, memory_order_relaxed);
}
