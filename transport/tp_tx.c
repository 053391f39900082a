/* SPDX-License-Identifier: MIT */
/* The send side: inline / short / long messages into the peer's rings through the shadows
 * (the retransmission copies), and flow control. Merging of small writes is tp_tx_merge.c;
 * feedback, retransmission, Detect and the timers tp_retx.c; the prefix tp_prefix.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "transport/tp_int.h"
#include "transport/tp_tx_int.h"
#include "util/crc32c.h"
#include "util/log.h"

/* --- send side ------------------------------------------------------------------------------ */

/* The feedback unit and the ST word are written by the peer, so each read on the send path is a
 * cross-core (or cross-bridge) miss when they changed. tp_send() reads them all (tx_refresh())
 * when the cached credits do not cover a message, at least every TX_REFRESH_SENDS calls, and
 * whenever the raw ST or FB epoch word differs from what the last refresh saw (two loads that
 * hit the cache while nothing changes: no clock read per message); the timers read them too
 * (tp_tx_timers()). So a Retry epoch or an RST is seen by the next send, a CmpAck within a few
 * messages. */
#define TX_REFRESH_SENDS 16u

/* A data-ring message holds at most qsize / TX_MSG_DIV bytes, and a tp_send() that writes
 * several publishes each as it is written: a large write (more than the ring) is then copied
 * out by the receiver while the sender writes the next piece, instead of after the whole call
 * (1 MiB writes into a 1 MiB ring: 0.58-0.65 of the time per MiB, against qsize / 2 and one
 * publish per call; 64-256 KiB writes unchanged). */
#define TX_MSG_DIV 8u

/* Request/response: a write of 8 KiB or more that follows data we received on this connection
 * (since the previous such write) is probably a reply that the peer waits for whole. Its first
 * message is then a quarter of it, within [TX_PIECE_LO, TX_PIECE_HI], and each next one twice
 * the last (up to the cap above), so that the receiver copies out each piece while we write
 * the next. Ping-pong one-way, A/B against whole messages: 16 KiB 0.72-0.86 of the time,
 * 24 KiB 0.88, 64 KiB 0.79-0.82; 8 KiB and 128 KiB unchanged. A one-way stream keeps whole
 * messages (smaller pieces cost it 3-11 %). */
#define TX_PIECE_LO (4u << 10)
#define TX_PIECE_HI (16u << 10)

/* Write data-ring bytes [from, to) (free-running positions) from the shadow to the window. */
void tp_tx_write_data(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t q = c->out.qsize, len = to - from, p = from & (q - 1);
	uint32_t first = len < q - p ? len : q - p;

	if (len == 0)
		return;
	ntb_write(c->link->ntb, tp_out_data_base(c) + p, c->sh_data + p, first);
	if (len > first)
		ntb_write(c->link->ntb, tp_out_data_base(c), c->sh_data, len - first);
}

/* The same as tp_tx_write_data() through the link's DMA queue (Idle → Gather → Posted →
 * Done → Idle). False when the queue is unavailable or failed: the caller copies instead. */
static bool dma_range(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t q = c->out.qsize, len = to - from, p = from & (q - 1);
	uint32_t first = len < q - p ? len : q - p;
	bool ok;

	if (!c->dmaq || len == 0)
		return false;
	ok = ntb_dmaq_enqueue(c->dmaq, tp_out_data_base(c) + p, c->sh_data + p, first) == 0 &&
	     (len == first ||
	      ntb_dmaq_enqueue(c->dmaq, tp_out_data_base(c), c->sh_data, len - first) == 0) &&
	     ntb_dmaq_post(c->dmaq) == 0 && ntb_dmaq_wait(c->dmaq, -1) == 0;
	if (ntb_dmaq_state(c->dmaq) == NTB_DMAQ_POSTED)
		ntb_dmaq_abort(c->dmaq);
	if (ntb_dmaq_state(c->dmaq) != NTB_DMAQ_IDLE && ntb_dmaq_reset(c->dmaq) != 0) {
		ntb_dmaq_destroy(c->dmaq); /* a queue stuck in a state: stop using it */
		c->dmaq = NULL;
	}
	return ok;
}

/* The last step of writing an inline slot to a plain write-back window (ntb_out_direct()) at
 * D, whose bytes [off, 124) are stored: bytes 124-127 (the rest of the CRC, the flags and the
 * sequence byte that publishes the slot, LAST in little-endian order) in one aligned store. */
static inline void inline_seal(uint8_t *d, uint32_t last)
{
	static_assert(TP_INL_SEQ == 127 && TP_INL_FLAGS == 126, "inline slot's last word");
	/* release: payload and header before the sequence byte that publishes the slot; pairs
	 * with the acquire load of the sequence byte in tp_rx_seq_ready() and rx_inline_direct() */
	atomic_store_explicit((_Atomic uint32_t *)(void *)(d + 124), last, memory_order_release);
}

/* The last step of writing inline slot POS from shadow slot S to the window, the one way a
 * slot is published: its sequence byte after everything before it. A plain window: the
 * caller stored bytes [off, 124), inline_seal() the rest. Through the ntb API: bytes
 * [OFF, 127) from S, the barrier, then the sequence byte. */
