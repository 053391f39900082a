// SPDX-License-Identifier: MIT
/* The spin-then-sleep of preload's waits (poll, select, epoll and the blocking calls): spin for
 * the configured budget yielding the CPU every few rounds, then sleep in the kernel capped, and
 * when a wait that found NTB fds ready looks at the kernel fds too. Beside it, the short hold
 * of a blocking send for room for its whole write (pl_room_spin()), which never sleeps: the
 * send's wait for room, if it comes to that, is the spin-then-sleep one (pl_wait()). */
#include "util/clock.h"
#include "preload/pl_ready_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#define PL_SLEEP_CAP_MS 100 /* bound on a sleep: covers a wake-up another waiter consumed */
/* The shortest sleep for a recovery timer (pl_sleep_ns()): the kernel's timer slack is 50 µs
 * anyway, and one that stays due (its lock busy) wakes the sleeper at most 20,000 times a
 * second */
#define PL_RECOVERY_MIN_NS 50000

/* How often a wait that finds NTB fds ready also asks the kernel about the kernel fds of the
 * same call (zero timeout): on every PL_KCHECK_EVERY-th such call, and at least once per tick
 * of the coarse clock (1-4 ms), so ready NTB fds never starve kernel fds; a call that finds
 * nothing ready always asks the kernel. The count is prime, so that a thread alternating
 * between a few poll or select calls (sets) still checks each of them in turn. (Each look is a
 * ppoll(): with 61, an iperf3 receiver's select() spent ~2 % of its time there. 127 still
 * looks at least twice in 256 calls, which test_pl_semantics asserts.) */
#define PL_KCHECK_EVERY 127u

/* Is it the kernel fds' turn? The coarse clock is read from the vDSO's data page: no syscall
 * and no TSC read. */
bool pl_kernel_turn(struct pl_kturn *k)
{
	int64_t now = (int64_t)clock_coarse_ms();
	if (++k->calls % PL_KCHECK_EVERY != 0 && now == k->tick)
		return false;
	k->tick = now;
	return true;
}

/* Spin rounds between two looks at the kernel fds, clock reads and yields of a spinning wait. */
#define PL_SPIN_ROUND 16u

bool pl_zero_timeout(const struct timespec *tmo)
{
	return tmo && !tmo->tv_sec && !tmo->tv_nsec;
}

/*
 * Spins lost in a row by this thread's waits: a wait that spun its whole budget out and then
 * waited on for longer than twice the budget counts one; one whose event came within twice
 * the budget (a full spin would have caught it, or nearly) sets it back to 0. From
 * PL_SPIN_LOST_MAX on, the thread's waits spin PL_SPIN_SHORT_US only: a server whose requests
 * come a think time apart (0.5 ms: a memcached with a client that pauses) spun 50 µs for
 * nothing after each answer, which was most of its CPU beside kernel TCP's (0.32-0.34 s in
 * 3 s against 0.12-0.18). A ping-pong's or a stream's waits, caught by their spin, keep it.
 * (The transport's own spin adapts the same way: TP_SPIN_LOST_MAX.)
 */
static __thread uint8_t pl_spin_lost __attribute__((tls_model("initial-exec")));

static void timing_init(struct pl_timing *t)
{
	if (t->init)
		return;
	int64_t now = pl_now_ns();
	uint32_t budget = pl_spin_us;

	if (pl_spin_lost >= PL_SPIN_LOST_MAX && budget > PL_SPIN_SHORT_US)
		budget = PL_SPIN_SHORT_US;
	t->init = true;
	t->start = now;
	t->deadline = t->tmo ? now + t->tmo->tv_sec * 1000000000LL + t->tmo->tv_nsec : -1;
	t->spin_until = pl_zero_timeout(t->tmo) ? 0 : now + (int64_t)budget * 1000;
	t->step = PL_SPIN_ROUND;
	t->check_ns = now;
	if (t->deadline >= 0 && t->spin_until > t->deadline)
		t->spin_until = t->deadline;
}

/*
 * The yields of a spinning wait, per thread across its waits. A yield lets a thread that shares
 * this CPU run (the library's helper answering the peer, a peer process pinned here); with none
 * it is a system call for nothing, and one costs ~1.2 us in some guests (PVM): a ping-pong's
 * waits of a few microseconds each did one, and a message that came meanwhile waited for it
 * (sockperf 64 B one-way 1.2 us against the transport's 0.37 on far vCPUs). So a yield that
 * let nobody run doubles the gap to the next one, up to PL_YIELD_GAP_MAX_NS; one that let
 * somebody run (it may want the CPU again soon: the helper answering the peer, SCHED_BATCH,
 * preempts nobody) makes the next check yield again, as every check did before. Whether
 * somebody ran is judged against the quickest yield this thread has seen (the system call
 * alone, which differs by orders of magnitude between guests and bare metal): longer than
 * twice that plus PL_YIELD_SLACK_NS.
 */
#define PL_YIELD_SLACK_NS   500
#define PL_YIELD_GAP_MIN_NS 2000
#define PL_YIELD_GAP_MAX_NS 100000

static __thread struct {
	int64_t last, gap, quickest;
} pl_yield __attribute__((tls_model("initial-exec")));

static void spin_yield(int64_t now)
{
	int64_t after, took;

	if (now - pl_yield.last < pl_yield.gap)
		return;
	sched_yield();
	after = pl_now_ns();
	took = after - now;
	if (!pl_yield.quickest || took < pl_yield.quickest)
		pl_yield.quickest = took;
	if (took > 2 * pl_yield.quickest + PL_YIELD_SLACK_NS)
		pl_yield.gap = 0;
	else if (pl_yield.gap < PL_YIELD_GAP_MIN_NS)
		pl_yield.gap = PL_YIELD_GAP_MIN_NS;
	else
		pl_yield.gap = 2 * pl_yield.gap < PL_YIELD_GAP_MAX_NS ? 2 * pl_yield.gap :
									 PL_YIELD_GAP_MAX_NS;
	pl_yield.last = after;
}

