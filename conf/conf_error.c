// SPDX-License-Identifier: MIT
/* Config errors: "FILE:LINE: key 'KEY': MESSAGE (value 'VALUE')", and how a libconfig setting
 * is named and shown in them. */
#include "conf/conf_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void copy_trunc(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

void conf_err_vset(struct conf_error *err, const char *file, int line, const char *key,
		   const char *value, const char *fmt, va_list ap)
{
	char where[CONF_PATH_MAX + 32];
	char keypart[160] = "";
	char valpart[160] = "";

	if (!err)
		return;
	copy_trunc(err->file, sizeof(err->file), file);
	err->line = line > 0 ? line : 0;
	copy_trunc(err->key, sizeof(err->key), key);
	copy_trunc(err->value, sizeof(err->value), value);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);

	if (err->line)
		snprintf(where, sizeof(where), "%s:%d", err->file, err->line);
	else
		snprintf(where, sizeof(where), "%s", err->file);
	if (err->key[0])
		snprintf(keypart, sizeof(keypart), " key '%s':", err->key);
	if (value)
		snprintf(valpart, sizeof(valpart), " (value '%s')", err->value);
	snprintf(err->text, sizeof(err->text), "%s:%s %s%s", where, keypart, err->msg, valpart);
}

void conf_err_set(struct conf_error *err, const char *file, int line, const char *key,
		  const char *value, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conf_err_vset(err, file, line, key, value, fmt, ap);
	va_end(ap);
}

const char *conf_setting_file(const struct conf_ctx *ctx, const config_setting_t *s)
{
	const char *f = s ? config_setting_source_file(s) : NULL;

	return f ? f : ctx->file;
}

int conf_err_at(struct conf_ctx *ctx, const config_setting_t *s, const char *fmt, ...)
{
	char key[128], value[128];
	va_list ap;

	va_start(ap, fmt);
	if (!s) { /* (no setting to point at: the file alone) */
		conf_err_vset(ctx->err, ctx->file, 0, NULL, NULL, fmt, ap);
		va_end(ap);
		return -EINVAL;
	}
	conf_setting_path(s, key, sizeof(key));
	conf_setting_value(s, value, sizeof(value));
	conf_err_vset(ctx->err, conf_setting_file(ctx, s), config_setting_source_line(s), key,
		      value, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int conf_err_missing(struct conf_ctx *ctx, const config_setting_t *g, const char *key)
{
	char path[128], full[160];

	conf_setting_path(g, path, sizeof(path));
	if (path[0])
		snprintf(full, sizeof(full), "%s.%s", path, key);
	else
		snprintf(full, sizeof(full), "%s", key);
	/* The root group has no line; a missing top-level key is reported at line 0. */
	conf_err_set(ctx->err, conf_setting_file(ctx, g), config_setting_source_line(g), full,
		     NULL, "required key is missing");
	return -EINVAL;
}

/* Prepend "name" or "[i]" of each ancestor; root contributes nothing. */
void conf_setting_path(const config_setting_t *s, char *buf, size_t len)
{
	const config_setting_t *chain[32];
	int n = 0;
	size_t used = 0;

	buf[0] = '\0';
	for (const config_setting_t *p = s; p && config_setting_parent(p) && n < 32;
	     p = config_setting_parent(p))
		chain[n++] = p;
	while (n-- > 0) {
		const config_setting_t *p = chain[n];
		const char *name = config_setting_name(p);
		int w;

		if (name)
			w = snprintf(buf + used, len - used, "%s%s", used ? "." : "", name);
		else
			w = snprintf(buf + used, len - used, "[%d]", config_setting_index(p));
		if (w < 0 || (size_t)w >= len - used)
			return;
		used += (size_t)w;
	}
}

static void printable(char *dst, size_t len, const char *src)
{
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)src; *p && o + 5 < len; p++) {
		if (isprint(*p) && *p != '\\')
			dst[o++] = (char)*p;
		else
			o += (size_t)snprintf(dst + o, len - o, "\\x%02x", *p);
	}
	if (len)
		dst[o < len ? o : len - 1] = '\0';
}

void conf_setting_value(const config_setting_t *s, char *buf, size_t len)
{
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
		snprintf(buf, len, "%d", config_setting_get_int(s));
		break;
	case CONFIG_TYPE_INT64:
		snprintf(buf, len, "%lld", (long long)config_setting_get_int64(s));
		break;
	case CONFIG_TYPE_FLOAT:
		snprintf(buf, len, "%g", config_setting_get_float(s));
		break;
	case CONFIG_TYPE_BOOL:
		snprintf(buf, len, "%s", config_setting_get_bool(s) ? "true" : "false");
		break;
	case CONFIG_TYPE_STRING:
		printable(buf, len, config_setting_get_string(s));
		break;
	case CONFIG_TYPE_GROUP:
		snprintf(buf, len, "{ ... }");
		break;
	case CONFIG_TYPE_LIST:
		snprintf(buf, len, "( ... )");
		break;
	case CONFIG_TYPE_ARRAY:
		snprintf(buf, len, "[ ... ]");
		break;
	default:
		snprintf(buf, len, "?");
	}
}

void conf_fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char suffix[] = "KMGTPE";
	int i = -1;

	while (v && v % 1024 == 0 && i < 5) {
		v /= 1024;
		i++;
	}
	if (i >= 0)
		snprintf(buf, len, "%" PRIu64 "%c", v, suffix[i]);
	else
		snprintf(buf, len, "%" PRIu64, v);
}
