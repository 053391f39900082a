#!/bin/sh
# SPDX-License-Identifier: MIT
# CPU of the library's helper thread in processes that hold many idle NTB connections, while
# one other connection of the same link streams (its doorbells wake every helper of the host)
# and while nothing streams. Host A: pl_hold with N connections to pl_echo (et: one epoll loop)
# on host B; an iperf3 stream from A to B beside them. For each N, the CPU time (user + system,
# from /proc/PID/task/TID/stat) of pl_hold's and pl_echo's helper threads and of their main
# threads over IT_SECS seconds, in per cent of one core. Prints a Markdown table; progress on
# stderr. Measures; never fails on a number.
#
#   sh bench/idle_timers.sh                  # IT_NS="0 1000 4000", IT_SECS=10
#   BUILD=/tmp/other-build sh bench/idle_timers.sh   (another build's library and helpers)
#   IT_PERF=1 sh bench/idle_timers.sh        (also where pl_echo's helper spends its time: perf)
#   IT_NS="4000" IT_SECS=20 IT_IPERF="-l 1K" sh bench/idle_timers.sh   (iperf3 options of the stream)
IT_ROOT=$(cd "$(dirname "$0")/.." && pwd)
IT_BUILD=${BUILD:-build}
. "$IT_ROOT/tests/integration/lib.sh"
# lib.sh derives ROOT/BUILD from a test's location; ours is bench/, one level up (as bench/lib.sh)
ROOT=$IT_ROOT
BUILD=$IT_BUILD
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD;; esac
PL_LIB=$BUILD/libntbsock.so
NS=${IT_NS:-"0 1000 4000"}
SECS=${IT_SECS:-10}
HOLD=$BUILD/tests/pl_hold
ECHO=$BUILD/tests/pl_echo
[ -x "$HOLD" ] && [ -x "$ECHO" ] || { echo "build the test helpers first (make check-unit or make $HOLD $ECHO)" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 not installed" >&2; exit 1; }
ulimit -n 20000 2>/dev/null || { echo "needs ulimit -n 20000" >&2; exit 1; }
PL_CONTEXTS=default
PL_TIMEOUT=3600
pl_setup idle-timers
# connections: the connection slots of the link (up to 4000 idle ones and the stream); contexts:
# the transfer contexts (data rings), 4096 of 16 KiB (64 MiB of the demo's 256 MiB window), as
# in the figures of bench/README.md, where set-up gives most of the idle connections a ring
for h in a b; do
	printf 'tunables = { connections = 4096; contexts = 4096; inline_slots = 8; queue_size = "16K"; };\n' >>"$PL_TMP/$h.conf"
done
"$BUILD/ntbsock" check -c "$PL_TMP/a.conf" 2>&1 |
	grep -E '^ *(connections|contexts|queue_size|inline_slots) |capacity:|transfers:' >&2

# ticks TID-PATH: utime + stime of a task (clock ticks)
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "$1" 2>/dev/null || echo 0; }
# helper_tasks PID: the task directories of PID other than its main thread
other_tasks() { for t in /proc/$1/task/*; do [ "${t##*/}" = "$1" ] || echo "$t"; done; }
child_of() { pgrep -P "$1" | head -1; }
hz=$(getconf CLK_TCK)

# measure LABEL PID...: per cent of one core over SECS for each process's helper and main thread
measure() {
	label=$1; shift
	for p in "$@"; do
		eval "h0_$p=0"; for t in $(other_tasks "$p"); do eval "h0_$p=\$((h0_$p + $(ticks "$t/stat")))"; done
		eval "m0_$p=$(ticks /proc/$p/task/$p/stat)"
	done
	sleep "$SECS"
	out="$label"
	for p in "$@"; do
		h1=0; for t in $(other_tasks "$p"); do h1=$((h1 + $(ticks "$t/stat"))); done
		m1=$(ticks /proc/$p/task/$p/stat)
		eval "h0=\$h0_$p; m0=\$m0_$p"
		out="$out | $(awk -v d=$((h1 - h0)) -v s="$SECS" -v hz="$hz" 'BEGIN { printf "%.1f", 100 * d / hz / s }')"
		out="$out | $(awk -v d=$((m1 - m0)) -v s="$SECS" -v hz="$hz" 'BEGIN { printf "%.1f", 100 * d / hz / s }')"
	done
	echo "$out"
}

