/* SPDX-License-Identifier: MIT */
/* preload/ private header: the real-function table, init and recursion guard, the fd table
 * (fd → struct pl_sock), links, and the entry points the wrapper files share.
 *
 * Files: intercept.def (the one list of wrapped calls) → pl_sys.c (syscall fallbacks, the table
 * of real functions) and pl_init.c (dlsym, config, mode); pl_fdtab.c (fd table, object pool);
 * set-up: pl_link.c (links, listeners, fork), pl_addr.c (keys, host addresses), pl_connect.c
 * (routing, NTB set-up beside the kernel connect) and pl_connect_late.c (the port left to the
 * kernel), pl_accept.c (accept, listen), pl_sockopt.c; pl_sock.c (control calls); pl_io.c
 * (data calls); readiness: pl_ready.c (one fd's poll bits), pl_spin.c (spin-then-sleep
 * timing), pl_poll.c, pl_select.c, pl_epoll.c (the epoll shadow) and pl_epoll_wait.c, sharing
 * pl_ready_int.h;
 *
 * Flow: every socket stays a kernel TCP socket. connect() asks conf_route(); for ntb it binds
 * the host address if needed, reserves the NTB path under the 4-tuple (tp_connect) BEFORE the
 * kernel connect, then confirms; accept() attaches by the same key. From then on the fd's data
 * calls and readiness go to the transport; everything else stays with the kernel.
 *
 * pl_cand.c moves the epoll registrations of a socket that becomes NTB at connect().
 *
 * pl_exec.c hands NTB connections and listeners over to the new image across exec() and adopts
 * them there (NTBSOCK_INHERIT).
 *
 * pl_cred.c opens the links (and the table of tcp connections) before the program changes its
 * credentials (setuid() and the rest), so that a daemon started as root keeps them as nobody.
 *
 * Known limits: exec through posix_spawn() (glibc calls the kernel directly) or into a program
 * without the library loses inherited NTB connections (see pl_exec.c); an fd closed behind our back (fclose of fdopen'ed socket, raw syscall) leaves a stale entry
 * until the number is reused by socket(), accept(), dup or epoll_create. */
#ifndef NTBSOCK_PRELOAD_PL_INT_H
#define NTBSOCK_PRELOAD_PL_INT_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "conf/conf.h"
#include "transport/transport.h"
#include "util/compiler.h"
#include "util/log.h"

/* A wrapper of an intercepted call: default visibility, so that the version script generated
 * from intercept.def (preload/gen_map.sh) can export it. Everything else in the library is
 * hidden (-fvisibility=hidden) and local to the version script. */
#define NTB_EXPORT __attribute__((visibility("default")))

/* --- real functions (generated from intercept.def) ------------------------------------------ */

#define PL_CALL(name, ret, params, args) ret (*name) params;
struct pl_real_table {
#include "preload/intercept.def"
};
#undef PL_CALL

/* Starts as the syscall() fallbacks (pl_sys.c); pl_init_once() overwrites each entry with the
 * dlsym(RTLD_NEXT) result (one pointer-sized store each) before pl_mode is published. */
extern struct pl_real_table pl_real;

/* Recursion guard: > 0 while this thread runs our own code that may call libc (conf loading,
 * transport calls); wrappers then go straight to the real function. */
extern __thread int pl_depth __attribute__((tls_model("initial-exec")));

/* 0: not initialised; 1: pass-through (no/broken config, disabled); 2: active. Published with
 * release at the end of pl_init_once(), read with acquire by pl_init(). */
extern _Atomic int pl_mode;
enum { PL_MODE_NONE = 0, PL_MODE_PASS = 1, PL_MODE_ACTIVE = 2 };

void pl_init_slow(void);

/* The variable exec passes the connections it hands over in (pl_exec.c). */
#define PL_INHERIT_VAR "NTBSOCK_INHERIT"

/* Make sure init ran (constructor, else first wrapper). True when sockets may be NTB. */
static inline bool pl_active(void)
{
	int m = atomic_load_explicit(&pl_mode, memory_order_acquire); /* pairs with pl_init_once */
	if (unlikely(m == PL_MODE_NONE)) {
		if (pl_depth)
			return false;
		pl_init_slow();
		m = atomic_load_explicit(&pl_mode, memory_order_acquire); /* as above */
	}
	return m == PL_MODE_ACTIVE && pl_depth == 0;
}

