// SPDX-License-Identifier: MIT
/* `ntbsock stat`: the live connections of every process on this host, from the host-local
 * connection tables of the config's links. */
#include "tools/tools_int.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "ntb/ntb.h"
#include "transport/transport.h"

#define STAT_MAX_ROWS 65536

struct stat_rows {
	struct tool_stat_row *v;
	int n, cap;
};

static struct tool_stat_row *rows_add(struct stat_rows *r)
{
	if (r->n == r->cap) {
		int cap = r->cap ? 2 * r->cap : 64;
		struct tool_stat_row *v;

		if (cap > STAT_MAX_ROWS)
			return NULL;
		v = realloc(r->v, (size_t)cap * sizeof(*v));
		if (!v)
			return NULL;
		r->v = v;
		r->cap = cap;
	}
	memset(&r->v[r->n], 0, sizeof(r->v[0]));
	return &r->v[r->n++];
}

/* Append the connections of link CL to ROWS. */
static int collect_link(const struct conf_link *cl, struct stat_rows *rows)
{
	(void)cl;
	(void)rows;
	(void)rows_add;
	/* The transport layer does not export its connection table yet. */
	return -ENOSYS;
}

static int load_conf(const char *conf_arg, struct conf **ret_conf)
{
	char path[PATH_MAX];
	struct conf_error err;
	int rc = conf_find_path(conf_arg, path, sizeof(path));

	if (rc == -ENOENT) {
		fprintf(stderr, "ntbsock stat: no config: none given with -c, NTBSOCK_CONF is not set "
				"and %s does not exist\n", CONF_DEFAULT_PATH);
		return rc;
	}
	if (rc < 0) {
		fprintf(stderr, "ntbsock stat: config path: %s\n", strerror(-rc));
		return rc;
	}
	memset(&err, 0, sizeof(err));
	rc = conf_load(path, ret_conf, &err);
	if (rc == 0 && (rc = conf_apply_env(*ret_conf, &err)) < 0) {
		conf_free(*ret_conf);
		*ret_conf = NULL;
	}
	if (rc < 0)
		fprintf(stderr, "ntbsock stat: %s\n", err.text[0] ? err.text : strerror(-rc));
	return rc;
}

int cmd_stat(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf_arg = NULL;
	struct stat_rows rows = { 0 };
	struct conf *conf = NULL;
	bool json = false;
	int opt, rc = 0;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf_arg = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			tool_print_usage(tool_find_cmd("stat"), stdout);
			return TOOL_EXIT_OK;
		default:
			return tool_usage_error("stat", "unknown option or missing argument: '%s'",
						argv[optind - 1]);
		}
	}
	if (optind < argc)
		return tool_usage_error("stat", "unexpected argument '%s'", argv[optind]);
	if (load_conf(conf_arg, &conf) < 0)
		return TOOL_EXIT_FAIL;
	for (int i = 0; i < conf->n_links && rc == 0; i++) {
		rc = collect_link(&conf->links[i], &rows);
		if (rc == -ENOSYS)
			fprintf(stderr, "ntbsock stat: this build's transport layer does not export "
					"its connection table yet\n");
		else if (rc < 0)
			fprintf(stderr, "ntbsock stat: link %s: %s\n", conf->links[i].name,
				strerror(-rc));
	}
	if (rc == 0) {
		if (json)
			tool_stat_print_json(stdout, rows.v, rows.n);
		else
			tool_stat_print_table(stdout, rows.v, rows.n);
	}
	free(rows.v);
	conf_free(conf);
	return rc == 0 ? TOOL_EXIT_OK : TOOL_EXIT_FAIL;
}
