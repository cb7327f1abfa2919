#!/usr/bin/env bash
# The GPU suite, run from an unpacked GPU bundle (scripts/gpu-bundle.sh) on a
# machine with the NVIDIA driver and nothing else: no GStreamer, no hwloc, no
# package access, no network. Needs bash, coreutils and awk; writes only under
# /tmp (or --out).
#
#   bash gpu-suite.sh [--out DIR] [--frames N] [--quick]
#
# It runs everything from the bundle's private prefix (library path, plugin
# path and a registry of its own; the machine's libraries are used only for
# glibc and the NVIDIA driver), checks nvidia-smi, then:
#   - the GPU tests: test-lib-cuda (CudaGpu.*), test-devices (DevicesGpu.*)
#     and test-cuda-memory (CudaMemory.*),
#     whole binaries; on a machine whose nvidia-smi lists a GPU a skipped GPU
#     test is a failure;
#   - gpufan-h2d-bench (pageable vs pinned host-to-device, device-to-device);
#   - pipelines, each branch on two lanes against the same branch on one lane,
#     frames compared (checksumsink: every frame, in order, identical):
#     CPU lanes (always), CUDA branches on devices=0,0, NVDEC upstream of the
#     fan-out; the demo with --branch cpu and --branch cuda;
#   - the NVENC/NVDEC probe (require-codecs) against what the GPU is;
#   - which libraries every process loaded from outside the bundle (only
#     glibc, the driver and NVRTC may be; not the machine's hwloc plugins).
# GPU parts skip with "no GPU" where nvidia-smi lists none. Speed is not
# measured here: the pipelines' runs check frames, and their wall times hold
# seconds of start-up; gpu-bench.sh beside this script measures the steady
# state.
#
# Output: DIR/report.txt and DIR/report.json (device, driver, CUDA version,
# the GPU's NUMA node as hwloc sees it, every check, every test case, every
# figure: the bandwidths), logs beside them. The last line is "N passed,
# N failed, N skipped"; the exit status is 1 when a check failed.
#
#   gpu-suite.sh --list-elements   the GStreamer elements the suite uses (the
#                                  bundle packs their plugins)
set -uo pipefail

# Elements the suite, the test binaries and the demo use. gpu-bundle.sh packs
# the plugins that provide them; without a GPU the nvcodec elements
# (cudaupload, cudaconvertscale, cudascale, cudadownload, nvh264dec) are not
# registered, so their plugin is named instead.
cpu_elements=(videotestsrc capsfilter videoconvert videoscale checksumsink
  fakesink filesrc filesink queue identity tee gpufanout gpufanin h264parse
  gaussianblur jpegenc jpegdec matroskamux matroskademux decodebin)
gpu_plugins=(nvcodec)

if [[ ${1:-} == --list-elements ]]; then
  printf '%s\n' "${cpu_elements[@]}" "${gpu_plugins[@]}"
  exit 0
fi

bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=""
frames=300
quick=0
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --frames) frames=$2; shift 2 ;;
    --quick) quick=1; shift ;;  # fewer frames and repetitions (the CI check)
    -h | --help) sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-suite: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
