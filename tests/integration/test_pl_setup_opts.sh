#!/bin/sh
# SPDX-License-Identifier: MIT
# Socket options set before connect() hold on the NTB connection it makes, as on a kernel TCP
# socket (connect() takes them from what the library saw since socket(), not from the kernel,
# unless something may have changed them): each client connects over ntb to a server that
# sends nothing, and its recv() must end as the kernel's would:
#  1. SO_RCVTIMEO set before connect(): EAGAIN after the timeout (not a hang);
#  2. the same through a dup of the descriptor: EAGAIN after the timeout;
#  3. setblocking(False) (FIONBIO) before connect(): EINPROGRESS, then EAGAIN at once;
#  4. SOCK_NONBLOCK at socket(): the same;
#  5. fcntl O_NONBLOCK before connect(), cleared again after: a blocking recv that returns
#     the server's byte once it comes (not EAGAIN);
#  6. a socket bound by the program before connect() (to the host address, port 0): ntb.
. "$(dirname "$0")/lib.sh"
pl_need python3 ss
pl_setup setup-opts
port=$(pl_port 1)

cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1])))
s.listen(16)
held = []
while True:
    c, _ = s.accept()
    b = c.recv(1)          # the client's request: b"w" asks for a byte after 0.3 s
    if b == b"w":
        time.sleep(0.3)
        c.sendall(b"y")
    held.append(c)         # else send nothing, keep it open
PY

cat >"$PL_TMP/cli.py" <<'PY'
import errno, fcntl, os, select, socket, struct, sys, time
port = int(sys.argv[1])
addr = ("127.0.0.2", port)

def timeout_case(via_dup):
    s = socket.socket()
    tv = struct.pack("ll", 0, 200000)
    if via_dup:
        d = socket.socket(fileno=os.dup(s.fileno()))
        d.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        d.close()
    else:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    s.connect(addr)
    s.send(b"n")
    t = time.monotonic()
    try:
        s.recv(1)
        return "recv returned data"
    except BlockingIOError:
        pass
    el = time.monotonic() - t
    s.close()
    return None if el >= 0.15 else "EAGAIN after %.3f s, before the 0.2 s timeout" % el

def nonblock_case(kind):
    if kind == "fionbio":
        s = socket.socket()
        s.setblocking(False)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    r = s.connect_ex(addr)
    if r not in (0, errno.EINPROGRESS):
        return "connect_ex %d" % r
    select.select([], [s], [], 5)
    s.send(b"n")
    t = time.monotonic()
    try:
        s.recv(1)
        return "recv returned data"
    except BlockingIOError:
        pass
    el = time.monotonic() - t
    s.close()
    return None if el < 0.1 else "EAGAIN only after %.3f s" % el

def fcntl_case():
    s = socket.socket()
    fd = s.fileno()
    fl = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    r = s.connect_ex(addr)
    if r not in (0, errno.EINPROGRESS):
        return "connect_ex %d" % r
    select.select([], [s], [], 5)
    fcntl.fcntl(fd, fcntl.F_SETFL, fl)
    s.send(b"w")
    b = os.read(fd, 1)      # blocking again: waits for the byte
    s.close()
    return None if b == b"y" else "read %r" % b

def bound_case():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.connect(addr)
    s.send(b"w")
    b = s.recv(1)
    s.close()
    return None if b == b"y" else "recv %r" % b

cases = [("rcvtimeo", lambda: timeout_case(False)), ("rcvtimeo-dup", lambda: timeout_case(True)),
         ("fionbio", lambda: nonblock_case("fionbio")), ("sock-nonblock", lambda: nonblock_case("flag")),
         ("fcntl-blocking-again", fcntl_case), ("bound", bound_case)]
bad = 0
for name, f in cases:
    err = f()
    print(name, "ok" if err is None else "FAIL: " + err, flush=True)
    bad += err is not None
sys.exit(1 if bad else 0)
PY

pl_bg b python3 "$PL_TMP/srv.py" $port
pl_wait_port 127.0.0.2 $port
PL_TIMEOUT=30 pl_run a python3 "$PL_TMP/cli.py" $port >"$PL_TMP/cli.out" 2>&1
rc=$?
cat "$PL_TMP/cli.out"
[ $rc -eq 0 ] || pl_fail "a case failed"
[ "$(pl_count_log a ': ntb (link')" -eq 6 ] ||
	pl_fail "$(pl_count_log a ': ntb (link') of 6 connections were ntb"
pl_refute_log a ': tcp ('
echo "PASS"
