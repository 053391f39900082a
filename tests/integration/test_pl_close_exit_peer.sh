#!/bin/sh
# SPDX-License-Identifier: MIT
# A client closes and exits at once, the only process of its host using the link, while the
# server still answers (its reply arrives after the client's close): as over kernel TCP (the
# closed socket answers the late data with a reset, or times out in FIN_WAIT2 without holding
# the server), the server's connection must end soon after it closes too, not linger until
# peer_timeout_ms (30 s): the exiting library releases its closed connections that still
# linger (preload/pl_init.c: pl_dtor(), tp_exec_release_closed()), telling the peer RST or GONE.
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup close-exit-peer
N=3
port=$(pl_port 1)
cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1])))
s.listen(8)
print("ready", flush=True)
for i in range(int(sys.argv[2])):
    c, _ = s.accept()
    if c.recv(1) != b"q":
        sys.exit("no request")
    time.sleep(0.3)  # the client closed and exited meanwhile
    try:
        c.sendall(b"x" * 65536)
    except OSError as e:
        print("send:", e, flush=True)
    c.close()
    print("closed", i, flush=True)
PY
cat >"$PL_TMP/cli.py" <<'PY'
import socket, sys
c = socket.create_connection(("127.0.0.2", int(sys.argv[1])))
c.sendall(b"q")
c.close()
PY
env $(pl_env b) python3 "$PL_TMP/srv.py" $port $N >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
for k in $(seq 1 $N); do
	pl_run a python3 "$PL_TMP/cli.py" $port || pl_fail "client $k failed"
	pl_wait_text "$PL_TMP/srv.out" "closed $((k - 1))"
	i=0
	while :; do
		b=$("$BUILD/ntbsock" stat -c "$PL_TMP/b.conf" --json 2>&1)
		case $b in '{"connections":[],'*) break;; esac
		[ $i -lt 50 ] || pl_fail "round $k: the server's connection still in its host's table 5 s after both closed: $b"
		sleep 0.1; i=$((i + 1))
	done
	echo "round $k: server's connection gone $((i * 100)) ms after its close"
done
[ "$(pl_count_log a ': ntb (link')" -ge $N ] || pl_fail "not over ntb"
echo "close and exit while the peer still answers: the peer's connection ends at once: ok"
