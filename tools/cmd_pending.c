// SPDX-License-Identifier: MIT
/* Temporary: subcommands whose code is being written (removed as each lands). */
#include "tools/tools_int.h"

#include <stdio.h>

static int pending(const char *name)
{
	fprintf(stderr, "ntbsock %s: not implemented yet\n", name);
	return TOOL_EXIT_FAIL;
}

int cmd_stat(int argc, char **argv) { (void)argc; (void)argv; return pending("stat"); }
int cmd_perf(int argc, char **argv) { (void)argc; (void)argv; return pending("perf"); }
