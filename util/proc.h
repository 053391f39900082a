/* SPDX-License-Identifier: MIT */
/* Process liveness, the one answer every layer uses: is a process that claimed something (a
 * link side, a connection, a row of the tcp table) still there? */
#ifndef NTBSOCK_UTIL_PROC_H
#define NTBSOCK_UTIL_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The start time of PID (field 22 of /proc/PID/stat, clock ticks since boot) and its state
 * letter into *RET_STATE (when given); 0: no such process, or /proc unreadable. */
uint64_t proc_starttime(pid_t pid, char *ret_state);

/* Is PID still a live process: not gone, not a zombie, and (STARTTIME non-zero) the same one
 * that was recorded with that start time, not a later process given the same number? Without
 * /proc: kill(PID, 0), where EPERM (someone else's process) counts as alive. */
bool proc_alive(pid_t pid, uint64_t starttime);

#endif
