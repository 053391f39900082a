/* SPDX-License-Identifier: MIT */
/* Two hosts joined by two links in one process (test_tp_move.c, test_tp_stripe.c): host A on
 * side 0 of both links, host B on side 1; each host's links in one group, B listening on 8080
 * over the first. Include after <cmocka.h>, tp_testlib.h and tp_unitlib.h. */
#ifndef NTBSOCK_TP_QUADLIB_H
#define NTBSOCK_TP_QUADLIB_H

struct quad {
	struct tl_pair one, two;
};

/* How the links are made: window bytes, queue_size (0: the default), B's links grouped (false:
 * B has nowhere to move), [DRB] balance on A's and B's links. */
struct quad_opts {
	size_t window;
	uint32_t queue_size;
	bool group_b, balance_a, balance_b;
};

/* A copy of the quad a test has open (its own is on the test's stack, gone after a failed
 * assertion): closed by the teardown when an assertion ended the test early (its links would
 * stay in the process's link group and draw the next test's moves). */
static struct quad g_quad;
static bool g_open;

static inline void quad_link(struct tl_pair *p, const char *name, int n,
			     const struct quad_opts *o)
{
	struct tp_params tpp;
	char nm[64];

	tp_params_init(&tpp);
	tpp.contexts = 8;
	if (o->queue_size)
		tpp.queue_size = o->queue_size;
	snprintf(nm, sizeof(nm), "%s%d", name, n);
	assert_int_equal(tl_pair_open(p, nm, o->window, &tpp, 0), 0);
}

static inline void quad_open_opts(struct quad *q, const char *name, const struct quad_opts *o)
{
	quad_link(&q->one, name, 1, o);
	quad_link(&q->two, name, 2, o);
	tp_link_set_group(q->one.a, 1);
	tp_link_set_group(q->two.a, 1);
	if (o->group_b) {
		tp_link_set_group(q->one.b, 2);
		tp_link_set_group(q->two.b, 2);
	}
	tp_link_set_balance(q->one.a, o->balance_a);
	tp_link_set_balance(q->two.a, o->balance_a);
	tp_link_set_balance(q->one.b, o->balance_b);
	tp_link_set_balance(q->two.b, o->balance_b);
	assert_int_equal(tp_listen(q->one.b, 8080), 0);
	assert_int_equal(tl_wait_listen(q->one.a, 8080, 5000), 0);
	g_quad = *q;
	g_open = true;
}

static inline void quad_close(struct quad *q)
{
	tl_pair_close(&q->one);
	tl_pair_close(&q->two);
	g_open = false;
}

static inline int quad_teardown(void **state)
{
	(void)state;
	if (g_open)
		quad_close(&g_quad);
	return 0;
}

/* Close both ends, the stand-in socket SV and both links. */
static inline void quad_end(struct quad *q, struct tp_conn *ca, struct tp_conn *cb, int sv[2])
{
	tp_close(ca);
	tp_close(cb);
	close(sv[0]);
	close(sv[1]);
	quad_close(q);
}

#endif
