/* SPDX-License-Identifier: MIT */
/* Microbenchmark: ns per pl_src_is_host() hit (preload/pl_addr.c's cache of the kernel's source
 * address), with 1..N threads looking up the same destination at once. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>

#include "preload/pl_int.h"

/*
 * Usage: src_bench [threads] [seconds]. Thread i runs on the i-th CPU of the affinity mask:
 * run pinned, e.g. taskset -c 1 build/bench/src_bench 1 2; taskset -c 0,1 build/bench/src_bench 2 2.
 * Numbers only; nothing is asserted.
 */

static struct conf cf;
static struct sockaddr_in dst;
static double seconds = 2;
static _Atomic int go;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct worker {
	pthread_t th;
	int cpu;
	double ns_per_hit;
};

static void *run(void *arg)
{
	struct worker *w = arg;
	cpu_set_t set;
	unsigned long n = 0;
	double t0, t;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	/* relaxed: a start flag, spun on */
	while (!atomic_load_explicit(&go, memory_order_relaxed))
		;
	t0 = now();
	do {
		for (int i = 0; i < 4096; i++)
			n += pl_src_is_host((struct sockaddr *)&dst, sizeof(dst), AF_INET);
		t = now();
	} while (t - t0 < seconds);
	w->ns_per_hit = (t - t0) * 1e9 / (double)n;
	return NULL;
}

int main(int argc, char **argv)
{
	int nthr = argc > 1 ? atoi(argv[1]) : 1;
	struct worker w[64];
	cpu_set_t set;
	int cpu = 0;

	if (argc > 2)
		seconds = atof(argv[2]);
	if (nthr < 1 || nthr > 64)
		return 2;
	cf.host_addrs[0].family = AF_INET;
	inet_pton(AF_INET, "127.0.0.1", &cf.host_addrs[0].u.v4);
	cf.n_host_addrs = 1;
	pl_conf = &cf;
	dst.sin_family = AF_INET;
	dst.sin_port = htons(5000);
	inet_pton(AF_INET, "127.0.0.2", &dst.sin_addr);
	if (!pl_src_is_host((struct sockaddr *)&dst, sizeof(dst), AF_INET)) { /* (learned now) */
		fprintf(stderr, "src_bench: 127.0.0.2 is not reached from 127.0.0.1\n");
		return 1;
	}
	sched_getaffinity(0, sizeof(set), &set);
	for (int i = 0; i < nthr; i++) {
		while (!CPU_ISSET(cpu % CPU_SETSIZE, &set))
			cpu++;
		w[i].cpu = cpu++ % CPU_SETSIZE;
		pthread_create(&w[i].th, NULL, run, &w[i]);
	}
	/* relaxed: a start flag */
	atomic_store_explicit(&go, 1, memory_order_relaxed);
	for (int i = 0; i < nthr; i++) {
		pthread_join(w[i].th, NULL);
		printf("thread %d (cpu %d): %.1f ns per hit\n", i, w[i].cpu, w[i].ns_per_hit);
	}
	return 0;
}
