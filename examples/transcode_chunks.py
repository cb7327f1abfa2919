#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Chunk-parallel transcoding with gpufanout chunk=keyframes / chunk=frames.

Encoders and decoders keep state from frame to frame, so they cannot take
frames dealt one by one across lanes. In chunk mode gpufanout gives each lane
a whole run of buffers and drains the lane's branch at the run's end, and
gpufanin puts the runs back together in order. This program transcodes a
clip that way and checks the result frame by frame.

Mode keyframes (default), an H.264 file to a half-size H.264 file:

  filesrc ! qtdemux ! h264parse ! gpufanout chunk=keyframes chunk-frames=K
      ─┬─ src_0 ─ queue ! avdec_h264 ! videoconvert ! videoscale
       │            ! video/x-raw,width=160,height=120 ! x264enc ─┬─ gpufanin
       └─ src_1 ─ ...                                              ┘
  gpufanin ! h264parse ! mp4mux ! filesink

Each chunk starts at a keyframe of the input, so every lane's decoder can
start cold; the lane's encoder starts its chunk with a keyframe.

Mode frames, raw frames to H.264 (no input file):

  appsrc ! gpufanout chunk=frames chunk-frames=K ─┬─ queue ! x264enc ─┬─ gpufanin
                                                  └─ ...              ┘

The input frames carry their own index: 10 (or more) bits drawn as black and
white 32x32 blocks along the top of the luma plane, the rest mid grey. The
checks decode the output, read each frame's index back, and verify

  (a) the frame count,
  (b) the indices 0, 1, ..., N-1 in order (nothing lost, repeated or swapped),
  (c) the output's keyframes lie exactly at the chunk starts (each chunk is
      a fresh encoder run, and nothing else makes keyframes here),
  (d) strictly increasing PTS.

Exit status: 0 when every check passes; 1 on a failed check, a pipeline
error, or a pipeline that does not reach EOS within 120 s.

With the plugin from the build tree (use the python3 that has python3-gi):

  GST_PLUGIN_PATH=build/gst /usr/bin/python3 examples/transcode_chunks.py
  GST_PLUGIN_PATH=build/gst /usr/bin/python3 examples/transcode_chunks.py \\
      --mode frames --lanes 3 --bframes 2 --output out.mp4 --keep

Needs x264enc (gstreamer1.0-plugins-ugly) and avdec_h264 (gstreamer1.0-libav).
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import GLib, Gst, GstVideo  # noqa: E402

# A pipeline that has not reached EOS after this long is hung.
HUNG_AFTER_S = 120

# The input clip: I420, WIDTH x HEIGHT at FPS. Frame indices are drawn as
# BLOCK x BLOCK squares, BLOCKS_PER_ROW to a row, most significant bit first,
# in video-range black and white so no conversion on the way clips them.
WIDTH, HEIGHT, FPS = 320, 240, 30
BLOCK = 32
BLOCKS_PER_ROW = WIDTH // BLOCK
GREY, BLACK, WHITE = 128, 16, 235


class CheckFailed(Exception):
    """A pipeline or check failed; the message says what was wrong."""


def index_bits(frames):
    """Bits drawn per frame: at least one full row of blocks."""
    return max(BLOCKS_PER_ROW, (frames - 1).bit_length())


def block_origin(bit, block):
    """Top-left (x, y) of bit number `bit`'s square, `block` pixels wide."""
    row, column = divmod(bit, BLOCKS_PER_ROW)
    return column * block, row * block


