// SPDX-License-Identifier: MIT
/* Where the config comes from (-c, NTBSOCK_CONF, /etc/ntbsock.conf) and the NTBSOCK_*
 * environment overrides applied on top of it. */
#include "conf/conf_int.h"

#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "util/log.h"

static int copy_path(const char *p, char *buf, size_t len)
{
	if (!buf || strlen(p) >= len)
		return -ENAMETOOLONG;
	memcpy(buf, p, strlen(p) + 1);
	return 0;
}

int conf_find_path(const char *explicit_path, char *buf, size_t len)
{
	const char *env;
	struct stat st;

	if (explicit_path && *explicit_path)
		return copy_path(explicit_path, buf, len);
	/* secure_getenv: a set-uid program never takes a config path from its caller. */
	env = secure_getenv("NTBSOCK_CONF");
	if (env && *env)
		return copy_path(env, buf, len);
	if (stat(CONF_DEFAULT_PATH, &st) == 0)
		return copy_path(CONF_DEFAULT_PATH, buf, len);
	return -ENOENT;
}

/* The fields of a fault spec, in the order of the "known:" list. */
static const char *const fault_keys[] = { "drop", "corrupt", "delay_us", "seed", "cut_after",
					  "cut_after_ms" };
#define FAULT_CUT_MS_MAX 86400000u /* a day */

static int fault_key_index(const char *key, size_t klen)
{
	for (size_t i = 0; i < sizeof(fault_keys) / sizeof(fault_keys[0]); i++)
		if (strlen(fault_keys[i]) == klen && !strncmp(key, fault_keys[i], klen))
			return (int)i;
	return -1;
}

/* cut_after: a size as in the config file ("64M"); cut_after_ms: milliseconds. */
static int fault_cut_field(size_t klen, const char *val, struct conf_fault *f, char *errbuf,
			   size_t len)
{
	uint64_t v;
	char *end;

	if (klen == strlen("cut_after")) {
		if (conf_parse_size(val, &v) || v > INT64_MAX) {
			snprintf(errbuf, len, "cut_after: '%s' is not a size (bytes, or with K, M "
				 "or G: \"64M\")", val);
			return -EINVAL;
		}
		f->cut_after = v;
		return 0;
	}
	errno = 0;
	v = strtoull(val, &end, 10);
	if (*end || errno || v > FAULT_CUT_MS_MAX) {
		snprintf(errbuf, len, "cut_after_ms: '%s' is not an integer in 0..%u", val,
			 FAULT_CUT_MS_MAX);
		return -EINVAL;
	}
	f->cut_after_ms = (uint32_t)v;
	return 0;
}

/* One "key=value" field of a fault spec. */
static int fault_field(const char *key, size_t klen, const char *val, struct conf_fault *f,
		       char *errbuf, size_t len)
{
	char *end;

	if (!*val || isspace((unsigned char)*val) || *val == '-' || *val == '+') {
		snprintf(errbuf, len, "%.*s: bad value '%s'", (int)klen, key, val);
		return -EINVAL;
	}
	if ((klen == 4 && !strncmp(key, "drop", 4)) || (klen == 7 && !strncmp(key, "corrupt", 7))) {
		double d;

		/* '.' as the decimal point whatever the program's locale */
		locale_t cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);

		errno = 0;
		d = cloc ? strtod_l(val, &end, cloc) : strtod(val, &end);
		if (cloc)
			freelocale(cloc);
		if (*end || errno || !isfinite(d) || d < 0 || d > 1) {
			snprintf(errbuf, len, "%.*s: '%s' is not a rate in 0..1", (int)klen, key, val);
			return -EINVAL;
		}
		if (key[0] == 'd')
			f->drop = d;
		else
			f->corrupt = d;
		return 0;
	}
	if ((klen == 8 && !strncmp(key, "delay_us", 8)) || (klen == 4 && !strncmp(key, "seed", 4))) {
		unsigned long long v;

		errno = 0;
		v = strtoull(val, &end, 10);
		if (*end || errno || (key[0] == 'd' && v > 1000000) || v > INT64_MAX) {
			snprintf(errbuf, len, "%.*s: '%s' is not an integer in 0..%s", (int)klen, key,
				 val, key[0] == 'd' ? "1000000" : "9223372036854775807");
			return -EINVAL;
		}
		if (key[0] == 'd')
			f->delay_us = (uint32_t)v;
		else
			f->seed = v;
		return 0;
	}
	if (fault_key_index(key, klen) >= 4) /* cut_after, cut_after_ms */
		return fault_cut_field(klen, val, f, errbuf, len);
	snprintf(errbuf, len, "unknown field '%.*s' (known: drop, corrupt, delay_us, seed, "
		 "cut_after, cut_after_ms)", (int)klen, key);
	return -EINVAL;
}

