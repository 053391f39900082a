/* SPDX-License-Identifier: MIT */
/* The shm backend: the region lives in a shared-memory file (default /dev/shm/ntbsock-<name>)
 * created race-free by the first opener; doorbells are futex wake-ups on the shared word. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ntb/ntb_int.h"
#include "ntb/backend/shm_int.h"
#include "util/log.h"
#include "util/mapguard.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

#define NTB_HUGE_PAGE (2u << 20) /* (x86-64's transparent huge page) */

struct shm_priv {
	int   fd;
	dev_t dev;
	ino_t ino;
	bool  has_ivs;               /* joined an ivshmem server: interrupt doorbells */
	struct ntb_ivs_client ivs;
};

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)uaddr, op, val, ts, NULL, 0);
}

/* 2 MiB pages for [BASE, BASE + LEN) of a link file where its tmpfs gives them on request
 * (huge=advise; huge=always and within_size give them anyway, huge=never not at all): a
 * process's first touch of a ring then maps 2 MiB at a time, not 4 KiB (a trap each where a
 * hypervisor keeps the page tables: ntbsock.conf(5), path). Best effort; errno kept. */
static void shm_ask_huge(void *base, size_t len)
{
	int saved = errno;

	madvise(base, len, MADV_HUGEPAGE);
	errno = saved;
}

/* Create the file under a temporary name, initialise it, then link() it into place (atomic;
 * EEXIST: another opener won). Returns 0, -EEXIST (use the existing file), or -errno. */
static int shm_create(struct ntb_link *nl, const char *path)
{
	const struct ntb_link_params *p = &nl->params;
	mode_t mode = p->mode ? p->mode : 0600;
	char tmp[NTB_PATH_MAX + 64];
	uint32_t rnd = (uint32_t)(clock_mono_ns() ^ ((uint64_t)getpid() << 16));
	struct ntb_region_hdr h;
	int rc;

	if (p->window_size == 0) {
		ntb_set_detail("shm file %s absent and window_size is 0: nothing to create", path);
		return -ENOENT;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%08x", path, (int)getpid(), rnd);
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = -errno;
		ntb_set_detail("shm file %s: cannot create: %s", tmp, strerror(errno));
		return rc;
	}
	size_t size = ntb_region_size_for(p->window_size);
	/* The umask may have narrowed the mode; the configured mode is applied exactly. */
	if (fchmod(fd, mode) < 0 ||
	    (p->group != (gid_t)-1 && fchown(fd, (uid_t)-1, p->group) < 0) ||
	    ftruncate(fd, (off_t)size) < 0) {
		rc = -errno;
		ntb_set_detail("shm file %s: cannot set mode/group/size: %s", tmp, strerror(errno));
		goto err_unlink;
	}
	/* The header's page is the first the file gets: on a tmpfs that gives huge pages on
	 * request (huge=advise) it must be asked for here already, else the file's first 2 MiB
	 * stay small pages for good (shm_map()). */
	size_t hmap = size >= NTB_HUGE_PAGE ? NTB_HUGE_PAGE : NTB_HDR_SIZE;
	void *base = mmap(NULL, hmap, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		ntb_set_detail("shm file %s: mmap: %s", tmp, strerror(errno));
		goto err_unlink;
	}
	shm_ask_huge(base, hmap);
	ntb_region_hdr_build(&h, p->window_size);
	atomic_init(&h.init_word, NTB_INIT_DONE); /* (a private header, copied below) */
	memcpy(base, &h, sizeof(h));
	/* Release: header fields before magic; pairs with the acquire in ntb_region_validate().
	 * (link() below publishes the whole file anyway.) */
	atomic_store_explicit(&((struct ntb_region_hdr *)base)->magic, NTB_REGION_MAGIC,
			      memory_order_release);
	munmap(base, hmap);
	raw_close(fd);
	/* link() fails if PATH exists: atomic create-if-absent of an initialised file. Where
	 * hard links are not supported, renameat2(RENAME_NOREPLACE) does the same. */
	int lrc = link(tmp, path);
	if (lrc < 0 && (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP))
		lrc = renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE);
	if (lrc < 0) {
		rc = errno == EEXIST ? -EEXIST : -errno;
		if (rc != -EEXIST)
			ntb_set_detail("shm file %s: link into place: %s", path, strerror(errno));
		unlink(tmp);
		return rc;
	}
	unlink(tmp);
	LOG(LL_DEBUG, "ntb: created %s (%zu bytes, mode %04o)", path, size, (unsigned)mode);
	return 0;

