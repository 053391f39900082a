#!/bin/sh
# SPDX-License-Identifier: MIT
# Failover of a half-closed connection with a FIN in flight: the client sends 8 MiB and shuts
# its writing down; the server reads all but the last 4 KiB and stops (those bytes and the FIN
# wait in its rings); then `ntbsock link down`; the server reads the rest and the end of file
# (over TCP now), answers with 32 MiB and closes; the client reads them all and EOF.
# Also SO_RCVTIMEO on the client across the move: a read that times out before the answer
# still times out (EAGAIN) once on TCP.
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup failover-half
port=$(pl_port 16)
N="$BUILD/ntbsock"
cat >"$PL_TMP/srv.py" <<'PY'
import os, socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept()
got = bytearray()
head = (8 << 20) - 4096              # all but the last 4 KiB: the client's send() completes
while len(got) < head:
    x = c.recv(min(1 << 16, head - len(got)))
    if not x:
        break
    got += x
for _ in range(6000):                # the last bytes and the FIN wait in our rings; link down
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.01)
while True:
    x = c.recv(1 << 16)
    if not x:
        break
    got += x
ok = len(got) == 8 << 20 and got == bytes((i * 13) % 251 for i in range(8 << 20))
print("SERVER got", len(got), "ok" if ok else "bad", flush=True)
time.sleep(0.5)                      # the client's read times out meanwhile (SO_RCVTIMEO)
c.sendall(bytes((i * 7) % 253 for i in range(32 << 20)))
c.close()
PY
cat >"$PL_TMP/cli.py" <<'PY'
import socket, struct, sys
data = bytes((i * 13) % 251 for i in range(8 << 20))
c = socket.create_connection(("127.0.0.2", int(sys.argv[1])), source_address=("127.0.0.1", 0))
c.sendall(data)
c.shutdown(socket.SHUT_WR)           # the FIN follows the bytes into the server's rings
print("SENT", flush=True)
c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 1, 0))
timeouts = 0
got = bytearray()
while True:
    try:
        x = c.recv(1 << 16)
    except (BlockingIOError, socket.timeout):
        timeouts += 1                # 1 s without the answer: as the kernel would
        continue
    if not x:
        break
    got += x
ok = got == bytes((i * 7) % 253 for i in range(32 << 20))
print("CLIENT got", len(got), "ok" if ok else "bad", "timeouts", timeouts, flush=True)
PY
env $(pl_env b) python3 "$PL_TMP/srv.py" $port "$PL_TMP/down" >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
env $(pl_env a) timeout $((60 * PL_SLOW)) python3 "$PL_TMP/cli.py" $port >"$PL_TMP/cli.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
# The client's last 4 KiB and its FIN are in the server's rings (the server waits for "down").
pl_wait_text "$PL_TMP/cli.out" SENT 20
pl_assert_log a ': ntb (link'
"$N" link down ab -c "$PL_TMP/a.conf" >/dev/null || pl_fail "ntbsock link down failed"
touch "$PL_TMP/down"
wait $C || pl_fail "client failed: $(cat "$PL_TMP/cli.out")"
wait $S || pl_fail "server failed: $(cat "$PL_TMP/srv.out")"
cat "$PL_TMP/srv.out" "$PL_TMP/cli.out"
grep -q 'SERVER got 8388608 ok' "$PL_TMP/srv.out" || pl_fail "the server did not get the 8 MiB and EOF"
grep -q 'CLIENT got 33554432 ok' "$PL_TMP/cli.out" || pl_fail "the client did not get the 32 MiB and EOF"
grep -q 'timeouts [1-9]' "$PL_TMP/cli.out" || pl_fail "SO_RCVTIMEO did not fire while waiting"
grep -q 'tcp (failed over: ' "$PL_TMP/a.log" || pl_fail "the client's connection did not fail over"
grep -q 'tcp (failed over: ' "$PL_TMP/b.log" || pl_fail "the server's connection did not fail over"
echo "half-closed connection with a FIN in flight: every byte and both EOFs after the failover: ok"
