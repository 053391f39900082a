/* SPDX-License-Identifier: MIT */
/* transport/ — reliable byte streams over NTB message queues (doc/design.md §4–§6): inline, short
 * and long protocols, CRC32C, retransmission with [RT]'s receive contexts, connection set-up
 * over each link's control mailbox. The API preload/ builds sockets on.
 *
 * Every function returns 0, a count, or a negative errno and never touches errno. Nothing
 * here reads the environment or a config file. Calls never block unless they take a
 * timeout; blocking socket semantics are built by preload/ from tp_wait().
 *
 * Threads: a tp_conn may be used by several threads at once (send and recv concurrently);
 * the library serialises what must be. At most one helper thread per process (heartbeat,
 * timers, mailbox, doorbell → event fd), asleep unless there is work.
 *
 * Notes for callers:
 * - Host-local state lives in /dev/shm/ntbsock-<link>.side<N> (or <path>.side<N>) beside
 *   the link file: receive-context pool, listeners, set-ups, live connections (tp_stat_list).
 *   All processes of a host opening one link must use the same `contexts`; other queue
 *   tunables are taken from the first opener. queue_size 0 = auto (largest power of two the
 *   window / contexts allows, at most 1 MiB); too small a window is -ENOSPC at open.
 * - tp_poll() also arms the peer's doorbell for what is not ready (a remote write only when
 *   that changes), so a caller may sleep on tp_event_fd() right after it.
 * - fork: the transport registers its own pthread_atfork handlers (tp_atfork_child() runs in
 *   the child by itself); a connection is closed for real by the last process closing it.
 * - exec: tp_conn_export() / tp_conn_adopt(). */
#ifndef NTBSOCK_TRANSPORT_H
#define NTBSOCK_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ntb/ntb.h"

/* Tunables (conf/ fills them from the config file; tp_params_init() gives the defaults). */
struct tp_params {
	uint32_t queue_size;      /* data ring bytes per direction per connection (pow2) */
	uint32_t inline_slots;    /* inline ring slots per direction (pow2) */
	uint32_t inline_max;      /* ≤ 116: writes up to this go inline */
	uint32_t short_max;       /* writes up to this go short; above: long */
	uint32_t contexts;        /* transfer contexts per link: the pool of data rings each
				   * host grants its peer's senders (default 256) */
	uint32_t connections;     /* connection slots per link (0: as the window allows, up to
				   * TP_MAX_CONNS, a quarter of it at most) */
	uint32_t cnct_timeout_ms; /* TimerCnct */
	uint32_t send_timeout_ms; /* TimerSendData */
	uint32_t recv_timeout_ms; /* TimerRcvData */
	uint32_t detect_timeout_ms; /* TimerDetect */
	uint32_t max_err;         /* MaxErr */
	uint32_t spin_us;         /* busy-poll budget of tp_wait() before sleeping (preload
				   * spins itself and passes 0); a connection woken within the
				   * last few ms spins at least TP_SPIN_ACTIVE_US */
	uint32_t setup_timeout_ms; /* whole connect handshake before falling back */
	uint32_t peer_timeout_ms; /* a silent peer's connections end after this (see tp_link) */
	uint32_t retry_wait_us;   /* how long a Retry seen without its positions waits for the
				   * receiver's re-ask to bring them (tp_retx.c; not a config key:
				   * TP_RETRY_WAIT_US, tests set it) */
};
void tp_params_init(struct tp_params *p);

/* What a window of WINDOW bytes holds with P: CONNECTIONS connection slots (a link carries at
 * most that many connections at once), each SLOT_SIZE bytes of window in each direction (its
 * control words and INLINE_SLOTS inline slots of 128 bytes), and at POOL_OFF a pool of CONTEXTS
 * transfer contexts, data rings of QUEUE_SIZE bytes granted to connections per transfer (that
 * many connections stream through data rings at once; the others send through their inline
 * slots while they wait for one). queue_size 0 = the largest power of two that fits, at most
 * 1 MiB. 0, or -EINVAL (bad tunables), -ENOSPC (the window is too small), -EFBIG. */
struct tp_geometry {
	uint32_t contexts, inline_slots, queue_size, slot_size, connections;
	uint64_t pool_off;
};
int tp_geometry(const struct tp_params *p, uint64_t window, struct tp_geometry *g);

/* --- links ------------------------------------------------------------------------------- */

