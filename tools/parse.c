// SPDX-License-Identifier: MIT
/* Option values of the ntbsock command: size lists, counts, `link`'s arguments, and JSON string
 * output. */
#include "tools/tools_int.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One size: digits, optional K/M/G (or KiB/MiB/GiB), binary multiples; at most 1 GiB. */
static int parse_one_size(const char *s, size_t n, size_t *ret)
{
	uint64_t v = 0, mul = 1;
	size_t i = 0;

	if (n == 0 || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	for (; i < n && isdigit((unsigned char)s[i]); i++) {
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > (1ull << 30))
			return -ERANGE;
	}
	if (i < n) {
		const char *suf = s + i;
		size_t sl = n - i;

		switch (toupper((unsigned char)suf[0])) {
		case 'K': mul = 1ull << 10; break;
		case 'M': mul = 1ull << 20; break;
		case 'G': mul = 1ull << 30; break;
		default: return -EINVAL;
		}
		if (!(sl == 1 || (sl == 3 && strncasecmp(suf + 1, "iB", 2) == 0)))
			return -EINVAL;
	}
	if (v == 0)
		return -EINVAL;
	if (v * mul > (1ull << 30))
		return -ERANGE;
	*ret = (size_t)(v * mul);
	return 0;
}

int tool_parse_size_list(const char *s, size_t *ret_sizes, int max)
{
	size_t tmp[256];
	int count = 0;

	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s;;) {
		size_t n = strcspn(p, ",");
		int rc;

		if (count >= max || count >= (int)(sizeof(tmp) / sizeof(tmp[0])))
			return -E2BIG;
		rc = parse_one_size(p, n, &tmp[count]);
		if (rc < 0)
			return rc;
		count++;
		if (!p[n])
			break;
		p += n + 1;
	}
	memcpy(ret_sizes, tmp, (size_t)count * sizeof(tmp[0]));
	return count;
}

int tool_parse_count(const char *s, uint64_t limit, uint64_t *ret)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > limit)
			return -ERANGE;
	}
	if (v == 0)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int link_args_error(char *errbuf, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int tool_parse_link_args(int argc, char **argv, struct tool_link_args *ret, char *errbuf,
			 size_t errlen)
{
	static const struct option opts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tool_link_args a = { .conf = NULL };
	int opt;

	optind = 0; /* 0, not 1: a full restart of getopt (a parse may have stopped mid-word) */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			a.conf = optarg;
			break;
		case 'h':
			a.help = true;
			*ret = a;
			return 0;
		default:
			return link_args_error(errbuf, errlen,
					       "unknown option or missing argument: '%s'",
					       argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return link_args_error(errbuf, errlen, "missing action: down or up");
	if (strcmp(argv[optind], "down") == 0)
		a.down = true;
	else if (strcmp(argv[optind], "up") != 0)
		return link_args_error(errbuf, errlen, "unknown action '%s' (down or up)",
				       argv[optind]);
	if (++optind >= argc)
		return link_args_error(errbuf, errlen, "missing link name");
	a.name = argv[optind];
	if (!a.name[0])
		return link_args_error(errbuf, errlen, "empty link name");
	if (++optind < argc)
		return link_args_error(errbuf, errlen, "unexpected argument '%s'", argv[optind]);
	*ret = a;
	return 0;
}

void tool_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}
