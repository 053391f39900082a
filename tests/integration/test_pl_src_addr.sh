#!/bin/sh
# SPDX-License-Identifier: MIT
# A connect() whose source address the kernel's route already makes this host's is not bound by
# the library (two system calls per set-up saved, and the program's socket keeps its options),
# and where the route gives another address the library binds the host's as before. (A
# process's first connections, before the link answered quickly, are bound with their port
# ahead of the connect whatever the route: only later ones show the choice.)
#  1. host A (127.0.0.1) to B (127.0.0.2): the loopback route's source is 127.0.0.1 = A's, so
#     the second socket is left unbound (IP_BIND_ADDRESS_NO_PORT not set on it) and the connection is
#     ntb with source 127.0.0.1;
#  2. host B to A: the route's source is 127.0.0.1, not B's; the library binds 127.0.0.2 and the
#     connection is ntb with that source;
#  3. the route changes under a running client (source 127.0.0.9, nobody's host address) after its
#     second connection taught it the route's choice: its next connect, still unbound from what
#     the process learned, finds a source that is not the host's and stays TCP with that reason,
#     every byte echoed; the one after binds again and is ntb;
#  4. a client bound to a port on the wildcard address: the kernel picks 127.0.0.1 as it
#     connects, and the connection is ntb from 127.0.0.1 and that port (before: tcp, "socket
#     bound to the wildcard address").
. "$(dirname "$0")/lib.sh"
pl_need python3 ip
pl_setup src-addr
[ "$PL_NETNS" = 1 ] || pl_skip "needs a network namespace of its own (the test changes a route)"
port=$(pl_port 1)

srv=$(pl_echo_server)
# cli.py DST PORT N [GATE]: N connections one after another, each: the socket's
# IP_BIND_ADDRESS_NO_PORT and source address after connect(), and 100 KB echoed byte for byte.
# With GATE, it waits for that file to exist before its connection number AT (GATE.ready says
# it got there).
cat >"$PL_TMP/cli.py" <<'EOF'
import os, socket, sys, time
IP_BIND_ADDRESS_NO_PORT = 24
dst, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gate = sys.argv[4] if len(sys.argv) > 4 else None
at = int(sys.argv[5]) if len(sys.argv) > 5 else 1
data = os.urandom(100000)
for i in range(n):
    if i == at and gate:
        while not os.path.exists(gate):
            time.sleep(0.01)
    s = socket.create_connection((dst, port))
    nop = s.getsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT)
    src = s.getsockname()[0]
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    print(i, "nobind" if nop == 0 else "bound", src, "ok" if got == data else "BAD", flush=True)
    if i == at - 1 and gate:
        open(gate + ".ready", "w").close()
EOF

# 1. A to B
pl_bg b python3 "$srv" 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
pl_run a python3 "$PL_TMP/cli.py" 127.0.0.2 $port 2 >"$PL_TMP/c1.out" 2>&1 || pl_fail "case 1: client failed: $(cat "$PL_TMP/c1.out")"
cat "$PL_TMP/c1.out"
grep -q '^0 [a-z]* 127.0.0.1 ok$' "$PL_TMP/c1.out" && grep -q '^1 nobind 127.0.0.1 ok$' "$PL_TMP/c1.out" ||
	pl_fail "case 1: expected the second connection unbound, both from 127.0.0.1 and echoed: $(cat "$PL_TMP/c1.out")"
[ "$(pl_count_log a ': ntb (link')" -eq 2 ] || pl_fail "case 1: expected 2 ntb connections on A"

# 2. B to A
pl_bg a python3 "$srv" 127.0.0.1 $((port + 1))
pl_wait_port 127.0.0.1 $((port + 1))
: >"$PL_TMP/b.log"
pl_run b python3 "$PL_TMP/cli.py" 127.0.0.1 $((port + 1)) 2 >"$PL_TMP/c2.out" 2>&1 || pl_fail "case 2: client failed: $(cat "$PL_TMP/c2.out")"
cat "$PL_TMP/c2.out"
grep -q '^0 [a-z]* 127.0.0.2 ok$' "$PL_TMP/c2.out" && grep -q '^1 bound 127.0.0.2 ok$' "$PL_TMP/c2.out" ||
	pl_fail "case 2: expected the second connection bound, both from 127.0.0.2 and echoed: $(cat "$PL_TMP/c2.out")"
[ "$(pl_count_log b ': ntb (link')" -eq 2 ] || pl_fail "case 2: expected 2 ntb connections on B"

# 3. the route changes under a running client of A
: >"$PL_TMP/a.log"
gate=$PL_TMP/gate
pl_bg a python3 "$PL_TMP/cli.py" 127.0.0.2 $port 4 "$gate" 2
cli=$PL_LAST
cli_out=$PL_LAST_OUT
i=0
while [ ! -e "$gate.ready" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$gate.ready" ] || pl_fail "case 3: the first two connections did not finish: $(cat "$cli_out")"
ip route replace local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.9 ||
	pl_fail "case 3: cannot change the loopback route"
touch "$gate"
wait $cli || pl_fail "case 3: client failed: $(cat "$cli_out")"
cat "$cli_out"
sed -n 1p "$cli_out" | grep -q '^0 [a-z]* 127.0.0.1 ok$' || pl_fail "case 3: first connection: $(sed -n 1p "$cli_out")"
sed -n 2p "$cli_out" | grep -q '^1 nobind 127.0.0.1 ok$' || pl_fail "case 3: second connection: $(sed -n 2p "$cli_out")"
sed -n 3p "$cli_out" | grep -q '^2 nobind 127.0.0.9 ok$' || pl_fail "case 3: third connection: $(sed -n 3p "$cli_out")"
sed -n 4p "$cli_out" | grep -q '^3 bound 127.0.0.1 ok$' || pl_fail "case 3: fourth connection: $(sed -n 4p "$cli_out")"
pl_assert_log a "tcp (route gives a source not this host's)"
[ "$(pl_count_log a ': ntb (link')" -eq 3 ] || pl_fail "case 3: expected 3 ntb connections on A (all but the third)"

# 4. a client socket bound to a port on the wildcard address (as an FTP client's data port):
#    the kernel picks the source 127.0.0.1 as it connects (the route is the kernel's again), the
#    connection is ntb with that source and the bound port, every byte echoed
ip route replace local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1 ||
	pl_fail "case 4: cannot put the loopback route back"
: >"$PL_TMP/a.log"
cport=$(pl_port 3)
cat >"$PL_TMP/wild.py" <<'EOF'
import os, socket, sys
data = os.urandom(100000)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[3])))
s.connect((sys.argv[1], int(sys.argv[2])))
s.sendall(data)
got = b""
while len(got) < len(data):
    b = s.recv(65536)
    if not b:
        break
    got += b
src = s.getsockname()
s.close()
print("wild", src[0], src[1], "ok" if got == data else "BAD", flush=True)
EOF
pl_run a python3 "$PL_TMP/wild.py" 127.0.0.2 $port $cport >"$PL_TMP/c4.out" 2>&1 ||
	pl_fail "case 4: client failed: $(cat "$PL_TMP/c4.out")"
cat "$PL_TMP/c4.out"
grep -q "^wild 127.0.0.1 $cport ok\$" "$PL_TMP/c4.out" ||
	pl_fail "case 4: expected source 127.0.0.1:$cport and the echo: $(cat "$PL_TMP/c4.out")"
[ "$(pl_count_log a "127.0.0.1:$cport -> 127.0.0.2:$port: ntb (link")" -eq 1 ] ||
	pl_fail "case 4: the wildcard-bound client was not ntb"
echo "PASS"
