#!/bin/sh
# SPDX-License-Identifier: MIT
# What a program sees after its peer reset the connection (closed it with bytes unread), as
# kernel TCP shows it: poll IN|OUT|ERR|HUP|RDHUP while the error is pending, the error reported
# by one call (ECONNRESET; the bytes that came before it are read first), then the socket shut
# both ways: poll without ERR, receives 0, sends EPIPE. Before: no POLLRDHUP ever, POLLERR for
# good (and none at first with bytes unread), ECONNRESET from every later call. Two cases: the
# server has the client's bytes unread (withdata) or not (nodata). Kernel TCP's transcript
# first, then ntb's, compared.
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup reset-sem

cat >"$PL_TMP/rst.py" <<'EOF'
import os, select, socket, sys, time
role, addr, port, case, sync = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def bits(e):
    return "|".join(n for n, b in (("IN", select.POLLIN), ("OUT", select.POLLOUT),
        ("ERR", select.POLLERR), ("HUP", select.POLLHUP), ("RDHUP", select.POLLRDHUP)) if e & b)
if role == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((addr, port)); l.listen(1)
    c, _ = l.accept()
    c.sendall(b"unread by the client")
    if case == "nodata":
        assert c.recv(5) == b"hello"
    open(sync + ".srv", "w").close()
    while not os.path.exists(sync + ".cli"):  # the client closed (a reset) by then
        time.sleep(0.01)
    p = select.poll(); p.register(c, select.POLLIN | select.POLLOUT | select.POLLRDHUP)
    for what in ("poll", "recv", "poll", "send", "poll", "recv", "send", "poll", "soerror"):
        try:
            if what == "poll":
                print("poll", [bits(e) for f, e in p.poll(3000)], flush=True)
            elif what == "soerror":
                print("SO_ERROR", c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), flush=True)
            elif what == "send":
                print("send ->", c.send(b"z" * 100), flush=True)
            else:
                print("recv ->", len(c.recv(100)), flush=True)
        except OSError as e:
            print(what, "->", type(e).__name__, e.errno, flush=True)
else:
    s = socket.create_connection((addr, port))
    s.sendall(b"hello")
    while not os.path.exists(sync + ".srv"):  # the server's bytes sent: they stay unread here
        time.sleep(0.01)
    time.sleep(0.1)
    s.close()
    open(sync + ".cli", "w").close()
EOF

n=0
for case in withdata nodata; do
	for t in plain ntb; do
		n=$((n + 1)); port=$(pl_port $n); sync=$PL_TMP/sync-$n
		[ $t = plain ] && { sh=plain ch=plain addr=127.0.0.1; } || { sh=b ch=a addr=127.0.0.2; }
		pl_bg $sh python3 "$PL_TMP/rst.py" server $addr $port $case "$sync"; srv=$PL_LAST
		pl_wait_port $addr $port
		pl_run $ch python3 "$PL_TMP/rst.py" client $addr $port $case "$sync" ||
			pl_fail "$case over $t: the client failed"
		wait $srv || { cat "$PL_LAST_OUT"; pl_fail "$case over $t: the server failed"; }
		cp "$PL_LAST_OUT" "$PL_TMP/$case-$t.out"
	done
	echo "--- $case"; cat "$PL_TMP/$case-ntb.out"
	diff -u "$PL_TMP/$case-plain.out" "$PL_TMP/$case-ntb.out" ||
		pl_fail "after a reset ($case) ntb differs from kernel TCP (- kernel, + ntb)"
done
[ "$(pl_count_log b "ntb (link")" -ge 2 ] || pl_fail "the connections were not ntb"
pl_refute_log b "failed over"
echo "after a peer's reset: as over kernel TCP: ok"
