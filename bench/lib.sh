# SPDX-License-Identifier: MIT
# Shared helpers of bench/demo.sh and bench/bench.sh (sourced): a private pair of demo hosts,
# pinned servers and clients over ntbsock or kernel TCP, iperf3/sockperf runs whose ntbsock
# results are checked to have really used the link, and cleanup of everything started.
#
#   . "$ROOT/bench/lib.sh"; bn_init demo
#   bn_srv ntb 1 iperf3 -s -B 127.0.0.2 -p $port     # host B under the library, on CPU 1
#   bn_iperf ntb 127.0.0.2 $port 3 -l 1K             # -> "GBPS CHECK"
#   bn_sockperf tcp 127.0.0.2 $port 3 64             # -> "P50 P99 CHECK"
#   bn_srv lo 1 127.0.0.1 $port sockperf sr ...      # same host: both ends under a loopback link
#
# CHECK is "ok", "tcp-fallback" (the ntbsock run used kernel TCP) or "-" (a kernel TCP row).
# The integration helpers (tests/integration/lib.sh) provide the port wait and the cleanup by
# pid; they are sourced here, not copied. bn_srv and bn_client keep their variables in _bn_*
# (callers' variables stay untouched); the others are meant for $(...).

BN_ROOT=${BN_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BN_BUILD=${BUILD:-build}
. "$BN_ROOT/tests/integration/lib.sh"
# lib.sh derives ROOT/BUILD from a test's location; ours is bench/, one level up.
ROOT=$BN_ROOT
BUILD=$BN_BUILD
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD;; esac
PL_LIB=$BUILD/libntbsock.so
NTBSOCK=$BUILD/ntbsock
PY=python3
BN_CPU_CLIENT=0
BN_CPU_SERVER=1
BN_EXTRA_CLEANUP=""

bn_say() { echo "$*" >&2; }
bn_die() { echo "$(basename "$0"): $*" >&2; exit 1; }

bn_cleanup() {
	trap - EXIT
	# servers started in a $(...) subshell (a run() function), whose PL_PIDS never reached
	# this shell: each was listed in bn_pids too (bn_srv)
	[ -n "$PL_TMP" ] && [ -f "$PL_TMP/bn_pids" ] && PL_PIDS="$PL_PIDS $(cat "$PL_TMP/bn_pids")"
	[ "${BN_KEEP:-0}" = 1 ] && { echo "kept $PL_TMP" >&2; PL_TMP=""; }
	pl_cleanup
	[ -n "$PL_LINK" ] && rm -f "$PL_LINK".side0 "$PL_LINK".side1 "$PL_LINK"-lo \
		"$PL_LINK"-lo.side0 "$PL_LINK"-lo.side1 "$PL_LINK".stat-tcp
	for f in $BN_EXTRA_CLEANUP; do "$f"; done
}

# bn_init NAME: private link file and host configs (A = 127.0.0.1 side 0, B = 127.0.0.2 side 1),
# LO.conf (conf/examples/loopback.conf on a private file: this host joined to itself, every
# port to 127.0.0.1), a private directory; everything is removed on exit.
bn_init() {
	[ -x "$NTBSOCK" ] && [ -f "$PL_LIB" ] || bn_die "$NTBSOCK or $PL_LIB missing: run make first"
	for c in iperf3 sockperf taskset ss $PY; do
		command -v $c >/dev/null 2>&1 || bn_die "$c not installed (make deps)"
	done
	PL_TMP=$(mktemp -d "/tmp/ntbsock-$1-XXXXXX")
	PL_LINK=/dev/shm/ntbsock-$1-$$
	# (the run's own table of connections kept on TCP: `ntbsock stat` counts them, bn_setups)
	NTBSOCK_STAT_TCP=$PL_LINK.stat-tcp
	export NTBSOCK_STAT_TCP
	trap bn_cleanup EXIT
	trap 'exit 130' INT TERM HUP
	for h in a b; do
		H=$(echo $h | tr ab AB)
		sed "s#/dev/shm/ntbsock-demo\"#$PL_LINK\"#" "$ROOT/conf/examples/demo-$h.conf" >"$PL_TMP/$H.conf"
		grep -q "$PL_LINK" "$PL_TMP/$H.conf" || bn_die "demo-$h.conf: link path not found"
	done
	sed "s#/dev/shm/ntbsock-loopback\"#$PL_LINK-lo\"#" "$ROOT/conf/examples/loopback.conf" >"$PL_TMP/LO.conf"
	grep -q "$PL_LINK-lo" "$PL_TMP/LO.conf" || bn_die "loopback.conf: link path not found"
	if [ "$(nproc)" -lt 2 ]; then BN_CPU_SERVER=0; fi
	BN_PORT=$((50000 + ($$ % 1000) * 8))
	BN_SEQ=0
}

# bn_next_port: advance BN_PORT to a port of this run that nothing listens on.
bn_next_port() {
	BN_PORT=$((BN_PORT + 1))
	while ss -Htan "sport = :$BN_PORT" 2>/dev/null | grep -q .; do BN_PORT=$((BN_PORT + 1)); done
}

# bn_cmd MODE HOST CPU LOG: the command prefix that runs a program pinned to CPU: under
# the library as demo host HOST (A or B) logging to LOG (ntb), under the library with the
# loopback link LO.conf (lo: the same-host rows), inside the namespace of HOST
# (netns, bench.sh sets BN_NS), or plainly (tcp).
bn_cmd() {
	case $1 in
	ntb) echo "env NTBSOCK_LOG=${BN_LOG:-info} NTBSOCK_LOG_FILE=$4 taskset -c $3 $NTBSOCK run -c $PL_TMP/$2.conf --";;
	lo) echo "env NTBSOCK_LOG=${BN_LOG:-info} NTBSOCK_LOG_FILE=$4 taskset -c $3 $NTBSOCK run -c $PL_TMP/LO.conf --";;
	netns) echo "ip netns exec $BN_NS-$(echo $2 | tr AB ab) taskset -c $3";;
	*) echo "taskset -c $3";;
	esac
}

