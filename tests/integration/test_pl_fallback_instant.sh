#!/bin/sh
# SPDX-License-Identifier: MIT
# A new process's first connect decides TCP at once when the peer host has no live ntbsock
# side, and still waits while the peer side may be alive:
#  1. no link file (nobody on host B ever opened it);
#  2. a stale link file whose peer side exited (its last process announced the link down at
#     exit);
#  3. a stale link file whose peer side was killed (enabled, heartbeat stopped), seen by no
#     process of host A before: the wall-clock stamp of B's last heartbeat decides;
#  4. a peer whose heartbeat stopped (SIGSTOP) while a process of host A watched it (an ntb
#     connection held through the stop): the host's record of the heartbeat decides. (Had the
#     last watcher left before the peer's last beats, the record would not hold the final value
#     and the first connect would wait up to the dead limit, 1 s, to see it stand still.)
#  5. a peer that is only slow (stopped for less than the dead limit, then resumed): the first
#     connect waits for it and is an ntb one.
# Host A's setup_timeout_ms is 600 s and every client runs under a 60 s timeout: a client that
# waited for the link instead of deciding would be killed. Each fallback client must still get
# its byte echoed by the server, as over kernel TCP.
. "$(dirname "$0")/lib.sh"
pl_need ss python3 pgrep
PL_LOG_LEVEL=debug
pl_setup fallback-instant
CONNRATE=$PL_TMP/connrate
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o "$CONNRATE" "$ROOT/bench/connrate.c" ||
	pl_fail "cannot build bench/connrate.c"
printf 'tunables = { setup_timeout_ms = 600000; };\n' >"$PL_TMP/tun"
sed -i 's/^tunables = { contexts = \([0-9]*\); };$/tunables = { contexts = \1; setup_timeout_ms = 600000; };/' \
	"$PL_TMP/a.conf"
grep -q 'setup_timeout_ms = 600000' "$PL_TMP/a.conf" || cat "$PL_TMP/tun" >>"$PL_TMP/a.conf"

# A plain TCP echo server (no library): the fallback's destination.
port=$(pl_port 1)
pl_bg plain "$CONNRATE" server 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port

# first_tcp CASE REASON: a new host-A process connects once; it must get its byte back over TCP
# with REASON logged and without waiting for the link.
first_tcp() {
	: >"$PL_TMP/a.log"
	PL_TIMEOUT=60 pl_run a "$CONNRATE" first 127.0.0.2 $port >"$PL_TMP/first.out" 2>&1 ||
		pl_fail "$1: the client failed or waited (timeout 60 s): $(cat "$PL_TMP/first.out")"
	pl_assert_log a "tcp ($2)"
	pl_refute_log a ': ntb (link'
	echo "$1: tcp ($2) in $(cat "$PL_TMP/first.out") us"
}

# 1. no link file
rm -f "$PL_LINK"
first_tcp "no link file" "link down: no ntbsock on the peer host"
pl_assert_log a "link down: no ntbsock on the peer host: not opened"
[ -e "$PL_LINK" ] && pl_fail "the client created the link file nobody serves"

# 2. B opened the link (a listener advertises its port on it), then its only process exited
rm -f "$PL_LINK"
pl_run b python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0)); s.listen()' ||
	pl_fail "host B's listener failed"
[ -e "$PL_LINK" ] || pl_fail "host B did not open the link"
first_tcp "peer exited" "link down: no ntbsock on the peer host"
pl_assert_log a "link down: no ntbsock on the peer host: not opened"

# 3. B killed: its side stays enabled, its heartbeat stops; host A never saw it. The stamp
# must be older than the dead limit (1 s) plus 2 s.
rm -f "$PL_LINK"
bport=$(pl_port 2)
pl_bg b "$CONNRATE" server 127.0.0.2 $bport
pl_wait_port 127.0.0.2 $bport
bsrv=$(pgrep -P $PL_LAST) # (pl_bg's pid is timeout's)
[ -n "$bsrv" ] || pl_fail "no server process under $PL_LAST"
# its side enabled and beating (a slow start, as under a sanitizer, may listen first)
i=0
until "$BUILD/ntbsock" check -c "$PL_TMP/a.conf" 2>/dev/null | grep -q 'side 1: claimed by 1 handle, enabled'; do
	[ $i -lt $((100 * PL_SLOW)) ] || pl_fail "host B's server did not enable its side of the link"
	sleep 0.1; i=$((i + 1))
done
sleep 0.3
kill -9 $bsrv
sleep 4.5
first_tcp "peer killed" "link down: peer heartbeat stopped"
pl_assert_log a "link down: peer heartbeat stopped: not opened"

# 4. B stopped after host A saw it alive (an ntb connection to it first).
rm -f "$PL_LINK"
bport=$(pl_port 3)
pl_bg b "$CONNRATE" server 127.0.0.2 $bport
pl_wait_port 127.0.0.2 $bport
bsrv=$(pgrep -P $PL_LAST)
[ -n "$bsrv" ] || pl_fail "no server process under $PL_LAST"
: >"$PL_TMP/a.log"
pl_bg a python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.2", int(sys.argv[1])))
s.sendall(b"x"); assert s.recv(1) == b"x"
print("held", flush=True); time.sleep(600)' $bport
holder=$PL_LAST
pl_wait_text "$PL_LAST_OUT" held 30
pl_assert_log a ': ntb (link'
kill -STOP $bsrv
sleep 1.5
first_tcp "peer stopped" "link down: peer heartbeat stopped"
pl_assert_log a "link down: peer heartbeat stopped: not opened"
kill -CONT $bsrv
kill $holder

# 5. A peer that is only slow: B stopped for less than the dead limit. This part uses
# link_timeout_ms = 3000 on both hosts (dead after 6 s): B stops for 3.5 s (the link is down),
# a new client starts, B resumes 0.5 s later. The client must wait and go ntb.
for h in a b; do
	sed -i 's/^\(    window_size = .*\)$/\1\n    link_timeout_ms = 3000;/' "$PL_TMP/$h.conf"
	grep -q 'link_timeout_ms = 3000' "$PL_TMP/$h.conf" || pl_fail "cannot set link_timeout_ms"
done
sed -i 's/setup_timeout_ms = 600000/setup_timeout_ms = 20000/' "$PL_TMP/a.conf"
rm -f "$PL_LINK"
bport=$(pl_port 4)
pl_bg b "$CONNRATE" server 127.0.0.2 $bport
pl_wait_port 127.0.0.2 $bport
bsrv=$(pgrep -P $PL_LAST)
[ -n "$bsrv" ] || pl_fail "no server process under $PL_LAST"
: >"$PL_TMP/a.log"
PL_TIMEOUT=60 pl_run a "$CONNRATE" first 127.0.0.2 $bport >/dev/null || pl_fail "ntb client failed"
kill -STOP $bsrv
sleep 3.5
: >"$PL_TMP/a.log"
PL_TIMEOUT=60 pl_run a "$CONNRATE" first 127.0.0.2 $bport >"$PL_TMP/slow.out" 2>&1 &
cli=$!
sleep 0.5
kill -CONT $bsrv
wait $cli || pl_fail "slow peer: the client failed: $(cat "$PL_TMP/slow.out")"
pl_assert_log a ': ntb (link'
pl_refute_log a ': tcp ('
pl_refute_log a 'not waiting'
echo "slow peer: waited, ntb in $(cat "$PL_TMP/slow.out") us"
echo "PASS"