struct tp_link;

/* Open the transport on top of a new ntb link (opened from LP). Several processes of one host
 * may open the same link; they share its receive-context pool and mailbox. */
int tp_link_open(const struct ntb_link_params *lp, const struct tp_params *tpp,
		 struct tp_link **ret_link);
void tp_link_close(struct tp_link *link);

/* tp_link_open() (and a forked child with links) starts the process's helper thread
 * unless it is held: tp_helper_hold(true) before opening links keeps the process at its own
 * threads (no effect on a helper already running); tp_helper_hold(false) starts the helper
 * if links are open. For a process about to change its credentials: glibc applies a set*id
 * call to every thread and aborts the program when one thread's call fails where the
 * caller's succeeded, as it does after a per-thread change such as PR_SET_KEEPCAPS or
 * capset() in the caller. A link without a helper serves no connection yet: release the hold
 * before the first. */
void tp_helper_hold(bool hold);
bool tp_link_is_up(struct tp_link *link);
struct ntb_link *tp_link_ntb(struct tp_link *link);

/* LINK's doorbell is rung by this process's own connections (side 1 of a link joining the
 * host to itself, which this process's clients write into): the helper thread sleeps on
 * another link's doorbell unless LINK has listeners here (each ring would wake it, and the
 * ringer would pay a futex wake per send). */
void tp_link_set_self_rung(struct tp_link *link);

/* tp_admin.c: a link's administrative state on this host (`ntbsock link down|up`).
 * It is a flag file whose existence means "down": every live connection of the link on this
 * host moves to TCP without loss, and new ones use TCP (reason "link down (admin)"). Its path
 * is the link's shm path (LP->path, else /dev/shm/ntbsock-<name>; a pci link, which has no
 * file, uses /dev/shm/ntbsock-<name>) followed by TP_ADMIN_SUFFIX.
 * tp_link_admin_path() writes it into BUF (LEN bytes): 0 or -ENAMETOOLONG.
 * tp_link_admin_set() creates it (DOWN: mode 0644, empty; already there is fine) or removes
 * it (!DOWN: absent is fine): 0 or a negative errno (-EPERM: another user's flag in a sticky
 * directory, -ELOOP: a symlink in its place).
 * tp_link_admin_get(): 1 when the flag exists (any kind of entry, not followed), else 0 (also
 * when its path is too long to exist). */
#define TP_ADMIN_SUFFIX ".admin-down"
int tp_link_admin_path(const struct ntb_link_params *lp, char *buf, size_t len);
int tp_link_admin_set(const struct ntb_link_params *lp, bool down);
int tp_link_admin_get(const struct ntb_link_params *lp);

/* LINK joins this host to the same peer host as the other links given the same GROUP (≥ 1;
 * 0 takes it out): a connection whose link is lost (or taken down) moves to another live link
 * of its group without loss before its kernel TCP socket is considered (tp_failover.c). At most
 * TP_GROUP_LINKS links per process are grouped. */
#define TP_GROUP_LINKS 64
void tp_link_set_group(struct tp_link *link, unsigned group);
/* [DRB] balancing toward LINK's peer (its config says balance = true): new connections over
 * LINK ask for a framed stream, which may spread over the group's links (tp_stripe.c). */
void tp_link_set_balance(struct tp_link *link, bool on);

/* How loaded LINK is on this host, for placing a new connection among several links to
 * one peer: the connections of all this host's processes on it (receive contexts in use in
 * the host's pool, read without its lock: a hint). -ENETDOWN when the link is not up, is lost
 * or is taken down by `ntbsock link down` (no new connection goes there). */
int tp_link_load(struct tp_link *link);

/* --- connection keys ------------------------------------------------------------------------
 * Opaque to transport: preload/ fills it with the TCP 4-tuple in a canonical order (client
 * address and port, then server address and port), so both ends build the same key.
 * Contract: transport reads exactly one thing inside it: bytes 38..39 are the SERVER
 * port in network byte order (used to check that the server host listens on it); see
 * tp_key_server_port(). Suggested full layout: 0..15 client address (IPv4-mapped IPv6),
 * 16..17 client port, 18..33 server address, 34..37 zero, 38..39 server port. */
struct tp_key {
	uint8_t bytes[40];
};
#define TP_KEY_PORT_OFF 38
static inline uint16_t tp_key_server_port(const struct tp_key *k)
{
	return (uint16_t)((k->bytes[TP_KEY_PORT_OFF] << 8) | k->bytes[TP_KEY_PORT_OFF + 1]);
}

