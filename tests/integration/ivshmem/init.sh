#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the ivshmem test guest (run.sh fills in @BYTES@, @WINDOW@, @TIMEOUT@): list the
# PCI devices a profile matches, run the pci side of the exchange, print its result on the
# serial console, see the host's close as link down, and power off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
echo "GUEST-UP $(uname -r)"
/bin/ivshmem_xfer --list
# `ntbsock check --pci` as a user would run it (present when run.sh found build/ntbsock)
[ -x /bin/ntbsock ] && /bin/ntbsock check --pci 2>&1 | sed 's/^/GUEST-CHECK /'
/bin/ivshmem_xfer --side 1 --device 1af4:1110 --window @WINDOW@ --bytes @BYTES@ \
	--timeout @TIMEOUT@ --verbose --expect-down
echo "GUEST-EXIT rc=$?"
sync
poweroff -f
