// SPDX-License-Identifier: MIT
/* Host-wide table of connections that stayed TCP (a shared, sparse file of fixed-size slots
 * that grows as needed, not tied to any link): written by preload/ at connect/accept/close,
 * read by `ntbsock stat`. */
#include "transport/tp_int.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/mapguard.h"
#include "util/proc.h"
#include "util/rawsys.h"

#define TCPSTAT_MAGIC   0x31544350544e4c55ULL  /* any value a foreign file is unlikely to hold */
#define TCPSTAT_VERSION 2u
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

/* The file has room for TCPSTAT_SLOTS slots from the start, but is sparse (a tmpfs or any
 * file system with holes): only the pages of slots in use take memory. USED is how far the
 * table has grown: every slot below it has been claimed once; writers look for a free slot
 * there first, readers look only there.
 *
 *   field    written by                                  read by
 *   magic    the creator, last (release)                 every opener (acquire)
 *   used     a writer that found no free slot (CAS, +1)  writers and readers (acquire)
 *   added    every writer (atomic add, relaxed)          readers (relaxed: a count)
 *   slot[i]  the process that claimed it (see above)     readers (seqlock on gen) */
struct tcpstat_file {
	_Atomic uint64_t magic;        /* stored last by the creator (release), see open_map */
	uint32_t version, slots, slot_size;
	_Atomic uint32_t used;         /* grows by one, never shrinks (slots are reused) */
	/* connections registered since the file was created (tp_tcpstat_add(), a slot found or
	 * not); zero in a file an older version created, which left this as padding */
	_Atomic uint64_t added;
	uint8_t pad[128 - 32];
	struct tcpstat_slot slot[TCPSTAT_SLOTS];
};
static_assert(offsetof(struct tcpstat_file, slot) == 128, "tcpstat header is one 128-byte unit");
static_assert(offsetof(struct tcpstat_file, added) == 24,
	      "tcpstat header: added where the padding began");
static_assert(sizeof(struct tcpstat_slot) == 128, "tcpstat slot size");
static_assert(sizeof(struct tcpstat_file) == TP_TCPSTAT_FILE_SIZE, "tcpstat file size");

static _Atomic(struct tcpstat_file *) writer_map; /* this process's mapping, once made */
static _Atomic uint32_t claim_hint;               /* where this process looks first */
static _Atomic bool gave_up;                      /* waited for the file's creator in vain */

static bool pid_dead(int32_t pid)
{
	return pid > 0 && !proc_alive(pid, 0);
}

/* Does the (mapped) file F hold our header? */
static bool header_ok(const struct tcpstat_file *f)
{
	/* Pairs with the creator's release store in open_map(). */
	return atomic_load_explicit(&f->magic, memory_order_acquire) == TCPSTAT_MAGIC &&
	       f->version == TCPSTAT_VERSION && f->slots == TCPSTAT_SLOTS &&
	       f->slot_size == sizeof(f->slot[0]);
}

/* Map PATH (creating it race-free when CREATE). NULL on any problem: a foreign, short or
 * not-yet-initialised file is skipped, never trusted (*RET_YOUNG true for the last two: its
 * creator may still be at work). The mapping is guarded (util/mapguard.h):
 * a file truncated under us, or a full tmpfs that cannot back a page of the sparse file, reads
 * as zeros instead of killing the program with SIGBUS. */
static struct tcpstat_file *open_map(const char *path, bool create, bool *ret_young)
{
	struct tcpstat_file *f;
	struct stat st;
	bool mine = false;
	int fd = -1;

	*ret_young = false;
	if (create) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			mine = true;
			if (ftruncate(fd, sizeof(*f)) < 0) {
				raw_close(fd);
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
		*ret_young = S_ISREG(st.st_mode) && st.st_size == 0;
		raw_close(fd);
		return NULL;
	}
	f = mmap(NULL, sizeof(*f), create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	raw_close(fd);
	if (f == MAP_FAILED)
		return NULL;
	(void)mapguard_add(f, sizeof(*f));
	if (mine) {
		f->version = TCPSTAT_VERSION;
		f->slots = TCPSTAT_SLOTS;
		f->slot_size = sizeof(f->slot[0]);
		/* Pairs with the acquire load below in other processes: header complete. */
		atomic_store_explicit(&f->magic, TCPSTAT_MAGIC, memory_order_release);
	}
	if (!header_ok(f)) {
		*ret_young = atomic_load_explicit(&f->magic, memory_order_relaxed) == 0;
		mapguard_remove(f);
		munmap(f, sizeof(*f));
		return NULL;
	}
	return f;
}

static struct tcpstat_file *writer(const char *path)
{
	struct tcpstat_file *f = atomic_load_explicit(&writer_map, memory_order_acquire);
	struct tcpstat_file *expect = NULL;
	bool young;

