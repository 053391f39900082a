#!/bin/sh
# SPDX-License-Identifier: MIT
# make demo: unmodified iperf3 and sockperf between demo hosts A and B over ntbsock and over
# kernel TCP loopback in the same run, printed as one table with the machine's reference limits;
# then the same host alone: client and server both on 127.0.0.1 over ntbsock's loopback link
# (conf/examples/loopback.conf) against kernel loopback TCP and a Unix-domain socket.
#
# Environment: BUILD (build dir, default build), DEMO_T (seconds per measurement, default 3),
# DEMO_QUICK=1 (1-second runs, two iperf3 sizes and one sockperf size: the smoke test's mode).
# Progress goes to stderr, the table (Markdown) to stdout. A measurement that fails is tried
# once more and its row says "(2nd try)". Exit status 1 when a measurement failed twice or an
# ntbsock row did not really use the link (the row says so); numbers never fail it.
. "$(dirname "$0")/lib.sh"
bn_init demo
bn_helpers
MACHINE=$(bn_machine)

if [ "${DEMO_QUICK:-0}" = 1 ]; then
	T=${DEMO_T:-1}; OMIT=0
	IPERF_SIZES="1K 128K"; SP_SIZES="64"
else
	T=${DEMO_T:-3}; OMIT=1
	IPERF_SIZES="64 1K 16K 128K 1M"; SP_SIZES="64 1K 16K"
fi
RES=$PL_TMP/results
: >"$RES"
n=0
total=$(( $(echo $IPERF_SIZES | wc -w) * 5 + $(echo $SP_SIZES | wc -w) * 5 + 1 ))
step() { n=$((n + 1)); bn_say "[$n/$total] $*"; }

bn_say "ntbsock demo: iperf3 and sockperf, host A (127.0.0.1, CPU $BN_CPU_CLIENT) -> host B (127.0.0.2, CPU $BN_CPU_SERVER), ${T}s per measurement"

# --- throughput: one iperf3 server per mode, sizes interleaved so drift hits both alike ---
bn_next_port; pn=$BN_PORT; bn_srv ntb $BN_CPU_SERVER 127.0.0.2 $pn iperf3 -s -B 127.0.0.2 -p $pn; sn=$BN_LAST
bn_next_port; pt=$BN_PORT; bn_srv tcp $BN_CPU_SERVER 127.0.0.2 $pt iperf3 -s -B 127.0.0.2 -p $pt; st=$BN_LAST
for s in $IPERF_SIZES; do
	for m in ntb tcp; do
		[ $m = ntb ] && p=$pn || p=$pt
		set -- $(bn_iperf $m 127.0.0.2 $p $T -O $OMIT -l $s)
		[ "$2" = failed ] && bn_say "  retrying once" && set -- $(bn_iperf $m 127.0.0.2 $p $T -O $OMIT -l $s) &&
			{ [ "$2" = failed ] || set -- $1 $2-retried; }
		echo "iperf $s $m $1 - $2" >>"$RES"
		step "iperf3 -l $s over $( [ $m = ntb ] && echo ntbsock || echo 'kernel TCP'): $1 Gbit/s ($2)"
	done
done
bn_stop $sn; bn_stop $st

# --- latency: sockperf ping-pong, one-way p50/p99 ---
bn_next_port; pn=$BN_PORT; bn_srv ntb $BN_CPU_SERVER 127.0.0.2 $pn sockperf sr --tcp -i 127.0.0.2 -p $pn; sn=$BN_LAST
bn_next_port; pt=$BN_PORT; bn_srv tcp $BN_CPU_SERVER 127.0.0.2 $pt sockperf sr --tcp -i 127.0.0.2 -p $pt; st=$BN_LAST
for s in $SP_SIZES; do
	for m in ntb tcp; do
		[ $m = ntb ] && p=$pn || p=$pt
		set -- $(bn_sockperf $m 127.0.0.2 $p $T $s)
		[ "$3" = failed ] && bn_say "  retrying once" && set -- $(bn_sockperf $m 127.0.0.2 $p $T $s) &&
			{ [ "$3" = failed ] || set -- $1 $2 $3-retried; }
		echo "sockperf $s $m $1 $2 $3" >>"$RES"
		step "sockperf ping-pong -m $s over $( [ $m = ntb ] && echo ntbsock || echo 'kernel TCP'): one-way p50 $1 us, p99 $2 us ($3)"
	done
