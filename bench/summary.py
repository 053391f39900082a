# SPDX-License-Identifier: MIT
"""Summarise bench/bench.sh's raw measurements ("test transport size rep v1 v2 check" lines)
into BASE.csv (median, min, max per measurement) and BASE.md (tables, goals), and write the
data file bench/plot.gp draws.

usage: summary.py RAW NOTES BASE MACHINE REPS SECONDS PLOTDATA
An ntbsock value whose run did not use the link (check "tcp-fallback") is left out of the
median and counted in the check column: TCP numbers are never presented as ntbsock numbers."""
import math
import statistics
import sys

NAMES = {"ntb": "ntbsock", "lo": "ntbsock loopback link", "tcp": "TCP loopback",
         "netns": "TCP netns/veth", "ntbhuge": "ntbsock, link file on a huge-page tmpfs",
         "unix": "Unix socket", "transport": "ntbsock perf", "machine": "machine"}
ORDER = ["ntb", "tcp", "netns", "unix"]      # plot.gp's blocks
TABLE_ORDER = ["ntb", "ntbhuge", "lo", "tcp", "netns", "unix"]


def size_bytes(s):
    mult = {"K": 1024, "M": 1 << 20}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def size_label(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1024)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def num(text):
    try:
        v = float(text)
        return v if math.isfinite(v) else None
    except ValueError:
        return None


class Stat:
    def __init__(self, values, checks):
        good = [v for v, c in zip(values, checks) if v is not None and c in ("ok", "-")]
        self.n = len(values)
        self.bad = sum(c not in ("ok", "-") for c in checks)
        self.fallback = sum(c == "tcp-fallback" for c in checks)
        self.values = good
        self.median = statistics.median(good) if good else None
        self.lo = min(good) if good else None
        self.hi = max(good) if good else None

    def check(self):
        if self.bad == 0:
            return "ok"
        return "%d of %d runs failed, %d of them fell back to tcp" % (self.bad, self.n, self.fallback)


def fmt(v):
    if v is None:
        return "n/a"
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def cell(st):
    if st is None:
        return ""
    text = "n/a" if st.median is None else "%s [%s–%s]" % (fmt(st.median), fmt(st.lo), fmt(st.hi))
    if st.fallback:
        text += " (%d/%d tcp fallback!)" % (st.fallback, st.n)
    if st.bad > st.fallback:
        text += " (%d/%d failed)" % (st.bad - st.fallback, st.n)
    return text


def ratio(a, b):
    if a is None or b is None or a.median is None or b.median is None or b.median == 0:
        return None
    return a.median / b.median


def rfmt(r):
    return "n/a" if r is None else "%.2f×" % r


def load(path):
    groups = {}
    for line in open(path):
        f = line.split()
        if len(f) < 7:
            continue
        test, tr, size, _rep, v1, v2, chk = f[:7]
        for metric, v in (("v1", v1), ("v2", v2)):
            if v == "-":
                continue
            g = groups.setdefault((test, size_bytes(size), tr, metric), ([], []))
            g[0].append(num(v))
            g[1].append(chk)
    return {k: Stat(*g) for k, g in groups.items()}


UNITS = {("iperf3", "v1"): "Gbit/s", ("iperf3-P4", "v1"): "Gbit/s", ("connrate", "v1"): "conn/s",
         ("connrate", "v2"): "us client CPU per connection",
         ("fallback", "v1"): "us first connection, no peer side",
         ("firstlive", "v1"): "us first connection after a pause, live peer",
         ("perf", "v1"): "MB/s", ("perf", "v2"): "us p50", ("ref-memcpy", "v1"): "MB/s",
         ("ref-cacheline", "v1"): "us one-way", ("ref-cacheline-il", "v1"): "us one-way",
         ("perf-ratio64", "v1"): "x cache line", ("ref-pipe", "v1"): "MB/s",
         ("perf-pipe-share", "v1"): "% of the interleaved pipeline",
         ("perf-avx2", "v1"): "MB/s, 64 KiB stream, AVX2 CRC32C path",
         ("streams", "v1"): "slowest connection / mean", ("streams", "v2"): "MB/s in all",
         ("conns-setup", "v1"): "s to open all", ("conns-setup", "v2"): "ms connect() p99",
         ("conns-round", "v1"): "ms per echo round on every connection",
         ("conns-rss", "v1"): "MiB client RSS", ("conns-rss", "v2"): "MiB server RSS",
         ("conns-shm", "v1"): "MiB client RSS of shared memory",
         ("conns-shm", "v2"): "MiB server RSS of shared memory",
         ("firstmb", "v1"): "us for a new process's first MiB read",
         ("firstmb", "v2"): "us per later MiB (median)",
         ("firstmb-ratio", "v1"): "first MiB / later MiBs"}


