#!/bin/sh
# SPDX-License-Identifier: MIT
# The library initialises at the first call that may make an NTB socket, not at every process's
# start: a program that makes none (/bin/true, a shell that only execs another such program)
# never parses the config nor writes a log line (an AF_UNIX socket neither); one that makes a
# TCP socket does, once, and its connection is ntb; a process started with connections handed over across exec (or socket
# activation) initialises at once (the hand-over itself: test_pl_exec).
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup lazy-init
log=$PL_TMP/lazy.log
run() { env NTBSOCK_CONF="$PL_TMP/a.conf" NTBSOCK_LOG=debug NTBSOCK_LOG_FILE="$log" LD_PRELOAD="$PL_LIB" "$@"; }

: >"$log"
run /bin/true || pl_fail "/bin/true under the library failed"
run sh -c 'exec /bin/true' || pl_fail "sh -c 'exec /bin/true' under the library failed"
run sh -c 'echo x | cat >/dev/null; ls / >/dev/null' || pl_fail "a pipeline under the library failed"
# an AF_UNIX socket (a name service's or a log's) is no NTB socket either (the C module: the
# socket module's imports make an epoll set, which does initialise)
run python3 -c 'import _socket; _socket.socket(_socket.AF_UNIX).close()' ||
	pl_fail "an AF_UNIX socket under the library failed"
[ ! -s "$log" ] || { cat "$log"; pl_fail "programs that make no socket initialised the library"; }
echo "no socket, no initialisation: ok"

# a socket: initialised once (its config line), and a connection to host B is ntb
p=$(pl_port 1)
pl_bg b "$BUILD/tests/pl_echo" et 127.0.0.2 $p
pl_wait_port 127.0.0.2 $p
run python3 -c '
import socket
s = socket.create_connection(("127.0.0.2", '$p'), source_address=("127.0.0.1", 0))
s.sendall(b"x" * 1000); got = b""
while len(got) < 1000:
    got += s.recv(4096)
assert got == b"x" * 1000
s.close()' || pl_fail "echo over the library failed"
cat "$log"
n=$(grep -c ': config .*: host A' "$log")
[ "$n" -eq 1 ] || pl_fail "the config was read $n times, not once"
grep -q ": ntb (link ab" "$log" || pl_fail "the connection was not ntb"
echo "first socket: initialised once, connection ntb: ok"

# started with a socket-activation listener of its own: initialised at once, before any call
: >"$log"
run env LISTEN_FDS=1 python3 -c '
import os, sys
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.executable, [sys.executable, "-c", "pass"])' || pl_fail "the activated program failed"
grep -q ': config .*: host A' "$log" || pl_fail "a process started with LISTEN_FDS/LISTEN_PID for it did not initialise at once"
echo "socket activation: initialised at start: ok"
echo "lazy initialisation: ok"
