#!/bin/sh
# SPDX-License-Identifier: MIT
# TCP_DEFER_ACCEPT on a connection shared by a fork (tests/helpers/pl_opts defer-fork): the
# library may still hold its own value on the kernel socket, which each process used to clear
# on its first look, so that one process's late clear undid what the other had set. Two ntb
# connections, each shared by a fork: one process sets 3, the other must read 3 and sets 7,
# the first must read 7 (parent first, then child first), as over kernel TCP. The sockets must
# have held the library's value before the fork (else nothing was tested).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup opts-defer-fork
H=$BUILD/tests/pl_opts
[ -x "$H" ] || pl_skip "$H not built (make $H)"

port=$(pl_port 1)
env $(pl_env plain) timeout 60 "$H" serve 127.0.0.2 $port >"$PL_TMP/tcp-srv.out" 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.2 $port
env $(pl_env plain) timeout 60 "$H" defer-fork 127.0.0.2 $port >"$PL_TMP/tcp.out" 2>&1 ||
	pl_fail "kernel TCP: $(cat "$PL_TMP/tcp.out")"
echo "kernel TCP: $(tr '\n' ' ' <"$PL_TMP/tcp.out")"

port=$(pl_port 2)
pl_bg b "$H" serve 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
pl_run a "$H" defer-fork 127.0.0.2 $port >"$PL_TMP/ntb.out" 2>&1 ||
	pl_fail "ntb: $(cat "$PL_TMP/ntb.out")"
echo "ntb: $(tr '\n' ' ' <"$PL_TMP/ntb.out")"
[ "$(pl_count_log a ': ntb (link ab)')" -eq 3 ] ||
	pl_fail "$(pl_count_log a ': ntb (link ab)') of 3 connections were ntb"
[ "$(grep -cx 'armed 1' "$PL_TMP/ntb.out")" -eq 2 ] ||
	pl_fail "the sockets did not hold the library's TCP_DEFER_ACCEPT before the fork"
sed 's/^armed [01]$/armed/' "$PL_TMP/tcp.out" >"$PL_TMP/tcp.cmp"
sed 's/^armed [01]$/armed/' "$PL_TMP/ntb.out" >"$PL_TMP/ntb.cmp"
if ! cmp -s "$PL_TMP/tcp.cmp" "$PL_TMP/ntb.cmp"; then
	diff "$PL_TMP/tcp.cmp" "$PL_TMP/ntb.cmp" | sed 's/^/  /'
	pl_fail "over ntb (>) a process reads what it does not over kernel TCP (<)"
fi
echo "PASS"
