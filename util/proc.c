/* SPDX-License-Identifier: MIT */
/* Process liveness (util/proc.h). Raw system calls (util/rawsys.h): the preload library
 * interposes close(). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/proc.h"
#include "util/rawsys.h"

uint64_t proc_starttime(pid_t pid, char *ret_state)
{
	char path[64], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = raw_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ssize_t n = raw_read(fd, buf, sizeof(buf) - 1);
	raw_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
	if (!p || p[1] != ' ')
		return 0;
	p += 2;
	if (ret_state)
		*ret_state = *p;
	/* p is at field 3 (state); advance to field 22 */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return 0;
		p++;
	}
	return strtoull(p, NULL, 10);
}

bool proc_alive(pid_t pid, uint64_t starttime)
{
	char state = 0;

	if (pid <= 0)
		return false;
	uint64_t st = proc_starttime(pid, &state);
	if (st == 0) /* no /proc (or hidden) */
		return kill(pid, 0) == 0 || errno != ESRCH;
	if (state == 'Z' || state == 'X')
		return false;
	return starttime == 0 || st == starttime;
}
