// SPDX-License-Identifier: MIT
/* exec(): hand NTB connections and listeners over to the new program image, and adopt them
 * there (doc/design.md §7: "the new image adopts inherited NTB connections").
 *
 * Before the real exec, for every tracked object:
 *  - an open NTB connection with an fd that survives exec (no FD_CLOEXEC) is exported from the
 *    transport (tp_conn_export(): waits until what we sent is acknowledged, then frees it here)
 *    and named in NTBSOCK_INHERIT="c:FD:LINK:TOKEN,..." in the new environment ("a:" instead
 *    of "c:" for one accepted on side 1 of a loopback link);
 *  - one whose fds all close at exec is closed now, as close() would (the peer sees FIN; the
 *    kernel closes the fds themselves at exec, where we cannot see it);
 *  - a listener that survives exec is named as "l:FD" (its advertisement stays: same pid);
 *    one that closes at exec is withdrawn from the links.
 * If the new environment does not preload the library (LD_PRELOAD without libntbsock, and not
 * in /etc/ld.so.preload), nobody could adopt: surviving connections are reset instead (the
 * peer sees ECONNRESET, not a silent stall) and listeners are withdrawn.
 * If the exec fails, exported connections are adopted back and withdrawn listeners advertised
 * again; connections closed or reset for the exec stay closed (their fds then carry kernel TCP).
 *
 * In the new image, pl_inherit() (from init, with secure_getenv: ignored in set-uid programs)
 * validates each entry (fd open, a connected TCP socket or a listener; link in this config;
 * token a number the transport accepts) and installs it in the fd table, then unsets the
 * variable. The new image needs the library and a config naming the same links; otherwise the
 * connections are lost (the transport keeps their state until this process ends).
 *
 * Not handled: posix_spawn() (glibc execs from inside with a direct system call; the child sees
 * only the kernel socket); a connection another thread is inside a call on (blocked in recv())
 * is left alone with a warning, since exporting it would free it under that call (the new
 * image then sees only the kernel socket); a thread that starts a call on a connection while
 * exec exports it; epoll sets inherited across exec (the new image sees their kernel part). */
#include "preload/pl_int.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define PL_INHERIT_LEN (sizeof(PL_INHERIT_VAR) - 1)
/* How long exec waits for the peer to acknowledge what a connection sent before handing it
 * over (the transport hands over only acknowledged state). */
#define PL_EXPORT_TIMEOUT_MS 5000
/* One "c:FD:LINK:TOKEN," entry at most: 2 + 11 + 1 + CONF_NAME_MAX + 1 + 20 + 1. */
#define PL_ENTRY_MAX (40 + CONF_NAME_MAX)

enum ex_outcome {
	EX_NONE = 0,      /* not ours to touch (a kernel TCP connection) */
	EX_EXPORTED,      /* handed over: adopt back if exec fails */
	EX_DETACHED,      /* closed or reset for the exec */
	EX_LISTEN_KEPT,   /* listener inherited, advertisement stays */
	EX_UNLISTENED,    /* listener withdrawn: advertise again if exec fails */
};

struct ex_obj {
	struct pl_sock *s;   /* one reference held while exec runs */
	int first_fd;
	int nslots;          /* fd table slots holding it */
	bool inherit;        /* some fd of it survives exec */
	enum ex_outcome outcome;
	uint64_t token;
};

struct ex_fd {
	int fd;
	int obj;             /* index into the objects */
};

struct ex_plan {
	struct ex_obj *objs;
	struct ex_fd *fds;   /* fds that survive exec */
	int nobjs, nfds, cap_objs, cap_fds;
	char **envp;         /* the new environment (NULL: pass the caller's) */
	char *var;           /* "NTBSOCK_INHERIT=..." inside it */
};

/* --- before exec ------------------------------------------------------------------------------ */

static bool str_has_lib(const char *s)
{
	return s && strstr(s, "libntbsock") != NULL;
}

