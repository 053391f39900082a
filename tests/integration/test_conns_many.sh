#!/bin/sh
# SPDX-License-Identifier: MIT
# Connections at scale (#21): one client process on host A holds N connections open at once to
# one epoll echo server on host B (tests/helpers/echo10k.c), all on one link, and echoes ROUNDS
# messages on every one of them, the sizes taking turns (default 64 B: the inline protocol, and
# 2000 B: the data ring), every byte checked. While the client holds them all, `ntbsock stat`
# must count N ntb connections and no tcp one on each host; each host's log must say ntb N
# times and tcp never, and the kernel's loopback must have carried no more than the TCP
# handshakes and a twentieth of the payload.
#
# The link is the demo's (a 256 MiB window) with the default tunables (auto: 16384 connection
# slots, as many as a quarter of the window holds up to that): a connection slot of 1.5 KiB per direction each (control words and 8
# inline slots) and a pool of 256 transfer contexts (data rings of 512 KiB) that the
# connections' transfers take in turn (transport/tp_ring.c). The test also checks that an idle
# connection costs at most 2 KiB of window per direction (`ntbsock check`). Environment:
#   CONNS_N             connections (default 10000; 1000 under a sanitizer runtime)
#   CONNS_ROUNDS        echo rounds (default 3)
#   CONNS_SIZES         message sizes taking turns by round, comma-separated (default 64,2000)
#   CONNS_WINDOW        window_size (default the demo's 256M)
#   CONNS_TUNABLES      the tunables group body to add (default none)
# Every process needs N descriptors and some: the hard limit (ulimit -Hn) must allow N + 64.
. "$(dirname "$0")/lib.sh"
pl_need ss python3
N=${CONNS_N:-10000}
# (ASan/TSan runs of the integration tests: each set-up several times slower, each connection
# several times larger)
[ -z "${PL_PRELOAD_FIRST:-}" ] || N=${CONNS_N:-1000}
ROUNDS=${CONNS_ROUNDS:-3}
SIZES=${CONNS_SIZES:-64,2000}
TUNABLES=${CONNS_TUNABLES:-}
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((N + 64)) ] ||
	pl_skip "$N connections need $((N + 64)) descriptors per process; the hard limit (ulimit -Hn) is $hard"
ulimit -n "$hard" 2>/dev/null || true
# each connection's set-up and echoes take a few ms on a loaded machine: 60 s + 30 ms per
# connection (times PL_SLOW under a sanitizer) before the programs are ended
PL_TIMEOUT=${PL_TIMEOUT:-$(( (60 + N * 3 / 100) * PL_SLOW ))}
PL_CONTEXTS=default
pl_setup conns-many
NTB=$BUILD/ntbsock
ECHO=$BUILD/tests/echo10k
[ -x "$NTB" ] && [ -x "$ECHO" ] || pl_skip "ntbsock or $ECHO not built (make check builds it)"

for h in a b; do
	if [ -n "${CONNS_WINDOW:-}" ]; then
		sed -i "s#^\( *window_size = \)\"[^\"]*\";.*#\1\"$CONNS_WINDOW\";#" "$PL_TMP/$h.conf"
		grep -q "window_size = \"$CONNS_WINDOW\";" "$PL_TMP/$h.conf" ||
			pl_fail "window_size not set in $h.conf"
	fi
	[ -z "$TUNABLES" ] || printf 'tunables = { %s };\n' "$TUNABLES" >>"$PL_TMP/$h.conf"
	NTBSOCK_LOG=error "$NTB" check -c "$PL_TMP/$h.conf" >"$PL_TMP/check-$h.out" 2>&1 ||
		pl_fail "ntbsock check -c $h.conf: $(tail -n 3 "$PL_TMP/check-$h.out")"
