// SPDX-License-Identifier: MIT
/* Pre-scan of the raw config text before libconfig sees it: reject NUL bytes, integer literals
 * libconfig 1.5 would silently truncate or misread, and unsafe @include targets. */
#include "conf/conf_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/compiler.h"

/* The text's buffer: anonymous pages of its own, not malloc(). A block of 128 KiB or more that
 * malloc() serves with mmap() raises glibc's mmap threshold to its size when freed, for the rest
 * of the host program (every process the library is preloaded into), whose large blocks then
 * come from the heap, cleared by calloc() page by page; a 1 MiB buffer did that in every
 * process. The mapping's length is kept in front of the text. */
struct text_hdr {
	size_t map_len;
	size_t pad; /* (the text stays 16-byte aligned) */
};

static char *text_map(char *old, size_t cap)
{
	size_t len = ALIGN_UP(sizeof(struct text_hdr) + cap + 1, (size_t)4096);
	void *p;

	if (old) {
		struct text_hdr *h = (struct text_hdr *)(void *)(old - sizeof(*h));

		p = mremap(h, h->map_len, len, MREMAP_MAYMOVE);
	} else {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (p == MAP_FAILED)
		return NULL;
	((struct text_hdr *)p)->map_len = len;
	return (char *)p + sizeof(struct text_hdr);
}

void conf_text_free(char *text)
{
	if (text) {
		struct text_hdr *h = (struct text_hdr *)(void *)(text - sizeof(*h));

		munmap(h, h->map_len);
	}
}

int conf_read_file(const char *path, char **ret_text, size_t *ret_len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, rc;

	/* O_NONBLOCK: opening a FIFO must not hang; it is then refused as not regular. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto err_close;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		goto err_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		goto err_close;
	}
	if (st.st_size > (off_t)CONF_FILE_MAX) {
		rc = -EFBIG;
		goto err_close;
	}
	/* its size and room to see it grow */
	size_t cap = (size_t)st.st_size + 4096u;

	if (cap > CONF_FILE_MAX + 1)
		cap = CONF_FILE_MAX + 1;
	buf = text_map(NULL, cap);
	if (!buf) {
		rc = -ENOMEM;
		goto err_close;
	}
	for (;;) {
		if (got == cap) { /* it grew while we read it: more room, up to the limit */
			size_t ncap = cap * 2 > CONF_FILE_MAX + 1 ? CONF_FILE_MAX + 1 : cap * 2;
			char *nb = text_map(buf, ncap);

			if (!nb) {
				rc = -ENOMEM;
				goto err_free;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t n = read(fd, buf + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto err_free;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > CONF_FILE_MAX) {
			rc = -EFBIG; /* it grew while we read it */
			goto err_free;
		}
	}
	close(fd);
	buf[got] = '\0';
	*ret_text = buf;
	*ret_len = got;
	return 0;

err_free:
	conf_text_free(buf);
err_close:
	close(fd);
	return rc;
}

struct scan {
	struct conf_ctx *ctx;
	const char      *file;
	const char      *p, *end;
	int              line;
	const char      *include_dir;
	int              depth;
};

static int scan_err(struct scan *sc, const char *tok, size_t toklen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int scan_err(struct scan *sc, const char *tok, size_t toklen, const char *fmt, ...)
{
	char value[128];
	va_list ap;

	if (toklen >= sizeof(value))
		toklen = sizeof(value) - 1;
	if (tok) {
		memcpy(value, tok, toklen);
		value[toklen] = '\0';
	}
	va_start(ap, fmt);
	conf_err_vset(sc->ctx->err, sc->file, sc->line, NULL, tok ? value : NULL, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool is_name_start(char c)
{
	return isalpha((unsigned char)c) || c == '*';
}

static bool is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '*';
}

/* A number token at sc->p (after an optional sign). Floats are left to libconfig. */
static int scan_number(struct scan *sc)
{
	const char *start = sc->p, *q = sc->p, *digits;
	bool neg = false, hex = false, is64 = false;
	size_t ndig;

	if (*q == '+' || *q == '-')
		neg = *q++ == '-';
	if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) {
		hex = true;
		q += 2;
	}
	digits = q;
	while (q < sc->end && (hex ? isxdigit((unsigned char)*q) : isdigit((unsigned char)*q)))
		q++;
	ndig = (size_t)(q - digits);
	if (!hex && q < sc->end && (*q == '.' || *q == 'e' || *q == 'E')) {
		/* a float: skip its characters */
		while (q < sc->end && (isdigit((unsigned char)*q) || *q == '.' || *q == 'e' ||
				       *q == 'E' || *q == '+' || *q == '-'))
			q++;
		sc->p = q;
		return 0;
	}
	if (q < sc->end && *q == 'L') {
		is64 = true;
		q++;
		if (q < sc->end && *q == 'L')
			q++;
	}
	sc->p = q;
	if (ndig == 0)
		return 0; /* not a number after all ("-" alone): libconfig reports it */
	if (!hex && ndig > 1 && digits[0] == '0')
		return scan_err(sc, start, (size_t)(q - start),
				"syntax error: number with a leading zero (octal is not supported; "
				"write a mode as a string like \"0600\")");
	while (ndig > 1 && digits[0] == '0') {
		digits++;
		ndig--;
	}
	if (hex) {
		if (ndig > (is64 ? 16u : 8u))
			return scan_err(sc, start, (size_t)(q - start),
					"syntax error: integer out of range (beyond %d bits)",
					is64 ? 64 : 32);
		return 0;
	}
	{
		char buf[32];
		unsigned long long v;

		if (ndig > 20)
			goto too_big;
		memcpy(buf, digits, ndig);
		buf[ndig] = '\0';
		errno = 0;
		v = strtoull(buf, NULL, 10);
		if (errno == ERANGE)
			goto too_big;
		if (is64 ? v > (unsigned long long)LLONG_MAX + (neg ? 1 : 0)
			 : v > (unsigned long long)INT_MAX + (neg ? 1 : 0))
			goto too_big;
		return 0;
	}
too_big:
	return scan_err(sc, start, (size_t)(q - start),
			"syntax error: integer out of range (beyond %d bits; write large sizes as "
			"strings like \"64G\")", is64 ? 64 : 32);
}

static int scan_include(struct scan *sc)
{
	const char *q = sc->p + strlen("@include");
	const char *name, *close;
	char full[PATH_MAX];
	char *text;
	size_t len, nlen;
	int rc;

	while (q < sc->end && (*q == ' ' || *q == '\t'))
		q++;
	if (q >= sc->end || *q != '"')
		return scan_err(sc, NULL, 0, "syntax error: @include needs a quoted file name");
	name = ++q;
	close = memchr(name, '"', (size_t)(sc->end - name));
	if (!close || memchr(name, '\n', (size_t)(close - name)))
		return scan_err(sc, NULL, 0, "syntax error: unterminated @include file name");
	nlen = (size_t)(close - name);
	if (memchr(name, '\\', nlen))
		return scan_err(sc, name, nlen, "syntax error: escapes in @include file names are "
						"not supported");
	if (nlen == 0)
		return scan_err(sc, name, nlen, "syntax error: empty @include file name");
	if (sc->depth + 1 >= CONF_INCLUDE_MAX)
		return scan_err(sc, name, nlen, "syntax error: @include nested too deeply (at most "
						"%d levels)", CONF_INCLUDE_MAX - 1);
	/* Same path libconfig 1.5 will open: include_dir + "/" + name, or name alone. */
	if (sc->include_dir)
		rc = snprintf(full, sizeof(full), "%s/%.*s", sc->include_dir, (int)nlen, name);
	else
		rc = snprintf(full, sizeof(full), "%.*s", (int)nlen, name);
	if (rc < 0 || (size_t)rc >= sizeof(full))
		return scan_err(sc, name, nlen, "syntax error: @include file name too long");
	rc = conf_read_file(full, &text, &len);
	if (rc) {
		const char *why = rc == -ENOENT ? "no such file"
				: rc == -EFBIG  ? "larger than 1 MiB"
				: rc == -EISDIR ? "is a directory"
				: rc == -EINVAL ? "not a regular file"
				: rc == -EACCES ? "permission denied"
				: "cannot read";
		return scan_err(sc, full, strlen(full), "syntax error: cannot open include file: %s",
				why);
	}
	rc = conf_scan_text(sc->ctx, full, text, len, sc->include_dir, sc->depth + 1);
	conf_text_free(text);
	sc->p = close + 1;
	return rc;
}

static bool at_line_start(const struct scan *sc, const char *text)
{
	for (const char *q = sc->p; q > text; q--) {
		if (q[-1] == '\n')
			return true;
		if (q[-1] != ' ' && q[-1] != '\t')
			return false;
	}
	return true;
}

int conf_scan_text(struct conf_ctx *ctx, const char *file, const char *text, size_t len,
		   const char *include_dir, int depth)
{
	struct scan sc = { ctx, file, text, text + len, 1, include_dir, depth };
	const char *nul = memchr(text, '\0', len);
	int rc;

	if (nul) {
		for (const char *q = text; q < nul; q++)
			sc.line += *q == '\n';
		return scan_err(&sc, NULL, 0, "syntax error: binary data (NUL byte) in the file");
	}
	while (sc.p < sc.end) {
		char c = *sc.p;

		if (c == '\n') {
			sc.line++;
			sc.p++;
		} else if (c == '#' || (c == '/' && sc.p + 1 < sc.end && sc.p[1] == '/')) {
			while (sc.p < sc.end && *sc.p != '\n')
				sc.p++;
		} else if (c == '/' && sc.p + 1 < sc.end && sc.p[1] == '*') {
			sc.p += 2;
			while (sc.p < sc.end && !(sc.p[0] == '*' && sc.p + 1 < sc.end && sc.p[1] == '/')) {
				sc.line += *sc.p == '\n';
				sc.p++;
			}
			sc.p = sc.p < sc.end ? sc.p + 2 : sc.end;
		} else if (c == '"') {
			for (sc.p++; sc.p < sc.end && *sc.p != '"' && *sc.p != '\n'; sc.p++)
				if (*sc.p == '\\' && sc.p + 1 < sc.end && sc.p[1] != '\n')
					sc.p++;
			if (sc.p >= sc.end || *sc.p != '"')
				return scan_err(&sc, NULL, 0, "syntax error: unterminated string (a "
							    "string cannot span lines)");
			sc.p++;
		} else if (c == '@' && (size_t)(sc.end - sc.p) >= 8 &&
			   strncmp(sc.p, "@include", 8) == 0 && at_line_start(&sc, text)) {
			rc = scan_include(&sc);
			if (rc)
				return rc;
		} else if (is_name_start(c)) {
			while (sc.p < sc.end && is_name_char(*sc.p))
				sc.p++;
		} else if (isdigit((unsigned char)c) ||
			   ((c == '-' || c == '+') && sc.p + 1 < sc.end &&
			    isdigit((unsigned char)sc.p[1]))) {
			rc = scan_number(&sc);
			if (rc)
				return rc;
		} else {
			sc.p++;
		}
	}
	/* libconfig 1.5 keeps a setting's line in an unsigned short */
	if (sc.line > 65535)
		return scan_err(&sc, NULL, 0, "syntax error: too many lines (at most 65535)");
	return 0;
}