err_unlink:
	raw_close(fd);
	unlink(tmp);
	return rc;
}

static void shm_close(struct ntb_link *link);

/* Join the ivshmem server that shares our file with QEMU: interrupt doorbells with
 * ivshmem-doorbell devices. The server's memory must be our file. */
static int join_ivshmem_server(struct ntb_link *link, struct shm_priv *sp)
{
	const char *srv = link->params.ivshmem_server;
	char err[300];
	struct stat st;
	int shm_fd = -1;

	int rc = ntb_ivs_join(srv, &sp->ivs, &shm_fd, err, sizeof(err));
	if (rc) {
		ntb_set_detail("link %s: %s", link->params.name, err);
		return rc;
	}
	if (fstat(shm_fd, &st) < 0 || st.st_dev != sp->dev || st.st_ino != sp->ino) {
		ntb_set_detail("link %s: ivshmem server %s shares another file than %s",
			       link->params.name, srv, link->params.path);
		raw_close(shm_fd);
		ntb_ivs_leave(&sp->ivs);
		return -EINVAL;
	}
	raw_close(shm_fd);
	sp->has_ivs = true;
	link->caps |= NTB_CAP_EVENT_DB;
	link->db_id = sp->ivs.own_id + 1;
	LOG(LL_DEBUG, "ntb: link %s: ivshmem server %s: peer id %u", link->params.name, srv,
	    sp->ivs.own_id);
	return 0;
}

/* LINK's file name into PATH (NTB_PATH_MAX + 1 bytes): the configured one or the default under
 * /dev/shm; kept in the parameters for ntb_link_info(). */
static int shm_path(struct ntb_link *link, char *path)
{
	struct ntb_link_params *p = &link->params;

	if (p->path[0])
		snprintf(path, NTB_PATH_MAX + 1, "%s", p->path);
	else if (snprintf(path, NTB_PATH_MAX + 1, "/dev/shm/ntbsock-%s", p->name) >=
		 NTB_PATH_MAX + 1) {
		ntb_set_detail("shm path for link %s too long", p->name);
		return -ENAMETOOLONG;
	}
	memcpy(p->path, path, NTB_PATH_MAX + 1); /* resolved, for ntb_link_info() */
	return 0;
}

/* Open the link file PATH (created when missing, unless only inspecting): its descriptor, or a
 * negative error. */