# bn_srv MODE CPU ADDR PORT PROGRAM ARGS...: start a server (host B under ntbsock) in the
# background and wait until it listens on ADDR:PORT. Its pid (the program itself: taskset and
# ntbsock run exec) is in BN_LAST and killed at cleanup.
bn_srv() {
	_bn_m=$1; _bn_c=$2; _bn_a=$3; _bn_p=$4; shift 4
	$(bn_cmd $_bn_m B $_bn_c "$PL_TMP/B.log") "$@" >"$PL_TMP/srv-$_bn_m-$_bn_p.out" 2>&1 &
	BN_LAST=$!
	PL_PIDS="$PL_PIDS $BN_LAST"
	echo $BN_LAST >>"$PL_TMP/bn_pids" # (for bn_cleanup(), if this runs in a subshell)
	if [ $_bn_m = netns ]; then
		_bn_i=0
		until ip netns exec $BN_NS-b ss -Hltn "sport = :$_bn_p" 2>/dev/null | grep -q "$_bn_a:$_bn_p"; do
			_bn_i=$((_bn_i + 1)); [ $_bn_i -lt 100 ] || bn_die "nothing listens on $_bn_a:$_bn_p in $BN_NS-b"
			sleep 0.1
		done
	else
		pl_wait_port $_bn_a $_bn_p
	fi
	kill -0 $BN_LAST 2>/dev/null || { cat "$PL_TMP/srv-$_bn_m-$_bn_p.out" >&2; bn_die "server $* died"; }
}

# bn_stop PID: end a server started by bn_srv.
bn_stop() {
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	PL_PIDS=$(echo " $PL_PIDS " | sed "s/ $1 / /")
}

# bn_client MODE OUT PORT PROGRAM ARGS...: run a client (host A) with output to OUT and its
# library log to OUT.log. While it runs, the kernel bytes carried by its TCP connections to PORT
# are sampled (ss): BN_KBYTES is the largest sum seen. This is per connection, so unlike the
# loopback counters it stays right while other programs use the loopback.
bn_client() {
	_bn_m=$1; _bn_out=$2; _bn_p=$3; shift 3
	timeout "${BN_TIMEOUT:-60}" $(bn_cmd $_bn_m A $BN_CPU_CLIENT "$_bn_out.log") "$@" >"$_bn_out" 2>&1 &
	_bn_cpid=$!
	PL_PIDS="$PL_PIDS $_bn_cpid"
	BN_KBYTES=0
	while kill -0 $_bn_cpid 2>/dev/null; do
		_bn_k=$(ss -Htin state established "( dport = :$_bn_p )" 2>/dev/null |
			grep -o 'bytes_\(acked\|received\):[0-9]*' | awk -F: '{ s += $2 } END { printf "%.0f", s }')
		[ "${_bn_k:-0}" -gt "$BN_KBYTES" ] && BN_KBYTES=$_bn_k
		sleep 0.3
	done
	wait $_bn_cpid
	_bn_rc=$?
	PL_PIDS=$(echo " $PL_PIDS " | sed "s/ $_bn_cpid / /")
	return $_bn_rc
}

