/* SPDX-License-Identifier: MIT */
/* The send side: inline / short / long messages into the peer's rings through the shadows
 * (the retransmission copies), flow control, feedback, retransmission and Detect. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "transport/tp_int.h"
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

/* The raw checked word W of our slot (written by the peer), unchecked: for change detection.
 * Relaxed: a hint that makes the caller read the word again through tp_slot_word() (acquire). */
static uint64_t slot_raw(const struct tp_conn *c, uint32_t w)
{
	return __atomic_load_n((const uint64_t *)(const void *)(c->link->in +
			       tp_slot_off(c->link, c->slot) + w), __ATOMIC_RELAXED);
}

/* Window offsets in the peer's slot (64 bits: the slot may lie above 4 GiB). */
static uint64_t out_inline_off(const struct tp_conn *c, uint32_t pos)
{
	return c->out.slot_off + TP_SLOT_RINGS + (uint64_t)(pos & (c->out.inline_n - 1)) * 128u;
}

static uint64_t out_data_base(const struct tp_conn *c)
{
	return c->out.slot_off + TP_SLOT_RINGS + (uint64_t)c->out.inline_n * 128u;
}

/* Write data-ring bytes [from, to) (free-running positions) from the shadow to the window. */
static void write_data_range(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t q = c->out.qsize, len = to - from, p = from & (q - 1);
	uint32_t first = len < q - p ? len : q - p;

	if (len == 0)
		return;
	ntb_write(c->link->ntb, out_data_base(c) + p, c->sh_data + p, first);
	if (len > first)
		ntb_write(c->link->ntb, out_data_base(c), c->sh_data, len - first);
}

/* The same as write_data_range() through the link's DMA queue (Idle → Gather → Posted →
 * Done → Idle). False when the queue is unavailable or failed: the caller copies instead. */
static bool dma_range(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t q = c->out.qsize, len = to - from, p = from & (q - 1);
	uint32_t first = len < q - p ? len : q - p;
	bool ok;

	if (!c->dmaq || len == 0)
		return false;
	ok = ntb_dmaq_enqueue(c->dmaq, out_data_base(c) + p, c->sh_data + p, first) == 0 &&
	     (len == first ||
	      ntb_dmaq_enqueue(c->dmaq, out_data_base(c), c->sh_data, len - first) == 0) &&
	     ntb_dmaq_post(c->dmaq) == 0 && ntb_dmaq_wait(c->dmaq, -1) == 0;
	if (ntb_dmaq_state(c->dmaq) == NTB_DMAQ_POSTED)
		ntb_dmaq_abort(c->dmaq);
	if (ntb_dmaq_state(c->dmaq) != NTB_DMAQ_IDLE && ntb_dmaq_reset(c->dmaq) != 0) {
		ntb_dmaq_destroy(c->dmaq); /* a queue stuck in a state: stop using it */
		c->dmaq = NULL;
	}
	return ok;
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
		/* Plain write-back window (ntb_out_direct()): the table's bytes [off, 127) in
		 * fixed-size moves (no calls, no length dispatch; the last two overlap by one byte
		 * of the same value), then the sequence byte. */
		d += out_inline_off(c, pos);
		if (off == 0)
			memcpy(d, s, 64);
		if (off <= 64) {
			memcpy(d + 64, s + 64, 32);
			memcpy(d + 96, s + 96, 16);
		}
		memcpy(d + 112, s + 112, 8);
		memcpy(d + 119, s + 119, 8);
		/* release: payload and header before the sequence byte that publishes the slot;
		 * pairs with the acquire load of the sequence byte in rx_inline() */
		__atomic_store_n(d + TP_INL_SEQ, s[TP_INL_SEQ], __ATOMIC_RELEASE);
		return;
	}
	ntb_write(c->link->ntb, out_inline_off(c, pos) + off, s + off, TP_INL_SEQ - off);
	/* payload and header before the sequence byte that publishes the slot; pairs with the
	 * acquire load of the sequence byte in rx_inline() */
	ntb_to_peer_barrier(c->link->ntb);
	ntb_write8(c->link->ntb, out_inline_off(c, pos) + TP_INL_SEQ, s[TP_INL_SEQ]);
}

/* A cursor over the caller's iovecs. */
struct iov_cur {
	const struct iovec *iov;
	int cnt, i;
	size_t off;
};

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

/* Gather LEN bytes from the iovec cursor into DST, fusing the CRC; returns the CRC. SMALL
 * (inline payloads, ≤ 116 bytes; a constant at each call site): inline crc32 instructions,
 * no dispatch. */
static inline __attribute__((always_inline)) uint32_t
gather_crc(struct iov_cur *ic, uint8_t *dst, size_t len, uint32_t crc, bool small)
{
	while (len) {
		const uint8_t *src;
		size_t n = iov_take(ic, len, &src);

		crc = small ? crc32c_small_copy(crc, dst, src, n) : crc32c_copy(crc, dst, src, n);
		dst += n;
		len -= n;
	}
	return crc;
}

static void publish_tx(struct tp_conn *c);
static uint32_t data_free(const struct tp_conn *c);

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
	uint8_t *d = c->link->out_direct + out_inline_off(c, pos);
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
		crc = crc32c_small_copy2(crc, s + off, d + off,
					 (const uint8_t *)ic->iov[0].iov_base + ic->off, len);
		ic->off += len;
	} else {
		for (unsigned done = 0; done < len;) {
			const uint8_t *src;
			size_t n = iov_take(ic, len - done, &src);

			crc = crc32c_small_copy2(crc, s + off + done, d + off + done, src, n);
			done += (unsigned)n;
		}
	}
	tp_inline_hdr_words(len, c->msn_next, flags, seq, crc, &h0, &h1);
	memcpy(s + TP_INL_LEN, &h0, 8);
	memcpy(s + TP_INL_FLAGS - 2, &h1, 4);
	memcpy(d + TP_INL_LEN, &h0, 8);
	/* release: payload and header before the sequence byte that publishes the slot (one
	 * aligned 4-byte store of bytes 124-127: the rest of the CRC and the flags go with it);
	 * pairs with the acquire load of the sequence byte in rx_inline() */
	__atomic_store_n((uint32_t *)(void *)(d + TP_INL_FLAGS - 2), h1, __ATOMIC_RELEASE);
}
#endif

