// SPDX-License-Identifier: MIT
/* The links a process uses (doc/design.md §5): opened on first use from the config, one slot
 * per configured side (and the second side of a loopback link), the layer parameters they get,
 * the listeners they advertise, and their state across fork(). */
#include "preload/pl_int.h"
#include "glue/conf_params.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* --- config → layer parameters --------------------------------------------------------------- */

void pl_link_params(const struct conf_link *cl, struct ntb_link_params *p)
{
	glue_link_params(cl, p);
}

void pl_tp_params(const struct conf_tunables *t, struct tp_params *p)
{
	glue_tp_params(t, p);
	/* preload spins itself, yielding the CPU (pl_wait(), poll/epoll); the transport's waits
	 * then sleep at once. */
	pl_spin_us = t->spin_us;
	p->spin_us = 0;
}

uint32_t pl_spin_us;

/* --- links --------------------------------------------------------------------------------------- */

struct pl_link {
	struct tp_link *tp;
	int64_t opened_ns;
	int64_t failed_ns;   /* last open failure: retried after a second */
	/* The first connects after the open wait for the link to come up until then (0: none
	 * has yet; the window is set by the first): the connects a program makes at once from
	 * several threads (a pool filled at start) all wait, not only the first. */
	int64_t wait_end_ns;
	/* A set-up over it was answered quickly: the peer host serves the link (pl_connect_late()
	 * has 100 ms, which a peer that only now sees the link come up may need). A hint:
	 * relaxed. */
	_Atomic bool settled;
	_Atomic bool both_up;  /* side 1 of a loopback link: loopback_open() waited for both */
};
/* Slot I is config link I on its configured side (side 0 of a loopback link); slot
 * CONF_MAX_LINKS + I is side 1 of loopback link I, where this process listens and accepts. */
#define PL_SLOTS (2 * CONF_MAX_LINKS)
static struct pl_link pl_links[PL_SLOTS];

bool pl_link_is_loopback(int index)
{
	return pl_conf && index >= 0 && index < pl_conf->n_links && index < CONF_MAX_LINKS &&
	       pl_conf->links[index].loopback;
}

/* The slot where this process listens on and accepts from config link INDEX. */
static int listen_slot(int index)
{
	return pl_link_is_loopback(index) ? CONF_MAX_LINKS + index : index;
}

static bool slot_valid(int slot)
{
	if (slot >= CONF_MAX_LINKS)
		return pl_link_is_loopback(slot - CONF_MAX_LINKS);
	return pl_conf && slot >= 0 && slot < pl_conf->n_links;
}
static pthread_once_t pl_atfork_once = PTHREAD_ONCE_INIT;
static void pl_atfork_links_child(void);

static void pl_atfork_register(void)
{
	pthread_atfork(NULL, NULL, pl_atfork_links_child);
}
static pthread_mutex_t pl_link_lock = PTHREAD_MUTEX_INITIALIZER;
/* Listeners' advertisements (pl_sock.adv_links): taken before the host lock (tp_listen()), never
 * under pl_link_lock. */
static pthread_mutex_t pl_adv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_sock *pl_listeners; /* pl_listener_add() */

/* Config link I where this process listens, if open. */
static struct tp_link *listen_link(int i)
{
	pthread_mutex_lock(&pl_link_lock);
	struct tp_link *l = pl_links[listen_slot(i)].tp;
	pthread_mutex_unlock(&pl_link_lock);
	return l;
}
static void listeners_sweep(int index);

#define PL_FRESH_NS 3000000000LL /* a link opened this recently may still be coming up */

/* pl_links_open_all() holds the transport's helper thread back (tp_helper_hold()); the first
 * socket that needs a link lets it start (pl_link_get()). The flag is read without the lock on
 * every pl_link_get() (relaxed: a hint; helper_hold() decides under the lock). */
static pthread_mutex_t pl_hold_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool pl_helper_held;

static void helper_hold(bool hold)
{
	pthread_mutex_lock(&pl_hold_lock);
	if (atomic_load_explicit(&pl_helper_held, memory_order_relaxed) != hold) {
		PL_ENTER();
		tp_helper_hold(hold);
		PL_LEAVE();
		atomic_store_explicit(&pl_helper_held, hold, memory_order_relaxed);
	}
	pthread_mutex_unlock(&pl_hold_lock);
}

