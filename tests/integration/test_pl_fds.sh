#!/bin/sh
# SPDX-License-Identifier: MIT
# The library's own descriptors (link and host-table files, its event fd) stay out of the
# program's way (util/fdpark.h):
#  1. a program's descriptors are numbered as without ntbsock: the same transcript of numbers
#     (a listener, connections made and accepted, a file opened, two dups that must be
#     consecutive, and a closed connection's number free at once, also where the library keeps
#     its socket a while: bytes unacknowledged, the peer closed first) over ntb as over kernel
#     TCP (the library's duplicates of sockets go high too: a helper's duplicate made just after
#     the program closed a descriptor took that number, which CPython's test_ssl
#     test_makefile_close caught in make check-cpython; this test does not force that race);
#  2. a daemon-like close of every descriptor it does not know (os.closerange around its
#     connection, then os.close() over every number up to 1023) leaves the library working: the
#     kept connection still echoes 1 MB exact over ntb, a new connection is ntb and echoes, and
#     a file the program opened afterwards (at a number the library once had) holds exactly
#     what the program wrote into it.
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup fds
port=$(pl_port 1)

srv=$(pl_echo_server)
# numbers.py DST PORT LPORT: the numbers the kernel hands out, one line each
cat >"$PL_TMP/numbers.py" <<'EOF'
import os, socket, sys
dst, port, lport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[4], lport))
l.listen(4)
print("listener", l.fileno())
c1 = socket.create_connection((dst, port))
print("connection", c1.fileno())
c1.sendall(b"x" * 1000)
got = b""
while len(got) < 1000:
    got += c1.recv(65536)
c2 = socket.create_connection((dst, port))
print("connection", c2.fileno())
f = os.open("/dev/null", os.O_RDONLY)
print("file", f)
a = os.dup(f)
b = os.dup(a)
print("dups consecutive", b == a + 1)
c1.close()
print("reused", socket.create_connection((dst, port)).fileno())
# a closed descriptor is closed at once, also where the library keeps the connection's socket
# a while (bytes unacknowledged; the peer closed first): its duplicate takes no program number
def closed(fd):
    try:
        os.fstat(fd)
        return False
    except OSError as e:
        return e.errno == 9
c3 = socket.create_connection((dst, port))
fd = c3.fileno()
c3.sendall(b"y" * 200000)
c3.close()
print("closed with bytes unacknowledged: number free", closed(fd))
s4 = socket.create_connection((dst, int(sys.argv[5])))
fd = s4.fileno()
s4.recv(1)  # (the server closes at once: end of stream)
s4.close()
print("closed after the peer: number free", closed(fd))
EOF
cat >"$PL_TMP/closer.py" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
while True:
    c, _ = s.accept()
    c.close()
EOF
pl_bg plain python3 "$srv" 127.0.0.1 $port
pl_bg plain python3 "$PL_TMP/closer.py" 127.0.0.1 $((port + 2))
pl_wait_port 127.0.0.1 $port
pl_wait_port 127.0.0.1 $((port + 2))
timeout 30 python3 "$PL_TMP/numbers.py" 127.0.0.1 $port $((port + 1)) 127.0.0.1 $((port + 2)) >"$PL_TMP/n-plain.out" 2>&1 ||
	{ cat "$PL_TMP/n-plain.out"; pl_fail "numbers fail on kernel TCP"; }
pl_bg b python3 "$srv" 127.0.0.2 $port
pl_bg b python3 "$PL_TMP/closer.py" 127.0.0.2 $((port + 2))
pl_wait_port 127.0.0.2 $port
pl_wait_port 127.0.0.2 $((port + 2))
pl_run a python3 "$PL_TMP/numbers.py" 127.0.0.2 $port $((port + 1)) 127.0.0.1 $((port + 2)) >"$PL_TMP/n-ntb.out" 2>&1 ||
	{ cat "$PL_TMP/n-ntb.out"; pl_fail "numbers fail over ntb"; }
[ "$(pl_count_log a "127.0.0.2:$port: ntb (link")" -eq 4 ] || pl_fail "case 1: not 4 ntb connections"
[ "$(pl_count_log a "127.0.0.2:$((port + 2)): ntb (link")" -eq 1 ] || pl_fail "case 1: closing peer not ntb"
cat "$PL_TMP/n-ntb.out"
diff -u "$PL_TMP/n-plain.out" "$PL_TMP/n-ntb.out" ||
	pl_fail "case 1: descriptor numbers over ntb differ from kernel TCP's (- kernel, + ntb)"

# 2. a daemon's close of everything it does not know
cat >"$PL_TMP/daemon.py" <<'EOF'
import os, select, socket, sys, time
dst, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = os.urandom(1 << 20)
def echo(s):
    # (select() before each read: the library's waits, its event fd among them)
    s.sendall(data[:len(data) // 2])
    got = b""
    while len(got) < len(data) // 2:
        select.select([s], [], [], 5)
        got += s.recv(1 << 16)
    s.sendall(data[len(data) // 2:])
    while len(got) < len(data):
        select.select([s], [], [], 5)
        got += s.recv(1 << 16)
    return got == data
s = socket.create_connection((dst, port))
assert echo(s)
select.select([s], [], [], 0.3) # (nothing comes: a wait that sleeps)
keep = s.fileno()
os.closerange(3, keep)
os.closerange(keep + 1, 1024)
for fd in range(3, 1024):
    if fd != keep:
        try:
            os.close(fd)
        except OSError:
            pass
print("kept connection echoes", echo(s))
fds = [os.open(path + str(i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) for i in range(8)]
for i, fd in enumerate(fds):
    os.write(fd, b"file %d\n" % i)
select.select([s], [], [], 0.3) # (the library's timers and waits meanwhile)
t = socket.create_connection((dst, port))
print("new connection echoes", echo(t), echo(s))
t.close()
s.close()
for fd in fds:
    os.close(fd)
print("files exact", all(open(path + str(i), "rb").read() == b"file %d\n" % i for i in range(8)))
EOF
pl_run a python3 "$PL_TMP/daemon.py" 127.0.0.2 $port "$PL_TMP/f" >"$PL_TMP/d.out" 2>&1 ||
	{ cat "$PL_TMP/d.out"; pl_fail "case 2: the daemon-like client failed"; }
cat "$PL_TMP/d.out"
grep -q "^kept connection echoes True$" "$PL_TMP/d.out" &&
	grep -q "^new connection echoes True True$" "$PL_TMP/d.out" &&
	grep -q "^files exact True$" "$PL_TMP/d.out" || pl_fail "case 2: $(cat "$PL_TMP/d.out")"
[ "$(pl_count_log a "127.0.0.2:$port: ntb (link")" -eq 6 ] ||
	pl_fail "case 2: expected both of its connections ntb (6 in all on A)"
pl_refute_log a "failed over"
echo "PASS"
