#!/bin/sh
# SPDX-License-Identifier: MIT
# Interrupt doorbells between a QEMU guest (pci backend, vfio-pci, intel-iommu) and the host
# (shm backend joined to an ivshmem server), as part of `make check`; the same script
# `make check-ivshmem-doorbell` runs.
# Under make check-asan/check-tsan the guest would run the sanitizer build (test_ivshmem_apps.sh
# says why it cannot): the plain build runs it (make check).
if [ -n "${PL_PRELOAD_FIRST:-}" ]; then
	echo "SKIP: the guest does not run the sanitizer build (make check runs this test)"
	exit 77
fi
exec sh "$(dirname "$0")/ivshmem/doorbell.sh"
