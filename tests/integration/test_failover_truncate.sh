#!/bin/sh
# SPDX-License-Identifier: MIT
# Never lose a byte: the shm link file truncated (FO_CUT=truncate, default), removed and
# recreated (FO_CUT=unlink), or removed and opened anew by a new process of the server's host
# (FO_CUT=newsession: a new session of the link beside the old one, which must carry a new
# connection over NTB at the end) under a bidirectional 256 MiB stream. Both ends must
# go on over the connection's kernel TCP socket from exactly the byte each has delivered: the
# client's 256 MiB arrive exact, the server's stream arrives exact up to the client's end of
# file, both end with a clean EOF (never ECONNRESET, never a short EOF), the failover shows in
# the logs, and the kernel's loopback carried the rest (its byte counter grew).
. "$(dirname "$0")/lib.sh"
pl_need truncate
pl_setup failover-${FO_CUT:-truncate}
port=$(pl_port 11)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"
BYTES=$((256 * 1024 * 1024))

env $(pl_env b) "$F" server 127.0.0.2 $port -n 1 >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
env $(pl_env a) "$F" client 127.0.0.2 $port -b $BYTES -s 7 >"$PL_TMP/cli.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
pl_wait_count a ': ntb (link' 1 10 || pl_fail "the stream is not over ntb"
sleep 0.3
lo0=$(pl_lo_bytes)
case ${FO_CUT:-truncate} in
truncate) truncate -s 0 "$PL_LINK" || pl_fail "cannot truncate $PL_LINK";;
unlink) rm -f "$PL_LINK" || pl_fail "cannot remove $PL_LINK"
	sleep 0.05
	# a new file under the same name: the processes' mappings still hold the old one
	head -c 4096 /dev/zero >"$PL_LINK";;
newsession) rm -f "$PL_LINK" || pl_fail "cannot remove $PL_LINK"
	# a new process of host B opens the link: a new file, a new session, a new host table,
	# while the old processes still use theirs (they must fail over with their own counts)
	port2=$(pl_port 12)
	pl_bg b python3 "$(pl_echo_server)" 127.0.0.2 $port2
	pl_wait_port 127.0.0.2 $port2;;
esac
echo "link cut (${FO_CUT:-truncate}) under a live stream"
i=0
while kill -0 $C 2>/dev/null && [ $i -lt $((600 * PL_SLOW)) ]; do sleep 0.05; i=$((i + 1)); done
kill -0 $C 2>/dev/null && pl_fail "client still running $((30 * PL_SLOW)) s after the cut (hang?)"
wait $C; crc=$?
i=0
while kill -0 $S 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill -0 $S 2>/dev/null && pl_fail "server still running after the client ended"
wait $S; src=$?
cli=$(grep '^END' "$PL_TMP/cli.out"); srv=$(grep '^END' "$PL_TMP/srv.out")
echo "client: $cli"; echo "server: $srv"
[ $crc -eq 0 ] || pl_fail "client status $crc (2: corrupt bytes, >128: signal)"
[ $src -eq 0 ] || pl_fail "server status $src (2: corrupt bytes, >128: signal)"
echo "$cli" | grep -q "reason=eof .*tx=$BYTES bad=0" || pl_fail "client did not end with EOF after sending all"
echo "$srv" | grep -q "reason=eof rx=$BYTES .*bad=0" || pl_fail "server did not get all $BYTES bytes then EOF"
stx=$(echo "$srv" | sed 's/.* tx=\([0-9]*\).*/\1/'); crx=$(echo "$cli" | sed 's/.* rx=\([0-9]*\).*/\1/')
[ "$stx" = "$crx" ] || pl_fail "server sent $stx bytes, client received $crx"
grep -q 'tcp (failed over: ' "$PL_TMP/a.log" || pl_fail "client log does not say the connection failed over"
grep -q 'tcp (failed over: ' "$PL_TMP/b.log" || pl_fail "server log does not say the connection failed over"
grep -h 'failed over' "$PL_TMP/a.log" "$PL_TMP/b.log"
d=$(( $(pl_lo_bytes) - lo0 ))
echo "kernel loopback carried $d bytes after the cut"
[ "$d" -gt 1048576 ] || pl_fail "the kernel carried only $d bytes after the cut: no failover?"
if [ "${FO_CUT:-truncate}" = newsession ]; then
	# the new session serves a new connection over NTB, every byte echoed
	: >"$PL_TMP/a.log"
	pl_run a python3 "$(pl_echo_client)" 127.0.0.2 $port2 1048576 ||
		pl_fail "the new session's connection failed"
	pl_assert_log a ': ntb (link ab'
	echo "the new session carries a new connection over ntb: ok"
fi
echo "link cut (${FO_CUT:-truncate}) mid-stream: every byte exact both ways, over TCP after: ok"
