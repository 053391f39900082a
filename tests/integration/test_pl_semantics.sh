#!/bin/sh
# SPDX-License-Identifier: MIT
# Socket semantics over NTB: the pl_sem checker (peek, FIONREAD, timeouts, WAITALL, dup,
# sendmmsg, sendfile, splice, select, epoll, threads, half-close, EOF, EPIPE, refused connect, SO_LINGER reset)
# passes between hosts A and B exactly as
# it does on kernel TCP, and the connection really was ntb; pl_sem's readiness transcript
# (edge-triggered epoll, select/poll/MSG_PEEK/SIOCINQ after partial reads) is the kernel's.
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup semantics
SEM=$BUILD/tests/pl_sem
[ -x "$SEM" ] || pl_skip "$SEM not built"
port=$(pl_port 1)

# The checker against the kernel first: a failure there is the checker's, not ours.
pl_bg plain "$SEM" server 127.0.0.1 $port
pl_wait_port 127.0.0.1 $port
timeout 60 "$SEM" client 127.0.0.1 $port >"$PL_TMP/plain.out" 2>&1 || pl_fail "checker fails on kernel TCP"
wait $PL_LAST || pl_fail "checker server fails on kernel TCP"

pl_bg b "$SEM" server 127.0.0.2 $port
srv=$PL_LAST
pl_wait_port 127.0.0.2 $port
pl_run a "$SEM" client 127.0.0.2 $port >"$PL_TMP/client.out" 2>&1 || {
	cat "$PL_TMP/client.out"; cat "$PL_TMP"/b-bg-*.out; pl_fail "client failed over ntb"; }
wait $srv || { cat "$PL_TMP"/b-bg-*.out; pl_fail "server failed over ntb"; }
pl_assert_log a ": ntb (link"
pl_assert_log b ": ntb (link"

# A refused connect after the NTB reservation (the port is advertised, the kernel refuses):
# blocking → ECONNREFUSED; non-blocking → EINPROGRESS, EPOLLERR, SO_ERROR once.
port2=$(pl_port 2)
pl_bg b "$SEM" deadlisten 127.0.0.2 $port2
dl=$PL_LAST
pl_wait_text "$PL_LAST_OUT" "deadlisten: ready"
pl_run a "$SEM" refused 127.0.0.2 $port2 >"$PL_TMP/refused.out" 2>&1 || {
	cat "$PL_TMP/refused.out"; pl_fail "refused connect misreported"; }
kill $dl

# SO_LINGER {1, 0}: the client's close resets; the server reads ECONNRESET.
port3=$(pl_port 3)
pl_bg b "$SEM" lingerserver 127.0.0.2 $port3
ls=$PL_LAST
pl_wait_port 127.0.0.2 $port3
pl_run a "$SEM" lingerclient 127.0.0.2 $port3 >"$PL_TMP/linger.out" 2>&1 || {
	cat "$PL_TMP/linger.out"; pl_fail "linger client failed"; }
wait $ls || { cat "$PL_LAST_OUT"; pl_fail "abortive close not seen as ECONNRESET over ntb"; }
grep -q "SO_RCVTIMEO inherited from the listener" "$PL_LAST_OUT" ||
	pl_fail "the listener's SO_RCVTIMEO not honoured on the accepted ntb connection"
