#!/bin/sh
# SPDX-License-Identifier: MIT
# NTBSOCK_FAULT=cut_after=4M (then cut_after_ms=150) on the client host only: its link is cut in
# the middle of a 256 MiB stream each way (nothing it writes reaches the server any more, not
# even its heartbeat). The connection must fail over to its kernel TCP socket and complete:
# the client's 256 MiB reach the server exactly, then EOF both ways; the logs say why it failed
# over. A third run makes the peer's heartbeat loss slow to notice (link_timeout_ms 20 s) and
# MaxErr small, so that the client's retries run out first: reason "retries exhausted".
. "$(dirname "$0")/lib.sh"
pl_setup fail-cut
port=$(pl_port 9)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"
bytes=$((256 * 1048576))
# the slow-heartbeat variant of both configs (third run)
for h in a b; do
	sed 's/path = /link_timeout_ms = 20000; path = /' "$PL_TMP/$h.conf" >"$PL_TMP/$h-slow.conf"
	sed -i 's/contexts = \([0-9]*\);/contexts = \1; max_err = 3;/' "$PL_TMP/$h-slow.conf"
	grep -q 'max_err = 3' "$PL_TMP/$h-slow.conf" ||
		printf 'tunables = { max_err = 3; };\n' >>"$PL_TMP/$h-slow.conf"
done

runs=0
for spec in cut_after=4M cut_after_ms=150 slow:cut_after=4M; do
	runs=$((runs + 1))
	conf_a=$PL_TMP/a.conf; conf_b=$PL_TMP/b.conf
	case $spec in slow:*) spec=${spec#slow:}; conf_a=$PL_TMP/a-slow.conf; conf_b=$PL_TMP/b-slow.conf;; esac
	p=$((port + runs))
	env $(pl_env b) NTBSOCK_CONF="$conf_b" "$F" server 127.0.0.2 $p -n 1 >"$PL_TMP/srv.$runs.out" 2>&1 &
	S=$!; PL_PIDS="$PL_PIDS $S"
	pl_wait_port 127.0.0.2 $p
	t0=$(date +%s)
	# debug: the ntb layer says when the decorator cut the link
	env $(pl_env a) NTBSOCK_CONF="$conf_a" NTBSOCK_LOG=debug NTBSOCK_FAULT="$spec" timeout 90 \
		"$F" client 127.0.0.2 $p -s $runs -w 16384 -b $bytes >"$PL_TMP/cli.$runs.out" 2>&1
	rc=$?
	secs=$(( $(date +%s) - t0 ))
	wait $S; src=$?
	end=$(grep '^END' "$PL_TMP/cli.$runs.out"); srv=$(grep '^END' "$PL_TMP/srv.$runs.out")
	echo "$spec ($(basename "$conf_a")): client after $secs s: $end"
	echo "$spec: server: $srv"
	[ $rc -eq 0 ] && [ $src -eq 0 ] || pl_fail "$spec: client rc $rc, server rc $src"
	echo "$end" | grep -q "reason=eof .*tx=$bytes bad=0" || pl_fail "$spec: client did not finish with EOF: $end"
	echo "$srv" | grep -q "reason=eof rx=$bytes .*bad=0" || pl_fail "$spec: server did not get every byte then EOF: $srv"
	stx=$(echo "$srv" | sed 's/.* tx=\([0-9]*\).*/\1/'); crx=$(echo "$end" | sed 's/.* rx=\([0-9]*\).*/\1/')
	[ "$stx" = "$crx" ] || pl_fail "$spec: server sent $stx, client received $crx"
	[ "$(grep -c 'cut by the fault decorator' "$PL_TMP/a.log")" -eq $runs ] ||
		pl_fail "$spec: the client's link was not cut"
	[ "$(pl_count_log a ': ntb (link')" -eq $runs ] || pl_fail "$spec: not over ntb"
	[ "$(pl_count_log a 'tcp (failed over: ')" -eq $runs ] || pl_fail "$spec: the client did not fail over"
	grep 'failed over' "$PL_TMP/a.log" "$PL_TMP/b.log" | tail -2
done
grep -q 'tcp (failed over: retries exhausted)' "$PL_TMP/a.log" "$PL_TMP/b.log" ||
	pl_fail "the slow-heartbeat run did not fail over for exhausted retries"
echo "cut links: the connection fails over and completes, every byte exact both ways: ok"
