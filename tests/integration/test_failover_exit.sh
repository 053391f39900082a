#!/bin/sh
# SPDX-License-Identifier: MIT
# Bytes outlive their writer: `socat -u OPEN:file TCP:...` closes and exits as soon as
# its last write returns. Under NTBSOCK_FAULT=drop=0.01,corrupt=0.01 on both hosts, the reader
# must get the whole 32 MiB file, byte-exact, then EOF, in every one of FO_RUNS (default 20)
# runs: what was not acknowledged at exit goes to the kernel (failover "exit"). Then a reader
# that stopped reading: the writer still exits within a bound, and the reader, reading later,
# gets an exact prefix and then either every byte and EOF, or ECONNRESET: never a short EOF.
. "$(dirname "$0")/lib.sh"
pl_need socat cmp
pl_setup failover-exit
port=$(pl_port 13)
RUNS=${FO_RUNS:-20}
SIZE=$((32 * 1024 * 1024))
head -c $SIZE /dev/urandom >"$PL_TMP/in.bin"
FAULT="drop=0.01,corrupt=0.01"

handed=0
r=1
while [ $r -le $RUNS ]; do
	p=$((port + r))
	rm -f "$PL_TMP/out.bin"
	env $(pl_env b) NTBSOCK_FAULT="$FAULT,seed=$((r * 2))" \
		socat -u TCP-LISTEN:$p,bind=127.0.0.2,reuseaddr OPEN:"$PL_TMP/out.bin",creat,trunc &
	S=$!; PL_PIDS="$PL_PIDS $S"
	pl_wait_port 127.0.0.2 $p
	t0=$(date +%s%N)
	env $(pl_env a) NTBSOCK_FAULT="$FAULT,seed=$((r * 2 + 1))" \
		timeout 60 socat -u OPEN:"$PL_TMP/in.bin" TCP:127.0.0.2:$p,bind=127.0.0.1 ||
		pl_fail "run $r: writer failed"
	t1=$(date +%s%N)
	i=0
	while kill -0 $S 2>/dev/null && [ $i -lt $((600 * PL_SLOW)) ]; do sleep 0.05; i=$((i + 1)); done
	kill -0 $S 2>/dev/null && pl_fail "run $r: reader still running 30 s after the writer exited"
	wait $S || pl_fail "run $r: reader failed"
	got=$(stat -c %s "$PL_TMP/out.bin")
	cmp -s "$PL_TMP/in.bin" "$PL_TMP/out.bin" ||
		pl_fail "run $r: reader got $got of $SIZE bytes, or different bytes (a short EOF?)"
	echo "run $r: $SIZE bytes exact; writer ran $(( (t1 - t0) / 1000000 )) ms"
	r=$((r + 1))
done
grep -q ': ntb (link' "$PL_TMP/a.log" || pl_fail "the writers never used ntb"
handed=$(grep 'handed their unacknowledged bytes' "$PL_TMP/a.log" | wc -l)
echo "$RUNS runs exact under $FAULT; $handed writer(s) handed their tail to the kernel at exit"

# The writer's link cut after 3500 KiB of its window writes, while the last of its 4 MiB are
# still in the rings when its send()s have returned: acknowledgements stall, its exit hands the
# tail to the kernel, and the reader still gets every byte, then EOF.
h0=$handed
r=1
while [ $r -le 3 ]; do
	p=$((port + RUNS + 10 + r))
	rm -f "$PL_TMP/out.bin"
	head -c 4194304 "$PL_TMP/in.bin" >"$PL_TMP/in4.bin"
	env $(pl_env b) socat -u TCP-LISTEN:$p,bind=127.0.0.2,reuseaddr OPEN:"$PL_TMP/out.bin",creat,trunc &
	S=$!; PL_PIDS="$PL_PIDS $S"
	pl_wait_port 127.0.0.2 $p
	env $(pl_env a) NTBSOCK_FAULT="cut_after=3500K" timeout 60 socat -u OPEN:"$PL_TMP/in4.bin" \
		TCP:127.0.0.2:$p,bind=127.0.0.1 || pl_fail "cut run $r: writer failed"
	i=0
	while kill -0 $S 2>/dev/null && [ $i -lt $((600 * PL_SLOW)) ]; do sleep 0.05; i=$((i + 1)); done
	wait $S || pl_fail "cut run $r: reader failed"
	cmp -s "$PL_TMP/in4.bin" "$PL_TMP/out.bin" || pl_fail "cut run $r: the reader's bytes differ (short?)"
	r=$((r + 1))
done
handed=$(grep 'handed their unacknowledged bytes' "$PL_TMP/a.log" | wc -l)
echo "3 cut runs exact; $((handed - h0)) writer(s) handed their tail to the kernel at exit"
[ $((handed - h0)) -eq 3 ] || pl_fail "not every cut writer handed its bytes to the kernel at exit"

# A reader that stopped reading: the writer's send()s that returned are kept, the writer exits
# within a bound, the reader later gets a prefix, exact, then all and EOF or ECONNRESET.
p=$((port + RUNS + 1))
# (times scaled by PL_SLOW: under a sanitizer and load a python writer needs seconds to start)
env $(pl_env b) python3 - 127.0.0.2 $p "$PL_TMP/slow.out" $((4 * PL_SLOW)) >"$PL_TMP/slow.log" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
c, _ = s.accept()
time.sleep(int(sys.argv[4]))   # not reading while the writer fills the queues and exits
got = 0; end = "eof"
with open(sys.argv[3], "wb") as f:
    while True:
        try:
            b = c.recv(1 << 16)
        except ConnectionResetError:
            end = "reset"; break
        if not b:
            break
        f.write(b); got += len(b)
print("END", end, got)
PY
S=$!; PL_PIDS="$PL_PIDS $S"
pl_wait_port 127.0.0.2 $p
t0=$(date +%s%N)
env $(pl_env a) timeout $((30 * PL_SLOW)) python3 - 127.0.0.2 $p "$PL_TMP/in.bin" >"$PL_TMP/w.log" 2>&1 <<'PY'
import socket, sys
data = open(sys.argv[3], "rb").read()
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), source_address=("127.0.0.1", 0))
s.setblocking(False)
sent = 0
while sent < len(data):
    try:
        sent += s.send(data[sent:sent + 65536])
    except BlockingIOError:
        break                  # the queues are full: stop, with `sent` accepted
print("SENT", sent)
s.close()
PY
rc=$?
t1=$(date +%s%N)
[ $rc -eq 0 ] || pl_fail "writer failed or hung (status $rc): $(cat "$PL_TMP/w.log")"
ms=$(( (t1 - t0) / 1000000 ))
sent=$(awk '/^SENT/ {print $2}' "$PL_TMP/w.log")
echo "writer: $sent bytes accepted, exited after $ms ms"
[ $ms -lt $((6000 * PL_SLOW)) ] || pl_fail "writer took $ms ms to exit (not bounded)"
wait $S
line=$(grep '^END' "$PL_TMP/slow.log")
echo "reader: $line"
set -- $line
got=$3
head -c "$got" "$PL_TMP/in.bin" | cmp -s - "$PL_TMP/slow.out" || pl_fail "reader's bytes differ from what was sent"
if [ "$2" = eof ]; then
	[ "$got" = "$sent" ] || pl_fail "short EOF: reader got $got of the $sent bytes send() accepted"
else
	[ "$got" -le "$sent" ] || pl_fail "reader got more than was sent"
fi
echo "writer exits under loss and with a stopped reader: every byte or an honest reset: ok"
