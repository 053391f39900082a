/* SPDX-License-Identifier: MIT */
/* transport/ internals: the wire layout of a receiver's inbound window, the host-local table
 * shared by the processes of one host, and the process-local connection state.
 *
 * ---------------------------------------------------------------------------------------------
 * INBOUND WINDOW OF HOST X (written only by the peer host Y; X only reads it)
 *
 *   0x00000  unit    reserved
 *   0x00080  word    MBOX_TX: Y's producer index of the mailbox below        (checked word)
 *   0x00100  word    MBOX_RX: Y's consumer index of X's mailbox in Y's window (checked word)
 *   0x00180  word    MBOX_RING: how many of Y's set-ups wait asleep for an answer from X's
 *                    mailbox (checked word; X rings for an answer to a watched Apply only
 *                    while it is not a valid 0: tp_mbox.c)
 *   0x00300  word    NEWS_SUM: rewritten by Y after each NEWS word it writes (below)
 *   0x01000  16 KiB  listener bitmap: ports Y listens on, 2048 checked words of 32 bits
 *   0x06000  2 KiB   NEWS_GRP: one word per 64 slots, rewritten by Y after each NEWS word of
 *                    one of them, before NEWS_SUM (tp_news_grp_off())
 *   0x08000  32 KiB  mailbox: TP_MBOX_SLOTS packets of 128 B (Apply/Ack/Nack), from Y
 *   0x10000  slots   connections × slot_size; slot i belongs to X's connection i
 *   news     words   connections × 8 bytes, right below pool_off: slot i's NEWS word at
 *                    pool_off - 8 (i + 1) (tp_news_off(); TP_FBW_NEWS)
 *   pool_off pool    contexts × q: X's transfer contexts, data rings of q bytes (power of two,
 *                    pool_off 4096-aligned), each granted to one connection at a time
 *
 *   Slot i (one connection: X receives Y's bytes here, and Y's feedback on X's bytes):
 *   +0x000 TX unit  (Y as sender of the Y→X queue)       tx_d, epoch|detect, next_msn, tx_wait;
 *                                                        +0x40: ring_req, ring_ret
 *   +0x080 FB unit  (Y as receiver of the X→Y queue)     rx_d, rx_i, ack_msn, epoch|detack,
 *                                                        rx_wait, retry_d, retry_i;
 *                                                        +0x40: grant, rans
 *   +0x100 ST unit  (Y's host, owner or reclaimer)       flags: RST / GONE
 *   +0x200 inline ring: inline_n × 128-byte slots (byte 127 = sequence, written last)
 *   A connection's data ring is the pool ring X granted it (none: its sender uses the inline
 *   ring alone): descriptor (16 B) + data, free-running positions across grants.
 *
 * Every word above is a "checked word": 64-bit single store, low 32 bits the value, high 32
 * bits crc32c(seed, value) where seed is the slot's nonce (chosen by X when it allocated the
 * slot and told to Y in Apply/Ack) or, for the listener bitmap, Y's session epoch; the mailbox
 * indices and packets are seeded with both sides' sessions (tp_mbox_seed()), so that neither a
 * restarted Y's nor a restarted X's earlier mailbox checks out. A dropped write leaves the older
 * value (every index is monotonic and republished by timers), a corrupted or stale (previous
 * connection or session) word fails its check and is ignored.
 *
 * Messages carry MSN and CRC32C seeded with the slot nonce over payload and header (data-ring
 * messages with the nonce mixed with the grant's generation: tp_ring_seed()), so stale bytes of
 * an earlier connection in a reused slot, or of an earlier grant in a reused ring, never
 * validate.
 *
 * TRANSFER CONTEXTS ([RT], tp_ring.c). A connection owns its slot (units and inline ring, a
 * couple of KiB) for its life; data rings are a pool per host and link, granted per transfer.
 * Set-up grants one when the pool has one (Apply: the client's ring for the server's bytes,
 * Ack: the server's). A sender without a ring sends through its inline ring (every byte still
 * moves) and asks for one: RING_REQ {n, CnctPRI}; the receiver's owner admits by [RT]'s rule
 * (tp_rt_admit() on the pool's RCxtFreeNum / RCxtPRI) and writes GRANT then RANS {n}, or RANS
 * {n, NACK} (the sender asks again from its timers with CnctPRI + 1). While others are refused,
 * a grant older than TP_GRANT_QUANTUM_MS is asked back (GRANT | YIELD): the sender stops
 * writing into it and, once the receiver released everything in it, writes RING_RET = gen;
 * the receiver's owner then returns it to the pool. A ring is only ever given back empty, so
 * retransmission, failover and exec never span two grants.
 *
 * WHO WRITES / WHO READS (doc/design.md §3 rule 2: one writer per shared word)
 *   field                 writer                                reader
 *   X.slot[i].TX unit     Y's process owning the connection     X's owner (rx path)
 *   X.slot[i].rings       Y's owner (send path, retransmit)     X's owner (rx path)
 *   X.slot[i].FB unit     Y's owner (rx path, timers)           X's owner (tx path)
 *   X.slot[i].ST unit     Y's owner (abort/close), Y's reclaim  X's owner
 *   X.MBOX_TX/ring        Y's processes under Y's host lock     X's processes under X's lock
 *   X.MBOX_RX             Y's processes under Y's host lock     X's processes under X's lock
 *   X.MBOX_RING           Y's processes under Y's host lock     X's processes under X's lock
 *   X.listen bitmap       Y's processes under Y's host lock     X's processes (no lock)
 *   host table (file)     X's processes under host->lock        X's processes, ntbsock stat
 *   entry.stats           owner process (relaxed stores)        ntbsock stat (torn ok)
 *   entry.refs/fork_ms    atfork prepare, closers (atomics)     closers, reclaim
 *   entry.active          atfork prepare (→ 0), tp_conn_own()   tp_conn_own() (CAS)
 *                         (CAS 0 → pid), set-up / adopt
 *   tp_conn tx side       threads under c->tx_lock              same (linger/stat: racy ok)
 *   tp_conn rx side       threads under c->rx_lock              same
 *   c->error, closed,     any thread (atomics)                  any thread, helper
 *   peer_gone, used
 *   link->up, peer_epoch  helper / tp_link_refresh() (atomics)  data path (peer lost?)
 *
 * PROTOCOL IN SHORT
 *   Set-up: client allocates its receive slot locally, sends Apply {key, its slot geometry,
 *   nonce, CnctPRI}; the server host admits by [RT]'s rule (tp_rt_admit), records a PENDING
 *   entry and Acks with its slot; Nack → CnctPRI + 1 and Apply again; TimerCnct repeats the
 *   Apply with the same MsgID (a duplicate Apply is answered with the same Ack). The mailbox
 *   is a ring like the others: its producer writes only into slots the consumer was seen to
 *   release (a valid MBOX_RX; one that fails its check frees nothing), and both indices are
 *   republished every 500 ms, so that a lost one neither hides a packet nor stops the ring.
 *   Data: messages go inline (≤ inline_max, ring slot free) or to the data ring (short, or
 *   long = payload at the next 128-byte boundary through the DMA queue); MSN orders both
 *   rings. The sender keeps shadows of both rings (its retransmission copies). The receiver
 *   validates in MSN order into private records (or, fast path, checks the CRC while copying
 *   into the caller's buffer) and releases space through FB rx_i/rx_d; ack_msn is CmpAck.
 *   Small writes of a stream, while the receiver is surely behind, merge into one data-ring
 *   message held unpublished (tp_tx_merge.c: tp_tx_merge()); TX_WAIT's HELD bit then asks the
 *   receiver to publish its release at once (it rings only once it waits: tp_rx_idle()), and
 *   the message goes out when the release shows it caught up (or with anything else the
 *   sender publishes).
 *   Retry: on evidence of loss or corruption the receiver bumps its epoch (FB epoch, after
 *   the FB retry words: where its validation stopped) and ignores data until the sender has
 *   rewritten the message there (else everything unreleased) from its shadows and published
 *   the same epoch in TX; it asks again when the sender writes past its Retry and at doubling
 *   intervals from 1 ms, and TimerRcvData repeats a Retry nobody answered with a new epoch.
 *   Detect: unacknowledged or unreleased data without progress for TimerSendData → the sender
 *   publishes next_msn and a new detect number; the receiver retries if it misses data, and
 *   always answers by republishing all its feedback words (DetectAck).
 *   End: FIN is a zero-length message with a flag; abort / death / release write ST flags.
 *
 * FORK: SINGLE-OWNER RULE. A connection's private state (indices, shadow rings, timers) is
 * copied by fork() while its rings in the window are one, so only ONE process may drive it.
 * entry.refs counts the processes holding a copy (fork adds one; export/adopt keep it);
 * entry.active names the driver. At fork (atfork prepare, with every connection's locks held,
 * so both copies are the same consistent state) active becomes 0 and nobody owns it: the first
 * process that uses it afterwards (send, recv, poll, wait, readable/unacked bytes, shutdown,
 * export) claims it with a CAS 0 → its pid (tp_conn_own()). Every other process then gets
 * -EPERM for that connection (c->error, this process only; the connection is not reset). A
 * process that does not own a connection never runs its timers, retransmissions, feedback or
 * Detect; its close only drops its reference (and, when it was the last holder, tells the peer
 * GONE). The owner's close ends the connection (FIN, linger) even while others hold copies. A
 * connection nobody used since the fork is ended by its last closer. A dead owner is never
 * replaced: its state died with it.
 *
 * HOST-LOCAL TABLE: /dev/shm/ntbsock-<link>.side<N> (or <path>.side<N>), created by the first
 * opener under flock(), guarded by a robust process-shared mutex (a holder that died is
 * recovered with pthread_mutex_consistent()). Entries whose pid is dead are reclaimed by any
 * process of the host (helper thread, every ~500 ms): the slot returns to the pool and the
 * peer is told GONE.
 * --------------------------------------------------------------------------------------------- */
#ifndef NTBSOCK_TP_INT_H
#define NTBSOCK_TP_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "transport/tp_mutex.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/compiler.h"
#include "util/crc32c.h"

/* --- window layout ------------------------------------------------------------------------ */
#define TP_OFF_MBOX_TX    0x00080u
#define TP_OFF_MBOX_RX    0x00100u
#define TP_OFF_MBOX_RING  0x00180u
#define TP_OFF_LISTEN     0x01000u
#define TP_LISTEN_WORDS   2048u          /* 65536 ports / 32 */
/* Offers (tp_offer.c): server reservations made ahead of any Apply, published into the client's
 * window as records in a ring (TP_OFF_OFFER) with a producer index (OFFER_TX, written by the
 * server), the client's consumer index in the server's window (OFFER_RX). */
#define TP_OFF_OFFER_TX   0x00200u
#define TP_OFF_OFFER_RX   0x00280u
#define TP_OFF_OFFER      0x05000u
#define TP_OFFER_SLOTS    16u            /* records in the ring */
#define TP_OFFER_KEEP     8u             /* offers a server keeps outstanding */
#define TP_OFFER_RQ       1u             /* a Claim's ring request number (tp_ring.c) */
/* News summaries (tp_news_tag()): NEWS_SUM, a word Y rewrites after every NEWS word it writes,
 * and NEWS_GRP, one word per TP_NEWS_GRP_SLOTS slots rewritten before it. */
#define TP_OFF_NEWS_SUM   0x00300u
#define TP_OFF_NEWS_GRP   0x06000u
#define TP_NEWS_GRP_SLOTS 64u
#define TP_OFF_MBOX       0x08000u
#define TP_MBOX_SLOTS     256u
#define TP_MBOX_PKT       128u
#define TP_OFF_SLOTS      0x10000u
static_assert(TP_OFF_LISTEN + TP_LISTEN_WORDS * 8u <= TP_OFF_OFFER &&
	      TP_OFF_OFFER + TP_OFFER_SLOTS * 128u <= TP_OFF_NEWS_GRP, "window layout");

#define TP_SLOT_TX        0x000u
#define TP_SLOT_FB        0x080u
#define TP_SLOT_ST        0x100u
#define TP_SLOT_RINGS     0x200u

/* TX unit words */
#define TP_W_TX_D         (TP_SLOT_TX + 0x00)
#define TP_W_TX_EPOCH     (TP_SLOT_TX + 0x08) /* epoch (low 16) | detect seq (high 16) */
#define TP_W_TX_NEXT_MSN  (TP_SLOT_TX + 0x10)
/* TX_WAIT, the sender's Dekker flag, is in the unit's second cache line (below), not beside
 * TX_D: the receiver reads it at each release, and a line that TX_D's writes keep moving to the
 * sender's core cost every release a miss (a full cross-core round trip on far cores). */
/* Transfer contexts (tp_ring.c), in the unit's second cache line (written seldom, as TX_WAIT,
 * not at every message as the first): the
 * sender's request for a data ring (number, low 16 bits, never 0; CnctPRI, high 16) and the
 * generation of the last grant it gave back. */
#define TP_W_TX_RING_REQ  (TP_SLOT_TX + 0x40)
#define TP_W_TX_RING_RET  (TP_SLOT_TX + 0x48)
#define TP_W_TX_WAIT      (TP_SLOT_TX + 0x50) /* sender waits for feedback: TP_TXW_* bits */
/* TX_WAIT's bits. Any bit asks the receiver to publish each release at once. ROOM (the sender
 * sleeps for room; also any value but HELD alone, as a sender before HELD wrote 1 for both)
 * has it ring at each release. HELD alone (it holds a merged message, tp_tx_merge.c, and its
 * own next write looks at the release) has it ring only once it waits for data itself, or
 * found none for TP_HELD_RING_NS (tp_rx.c: tp_rx_idle()). */
#define TP_TXW_ROOM       1u
#define TP_TXW_HELD       2u
#define TP_HELD_RING_NS   10000u
/* FB unit words */
#define TP_W_FB_RX_D      (TP_SLOT_FB + 0x00)
#define TP_W_FB_RX_I      (TP_SLOT_FB + 0x08)
#define TP_W_FB_ACK_MSN   (TP_SLOT_FB + 0x10)
#define TP_W_FB_EPOCH     (TP_SLOT_FB + 0x18) /* retry epoch (low 16) | detect ack (high 16) */
/* FB_WAIT (the receiver's Dekker flag, read by the sender after each message it publishes) is
 * in the unit's second cache line, away from the release words the receiver rewrites at each
 * release (as TX_WAIT). */
/* Slot I's NEWS word in a window whose pool of transfer contexts is at POOL_OFF (the array
 * right below it, tp_geometry()): a value that changes whenever the peer publishes a message
 * while FB_WAIT asks for NEWS, and with every ST_FLAGS write. Only compared, never checked:
 * any change is news. 0: none (a pool offset too low for it). */
static inline uint64_t tp_news_off(uint64_t pool_off, uint32_t slot)
{
	uint64_t back = 8u * ((uint64_t)slot + 1u);

	return pool_off >= TP_OFF_SLOTS + back ? pool_off - back : 0;
}
/* The news summaries of slot SLOT (TP_OFF_NEWS_GRP's word, TP_OFF_NEWS_SUM): what the sender
 * writes into both after a NEWS word, raw (only compared), a value no other write gives them:
 * the connection (the slot and its nonce SEED, new with each connection in the slot) in the
 * high half, and in the low half the sequence number N of its next message, or for an ST write
 * its clock with bit 31 set. So a sender writes them only once per message (tp_wake_peer():
 * written twice for one message, X, Y, X would bring the summary back to a value a reader
 * saw, hiding Y's news). A reader that saw one of them keep its value knows that no NEWS
 * word under it changed since (each writer's stores land in program order, after a barrier; a
 * later writer's value replaces an earlier one's, but is itself new): an epoll set reads the
 * summary, then only the groups and the slots under a word that changed
 * (preload/pl_epoll_wait.c). */
static inline uint64_t tp_news_grp_off(uint32_t slot)
{
	return TP_OFF_NEWS_GRP + 8u * (uint64_t)(slot / TP_NEWS_GRP_SLOTS);
}
static inline uint64_t tp_news_tag(uint32_t slot, uint32_t seed, uint32_t n)
{
	return (uint64_t)(seed ^ (slot + 1u) * 0x9e3779b1u) << 32 | n;
}
/* FB_WAIT's bits. RING: the receiver sleeps, the sender rings the doorbell for each message it
 * publishes. NEWS: an epoll set holds the connection: the sender also rewrites the slot's NEWS
 * word (tp_news_off()) after each message it publishes (tp_wake_peer()), so that the set
 * passes over the connection while that word keeps the value it saw (preload/pl_epoll_wait.c).
 * The NEWS words of all slots are one array, which a set reads in few cache lines. */
#define TP_FBW_RING       1u
#define TP_FBW_NEWS       2u
/* A thread sleeps in tp_wait() for this connection's data on both doorbells: ring the direct one
 * (ntb_peer_db_ring_direct(): the helper thread, on the doorbell alone, is not woken) unless
 * TP_FBW_RING asks for the doorbell too. A sender that predates it rings the doorbell. */
#define TP_FBW_DIRECT     4u
/* Every sleeper of the connection waits on its process's event fd (poll, epoll), which that
 * process published as claim slot (v >> TP_FBW_EV_SHIFT) & 0xff of its side (ntb_int.h: EVENT
 * DOORBELL): write that eventfd (ntb_peer_event_ring()) instead of ringing the doorbell, whose
 * waker (the helper thread) would write it. Asked only of a peer with NTB_CAP_EV_RING (one
 * that predates it rang nothing where the news word was asked for too); a ringer that cannot
 * take the eventfd rings the doorbell. */
#define TP_FBW_EVENT      8u
#define TP_FBW_EV_SHIFT   8
/* As TP_FBW_DIRECT, but the thread sleeps on the doorbell and on this connection's NEWS word
 * (ntb_int.h: WORD WAKE): the sender rewrites the word after each message (as for
 * TP_FBW_NEWS, with a fresh value where the message's was written already) and wakes that word
 * alone (ntb_peer_word_wake()), so that no reader of another connection wakes for it. Asked
 * only of a peer with NTB_CAP_WORD_WAKE; TP_FBW_RING, asked too, rings the doorbell, which
 * the sleeper also waits on. */