static void send_inline(struct tp_conn *c, struct iov_cur *ic, unsigned len, uint8_t flags)
{
	/* MSN order across rings: earlier data-ring messages are published before this one */
	if (c->tx_d != c->tx_d_pub)
		publish_tx(c);
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
		crc = gather_crc(ic, s + off, len, c->nonce_out, true);
		tp_inline_finish(s, len, c->msn_next, flags, seq, crc);
		write_inline_slot(c, pos);
	}
	c->tx_i++;
	c->msn_next++;
	TP_STAT_ADD(c->st->tx_msgs_inline, 1);
	if (unlikely(c->epoch_unconfirmed)) {
		/* as publish_tx(): our last retransmit()'s epoch word once more, after the slot
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
static uint32_t gather_out(struct tp_conn *c, struct iov_cur *ic, uint32_t pos, uint32_t len,
			   uint32_t crc)
{
	uint32_t q = c->out.qsize;

	while (len) {
		uint32_t p = pos & (q - 1);
		const uint8_t *src;
		size_t n = iov_take(ic, len < q - p ? len : q - p, &src);

		if (ntb_write_dup_crc(c->link->ntb, out_data_base(c) + p, c->sh_data + p, src, n,
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
static void zero_data_gaps(struct tp_conn *c, uint32_t pos, uint32_t gap, uint32_t len)
{
	uint32_t q = c->out.qsize;

	static_assert(TP_DATA_ALIGN == 16, "one 16-byte store of padding");
	if (gap > TP_DESC_SIZE)
		memset(c->sh_data + ((pos + TP_DESC_SIZE) & (q - 1)), 0, gap - TP_DESC_SIZE);
	if (len % TP_DATA_ALIGN)
		memset(c->sh_data + ((pos + gap + (len & ~(TP_DATA_ALIGN - 1))) & (q - 1)), 0,
		       TP_DATA_ALIGN);
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

	zero_data_gaps(c, pos, gap, len);
	if (via_dmaq) {
		uint32_t pp = (pos + gap) & (q - 1), first = len < q - pp ? len : q - pp;

		crc = gather_crc(ic, c->sh_data + pp, first, c->nonce_out, false);
		if (len > first)
			crc = gather_crc(ic, c->sh_data, len - first, crc, false);
	} else {
		crc = gather_out(c, ic, pos + gap, len, c->nonce_out);
	}
	d.crc = tp_desc_crc(crc, &d);
	memcpy(c->sh_data + (pos & (q - 1)), &d, sizeof(d)); /* never wraps: 16-aligned */
	/* the descriptor after its payload (its CRC covers it); both before publish_tx() */
	write_data_range(c, pos, pos + TP_DESC_SIZE);
	/* (a DMA transfer is Done when its writes reached the window: publish_tx()'s barrier
	 * orders them before TX_D as it does the CPU's) */
	if (via_dmaq && !dma_range(c, pos + gap, pos + gap + len))
		write_data_range(c, pos + gap, pos + gap + len);
	if (type == TP_MT_LONG)
		TP_STAT_ADD(c->st->tx_msgs_long, 1);
	else
		TP_STAT_ADD(c->st->tx_msgs_short, 1);
	c->tx_d = pos + fp;
	c->msn_next++;
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Largest write that send_short_direct() takes: up to it, a small write's data-ring message costs
 * about what an inline one does (no cursor, no ntb calls, the descriptor from registers). */
#define TX_SHORT_DIRECT_MAX 1024u

/*
 * One short message of LEN bytes from SRC (one buffer) into a plain write-back window
 * (ntb_out_direct()), published at once: the payload to shadow and window in one pass, the
 * descriptor and TX_D from registers, stored in the order send_data() + publish_tx() write
 * them (payload, descriptor, then TX_D after a release fence). The caller checked that it
 * fits the data ring's room; false (nothing written) where it would wrap at the ring's end or a
 * retransmission's epoch word is still repeated (publish_tx() does that): send_data() then.
 */
static bool send_short_direct(struct tp_conn *c, const uint8_t *src, uint32_t len)
{
	uint32_t q = c->out.qsize, pos = c->tx_d, p = pos & (q - 1), crc;
	uint32_t fp = TP_DESC_SIZE + (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);
	uint8_t *s = c->sh_data + p, *d;
	uint64_t w0, w1;

	if (p + fp > q || c->epoch_unconfirmed)
		return false;
	d = c->link->out_direct + out_data_base(c) + p;
	/* the shadow's padding after the payload as zeros (retransmissions rewrite it whole:
	 * zero_data_gaps()); the copy below overwrites the payload part of these 16 bytes */
	if (len % TP_DATA_ALIGN)
		memset(s + TP_DESC_SIZE + (len & ~(TP_DATA_ALIGN - 1)), 0, TP_DATA_ALIGN);
	crc = len <= 256 ? crc32c_small_copy2(c->nonce_out, s + TP_DESC_SIZE, d + TP_DESC_SIZE,
					      src, len)
			 : crc32c_copy2(c->nonce_out, d + TP_DESC_SIZE, s + TP_DESC_SIZE, src, len);
	/* the descriptor's bytes 0..11 as tp_desc_crc() covers them: type, flags, pad, length;
	 * MSN */
	static_assert(offsetof(struct tp_desc, len) == 4 && offsetof(struct tp_desc, msn) == 8,
		      "descriptor layout");
	w0 = (uint64_t)TP_MT_SHORT | (uint64_t)len << 32;
	crc = crc32c_small_val(crc, w0, 8);
	crc = crc32c_small_val(crc, c->msn_next, 4);
	w1 = (uint64_t)c->msn_next | (uint64_t)crc << 32;
	memcpy(s, &w0, 8);
	memcpy(s + 8, &w1, 8);
	memcpy(d, &w0, 8);
	memcpy(d + 8, &w1, 8);
	c->tx_d = pos + fp;
	c->msn_next++;
	TP_STAT_ADD(c->st->tx_msgs_short, 1);
	/* release: payload and descriptor before TX_D, which publishes them; pairs with the
	 * acquire load of TX_D in rx_data() (as publish_tx(): ntb_to_peer_barrier() is this
	 * fence on a plain window) */
	atomic_thread_fence(memory_order_release);
	__atomic_store_n((uint64_t *)(void *)(c->link->out_direct + c->out.slot_off + TP_W_TX_D),
			 tp_cw_make(c->nonce_out, c->tx_d), __ATOMIC_RELAXED);
	c->tx_d_pub = c->tx_d;
	c->tx_dirty = true;
	c->last_tx_pub_ms = 0;
	return true;
}
#endif

/* Publish tx_d after the data it covers; pairs with the acquire load in rx_data(). */
static void publish_tx(struct tp_conn *c)
{
	if (c->held) /* its descriptor, final now (held_desc()), after its payload */
		write_data_range(c, c->held_pos, c->held_pos + TP_DESC_SIZE);
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
	if (c->held) {
		/* (relaxed: tp_tx_flush_held()'s unlocked look is a hint) */
		__atomic_store_n(&c->held, false, __ATOMIC_RELAXED);
		atomic_fetch_sub_explicit(&c->link->held_conns, 1, memory_order_relaxed);
	}
}

/* --- merging of small writes ----------------------------------------------------------------- */

void tp_tx_hold_drop(struct tp_conn *c)
{
	if (!c->held)
		return;
	__atomic_store_n(&c->held, false, __ATOMIC_RELAXED);
	atomic_fetch_sub_explicit(&c->link->held_conns, 1, memory_order_relaxed);
}

/*
 * The short protocol's coalescing ([MQ]): a small write that finds the receiver behind (more
 * unreleased than its lazy release holds back: rx_surely_behind()) and the previous call on
 * this connection a send
 * goes into one data-ring message that is written but not published: the held message. Later
 * small writes append to it (payload after payload, the descriptor rewritten with the new
 * length and CRC) while the receiver stays behind; it is published (TX_D) as soon as anything
 * shows the receiver caught up, so nothing waits for a timer:
 *   - each write that merges asks the receiver to publish its release at once (TX_WAIT, which
 *     its rx_release(), polls, arrival checks and spin probes honour, ringing our doorbell),
 *     then reads the feedback once more (Dekker pair: our flag store and fence, then its
 *     words; its words and fence, then our flag): a receiver that caught up is seen here, or
 *     it sees the flag and rings, and the helper publishes (tp_tx_flush_held());
 *   - any other message (inline, larger writes, FIN, Detect, retransmission), a read, wait or
 *     poll on the connection, the timers, fork and export publish it first.
 * The receiver cannot have read a held message (TX_D does not cover it), so rewriting it is
 * safe; once published it is an ordinary short message, and the shadow holds it whole for
 * retransmission and failover from the start.
 */
#define TX_MERGE_WRITE 1024u        /* writes up to this size merge */
#define TX_MERGE_MAX   (16u << 10)  /* a held message grows to this at most */

/* Has the receiver, as its feedback says, not released everything published? (While a message
 * is held the receiver publishes its release at once: exact then.) */
static bool rx_behind(const struct tp_conn *c)
{
	return c->fb_rx_i != c->tx_i || c->fb_rx_d != c->tx_d_pub;
}

/* Is the receiver behind for sure, before it was asked to publish at once? Its lazy release
 * (tp_rx.c: rx_release()) holds back less than a quarter of the inline ring and less than an
 * eighth of the data ring it consumed, so more than that unreleased is unconsumed: a receiver
 * that caught up is never taken for a busy one (its release may simply not be published). */
static bool rx_surely_behind(const struct tp_conn *c)
{
	uint32_t in_keep = c->out.inline_n / 4u, d_keep = c->out.qsize / 8u;

	/* (a quarter of a ring of fewer than 4 slots is 0: it releases every slot at once) */
	return c->tx_i - c->fb_rx_i >= (in_keep ? in_keep : 1u) ||
	       c->tx_d_pub - c->fb_rx_d >= (d_keep ? d_keep : 1u);
}

/* The held message's descriptor for LEN payload bytes (its CRC from held_crc). */
static void held_desc(struct tp_conn *c, uint32_t len)
{
	uint32_t q = c->out.qsize;
	struct tp_desc d = { .type = TP_MT_SHORT, .len = len, .msn = c->msn_next - 1u };

	d.crc = tp_desc_crc(c->held_crc, &d);
	/* to the shadow only: the window gets it once, when publish_tx() publishes the message. An
	 * earlier length written there and not overwritten (a write the link lost) would check
	 * out over a prefix of the payload and leave the receiver inside the message. */
	memcpy(c->sh_data + (c->held_pos & (q - 1)), &d, sizeof(d)); /* never wraps: 16-aligned */
	c->held_len = len;
	c->tx_d = c->held_pos + TP_DESC_SIZE + (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);
}

/* Zero the shadow's padding after LEN payload bytes of the held message (retransmissions
 * rewrite it whole: zero_data_gaps()). After the payload's copy: the bytes before LEN are
 * payload already. */
static void held_pad(struct tp_conn *c, uint32_t len)
{
	uint32_t q = c->out.qsize, end = (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);

	if (end != len)
		memset(c->sh_data + ((c->held_pos + TP_DESC_SIZE + len) & (q - 1)), 0, end - len);
}

/* Start a held message with the next N bytes of IC; false (nothing written) when it would
 * wrap at the ring's end or does not fit. */
static bool held_start(struct tp_conn *c, struct iov_cur *ic, uint32_t n)
{
	uint32_t q = c->out.qsize, pos = c->tx_d;
	uint32_t fp = TP_DESC_SIZE + (uint32_t)ALIGN_UP(n, TP_DATA_ALIGN);

	if ((pos & (q - 1)) + fp > q || data_free(c) < fp || c->tx_d != c->tx_d_pub)
		return false;
	c->held_pos = pos;
	c->held_crc = gather_out(c, ic, pos + TP_DESC_SIZE, n, c->nonce_out);
	held_pad(c, n);
	c->msn_next++;
	held_desc(c, n);
	__atomic_store_n(&c->held, true, __ATOMIC_RELAXED);
	atomic_fetch_add_explicit(&c->link->held_conns, 1, memory_order_relaxed);
	TP_STAT_ADD(c->st->tx_msgs_short, 1);
	/* the helper runs the quick probes while we hold: a release the link lost (the receiver
	 * rang, but its words say it is behind) is answered by the next Detect, which publishes
	 * the held message first (send_detect()), within TP_QUICK_PROBE_MS, not at the helper's
	 * 100 ms pass */
	if (!atomic_load_explicit(&c->link->probe_soon, memory_order_relaxed))
		atomic_store(&c->link->probe_soon, true);
	return true;
}

/* Append the next N bytes of IC to the held message; false (nothing written) when it would
 * pass TX_MERGE_MAX or the ring's end, or the room. */
static bool held_append(struct tp_conn *c, struct iov_cur *ic, uint32_t n)
{
	uint32_t q = c->out.qsize, len = c->held_len + n;
	uint32_t end = TP_DESC_SIZE + (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN);
	uint32_t grow = (uint32_t)ALIGN_UP(len, TP_DATA_ALIGN) -
			(uint32_t)ALIGN_UP(c->held_len, TP_DATA_ALIGN);

	if (len > TX_MERGE_MAX || (c->held_pos & (q - 1)) + end > q || data_free(c) < grow)
		return false;
	c->held_crc = gather_out(c, ic, c->held_pos + TP_DESC_SIZE + c->held_len, n,
				 c->held_crc);
	held_pad(c, len);
	held_desc(c, len);
	return true;
}

/* Under tx_lock: N bytes of IC (a small write, the receiver behind or a message held) merged
 * into the held message; false when they were not (the caller sends them as usual; a held
 * message that could not take them is published first). */
static bool tx_merge(struct tp_conn *c, struct iov_cur *ic, uint32_t n)
{
	if (c->held ? !held_append(c, ic, n) : !held_start(c, ic, n)) {
		if (c->held)
			publish_tx(c);
		return false;
	}
	if (!c->tx_wait_set) {
		/* ask the receiver to publish its release at once, then look at it again (the
		 * flag's store and fence, then the words: see above) */
		tp_set_wait_flag(c, TP_W_TX_WAIT, &c->tx_wait_set, true);
		tp_tx_feedback(c);
	} else if (slot_raw(c, TP_W_FB_RX_I) != __atomic_load_n(&c->wc_raw[TP_W_FB_RX_I / 8u],
								__ATOMIC_RELAXED) ||
		   slot_raw(c, TP_W_FB_RX_D) != __atomic_load_n(&c->wc_raw[TP_W_FB_RX_D / 8u],
								__ATOMIC_RELAXED)) {
		/* the flag stood: a receiver that released since rings (the helper publishes);
		 * a release it published already is read here (two loads while nothing moved) */
		tp_tx_feedback(c);
	}
	if (!rx_behind(c) && c->held)
		publish_tx(c); /* (the feedback may have published it: a Retry) */
	return true;
}

void tp_tx_flush_held_locked(struct tp_conn *c)
{
	if (!c->held)
		return;
	publish_tx(c);
	tp_wake_peer(c, TP_W_FB_WAIT);
}

bool tp_tx_flush_held_ready(struct tp_conn *c)
{
	if (tp_mutex_trylock(&c->tx_lock))
		return false;
	if (c->held) {
		tp_tx_feedback(c);
		if (c->held && !rx_behind(c))
			tp_tx_flush_held_locked(c);
	}
	tp_mutex_unlock(&c->tx_lock);
	return true;
}

void tp_tx_flush_held(struct tp_conn *c)
{
	/* relaxed: a hint; the lock's acquire orders what publish_tx() reads */
	if (!__atomic_load_n(&c->held, __ATOMIC_RELAXED))
		return;
	tp_mutex_lock(&c->tx_lock);
	tp_tx_flush_held_locked(c);
	tp_mutex_unlock(&c->tx_lock);
}

/* Inline slots [from, to) (free-running) from the shadow, whole (the sequence bytes with
 * them), in one or two writes. */
static void write_inline_range(struct tp_conn *c, uint32_t from, uint32_t to)
{
	uint32_t n = c->out.inline_n, cnt = to - from;
	uint32_t first = from & (n - 1), run = cnt < n - first ? cnt : n - first;

	if (run)
		ntb_write(c->link->ntb, out_inline_off(c, from), c->sh_inline + first * 128u,
			  (size_t)run * 128u);
	if (cnt > run)
		ntb_write(c->link->ntb, out_inline_off(c, 0), c->sh_inline, (size_t)(cnt - run) * 128u);
}

/*
 * Selective repeat: the receiver said where its validation stopped (FB_RETRY_D / FB_RETRY_I,
 * written before the epoch): the message it misses is the one at either position, so only the
 * inline slot there and the data-ring message there are rewritten; what follows them is in its
 * window already (a further loss there is found when validation reaches it: another Retry).
 * Under a lossy link a go-back-N of the whole unreleased rings (up to the ring: a megabyte for
 * one lost word) is what kept a stream at a fifth of its clean rate. Falls back to everything
 * (false) when the words are missing (a peer that does not write them), out of the unreleased
 * ranges, not at a message boundary in our shadow, or the same as the last selective rewrite
 * (it did not help: a stale word, or more than one message missing there).
 */
static bool retransmit_selective(struct tp_conn *c)
{
	uint32_t rd, ri, q = c->out.qsize;
	struct tp_desc d;

	if (!tp_slot_word(c, TP_W_FB_RETRY_D, &rd) || !tp_slot_word(c, TP_W_FB_RETRY_I, &ri) ||
	    rd - c->fb_rx_d > c->tx_d - c->fb_rx_d || ri - c->fb_rx_i > c->tx_i - c->fb_rx_i)
		return false;
	if (c->sel_valid && rd == c->sel_d && ri == c->sel_i) {
		c->sel_valid = false; /* next time selective again */
		return false;
	}
	if (rd != c->tx_d) {
		memcpy(&d, c->sh_data + (rd & (q - 1)), sizeof(d)); /* never wraps: 16-aligned */
		if ((d.type != TP_MT_SHORT && d.type != TP_MT_LONG) ||
		    d.msn - c->fb_ack >= c->msn_next - c->fb_ack ||
		    tp_footprint(d.type, rd, d.len) > c->tx_d - rd)
			return false;
		write_data_range(c, rd, rd + tp_footprint(d.type, rd, d.len));
	}
	if (ri != c->tx_i)
		write_inline_range(c, ri, ri + 1);
	c->sel_d = rd;
	c->sel_i = ri;
	c->sel_valid = true;
	return true;
}

/* The peer asked for a retry (newer epoch): rewrite what it misses from the shadows (the
 * message where its validation stopped, else every unreleased byte), then announce the epoch.
 * Rewriting is idempotent: the shadow is what the window should hold. */
static void retransmit(struct tp_conn *c, uint16_t epoch)
{
	/* counted first: the peer may see the data before we return */
	TP_STAT_ADD(c->st->retransmits, 1);

	/* Whole slots (the sequence bytes with them): the receiver is gated until the epoch
	 * below is published after a barrier, so it never sees a slot half rewritten; fewer
	 * writes also give a lossy link fewer chances to spoil the retry. */
	if (!retransmit_selective(c)) {
		write_inline_range(c, c->fb_rx_i, c->tx_i);
		write_data_range(c, c->fb_rx_d, c->tx_d);
	}
	/* TX_D, then (publish_tx(), once epoch_unconfirmed is set) the epoch that lifts the
	 * receiver's gate, after the rewritten rings: it is written again with every publication
	 * until the receiver's feedback moves (a lost one would leave the receiver gated until a
	 * probe) */
	c->tx_epoch = epoch;
	c->epoch_unconfirmed = true;
	c->epoch_msn = c->msn_next;
	publish_tx(c);
	ntb_peer_db_ring(c->link->ntb);
	c->last_ack_ms = tp_now_ms();
	c->quick_n = 0; /* quick probes again for what was just sent again */
	/* ... also when this thread goes on to other things: the helper runs them (the epoch word
	 * above may be lost too, and the receiver stays gated until it sees it) */
	atomic_store(&c->link->probe_soon, true);
	LOG(LL_DEBUG, "transport: slot %u retransmit epoch %u inline %u data %u", c->slot, epoch,
	    c->tx_i - c->fb_rx_i, c->tx_d - c->fb_rx_d);
}

/* Read the feedback unit (under tx_lock): released space, CmpAck, retry epoch, detect ack.
 * Acquire loads (tp_slot_word()): the receiver's reads of the space a word hands back happen
 * before our next writes into it; pairs with ntb_from_peer_barrier() in fb_publish_words() and
 * rx_fail_at() (tp_rx.c). */
void tp_tx_feedback(struct tp_conn *c)
{
	uint32_t v;
	bool progress = false;

	if (tp_slot_word(c, TP_W_FB_RX_I, &v) && v != c->fb_rx_i &&
	    v - c->fb_rx_i <= c->tx_i - c->fb_rx_i) {
		c->fb_rx_i = v;
		progress = true;
	}
	if (tp_slot_word(c, TP_W_FB_RX_D, &v) && v != c->fb_rx_d &&
	    v - c->fb_rx_d <= c->tx_d - c->fb_rx_d) {
		c->fb_rx_d = v;
		progress = true;
	}
	if (tp_slot_word(c, TP_W_FB_ACK_MSN, &v) && v != c->fb_ack &&
	    v - c->fb_ack <= c->msn_next - c->fb_ack) {
		c->fb_ack = v;
		progress = true;
	}
	if (tp_slot_word(c, TP_W_FB_EPOCH, &v)) {
		uint16_t ep = (uint16_t)v, det = (uint16_t)(v >> 16);

		/* DetectAck: the receiver is alive, only not consuming: probe less often. A late
		 * answer (to an earlier probe: the next one went out before it came) counts too,
		 * once: else a receiver that always answers a little after the next timer tick
		 * (a loaded host) would reach MaxErr while answering every probe. The echoed
		 * sequence only moves forward; a new one within the probes sent since the last
		 * answer is an answer. */
		if (det != c->det_acked &&
		    (uint16_t)(c->detect_seq - det) <= c->link->params.max_err) {
			c->det_acked = det;
			if (c->terr) {
				c->terr = 0;
				if (c->det_backoff < 16)
					c->det_backoff++;
			}
		}
		if (tp_rt_epoch_newer(ep, c->tx_epoch)) {
			if (++c->terr > c->link->params.max_err * 4u) {
				tp_conn_maxerr(c, -ECONNRESET);
				return;
			}
			retransmit(c, ep);
		}
	}
	if (progress) {
		/* (the fine clock: the quick probes count from this stamp, TP_QUICK_PROBE_MS
		 * apart; a feedback change is one per several messages) */
		c->last_ack_ms = tp_now_ms();
		c->progress_ms = c->last_ack_ms;
		/* the receiver validated all that retransmit() rewrote: it saw the epoch (it
		 * validates nothing while it waits for it) */
		if ((int32_t)(c->fb_ack - c->epoch_msn) >= 0)
			c->epoch_unconfirmed = false;
		c->terr = 0;
		c->det_backoff = 0;
		c->quick_n = 0;
	}
}

static uint32_t inline_free(const struct tp_conn *c)
{
	return c->out.inline_n - (c->tx_i - c->fb_rx_i);
}

static uint32_t data_free(const struct tp_conn *c)
{
	uint32_t used = c->tx_d - c->fb_rx_d, fr = c->out.qsize - used;
	/* relaxed: a limit the program sets now and then (tp_conn_set_sndbuf()) */
	uint32_t cap = __atomic_load_n(&c->tx_cap, __ATOMIC_RELAXED);

	if (cap && fr > (cap > used ? cap - used : 0))
		fr = cap > used ? cap - used : 0;
	return fr;
}

void tp_conn_set_sndbuf(struct tp_conn *c, uint32_t bytes)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	__atomic_store_n(&c->tx_cap, bytes, __ATOMIC_RELAXED); /* read by data_free() */
}

