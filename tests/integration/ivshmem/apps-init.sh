#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the guest of `make check-ivshmem-apps` (apps.sh fills in @HOST@, @GUEST@, @PORT@,
# @SECS@, @TIMEOUT@, @MODE@): bring up the virtual NIC, run iperf3 (both directions) and two
# socat file transfers under libntbsock on the pci link to the host (in doorbell mode, with the
# device bound to vfio-pci, also a sockperf ping-pong with and without interrupt doorbells),
# print the NIC's byte counters around them, then the same iperf3 over kernel TCP through the
# NIC as the reference, and power off. Every line the host parses starts with GUEST-.
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/shm
mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp
echo "GUEST-UP $(uname -r)"
for m in $(cat /lib/modules/load-order); do insmod "/lib/modules/$m" || echo "GUEST-ERROR insmod $m"; done
ip link set lo up
if [ @MODE@ = doorbell ]; then
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat $d/vendor):$(cat $d/device)" = 0x1af4:0x1110 ] && ivdev=$d
	done
	echo 1af4 1110 > /sys/bus/pci/drivers/vfio-pci/new_id
	echo "GUEST-DRIVER $(basename "$(readlink $ivdev/driver)")"
fi
nic=$(ls /sys/class/net | grep -v '^lo$' | head -n 1)
[ -n "$nic" ] || echo "GUEST-ERROR no network interface"
ip addr add @GUEST@/24 dev "$nic"
ip link set "$nic" up
nic_bytes() {
	echo "$(cat /sys/class/net/$nic/statistics/rx_bytes) $(cat /sys/class/net/$nic/statistics/tx_bytes)"
}
# Programs under the library: the guest's config (link backend "pci"), info log to a file.
ntb() {
	NTBSOCK_CONF=/etc/ntbsock.conf NTBSOCK_LOG=info NTBSOCK_LOG_FILE=/tmp/ntbsock.log \
		LD_PRELOAD=/lib/libntbsock.so timeout @TIMEOUT@ "$@"
}
# iperf3's JSON, one line each prefixed for the host to collect.
iperf() {
	tag=$1; shift
	"$@" -J > /tmp/$tag.json 2>&1
	echo "GUEST-RC $tag $?"
	sed "s/^/GUEST-JSON-$tag /" /tmp/$tag.json
}

set -- $(nic_bytes)
echo "GUEST-NIC-BEFORE rx=$1 tx=$2"
iperf ntb ntb iperf3 -c @HOST@ -p @PORT@ -t @SECS@
iperf ntbR ntb iperf3 -c @HOST@ -p @PORT@ -t @SECS@ -R
ntb socat -u OPEN:/payload TCP:@HOST@:$((@PORT@ + 1))
echo "GUEST-RC socat-up $?"
ntb socat -u TCP:@HOST@:$((@PORT@ + 2)) OPEN:/tmp/down,creat,trunc
echo "GUEST-RC socat-down $?"
echo "GUEST-DOWN-MD5 $(md5sum < /tmp/down | cut -d' ' -f1) $(wc -c < /tmp/down)"
rm -f /tmp/down
# sockperf ping-pong, 64 B, no spinning (spin_us = 0): with interrupt doorbells, then on timers.
pp() { # TAG CONF
	NTBSOCK_CONF=$2 NTBSOCK_LOG=debug NTBSOCK_LOG_FILE=/tmp/$1.log LD_PRELOAD=/lib/libntbsock.so \
		timeout @TIMEOUT@ sockperf pp --tcp -i @HOST@ -p $((@PORT@ + 4)) -t @SECS@ -m 64 \
		> /tmp/$1.out 2>&1
	echo "GUEST-RC $1 $?"
	grep -q 'interrupt doorbells through vfio-pci' /tmp/$1.log && db=yes || db=no
	echo "GUEST-$(echo $1 | tr a-z A-Z)-DOORBELL $db"
	echo "GUEST-$(echo $1 | tr a-z A-Z)-P50 $(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' /tmp/$1.out | tail -n 1)"
	echo "GUEST-$(echo $1 | tr a-z A-Z)-P999 $(sed -n 's/.*percentile 99.900 = *\([0-9.]*\).*/\1/p' /tmp/$1.out | tail -n 1)"
	echo "GUEST-$(echo $1 | tr a-z A-Z)-MEAN $(sed -n 's/.*Summary: Latency is *\([0-9.]*\) usec.*/\1/p' /tmp/$1.out | tail -n 1)"
	echo "GUEST-$(echo $1 | tr a-z A-Z)-NTB $(grep -c ': ntb (link' /tmp/$1.log)"
}
if [ @MODE@ = doorbell ]; then
	pp pp /etc/ntbsock-pp.conf
	pp pp-timer /etc/ntbsock-pp-timer.conf
fi
set -- $(nic_bytes)
echo "GUEST-NIC-AFTER rx=$1 tx=$2"
echo "GUEST-NTB-CONNS $(grep -c ': ntb (link' /tmp/ntbsock.log) tcp=$(grep -c ': tcp (' /tmp/ntbsock.log)"
grep 'warn\|error' /tmp/ntbsock.log | head -n 20 | sed 's/^/GUEST-LOG /'
# (each TCP fall-back with its reason: the host prints these lines, so a failed run says why)
grep ': tcp (' /tmp/ntbsock.log | head -n 5 | sed 's/^/GUEST-TCP /'
echo "GUEST-NTB-DONE"

# The reference: kernel TCP through the NIC. The host starts this server only after it read
# its tap counters (it waits for GUEST-NTB-DONE), so try until it is there.
i=0
# (iperf3 -J may exit 0 after "unable to connect": look for a result in its JSON)
until timeout @TIMEOUT@ iperf3 -c @HOST@ -p $((@PORT@ + 3)) -t @SECS@ -J > /tmp/tcp.json 2>&1 &&
		grep -q '"sum_received"' /tmp/tcp.json || [ $i -ge 40 ]; do
	i=$((i + 1)); sleep 0.5
done
echo "GUEST-RC tcp $i"
sed "s/^/GUEST-JSON-tcp /" /tmp/tcp.json
echo "GUEST-EXIT"
sync
poweroff -f
