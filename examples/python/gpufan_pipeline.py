#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""gpufanout and gpufanin from Python (PyGObject), on CPU lanes.

Builds, element by element,

  videotestsrc ! gpufanout devices=cpu ─┬─ src_0 ─ identity sleep-time=1 ms ─┬─ gpufanin ! fakesink
                                        ├─ src_1 ─ identity sleep-time=2 ms ─┤
                                        └─ ...                               ┘

The lanes run at different speeds, so frames come back out of order and
gpufanin puts them back. The program reads gpufanout's `stats` property while
the pipeline is PLAYING, prints the `gpufan-stats` message posted at EOS
(its source is gpufanout; gpufanin posts it for it), and checks that every
frame reached the sink once, in input order (the sink sees the PTS sequence
that entered the fan-out).

Exit status: 0 when order and counts are right; 1 on a wrong order or count,
a pipeline error, or a pipeline that does not end.

With the plugin from the build tree (use the python3 that has python3-gi):

  GST_PLUGIN_PATH=build/gst python3 examples/python/gpufan_pipeline.py --lanes 3

or with no GST_PLUGIN_PATH once the plugin is installed (README: Install).
"""

import argparse
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

# A pipeline that has not reached EOS after this long is hung.
HUNG_AFTER_S = 120
# Lane N's branch takes (N + 1) times this long per frame (identity, in µs).
LANE_SLEEP_US = 1000


def fail(why):
    print(f"FAIL: {why}", file=sys.stderr)
    return 1


def make(factory, name=None, **props):
    element = Gst.ElementFactory.make(factory, name)
    if element is None:
        raise RuntimeError(f"no element {factory}")
    for key, value in props.items():
        element.set_property(key.replace("_", "-"), value)
    return element


def record_pts(pad, into):
    """Appends the PTS of every buffer that passes `pad` to `into`."""

    def probe(_pad, info):
        into.append(info.get_buffer().pts)
        return Gst.PadProbeReturn.OK

    pad.add_probe(Gst.PadProbeType.BUFFER, probe)


def build(lanes, frames):
    pipeline = Gst.Pipeline.new("gpufan-python")
    src = make("videotestsrc", num_buffers=frames)
    caps = make("capsfilter", caps=Gst.Caps.from_string(
        "video/x-raw,width=320,height=240,framerate=30/1"))
    fanout = make("gpufanout", "fanout", devices="cpu")
    fanin = make("gpufanin", "fanin")
    sink = make("fakesink", "sink")
    for element in (src, caps, fanout, fanin, sink):
        pipeline.add(element)
    if not (src.link(caps) and caps.link(fanout) and fanin.link(sink)):
        raise RuntimeError("could not link the pipeline")

    # One request pad pair and one branch per lane.
    for lane in range(lanes):
        branch = make("identity", f"branch_{lane}",
                      sleep_time=LANE_SLEEP_US * (lane + 1))
        pipeline.add(branch)
        lane_src = fanout.request_pad_simple("src_%u")
        lane_sink = fanin.request_pad_simple("sink_%u")
        if (lane_src.link(branch.get_static_pad("sink")) != Gst.PadLinkReturn.OK
                or branch.get_static_pad("src").link(lane_sink)
                != Gst.PadLinkReturn.OK):
            raise RuntimeError(f"could not link lane {lane}")
    return pipeline, fanout, sink


def print_stats(stats):
    print(f"{'lane':>4} {'device':<16} {'dispatched':>10} {'completed':>9} "
          f"{'dropped':>7} {'reorder-waits':>13} {'service ms':>10} {'fps':>8}")
    for lane in stats.get_value("lanes"):
        print(f"{lane['lane']:>4} {lane['device']:<16} {lane['dispatched']:>10} "
              f"{lane['completed']:>9} {lane['dropped']:>7} "
              f"{lane['reorder-waits']:>13} {lane['service-time'] / 1e6:>10.2f} "
              f"{lane['fps']:>8.1f}")


def check_final_stats(stats, lanes, frames):
    """The problems the fan-in's EOS statistics show, as a list of strings."""
    rows = list(stats.get_value("lanes"))
    problems = []
    if len(rows) != lanes:
        problems.append(f"{len(rows)} lanes in the statistics, expected {lanes}")
    for field in ("dispatched", "released"):
        if stats[field] != frames:
            problems.append(f"{field} {stats[field]}, expected {frames}")
    completed = sum(row["completed"] for row in rows)
    if completed != frames:
        problems.append(f"lanes completed {completed} frames, expected {frames}")
    for field in ("dropped", "failed", "timed-out"):
        total = sum(row[field] for row in rows)
        if total:
            problems.append(f"{total} frames {field}")
    return problems