static void inline_publish(struct tp_conn *c, uint32_t pos, const uint8_t *s, unsigned off)
{
	uint8_t *d = c->link->out_direct;

	if (d) {
		uint32_t last;

		memcpy(&last, s + 124, 4);
		inline_seal(d + tp_out_inline_off(c, pos), last);
		return;
	}
	ntb_write(c->link->ntb, tp_out_inline_off(c, pos) + off, s + off, TP_INL_SEQ - off);
	/* payload and header before the sequence byte that publishes the slot; pairs with the
	 * acquire load of the sequence byte in tp_rx_seq_ready() */
	ntb_to_peer_barrier(c->link->ntb);
	ntb_write8(c->link->ntb, tp_out_inline_off(c, pos) + TP_INL_SEQ, s[TP_INL_SEQ]);
}

static void write_inline_slot(struct tp_conn *c, uint32_t pos)
{
	uint8_t *s = c->sh_inline + (pos & (c->out.inline_n - 1)) * 128u;
	uint8_t *d = c->link->out_direct;
	uint16_t len;
	unsigned off;

	memcpy(&len, s + TP_INL_LEN, 2);
	off = tp_inline_off(len > TP_INLINE_MAX ? TP_INLINE_MAX : len);
	if (d) {
		/* Plain write-back window (ntb_out_direct()): the table's bytes [off, 124) in
		 * fixed-size moves (no calls, no length dispatch) */
		d += tp_out_inline_off(c, pos);
		if (off == 0)
			memcpy(d, s, 64);
		if (off <= 64) {
			memcpy(d + 64, s + 64, 32);
			memcpy(d + 96, s + 96, 16);
		}
		memcpy(d + 112, s + 112, 12);
	}
	inline_publish(c, pos, s, off);
}

/* The next at most MAX bytes of the cursor in one piece (empty iovecs skipped): sets *SRC,
 * returns the length and advances the cursor past them. */
static size_t iov_take(struct iov_cur *ic, size_t max, const uint8_t **src)
{
	while (ic->iov[ic->i].iov_len == ic->off) {
		ic->i++;
		ic->off = 0;
	}
	size_t n = ic->iov[ic->i].iov_len - ic->off;

	if (n > max)
		n = max;
	*src = (const uint8_t *)ic->iov[ic->i].iov_base + ic->off;
	ic->off += n;
	return n;
}

/* Gather LEN bytes from the iovec cursor into DST, fusing the CRC; returns the CRC. */
static inline __attribute__((always_inline)) uint32_t
gather_crc(struct iov_cur *ic, uint8_t *dst, size_t len, uint32_t crc)
{
	while (len) {
		const uint8_t *src;
		size_t n = iov_take(ic, len, &src);

		crc = crc32c_copy(crc, dst, src, n);
		dst += n;
		len -= n;
	}
	return crc;
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* send_inline() into a plain write-back window (ntb_out_direct()) at shadow slot S: the payload
 * goes from the caller to the shadow and the window in one pass (one load, two stores per
 * word), the header from registers. Nothing is read back from the shadow just written:
 * write_inline_slot()'s loads of it would each wait for several of those stores to drain (no
 * store forwarding from several stores), ~15 % of a 64-byte send. The window gets the table's
 * bytes [off, 127], as write_inline_slot() writes them: the padding zeroed first, then payload
 * and header, and last the word that holds the sequence byte. */
static void send_inline_direct(struct tp_conn *c, struct iov_cur *ic, uint8_t *s, uint32_t pos,
			       unsigned len, uint8_t flags, uint8_t seq)
{
	uint8_t *d = c->link->out_direct + tp_out_inline_off(c, pos);
	unsigned off = tp_inline_off(len);
	typedef uint8_t v16 __attribute__((vector_size(16)));
	const v16 zero16 = { 0 };
	uint32_t crc = c->nonce_out, h1;
	uint64_t h0;

	/* zero [off, 116) in fixed-size stores, written out (a memset() or a loop of these
	 * sizes becomes rep stos, slower than the whole send); the payload lands on it below.
	 * From offset 0 the payload has 53 bytes or more: only [48, 116) can be padding. */
	if (off == 0)
		memcpy(d + 48, &zero16, 16);
	if (off <= 64) {
		memcpy(d + 64, &zero16, 16);
		memcpy(d + 80, &zero16, 16);
		memcpy(d + 96, &zero16, 16);
	}
	memcpy(d + 112, &zero16, 4);
	if (ic->cnt == 1) {
		/* one buffer (that holds LEN more bytes): no cursor walk */
		crc = crc32c_copy2(crc, d + off, s + off,
				   (const uint8_t *)ic->iov[0].iov_base + ic->off, len);
		ic->off += len;
	} else {
		for (unsigned done = 0; done < len;) {
			const uint8_t *src;
			size_t n = iov_take(ic, len - done, &src);

			crc = crc32c_copy2(crc, d + off + done, s + off + done, src, n);
			done += (unsigned)n;
		}
	}
	tp_inline_hdr_words(len, c->msn_next, flags, seq, crc, &h0, &h1);
	memcpy(s + TP_INL_LEN, &h0, 8);
	memcpy(s + TP_INL_FLAGS - 2, &h1, 4);
	memcpy(d + TP_INL_LEN, &h0, 8);
	inline_seal(d, h1); /* (as inline_publish(), from registers) */
}
#endif

