#!/bin/sh
# SPDX-License-Identifier: MIT
# `ntbsock stat` lists every connection of a host with thousands of them, and --summary counts
# them right. Host A holds 2 x N connections to two servers under the library on host B: N to
# a port its rules send to tcp ("rule 1 says tcp"), N to a port routed to ntb, of which the
# first ones get NTB and the rest, once the link's 32 connection slots are spent (tunable
# connections), stay TCP ("no receive context", or another reason); B's ends of the tcp ones say "client did not set up
# ntb". On each host (each with its own table of tcp connections, as separate machines have)
# stat lists 2 x N rows, each (pid, fd) once, the tcp ones with their reasons; --summary counts
# what the table lists, --summary --json what --json lists.
. "$(dirname "$0")/lib.sh"
pl_need ss pgrep python3
N=${PL_STAT_MANY:-1000}
# every end needs a descriptor: N + N on A and on B, plus some
[ "$(ulimit -n)" -ge $((2 * N + 64)) ] || ulimit -n $((2 * N + 64)) 2>/dev/null ||
	pl_skip "needs $((2 * N + 64)) descriptors (ulimit -n)"
pl_setup stat-many
# 32 connection slots per link (lib.sh gave 32 transfer contexts): the rest go tcp
sed -i 's/^tunables = { contexts = \([0-9]*\); };/tunables = { contexts = \1; connections = 32; };/' \
	"$PL_TMP/a.conf" "$PL_TMP/b.conf"
grep -q 'connections = 32;' "$PL_TMP/a.conf" || pl_fail "connections not set in a.conf"
NTB=$BUILD/ntbsock
HOLD=$BUILD/tests/pl_hold
ECHO=$BUILD/tests/pl_echo
[ -x "$NTB" ] && [ -x "$HOLD" ] && [ -x "$ECHO" ] || pl_skip "ntbsock or test helpers not built"
p_rule=$(pl_port 1)
p_ntb=$(pl_port 2)
# A's first rule: connections to p_rule stay TCP.
sed -i "s#^rules = (#rules = (\n  { match = \"127.0.0.2/32\"; ports = \"$p_rule\"; action = \"tcp\"; },#" \
	"$PL_TMP/a.conf"
grep -q "ports = \"$p_rule\"; action = \"tcp\"" "$PL_TMP/a.conf" || pl_fail "rule not added to a.conf"

# host B's own table of tcp connections (host A's is lib.sh's NTBSOCK_STAT_TCP)
STAT_B=$PL_TMP/b.stat-tcp
pl_bg b env NTBSOCK_STAT_TCP="$STAT_B" "$ECHO" et 127.0.0.2 $p_rule
srv_rule=$PL_LAST
pl_bg b env NTBSOCK_STAT_TCP="$STAT_B" "$ECHO" et 127.0.0.2 $p_ntb
srv_ntb=$PL_LAST
pl_wait_port 127.0.0.2 $p_rule
pl_wait_port 127.0.0.2 $p_ntb

mkdir "$PL_TMP/h1" "$PL_TMP/h2"
pl_bg a "$HOLD" 127.0.0.2 $p_rule "$PL_TMP/h1" $N
h1=$PL_LAST
pl_bg a "$HOLD" 127.0.0.2 $p_ntb "$PL_TMP/h2" $N
h2=$PL_LAST
i=0
while [ ! -e "$PL_TMP/h1/connected" ] || [ ! -e "$PL_TMP/h2/connected" ]; do
	[ $i -lt 1200 ] || pl_fail "the clients did not connect within 120 s"
	sleep 0.1; i=$((i + 1))
done
# the servers accept in their event loops: wait until both have every connection
i=0
while [ "$(ss -Htn state established "( sport = :$p_rule or sport = :$p_ntb )" | wc -l)" -lt $((2 * N)) ]; do
	[ $i -lt 300 ] || pl_fail "the servers do not hold $((2 * N)) connections"
	sleep 0.1; i=$((i + 1))
done
# each accepted end is listed once its server decided its set-up (in its event loop): wait for
# every row on both hosts
for h in a b; do
	t=$NTBSOCK_STAT_TCP; [ $h = b ] && t=$STAT_B
	i=0
	while [ "$(NTBSOCK_STAT_TCP=$t NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/$h.conf" 2>/dev/null |
		awk '$1 ~ /^[0-9]+$/' | wc -l)" -lt $((2 * N)) ]; do
		[ $i -lt $((100 * PL_SLOW)) ] || break # (the checks below say what is missing)
		sleep 0.1; i=$((i + 1))
	done
