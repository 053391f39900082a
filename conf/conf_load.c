// SPDX-License-Identifier: MIT
/* Loading a config: read the file safely, pre-scan it, let libconfig parse it, then check it
 * against the schema into a struct conf. */
#include "conf/conf_int.h"

#include <errno.h>
#include <libgen.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void conf_free(struct conf *c)
{
	if (!c)
		return;
	free(c->links);
	free(c->peers);
	free(c->rules);
	free(c);
}

static void restore_locale(locale_t cloc, locale_t oldloc)
{
	if (!cloc)
		return;
	uselocale(oldloc);
	freelocale(cloc);
}

int conf_load_text(const char *file, const char *text, size_t len, const char *include_dir,
		   struct conf **ret_conf, struct conf_error *ret_err)
{
	struct conf_ctx ctx = { .file = file, .err = ret_err };
	locale_t cloc, oldloc = (locale_t)0;
	config_t cfg;
	int rc;

	ctx.c = calloc(1, sizeof(*ctx.c));
	if (!ctx.c) {
		conf_err_set(ret_err, file, 0, NULL, NULL, "out of memory");
		return -ENOMEM;
	}
	rc = conf_scan_text(&ctx, file, text, len, include_dir, 0);
	if (rc)
		goto err_free;

	/* Numbers in the file use '.', whatever locale the host program has set: parse in "C".
	 * (newlocale failing just leaves the thread's locale in place.) */
	cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
	if (cloc)
		oldloc = uselocale(cloc);
	config_init(&cfg);
	if (include_dir) /* libconfig 1.5 strdup()s it unchecked */
		config_set_include_dir(&cfg, include_dir);
	/* From a stream, not config_read_string(): libconfig's scanner copies a string whole into a
	 * malloc'ed buffer, whose free() (a large file's: 128 KiB or more) raises glibc's mmap
	 * threshold for the whole host program (conf_read_file()); a stream is read in 16 KiB. */
	FILE *f = len ? fmemopen((void *)(uintptr_t)text, len, "r") : NULL;

	if (len && !f) {
		conf_err_set(ret_err, file, 0, NULL, NULL, "out of memory");
		rc = -ENOMEM;
		goto err_destroy;
	}
	bool read_ok = f ? config_read(&cfg, f) : config_read_string(&cfg, "");

	if (f)
		fclose(f);
	if (!read_ok) {
		const char *ef = config_error_file(&cfg);

		const char *et = config_error_text(&cfg);

		/* libconfig's bison parser just says "syntax error": tell what usually causes it. */
		if (!et || strcmp(et, "syntax error") == 0)
			et = "unexpected text (a missing ';', '=', quote or bracket?)";
		conf_err_set(ret_err, ef ? ef : file, config_error_line(&cfg), NULL, NULL,
			     "syntax error: %s", et);
		rc = -EINVAL;
		goto err_destroy;
	}
	snprintf(ctx.c->path, sizeof(ctx.c->path), "%s", file);
	rc = conf_parse_root(&ctx, config_root_setting(&cfg));
	if (rc == -ENOMEM)
		conf_err_set(ret_err, file, 0, NULL, NULL, "out of memory");
	if (rc)
		goto err_destroy;
	config_destroy(&cfg);
	restore_locale(cloc, oldloc);
	*ret_conf = ctx.c;
	return 0;

err_destroy:
	config_destroy(&cfg);
	restore_locale(cloc, oldloc);
err_free:
	conf_free(ctx.c);
	return rc;
}

int conf_load_string(const char *text, const char *name, struct conf **ret_conf,
		     struct conf_error *ret_err)
{
	struct conf *c = NULL;
	int rc;

	if (!name)
		name = "<string>";
	if (!text || !ret_conf) {
		conf_err_set(ret_err, name, 0, NULL, NULL, "no text");
		return -EINVAL;
	}
	rc = conf_load_text(name, text, strlen(text), NULL, &c, ret_err);
	if (rc)
		return rc;
	c->path[0] = '\0';
	*ret_conf = c;
	return 0;
}

int conf_load(const char *path, struct conf **ret_conf, struct conf_error *ret_err)
{
	char dir[CONF_PATH_MAX + 1];
	char *text;
	size_t len;
	int rc;

	if (!path || !*path || !ret_conf) {
		conf_err_set(ret_err, "", 0, NULL, NULL, "no config file name");
		return -EINVAL;
	}
	if (strlen(path) > CONF_PATH_MAX) {
		conf_err_set(ret_err, path, 0, NULL, NULL, "file name too long");
		return -ENAMETOOLONG;
	}
	rc = conf_read_file(path, &text, &len);
	if (rc) {
		const char *why = rc == -ENOENT ? "no such file"
				: rc == -EFBIG  ? "larger than 1 MiB"
				: rc == -EISDIR ? "is a directory"
				: rc == -EINVAL ? "not a regular file"
				: rc == -ENOMEM ? "out of memory"
				: strerror(-rc);

		conf_err_set(ret_err, path, 0, NULL, NULL, "cannot read config: %s", why);
		return rc;
	}
	/* @include "x" is looked up beside the main file. */
	snprintf(dir, sizeof(dir), "%s", path);
	rc = conf_load_text(path, text, len, dirname(dir), ret_conf, ret_err);
	conf_text_free(text);
	return rc;
}
