#!/bin/sh
# SPDX-License-Identifier: MIT
# Sockets passed to another process over a Unix socket (SCM_RIGHTS), as kernel TCP gives them
# (before: a connection passed was reset; a listener passed to a worker without the library
# while its sender kept it split its NTB clients: they sent over NTB what the worker read from
# TCP, and hung; one passed to a worker under the library carried only TCP). A server process
# hands each socket to a worker process that listens on a Unix socket; kernel TCP's
# transcript first, then the same over ntb, then what each case must show in the logs:
#   conn          the server reads "hello", answers, passes the connection while the client's
#                 300 KB are in flight; the worker (under the library) reads them all and answers
#   conn-plain    the same, the worker without the library
#   listen        the server passes its listener and closes it; the worker (library) accepts
#   listen-keep   the server keeps its listener; the worker (library) accepts
#   listen-plain  the server keeps its listener; the worker (no library) accepts
#   listen-from-plain  the server, without the library, keeps its listener; the worker (library)
#                 accepts, and must not advertise it (the server could take its NTB clients)
#   activation   systemd's socket activation: a launcher without the library listens, hands the
#                 listener to a server under the library as fd 3 with LISTEN_PID/LISTEN_FDS
. "$(dirname "$0")/lib.sh"
pl_need python3
pl_setup pass-fds

cat >"$PL_TMP/worker.py" <<'EOF'
import hashlib, os, socket, sys
if sys.argv[1] == "fd3":  # (socket activation: the listener is fd 3; argv[2] names the files)
    tag, s = b"L", socket.socket(fileno=3)
    sys.argv[1] = sys.argv[2]
else:
    u = socket.socket(socket.AF_UNIX)
    u.bind(sys.argv[1]); u.listen(1)
    open(sys.argv[1] + ".ready", "w").close()
    v, _ = u.accept()
    tag, fds, _, _ = socket.recv_fds(v, 16, 1)
    s = socket.socket(fileno=fds[0])
print("worker got", tag, "listening" if s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) else "connected", flush=True)
open(sys.argv[1] + ".got", "w").close()
c = s.accept()[0] if tag == b"L" else s
data = b""
while not data.endswith(b"\n"):
    d = c.recv(65536)
    if not d:
        break
    data += d
print("worker read", len(data), hashlib.sha256(data).hexdigest()[:16], flush=True)
c.sendall(b"worker:%d:%s\n" % (len(data), hashlib.sha256(data).hexdigest()[:16].encode()))
c.close()
EOF
cat >"$PL_TMP/server.py" <<'EOF'
import os, socket, sys, time
mode, path, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((addr, port)); l.listen(8)
u = socket.socket(socket.AF_UNIX); u.connect(path)
if mode.startswith("conn"):
    c, _ = l.accept()
    assert c.recv(5) == b"hello"
    c.sendall(b"parent:hello\n")
    time.sleep(0.05)  # the client's 300 KB in flight, partly unread here
    socket.send_fds(u, [b"C"], [c.fileno()])
    c.close()
else:
    socket.send_fds(u, [b"L"], [l.fileno()])
    if mode == "listen":
        l.close()
print("server passed", mode, flush=True)
time.sleep(float(sys.argv[5]) if len(sys.argv) > 5 else 3)
EOF
cat >"$PL_TMP/launch.py" <<'EOF'
import os, socket, sys
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(8)
os.dup2(l.fileno(), 3) if l.fileno() != 3 else l.set_inheritable(True)
os.environ["LISTEN_PID"], os.environ["LISTEN_FDS"] = str(os.getpid()), "1"
os.execvp(sys.argv[3], sys.argv[3:])
EOF
cat >"$PL_TMP/cli.py" <<'EOF'
import os, socket, sys
mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = socket.create_connection((addr, port), timeout=20)
if mode.startswith("conn"):
    c.sendall(b"hello")
    got = b""
    while not got.endswith(b"\n"):
        got += c.recv(100)
    print("client", got.strip().decode(), flush=True)
c.sendall(bytes(range(256)) * 1200 + b"\n")
got = b""
while True:
    d = c.recv(65536)
    if not d:
        break
    got += d
