/* SPDX-License-Identifier: MIT */
/* Transport throughput and latency in one process (both link sides, two threads):
 * tp_perf [-s SIZE] [-m MIB] [-c CONTEXTS] [-p PINGS] [-f DROP,CORRUPT]. Prints MB/s of a
 * one-way stream of SIZE-byte writes (receiver verifies a hash) and 64-byte ping-pong latency. */
#include <getopt.h>

#include "tests/helpers/tp_testlib.h"
#include "util/log.h"

struct arg {
	struct tp_conn *c;
	size_t size;
	uint64_t total, hash;
	int rc;
};

static void *rx_main(void *p)
{
	struct arg *a = p;
	uint8_t *buf = malloc(1 << 20);
	uint64_t got = 0;

	a->hash = 0xcbf29ce484222325ull;
	while (got < a->total) {
		ssize_t n = tl_recv_some(a->c, buf, 1 << 20, 10000);

		if (n <= 0) {
			a->rc = n ? (int)n : -EPIPE;
			break;
		}
		a->hash = tl_hash(a->hash, buf, (size_t)n);
		got += (uint64_t)n;
	}
	free(buf);
	return NULL;
}

static void *pong_main(void *p)
{
	struct arg *a = p;
	char buf[64];

	for (uint64_t i = 0; i < a->total; i++) {
		size_t got = 0;

		while (got < 64) {
			ssize_t n = tl_recv_some(a->c, buf + got, 64 - got, 10000);

			if (n <= 0) {
				a->rc = -EIO;
				return NULL;
			}
			got += (size_t)n;
		}
		if (tl_send_all(a->c, buf, 64)) {
			a->rc = -EIO;
			return NULL;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	size_t size = 65536;
	uint64_t mib = 256, pings = 20000;
	struct tp_params tpp;
	struct ntb_link_params lp;
	char path[128];
	struct tp_link *a, *b;
	struct tp_conn *ca, *cb;
	struct tp_key k;
	enum tp_reason why;
	double drop = 0, corrupt = 0;
	int opt;

	tp_params_init(&tpp);
	tpp.contexts = 16;
	if (getenv("TP_DEBUG"))
		log_set_level(LL_DEBUG);
	while ((opt = getopt(argc, argv, "s:m:c:p:f:w:")) != -1) {
		switch (opt) {
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'm': mib = strtoull(optarg, NULL, 0); break;
		case 'c': tpp.contexts = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'p': pings = strtoull(optarg, NULL, 0); break;
		case 'f': sscanf(optarg, "%lf,%lf", &drop, &corrupt); break;
		case 'w': tpp.spin_us = (uint32_t)strtoul(optarg, NULL, 0); break;
		default: return 2;
		}
	}
	snprintf(path, sizeof(path), "/dev/shm/ntbsock-test-perf-%d", getpid());
	tl_unlink(path);
	tl_params(&lp, path, 0, 16u << 20);
	if (drop > 0 || corrupt > 0) {
		lp.fault.enabled = true;
		lp.fault.drop = drop;
		lp.fault.corrupt = corrupt;
		lp.fault.seed = 1;
	}
	if (tp_link_open(&lp, &tpp, &a))
		return 1;
	lp.side = 1;
	if (tp_link_open(&lp, &tpp, &b))
		return 1;
	tp_listen(b, 7000);
	if (tl_wait_listen(a, 7000, 5000))
		return 1;
	tl_key(&k, 1234, 7000);
	if (tp_connect(a, &k, 5000, &ca, &why) || tp_attach(b, &k, &cb)) {
		fprintf(stderr, "connect: %s\n", tp_reason_str(why));
		return 1;
	}
	/* C11 aligned_alloc: the size a multiple of the alignment (sanitizer runtimes enforce it) */
	uint8_t *buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	uint64_t total = mib << 20, sent = 0, h = 0xcbf29ce484222325ull;
	struct arg ra = { .c = cb, .total = total };
	pthread_t t;

	tl_fill(buf, size, 5, 0);
	pthread_create(&t, NULL, rx_main, &ra);
	uint64_t t0 = tl_now_ms();
	while (sent < total) {
		size_t n = size < total - sent ? size : total - sent;

		if (tl_send_all(ca, buf, n))
			return 1;
		h = tl_hash(h, buf, n);
		sent += n;
	}
	pthread_join(t, NULL);
	uint64_t t1 = tl_now_ms();
	struct tp_stats st;
	tp_conn_stats(ca, &st);
	printf("stream size %zu: %.0f MB/s verified %s retransmits %llu\n", size,
	       (double)total / 1e3 / (double)(t1 - t0 + 1), ra.rc == 0 && ra.hash == h ? "yes" : "NO",
	       (unsigned long long)st.retransmits);
	/* ping-pong */
	struct arg pa = { .c = cb, .total = pings };
	char pbuf[64] = { 0 };
	pthread_create(&t, NULL, pong_main, &pa);
	struct timespec s0, s1;
	clock_gettime(CLOCK_MONOTONIC, &s0);
	for (uint64_t i = 0; i < pings; i++) {
		size_t got = 0;

		if (tl_send_all(ca, pbuf, 64))
			return 1;
		while (got < 64) {
			ssize_t n = tl_recv_some(ca, pbuf + got, 64 - got, 10000);

			if (n <= 0)
				return 1;
			got += (size_t)n;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &s1);
	pthread_join(t, NULL);
	double us = ((double)(s1.tv_sec - s0.tv_sec) * 1e6 + (double)(s1.tv_nsec - s0.tv_nsec) / 1e3);
	printf("ping-pong 64 B: %.2f us one-way (%llu round trips)\n", us / (double)pings / 2,
	       (unsigned long long)pings);
	tp_link_close(a);
	tp_link_close(b);
	tl_unlink(path);
	return ra.rc == 0 && ra.hash == h ? 0 : 1;
}
