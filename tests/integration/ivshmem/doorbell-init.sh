#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the guest of `make check-ivshmem-doorbell` (doorbell.sh fills in @PINGS@, @TIMEOUT@):
# load vfio, bind the ivshmem-doorbell device to vfio-pci, then run the pci side of three
# doorbell ping-pongs with the host, in the order the host runs them: woken through
# ntb_db_fd(), woken inside ntb_db_wait() with doorbells, and ntb_db_wait() without (timers).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
echo "GUEST-UP $(uname -r)"
for m in $(cat /lib/modules/load-order); do insmod "/lib/modules/$m" || echo "GUEST-ERROR insmod $m"; done
dev=
for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/vendor):$(cat $d/device)" = 0x1af4:0x1110 ] && dev=$(basename $d)
done
[ -n "$dev" ] || echo "GUEST-ERROR no ivshmem device"
echo "GUEST-IOMMU-GROUP $(basename "$(readlink /sys/bus/pci/devices/$dev/iommu_group)")"
echo 1af4 1110 > /sys/bus/pci/drivers/vfio-pci/new_id
echo "GUEST-DRIVER $(basename "$(readlink /sys/bus/pci/devices/$dev/driver)")"
x() { /bin/ivshmem_xfer --side 1 --device 1af4:1110 --window 16777216 --timeout @TIMEOUT@ "$@"; }
x --pingpong @PINGS@ --wait fd --seq-base 0 --verbose 2>&1 | grep -a 'IVSHMEM-\|doorbell'
x --pingpong @PINGS@ --wait db --seq-base 1000000
x --pingpong @PINGS@ --wait db --seq-base 2000000 --no-doorbell
echo "GUEST-EXIT"
sync
poweroff -f
