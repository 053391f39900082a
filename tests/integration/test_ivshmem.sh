#!/bin/sh
# SPDX-License-Identifier: MIT
# The ivshmem test (QEMU guest on the pci backend ↔ host on the shm backend) as part of
# `make check`; the same script `make check-ivshmem` runs.
exec sh "$(dirname "$0")/ivshmem/run.sh"