/* Will the new image load the library? (LD_PRELOAD in its environment, or ld.so.preload.) */
static bool lib_follows(char *const envp[])
{
	char buf[4096];

	for (int i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], "LD_PRELOAD=", 11) && str_has_lib(envp[i] + 11))
			return true;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/etc/ld.so.preload", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = pl_real.read(fd, buf, sizeof(buf) - 1);
	pl_real.close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return str_has_lib(buf);
}

static bool env_is_ours(const char *e)
{
	return !strncmp(e, PL_INHERIT_VAR, PL_INHERIT_LEN) && e[PL_INHERIT_LEN] == '=';
}

static bool grow(void **arr, int *cap, int n, size_t size)
{
	if (n < *cap)
		return true;
	int nc = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, (size_t)nc * size);
	if (!p)
		return false;
	*arr = p;
	*cap = nc;
	return true;
}

/* Collect every tracked object (once, with a reference) and the fds of it that survive exec. */
static int plan_collect(struct ex_plan *p)
{
	int hi = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);

	for (int fd = 0; fd < hi && fd < pl_nfds; fd++) {
		struct pl_sock *s = pl_sock_get(fd);
		int i;

		if (!s)
			continue;
		if (s->kind == PL_EPOLL) {
			pl_sock_put(s);
			continue;
		}
		for (i = 0; i < p->nobjs && p->objs[i].s != s; i++)
			;
		if (i == p->nobjs) {
			if (!grow((void **)&p->objs, &p->cap_objs, p->nobjs, sizeof(*p->objs))) {
				pl_sock_put(s);
				return -ENOMEM;
			}
			p->objs[i] = (struct ex_obj){ .s = s, .first_fd = fd };
			p->nobjs++;
		} else {
			pl_sock_put(s); /* the object's first fd holds the plan's reference */
		}
		p->objs[i].nslots++;
		int fl = pl_real.fcntl(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		if (!grow((void **)&p->fds, &p->cap_fds, p->nfds, sizeof(*p->fds)))
			return -ENOMEM;
		p->fds[p->nfds++] = (struct ex_fd){ .fd = fd, .obj = i };
		p->objs[i].inherit = true;
	}
	return 0;
}

/* End S's NTB path for the exec: orderly close (all fds close at exec) or reset (it survives
 * but cannot be handed over). The fds then carry kernel TCP (state FAILED). */
static void detach_conn(struct ex_obj *o, bool reset, const char *why)
{
	struct pl_sock *s = o->s;

	pthread_mutex_lock(&s->lock);
	struct tp_conn *c = s->conn;
	s->conn = NULL;
	/* release pairs with the acquire in pl_is_ntb(): conn is cleared before */
	atomic_store_explicit(&s->state, PL_CS_FAILED, memory_order_release);
	pthread_mutex_unlock(&s->lock);
	PL_ENTER();
	if (reset)
		tp_abort(c);
	else
		tp_close(c);
	PL_LEAVE();
	o->outcome = EX_DETACHED;
	if (reset)
		LOG(LL_WARN, "fd %d %s: reset at exec: %s", o->first_fd, s->desc, why);
	else
		LOG(LL_DEBUG, "fd %d %s: closed at exec (FD_CLOEXEC)", o->first_fd, s->desc);
}