done

# stat_host HOST STAT_TCP OPTIONS...: stat with each OPTIONS into a file: "" the table
# (HOST.txt), --json (HOST.json), --summary (HOST-sum.txt), "--summary --json" (HOST-sum.json)
stat_host() {
	h=$1; t=$2; shift 2
	for o in "$@"; do
		f=$PL_TMP/$h$(echo "$o" | sed 's/--summary/-sum/; s/ //; s/--json/.json/')
		case $f in *.json) ;; *) f=$f.txt;; esac
		NTBSOCK_STAT_TCP=$t NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/$h.conf" $o >"$f" 2>&1 ||
			pl_fail "ntbsock stat $o on $h failed: $(cat "$f")"
		# the table: its header first (the checks below skip line 1), without the lines
		# before it (one per link with its admin state)
		case $o in "") sed -i '1,/^PID /{/^PID /!d}' "$f";; esac
	done
}
stat_host a "$NTBSOCK_STAT_TCP" "" --json
stat_host b "$STAT_B" "" --json

# the program's pid (pl_bg records that of `timeout`, its parent)
child() { pgrep -P "$1" | head -n 1; }
c1=$(child $h1); c2=$(child $h2); s1=$(child $srv_rule); s2=$(child $srv_ntb)
[ -n "$c1" ] && [ -n "$c2" ] && [ -n "$s1" ] && [ -n "$s2" ] || pl_fail "a program is gone"
# (table rows start with a pid: the link lines before the table do not)
# rows of host H (its table) of a process (column 1) in a mode (column 5)
rows_of() { awk -v p="$2" -v m="$3" '$1 ~ /^[0-9]+$/ && $1 == p && $5 == m' "$PL_TMP/$1.txt" | wc -l; }
# tcp rows of host H whose reason (the last column) is R
reason_rows() { awk '$1 ~ /^[0-9]+$/ && $5 == "tcp"' "$PL_TMP/$1.txt" | grep -c -- " $2\$" || true; }
for h in a b; do
	total=$(awk '$1 ~ /^[0-9]+$/' "$PL_TMP/$h.txt" | wc -l)
	uniq=$(awk '$1 ~ /^[0-9]+$/ { print $1, $2 }' "$PL_TMP/$h.txt" | sort -u | wc -l)
	echo "host $h: $total rows ($uniq distinct pid/fd)"
	[ "$total" -eq $((2 * N)) ] || pl_fail "stat on $h lists $total connections, expected $((2 * N))"
	[ "$uniq" -eq "$total" ] || pl_fail "stat on $h lists a (pid, fd) twice"
done

# A's rule client: N rows, all tcp; B's server of them: N, tcp too
[ "$(rows_of a $c1 tcp)" -eq $N ] || pl_fail "client 1: $(rows_of a $c1 tcp) tcp rows, expected $N"
[ "$(reason_rows a 'rule 1 says tcp')" -eq $N ] || pl_fail "not $N rows 'rule 1 says tcp' on a"
[ "$(rows_of b $s1 tcp)" -eq $N ] || pl_fail "server 1: $(rows_of b $s1 tcp) tcp rows"
# A's second client: ntb ones while contexts last, then tcp; B mirrors it
ntb_c=$(rows_of a $c2 ntb)
tcp_c=$(rows_of a $c2 tcp)
ntb_s=$(rows_of b $s2 ntb)
tcp_s=$(rows_of b $s2 tcp)
echo "client 2: $ntb_c ntb, $tcp_c tcp; its server: $ntb_s ntb, $tcp_s tcp"
[ "$ntb_c" -ge 1 ] && [ "$tcp_c" -ge 1 ] || pl_fail "client 2 is not a mix of ntb and tcp"
[ $((ntb_c + tcp_c)) -eq $N ] || pl_fail "client 2 has $((ntb_c + tcp_c)) rows, expected $N"
[ "$ntb_s" -eq "$ntb_c" ] && [ "$tcp_s" -eq "$tcp_c" ] || pl_fail "server 2 does not mirror client 2"
# (a set-up that timed out on a loaded machine would say so instead: not all need to)
[ "$(reason_rows a 'no receive context')" -ge 1 ] || pl_fail "no row 'no receive context' on a"
nset=$((N + tcp_s))
[ "$(reason_rows b 'client did not set up ntb')" -eq $nset ] ||
	pl_fail "$(reason_rows b 'client did not set up ntb') rows 'client did not set up ntb' on b, expected $nset"

