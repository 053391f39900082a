#!/bin/sh
# SPDX-License-Identifier: MIT
# Smoke test of `make demo` (bench/demo.sh with DEMO_QUICK=1: 1-second runs, two iperf3 sizes,
# one sockperf size): the table has numeric ntbsock and kernel TCP values in every row (and the
# same-host rows: loopback link, kernel TCP, Unix socket), no
# ntbsock row fell back to TCP, progress went to stderr, and the run left no process (checked
# by session id) and no file (its /tmp directory, its link files) behind. No timing assertions.
. "$(dirname "$0")/lib.sh"
pl_need iperf3 sockperf python3 setsid taskset ss
[ -x "$BUILD/ntbsock" ] && [ -f "$PL_LIB" ] || pl_skip "$BUILD/ntbsock or $PL_LIB not built"
# Under a sanitizer runtime (make check-asan/check-tsan) the demo's timed runs measure the
# sanitizer and time out; the other integration tests cover the library there.
[ -z "$PL_PRELOAD_FIRST" ] || pl_skip "the demo measures performance: not under a sanitizer runtime"

OUT=$(mktemp /tmp/ntbsock-test-demo-XXXXXX)
trap 'rm -f "$OUT" "$OUT.err"' EXIT
tmp_before=$(ls -d /tmp/ntbsock-demo-* 2>/dev/null)

# A session of its own: everything the demo starts carries this session id.
DEMO_QUICK=1 BUILD=$BUILD setsid sh "$ROOT/bench/demo.sh" >"$OUT" 2>"$OUT.err" &
sid=$!
wait $sid
rc=$?
cat "$OUT"
[ $rc -eq 0 ] || { cat "$OUT.err"; echo "FAIL: demo exited $rc"; exit 1; }

fail() { echo "FAIL: $*"; echo "--- stderr"; cat "$OUT.err"; exit 1; }
num='[0-9][0-9]*\.[0-9][0-9]'
re2='\( (2nd try)\)\{0,1\}' # a measurement may have needed a second attempt; it says so
# | iperf3 throughput, Gbit/s | SIZE | NTB | TCP | RATIO× |
n=$(grep -c "^| iperf3 throughput, Gbit/s | [0-9]* [KMi]*B | $num$re2 | $num$re2 | $num× |$" "$OUT")
[ "$n" -eq 2 ] || fail "expected 2 numeric iperf3 rows, got $n"
n=$(grep -c "^| sockperf one-way latency p50 / p99, µs | 64 B | $num / $num$re2 | $num / $num$re2 | $num× / $num× |$" "$OUT")
[ "$n" -eq 1 ] || fail "expected 1 numeric sockperf row, got $n"
grep -q "^| reference: memcpy bandwidth, one core | 4 MiB | [0-9][0-9]* MB/s" "$OUT" || fail "no memcpy reference"
grep -q "^| reference: cache-line one-way latency, core to core | 64 B | $num µs" "$OUT" || fail "no cache-line reference"
! grep -q "^|.*\(tcp fallback\|failed\|n/a\)" "$OUT" || fail "a row fell back to TCP or failed"
# Progress: one line per measurement (4 iperf3 + 2 sockperf + 1 reference) on stderr.
# the same host: loopback link, kernel TCP, Unix socket, two ratios
n=$(grep -c "^| iperf3 throughput, Gbit/s | [0-9]* [KMi]*B | $num$re2 | $num$re2 | $num | $num× | $num× |$" "$OUT")
[ "$n" -eq 2 ] || fail "expected 2 numeric same-host iperf3 rows, got $n"
n=$(grep -c "^| sockperf one-way latency p50 / p99, µs | 64 B | $num / $num$re2 | $num / $num$re2 | $num / $num | $num× / $num× | $num× / $num× |$" "$OUT")
[ "$n" -eq 1 ] || fail "expected 1 numeric same-host sockperf row, got $n"
n=$(grep -c '^\[[0-9]*/16\] ' "$OUT.err")
[ "$n" -eq 16 ] || fail "expected 16 progress lines on stderr, got $n"

# Nothing left behind.
sleep 0.3
left=$(ps -eo sid=,pid=,args= | awk -v s=$sid '$1 == s')
[ -z "$left" ] || fail "processes left behind: $left"
ls /dev/shm/ntbsock-demo-$sid* >/dev/null 2>&1 && fail "link files left: $(ls /dev/shm/ntbsock-demo-$sid*)"
tmp_after=$(ls -d /tmp/ntbsock-demo-* 2>/dev/null)
for d in $tmp_after; do
	echo "$tmp_before" | grep -qxF "$d" || fail "directory left behind: $d"
done
echo "demo smoke: ok"