#define TP_FBW_WORD       16u
/* The half of a NEWS word that the sleeper's futex compares: the check (the upper half of the
 * little-endian checked word, crc32c(seed, value)), which every new value of the connection
 * changes, and a new connection in the slot too (its seed: the value alone, a message sequence
 * number that starts at 0 again, may come back to one left by the slot's previous connection). */
#define TP_NEWS_FUTEX     4u
/* Where the receiver's validation stopped when it asked for a Retry (its v_d and v_i), written
 * before the Retry's epoch: the sender rewrites the message there first (selective repeat,
 * tp_retx.c: retransmit()); a peer that never writes them gets the whole unreleased rings. */
#define TP_W_FB_RETRY_D   (TP_SLOT_FB + 0x28)
#define TP_W_FB_RETRY_I   (TP_SLOT_FB + 0x30)
/* The Retry's epoch (low 16 bits) those two belong to, written after them and before FB_EPOCH,
 * and all three again with each re-ask: a sender that sees a new epoch without its own
 * FB_RETRY_EP (one of the words lost or spoilt: stale positions) waits for the re-ask, at most
 * TP_RETRY_WAIT_US, instead of rewriting every unreleased byte (tp_retx.c). */
#define TP_W_FB_RETRY_EP  (TP_SLOT_FB + 0x38)
#define TP_RETRY_WAIT_US  1000u
/* Transfer contexts (tp_ring.c), the unit's second cache line: the grant (ring index, low 12
 * bits; TP_GRANT_YIELD: give it back once drained; generation, high 16 bits, never 0) and the
 * answer to the sender's last request (its number, low 16 bits; TP_RANS_NACK: refused) */
#define TP_W_FB_GRANT     (TP_SLOT_FB + 0x40)
#define TP_W_FB_RANS      (TP_SLOT_FB + 0x48)
#define TP_W_FB_WAIT      (TP_SLOT_FB + 0x50) /* receiver waits for data: TP_FBW_* bits */
#define TP_GRANT_YIELD    0x8000u
#define TP_RANS_NACK      0x10000u
/* ST unit */
#define TP_W_ST_FLAGS     (TP_SLOT_ST + 0x00)
/* The sender's held merged message (tp_tx_merge.c), a raw word that only a death reads
 * (tp_rx_death_end()): its descriptor's CRC (high 32 bits), its payload length (bits 16-31) and
 * its MSN's low 16 bits, rewritten at each merge after the payload; 0 once it is published
 * (tp_tx_publish()) or dropped. Written twice, in two lines of their own (TX_HELD, TX_HELD2:
 * tp_tx_held_word()), so that one lost write is seen (the copies differ) rather than taken for
 * a shorter message or none. Written by the sender (tx_lock), not by the host as ST_FLAGS. */
#define TP_W_TX_HELD      (TP_SLOT_ST + 0x40)
#define TP_W_TX_HELD2     (TP_SLOT_ST + 0x80)
/* The sequence number after the sender's last inline message that carries bytes: the MSN (low
 * 32 bits) under a check of it and the sender's nonce (high 32: TP_SENT_WORD(); one bit flipped
 * anywhere fails it, and so does a stale word of the slot's earlier connection), rewritten
 * after each such message's slot (send_inline()). Only a death reads it (tp_rx_death_end()):
 * an inline slot has no index that tells the receiver a slot was written (TX_D does for the
 * data ring), so a dead sender's last message, its slot's write lost, looked like a stream
 * that ended before it. In a line of its
 * own, which the receiver never reads while the sender lives (no line moves between the two per
 * message). A FIN message leaves it as it was: its loss is an end of file either way. */
#define TP_W_TX_SENT      (TP_SLOT_ST + 0xc0)
#define TP_SENT_WORD(nonce, msn) \
	((uint64_t)((nonce) ^ ((uint32_t)(msn) * 0x9e3779b1u) ^ 0x5a17c0deu) << 32 | (uint32_t)(msn))
#define TP_HELD_WORD(dcrc, len, msn) \
	((uint64_t)(dcrc) << 32 | (uint64_t)(uint16_t)(len) << 16 | (uint16_t)(msn))
#define TP_ST_RST         0x1u  /* peer aborted the connection */
#define TP_ST_GONE        0x2u  /* peer process died / released without FIN exchange */
#define TP_ST_CLOSING     0x4u  /* peer closed it (tp_close): its socket's close is deliberate,
				 * the connection lingers there (tp_witness_look() ignores the TCP EOF) */
#define TP_ST_FAILOVER    0x8u  /* peer moved the connection to its kernel TCP socket: its
				 * failover header is (or will be) there (tp_failover.c) */
#define TP_ST_COMMIT      0x10u /* client: it uses the reservation (tp_conn_commit()); until
				 * then (or RST) the server's tp_attach() waits */
#define TP_ST_MOVING      0x20u /* peer moves the connection to another link to this host: its
				 * client side re-attaches there (tp_failover.c) */
#define TP_ST_STRIPE_WANT 0x40u /* server: its sends found the link congested; the client sets up
				 * the connection's stripe on another link (tp_stripe.c) */
#define TP_ST_STRIPE_UP   0x80u /* client: the stripe is set up (committed) on another link of
				 * the group: the server attaches it (tp_stripe.c) */

/* --- inline slots (doc/design.md §4 table) ------------------------------------------------------- */
#define TP_INLINE_MAX     116u
#define TP_INL_LEN        116u  /* u16 payload length */
#define TP_INL_MSN        118u  /* u32 */
#define TP_INL_CRC        122u  /* u32 */
#define TP_INL_FLAGS      126u  /* u8 */
#define TP_INL_SEQ        127u  /* u8, written last */
#define TP_MSG_FIN        0x1u  /* message flag: end of stream after this message's bytes */

/* Payload offset of an inline message of LEN bytes (0 ≤ LEN ≤ 116): 112, 64 or 0. */
static inline unsigned tp_inline_off(unsigned len)
{
	return len <= 4 ? 112 : len <= 52 ? 64 : 0;
}
/* Consumed inline slots a receiver's lazy release holds back at most, less one (tp_rx.c:
 * rx_release()): a quarter of a ring of N slots, half of a small one (8 slots: a release every
 * 4 messages, not every 2, whose feedback writes cost a 64-byte ping-pong a third of its
 * latency), so that what it holds back is always less than half the ring. */
static inline uint32_t tp_inline_keep(uint32_t n) { return n >= 16u ? n / 4u : n / 2u; }

/* Bytes copied to the window: offset … 127. */
static inline unsigned tp_inline_copy(unsigned len) { return 128 - tp_inline_off(len); }

/*
 * Sequence byte of inline ring position POS (free-running) in a ring of 2^LOG2N slots
 * (1 ≤ LOG2N ≤ 16): changes every lap, including the lap across the 2^32 wrap of POS, and is
 * never 0 (fresh memory never looks written). BASE (tp_inline_seq_base(), below 254: the sum
 * with a lap number below 2^31 does not wrap) varies per connection. Sender and receiver both
 * compute it with this function.
 *
 * The lap number pos >> LOG2N runs over L = 2^(32 - LOG2N) values and then wraps to 0, so the
 * byte of lap L - 1 and of lap 0 differ only if L mod M ≠ 1 for the modulus M of the cycle.
 * With M = 255 that fails whenever 32 - LOG2N is a multiple of 8 (2^8 ≡ 1 mod 255: 256 and
 * 65536 slots, the last lap before the wrap and the first after it had one byte, and a stale
 * slot read as published). M = 254 is even, so L mod 254 is even and never 1: the byte
 * changes at every lap for every ring size; values 1..254.
 */
#define TP_INLINE_SEQ_MOD 254u
static inline uint8_t tp_inline_seq(uint32_t pos, unsigned log2n, uint32_t base)
{
	return (uint8_t)(((pos >> log2n) + base) % TP_INLINE_SEQ_MOD + 1u);
}
/* The BASE of tp_inline_seq() for a connection whose slot has NONCE. */
static inline uint32_t tp_inline_seq_base(uint32_t nonce) { return nonce % TP_INLINE_SEQ_MOD; }

/* --- data ring descriptor ------------------------------------------------------------------ */
#define TP_DESC_SIZE      16u
#define TP_DATA_ALIGN     16u
enum tp_msg_type { TP_MT_SHORT = 1, TP_MT_LONG = 2 };
struct tp_desc {
	uint8_t  type;   /* TP_MT_* */
	uint8_t  flags;  /* TP_MSG_FIN */
	uint16_t pad;
	uint32_t len;    /* payload bytes */
	uint32_t msn;
	uint32_t crc;    /* crc32c(nonce, payload ‖ bytes 0..11 of this descriptor) */
};
static_assert(sizeof(struct tp_desc) == TP_DESC_SIZE, "desc size");
static_assert(offsetof(struct tp_desc, crc) == 12, "desc layout");

/* Offset (from the descriptor) of a message's payload, and its whole footprint in the ring. */
static inline uint32_t tp_payload_gap(uint8_t type, uint32_t pos)
{
	if (type == TP_MT_LONG)
		return (uint32_t)(ALIGN_UP(pos + TP_DESC_SIZE, 128u) - pos);
	return TP_DESC_SIZE;
}
static inline uint32_t tp_footprint(uint8_t type, uint32_t pos, uint32_t len)
{
	return tp_payload_gap(type, pos) + (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);
}

/* --- mailbox packets ---------------------------------------------------------------------- */
/* CANCEL: a client that gave up its set-up (timeout) withdraws the Apply of that MsgID, so a
 * reservation answered too late is not attached by the server's accept() (tp_attach() reads
 * the mailbox first) while the client uses TCP. */
/* OFFER: an offer's record (not in the mailbox: tp_offer.c); CLAIM: an Apply naming the offer
 * it takes (server_slot, server_nonce), answered by nothing. */
enum tp_pkt_type { TP_PKT_APPLY = 1, TP_PKT_ACK = 2, TP_PKT_NACK = 3, TP_PKT_CANCEL = 4,
		   TP_PKT_OFFER = 5, TP_PKT_CLAIM = 6 };
struct tp_pkt {
	uint32_t seq;          /* producer index + 1 */
	uint8_t  type;
	uint8_t  reason;       /* NACK: enum tp_reason */
	uint16_t pad;
	uint32_t msgid;
	uint32_t pri;          /* APPLY: CnctPRI */
	uint32_t client_slot;
	uint32_t server_slot;
	uint32_t client_nonce;
	uint32_t server_nonce;
	uint32_t slot_off_lo;  /* geometry of the sender's slot (APPLY: client's, ACK: server's): */
	uint32_t inline_n;     /* its window offset (64 bits, low half here, high half below: */
	uint32_t qsize;        /* tp_pkt_slot_off()), inline slots and data ring bytes */
	uint32_t epoch;        /* ACK: initial epoch (RRetryNum) */
	struct tp_key key;
	uint32_t apply_flags;  /* APPLY: TP_APPLY_* */
	uint32_t slot_off_hi;  /* bits 32..63 of the slot offset (windows above 4 GiB) */
	uint32_t version;      /* TP_WIRE_VERSION of the writer (0: written before the field) */
	uint32_t pool_off_lo;  /* the writer's pool of transfer contexts (data rings of qsize */
	uint32_t pool_off_hi;  /* bytes): window offset, */
	uint32_t pool_n;       /* and ring count */
	uint32_t ring;         /* the ring granted to the reader's sender at set-up: index + 1, 0:
				* none (it asks: tp_ring.c) */
	uint32_t ring_gen;     /* that grant's generation */
	uint8_t  reserved[124 - 120];
	uint32_t crc;          /* crc32c(tp_mbox_seed(writer, reader sessions), bytes 0..123) */
};
/* The client watches the mailbox index for the answer (tp_connect()'s first moments): the server
 * answers it without a ring unless the client's host has a set-up asleep (MBOX_RING; a ring
 * would only wake the client's helper, a switch on its CPU). Servers before MBOX_RING rang for
 * every answer; a client before it never writes the word, which then fails its check: rung. */
#define TP_APPLY_WATCH    0x1u
/* The Apply re-attaches a live connection (the same key) that moves off another link between
 * the two hosts (tp_failover.c): admitted whether or not the port still has a listener. */
#define TP_APPLY_REATTACH 0x2u
/* The client's connection is framed for [DRB] balancing over several links (tp_stripe.c), if the
 * server agrees: its Ack carries the flag back (its link has balance on too). */
#define TP_APPLY_FRAMED   0x4u
static_assert(sizeof(struct tp_pkt) == TP_MBOX_PKT, "pkt size");
static_assert(offsetof(struct tp_pkt, key) == 48, "pkt layout");
static_assert(offsetof(struct tp_pkt, apply_flags) == 88, "pkt layout");
static_assert(offsetof(struct tp_pkt, slot_off_lo) == 32 &&
	      offsetof(struct tp_pkt, slot_off_hi) == 92 &&
	      offsetof(struct tp_pkt, version) == 96 && offsetof(struct tp_pkt, crc) == 124 &&
	      offsetof(struct tp_pkt, ring_gen) == 116,
	      "pkt layout");

/* What a peer must speak to set up a connection with us; an Apply or Ack of another version is
 * refused (Nack / RST: the connection uses TCP). 1: slot offsets of 64 bits (slot_off_hi);
 * 2: inline sequence bytes modulo 254 (tp_inline_seq()); 3: packets and indices seeded with
 * both sides' sessions (tp_mbox_seed(): an earlier build's packets fail their check, so they
 * time out rather than being refused); 4: the server attaches only a reservation the client
 * committed (TP_ST_COMMIT; an earlier client never does); 5: transfer contexts (a pool of data
 * rings granted per transfer, the packets' pool and ring fields); 6: FB_WAIT's NEWS bit and the
 * slots' NEWS words below the pool (an earlier sender would ring for NEWS and never write
 * them); 7: TX_WAIT and FB_WAIT in their units' second cache line; 8: NEWS_GRP and NEWS_SUM
 * after each NEWS word (an earlier sender leaves them unwritten: its news would wait for a
 * full look). Packets
 * of earlier builds carry 0 (reserved bytes). */
#define TP_WIRE_VERSION   8u

/* The window offset of the slot a packet describes. */
static inline uint64_t tp_pkt_slot_off(const struct tp_pkt *p)
{
	return (uint64_t)p->slot_off_hi << 32 | p->slot_off_lo;
}
static inline void tp_pkt_set_slot_off(struct tp_pkt *p, uint64_t off)
{
	p->slot_off_lo = (uint32_t)off;
	p->slot_off_hi = (uint32_t)(off >> 32);
}
static inline uint64_t tp_pkt_pool_off(const struct tp_pkt *p)
{
	return (uint64_t)p->pool_off_hi << 32 | p->pool_off_lo;
}

/* --- pure helpers (tp_wire.c) ------------------------------------------------------------- */
uint64_t tp_cw_make(uint32_t seed, uint32_t value);
bool tp_cw_check(uint32_t seed, uint64_t word, uint32_t *ret_value);
/* The header CRC of an inline message: the payload's CRC continued over the same bytes as
 * tp_inline_hdr_crc() (length, MSN, flags), from registers (stores just made would not
 * forward to the wider loads of a CRC over memory). */
static inline uint32_t tp_inline_crc(uint32_t payload_crc, unsigned len, uint32_t msn,
				     uint8_t flags)
{
	uint32_t crc = crc32c_word(payload_crc, (uint64_t)(uint16_t)len | (uint64_t)msn << 16, 6);

	return crc32c_word(crc, flags, 1);
}

/* Build inline slot content for LEN bytes at SLOT (128 B); the payload is already at
 * SLOT + tp_inline_off(len) (copied by the caller, crc = crc32c(nonce, payload)). Inline: once
 * per inline message. */
