#!/bin/sh
# SPDX-License-Identifier: MIT
# The 4-host mesh of conf/examples/mesh (127.0.0.1 .. 127.0.0.4, every pair linked, hosts 1
# and 2 by two links): all 12 ordered pairs stream at once, every connection over ntb (logs
# and the kernel loopback counters), byte-exact (pl_echo checks every byte it gets back).
# Then placement: connections from host 1 to host 2 are spread over both links h1h2a and
# h1h2b (ntbsock stat shows each connection's link, and per-link counters).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup mesh
NTB=$BUILD/ntbsock
ECHO=$BUILD/tests/pl_echo
HOLD=$BUILD/tests/pl_hold
[ -x "$NTB" ] && [ -x "$ECHO" ] && [ -x "$HOLD" ] || pl_skip "ntbsock or test helpers not built"
port=$(pl_port 1)
NCONN=2
BYTES=4194304

mesh_cleanup() {
	rm -f "$PL_LINK"-h[1-4]h[1-4]* 2>/dev/null
	pl_cleanup
}
trap mesh_cleanup EXIT

# Private copies of the four configs: link files beside the test's own.
for h in 1 2 3 4; do
	sed "s#/dev/shm/ntbsock-mesh-#$PL_LINK-#" "$ROOT/conf/examples/mesh/host$h.conf" \
		>"$PL_TMP/host$h.conf"
	printf 'tunables = { contexts = 32; };\n' >>"$PL_TMP/host$h.conf"
	NTBSOCK_LOG=error "$NTB" check -c "$PL_TMP/host$h.conf" >"$PL_TMP/check$h.txt" 2>&1 ||
		pl_fail "ntbsock check host$h: $(cat "$PL_TMP/check$h.txt")"
done
grep -q "peer host2 via links h1h2a, h1h2b" "$PL_TMP/check1.txt" ||
	pl_fail "ntbsock check does not show host 1's two links to host 2"

# mesh_bg H CMD...: run CMD as host H in the background (log $PL_TMP/hostH.log).
mesh_bg() {
	_h=$1; shift
	_n=$(echo $PL_PIDS | wc -w)
	PL_LAST_OUT=$PL_TMP/host$_h-bg-$_n.out
	env NTBSOCK_CONF="$PL_TMP/host$_h.conf" NTBSOCK_LOG=info NTBSOCK_LOG_FILE="$PL_TMP/host$_h.log" \
		LD_PRELOAD="$(pl_preload)" timeout "${PL_TIMEOUT:-120}" "$@" >"$PL_LAST_OUT" 2>&1 &
	PL_LAST=$!
	PL_PIDS="$PL_PIDS $PL_LAST"
}

for h in 1 2 3 4; do
	mesh_bg $h "$ECHO" et 127.0.0.$h $port
done
for h in 1 2 3 4; do
	pl_wait_port 127.0.0.$h $port
done

before=$(pl_lo_bytes)
clients=""
for h in 1 2 3 4; do
	for o in 1 2 3 4; do
		[ $h = $o ] && continue
		mesh_bg $h "$ECHO" client 127.0.0.$o $port $NCONN $BYTES
		clients="$clients $PL_LAST:$h:$o"
	done