static struct tp_link *link_get(int slot, bool wait_up, bool *ret_fresh);

struct tp_link *pl_link_get(int index, bool wait_up, bool *ret_fresh)
{
	return pl_link_get_at(index, false, wait_up, ret_fresh);
}

#define PL_GONE_ABSENT "link down: no ntbsock on the peer host"
#define PL_GONE_DEAD   "link down: peer heartbeat stopped"

/* Before a connect opens link LP (creating its file, claiming a side, starting the helper
 * thread: most of a millisecond), a look that maps the link read-only, if it exists: the
 * reason when the peer side is known to be gone (no link file, nobody on the peer host has it
 * enabled, or its heartbeat stopped: ntb_link_peer_state()), else NULL. */
static const char *peer_gone(const struct ntb_link_params *lp)
{
	struct ntb_link_params p = *lp;
	struct ntb_link *n = NULL;
	const char *why = NULL;

	if (p.side < 0)
		return NULL; /* (our side is known only once claimed) */
	p.inspect_only = true;
	PL_ENTER();
	int r = ntb_link_open(&p, &n);
	if (r == -ENOENT && !strcmp(p.backend, "shm")) {
		why = PL_GONE_ABSENT; /* a peer side would have created it */
	} else if (r == 0) {
		enum ntb_peer_state st = ntb_link_peer_state(n);
		why = st == NTB_PEER_ABSENT ? PL_GONE_ABSENT : st == NTB_PEER_DEAD ? PL_GONE_DEAD : NULL;
		ntb_link_close(n);
	}
	PL_LEAVE();
	return why;
}

const char *pl_link_peek_gone(int index)
{
	struct ntb_link_params lp;

	if (!pl_conf || index < 0 || index >= pl_conf->n_links || index >= CONF_MAX_LINKS)
		return NULL;
	pthread_mutex_lock(&pl_link_lock);
	bool open = pl_links[index].tp != NULL;
	pthread_mutex_unlock(&pl_link_lock);
	if (open)
		return NULL;
	pl_link_params(&pl_conf->links[index], &lp);
	const char *why = peer_gone(&lp);
	if (why)
		LOG(LL_DEBUG, "link %s: %s: not opened", lp.name, why);
	return why;
}

/* Open both sides of loopback link INDEX; the first time both are open, wait until each sees
 * the other up (at once, both being here): a connection attached before its side saw the
 * link up would take the peer epoch it then learns for a restart. */
static void loopback_open(int index)
{
	struct tp_link *a = link_get(index, false, NULL);
	struct tp_link *b = link_get(listen_slot(index), false, NULL);
	struct pl_link *flag = &pl_links[listen_slot(index)];

	/* relaxed: the exchange alone picks the one caller that waits; the links it waits for
	 * publish their own state */
	if (!a || !b || atomic_exchange_explicit(&flag->both_up, true, memory_order_relaxed))
		return;
	PL_ENTER();
	for (int i = 0; i < 2; i++) {
		struct tp_link *l = i ? b : a;
		if (!tp_link_is_up(l)) {
			ntb_link_wait_up(tp_link_ntb(l), 1000);
			tp_link_is_up(l); /* (caches the peer epoch) */
		}
	}
	PL_LEAVE();
}

struct tp_link *pl_link_get_at(int index, bool listen_side, bool wait_up, bool *ret_fresh)
{
	if (unlikely(atomic_load_explicit(&pl_helper_held, memory_order_relaxed)))
		helper_hold(false);
	/* A loopback link's far side is this host: its two sides open together, so the link is up
	 * while this process lives, and a port nobody listens on says "no listener". */
	if (pl_link_is_loopback(index))
		loopback_open(index);
	return link_get(listen_side ? listen_slot(index) : index, wait_up, ret_fresh);
}

/* Link SLOT, just opened as TL, joins the other links to its peer (when it has several): a
 * connection moves among them when its own is lost (transport's failover). */
static void link_group(int slot, struct tp_link *tl)
{
	for (int p = 0; p < pl_conf->n_peers; p++) {
		const struct conf_peer *pe = &pl_conf->peers[p];

		if (pe->n_links < 2)
			continue;
		for (int k = 0; k < pe->n_links; k++) {
			if (pe->link_indices[k] != slot)
				continue;
			PL_ENTER();
			tp_link_set_group(tl, (unsigned)p + 1);
			tp_link_set_balance(tl, pe->balance);
			PL_LEAVE();
			return;
		}
	}
}

