/* SPDX-License-Identifier: MIT */
/* The event doorbell (ntb_int.h: EVENT DOORBELL): a process of one side publishes the eventfd
 * its poll and epoll sleepers wait on; a ringer of the other side writes that eventfd itself,
 * through a duplicate it takes once with pidfd_getfd(2). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ntb/ntb_int.h"
#include "util/fdpark.h"
#include "util/proc.h"
#include "util/rawsys.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* One peer slot's duplicate: KEY names the publication it was taken for (the slot owner's
 * generation, high 32 bits, and the eventfd-id + 1); FD stays the same number for the link's
 * life (a new publication's duplicate is put in its place with dup3(), so a ringer that read
 * an old key writes an old, valid eventfd at worst, never a closed or reused number). BAD: a
 * publication that could not be taken (ring the doorbell, do not try again until it changes). */
struct ntb_ev_dup {
	_Atomic uint64_t key;
	_Atomic uint64_t bad;
	/* after a failure that may pass (no descriptor number free where the library keeps its
	 * own, out of memory): clock_coarse_ms() before which the doorbell is rung without trying
	 * again (each try is ~10 system calls and three /proc reads: a program holding 10,000
	 * sockets, where no number was free, spent them on every ring, and its echo rounds took
	 * 10x as long) */
	_Atomic uint64_t later_ms;
	_Atomic int fd;
	/* ringers between their look at KEY and the end of their write: a duplicate whose
	 * publication is gone is closed (ntb_event_sweep()) only once KEY is 0 and this is 0 */
	_Atomic unsigned users;
	pid_t pid; /* whose eventfd it is (under the cache's lock) */
};

struct ntb_ev_cache {
	pthread_mutex_t mu; /* taking a duplicate */
	struct ntb_ev_dup e[NTB_SIDE_SLOTS];
};

/* This kernel has no pidfd_getfd(2): every ring goes to the doorbell */
static _Atomic bool ev_refused;

/* Duplicates this process holds, over all links: each takes one of the library's parked
 * numbers (64 in all, util/fdpark.h), so at most NTB_EV_DUPS; past them, the doorbell. */
#define NTB_EV_DUPS 8
static _Atomic unsigned ev_dups;

static pthread_mutex_t evc_mu = PTHREAD_MUTEX_INITIALIZER;

void ntb_ev_cache_free(struct ntb_ev_cache *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < NTB_SIDE_SLOTS; i++) {
		int fd = atomic_load_explicit(&c->e[i].fd, memory_order_relaxed);

		if (fd >= 0) {
			fd_close_own(fd);
			atomic_fetch_sub_explicit(&ev_dups, 1, memory_order_relaxed);
		}
	}
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void ntb_event_atfork_child(struct ntb_link *link)
{
	struct ntb_ev_cache *c = atomic_load_explicit(&link->evc, memory_order_relaxed);

	pthread_mutex_init(&evc_mu, NULL);
	if (c)
		pthread_mutex_init(&c->mu, NULL);
}

static struct ntb_ev_cache *cache_get(struct ntb_link *link)
{
	/* acquire: pairs with the release store below (the table initialised before) */
	struct ntb_ev_cache *c = atomic_load_explicit(&link->evc, memory_order_acquire);

	if (likely(c))
		return c;
	pthread_mutex_lock(&evc_mu);
	c = atomic_load_explicit(&link->evc, memory_order_relaxed);
	if (!c && (c = calloc(1, sizeof(*c)))) {
		pthread_mutex_init(&c->mu, NULL);
		for (unsigned i = 0; i < NTB_SIDE_SLOTS; i++)
			atomic_init(&c->e[i].fd, -1);
		atomic_store_explicit(&link->evc, c, memory_order_release);
	}
	pthread_mutex_unlock(&evc_mu);
	return c;
}

/* The eventfd-id of descriptor FD of process PID (0: this one; /proc/PID/fdinfo), -1 when it
 * is no eventfd or the kernel does not show one. */
static long eventfd_id(pid_t pid, int fd)
{
	char path[64], buf[512];
	long id = -1;
	ssize_t n;
	int f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
	else
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = raw_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (f < 0)
		return -1;
	n = raw_read(f, buf, sizeof(buf) - 1);
	raw_close(f);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = strstr(buf, "\neventfd-id:");

	if (p)
		id = strtol(p + 12, NULL, 10);
	return id >= 0 && id < 0x7fffffff ? id : -1;
}