static void plan_conn(struct ex_obj *o, bool follows)
{
	struct pl_sock *s = o->s;

	pl_defer_clear(s, o->first_fd); /* the next program does not know about it */
	if (!pl_is_ntb(s, o->first_fd) || !s->conn)
		return; /* kernel TCP: the kernel hands it over by itself */
	/* References beyond the table slots and ours are calls in flight in other threads (one
	 * blocked in recv()): exporting or closing would free the connection under them. */
	int in_flight = atomic_load_explicit(&s->refs, memory_order_acquire) - o->nslots - 1;
	if (in_flight > 0) {
		LOG(LL_WARN, "fd %d %s: in use by another thread during exec: not handed over",
		    o->first_fd, s->desc);
		return;
	}
	if (!o->inherit) {
		detach_conn(o, false, NULL);
		return;
	}
	if (!follows) {
		detach_conn(o, true, "the new program does not preload libntbsock");
		return;
	}
	const char *link = pl_conf->links[s->link_index].name;
	if (strpbrk(link, ":,")) {
		detach_conn(o, true, "link name cannot be passed on");
		return;
	}
	uint64_t token;
	PL_ENTER();
	int r = tp_conn_export(s->conn, PL_EXPORT_TIMEOUT_MS, &token);
	PL_LEAVE();
	if (r < 0) {
		char why[96];
		snprintf(why, sizeof(why), "cannot hand over: %s",
			 r == -EBUSY ? "sent data still unacknowledged" : strerror(-r));
		detach_conn(o, true, why);
		return;
	}
	/* The transport freed the connection: nobody may use the pointer (single-threaded exec,
	 * see the file comment). */
	pthread_mutex_lock(&s->lock);
	s->conn = NULL;
	pthread_mutex_unlock(&s->lock);
	o->token = token;
	o->outcome = EX_EXPORTED;
	LOG(LL_DEBUG, "fd %d %s: handed over at exec (token %" PRIu64 ")", o->first_fd, s->desc,
	    token);
}

static void plan_listener(struct ex_obj *o, bool follows)
{
	/* One passed to another process (pl_pass.c) is advertised again first: the new image
	 * names it and withdraws it at its close, a failed exec keeps it, as any listener. */
	if (atomic_exchange_explicit(&o->s->unadvertised, false, memory_order_relaxed))
		pl_listener_links(o->s, true);
	if (o->inherit && follows) {
		o->outcome = EX_LISTEN_KEPT;
		return;
	}
	/* (marked withdrawn first: a link that opens meanwhile must not advertise it again) */
	atomic_store_explicit(&o->s->unadvertised, true, memory_order_relaxed);
	pl_listener_links(o->s, false);
	o->outcome = EX_UNLISTENED;
}

/* Build the new environment: ENVP without any NTBSOCK_INHERIT, plus ours when non-empty. */
static int plan_env(struct ex_plan *p, char *const envp[])
{
	size_t n = 0, len = PL_INHERIT_LEN + 2;
	bool stale = false;

	for (; envp && envp[n]; n++)
		stale |= env_is_ours(envp[n]);
	for (int i = 0; i < p->nfds; i++)
		len += PL_ENTRY_MAX;
	p->var = malloc(len);
	p->envp = malloc((n + 2) * sizeof(char *));
	if (!p->var || !p->envp)
		return -ENOMEM;
	size_t off = (size_t)snprintf(p->var, len, "%s=", PL_INHERIT_VAR);
	int entries = 0;
	for (int i = 0; i < p->nfds; i++) {
		struct ex_obj *o = &p->objs[p->fds[i].obj];
		int w = 0;
		if (o->outcome == EX_EXPORTED)
			/* "a:" a connection accepted on side 1 of a loopback link, "c:" any other */
			w = snprintf(p->var + off, len - off, "%s%c:%d:%s:%" PRIu64, entries ? "," : "",
				     o->s->link_listen_side ? 'a' : 'c', p->fds[i].fd,
				     pl_conf->links[o->s->link_index].name, o->token);
		else if (o->outcome == EX_LISTEN_KEPT)
			w = snprintf(p->var + off, len - off, "%sl:%d", entries ? "," : "",
				     p->fds[i].fd);
		if (w > 0) {
			off += (size_t)w;
			entries++;
		}
	}
	if (!entries && !stale)
		return 0; /* nothing to say: the caller's environment as it is */
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!env_is_ours(envp[i]))
			p->envp[k++] = envp[i];
	if (entries)
		p->envp[k++] = p->var;
	p->envp[k] = NULL;
	return 1;
}