class Watch:
    """What the bus tells: the statistics seen, and why the run ended early."""

    def __init__(self, pipeline, fanout):
        self.pipeline = pipeline
        self.fanout = fanout
        self.loop = GLib.MainLoop()
        self.playing_stats = None
        self.eos_stats = None
        self.error = None
        self.hung_source = None

    def run(self):
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message", self.on_message)
        self.hung_source = GLib.timeout_add_seconds(HUNG_AFTER_S, self.on_hung)
        try:
            if self.pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
                self.error = "the pipeline did not start"
            else:
                self.loop.run()
        finally:
            if self.hung_source is not None:
                GLib.source_remove(self.hung_source)
            self.pipeline.set_state(Gst.State.NULL)
            bus.remove_signal_watch()

    def on_hung(self):
        self.error = f"no EOS after {HUNG_AFTER_S} s"
        self.hung_source = None
        self.loop.quit()
        return GLib.SOURCE_REMOVE

    def on_message(self, _bus, message):
        if message.type == Gst.MessageType.STATE_CHANGED:
            _old, new, _pending = message.parse_state_changed()
            if (message.src == self.pipeline and new == Gst.State.PLAYING
                    and self.playing_stats is None):
                # A snapshot taken while frames flow: a GstStructure.
                stats = self.fanout.get_property("stats")
                self.playing_stats = stats
                print(f"while PLAYING: policy {stats['policy']}, dispatched "
                      f"{stats['dispatched']}, in flight {stats['in-flight']} "
                      f"(at most {stats['max-in-flight']}), "
                      f"{len(list(stats.get_value('lanes')))} lanes")
        elif message.type == Gst.MessageType.ELEMENT:
            stats = message.get_structure()
            if stats is not None and stats.get_name() == "gpufan-stats":
                self.eos_stats = stats.copy()
                print(f"gpufan-stats from {message.src.get_name()}:")
                print_stats(stats)
        elif message.type == Gst.MessageType.ERROR:
            err, debug = message.parse_error()
            self.error = f"{message.src.get_name()}: {err.message} ({debug})"
            self.loop.quit()
        elif message.type == Gst.MessageType.EOS:
            self.loop.quit()


def run(lanes, frames):
    if Gst.ElementFactory.find("gpufanout") is None:
        return fail("no gpufanout element: install the plugin (meson install) "
                    "or point GST_PLUGIN_PATH at the build's gst/ directory")
    plugin = Gst.Registry.get().find_plugin("gpufan")
    print(f"plugin: {plugin.get_filename()}")

    try:
        pipeline, fanout, sink = build(lanes, frames)
    except RuntimeError as e:
        return fail(str(e))
    pts_in, pts_out = [], []
    record_pts(fanout.get_static_pad("sink"), pts_in)
    record_pts(sink.get_static_pad("sink"), pts_out)
    watch = Watch(pipeline, fanout)
    watch.run()

    if watch.error:
        return fail(watch.error)
    problems = []
    if watch.playing_stats is None:
        problems.append("the stats property was not read while PLAYING")
    if watch.eos_stats is None:
        problems.append("no gpufan-stats message before EOS")
    else:
        problems += check_final_stats(watch.eos_stats, lanes, frames)
    if len(pts_in) != frames:
        problems.append(f"{len(pts_in)} frames entered the fan-out, expected {frames}")
    if pts_out != pts_in:
        where = next((i for i, (a, b) in enumerate(zip(pts_in, pts_out)) if a != b),
                     min(len(pts_in), len(pts_out)))
        problems.append(f"{len(pts_out)} frames reached the sink; the order differs "
                        f"from the input from frame {where} on")
    if problems:
        return fail("; ".join(problems))
    print(f"{frames} frames, {lanes} lane{'s' if lanes > 1 else ''}: "
          "all reached the sink, in input order")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lanes", type=int, default=3, help="CPU lanes (default 3)")
    parser.add_argument("--frames", type=int, default=300,
                        help="frames to send (default 300)")
    args = parser.parse_args()
    if args.lanes < 1 or args.frames < 1:
        parser.error("--lanes and --frames must be at least 1")
    Gst.init(None)
    return run(args.lanes, args.frames)


if __name__ == "__main__":
    sys.exit(main())
