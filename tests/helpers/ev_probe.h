/* SPDX-License-Identifier: MIT */
/* Can this process take an eventfd with pidfd_getfd(2) and see its eventfd-id in fdinfo (the
 * event doorbell, ntb/evring.c)? Not under a seccomp filter that refuses it, nor on a kernel
 * without either: tests of the event doorbell skip there. */
#ifndef NTBSOCK_TESTS_EV_PROBE_H
#define NTBSOCK_TESTS_EV_PROBE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline bool ev_probe(void)
{
	char path[64], buf[512] = "";
	int e = eventfd(0, EFD_CLOEXEC), p = -1, d = -1;
	bool ok = false;

	if (e < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", e);
	FILE *f = fopen(path, "r");

	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);

		buf[n] = '\0';
		fclose(f);
	}
	if (strstr(buf, "eventfd-id:") && (p = (int)syscall(434 /* pidfd_open */, getpid(), 0)) >= 0)
		ok = (d = (int)syscall(438 /* pidfd_getfd */, p, e, 0)) >= 0;
	if (d >= 0)
		close(d);
	if (p >= 0)
		close(p);
	close(e);
	return ok;
}

#endif
