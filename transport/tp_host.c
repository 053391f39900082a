/* SPDX-License-Identifier: MIT */
/* The host-local table: receive-context pool, listener refcounts, set-ups and live connections,
 * shared by the processes of one host through a small shm file beside the link file. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "transport/tp_int.h"
#include "util/log.h"
#include "util/mapguard.h"
#include "util/proc.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

uint64_t tp_now_ms(void)
{
	return clock_mono_ms();
}

/* Nonces and MsgIDs tell connections apart (a stale word or message of an earlier connection in
 * a reused slot fails its check); they need not be secret (the hosts of a link trust each other,
 * doc/design.md §10), only unlikely to repeat. So a per-process generator, keyed once from getrandom()
 * (one system call per set-up on each side was a measurable part of its cost), mixed with a
 * counter and the clock: a child forked without our fork handler (which rekeys it:
 * tp_proc_forked()) still draws other values than its parent, as their clocks differ. */
static _Atomic uint64_t g_rand_key; /* 0: not keyed yet */
static _Atomic uint64_t g_rand_ctr;

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* This process's pid, cached: getpid() is a system call, and a set-up asked for it half a dozen
 * times on each side. Reset in a forked child by tp_proc_forked() (from tp_atfork_child(), which
 * the transport needs in every child anyway: it restarts the helper and the locks). */
static _Atomic int g_self_pid; /* 0: not known yet */

int tp_self_pid(void)
{
	/* relaxed: a value; every thread that finds 0 stores the same one */
	int pid = atomic_load_explicit(&g_self_pid, memory_order_relaxed);

	if (pid == 0) {
		pid = getpid();
		atomic_store_explicit(&g_self_pid, pid, memory_order_relaxed);
	}
	return pid;
}

void tp_proc_forked(void)
{
	atomic_store_explicit(&g_self_pid, 0, memory_order_relaxed);
	atomic_store_explicit(&g_rand_key, 0, memory_order_relaxed);
}

uint32_t tp_random32(void)
{
	/* relaxed: the key is a value, not a publication; two threads keying at once each use
	 * their own key, both good */
	uint64_t key = atomic_load_explicit(&g_rand_key, memory_order_relaxed), v;
	struct timespec ts;

	while (key == 0) {
		if (getrandom(&key, sizeof(key), GRND_NONBLOCK) != sizeof(key)) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			key = splitmix64((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32 ^
					 (uint64_t)ts.tv_sec);
		}
		atomic_store_explicit(&g_rand_key, key, memory_order_relaxed);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	do {
		uint64_t n = atomic_fetch_add_explicit(&g_rand_ctr, 1, memory_order_relaxed);

		v = splitmix64(key ^ splitmix64(n ^ ((uint64_t)ts.tv_sec << 32 ^
						     (uint64_t)ts.tv_nsec)));
	} while ((uint32_t)v == 0);
	return (uint32_t)v;
}

/* Does a live process own entry E? (forked children join the owner list) */
bool tp_entry_owned(struct tp_host_entry *e)
{
	/* acquire: pairs with the release store of fork_ms in atfork_prepare() */
	bool any = clock_age_ms(tp_now_ms(),
				atomic_load_explicit(&e->fork_ms, memory_order_acquire)) < TP_FORK_GRACE_MS;

	for (int i = 0; i < TP_OWNERS; i++) {
		if (e->owners[i] && !tp_pid_alive(e->owners[i]))
			e->owners[i] = 0;
		any |= e->owners[i] != 0;
	}
	return any;
}

/* proc_alive() reads /proc/PID/stat (a zombie or a reused pid is not the owner): a reclaim pass
 * asks for every owner of every entry, a few processes owning hundreds of entries, so each
 * thread keeps its last few answers for 100 ms (a dead owner is reclaimed that much later). */
void tp_entry_own(struct tp_link *l, struct tp_host_entry *e, int pid)
{
	for (int i = 0; i < TP_OWNERS; i++) {
		if (e->owners[i] == pid)
			break;
		if (!e->owners[i] || !tp_pid_alive(e->owners[i])) {
			e->owners[i] = pid;
			break;
		}
	}
	tp_host_proc_note(l->host, pid);
}

bool tp_pid_alive(int pid)
{
	static __thread struct {
		int pid;
		bool alive;
		uint64_t ms;
	} memo[8];
	static __thread unsigned next;
	uint64_t now = tp_now_ms();

	for (unsigned i = 0; i < 8u; i++)
		if (memo[i].pid == pid && clock_age_ms(now, memo[i].ms) < 100u)
			return memo[i].alive;
	bool alive = proc_alive(pid, 0);
	unsigned i = next++ % 8u;

	memo[i].pid = pid;
	memo[i].alive = alive;
	memo[i].ms = now;
	return alive;
}

int tp_host_path(const struct ntb_link_params *lp, int side, char *buf, size_t len)
{
	int n;

	if (lp->path[0])
		n = snprintf(buf, len, "%s.side%d", lp->path, side);
	else
		n = snprintf(buf, len, "/dev/shm/ntbsock-%s.side%d", lp->name, side);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static size_t host_size_for(uint32_t contexts)
{
	return ALIGN_UP(sizeof(struct tp_host) + contexts * sizeof(struct tp_host_entry) +
				tp_hidx_size(contexts),
			(size_t)4096);
}

static void host_init(struct tp_host *h, uint32_t contexts, uint32_t epoch, size_t size)
{
	pthread_mutexattr_t a;

	/* The header is cleared, and the indexes (tp_hidx_init()); not the entries: each is
	 * cleared when first handed out in this session (e_used), so that a process that is the
	 * first of its host's new session (every short-lived client) does not clear 1.7 MB. The
	 * header's pages are mapped in one call first (it faulted on each 4 KiB page). */
	ntb_prefault_mem(h, sizeof(*h));
	memset(h, 0, sizeof(*h));
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->lock, &a);
	pthread_mutexattr_destroy(&a);
	h->version = TP_HOST_VERSION;
	h->size = (uint32_t)size;
	h->contexts = contexts;
	h->session_epoch = epoch;
	atomic_init(&h->free_num, contexts); /* (not published yet: the magic below does it) */
	tp_hidx_init(h);
	h->maint_ms = tp_now_ms();
	h->msgid_next = tp_random32();
	/* release: the magic publishes the initialised table to openers that skip the flock
	 * (tp_stat_list reads); pairs with the acquire load there. */
	atomic_store_explicit(&h->magic, TP_HOST_MAGIC, memory_order_release);
}

/* Does a process still use table H of an earlier session (its link file replaced under it)?
 * Its listeners, and the owners of the entries it handed out (one that forked in the last 2 s
 * may have a child not listed yet). Read only: the table stays as its processes left it. */
static bool host_in_use(const struct tp_host *h, size_t map_size)
{
	uint64_t now = tp_now_ms();
	uint32_t used = tp_host_used(h);
	/* (entries within our mapping only: the table's own size may say more) */
	size_t fit = (map_size - sizeof(*h)) / sizeof(h->e[0]);

	if (used > fit)
		used = (uint32_t)fit;

	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++)
		if (h->listen[i].count && tp_pid_alive(h->listen[i].pid))
			return true;
	for (uint32_t i = 0; i < used; i++) {
		const struct tp_host_entry *e = &h->e[i];

		if (e->state == TP_ES_FREE)
			continue;
		/* relaxed (both): the table's processes may still write them; a stale value only
		 * makes the table look in use (a new file: harmless) */
		int pid = atomic_load_explicit(&e->pid, memory_order_relaxed);

		if (clock_age_ms(now, atomic_load_explicit(&e->fork_ms, memory_order_relaxed)) <
			    TP_FORK_GRACE_MS ||
		    (pid && tp_pid_alive(pid)))
			return true;
		for (int k = 0; k < TP_OWNERS; k++)
			if (e->owners[k] && tp_pid_alive(e->owners[k]))
				return true;
	}
	return false;
}

