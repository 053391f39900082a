/* SPDX-License-Identifier: MIT */
/* The library's own long-lived descriptors (link and host-table files, the event fd, the
 * witnesses' epoll set, the log file) live high, from fd_park_base() up, not among the
 * program's: the program's descriptors are numbered as they would be without the library (the
 * kernel hands out the lowest free one: a program that expects two consecutive numbers gets
 * them), and preload/'s close() and close_range() pass over the parked ones, so a program that
 * closes every descriptor it does not know (a daemon's close loop) cannot close ours under us
 * and have the number reused for one of its files. */
#ifndef NTBSOCK_UTIL_FDPARK_H
#define NTBSOCK_UTIL_FDPARK_H

#include <stdbool.h>

/* The first number parked descriptors take: 64 below the smaller of the soft RLIMIT_NOFILE
 * and 1024 (so the kernel's descriptor table stays small), -1 when that leaves too little
 * room for the program (a limit under 128: nothing is parked). */
int fd_park_base(void);
/* FD moved up (a close-on-exec duplicate at fd_park_base() or above, FD itself closed) and
 * recorded as the library's; returns the descriptor to use from now on: FD itself when it is
 * negative, already high, or cannot move (no free number up there). */
int fd_park(int fd);
/* A close-on-exec duplicate of FD among the library's numbers (not recorded: for the library's
 * shorter-lived duplicates of a program's socket, which are closed with raw_close()), so that
 * it never takes the number of a descriptor the program has just closed; -1 and errno when
 * none is free at all. */
int fd_dup_high(int fd);
/* Whether FD is one of the library's parked descriptors. */
bool fd_parked(int fd);
/* The lowest parked descriptor in [FIRST, LAST], -1 when none. */
int fd_parked_first(unsigned first, unsigned last);
/* Close a descriptor of the library's, parked or not (its record cleared first). */
void fd_close_own(int fd);

#endif
