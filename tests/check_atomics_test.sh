#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_atomics.sh catches each form it must catch and passes what it must pass: every
# GCC __atomic_* / __sync_* builtin form and every default-order C11 call on its own line, and
# the explicit forms, the same names in comments and strings, member calls and longer names.
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/probe.c" <<'SRC'
/* __atomic_load_n(&x, __ATOMIC_RELAXED) and atomic_load(&y) in a comment */
static long probe(struct ops *o, _Atomic long *y, long *x, atomic_flag *f)
{
	long e = 0;

	log_str("atomic_store(y, 1) __sync_synchronize()");
	o->atomic_load(y);
	my_atomic_load(y);
	atomic_thread_fence(memory_order_acquire);
	atomic_store_explicit(y, 1, memory_order_release);
	e += atomic_load_explicit(y, memory_order_acquire);
	e += atomic_fetch_add_explicit(y, 1, memory_order_relaxed);
	atomic_compare_exchange_strong_explicit(y, &e, 2, memory_order_acq_rel,
						memory_order_relaxed);
	e += __atomic_load_n(x, __ATOMIC_ACQUIRE);
	__atomic_store_n(x, 1, __ATOMIC_RELEASE);
	e += __atomic_fetch_add(x, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	e += __sync_fetch_and_add(x, 1);
	__sync_synchronize();
	e += atomic_load(y);
	atomic_store(y, 1);
	e += atomic_exchange(y, 2);
	e += atomic_fetch_add(y, 1);
	e += atomic_fetch_sub(y, 1);
	e += atomic_fetch_or(y, 1);
	e += atomic_fetch_xor(y, 1);
	e += atomic_fetch_and(y, 1);
	atomic_compare_exchange_strong(y, &e, 3);
	atomic_compare_exchange_weak (y, &e, 4);
	e += atomic_flag_test_and_set(f);
	atomic_flag_clear(f);
	return e;
}
SRC
out=$(sh tests/check_atomics.sh "$tmp/probe.c")
rc=$?
fail=0
[ $rc -ne 0 ] || { echo "check_atomics_test: passed a file full of banned forms"; fail=1; }
for l in 15 16 17 18 19 20; do
	echo "$out" | grep -q "a GCC builtin: .*probe.c:$l:" ||
		{ echo "check_atomics_test: the builtin on line $l not named"; fail=1; }
done
for l in 21 22 23 24 25 26 27 28 29 30 31 32; do
	echo "$out" | grep -q "a default-order (seq_cst) call: .*probe.c:$l:" ||
		{ echo "check_atomics_test: the default-order call on line $l not named"; fail=1; }
done
n=$(echo "$out" | grep -c "probe.c:")
[ "$n" -eq 18 ] || { echo "check_atomics_test: $n lines named, not 18:"; echo "$out"; fail=1; }
# a directory argument is searched; a clean file passes
mkdir "$tmp/d" && sed -n '1,14p;33,$p' "$tmp/probe.c" >"$tmp/d/clean.c"
out=$(sh tests/check_atomics.sh "$tmp/d") ||
	{ echo "check_atomics_test: a clean directory failed:"; echo "$out"; fail=1; }
sh tests/check_atomics.sh "$tmp/none" >/dev/null 2>&1 &&
	{ echo "check_atomics_test: a missing path passed"; fail=1; }
[ $fail -eq 0 ] && echo "check_atomics_test: ok"
exit $fail
