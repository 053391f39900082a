#!/bin/sh
# SPDX-License-Identifier: MIT
# Fabric figures on one machine: hosts 1 and 2 of conf/examples/mesh (two links, h1h2a and
# h1h2b), each link modelled at RATE bytes/s (speed = { bandwidth = RATE; }), beside kernel TCP
# loopback measured in the same run. Processes pinned with taskset (client CPU 0, server CPU 1).
#
#   1. throughput: unmodified iperf3 with 1 and 8 parallel streams (-P; new connections go on
#      the less loaded link) over one modelled link (host 1's second link removed), over
#      two, and over two with `balance = true` (one connection's stream spreads over both:
#      transport/tp_stripe.c), as a ratio of RATE; for 8 streams the spread of the streams' rates (slowest and
#      fastest against their mean);
#   2. latency: sockperf ping-pong between hosts 1 and 2 over the two links, idle and while an
#      iperf3 stream loads one link (the links each connection used, from `ntbsock stat`);
#   3. a link cut: iperf3 -P 4 over the two links, `ntbsock link down h1h2b` on host 1 at 1/3
#      of the run: throughput over time (0.25 s intervals) and the bytes that crossed kernel
#      TCP loopback (/proc/net/dev, lo) meanwhile.
#
#   sh bench/fabric.sh [RATE [SECONDS]]     RATE: bytes/s with K/M/G (default 1000M), SECONDS 3
#
# Runs in a network namespace of its own when it can (root). FABRIC_MD=FILE appends the figures as markdown to FILE; FABRIC_PNG=FILE plots the cut's
# throughput over time there (gnuplot). Link files: /dev/shm/ntbsock-fabric-$$-*, removed at exit.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# In a network namespace of its own (as root), so that the loopback counters of section 3 count
# only this run's traffic; its lo carries 127.0.0.0/8 as the machine's does.
if [ -z "$FABRIC_NETNS" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
   unshare -n true 2>/dev/null; then
	FABRIC_NETNS=1 exec unshare -n sh -c 'ip link set lo up && exec sh "$0" "$@"' "$0" "$@"
fi
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD;; esac
RATE=${1:-1000M}
SECS=${2:-3}
NTB=$BUILD/ntbsock
LIB=$BUILD/libntbsock.so
[ -x "$NTB" ] && [ -f "$LIB" ] || { echo "build first (make)" >&2; exit 1; }
for c in iperf3 sockperf python3 taskset ss; do
	command -v $c >/dev/null || { echo "$c not installed (make deps)" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/ntbsock-fabric-XXXXXX)
LINK=/dev/shm/ntbsock-fabric-$$
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	sleep 0.2
	for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
	rm -f "$LINK"-* 2>/dev/null
	[ -n "$FABRIC_KEEP" ] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rate_bytes=$(echo "$RATE" | awk '{ v = $1 + 0; u = substr($1, length($1));
	if (u == "K") v *= 1024; else if (u == "M") v *= 1048576; else if (u == "G") v *= 1073741824;
	printf "%.0f\n", v }')

# host configs: every link of hosts 1 and 2 modelled at RATE; "one" variants keep one link
for h in 1 2; do
	sed -e "s#/dev/shm/ntbsock-mesh-#$LINK-#" \
	    -e "s#^    backend = \"shm\";#    backend = \"shm\";\n    speed = { bandwidth = \"$RATE\"; };#" \
		"$ROOT/conf/examples/mesh/host$h.conf" >"$TMP/two$h.conf"
	sed -e 's#links = \[ "h1h2a", "h1h2b" \];#link = "h1h2a";#' "$TMP/two$h.conf" >"$TMP/one$h.conf"
	sed -e 's#links = \[ "h1h2a", "h1h2b" \];#links = [ "h1h2a", "h1h2b" ]; balance = true;#' \
		"$TMP/two$h.conf" >"$TMP/bal$h.conf"
	for m in two bal; do
		"$NTB" check -c "$TMP/$m$h.conf" >/dev/null || { echo "bad config $m$h" >&2; exit 1; }
	done
done

port=$((40000 + $$ % 1000 * 8))
# pre MODE(two|one|tcp) HOST: the command prefix of a program on HOST (1 or 2)
pre() {
	[ "$1" = tcp ] && return
	echo "env LD_PRELOAD=$LIB NTBSOCK_CONF=$TMP/$1$2.conf NTBSOCK_LOG=error"
}
wait_port() {
	i=0; while ! ss -Hltn "sport = :$1" | grep -q 127.0.0.2 && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
}
# iperf MODE PARALLEL SECONDS [INTERVAL]: iperf3 host 1 -> host 2, JSON in $TMP/cli.json
iperf() {
	port=$((port + 1))
	$(pre $1 2) taskset -c 1 iperf3 -s -1 -B 127.0.0.2 -p $port >"$TMP/srv.out" 2>&1 &
	srv=$!; PIDS="$PIDS $srv"
	wait_port $port
	$(pre $1 1) taskset -c 0 iperf3 -c 127.0.0.2 -B 127.0.0.1 -p $port -t "$3" -P "$2" \
		${4:+-i $4} -J >"$TMP/cli.json" 2>"$TMP/cli.err"
	wait $srv 2>/dev/null
}
# "GBPS SLOWEST FASTEST" of the last iperf(): the sum, and the streams against their mean
iperf_figures() {
	python3 - "$TMP/cli.json" <<'EOF' 2>/dev/null || echo "nan - -"
import json, sys
d = json.load(open(sys.argv[1]))
s = [x["receiver"]["bits_per_second"] for x in d["end"]["streams"]]
m = sum(s) / len(s)
print("%.3f %.2f %.2f" % (d["end"]["sum_received"]["bits_per_second"] / 8e9, min(s) / m, max(s) / m))
EOF
}
ratio() { awk -v g="$1" -v r="$rate_bytes" 'BEGIN { if (g == "nan") print "-"; else printf "%.2f", g * 1e9 / r }'; }
# sockperf_pp MODE: a ping-pong host 1 -> host 2 (64 B, SECS seconds); while it runs, the
# links of host 1's connections into $TMP/links ("-" for kernel TCP)
sockperf_pp() {
	port=$((port + 1))
	$(pre $1 2) taskset -c 1 sockperf sr --tcp -i 127.0.0.2 -p $port >"$TMP/sp-srv.out" 2>&1 &
	sp=$!; PIDS="$PIDS $sp"
	wait_port $port
	$(pre $1 1) taskset -c 0 sockperf pp --tcp -i 127.0.0.2 -p $port -t "$SECS" -m 64 \
		>"$TMP/sp-$port.out" 2>&1 &
	SP_OUT=$TMP/sp-$port.out
	spc=$!; PIDS="$PIDS $spc"
	sleep 1
	if [ "$1" = tcp ]; then echo - >"$TMP/links"; else links_of >"$TMP/links"; fi
	wait $spc
	kill $sp 2>/dev/null; wait $sp 2>/dev/null
}
# "P50 P99" microseconds of the last sockperf_pp
sockperf_figures() {
	awk '/percentile 50.000 =/ { p50 = $NF } /percentile 99.000 =/ { p99 = $NF }
	     END { print (p50 == "" ? "nan" : p50), (p99 == "" ? "nan" : p99) }' "$SP_OUT"
}
links_of() {
	env NTBSOCK_LOG=error "$NTB" stat -c "$TMP/two1.conf" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
cs = d.get("connections", d) if isinstance(d, dict) else d
print(" ".join(sorted("%s:%s" % (c.get("remote", "?").split(":")[-1], c.get("link", "?"))
                      for c in cs if c.get("mode") == "ntb"
                      and c.get("local", "").startswith("127.0.0.1:"))) or "-")' 2>/dev/null
}
lo_bytes() { awk '$1 == "lo:" { print $2 }' /proc/net/dev; } # (received: each byte is counted once each way)

md() { [ -n "$FABRIC_MD" ] && echo "$*" >>"$FABRIC_MD"; echo "$*"; }

echo "fabric: hosts 1 and 2 of the mesh, each link modelled at $RATE/s ($rate_bytes bytes/s); iperf3 -t $SECS"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; client on cpu 0, server on cpu 1"
md ""
md "## Fabric: hosts 1 and 2 of conf/examples/mesh, each link modelled at $RATE/s"
md ""
md "| setup | -P | GB/s | x link rate | slowest / fastest stream vs mean |"
md "|---|---|---|---|---|"
for mode in one two bal; do
	for p in ${FABRIC_P:-1 8}; do
		iperf $mode $p "$SECS"
		set -- $(iperf_figures)
		case $mode in bal) what="two links, balance";; *) what="$mode link(s)";; esac
		md "| ntbsock, $what | $p | $1 | $(ratio $1) | $([ $p -gt 1 ] && echo "$2 / $3" || echo -) |"
	done
	env NTBSOCK_LOG=error "$NTB" stat -c "$TMP/${mode}1.conf" | grep '^link h1h2' | sed 's/^/    /'
