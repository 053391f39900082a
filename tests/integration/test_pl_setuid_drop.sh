#!/bin/sh
# SPDX-License-Identifier: MIT
# A daemon started as root that becomes nobody before it listens (memcached -u nobody does)
# still serves over NTB: the library opens its links, and the table of tcp connections, at the
# first set*id call, while the process may still open them (the link file is root's, mode
# 0600; B's table sits in a directory only root may enter). Host A's root server creates the
# link first. Checks: the server runs as uid 65534; 8 clients' 1 MiB each come back exact with
# the kernel's loopback carrying almost nothing; B's log has their ntb lines and no "cannot
# open"; `ntbsock stat` on B lists held connections to the server as ntb with its pid, and a
# client without the library as tcp (the row the server wrote as nobody).
. "$(dirname "$0")/lib.sh"
pl_need ss pgrep
[ "$(id -u)" = 0 ] || pl_skip "needs root (the server starts as root and becomes nobody)"
id nobody >/dev/null 2>&1 || pl_skip "no user nobody"
pl_setup setuid-drop
NTB=$BUILD/ntbsock
ECHO=$BUILD/tests/pl_echo
HOLD=$BUILD/tests/pl_hold
[ -x "$NTB" ] && [ -x "$ECHO" ] && [ -x "$HOLD" ] || pl_skip "ntbsock or test helpers not built"
chmod 700 "$PL_TMP"
STAT_B=$PL_TMP/b.stat-tcp # host B's table of tcp connections, as root only may reach it
p_a=$(pl_port 1)
p=$(pl_port 2)

pl_bg a "$ECHO" et 127.0.0.1 $p_a
pl_wait_port 127.0.0.1 $p_a
[ -e "$PL_LINK" ] || pl_fail "host A's server did not create the link file"
ls -l "$PL_LINK"
[ "$(stat -c %u:%a "$PL_LINK")" = 0:600 ] || pl_fail "the link file is not root's, mode 0600"

pl_bg b env NTBSOCK_STAT_TCP="$STAT_B" "$ECHO" dropet 127.0.0.2 $p nobody
srv=$PL_LAST
srv_out=$PL_LAST_OUT
pl_wait_port 127.0.0.2 $p
pl_wait_text "$srv_out" "uid "
cat "$srv_out"
spid=$(pgrep -P $srv | head -n 1)
[ -n "$spid" ] || pl_fail "no server process"
grep -q "^Uid:[[:space:]]*65534[[:space:]]" /proc/$spid/status || pl_fail "the server is not nobody"

before=$(pl_lo_bytes)
pl_run a "$ECHO" client 127.0.0.2 $p 8 1048576 >"$PL_TMP/client.out" 2>&1 ||
	pl_fail "echo through the server failed: $(cat "$PL_TMP/client.out")"
# 8 x 1 MiB each way: 16 MiB over TCP; set-ups and closes are a few KiB
pl_assert_lo_below "$before" 1048576
pl_refute_log b "cannot open"
n=$(grep -cF "127.0.0.2:$p -> 127.0.0.1:" "$PL_TMP/b.log" | head -n 1)
ntb=$(grep -F "127.0.0.2:$p -> 127.0.0.1:" "$PL_TMP/b.log" | grep -cF ": ntb (link ab")
echo "server: $ntb of $n connections ntb"
[ "$ntb" -eq 8 ] && [ "$n" -eq 8 ] || pl_fail "not all 8 connections of the server were ntb"

# held connections: 4 from A under the library (ntb), 1 from a client without it (tcp)
mkdir "$PL_TMP/h1" "$PL_TMP/h2"
pl_bg a "$HOLD" 127.0.0.2 $p "$PL_TMP/h1" 4
h1=$PL_LAST
pl_bg plain "$HOLD" 127.0.0.2 $p "$PL_TMP/h2"
h2=$PL_LAST
i=0
while [ ! -e "$PL_TMP/h1/connected" ] || [ ! -e "$PL_TMP/h2/connected" ]; do
	[ $i -lt 100 ] || pl_fail "the holding clients did not connect"
	sleep 0.1; i=$((i + 1))
done
sleep 0.3 # the server's accept decides after the client's connect returned
NTBSOCK_STAT_TCP=$STAT_B NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/b.conf" >"$PL_TMP/stat.txt" 2>&1 ||
	pl_fail "ntbsock stat failed: $(cat "$PL_TMP/stat.txt")"
cat "$PL_TMP/stat.txt"
rows() { awk -v p=$spid -v m="$1" 'NR > 1 && $1 == p && $5 == m' "$PL_TMP/stat.txt"; }
[ "$(rows ntb | grep -c .)" -eq 4 ] || pl_fail "stat on B does not list the server's 4 ntb connections"
[ "$(rows tcp | grep -c 'client did not set up ntb$')" -eq 1 ] ||
	pl_fail "stat on B does not list the server's tcp connection"
[ "$(stat -c %u "$STAT_B")" = 0 ] || pl_fail "B's table of tcp connections is not root's"

for d in h1 h2; do touch "$PL_TMP/$d/close" "$PL_TMP/$d/exit"; done
wait $h1 || pl_fail "holding client 1 failed"
wait $h2 || pl_fail "holding client 2 failed"
echo "a daemon that became nobody serves over ntb and is listed by stat: ok"
