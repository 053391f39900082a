#!/bin/sh
# SPDX-License-Identifier: MIT
# Fairness of many streams at once (#21 item 2): one epoll client writes as fast as it can on N
# connections (default 1000) over one link, one epoll server reads them all and checks every
# byte (tests/helpers/streams.c). The link has the default tunables: a connection slot each and
# 256 transfer contexts (data rings) that go round among the streams ([RT]'s priority rule, a
# grant given back after its quantum when others wait: transport/tp_ring.c). After a second of
# warm-up the server counts what each connection delivers in SECS seconds (default 10): the
# slowest connection must get at least a quarter of the mean, no byte may be wrong, every
# connection must be an ntb one (each host's log, and the kernel's loopback carrying no more
# than the handshakes and a twentieth of the payload). Environment:
#   STREAMS_N     connections (default 1000; 200 under a sanitizer runtime)
#   STREAMS_T     seconds measured (default 10; 5 under a sanitizer runtime)
. "$(dirname "$0")/lib.sh"
pl_need python3
N=${STREAMS_N:-1000}
SECS=${STREAMS_T:-10}
[ -z "${PL_PRELOAD_FIRST:-}" ] || { N=${STREAMS_N:-200}; SECS=${STREAMS_T:-5}; }
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((N + 64)) ] ||
	pl_skip "$N connections need $((N + 64)) descriptors per process; the hard limit (ulimit -Hn) is $hard"
ulimit -n "$hard" 2>/dev/null || true
PL_TIMEOUT=${PL_TIMEOUT:-$(( (SECS + 60) * PL_SLOW ))}
PL_CONTEXTS=default
pl_setup streams-fair
STREAMS=$BUILD/tests/streams
[ -x "$STREAMS" ] || pl_skip "$STREAMS not built (make check builds it)"

port=$(pl_port 1)
pl_bg b "$STREAMS" server 127.0.0.2 $port $N 1 $SECS
srv=$PL_LAST
srv_out=$PL_LAST_OUT
pl_wait_port 127.0.0.2 $port
lo0=$(pl_lo_bytes)
t0=$(date +%s)
# (the client writes until the server has measured: its set-ups, the warm-up and SECS, with room
# for a slow machine)
pl_bg a "$STREAMS" client 127.0.0.2 $port $N $((SECS + (4 + N / 200) * PL_SLOW))
cli=$PL_LAST
cli_out=$PL_LAST_OUT
wait $cli; crc=$?
wait $srv; src=$?
lo=$(( $(pl_lo_bytes) - lo0 ))
echo "client (rc $crc): $(tail -n 1 "$cli_out")"
echo "server (rc $src): $(tr '\n' ';' <"$srv_out")"

fails=""
fail_add() { echo "  not ok: $*"; fails="$fails; $*"; }
fair=$(sed -n 's/^FAIR .* min\/mean=\([0-9.]*\) .*/\1/p' "$srv_out")
bytes=$(sed -n 's/^END .* bytes=\([0-9]*\) .*/\1/p' "$srv_out")
[ -n "$fair" ] || fail_add "the server measured no share: $(tail -n 3 "$srv_out")"
[ -z "$fair" ] || python3 -c "import sys; sys.exit(0 if float('$fair') >= 0.25 else 1)" ||
	fail_add "the slowest of $N streams got $fair of the mean (at least 0.25)"
grep -q "^END conns=$N .* bad=0\$" "$srv_out" || fail_add "not every byte of $N streams was right: $(grep '^END' "$srv_out")"
[ $src -eq 0 ] || fail_add "the server exited with $src"
grep -q "^CLIENT conns=$N .* errors=0\$" "$cli_out" || fail_add "the client: $(tail -n 1 "$cli_out")"
for h in a b; do
	ln=$(pl_count_log $h ': ntb (link')
	lt=$(pl_count_log $h ': tcp (')
	echo "host $h: log says ntb $ln times, tcp $lt times"
	[ "$ln" -eq $N ] && [ "$lt" -eq 0 ] || fail_add "host $h: log has $ln ntb and $lt tcp connections"
done
limit=$(( N * 1500 + ${bytes:-0} * 2 / 20 ))
echo "lo moved $lo bytes (limit $limit: handshakes and 1/20 of ${bytes:-0} each way)"
[ "${bytes:-0}" -gt 0 ] && [ "$lo" -lt "$limit" ] || fail_add "kernel loopback carried $lo bytes (limit $limit): not over NTB"
[ -z "$fails" ] || pl_fail "${fails#; }"
echo "PASS: $N streams over one link, the slowest at $fair of the mean over $SECS s, every byte right, all ntb ($(( $(date +%s) - t0 )) s)"
