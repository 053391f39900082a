#!/bin/sh
# SPDX-License-Identifier: MIT
# Echo servers under the library on host B, a many-connection non-blocking client on host A:
#  - edge-triggered epoll server, 1000 concurrent clients, each writing 20000 bytes at once
#    through a pool of 32 transfer contexts (data rings): all ntb, the rings granted in turn
#    (a connection without one sends through its inline slots), every echo exact;
#  - fork-per-connection server (the child serves what the parent accepted and closed);
#  - pre-forked workers sharing one listener;
#  - a client whose sockets join an edge-triggered epoll set before connect() (nginx, Go).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup echo
ECHO=$BUILD/tests/pl_echo
[ -x "$ECHO" ] || pl_skip "$ECHO not built"
ulimit -n 4096 2>/dev/null || true
[ "$(ulimit -n)" -ge 2100 ] || pl_skip "needs 2100 fds (ulimit -n is $(ulimit -n))"
ctx=${PL_CONTEXTS:-32}
[ "$ctx" = default ] && ctx=4096 # the config's own count: only "some fell back" is checked

n=0
run() { # NCONN BYTES SERVER-MODE [ARGS]
	nconn=$1; bytes=$2; shift 2
	n=$((n + 1))
	port=$(pl_port $n)
	: >"$PL_TMP/a.log"
	pl_bg b "$ECHO" "$1" 127.0.0.2 $port $2
	srv=$PL_LAST
	pl_wait_port 127.0.0.2 $port
	pl_run a "$ECHO" ${CLIENT:-client} 127.0.0.2 $port $nconn $bytes ||
		pl_fail "${CLIENT:-client} vs $1 server failed"
	kill $srv 2>/dev/null
	ntb=$(pl_count_log a ': ntb (link')
	tcp=$(pl_count_log a ': tcp (')
	noctx=$(pl_count_log a 'tcp (no receive context)')
	echo "$1 server: $nconn clients: $ntb ntb, $tcp tcp ($noctx: no receive context)"
	[ "$ntb" -ge 1 ] || pl_fail "$1: no ntb connection"
	[ $((ntb + tcp)) -eq "$nconn" ] || pl_fail "$1: $ntb + $tcp != $nconn connections logged"
}

# All 1000 are opened before any finishes, with $ctx transfer contexts per host: every one is
# ntb (a connection slot each); the data rings go round.
run 1000 20000 et
slow=$(pl_count_log a 'tcp (ntb set-up slower than the TCP handshake may wait)')
other=$(grep -F 'tcp (' "$PL_TMP/a.log" | grep -vF -e 'ntb set-up slower')
[ -z "$other" ] || pl_fail "et: unexpected fall-back reasons: $other"
# (a client whose set-up took longer than its held handshake ACK may wait, on a loaded machine:
# 1000 set-ups at once, also falls back, with its own reason; nothing else may)
[ $((ntb + slow)) -eq 1000 ] || pl_fail "et: $ntb ntb + $slow slow set-ups of 1000"
[ "$ntb" -ge 900 ] || pl_fail "et: only $ntb of 1000 ntb"
[ "$slow" -eq 0 ] || echo "et: $slow set-ups slower than the held ACK may wait (tcp)"
# Sockets that join an epoll set before connect() (nginx, Go): the registration must follow
# the connection onto NTB, or these clients stall.
CLIENT=eclient run 50 100000 et
[ "$ntb" -ge 1 ] || pl_fail "eclient: no ntb connection"
run 20 200000 fork
run 20 200000 prefork 4
pl_assert_log b "ntb (link"
echo "echo servers: ok"