/* Why a connection did not get NTB (preload/ adds the reasons it decides itself). */
enum tp_reason {
	TP_REASON_NONE = 0,        /* it is ntb */
	TP_REASON_NOT_CONFIGURED,  /* no peer / link for that address (preload) */
	TP_REASON_RULE_TCP,        /* a rule says tcp (preload) */
	TP_REASON_NO_LISTENER,     /* peer host advertises no ntbsock listener on that port */
	TP_REASON_NO_CONTEXT,      /* the peer refused a receive context MaxErr times */
	TP_REASON_TIMEOUT,         /* set-up timed out */
	TP_REASON_LINK_DOWN,       /* link not up */
	TP_REASON_PEER_ERROR,      /* the peer answered with an error */
	TP_REASON_LOCAL_ERROR,     /* out of memory, etc. */
	TP_REASON_ADMIN_DOWN,      /* `ntbsock link down` on either host */
	TP_REASON_HOST_BUSY,       /* this host's lock held too long (a process stopped in it) */
};
const char *tp_reason_str(enum tp_reason r);

/* --- listeners ------------------------------------------------------------------------------- */

/* Advertise PORT to the peer host: connects from the peer to it will try NTB. Reference
 * counted per host (pre-forked workers share one); tp_unlisten() drops one reference. */
int tp_listen(struct tp_link *link, uint16_t port);
int tp_unlisten(struct tp_link *link, uint16_t port);
/* tp_listen(), unless this process holds more references on PORT at LINK than OWNED (the ones
 * its listeners own): then one of those is taken over (its image before exec took it), and 1
 * returned. */
int tp_listen_take(struct tp_link *link, uint16_t port, uint32_t owned);
/* Withdraw PORT for the whole host while this process lives, whoever else listens on it (a
 * process that makes an io_uring may accept from a listener it shares with others: their
 * advertisement would bring NTB clients it cannot serve). 0, or -ENOSPC. */
int tp_listen_veto(struct tp_link *link, uint16_t port);
/* Does the peer host advertise a listener on PORT? */
bool tp_peer_listens(struct tp_link *link, uint16_t port);

/* --- connections ------------------------------------------------------------------------------ */

struct tp_conn;

/* Client side, before the TCP connect: ask the peer for a receive context keyed by KEY
 * (Apply/Ack/Nack with priorities, §6). On success *RET_CONN is reserved on both sides and
 * committed (tp_conn_commit()); the caller then makes the TCP connection and calls
 * tp_conn_confirm() (or tp_conn_abort() when the TCP connect failed). On failure returns a
 * negative errno and sets *RET_REASON. */
int tp_connect(struct tp_link *link, const struct tp_key *key, int timeout_ms,
	       struct tp_conn **ret_conn, enum tp_reason *ret_reason);
/* tp_connect() without the commit: the reservation stays undecided until the caller either
 * commits it (tp_conn_commit(): the connection is ntb) or aborts it (tp_conn_abort(): tcp).
 * The server's tp_attach() waits for that decision, so both ends take the same path. */
int tp_connect_reserve(struct tp_link *link, const struct tp_key *key, int timeout_ms,
		       struct tp_conn **ret_conn, enum tp_reason *ret_reason);
/* Tell the server that this client uses the reservation: its tp_attach() may take it. Final:
 * from here on only tp_abort() ends it (the server then reads a reset). */
void tp_conn_commit(struct tp_conn *c);
int tp_conn_confirm(struct tp_conn *c);
/* The TCP connect failed after tp_connect() succeeded: release the reservation on both
 * sides (the peer sees a reset). Same as tp_abort(). Accepts NULL. */
void tp_conn_abort(struct tp_conn *c);

/* Server side, after the kernel's accept(): attach to the connection the client reserved
 * under KEY and committed. -ENOENT when there is none (a TCP-only client, or one that gave its
 * reservation up: the socket stays TCP). A reservation the client has not decided on yet is
 * waited for (the client decides within its set-up: commit or give up), at most the link's
 * setup_timeout_ms; then it is refused (tp_refuse()) and -ETIMEDOUT returned. */
