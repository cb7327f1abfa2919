#!/usr/bin/env python3
"""Plot gpufan-bench results: throughput per policy per scenario.

Usage: plot.py BENCH.json OUT.png

Top: throughput as a percentage of the ideal (the sum of the lanes'
capacities) for every scenario with lanes that take time, one bar per
pipeline (the roundrobin+queue+funnel baselines, with queues as deep as
gpufanout's and with a default queue, then gpufan's policies).
Bottom: the no-delay overhead scenario, ns per buffer.
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""

import json
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("plot.py: matplotlib is missing (apt-get install python3-matplotlib); "
          "no plot written", file=sys.stderr)
    sys.exit(3)

COLORS = {
    "baseline": "#999999",
    "stock": "#cccccc",
    "round-robin": "#8da0cb",
    "least-loaded": "#66c2a5",
    "weighted": "#e78ac3",
    "adaptive": "#fc8d62",
}
NAMES = {
    "baseline": "roundrobin+queue(4)+funnel",
    "stock": "roundrobin+queue+funnel (stock)",
}


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    timed = [s for s in doc["scenarios"] if s.get("ideal_fps")]
    overhead = [s for s in doc["scenarios"] if s["kind"] == "overhead"]
    rows = 2 if overhead else 1
    fig, axes = plt.subplots(rows, 1, figsize=(11, 7 if overhead else 4.5),
                             gridspec_kw={"height_ratios": [3, 1]} if overhead else None)
    if rows == 1:
        axes = [axes]
    ax = axes[0]
    width = 0.14
    shown = set()
    for j, s in enumerate(timed):
        configs = [c for c in s["configs"] if c.get("of_ideal") is not None]
        for i, c in enumerate(configs):
            x = j + (i - (len(configs) - 1) / 2) * width
            y = 100 * c["of_ideal"]
            label = c["label"]
            name = NAMES.get(label, "gpufan " + label)
            ax.bar(x, y, width, color=COLORS.get(label, "#333333"),
                   label=None if label in shown else name)
            shown.add(label)
            ax.text(x, y + 1, f"{y:.0f}", ha="center", va="bottom", fontsize=6)
    ax.axhline(100, color="black", linewidth=0.6, linestyle="--")
    ax.set_xticks(range(len(timed)))
    ax.set_xticklabels([s["title"] for s in timed], fontsize=8)
    ax.set_ylabel("throughput, % of ideal")
    ax.set_ylim(0, 115)
    m = doc.get("machine", {})
    ax.set_title(f"gpufan-bench ({doc['mode']}, median of {doc['reps']}): "
                 f"{m.get('nproc', '?')} CPUs, GStreamer {m.get('gstreamer', '?')}",
                 fontsize=10)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))

    if overhead:
        ax = axes[1]
        s = overhead[0]
        names, ns, colors = [], [], []
        for c in s["configs"]:
            if c.get("ns_per_buffer") is not None:
                names.append(NAMES.get(c["label"], "gpufan " + c["label"]))
                ns.append(c["ns_per_buffer"])
                colors.append(COLORS.get(c["label"], COLORS["adaptive"]))
        ax.barh(names, ns, color=colors)
        for y, v in enumerate(ns):
            ax.text(v, y, f" {v:.0f} ns", va="center", fontsize=8)
        ax.set_xlabel(f"ns per buffer, {s['title']} (lower is better)")
        ax.set_xlim(0, max(ns) * 1.25 if ns else 1)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)
    print(f"plot.py: wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