/* TP_W_TX_SENT after an inline message with bytes (msn_next: the MSN after it). After the slot
 * in program order, no barrier: it orders nothing the receiver reads, and a sender that dies
 * between the two left the slot whole. */
static inline void tx_sent_word(struct tp_conn *c)
{
	uint64_t w = TP_SENT_WORD(c->nonce_out, c->msn_next);
	uint8_t *d = c->link->out_direct;

	if (d)
		/* relaxed: as ntb_write64() */
		atomic_store_explicit((_Atomic uint64_t *)(void *)(d + c->out.slot_off + TP_W_TX_SENT),
				      w, memory_order_relaxed);
	else
		ntb_write64(c->link->ntb, c->out.slot_off + TP_W_TX_SENT, w);
}

static void send_inline(struct tp_conn *c, struct iov_cur *ic, unsigned len, uint8_t flags)
{
	/* MSN order across rings: earlier data-ring messages are published before this one */
	if (c->tx_d != c->tx_d_pub)
		tp_tx_publish(c);
	uint32_t pos = c->tx_i;
	uint8_t *s = c->sh_inline + (pos & (c->out.inline_n - 1)) * 128u;
	uint8_t seq = tp_inline_seq(pos, c->out.log2n, c->seq_base_out);

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (c->link->out_direct) {
		send_inline_direct(c, ic, s, pos, len, flags, seq);
	} else
#endif
	{
		unsigned off = tp_inline_off(len);
		uint32_t crc;

		/* the window gets [off, 127] from the shadow: padding as zeros (as the direct
		 * path writes it), not an earlier lap's bytes */
		memset(s + off + len, 0, TP_INL_LEN - off - len);
		crc = gather_crc(ic, s + off, len, c->nonce_out);
		tp_inline_finish(s, len, c->msn_next, flags, seq, crc);
		write_inline_slot(c, pos);
	}
	c->tx_i++;
	c->msn_next++;
	if (len)
		tx_sent_word(c);
	TP_STAT_ADD(c->st->tx_msgs_inline, 1);
	/* the next slot's two lines, when the receiver released it (as tp_tx_prefetch()) */
	if (c->link->out_direct && tp_tx_inline_free(c)) {
		const uint8_t *nd = c->link->out_direct + tp_out_inline_off(c, c->tx_i);

		prefetch_write(nd);
		prefetch_write(nd + CACHELINE);
	}
	if (unlikely(c->epoch_unconfirmed)) {
		/* as tp_tx_publish(): our last retransmit()'s epoch word once more, after the slot
		 * (a lost one leaves the receiver ignoring everything until it sees it); pairs
		 * with the acquire load of TX_EPOCH in tp_rx_progress() */
		ntb_to_peer_barrier(c->link->ntb);
		tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch | (uint32_t)c->detect_seq << 16);
		ntb_wc_flush(c->link->ntb);
	}
}

/* Copy LEN bytes from the iovec cursor to data-ring position POS (free-running; may wrap) of
 * both the window and the shadow in one pass over the caller's data, fusing the CRC; returns
 * the CRC. The shadow always ends up with the bytes checksummed (retransmission source). */
uint32_t tp_tx_gather_out(struct tp_conn *c, struct iov_cur *ic, uint32_t pos, uint32_t len,
			   uint32_t crc)
{
	uint32_t q = c->out.qsize;

	while (len) {
		uint32_t p = pos & (q - 1);
		const uint8_t *src;
		size_t n = iov_take(ic, len < q - p ? len : q - p, &src);

		if (ntb_write_dup_crc(c->link->ntb, tp_out_data_base(c) + p, c->sh_data + p, src, n,
				      crc, &crc) < 0)
			crc = crc32c_copy(crc, c->sh_data + p, src, n); /* as a failed ntb_write */
		pos += (uint32_t)n;
		len -= (uint32_t)n;
	}
	return crc;
}

/*
 * Zero the bytes of a data-ring message at POS that hold neither its descriptor nor its payload
 * in the shadow: the long protocol's gap up to the payload's 128-byte boundary, and the
 * padding after the payload up to TP_DATA_ALIGN. Nothing else writes them, and retransmit()
 * rewrites [fb_rx_d, tx_d) whole from the shadow: left alone they would carry what the shadow
 * held before (the heap's bytes from aligned_alloc(), or a recycled connection's) into the
 * peer's window. The ring holds only descriptors, payloads and these, so every byte a
 * retransmission sends is the program's, a header or zero. Before the payload is copied: the
 * tail's one 16-byte store also covers payload bytes, which the copy then overwrites. Neither
 * range wraps: POS is 16-aligned and the ring a multiple of 128 bytes.
 */
void tp_tx_zero_gaps(struct tp_conn *c, uint32_t pos, uint32_t gap, uint32_t len)
{
	uint32_t q = c->out.qsize;

	static_assert(TP_DATA_ALIGN == 16, "one 16-byte store of padding");
	if (gap > TP_DESC_SIZE)
		memset(c->sh_data + ((pos + TP_DESC_SIZE) & (q - 1)), 0, gap - TP_DESC_SIZE);
	if (len % TP_DATA_ALIGN)
		memset(c->sh_data + ((pos + gap + (len & ~(TP_DATA_ALIGN - 1))) & (q - 1)), 0,
		       TP_DATA_ALIGN);
}