int tp_host_adopt(struct tp_link *l, struct tp_host *h, size_t size, uint32_t epoch,
		  const char *path)
{
	/* A table from an earlier session of this side (every process of it gone) or from another
	 * layout is rebuilt; the caller's flock serialises openers. */
	/* relaxed: under the caller's flock, which every writer of the magic holds */
	uint64_t magic = atomic_load_explicit(&h->magic, memory_order_relaxed);
	bool live = magic == TP_HOST_MAGIC && h->version == TP_HOST_VERSION &&
		    h->session_epoch == epoch && h->size == size;

	if (magic == TP_HOST_MAGIC && h->session_epoch == epoch && h->version != TP_HOST_VERSION) {
		/* live processes of another build use it (an upgrade under a running program):
		 * rebuilt, its lock and entries would be wiped under them. Not for us. */
		LOG(LL_WARN, "transport: %s: the host table is in use by processes of another "
		    "version (table version %u, ours %u): this process's connections on the link "
		    "use the kernel", path, h->version, TP_HOST_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (magic == TP_HOST_MAGIC && h->session_epoch == epoch && h->contexts != l->contexts) {
		/* (tp_host_open() took the host's count: the table changed in between) */
		LOG(LL_DEBUG, "transport: %s: connection slots %u differ from the host's %u", path,
		    l->contexts, h->contexts);
		return -EINVAL;
	}
	if (!live && magic == TP_HOST_MAGIC && h->session_epoch != epoch && !l->host_in_place &&
	    (h->version != TP_HOST_VERSION || host_in_use(h, size)))
		/* another session's processes live on it (their link file was replaced): rebuilt
		 * in place, their releases and reclaims would free our entries, and their
		 * failovers read our zeros as their streams' counts. The caller gives us a new
		 * file and leaves them theirs. */
		return -EBUSY;
	if (!live) {
		host_init(h, l->contexts, epoch, size);
		h->inline_n = l->geom.inline_n;
		h->qsize = l->geom.qsize;
		h->slot_size = l->slot_size;
		h->pool_off = l->geom.pool_off;
		h->pool_n = l->geom.pool_n;
		tp_pool_init(h, h->pool_n);
	} else if (h->slot_size != l->slot_size || h->inline_n != l->geom.inline_n ||
		   h->qsize != l->geom.qsize || h->pool_off != l->geom.pool_off ||
		   h->pool_n != l->geom.pool_n) {
		/* one layout per window: a process with other tunables uses the host's, if it is
		 * one a peer accepts (tp_geom_valid(), tp_pool_valid(): 128-byte aligned slots, at
		 * least 2 inline slots, rings of 4 KiB or more after the slots and their NEWS
		 * words, tp_news_off()) */
		if ((h->slot_size + 8u) * (uint64_t)h->contexts + TP_OFF_SLOTS > h->pool_off ||
		    h->slot_size % 128u || h->inline_n < 2 ||
		    (h->inline_n & (h->inline_n - 1)) || h->inline_n > 65536 ||
		    h->qsize < 4096 || (h->qsize & (h->qsize - 1)) || h->qsize > (1u << 30) ||
		    h->slot_size < TP_SLOT_RINGS + h->inline_n * 128u || h->pool_off % 4096u ||
		    h->pool_n == 0 || h->pool_n > TP_MAX_CONTEXTS || h->pool_off > l->in_size ||
		    (uint64_t)h->pool_n * h->qsize > l->in_size - h->pool_off)
			return -EINVAL;
		LOG(LL_DEBUG, "transport: %s: using the host's queues (%u inline, %u rings of %u "
		    "bytes)", path, h->inline_n, h->pool_n, h->qsize);
		l->geom.inline_n = h->inline_n;
		l->geom.log2n = (uint32_t)__builtin_ctz(h->inline_n);
		l->geom.qsize = h->qsize;
		l->geom.pool_off = h->pool_off;
		l->geom.pool_n = h->pool_n;
		l->slot_size = h->slot_size;
	}
	return 0;
}

int tp_host_open(struct tp_link *l, const struct ntb_link_params *lp)
{
	char path[NTB_PATH_MAX + 32];
	size_t size = host_size_for(l->contexts);
	struct tp_host *h;
	struct stat st;
	uint32_t epoch = ntb_link_epoch(l->ntb);
	mode_t mode = lp->mode ? lp->mode : 0600;
	bool created = false;
	int fd, rc;

	rc = tp_host_path(lp, ntb_link_side(l->ntb), path, sizeof(path));
	if (rc)
		return rc;
	int round = 0;
	uint32_t contexts = l->contexts;
again:
	l->contexts = contexts; /* (the table there may have set the host's: a new one ours) */
	size = host_size_for(l->contexts);
	created = false;
	/* Create it, or open the one there (removed in between: try again). */
	fd = -1;
	for (int attempt = 0; fd < 0 && attempt < 4; attempt++) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
		created = fd >= 0;
		if (fd < 0 && errno == EEXIST)
			fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno != ENOENT)
			break;
	}
	if (fd < 0)
		return -errno;
	fd = fd_park(fd); /* (kept open: among the library's, util/fdpark.h) */
	/* The link's mode and group apply to its host table as to its file (ntb/shm.c: the umask
	 * may have narrowed the mode), so that whoever may use the link may open the table, also
	 * when a process of another user created it. A failure leaves the table to its creator's
	 * user: not an error for this process. */
	if (created && (fchmod(fd, mode) < 0 ||
			(lp->group != (gid_t)-1 && fchown(fd, (uid_t)-1, lp->group) < 0)))
		LOG(LL_DEBUG, "transport: %s: cannot set mode %04o / group %d: %s", path,
		    (unsigned)mode, (int)lp->group, strerror(errno));
	if (flock(fd, LOCK_EX) < 0) {
		rc = -errno;
		goto err_close;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto err_unlock;
	}
	if (st.st_nlink == 0) {
		/* replaced while we waited for the lock (below): the file there now */
		flock(fd, LOCK_UN);
		fd_close_own(fd);
		if (++round > 4) {
			/* (never a table nobody else can find) */
			LOG(LL_WARN, "transport: %s: the host table was replaced again and again "
			    "while this process opened it", path);
			return -EAGAIN;
		}
		goto again;
	}
	int mc = ntb_link_check_mapping(l->ntb);

	if (mc < 0 && mc != -EINVAL && mc != -ENOTSUP) {
		/* our link file was removed, replaced or truncated: the table there may be the
		 * new session's, which would be rebuilt (or removed) for our old one under its
		 * processes */
		LOG(LL_INFO, "transport: %s: the link file is no longer this process's (%s): no "
		    "host table", path, strerror(-mc));
		rc = mc == -ESTALE ? -ESTALE : -EIO;
		goto err_unlock;
	}
	if ((size_t)st.st_size >= sizeof(struct tp_host)) {
		/* a live table's layout is the host's, whatever our tunables say: its number of
		 * connection slots sizes the table (tp_host_adopt() takes the rest) */
		struct tp_host *cur = malloc(sizeof(*cur));

		if (cur && pread(fd, cur, sizeof(*cur), 0) == (ssize_t)sizeof(*cur) &&
		    cur->magic == TP_HOST_MAGIC && cur->version == TP_HOST_VERSION &&
		    cur->session_epoch == epoch && cur->contexts >= 1 &&
		    cur->contexts <= TP_MAX_CONNS && cur->contexts != l->contexts &&
		    host_size_for(cur->contexts) == cur->size) {
			LOG(LL_DEBUG, "transport: %s: the host's %u connection slots, not %u", path,
			    cur->contexts, l->contexts);
			l->contexts = cur->contexts;
			size = cur->size;
		}
		free(cur);
	}
	if ((size_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0) {
		rc = -errno;
		goto err_unlock;
	}
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		rc = -errno;
		goto err_unlock;
	}
	/* A truncation of the host table under us must not SIGBUS the host program. */
	(void)mapguard_add(h, size);
	rc = tp_host_adopt(l, h, size, epoch, path);
	if (rc == -EBUSY) {
		/* An earlier session's table that live processes still use: they keep that file
		 * (unlinked), our session gets a new one: only the file we hold locked (the name
		 * may have been given to another meanwhile: then the file there now, again), and
		 * within a few rounds. Where it cannot be removed (another user's, in a sticky
		 * directory) it is rebuilt in place, as before: those processes then see it as
		 * another session's (tp_host_lost()). */
		struct stat sp;
		int ue = -1;

		if (round >= 4) {
			LOG(LL_WARN, "transport: %s: the host table of the link's earlier session is "
			    "still in use and was not replaced in %d rounds", path, round);
			rc = -EAGAIN;
			goto err_unmap;
		}
		if (stat(path, &sp) == 0 && sp.st_dev == st.st_dev && sp.st_ino == st.st_ino)
			ue = unlink(path) == 0 ? 0 : errno;
		if (!ue) {
			LOG(LL_INFO, "transport: %s: processes of the link's earlier session still use "
			    "the host table: a new table for this session", path);
		} else if (ue == EPERM || ue == EACCES || ue == EROFS) {
			LOG(LL_WARN, "transport: %s: processes of the link's earlier session still "
			    "use the host table, which cannot be replaced (%s): rebuilt under them",
			    path, strerror(ue));
			l->host_in_place = true;
		}
		mapguard_remove(h);
		munmap(h, size);
		flock(fd, LOCK_UN);
		fd_close_own(fd);
		round++;
		goto again;
	}
	if (rc)
		goto err_unmap;
	flock(fd, LOCK_UN);
	l->host = h;
	l->host_size = size;
	l->host_fd = fd;
	return 0;
err_unmap:
	mapguard_remove(h);
	munmap(h, size);
err_unlock:
	flock(fd, LOCK_UN);
err_close:
	fd_close_own(fd);
	return rc;
}