done
for p in ${FABRIC_P:-1 8}; do
	iperf tcp $p "$SECS"
	set -- $(iperf_figures)
	md "| kernel TCP loopback | $p | $1 | - | $([ $p -gt 1 ] && echo "$2 / $3" || echo -) |"
done

# --- 2. latency, idle and beside a stream ---
md ""
md "| sockperf ping-pong 64 B, host 1 -> 2 | p50 us | p99 us | links (port:link) |"
md "|---|---|---|---|"
sockperf_pp two
set -- $(sockperf_figures)
md "| ntbsock, two links, idle | $1 | $2 | $(cat "$TMP/links") |"
idle=$1
# loaded MODE: the ping-pong while an iperf3 stream host 1 -> 2 runs beside it
loaded() {
	port=$((port + 1)); lport=$port
	$(pre $1 2) taskset -c 1 iperf3 -s -1 -B 127.0.0.2 -p $lport >"$TMP/load-srv.out" 2>&1 &
	ls_pid=$!; PIDS="$PIDS $ls_pid"
	wait_port $lport
	$(pre $1 1) taskset -c 0 iperf3 -c 127.0.0.2 -B 127.0.0.1 -p $lport -t $((SECS + 3)) >"$TMP/load.out" 2>&1 &
	lc_pid=$!; PIDS="$PIDS $lc_pid"
	sleep 1
	sockperf_pp $1
	wait $lc_pid 2>/dev/null; wait $ls_pid 2>/dev/null
}
loaded two
set -- $(sockperf_figures)
md "| ntbsock, two links, an iperf3 stream beside | $1 | $2 | $(cat "$TMP/links") |"
md "| (loaded / idle p50) | $(awk -v a="$1" -v b="$idle" 'BEGIN { if (b + 0 > 0) printf "%.2fx", a / b; else print "-" }') | | |"
loaded bal
set -- $(sockperf_figures)
md "| ntbsock, two links with balance, an iperf3 stream beside | $1 | $2 | $(cat "$TMP/links") |"
md "| (loaded / idle p50) | $(awk -v a="$1" -v b="$idle" 'BEGIN { if (b + 0 > 0) printf "%.2fx", a / b; else print "-" }') | | |"
loaded one
set -- $(sockperf_figures)
md "| ntbsock, one link, an iperf3 stream beside | $1 | $2 | $(cat "$TMP/links") |"
sockperf_pp tcp
set -- $(sockperf_figures)
md "| kernel TCP loopback, idle | $1 | $2 | - |"

