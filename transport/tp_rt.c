/* SPDX-License-Identifier: MIT */
/* [RT]'s connection-context decisions as pure functions (doc/design.md §6), unit-tested row by row. */
#include "transport/tp_int.h"

/* RCxtFreeNum > 0 and (CnctPRI ≥ RCxtPRI or RCxtFreeNum > 1) → allocate; if CnctPRI ≥ RCxtPRI
 * then RCxtPRI = 0. Otherwise RCxtPRI = max(RCxtPRI, CnctPRI) and Nack: the last free context
 * is kept for the most-refused sender, so nobody starves. */
bool tp_rt_admit(struct tp_rt_pool *pool, uint32_t cnct_pri)
{
	if (pool->free_num > 0 && (cnct_pri >= pool->pri || pool->free_num > 1)) {
		pool->free_num--;
		if (cnct_pri >= pool->pri)
			pool->pri = 0;
		return true;
	}
	if (cnct_pri > pool->pri)
		pool->pri = cnct_pri;
	return false;
}

/* TimerCnct is BASE_MS for the first 4 expiries, then doubles every 4 up to 16 times BASE_MS: a
 * lost Apply or answer is repeated soon and often (with the default 10 ms, 6 times within 100 ms,
 * the deadline of a client whose kernel connect completed, see preload/), and a host that does
 * not answer (busy, stopped) is asked every 16x. Those below 16x are the quick repeats
 * (TP_CNCT_QUICK), which count no error, as the data path's quick probes. */
uint32_t tp_rt_cnct_timer(uint32_t base_ms, uint32_t expired)
{
	return base_ms << (expired < TP_CNCT_QUICK ? expired / 4u : 4u);
}

bool tp_rt_tcxt_event(struct tp_tcxt *t, enum tp_rt_event ev, uint32_t msgid, uint32_t max_err)
{
	if (t->state != TP_TC_CONNECTING)
		return false;            /* duplicates and late answers change nothing */
	switch (ev) {
	case TP_EV_ACK:
		if (msgid != t->msgid)
			return false;    /* stale answer of another attempt */
		t->state = TP_TC_SENDING;
		return false;
	case TP_EV_NACK:
		/* no limit on Nacks ([RT]): the priority rises until the receiver keeps its last
		 * context for us; the caller's set-up deadline bounds the wait */
		if (msgid != t->msgid)
			return false;
		t->pri++;
		return true;
	case TP_EV_NACK_NOLISTEN:
		if (msgid != t->msgid)
			return false;
		t->state = TP_TC_FAILED;
		t->reason = TP_REASON_NO_LISTENER;
		return false;
	case TP_EV_TIMER:
		if (t->expired++ < TP_CNCT_QUICK)
			return true; /* a quick repeat: no error */
		if (++t->err >= max_err) {
			t->state = TP_TC_FAILED;
			t->reason = TP_REASON_TIMEOUT;
			return false;
		}
		return true;
	}
	return false;
}
