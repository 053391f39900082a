#!/bin/sh
# SPDX-License-Identifier: MIT
# make check-ivshmem-apps: unmodified iperf3 and socat between a QEMU guest (TCG) and the host,
# the guest's programs under libntbsock on the pci backend (ivshmem-plain BAR2), the host's
# servers under libntbsock on the shm backend over the same /dev/shm file. The guest also has a
# virtio NIC whose other end is a tap device in a network namespace this script creates: the
# programs' TCP connections are made through it, their payload must cross the BAR. Asserted:
# both iperf3 directions and a socat file transfer each way succeed, the files arrive
# byte-exact, the NIC's byte counters on both ends stay below 1/20 of the payload, the host's
# `ntbsock stat` shows the guest's connections as ntb, and every connection was logged ntb on
# both sides. Printed: iperf3's throughput over ntbsock and over kernel TCP through the NIC in
# the same run. Exit 0 pass, 77 skip (QEMU, kernel, modules, busybox or a program missing, or
# no network namespace / tap device: needs root), 1 fail.
#
# The guest's initramfs holds busybox, iperf3, socat, libntbsock.so and the `ntbsock` command
# with the shared libraries ldd names for them, at their own paths; not a 9p share of the host's
# root: the kernel has no 9p built in (four more modules), 9p under TCG is slow to load the
# libraries through, and a copied closure keeps the guest from seeing the host's files (its
# /dev/shm link file, its configs), so nothing in the guest can reach the host except through
# the BAR and the NIC. The NIC driver (virtio_net and what modules.dep says it needs) comes from
# /lib/modules of the kernel the guest boots (linux-image-amd64).
#
# IVSHMEM_APPS_MODE=doorbell (make check-ivshmem-apps-doorbell): the same with interrupt
# doorbells: a q35 guest with intel-iommu, its device an ivshmem-doorbell fed by
# tests/helpers/ivshmem_server, bound to vfio-pci in the guest; the host's link joins the
# server (ivshmem_server). Beside iperf3 and socat, the guest then runs a sockperf ping-pong
# against a host sockperf server, both under the library with spin_us = 0: with doorbells, and
# again with the guest's doorbell = false (both sides on timers). Asserted in addition: both
# ping-pongs complete over ntb, the guest's sockperf took interrupt doorbells through vfio-pci
# (its debug log) and the reference did not, the host's joined the ivshmem server. Printed:
# sockperf's latencies (not a wake-up measurement under TCG: see below).
set -u
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../../.." || exit 1
TMP=/nonexistent
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD;; esac
LIB=$BUILD/libntbsock.so
TOOL=$BUILD/ntbsock
SECS=${IVSHMEM_APPS_SECS:-3}            # iperf3 -t in the guest
PAYLOAD_MB=${IVSHMEM_APPS_MB:-32}       # the socat file, each way
SHM_SIZE=64M
GUEST_TIMEOUT=${IVSHMEM_TIMEOUT:-300}
HOST_IP=10.99.0.1
GUEST_IP=10.99.0.2
TAP=ntbtap0
PORT=5201                               # +1 socat up, +2 socat down, +3 kernel TCP reference,
                                        # +4 sockperf (doorbell mode)
MODE=${IVSHMEM_APPS_MODE:-plain}
SERVER=$BUILD/tests/ivshmem_server

skip() { echo "SKIP ivshmem-apps: $*"; exit 77; }
fail() {
	echo "FAIL ivshmem-apps: $*"
	for f in "$TMP"/host-*.log; do
		[ -s "$f" ] && { echo "--- $f (last 20 lines)"; tail -n 20 "$f"; }
	done
	exit 1
}

