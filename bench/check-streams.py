#!/usr/bin/env python3
"""Run `gpufan-streams-bench --smoke` and check its JSON.

Usage: check-streams.py GPUFAN_STREAMS_BENCH OUT.json [extra bench arguments]

Checks the structure, that every run of both configurations ran, that no
stream put a frame out of order (the bench's own check) and that every frame
is accounted for (out, or counted lost), and that the figures are there and
plausible as figures (finite, positive, a Jain index in (0, 1]); never their
size or a ratio between configurations: timings are not pass/fail, and a
loaded machine may make anything slow.

Lost frames are reported, not failed on: with several streams gpufanout can
enqueue two streams' frames on one lane in the opposite order of their
sequence numbers, and gpufanin then counts the earlier one dropped
(docs/performance.md, "Several streams"). Make them fatal with
CHECK_STREAMS_STRICT=1.
"""

import importlib.util
import os
import sys


def _check_bench():
    """check-bench.py (its name is no module name), for what it shares."""
    sys.dont_write_bytecode = True  # no __pycache__ beside the sources
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "check-bench.py")
    spec = importlib.util.spec_from_file_location("check_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.PROG = "check-streams"
    return module


_common = _check_bench()
fail, finite, run_smoke = _common.fail, _common.finite, _common.run_smoke

WARNINGS = []


def warn(msg):
    print(f"check-streams: warning: {msg}", file=sys.stderr)
    WARNINGS.append(msg)


def positive(obj, key, where):
    v = finite(obj.get(key), where, key)
    if v <= 0:
        fail(f"{where}: '{key}' is not positive: {v!r}")
    return v


def per_stream(obj, key, where, streams):
    v = obj.get(key)
    if not isinstance(v, list) or len(v) != streams:
        fail(f"{where}: '{key}' is not a list of {streams}: {v!r}")
    for x in v:
        finite(x, where, key)
    return v


def check(doc):
    for key in ("mode", "reps", "streams", "ok", "machine", "variants"):
        if key not in doc:
            fail(f"missing top-level '{key}'")
    if doc["ok"] is not True:
        fail("a run failed (lost or reordered frames, or an error)")
    streams = doc["streams"]
    names = [v["name"] for v in doc["variants"]]
    if names != ["saturated", "live"]:
        fail(f"variants {names}, expected saturated and live")
    for v in doc["variants"]:
        labels = [c["label"] for c in v["configs"]]
        if labels != ["separate", "shared"]:
            fail(f"{v['name']}: configurations {labels}")
        positive(v, "ideal_fps", v["name"])
        for c in v["configs"]:
            where = f"{v['name']}/{c['label']}"
            if len(c["runs"]) != doc["reps"]:
                fail(f"{where}: {len(c['runs'])} runs, expected {doc['reps']}")
            if c["in_order"] is not True:
                fail(f"{where}: a run failed or a stream reordered frames")
            expected = 2 if c["label"] == "shared" else 2 * streams
            if c["branch_instances"] != expected:
                fail(f"{where}: {c['branch_instances']} branch instances")
            for key in ("total_fps", "vs_separate", "threads_max",
                        "rss_peak_kb", "latency_p99_ms_median"):
                positive(c, key, where)
            jain = finite(c.get("jain_run"), where, "jain_run")
            if not 0 < jain <= 1 + 1e-9:
                fail(f"{where}: Jain's index {jain} outside (0, 1]")
            per_stream(c, "latency_p99_ms_per_stream", where, streams)
            for r in c["runs"]:
                if not r["ok"]:
                    fail(f"{where}: a run failed: {r.get('error')}")
                frames_in = per_stream(r, "frames_in", where, streams)
                frames = per_stream(r, "frames_out", where, streams)
                lost = per_stream(r, "lost", where, streams)
                if any(f != c["frames_per_stream"] for f in frames_in):
                    fail(f"{where}: frames in {frames_in}")
                if any(o + x != i for o, x, i in zip(frames, lost, frames_in)):
                    fail(f"{where}: frames out {frames} + lost {lost} "
                         f"!= in {frames_in}")
                if any(per_stream(r, "reordered", where, streams)):
                    fail(f"{where}: frames out of order")
                if any(lost):
                    warn(f"{where}: frames lost per stream {lost}")
            if c["label"] == "shared":
                delivered = per_stream(c, "stats_delivered", where, streams)
                lost = per_stream(c, "stats_lost", where, streams)
                if any(d + x != c["frames_per_stream"]
                       for d, x in zip(delivered, lost)):
                    fail(f"{where}: gpufan-stats streams delivered {delivered}"
                         f" + lost {lost}")
                per_stream(c, "stats_wait_time_ns", where, streams)


def main():
    doc, out = run_smoke(__doc__)
    check(doc)
    if WARNINGS and os.environ.get("CHECK_STREAMS_STRICT") == "1":
        fail(f"{len(WARNINGS)} warnings (CHECK_STREAMS_STRICT=1)")
    print(f"check-streams: {out} is well-formed: "
          f"{len(doc['variants'])} variants, {doc['streams']} streams")


if __name__ == "__main__":
    main()
