#!/bin/sh
# SPDX-License-Identifier: MIT
# NTBSOCK_FAULT=drop=0.05,corrupt=0.05 on both hosts (every window write has a 5 % chance to
# be lost and 5 % to land with a flipped bit): streams in both directions at once, with write
# sizes from 1 byte (inline) to 64 KiB (long), still arrive byte-exact over NTB, and the
# faults really happened (retransmissions and checksum errors in ntbsock stat).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup fail-fault
port=$(pl_port 9)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"
spec=${FAIL_FAULT:-drop=0.05,corrupt=0.05}
mb=${FAIL_FAULT_MB:-16}

env $(pl_env b) NTBSOCK_FAULT="$spec,seed=11" "$F" server 127.0.0.2 $port >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
n=0; runs=0
# run_client W: one client with writes ≤ W; sets end, retx, crc (sampled while it runs).
run_client() {
	w=$1; runs=$((runs + 1))
	env $(pl_env a) NTBSOCK_FAULT="$spec,seed=$n" timeout 300 "$F" client 127.0.0.2 $port -s $n \
		-w $w -b $((mb * 1048576)) >"$PL_TMP/cli.$w.out" 2>&1 &
	C=$!
	# sample the statistics while the stream runs
	retx=0; crc=0
	while kill -0 $C 2>/dev/null; do
		st=$("$BUILD/ntbsock" stat -c "$PL_TMP/a.conf" --json 2>/dev/null)
		r=$(echo "$st" | sed -n 's/.*"retransmits":\([0-9]*\).*/\1/p' | head -n 1)
		c=$(echo "$st" | sed -n 's/.*"crc_errors":\([0-9]*\).*/\1/p' | head -n 1)
		[ -n "$r" ] && [ "$r" -gt "$retx" ] && retx=$r
		[ -n "$c" ] && [ "$c" -gt "$crc" ] && crc=$c
		sleep 0.05
	done
	wait $C || pl_fail "client (writes ≤ $w) failed: $(cat "$PL_TMP/cli.$w.out")"
	end=$(grep '^END' "$PL_TMP/cli.$w.out")
}
for w in 100 4096 65536; do
	n=$((n + 1))
	# The server's listener advertisement is a window write too: the faults may drop it, and
	# a client that finds none goes over TCP (correctly) until the server's helper republishes
	# it (every 500 ms while the link is up). Such a run is checked too, then run again.
	for try in 1 2 3; do
		before=$(pl_count_log a ': ntb (link'); nl=$(pl_count_log a 'tcp (no listener)')
		before=${before:-0}; nl=${nl:-0}
		run_client $w
		echo "$end" | grep -q "reason=eof .*tx=$((mb * 1048576)) bad=0" ||
			pl_fail "not byte-exact: $end"
		[ "$(pl_count_log a ': ntb (link')" -gt "$before" ] && break
		[ "$(pl_count_log a 'tcp (no listener)')" -gt "$nl" ] ||
			pl_fail "writes ≤ $w: not over ntb (and not for a lost listener word)"
		echo "note: writes ≤ $w: the listener word was lost to the faults: over tcp; again"
		sleep 0.6
	done
	echo "writes ≤ $w B, $mb MiB each way under $spec: $end (client side: retransmits ≥ $retx, crc errors ≥ $crc)"
	[ "${end#*rx=}" != "${end}" ] && [ "$(echo "$end" | sed 's/.*rx=\([0-9]*\).*/\1/')" -gt 0 ] ||
		pl_fail "nothing received"
	tot_retx=$(( ${tot_retx:-0} + retx )); tot_crc=$(( ${tot_crc:-0} + crc ))
done
# the server verified what the clients sent, too
sleep 0.5
[ "$(grep -c '^END reason=eof .*bad=0' "$PL_TMP/srv.out")" -eq $runs ] ||
	pl_fail "server side not byte-exact: $(grep '^END' "$PL_TMP/srv.out")"
[ "$(pl_count_log a ': ntb (link')" -ge 3 ] || pl_fail "connections did not use ntb"
[ "$tot_retx" -gt 0 ] || [ "$tot_crc" -gt 0 ] ||
	pl_fail "no retransmission or checksum error seen: were faults injected?"
echo "fault injection $spec: byte-exact both ways: ok"