def unit_of(test, metric):
    if test.startswith("sockperf"):
        return "us one-way " + ("p50" if metric == "v1" else "p99")
    return UNITS.get((test, metric), "")


def write_csv(stats, path):
    with open(path, "w") as out:
        out.write("test,size_bytes,transport,unit,median,min,max,runs,values,check\n")
        for (test, size, tr, metric), st in sorted(stats.items()):
            out.write("%s,%d,%s,%s,%s,%s,%s,%d,%s,%s\n" % (
                test, size, tr, unit_of(test, metric),
                "" if st.median is None else "%g" % st.median,
                "" if st.lo is None else "%g" % st.lo, "" if st.hi is None else "%g" % st.hi,
                st.n, ";".join("%g" % v for v in st.values), st.check()))


def sizes_of(stats, test):
    return sorted({k[1] for k in stats if k[0] == test})


def transports_of(stats, test):
    present = {k[2] for k in stats if k[0] == test}
    return [t for t in TABLE_ORDER if t in present]


def table_by_size(stats, test, metric, ratio_note, inverse, out):
    trs = transports_of(stats, test)
    if not trs:
        return
    out.append("| size | " + " | ".join(NAMES[t] for t in trs) + " | " + ratio_note + " |")
    out.append("|---:|" + "---:|" * (len(trs) + 1))
    for size in sizes_of(stats, test):
        row = [stats.get((test, size, t, metric)) for t in trs]
        n, t = stats.get((test, size, "ntb", metric)), stats.get((test, size, "tcp", metric))
        r = ratio(t, n) if inverse else ratio(n, t)
        out.append("| %s | %s | %s |" % (size_label(size), " | ".join(cell(c) for c in row), rfmt(r)))
    out.append("")


