#!/usr/bin/env bash
# The GPU benchmark, run from an unpacked GPU bundle (scripts/gpu-bundle.sh)
# on any machine with the NVIDIA driver: no GStreamer, no network needed. One
# command, within 8 minutes; writes only under /tmp (or --out):
#
#   bash gpu-bench.sh [--out DIR] [--nvdec N] [--reps R] [--budget S]
#
# It measures frames/s in the steady state, each figure the median of R runs
# (default 2, at least 2), with the bundle's 1080p H.264 clip (4 Mbit/s,
# GOP 60, closed, made at packing time):
#   - one decoder: filesrc ! h264parse ! nvh264dec ! fakesink;
#   - the reference: N such chains in one gst-launch process, for N = 2, 4
#     and the GPU's NVDEC count (7 on H100/H200, 5 on A100, by its name;
#     --nvdec N says it for another GPU);
#   - gpufan chunk lanes for the same N: h264parse config-interval=-1 !
#     gpufanout chunk=keyframes chunk-frames=60 devices=0,...,0, each lane
#     nvh264dec ! video/x-raw(memory:CUDAMemory), gpufanin ! fakesink; and
#     again with system memory out (nvh264dec ! video/x-raw);
#   - frame mode: a GPU branch (cudaupload ! cudaconvertscale 1080p NV12 to
#     720p I420 ! cudadownload) over 3,000 frames (--frames) on 1, 2 and 4
#     lanes against the same branch without gpufan;
#   - NVDEC frames in CUDA memory through 1 and 2 lanes of cudaconvertscale
#     against the plain chain (nvh264dec ! cudaconvertscale ! fakesink);
#   - where the time goes: one traced run of the chunk lanes at the NVDEC
#     count (GPUFAN_TRACE): each lane's time split, and DIR/trace-chunk-N.json
#     for bench/trace-timeline.py.
#
# How a figure is computed. gst-launch prints "Execution ended after T": the
# time from PLAYING to EOS. T leaves out loading the plugins and prerolling
# (the first frame through: the CUDA context, the decoder, NVRTC compiling
# the kernels of the first lane's cudaconvertscale, seconds). What start-up
# T still holds (lanes whose decoder or kernels start after the first frame)
# is the same in a short and a long run of one pipeline, so each run of a
# figure is a pair, and
#   frames/s = (frames of the long run - frames of the short) / (T long - T short)
# Long: the clip 3 times over (--repeat; the clip concatenated, each copy
# starting at an IDR with its SPS/PPS); short: the clip once. Frame mode:
# 1.1 and 0.1 times --frames (a still frame repeated by imagefreeze: the
# source costs nothing). The start-up, reported apart, is the short run's
# whole wall time (process start to exit) less its frames at that rate.
# Every frame is assumed to reach the sink (the suite checks frames).
#
# Output: a table on stdout; DIR/bench.json (device, driver, every figure
# with its runs and pipeline), DIR/bench.png (a bar chart, where python3 is
# there: gpu-bench-plot.py), DIR/logs/. A figure that cannot be measured
# (an element missing, a pipeline failing, the time budget spent) says so
# in the table and JSON; the rest are still measured. Where no GPU is found
# it prints "no GPU" and exits 0. Exit status 1: nothing could be measured.
#
# Options: --reps R; --repeat K (long decode runs: the clip K times);
# --frames F; --frame-size WxH (frame mode's source, default 1920x1080;
# output 2/3 of it); --clip FILE (another byte-stream H.264 clip, made as
# above); --budget S (seconds for the measurements, default 400; a figure
# not begun by then is "not measured", one begun stops 30 s after it); --dry-run (print every gst-launch
# line, run nothing).
# Self-check only (CI): --cpu-stand-in runs every pipeline on the CPU
# (avdec_h264 max-threads=1 for nvh264dec, videoconvertscale for
# cudaconvertscale, identity for cudaupload/cudadownload, devices=cpu:N),
# with GPUFAN_BENCH_PLUGIN_PATH naming a folder with the libav plugin;
# GPUFAN_BENCH_MISSING=a,b treats elements as missing.
#
#   gpu-bench.sh --list-elements   the GStreamer elements it uses (the bundle
#                                  packs their plugins; nvcodec: its plugin)
set -uo pipefail
export LC_ALL=C

