#!/bin/sh
# SPDX-License-Identifier: MIT
# Programs whose socket I/O goes through io_uring (tests/helpers/uring_io, liburing): the ring's
# sends, receives and accepts never pass through the C library. Kernel TCP first, then the same
# under the library, where every case must work byte-exact (before: a ring's send on an NTB
# connection reached the kernel socket and both ends got ECONNRESET; the client read the
# peer's failover header as data; a server accepting through the ring left its NTB clients'
# bytes on the link while it read the kernel socket):
#   client liburing|raw, after   the connection is made (ntb), then the ring: the connection
#                                moves to its kernel socket ("failed over: io_uring in this
#                                process"; the server's side "peer moved to tcp")
#   client liburing|raw, before  the ring first: the connection stays tcp with that reason
#   server                       a server that accepts through its ring, made before listen(),
#                                after it, or in a child after fork() (the parent with a ring or
#                                without): its port is not (or no longer) advertised by anyone
#                                on the host, its clients (Python, under the library) use tcp at
#                                once ("no listener")
#   fail                         io_uring set-ups the kernel refuses: the connection stays ntb
#   files + NTBSOCK_IO_URING=ignore  a ring for a pipe only, socket I/O through the C library:
#                                the connection stays ntb; without the variable it moves
. "$(dirname "$0")/lib.sh"
pl_need python3
U=$BUILD/tests/uring_io
[ -x "$U" ] || pl_skip "uring_io not built (liburing-dev: make deps)"
pl_setup uring
BYTES=3000000
E=$(pl_echo_server)

# Kernel TCP: the helper itself against a plain echo server.
port=$(pl_port 1)
pl_bg plain python3 "$E" 127.0.0.1 $port; srv=$PL_LAST
pl_wait_port 127.0.0.1 $port
for how in liburing raw; do
	out=$(pl_run plain "$U" client 127.0.0.1 $port $BYTES $how after) ||
		pl_fail "kernel TCP, $how: the client failed: $out"
	[ "$out" = "ok $BYTES" ] || pl_fail "kernel TCP, $how: $out"
done
kill $srv 2>/dev/null; wait $srv 2>/dev/null
echo "kernel TCP: ok $BYTES both ways (liburing and raw rings)"

# Under the library, each client case against an echo server on host B.
port=$(pl_port 2)
pl_bg b python3 "$E" 127.0.0.2 $port; E_SRV=$PL_LAST
pl_wait_port 127.0.0.2 $port
n=0
for how in liburing raw; do
	for when in after before; do
		n=$((n + 1))
		: >"$PL_TMP/a.log"
		out=$(pl_run a "$U" client 127.0.0.2 $port $BYTES $how $when 2>&1) ||
			{ cat "$PL_TMP/a.log"; pl_fail "client $how $when: failed: $out"; }
		[ "$out" = "ok $BYTES" ] || pl_fail "client $how $when: $out"
		pl_assert_log a "io_uring set up"
		if [ $when = after ]; then
			pl_assert_log a "ntb (link ab)" # (it was ntb before the ring)
			pl_assert_log a "tcp (failed over: io_uring in this process)"
			pl_wait_count b "tcp (failed over: peer moved to tcp)" $((n / 2 + 1)) ||
				pl_fail "client $how $when: the server's side did not move"
		else
			pl_refute_log a "ntb (link"
			pl_assert_log a "tcp (io_uring in this process)"
		fi
		echo "client $how, ring $when connect(): ok $BYTES"
	done
done

# A ring for files only: moved by default; kept on NTB with NTBSOCK_IO_URING=ignore.
: >"$PL_TMP/a.log"
out=$(pl_run a "$U" client 127.0.0.2 $port $BYTES files after 2>&1) || pl_fail "files: $out"
[ "$out" = "ok $BYTES" ] || pl_fail "files: $out"
pl_assert_log a "tcp (failed over: io_uring in this process)"
: >"$PL_TMP/a.log"
out=$(NTBSOCK_IO_URING=ignore pl_run a "$U" client 127.0.0.2 $port $BYTES files after 2>&1) ||
	pl_fail "files, ignore: $out"
[ "$out" = "ok $BYTES" ] || pl_fail "files, ignore: $out"
pl_assert_log a "ntb (link ab)"
pl_refute_log a "io_uring set up"
pl_refute_log a "failed over"
echo "a ring for files: moved by default, kept ntb with NTBSOCK_IO_URING=ignore: ok"
# Set-ups the kernel refuses (a program probing for io_uring): nothing changes.
: >"$PL_TMP/a.log"
out=$(pl_run a "$U" client 127.0.0.2 $port $BYTES fail after 2>&1) || pl_fail "fail: $out"
[ "$out" = "ok $BYTES" ] || pl_fail "fail: $out"
pl_assert_log a "ntb (link ab)"
pl_refute_log a "io_uring set up"
pl_refute_log a "failed over"
echo "a ring the kernel refuses: the connection stays ntb: ok"

# A server that accepts through its ring: made before listen(), after it (its advertisement
# withdrawn), and in a child after fork() (the child must not advertise the port again). The
# echo server above keeps host B's side of the link up: the clients find the link and no
# listener on the ring server's port.
k=3
for when in before after fork fork-child; do
	k=$((k + 1)); port=$(pl_port $k)
	: >"$PL_TMP/a.log"; : >"$PL_TMP/b.log"
	pl_bg b "$U" server $port 3 liburing $when; srv=$PL_LAST; srv_out=$PL_LAST_OUT
	i=0
	while ! grep -q listening "$srv_out" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt $((300 * PL_SLOW)) ] || ! kill -0 $srv 2>/dev/null; then
			echo "--- the ring server ($when), after $((i / 10)) s:"; cat "$srv_out"
			for c in $(pgrep -P $srv); do
				ps -L -o pid,tid,stat,wchan:30,args -p $c 2>/dev/null
			done
			pl_fail "the ring server ($when) did not start listening"
		fi
		sleep 0.1
	done
	for i in 1 2 3; do
		out=$(pl_run a python3 "$(pl_echo_client)" 127.0.0.2 $port 2>&1) ||
			{ cat "$PL_TMP/b.log"; pl_fail "server $when, client $i: $out"; }
		[ "$out" = "ok 200000" ] || pl_fail "server $when, client $i: $out"
	done
	wait $srv || { cat "$srv_out"; pl_fail "the ring server ($when) failed"; }
	pl_assert_log b "io_uring set up (liburing)"
	[ "$(pl_count_log a ": tcp (no listener)")" -eq 3 ] ||
		{ cat "$PL_TMP/a.log"; pl_fail "the ring server's ($when) clients did not all use tcp at once"; }
	pl_refute_log a "ntb (link"
	case $when in
	fork) what="made after listen(), then fork(), and the child's own";;
	fork-child) what="listen(), fork(), a ring in the child only: the parent's advertisement withdrawn";;
	*) what="made $when listen()";;
	esac
	echo "a server accepting through its ring ($what): 3 clients over tcp, byte-exact: ok"
done
kill $E_SRV 2>/dev/null
echo "io_uring programs: their sockets on kernel TCP, every byte exact: ok"
