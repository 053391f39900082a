// SPDX-License-Identifier: MIT
/* Host-wide table of connections that stayed TCP (a shared file of fixed slots, not tied to
 * any link): written by preload/ at connect/accept/close, read by `ntbsock stat`. */
#include "transport/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#define TCPSTAT_MAGIC   0x31544350544e4c55ULL  /* any value a foreign file is unlikely to hold */
#define TCPSTAT_VERSION 1u
#define TCPSTAT_SLOTS   TP_TCPSTAT_MAX

/* One slot. Claimed by CAS of OWNER 0 → pid; GEN counts claims so that a reader copying the
 * plain fields can tell the slot was freed and reused meanwhile (seqlock-like). */
struct tcpstat_slot {
	_Atomic int32_t owner;         /* pid of the registering process; 0 free */
	_Atomic uint32_t gen;          /* odd while being filled, even when VALID or free */
	_Atomic uint32_t valid;        /* 1 once the fields below are complete */
	int32_t fd;
	uint64_t ino;                  /* socket inode, to tell a reused fd number */
	uint8_t local[28], remote[28]; /* sockaddr_in / sockaddr_in6 (family 0: unknown) */
	char reason[TP_TCPSTAT_REASON];
};

struct tcpstat_file {
	_Atomic uint64_t magic;        /* stored last by the creator (release), see open_map */
	uint32_t version, slots, slot_size, pad;
	struct tcpstat_slot slot[TCPSTAT_SLOTS];
};

static _Atomic(struct tcpstat_file *) writer_map; /* this process's mapping, once made */

static bool pid_dead(int32_t pid)
{
	return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH;
}

/* Map PATH (creating it race-free when CREATE). NULL on any problem: a foreign, short or
 * not-yet-initialised file is skipped, never trusted. */
static struct tcpstat_file *open_map(const char *path, bool create)
{
	struct tcpstat_file *f;
	struct stat st;
	bool mine = false;
	int fd = -1;

	if (create) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			mine = true;
			if (ftruncate(fd, sizeof(*f)) < 0) {
				close(fd);
				unlink(path);
				return NULL;
			}
		}
	}
	if (fd < 0)
		fd = open(path, (create ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(*f) ||
	    (st.st_uid != geteuid() && geteuid() != 0)) {
		close(fd);
		return NULL;
	}
	f = mmap(NULL, sizeof(*f), create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return NULL;
	if (mine) {
		f->version = TCPSTAT_VERSION;
		f->slots = TCPSTAT_SLOTS;
		f->slot_size = sizeof(f->slot[0]);
		/* Pairs with the acquire load below in other processes: header complete. */
		atomic_store_explicit(&f->magic, TCPSTAT_MAGIC, memory_order_release);
	}
	/* Pairs with the creator's release store above. */
	if (atomic_load_explicit(&f->magic, memory_order_acquire) != TCPSTAT_MAGIC ||
	    f->version != TCPSTAT_VERSION || f->slots != TCPSTAT_SLOTS ||
	    f->slot_size != sizeof(f->slot[0])) {
		munmap(f, sizeof(*f));
		return NULL;
	}
	return f;
}

static struct tcpstat_file *writer(const char *path)
{
	struct tcpstat_file *f = atomic_load_explicit(&writer_map, memory_order_acquire);
	struct tcpstat_file *expect = NULL;

	if (f)
		return f;
	f = open_map(path, true);
	if (!f)
		return NULL;
	/* Publish our mapping (release pairs with the acquire load above); a racing thread that
	 * won keeps its own and we drop ours. */
	if (!atomic_compare_exchange_strong_explicit(&writer_map, &expect, f, memory_order_acq_rel,
						     memory_order_acquire)) {
		munmap(f, sizeof(*f));
		f = expect;
	}
	return f;
}

static void copy_addr(uint8_t dst[28], const struct sockaddr *sa)
{
	memset(dst, 0, 28);
	if (!sa)
		return;
	if (sa->sa_family == AF_INET)
		memcpy(dst, sa, 16);
	else if (sa->sa_family == AF_INET6)
		memcpy(dst, sa, 28);
}

int tp_tcpstat_add(const char *path, int pid, int fd, uint64_t ino, const struct sockaddr *l,
		   const struct sockaddr *r, const char *reason)
{
	struct tcpstat_file *f = writer(path ? path : TP_TCPSTAT_PATH);

	if (!f)
		return -ENOENT;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < TCPSTAT_SLOTS; i++) {
			struct tcpstat_slot *s = &f->slot[i];
			int32_t free_ = 0;
			int32_t o = atomic_load_explicit(&s->owner, memory_order_relaxed);

			if (o != 0) {
				/* Second pass: reap slots of dead processes. */
				if (pass == 0 || !pid_dead(o))
					continue;
				atomic_store_explicit(&s->valid, 0, memory_order_relaxed);
				/* Release pairs with the CAS acquire of the next claimer. */
				atomic_compare_exchange_strong_explicit(&s->owner, &o, 0,
					memory_order_release, memory_order_relaxed);
			}
			/* Acquire pairs with the release store freeing the slot (tp_tcpstat_del). */
			if (!atomic_compare_exchange_strong_explicit(&s->owner, &free_, pid,
					memory_order_acquire, memory_order_relaxed))
				continue;
			/* GEN odd while filling; pairs with the readers' loads in tp_tcpstat_list. */
			atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
			atomic_thread_fence(memory_order_release);
			s->fd = fd;
			s->ino = ino;
			copy_addr(s->local, l);
			copy_addr(s->remote, r);
			memset(s->reason, 0, sizeof(s->reason));
			if (reason)
				strncpy(s->reason, reason, sizeof(s->reason) - 1);
			atomic_fetch_add_explicit(&s->gen, 1, memory_order_release);
			atomic_store_explicit(&s->valid, 1, memory_order_release);
			return i;
		}
	}
	return -ENOSPC;
}