done
bn_stop $sn; bn_stop $st

# --- the same host: loopback link (lo) vs kernel loopback TCP vs a Unix socket, interleaved ---
bn_say "same host: client and server on 127.0.0.1 (CPUs $BN_CPU_CLIENT and $BN_CPU_SERVER): ntbsock loopback link, kernel TCP, Unix socket"
bn_next_port; pl=$BN_PORT; bn_srv lo $BN_CPU_SERVER 127.0.0.1 $pl iperf3 -s -B 127.0.0.1 -p $pl; sl=$BN_LAST
bn_next_port; pk=$BN_PORT; bn_srv tcp $BN_CPU_SERVER 127.0.0.1 $pk iperf3 -s -B 127.0.0.1 -p $pk; sk=$BN_LAST
for s in $IPERF_SIZES; do
	for m in lo lotcp; do
		[ $m = lo ] && { p=$pl; mm=lo; } || { p=$pk; mm=tcp; }
		set -- $(bn_iperf $mm 127.0.0.1 $p $T -O $OMIT -l $s)
		[ "$2" = failed ] && bn_say "  retrying once" && set -- $(bn_iperf $mm 127.0.0.1 $p $T -O $OMIT -l $s) &&
			{ [ "$2" = failed ] || set -- $1 $2-retried; }
		echo "iperf $s $m $1 - $2" >>"$RES"
		step "same host: iperf3 -l $s over $( [ $m = lo ] && echo 'the loopback link' || echo 'kernel TCP'): $1 Gbit/s ($2)"
	done
	set -- $(taskset -c $BN_CPU_CLIENT $UDS tp $(bn_bytes $s) $T $BN_CPU_CLIENT $BN_CPU_SERVER 2>/dev/null || echo nan)
	echo "iperf $s unix ${1:-nan} - -" >>"$RES"
	step "same host: Unix socket stream, ${s}-byte writes: $1 Gbit/s"
done
bn_stop $sl; bn_stop $sk
bn_next_port; pl=$BN_PORT; bn_srv lo $BN_CPU_SERVER 127.0.0.1 $pl sockperf sr --tcp -i 127.0.0.1 -p $pl; sl=$BN_LAST
bn_next_port; pk=$BN_PORT; bn_srv tcp $BN_CPU_SERVER 127.0.0.1 $pk sockperf sr --tcp -i 127.0.0.1 -p $pk; sk=$BN_LAST
for s in $SP_SIZES; do
	for m in lo lotcp; do
		[ $m = lo ] && { p=$pl; mm=lo; } || { p=$pk; mm=tcp; }
		set -- $(bn_sockperf $mm 127.0.0.1 $p $T $s)
		[ "$3" = failed ] && bn_say "  retrying once" && set -- $(bn_sockperf $mm 127.0.0.1 $p $T $s) &&
			{ [ "$3" = failed ] || set -- $1 $2 $3-retried; }
		echo "sockperf $s $m $1 $2 $3" >>"$RES"
		step "same host: sockperf ping-pong -m $s over $( [ $m = lo ] && echo 'the loopback link' || echo 'kernel TCP'): one-way p50 $1 us, p99 $2 us ($3)"
	done
	set -- $(taskset -c $BN_CPU_CLIENT $UDS pp $(bn_bytes $s) $T $BN_CPU_CLIENT $BN_CPU_SERVER 2>/dev/null || echo nan nan)
	echo "sockperf $s unix ${1:-nan} ${2:-nan} -" >>"$RES"
	step "same host: Unix socket ping-pong, $s bytes: one-way p50 $1 us, p99 $2 us"
done
bn_stop $sl; bn_stop $sk

# --- the machine's reference limits ---
set -- $(bn_reference)
echo "ref memcpy - $1 - -" >>"$RES"
echo "ref cacheline - $2 - -" >>"$RES"
echo "ref cacheline-il - $3 $4 $5" >>"$RES"
step "ntbsock perf reference: memcpy $1 MB/s, cache-line one-way $2 us; interleaved with the 64 B ping-pong: $3 us, transport p50 $4 us = ${5}x"

$PY "$ROOT/bench/table.py" demo "$MACHINE" "$RES"