/* A message of footprint FP at ring position POS while the data ring's pages are not all
 * mapped: map them with a system call each where a fresh process would fault on each 4 KiB page
 * of its first lap (its first megabyte ran at half speed). The window's ring an eighth at a
 * time, the parts the message reaches, once per part and process (tp_link_ring_prefault());
 * the shadow, private to the connection, a chunk at a time (64 KiB, or a 64th of the ring), the
 * message's and the next: a connection that sends a few messages maps a few chunks, not the
 * whole ring (10,000 connections each sending one 2000 B message spent a quarter of their time
 * mapping 512 KiB shadows; a Node.js client's 400 short connections, each granted a ring its
 * process had not used, spent 240 us each mapping the window's 512 KiB and its peer as much). */
static __attribute__((noinline, cold)) void tp_tx_prefault(struct tp_conn *c, uint32_t pos,
							   uint32_t fp)
{
	uint32_t q = c->out.qsize, cs = q / 64u > 65536u ? q / 64u : 65536u;

	if (!c->tx_ring_mapped)
		c->tx_ring_mapped = tp_link_ring_prefault(c->link, true, c->ent->peer_ring,
							  tp_out_data_base(c), q, pos, fp);
	if (cs > q)
		cs = q;
	uint32_t nch = q / cs, p = pos & (q - 1), first = p / cs;
	uint32_t cnt = (p % cs + fp + cs - 1u) / cs + 1u; /* (and the next one) */
	uint64_t all = nch >= 64u ? ~UINT64_C(0) : (UINT64_C(1) << nch) - 1u;

	for (uint32_t k = 0; k < cnt && k < nch; k++) {
		uint32_t ch = (first + k) % nch;

		if (!(c->sh_mapped & (UINT64_C(1) << ch))) {
			ntb_prefault_mem(c->sh_data + (size_t)ch * cs, cs);
			c->sh_mapped |= UINT64_C(1) << ch;
		}
	}
	c->tx_faulted = (c->sh_mapped & all) == all && c->tx_ring_mapped;
}

static void send_data(struct tp_conn *c, struct iov_cur *ic, uint32_t len, uint8_t type,
		      uint8_t flags)
{
	uint32_t q = c->out.qsize, pos = c->tx_d;
	uint32_t gap = tp_payload_gap(type, pos), fp = tp_footprint(type, pos, len);
	struct tp_desc d = { .type = type, .flags = flags, .len = len, .msn = c->msn_next };
	/* a DMA engine of its own moves long payloads from the shadow; with the default CPU-copy
	 * engine the queue would only add its state machine to the same copy: write directly */
	bool via_dmaq = type == TP_MT_LONG && c->dmaq && !ntb_dmaq_cpu_engine(c->dmaq);
	uint32_t crc;

	if (__builtin_expect(!c->tx_faulted, 0))
		tp_tx_prefault(c, pos, fp);
	tp_tx_zero_gaps(c, pos, gap, len);
	if (via_dmaq) {
		uint32_t pp = (pos + gap) & (q - 1), first = len < q - pp ? len : q - pp;

		crc = gather_crc(ic, c->sh_data + pp, first, c->dseed_out);
		if (len > first)
			crc = gather_crc(ic, c->sh_data, len - first, crc);
	} else {
		crc = tp_tx_gather_out(c, ic, pos + gap, len, c->dseed_out);
	}
	d.crc = tp_desc_crc(crc, &d);
	memcpy(c->sh_data + (pos & (q - 1)), &d, sizeof(d)); /* never wraps: 16-aligned */
	/* the descriptor after its payload (its CRC covers it); both before tp_tx_publish() */
	tp_tx_write_data(c, pos, pos + TP_DESC_SIZE);
	/* (a DMA transfer is Done when its writes reached the window: tp_tx_publish()'s barrier
	 * orders them before TX_D as it does the CPU's) */
	if (via_dmaq && !dma_range(c, pos + gap, pos + gap + len))
		tp_tx_write_data(c, pos + gap, pos + gap + len);
	if (type == TP_MT_LONG)
		TP_STAT_ADD(c->st->tx_msgs_long, 1);
	else
		TP_STAT_ADD(c->st->tx_msgs_short, 1);
	c->tx_d = pos + fp;
	c->msn_next++;
}

/* Writes below this size have the window's lines of the next one asked for (tp_tx_prefetch()),
 * and below the size from which the selected CRC implementation copies in two passes
 * (crc32c_copy2_split_len(): 4 KiB on the AVX-512 and AVX2 paths), whose memcpy() writes whole
 * lines without reading them. */
#define TX_PREFETCH_CAP (8u << 10)

/* The size below which a write's successor's lines are prefetched; per process (the CRC
 * implementation is chosen once). Relaxed: racing threads store the same value. */
static uint32_t tx_prefetch_below(void)
{
	static _Atomic uint32_t below;
	uint32_t b = atomic_load_explicit(&below, memory_order_relaxed);

	if (unlikely(!b)) {
		size_t s = crc32c_copy2_split_len();

		b = s < TX_PREFETCH_CAP ? (uint32_t)s : TX_PREFETCH_CAP;
		atomic_store_explicit(&below, b, memory_order_relaxed);
	}
	return b;
}

