#!/bin/sh
# SPDX-License-Identifier: MIT
# A host table (the per-host receive-context pool and connection table beside the link file,
# /dev/shm/<link>.side0 for host A, .side1 for host B) truncated under a live NTB stream: no
# process dies of SIGBUS (util/mapguard guards the table's mapping as it does the link file's),
# the stream ends cleanly or goes on byte-exact (never corrupt bytes, never a hang), and the
# host stays usable: a new connection afterwards carries a verified 8 MiB stream both ways.
# FAIL_HOST_SIDE: which table is cut (0: the client's host A, 1: the server's host B; default:
# both, one after the other, each under its own stream).
. "$(dirname "$0")/lib.sh"
pl_need ss truncate
pl_setup fail-htrunc
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"

# Bytes each way: the stream must outlast the truncation 1 s after it started, and finish soon
# after; the sanitizers' runtimes move them 5-20 times slower.
bytes=268435456
[ -z "$PL_PRELOAD_FIRST" ] || bytes=33554432

# trial SIDE PORT: stream A→B and back, truncate <link>.sideSIDE, check both programs.
trial() {
	side=$1; port=$2; table=$PL_LINK.side$side
	env $(pl_env b) "$F" server 127.0.0.2 $port -n 2 >"$PL_TMP/srv$side.out" 2>&1 &
	S=$!; PL_PIDS="$PL_PIDS $S"
	pl_wait_port 127.0.0.2 $port
	env $(pl_env a) "$F" client 127.0.0.2 $port -s 3 -p 500 -b $bytes \
		>"$PL_TMP/cli$side.out" 2>&1 &
	C=$!; PL_PIDS="$PL_PIDS $C"
	pl_wait_text "$PL_TMP/cli$side.out" CONNECTED 10
	sleep 0.5 # (the stream under way)
	[ "$(pl_count_log a ': ntb (link')" -ge $((side + 1)) ] ||
		pl_fail "side $side: the stream is not over ntb"
	[ -s "$table" ] || pl_fail "side $side: no host table $table"
	kill -0 $C 2>/dev/null || echo "note: side $side: the stream ended before the truncation"
	truncate -s 0 "$table" || pl_fail "cannot truncate $table"
	echo "side $side: truncated $table under a live stream"
	# The stream either ends (EOF/reset/error) or completes its bytes; within 120 s either way.
	i=0
	while kill -0 $C 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
	kill -0 $C 2>/dev/null && pl_fail "side $side: client still running 120 s after the truncation (hang?)"
	wait $C; crc=$?
	[ $crc -gt 128 ] && pl_fail "side $side: client killed by signal $((crc - 128)) (SIGBUS is 7)"
	kill -0 $S 2>/dev/null || { wait $S; s=$?; [ $s -gt 128 ] &&
		pl_fail "side $side: server killed by signal $((s - 128)) (SIGBUS is 7)"; }
	grep '^END' "$PL_TMP/cli$side.out" | grep -q 'bad=0' ||
		pl_fail "side $side: client: no clean end or corrupt bytes: $(cat "$PL_TMP/cli$side.out")"
	echo "side $side: client: $(grep '^END' "$PL_TMP/cli$side.out")"
	# Both hosts still work: a fresh client (a new process) streams 8 MiB both ways, verified.
	pl_run a "$F" client 127.0.0.2 $port -s 4 -b 8388608 >"$PL_TMP/cli$side-2.out" 2>&1 ||
		pl_fail "side $side: second connection failed: $(cat "$PL_TMP/cli$side-2.out")"
	grep -q '^END reason=eof .*bad=0' "$PL_TMP/cli$side-2.out" ||
		pl_fail "side $side: second stream: $(cat "$PL_TMP/cli$side-2.out")"
	echo "side $side: after: $(grep '^END' "$PL_TMP/cli$side-2.out")"
	# The server (-n 2) ends after its second connection: 0 = every byte it got was exact.
	i=0
	while kill -0 $S 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	kill -0 $S 2>/dev/null && pl_fail "side $side: server still running after its two connections"
	wait $S; s=$?
	[ $s -eq 0 ] ||
		pl_fail "side $side: server ended with status $s: $(cat "$PL_TMP/srv$side.out")"
	return 0
}

case ${FAIL_HOST_SIDE:-both} in
0|1) trial "$FAIL_HOST_SIDE" "$(pl_port 7)";;
*)   trial 0 "$(pl_port 7)"; trial 1 "$(pl_port 8)";;
esac
echo "truncated host table: no SIGBUS, clean ends, hosts keep working: ok"