/* Largest payload a data message at tx_d may carry now (0: none fits). */
uint32_t tp_data_room(const struct tp_conn *c, uint8_t type)
{
	uint32_t fr = data_free(c), gap = tp_payload_gap(type, c->tx_d);

	if (fr <= gap + TP_DATA_ALIGN)
		return 0;
	return (fr - gap) & ~(TP_DATA_ALIGN - 1);
}

/* Per-send checks of process-local state only (the peer's ST word: tx_refresh()). */
static int tx_check(struct tp_conn *c)
{
	int err = atomic_load(&c->error);

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
	c->tx_seen_st = slot_raw(c, TP_W_ST_FLAGS);
	/* (atomic: tp_tx_retry_check() compares it without the tx lock) */
	__atomic_store_n(&c->tx_seen_ep, slot_raw(c, TP_W_FB_EPOCH), __ATOMIC_RELAXED);
	if (tp_conn_peer_lost(c)) {
		atomic_store(&c->peer_gone, true);
		return -ECONNRESET;
	}
	if (tp_fo_get(c))
		return -EAGAIN;
	tp_tx_feedback(c);
	return atomic_load(&c->error);
}

/*
 * For a thread that waits to read (tp_wait() without TP_EV_OUT: a request sent, its answer
 * awaited): when the FB epoch word moved since the send path last read it, read the feedback
 * now, so that a Retry for what we sent is answered at once instead of at the helper's next
 * timer pass (1-3 ms later: the ping-pong p99 under 1 % corruption). One load while nothing
 * moved; skipped while a sender holds the tx lock (its next send reads the word itself).
 */