int tp_attach(struct tp_link *link, const struct tp_key *key, struct tp_conn **ret_conn);
/* Server side: the accepted connection under KEY stays TCP: end any reservation the client
 * made under it (the client sees a reset). 0 when one was ended, else -ENOENT. */
int tp_refuse(struct tp_link *link, const struct tp_key *key);

/* Send from IOV (all or part); returns bytes queued (≥ 1) or -EAGAIN when the queue is
 * full, -EPIPE after shutdown(SHUT_WR)/peer gone, -ECONNRESET when reset. Bytes queued are
 * retransmittable until acknowledged. */
ssize_t tp_send(struct tp_conn *c, const struct iovec *iov, int iovcnt);

#define TP_RECV_PEEK 0x1
/* Receive into IOV: bytes (≥ 1), 0 at end of stream (after all data), -EAGAIN when nothing
 * is pending, -ECONNRESET. With TP_RECV_PEEK the bytes stay queued. */
ssize_t tp_recv(struct tp_conn *c, const struct iovec *iov, int iovcnt, int flags);

/* Readiness bits, as poll(2) would report them for the socket. */
#define TP_EV_IN    0x1  /* bytes or EOF pending */
#define TP_EV_OUT   0x2  /* queue has room */
#define TP_EV_RDHUP 0x4  /* peer shut down its write side (EOF reached or pending) */
#define TP_EV_HUP   0x8  /* both directions finished */
#define TP_EV_ERR   0x10 /* reset / failed; tp_conn_error() says why */
unsigned tp_poll(struct tp_conn *c);
/* tp_poll() without arming the peer's doorbell (for spinning: the peer's sends stay
 * free of doorbells); a caller that then sleeps on tp_event_fd() must call tp_poll() first. */
unsigned tp_poll_peek(struct tp_conn *c);
/* Readiness for the directions in WANT only (TP_EV_IN, TP_EV_OUT: a socket polled for
 * input alone leaves the send side and its feedback words alone, and never asks the peer to
 * ring for room); ARM as tp_poll() does, else as tp_poll_peek(). The receive side is always
 * looked at (RDHUP/HUP/ERR are reported whatever WANT says). */
unsigned tp_poll_dir(struct tp_conn *c, unsigned want, bool arm);
/* When the earliest recovery timer (a quick probe of unacknowledged data, a re-ask of a
 * retransmission) of the connections this thread's arming looks (tp_poll(), tp_poll_dir() with
 * ARM) found since the last call is due, CLOCK_MONOTONIC ns; 0: none. Clears it. A poll,
 * select or epoll sleeper ends its kernel sleep then and looks again arming, which runs the
 * timers that are due: it recovers from a loss as soon as a blocking receive does, not on the
 * helper's millisecond clock. */
uint64_t tp_arm_due_take(void);

/* Wait until (tp_poll(c) & EVENTS) or TIMEOUT_MS (-1 forever): spin for the configured
 * budget, then sleep on the doorbell. Returns the ready bits, 0 on timeout, -EINTR. */
int tp_wait(struct tp_conn *c, unsigned events, int timeout_ms);

/* A per-process fd that turns readable whenever some connection's readiness may have changed
 * (the helper thread signals it on doorbells and timers). Use it to sleep in poll/epoll
 * beside kernel fds; read it (tp_event_ack()) before re-checking tp_poll(). */
int tp_event_fd(void);
void tp_event_ack(void);

/* Pending bytes to read (FIONREAD) and unacknowledged bytes sent (SIOCOUTQ). */
size_t tp_readable_bytes(struct tp_conn *c);

/* tp_fast.c: a cheap input hint for poll/select/epoll. True when C has validated
 * records queued, or the peer has published a message not yet validated (no CRC, no feedback,
 * no arming, no lock wait): the read that follows validates it once, on the copy that delivers
 * it. A true answer may be spurious (that message may fail its check; a blocking read then
 * waits, a non-blocking one gets -EAGAIN). False means "ask tp_poll_dir()": also for errors,
 * end of stream, shut reads, a Retry in progress, another process's connection, a busy lock. */
bool tp_readable_hint(struct tp_conn *c);
/* tp_fast.c: an arrival stamp for edge-triggered readiness: a value that changes
 * whenever the peer publishes a new message (data or FIN), whether or not it was validated or
 * read since, and that reading alone never changes. No validation, no feedback, no arming.
 * (The kernel raises an EPOLLET edge for each arrival; preload/ compares stamps.) */
