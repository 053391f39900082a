#!/bin/sh
# SPDX-License-Identifier: MIT
# Randomized failover soak (make soak; SOAK_FAILOVER_SECONDS, default 120): round after round,
# a fail_peer stream of a random size each way between demo hosts A and B, broken at a random
# moment in a random way: the link file truncated, removed and recreated, `ntbsock link down`
# (up again after the round), the client's or the server's link cut (NTBSOCK_FAULT=cut_after)
# with or without 1 % drops, or no break at all under 1 % drops. Every round must end with every
# byte exact in both directions and EOF on both sides (the connection fails over to its TCP
# socket), within a bound. Each round uses a fresh link file. Prints a tally per mode.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/integration/lib.sh"
SECS=${SOAK_FAILOVER_SECONDS:-120}
pl_setup soak-failover
F=$BUILD/tests/fail_peer
N=$BUILD/ntbsock
[ -x "$F" ] || pl_fail "helpers not built (make soak builds them)"
seed=${SOAK_SEED:-$$}
# rnd N: R = a pseudo-random number in 0..N-1 (no subshell: the seed must advance)
rnd() { seed=$(( (seed * 1103515245 + 12345) % 2147483648 )); R=$(( (seed >> 8) % $1 )); }
modes="truncate unlink admin cut_client cut_server lossy_cut none_lossy"
end=$(( $(date +%s) + SECS ))
round=0
tally=""
base_link=$PL_LINK
while [ "$(date +%s)" -lt $end ]; do
	round=$((round + 1))
	PL_LINK=$base_link-r$round
	for h in a b; do
		sed "s#$base_link[^\"]*\"#$PL_LINK\"#" "$PL_TMP/$h.conf" >"$PL_TMP/$h.r.conf"
	done
	rnd 7; set -- $modes; shift $R; mode=$1
	rnd 240; bytes=$(( (16 + R) * 1048576 ))
	rnd 400; delay_ms=$R
	rnd 16; cut=$(( 1 + R ))
	rnd 65536; maxw=$(( 1 + R ))
	port=$(( $(pl_port 20) + round % 1000 ))
	fa=""; fb=""
	case $mode in
	cut_client) fa="cut_after=${cut}M";;
	cut_server) fb="cut_after=${cut}M";;
	lossy_cut) fa="drop=0.01,corrupt=0.01,seed=$round,cut_after=${cut}M"
		fb="drop=0.01,corrupt=0.01,seed=$((round + 7))";;
	none_lossy) fa="drop=0.01,corrupt=0.01,seed=$round"; fb="drop=0.01,corrupt=0.01,seed=$((round + 3))";;
	esac
	env $(pl_env b) NTBSOCK_CONF="$PL_TMP/b.r.conf" ${fb:+NTBSOCK_FAULT=$fb} \
		"$F" server 127.0.0.2 $port -n 1 >"$PL_TMP/srv.out" 2>&1 &
	S=$!; PL_PIDS="$PL_PIDS $S"
	pl_wait_port 127.0.0.2 $port
	env $(pl_env a) NTBSOCK_CONF="$PL_TMP/a.r.conf" ${fa:+NTBSOCK_FAULT=$fa} \
		"$F" client 127.0.0.2 $port -b $bytes -s $round -w $maxw \
		>"$PL_TMP/cli.out" 2>&1 &
	C=$!; PL_PIDS="$PL_PIDS $C"
	sleep "$(awk "BEGIN { print $delay_ms / 1000 }")"
	case $mode in
	truncate) truncate -s 0 "$PL_LINK";;
	unlink) rm -f "$PL_LINK"; head -c 4096 /dev/zero >"$PL_LINK";;
	admin) "$N" link down ab -c "$PL_TMP/a.r.conf" >/dev/null;;
	esac
	i=0
	while kill -0 $C 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
	kill -0 $C 2>/dev/null && pl_fail "round $round ($mode): client still running after 60 s"
	wait $C; crc=$?
	i=0
	while kill -0 $S 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	kill -0 $S 2>/dev/null && pl_fail "round $round ($mode): server still running"
	wait $S; src=$?
	cli=$(grep '^END' "$PL_TMP/cli.out"); srv=$(grep '^END' "$PL_TMP/srv.out")
	stx=$(echo "$srv" | sed 's/.* tx=\([0-9]*\).*/\1/'); crx=$(echo "$cli" | sed 's/.* rx=\([0-9]*\).*/\1/')
	[ $crc -eq 0 ] && [ $src -eq 0 ] &&
		echo "$cli" | grep -q "reason=eof .*tx=$bytes bad=0" &&
		echo "$srv" | grep -q "reason=eof rx=$bytes .*bad=0" && [ "$stx" = "$crx" ] ||
		pl_fail "round $round ($mode, $bytes bytes, break after ${delay_ms} ms): client: $cli; server: $srv"
	"$N" link up ab -c "$PL_TMP/a.r.conf" >/dev/null
	rm -f "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1 "$PL_LINK".admin-down
	moved=$(grep -c 'failed over' "$PL_TMP/a.log" 2>/dev/null)
	tally="$tally $mode"
	echo "round $round: $mode, $bytes bytes each way, break after ${delay_ms} ms: exact ($moved failovers so far)"
done
PL_LINK=$base_link
echo "failover soak: $round rounds in $SECS s, all exact:"
for m in $modes; do
	printf '  %-12s %d\n' "$m" "$(echo "$tally" | tr ' ' '\n' | grep -cx "$m")"
done