void tp_tx_retry_check(struct tp_conn *c)
{
	uint64_t raw = slot_raw(c, TP_W_FB_EPOCH);

	if (raw == __atomic_load_n(&c->tx_seen_ep, __ATOMIC_RELAXED) ||
	    tp_mutex_trylock(&c->tx_lock) != 0)
		return;
	__atomic_store_n(&c->tx_seen_ep, raw, __ATOMIC_RELAXED);
	tp_tx_feedback(c);
	tp_mutex_unlock(&c->tx_lock);
}

/* Must tp_send() read the peer-written words before sending TOTAL bytes? */
static bool tx_stale(struct tp_conn *c, size_t total)
{
	const struct tp_params *pp = &c->link->params;

	/* (relaxed: a hint only; tx_refresh() reads the words through tp_slot_word()) */
	if (++c->tx_fresh_sends >= TX_REFRESH_SENDS || total == 0 ||
	    slot_raw(c, TP_W_ST_FLAGS) != c->tx_seen_st ||
	    slot_raw(c, TP_W_FB_EPOCH) != c->tx_seen_ep)
		return true;
	if (total <= pp->inline_max && inline_free(c) > 0)
		return false;
	/* a few messages' descriptors and alignment besides the bytes */
	return data_free(c) < total + 4u * 128u;
}