static inline void tp_inline_finish(uint8_t *slot, unsigned len, uint32_t msn, uint8_t flags,
				    uint8_t seq, uint32_t payload_crc)
{
	uint16_t l16 = (uint16_t)len;
	uint32_t crc = tp_inline_crc(payload_crc, len, msn, flags);

	memcpy(slot + TP_INL_LEN, &l16, 2);
	memcpy(slot + TP_INL_MSN, &msn, 4);
	slot[TP_INL_FLAGS] = flags;
	memcpy(slot + TP_INL_CRC, &crc, 4);
	slot[TP_INL_SEQ] = seq;
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The same header as tp_inline_finish() in two little-endian words: *H0 = bytes 116..123
 * (length, MSN, low half of the CRC), *H1 = bytes 124..127 (high half of the CRC, flags, and
 * the sequence byte in its top byte), for a writer that stores them from registers. */
static inline void tp_inline_hdr_words(unsigned len, uint32_t msn, uint8_t flags, uint8_t seq,
				       uint32_t payload_crc, uint64_t *h0, uint32_t *h1)
{
	uint32_t crc = tp_inline_crc(payload_crc, len, msn, flags);

	static_assert(TP_INL_MSN == TP_INL_LEN + 2 && TP_INL_CRC == TP_INL_MSN + 4 &&
		      TP_INL_FLAGS == TP_INL_CRC + 4 && TP_INL_SEQ == TP_INL_FLAGS + 1,
		      "inline header layout");
	*h0 = (uint64_t)(uint16_t)len | (uint64_t)msn << 16 | (uint64_t)(crc & 0xffffu) << 48;
	*h1 = crc >> 16 | (uint32_t)flags << 16 | (uint32_t)seq << 24;
}
#endif
/* Validate a private copy of an inline slot; 0 and header fields, or -EBADMSG. */
int tp_inline_check(const uint8_t *slot, uint32_t nonce, unsigned *ret_len, uint32_t *ret_msn,
		    uint8_t *ret_flags);
uint32_t tp_inline_hdr_crc(uint32_t payload_crc, const uint8_t *slot);
uint32_t tp_desc_crc(uint32_t payload_crc, const struct tp_desc *d);
/* tp_desc_crc() of a descriptor {TYPE, no flags, LEN, MSN} from registers: a descriptor just
 * stored field by field and read back by the CRC's wider loads waits for those stores (no store
 * forwarding from several stores). *W0 and *W1 get its two words (bytes 0..7, 8..15) as stored. */
static inline uint32_t tp_desc_crc_words(uint32_t payload_crc, uint8_t type, uint32_t len,
					 uint32_t msn, uint64_t *w0, uint64_t *w1)
{
	static_assert(offsetof(struct tp_desc, len) == 4 && offsetof(struct tp_desc, msn) == 8,
		      "descriptor layout");
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint32_t crc;

	*w0 = (uint64_t)type | (uint64_t)len << 32;
	crc = crc32c_word(crc32c_word(payload_crc, *w0, 8), msn, 4);
	*w1 = (uint64_t)msn | (uint64_t)crc << 32;
	return crc;
#else
	struct tp_desc d = { .type = type, .len = len, .msn = msn };

	d.crc = tp_desc_crc(payload_crc, &d);
	memcpy(w0, &d, 8);
	memcpy(w1, (const uint8_t *)&d + 8, 8);
	return d.crc;
#endif
}
/* Seed of the mailbox's packets and index words (MBOX_TX, MBOX_RX): the writer's session epoch
 * and the reader's, so that nothing one session of either side wrote checks out in the next. */
uint32_t tp_mbox_seed(uint32_t writer_epoch, uint32_t reader_epoch);
void tp_pkt_seal(struct tp_pkt *p, uint32_t seed);
bool tp_pkt_valid(const struct tp_pkt *p, uint32_t seed, uint32_t want_seq);

/* --- [RT] decisions as pure functions (tp_rt.c) ------------------------------------------- */
struct tp_rt_pool {
	uint32_t free_num;  /* RCxtFreeNum */
	uint32_t pri;       /* RCxtPRI */
};
/* Receiver of a new Apply with priority CNCT_PRI: true → allocate (pool updated), false →
 * Nack (RCxtPRI raised). */
bool tp_rt_admit(struct tp_rt_pool *pool, uint32_t cnct_pri);

/* Sender's TCxt during set-up. */
enum tp_tcxt_state { TP_TC_CONNECTING, TP_TC_SENDING, TP_TC_FAILED };
struct tp_tcxt {
	enum tp_tcxt_state state;
	uint32_t msgid, pri, err;
	uint32_t expired;      /* TimerCnct expiries, the quick repeats included */
	enum tp_reason reason;
};
/* TimerCnct's first expiries are quick repeats that count no error (a lost Apply or answer
 * costs milliseconds: tp_rt_cnct_timer()); from then on each one counts toward MaxErr. */
#define TP_CNCT_QUICK 16u
enum tp_rt_event { TP_EV_ACK, TP_EV_NACK, TP_EV_NACK_NOLISTEN, TP_EV_TIMER };
/* Apply EVENT (for MSGID) to T; returns true if an Apply must be (re)sent. */
bool tp_rt_tcxt_event(struct tp_tcxt *t, enum tp_rt_event ev, uint32_t msgid, uint32_t max_err);
/* TimerCnct after EXPIRED expiries of a set-up (t->expired), from the tunable BASE_MS. */
uint32_t tp_rt_cnct_timer(uint32_t base_ms, uint32_t expired);

/* Receiver's view of the retry epoch: a data message / detect is accepted only when the
 * sender's published epoch equals ours. Returns true when the sender's epoch has caught up. */
static inline bool tp_rt_epoch_ok(uint16_t rx_epoch, uint16_t tx_epoch) { return rx_epoch == tx_epoch; }
/* Sender: should it adopt (retransmit for) a feedback epoch? (16-bit serial arithmetic) */
static inline bool tp_rt_epoch_newer(uint16_t fb_epoch, uint16_t tx_epoch)
{
	return (int16_t)(fb_epoch - tx_epoch) > 0;
}

/* --- host-local table --------------------------------------------------------------------- */
#define TP_HOST_MAGIC     0x54534f48504e5354ULL
#define TP_HOST_VERSION   15u
#define TP_MAX_LISTEN     1024u
#define TP_MAX_CONTEXTS   4096u   /* transfer contexts (data rings) per link and host */
#define TP_RING_PARTS     8u      /* a data ring's pages are mapped in as many parts */
#define TP_MAX_CONNS      16384u  /* connection slots per link and host */
static_assert(TP_OFF_NEWS_GRP + TP_MAX_CONNS / TP_NEWS_GRP_SLOTS * 8u <= TP_OFF_MBOX &&
		      TP_MAX_CONNS / TP_NEWS_GRP_SLOTS == TP_NEWS_GROUPS,
	      "news groups");
#define TP_AUTO_CONNS     TP_MAX_CONNS /* connections "auto": at most this many (the host
					* table's entries are cleared as they are first handed out) */
#define TP_OWNERS         4
#define TP_FORK_GRACE_MS  2000u   /* an entry whose owner forked this recently stays (the child
				     * may not be listed among its owners yet) */
#define TP_SLOT_REUSE_MS  100u    /* a released entry before a fresh one after this long */
#define TP_HOST_PROCS     128u /* owner processes the reclaim looks at by name (struct tp_host) */
#define TP_RECLAIM_PART   512u /* entries a maintenance pass walks when nobody died */

enum tp_entry_state {
	TP_ES_FREE = 0,
	TP_ES_CONNECTING,  /* client: slot reserved, Apply sent, waiting for Ack */
	TP_ES_PENDING,     /* server: Ack sent, waiting for tp_attach() */
	TP_ES_OPEN,        /* owned by a process */
};
#define TP_ROLE_OFFER 2u   /* a server entry offered ahead of any Apply (tp_offer.c) */

/* What survives exec: with everything sent acknowledged, the cursors are the whole state. */
struct tp_export {
	_Atomic uint32_t valid; /* 1 between tp_conn_export() and tp_conn_adopt() */
	uint32_t msn_next, tx_i, tx_d, fin_msn;
	uint32_t c_i, c_d, c_msn, rec_off;
	uint16_t tx_epoch, detect_seq, rx_epoch, det_seen;
	uint8_t  wr_shut, fin_sent, rd_shut, eof;
};

/* struct tp_stats as it lives in the host table (an entry's stats, or a connection's
 * local_stats): the same fields, _Atomic. Each has one writer (the holder of tx_lock for tx_*
 * and retransmits, of rx_lock for rx_* and crc_errors, the timers for the fill levels) and is
 * read unlocked by tp_conn_stats() and tp_stat_list(): relaxed on both sides (TP_STAT_ADD,
 * TP_STAT_SET, tp_stats_load()). */
struct tp_stats_sh {
	_Atomic uint64_t tx_bytes, rx_bytes;
	_Atomic uint64_t tx_msgs_inline, tx_msgs_short, tx_msgs_long;
	_Atomic uint64_t rx_msgs_inline, rx_msgs_short, rx_msgs_long;
	_Atomic uint64_t retransmits, crc_errors;
	_Atomic uint32_t tx_queue_fill, rx_queue_fill;
	_Atomic uint64_t tx_full;
};
static_assert(sizeof(struct tp_stats_sh) == sizeof(struct tp_stats) &&
	      offsetof(struct tp_stats_sh, tx_full) == offsetof(struct tp_stats, tx_full),
	      "the host table's statistics keep struct tp_stats's layout");

struct tp_host_entry {
	uint32_t state;
	_Atomic int32_t pid;   /* owner (CONNECTING/OPEN), 0 for PENDING */
	int32_t  owners[4];    /* processes sharing it (fork); dead ones are dropped */
	_Atomic uint32_t refs; /* processes holding a copy (fork adds one, export/adopt keep it) */
	_Atomic int32_t active; /* pid of the one process that drives it, 0: nobody since the
				* last fork (single-owner rule, see the header comment) */
	_Atomic uint64_t fork_ms; /* last fork of an owner: the child may not be listed yet */
	_Atomic int32_t fd;    /* informational (tp_conn_set_owner); with pid, copied by a
				 * move's helper while the program sets them: relaxed;
				 * TP_ENT_FD_CLOSED once its program closed it (lingering) */
	uint32_t role;         /* 0 client, 1 server, TP_ROLE_OFFER: an offer (PENDING) */
	struct tp_key key;
	uint32_t nonce;        /* ours: seeds what the peer writes into this slot */
	uint32_t peer_slot, peer_nonce;
	_Atomic uint32_t st_out; /* ST flags written into the peer's slot so far: they only
				* accumulate, whichever process of this host writes (tp_ent_st_add()).
				* (Offset 100, before the 8-aligned peer_slot_off: static_assert
				* below.) */
	uint64_t peer_slot_off; /* window offset of the peer's slot (64 bits: windows > 4 GiB) */
	uint32_t peer_inline_n, peer_qsize;
	uint32_t msgid, pri, epoch;
	uint32_t peer_epoch;   /* the peer's ntb session when set up */
	_Atomic uint32_t result; /* client: 0 waiting, TP_PKT_ACK, TP_PKT_NACK */
	_Atomic uint32_t result_reason; /* written with result (relaxed, before it) */
	uint64_t created_ms, released_ms;
	struct tp_stats_sh stats;
	struct tp_export ex;   /* connection state handed across exec (tp_conn_export) */
	/* the table's indexes (tp_host_index.c), under the host lock: entry number + 1, 0 = end */
	uint32_t free_next;    /* FREE: the next one released after it */
	uint32_t peer_next;    /* server (role 1): the next in its peer_slot's bucket */
	uint32_t key_next;     /* server (role 1): the next in its key's bucket */
	/* Transfer contexts (tp_ring.c). Written by the connection's owner (single-owner rule:
	 * they survive exec and fork with the entry), ring also under the host lock (the pool's,
	 * and tp_slot_free() returns it). Receiver: our pool's ring granted to the peer's sender
	 * (index + 1, 0: none), the generation of the last grant made, when, whether it was asked
	 * back, the peer's last request answered and the answer as written (RANS). */
	uint32_t ring, ring_gen;
	uint64_t ring_ms;
	uint32_t ring_yield;
	uint32_t rq_ans, rans;
	/* Sender: the peer's pool, the ring we write (index + 1, 0: none) and its generation,
	 * whether the peer asked it back, our last request (number, CnctPRI; open: not answered
	 * with a grant yet) and the generation we gave back last. */
	uint64_t peer_pool_off;
	uint32_t peer_pool_n;
	uint32_t peer_ring, peer_ring_gen, peer_yield;
	uint32_t rq, rq_pri, rq_open, ret_gen;
	/* Both sides agreed at set-up that the stream is framed (TP_APPLY_FRAMED: tp_stripe.c) */
	uint32_t framed;
	/* Client: its set-up sleeps for the answer, counted in the host's mbox_sleepers (freed
	 * with the slot, so that a process that died asleep does not keep it counted) */
	uint32_t asleep;
	uint32_t reserved_framed;
};

/* TP_HOST_VERSION 4: peer_slot_off of 64 bits; 5: the mailbox's last valid consumer index;
 * 6: tp_stats.tx_full, the link's totals (struct tp_host_totals); 7: the indexes (free queue,
 * server entries by peer slot and by key); 8: transfer contexts (the pool, the entries' ring
 * fields); 9: framed (tp_stripe.c); 10: mbox_sleepers; 11: e_used (entries above it not cleared); 12: maint_ms;
 * 13: offers (role TP_ROLE_OFFER, the offer_* fields); 14: lock_pid; 15: the owners' registry
 * and the reclaim's walk in parts (procs, procs_over, reclaim_*) */
static_assert(offsetof(struct tp_host_entry, fork_ms) == 32, "host entry layout");
static_assert(offsetof(struct tp_host_entry, peer_slot_off) % 8 == 0, "host entry layout");
static_assert(offsetof(struct tp_host_entry, st_out) == 100 &&
	      offsetof(struct tp_host_entry, peer_slot_off) == 104, "host entry layout");

struct tp_host_listen {
	int32_t  pid;
	uint16_t port;
	uint16_t count; /* references, or TP_LISTEN_VETO */
};
/* An entry whose count is this vetoes its port for the host while its pid lives
 * (tp_listen_veto()): not published, Applies for it refused. */
#define TP_LISTEN_VETO 0x8000u
static inline bool tp_listen_refs(const struct tp_host_listen *e)
{
	return e->count && !(e->count & TP_LISTEN_VETO);
}

/* Per-link counters of this host (tp_link_stat()): the counters of connections whose slot was
 * freed are added in at tp_slot_free() (under the host lock); failovers by an atomic add
 * (host-local memory: several processes of this host may move connections at once). */
struct tp_host_totals {
	_Atomic uint64_t setups;
	_Atomic uint64_t tx_bytes, rx_bytes, transfers, congestion;
	_Atomic uint64_t failovers;
	_Atomic uint64_t expansions; /* stripes set up onto this link (tp_stripe.c) */
};

struct tp_host {
	_Atomic uint64_t magic;
	uint32_t version, size;
	uint32_t contexts, session_epoch;
	uint32_t inline_n, qsize, slot_size; /* geometry of this side's slots: first opener's */
	uint64_t pool_off;     /* and of its pool of transfer contexts (pool_n rings of qsize) */
	uint32_t pool_n;
	pthread_mutex_t lock;
	/* the process that holds lock (0: none, or it died in it), written by its holder right
	 * after taking it and before releasing it: read without the lock (relaxed) by a waiter
	 * that waited long, to tell a holder that is stopped (tp_host_lock_within()) */
	_Atomic int32_t lock_pid;
	/* everything below under lock */
	uint32_t peer_epoch;   /* peer session the mailbox indices belong to */
	_Atomic uint32_t free_num; /* written under lock, read unlocked (tp_link_load()) */
	uint32_t rcxt_pri;
	uint32_t msgid_next;
	uint32_t mbox_prod;    /* packets we wrote into the peer's mailbox */
	uint32_t mbox_cons;    /* packets we consumed from ours */
	uint32_t mbox_peer_rx; /* the peer's consumer index of its mailbox, as last read valid
				* (MBOX_RX): its slots beyond are not known to be free */
	uint32_t mbox_sleepers; /* our set-ups asleep for an answer (MBOX_RING, as last written) */
	uint32_t listen_pub[TP_LISTEN_WORDS]; /* bitmap as last published */
	struct tp_host_listen listen[TP_MAX_LISTEN];
	struct tp_host_totals totals;
	/* tp_host_index.c: the FREE entries in the order they were released (number + 1, 0 =
	 * none); the heads of the two hash indexes follow e[contexts] */
	uint32_t free_head, free_tail;
	/* Entries e[0 .. e_used) were handed out in this session (cleared then); the others were
	 * never used in it and are not cleared (garbage of an earlier session): free, ahead of the
	 * queue (never released, so released longest ago), and no walk looks at them
	 * (tp_host_used()). A session's first process cleared the whole table before (1.7 MB for
	 * 4096 entries: a third of a short-lived client's CPU time under the library). */
	_Atomic uint32_t e_used; /* written under lock, read also without it (tp_stat_list()) */
	/* When a process of this host last did the link's maintenance (link_service(): reclaim,
	 * republication), tp_now_ms(); set at the session's start (nothing to reclaim yet). One
	 * pass per 500 ms for the host, by whichever helper comes first: a short-lived process
	 * does none while others do, yet a session kept alive only by short-lived processes still
	 * gets its passes. */
	uint64_t maint_ms;
	/* Offers (tp_offer.c), in the peer session peer_epoch. Server half: offers published
	 * (OFFER_TX), the peer's consumer index as last read valid, the entry of each record.
	 * Client half: the peer's offers we took (OFFER_RX), and set-ups that claimed one
	 * (a counter for display). */
	uint32_t offer_prod, offer_peer_rx;
	uint32_t offer_slot[TP_OFFER_SLOTS];
	uint32_t offer_cons;
	_Atomic uint64_t offer_claims;
	_Atomic uint32_t offers_held; /* our entries offered, unclaimed (role TP_ROLE_OFFER): free
				       * for a connection's purposes (tp_host_free_conns()) */
	/* The pool of transfer contexts (tp_ring.c), under lock: free rings (a stack: the one
	 * freed last is reused first, its pages warm), RCxtFreeNum (pool_free, also read
	 * unlocked), RCxtPRI, and when a request was last refused (unlocked, relaxed: others wait,
	 * grants older than a quantum are asked back) */
	uint32_t pool_top;
	_Atomic uint32_t pool_free;
	uint32_t pool_pri;
	_Atomic uint64_t pool_refused_ms;
	_Atomic uint64_t pool_grants, pool_refusals, pool_yields; /* counters for display */
	uint16_t pool_stack[TP_MAX_CONTEXTS];
	/* The maintenance pass's reclaim (tp_host_reclaim_tick()), under lock. The processes that
	 * own entries (tp_host_proc_note(): each process that writes itself into an entry's
	 * owners), looked at once per pass: a death among them starts a walk of every entry, and
	 * otherwise the pass walks TP_RECLAIM_PART entries from reclaim_next on (the backstop:
	 * set-ups that expired, owners that the registry missed). procs_over: an owner did not fit
	 * (every pass walks every entry until one walk finds room for them all). reclaim_pe and
	 * reclaim_hpe: the peer sessions (the link's, peer_epoch) of the last whole walk; either
	 * changed starts one (a peer session's set-ups end with it). */
	int32_t procs[TP_HOST_PROCS];
	uint32_t procs_over;
	uint32_t reclaim_next;
	uint32_t reclaim_pe, reclaim_hpe;
	/* tp_now_ms() after which a whole walk is due again (0: none): an entry whose owners all
	 * died was kept for the fork grace (TP_FORK_GRACE_MS) */
	uint64_t reclaim_again_ms;
	struct tp_host_entry e[];
};

/* How many of H's entries a walk looks at: those handed out in this session (e_used), never
 * more than the table holds. Acquire: pairs with the release store in tp_hidx_free_pop() (a
 * reader without the host lock, tp_stat_list(), sees the entry cleared). */
static inline uint32_t tp_host_used(const struct tp_host *h)
{
	uint32_t n = atomic_load_explicit(&h->e_used, memory_order_acquire);

	return n < h->contexts ? n : h->contexts;
}

/* Connection slots of H that no connection holds: free, or offered (tp_offer.c). Relaxed: a
 * hint read without the host lock (tp_link_load()), exact under it. */
static inline uint32_t tp_host_free_conns(const struct tp_host *h)
{
	return atomic_load_explicit(&h->free_num, memory_order_relaxed) +
	       atomic_load_explicit(&h->offers_held, memory_order_relaxed);
}

/* --- process-local state ------------------------------------------------------------------ */
struct tp_geom {
	uint64_t slot_off;        /* window offset of the slot: may pass 4 GiB */
	uint32_t inline_n, log2n, qsize;
	uint64_t pool_off;        /* the pool of transfer contexts: pool_n rings of qsize bytes */
	uint32_t pool_n;
};

