/* SPDX-License-Identifier: MIT */
/* A stand-alone link peer for integration tests: holds one side of a shm (or pci) link up,
 * watches and prints link state transitions, or streams bytes through a ring over the
 * windows with a CRC32C check.
 *
 *   ntb_peer [options] hold SECONDS       enable, tick, stay up (SIGTERM: close cleanly)
 *   ntb_peer [options] watch SECONDS      enable and print "up epoch=E peer=P t=MS" /
 *                                         "down t=MS" on every change (MS since start)
 *   ntb_peer [options] send BYTES         produce BYTES into the ring; print "crc=X"
 *   ntb_peer [options] recv BYTES         consume BYTES; print "crc=X"
 * options: -p PATH (shm file) | -d DEVICE (pci) -s SIDE -w WINDOW -b HB_MS -t TIMEOUT_MS
 * Exit 0 on success, 1 on usage or open errors, 2 when the link did not come up. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "ntb/ntb.h"
#include "util/crc32c.h"

#define RING  (1u << 20)
#define CHUNK (64u * 1024)
#define TX_OFF RING   /* producer's index in the consumer's inbound window */
#define RX_OFF 0      /* consumer's index in the producer's inbound window */

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int run_watch(struct ntb_link *l, double secs, bool print)
{
	uint64_t start = now_ms();
	bool was = false;
	uint32_t ep = 0;
	while (!stop && (double)(now_ms() - start) < secs * 1000) {
		bool up = ntb_link_tick(l);
		uint32_t pe = ntb_link_peer_epoch(l);
		if (print && (up != was || (up && pe != ep))) {
			if (up)
				printf("up epoch=%08x peer=%08x t=%llu\n", ntb_link_epoch(l), pe,
				       (unsigned long long)(now_ms() - start));
			else
				printf("down t=%llu\n", (unsigned long long)(now_ms() - start));
			fflush(stdout);
		}
		was = up;
		ep = pe;
		sleep_ms(5);
	}
	return 0;
}

static void fill(uint64_t *buf, size_t words, uint64_t pos)
{
	for (size_t i = 0; i < words; i++) {
		uint64_t z = pos + i + 0x9e3779b97f4a7c15ULL;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		buf[i] = z ^ (z >> 31);
	}
}

static int run_send(struct ntb_link *l, uint64_t total)
{
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(l, &sz);
	const _Atomic uint64_t *rx_word = (const _Atomic uint64_t *)(in + RX_OFF);
	static uint64_t chunk[CHUNK / 8];
	uint64_t tx = 0, rx = 0;
	uint32_t crc = 0;
	unsigned idle = 0;
	if (ntb_out_size(l) < RING + 8)
		return 1;
	while (tx < total && !stop) {
		if (RING - (tx - rx) < CHUNK) {
			/* Acquire: pairs with the consumer's barrier before it publishes rx. */
			rx = atomic_load_explicit(rx_word, memory_order_acquire);
			if (RING - (tx - rx) < CHUNK) {
				if ((++idle & 1023) == 0) {
					if (!ntb_link_tick(l))
						return 2;
					sched_yield();
				}
				continue;
			}
		}
		size_t n = total - tx < CHUNK ? (size_t)(total - tx) : CHUNK;
		fill(chunk, CHUNK / 8, tx / 8);
		crc = crc32c(crc, chunk, n);
		ntb_write(l, (size_t)(tx % RING), chunk, n);
		tx += n;
		/* Payload before the index that publishes it. */
		ntb_to_peer_barrier(l);
		ntb_write64(l, TX_OFF, tx);
		if ((tx & ((1u << 22) - 1)) == 0)
			ntb_link_tick(l);
	}
	/* wait until the consumer took everything */
	while (!stop && atomic_load_explicit(rx_word, memory_order_acquire) < total) {
		if (!ntb_link_tick(l))
			return 2;
		sleep_ms(1);
	}
	printf("crc=%08x\n", crc);
	return 0;
}