/* The exec failed: take the connections back, advertise listeners again, drop references. */
static void plan_undo(struct ex_plan *p)
{
	for (int i = 0; i < p->nobjs; i++) {
		struct ex_obj *o = &p->objs[i];
		struct pl_sock *s = o->s;
		if (o->outcome == EX_EXPORTED) {
			struct tp_link *l = pl_link_get_at(s->link_index, s->link_listen_side, false,
							   NULL);
			struct tp_conn *c = NULL;
			int r = -ENOLINK;
			PL_ENTER();
			if (l)
				r = tp_conn_adopt(l, o->token, &c);
			if (r == 0) {
				tp_conn_set_owner(c, (int)getpid(), o->first_fd);
				tp_conn_set_witness(c, o->first_fd);
			}
			PL_LEAVE();
			pthread_mutex_lock(&s->lock);
			s->conn = c;
			if (r < 0)
				/* release pairs with the acquire in pl_is_ntb() */
				atomic_store_explicit(&s->state, PL_CS_FAILED, memory_order_release);
			pthread_mutex_unlock(&s->lock);
			if (r < 0)
				LOG(LL_WARN, "fd %d %s: exec failed and the connection cannot be taken back: %s",
				    o->first_fd, s->desc, strerror(-r));
		} else if (o->outcome == EX_UNLISTENED) {
			atomic_store_explicit(&s->unadvertised, false, memory_order_relaxed);
			pl_listener_links(s, true);
		}
	}
}

static void plan_free(struct ex_plan *p)
{
	for (int i = 0; i < p->nobjs; i++)
		pl_sock_put(p->objs[i].s);
	free(p->objs);
	free(p->fds);
	free(p->envp);
	free(p->var);
}

enum ex_kind { EX_PATH, EX_SEARCH, EX_FD, EX_AT };

struct ex_call {
	enum ex_kind kind;
	int dirfd, flags;
	const char *path;
	char *const *argv;
};

static int exec_real(const struct ex_call *x, char *const envp[])
{
	switch (x->kind) {
	case EX_PATH:
		return pl_real.execve(x->path, x->argv, envp);
	case EX_SEARCH:
		return pl_real.execvpe(x->path, x->argv, envp);
	case EX_FD:
		return pl_real.fexecve(x->dirfd, x->argv, envp);
	case EX_AT:
		return pl_real.execveat(x->dirfd, x->path, x->argv, envp, x->flags);
	}
	errno = EINVAL;
	return -1;
}

static bool env_has_ours(char *const envp[])
{
	for (int i = 0; envp && envp[i]; i++)
		if (env_is_ours(envp[i]))
			return true;
	return false;
}

/* The closed connections that still linger (their FIN acknowledged, the peer's not seen yet):
 * released before exec, or their receive contexts would stay with this pid until it exits. */
static void exec_release_closed(void)
{
	/* not from a signal handler that interrupted one of our calls (its locks stay held) */
	if (pl_depth != 0)
		return;
	PL_ENTER();
	tp_exec_release_closed();
	PL_LEAVE();
}

/* Before an exec that hands nothing over (RELEASE), and after it failed: this process's claims
 * on its links' sides (tp_exec_claims()). A forked child holds one of its own (a program that
 * fork-execs helpers would otherwise keep a slot per helper, and its side up, while they run). */
static void exec_claims(bool release)
{
	if (pl_depth != 0) /* (not from a signal handler inside one of our calls) */
		return;
	PL_ENTER();
	tp_exec_claims(release);
	PL_LEAVE();
}

