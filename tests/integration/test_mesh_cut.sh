#!/bin/sh
# SPDX-License-Identifier: MIT
# One of the two links between hosts 1 and 2 of conf/examples/mesh cut under live streams:
# first taken down with `ntbsock link down h1h2b` (then up again), then its file truncated.
# Four or more verified bidirectional streams (fail_peer: every byte checked both ways), placed
# on both links; each round every stream ends byte-exact with a clean EOF. The streams of the
# surviving link h1h2a stay ntb (ntbsock stat: mode ntb, their bytes still growing after the
# cut); those of the cut link go on over their kernel TCP sockets ("failed over" in both logs;
# moving them to the other link is not built: ntbsock(7) FAILOVER). Round 2 also checks that
# the helper of each process noticed a cut on a link that is not the one it used to sleep on.
. "$(dirname "$0")/lib.sh"
pl_need truncate
pl_setup mesh-cut
NTB=$BUILD/ntbsock
F=$BUILD/tests/fail_peer
[ -x "$NTB" ] && [ -x "$F" ] || pl_skip "ntbsock or fail_peer not built"
PY=/usr/bin/python3
port=$(pl_port 13)
MINSTREAMS=4
MAXSTREAMS=8
# Long enough to be under way at the cut. Under a sanitizer (PL_SLOW) every byte fail_peer makes
# and checks is instrumented (TSan: about 3 MB/s per stream here, so that 768 MiB still ran
# minutes after the cut): a quarter of the bytes, still under way at the cut, and the waits
# scaled.
BYTES=$((768 * 1024 * 1024 * 2 / PL_SLOW))

cut_cleanup() {
	rm -f "$PL_LINK"-h[1-4]h[1-4]* 2>/dev/null
	pl_cleanup
}
trap cut_cleanup EXIT

# Hosts 1 and 2 only (their links to hosts 3 and 4 stay without a peer).
for h in 1 2; do
	sed "s#/dev/shm/ntbsock-mesh-#$PL_LINK-#" "$ROOT/conf/examples/mesh/host$h.conf" \
		>"$PL_TMP/host$h.conf"
	printf 'tunables = { contexts = 32; };\n' >>"$PL_TMP/host$h.conf"
	NTBSOCK_LOG=error "$NTB" check -c "$PL_TMP/host$h.conf" >/dev/null 2>&1 ||
		pl_fail "ntbsock check host$h failed"
done

# run_bg H OUT CMD...: CMD as host H in the background, output in OUT (log hostH.log)
run_bg() {
	_h=$1; _o=$2; shift 2
	env NTBSOCK_CONF="$PL_TMP/host$_h.conf" NTBSOCK_LOG=info NTBSOCK_LOG_FILE="$PL_TMP/host$_h.log" \
		LD_PRELOAD="$(pl_preload)" timeout "${PL_TIMEOUT:-$((240 * PL_SLOW))}" "$@" >"$_o" 2>&1 &
	PL_LAST=$!
	PL_PIDS="$PL_PIDS $PL_LAST"
}

# stat_links FILE: "PORT:LINK:MODE:TXBYTES" of host 1's client connections (ntbsock stat --json)
stat_links() {
	NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/host1.conf" --json >"$1.json" 2>/dev/null ||
		pl_fail "ntbsock stat failed"
	$PY - "$1.json" <<'PYEOF' >"$1"
import json, sys
j = json.load(open(sys.argv[1]))
for c in j["connections"]:
    if c["local"].startswith("127.0.0.1:") and c["remote"].startswith("127.0.0.2:"):
        print("%s:%s:%s:%d" % (c["remote"].split(":")[-1], c["link"] or "-", c["mode"],
                               c["tx"]["bytes"]))
PYEOF
}