# --- prerequisites (installed by `make deps`) -------------------------------------------------
QEMU=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 not installed (make deps)"
KERNEL=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
[ -n "$KERNEL" ] && [ -r "$KERNEL" ] || skip "no readable /boot/vmlinuz-* (linux-image-amd64)"
MODDIR=/lib/modules/${KERNEL#/boot/vmlinuz-}
[ -r "$MODDIR/modules.dep" ] || skip "no $MODDIR/modules.dep for the guest's kernel"
BUSYBOX=
for b in /bin/busybox /usr/bin/busybox; do
	if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then BUSYBOX=$b; break; fi
done
[ -n "$BUSYBOX" ] || skip "no static busybox (busybox-static)"
for c in cpio gzip iperf3 socat ip ss python3 taskset md5sum; do
	command -v $c >/dev/null || skip "$c not installed"
done
[ -f "$LIB" ] && [ -x "$TOOL" ] || fail "$LIB or $TOOL not built (make)"
if [ "$MODE" = doorbell ]; then
	command -v sockperf >/dev/null || skip "sockperf not installed"
	[ -x "$SERVER" ] || fail "$SERVER not built (make $SERVER)"
fi

# --- a private network namespace with the tap device (root only) -------------------------------
if [ "${IVSHMEM_APPS_NETNS:-0}" != 1 ]; then
	unshare -n true 2>/dev/null || skip "cannot create a network namespace (needs root)"
	exec unshare -n env IVSHMEM_APPS_NETNS=1 IVSHMEM_APPS_MODE="$MODE" sh "$SELF"
fi
ip link set lo up || fail "lo up"
ip tuntap add dev $TAP mode tap 2>/dev/null || skip "cannot create a tap device (/dev/net/tun)"
ip addr add $HOST_IP/24 dev $TAP && ip link set $TAP up || fail "tap address"

TMP=$(mktemp -d /tmp/ntbsock-ivshmem-apps.XXXXXX) || fail "mktemp"
SHM=/dev/shm/ntbsock-test-ivshmem-apps-$$
NTBSOCK_STAT_TCP=$SHM.stat-tcp
export NTBSOCK_STAT_TCP
PIDS=
QEMU_PID=
cleanup() {
	[ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	[ -n "$QEMU_PID" ] && wait "$QEMU_PID" 2>/dev/null
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -f "$SHM" "$SHM.side0" "$SHM.side1" "$SHM.stat-tcp" "$SHM.admin-down"
	if [ "${PL_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# --- configs: the host (shm, side 0) and the guest (pci, side 1) on one link -------------------
# 8 receive contexts of 1 MiB rings fit a 16 MiB window; 20 KiB + 2 x 16 MiB fits the 64 MiB BAR.
conf() { # NAME ADDR PEER PEER_ADDR LINK_KEYS [TUNABLES]
	cat <<EOF
host = { name = "$1"; addresses = [ "$2" ]; };
links = ( { name = "vm"; $5 window_size = "16M"; } );
peers = ( { name = "$3"; addresses = [ "$4" ]; link = "vm"; } );
rules = ( { match = "$4/32"; ports = "1-65535"; action = "ntb"; } );
tunables = { contexts = 8; ${6:-} };
EOF
}
SOCK=$TMP/ivshmem.sock
HOST_LINK="backend = \"shm\"; side = 0; path = \"$SHM\";"
[ "$MODE" = doorbell ] && HOST_LINK="$HOST_LINK ivshmem_server = \"$SOCK\";"
conf host $HOST_IP guest $GUEST_IP "$HOST_LINK" > "$TMP/host.conf"
conf host $HOST_IP guest $GUEST_IP "$HOST_LINK" "spin_us = 0;" > "$TMP/host-pp.conf"
ROOT=$TMP/root
mkdir -p "$ROOT/bin" "$ROOT/usr/bin" "$ROOT/lib/modules" "$ROOT/etc" "$ROOT/proc" "$ROOT/sys" \
	"$ROOT/dev" "$ROOT/tmp" || fail "mkdir"
GUEST_LINK="backend = \"pci\"; device = \"1af4:1110\"; side = 1;"
conf guest $GUEST_IP host $HOST_IP "$GUEST_LINK" > "$ROOT/etc/ntbsock.conf"
conf guest $GUEST_IP host $HOST_IP "$GUEST_LINK" "spin_us = 0;" > "$ROOT/etc/ntbsock-pp.conf"
conf guest $GUEST_IP host $HOST_IP "$GUEST_LINK doorbell = false;" "spin_us = 0;" \
	> "$ROOT/etc/ntbsock-pp-timer.conf"

# --- initramfs ---------------------------------------------------------------------------------
cp "$BUSYBOX" "$ROOT/bin/busybox" || fail "copy busybox"
IPERF3=$(command -v iperf3); SOCAT=$(command -v socat); SOCKPERF=
cp "$IPERF3" "$ROOT/usr/bin/iperf3" && cp "$SOCAT" "$ROOT/usr/bin/socat" &&
	cp "$LIB" "$ROOT/lib/libntbsock.so" && cp "$TOOL" "$ROOT/bin/ntbsock" || fail "copy programs"
if [ "$MODE" = doorbell ]; then
	SOCKPERF=$(command -v sockperf)
	cp "$SOCKPERF" "$ROOT/usr/bin/sockperf" || fail "copy sockperf"
fi
# libpci is loaded with dlopen() at the first pci scan (ntb/backend/pci_find.c): ldd does not
# name it, so it and its own libraries are added here.
PCI_SO=$(ldconfig -p | awk '$1 == "libpci.so.3" && /x86-64/ { print $NF; exit }')
[ -n "$PCI_SO" ] || fail "libpci.so.3 not found (ldconfig -p)"
for lib in $( (ldd "$IPERF3" "$SOCAT" "$LIB" "$TOOL" $SOCKPERF "$PCI_SO"; echo "	$PCI_SO") |
		awk '/=> \//{print $3} /^[[:space:]]+\//{print $1}' | sort -u); do
	mkdir -p "$ROOT$(dirname "$lib")" && cp -L "$lib" "$ROOT$lib" || fail "copy $lib"
done
# The NIC driver and its dependencies, in modules.dep's order (the last one listed first).
: > "$ROOT/lib/modules/load-order"
MODULES="virtio_pci virtio_net"
[ "$MODE" = doorbell ] && MODULES="$MODULES vfio_iommu_type1 vfio-pci"
for m in $MODULES; do
	line=$(grep "/$m.ko:" "$MODDIR/modules.dep") || skip "no $m.ko in $MODDIR"
	for f in $(echo "$line" | tr -d ':' | awk '{ for (i = NF; i > 1; i--) print $i; print $1 }'); do
		b=$(basename "$f")
		grep -qx "$b" "$ROOT/lib/modules/load-order" && continue
		cp "$MODDIR/$f" "$ROOT/lib/modules/$b" || fail "copy $f"
		echo "$b" >> "$ROOT/lib/modules/load-order"
	done
done
head -c $((PAYLOAD_MB * 1048576)) /dev/urandom > "$TMP/payload" || fail "payload"
cp "$TMP/payload" "$ROOT/payload" || fail "payload copy"
sed -e "s/@HOST@/$HOST_IP/g" -e "s/@GUEST@/$GUEST_IP/g" -e "s/@PORT@/$PORT/g" \
	-e "s/@SECS@/$SECS/g" -e "s/@TIMEOUT@/60/g" -e "s/@MODE@/$MODE/g" \
	tests/integration/ivshmem/apps-init.sh > "$ROOT/init" || fail "init"
chmod 755 "$ROOT/init"
(cd "$ROOT" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$TMP/initrd.gz" || fail "cpio"

# --- the host's servers under the library (shm backend), pinned to CPU 0 -------------------------
umask 077
truncate -s "$SHM_SIZE" "$SHM" || fail "truncate $SHM"
if [ "$MODE" = doorbell ]; then
	taskset -c 0 "$SERVER" --socket "$SOCK" --shm "$SHM" --vectors 1 > "$TMP/server.log" 2>&1 &
	PIDS="$PIDS $!"
	i=0
	until grep -q 'IVSHMEM-SERVER ready' "$TMP/server.log" 2>/dev/null; do
		i=$((i + 1)); [ $i -le 50 ] || fail "the ivshmem server did not start"; sleep 0.1
	done
fi
host_bg() { # NAME CMD...: under the library with the host's config
	n=$1; shift
	env NTBSOCK_CONF="$TMP/host.conf" NTBSOCK_LOG=info NTBSOCK_LOG_FILE="$TMP/host.log" \
		LD_PRELOAD="$LIB" timeout "$GUEST_TIMEOUT" taskset -c 0 "$@" \
		> "$TMP/host-$n.log" 2>&1 &
	PIDS="$PIDS $!"
}
wait_port() {
	i=0
	until ss -Hltn "sport = :$1" | grep -q "$HOST_IP:$1"; do
		i=$((i + 1)); [ $i -le 100 ] || fail "nothing listens on $HOST_IP:$1"; sleep 0.1
	done
}
host_bg iperf3 iperf3 -s -B $HOST_IP -p $PORT
host_bg socat-up socat -u TCP-LISTEN:$((PORT + 1)),bind=$HOST_IP,reuseaddr \
	OPEN:"$TMP/up",creat,trunc
SOCAT_UP=$!
host_bg socat-down socat -u OPEN:"$TMP/payload" TCP-LISTEN:$((PORT + 2)),bind=$HOST_IP,reuseaddr
for p in $PORT $((PORT + 1)) $((PORT + 2)); do wait_port $p; done
if [ "$MODE" = doorbell ]; then
	# Last to open the link, so the one the guest's rings interrupt (the others poll).
	env NTBSOCK_CONF="$TMP/host-pp.conf" NTBSOCK_LOG=debug NTBSOCK_LOG_FILE="$TMP/host-pp.log" \
		LD_PRELOAD="$LIB" timeout "$GUEST_TIMEOUT" taskset -c 0 \
		sockperf sr --tcp -i $HOST_IP -p $((PORT + 4)) > "$TMP/host-sockperf.log" 2>&1 &
	PIDS="$PIDS $!"
	wait_port $((PORT + 4))
fi
[ -s "$SHM.side0" ] || fail "the host's servers did not open the link ($SHM.side0 missing)"

# `ntbsock stat` on the host, twice a second while the guest runs (connections are live only
# while they last; the samples are read afterwards).
mkdir "$TMP/stat"
(
	i=0
	while [ $i -lt 1000 ]; do
		"$TOOL" stat --json -c "$TMP/host.conf" > "$TMP/stat/$i.json" 2>&1
		i=$((i + 1)); sleep 0.5
	done
) &
STAT_PID=$!
PIDS="$PIDS $STAT_PID"

# --- the guest (pinned to CPU 1) -------------------------------------------------------------------
start=$(date +%s)
if [ "$MODE" = doorbell ]; then
	set -- -M q35 -device intel-iommu,intremap=on \
		-chardev socket,path="$SOCK",id=ivsock -device ivshmem-doorbell,chardev=ivsock,vectors=1
	CMDLINE="intel_iommu=on"
else
	set -- -object memory-backend-file,id=ntbshm,share=on,mem-path="$SHM",size="$SHM_SIZE" \
		-device ivshmem-plain,memdev=ntbshm
	CMDLINE=
fi
timeout "$GUEST_TIMEOUT" taskset -c 1 "$QEMU" -accel tcg -cpu max -smp 1 -m 512 -nographic \
	-no-reboot -vga none -kernel "$KERNEL" -initrd "$TMP/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 $CMDLINE" \
	-netdev tap,id=n0,ifname=$TAP,script=no,downscript=no -device virtio-net-pci,netdev=n0 \
	"$@" < /dev/null > "$TMP/guest.log" 2>&1 &
QEMU_PID=$!
# When the guest is done with ntbsock: the tap's counters, then the kernel TCP reference server
# (not under the library), whose traffic must not count against the NIC limit.
until grep -aq GUEST-NTB-DONE "$TMP/guest.log" 2>/dev/null; do
	kill -0 "$QEMU_PID" 2>/dev/null || break
	sleep 0.1
done
# (/proc/net/dev, not /sys/class/net: this shell's /sys belongs to the parent namespace)
set -- $(awk -v d="$TAP" '$0 ~ "^ *" d ":" { sub(/^[^:]*:/, ""); print $1, $9 }' /proc/net/dev)
tap_rx=${1:-}; tap_tx=${2:-}
[ -n "$tap_rx" ] && [ -n "$tap_tx" ] || fail "no counters for $TAP in /proc/net/dev"
ntb_secs=$(( $(date +%s) - start ))
kill "$STAT_PID" 2>/dev/null
timeout 120 taskset -c 0 iperf3 -s -1 -B $HOST_IP -p $((PORT + 3)) > "$TMP/host-tcp.log" 2>&1 &
PIDS="$PIDS $!"
wait "$QEMU_PID"; qrc=$?
QEMU_PID=
secs=$(( $(date +%s) - start ))

tr -d '\r' < "$TMP/guest.log" | grep -a '^GUEST-' > "$TMP/guest.lines"
grep -av '^GUEST-JSON' "$TMP/guest.lines"
grep -aq '^GUEST-EXIT' "$TMP/guest.lines" || {
	echo "--- guest console (tail)"; tr -d '\r' < "$TMP/guest.log" | tail -n 30
	fail "the guest did not finish (qemu rc=$qrc, ${secs}s)"
}
! grep -aq '^GUEST-ERROR' "$TMP/guest.lines" || fail "guest set-up failed"

# --- assertions ----------------------------------------------------------------------------------
for t in ntb ntbR socat-up socat-down; do
	grep -aqx "GUEST-RC $t 0" "$TMP/guest.lines" || fail "guest: $t did not exit 0"
done
# iperf3's JSON: bytes (sender side; both directions for -R the same field) and receiver Gbit/s.
iperf_field() { # TAG FIELD(bytes|gbps)
	sed -n "s/^GUEST-JSON-$1 //p" "$TMP/guest.lines" | python3 -c '
import json, sys
e = json.loads(sys.stdin.read())["end"]
print(int(e["sum_sent"]["bytes"]) if sys.argv[1] == "bytes" else
      "%.3f" % (e["sum_received"]["bits_per_second"] / 1e9))' "$2" 2>/dev/null
}
b_up=$(iperf_field ntb bytes); b_down=$(iperf_field ntbR bytes)
g_up=$(iperf_field ntb gbps); g_down=$(iperf_field ntbR gbps)
[ -n "$b_up" ] && [ -n "$b_down" ] || fail "no iperf3 result from the guest"
[ "$b_up" -gt 1048576 ] && [ "$b_down" -gt 1048576 ] ||
	fail "iperf3 moved only $b_up / $b_down bytes"
payload_bytes=$((PAYLOAD_MB * 1048576))
wait "$SOCAT_UP" 2>/dev/null
cmp "$TMP/payload" "$TMP/up" || fail "socat guest→host: the file differs"
set -- $(md5sum < "$TMP/payload")
grep -aqx "GUEST-DOWN-MD5 $1 $payload_bytes" "$TMP/guest.lines" ||
	fail "socat host→guest: the guest's copy differs (want md5 $1, $payload_bytes bytes)"

total=$((b_up + b_down + 2 * payload_bytes))
limit=$((total / 20))
g_before=$(sed -n 's/^GUEST-NIC-BEFORE rx=\([0-9]*\) tx=\([0-9]*\)$/\1 \2/p' "$TMP/guest.lines")
g_after=$(sed -n 's/^GUEST-NIC-AFTER rx=\([0-9]*\) tx=\([0-9]*\)$/\1 \2/p' "$TMP/guest.lines")
[ -n "$g_before" ] && [ -n "$g_after" ] || fail "no NIC counters from the guest"
set -- $g_before $g_after
g_nic=$(( $3 + $4 - $1 - $2 ))
t_nic=$((tap_rx + tap_tx))
echo "payload $total bytes; NIC bytes: guest $g_nic, host tap $t_nic (limit $limit each)"
[ "$g_nic" -lt "$limit" ] || fail "the guest's NIC carried $g_nic bytes: payload not over the BAR"
[ "$t_nic" -lt "$limit" ] || fail "the host's tap carried $t_nic bytes: payload not over the BAR"

set -- $(sed -n 's/^GUEST-NTB-CONNS \([0-9]*\) tcp=\([0-9]*\)$/\1 \2/p' "$TMP/guest.lines")
[ "${1:-0}" -ge 6 ] && [ "${2:-1}" -eq 0 ] ||
	fail "guest log: ${1:-?} ntb and ${2:-?} tcp connections (want >= 6 ntb, 0 tcp)"
h_ntb=$(grep -c ': ntb (link' "$TMP/host.log"); h_tcp=$(grep -c ': tcp (' "$TMP/host.log")
[ "$h_ntb" -ge 6 ] && [ "$h_tcp" -eq 0 ] ||
	fail "host log: $h_ntb ntb and $h_tcp tcp connections (want >= 6 ntb, 0 tcp)"
# The host's `ntbsock stat`: the guest's connections, as ntb on link vm, with their bytes.
seen=$(python3 - "$TMP/stat" "$GUEST_IP" <<'EOF'
import json, os, sys
d, guest = sys.argv[1], sys.argv[2]
conns, most = set(), 0
for f in os.listdir(d):
    try:
        j = json.load(open(os.path.join(d, f)))
    except ValueError:
        continue
    for c in j.get("connections", []):
        if c.get("mode") == "ntb" and c.get("link") == "vm" and \
           c.get("remote", "").startswith(guest + ":"):
            conns.add(c["remote"])
            most = max(most, c["tx"]["bytes"] + c["rx"]["bytes"])
print(len(conns), most)
EOF
)
set -- $seen
echo "host ntbsock stat: ${1:-0} distinct ntb connections from $GUEST_IP, up to ${2:-0} bytes on one"
[ "${1:-0}" -ge 1 ] && [ "${2:-0}" -gt 1048576 ] ||
	fail "the host's ntbsock stat never showed a guest connection as ntb with payload"

if [ "$MODE" = doorbell ]; then
	grep -aqx 'GUEST-DRIVER vfio-pci' "$TMP/guest.lines" || fail "guest: device not bound to vfio-pci"
	for t in pp pp-timer; do
		grep -aqx "GUEST-RC $t 0" "$TMP/guest.lines" || fail "guest: sockperf $t did not exit 0"
	done
	grep -aqx 'GUEST-PP-DOORBELL yes' "$TMP/guest.lines" ||
		fail "guest: sockperf did not get interrupt doorbells (vfio-pci)"
	grep -aqx 'GUEST-PP-TIMER-DOORBELL no' "$TMP/guest.lines" ||
		fail "guest: the reference run had doorbells"
	grep -aqx 'GUEST-PP-NTB 1' "$TMP/guest.lines" && grep -aqx 'GUEST-PP-TIMER-NTB 1' \
		"$TMP/guest.lines" || fail "guest: a sockperf connection was not ntb"
	grep -q 'ivshmem server .*: peer id' "$TMP/host-pp.log" ||
		fail "host: sockperf's link did not join the ivshmem server"
	v() { sed -n "s/^GUEST-$1 \([0-9.]*\)\$/\1/p" "$TMP/guest.lines"; }
	[ -n "$(v PP-MEAN)" ] && [ -n "$(v PP-TIMER-MEAN)" ] || fail "no sockperf ping-pong result"
	# Printed, not compared: under TCG most answers are there before sockperf's reader waits
	# (median ~1 µs either way), so these figures say little about the wake-up; the
	# link-level ping-pong of make check-ivshmem-doorbell measures it.
	echo "sockperf ping-pong, 64 B, both sides under the library with spin_us = 0, latency in µs" \
		"(TCG; not a wake-up measurement):"
	echo "  interrupt doorbells: mean $(v PP-MEAN), p50 $(v PP-P50), p99.9 $(v PP-P999)"
	echo "  timers (doorbell = false in the guest): mean $(v PP-TIMER-MEAN), p50 $(v PP-TIMER-P50)," \
		"p99.9 $(v PP-TIMER-P999)"
fi
g_tcp=$(iperf_field tcp gbps)
echo "iperf3 guest→host over ntbsock (pci↔shm): $g_up Gbit/s; host→guest (-R): $g_down Gbit/s"
echo "iperf3 guest→host over kernel TCP through the virtio NIC: ${g_tcp:-?} Gbit/s" \
	"(same run; guest under TCG on CPU 1, host on CPU 0, $(lscpu | sed -n 's/^Model name: *//p'))"
[ -n "$g_tcp" ] && python3 -c "import sys; print('ratio ntbsock/kernel TCP: %.2f (up), %.2f (down)' %
	(float(sys.argv[1]) / float(sys.argv[3]), float(sys.argv[2]) / float(sys.argv[3])))" \
	"$g_up" "$g_down" "$g_tcp"
echo "PASS ivshmem-apps: iperf3 both ways and ${PAYLOAD_MB} MiB by socat each way, byte-exact," \
	"over the BAR (guest pci, host shm), ntb phase ${ntb_secs}s, ${secs}s in all"
exit 0