static int pl_exec(const struct ex_call *x, char *const envp[])
{
	struct ex_plan p;
	int saved = errno;

	/* (not initialised: no socket of ours exists, nothing to hand over; pl_active() would
	 * initialise the library only for the exec) */
	if (atomic_load_explicit(&pl_mode, memory_order_acquire) == PL_MODE_NONE || !pl_active())
		return exec_real(x, envp);
	if (atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0 && !env_has_ours(envp)) {
		pl_exit_linger("exec");
		exec_release_closed();
		exec_claims(true);
		errno = saved;
		exec_real(x, envp);
		saved = errno;
		exec_claims(false);
		errno = saved;
		return -1;
	}
	memset(&p, 0, sizeof(p));
	if (plan_collect(&p) < 0)
		goto nomem;
	bool follows = lib_follows(envp);
	/* First the connections that close at exec; then the wait for those and any closed
	 * before (pl_exit_linger()), while the ones handed over are still ours to answer for;
	 * then the hand-over. */
	for (int i = 0; i < p.nobjs; i++)
		if (p.objs[i].s->kind == PL_CONN && !p.objs[i].inherit)
			plan_conn(&p.objs[i], follows);
	pl_exit_linger("exec");
	exec_release_closed();
	for (int i = 0; i < p.nobjs; i++) {
		if (p.objs[i].s->kind == PL_CONN && p.objs[i].inherit)
			plan_conn(&p.objs[i], follows);
		else if (p.objs[i].s->kind == PL_LISTENER)
			plan_listener(&p.objs[i], follows);
	}
	int r = plan_env(&p, envp);
	if (r < 0)
		goto nomem_undo;
	if (r > 0)
		LOG(LL_DEBUG, "exec %s: %s", x->path ? x->path : "(fd)", p.var);
	bool handover = false;

	for (int i = 0; i < p.nobjs; i++)
		handover |= p.objs[i].outcome == EX_EXPORTED || p.objs[i].outcome == EX_LISTEN_KEPT;
	if (!handover)
		exec_claims(true);
	errno = saved;
	exec_real(x, r > 0 ? p.envp : envp);
	saved = errno;
	if (!handover)
		exec_claims(false);
	plan_undo(&p);
	plan_free(&p);
	errno = saved;
	return -1;

nomem_undo:
	plan_undo(&p);
nomem:
	plan_free(&p);
	LOG(LL_WARN, "exec: out of memory for the hand-over of ntb connections");
	errno = ENOMEM;
	return -1;
}

NTB_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct ex_call x = { .kind = EX_PATH, .path = path, .argv = argv };
	return pl_exec(&x, envp);
}

NTB_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			int flags)
{
	struct ex_call x = { .kind = EX_AT, .dirfd = dirfd, .path = path, .argv = argv,
			     .flags = flags };
	return pl_exec(&x, envp);
}

NTB_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct ex_call x = { .kind = EX_FD, .dirfd = fd, .argv = argv };
	return pl_exec(&x, envp);
}

NTB_EXPORT int execv(const char *path, char *const argv[])
{
	struct ex_call x = { .kind = EX_PATH, .path = path, .argv = argv };
	return pl_exec(&x, environ);
}

NTB_EXPORT int execvp(const char *file, char *const argv[])
{
	struct ex_call x = { .kind = EX_SEARCH, .path = file, .argv = argv };
	return pl_exec(&x, environ);
}

NTB_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	struct ex_call x = { .kind = EX_SEARCH, .path = file, .argv = argv };
	return pl_exec(&x, envp);
}

/* execl*: count the arguments and copy them into an argv on the stack, as glibc does; execle
 * (WITH_ENV) then reads the environment that follows the terminating NULL. */
#define EXECL_ARGV(first, ap, argv, envp_out, with_env)                                        \
	size_t argc_ = 1;                                                                      \
	va_start(ap, first);                                                                   \
	while (va_arg(ap, const char *))                                                       \
		argc_++;                                                                       \
	va_end(ap);                                                                            \
	char *argv[argc_ + 1];                                                                 \
	argv[0] = (char *)(first);                                                             \
	va_start(ap, first);                                                                   \
	for (size_t i_ = 1; i_ <= argc_; i_++)                                                 \
		argv[i_] = va_arg(ap, char *); /* the last one is the terminating NULL */      \
	if (with_env)                                                                          \
		envp_out = va_arg(ap, char *const *);                                          \
	va_end(ap)

NTB_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char *const *envp = environ;
	EXECL_ARGV(arg, ap, argv, envp, false);
	struct ex_call x = { .kind = EX_PATH, .path = path, .argv = argv };
	return pl_exec(&x, envp);
}

