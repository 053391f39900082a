// SPDX-License-Identifier: MIT
/* `ntbsock link down|up NAME`: set a link's administrative state on this host, the flag file
 * beside its link file (tp_link_admin_set()) that the library of every process here watches. */
#include "tools/tools_int.h"
#include "glue/conf_params.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "transport/transport.h"

/* The link NAME of CONF (loaded from PATH) is not there: say which links are. */
static void print_unknown_link(const struct conf *conf, const char *path, const char *name)
{
	fprintf(stderr, "ntbsock link: no link '%s' in %s", name, path);
	if (conf->n_links == 0)
		fprintf(stderr, " (it has no links)\n");
	for (int i = 0; i < conf->n_links; i++)
		fprintf(stderr, "%s%s", i ? ", " : " (its links: ", conf->links[i].name);
	if (conf->n_links)
		fprintf(stderr, ")\n");
}

int cmd_link(int argc, char **argv)
{
	struct tool_link_args args;
	struct ntb_link_params lp;
	const struct conf_link *cl;
	struct conf *conf = NULL;
	char err[256], path[PATH_MAX], flag[NTB_PATH_MAX + 32];
	int rc;

	if (tool_parse_link_args(argc, argv, &args, err, sizeof(err)) < 0)
		return tool_usage_error("link", "%s", err);
	if (args.help) {
		tool_print_usage(tool_find_cmd("link"), stdout);
		return TOOL_EXIT_OK;
	}
	if (tool_load_conf("link", args.conf, path, sizeof(path), &conf) < 0)
		return TOOL_EXIT_FAIL;
	cl = conf_link_by_name(conf, args.name);
	if (!cl) {
		print_unknown_link(conf, path, args.name);
		conf_free(conf);
		return TOOL_EXIT_USAGE;
	}
	glue_link_params(cl, &lp);
	rc = tp_link_admin_path(&lp, flag, sizeof(flag));
	if (rc == 0)
		rc = tp_link_admin_set(&lp, args.down);
	if (rc < 0) {
		fprintf(stderr, "ntbsock link: link %s: cannot %s %s: %s\n", cl->name,
			args.down ? "create" : "remove", rc == -ENAMETOOLONG ? "its flag file" : flag,
			strerror(-rc));
		conf_free(conf);
		return TOOL_EXIT_FAIL;
	}
	if (args.down)
		printf("link %s: down (admin): connections move to another link or to tcp; "
		       "new connections avoid it\n", cl->name);
	else
		printf("link %s: up (admin): new connections use ntb; those moved to tcp stay there\n",
		       cl->name);
	conf_free(conf);
	return TOOL_EXIT_OK;
}
