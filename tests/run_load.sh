#!/bin/sh
# SPDX-License-Identifier: MIT
# The failure-path integration tests under a CPU hog (make check-load; slow, not in make check):
# each test once on the machine as it is, then once beside LOAD_HOGS busy-loop processes at the
# tests' own nice value (default: one per CPU), which compete with the programs under test and
# with their helper threads (transport/: peer death, failover, retransmission, heartbeats and
# close lingering all run there). Prints both outcomes and durations per test and a table;
# exits non-zero if a test fails in either run.
#   LOAD_TESTS="test_a test_b*"   the tests (patterns; default: the failure paths below)
#   LOAD_HOGS=N                   busy loops during the loaded run (default: nproc)
#   LOAD_IDLE=0                   skip the runs without the hog
#   LOAD_UNIT="bin..."            instead: these unit test binaries (make check-unit-load), all
#                                 of them LOAD_UNIT_RUNS times (default 3) beside the hogs; their
#                                 tests race helper threads, and CI's machine is not idle either
cd "$(dirname "$0")/.." || exit 1
: "${LOAD_TESTS:=test_fail_cut test_fail_fault test_fail_host_truncate test_fail_kill
	test_fail_shm_truncate test_fail_shm_unlink test_fail_sigstop test_failover_admin
	test_failover_epoll test_failover_exit test_failover_halfclose test_failover_kill
	test_failover_truncate test_failover_unlink test_link_comeback test_mesh_cut
	test_mesh_move_epoll test_pl_close_exit test_pl_kill test_pl_epoll_fair}"
LOAD_HOGS=${LOAD_HOGS:-$(nproc)}
hogs=""
hogs_stop() {
	# only the busy loops this script started, by pid
	for p in $hogs; do kill "$p" 2>/dev/null; done
	for p in $hogs; do wait "$p" 2>/dev/null; done
	hogs=""
}
hogs_start() {
	i=0
	while [ $i -lt "$LOAD_HOGS" ]; do
		sh -c 'while :; do :; done' &
		hogs="$hogs $!"; i=$((i + 1))
	done
}
trap hogs_stop EXIT
trap 'exit 1' INT TERM
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }

# one NAME LABEL: run test NAME through run_integration.sh; appends "LABEL RESULT SECONDS".
one() {
	start=$(ms_now)
	out=$(NTBSOCK_TESTS=$1 sh tests/run_integration.sh 2>&1)
	secs=$(echo "$start $(ms_now)" | awk '{ printf "%.1f", ($2 - $1) / 1000 }')
	res=$(echo "$out" | awk '/^(PASS|FAIL|SKIP) / { print $1; exit }')
	[ -n "$res" ] || res=NONE
	[ "$res" = FAIL ] && echo "$out" | sed 's/^/    /' | tail -n 45
	# (the load average beside it: other work on the machine slows the tests as well)
	printf '  %-6s %-5s %6ss  (load average %s)\n' "$2" "$res" "$secs" \
		"$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)"
	row="$row $res $secs"
	[ "$res" = PASS ] || [ "$res" = SKIP ]
}

if [ -n "${LOAD_UNIT:-}" ]; then
	fail=0; r=0
	hogs_start
	while [ $r -lt "${LOAD_UNIT_RUNS:-3}" ]; do
		r=$((r + 1))
		echo "unit run $r of ${LOAD_UNIT_RUNS:-3} beside $LOAD_HOGS busy loops"
		# (word splitting wanted: the list of binaries)
		# shellcheck disable=SC2086
		sh tests/run_unit.sh $LOAD_UNIT || fail=$((fail + 1))
	done
	hogs_stop
	echo "unit load: $fail failed run(s)"
	[ $fail -eq 0 ]
	exit
fi

fail=0; table=""
names=""
for pat in $LOAD_TESTS; do
	for t in tests/integration/$pat.sh; do
		[ -e "$t" ] && names="$names $(basename "$t" .sh)"
	done
done
for name in $names; do
	echo "$name"
	row=$name
	if [ "${LOAD_IDLE:-1}" = 1 ]; then
		one "$name" idle || fail=$((fail + 1))
	else
		row="$row - -"
	fi
	hogs_start
	one "$name" load || fail=$((fail + 1))
	hogs_stop
	table="$table
$row"
done
echo
printf '%-26s %-5s %8s   %-5s %8s   (%s busy loops)\n' test idle secs load secs "$LOAD_HOGS"
echo "$table" | awk 'NF { printf "%-26s %-5s %8s   %-5s %8s\n", $1, $2, $3, $4, $5 }'
echo "load: $fail failed run(s)"
[ $fail -eq 0 ]