# shellcheck source=scripts/gpu-common.sh
. "$bundle/gpu-common.sh" || { echo "gpu-suite: $bundle/gpu-common.sh is missing" >&2; exit 2; }
bundle_check "$bundle" gpu-suite
if ((quick)); then frames=60; fi
out=${out:-/tmp/gpufan-gpu-suite-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
# Nothing of an earlier run in the same folder may reach this report.
rm -f "$out"/{devices,h2d,report}.json "$out"/*.xml "$out"/*.log "$out"/*.txt \
  "$out"/nvidia-smi.* "$out"/tests.tsv
work=$out/work
rm -rf "$work"
mkdir -p "$work/ld"

# --- the private prefix (gpu-common.sh) --------------------------------------
bundle_env "$bundle" "$work"
bin=$bundle/bin

# --- results ----------------------------------------------------------------
check_names=() check_status=() check_detail=() check_seconds=()
figure_lines=()   # name<TAB>value<TAB>unit
started=$SECONDS
check_start=$SECONDS

begin() { check_start=$SECONDS; printf '\n--- %s\n' "$1"; }
record() {  # NAME passed|failed|skipped DETAIL
  check_names+=("$1") check_status+=("$2") check_detail+=("$3")
  check_seconds+=($((SECONDS - check_start)))
  printf '%-28s %-7s %s\n' "$1" "$2" "$3"
}
figure() {  # NAME VALUE UNIT; a value that is not a number is null
  local v=$2
  [[ $v =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] || v=null
  figure_lines+=("$1"$'\t'"$v"$'\t'"$3")
  printf '  figure %s = %s %s\n' "$1" "$v" "$3"
}
# Runs a bundle program (and what it starts: gst-plugin-scanner) with the
# bundle's libraries, recording each library it loads (checked at the end);
# the machine's own tools (grep, awk, nvidia-smi) keep the machine's. Every
# command ends: LIMIT seconds.
budget_end=$((SECONDS + ${GPU_SUITE_BUDGET_S:-540}))
limit() {  # LIMIT PROGRAM [ARGS...]
  # The whole suite ends within its budget (the device tool stops a command
  # at 600 s): the report is still written.
  local seconds=$1 left=$((budget_end - SECONDS))
  shift
  ((left < 10)) && left=10
  ((seconds > left)) && seconds=$left
  timeout -k 10 "$seconds" env LD_LIBRARY_PATH="$bundle_ld" LD_DEBUG=libs \
    LD_DEBUG_OUTPUT="$work/ld/ld" "$@"
}

# --- environment ------------------------------------------------------------
begin "bundle and host"
bundle_glibc=$(sed -n 's/^glibc=//p' "$bundle/BUNDLE-INFO" 2>/dev/null)
host_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -z $bundle_glibc || -z $host_glibc ]]; then
  record glibc failed "cannot read the glibc versions (bundle '${bundle_glibc}', host '${host_glibc}')"
elif [[ $(printf '%s\n%s\n' "$bundle_glibc" "$host_glibc" | sort -V | head -1) != "$bundle_glibc" ]]; then
  record glibc failed "this machine's glibc $host_glibc is older than the bundle's $bundle_glibc: build the bundle on an older Debian"
  echo "gpu-suite: cannot run here" >&2
else
  record glibc passed "host $host_glibc, bundle built against $bundle_glibc"
fi

begin "nvidia-smi"
gpu=0
gpu_probe "$out"
count=$gpu_count
case $gpu_state in
  present)
    gpu=1
    record nvidia-smi passed "$count GPU(s); GPU 0: $gpu_name, driver $gpu_driver, CUDA $gpu_cuda, $gpu_pci" ;;
  failed) record nvidia-smi failed "$gpu_reason" ;;
  *) record nvidia-smi skipped "$gpu_reason" ;;
esac
no_gpu_reason="no GPU (nvidia-smi lists none)"

begin "gpufan-devices"
if limit 120 "$bin/gpufan-devices" --json "$out/devices.json" >"$out/devices.txt" 2>&1; then
  cat "$out/devices.txt"
  found=$(grep -c '"uuid"' "$out/devices.json")
  if ((gpu)) && ((found != count)); then
    record gpufan-devices failed "nvidia-smi lists $count GPU(s), gpufan sees $found: $(tail_of "$out/devices.txt" 3)"
  elif ((!gpu && found > 0)); then
    # The driver works where nvidia-smi does not: the GPU checks run anyway.
    gpu=1 count=$found
    record gpufan-devices failed "libgpufan sees $found GPU(s) that nvidia-smi does not list"
  else
    record gpufan-devices passed "$found GPU(s) seen by libgpufan"
  fi
else
  record gpufan-devices failed "$(tail_of "$out/devices.txt")"
fi
# "key": value of GPU 0 in devices.json (first occurrence).
device_field() { sed -n "s/.*\"$1\": *\"\\{0,1\\}\\([^\",]*\\)\"\\{0,1\\}.*/\\1/p" "$out/devices.json" 2>/dev/null | head -1; }

# --- GoogleTest binaries ----------------------------------------------------
# One line per test case: binary<TAB>Suite.Name<TAB>status<TAB>message.
tests_tsv=$out/tests.tsv
: >"$tests_tsv"
gtest_cases() {  # BINARY XML
  awk -v binary="$1" '
    function attr(n,   s) {
      if (!match($0, n "=\"[^\"]*\"")) return ""
      s = substr($0, RSTART + length(n) + 2, RLENGTH - length(n) - 3)
      gsub(/&#x0A;|&#x0D;/, " ", s); gsub(/&quot;/, "\"", s); gsub(/&apos;/, "'\''", s)
      gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&amp;/, "\\&", s)
      gsub(/\t/, " ", s)
      return substr(s, 1, 300)
    }
    function emit() { printf "%s\t%s.%s\t%s\t%s\n", binary, cls, name, status, msg; open = 0 }
    /<testcase / {
      name = attr("name"); cls = attr("classname"); msg = ""
      status = attr("result") == "skipped" ? "skipped" : "passed"
      if (attr("status") == "notrun") status = "skipped"
      if ($0 ~ /\/>[ \t]*$/) emit(); else open = 1
      next
    }
    open && /<failure / { if (status != "failed") msg = attr("message"); status = "failed" }
    open && /<skipped / { if (status != "failed") { status = "skipped"; msg = attr("message") } }
    open && /<\/testcase>/ { emit() }
  ' "$2"
}
run_gtest() {  # CHECK-NAME BINARY GPU-SUITE-PREFIX [args...]
  local name=$1 binary=$2 gpu_prefix=$3
  shift 3
  begin "$name"
  local xml=$out/$name.xml log=$out/$name.log
  rm -f "$xml"
  GTEST_OUTPUT=xml:$xml limit 300 "$bin/$binary" "$@" >"$log" 2>&1
  local rc=$?
  if [[ ! -s $xml ]]; then
    record "$name" failed "exit $rc, no test results: $(tail_of "$log")"
    return
  fi
  gtest_cases "$binary" "$xml" >>"$tests_tsv"
  local mine passed failed skipped gpu_run gpu_skipped
  mine=$(grep -P "^$binary\t" "$tests_tsv")
  passed=$(grep -cP '\tpassed\t' <<<"$mine")
  failed=$(grep -cP '\tfailed\t' <<<"$mine")
  skipped=$(grep -cP '\tskipped\t' <<<"$mine")
  gpu_run=$(grep -P "\t$gpu_prefix\." <<<"$mine" | grep -cP '\tpassed\t')
  gpu_skipped=$(grep -P "\t$gpu_prefix\." <<<"$mine" | grep -cP '\tskipped\t')
  local summary="$passed passed, $failed failed, $skipped skipped; $gpu_prefix.*: $gpu_run ran, $gpu_skipped skipped"
  grep -P '\t(failed)\t' <<<"$mine" | cut -f2,4 | sed 's/^/  FAILED /'
  if ((rc != 0 || failed > 0)); then
    record "$name" failed "exit $rc; $summary"
  elif ((gpu && gpu_skipped > 0)); then
    grep -P "\t$gpu_prefix\..*\tskipped\t" <<<"$mine" | cut -f2,4 | sed 's/^/  SKIPPED /'
    record "$name" failed "$summary: a GPU test skipped on a machine with a GPU"
  elif ((gpu && gpu_run == 0)); then
    record "$name" failed "$summary: no $gpu_prefix.* case ran on a machine with a GPU"
  else
    record "$name" passed "$summary"
  fi
}

run_gtest test-lib-cuda test-lib-cuda CudaGpu
# As meson runs it: the one test that needs a small host pool runs alone.
GTEST_FILTER='-*.AFullHostPoolFallsBackToOrdinaryMemory' \
  run_gtest test-devices test-devices DevicesGpu
# Frames in CUDA memory through both elements, with nvcodec's own elements
# (the cases that need the stand-in driver's counters skip).
run_gtest test-cuda-memory test-cuda-memory CudaMemory

# --- bandwidth --------------------------------------------------------------
begin "gpufan-h2d-bench"
reps=20 size=64
((quick)) && reps=5 size=8
limit 600 "$bin/gpufan-h2d-bench" --size-mib "$size" --reps "$reps" \
  --json "$out/h2d.json" >"$out/h2d.txt" 2>&1
rc=$?
cat "$out/h2d.txt"
if ((rc == 0)); then
  record h2d-bench passed "$(grep -c '"ordinal"' "$out/h2d.json") device(s), ${size} MiB x $reps"
  # Per device: pageable, pinned and device-to-device GB/s.
  awk -F'[:,]' '
    /"ordinal"/ { for (i = 1; i <= NF; i++) if ($i ~ /"ordinal"/) dev = $(i + 1) + 0 }
    { for (i = 1; i <= NF; i++) if ($i ~ /"(pageable|pinned|d2d|via_host)_gbps"/) {
        k = $i; gsub(/[" ]/, "", k); sub(/_gbps$/, "", k)
        if (k == "via_host") k = "via-host"; else if (k != "d2d") k = "h2d-" k
        printf "gpu%d-%s\t%s\n", dev, k, $(i + 1) + 0 } }
  ' "$out/h2d.json" | while IFS=$'\t' read -r k v; do echo "$k $v"; done >"$work/h2d-figures"
  while read -r k v; do figure "$k" "$v" "GB/s"; done <"$work/h2d-figures"
elif ((rc == 77)); then
  if ((gpu)); then
    record h2d-bench failed "the bench found no CUDA device on a machine with a GPU: $(tail_of "$out/h2d.txt" 2)"
  else
    record h2d-bench skipped "$no_gpu_reason: $(tail_of "$out/h2d.txt" 1)"
  fi
else
  record h2d-bench failed "exit $rc: $(tail_of "$out/h2d.txt")"
fi

# --- pipelines ----------------------------------------------------------------
# SOURCE ! gpufanout devices=DEVICES (LANES lanes of BRANCH) ! gpufanin !
# checksumsink: one "pts sha1" line per frame into FILE. These runs check the
# frames, not the speed: their wall time holds the start-up (NVRTC compiling
# nvcodec's kernels takes seconds). gpu-bench.sh measures the steady state.
run_lanes() {  # FILE SOURCE BRANCH DEVICES LANES
  local file=$1 source=$2 branch=$3 devices=$4 lanes=$5 d i
  d="$source ! gpufanout name=f devices=$devices gpufanin name=m ! checksumsink sync=false"
  for ((i = 0; i < lanes; i++)); do d+=" f.src_$i ! $branch ! m.sink_$i"; done
  echo "gst-launch-1.0 $d" >"$file.cmd"
  # One word per argument: gst-launch escapes the spaces inside an argument.
  local words
  read -r -a words <<<"$d"
  limit 600 "$bin/gst-launch-1.0" -q "${words[@]}" >"$file.out" 2>"$file.err" || return 1
  grep -E '^[0-9]+:[0-9]{2}:[0-9]{2}\.[0-9]{9} [0-9a-f]{40}$' "$file.out" >"$file"
}
# Runs the branch on 2 lanes and on 1 lane; the frames must be all there, in
# order (PTS increasing) and identical. FRAMES=0: as many as the 1-lane run.
compare_lanes() {  # NAME FRAMES SOURCE BRANCH DEVICES-2 DEVICES-1
  local name=$1 want=$2 source=$3 branch=$4 two=$5 one=$6 f=$work/$1
  begin "$name"
  if ! run_lanes "$f.two" "$source" "$branch" "$two" 2; then
    record "$name" failed "2 lanes (devices=$two): $(tail_of "$f.two.err")"; return
  fi
  if ! run_lanes "$f.one" "$source" "$branch" "$one" 1; then
    record "$name" failed "1 lane (devices=$one): $(tail_of "$f.one.err")"; return
  fi
  local n1 n2
  n2=$(wc -l <"$f.two") n1=$(wc -l <"$f.one")
  ((want == 0)) && want=$n1
  local bad=""
  ((n1 == want && n2 == want && want > 0)) || bad="frames: $n2 on 2 lanes, $n1 on 1 lane, want $want"
  if [[ -z $bad ]] && ! awk '{ split($1, t, /[:.]/); ns = ((t[1] * 60 + t[2]) * 60 + t[3]) * 1e9 + t[4]
         if (NR > 1 && ns <= last) exit 1; last = ns }' "$f.two"; then
    bad="2 lanes: PTS not increasing"
  fi
  if [[ -z $bad ]] && ! cmp -s "$f.two" "$f.one"; then
    bad="2 lanes differ from 1 lane at frame $(cmp "$f.two" "$f.one" | sed -n 's/.*line \([0-9]*\).*/\1/p')"
  fi
  if [[ -z $bad ]] && (($(cut -d' ' -f2 "$f.one" | sort -u | wc -l) < 2)); then
    bad="every frame is the same picture: the check would not see a mix-up"
  fi
  if [[ -n $bad ]]; then
    record "$name" failed "$bad"
    return
  fi
  record "$name" passed "$want frames identical and in order on 2 lanes and on 1 lane"
}
have_elements() {  # prints the missing ones
  local e missing=()
  for e in "$@"; do
    limit 120 "$bin/gst-inspect-1.0" "$e" >/dev/null 2>&1 || missing+=("$e")
  done
  echo "${missing[*]}"
}
gpu_pipeline_ready() {  # NAME ELEMENTS...: records a skip or failure and returns 1 when not
  local name=$1 missing why=""
  shift
  if ((!gpu)); then
    begin "$name"; record "$name" skipped "$no_gpu_reason"; return 1
  fi
  missing=$(have_elements "$@")
  [[ -z $missing ]] && return 0
  [[ $missing == *cuda*scale* ]] &&
    why+="; cudaconvertscale and cudascale need NVRTC (found: ${GPUFAN_NVRTC_LIBRARY:-${GST_CUDA_NVRTC_LIBNAME:-none}})"
  [[ $missing == *nvh264dec* ]] && why+="; nvh264dec needs the driver's libnvcuvid.so.1"
  begin "$name"
  record "$name" failed "GStreamer's nvcodec registered no $missing on a machine with a GPU$why"
  return 1
}

begin "elements"
missing=$(have_elements "${cpu_elements[@]}")
if [[ -n $missing ]]; then
  record elements failed "missing from the bundle: $missing"
else
  record elements passed "${#cpu_elements[@]} elements from the bundle's plugins"
fi

cpu_source="videotestsrc num-buffers=$frames pattern=ball ! video/x-raw,format=NV12,width=320,height=240,framerate=30/1"
compare_lanes lanes-cpu "$frames" "$cpu_source" \
  "videoconvert ! videoscale ! video/x-raw,format=I420,width=160,height=120" cpu:2 cpu:1

gpu_source="videotestsrc num-buffers=$frames pattern=ball ! video/x-raw,format=NV12,width=1280,height=720,framerate=30/1"
cuda_branch="cudaupload ! cudaconvertscale ! video/x-raw(memory:CUDAMemory),format=I420,width=640,height=360 ! cudadownload ! video/x-raw,format=I420"
if gpu_pipeline_ready lanes-cuda cudaupload cudaconvertscale cudadownload; then
  compare_lanes lanes-cuda "$frames" "$gpu_source" "$cuda_branch" 0,0 0
fi

clip=$bundle/share/gpufan/clip.h264
clip_frames=$(sed -n 's/^clip_frames=//p' "$bundle/BUNDLE-INFO" 2>/dev/null)
# The decoder's output in system memory, then in CUDA memory: the frames
# reach the lanes' cudaupload in GPU memory.
if gpu_pipeline_ready nvdec-lanes-cuda nvh264dec cudaupload cudaconvertscale cudadownload; then
  compare_lanes nvdec-lanes-cuda "${clip_frames:-0}" \
    "filesrc location=$clip ! h264parse ! nvh264dec ! video/x-raw" "$cuda_branch" 0,0 0
fi
if gpu_pipeline_ready nvdec-cudamemory-lanes nvh264dec cudaupload cudaconvertscale cudadownload; then
  compare_lanes nvdec-cudamemory-lanes "${clip_frames:-0}" \
    "filesrc location=$clip ! h264parse ! nvh264dec ! video/x-raw(memory:CUDAMemory)" "$cuda_branch" 0,0 0
fi

# --- the demo ---------------------------------------------------------------
run_demo() {  # NAME BRANCH FRAMES
  local name=$1 branch=$2 n=$3
  begin "$name"
  limit 600 "$bin/gpufan-demo" --branch "$branch" --frames "$n" --lanes 2 \
    --output "$work/$name.mkv" >"$out/$name.txt" 2>&1
  local rc=$?
  cat "$out/$name.txt"
  if ((rc != 0)); then
    record "$name" failed "exit $rc: $(tail_of "$out/$name.txt")"
    return
  fi
  # The demo's speed-up is of whole runs, start-up included: not a figure
  # (gpu-bench.sh measures speed).
  record "$name" passed "$(grep -m1 -i 'output in input order' "$out/$name.txt" | sed 's/^ *//')"
}
run_demo demo-cpu cpu $((quick ? 30 : 120))
if gpu_pipeline_ready demo-cuda cudaupload cudascale cudadownload; then run_demo demo-cuda cuda 300; fi

# --- the codec probe ----------------------------------------------------------
# H100, H200 and their kin have NVDEC but no NVENC (NVIDIA's support matrix):
# the probe must say so, and require-codecs must act on it.
begin "require-codecs"
if ((!gpu)); then
  record require-codecs skipped "$no_gpu_reason"
else
  nvenc=$(device_field nvenc) nvdec=$(device_field nvdec)
  probe() {  # CODECS: exit status of a 10-frame run with require-codecs
    limit 120 "$bin/gst-launch-1.0" -q videotestsrc num-buffers=10 ! gpufanout devices=0 \
      "require-codecs=$1" name=f gpufanin name=m ! fakesink f.src_0 ! queue ! m.sink_0 \
      >"$work/probe-$1.txt" 2>&1
  }
  bad=""
  [[ $nvenc == unknown || $nvdec == unknown || -z $nvenc ]] &&
    bad="the probe could not tell (nvenc=$nvenc, nvdec=$nvdec)"
  if [[ -z $bad && $gpu_name =~ (^|[[:space:]])(H100|H200|H800|H20|A100|A800|A30)([[:space:]]|$) && $nvenc != no ]]; then
    bad="$gpu_name has no NVENC but the probe says nvenc=$nvenc"
  fi
  if [[ -z $bad ]]; then
    probe nvenc; rc_enc=$?
    probe nvdec; rc_dec=$?
    if [[ $nvenc == no ]] && { ((rc_enc == 0)) || ! grep -qi nvenc "$work/probe-nvenc.txt"; }; then
      bad="require-codecs=nvenc did not refuse a GPU without NVENC: $(tail_of "$work/probe-nvenc.txt" 3)"
    elif [[ $nvenc == yes ]] && ((rc_enc != 0)); then
      bad="require-codecs=nvenc refused a GPU with NVENC: $(tail_of "$work/probe-nvenc.txt" 3)"
    elif [[ $nvdec == yes ]] && ((rc_dec != 0)); then
      bad="require-codecs=nvdec refused a GPU with NVDEC: $(tail_of "$work/probe-nvdec.txt" 3)"
    elif [[ $nvdec == no ]] && ((rc_dec == 0)); then
      bad="require-codecs=nvdec did not refuse a GPU without NVDEC"
    fi
  fi
  if [[ -n $bad ]]; then
    record require-codecs failed "$bad"
  else
    record require-codecs passed "GPU 0 ($gpu_name): nvenc=$nvenc, nvdec=$nvdec; require-codecs acts on it"
  fi
fi

# --- where the libraries came from ------------------------------------------
begin "libraries"
# Only glibc and the NVIDIA driver may come from the machine.
system_ok='/(ld-linux-x86-64\.so\.2|lib(c|m|dl|rt|pthread|resolv|util|anl|nss_[a-z]+)\.so\.[0-9.]+|libcuda\.so[0-9.]*|libnvidia-[a-z0-9-]+\.so[0-9.]*|libnvcuvid\.so[0-9.]*|libnvrtc[-.a-z]*\.so[0-9.]*|lib(EGL|GLX|GLESv2)_nvidia\.so[0-9.]*)$'
loaded=$(cat "$work"/ld/ld.* 2>/dev/null | sed -n 's/.*calling init: //p' | sort -u)
outside=$(grep -v "^$bundle/" <<<"$loaded" | grep -vE "$system_ok" | grep . )
system_libs=$(grep -v "^$bundle/" <<<"$loaded" | grep -E "$system_ok" | tr '\n' ' ')
echo "from the machine: $system_libs"
if [[ -z $loaded ]]; then
  record libraries failed "no loader records (LD_DEBUG) to check"
elif [[ -n $outside ]]; then
  record libraries failed "loaded from outside the bundle: $(echo $outside)"
else
  record libraries passed "$(grep -c "^$bundle/" <<<"$loaded") from the bundle; from the machine only: $system_libs"
fi

# --- the report ---------------------------------------------------------------
json_file_or_null() {  # a file of ours holding nan or inf is not JSON
  if [[ -s $1 ]] && ! grep -qE '(:|\[|, )[[:space:]]*-?(nan|inf)' "$1"; then cat "$1"; else printf 'null'; fi
}

passed=0 failed=0 skipped=0
for s in "${check_status[@]}"; do
  case $s in passed) ((passed++)) ;; failed) ((failed++)) ;; *) ((skipped++)) ;; esac
