#!/bin/sh
# SPDX-License-Identifier: MIT
# TCP_DEFER_ACCEPT on a fresh client connection, read and set by two threads at once
# (tests/helpers/pl_opts defer-race): the library leaves its own value (1) on the kernel socket
# of an ntb connection and clears it the first time the program looks (pl_defer_clear()); the
# program must never read that 1, and its own set must never be undone by a clear that ran
# late. Over kernel TCP first (the same reads must be right there), then over ntb, where every
# connection must have been ntb and most must still have held the library's value when the
# race began (else the race tested nothing).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup opts-defer-race
H=$BUILD/tests/pl_opts
[ -x "$H" ] || pl_skip "$H not built (make $H)"
N=${PL_DEFER_RACE_N:-400}

port=$(pl_port 1)
env $(pl_env plain) timeout 60 "$H" serve 127.0.0.2 $port >"$PL_TMP/tcp-srv.out" 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.2 $port
env $(pl_env plain) timeout 60 "$H" defer-race 127.0.0.2 $port $N >"$PL_TMP/tcp.out" \
	2>"$PL_TMP/tcp.err" || pl_fail "kernel TCP: $(cat "$PL_TMP/tcp.out") $(head -n 5 "$PL_TMP/tcp.err")"
echo "kernel TCP: $(cat "$PL_TMP/tcp.out")"
[ "$(cat "$PL_TMP/tcp.out")" = "armed 0 of $N, bad 0" ] || pl_fail "kernel TCP: unexpected $(cat "$PL_TMP/tcp.out")"

port=$(pl_port 2)
pl_bg b "$H" serve 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
pl_run a "$H" defer-race 127.0.0.2 $port $N >"$PL_TMP/ntb.out" 2>"$PL_TMP/ntb.err"
rc=$?
echo "ntb: $(cat "$PL_TMP/ntb.out")"
[ $rc = 0 ] || pl_fail "ntb: the program read the library's value or lost its own: $(head -n 5 "$PL_TMP/ntb.err")"
ntb=$(pl_count_log a ': ntb (link')
[ "$ntb" -eq $((N + 1)) ] || pl_fail "$ntb of $((N + 1)) connections were ntb"
set -- $(cat "$PL_TMP/ntb.out")
[ "$2" -ge $((N * 9 / 10)) ] || pl_fail "only $2 of $N connections still held the library's value"
echo "PASS"
