#!/bin/sh
# SPDX-License-Identifier: MIT
# The shm link file deleted under a live NTB stream: the mapping stays valid, so the stream
# either completes byte-exact or ends cleanly (EOF/ECONNRESET); no program crashes; new
# connections afterwards still work (over a new link file or TCP) with verified bytes.
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup fail-unlink
port=$(pl_port 7)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"

env $(pl_env b) "$F" server 127.0.0.2 $port >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
env $(pl_env a) "$F" client 127.0.0.2 $port -s 3 -b 268435456 >"$PL_TMP/cli.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
pl_wait_text "$PL_TMP/cli.out" CONNECTED 10
sleep 0.3 # (the stream under way)
pl_assert_log a ': ntb (link'
rm -f "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1
echo "deleted $PL_LINK (and its host tables) under a live stream"
i=0
while kill -0 $C 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
kill -0 $C 2>/dev/null && pl_fail "client still running 60 s after the deletion (hang?)"
wait $C; crc=$?
[ $crc -gt 128 ] && pl_fail "client killed by signal $((crc - 128))"
kill -0 $S 2>/dev/null || { wait $S; pl_fail "server died (status $?)"; }
end=$(grep '^END' "$PL_TMP/cli.out")
echo "first stream: $end"
echo "$end" | grep -q 'bad=0' || pl_fail "first stream: corrupt bytes or no end line"
echo "$end" | grep -qE 'reason=(eof|reset|error:EPIPE)' || pl_fail "first stream ended badly: $end"
for s in 4 5; do
	pl_run a "$F" client 127.0.0.2 $port -s $s -b 8388608 >"$PL_TMP/cli$s.out" 2>&1 ||
		pl_fail "connection $s after the deletion failed: $(cat "$PL_TMP/cli$s.out")"
	grep -q '^END reason=eof .*bad=0' "$PL_TMP/cli$s.out" || pl_fail "stream $s: $(cat "$PL_TMP/cli$s.out")"
done
kill -0 $S 2>/dev/null || pl_fail "server died"
tail -n 2 "$PL_TMP/a.log"
echo "deleted link file: clean end, no crash, later connections verified: ok"