uint64_t tp_rx_arrivals(struct tp_conn *c);
/* tp_fast.c: the caller is about to sleep until the next arrival, although data may be
 * unread (an edge-triggered waiter): ask the peer to ring for its next message, then return
 * tp_rx_arrivals() (a message published before the request shows in it, one after it rings). */
uint64_t tp_rx_arm_arrival(struct tp_conn *c);
/* Where a connection's news is summarised (tp_rx_news_arm()): the word of its group of slots
 * and its link's summary word, each read (acquire) before its NEWS word, with the values they
 * had. Each changes after every change of a NEWS word under it: while the summary keeps its
 * value, none of the link's NEWS words changed; while a group's does, none of its slots'. */
struct tp_news_sums {
	const void *grp, *sum;
	uint64_t grp_seen, sum_seen;
	uint32_t g; /* the group's number on its link (below TP_NEWS_GROUPS) */
};
#define TP_NEWS_GROUPS 256u
/* tp_fast.c: for an epoll set that passes over idle connections. Asks the peer to change a
 * word of C's slot after each message it publishes from now on, for C's life (and, with RING,
 * to ring for its next message as tp_poll() arms it), then: is C's receive side settled
 * (nothing arrived since the last tp_poll_dir() or read looked, nothing to read, no end of
 * stream, no Retry in progress, no error, a live link)? If so, the word's address, its value
 * now in *RET_SEEN: while tp_news_read() of it gives that value and tp_state_gen() does not
 * change, nothing arrived and C stays unready for input; *RET_SUMS (unless NULL) where that
 * word is summarised. NULL: look at C again next time (also for a striped connection, another
 * process's, a busy lock). */
const void *tp_rx_news_arm(struct tp_conn *c, bool ring, uint64_t *ret_seen,
			   struct tp_news_sums *ret_sums);
static inline uint64_t tp_news_read(const void *w)
{
	/* acquire: the peer writes the word after what it publishes (tp_wake_peer()) */
	return atomic_load_explicit((const _Atomic uint64_t *)w, memory_order_acquire);
}
/* tp_link.c: changes whenever a connection's readiness changes other than by what its peer
 * publishes: errors, link loss or restart, failover, a local shutdown. */
unsigned tp_state_gen(void);
/* tp_fast.c: would tp_send() of LEN bytes go out as one message now? False only for a
 * write of inline_max < LEN <= short_max (and at most a quarter of the ring) while the data
 * ring has less room than LEN (after reading the receiver's feedback): a sender may then wait
 * instead of cutting the write in two (every message boundary after a cut falls inside the
 * reader's buffers, which costs the reader a second copy). With ARM (the caller may sleep on
 * tp_event_fd() next), a false answer also asks the receiver to ring when it releases space.
 * True otherwise, also for errors, shutdown and another process's connection (tp_send()
 * reports those). */
bool tp_send_fits(struct tp_conn *c, size_t len, bool arm);
/* tp_fast.c: a cheap output hint for poll/select/epoll: true when the credits cached
 * from the receiver's last feedback show room for a write of LEN (1 … short_max) in one
 * message. No feedback read, no arming, no lock wait; false means "ask tp_poll_dir() and
 * tp_send_fits()" (also for errors, a lost peer, shutdown, a busy lock). */
bool tp_writable_hint(struct tp_conn *c, size_t len);
size_t tp_unacked_bytes(struct tp_conn *c);

/* Keep at most BYTES of data sent and not yet consumed by the receiver in flight (the
 * program's SO_SNDBUF; 0: the data ring's size). Inline messages are not counted. */
void tp_conn_set_sndbuf(struct tp_conn *c, uint32_t bytes);

/* How: SHUT_RD, SHUT_WR, SHUT_RDWR. SHUT_WR sends an in-band FIN after the last byte. */
int tp_shutdown(struct tp_conn *c, int how);

/* Orderly close: FIN after the queued data, then release (contexts return when both
 * directions are done or by timeout). Accepts NULL. */
void tp_close(struct tp_conn *c);

/* At process exit: wait up to TIMEOUT_MS until every connection this process closed has its
 * FIN out and its data and FIN acknowledged (its bytes live in this process until then: a
 * kernel socket's close would go on in the kernel). Takes no lock it could wait on beyond the
 * deadline. Returns how many were still pending, or -ETIMEDOUT when the link list stayed
 * locked. */
