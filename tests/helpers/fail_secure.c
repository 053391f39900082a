/* SPDX-License-Identifier: MIT */
/* Security probe for set-uid programs (tests/integration/test_security_setuid.sh installs a
 * set-uid copy and runs it as another user): prints what the config layer takes from the
 * environment, then dlopen()s libntbsock.so and makes a socket through it, so that its
 * initialisation runs as it would in a set-uid program that has the library (e.g. through
 * /etc/ld.so.preload). Under AT_SECURE,
 * NTBSOCK_CONF, NTBSOCK_LOG_FILE and NTBSOCK_FAULT must have no effect.
 *
 *   fail_secure LIB CONF    prints: secure=0|1, conf_path=..., fault=<drop>/<corrupt>,
 *                           log_file=..., dlopen=ok|<error>, socket=ok|failed */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf/conf.h"

int main(int argc, char **argv)
{
	char path[CONF_PATH_MAX + 1];
	struct conf_error err;
	struct conf *c = NULL;
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: fail_secure LIB CONF\n");
		return 64;
	}
	printf("uid=%d euid=%d secure=%lu\n", (int)getuid(), (int)geteuid(), getauxval(AT_SECURE));
	rc = conf_find_path(NULL, path, sizeof(path));
	printf("conf_path=%s rc=%d\n", rc == 0 ? path : "", rc);
	memset(&err, 0, sizeof(err));
	if (conf_load(argv[2], &c, &err) == 0 && conf_apply_env(c, &err) == 0) {
		printf("fault=%g/%g enabled=%d\n", c->n_links ? c->links[0].fault.drop : -1.0,
		       c->n_links ? c->links[0].fault.corrupt : -1.0,
		       c->n_links ? (int)c->links[0].fault.enabled : -1);
		printf("log_file=%s\n", c->log_file);
	} else {
		printf("conf_error=%s\n", err.text);
	}
	conf_free(c);
	fflush(stdout);
	void *h = dlopen(argv[1], RTLD_NOW);

	printf("dlopen=%s\n", h ? "ok" : dlerror());
	/* the library initialises at its first socket call (a program that makes none never
	 * reads its config): make one through it */
	int (*sock)(int, int, int) = h ? (int (*)(int, int, int))dlsym(h, "socket") : NULL;
	int fd = sock ? sock(AF_INET, SOCK_STREAM, 0) : -1;

	printf("socket=%s\n", fd >= 0 ? "ok" : "failed");
	if (fd >= 0)
		close(fd);
	return 0;
}
