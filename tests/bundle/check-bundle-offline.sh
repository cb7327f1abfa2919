#!/usr/bin/env bash
# The GPU bundle runs from itself alone: pack it from this build
# (scripts/gpu-bundle.sh --no-build), unpack it into a clean directory, and
# run it in a network namespace with no network, a mount namespace where the
# system's GStreamer plugin folders are empty, and a bare environment.
#
#   check-bundle-offline.sh SOURCE_DIR BUILD_DIR suite HWLOC_PLUGIN
#   check-bundle-offline.sh SOURCE_DIR BUILD_DIR bench
#
# suite: gpu-suite.sh. Every CPU part must pass from the bundle (the suite's
#   own "libraries" check fails on any library loaded from outside it but
#   glibc and the driver), and on this machine without a GPU every GPU part
#   must skip with "no GPU". The machine offers hwloc plugins of its own, as
#   the GPU machine did: its hwloc plugin folder (bind-mounted over the one
#   compiled into libhwloc, where that exists) and HWLOC_PLUGINS_PATH both
#   name a folder with HWLOC_PLUGIN (a dummy hwloc_*.so) and copies of the
#   system's hwloc plugins (libhwloc-plugins). Checked first: the bundle's
#   libhwloc, left to itself, loads them; then the suite must not.
# bench: gpu-bench.sh offline says "no GPU" and exits 0. Then, not offline
#   (it needs the system's avdec_h264), its --cpu-stand-in self-check on a
#   small clip: every figure measured, the table, the JSON and a valid PNG;
#   and with elements missing, the table says so.
# Exit 77 (skipped) where the namespaces cannot be made.
set -euo pipefail
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
mode=$3
fail() { echo "check-bundle-offline: FAIL: $*" >&2; exit 1; }

# Root can make the namespaces directly; a user maps itself to root in a user
# namespace first.
ns=(unshare --net --mount)
[[ $(id -u) -eq 0 ]] || ns+=(--map-root-user)
if ! why=$("${ns[@]}" true 2>&1); then
  echo "check-bundle-offline: skipped: cannot make namespaces here (${ns[*]}): $why"
  exit 77
fi

