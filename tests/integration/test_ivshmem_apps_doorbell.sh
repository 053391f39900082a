#!/bin/sh
# SPDX-License-Identifier: MIT
# iperf3, socat and sockperf between a QEMU guest and the host over ivshmem-doorbell with
# interrupt doorbells (vfio-pci in the guest, an ivshmem server on the host), as part of
# `make check`; the same script `make check-ivshmem-apps-doorbell` runs.
# Under make check-asan/check-tsan the guest would run the sanitizer build of the library and
# programs inside a TCG guest of 512 MiB, where the runtime's shadow memory does not fit and
# everything runs tens of times slower: the plain build runs it (make check).
if [ -n "${PL_PRELOAD_FIRST:-}" ]; then
	echo "SKIP: the guest does not run the sanitizer build (make check runs this test)"
	exit 77
fi
IVSHMEM_APPS_MODE=doorbell exec sh "$(dirname "$0")/ivshmem/apps.sh"
