#!/bin/sh
# SPDX-License-Identifier: MIT
# Fault soak (make soak SOAK_SECONDS=N): for N seconds in total, split into phases with the
# fault decorator at several rates (SOAK_RATES, space separated NTBSOCK_FAULT specs; "none" for
# no faults), run mixed traffic between demo hosts A and B over ntbsock:
#   - bulk: fail_peer streams both ways, 32 MiB per connection, back to back;
#   - many short connections: fail_peer 4 KiB each way per connection, in a loop;
#   - ping-pong: soak_epoll clients (SOAK_CONNS connections) against an edge-triggered epoll
#     echo server, random message sizes (inline, short, long), every echo verified.
# Checks per phase: every stream and echo byte-exact and ended by EOF; no echo waiting longer
# than SOAK_MAXWAIT_MS (default 5000: liveness, not speed); the long-lived servers'
# fd count back to its baseline, their anonymous RSS (RssAnon: the shared window pages do not count) within SOAK_RSS_SLACK_KB (default 16384) of it;
# no connection left in either host's table (contexts back in the pools); no stray files in
# /dev/shm for the link. Prints traffic totals per phase.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/integration/lib.sh"
pl_need ss awk
SECS=${SOAK_SECONDS:-300}
RATES=${SOAK_RATES:-"none drop=0.01,corrupt=0.01 drop=0.05,corrupt=0.05 drop=0.1,corrupt=0.02,delay_us=20"}
CONNS=${SOAK_CONNS:-8}
SLACK=${SOAK_RSS_SLACK_KB:-16384}
MAXWAIT=${SOAK_MAXWAIT_MS:-5000}
pl_setup soak
F=$BUILD/tests/fail_peer
E=$BUILD/tests/soak_epoll
[ -x "$F" ] && [ -x "$E" ] || pl_fail "helpers not built (make soak builds them)"
nphase=$(echo $RATES | wc -w)
phase_s=$(( SECS / nphase )); [ $phase_s -lt 5 ] && phase_s=5
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss() { awk '/^RssAnon/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# no_conns JSON: `ntbsock stat --json` output without connections (links follow them).
no_conns() { case $1 in '{"connections":[],'*) return 0;; esac; return 1; }
tables_empty() {
	i=0
	while [ $i -lt 100 ]; do
		a=$("$BUILD/ntbsock" stat -c "$PL_TMP/a.conf" --json 2>&1)
		b=$("$BUILD/ntbsock" stat -c "$PL_TMP/b.conf" --json 2>&1)
		no_conns "$a" && no_conns "$b" && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "stat a: $a"; echo "stat b: $b"; return 1
}
total_conns=0; total_msgs=0; total_bytes=0
p=0
for rate in $RATES; do
	p=$((p + 1))
	fault=""; [ "$rate" != none ] && fault="NTBSOCK_FAULT=$rate,seed=$p"
	port1=$(pl_port $((p * 2))); port2=$(pl_port $((p * 2 + 1)))
	env $(pl_env b) $fault "$F" server 127.0.0.2 $port1 >"$PL_TMP/p$p.srv.out" 2>&1 &
	S1=$!; PL_PIDS="$PL_PIDS $S1"
	env $(pl_env b) $fault "$E" server 127.0.0.2 $port2 >"$PL_TMP/p$p.esrv.out" 2>&1 &
	S2=$!; PL_PIDS="$PL_PIDS $S2"
	pl_wait_port 127.0.0.2 $port1; pl_wait_port 127.0.0.2 $port2
	# warm up (first connection maps the link, starts the helper thread), then the baseline
	env $(pl_env a) $fault "$F" client 127.0.0.2 $port1 -b 65536 >/dev/null 2>&1 || pl_fail "phase $p: warm-up failed"
	env $(pl_env a) $fault "$E" client 127.0.0.2 $port2 -c 2 -t 1 >/dev/null 2>&1 || pl_fail "phase $p: epoll warm-up failed"
	tables_empty || pl_fail "phase $p: tables not empty after warm-up"
	f1=$(fds $S1); f2=$(fds $S2); r1=$(rss $S1); r2=$(rss $S2)
	end=$(( $(date +%s) + phase_s ))
	# bulk loop
	( k=0; while [ "$(date +%s)" -lt $end ]; do k=$((k + 1))
		env $(pl_env a) $fault "$F" client 127.0.0.2 $port1 -s $((p * 100000 + k)) -b 33554432 \
			>>"$PL_TMP/p$p.bulk.out" 2>&1 || echo "FAILED rc=$?" >>"$PL_TMP/p$p.bulk.out"
	done ) &
	B=$!
	# short connections loop
	( k=0; while [ "$(date +%s)" -lt $end ]; do k=$((k + 1))
		env $(pl_env a) $fault "$F" client 127.0.0.2 $port1 -s $((p * 100000 + 50000 + k)) -b 4096 -w 512 \
			>>"$PL_TMP/p$p.short.out" 2>&1 || echo "FAILED rc=$?" >>"$PL_TMP/p$p.short.out"
	done ) &
	Sh=$!
	env $(pl_env a) $fault "$E" client 127.0.0.2 $port2 -c $CONNS -t $phase_s -s $p >"$PL_TMP/p$p.pp.out" 2>&1 \
		|| pl_fail "phase $p ($rate): ping-pong failed: $(cat "$PL_TMP/p$p.pp.out")"
	wait $B; wait $Sh
	# checks
	grep -q FAILED "$PL_TMP/p$p.bulk.out" "$PL_TMP/p$p.short.out" &&
		pl_fail "phase $p ($rate): a client failed: $(grep -h -B2 FAILED "$PL_TMP/p$p.bulk.out" "$PL_TMP/p$p.short.out" | head -n 8)"
	nb=$(grep -c '^END' "$PL_TMP/p$p.bulk.out"); ns=$(grep -c '^END' "$PL_TMP/p$p.short.out")
	[ "$(grep -c '^END reason=eof .*bad=0' "$PL_TMP/p$p.bulk.out")" -eq "$nb" ] &&
	[ "$(grep -c '^END reason=eof .*bad=0' "$PL_TMP/p$p.short.out")" -eq "$ns" ] ||
		pl_fail "phase $p ($rate): a stream was not byte-exact or not ended by EOF"
	sleep 0.5
	srv_bad=$(grep '^END' "$PL_TMP/p$p.srv.out" | grep -vc 'reason=eof .*bad=0')
	[ "$srv_bad" -eq 0 ] || pl_fail "phase $p ($rate): server side: $(grep '^END' "$PL_TMP/p$p.srv.out" | grep -v 'reason=eof .*bad=0' | head -n 3)"
	tables_empty || pl_fail "phase $p ($rate): connections left in the host tables (contexts leaked)"
	g1=$(fds $S1); g2=$(fds $S2); q1=$(rss $S1); q2=$(rss $S2)
	[ "$g1" = "$f1" ] && [ "$g2" = "$f2" ] || pl_fail "phase $p ($rate): fd leak: stream server $f1 → $g1, epoll server $f2 → $g2"
	[ $((q1 - r1)) -le $SLACK ] && [ $((q2 - r2)) -le $SLACK ] ||
		pl_fail "phase $p ($rate): RSS grew: stream server ${r1} → ${q1} KiB, epoll server ${r2} → ${q2} KiB"
	pp=$(cat "$PL_TMP/p$p.pp.out")
	msgs=$(echo "$pp" | sed 's/.*msgs=\([0-9]*\).*/\1/'); byt=$(echo "$pp" | sed 's/.*bytes=\([0-9]*\).*/\1/')
	# liveness, not speed: no echo may wait longer than SOAK_MAXWAIT_MS (a hang, or a stall
	# of the kind an edge-triggered server under loss had: 224 echoes in 60 s)
	mw=$(echo "$pp" | sed -n 's/.*maxwait_ms=\([0-9]*\).*/\1/p')
	[ -n "$mw" ] && [ "$mw" -le "$MAXWAIT" ] ||
		pl_fail "phase $p ($rate): an echo waited ${mw:-?} ms (at most $MAXWAIT): $pp"
	bulk_b=$(grep '^END' "$PL_TMP/p$p.bulk.out" | sed 's/.*tx=\([0-9]*\).*/\1/' | awk '{ s += $1 } END { printf "%.0f", s }')
	echo "phase $p: ${phase_s}s, faults: $rate — bulk $nb conns ($((bulk_b / 1048576)) MiB sent by clients), short $ns conns, ping-pong $CONNS conns $msgs msgs $((byt / 1048576)) MiB echoed (longest wait ${mw} ms); fds $f1/$f2 → $g1/$g2, RSS ${r1}/${r2} → ${q1}/${q2} KiB: ok"
	total_conns=$((total_conns + nb + ns + CONNS)); total_msgs=$((total_msgs + msgs))
	kill $S1 $S2 2>/dev/null; wait $S1 $S2 2>/dev/null
done
# Under heavy faults a set-up may run out of time and fall back to TCP (doc/design.md §6: reason
# "timeout" / "no receive context"); those streams were verified too. Allow at most 5 %.
ntb=$(pl_count_log a ': ntb (link'); tcp=$(pl_count_log a ': tcp (')
if [ "$tcp" -gt 0 ]; then
	echo "connections that fell back to TCP: $tcp"
	grep -F ': tcp (' "$PL_TMP/a.log" | sed 's/.*: tcp (/  tcp (/' | sort | uniq -c
fi
[ $((tcp * 20)) -le $((ntb + tcp)) ] || pl_fail "$tcp of $((ntb + tcp)) client connections fell back to TCP"
[ "$ntb" -ge $((total_conns * 95 / 100)) ] || pl_fail "only $ntb of $total_conns client connections used ntb"
left=$(ls /dev/shm | grep -c "ntbsock-test-soak-$$" || true)
echo "soak: $SECS s, $nphase fault rates, $total_conns connections ($tcp fell back to TCP), $total_msgs ping-pong messages: byte-exact, no leaks: ok (shm files of the link: $left)"