NTB_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char *const *envp = environ;
	EXECL_ARGV(arg, ap, argv, envp, false);
	struct ex_call x = { .kind = EX_SEARCH, .path = file, .argv = argv };
	return pl_exec(&x, envp);
}

NTB_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char *const *envp = NULL;
	EXECL_ARGV(arg, ap, argv, envp, true);
	struct ex_call x = { .kind = EX_PATH, .path = path, .argv = argv };
	return pl_exec(&x, envp);
}

/* --- in the new image -------------------------------------------------------------------------- */

struct in_adopted {
	uint64_t token;
	struct pl_sock *s;
};

static int parse_int(const char *s, int *ret)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT32_MAX)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

/* FD is an open TCP socket; with LISTENING, a listening one, else a connected one. */
static const char *check_fd(int fd, bool listening)
{
	struct stat st;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int acc = 0;
	socklen_t al = sizeof(acc);

	if (fd >= pl_nfds)
		return "fd beyond the fd table";
	if (fstat(fd, &st) < 0)
		return "fd not open";
	if (!S_ISSOCK(st.st_mode) || !pl_is_tcp_stream(fd))
		return "not a TCP socket";
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !!acc != listening)
		return listening ? "not listening" : "a listening socket";
	if (!listening && pl_real.getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return "not connected";
	if (atomic_load_explicit(&pl_fds[fd], memory_order_relaxed))
		return "named twice";
	return NULL;
}

static void inherit_listener(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const char *bad = check_fd(fd, true);

	if (!bad && pl_real.getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		bad = "getsockname failed";
	if (bad) {
		LOG(LL_WARN, "exec: inherited listener fd %d ignored: %s", fd, bad);
		return;
	}
	struct pl_sock *s = pl_sock_alloc(PL_LISTENER);
	if (!s)
		return;
	s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						 : ((struct sockaddr_in6 *)&ss)->sin6_port);
	pl_sock_load_opts(s, fd); /* what accepted sockets inherit (pl_accept.c) */
	s->opts_shared = true; /* (its other holders, if any, may set them: accept() asks) */
	/* The advertisement made before exec stays (same pid): the listener takes over such a
	 * reference where one is left (one per listener object before exec, while each of its fds
	 * is one here), else makes its own, on each link as it opens (pl_listener_links()). */
	pl_listener_add(s);
	for (int i = 0; i < pl_conf->n_links && i < CONF_MAX_LINKS; i++)
		pl_link_get_at(i, true, false, NULL);
	pl_fd_install(fd, s);
	pl_listener_links(s, true);
	pl_sock_put(s);
	LOG(LL_DEBUG, "fd %d: listener on port %u inherited across exec", fd, s->port);
}

static struct pl_sock *adopt_conn(int fd, int link_index, bool listen_side, uint64_t token)
{
	struct sockaddr_storage a, b;
	socklen_t al = sizeof(a), bl = sizeof(b);
	/* A link just opened is not seen up at once: without the wait, the connection would take
	 * its peer for lost at the first call. */
	struct tp_link *l = pl_link_get_at(link_index, listen_side, true, NULL);
	struct tp_conn *c = NULL;
	int r = -ENOLINK;

	if (l) {
		tp_link_is_up(l); /* (refreshes the transport's cached link state) */
		r = tp_conn_adopt(l, token, &c);
	}

	if (r < 0) {
		LOG(LL_WARN, "exec: inherited fd %d: cannot adopt the ntb connection: %s%s", fd,
		    strerror(-r), r == -ENOENT ? " (stale token)" : "");
		return NULL;
	}
	struct pl_sock *s = pl_sock_alloc(PL_CONN);
	if (!s) {
		tp_abort(c);
		LOG(LL_WARN, "exec: inherited fd %d: out of memory: connection reset", fd);
		return NULL;
	}
	tp_conn_set_witness(c, fd);
	s->conn = c;
	s->link_index = link_index;
	s->link_listen_side = listen_side;
	if (pl_real.getsockname(fd, (struct sockaddr *)&a, &al) == 0 &&
	    pl_real.getpeername(fd, (struct sockaddr *)&b, &bl) == 0)
		pl_desc_pair(s->desc, sizeof(s->desc), (struct sockaddr *)&a, (struct sockaddr *)&b);
	pl_sock_load_opts(s, fd);
	atomic_store_explicit(&s->state, PL_CS_OPEN, memory_order_relaxed); /* install publishes */
	tp_conn_set_owner(c, (int)getpid(), fd);
	return s;
}

