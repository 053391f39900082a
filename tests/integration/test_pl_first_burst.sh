#!/bin/sh
# SPDX-License-Identifier: MIT
# A new process's first connections, made at once from several threads (a connection pool
# filled at start, as a JVM's or a Python thread pool's), all go ntb: the connects made while
# the first one waits for the link to come up wait with it, where before only the first waited
# and the others went over TCP for their whole life ("link down"). Each connection's bytes are
# echoed and compared; the kernel's loopback carries next to nothing.
. "$(dirname "$0")/lib.sh"
pl_need python3 ss
pl_setup first-burst
port=$(pl_port 1)
pl_bg b python3 "$(pl_echo_server)" 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
N=16
pl_echo_client >/dev/null # (its echo(), imported below)
cat >"$PL_TMP/burst.py" <<'PY'
import sys, threading
from echo_cli import echo
port, n = int(sys.argv[1]), int(sys.argv[2])
start = threading.Barrier(n)
bad = []
def one(k):
    data = bytes((i * 13 + k) % 251 for i in range(50000 + k * 1000))
    start.wait()
    got = echo("127.0.0.2", port, data)
    if got != data:
        bad.append((k, len(got), len(data)))
ts = [threading.Thread(target=one, args=(k,)) for k in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("bad", bad) if bad else print("ok", n)
PY
before=$(pl_lo_bytes)
out=$(pl_run a python3 "$PL_TMP/burst.py" $port $N 2>&1) || pl_fail "the clients failed: $out"
[ "$out" = "ok $N" ] || pl_fail "echo: $out"
ntb=$(pl_count_log a ': ntb (link ab')
tcp=$(pl_count_log a ': tcp (')
echo "$N connections at once from a new process: $ntb ntb, $tcp tcp"
grep -h ': tcp (' "$PL_TMP/a.log" | head -3
[ "$ntb" -eq $N ] && [ "$tcp" -eq 0 ] || pl_fail "$tcp of $N first connections went over TCP"
pl_assert_lo_below "$before" 300000
echo "PASS"
