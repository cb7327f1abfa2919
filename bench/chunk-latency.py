#!/usr/bin/python3
"""Per-frame latency through an encoding pipeline, for bench/chunk-encode.sh.

  /usr/bin/python3 bench/chunk-latency.py --case LABEL ELEMENT DESCRIPTION
                                          [--case LABEL ELEMENT DESCRIPTION ...]

Runs each gst-launch DESCRIPTION once to EOS and stamps (monotonic clock) every
buffer entering the sink pad of the element named ELEMENT (where the frames
come in: gpufanout, or the single x264enc) and every buffer entering the sink
pad of the element named "out" (the fakesink). A frame's latency is its
output stamp minus its input stamp; prints, per case, the median, p99 and
maximum over all frames, and the encoded bytes that reached the sink; then
each case's median and p99 less those of the last case (the reference).

Frames are matched by PTS, not by order: x264enc's B-frames put its output
in decode order. x264enc shifts every PTS by a constant (1000 h, its room for
negative DTS), so an output PTS matches the input of that PTS or, failing
that, the input 1000 h before. Each input matches at most once: an output
frame with no input left to match (a lost or repeated PTS) is counted and
reported, not guessed.

Needs the system Python (PyGObject); GST_PLUGIN_PATH as for gst-launch.
"""
import argparse
import statistics
import sys
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

X264_PTS_SHIFT = 1000 * 3600 * Gst.SECOND


def pct(sorted_values, p):
    """Nearest-rank percentile (no interpolation between frames)."""
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def measure(label, element, desc):
    pipeline = Gst.parse_launch(desc)
    inp = pipeline.get_by_name(element)
    out = pipeline.get_by_name("out")
    if inp is None or out is None:
        sys.exit(f"chunk-latency: {label}: no element named {element!r} or 'out'")
    arrived = {}  # input PTS -> stamp
    count_in = [0]
    left = []  # (output PTS, stamp, bytes)

    # Stamps first, bookkeeping after: the probes run in the streaming
    # threads and should cost them as little as possible.
    def on_in(pad, info):
        t = time.monotonic_ns()
        arrived.setdefault(info.get_buffer().pts, t)
        count_in[0] += 1
        return Gst.PadProbeReturn.OK

    def on_out(pad, info):
        t = time.monotonic_ns()
        buf = info.get_buffer()
        left.append((buf.pts, t, buf.get_size()))
        return Gst.PadProbeReturn.OK

    inp.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, on_in)
    out.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, on_out)
    start = time.monotonic_ns()
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    wall = (time.monotonic_ns() - start) / 1e9
    pipeline.set_state(Gst.State.NULL)
    if msg.type == Gst.MessageType.ERROR:
        err, dbg = msg.parse_error()
        sys.exit(f"chunk-latency: {label}: {err.message}\n{dbg}")

    lat, unmatched = [], 0
    for pts, t, _ in left:
        t_in = arrived.pop(pts, None)
        if t_in is None and pts != Gst.CLOCK_TIME_NONE and pts >= X264_PTS_SHIFT:
            t_in = arrived.pop(pts - X264_PTS_SHIFT, None)
        if t_in is None:
            unmatched += 1
        else:
            lat.append((t - t_in) / 1e6)
    if not lat:
        sys.exit(f"chunk-latency: {label}: no output frame matched an input frame")
    lat.sort()
    return {
        "label": label, "in": count_in[0], "out": len(left), "unmatched": unmatched,
        "median": statistics.median(lat), "p99": pct(lat, 99), "max": lat[-1],
        "kbytes": sum(b for _, _, b in left) / 1000, "wall": wall,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", nargs=3, action="append", required=True,
                    metavar=("LABEL", "ELEMENT", "DESCRIPTION"))
    args = ap.parse_args()
    Gst.init(None)
    rows = [measure(*case) for case in args.case]
    print(f"{'latency, ms':<14} {'median':>8} {'p99':>8} {'max':>8}   "
          f"{'frames in/out':>13} {'encoded kB':>10} {'run s':>6}")
    for r in rows:
        print(f"{r['label']:<14} {r['median']:8.1f} {r['p99']:8.1f} {r['max']:8.1f}   "
              f"{r['in']:>6}/{r['out']:<6} {r['kbytes']:10.0f} {r['wall']:6.2f}"
              + (f"   ({r['unmatched']} output frames unmatched)" if r["unmatched"] else ""))
    if len(rows) > 1:
        base = rows[-1]
        for r in rows[:-1]:
            print(f"{r['label']} - {base['label']}: median "
                  f"{r['median'] - base['median']:+.1f} ms, p99 {r['p99'] - base['p99']:+.1f} ms")


if __name__ == "__main__":
    main()
