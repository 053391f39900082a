#!/bin/sh
# SPDX-License-Identifier: MIT
# `ntbsock stat` lists connections that stayed TCP (mode tcp + reason) while they are open,
# from the connecting and from the accepting side, beside NTB ones, in the table and --json;
# a closed one disappears; "tcp: setups N" counts them all since the table was created.
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup stat
NTB=$BUILD/ntbsock
HOLD=$BUILD/tests/pl_hold
ECHO=$BUILD/tests/pl_echo
[ -x "$NTB" ] && [ -x "$HOLD" ] && [ -x "$ECHO" ] || pl_skip "ntbsock or test helpers not built"
[ -n "$NTBSOCK_STAT_TCP" ] || pl_fail "lib.sh did not set NTBSOCK_STAT_TCP"
p_plain=$(pl_port 1)
p_ntb=$(pl_port 2)

stat_txt() { NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/a.conf" >"$PL_TMP/stat.txt" 2>&1 ||
	pl_fail "ntbsock stat failed: $(cat "$PL_TMP/stat.txt")"; }
stat_json() { NTBSOCK_LOG=error "$NTB" stat -c "$PL_TMP/a.conf" --json >"$PL_TMP/stat.json" 2>&1 ||
	pl_fail "ntbsock stat --json failed: $(cat "$PL_TMP/stat.json")"; }
# row PEER MODE: lines of the table with remote PEER in mode MODE
rows() { awk -v r="$1" -v m="$2" '$4 == r && $5 == m' "$PL_TMP/stat.txt"; }

# A server without the library on B, one under the library on B.
pl_bg plain "$ECHO" et 127.0.0.2 $p_plain
pl_bg b "$ECHO" et 127.0.0.2 $p_ntb
pl_wait_port 127.0.0.2 $p_plain
pl_wait_port 127.0.0.2 $p_ntb

# 1. A's client to the plain server: tcp, "no listener" (no ntbsock listener on B).
mkdir "$PL_TMP/h1"
pl_bg a "$HOLD" 127.0.0.2 $p_plain "$PL_TMP/h1"
h1=$PL_LAST; h1_out=$PL_LAST_OUT
pl_wait_text "$h1_out" "fd "
fd1=$(sed -n 's/^fd //p' "$h1_out")
# 2. A's client to the library server: ntb.
mkdir "$PL_TMP/h2"
pl_bg a "$HOLD" 127.0.0.2 $p_ntb "$PL_TMP/h2"
h2=$PL_LAST; h2_out=$PL_LAST_OUT
pl_wait_text "$h2_out" "fd "
# 3. A client without the library to the library server: B's accepted side is tcp.
mkdir "$PL_TMP/h3"
pl_bg plain "$HOLD" 127.0.0.2 $p_ntb "$PL_TMP/h3"
h3=$PL_LAST; h3_out=$PL_LAST_OUT
pl_wait_text "$h3_out" "fd "
sleep 0.3 # the server's accept (epoll loop) decides after the client's connect returned
pl_assert_log a "127.0.0.2:$p_plain: tcp (no listener)"

stat_txt
cat "$PL_TMP/stat.txt"
r1=$(rows 127.0.0.2:$p_plain tcp)
[ "$(echo "$r1" | grep -c .)" -eq 1 ] || pl_fail "fallback connection not listed once as tcp"
echo "$r1" | grep -q 'no listener$' || pl_fail "fallback row lacks its reason: $r1"
pid1=$(echo "$r1" | awk '{ print $1 }')
[ "$(echo "$r1" | awk '{ print $2 }')" = "$fd1" ] || pl_fail "fallback row has the wrong fd"
[ "$(cat /proc/$pid1/comm 2>/dev/null)" = pl_hold ] || pl_fail "fallback row pid $pid1 is not pl_hold"
case "$(echo "$r1" | awk '{ print $3 }')" in 127.0.0.1:*) ;; *) pl_fail "fallback local address";; esac
[ "$(rows 127.0.0.2:$p_ntb ntb | grep -c .)" -ge 1 ] || pl_fail "ntb connection not listed as ntb"
[ "$(rows 127.0.0.2:$p_ntb tcp | grep -c .)" -eq 0 ] || pl_fail "ntb connection also listed as tcp"
grep -q "127.0.0.2:$p_ntb .* tcp .*client did not set up ntb\$" "$PL_TMP/stat.txt" ||
	pl_fail "server side of the plain client not listed as tcp with its reason"

# The count of connections kept on TCP since the table was created: A's fallback and B's
# accepted side of the plain client (the test's own table, lib.sh's NTBSOCK_STAT_TCP).
grep -qx "tcp: setups 2" "$PL_TMP/stat.txt" ||
	pl_fail "tcp setups not 2: $(grep '^tcp:' "$PL_TMP/stat.txt")"

stat_json
grep -q "\"remote\":\"127.0.0.2:$p_plain\",\"mode\":\"tcp\",\"state\":\"open\",\"reason\":\"no listener\"" \
	"$PL_TMP/stat.json" || pl_fail "--json lacks the tcp fallback with its reason"
grep -q '"tcp":{"setups":2}}$' "$PL_TMP/stat.json" || pl_fail "--json lacks the tcp setups count"
grep -q "\"remote\":\"127.0.0.2:$p_ntb\",\"mode\":\"ntb\"" "$PL_TMP/stat.json" ||
	pl_fail "--json lacks the ntb connection"

# Closing the fallback (the process lives on) removes it.
touch "$PL_TMP/h1/close"
i=0; while [ ! -e "$PL_TMP/h1/closed" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$PL_TMP/h1/closed" ] || pl_fail "pl_hold did not close"
kill -0 "$pid1" 2>/dev/null || pl_fail "pl_hold exited early"
stat_txt
[ "$(rows 127.0.0.2:$p_plain tcp | grep -c .)" -eq 0 ] || pl_fail "closed fallback still listed"
grep -qx "tcp: setups 2" "$PL_TMP/stat.txt" || pl_fail "the tcp setups count lost the closed one"
stat_json
! grep -q "127.0.0.2:$p_plain" "$PL_TMP/stat.json" || pl_fail "closed fallback still in --json"
[ "$(rows 127.0.0.2:$p_ntb ntb | grep -c .)" -ge 1 ] || pl_fail "ntb connection gone too"

for d in h1 h2 h3; do touch "$PL_TMP/$d/close" "$PL_TMP/$d/exit"; done
wait $h1 || pl_fail "client 1 failed"
wait $h2 || pl_fail "client 2 failed"
wait $h3 || pl_fail "client 3 failed"
echo "ntbsock stat lists tcp fallbacks with their reasons and ntb connections: ok"
