// SPDX-License-Identifier: MIT
/* Readiness of one fd carried in user space, in poll(2) bits: what poll, select and epoll
 * report for an NTB connection or an epoll set holding some. */
#include "preload/pl_ready_int.h"

static unsigned tp_to_poll(unsigned ev)
{
	unsigned r = 0;
	if (ev & TP_EV_IN)
		r |= POLLIN | POLLRDNORM;
	if (ev & TP_EV_OUT)
		r |= POLLOUT | POLLWRNORM;
	if (ev & TP_EV_RDHUP)
		r |= POLLRDHUP;
	if (ev & TP_EV_HUP)
		r |= POLLHUP;
	if (ev & TP_EV_ERR)
		r |= POLLERR;
	return r;
}

/* pl_revents() without the note of room (pl_ready_int.h). */
static unsigned sock_revents_now(struct pl_sock *s, int fd, bool arm, unsigned events,
				 bool quick)
{
	if (s->kind == PL_EPOLL) {
		if (!s->ep)
			return PL_REV_KERNEL;
		return pl_epoll_ready(s->ep, arm) ? POLLIN : PL_REV_KERNEL;
	}
	if (s->kind != PL_CONN)
		return PL_REV_KERNEL;
	int st = atomic_load_explicit(&s->state, memory_order_acquire); /* pairs with pl_set_state */
	if (st == PL_CS_PENDING)
		st = pl_check_pending(s, fd);
	if (st == PL_CS_FAILED && s->pending_err)
		return POLLOUT | POLLERR | POLLHUP; /* a failed connect, as the kernel shows it */
	if (st != PL_CS_OPEN)
		return PL_REV_KERNEL;
	/* Polled for input alone and not about to sleep: a message the peer published is enough
	 * (tp_readable_hint()), so the read that follows validates it once, while it copies it,
	 * instead of here and again there. POLLRDHUP, errors and end of stream take the full
	 * look below (the hint says false for them). */
	if (!arm && !(events & (POLLOUT | POLLWRNORM | POLLWRBAND | POLLRDHUP)) &&
	    (events & (POLLIN | POLLRDNORM))) {
		if (tp_readable_hint(s->conn))
			return POLLIN | POLLRDNORM;
		if (quick)
			return 0; /* (the next full look sees end of stream, errors) */
	}
	/* Polled for output alone (a sender's select): room the cached credits show for a write
	 * as large as the last one is enough (tp_writable_hint()); else the full look below. */
	if (!arm && (events & (POLLOUT | POLLWRNORM)) &&
	    !(events & (POLLIN | POLLRDNORM | POLLRDHUP | POLLPRI)) &&
	    tp_writable_hint(s->conn, atomic_load_explicit(&s->wlen, memory_order_relaxed)))
		return POLLOUT | POLLWRNORM;
	/* Only what EVENTS asks for: a socket polled for input alone leaves the send side (and
	 * the feedback words the peer keeps writing) alone. POLLHUP/POLLERR come with input. */
	unsigned want = TP_EV_IN;
	if (events & (POLLOUT | POLLWRNORM | POLLWRBAND))
		want |= TP_EV_OUT;
	PL_ENTER();
	unsigned ev = tp_poll_dir(s->conn, want, arm);
	PL_LEAVE();
	/* (a connection that moved to its kernel socket reports both: the kernel answers now) */
	if (unlikely((ev & (TP_EV_IN | TP_EV_OUT)) == (TP_EV_IN | TP_EV_OUT)) &&
	    pl_conn_check_moved(s, fd))
		return PL_REV_KERNEL;
	PL_ENTER();
	/* Writable means room for a write as large as the last one in one message (the kernel,
	 * too, reports POLLOUT only for a good amount of room): pl_send() refuses to cut a write
	 * for want of room, so POLLOUT and the send agree (no EAGAIN after POLLOUT, no lost
	 * edge for EPOLLET). Errors and hang-ups go as they are. */
	if ((ev & TP_EV_OUT) && !(ev & (TP_EV_ERR | TP_EV_HUP)) &&
	    !tp_send_fits(s->conn, atomic_load_explicit(&s->wlen, memory_order_relaxed), arm))
		ev &= ~TP_EV_OUT;
	PL_LEAVE();
	/* Hung up: the kernel's socket is shut both ways then (POLLRDHUP too); its pending error
	 * shows until a call or SO_ERROR took it (pl_err_take()). */
	if (unlikely(ev & TP_EV_HUP)) {
		ev |= TP_EV_IN | TP_EV_RDHUP;
		if (atomic_load_explicit(&s->err_taken, memory_order_relaxed))
			ev &= ~TP_EV_ERR;
	}
	return tp_to_poll(ev);
}

unsigned pl_revents(struct pl_sock *s, int fd, bool arm, unsigned events, bool quick)
{
	unsigned rev = sock_revents_now(s, fd, arm, events, quick);

	if (!(events & (POLLOUT | POLLWRNORM)) || (rev & PL_REV_KERNEL) || s->kind != PL_CONN)
		return rev;
	if (!(rev & (POLLOUT | POLLERR | POLLHUP))) {
		pl_note_nospace(s);
	} else if (unlikely(atomic_load_explicit(&s->nospace, memory_order_relaxed))) {
		atomic_store_explicit(&s->nospace, false, memory_order_relaxed);
		atomic_store_explicit(&s->room_gen,
				      atomic_load_explicit(&s->room_gen, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	}
	return rev;
}

unsigned pl_sock_revents(struct pl_sock *s, int fd)
{
	return pl_revents(s, fd, true, POLLIN | POLLOUT, false);
}

bool pl_user_space(struct pl_sock *s)
{
	if (s->kind == PL_CONN)
		/* pairs with the release in pl_set_state() */
		return atomic_load_explicit(&s->state, memory_order_acquire) != PL_CS_FAILED;
	return s->kind == PL_EPOLL && s->ep && pl_epoll_size(s->ep) > 0;
}

struct pl_sock *pl_sock_get_user(int fd)
{
	struct pl_sock *s;

	if (fd < 0 || fd >= pl_nfds || !pl_fds)
		return NULL;
	/* A listener is a kernel fd: told by two loads, without the reference's two atomic
	 * read-modify-writes (a select() server's listener sits in every call's sets beside its
	 * connections). The memory stays a pl_sock (type-stable, pl_int.h); an object recycled
	 * meanwhile is a descriptor the program closed while polling it, which the kernel's
	 * select() does not order either. Acquire: pairs with the release exchange of the install
	 * (pl_fd_install()), after kind_hint's store. */
	s = atomic_load_explicit(&pl_fds[fd], memory_order_acquire);
	if (!s || atomic_load_explicit(&s->kind_hint, memory_order_relaxed) == PL_LISTENER)
		return NULL;
	s = pl_sock_get(fd);
	if (s && !pl_user_space(s)) {
		pl_sock_put(s);
		s = NULL;
	}
	return s;
}
