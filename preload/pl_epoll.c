// SPDX-License-Identifier: MIT
/* The epoll shadow: each epoll set holding NTB fds keeps a user-space list of them beside the
 * kernel's set (which holds the kernel fds and the transport's event fd): epoll_create,
 * epoll_ctl, and the move of a registration to the kernel when its connection fails over.
 * pl_epoll_wait.c reports what the shadow holds. */
#include "preload/pl_epoll_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void pl_epoll_free(struct pl_epoll *ep)
{
	if (!ep)
		return;
	if (ep->st_collects)
		LOG(LL_DEBUG, "epoll set: %llu collections held %llu idle entries, read %llu of "
		    "their words", (unsigned long long)ep->st_collects,
		    (unsigned long long)ep->st_idle, (unsigned long long)ep->st_words);
	free(ep->v);
	free(ep->nw);
	free(ep->ix);
	free(ep->act);
	free(ep->tmp);
	for (int k = 0; k < ep->ngrps; k++)
		free(ep->grps[k].ent);
	free(ep->grps);
	for (int k = 0; k < ep->nsums; k++)
		free(ep->sums[k].gix);
	free(ep->sums);
	free(ep);
}

int pl_ep_find(struct pl_epoll *ep, int fd)
{
	return fd >= 0 && fd < ep->ix_cap ? ep->ix[fd] - 1 : -1;
}

void pl_ep_remove(struct pl_epoll *ep, int i)
{
	int last = ep->n - 1;

	pl_ep_detach(ep, i);
	ep->ix[ep->v[i].fd] = 0;
	ep->v[i] = ep->v[last];
	ep->nw[i] = ep->nw[last];
	if (i != last) {
		struct pl_ep_news *nw = &ep->nw[i];

		ep->ix[ep->v[i].fd] = i + 1;
		/* (the moved entry's place in the active list or its group names it anew) */
		if (nw->w)
			ep->grps[nw->grp].ent[nw->pos] = i;
		else if (nw->pos >= 0)
			ep->act[nw->pos] = i;
	}
	ep->n--;
}

/* Room in EP's index for FD; 0 or -ENOMEM. */
static int ep_ix_room(struct pl_epoll *ep, int fd)
{
	if (fd < ep->ix_cap)
		return 0;
	if (fd < 0 || fd > INT_MAX / 4)
		return -ENOMEM; /* (the doubling below stays within an int) */
	int nc = ep->ix_cap ? ep->ix_cap : 64;

	while (nc <= fd)
		nc *= 2;
	int *nx = realloc(ep->ix, sizeof(*nx) * (size_t)nc);

	if (!nx)
		return -ENOMEM;
	memset(nx + ep->ix_cap, 0, sizeof(*nx) * (size_t)(nc - ep->ix_cap));
	ep->ix = nx;
	ep->ix_cap = nc;
	return 0;
}

static void ep_migrate_fd(int epfd, int fd);

/* A new epoll fd FD from the kernel (ACTIVE: the library was active before the call): a
 * stale object of an fd closed behind our back must not be taken for it. */
static int ep_created(bool active, int fd)
{
	if (active && fd >= 0)
		pl_fd_fresh(fd);
	return fd;
}

NTB_EXPORT int epoll_create(int size)
{
	bool act = pl_active();

	return ep_created(act, pl_real.epoll_create(size));
}

NTB_EXPORT int epoll_create1(int flags)
{
	bool act = pl_active();

	return ep_created(act, pl_real.epoll_create1(flags));
}

/* The shadow of EPFD, created on first use (a new PL_EPOLL object at EPFD). */
static struct pl_sock *ep_get(int epfd, bool create)
{
	struct pl_sock *s = pl_sock_get(epfd);
	if (s || !create)
		return s;
	s = pl_sock_alloc(PL_EPOLL);
	if (!s)
		return NULL;
	s->ep = calloc(1, sizeof(*s->ep));
	if (!s->ep) {
		pl_sock_put(s);
		return NULL;
	}
	pthread_mutex_init(&s->ep->lock, NULL);
	pl_fd_install(epfd, s);
	return s;
}

static int ep_ctl_shadow(int epfd, struct pl_sock *ep_s, int op, int fd, struct pl_sock *t,
			 struct epoll_event *ev)
{
	struct pl_epoll *ep = ep_s->ep;
	int r = 0;

	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	pthread_mutex_lock(&ep->lock);
	int i = pl_ep_find(ep, fd);
	if (i >= 0 && (pl_fds[fd] != ep->v[i].s ||
		       atomic_load_explicit(&ep->v[i].s->gen, memory_order_relaxed) != ep->v[i].gen)) {
		pl_ep_remove(ep, i); /* stale: the fd was closed and reused */
		i = -1;
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (i >= 0) {
			r = -EEXIST;
			break;
		}
		if ((r = ep_ix_room(ep, fd)))
			break;
		if (ep->n == ep->cap) {
			int nc = ep->cap ? ep->cap * 2 : 16;
			struct pl_ep_entry *nv = realloc(ep->v, sizeof(*nv) * (size_t)nc);
			if (nv)
				ep->v = nv;
			struct pl_ep_news *nn = nv ? realloc(ep->nw, sizeof(*nn) * (size_t)nc) : NULL;
			if (!nn) {
				r = -ENOMEM;
				break;
			}
			ep->nw = nn;
			if (pl_ep_room(ep, nc)) {
				r = -ENOMEM;
				break;
			}
			ep->cap = nc;
		}
		i = ep->n++;
		ep->ix[fd] = i + 1;
		memset(&ep->v[i], 0, sizeof(ep->v[i]));
		ep->nw[i].w = NULL;
		pl_ep_act_add(ep, i);
		ep->v[i].fd = fd;
		ep->v[i].s = t;
		ep->v[i].gen = atomic_load_explicit(&t->gen, memory_order_relaxed);
		ep->v[i].events = ev->events;
		ep->v[i].data = ev->data;
		ep->v[i].fresh = true; /* the kernel polls a new entry at once */
		ep->nested |= t->kind == PL_EPOLL;
		break;
	case EPOLL_CTL_MOD:
		if (i < 0) {
			r = -ENOENT;
			break;
		}
		ep->v[i].events = ev->events;
		ep->v[i].data = ev->data;
		/* (looked at again: what it waits for changed) */
		pl_ep_detach(ep, i);
		ep->v[i].disabled = false;
		pl_ep_act_add(ep, i);
		ep->v[i].fresh = true; /* (re-armed: an event if ready now, as the kernel) */
		break;
	case EPOLL_CTL_DEL:
		if (i < 0)
			r = -ENOENT;
		else
			pl_ep_remove(ep, i);
		break;
	default:
		r = -EINVAL;
	}
	if (r == 0 && !ep->evfd_added) {
		PL_ENTER();
		int evfd = tp_event_fd();
		PL_LEAVE();
		struct epoll_event e = { .events = EPOLLIN, .data.u64 = PL_EP_TAG };
		if (evfd >= 0 && pl_real.epoll_ctl(epfd, EPOLL_CTL_ADD, evfd, &e) == 0)
			ep->evfd_added = true;
	}
	pthread_mutex_unlock(&ep->lock);
	return r;
}

