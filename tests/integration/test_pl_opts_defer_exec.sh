#!/bin/sh
# SPDX-License-Identifier: MIT
# TCP_DEFER_ACCEPT after exec: a client connects over ntb (after one connection that lets the
# library reserve after the kernel connect, and so leave its TCP_DEFER_ACCEPT set on the
# socket), then execs a program that reads the option on the inherited descriptor
# (tests/helpers/pl_opts defer-exec). It must read 0, as over kernel TCP, where the program
# never set it:
#  1. the new image runs under the library (it adopts the connection);
#  2. the new image runs without it (the kernel answers it alone; the connection is reset).
# Each over kernel TCP first, then over ntb, where the socket must have held the library's
# value before the exec (else nothing was tested).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup opts-defer-exec
H=$BUILD/tests/pl_opts
[ -x "$H" ] || pl_skip "$H not built (make $H)"

port=$(pl_port 1)
env $(pl_env plain) timeout 60 "$H" serve 127.0.0.2 $port >"$PL_TMP/tcp-srv.out" 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.2 $port
for v in lib nolib; do
	env $(pl_env plain) timeout 60 "$H" defer-exec 127.0.0.2 $port $v >"$PL_TMP/tcp-$v.out" 2>&1 ||
		pl_fail "kernel TCP, $v: $(cat "$PL_TMP/tcp-$v.out")"
	[ "$(cat "$PL_TMP/tcp-$v.out")" = "$(printf 'armed 0\ndefer 0')" ] ||
		pl_fail "kernel TCP, $v: $(cat "$PL_TMP/tcp-$v.out")"
done
echo "kernel TCP: the new image reads 0"

port=$(pl_port 2)
pl_bg b "$H" serve 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
for v in lib nolib; do
	: >"$PL_TMP/a.log"
	pl_run a "$H" defer-exec 127.0.0.2 $port $v >"$PL_TMP/ntb-$v.out" 2>&1 ||
		pl_fail "ntb, $v: $(cat "$PL_TMP/ntb-$v.out")"
	[ "$(pl_count_log a ': ntb (link ab)')" -eq 2 ] ||
		pl_fail "ntb, $v: $(pl_count_log a ': ntb (link ab)') of 2 connections were ntb"
	grep -qx 'armed 1' "$PL_TMP/ntb-$v.out" ||
		pl_fail "ntb, $v: the socket did not hold the library's TCP_DEFER_ACCEPT before the exec"
	grep -qx 'defer 0' "$PL_TMP/ntb-$v.out" ||
		pl_fail "ntb, $v: the new image read $(grep defer "$PL_TMP/ntb-$v.out"), not 0 as over kernel TCP"
	if [ $v = lib ]; then
		pl_assert_log a ': ntb (link ab, adopted across exec)'
	else
		pl_assert_log a 'reset at exec: the new program does not preload libntbsock'
	fi
	echo "ntb, $v: $(tr '\n' ' ' <"$PL_TMP/ntb-$v.out")"
done
echo "PASS"