static int run_recv(struct ntb_link *l, uint64_t total)
{
	size_t sz;
	const volatile uint8_t *in = ntb_in_window(l, &sz);
	const _Atomic uint64_t *tx_word = (const _Atomic uint64_t *)(in + TX_OFF);
	static uint8_t buf[CHUNK];
	uint64_t rx = 0;
	uint32_t crc = 0;
	unsigned idle = 0;
	while (rx < total && !stop) {
		/* Acquire: pairs with the producer's to_peer_barrier before publishing tx. */
		uint64_t tx = atomic_load_explicit(tx_word, memory_order_acquire);
		if (tx == rx) {
			if ((++idle & 1023) == 0) {
				if (!ntb_link_tick(l))
					return 2;
				sched_yield();
			}
			continue;
		}
		if (tx < rx || tx - rx > RING || tx > total) {
			fprintf(stderr, "ntb_peer: bad tx index %llu (rx %llu)\n",
				(unsigned long long)tx, (unsigned long long)rx);
			return 3;
		}
		while (rx < tx) {
			size_t off = (size_t)(rx % RING);
			size_t n = tx - rx < CHUNK ? (size_t)(tx - rx) : CHUNK;
			if (n > RING - off)
				n = RING - off;
			crc = crc32c_copy(crc, buf, (const void *)(in + off), n);
			rx += n;
		}
		/* Release: our reads of the ring before handing the space back. */
		ntb_to_peer_barrier(l);
		ntb_write64(l, RX_OFF, rx);
		if ((rx & ((1u << 22) - 1)) == 0)
			ntb_link_tick(l);
	}
	printf("crc=%08x\n", crc);
	/* stay up briefly so the sender sees our last rx while the link is up */
	run_watch(l, 0.3, false);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: ntb_peer [-p PATH | -d DEVICE] [-s SIDE] [-w WINDOW] [-b HB_MS] "
			"[-t TIMEOUT_MS] hold|watch SECONDS | send|recv BYTES\n");
	exit(1);
}

int main(int argc, char **argv)
{
	struct ntb_link_params p;
	struct ntb_link *l;
	int opt;

	ntb_link_params_init(&p);
	snprintf(p.name, sizeof(p.name), "peer");
	p.window_size = 4u << 20;
	while ((opt = getopt(argc, argv, "p:d:s:w:b:t:")) != -1) {
		switch (opt) {
		case 'p': snprintf(p.path, sizeof(p.path), "%s", optarg); break;
		case 'd': snprintf(p.device, sizeof(p.device), "%s", optarg);
			  snprintf(p.backend, sizeof(p.backend), "pci"); break;
		case 's': p.side = atoi(optarg); break;
		case 'w': p.window_size = strtoull(optarg, NULL, 0); break;
		case 'b': p.heartbeat_ms = (uint32_t)atoi(optarg); break;
		case 't': p.link_timeout_ms = (uint32_t)atoi(optarg); break;
		default: usage();
		}
	}
	if (argc - optind != 2)
		usage();
	const char *cmd = argv[optind];
	double arg = strtod(argv[optind + 1], NULL);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	int rc = ntb_link_open(&p, &l);
	if (rc) {
		fprintf(stderr, "ntb_peer: open: %s (%s)\n", strerror(-rc), ntb_strerror_detail());
		return 1;
	}
	ntb_link_enable(l);
	printf("open side=%d epoch=%08x\n", ntb_link_side(l), ntb_link_epoch(l));
	fflush(stdout);
	if (!strcmp(cmd, "hold") || !strcmp(cmd, "watch")) {
		rc = run_watch(l, arg, !strcmp(cmd, "watch"));
	} else if (!strcmp(cmd, "send") || !strcmp(cmd, "recv")) {
		if (ntb_link_wait_up(l, 20000)) {
			fprintf(stderr, "ntb_peer: link did not come up\n");
			ntb_link_close(l);
			return 2;
		}
		rc = !strcmp(cmd, "send") ? run_send(l, (uint64_t)arg) : run_recv(l, (uint64_t)arg);
	} else {
		usage();
	}
	ntb_link_close(l);
	return rc;
}
