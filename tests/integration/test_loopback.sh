#!/bin/sh
# SPDX-License-Identifier: MIT
# A loopback link (conf/examples/loopback.conf): connections to 127.0.0.1 within one program
# (client and server threads) and between two programs of this host go over one shm region,
# byte-exact, with both ends in `ntbsock stat` as ntb and almost nothing on the kernel's
# loopback; `ntbsock link down` moves both ends of a live same-process stream to TCP without a
# byte lost; an accepted end survives fork and exec into a new image; a port listened on by a
# program without ntbsock gets plain TCP, saying "no listener"; and a config that makes the
# host its own peer without `loopback = true` stays an error in `ntbsock check`.
. "$(dirname "$0")/lib.sh"
pl_setup loopback
pl_need python3
NTB=$BUILD/ntbsock
LC=$PL_TMP/lo.conf
sed "s#/dev/shm/ntbsock-loopback#$PL_LINK#" "$ROOT/conf/examples/loopback.conf" >"$LC"
grep -q "$PL_LINK" "$LC" || pl_fail "cannot point the example config at the test's link file"
lo_env() { echo "NTBSOCK_CONF=$LC NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$PL_TMP/$1.log LD_PRELOAD=$(pl_preload)"; }

# peer.py MODE PORT SIZE [DIR]: "both" runs an echo server thread and a client in this process
# (the client waits, connected, until DIR/go exists, after writing DIR/ready); "server" serves
# one echo; "forkexec" accepts, echoes the first 10 bytes, forks, and the child execs a new
# image that serves the rest on the inherited descriptor; "client" sends SIZE random bytes,
# reads them back and compares.
cat >"$PL_TMP/peer.py" <<'PY'
import hashlib, os, socket, sys, threading, time
mode, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = sys.argv[4] if len(sys.argv) > 4 else None

def serve(srv):
    c, _ = srv.accept()
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        c.sendall(b)
    c.close()

def client():
    data = os.urandom(size)
    s = socket.create_connection(("127.0.0.1", port))
    got = bytearray()
    def rd():
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            got.extend(b)
    t = threading.Thread(target=rd); t.start()
    half = len(data) // 2 if mode == "split" else len(data)
    s.sendall(data[:half])
    if d:
        while len(got) < half:
            time.sleep(0.01)
        open(d + "/ready", "w").close()
        while not os.path.exists(d + "/go"):
            time.sleep(0.05)
    s.sendall(data[half:])
    s.shutdown(socket.SHUT_WR)
    t.join(); s.close()
    ok = hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    print("client: %d bytes back, %s" % (len(got), "identical" if ok else "DIFFERENT"))
    return ok

if mode == "child":
    c = socket.socket(fileno=port)
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        c.sendall(b)
    sys.exit(0)
if mode == "client":
    sys.exit(0 if client() else 1)
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen(8)
if mode == "server":
    print("listening", flush=True)
    serve(srv)
    sys.exit(0)
if mode == "forkexec":
    c, _ = srv.accept()
    first = b""
    while len(first) < 10:
        first += c.recv(10 - len(first))
    c.sendall(first)
    pid = os.fork()
    if pid == 0:
        os.set_inheritable(c.fileno(), True)
        os.execv(sys.executable, [sys.executable, sys.argv[0], "child", str(c.fileno()), "0"])
    c.close()
    sys.exit(0 if os.waitpid(pid, 0)[1] == 0 else 1)
t = threading.Thread(target=serve, args=(srv,)); t.start()
ok = client(); t.join()
sys.exit(0 if ok else 1)
PY

# --- config: the example validates; the host as its own peer without loopback is an error
NTBSOCK_LOG=error "$NTB" check -c "$LC" >"$PL_TMP/check.out" 2>&1 || pl_fail "ntbsock check rejects the loopback example: $(cat "$PL_TMP/check.out")"
grep -q "loopback *true" "$PL_TMP/check.out" || pl_fail "ntbsock check does not show loopback = true"
grep -q "side *both" "$PL_TMP/check.out" || pl_fail "ntbsock check does not show both sides"
grep -v 'loopback = true;' "$LC" >"$PL_TMP/self.conf"
if NTBSOCK_LOG=error "$NTB" check -c "$PL_TMP/self.conf" >"$PL_TMP/self.out" 2>&1; then
	pl_fail "a config making the host its own peer without loopback = true was accepted"
