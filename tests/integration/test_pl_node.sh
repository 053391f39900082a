#!/bin/sh
# SPDX-License-Identifier: MIT
# Node.js (libuv: non-blocking sockets, epoll, writev, half-close by end()) on both ends, first
# over kernel TCP (the scripts' own check), then under the library: 404 echo connections of
# 1 B to 5 MB (20 at a time), 500 HTTP requests (8 keep-alive connections, 100 without) and 20
# connections whose server destroys the socket after its write (libuv closes it with
# syscall(SYS_close), which must end the NTB connection as close() does: the client gets every
# byte, then an end of file), every byte compared. Under the library every connection must be ntb
# on both hosts and the kernel's loopback must carry next to nothing.
. "$(dirname "$0")/lib.sh"
pl_need node ss
# (under check-tsan node's own threads race in code TSan does not see, V8's, and TSan hung in its
# report path once: nothing of ours to learn there; check-asan runs it)
case ${PL_PRELOAD_FIRST:-} in *libtsan*) pl_skip "Node.js under ThreadSanitizer's runtime";; esac
pl_setup node
D=$ROOT/tests/integration/node
port=$(pl_port 1)

run() { # HOST-A HOST-B: the server under B's environment, the client under A's
	pl_bg "$2" node "$D/echo_http_srv.js" 127.0.0.2 $port
	srv=$PL_LAST
	pl_wait_port 127.0.0.2 $((port + 1))
	out=$(pl_run "$1" node "$D/echo_http_cli.js" 127.0.0.2 $port 2>&1) ||
		pl_fail "$1: client failed: $out"
	echo "$out" | grep -q '^ok 404 echo connections' || pl_fail "$1: $out"
	kill $srv
	wait $srv 2>/dev/null
	echo "$1: $out"
}

run plain plain
before=$(pl_lo_bytes)
run a b
pl_assert_lo_below "$before" 2000000
na=$(pl_count_log a ': ntb (link ab')
nb=$(pl_count_log b ': ntb (link ab')
ta=$(pl_count_log a ': tcp (')
tb=$(pl_count_log b ': tcp (')
echo "connections: host A $na ntb, $ta tcp; host B $nb ntb, $tb tcp"
# 404 echo + 8 keep-alive + 100 single-request + 20 destroyed connections
[ "$na" -eq 532 ] && [ "$nb" -eq 532 ] && [ "$ta" -eq 0 ] && [ "$tb" -eq 0 ] ||
	pl_fail "not every connection was ntb"
echo "PASS"
