#!/bin/sh
# SPDX-License-Identifier: MIT
# Run every CMocka unit test binary given as arguments; print each suite's summary line and
# a total; exit non-zero if any failed.
fail=0; n=0; failed=""
for t in "$@"; do
	n=$((n + 1))
	out=$(timeout 300 "$t" 2>&1); rc=$?
	printf '%s\n' "$out" | grep -E '^\[  (PASSED|FAILED)  \]|^\[==========\]' | sed "s|^|$(basename "$t"): |"
	if [ $rc -ne 0 ]; then
		fail=$((fail + 1)); failed="$failed $(basename "$t")"
		# the failed checks first (CMocka's "file:line: error: ..." and "[  ERROR   ]"
		# lines): the tail below may not reach back to them
		printf '%s\n' "$out" | grep -E -B2 ': error: |^\[  ERROR   \]|^\[  FAILED  \] test_' |
			head -n 30 | sed 's/^/  > /'
		printf '%s\n' "$out" | tail -n 40
	fi
done
echo "unit: $n suites, $fail failed${failed:+ ($failed )}"
[ $fail -eq 0 ]
