#!/bin/sh
# SPDX-License-Identifier: MIT
# make check-ivshmem-doorbell: interrupt doorbells between a QEMU guest (TCG, q35 with an
# emulated intel-iommu) on the pci backend and a host process on the shm backend. The guest's
# ivshmem-doorbell device gets its memory and eventfds from an ivshmem server
# (tests/helpers/ivshmem_server: Debian 12 ships no contrib/ivshmem-server); the host process
# joins the same server as a peer (link key ivshmem_server); in the guest the device is bound
# to vfio-pci (the vfio modules of the guest kernel's own package), rings through the Doorbell
# register in BAR0 and takes MSI-X vector 0 as an eventfd. Three ping-pongs of sequence numbers
# (ivshmem_xfer --pingpong), both sides sleeping between messages:
#   1. woken by poll(2) on ntb_db_fd() with a 2 s timeout on both sides: no timeout may expire,
#      so every wake-up was a doorbell (on the host too: the guest's rings reach its eventfd);
#   2. woken inside ntb_db_wait() (the transport's wait) with doorbells;
#   3. the same with doorbells off on both sides (timers: 50 µs..1 ms in the guest, 1 ms on the
#      host), the reference for the latency, measured in the same run.
# Exit 0 pass, 77 skip (QEMU, kernel, modules or busybox missing), 1 fail.
set -u
cd "$(dirname "$0")/../../.." || exit 1
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD;; esac
XFER=$BUILD/tests/ivshmem_xfer
SERVER=$BUILD/tests/ivshmem_server
PINGS=${IVSHMEM_PINGS:-300}
SHM_SIZE=64M
GUEST_TIMEOUT=${IVSHMEM_TIMEOUT:-240}
TMP=/nonexistent

skip() { echo "SKIP ivshmem-doorbell: $*"; exit 77; }
fail() { echo "FAIL ivshmem-doorbell: $*"; exit 1; }

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
for c in cpio gzip taskset; do command -v $c >/dev/null || skip "$c not installed"; done
[ -x "$XFER" ] && [ -x "$SERVER" ] || fail "$XFER or $SERVER not built"

