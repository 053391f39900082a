#!/bin/sh
# SPDX-License-Identifier: MIT
# What an accepted connection inherits, over ntb as over kernel TCP: each case runs the same
# server and client (tests/helpers/pl_opts) first over kernel TCP, then over ntb (host B serves,
# host A connects), and the program's view must be the same on both:
#  1. options set on the listener after listen() (SO_RCVBUF, TCP_NODELAY, SO_KEEPALIVE,
#     TCP_KEEPIDLE, SO_RCVTIMEO 0.2 s, SO_SNDTIMEO, SO_LINGER 0): the accepted socket's
#     getsockopt() values, a recv with no data ending on the receive timeout, the close
#     resetting the connection (the client reads ECONNRESET);
#  1b. the same options set before listen() (accept() takes them from what the library saw);
#  2. the same options set by a forked child on the listener it shares (the server's accept
#     cannot take them from what it saw itself);
#  2b. the same options set on the listener while the client's connection already waits in
#     its backlog: that connection keeps the options it had (the kernel copied them when its
#     handshake completed): no receive timeout, an orderly close;
#  3. accept4(SOCK_NONBLOCK) on a blocking listener: the accepted socket is non-blocking (its
#     first recv, before the client's byte, fails with EAGAIN), the listener stays blocking,
#     and a later plain accept() gives a blocking socket (its recv waits for the byte).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup opts-accept
H=$BUILD/tests/pl_opts
[ -x "$H" ] || pl_skip "$H not built (make $H)"

n=0
# run_case NAME CONNS SERVER-ARGS -- CLIENT-MODE: the case over kernel TCP, then over ntb; fails
# unless both print the same and all CONNS connections of the ntb run were ntb on both hosts.
run_case() {
	name=$1; conns=$2; shift 2
	srv_args=""
	while [ "$1" != -- ]; do srv_args="$srv_args $1"; shift; done
	cli_mode=$2
	for path in tcp ntb; do
		n=$((n + 1))
		port=$(pl_port $n)
		if [ $path = tcp ]; then
			env $(pl_env plain) timeout 60 "$H" $srv_args 127.0.0.2 $port $srv_extra \
				>"$PL_TMP/$name-tcp-srv.out" 2>&1 &
			srv=$!
			PL_PIDS="$PL_PIDS $srv"
			pl_wait_text "$PL_TMP/$name-tcp-srv.out" listening
			env $(pl_env plain) timeout 60 "$H" $cli_mode 127.0.0.2 $port \
				>"$PL_TMP/$name-tcp-cli.out" 2>&1 || pl_fail "$name over tcp: client failed"
		else
			before_a=$(pl_count_log a ': ntb (link')
			before_b=$(pl_count_log b ': ntb (link')
			pl_bg b "$H" $srv_args 127.0.0.2 $port $srv_extra
			srv=$PL_LAST
			cp /dev/null "$PL_TMP/$name-ntb-srv.out"
			pl_wait_text "$PL_LAST_OUT" listening
			pl_run a "$H" $cli_mode 127.0.0.2 $port >"$PL_TMP/$name-ntb-cli.out" 2>&1 ||
				pl_fail "$name over ntb: client failed"
		fi
		wait $srv || pl_fail "$name over $path: server failed"
		[ $path = ntb ] && cp "$PL_LAST_OUT" "$PL_TMP/$name-ntb-srv.out"
	done
	for side in srv cli; do
		if ! cmp -s "$PL_TMP/$name-tcp-$side.out" "$PL_TMP/$name-ntb-$side.out"; then
			diff "$PL_TMP/$name-tcp-$side.out" "$PL_TMP/$name-ntb-$side.out" | sed 's/^/  /'
			pl_fail "$name: the $side sees over ntb (>) what it does not over kernel TCP (<)"
		fi
	done
	a=$(( $(pl_count_log a ': ntb (link') - before_a ))
	b=$(( $(pl_count_log b ': ntb (link') - before_b ))
	[ $a -eq $conns ] && [ $b -eq $conns ] ||
		pl_fail "$name: $a (host A) and $b (host B) of $conns connections were ntb"
	echo "$name: as over kernel TCP, over ntb:"
	sed 's/^/  /' "$PL_TMP/$name-ntb-srv.out" "$PL_TMP/$name-ntb-cli.out"
}

# opts_case NAME EXTRA [reset]: the listener-options case NAME with the server's EXTRA; the
# accepted connection's recv ends on its receive timeout, and with "reset" its close resets
opts_case() {
	srv_extra=$2
	run_case $1 1 listen-opts -- listen-opts-client
	grep -qx 'recv error EAGAIN' "$PL_TMP/$1-ntb-srv.out" ||
		pl_fail "$1: the recv did not end on the receive timeout"
	[ "$3" != reset ] || grep -qx 'client recv error Connection reset by peer' "$PL_TMP/$1-ntb-cli.out" ||
		pl_fail "$1: the close did not reset (SO_LINGER 0)"
}
opts_case listener-opts '' reset
opts_case listener-opts-early early reset
opts_case listener-opts-fork fork
srv_extra=backlog
run_case listener-opts-backlog 1 listen-opts -- listen-opts-client
grep -qx 'recv data' "$PL_TMP/listener-opts-backlog-ntb-srv.out" ||
	pl_fail "listener-opts-backlog: the recv did not wait for the client's byte"
srv_extra=
run_case accept4-nonblock 2 accept-nb -- accept-nb-client
grep -qx 'accept4-nonblock: first recv error EAGAIN' "$PL_TMP/accept4-nonblock-ntb-srv.out" ||
	pl_fail "accept4-nonblock: the accepted socket's recv did not fail with EAGAIN"
grep -qx 'accept: first recv data' "$PL_TMP/accept4-nonblock-ntb-srv.out" ||
	pl_fail "accept4-nonblock: the later accept()'s socket did not block for the data"
echo "PASS"
