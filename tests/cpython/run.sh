#!/bin/sh
# SPDX-License-Identifier: MIT
# CPython's own socket test suites, written by others, run their clients and servers in one
# process over 127.0.0.1: run each without ntbsock and then under `ntbsock run -c
# conf/examples/loopback.conf` (every TCP port to 127.0.0.1 over a loopback link). Both runs
# must give the same result (SUCCESS, the same number of tests run, the same tests skipped), and the
# library's log must show the suite's connections carried by the link: at least MIN_NTB of
# them ("ntb (link lo" lines at log level info).
#
#   BUILD=build sh tests/cpython/run.sh     (make check-cpython)
#   PYTHON=python3 (default), CPY_KEEP=1 keeps the logs in $TMPDIR.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD;; esac
PYTHON=${PYTHON:-python3}
CONF=$ROOT/conf/examples/loopback.conf
NTBSOCK=$BUILD/ntbsock
TMP=$(mktemp -d /tmp/ntbsock-cpython.XXXXXX) || exit 1
trap '[ "${CPY_KEEP:-0}" = 1 ] && echo "kept $TMP" >&2 || rm -rf "$TMP"' EXIT
fail=0

[ -x "$NTBSOCK" ] || { echo "check-cpython: $NTBSOCK not built" >&2; exit 1; }
if ! "$PYTHON" -c 'import test.support, test.test_socket, test.test_asyncio' 2>/dev/null; then
	echo "check-cpython: $PYTHON has no test suite (Debian 12: libpython3.11-testsuite, make deps)" >&2
	exit 1
fi
# The suites use ports the kernel picks; the link file is the example config's own.
link=$(sed -n 's/^ *path = "\(.*\)";.*/\1/p' "$CONF" | head -n 1)

# summary FILE: "RESULT run=N skipped=M" from a verbose `python3 -m test -v` output (the
# form every 3.x prints: "Tests result: X", unittest's "Ran N tests" and "... skipped" lines);
# the skipped tests' names go to FILE.skips.
summary() {
	res=$(sed -n 's/^\(== \)\{0,1\}Tests result: \([A-Z_]*\).*/\2/p' "$1" | tail -n 1)
	run=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }')
	grep -E '^test[^ ]* \(.*\) \.\.\. skipped' "$1" | sed 's/ \.\.\. skipped.*//' | sort >"$1.skips"
	echo "${res:-NONE} run=$run skipped=$(wc -l <"$1.skips")"
}

# suite NAME MIN_NTB ARGS...: both runs, compared.
suite() {
	name=$1 min=$2
	shift 2
	t0=$(date +%s)
	(cd "$TMP" && timeout 900 "$PYTHON" -m test -v "$@") >"$TMP/$name.tcp.out" 2>&1
	t1=$(date +%s)
	rm -f "$link" "$link".side0 "$link".side1
	(cd "$TMP" && NTBSOCK_LOG=info NTBSOCK_LOG_FILE="$TMP/$name.ntb.log" \
		timeout 900 "$NTBSOCK" run -c "$CONF" -- "$PYTHON" -m test -v "$@") \
		>"$TMP/$name.ntb.out" 2>&1
	t2=$(date +%s)
	rm -f "$link" "$link".side0 "$link".side1 "$link".stat-tcp
	without=$(summary "$TMP/$name.tcp.out")
	with=$(summary "$TMP/$name.ntb.out")
	ntb=$(grep -c 'ntb (link lo' "$TMP/$name.ntb.log" 2>/dev/null)
	tcp=$(grep -c ': tcp (' "$TMP/$name.ntb.log" 2>/dev/null)
	echo "$name: without ntbsock: $without ($((t1 - t0)) s)"
	echo "$name: with ntbsock:    $with ($((t2 - t1)) s); connection ends (a client's and a server's each) over the link: ${ntb:-0}, over kernel TCP: ${tcp:-0}"
	if [ "$tcp" -gt 0 ] 2>/dev/null; then
		sed -n 's/.*: tcp (\(.*\))$/\1/p' "$TMP/$name.ntb.log" | sed 's/, accepted on fd [0-9]*//' |
			sort | uniq -c | sed 's/^/    tcp: /'
	fi
	case $without in SUCCESS*) ;; *)
		echo "FAIL: $name fails without ntbsock: the machine's suite is broken"; tail -n 20 "$TMP/$name.tcp.out"
		fail=1; return;;
	esac
	if [ "$with" != "$without" ] || ! cmp -s "$TMP/$name.tcp.out.skips" "$TMP/$name.ntb.out.skips"; then
		echo "FAIL: $name differs under ntbsock"; grep -E '^(FAIL|ERROR):' "$TMP/$name.ntb.out" | head -n 20
		diff "$TMP/$name.tcp.out.skips" "$TMP/$name.ntb.out.skips" | head -n 20
		fail=1
	fi
	if [ "${ntb:-0}" -lt "$min" ]; then
		echo "FAIL: $name: only ${ntb:-0} connection ends over the link (expected at least $min)"
		fail=1
	fi
}

# All of test_socket but its VSOCK tests (whose stream test hangs without ntbsock in a VM
# with no vsock transport): the TCP groups over the link, every other family, socketpair and
# the options beside them through the library's wrappers to the kernel.
suite test_socket 300 -u network test_socket --ignore '*VSOCK*'
suite asyncio_selectors 150 test_asyncio.test_sock_lowlevel test_asyncio.test_streams \
	test_asyncio.test_sendfile test_selectors
# Servers and clients of the standard library over TCP (http, xmlrpc, ftp with its urgent
# ABOR, smtp, pop, imap, TLS, asyncio's start_tls): only 127.0.0.1, but their tests ask for the
# "network" resource; the few that would reach the internet skip alike in both runs here. And
# test_os, whose descriptor tests see the library's own descriptors if they sit among the
# program's (its test_closerange skipped twice before they were moved high).
suite servers 500 -u network test_socketserver test_httplib test_httpservers \
	test_urllib2_localnet test_xmlrpc test_ftplib test_smtplib test_poplib test_imaplib test_ssl \
	test_asyncio.test_sslproto test_asyncio.test_events test_os
[ $fail = 0 ] && echo "check-cpython: PASS" || echo "check-cpython: FAIL"
exit $fail