struct tp_link {
	struct ntb_link *ntb;
	struct tp_params params;
	struct tp_host *host;
	size_t host_size;
	int host_fd;
	atomic_bool host_lost_logged; /* tp_host_lost() said so once */
	bool host_in_place;       /* tp_host_open(): an earlier session's table in use that
				   * could not be replaced is rebuilt under its processes */
	const volatile uint8_t *in;
	uint8_t *out_direct;      /* ntb_out_direct(): plain stores into the peer window, or NULL */
	/* Parts of pool rings whose pages this process mapped ([0]: the peer's, that we write
	 * into; [1]: ours), TP_RING_PARTS bits per ring, bits from (r - 1) * TP_RING_PARTS for ring
	 * r (tp_link_ring_prefault()): once per part and process, not per grant, and only the
	 * parts a connection's messages reach (a short connection maps one, not the ring). */
	_Atomic uint64_t ring_mapped[2][TP_MAX_CONTEXTS * TP_RING_PARTS / 64u];
	/* The claim slot under which this process published its event fd on this link (FB_WAIT's
	 * TP_FBW_EVENT), -1: none (not possible), -2: not tried yet (tp_link_ev_slot()) */
	_Atomic int ev_slot;
	size_t in_size, out_size;
	struct tp_geom geom;      /* our slots' geometry */
	uint32_t slot_size;       /* (< 4 GiB: 65536 inline slots are 8 MiB; offsets of slots are
				   * 64-bit: tp_slot_off()) */
	uint32_t contexts;        /* connection slots (the host table's entries); the pool of
				   * transfer contexts is geom.pool_n rings at geom.pool_off */
	struct tp_link *next_link; /* process list */
	pthread_mutex_t conns_lock;
	struct tp_conn *conns;     /* process-local list, for timers */
	struct tp_conn *conn_cache; /* freed connections kept for reuse (conns_lock; tp_conn.c) */
	/* Data shadows kept for reuse (tp_shadow_get(); under SH_LOCK, a leaf lock): SH_POOL_N of
	 * SH_POOL_Q bytes each, SH_POOL_USED since the last trim. */
	pthread_mutex_t sh_lock;
	struct tp_shadow_free *sh_pool;
	uint32_t sh_pool_n, sh_pool_q;
	bool sh_pool_used;
	uint32_t conn_cache_n;
	bool conn_cache_used;       /* a set-up drew from it since the last trim */
	atomic_bool lingering;      /* closed connections wait for the helper: it comes every 5 ms */
	/* tp_now_ms() when a set-up last found the host lock held past TP_HOST_WAIT_MS (a process
	 * of this host stopped inside it: SIGSTOP, a debugger); 0: never. Within
	 * TP_HOST_BUSY_MS of it set-ups only try the lock (tp_connect.c). Relaxed: a hint. */
	_Atomic uint64_t host_busy_ms;
	/* a forked child's name among its inherited connections' holders is still to be added
	 * (its fork found the host lock held by a stopped process: tp_link.c) */
	atomic_bool owners_due;
	/* How long this link's receivers take to acknowledge, µs: a running mean (1/8) of
	 * tp_tx_ack_sample()'s samples of every connection; relaxed, a hint (tp_quick_base_us()) */
	_Atomic uint32_t ack_us;
	atomic_bool probe_soon;     /* a sleeper has unacknowledged data: the helper comes every
				     * TP_QUICK_PROBE_MS (tp_tx_timers()' quick probes) */
	atomic_bool pass_busy;      /* a pass over conns runs (helper, or a set-up short of slots) */
	atomic_int held_conns;      /* connections of this process holding a merged message: the
				     * helper flushes them when the peer rings (tp_tx_flush_held()) */
	uint64_t last_maint_ms, last_mbox_ms, last_timers_ms;
	uint64_t last_short_reclaim_ms; /* tp_host_reclaim_if_short() (under the host lock) */
	bool mbox_missed;          /* the helper found the host lock taken: retry soon (tp_link.c) */
	uint32_t db_seen;
	uint32_t db_early;   /* the doorbell as the helper's early look read it (tp_link.c) */
	int refs;
	atomic_bool up;             /* up, or down for less than down_grace_ms (helper's view) */
	/* its connections are lost: down past the grace, or only silent (stale heartbeat, see
	 * ntb_link_peer_silent()) for longer than peer_timeout_ms (tp_link_refresh()) */
	atomic_bool lost;
	_Atomic uint32_t peer_epoch; /* last non-zero peer session seen */
	_Atomic uint64_t down_since_ms; /* 0 while up */
	uint32_t down_grace_ms;
	char admin_path[300];        /* <link file>.admin-down: exists while `ntbsock link down` */
	atomic_int listening;        /* tp_listen() minus tp_unlisten() here: the helper sleeps on
				      * the doorbell of a link with listeners (Applies to answer) */
	atomic_bool self_rung;       /* tp_link_set_self_rung(): else not slept on */
	atomic_bool admin_down;      /* as last seen (helper, every 100 ms) */
	atomic_bool region_bad;      /* the mapping no longer is the link (file truncated, removed
				      * or replaced: ntb_link_check_mapping()): lost at once, sticky */
	uint64_t admin_ms;
	_Atomic uint64_t admin_look_ms; /* a set-up's last look at the flag (tp_connect()) */
	_Atomic bool balance;        /* tp_link_set_balance(): framed connections (tp_stripe.c) */
	unsigned group;              /* links to the same peer host share it (tp_link_set_group());
				      * 0: none. A connection moves among them (tp_failover.c).
				      * Under tp_group.c's g_group_lock */
	/* The connections a pass visits (tp_active.c, which has the table of who writes what) */
	pthread_mutex_t act_lock;    /* the active list's links (a leaf: nothing taken under it) */
	struct tp_conn *act_head;    /* the active list: connections that may have timer work */
	struct tp_act_idle *act_idle; /* the ones taken off it, with what the scan compares */
	uint32_t act_idle_n, act_idle_cap;
	atomic_bool act_scan;        /* the doorbell rang: a pass scans the idle ones */
	uint64_t act_scan_last;      /* the last scan (conns_lock) */
	uint64_t act_sweep_last;     /* the last full pass (conns_lock) */
	uint32_t act_sweep_ms;       /* a full pass at least this often (0: only for link events) */
	uint32_t act_epoch;          /* the peer session of the last full pass (conns_lock) */
	uint64_t act_visits;         /* connections visited by passes so far (conns_lock) */
	uint64_t act_refused;        /* the host's pool_refused_ms at the last pass (conns_lock) */
};

/* Window offset of slot SLOT of L's geometry (ours: the same in the peer's window for the
 * peer's slots only when its geometry is ours; a peer's slot offset comes from its packets).
 * 64 bits: contexts × slot_size passes 4 GiB in a window above 4 GiB. */
static inline uint64_t tp_slot_off(const struct tp_link *l, uint32_t slot)
{
	return TP_OFF_SLOTS + (uint64_t)slot * l->slot_size;
}

/* Largest window the transport drives (ntb/ allows as much): every offset and end computed
 * within it fits in 64 bits with room to spare. */
#define TP_WINDOW_MAX     (UINT64_C(1) << 40)

struct tp_rec {          /* a validated inbound message, private copy */
	uint32_t msn, len, pos, payload; /* pos: ring position (inline index or data offset) */
	uint32_t footprint;
	uint8_t  ring, flags; /* ring 0 inline, 1 data */
	uint8_t  type;
	struct tp_desc desc;  /* data ring: private copy of the descriptor */
};
#define TP_RECS 1024u
#define TP_STALE_MAX 8u /* stale first-lap slots noted per connection (0 expected) */
#define TP_SPIN_ACTIVE_US 300 /* spin budget of a streaming connection (tp_wait) */
#define TP_SPIN_LOST_MAX 2u   /* ... not after this many of its waits in a row spun it out */

/* Connections in a failover one pass drives with conns_lock released (tp_link.c); more wait
 * for the next pass. */
#define TP_PASS_PINS 256
/* This thread runs a pass over a link's connections holding its conns_lock: a failover started
 * there makes progress only in the pass's second part, or the next pass (tp_conn_timers()). */
bool tp_link_pass_locked(void);
/* A walk of L's connections at exit (tp_exit.c), made as a pass is: tp_walk_begin() takes the
 * pass (exclusive with the helper's) and conns_lock, both without waiting (false: busy, look
 * again); in the walk, timers leave failovers to after the lock and tp_walk_pin() pins a
 * connection in one into PINS (TP_PASS_PINS; false: full); tp_walk_unlock() releases
 * conns_lock, after which the pinned ones may be driven (they are not released meanwhile);
 * tp_walk_end() unpins them and ends the pass. */
bool tp_walk_begin(struct tp_link *l);
bool tp_walk_pin(struct tp_conn *c, struct tp_conn **pins, int *npins);
void tp_walk_unlock(struct tp_link *l);
void tp_walk_end(struct tp_link *l, struct tp_conn **pins, int npins);