bool pl_spinning(struct pl_timing *t, bool *ret_kcheck)
{
	timing_init(t);
	*ret_kcheck = false;
	if (t->spin_until == 0)
		return false;
	if (++t->spins % t->step) {
		cpu_relax();
		return true;
	}
	*ret_kcheck = true;
	int64_t now = pl_now_ns();

	/* Rounds of over 1 µs (an epoll set of thousands of entries looks at each in a round,
	 * or reads its news word): the clock (and a yield when due: spin_yield()) every round
	 * from now on. Every 16th
	 * round, the spin outlasted its budget by up to 15 such rounds, and a thread that
	 * shares the CPU (the helper answering an Apply: SCHED_BATCH, it preempts nobody)
	 * waited as long, which made each set-up of a server holding 10,000 connections wait
	 * ~0.6 ms. */
	if (now - t->check_ns > (int64_t)t->step * 1000)
		t->step = 1;
	t->check_ns = now;
	if (now >= t->spin_until) {
		t->spin_until = 0;
		t->spun_out = true;
		return false;
	}
	spin_yield(now);
	return true;
}

int pl_sleep_ms(struct pl_timing *t, bool cap_short)
{
	timing_init(t);
	int ms = pl_ms_left(t->deadline);
	int cap = cap_short ? 1 : PL_SLEEP_CAP_MS;
	if (ms < 0 || ms > cap)
		ms = cap;
	return ms;
}

int64_t pl_sleep_ns(struct pl_timing *t, bool cap_short)
{
	int64_t ns = (int64_t)pl_sleep_ms(t, cap_short) * 1000000;
	uint64_t due = tp_arm_due_take();

	if (due && ns > 0) {
		int64_t left = (int64_t)due - pl_now_ns();

		if (left < PL_RECOVERY_MIN_NS)
			left = PL_RECOVERY_MIN_NS;
		if (left < ns)
			ns = left;
	}
	return ns;
}

void pl_sig_hold(struct pl_sighold *h)
{
	/* (the faults' signals stay open: blocked, a fault would kill the process instead of
	 * running the handler, mapguard's SIGBUS among them) */
	static const int sync_sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT };
	sigset_t set;

	if (h->held)
		return;
	sigfillset(&set);
	for (size_t i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		sigdelset(&set, sync_sigs[i]);
	h->held = pthread_sigmask(SIG_BLOCK, &set, &h->old) == 0;
}

const sigset_t *pl_sig_wait_mask(const struct pl_sighold *h, const sigset_t *mask)
{
	return mask ? mask : h->held ? &h->old : NULL;
}

void pl_sig_release(struct pl_sighold *h)
{
	int saved = errno;

	if (h->held)
		pthread_sigmask(SIG_SETMASK, &h->old, NULL);
	h->held = false;
	errno = saved;
}

void pl_timing_done(const struct pl_timing *t)
{
	if (!t->init || !pl_spin_us)
		return; /* (ready at the first look: no spin to judge) */
	if (!t->spun_out) {
		/* caught by the spin (no clock read: a ping-pong's waits end here) */
		if (pl_spin_lost)
			pl_spin_lost = 0;
		return;
	}
	int64_t waited = pl_now_ns() - t->start;

	if (waited <= 2 * (int64_t)pl_spin_us * 1000)
		pl_spin_lost = 0;
	else if (pl_spin_lost < PL_SPIN_LOST_MAX)
		pl_spin_lost++;
}

bool pl_timed_out(struct pl_timing *t)
{
	timing_init(t);
	return t->deadline >= 0 && pl_now_ns() >= t->deadline;
}

int64_t pl_waited_ns(const struct pl_timing *t)
{
	return t->init ? pl_now_ns() - t->start : 0;
}

/* How long a blocking send waits for room for a whole write before it cuts it: a receiver
 * that was descheduled (a loaded machine) needs longer than the spin budget to drain the ring,
 * and every cut costs it a second copy per read until the boundaries line up again. Past this,
 * the send cuts, fills the rings, and sleeps on the doorbell as always (no polling sleeper). */
#define PL_ROOM_WAIT_NS 1000000

/* A blocking send found too little room for its write: true after a pause (the caller tries
 * again) while the wait lasts: spinning for the budget (config spin_us) with a yield every 16
 * rounds, so a receiver sharing this core can drain the ring, then a yield every round until
 * PL_ROOM_WAIT_NS; false once that is spent. */
bool pl_room_spin(struct pl_spin *sp)
{
	if (!pl_spin_us || sp->until < 0)
		return false; /* (spent: stays spent for the rest of the call) */
	if (sp->until == 0) {
		int64_t now = pl_now_ns();
		sp->spin_end = now + (int64_t)pl_spin_us * 1000;
		sp->until = now + PL_ROOM_WAIT_NS;
	}
	if (sp->yielding || ++sp->rounds % 16 == 0) {
		int64_t now = pl_now_ns();
		/* Latched: a caller descheduled past the end before its first look (a loaded
		 * host) would otherwise get true again on the next 15 calls, and a send that
		 * alternates between two spins would never reach its wait and SO_SNDTIMEO. */
		if (now >= sp->until) {
			sp->until = -1;
			return false;
		}
		sp->yielding = now >= sp->spin_end;
		sched_yield();
		return true;
	}
	for (int i = 0; i < 8; i++)
		cpu_relax();
	return true;
}
