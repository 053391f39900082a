/* SPDX-License-Identifier: MIT */
/* Compiler helpers shared by every layer. */
#ifndef NTBSOCK_UTIL_COMPILER_H
#define NTBSOCK_UTIL_COMPILER_H

#include <stddef.h>

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define CACHELINE 64
#define WC_UNIT 128 /* one write-combining unit: fields written independently sit in their own */

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* A spin-wait hint for the CPU (PAUSE on x86; a compiler barrier elsewhere). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ volatile("" ::: "memory");
#endif
}

/* Ask for the line at P in a writable state (PREFETCHW on x86: no fault, no effect on what
 * memory holds; a NOP where the CPU lacks it): a store that follows finds the line owned
 * instead of waiting for it to be taken from another core's cache. */
static inline void prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

#endif
