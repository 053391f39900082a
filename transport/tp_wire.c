/* SPDX-License-Identifier: MIT */
/* Wire encodings of the transport: checked words, inline slots, descriptors, mailbox packets. */
#include <errno.h>
#include <string.h>

#include "transport/tp_int.h"
#include "util/crc32c.h"

uint64_t tp_cw_make(uint32_t seed, uint32_t value)
{
	uint32_t chk = crc32c(seed, &value, sizeof(value));

	return ((uint64_t)chk << 32) | value;
}

bool tp_cw_check(uint32_t seed, uint64_t word, uint32_t *ret_value)
{
	uint32_t value = (uint32_t)word;

	if (word == 0 || crc32c(seed, &value, sizeof(value)) != (uint32_t)(word >> 32))
		return false;
	*ret_value = value;
	return true;
}

/* The header bytes a message CRC covers after the payload: length, MSN, flags (not the CRC
 * field itself, not the sequence byte, which only publishes). */
uint32_t tp_inline_hdr_crc(uint32_t payload_crc, const uint8_t *slot)
{
	uint32_t crc = crc32c(payload_crc, slot + TP_INL_LEN, 6);

	return crc32c(crc, slot + TP_INL_FLAGS, 1);
}

int tp_inline_check(const uint8_t *slot, uint32_t nonce, unsigned *ret_len, uint32_t *ret_msn,
		    uint8_t *ret_flags)
{
	uint16_t len;
	uint32_t msn, crc, want;

	memcpy(&len, slot + TP_INL_LEN, 2);
	memcpy(&msn, slot + TP_INL_MSN, 4);
	memcpy(&crc, slot + TP_INL_CRC, 4);
	if (len > TP_INLINE_MAX)
		return -EBADMSG;
	want = crc32c(nonce, slot + tp_inline_off(len), len);
	want = tp_inline_hdr_crc(want, slot);
	if (want != crc)
		return -EBADMSG;
	*ret_len = len;
	*ret_msn = msn;
	*ret_flags = slot[TP_INL_FLAGS];
	return 0;
}

uint32_t tp_desc_crc(uint32_t payload_crc, const struct tp_desc *d)
{
	return crc32c(payload_crc, d, offsetof(struct tp_desc, crc));
}

uint32_t tp_mbox_seed(uint32_t writer_epoch, uint32_t reader_epoch)
{
	/* (over both words: a CRC seeded with one of 4 bytes of the other is their XOR's, the
	 * same for both directions) */
	uint32_t v[2] = { writer_epoch, reader_epoch };

	return crc32c(0x6d626f78u, v, sizeof(v)); /* "mbox" */
}

void tp_pkt_seal(struct tp_pkt *p, uint32_t seed)
{
	p->crc = crc32c(seed, p, offsetof(struct tp_pkt, crc));
}

bool tp_pkt_valid(const struct tp_pkt *p, uint32_t seed, uint32_t want_seq)
{
	return p->seq == want_seq && p->crc == crc32c(seed, p, offsetof(struct tp_pkt, crc));
}
