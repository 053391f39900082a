#!/bin/sh
# SPDX-License-Identifier: MIT
# Fallback to TCP, with the reason logged, and the data still byte-exact:
#  1. server without the library → client: "tcp (no listener)";
#  2. client without the library → server: "tcp (client did not set up ntb)";
#  3. a rule says tcp for one port → "tcp (rule 1 says tcp)" on both hosts' configs;
#  4. a client socket bound to an address that is not the host's → TCP on both sides.
. "$(dirname "$0")/lib.sh"
pl_need socat ss cmp
pl_setup fallback
port=$(pl_port 1)
head -c 3000000 /dev/urandom >"$PL_TMP/in"

xfer() { # CLIENT-HOST SERVER-HOST OUT
	pl_bg "$2" socat -u TCP-LISTEN:$port,bind=127.0.0.2,reuseaddr OPEN:"$PL_TMP/$3",creat,trunc
	srv=$PL_LAST
	pl_wait_port 127.0.0.2 $port
	pl_run "$1" socat -u OPEN:"$PL_TMP/in" TCP:127.0.0.2:$port || pl_fail "$3: client failed"
	wait $srv || pl_fail "$3: server failed"
	cmp "$PL_TMP/in" "$PL_TMP/$3" || pl_fail "$3: bytes differ"
}

# Keep B's link end open (and up) with a listener elsewhere, so "no listener" is the reason.
pl_bg b socat TCP-LISTEN:$((port + 1)),bind=127.0.0.2,reuseaddr,fork SYSTEM:cat
pl_wait_port 127.0.0.2 $((port + 1))

xfer a plain out1
pl_assert_log a "tcp (no listener)"

xfer plain b out2
pl_assert_log b "tcp (client did not set up ntb"

sed -i "s#^rules = (#rules = (\n  { match = \"127.0.0.2/32\"; ports = \"$port\"; action = \"tcp\"; },#" \
	"$PL_TMP/a.conf"
xfer a b out3
pl_assert_log a "says tcp"
pl_assert_log b "tcp (client did not set up ntb"
[ "$(pl_count_log a ': ntb (link')" -eq 0 ] || pl_fail "a connection was ntb"

# 4. A client bound to an address that is not its host's: B would not know it, so TCP.
sed -i "/says \"tcp\"/d; /action = \"tcp\"; },/d" "$PL_TMP/a.conf"
port=$(pl_port 5)
pl_bg b socat -u TCP-LISTEN:$port,bind=127.0.0.2,reuseaddr OPEN:"$PL_TMP/out4",creat,trunc
srv=$PL_LAST
pl_wait_port 127.0.0.2 $port
pl_run a socat -u OPEN:"$PL_TMP/in" TCP:127.0.0.2:$port,bind=127.0.0.5 || pl_fail "out4: client failed"
wait $srv || pl_fail "out4: server failed"
cmp "$PL_TMP/in" "$PL_TMP/out4" || pl_fail "out4: bytes differ"
pl_assert_log a "not this host's"
pl_assert_log b "no peer for the client address"
[ "$(pl_count_log a ': ntb (link')" -eq 0 ] || pl_fail "a connection was ntb"
echo "fallback: ok"