def goals(stats):
    def get(test, size, tr, metric="v1"):
        return stats.get((test, size, tr, metric))

    rows = [
        ("iperf3 128 KiB writes, ntbsock/TCP throughput", "≥ 2×", 2.0,
         ratio(get("iperf3", 131072, "ntb"), get("iperf3", 131072, "tcp"))),
        ("iperf3 1 KiB writes, ntbsock/TCP throughput", "≥ 5×", 5.0,
         ratio(get("iperf3", 1024, "ntb"), get("iperf3", 1024, "tcp"))),
        ("sockperf 64 B p50 one-way, TCP/ntbsock latency", "≥ 10×", 10.0,
         ratio(get("sockperf", 64, "tcp"), get("sockperf", 64, "ntb"))),
        ("connection set-up rate, ntbsock/TCP", "≥ 1×", 1.0,
         ratio(get("connrate", 1, "ntb"), get("connrate", 1, "tcp"))),
        ("same host: sockperf 64 B p50 one-way, TCP loopback/ntbsock loopback link", "≥ 20×", 20.0,
         ratio(get("sockperf", 64, "tcp"), get("sockperf", 64, "lo"))),
        ("same host: iperf3 128 KiB writes, ntbsock loopback link/TCP loopback", "≥ 5×", 5.0,
         ratio(get("iperf3", 131072, "lo"), get("iperf3", 131072, "tcp"))),
    ]
    out = ["| goal | target | measured (medians) | met |", "|---|---:|---:|---|"]
    for name, target, need, r in rows:
        met = "n/a" if r is None else ("yes" if r >= need else "**no**")
        out.append("| %s | %s | %s | %s |" % (name, target, rfmt(r), met))
    r = ratio(get("connrate", 1, "ntb", "v2"), get("connrate", 1, "tcp", "v2"))
    out.append("| client CPU per connection set-up, ntbsock/TCP | ≤ 1.3× | %s | %s |" % (
        rfmt(r), "n/a" if r is None else ("yes" if r <= 1.3 else "**no**")))
    fa, ft = get("fallback", 1, "ntb"), get("fallback", 1, "tcp")
    d = None if (fa is None or ft is None or fa.median is None or ft.median is None) \
        else fa.median - ft.median
    out.append("| a new process's first connection with no peer side: ntbsock − TCP "
               "| ≤ 1000 µs | %s | %s |" % ("n/a" if d is None else "%.0f µs" % d,
                                           "n/a" if d is None else ("yes" if d <= 1000 else "**no**")))
    sizes = sizes_of(stats, "streams")
    if sizes:
        st = get("streams", sizes[-1], "ntb")
        out.append("| %d streams at once over ntbsock: slowest connection / mean | ≥ 0.25 | %s | %s |" % (
            sizes[-1], "n/a" if st is None or st.median is None else "%.2f" % st.median,
            "n/a" if st is None or st.median is None else ("yes" if st.median >= 0.25 else "**no**")))
    tm = get("firstmb-ratio", 1 << 20, "tcp")
    for t, where in (("ntb", "link file in /dev/shm"), ("ntbhuge", "link file on a huge-page tmpfs")):
        fm = get("firstmb-ratio", 1 << 20, t)
        if fm is None:
            continue
        out.append("| a new process's first MiB read / its later MiBs, ntbsock, %s (kernel TCP: "
                   "%s) | ≤ 1.5× | %s | %s |" % (
                       where, "n/a" if tm is None or tm.median is None else "%.2f×" % tm.median,
                       "n/a" if fm.median is None else "%.2f×" % fm.median,
                       "n/a" if fm.median is None else ("yes" if fm.median <= 1.5 else "**no**")))
    # the transport's own goals (ntbsock perf alone)
    mem, bw = get("ref-memcpy", 4 << 20, "machine"), get("perf", 65536, "transport")
    frac = None if (mem is None or bw is None or mem.median is None or bw.median is None
                    or not mem.median) else bw.median / mem.median
    out.append("| ntbsock perf 64 KiB streaming / same-run memcpy (streaming goal) | ≥ 50%% | %s | %s |" % (
        "n/a" if frac is None else "%.0f%%" % (100 * frac),
        "n/a" if frac is None else ("yes" if frac >= 0.5 else "**no**")))
    av = get("perf-avx2", 65536, "transport")
    if av is not None:
        fa = None if (mem is None or av.median is None or mem.median is None
                      or not mem.median) else av.median / mem.median
        out.append("| (context) the same on the AVX2 CRC32C path, on this CPU's cores "
                   "(NTBSOCK_CRC=avx2) / memcpy | — | %s | |" % (
                       "n/a" if fa is None else "%.0f%%" % (100 * fa)))
    sh = get("perf-pipe-share", 65536, "transport")
    out.append("| (context) the same stream / the copy+CRC32C pipeline measured interleaved with it "
               "| — | %s | |" % ("n/a" if sh is None or sh.median is None else
                                 "%.0f%% [%s–%s]" % (sh.median, fmt(sh.lo), fmt(sh.hi))))
    il = get("perf-ratio64", 64, "transport")
    r = None if il is None else il.median
    out.append("| ntbsock perf 64 B one-way p50 / cache line measured interleaved (latency goal) "
               "| ≤ 4× | %s | %s |" % (
                   "n/a" if r is None else "%.1f× [%s–%s]" % (r, rfmt(il.lo), rfmt(il.hi)),
                   "n/a" if r is None else ("yes" if r <= 4 else "**no**")))
    return out


def conns_held(stats, out):
    """Section 8: N connections held open at once (tests/helpers/echo10k.c)."""
    ns = sizes_of(stats, "conns-setup")
    if not ns:
        return
    n = ns[-1]
    out += ["## %d connections held open at once (tests/helpers/echo10k.c: one epoll client "
            "opens them one after the other to one epoll echo server, echoes a message on every "
            "one per round, every byte checked, and holds them while the RSS is read)" % n, ""]
    out.append("| measurement | ntbsock | TCP loopback | ntbsock/TCP (below 1×: ntbsock better) |")
    out.append("|---|---:|---:|---:|")

    def row(name, test, size, metric):
        a, b = stats.get((test, size, "ntb", metric)), stats.get((test, size, "tcp", metric))
        if a is None and b is None:
            return
        out.append("| %s | %s | %s | %s |" % (name, cell(a), cell(b), rfmt(ratio(a, b))))

    row("set-up of all %d connections (s)" % n, "conns-setup", n, "v1")
    row("one connect(), p99 (ms)", "conns-setup", n, "v2")
    for size in sizes_of(stats, "conns-round"):
        row("echo round, %s on each of the %d (ms; mean of the rounds of this size)"
            % (size_label(size), n), "conns-round", size, "v1")
    row("client RSS, all held (MiB)", "conns-rss", n, "v1")
    row("server RSS, all held (MiB)", "conns-rss", n, "v2")
    row("of which shared memory (the link's window), client (MiB)", "conns-shm", n, "v1")
    row("of which shared memory, server (MiB)", "conns-shm", n, "v2")
    out.append("")


