#!/bin/sh
# SPDX-License-Identifier: MIT
# Run every tests/integration/test_*.sh (each under its own timeout); print PASS/FAIL/SKIP per
# test and a total; exit non-zero if any failed. A test exits 0 (pass), 77 (skip, with a line
# containing SKIP saying why) or anything else (fail); one that leaves files in /dev/shm fails.
# NTBSOCK_TEST_SHARED_SHM=1: run the tests in the machine's /dev/shm (see below).
# NTBSOCK_TESTS="test_a test_b*": run only the tests whose names match these patterns.
cd "$(dirname "$0")/.." || exit 1
fail=0; pass=0; skip=0; failed=""; leftovers=0
# Each test gets a private, empty /dev/shm (a tmpfs in its own mount namespace) when we may
# create one (root): it cannot collide with files of tests or programs running beside it, and
# whatever it leaves there is its own: listed as LEFTOVER and counted as a failure. Without
# that, the names of new ntbsock files are compared before and after (a warning only: files
# of other users' runs may appear meanwhile).
private_shm=0
if [ "${NTBSOCK_TEST_SHARED_SHM:-0}" != 1 ] &&
	unshare -m --propagation private sh -c 'mount -t tmpfs -o mode=1777 none /dev/shm' \
		2>/dev/null; then
	private_shm=1
fi
shm_list() { ls /dev/shm 2>/dev/null | grep '^ntbsock' | sort; }
for t in tests/integration/test_*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	if [ -n "${NTBSOCK_TESTS:-}" ]; then
		want=0
		for pat in $NTBSOCK_TESTS; do
			case $name in $pat) want=1;; esac
		done
		[ $want = 1 ] || continue
	fi
	start=$(date +%s)
	log=$(mktemp)
	left_file=$(mktemp)
	if [ $private_shm = 1 ]; then
		timeout 600 unshare -m --propagation private sh -c '
			mount -t tmpfs -o mode=1777 ntbsock-test-shm /dev/shm || exit 125
			sh "$1"; rc=$?
			ls -A /dev/shm >"$2"
			exit $rc' sh "$t" "$left_file" >"$log" 2>&1; rc=$?
		left=$(tr '\n' ' ' <"$left_file")
	else
		shm_list >"$left_file"
		timeout 600 sh "$t" >"$log" 2>&1; rc=$?
		left=$(shm_list | comm -13 "$left_file" - | tr '\n' ' ')
	fi
	rm -f "$left_file"
	secs=$(( $(date +%s) - start ))
	if [ -n "$left" ]; then
		leftovers=$((leftovers + 1))
		echo "LEFTOVER $name: /dev/shm: $left"
		if [ $private_shm = 1 ] && [ $rc -eq 0 ]; then
			rc=1; echo "$name: passed but left files in /dev/shm" >>"$log"
		fi
	fi
	case $rc in
	0)  pass=$((pass + 1)); echo "PASS $name (${secs}s)";;
	77) skip=$((skip + 1)); echo "SKIP $name: $(grep -m1 SKIP "$log")";;
	*)  fail=$((fail + 1)); failed="$failed $name"; echo "FAIL $name (rc=$rc, ${secs}s)"
	    grep -m 5 '^FAIL' "$log"; tail -n 40 "$log";;
	esac
	rm -f "$log"
done
echo "integration: $pass passed, $skip skipped, $fail failed${failed:+ ($failed )}$([ $leftovers -eq 0 ] || echo ", $leftovers left files in /dev/shm")"
[ $fail -eq 0 ]