int pl_link_index_of(struct tp_link *tl)
{
	int idx = -1;

	pthread_mutex_lock(&pl_link_lock);
	for (int i = 0; i < PL_SLOTS && idx < 0; i++)
		if (pl_links[i].tp == tl)
			idx = i % CONF_MAX_LINKS;
	pthread_mutex_unlock(&pl_link_lock);
	return idx;
}

static struct tp_link *link_get(int slot, bool wait_up, bool *ret_fresh)
{
	struct tp_link *tl;
	int64_t now = pl_now_ns();
	bool opened = false;

	if (!slot_valid(slot))
		return NULL;
	pthread_mutex_lock(&pl_link_lock);
	struct pl_link *l = &pl_links[slot];
	if (!l->tp && (!l->failed_ns || now - l->failed_ns > 1000000000LL)) {
		const struct conf_link *cl = &pl_conf->links[slot % CONF_MAX_LINKS];
		struct ntb_link_params lp;
		pl_link_params(cl, &lp);
		if (cl->loopback)
			lp.side = slot >= CONF_MAX_LINKS; /* both sides, one handle each */
		PL_ENTER();
		int r = tp_link_open(&lp, &pl_tpp, &l->tp);
		PL_LEAVE();
		if (r < 0) {
			l->tp = NULL;
			l->failed_ns = now;
			const char *d = ntb_strerror_detail();
			bool has = d && *d;
			LOG(LL_WARN, "link %s: cannot open: %s%s%s", lp.name, strerror(-r),
			    has ? ": " : "", has ? d : "");
		} else {
			l->opened_ns = now;
			opened = true;
			if (cl->loopback && slot >= CONF_MAX_LINKS)
				tp_link_set_self_rung(l->tp); /* our clients write into side 1 */
			LOG(LL_DEBUG, "link %s: opened (side %d)", lp.name, ntb_link_side(tp_link_ntb(l->tp)));
			if (!cl->loopback)
				link_group(slot, l->tp);
			/* After the transport's own fork handler (registered as it opened the link):
			 * child handlers run in registration order. */
			pthread_once(&pl_atfork_once, pl_atfork_register);
		}
	}
	tl = l->tp;
	bool fresh = tl && now - l->opened_ns < PL_FRESH_NS;
	/* Only the connects of the first wait after the open wait for the link to come up (the
	 * first starts it, those made meanwhile join it, up to its end), and only while the peer
	 * side may be alive (ntb_link_wait_peer()): a peer host with no ntbsock process on the
	 * link, or whose heartbeat stopped, is known at once and costs no wait. */
	int64_t wait_ns = 0;
	if (wait_up && fresh) {
		int ms = (int)pl_tpp.setup_timeout_ms;
		if (!l->wait_end_ns)
			l->wait_end_ns = now + (int64_t)(ms > 0 ? ms : 1000) * 1000000;
		wait_ns = l->wait_end_ns - now;
	}
	pthread_mutex_unlock(&pl_link_lock);
	if (opened && slot == listen_slot(slot % CONF_MAX_LINKS))
		listeners_sweep(slot % CONF_MAX_LINKS);
	if (wait_ns > 0) /* (from now: the lock and the open may have taken a while) */
		wait_ns -= pl_now_ns() - now;
	if (tl && wait_ns > 0 && !tp_link_is_up(tl)) {
		int64_t ms = (wait_ns + 999999) / 1000000;
		PL_ENTER();
		int wr = ntb_link_wait_peer(tp_link_ntb(tl), ms < INT_MAX ? (int)ms : INT_MAX);
		if (wr == -EHOSTDOWN)
			LOG(LL_DEBUG, "link %s: peer side %s: not waiting for it",
			    pl_conf->links[slot % CONF_MAX_LINKS].name,
			    ntb_link_peer_state(tp_link_ntb(tl)) == NTB_PEER_DEAD ?
			    "silent (heartbeat stopped)" : "absent");
		PL_LEAVE();
	}
	if (ret_fresh)
		*ret_fresh = fresh;
	return tl;
}

/* Why LINK is down, when the peer side is known to be gone; NULL: just down. */
const char *pl_link_down_reason(struct tp_link *link)
{
	switch (ntb_link_peer_state(tp_link_ntb(link))) {
	case NTB_PEER_ABSENT:
		return PL_GONE_ABSENT;
	case NTB_PEER_DEAD:
		return PL_GONE_DEAD;
	default:
		return NULL;
	}
}

