#!/bin/sh
# SPDX-License-Identifier: MIT
# The side that closes first keeps the TIME_WAIT, as without the library. The client closes
# first, and its TCP socket's close is held back 5 ms after the library's NTB close (strace
# delays its close_range system call; Python's os.closerange() uses it); the server closes as
# soon as it reads the end of the stream. Its port must then hold no TIME_WAIT: a server
# restarted there without SO_REUSEADDR binds again (sockperf's did not, ~1 run in 8 of
# test_pl_sockperf, before close() waited for the peer's FIN: preload/pl_sock.c).
. "$(dirname "$0")/lib.sh"
pl_need strace ss python3
# (strace must be able to trace and delay close_range: ptrace allowed, strace >= 5.3, Linux >= 5.9)
strace -qq -o /dev/null -e trace=close_range -e inject=close_range:delay_enter=1 \
	python3 -c 'import os; os.closerange(100, 101)' 2>/dev/null ||
	pl_skip "strace cannot delay close_range here"
pl_setup close-order
port=$(pl_port 1)
N=3

cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys
s = socket.socket()
s.bind(("127.0.0.2", int(sys.argv[1])))
s.listen(8)
for i in range(int(sys.argv[2])):
    c, _ = s.accept()
    n = 0
    while True:
        b = c.recv(4096)
        if not b:
            break
        n += len(b)
    c.close()
    print("got", n, flush=True)
s.close()
PY
cat >"$PL_TMP/cli.py" <<'PY'
import os, socket, sys
c = socket.create_connection(("127.0.0.2", int(sys.argv[1])))
c.sendall(b"x" * 1000)
fd = c.detach()
os.closerange(fd, fd + 1)
PY

pl_bg b python3 "$PL_TMP/srv.py" $port $N
srv=$PL_LAST
out=$PL_LAST_OUT
pl_wait_port 127.0.0.2 $port
for i in $(seq 1 $N); do
	pl_run a strace -f -qq -o "$PL_TMP/strace$i" -e trace=close_range \
		-e inject=close_range:delay_enter=5000 python3 "$PL_TMP/cli.py" $port ||
		pl_fail "client $i failed"
	grep -q 'close_range.*DELAYED' "$PL_TMP/strace$i" || pl_fail "client $i: no delayed close_range"
done
wait $srv || pl_fail "server failed: $(cat "$out")"
[ "$(grep -c '^got 1000$' "$out")" -eq $N ] || pl_fail "server read: $(cat "$out")"
[ "$(pl_count_log a ': ntb (link')" -ge $N ] || pl_fail "not over ntb"
tw_srv=$(ss -Htan state time-wait "( sport = :$port )" | wc -l)
tw_cli=$(ss -Htan state time-wait "( dport = :$port )" | wc -l)
echo "TIME_WAIT sockets: $tw_srv on the server's port, $tw_cli on the client's side"
[ "$tw_srv" -eq 0 ] || pl_fail "the server, which closed second, holds $tw_srv TIME_WAIT socket(s)"
python3 -c 'import socket, sys; s = socket.socket(); s.bind(("127.0.0.2", int(sys.argv[1]))); s.listen(1)' \
	$port || pl_fail "the server's port does not bind again without SO_REUSEADDR"
echo "close order: ok"