# round NAME CUT_COMMAND: streams started one by one until at least MINSTREAMS run over ntb and
# both links carry one (a process placed before it saw the second link up picks the first: at
# most MAXSTREAMS), the cut of h1h2b, the checks
round() {
	name=$1; shift
	servers=""; clients=""; n=0
	while :; do
		n=$((n + 1))
		p=$((port + n))
		run_bg 2 "$PL_TMP/$name-srv$n.out" "$F" server 127.0.0.2 $p -n 1
		servers="$servers $PL_LAST"
		pl_wait_port 127.0.0.2 $p
		run_bg 1 "$PL_TMP/$name-cli$n.out" "$F" client 127.0.0.2 $p -b $BYTES -w 16384 -s $n
		clients="$clients $PL_LAST"
		# (set up and moving: ntbsock stat lists it; a loaded machine may take a while)
		i=0
		while :; do
			sleep 0.1
			stat_links "$PL_TMP/$name-before"
			grep -q "^$p:h1h2[ab]:ntb:" "$PL_TMP/$name-before" && break
			i=$((i + 1))
			[ $i -lt 100 ] || pl_fail "$name: stream $n not listed as ntb after 10 s"
		done
		[ $n -ge $MINSTREAMS ] && grep -q ':h1h2a:ntb:' "$PL_TMP/$name-before" &&
			grep -q ':h1h2b:ntb:' "$PL_TMP/$name-before" && break
		[ $n -lt $MAXSTREAMS ] || break
	done
	echo "$name, before the cut (port:link:mode:tx bytes): $(tr '\n' ' ' <"$PL_TMP/$name-before")"
	on_a=$(grep -c ':h1h2a:ntb:' "$PL_TMP/$name-before")
	on_b=$(grep -c ':h1h2b:ntb:' "$PL_TMP/$name-before")
	[ "$on_a" -ge 1 ] && [ "$on_b" -ge 1 ] && [ $((on_a + on_b)) -le $n ] ||
		pl_fail "$name: the $n streams are not all ntb over both links ($on_a on h1h2a, $on_b on h1h2b)"
	fo0=$(pl_count_log host1 'tcp (failed over: ')
	"$@" || pl_fail "$name: the cut failed: $*"
	sleep 0.5
	stat_links "$PL_TMP/$name-after"
	sleep 0.3
	stat_links "$PL_TMP/$name-later"
	echo "$name, after the cut: $(tr '\n' ' ' <"$PL_TMP/$name-later")"
	# the surviving link's streams: still ntb, still moving (unless already finished)
	for l in $(grep ':h1h2a:ntb:' "$PL_TMP/$name-before"); do
		cp=${l%%:*}
		a=$(grep "^$cp:" "$PL_TMP/$name-after" | head -1)
		b=$(grep "^$cp:" "$PL_TMP/$name-later" | head -1)
		[ -z "$b" ] && continue # finished
		case $b in *:h1h2a:ntb:*) ;; *) pl_fail "$name: stream to port $cp left h1h2a: $b";; esac
		[ -z "$a" ] || [ "${b##*:}" -gt "${a##*:}" ] || [ "${b##*:}" -ge $BYTES ] ||
			pl_fail "$name: stream to port $cp on h1h2a stopped moving after the cut ($a, $b)"
	done
	for c in $clients; do
		i=0
		while kill -0 $c 2>/dev/null && [ $i -lt $((1800 * PL_SLOW)) ]; do sleep 0.05; i=$((i + 1)); done
		kill -0 $c 2>/dev/null &&
			pl_fail "$name: a client still runs $((90 * PL_SLOW)) s after the cut (hang?)"
		wait $c || pl_fail "$name: a client exited with status $? (2: corrupt bytes)"
	done
	for s in $servers; do
		i=0
		while kill -0 $s 2>/dev/null && [ $i -lt $((200 * PL_SLOW)) ]; do sleep 0.05; i=$((i + 1)); done
		wait $s || pl_fail "$name: a server exited with status $? (2: corrupt bytes)"
	done
	for i in $(seq $n); do
		cli=$(grep '^END' "$PL_TMP/$name-cli$i.out"); srv=$(grep '^END' "$PL_TMP/$name-srv$i.out")
		echo "$cli" | grep -q "reason=eof .*tx=$BYTES bad=0" ||
			pl_fail "$name: client $i did not end with EOF after sending all: $cli"
		echo "$srv" | grep -q "reason=eof rx=$BYTES .*bad=0" ||
			pl_fail "$name: server $i did not get all $BYTES bytes then EOF: $srv"
		stx=$(echo "$srv" | sed 's/.* tx=\([0-9]*\).*/\1/'); crx=$(echo "$cli" | sed 's/.* rx=\([0-9]*\).*/\1/')
		[ "$stx" = "$crx" ] || pl_fail "$name: server $i sent $stx bytes, client received $crx"
	done
	n_fo=$(( $(pl_count_log host1 'tcp (failed over: ') - fo0 ))
	# the cut link's streams, maybe iperf-style finished before it: at most on_b, at least one
	[ "$n_fo" -ge 1 ] && [ "$n_fo" -le "$on_b" ] ||
		pl_fail "$name: $n_fo connection(s) of host 1 failed over, the cut link carried $on_b"
	echo "$name: $n streams exact both ways; $on_a stayed on h1h2a, $n_fo moved to tcp"
}

lo0=$(pl_lo_bytes)
round admin "$NTB" link down h1h2b -c "$PL_TMP/host1.conf"
grep -q 'tcp (failed over: link down (admin))' "$PL_TMP/host1.log" "$PL_TMP/host2.log" ||
	pl_fail "no 'failed over: link down (admin)' in the logs"
echo "kernel loopback carried $(( $(pl_lo_bytes) - lo0 )) bytes in round 1"
"$NTB" link up h1h2b -c "$PL_TMP/host1.conf" >/dev/null || pl_fail "ntbsock link up failed"
sleep 0.3
round truncate truncate -s 0 "$PL_LINK-h1h2b"
# (either host may notice first: the other follows with "peer moved to tcp")
grep -Eq 'tcp \(failed over: link (broke|down|region gone|restarted)' "$PL_TMP/host1.log" \
	"$PL_TMP/host2.log" || pl_fail "no log says a connection failed over for the truncated link"
grep -Eq 'tcp \(failed over: ' "$PL_TMP/host2.log" ||
	pl_fail "host 2's log does not say a connection failed over after the truncation"
echo "a link of two cut (link down, truncated) under live streams: every byte exact, the other link's streams stayed ntb: ok"