struct tp_conn {
	struct tp_link *link;
	struct tp_conn *next;     /* link->conns */
	uint32_t slot;            /* our receive slot */
	struct tp_host_entry *ent;
	struct tp_geom out;       /* peer slot geometry */
	uint64_t news_out;        /* our NEWS word in the peer's window (tp_news_off()), 0: none */
	uint32_t news_slot;       /* (the peer's slot of it: tp_news_write()) */
	uint32_t news_msn;        /* the msn_next of the last NEWS word written, if NEWS_DONE */
	bool news_done;
	uint32_t nonce_in, nonce_out, seq_base_in, seq_base_out;
	uint32_t peer_epoch;
	atomic_int error;         /* 0 or -errno */
	atomic_bool closed;       /* tp_close() called; helper finishes */
	atomic_bool peer_died;    /* its process died: its TCP socket ended (tp_witness_look()) */
	atomic_bool silent_alive; /* a look found it alive while its host was silent: its writes
				   * were not arriving, so a death that follows may have lost some */
	atomic_bool peer_gone;    /* the peer is lost (tp_conn_peer_lost() once said yes, or a
				   * send found it so, or its witness): it stays lost */
	/* The kernel TCP socket beside the connection (tp_conn_set_witness()): fd + 1 (0: none)
	 * and its inode. Looked at only while the peer is silent: end of stream or a reset
	 * there means the peer process is gone (its kernel closed the socket), not stopped. */
	_Atomic int witness_fd1;
	_Atomic uint64_t witness_ino;
	_Atomic uint64_t witness_ms; /* last look (helper, wait loops: whoever runs the timers) */
	/* held across a look (tp_witness_look(): fstat, recvfrom, fstat) and by whoever changes the
	 * witness (tp_conn_set_witness(), tp_close(), tp_abort()): a caller that closes the
	 * descriptor afterwards (preload's close()) knows no look is still using it */
	struct tp_mutex witness_lock;
	/* The witness in the process's epoll set of witnesses (tp_fo_watch.c), for a peer's
	 * failover header: added TP_WATCH_DELAY_MS after it is set (watch_due_ms, 0: none
	 * pending; written under witness_lock, read by passes), so that a connection that lives
	 * less costs neither epoll_ctl; fo_watched: it is in the set (witness_lock) */
	_Atomic uint64_t watch_due_ms;
	bool fo_watched;
	/* The writer's half of the witness (tp_witness.c: tp_witness_rst()): while bytes we sent
	 * wait and the receiver does not answer our probes, our kernel socket has SO_LINGER
	 * {1, 0}, so that our process's death resets it rather than closing it cleanly (a peer
	 * behind a silent link then reads a reset, not a short end of stream). rst_armed: written
	 * under witness_lock (a relaxed load elsewhere is a hint, checked again under it);
	 * rst_saved: the program's own SO_LINGER, put back when disarmed (witness_lock). */
	_Atomic bool rst_armed;
	bool rst_off;             /* a failover carries the stream over the socket: never armed
				   * again (witness_lock) */
	struct linger rst_saved;
	_Atomic bool owned;       /* this process drives it (ent->active is our pid): only then
				   * do its timers, feedback and Detect run here (tp_conn_own) */
	uint64_t closed_ms;
	uint32_t release_fl;      /* ST flags a pass found for its release (tp_conns.c) */
	bool share_only;          /* closed here while others hold it and the host lock's holder
				   * was stopped: a pass releases only our share (tp_close.c) */
	/* client: when tp_conn_commit() wrote COMMIT; the timers write the ST word again while
	 * the server may still wait for it (a faulty link loses or spoils writes): 0 after that */
	_Atomic uint64_t commit_ms;
	_Atomic uint64_t commit_rep_ms; /* the last of those writes */
	bool fin_nudged;           /* the peer was rung for a FIN unacknowledged after
				    * TP_FIN_NUDGE_MS (helper's pass) */
	/* (conns_lock) a pass drives its failover with conns_lock released: the pass's thread
	 * (its token) and the connection's entry in the pass's list; tp_conn_unregister() waits
	 * for the pass, or in the pass's own thread drops the entry */
	const void *pin_owner;
	struct tp_conn **pin_slot;
	struct tp_conn *prev;      /* link->conns, the other way (conns_lock): O(1) removal */
	/* Timer activity (tp_active.c): on the link's active list (or a pass's) while the timers
	 * may have work for it; taken off by a pass that finds none */
	atomic_bool act_on;        /* listed (or visited by a pass): the exchange false -> true
				    * decides who links it */
	atomic_bool act_hold;      /* closing (tp_close()): never taken off again */
	bool act_listed, act_dead; /* on the link's active list; unregistered (act_lock) */
	struct tp_conn *act_next, *act_prev; /* the active list (act_lock), or a pass's own */
	uint32_t act_ix;           /* its entry in link->act_idle + 1, 0: none (conns_lock) */
	uint32_t act_visits;       /* passes that visited it (conns_lock; tests) */
	_Atomic uint64_t last_wake_ms; /* last tp_wait() that found the connection ready */
	_Atomic uint8_t spin_lost;     /* tp_wait()s in a row that spun their budget out and slept
				        * (up to 2) */
	bool released;
	/* --- send side (tx_lock) */
	struct tp_mutex tx_lock;
	uint32_t msn_next, tx_i, tx_d;
	uint32_t tx_d_pub;        /* tx_d as last published */
	uint32_t tx_pf;           /* the window's data-ring lines were asked for up to here
				   * (tp_tx_prefetch(); a hint, any value is safe) */
	uint32_t fb_rx_i, fb_rx_d, fb_ack;
	uint16_t tx_epoch, detect_seq;
	uint8_t *sh_inline, *sh_data;
	struct ntb_dmaq *dmaq;    /* long payloads (NULL: CPU copy) */
	bool wr_shut, fin_sent;
	uint32_t tx_wait_v;       /* TX_WAIT's TP_TXW_* bits as written (tp_set_tx_wait()) */
	uint32_t fin_msn;
	uint32_t terr;
	uint32_t quick_n;          /* quick probes since the last progress (tp_tx_timers()) */
	uint64_t quick_ns;         /* CLOCK_MONOTONIC (ns) they count from: the last progress or
				    * retransmission (tp_quick_base_us() apart, doubling) */
	uint32_t ack_us;           /* the link's ack_us for this connection alone, 0: no sample */
	uint32_t ack_msn;          /* the message timed for ack_us (tp_tx_timers_start()) ... */
	uint64_t ack_stamp_ns;     /* ... sent then (CLOCK_MONOTONIC); 0: none timed (or its time
				    * void: a probe or a retransmission came since, Karn) */
	uint32_t det_backoff;      /* Detects answered without progress in a row */
	uint16_t det_acked;        /* the last Detect sequence the receiver's feedback echoed */
	uint64_t last_ack_ms, last_tx_pub_ms;
	uint64_t progress_ms;     /* the receiver's feedback last moved (tp_tx_feedback()) */
	bool tx_dirty;
	bool tx_faulted;          /* the data ring's pages, window and shadow, mapped: tp_tx_prefault() */
	bool tx_ring_mapped;      /* (the window's parts of it, for this grant) */
	uint64_t sh_mapped;       /* chunks of sh_data mapped (tp_tx_prefault()) */
	/* the data ring granted to us (tp_ring.c; mirrors ent->peer_ring*): its window offset,
	 * the CRC seed of its messages (tp_ring_seed()); usable: granted and not asked back */
	uint64_t out_ring_off;
	uint32_t dseed_out;
	bool out_ring_ok;
	bool rq_nacked;           /* our last request was refused: the timers ask again */
	bool rq_claim;            /* a claimed offer's grant may come (tp_offer.c: the Claim asked
				   * for a ring, request TP_OFFER_RQ, answered at once or never):
				   * the feedback takes it; no request is open (nothing repeats it,
				   * an idle connection has no timer work), a write that wants a
				   * ring first asks anew */
	uint32_t rq_nacks;        /* refusals of this transfer's asks (their interval doubles) */
	uint64_t rq_ms;           /* when it was made */
	size_t rq_inline_bytes;   /* sent through the inline slots for want of a ring */
	uint64_t ret_ms;          /* when we last gave a ring back (tp_tx_ring_want()) */
	bool ret_rung;            /* its RING_RET repeated with the doorbell (tp_tx_ring_timers()) */
	bool rq_deferred;         /* an ask held back for a quantum after that: the timers ask */
	uint64_t hold_ms;         /* since when large writes wait for a ring (tp_tx_ring_hold_big()) */
	/* epoch_unconfirmed's copy for the helper's look on a doorbell without the tx lock
	 * (tp_tx_epoch_again()): relaxed, a hint */
	atomic_bool epoch_hint;
	/* A Retry seen without its positions (FB_RETRY_EP not its epoch): put off until the
	 * receiver's re-ask brings them, since retry_wait_ns (tp_retx.c: retry_put_off()) */
	bool retry_wait;
	uint16_t retry_wait_ep;
	uint64_t retry_wait_ns;
	atomic_bool retry_wait_hint; /* retry_wait's copy for tp_tx_retry_check() (relaxed) */
	bool epoch_unconfirmed;   /* a retransmit()'s epoch word may have been lost: tp_tx_publish()
				   * writes it again beside TX_D until the receiver acknowledges
				   * epoch_msn (msn_next at that retransmit()) */
	uint32_t epoch_msn;
	uint32_t epoch_db;        /* the doorbell when that epoch word was last written */
	uint32_t sel_d, sel_i;    /* the positions the last selective retransmit() rewrote */
	bool sel_valid;
	uint8_t sel_repeat;       /* ... rewritten again that many times in a row */
	bool retry_pos_ok;        /* the Retry being answered came with its positions
				   * (FB_RETRY_EP its epoch: retry_put_off()) */
	/* The raw FB epoch word at the last feedback read (fb_ep_read: there was one). A new
	 * value that fails its check was written by the receiver and spoilt by the link (a Retry,
	 * probably): a Detect at once makes the receiver write every feedback word again
	 * (tp_tx_feedback()), instead of its re-ask TP_REASK_US later. */
	uint64_t fb_ep_raw;
	bool fb_ep_read;
	uint32_t tx_fresh_sends;  /* tp_send() calls since the feedback and ST words were read */
	size_t tx_last_len;       /* bytes the last tp_send() call was given (poll_bits()) */
	uint64_t tx_rx_seen;      /* st->rx_bytes at the end of the last large tp_send() */
	uint64_t tx_seen_st;      /* raw ST and FB epoch words at that read (tx_stale()) */
	_Atomic uint64_t tx_seen_ep;
	uint32_t tx_after_close;  /* sends after the peer closed in order and went away (tp_send()) */
	_Atomic uint32_t tx_cap;  /* data bytes in flight at most (SO_SNDBUF); 0: the ring's size */
	/* Merging of small writes (tp_tx_merge.c: tp_tx_merge()): the last data-ring message, at held_pos
	 * with held_len payload bytes whose CRC so far is held_crc, is written to the window and
	 * the shadow but not published (TX_D stays at tx_d_pub) while the receiver has not
	 * consumed what was published before it; later small writes append to it. Whatever
	 * publishes TX_D (tp_tx_publish()) ends the hold. */
	_Atomic bool held;
	uint32_t held_pos, held_len, held_crc;
	_Atomic bool tx_streak;   /* no read on this connection since the last send (a stream,
				   * not a request awaiting its answer): written by the receive
				   * side, read by tp_send(); a hint (relaxed) */
	/* --- receive side (rx_lock) */
	struct tp_mutex rx_lock;
	uint32_t v_i, v_d, v_msn;     /* validation cursor */
	uint32_t rx_txd;              /* TX_D as last read valid (tp_rx.c: rx_txd()) */
	uint32_t rx_spec_miss;        /* v_d where a descriptor naming the next MSN did not check
				       * out before TX_D (tp_recv.c: rx_short_direct()) ... */
	bool rx_spec_missed;          /* ... when set: there, TX_D first until v_d moves */
	bool rx_dry;                  /* rx_short_direct()'s last look found nothing published:
				       * TX_D first at the next */
	uint32_t rx_grant_vd;         /* v_d when the ring was granted (or adopted) ... */
	bool rx_lapped;               /* ... and v_d a whole ring past it since: every place in
				       * the ring holds this grant's bytes, no earlier holder's
				       * descriptor (tp_rx_lapped()) */
	uint8_t rx_unpub;             /* TP_UNPUB_*: a message at rx_unpub_vd written and not
				       * published, checked (tp_rx_unpublished_next()) */
	bool rx_unpub_from0;          /* such a message taken at v_d 0 (tp_rx_death_end()) */
	uint32_t rx_unpub_vd;
	uint32_t c_i, c_d;            /* consumed (released) cursor */
	uint32_t pub_i, pub_d;        /* released as last published */
	uint32_t pub_ack, pub_ep;     /* CmpAck and epoch word as last published */
	bool rx_turn;                 /* a read or a wait for input came after a send of ours,
				       * and no read caught up since (tp_rx_release_turn()) */
	bool rx_first;                /* no read caught up yet (tp_conn_new()) */
	uint64_t pub_tick;            /* clock_ticks() at the last publication */
	uint16_t rx_epoch, det_seen;
	bool gated, rx_wait_set, rd_shut, eof, fb_dirty;
	/* FB_WAIT asks for TP_FBW_DIRECT or TP_FBW_WORD (that bit; 0: neither) (tp_set_wait_direct()) */
	uint8_t rx_wait_direct;
	uint16_t rx_direct_n;         /* threads in tp_wait_one()'s sleep on their word or the direct
				       * doorbell (tp_rx_wait_clear() leaves their request to the last) */
	/* with rx_wait_set: the ring asked for is TP_FBW_EVENT to this claim slot; -1: RING */
	int16_t rx_wait_slot;
	bool rx_news;                 /* FB_WAIT asks for NEWS (tp_rx_news_arm()), for good */
	/* A release published while the sender held a merged message (TX_WAIT HELD alone) owes
	 * it a ring once we wait for data or find none for a while (tp_rx_idle()); owe_vi/vd:
	 * the validation cursor then (its next message clears the debt); owe_idle_ns: the first
	 * look that found nothing after it (0: none yet). */
	bool held_owe;
	uint32_t owe_vi, owe_vd;
	uint64_t owe_idle_ns;
	_Atomic bool fin_rcvd_v;     /* validation reached the peer's FIN (read by the send side) */
	bool inline_bad;             /* the next inline slot failed its CRC */
	/* First-lap inline positions whose slot, when the connection was set up, held what an
	 * earlier connection of this receive context left there under the sequence byte this
	 * one expects: their last 8 bytes then. Readiness hints and spin probes pass over them
	 * while those bytes stay the same (tp_rx_note_stale()). The nonce a context gets avoids
	 * the bytes its ring holds (tp_host.c: slot_nonce()), so these come only from a write
	 * that arrived after the pick. */
	uint8_t n_stale;
	uint32_t stale_pos[TP_STALE_MAX];
	uint64_t stale_sig[TP_STALE_MAX];
	uint32_t rerr;
	uint64_t gate_deadline_ms;
	/* While gated: the Retry is asked again (the feedback words republished, the doorbell
	 * rung) when the sender is seen writing without having answered it (TX_D moved from
	 * gate_txd, or inline position gate_inl, the first one not published when last
	 * looked, got published), or at gate_reask_ns (CLOCK_MONOTONIC), an interval that
	 * doubles from TP_REASK_US */
	uint64_t gate_reask_ns, gate_txd;
	uint32_t gate_reask_n, gate_inl;
	/* the raw TX epoch word when last looked while gated: a new value that fails its check
	 * (the sender's answer, spoilt by the link) is asked again at once (rx_gated()) */
	uint64_t gate_ep_raw;
	struct tp_rec recs[TP_RECS];
	uint32_t rec_head, rec_tail; /* free-running */
	uint32_t rec_off;            /* bytes consumed of recs[rec_head] */
	uint32_t rec_bytes;          /* sum of (len + 1) over queued records */
	uint32_t rec_skip;           /* adopted / rewound: bytes of the next record consumed */
	/* A data record read in parts (small buffer, peek) is copied here whole, CRC-checked on
	 * that copy, and served from it (the window may change after validation: rule 3.4).
	 * Allocated on first use (at most the data ring size), freed by tp_conn_free_queues(). */
	uint8_t *rx_bounce;
	uint32_t rx_bounce_cap;
	uint32_t rx_bounce_pos, rx_bounce_msn; /* the record it holds, when rx_bounce_ok */
	bool rx_bounce_ok;
	/* the next validation of a data message at the queue's head copies it into rx_bounce
	 * (a read smaller than it is waiting: its checked copy there is the validation) */
	bool rx_bounce_want;
	uint64_t rx_checks;           /* data messages checked without a copy (validated ahead of the
				      * read that copies them: a second pass; for tests) */
	bool rx_faulted;             /* the inbound data ring's pages mapped (tp_rx_data()) */
	/* the ring of our pool granted to the peer (tp_ring.c; mirrors ent->ring): NULL none;
	 * the CRC seed of its messages; the raw request word as last looked at */
	const volatile uint8_t *in_ring;
	uint32_t dseed_in;
	uint64_t rq_raw;
	/* The head inline record's slot as validated (private copy, rx_lock): served from here so
	 * that it is copied out of the window and CRC-checked once (rec_copy(), rule 3.4). */
	bool inl_hold_ok;
	uint32_t inl_hold_pos, inl_hold_msn;
	uint8_t inl_hold[128];
	struct tp_stats_sh local_stats; /* when ent is NULL */
#define TP_WCACHE 48
	_Atomic uint64_t wc_raw[TP_WCACHE]; /* last valid raw checked word per slot word (ST/FB/TX) */
	struct tp_stats_sh *st;
	/* --- failover to the kernel TCP socket (tp_failover.c; doc/design.md §5.8) */
	uint64_t rx_discarded;       /* bytes consumed without delivery (shut or closed reader) */
	struct tp_fo *_Atomic fo;    /* NULL until a failover is requested; then final (release) */
	_Atomic int fo_state;        /* enum tp_fo_state; the data path's one load */
	int keep_fd;                 /* tp_close(): a private duplicate of the kernel socket kept
				      * while the connection lingers (failover at exit), -1: none */
	uint64_t fo_id;              /* key of the witness in the process's failover epoll set:
				      * set by tp_conn_new() before the connection is registered (the
				      * helper reads it on the list), constant after */
	/* Moved to another link (tp_failover.c): the connection that carries the stream now,
	 * written once (release, under c->fo->lock) and read with acquire by tp_conn_cur(); this
	 * one is then an empty shell the caller's handle still names, and its slot is freed
	 * (slot_gone, written before moved_to) */
	struct tp_conn *_Atomic moved_to;
	atomic_bool slot_gone;
	/* [DRB] balancing (tp_stripe.c): the framed stream this handle carries, over this
	 * connection and its stripe (set at creation, freed with it); framed_part: this
	 * connection carries part of a framed stream (the first or the stripe, or what either
	 * moved to): it moves only to another link, never to the kernel socket, whose program
	 * would read the frames */
	struct tp_stripe *sp;
	bool framed_part;
	/* the framed stream this connection carries part SP_IDX of (0: the connection's own, 1:
	 * its stripe; copied to what it moves to), NULL once its handle is closed. Part 0 goes to
	 * the kernel socket with the stream's tail, unframed (tp_stripe_fo_tail()); part 1 never
	 * does: its loss sends part 0 there */
	struct tp_stripe *sp_of;
	uint8_t sp_idx;
	/* The connection a move went to (tp_failover.c: mv_finish()): the rest of the moved
	 * connection's tail, which goes out before any byte the program sends here (tp_send()
	 * flushes it first, the timers too), and the FIN after it when that writing was shut
	 * (or a shutdown(SHUT_WR) came meanwhile). pre_on: pending (the data path's one load);
	 * the rest under pre_busy (a CAS: one flusher at a time). */
	atomic_bool pre_on, pre_busy, pre_fin;
	uint8_t *pre_buf;
	size_t pre_len, pre_off;
	uint16_t moves;              /* moves to another link that led to this connection (set
				      * before it can fail over; the failover header says it) */
};

/* The connection that carries C's stream: C, or where it moved (every public entry point that
 * takes a connection starts here). */
static inline struct tp_conn *tp_conn_cur(struct tp_conn *c)
{
	struct tp_conn *n;

	/* acquire: pairs with the release store in mv_finish() (tp_failover.c) */
	while (c && (n = atomic_load_explicit(&c->moved_to, memory_order_acquire)))
		c = n;
	return c;
}

/* tp_tcpstat.c */
/* The size of the table of tcp connections (a 128-byte header and TP_TCPSTAT_MAX slots of 128). */
#define TP_TCPSTAT_FILE_SIZE (128u + (size_t)TP_TCPSTAT_MAX * 128u)
/* tp_tcpstat_list() on the table mapped at MAP (SIZE bytes): 0 unless SIZE and the header are
 * ours. Only reads the table, which any process of the host may have written (fuzzed). */
int tp_tcpstat_scan(const void *map, size_t size, struct tp_tcpstat_entry *out, int max);

/* tp_failover.c */
/* The failover header (32 bytes, the first thing a side writes on the kernel socket): 0 and
 * the stream offset of the bytes that follow, or -EPROTO (wrong size, magic, version, CRC).
 * Pure: what another host wrote is only read here (fuzzed). */
int tp_fo_hdr_parse(const uint8_t *b, size_t len, uint64_t *ret_start);
/* The receive side's answer to that header when CONSUMED bytes of the peer's stream were
 * delivered here: 0 and in *RET_SKIP how many of the bytes that follow it we already have, or
 * -EPROTO (a bad header), or -ECONNRESET (it starts beyond CONSUMED: bytes are missing; never a
 * skip that wraps). Pure (fuzzed). */
int tp_fo_rx_skip(const uint8_t *b, size_t len, uint64_t consumed, uint64_t *ret_skip);
/* An OPEN host entry whose connection moved to its kernel socket: result holds this, and
 * result_reason the index of its reason (tp_fo_reason()); both unused once set up. */
#define TP_ENT_MOVED 0x4d4f5644u
/* tp_host_entry.fd of a connection its program closed and that lingers (`ntbsock stat`:
 * "closing", fd shown as -1) */
#define TP_ENT_FD_CLOSED (-2)
const char *tp_fo_reason(uint32_t code);
/* LINKED: moved to another link; C is a shell (c->moved_to carries the stream) */
enum tp_fo_state { TP_FO_NONE = 0, TP_FO_RUN = 1, TP_FO_DONE = 2, TP_FO_FAILED = 3,
		   TP_FO_LINKED = 4 };
/* Ask for C to move to its kernel TCP socket because of WHY (a static string). Lock-free (any
 * thread, any lock held): the work is done by tp_fo_progress(). False when C cannot move
 * (no kernel socket, not ours since a fork, already failed): the caller then ends it with its
 * error, as without failover. */
bool tp_fo_request(struct tp_conn *c, const char *why);
struct tp_fo;
void tp_fo_lock(struct tp_fo *fo);
void tp_fo_unlock(struct tp_fo *fo);
/* Nobody holds C's failover lock (a tp_close() of a connection that moved meanwhile is done
 * with it): true. */
bool tp_fo_idle(struct tp_conn *c);
/* The failover's work, from the timers (helper, wait loops): snapshot, writes, reads. */
void tp_fo_progress(struct tp_conn *c);
void tp_fo_free(struct tp_conn *c);
/* A failover that cannot finish before exit: its kernel socket resets (SO_LINGER 0), so the
 * peer sees ECONNRESET after what it validated, never a short end of stream. */
void tp_fo_abandon(struct tp_conn *c);
/* Add ST flags FLAGS to the peer's ST word of C (tp_ent_st_add() on its host entry). */
void tp_conn_st_add(struct tp_conn *c, uint32_t flags);
/* The witness of C joins (FD >= 0) or leaves (-1) the process's failover epoll set. */
void tp_fo_watch(struct tp_conn *c, int fd);
/* The process's failover epoll set made now if it is not yet (a descriptor the process keeps
 * from then on: made with the first witness, not when the first watch is added later). */
void tp_fo_watch_make(void);
extern _Atomic int tp_fo_active;
void tp_fo_atfork_child(void);
/* A new key for a connection's witness (tp_conn_new(): c->fo_id), never 0. */
uint64_t tp_fo_new_id(void);
/* Helper: ids (c->fo_id) of watched sockets that turned readable since the last call. */
int tp_fo_watched_events(uint64_t *ids, int max);
/* Data (not only an end of stream) waits on C's socket: the peer's failover header. */
bool tp_fo_peer_spoke(struct tp_conn *c); /* failovers running in this process (helper: short slices) */
static inline int tp_fo_get(const struct tp_conn *c)
{
	return atomic_load_explicit(&c->fo_state, memory_order_acquire); /* pairs with fo_set() */
}
/* admin state of a link (`ntbsock link down`): a flag file beside the link file */
bool tp_link_admin_down(struct tp_link *l);
/* tp_link_admin_down() for a set-up: the flag file is looked at again only when the last such
 * look is TP_ADMIN_LOOK_MS old (one lstat() per connection was a tenth of a set-up's system
 * calls); in between, the answer of that look. */
bool tp_link_admin_down_recent(struct tp_link *l);
#define TP_ADMIN_LOOK_MS 10

/* Another link of L's group (the same peer host) that is up and not taken down, the least
 * loaded; NULL when none (tp_group.c). */
struct tp_link *tp_link_alt(struct tp_link *l);
/* The other links of L's group, at most MAX into OUT: how many. */
int tp_link_group_others(struct tp_link *l, struct tp_link **out, int max);
/* A connection that moved to another link gives its slot back (the peer's side gives its own);
 * the object stays, a shell, until its holder closes it (tp_conns.c). */
void tp_conn_free_slot(struct tp_conn *c);

/* tp_connect.c: the client side of a move: a connection under KEY set up on L and committed, for
 * a live connection re-attaching there (TP_APPLY_REATTACH: no listener needed). As
 * tp_connect(). */
int tp_connect_reattach(struct tp_link *l, const struct tp_key *key, int timeout_ms,
			struct tp_conn **ret_conn);

/* tp_host.c */
int tp_host_open(struct tp_link *l, const struct ntb_link_params *lp);
/* tp_host_open()'s check of the table H (SIZE bytes mapped, named PATH in logs), under its
 * flock: a table of another session or layout is rebuilt for L (epoch EPOCH); a live one of this
 * session gives L its geometry, or -EINVAL when that does not fit L's window. Other processes of
 * the host write the table: what it holds is checked here (fuzzed). */
int tp_host_adopt(struct tp_link *l, struct tp_host *h, size_t size, uint32_t epoch,
		  const char *path);
/* tp_stat_list() on one host table mapped at MAP (MAP_SIZE bytes, of side SIDE): the entries to
 * list, the first MAX of them into OUT. Only reads the table (fuzzed). */
int tp_stat_table(const void *map, size_t map_size, int side, struct tp_stat_entry *out, int max);
void tp_host_close(struct tp_link *l);
void tp_host_lock(struct tp_link *l);
bool tp_host_trylock(struct tp_link *l);
/* The host lock, unless its holder is a stopped process: false then. A process stopped while
 * it holds it (SIGSTOP or a debugger stop every thread, its helper's mailbox work included)
 * keeps it for as long as it stays stopped: what need not wait for it (a set-up, which goes
 * tcp instead; the helper's release of closed connections, which comes again) does not. The
 * holder (/proc/PID/stat) is looked at after MS milliseconds of waiting, and every MS after,
 * and taken for stopped when two looks in a row say so (MS 0: one look at once, for a caller
 * that saw it stopped a moment ago, then as with TP_HOST_WAIT_MS); a running one, however
 * slow, is waited for. */
