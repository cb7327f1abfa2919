#!/usr/bin/env python3
"""Draw a gpufan trace (gpufanout trace-file=..., or GPUFAN_TRACE=...) as a
lane timeline PNG.

Usage: trace-timeline.py TRACE.json OUT.png [--from MS] [--to MS] [--title T]

One row per track (each lane's worker, what comes out of its branch, the
output): spans as bars coloured by what the thread was doing (push into the
branch, idle waiting for input, a chunk settling, a serialized query or an
output push blocked in gpufanin), chunks as outlined boxes behind them,
dispatches, arrivals and releases as ticks. Below, a summary per lane: the
share of the traced time each kind of span took.
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""

import argparse
import json
import sys

COLORS = {
    "push": "#4c72b0",
    "idle": "#dddddd",
    "settle": "#dd8452",
    "query": "#c44e52",
    "output": "#55a868",
}
TICKS = {"dispatch": "#333333", "arrive": "#17becf", "release": "#8172b3",
         "release (lost)": "#c44e52"}


def load(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names, spans, instants = {}, [], []
    for e in events:
        ph = e.get("ph")
        key = (e.get("pid", 0), e.get("tid", 0))
        if ph == "M" and e.get("name") == "thread_name":
            names[key] = e["args"]["name"]
        elif ph == "X":
            spans.append((key, e["name"], float(e["ts"]) / 1e3,
                          float(e.get("dur", 0)) / 1e3))
        elif ph == "i" and e.get("s") != "g":
            instants.append((key, e["name"], float(e["ts"]) / 1e3))
    return names, spans, instants


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--from", dest="t0", type=float, default=None,
                    help="start of the window drawn, ms")
    ap.add_argument("--to", dest="t1", type=float, default=None,
                    help="end of the window drawn, ms")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    names, spans, instants = load(args.trace)
    if not spans:
        print("trace-timeline.py: no spans in %s" % args.trace, file=sys.stderr)
        return 1
    keys = sorted({k for k, *_ in spans} | {k for k, *_ in instants}
                  | set(names))
    row = {k: i for i, k in enumerate(keys)}
    t0 = args.t0 if args.t0 is not None else min(s[2] for s in spans)
    t1 = args.t1 if args.t1 is not None else max(s[2] + s[3] for s in spans)

    # The split per track, over the traced time (before any window).
    totals = {}
    for key, name, ts, dur in spans:
        if name in COLORS:
            totals.setdefault(key, {}).setdefault(name, 0.0)
            totals[key][name] += dur

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        print("trace-timeline.py: matplotlib is missing (apt-get install "
              "python3-matplotlib); no plot written", file=sys.stderr)
        return 3

    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.55 * len(keys)))
    for key, name, ts, dur in spans:
        if ts + dur < t0 or ts > t1:
            continue
        y = row[key]
        if name == "chunk":
            ax.broken_barh([(ts, dur)], (y - 0.45, 0.9), facecolors="none",
                           edgecolors="#333333", linewidth=0.6)
        else:
            ax.broken_barh([(ts, max(dur, (t1 - t0) / 4000))], (y - 0.3, 0.6),
                           facecolors=COLORS.get(name, "#999999"))
    for key, name, ts in instants:
        if t0 <= ts <= t1:
            y = row[key]
            ax.plot([ts, ts], [y - 0.4, y + 0.4], color=TICKS.get(name, "#000"),
                    linewidth=0.5)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([names.get(k, "track %d" % k[1]) for k in keys])
    ax.invert_yaxis()
    ax.set_xlim(t0, t1)
    ax.set_xlabel("ms since the trace started")
    ax.set_title(args.title or args.trace)
    legend = [Patch(color=c, label=n) for n, c in COLORS.items()]
    legend.append(Patch(facecolor="none", edgecolor="#333333", label="chunk"))
    ax.legend(handles=legend, loc="upper center", ncol=len(legend),
              bbox_to_anchor=(0.5, -0.12 - 0.4 / len(keys)), fontsize=8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)

    span_all = max(s[2] + s[3] for s in spans) - min(s[2] for s in spans)
    for key in keys:
        if key in totals:
            parts = ", ".join("%s %.0f%%" % (n, 100.0 * v / span_all)
                              for n, v in sorted(totals[key].items()))
            print("%-28s %s" % (names.get(key, key), parts))
    print("wrote %s" % args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
