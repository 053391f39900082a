// SPDX-License-Identifier: MIT
/* Finding and loading the config for the subcommands that act on its links (stat, link, perf -c). */
#include "tools/tools_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "glue/conf_params.h"

int tool_load_conf(const char *cmd, const char *conf_arg, char *path, size_t len,
		   struct conf **ret_conf)
{
	struct conf_error err;
	struct conf *conf = NULL;
	int rc = conf_find_path(conf_arg, path, len);

	if (rc == -ENOENT) {
		fprintf(stderr, "ntbsock %s: no config: none given with -c, NTBSOCK_CONF is not set "
				"and %s does not exist\n", cmd, CONF_DEFAULT_PATH);
		return rc;
	}
	if (rc < 0) {
		fprintf(stderr, "ntbsock %s: config path: %s\n", cmd, strerror(-rc));
		return rc;
	}
	memset(&err, 0, sizeof(err));
	rc = conf_load(path, &conf, &err);
	if (rc == 0)
		rc = conf_apply_env(conf, &err);
	if (rc == 0)
		rc = glue_check_backends(conf, &err);
	if (rc < 0) {
		fprintf(stderr, "ntbsock %s: %s\n", cmd, err.text[0] ? err.text : strerror(-rc));
		conf_free(conf);
		return rc;
	}
	*ret_conf = conf;
	return 0;
}
