#!/usr/bin/env python3
"""Summarise peers.py runs that include gatherscatter's columns.

    python3 scripts/bench_report.py FRESH.json [PREALLOC.json] [--png docs/bench.png]

FRESH.json comes from a peers.py run with the `gs` / `gs-into` external columns
(see scripts/bench_peers.sh); PREALLOC.json from a `--prealloc` run, whose peer
columns write into preallocated outputs (ORT IOBinding, torch `out=`).

Prints, as Markdown, one row per workload: gatherscatter's median time and the
speed-up over the fastest peer of the same run, for 1 and 2 threads, with a
fresh output per call and into a caller's buffer. With --png, also draws the
effective GB/s of every column of the fresh run beside the copy limit.
"""

from __future__ import annotations

import argparse
import json
import sys

GB = 1e9
OURS = ("gs", "gs-into")


def load(path):
    with open(path) as f:
        return json.load(f)


def family(label: str) -> str:
    return label.split("(", 1)[0]


def threads_of(result) -> int:
    return result.get("threads") or 1


def ok(results):
    return [r for r in results if r["status"] == "ok" and r.get("median_s")]


def fmt(seconds: float, latency: bool) -> str:
    if latency or seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    return f"{seconds * 1e3:.1f} ms"


def best(results, threads, ours_family):
    """(ours, fastest peer) among results of at most `threads` threads."""
    mine = [r for r in results if family(r["peer"]) == ours_family and threads_of(r) == threads]
    peers = [r for r in results if family(r["peer"]) not in OURS and threads_of(r) <= threads]
    if not mine or not peers:
        return None, None
    return mine[0], min(peers, key=lambda r: r["median_s"])


def summary_rows(fresh, prealloc):
    modes = [("fresh", fresh, "gs")]
    if prealloc is not None:
        modes.append(("into", prealloc, "gs-into"))
    by_name = {mode: {w["name"]: w for w in report["workloads"]} for mode, report, _ in modes}
    header = ["workload"]
    for mode, _, _ in modes:
        for t in (1, 2):
            header.append(f"{mode} {t}t: gatherscatter · fastest peer · speed-up")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for w in fresh["workloads"]:
        row = [w["name"]]
        for mode, _, ours in modes:
            wl = by_name[mode].get(w["name"])
            for t in (1, 2):
                mine, peer = best(ok(wl["results"]), t, ours) if wl else (None, None)
                if mine is None:
                    row.append("—")
                    continue
                lat = wl["latency"]
                ratio = peer["median_s"] / mine["median_s"]
                row.append(f"{fmt(mine['median_s'], lat)} · {peer['peer']} {fmt(peer['median_s'], lat)}"
                           f" · **{ratio:.2f}×**")
        lines.append("| " + " | ".join(row) + " |")
    limits = fresh.get("copy_limits_GBps", {})
    note = ", ".join(f"{t}t {float(v):.1f} GB/s" for t, v in sorted(limits.items()))
    if prealloc is not None:
        pl = prealloc.get("copy_limits_GBps", {})
        note += "; prealloc run " + ", ".join(f"{t}t {float(v):.1f} GB/s" for t, v in sorted(pl.items()))
    return "\n".join(lines) + f"\n\nCopy bandwidth measured in the same run: {note}.\n"


def copy_share_rows(report, ours="gs-into", workloads=("W1", "W4", "W8", "W10")):
    """Effective GB/s of the caller-buffer column as a share of copy bandwidth."""
    limits = {int(k): float(v) for k, v in report.get("copy_limits_GBps", {}).items()}
    lines = ["| workload | threads | GB/s | % of copy |", "|---|---|---|---|"]
    for w in report["workloads"]:
        if w["name"].split("_", 1)[0] not in workloads:
            continue
        for r in ok(w["results"]):
            if family(r["peer"]) != ours or threads_of(r) not in limits:
                continue
            gbs = w["bytes"]["min"] / r["median_s"] / GB
            lines.append(f"| {w['name']} | {threads_of(r)} | {gbs:.1f} | "
                         f"{100 * gbs / limits[threads_of(r)]:.0f}% |")
    return "\n".join(lines) + "\n"


def plot(report, path):
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(f"bench_report.py: --png {path} needs matplotlib (pip install matplotlib); "
                         "the tables above are complete")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = [w for w in report["workloads"] if not w["latency"]]
    columns = report["columns"]
    limits = {int(k): float(v) for k, v in report.get("copy_limits_GBps", {}).items()}
    fig, ax = plt.subplots(figsize=(13, 5.5))
    width = 0.8 / (len(columns) + 1)
    for c, label in enumerate(columns):
        values = []
        for w in workloads:
            r = {x["peer"]: x for x in w["results"]}.get(label)
            ok_r = r is not None and r["status"] == "ok" and r.get("median_s")
            values.append(w["bytes"]["min"] / r["median_s"] / GB if ok_r else 0.0)
        xs = [i + c * width for i in range(len(workloads))]
        bold = family(label) in OURS
        ax.bar(xs, values, width, label=label, edgecolor="black" if bold else None,
               linewidth=1.2 if bold else 0)
    for t, style in ((1, ":"), (2, "--")):
        if t in limits:
            ax.axhline(limits[t], color="grey", linestyle=style, linewidth=1,
                       label=f"copy limit {t}t ({limits[t]:.0f} GB/s)")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(workloads))])
    ax.set_xticklabels([w["name"].replace("_", "\n", 1) for w in workloads], fontsize=8)
    ax.set_ylabel("effective GB/s (minimal bytes / median time)")
    ax.set_title("Gather / GatherElements / ScatterElements on this machine "
                 f"({report.get('machine', {}).get('date_utc', '')})")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fresh")
    ap.add_argument("prealloc", nargs="?")
    ap.add_argument("--png", help="write the GB/s plot of the fresh run here")
    a = ap.parse_args(argv)
    fresh = load(a.fresh)
    prealloc = load(a.prealloc) if a.prealloc else None
    print(summary_rows(fresh, prealloc))
    print(copy_share_rows(prealloc if prealloc is not None else fresh))
    if a.png:
        plot(fresh, a.png)
        print(f"plot written to {a.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
