#!/bin/sh
# SPDX-License-Identifier: MIT
# Both ends of every connection take the same path (ntb on both or tcp on both), also when a
# process is late at the moment that decides it. Each connection carries a known payload
# (tests/helpers/pl_setup_race: send, echo, compare) and the two ends' log lines are paired by
# the client's port.
#  1. The client is late releasing the handshake's held ACK after its reservation was answered
#     (strace delays each of its setsockopt() calls by 250 ms, as a descheduled client would
#     be): the kernel's delayed-ACK timer completes the handshake first, and the server accepts
#     while the client has not yet said which path it takes. (A server that decided from the
#     handshake's round-trip time took tcp while the client took ntb: the payload was lost.)
#  2. The server is stopped (SIGSTOP) at moments between the kernel handshake and its accept.
#  3. Case 1 on a loopback link (conf/examples/loopback.conf), client and server in one process.
. "$(dirname "$0")/lib.sh"
pl_need strace pgrep
pl_setup setup_race
R=$BUILD/tests/pl_setup_race
[ -x "$R" ] || pl_skip "$R not built (make $R)"
strace -qq -o /dev/null -e trace=setsockopt -e inject=setsockopt:delay_enter=1000 true ||
	pl_skip "strace cannot inject delays here"

# agree LOG_CLIENT LOG_SERVER PORT: fails unless every connection to PORT has the same mode in
# both logs (a client line without its own port, e.g. "link down", is a tcp one); prints
# "NTB TCP" as the server counts them into $PL_TMP/counts.
agree() {
	sed -n "s/.*: fd [0-9]* [0-9.]*:\([0-9]*\) -> [0-9.]*:$3: \(ntb\|tcp\) .*/\1 \2/p" "$1" |
		sort >"$PL_TMP/cli.modes"
	sed -n "s/.*: fd [0-9]* [0-9.]*:$3 -> [0-9.]*:\([0-9]*\): \(ntb\|tcp\) .*/\1 \2/p" "$2" |
		sort >"$PL_TMP/srv.modes"
	awk 'NR == FNR { cli[$1] = $2; next }
	     { c = ($1 in cli) ? cli[$1] : "tcp"; if (c != $2) print "port " $1 ": client " c ", server " $2 }
	     END { }' "$PL_TMP/cli.modes" "$PL_TMP/srv.modes" >"$PL_TMP/split"
	awk 'NR == FNR { srv[$1] = $2; next } $2 == "ntb" && !($1 in srv) { print "port " $1 ": client ntb, server none" }' \
		"$PL_TMP/srv.modes" "$PL_TMP/cli.modes" >>"$PL_TMP/split"
	[ -s "$PL_TMP/split" ] && {
		head -n 10 "$PL_TMP/split"
		pl_fail "port $3: $(wc -l <"$PL_TMP/split") connections whose ends disagree"
	}
	echo "$(grep -c ' ntb$' "$PL_TMP/srv.modes") $(grep -c ' tcp$' "$PL_TMP/srv.modes")" \
		>"$PL_TMP/counts"
}

# 1. late client, two hosts
N=12
port=$(pl_port 1)
pl_bg b "$R" server 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
timeout 120 strace -qq -o /dev/null -e trace=setsockopt -e inject=setsockopt:delay_enter=250000 \
	env $(pl_env a) "$R" client 127.0.0.2 $port $N >"$PL_TMP/late.out" 2>"$PL_TMP/late.err"
rc=$?
agree "$PL_TMP/a.log" "$PL_TMP/b.log" $port
set -- $(cat "$PL_TMP/counts")
echo "late client: $(cat "$PL_TMP/late.out"); $1 ntb, $2 tcp on both ends"
[ $rc = 0 ] && [ "$(cat "$PL_TMP/late.out")" = "$N 0" ] ||
	pl_fail "late client: payloads lost or changed: $(head -n 5 "$PL_TMP/late.err")"
[ $(($1 + $2)) = $N ] || pl_fail "late client: $(($1 + $2)) of $N connections logged"
# the late release does not cost the NTB path: the reservation was answered in time
[ "$1" -ge $((N - 2)) ] || pl_fail "late client: only $1 of $N connections over ntb"
grep -qF 'slower than the TCP handshake' "$PL_TMP/b.log" &&
	pl_fail "late client: the server judged by the handshake's duration"

# 2. a server stopped at moments between the handshake and its accept
N=40
port=$(pl_port 2)
pl_bg b "$R" server 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
srv=$(pgrep -P $PL_LAST) # (pl_bg's pid is timeout's)
[ -n "$srv" ] || pl_fail "no server process under $PL_LAST"
pl_run a "$R" client 127.0.0.2 $port $N >"$PL_TMP/stop.out" 2>"$PL_TMP/stop.err" &
cli=$!
for d in 0.05 0.13 0.21 0.08 0.17; do
	sleep $d
	kill -STOP $srv
	sleep 0.3
	kill -CONT $srv
done
wait $cli
rc=$?
agree "$PL_TMP/a.log" "$PL_TMP/b.log" $port
set -- $(cat "$PL_TMP/counts")
echo "stopped server: $(cat "$PL_TMP/stop.out"); $1 ntb, $2 tcp on both ends"
[ $rc = 0 ] && [ "$(cat "$PL_TMP/stop.out")" = "$N 0" ] ||
	pl_fail "stopped server: payloads lost or changed: $(head -n 5 "$PL_TMP/stop.err")"
[ $(($1 + $2)) = $N ] || pl_fail "stopped server: $(($1 + $2)) of $N connections logged"
[ "$1" -gt 0 ] || pl_fail "stopped server: no connection over ntb"

# 3. late client on a loopback link, both ends in one process (the server is another thread:
# strace without -f delays the client's thread only)
LC=$PL_TMP/lo.conf
sed "s#/dev/shm/ntbsock-loopback#$PL_LINK.lo#" "$ROOT/conf/examples/loopback.conf" >"$LC"
grep -q "$PL_LINK.lo" "$LC" || pl_fail "cannot point the loopback config at the test's link file"
N=12
port=$(pl_port 3)
timeout 120 strace -qq -o /dev/null -e trace=setsockopt -e inject=setsockopt:delay_enter=250000 \
	env NTBSOCK_CONF="$LC" NTBSOCK_LOG=info NTBSOCK_LOG_FILE="$PL_TMP/lo.log" \
	LD_PRELOAD="$(pl_preload)" "$R" both 127.0.0.1 $port $N >"$PL_TMP/lo.out" 2>"$PL_TMP/lo.err"
rc=$?
rm -f "$PL_LINK.lo" "$PL_LINK.lo".side0 "$PL_LINK.lo".side1
agree "$PL_TMP/lo.log" "$PL_TMP/lo.log" $port
set -- $(cat "$PL_TMP/counts")
echo "late client, loopback link: $(cat "$PL_TMP/lo.out"); $1 ntb, $2 tcp on both ends"
[ $rc = 0 ] && [ "$(cat "$PL_TMP/lo.out")" = "$N 0" ] ||
	pl_fail "loopback: payloads lost or changed: $(head -n 5 "$PL_TMP/lo.err")"
[ $(($1 + $2)) = $N ] || pl_fail "loopback: $(($1 + $2)) of $N connections logged"
[ "$1" -ge $((N - 2)) ] || pl_fail "loopback: only $1 of $N connections over ntb"
echo "PASS"