TMP=$(mktemp -d /tmp/ntbsock-ivshmem-db.XXXXXX) || fail "mktemp"
SHM=/dev/shm/ntbsock-test-ivshmem-db-$$
SOCK=$TMP/ivshmem.sock
PIDS=
QEMU_PID=
cleanup() {
	[ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	[ -n "$QEMU_PID" ] && wait "$QEMU_PID" 2>/dev/null
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -f "$SHM"
	if [ "${PL_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# --- initramfs: busybox, ivshmem_xfer and its libraries, vfio-pci and its dependencies --------
ROOT=$TMP/root
mkdir -p "$ROOT/bin" "$ROOT/lib/modules" "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" || fail "mkdir"
cp "$BUSYBOX" "$ROOT/bin/busybox" && cp "$XFER" "$ROOT/bin/ivshmem_xfer" || fail "copy"
# libpci is loaded with dlopen() at the first pci scan (ntb/backend/pci_find.c): ldd does not
# name it, so it and its own libraries are added here.
PCI_SO=$(ldconfig -p | awk '$1 == "libpci.so.3" && /x86-64/ { print $NF; exit }')
[ -n "$PCI_SO" ] || fail "libpci.so.3 not found (ldconfig -p)"
for lib in $( (ldd "$XFER"; ldd "$PCI_SO"; echo "	$PCI_SO") | awk '/=> \//{print $3} /^[[:space:]]+\//{print $1}' | sort -u); do
	mkdir -p "$ROOT$(dirname "$lib")" && cp -L "$lib" "$ROOT$lib" || fail "copy $lib"
done
: > "$ROOT/lib/modules/load-order"
for m in vfio_iommu_type1 vfio-pci; do
	line=$(grep "/$m.ko:" "$MODDIR/modules.dep") || skip "no $m.ko in $MODDIR"
	for f in $(echo "$line" | tr -d ':' | awk '{ for (i = NF; i > 1; i--) print $i; print $1 }'); do
		b=$(basename "$f")
		grep -qx "$b" "$ROOT/lib/modules/load-order" && continue
		cp "$MODDIR/$f" "$ROOT/lib/modules/$b" || fail "copy $f"
		echo "$b" >> "$ROOT/lib/modules/load-order"
	done
done
sed -e "s/@PINGS@/$PINGS/g" -e "s/@TIMEOUT@/$((GUEST_TIMEOUT - 30))/g" \
	tests/integration/ivshmem/doorbell-init.sh > "$ROOT/init" || fail "init"
chmod 755 "$ROOT/init"
(cd "$ROOT" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$TMP/initrd.gz" || fail "cpio"

# --- the ivshmem server and the host's three runs (shm backend, side 0), pinned to CPU 0 ------
umask 077
truncate -s "$SHM_SIZE" "$SHM" || fail "truncate $SHM"
taskset -c 0 "$SERVER" --socket "$SOCK" --shm "$SHM" --vectors 1 > "$TMP/server.log" 2>&1 &
PIDS="$PIDS $!"
i=0
until grep -q 'IVSHMEM-SERVER ready' "$TMP/server.log" 2>/dev/null; do
	i=$((i + 1)); [ $i -le 50 ] || fail "the ivshmem server did not start"; sleep 0.1
done
host() {
	taskset -c 0 "$XFER" --side 0 --path "$SHM" --window 16777216 --timeout "$GUEST_TIMEOUT" \
		--ivshmem-server "$SOCK" "$@"
}
(
	host --pingpong $PINGS --wait fd --seq-base 0 --verbose 2>&1 | grep -a --line-buffered 'IVSHMEM-\|doorbell\|ivshmem server'
	host --pingpong $PINGS --wait db --seq-base 1000000
	host --pingpong $PINGS --wait db --seq-base 2000000 --no-doorbell
) > "$TMP/host.log" 2>&1 &
HOST_PID=$!
PIDS="$PIDS $HOST_PID"
i=0
until grep -q IVSHMEM-OPEN "$TMP/host.log" 2>/dev/null; do
	i=$((i + 1)); [ $i -le 100 ] || { cat "$TMP/host.log"; fail "host side did not open"; }
	sleep 0.1
done

# --- the guest (CPU 1): q35 with intel-iommu (interrupt remapping) for vfio -------------------
start=$(date +%s)
timeout "$GUEST_TIMEOUT" taskset -c 1 "$QEMU" -accel tcg -cpu max -smp 1 -m 256 -nographic \
	-no-reboot -vga none -nic none -M q35 -device intel-iommu,intremap=on \
	-kernel "$KERNEL" -initrd "$TMP/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 intel_iommu=on" \
	-chardev socket,path="$SOCK",id=ivsock -device ivshmem-doorbell,chardev=ivsock,vectors=1 \
	< /dev/null > "$TMP/guest.log" 2>&1 &
QEMU_PID=$!
wait "$QEMU_PID"; qrc=$?
QEMU_PID=
wait "$HOST_PID"
secs=$(( $(date +%s) - start ))
tr -d '\r' < "$TMP/guest.log" | grep -a 'IVSHMEM-\|GUEST-\|doorbell' > "$TMP/guest.lines"
echo "--- server"; cat "$TMP/server.log"
echo "--- host"; cat "$TMP/host.log"
echo "--- guest (qemu rc=$qrc, ${secs}s)"; cat "$TMP/guest.lines"
grep -aq '^GUEST-EXIT' "$TMP/guest.lines" || {
	echo "--- guest console (tail)"; tr -d '\r' < "$TMP/guest.log" | tail -n 30
	fail "the guest did not finish (qemu rc=$qrc)"
}
! grep -aq '^GUEST-ERROR' "$TMP/guest.lines" || fail "guest set-up failed"
grep -aqx 'GUEST-DRIVER vfio-pci' "$TMP/guest.lines" || fail "guest: device not bound to vfio-pci"

field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
line() { grep -a "IVSHMEM-PINGPONG side=$2 wait=$3 " "$1" | sed -n "${4}p"; }
g_fd=$(line "$TMP/guest.lines" 1 fd 1); h_fd=$(line "$TMP/host.log" 0 fd 1)
g_db=$(line "$TMP/guest.lines" 1 db 1); h_db=$(line "$TMP/host.log" 0 db 1)
g_tm=$(line "$TMP/guest.lines" 1 db 2); h_tm=$(line "$TMP/host.log" 0 db 2)
for l in "$g_fd" "$h_fd" "$g_db" "$h_db" "$g_tm" "$h_tm"; do
	[ -n "$l" ] || fail "a ping-pong did not report"
	[ "$(field "$l" status)" = ok ] || fail "ping-pong failed: $l"
	[ "$(field "$l" n)" = "$PINGS" ] || fail "ping-pong count: $l"
done
# Both sides had an interrupt eventfd and no 2-second poll expired: every wake-up of run 1 was
# a doorbell, on the guest (MSI-X through vfio) and on the host (the eventfd QEMU writes).
for l in "$g_fd" "$h_fd" "$g_db" "$h_db"; do
	[ "$(field "$l" db_fd)" = 1 ] || fail "no ntb_db_fd() with doorbells: $l"
done
[ "$(field "$g_fd" timeouts)" = 0 ] && [ "$(field "$h_fd" timeouts)" = 0 ] ||
	fail "a sleeper was woken by its timeout, not by the doorbell"
for l in "$g_tm" "$h_tm"; do
	[ "$(field "$l" db_fd)" = 0 ] || fail "doorbells not off in the reference run: $l"
done
grep -aq 'ntb/pci: link ivshmem: interrupt doorbells through vfio-pci, ivshmem id' \
	"$TMP/guest.lines" || fail "guest: the pci backend did not open vfio doorbells"
echo "ping-pong round trip, guest (pci, TCG) ↔ host (shm), both sides sleeping, median/mean µs:"
echo "  woken by ntb_db_fd():        $(field "$g_fd" rtt_us_median) / $(field "$g_fd" rtt_us_mean)"
echo "  ntb_db_wait() with doorbells: $(field "$g_db" rtt_us_median) / $(field "$g_db" rtt_us_mean)"
echo "  ntb_db_wait() on timers:      $(field "$g_tm" rtt_us_median) / $(field "$g_tm" rtt_us_mean)"
echo "PASS ivshmem-doorbell: $PINGS round trips each, woken by interrupt doorbells both ways," \
	"${secs}s"
exit 0
