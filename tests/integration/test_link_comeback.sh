#!/bin/sh
# SPDX-License-Identifier: MIT
# A link that comes back by itself serves new connections again without restarting anything:
# a long-running server on host B; host A's programs all end (its heartbeat stops:
# B takes the link down, then its connections for lost); 3 s later host A "restarts" (a new
# program opens the link) and connects: the connection is ntb again, on both hosts, and its
# bytes go over the link, not the kernel's loopback.
. "$(dirname "$0")/lib.sh"
pl_need iperf3
pl_setup comeback
port=$(pl_port 17)
pl_bg b iperf3 -s -B 127.0.0.2 -p $port
pl_wait_port 127.0.0.2 $port
pl_run a iperf3 -c 127.0.0.2 -p $port -t 1 >"$PL_TMP/run1.out" 2>&1 || pl_fail "first iperf3 failed"
n1=$(pl_count_log b ': ntb (link')
[ "${n1:-0}" -ge 2 ] || pl_fail "the first run was not ntb on the server"
sleep 3 # host A is gone: B sees the link down past its grace
before=$(pl_lo_bytes)
pl_run a iperf3 -c 127.0.0.2 -p $port -t 1 >"$PL_TMP/run2.out" 2>&1 || pl_fail "second iperf3 failed"
n2=$(pl_count_log b ': ntb (link')
[ "${n2:-0}" -ge $((n1 + 2)) ] || pl_fail "after the link came back the server's connections are not ntb ($n1 -> $n2)"
grep -h 'tcp (' "$PL_TMP/a.log" "$PL_TMP/b.log" && pl_fail "a connection went tcp"
pl_assert_lo_below "$before" 5000000
echo "a link that comes back serves new ntb connections, the server untouched: ok"
