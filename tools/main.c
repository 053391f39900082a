// SPDX-License-Identifier: MIT
/* The ntbsock command: subcommand dispatch, --help, --version and `help CMD`. */
#include "tools/tools_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef NTBSOCK_VERSION
#define NTBSOCK_VERSION "unknown"
#endif

static int cmd_help(int argc, char **argv);

static const struct tool_cmd commands[] = {
	{ "run", "run a program with libntbsock.so preloaded",
	  "usage: ntbsock run [-c CONF] [--] PROGRAM [ARGS...]\n"
	  "\n"
	  "Execute PROGRAM with libntbsock.so prepended to LD_PRELOAD, so that its TCP\n"
	  "connections to peers that the config maps onto an NTB link use that link.\n"
	  "\n"
	  "  -c, --conf CONF  set NTBSOCK_CONF to the absolute path of CONF for PROGRAM\n"
	  "                   (without -c, the library reads $NTBSOCK_CONF, then\n"
	  "                   /etc/ntbsock.conf)\n"
	  "  -h, --help       show this help\n"
	  "\n"
	  "The library is $NTBSOCK_LIB if set, else libntbsock.so next to the ntbsock\n"
	  "executable, else the installed LIBDIR/ntbsock/libntbsock.so.\n"
	  "Exit status: that of PROGRAM; 127 if PROGRAM is not found, 126 if it cannot be\n"
	  "executed, 1 if the library or CONF is missing, 2 on a usage error.\n",
	  cmd_run },
	{ "check", "validate a config, show the resolved view and link state",
	  "usage: ntbsock check [-c CONF] [--pci]\n"
	  "\n"
	  "Load the config (CONF, else $NTBSOCK_CONF, else /etc/ntbsock.conf), apply the\n"
	  "NTBSOCK_* environment overrides, print the resolved view, and for each link show\n"
	  "its state without claiming or enabling it: backend, window size, the page size\n"
	  "of a shm link's file, the sides in use, up or down, the peer's epoch, and the\n"
	  "connections and transfers the window serves.\n"
	  "\n"
	  "  -c, --conf CONF  the config file to check\n"
	  "      --pci        also list the PCI devices a backend profile matches\n"
	  "  -h, --help       show this help\n"
	  "\n"
	  "Exit status: 0 when the config is valid, 1 with the error (FILE:LINE: ...)\n"
	  "otherwise, 2 on a usage error.\n",
	  cmd_check },
	{ "stat", "show the live connections (ntb and tcp) of all processes on this host",
	  "usage: ntbsock stat [--summary] [--json] [-c CONF]\n"
	  "\n"
	  "List the connections of every process on this host running under the library.\n"
	  "NTB ones come from the transport's host-local tables of the config's links: pid,\n"
	  "fd, local and remote address, mode and state, bytes and messages each way per\n"
	  "protocol (inline/short/long), retransmissions, checksum errors and queue fill.\n"
	  "Connections that stayed TCP (connect or accept decided by the library) come from\n"
	  "the host-wide table /dev/shm/ntbsock-stat-tcp (NTBSOCK_STAT_TCP overrides it):\n"
	  "mode tcp and the reason (e.g. not configured, no listener, link down).\n"
	  "Before the table, this host's counters per link (setups: connections set up on\n"
	  "it) and \"tcp: setups N\", the connections kept on TCP since that table was\n"
	  "created (closed ones included).\n"
	  "\n"
	  "  -c, --conf CONF  the config whose links to inspect (default: as for check)\n"
	  "      --summary    print counts instead of the connections: the total, per mode\n"
	  "                   (ntb, tcp), per link (ntb ones) and per reason (tcp ones),\n"
	  "                   one \"KIND COUNT NAME\" line each\n"
	  "      --json       print one JSON document instead of a table (with --summary:\n"
	  "                   {\"summary\":{\"total\",\"mode\",\"link\",\"reason\"}})\n"
	  "  -h, --help       show this help\n"
	  "\n"
	  "Exit status: 0 on success (also when there are no connections), 1 on error,\n"
	  "2 on a usage error.\n",
	  cmd_stat },
	{ "perf", "measure the transport: message-size sweep and latency",
	  "usage: ntbsock perf [-c CONF] [--sizes LIST] [--count N] [--fault SPEC] [--csv]\n"
	  "\n"
	  "Run both ends of a transport connection in two processes (pinned to different\n"
	  "cores when there are two) over a private shm link that is removed at the end.\n"
	  "For each message size, measure one-way streaming throughput with the receiver\n"
	  "verifying every byte, and ping-pong latency (one-way = round trip / 2),\n"
	  "after an unmeasured warm-up through twice the data ring in both directions.\n"
	  "The table ends with a reference measured in the same run: single-core memcpy\n"
	  "bandwidth and the cache-line round trip between the two processes, the latter\n"
	  "also in bursts interleaved with each size's ping-pong (shown for the smallest);\n"
	  "and, when 64 KiB is measured with two CPUs, the transport's copy+CRC32C kernels\n"
	  "alone between the two cores (no protocol), in bursts interleaved with that\n"
	  "stream, next to the stream's share of them.\n"
	  "\n"
	  "  -c, --conf CONF   take the tunables, window size and fault settings from the\n"
	  "                    first link of CONF (the link itself stays untouched)\n"
	  "      --sizes LIST  comma-separated message sizes (K/M/G suffixes); default\n"
	  "                    64,128,...,512K (powers of two)\n"
	  "      --count N     messages per size (default 5000)\n"
	  "      --fault SPEC  inject faults: drop=P,corrupt=P,delay_us=N,seed=N,\n"
	  "                    cut_after=SIZE,cut_after_ms=N (cut the link); the\n"
	  "                    report adds each stream's longest stall\n"
	  "      --csv         print CSV: size,count,mbps,msgs_per_s,p50_us,p99_us,\n"
	  "                    retransmits,crc_errors,verified\n"
	  "  -h, --help        show this help\n"
	  "\n"
	  "NTBSOCK_LOG=LEVEL and NTBSOCK_LOG_FILE=FILE log the transport's lines of both\n"
	  "sides (debug: each Retry and retransmission), as for the library.\n"
	  "NTBSOCK_CRC=avx512|avx2|sse4.2|portable measures that CRC32C path instead of\n"
	  "the best this CPU runs (the table names the path in use); one it cannot run is\n"
	  "a usage error.\n"
	  "\n"
	  "Exit status: 0 when every size was measured and verified, 1 otherwise, 2 on a\n"
	  "usage error.\n",
	  cmd_perf },
	{ "link", "set a link down (its connections move to another link or tcp) or up on this host",
	  "usage: ntbsock link down|up NAME [-c CONF]\n"
	  "\n"
	  "Set the administrative state of link NAME of the config (CONF, else $NTBSOCK_CONF,\n"
	  "else /etc/ntbsock.conf) on this host, as `ip link set' does for an interface.\n"
	  "\n"
	  "  down  every live connection of the link on this host moves without loss to\n"
	  "        another live link to its peer, else to tcp (each one's peer follows),\n"
	  "        and new connections use tcp (reason \"link down (admin)\")\n"
	  "  up    new connections use ntb again; those moved to tcp stay there\n"
	  "\n"
	  "The state is a flag file beside the link file: PATH.admin-down for a shm link\n"
	  "(PATH: its `path', default /dev/shm/ntbsock-NAME), /dev/shm/ntbsock-NAME.admin-down\n"
	  "for a pci link. down creates it (empty, mode 0644), up removes it; both are\n"
	  "idempotent. `ntbsock check' and `ntbsock stat' show the state.\n"
	  "\n"
	  "  -c, --conf CONF  the config that names the link\n"
	  "  -h, --help       show this help\n"
	  "\n"
	  "Exit status: 0 on success, 1 when the config is invalid or missing or the flag\n"
	  "file cannot be created or removed, 2 on a usage error or an unknown link.\n",
	  cmd_link },
	{ "help", "show help for a subcommand",
	  "usage: ntbsock help [COMMAND]\n",
	  cmd_help },
};

