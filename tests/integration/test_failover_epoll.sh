#!/bin/sh
# SPDX-License-Identifier: MIT
# Failover seen by event-driven and threaded programs: an edge-triggered epoll echo
# server (pl_echo et) with 100 live connections from an edge-triggered epoll client (pl_echo
# eclient, every byte echoed and checked) while `ntbsock link down` moves them all at once;
# then a program with one thread blocked in recv() and another blocked in send() while it
# happens. Every byte exact, every call returns, the logs show the failovers, and the kernel
# carried the rest.
. "$(dirname "$0")/lib.sh"
pl_need python3
PL_CONTEXTS=128
pl_setup failover-epoll
port=$(pl_port 15)
ECHO=$BUILD/tests/pl_echo
N="$BUILD/ntbsock"
[ -x "$ECHO" ] || pl_skip "$ECHO not built"

pl_bg b "$ECHO" et 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
env $(pl_env a) timeout $((120 * PL_SLOW)) "$ECHO" eclient 127.0.0.2 $port 100 $((64 * 1024 * 1024)) \
	>"$PL_TMP/ecl.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
nntb() { pl_count_log a ': ntb (link'; }
pl_wait_count a ': ntb (link' 100 20 ||
	pl_fail "not all 100 connections are ntb ($(nntb)); others: $(grep -v ': ntb (link' "$PL_TMP/a.log" |
		sed 's/.*: tcp/tcp/' | sort | uniq -c | tr '\n' ' ')"
lo0=$(pl_lo_bytes)
"$N" link down ab -c "$PL_TMP/a.conf" >/dev/null || pl_fail "ntbsock link down failed"
pl_wait_count a 'tcp (failed over: ' $((before + 2)) 20 ||
	echo "note: the 2 failovers not logged within 20 s; the threads go on anyway"
touch "$gate"
wait $C || pl_fail "the epoll client failed across the failover: $(cat "$PL_TMP/ecl.out")"
cat "$PL_TMP/ecl.out"
grep -q '100 connections x 67108864 bytes echoed exactly' "$PL_TMP/ecl.out" || pl_fail "not every byte echoed"
na=$(pl_count_log a 'tcp (failed over: '); nb=$(pl_count_log b 'tcp (failed over: ')
echo "failed over: $na client connections, $nb server connections"
# (the first connections set up start streaming at once: on a slow or loaded machine a fifth
# of them could finish their 64 MiB before the 100th is up and the link goes down)
[ "$na" -ge 50 ] && [ "$nb" -ge 50 ] || pl_fail "too few connections failed over ($na, $nb): did the transfer end first?"
d=$(( $(pl_lo_bytes) - lo0 ))
echo "kernel loopback carried $d bytes after link down"
[ "$d" -gt 10485760 ] || pl_fail "the kernel carried only $d bytes"
"$N" link up ab -c "$PL_TMP/a.conf" >/dev/null
sleep 0.3

# threads blocked in recv and in send while the connection moves
p2=$((port + 1))
BP="python3 $ROOT/tests/helpers/blocked_pair.py"
gate=$PL_TMP/gate # the server's pause ends once the failovers are logged
env $(pl_env b) $BP server $p2 60 "$gate" >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $p2
n0=$(nntb)
env $(pl_env a) timeout 60 $BP client $p2 >"$PL_TMP/cli.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
# Both connections set up over the link (a sanitizer build can take a second to start python),
# then a moment for the two threads to block: the server writes and reads once the test made
# the gate file (the failovers logged), so that a loaded machine cannot end its pause first.
pl_wait_count a ': ntb (link' $((n0 + 2)) 10 || pl_fail "the threaded client's connections are not ntb: $(cat "$PL_TMP/cli.out")"
sleep 0.3
before=$(pl_count_log a 'tcp (failed over: ')
"$N" link down ab -c "$PL_TMP/a.conf" >/dev/null || pl_fail "ntbsock link down failed"
pl_wait_count a 'tcp (failed over: ' $((before + 2)) 20 ||
	echo "note: the 2 failovers not logged within 20 s; the threads go on anyway"
touch "$gate"
wait $C || pl_fail "threaded client failed: $(cat "$PL_TMP/cli.out")"
wait $S
cat "$PL_TMP/cli.out" "$PL_TMP/srv.out"
grep -q 'CLIENT recv=ok send=ok' "$PL_TMP/cli.out" || pl_fail "a blocked thread lost or got wrong bytes"
grep -q 'SERVER 8388608 ok' "$PL_TMP/srv.out" || pl_fail "the server did not get the 8 MiB exact"
after=$(pl_count_log a 'tcp (failed over: ')
[ $((after - before)) -eq 2 ] || pl_fail "expected the 2 connections to fail over, saw $((after - before))"
echo "100 epoll connections and two blocked threads moved to tcp without losing a byte: ok"