tmp=$(mktemp -d /tmp/gpufan-bundle-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

cd "$source_dir"
BUILD_DIR=$build_dir bash scripts/gpu-bundle.sh --no-build --out "$tmp/made"
tarball=$tmp/made/gpufan-gpu-bundle.tar.gz
[[ -f $tarball ]] || fail "no tarball"
packed=$(du -m "$tarball" | cut -f1)
((packed <= 40)) || fail "the tarball is $packed MiB (target: 40 MiB at most)"

mkdir "$tmp/machine" "$tmp/empty"
tar -C "$tmp/machine" -xzf "$tarball"
rm -rf "$tmp/made"  # nothing of the packing side is left to lean on
bundle=$tmp/machine/gpufan-gpu-bundle

# The machine's hwloc plugins: the folder compiled into the bundle's libhwloc.
hwloc_default=$(strings "$bundle"/lib/libhwloc.so.* 2>/dev/null | grep -m1 -E '^/.*/hwloc$' || true)
hwloc_machine=$tmp/hwloc-machine
mkdir "$hwloc_machine"

# Inside: the system's GStreamer plugin folders mounted empty (checked), the
# machine's hwloc plugin folder showing $hwloc_machine, no network interface
# but lo (checked), then the command ("VAR=VALUE ... COMMAND ARGS").
{
  echo 'set -e'
  for d in /usr/lib/*/gstreamer-1.0 /usr/lib/*/gstreamer1.0 /usr/local/lib/*/gstreamer-1.0; do
    [[ -d $d ]] || continue
    echo "mount --bind '$tmp/empty' '$d'; [ -z \"\$(ls -A '$d')\" ]"
  done
  if [[ -n $hwloc_default && -d $hwloc_default ]]; then
    echo "mount --bind '$hwloc_machine' '$hwloc_default'"
  fi
  echo "if [ \"\$(awk 'NR > 2 { print \$1 }' /proc/net/dev)\" != lo: ]; then echo 'network interfaces besides lo'; exit 3; fi"
  echo 'exec env "$@"'
} >"$tmp/inside.sh"
offline() {  # [VAR=VALUE...] COMMAND [ARGS...]
  env -i PATH=/usr/bin:/bin HOME="$tmp" LANG=C.UTF-8 "${ns[@]}" bash "$tmp/inside.sh" "$@"
}

# The hwloc plugins from FOLDER that the bundle's gpufan-devices (libgpufan:
# hwloc) loads ("calling init") with the bundle's libraries alone, into
# $tmp/NAME/loads.
hwloc_loads() {  # NAME FOLDER [VAR=VALUE...]
  local name=$1 folder=$2
  shift 2
  mkdir -p "$tmp/$name"
  offline "$@" LD_LIBRARY_PATH="$bundle/lib" LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/$name/ld" \
    "$bundle/bin/gpufan-devices" >"$tmp/$name/out.txt" 2>&1 ||
    fail "$name: gpufan-devices failed: $(tail -3 "$tmp/$name/out.txt")"
  cat "$tmp/$name"/ld.* 2>/dev/null | sed -n "s|.*calling init: \\($folder/hwloc_[^ ]*\\)|\\1|p" |
    sort -u >"$tmp/$name/loads"
  [[ -s $tmp/$name/loads ]] ||
    fail "$name: the bundle's libhwloc loaded no plugin from $folder: this check would prove nothing"
  echo "$name: without the bundle's environment, libhwloc loads $(tr '\n' ' ' <"$tmp/$name/loads")"
}

case $mode in
suite)
  cp "$4" "$hwloc_machine/"
  cp /usr/lib/*/hwloc/hwloc_*.so "$hwloc_machine/" 2>/dev/null || true
  echo "the machine's hwloc plugins: $(cd "$hwloc_machine" && echo *) (in ${hwloc_default:-no default folder} and HWLOC_PLUGINS_PATH)"
  # The machine's plugins reach a libhwloc left to itself, both ways, so
  # the suite's "libraries" check below would see them.
  if [[ -n $hwloc_default && -d $hwloc_default ]]; then
    hwloc_loads control-default "$hwloc_default"
  fi
  hwloc_loads control-env "$hwloc_machine" HWLOC_PLUGINS_PATH="$hwloc_machine"

  set +e
  offline HWLOC_PLUGINS_PATH="$hwloc_machine" bash "$bundle/gpu-suite.sh" --quick --out "$tmp/report" 2>&1 |
    tee "$tmp/suite.log"
  rc=${PIPESTATUS[0]}
  set -e
  ((rc == 0)) || fail "gpu-suite.sh exited $rc"
  /usr/bin/python3 "$source_dir/tests/bundle/check-suite-report.py" "$tmp/report/report.json"
  ;;

bench)
  # Offline, on a machine without a GPU: "no GPU", exit 0.
  set +e
  offline bash "$bundle/gpu-bench.sh" --out "$tmp/bench-none" >"$tmp/bench-none.log" 2>&1
  rc=$?
  set -e
  cat "$tmp/bench-none.log"
  ((rc == 0)) || fail "gpu-bench.sh exited $rc without a GPU"
  grep -q 'no GPU' "$tmp/bench-none.log" || fail "gpu-bench.sh did not say \"no GPU\""

  # The self-check: every pipeline, with CPU elements in place of nvcodec's.
  libav=$(compgen -G "/usr/lib/*/gstreamer-1.0/libgstlibav.so" | head -1 || true)
  [[ -n $libav ]] || fail "no avdec_h264 here (gstreamer1.0-libav; scripts/setup.sh installs it)"
  mkdir "$tmp/libav"
  ln -s "$libav" "$tmp/libav/"
  clip=$tmp/clip.h264
  gst-launch-1.0 -q videotestsrc num-buffers=240 pattern=smpte horizontal-speed=4 \
    ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 \
    ! x264enc speed-preset=superfast bitrate=500 key-int-max=60 option-string=scenecut=0:open-gop=0 \
    ! h264parse ! video/x-h264,stream-format=byte-stream ! filesink location="$clip"
  stand_in=(bash "$bundle/gpu-bench.sh" --cpu-stand-in --clip "$clip" --frames 300 --frame-size 320x240)
  set +e
  env -i PATH=/usr/bin:/bin HOME="$tmp" LANG=C.UTF-8 GPUFAN_BENCH_PLUGIN_PATH="$tmp/libav" \
    "${stand_in[@]}" --out "$tmp/bench" 2>&1 | tee "$tmp/bench.log"
  rc=${PIPESTATUS[0]}
  ((rc == 0)) || fail "gpu-bench.sh --cpu-stand-in exited $rc"
  env -i PATH=/usr/bin:/bin HOME="$tmp" LANG=C.UTF-8 GPUFAN_BENCH_PLUGIN_PATH="$tmp/libav" \
    GPUFAN_BENCH_MISSING=avdec_h264,imagefreeze "${stand_in[@]}" --out "$tmp/bench-missing" \
    >"$tmp/bench-missing.log" 2>&1
  rc=$?
  set -e
  ((rc == 1)) || fail "gpu-bench.sh with every figure's element missing exited $rc, want 1"
  /usr/bin/python3 - "$tmp" <<'PY'
import json, struct, sys, zlib
tmp = sys.argv[1]
errors = []
bench = json.load(open(f"{tmp}/bench/bench.json"))
figures = bench["figures"]
keys = [f["key"] for f in figures]
want = ["one-decoder", "reference-2", "reference-4", "chunk-cuda-2", "chunk-system-4",
        "frame-plain", "frame-lanes-1", "frame-lanes-2", "frame-lanes-4",
        "nvdec-plain", "nvdec-lanes-1", "nvdec-lanes-2"]
errors += [f"no figure {k}" for k in want if k not in keys]
for f in figures:
    if f["status"] != "measured" or not f["fps"] or f["fps"] <= 0:
        errors.append(f"{f['key']}: {f['status']} ({f['note']})")
    elif len(f["fps_runs"]) < 2 or f["startup_s"] is None:
        errors.append(f"{f['key']}: runs {f['fps_runs']}, start-up {f['startup_s']}")
    if f["base"] and f["status"] == "measured" and f["vs_base"] is None:
        errors.append(f"{f['key']}: no ratio to {f['base']}")
log = open(f"{tmp}/bench.log").read()
errors += [f"the table has no line for '{f['label']}'" for f in figures if f["label"] not in log]
png = open(f"{tmp}/bench/bench.png", "rb").read()
if png[:8] != b"\x89PNG\r\n\x1a\n":
    errors.append("bench.png is no PNG")
else:
    width, height = struct.unpack(">II", png[16:24])
    idat = png[png.index(b"IDAT") + 4:png.index(b"IEND") - 8]
    if len(zlib.decompress(idat)) != height * (1 + 3 * width):
        errors.append("bench.png's pixels do not fit its size")
# the traced run: a complete trace, and each lane's time split in the table
trace = bench.get("trace", "")
if not trace.endswith(".json"):
    errors.append(f"no trace: {trace}")
else:
    events = json.load(open(trace))["traceEvents"]
    if not any(e.get("name") == "push" and e.get("ph") == "X" for e in events):
        errors.append(f"{trace} has no push span")
if "where the time goes" not in log or "lane 0: push" not in log:
    errors.append("the table has no time split per lane")
missing = json.load(open(f"{tmp}/bench-missing/bench.json"))["figures"]
missing_log = open(f"{tmp}/bench-missing.log").read()
for f in missing:
    if f["status"] != "not measured" or not f["note"].startswith("no "):
        errors.append(f"with elements missing, {f['key']}: {f['status']} ({f['note']})")
if "not measured: no avdec_h264" not in missing_log or "not measured: no imagefreeze" not in missing_log:
    errors.append("with elements missing, the table does not say which")
if errors:
    print("check-bundle-offline: FAIL:\n  " + "\n  ".join(errors))
    sys.exit(1)
print(f"check-bundle-offline: gpu-bench.sh said 'no GPU' offline; its CPU stand-in "
      f"measured {len(figures)} figures and wrote the table, JSON and PNG")
PY
  ;;
*) fail "unknown mode '$mode' (suite or bench)" ;;
esac
