#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""GStreamer's stock latency tracer through gpufanout/gpufanin.

The tracer (GST_TRACERS="latency(flags=pipeline)") sends a probe event from
the source before each buffer and logs a `latency` record when the buffer
that follows it reaches the sink. Through a gpufanout/gpufanin pair the
probes must pass the lanes in their place in the stream, so the pair gives
one record per frame, as the same branch without the pair does.

Through gpufanbin with an element after it (`gpufanbin ! queue ! sink`) the
tracer gives one record per frame too. gpufanbin is a GstBin, and the
tracer (GStreamer 1.22 and later) logs nothing when the element right
before the sink is a bin: the pad that pushes into the sink is then the
bin's ghost pad. The test checks that gpufanbin right before the sink gives
the same count as a plain bin there, and prints both (docs/elements.md,
"Latency with GStreamer's tracer").

Exit status 0 when the counts are as above, 1 otherwise.
"""
import os
import re
import subprocess
import sys
import tempfile

FRAMES = 60
RECORD = re.compile(r"\blatency, src-element-id=.*?src-element=\(string\)(\w+)"
                    r".*?sink-element=\(string\)(\w+).*?time=\(guint64\)(\d+)")


def records(description):
    """The tracer's end-to-end records for one gst-launch-1.0 run:
    [(source, sink, ns)]."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "trace.log")
        env = dict(os.environ,
                   GST_TRACERS="latency(flags=pipeline)",
                   GST_DEBUG="GST_TRACER:7",
                   GST_DEBUG_FILE=log,
                   GST_DEBUG_NO_COLOR="1")
        run = subprocess.run(["gst-launch-1.0", "-q"] + description.split(),
                             env=env, capture_output=True, text=True,
                             timeout=120)
        if run.returncode != 0:
            sys.exit("FAIL: gst-launch-1.0 %s\n%s%s" %
                     (description, run.stdout, run.stderr))
        with open(log, encoding="utf-8", errors="replace") as f:
            return [(m.group(1), m.group(2), int(m.group(3)))
                    for m in map(RECORD.search, f) if m]


def main():
    src = "videotestsrc name=src num-buffers=%d ! video/x-raw,width=64,height=48" % FRAMES
    lanes = " ".join("f.src_%d ! queue ! identity ! m.sink_%d" % (i, i)
                     for i in range(3))
    runs = {
        "plain branch": src + " ! queue ! identity ! fakesink name=out",
        "gpufanout/gpufanin": src + " ! gpufanout name=f devices=cpu:3 "
                                    "gpufanin name=m ! fakesink name=out " + lanes,
        "gpufanbin ! queue": src + " ! gpufanbin devices=cpu:3 branch=\"queue ! identity\" "
                                   "! queue ! fakesink name=out",
        "plain bin": src + " ! bin.( queue ! identity ) ! fakesink name=out",
        "gpufanbin": src + " ! gpufanbin devices=cpu:3 branch=\"queue ! identity\" "
                           "! fakesink name=out",
    }
    counts = {}
    failed = False
    for name, description in runs.items():
        found = records(description)
        ends = [r for r in found if r[0] == "src" and r[1] == "out"]
        counts[name] = len(ends)
        print("%-20s %3d latency records (src -> out)" % (name, len(ends)))
        if any(ns >= 60 * 10**9 for _, _, ns in ends):
            print("FAIL: %s: a latency of a minute or more" % name)
            failed = True
    if counts["plain branch"] != FRAMES:
        print("FAIL: the plain branch gives %d records for %d frames" %
              (counts["plain branch"], FRAMES))
        failed = True
    if counts["gpufanout/gpufanin"] != counts["plain branch"]:
        print("FAIL: the pair gives %d records, the plain branch %d: "
              "probe events lost or out of place in the lanes" %
              (counts["gpufanout/gpufanin"], counts["plain branch"]))
        failed = True
    if counts["gpufanbin ! queue"] != FRAMES:
        print("FAIL: gpufanbin ! queue gives %d records for %d frames" %
              (counts["gpufanbin ! queue"], FRAMES))
        failed = True
    if counts["gpufanbin"] != counts["plain bin"]:
        print("FAIL: gpufanbin gives %d records, a plain bin %d" %
              (counts["gpufanbin"], counts["plain bin"]))
        failed = True
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
