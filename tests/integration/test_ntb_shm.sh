#!/bin/sh
# SPDX-License-Identifier: MIT
# Two independent processes on one shm link (tests/helpers/ntb_peer): link up, peer killed
# with SIGKILL seen as down within 1 s, restart seen as up with a new peer epoch, and 256 MiB
# through a ring over the windows with matching CRC32C on both ends.
B=${BUILD:-build}/tests
PEER=$B/ntb_peer
[ -x "$PEER" ] || { echo "FAIL: $PEER not built"; exit 1; }
F=/dev/shm/ntbsock-test-shm-$$
T=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -f "$F" "$F-ring"
	rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$T"/*; do echo "--- $f"; cat "$f"; done; exit 1; }
wait_for() { # file pattern count seconds
	i=0
	# (a file not created yet counts 0: grep prints nothing for it, and the empty operand
	# made [ fail, which ended the wait at once)
	while n=$(grep -c "$2" "$1" 2>/dev/null); [ "${n:-0}" -lt "$3" ]; do
		i=$((i + 1)); [ $i -gt $(($4 * 20)) ] && return 1; sleep 0.05
	done
}

# side 0 watches; side 1 holds
"$PEER" -p "$F" -s 0 watch 30 > "$T/watch" 2>&1 & w=$!; pids="$pids $w"
"$PEER" -p "$F" -s 1 hold 30 > "$T/hold1" 2>&1 & h=$!; pids="$pids $h"
wait_for "$T/watch" '^up ' 1 10 || fail "link did not come up"
e1=$(sed -n 's/^open side=1 epoch=\([0-9a-f]*\)/\1/p' "$T/hold1")
grep -q "^up .* peer=$e1 " "$T/watch" || fail "watcher's peer epoch is not the holder's ($e1)"
echo "link up, peer epoch $e1"

kill -9 $h; wait $h 2>/dev/null
wait_for "$T/watch" '^down ' 1 5 || fail "kill -9 of the peer not seen as down"
echo "peer killed: down seen"

"$PEER" -p "$F" -s 1 hold 30 > "$T/hold2" 2>&1 & h=$!; pids="$pids $h"
wait_for "$T/watch" '^up ' 2 10 || fail "restarted peer not seen as up"
e2=$(sed -n 's/^open side=1 epoch=\([0-9a-f]*\)/\1/p' "$T/hold2")
[ -n "$e2" ] && [ "$e2" != "$e1" ] || fail "restart did not bring a new epoch ($e1 → $e2)"
grep -q "^up .* peer=$e2 " "$T/watch" || fail "watcher does not see the new epoch $e2"
echo "restarted peer up with new epoch $e2"
kill $h $w; wait $h $w 2>/dev/null

# kill -9 → down timing: a fresh pair, kill, time until the watcher prints "down" (the
# watcher polls every 5 ms, this script every 50 ms)
"$PEER" -p "$F" -s 1 hold 30 > "$T/hold3" 2>&1 & h=$!; pids="$pids $h"
"$PEER" -p "$F" -s 0 watch 30 > "$T/watch2" 2>&1 & w=$!; pids="$pids $w"
wait_for "$T/watch2" '^up ' 1 10 || fail "link did not come up (2)"
sleep 0.3
kill -9 $h; k=$(date +%s%N); wait $h 2>/dev/null
wait_for "$T/watch2" '^down ' 1 5 || fail "kill -9 not seen (2)"
seen=$(date +%s%N)
ms=$(( (seen - k) / 1000000 ))
echo "kill -9 → down observed after ≤ ${ms} ms"
[ $ms -lt 1500 ] || fail "down took ${ms} ms (want < 1000 ms + polling slack)"
kill $w; wait $w 2>/dev/null

# 256 MiB through the ring between two unrelated processes
N=$((256 * 1024 * 1024))
"$PEER" -p "$F-ring" -s 1 recv $N > "$T/recv" 2>&1 & r=$!; pids="$pids $r"
timeout 120 "$PEER" -p "$F-ring" -s 0 send $N > "$T/send" 2>&1 || fail "sender failed"
wait $r || fail "receiver failed"
cs=$(sed -n 's/^crc=//p' "$T/send"); cr=$(sed -n 's/^crc=//p' "$T/recv")
[ -n "$cs" ] && [ "$cs" = "$cr" ] || fail "crc mismatch: sent $cs received $cr"
echo "256 MiB through the ring, crc32c $cs on both ends"
echo "PASS"