static void inherit_conn(char *spec, bool listen_side, struct in_adopted *done, int *ndone,
			 int max)
{
	char *fd_s = spec, *link_s, *tok_s, *end;
	int fd;

	link_s = strchr(fd_s, ':');
	tok_s = link_s ? strchr(link_s + 1, ':') : NULL;
	if (!tok_s)
		goto bad;
	*link_s++ = 0;
	*tok_s++ = 0;
	errno = 0;
	uint64_t token = strtoull(tok_s, &end, 10);
	bool tok_bad = errno || end == tok_s || *end || *tok_s == '-' || *tok_s == '+';
	if (tok_bad || parse_int(fd_s, &fd) < 0)
		goto bad;
	const struct conf_link *cl = conf_link_by_name(pl_conf, link_s);
	if (!cl) {
		LOG(LL_WARN, "exec: inherited fd %d: link %s is not in this config: connection lost",
		    fd, link_s);
		return;
	}
	const char *why = check_fd(fd, false);
	if (why) {
		LOG(LL_WARN, "exec: inherited fd %d ignored: %s", fd, why);
		return;
	}
	struct pl_sock *s = NULL;
	for (int i = 0; i < *ndone && !s; i++)
		if (done[i].token == token)
			s = done[i].s; /* another fd of the same connection (dup) */
	if (!s) {
		if (*ndone >= max)
			return;
		s = adopt_conn(fd, (int)(cl - pl_conf->links), listen_side && cl->loopback, token);
		if (!s)
			return;
		done[*ndone].token = token;
		done[(*ndone)++].s = s;
		LOG(LL_INFO, "fd %d %s: ntb (link %s, adopted across exec)", fd, s->desc, cl->name);
	}
	pl_fd_install(fd, s);
	return;
bad:
	LOG(LL_WARN, "exec: bad %s entry ignored", PL_INHERIT_VAR);
}

void pl_inherit(bool active)
{
	const char *raw = getenv(PL_INHERIT_VAR);
	if (!raw)
		return;
	/* secure_getenv: a set-uid program must not adopt what its caller names. */
	const char *val = secure_getenv(PL_INHERIT_VAR);
	char *copy = val ? strdup(val) : NULL;
	unsetenv(PL_INHERIT_VAR); /* not for the programs this one runs */
	if (!val) {
		LOG(LL_WARN, "%s ignored (set-uid program): inherited ntb connections are lost",
		    PL_INHERIT_VAR);
		return;
	}
	if (!active) {
		LOG(LL_WARN, "no config: the ntb connections inherited across exec are lost");
		free(copy);
		return;
	}
	if (!copy) {
		LOG(LL_WARN, "exec: out of memory: inherited ntb connections are lost");
		return;
	}
	int max = 1;
	for (const char *c = copy; *c; c++)
		max += *c == ',';
	struct in_adopted *done = calloc((size_t)max, sizeof(*done));
	int ndone = 0;
	char *save = NULL;
	for (char *e = strtok_r(copy, ",", &save); e && done; e = strtok_r(NULL, ",", &save)) {
		int fd;
		if (!strncmp(e, "c:", 2) || !strncmp(e, "a:", 2))
			inherit_conn(e + 2, e[0] == 'a', done, &ndone, max);
		else if (!strncmp(e, "l:", 2) && parse_int(e + 2, &fd) == 0)
			inherit_listener(fd);
		else
			LOG(LL_WARN, "exec: bad %s entry ignored", PL_INHERIT_VAR);
	}
	for (int i = 0; i < ndone; i++)
		pl_sock_put(done[i].s);
	free(done);
	free(copy);
}