int ntb_event_publish(struct ntb_link *link, int efd)
{
	if (efd < 0)
		return -EBADF;
	int slot = link->slot; /* (read once: a release sets -1) */

	if (link->inspect || !link->ops->name || strcmp(link->ops->name, "shm") || slot < 0 ||
	    !ntb_side_owns_slot(link))
		return -ENOTSUP;
	long id = eventfd_id(0, efd);

	if (id < 0)
		return -ENOTSUP;
	/* the fd first, then (release) the id: a ringer loads the id (acquire), then the fd */
	atomic_store_explicit(&link->local->slots[slot].ev_fd, (uint32_t)efd + 1u,
			      memory_order_relaxed);
	atomic_store_explicit(&link->ctrl_out->ev_id[slot], (uint32_t)id + 1u,
			      memory_order_release);
	return slot;
}

bool ntb_event_peer_rings(const struct ntb_link *link)
{
	/* relaxed: a hint (a peer that stopped ringing eventfds gets the doorbell: the bit is
	 * read again at each request) */
	return !link->inspect &&
	       (atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed) &
		NTB_CAP_EV_RING);
}

/* Under C->mu: take the duplicate of the eventfd published in peer slot SLOT for KEY. 0, or
 * -errno (the publication is not what it says, or is gone: -ESTALE, -ESRCH, -EPERM... not
 * tried again for this publication; -ENOENT, -EMFILE: tried again at the next ring). Nothing
 * but an eventfd is ever taken: the file's eventfd-id is read from the owner's /proc entry
 * first (closing a duplicate of another file would drop this process's record locks on it). */
static int dup_take(struct ntb_link *link, struct ntb_ev_cache *c, unsigned slot, uint64_t key)
{
	struct ntb_side_slot *s = &link->peer_local->slots[slot];
	uint64_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
	uint64_t start = atomic_load_explicit(&s->starttime, memory_order_relaxed);
	uint32_t fd1 = atomic_load_explicit(&s->ev_fd, memory_order_relaxed);
	pid_t pid = (pid_t)(owner & 0xffffffffu);
	int cur = atomic_load_explicit(&c->e[slot].fd, memory_order_relaxed);
	int pfd, nfd, rc = 0;

	if (!owner || !fd1 || (owner >> 32) != (key >> 32))
		return -ENOENT;
	/* (the fd word read after the owner: a slot released and claimed again meanwhile) */
	if (atomic_load_explicit(&s->owner, memory_order_acquire) != owner)
		return -ENOENT;
	if (!start || pid <= 0)
		return -ESRCH; /* (no start time to tell the claimer from a later process) */
	if (cur < 0 && atomic_load_explicit(&ev_dups, memory_order_relaxed) >= NTB_EV_DUPS)
		return -EMFILE;
	pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return -errno;
	/* the process the pidfd names claimed the slot (a dead claimer's pid given to another
	 * process: another start time), and its file at that number is the eventfd published */
	if (proc_starttime(pid, NULL) != start) {
		raw_close(pfd);
		return -ESRCH;
	}
	if (eventfd_id(pid, (int)fd1 - 1) != (long)(key & 0xffffffffu) - 1) {
		raw_close(pfd);
		return -ESTALE;
	}
	nfd = (int)syscall(SYS_pidfd_getfd, pfd, (int)fd1 - 1, 0);
	rc = nfd < 0 ? -errno : 0;
	raw_close(pfd);
	if (rc) {
		/* (EPERM: that process only, a setuid one, or all under a seccomp filter: its
		 * publication is not tried again, the next one is, once) */
		if (rc == -ENOSYS)
			atomic_store_explicit(&ev_refused, true, memory_order_relaxed);
		return rc;
	}
	/* again on what we hold (the number may have been closed and reused in between) */
	if (eventfd_id(0, nfd) != (long)(key & 0xffffffffu) - 1) {
		raw_close(nfd);
		return -ESTALE;
	}
	if (cur >= 0) {
		rc = raw_dup3(nfd, cur, O_CLOEXEC) < 0 ? -errno : 0;
		raw_close(nfd);
		if (!rc)
			c->e[slot].pid = pid;
		return rc;
	}
	cur = fd_park(nfd);
	if (!fd_parked(cur)) {
		/* (among the program's numbers, a close loop of the program could take it) */
		raw_close(cur);
		return -EMFILE;
	}
	atomic_fetch_add_explicit(&ev_dups, 1, memory_order_relaxed);
	atomic_store_explicit(&c->e[slot].fd, cur, memory_order_relaxed);
	c->e[slot].pid = pid;
	return 0;
}

/* Write the duplicate E holds while it is the one for KEY: 0, 1 (not, or no more: take it
 * anew), or -errno. */
