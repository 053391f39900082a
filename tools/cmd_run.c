// SPDX-License-Identifier: MIT
/* `ntbsock run`: execute a program with libntbsock.so preloaded and NTBSOCK_CONF set. */
#include "tools/tools_int.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf = NULL;
	char lib[PATH_MAX], conf_abs[PATH_MAX], err[1024];
	char preload[8192];
	int opt;

	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, so PROGRAM's own options are left alone. */
	while ((opt = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf = optarg;
			break;
		case 'h':
			tool_print_usage(tool_find_cmd("run"), stdout);
			return TOOL_EXIT_OK;
		default:
			return tool_usage_error("run", "unknown option or missing argument: '%s'",
						argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return tool_usage_error("run", "no program given");

	if (tool_find_library(lib, sizeof(lib), err, sizeof(err)) < 0) {
		fprintf(stderr, "ntbsock run: %s\n", err);
		return TOOL_EXIT_FAIL;
	}
	if (conf) {
		if (!realpath(conf, conf_abs)) {
			fprintf(stderr, "ntbsock run: config %s: %s\n", conf, strerror(errno));
			return TOOL_EXIT_FAIL;
		}
		if (setenv("NTBSOCK_CONF", conf_abs, 1) != 0) {
			fprintf(stderr, "ntbsock run: setenv: %s\n", strerror(errno));
			return TOOL_EXIT_FAIL;
		}
	}
	if (tool_preload_join(lib, getenv("LD_PRELOAD"), preload, sizeof(preload)) < 0) {
		fprintf(stderr, "ntbsock run: LD_PRELOAD would be too long\n");
		return TOOL_EXIT_FAIL;
	}
	if (setenv("LD_PRELOAD", preload, 1) != 0) {
		fprintf(stderr, "ntbsock run: setenv: %s\n", strerror(errno));
		return TOOL_EXIT_FAIL;
	}
	fflush(NULL);
	execvp(argv[optind], argv + optind);
	/* As a shell: 127 for a program that is not there, 126 for one that cannot run. */
	int e = errno;
	fprintf(stderr, "ntbsock run: %s: %s\n", argv[optind], strerror(e));
	return (e == ENOENT || e == ENOTDIR) ? TOOL_EXIT_NOTFOUND : TOOL_EXIT_NOEXEC;
}
