/* SPDX-License-Identifier: MIT */
/* conf/ internals shared by the loader's files: error reporting, typed getters over libconfig
 * settings, value parsers and the pre-scan of the raw text. */
#ifndef NTBSOCK_CONF_INT_H
#define NTBSOCK_CONF_INT_H

#include <libconfig.h>
#include <stdarg.h>

#include "conf/conf.h"

#define CONF_FILE_MAX     (1u << 20) /* a config file (or an included one) is at most 1 MiB */
#define CONF_INCLUDE_MAX  10         /* libconfig's own include depth limit */

/* One load in progress. */
struct conf_ctx {
	const char        *file;  /* name of the top file, for errors */
	struct conf_error *err;   /* may be NULL */
	struct conf       *c;
};

/* --- errors (conf_error.c) --- */

/* conf_err_set() (conf.h) with a va_list. */
void conf_err_vset(struct conf_error *err, const char *file, int line, const char *key,
		   const char *value, const char *fmt, va_list ap);

/* An error about setting S (its file, line, dotted path and value). Returns -EINVAL. */
int conf_err_at(struct conf_ctx *ctx, const config_setting_t *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* An error about the missing key KEY inside group G (file and line of G). Returns -EINVAL. */
int conf_err_missing(struct conf_ctx *ctx, const config_setting_t *g, const char *key);

/* Dotted path of S: "links[0].window_size", "host.addresses[1]". */
void conf_setting_path(const config_setting_t *s, char *buf, size_t len);

/* S's value as written, printable (strings unquoted, non-printables as \xNN, truncated). */
void conf_setting_value(const config_setting_t *s, char *buf, size_t len);

/* Source file of S (the include it came from, or the top file). */
const char *conf_setting_file(const struct conf_ctx *ctx, const config_setting_t *s);

/* --- typed getters (conf_get.c); each returns 0, 1 when absent and optional, or -EINVAL ---- */

/* Check that every member of group G is named in KEYS (NULL-terminated); G must be a group. */
int conf_check_keys(struct conf_ctx *ctx, const config_setting_t *g, const char *const *keys);

/* G must be a group (WHAT names it in the message, e.g. "a group { ... }"). */
int conf_want_group(struct conf_ctx *ctx, const config_setting_t *s);

int conf_get_string(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		    bool required, const char **ret);
/* A name: 1..63 characters of [A-Za-z0-9._-], not starting with '.' or '-'. */
int conf_get_name(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		  bool required, char *buf);
/* Integer in [LO,HI]; with SIZE also strings "64M". */
int conf_get_u64(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		 bool required, bool size, uint64_t lo, uint64_t hi, uint64_t *ret);
int conf_get_i64(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		 bool required, int64_t lo, int64_t hi, int64_t *ret);
int conf_get_double(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		    bool required, double lo, double hi, double *ret);
int conf_get_bool(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		  bool required, bool *ret);
/* One of CHOICES (NULL-terminated); *RET is its index. */
int conf_get_choice(struct conf_ctx *ctx, const config_setting_t *g, const char *key,
		    bool required, const char *const *choices, int *ret);

/* Format a range for messages: sizes with K/M/G when exact. */
void conf_fmt_size(uint64_t v, char *buf, size_t len);

/* --- value parsers (conf_values.c); 0 or -EINVAL with a message in ERRBUF ---------------- */

int conf_parse_addr(const char *s, struct conf_addr *ret);
int conf_parse_prefix(const char *s, struct conf_prefix *ret, char *errbuf, size_t len);
int conf_parse_ports(const char *s, uint16_t *ret_lo, uint16_t *ret_hi, char *errbuf, size_t len);
int conf_check_name(const char *s, char *errbuf, size_t len);
int conf_check_device(const char *s);
bool conf_addr_equal(const struct conf_addr *a, const struct conf_addr *b);
bool conf_prefix_match(const struct conf_prefix *p, const struct conf_addr *a);
/* sockaddr_in / sockaddr_in6 (v4-mapped → v4) → conf_addr and port; -EAFNOSUPPORT otherwise. */
int conf_sockaddr_to_addr(const struct sockaddr *sa, socklen_t len, struct conf_addr *ret,
			  uint16_t *ret_port);

/* --- pre-scan of raw text (conf_scan.c) ---------------------------------------------------
 * libconfig 1.5 silently truncates integers beyond 32 bits, reads octal-looking numbers as
 * decimal and opens @include targets without checks, so the text of the file and of every
 * include is scanned first: NUL bytes, integer literals that do not fit, leading zeros, and
 * includes that are missing, not regular files, too large or too deep are errors. */
int conf_scan_text(struct conf_ctx *ctx, const char *file, const char *text, size_t len,
		   const char *include_dir, int depth);

/* Read a regular file of at most CONF_FILE_MAX bytes into a NUL-terminated buffer.
 * Returns 0, -ENOENT, -EACCES, -EISDIR/-EINVAL (not a regular file), -EFBIG, -ENOMEM. */
int conf_read_file(const char *path, char **ret_text, size_t *ret_len);
/* Free a text conf_read_file() returned (its own pages: not free()). */
void conf_text_free(char *text);

/* --- loading (conf_load.c) --- */
/* What conf_load() does once it has read the file: parse TEXT (LEN bytes, NUL-terminated)
 * named FILE, with @include looked up in INCLUDE_DIR (NULL: as libconfig does, from the working
 * directory). The fuzzer feeds its inputs here without a file per input. */
int conf_load_text(const char *file, const char *text, size_t len, const char *include_dir,
		   struct conf **ret_conf, struct conf_error *ret_err);

/* --- sections (conf_schema.c) --- */
int conf_parse_root(struct conf_ctx *ctx, const config_setting_t *root);

#endif