int tp_exit_drain(int timeout_ms);

/* Before exec, after tp_exit_drain(): release every connection this process closed that still
 * lingers (waiting for the peer's FIN): the program that would finish it is being replaced,
 * and the next one does not know it. Its receive contexts go back to the pools at once (else
 * they stay with the pid until the process exits); a peer that had not finished sees the
 * connection gone (TP_ST_GONE), as for a program that exits. */
void tp_exec_release_closed(void);

/* Before an exec that hands no connection or listener over (RELEASE true): give up this
 * process's claims on its links' sides, which would outlive the exec with the pid for a program
 * that may never use them; after such an exec failed (RELEASE false): take them again. */
void tp_exec_claims(bool release);

/* FD is the kernel socket of an NTB connection the peer closed first: keep the socket open
 * through a private duplicate until the peer's TCP FIN (or anything) arrives on it, at most
 * TIMEOUT_MS, then close it from the helper thread; TIME_WAIT thus stays with the side that
 * closed first, and the caller does not wait. The caller still closes FD itself (its number is
 * free at once). 0 (kept, or nothing to wait for: the FIN, or anything, is in already), or
 * -errno (nothing kept: the caller waits itself). */
int tp_close_after_fin(int fd, int timeout_ms);
/* At exit and exec (which would close them at once): wait until every socket kept by
 * tp_close_after_fin() is closed, each at its FIN or its time. */
void tp_finwait_drain(void);

/* Abortive close: reset the connection at once (peer sees ECONNRESET). Accepts NULL. */
void tp_abort(struct tp_conn *c);

/* Failover (doc/design.md §5.8). When a connection's NTB path breaks while both programs live
 * (link lost, retries exhausted, `ntbsock link down`, the peer moved first), or at exit with
 * bytes unacknowledged, it moves to its kernel TCP socket (the witness, tp_conn_set_witness())
 * without losing, duplicating or reordering a byte. While that runs, sends and receives return
 * -EAGAIN and tp_poll() reports nothing ready; once done, tp_send(), tp_recv() return -EXDEV
 * and tp_poll() reports IN|OUT: the caller then uses the kernel socket for everything (it
 * carries the stream from exactly where the program is). A failover that cannot complete
 * (bytes missing, the peer's socket gone) fails the connection with -ECONNRESET.
 * tp_conn_failover_state(): 0 none, 1 running, 2 done, 3 failed; the reason is a static
 * string ("link down", "retries exhausted", "link down (admin)", "peer moved to tcp",
 * "exit", "urgent data", "passed to another process"), NULL when none. */
int tp_conn_failover_state(struct tp_conn *c);
/* Move C to its kernel TCP socket now, as a failover does, for WHY: "urgent data" (the program
 * sends MSG_OOB, which only the kernel's TCP carries, with its urgent pointer, SIOCATMARK,
 * SIGURG and the peer's SO_OOBINLINE) or "passed to another process" (its descriptor goes out
 * with SCM_RIGHTS: the receiver has only the kernel socket). The peer follows
 * (TP_ST_FAILOVER). False when it cannot (a balanced stream's part, a connection already
 * failed); true also while such a move is under way. */
bool tp_conn_to_kernel(struct tp_conn *c, const char *why);
/* How many times C moved to another link of its group (0: it is on the link it was set up on),
 * and the link that carries it now. */
unsigned tp_conn_moves(struct tp_conn *c);
struct tp_link *tp_conn_link(struct tp_conn *c);
const char *tp_conn_failover_reason(struct tp_conn *c);
/* At exit (after tp_exit_drain()): move every connection of this process that still
 * has unacknowledged bytes to its kernel socket, so the kernel delivers them after we are
 * gone: at once for a connection whose acknowledgements stall, else before the time is up
 * (waits up to TIMEOUT_MS). Returns how many could not be handed over (they reset); *RET_HANDED
 * (may be NULL) says how many were. */
int tp_exit_handoff(int timeout_ms, int *ret_handed);

/* At process exit, after tp_exit_handoff(): every link on which this process has no
 * connection left is disabled, which announces it down to the peer host when no other process
 * of this host has it enabled (ntb_link_disable()): the peer then knows at once that nobody
 * here serves it, instead of waiting for the heartbeat to go stale. A link with connections
 * left (or whose lock is held) keeps its state: the peer sees the heartbeat stop, as before. */