int conf_parse_fault(const char *spec, struct conf_fault *ret, char *errbuf, size_t len)
{
	struct conf_fault f = { .enabled = true };
	char field[128];
	const char *p = spec;
	unsigned seen = 0;

	if (!spec || !*spec) {
		snprintf(errbuf, len, "empty fault spec");
		return -EINVAL;
	}
	if (strcasecmp(spec, "off") == 0 || strcmp(spec, "0") == 0) {
		memset(ret, 0, sizeof(*ret));
		return 0;
	}
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t flen = comma ? (size_t)(comma - p) : strlen(p);
		const char *eq;
		unsigned bit;

		if (flen == 0 || flen >= sizeof(field)) {
			snprintf(errbuf, len, flen ? "field too long" : "empty field");
			return -EINVAL;
		}
		memcpy(field, p, flen);
		field[flen] = '\0';
		eq = strchr(field, '=');
		if (!eq) {
			snprintf(errbuf, len, "'%s' is not key=value", field);
			return -EINVAL;
		}
		if (fault_field(field, (size_t)(eq - field), eq + 1, &f, errbuf, len))
			return -EINVAL;
		bit = 1u << fault_key_index(field, (size_t)(eq - field));
		if (seen & bit) {
			snprintf(errbuf, len, "field '%.*s' given twice", (int)(eq - field), field);
			return -EINVAL;
		}
		seen |= bit;
		p += flen;
		if (*p == ',') {
			p++;
			if (!*p) {
				snprintf(errbuf, len, "trailing comma");
				return -EINVAL;
			}
		}
	}
	*ret = f;
	return 0;
}

static int env_err(struct conf_error *err, const char *var, const char *val, const char *msg)
{
	conf_err_set(err, "environment", 0, var, val, "%s", msg);
	return -EINVAL;
}

int conf_apply_env(struct conf *c, struct conf_error *err)
{
	const char *v;
	char msg[200];

	if (!c)
		return -EINVAL;
	v = getenv("NTBSOCK_LOG");
	if (v && *v) {
		int level = log_parse_level(v);

		if (level < 0)
			return env_err(err, "NTBSOCK_LOG", v,
				       "must be \"error\", \"warn\", \"info\" or \"debug\"");
		c->log_level = level;
	}
	v = secure_getenv("NTBSOCK_LOG_FILE");
	if (v && *v) {
		if (strlen(v) > CONF_PATH_MAX)
			return env_err(err, "NTBSOCK_LOG_FILE", v, "path too long");
		snprintf(c->log_file, sizeof(c->log_file), "%s", v);
	}
	/* secure_getenv: a set-uid program's link is not the caller's to degrade */
	v = secure_getenv("NTBSOCK_FAULT");
	if (v && *v) {
		struct conf_fault f;

		if (conf_parse_fault(v, &f, msg, sizeof(msg)))
			return env_err(err, "NTBSOCK_FAULT", v, msg);
		for (int i = 0; i < c->n_links; i++)
			c->links[i].fault = f;
	}
	v = getenv("NTBSOCK_DISABLE");
	if (v && *v) {
		if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"))
			c->disabled = true;
		else if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false"))
			c->disabled = false;
		else
			return env_err(err, "NTBSOCK_DISABLE", v, "must be 1 or 0");
	}
	return 0;
}
