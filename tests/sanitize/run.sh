#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the core, library, command, unit tests and helpers with a sanitizer into build/<variant>
# and run the unit tests (and, with "all", the integration tests with the sanitizer runtime
# preloaded ahead of the library). Every sanitizer report goes to a log directory; any report
# fails the run, even when the test that triggered it passed.
#
#   sh tests/sanitize/run.sh asan|tsan [unit|all|integration]
#
# NTBSOCK_TESTS picks integration tests by name (tests/run_integration.sh).
#
# Environment: SAN_BUILD (default build/<variant>), MAKE (default make), JOBS (default nproc).
cd "$(dirname "$0")/../.." || exit 1
variant=${1:?usage: run.sh asan|tsan [unit|all]}
what=${2:-all}
MAKE=${MAKE:-make}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
case $variant in
asan)
	san="-fsanitize=address,undefined -fno-omit-frame-pointer"
	rtlibs="-lasan,-lubsan"
	rt=$(gcc -print-file-name=libasan.so)
	;;
tsan)
	san="-fsanitize=thread -fno-omit-frame-pointer"
	rtlibs="-ltsan"
	rt=$(gcc -print-file-name=libtsan.so)
	;;
*)	echo "run.sh: unknown variant $variant" >&2; exit 2;;
esac
B=${SAN_BUILD:-build/$variant}
case $B in /*) ;; *) B=$(pwd)/$B;; esac
logdir=$B/san-logs
rm -rf "$logdir"; mkdir -p "$logdir"

# -O1 keeps stacks readable; CC carries the flags so that every link line gets them too. gcc does
# not link the runtime into a shared object: CC names it (libntbsock.so is linked with -z defs;
# -Wl options are ignored when compiling). CC and CFLAGS are exported: a test that runs make
# itself (test_cli: make install) builds with the same flags.
export CC="gcc $san -Wl,--push-state,--no-as-needed,$rtlibs,--pop-state"
export CFLAGS="-O1 -g"
units=$(ls tests/unit/test_*.c 2>/dev/null | sed "s#tests/unit/#$B/tests/#; s#\.c\$##")
helpers=$(ls tests/helpers/*.c 2>/dev/null | sed "s#tests/helpers/#$B/tests/#; s#\.c\$##")
echo "sanitize[$variant]: building into $B"
$MAKE --no-print-directory -j"$JOBS" BUILD="$B" \
	all $units $helpers || { echo "sanitize[$variant]: build failed"; exit 1; }

# Reports: halt on the first one (a test fails), and also written to $logdir so that reports
# from processes whose output a test swallows are still seen.
export ASAN_OPTIONS="log_path=$logdir/asan:log_exe_name=1:detect_leaks=1:fast_unwind_on_malloc=0:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="log_path=$logdir/ubsan:log_exe_name=1:print_stacktrace=1:halt_on_error=1"
# history_size=7: the older access of a race keeps its stack (the default lost it for a test
# thread's window writes, whose suppression, tsan.supp, names a frame of that stack)
export TSAN_OPTIONS="log_path=$logdir/tsan:log_exe_name=1:halt_on_error=0:second_deadlock_stack=1:report_signal_unsafe=0:history_size=7"
# The transport's stream tests hand shm link files between threads of one process: fine.
# liburcu-bp is not instrumented: suppress what it does internally.
# Transport tests (test_tp_proc, test_tp_fork) fork after the link helper thread started and
# the child starts its own: die_after_fork=0 lets TSan go on there instead of killing the child.
if [ "$variant" = tsan ]; then
	TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$(pwd)/tests/sanitize/tsan.supp:die_after_fork=0"
fi

rc=0
if [ "$what" != integration ]; then
	sh tests/run_unit.sh $units || rc=1
fi

if [ "$what" != unit ]; then
	# Integration tests run unmodified programs: they are not instrumented, so the runtime is
	# preloaded first (PL_PRELOAD_FIRST, read by tests/integration/lib.sh) and leaks of the
	# host programs are not ours to report.
	# Programs started by `ntbsock run` get the library first and the runtime as its dependency:
	# verify_asan_link_order=0 lets them run (the library's stack and global checks still work;
	# heap checks need PL_PRELOAD_FIRST). String checks stay off in uninstrumented programs.
	# TSan's runtime goes right after the library instead (PL_RT_AFTER_LIB): its interceptors
	# of blocking calls (poll, ppoll, select, pselect, epoll_wait, epoll_pwait, ...) run the
	# call they wrap with thr->ignore_interceptors raised (BlockingCall in
	# tsan_interceptors_posix.cpp), so that every mutex and atomic inside it is invisible to
	# TSan while plain loads and stores are still checked. With the runtime first, our poll and
	# epoll wrappers run inside those interceptors, and every field they touch under a lock
	# "races" with the helper thread that takes the same lock: hundreds of false reports. With
	# the library first, our wrappers run as ordinary instrumented code (real races in them are
	# still found) and call the runtime's interceptor for the kernel part. The runtime still
	# precedes libc, so it still intercepts the program's and the library's calls.
	# The runtime comes with a swift_demangle stub (tests/sanitize/swift_demangle_stub.c, built
	# without a sanitizer): without it curl and wget hang in setlocale() with the runtime alone.
	stub=$B/swift_demangle_stub.so
	gcc -O2 -fPIC -shared -o "$stub" tests/sanitize/swift_demangle_stub.c ||
		{ echo "sanitize[$variant]: cannot build $stub"; exit 1; }
	ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0:verify_asan_link_order=0:strict_string_checks=0" \
	PL_PRELOAD_FIRST="$rt:$stub" PL_RT_AFTER_LIB=$([ "$variant" = tsan ] && echo 1 || echo 0) \
	BUILD="$B" sh tests/run_integration.sh || rc=1
fi

n=$(ls "$logdir" | wc -l)
if [ "$n" -gt 0 ]; then
	echo "sanitize[$variant]: $n report file(s) in $logdir:"
	for f in "$logdir"/*; do
		echo "=== $f"; head -n 60 "$f"
	done
	rc=1
else
	echo "sanitize[$variant]: no sanitizer reports"
fi
[ $rc -eq 0 ] && echo "sanitize[$variant]: PASS" || echo "sanitize[$variant]: FAIL"
exit $rc
