# SPDX-License-Identifier: MIT
"""Render bench/demo.sh's measurements (one "kind size mode v1 v2 check" line each) as the
demo's Markdown table: ntbsock next to kernel TCP with a ratio where higher favours ntbsock."""
import math
import sys


def num(text):
    try:
        v = float(text)
        return v if math.isfinite(v) else None
    except ValueError:
        return None


def fmt(v, digits):
    return "n/a" if v is None else "%.*f" % (digits, v)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "n/a"
    return "%.2f×" % (a / b)


def size_label(s):
    n = int(s[:-1]) * {"K": 1024, "M": 1 << 20}[s[-1]] if s[-1] in "KM" else int(s)
    for unit, div in (("MiB", 1 << 20), ("KiB", 1024)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def mark(check):
    retried = check.endswith("-retried")
    check = check[:-len("-retried")] if retried else check
    text = {"ok": "", "-": "", "tcp-fallback": " (tcp fallback!)"}.get(check, " (failed)")
    return text + (" (2nd try)" if retried else "")


def good(check):
    return check in ("ok", "-", "ok-retried", "--retried")


def main():
    machine, path = sys.argv[2], sys.argv[3]
    rows = [line.split() for line in open(path) if line.strip()]
    data = {(r[0], r[1], r[2]): (r[3:] + ["nan", "nan", "failed"])[:3]
            for r in rows if len(r) >= 3}
    sizes = {k: [] for k in ("iperf", "sockperf")}
    for r in rows:
        if r[0] in sizes and r[1] not in sizes[r[0]] and (r[0], r[1], "ntb") in data:
            sizes[r[0]].append(r[1])
    bad = 0
    print("ntbsock demo — %s" % machine)
    print()
    print("| measurement | size | ntbsock | kernel TCP | ratio |")
    print("|---|---:|---:|---:|---:|")
    for s in sizes["iperf"]:
        n, t = data[("iperf", s, "ntb")], data[("iperf", s, "tcp")]
        bad += not good(n[2]) or n[2].startswith("-") or not good(t[2])
        print("| iperf3 throughput, Gbit/s | %s | %s%s | %s%s | %s |" % (
            size_label(s), fmt(num(n[0]), 2), mark(n[2]), fmt(num(t[0]), 2), mark(t[2]),
            ratio(num(n[0]), num(t[0]))))
    for s in sizes["sockperf"]:
        n, t = data[("sockperf", s, "ntb")], data[("sockperf", s, "tcp")]
        bad += not good(n[2]) or n[2].startswith("-") or not good(t[2])
        print("| sockperf one-way latency p50 / p99, µs | %s | %s / %s%s | %s / %s%s | %s / %s |" % (
            size_label(s), fmt(num(n[0]), 2), fmt(num(n[1]), 2), mark(n[2]),
            fmt(num(t[0]), 2), fmt(num(t[1]), 2), mark(t[2]),
            ratio(num(t[0]), num(n[0])), ratio(num(t[1]), num(n[1]))))
    mc = num(data.get(("ref", "memcpy", "-"), ["nan"])[0])
    cl = num(data.get(("ref", "cacheline", "-"), ["nan"])[0])
    print("| reference: memcpy bandwidth, one core | 4 MiB | %s MB/s = %s Gbit/s | | |" % (
        fmt(mc, 0), fmt(None if mc is None else mc * 8 / 1000, 1)))
    print("| reference: cache-line one-way latency, core to core | 64 B | %s µs | | |" % fmt(cl, 2))
    il = data.get(("ref", "cacheline-il", "-"))
    if il and len(il) >= 3:
        print("| ntbsock perf 64 B one-way p50 / cache line measured interleaved with it | 64 B | "
              "%s µs / %s µs = %s× | | |" % (fmt(num(il[1]), 3), fmt(num(il[0]), 3),
                                          fmt(num(il[2]), 1)))
    print()
    print("Ratio: ntbsock/TCP for throughput, TCP/ntbsock for latency (above 1× ntbsock is "
          "better). Every ntbsock row was checked to have used the link (library log says "
          "ntb, and its kernel TCP connections carried almost no bytes); a row that did not says "
          "\"(tcp fallback!)\"; \"(2nd try)\" marks a measurement whose first attempt failed.")
    bad += same_host(rows, data)
    return 1 if bad else 0


def same_host(rows, data):
    """The same-host table (rows of modes lo, lotcp and unix), if measured; the count of bad rows."""
    sizes = {k: [] for k in ("iperf", "sockperf")}
    for r in rows:
        if r[0] in sizes and r[2] == "lo" and r[1] not in sizes[r[0]]:
            sizes[r[0]].append(r[1])
    if not sizes["iperf"] and not sizes["sockperf"]:
        return 0
    bad = 0
    print()
    print("Same host: client and server both on 127.0.0.1, over ntbsock's loopback link "
          "(conf/examples/loopback.conf), kernel loopback TCP and a Unix-domain socket.")
    print()
    print("| measurement | size | ntbsock loopback link | kernel TCP loopback | Unix socket "
          "| vs TCP | vs Unix |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    missing = ["nan", "nan", "failed"]
    for s in sizes["iperf"]:
        n, t, u = (data.get(("iperf", s, m), missing) for m in ("lo", "lotcp", "unix"))
        bad += not good(n[2]) or n[2].startswith("-") or not good(t[2])
        print("| iperf3 throughput, Gbit/s | %s | %s%s | %s%s | %s | %s | %s |" % (
            size_label(s), fmt(num(n[0]), 2), mark(n[2]), fmt(num(t[0]), 2), mark(t[2]),
            fmt(num(u[0]), 2), ratio(num(n[0]), num(t[0])), ratio(num(n[0]), num(u[0]))))
    for s in sizes["sockperf"]:
        n, t, u = (data.get(("sockperf", s, m), missing) for m in ("lo", "lotcp", "unix"))
        bad += not good(n[2]) or n[2].startswith("-") or not good(t[2])
        print("| sockperf one-way latency p50 / p99, µs | %s | %s / %s%s | %s / %s%s | %s / %s "
              "| %s / %s | %s / %s |" % (
                  size_label(s), fmt(num(n[0]), 2), fmt(num(n[1]), 2), mark(n[2]),
                  fmt(num(t[0]), 2), fmt(num(t[1]), 2), mark(t[2]),
                  fmt(num(u[0]), 2), fmt(num(u[1]), 2),
                  ratio(num(t[0]), num(n[0])), ratio(num(t[1]), num(n[1])),
                  ratio(num(u[0]), num(n[0])), ratio(num(u[1]), num(n[1]))))
    print()
    print("Same-host ratios: ntbsock/other for throughput, other/ntbsock for latency (above 1× "
          "ntbsock is better); the ntbsock rows were checked as above.")
    return bad


if __name__ == "__main__":
    sys.exit(main())