done
for c in $clients; do
	pid=${c%%:*}; pair=${c#*:}
	wait "$pid" || pl_fail "client $pair (host ${pair%%:*} to host ${pair#*:}) failed"
done
# every byte went out and came back: 12 pairs x NCONN x BYTES x 2 directions; loopback
# carried only the TCP handshakes and FINs
pl_assert_lo_below "$before" 2000000

for h in 1 2 3 4; do
	n=$(pl_count_log host$h ': ntb (link ')
	t=$(pl_count_log host$h ': tcp (')
	# 3 peers x NCONN as a client, as many accepted
	[ "$n" -eq $((2 * 3 * NCONN)) ] || pl_fail "host$h: $n connections over ntb (want $((6 * NCONN)))"
	[ "$t" -eq 0 ] || pl_fail "host$h: $t connections over tcp"
done
for h in 1 2 3 4; do
	for o in 1 2 3 4; do
		[ $h = $o ] && continue
		a=$h; b=$o; [ $a -lt $b ] || { a=$o; b=$h; }
		want="h${a}h${b}"
		[ "$a$b" = 12 ] && want="h1h2[ab]"
		grep -E -- "-> 127\.0\.0\.$o:$port: ntb \(link $want\)" "$PL_TMP/host$h.log" >/dev/null ||
			pl_fail "host$h to host$o not on link $want"
	done
done
echo "12 ordered pairs streamed at once over ntb, byte-exact: ok"

# Placement: 8 connections from host 1 to host 2, one after the other, held open, once the
# streams' connections are all released (a closed one lingers until its FIN is acknowledged,
# and counts on its link until then).
i=0
while NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/host1.conf" 2>/dev/null |
	grep -q '^link .* conns [1-9]'; do
	[ $i -lt $((100 * PL_SLOW)) ] || pl_fail "host 1's links still count live connections"
	sleep 0.1; i=$((i + 1))
done
mkdir "$PL_TMP/hold"
mesh_bg 1 "$HOLD" 127.0.0.2 $port "$PL_TMP/hold" 8
hold=$PL_LAST
i=0; while [ ! -e "$PL_TMP/hold/connected" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$PL_TMP/hold/connected" ] || pl_fail "pl_hold did not connect"
NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/host1.conf" >"$PL_TMP/stat.txt" 2>&1 ||
	pl_fail "ntbsock stat: $(cat "$PL_TMP/stat.txt")"
NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/host1.conf" --json >"$PL_TMP/stat.json" 2>&1 ||
	pl_fail "ntbsock stat --json: $(cat "$PL_TMP/stat.json")"
cat "$PL_TMP/stat.txt"
ca=$(awk -v r="127.0.0.2:$port" '$4 == r && $5 == "ntb" && $NF == "h1h2a"' "$PL_TMP/stat.txt" | grep -c .)
cb=$(awk -v r="127.0.0.2:$port" '$4 == r && $5 == "ntb" && $NF == "h1h2b"' "$PL_TMP/stat.txt" | grep -c .)
echo "host 1 to host 2: $ca on h1h2a, $cb on h1h2b"
[ "$ca" -eq 4 ] && [ "$cb" -eq 4 ] || pl_fail "8 connections not split 4/4 over the two links ($ca/$cb)"
grep -q "\"remote\":\"127.0.0.2:$port\",\"mode\":\"ntb\"[^}]*\"link\":\"h1h2b\"" "$PL_TMP/stat.json" ||
	pl_fail "--json does not give the link of a connection on h1h2b"
# Per-link counters (this host's, closed connections included): h1h3 carried host 1's NCONN
# streams to host 3 and host 1's echo of host 3's NCONN streams: NCONN x BYTES x 2 each way;
# the two links to host 2 as much together, each its share, with 4 connections live now.
lnk() { sed -n "s/^link $1:.* $2 \([0-9]*\).*/\1/p" "$PL_TMP/stat.txt"; }
want=$((2 * NCONN * BYTES))
[ "$(lnk h1h3 tx_bytes)" = $want ] && [ "$(lnk h1h3 rx_bytes)" = $want ] ||
	pl_fail "link h1h3 counted tx $(lnk h1h3 tx_bytes) rx $(lnk h1h3 rx_bytes), want $want each"
[ "$(lnk h1h3 setups)" = $((2 * NCONN)) ] && [ "$(lnk h1h3 conns)" = 0 ] ||
	pl_fail "link h1h3: setups $(lnk h1h3 setups) conns $(lnk h1h3 conns)"
[ "$(lnk h1h3 transfers)" -gt 0 ] || pl_fail "link h1h3 counted no transfers"
[ $(( $(lnk h1h2a tx_bytes) + $(lnk h1h2b tx_bytes) )) = $want ] ||
	pl_fail "links to host 2 counted $(lnk h1h2a tx_bytes) + $(lnk h1h2b tx_bytes), want $want"
for l in h1h2a h1h2b; do
	[ "$(lnk $l tx_bytes)" -gt 0 ] || pl_fail "link $l carried none of the streams to host 2"
	[ "$(lnk $l conns)" = 4 ] || pl_fail "link $l: $(lnk $l conns) live connections, want 4"
	grep -q "\"name\":\"$l\",\"admin\":\"up\",\"conns\":4,[^}]*\"tx_bytes\":$(lnk $l tx_bytes)," \
		"$PL_TMP/stat.json" || pl_fail "--json lacks per-link counters for $l"
done
touch "$PL_TMP/hold/close" "$PL_TMP/hold/exit"
wait $hold || pl_fail "pl_hold failed"
echo "new connections placed on the less loaded of two links: ok"