int tp_tx_fin(struct tp_conn *c)
{
	struct iov_cur ic = { 0 };

	if (c->fin_sent)
		return 0;
	if (inline_free(c) > 0) {
		c->fin_msn = c->msn_next;
		send_inline(c, &ic, 0, TP_MSG_FIN);
	} else if (tp_data_room(c, TP_MT_SHORT) > 0) {
		c->fin_msn = c->msn_next;
		send_data(c, &ic, 0, TP_MT_SHORT, TP_MSG_FIN);
		publish_tx(c);
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
	return __atomic_load_n(&c->fin_rcvd_v, __ATOMIC_RELAXED) && !tp_fo_get(c);
}

static ssize_t tx_send(struct tp_conn *c, const struct iovec *iov, int iovcnt);
static int prefix_flush(struct tp_conn *c, bool wait);

ssize_t tp_send(struct tp_conn *c, const struct iovec *iov, int iovcnt)
{
	c = tp_conn_cur(c); /* (moved to another link: that one) */
	if (unlikely(atomic_load_explicit(&c->pre_on, memory_order_relaxed))) {
		if (atomic_load(&c->pre_fin))
			return -EPIPE; /* (shut before its tail was out) */
		/* (another thread sending the prefix is waited for: a send into a connection with
		 * room is never refused for it) */
		int r = prefix_flush(c, true);

		if (r)
			return r;
	}
	return tx_send(c, iov, iovcnt);
}

void tp_prefix_lock(struct tp_conn *c)
{
	bool busy = false;

	/* acquire: pairs with the release in tp_prefix_unlock() */
	while (!atomic_compare_exchange_weak_explicit(&c->pre_busy, &busy, true,
						      memory_order_acquire, memory_order_relaxed)) {
		busy = false;
		sched_yield();
	}
}

void tp_prefix_unlock(struct tp_conn *c)
{
	atomic_store_explicit(&c->pre_busy, false, memory_order_release);
}

void tp_prefix_set(struct tp_conn *c, uint8_t *buf, size_t len, size_t off, bool fin)
{
	tp_prefix_lock(c);
	c->pre_buf = buf;
	c->pre_len = len;
	c->pre_off = off;
	atomic_store(&c->pre_fin, fin);
	atomic_fetch_add(&tp_fo_active, 1); /* (the helper comes often until it is out) */
	atomic_store(&c->pre_on, true);
	tp_prefix_unlock(c);
}

/* Under the prefix lock: the prefix is out; the FIN after it if due. */
static void prefix_done(struct tp_conn *c)
{
	free(c->pre_buf);
	c->pre_buf = NULL;
	atomic_store(&c->pre_on, false);
	atomic_fetch_sub(&tp_fo_active, 1);
	if (atomic_load(&c->pre_fin)) {
		tp_mutex_lock(&c->tx_lock);
		if (!c->wr_shut) {
			c->wr_shut = true;
			tp_tx_fin(c); /* -EAGAIN: the timers send it when room frees */
		}
		tp_mutex_unlock(&c->tx_lock);
	}
	tp_event_signal(); /* writers waiting for room look again */
}

/* Send what fits of C's prefix; WAIT: for another thread sending it (else -EAGAIN then). */
static int prefix_flush(struct tp_conn *c, bool wait)
{
	bool busy = false;
	int rc = 0;

	if (!atomic_load(&c->pre_on))
		return 0;
	if (wait)
		tp_prefix_lock(c);
	/* acquire: pairs with the release in tp_prefix_unlock() */
	else if (!atomic_compare_exchange_strong_explicit(&c->pre_busy, &busy, true,
							  memory_order_acquire, memory_order_relaxed))
		return -EAGAIN;
	while (c->pre_buf && c->pre_off < c->pre_len) {
		struct iovec v = { c->pre_buf + c->pre_off, c->pre_len - c->pre_off };
		ssize_t n = tx_send(c, &v, 1);

		if (n < 0) {
			rc = (int)n;
			break;
		}
		c->pre_off += (size_t)n;
	}
	if (c->pre_buf && c->pre_off >= c->pre_len) {
		prefix_done(c);
		rc = 0;
	}
	tp_prefix_unlock(c);
	return rc;
}

int tp_prefix_flush(struct tp_conn *c)
{
	return prefix_flush(c, false);
}

void tp_prefix_drop(struct tp_conn *c)
{
	tp_prefix_lock(c);
	if (c->pre_buf) {
		free(c->pre_buf);
		c->pre_buf = NULL;
		atomic_fetch_sub(&tp_fo_active, 1);
	}
	atomic_store(&c->pre_on, false);
	tp_prefix_unlock(c);
}

static ssize_t tx_send(struct tp_conn *c, const struct iovec *iov, int iovcnt)
{
	const struct tp_params *pp = &c->link->params;
	struct iov_cur ic = { .iov = iov, .cnt = iovcnt };
	size_t total = 0, sent = 0;
	bool data_pub = false, any = false, refreshed = false;
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
	/* a small write of a stream while the receiver is behind: into the held message (relaxed:
	 * tx_streak is a hint the receive side clears) */
	if (total <= TX_MERGE_WRITE && total <= pp->short_max &&
	    (c->held || (rx_surely_behind(c) && __atomic_load_n(&c->tx_streak, __ATOMIC_RELAXED) &&
			 (tp_tx_feedback(c), rx_surely_behind(c)))) &&
	    tx_merge(c, &ic, (uint32_t)total)) {
		sent = total;
		any = true;
		goto sent;
	}
	if (iovcnt == 1 && total <= pp->inline_max && inline_free(c) > 0) {
		/* one buffer, one inline message (a ping-pong's): without the bookkeeping of the
		 * cursor and the pieces below (~5 % of a 64-byte send + receive on one core) */
		send_inline(c, &ic, (unsigned)total, 0);
		sent = total;
		any = true;
		goto sent;
	}
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (iovcnt == 1 && total <= TX_SHORT_DIRECT_MAX && total <= pp->short_max &&
	    c->link->out_direct && c->tx_d == c->tx_d_pub &&
	    tp_data_room(c, TP_MT_SHORT) >= total &&
	    send_short_direct(c, iov[0].iov_base, (uint32_t)total)) {
		/* one buffer, one small data-ring message: the same for writes just above the
		 * inline limit (before: twice the instructions of an inline message) */
		sent = total;
		any = true;
		goto sent;
	}
#endif
	uint32_t cap = c->out.qsize / TX_MSG_DIV, piece = cap;

	if (total >= 2u * TX_PIECE_LO) {
		/* relaxed: our own reader's counter, a hint only (partner: TP_STAT_ADD) */
		uint64_t rx = __atomic_load_n(&c->st->rx_bytes, __ATOMIC_RELAXED);

		if (rx != c->tx_rx_seen) {
			size_t q = total / 4u;

			q = q < TX_PIECE_LO ? TX_PIECE_LO : q > TX_PIECE_HI ? TX_PIECE_HI : q;
			piece = q < cap ? (uint32_t)q : cap;
		}
		c->tx_rx_seen = rx;
	}
	while (sent < total) {
		size_t left = total - sent;

		if (left <= pp->inline_max && inline_free(c) > 0) {
			send_inline(c, &ic, (unsigned)left, 0);
			sent += left;
			any = true;
			continue;
		}
		uint8_t type = TP_MT_SHORT;
		uint32_t room;

		while (ic.i < iovcnt && ic.off == iov[ic.i].iov_len) {
			ic.i++;
			ic.off = 0;
		}
		if (left > pp->short_max &&
		    ((uintptr_t)iov[ic.i].iov_base + ic.off) % 4u == 0)
			type = TP_MT_LONG;
		room = tp_data_room(c, type);
		if (room == 0 && type == TP_MT_LONG) {
			type = TP_MT_SHORT;
			room = tp_data_room(c, type);
		}
		if (room > piece)
			room = piece;
		if (room == 0 && !refreshed) {
			/* the cached credits ran out: look at what the receiver released since */
			int err = tx_refresh(c);

			refreshed = true;
			if (err < 0 && !any) {
				rc = err;
				goto out;
			}
			if (err < 0)
				break;
			continue;
		}
		if (room == 0) {
			/* the receiver's ring is full: a congestion notice of the link */
			TP_STAT_ADD(c->st->tx_full, 1);
			break;
		}
		uint32_t n = left < room ? (uint32_t)left : room;

		if (type == TP_MT_LONG && n <= pp->short_max)
			type = TP_MT_SHORT;
		send_data(c, &ic, n, type, 0);
		sent += n;
		data_pub = true;
		piece = piece < cap / 2u ? piece * 2u : cap;
		if (sent < total) {
			/* more to come in this call: the receiver starts on this message now */
			publish_tx(c);
			tp_wake_peer(c, TP_W_FB_WAIT);
		}
		any = true;
	}
	if (data_pub)
		publish_tx(c);
sent:
	if (any) {
		TP_STAT_ADD(c->st->tx_bytes, sent);
		if (!c->held)
			tp_wake_peer(c, TP_W_FB_WAIT);
		if (c->tx_wait_set && !c->held)
			tp_set_wait_flag(c, TP_W_TX_WAIT, &c->tx_wait_set, false);
		if (!__atomic_load_n(&c->tx_streak, __ATOMIC_RELAXED))
			__atomic_store_n(&c->tx_streak, true, __ATOMIC_RELAXED);
	}
	rc = sent ? (ssize_t)sent : -EAGAIN;
out:
	tp_mutex_unlock(&c->tx_lock);
	return rc;
}

/* Detect: the receiver answers with its feedback (and a Retry when data it was told of is
 * missing). Under tx_lock. */
static void send_detect(struct tp_conn *c)
{
	if (c->held)
		publish_tx(c); /* (TX_D below covers it) */
	c->detect_seq++;
	/* TX_D publishes the data ring again: after the data, which another thread may have
	 * written under tx_lock (the fence in its publish_tx() does not order our store); pairs
	 * with the acquire load of TX_D in rx_data() */
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_TX_NEXT_MSN, c->msn_next);
	tp_peer_word(c, TP_W_TX_D, c->tx_d);
	/* NEXT_MSN and TX_D before the Detect they come with; pairs with the acquire load of
	 * TX_EPOCH in tp_rx_progress() */
	ntb_to_peer_barrier(c->link->ntb);
	tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch | (uint32_t)c->detect_seq << 16);
	ntb_wc_flush(c->link->ntb);
	ntb_peer_db_ring(c->link->ntb);
}

