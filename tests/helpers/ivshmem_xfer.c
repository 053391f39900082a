/* SPDX-License-Identifier: MIT */
/* Two-sided checksummed stream exchange over one ntb link, for the ivshmem test: runs on the
 * shm backend on the host and on the pci backend inside the QEMU guest (same region layout).
 *
 * Usage: ivshmem_xfer --side N (--path FILE | --device SEL) [--window BYTES] [--bytes N]
 *                     [--timeout SEC] [--name NAME] [--verbose] [--expect-down]
 *                     [--ivshmem-server SOCKET] [--no-doorbell]
 *                     [--pingpong N --wait fd|db --seq-base B]
 *        ivshmem_xfer --list      print the PCI devices a profile matches (ntb_pci_list())
 *
 * --pingpong N: instead of the stream, N round trips of a sequence number (B+1 .. B+N; B
 * larger than every earlier run's on the same region), side 1 asking, side 0 answering, both
 * sleeping between messages: --wait fd sleeps in poll(2) on ntb_db_fd() (2 s timeout; one
 * that expires with the awaited word already there is counted: a doorbell that did not wake
 * us), --wait db in ntb_db_wait() (the transport's wait). Prints "IVSHMEM-PINGPONG side=S wait=W db_fd=0|1 n=N rtt_us_median=.. rtt_us_mean=..
 * timeouts=T status=ok|fail" (round-trip times on side 1 only).
 *
 * Each side sends N bytes of a pseudo-random stream (seeded by its side) to the peer and
 * receives the peer's N bytes, verifying every byte against the peer's stream and computing
 * CRC32C. Layout inside each side's INBOUND window (all fields written only by the peer):
 *   0x000  u64 tx      bytes of the peer's stream published into our ring
 *   0x080  u64 ack     bytes of OUR stream the peer has consumed (flow control)
 *   0x100  struct result: the peer's final report (magic last)
 *   W/2 .. W          ring of W/2 bytes carrying the peer's stream
 * Prints "IVSHMEM-OPEN ..." once the link is open and "IVSHMEM-RESULT ... status=ok|fail"
 * at the end; exits 0 only on success. With --expect-down, after the exchange it also waits
 * until the peer's close is seen as link down and prints "IVSHMEM-DOWN after=MS". */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntb/ntb.h"
#include "util/crc32c.h"
#include "util/log.h"

#define OFF_TX      0x000
#define OFF_ACK     0x080
#define OFF_RESULT  0x100
#define RESULT_MAGIC 0x544c55534552564eull /* "NVRESULT" */
#define CHUNK       (64 * 1024)

struct result {
	uint64_t received;
	uint32_t crc_recv;
	uint32_t errors;  /* bytes that differed from the expected stream */
	uint64_t magic;   /* written last */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* xorshift64*: the byte stream of side S; both sides can regenerate either stream. */
struct stream {
	uint64_t state;
	uint64_t word;
	int left;
};

static void stream_init(struct stream *s, int side)
{
	s->state = 0x9e3779b97f4a7c15ull * (uint64_t)(side + 1) ^ 0x243f6a8885a308d3ull;
	s->left = 0;
}

static void stream_fill(struct stream *s, uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s->left == 0) {
			s->state ^= s->state >> 12;
			s->state ^= s->state << 25;
			s->state ^= s->state >> 27;
			s->word = s->state * 0x2545f4914f6cdd1dull;
			s->left = 8;
		}
		buf[i] = (uint8_t)s->word;
		s->word >>= 8;
		s->left--;
	}
}

static uint64_t in_load64(const volatile uint8_t *in, size_t off)
{
	/* acquire: pairs with the peer's ntb_to_peer_barrier() before its ntb_write64() */
	return __atomic_load_n((const uint64_t *)(uintptr_t)(in + off), __ATOMIC_ACQUIRE);
}