print("client", got.strip().decode(), "then eof", flush=True)
EOF

# one MODE over T (plain|ntb) with the worker under WHOST: the transcript into $PL_TMP/MODE-T.out
one() {
	mode=$1 t=$2 whost=$3 port=$(pl_port $4)
	us=$PL_TMP/u-$mode-$t
	[ $t = plain ] && { shost=plain chost=plain addr=127.0.0.1; } ||
		{ shost=b chost=a addr=127.0.0.2; }
	[ $t = plain ] && whost=plain
	[ $mode = listen-from-plain ] && shost=plain
	if [ $mode = activation ]; then
		# (the launcher execs the server: the library comes with the server's environment)
		pl_bg plain python3 "$PL_TMP/launch.py" $addr $port env $(pl_env $whost) python3 \
			"$PL_TMP/worker.py" fd3 "$us"
		wk=$PL_LAST wout=$PL_LAST_OUT sv=
		pl_wait_port $addr $port
	else
		pl_bg $whost python3 "$PL_TMP/worker.py" "$us"; wk=$PL_LAST wout=$PL_LAST_OUT
		i=0; while [ ! -e "$us.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		pl_bg $shost python3 "$PL_TMP/server.py" $mode "$us" $addr $port; sv=$PL_LAST
		pl_wait_port $addr $port
	fi
	# a listener's clients come once the worker holds it
	case $mode in listen*|activation) # (the worker's library adopted it before its main)
		i=0; while [ ! -e "$us.got" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done;;
	esac
	out=$PL_TMP/$mode-$t.out
	pl_run $chost python3 "$PL_TMP/cli.py" $mode $addr $port >"$out.cli" 2>&1 ||
		{ cat "$out.cli" "$wout"; pl_fail "$mode over $t: the client failed"; }
	wait $wk || { cat "$wout"; pl_fail "$mode over $t: the worker failed"; }
	[ -z "$sv" ] || { kill $sv 2>/dev/null; wait $sv 2>/dev/null; }
	cat "$wout" "$out.cli" >"$out"
}

n=0
for mode in ${PASS_MODES:-conn conn-plain listen listen-keep listen-plain listen-from-plain activation}; do
	n=$((n + 2))
	case $mode in conn-plain|listen-plain) w=plain;; *) w=b;; esac
	one $mode plain plain $n
	a0=$(pl_count_log a "ntb (link"); at0=$(pl_count_log a ": tcp (")
	b0=$(pl_count_log b "ntb (link"); bf0=$(pl_count_log b "failed over: passed to another process")
	one $mode ntb $w $((n + 1))
	echo "--- $mode"; cat "$PL_TMP/$mode-ntb.out"
	diff -u "$PL_TMP/$mode-plain.out" "$PL_TMP/$mode-ntb.out" ||
		pl_fail "$mode over ntb differs from kernel TCP (- kernel, + ntb)"
	a1=$(pl_count_log a "ntb (link"); at1=$(pl_count_log a ": tcp (")
	b1=$(pl_count_log b "ntb (link"); bf1=$(pl_count_log b "failed over: passed to another process")
	case $mode in
	conn*)	# set up over ntb, moved to the kernel socket when passed
		[ $((a1 - a0)) -eq 1 ] && [ $((bf1 - bf0)) -eq 1 ] ||
			pl_fail "$mode: expected an ntb connection moved for the pass (a ntb +$((a1 - a0)), b moved +$((bf1 - bf0)))";;
	listen|listen-keep|activation)	# the listener was adopted: its connection is ntb
		[ $((a1 - a0)) -eq 1 ] && [ $((b1 - b0)) -eq 1 ] ||
			pl_fail "$mode: the worker's connection was not ntb (a +$((a1 - a0)), b +$((b1 - b0)))";;
	listen-plain|listen-from-plain)	# not all its holders run the library: the client stays tcp
		[ $((at1 - at0)) -eq 1 ] && [ $((a1 - a0)) -eq 0 ] ||
			pl_fail "$mode: the client did not stay tcp (tcp +$((at1 - at0)), ntb +$((a1 - a0)))";;
	esac
done
pl_refute_log b "cannot be passed"
echo "PASS"