# --- 3. a link cut under load: 4 streams over two links, then one balanced stream ---
CUT=$(awk -v s="$SECS" 'BEGIN { printf "%.1f", (s + 2) / 3 }')
for run in "two 4" "bal 1"; do
set -- $run
cmode=$1; cp=$2
lo0=$(lo_bytes)
(sleep "$CUT"; env NTBSOCK_LOG=error "$NTB" link down h1h2b -c "$TMP/two1.conf") &
cutter=$!
iperf $cmode $cp $((SECS + 2)) 0.25
wait $cutter
lo1=$(lo_bytes)
env NTBSOCK_LOG=error "$NTB" link up h1h2b -c "$TMP/two1.conf"
python3 - "$TMP/cli.json" "$TMP/cut.dat" <<'EOF' >"$TMP/cut.txt" 2>/dev/null
import json, sys
d = json.load(open(sys.argv[1]))
out = open(sys.argv[2], "w")
for iv in d["intervals"]:
    s = iv["sum"]
    out.write("%.2f %.3f\n" % (s["end"], s["bits_per_second"] / 8e9))
print("%.3f" % (d["end"]["sum_received"]["bytes"] / 1e9))
EOF
[ $cmode = bal ] && what="with balance" || what=""
md ""
md "Link cut: iperf3 -P $cp for $((SECS + 2)) s over the two links $what, \`ntbsock link down h1h2b\` on host 1 at ${CUT} s:"
md "$(cat "$TMP/cut.txt" 2>/dev/null || echo nan) GB received; $(awk -v a="$lo0" -v b="$lo1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') GB crossed kernel TCP loopback meanwhile ($([ -n "$FABRIC_NETNS" ] && echo "this run's network namespace: its connections' handshakes and what failed over to TCP" || echo "all processes of the machine"))."
md "Throughput over time (s, GB/s): $(awk '{ printf "%s %s; ", $1, $2 }' "$TMP/cut.dat" 2>/dev/null)"
png=$FABRIC_PNG
[ -n "$png" ] && [ $cmode = bal ] && png=${png%.png}-balance.png
if [ -n "$png" ] && command -v gnuplot >/dev/null 2>&1 && [ -s "$TMP/cut.dat" ]; then
	gnuplot -e "set terminal png size 800,400; set output '$png';
		set title 'iperf3 -P $cp over two links modelled at $RATE/s $what, link h1h2b down at ${CUT} s';
		set xlabel 'time (s)'; set ylabel 'GB/s'; set yrange [0:*]; set grid;
		set arrow from $CUT, graph 0 to $CUT, graph 1 nohead dt 2;
		plot '$TMP/cut.dat' using 1:2 with linespoints title 'ntbsock'" 2>/dev/null &&
		md "Plot: $(basename "$png")"
fi
done