static int list_devices(void)
{
	struct ntb_pci_dev_info devs[16];
	int n = ntb_pci_list(devs, 16);

	if (n < 0) {
		printf("IVSHMEM-LIST error %s\n", strerror(-n));
		return 1;
	}
	for (int i = 0; i < n; i++)
		printf("IVSHMEM-LIST %s %04x:%04x %s bar%d %" PRIu64 "\n", devs[i].bdf,
		       devs[i].vendor, devs[i].device, devs[i].profile, devs[i].bar,
		       devs[i].bar_size);
	printf("IVSHMEM-LIST count=%d\n", n);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep until the word at OFF of our inbound window reaches WANT (or passes the deadline):
 * WAIT_FD: poll(2) on ntb_db_fd() with a 2 s timeout (counted in *TIMEOUTS); else
 * ntb_db_wait(). 0 or -ETIMEDOUT. */
static int wait_word(struct ntb_link *link, const volatile uint8_t *in, size_t off,
		     uint64_t want, bool wait_fd, uint64_t deadline, unsigned *timeouts)
{
	int fd = ntb_db_fd(link);

	for (;;) {
		uint64_t drained;
		if (wait_fd)
			while (read(fd, &drained, sizeof(drained)) == (ssize_t)sizeof(drained))
				;
		uint32_t seen = ntb_db_read(link);
		if (in_load64(in, off) >= want)
			return 0;
		if (now_ms() > deadline)
			return -ETIMEDOUT;
		if (wait_fd) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			/* A timeout with the word already there: the doorbell did not wake us. */
			if (poll(&pfd, 1, 2000) == 0 && in_load64(in, off) >= want)
				(*timeouts)++;
			ntb_link_tick(link);
		} else {
			ntb_db_wait(link, seen, 1000);
		}
	}
}

/* N round trips of sequence numbers BASE+1.. (see the usage at the top). */
static bool pingpong(struct ntb_link *link, const volatile uint8_t *in, int side, uint64_t n,
		     uint64_t base, bool wait_fd, uint64_t deadline)
{
	uint64_t *rtt = calloc(n ? n : 1, sizeof(*rtt));
	unsigned timeouts = 0;
	bool ok = rtt != NULL && (!wait_fd || ntb_db_fd(link) >= 0);

	for (uint64_t i = 1; i <= n && ok; i++) {
		uint64_t t0 = now_ns();
		if (side == 1) {
			ntb_write64(link, OFF_TX, base + i);
			ntb_wc_flush(link);
			ntb_peer_db_ring(link);
			ok = wait_word(link, in, OFF_ACK, base + i, wait_fd, deadline, &timeouts) == 0;
			rtt[i - 1] = now_ns() - t0;
		} else {
			ok = wait_word(link, in, OFF_TX, base + i, wait_fd, deadline, &timeouts) == 0;
			ntb_write64(link, OFF_ACK, base + i);
			ntb_wc_flush(link);
			ntb_peer_db_ring(link);
		}
	}
	uint64_t med = 0, sum = 0;
	if (ok && side == 1 && n) {
		for (uint64_t i = 0; i < n; i++)
			sum += rtt[i];
		qsort(rtt, n, sizeof(*rtt), cmp_u64);
		med = rtt[n / 2];
	}
	ok = ok && timeouts == 0;
	printf("IVSHMEM-PINGPONG side=%d wait=%s db_fd=%d n=%" PRIu64 " rtt_us_median=%.1f "
	       "rtt_us_mean=%.1f timeouts=%u status=%s\n", side, wait_fd ? "fd" : "db",
	       ntb_db_fd(link) >= 0, n, med / 1e3, n ? sum / 1e3 / (double)n : 0.0, timeouts,
	       ok ? "ok" : "fail");
	free(rtt);
	return ok;
}

