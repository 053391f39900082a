/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the failover header a peer writes first on the kernel socket
 * (tp_fo_hdr_parse()) and the receive side's answer to it (tp_fo_rx_skip(): what to skip of the
 * bytes that follow, or -ECONNRESET when they start beyond what was consumed here; never a skip
 * that wraps). Pure functions: the input is the header and the consumed count, nothing else.
 *
 * Input: byte 0 mode (bit 0: the header is exactly 32 bytes; bit 1: our magic and version in it;
 * bit 2: its CRC made right; bit 3: START near CONSUMED), 8 bytes CONSUMED, then the header. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tp_int.h"
#include "util/crc32c.h"

/* The wire layout (tp_failover.c): magic u32, version u16, flags u16, start u64, consumed u64,
 * reserved u32, crc u32 = crc32c(0, bytes 0..27). */
#define FO_LEN      32u
#define FO_MAGIC    0x4f46544eu
#define FO_VERSION  1u
#define FO_OFF_START 8u
#define FO_OFF_CRC  28u

static uint64_t get64(const uint8_t *b)
{
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mode, hdr[64];
	uint64_t consumed, start, skip = 0xdeadbeefcafef00dull, got = 0;
	size_t len;
	int rc, rs;

	if (size < 9)
		return 0;
	mode = data[0];
	consumed = get64(data + 1);
	len = size - 9 < sizeof(hdr) ? size - 9 : sizeof(hdr);
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, data + 9, len);
	if (mode & 1)
		len = FO_LEN;
	if (mode & 2) {
		uint32_t m = FO_MAGIC;
		uint16_t v = FO_VERSION;

		memcpy(hdr, &m, 4);
		memcpy(hdr + 4, &v, 2);
	}
	if (mode & 8) { /* START within a small distance of CONSUMED, either side */
		int16_t d;

		memcpy(&d, hdr + FO_OFF_START, sizeof(d));
		start = consumed + (uint64_t)(int64_t)d;
		memcpy(hdr + FO_OFF_START, &start, sizeof(start));
	}
	if (mode & 4) {
		uint32_t crc = crc32c(0, hdr, FO_OFF_CRC);

		memcpy(hdr + FO_OFF_CRC, &crc, 4);
	}

	/* an exactly sized copy: a read past LEN is an ASan report */
	uint8_t *b = malloc(len ? len : 1);

	if (!b)
		return 0;
	memcpy(b, hdr, len);
	rc = tp_fo_hdr_parse(b, len, &got);
	if (rc == 0) {
		uint32_t m, crc;
		uint16_t v;

		memcpy(&m, b, 4);
		memcpy(&v, b + 4, 2);
		memcpy(&crc, b + FO_OFF_CRC, 4);
		if (len != FO_LEN || m != FO_MAGIC || v != FO_VERSION ||
		    crc != crc32c(0, b, FO_OFF_CRC) || got != get64(b + FO_OFF_START))
			abort(); /* accepted a header it should refuse, or misread START */
	} else if (rc != -EPROTO || got != 0) {
		abort(); /* refused otherwise, or wrote its out-parameter on failure */
	}

	rs = tp_fo_rx_skip(b, len, consumed, &skip);
	if (rc != 0) {
		if (rs != -EPROTO || skip != 0xdeadbeefcafef00dull)
			abort();
	} else if (got > consumed) {
		if (rs != -ECONNRESET || skip != 0xdeadbeefcafef00dull)
			abort(); /* bytes are missing: never a skip */
	} else if (rs != 0 || skip != consumed - got || skip > consumed) {
		abort();
	}
	free(b);
	return 0;
}