void pl_link_note_setup(int index, int r, enum tp_reason why, bool quick)
{
	if (r == 0 && quick)
		atomic_store_explicit(&pl_links[index].settled, true, memory_order_relaxed);
	else if (r < 0 && why == TP_REASON_TIMEOUT)
		atomic_store_explicit(&pl_links[index].settled, false, memory_order_relaxed);
}

bool pl_link_settled(int index)
{
	return atomic_load_explicit(&pl_links[index].settled, memory_order_relaxed);
}

void pl_links_refuse(const struct tp_key *key)
{
	for (int i = 0; i < PL_SLOTS; i++) {
		struct tp_link *l = pl_links[i].tp;
		if (!l)
			continue;
		PL_ENTER();
		if (tp_refuse(l, key) == 0)
			LOG(LL_INFO, "link %s: refused the client's ntb reservation",
			    pl_conf->links[i % CONF_MAX_LINKS].name);
		PL_LEAVE();
	}
}

/* FN(link, PORT) on every open link that listens for this process; WHAT names a failure. */
static void listener_each_link(uint16_t port, int (*fn)(struct tp_link *, uint16_t),
			       const char *what)
{
	for (int i = 0; pl_conf && i < pl_conf->n_links && i < CONF_MAX_LINKS; i++) {
		struct tp_link *l = listen_link(i);
		if (!l)
			continue;
		PL_ENTER();
		int r = fn(l, port);
		PL_LEAVE();
		if (r < 0 && what)
			LOG(LL_WARN, "port %u: cannot %s on link %s: %s", port, what,
			    pl_conf->links[i].name, strerror(-r));
	}
}

/* Under pl_adv_lock: listener S advertised on config link I, if that link is open and S is
 * neither there yet nor withdrawn. */
static void advertise_on(struct pl_sock *s, int i)
{
	uint64_t bit = 1ull << i;

	/* relaxed: set before the withdrawal takes this lock (pl_listener_withdraw()) */
	if ((s->adv_links & bit) || atomic_load_explicit(&s->unadvertised, memory_order_relaxed))
		return;
	struct tp_link *l = listen_link(i); /* (always looked at: listener_install()) */
	if (!l)
		return;
	uint32_t owned = 0;
	for (struct pl_sock *x = pl_listeners; x; x = x->adv_next)
		owned += x != s && x->port == s->port && (x->adv_links & bit);
	PL_ENTER();
	int r = tp_listen_take(l, s->port, owned);
	PL_LEAVE();
	if (r < 0) {
		LOG(LL_WARN, "port %u: cannot advertise on link %s: %s", s->port,
		    pl_conf->links[i].name, strerror(-r));
		return;
	}
	s->adv_links |= bit;
	LOG(LL_DEBUG, "port %u advertised on link %s%s", s->port, pl_conf->links[i].name,
	    r > 0 ? " (a reference from before exec)" : "");
}

/* Under pl_adv_lock: listener S withdrawn from every link it is advertised on. */
static void withdraw_all(struct pl_sock *s)
{
	for (int i = 0; pl_conf && i < pl_conf->n_links && i < CONF_MAX_LINKS; i++) {
		uint64_t bit = 1ull << i;
		struct tp_link *l = s->adv_links & bit ? listen_link(i) : NULL;

		s->adv_links &= ~bit;
		if (!l)
			continue; /* (not there; links stay open once opened) */
		PL_ENTER();
		tp_unlisten(l, s->port);
		PL_LEAVE();
	}
}

void pl_listener_links(struct pl_sock *s, bool advertise)
{
	pthread_mutex_lock(&pl_adv_lock);
	if (advertise)
		for (int i = 0; pl_conf && i < pl_conf->n_links && i < CONF_MAX_LINKS; i++)
			advertise_on(s, i);
	else
		withdraw_all(s);
	pthread_mutex_unlock(&pl_adv_lock);
}

void pl_listener_add(struct pl_sock *s)
{
	pthread_mutex_lock(&pl_adv_lock);
	s->adv_links = 0;
	s->adv_next = pl_listeners;
	pl_listeners = s;
	pthread_mutex_unlock(&pl_adv_lock);
}