/* The host table's file was truncated under us: our mapping now reads private zero pages
 * (util/mapguard), no longer the table the host's other processes share. Or the table is
 * another session's: the link file we mapped was removed or replaced, and a process that opened
 * the new one began a session in the same table, rebuilt in place because it could not be
 * replaced by a new file (tp_host_open(): another user's, in a sticky directory); our mailbox
 * is the old file's, and its packets read against the new session's entries would free them
 * ("its client slot is reused"). Connections already set up go on (their slots were allocated in the table); new
 * set-ups and admissions would allocate from or act on a table that is not ours, so they are
 * refused (the caller falls back to TCP). Logged once per link. */
bool tp_host_lost(struct tp_link *l)
{
	if (!l->host)
		return false;
	bool truncated = mapguard_lost(l->host);

	/* (session_epoch: written when a session's first process sets the table up, under the
	 * flock; a process of another session writes it, ours only reads it) */
	if (!truncated && l->host->session_epoch == ntb_link_epoch(l->ntb))
		return false;
	/* relaxed: one log line per link, nothing is published with it */
	if (!atomic_exchange_explicit(&l->host_lost_logged, true, memory_order_relaxed))
		LOG(LL_WARN, "transport: link %s: %s: no new ntb connections in this process",
		    ntb_link_name(l->ntb),
		    truncated ? "its host table was truncated"
			      : "its host table is another session's (the link file was replaced)");
	return true;
}

