#!/bin/sh
# SPDX-License-Identifier: MIT
# A service started as its own user (nobody, in the link's group) uses a link whose files root's
# processes created, through the link's mode "0660", group and allow_foreign_owner (as
# ntbsock.conf(5) says): the mode and group apply to the link file and to each host table
# (path.side0, path.side1) exactly, whatever the umask. Host A's root server creates the link
# file and .side0, a root server on host B creates .side1; then a server started through
# `setpriv --reuid=nobody` (itself under the library: its set*id calls must not abort it)
# serves 8 clients of host A 1 MiB each over ntb, with the kernel's loopback carrying almost
# nothing.
. "$(dirname "$0")/lib.sh"
pl_need ss pgrep setpriv
[ "$(id -u)" = 0 ] || pl_skip "needs root (root's processes create the link, nobody uses it)"
id nobody >/dev/null 2>&1 || pl_skip "no user nobody"
pl_setup link-group
ECHO=$BUILD/tests/pl_echo
[ -x "$ECHO" ] || pl_skip "test helpers not built"
chmod 755 "$PL_TMP"
umask 022
gid=$(id -g nobody)
for h in a b; do
	sed -i "s#^\( *path = \"$PL_LINK\";\)#\1 mode = \"0660\"; group = $gid; allow_foreign_owner = true;#" \
		"$PL_TMP/$h.conf"
	grep -q 'mode = "0660"' "$PL_TMP/$h.conf" || pl_fail "mode not set in $h.conf"
	chmod 644 "$PL_TMP/$h.conf"
done
touch "$PL_TMP/b.log"
chown nobody "$PL_TMP/b.log"
p_a=$(pl_port 1)
p_b=$(pl_port 2)
p=$(pl_port 3)

pl_bg a "$ECHO" et 127.0.0.1 $p_a
pl_wait_port 127.0.0.1 $p_a
pl_bg b "$ECHO" et 127.0.0.2 $p_b
pl_wait_port 127.0.0.2 $p_b
ls -l "$PL_LINK"*
for f in "$PL_LINK" "$PL_LINK.side0" "$PL_LINK.side1"; do
	[ "$(stat -c %u:%g:%a "$f")" = "0:$gid:660" ] || pl_fail "$f is not root:$gid mode 0660"
done

# (nobody must reach the library and the helper: a build under a 0700 directory, as mktemp -d
# makes for CI's clone, cannot be loaded by it, and the server would run without the library;
# then copies of both in the test's own directory, open to it, serve)
if ! setpriv --reuid=nobody --regid=$gid --clear-groups sh -c "test -r '$PL_LIB' && test -x '$ECHO'"; then
	mkdir -p "$PL_TMP/bin"
	cp "$PL_LIB" "$ECHO" "$PL_TMP/bin/"
	chmod 755 "$PL_TMP/bin" "$PL_TMP/bin/"*
	PL_LIB=$PL_TMP/bin/$(basename "$PL_LIB")
	ECHO=$PL_TMP/bin/$(basename "$ECHO")
	setpriv --reuid=nobody --regid=$gid --clear-groups sh -c "test -r '$PL_LIB' && test -x '$ECHO'" ||
		pl_fail "user nobody cannot read the copies in $PL_TMP/bin"
fi
pl_bg b setpriv --reuid=nobody --regid=$gid --clear-groups "$ECHO" et 127.0.0.2 $p
srv=$PL_LAST
pl_wait_port 127.0.0.2 $p
# the kernel listens before the library's advertisement of the port reaches host A's window
# (a client then goes tcp, "no listener": seen once in a loaded CI run): give it a moment
sleep 0.5
spid=$(pgrep -P $srv | head -n 1)
[ -n "$spid" ] && grep -q "^Uid:[[:space:]]*65534[[:space:]]" /proc/$spid/status ||
	pl_fail "the server does not run as nobody"

before=$(pl_lo_bytes)
pl_run a "$ECHO" client 127.0.0.2 $p 8 1048576 >"$PL_TMP/client.out" 2>&1 ||
	pl_fail "echo through the server failed: $(cat "$PL_TMP/client.out")"
pl_assert_lo_below "$before" 1048576
pl_refute_log b "cannot open"
ntb=$(grep -F "[$spid]" "$PL_TMP/b.log" | grep -cF "127.0.0.2:$p -> 127.0.0.1:" | head -n 1)
[ "$ntb" -eq 8 ] && [ "$(grep -F "[$spid]" "$PL_TMP/b.log" | grep -F "127.0.0.2:$p -> " |
	grep -cF ': ntb (link ab')" -eq 8 ] || pl_fail "not all 8 connections of nobody's server were ntb"
echo "a service of user nobody uses root's link through its mode and group: ok"
