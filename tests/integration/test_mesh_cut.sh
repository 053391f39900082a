#!/bin/sh
# SPDX-License-Identifier: MIT
# One of the two links between hosts 1 and 2 of conf/examples/mesh cut under live streams:
# first taken down with `ntbsock link down h1h2b` (then up again), then its file truncated.
# Four or more verified bidirectional streams (fail_peer: every byte checked both ways), placed
# on both links; each round every stream ends byte-exact with a clean EOF. The streams of the
# surviving link h1h2a stay ntb (ntbsock stat: mode ntb, their bytes still growing after the
# cut); those of the cut link move to h1h2a without loss (ntbsock stat lists them ntb on h1h2a,
# "moved to link h1h2a" in both logs, no "failed over" line: the kernel socket carried nothing
# but the set-up). A last round takes both links down one after the other: no live link is left,
# so every stream goes on over its kernel TCP socket ("failed over" in both logs), still exact.
# In a network namespace of its own when it can (root), so that the loopback counters count only
# this test's traffic: then a move round asserts that the kernel carried (almost) nothing.
if [ -z "$MESH_NETNS" ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null &&
   unshare -n true 2>/dev/null; then
	MESH_NETNS=1 exec unshare -n sh -c 'ip link set lo up && exec sh "$0" "$@"' "$0" "$@"
fi
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
	name=$1; expect=$2; shift 2
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
	fo0_2=$(pl_count_log host2 'tcp (failed over: ')
	mv0=$(pl_count_log host1 'ntb (moved to link h1h2a)')
	mv0_2=$(pl_count_log host2 'ntb (moved to link h1h2a)')
	lo_r=$(pl_lo_bytes)
	"$@" || pl_fail "$name: the cut failed: $*"
	sleep 0.5
	stat_links "$PL_TMP/$name-after"
	sleep 0.3
	stat_links "$PL_TMP/$name-later"
	echo "$name, after the cut: $(tr '\n' ' ' <"$PL_TMP/$name-later")"
	if [ "$expect" = move ]; then
		# the cut link's streams: listed ntb on h1h2a now (unless already finished)
		for l in $(grep ':h1h2b:ntb:' "$PL_TMP/$name-before"); do
			cp=${l%%:*}
			b=$(grep "^$cp:" "$PL_TMP/$name-later" | head -1)
			[ -z "$b" ] && continue # finished
			case $b in *:h1h2a:ntb:*) ;; *) pl_fail "$name: stream to port $cp of the cut link is not ntb on h1h2a: $b";; esac
		done
	fi
	# the surviving link's streams: still ntb, still moving (unless already finished)
	[ "$expect" = move ] && for l in $(grep ':h1h2a:ntb:' "$PL_TMP/$name-before"); do
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
	lo_d=$(( $(pl_lo_bytes) - lo_r ))
	n_fo=$(( $(pl_count_log host1 'tcp (failed over: ') - fo0 ))
	n_fo2=$(( $(pl_count_log host2 'tcp (failed over: ') - fo0_2 ))
	n_mv=$(( $(pl_count_log host1 'ntb (moved to link h1h2a)') - mv0 ))
	n_mv2=$(( $(pl_count_log host2 'ntb (moved to link h1h2a)') - mv0_2 ))
	if [ "$expect" = move ]; then
		# the cut link's streams, maybe finished before it: at most on_b, at least one;
		# none on the kernel socket
		[ "$n_fo" -eq 0 ] && [ "$n_fo2" -eq 0 ] ||
			pl_fail "$name: $n_fo (host 1) and $n_fo2 (host 2) connection(s) failed over to tcp although h1h2a lived"
		[ "$n_mv" -ge 1 ] && [ "$n_mv" -le "$on_b" ] ||
			pl_fail "$name: $n_mv connection(s) of host 1 moved to h1h2a, the cut link carried $on_b"
		[ "$n_mv2" -ge 1 ] && [ "$n_mv2" -le "$on_b" ] ||
			pl_fail "$name: $n_mv2 connection(s) of host 2 moved to h1h2a, the cut link carried $on_b"
		echo "$name: $n streams exact both ways; $on_a stayed on h1h2a, $n_mv moved there from h1h2b, none to tcp; kernel loopback moved $lo_d bytes meanwhile (each stream: $BYTES both ways)"
		# (the set-up and end of the streams' TCP connections: a few KiB; one stream over
		# tcp would be hundreds of MiB)
		[ -z "$MESH_NETNS" ] || [ "$lo_d" -lt 1048576 ] ||
			pl_fail "$name: kernel loopback carried $lo_d bytes across the move"
	else
		# no live link left: every stream still running goes to its kernel socket
		[ "$n_fo" -ge 1 ] && [ "$n_fo" -le "$n" ] && [ "$n_fo2" -ge 1 ] ||
			pl_fail "$name: $n_fo (host 1) and $n_fo2 (host 2) connection(s) failed over to tcp with no live link left"
		echo "$name: $n streams exact both ways; $n_fo went on over tcp ($n_mv had moved to h1h2a first); kernel loopback moved $lo_d bytes"
		[ -z "$MESH_NETNS" ] || [ "$lo_d" -gt 10485760 ] ||
			pl_fail "$name: kernel loopback carried only $lo_d bytes although the streams went on over tcp"
	fi
}

round admin move "$NTB" link down h1h2b -c "$PL_TMP/host1.conf"
grep -q 'ntb (moved to link h1h2a)' "$PL_TMP/host1.log" ||
	pl_fail "no 'moved to link h1h2a' in host 1's log"
"$NTB" link up h1h2b -c "$PL_TMP/host1.conf" >/dev/null || pl_fail "ntbsock link up failed"
sleep 0.3
round truncate move truncate -s 0 "$PL_LINK-h1h2b"
# both links down, one after the other: no live link to move to, the kernel socket carries them
rm -f "$PL_LINK-h1h2b" "$PL_LINK-h1h2b".*
sleep 0.3
both_down() {
	"$NTB" link down h1h2a -c "$PL_TMP/host1.conf" >/dev/null &&
		"$NTB" link down h1h2b -c "$PL_TMP/host1.conf" >/dev/null
}
round both tcp both_down
echo "a link of two cut (link down, truncated) under live streams: every byte exact, its streams moved to the other link; both cut: over tcp, exact: ok"
