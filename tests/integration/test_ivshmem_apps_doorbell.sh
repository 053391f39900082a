#!/bin/sh
# SPDX-License-Identifier: MIT
# iperf3, socat and sockperf between a QEMU guest and the host over ivshmem-doorbell with
# interrupt doorbells (vfio-pci in the guest, an ivshmem server on the host), as part of
# `make check`; the same script `make check-ivshmem-apps-doorbell` runs.
IVSHMEM_APPS_MODE=doorbell exec sh "$(dirname "$0")/ivshmem/apps.sh"