static const char main_usage_head[] =
	"usage: ntbsock [--help] [--version] COMMAND [ARGS...]\n"
	"\n"
	"Run unmodified TCP programs over a PCIe Non-Transparent Bridge.\n"
	"\n"
	"Commands:\n";

static const char main_usage_tail[] =
	"\n"
	"Run `ntbsock help COMMAND' or `ntbsock COMMAND --help' for a command's options.\n"
	"See ntbsock(1), ntbsock.conf(5) and ntbsock(7).\n";

static void print_main_usage(FILE *out)
{
	fputs(main_usage_head, out);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-7s %s\n", commands[i].name, commands[i].summary);
	fputs(main_usage_tail, out);
}

const struct tool_cmd *tool_find_cmd(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

void tool_print_usage(const struct tool_cmd *cmd, FILE *out)
{
	fputs(cmd->usage, out);
}

int tool_usage_error(const char *name, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ntbsock %s: ", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry `ntbsock %s --help'.\n", name);
	return TOOL_EXIT_USAGE;
}

static int cmd_help(int argc, char **argv)
{
	const struct tool_cmd *cmd;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_main_usage(stdout);
		return TOOL_EXIT_OK;
	}
	if (argc > 2)
		return tool_usage_error("help", "too many arguments");
	cmd = tool_find_cmd(argv[1]);
	if (!cmd) {
		fprintf(stderr, "ntbsock help: unknown command '%s'\n", argv[1]);
		print_main_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	tool_print_usage(cmd, stdout);
	return TOOL_EXIT_OK;
}

int main(int argc, char **argv)
{
	const struct tool_cmd *cmd;
	int rc;

	if (argc < 2) {
		print_main_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_main_usage(stdout);
		return TOOL_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("ntbsock %s\n", NTBSOCK_VERSION);
		return TOOL_EXIT_OK;
	}
	cmd = tool_find_cmd(argv[1]);
	if (!cmd) {
		fprintf(stderr, "ntbsock: unknown command '%s'\n\n", argv[1]);
		print_main_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	rc = cmd->fn(argc - 1, argv + 1);
	if (fflush(stdout) != 0 && rc == TOOL_EXIT_OK)
		rc = TOOL_EXIT_FAIL;
	return rc;
}
