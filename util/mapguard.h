/* SPDX-License-Identifier: MIT */
/* Guarded shared mappings: a file mapping truncated under us (a shm link file cut short by
 * another process) must not kill the host program with SIGBUS. A registered mapping that
 * faults is replaced in place by anonymous zero pages and marked lost; the layer that owns it
 * sees mapguard_lost() and ends its link cleanly. Faults outside registered mappings go to the
 * program's previous SIGBUS disposition unchanged. */
#ifndef NTBSOCK_UTIL_MAPGUARD_H
#define NTBSOCK_UTIL_MAPGUARD_H

#include <stdbool.h>
#include <stddef.h>

#define MAPGUARD_MAX 128

/* Register [BASE, BASE+LEN); installs the SIGBUS handler on first use (once per process).
 * Returns 0, or -ENOSPC when MAPGUARD_MAX mappings are registered (the mapping then works
 * unguarded), or a negative errno from sigaction. */
int mapguard_add(void *base, size_t len);

/* Forget the mapping that starts at BASE (call before munmap). Accepts NULL. */
void mapguard_remove(void *base);

/* Did the mapping that starts at BASE fault (and now read zeros)? */
bool mapguard_lost(const void *base);

/* How many faults were absorbed since the process started (tests, statistics). */
unsigned long mapguard_faults(void);

#endif
