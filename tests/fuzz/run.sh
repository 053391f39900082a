#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined) into build/fuzz and
# run each for FUZZ_SECONDS (default 60; 0: no limit) on a copy of its seed corpus
# tests/fuzz/<target>/, or until FUZZ_RUNS executions when that is set (whichever comes first).
# New crashes are kept as build/fuzz/crashes/<target>/crash-*; copy one into tests/fuzz/<target>/
# to make it a regression input (tests/unit/test_fuzz_replay.c replays every corpus file in
# `make check`). Prints executions, executions per second and coverage (libFuzzer's cov/ft) per
# target.
#
# Every target stays in memory: no file per input, no sleep, one link and connection (tp_rx,
# mbox) or one mapping (tcpstat) reused between inputs, reset from a snapshot
# (tests/fuzz/README.md has the figures).
#
#   conf     the config loader, printer, router and the environment's parsers
#   region   the link region's header (ntb_region_validate / _prepare)
#   tp_rx    the receive path: a program of hostile peer writes into a live connection's slot
#   mbox     the set-up mailbox packets (tp_mbox_process)
#   host     the host table (tp_host_adopt, tp_stat_table)
#   tcpstat  the table of tcp connections (tp_tcpstat_scan)
#   fo_hdr   the failover header on the kernel socket (tp_fo_hdr_parse, tp_fo_rx_skip)
#
#   sh tests/fuzz/run.sh [target...]     (default: all of the above)
cd "$(dirname "$0")/../.." || exit 1
SECS=${FUZZ_SECONDS:-60}
RUNS=${FUZZ_RUNS:--1}
MAKE=${MAKE:-make}
CLANG=${CLANG:-clang}
B=${FUZZ_BUILD:-build/fuzz}
case $B in /*) ;; *) B=$(pwd)/$B;; esac
targets=${*:-conf region tp_rx mbox host tcpstat fo_hdr}
command -v "$CLANG" >/dev/null || { echo "fuzz: $CLANG not installed (make deps)"; exit 1; }

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
echo "fuzz: building the core with $CLANG into $B"
$MAKE --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" BUILD="$B" \
	CC="$CLANG -fsanitize=fuzzer-no-link $san" CFLAGS="-O1 -g -Wno-unused-command-line-argument" \
	"$B/libntbsock-core.a" || { echo "fuzz: core build failed"; exit 1; }
libs="$(pkg-config --libs libconfig liburcu-bp libpci) -lpthread -ldl -lm"
cflags="-std=c11 -D_GNU_SOURCE -I. $(pkg-config --cflags libconfig liburcu-bp libpci) -O1 -g"

rc=0
for t in $targets; do
	bin=$B/fuzz_$t
	$CLANG -fsanitize=fuzzer $san $cflags -o "$bin" "tests/fuzz/fuzz_$t.c" \
		"$B/libntbsock-core.a" $libs || { echo "fuzz: build of $t failed"; rc=1; continue; }
	work=$B/corpus/$t; crashes=$B/crashes/$t
	mkdir -p "$work" "$crashes"
	case $t in
	region) maxlen=40000;;
	conf)   maxlen=8192;;
	*)      maxlen=4096;;
	esac
	log=$B/fuzz_$t.log
	limit="${SECS}s"
	[ "$SECS" = 0 ] && limit="no time limit"
	[ "$RUNS" -ge 0 ] && limit="$limit, $RUNS runs"
	echo "fuzz: $t ($limit; corpus tests/fuzz/$t, work dir $work)"
	ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
	LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitize/lsan.supp:print_suppressions=0" \
	UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
	"$bin" -max_total_time="$SECS" -runs="$RUNS" -max_len=$maxlen -timeout=20 -rss_limit_mb=4096 \
		-print_final_stats=1 -artifact_prefix="$crashes/" \
		"$work" "tests/fuzz/$t" >"$log" 2>&1
	r=$?
	execs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
	last=$(grep -a -E '^#[0-9]+.*(cov|DONE)' "$log" | tail -n 1)
	rate=$(grep -a 'stat::average_exec_per_sec' "$log" | awk '{print $2}')
	echo "fuzz: $t: rc=$r executions=${execs:-?} exec/s=${rate:-?} last: $last"
	if [ $r -ne 0 ]; then
		rc=1
		echo "fuzz: $t FOUND A PROBLEM; artifacts in $crashes:"; ls "$crashes"
		grep -a -A30 -m1 'ERROR\|runtime error\|deadly signal' "$log" | head -n 40
	fi
done
exit $rc