done
numa=$(device_field numa_node)
{
  echo "gst-gpufan GPU suite, $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
  echo "bundle: $(sed -n 's/^made=//p' "$bundle/BUNDLE-INFO") from $(sed -n 's/^source=//p' "$bundle/BUNDLE-INFO")"
  if ((gpu)); then
    echo "GPU 0: $gpu_name, driver $gpu_driver, CUDA $gpu_cuda, PCI $gpu_pci, NUMA node (hwloc) ${numa:-?}"
    echo "NVRTC for nvcodec: ${GPUFAN_NVRTC_LIBRARY:-${GST_CUDA_NVRTC_LIBNAME:-none found}} (through ${GST_CUDA_NVRTC_LIBNAME:-nothing})"
  else
    echo "GPU: none ($no_gpu_reason)"
  fi
  echo
  echo "checks:"
  for i in "${!check_names[@]}"; do
    printf '  %-24s %-7s %4ss  %s\n' "${check_names[i]}" "${check_status[i]}" "${check_seconds[i]}" "${check_detail[i]}"
  done
  echo
  echo "figures:"
  for l in "${figure_lines[@]}"; do IFS=$'\t' read -r k v u <<<"$l"; printf '  %-32s %10s %s\n' "$k" "$v" "$u"; done
  echo
  echo "test cases: $(grep -cP '\tpassed\t' "$tests_tsv") passed, $(grep -cP '\tfailed\t' "$tests_tsv") failed, $(grep -cP '\tskipped\t' "$tests_tsv") skipped (every case: report.json)"
  grep -P '\t(failed|skipped)\t' "$tests_tsv" | awk -F'\t' '{ printf "  %-8s %s %s  %s\n", $3, $1, $2, $4 }'
  echo
  echo "total $((SECONDS - started)) s"
} >"$out/report.txt"
{
  printf '{\n  "suite": "gst-gpufan GPU suite",\n  "date": %s,\n  "host": %s,\n' \
    "$(json_string "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" "$(json_string "$(uname -n) $(uname -r)")"
  printf '  "bundle": {'
  sep=""
  while IFS='=' read -r k v; do
    [[ -n $k ]] || continue
    printf '%s%s: %s' "$sep" "$(json_string "$k")" "$(json_string "$v")"; sep=", "
  done <"$bundle/BUNDLE-INFO"
  printf '},\n  "gpu": {"present": %s, "name": %s, "driver": %s, "cuda_version": %s, "pci_bus_id": %s, "numa_node_hwloc": %s},\n' \
    "$( ((gpu)) && echo true || echo false)" "$(json_string "$gpu_name")" "$(json_string "$gpu_driver")" \
    "$(json_string "$gpu_cuda")" "$(json_string "$gpu_pci")" "$(json_string "${numa:-}")"
  printf '  "nvrtc": %s,\n' "$(json_string "${GPUFAN_NVRTC_LIBRARY:-${GST_CUDA_NVRTC_LIBNAME:-}}")"
  printf '  "devices": %s,\n' "$(json_file_or_null "$out/devices.json")"
  printf '  "h2d": %s,\n' "$(json_file_or_null "$out/h2d.json")"
  printf '  "checks": ['
  sep=""
  for i in "${!check_names[@]}"; do
    printf '%s\n    {"name": %s, "status": %s, "seconds": %s, "detail": %s}' "$sep" \
      "$(json_string "${check_names[i]}")" "$(json_string "${check_status[i]}")" \
      "${check_seconds[i]}" "$(json_string "${check_detail[i]}")"
    sep=","
  done
  printf '\n  ],\n  "figures": ['
  sep=""
  for l in "${figure_lines[@]}"; do
    IFS=$'\t' read -r k v u <<<"$l"
    printf '%s\n    {"name": %s, "value": %s, "unit": %s}' "$sep" "$(json_string "$k")" "$v" "$(json_string "$u")"
    sep=","
  done
  printf '\n  ],\n  "tests": ['
  sep=""
  while IFS=$'\t' read -r b n s m; do
    printf '%s\n    {"binary": %s, "name": %s, "status": %s, "message": %s}' "$sep" \
      "$(json_string "$b")" "$(json_string "$n")" "$(json_string "$s")" "$(json_string "$m")"
    sep=","
  done <"$tests_tsv"
  printf '\n  ],\n  "summary": {"passed": %d, "failed": %d, "skipped": %d}\n}\n' "$passed" "$failed" "$skipped"
} >"$out/report.json"

echo
cat "$out/report.txt"
echo "report: $out/report.txt, $out/report.json"
# Nothing after this line: it is the verdict.
if ((skipped > 0)); then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
((failed == 0))
