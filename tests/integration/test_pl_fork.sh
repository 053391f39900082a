#!/bin/sh
# SPDX-License-Identifier: MIT
# fork and the single-owner rule (ntbsock(7) LIMITS): a server on host B accepts an NTB
# connection, echoes 1000 bytes and forks; the child serves the rest of the stream while the
# parent still holds its copy. The client on host A must get every byte back exactly, over the
# link (loopback counters).
#  1. the parent closes its copy only 2 s after the fork (64 MiB through the child);
#  2. the parent also reads and writes while the child streams: it gets EPERM, the child's
#     stream stays byte-exact;
#  3. the child execs (the new image adopts the connection), the parent closes 1 s late.
. "$(dirname "$0")/lib.sh"
pl_need ss python3
pl_setup fork
EX=$BUILD/tests/pl_exec
[ -x "$EX" ] || pl_skip "$EX not built"
PL_TIMEOUT=60
BYTES=67108864

n=0
start() { # MODE [ARG]: server on B, sets port, srv and srv_out
	n=$((n + 1))
	port=$(pl_port $n)
	: >"$PL_TMP/a.log"; : >"$PL_TMP/b.log"
	pl_bg b "$EX" "$1" 127.0.0.2 $port $2
	srv=$PL_LAST
	srv_out=$PL_LAST_OUT
	pl_wait_port 127.0.0.2 $port
}
client() { # NAME BYTES: run the client, check its report and the server's exit
	before=$(pl_lo_bytes)
	pl_run a "$EX" client 127.0.0.2 $port $2 >"$PL_TMP/client.out" 2>&1 ||
		pl_fail "$1: client failed: $(cat "$PL_TMP/client.out") / server: $(cat "$srv_out")"
	wait $srv || pl_fail "$1: server failed: $(cat "$srv_out")"
	grep -q "echoed $2 bytes exactly" "$PL_TMP/client.out" || pl_fail "$1: client did not report"
	pl_assert_lo_below "$before" 1000000
	pl_assert_log a ": ntb (link"
}

# 1. late close by the parent.
start serve-fork 2
client "late close" $BYTES
grep -q "fork child: echoed $((BYTES - 1000)) bytes after fork" "$srv_out" ||
	pl_fail "late close: the child did not echo the rest ($(cat "$srv_out"))"
echo "fork, parent closes 2 s late: $BYTES bytes exact"

# 2. both processes use it: the parent (second user) gets EPERM.
start serve-fork-both
client "both" $BYTES
grep -q "fork parent: read -1 (Operation not permitted), write -1 (Operation not permitted)" \
	"$srv_out" || pl_fail "both: the parent's I/O did not fail with EPERM ($(cat "$srv_out"))"
echo "fork, parent uses its copy too: EPERM there, $BYTES bytes exact through the child"

# 3. the child execs, the parent closes 1 s late.
start serve-fork-exec
client "fork+exec" 20000000
pl_assert_log b "ntb (link ab, adopted across exec)"
echo "fork + exec, parent closes late: 20000000 bytes exact"

# 4. a daemon: the parent exits at once after the fork, and the child, alone on host B with the
#    connection, serves it. Another process of host B uses the link meanwhile (its connect to a
#    port nobody listens on). Before, the child had no claim of its own on the link's side:
#    with its parent gone the side counted no live process, the newcomer started a new session
#    there, and the child's connection was reset on both hosts.
start serve-daemon
before=$(pl_lo_bytes)
pl_bg a "$EX" client 127.0.0.2 $port 20000000
cli=$PL_LAST; cli_out=$PL_LAST_OUT
sleep 0.5
pl_run b "$EX" client 127.0.0.1 $(pl_port 99) 1000 >"$PL_TMP/other.out" 2>&1 &&
	pl_fail "daemon: the other process's connect to nobody succeeded"
wait $cli || pl_fail "daemon: client failed: $(cat "$cli_out") / server: $(cat "$srv_out")"
grep -q "echoed 20000000 bytes exactly" "$cli_out" || pl_fail "daemon: client did not report"
i=0
while ! grep -q "daemon child: echoed 19999000 bytes" "$srv_out" && [ $i -lt 50 ]; do
	sleep 0.1; i=$((i + 1))
done
grep -q "daemon child: echoed 19999000 bytes" "$srv_out" ||
	pl_fail "daemon: the child did not echo the rest ($(cat "$srv_out"))"
pl_assert_lo_below "$before" 1000000
pl_refute_log a "reset"
echo "daemon: parent gone after the fork, another process of its host meanwhile: 20000000 bytes exact over the link"

# 5. claims on the side: a forked child that stays holds one of its own; one that execs a
#    program handing nothing over (sleep) gives it up before the exec: the claim would outlive
#    the exec with the pid, a slot (96 per side) per such helper for as long as it runs.
port=$(pl_port 50)
cat >"$PL_TMP/claims.py" <<'EOF2'
import socket, os, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1]))); s.listen(4)
c, _ = s.accept()
c.sendall(c.recv(100))
c.close(); s.close()
kids = []
pid = os.fork()
if pid == 0:
    time.sleep(3); os._exit(0)
kids.append(pid)
pid = os.fork()
if pid == 0:
    os.execv("/bin/sleep", ["sleep", "3"])
kids.append(pid)
print("forked", flush=True)
for k in kids: os.waitpid(k, 0)
EOF2
pl_bg b python3 "$PL_TMP/claims.py" $port
srv=$PL_LAST; srv_out=$PL_LAST_OUT
pl_wait_port 127.0.0.2 $port
pl_run a python3 -c "import socket; c = socket.create_connection(('127.0.0.2', $port)); c.sendall(b'x'); assert c.recv(10) == b'x'" ||
	pl_fail "claims: the echo failed"
i=0
while ! grep -q forked "$srv_out" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
line=$("$BUILD/ntbsock" check -c "$PL_TMP/b.conf" | grep "claimed by" | head -n 1)
echo "host B after the forks: $line"
case $line in
*"claimed by 2 handles"*) ;;
*) pl_fail "claims: expected the parent's and the staying child's claims only: $line";;
esac
wait $srv || pl_fail "claims: server failed: $(cat "$srv_out")"
pl_assert_log b ": ntb (link ab"
echo "claims: a forked child holds its own, one that execs sleep none"
echo "fork: ok"
