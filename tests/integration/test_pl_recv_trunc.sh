#!/bin/sh
# SPDX-License-Identifier: MIT
# recv() with MSG_TRUNC over NTB as over kernel TCP: the bytes discarded, the caller's buffer
# untouched, the count returned; with MSG_PEEK the count readable, nothing consumed; with
# MSG_WAITALL all of them; 0 at the end of the stream; EAGAIN on a non-blocking socket with
# nothing there (before: EOPNOTSUPP over NTB). The server's transcript, kernel TCP's first.
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup recv-trunc
port=$(pl_port 1)

cat >"$PL_TMP/srv.py" <<'EOF'
import fcntl, select, socket, struct, sys, termios, time
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2])))
l.listen(1)
a, _ = l.accept()
def inq(n):  # wait until N bytes are readable (FIONREAD)
    while struct.unpack("i", fcntl.ioctl(a, termios.FIONREAD, b"\0\0\0\0"))[0] < n:
        time.sleep(0.01)
inq(10)
buf = bytearray(b"." * 4)
print("peek|trunc", a.recv_into(buf, 4, socket.MSG_PEEK | socket.MSG_TRUNC), bytes(buf))
print("peek|trunc 100", a.recv_into(bytearray(100), 100, socket.MSG_PEEK | socket.MSG_TRUNC))
print("trunc", a.recv_into(buf, 4, socket.MSG_TRUNC), bytes(buf))
print("rest", a.recv(100))
a.setblocking(False)
try:
    print("trunc empty", a.recv_into(bytearray(4), 4, socket.MSG_TRUNC))
except BlockingIOError:
    print("trunc empty EAGAIN")
a.sendall(b"1")
n, big = 0, bytearray(200000)
while n < 300000:
    try:
        n += a.recv_into(big, 200000, socket.MSG_TRUNC)
    except BlockingIOError:
        select.select([a], [], [], 5)
print("discarded", n)
a.setblocking(True)
a.sendall(b"2")
print("after discard", a.recv(100))
a.sendall(b"3")
print("waitall trunc", a.recv_into(bytearray(100000), 100000, socket.MSG_TRUNC | socket.MSG_WAITALL))
print("eof trunc", a.recv_into(bytearray(4), 4, socket.MSG_TRUNC))
EOF
cat >"$PL_TMP/cli.py" <<'EOF'
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.sendall(b"abcdefghij")
assert c.recv(1) == b"1"
c.sendall(b"x" * 300000)
assert c.recv(1) == b"2"
c.sendall(b"tail")
assert c.recv(1) == b"3"  # (the 100 KB after the server read "tail": no read takes both)
c.sendall(b"y" * 100000)
c.close()
EOF
pl_bg plain python3 "$PL_TMP/srv.py" 127.0.0.1 $port
srv=$PL_LAST
pl_wait_port 127.0.0.1 $port
timeout 30 python3 "$PL_TMP/cli.py" 127.0.0.1 $port || pl_fail "client fails on kernel TCP"
wait $srv || { cat "$PL_LAST_OUT"; pl_fail "server fails on kernel TCP"; }
cp "$PL_LAST_OUT" "$PL_TMP/plain.out"
pl_bg b python3 "$PL_TMP/srv.py" 127.0.0.2 $port
srv=$PL_LAST
pl_wait_port 127.0.0.2 $port
pl_run a python3 "$PL_TMP/cli.py" 127.0.0.2 $port || pl_fail "client failed over ntb"
wait $srv || { cat "$PL_LAST_OUT"; pl_fail "server failed over ntb"; }
cp "$PL_LAST_OUT" "$PL_TMP/ntb.out"
pl_assert_log b "ntb (link"
pl_refute_log b "failed over"
cat "$PL_TMP/ntb.out"
diff -u "$PL_TMP/plain.out" "$PL_TMP/ntb.out" ||
	pl_fail "MSG_TRUNC over ntb differs from kernel TCP (- kernel, + ntb)"
echo "PASS"