void pl_listener_gone(struct pl_sock *s)
{
	/* one step: a sweep (a link opening now) must not advertise it between the two */
	pthread_mutex_lock(&pl_adv_lock);
	withdraw_all(s);
	for (struct pl_sock **p = &pl_listeners; *p; p = &(*p)->adv_next)
		if (*p == s) {
			*p = s->adv_next;
			break;
		}
	s->adv_next = NULL;
	pthread_mutex_unlock(&pl_adv_lock);
}

/* Config link INDEX has just been opened (where listeners are advertised): the listeners this
 * process already has, made while its open failed, are advertised on it now, and withdrawn for
 * the host if this process made an io_uring (pl_uring.c). A listener being installed meanwhile
 * is seen here or sees the link (listener_install(): it joins the list before it looks at the
 * links under pl_link_lock, and this runs after the link was set there). */
static void listeners_sweep(int index)
{
	bool veto = pl_uring_on();

	pthread_mutex_lock(&pl_adv_lock);
	for (struct pl_sock *s = pl_listeners; s; s = s->adv_next) {
		advertise_on(s, index);
		struct tp_link *l = veto ? listen_link(index) : NULL;
		if (l) {
			PL_ENTER();
			tp_listen_veto(l, s->port);
			PL_LEAVE();
		}
	}
	pthread_mutex_unlock(&pl_adv_lock);
}

void pl_listener_veto(uint16_t port)
{
	listener_each_link(port, tp_listen_veto, "withdraw it for the host");
}

int pl_links_open_all(void)
{
	int n = 0;

	/* Before a credential change: glibc would abort the program if the helper thread's
	 * set*id failed where the caller's succeeded (tp_helper_hold()). No effect on a helper
	 * already running; held until a socket needs the links. */
	helper_hold(true);
	for (int i = 0; i < PL_SLOTS; i++)
		n += slot_valid(i) && link_get(i, false, NULL) != NULL;
	return n;
}
/* fork(), early handlers: our own locks. */
void pl_atfork_prepare(void)
{
	pl_cand_forked();
	pl_addr_atfork_prepare();
}

void pl_atfork_parent(void)
{
	pl_addr_atfork_parent();
}

void pl_atfork_child(void)
{
	pthread_mutex_init(&pl_link_lock, NULL);
	pthread_mutex_init(&pl_hold_lock, NULL);
	pthread_mutex_init(&pl_adv_lock, NULL);
	pl_addr_atfork_child();
	pl_fdtab_atfork_child();
	pl_cand_atfork_child();
}

/* fork(), after the transport's handler (which registers itself and calls tp_atfork_child(),
 * so we do not call it twice): the child takes its own reference on every advertised port
 * (pre-forked workers) and owns its inherited connections for `ntbsock stat`. */
static void pl_atfork_links_child(void)
{
	PL_ENTER();
	int hi = atomic_load_explicit(&pl_fd_hi, memory_order_relaxed);
	for (int fd = 0; fd < hi && fd < pl_nfds; fd++) {
		struct pl_sock *s = atomic_load_explicit(&pl_fds[fd], memory_order_relaxed);
		if (s && s->kind == PL_CONN && s->conn)
			tp_conn_set_owner(s->conn, tp_process_id(), fd);
	}
	/* The list holds each listener once. One no fd holds here (being made or released by
	 * another thread of the parent: its reference is that thread's) is never released here:
	 * it stays withdrawn, as does one withdrawn (passed to another process, an io_uring
	 * made). */
	for (struct pl_sock *s = pl_listeners; s; s = s->adv_next) {
		bool held = false;

		s->adv_links = 0; /* (the parent's references) */
		for (int fd = 0; fd < hi && fd < pl_nfds && !held; fd++)
			held = atomic_load_explicit(&pl_fds[fd], memory_order_relaxed) == s;
		if (!held)
			atomic_store_explicit(&s->unadvertised, true, memory_order_relaxed);
		if (atomic_load_explicit(&s->unadvertised, memory_order_relaxed))
			continue;
		for (int i = 0; i < pl_conf->n_links && i < CONF_MAX_LINKS; i++) {
			struct tp_link *l = pl_links[listen_slot(i)].tp;
			if (l && tp_listen(l, s->port) == 0)
				s->adv_links |= 1ull << i;
		}
	}
	PL_LEAVE();
}
