// SPDX-License-Identifier: MIT
/* poll, ppoll and their fortified forms over NTB fds mixed with kernel fds: NTB readiness is
 * read in user space (pl_revents()); when nothing is ready the thread spins for the configured
 * budget, then sleeps in the real call with the transport's event fd added, and re-checks. */
#include "preload/pl_ready_int.h"

#include <stdlib.h>
#include <string.h>

static __thread struct pl_kturn pl_kturn __attribute__((tls_model("initial-exec")));

/* pl_poll_run(): a first scan in full on every PL_FULL_EVERY-th call of the thread, else quick. */
#define PL_FULL_EVERY 32u
static __thread unsigned pl_full_turn __attribute__((tls_model("initial-exec")));

/* What one scan found besides the ready count. */
struct pl_scan {
	int nkernel;    /* fds the kernel answers for */
	bool ep_kernel; /* one of them is an epoll set that may hold our event fd */
};

/* One pass over FDS: NTB readiness into fds[].revents, the rest copied into KFDS for the
 * kernel (our fds there as -1). ARM: see pl_revents(). Returns how many fds are ready. */
static int poll_scan(struct pollfd *fds, nfds_t nfds, struct pl_sock **socks, struct pollfd *kfds,
		     bool arm, bool quick, struct pl_scan *ret_scan)
{
	int nready = 0;

	ret_scan->nkernel = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		kfds[i] = fds[i];
		kfds[i].revents = 0;
		fds[i].revents = 0;
		if (!socks[i]) {
			ret_scan->nkernel += fds[i].fd >= 0;
			continue;
		}
		unsigned rev = pl_revents(socks[i], fds[i].fd, arm, (unsigned)fds[i].events,
					    quick);
		if (rev & PL_REV_KERNEL) {
			ret_scan->nkernel++;
			ret_scan->ep_kernel |= socks[i]->kind == PL_EPOLL;
			continue; /* the kernel answers for it (pending connect, epoll's kernel side) */
		}
		kfds[i].fd = -1;
		fds[i].revents = (short)(rev & ((unsigned)fds[i].events | POLLERR | POLLHUP));
		if (fds[i].revents)
			nready++;
	}
	return nready;
}

/* Ask the kernel about the kernel fds of KFDS (plus EVFD when >= 0), waiting at most NS, and
 * merge its answers into FDS. Returns the number of fds it made ready, or -1 (errno). */
static int poll_kernel(struct pollfd *fds, nfds_t nfds, struct pl_sock **socks,
		       struct pollfd *kfds, int evfd, int64_t ns, const sigset_t *mask)
{
	nfds_t kn = nfds;
	int nready = 0;

	if (evfd >= 0) {
		kfds[nfds].fd = evfd;
		kfds[nfds].events = POLLIN;
		kfds[nfds].revents = 0;
		kn++;
	}
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
	int r = pl_real.ppoll(kfds, kn, &ts, mask);
	if (r < 0)
		return -1;
	for (nfds_t i = 0; r > 0 && i < nfds; i++) {
		if (kfds[i].fd < 0 || !kfds[i].revents)
			continue;
		fds[i].revents = kfds[i].revents;
		if (socks[i] && socks[i]->kind == PL_CONN) {
			/* A pending connect completed: its readiness is now NTB's. */
			unsigned rev = pl_revents(socks[i], fds[i].fd, false,
						    (unsigned)fds[i].events, false);
			if (!(rev & PL_REV_KERNEL))
				fds[i].revents = (short)(rev & ((unsigned)fds[i].events |
								POLLERR | POLLHUP));
		}
		if (fds[i].revents)
			nready++;
	}
	return nready;
}

/* Look up the fds of FDS into SOCKS (references; NULL for kernel fds). True when one of them
 * is carried in user space. */
static bool poll_lookup(const struct pollfd *fds, nfds_t nfds, struct pl_sock **socks)
{
	bool any = false;

	for (nfds_t i = 0; i < nfds; i++) {
		socks[i] = pl_sock_get_user(fds[i].fd);
		any |= socks[i] != NULL;
	}
	return any;
}

/* Before asking the kernel about fds of which one is an epoll set that may hold the
 * transport's event fd (EP_KERNEL): consume the event fd, whose unconsumed count would make that
 * set look readable. */
static void ack_for_epoll(bool ep_kernel)
{
	if (ep_kernel) {
		PL_ENTER();
		tp_event_ack();
		PL_LEAVE();
	}
}

