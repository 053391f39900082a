// SPDX-License-Identifier: MIT
/* Initialisation: resolve the real functions, load the config, choose active or pass-through.
 * Runs from the constructor and, through pthread_once, from the first wrapper called. */
#include "util/clock.h"
#include "util/crc32c.h"
#include "preload/pl_int.h"
#include "glue/conf_params.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

__thread int pl_depth __attribute__((tls_model("initial-exec")));
_Atomic int pl_mode;
struct conf *pl_conf;
struct tp_params pl_tpp;

static pthread_once_t pl_once = PTHREAD_ONCE_INIT;
static bool pl_resolved; /* (set by the constructor, before any other thread of ours runs) */

static void pl_resolve(void)
{
#define PL_CALL(name, ret, params, args)                                                 \
	do {                                                                             \
		void *p = dlsym(RTLD_NEXT, #name);                                       \
		if (p)                                                                   \
			*(void **)&pl_real.name = p;                                     \
	} while (0);
#include "preload/intercept.def"
#undef PL_CALL
}

/* No config, or a broken one: say so once, at the level the environment asks for. */
static void pl_env_log_level(void)
{
	const char *lv = getenv("NTBSOCK_LOG");
	int l = lv && *lv ? log_parse_level(lv) : -EINVAL;
	if (l >= 0)
		log_set_level(l);
	/* secure_getenv: a set-uid program must not write its log where the caller says. */
	const char *lf = secure_getenv("NTBSOCK_LOG_FILE");
	if (lf && *lf)
		log_set_file(lf);
}

static int pl_load_conf(void)
{
	char path[CONF_PATH_MAX + 1];
	struct conf_error err;
	struct conf *c = NULL;
	int r;

	pl_env_log_level();
	r = conf_find_path(NULL, path, sizeof(path));
	if (r == -ENOENT) {
		LOG(LL_INFO, "no config (NTBSOCK_CONF unset, %s absent): all sockets use the kernel",
		    CONF_DEFAULT_PATH);
		return r;
	}
	if (r < 0) {
		LOG(LL_WARN, "config path: %s: all sockets use the kernel", strerror(-r));
		return r;
	}
	memset(&err, 0, sizeof(err));
	r = conf_load(path, &c, &err);
	if (r == 0)
		r = conf_apply_env(c, &err);
	if (r == 0)
		r = glue_check_backends(c, &err);
	if (r < 0) {
		LOG(LL_WARN, "config %s: %s: all sockets use the kernel", path,
		    err.text[0] ? err.text : strerror(-r));
		conf_free(c);
		return r;
	}
	log_set_level(c->log_level);
	if (c->log_file[0])
		log_set_file(c->log_file);
	if (c->disabled) {
		LOG(LL_INFO, "disabled (NTBSOCK_DISABLE=1): all sockets use the kernel");
		conf_free(c);
		return -ECANCELED;
	}
	pl_tp_params(&c->tunables, &pl_tpp);
	pl_conf = c;
	LOG(LL_DEBUG, "config %s: host %s, %d link(s), %d peer(s)", path, c->host_name, c->n_links,
	    c->n_peers);
	return 0;
}

void pl_init_once(void)
{
	int mode = PL_MODE_PASS;

	PL_ENTER();
	if (!pl_resolved)
		pl_resolve();
	/* The CRC32C path now, while one thread runs and before anything here changes the
	 * environment (pl_inherit() unsets NTBSOCK_INHERIT): its selection reads NTBSOCK_CRC. */
	(void)crc32c_impl_name();
	if (pl_load_conf() == 0) {
		pl_fdtab_init();
		if (pl_fds) {
			mode = PL_MODE_ACTIVE;
			LOG(LL_DEBUG, "CRC32C path: %s", crc32c_impl_name());
			pthread_atfork(pl_atfork_prepare, pl_atfork_parent, pl_atfork_child);
			pl_inherit(true);
			pl_pass_listen_fds();
		}
		else
			LOG(LL_WARN, "out of memory for the fd table: all sockets use the kernel");
	}
	if (mode != PL_MODE_ACTIVE)
		pl_inherit(false);
	PL_LEAVE();
	atomic_store_explicit(&pl_mode, mode, memory_order_release); /* pairs with pl_active() */
}

void pl_init_slow(void)
{
	pthread_once(&pl_once, pl_init_once);
}

/* Whether this process starts with something of ours to take over at once: connections handed
 * over across exec (pl_inherit()) or listeners from socket activation for this process
 * (pl_pass_listen_fds()). */
static bool pl_start_has_sockets(void)
{
	const char *pid = getenv("LISTEN_PID");

	return getenv(PL_INHERIT_VAR) || (pid && getenv("LISTEN_FDS") && atol(pid) == (long)getpid());
}

/* The constructor resolves the real functions (a wrapper must behave as the C library's from
 * the start: cancellation points and all) and, only when the process starts with sockets of
 * ours, the rest of the initialisation. Otherwise that waits for the first call that may make
 * an NTB socket (socket(), listen(), connect(), epoll_create(), a credential change, ...:
 * pl_active()): the configuration file is parsed, and the NTBSOCK_* variables are read, then.
 * A program that never makes a socket (a shell, ls, grep under a host-wide LD_PRELOAD) pays
 * neither: 0.5-0.8 ms less per process on the test VM, where the parse's first touch of its
 * code and data traps page by page. */
__attribute__((constructor)) static void pl_ctor(void)
{
	if (pl_depth)
		return;
	if (pl_start_has_sockets()) {
		pl_init_slow();
		return;
	}
	pl_resolve();
	pl_resolved = true;
}

/* At exit() and exec: the connections this process closed may still hold bytes or a FIN that
 * only it can send or retransmit (a kernel socket's close goes on in the kernel after the
 * process): give them PL_EXIT_LINGER_MS, as the helper thread finishes them (a program that
 * closes and exits at once, its peer still reading, would otherwise leave that peer an
 * ECONNRESET). After a wait that ran out, calls within the next second only look (execvp()
 * tries one directory after another, each through execve()). */
void pl_exit_linger(const char *when)
{
	static _Atomic int64_t gave_up_ns;
	/* relaxed: a time stamp alone, nothing published with it */
	int64_t now = pl_now_ns(), g = atomic_load_explicit(&gave_up_ns, memory_order_relaxed);
	int ms = g && now - g < 1000000000LL ? 0 : PL_EXIT_LINGER_MS;

	PL_ENTER();
	bool at_exit = strcmp(when, "exit") == 0;
	/* At exit, what the peer does not acknowledge goes to the kernel (tp_exit_handoff():
	 * at once when its acknowledgements stall, else before the time is up), which delivers
	 * it after we are gone, as it would a TCP socket's. */
	int left = at_exit && ms ? 0 : tp_exit_drain(ms);

	if (at_exit && ms) {
		int handed = 0, h = tp_exit_handoff(ms, &handed);

		if (handed)
			LOG(LL_INFO, "%s: %d connection(s) handed their unacknowledged bytes to the "
			    "kernel (failed over: exit)", when, handed);
		if (h)
			LOG(LL_INFO, "%s: %d connection(s) could not hand their bytes to the kernel "
			    "in %d ms: reset", when, h, ms);
		left = left > 0 ? 0 : left;
	}

	/* closes that wait for the peer's FIN (they would end at once, our FIN first) */
	tp_finwait_drain();

	if (left && ms) {
		atomic_store_explicit(&gave_up_ns, pl_now_ns(), memory_order_relaxed); /* (above) */
		if (left > 0)
			LOG(LL_INFO, "%s: %d closed connection(s) still unacknowledged after %d ms",
			    when, left, ms);
		else
			LOG(LL_INFO, "%s: closed connections not finished: %s", when,
			    strerror(-left));
	}
	PL_LEAVE();
}

__attribute__((destructor)) static void pl_dtor(void)
{
	/* not when exit() is called from inside the library (a signal handler that interrupted
	 * one of our calls): the locks that call holds stay held */
	if (pl_depth == 0 &&
	    atomic_load_explicit(&pl_mode, memory_order_acquire) == PL_MODE_ACTIVE) { /* pairs
		* with pl_init_once */
		pl_exit_linger("exit");
		PL_ENTER();
		/* The closed connections that still linger (waiting for the peer's FIN, or for a
		 * pass to answer data that came after the close): nobody here finishes them once we
		 * are gone, and the peer, told CLOSING, would wait its peer_timeout_ms for them.
		 * Released now, as before exec: an RST where data came after the close (as the
		 * kernel answers it), else GONE. */
		tp_exec_release_closed();
		tp_exit_announce(); /* the peer host need not wait for our heartbeat to stop */
		PL_LEAVE();
	}
}

int64_t pl_now_ns(void)
{
	return (int64_t)clock_mono_ns();
}

int pl_ms_left(int64_t deadline_ns)
{
	if (deadline_ns < 0)
		return -1;
	int64_t left = deadline_ns - pl_now_ns();
	if (left <= 0)
		return 0;
	return (int)((left + 999999) / 1000000);
}
