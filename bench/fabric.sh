#!/bin/sh
# SPDX-License-Identifier: MIT
# Fabric figures on one machine: hosts 1 and 2 of conf/examples/mesh (two links, h1h2a and
# h1h2b), each link modelled at RATE bytes/s (speed = { bandwidth = RATE; }). Unmodified iperf3
# under the library with 1, 2 and 8 parallel streams (-P; new connections go on the less loaded
# link), and the same with a single modelled link (host 1's second link removed), beside kernel
# TCP loopback in the same run. Prints the measured rate as a ratio of RATE, and the per-link
# byte counters of `ntbsock stat` (how the streams were placed). Processes pinned with taskset.
#
#   sh bench/fabric.sh [RATE [SECONDS]]     RATE: bytes/s with K/M/G (default 1000M), SECONDS 3
#
# Needs a private /dev/shm? No: its link files are /dev/shm/ntbsock-fabric-$$-*, removed at exit.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
RATE=${1:-1000M}
SECS=${2:-3}
NTB=$BUILD/ntbsock
LIB=$BUILD/libntbsock.so
[ -x "$NTB" ] && [ -f "$LIB" ] || { echo "build first (make)" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 not installed (make deps)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/ntbsock-fabric-XXXXXX)
LINK=/dev/shm/ntbsock-fabric-$$
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	sleep 0.2
	for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
	rm -f "$LINK"-* 2>/dev/null
	rm -rf "$TMP"
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
	"$NTB" check -c "$TMP/two$h.conf" >/dev/null || { echo "bad config two$h" >&2; exit 1; }
done

port=$((40000 + $$ % 1000 * 4))
# run MODE(two|one|tcp) PARALLEL: "GBPS" of an iperf3 run host 1 -> host 2
run() {
	port=$((port + 1))
	if [ "$1" = tcp ]; then pre=""; else pre="env LD_PRELOAD=$LIB NTBSOCK_CONF=$TMP/${1}2.conf NTBSOCK_LOG=error"; fi
	$pre taskset -c 1 iperf3 -s -1 -B 127.0.0.2 -p $port >"$TMP/srv.out" 2>&1 &
	srv=$!; PIDS="$PIDS $srv"
	i=0; while ! ss -Hltn "sport = :$port" | grep -q 127.0.0.2 && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
	if [ "$1" = tcp ]; then pre=""; else pre="env LD_PRELOAD=$LIB NTBSOCK_CONF=$TMP/${1}1.conf NTBSOCK_LOG=error"; fi
	$pre taskset -c 0 iperf3 -c 127.0.0.2 -B 127.0.0.1 -p $port -t "$SECS" -P "$2" -J >"$TMP/cli.json" 2>"$TMP/cli.err"
	wait $srv 2>/dev/null
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % (d["end"]["sum_received"]["bits_per_second"]/8e9))' "$TMP/cli.json" 2>/dev/null || echo "nan"
}

echo "fabric: hosts 1 and 2 of the mesh, each link modelled at $RATE/s ($rate_bytes bytes/s); iperf3 -t $SECS"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; client on cpu 0, server on cpu 1"
printf "%-28s %4s %10s %12s\n" "setup" "-P" "GB/s" "x link rate"
for mode in one two; do
	for p in ${BENCH_P:-1 2 8}; do
		g=$(run $mode $p)
		printf "%-28s %4s %10s %12s\n" "ntbsock, $mode link(s)" "$p" "$g" \
			"$(awk -v g="$g" -v r="$rate_bytes" 'BEGIN { if (g == "nan") print "-"; else printf "%.2f", g * 1e9 / r }')"
	done
	env NTBSOCK_LOG=error "$NTB" stat -c "$TMP/${mode}1.conf" | grep '^link h1h2' | sed 's/^/    /'
done
for p in 1 8; do
	g=$(run tcp $p)
	printf "%-28s %4s %10s %12s\n" "kernel TCP loopback" "$p" "$g" "-"
done
