#!/bin/sh
# SPDX-License-Identifier: MIT
# sockperf over ntbsock between demo hosts: ping-pong and throughput against a server using
# select (-F s), poll (-F p) and epoll (-F e) on two listening ports. Every connection must be
# ntb and the kernel's loopback must carry almost nothing. Prints p50 latency vs kernel TCP.
. "$(dirname "$0")/lib.sh"
pl_need sockperf ss
pl_setup sockperf
p1=$(pl_port 1); p2=$(pl_port 2)
printf 'T:127.0.0.2:%s\nT:127.0.0.2:%s\n' $p1 $p2 >"$PL_TMP/feed"

p50() { sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$1" | tail -1; }

# CPU ticks (user + system, all threads) of process $1 so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# idle_cpu PID MUX: an NTB connection to the server stays open and silent (pl_hold): the
# server's wait (select, poll or epoll beside its listener) must sleep after its spin budget,
# not spin or poll in a loop. Bound: 20 % of one core over 2 s (a busy loop takes 100 %).
idle_cpu() {
	[ -x "$BUILD/tests/pl_hold" ] || { echo "idle CPU: pl_hold not built, not checked"; return; }
	pid=$(pgrep -P $1 sockperf || echo $1)
	d=$PL_TMP/hold-$2; mkdir -p $d
	pl_bg a "$BUILD/tests/pl_hold" 127.0.0.2 $p1 $d
	hold=$PL_LAST
	i=0; while [ ! -e $d/connected ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -e $d/connected ] || pl_fail "-F $2: pl_hold did not connect"
	sleep 0.5
	t0=$(ticks $pid); sleep 2; t1=$(ticks $pid)
	hz=$(getconf CLK_TCK)
	echo "-F $2: idle server with an open NTB connection used $((t1 - t0)) ticks of $((2 * hz)) in 2 s"
	[ $(( (t1 - t0) * 5 )) -le $((2 * hz)) ] || pl_fail "-F $2: idle wait uses CPU ($((t1 - t0)) ticks in 2 s)"
	touch $d/close $d/exit
	wait $hold 2>/dev/null
}

for mux in s p e; do
	pl_bg b sockperf sr -f "$PL_TMP/feed" -F $mux
	srv=$PL_LAST
	pl_wait_port 127.0.0.2 $p1
	pl_wait_port 127.0.0.2 $p2
	before=$(pl_lo_bytes)
	pl_run a sockperf pp --tcp --mps 2000000 -i 127.0.0.2 -p $p1 -t 1 -m 64 >"$PL_TMP/pp-$mux.out" 2>&1 ||
		{ cat "$PL_TMP/pp-$mux.out"; pl_fail "sockperf pp (-F $mux) failed"; }
	grep -q "Summary: Latency" "$PL_TMP/pp-$mux.out" || pl_fail "pp -F $mux: no result"
	pl_run a sockperf tp --tcp -i 127.0.0.2 -p $p2 -t 1 -m 1024 >"$PL_TMP/tp-$mux.out" 2>&1 ||
		{ cat "$PL_TMP/tp-$mux.out"; pl_fail "sockperf tp (-F $mux) failed"; }
	grep -q "Summary: Message Rate" "$PL_TMP/tp-$mux.out" || pl_fail "tp -F $mux: no result"
	pl_assert_lo_below "$before" 200000
	echo "-F $mux: ping-pong p50 $(p50 "$PL_TMP/pp-$mux.out") usec; $(grep -o 'BandWidth is [0-9.]* MBps' "$PL_TMP/tp-$mux.out")"
	idle_cpu $srv $mux
	kill $srv; wait $srv 2>/dev/null
done
conns=$(pl_count_log a ': ntb (link')
[ "$conns" -ge 6 ] || pl_fail "only $conns ntb connections"
[ "$(pl_count_log a ': tcp (')" -eq 0 ] || pl_fail "some connections fell back to tcp"

# Reference: kernel TCP loopback, same run.
timeout 30 sockperf sr --tcp -i 127.0.0.1 -p $p1 >/dev/null 2>&1 &
PL_PIDS="$PL_PIDS $!"; ref=$!
pl_wait_port 127.0.0.1 $p1
timeout 30 sockperf pp --tcp --mps 2000000 -i 127.0.0.1 -p $p1 -t 1 -m 64 >"$PL_TMP/pp-tcp.out" 2>&1
echo "kernel TCP: ping-pong p50 $(p50 "$PL_TMP/pp-tcp.out") usec"
kill $ref
echo "sockperf over ntb: ok"
