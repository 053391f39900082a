#!/bin/sh
# SPDX-License-Identifier: MIT
# The shm backend as a peer of an ivshmem server (link key ivshmem_server), on the host only:
# two processes on one file, each joined to tests/helpers/ivshmem_server, get an eventfd from
# ntb_db_fd() and wake each other through it in a ping-pong where no 2 s poll may expire with
# the message already there (ivshmem_xfer --pingpong --wait fd). A link whose server shares
# another file, or whose server is absent, fails to open and says why; without the key
# ntb_db_fd() stays -ENOTSUP.
B=${BUILD:-build}/tests
XFER=$B/ivshmem_xfer
SERVER=$B/ivshmem_server
[ -x "$XFER" ] && [ -x "$SERVER" ] || { echo "FAIL: $XFER or $SERVER not built"; exit 1; }
F=/dev/shm/ntbsock-test-ivs-$$
G=/dev/shm/ntbsock-test-ivs-other-$$
T=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -f "$F" "$G"
	rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$T"/*.log; do echo "--- $f"; cat "$f"; done; exit 1; }
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

truncate -s 64M "$F" "$G" || fail "truncate"
"$SERVER" --socket "$T/s.sock" --shm "$F" > "$T/server.log" 2>&1 & pids="$pids $!"
"$SERVER" --socket "$T/other.sock" --shm "$G" > "$T/other.log" 2>&1 & pids="$pids $!"
i=0
until [ "$(grep -c 'IVSHMEM-SERVER ready' "$T/server.log" "$T/other.log" | grep -c ':1$')" = 2 ]; do
	i=$((i + 1)); [ $i -le 50 ] || fail "servers did not start"; sleep 0.1
done
x() { timeout 60 "$XFER" --path "$F" --window 16777216 --timeout 30 "$@"; }

x --side 0 --ivshmem-server "$T/s.sock" --pingpong 2000 --wait fd > "$T/side0.log" 2>&1 &
p0=$!; pids="$pids $p0"
x --side 1 --ivshmem-server "$T/s.sock" --pingpong 2000 --wait fd > "$T/side1.log" 2>&1 ||
	fail "side 1 failed"
wait $p0 || fail "side 0 failed"
for s in 0 1; do
	l=$(grep 'IVSHMEM-PINGPONG' "$T/side$s.log")
	[ "$(field "$l" status)" = ok ] && [ "$(field "$l" db_fd)" = 1 ] &&
		[ "$(field "$l" timeouts)" = 0 ] && [ "$(field "$l" n)" = 2000 ] ||
		fail "side $s: $l"
done
grep -q 'IVSHMEM-SERVER client 1 joined' "$T/server.log" || fail "the server saw no second peer"
echo "2000 round trips woken through ntb_db_fd(): $(grep -o 'rtt_us_median=[0-9.]*' "$T/side1.log") µs"

# Without the key: no eventfd.
x --side 0 --pingpong 1 --wait db --seq-base 2000 > "$T/plain0.log" 2>&1 & p0=$!; pids="$pids $p0"
x --side 1 --pingpong 1 --wait db --seq-base 2000 > "$T/plain1.log" 2>&1 || fail "plain side 1 failed"
wait $p0 || fail "plain side 0 failed"
grep -q 'IVSHMEM-OPEN .* db_fd=-95' "$T/plain1.log" || fail "ntb_db_fd() without a server is not -ENOTSUP"

# A server that shares another file; a server that is not there.
x --side 0 --ivshmem-server "$T/other.sock" > "$T/bad.log" 2>&1 && fail "opened with a foreign server"
grep -q 'status=fail open: Invalid argument (link ivshmem: ivshmem server .* shares another file than' \
	"$T/bad.log" || fail "foreign server: wrong error"
x --side 0 --ivshmem-server "$T/none.sock" > "$T/none.log" 2>&1 && fail "opened without a server"
grep -q 'status=fail open: No such file or directory (link ivshmem: ivshmem server .*none.sock: No such file' \
	"$T/none.log" || fail "absent server: wrong error"
echo "PASS"