# --summary: the same counts, per mode, per link and per reason; --json agrees
# sum H KIND NAME: the count of the line "KIND COUNT NAME" of H's summary
sum() { awk -v k="$2" -v n="$3" '$1 == k { c = $2; $1 = ""; $2 = ""; sub(/^ +/, ""); if ($0 == n) print c }' \
	"$PL_TMP/$1-sum.txt"; }
stat_host a "$NTBSOCK_STAT_TCP" --summary "--summary --json"
stat_host b "$STAT_B" --summary "--summary --json"
cat "$PL_TMP/a-sum.txt" "$PL_TMP/a-sum.json" "$PL_TMP/b-sum.txt"
# reasons H: "COUNT REASON" of H's tcp rows in its table (the reason: the columns after 13)
reasons() { awk 'NR > 1 && $5 == "tcp" { for (i = 1; i <= 13; i++) $i = ""; sub(/^ +/, ""); print }' \
	"$PL_TMP/$1.txt" | sort | uniq -c | awk '{ c = $1; $1 = ""; sub(/^ +/, ""); print c, $0 }' | sort; }
# check_sum H NTB: H's summary counts what its table lists
check_sum() {
	[ "$(sum $1 total '')" = $((2 * N)) ] || pl_fail "summary on $1: total is not $((2 * N))"
	[ "$(sum $1 mode ntb)" = "$2" ] || pl_fail "summary on $1: mode ntb is not $2"
	[ "$(sum $1 mode tcp)" = $((2 * N - $2)) ] || pl_fail "summary on $1: mode tcp is not $((2 * N - $2))"
	[ "$(sum $1 link ab)" = "$2" ] || pl_fail "summary on $1: link ab is not $2"
	awk '$1 == "reason" { $1 = ""; sub(/^ +/, ""); print }' "$PL_TMP/$1-sum.txt" | sort \
		>"$PL_TMP/$1-sum-reasons"
	reasons $1 >"$PL_TMP/$1-reasons"
	cmp -s "$PL_TMP/$1-sum-reasons" "$PL_TMP/$1-reasons" ||
		pl_fail "summary on $1: reasons $(cat "$PL_TMP/$1-sum-reasons"), the table has $(cat "$PL_TMP/$1-reasons")"
}
check_sum a $ntb_c
check_sum b $ntb_s
[ "$(sum a reason 'rule 1 says tcp')" = $N ] || pl_fail "summary on a: 'rule 1 says tcp' is not $N"
[ "$(sum b reason 'client did not set up ntb')" = $nset ] ||
	pl_fail "summary on b: 'client did not set up ntb' is not $nset"
# --summary --json counts what --json lists
python3 - "$PL_TMP" $((2 * N)) <<'EOF' || pl_fail "--json does not agree"
import collections, json, sys
tmp, total = sys.argv[1], int(sys.argv[2])
for h in "ab":
    s = json.load(open("%s/%s-sum.json" % (tmp, h)))["summary"]
    rows = json.load(open("%s/%s.json" % (tmp, h)))["connections"]
    ntb = sum(r["mode"] == "ntb" for r in rows)
    reasons = collections.Counter(r["reason"] for r in rows if r["mode"] == "tcp")
    want = {"total": total, "mode": {"ntb": ntb, "tcp": total - ntb}, "link": {"ab": ntb},
            "reason": dict(reasons)}
    assert len(rows) == total, "%s: --json lists %d, expected %d" % (h, len(rows), total)
    assert s == want, "%s: --summary --json: %s, expected %s" % (h, s, want)
EOF

for d in h1 h2; do touch "$PL_TMP/$d/close" "$PL_TMP/$d/exit"; done
wait $h1 || pl_fail "client 1 failed"
wait $h2 || pl_fail "client 2 failed"
echo "ntbsock stat lists all $((2 * N)) connections of each host; --summary counts them: ok"
