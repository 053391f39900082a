# SPDX-License-Identifier: MIT
# Plot of bench/bench.sh's results: throughput and one-way latency by message size, ntbsock next
# to kernel TCP (loopback, netns/veth) and a Unix socket. Call: gnuplot -e "data='F'; out='P'".
# Blocks of DATA (see bench/summary.py write_plot): 0-3 iperf3 ntb/tcp/netns/unix, 4 perf
# throughput, 5-8 sockperf p50 ntb/tcp/netns/unix, 9 perf p50; columns: bytes median min max.
set terminal pngcairo size 1400,560 font ",10"
set output out
set multiplot layout 1,2 title "ntbsock vs kernel TCP (medians, bars: min-max)"
set logscale x 2
set format x "%.0b%B"
set xlabel "message / write size (bytes)"
set grid
set key top left
set ylabel "throughput (Gbit/s)"
set title "iperf3 -l SIZE; ntbsock perf (transport alone)"
plot data index 0 using 1:2:3:4 with yerrorlines lw 2 title "ntbsock (iperf3)", \
     data index 1 using 1:2:3:4 with yerrorlines title "TCP loopback", \
     data index 2 using 1:2:3:4 with yerrorlines title "TCP netns/veth", \
     data index 3 using 1:2:3:4 with yerrorlines title "Unix socket", \
     data index 4 using 1:2 with linespoints dt 2 title "ntbsock perf (transport)"
set logscale y 10
set ylabel "one-way latency p50 (us)"
set title "sockperf ping-pong -m SIZE; ntbsock perf"
plot data index 5 using 1:2:3:4 with yerrorlines lw 2 title "ntbsock (sockperf)", \
     data index 6 using 1:2:3:4 with yerrorlines title "TCP loopback", \
     data index 7 using 1:2:3:4 with yerrorlines title "TCP netns/veth", \
     data index 8 using 1:2:3:4 with yerrorlines title "Unix socket", \
     data index 9 using 1:2 with linespoints dt 2 title "ntbsock perf (transport)"
unset multiplot