static int shm_open_file(struct ntb_link *link, const char *path)
{
	bool inspect = link->params.inspect_only;
	int fd, rc;

	for (int attempt = 0; attempt < 4; attempt++) {
		fd = open(path, (inspect ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			return fd_park(fd); /* (kept open: among the library's, util/fdpark.h) */
		rc = -errno;
		if (errno != ENOENT || inspect) {
			ntb_set_detail("shm file %s: %s", path,
				       errno == ELOOP ? "is a symbolic link (refused)"
						      : strerror(errno));
			return rc;
		}
		rc = shm_create(link, path);
		if (rc && rc != -EEXIST)
			return rc;
	}
	ntb_set_detail("shm file %s: appears and disappears", path);
	return -EAGAIN;
}

/* Is the open link file FD (PATH) one we may map: a regular file of ours (unless a foreign owner
 * is allowed), large enough for a header? 0 with *RET_ST, or a negative error. */
static int shm_check_file(struct ntb_link *link, int fd, const char *path, struct stat *ret_st)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		int rc = -errno;

		ntb_set_detail("shm file %s: fstat: %s", path, strerror(errno));
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		ntb_set_detail("shm file %s: not a regular file", path);
		return -EINVAL;
	}
	if (st.st_uid != geteuid() && !link->params.allow_foreign_owner) {
		ntb_set_detail("shm file %s: owned by uid %u, not us (uid %u); refused",
			       path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if ((size_t)st.st_size < NTB_HDR_SIZE) {
		ntb_set_detail("shm file %s: %lld bytes, too small for a header: truncated or foreign",
			       path, (long long)st.st_size);
		return -EINVAL;
	}
	*ret_st = st;
	return 0;
}

/* Map SIZE bytes of the link file FD (PATH) and prepare its region (initialised when this side
 * may): 0 with *RET_BASE, or a negative error (nothing mapped). */
static int shm_map(struct ntb_link *link, int fd, const char *path, size_t size, void **ret_base)
{
	struct ntb_link_params *p = &link->params;
	bool inspect = p->inspect_only;
	void *base = mmap(NULL, size, inspect ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
			  fd, 0);
	int rc;

	if (base == MAP_FAILED) {
		rc = -errno;
		ntb_set_detail("shm file %s: mmap %zu bytes: %s", path, size, strerror(errno));
		return rc;
	}
	if (!inspect) /* (a look, ntbsock stat or check, allocates nothing it need not) */
		shm_ask_huge(base, size);
	rc = ntb_region_prepare(base, size, p->window_size, !inspect && p->side != 1, &link->hdr);
	if (rc) {
		char why[200];
		snprintf(why, sizeof(why), "%s", ntb_strerror_detail());
		ntb_set_detail("shm file %s: %s", path, why);
		munmap(base, size);
		return rc;
	}
	*ret_base = base;
	return 0;
}

static int shm_open_backend(struct ntb_link *link)
{
	struct ntb_link_params *p = &link->params;
	char path[NTB_PATH_MAX + 1];
	struct stat st = { 0 };
	void *base = NULL;
	int fd, rc;

	if ((rc = shm_path(link, path)))
		return rc;
	if ((fd = shm_open_file(link, path)) < 0)
		return fd;
	if ((rc = shm_check_file(link, fd, path, &st)))
		goto err_close;
	size_t size = (size_t)st.st_size;
	if ((rc = shm_map(link, fd, path, size, &base)))
		goto err_close;
	struct shm_priv *sp = calloc(1, sizeof(*sp));
	if (!sp) {
		munmap(base, size);
		rc = -ENOMEM;
		goto err_close;
	}
	sp->fd = fd;
	sp->dev = st.st_dev;
	/* A truncation of the file under us must not SIGBUS the host program. */
	if (mapguard_add(base, size) < 0)
		LOG(LL_DEBUG, "ntb: shm file %s: mapping not guarded against truncation", path);
	sp->ino = st.st_ino;
	link->priv = sp;
	link->base = base;
	link->map_size = size;
	link->wc = false;
	link->caps = NTB_CAP_FUTEX_WAKE | NTB_CAP_DB_DIRECT | NTB_CAP_EV_RING | NTB_CAP_WORD_WAKE;
	link->side_hint = -1;
	if (p->ivshmem_server[0] && p->doorbell && !p->inspect_only) {
		rc = join_ivshmem_server(link, sp);
		if (rc) {
			shm_close(link);
			return rc;
		}
	}
	return 0;

err_close:
	fd_close_own(fd);
	return rc;
}

static void shm_close(struct ntb_link *link)
{
	struct shm_priv *sp = link->priv;
	if (link->base) {
		mapguard_remove(link->base);
		munmap(link->base, link->map_size);
	}
	if (sp) {
		if (sp->has_ivs)
			ntb_ivs_leave(&sp->ivs);
		fd_close_own(sp->fd);
		free(sp);
	}
	link->base = NULL;
	link->priv = NULL;
}

static void shm_db_wake(struct ntb_link *link, _Atomic uint32_t *peer_db)
{
	/* Full fence: the doorbell store before the load of db_waiters — the ringer half of the
	 * Dekker pair with ntb_db_wait()'s seq_cst increment and re-read. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&link->peer_local->db_waiters, memory_order_relaxed))
		futex(peer_db, FUTEX_WAKE, INT_MAX, NULL); /* shared (not private): other processes */
	struct shm_priv *sp = link->priv;
	uint32_t target;
	if (sp->has_ivs && (target = ntb_peer_db_target(link)) != 0)
		ntb_ivs_ring(&sp->ivs, target - 1); /* a guest's ivshmem-doorbell device */
}

static int shm_db_wait_slice(struct ntb_link *link, _Atomic uint32_t *db, uint32_t seen,
			     int slice_us)
{
	struct shm_priv *sp = link->priv;
	if (slice_us <= 0)
		return 0;
	/* relaxed: a hint (see ntb_db_wait()) */
	if (!(atomic_load_explicit(&link->ctrl_in->caps.v, memory_order_relaxed) &
	      NTB_CAP_FUTEX_WAKE)) {
		/* A guest peer: its ring is an interrupt on our eventfd when it rings us, else
		 * poll in 1 ms steps. */
		if (sp->has_ivs && ntb_db_event_mine(link))
			return ntb_evfd_wait_slice(sp->ivs.rx_fd, db, seen, (slice_us + 999) / 1000);
		struct timespec one = { 0, (slice_us < 1000 ? slice_us : 1000) * 1000L };
		return nanosleep(&one, NULL) < 0 && errno == EINTR ? -EINTR : 0;
	}
	struct timespec ts = { slice_us / 1000000, (long)(slice_us % 1000000) * 1000L };
	/* The kernel compares *DB with SEEN and sleeps atomically: a ringer's store (release,
	 * ntb_peer_db_ring()) that lands after our caller's seq_cst re-read is either seen here
	 * (EAGAIN) or followed by its FUTEX_WAKE (shm_db_wake(): it loads db_waiters after a full
	 * fence). The caller's acquire re-read (ntb_db_wait()) then orders what it announced. */
	if (futex(db, FUTEX_WAIT, seen, &ts) < 0 && errno == EINTR)
		return -EINTR;
	return 0; /* woken, value already changed (EAGAIN) or slice over (ETIMEDOUT) */
}

static int shm_check_mapping(struct ntb_link *link)
{
	struct shm_priv *sp = link->priv;
	struct stat st, pst;
	if (mapguard_lost(link->base)) {
		ntb_set_detail("shm file %s was truncated under the live mapping (access faulted)",
			       link->params.path);
		return -EIO;
	}
	if (fstat(sp->fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < link->hdr.region_size) {
		ntb_set_detail("shm file %s truncated to %lld bytes (region needs %llu)",
			       link->params.path, (long long)st.st_size,
			       (unsigned long long)link->hdr.region_size);
		return -EIO;
	}
	if (stat(link->params.path, &pst) < 0 || pst.st_dev != sp->dev || pst.st_ino != sp->ino) {
		ntb_set_detail("shm file %s no longer names our mapping (removed or replaced)",
			       link->params.path);
		return -ESTALE;
	}
	return 0;
}

static const char *shm_location(const struct ntb_link *link)
{
	return link->params.path;
}

static int shm_db_fd(const struct ntb_link *link)
{
	const struct shm_priv *sp = link->priv;

	return sp && sp->has_ivs ? sp->ivs.rx_fd : -ENOTSUP;
}

const struct ntb_backend_ops ntb_shm_ops = {
	.name = "shm",
	.open = shm_open_backend,
	.close = shm_close,
	.db_wake = shm_db_wake,
	.db_wait_slice = shm_db_wait_slice,
	.check_mapping = shm_check_mapping,
	.location = shm_location,
	.db_fd = shm_db_fd,
};