[ "$(pl_count_log a "127.0.0.2:$port3: ntb (link")" -ge 1 ] || pl_fail "linger client not over ntb"
# sem_pair SERVER CLIENT PORT NAME: pl_sem's SERVER and CLIENT roles on kernel TCP (127.0.0.1),
# then over ntb (server on B, client on A); the client's output in $PL_TMP/NAME-plain.out and
# NAME-ntb.out, the server's in NAME-plain.srv and NAME-ntb.srv.
sem_pair() {
	pl_bg plain "$SEM" "$1" 127.0.0.1 "$3"
	sp=$PL_LAST
	pl_wait_port 127.0.0.1 "$3"
	timeout 60 "$SEM" "$2" 127.0.0.1 "$3" >"$PL_TMP/$4-plain.out" 2>&1 || {
		cat "$PL_TMP/$4-plain.out"; pl_fail "$4: $2 fails on kernel TCP"; }
	wait $sp || { cat "$PL_LAST_OUT"; pl_fail "$4: $1 fails on kernel TCP"; }
	cp "$PL_LAST_OUT" "$PL_TMP/$4-plain.srv"
	pl_bg b "$SEM" "$1" 127.0.0.2 "$3"
	sp=$PL_LAST
	pl_wait_port 127.0.0.2 "$3"
	pl_run a "$SEM" "$2" 127.0.0.2 "$3" >"$PL_TMP/$4-ntb.out" 2>&1 || {
		cat "$PL_TMP/$4-ntb.out"; pl_fail "$4: $2 failed over ntb"; }
	wait $sp || { cat "$PL_LAST_OUT"; pl_fail "$4: $1 failed over ntb"; }
	cp "$PL_LAST_OUT" "$PL_TMP/$4-ntb.srv"
}

# Readiness transcript (pl_sem edgeclient: EPOLLET edges with unread data, EPOLLOUT edges,
# one-shot re-arming, nested sets, threads sharing a set; select, poll, MSG_PEEK and SIOCINQ
# after partial reads): kernel TCP first, then NTB; the same lines.
port4=$(pl_port 4)
sem_pair edgeserver edgeclient $port4 edge
[ "$(pl_count_log a "127.0.0.2:$port4: ntb (link")" -ge 1 ] || pl_fail "edge client not over ntb"
diff -u "$PL_TMP/edge-plain.out" "$PL_TMP/edge-ntb.out" ||
	pl_fail "readiness transcript over ntb differs from kernel TCP's (- kernel, + ntb)"
# The first write after connect (pl_sem firstclient): 4 connections, each writing 32 KiB
# non-blocking right after connect(), before the server accepted any: the kernel takes every
# one whole, and so must ntb (the data ring comes with the set-up: an offer carries one), every
# byte then checked by the server; kernel TCP first.
port5=$(pl_port 5)
sem_pair firstserver firstclient $port5 first
[ "$(pl_count_log a "127.0.0.2:$port5: ntb (link")" -eq 4 ] ||
	pl_fail "first writes client: not all 4 connections over ntb"
cat "$PL_TMP/first-ntb.out"
# Urgent data (pl_sem oobclient, oobserver[-inline]): 200 KiB, one byte with MSG_OOB, 5 more;
# the server's transcript of POLLPRI, exceptfds, SIOCATMARK, recv(MSG_OOB), the reads and
# SIGURG, with SO_OOBINLINE and without: kernel TCP's, then ntb's (the connection set up over
# ntb, moved to its kernel socket by the urgent byte, every byte before it exact).
port6=$(pl_port 6)
for mode in oobserver oobserver-inline; do
	sem_pair $mode oobclient $port6 $mode
	grep '^oob:' "$PL_TMP/$mode-plain.srv" >"$PL_TMP/$mode-plain.tr"
	grep '^oob:' "$PL_TMP/$mode-ntb.srv" >"$PL_TMP/$mode-ntb.tr"
	[ "$(wc -l <"$PL_TMP/$mode-plain.tr")" -eq 7 ] || pl_fail "$mode: no transcript on kernel TCP"
	diff -u "$PL_TMP/$mode-plain.tr" "$PL_TMP/$mode-ntb.tr" ||
		pl_fail "urgent data ($mode) over ntb differs from kernel TCP's (- kernel, + ntb)"
	port6=$((port6 + 1))
done
[ "$(pl_count_log a "tcp (failed over: urgent data)")" -eq 2 ] ||
	pl_fail "the client's connections did not move for their urgent byte"
[ "$(pl_count_log b "tcp (failed over: peer moved to tcp)")" -ge 2 ] ||
	pl_fail "the servers' connections did not follow"
[ "$(pl_count_log a "ntb (link")" -ge 2 ] || pl_fail "urgent data clients not set up over ntb"
cat "$PL_TMP/oobserver-ntb.tr"
echo "semantics over ntb: ok"