if [[ ${1:-} == --list-elements ]]; then
  printf '%s\n' filesrc h264parse fakesink videotestsrc capsfilter imagefreeze \
    identity gpufanout gpufanin nvcodec
  exit 0
fi

bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out="" nvdec="" reps=2 repeat=3 frames=3000 frame_size=1920x1080 clip=""
budget=400 stand_in=0 dry_run=0
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --nvdec) nvdec=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --frames) frames=$2; shift 2 ;;
    --frame-size) frame_size=$2; shift 2 ;;
    --clip) clip=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --cpu-stand-in) stand_in=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) sed -n '2,60p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bench: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
number() { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= $2)); }
number "$reps" 2 || { echo "gpu-bench: --reps must be 2 or more" >&2; exit 2; }
number "$repeat" 2 || { echo "gpu-bench: --repeat must be 2 or more" >&2; exit 2; }
number "$frames" 10 || { echo "gpu-bench: --frames must be 10 or more" >&2; exit 2; }
number "$budget" 1 || { echo "gpu-bench: bad --budget" >&2; exit 2; }
[[ -z $nvdec ]] || number "$nvdec" 1 || { echo "gpu-bench: bad --nvdec" >&2; exit 2; }
[[ $frame_size =~ ^([0-9]+)x([0-9]+)$ ]] || { echo "gpu-bench: bad --frame-size" >&2; exit 2; }
width=${BASH_REMATCH[1]} height=${BASH_REMATCH[2]}
# The branches' output: 2/3 of the frame, even.
out_width=$((width * 2 / 3 / 2 * 2)) out_height=$((height * 2 / 3 / 2 * 2))

# shellcheck source=scripts/gpu-common.sh
. "$bundle/gpu-common.sh" || { echo "gpu-bench: $bundle/gpu-common.sh is missing" >&2; exit 2; }
bundle_check "$bundle" gpu-bench
out=${out:-/tmp/gpufan-gpu-bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
rm -rf "$out/logs" "$out/work" "$out"/bench.{json,png,txt}
mkdir -p "$out/logs" "$out/work"
work=$out/work
bundle_env "$bundle" "$work"
bin=$bundle/bin
log() { printf 'gpu-bench: %s\n' "$*"; }

# --- the GPU ------------------------------------------------------------------
gpu_name="" gpu_driver="" gpu_cuda="" gpu_present=false nvdec_from=""
if ((stand_in)); then
  gpu_name="none: CPU stand-in (self-check)"
  nvdec=${nvdec:-2} nvdec_from="CPU stand-in"
elif ((!dry_run)); then
  gpu_probe "$out"
  if [[ $gpu_state == none ]]; then
    # A container may have the driver without nvidia-smi: ask libgpufan.
    timeout -k 5 60 env LD_LIBRARY_PATH="$bundle_ld" "$bin/gpufan-devices" \
      --json "$work/devices.json" >"$out/logs/devices.txt" 2>&1
    if grep -q '"uuid"' "$work/devices.json" 2>/dev/null; then
      gpu_state=present gpu_reason=""
      gpu_name=$(sed -n 's/.*"name": *"\([^"]*\)".*/\1/p' "$work/devices.json" | head -1)
    fi
  fi
  if [[ $gpu_state == failed ]]; then
    log "$gpu_reason"
    exit 1
  elif [[ $gpu_state != present ]]; then
    log "no GPU (${gpu_reason#no GPU: }): nothing to measure"
    printf '{"bench": "gst-gpufan gpu-bench", "gpu": {"present": false, "note": %s}, "figures": []}\n' \
      "$(json_string "$gpu_reason")" >"$out/bench.json"
    exit 0
  fi
  gpu_present=true
fi
if [[ -z $nvdec ]]; then
  # NVIDIA's video codec support matrix: NVDEC engines per GPU.
  case $gpu_name in
    *H100* | *H200* | *H800*) nvdec=7 nvdec_from="$gpu_name: 7 NVDEC engines" ;;
    *A100* | *A800*) nvdec=5 nvdec_from="$gpu_name: 5 NVDEC engines" ;;
    *) nvdec=1 nvdec_from="unknown for '${gpu_name:-this GPU}' (--nvdec N)" ;;
  esac
else
  nvdec_from=${nvdec_from:-"--nvdec"}
fi
# Decoder counts: 2, 4 and the NVDEC count.
mapfile -t counts < <(printf '%s\n' 2 4 "$nvdec" | awk '$1 > 1' | sort -nu)