p_echo=$(pl_port 1)
p_perf=$(pl_port 2)
pl_bg b iperf3 -s -B 127.0.0.2 -p "$p_perf"
pl_wait_port 127.0.0.2 "$p_perf"
echo "| N idle | stream | pl_hold helper % | pl_hold main % | pl_echo helper % | pl_echo main % | iperf3 Gbit/s |"
echo "|---|---|---|---|---|---|---|"
run=0
for n in $NS; do
	run=$((run + 1))
	port=$((p_echo + run * 10))
	pl_bg b "$ECHO" et 127.0.0.2 "$port"
	echo_t=$PL_LAST
	pl_wait_port 127.0.0.2 "$port"
	mkdir -p "$PL_TMP/h$run"
	nn=$n; [ "$nn" -gt 0 ] || nn=1 # (N = 0: one connection, closed at once below)
	pl_bg a "$HOLD" 127.0.0.2 "$port" "$PL_TMP/h$run" "$nn"
	hold_t=$PL_LAST
	i=0
	while [ ! -e "$PL_TMP/h$run/connected" ]; do
		[ $i -lt 3000 ] || { echo "pl_hold did not connect" >&2; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	if [ "$n" -eq 0 ]; then
		touch "$PL_TMP/h$run/close"
		while [ ! -e "$PL_TMP/h$run/closed" ]; do sleep 0.1; done
	fi
	hold=$(child_of "$hold_t"); echo_p=$(child_of "$echo_t")
	ntb=$(grep -c ' ntb (link' "$PL_TMP/a.log" 2>/dev/null)
	echo "N=$n: pl_hold $hold, pl_echo $echo_p ($ntb ntb set-ups logged on A so far)" >&2
	sleep 3
	if [ "${IT_PERF:-0}" = 1 ] && command -v perf >/dev/null; then
		perf record -q -o "$PL_TMP/perf$run-idle.data" -t "$(other_tasks "$echo_p" | head -1 | sed 's#.*/##')" \
			-- sleep "$SECS" >/dev/null 2>&1 &
		rec=$!
	fi
	echo "$(measure "$n | no" "$hold" "$echo_p") | - |"
	if [ -n "${rec:-}" ]; then
		wait "$rec"
		echo "pl_echo's helper, no stream:" >&2
		perf report -q -i "$PL_TMP/perf$run-idle.data" --no-children --percent-limit 2 2>/dev/null | head -25 >&2
		rec=""
	fi
	pl_run a iperf3 -c 127.0.0.2 -p "$p_perf" -t $((SECS + 4)) ${IT_IPERF:-} -J >"$PL_TMP/perf$run.json" 2>&1 &
	perf=$!
	sleep 2
	if [ "${IT_PERF:-0}" = 1 ] && command -v perf >/dev/null; then
		# (IT_PERF=1: where pl_echo's helper spends its time, on stderr)
		perf record -q -o "$PL_TMP/perf$run.data" -t "$(other_tasks "$echo_p" | head -1 | sed 's#.*/##')" \
			-- sleep "$SECS" >/dev/null 2>&1 &
		rec=$!
	fi
	row=$(measure "$n | yes" "$hold" "$echo_p")
	if [ -n "${rec:-}" ]; then
		wait "$rec"
		echo "pl_echo's helper, stream:" >&2
		perf report -q -i "$PL_TMP/perf$run.data" --no-children --percent-limit 2 2>/dev/null | head -25 >&2
		rec=""
	fi
	wait "$perf"
	gbps=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f" % (d["end"]["sum_received"]["bits_per_second"]/1e9))' "$PL_TMP/perf$run.json" 2>/dev/null || echo "?")
	echo "$row | $gbps |"
	touch "$PL_TMP/h$run/close" "$PL_TMP/h$run/exit"
	i=0
	while kill -0 "$hold_t" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	kill "$echo_t" 2>/dev/null
	sleep 1
done
