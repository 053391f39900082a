#!/bin/sh
# SPDX-License-Identifier: MIT
# An epoll set passes over its idle NTB connections until their news word changes (#21 item
# 2): what wakes a sleeping epoll_wait for one of 64 idle connections (the peer's data, our own
# shutdown(SHUT_RD) from another thread, the peer's close, the peer process's exit) is
# reported as over kernel TCP: ep_idle's transcript over ntb is the kernel's. The client's full
# looks at every entry come only every 60 s (NTBSOCK_EPOLL_FULL_MS), so each wake-up over ntb
# is the news word's (or the state generation's) doing, not a periodic look. Twice: entries for
# input alone, level-triggered, and entries as nginx registers them (input and output,
# edge-triggered: idle once their EPOLLOUT edge was collected). The set reads an idle entry's
# word only when the summary words above it changed (its statistics line at close).
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
	PL_LOG_LEVEL=debug
	pl_run a env NTBSOCK_EPOLL_FULL_MS=60000 "$EP" client 127.0.0.2 $port $arg \
		>"$PL_TMP/idle-$mode-ntb.out" 2>&1 || {
		cat "$PL_TMP/idle-$mode-ntb.out"; pl_fail "$mode client failed over ntb"; }
	PL_LOG_LEVEL=
	wait $sv
	# O(ready): while its entries were idle, the set read the words of only those under a
	# group of slots whose summary changed, not one word per idle entry per collection
	st=$(grep -F "epoll set: " "$PL_TMP/a.log" | tail -1)
	echo "$mode: $st"
	set -- $(echo "$st" | sed -n 's/.*epoll set: \([0-9]*\) collections held \([0-9]*\) idle entries, read \([0-9]*\) .*/\1 \2 \3/p')
	[ $# -eq 3 ] || pl_fail "$mode: no statistics line from the epoll set"
	[ "$2" -ge 1000 ] || pl_fail "$mode: the set held too few idle entries to tell ($2)"
	[ $(($3 * 10)) -lt "$2" ] ||
		pl_fail "$mode: the set read $3 news words for $2 idle entries (one per entry per look)"
	na=$(pl_count_log a "127.0.0.2:$port: ntb (link")
	[ "$na" -eq 64 ] || pl_fail "$mode: not all 64 connections ntb (client $na)"
	diff -u "$PL_TMP/idle-$mode-plain.out" "$PL_TMP/idle-$mode-ntb.out" ||
		pl_fail "$mode: wake-ups of idle connections over ntb differ from kernel TCP's (- kernel, + ntb)"
	port=$((port + 1))
done
echo "idle connections of an epoll set wake as over kernel TCP (level and edge-triggered): ok"