/*
 * After a write below tx_prefetch_below() into a plain write-back window: ask for the data ring's
 * lines from position POS on, where the next write goes, for BYTES, as far as the ring's room
 * reaches (lines the receiver released: it read them a lap ago). Their stores then find them
 * owned: on far cores each line the receiver read last was a cross-core round trip at the
 * first store, and the fence after it (tp_wake_peer()) waited for all of them: a 1 KiB stream
 * ran at 55-60 % of the rate (Zen 5, far vCPUs). Lines asked for already (tx_pf) are not asked
 * again: small writes move a few bytes each. Only a hint: no fault, nothing changes in memory.
 */
static void tp_tx_prefetch(struct tp_conn *c, uint32_t pos, uint32_t bytes)
{
	uint32_t q = c->out.qsize, from = pos & ~(CACHELINE - 1u);
	uint32_t end = from + ALIGN_UP(bytes, CACHELINE); /* (whole lines: tx_pf stays aligned) */
	uint32_t room = (c->tx_d + tp_tx_data_free(c)) & ~(CACHELINE - 1u), p, n;
	const uint8_t *ring;

	if ((int32_t)(end - room) > 0)
		end = room; /* (not the receiver's unreleased lines) */
	if (c->tx_pf - from <= bytes)
		from = c->tx_pf; /* asked for up to there already */
	if ((int32_t)(end - from) <= 0)
		return;
	p = from & (q - 1);
	n = end - from;
	if (n > q - p)
		n = q - p; /* (the next call goes on at the ring's start) */
	ring = c->link->out_direct + tp_out_data_base(c);
	for (uint32_t off = 0; off < n; off += CACHELINE)
		prefetch_write(ring + p + off);
	c->tx_pf = from + n;
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Largest write that send_short_direct() takes: up to it, a small write's data-ring message costs
 * about what an inline one does (no cursor, no ntb calls, the descriptor from registers). */
#define TX_SHORT_DIRECT_MAX 1024u

/*
 * One short message of LEN bytes from SRC (one buffer) into a plain write-back window
 * (ntb_out_direct()), published at once: the payload to shadow and window in one pass, the
 * descriptor and TX_D from registers, stored in the order send_data() + tp_tx_publish() write
 * them (payload, descriptor, then TX_D after a release fence). The caller checked that it
 * fits the data ring's room; false (nothing written) where it would wrap at the ring's end or a
 * retransmission's epoch word is still repeated (tp_tx_publish() does that): send_data() then.
 */
static bool send_short_direct(struct tp_conn *c, const uint8_t *src, uint32_t len)
{
	uint32_t q = c->out.qsize, pos = c->tx_d, p = pos & (q - 1), crc;
	uint32_t fp = TP_DESC_SIZE + (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);
	uint8_t *s = c->sh_data + p, *d;
	uint64_t w0, w1;

	if (p + fp > q || c->epoch_unconfirmed)
		return false;
	if (__builtin_expect(!c->tx_faulted, 0))
		tp_tx_prefault(c, pos, fp);
	d = c->link->out_direct + tp_out_data_base(c) + p;
	/* the shadow's padding after the payload as zeros (retransmissions rewrite it whole:
	 * tp_tx_zero_gaps()); the copy below overwrites the payload part of these 16 bytes */
	if (len % TP_DATA_ALIGN)
		memset(s + TP_DESC_SIZE + (len & ~(TP_DATA_ALIGN - 1)), 0, TP_DATA_ALIGN);
	crc = crc32c_copy2(c->dseed_out, d + TP_DESC_SIZE, s + TP_DESC_SIZE, src, len);
	/* the descriptor from registers (tp_desc_crc_words()) */
	crc = tp_desc_crc_words(crc, TP_MT_SHORT, len, c->msn_next, &w0, &w1);
	memcpy(s, &w0, 8);
	memcpy(s + 8, &w1, 8);
	/* release: the payload before the descriptor, which a receiver takes the message by
	 * before TX_D (tp_recv.c: rx_short_direct(); its CRC catches the other order, at the
	 * cost of waiting for TX_D) */
	atomic_thread_fence(memory_order_release);
	memcpy(d, &w0, 8);
	memcpy(d + 8, &w1, 8);
	c->tx_d = pos + fp;
	c->msn_next++;
	TP_STAT_ADD(c->st->tx_msgs_short, 1);
	/* release: payload and descriptor before TX_D, which publishes them; pairs with the
	 * acquire load of TX_D in rx_data() (as tp_tx_publish(): ntb_to_peer_barrier() is this
	 * fence on a plain window) */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit((_Atomic uint64_t *)(void *)(c->link->out_direct + c->out.slot_off +
							   TP_W_TX_D),
			      tp_cw_make(c->nonce_out, c->tx_d), memory_order_relaxed);
	c->tx_d_pub = c->tx_d;
	c->tx_dirty = true;
	c->last_tx_pub_ms = 0;
	return true;
}
#endif

/* Publish tx_d after the data it covers; pairs with the acquire load in rx_data(). */
void tp_tx_publish(struct tp_conn *c)
{
	if (tp_tx_held(c)) /* its descriptor, final now (held_desc()), after its payload */
		tp_tx_write_data(c, c->held_pos, c->held_pos + TP_DESC_SIZE);
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_TX_D, c->tx_d);
	if (unlikely(c->epoch_unconfirmed)) {
		/* the epoch word of our last retransmit() once more (it may have been lost, and
		 * the receiver ignores everything until it sees it): after TX_D and the data, as
		 * there; pairs with the acquire load of TX_EPOCH in tp_rx_progress() */
		ntb_to_peer_barrier(c->link->ntb);
		tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch | (uint32_t)c->detect_seq << 16);
	}
	c->tx_d_pub = c->tx_d;
	ntb_wc_flush(c->link->ntb);
	c->tx_dirty = true;
	c->last_tx_pub_ms = 0; /* stamped by the next timer run (no clock read per message) */
	if (tp_tx_held(c)) {
		/* nothing held any more (after TX_D, which covers it now: a death of ours between
		 * the two finds the message both published and described, and takes it once) */
		tp_tx_held_word(c, 0);
		/* (relaxed: tp_tx_flush_held()'s unlocked look is a hint) */
		atomic_store_explicit(&c->held, false, memory_order_relaxed);
		atomic_fetch_sub_explicit(&c->link->held_conns, 1, memory_order_relaxed);
	}
}

