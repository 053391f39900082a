/* SPDX-License-Identifier: MIT */
/* Microbenchmark: what the 64-byte ping-pong of `ntbsock perf` costs without the protocol —
 * 64 bytes through 128-byte inline slots (payload in the first line, padding and header in the
 * second, the sequence byte last; CRC32C fused with the copies, a shadow copy on the sender, as
 * the transport does), against the plain cache-line ping-pong between the same two CPUs, in
 * interleaved blocks. Two store orders for the slot: the transport's (padding of both lines
 * zeroed first, then payload and header) and each line written in one run.
 *
 * Usage: slot_floor [CPU_A CPU_B [ROUNDS]]  (default 0 1 10; 20000 round trips per block).
 * Numbers only; nothing is asserted. Run on an idle machine: both threads spin. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/compiler.h"
#include "util/crc32c.h"

#define SLOTS  64u
#define BLOCK  20000u
#define MODES  3 /* 0 cache line, 1 slot in the transport's order, 2 slot, each line in one run */

struct ring {
	uint8_t slot[SLOTS][128] __attribute__((aligned(128)));
	uint8_t shadow[SLOTS][128] __attribute__((aligned(128)));
};

static struct ring ab, ba;                               /* A→B and B→A */
static _Atomic uint64_t line __attribute__((aligned(128))); /* the cache-line ping-pong */
static _Atomic int mode;                                 /* -1: stop */
static pthread_barrier_t bar;
static int cpu_b;

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s) != 0)
		perror("sched_setaffinity");
}

/* Sequence byte of message I: never 0 (a fresh ring), changes every lap. */
static uint8_t seq_of(uint32_t i)
{
	return (uint8_t)((i / SLOTS) % 255u + 1u);
}

static void slot_send(struct ring *r, uint32_t i, const uint8_t *src, int m)
{
	uint8_t *d = r->slot[i % SLOTS], *s = r->shadow[i % SLOTS];
	static const uint8_t zero[64];
	uint32_t crc, h1;
	uint64_t h0;

	if (m == 1) {
		/* the transport's order (send_inline_direct()): padding of both lines first */
		memcpy(d + 48, zero, 16);
		memcpy(d + 64, zero, 52);
	}
	crc = crc32c_copy2(0, d, s, src, 64);
	if (m == 2)
		memcpy(d + 64, zero, 52);
	h0 = 64u | (uint64_t)i << 16 | (uint64_t)(crc & 0xffffu) << 48;
	h1 = crc >> 16 | (uint32_t)seq_of(i) << 24;
	memcpy(d + 116, &h0, 8);
	/* release: payload and header before the sequence byte (byte 127) */
	__atomic_store_n((uint32_t *)(void *)(d + 124), h1, __ATOMIC_RELEASE);
}

/* Wait for message I, copy it out with its CRC; false on a CRC mismatch. */
static bool slot_recv(struct ring *r, uint32_t i, uint8_t *dst)
{
	const uint8_t *s = r->slot[i % SLOTS];
	uint32_t crc, c_hi;
	uint64_t h0;

	/* acquire: pairs with the release store of the sequence byte; the first line is loaded
	 * in the same round, as the transport's spin does */
	while (__atomic_load_n(s + 127, __ATOMIC_ACQUIRE) != seq_of(i)) {
		(void)*(const volatile uint8_t *)s;
		cpu_relax();
	}
	memcpy(&h0, s + 116, 8);
	memcpy(&c_hi, s + 124, 4);
	crc = crc32c_copy(0, dst, s, 64);
	return (crc & 0xffffu) == (uint32_t)(h0 >> 48) && (crc >> 16) == (c_hi & 0xffffu);
}

static void *side_b(void *arg)
{
	uint8_t buf[64];
	uint32_t i = 0;

	(void)arg;
	pin(cpu_b);
	for (;;) {
		pthread_barrier_wait(&bar);
		int m = atomic_load(&mode);

		if (m < 0)
			return NULL;
		for (uint64_t k = 0; k < BLOCK; k++) {
			if (m == 0) {
				while (atomic_load_explicit(&line, memory_order_acquire) != 2 * k + 1)
					cpu_relax();
				atomic_store_explicit(&line, 2 * k + 2, memory_order_release);
			} else {
				if (!slot_recv(&ab, i, buf))
					fprintf(stderr, "slot_floor: CRC mismatch\n");
				slot_send(&ba, i++, buf, m);
			}
		}
	}
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int cpu_a = argc > 2 ? atoi(argv[1]) : 0, rounds = argc > 3 ? atoi(argv[3]) : 10;
	uint8_t src[64], buf[64];
	uint32_t i = 0;
	pthread_t t;

	cpu_b = argc > 2 ? atoi(argv[2]) : 1;
	for (unsigned k = 0; k < sizeof(src); k++)
		src[k] = (uint8_t)(k * 37 + 1);
	pthread_barrier_init(&bar, NULL, 2);
	pthread_create(&t, NULL, side_b, NULL);
	pin(cpu_a);
	printf("one-way ns (round trip / 2), CPUs %d and %d, %u round trips per block\n", cpu_a,
	       cpu_b, BLOCK);
	printf("%10s %22s %22s\n", "cache line", "slot, transport order", "slot, line by line");
	for (int r = 0; r < rounds; r++) {
		double ow[MODES];

		for (int m = 0; m < MODES; m++) {
			atomic_store(&mode, m);
			pthread_barrier_wait(&bar);
			double t0 = now_ns();

			for (uint64_t k = 0; k < BLOCK; k++) {
				if (m == 0) {
					atomic_store_explicit(&line, 2 * k + 1, memory_order_release);
					while (atomic_load_explicit(&line, memory_order_acquire) !=
					       2 * k + 2)
						cpu_relax();
				} else {
					slot_send(&ab, i, src, m);
					if (!slot_recv(&ba, i++, buf))
						fprintf(stderr, "slot_floor: CRC mismatch\n");
				}
			}
			if (m == 0)
				atomic_store(&line, 0);
			ow[m] = (now_ns() - t0) / BLOCK / 2;
		}
		printf("%10.1f %14.1f (%4.2fx) %14.1f (%4.2fx)\n", ow[0], ow[1], ow[1] / ow[0], ow[2],
		       ow[2] / ow[0]);
	}
	atomic_store(&mode, -1);
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	return 0;
}
