#!/bin/sh
# SPDX-License-Identifier: MIT
# An epoll set passes over its idle NTB connections until their news word changes (#21 item
# 2): what wakes a sleeping epoll_wait for one of 64 idle connections (the peer's data, our own
# shutdown(SHUT_RD) from another thread, the peer's close, the peer process's exit) is
# reported as over kernel TCP: ep_idle's transcript over ntb is the kernel's. The client's full
# looks at every entry come only every 60 s (NTBSOCK_EPOLL_FULL_MS), so each wake-up over ntb
# is the news word's (or the state generation's) doing, not a periodic look. Twice: entries for
# input alone, level-triggered, and entries as nginx registers them (input and output,
# edge-triggered: idle once their EPOLLOUT edge was collected).
. "$(dirname "$0")/lib.sh"
pl_setup epoll-idle
EP=$BUILD/tests/ep_idle
[ -x "$EP" ] || pl_skip "$EP not built"
port=$(pl_port 1)

# MODE "" (level-triggered EPOLLIN) and "et" (EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET, as nginx)
for mode in lt et; do
	arg=; [ $mode = et ] && arg=et
	pl_bg plain "$EP" server 127.0.0.1 $port
	sv=$PL_LAST
	pl_wait_port 127.0.0.1 $port
	timeout 120 "$EP" client 127.0.0.1 $port $arg >"$PL_TMP/idle-$mode-plain.out" 2>&1 || {
		cat "$PL_TMP/idle-$mode-plain.out"; pl_fail "$mode transcript fails on kernel TCP"; }
	wait $sv
	cat "$PL_TMP/idle-$mode-plain.out"

	pl_bg b "$EP" server 127.0.0.2 $port
	sv=$PL_LAST
	pl_wait_port 127.0.0.2 $port
	: >"$PL_TMP/a.log"
	pl_run a env NTBSOCK_EPOLL_FULL_MS=60000 "$EP" client 127.0.0.2 $port $arg \
		>"$PL_TMP/idle-$mode-ntb.out" 2>&1 || {
		cat "$PL_TMP/idle-$mode-ntb.out"; pl_fail "$mode client failed over ntb"; }
	wait $sv
	na=$(pl_count_log a "127.0.0.2:$port: ntb (link")
	[ "$na" -eq 64 ] || pl_fail "$mode: not all 64 connections ntb (client $na)"
	diff -u "$PL_TMP/idle-$mode-plain.out" "$PL_TMP/idle-$mode-ntb.out" ||
		pl_fail "$mode: wake-ups of idle connections over ntb differ from kernel TCP's (- kernel, + ntb)"
	port=$((port + 1))
done
echo "idle connections of an epoll set wake as over kernel TCP (level and edge-triggered): ok"