def make_frame(index, bits):
    """One I420 frame (bytes) whose luma spells `index` in blocks."""
    luma = bytearray([GREY]) * (WIDTH * HEIGHT)
    for bit in range(bits):
        on = (index >> (bits - 1 - bit)) & 1
        x, y = block_origin(bit, BLOCK)
        square_row = bytes([WHITE if on else BLACK]) * BLOCK
        for line in range(y, y + BLOCK):
            luma[line * WIDTH + x:line * WIDTH + x + BLOCK] = square_row
    # No colour: only the luma carries the index.
    chroma = bytes([128]) * (2 * (WIDTH // 2) * (HEIGHT // 2))
    return bytes(luma) + chroma


def read_index(y_plane, stride, width, bits):
    """The index spelt by a decoded frame's luma at any scale of the input:
    each block's mean luma thresholded at 128."""
    block = BLOCK * width // WIDTH
    index = 0
    for bit in range(bits):
        x, y = block_origin(bit, block)
        total = sum(sum(y_plane[line * stride + x:line * stride + x + block])
                    for line in range(y, y + block))
        index = (index << 1) | (total >= 128 * block * block)
    return index


def feed_frames(appsrc, frames, bits):
    """Makes `appsrc` produce frames 0..frames-1 on demand, then EOS.

    need-data comes from appsrc's streaming thread; answering it one frame
    at a time keeps memory bounded whatever the clip's length."""
    appsrc.set_property("caps", Gst.Caps.from_string(
        f"video/x-raw,format=I420,width={WIDTH},height={HEIGHT},"
        f"framerate={FPS}/1"))
    appsrc.set_property("format", Gst.Format.TIME)
    state = {"next": 0}

    def need_data(src, _length):
        i = state["next"]
        if i == frames:
            src.emit("end-of-stream")
            return
        state["next"] = i + 1
        buf = Gst.Buffer.new_wrapped(make_frame(i, bits))
        buf.pts = i * Gst.SECOND // FPS
        buf.duration = (i + 1) * Gst.SECOND // FPS - buf.pts
        src.emit("push-buffer", buf)

    appsrc.connect("need-data", need_data)


def run_pipeline(pipeline, what):
    """Plays `pipeline` to EOS; raises CheckFailed on an error or a hang.

    The wait on the bus is the only wait, bounded by HUNG_AFTER_S, and the
    verdict never depends on how long the run took."""
    bus = pipeline.get_bus()
    try:
        if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            msg = bus.pop_filtered(Gst.MessageType.ERROR)
            why = f": {msg.parse_error()[0].message}" if msg else ""
            raise CheckFailed(f"{what}: the pipeline did not start{why}")
        deadline = time.monotonic() + HUNG_AFTER_S
        while True:
            left = deadline - time.monotonic()
            msg = bus.timed_pop_filtered(
                max(0, int(left * Gst.SECOND)),
                Gst.MessageType.EOS | Gst.MessageType.ERROR
                | Gst.MessageType.WARNING)
            if msg is None:
                raise CheckFailed(f"{what}: no EOS after {HUNG_AFTER_S} s")
            if msg.type == Gst.MessageType.EOS:
                return
            if msg.type == Gst.MessageType.WARNING:
                # Worth seeing (e.g. gpufanin giving up on a stalled lane),
                # but the checks decide whether the output is right.
                err, debug = msg.parse_warning()
                print(f"{what}: warning from {msg.src.get_name()}: "
                      f"{err.message} ({debug})")
                continue
            err, debug = msg.parse_error()
            raise CheckFailed(f"{what}: {msg.src.get_name()}: {err.message} "
                              f"({debug})")
    finally:
        pipeline.set_state(Gst.State.NULL)


def launch(description):
    try:
        return Gst.parse_launch(description)
    except GLib.Error as e:
        raise CheckFailed(f"cannot build '{description}': {e.message}") from e


def encode_input(path, frames, bits, key_int):
    """The H.264 input file: the self-identifying frames, a keyframe every
    `key_int` frames."""
    pipeline = launch(
        f"appsrc name=src ! x264enc key-int-max={key_int} ! h264parse "
        f"! mp4mux ! filesink location={path}")
    feed_frames(pipeline.get_by_name("src"), frames, bits)
    run_pipeline(pipeline, "input encode")


def transcode(args, input_path, output_path, bits):
    enc = "x264enc" + (f" bframes={args.bframes}" if args.bframes is not None
                       else "")
    fanout = (f"gpufanout name=f chunk={args.mode} "
              f"chunk-frames={args.chunk_frames} devices={args.devices}")
    if args.mode == "keyframes":
        head = f"filesrc location={input_path} ! qtdemux ! h264parse"
        lane = (f"queue ! avdec_h264 ! videoconvert ! videoscale "
                f"! video/x-raw,width={WIDTH // 2},height={HEIGHT // 2} ! {enc}")
    else:
        head = "appsrc name=src"
        lane = f"queue ! {enc}"
    lanes = "  ".join(f"f.src_{i} ! {lane} ! m.sink_{i}"
                      for i in range(args.lanes))
    description = (f"{head} ! {fanout}  gpufanin name=m ! h264parse ! mp4mux "
                   f"! filesink location={output_path}  {lanes}")
    print(f"transcode: {description}")
    pipeline = launch(description)
    if args.mode == "frames":
        feed_frames(pipeline.get_by_name("src"), args.frames, bits)
    run_pipeline(pipeline, "transcode")


def parse_keyframes(path, what):
    """(buffers, keyframes) of an mp4's H.264 stream: the number of access
    units, and the display positions (ranks by PTS) of those without
    DELTA_UNIT. By PTS, so B-frames' decode order does not shift them."""
    pipeline = launch(f"filesrc location={path} ! qtdemux ! h264parse "
                      "! appsink name=sink sync=false emit-signals=true")
    units = []  # (pts, is keyframe), in decode order

    def new_sample(sink):
        buf = sink.emit("pull-sample").get_buffer()
        units.append((buf.pts,
                      not buf.has_flags(Gst.BufferFlags.DELTA_UNIT)))
        return Gst.FlowReturn.OK

    pipeline.get_by_name("sink").connect("new-sample", new_sample)
    run_pipeline(pipeline, what)
    by_pts = sorted(units)
    return len(units), [pos for pos, (_, key) in enumerate(by_pts) if key]


def decode_output(path, bits):
    """[(pts, index)] of every decoded frame of the output, in output order."""
    pipeline = launch(
        f"filesrc location={path} ! qtdemux ! h264parse ! avdec_h264 "
        "! videoconvert ! video/x-raw,format=I420 "
        "! appsink name=sink sync=false emit-signals=true")
    decoded = []

    def new_sample(sink):
        sample = sink.emit("pull-sample")
        info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
        buf = sample.get_buffer()
        # Only the luma rows that hold blocks are needed.
        rows = -(-bits // BLOCKS_PER_ROW) * BLOCK * info.width // WIDTH
        luma = buf.extract_dup(info.offset[0], rows * info.stride[0])
        decoded.append((buf.pts,
                        read_index(luma, info.stride[0], info.width, bits)))
        return Gst.FlowReturn.OK

    pipeline.get_by_name("sink").connect("new-sample", new_sample)
    run_pipeline(pipeline, "output decode")
    return decoded


def chunk_starts(cut_points, frames, chunk_frames):
    """Where gpufanout starts chunks: at 0, then at the first allowed cut
    point (a keyframe; in frames mode any buffer) at least chunk_frames
    buffers into the current chunk."""
    allowed = set(cut_points)
    starts = [0]
    for i in range(1, frames):
        if i - starts[-1] >= chunk_frames and i in allowed:
            starts.append(i)
    return starts


def first_difference(got, expected):
    at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
              min(len(got), len(expected)))
    return (f"from position {at} on: got {got[at:at + 5]}, "
            f"expected {expected[at:at + 5]}")


def check(args, input_path, output_path, bits):
    """Runs checks (a) to (d); returns the number of chunks."""
    n = args.frames
    if args.mode == "keyframes":
        # The chunks follow the input's keyframes, so read them from the file
        # rather than assume where x264enc put them.
        in_units, in_keys = parse_keyframes(input_path, "input parse")
        if in_units != n:
            raise CheckFailed(f"the input has {in_units} frames, expected {n}")
        starts = chunk_starts(in_keys, n, args.chunk_frames)
    else:
        starts = chunk_starts(range(n), n, args.chunk_frames)

    failures = []

    def report(name, problem):
        print(f"  {'FAIL' if problem else 'ok':4} {name}"
              + (f": {problem}" if problem else ""))
        if problem:
            failures.append(name)

    decoded = decode_output(output_path, bits)
    pts = [p for p, _ in decoded]
    indices = [i for _, i in decoded]
    _, out_keys = parse_keyframes(output_path, "output parse")

    print(f"checks of {output_path}:")
    report(f"(a) {n} frames",
           None if len(decoded) == n else f"decoded {len(decoded)}")
    report("(b) frame indices 0..N-1 in order",
           None if indices == list(range(n))
           else first_difference(indices, list(range(n))))
    report(f"(c) keyframes exactly at the {len(starts)} chunk starts",
           None if out_keys == starts else
           f"keyframes at {out_keys}, chunk starts at {starts}")
    backwards = [k for k in range(1, len(pts))
                 if pts[k] is None or pts[k - 1] is None or pts[k] <= pts[k - 1]]
    report("(d) PTS strictly increasing",
           None if not backwards else
           f"{len(backwards)} frames not after their predecessor, first at "
           f"position {backwards[0]}: {pts[backwards[0] - 1]} then "
           f"{pts[backwards[0]]}")
    if failures:
        raise CheckFailed(f"{len(failures)} of 4 checks failed")
    return len(starts)


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("keyframes", "frames"),
                        default="keyframes",
                        help="transcode an H.264 file cut at keyframes, or "
                        "encode raw frames cut every K frames (default "
                        "keyframes)")
    parser.add_argument("--frames", type=int, default=300,
                        help="frames in the clip (default 300)")
    parser.add_argument("--chunk-frames", "-k", type=int, default=30,
                        metavar="K",
                        help="chunk-frames, and the input's key-int-max "
                        "(default 30)")
    parser.add_argument("--lanes", type=int, default=2,
                        help="lanes (default 2)")
    parser.add_argument("--devices",
                        help="gpufanout devices (default cpu:N for N lanes)")
    parser.add_argument("--bframes", type=int, metavar="B",
                        help="bframes of the lanes' x264enc (default: "
                        "x264enc's)")
    parser.add_argument("--output", metavar="FILE",
                        help="output mp4, kept (default: a temporary file)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary input and output files")
    args = parser.parse_args()
    if min(args.frames, args.chunk_frames, args.lanes) < 1:
        parser.error("--frames, --chunk-frames and --lanes must be at least 1")
    if args.devices is None:
        args.devices = f"cpu:{args.lanes}"
    if index_bits(args.frames) > BLOCKS_PER_ROW * (HEIGHT // BLOCK):
        parser.error("--frames: too many to draw the index")
    return args


def elements_present():
    """Gst.init, and whether the elements these examples run are there
    (a FAIL line says which are not)."""
    Gst.init(None)
    missing = [f for f in ("gpufanout", "gpufanin", "x264enc", "avdec_h264",
                           "h264parse", "mp4mux", "qtdemux")
               if Gst.ElementFactory.find(f) is None]
    if missing:
        print(f"FAIL: missing elements: {', '.join(missing)} (gpufan*: point "
              "GST_PLUGIN_PATH at the build's gst/ directory or install the "
              "plugin)", file=sys.stderr)
        return False
    print(f"plugin: {Gst.Registry.get().find_plugin('gpufan').get_filename()}")
    return True


def run_in_workdir(prefix, keep, work):
    """work(workdir) in a new temporary directory, removed after unless
    `keep`; returns its result, or None after a CheckFailed (said)."""
    workdir = tempfile.mkdtemp(prefix=prefix)
    try:
        return work(workdir)
    except CheckFailed as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return None
    finally:
        if keep:
            print(f"kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main():
    args = parse_args()
    if not elements_present():
        return 1
    bits = index_bits(args.frames)

    def work(workdir):
        input_path = os.path.join(workdir, "input.mp4")
        # a file named with --output is the user's and stays
        output_path = args.output or os.path.join(workdir, "output.mp4")
        if args.mode == "keyframes":
            encode_input(input_path, args.frames, bits, args.chunk_frames)
        transcode(args, input_path, output_path, bits)
        return check(args, input_path, output_path, bits)

    chunks = run_in_workdir("transcode_chunks-", args.keep, work)
    if chunks is None:
        return 1
    print(f"transcode_chunks: OK ({args.frames} frames, {chunks} chunks, "
          f"mode {args.mode}, lanes {args.lanes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
