#!/usr/bin/env python3
"""Two measurements for bench/scale-out-measure.sh (docs/scale-out.md).

chunks: encode --frames of a videotestsrc pattern with x264enc and count the
  bytes of each GOP chunk: an IDR access unit (with its SPS/PPS) and the
  access units up to the next IDR, as gpufanout chunk=keyframes cuts them.
  A pad probe on h264parse's src counts every access unit (no log parsing).
  Prints `chunks SRC: N chunks of F frames, mean B bytes, min, max; stream
  R Mbit/s; encoded at X fps`, F the most common chunk length; chunks of
  another length (an early IDR, the tail) are listed apart.

delay: the one-way delay of a GDP-framed item over SRT on loopback. Sender
  `appsrc ! gdppay ! srtsink` (caller) and receiver `srtsrc ! gdpdepay !
  appsink` (listener), two pipelines in this process, so that one monotonic
  clock times both ends. Items of --bytes are pushed --interval-ms apart (far
  below the link's rate: the delay of an item on an idle link, not under
  load), each timed from its push into appsrc to its arrival at appsink.
  SRT's live mode holds every packet at the receiver until `latency` ms after
  it was sent (TSBPD): the figure is about that latency plus the transfer.
  Prints `delay latency=L bytes=B items=N median_ms=M min_ms=A max_ms=Z`;
  exit 1 when an item is missing after --deadline-s.
"""
import argparse
import statistics
import sys
import threading
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
from gi.repository import Gst, GstApp  # noqa: E402,F401  (GstApp: appsink methods)


def run_to_eos(pipeline, deadline_s):
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        int(deadline_s * Gst.SECOND), Gst.MessageType.EOS | Gst.MessageType.ERROR)
    pipeline.set_state(Gst.State.NULL)
    if msg is None:
        return f"no EOS within {deadline_s} s"
    if msg.type == Gst.MessageType.ERROR:
        err, dbg = msg.parse_error()
        return f"{err.message} ({dbg})"
    return None


def chunks(args):
    desc = (f"videotestsrc {args.source} num-buffers={args.frames} ! "
            f"video/x-raw,format=I420,width={args.width},height={args.height},"
            f"framerate=30/1 ! x264enc {args.x264} ! h264parse name=parse ! "
            "fakesink sync=false")
    pipeline = Gst.parse_launch(desc)
    sizes = []  # [bytes, frames] per chunk

    def on_buffer(_pad, info):
        buf = info.get_buffer()
        if not buf.has_flags(Gst.BufferFlags.DELTA_UNIT) or not sizes:
            sizes.append([0, 0])
        sizes[-1][0] += buf.get_size()
        sizes[-1][1] += 1
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("parse").get_static_pad("src").add_probe(
        Gst.PadProbeType.BUFFER, on_buffer)
    t0 = time.monotonic()
    err = run_to_eos(pipeline, args.deadline_s)
    secs = time.monotonic() - t0
    if err:
        print(f"chunks {args.source}: {err}", file=sys.stderr)
        return 1
    if not sizes:
        print(f"chunks {args.source}: no output", file=sys.stderr)
        return 1
    # The GOP length the encoder kept to; chunks of another length (an
    # early IDR, the stream's tail) are named apart.
    gop = statistics.mode(s[1] for s in sizes)
    full = [s for s in sizes if s[1] == gop]
    short = [s for s in sizes if s[1] != gop]
    total = sum(s[0] for s in sizes)
    frames = sum(s[1] for s in sizes)
    b = [s[0] for s in full]
    note = "" if not short else (
        "; other chunks: " + ", ".join(f"{s[1]} frames {s[0]} bytes" for s in short))
    print(f"chunks {args.source}: {len(full)} chunks of {gop} frames, "
          f"mean {statistics.mean(b):.0f} bytes, min {min(b)}, max {max(b)}; "
          f"stream {total * 8 / (frames / 30.0) / 1e6:.2f} Mbit/s; "
          f"encoded at {frames / secs:.1f} fps ({secs:.1f} s, source included){note}")
    return 0


def delay(args):
    q = f"latency={args.latency}&{args.srt_options}"
    rx = Gst.parse_launch(
        f"srtsrc uri=srt://127.0.0.1:{args.port}?mode=listener&{q} ! gdpdepay ! "
        "appsink name=out sync=false emit-signals=false max-buffers=0")
    tx = Gst.parse_launch(
        "appsrc name=in is-live=false format=bytes "
        "caps=application/x-delay-probe ! gdppay ! "
        f"srtsink uri=srt://127.0.0.1:{args.port}?{q} sync=false")
    appsink = rx.get_by_name("out")
    appsrc = tx.get_by_name("in")

    sent = {}
    delays = []
    done = threading.Event()

    def receive():
        while len(delays) < args.items:
            sample = appsink.try_pull_sample(int(args.deadline_s * Gst.SECOND))
            if sample is None:
                break
            now = time.monotonic()
            idx = sample.get_buffer().offset
            if idx in sent:
                delays.append((now - sent[idx]) * 1000.0)
        done.set()

    rx.set_state(Gst.State.PLAYING)
    tx.set_state(Gst.State.PLAYING)
    threading.Thread(target=receive, daemon=True).start()

    payload = bytes(args.bytes)
    for i in range(args.items):
        buf = Gst.Buffer.new_wrapped(payload)
        buf.offset = i  # GDP carries the offset: it names the item
        sent[i] = time.monotonic()
        appsrc.emit("push-buffer", buf)
        if done.wait(args.interval_ms / 1000.0):
            break
    done.wait(args.deadline_s)
    tx.set_state(Gst.State.NULL)
    rx.set_state(Gst.State.NULL)

    if len(delays) < args.items:
        print(f"delay latency={args.latency} bytes={args.bytes}: only "
              f"{len(delays)} of {args.items} items arrived", file=sys.stderr)
        return 1
    print(f"delay latency={args.latency} bytes={args.bytes} items={len(delays)} "
          f"median_ms={statistics.median(delays):.1f} min_ms={min(delays):.1f} "
          f"max_ms={max(delays):.1f}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("chunks")
    c.add_argument("--source", default="pattern=smpte horizontal-speed=8",
                   help="videotestsrc properties")
    c.add_argument("--frames", type=int, default=300)
    c.add_argument("--width", type=int, default=1920)
    c.add_argument("--height", type=int, default=1080)
    c.add_argument("--x264", default="bitrate=4000 key-int-max=60 speed-preset=veryfast")
    c.add_argument("--deadline-s", type=float, default=600.0)
    d = sub.add_parser("delay")
    d.add_argument("--port", type=int, default=17590)
    d.add_argument("--latency", type=int, default=125,
                   help="SRT latency in ms, both ends (GStreamer's default: 125)")
    d.add_argument("--bytes", type=int, default=1000000)
    d.add_argument("--items", type=int, default=20)
    d.add_argument("--interval-ms", type=int, default=300)
    d.add_argument("--srt-options", default="tlpktdrop=0&rcvbuf=100000000&fc=100000")
    d.add_argument("--deadline-s", type=float, default=60.0)
    args = ap.parse_args()
    Gst.init(None)
    return chunks(args) if args.cmd == "chunks" else delay(args)


if __name__ == "__main__":
    sys.exit(main())
