#!/bin/sh
# SPDX-License-Identifier: MIT
# Many short connections in a row (bench/connrate: connect, one byte each way, close) with the
# client closing first, so every client port goes to TIME_WAIT, in a private network namespace
# whose ephemeral port range is narrowed to 2000 ports. A TCP client gets its port at connect(),
# which reuses ports in TIME_WAIT; an ntbsock client must do as well: every one of 3 x 2000
# connections must succeed and be an ntb one (an explicit bind to port 0 finds no free port
# after the first 2000 and falls back to TCP: "cannot bind the host address").
. "$(dirname "$0")/lib.sh"
pl_need ss sysctl pgrep python3
# The demo config's receive contexts: closed connections hand theirs back with some delay,
# which 32 (the tests' usual) does not cover at this rate.
PL_CONTEXTS=default
pl_setup connrate
[ "$PL_NETNS" = 1 ] || pl_skip "needs a private network namespace (narrows its port range)"
CONNRATE=$PL_TMP/connrate
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o "$CONNRATE" "$ROOT/bench/connrate.c" ||
	pl_fail "cannot build bench/connrate.c"

RANGE_LO=40000
RANGE_HI=41999
N=6000
sysctl -qw net.ipv4.ip_local_port_range="$RANGE_LO $RANGE_HI" ||
	pl_skip "cannot narrow the port range in the namespace"
# Ports in TIME_WAIT are reused by connect() for loopback peers (the default, 2); at most 1500
# connections per second keeps every reused port at least a second old, as the kernel requires.
[ "$(sysctl -n net.ipv4.tcp_tw_reuse)" != 0 ] || sysctl -qw net.ipv4.tcp_tw_reuse=2

port=$(pl_port 1)
pl_bg b "$CONNRATE" server 127.0.0.2 $port eof
pl_wait_port 127.0.0.2 $port
out=$PL_TMP/client.out
# At most 1000 a second: a port comes back after 2 s. At 1500 (1.33 s) the margin over the
# kernel's 1 s before it reuses a port in TIME_WAIT (tcp_tw_reuse) was thin enough for a loaded
# machine to run out of ports (connect(): EADDRNOTAVAIL, for the old code as for the new).
pl_run a "$CONNRATE" client 127.0.0.2 $port 100 $N 1000 >"$out" 2>"$PL_TMP/client.err" ||
	pl_fail "connrate client failed: $(cat "$out" "$PL_TMP/client.err")"
set -- $(cat "$out") x x x
ok=$2
failed=$3
ntb=$(pl_count_log a ': ntb (link')
tcp=$(pl_count_log a ': tcp (')
tw=$(ss -Htan state time-wait | wc -l)
echo "$N connections (rate $1/s): $ok completed, $failed failed; $ntb ntb, $tcp tcp;" \
	"$tw in TIME_WAIT"
grep -F ': tcp (' "$PL_TMP/a.log" | sed 's/^.*: tcp/tcp/' | sort | uniq -c | head -5
[ "$ok" = $N ] && [ "$failed" = 0 ] ||
	pl_fail "$failed of $N connections failed: $(tail -n 5 "$PL_TMP/client.err")"
[ "$tcp" -eq 0 ] || pl_fail "$tcp connections fell back to TCP"
[ "$ntb" -eq $N ] || pl_fail "$ntb of $N connections were ntb"
# The server side must have attached every one (no "client did not set up ntb").
bntb=$(pl_count_log b ': ntb (link')
[ "$bntb" -eq $N ] || pl_fail "server: $bntb of $N connections were ntb"
# Nearly every set-up claimed an offer of the server host (no round trip to it: tp_offer.c); the
# first ones of the session, and a few while the server was slow to offer again, applied.
claimed=$(NTBSOCK_LOG=error "$BUILD/ntbsock" stat --json -c "$PL_TMP/a.conf" | python3 -c '
import json, sys
print(sum(l["offers"]["claimed"] for l in json.load(sys.stdin)["links"]))')
echo "offers claimed by the client host: $claimed of $N set-ups"
[ "${claimed:-0}" -ge $((N * 9 / 10)) ] || pl_fail "only ${claimed:-0} of $N set-ups claimed an offer"
kill $PL_LAST 2>/dev/null

# A stalled server (SIGSTOP for 0.4 s, five times) while one client process makes 60
# connections at 20 per second: the kernel completes each handshake, the NTB set-up waits for
# the stopped host and the client gives up on it. Both ends must still agree on one path for
# every connection: each byte must come back (a split — one end ntb, the other tcp — hangs or
# resets the connection).
port=$(pl_port 2)
: >"$PL_TMP/a.log"
: >"$PL_TMP/b.log"
pl_bg b "$CONNRATE" server 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
srv=$(pgrep -P $PL_LAST) # (pl_bg's pid is timeout's)
[ -n "$srv" ] || pl_fail "no server process under $PL_LAST"
PL_TIMEOUT=60 pl_run a "$CONNRATE" client 127.0.0.2 $port 50 60 20 >"$PL_TMP/stall.out" 2>&1 &
cli=$!
for i in 1 2 3 4 5; do
	sleep 0.2
	kill -STOP $srv
	sleep 0.4
	kill -CONT $srv
done
wait $cli || pl_fail "stalled server: client failed or hung: $(cat "$PL_TMP/stall.out")"
set -- $(cat "$PL_TMP/stall.out") x x x
[ "$2" = 60 ] && [ "$3" = 0 ] || pl_fail "stalled server: $(cat "$PL_TMP/stall.out")"
echo "stalled server: 60 connections completed;" \
	"client: $(pl_count_log a ': ntb (link') ntb, $(pl_count_log a ': tcp (') tcp;" \
	"server: $(pl_count_log b ': ntb (link') ntb, $(pl_count_log b ': tcp (') tcp"
grep -hF ': tcp (' "$PL_TMP/a.log" "$PL_TMP/b.log" | sed 's/^.*: tcp/tcp/' | sort | uniq -c
echo "PASS"
