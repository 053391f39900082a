#!/bin/sh
# SPDX-License-Identifier: MIT
# socat moves a random file (PL_SOCAT_MB, default 256 MiB) byte-exact over ntbsock, both ways
# (A → B and B → A), with the bytes on the link, not on the kernel's loopback.
. "$(dirname "$0")/lib.sh"
pl_need socat ss cmp
pl_setup socat
mb=${PL_SOCAT_MB:-256}
port=$(pl_port 1)
head -c $((mb * 1048576)) /dev/urandom >"$PL_TMP/in" || pl_fail "no random file"

# A sends to B's listener.
pl_bg b socat -u TCP-LISTEN:$port,bind=127.0.0.2,reuseaddr OPEN:"$PL_TMP/out1",creat,trunc
srv=$PL_LAST
pl_wait_port 127.0.0.2 $port
before=$(pl_lo_bytes)
pl_run a socat -u OPEN:"$PL_TMP/in" TCP:127.0.0.2:$port || pl_fail "socat A→B failed"
wait $srv || pl_fail "socat server B failed"
cmp "$PL_TMP/in" "$PL_TMP/out1" || pl_fail "A→B: bytes differ"
pl_assert_lo_below "$before" $((mb * 1048576 / 20))

# B's listener sends to A.
pl_bg b socat -u OPEN:"$PL_TMP/in" TCP-LISTEN:$port,bind=127.0.0.2,reuseaddr
srv=$PL_LAST
pl_wait_port 127.0.0.2 $port
before=$(pl_lo_bytes)
pl_run a socat -u TCP:127.0.0.2:$port OPEN:"$PL_TMP/out2",creat,trunc || pl_fail "socat B→A failed"
wait $srv || pl_fail "socat server B (sending) failed"
cmp "$PL_TMP/in" "$PL_TMP/out2" || pl_fail "B→A: bytes differ"
pl_assert_lo_below "$before" $((mb * 1048576 / 20))

[ "$(pl_count_log a ': ntb (link')" -eq 2 ] || pl_fail "client connections not ntb"
[ "$(pl_count_log b ': ntb (link')" -eq 2 ] || pl_fail "server connections not ntb"
echo "socat ${mb} MiB both ways over ntb: ok"