static bool tx_pending(const struct tp_conn *c)
{
	return c->msn_next != c->fb_ack || c->tx_i != c->fb_rx_i || c->tx_d != c->fb_rx_d;
}

/* Under tx_lock: ms until the next quick probe is due (0: it is due now), or -1 when there is
 * none to come. */
static int64_t quick_wait(const struct tp_conn *c, uint64_t now)
{
	/* (last_ack_ms is a CLOCK_MONOTONIC stamp: no coarse tick to add) */
	uint64_t at = (uint64_t)TP_QUICK_PROBE_MS << (c->quick_n < 20 ? c->quick_n : 20), age;

	/* (also after a retransmission, TErrCnt > 0: a retransmission the link dropped is found
	 * the same way) */
	if (!tx_pending(c) || atomic_load(&c->error) || at >= c->link->params.send_timeout_ms)
		return -1;
	age = clock_age_ms(now, c->last_ack_ms);
	return age >= at ? 0 : (int64_t)(at - age);
}

/* As returned by tp_tx_timers(): ms until the next quick probe (at least 1), 0: none. */
static uint32_t quick_next(const struct tp_conn *c, uint64_t now)
{
	int64_t w = quick_wait(c, now);

	return w < 0 ? 0u : w == 0 ? 1u : (uint32_t)w;
}

