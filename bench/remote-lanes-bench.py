#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Chunk-parallel transcoding on 2 remote lanes against 2 local lanes, in the
same run (issue 28's benchmark, on one machine: each remote lane is a
gpufan-lane-worker process on loopback).

The work: an H.264 file (made here, GOP = --gop frames) transcoded GOP by
GOP with gpufanout chunk=keyframes, each lane `avdec_h264 ! x264enc ...`:

  local   f.src_k ! queue ! avdec_h264 ! x264enc ! i.sink_k
  remote  f.src_k ! gpufanremote uri=srt://127.0.0.1:P_k ! i.sink_k
          (the worker runs the same `avdec_h264 ! x264enc ...`)

The two set-ups alternate, --runs times each; each run is timed from
PLAYING to EOS, and its first output frame's delay is noted. Every run
must deliver every frame, in order. Prints a table and writes --json.

Usage: remote-lanes-bench.py --worker PATH [--frames N] [--size WxH]
           [--gop K] [--runs R] [--enc "x264enc ..."] [--json OUT]
With --smoke: a short run whose figures mean nothing (CI checks it runs).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

# the remote-lanes checks' workers, ports and kill-and-restart run
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "python"))
import remote_lanes  # noqa: E402

HUNG_AFTER_S = 300  # only catches a hang


def decode_order_stamp(buffer):
    """DTS where the encoder reorders (B-frames), else PTS."""
    return buffer.dts if buffer.dts != Gst.CLOCK_TIME_NONE else buffer.pts


def run_pipeline(launch):
    """(seconds from PLAYING to EOS, first-output delay, [dts or pts])."""
    pipeline = Gst.parse_launch(launch)
    pts = []
    first = []

    def probe(_pad, info):
        if not first:
            first.append(time.monotonic())
        pts.append(decode_order_stamp(info.get_buffer()))
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("timedsink").get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, probe)
    started = time.monotonic()
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        HUNG_AFTER_S * Gst.SECOND, Gst.MessageType.ERROR | Gst.MessageType.EOS)
    ended = time.monotonic()
    pipeline.set_state(Gst.State.NULL)
    if msg is None:
        raise RuntimeError("hung: no EOS or ERROR within the deadline")
    if msg.type == Gst.MessageType.ERROR:
        raise RuntimeError(f"pipeline error: {msg.parse_error()[0].message}")
    return ended - started, (first[0] - started) if first else None, pts


