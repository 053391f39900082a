#!/bin/sh
# SPDX-License-Identifier: MIT
# make bench: the full comparison of ntbsock against kernel TCP loopback, TCP between two
# network namespaces joined by a veth pair, and a Unix-domain socket, repeated and pinned;
# results in bench/results/<date>-<host>.{csv,md,png}.
#
# Environment: BUILD (default build), BENCH_REPS (repetitions, default 3, at least 3 for the
# record), BENCH_T (seconds per measurement, default 2), BENCH_OUT (results directory, default
# bench/results), BENCH_SECTIONS (default "1 2 3 4 5 6 7 8 9"), BENCH_FABRIC_RATE (the modelled link
# rate of section 6, bench/fabric.sh, default 1000M), STREAMS_N and STREAMS_T (section 7: streams,
# and seconds measured, default 10), CONNS_N,
# CONNS_ROUNDS, CONNS_SIZES, CONNS_TUNABLES (section 8), FIRSTMB_MIB (section 9, default 16), CC. Progress goes to stderr. Each
# run's transport check is as in the demo: an ntbsock value whose connection did not use the
# link is marked, never counted as ntbsock.
. "$(dirname "$0")/lib.sh"
bn_init bench
REPS=${BENCH_REPS:-3}
T=${BENCH_T:-2}
OUTDIR=${BENCH_OUT:-$ROOT/bench/results}
RAW=$PL_TMP/raw
NOTES=$PL_TMP/notes
: >"$RAW"; : >"$NOTES"
command -v gnuplot >/dev/null 2>&1 || echo "gnuplot not installed: no plot" >>"$NOTES"

# --- helpers: bench/*.c, built here into $BUILD/bench (make does not know them) ---
bn_helpers

# --- two network namespaces joined by a veth pair: the "two hosts" shape of kernel TCP ---
# Addresses live only inside the two namespaces (no route leaves them).
BN_NS=ntbsock-bench-$$
VETH=vbn$$
NS_A_IP=10.251.0.1
NS_B_IP=10.251.0.2
netns_down() { ip netns del $BN_NS-a 2>/dev/null; ip netns del $BN_NS-b 2>/dev/null; }
netns_up() {
	ip netns add $BN_NS-a 2>/dev/null || return 1
	BN_EXTRA_CLEANUP="$BN_EXTRA_CLEANUP netns_down"
	ip netns add $BN_NS-b &&
	ip link add ${VETH}a type veth peer name ${VETH}b &&
	ip link set ${VETH}a netns $BN_NS-a && ip link set ${VETH}b netns $BN_NS-b &&
	ip -n $BN_NS-a addr add $NS_A_IP/30 dev ${VETH}a && ip -n $BN_NS-b addr add $NS_B_IP/30 dev ${VETH}b &&
	ip -n $BN_NS-a link set ${VETH}a up && ip -n $BN_NS-b link set ${VETH}b up &&
	ip -n $BN_NS-a link set lo up && ip -n $BN_NS-b link set lo up
}
# lo: ntbsock's loopback link, client and server on this host (127.0.0.1, LO.conf): the
# same-host comparison against kernel TCP loopback (tcp) and the Unix socket (unix).
if netns_up; then
	TRANSPORTS="ntb lo tcp netns"
else
	netns_down
	TRANSPORTS="ntb lo tcp"
	echo "TCP between network namespaces skipped: cannot create namespaces/veth here" >>"$NOTES"
	bn_say "note: network namespaces not available; the veth rows are skipped"
fi
addr_of() { case $1 in netns) echo $NS_B_IP;; lo) echo 127.0.0.1;; *) echo 127.0.0.2;; esac; }

IPERF_SIZES="64 1K 16K 128K 1M"
SP_SIZES="64 1K 16K"
# BENCH_SECTIONS: which of the numbered sections below to run (default all).
want() { case " ${BENCH_SECTIONS:-1 2 3 4 5 6 7 8 9} " in *" $1 "*) return 0;; esac; return 1; }
n=0
step() { n=$((n + 1)); bn_say "[$n] $*"; }
# record TEST TRANSPORT SIZE REP V1 V2 CHECK
record() { echo "$*" >>"$RAW"; }