int pl_epoll_shadow_add(int epfd, int fd, struct pl_sock *t, const struct epoll_event *ev)
{
	struct epoll_event e = *ev;
	struct pl_sock *ep_s = ep_get(epfd, true);
	int r;

	if (!ep_s || ep_s->kind != PL_EPOLL || !ep_s->ep)
		r = ep_s ? -EINVAL : -ENOMEM;
	else
		r = ep_ctl_shadow(epfd, ep_s, EPOLL_CTL_ADD, fd, t, &e);
	pl_sock_put(ep_s);
	return r;
}

/* A kernel fd: the kernel's epoll_ctl; a candidate's registrations are remembered. */
static int ctl_kernel(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = pl_real.epoll_ctl(epfd, op, fd, ev);
	if (r == 0 && pl_cand_is(fd)) {
		int saved = errno;
		pl_cand_epoll(epfd, op, fd, ev);
		errno = saved;
	}
	return r;
}

NTB_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct pl_sock *t = pl_lookup(fd);
	if (!t)
		return ctl_kernel(epfd, op, fd, ev);
	if (!(t->kind == PL_CONN || (t->kind == PL_EPOLL && t->ep)) ||
	    (t->kind == PL_CONN &&
	     /* pairs with the release in pl_set_state() */
	     atomic_load_explicit(&t->state, memory_order_acquire) == PL_CS_FAILED)) {
		if (pl_ep_moved(t))
			ep_migrate_fd(epfd, fd); /* (its shadow entry, if still there) */
		pl_sock_put(t);
		return ctl_kernel(epfd, op, fd, ev);
	}
	if (fd == epfd) {
		pl_sock_put(t);
		return (int)pl_ret(-EINVAL);
	}
	int r = 0;
	if (t->kind == PL_EPOLL) {
		/* A nested epoll set: the kernel sees its kernel fds, the shadow its NTB fds. */
		r = pl_real.epoll_ctl(epfd, op, fd, ev);
		if (r < 0) {
			pl_sock_put(t);
			return r;
		}
	}
	struct pl_sock *ep_s = ep_get(epfd, op == EPOLL_CTL_ADD);
	if (!ep_s || ep_s->kind != PL_EPOLL || !ep_s->ep) {
		r = ep_s ? -EINVAL : (op == EPOLL_CTL_ADD ? -ENOMEM : -ENOENT);
	} else {
		r = ep_ctl_shadow(epfd, ep_s, op, fd, t, ev);
	}
	pl_sock_put(ep_s);
	pl_sock_put(t);
	return (int)pl_ret(r);
}

void pl_ep_migrate(struct pl_epoll *ep, int epfd, int i)
{
	struct pl_ep_entry *e = &ep->v[i];
	struct epoll_event ev = { .events = e->disabled ? 0 : e->events, .data = e->data };

	if (pl_real.epoll_ctl(epfd, EPOLL_CTL_ADD, e->fd, &ev) < 0 && errno != EEXIST)
		LOG(LL_WARN, "fd %d: cannot move its epoll registration to the kernel: %s", e->fd,
		    strerror(errno));
	pl_ep_remove(ep, i);
}

bool pl_ep_moved(struct pl_sock *cur)
{
	/* state first: moved is written under s->lock (pl_conn_moved()), before the release
	 * store of FAILED, which this acquire load pairs with; a socket that failed otherwise
	 * (a connect) never has moved written again */
	return cur->kind == PL_CONN &&
	       atomic_load_explicit(&cur->state, memory_order_acquire) == PL_CS_FAILED &&
	       cur->moved;
}

/* A moved connection's registration in EPFD's shadow, if any, goes to the kernel first. */
static void ep_migrate_fd(int epfd, int fd)
{
	struct pl_sock *ep_s = pl_sock_get(epfd);

	if (ep_s && ep_s->kind == PL_EPOLL && ep_s->ep) {
		pthread_mutex_lock(&ep_s->ep->lock);
		int i = pl_ep_find(ep_s->ep, fd);

		if (i >= 0)
			pl_ep_migrate(ep_s->ep, epfd, i);
		pthread_mutex_unlock(&ep_s->ep->lock);
	}
	pl_sock_put(ep_s);
}
