// SPDX-License-Identifier: MIT
/* Logging: raw write(2) (util/rawsys.h), so the interposer's own write() never sees it. */
#include "util/log.h"
#include "util/fdpark.h"
#include "util/rawsys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

int log_level_current = LL_WARN;
static int log_out_fd = 2;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void log_set_level(int level)
{
	if (level < LL_ERROR)
		level = LL_ERROR;
	if (level > LL_DEBUG)
		level = LL_DEBUG;
	log_level_current = level;
}

int log_parse_level(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int i = LL_ERROR; i <= LL_DEBUG; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	if (strcasecmp(name, "warning") == 0)
		return LL_WARN;
	return -EINVAL;
}

const char *log_level_name(int level)
{
	if (level < LL_ERROR || level > LL_DEBUG)
		return "?";
	return level_names[level];
}

int log_set_file(const char *path)
{
	int old = log_out_fd;

	if (!path || !*path) {
		log_out_fd = 2;
	} else {
		int fd = raw_open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		log_out_fd = fd_park(fd);
	}
	if (old != 2 && old != log_out_fd)
		fd_close_own(old);
	return 0;
}

int log_fd(void)
{
	return log_out_fd;
}

void log_vwrite(int level, const char *fmt, va_list ap)
{
	char buf[1024];
	int saved = errno;
	int n = snprintf(buf, sizeof(buf), "ntbsock[%d]: %s: ", (int)getpid(), log_level_name(level));
	if (n < 0)
		n = 0;
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	buf[len++] = '\n';
	size_t off = 0;
	while (off < len) {
		long w = raw_write(log_out_fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	errno = saved;
}

void log_write(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(level, fmt, ap);
	va_end(ap);
}
