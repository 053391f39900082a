#!/bin/sh
# SPDX-License-Identifier: MIT
# NTBSOCK_FAULT=drop=0.05,corrupt=0.05 on both hosts: 500 connections one after another
# (bench/connrate: connect, one byte each way, close) must all be set up over NTB. Every mailbox
# packet (Apply, Ack) and the index words that publish them are window writes the faults drop or
# spoil; a lost one is repeated by the client's TimerCnct well within the set-up deadline
# (100 ms for all but the first connection), and the mailbox never overwrites a packet its
# reader has not consumed. Both ends log ntb for every connection; the run time is bounded.
. "$(dirname "$0")/lib.sh"
pl_need ss
PL_LOG_LEVEL=debug # (the client's repeated Applies)
# The demo config's receive contexts: under faults a closed connection sometimes holds its
# context for seconds (its end is window writes too), which 32 (the tests' usual) does not
# cover at this rate; running short of contexts is not what this test is about.
PL_CONTEXTS=default
pl_setup setup-fault
CONNRATE=$PL_TMP/connrate
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o "$CONNRATE" "$ROOT/bench/connrate.c" ||
	pl_fail "cannot build bench/connrate.c"
spec=${SETUP_FAULT:-drop=0.05,corrupt=0.05}
N=${SETUP_FAULT_N:-500}
LIMIT_S=${SETUP_FAULT_LIMIT_S:-60}

port=$(pl_port 5)
env $(pl_env b) NTBSOCK_FAULT="$spec,seed=21" timeout 600 "$CONNRATE" server 127.0.0.2 $port \
	>"$PL_TMP/srv.out" 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.2 $port
# The listener's advertisement is a window write the faults may lose (then the client goes
# over TCP, "no listener", until the server's republication every 500 ms): past two of those.
sleep 1.1
t0=$(date +%s)
env $(pl_env a) NTBSOCK_FAULT="$spec,seed=22" timeout $((LIMIT_S + 30)) "$CONNRATE" client \
	127.0.0.2 $port $LIMIT_S $N >"$PL_TMP/cli.out" 2>"$PL_TMP/cli.err" ||
	pl_fail "connrate client failed: $(cat "$PL_TMP/cli.out" "$PL_TMP/cli.err")"
t=$(($(date +%s) - t0))
set -- $(cat "$PL_TMP/cli.out") x x x
ok=$2 failed=$3
ntb=$(pl_count_log a ': ntb (link')
tcp=$(pl_count_log a ': tcp (')
bntb=$(pl_count_log b ': ntb (link')
btcp=$(pl_count_log b ': tcp (')
# the faults hit set-up packets: the client's repetitions (debug lines of tp_connect())
rep=$(pl_count_log a 'unanswered for')
echo "$N connections under $spec in ${t} s: $ok completed, $failed failed;" \
	"client $ntb ntb, $tcp tcp; server $bntb ntb, $btcp tcp; $rep Applies repeated"
grep -hF ': tcp (' "$PL_TMP/a.log" "$PL_TMP/b.log" | sed 's/^.*: tcp/tcp/' | sort | uniq -c |
	head -5
[ "$ok" = "$N" ] && [ "$failed" = 0 ] || pl_fail "$failed of $N connections failed ($ok ok)"
[ "$tcp" -eq 0 ] || pl_fail "client: $tcp of $N connections fell back to TCP"
[ "$ntb" -eq "$N" ] || pl_fail "client: $ntb of $N connections were ntb"
[ "$bntb" -eq "$N" ] || pl_fail "server: $bntb of $N connections were ntb"
[ "$t" -le "$LIMIT_S" ] || pl_fail "took $t s (limit $LIMIT_S s)"
[ "$rep" -gt 0 ] || pl_fail "no Apply was repeated: did the faults hit the set-ups?"
echo "PASS"