static int dup_write(struct ntb_ev_dup *e, uint64_t key)
{
	static const uint64_t one = 1;
	int rc = 1;

	/* seq_cst, both: a Dekker pair with ntb_event_sweep() (key cleared, then users read):
	 * either the sweep waits for this write, or this ringer sees the key gone */
	atomic_fetch_add_explicit(&e->users, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&e->key, memory_order_seq_cst) == key) {
		int fd = atomic_load_explicit(&e->fd, memory_order_relaxed);

		rc = raw_write(fd, &one, sizeof(one)) == sizeof(one) || errno == EAGAIN ? 0 : -errno;
	}
	atomic_fetch_sub_explicit(&e->users, 1, memory_order_release);
	return rc;
}

/* The key of what peer slot SLOT publishes now (0: nothing). */
static uint64_t slot_key(struct ntb_link *link, unsigned slot)
{
	/* acquire: pairs with the release store in ntb_event_publish() (its fd before) */
	uint32_t id1 = atomic_load_explicit(&link->ctrl_in->ev_id[slot], memory_order_acquire);
	uint64_t owner = atomic_load_explicit(&link->peer_local->slots[slot].owner,
					      memory_order_relaxed);

	return id1 && owner ? (owner >> 32) << 32 | id1 : 0;
}

void ntb_event_sweep(struct ntb_link *link)
{
	/* acquire: as cache_get() */
	struct ntb_ev_cache *c = atomic_load_explicit(&link->evc, memory_order_acquire);

	if (!c || link->inspect || pthread_mutex_trylock(&c->mu))
		return;
	for (unsigned i = 0; i < NTB_SIDE_SLOTS; i++) {
		struct ntb_ev_dup *e = &c->e[i];
		int fd = atomic_load_explicit(&e->fd, memory_order_relaxed);
		uint64_t key = atomic_load_explicit(&e->key, memory_order_relaxed);

		/* (a process that exited leaves its publication until its slot is reaped) */
		if (fd < 0 || (key && key == slot_key(link, i) &&
			       (kill(e->pid, 0) == 0 || errno != ESRCH)))
			continue;
		/* its publication is gone (the process closed the link, exited, published
		 * another eventfd): no ringer may be writing it when it closes */
		atomic_store_explicit(&e->key, 0, memory_order_seq_cst);
		while (atomic_load_explicit(&e->users, memory_order_seq_cst))
			sched_yield(); /* (a write of 8 bytes) */
		atomic_store_explicit(&e->fd, -1, memory_order_relaxed);
		fd_close_own(fd);
		atomic_fetch_sub_explicit(&ev_dups, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->mu);
}

int ntb_peer_event_ring(struct ntb_link *link, unsigned slot)
{
	if (link->inspect || slot >= NTB_SIDE_SLOTS || !link->peer_local)
		return -ENOTSUP;
	if (ntb_ctrl_cut(link))
		return 0; /* rung into the void, as the doorbell */
	uint64_t key = slot_key(link, slot);
	struct ntb_ev_cache *c;
	int rc;

	if (!key || !(c = cache_get(link)))
		return -ENOENT;
	/* (the duplicate in place before its key: dup_write() reads the key again, seq_cst) */
	if (likely(atomic_load_explicit(&c->e[slot].key, memory_order_acquire) == key) &&
	    (rc = dup_write(&c->e[slot], key)) <= 0)
		return rc;
	if (atomic_load_explicit(&c->e[slot].bad, memory_order_relaxed) == key ||
	    atomic_load_explicit(&ev_refused, memory_order_relaxed))
		return -ESTALE;
	/* relaxed: a hint, written under the lock below */
	uint64_t later = atomic_load_explicit(&c->e[slot].later_ms, memory_order_relaxed);

	if (later && clock_coarse_ms() < later)
		return -EAGAIN;
	/* (a ringer on a shm link only: the peer's pids are this host's) */
	if (!link->ops->name || strcmp(link->ops->name, "shm"))
		return -ENOTSUP;
	pthread_mutex_lock(&c->mu);
	rc = 0;
	if (atomic_load_explicit(&c->e[slot].key, memory_order_relaxed) != key) {
		rc = dup_take(link, c, slot, key);
		if (!rc)
			atomic_store_explicit(&c->e[slot].key, key, memory_order_release);
		else if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM)
			atomic_store_explicit(&c->e[slot].later_ms,
					      clock_coarse_ms() + NTB_EV_RETRY_MS, memory_order_relaxed);
		else if (rc != -ENOENT)
			atomic_store_explicit(&c->e[slot].bad, key, memory_order_relaxed);
	}
	/* (under the lock: no sweep closes it meanwhile) */
	if (!rc)
		rc = dup_write(&c->e[slot], key) > 0 ? -ESTALE : rc;
	pthread_mutex_unlock(&c->mu);
	return rc;
}
