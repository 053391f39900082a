#!/bin/sh
# SPDX-License-Identifier: MIT
# Failover of half-closed connections with a FIN in flight: the client sends 8 MiB and
# shuts its writing down while the server is not reading yet (the bytes and the FIN wait in the
# server's rings), then `ntbsock link down`; the server then reads every byte and the end of
# file (over TCP now), answers with 32 MiB and closes; the client reads them all and EOF.
# Also SO_RCVTIMEO on the client across the move: a read that times out before the answer
# still times out (EAGAIN) once on TCP.
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup failover-half
port=$(pl_port 16)
N="$BUILD/ntbsock"
cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept()
time.sleep(1.5)                      # the client's bytes and FIN wait; the link goes down
got = bytearray()
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
c = socket.create_connection(("127.0.0.2", int(sys.argv[1])), source_address=("127.0.0.1", 0))
c.sendall(bytes((i * 13) % 251 for i in range(8 << 20)))
c.shutdown(socket.SHUT_WR)           # the FIN follows the bytes into the server's rings
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
env $(pl_env b) python3 "$PL_TMP/srv.py" $port >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
env $(pl_env a) timeout 60 python3 "$PL_TMP/cli.py" $port >"$PL_TMP/cli.out" 2>&1 &
C=$!; PL_PIDS="$PL_PIDS $C"
sleep 0.8
pl_assert_log a ': ntb (link'
"$N" link down ab -c "$PL_TMP/a.conf" >/dev/null || pl_fail "ntbsock link down failed"
wait $C || pl_fail "client failed: $(cat "$PL_TMP/cli.out")"
wait $S || pl_fail "server failed: $(cat "$PL_TMP/srv.out")"
cat "$PL_TMP/srv.out" "$PL_TMP/cli.out"
grep -q 'SERVER got 8388608 ok' "$PL_TMP/srv.out" || pl_fail "the server did not get the 8 MiB and EOF"
grep -q 'CLIENT got 33554432 ok' "$PL_TMP/cli.out" || pl_fail "the client did not get the 32 MiB and EOF"
grep -q 'timeouts [1-9]' "$PL_TMP/cli.out" || pl_fail "SO_RCVTIMEO did not fire while waiting"
grep -q 'tcp (failed over: ' "$PL_TMP/a.log" || pl_fail "the client's connection did not fail over"
grep -q 'tcp (failed over: ' "$PL_TMP/b.log" || pl_fail "the server's connection did not fail over"
echo "half-closed connection with a FIN in flight: every byte and both EOFs after the failover: ok"
