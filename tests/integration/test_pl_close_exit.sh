#!/bin/sh
# SPDX-License-Identifier: MIT
# Close, then exit at once, with the connection's queues full (the FIN cannot go out at close):
# the reader, which starts reading only once the writer closed (a flag file), still gets every byte and then end-of-file,
# not ECONNRESET, as with a kernel socket. The writer's library sends the FIN at exit (as room
# frees) and waits for the acknowledgement, bounded (preload/pl_init.c: pl_exit_linger()).
# Rounds 1 and 2 exit; round 3 execs /bin/true instead (the exec wrapper waits the same way).
. "$(dirname "$0")/lib.sh"
pl_setup close-exit
H=$BUILD/tests/pl_close_exit
[ -x "$H" ] || pl_skip "$H not built"

for round in 1 2 3; do
	how=; [ $round = 3 ] && how=exec
	port=$(pl_port $round)
	env $(pl_env b) "$H" reader 127.0.0.2 $port "$PL_TMP/flag$round" >"$PL_TMP/r$round.out" 2>&1 &
	R=$!; PL_PIDS="$PL_PIDS $R"
	pl_wait_port 127.0.0.2 $port
	pl_run a "$H" writer 127.0.0.2 $port "$PL_TMP/flag$round" $how >"$PL_TMP/w$round.out" 2>&1 ||
		pl_fail "round $round: writer failed: $(cat "$PL_TMP/w$round.out")"
	i=0
	while kill -0 $R 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	kill -0 $R 2>/dev/null && pl_fail "round $round: reader still reading 30 s after the writer's exit"
	wait $R || pl_fail "round $round: reader failed: $(cat "$PL_TMP/r$round.out")"
	sent=$(sed -n 's/^SENT //p' "$PL_TMP/w$round.out")
	[ -n "$sent" ] && [ "$sent" -gt 0 ] || pl_fail "round $round: writer sent nothing"
	grep -q "^END reason=eof rx=$sent bad=0\$" "$PL_TMP/r$round.out" ||
		pl_fail "round $round: writer sent $sent bytes then closed; reader: $(cat "$PL_TMP/r$round.out")"
	[ "$(pl_count_log a ': ntb (link')" -ge $round ] || pl_fail "round $round: not over ntb"
	# the writer saw the acknowledgement (not the end of its 2 s wait)
	[ "$(pl_count_log a 'still unacknowledged')" = 0 ] ||
		pl_fail "round $round: the writer's wait ran out: $(grep unacknowledged "$PL_TMP/a.log")"
	echo "round $round: $sent bytes, close, ${how:-exit}: reader got them all, then end-of-file"
done
echo "close then exit or exec with full queues: every byte, then EOF: ok"
