/* SPDX-License-Identifier: MIT */
/* Logging for every layer: level-checked before arguments are evaluated, written with the raw
 * write system call (never stdio, never an intercepted libc call). */
#ifndef NTBSOCK_UTIL_LOG_H
#define NTBSOCK_UTIL_LOG_H

#include <stdarg.h>

enum log_level {
	LL_ERROR = 0,
	LL_WARN  = 1,
	LL_INFO  = 2,
	LL_DEBUG = 3,
};

/* Current threshold; messages above it are not formatted. Default LL_WARN. */
extern int log_level_current;

/* Set the threshold. */
void log_set_level(int level);

/* Parse "error|warn|info|debug" (case-insensitive); returns the level or -EINVAL. */
int log_parse_level(const char *name);

/* Name of a level ("error", ...). */
const char *log_level_name(int level);

/* Send log lines to PATH (opened O_APPEND|O_NOFOLLOW|O_CLOEXEC, mode 0600 when created);
 * NULL or "" → back to stderr. Returns 0 or a negative errno. */
int log_set_file(const char *path);

/* File descriptor log lines go to (2 unless log_set_file() opened a file). */
int log_fd(void);

/* Format and write one line "ntbsock[pid]: level: message\n". Use LOG(). */
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vwrite(int level, const char *fmt, va_list ap);

#define LOG(level, ...)                                                                  \
	do {                                                                             \
		if ((level) <= log_level_current)                                         \
			log_write((level), __VA_ARGS__);                                  \
	} while (0)

#endif