	if (f)
		return f;
	f = open_map(path, true, &young);
	/* Another process is creating the file: give it up to 100 ms (until once in vain: a
	 * creator that died half-way must not delay every later connection). */
	for (int i = 0; !f && young && i < 200 &&
	     !atomic_load_explicit(&gave_up, memory_order_relaxed); i++) {
		usleep(500);
		f = open_map(path, true, &young);
	}
	if (!f && young)
		atomic_store_explicit(&gave_up, true, memory_order_relaxed);
	if (!f)
		return NULL;
	/* Publish our mapping (release pairs with the acquire load above); a racing thread that
	 * won keeps its own and we drop ours. */
	if (!atomic_compare_exchange_strong_explicit(&writer_map, &expect, f, memory_order_acq_rel,
						     memory_order_acquire)) {
		mapguard_remove(f);
		munmap(f, sizeof(*f));
		f = expect;
	}
	return f;
}

int tp_tcpstat_open(const char *path)
{
	return writer(path ? path : TP_TCPSTAT_PATH) ? 0 : -ENOENT;
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

/* The slots below USED of F. */
static uint32_t used_of(struct tcpstat_file *f)
{
	/* Acquire pairs with the CAS in grow(): slots below it are in the file. */
	uint32_t u = atomic_load_explicit(&f->used, memory_order_acquire);

	return u < TCPSTAT_SLOTS ? u : TCPSTAT_SLOTS;
}

/* Liveness of the owners a search met: a table of a few thousand rows has a few owners, and
 * each look is a read of /proc (proc_alive()), so one look per owner and search. */
struct owner_cache {
	int32_t pid[8];
	bool dead[8];
	unsigned n, next;
};

static bool owner_dead(struct owner_cache *oc, int32_t o, int self)
{
	if (o == self)
		return false;
	for (unsigned i = 0; i < oc->n; i++)
		if (oc->pid[i] == o)
			return oc->dead[i];
	unsigned i = oc->n < 8u ? oc->n++ : oc->next++ % 8u;

	oc->pid[i] = o;
	oc->dead[i] = pid_dead(o);
	return oc->dead[i];
}

/* Take slot I for PID if it is free (or, with REAP, held by a dead process); true when taken. */
static bool claim(struct tcpstat_slot *s, int pid, bool reap, struct owner_cache *oc)
{
	int32_t free_ = 0;
	int32_t o = atomic_load_explicit(&s->owner, memory_order_relaxed);

	if (o != 0) {
		if (!reap || !owner_dead(oc, o, pid))
			return false;
		atomic_store_explicit(&s->valid, 0, memory_order_relaxed);
		/* Release pairs with the CAS acquire of the next claimer. */
		atomic_compare_exchange_strong_explicit(&s->owner, &o, 0, memory_order_release,
							memory_order_relaxed);
	}
	/* Acquire pairs with the release store freeing the slot (tp_tcpstat_del). */
	return atomic_compare_exchange_strong_explicit(&s->owner, &free_, pid,
						       memory_order_acquire, memory_order_relaxed);
}

/* A slot of F for PID: a free one below USED, else one of a dead process, else a new one at
 * USED (the table grows). The index, or -ENOSPC. */
static int find_slot(struct tcpstat_file *f, int pid)
{
	for (;;) {
		uint32_t u = used_of(f);
		uint32_t h = u ? atomic_load_explicit(&claim_hint, memory_order_relaxed) % u : 0;
		struct owner_cache oc = { .n = 0 };

		for (int pass = 0; pass < 2; pass++) {
			for (uint32_t k = 0; k < u; k++) {
				uint32_t i = (h + k) % u;

				if (claim(&f->slot[i], pid, pass == 1, &oc)) {
					atomic_store_explicit(&claim_hint, i + 1, memory_order_relaxed);
					return (int)i;
				}
			}
		}
		if (u >= TCPSTAT_SLOTS)
			return -ENOSPC;
		/* Grow by one: release pairs with the acquire in used_of(). Whoever wins the CAS
		 * or not, slot U is now visible to every writer: take it if still free, else look
		 * again. */
		uint32_t expect = u;

		atomic_compare_exchange_strong_explicit(&f->used, &expect, u + 1,
							memory_order_release, memory_order_relaxed);
		if (claim(&f->slot[u], pid, false, &oc)) {
			atomic_store_explicit(&claim_hint, u + 1, memory_order_relaxed);
			return (int)u;
		}
	}
}

int tp_tcpstat_add(const char *path, int pid, int fd, uint64_t ino, const struct sockaddr *l,
		   const struct sockaddr *r, const char *reason)
{
	struct tcpstat_file *f = writer(path ? path : TP_TCPSTAT_PATH);
	int i;

	if (!f)
		return -ENOENT;
	if (mapguard_lost(f))
		return -EIO;
	atomic_fetch_add_explicit(&f->added, 1, memory_order_relaxed);
	i = find_slot(f, pid);
	if (i < 0)
		return i;
	struct tcpstat_slot *s = &f->slot[i];
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

int tp_tcpstat_scan(const void *map, size_t size, struct tp_tcpstat_entry *out, int max)
{
	/* (the readers' view: nothing here is written) */
	struct tcpstat_file *f = (struct tcpstat_file *)map;
	uint32_t used;
	int n = 0;

	if (size != sizeof(*f) || !header_ok(f))
		return 0;
	used = used_of(f);
	for (uint32_t i = 0; i < used && !mapguard_lost(f); i++) {
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
	return n;
}

uint64_t tp_tcpstat_added(const void *map, size_t size)
{
	const struct tcpstat_file *f = map;

	if (size != sizeof(*f) || !header_ok(f) || mapguard_lost(f))
		return 0;
	return atomic_load_explicit(&f->added, memory_order_relaxed);
}

int tp_tcpstat_list(const char *path, struct tp_tcpstat_entry *out, int max, uint64_t *ret_added)
{
	bool young;
	struct tcpstat_file *f = open_map(path ? path : TP_TCPSTAT_PATH, false, &young);
	int n;

	if (ret_added)
		*ret_added = 0;
	if (!f)
		return 0;
	if (ret_added)
		*ret_added = tp_tcpstat_added(f, sizeof(*f));
	n = tp_tcpstat_scan(f, sizeof(*f), out, max);
	mapguard_remove(f);
	munmap(f, sizeof(*f));
	return n;
}