bn_say "ntbsock bench: $REPS repetitions, ${T}s per measurement, transports: $TRANSPORTS unix; client CPU $BN_CPU_CLIENT, server CPU $BN_CPU_SERVER"
MACHINE=$(bn_machine)
bn_say "machine: $MACHINE"

# start_servers VAR PROGRAM-ARGS: one server per transport, its address, port and a sockperf
# feed file naming both substituted for @ADDR@, @PORT@ and @FEED@; VAR_<t> is the port.
start_servers() {
	var=$1; shift
	for t in $TRANSPORTS; do
		bn_next_port
		a=$(addr_of $t)
		echo "T:$a:$BN_PORT" >"$PL_TMP/feed-$BN_PORT"
		args=$(echo "$*" | sed "s/@ADDR@/$a/g; s/@PORT@/$BN_PORT/g; s#@FEED@#$PL_TMP/feed-$BN_PORT#g")
		bn_srv $t $BN_CPU_SERVER $a $BN_PORT $args
		eval "${var}_$t=$BN_PORT ${var}_pid_$t=$BN_LAST"
	done
}
stop_servers() { for t in $TRANSPORTS; do eval "bn_stop \$${1}_pid_$t"; done; }
port_of() { eval "echo \$${1}_$2"; }

# --- 1. iperf3 throughput by write size, and -P 4 ---
if want 1; then
	start_servers IP iperf3 -s -B @ADDR@ -p @PORT@
	for r in $(seq $REPS); do
		for s in $IPERF_SIZES; do
			for t in $TRANSPORTS; do
				set -- $(bn_iperf $t $(addr_of $t) $(port_of IP $t) $T -l $s)
				record iperf3 $t $s $r $1 - $2
				step "rep $r: iperf3 -l $s over $t: $1 Gbit/s ($2)"
			done
			set -- $(taskset -c $BN_CPU_CLIENT $UDS tp $(bn_bytes $s) $T $BN_CPU_CLIENT $BN_CPU_SERVER 2>/dev/null || echo nan)
			record iperf3 unix $s $r ${1:-nan} - -
			step "rep $r: unix-socket stream, ${s}-byte writes: $1 Gbit/s"
		done
		for t in $TRANSPORTS; do
			set -- $(bn_iperf $t $(addr_of $t) $(port_of IP $t) $T -P 4)
			record iperf3-P4 $t 128K $r $1 - $2
			step "rep $r: iperf3 -P 4 over $t: $1 Gbit/s ($2)"
		done
	done
	stop_servers IP
fi

# --- 2. sockperf ping-pong by message size (epoll server), and the unix-socket baseline ---
if want 2; then
	start_servers SP sockperf sr --tcp -i @ADDR@ -p @PORT@
	for r in $(seq $REPS); do
		for s in $SP_SIZES; do
			for t in $TRANSPORTS; do
				set -- $(bn_sockperf $t $(addr_of $t) $(port_of SP $t) $T $s)
				record sockperf $t $s $r $1 $2 $3
				step "rep $r: sockperf pp -m $s over $t: p50 $1 us, p99 $2 us ($3)"
			done
			set -- $(taskset -c $BN_CPU_CLIENT $UDS pp $(bn_bytes $s) $T $BN_CPU_CLIENT $BN_CPU_SERVER 2>/dev/null || echo nan nan)
			record sockperf unix $s $r ${1:-nan} ${2:-nan} -
			step "rep $r: unix-socket ping-pong, $s bytes: p50 $1 us, p99 $2 us"
		done
	done
	stop_servers SP
fi

# --- 3. sockperf with each server multiplexer (select, poll, epoll), 64 B ---
if want 3; then
	for mux in s p e; do
		start_servers MX sockperf sr -f @FEED@ -F $mux
		for r in $(seq $REPS); do
			for t in $TRANSPORTS; do
				set -- $(bn_sockperf $t $(addr_of $t) $(port_of MX $t) $T 64)
				record sockperf-F$mux $t 64 $r $1 $2 $3
				step "rep $r: sockperf pp -m 64, server -F $mux, over $t: p50 $1 us, p99 $2 us ($3)"
			done
		done
		stop_servers MX
	done
