#!/bin/sh
# SPDX-License-Identifier: MIT
# close() after the peer closed first, its TCP FIN already in (tp_close_after_fin() finds it and
# keeps nothing; test_pl_close_order covers a FIN still on its way). The server sends 64 KiB and
# closes; the client reads them and the end of the stream, waits until its kernel socket is in
# CLOSE_WAIT (/proc/net/tcp: the server's FIN is in), then closes. As over kernel TCP, run
# first here: the close returns at once (the median of the rounds well below the library's
# 100 ms bound on waiting for a FIN), the server's side keeps every TIME_WAIT and the
# client's none (a clean FIN exchange ended by the side that closed first), and no reset is
# sent (Tcp OutRsts). Over ntb every connection must be ntb and the payload must not cross
# the kernel's loopback.
. "$(dirname "$0")/lib.sh"
pl_need python3 ss
pl_setup close-passive
N=20

cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1])))
s.listen(8)
print("ready", flush=True)
for i in range(int(sys.argv[2])):
    c, _ = s.accept()
    if c.recv(1) != b"q":
        sys.exit("no request")
    c.sendall(bytes(range(256)) * 256)
    c.close()
PY
cat >"$PL_TMP/cli.py" <<'PY'
import socket, statistics, sys, time
port, rounds = int(sys.argv[1]), int(sys.argv[2])
want = bytes(range(256)) * 256

def tcp_state(lport):
    # the state of our socket (local 127.0.0.1:LPORT) in /proc/net/tcp, hex
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[1] == "0100007F:%04X" % lport and f[2] == "0200007F:%04X" % port:
            return f[3]
    return None

times = []
for i in range(rounds):
    c = socket.create_connection(("127.0.0.2", port))
    lport = c.getsockname()[1]
    c.sendall(b"q")
    got = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += b
    if got != want:
        sys.exit("round %d: read %d bytes, not the 64 KiB sent" % (i, len(got)))
    end = time.monotonic() + 5
    while tcp_state(lport) != "08":          # TCP_CLOSE_WAIT: the server's FIN is in
        if time.monotonic() > end:
            sys.exit("round %d: the server's FIN never arrived (state %s)" % (i, tcp_state(lport)))
        time.sleep(0.001)
    t = time.monotonic()
    c.close()
    times.append(time.monotonic() - t)
print("median_ms %.3f max_ms %.3f" % (statistics.median(times) * 1e3, max(times) * 1e3))
PY

rsts() { awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "OutRsts") k = i; h = 1 }
	else print $k }' /proc/net/snmp; }
tw() { ss -Htan state time-wait "( sport = :$2 or dport = :$2 )" | awk -v a="$1:$2" '$3 == a' | wc -l; }

# run NAME PORT ENV_SERVER ENV_CLIENT: one pass; checks what must hold over kernel TCP as well
run() {
	r0=$(rsts)
	env $3 timeout 60 python3 "$PL_TMP/srv.py" $2 $N >"$PL_TMP/srv-$1.out" 2>&1 &
	S=$!; PL_PIDS="$PL_PIDS $S"
	pl_wait_text "$PL_TMP/srv-$1.out" ready
	env $4 timeout 60 python3 "$PL_TMP/cli.py" $2 $N >"$PL_TMP/cli-$1.out" 2>&1 ||
		pl_fail "$1: client: $(cat "$PL_TMP/cli-$1.out")"
	wait $S || pl_fail "$1: server: $(cat "$PL_TMP/srv-$1.out")"
	sleep 0.2 # (the last round's final ACK)
	out=$(cat "$PL_TMP/cli-$1.out")
	srv_tw=$(tw 127.0.0.2 $2); cli_tw=$(ss -Htan state time-wait "( dport = :$2 )" | wc -l)
	r=$(( $(rsts) - r0 ))
	echo "$1: close $out; TIME_WAIT server side $srv_tw, client side $cli_tw; resets sent $r"
	med=$(echo "$out" | awk '{ print $2 }')
	awk -v m="$med" 'BEGIN { exit !(m < 50) }' ||
		pl_fail "$1: close() after the peer's FIN took $med ms (median of $N)"
	[ "$srv_tw" -eq $N ] || pl_fail "$1: $srv_tw of $N TIME_WAITs on the server's side"
	[ "$cli_tw" -eq 0 ] || pl_fail "$1: $cli_tw TIME_WAITs on the client's side"
	[ "$r" -eq 0 ] || pl_fail "$1: $r resets sent"
}

port=$(pl_port 51)
run tcp $port "$(pl_env plain)" "$(pl_env plain)"
port=$((port + 1))
before=$(pl_lo_bytes)
run ntb $port "$(pl_env b)" "$(pl_env a)"
pl_assert_lo_below "$before" $((N * 20000))
[ "$(pl_count_log a ': ntb (link')" -eq $N ] ||
	pl_fail "$(pl_count_log a ': ntb (link') of $N connections were ntb on the client"
[ "$(pl_count_log b ': ntb (link')" -eq $N ] ||
	pl_fail "$(pl_count_log b ': ntb (link') of $N connections were ntb on the server"
echo "PASS"