# --- the elements ---------------------------------------------------------------
if ((stand_in)); then
  dec="avdec_h264 max-threads=1" cuda_caps="video/x-raw"
  upload=identity scale=videoconvertscale download=identity
  [[ -n ${GPUFAN_BENCH_PLUGIN_PATH:-} ]] && export GST_PLUGIN_PATH_1_0=$GPUFAN_BENCH_PLUGIN_PATH
else
  dec=nvh264dec cuda_caps="video/x-raw(memory:CUDAMemory)"
  upload=cudaupload scale=cudaconvertscale download=cudadownload
fi
declare -A have=()
if ((!dry_run)); then
  # One listing of every element the registry has (its first run scans the
  # plugins: nvcodec asks the driver what each GPU decodes).
  while read -r e; do have[$e]=1; done < <(
    timeout -k 5 120 env LD_LIBRARY_PATH="$bundle_ld" "$bin/gst-inspect-1.0" 2>/dev/null |
      sed -n 's/^[^:]*: *\([^: ]*\): .*/\1/p')
  IFS=, read -r -a hidden <<<"${GPUFAN_BENCH_MISSING:-}"
  for e in "${hidden[@]}"; do unset "have[$e]"; done
fi
missing_of() {  # ELEMENT...: prints why the first missing one is missing
  local e
  ((dry_run)) && return 0
  for e in "$@"; do
    [[ -n ${have[$e]:-} ]] && continue
    case $e in
      cudaconvertscale) echo "no $e (nvcodec needs NVRTC: found ${GPUFAN_NVRTC_LIBRARY:-${GST_CUDA_NVRTC_LIBNAME:-none}})" ;;
      nvh264dec) echo "no $e (nvcodec needs the driver's libnvcuvid.so.1)" ;;
      *) echo "no $e in the bundle" ;;
    esac
    return 0
  done
}

# --- the clip ---------------------------------------------------------------
clip=${clip:-$bundle/share/gpufan/bench-clip.h264}
[[ -f $clip && $clip != *[[:space:]]* ]] || { log "no clip $clip (or its path has spaces)"; exit 2; }
clip_frames=""
[[ $clip == "$bundle/share/gpufan/bench-clip.h264" ]] &&
  clip_frames=$(sed -n 's/^bench_clip_frames=//p' "$bundle/BUNDLE-INFO" 2>/dev/null)
if [[ -z $clip_frames ]] && ((!dry_run)); then
  # Count them: one fakesink line per frame.
  timeout -k 5 120 env LD_LIBRARY_PATH="$bundle_ld" "$bin/gst-launch-1.0" -v filesrc \
    "location=$clip" ! h264parse ! fakesink silent=false >"$work/count.txt" 2>&1
  clip_frames=$(grep -c 'last-message = chain' "$work/count.txt")
fi
clip_frames=${clip_frames:-0}
long_clip=$work/clip-x$repeat.h264
if ((!dry_run)); then
  for ((i = 0; i < repeat; i++)); do cat "$clip"; done >"$long_clip" || { log "cannot write $long_clip"; exit 2; }
fi

# --- the pipelines ----------------------------------------------------------
devices_for() {  # N: the fan-out's devices for N lanes on GPU 0
  if ((stand_in)); then echo "cpu:$1"; else printf '0%.0s,' $(seq "$1") | sed 's/,$//'; fi
}
lanes() {  # N "SOURCE" "FAN-OUT PROPERTIES" "BRANCH"
  local n=$1 i d
  d="$2 ! gpufanout name=f devices=$(devices_for "$n")${3:+ $3} gpufanin name=m ! fakesink sync=false"
  for ((i = 0; i < n; i++)); do d+=" f.src_$i ! $4 ! m.sink_$i"; done
  echo "$d"
}
decoders() {  # N CLIP: N independent decoder chains in one process
  local i d=""
  for ((i = 0; i < $1; i++)); do d+="${d:+ }filesrc location=$2 ! h264parse ! $dec ! fakesink sync=false"; done
  echo "$d"
}
chunk_lanes() {  # N CAPS CLIP: chunk-parallel decoding
  lanes "$1" "filesrc location=$3 ! h264parse config-interval=-1" \
    "chunk=keyframes chunk-frames=60" "$dec ! $2"
}
gpu_branch="$upload ! $scale ! $cuda_caps,format=I420,width=$out_width,height=$out_height ! $download"
frame_source() {  # FRAMES: one still frame, repeated
  echo "videotestsrc num-buffers=1 pattern=smpte ! video/x-raw,format=NV12,width=$width,height=$height,framerate=30/1 ! imagefreeze num-buffers=$1"
}
frame_mode() {  # LANES FRAMES (0 lanes: the branch without gpufan)
  if (($1 == 0)); then
    echo "$(frame_source "$2") ! $gpu_branch ! fakesink sync=false"
  else
    lanes "$1" "$(frame_source "$2")" "" "$gpu_branch"
  fi
}
cuda_branch="$scale ! $cuda_caps,width=$out_width,height=$out_height"
nvdec_lanes() {  # LANES CLIP: decoded frames in CUDA memory through lanes (0: plain)
  local source="filesrc location=$2 ! h264parse ! $dec ! $cuda_caps"
  if (($1 == 0)); then
    echo "$source ! $cuda_branch ! fakesink sync=false"
  else
    lanes "$1" "$source" "" "$cuda_branch"
  fi
}

