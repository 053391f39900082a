// SPDX-License-Identifier: MIT
/* Value parsers of the config: sizes, names, addresses, prefixes, port ranges, PCI device
 * selectors; address matching. */
#include "conf/conf_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int conf_parse_size(const char *s, uint64_t *ret)
{
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {
		{ "", 0 }, { "K", 10 }, { "KB", 10 }, { "KiB", 10 }, { "M", 20 }, { "MB", 20 },
		{ "MiB", 20 }, { "G", 30 }, { "GB", 30 }, { "GiB", 30 }, { "T", 40 },
		{ "TB", 40 }, { "TiB", 40 },
	};
	uint64_t v = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(p, units[i].suffix) != 0)
			continue;
		if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
			return -ERANGE;
		*ret = v << units[i].shift;
		return 0;
	}
	return -EINVAL;
}

int conf_check_name(const char *s, char *errbuf, size_t len)
{
	size_t n = strlen(s);

	if (n == 0) {
		snprintf(errbuf, len, "must not be empty");
		return -EINVAL;
	}
	if (n > CONF_NAME_MAX) {
		snprintf(errbuf, len, "too long (%zu characters, at most %d)", n, CONF_NAME_MAX);
		return -EINVAL;
	}
	if (s[0] == '.' || s[0] == '-') {
		snprintf(errbuf, len, "must not start with '%c'", s[0]);
		return -EINVAL;
	}
	for (const char *p = s; *p; p++) {
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') {
			snprintf(errbuf, len, "invalid character (allowed: letters, digits, '_', '-', '.')");
			return -EINVAL;
		}
	}
	return 0;
}

int conf_parse_addr(const char *s, struct conf_addr *ret)
{
	struct conf_addr a;

	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET, s, &a.u.v4) == 1) {
		a.family = AF_INET;
	} else if (inet_pton(AF_INET6, s, &a.u.v6) == 1) {
		a.family = AF_INET6;
		if (IN6_IS_ADDR_V4MAPPED(&a.u.v6)) {
			struct in_addr v4;

			memcpy(&v4, &a.u.v6.s6_addr[12], 4);
			memset(&a.u, 0, sizeof(a.u));
			a.u.v4 = v4;
			a.family = AF_INET;
		}
	} else {
		return -EINVAL;
	}
	*ret = a;
	return 0;
}

static const uint8_t *addr_bytes(const struct conf_addr *a, int *ret_bits)
{
	if (a->family == AF_INET) {
		*ret_bits = 32;
		return (const uint8_t *)&a->u.v4;
	}
	*ret_bits = 128;
	return a->u.v6.s6_addr;
}

