#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined) into build/fuzz and
# run each for FUZZ_SECONDS (default 60) on a copy of its seed corpus tests/fuzz/<target>/.
# New crashes are kept as build/fuzz/crashes/<target>/crash-*; copy one into tests/fuzz/<target>/
# to make it a regression input (tests/unit/test_fuzz_replay.c replays every corpus file in
# `make check`). Prints executions and coverage (libFuzzer's cov/ft) per target.
#
#   sh tests/fuzz/run.sh [target...]     targets: conf region tp_rx mbox host tcpstat fo_hdr
#                                        (default all)
cd "$(dirname "$0")/../.." || exit 1
SECS=${FUZZ_SECONDS:-60}
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
	echo "fuzz: $t for ${SECS}s (corpus tests/fuzz/$t, work dir $work)"
	ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
	LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitize/lsan.supp:print_suppressions=0" \
	UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
	"$bin" -max_total_time="$SECS" -max_len=$maxlen -timeout=20 -rss_limit_mb=4096 \
		-print_final_stats=1 -artifact_prefix="$crashes/" \
		"$work" "tests/fuzz/$t" >"$log" 2>&1
	r=$?
	execs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
	last=$(grep -a -E '^#[0-9]+.*(cov|DONE)' "$log" | tail -n 1)
	echo "fuzz: $t: rc=$r executions=${execs:-?} last: $last"
	if [ $r -ne 0 ]; then
		rc=1
		echo "fuzz: $t FOUND A PROBLEM; artifacts in $crashes:"; ls "$crashes"
		grep -a -A30 -m1 'ERROR\|runtime error\|deadly signal' "$log" | head -n 40
	fi
done
exit $rc
