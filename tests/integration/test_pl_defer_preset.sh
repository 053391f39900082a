#!/bin/sh
# SPDX-License-Identifier: MIT
# TCP_DEFER_ACCEPT the program sets on a client socket before connect(): the library sets its own
# value (1) while it sets an ntb connection up, and must put the program's back afterwards, as
# kernel TCP keeps it:
#  preset-block      the program sets 3 before a blocking connect(), then reads
#  preset-nonblock   the program sets 7 before a non-blocking connect(), waits until it is
#                    connected, then reads
# Kernel TCP first; the ntb run must print the same, each connection over ntb (set up after a
# few others, so that the library's late connect, which sets the option, is used).
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup defer-preset

cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1])))
s.listen(64)
print("ready", flush=True)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
PY
cat >"$PL_TMP/cli.py" <<'PY'
import errno, os, select, socket, sys
TDA = socket.TCP_DEFER_ACCEPT
case, port = sys.argv[1], int(sys.argv[2])

def get(s):
    return s.getsockopt(socket.IPPROTO_TCP, TDA)

warm = [socket.create_connection(("127.0.0.2", port)) for i in range(3)]

def preset_case(name, value, nonblock):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, TDA, value)
    if nonblock:
        s.setblocking(False)
        if s.connect_ex(("127.0.0.2", port)) not in (0, errno.EINPROGRESS):
            sys.exit("connect failed")
        select.select([], [s], [], 10)
    else:
        s.connect(("127.0.0.2", port))
    print("%s %d" % (name, get(s)), flush=True)

if case == "preset-block":
    preset_case(case, 3, False)
elif case == "preset-nonblock":
    preset_case(case, 7, True)
PY

CASES="preset-block preset-nonblock"
# run NAME PORT ENV_SERVER ENV_CLIENT: every case against a server on PORT, output to NAME.out
run() {
	env $3 timeout 60 python3 "$PL_TMP/srv.py" $2 >"$PL_TMP/srv-$1.out" 2>&1 &
	PL_PIDS="$PL_PIDS $!"
	pl_wait_text "$PL_TMP/srv-$1.out" ready
	for c in $CASES; do
		env $4 timeout 30 python3 "$PL_TMP/cli.py" $c $2 >>"$PL_TMP/$1.out" 2>&1 ||
			pl_fail "$1 $c: $(cat "$PL_TMP/$1.out")"
	done
	echo "$1:"; sed 's/^/  /' "$PL_TMP/$1.out"
}
port=$(pl_port 61)
run tcp $port "$(pl_env plain)" "$(pl_env plain)"
[ "$(cat "$PL_TMP/tcp.out" | tr '\n' ' ')" = "preset-block 3 preset-nonblock 7 " ] || pl_fail "kernel TCP gave other values than this test expects"
run ntb $((port + 1)) "$(pl_env b)" "$(pl_env a)"
cmp -s "$PL_TMP/tcp.out" "$PL_TMP/ntb.out" || pl_fail "over ntb the values differ from kernel TCP's"
n=$(pl_count_log a ': ntb (link')
# (each case: three warm-up connections and the one it checks)
[ "$n" -eq 8 ] || pl_fail "$n of 8 client connections were ntb"
pl_refute_log a ': tcp ('
echo "PASS"
