#!/bin/sh
# SPDX-License-Identifier: MIT
# Hostile configs — syntax garbage, binary bytes, deep nesting, huge values, an include of a
# missing file, an include cycle, a 2 MiB file, a directory, an empty file: `ntbsock check -c
# FILE` exits 1 with a message naming FILE, and a program run with `ntbsock run -c FILE`
# still works over TCP (a verified 1 MiB stream each way to a plain server) and its log says
# the config was not used.
. "$(dirname "$0")/lib.sh"
pl_need ss awk head
pl_setup security-configs
port=$(pl_port 11)
F=$BUILD/tests/fail_peer
T=$PL_TMP/hostile
mkdir -p "$T"
[ -x "$F" ] || pl_skip "$F not built"

printf 'garbage {{{ ;;; = "unterminated\n' >"$T/garbage.conf"
head -c 4096 /dev/urandom >"$T/binary.conf"
printf 'host = { name = "A\0B"; };\n' >"$T/nul.conf"
awk 'BEGIN { s = "x = "; for (i = 0; i < 5000; i++) s = s "{ a = "; s = s "1;"; for (i = 0; i < 5000; i++) s = s " };"; print s }' >"$T/deep.conf"
awk 'BEGIN { s = "x = "; for (i = 0; i < 20000; i++) s = s "("; print s }' >"$T/deep-open.conf"
sed 's/window_size = "[^"]*"/window_size = "99999999999999999999999G"/' "$PL_TMP/a.conf" >"$T/huge-window.conf"
sed 's/contexts = [0-9]*/contexts = 18446744073709551617/' "$PL_TMP/a.conf" >"$T/huge-contexts.conf"
awk 'BEGIN { printf "host = { name = \""; for (i = 0; i < 100000; i++) printf "A"; print "\"; };" }' >"$T/huge-string.conf"
{ cat "$PL_TMP/a.conf"; echo '@include "no-such-file.conf"'; } >"$T/include-missing.conf"
{ cat "$PL_TMP/a.conf"; echo '@include "include-cycle.conf"'; } >"$T/include-cycle.conf"
{ cat "$PL_TMP/a.conf"; echo '@include "/dev/zero"'; } >"$T/include-dev.conf"
awk 'BEGIN { for (i = 0; i < 70000; i++) print "# padding padding padding" }' >"$T/big.conf"
mkdir -p "$T/dir.conf"
: >"$T/empty.conf"

env $(pl_env plain) "$F" server 127.0.0.2 $port >"$PL_TMP/srv.out" 2>&1 &
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $port
n=0
for c in "$T"/*.conf; do
	n=$((n + 1))
	name=$(basename "$c")
	timeout 20 "$BUILD/ntbsock" check -c "$c" >"$PL_TMP/check.$n.out" 2>&1; rc=$?
	[ $rc -eq 1 ] || pl_fail "$name: ntbsock check exited $rc, want 1: $(head -c 400 "$PL_TMP/check.$n.out")"
	grep -q -- "$c" "$PL_TMP/check.$n.out" ||
		pl_fail "$name: ntbsock check does not name the file: $(head -c 400 "$PL_TMP/check.$n.out")"
	echo "$name: check: $(grep -m1 -- "$c" "$PL_TMP/check.$n.out" | cut -c1-160)"
	NTBSOCK_LOG=info NTBSOCK_LOG_FILE="$PL_TMP/run.$n.log" timeout 60 \
		"$BUILD/ntbsock" run -c "$c" -- "$F" client 127.0.0.2 $port -s $n -b 1048576 \
		>"$PL_TMP/cli.$n.out" 2>&1 || pl_fail "$name: program under ntbsock run failed: $(cat "$PL_TMP/cli.$n.out")"
	grep -q '^END reason=eof .*bad=0' "$PL_TMP/cli.$n.out" || pl_fail "$name: stream: $(cat "$PL_TMP/cli.$n.out")"
	grep -q 'use the kernel\|tcp' "$PL_TMP/run.$n.log" 2>/dev/null ||
		pl_fail "$name: the library's log does not say the config was refused: $(cat "$PL_TMP/run.$n.log" 2>/dev/null)"
done
echo "hostile configs: $n refused by ntbsock check (exit 1, file named); programs work over TCP: ok"
