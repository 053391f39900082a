/* SPDX-License-Identifier: MIT */
/* What preload's waits (poll, select, epoll and blocking calls) share: the readiness of one fd
 * carried in user space (pl_ready.c), the spin-then-sleep timing of a waiting call
 * (pl_spin.c), and the one wait over a set of pollfds that poll and select both run
 * (pl_poll.c). */
#ifndef NTBSOCK_PRELOAD_PL_READY_INT_H
#define NTBSOCK_PRELOAD_PL_READY_INT_H

#include "preload/pl_int.h"

#include <signal.h>

#define PL_REV_KERNEL (1u << 31) /* this fd's readiness comes from the kernel (pending connect) */

/* --- pl_ready.c ------------------------------------------------------------------------------- */

/* Readiness of S at FD in poll(2) bits, or PL_REV_KERNEL. ARM: ask the peers to ring us for
 * what is not ready (only right before a sleep); spinning and fast checks leave the peers'
 * sends free of doorbells. QUICK (a spinning round between two full looks): a connection polled
 * for input alone is looked at through tp_readable_hint() only. A look at output that finds no
 * room remembers it (pl_note_nospace()); room found afterwards bumps room_gen, the EPOLLOUT edge
 * of edge-triggered entries. */
unsigned pl_revents(struct pl_sock *s, int fd, bool arm, unsigned events, bool quick);

/* Is S (found at FD) carried in user space? Failed connects and listeners are kernel fds. */
bool pl_user_space(struct pl_sock *s);
/* FD's object, referenced, when it is carried in user space; else NULL (a kernel fd). A
 * listener's fd is told without taking a reference. */
struct pl_sock *pl_sock_get_user(int fd);

/* --- pl_spin.c: the timing of a waiting call ------------------------------------------------- */

/* When a wait that found NTB fds ready also looks at the kernel fds of the same call. */
struct pl_kturn {
	unsigned calls;
	int64_t tick; /* the coarse monotonic clock at the last look, in ms */
};

/* Is it the kernel fds' turn? */
bool pl_kernel_turn(struct pl_kturn *k);

/* Deadlines of one waiting call, read from the clock only once the call has to wait: a call
 * that finds something ready at once never reads the clock. Set .tmo (NULL: no timeout) and
 * zero the rest. */
struct pl_timing {
	const struct timespec *tmo; /* NULL: no timeout */
	bool init;
	int64_t start;
	int64_t deadline;           /* -1: none */
	int64_t spin_until;
	unsigned spins;
	unsigned step;              /* rounds between two clock reads (pl_spinning()) */
	int64_t check_ns;           /* the last one */
	bool spun_out;              /* the spin ran its budget out */
};

bool pl_zero_timeout(const struct timespec *tmo);

/* Nothing is ready: true while the spin budget (config spin_us, within the timeout) lasts: the
 * caller looks again without a syscall. Every PL_SPIN_ROUND rounds (every round once rounds
 * take over 1 µs) it reads the clock and yields the CPU, so a peer that shares this core can
 * run; *RET_KCHECK is then set: time to look at the kernel fds. */
bool pl_spinning(struct pl_timing *t, bool *ret_kcheck);

/* Sleep length for the real call: the time left, capped (at 1 ms with CAP_SHORT). */
int pl_sleep_ms(struct pl_timing *t, bool cap_short);
/* The same in ns, ending by the next recovery timer that the arming look before it found
 * (tp_arm_due_take(): a quick probe of data the link may have dropped); 0: do not sleep. */
int64_t pl_sleep_ns(struct pl_timing *t, bool cap_short);

/* Has the call's timeout passed? */
bool pl_timed_out(struct pl_timing *t);

/* Nanoseconds since the call first had to wait (0: it never did). */
int64_t pl_waited_ns(const struct pl_timing *t);

/* The wait of T ended (what it waited for came, or its time ran out): the thread's next waits
 * spin shorter after PL_SPIN_LOST_MAX waits in a row that spun their budget out and waited
 * long past it, and the full budget again after one whose event came within it. */
void pl_timing_done(const struct pl_timing *t);
#define PL_SPIN_LOST_MAX 8u
#define PL_SPIN_SHORT_US 5u

/* The signals of a wait that sleeps more than once. In the kernel a signal that comes while a
 * poll() sleeps ends it with EINTR; a wait here sleeps in pieces (a doorbell, a capped sleep)
 * and looks at its fds between them, where a signal would run its handler and the next sleep
 * go on to the timeout (CPython's testInterruptedSendtoTimeout waited its 5 s and failed
 * about one run in ten). So from its first sleep on, a wait holds the asynchronous signals
 * blocked (pl_sig_hold(); not SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT) and
 * sleeps with the mask it was called with (pl_sig_wait_mask(): MASK when the caller gave one
 * to ppoll(), pselect() or epoll_pwait(), else the mask it found): a signal that came
 * meanwhile ends the next sleep at once, with EINTR. pl_sig_release() puts the mask back
 * (errno kept). */
struct pl_sighold {
	sigset_t old;
	bool held;
};
void pl_sig_hold(struct pl_sighold *h);
const sigset_t *pl_sig_wait_mask(const struct pl_sighold *h, const sigset_t *mask);
void pl_sig_release(struct pl_sighold *h);

/* --- pl_poll.c, pl_epoll_wait.c -------------------------------------------------------------- */

/* The wait of poll/select over FDS, whose objects SOCKS include at least one user-space fd;
 * KFDS has room for NFDS + 1 entries. *RET_WAIT_NS (when not NULL): how long it waited, 0 when
 * it returned at once without reading the clock (for select's write-back of the time left). */
int pl_poll_run(struct pollfd *fds, nfds_t nfds, struct pl_sock **socks, struct pollfd *kfds,
		const struct timespec *tmo, const sigset_t *mask, int64_t *ret_wait_ns);

/* Would a wait on the epoll set of shadow EP report an event of its NTB fds now? (For poll on
 * an epoll fd and for nesting: the kernel calls a set readable while it holds an event.) */
bool pl_epoll_ready(struct pl_epoll *ep, bool arm);

/* How many NTB fds the shadow EP holds. */
int pl_epoll_size(struct pl_epoll *ep);

#endif