done
echo "link: $(grep -o 'window_size = "[^"]*"' "$PL_TMP/a.conf"), tunables { $TUNABLES }"
grep -E 'capacity:|transfers:' "$PL_TMP/check-a.out" | sed 's/^ */  /'
# connection slots for all N, each at most 2 KiB of window per direction, idle or busy
slots=$(sed -n 's/.*capacity: \([0-9]*\) connections at once.*/\1/p' "$PL_TMP/check-a.out")
kib=$(sed -n 's/.*connections at once, each \([0-9.]*\) KiB.*/\1/p' "$PL_TMP/check-a.out")
[ -n "$slots" ] && [ "$slots" -ge "$N" ] || pl_fail "the link holds ${slots:-?} connections, not $N"
python3 -c "import sys; sys.exit(0 if float('$kib') <= 2.0 else 1)" ||
	pl_fail "a connection costs $kib KiB of window per direction (more than 2 KiB)"

port=$(pl_port 1)
# host B's own table of tcp connections (host A's is lib.sh's NTBSOCK_STAT_TCP)
STAT_B=$PL_TMP/b.stat-tcp
pl_bg b env NTBSOCK_STAT_TCP="$STAT_B" "$ECHO" server $port 127.0.0.2
srv=$PL_LAST
pl_wait_port 127.0.0.2 $port
lo0=$(pl_lo_bytes)

mkdir "$PL_TMP/hold"
t0=$(date +%s)
pl_bg a "$ECHO" client 127.0.0.2 $port $N $ROUNDS $SIZES "$PL_TMP/hold"
cli=$PL_LAST
cli_out=$PL_LAST_OUT
while [ ! -e "$PL_TMP/hold/ready" ]; do
	kill -0 $cli 2>/dev/null || { wait $cli; pl_fail "the client ended (rc $?) before holding: $(tail -n 12 "$cli_out")"; }
	[ $(( $(date +%s) - t0 )) -lt "$PL_TIMEOUT" ] || pl_fail "the client did not get through its rounds"
	sleep 0.1
done
echo "client, all $N held: $(tr '\n' ';' <"$cli_out")"

# what each host's `ntbsock stat` counts while all are open
for h in a b; do
	t=$NTBSOCK_STAT_TCP; [ $h = b ] && t=$STAT_B
	NTBSOCK_STAT_TCP=$t NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/$h.conf" --summary --json \
		>"$PL_TMP/stat-$h.json" 2>"$PL_TMP/stat-$h.err" ||
		pl_fail "ntbsock stat on $h failed: $(cat "$PL_TMP/stat-$h.err")"
done
touch "$PL_TMP/hold/go"
wait $cli; rc=$?
lo=$(( $(pl_lo_bytes) - lo0 ))
echo "$(tail -n 1 "$cli_out") (rc $rc)"
kill $srv 2>/dev/null; wait $srv

fails=""
fail_add() { echo "  not ok: $*"; fails="$fails; $*"; }
[ $rc -eq 0 ] || fail_add "the client exited with $rc: $(grep -v '^round\|^connected' "$cli_out" | head -n 5 | tr '\n' ' ')"
grep -q "^echo10k client: conns=$N echoes=$((N * ROUNDS)) errors=0 " "$cli_out" ||
	fail_add "not all $((N * ROUNDS)) echoes verified: $(tail -n 1 "$cli_out")"
grep -q ' errors=0 ' "$PL_TMP"/b-bg-*.out || fail_add "the server reports errors: $(tail -n 3 "$PL_TMP"/b-bg-*.out)"
for h in a b; do
	v=$(python3 - "$PL_TMP/stat-$h.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
m = s.get("mode", {})
r = ", ".join("%d %s" % (c, n) for n, c in sorted(s.get("reason", {}).items()))
print(m.get("ntb", 0), m.get("tcp", 0), s.get("total", 0), r or "-")
EOF
) || v="0 0 0 (unreadable: $(head -c 200 "$PL_TMP/stat-$h.json"))"
	set -- $v
	ntb=$1; tcp=$2; total=$3; shift 3
	echo "host $h: ntbsock stat counts $total connections: $ntb ntb, $tcp tcp (reasons: $*)"
	[ "$ntb" -eq $N ] && [ "$tcp" -eq 0 ] ||
		fail_add "host $h: stat counts $ntb ntb and $tcp tcp of $N connections (tcp because: $*)"
	ln=$(pl_count_log $h ': ntb (link')
	lt=$(pl_count_log $h ': tcp (')
	echo "host $h: log says ntb $ln times, tcp $lt times"
	[ "$ln" -eq $N ] && [ "$lt" -eq 0 ] || fail_add "host $h: log has $ln ntb and $lt tcp connections"
done
# the payload each way and back, if it had gone through the kernel (lo counts rx and tx)
payload=$(echo "$SIZES" | awk -F, -v n=$N -v r=$ROUNDS '{ s = 0; for (i = 0; i < r; i++) s += $(i % NF + 1); print s * n * 4 }')
limit=$((N * 1500 + payload / 20))
echo "lo moved $lo bytes (limit $limit: handshakes and 1/20 of $payload)"
[ "$lo" -lt "$limit" ] || fail_add "kernel loopback carried $lo bytes (limit $limit): not over NTB"
[ -z "$fails" ] || pl_fail "${fails#; }"
echo "PASS: $N connections held at once over one link, $((N * ROUNDS)) echoes verified, all ntb on both hosts ($(( $(date +%s) - t0 )) s)"
