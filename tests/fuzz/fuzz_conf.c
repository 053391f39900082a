/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the config loader (conf_load_text(), what conf_load() runs on the text it
 * read, under the name of a file in a private directory so that @include "x" resolves beside
 * it: no file is written per input), then printing, routing and the environment overrides of
 * what it accepted. Every rejection must name the file. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/conf.h"
#include "conf/conf_int.h"

static char fz_dir[128], fz_path[160];
static FILE *fz_null; /* conf_print()'s sink, opened once */

static void fz_cleanup(void)
{
	char p[200];

	snprintf(p, sizeof(p), "%s/inc.conf", fz_dir);
	unlink(p);
	rmdir(fz_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	FILE *f;
	char p[200];

	(void)argc, (void)argv;
	snprintf(fz_dir, sizeof(fz_dir), "/tmp/ntbsock-fuzz-conf-%d", (int)getpid());
	mkdir(fz_dir, 0700);
	snprintf(fz_path, sizeof(fz_path), "%s/fuzz.conf", fz_dir);
	/* one well-formed include the input may name */
	snprintf(p, sizeof(p), "%s/inc.conf", fz_dir);
	f = fopen(p, "w");
	if (f) {
		fputs("tunables = { contexts = 8; spin_us = 10; };\n", f);
		fclose(f);
	}
	fz_null = fopen("/dev/null", "w");
	atexit(fz_cleanup);
	return 0;
}

static void route_some(const struct conf *c, const uint8_t *data, size_t size)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct conf_route r;

	for (size_t i = 0; i + 6 <= size && i < 36; i += 6) {
		memcpy(&sin.sin_addr, data + i, 4);
		memcpy(&sin.sin_port, data + i + 4, 2);
		(void)conf_route(c, (const struct sockaddr *)&sin, sizeof(sin), &r);
	}
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
	sin.sin_port = htons(5201);
	(void)conf_route(c, (const struct sockaddr *)&sin, sizeof(sin), &r);
}

/* The error line starts with the config's path, or with the name of a file it @includes (as
 * written there: libconfig names included files so). */
static bool names_file(const char *text, const uint8_t *data, size_t size)
{
	const char *colon = strchr(text, ':');
	size_t n = colon ? (size_t)(colon - text) : 0;

	if (n == 0)
		return false;
	if (strncmp(text, fz_dir, strlen(fz_dir)) == 0)
		return true;
	return memmem(data, size, text, n) != NULL;
}

/* The environment's parsers (NTBSOCK_FAULT specs, sizes) on the input's first line. */
static void env_parsers(const uint8_t *data, size_t size)
{
	char line[256], msg[200];
	struct conf_fault f;
	uint64_t v;
	size_t n = 0;

	while (n < size && n < sizeof(line) - 1 && data[n] != '\n')
		n++;
	memcpy(line, data, n);
	line[n] = '\0';
	if (conf_parse_fault(line, &f, msg, sizeof(msg)) == 0 &&
	    (!(f.drop >= 0 && f.drop <= 1) || !(f.corrupt >= 0 && f.corrupt <= 1)))
		abort(); /* an accepted rate is in [0,1] (NaN is not) */
	(void)conf_parse_size(line, &v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf_error err;
	struct conf *c = NULL;
	char *text;
	int rc;

	if (!fz_dir[0])
		LLVMFuzzerInitialize(NULL, NULL);
	env_parsers(data, size);
	/* as conf_read_file() leaves it: the bytes (NULs included) and a terminating NUL */
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&err, 0, sizeof(err));
	rc = conf_load_text(fz_path, text, size, fz_dir, &c, &err);
	free(text);
	if (rc == 0) {
		if (!c)
			abort();
		if (fz_null)
			conf_print(c, fz_null);
		route_some(c, data, size);
		conf_free(c);
	} else {
		/* a rejected config is an error naming the file (or an include of it) */
		if (c || rc >= 0 || !err.text[0])
			abort();
		if (!names_file(err.text, data, size)) {
			fprintf(stderr, "fuzz_conf: error names no file: rc %d: %s\n", rc, err.text);
			abort();
		}
	}
	return 0;
}
