#!/usr/bin/env bash
# Chunk-parallel H.264 encoding: gpufanout chunk=frames over two CPU lanes of
# x264enc against one x264enc, on the same raw input, in the same run.
#
#   in:  filesrc location=RAW ! rawvideoparse width=W height=H format=i420 framerate=30/1
#   out: h264parse ! fakesink name=out sync=false enable-last-sample=false
#   A  in ! x264enc OPTS ! out                   one encoder, threads=auto
#   B  in ! x264enc threads=1 OPTS ! out         one encoder, one thread
#   C  in ! gpufanout name=f chunk=frames chunk-frames=K devices=cpu:2
#         gpufanin name=m ! out
#         f.src_k ! queue ! x264enc threads=1 OPTS ! m.sink_k     (k = 0, 1)
#   D  as C, lanes with the default x264enc threads
#   E  as C, one lane (devices=cpu:1): the chunks one after the other
#
# The raw I420 file (videotestsrc, scrolling, so that the encoder has motion
# to search) is written once, before anything is timed: no run pays for a
# source or a decoder, only for reading a file that is in the page cache
# (W*H*1.5 bytes a frame: 207 MB at the defaults, in $TMPDIR).
# Runs the five gst-launch-1.0 processes alternately R times, takes each
# process's wall time and CPU time (user + sys, bash's `time`), and prints the
# medians, frames per second and the ratios B/C (chunk-parallel against one
# single-threaded encoder: C gives each lane one core, B has one core), A/D
# and A/C. B/C is two effects at once: the second core, and what chunking
# does to x264's own cost per frame (every chunk is a fresh encoder: an IDR
# frame, rate control and lookahead from scratch); E splits them: B/E is the
# chunking alone, E/C the second lane alone.
# Timings are reported, never judged: there is no pass/fail on them.
# Then, not timed: one run of C through avdec_h264 checks that the output
# decodes to exactly N frames in presentation order (this run is also the
# warm-up), and bench/chunk-latency.py measures per-frame latency, gpufanout's
# (or the encoder's) sink pad to the fakesink, of C against B: once with the
# input as fast as the pipeline takes it, once paced at 30 fps by a clocksync
# (a live source's view).
#
#   bash bench/chunk-encode.sh                   # 600 frames 640x360, 5 runs each
#   bash bench/chunk-encode.sh -f 120 -r 1       # quick
#   bash bench/chunk-encode.sh -k 60             # chunks of 60 frames
#   bash bench/chunk-encode.sh -o "speed-preset=fast"   # x264enc options, all variants
#   bash bench/chunk-encode.sh -o "pass=quant quantizer=26"  # constant QP, not CBR 2048k
#   bash bench/chunk-encode.sh -w 1280 -h 720 -p ball   # size, videotestsrc pattern
#   bash bench/chunk-encode.sh --no-latency      # skip the latency runs
#   bash bench/chunk-encode.sh --no-paced        # skip only the paced latency run
#   bash bench/chunk-encode.sh --no-verify       # skip the decode check
#
# -h is the height: the help is --help. Needs a build (scripts/setup.sh;
# BUILD_DIR, default build, relative to the repository or absolute), x264enc
# (gstreamer1.0-plugins-ugly), rawvideoparse (-bad), avdec_h264 (gstreamer1.0-
# libav) and /usr/bin/python3 with PyGObject for the check and the latency.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=bench/timed-run.sh
source bench/timed-run.sh
build_dir=${BUILD_DIR:-build}
[[ $build_dir == /* ]] || build_dir=$root/$build_dir
frames=600
reps=5
width=640
height=360
chunk=30
x264_opts=""
pattern=smpte
latency=1
paced=1
verify=1

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}
while (($#)); do
  case $1 in
    -f | --frames) frames=$2; shift 2 ;;
    -r | --reps) reps=$2; shift 2 ;;
    -w | --width) width=$2; shift 2 ;;
    -h | --height) height=$2; shift 2 ;;
    -k | --chunk-frames) chunk=$2; shift 2 ;;
    -o | --x264-opts) x264_opts=$2; shift 2 ;;
    -p | --pattern) pattern=$2; shift 2 ;;
    --no-latency) latency=0; shift ;;
    --no-paced) paced=0; shift ;;
    --no-verify) verify=0; shift ;;
    --help) usage 0 ;;
    *) echo "chunk-encode: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
for v in "$frames" "$reps" "$width" "$height" "$chunk"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] ||
    { echo "chunk-encode: -f, -r, -w, -h and -k take positive integers" >&2; exit 2; }
done

[[ -e $build_dir/gst ]] ||
  { echo "chunk-encode: no $build_dir/gst: run scripts/setup.sh first" >&2; exit 2; }
export GST_PLUGIN_PATH="$build_dir/gst"
python=/usr/bin/python3 # pyenv's python3 has no PyGObject
[[ -x $python ]] || python=python3
# A registry of its own, built by the first gst-launch below (the raw file):
# no timed run rescans the plugins.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GST_REGISTRY_1_0="$tmp/registry.bin"

raw="$tmp/input.i420"
gst-launch-1.0 -q videotestsrc num-buffers="$frames" pattern="$pattern" horizontal-speed=3 \
  ! "video/x-raw,format=I420,width=$width,height=$height,framerate=30/1" \
  ! filesink location="$raw" ||
  { echo "chunk-encode: could not write the raw input" >&2; exit 1; }

src="filesrc location=$raw ! rawvideoparse width=$width height=$height format=i420 framerate=30/1"
sink="h264parse ! fakesink name=out sync=false enable-last-sample=false"
# The options go last, so that they can override threads.
opts=${x264_opts:+ $x264_opts}
# shellcheck disable=SC2034  # A to E are read through ${!v}
A="$src ! x264enc name=enc$opts ! $sink"
B="$src ! x264enc name=enc threads=1$opts ! $sink"
fan="$src ! gpufanout name=f chunk=frames chunk-frames=$chunk devices=cpu:2 gpufanin name=m ! $sink"
C=$fan
D=$fan
# shellcheck disable=SC2034  # as above
E="${fan/devices=cpu:2/devices=cpu:1} f.src_0 ! queue ! x264enc threads=1$opts ! m.sink_0"
for k in 0 1; do
  C+=" f.src_$k ! queue ! x264enc threads=1$opts ! m.sink_$k"
  D+=" f.src_$k ! queue ! x264enc$opts ! m.sink_$k"
done

# One whole process; appends "wall user sys" to $tmp/$1.times.
run() { bench_timed_run "$1" "${!1}" "$tmp" chunk-encode; }

echo "chunk-encode: $frames frames ${width}x$height I420 (videotestsrc pattern=$pattern" \
  "horizontal-speed=3), chunk-frames=$chunk${x264_opts:+, x264enc $x264_opts}, $reps runs" \
  "of each, alternating; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
for v in A B C D E; do echo "  $v: ${!v}"; done

if ((verify)); then
  # Untimed, and the warm-up of the timed runs (page cache, the encoder's
  # and gpufan's libraries). Decoders output in presentation order: strictly
  # rising PTS, as many as frames went in.
  "$python" - "${C/ ! fakesink / ! avdec_h264 ! fakesink }" "$frames" <<'EOF' ||
import sys
import gi
gi.require_version("Gst", "1.0")
from gi.repository import Gst
Gst.init(None)
desc, frames = sys.argv[1], int(sys.argv[2])
pipeline = Gst.parse_launch(desc)
pts = []
pipeline.get_by_name("out").get_static_pad("sink").add_probe(
    Gst.PadProbeType.BUFFER, lambda pad, info: (pts.append(info.get_buffer().pts),
                                                Gst.PadProbeReturn.OK)[1])
pipeline.set_state(Gst.State.PLAYING)
bus = pipeline.get_bus()
warnings = 0
while True:
    msg = bus.timed_pop_filtered(Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS
                                 | Gst.MessageType.ERROR | Gst.MessageType.WARNING)
    if msg.type != Gst.MessageType.WARNING:
        break
    warnings += 1
    print(f"  warning: {msg.parse_warning()[0].message}", file=sys.stderr)
pipeline.set_state(Gst.State.NULL)
if msg.type == Gst.MessageType.ERROR:
    sys.exit(f"chunk-encode: decode check: {msg.parse_error()[0].message}")
rising = all(a < b for a, b in zip(pts, pts[1:]))
if len(pts) != frames or not rising or warnings:
    sys.exit(f"chunk-encode: DECODE CHECK FAILED: {len(pts)} of {frames} frames decoded, "
             f"PTS {'' if rising else 'not '}rising, {warnings} warnings")
print(f"decode check: C's output decodes (avdec_h264) to all {frames} frames, PTS rising")
EOF
    exit 1
else
  # shellcheck disable=SC2086
  gst-launch-1.0 -q $C >/dev/null || { echo "chunk-encode: variant C did not run" >&2; exit 1; }
fi

for v in A B C D E; do : >"$tmp/$v.times"; done
for ((i = 1; i <= reps; i++)); do
  line="  run $i:"
  for v in A B C D E; do
    run "$v"
    line+=" $v $(tail -n1 "$tmp/$v.times") |"
  done
  echo "${line% |}  (wall user sys, s)"
done

echo "  load after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$frames" "$chunk" "$reps" "$tmp" <<'EOF'
import statistics, sys
frames, chunk, reps, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
med = {}
for v in "ABCDE":
    rows = [list(map(float, l.split())) for l in open(f"{tmp}/{v}.times") if l.strip()]
    med[v] = (statistics.median(r[0] for r in rows), statistics.median(r[1] + r[2] for r in rows))
names = {"A": "x264enc", "B": "x264enc threads=1", "C": "chunk, lanes threads=1",
         "D": "chunk, lanes threads=auto", "E": "chunk, one lane threads=1"}
print(f"\n{'median of ' + reps:<30} {'wall s':>7} {'CPU s':>7} {'fps':>7} "
      f"{'CPU ms/frame':>12}")
for v in "ABCDE":
    w, c = med[v]
    print(f"{v} {names[v]:<28} {w:7.2f} {c:7.2f} {frames / w:7.1f} {1e3 * c / frames:12.2f}")
ratio = lambda a, b: med[a][0] / med[b][0]
print(f"B/C (wall) {ratio('B', 'C'):.2f}x  chunk-parallel, one core a lane, against one "
      "single-threaded x264enc (the issue's goal: 1.8x on 2 cores)")
print(f"A/D (wall) {ratio('A', 'D'):.2f}x  chunk-parallel, threaded lanes, against one threaded x264enc")
print(f"A/C (wall) {ratio('A', 'C'):.2f}x  chunk-parallel, one core a lane, against one threaded x264enc")
print(f"B/E (wall) {ratio('B', 'E'):.2f}x  chunking alone: one lane against one x264enc, both one thread")
print(f"E/C (wall) {ratio('E', 'C'):.2f}x  the second lane alone: two lanes against one, chunked alike")
per = 1e3 * med["B"][0] / frames
print(f"B's pace: {per:.2f} ms a frame; a chunk of {chunk} frames at that pace: {chunk * per:.0f} ms")
EOF

if ((latency)); then
  # The same descriptions as the timed runs; stamps at gpufanout's sink pad
  # for C, at the encoder's for B (no queue before it: both stamp where the
  # frame is handed over to be encoded).
  echo
  echo "latency, input as fast as the pipeline takes it (fakesink sync=false):"
  "$python" bench/chunk-latency.py --case C f "$C" --case B enc "$B"
  if ((paced)); then
    # A clocksync holds each frame to its PTS on the pipeline clock: frames
    # arrive at 30 fps, as from a camera, and the latency no longer includes
    # the wait behind earlier frames in a backlog.
    echo
    echo "latency, input paced at 30 fps (clocksync after rawvideoparse), $((frames / 30)) s a run:"
    "$python" bench/chunk-latency.py --case C f "${C/framerate=30\/1 /framerate=30/1 ! clocksync }" \
      --case B enc "${B/framerate=30\/1 /framerate=30/1 ! clocksync }"
  fi
fi
