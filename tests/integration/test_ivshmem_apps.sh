#!/bin/sh
# SPDX-License-Identifier: MIT
# iperf3 and socat between a QEMU guest (pci backend) and the host (shm backend) over ivshmem,
# as part of `make check`; the same script `make check-ivshmem-apps` runs.
# Under make check-asan/check-tsan the guest would run the sanitizer build of the library and
# programs inside a TCG guest of 512 MiB, where the runtime's shadow memory does not fit and
# everything runs tens of times slower: the plain build runs it (make check).
if [ -n "${PL_PRELOAD_FIRST:-}" ]; then
	echo "SKIP: the guest does not run the sanitizer build (make check runs this test)"
	exit 77
fi
exec sh "$(dirname "$0")/ivshmem/apps.sh"