# --- measuring --------------------------------------------------------------
keys=()
declare -A label=() group=() base=() goal=() status=() note=() fps=() fps_runs=() \
  startup=() pipeline=()
budget_end=$((SECONDS + budget))
seconds_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() {  # FORMAT, numbers on stdin
  tr ' ' '\n' | grep . | sort -g | awk -v f="$1" '{ v[NR] = $1 } END {
    if (NR) printf f, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# One gst-launch run of DESCRIPTION; sets run_exec (PLAYING to EOS) and
# run_wall (the whole process), seconds; or run_error. A figure begun before
# the budget's end may run on for 30 s past it, no more.
gst_run() {  # LOG DESCRIPTION
  local words t0 left=$((budget_end + 30 - SECONDS)) rc
  read -r -a words <<<"$2"
  echo "gst-launch-1.0 $2" >"$1"
  if ((left < 1)); then run_error="the time budget (--budget) ran out"; return 1; fi
  t0=$(date +%s.%N)
  timeout -k 5 $((left < 300 ? left : 300)) env LD_LIBRARY_PATH="$bundle_ld" \
    "$bin/gst-launch-1.0" "${words[@]}" >>"$1" 2>&1
  rc=$?
  run_wall=$(seconds_of "$t0" "$(date +%s.%N)")
  run_exec=$(sed -n 's/^Execution ended after \([0-9]*\):\([0-9]*\):\([0-9.]*\)$/\1 \2 \3/p' "$1" |
    awk '{ printf "%.6f", $1 * 3600 + $2 * 60 + $3 }')
  if ((rc == 124 || rc == 137)); then
    run_error="stopped: the time budget (--budget) ran out"
  elif ((rc != 0)) || [[ -z $run_exec ]]; then
    run_error="exit $rc: $(grep -m2 -E 'ERROR|WARNING|rror' "$1" | tr '\n' ' ' | cut -c1-300)"
  else
    return 0
  fi
  return 1
}
define() {  # KEY GROUP LABEL BASE GOAL
  keys+=("$1")
  group[$1]=$2 label[$1]=$3 base[$1]=$4 goal[$1]=$5 status[$1]="not measured" note[$1]=""
}
# KEY ELEMENTS BUILDER FRAMES-SHORT ARG-SHORT FRAMES-LONG ARG-LONG: runs
# "BUILDER ARG" (a gst-launch description) short and long, --reps times.
measure() {
  local k=$1 elements=$2 builder=$3 fs=$4 as=$5 fl=$6 al=$7 why r short long f s
  local -a b
  read -r -a b <<<"$builder"
  short=$("${b[@]}" "$as") long=$("${b[@]}" "$al")
  pipeline[$k]=$long
  if ((dry_run)); then
    printf '%s (%s frames, then %s):\n  gst-launch-1.0 %s\n  gst-launch-1.0 %s\n' \
      "${label[$k]}" "$fs" "$fl" "$short" "$long"
    return
  fi
  # shellcheck disable=SC2086  # one word per element
  why=$(missing_of $elements)
  if [[ -n $why ]]; then note[$k]=$why; return; fi
  if ((SECONDS >= budget_end)); then note[$k]="the time budget (--budget $budget s) was spent"; return; fi
  if ((fs <= 0 || fl <= fs)); then note[$k]="no frame count for the clip"; return; fi
  printf '  %-46s' "${label[$k]}"
  local fps_list="" startup_list="" ts tl ws
  for ((r = 1; r <= reps; r++)); do
    if ! gst_run "$out/logs/$k-$r-short.log" "$short"; then
      note[$k]="short run: $run_error"; break
    fi
    ts=$run_exec ws=$run_wall
    if ! gst_run "$out/logs/$k-$r-long.log" "$long"; then
      note[$k]="long run: $run_error"; break
    fi
    tl=$run_exec
    f=$(awk -v fs="$fs" -v fl="$fl" -v ts="$ts" -v tl="$tl" \
      'BEGIN { if (tl > ts) printf "%.1f", (fl - fs) / (tl - ts) }')
    if [[ -z $f ]]; then note[$k]="the long run was not longer than the short one"; break; fi
    s=$(awk -v w="$ws" -v n="$fs" -v f="$f" 'BEGIN { s = w - n / f; printf "%.2f", s < 0 ? 0 : s }')
    fps_list+="$f " startup_list+="$s "
    printf ' %s' "$f"
  done
  echo
  if [[ -n ${note[$k]} ]]; then status[$k]=failed; return; fi
  status[$k]=measured fps_runs[$k]=${fps_list% }
  fps[$k]=$(median %.1f <<<"$fps_list")
  startup[$k]=$(median %.2f <<<"$startup_list")
}

dry_header() { ((dry_run)) && printf '\n# %s\n' "$1"; return 0; }
log "GPU: ${gpu_name:-?}${gpu_driver:+, driver $gpu_driver}${gpu_cuda:+, CUDA $gpu_cuda}; NVDEC engines: $nvdec ($nvdec_from)"
log "clip: $clip ($clip_frames frames; long runs: $repeat times over); $reps runs a figure; budget $budget s"
((dry_run)) || log "frames/s of each run:"
cf=$clip_frames

dry_header "decoders"
define one-decoder decode "one decoder" "" ""
measure one-decoder "filesrc h264parse ${dec%% *} fakesink" "decoders 1" "$cf" "$clip" $((cf * repeat)) "$long_clip"
for n in "${counts[@]}"; do
  define "reference-$n" decode "reference: $n chains in one process" "" ""
  measure "reference-$n" "filesrc h264parse ${dec%% *} fakesink" "decoders $n" $((n * cf)) "$clip" \
    $((n * cf * repeat)) "$long_clip"
done
dry_header "chunk lanes"
for mem in CUDA system; do
  caps=$cuda_caps
  [[ $mem == system ]] && caps=video/x-raw
  for n in "${counts[@]}"; do
    g=""
    if ((n == nvdec)); then
      g=0.90
      [[ $mem == system ]] && g=0.80
    fi
    key=chunk-${mem,,}-$n
    define "$key" decode "chunk lanes: $n, $mem memory out" "reference-$n" "$g"
    measure "$key" "filesrc h264parse gpufanout gpufanin ${dec%% *} fakesink" \
      "chunk_lanes $n $caps" "$cf" "$clip" $((cf * repeat)) "$long_clip"
  done
done
dry_header "where the time goes"
# One more run of the chunk lanes at the NVDEC count, CUDA memory out, with
# gpufan's trace (GPUFAN_TRACE, trace-event JSON): each lane's time split
# (push into the branch, idle, settle, query, output) goes into the report,
# and bench/trace-timeline.py draws the file as a timeline (where matplotlib
# is: it may not be on the GPU machine).
trace_file="" trace_note=""
trace_desc=$(chunk_lanes "$nvdec" "$cuda_caps" "$long_clip")
if ((dry_run)); then
  printf 'GPUFAN_TRACE=%s/trace-chunk-%s.json gst-launch-1.0 %s\n' "$out" "$nvdec" "$trace_desc"
else
  # shellcheck disable=SC2086  # one word per element
  trace_note=$(missing_of filesrc h264parse gpufanout gpufanin ${dec%% *} fakesink)
  if [[ -z $trace_note ]] && ((SECONDS >= budget_end)); then
    trace_note="the time budget (--budget $budget s) was spent"
  fi
  if [[ -z $trace_note ]]; then
    export GPUFAN_TRACE=$out/trace-chunk-$nvdec.json
    if gst_run "$out/logs/trace-chunk-$nvdec.log" "$trace_desc"; then
      trace_file=$GPUFAN_TRACE
    else
      trace_note=$run_error
    fi
    unset GPUFAN_TRACE
  fi
fi
# TRACE: per lane, the share of the traced time each kind of span took.
trace_split() {
  awk '/"ph":"X"/ {
      match($0, /"name":"[^"]*"/); name = substr($0, RSTART + 8, RLENGTH - 9)
      if (name == "chunk") next
      match($0, /"tid":[0-9]+/); tid = substr($0, RSTART + 6, RLENGTH - 6) + 0
      match($0, /"ts":[0-9.]+/); ts = substr($0, RSTART + 5, RLENGTH - 5) + 0
      match($0, /"dur":[0-9.]+/); dur = substr($0, RSTART + 6, RLENGTH - 6) + 0
      lane = int((tid - 1) / 2); lanes[lane] = 1; sum[lane, name] += dur
      if (first == "" || ts < first) first = ts
      if (ts + dur > last) last = ts + dur
    }
    END {
      if (last <= first) exit
      n = split("push idle settle query output", kind, " ")
      for (l in lanes) {
        line = sprintf("  lane %d:", l)
        for (i = 1; i <= n; i++)
          line = line sprintf(" %s %.1f%%", kind[i], 100 * sum[l, kind[i]] / (last - first))
        print line
      }
    }' "$1" | sort -t: -k1,1V
}

