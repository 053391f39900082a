#!/bin/sh
# SPDX-License-Identifier: MIT
# Short connections of an event-loop program: a Node.js client (bench/node_conns.js) makes NC_N
# connections one after the other to a Node.js echo server (tests/integration/node), each writing
# NC_BYTES and half-closing, over kernel TCP loopback and between the two demo hosts under the
# library, client and server pinned to different CPUs, alternating, NC_REPS times. Prints a
# Markdown table of the medians (connect, first echo, whole connection, in microseconds) and the
# whole connection's ratio to kernel TCP's in the same repetition; progress on stderr. Every
# ntbsock connection must be ntb in the client's log (check).
#
#   sh bench/node_conns.sh                   # BUILD=build, NC_REPS=3, NC_N=400, NC_BYTES=10000
. "$(dirname "$0")/lib.sh"
REPS=${NC_REPS:-3}
N=${NC_N:-400}
BYTES=${NC_BYTES:-10000}
command -v node >/dev/null 2>&1 || bn_die "node not installed (make deps)"
bn_init nodeconns
SRV=$ROOT/tests/integration/node/echo_http_srv.js

# run MODE: one client run; prints "CONNECT FIRST TOTAL CHECK"
run() {
	bn_next_port
	bn_srv $1 $BN_CPU_SERVER 127.0.0.2 $BN_PORT node "$SRV" 127.0.0.2 $BN_PORT
	srv=$BN_LAST
	BN_SEQ=$((BN_SEQ + 1))
	out=$PL_TMP/cli-$BN_SEQ.out
	rm -f "$out" "$out.log" # (BN_SEQ counts in this subshell only: the name comes again)
	bn_client $1 "$out" $BN_PORT node "$ROOT/bench/node_conns.js" 127.0.0.2 $BN_PORT $N $BYTES
	bn_stop $srv
	BN_PORT=$((BN_PORT + 2)) # (the server's HTTP and destroy ports)
	r=$(sed -n 's/^RESULT //p' "$out")
	[ -n "$r" ] || { bn_say "  $1: $(tail -1 "$out")"; echo "- - - failed"; return; }
	c=$(bn_check $1 "$out.log" $((N * BYTES * 2)))
	if [ "$1" = ntb ] && [ "$(grep -c ': ntb (link' "$out.log")" -ne "$N" ]; then
		c=tcp-fallback
	fi
	echo "$r $c"
}

bn_alternate "$REPS" run 3 "connect µs | first echo µs | connection µs"
bn_say "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $N connections of $BYTES B each way per run"