uint32_t tp_tx_quick_wait(struct tp_conn *c, uint64_t now)
{
	uint32_t w = 0;

	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		w = quick_next(c, now);
		tp_mutex_unlock(&c->tx_lock);
	}
	return w;
}

/* TimerSendData / TimerDetect, quick probes, and republication of the tx index (helper, wait
 * loops). */
uint32_t tp_tx_timers(struct tp_conn *c, uint64_t now)
{
	const struct tp_params *pp = &c->link->params;
	uint32_t next = 0;

	if (tp_mutex_trylock(&c->tx_lock) == 0) {
		tp_tx_feedback(c);
		/* a ring the helper could not act on (tx lock busy: flush_held()) */
		if (c->held && !rx_behind(c))
			tp_tx_flush_held_locked(c);
		if (c->wr_shut && !c->fin_sent && !atomic_load(&c->error))
			tp_tx_fin(c);
		/* unacknowledged or unreleased data without progress: Detect (the answer also
		 * republishes the receiver's feedback, whose last write may have been lost) */
		bool pending = tx_pending(c);

		if (pending && !atomic_load(&c->error)) {
			uint32_t to = c->terr ? pp->detect_timeout_ms : pp->send_timeout_ms;

			/* an alive receiver that does not read: up to ~2 s between probes */
			to += (c->det_backoff < 16 ? c->det_backoff : 16) * 120u;

			if (clock_age_ms(now, c->last_ack_ms) > to) {
				/* TimerSendData / TimerDetect: PROBING, send Detect */
				if (++c->terr > pp->max_err) {
					tp_conn_maxerr(c, -ECONNRESET);
				} else {
					send_detect(c);
					c->last_ack_ms = now;
				}
			} else if (quick_wait(c, now) == 0) {
				/* a quick probe: no error counted, the next after twice as long */
				send_detect(c);
				c->quick_n++;
			}
			next = quick_next(c, now);
		} else if (c->tx_dirty && !c->last_tx_pub_ms) {
			c->last_tx_pub_ms = now; /* published since the last run: stamp it now */
		} else if (c->tx_dirty && clock_age_ms(now, c->last_tx_pub_ms) > 50) {
			/* republish: a dropped index write must not stall the peer. After a barrier
			 * of our own: the data was written by the thread that published it first
			 * (pairs with the acquire load of TX_D in rx_data()) */
			ntb_to_peer_barrier(c->link->ntb);
			tp_peer_word(c, TP_W_TX_D, c->tx_d_pub); /* (not a held message) */
			tp_peer_word(c, TP_W_TX_EPOCH, (uint32_t)c->tx_epoch |
				  (uint32_t)c->detect_seq << 16);
			c->tx_dirty = false;
		}
		tp_mutex_unlock(&c->tx_lock);
	}
	return next;
}