dry_header "frame mode"
fshort=$((frames / 10))
define frame-plain frame "frame mode: GPU branch, no gpufan" "" ""
measure frame-plain "videotestsrc imagefreeze $upload $scale $download fakesink" "frame_mode 0" \
  "$fshort" "$fshort" $((frames + fshort)) $((frames + fshort))
for n in 1 2 4; do
  # "Add at most 5 %": at least 1/1.05 of the plain branch's frames/s.
  define "frame-lanes-$n" frame "frame mode: GPU branch, $n lane(s)" frame-plain 0.952
  measure "frame-lanes-$n" "videotestsrc imagefreeze gpufanout gpufanin $upload $scale $download fakesink" \
    "frame_mode $n" "$fshort" "$fshort" $((frames + fshort)) $((frames + fshort))
done
define nvdec-plain nvdec "NVDEC, CUDA memory, GPU branch, no gpufan" "" ""
measure nvdec-plain "filesrc h264parse ${dec%% *} $scale fakesink" "nvdec_lanes 0" "$cf" "$clip" \
  $((cf * repeat)) "$long_clip"
for n in 1 2; do
  define "nvdec-lanes-$n" nvdec "NVDEC, CUDA memory, GPU branch, $n lane(s)" nvdec-plain 0.952
  measure "nvdec-lanes-$n" "filesrc h264parse ${dec%% *} gpufanout gpufanin $scale fakesink" \
    "nvdec_lanes $n" "$cf" "$clip" $((cf * repeat)) "$long_clip"
