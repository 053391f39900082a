#!/bin/sh
# SPDX-License-Identifier: MIT
# A socket closed through the C library's syscall() (libuv's way, so every Node.js program's)
# ends as close() ends it: a server writes 100,000 bytes and closes its socket with
# syscall(SYS_close), then with syscall(SYS_close_range, fd, fd, 0); each client reads every byte,
# then the end of the stream, within 5 s. The same program over kernel TCP first (the test's own
# check), then under the library, where every connection must be ntb on both hosts. Before the
# library took these calls, its NTB connection lived on without a descriptor and the client
# waited for an end of file for ever. A close of a number not open fails with EBADF, as the
# kernel's.
. "$(dirname "$0")/lib.sh"
pl_need python3
case $(uname -m) in x86_64) ;; *) pl_skip "syscall() is taken over on x86-64 only";; esac
pl_setup syscall-close
port=$(pl_port 1)

cat >"$PL_TMP/srv.py" <<'PY'
import ctypes, errno, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_close, SYS_close_range = 3, 436
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1])))
s.listen(8)
print("listening", flush=True)
data = bytes(i * 7 % 251 for i in range(100000))
for how in ("close", "close_range", "close", "close_range"):
    c, _ = s.accept()
    c.sendall(data)
    fd = c.detach()
    if how == "close":
        r = libc.syscall(ctypes.c_long(SYS_close), ctypes.c_long(fd))
    else:
        r = libc.syscall(ctypes.c_long(SYS_close_range), ctypes.c_long(fd), ctypes.c_long(fd),
                         ctypes.c_long(0))
    print(how, r, flush=True)
r = libc.syscall(ctypes.c_long(SYS_close), ctypes.c_long(999))
print("close 999", r, errno.errorcode.get(ctypes.get_errno()), flush=True)
PY
cat >"$PL_TMP/cli.py" <<'PY'
import socket, sys, time
want = bytes(i * 7 % 251 for i in range(100000))
for k in range(4):
    c = socket.create_connection(("127.0.0.2", int(sys.argv[1])))
    c.settimeout(5)
    got = b""
    t0 = time.monotonic()
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
    except socket.timeout:
        sys.exit("connection %d: no end of file 5 s after %d bytes" % (k, len(got)))
    if got != want:
        sys.exit("connection %d: %d bytes, not the 100000 written" % (k, len(got)))
    print("connection %d: every byte, then the end, after %.1f ms" % (k, (time.monotonic() - t0) * 1000))
    c.close()
PY

run() { # CLIENT-HOST SERVER-HOST
	pl_bg "$2" python3 "$PL_TMP/srv.py" $port
	srv=$PL_LAST
	sout=$PL_LAST_OUT
	pl_wait_port 127.0.0.2 $port
	out=$(pl_run "$1" python3 "$PL_TMP/cli.py" $port 2>&1) || pl_fail "$1: $out"
	echo "$out" | sed "s/^/$1: /"
	wait $srv || pl_fail "$2: server failed: $(cat "$sout")"
	[ "$(grep -c '^close 0$' "$sout")" -eq 2 ] && [ "$(grep -c '^close_range 0$' "$sout")" -eq 2 ] ||
		pl_fail "$2: the system calls did not succeed: $(cat "$sout")"
	grep -q '^close 999 -1 EBADF$' "$sout" || pl_fail "$2: close of a number not open: $(cat "$sout")"
	port=$((port + 1))
}

run plain plain
run a b
na=$(pl_count_log a ': ntb (link ab')
nb=$(pl_count_log b ': ntb (link ab')
echo "connections: host A $na ntb, host B $nb ntb"
[ "$na" -eq 4 ] && [ "$nb" -eq 4 ] || pl_fail "not every connection was ntb"
echo "PASS"
