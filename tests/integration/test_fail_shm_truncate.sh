#!/bin/sh
# SPDX-License-Identifier: MIT
# The shm link file truncated under a live NTB stream (as a careless admin or another user's
# `truncate` would): both programs never die of SIGBUS, the connection fails over to its
# kernel TCP socket and completes byte-exact (128 MiB from the client, then EOF both ways:
# never a short end), and the host of each stays usable: a new connection afterwards carries
# a verified stream (over TCP: the link is gone).
# FAIL_TRUNC_SIZE: the size truncated to (default 0; 4096 and 65536 cut the region mid-way).
. "$(dirname "$0")/lib.sh"
pl_need ss truncate
pl_setup fail-trunc
port=$(pl_port 6)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"
size=${FAIL_TRUNC_SIZE:-0}

env $(pl_env b) "$F" server 127.0.0.2 $port -n 2 >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
env $(pl_env a) "$F" client 127.0.0.2 $port -s 3 -p 500 -b 134217728 -w 4096 >"$PL_TMP/cli.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
pl_wait_text "$PL_TMP/cli.out" CONNECTED 10
sleep 0.1
pl_assert_log a ': ntb (link'
truncate -s "$size" "$PL_LINK" || pl_fail "cannot truncate $PL_LINK"
echo "truncated $PL_LINK to $size bytes under a live stream"
# (the rest of the 512 MiB goes over kernel TCP: seconds; about a minute under TSan, whose
# instrumentation slows the helper's check of every byte)
i=0
while kill -0 $C 2>/dev/null && [ $i -lt 3600 ]; do sleep 0.05; i=$((i + 1)); done
kill -0 $C 2>/dev/null && pl_fail "client still running 180 s after the truncation (hang?)"
echo "client ended $((i / 20)) s after the truncation"
wait $C; crc=$?
[ $crc -gt 128 ] && pl_fail "client killed by signal $((crc - 128)) (SIGBUS is 7) after the truncation"
kill -0 $S 2>/dev/null || { wait $S; s=$?; pl_fail "server died (status $s; 135 = SIGBUS) after the truncation"; }
grep '^END' "$PL_TMP/cli.out" | grep -q 'reason=eof .*tx=134217728 bad=0' ||
	pl_fail "client: no clean end after all its bytes, or corrupt bytes: $(cat "$PL_TMP/cli.out")"
grep '^END' "$PL_TMP/srv.out" | head -1 | grep -q 'reason=eof rx=134217728 .*bad=0' ||
	pl_fail "server: not every byte then EOF: $(cat "$PL_TMP/srv.out")"
grep -q 'failed over' "$PL_TMP/a.log" "$PL_TMP/b.log" || pl_fail "no failover in the logs"
echo "client: $(grep '^END' "$PL_TMP/cli.out")"
# the server's host still works: a fresh client streams 8 MiB both ways, verified
pl_run a "$F" client 127.0.0.2 $port -s 4 -b 8388608 >"$PL_TMP/cli2.out" 2>&1 ||
	pl_fail "second connection failed: $(cat "$PL_TMP/cli2.out")"
grep -q '^END reason=eof .*bad=0' "$PL_TMP/cli2.out" || pl_fail "second stream: $(cat "$PL_TMP/cli2.out")"
# the server (-n 2) ends by itself after its second connection: 0 = every byte it got was exact
i=0
while kill -0 $S 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 $S 2>/dev/null && pl_fail "server still running after its two connections"
wait $S; s=$?
[ $s -eq 0 ] || pl_fail "server ended with status $s (2: corrupt bytes received, >128: signal): $(cat "$PL_TMP/srv.out")"
echo "truncated link: clean errors, no SIGBUS, host programs keep working: ok"
