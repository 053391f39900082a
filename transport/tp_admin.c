/* SPDX-License-Identifier: MIT */
/* A link's administrative state on this host (`ntbsock link down|up`): a flag file beside the
 * link file whose existence means "down". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/rawsys.h"

int tp_link_admin_path(const struct ntb_link_params *lp, char *buf, size_t len)
{
	int n;

	/* a pci link has no file of its own: its flag sits where a shm link's default would */
	if (strcmp(lp->backend, "shm") == 0 && lp->path[0])
		n = snprintf(buf, len, "%s%s", lp->path, TP_ADMIN_SUFFIX);
	else
		n = snprintf(buf, len, "/dev/shm/ntbsock-%s%s", lp->name, TP_ADMIN_SUFFIX);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int tp_link_admin_set(const struct ntb_link_params *lp, bool down)
{
	char path[NTB_PATH_MAX + 32];
	int fd, rc;

	rc = tp_link_admin_path(lp, path, sizeof(path));
	if (rc)
		return rc;
	if (!down)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
	/* O_NOFOLLOW: a symlink planted under the flag's name must not make us create its target */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
	if (fd < 0)
		return -errno;
	raw_close(fd);
	return 0;
}

int tp_link_admin_get(const struct ntb_link_params *lp)
{
	char path[NTB_PATH_MAX + 32];
	struct stat st;

	if (tp_link_admin_path(lp, path, sizeof(path)))
		return 0; /* no flag can exist under a name too long to create */
	return lstat(path, &st) == 0;
}
