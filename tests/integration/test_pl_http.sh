#!/bin/sh
# SPDX-License-Identifier: MIT
# curl (non-blocking connect, poll) and wget download a 32 MiB file from python's http.server
# (selectors) over ntb between demo hosts, byte-exact, and a local URL on the same host stays
# TCP with the reason logged.
. "$(dirname "$0")/lib.sh"
pl_need curl ss cmp
PY=/usr/bin/python3
[ -x $PY ] || PY=$(command -v python3)
[ -n "$PY" ] || pl_skip "python3 not installed"
pl_setup http
port=$(pl_port 1); port2=$(pl_port 2)
mkdir -p "$PL_TMP/www"
head -c $((32 * 1048576)) /dev/urandom >"$PL_TMP/www/blob"

(cd "$PL_TMP/www" && exec env $(pl_env b) timeout 120 $PY -m http.server $port --bind 127.0.0.2) \
	>"$PL_TMP/http-b.out" 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.2 $port
before=$(pl_lo_bytes)
pl_run a curl -sSf -o "$PL_TMP/got" "http://127.0.0.2:$port/blob" || pl_fail "curl over ntb failed"
cmp "$PL_TMP/www/blob" "$PL_TMP/got" || pl_fail "curl: bytes differ"
pl_assert_lo_below "$before" 2000000
pl_assert_log a ": ntb (link"
pl_assert_log b ": ntb (link"
if command -v wget >/dev/null 2>&1; then
	pl_run a wget -q -O "$PL_TMP/got-wget" "http://127.0.0.2:$port/blob" || pl_fail "wget over ntb failed"
	cmp "$PL_TMP/www/blob" "$PL_TMP/got-wget" || pl_fail "wget: bytes differ"
	[ "$(pl_count_log a ': ntb (link')" -ge 2 ] || pl_fail "wget's connection was not ntb"
fi

# Host A's own server: not a peer address, so TCP, "not configured".
(cd "$PL_TMP/www" && exec env $(pl_env a) timeout 120 $PY -m http.server $port2 --bind 127.0.0.1) \
	>"$PL_TMP/http-a.out" 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.1 $port2
pl_run a curl -sSf -o "$PL_TMP/got2" "http://127.0.0.1:$port2/blob" || pl_fail "local curl failed"
cmp "$PL_TMP/www/blob" "$PL_TMP/got2" || pl_fail "local curl: bytes differ"
pl_assert_log a "127.0.0.1:$port2: tcp (not configured"
echo "http over ntb: ok"