void tp_host_close(struct tp_link *l)
{
	if (l->host) {
		mapguard_remove(l->host);
		munmap(l->host, l->host_size);
	}
	fd_close_own(l->host_fd);
	l->host = NULL;
	l->host_fd = -1;
}

/* After a lock call that returned RC: whether the lock is ours (the holder's pid noted). */
static bool host_locked(struct tp_link *l, int rc)
{
	if (rc && rc != EOWNERDEAD)
		return false;
	/* relaxed: a hint for waiters (tp_host_lock_within()); first, so that the rebuild below,
	 * the longest time the lock is held, is covered */
	atomic_store_explicit(&l->host->lock_pid, tp_self_pid(), memory_order_relaxed);
	if (rc == EOWNERDEAD) { /* the holder died: its entry updates are whole or harmless */
		pthread_mutex_consistent(&l->host->lock);
		tp_hidx_rebuild(l->host); /* (an index may be half-updated) */
		tp_pool_rebuild(l->host); /* (the pool's stack too) */
	}
	return true;
}

void tp_host_lock(struct tp_link *l)
{
	host_locked(l, pthread_mutex_lock(&l->host->lock));
}

bool tp_host_trylock(struct tp_link *l)
{
	return host_locked(l, pthread_mutex_trylock(&l->host->lock));
}

/* Is the host lock's holder a stopped process (SIGSTOP, a debugger's stop)? */
static bool holder_stopped(struct tp_link *l)
{
	/* relaxed: a hint; a holder that changed meanwhile is looked at next time */
	int32_t pid = atomic_load_explicit(&l->host->lock_pid, memory_order_relaxed);
	char st = 0;

	return pid > 0 && pid != tp_self_pid() && proc_starttime(pid, &st) && (st == 'T' || st == 't');
}

bool tp_host_lock_within(struct tp_link *l, uint32_t ms)
{
	bool seen = false; /* the holder looked stopped at the last look */

	if (tp_host_trylock(l))
		return true;
	if (!ms && holder_stopped(l))
		return false;
	if (!ms)
		ms = TP_HOST_WAIT_MS;
	for (;;) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts); /* (pthread_mutex_timedlock()'s clock) */
		ts.tv_sec += ms / 1000u;
		ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		int rc = pthread_mutex_timedlock(&l->host->lock, &ts);

		if (rc != ETIMEDOUT)
			return host_locked(l, rc);
		/* twice in a row: a holder traced by strace shows 't' for a moment at each of its
		 * system calls, while it runs */
		if (holder_stopped(l)) {
			if (seen)
				return false;
			seen = true;
		} else {
			seen = false;
		}
	}
}

void tp_host_unlock(struct tp_link *l)
{
	/* relaxed: as in host_locked() */
	atomic_store_explicit(&l->host->lock_pid, 0, memory_order_relaxed);
	pthread_mutex_unlock(&l->host->lock);
}

/*
 * A nonce for a new connection on receive context SLOT. The connection's inline sequence
 * bytes start from tp_inline_seq_base(nonce) (tp_conn_init_queues()), and every slot of the
 * ring's first lap expects the same byte, tp_inline_seq(0, ...). The ring still holds what the
 * previous connections wrote, in runs of one or two such bytes: a nonce whose byte is among
 * them would make a whole run look published to the readiness hints (the reads reject it:
 * wrong nonce, wrong CRC). So draw again while it is; the ring is quiet (the slot is free,
 * released longest ago), and at most min(inline_n, 255) bytes can be taken.
 */