static void usage(void)
{
	fprintf(stderr, "usage: ivshmem_xfer --side N (--path FILE | --device SEL) [--window B] "
		"[--bytes N] [--timeout SEC] [--name NAME]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "side", required_argument, NULL, 's' },
		{ "path", required_argument, NULL, 'p' },
		{ "device", required_argument, NULL, 'd' },
		{ "window", required_argument, NULL, 'w' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "timeout", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "list", no_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "expect-down", no_argument, NULL, 'D' },
		{ "ivshmem-server", required_argument, NULL, 'S' },
		{ "no-doorbell", no_argument, NULL, 'N' },
		{ "pingpong", required_argument, NULL, 'P' },
		{ "wait", required_argument, NULL, 'W' },
		{ "seq-base", required_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 },
	};
	struct ntb_link_params p;
	struct ntb_link *link;
	uint64_t total = 16u << 20, timeout_s = 120;
	bool expect_down = false, wait_fd = false;
	uint64_t pings = 0, seq_base = 0;
	int c, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ntb_link_params_init(&p);
	snprintf(p.name, sizeof(p.name), "ivshmem");
	p.side = -2;
	p.heartbeat_ms = 100;
	p.link_timeout_ms = 10000; /* a TCG guest can stall for seconds */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': p.side = atoi(optarg); break;
		case 'p': snprintf(p.backend, sizeof(p.backend), "shm");
			  snprintf(p.path, sizeof(p.path), "%s", optarg); break;
		case 'd': snprintf(p.backend, sizeof(p.backend), "pci");
			  snprintf(p.device, sizeof(p.device), "%s", optarg); break;
		case 'w': p.window_size = strtoull(optarg, NULL, 0); break;
		case 'b': total = strtoull(optarg, NULL, 0); break;
		case 't': timeout_s = strtoull(optarg, NULL, 0); break;
		case 'n': snprintf(p.name, sizeof(p.name), "%s", optarg); break;
		case 'l': return list_devices();
		case 'v': log_set_level(LL_DEBUG); break;
		case 'D': expect_down = true; break;
		case 'S': snprintf(p.ivshmem_server, sizeof(p.ivshmem_server), "%s", optarg); break;
		case 'N': p.doorbell = false; break;
		case 'P': pings = strtoull(optarg, NULL, 0); break;
		case 'W': wait_fd = strcmp(optarg, "fd") == 0; break;
		case 'B': seq_base = strtoull(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (p.side != 0 && p.side != 1)
		usage();
	const char *bk = p.backend;
	const int side = p.side;
	const uint64_t deadline = now_ms() + timeout_s * 1000;

	/* Side 1 may find the region not initialised yet (-EAGAIN): retry until the deadline. */
	for (;;) {
		rc = ntb_link_open(&p, &link);
		if (rc != -EAGAIN || now_ms() > deadline)
			break;
		usleep(100000);
	}
	if (rc < 0) {
		printf("IVSHMEM-RESULT side=%d backend=%s status=fail open: %s (%s)\n", side, bk,
		       strerror(-rc), ntb_strerror_detail());
		return 1;
	}
	size_t win;
	const volatile uint8_t *in = ntb_in_window(link, &win);
	const size_t out_size = ntb_out_size(link);
	if (win != out_size || win < 2 * CHUNK) {
		printf("IVSHMEM-RESULT side=%d backend=%s status=fail window %zu/%zu\n", side, bk,
		       win, out_size);
		return 1;
	}
	const size_t ring_off = win / 2, ring = win / 2;
	printf("IVSHMEM-OPEN side=%d backend=%s window=%zu db_fd=%d\n", side, bk, win,
	       ntb_db_fd(link));

	if ((rc = ntb_link_enable(link)) < 0 ||
	    (rc = ntb_link_wait_up(link, (int)(deadline - now_ms()))) < 0) {
		printf("IVSHMEM-RESULT side=%d backend=%s status=fail link up: %s\n", side, bk,
		       strerror(-rc));
		return 1;
	}
	printf("IVSHMEM-UP side=%d epoch=%08x peer_epoch=%08x\n", side, ntb_link_epoch(link),
	       ntb_link_peer_epoch(link));
	if (pings) {
		bool ok = pingpong(link, in, side, pings, seq_base, wait_fd, deadline);
		usleep(200000); /* the peer's last answer, before we announce link down */
		ntb_link_close(link);
		return ok ? 0 : 1;
	}

	uint8_t *sbuf = malloc(CHUNK), *rbuf = malloc(CHUNK), *ebuf = malloc(CHUNK);
	if (!sbuf || !rbuf || !ebuf)
		return 1;
	struct stream tx_stream, rx_expect;
	stream_init(&tx_stream, side);
	stream_init(&rx_expect, 1 - side);
	uint64_t sent = 0, recvd = 0;
	uint32_t crc_sent = 0, crc_recv = 0, errors = 0;
	uint64_t start = now_ms();
	bool failed = false;

	while ((sent < total || recvd < total) && !failed) {
		bool progress = false;
		uint32_t db_seen = ntb_db_read(link);

		/* send: only into space the peer has released through ack */
		uint64_t acked = in_load64(in, OFF_ACK);
		if (sent < total && sent - acked < ring) {
			size_t n = (size_t)(ring - (sent - acked));
			size_t pos = (size_t)(sent % ring);
			if (n > CHUNK) n = CHUNK;
			if (n > ring - pos) n = ring - pos;
			if (n > total - sent) n = (size_t)(total - sent);
			stream_fill(&tx_stream, sbuf, n);
			crc_sent = crc32c(crc_sent, sbuf, n);
			ntb_write(link, ring_off + pos, sbuf, n);
			sent += n;
			ntb_to_peer_barrier(link); /* payload before tx */
			ntb_write64(link, OFF_TX, sent);
			ntb_wc_flush(link);
			ntb_peer_db_ring(link);
			progress = true;
		}
		/* receive: everything the peer published, validated against its stream */
		uint64_t avail = in_load64(in, OFF_TX);
		if (avail > total || avail < recvd) {
			printf("IVSHMEM-ERROR side=%d bad tx %" PRIu64 "\n", side, avail);
			failed = true;
			break;
		}
		while (recvd < avail) {
			size_t pos = (size_t)(recvd % ring);
			size_t n = (size_t)(avail - recvd);
			if (n > CHUNK) n = CHUNK;
			if (n > ring - pos) n = ring - pos;
			memcpy(rbuf, (const void *)(in + ring_off + pos), n);
			stream_fill(&rx_expect, ebuf, n);
			if (memcmp(rbuf, ebuf, n) != 0)
				for (size_t i = 0; i < n; i++)
					errors += rbuf[i] != ebuf[i];
			crc_recv = crc32c(crc_recv, rbuf, n);
			recvd += n;
			ntb_to_peer_barrier(link); /* our copy-out before releasing the space */
			ntb_write64(link, OFF_ACK, recvd);
			ntb_wc_flush(link);
			ntb_peer_db_ring(link);
			progress = true;
		}
		/* The heartbeat on every round, not only when idle: a side that streams without
		 * pause for longer than the link timeout (a slow TCG guest, a sanitizer build)
		 * must not look dead to its peer. */
		ntb_link_tick(link);
		if (!progress) {
			if (now_ms() > deadline) {
				printf("IVSHMEM-ERROR side=%d timeout sent=%" PRIu64 " recv=%" PRIu64
				       "\n", side, sent, recvd);
				failed = true;
				break;
			}
			rc = ntb_db_wait(link, db_seen, 50);
			if (rc < 0 && rc != -ETIMEDOUT && rc != -EINTR) {
				printf("IVSHMEM-ERROR side=%d db_wait: %s\n", side, strerror(-rc));
				failed = true;
			}
		}
	}
	uint64_t ms = now_ms() - start;

	/* Report to the peer, then wait for its report (both write first: no deadlock). */
	struct result mine = { .received = recvd, .crc_recv = crc_recv, .errors = errors };
	ntb_write(link, OFF_RESULT, &mine, offsetof(struct result, magic));
	ntb_to_peer_barrier(link);
	ntb_write64(link, OFF_RESULT + offsetof(struct result, magic), RESULT_MAGIC);
	ntb_wc_flush(link);
	ntb_peer_db_ring(link);

	struct result peer = { 0 };
	while (!failed) {
		if (in_load64(in, OFF_RESULT + offsetof(struct result, magic)) == RESULT_MAGIC) {
			memcpy(&peer, (const void *)(in + OFF_RESULT), sizeof(peer));
			break;
		}
		if (now_ms() > deadline) {
			printf("IVSHMEM-ERROR side=%d timeout waiting for the peer's result\n", side);
			failed = true;
			break;
		}
		ntb_link_tick(link);
		usleep(10000);
	}
	bool ok = !failed && sent == total && recvd == total && errors == 0 &&
		  peer.received == total && peer.crc_recv == crc_sent && peer.errors == 0;
	printf("IVSHMEM-RESULT side=%d backend=%s sent=%" PRIu64 " recv=%" PRIu64
	       " crc_sent=%08x crc_recv=%08x peer_crc_recv=%08x errors=%u peer_errors=%u ms=%"
	       PRIu64 " status=%s\n", side, bk, sent, recvd, crc_sent, crc_recv, peer.crc_recv,
	       errors, peer.errors, ms, ok ? "ok" : "fail");
	if (ok && expect_down) {
		/* The peer closes after its linger below: its disable must reach us. */
		uint64_t t0 = now_ms();
		while (ntb_link_tick(link) && now_ms() < deadline)
			usleep(10000);
		if (ntb_link_is_up(link)) {
			printf("IVSHMEM-ERROR side=%d the peer's close was not seen\n", side);
			ok = false;
		} else {
			printf("IVSHMEM-DOWN side=%d after=%" PRIu64 "\n", side, now_ms() - t0);
		}
	} else {
		/* Linger briefly so the peer sees our result before we announce link down. */
		usleep(200000);
	}
	ntb_link_close(link);
	free(sbuf);
	free(rbuf);
	free(ebuf);
	return ok ? 0 : 1;
}