bool tp_host_lock_within(struct tp_link *l, uint32_t ms);
#define TP_HOST_WAIT_MS 20u   /* a set-up's wait before it looks at the holder */
#define TP_HOST_BUSY_MS 1000u /* ... at once, for this long after it found one stopped */
void tp_host_unlock(struct tp_link *l);
/* Add ST flags FLAGS to the ST word of the peer's slot that host entry E names: every flag
 * written so far (e->st_out), from whichever process of this host, in one store. Any lock or
 * none held. The only way this host writes an ST word. */
void tp_ent_st_add(struct tp_link *l, struct tp_host_entry *e, uint32_t flags);
bool tp_pid_alive(int pid);
bool tp_entry_owned(struct tp_host_entry *e);
int tp_host_path(const struct ntb_link_params *lp, int side, char *buf, size_t len);
bool tp_host_lost(struct tp_link *l);
uint64_t tp_now_ms(void);
uint32_t tp_random32(void);
int tp_self_pid(void);        /* getpid(), cached */
void tp_proc_forked(void);   /* in a forked child: new pid, own random values */
/* Under lock: allocate a free slot (state → STATE, pid), returns index or -ENOSPC. */
int tp_slot_alloc(struct tp_link *l, uint32_t state, int pid);
void tp_slot_free(struct tp_link *l, uint32_t slot);
/* As tp_slot_free(), for a connection whose peer's sender is known to write no more into the
 * ring it held (its FIN validated, nothing unread, no error or failover): the ring goes back on
 * top of the pool, to be granted again first (tp_conns.c: conn_release()). */
void tp_slot_free_ended(struct tp_link *l, uint32_t slot);

/* --- the host table's indexes (tp_host_index.c), all under the host lock --------------------
 * Set-up finds entries in O(1), not by a scan of every context: the FREE ones queued in the
 * order they were released (the longest-released one is reused first), and the server entries
 * by the peer's slot (on_apply(), on_cancel()) and by key (the accept's pending_find()). */

/* Bytes after e[CONTEXTS] that the indexes take. */
size_t tp_hidx_size(uint32_t contexts);
/* A new table of H->contexts FREE entries. */
void tp_hidx_init(struct tp_host *h);
/* Rebuild every index from the entries (a process died holding the host lock, mid-update). */
void tp_hidx_rebuild(struct tp_host *h);
/* The FREE entry released longest ago, taken off the queue; -1 if none. */
int tp_hidx_free_pop(struct tp_host *h);
/* Entry SLOT became FREE: queue it, and drop it from the server indexes it was in. */
void tp_hidx_freed(struct tp_host *h, uint32_t slot);
/* Server entry SLOT has its peer_slot and key: index it. */
void tp_hidx_add_server(struct tp_host *h, uint32_t slot);
/* The first server entry in the bucket of PEER_SLOT (of KEY), entry number + 1 or 0; the
 * next one after entry number + 1 N. The bucket may hold others: the caller compares. */
uint32_t tp_hidx_peer_first(const struct tp_host *h, uint32_t peer_slot);
uint32_t tp_hidx_key_first(const struct tp_host *h, const struct tp_key *key);
static inline uint32_t tp_hidx_peer_next(const struct tp_host *h, uint32_t n)
{
	return n && n <= tp_host_used(h) ? h->e[n - 1].peer_next : 0;
}
static inline uint32_t tp_hidx_key_next(const struct tp_host *h, uint32_t n)
{
	return n && n <= tp_host_used(h) ? h->e[n - 1].key_next : 0;
}
/* Under lock: republish the listener bitmap words that changed (or all when FORCE). */
void tp_listen_publish(struct tp_link *l, bool force);
/* Under lock: reclaim entries of dead processes and expired pending set-ups: a walk of every
 * entry. */
void tp_host_reclaim(struct tp_link *l);
/* Under lock: the maintenance pass's reclaim (every 500 ms per host): tp_host_reclaim() when an
 * owner process died (struct tp_host's procs), a peer session changed, the registry overflowed
 * or the table is small; else a walk of the next TP_RECLAIM_PART entries. Returns the number of
 * entries walked. */
uint32_t tp_host_reclaim_tick(struct tp_link *l);
/* Under lock: process PID owns an entry of H from now on (a no-op when listed). */
void tp_host_proc_note(struct tp_host *h, int pid);
/* Under lock: PID among E's owners (in the place of a dead one; not when all TP_OWNERS live),
 * and in the host's registry of owner processes. */
void tp_entry_own(struct tp_link *l, struct tp_host_entry *e, int pid);
/* Under lock: tp_host_reclaim() when at most one context is left free and none ran in the last
 * TP_RECLAIM_SOON_MS: a set-up is not refused (nor made to wait for the helper's next pass)
 * for contexts that processes which have died still hold. */
void tp_host_reclaim_if_short(struct tp_link *l);
#define TP_RECLAIM_SOON_MS 5
uint32_t tp_slot_st_flags(struct tp_link *l, uint32_t slot, uint32_t nonce);

/* tp_mbox.c */
/* Under lock: 0, -EAGAIN when the peer's mailbox holds TP_MBOX_SLOTS packets it has not been
 * seen to consume, or -ENOTCONN when the link is down or its peer session is not the one
 * tp_mbox_process() last saw (nothing is written then). */
int tp_mbox_send(struct tp_link *l, struct tp_pkt *p);
/* Under lock: the set-up of our entry SLOT goes to sleep for an answer (ASLEEP) or is awake
 * again; the count of those asleep goes to the peer (MBOX_RING: it rings for answers while not
 * 0), then a full fence. tp_slot_free() takes a freed entry out of the count. */
void tp_mbox_sleepers(struct tp_link *l, uint32_t slot, bool asleep);
bool tp_geom_valid(const struct tp_link *l, uint64_t slot_off, uint32_t inline_n, uint32_t q);
/* Is the pool a peer announced (POOL_N rings of Q bytes at POOL_OFF) inside our outbound window,
 * and RING (index + 1, 0: none) one of them? */
bool tp_pool_valid(const struct tp_link *l, uint64_t pool_off, uint32_t pool_n, uint32_t q,
		   uint32_t ring);
void tp_pkt_set_pool(struct tp_pkt *p, const struct tp_link *l, const struct tp_host_entry *e);
void tp_ent_peer_pool(struct tp_host_entry *e, const struct tp_pkt *p);
unsigned tp_mbox_process(struct tp_link *l);   /* under lock; returns the Applies handled */
/* Under lock: write both mailbox indices again (a lost or spoilt one would otherwise stay so
 * until the next packet: a hidden packet, or a producer that sees no room). */
void tp_mbox_republish(struct tp_link *l);
/* Under lock: P sent without a ring, and read back from the peer's memory (ntb_read_back()):
 * 0 once the packet and the index that publishes it are there, -EIO when they are not after a
 * few tries, or the errors of tp_mbox_send(). */
int tp_mbox_send_landed(struct tp_link *l, struct tp_pkt *p);
/* The mailbox seeds: what we write (our session, the peer's), what we read. */
uint32_t tp_mbox_seed_out(const struct tp_link *l);
uint32_t tp_mbox_seed_in(const struct tp_link *l);
/* Fill server entry E (our slot SLOT) from the client's Apply or Claim P (checked by the caller)
 * and index it: a reservation PENDING for P's key. */
void tp_mbox_reserve(struct tp_link *l, struct tp_host_entry *e, uint32_t slot,
		     const struct tp_pkt *p);
/* Client: entry E answered by the server's Ack (or an offer's record) P, in the mailbox's
 * session. */
void tp_mbox_take_ack(struct tp_link *l, struct tp_host_entry *e, const struct tp_pkt *p);
/* tp_connect.c: P, the Apply-shaped packet of TYPE for our entry SLOT (its key, MsgID, nonce,
 * slot geometry and pool), CnctPRI PRI, APPLY_FLAGS. */
void tp_apply_fill(struct tp_link *l, uint32_t slot, uint8_t type, uint32_t pri,
		   uint32_t apply_flags, struct tp_pkt *p);
/* Is P's geometry (slot, pool) one our window can take, its version ours? */
bool tp_mbox_apply_valid(const struct tp_link *l, const struct tp_pkt *p);
bool tp_mbox_host_listens(struct tp_host *h, uint16_t port);

/* tp_offer.c: offers ([RT]'s Ack made ahead of the Apply). Under lock. */
/* Server: the peer's consumer index (OFFER_RX), read before the mailbox is processed; then the
 * offers it took without a claim freed and the ring refilled (RX_OK: the word read checked). */
bool tp_offer_rx_read(struct tp_link *l, uint32_t *ret_rx);
void tp_offer_refill(struct tp_link *l, bool rx_ok, uint32_t rx);
/* Server: is our entry SLOT one of the offers published and not counted taken? (An offer that
 * is not: its maker died before publishing it, freed by the reclaim.) */
bool tp_offer_listed(const struct tp_host *h, uint32_t slot);
/* Server: a new peer session; every offer of the last one is freed, both halves start over. */
void tp_offer_reset(struct tp_link *l);
/* Server: the client's Claim P of an offer (from the mailbox). */
void tp_offer_on_claim(struct tp_link *l, const struct tp_pkt *p);
/* Client: take the peer's next offer for our entry SLOT (its key, msgid and pri set): 0 with the
 * entry answered (result TP_PKT_ACK, as by an Ack) once the claim is in the peer's memory;
 * -ENOENT when no offer is there; -EIO when the claim did not land (the caller applies). */
int tp_offer_claim(struct tp_link *l, uint32_t slot);
/* Both: write our offer index words again (tp_mbox_republish()). */
void tp_offer_republish(struct tp_link *l);

/* tp_ring.c: transfer contexts (header comment, TRANSFER CONTEXTS) */
#define TP_GRANT_QUANTUM_MS 50u /* a grant is asked back after this while others wait */
#define TP_RING_HOLD_MS 200u    /* a large write waits for a ring at most this long */
/* The CRC seed of a data-ring message: the connection's NONCE mixed with the grant's GEN. */
static inline uint32_t tp_ring_seed(uint32_t nonce, uint32_t gen)
{
	return nonce ^ (gen * 0x9e3779b1u);
}
void tp_pool_init(struct tp_host *h, uint32_t n);
/* Host lock, taken from a holder that died in it (EOWNERDEAD): the pool's stack made again from
 * the entries' grants (a ring it lost is free again, one it listed twice or that is granted
 * leaves it). */
void tp_pool_rebuild(struct tp_host *h);
/* Host lock: a ring's index, or -1 ([RT]'s rule with CnctPRI PRI; ASK: a sender's request,
 * whose refusal raises RCxtPRI and asks grants back; else a set-up's, which takes only a ring
 * nobody waits for) */
int tp_pool_take(struct tp_link *l, uint32_t pri, bool ask);
/* host lock; COLD: granted again last (freed with a connection whose sender may write late) */
void tp_pool_put(struct tp_link *l, uint32_t idx, bool cold);
void tp_ring_conn_init(struct tp_conn *c);           /* the conn's view, from its entry */
/* sender, tx_lock: the feedback's grant words; data waits for a ring (ask for one); timers
 * (ask again after a refusal, REPUBLISH: the words again) */
void tp_tx_ring_feedback(struct tp_conn *c);
/* BACKLOG: bytes of the write that found no ring (it asks past TP_RING_ASK_BYTES, or past
 * TP_RING_ASK_STREAM through the inline slots since its last ask) */
#define TP_RING_ASK_BYTES  4096u
#define TP_RING_ASK_STREAM (64u << 10)
void tp_tx_ring_want(struct tp_conn *c, size_t backlog);
void tp_tx_ring_timers(struct tp_conn *c, uint64_t now, bool republish);
bool tp_tx_ring_waiting(const struct tp_conn *c);
/* ms until the sender's timers have ring work (an ask again, a RING_RET again), 0: none */
uint32_t tp_tx_ring_next(const struct tp_conn *c, uint64_t now);
/* A write of LEN bytes waits for the ring it asked for (or gives back, or will ask for after its
 * quantum) rather than trickle through the inline slots: past TP_RING_ASK_BYTES. The inline
 * slots keep moving smaller writes; a thousand streams sharing a few hundred rings would
 * otherwise spend their CPU on 116-byte messages and their writers on refusals. */
bool tp_tx_ring_hold_big(const struct tp_conn *c, size_t len);
/* receiver, rx_lock: requests and returns (TIMERS: also ask a grant back when others wait) */
void tp_rx_ring_service(struct tp_conn *c, bool timers);
void tp_rx_ring_republish(struct tp_conn *c);
/* The active list's tests (tp_active.c: tp_act_settle(), tp_act_note_rx()): no ring work for
 * the timers. Sender, under tx_lock (GRANT_RAW: the FB_GRANT word as the scan will compare
 * it): no request open or deferred, no ring asked back, no RING_RET repeating, no grant word
 * unread. Receiver, under rx_lock (REQ_RAW: the TX_RING_REQ word as the scan will compare it):
 * no request unanswered or refused, and a ring it holds neither asked back, nor its sender's
 * gone, nor wanted by others (a refusal within two quanta). A ring held while nobody waits is
 * no work: the scan (a YIELD, a request) and a new refusal bring the connection back. */
bool tp_tx_ring_quiet(struct tp_conn *c, uint64_t grant_raw);
bool tp_rx_ring_quiet(struct tp_conn *c, uint64_t req_raw);

/* tp_words.c */
bool tp_slot_word_check(struct tp_conn *c, uint32_t w, uint64_t raw, uint32_t *ret);

/* A word of our own slot (written by the peer, seeded with our nonce); false if invalid.
 * Inline: read on every send, receive and wait; unchanged since the last check is the common
 * case and skips the CRC. The cache is racy between the tx and rx threads of a connection only
 * in its hit rate: a pair is written raw then value, and a torn pair just misses. */
static inline bool tp_slot_word(struct tp_conn *c, uint32_t w, uint32_t *ret)
{
	const volatile uint8_t *p = c->link->in + tp_slot_off(c->link, c->slot);
	/* acquire: a word published after a barrier is read before what it publishes (as
	 * tp_in_word()); pairs with the writer's ntb_to_peer_barrier() or, for the FB words,
	 * ntb_from_peer_barrier() (tp_words.c's table) */
	uint64_t raw = atomic_load_explicit((const _Atomic uint64_t *)(const void *)(p + w),
					    memory_order_acquire);
	unsigned i = w / 8u;

	/* relaxed: the cache is a hint (above) */
	if (i < TP_WCACHE && raw == atomic_load_explicit(&c->wc_raw[i], memory_order_relaxed) &&
	    raw) {
		*ret = (uint32_t)raw;
		return true;
	}
	if (!raw) /* never written (tp_cw_check() refuses it too): flags not set, no word yet */
		return false;
	return tp_slot_word_check(c, w, raw, ret);
}

/* The raw checked word W of our own slot (written by the peer), unchecked: for change
 * detection, on the send path and in the wait probes. */
static inline uint64_t tp_slot_raw(const struct tp_conn *c, uint32_t w)
{
	const volatile uint8_t *p = c->link->in + tp_slot_off(c->link, c->slot) + w;

	/* relaxed: a hint; a change makes the caller read the word through tp_slot_word()
	 * (acquire) before it acts on it */
	return atomic_load_explicit((const _Atomic uint64_t *)(const void *)p,
				    memory_order_relaxed);
}
/* Word W of our slot as last checked valid (the cache of tp_slot_word()), raw. Relaxed: the
 * cache is a hint shared by the tx and rx threads (see tp_slot_word()). */
static inline uint64_t tp_wc_raw(const struct tp_conn *c, uint32_t w)
{
	return atomic_load_explicit(&c->wc_raw[w / 8u], memory_order_relaxed);
}
/* Is RAW, word W of C's slot as just loaded, a valid value other than its last valid reading
 * (the cache above)? One that fails its check (an earlier connection's word in a reused slot, a
 * spoilt write) is no news: tp_slot_word() ignores it too, and taken for news it makes every
 * look at the connection a full one until the peer writes the word again. */
static inline bool tp_slot_raw_new(const struct tp_conn *c, uint32_t w, uint64_t raw)
{
	uint32_t v;

	return raw && raw != tp_wc_raw(c, w) && tp_cw_check(c->nonce_in, raw, &v);
}
void tp_peer_word(struct tp_conn *c, uint32_t w, uint32_t v);    /* the peer's slot */
void tp_set_error_at(struct tp_conn *c, int err, const char *file, int line);
#define tp_set_error(c, e) tp_set_error_at((c), (e), __FILE__, __LINE__)
void tp_wake_peer(struct tp_conn *c, uint32_t flag_word);
/* After words of C that no message carries (a Detect's answer), when the peer's only sleeper
 * for C is a reader asleep on its NEWS word (FB_WAIT's TP_FBW_WORD, neither RING nor EVENT):
 * that word rewritten and woken, true; false: the caller rings the doorbell. Under either lock
 * of C (the word is only compared: two writers' fresh values are each news). */
bool tp_wake_word_only(struct tp_conn *c);
/* C's NEWS word in the peer's window (news_out, non-zero) rewritten alone, with a value no
 * message gives it (bit 31 set, from the clock): news for a sleeper on the word, which
 * compares it; the summaries are left alone (the sender writes them once per message). */
void tp_news_fresh(struct tp_conn *c);
/* Statistics: writers (relaxed; partner: tp_stats_load()). A load + store instead of an RMW: each
 * field has one writer (struct tp_stats_sh). */
#define TP_STAT_ADD(field, n)                                                                  \
	atomic_store_explicit(&(field), atomic_load_explicit(&(field), memory_order_relaxed) + (n), \
			      memory_order_relaxed)
#define TP_STAT_SET(field, v) atomic_store_explicit(&(field), (v), memory_order_relaxed)

/* A snapshot of *SRC field by field with relaxed loads (partner: TP_STAT_ADD/TP_STAT_SET). */
static inline void tp_stats_load(struct tp_stats *dst, const struct tp_stats_sh *src)
{
#define TP_STAT_LD(f) dst->f = atomic_load_explicit(&src->f, memory_order_relaxed)
	TP_STAT_LD(tx_bytes); TP_STAT_LD(rx_bytes);
	TP_STAT_LD(tx_msgs_inline); TP_STAT_LD(tx_msgs_short); TP_STAT_LD(tx_msgs_long);
	TP_STAT_LD(rx_msgs_inline); TP_STAT_LD(rx_msgs_short); TP_STAT_LD(rx_msgs_long);
	TP_STAT_LD(retransmits); TP_STAT_LD(crc_errors);
	TP_STAT_LD(tx_queue_fill); TP_STAT_LD(rx_queue_fill);
	TP_STAT_LD(tx_full);
#undef TP_STAT_LD
}

