#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Scrapes gpufanout's metrics-port as Prometheus would, while three live
streams play over two CPU lanes: an HTTP client (urllib) fetches /metrics
and prometheus_client's OpenMetrics parser, which rejects text that breaks
the format's conventions (a counter without _total, a missing # EOF...),
reads it. Exits non-zero, saying why, when a family, a label or progress is
missing."""
import socket
import sys
import time
import urllib.request

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402
from prometheus_client.openmetrics.parser import (  # noqa: E402
    text_string_to_metric_families,
)

DEADLINE_S = 90  # only catches a hang


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as r:
        ctype = r.headers["Content-Type"]
        if not ctype.startswith("application/openmetrics-text"):
            sys.exit(f"Content-Type {ctype!r} is not OpenMetrics")
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(families, name, sample):
    fam = families.get(name)
    if fam is None:
        sys.exit(f"no family {name}; have: {sorted(families)}")
    return {tuple(sorted(s.labels.items())): s.value
            for s in fam.samples if s.name == sample}


def main():
    Gst.init(None)
    port = free_port()
    caps = "video/x-raw,width=32,height=24,framerate=60/1"
    desc = (f"gpufanout name=f devices=cpu:2 metrics-port={port} "
            "gpufanin name=m f.src_0 ! m.sink_0 f.src_1 ! m.sink_1 ")
    for k in range(3):
        desc += (f"videotestsrc is-live=true pattern={k} ! {caps} ! f.sink_{k} "
                 f"m.src_{k} ! fakesink ")
    pipeline = Gst.parse_launch(desc)
    pipeline.set_state(Gst.State.PLAYING)
    try:
        deadline = time.monotonic() + DEADLINE_S
        first = None
        while time.monotonic() < deadline:
            fams = scrape(port)
            frames = samples(fams, "gpufan_stream_frames",
                             "gpufan_stream_frames_total")
            if len(frames) == 3 and min(frames.values()) >= 10:
                if first is None:
                    first = frames
                elif all(frames[k] > first[k] for k in first):
                    break
            time.sleep(0.1)
        else:
            sys.exit(f"the streams' frames did not grow: {first}")
        streams = {dict(k)["stream"] for k in frames}
        if streams != {"0", "1", "2"}:
            sys.exit(f"stream labels {streams}")
        for name, kind in [("gpufan_lane_frames", "counter"),
                           ("gpufan_lane_service_seconds", "gauge"),
                           ("gpufan_lane_fps", "gauge"),
                           ("gpufan_lane_state", "gauge"),
                           ("gpufan_stream_lost", "counter"),
                           ("gpufan_stream_latency_seconds", "gauge"),
                           ("gpufan_stream_fps", "gauge")]:
            fam = fams.get(name)
            if fam is None or fam.type != kind:
                sys.exit(f"{name}: {fam.type if fam else 'missing'}, "
                         f"not {kind}")
        lanes = samples(fams, "gpufan_lane_frames", "gpufan_lane_frames_total")
        if {dict(k)["lane"] for k in lanes} != {"0", "1"}:
            sys.exit(f"lane labels {list(lanes)}")
        latency = samples(fams, "gpufan_stream_latency_seconds",
                          "gpufan_stream_latency_seconds")
        if not all(v > 0 for v in latency.values()):
            sys.exit(f"stream latency {latency}")
        print(f"scraped: stream frames {sorted(frames.values())}, "
              f"lane frames {sorted(lanes.values())}, "
              f"latency {sorted(latency.values())}")
    finally:
        pipeline.set_state(Gst.State.NULL)


if __name__ == "__main__":
    main()