void tp_conn_set_sndbuf_one(struct tp_conn *c, uint32_t bytes)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	atomic_store_explicit(&c->tx_cap, bytes, memory_order_relaxed); /* read by tp_tx_data_free() */
}

/* Largest payload a data message at tx_d may carry now (0: none fits). */
uint32_t tp_data_room(const struct tp_conn *c, uint8_t type)
{
	uint32_t fr = tp_tx_data_free(c), gap = tp_payload_gap(type, c->tx_d);

	if (fr <= gap + TP_DATA_ALIGN)
		return 0;
	return (fr - gap) & ~(TP_DATA_ALIGN - 1);
}

/* Per-send checks of process-local state only (the peer's ST word: tx_refresh()). */
static int tx_check(struct tp_conn *c)
{
	int err = tp_conn_err(c);

	if (err)
		return err;
	if (unlikely(tp_fo_get(c)))
		return tp_fo_get(c) == TP_FO_DONE ? -EXDEV : -EAGAIN; /* (failed: error set) */
	if (c->wr_shut)
		return -EPIPE;
	/* link state as the helper thread last saw it (every ≤ 100 ms), as tp_conn_peer_lost() */
	if (atomic_load_explicit(&c->link->lost, memory_order_relaxed) ||
	    atomic_load_explicit(&c->peer_gone, memory_order_relaxed) ||
	    atomic_load_explicit(&c->link->peer_epoch, memory_order_relaxed) != c->peer_epoch) {
		/* not c->error: the receive side still delivers what arrived, then ends */
		if (tp_conn_peer_lost(c))
			return -ECONNRESET;
		return tp_fo_get(c) ? -EAGAIN : 0;
	}
	return 0;
}

/* Read the peer-written words (ST flags, feedback); 0 or the connection's error. */
static int tx_refresh(struct tp_conn *c)
{
	c->tx_fresh_sends = 0;
	c->tx_seen_st = tp_slot_raw(c, TP_W_ST_FLAGS);
	/* (atomic: tp_tx_retry_check() compares it without the tx lock) */
	atomic_store_explicit(&c->tx_seen_ep, tp_slot_raw(c, TP_W_FB_EPOCH), memory_order_relaxed);
	if (tp_conn_peer_lost(c)) {
		/* release: pairs with the loads of peer_gone in tp_close() and tp_witness_look()
		 * (tp_close.c, tp_witness.c), which then skip what this send just found */
		atomic_store_explicit(&c->peer_gone, true, memory_order_release);
		return -ECONNRESET;
	}
	if (tp_fo_get(c))
		return -EAGAIN;
	tp_tx_feedback(c);
	return tp_conn_err(c);
}

/* Must tp_send() read the peer-written words before sending TOTAL bytes? */
static bool tx_stale(struct tp_conn *c, size_t total)
{
	const struct tp_params *pp = &c->link->params;

	/* (relaxed: a hint only; tx_refresh() reads the words through tp_slot_word()) */
	if (++c->tx_fresh_sends >= TX_REFRESH_SENDS || total == 0 || c->retry_wait ||
	    tp_slot_raw(c, TP_W_ST_FLAGS) != c->tx_seen_st ||
	    tp_slot_raw(c, TP_W_FB_EPOCH) != c->tx_seen_ep)
		return true;
	if (total <= pp->inline_max && tp_tx_inline_free(c) > 0)
		return false;
	/* the inline slots ran out by the cached credits: the receiver's release probably freed
	 * some (a ping-pong's message would otherwise go to the data ring, at twice the latency
	 * with a ring of 8 slots), unless a look a few sends ago found none */
	if (total <= pp->inline_max && c->tx_fresh_sends > 4)
		return true;
	/* a few messages' descriptors and alignment besides the bytes */
	return tp_tx_data_free(c) < total + 4u * 128u;
}