# bn_setups CONF: "NTB FAILOVERS TCP": the connections set up on CONF's links by this host and
# those that moved off them, both in the host's current session of each link (they start again
# at 0 when a process opens a link that no process of the host holds), and the connections its
# processes kept on TCP since the table of them was created (`ntbsock stat --json`; "0 0 0"
# when it fails): a check of many connections that needs no per-connection log line.
bn_setups() {
	NTBSOCK_LOG=error $NTBSOCK stat -c "$1" --json 2>/dev/null | $PY -c '
import json, sys
d = json.load(sys.stdin)
print(sum(l["setups"] for l in d["links"]), sum(l["failovers"] for l in d["links"]),
      d["tcp"]["setups"])' 2>/dev/null || echo "0 0 0"
}

# bn_check MODE LOG PAYLOAD: did this ntbsock run use the link? "ok" when the client's log says
# ntb and never tcp, and its kernel TCP connections carried less than a twentieth of the
# payload (plus 64 KiB of slack); "tcp-fallback" otherwise; "-" for kernel TCP runs.
bn_check() {
	[ "$1" = ntb ] || [ "$1" = lo ] || { echo "-"; return; }
	ntb=$(grep -c ': ntb (link' "$2" 2>/dev/null)
	tcp=$(grep -c ': tcp (' "$2" 2>/dev/null)
	if [ "${ntb:-0}" -ge 1 ] && [ "${tcp:-0}" -eq 0 ] && [ "$BN_KBYTES" -lt $(( $3 / 20 + 65536 )) ]; then
		echo ok
	else
		bn_say "  (not over ntb: log ntb=$ntb tcp=$tcp, kernel TCP carried $BN_KBYTES bytes of $3)"
		echo tcp-fallback
	fi
}

# bn_bytes SIZE: SIZE with a K or M suffix in bytes.
bn_bytes() {
	case $1 in
	*K) echo $(( ${1%K} * 1024 ));;
	*M) echo $(( ${1%M} * 1048576 ));;
	*) echo $1;;
	esac
}

