#!/bin/sh
# SPDX-License-Identifier: MIT
# exec adoption (doc/design.md §7): a server on host B accepts an NTB connection, echoes 1000 bytes,
# then execs a new image that serves the rest of the stream; the client on host A must get every
# byte back exactly, over the link (loopback counters), and B's log must show the adoption.
#  1. exec succeeds: the new image adopts the connection (and its dup), through every exec call;
#  2. exec fails: the caller keeps its connection and serves it;
#  3. the fd is FD_CLOEXEC: the exec closes the connection, the client sees EOF while the
#     new image still runs;
#  4. a listener inherited across exec: the new image accepts NTB connections on it;
#  5. the new image runs without the library: the connection is reset, the client errors out
#     instead of hanging;
#  6. a forged or stale NTBSOCK_INHERIT is validated entry by entry, ignored with a log line,
#     and removed from the environment;
#  7. 110 images of one process, exec after exec, each connecting: all over ntb (the link's
#     claim slots of replaced images are reaped).
. "$(dirname "$0")/lib.sh"
pl_need ss
pl_setup exec
EX=$BUILD/tests/pl_exec
[ -x "$EX" ] || pl_skip "$EX not built"
PL_TIMEOUT=60
BYTES=20000000

n=0
start() { # MODE [CALL]: server on B, sets port and srv
	n=$((n + 1))
	port=$(pl_port $n)
	: >"$PL_TMP/a.log"; : >"$PL_TMP/b.log"
	pl_bg b "$EX" "$1" 127.0.0.2 $port $2
	srv=$PL_LAST
	srv_out=$PL_LAST_OUT
	pl_wait_port 127.0.0.2 $port
}

# 1. exec succeeds.
start serve-exec
before=$(pl_lo_bytes)
pl_run a "$EX" client 127.0.0.2 $port $BYTES >"$PL_TMP/client.out" || pl_fail "exec: client failed"
wait $srv || pl_fail "exec: server (after exec) failed"
pl_assert_lo_below "$before" 1000000
pl_assert_log a ": ntb (link"
pl_assert_log b "ntb (link ab, adopted across exec)"
grep -q "echoed $BYTES bytes exactly" "$PL_TMP/client.out" || pl_fail "exec: client did not report"
grep -q "child: echoed $((BYTES - 1000)) bytes after exec" "$srv_out" ||
	pl_fail "exec: the new image did not echo the rest ($(cat "$srv_out"))"
echo "exec: adopted, $BYTES bytes exact"

# 1b. every exec entry point hands over (glibc's execl*/execvp* do not go through execve).
for call in execve execl execle execlp execvp execvpe execveat fexecve; do
	start serve-exec $call
	pl_run a "$EX" client 127.0.0.2 $port 300000 >"$PL_TMP/client.out" ||
		pl_fail "$call: client failed"
	wait $srv || pl_fail "$call: server (after exec) failed"
	pl_assert_log b "ntb (link ab, adopted across exec)"
	grep -q "echoed 300000 bytes exactly" "$PL_TMP/client.out" || pl_fail "$call: client did not report"
done
echo "exec: all exec calls hand over"

# 2. exec fails: the connection is taken back.
start serve-execfail
before=$(pl_lo_bytes)
pl_run a "$EX" client 127.0.0.2 $port $BYTES >"$PL_TMP/client.out" || pl_fail "execfail: client failed"
wait $srv || pl_fail "execfail: server failed"
pl_assert_lo_below "$before" 1000000
pl_assert_log a ": ntb (link"
pl_refute_log b "adopted across exec"
pl_refute_log b "cannot be taken back"
grep -q "echoed $BYTES bytes exactly" "$PL_TMP/client.out" || pl_fail "execfail: client did not report"
grep -q "exec failed as intended" "$srv_out" || pl_fail "execfail: exec did not fail"
echo "exec failure: connection kept, bytes exact"

