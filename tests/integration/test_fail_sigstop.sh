#!/bin/sh
# SPDX-License-Identifier: MIT
# One end of a live NTB stream stopped with SIGSTOP (FAIL_STOP_S seconds, default 3: well past
# the 500 ms link timeout and its grace, well within the 30 s peer_timeout_ms), then continued,
# each end in turn: while it is stopped the other side's poll() timeouts fire (it neither hangs
# in a call nor spins out data) and its connection stays open, as a kernel TCP connection would;
# after SIGCONT the stream completes byte-exact within 60 s, and no program dies. (A stop longer
# than peer_timeout_ms ends the connection cleanly: tests/unit/test_tp_proc.c.)
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup fail-stop
port=$(pl_port 8)
stop_s=${FAIL_STOP_S:-3}
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"

env $(pl_env b) "$F" server 127.0.0.2 $port -p 500 >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
# The stream outlasts the stop; under a sanitizer's runtime (make check-tsan: ~12 MB/s) a
# smaller one still does, and ends within the 60 s allowed after the resume.
bytes=1073741824
[ -n "${PL_PRELOAD_FIRST:-}" ] && bytes=100663296
for victim in server client; do
	env $(pl_env a) "$F" client 127.0.0.2 $port -s 7 -b $bytes -p 500 >"$PL_TMP/cli.$victim.out" 2>&1 &
	C=$!; PL_PIDS="$PL_PIDS $C"
	pl_wait_text "$PL_TMP/cli.$victim.out" CONNECTED 10
	sleep 0.5 # (the stream under way)
	if [ $victim = server ]; then v=$S; o="$PL_TMP/cli.$victim.out"; else v=$C; o="$PL_TMP/srv.out"; fi
	t0=$(grep -c '^TIMEOUT' "$o")
	kill -STOP $v
	sleep "$stop_s"
	t1=$(grep -c '^TIMEOUT' "$o")
	ended=$(grep -c '^END' "$o")
	kill -CONT $v
	echo "$victim stopped ${stop_s}s: the other side's poll timed out $((t1 - t0)) times; ended while stopped: $ended"
	[ $((t1 - t0)) -ge 1 ] || [ "$ended" -ge 1 ] ||
		pl_fail "$victim stopped: the other side neither timed out nor ended (blocked in a call?)"
	i=0
	while kill -0 $C 2>/dev/null && [ $i -lt $((600 * PL_SLOW)) ]; do sleep 0.1; i=$((i + 1)); done
	kill -0 $C 2>/dev/null && pl_fail "$victim resumed: client still running 60 s later (hang)"
	wait $C; crc=$?
	[ $crc -gt 128 ] && pl_fail "client killed by signal $((crc - 128))"
	kill -0 $S 2>/dev/null || { wait $S; pl_fail "server died (status $?)"; }
	cend=$(grep '^END' "$PL_TMP/cli.$victim.out")
	echo "$cend" | grep -q 'bad=0' || pl_fail "client: corrupt bytes or no end: $cend"
	case $cend in
	*"reason=eof "*) echo "$victim resumed: the stream completed byte-exact ($cend)";;
	*) pl_fail "$victim stopped ${stop_s}s (< peer_timeout_ms): the stream did not complete: $cend";;
	esac
	# the server's side of that connection also ended, cleanly
	j=0
	while [ "$(grep -c '^END' "$PL_TMP/srv.out")" -lt $([ $victim = server ] && echo 1 || echo 2) ] && [ $j -lt 100 ]; do
		sleep 0.1; j=$((j + 1))
	done
	send=$(grep '^END' "$PL_TMP/srv.out" | tail -n 1)
	echo "$send" | grep -qE 'reason=eof .*bad=0' || pl_fail "server ended badly: $send"
	echo "server: $send"
done
# A stall shorter than the link timeout (FAIL_SHORT_STOP, default 0.15 s) must not break the
# connection: the stream completes byte-exact.
env $(pl_env a) "$F" client 127.0.0.2 $port -s 9 -b 268435456 -p 500 >"$PL_TMP/cli.short.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
sleep 0.5
kill -STOP $S; sleep "${FAIL_SHORT_STOP:-0.15}"; kill -CONT $S
i=0
while kill -0 $C 2>/dev/null && [ $i -lt $((600 * PL_SLOW)) ]; do sleep 0.1; i=$((i + 1)); done
kill -0 $C 2>/dev/null && pl_fail "short stall: client still running 60 s later (hang)"
cend=$(grep '^END' "$PL_TMP/cli.short.out")
echo "short stall (${FAIL_SHORT_STOP:-0.15} s): $cend"
echo "$cend" | grep -q 'reason=eof .*bad=0' || pl_fail "a short stall broke the stream: $cend"
pl_assert_log a ': ntb (link'
[ "$(pl_count_log a ': ntb (link')" -ge 3 ] || pl_fail "not all connections went over ntb"
echo "SIGSTOP of either end: timeouts fired, the connection waited and completed: ok"
