// SPDX-License-Identifier: MIT
/* Temporary: subcommands whose code is being written (removed as each lands). */
#include "tools/tools_int.h"

#include <stdio.h>
#include <string.h>

static int pending(const char *name)
{
	fprintf(stderr, "ntbsock %s: not implemented yet\n", name);
	return TOOL_EXIT_FAIL;
}

int cmd_perf(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		tool_print_usage(tool_find_cmd("perf"), stdout);
		return TOOL_EXIT_OK;
	}
	return pending("perf");
}
