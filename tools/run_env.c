// SPDX-License-Identifier: MIT
/* Finding libntbsock.so and composing LD_PRELOAD for `ntbsock run`. */
#include "tools/tools_int.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIB_NAME "libntbsock.so"

/* Append the LEN bytes at S to BUF (which holds *POS bytes and a NUL), keeping it terminated. */
static int append(char *buf, size_t cap, size_t *pos, const char *s, size_t len)
{
	if (*pos + len + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(buf + *pos, s, len);
	*pos += len;
	buf[*pos] = '\0';
	return 0;
}

int tool_preload_join(const char *lib, const char *existing, char *buf, size_t len)
{
	size_t pos = 0, lib_len = strlen(lib);
	const char *p = existing;

	if (len == 0)
		return -ENAMETOOLONG;
	buf[0] = '\0';
	if (append(buf, len, &pos, lib, lib_len) < 0)
		return -ENAMETOOLONG;
	while (p && *p) {
		size_t n = strcspn(p, ": ");

		/* ld.so would load the same path once anyway; dropping the copy keeps ours first. */
		if (n > 0 && !(n == lib_len && memcmp(p, lib, n) == 0)) {
			if (append(buf, len, &pos, ":", 1) < 0 || append(buf, len, &pos, p, n) < 0)
				return -ENAMETOOLONG;
		}
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

/* Directory part of the absolute path PATH into BUF ("/a/b/c" → "/a/b", "/c" → ""). */
static void dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (n >= len)
		n = len - 1;
	memcpy(buf, path, n);
	buf[n] = '\0';
}

/* Strip trailing slashes of S in place (keeping "/" itself). */
static void strip_slashes(char *s)
{
	size_t n = strlen(s);

	while (n > 1 && s[n - 1] == '/')
		s[--n] = '\0';
}

/* Add one formatted candidate to PATHS unless it does not fit. */
static void add_candidate(char paths[][4096], int max, int *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void add_candidate(char paths[][4096], int max, int *n, const char *fmt, ...)
{
	va_list ap;
	int len;

	if (*n >= max)
		return;
	va_start(ap, fmt);
	len = vsnprintf(paths[*n], 4096, fmt, ap);
	va_end(ap);
	if (len > 0 && len < 4096)
		(*n)++;
}

int tool_lib_candidates(const char *exe, const char *libdir, const char *bindir,
			char paths[][4096], int max)
{
	char dir[4096], lib[4096], bin[4096];
	int n = 0;

	dir_of(exe, dir, sizeof(dir));
	add_candidate(paths, max, &n, "%s/" LIB_NAME, dir);
	if (libdir && *libdir) {
		snprintf(lib, sizeof(lib), "%s", libdir);
		strip_slashes(lib);
		bin[0] = '\0';
		if (bindir && *bindir) {
			snprintf(bin, sizeof(bin), "%s", bindir);
			strip_slashes(bin);
		}
		size_t dl = strlen(dir), bl = strlen(bin);
		/* Installed under a staging root (make install DESTDIR=ROOT): EXE is ROOT/BINDIR/x,
		 * so the library is ROOT/LIBDIR/ntbsock/. Without a root this is LIBDIR itself. */
		if (bl > 0 && dl >= bl && strcmp(dir + dl - bl, bin) == 0)
			add_candidate(paths, max, &n, "%.*s%s/ntbsock/" LIB_NAME, (int)(dl - bl), dir,
				      lib);
		else
			add_candidate(paths, max, &n, "%s/ntbsock/" LIB_NAME, lib);
	}
	add_candidate(paths, max, &n, "%s/../lib/ntbsock/" LIB_NAME, dir);
	return n;
}

int tool_find_library(char *buf, size_t len, char *errbuf, size_t errlen)
{
	const char *env = getenv("NTBSOCK_LIB");
	char exe[PATH_MAX], resolved[PATH_MAX];
	char cand[3][4096];
	const char *libdir = NULL, *bindir = NULL;
	ssize_t n;
	int count;
	size_t used = 0;

#ifdef NTBSOCK_LIBDIR
	libdir = NTBSOCK_LIBDIR;
#endif
#ifdef NTBSOCK_BINDIR
	bindir = NTBSOCK_BINDIR;
#endif
	if (env && *env) {
		if (!realpath(env, resolved) || access(resolved, R_OK) != 0) {
			snprintf(errbuf, errlen, "NTBSOCK_LIB=%s: %s", env, strerror(errno));
			return -ENOENT;
		}
		if (strlen(resolved) >= len)
			return -ENAMETOOLONG;
		strcpy(buf, resolved);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(errbuf, errlen, "cannot read /proc/self/exe: %s", strerror(errno));
		return -ENOENT;
	}
	exe[n] = '\0';
	count = tool_lib_candidates(exe, libdir, bindir, cand, 3);
	for (int i = 0; i < count; i++) {
		if (realpath(cand[i], resolved) && access(resolved, R_OK) == 0) {
			if (strlen(resolved) >= len)
				return -ENAMETOOLONG;
			strcpy(buf, resolved);
			return 0;
		}
	}
	used = (size_t)snprintf(errbuf, errlen, "libntbsock.so not found (tried");
	for (int i = 0; i < count && used < errlen; i++)
		used += (size_t)snprintf(errbuf + used, errlen - used, "%s %s", i ? "," : "",
					 cand[i]);
	if (used < errlen)
		snprintf(errbuf + used, errlen - used, "; set NTBSOCK_LIB)");
	return -ENOENT;
}
