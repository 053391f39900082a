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

#endif
