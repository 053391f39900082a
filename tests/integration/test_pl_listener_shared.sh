#!/bin/sh
# SPDX-License-Identifier: MIT
# A listener shared by fork (a pre-fork server): one process sets SO_RCVTIMEO on it after the
# fork, the other accepts. The kernel's accepted socket inherits the listener's options as they
# are then, so a read on it times out (EAGAIN); over ntb the accepted connection must honour the
# same timeout, although the accepting process never set it. Kernel TCP first, then ntb.
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup listener-shared
port=$(pl_port 31)
cat >"$PL_TMP/srv.py" <<'PY'
import os, socket, struct, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.2", int(sys.argv[1]))); l.listen(4)
r, w = os.pipe()
pid = os.fork()
if pid == 0:                      # the other holder sets the option on the shared listener
    l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 300000))
    os.write(w, b"x"); time.sleep(30); os._exit(0)
os.read(r, 1)
print("ready", flush=True)
while True:                       # (the listener's timeout applies to accept() too)
    try:
        c, _ = l.accept()
        break
    except (BlockingIOError, socket.timeout, TimeoutError):
        pass
t0 = time.monotonic()
try:
    b = c.recv(10)
    print("READ", len(b), flush=True)
except (BlockingIOError, socket.timeout, TimeoutError):
    print("TIMEOUT %.2f" % (time.monotonic() - t0), flush=True)
os.kill(pid, 9)
PY
cat >"$PL_TMP/cli.py" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.2", int(sys.argv[1])), source_address=("127.0.0.1", 0))
time.sleep(3)
PY
run() {
	p=$1; envs=$2; enva=$3
	env $envs timeout 20 python3 "$PL_TMP/srv.py" $p >"$PL_TMP/srv.$p.out" 2>&1 &
	S=$!; PL_PIDS="$PL_PIDS $S"
	pl_wait_text "$PL_TMP/srv.$p.out" ready 20
	# (the fork's child joins the link's side: a client connecting at that moment may find
	# host B's side not yet up again and go tcp; seen under a sanitizer's runtime)
	sleep $((PL_SLOW))
	env $enva timeout 20 python3 "$PL_TMP/cli.py" $p >/dev/null 2>&1 &
	C=$!; PL_PIDS="$PL_PIDS $C"
	wait $S
	wait $C 2>/dev/null
	cat "$PL_TMP/srv.$p.out"
}
out=$(run $port "NTBSOCK_UNUSED=1" "NTBSOCK_UNUSED=1")
echo "kernel TCP: $out"
echo "$out" | grep -q '^TIMEOUT 0\.[2-9]' || pl_fail "kernel TCP itself did not time out the read: the test is wrong"
out=$(run $((port + 1)) "$(pl_env b)" "$(pl_env a)")
echo "ntb: $out"
pl_assert_log b ': ntb (link'
echo "$out" | grep -q '^TIMEOUT 0\.[2-9]' ||
	pl_fail "over ntb the accepted connection did not take the option another holder of the listener set ($out)"
echo "a listener's options set by another process after a fork reach its accepted ntb connections: ok"