def first_table(out, stats, test, title):
    """A table of a new process's first connection (TEST) per transport, minus kernel TCP's."""
    trs = transports_of(stats, test)
    if not trs:
        return
    out += [title, ""]
    out.append("| transport | µs | minus TCP loopback |")
    out.append("|---|---:|---:|")
    tcp = stats.get((test, 1, "tcp", "v1"))
    for t in trs:
        st = stats.get((test, 1, t, "v1"))
        d = None if (st is None or tcp is None or st.median is None or tcp.median is None) \
            else st.median - tcp.median
        out.append("| %s | %s | %s |" % (NAMES[t], cell(st), "n/a" if d is None else
                                        "%+.0f µs" % d))
    out.append("")


def write_md(stats, notes, path, machine, reps, secs):
    out = ["# ntbsock bench — %s" % machine, "",
           "All numbers below are **measured** on this machine in one run: median [min–max] of "
           "%s repetitions, %s s per measurement, client and server pinned to separate cores. "
           "Ratios compare medians. A run that failed, or an ntbsock run that did not use the "
           "link, is left out of its median and marked \"(k/n failed)\" or \"(k/n tcp "
           "fallback!)\"." % (reps, secs), ""]
    out += ["## Goals (doc/design.md §11)", ""] + goals(stats) + [""]
    out += ["## iperf3 throughput by write size (Gbit/s)", ""]
    table_by_size(stats, "iperf3", "v1", "ntbsock/TCP", False, out)
    out += ["## iperf3 -P 4, 128 KiB writes (Gbit/s)", ""]
    table_by_size(stats, "iperf3-P4", "v1", "ntbsock/TCP", False, out)
    out += ["## sockperf ping-pong, one-way latency p50 (µs)", ""]
    table_by_size(stats, "sockperf", "v1", "TCP/ntbsock", True, out)
    out += ["## sockperf ping-pong, one-way latency p99 (µs)", ""]
    table_by_size(stats, "sockperf", "v2", "TCP/ntbsock", True, out)
    out += ["## sockperf 64 B by server multiplexer, one-way p50 / p99 (µs)", ""]
    muxes = [("s", "select"), ("p", "poll"), ("e", "epoll")]
    trs = [t for t in ORDER if any(("sockperf-F" + m, 64, t, "v1") in stats for m, _ in muxes)]
    if trs:
        out.append("| server | " + " | ".join(NAMES[t] + " p50 | p99" for t in trs) + " | TCP/ntbsock p50 |")
        out.append("|---|" + "---:|---:|" * len(trs) + "---:|")
        for m, name in muxes:
            test = "sockperf-F" + m
            cells = []
            for t in trs:
                cells += [cell(stats.get((test, 64, t, "v1"))), cell(stats.get((test, 64, t, "v2")))]
            r = ratio(stats.get((test, 64, "tcp", "v1")), stats.get((test, 64, "ntb", "v1")))
            out.append("| -F %s (%s) | %s | %s |" % (m, name, " | ".join(cells), rfmt(r)))
        out.append("")
    out += ["## Connection set-up rate (connect + 1-byte exchange + close, per second)", ""]
    trs = transports_of(stats, "connrate")
    if trs:
        out.append("| transport | connections/s | vs TCP loopback | client CPU µs per connection "
                   "| vs TCP loopback |")
        out.append("|---|---:|---:|---:|---:|")
        tcp = stats.get(("connrate", 1, "tcp", "v1"))
        tcpu = stats.get(("connrate", 1, "tcp", "v2"))
        for t in trs:
            st = stats.get(("connrate", 1, t, "v1"))
            cpu = stats.get(("connrate", 1, t, "v2"))
            out.append("| %s | %s | %s | %s | %s |" % (NAMES[t], cell(st), rfmt(ratio(st, tcp)),
                                                   cell(cpu), rfmt(ratio(cpu, tcpu))))
        out.append("")
    first_table(out, stats, "fallback",
                "## First connection of a new process with no ntbsock on the peer host "
                "(connect + 1-byte exchange, µs; each repetition the median of many new "
                "processes)")
    first_table(out, stats, "firstlive",
                "## First connection of a new process over a live link, after a pause longer "
                "than link_timeout_ms (connect + 1-byte exchange, µs; each repetition the median "
                "of several new processes)")
    trs = transports_of(stats, "firstmb")
    if trs:
        out += ["## A new process's first MiB (bench/firstmb.c: two new processes, 64 KiB "
                "writes; the reader's time for its first MiB from the first byte, and the median "
                "of its later MiBs)", ""]
        out.append("| transport | first MiB (µs) | later MiBs (µs, median) | first / later |")
        out.append("|---|---:|---:|---:|")
        for t in trs:
            out.append("| %s | %s | %s | %s |" % (
                NAMES[t], cell(stats.get(("firstmb", 1 << 20, t, "v1"))),
                cell(stats.get(("firstmb", 1 << 20, t, "v2"))),
                cell(stats.get(("firstmb-ratio", 1 << 20, t, "v1")))))
        out.append("")
    sizes = sizes_of(stats, "streams")
    if sizes:
        n = sizes[-1]
        out += ["## %d streams at once (bench/streams.c: one epoll client writing 16 KiB on every "
                "connection, one epoll server checking every byte; bytes each connection delivered "
                "in the window)" % n, ""]
        out.append("| transport | slowest / mean | MB/s in all | vs TCP loopback |")
        out.append("|---|---:|---:|---:|")
        tcp = stats.get(("streams", n, "tcp", "v2"))
        for t in transports_of(stats, "streams"):
            fr, bw = stats.get(("streams", n, t, "v1")), stats.get(("streams", n, t, "v2"))
            out.append("| %s | %s | %s | %s |" % (NAMES[t], cell(fr), cell(bw), rfmt(ratio(bw, tcp))))
        out.append("")
    conns_held(stats, out)
    out += ["## ntbsock perf: the transport alone, message-size sweep (the [MQ] measurement)", ""]
    mem = stats.get(("ref-memcpy", 4 << 20, "machine", "v1"))
    sizes = sizes_of(stats, "perf")
    if sizes:
        out.append("| message size | MB/s | % of one-core memcpy | ping-pong p50 one-way (µs) |")
        out.append("|---:|---:|---:|---:|")
        for size in sizes:
            bw = stats.get(("perf", size, "transport", "v1"))
            lat = stats.get(("perf", size, "transport", "v2"))
            pct = "n/a" if (bw is None or bw.median is None or mem is None or not mem.median) \
                else "%.0f%%" % (100 * bw.median / mem.median)
            out.append("| %s | %s | %s | %s |" % (size_label(size), cell(bw), pct, cell(lat)))
        out.append("")
    out += ["## Reference limits of this machine (ntbsock perf)", "",
            "| reference | value |", "|---|---:|",
            "| memcpy bandwidth, one core, 4 MiB buffers (MB/s) | %s |" % cell(mem),
            "| cache-line one-way latency between the two cores (µs) | %s |"
            % cell(stats.get(("ref-cacheline", 64, "machine", "v1"))),
            "| the same, measured interleaved with the 64 B ping-pong (µs) | %s |"
            % cell(stats.get(("ref-cacheline-il", 64, "machine", "v1"))),
            "| copy+CRC32C pipeline between the two cores, 64 KiB messages, interleaved with the "
            "64 KiB stream (MB/s) | %s |" % cell(stats.get(("ref-pipe", 65536, "machine", "v1"))),
            ""]
    if notes:
        out += ["## Notes", ""] + ["- " + n for n in notes] + [""]
    open(path, "w").write("\n".join(out) + "\n")


