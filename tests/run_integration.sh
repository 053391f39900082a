#!/bin/sh
# SPDX-License-Identifier: MIT
# Run every tests/integration/test_*.sh (each under its own timeout); print PASS/FAIL/SKIP per
# test and a total; exit non-zero if any failed; warn (LEFTOVER) about ntbsock files a test left
# in /dev/shm. A test exits 0 (pass), 77 (skip, with a
# line containing SKIP saying why) or anything else (fail).
cd "$(dirname "$0")/.." || exit 1
fail=0; pass=0; skip=0; failed=""; leftovers=0
shm_list() { ls /dev/shm 2>/dev/null | grep '^ntbsock' | sort; }
for t in tests/integration/test_*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	start=$(date +%s)
	log=$(mktemp)
	shm_before=$(mktemp)
	shm_list >"$shm_before"
	timeout 600 sh "$t" >"$log" 2>&1; rc=$?
	secs=$(( $(date +%s) - start ))
	# ntbsock files in /dev/shm that appeared during the test and are still there: a test
	# must remove what it creates. (A warning: tests of other users may run at the same time.)
	left=$(shm_list | comm -13 "$shm_before" - | tr '\n' ' ')
	rm -f "$shm_before"
	if [ -n "$left" ]; then
		leftovers=$((leftovers + 1))
		echo "LEFTOVER $name: /dev/shm: $left"
	fi
	case $rc in
	0)  pass=$((pass + 1)); echo "PASS $name (${secs}s)";;
	77) skip=$((skip + 1)); echo "SKIP $name: $(grep -m1 SKIP "$log")";;
	*)  fail=$((fail + 1)); failed="$failed $name"; echo "FAIL $name (rc=$rc, ${secs}s)"; tail -n 40 "$log";;
	esac
	rm -f "$log"
done
echo "integration: $pass passed, $skip skipped, $fail failed${failed:+ ($failed )}$([ $leftovers -eq 0 ] || echo ", $leftovers left files in /dev/shm")"
[ $fail -eq 0 ]