void tp_exit_announce(void);

/* Pending error of a failed connection (0, -ECONNRESET, -ETIMEDOUT, ...). */
int tp_conn_error(struct tp_conn *c);

/* The kernel TCP socket FD carried beside C (-1: none). While the peer host is silent (its
 * heartbeat stale: a stopped or starved process, or a dead host), the connection waits up to
 * peer_timeout_ms for it to speak again; meanwhile the helper looks at FD (MSG_PEEK, never
 * reads it): end of stream or a reset there means the peer's kernel closed its socket, so the
 * peer process is gone, and C ends at once (EOF or ECONNRESET after the delivered data). The
 * socket's inode is recorded: a closed or reused FD number is not looked at. Called again with
 * another descriptor of the same socket, it moves there (preload/: close() of the witness while
 * a dup lives on). */
void tp_conn_set_witness(struct tp_conn *c, int fd);
/* The program sets SO_LINGER to LG on C's kernel socket FD: done here (0 or -errno), since
 * while C's bytes wait for their acknowledgement the socket holds {1, 0} (a death then resets,
 * tp_int.h: rst_armed) and LG is what is put back. */
int tp_conn_linger_set(struct tp_conn *c, int fd, const struct linger *lg);
/* The program's SO_LINGER on C's kernel socket FD into *LG (the value kept aside while the
 * socket holds the library's {1, 0}, else the kernel's): 0 or -errno. */
int tp_conn_linger_get(struct tp_conn *c, int fd, struct linger *lg);
/* Whether the peer closed its end (tp_close(), the ST word says CLOSING), not merely
 * shut down its writing: its kernel socket's close follows at once. */
bool tp_peer_closing(struct tp_conn *c);

/* fork support: after fork(), the child calls tp_atfork_child() before touching any
 * connection; connections stay usable in both (each direction used by one process at a
 * time is the caller's business, as for kernel sockets). */
void tp_atfork_child(void);

/* Exec support. Before exec, tp_conn_export() waits up to TIMEOUT_MS until everything
 * C sent is acknowledged, saves C's state in the host-local table, frees C locally (no FIN)
 * and returns a token (-EBUSY when unacknowledged data remains: C stays usable). After exec
 * the new image opens the same link and calls tp_conn_adopt(TOKEN) to get the connection
 * back (same pid required; -ENOENT when the token is stale). Pass tokens e.g. in the
 * environment; they are plain numbers. */
int tp_conn_export(struct tp_conn *c, int timeout_ms, uint64_t *ret_token);
int tp_conn_adopt(struct tp_link *link, uint64_t token, struct tp_conn **ret_conn);

struct tp_stats {
	uint64_t tx_bytes, rx_bytes;
	uint64_t tx_msgs_inline, tx_msgs_short, tx_msgs_long;
	uint64_t rx_msgs_inline, rx_msgs_short, rx_msgs_long;
	uint64_t retransmits, crc_errors;
	uint32_t tx_queue_fill, rx_queue_fill; /* bytes in flight / pending */
	uint64_t tx_full;       /* sends that found the peer's ring full (waited for
				 * credit): the link's congestion notices */
};
void tp_conn_stats(const struct tp_conn *c, struct tp_stats *ret_stats);
/* [DRB] balancing (tp_stripe.c): a framed connection's frames and payload bytes through itself
 * [0] and its stripe [1], the congestion notices its sender found, how often it expanded onto
 * the stripe, and the stripe's link (NULL: none set up). All zero for a connection that is
 * not framed. */
struct tp_stripe_stats {
	bool framed, striped;
	uint64_t frames[2], bytes[2];
	uint64_t notices, expansions;
	struct tp_link *link1;
};
void tp_stripe_stats(struct tp_conn *c, struct tp_stripe_stats *ret);

/* getpid(), cached (and renewed in a forked child): no system call. */
int tp_process_id(void);

/* Record the owning process and fd of C for `ntbsock stat` (preload calls it once the
 * fd is known; the pid is normally getpid()). */
void tp_conn_set_owner(struct tp_conn *c, int pid, int fd);

/* Live connections of all processes of this host on the link LP names (LP->name/path;
 * LP->side 0/1, or -1 for both sides' tables). Reads the host-local tables directly: no link
 * is opened, nothing is written. Fills up to MAX entries; returns the total count (may exceed
 * MAX) or a negative errno. */
