/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the host-wide table of tcp connections (/dev/shm/ntbsock-stat-tcp, written by
 * every process of the host that runs under the library) as `ntbsock stat` reads it
 * (tp_tcpstat_scan(), what tp_tcpstat_list() runs on its mapping). The table is one anonymous
 * mapping of the file's size, made once (sparse: only the pages an input wrote are touched, and
 * zeroed again after it); no file per input. Whatever the table holds, the reader lists only
 * slots inside it, at most MAX of them into OUT, each with a terminated reason.
 *
 * Input: byte 0 mode (bit 0: our header; bit 1: slots owned by this process with fd 0, so that
 * they pass the liveness checks; bit 2: their sequence words even and valid set), byte 1 MAX
 * (0..7), then the file's bytes. The used count is reduced to the slots the input covers and two
 * more: a scan of all 262144 slots costs milliseconds, so a used count beyond the table (clamped
 * by the reader) is checked once, at start-up. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/tp_int.h"

#define TS_MAGIC    0x31544350544e4c55ULL
#define TS_VERSION  2u
#define TS_OFF_USED 20u
#define TS_SLOT     128u

static uint8_t *map;

/* A header claiming more slots in use than the table has: the reader stops at its end. */
static void scan_all(void)
{
	struct tp_tcpstat_entry out[1];
	uint64_t magic = TS_MAGIC;
	uint32_t hdr[4] = { TS_VERSION, TP_TCPSTAT_MAX, TS_SLOT, UINT32_MAX };

	memcpy(map, &magic, sizeof(magic));
	memcpy(map + 8, hdr, sizeof(hdr));
	if (tp_tcpstat_scan(map, TP_TCPSTAT_FILE_SIZE, out, 1) != 0)
		abort(); /* every slot is free */
	memset(map, 0, 128);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	map = mmap(NULL, TP_TCPSTAT_FILE_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED)
		abort();
	scan_all();
	return 0;
}

static void put32(size_t off, uint32_t v)
{
	memcpy(map + off, &v, sizeof(v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_tcpstat_entry out[8];
	uint32_t used, covered;
	uint8_t mode, max;
	size_t n;
	int got;

	if (!map)
		LLVMFuzzerInitialize(NULL, NULL);
	if (size < 2)
		return 0;
	mode = data[0];
	max = data[1] % 8u;
	data += 2, size -= 2;
	n = size < TP_TCPSTAT_FILE_SIZE ? size : TP_TCPSTAT_FILE_SIZE;
	memcpy(map, data, n);
	covered = n > TS_SLOT ? (uint32_t)((n - TS_SLOT + TS_SLOT - 1) / TS_SLOT) : 0;
	if (mode & 1) {
		uint64_t magic = TS_MAGIC;

		memcpy(map, &magic, sizeof(magic));
		put32(8, TS_VERSION);
		put32(12, TP_TCPSTAT_MAX);
		put32(16, TS_SLOT);
		if (n < 24)
			n = 24;
	}
	memcpy(&used, map + TS_OFF_USED, sizeof(used));
	put32(TS_OFF_USED, used % (covered + 2u));
	for (uint32_t i = 0; i < covered && (mode & 6); i++) {
		size_t s = TS_SLOT + (size_t)i * TS_SLOT;

		if (mode & 2) {
			put32(s, (uint32_t)getpid());
			put32(s + 12, 0);
		}
		if (mode & 4) {
			uint32_t gen;

			memcpy(&gen, map + s + 4, sizeof(gen));
			put32(s + 4, gen & ~1u);
			put32(s + 8, 1);
		}
	}

	got = tp_tcpstat_scan(map, TP_TCPSTAT_FILE_SIZE, out, max);
	memcpy(&used, map + TS_OFF_USED, sizeof(used));
	if (got < 0 || (uint32_t)got > (used < TP_TCPSTAT_MAX ? used : TP_TCPSTAT_MAX))
		abort();
	for (int i = 0; i < got && i < max; i++)
		if (out[i].pid <= 0 || memchr(out[i].reason, 0, sizeof(out[i].reason)) == NULL)
			abort();
	/* the count since creation: the header's word at 24 as it is, whatever it holds */
	uint64_t added;

	memcpy(&added, map + 24, sizeof(added));
	if (tp_tcpstat_added(map, TP_TCPSTAT_FILE_SIZE) != added && got > 0)
		abort();
	/* a map of any other size is refused */
	if (tp_tcpstat_scan(map, TP_TCPSTAT_FILE_SIZE - 1, out, max) != 0 ||
	    tp_tcpstat_added(map, TP_TCPSTAT_FILE_SIZE - 1) != 0)
		abort();
	memset(map, 0, n);
	return 0;
}
