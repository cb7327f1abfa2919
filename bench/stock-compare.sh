#!/usr/bin/env bash
# The plain gst-launch comparison of issue 9: gpufanout/gpufanin against the
# stock `roundrobin ! queue ! funnel` (a default queue: what a user writes),
# two no-op lanes, small frames, whole processes.
#
#   gpufan: videotestsrc num-buffers=N ! video/x-raw,format=GRAY8,width=16,height=16
#           ! gpufanout name=f  gpufanin name=m ! fakesink enable-last-sample=false
#           f.src_k ! identity signal-handoffs=false ! m.sink_k          (k = 0, 1)
#   stock:  videotestsrc … ! roundrobin name=r  funnel name=m ! fakesink …
#           r.src_k ! queue ! identity signal-handoffs=false ! m.sink_k
#
# Runs the two gst-launch-1.0 processes alternately R times, takes each
# process's wall time and CPU time (user + sys, bash's `time`), and prints the
# medians, µs per buffer and the ratios gpufan / stock. Then one more gpufan
# run (not timed) checks that the output is complete and in order (a pad
# probe on the sink, in Python: buffer offsets 0, 1, …, N-1).
# Timings are reported, never judged: there is no pass/fail on them.
#
#   bash bench/stock-compare.sh                  # 300 000 frames, 7 runs each
#   bash bench/stock-compare.sh -f 50000 -r 3    # quick
#   bash bench/stock-compare.sh --no-verify      # skip the order check
#   bash bench/stock-compare.sh -o "queue-size=32"   # gpufanout properties
#   bash bench/stock-compare.sh -p black         # a cheaper source (as bench/'s)
#   bash bench/stock-compare.sh -b build-before  # also time another build's
#                                                # gpufan (a copy of build/ made
#                                                # before a change): before/after
#                                                # in the same run, alternating
#
# Needs a build (scripts/setup.sh; BUILD_DIR, default build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=bench/timed-run.sh
source bench/timed-run.sh
build_dir=${BUILD_DIR:-build}
frames=300000
reps=7
verify=1
fanout_props=""
pattern=""
baseline_dir=""

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}
while (($#)); do
  case $1 in
    -f | --frames) frames=$2; shift 2 ;;
    -r | --reps) reps=$2; shift 2 ;;
    --no-verify) verify=0; shift ;;
    -o | --fanout-props) fanout_props=$2; shift 2 ;;
    -p | --pattern) pattern=$2; shift 2 ;;
    -b | --baseline-build) baseline_dir=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "stock-compare: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
[[ $frames =~ ^[1-9][0-9]*$ && $reps =~ ^[1-9][0-9]*$ ]] ||
  { echo "stock-compare: --frames and --reps take positive integers" >&2; exit 2; }

[[ -e $build_dir/gst ]] ||
  { echo "stock-compare: no $build_dir/gst: run scripts/setup.sh first" >&2; exit 2; }
export GST_PLUGIN_PATH="$root/$build_dir/gst"
if [[ -n $baseline_dir ]]; then
  [[ -e $baseline_dir/gst ]] ||
    { echo "stock-compare: no $baseline_dir/gst (--baseline-build)" >&2; exit 2; }
  baseline_dir=$(cd "$baseline_dir" && pwd)
fi
# A registry of its own, built once by the warm-up run below: no timed run
# rescans the plugins.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GST_REGISTRY_1_0="$tmp/registry.bin"

src="videotestsrc num-buffers=$frames${pattern:+ pattern=$pattern} ! video/x-raw,format=GRAY8,width=16,height=16"
sink="fakesink enable-last-sample=false"
lane="identity signal-handoffs=false"
gpufan="$src ! gpufanout name=f $fanout_props gpufanin name=m ! $sink"
stock="$src ! roundrobin name=r funnel name=m ! $sink"
for k in 0 1; do
  gpufan+=" f.src_$k ! $lane ! m.sink_$k"
  stock+=" r.src_$k ! queue ! $lane ! m.sink_$k"
done

# One whole process; appends "wall user sys" to $tmp/$1.times.
run() { bench_timed_run "$1" "${!1}" "$tmp" stock-compare; }
# The same gpufan pipeline with the baseline build's plugin (its own registry).
baseline=$gpufan
run_baseline() {
  (
    export GST_PLUGIN_PATH="$baseline_dir/gst"
    export GST_REGISTRY_1_0="$tmp/registry-baseline.bin"
    run baseline
  )
}

