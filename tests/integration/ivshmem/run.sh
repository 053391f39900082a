#!/bin/sh
# SPDX-License-Identifier: MIT
# make check-ivshmem: a QEMU guest (TCG) with an ivshmem-plain device and a host process share
# one /dev/shm file; the guest runs ivshmem_xfer on the pci backend (device found with libpci,
# BAR2 mapped from sysfs), the host runs it on the shm backend, and both exchange 16 MiB each
# way with checksums. Exit 0 pass, 77 skip (only when QEMU, a kernel or busybox is missing).
#
# The guest's initramfs is built here under a temporary directory: busybox (static), this
# init script, and ivshmem_xfer with the shared libraries ldd names (Debian 12 ships no static
# libpci.a, so the guest program is linked dynamically and its libraries are copied in).
# The kernel is the host's /boot/vmlinuz-* (linux-image-amd64); no modules are needed (PCI,
# sysfs, devtmpfs and the 8250 console are built in).
set -u
cd "$(dirname "$0")/../../.." || exit 1
BUILD=${BUILD:-build}
XFER=$BUILD/tests/ivshmem_xfer
BYTES=${IVSHMEM_BYTES:-16777216}   # per direction
SHM_SIZE=64M                       # the ivshmem BAR: a power of two
WINDOW=16777216                    # the largest power-of-two window 0x5000 + 2W fits in 64 MiB
GUEST_TIMEOUT=${IVSHMEM_TIMEOUT:-170}

skip() { echo "SKIP ivshmem: $*"; exit 77; }
fail() { echo "FAIL ivshmem: $*"; exit 1; }

# --- prerequisites (installed by `make deps`) -------------------------------------------------
QEMU=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 not installed (make deps)"
KERNEL=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
[ -n "$KERNEL" ] && [ -r "$KERNEL" ] || skip "no readable /boot/vmlinuz-* (linux-image-amd64)"
BUSYBOX=
for b in /bin/busybox /usr/bin/busybox; do
	if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then BUSYBOX=$b; break; fi
done
[ -n "$BUSYBOX" ] || skip "no static busybox (busybox-static)"
command -v cpio >/dev/null || skip "cpio not installed"
command -v gzip >/dev/null || skip "gzip not installed"
[ -x "$XFER" ] || fail "$XFER not built (make $XFER)"

