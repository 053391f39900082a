#!/bin/sh
# SPDX-License-Identifier: MIT
# The transport's own streams (tests/helpers/tp_perf, both link sides in one process): a
# clean 64 KiB and a 64 B stream verify byte-exact without any retransmission, and a stream
# through the fault decorator (1% drops, 1% corruption) still verifies, with retransmissions.
B=${BUILD:-build}/tests
P=$B/tp_perf
[ -x "$P" ] || { echo "FAIL: $P not built"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
check() { # output want-retransmits(zero|some)
	echo "$1"
	echo "$1" | grep -q "verified yes" || fail "stream not verified"
	r=$(echo "$1" | sed -n 's/.*retransmits \([0-9]*\).*/\1/p')
	case $2 in
	zero) [ "$r" = 0 ] || fail "retransmissions on a clean link: $r";;
	some) [ "${r:-0}" -gt 0 ] || fail "no retransmission under faults";;
	esac
}
out=$(timeout 120 "$P" -s 65536 -m 256 -p 1000) || fail "clean 64 KiB run: $out"
check "$out" zero
out=$(timeout 120 "$P" -s 64 -m 16 -p 1000) || fail "clean 64 B run: $out"
check "$out" zero
out=$(timeout 300 "$P" -s 16384 -m 32 -p 200 -f 0.01,0.01) || fail "fault run: $out"
check "$out" some
echo "tp_perf: ok"
