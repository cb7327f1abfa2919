#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A transcoding farm: N H.264 files through one gpufanout on shared lanes.

One gpufanout in chunk mode takes every file on a sink_%u pad of its own;
each file is cut into its own GOP chunks, the lanes (a decoder, a scaler and
an encoder each) take one chunk at a time from whichever file has one, and
gpufanin's src_%u of the same index writes each file's chunks back in order:

  filesrc in_0.mp4 ! qtdemux ! h264parse ─ sink_0 ┐             ┌ src_0 ─ h264parse ! mp4mux ! filesink out_0.mp4
  filesrc in_1.mp4 ! qtdemux ! h264parse ─ sink_1 ┤  gpufanout  │ src_1 ─ ...
  ...                                             ┘  chunk=     └ ...       gpufanin
                                                     keyframes ─┬─ src_0 ─ queue ! avdec_h264 ! videoscale ! x264enc ─┬─ gpufanin
                                                                └─ src_1 ─ ...                                        ┘

The input files differ in length and GOP (x264enc key-int-max), and every
frame carries its index, drawn in its picture (transcode_chunks.py's
blocks). Each output file is decoded and checked:

  (a) its frame count equals its input's,
  (b) its frames' indices are 0..N-1 in order (nothing lost, repeated,
      swapped or taken from another file),
  (c) its keyframes lie exactly at the chunk starts (where gpufanout cut its
      input: each chunk is a fresh encoder run),
  (d) its PTS increase strictly.

Exit status 0 when every file passes; 1 on a failed check, an error, or a
pipeline that does not reach EOS within 120 s.

  GST_PLUGIN_PATH=build/gst /usr/bin/python3 examples/transcode_farm.py
  GST_PLUGIN_PATH=build/gst /usr/bin/python3 examples/transcode_farm.py \\
      --files 4 --frames 300 --lanes 3 --keep

Needs x264enc (gstreamer1.0-plugins-ugly) and avdec_h264 (gstreamer1.0-libav).
"""

import argparse
import os
import sys

from transcode_chunks import (CheckFailed, HEIGHT, WIDTH, chunk_starts,
                              decode_output, elements_present, encode_input,
                              first_difference, index_bits, launch,
                              parse_keyframes, run_in_workdir, run_pipeline)


def file_plan(files, frames, chunk_frames):
    """(frames, key-int-max) of each input: lengths from `frames` down to
    about a third of it, GOPs from chunk_frames up to twice it."""
    plan = []
    for k in range(files):
        length = max(1, frames - k * frames // (files + 1))
        gop = chunk_frames + (k * chunk_frames) // max(1, files - 1)
        plan.append((length, gop))
    return plan


def farm(args, inputs, outputs):
    """One pipeline: every input through the shared lanes to its output."""
    lane = ("queue ! avdec_h264 ! videoconvert ! videoscale "
            f"! video/x-raw,width={WIDTH // 2},height={HEIGHT // 2} "
            "! x264enc bframes=0")
    parts = [f"gpufanout name=f chunk=keyframes "
             f"chunk-frames={args.chunk_frames} devices={args.devices}",
             "gpufanin name=m"]
    parts += [f"f.src_{d} ! {lane} ! m.sink_{d}" for d in range(args.lanes)]
    for k, (src, dst) in enumerate(zip(inputs, outputs)):
        parts.append(f"filesrc location={src} ! qtdemux ! h264parse "
                     f"! f.sink_{k}")
        parts.append(f"m.src_{k} ! h264parse ! mp4mux "
                     f"! filesink location={dst}")
    description = "  ".join(parts)
    print(f"farm: gst-launch-1.0 {description}")
    run_pipeline(launch(description), "farm")


def check_file(k, frames, chunk_frames, input_path, output_path, bits):
    """Checks (a) to (d) of one output; returns its chunks, or raises."""
    in_units, in_keys = parse_keyframes(input_path, f"input {k} parse")
    if in_units != frames:
        raise CheckFailed(f"input {k} has {in_units} frames, expected "
                          f"{frames}")
    starts = chunk_starts(in_keys, frames, chunk_frames)
    decoded = decode_output(output_path, bits)
    pts = [p for p, _ in decoded]
    indices = [i for _, i in decoded]
    _, out_keys = parse_keyframes(output_path, f"output {k} parse")
    problems = []
    if len(decoded) != frames:
        problems.append(f"(a) {len(decoded)} frames, expected {frames}")
    if indices != list(range(frames)):
        problems.append("(b) frame indices "
                        + first_difference(indices, list(range(frames))))
    if out_keys != starts:
        problems.append(f"(c) keyframes at {out_keys}, chunk starts at "
                        f"{starts}")
    if any(pts[i] is None or pts[i] <= pts[i - 1] for i in range(1, len(pts))):
        problems.append("(d) PTS not strictly increasing")
    status = "FAIL" if problems else "ok"
    print(f"  {status:4} file {k}: {len(decoded)} frames, {len(starts)} "
          f"chunks ({len(in_keys)} keyframes in)"
          + "".join(f"\n       {p}" for p in problems))
    if problems:
        raise CheckFailed(f"file {k} failed {len(problems)} checks")
    return len(starts)


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=3,
                        help="input files (default 3)")
    parser.add_argument("--frames", type=int, default=150,
                        help="frames of the longest file (default 150)")
    parser.add_argument("--chunk-frames", "-k", type=int, default=10,
                        metavar="K", help="chunk-frames, and the shortest "
                        "GOP (default 10)")
    parser.add_argument("--lanes", type=int, default=2,
                        help="lanes (default 2)")
    parser.add_argument("--devices",
                        help="gpufanout devices (default cpu:N for N lanes)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the input and output files")
    args = parser.parse_args()
    if min(args.files, args.frames, args.chunk_frames, args.lanes) < 1:
        parser.error("--files, --frames, --chunk-frames and --lanes must be "
                     "at least 1")
    if args.devices is None:
        args.devices = f"cpu:{args.lanes}"
    return args


def main():
    args = parse_args()
    if not elements_present():
        return 1
    plan = file_plan(args.files, args.frames, args.chunk_frames)
    bits = index_bits(args.frames)

    def work(workdir):
        inputs = [os.path.join(workdir, f"in_{k}.mp4")
                  for k in range(args.files)]
        outputs = [os.path.join(workdir, f"out_{k}.mp4")
                   for k in range(args.files)]
        for path, (frames, gop) in zip(inputs, plan):
            encode_input(path, frames, bits, gop)
        farm(args, inputs, outputs)
        print("checks:")
        return sum(check_file(k, frames, args.chunk_frames, inputs[k],
                              outputs[k], bits)
                   for k, (frames, _) in enumerate(plan))

    chunks = run_in_workdir("transcode_farm-", args.keep, work)
    if chunks is None:
        return 1
    print(f"transcode_farm: OK ({args.files} files, {chunks} chunks, "
          f"lanes {args.lanes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
