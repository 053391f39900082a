#!/bin/sh
# SPDX-License-Identifier: MIT
# NTBSOCK_FAULT=cut_after=4M, then cut_after_ms=1000, on the client host only: its link is cut
# in the middle of a stream each way (64 GiB from the client: it cannot end before the cut;
# 1 s from the transport's first write, which is at the link's open, leaves the set-up done) (nothing it writes reaches the server any more, not
# even its heartbeat). Neither side hangs: both end within a bounded time, everything they
# received was exact, and the client's link was really cut (its log says so). Today a cut
# connection is reset (MaxErr, ECONNRESET); once connections fail over to their TCP socket
# (DESIGN.md §5.8) they end in EOF with every byte, which this test accepts too.
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup fail-cut
port=$(pl_port 9)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"
bytes=$((65536 * 1048576))

env $(pl_env b) "$F" server 127.0.0.2 $port >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
runs=0
for spec in cut_after=4M cut_after_ms=1000; do
	runs=$((runs + 1))
	t0=$(date +%s)
	# debug: the ntb layer says when the decorator cut the link
	env $(pl_env a) NTBSOCK_LOG=debug NTBSOCK_FAULT="$spec" timeout 90 "$F" client 127.0.0.2 \
		$port -s $runs -w 65536 -b $bytes >"$PL_TMP/cli.$runs.out" 2>&1
	rc=$?
	secs=$(( $(date +%s) - t0 ))
	end=$(grep '^END' "$PL_TMP/cli.$runs.out")
	[ $rc -eq 0 ] && [ -n "$end" ] || pl_fail "$spec: client rc $rc: $(cat "$PL_TMP/cli.$runs.out")"
	echo "$spec: client after $secs s: $end"
	echo "$end" | grep -q 'bad=0' || pl_fail "$spec: client received wrong bytes: $end"
	echo "$end" | grep -q "reason=reset\|reason=eof .*tx=$bytes" ||
		pl_fail "$spec: neither reset nor a complete stream: $end"
	[ "$(grep -c 'cut by the fault decorator' "$PL_TMP/a.log")" -eq $runs ] ||
		pl_fail "$spec: the client's link was not cut"
	[ "$(pl_count_log a ': ntb (link')" -eq $runs ] || pl_fail "$spec: not over ntb"
	# the server ends this connection too (its peer's kernel socket closes)
	i=0
	while [ "$(grep -c '^END ' "$PL_TMP/srv.out")" -lt $runs ]; do
		[ $i -lt 300 ] ||
			pl_fail "$spec: the server did not end its connection in 30 s: $(cat "$PL_TMP/srv.out")"
		sleep 0.1; i=$((i + 1))
	done
	srv=$(grep '^END ' "$PL_TMP/srv.out" | sed -n "${runs}p")
	echo "$spec: server: $srv"
	echo "$srv" | grep -q 'bad=0' || pl_fail "$spec: server received wrong bytes: $srv"
done
echo "cut links end both sides, nothing wrong delivered: ok"