# 3. FD_CLOEXEC: the connection closes at exec, the peer sees EOF while the new image lives.
start serve-cloexec
pl_run a "$EX" client-eof 127.0.0.2 $port || pl_fail "cloexec: no EOF at the client"
wait $srv || pl_fail "cloexec: the fd was still open in the new image"
pl_assert_log a ": ntb (link"
pl_refute_log b "adopted across exec"
echo "exec with FD_CLOEXEC: closed, peer saw EOF"

# 4. a listener inherited across exec (socket hand-over, binary upgrade).
start serve-listen-exec
sleep 0.5 # (the client may also come during the exec: the kernel queues it)
before=$(pl_lo_bytes)
pl_run a "$EX" client 127.0.0.2 $port 3000000 >"$PL_TMP/client.out" || pl_fail "listener: client failed"
wait $srv || pl_fail "listener: server failed"
pl_assert_lo_below "$before" 1000000
pl_assert_log a ": ntb (link"
pl_assert_log b "ntb (link ab, accepted on fd"
echo "listener inherited across exec: accepts over ntb"

# 5. the new image has no library: reset, not a hang.
start serve-exec-nolib
rc=0
pl_run a "$EX" client 127.0.0.2 $port $BYTES 2>"$PL_TMP/client.err" || rc=$?
[ $rc -ne 0 ] || pl_fail "nolib: the client succeeded although nobody could serve NTB"
[ $rc -ne 124 ] || pl_fail "nolib: the client hung"
pl_assert_log b "reset at exec: the new program does not preload libntbsock"
wait $srv
echo "exec without the library: connection reset (client rc $rc)"
# 6. bad entries: not a socket, unknown link, a stale token, malformed, overflowing numbers.
: >"$PL_TMP/b.log"
out=$(env $(pl_env b) NTBSOCK_INHERIT='c:0:ab:123,c:5:nolink:1,l:1,garbage,c:x:ab:1,c:3:ab:18446744073709551616,c:3:ab:-1' \
	timeout 20 sh -c 'echo "${NTBSOCK_INHERIT-unset}"' </dev/null) || pl_fail "bad entries: sh failed"
[ "$out" = unset ] || pl_fail "NTBSOCK_INHERIT still set in the program: '$out'"
pl_assert_log b "inherited fd 0 ignored: not a TCP socket"
pl_assert_log b "link nolink is not in this config"
pl_assert_log b "inherited listener fd 1 ignored: not a TCP socket"
[ "$(pl_count_log b 'bad NTBSOCK_INHERIT entry ignored')" -eq 4 ] ||
	pl_fail "expected 4 malformed entries logged: $(cat "$PL_TMP/b.log")"
pl_refute_log b "adopted across exec"
echo "bad NTBSOCK_INHERIT entries: ignored, variable removed"

# 7. a process that execs again and again: each image opens the link (a claim slot of its
# side, 96 per side) and the claims of the images exec replaced are reaped, so the last of
# 110 images still connects over ntb; each image's connection, closed just before its exec,
# gives its receive context back at the exec (32 contexts here: 110 connections).
: >"$PL_TMP/a.log"; : >"$PL_TMP/b.log"
port=$(pl_port 40)
pl_bg b "$BUILD/tests/pl_echo" fork 127.0.0.2 $port
echo_srv=$PL_LAST
pl_wait_port 127.0.0.2 $port
pl_run a "$EX" exec-chain 127.0.0.2 $port 109 || pl_fail "exec chain failed"
kill $echo_srv 2>/dev/null
[ "$(pl_count_log a ': ntb (link')" -eq 110 ] && [ "$(pl_count_log a ': tcp (')" -eq 0 ] ||
	pl_fail "exec chain: $(pl_count_log a ': ntb (link') of 110 images over ntb, $(pl_count_log a ': tcp (') over tcp: $(grep -v ': ntb (link' "$PL_TMP/a.log" | tail -5)"
echo "110 images of one process (exec after exec): each connected over ntb"
echo "exec: ok"
