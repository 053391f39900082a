#!/bin/sh
# SPDX-License-Identifier: MIT
# kill -9 of either side mid-stream over ntb: the survivor sees EOF or ECONNRESET and exits,
# never hangs (bounded by 15 s here; it takes well under a second normally). Mid-stream,
# `ntbsock stat` on both hosts shows the connection with the owning pid.
. "$(dirname "$0")/lib.sh"
pl_need socat ss
pl_setup kill

gone_within() { # PID SECONDS
	i=0
	while kill -0 "$1" 2>/dev/null; do
		[ $i -ge $(($2 * 10)) ] && return 1
		sleep 0.1; i=$((i + 1))
	done
	return 0
}

for victim in sender receiver; do
	port=$(pl_port 1)
	[ $victim = receiver ] && port=$(pl_port 2)
	# Without `timeout` in between, so that $! is socat itself.
	env $(pl_env b) socat -u TCP-LISTEN:$port,bind=127.0.0.2,reuseaddr OPEN:/dev/null \
		>"$PL_TMP/srv-$victim.out" 2>&1 &
	srv=$!; PL_PIDS="$PL_PIDS $srv"
	pl_wait_port 127.0.0.2 $port
	n0=$(pl_count_log a ': ntb (link')
	env $(pl_env a) socat -u OPEN:/dev/zero TCP:127.0.0.2:$port >"$PL_TMP/cli-$victim.out" 2>&1 &
	cli=$!; PL_PIDS="$PL_PIDS $cli"
	pl_wait_count a ': ntb (link' $((n0 + 1)) 10 || pl_fail "the client's connection is not ntb"
	sleep 0.5
	kill -0 $cli 2>/dev/null || pl_fail "client ended early: $(cat "$PL_TMP/cli-$victim.out")"
	# Mid-stream, `ntbsock stat` on each host lists the connection with its owner.
	if [ -x "$BUILD/ntbsock" ]; then
		"$BUILD/ntbsock" stat -c "$PL_TMP/a.conf" >"$PL_TMP/stat-a" 2>&1 || pl_fail "ntbsock stat failed"
		"$BUILD/ntbsock" stat -c "$PL_TMP/b.conf" >"$PL_TMP/stat-b" 2>&1 || pl_fail "ntbsock stat failed"
		grep -E "^$cli +[0-9]+ +127.0.0.1:[0-9]+ +127.0.0.2:$port +ntb +open" "$PL_TMP/stat-a" >/dev/null ||
			{ cat "$PL_TMP/stat-a"; pl_fail "stat on A lacks the client connection"; }
		grep -E "^$srv +[0-9]+ +127.0.0.2:$port +127.0.0.1:[0-9]+ +ntb +open" "$PL_TMP/stat-b" >/dev/null ||
			{ cat "$PL_TMP/stat-b"; pl_fail "stat on B lacks the server connection"; }
	fi
	if [ $victim = sender ]; then
		kill -9 $cli
		gone_within $srv 15 || pl_fail "receiver hangs after its sender was killed"
	else
		kill -9 $srv
		gone_within $cli 15 || pl_fail "sender hangs after its receiver was killed"
	fi
	echo "kill -9 $victim: survivor exited"
done
# The survivor moved the connection to another descriptor and closed the accepted one (a
# daemon that dup2()s its socket): the peer's death must still be seen through its TCP socket
# (the witness follows the socket to the new descriptor), not only after peer_timeout_ms (30 s).
# Once with close() of the accepted descriptor, once with dup2() of another socket onto it,
# once with close_range() over it (the witness must move before the range closes).
for how in close dup2 range; do
	port=$(pl_port 3)
	[ $how = dup2 ] && port=$(pl_port 4)
	[ $how = range ] && port=$(pl_port 5)
	out=$PL_TMP/srv-dup-$how.out
	env $(pl_env b) "$BUILD/tests/pl_echo" dupdrain 127.0.0.2 $port $how >"$out" 2>&1 &
	srv=$!; PL_PIDS="$PL_PIDS $srv"
	pl_wait_port 127.0.0.2 $port
	env $(pl_env a) socat -u OPEN:/dev/zero TCP:127.0.0.2:$port >"$PL_TMP/cli-dup.out" 2>&1 &
	cli=$!; PL_PIDS="$PL_PIDS $cli"
	pl_wait_text "$out" "reading on fd" 10
	sleep 0.2 # (its reader in the read)
	kill -9 $cli
	gone_within $srv 15 ||
		pl_fail "reader on a dup'ed descriptor ($how) hangs after its sender was killed"
	grep -E "end of stream|reset" "$out" >/dev/null || pl_fail "dupdrain ($how): $(cat "$out")"
	echo "kill -9 sender of a dup'ed connection ($how): survivor exited ($(tail -1 "$out"))"
done
[ "$(pl_count_log a ': ntb (link')" -eq 5 ] || pl_fail "connections were not ntb"
echo "kill -9: ok"
