// SPDX-License-Identifier: MIT
/* Typed getters over libconfig settings: each checks type and range and reports errors with
 * file, line, key and value. Return 0 when found, 1 when absent and optional, -EINVAL. */
#include "conf/conf_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Edit distance of A and B, capped: enough to suggest a key for a typo. */
static int distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int row[64], prev;

	if (la >= 63 || lb >= 63)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int cur = row[j];
			int best = prev + (a[i - 1] != b[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			prev = cur;
		}
	}
	return row[lb];
}

int conf_check_keys(struct conf_ctx *ctx, const config_setting_t *g, const char *const *keys)
{
	int n = config_setting_length(g);

	for (int i = 0; i < n; i++) {
		const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
		const char *name = config_setting_name(m);
		bool known = false;

		for (const char *const *k = keys; *k && name; k++)
			if (strcmp(*k, name) == 0)
				known = true;
		if (!known) {
			const char *best = NULL;
			int best_d = 3; /* suggest only close matches */

			for (const char *const *k = keys; *k && name; k++) {
				int d = distance(name, *k);

				if (d < best_d) {
					best_d = d;
					best = *k;
				}
			}
			if (best)
				return conf_err_at(ctx, m, "unknown key (did you mean '%s'?)", best);
			return conf_err_at(ctx, m, "unknown key");
		}
	}
	return 0;
}

int conf_want_group(struct conf_ctx *ctx, const config_setting_t *s)
{
	if (config_setting_type(s) != CONFIG_TYPE_GROUP)
		return conf_err_at(ctx, s, "must be a group { ... }");
	return 0;
}

/* Look KEY up in G: 0 found, 1 absent and optional, -EINVAL absent and required. */
static int lookup(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		  bool required, config_setting_t **ret)
{
	config_setting_t *s = config_setting_get_member(g, key);

	if (!s)
		return required ? conf_err_missing(ctx, g, key) : 1;
	*ret = s;
	return 0;
}

int conf_get_string(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		    bool required, const char **ret)
{
	config_setting_t *s = NULL;
	int rc = lookup(ctx, g, key, required, &s);

	if (rc)
		return rc;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return conf_err_at(ctx, s, "must be a string");
	*ret = config_setting_get_string(s);
	return 0;
}

int conf_get_name(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		  bool required, char *buf)
{
	const char *v;
	char msg[128];
	int rc = conf_get_string(ctx, g, key, required, &v);

	if (rc)
		return rc;
	if (conf_check_name(v, msg, sizeof(msg)))
		return conf_err_at(ctx, config_setting_get_member(g, key), "%s", msg);
	snprintf(buf, CONF_NAME_MAX + 1, "%s", v);
	return 0;
}

static int range_err_u(struct conf_ctx *ctx, const config_setting_t *s, bool size, uint64_t lo,
		       uint64_t hi)
{
	char a[32], b[32];

	if (size) {
		conf_fmt_size(lo, a, sizeof(a));
		conf_fmt_size(hi, b, sizeof(b));
	} else {
		snprintf(a, sizeof(a), "%" PRIu64, lo);
		snprintf(b, sizeof(b), "%" PRIu64, hi);
	}
	return conf_err_at(ctx, s, "out of range (allowed %s..%s)", a, b);
}

int conf_get_u64(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		 bool required, bool size, uint64_t lo, uint64_t hi, uint64_t *ret)
{
	config_setting_t *s = NULL;
	uint64_t v;
	int rc = lookup(ctx, g, key, required, &s);

	if (rc)
		return rc;
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64: {
		long long x = config_setting_get_int64(s);

		if (x < 0)
			return range_err_u(ctx, s, size, lo, hi);
		v = (uint64_t)x;
		break;
	}
	case CONFIG_TYPE_STRING:
		if (size) {
			rc = conf_parse_size(config_setting_get_string(s), &v);
			if (rc == -ERANGE)
				return range_err_u(ctx, s, size, lo, hi);
			if (rc)
				return conf_err_at(ctx, s,
						   "not a size (an integer, or a string like \"64M\")");
			break;
		}
		/* fall through */
	default:
		return conf_err_at(ctx, s, size ? "must be an integer or a size string like \"64M\""
					      : "must be an integer");
	}
	if (v < lo || v > hi)
		return range_err_u(ctx, s, size, lo, hi);
	*ret = v;
	return 0;
}

int conf_get_i64(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		 bool required, int64_t lo, int64_t hi, int64_t *ret)
{
	config_setting_t *s = NULL;
	int rc = lookup(ctx, g, key, required, &s);
	long long v;

	if (rc)
		return rc;
	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return conf_err_at(ctx, s, "must be an integer");
	v = config_setting_get_int64(s);
	if (v < lo || v > hi)
		return conf_err_at(ctx, s, "out of range (allowed %" PRId64 "..%" PRId64 ")", lo,
				   hi);
	*ret = v;
	return 0;
}

int conf_get_double(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		    bool required, double lo, double hi, double *ret)
{
	config_setting_t *s = NULL;
	int rc = lookup(ctx, g, key, required, &s);
	double v;

	if (rc)
		return rc;
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_FLOAT:
		v = config_setting_get_float(s);
		break;
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		v = (double)config_setting_get_int64(s);
		break;
	default:
		return conf_err_at(ctx, s, "must be a number");
	}
	if (!isfinite(v) || v < lo || v > hi)
		return conf_err_at(ctx, s, "out of range (allowed %g..%g)", lo, hi);
	*ret = v;
	return 0;
}

int conf_get_bool(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		  bool required, bool *ret)
{
	config_setting_t *s = NULL;
	int rc = lookup(ctx, g, key, required, &s);

	if (rc)
		return rc;
	if (config_setting_type(s) != CONFIG_TYPE_BOOL)
		return conf_err_at(ctx, s, "must be true or false");
	*ret = config_setting_get_bool(s) != 0;
	return 0;
}

int conf_get_choice(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		    bool required, const char *const *choices, int *ret)
{
	const char *v;
	char list[160] = "";
	size_t used = 0;
	int rc = conf_get_string(ctx, g, key, required, &v);

	if (rc)
		return rc;
	for (int i = 0; choices[i]; i++) {
		if (strcmp(v, choices[i]) == 0) {
			*ret = i;
			return 0;
		}
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s\"%s\"",
					 i ? (choices[i + 1] ? ", " : " or ") : "", choices[i]);
		if (used >= sizeof(list))
			used = sizeof(list) - 1;
	}
	return conf_err_at(ctx, config_setting_get_member(g, key), "must be %s", list);
}