# Warm-up (registry, page cache); not counted.
# shellcheck disable=SC2086
gst-launch-1.0 -q ${gpufan/num-buffers=$frames/num-buffers=100} >/dev/null ||
  { echo "stock-compare: gpufanout/gpufanin did not run" >&2; exit 1; }
# shellcheck disable=SC2086
gst-launch-1.0 -q ${stock/num-buffers=$frames/num-buffers=100} >/dev/null
if [[ -n $baseline_dir ]]; then
  # shellcheck disable=SC2086
  GST_PLUGIN_PATH="$baseline_dir/gst" GST_REGISTRY_1_0="$tmp/registry-baseline.bin" \
    gst-launch-1.0 -q ${gpufan/num-buffers=$frames/num-buffers=100} >/dev/null ||
    { echo "stock-compare: the baseline build's gpufan did not run" >&2; exit 1; }
fi

echo "stock-compare: $frames frames, $reps runs of each, alternating;" \
  "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "  gpufan: $gpufan"
echo "  stock:  $stock"
[[ -n $baseline_dir ]] && echo "  baseline: the gpufan line with $baseline_dir/gst"
: >"$tmp/gpufan.times"
: >"$tmp/stock.times"
: >"$tmp/baseline.times"
for ((i = 1; i <= reps; i++)); do
  run gpufan
  run stock
  line="gpufan $(tail -n1 "$tmp/gpufan.times") | stock $(tail -n1 "$tmp/stock.times")"
  if [[ -n $baseline_dir ]]; then
    run_baseline
    line+=" | baseline $(tail -n1 "$tmp/baseline.times")"
  fi
  printf '  run %d: %s  (wall user sys, s)\n' "$i" "$line"
done

python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
"$python" - "$frames" "$tmp/gpufan.times" "$tmp/stock.times" "$tmp/baseline.times" <<'EOF'
import statistics, sys
frames = int(sys.argv[1])
def load(path):
    rows = [list(map(float, l.split())) for l in open(path) if l.strip()]
    wall = [r[0] for r in rows]
    cpu = [r[1] + r[2] for r in rows]
    return statistics.median(wall), statistics.median(cpu)
g = load(sys.argv[2])
s = load(sys.argv[3])
us = lambda sec: 1e6 * sec / frames
print(f"\n{'median of ' + str(sum(1 for _ in open(sys.argv[2]))):<16} {'wall s':>8} {'CPU s':>8} "
      f"{'wall us/buf':>12} {'CPU us/buf':>11}")
rows = [("gpufan", g), ("stock", s)]
has_baseline = any(l.strip() for l in open(sys.argv[4]))
if has_baseline:
    b = load(sys.argv[4])
    rows.append(("baseline", b))
for name, (w, c) in rows:
    print(f"{name:<16} {w:8.3f} {c:8.3f} {us(w):12.2f} {us(c):11.2f}")
print(f"{'gpufan / stock':<16} {g[0] / s[0]:8.2f}x {g[1] / s[1]:7.2f}x")
if has_baseline:
    print(f"{'baseline / stock':<16} {b[0] / s[0]:8.2f}x {b[1] / s[1]:7.2f}x")
    print(f"{'gpufan / baseline':<16} {g[0] / b[0]:8.2f}x {g[1] / b[1]:7.2f}x")
print(f"throughput gpufan / stock (wall): {s[0] / g[0]:.2f}x")
EOF

if ((verify)); then
  "$python" - "$gpufan" "$frames" <<'EOF'
import sys
import gi
gi.require_version("Gst", "1.0")
from gi.repository import Gst
Gst.init(None)
desc, frames = sys.argv[1], int(sys.argv[2])
pipeline = Gst.parse_launch(desc.replace("fakesink ", "fakesink name=out ", 1))
state = {"n": 0, "bad": 0}
def probe(pad, info):
    off = info.get_buffer().offset
    if off != state["n"]:
        state["bad"] += 1
    state["n"] += 1
    return Gst.PadProbeReturn.OK
pipeline.get_by_name("out").get_static_pad("sink").add_probe(
    Gst.PadProbeType.BUFFER, probe)
pipeline.set_state(Gst.State.PLAYING)
msg = pipeline.get_bus().timed_pop_filtered(
    Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR)
pipeline.set_state(Gst.State.NULL)
if msg.type == Gst.MessageType.ERROR:
    sys.exit(f"stock-compare: order check: {msg.parse_error()[0].message}")
if state["n"] != frames or state["bad"]:
    sys.exit(f"stock-compare: ORDER CHECK FAILED: {state['n']} of {frames} buffers "
             f"out, {state['bad']} not at their place")
print(f"order check: all {frames} buffers came out of gpufanin, in order")
EOF
fi