fi
grep -q "address belongs to this host" "$PL_TMP/self.out" ||
	pl_fail "no 'address belongs to this host' error: $(cat "$PL_TMP/self.out")"
sed 's/loopback = true;/loopback = true; side = 0;/' "$LC" >"$PL_TMP/side.conf"
! NTBSOCK_LOG=error "$NTB" check -c "$PL_TMP/side.conf" >"$PL_TMP/side.out" 2>&1 ||
	pl_fail "a loopback link with a side was accepted"
grep -q "leave side out" "$PL_TMP/side.out" || pl_fail "no error for side on a loopback link"
echo "config: example accepted, host-as-own-peer and loopback with side rejected"

# --- one program: a client and a server thread; both ends in `ntbsock stat` while connected
p1=$(pl_port 1)
before=$(pl_lo_bytes)
mkdir "$PL_TMP/sync"
env $(lo_env both) timeout 60 python3 "$PL_TMP/peer.py" both "$p1" 8388608 "$PL_TMP/sync" \
	>"$PL_TMP/both.out" 2>&1 &
both=$!
PL_PIDS="$PL_PIDS $both"
i=0
while [ ! -e "$PL_TMP/sync/ready" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$PL_TMP/sync/ready" ] || pl_fail "the same-process client did not get its bytes back"
NTBSOCK_LOG=error "$NTB" stat -c "$LC" --json >"$PL_TMP/stat.json" 2>&1 || pl_fail "ntbsock stat failed"
touch "$PL_TMP/sync/go"
wait $both || pl_fail "same-process echo failed: $(cat "$PL_TMP/both.out")"
grep -q identical "$PL_TMP/both.out" || pl_fail "same-process echo not byte-exact"
grep "127.0.0.1:$p1\"" "$PL_TMP/stat.json" | grep "\"mode\":\"ntb\"" | grep "\"link\":\"lo\"" |
	sed 's/^ *{"pid":\([0-9]*\),.*/\1/' >"$PL_TMP/stat.pids"
[ "$(wc -l <"$PL_TMP/stat.pids")" = 2 ] && [ "$(sort -u "$PL_TMP/stat.pids" | wc -l)" = 1 ] ||
	pl_fail "ntbsock stat does not show both ends of the same-process connection as ntb, in one process: $(cat "$PL_TMP/stat.json")"
[ "$(pl_count_log both 'ntb (link lo')" = 2 ] || pl_fail "the log lacks two ntb ends"
pl_assert_lo_below "$before" 200000
echo "same process: 8 MiB echoed byte-exact over the link, both ends ntb in stat"

# --- failover: `ntbsock link down lo` between two halves of a same-process stream
p5=$(pl_port 5)
mkdir "$PL_TMP/sync5"
env $(lo_env split) timeout 60 python3 "$PL_TMP/peer.py" split "$p5" 8388608 "$PL_TMP/sync5" \
	>"$PL_TMP/split.out" 2>&1 &
sp=$!
PL_PIDS="$PL_PIDS $sp"
i=0
while [ ! -e "$PL_TMP/sync5/ready" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$PL_TMP/sync5/ready" ] || pl_fail "the first half did not come back"
NTBSOCK_LOG=error "$NTB" link down lo -c "$LC" || pl_fail "ntbsock link down lo failed"
pl_wait_text "$PL_TMP/split.log" "failed over" 10 # (each process looks every 100 ms)
before=$(pl_lo_bytes)
touch "$PL_TMP/sync5/go"
wait $sp || pl_fail "stream across link down failed: $(cat "$PL_TMP/split.out")"
moved=$(( $(pl_lo_bytes) - before ))
[ "$moved" -ge 8388608 ] || pl_fail "the second half (4 MiB each way) did not go over kernel TCP: lo moved $moved bytes"
NTBSOCK_LOG=error "$NTB" link up lo -c "$LC" || pl_fail "ntbsock link up lo failed"
grep -q identical "$PL_TMP/split.out" || pl_fail "stream across link down not byte-exact"
[ "$(pl_count_log split 'failed over')" = 2 ] ||
	pl_fail "both ends should have failed over to tcp: $(cat "$PL_TMP/split.log")"
echo "link down: both ends of a same-process stream failed over, 8 MiB byte-exact"

# --- two programs of this host
p2=$(pl_port 2)
before=$(pl_lo_bytes)
env $(lo_env srv) timeout 60 python3 "$PL_TMP/peer.py" server "$p2" 0 >"$PL_TMP/srv.out" 2>&1 &
srv=$!
PL_PIDS="$PL_PIDS $srv"
pl_wait_port 127.0.0.1 "$p2"
env $(lo_env cli) timeout 60 python3 "$PL_TMP/peer.py" client "$p2" 8388608 >"$PL_TMP/cli.out" 2>&1 ||
	pl_fail "two-process echo failed: $(cat "$PL_TMP/cli.out")"
wait $srv || pl_fail "the server failed: $(cat "$PL_TMP/srv.out")"
grep -q identical "$PL_TMP/cli.out" || pl_fail "two-process echo not byte-exact"
pl_assert_log cli "127.0.0.1:$p2: ntb (link lo)"
pl_assert_log srv "ntb (link lo, accepted"
pl_assert_lo_below "$before" 200000
echo "two programs: 8 MiB echoed byte-exact over the link"

# --- fork and exec: the accepted end moves to a child's new program image
p4=$(pl_port 4)
before=$(pl_lo_bytes)
env $(lo_env fx) timeout 60 python3 "$PL_TMP/peer.py" forkexec "$p4" 0 >"$PL_TMP/fx.out" 2>&1 &
fx=$!
PL_PIDS="$PL_PIDS $fx"
pl_wait_port 127.0.0.1 "$p4"
env $(lo_env fxc) timeout 60 python3 "$PL_TMP/peer.py" client "$p4" 4194304 >"$PL_TMP/fxc.out" 2>&1 ||
	pl_fail "client of the fork+exec server failed: $(cat "$PL_TMP/fxc.out")"
wait $fx || pl_fail "the fork+exec server failed: $(cat "$PL_TMP/fx.out")"
grep -q identical "$PL_TMP/fxc.out" || pl_fail "fork+exec echo not byte-exact"
pl_assert_log fx "ntb (link lo, adopted across exec)"
pl_assert_lo_below "$before" 200000
echo "fork+exec: the accepted end adopted by the child's new image, 4 MiB byte-exact"
for h in both cli srv fx fxc; do # (not split: it failed over on purpose)
	pl_refute_log $h "failed over"
done

# --- a server without ntbsock: TCP, saying why, and the bytes still arrive (as over TCP)
p3=$(pl_port 3)
timeout 60 python3 "$PL_TMP/peer.py" server "$p3" 0 >"$PL_TMP/plain.out" 2>&1 &
plain=$!
PL_PIDS="$PL_PIDS $plain"
pl_wait_port 127.0.0.1 "$p3"
env $(lo_env fb) timeout 60 python3 "$PL_TMP/peer.py" client "$p3" 65536 >"$PL_TMP/fb.out" 2>&1 ||
	pl_fail "client of a plain server failed: $(cat "$PL_TMP/fb.out")"
wait $plain
grep -q identical "$PL_TMP/fb.out" || pl_fail "fallback echo not byte-exact"
pl_assert_log fb "127.0.0.1:$p3: tcp (no listener)"
pl_refute_log fb "ntb (link"
# nothing listens at all: refused, as over TCP
env $(lo_env ref) timeout 20 python3 -c "
import socket
try:
    socket.create_connection(('127.0.0.1', $p3 + 1000)); print('connected')
except ConnectionRefusedError:
    print('refused')" >"$PL_TMP/ref.out" 2>&1
grep -q refused "$PL_TMP/ref.out" || pl_fail "a port nobody listens on was not refused: $(cat "$PL_TMP/ref.out")"
echo "fallback: plain server reached over TCP (no listener), closed port refused"
echo "PASS"