int pl_poll_run(struct pollfd *fds, nfds_t nfds, struct pl_sock **socks, struct pollfd *kfds,
		    const struct timespec *tmo, const sigset_t *mask, int64_t *ret_wait_ns)
{
	struct pl_timing tm = { .tmo = tmo };
	struct pl_sighold sh = { .held = false };
	/* Quick looks (pl_revents()) answer an input-only NTB fd from tp_readable_hint() alone:
	 * a quiet connection beside a busy one (iperf3's control socket beside its data socket)
	 * then costs no full look per call. "Not ready" stands only with a full look, so a quick
	 * first scan that finds nothing is repeated in full at once, and every PL_FULL_EVERY-th
	 * call starts with a full scan: what the hint does not tell (a reset, a lost peer, a
	 * Retry's timer) waits at most that many calls. */
	bool quick = ++pl_full_turn % PL_FULL_EVERY != 0;
	int ret = 0;

	for (;;) {
		struct pl_scan sc = { 0 };
		bool kcheck = false;
		int nready = poll_scan(fds, nfds, socks, kfds, false, quick, &sc);

		if (!nready && quick && !tm.init) {
			quick = false; /* the first scan: nothing ready, so look in full */
			continue;
		}

		if (nready) {
			/* The fast path: no clock, no syscall, unless it is the kernel fds' turn. */
			if (sc.nkernel == 0 || !pl_kernel_turn(&pl_kturn)) {
				ret = nready;
				break;
			}
			ack_for_epoll(sc.ep_kernel);
			int r = poll_kernel(fds, nfds, socks, kfds, -1, 0,
					    pl_sig_wait_mask(&sh, mask));
			ret = nready + (r > 0 ? r : 0);
			break;
		}
		if (pl_spinning(&tm, &kcheck)) {
			quick = !kcheck;
			if (!kcheck || sc.nkernel == 0)
				continue;
			ack_for_epoll(sc.ep_kernel);
			int r = poll_kernel(fds, nfds, socks, kfds, -1, 0,
					    pl_sig_wait_mask(&sh, mask));
			if (r != 0) {
				ret = r;
				break;
			}
			continue;
		}
		if (pl_zero_timeout(tmo)) {
			/* A check, not a wait: no arming, no event fd. */
			ack_for_epoll(sc.ep_kernel);
			ret = sc.nkernel ? poll_kernel(fds, nfds, socks, kfds, -1, 0,
						       pl_sig_wait_mask(&sh, mask)) : 0;
			break;
		}
		/* About to sleep: consume the event fd, then look again arming the doorbells, so a
		 * doorbell after this point makes the event fd readable and ends the sleep. From
		 * here on a signal ends the wait (pl_sig_hold()). */
		pl_sig_hold(&sh);
		PL_ENTER();
		int evfd = tp_event_fd();
		tp_event_ack();
		PL_LEAVE();
		(void)tp_arm_due_take(); /* (what the look below finds) */
		nready = poll_scan(fds, nfds, socks, kfds, true, false, &sc);
		int64_t ns = nready ? 0 : pl_sleep_ns(&tm, evfd < 0);
		if (nready && sc.nkernel == 0) {
			ret = nready;
			break;
		}
		int r = poll_kernel(fds, nfds, socks, kfds, ns ? evfd : -1, ns,
				    pl_sig_wait_mask(&sh, mask));
		if (r < 0) {
			ret = nready ? nready : -1;
			break;
		}
		if (nready + r > 0) {
			ret = nready + r;
			break;
		}
		if (pl_timed_out(&tm)) {
			ret = 0;
			break;
		}
	}
	pl_sig_release(&sh);
	pl_timing_done(&tm);
	if (ret_wait_ns)
		*ret_wait_ns = pl_waited_ns(&tm);
	return ret;
}

int pl_poll_impl(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		 const sigset_t *mask)
{
	struct pl_sock *sstack[32], **socks = sstack;
	struct pollfd kstack[33], *kfds = kstack;
	int ret;

	if (nfds > 32) {
		socks = calloc(nfds, sizeof(*socks));
		kfds = calloc(nfds + 1, sizeof(*kfds));
		if (!socks || !kfds) {
			free(socks);
			free(kfds);
			return pl_real.ppoll(fds, nfds, tmo, mask);
		}
	}
	if (poll_lookup(fds, nfds, socks))
		ret = pl_poll_run(fds, nfds, socks, kfds, tmo, mask, NULL);
	else
		ret = pl_real.ppoll(fds, nfds, tmo, mask);
	for (nfds_t i = 0; i < nfds; i++)
		pl_sock_put(socks[i]);
	if (socks != sstack) {
		free(socks);
		free(kfds);
	}
	return ret;
}

static bool poll_has_ours(struct pollfd *fds, nfds_t nfds)
{
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0 || !pl_active())
		return false;
	(void)fds;
	(void)nfds;
	return true;
}

NTB_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	if (!poll_has_ours(fds, nfds))
		return pl_real.poll(fds, nfds, timeout);
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
	return pl_poll_impl(fds, nfds, timeout < 0 ? NULL : &ts, NULL);
}

NTB_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		     const sigset_t *mask)
{
	if (!poll_has_ours(fds, nfds))
		return pl_real.ppoll(fds, nfds, tmo, mask);
	return pl_poll_impl(fds, nfds, tmo, mask);
}

NTB_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		abort();
	return poll(fds, nfds, timeout);
}

NTB_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
			   const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		abort();
	return ppoll(fds, nfds, tmo, mask);
}
