#!/bin/sh
# SPDX-License-Identifier: MIT
# Socket semantics over NTB: the pl_sem checker (peek, FIONREAD, timeouts, WAITALL, dup,
# sendmmsg, sendfile, splice, select, half-close, EOF) passes between hosts A and B exactly as
# it does on kernel TCP, and the connection really was ntb.
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
echo "semantics over ntb: ok"