TMP=$(mktemp -d /tmp/ntbsock-ivshmem.XXXXXX) || fail "mktemp"
SHM=/dev/shm/ntbsock-test-ivshmem-$$
HOST_PID=
QEMU_PID=
cleanup() {
	[ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null
	[ -n "$HOST_PID" ] && kill "$HOST_PID" 2>/dev/null
	[ -n "$QEMU_PID" ] && wait "$QEMU_PID" 2>/dev/null
	[ -n "$HOST_PID" ] && wait "$HOST_PID" 2>/dev/null
	rm -f "$SHM"
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# --- initramfs ---------------------------------------------------------------------------------
ROOT=$TMP/root
mkdir -p "$ROOT/bin" "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/tmp" || fail "mkdir"
cp "$BUSYBOX" "$ROOT/bin/busybox" || fail "copy busybox"
cp "$XFER" "$ROOT/bin/ivshmem_xfer" || fail "copy $XFER"
# `ntbsock check --pci` runs in the guest too when the command is built.
TOOL=$BUILD/ntbsock
[ -x "$TOOL" ] && { cp "$TOOL" "$ROOT/bin/ntbsock" || fail "copy $TOOL"; }
# The programs' shared libraries and the dynamic loader, at their own paths.
# libpci is loaded with dlopen() at the first pci scan (ntb/backend/pci_find.c): ldd does not
# name it, so it and its own libraries are added here.
PCI_SO=$(ldconfig -p | awk '$1 == "libpci.so.3" && /x86-64/ { print $NF; exit }')
[ -n "$PCI_SO" ] || fail "libpci.so.3 not found (ldconfig -p)"
for lib in $( (ldd "$XFER"; ldd "$PCI_SO"; echo "	$PCI_SO"; [ -x "$TOOL" ] && ldd "$TOOL") |
		awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}' | sort -u); do
	mkdir -p "$ROOT$(dirname "$lib")" && cp -L "$lib" "$ROOT$lib" || fail "copy $lib"
done
sed -e "s/@BYTES@/$BYTES/" -e "s/@WINDOW@/$WINDOW/" -e "s/@TIMEOUT@/$((GUEST_TIMEOUT - 20))/" \
	tests/integration/ivshmem/init.sh > "$ROOT/init" || fail "init"
chmod 755 "$ROOT/init"
(cd "$ROOT" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$TMP/initrd.gz" ||
	fail "cpio"

# --- the shared file: created and initialised by the host side before QEMU maps it -----------
umask 077
truncate -s "$SHM_SIZE" "$SHM" || fail "truncate $SHM"
"$XFER" --side 0 --path "$SHM" --window "$WINDOW" --bytes "$BYTES" \
	--timeout "$GUEST_TIMEOUT" > "$TMP/host.log" 2>&1 &
HOST_PID=$!
i=0
until grep -q IVSHMEM-OPEN "$TMP/host.log" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 "$HOST_PID" 2>/dev/null; then
		cat "$TMP/host.log"; fail "host side did not open the link"
	fi
	sleep 0.1
done

# --- the guest -----------------------------------------------------------------------------------
start=$(date +%s)
timeout "$GUEST_TIMEOUT" "$QEMU" -accel tcg -cpu max -smp 1 -m 256 -nographic -no-reboot \
	-vga none -nic none -kernel "$KERNEL" -initrd "$TMP/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3" \
	-object memory-backend-file,id=ntbshm,share=on,mem-path="$SHM",size="$SHM_SIZE" \
	-device ivshmem-plain,memdev=ntbshm \
	< /dev/null > "$TMP/guest.log" 2>&1 &
QEMU_PID=$!
wait "$QEMU_PID"; qrc=$?
QEMU_PID=
wait "$HOST_PID"; hrc=$?
HOST_PID=
secs=$(( $(date +%s) - start ))

tr -d '\r' < "$TMP/guest.log" | grep -a 'IVSHMEM-\|GUEST-\|ntbsock\[' > "$TMP/guest.lines"
echo "--- host"; cat "$TMP/host.log"
echo "--- guest (qemu rc=$qrc, ${secs}s)"; cat "$TMP/guest.lines"

g=$(grep -a 'IVSHMEM-RESULT side=1' "$TMP/guest.lines" | tail -n 1)
h=$(grep -a 'IVSHMEM-RESULT side=0' "$TMP/host.log" | tail -n 1)
if [ -z "$g" ]; then
	echo "--- guest console (tail)"; tr -d '\r' < "$TMP/guest.log" | tail -n 30
	fail "no result line from the guest (qemu rc=$qrc)"
fi
grep -aq 'IVSHMEM-LIST 0000:00:0[0-9a-f].0 1af4:1110 ivshmem bar2 67108864' "$TMP/guest.lines" ||
	fail "guest: ntb_pci_list() did not report the ivshmem device with a 64 MiB BAR2"
grep -aq 'IVSHMEM-OPEN side=1 backend=pci .* db_fd=-95' "$TMP/guest.lines" ||
	fail "guest: pci link did not open (or ntb_db_fd did not say -ENOTSUP)"
grep -aq 'ntb/pci: mapped /sys/bus/pci/devices/.*/resource2_wc (67108864 bytes, WC)' \
	"$TMP/guest.lines" || fail "guest: BAR2 (prefetchable) was not mapped through resource2_wc"
if [ -x "$TOOL" ]; then
	grep -aq 'GUEST-CHECK .*1af4:1110.*ivshmem' "$TMP/guest.lines" ||
		fail "guest: ntbsock check --pci did not list the ivshmem device"
fi
grep -aq 'IVSHMEM-DOWN side=1' "$TMP/guest.lines" ||
	fail "guest: the host's link close was not seen as link down"
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
[ "$(field "$g" status)" = ok ] || fail "guest side failed: $g"
[ "$(field "$h" status)" = ok ] || fail "host side failed (rc=$hrc): $h"
[ "$hrc" -eq 0 ] || fail "host side exit status $hrc"
[ "$(field "$g" backend)" = pci ] && [ "$(field "$h" backend)" = shm ] || fail "wrong backends"
for f in sent recv; do
	[ "$(field "$g" $f)" = "$BYTES" ] && [ "$(field "$h" $f)" = "$BYTES" ] ||
		fail "byte counts: guest $f=$(field "$g" $f) host $f=$(field "$h" $f), want $BYTES"
done
[ "$(field "$g" crc_recv)" = "$(field "$h" crc_sent)" ] || fail "host→guest checksum differs"
[ "$(field "$h" crc_recv)" = "$(field "$g" crc_sent)" ] || fail "guest→host checksum differs"
echo "PASS ivshmem: $BYTES bytes each way between guest (pci) and host (shm), checksums" \
	"$(field "$h" crc_sent)/$(field "$g" crc_sent) match, ${secs}s"
exit 0
