#!/bin/sh
# SPDX-License-Identifier: MIT
# Interrupt doorbells between a QEMU guest (pci backend, vfio-pci, intel-iommu) and the host
# (shm backend joined to an ivshmem server), as part of `make check`; the same script
# `make check-ivshmem-doorbell` runs.
exec sh "$(dirname "$0")/ivshmem/doorbell.sh"