done
((dry_run)) && exit 0

# --- the report ---------------------------------------------------------------
ratio() { [[ -n ${fps[$1]:-} && -n ${fps[$2]:-} ]] && awk -v a="${fps[$1]}" -v b="${fps[$2]}" 'BEGIN { if (b > 0) printf "%.2f", a / b }'; }
measured=0
{
  echo "gst-gpufan gpu-bench, $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
  echo "GPU: ${gpu_name:-?}${gpu_driver:+, driver $gpu_driver}${gpu_cuda:+, CUDA $gpu_cuda}; NVDEC engines: $nvdec ($nvdec_from)"
  echo "clip: $(basename "$clip"), $clip_frames frames; steady state: (frames long - short) / (T long - T short), median of $reps runs"
  echo
  printf '%-46s %9s %7s %-24s %-13s %8s  %s\n' what frames/s "x 1 dec" "vs" goal start-up "runs (frames/s)"
  for k in "${keys[@]}"; do
    if [[ ${status[$k]} != measured ]]; then
      printf '%-46s %9s  %s\n' "${label[$k]}" "-" "${status[$k]}: ${note[$k]}"
      continue
    fi
    ((measured++))
    x="" vs="" met=""
    [[ ${group[$k]} == decode ]] && x=$(ratio "$k" one-decoder)
    if [[ -n ${base[$k]} ]]; then
      vs=$(ratio "$k" "${base[$k]}")
      [[ -n $vs ]] && vs="$vs of ${base[$k]}"
    fi
    if [[ -n ${goal[$k]} && -n $vs ]]; then
      met=$(awk -v v="${vs%% *}" -v g="${goal[$k]}" 'BEGIN { print (v >= g ? "met" : "MISSED") }')
    fi
    printf '%-46s %9s %7s %-24s %-13s %7ss  %s\n' "${label[$k]}" "${fps[$k]}" "$x" "$vs" \
      "${goal[$k]:+>=${goal[$k]} $met}" "${startup[$k]}" "${fps_runs[$k]}"
  done
  echo
  echo "where the time goes: chunk lanes: $nvdec, CUDA memory out (share of the traced time; docs/elements.md)"
  if [[ -n $trace_file ]]; then
    trace_split "$trace_file"
    echo "  trace: $trace_file (python3 bench/trace-timeline.py TRACE OUT.png, or ui.perfetto.dev)"
  else
    echo "  not traced: $trace_note"
  fi
} >"$out/bench.txt"