void tp_tcpstat_del(int id, int pid)
{
	struct tcpstat_file *f = atomic_load_explicit(&writer_map, memory_order_acquire);
	int32_t o = pid;

	if (!f || id < 0 || id >= TCPSTAT_SLOTS)
		return;
	if (atomic_load_explicit(&f->slot[id].owner, memory_order_relaxed) != pid)
		return;
	atomic_store_explicit(&f->slot[id].valid, 0, memory_order_relaxed);
	/* Release pairs with the claimer's acquire CAS: our stores are done before reuse. */
	atomic_compare_exchange_strong_explicit(&f->slot[id].owner, &o, 0, memory_order_release,
						memory_order_relaxed);
}

/* Whether /proc says PID's FD is still the socket with inode INO (true when unknowable). */
static bool fd_still_there(int32_t pid, int32_t fd, uint64_t ino)
{
	char p[64];
	struct stat st;

	snprintf(p, sizeof(p), "/proc/%d/fd/%d", (int)pid, (int)fd);
	if (stat(p, &st) < 0)
		return errno != ENOENT;
	return ino == 0 || (uint64_t)st.st_ino == ino;
}

int tp_tcpstat_list(const char *path, struct tp_tcpstat_entry *out, int max)
{
	struct tcpstat_file *f = open_map(path ? path : TP_TCPSTAT_PATH, false);
	int n = 0;

	if (!f)
		return 0;
	for (int i = 0; i < TCPSTAT_SLOTS; i++) {
		struct tcpstat_slot *s = &f->slot[i];
		struct tp_tcpstat_entry e;
		int32_t o = atomic_load_explicit(&s->owner, memory_order_acquire);
		/* Acquire pairs with the writer's release increment: fields complete when even. */
		uint32_t g1 = atomic_load_explicit(&s->gen, memory_order_acquire);

		if (o <= 0 || (g1 & 1) || !atomic_load_explicit(&s->valid, memory_order_acquire))
			continue;
		memset(&e, 0, sizeof(e));
		e.pid = o;
		e.fd = s->fd;
		memcpy(&e.local, s->local, sizeof(s->local));
		memcpy(&e.remote, s->remote, sizeof(s->remote));
		memcpy(e.reason, s->reason, sizeof(e.reason));
		e.reason[sizeof(e.reason) - 1] = '\0';
		uint64_t ino = s->ino;
		/* Order the copies before re-reading GEN (pairs with the writer's increments). */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->gen, memory_order_relaxed) != g1 ||
		    atomic_load_explicit(&s->owner, memory_order_relaxed) != o)
			continue;
		if (pid_dead(o) || !fd_still_there(o, e.fd, ino))
			continue; /* stale: a dead process, or the fd was closed behind our back */
		if (n < max)
			out[n] = e;
		n++;
	}
	munmap(f, sizeof(*f));
	return n;
}