fi

# --- 4. connection set-up rate (connect + 1-byte exchange + close) ---
if want 4; then
	# Without a log line per connection (what a user runs; at info each of tens of thousands
	# of set-ups wrote one on both sides): the client host's counters say each connection was
	# an ntb one. The client is the only process of its host on the link, so each run starts
	# the host's session of it afresh: its counts after the run are the run's.
	bn_log_saved=${BN_LOG:-}
	BN_LOG=${BN_LOG_SETUP:-warn}
	start_servers CR $CONNRATE server @ADDR@ @PORT@
	for r in $(seq $REPS); do
		for t in $TRANSPORTS; do
			BN_SEQ=$((BN_SEQ + 1)); out=$PL_TMP/connrate-$BN_SEQ.out
			[ $t = lo ] && cconf=$PL_TMP/LO.conf || cconf=$PL_TMP/A.conf
			before=$(bn_setups "$cconf")
			bn_client $t "$out" $(port_of CR $t) $CONNRATE client $(addr_of $t) $(port_of CR $t) $T
			set -- $(cat "$out" 2>/dev/null) nan 0
			chk=-
			if [ $t = ntb ] || [ $t = lo ]; then
				# Every connection must have been an ntb one: as many set-ups on the
				# links as connections (lo: both ends are this host's), none moved off
				# them, none kept on TCP (the run's own table: a difference).
				after=$(bn_setups "$cconf")
				ntb=${after%% *} fo=$(echo $after | cut -d' ' -f2)
				dtcp=$(( ${after##* } - ${before##* } ))
				[ "$ntb" -ge "$2" ] 2>/dev/null && [ "$2" -gt 0 ] && [ "$fo" -eq 0 ] &&
					[ "$dtcp" -eq 0 ] && chk=ok ||
					{ chk=tcp-fallback; bn_say "  (set-ups: ntb $ntb, failovers $fo, tcp $dtcp, connections $2)"; }
			fi
			record connrate $t 1 $r $1 $4 $chk
			step "rep $r: connection set-up over $t: $1 per second, client CPU $4 us per connection ($chk)"
		done
	done
	stop_servers CR
	BN_LOG=$bn_log_saved
	median() { tr ' ' '\n' | grep . | grep -v '^nan$' | sort -n | awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : "nan" }'; }
	# first_times T OUT CONF PORT N BEFORE: the microseconds of N new processes' first
	# connections (`connrate first`) to 127.0.0.2:PORT over T (ntb: under the library with CONF,
	# logging to OUT.log), each after the command BEFORE.
	first_times() {
		_ft=""
		for _i in $(seq $5); do
			eval "$6"
			if [ $1 = ntb ]; then
				_v=$(env NTBSOCK_CONF="$3" NTBSOCK_LOG=info NTBSOCK_LOG_FILE="$2.log" \
					LD_PRELOAD="$PL_LIB" taskset -c $BN_CPU_CLIENT $CONNRATE first 127.0.0.2 $4)
			else
				_v=$(taskset -c $BN_CPU_CLIENT $CONNRATE first 127.0.0.2 $4)
			fi
			_ft="$_ft ${_v:-nan}"
		done
		echo $_ft
	}
	# first_rows TEST CONF PORT_NTB PORT_TCP N BEFORE OK_TEXT BAD WHAT: per repetition, the
	# median of first_times over ntb and tcp, recorded as TEST; the ntb run is "ok" when its
	# log has OK_TEXT N times, else BAD.
	first_rows() {
		for r in $(seq $REPS); do
			for t in ntb tcp; do
				chk=-
				BN_SEQ=$((BN_SEQ + 1)); out=$PL_TMP/$1-$BN_SEQ
				[ $t = ntb ] && port=$3 || port=$4
				med=$(first_times $t "$out" "$2" $port $5 "$6" | median)
				if [ $t = ntb ]; then
					n=$(grep -cF -- "$7" "$out.log" 2>/dev/null)
					[ "${n:-0}" -eq $5 ] && chk=ok || chk=$8
				fi
				record $1 $t 1 $r $med - $chk
				step "rep $r: first connection of a new process, $9, over $t: $med us ($chk)"
			done
		done
	}
	# A new process's first connection (connect + 1-byte exchange) when the peer host has no
	# ntbsock side (no link file: the fallback to TCP must not wait), beside kernel TCP's;
	# the median of FB_N new processes per repetition.
	FB_N=${FB_N:-21}
	nopeer=$PL_LINK-nopeer
	rm_nopeer() { rm -f "$nopeer" "$nopeer.side0" "$nopeer.side1"; }
	BN_EXTRA_CLEANUP="$BN_EXTRA_CLEANUP rm_nopeer"
	sed "s#$PL_LINK\"#$nopeer\"#" "$PL_TMP/A.conf" >"$PL_TMP/A-nopeer.conf"
	bn_next_port
	bn_srv tcp $BN_CPU_SERVER 127.0.0.2 $BN_PORT $CONNRATE server 127.0.0.2 $BN_PORT
	fb_pid=$BN_LAST
	# every one must have decided tcp because nobody serves the link
	first_rows fallback "$PL_TMP/A-nopeer.conf" $BN_PORT $BN_PORT $FB_N 'rm -f "$nopeer"' \
		'tcp (link down: no ntbsock on the peer host)' not-decided "no peer side"
	bn_stop $fb_pid
	rm_nopeer
	# A new process's first connection over a live link after a pause longer than
	# link_timeout_ms (its host's record of the peer's heartbeat too old: it must see the
	# heartbeat move; a cron job's or a script's case), beside kernel TCP's: the median of FP_N
	# new processes per repetition, each after FP_GAP seconds.
	FP_N=${FP_N:-7}
	FP_GAP=${FP_GAP:-0.7}
	for t in ntb tcp; do
		bn_next_port
		bn_srv $t $BN_CPU_SERVER 127.0.0.2 $BN_PORT $CONNRATE server 127.0.0.2 $BN_PORT
		eval "fp_port_$t=$BN_PORT fp_pid_$t=$BN_LAST"
	done
	first_rows firstlive "$PL_TMP/A.conf" $fp_port_ntb $fp_port_tcp $FP_N "sleep $FP_GAP" \
		': ntb (link' tcp-fallback "after a ${FP_GAP}s pause, live peer"
	bn_stop $fp_pid_ntb
	bn_stop $fp_pid_tcp
fi

# --- 5. the transport alone: ntbsock perf's message-size sweep and the reference limits ---
if want 5; then
	for r in $(seq $REPS); do
		if timeout 300 $NTBSOCK perf --csv >"$PL_TMP/perf-$r.csv" 2>"$PL_TMP/perf-$r.err"; then
			tail -n +2 "$PL_TMP/perf-$r.csv" | while IFS=, read size count mbps mps p50 p99 retx crc ver; do
				echo "perf transport $size $r $mbps $p50 $( [ "$ver" = yes ] && echo ok || echo unverified)"
			done >>"$RAW"
			step "rep $r: ntbsock perf sweep: $(tail -n +2 "$PL_TMP/perf-$r.csv" | wc -l) sizes"
		else
			step "rep $r: ntbsock perf failed: $(tail -1 "$PL_TMP/perf-$r.err")"
		echo "ntbsock perf failed in repetition $r: $(tail -1 "$PL_TMP/perf-$r.err")" >>"$NOTES"
		fi
		set -- $(bn_reference)
		record ref-memcpy machine 4M $r $1 - -
		record ref-cacheline machine 64 $r $2 - -
		record ref-cacheline-il machine 64 $r $3 - -
		record perf-ratio64 transport 64 $r $5 - -
		record ref-pipe machine 64K $r $6 - -
		record perf-pipe-share transport 64K $r $8 - -
		step "rep $r: reference: memcpy $1 MB/s, cache-line one-way $2 us; interleaved: $3 us, 64 B p50 $4 us = ${5}x; copy+CRC32C pipeline $6 MB/s, 64 KiB stream $7 MB/s = $8%"
		# The AVX2 CRC32C path on a CPU that has AVX-512 too (what an AVX2-only CPU runs, on
		# this one's cores; glibc's AVX-512 routines off as well): its 64 KiB stream.
		if NTBSOCK_CRC=avx2 timeout 60 $NTBSOCK perf --sizes 64 --count 10 >/dev/null 2>&1 &&
		   [ "$(timeout 60 $NTBSOCK perf --sizes 64 --count 10 | sed -n 's/^CRC32C path: //p')" = vpclmul-avx512+sse4.2 ]; then
			set -- $(NTBSOCK_CRC=avx2 GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD \
				timeout 300 $NTBSOCK perf --sizes 64K --count 20000 --csv 2>/dev/null |
				awk -F, 'NR == 2 { print $3, ($9 == "yes" ? "ok" : "unverified") }') nan unverified
			record perf-avx2 transport 65536 $r $1 - $2
			step "rep $r: ntbsock perf 64 KiB stream on the AVX2 CRC32C path: $1 MB/s ($2)"
		fi
	done
fi

# --- 6. fabric: hosts 1 and 2 of the mesh over modelled links, a link cut (bench/fabric.sh) ---
if want 6; then
	FABRIC_MD=$PL_TMP/fabric.md FABRIC_PNG=$PL_TMP/fabric.png BUILD=$BUILD \
		sh "$ROOT/bench/fabric.sh" "${BENCH_FABRIC_RATE:-1000M}" "$T" >"$PL_TMP/fabric.out" 2>&1 ||
		echo "bench/fabric.sh failed: $(tail -1 "$PL_TMP/fabric.out")" >>"$NOTES"
	step "fabric: $(grep -c '^|' "$PL_TMP/fabric.md" 2>/dev/null || echo 0) table rows (bench/fabric.sh)"
fi

# --- 7. many streams at once: STREAMS_N connections (1000) streaming, each one's share ---
# ntbsock with the default tunables (a connection slot each, 256 transfer contexts: the data
# rings go round among the streams, transport/tp_ring.c) on a link of its own, beside kernel TCP
# loopback; the server checks every byte of every stream.
if want 7; then
	SN=${STREAMS_N:-1000}
	ST=${STREAMS_T:-10} # (#21's fairness goal is over 10 s)
	for H in A B; do
		sed "s#$PL_LINK\"#$PL_LINK-streams\"#" "$PL_TMP/$H.conf" >"$PL_TMP/S$H.conf"
	done
	rm_streams() { rm -f "$PL_LINK-streams" "$PL_LINK-streams.side0" "$PL_LINK-streams.side1"; }
	BN_EXTRA_CLEANUP="$BN_EXTRA_CLEANUP rm_streams"
	for r in $(seq $REPS); do
		for t in ntb tcp; do
			bn_next_port; p=$BN_PORT
			BN_SEQ=$((BN_SEQ + 1)); out=$PL_TMP/streams-$BN_SEQ
			if [ $t = ntb ]; then
				pre="env NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$out.log LD_PRELOAD=$PL_LIB"
				sa="NTBSOCK_CONF=$PL_TMP/SA.conf"; sb="NTBSOCK_CONF=$PL_TMP/SB.conf"
			else
				pre=env; sa=; sb=
			fi
			$pre $sb taskset -c $BN_CPU_SERVER $STREAMS server 127.0.0.2 $p $SN 1 $ST \
				>"$out.srv" 2>&1 &
			spid=$!
			PL_PIDS="$PL_PIDS $spid"
			pl_wait_port 127.0.0.2 $p
			timeout $((ST + 60)) $pre $sa taskset -c $BN_CPU_CLIENT $STREAMS client 127.0.0.2 $p \
				$SN $((ST + 4)) >"$out.cli" 2>&1
			wait $spid
			set -- $(sed -n 's/^FAIR .* min\/mean=\([0-9.]*\) .*MB\/s=\([0-9.]*\)$/\1 \2/p' "$out.srv") nan nan
			chk=ok
			grep -q '^END .* bad=0$' "$out.srv" || chk=bad-bytes
			if [ $t = ntb ] && [ $chk = ok ]; then
				n=$(grep -c ': ntb (link' "$out.log" 2>/dev/null)
				[ "${n:-0}" -ge "$SN" ] && ! grep -q ': tcp (' "$out.log" || chk=tcp-fallback
			fi
			[ "$1" = nan ] && chk=failed
			record streams $t $SN $r $1 $2 $chk
			step "rep $r: $SN streams over $t: slowest/mean $1, $2 MB/s in all ($chk)"
		done
	done
	rm_streams
fi

# --- 8. connections held: CONNS_N connections (10000) open at once, echoed on ---
# tests/helpers/echo10k.c: one epoll client opens CONNS_N connections one after the other to one
# epoll echo server (the set-up time of all of them), then echoes CONNS_ROUNDS rounds (6) of a
# message on every connection, the sizes of CONNS_SIZES (64,2000: inline and data ring) taking
# turns, every byte checked (each size's mean round time), and holds them all while the RSS of
# client and server is read. ntbsock on a link of its own with the demo's window and the default
# tunables (16384 connection slots of 1.5 KiB, 256 transfer contexts of 512 KiB going round;
# CONNS_TUNABLES, when set, is the link's tunables group), every connection
# checked to be ntb in both logs; beside kernel TCP loopback.
ECHO10K=$BUILD/tests/echo10k
CN=${CONNS_N:-10000}
if want 8 && [ ! -x "$ECHO10K" ]; then
	echo "connections held skipped: $ECHO10K not built (make bench builds it)" >>"$NOTES"
elif want 8 && [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt $((CN + 64)) ]; then
	echo "connections held skipped: $CN connections need $((CN + 64)) descriptors per process, the hard limit (ulimit -Hn) is $(ulimit -Hn)" >>"$NOTES"
elif want 8; then
	CR=${CONNS_ROUNDS:-6}
	CS=${CONNS_SIZES:-64,2000}
	for H in A B; do
		sed "s#$PL_LINK\"#$PL_LINK-conns\"#" "$PL_TMP/$H.conf" >"$PL_TMP/C$H.conf"
		[ -z "${CONNS_TUNABLES:-}" ] || echo "tunables = { $CONNS_TUNABLES };" >>"$PL_TMP/C$H.conf"
	done
	rm_conns() { rm -f "$PL_LINK-conns" "$PL_LINK-conns.side0" "$PL_LINK-conns.side1"; }
	BN_EXTRA_CLEANUP="$BN_EXTRA_CLEANUP rm_conns"
	# rss_of PID: "VmRSS RssShmem" in MiB
	rss_of() { awk '/^VmRSS:/ { r = $2 } /^RssShmem:/ { s = $2 } END { printf "%.1f %.1f\n", r / 1024, s / 1024 }' \
		"/proc/$1/status" 2>/dev/null; }
	for r in $(seq $REPS); do
		for t in ntb tcp; do
			bn_next_port; p=$BN_PORT
			BN_SEQ=$((BN_SEQ + 1)); out=$PL_TMP/conns-$BN_SEQ
			mkdir "$out.hold"
			if [ $t = ntb ]; then
				pre_s="env NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$out.srv.log LD_PRELOAD=$PL_LIB NTBSOCK_CONF=$PL_TMP/CB.conf"
				pre_c="env NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$out.cli.log LD_PRELOAD=$PL_LIB NTBSOCK_CONF=$PL_TMP/CA.conf"
			else
				pre_s=env; pre_c=env
			fi
			# (env and taskset exec: the pids are the programs')
			$pre_s taskset -c $BN_CPU_SERVER $ECHO10K server $p 127.0.0.2 >"$out.srv" 2>&1 &
			spid=$!
			PL_PIDS="$PL_PIDS $spid"
			pl_wait_port 127.0.0.2 $p
			$pre_c taskset -c $BN_CPU_CLIENT $ECHO10K client 127.0.0.2 $p $CN $CR $CS "$out.hold" \
				>"$out.cli" 2>&1 &
			cpid=$!
			PL_PIDS="$PL_PIDS $cpid"
			i=0
			while [ ! -e "$out.hold/ready" ] && kill -0 $cpid 2>/dev/null && [ $i -lt 3000 ]; do
				sleep 0.1; i=$((i + 1))
			done
			rc=$(rss_of $cpid); rs=$(rss_of $spid)
			touch "$out.hold/go"
			[ $i -lt 3000 ] || kill $cpid 2>/dev/null
			wait $cpid; crc=$?
			bn_stop $spid
			PL_PIDS=$(echo " $PL_PIDS " | sed "s/ $cpid / /")
			set -- $(sed -n 's/^echo10k client: .* setup_s=\([0-9.]*\) .*/\1/p' "$out.cli") nan
			setup=$1
			p99=$(sed -n 's/^connected .* p99 \([0-9.]*\) ms.*/\1/p' "$out.cli")
			# ntb: every connection ntb in both programs' logs, none tcp
			chk=-
			if [ $t = ntb ]; then
				chk=ok
				for f in "$out.cli.log" "$out.srv.log"; do
					nl=$(grep -c ': ntb (link' "$f" 2>/dev/null) # (n counts the steps)
					[ "${nl:-0}" -eq "$CN" ] && ! grep -q ': tcp (' "$f" || chk=tcp-fallback
				done
			fi
			[ $crc -eq 0 ] || chk=failed
			record conns-setup $t $CN $r $setup ${p99:-nan} $chk
			set -- ${rc:-nan nan} ${rs:-nan nan}
			record conns-rss $t $CN $r $1 $3 $chk
			record conns-shm $t $CN $r $2 $4 $chk
			rounds=""
			for sz in $(echo "$CS" | tr ',' ' '); do
				ms=$(awk -v s=$sz '$1 == "round" && $4 == s ":" { t += $5; n++ } END { if (n) printf "%.2f", t / n; else print "nan" }' "$out.cli")
				record conns-round $t $sz $r $ms - $chk
				rounds="$rounds, $sz B round $ms ms"
			done
			step "rep $r: $CN connections held over $t: set-up of all ${setup} s (connect p99 ${p99:-?} ms)$rounds; RSS client $1 MiB, server $3 MiB ($chk)"
			[ $chk = failed ] && bn_say "  $(grep -v '^round\|^connected' "$out.cli" | head -n 3 | tr '\n' ' ')"
		done
	done
	rm_conns
fi

# --- 9. a new process's first mebibytes (#22 goal 6): bench/firstmb.c, two new processes per run,
# 16 MiB in 64 KiB writes; the reader's first MiB against the median of its later ones. ntb: the
# link file in /dev/shm, as in the demo; ntbhuge: the same link's file on a tmpfs mounted with
# huge=always (root only; its window pages then come in 2 MiB pages), tcp: kernel TCP. A run
# before the repetitions (not recorded) creates each link's window pages. ---
if want 9; then
	FM_MIB=${FIRSTMB_MIB:-16}
	FM_TRS="ntb tcp"
	# (not under PL_TMP: the cleanup removes that before its extra steps)
	HUGE=$(mktemp -d /tmp/ntbsock-huge-XXXXXX)
	umount_huge() {
		rm -f "$HUGE"/fm*
		umount "$HUGE" 2>/dev/null || umount -l "$HUGE" 2>/dev/null
		rmdir "$HUGE" 2>/dev/null
	}
	BN_EXTRA_CLEANUP="$BN_EXTRA_CLEANUP umount_huge"
	if mount -t tmpfs -o huge=always,size=1g tmpfs "$HUGE" 2>/dev/null; then
		FM_TRS="ntb ntbhuge tcp"
		for H in A B; do
			sed "s#$PL_LINK\"#$HUGE/fm\"#" "$PL_TMP/$H.conf" >"$PL_TMP/H$H.conf"
			grep -q "$HUGE/fm" "$PL_TMP/H$H.conf" || bn_die "$H.conf: link path not found"
		done
	else
		echo "first MiB on a huge-page tmpfs skipped: cannot mount one here (root only)" >>"$NOTES"
	fi
	# fm_run T PORT OUT: one run over T, in this shell (its pids reach the cleanup); the
	# server's line into OUT.line ("nan" when a side failed; each side at most 60 s)
	fm_run() {
		case $1 in
		ntb) pre_s="env NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$3.srv.log LD_PRELOAD=$PL_LIB NTBSOCK_CONF=$PL_TMP/B.conf"
		     pre_c="env NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$3.cli.log LD_PRELOAD=$PL_LIB NTBSOCK_CONF=$PL_TMP/A.conf";;
		ntbhuge) pre_s="env NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$3.srv.log LD_PRELOAD=$PL_LIB NTBSOCK_CONF=$PL_TMP/HB.conf"
		     pre_c="env NTBSOCK_LOG=info NTBSOCK_LOG_FILE=$3.cli.log LD_PRELOAD=$PL_LIB NTBSOCK_CONF=$PL_TMP/HA.conf";;
		*) pre_s=env; pre_c=env;;
		esac
		echo nan >"$3.line"
		timeout 60 $pre_s taskset -c $BN_CPU_SERVER $FIRSTMB server 127.0.0.2 $2 $FM_MIB >"$3.srv" 2>&1 &
		_fs=$!
		PL_PIDS="$PL_PIDS $_fs"
		if pl_wait_port 127.0.0.2 $2 >&2; then
			timeout 60 $pre_c taskset -c $BN_CPU_CLIENT $FIRSTMB client 127.0.0.2 $2 $FM_MIB >"$3.cli" 2>&1 ||
				kill $_fs 2>/dev/null
		else
			kill $_fs 2>/dev/null
		fi
		wait $_fs && sed -n 's/^server //p' "$3.srv" >"$3.line"
		PL_PIDS=$(echo " $PL_PIDS " | sed "s/ $_fs / /")
	}
	for t in $FM_TRS; do
		bn_next_port; BN_SEQ=$((BN_SEQ + 1))
		fm_run $t $BN_PORT $PL_TMP/firstmb-warm-$BN_SEQ
	done
	for r in $(seq $REPS); do
		for t in $FM_TRS; do
			bn_next_port; BN_SEQ=$((BN_SEQ + 1)); out=$PL_TMP/firstmb-$BN_SEQ
			fm_run $t $BN_PORT "$out"
			set -- $(cat "$out.line") nan nan nan
			chk=-
			case $t in ntb*)
				# the one connection ntb in both programs' logs
				chk=ok
				for f in "$out.cli.log" "$out.srv.log"; do
					grep -q ': ntb (link' "$f" 2>/dev/null && ! grep -q ': tcp (' "$f" ||
						chk=tcp-fallback
				done;;
			esac
			[ "$1" != nan ] || chk=failed
			record firstmb $t 1M $r $1 $2 $chk
			record firstmb-ratio $t 1M $r $3 - $chk
			step "rep $r: a new process's first MiB over $t: $1 us, later MiBs $2 us (median), ratio $3 ($chk)"
		done
	done
	umount_huge