num_or_null() { if [[ -n ${1:-} ]]; then printf '%s' "$1"; else printf null; fi; }
{
  printf '{\n  "bench": "gst-gpufan gpu-bench",\n  "date": %s,\n  "host": %s,\n' \
    "$(json_string "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" "$(json_string "$(uname -n) $(uname -r)")"
  printf '  "source": %s,\n' "$(json_string "$(sed -n 's/^source=//p' "$bundle/BUNDLE-INFO" 2>/dev/null)")"
  printf '  "gpu": {"present": %s, "name": %s, "driver": %s, "cuda_version": %s, "nvdec_engines": %s, "nvdec_from": %s},\n' \
    "$gpu_present" "$(json_string "$gpu_name")" "$(json_string "$gpu_driver")" "$(json_string "$gpu_cuda")" \
    "$nvdec" "$(json_string "$nvdec_from")"
  printf '  "cpu_stand_in": %s,\n' "$( ((stand_in)) && echo true || echo false)"
  printf '  "clip": {"file": %s, "frames": %s, "repeat": %s},\n  "runs_per_figure": %s,\n' \
    "$(json_string "$(basename "$clip")")" "$clip_frames" "$repeat" "$reps"
  printf '  "trace": %s,\n' "$(json_string "${trace_file:-not traced: $trace_note}")"
  printf '  "method": %s,\n' "$(json_string "frames/s = (frames long - frames short) / (T long - T short), T = gst-launch's PLAYING-to-EOS time; median of the runs; start-up = the short run's wall time less its frames at that rate")"
  printf '  "figures": ['
  sep=""
  for k in "${keys[@]}"; do
    runs=${fps_runs[$k]:-} vs=""
    runs=${runs// /, }
    [[ -n ${base[$k]} ]] && vs=$(ratio "$k" "${base[$k]}")
    x=""
    [[ ${group[$k]} == decode ]] && x=$(ratio "$k" one-decoder)
    printf '%s\n    {"key": %s, "group": %s, "label": %s, "status": %s, "note": %s, "fps": %s, "fps_runs": [%s], "startup_s": %s, "x_one_decoder": %s, "base": %s, "vs_base": %s, "goal_vs_base": %s, "pipeline": %s}' \
      "$sep" "$(json_string "$k")" "$(json_string "${group[$k]}")" "$(json_string "${label[$k]}")" \
      "$(json_string "${status[$k]}")" "$(json_string "${note[$k]}")" "$(num_or_null "${fps[$k]:-}")" \
      "$runs" "$(num_or_null "${startup[$k]:-}")" "$(num_or_null "$x")" \
      "$(json_string "${base[$k]}")" "$(num_or_null "$vs")" "$(num_or_null "${goal[$k]}")" \
      "$(json_string "gst-launch-1.0 ${pipeline[$k]}")"
    sep=","
  done
  printf '\n  ]\n}\n'
} >"$out/bench.json"

echo
cat "$out/bench.txt"
if command -v python3 >/dev/null && [[ -f $bundle/gpu-bench-plot.py ]]; then
  if python3 "$bundle/gpu-bench-plot.py" "$out/bench.json" "$out/bench.png" 2>"$work/plot.err"; then
    plot="$out/bench.png"
  else
    plot="none (gpu-bench-plot.py: $(tail_of "$work/plot.err" 2))"
  fi
else
  plot="none (no python3)"
fi
echo
echo "json: $out/bench.json; plot: $plot; logs: $out/logs"
rm -f "$long_clip"
((measured > 0))