int tp_tx_fin(struct tp_conn *c)
{
	struct iov_cur ic = { 0 };

	if (c->fin_sent)
		return 0;
	tp_tx_timers_start(c);
	if (tp_tx_inline_free(c) > 0) {
		c->fin_msn = c->msn_next;
		send_inline(c, &ic, 0, TP_MSG_FIN);
	} else if (tp_data_room(c, TP_MT_SHORT) > 0) {
		c->fin_msn = c->msn_next;
		send_data(c, &ic, 0, TP_MT_SHORT, TP_MSG_FIN);
		tp_tx_publish(c);
	} else {
		return -EAGAIN;
	}
	c->fin_sent = true;
	tp_wake_peer(c, TP_W_FB_WAIT);
	return 0;
}

/* Did the peer end its side in order (its FIN arrived) before it went away or reset? Then, as
 * over kernel TCP (CLOSE_WAIT), a send fails with EPIPE rather than ECONNRESET, and the first
 * send after a peer that went away without a reset still succeeds (the closed peer drops the
 * bytes and answers with a reset). The FIN flag is the receive side's, set once: relaxed. */
static bool peer_closed(struct tp_conn *c)
{
	return atomic_load_explicit(&c->fin_rcvd_v, memory_order_relaxed) && !tp_fo_get(c);
}

ssize_t tp_send_one(struct tp_conn *c, const struct iovec *iov, int iovcnt)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	if (unlikely(atomic_load_explicit(&c->pre_on, memory_order_relaxed))) {
		/* acquire: pairs with the release stores of pre_fin in tp_prefix_set() and
		 * tp_shutdown() (tp_close.c) */
		if (atomic_load_explicit(&c->pre_fin, memory_order_acquire))
			return -EPIPE; /* (shut before its tail was out) */
		/* (another thread sending the prefix is waited for: a send into a connection with
		 * room is never refused for it) */
		int r = tp_prefix_flush_wait(c);

		if (r)
			return r;
	}
	ssize_t n = tp_tx_send(c, iov, iovcnt);

	tp_act_mark(c); /* (after tx_lock: what it sent is timer work, tp_active.c) */
	return n;
}

/* The whole write as one message, when a quick way takes it: into the held message (a small
 * write of a stream while the receiver is behind), one inline message, or one small data-ring
 * message written directly. Under tx_lock. */
static bool tx_send_whole(struct tp_conn *c, struct iov_cur *ic, size_t total)
{
	const struct tp_params *pp = &c->link->params;

	/* relaxed: tx_streak is a hint the receive side clears */
	bool stream = atomic_load_explicit(&c->tx_streak, memory_order_relaxed);

	if (total <= TX_MERGE_WRITE && total <= pp->short_max &&
	    (tp_tx_held(c) || (tp_tx_rx_surely_behind(c) && stream &&
			       (tp_tx_feedback(c), tp_tx_rx_surely_behind(c)))) &&
	    tp_tx_merge(c, ic, (uint32_t)total))
		return true;
	if (ic->cnt == 1 && total <= pp->inline_max && tp_tx_inline_free(c) > 0) {
		/* one buffer, one inline message (a ping-pong's): without the bookkeeping of the
		 * cursor and the pieces below (~5 % of a 64-byte send + receive on one core) */
		send_inline(c, ic, (unsigned)total, 0);
		return true;
	}
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* one buffer, one small data-ring message: the same for writes just above the inline
	 * limit (before: twice the instructions of an inline message) */
	if (ic->cnt == 1 && total <= TX_SHORT_DIRECT_MAX && total <= pp->short_max &&
	    c->link->out_direct && c->tx_d == c->tx_d_pub &&
	    tp_data_room(c, TP_MT_SHORT) >= total &&
	    send_short_direct(c, ic->iov[0].iov_base, (uint32_t)total))
		return true;
#endif
	return false;
}

/* The first piece of a write of TOTAL bytes: a quarter of it, within [TX_PIECE_LO,
 * TX_PIECE_HI], while our own reader is busy too (a two-way stream); else the most a message
 * may take. */
static uint32_t tx_first_piece(struct tp_conn *c, size_t total)
{
	uint32_t cap = c->out.qsize / TX_MSG_DIV, piece = cap;

	if (total >= 2u * TX_PIECE_LO) {
		/* relaxed: our own reader's counter, a hint only (partner: TP_STAT_ADD) */
		uint64_t rx = atomic_load_explicit(&c->st->rx_bytes, memory_order_relaxed);

		if (rx != c->tx_rx_seen) {
			size_t q = total / 4u;

			q = q < TX_PIECE_LO ? TX_PIECE_LO : q > TX_PIECE_HI ? TX_PIECE_HI : q;
			piece = q < cap ? (uint32_t)q : cap;
		}
		c->tx_rx_seen = rx;
	}
	return piece;
}

/* tx_send_pieces() found the cached credits (inline slots or data-ring room) used up: look
 * at what the receiver released since (tx_refresh()), once per call (*REFRESHED). Returns 1:
 * look again; 0: stop with the SENT bytes (an error after some were sent); or the error when
 * none were. */
static inline int tx_refresh_once(struct tp_conn *c, bool *refreshed, size_t sent)
{
	int err = tx_refresh(c);

	*refreshed = true;
	if (err < 0)
		return sent ? 0 : err;
	return 1;
}

/* The write in messages of growing pieces, as far as the rings take it. Under tx_lock.
 * Returns the bytes sent (0: no room), or a negative error when none were. */
