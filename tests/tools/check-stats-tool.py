#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The gpufan-stats tool on real `gst-launch-1.0 -m` output.

Usage: check-stats-tool.py TOOL GST_LAUNCH  (GST_PLUGIN_PATH_1_0: the build)

1. gst-launch-1.0 -m of a gpufanout/gpufanin pipeline with stats-interval,
   piped into the tool: the table is the final message's, from gpufanout
   `f`, and its lane rows add up to the totals (every frame dispatched and
   completed once).
2. The same for gpufanbin, with --all: every message from the bin's
   fan-out, the last one final.
3. --json writes the messages; the tool reads that file back to the same
   table.
4. No gpufan-stats in the input: exit status 1 and a hint to use -m.
"""

import os
import re
import subprocess
import sys
import tempfile

TOOL, GST_LAUNCH = sys.argv[1], sys.argv[2]
FRAMES = 90
CAPS = "video/x-raw,format=GRAY8,width=16,height=16,framerate=30/1"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def tool(args, stdin=None, input_text=None):
    return subprocess.run([sys.executable, TOOL] + args, stdin=stdin,
                          input=input_text, capture_output=True, text=True,
                          timeout=60)


def launch_into_tool(pipeline, tool_args):
    """gst-launch-1.0 -m PIPELINE | gpufan-stats TOOL_ARGS, through a pipe:
    the tool's result."""
    launch = subprocess.Popen([GST_LAUNCH, "-m"] + pipeline.split(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the tool reads the pipe while gst-launch writes it
    reader = subprocess.Popen([sys.executable, TOOL] + tool_args,
                              stdin=launch.stdout, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    launch.stdout.close()
    out, err = reader.communicate(timeout=150)
    launch_err = launch.stderr.read().decode(errors="replace")
    launch.wait(timeout=10)
    check(launch.returncode == 0,
          f"gst-launch-1.0 exited {launch.returncode}: {launch_err}")
    return subprocess.CompletedProcess(reader.args, reader.returncode, out, err)


def tables(text):
    """The tool's tables: [(header line, totals line, lane rows, all row)]."""
    found = []
    for block in text.strip().split("\n\n"):
        lines = block.splitlines()
        rows = [l.split() for l in lines[3:]]
        lane_rows = [r for r in rows if r and r[0].isdigit()]
        all_rows = [r for r in rows if r and r[0] == "all"]
        found.append((lines[0], lines[1], lane_rows, all_rows[0] if all_rows else None))
    return found


def check_adds_up(table, lanes, where):
    header, totals, lane_rows, all_row = table
    check(f"dispatched {FRAMES}, released {FRAMES}" in totals,
          f"{where}: totals line {totals!r}")
    check(len(lane_rows) == lanes, f"{where}: {len(lane_rows)} lane rows")
    if not check(all_row is not None, f"{where}: no 'all' row"):
        return
    # all dispatched completed dropped fps
    dispatched, completed, dropped = (int(x) for x in all_row[1:4])
    check((dispatched, completed, dropped) == (FRAMES, FRAMES, 0),
          f"{where}: all row {all_row}")
    # a lane row: lane device... dispatched completed dropped service fps times
    # (the device may hold spaces: count from the end, 5 times + service + fps)
    sums = [0, 0, 0]
    for r in lane_rows:
        for i, v in enumerate(r[-10:-7]):
            sums[i] += int(v)
    check(sums == [dispatched, completed, dropped],
          f"{where}: lane rows add up to {sums}, the all row says "
          f"{[dispatched, completed, dropped]}")


# 1. A plain pair, three lanes.
pair = (f"videotestsrc num-buffers={FRAMES} ! {CAPS} ! gpufanout name=f "
        "devices=cpu stats-interval=1 gpufanin name=m ! fakesink sync=false "
        "f.src_0 ! queue ! m.sink_0 f.src_1 ! identity ! m.sink_1 "
        "f.src_2 ! queue ! m.sink_2")
r = launch_into_tool(pair, [])
if check(r.returncode == 0, f"pair: the tool exited {r.returncode}: {r.stderr}"):
    print(r.stdout)
    t = tables(r.stdout)
    check(len(t) == 1, f"pair: {len(t)} tables, expected one (the final)")
    check(t[0][0] == "gpufan-stats from f (final)", f"pair: header {t[0][0]!r}")
    check_adds_up(t[0], 3, "pair")

# 2. gpufanbin, every message.
bin_pipeline = (f"videotestsrc num-buffers={FRAMES} ! {CAPS} ! gpufanbin "
                "devices=cpu:2 stats-interval=1 branch=identity ! "
                "fakesink sync=false")
r = launch_into_tool(bin_pipeline, ["--all"])
if check(r.returncode == 0, f"bin: the tool exited {r.returncode}: {r.stderr}"):
    t = tables(r.stdout)
    check(len(t) >= 2, f"bin: {len(t)} messages with stats-interval=1")
    for header, *_ in t[:-1]:
        check(header == "gpufan-stats from fanout (periodic)",
              f"bin: header {header!r}")
    check(t[-1][0] == "gpufan-stats from fanout (final)",
          f"bin: last header {t[-1][0]!r}")
    check_adds_up(t[-1], 2, "bin")

# 3. JSON written, read back.
with tempfile.TemporaryDirectory() as tmp:
    saved = os.path.join(tmp, "launch.txt")
    with open(saved, "w") as f:
        f.write(subprocess.run([GST_LAUNCH, "-m"] + pair.split(),
                               capture_output=True, text=True,
                               timeout=150).stdout)
    json_path = os.path.join(tmp, "stats.json")
    first = tool(["--json", json_path, saved])
    again = tool([json_path])
    check(first.returncode == 0 and again.returncode == 0,
          f"json: exit {first.returncode}, {again.returncode}: "
          f"{first.stderr}{again.stderr}")
    check(first.stdout == again.stdout and first.stdout.strip(),
          f"json: the table read back differs:\n{first.stdout}\n{again.stdout}")

# 4. Nothing to print.
r = tool([], input_text="Setting pipeline to PLAYING ...\nGot EOS\n")
check(r.returncode == 1 and "-m" in r.stderr,
      f"empty: exit {r.returncode}, {r.stderr!r}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
print("gpufan-stats tool: passed")