/* tp_probe.c: a lock-free snapshot for spinning waits (tp_wait): what would change when the peer
 * publishes something (the next inline sequence byte, TX_D, the feedback words, the doorbell).
 * Armed under rx_lock from the current cursors; a hit only means "look again" (poll_bits). */
struct tp_probe {
	const volatile uint8_t *seq_at;  /* sequence byte of the next inline slot */
	uint8_t seq_want;
	bool seq_was;                    /* already there when armed (not news) */
	bool seq_stale;                  /* the slot is a stale one (tp_inline_stale()): only
					  * the full looks watch it */
	uint64_t tx_d, fb_rx_i, fb_rx_d; /* raw checked words when armed */
	uint64_t tx_wait;                /* raw TX_WAIT: the sender waits for room, or holds a
					  * merged message, for our release (tp_rx_release()) */
	uint32_t db;
	unsigned events;                 /* TP_EV_IN: watch the rings, TP_EV_OUT: the feedback */
};
void tp_probe_arm(struct tp_conn *c, struct tp_probe *p, unsigned events);
/* Inline slot of position POS in receive context SLOT of our inbound window. */
static inline const volatile uint8_t *tp_in_inline(const struct tp_link *l, uint32_t slot,
						   uint32_t pos)
{
	return l->in + tp_slot_off(l, slot) + TP_SLOT_RINGS +
	       (size_t)(pos & (l->geom.inline_n - 1)) * 128u;
}

/* Note the stale first-lap slots of a connection being set up (tp_conn_init_queues()). */
void tp_rx_note_stale(struct tp_conn *c);

/* Whether first-lap inline position POS, whose slot is SLOT, is one tp_rx_note_stale() found
 * stale, still unchanged. Advisory: only readiness hints and spin probes use it; reads validate
 * every slot, so a slot noted by mistake (a real message caught mid-retransmission) is found by
 * the full looks, later but never lost. Under rx_lock. */
static inline bool tp_inline_stale(const struct tp_conn *c, uint32_t pos,
				   const volatile uint8_t *slot)
{
	if (__builtin_expect(c->n_stale == 0, 1) || pos >= c->link->geom.inline_n)
		return false;
	for (unsigned i = 0; i < c->n_stale; i++)
		if (c->stale_pos[i] == pos)
			/* relaxed: advisory (above) */
			return atomic_load_explicit((const _Atomic uint64_t *)(const void *)
						    (uintptr_t)(slot + 120),
						    memory_order_relaxed) == c->stale_sig[i];
	return false;
}
unsigned tp_probe_hit(const struct tp_conn *c, const struct tp_probe *p);

/*
 * Quick probes: a sender whose data stays unacknowledged sends a Detect after
 * TP_QUICK_PROBE_US without progress, again after twice that, and so on while the interval is
 * below TimerSendData; they count no error (TErrCnt) and stop at the first progress. A write
 * the link dropped (a message, a Retry, an answer) would otherwise wait for TimerSendData
 * (100 ms by default, 50-100x the whole exchange); a receiver that only has not published its
 * feedback answers at once with it. The intervals are on CLOCK_MONOTONIC in microseconds, not
 * the ms clock: a loss the next arrival cannot reveal (the ring full behind a lost Retry or
 * epoch word, the last message of a burst) then costs a stream a quarter of a millisecond, not
 * one or two. Driven by whoever runs the timers: a waiter in tp_wait() (while it spins, at the
 * microsecond: tp_conn_recovery_due_ns(); asleep, its sleep ends at the next probe's
 * microsecond: ntb_db_wait_us()) and the helper, which comes every TP_QUICK_PROBE_MS while probe_soon is set (by
 * a sleeper with such data, also poll/epoll's through tp_poll()).
 */
#define TP_QUICK_PROBE_US 250u
/* ... or, where the receiver usually takes longer to acknowledge (a loaded host: a JVM's 16
 * threads on 2 CPUs answered in ~5 ms, and every request was probed ~6 times, each probe and
 * its answer a wake-up on both hosts), twice that (TCP's tail loss probe: 2 SRTT), up to
 * TP_QUICK_PROBE_MAX_US: tp_quick_base_us(). The time is that of one message at a time, from
 * its send to the acknowledgement that covers it (tp_tx_timers_start(), tp_tx_feedback()),
 * void when a probe or a retransmission came between (Karn), at most half the cap; a running
 * mean per connection and per link (a new connection's first probes go by its link's). */
#define TP_QUICK_PROBE_MAX_US 5000u
/* The first quick probe's delay for C, µs (under tx_lock). */
static inline uint64_t tp_quick_base_us(const struct tp_conn *c)
{
	/* relaxed: a hint */
	uint64_t a = c->ack_us ? c->ack_us :
				 atomic_load_explicit(&c->link->ack_us, memory_order_relaxed);

	a *= 2u;
	return a < TP_QUICK_PROBE_US ? TP_QUICK_PROBE_US :
	       a > TP_QUICK_PROBE_MAX_US ? TP_QUICK_PROBE_MAX_US : a;
}
/* A quick probe sent this many µs or more after the last progress, the one before it (since that
 * progress: the second at least) unanswered, arms a writer's death to reset its socket
 * (tp_witness.c): at the base delay, the fourth (250, 500, 1000, 2000 µs), as when probes were
 * 1 ms apart. */
#define TP_QUICK_RST_US 2000u
/* The helper thread's tid (0: none has run yet): for diagnostics and tests. */
int tp_helper_tid(void);
#define TP_QUICK_PROBE_MS 1u /* the helper's period while probe_soon (its sleep is in ms) */
/* A waiter about to sleep with quick probes or re-asks due (tp_wait.c: arm_quick_probe()): set
 * L's probe_soon, and wake the helper when it already sleeps for longer than TP_QUICK_PROBE_MS
 * (its sleep was planned before the flag was set: helper_plan() reads it once per sleep, and a
 * helper left in its long sleep, up to half a heartbeat, ran the quick probes of a poll/epoll
 * sleeper ~50 ms late). A fence and a load while the helper is awake or already comes soon. */
void tp_link_probe_soon(struct tp_link *l);

/* The receiver's counterpart: a Retry not answered within TP_REASK_US is asked again (the same
 * epoch, no error counted), again after twice that, and so on up to TimerRcvData
 * (tp_rx_progress()); a sender seen writing past an unanswered Retry is asked at once. */
#define TP_REASK_US 60u
/* ... up to TP_REASK_US << TP_REASK_MAX_SHIFT apart (~1 ms): a longer interval would leave a
 * recovery whose re-asks were lost too waiting past the 1 ms goal; a peer that is gone is
 * still found by TimerRcvData */
#define TP_REASK_MAX_SHIFT 4u
/* How far past its budget a waiter spins for the next timer of a recovery under way (a gated
 * receiver's re-ask, the quick probe of a sender whose retransmission is unconfirmed): a
 * sleep until the timer's microsecond costs a wake-up (tens of µs on a VM), and both timers
 * fire within this. */
#define TP_RECOVERY_SPIN_US 2000u

/* tp_retx.c / tp_rx.c: the two halves of tp_conn_timers(). tp_tx_timers() returns the ms until
 * C's next quick probe (0: none is due: nothing unacknowledged, or the normal timers have
 * it); tp_tx_quick_wait() the same without running the timers (trylock: 0 when busy). */
uint32_t tp_tx_timers(struct tp_conn *c, uint64_t now);
uint32_t tp_tx_quick_wait(struct tp_conn *c, uint64_t now);
/* The receive side's half: returns the ms until C's next re-ask of an unanswered Retry (at
 * least 1), 0: none (not gated); tp_rx_reask_wait() the same without running them (trylock: 0
 * when busy). */
uint32_t tp_rx_timers(struct tp_conn *c);
uint32_t tp_rx_reask_wait(struct tp_conn *c, uint64_t now);
/* CLOCK_MONOTONIC (ns) at which C's next quick probe (tp_tx_quick_due_ns()) or re-ask of a
 * Retry (tp_rx_reask_due_ns()) is due, 0: none (or the side's lock was busy: trylock).
 * tp_conn_recovery_due_ns() is the earlier of the two: a spinning waiter runs the timers then
 * (tp_wait()), so that they keep their microseconds. *URGENT is set (never cleared) when a
 * recovery is under way: the receiver gated on its Retry, or the sender not yet sure that its
 * retransmission's epoch word arrived; a waiter spins on for those (TP_RECOVERY_SPIN_US). */
uint64_t tp_tx_quick_due_ns(struct tp_conn *c, bool *urgent);
/* Has C sent bytes that its receiver has not acknowledged yet, its quick probes to come (the
 * receiver's feedback read first)? Also true when tx_lock is busy. */
bool tp_tx_unacked(struct tp_conn *c);
uint64_t tp_rx_reask_due_ns(struct tp_conn *c, bool *urgent);
uint64_t tp_conn_recovery_due_ns(struct tp_conn *c, bool *ret_urgent);
/* Under tx_lock, before C writes a message: when everything it sent was acknowledged (as far as
 * it last read its feedback), TimerSendData and the quick probes count from now, not from the
 * last progress, which may be long past: an idle connection's next send found its first quick
 * probe due at once (a waiter spinning for the answer then sent a Detect, each ringing the peer,
 * every few microseconds while the doubling interval caught up with the idle time) and, after
 * 100 ms of quiet, TimerSendData run out at its first look (a Detect and an error counted).
 * One clock read, only on that transition (a stream's cached CmpAck lags its sends). */
