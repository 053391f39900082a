#!/bin/sh
# SPDX-License-Identifier: MIT
# Pass-through: with no config, a broken config or NTBSOCK_DISABLE=1, real programs under the
# library work over plain TCP (curl ↔ python http.server, iperf3, socat byte-exact), and each
# case says so in one log line.
. "$(dirname "$0")/lib.sh"
pl_need curl iperf3 socat ss
pl_setup passthrough
PY=/usr/bin/python3
[ -x $PY ] || PY=$(command -v python3)
p1=$(pl_port 1); p2=$(pl_port 2); p3=$(pl_port 3)

# 1. No config: http server + curl, both under the library.
mkdir -p "$PL_TMP/www" && head -c 300000 /dev/urandom >"$PL_TMP/www/blob"
(cd "$PL_TMP/www" && exec env $(pl_env none) $PY -m http.server $p1 --bind 127.0.0.1) \
	>"$PL_TMP/http.out" 2>&1 &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.1 $p1
pl_run none curl -sf -o "$PL_TMP/blob.got" "http://127.0.0.1:$p1/blob" || pl_fail "curl failed"
cmp "$PL_TMP/www/blob" "$PL_TMP/blob.got" || pl_fail "curl: bytes differ"
pl_assert_log none "no config"

# 2. No config: iperf3 both ways.
pl_bg none iperf3 -s -1 -B 127.0.0.1 -p $p2
pl_wait_port 127.0.0.1 $p2
pl_run none iperf3 -c 127.0.0.1 -p $p2 -t 1 -R >"$PL_TMP/iperf.out" 2>&1 || pl_fail "iperf3 failed"
grep -q receiver "$PL_TMP/iperf.out" || pl_fail "iperf3: no result"

# 3. Broken config: one clear warning naming file:line, then TCP works.
printf 'host = { name = "A"; addresses = [ "127.0.0.1" ]; };\nbogus_key = 5;\n' >"$PL_TMP/bad.conf"
head -c 2000000 /dev/urandom >"$PL_TMP/in"
env NTBSOCK_CONF="$PL_TMP/bad.conf" NTBSOCK_LOG_FILE="$PL_TMP/bad.log" LD_PRELOAD=$PL_LIB \
	timeout 60 socat -u TCP-LISTEN:$p3,bind=127.0.0.1,reuseaddr OPEN:"$PL_TMP/out",creat,trunc &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.1 $p3
env NTBSOCK_CONF="$PL_TMP/bad.conf" NTBSOCK_LOG_FILE="$PL_TMP/bad.log" LD_PRELOAD=$PL_LIB \
	timeout 60 socat -u OPEN:"$PL_TMP/in" TCP:127.0.0.1:$p3 || pl_fail "socat failed"
wait $!
cmp "$PL_TMP/in" "$PL_TMP/out" || pl_fail "socat: bytes differ"
grep -q "bad.conf:2" "$PL_TMP/bad.log" || pl_fail "broken config not reported with file:line"
grep -q "use the kernel" "$PL_TMP/bad.log" || pl_fail "broken config: no pass-through line"

# 4. NTBSOCK_DISABLE=1 with a valid config: disabled line, TCP works.
env NTBSOCK_DISABLE=1 $(pl_env a) timeout 60 socat -u TCP-LISTEN:$p3,bind=127.0.0.1,reuseaddr \
	OPEN:"$PL_TMP/out2",creat,trunc &
PL_PIDS="$PL_PIDS $!"
pl_wait_port 127.0.0.1 $p3
env NTBSOCK_DISABLE=1 $(pl_env a) timeout 60 socat -u OPEN:"$PL_TMP/in" TCP:127.0.0.1:$p3 ||
	pl_fail "socat (disabled) failed"
wait $!
cmp "$PL_TMP/in" "$PL_TMP/out2" || pl_fail "socat (disabled): bytes differ"
pl_assert_log a "disabled"
[ ! -e "$PL_LINK" ] || pl_fail "disabled library created the link file"
# 5. The program's allocator as without the library: large blocks still from mmap() after the
# library's start and its first connection (a config buffer it freed once raised glibc's mmap
# threshold for the whole program).
PROBE=$BUILD/tests/malloc_probe
[ -x "$PROBE" ] || pl_fail "$PROBE not built"
want=$(env $(pl_env plain) "$PROBE") || pl_fail "malloc_probe failed"
if [ "$want" != "mmapped 4" ]; then
	# not glibc's allocator (a sanitizer's: check-asan, check-tsan): nothing to compare
	echo "note: malloc_probe without the library says '$want': allocator check skipped"
else
	pl_bg none socat -u TCP-LISTEN:$p3,bind=127.0.0.1,reuseaddr OPEN:/dev/null
	pl_wait_port 127.0.0.1 $p3
	got=$(pl_run a "$PROBE" 127.0.0.1 $p3) || pl_fail "malloc_probe under the library failed"
	[ "$got" = "$want" ] ||
		pl_fail "the library changed the program's allocator: $got, without it: $want"
	# a config of 700 KB (comments): read into a block larger than the probe's, were it
	# malloc'ed and freed
	cp "$PL_TMP/a.conf" "$PL_TMP/big.conf"
	awk 'BEGIN { for (i = 0; i < 10000; i++) printf "# %070d\n", i }' >>"$PL_TMP/big.conf"
	got=$(env $(pl_env a) NTBSOCK_CONF="$PL_TMP/big.conf" "$PROBE") ||
		pl_fail "malloc_probe under the library (big config) failed"
	[ "$got" = "$want" ] ||
		pl_fail "a large config changed the program's allocator: $got, without it: $want"
	pl_refute_log a "cannot read config"
fi
echo "pass-through: ok"
