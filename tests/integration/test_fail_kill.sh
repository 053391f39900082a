#!/bin/sh
# SPDX-License-Identifier: MIT
# kill -9 of either end of a live NTB stream at random moments (FAIL_TRIALS, default 20,
# alternating client and server): the survivor sees EOF or ECONNRESET (EPIPE when it was
# writing) within FAIL_DETECT_MS (default 5000; the link timeout is 500 ms), everything it
# received before was byte-exact, an end of file only after every byte the dead process's
# send() had accepted (its count, kept in a file by fail_peer -t, up to its last write), and
# the receive contexts return to the pools (ntbsock stat shows no connection on either host
# afterwards). Kernel TCP gives the same choice: a reset when the dead process left bytes
# unread (the usual case in a duplex stream), else every byte and end of file.
. "$(dirname "$0")/lib.sh"
pl_need ss od
pl_setup fail-kill
trials=${FAIL_TRIALS:-20}
limit=${FAIL_DETECT_MS:-5000}
port=$(pl_port 5)
F=$BUILD/tests/fail_peer
[ -x "$F" ] || pl_skip "$F not built"
now_ms() { date +%s%3N; }
rand() { echo $(( $(od -An -N2 -tu2 /dev/urandom) % $1 )); }

# Programs start through env (which execs them): $! is the program itself, so kill -9 hits it.
start_server() {
	env $(pl_env b) "$F" server 127.0.0.2 $port -t "$PL_TMP/srv.sent" >"$PL_TMP/srv.$1.out" 2>&1 &
	S=$!; PL_PIDS="$PL_PIDS $S"; SOUT=$PL_TMP/srv.$1.out
	pl_wait_port 127.0.0.2 $port
}
# wait_line FILE PATTERN COUNT SECONDS: until FILE has COUNT lines matching PATTERN.
wait_line() {
	i=0
	while [ $i -lt $(($4 * 20)) ]; do
		c=$(grep -c "$2" "$1" 2>/dev/null)
		[ "${c:-0}" -ge "$3" ] && return 0
		sleep 0.05; i=$((i + 1))
	done
	return 1
}
# no_conns JSON: `ntbsock stat --json` output without connections (links follow them).
no_conns() { case $1 in '{"connections":[],'*) return 0;; esac; return 1; }
# Both hosts' tables empty (contexts reclaimed), within 5 s.
wait_reclaimed() {
	i=0
	while [ $i -lt 50 ]; do
		a=$("$BUILD/ntbsock" stat -c "$PL_TMP/a.conf" --json 2>&1)
		b=$("$BUILD/ntbsock" stat -c "$PL_TMP/b.conf" --json 2>&1)
		no_conns "$a" && no_conns "$b" && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "stat a: $a"; echo "stat b: $b"
	return 1
}
# The bytes the dead process's send() accepted (fail_peer -t FILE).
sent_of() { od -An -tu8 -N8 "$1" | tr -d ' '; }
check_end() { # check_end FILE KILL_MS WHO SENT_FILE
	line=$(grep '^END' "$1" | tail -n 1)
	reason=$(echo "$line" | sed 's/.*reason=\([^ ]*\).*/\1/')
	rx=$(echo "$line" | sed 's/.* rx=\([0-9]*\).*/\1/')
	sent=$(sent_of "$4")
	# (stored after each send returns: the last write, 64 KiB at most, may be in rx and not
	# yet in the count; fewer bytes than counted before an end of file is a truncation)
	[ "$reason" = eof ] && { [ "$rx" -ge "$sent" ] && [ "$rx" -le $((sent + 65536)) ] ||
		pl_fail "trial $trial: $3 saw end of file after $rx bytes, the dead $victim's send() had accepted $sent"; }
	[ "$rx" -le $((sent + 65536)) ] || pl_fail "trial $trial: $3 received $rx bytes, more than the $sent sent"
	t=$(echo "$line" | sed 's/.* t=\([0-9]*\).*/\1/')
	case $reason in eof|reset|error:EPIPE) ;; *) pl_fail "trial $trial: $3 ended with '$reason': $line";; esac
	echo "$line" | grep -q 'bad=0' || pl_fail "trial $trial: $3 received corrupt bytes: $line"
	d=$((t - $2)); [ $d -lt 0 ] && d=0
	[ $d -le $limit ] || pl_fail "trial $trial: $3 saw the end after $d ms (limit $limit)"
	echo "trial $trial: killed the $victim after ${delay}ms of streaming; $3: $reason after ${d} ms (rx/tx: $(echo "$line" | sed 's/.*\(rx=[0-9]* tx=[0-9]*\).*/\1/'), the $victim had sent $sent)"
	[ $d -gt $maxd ] && maxd=$d
	eval "n_$(echo "$reason" | tr -c 'a-z\n' _)=\$((\${n_$(echo "$reason" | tr -c 'a-z\n' _):-0} + 1))"
}

maxd=0; S=""; conns=0
trial=1
while [ $trial -le $trials ]; do
	[ -z "$S" ] && { start_server $trial; conns=0; }
	env $(pl_env a) "$F" client 127.0.0.2 $port -s $trial -t "$PL_TMP/cli.sent" >"$PL_TMP/cli.$trial.out" 2>&1 &
	C=$!; PL_PIDS="$PL_PIDS $C"
	conns=$((conns + 1))
	wait_line "$PL_TMP/cli.$trial.out" '^CONNECTED' 1 10 || pl_fail "trial $trial: client did not connect"
	wait_line "$SOUT" '^ACCEPT' $conns 10 || pl_fail "trial $trial: server did not accept"
	# a random moment: right away, or up to 1.5 s into the stream
	delay=$(( trial % 5 == 0 ? 0 : $(rand 1500) ))
	sleep "$(awk "BEGIN { print $delay / 1000 }")"
	if [ $((trial % 2)) -eq 1 ]; then
		victim=client; k=$(now_ms); kill -9 $C
		wait_line "$SOUT" '^END' $conns 30 || pl_fail "trial $trial: server never saw the client die"
		check_end "$SOUT" $k server "$PL_TMP/cli.sent"
		wait $C 2>/dev/null
	else
		victim=server; k=$(now_ms); kill -9 $S; S=""
		wait_line "$PL_TMP/cli.$trial.out" '^END' 1 30 || pl_fail "trial $trial: client never saw the server die"
		check_end "$PL_TMP/cli.$trial.out" $k client "$PL_TMP/srv.sent"
		wait $C 2>/dev/null
	fi
	wait_reclaimed || pl_fail "trial $trial: contexts not reclaimed after the $victim died"
	trial=$((trial + 1))
done
# A killed process's host goes silent (it was alone there): its kernel TCP socket, which
# closes, tells the survivor it died, long before the 30 s peer_timeout_ms of a silent peer.
[ "$maxd" -lt 10000 ] ||
	pl_fail "slowest detection ${maxd} ms: a dead peer was waited for as a silent one"
n=$(pl_count_log a ': ntb (link')
[ "$n" -ge "$trials" ] || pl_fail "only $n of $trials client connections went over ntb"
echo "kill -9: $trials trials, survivors saw eof ${n_eof:-0}, reset ${n_reset:-0}, EPIPE ${n_error_EPIPE:-0}; slowest detection ${maxd} ms; contexts reclaimed every time: ok"
