# SPDX-License-Identifier: MIT
# Shared helpers for integration tests (sourced): demo hosts A (127.0.0.1) and B (127.0.0.2)
# with a private link file, the kernel's loopback byte counters, port waits, cleanup by pid.
#
#   . "$(dirname "$0")/lib.sh"; pl_setup NAME
#   pl_bg a iperf3 -s ...        # start under the library as host A; pid recorded for cleanup
#   pl_run b iperf3 -c ...       # run in the foreground as host B
#   pl_wait_port 127.0.0.2 5201  # until something listens there
#   before=$(pl_lo_bytes) ... pl_assert_lo_below $before BYTES
#   pl_assert_log a 'ntb (link'  # host A's log (NTBSOCK_LOG=info) has that text

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD;; esac
PL_LIB=$BUILD/libntbsock.so
# PL_PRELOAD_FIRST: a sanitizer runtime preloaded with ours (make check-asan / check-tsan): ahead
# of the library, or right after it when PL_RT_AFTER_LIB=1 (TSan: its poll/select/epoll_wait
# interceptors ignore every synchronisation made inside the call they wrap, so our wrappers must
# run before them, not inside them; see tests/sanitize/run.sh).
PL_PIDS=""
PL_TMP=""
PL_LINK=""

pl_skip() { echo "SKIP: $*"; exit 77; }
pl_fail() {
	echo "FAIL: $*"
	for f in "$PL_TMP"/*.log; do
		[ -s "$f" ] || continue
		echo "--- $f (last 30 lines)"; tail -n 30 "$f"
	done
	exit 1
}
pl_need() { for c in "$@"; do command -v "$c" >/dev/null 2>&1 || pl_skip "$c not installed"; done; }

pl_cleanup() {
	for p in $PL_PIDS; do kill "$p" 2>/dev/null; done
	sleep 0.2
	for p in $PL_PIDS; do kill -9 "$p" 2>/dev/null; done
	[ -n "$PL_LINK" ] && rm -f "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1 "$PL_LINK".stat-tcp \
		"$PL_LINK".admin-down
	# PL_KEEP_TMP=1 keeps the test's directory (its logs and outputs) for a look afterwards
	if [ -n "$PL_TMP" ] && [ "${PL_KEEP_TMP:-0}" = 1 ]; then
		echo "kept $PL_TMP" >&2
	elif [ -n "$PL_TMP" ]; then
		rm -rf "$PL_TMP"
	fi
}

# pl_setup NAME: private dir, link file and configs a.conf / b.conf; cleanup on exit.
# The test re-runs itself in a private network namespace when it can (root): its loopback
# counters then count only its own traffic, and its ports cannot collide with other tests.
pl_setup() {
	[ -f "$PL_LIB" ] || pl_skip "$PL_LIB not built"
	if [ -z "$PL_NETNS" ] && [ "${PL_NO_NETNS:-0}" != 1 ] && unshare -n true 2>/dev/null; then
		exec unshare -n env PL_NETNS=1 sh "$0"
	fi
	if [ "$PL_NETNS" = 1 ]; then
		ip link set lo up || pl_fail "cannot bring lo up in the test's network namespace"
	else
		echo "note: no private network namespace: loopback counters are machine-wide"
	fi
	PL_TMP=$(mktemp -d "/tmp/ntbsock-test-$1-XXXXXX")
	PL_LINK=/dev/shm/ntbsock-test-$1-$$
	# The host-wide table of TCP fallbacks (`ntbsock stat`): private to the test.
	NTBSOCK_STAT_TCP=$PL_LINK.stat-tcp
	export NTBSOCK_STAT_TCP
	trap pl_cleanup EXIT
	trap 'exit 1' INT TERM
	for h in a b; do
		sed "s#/dev/shm/ntbsock-demo#$PL_LINK#" "$ROOT/conf/examples/demo-$h.conf" >"$PL_TMP/$h.conf"
		# 32 receive contexts (PL_CONTEXTS; "default" keeps the config's), so that tests can
		# exceed them with a few hundred connections; unless the demo sets tunables itself.
		[ "${PL_CONTEXTS:-32}" = default ] || grep -q '^tunables' "$PL_TMP/$h.conf" ||
			printf 'tunables = { contexts = %s; };\n' "${PL_CONTEXTS:-32}" >>"$PL_TMP/$h.conf"
	done
}

# pl_env HOST: the environment of a program of host HOST (a, b, or none = library, no config).
pl_preload() {
	if [ "${PL_RT_AFTER_LIB:-0}" = 1 ]; then
		echo "$PL_LIB${PL_PRELOAD_FIRST:+:$PL_PRELOAD_FIRST}"
	else
		echo "${PL_PRELOAD_FIRST:+$PL_PRELOAD_FIRST:}$PL_LIB"
	fi
}
pl_env() {
	case $1 in
	a|b) echo "NTBSOCK_CONF=$PL_TMP/$1.conf NTBSOCK_LOG=${PL_LOG_LEVEL:-info} NTBSOCK_LOG_FILE=$PL_TMP/$1.log LD_PRELOAD=$(pl_preload)";;
	none) echo "NTBSOCK_CONF= NTBSOCK_LOG=${PL_LOG_LEVEL:-info} NTBSOCK_LOG_FILE=$PL_TMP/none.log LD_PRELOAD=$(pl_preload)";;
	plain) echo "NTBSOCK_UNUSED=1";;
	esac
}

# pl_run HOST CMD...: run in the foreground (under `timeout` of PL_TIMEOUT seconds, default 120).
pl_run() {
	_pl_h=$1; shift
	env $(pl_env "$_pl_h") timeout "${PL_TIMEOUT:-$((120 * PL_SLOW))}" "$@"
}

# pl_bg HOST CMD...: start in the background, output to $PL_TMP/HOST-bg-N.out; sets PL_LAST
# (pid) and PL_LAST_OUT (that file).
pl_bg() {
	_pl_h=$1; shift
	_pl_n=$(echo $PL_PIDS | wc -w)
	PL_LAST_OUT=$PL_TMP/$_pl_h-bg-$_pl_n.out
	env $(pl_env "$_pl_h") timeout "${PL_TIMEOUT:-$((120 * PL_SLOW))}" "$@" >"$PL_LAST_OUT" 2>&1 &
	PL_LAST=$!
	PL_PIDS="$PL_PIDS $PL_LAST"
}

# pl_wait_port ADDR PORT [SECONDS]: wait until a TCP listener is on ADDR:PORT (SECONDS x PL_SLOW).
pl_wait_port() {
	i=0; max=$(( ${3:-10} * 10 * PL_SLOW ))
	while [ $i -lt $max ]; do
		ss -Hltn "sport = :$2" 2>/dev/null | grep -q "$1:$2" && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "sockets on port $2:"; ss -Hanp "( sport = :$2 or dport = :$2 )" 2>/dev/null | sed 's/^/  /'
	pl_fail "nothing listens on $1:$2"
}

# pl_wait_text FILE TEXT [SECONDS]: wait until FILE contains TEXT (SECONDS x PL_SLOW).
pl_wait_text() {
	i=0; max=$(( ${3:-10} * 10 * PL_SLOW ))
	while [ $i -lt $max ]; do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1; i=$((i + 1))
	done
	pl_fail "no '$2' in $1"
}

# PL_SLOW: how many times longer a wait may take: 8 under a sanitizer runtime (TSan runs our
# set-up paths 5-15 times slower, more so while other connections stream), else 1.
PL_SLOW=1
[ -n "${PL_PRELOAD_FIRST:-}" ] && PL_SLOW=8

# pl_wait_count LOG TEXT N [SECONDS]: wait until host LOG's log has at least N lines with TEXT,
# for SECONDS (default 10) times PL_SLOW; returns 1 (no failure) if it does not get there.
pl_wait_count() {
	end=$(( $(date +%s) + ${4:-10} * PL_SLOW ))
	while [ "$(pl_count_log "$1" "$2")" -lt "$3" ]; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.05
	done
}

# Bytes received + transmitted on lo so far.
pl_lo_bytes() { awk '/^ *lo:/ { sub(/.*lo:/, ""); split($0, f, " "); printf "%.0f\n", f[1] + f[9] }' /proc/net/dev; }

# pl_assert_lo_below BEFORE MAX: lo moved by fewer than MAX bytes since BEFORE.
pl_assert_lo_below() {
	d=$(( $(pl_lo_bytes) - $1 ))
	echo "lo moved $d bytes (limit $2)"
	[ "$d" -lt "$2" ] || pl_fail "kernel loopback carried $d bytes (limit $2): not over NTB"
}

# pl_assert_log HOST TEXT: HOST's log contains TEXT (fixed string).
pl_assert_log() { grep -qF -- "$2" "$PL_TMP/$1.log" 2>/dev/null || pl_fail "log $1 lacks '$2'"; }
pl_refute_log() { ! grep -qF -- "$2" "$PL_TMP/$1.log" 2>/dev/null || pl_fail "log $1 has '$2'"; }
pl_count_log() { _n=$(grep -cF -- "$2" "$PL_TMP/$1.log" 2>/dev/null); echo "${_n:-0}"; }

# A free-ish port per test run (tests may run while others use fixed ports).
pl_port() { echo $(( 20000 + ($$ * 7 + ${1:-0}) % 30000 )); }

# pl_echo_server: the path of a Python echo server (ADDR PORT: every connection echoed in a
# thread of its own until its end of stream), written into $PL_TMP once.
pl_echo_server() {
	[ -f "$PL_TMP/echo_srv.py" ] || cat >"$PL_TMP/echo_srv.py" <<'EOF'
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
def serve(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
	echo "$PL_TMP/echo_srv.py"
}

# pl_echo_client: the path of a Python echo client (ADDR PORT [BYTES, default 200000]: sends
# BYTES of a fixed pattern, shuts its sending side, reads to the end of stream, asserts that the
# echo is the same bytes, prints "ok BYTES"), written into $PL_TMP once. Other scripts there
# import its echo(ADDR, PORT, DATA): the bytes that came back.
pl_echo_client() {
	[ -f "$PL_TMP/echo_cli.py" ] || cat >"$PL_TMP/echo_cli.py" <<'EOF'
import socket, sys
def echo(addr, port, data):
    s = socket.create_connection((addr, port))
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = bytearray()
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    return bytes(got)
if __name__ == "__main__":
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
    data = bytes((i * 7 + 3) % 251 for i in range(n))
    got = echo(sys.argv[1], int(sys.argv[2]), data)
    assert got == data, "echo differs: %d bytes of %d" % (len(got), len(data))
    print("ok", len(got))
EOF
	echo "$PL_TMP/echo_cli.py"
}
