#!/bin/sh
# SPDX-License-Identifier: MIT
# Files the library opens are opened safely:
#  1. the shm link file and the host tables beside it are created 0600, owned by the user;
#  2. a link file that is a symlink is refused (no write through it; the victim is unchanged)
#     and the programs work over TCP; the same for a host table (<link>.side1) symlink;
#  3. a link file owned by another user (nobody) is refused, programs work over TCP;
#  4. NTBSOCK_LOG_FILE naming a symlink is not followed (the victim is unchanged), and the
#     program works.
# Every "works" is a verified 1 MiB stream each way (tests/helpers/fail_peer).
. "$(dirname "$0")/lib.sh"
pl_need ss cmp
pl_setup security-files
port=$(pl_port 10)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"
ok() { echo "ok: $*"; }

# stream HOSTA_EXTRA_ENV: one verified connection from A to a fresh server on B; prints the
# client's log line for it. Fails the test if the bytes are not exact.
n=0
stream() {
	n=$((n + 1))
	env $(pl_env b) "$F" server 127.0.0.2 $port -n 1 >"$PL_TMP/srv.$n.out" 2>&1 &
	s=$!; PL_PIDS="$PL_PIDS $s"
	pl_wait_port 127.0.0.2 $port
	env $(pl_env a) "$@" timeout 60 "$F" client 127.0.0.2 $port -s $n -b 1048576 >"$PL_TMP/cli.$n.out" 2>&1 ||
		pl_fail "stream $n: client failed: $(cat "$PL_TMP/cli.$n.out")"
	wait $s
	grep -q '^END reason=eof .*bad=0' "$PL_TMP/cli.$n.out" || pl_fail "stream $n: $(cat "$PL_TMP/cli.$n.out")"
	grep -q '^END reason=eof .*bad=0' "$PL_TMP/srv.$n.out" || pl_fail "stream $n (server): $(cat "$PL_TMP/srv.$n.out")"
}

# 1. modes
stream
pl_assert_log a ': ntb (link'
for f in "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1; do
	[ -e "$f" ] || continue
	m=$(stat -c '%a %u' "$f")
	[ "$m" = "600 $(id -u)" ] || pl_fail "$f: mode/owner '$m', want '600 $(id -u)'"
	ok "$f created with mode 600"
done
rm -f "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1

# 2. symlinked link file
printf 'precious\n' >"$PL_TMP/victim"; cp "$PL_TMP/victim" "$PL_TMP/victim.orig"
ln -s "$PL_TMP/victim" "$PL_LINK"
: >"$PL_TMP/a.log"
stream
cmp -s "$PL_TMP/victim" "$PL_TMP/victim.orig" || pl_fail "the library wrote through the symlinked link file"
[ -L "$PL_LINK" ] || pl_fail "the symlink was replaced"
pl_refute_log a ': ntb (link'
ok "symlinked link file refused; victim unchanged; TCP works ($(grep -m1 -o 'tcp ([^)]*)' "$PL_TMP/a.log"))"
rm -f "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1

# 2b. symlinked host table of side 1 (B): B must not write through it
ln -s "$PL_TMP/victim" "$PL_LINK.side1"
: >"$PL_TMP/a.log"
stream
cmp -s "$PL_TMP/victim" "$PL_TMP/victim.orig" || pl_fail "the library wrote through the symlinked host table"
ok "symlinked host table not followed; victim unchanged; streams work"
rm -f "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1

# 3. link file owned by another user
if id nobody >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	stream                       # creates a valid link file
	chown nobody "$PL_LINK"
	: >"$PL_TMP/a.log"
	stream
	pl_refute_log a ': ntb (link'
	[ "$(stat -c %U "$PL_LINK")" = nobody ] || pl_fail "owner changed"
	ok "link file owned by nobody refused; TCP works ($(grep -m1 -o 'tcp ([^)]*)' "$PL_TMP/a.log"))"
	"$BUILD/ntbsock" check -c "$PL_TMP/a.conf" >"$PL_TMP/check.out" 2>&1
	grep -qi 'owned\|uid\|permission' "$PL_TMP/check.out" ||
		pl_fail "ntbsock check does not say why the link is unusable: $(cat "$PL_TMP/check.out")"
	ok "ntbsock check: $(grep -i -m1 'owned\|uid\|permission' "$PL_TMP/check.out")"
	rm -f "$PL_LINK" "$PL_LINK".side0 "$PL_LINK".side1
else
	echo "note: not root or no user nobody: foreign-owner case not run"
fi

# 4. log file symlink
printf 'precious log\n' >"$PL_TMP/victim2"; cp "$PL_TMP/victim2" "$PL_TMP/victim2.orig"
ln -s "$PL_TMP/victim2" "$PL_TMP/log-link"
n=$((n + 1))
env $(pl_env b) "$F" server 127.0.0.2 $port -n 1 >"$PL_TMP/srv.$n.out" 2>&1 &
s=$!; PL_PIDS="$PL_PIDS $s"
pl_wait_port 127.0.0.2 $port
env $(pl_env a) NTBSOCK_LOG_FILE="$PL_TMP/log-link" timeout 60 "$F" client 127.0.0.2 $port -s $n -b 1048576 \
	>"$PL_TMP/cli.$n.out" 2>&1 || pl_fail "client with a symlinked log file failed: $(cat "$PL_TMP/cli.$n.out")"
wait $s
grep -q '^END reason=eof .*bad=0' "$PL_TMP/cli.$n.out" || pl_fail "log-symlink stream: $(cat "$PL_TMP/cli.$n.out")"
cmp -s "$PL_TMP/victim2" "$PL_TMP/victim2.orig" || pl_fail "the library wrote its log through a symlink"
ok "NTBSOCK_LOG_FILE symlink not followed; victim unchanged; program works"
echo "file security: ok"