static uint32_t slot_nonce(struct tp_link *l, uint32_t slot)
{
	uint32_t seen[256 / 32] = { 0 }, n = tp_random32();

	for (uint32_t k = 0; k < l->geom.inline_n; k++) {
		const volatile uint8_t *p = tp_in_inline(l, slot, k) + TP_INL_SEQ;
		/* relaxed: the ring of a free slot is quiet; only the byte's value matters */
		uint8_t b = atomic_load_explicit((const _Atomic uint8_t *)p, memory_order_relaxed);

		seen[b / 32] |= 1u << (b % 32);
	}
	for (int tries = 0; tries < 64; tries++, n = tp_random32()) {
		uint32_t b = tp_inline_seq(0, l->geom.log2n, tp_inline_seq_base(n));

		if (!(seen[b / 32] & (1u << (b % 32))))
			break;
	}
	return n; /* (64 misses: every byte taken but a few; tp_rx_note_stale() notes them) */
}

int tp_slot_alloc(struct tp_link *l, uint32_t state, int pid)
{
	struct tp_host *h = l->host;
	/* The free slot released longest ago: late writes of its previous peer have stopped. */
	int best = tp_hidx_free_pop(h);

	if (best < 0)
		return -ENOSPC;
	struct tp_host_entry *e = &h->e[best];
	memset(e, 0, sizeof(*e));
	e->state = state;
	/* relaxed: informational, read without the host lock by a move's helper and `ntbsock
	 * stat` (stored also without it: tp_conn_own(), tp_conn_set_owner()) */
	atomic_store_explicit(&e->pid, pid, memory_order_relaxed);
	e->owners[0] = pid;
	tp_host_proc_note(h, pid);
	e->nonce = slot_nonce(l, (uint32_t)best);
	e->created_ms = tp_now_ms();
	/* a data ring for the peer's bytes when the pool has one ([RT]'s rule: not the last
	 * while others wait for it); else its sender asks once it has more than inline slots
	 * carry (tp_ring.c) */
	/* (a server's reservation nobody drives until accept() takes it, and so never asked back:
	 * only while the pool is at least half free) */
	int r = state == TP_ES_PENDING && l->host->pool_top <= l->host->pool_n / 2u ? -1 :
		tp_pool_take(l, 0, false);

	if (r >= 0) {
		e->ring = (uint32_t)r + 1u;
		e->ring_gen = 1;
		e->ring_ms = e->created_ms;
	}
	atomic_store_explicit(&e->fd, -1, memory_order_relaxed);
	/* relaxed: changed under the host lock, read without it by tp_link_load() (a hint) */
	atomic_store_explicit(&h->free_num,
			      atomic_load_explicit(&h->free_num, memory_order_relaxed) - 1,
			      memory_order_relaxed);
	/* relaxed: a counter for display, read unlocked by link_stat_table() */
	atomic_fetch_add_explicit(&h->totals.setups, 1, memory_order_relaxed);
	return best;
}

