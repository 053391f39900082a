#!/bin/sh
# SPDX-License-Identifier: MIT
# An unmodified daemon whose first process exits after the fork: `memcached -d` under the
# library on host B serves a client of host A over NTB while another process of host B opens
# the link (a connect to a port nobody listens on). Every set and get comes back exact, the
# connection stays ntb (the kernel's loopback carries almost nothing) and memcached holds a
# claim on side 1 of its own. Before a forked child took its own claim on the link's side, the
# side counted no live process once memcached's first process exited: the newcomer started a
# new session there and the client's connection was reset.
. "$(dirname "$0")/lib.sh"
pl_need memcached python3 ss
[ "$(id -u)" = 0 ] || pl_skip "needs root (memcached -u root)"
pl_setup daemon
p=$(pl_port 1)
pidf=$PL_TMP/mc.pid

# the daemon: its first process exits once the second runs (-d), which the library follows
pl_run b memcached -d -u root -l 127.0.0.2 -p $p -U 0 -t 1 -P "$pidf" ||
	pl_fail "memcached -d failed"
pl_wait_port 127.0.0.2 $p
i=0
while [ ! -s "$pidf" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
mpid=$(cat "$pidf")
[ -n "$mpid" ] && kill -0 "$mpid" 2>/dev/null || pl_fail "no memcached daemon"
PL_PIDS="$PL_PIDS $mpid"

cat >"$PL_TMP/client.py" <<'EOF2'
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def until(end):
    d = b""
    while not d.endswith(end):
        b = c.recv(65536)
        if not b:
            raise SystemExit("connection closed early")
        d += b
    return d
n = int(sys.argv[3])
for i in range(n):
    v = bytes((i * 7 + j) & 0xff for j in range(1000))
    c.sendall(b"set k%d 0 0 %d\r\n" % (i, len(v)) + v + b"\r\n")
    assert until(b"\r\n") == b"STORED\r\n"
    c.sendall(b"get k%d\r\n" % i)
    assert until(b"END\r\n") == b"VALUE k%d 0 %d\r\n" % (i, len(v)) + v + b"\r\nEND\r\n"
    time.sleep(0.002)
print("client: %d sets and gets exact" % n, flush=True)
EOF2
before=$(pl_lo_bytes)
pl_bg a python3 "$PL_TMP/client.py" 127.0.0.2 $p 400
cli=$PL_LAST; cli_out=$PL_LAST_OUT
sleep 0.4
pl_run b python3 -c "
import socket
try:
    socket.create_connection(('127.0.0.1', $(pl_port 9)), timeout=2)
except OSError as e:
    print('other process of host B:', e)" || pl_fail "the other process of host B failed"
wait $cli || pl_fail "client failed: $(cat "$cli_out")"
cat "$cli_out"
grep -q "400 sets and gets exact" "$cli_out" || pl_fail "client did not report"
pl_assert_lo_below "$before" 200000
pl_assert_log a ": ntb (link ab)"
pl_refute_log a "failed over"
line=$("$BUILD/ntbsock" check -c "$PL_TMP/b.conf" | grep "claimed by" | head -n 1)
echo "host B: $line"
case $line in
*"claimed by 0 handles"*|"") pl_fail "memcached holds no claim on side 1: $line";;
esac
kill "$mpid"
echo "daemon: memcached -d served 400 sets and gets over ntb while another process of its host opened the link: ok"