/* pl_active() without initialising: false until something did. */
static inline bool pl_inited(void)
{
	/* acquire: pairs with pl_init_once's release */
	return atomic_load_explicit(&pl_mode, memory_order_acquire) == PL_MODE_ACTIVE &&
	       pl_depth == 0;
}

#define PL_ENTER() (pl_depth++)
#define PL_LEAVE() (pl_depth--)

/* How long exit() and exec wait for the connections the process closed (pl_init.c). */
#define PL_EXIT_LINGER_MS 2000
/* close() of a connection the peer closed first: how long it waits for the peer's TCP FIN
 * before closing its own TCP socket (pl_sock.c: await_peer_fin()). The peer's FIN follows its
 * NTB close at once, or, when it closed with bytes unacknowledged (it keeps its socket for a
 * failover: tp_close()), once our reading acknowledged them and its helper saw it (a few ms;
 * more on a loaded host). */
#define PL_PEER_FIN_WAIT_MS 100
void pl_exit_linger(const char *when);

/* Return R (>= 0) or set errno from a negative errno and return -1: where a wrapper turns a
 * transport/ or preload result (0, a count or -errno) into libc's convention. It is not the only
 * place errno is written: the wrappers also restore the program's errno after calls of our own
 * that may change it (`errno = saved`), pass on a kernel result that a real call or a pending
 * connect left (`errno = e`), report the NTB set-up's outcome of a connect() under fallback
 * "error" (ENETUNREACH, ECONNREFUSED), and the syscall() fallbacks (pl_sys.c) and the exec
 * wrappers (pl_exec.c) follow libc's convention themselves. */