static ssize_t tx_send_pieces(struct tp_conn *c, struct iov_cur *ic, size_t total)
{
	const struct tp_params *pp = &c->link->params;
	uint32_t cap = c->out.qsize / TX_MSG_DIV, piece = tx_first_piece(c, total);
	size_t sent = 0;
	bool data_pub = false, refreshed = false, asked = false;

	while (sent < total) {
		size_t left = total - sent;

		if (left <= pp->inline_max && tp_tx_inline_free(c) > 0) {
			send_inline(c, ic, (unsigned)left, 0);
			sent += left;
			continue;
		}
		if (!c->out_ring_ok) {
			/* no data ring (tp_ring.c): ask for one, and meanwhile every byte goes
			 * through the inline slots */
			if (!asked) {
				/* (with inline_max 0 nothing goes before it: always ask) */
				tp_tx_ring_want(c, pp->inline_max ? left : SIZE_MAX);
				asked = true;
			}
			if (tp_tx_ring_hold_big(c, left))
				break; /* (woken by the grant: the receiver rings) */
			if (tp_tx_inline_free(c) == 0 && !refreshed) {
				int r = tx_refresh_once(c, &refreshed, sent);

				if (r > 0)
					continue;
				if (r < 0)
					return r;
				break;
			}
			if (tp_tx_inline_free(c) == 0 || pp->inline_max == 0) {
				TP_STAT_ADD(c->st->tx_full, 1);
				break;
			}
			unsigned n = left < pp->inline_max ? (unsigned)left : pp->inline_max;

			send_inline(c, ic, n, 0);
			sent += n;
			c->rq_inline_bytes += n;
			continue;
		}
		uint8_t type = TP_MT_SHORT;
		uint32_t room;

		while (ic->i < ic->cnt && ic->off == ic->iov[ic->i].iov_len) {
			ic->i++;
			ic->off = 0;
		}
		if (left > pp->short_max &&
		    ((uintptr_t)ic->iov[ic->i].iov_base + ic->off) % 4u == 0)
			type = TP_MT_LONG;
		room = tp_data_room(c, type);
		if (room == 0 && type == TP_MT_LONG) {
			type = TP_MT_SHORT;
			room = tp_data_room(c, type);
		}
		if (room > piece)
			room = piece;
		if (room == 0 && !refreshed) {
			int r = tx_refresh_once(c, &refreshed, sent);

			if (r > 0)
				continue;
			if (r < 0)
				return r;
			break;
		}
		if (room == 0) {
			/* the receiver's ring is full: a congestion notice of the link */
			TP_STAT_ADD(c->st->tx_full, 1);
			break;
		}
		uint32_t n = left < room ? (uint32_t)left : room;

		if (type == TP_MT_LONG && n <= pp->short_max)
			type = TP_MT_SHORT;
		send_data(c, ic, n, type, 0);
		sent += n;
		data_pub = true;
		piece = piece < cap / 2u ? piece * 2u : cap;
		if (sent < total) {
			/* more to come in this call: the receiver starts on this message now */
			tp_tx_publish(c);
			tp_wake_peer(c, TP_W_FB_WAIT);
		}
	}
	if (data_pub)
		tp_tx_publish(c);
	return (ssize_t)sent;
}

ssize_t tp_tx_send(struct tp_conn *c, const struct iovec *iov, int iovcnt)
{
	struct iov_cur ic = { .iov = iov, .cnt = iovcnt };
	size_t total = 0;
	uint32_t tx_d0;
	ssize_t rc;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	tp_mutex_lock(&c->tx_lock);
	c->tx_last_len = total;
	rc = tp_conn_own(c); /* single-owner rule after fork (tp_int.h) */
	if (!rc)
		rc = tx_check(c);
	if (!rc && tx_stale(c, total))
		rc = tx_refresh(c);
	if (rc == -ECONNRESET && peer_closed(c))
		rc = c->tx_after_close++ || (tp_st_flags(c) & TP_ST_RST) ? -EPIPE : (ssize_t)total;
	if (rc || total == 0)
		goto out;
	tp_tx_timers_start(c);
	tx_d0 = c->tx_d;
	rc = tx_send_whole(c, &ic, total) ? (ssize_t)total : tx_send_pieces(c, &ic, total);
	if (rc > 0) {
		TP_STAT_ADD(c->st->tx_bytes, (size_t)rc);
		if (!tp_tx_held(c))
			tp_wake_peer(c, TP_W_FB_WAIT);
		/* the next write's lines (after the fence: not in the way of this one's stores) */
		if (c->link->out_direct && total < tx_prefetch_below() && c->tx_d != tx_d0)
			tp_tx_prefetch(c, tp_tx_held(c) ? c->held_pos + TP_DESC_SIZE + c->held_len :
				       c->tx_d, (uint32_t)total + 2u * TP_DESC_SIZE + CACHELINE);
		if (c->tx_wait_v)
			tp_set_tx_wait(c, tp_tx_held(c) ? c->tx_wait_v & TP_TXW_HELD : 0);
		/* relaxed: a hint the receive side clears (stored on change only: its line
		 * stays shared) */
		if (!atomic_load_explicit(&c->tx_streak, memory_order_relaxed))
			atomic_store_explicit(&c->tx_streak, true, memory_order_relaxed);
	} else if (rc == 0) {
		rc = -EAGAIN;
	}
out:
	tp_mutex_unlock(&c->tx_lock);
	return rc;
}
