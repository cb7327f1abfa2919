#!/usr/bin/env python3
"""Run `gpufan-chunk-decode-bench --smoke` and check its JSON.

Usage: check-chunk-decode.py GPUFAN_CHUNK_DECODE_BENCH OUT.json [extra bench
arguments]

Checks the structure, that every run of every configuration ran and
delivered exactly the expected frames (the bench fails a run otherwise; the
counts are checked again here), that each decoder put out what it took in,
and that the figures are there and finite. Prints the ratio G/R for each N
to the test log; never judges it: timings are not pass/fail.

Exit status 77 (skipped) when the bench says it cannot run: no avdec_h264,
x264enc or h264parse.
"""

import importlib
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
_common = importlib.import_module("check-bench")
_common.PROG = "check-chunk-decode"
fail, finite, run_smoke = _common.fail, _common.finite, _common.run_smoke

SPLITS = ("decode", "output", "query", "drain", "settle", "between", "idle")


def check_config(c, where, frames, n, gpufan, reps):
    runs = c.get("runs")
    if not isinstance(runs, list) or len(runs) != reps:
        fail(f"{where}: {len(runs or [])} runs, expected {reps}")
    if c.get("ok") is not True:
        fail(f"{where}: a run failed")
    expected = frames if gpufan else frames * n
    if c.get("frames_per_run") != expected:
        fail(f"{where}: frames_per_run {c.get('frames_per_run')}, "
             f"expected {expected}")
    for key in ("fps_median", "cores_busy_median", "cpu_ms_per_frame_median",
                "whole_process_fps_median"):
        if finite(c.get(key), where, key) <= 0:
            fail(f"{where}: '{key}' is not positive")
    for i, r in enumerate(runs):
        w = f"{where} run {i + 1}"
        if r.get("ok") is not True:
            fail(f"{w}: {r.get('error')}")
        if r.get("frames") != expected:
            fail(f"{w}: {r.get('frames')} frames at the sink(s), "
                 f"expected {expected}")
        if finite(r.get("fps"), w, "fps") <= 0:
            fail(f"{w}: no frames per second")
        finite(r.get("seconds"), w, "seconds")
        decoded_in, decoded_out = r.get("decoder_in"), r.get("decoder_out")
        if (not isinstance(decoded_out, list) or len(decoded_out) != n
                or decoded_in != decoded_out):
            fail(f"{w}: decoders took {decoded_in} and put out {decoded_out}")
        # R: each chain decodes the whole file; G: the lanes share it.
        if (sum(decoded_out) != frames if gpufan
                else any(x != frames for x in decoded_out)):
            fail(f"{w}: decoders put out {decoded_out} of {frames} frames")
        for s in SPLITS:
            split = r.get(f"split_{s}")
            if not isinstance(split, list) or len(split) != n:
                fail(f"{w}: split_{s} is not a list of {n}: {split!r}")
            for v in split:
                finite(v, w, f"split_{s}")


def main():
    doc, out = run_smoke(__doc__)
    for key in ("mode", "reps", "ok", "input", "machine", "results"):
        if key not in doc:
            fail(f"missing top-level '{key}'")
    if doc["ok"] is not True:
        fail("a run failed (a wrong frame count, frames out of order, or an "
             "error)")
    frames = finite(doc["input"].get("frames"), "input", "frames")
    if frames < 2:
        fail(f"the input has {frames} frames")
    if doc["input"].get("keyframes", 0) < 1:
        fail("the input has no keyframe")
    ns = [p.get("n") for p in doc["results"]]
    if ns != [1, 2]:
        fail(f"lane counts {ns}, expected [1, 2]")
    for p in doc["results"]:
        n = p["n"]
        for label, gpufan in (("reference", False), ("gpufan", True)):
            check_config(p[label], f"N={n} {label}", frames, n, gpufan,
                         doc["reps"])
        ratio = finite(p.get("ratio"), f"N={n}", "ratio")
        runs = p.get("ratio_runs") or []
        print(f"check-chunk-decode: N={n}: G/R {ratio:.3f} (runs: "
              f"{', '.join(f'{x:.3f}' for x in runs)}; whole process "
              f"{p.get('ratio_whole_process', float('nan')):.3f}) "
              "-- reported, not judged")
    print(f"check-chunk-decode: {out} is well-formed: {len(ns)} lane counts, "
          f"{doc['reps']} repetitions, exact frame counts")


if __name__ == "__main__":
    main()
