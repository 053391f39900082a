#!/bin/sh
# SPDX-License-Identifier: MIT
# Unmodified `memcached -u nobody`, started as root under the library on host B, serves host A
# over NTB: it becomes nobody before it listens, and the link file (root's, mode 0600, created
# by a root server on host A) can no longer be opened then, so the library must have opened
# it at memcached's first set*id call. A client of host A sets and gets a 512 KiB value on
# each of 4 connections and holds them: every value comes back exact, `ntbsock stat` on B lists
# memcached's 4 connections as ntb with exactly the bytes each way that the client counted,
# and the kernel's loopback carried almost nothing.
. "$(dirname "$0")/lib.sh"
pl_need memcached python3 ss pgrep
[ "$(id -u)" = 0 ] || pl_skip "needs root (memcached -u nobody)"
id nobody >/dev/null 2>&1 || pl_skip "no user nobody"
pl_setup memcached
NTB=$BUILD/ntbsock
ECHO=$BUILD/tests/pl_echo
[ -x "$NTB" ] && [ -x "$ECHO" ] || pl_skip "ntbsock or test helpers not built"
chmod 700 "$PL_TMP"
STAT_B=$PL_TMP/b.stat-tcp
p_a=$(pl_port 1)
p=$(pl_port 2)
NCONN=4
SIZE=524288

pl_bg a "$ECHO" et 127.0.0.1 $p_a
pl_wait_port 127.0.0.1 $p_a
[ "$(stat -c %u:%a "$PL_LINK")" = 0:600 ] || pl_fail "the link file is not root's, mode 0600"
pl_bg b env NTBSOCK_STAT_TCP="$STAT_B" memcached -u nobody -l 127.0.0.2 -p $p -U 0 -t 2 -c 64
mc=$PL_LAST
pl_wait_port 127.0.0.2 $p
mpid=$(pgrep -P $mc | head -n 1)
[ -n "$mpid" ] && grep -q "^Uid:[[:space:]]*65534[[:space:]]" /proc/$mpid/status ||
	pl_fail "memcached does not run as nobody"

cat >"$PL_TMP/client.py" <<'EOF'
import os, socket, sys, time
host, port, n, size, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def recv_until(s, end):
    buf = b""
    while not buf.endswith(end):
        b = s.recv(1 << 20)
        if not b:
            raise SystemExit("connection closed early")
        buf += b
    return buf

conns = [socket.create_connection((host, port)) for _ in range(n)]
for i, s in enumerate(conns):
    val = bytes((j * 7 + i * 13 + (j >> 9)) & 0xFF for j in range(size))
    cmd = b"set k%d 0 0 %d\r\n" % (i, size) + val + b"\r\n"
    s.sendall(cmd)
    r1 = recv_until(s, b"\r\n")
    assert r1 == b"STORED\r\n", r1
    get = b"get k%d\r\n" % i
    s.sendall(get)
    r2 = recv_until(s, b"END\r\n")
    want = b"VALUE k%d 0 %d\r\n" % (i, size) + val + b"\r\nEND\r\n"
    assert r2 == want, "value %d differs (%d bytes back)" % (i, len(r2))
    # what memcached received and sent on this connection
    print("port %d rx %d tx %d" % (s.getsockname()[1], len(cmd) + len(get), len(r1) + len(r2)))
print("done", flush=True)
for _ in range(600):
    if os.path.exists(d + "/close"):
        break
    time.sleep(0.1)
for s in conns:
    s.close()
EOF
before=$(pl_lo_bytes)
pl_bg a python3 "$PL_TMP/client.py" 127.0.0.2 $p $NCONN $SIZE "$PL_TMP"
cl=$PL_LAST
cl_out=$PL_LAST_OUT
pl_wait_text "$cl_out" done 60
cat "$cl_out"
pl_assert_lo_below "$before" 1048576
pl_refute_log b "cannot open"

NTBSOCK_STAT_TCP=$STAT_B NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/b.conf" >"$PL_TMP/stat.txt" 2>&1 ||
	pl_fail "ntbsock stat failed: $(cat "$PL_TMP/stat.txt")"
cat "$PL_TMP/stat.txt"
[ "$(awk -v m=$mpid 'NR > 1 && $1 == m && $5 == "ntb"' "$PL_TMP/stat.txt" | wc -l)" -eq $NCONN ] ||
	pl_fail "stat on B does not list memcached's $NCONN connections as ntb"
[ "$(awk -v m=$mpid 'NR > 1 && $1 == m && $5 != "ntb"' "$PL_TMP/stat.txt" | wc -l)" -eq 0 ] ||
	pl_fail "stat on B lists memcached connections that are not ntb"
# bytes exact: memcached's RX_BYTES / TX_BYTES (columns 8 / 7) per client port
grep '^port ' "$cl_out" | while read -r _ port _ rx _ tx; do
	awk -v m=$mpid -v r="127.0.0.1:$port" -v rx=$rx -v tx=$tx \
		'NR > 1 && $1 == m && $4 == r && $7 == tx && $8 == rx { ok = 1 } END { exit !ok }' \
		"$PL_TMP/stat.txt" || { echo "port $port: not rx $rx tx $tx"; exit 1; }
done || pl_fail "stat's byte counts differ from the client's"
touch "$PL_TMP/close"
wait $cl || pl_fail "the client failed"
echo "memcached -u nobody serves over ntb, byte-exact: ok"