def make_input(path, frames, size, gop):
    w, h = size
    subprocess.run(
        ["gst-launch-1.0", "-q", "videotestsrc", f"num-buffers={frames}",
         "pattern=ball", "!",
         f"video/x-raw,width={w},height={h},format=I420,framerate=30/1", "!",
         "x264enc", f"key-int-max={gop}", "speed-preset=ultrafast",
         "bframes=0", "!", "h264parse", "!", "mp4mux", "!", "filesink",
         f"location={path}"], check=True, timeout=HUNG_AFTER_S)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--frames", type=int, default=1200)
    p.add_argument("--size", default="640x360")
    p.add_argument("--gop", type=int, default=60)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--enc", default="x264enc speed-preset=veryfast")
    p.add_argument("--json")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args()
    if args.smoke:
        args.frames, args.size, args.gop, args.runs = 120, "160x120", 30, 1
    size = tuple(int(v) for v in args.size.split("x"))
    Gst.init(None)
    missing = [f for f in ("x264enc", "avdec_h264", "srtsink", "gdpdepay")
               if not Gst.ElementFactory.find(f)]
    if missing:
        print(f"remote-lanes-bench: skipped, missing {missing}")
        return 77

    branch = f"avdec_h264 ! {args.enc}"
    tmp = tempfile.mkdtemp(prefix="gpufan-remote-bench-")
    path = os.path.join(tmp, "in.mp4")
    kill_path = os.path.join(tmp, "kill.mp4")
    make_input(path, args.frames, size, args.gop)
    ports = [remote_lanes.free_port_pair(), remote_lanes.free_port_pair()]
    workers = []
    try:
        for port in ports:
            workers.append(
                remote_lanes.start_worker(args.worker, port, branch))
        head = (f"filesrc location={path} ! qtdemux ! h264parse ! "
                "gpufanout name=f chunk=keyframes devices=cpu:2 "
                "gpufanin name=i ! fakesink name=timedsink sync=false ")
        setups = {
            "local": head + " ".join(
                f"f.src_{k} ! queue ! {branch} ! i.sink_{k}"
                for k in range(2)),
            "remote": head + " ".join(
                f"f.src_{k} ! gpufanremote uri=srt://127.0.0.1:{ports[k]} "
                f"! i.sink_{k}" for k in range(2)),
        }
        results = {name: {"s": [], "first_s": []} for name in setups}
        for _ in range(args.runs):
            for name, launch in setups.items():
                secs, first, pts = run_pipeline(launch)
                if len(pts) != args.frames or pts != sorted(pts):
                    raise RuntimeError(
                        f"{name}: {len(pts)} of {args.frames} frames, in "
                        f"order: {pts == sorted(pts)}")
                results[name]["s"].append(secs)
                results[name]["first_s"].append(first)
        # gpufanbin over the same two workers (its recovery restores the
        # lane); worker 0 killed a third of the way in
        uris = ",".join(f"srt://127.0.0.1:{p}" for p in ports)
        # three times as long: the lane is back well before the end
        kill_frames = args.frames * 3
        make_input(kill_path, kill_frames, size, args.gop)
        kill_launch = (
            f"filesrc location={kill_path} ! qtdemux ! h264parse ! gpufanbin "
            f"chunk=keyframes remote-lanes=\"{uris}\" "
            "lane-restart-delay=200000000 ! fakesink name=timedsink "
            "sync=false")
        msg, pts, times = remote_lanes.run_killing_a_worker(
            Gst.parse_launch(kill_launch), "timedsink", workers,
            args.frames // 3,
            lambda: remote_lanes.start_worker(args.worker, ports[0], branch),
            stamp=decode_order_stamp)
        if msg is None or msg.type != Gst.MessageType.EOS:
            raise RuntimeError(f"kill run: no EOS ({msg.type if msg else 'hung'})")
        if times["killed"] is None or times["failed"] is None:
            raise RuntimeError(f"kill run: killed {times['killed'] is not None}"
                               f", failed {times['failed'] is not None}")
        kill_s = times["ended"] - times["started"]
        to_failed = times["failed"] - times["killed"]
        # None: the stream ended before the rebuild (a short --smoke run)
        to_restored = times["restored"] - times["failed"] \
            if times["restored"] else None
        if len(pts) != kill_frames or pts != sorted(pts) or \
                len(set(pts)) != kill_frames:
            raise RuntimeError(f"kill run: {len(pts)} of {kill_frames} "
                               f"frames, in order: {pts == sorted(pts)}")
    finally:
        for worker in workers:
            remote_lanes.stop_worker(worker)
        for p in (path, kill_path):
            if os.path.exists(p):
                os.unlink(p)
        os.rmdir(tmp)

    fps = {n: args.frames / statistics.median(r["s"])
           for n, r in results.items()}
    ratio = fps["remote"] / fps["local"]
    first = {n: statistics.median(r["first_s"]) for n, r in results.items()}
    print(f"{args.frames} frames {args.size}, GOP {args.gop}, 2 lanes of "
          f"'{branch}', {args.runs} runs each (median):")
    for n in setups:
        print(f"  {n:7s} {fps[n]:8.1f} fps   first frame out after "
              f"{first[n] * 1000:7.1f} ms")
    print(f"  remote/local throughput {ratio:.3f}; added first-frame latency "
          f"{(first['remote'] - first['local']) * 1000:.1f} ms")
    restored = (f"restored {to_restored:.2f} s after that"
                if to_restored is not None else
                "not restored before the stream ended")
    undisturbed = 3 * statistics.median(results["remote"]["s"])
    print(f"  kill-and-restart (gpufanbin, {args.frames * 3} frames, worker 0 "
          f"SIGKILLed after {args.frames // 3} out, restarted at its lane's "
          f"failure): every frame once, in order; lane failed "
          f"{to_failed:.2f} s after the kill, {restored}; run {kill_s:.2f} s "
          f"against {undisturbed:.2f} s (3 x an undisturbed remote run)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"frames": args.frames, "size": args.size,
                       "gop": args.gop, "branch": branch, "runs": results,
                       "fps": fps, "ratio": ratio, "first_s": first,
                       "kill": {"run_s": kill_s, "to_failed_s": to_failed,
                                "to_restored_s": to_restored}}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"remote-lanes-bench: FAILED: {e}")
        sys.exit(1)
