#!/bin/sh
# SPDX-License-Identifier: MIT
# Short connections of a JVM: a Java client (bench/java/EchoCli.java) makes JC_N echo connections
# from a pool of JC_THREADS threads, each a blocking java.net.Socket writing 1 to 20,000 bytes,
# half-closing and reading them back, to a java.nio selector server (bench/java/EchoSrv.java),
# over kernel TCP loopback and between the two demo hosts under the library, client and server
# pinned to different CPUs, alternating, JC_REPS times. Prints a Markdown table of the run's wall
# time and the client's CPU time (ms) and the wall time's ratio to kernel TCP's in the same
# repetition; progress on stderr. Every ntbsock connection must be ntb in the client's log
# (check). Needs a JDK (make deps). IPv4 sockets (java.net.preferIPv4Stack): the listener is
# then found by its address.
#
# JC_CPUS=all: both processes on every CPU, unpinned (a JVM's threads spread over the CPUs, where
# each wake-up of a blocked reader may cost a migration).
#
#   sh bench/jvm_conns.sh          # BUILD=build, JC_REPS=3, JC_N=2000, JC_THREADS=16, JC_CPUS=pinned
. "$(dirname "$0")/lib.sh"
if [ "${JC_CPUS:-pinned}" = all ]; then
	BN_CPU_CLIENT=0-$(($(nproc) - 1))
	BN_CPU_SERVER=$BN_CPU_CLIENT
fi
REPS=${JC_REPS:-3}
N=${JC_N:-2000}
T=${JC_THREADS:-16}
command -v javac >/dev/null 2>&1 || bn_die "javac not installed (make deps)"
bn_init jvmconns
javac -d "$PL_TMP" "$ROOT/bench/java/EchoSrv.java" "$ROOT/bench/java/EchoCli.java" ||
	bn_die "javac failed"

# run MODE: one client run; prints "MS CPU_MS CHECK"
run() {
	bn_next_port
	bn_srv $1 $BN_CPU_SERVER 127.0.0.2 $BN_PORT java -Djava.net.preferIPv4Stack=true -cp "$PL_TMP" EchoSrv 127.0.0.2 $BN_PORT
	srv=$BN_LAST
	BN_SEQ=$((BN_SEQ + 1))
	out=$PL_TMP/cli-$BN_SEQ.out
	rm -f "$out" "$out.log" # (BN_SEQ counts in this subshell only: the name comes again)
	bn_client $1 "$out" $BN_PORT java -Djava.net.preferIPv4Stack=true -cp "$PL_TMP" EchoCli 127.0.0.2 $BN_PORT $N $T
	bn_stop $srv
	r=$(sed -n 's/^RESULT //p' "$out")
	[ -n "$r" ] || { bn_say "  $1: $(tail -1 "$out")"; echo "- - failed"; return; }
	# (about 10,000 B per connection each way)
	c=$(bn_check $1 "$out.log" $((N * 10000 * 2)))
	if [ "$1" = ntb ] && [ "$(grep -c ': ntb (link' "$out.log")" -ne "$N" ]; then
		c=tcp-fallback
	fi
	echo "$r $c"
}

bn_alternate "$REPS" run 1 "wall ms | client CPU ms"
bn_say "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $N connections from $T threads per run; client on CPUs $BN_CPU_CLIENT, server on $BN_CPU_SERVER"