static inline long pl_ret(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* --- config and links ------------------------------------------------------------------------- */

extern struct conf *pl_conf;        /* loaded config (active mode only) */
extern struct tp_params pl_tpp;
extern uint32_t pl_spin_us;         /* busy-poll budget of blocking waits (config spin_us) */

/* The transport link for conf link INDEX, opened on first use. With WAIT_UP, a link opened less
 * than a moment ago is given the set-up timeout to come up. NULL when it cannot be opened. */
struct tp_link *pl_link_get(int index, bool wait_up, bool *ret_fresh);
/* The same for the side this process connects from (LISTEN_SIDE false: what pl_link_get()
 * gives) or listens and accepts on (true). They differ only for a loopback link, where this
 * host is both sides: connects start on side 0 and are accepted on side 1. */
struct tp_link *pl_link_get_at(int index, bool listen_side, bool wait_up, bool *ret_fresh);
/* The config link index of open transport link L, or -1. */
int pl_link_index_of(struct tp_link *l);

/* Convert config structs to layer params (pl_link.c). */
void pl_link_params(const struct conf_link *cl, struct ntb_link_params *ret);
void pl_tp_params(const struct conf_tunables *t, struct tp_params *ret);

/* Is conf link INDEX a loopback link (both sides on this host)? */
bool pl_link_is_loopback(int index);
/* For a connect over link INDEX that this process has not opened yet: why the peer side is
 * known to be gone (a link that would not come up), or NULL. */
const char *pl_link_peek_gone(int index);
/* Why LINK is down, when the peer side is known to be gone; NULL: just down. */
const char *pl_link_down_reason(struct tp_link *link);
/* A tp_connect() over link INDEX ended with R / WHY, QUICK when it took less than the hold of
 * a late connect: a quick answer settles the link (the peer host serves it), a timeout
 * unsettles it. */
void pl_link_note_setup(int index, int r, enum tp_reason why, bool quick);
/* A set-up answered within this settles its link (pl_link_note_setup()): later connects over it
 * leave the port to the kernel and reserve after its connect (pl_connect_late.c, whose set-up
 * is given up after PL_HOLD_GIVEUP_MS). */
#define PL_HOLD_OK_MS 100
bool pl_link_settled(int index);
/* The server stays TCP although the client may have reserved NTB under KEY: end that
 * reservation on every link, so the client sees a reset instead of waiting on a path nobody
 * serves. */
void pl_links_refuse(const struct tp_key *key);

/* --- sockets ---------------------------------------------------------------------------------- */

enum pl_kind { PL_LISTENER = 1, PL_CONN = 2, PL_EPOLL = 3 };
enum pl_cstate { PL_CS_PENDING = 0, PL_CS_OPEN = 1, PL_CS_FAILED = 2 };

struct pl_epoll;

/* One tracked object, shared by every fd that refers to it (dup). Memory is type-stable: a
 * freed pl_sock goes to a free list and is reused, never returned to malloc, so a lock-free
 * lookup that races with a close can always read refs safely (see pl_sock_get()).
 *
 *   field        written by                          read by
 *   refs         lookup (inc), put (dec)             everybody (atomic)
 *   gen          alloc (before install)              epoll shadows
 *   kind_hint    alloc (before install, relaxed)     pl_sock_get_user() (relaxed, unreferenced)
 *   state        connect/check_pending (under lock)  data path (acquire)
 *   nonblock     fcntl/ioctl wrappers                data path (relaxed)
 *   wlen         pl_send (relaxed)                   readiness (relaxed, a hint)
 *   nospace,     pl_send, readiness (relaxed)        readiness (relaxed; a race costs at
 *   room_gen                                         most a spurious EPOLLOUT edge)
 *   others       set before the install (release), then read-only, or under lock */
struct pl_sock {
	_Atomic int refs;
	_Atomic unsigned gen;
	struct pl_sock *next_free;
	enum pl_kind kind;
	_Atomic int kind_hint;       /* KIND again, for a look without a reference (set at alloc,
				      * before the install; pl_sock_get_user()) */
	_Atomic int state;
	_Atomic int nonblock;        /* O_NONBLOCK of the open file description */
	_Atomic int rcvtimeo_ms;     /* SO_RCVTIMEO, 0 = none */
	_Atomic int sndtimeo_ms;
	_Atomic int linger_abort;    /* SO_LINGER on with 0 s: close resets */
	_Atomic bool nospace;        /* a send or a readiness look found no room (the kernel's
				      * SOCK_NOSPACE): room found afterwards is an EPOLLOUT edge */
	_Atomic unsigned room_gen;   /* bumped on each such edge (edge-triggered epoll) */
	_Atomic unsigned rx_eagain;  /* receives that said EAGAIN: readable data after one is an
				      * EPOLLIN edge (pl_epoll_wait.c: sock_rx_stamp()) */
	_Atomic bool err_taken;      /* the connection's error (a reset, a timeout) was reported
				      * once: pl_err_take() */
	_Atomic unsigned wlen;       /* bytes of the last send call: POLLOUT means room for as
				      * many in one message (pl_ready.c, tp_send_fits()) */
	pthread_mutex_t lock;
	struct tp_conn *conn;
	int link_index;
	bool link_listen_side;       /* accepted on side 1 of a loopback link (pl_link_get_at()) */
	uint16_t port;               /* listener: advertised port */
	uint64_t adv_links;          /* listener: the config links (bit = index) it is advertised
				      * on, a reference each in their host tables (pl_link.c,
				      * under pl_adv_lock) */
	struct pl_sock *adv_next;    /* listener: the process's list of them (pl_adv_lock) */
	int pending_err;             /* failed non-blocking connect: SO_ERROR once */
	char desc[128];              /* "127.0.0.1:40000 -> 127.0.0.2:5201" for logs */
	/* a listener: pl_fork_gen when its options were loaded; another count (a fork since: the
	 * listener may be shared, its options set by another process) or opts_shared (adopted
	 * after exec) makes accept() ask the kernel (pl_accept.c: accept_opts()) */
	unsigned opts_gen;
	bool opts_shared;
	/* a listener whose SO_RCVTIMEO, SO_SNDTIMEO or SO_LINGER the program set after listen():
	 * a connection already in the backlog keeps the ones it had, so accept() asks the kernel */
	_Atomic bool opts_set_late;
	bool moved;                  /* failed over to its kernel socket (pl_failover.c; written
				      * under lock, before state's release store of FAILED) */
	_Atomic unsigned link_moves; /* moves to another link logged so far (pl_failover.c) */
	_Atomic bool unadvertised;   /* a listener withdrawn from the links: passed to another
				      * process (pl_pass.c), an io_uring made, or an exec it
				      * does not survive under way (set before the withdrawal) */
	_Atomic bool defer_left;     /* our TCP_DEFER_ACCEPT is still set on the kernel socket
				      * (pl_connect_late.c: cleared when it could matter; set
				      * before the install, cleared under lock after the kernel's
				      * option, release) */
	struct pl_epoll *ep;         /* PL_EPOLL */
};

struct pl_sock *pl_sock_alloc(enum pl_kind kind);
void pl_sock_put(struct pl_sock *s);
struct pl_sock *pl_sock_get(int fd);
/* Install S at FD (takes a new reference); drops whatever was there. */
void pl_fd_install(int fd, struct pl_sock *s);
/* Remove FD's entry and return it (the caller owns the slot's reference), or NULL. */
struct pl_sock *pl_fd_take(int fd);
/* Another descriptor than SKIP whose entry is S (a dup of its socket), or -1. Scans the table:
 * for rare events only. */
int pl_fd_find(const struct pl_sock *s, int skip);
/* The same, outside the descriptors LO..HI (a range about to be closed). */
int pl_fd_find_outside(const struct pl_sock *s, unsigned lo, unsigned hi);
/* Drop a stale entry at a newly created FD. */
static inline void pl_fd_fresh(int fd);
void *pl_zero_pages(size_t len); /* zero pages, mapped for good (pl_fdtab.c) */
int pl_fd_max(void);
void pl_fdtab_init(void);
void pl_fdtab_atfork_child(void);
extern _Atomic(struct pl_sock *) *pl_fds;
extern int pl_nfds;
extern _Atomic int pl_nsocks;
extern _Atomic int pl_fd_hi;   /* one above the highest fd ever installed: bounds scans */

static inline void pl_fd_fresh(int fd)
{
	if (unlikely(pl_fds && fd >= 0 && fd < pl_nfds &&
		     atomic_load_explicit(&pl_fds[fd], memory_order_relaxed))) {
		struct pl_sock *s = pl_fd_take(fd);
		if (s)
			pl_sock_put(s);
	}
}

/* Lookup on the data path: NULL for every fd that is not ours (one load). */
static inline struct pl_sock *pl_lookup(int fd)
{
	if (likely(atomic_load_explicit(&pl_nsocks, memory_order_relaxed) == 0))
		return NULL;
	if (!pl_active())
		return NULL;
	return pl_sock_get(fd);
}

/* A PENDING connection: see whether the kernel connect finished; confirm or fail. Returns the
 * resulting state. */
int pl_check_pending(struct pl_sock *s, int fd);
/* close() for syscall(SYS_close) (preload/pl_uring.c): the same, but the kernel's close is
 * made without the C library's, which is a cancellation point (pl_sock.c). */
int pl_close_nocancel(int fd);

/* --- failover (pl_failover.c) -------------------------------------------------------------------- */

/* S's connection moved to its kernel socket: hand the descriptor to the kernel (once). */
void pl_conn_moved(struct pl_sock *s, int fd);
/* The transport finished moving S's connection: pl_conn_moved(), true. */
bool pl_conn_check_moved(struct pl_sock *s, int fd);
/* The rest of a call that found the connection moved, through the kernel (negative errno). */
ssize_t pl_moved_send(int fd, const struct iovec *iov, int iovcnt, size_t done, int flags);
ssize_t pl_moved_recv(int fd, const struct iovec *iov, int iovcnt, int flags);

/* A connection's error R (a negative errno) as the kernel reports a socket's pending error:
 * once (by a call, or SO_ERROR), then the socket is closed both ways: a receive says 0, a send
 * EPIPE, poll no POLLERR. R itself when it is no such error or the first report; else AFTER. */
static inline long pl_err_take(struct pl_sock *s, long r, long after)
{
	if (r != -ECONNRESET && r != -ETIMEDOUT)
		return r;
	return atomic_exchange_explicit(&s->err_taken, true, memory_order_relaxed) ? after : r;
}

/* Publish connection S's state ST (enum pl_cstate). */
static inline void pl_set_state(struct pl_sock *s, int st)
{
	/* release pairs with the acquire in pl_is_ntb(): conn is set before. */
	atomic_store_explicit(&s->state, st, memory_order_release);
}

/* True when S carries data over NTB (open connection). Resolves a pending connect first. */
static inline bool pl_is_ntb(struct pl_sock *s, int fd)
{
	if (s->kind != PL_CONN)
		return false;
	int st = atomic_load_explicit(&s->state, memory_order_acquire); /* pairs with pl_set_state */
	if (unlikely(st == PL_CS_PENDING))
		st = pl_check_pending(s, fd);
	return st == PL_CS_OPEN && !pl_conn_check_moved(s, fd);
}

/* --- set-up (pl_link.c, pl_addr.c, pl_connect.c, pl_accept.c) -------------------------------- */

void pl_init_once(void);
int pl_connect(int fd, const struct sockaddr *addr, socklen_t len);
/* NFD was accepted on LISTENER's FD with accept4() FLAGS; CLIENT (CLIENT_LEN bytes): the
 * client's address as the accept returned it, or NULL (then asked of the kernel). */
void pl_accepted(int fd, int nfd, struct pl_sock *listener, int flags,
		 const struct sockaddr *client, socklen_t client_len);
/* FD (bound to a port) is about to listen: advertise the port, track FD as a listener. True
 * when it did (false: not a bound TCP socket, port 0, or already a listener). */
bool pl_listened(int fd);
/* FD, a listening socket, came from another process (SCM_RIGHTS): when it is TCP on a port,
 * advertise it and track it as listen() does (pl_pass.c). */
bool pl_listener_adopt(int fd);
/* sendmsg()/sendmmsg() on a socket that is not ours, MSG carrying SCM_RIGHTS: make each of
 * our descriptors in it fit to live in another process (pl_pass.c). 0, or a negative errno
 * (then nothing is sent). UFD: the sending socket; FLAGS: the call's. */
int pl_pass_out(int ufd, const struct msghdr *msg, int flags);
/* recvmsg()/recvmmsg() on UFD returned MSG: adopt the listeners among the descriptors it
 * carries (from a sender under the library). */
void pl_pass_in(int ufd, const struct msghdr *msg);
/* At start: adopt the listeners of systemd's socket activation (LISTEN_PID, LISTEN_FDS). */
void pl_pass_listen_fds(void);
/* Build the canonical key: client address and port, then server address and port. IPv4 and
 * IPv4-mapped IPv6 give the same key. -EAFNOSUPPORT for other families. */
int pl_key_build(const struct sockaddr *client, const struct sockaddr *server,
		 struct tp_key *ret_key);
void pl_sock_release(struct pl_sock *s);
/* fork(): preload's own handlers (pl_link.c), registered by pl_init_once(). */
void pl_atfork_prepare(void);
void pl_atfork_parent(void);
void pl_atfork_child(void);
/* "FROM -> TO" (addresses with ports) into BUF, for logs. */
void pl_desc_pair(char *buf, size_t len, const struct sockaddr *from, const struct sockaddr *to);
/* S (at FD) may still carry the TCP_DEFER_ACCEPT pl_connect_late() set: clear it now, before
 * anything that could see it (getsockopt(), another connect(), listen(), fork, exec). Returns
 * once the kernel's option is clear (also when another thread is clearing it), so that a call
 * on the option that follows sees or sets the program's own value. Takes S's lock. */
void pl_defer_clear(struct pl_sock *s, int fd);
/* The same for every socket of this process, before a fork (the flag is per process). */
void pl_defer_clear_all(void);
/* FD is bound to a host address without a port (IP_BIND_ADDRESS_NO_PORT): connect, reserve
 * the NTB path on LINK (config link LINK_INDEX) under the 4-tuple, then let the handshake
 * complete. CF: pl_cand_flags(); SAVED_ERRNO: errno on entry. Same results as pl_connect(). */
int pl_connect_late(int fd, const struct sockaddr *dst, socklen_t dlen, struct tp_link *link,
		    int link_index, unsigned cf, int saved_errno);
/* Is FD a TCP stream socket? */
bool pl_is_tcp_stream(int fd);
/* Addresses (pl_addr.c): SA as "address:port" into BUF; its port (host order); is it the
 * wildcard address; is it (port ignored) one of this host's configured addresses (IPv4-mapped
 * counts as IPv4)? */
void pl_addr_str(const struct sockaddr *sa, char *buf, size_t len);
uint16_t pl_sa_port(const struct sockaddr *sa);
bool pl_sa_is_any(const struct sockaddr *sa);
bool pl_is_host_addr(const struct sockaddr *sa);
/* Bind FD to this host's address (family of DST), so that the peer recognises our source
 * address. With NO_PORT the port is left to connect(), which picks it with the 4-tuple check
 * and may reuse ports in TIME_WAIT; without, the kernel picks it now. 0 or a negative errno. */
int pl_bind_host_addr(int fd, const struct sockaddr *dst, bool no_port);
/* Does the kernel's route give a socket of FAMILY connecting to DST one of this host's addresses
 * as its source (then the bind above is not needed)? Learned once per destination and kept
 * pl_src_ttl_ns (10 s; tests shorten it before any thread uses the cache) in a liburcu hash
 * table (pl_addr.c); pl_src_not_host() records "no" when a connect found otherwise (the next
 * ones bind). pl_addr_atfork_*(): the cache's fork handlers (its lock, urcu-bp's). */
bool pl_src_is_host(const struct sockaddr *dst, socklen_t dlen, int family);
void pl_src_not_host(const struct sockaddr *dst, int family);
extern int64_t pl_src_ttl_ns;
void pl_addr_atfork_prepare(void);
void pl_addr_atfork_parent(void);
void pl_addr_atfork_child(void);
/* pl_cand.c: its lock in a forked child (another thread of the parent may have held it). */
void pl_cand_atfork_child(void);
/* Listener S joins this process's listeners (before it is advertised), or leaves them at its
 * last reference, withdrawn from every link first. */
void pl_listener_add(struct pl_sock *s);
void pl_listener_gone(struct pl_sock *s);
/* Advertise listener S on every link this process has open where it is not yet (ADVERTISE; not
 * when S is withdrawn), or withdraw it from every link it is advertised on. A link opened later
 * (its open had failed) advertises the listeners then. A reference this pid holds that none of
 * its listeners owns (taken by its image before exec) is taken over instead of a new one. */
void pl_listener_links(struct pl_sock *s, bool advertise);
/* PORT withdrawn on every link for the whole host while this process lives (tp_listen_veto()):
 * a listener it shares with processes that advertise it. */
void pl_listener_veto(uint16_t port);
/* pl_pass.c: withdraw listener S's (FD's) advertisement, once (WHY for the log): clients of its
 * port use TCP from now on; its accepts still attach any NTB set-up they find. */
void pl_listener_withdraw(struct pl_sock *s, int fd, const char *why);
/* pl_pass.c: move connection S (FD) to its kernel socket as a failover does (every byte sent
 * before goes there first, every byte not read yet the peer sends again), reason WHY, and wait
 * for the move, at most WAIT_MS (-1: until it ends). 0: on the kernel socket; -EAGAIN: still
 * moving; -EOPNOTSUPP: it cannot move (a balanced stream). */
int pl_conn_to_kernel_wait(struct pl_sock *s, int fd, const char *why, int wait_ms);
/* pl_uring.c: the process set up an io_uring (its sockets stay on TCP from then on, unless
 * NTBSOCK_IO_URING=ignore); pl_uring_note() is called where one is made (HOW: by what). */
#define PL_URING_WHY "io_uring in this process"
bool pl_uring_on(void);
void pl_uring_note(const char *how);
/* A connection was just installed at FD over NTB: if a ring was made meanwhile (after the
 * check that let it take NTB, before pl_uring_note()'s scan could see it), it moves now. A
 * fence and a load when none was. */
void pl_uring_recheck(int fd);
/* Open every configured link not open yet (pl_link_get() of each): the number open after. */
int pl_links_open_all(void);

/* --- exec (pl_exec.c) --------------------------------------------------------------------------- */

/* At init of a new image: adopt the connections and listeners the previous image named in
 * NTBSOCK_INHERIT, then remove the variable. ACTIVE: the library runs with a config (else the
 * inherited connections are lost, and this says so). */
void pl_inherit(bool active);
/* Cache the socket options the data path needs (O_NONBLOCK, timeouts, linger) from FD. */
/* Forks of this process so far (pl_cand_forked()). */
extern _Atomic unsigned pl_fork_gen;
void pl_sock_load_opts(struct pl_sock *s, int fd);
/* The same, as socket() left them when its PL_CAND_* flags CF say so (no system call). */
void pl_sock_opts_init(struct pl_sock *s, int fd, unsigned cf);

/* --- data (pl_io.c) ---------------------------------------------------------------------------- */

ssize_t pl_send(struct pl_sock *s, int fd, const struct iovec *iov, int iovcnt, int flags);
ssize_t pl_recv(struct pl_sock *s, int fd, const struct iovec *iov, int iovcnt, int flags);

/* --- candidate sockets (pl_cand.c) ------------------------------------------------------------ */

void pl_cand_init(void);
/* What socket() made, and what of it is still as socket() left it (pl_cand_flags()). */
#define PL_CAND_TCP      0x01u /* a TCP socket: it may become NTB */
#define PL_CAND_UNBOUND  0x02u /* no bind() since */
#define PL_CAND_DEFOPTS  0x04u /* O_NONBLOCK, timeouts, linger and TCP_DEFER_ACCEPT as
				* socket() left them */
#define PL_CAND_NONBLOCK 0x08u /* made with SOCK_NONBLOCK */
#define PL_CAND_V6       0x10u /* AF_INET6 */
void pl_cand_mark(int fd, unsigned flags); /* socket() made FD (FLAGS 0: not TCP) */
bool pl_cand_is(int fd);        /* a TCP socket from socket(), not connected or listening yet */
/* FD's PL_CAND_* that still hold (0 after a fork since the mark: the child or parent may have
 * changed the socket). */
unsigned pl_cand_flags(int fd);
void pl_cand_drop(int fd, unsigned flags); /* a call changed what FLAGS say */
void pl_cand_forked(void);      /* fork(): every mark made before is no longer trusted */
void pl_cand_clear(int fd);     /* its connect/listen decided: forget it */
void pl_cand_closed(int fd);    /* FD closed (as a socket or as an epoll set) */
void pl_cand_closed_range(unsigned first, unsigned last);
/* pl_tcpstat.c: connections that stayed TCP, listed by `ntbsock stat` (REMOTE: connect()'s
 * destination, used while the connect is in progress; REASON: why tcp). */
void pl_tcpstat_add(int fd, const struct sockaddr *remote, const char *reason);
void pl_tcpstat_closed(int fd);           /* before the real close: FD no longer names it */
void pl_tcpstat_dup(int oldfd, int newfd); /* after a successful dup into NEWFD */
void pl_tcpstat_closed_range(unsigned first, unsigned last); /* after close_range() */
void pl_tcpstat_open(void);               /* map the table now (before a set*id call) */
/* A successful kernel epoll_ctl on a candidate: remember (ADD/MOD) or forget (DEL). */
void pl_cand_epoll(int epfd, int op, int fd, const struct epoll_event *ev);
/* connect() made FD (object S) NTB: move its kernel epoll registrations into the shadows. */
void pl_cand_migrate(int fd, struct pl_sock *s);

/* --- readiness (pl_ready.c, pl_poll.c, pl_epoll.c, pl_epoll_wait.c) --------------------------- */

/* Add FD (object T) to the shadow of EPFD, as EPOLL_CTL_ADD would. 0 or a negative errno. */
int pl_epoll_shadow_add(int epfd, int fd, struct pl_sock *t, const struct epoll_event *ev);

/* poll(2) bits of a tracked fd in user space (PL_CONN open, PL_EPOLL with ready entries). */
unsigned pl_sock_revents(struct pl_sock *s, int fd);
/* A send or a look at S found no room: the next look that finds room raises an EPOLLOUT edge
 * (pl_ready.c), as the kernel's SOCK_NOSPACE makes the ACK that frees space wake its waiters. */
extern _Atomic unsigned pl_nospace_gen;
static inline void pl_note_nospace(struct pl_sock *s)
{
	if (!atomic_load_explicit(&s->nospace, memory_order_relaxed)) {
		atomic_store_explicit(&s->nospace, true, memory_order_relaxed);
		/* (release: the flag before the count; an epoll set that sees the count looks at
		 * every entry, an idle edge-triggered EPOLLOUT one too: pl_epoll_wait.c) */
		atomic_fetch_add_explicit(&pl_nospace_gen, 1, memory_order_release);
	}
}
int pl_poll_impl(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		 const sigset_t *mask);
void pl_epoll_free(struct pl_epoll *ep);

/* Milliseconds left until DEADLINE_NS (CLOCK_MONOTONIC), -1 when none. */
int64_t pl_now_ns(void);
/* A bounded wait of one call for room (pl_room_spin()); all zero before the first round,
 * until -1 once spent. */
struct pl_spin {
	int64_t spin_end, until;
	unsigned rounds;
	bool yielding;
};
/* A blocking send found too little room for its write: true while it should pause and try
 * again (pl_spin.c); false once the wait is spent, and on every later call with SP. */
bool pl_room_spin(struct pl_spin *sp);

int pl_ms_left(int64_t deadline_ns);

#endif
