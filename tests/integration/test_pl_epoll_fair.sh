#!/bin/sh
# SPDX-License-Identifier: MIT
# epoll_wait with more NTB fds ready than maxevents reports each of them in turn, as the
# kernel's ready list does, and a non-blocking connect's completion joins that turn (a connect
# is decided when its entry is looked at): pl_sem's fair transcript over NTB is kernel TCP's.
. "$(dirname "$0")/lib.sh"
pl_setup epoll-fair
SEM=$BUILD/tests/pl_sem
[ -x "$SEM" ] || pl_skip "$SEM not built"
port=$(pl_port 1)

pl_bg plain "$SEM" fairserver 127.0.0.1 $port
fs=$PL_LAST
pl_wait_port 127.0.0.1 $port
timeout 60 "$SEM" fairclient 127.0.0.1 $port >"$PL_TMP/fair-plain.out" 2>&1 || {
	cat "$PL_TMP/fair-plain.out"; pl_fail "fair transcript fails on kernel TCP"; }
wait $fs || { cat "$PL_LAST_OUT"; pl_fail "fair server fails on kernel TCP"; }
cat "$PL_TMP/fair-plain.out"

pl_bg b "$SEM" fairserver 127.0.0.2 $port
fs=$PL_LAST
pl_wait_port 127.0.0.2 $port
pl_run a "$SEM" fairclient 127.0.0.2 $port >"$PL_TMP/fair-ntb.out" 2>&1
wait $fs || { cat "$PL_LAST_OUT"; pl_fail "fair server failed over ntb"; }
# the control connection, six blocking connects and the non-blocking one: all ntb on both ends
na=$(pl_count_log a "127.0.0.2:$port: ntb (link")
nb=$(grep -c "127.0.0.2:$port -> 127.0.0.1:[0-9]*: ntb (link" "$PL_TMP/b.log")
[ "$na" -eq 8 ] && [ "$nb" -eq 8 ] || pl_fail "not all 8 connections ntb (client $na, server $nb)"
diff -u "$PL_TMP/fair-plain.out" "$PL_TMP/fair-ntb.out" ||
	pl_fail "epoll_wait's turns over ntb differ from kernel TCP's (- kernel, + ntb)"
echo "epoll_wait reports every ready fd in turn over ntb, as the kernel: ok"