def write_plot(stats, path):
    """Blocks for plot.gp, in this order: iperf3 ntb/tcp/netns/unix (bytes, Gbit/s median,
    min, max), perf (bytes, Gbit/s), sockperf p50 ntb/tcp/netns/unix (bytes, us, min, max),
    perf p50 (bytes, us)."""
    blocks = []
    for t in ORDER:
        blocks.append([(s, stats.get(("iperf3", s, t, "v1"))) for s in sizes_of(stats, "iperf3")])
    blocks.append([(s, stats.get(("perf", s, "transport", "v1"))) for s in sizes_of(stats, "perf")])
    for t in ORDER:
        blocks.append([(s, stats.get(("sockperf", s, t, "v1"))) for s in sizes_of(stats, "sockperf")])
    blocks.append([(s, stats.get(("perf", s, "transport", "v2"))) for s in sizes_of(stats, "perf")])
    with open(path, "w") as out:
        for i, block in enumerate(blocks):
            scale = 8 / 1000 if i == 4 else 1  # perf MB/s -> Gbit/s
            rows = [(s, st) for s, st in block if st is not None and st.median is not None]
            if not rows:
                out.write("nan nan nan nan\n")
            for s, st in rows:
                out.write("%d %g %g %g\n" % (s, st.median * scale, st.lo * scale, st.hi * scale))
            out.write("\n\n")


def main():
    raw, notes_path, base, machine, reps, secs, plot = sys.argv[1:8]
    stats = load(raw)
    notes = [line.strip() for line in open(notes_path) if line.strip()]
    write_csv(stats, base + ".csv")
    write_md(stats, notes, base + ".md", machine, reps, secs)
    write_plot(stats, plot)


if __name__ == "__main__":
    main()