static inline void tp_tx_timers_start(struct tp_conn *c)
{
	if (c->msn_next != c->fb_ack) {
		/* (a message timed for the acknowledgement's mean, tp_tx_feedback(): one at a
		 * time, so one clock read per acknowledgement at most) */
		if (!c->ack_stamp_ns) {
			c->ack_stamp_ns = clock_mono_ns();
			c->ack_msn = c->msn_next;
		}
		return;
	}
	uint64_t ns = clock_mono_ns();

	c->ack_stamp_ns = ns;
	c->ack_msn = c->msn_next;
	c->quick_ns = ns;
	c->last_ack_ms = ns / 1000000u; /* (tp_now_ms()'s clock) */
	c->quick_n = 0;
}
/* The smaller of two such waits, 0 standing for none. */
static inline uint32_t tp_wait_min(uint32_t a, uint32_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* tp_words.c, tp_tx.c, tp_rx.c, tp_timers.c */
int tp_conn_init_queues(struct tp_conn *c);
void tp_conn_free_queues(struct tp_conn *c);
uint32_t tp_conn_timers(struct tp_conn *c, uint64_t now); /* tp_tx_timers()' result */
void tp_rx_progress(struct tp_conn *c, uint32_t want);
/* Under rx_lock, everything delivered, the peer lost without a FIN: true (and end of stream
 * set) when its process died with nothing missing, as kernel TCP ends a killed writer's stream
 * with a FIN (tp_rx.c) */
bool tp_rx_death_end(struct tp_conn *c);
/* Whether the sender's TP_W_TX_HELD names a held message next in line (its death leaves it to
 * us to deliver: its data ring stays ours until then). Under rx_lock. */
bool tp_rx_held_next(const struct tp_conn *c);
enum { TP_UNPUB_UNKNOWN, TP_UNPUB_YES, TP_UNPUB_NO };
bool tp_rx_unpublished_next(struct tp_conn *c, struct tp_desc *d, uint32_t *ret_fp,
			    uint32_t *ret_gap);
/* Bytes received and not yet read, after validating what arrived; under the rx lock. */
size_t tp_rx_queued(struct tp_conn *c);
/* Are bytes validated and not yet read waiting on C (tp_rx.c)? Takes rx_lock; with TRY, a busy
 * lock answers false. */
bool tp_rx_unread(struct tp_conn *c, bool try);
/* Under rx_lock: the sender's TX_D, from the last reading while validation is behind it (no load
 * of the word, whose line the sender writes after every message), else read again (checked,
 * acquire); false when the word fails its check (tp_rx.c). */
bool tp_rx_txd(struct tp_conn *c, uint32_t *ret);
/* Under rx_lock: true when tp_rx_progress() would find nothing new (tp_rx.c) */
bool tp_rx_quiet(struct tp_conn *c);
/* Under rx_lock: publish released space and CmpAck held back by the lazy release (tp_rx.c) —
 * before the reader sleeps, and from the timers. */
void tp_rx_flush_feedback(struct tp_conn *c);
uint32_t tp_data_room(const struct tp_conn *c, uint8_t type);
/* Publish C's held (merged, unpublished) message, if any: under tx_lock (_locked) or taking
 * it. Every caller that may leave the connection idle with bytes held runs one: the helper
 * when the peer rings, reads, waits, polls, the timers, fork. */
void tp_tx_flush_held_locked(struct tp_conn *c);
/* Under tx_lock (or C no longer used): C's held message will never be published on its link —
 * it leaves in a failover's tail (fo_build_tail()), or C is finished — so it stops counting
 * in the link's held_conns (which keeps the helper looking every millisecond on a loopback
 * link, and its quick probes coming on others). */
void tp_tx_hold_drop(struct tp_conn *c);
/* Both copies of C's held-message word in the peer's slot (TP_W_TX_HELD) := W. */
void tp_tx_held_word(struct tp_conn *c, uint64_t w);
void tp_tx_flush_held(struct tp_conn *c);
/* The helper's: publish C's held message if the receiver released everything published (its
 * ring said so); false when the tx lock was busy. */
bool tp_tx_flush_held_ready(struct tp_conn *c);
/* Under rx_lock: the receive side's lazy release, which publishes at once while the sender
 * says it waits (TX_WAIT: for room, or holding a merged message until we consume) */
void tp_rx_release(struct tp_conn *c);
/* Under rx_lock, after a read that delivered bytes: as tp_rx_release(), and at once when the
 * read consumed everything validated and the connection takes turns (c->rx_turn: it sent
 * since the last read that caught up), or it is the connection's first such read (rx_first:
 * then however recent the last publication). */
void tp_rx_release_turn(struct tp_conn *c);
/* ... when the last publication is this many clock_ticks() old (25-100 µs, well within
 * TP_QUICK_PROBE_US): a faster exchange's lazy releases keep the peer's probes away. */
#define TP_TURN_TICKS 100000u
int tp_tx_fin(struct tp_conn *c);
void tp_tx_feedback(struct tp_conn *c);
/* The helper, on a doorbell: C's last retransmission unconfirmed (its epoch word may have
 * been lost, and the receiver, gated, re-asks with the same epoch, which is no news to
 * tp_tx_feedback()): write the epoch word once more (tp_retx.c). */
void tp_tx_epoch_again(struct tp_conn *c);
/* The same under tx_lock, for a thread that waits on C (tp_wait(): its poll): a spinning
 * waiter must not leave this to the helper, which may share its CPU and not run until the
 * waiter's spin ends (up to TP_RECOVERY_SPIN_US). Once per doorbell ring. */
void tp_tx_epoch_again_locked(struct tp_conn *c);
/* tp_tx_retry_check() - tp_tx_feedback() when the peer's FB epoch word moved (tp_retx.c). */
void tp_tx_retry_check(struct tp_conn *c);
uint32_t tp_st_flags(struct tp_conn *c);
/* One store of a whole ST word (FLAGS) and of the NEWS word at NEWS_OFF (0: none) of the peer's
 * slot PEER_SLOT, with its summaries (tp_news_write()), flushed, and
 * the peer's doorbell unless FLAGS is only TP_ST_CLOSING: only through tp_ent_st_add(), which
 * makes FLAGS every flag written so far. A closed connection whose FIN stays unacknowledged
 * TP_FIN_NUDGE_MS rings then (the helper's pass), and an exit rings at once
 * (tp_exit_handoff()). */
#define TP_FIN_NUDGE_MS 10
/* Map the pages of pool ring RING (1-based; window offset OFF, size Q; OUT: the peer's, that we
 * write, else ours) that LEN bytes from ring position POS reach, part by part, each once per
 * process (ntb_prefault()); true when every part of the ring is mapped. */
bool tp_link_ring_prefault(struct tp_link *l, bool out, uint32_t ring, uint64_t off, uint32_t q,
			   uint32_t pos, uint32_t len);
void tp_write_st(struct tp_link *l, uint64_t peer_slot_off, uint64_t news_off, uint32_t peer_slot,
		 uint32_t peer_nonce, uint32_t flags);
/* The NEWS word at NEWS_OFF of the peer's slot PEER_SLOT (checked word V seeded with SEED),
 * then its group's word and the summary (tp_news_tag(), with N); the caller flushes. */
void tp_news_write(struct tp_link *l, uint64_t news_off, uint32_t peer_slot, uint32_t seed,
		   uint32_t v, uint32_t n);
bool tp_conn_peer_lost(struct tp_conn *c);
void tp_conn_maxerr(struct tp_conn *c, int err);
uint64_t tp_in_word(const struct tp_link *l, uint64_t off);
void tp_out_word(struct tp_link *l, uint64_t off, uint32_t seed, uint32_t v);

/* tp_link.c */
/* This process's links (linked by next_link) and the lock over that list and the helper's start
 * (taken before a link's conns_lock). */
extern pthread_mutex_t tp_links_lock;
extern struct tp_link *tp_links;
void tp_helper_start(void);
bool tp_link_refresh(struct tp_link *l);

bool tp_helper_running(void);         /* this process has its helper thread */
bool tp_helper_on(void);              /* the same without tp_links_lock (a hint) */
/* tp_witness.c: a pass's visit of C (owned, not closed) at NOW: its witness's epoll watch
 * added if it is due; true while one is still to add (C stays on the active list). */
#define TP_WATCH_DELAY_MS 10u
bool tp_witness_watch_due(struct tp_conn *c, uint64_t now);

/* tp_finwait.c: the helper's part of tp_close_after_fin(). */
int tp_finwait_add(int fd, int timeout_ms); /* tp_close_after_fin() without the helper check */
bool tp_finwait_pending(void);        /* sockets wait for their peer's FIN */
void tp_finwait_service(void);        /* close those whose FIN came or whose time is up */
void tp_finwait_atfork_child(void);   /* the child closes its copies */
void tp_finwait_fork_lock(bool lock); /* fork: no service half done (atfork_prepare()) */
void tp_event_signal(void);         /* tp_link.c */
/* tp_conns.c: a link's connections in this process */
void tp_conn_register(struct tp_conn *c);
void tp_conn_unregister(struct tp_conn *c);
bool tp_conn_release(struct tp_conn *c, uint32_t st_flags); /* true: closed a kernel socket */
/* tp_conn_release() when the host lock is free (tried briefly): -1 when it is not (C stays
 * registered, as before the call), else 1 or 0 as tp_conn_release() returns true or false. */
int tp_conn_release_try(struct tp_conn *c, uint32_t st_flags);
/* Is this thread the helper? (Its passes close kernel sockets outside their locks and yield
 * after each: tp_conns.c.) */
bool tp_on_helper(void);
/* tp_conns.c: has the peer acknowledged C's FIN (and so every byte before it)? (tx side) */
bool tp_fin_acked(const struct tp_conn *c);
/* Finish this process's closed connections of L that are done (a set-up short of contexts). */
void tp_link_reap(struct tp_link *l);
/* One pass over L's connections at time NOW (tp_now_ms(), maybe read a while before): their
 * timers (only the closed ones' when CLOSED_ONLY) and the release of closed ones that are
 * finished (with FORCE, of every closed one). False when another thread's pass runs. */
bool tp_link_conns_pass(struct tp_link *l, uint64_t now, bool closed_only, bool force);

/* tp_active.c: the connections a pass visits. A pass (tp_link_conns_pass()) visits the
 * connections on the link's active list, not all of them: a connection joins it when something
 * gives its timers work (tp_act_mark() and the functions below, called where that happens), and
 * a pass takes it off when the timers have none left (tp_act_settle()). The events of the peer
 * that give an idle connection work (a Detect, ST flags: both ring the doorbell) are found by a
 * scan of two words of each idle connection's slot when the doorbell rang; link events (the
 * peer silent, lost or restarted, the link taken down) and, every act_sweep_ms
 * (TP_ACT_SWEEP_MS), a safety net make a pass visit them all. */
#ifndef TP_ACT_SWEEP_MS /* (a build may set it: 0 tests that nothing relies on the safety net) */
#define TP_ACT_SWEEP_MS 1000u
#endif
/* A ring is followed by a scan at most this often (the rate of the doorbell's passes when a pass
 * visited every connection: a Detect for an idle one is answered as soon as then). */
#define TP_ACT_SCAN_MS 5u
struct tp_act_idle;
void tp_act_link_init(struct tp_link *l);
void tp_act_link_free(struct tp_link *l);
/* C joins the active list unless it is on it. */
void tp_act_push(struct tp_conn *c);
/* C has (or may have) timer work that this thread made under C's tx_lock or rx_lock (held, or
 * released before): on the active list. A pass takes C off only under both locks, so one of
 * the two sees the other (tp_active.c). One relaxed load when C is on it already. */
static inline void tp_act_mark(struct tp_conn *c)
{
	/* relaxed: a hint (the exchange in tp_act_push() decides); ordered against a pass's
	 * clearing by the lock the work was made under */
	if (unlikely(!atomic_load_explicit(&c->act_on, memory_order_relaxed)))
		tp_act_push(c);
}
/* The same for work that is an atomic of C written without its locks (a failover requested,
 * a prefix, a commit, ownership), stored before this call: a fence against the one in
 * tp_act_settle() between its clearing and its second look at those atomics. */
static inline void tp_act_mark_sync(struct tp_conn *c)
{
	/* seq_cst fence: pairs with the fence in tp_act_settle() (store, fence, load on both
	 * sides: at least one sees the other's store) */
	atomic_thread_fence(memory_order_seq_cst);
	tp_act_mark(c);
}
/* C is closing (tp_close(), before closed is stored): on the active list for good. */
void tp_act_hold(struct tp_conn *c);
/* Under C's rx_lock, after the receive side ran for a caller that is not the timers (a read, a
 * poll): on the active list if the receive side now has timer work (feedback to publish,
 * a Retry outstanding). Costs a few loads when it has none. */
void tp_act_note_rx(struct tp_conn *c);
/* tp_conns.c's: under conns_lock. Register puts C on the list; unregister takes it off for
 * good (marks after it do nothing). */
void tp_act_register(struct tp_conn *c);
void tp_act_unregister(struct tp_conn *c);
/* Under conns_lock, at a pass's start (not CLOSED_ONLY: first the scan of the idle ones when
 * the doorbell rang, or all of them back on when a full pass is due): the active list, now the
 * pass's own (linked by act_next; the connections stay act_on). */
struct tp_conn *tp_act_take(struct tp_link *l, uint64_t now, bool closed_only);
/* Under conns_lock, at the pass's end: the ones it keeps (LIST, by act_next) back on. */
void tp_act_put_back(struct tp_link *l, struct tp_conn *list);
/* Under conns_lock, C just visited by a pass (its timers run): true when C is off the active
 * list now (no timer work: its fill levels and the words the scan compares recorded), false
 * when the pass keeps it. */
bool tp_act_settle(struct tp_conn *c);
/* In the forked child, L's connections (the parent's lingering ones gone): the list again. */
void tp_act_atfork_child(struct tp_link *l);
/* Is C on the active list (or a pass's)? For tests: a hint. */
static inline bool tp_act_on(const struct tp_conn *c)
{
	return atomic_load_explicit(&c->act_on, memory_order_relaxed); /* (a hint) */
}

/* tp_prefix.c: the rest of a moved connection's tail (BUF from OFF to LEN, BUF now C's) goes out
 * on C before anything else, then a FIN when FIN (tp_failover.c). */
void tp_prefix_set(struct tp_conn *c, uint8_t *buf, size_t len, size_t off, bool fin);
/* Send what of C's prefix fits: 0 when none is left (the FIN sent if due), -EAGAIN while some
 * is, or C's error. */
int tp_prefix_flush(struct tp_conn *c);
/* tp_prefix_flush(), waiting for another thread sending the prefix instead of -EAGAIN (tp_send():
 * a send into a connection with room is never refused for it). */
int tp_prefix_flush_wait(struct tp_conn *c);
/* C ends with its prefix pending: drop it. */
void tp_prefix_drop(struct tp_conn *c);
/* Take the prefix lock (a spin: flushers hold it for one send). */
void tp_prefix_lock(struct tp_conn *c);
void tp_prefix_unlock(struct tp_conn *c);
/* tp_tx.c: tp_send() without the prefix (what sends it). */
ssize_t tp_tx_send(struct tp_conn *c, const struct iovec *iov, int iovcnt);

/* tp_conn.c: a connection object for our context SLOT of L, from the cache or new, owned by this
 * process; NULL when out of memory. tp_conn_new_first() also counts its first holder (set-up,
 * attach); adopt keeps the count it had (fork). */
struct tp_conn *tp_conn_new(struct tp_link *l, uint32_t slot);
struct tp_conn *tp_conn_new_first(struct tp_link *l, uint32_t slot);
/* tp_connect.c: a committed client connection's ST word written again until the server answered
 * (the link may have lost the first write). */
void tp_conn_commit_repeat(struct tp_conn *c, uint64_t now, bool lost);
/* tp_witness.c: while the link is silent, look at C's witness socket (every 100 ms at most):
 * sets peer_died / peer_gone when the peer process is gone, silent_alive when it lives. */
void tp_witness_look(struct tp_conn *c, uint64_t now);
/* tp_witness.c, the writer's half: ON arms the reset of C's kernel socket (SO_LINGER {1, 0})
 * when C's bytes wait and the receiver does not answer our probes (tp_tx_timers()), !ON puts
 * the program's value back (an answer or everything validated, a failover or exec hand-over to
 * come, the kept socket about to close after its FIN's acknowledgement). The witness lock
 * is tried (WAIT: taken): false when busy (the next timer run tries again). _locked: the
 * caller holds the witness lock. */
bool tp_witness_rst(struct tp_conn *c, bool on, bool wait);
void tp_witness_rst_locked(struct tp_conn *c, bool on);

/* tp_conn.c: C is finished (unregistered, its slot released): keep it for the link's next set-up
 * (conn_take()) or free it. */
void tp_conn_recycle(struct tp_conn *c);
/* A connection's data shadow (Q bytes; its mapped chunks in *RET_MAPPED, tp_tx_prefault()) for
 * a ring granted to it: from L's pool of shadows given back, else from the process's huge-page
 * slab, else new; NULL: no memory. */
uint8_t *tp_shadow_get(struct tp_link *l, uint32_t q, uint64_t *ret_mapped);
/* Give shadow SH (Q bytes, chunks MAPPED mapped; NULL: none) back: to L's pool, or freed (the
 * pool holds up to RINGS, the peer's pool of rings, or TP_SHADOW_POOL_BYTES). */
void tp_shadow_put(struct tp_link *l, uint8_t *sh, uint32_t q, uint64_t mapped, uint32_t rings);
/* Shadows free in this process's huge-page slab (tp_conn.c; 0 without one): for tests. */
uint32_t tp_shadow_slab_free(void);
/* fork around the slab's leaf lock: PHASE 0 before (taken), 1 in the parent, 2 in the child. */
void tp_shadow_slab_atfork(int phase);
void tp_conn_cache_drain(struct tp_link *l);  /* frees them all */
void tp_conn_cache_trim(struct tp_link *l);   /* every 500 ms: unused, half are freed */

/* tp_conn.c: single-owner rule. 0 when this process drives C (claiming it when nobody has since
 * the last fork), else -EPERM, which also fails C for this process only (c->error). */
int tp_conn_own_slow(struct tp_conn *c);
static inline int tp_conn_own(struct tp_conn *c)
{
	/* acquire: pairs with the release store in tp_conn_new() / tp_conn_own_slow() (same
	 * process, other thread) */
	if (likely(atomic_load_explicit(&c->owned, memory_order_acquire)))
		return 0;
	return tp_conn_own_slow(c);
}

/* C's error, 0 or -errno, set once (tp_set_error_at()). Acquire: pairs with the release of
 * the compare-and-exchange there, so what the setter did before is seen with the error. */
static inline int tp_conn_err(const struct tp_conn *c)
{
	return atomic_load_explicit(&c->error, memory_order_acquire);
}

/* Is a merged message held (tp_tx_merge.c)? Relaxed: written under tx_lock, which the send
 * side holds when it reads; a reader without it (waits, the helper) takes a hint. */
static inline bool tp_tx_held(const struct tp_conn *c)
{
	return atomic_load_explicit(&c->held, memory_order_relaxed);
}

/* Has validation reached the peer's FIN? Relaxed: written under rx_lock, which the receive
 * side holds when it reads; a reader without it (the send side, waits) takes a hint. */
static inline bool tp_rx_fin_seen(const struct tp_conn *c)
{
	return atomic_load_explicit(&c->fin_rcvd_v, memory_order_relaxed);
}

/* tp_wait.c: publish our "sleeping, ring me" flag WORD in the peer's slot (on change only) */
void tp_set_wait_flag(struct tp_conn *c, uint32_t word, bool *cur, bool on);
/* tp_set_wait_flag()'s store, flush and fence, whether or not the flag changed (FB_WAIT: with
 * TP_FBW_NEWS while c->rx_news). */
void tp_fb_wait_write(struct tp_conn *c, uint32_t word, bool on);
/* Under rx_lock: FB_WAIT's TP_FBW_DIRECT or TP_FBW_WORD (BIT), or neither (0) (written when it
 * changes, as tp_set_wait_flag()). */
void tp_set_wait_direct(struct tp_conn *c, uint8_t bit);
/* Under rx_lock: no ring asked for any more (TP_FBW_RING, EVENT; DIRECT or WORD unless a
 * sleeper of tp_wait_one() on them counts; NEWS stays). */
void tp_rx_wait_clear(struct tp_conn *c);
/* Under rx_lock: ask the peer to ring for data. EVFD: the asker sleeps on the process's event
 * fd (poll, epoll), and may be rung there directly (TP_FBW_EVENT) while every asker so far
 * does; otherwise the doorbell (TP_FBW_RING). True when FB_WAIT was written. */
bool tp_rx_ask_ring(struct tp_conn *c, bool evfd);
/* tp_link.c: the claim slot to name in TP_FBW_EVENT for a sleeper of L on the event fd, -1
 * when the peer is not to be asked (no event fd yet, a peer without NTB_CAP_EV_RING, a backend
 * that cannot publish). */
int tp_link_ev_slot(struct tp_link *l);
/* TX_WAIT's TP_TXW_* bits (under tx_lock; written when they change). */
void tp_set_tx_wait(struct tp_conn *c, uint32_t bits);
/* Under rx_lock, at a look that found nothing to read (SLEEP: the caller may sleep now): the
 * ring a held message's sender is owed (tp_int.h: TP_TXW_HELD). */
void tp_rx_idle(struct tp_conn *c, bool sleep);

/* --- [DRB] balancing (tp_stripe.c) -------------------------------------------------------------
 * A framed connection (both sides' links have balance on: TP_APPLY_FRAMED) carries its stream
 * as numbered frames over itself and, once its sender finds the link congested, over a second
 * connection (the stripe) on another link of the group. The public calls of transport.h on it
 * go to tp_stripe.c, which calls the single-connection versions below on each. */
ssize_t tp_send_one(struct tp_conn *c, const struct iovec *iov, int iovcnt);
ssize_t tp_recv_one(struct tp_conn *c, const struct iovec *iov, int iovcnt, int flags);
unsigned tp_poll_one(struct tp_conn *c);
unsigned tp_poll_peek_one(struct tp_conn *c);
unsigned tp_poll_dir_one(struct tp_conn *c, unsigned want, bool arm);
int tp_wait_one(struct tp_conn *c, unsigned events, int timeout_ms);
size_t tp_readable_bytes_one(struct tp_conn *c);
bool tp_readable_hint_one(struct tp_conn *c);
uint64_t tp_rx_arrivals_one(struct tp_conn *c);
uint64_t tp_rx_arm_arrival_one(struct tp_conn *c);
const void *tp_rx_news_arm_one(struct tp_conn *c, bool ring, uint64_t *ret_seen,
			       struct tp_news_sums *ret_sums);
bool tp_send_fits_one(struct tp_conn *c, size_t len, bool arm);
bool tp_writable_hint_one(struct tp_conn *c, size_t len);
size_t tp_unacked_bytes_one(struct tp_conn *c);
int tp_shutdown_one(struct tp_conn *c, int how);
void tp_close_one(struct tp_conn *c);
void tp_abort_one(struct tp_conn *c);
int tp_conn_failover_state_one(struct tp_conn *c);
int tp_conn_export_one(struct tp_conn *c, int timeout_ms, uint64_t *ret_token);
void tp_conn_set_sndbuf_one(struct tp_conn *c, uint32_t bytes);
int tp_conn_error_one(struct tp_conn *c);
/* Payload bytes a tp_send_one() on C would take whole now, at least (0: none): the data ring's
 * room less every message's descriptor and alignment, or the free inline slots' (tp_fast.c). */
size_t tp_tx_room(struct tp_conn *c);
/* A new framed connection C (client: it set the stripe up): its stripe state; -ENOMEM. */
int tp_stripe_new(struct tp_conn *c, bool client);
/* C is recycled: it lets go of its stream (the handle's state, a part's reference: the last
 * one frees it). tp_stripe_ref(): one more connection names SP (a move's new one);
 * tp_stripe_moved(): part IDX is connection N now (a move done). */
void tp_stripe_free(struct tp_conn *c);
void tp_stripe_ref(struct tp_stripe *sp);
void tp_stripe_moved(struct tp_stripe *sp, int idx, struct tp_conn *n);
/* Does a new connection over L ask for a framed stream (balance on, another link in the group)? */
bool tp_stripe_wanted(struct tp_link *l);
/* Failover of a framed stream to the kernel socket (tp_failover.c calls these for part 0):
 * its tail as the program's bytes from *RET_START on, unframed, gathered from both parts'
 * shadows and the kept rest of a frame, in a new buffer with HDR bytes free in front (*RET,
 * *RET_LEN with them); the sends stop. Under C's (part 0's) tx_lock; -EAGAIN when another
 * lock is busy (next time), -ENOMEM, -EPROTO. */
int tp_stripe_fo_tail(struct tp_stripe *sp, struct tp_conn *c, size_t hdr, uint8_t **ret,
		      size_t *ret_len, uint64_t *ret_start);
/* The same with part 0's tail given (PART0, PART0_LEN: what it took for a move that then gave
 * way to the socket; NULL: from C's shadows, under C's tx_lock). */
int tp_stripe_fo_tail_from(struct tp_stripe *sp, struct tp_conn *c, const uint8_t *part0,
			   size_t part0_len, size_t hdr, uint8_t **ret, size_t *ret_len,
			   uint64_t *ret_start);
/* The program's bytes the stream delivered (its failover's "consumed"). */
uint64_t tp_stripe_rx_app(struct tp_stripe *sp);
/* The stream's receive lock, tried (0) / released: a failover's switch of the receive side. */
int tp_stripe_rx_trylock(struct tp_stripe *sp);
void tp_stripe_rx_unlock(struct tp_stripe *sp);
/* Part 1 of SP cannot go on (WHY): part 0 takes the stream to the kernel socket. */
void tp_stripe_part_lost(struct tp_stripe *sp, const char *why);
/* The failover state of SP's part 0 (enum tp_fo_state). */
int tp_stripe_part0_fo(struct tp_stripe *sp);
/* C's unreleased bytes in MSN order (and a moved connection's rest of tail after them), in a
 * new buffer of HDR + *RET_LEN bytes with HDR free in front; its stream offset of the first in
 * *RET_START. Under C's tx_lock (tp_failover.c). */
int tp_fo_collect(struct tp_conn *c, size_t hdr, uint8_t **ret, size_t *ret_len,
		  uint64_t *ret_start);
/* The tail C's own failover took (a move under way): a copy in *RET (*RET_LEN bytes); -ENOENT
 * (none taken: its shadows hold it, tp_fo_collect()), -EAGAIN (busy), -EPROTO (taken and gone). */
int tp_fo_snap_tail(struct tp_conn *c, uint8_t **ret, size_t *ret_len);

#endif
