#!/bin/sh
# SPDX-License-Identifier: MIT
# iperf3 between demo hosts A (client) and B (server) over ntbsock: default 128 KiB writes,
# -R, -P 4, -l 64 / 1K / 1M, --bidir, -Z (sendfile). Each run must move its bytes over the
# link: the kernel's loopback counters move by far less than the payload, and every connection
# is logged as ntb.
. "$(dirname "$0")/lib.sh"
pl_need iperf3 ss
pl_setup iperf3
PY=/usr/bin/python3
port=$(pl_port 1)

pl_bg b iperf3 -s -B 127.0.0.2 -p $port
pl_wait_port 127.0.0.2 $port

n=0
run() {
	n=$((n + 1))
	before=$(pl_lo_bytes)
	pl_run a iperf3 -c 127.0.0.2 -p $port -t ${T:-2} -J "$@" >"$PL_TMP/run$n.json" 2>&1 ||
		{ tail -20 "$PL_TMP/run$n.json"; pl_fail "iperf3 $* failed"; }
	bytes=$($PY -c 'import json,sys; j=json.load(open(sys.argv[1])); e=j["end"]
s=e.get("sum_sent",{}).get("bytes",0)+e.get("sum_sent_bidir_reverse",{}).get("bytes",0)
print(int(s))' "$PL_TMP/run$n.json") || pl_fail "iperf3 $*: no JSON result"
	gbps=$($PY -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.2f" % (j["end"].get("sum_received", {}).get("bits_per_second", 0)/1e9))' "$PL_TMP/run$n.json")
	echo "iperf3 $*: $bytes bytes, $gbps Gbit/s"
	# (what iperf3 said, when it ended without results: its JSON's error and last intervals)
	[ "$bytes" -gt 1000000 ] || { grep -n '"error"' "$PL_TMP/run$n.json"; tail -c 2000 "$PL_TMP/run$n.json"
		grep -h 'warn\|error' "$PL_TMP"/*.log | tail -20; pl_fail "iperf3 $*: only $bytes bytes"; }
	pl_assert_lo_below "$before" $((bytes / 20))
}

run
run -R
run -P 4
run -l 64
run -l 1K
run -l 1M
run --bidir
run -Z
conns=$(pl_count_log a ': ntb (link')
tcps=$(pl_count_log a ': tcp (')
echo "client connections: $conns ntb, $tcps tcp"
[ "$conns" -ge 20 ] || pl_fail "only $conns ntb connections"
[ "$tcps" -eq 0 ] || pl_fail "$tcps connections fell back to tcp"
pl_assert_log b 'ntb (link'

# Reference, same run: kernel TCP loopback without the library (printed, never asserted).
p2=$(pl_port 2)
timeout 60 iperf3 -s -B 127.0.0.1 -p $p2 >/dev/null 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.1 $p2
for l in 128K 1K; do
	timeout 60 iperf3 -c 127.0.0.1 -p $p2 -t ${T:-2} -l $l -J >"$PL_TMP/tcp-$l.json" 2>&1 &&
		echo "kernel TCP iperf3 -l $l: $($PY -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.2f" % (j["end"]["sum_received"]["bits_per_second"]/1e9))' "$PL_TMP/tcp-$l.json") Gbit/s"
done
echo "iperf3 over ntb: ok"