# bn_iperf MODE ADDR PORT SECONDS IPERF-ARGS...: one iperf3 client run; prints
# "GBPS CHECK" (receiver-side Gbit/s), or "nan failed".
bn_iperf() {
	m=$1; a=$2; p=$3; t=$4; shift 4
	BN_SEQ=$((BN_SEQ + 1)); out=$PL_TMP/iperf-$BN_SEQ.json
	bn_client $m "$out" $p iperf3 -c $a -p $p -t $t -J "$@"
	set -- $($PY -c 'import json,sys
j = json.load(open(sys.argv[1]))
if "error" in j: sys.exit(j["error"])
e = j["end"]["sum_received"]
print("%.4f %d" % (e["bits_per_second"] / 1e9, e["bytes"]))' "$out" 2>>"$PL_TMP/errors")
	if [ -z "$1" ]; then
		bn_say "  iperf3 $m: failed: $(tail -1 "$PL_TMP/errors")"
		echo "nan failed"; return
	fi
	echo "$1 $(bn_check $m "$out.log" $2)"
}

# bn_sockperf MODE ADDR PORT SECONDS SIZE [ARGS...]: one sockperf ping-pong run; prints
# "P50 P99 CHECK" in microseconds of one-way latency (sockperf reports half the round trip).
bn_sockperf() {
	m=$1; a=$2; p=$3; t=$4; s=$(bn_bytes $5); shift 5
	BN_SEQ=$((BN_SEQ + 1)); out=$PL_TMP/sockperf-$BN_SEQ.out
	# --mps: sockperf sizes its table of send times from the rate it expects (about 600 000
	# round trips a second unless told); ntbsock's 64-byte ping-pong can go faster, and
	# sockperf then aborts with "_seqN > m_maxSequenceNo". 2 M/s is above any round-trip
	# rate here, so it paces neither mode (a cycle shorter than a round trip never waits).
	if ! bn_client $m "$out" $p sockperf pp --tcp --mps 2000000 -i $a -p $p -t $t -m $s "$@" ||
		! grep -q 'percentile 50.000' "$out"; then
		bn_say "  sockperf $m -m $s: failed: $(grep -v '^ *$' "$out" | tail -2 | tr '\n' ' ')"
		echo "nan nan failed"; return
	fi
	p50=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$out" | tail -1)
	p99=$(sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' "$out" | tail -1)
	sent=$(sed -n 's/.*Total Run.*SentMessages=\([0-9]*\).*/\1/p' "$out" | tail -1)
	echo "$p50 $p99 $(bn_check $m "$out.log" $(( ${sent:-0} * s * 2 )))"
}

# bn_reference: "MEMCPY_MBPS CACHELINE_ONEWAY_US IL_CACHELINE_US IL_P50_US IL_RATIO PIPE_MBPS
# STREAM64K_MBPS PIPE_SHARE" from ntbsock perf (its own private link): the end-of-run
# references; the cache line measured interleaved with the 64 B ping-pong, that ping-pong's
# one-way p50 and their ratio (the two from the same host placement of the two vCPUs: the transport's
# latency goal); and the copy+CRC32C pipeline measured interleaved with the 64 KiB stream, that
# stream's rate and its share of the pipeline's (in %).
bn_reference() {
	timeout "${BN_TIMEOUT:-60}" $NTBSOCK perf --sizes 64,64K --count 20000 >"$PL_TMP/ref.out" 2>&1
	mc=$(sed -n 's/.*memcpy \([0-9.]*\) MB\/s.*/\1/p' "$PL_TMP/ref.out")
	cl=$(sed -n 's/.*cache line one-way \([0-9.]*\) us.*/\1/p' "$PL_TMP/ref.out")
	il=$(sed -n 's/^reference (interleaved .*cache-line one-way \([0-9.]*\) us; .* p50 \([0-9.]*\) us = \([0-9.]*\)x$/\1 \2 \3/p' \
		"$PL_TMP/ref.out")
	pp=$(sed -n 's/^reference (interleaved with the 64 KiB stream): copy+CRC32C pipeline \([0-9]*\) MB\/s .* stream \([0-9]*\) MB\/s = \([0-9]*\)%$/\1 \2 \3/p' \
		"$PL_TMP/ref.out")
	echo "${mc:-nan} ${cl:-nan} ${il:-nan nan nan} ${pp:-nan nan nan}"
}

# bn_helpers: build bench/uds_bench.c, bench/connrate.c and bench/firstmb.c into $BUILD/bench (make does not know
# them); UDS and CONNRATE name them, STREAMS the test helper tests/helpers/streams.c (make bench
# builds it).
bn_helpers() {
	mkdir -p "$BUILD/bench"
	for h in uds_bench connrate firstmb; do
		${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o "$BUILD/bench/$h" "$ROOT/bench/$h.c" ||
			bn_die "cannot build bench/$h.c"
	done
	UDS=$BUILD/bench/uds_bench
	CONNRATE=$BUILD/bench/connrate
	FIRSTMB=$BUILD/bench/firstmb
	STREAMS=$BUILD/tests/streams
}

# bn_machine: one line naming the machine (and its load) and the code the numbers come from.
bn_machine() {
	cpu=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -1)
	rev=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
	echo "$(hostname), $cpu, $(nproc) cores, Linux $(uname -r), load average $(cut -d' ' -f1 /proc/loadavg) at start, ntbsock $rev, $(date -u '+%Y-%m-%d %H:%M UTC')"
}

# bn_alternate REPS RUNFN RATIO COLUMNS: REPS repetitions of "RUNFN tcp" then "RUNFN ntb", each
# printing its numbers and then a check word (bn_check), as Markdown rows "| rep | transport |
# numbers | of kernel TCP | check |" under a header of COLUMNS ("|"-separated names of the
# numbers); the ratio is number RATIO (from 1) to kernel TCP's in the same repetition ("-" for
# a failed run). Progress on stderr.
bn_alternate() {
	_alt_fn=$2; _alt_ri=$3
	echo "| rep | transport | $4 | of kernel TCP | check |"
	echo "|---|---|$(echo "$4" | sed 's/[^|][^|]*/---/g')|---|---|"
	for rep in $(seq "$1"); do
		_alt_tcp=0
		for _alt_m in tcp ntb; do
			bn_say "rep $rep: $_alt_m"
			_alt_r=$($_alt_fn $_alt_m)
			[ $_alt_m = tcp ] && _alt_tcp=$(echo "$_alt_r" | awk -v i="$_alt_ri" '{ print $i + 0 }')
			echo "$_alt_r" | awk -v rep="$rep" -v m="$_alt_m" -v i="$_alt_ri" -v b="$_alt_tcp" '{
				row = "| " rep " | " (m == "tcp" ? "kernel TCP" : "ntbsock") " |"
				for (k = 1; k < NF; k++)
					row = row " " $k " |"
				r = (b > 0 && $i + 0 > 0) ? sprintf("%.2f", $i / b) : "-"
				print row " " r " | " $NF " |" }'
		done
	done
}
