#!/bin/sh
# SPDX-License-Identifier: MIT
# Loss recovery through the library: 64 MiB through one connection (Python client and server,
# 64 KiB writes, CRC-32 of the stream (zlib) checked at the server) between the two demo hosts, clean
# and under NTBSOCK_FAULT drop+corrupt rates on both hosts, each run's rate and its share of the
# clean rate measured in the same repetition. Prints a Markdown table; progress on stderr.
#
#   sh bench/fault_stream.sh                 # BUILD=build, FS_REPS=3, FS_MB=64
#   FS_SPECS="drop=0.05,corrupt=0.05" sh bench/fault_stream.sh
. "$(dirname "$0")/lib.sh"
REPS=${FS_REPS:-3}
MB=${FS_MB:-64}
SPECS=${FS_SPECS:-"off drop=0.01,corrupt=0.01 drop=0.05,corrupt=0.05"}
bn_init faultstream

cat >"$PL_TMP/srv.py" <<'PY'
import socket, sys, zlib
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept()
h = 0; n = 0
while True:
    x = c.recv(1 << 16)
    if not x:
        break
    h = zlib.crc32(x, h); n += len(x)
c.sendall(b"%08x %d\n" % (h, n))
c.close()
PY
cat >"$PL_TMP/cli.py" <<'PY'
import os, socket, sys, time, zlib
total = int(sys.argv[2]) << 20
blk = os.urandom(1 << 16)
h = 0
for i in range(total >> 16):
    h = zlib.crc32(blk, h)
c = socket.create_connection(("127.0.0.2", int(sys.argv[1])), source_address=("127.0.0.1", 0))
t0 = time.monotonic()
for i in range(total >> 16):
    c.sendall(blk)
c.shutdown(socket.SHUT_WR)
ans = c.makefile().readline().split()
dt = time.monotonic() - t0
ok = ans == ["%08x" % h, str(total)]
print("RESULT %.1f %s" % (total / dt / 1e6, "ok" if ok else "bad"))
PY

# run SPEC: one 64 MiB stream under NTBSOCK_FAULT=SPEC; prints "MBPS CHECK"
run() {
	bn_next_port
	NTBSOCK_FAULT=$1 bn_srv ntb $BN_CPU_SERVER 127.0.0.2 $BN_PORT $PY "$PL_TMP/srv.py" $BN_PORT
	BN_SEQ=$((BN_SEQ + 1))
	out=$PL_TMP/cli-$BN_SEQ.out
	NTBSOCK_FAULT=$1 BN_TIMEOUT=300 bn_client ntb "$out" $BN_PORT $PY "$PL_TMP/cli.py" $BN_PORT $MB
	bn_stop $BN_LAST
	r=$(sed -n 's/^RESULT \([0-9.]*\) \(.*\)/\1 \2/p' "$out")
	[ -n "$r" ] || r="0 failed"
	set -- $r
	c=$(bn_check ntb "$out.log" $((MB << 20)))
	[ "$2" = ok ] || c="bad-hash"
	echo "$1 $c"
}

echo "| rep | fault (both hosts) | MB/s | of clean | check |"
echo "|---|---|---|---|---|"
for rep in $(seq "$REPS"); do
	clean=""
	for spec in $SPECS; do
		bn_say "rep $rep: $spec"
		set -- $(run "$spec")
		[ "$spec" = off ] && clean=$1
		share=$(awk -v a="$1" -v b="${clean:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
		echo "| $rep | $spec | $1 | $share | $2 |"
	done
done
bn_say "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
