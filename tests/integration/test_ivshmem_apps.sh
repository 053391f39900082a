#!/bin/sh
# SPDX-License-Identifier: MIT
# iperf3 and socat between a QEMU guest (pci backend) and the host (shm backend) over ivshmem,
# as part of `make check`; the same script `make check-ivshmem-apps` runs.
exec sh "$(dirname "$0")/ivshmem/apps.sh"