struct tp_stat_entry {
	int pid, fd;            /* fd -1 when unknown; pid 0 for a set-up not yet attached */
	int side;               /* link side of this host */
	uint32_t slot;          /* receive context */
	const char *state;      /* "open", "pending" (server, not yet accepted), "connecting" */
	const char *role;       /* "client" or "server" */
	struct tp_key key;
	struct tp_stats stats;
	const char *failed_over; /* NULL, or why it moved to its kernel TCP socket (then
				  * it is a tcp connection: "link down", "retries exhausted"...) */
};
int tp_stat_list(const struct ntb_link_params *lp, struct tp_stat_entry *out, int max);

/* Per-link counters of this host (all its processes) on the link LP names (LP->side
 * 0/1, or -1: both sides' tables added up), read from the host-local tables like
 * tp_stat_list() (nothing opened, nothing written). They count from when this host's table of
 * the link was created (the first process of a new session). Returns 0 (RET filled; zeroes when
 * there is no table) or a negative errno. */
struct tp_link_stat {
	uint32_t conns;          /* connections live on it now */
	uint64_t setups;         /* connections set up on it (receive contexts taken) */
	uint64_t tx_bytes, rx_bytes;
	uint64_t transfers;      /* messages sent (inline + short + long) */
	uint64_t congestion;     /* sends that found the peer's ring full (tp_stats.tx_full) */
	uint64_t failovers;      /* connections that moved off it (to another link or their
				  * kernel socket) */
	uint64_t expansions;     /* [DRB] stripes set up onto it: a connection of another link
				  * spread its stream here (tp_stripe.c) */
	/* its pool of transfer contexts (data rings for the peer's senders, tp_ring.c): rings,
	 * free now, granted, requests refused, grants asked back (others waited) */
	uint64_t rings, rings_free, ring_grants, ring_refusals, ring_yields;
	/* offers (connection set-up without a round trip): this host's to the peer, held now,
	 * and this host's set-ups that claimed one of the peer's */
	uint64_t offers_held, offer_claims;
};
int tp_link_stat(const struct ntb_link_params *lp, struct tp_link_stat *ret);

/* Host-wide table of connections that stayed TCP (tp_tcpstat.c), for `ntbsock stat`.
 * A shared file with room for TP_TCPSTAT_MAX fixed slots (PATH NULL = TP_TCPSTAT_PATH; mode
 * 0600, created O_EXCL, opened O_NOFOLLOW, magic/size checked: a foreign file is never used);
 * sparse: the table grows through it as connections need slots, and only the pages in use take
 * memory. Any number of processes write it at once (slots are claimed by CAS), a dead
 * process's slots are taken over by the next writer that needs one.
 * tp_tcpstat_open() maps the table for writing now (for a process about to give up the
 * privileges that let it open the file; 0 or -ENOENT), else the first tp_tcpstat_add() does.
 * tp_tcpstat_add() registers (PID, FD, socket inode INO, local/remote address, REASON) and
 * returns the slot id (>= 0) or a negative errno; tp_tcpstat_del(id, pid) removes it.
 * tp_tcpstat_list() copies live entries (dead pids and closed fds left out) into OUT (at most
 * MAX) and returns how many there are (may exceed MAX; 0 when the file is missing or
 * unusable); into *RET_ADDED (when given) how many connections were registered since the file
 * was created, closed ones included (0 when missing). tp_tcpstat_added() is that count of a
 * mapped file (MAP, SIZE; 0 when not a table). */
#define TP_TCPSTAT_PATH   "/dev/shm/ntbsock-stat-tcp"
#define TP_TCPSTAT_MAX    262144
#define TP_TCPSTAT_REASON 48
struct sockaddr;
struct tp_tcpstat_entry {
	int pid, fd;
	struct { uint8_t bytes[28]; } local, remote; /* sockaddr_in/_in6; family 0 unknown */
	char reason[TP_TCPSTAT_REASON];
};
int tp_tcpstat_open(const char *path);
int tp_tcpstat_add(const char *path, int pid, int fd, uint64_t ino, const struct sockaddr *l,
		   const struct sockaddr *r, const char *reason);
void tp_tcpstat_del(int id, int pid);
int tp_tcpstat_list(const char *path, struct tp_tcpstat_entry *out, int max, uint64_t *ret_added);
uint64_t tp_tcpstat_added(const void *map, size_t size);

#endif