fi

mkdir -p "$OUTDIR"
base=$OUTDIR/$(date -u +%Y%m%d-%H%M)-$(hostname -s)
$PY "$ROOT/bench/summary.py" "$RAW" "$NOTES" "$base" "$MACHINE" "$REPS" "$T" "$PL_TMP/plot.dat" ||
	bn_die "summary failed"
{ echo "## Projections to real NTB hardware (PROJECTED, not measured; method: bench/README.md)"
  echo; $PY "$ROOT/bench/project.py" "$base.csv"; echo; } >>"$base.md"
if [ -s "$PL_TMP/fabric.md" ]; then
	[ -f "$PL_TMP/fabric.png" ] && mv "$PL_TMP/fabric.png" "$base-fabric.png"
	sed "s#^Plot: fabric.png#Plot: $(basename "$base")-fabric.png#" "$PL_TMP/fabric.md" >>"$base.md"
fi
if command -v gnuplot >/dev/null 2>&1; then
	gnuplot -e "data='$PL_TMP/plot.dat'; out='$base.png'" "$ROOT/bench/plot.gp" 2>"$PL_TMP/gnuplot.err" ||
		bn_say "gnuplot failed: $(tail -2 "$PL_TMP/gnuplot.err")"
fi
bn_say "results: $base.csv $base.md $([ -f "$base.png" ] && echo "$base.png")"
cat "$base.md"
