#!/bin/sh
# SPDX-License-Identifier: MIT
# A listener made while its link could not be opened is advertised when the link opens later,
# and each listener withdraws only its own advertisements:
#  1. host B's server listens while the link file's path is taken (a directory): the open fails;
#  2. the path is freed; a client of host A goes over TCP (no peer side yet), and the server's
#     accept of it opens the link (a failed open is retried after a second);
#  3. the next client must go ntb: the link's open advertised the listener made before it
#     (before, its clients used TCP for as long as that listener lived: "no listener");
#  4. a second listener on the port (SO_REUSEPORT), then the first one closed: still ntb;
#  5. the second one closed too (the process lives on): the port is no longer advertised, so a
#     client of a plain server on it gets "no listener", not a set-up that nobody answers;
#  6. a listener and its dup inherited across exec (two listeners after it, one reference
#     before): closing the dup leaves the port advertised, closing both withdraws it.
# Every client's bytes are echoed and compared.
. "$(dirname "$0")/lib.sh"
pl_need ss python3
PL_LOG_LEVEL=debug
pl_setup listen-late-link
port=$(pl_port 1)
ctl=$PL_TMP/ctl
mkdir "$ctl"

# serve.py: the servers' loop (imported by srv.py and exec2.py): listeners registered with the
# selector as "l" accept, each connection is echoed until its end; STEPS (name, action) run,
# in order, once the control file of that name exists.
cat >"$PL_TMP/serve.py" <<'PY'
import os, selectors
sel = selectors.DefaultSelector()
def listen(s):
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, "l")
    return s
def run(ctl, steps):
    while True:
        if steps and os.path.exists(os.path.join(ctl, steps[0][0])):
            name, act = steps.pop(0)
            act()
            print(name, flush=True)
        for key, _ in sel.select(0.05):
            s = key.fileobj
            if key.data == "l":
                try:
                    c, _ = s.accept()
                except BlockingIOError:
                    continue
                c.setblocking(True)
                sel.register(c, selectors.EVENT_READ, "c")
            else:
                b = s.recv(65536)
                if b:
                    s.sendall(b)
                else:
                    sel.unregister(s); s.close()
def close(s):
    sel.unregister(s); s.close()
PY
cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys
from serve import listen, run, close
port, ctl = int(sys.argv[1]), sys.argv[2]
def listener():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.2", port))
    s.listen(64)
    return listen(s)
ls = {1: listener()}
print("s1", flush=True)
run(ctl, [("two", lambda: ls.update({2: listener()})), ("close1", lambda: close(ls.pop(1))),
          ("close2", lambda: close(ls.pop(2)))])
PY

# client CASE WHAT: a new host-A process; its bytes must come back, over WHAT ("ntb", or the
# reason it logs for TCP).
client() {
	: >"$PL_TMP/a.log"
	PL_TIMEOUT=$((60 * PL_SLOW)) pl_run a python3 "$(pl_echo_client)" 127.0.0.2 $port >"$PL_TMP/cli.out" 2>&1 ||
		pl_fail "$1: client failed: $(cat "$PL_TMP/cli.out")"
	grep -q '^ok 200000$' "$PL_TMP/cli.out" || pl_fail "$1: no echo: $(cat "$PL_TMP/cli.out")"
	if [ "$2" = ntb ]; then
		pl_assert_log a ': ntb (link ab'
	else
		pl_assert_log a "tcp ($2"
		pl_refute_log a ': ntb (link'
	fi
	echo "$1: $2"
}

# 1. the link cannot be opened as the server listens
rm -f "$PL_LINK"
mkdir "$PL_LINK"
pl_bg b python3 "$PL_TMP/srv.py" $port "$ctl"
srv_out=$PL_LAST_OUT
pl_wait_text "$srv_out" s1 30
pl_wait_port 127.0.0.2 $port
pl_assert_log b "link ab: cannot open"
pl_refute_log b "advertised on link ab"

# 2. freed; the first client goes TCP, the server's accept of it opens the link
rmdir "$PL_LINK"
sleep 1.2 # (a failed open is retried after a second)
client "before the link opened" "link down: no ntbsock on the peer host"
pl_wait_count b "port $port advertised on link ab" 1 10 || echo "note: the server did not log the advertisement"

# 3. advertised now
client "after the link opened" ntb

# 4. a second listener, then the first closed
touch "$ctl/two"
pl_wait_text "$srv_out" two 10
touch "$ctl/close1"
pl_wait_text "$srv_out" close1 10
client "second listener, first closed" ntb

# 5. both closed, the process alive; a plain server takes the port
touch "$ctl/close2"
pl_wait_text "$srv_out" close2 10
pl_bg plain python3 "$(pl_echo_server)" 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
client "both closed, plain server" "no listener"
kill $PL_LAST

# 6. a listener with two fds (a dup) inherited across exec: one advertisement before exec, two
# listeners after it (one per fd); closing the dup must leave the port advertised, closing the
# other too must withdraw it.
port=$(pl_port 2)
rm -f "$ctl"/*
cat >"$PL_TMP/exec1.py" <<'PY'
import os, socket, sys
port = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", port))
s.listen(64)
d = os.dup(s.fileno())
os.set_inheritable(s.fileno(), True)
os.set_inheritable(d, True)
os.execv(sys.executable, [sys.executable, sys.argv[2], str(s.fileno()), str(d), sys.argv[3]])
PY
cat >"$PL_TMP/exec2.py" <<'PY'
import os, socket, sys
from serve import listen, run, close
fd, dup, ctl = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = listen(socket.socket(fileno=fd))
print("exec'd", flush=True)
run(ctl, [("closedup", lambda: os.close(dup)), ("closeorig", lambda: close(s))])
PY
pl_bg b python3 "$PL_TMP/exec1.py" $port "$PL_TMP/exec2.py" "$ctl"
srv_out=$PL_LAST_OUT
pl_wait_text "$srv_out" "exec'd" 30
pl_wait_port 127.0.0.2 $port
client "exec'd with a dup" ntb
pl_assert_log b "port $port advertised on link ab (a reference from before exec)"
touch "$ctl/closedup"
pl_wait_text "$srv_out" closedup 10
client "exec'd, its dup closed" ntb
touch "$ctl/closeorig"
pl_wait_text "$srv_out" closeorig 10
pl_bg plain python3 "$(pl_echo_server)" 127.0.0.2 $port
pl_wait_port 127.0.0.2 $port
client "exec'd, both closed, plain server" "no listener"
echo "PASS"