int conf_parse_prefix(const char *s, struct conf_prefix *ret, char *errbuf, size_t len)
{
	char addr[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(s, '/');
	struct conf_prefix p;
	const uint8_t *b;
	int bits;

	memset(&p, 0, sizeof(p));
	if (strcmp(s, "any") == 0 || strcmp(s, "*") == 0) {
		p.addr.family = AF_UNSPEC;
		*ret = p;
		return 0;
	}
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	if (alen == 0 || alen >= sizeof(addr)) {
		snprintf(errbuf, len, "not an address or prefix (like \"10.0.0.0/8\", \"fd00::/8\" or \"any\")");
		return -EINVAL;
	}
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	if (conf_parse_addr(addr, &p.addr)) {
		snprintf(errbuf, len, "not an address or prefix (like \"10.0.0.0/8\", \"fd00::/8\" or \"any\")");
		return -EINVAL;
	}
	b = addr_bytes(&p.addr, &bits);
	p.len = bits;
	if (slash) {
		const char *q = slash + 1;
		long v = 0;

		if (!*q || strlen(q) > 3) {
			snprintf(errbuf, len, "bad prefix length (allowed 0..%d)", bits);
			return -EINVAL;
		}
		for (; *q; q++) {
			if (!isdigit((unsigned char)*q)) {
				snprintf(errbuf, len, "bad prefix length (allowed 0..%d)", bits);
				return -EINVAL;
			}
			v = v * 10 + (*q - '0');
		}
		/* "::ffff:10.0.0.0/104" was folded to IPv4: its length counts the 96 mapped bits. */
		if (strchr(addr, ':') && p.addr.family == AF_INET)
			v -= 96;
		if (v < 0 || v > bits) {
			snprintf(errbuf, len, "bad prefix length (allowed 0..%d)", bits);
			return -EINVAL;
		}
		p.len = (int)v;
	}
	for (int i = p.len; i < bits; i++) {
		if (b[i / 8] & (0x80 >> (i % 8))) {
			snprintf(errbuf, len, "host bits set beyond /%d", p.len);
			return -EINVAL;
		}
	}
	*ret = p;
	return 0;
}

static int parse_port(const char *s, const char *end, long *ret)
{
	long v = 0;

	if (s == end || end - s > 5)
		return -EINVAL;
	for (const char *p = s; p < end; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		v = v * 10 + (*p - '0');
	}
	*ret = v;
	return 0;
}

int conf_parse_ports(const char *s, uint16_t *ret_lo, uint16_t *ret_hi, char *errbuf, size_t len)
{
	const char *dash = strchr(s, '-');
	const char *end = s + strlen(s);
	long lo, hi;

	if (strcmp(s, "any") == 0 || strcmp(s, "*") == 0) {
		*ret_lo = 0;
		*ret_hi = 65535;
		return 0;
	}
	if (parse_port(s, dash ? dash : end, &lo) ||
	    (dash && parse_port(dash + 1, end, &hi))) {
		snprintf(errbuf, len, "not a port or port range (like \"22\", \"1-1024\" or \"any\")");
		return -EINVAL;
	}
	if (!dash)
		hi = lo;
	if (lo < 1 || lo > 65535 || hi < 1 || hi > 65535) {
		snprintf(errbuf, len, "port out of range (allowed 1..65535)");
		return -EINVAL;
	}
	if (lo > hi) {
		snprintf(errbuf, len, "empty port range (first port above last)");
		return -EINVAL;
	}
	*ret_lo = (uint16_t)lo;
	*ret_hi = (uint16_t)hi;
	return 0;
}

static bool hex_run(const char **p, int n)
{
	for (int i = 0; i < n; i++, (*p)++)
		if (!isxdigit((unsigned char)**p))
			return false;
	return true;
}

/* "DDDD:BB:DD.F", "BB:DD.F", "vvvv:dddd" or "class:CCCC" / "class:CCCCCC". */
int conf_check_device(const char *s)
{
	const char *p = s;
	size_t n = strlen(s);

	if (strncmp(s, "class:", 6) == 0) {
		p = s + 6;
		return ((n == 10 && hex_run(&p, 4)) || (n == 12 && hex_run(&p, 6))) ? 0 : -EINVAL;
	}
	if (n == 9 && hex_run(&p, 4) && *p++ == ':' && hex_run(&p, 4))
		return 0;
	p = s;
	if (n == 12 && !(hex_run(&p, 4) && *p++ == ':'))
		return -EINVAL;
	if (n != 7 && n != 12)
		return -EINVAL;
	if (!(hex_run(&p, 2) && *p++ == ':' && hex_run(&p, 2) && *p++ == '.'))
		return -EINVAL;
	return (*p >= '0' && *p <= '7' && p[1] == '\0') ? 0 : -EINVAL;
}

bool conf_addr_equal(const struct conf_addr *a, const struct conf_addr *b)
{
	if (a->family != b->family)
		return false;
	if (a->family == AF_INET)
		return a->u.v4.s_addr == b->u.v4.s_addr;
	return memcmp(&a->u.v6, &b->u.v6, sizeof(a->u.v6)) == 0;
}

bool conf_prefix_match(const struct conf_prefix *p, const struct conf_addr *a)
{
	const uint8_t *pb, *ab;
	int bits, full, rest;

	if (p->addr.family == AF_UNSPEC)
		return true;
	if (p->addr.family != a->family)
		return false;
	pb = addr_bytes(&p->addr, &bits);
	ab = addr_bytes(a, &bits);
	full = p->len / 8;
	rest = p->len % 8;
	if (memcmp(pb, ab, (size_t)full) != 0)
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		return (pb[full] & mask) == (ab[full] & mask);
	}
	return true;
}

int conf_sockaddr_to_addr(const struct sockaddr *sa, socklen_t len, struct conf_addr *ret,
			  uint16_t *ret_port)
{
	struct conf_addr a;
	uint16_t port;

	if (!sa || len < (socklen_t)sizeof(sa_family_t))
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		if (len < (socklen_t)sizeof(*in))
			return -EINVAL;
		a.family = AF_INET;
		a.u.v4 = in->sin_addr;
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		if (len < (socklen_t)sizeof(*in6))
			return -EINVAL;
		port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			a.family = AF_INET;
			memcpy(&a.u.v4, &in6->sin6_addr.s6_addr[12], 4);
		} else {
			a.family = AF_INET6;
			a.u.v6 = in6->sin6_addr;
		}
	} else {
		return -EAFNOSUPPORT;
	}
	*ret = a;
	if (ret_port)
		*ret_port = port;
	return 0;
}

const char *conf_addr_str(const struct conf_addr *addr, char *buf, size_t len)
{
	if (!addr || (addr->family != AF_INET && addr->family != AF_INET6) ||
	    !inet_ntop(addr->family, &addr->u, buf, (socklen_t)len))
		snprintf(buf, len, "any");
	return buf;
}


const char *conf_action_name(enum conf_action a)
{
	return a == CONF_ACTION_NTB ? "ntb" : "tcp";
}

const char *conf_fallback_name(enum conf_fallback f)
{
	return f == CONF_FALLBACK_ERROR ? "error" : "tcp";
}