static void slot_free(struct tp_link *l, uint32_t slot, bool cold)
{
	struct tp_host_entry *e = &l->host->e[slot];

	if (e->state == TP_ES_FREE)
		return;
	struct tp_host_totals *t = &l->host->totals;
	struct tp_stats st;

	/* relaxed: the last writer is done with the slot (partner: TP_STAT_ADD) */
	tp_stats_load(&st, &e->stats);
	/* relaxed: the totals are read unlocked for display (link_stat_table()) */
	atomic_fetch_add_explicit(&t->tx_bytes, st.tx_bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->rx_bytes, st.rx_bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->transfers,
				  st.tx_msgs_inline + st.tx_msgs_short + st.tx_msgs_long,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&t->congestion, st.tx_full, memory_order_relaxed);
	if (e->ring) { /* (its sender writes no more: the connection ended, or is told GONE) */
		tp_pool_put(l, e->ring - 1u, cold);
		e->ring = 0;
	}
	if (e->asleep) /* a set-up's process died asleep (reclaimed): no longer counted */
		tp_mbox_sleepers(l, slot, false);
	if (e->role == TP_ROLE_OFFER) /* an offer withdrawn (tp_offer.c) */
		atomic_fetch_sub_explicit(&l->host->offers_held, 1, memory_order_relaxed);
	e->state = TP_ES_FREE;
	atomic_store_explicit(&e->pid, 0, memory_order_relaxed); /* (informational, as in
								      * tp_slot_alloc()) */
	memset(e->owners, 0, sizeof(e->owners));
	e->released_ms = tp_now_ms();
	tp_hidx_freed(l->host, slot);
	/* relaxed: as in tp_slot_alloc() */
	atomic_store_explicit(&l->host->free_num,
			      atomic_load_explicit(&l->host->free_num, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

void tp_slot_free(struct tp_link *l, uint32_t slot)
{
	slot_free(l, slot, true);
}

void tp_slot_free_ended(struct tp_link *l, uint32_t slot)
{
	slot_free(l, slot, false);
}

void tp_listen_publish(struct tp_link *l, bool force)
{
	struct tp_host *h = l->host;
	uint32_t seed = ntb_link_epoch(l->ntb);
	uint32_t *bits = calloc(TP_LISTEN_WORDS, sizeof(*bits));

	if (!bits)
		return;
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++)
		if (tp_listen_refs(&h->listen[i]))
			bits[h->listen[i].port / 32u] |= 1u << (h->listen[i].port % 32u);
	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) /* (vetoed ports: tp_listen_veto()) */
		if (h->listen[i].count == TP_LISTEN_VETO)
			bits[h->listen[i].port / 32u] &= ~(1u << (h->listen[i].port % 32u));
	for (uint32_t w = 0; w < TP_LISTEN_WORDS; w++) {
		/* FORCE rewrites every word, zero ones too: a word a faulty link lost or spoilt,
		 * or one left seeded with an earlier session's epoch, is repaired by the next
		 * periodic republication (tp_peer_listens() waits for that on a spoilt word) */
		if (bits[w] == h->listen_pub[w] && !force)
			continue;
		h->listen_pub[w] = bits[w];
		/* relaxed: the bitmap publishes nothing else (a port's Apply travels through the
		 * mailbox, ordered there); read with acquire in tp_peer_listens() all the same */
		tp_out_word(l, TP_OFF_LISTEN + w * 8u, seed, bits[w]);
	}
	free(bits);
}

/*
 * The ST word of a peer slot has one writer host (this one) but several writers in it: the
 * owner (CLOSING, FAILOVER, RST at MaxErr or abort, GONE at a forced release), a last holder
 * after a fork (release_share(): GONE), the reclaim of a dead owner (GONE) and the set-up
 * paths that give a reservation up (RST). Each store writes the whole word, so each writes
 * every flag of E so far: the flags only accumulate (an RST is never overwritten by a later
 * GONE or CLOSING; a CLOSING never stands alone after a failure).
 *
 * Without a lock (callers hold the host lock, a connection's tx/rx locks, or none): the OR
 * into e->st_out is atomic, and a writer whose store raced a later OR stores again. The last
 * OR's writer Q stores the final value F; a writer P whose store of a smaller value lands after
 * Q's store then re-reads e->st_out after a full fence, and since Q's OR precedes Q's store
 * (full fence in between) and Q's store precedes P's in the word's order, P reads F and stores
 * it. At most one more store per flag (four flags).
 */
void tp_ent_st_add(struct tp_link *l, struct tp_host_entry *e, uint32_t flags)
{
	/* seq_cst: the OR is ordered before our store below (pairs with the re-read after the
	 * store of a racing writer) */
	uint32_t v = atomic_fetch_or_explicit(&e->st_out, flags, memory_order_seq_cst) | flags;
	/* (the writers hold E while they write: its owner lives, or the host lock is held until
	 * it is freed; read once all the same) */
	uint64_t slot_off = e->peer_slot_off;
	uint32_t nonce = e->peer_nonce;

	for (;;) {
		/* (tp_write_st() flushes and rings: the peer sees the word at its next look) */
		atomic_thread_fence(memory_order_seq_cst);
		tp_write_st(l, slot_off, tp_news_off(e->peer_pool_off, e->peer_slot), e->peer_slot,
			    nonce, v);
		/* full fence: our store before the re-read (store→load), pairs with the fence
		 * between a racing writer's OR and its store */
		atomic_thread_fence(memory_order_seq_cst);
		/* seq_cst: as the fence before it, the store→load order of the argument above */
		uint32_t now = atomic_load_explicit(&e->st_out, memory_order_seq_cst);

		if (now == v)
			return;
		v = now;
	}
}

/* ST flags the peer wrote into our slot SLOT (seeded with its NONCE); 0 when none valid. */
uint32_t tp_slot_st_flags(struct tp_link *l, uint32_t slot, uint32_t nonce)
{
	uint32_t f;
	uint64_t w = tp_in_word(l, tp_slot_off(l, slot) + TP_W_ST_FLAGS);

	return tp_cw_check(nonce, w, &f) ? f : 0;
}

/* Under lock: whether entry I is to be reclaimed (an expired or abandoned set-up, or no owner
 * left), and if so reclaimed. PEER_EPOCH: the link's peer session now; PEND_MS: the backstop
 * for a reservation that nobody accepted. */
static void reclaim_entry(struct tp_link *l, uint32_t i, uint64_t now, uint32_t peer_epoch,
			  uint64_t pend_ms)
{
	struct tp_host *h = l->host;
	struct tp_host_entry *e = &h->e[i];
	bool gone = false;

	switch (e->state) {
	case TP_ES_FREE:
		return;
	case TP_ES_PENDING:
		if (e->role == TP_ROLE_OFFER) {
			/* an offer (tp_offer.c) is never withdrawn within its peer session: the peer
			 * may be claiming it; one of another session that the offers' reset missed,
			 * or one its maker died before publishing (a process that died holding the
			 * lock), is */
			gone = e->peer_epoch != h->peer_epoch || !tp_offer_listed(h, i);
			break;
		}
		gone = clock_age_ms(now, e->created_ms) > pend_ms ||
		       (peer_epoch && peer_epoch != e->peer_epoch) ||
		       (tp_slot_st_flags(l, i, e->nonce) & (TP_ST_RST | TP_ST_GONE));
		break;
	case TP_ES_CONNECTING:
	case TP_ES_OPEN:
		gone = !tp_entry_owned(e);
		bool named = false; /* (tp_entry_owned() cleared the dead ones) */

		for (int k = 0; k < TP_OWNERS; k++)
			named |= e->owners[k] != 0;
		if (!gone && !named) {
			/* kept only for a fork's child that may not be listed yet (its owners died
			 * within 2 s of the fork): a whole walk again once that is over, the dead
			 * ones having left the registry */
			uint64_t again = atomic_load_explicit(&e->fork_ms, memory_order_relaxed) +
					 TP_FORK_GRACE_MS + 1u;

			if (again > h->reclaim_again_ms)
				h->reclaim_again_ms = again;
		}
		break;
	}
	if (!gone) {
		/* (a walk after the registry overflowed lists the owners again: every pass walks
		 * everything until they fit) */
		if (h->procs_over == 2)
			for (int k = 0; k < TP_OWNERS; k++)
				tp_host_proc_note(h, e->owners[k]);
		return;
	}
	LOG(LL_DEBUG, "transport: reclaim slot %u (state %u pid %d)", i, e->state,
	    atomic_load_explicit(&e->pid, memory_order_relaxed));
	/* GONE added to what the dead owner wrote (an RST it wrote stays: its peer reads
	 * ECONNRESET, not a death's end of stream) */
	if (e->state != TP_ES_CONNECTING && e->peer_slot_off)
		tp_ent_st_add(l, e, TP_ST_GONE);
	tp_slot_free(l, i);
}

/* Under lock: the listeners of dead processes, and entries [FROM, TO) (reclaim_entry()). */
static void reclaim_walk(struct tp_link *l, uint32_t from, uint32_t to)
{
	struct tp_host *h = l->host;
	uint64_t now = tp_now_ms();
	uint32_t peer_epoch = ntb_link_peer_epoch(l->ntb);
	/* A set-up waits for accept() as long as the client lives (a busy server's backlog can
	 * hold it for long, as the kernel's does): the client's host writes RST/GONE when it
	 * gives up or dies. The timeout is only a backstop against a lost flag write. */
	uint64_t pend_ms = 2u * l->params.setup_timeout_ms + 120000u;
	bool lchanged = false;

	for (uint32_t i = 0; i < TP_MAX_LISTEN; i++) {
		if (h->listen[i].count && !tp_pid_alive(h->listen[i].pid)) {
			h->listen[i].count = 0;
			lchanged = true;
		}
	}
	if (lchanged)
		tp_listen_publish(l, false);
	for (uint32_t i = from; i < to; i++)
		reclaim_entry(l, i, now, peer_epoch, pend_ms);
}

void tp_host_proc_note(struct tp_host *h, int pid)
{
	int32_t *room = NULL;

	if (pid <= 0)
		return;
	for (uint32_t i = 0; i < TP_HOST_PROCS; i++) {
		if (h->procs[i] == pid)
			return;
		if (!h->procs[i] && !room)
			room = &h->procs[i];
	}
	if (room)
		*room = pid;
	else
		h->procs_over = 1;
}

void tp_host_reclaim(struct tp_link *l)
{
	struct tp_host *h = l->host;
	uint32_t pe = ntb_link_peer_epoch(l->ntb);

	/* After an overflow the registry is made again from the owners the walk meets (2; one that
	 * still does not fit sets it back to 1): processes that own nothing any more leave it. */
	if (h->procs_over) {
		memset(h->procs, 0, sizeof(h->procs));
		h->procs_over = 2;
	}
	h->reclaim_again_ms = 0; /* (set again by the walk below) */
	reclaim_walk(l, 0, tp_host_used(h));
	if (h->procs_over == 2)
		h->procs_over = 0;
	if (pe) /* (a link down says nothing of the peer's set-ups: reclaim_entry()) */
		h->reclaim_pe = pe;
	h->reclaim_hpe = h->peer_epoch;
	h->reclaim_next = 0;
}

uint32_t tp_host_reclaim_tick(struct tp_link *l)
{
	struct tp_host *h = l->host;
	uint32_t used = tp_host_used(h), from, to, pe = ntb_link_peer_epoch(l->ntb);
	bool whole = h->procs_over || used <= TP_RECLAIM_PART || (pe && h->reclaim_pe != pe) ||
		     h->reclaim_hpe != h->peer_epoch ||
		     (h->reclaim_again_ms && tp_now_ms() >= h->reclaim_again_ms);

	/* one look per owner process (a dead one's entries are walked for at once, not met in
	 * parts: its peers read the end within a pass, as before the walk in parts) */
	for (uint32_t i = 0; i < TP_HOST_PROCS; i++) {
		if (h->procs[i] && !tp_pid_alive(h->procs[i])) {
			h->procs[i] = 0;
			whole = true;
		}
	}
	if (whole) {
		tp_host_reclaim(l);
		return used;
	}
	from = h->reclaim_next < used ? h->reclaim_next : 0;
	to = used - from > TP_RECLAIM_PART ? from + TP_RECLAIM_PART : used;
	reclaim_walk(l, from, to);
	h->reclaim_next = to < used ? to : 0;
	return to - from;
}

void tp_host_reclaim_if_short(struct tp_link *l)
{
	uint64_t now = tp_now_ms();

	/* relaxed: under the host lock (the callers hold it) */
	if (atomic_load_explicit(&l->host->free_num, memory_order_relaxed) > 1 ||
	    now - l->last_short_reclaim_ms < TP_RECLAIM_SOON_MS)
		return;
	l->last_short_reclaim_ms = now;
	tp_host_reclaim(l);
}

static void stat_fill(struct tp_stat_entry *o, const struct tp_host_entry *e, uint32_t slot,
		      int side)
{
	memset(o, 0, sizeof(*o));
	/* relaxed: E is a copy; informational */
	o->pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
	o->fd = atomic_load_explicit(&e->fd, memory_order_relaxed);
	o->slot = slot;
	o->side = side;
	/* (open, its program's descriptor closed: it lingers for the peer's end or
	 * acknowledgements, tp_close_one()) */
	o->state = e->state == TP_ES_OPEN ? (o->fd == TP_ENT_FD_CLOSED ? "closing" : "open")
		 : e->state == TP_ES_PENDING ? "pending" : "connecting";
	if (o->fd == TP_ENT_FD_CLOSED)
		o->fd = -1;
	o->role = e->role ? "server" : "client";
	o->key = e->key;
	tp_stats_load(&o->stats, &e->stats); /* relaxed: the owner's data path writes them */
	/* relaxed: E is a copy, read for display */
	if (e->state == TP_ES_OPEN &&
	    atomic_load_explicit(&e->result, memory_order_relaxed) == TP_ENT_MOVED)
		o->failed_over = tp_fo_reason(atomic_load_explicit(&e->result_reason,
								   memory_order_relaxed));
}

/* How many entries of the table at H, a map of MAP_SIZE bytes that another process reads without
 * the host lock (`ntbsock stat`), may be read: -1 when it is not a table of this version that
 * fits the map. Its size is read once: the bound checked is the bound used. */
static int64_t stat_entries(const struct tp_host *h, size_t map_size)
{
	if (map_size < sizeof(struct tp_host))
		return -1;
	/* acquire: pairs with the release store of the magic in host_init() */
	if (atomic_load_explicit(&h->magic, memory_order_acquire) != TP_HOST_MAGIC)
		return -1;
	uint32_t ctx = h->contexts, used = tp_host_used(h);

	if (h->version != TP_HOST_VERSION || h->size > map_size || ctx < 1 || ctx > TP_MAX_CONNS ||
	    host_size_for(ctx) > map_size) /* (a count out of range: no index size for it) */
		return -1;
	return used < ctx ? used : ctx;
}

int tp_stat_table(const void *map, size_t map_size, int side, struct tp_stat_entry *out, int max)
{
	const struct tp_host *h = map;
	int64_t used = stat_entries(h, map_size);
	int n = 0;

	for (int64_t i = 0; i < used; i++) {
		struct tp_host_entry e = h->e[i];

		if (e.state == TP_ES_FREE)
			continue;
		if ((e.state != TP_ES_PENDING && !tp_entry_owned(&e)) || e.role == TP_ROLE_OFFER)
			continue; /* (an offer is no connection yet: tp_offer.c) */
		if (n < max)
			stat_fill(&out[n], &e, (uint32_t)i, side);
		n++;
	}
	return n;
}

/* Add the totals and live connections of the table at MAP to RET. */
static void link_stat_table(const void *map, size_t map_size, struct tp_link_stat *ret)
{
	const struct tp_host *h = map;
	int64_t used = stat_entries(h, map_size);
	struct tp_stats st;

	if (used < 0)
		return;
	/* relaxed, unlocked: counters for display (a slot freed while we read may count twice
	 * or not at all, once) */
	ret->setups += atomic_load_explicit(&h->totals.setups, memory_order_relaxed);
	ret->tx_bytes += atomic_load_explicit(&h->totals.tx_bytes, memory_order_relaxed);
	ret->rx_bytes += atomic_load_explicit(&h->totals.rx_bytes, memory_order_relaxed);
	ret->transfers += atomic_load_explicit(&h->totals.transfers, memory_order_relaxed);
	ret->congestion += atomic_load_explicit(&h->totals.congestion, memory_order_relaxed);
	ret->failovers += atomic_load_explicit(&h->totals.failovers, memory_order_relaxed);
	ret->expansions += atomic_load_explicit(&h->totals.expansions, memory_order_relaxed);
	ret->rings += h->pool_n;
	ret->rings_free += atomic_load_explicit(&h->pool_free, memory_order_relaxed);
	ret->ring_grants += atomic_load_explicit(&h->pool_grants, memory_order_relaxed);
	ret->ring_refusals += atomic_load_explicit(&h->pool_refusals, memory_order_relaxed);
	ret->ring_yields += atomic_load_explicit(&h->pool_yields, memory_order_relaxed);
	ret->offers_held += atomic_load_explicit(&h->offers_held, memory_order_relaxed);
	ret->offer_claims += atomic_load_explicit(&h->offer_claims, memory_order_relaxed);
	for (int64_t i = 0; i < used; i++) {
		struct tp_host_entry e = h->e[i]; /* a copy: tp_entry_owned() prunes its owners */

		if (e.state == TP_ES_FREE)
			continue;
		/* live: as tp_stat_table() lists them (a dead process's entry waits for reclaim) */
		if (e.state == TP_ES_OPEN && tp_entry_owned(&e))
			ret->conns++;
		tp_stats_load(&st, &e.stats);
		ret->tx_bytes += st.tx_bytes;
		ret->rx_bytes += st.rx_bytes;
		ret->transfers += st.tx_msgs_inline + st.tx_msgs_short + st.tx_msgs_long;
		ret->congestion += st.tx_full;
	}
}

/* Map the host table of LP's SIDE read-only: its address and size, or NULL. */
static void *host_map_ro(const struct ntb_link_params *lp, int side, size_t *ret_size)
{
	char path[NTB_PATH_MAX + 32];
	struct stat st;
	void *h;
	int fd;

	if (tp_host_path(lp, side, path, sizeof(path)))
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(struct tp_host)) {
		raw_close(fd);
		return NULL;
	}
	h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	raw_close(fd);
	if (h == MAP_FAILED)
		return NULL;
	*ret_size = (size_t)st.st_size;
	return h;
}

