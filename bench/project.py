# SPDX-License-Identifier: MIT
"""Project ntbsock's transport onto real PCIe NTB links from a bench CSV (bench/summary.py's
output): the measured per-message software cost (fixed part a, per-byte part b, fitted to the
`ntbsock perf` sweep) against the payload bandwidth of PCIe Gen3/Gen4 x4/x8/x16 links with
128- and 256-byte maximum payloads. Prints Markdown; every number it prints is PROJECTED,
except the inputs it names as measured.

usage: project.py RESULTS.csv"""
import csv
import sys

# PCIe: per-lane raw rate after 128b/130b encoding, bytes/s.
LANE = {"Gen3": 8e9 * 128 / 130 / 8, "Gen4": 16e9 * 128 / 130 / 8}
# Per posted-write TLP: 4 B framing token (STP), 16 B header (4DW, 64-bit address), 4 B LCRC.
TLP_OVERHEAD = 24
# Share of link time left after DLLPs (Ack, UpdateFC) and SKP ordered sets: an assumption.
DLLP_FACTOR = 0.95
# One-way latency of a posted write through an NTB (switch hops + address translation): an
# assumption within the 0.5-1 us range vendors publish for PCIe switches with NTB ports.
NTB_HOP_US = 0.8
MQ_MEASURED = {4: 3040, 8: 5110, 16: 9011}  # MB/s, [MQ], saturated (>= 16 KiB messages)


def link_mbps(gen, lanes, mps):
    return LANE[gen] * lanes * mps / (mps + TLP_OVERHEAD) * DLLP_FACTOR / 1e6


def load(path):
    bw, lat = {}, {}
    for row in csv.DictReader(open(path)):
        if row["test"] != "perf" or not row["median"]:
            continue
        size = int(row["size_bytes"])
        (bw if row["unit"] == "MB/s" else lat)[size] = float(row["median"])
    return bw, lat


def fit(bw):
    """Per-message time t(S) = a + b*S in microseconds: a from the smallest sizes (where the
    fixed cost dominates: the median over 64-256 B), b from the best throughput among sizes of
    16 KiB and more (where [MQ] saw saturation; the best, as other load only slows it down)."""
    t = {s: s / (mbps * 1e6) * 1e6 for s, mbps in bw.items() if mbps > 0}
    small = sorted(t[s] for s in t if s <= 256)
    a = small[len(small) // 2] if small else min(t.values())
    slopes = [(t[s] - a) / s for s in t if s >= 16384]
    b = min(slopes) if slopes else 0.0
    return a, max(b, 0.0)


def main():
    bw, lat = load(sys.argv[1])
    if len(bw) < 3:
        print("(no ntbsock perf sweep in %s: nothing to project)" % sys.argv[1])
        return 1
    a, b = fit(bw)
    sizes = [64, 1024, 16384, 65536, 524288]
    print("Measured inputs (this machine, `ntbsock perf` medians): fixed per-message cost "
          "a = %.2f µs, per-byte cost b = %.3f ns/byte (= %.0f MB/s when the copy and CRC "
          "alone limit)." % (a, b * 1e3, 1 / b if b else float("inf")))
    print()
    print("**Projected** ntbsock throughput, MB/s = min(S / (a + b·S), link payload bandwidth):")
    print()
    head = " | ".join("%s" % (("%d B" % s) if s < 1024 else ("%d KiB" % (s // 1024))) for s in sizes)
    print("| link | MPS | link payload MB/s | %s | [MQ] measured |" % head)
    print("|---|---:|---:|" + "---:|" * len(sizes) + "---:|")
    for gen in ("Gen3", "Gen4"):
        for lanes in (4, 8, 16):
            for mps in (128, 256):
                cap = link_mbps(gen, lanes, mps)
                cells = ["%.0f" % min(s / (a + b * s), cap) for s in sizes]
                mq = MQ_MEASURED[lanes] if gen == "Gen3" and mps == 128 else None
                print("| %s x%d | %d | %.0f | %s | %s |" % (
                    gen, lanes, mps, cap, " | ".join(cells), "%d" % mq if mq else ""))
    print()
    print("**Projected** one-way latency, µs = measured `ntbsock perf` p50 on this machine + "
          "%.1f µs NTB hop + S / link payload bandwidth (Gen3 x8, MPS 256):" % NTB_HOP_US)
    print()
    print("| size | measured here (shared memory) | projected on Gen3 x8 NTB |")
    print("|---:|---:|---:|")
    cap = link_mbps("Gen3", 8, 256)
    for s in (64, 1024, 16384):
        if s in lat:
            print("| %s | %.2f | %.2f |" % ("%d B" % s if s < 1024 else "%d KiB" % (s // 1024),
                                          lat[s], lat[s] + NTB_HOP_US + s / cap))
    return 0


if __name__ == "__main__":
    sys.exit(main())