int tp_link_stat(const struct ntb_link_params *lp, struct tp_link_stat *ret)
{
	struct tp_link_stat s;
	char path[NTB_PATH_MAX + 32];

	memset(&s, 0, sizeof(s));
	if (tp_host_path(lp, 0, path, sizeof(path)))
		return -ENAMETOOLONG;
	for (int side = 0; side < 2; side++) {
		size_t size;
		void *h;

		if (lp->side >= 0 && side != lp->side)
			continue;
		h = host_map_ro(lp, side, &size);
		if (!h)
			continue;
		link_stat_table(h, size, &s);
		munmap(h, size);
	}
	*ret = s;
	return 0;
}

int tp_stat_list(const struct ntb_link_params *lp, struct tp_stat_entry *out, int max)
{
	int n = 0;

	for (int side = 0; side < 2; side++) {
		char path[NTB_PATH_MAX + 32];
		struct stat st;
		void *h;
		int fd, skip;

		if (lp->side >= 0 && side != lp->side)
			continue;
		if (tp_host_path(lp, side, path, sizeof(path)))
			return -ENAMETOOLONG;
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(struct tp_host)) {
			raw_close(fd);
			continue;
		}
		h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		raw_close(fd);
		if (h == MAP_FAILED)
			continue;
		skip = n < max ? n : max;
		n += tp_stat_table(h, (size_t)st.st_size, side, out + skip, max - skip);
		munmap(h, (size_t)st.st_size);
	}
	return n;
}
