#!/usr/bin/env bash
# Pack the GPU suite and the GPU benchmark for a CUDA machine that has the
# NVIDIA driver and nothing else (no GStreamer, no hwloc, no package access).
# Run it on a Debian 12 machine with package access; carry the tarball over,
# then there:
#
#   tar xzf gpufan-gpu-bundle.tar.gz && bash gpufan-gpu-bundle/gpu-suite.sh
#   bash gpufan-gpu-bundle/gpu-bench.sh
#
#   bash scripts/gpu-bundle.sh [--out DIR] [--no-build] [--no-tarball]
#
# Builds the project (scripts/setup.sh, which installs what is missing), then
# writes DIR/gpufan-gpu-bundle/ (default DIR: out/; about 50 MiB) and
# DIR/gpufan-gpu-bundle.tar.gz:
#   bin/       the GPU test binaries (test-lib-cuda, test-devices,
#              test-cuda-memory), the
#              benchmark gpufan-h2d-bench, gpufan-devices, gpufan-demo,
#              gst-launch-1.0 and gst-inspect-1.0
#   lib/       libgpufan and every shared library those programs and the
#              plugins load, found with ldd from the files themselves, except
#              glibc and the NVIDIA driver, which come from the machine
#   lib/gstreamer-1.0/  the plugin and the GStreamer plugins that provide
#              the elements the suite and the benchmark use (--list-elements)
#   lib/hwloc/ hwloc's plugin folder (HWLOC_PLUGINS_PATH): none, so that
#              libhwloc loads no plugin of the machine's
#   libexec/gst-plugin-scanner
#   lib/libgpufan-nvrtc-compat.so  lets GStreamer 1.22's CUDA kernels compile
#              with the machine's NVRTC 13 (tests/bundle/nvrtc-compat.cpp)
#   share/gpufan/clip.h264  an H.264 clip made here with x264enc (the suite's
#              NVDEC path: 720p, 120 frames)
#   share/gpufan/bench-clip.h264  the benchmark's: 1080p, 1200 frames,
#              4 Mbit/s, GOP 60, closed, byte-stream (about 20 MB; made once
#              per build folder, then taken from BUILD_DIR/gpu-bundle-clips)
#   gpu-suite.sh, gpu-bench.sh, gpu-bench-plot.py, gpu-common.sh (what both
#              scripts share), BUNDLE-INFO (what was packed, from where,
#              glibc version)
#
# Environment: BUILD_DIR (default build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}
out=out
build=1
tarball=1
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --no-build) build=0; shift ;;      # use what $BUILD_DIR has
    --no-tarball) tarball=0; shift ;;
    -h | --help) sed -n '2,38p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf 'gpu-bundle: %s\n' "$*"; }
die() { printf 'gpu-bundle: ERROR: %s\n' "$*" >&2; exit 1; }

if ((build)); then bash scripts/setup.sh; fi
build_dir=$(cd "$build_dir" 2>/dev/null && pwd) || die "no build directory ${BUILD_DIR:-build} (bash scripts/setup.sh)"

# The build's own files the suite runs.
declare -A programs=(
  [test-lib-cuda]=$build_dir/tests/lib/test-lib-cuda
  [test-devices]=$build_dir/tests/gst/test-devices
  [test-cuda-memory]=$build_dir/tests/gst/test-cuda-memory
  [gpufan-h2d-bench]=$build_dir/bench/gpufan-h2d-bench
  [gpufan-devices]=$build_dir/examples/gpufan-devices
  [gpufan-demo]=$build_dir/examples/gpufan-demo
)
for p in "${!programs[@]}"; do
  [[ -x ${programs[$p]} ]] ||
    die "${programs[$p]} is missing: build with CUDA, tests and examples (bash scripts/setup.sh)"
done
plugin=$build_dir/gst/libgstgpufan.so
[[ -f $plugin ]] || die "$plugin is missing (bash scripts/setup.sh)"
nvrtc_compat=$build_dir/tests/bundle/libgpufan-nvrtc-compat.so
[[ -f $nvrtc_compat ]] || die "$nvrtc_compat is missing (bash scripts/setup.sh)"
for t in gst-launch-1.0 gst-inspect-1.0; do
  command -v "$t" >/dev/null || die "$t is missing (apt-get install gstreamer1.0-tools)"
done
scanner=$(pkg-config --variable=pluginscannerdir gstreamer-1.0 2>/dev/null || true)/gst-plugin-scanner
[[ -x $scanner ]] || scanner=$(compgen -G "/usr/lib/*/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner" | sed -n 1p || true)
[[ -x $scanner ]] || die "gst-plugin-scanner not found"

mkdir -p "$out"
out=$(cd "$out" && pwd)
dest=$out/gpufan-gpu-bundle
rm -rf "$dest" "$out/gpufan-gpu-bundle.tar.gz"
mkdir -p "$dest"/{bin,lib/gstreamer-1.0,lib/hwloc,libexec,share/gpufan}

# Our plugin beside the system's, in a registry of our own.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GST_PLUGIN_PATH_1_0=$build_dir/gst GST_REGISTRY_1_0=$tmp/registry.bin

# --- programs -----------------------------------------------------------------
for p in "${!programs[@]}"; do
  cp "${programs[$p]}" "$dest/bin/$p"
done
cp "$(command -v gst-launch-1.0)" "$(command -v gst-inspect-1.0)" "$dest/bin/"
cp "$scanner" "$dest/libexec/gst-plugin-scanner"
cp "$nvrtc_compat" "$dest/lib/"
for f in gpu-suite.sh gpu-bench.sh gpu-bench-plot.py gpu-common.sh; do
  cp "$root/scripts/$f" "$dest/$f"
done
echo "hwloc loads the hwloc_*.so plugins of this folder (HWLOC_PLUGINS_PATH, set by
gpu-common.sh) instead of the machine's: there are none." >"$dest/lib/hwloc/README"

# --- plugins: those that provide the suite's and the benchmark's elements ------
plugins=()
while read -r element; do
  file=$(gst-inspect-1.0 "$element" 2>/dev/null | awk '$1 == "Filename" && !f { print $2; f = 1 }' || true)
  [[ -n $file && -f $file ]] ||
    die "no plugin provides '$element' here (gpu-suite.sh --list-elements names it; is its package installed?)"
  plugins+=("$(realpath "$file")")
done < <(bash "$root/scripts/gpu-suite.sh" --list-elements; bash "$root/scripts/gpu-bench.sh" --list-elements)
mapfile -t plugins < <(printf '%s\n' "${plugins[@]}" | sort -u)
for f in "${plugins[@]}"; do cp "$f" "$dest/lib/gstreamer-1.0/"; done
log "${#plugins[@]} plugins: $(printf '%s\n' "${plugins[@]}" | xargs -n1 basename | sed 's/^libgst//; s/\.so$//' | tr '\n' ' ')"

# --- shared libraries: what those files load, transitively --------------------
# glibc comes from the machine (it must be as new as ours: BUNDLE-INFO), and
# so does the NVIDIA driver.
from_machine='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|lib(c|m|dl|rt|pthread|resolv|util|anl)\.so\.[0-9.]+|libcuda\.so.*|libnvidia-.*|libnvcuvid\.so.*)$'
declare -A libs=()
for f in "$dest"/bin/* "$dest"/libexec/* "$dest"/lib/gstreamer-1.0/*.so; do
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $name =~ $from_machine ]] && continue
    [[ $path == "not" ]] && die "$f needs $name, which is not found here"
    libs[$name]=$path
  done < <(LD_LIBRARY_PATH=$build_dir/lib ldd "$f")
done
for name in "${!libs[@]}"; do
  cp -L "${libs[$name]}" "$dest/lib/$name"
done
log "${#libs[@]} shared libraries"

# Debug information is not needed to run: the build's own files lose it.
strip --strip-debug "$dest"/bin/test-* "$dest"/bin/gpufan-* \
  "$dest/lib/gstreamer-1.0/libgstgpufan.so" "$dest"/lib/libgpufan*.so* 2>/dev/null || true

# --- the clips ----------------------------------------------------------------
# Made with x264enc (gstreamer1.0-plugins-ugly). A clip is kept in the build
# folder under the hash of its pipeline: packing again (CI) does not encode
# the 1080p clip again.
clip_cache=$build_dir/gpu-bundle-clips
mkdir -p "$clip_cache"
make_clip() {  # FILE PIPELINE (without the filesink)
  local key cached
  key=$(printf '%s' "$2" | sha1sum | cut -c1-16)
  cached=$clip_cache/$key.h264
  if [[ ! -s $cached ]]; then
    local words
    read -r -a words <<<"$2"
    gst-launch-1.0 -q "${words[@]}" ! filesink location="$cached.$$.part" >"$tmp/clip.log" 2>&1 ||
      die "could not make the H.264 clip (x264enc: gstreamer1.0-plugins-ugly): $(tail -3 "$tmp/clip.log")"
    mv "$cached.$$.part" "$cached"
  fi
  cp "$cached" "$1"
}
clip_frames=120
make_clip "$dest/share/gpufan/clip.h264" "videotestsrc num-buffers=$clip_frames pattern=ball \
  ! video/x-raw,format=I420,width=1280,height=720,framerate=30/1 \
  ! x264enc speed-preset=veryfast key-int-max=30 ! video/x-h264,profile=high \
  ! h264parse ! video/x-h264,stream-format=byte-stream"
# The benchmark's: a moving picture at 4 Mbit/s, an IDR every 60 frames and
# no other (no scene cuts, closed GOPs): gpufanout's chunk=keyframes cuts
# there. The PTS come from h264parse (30/1).
bench_clip_frames=1200
log "the benchmark's clip (1080p, $bench_clip_frames frames; made once per build folder)"
make_clip "$dest/share/gpufan/bench-clip.h264" "videotestsrc num-buffers=$bench_clip_frames \
  pattern=smpte horizontal-speed=4 \
  ! video/x-raw,format=I420,width=1920,height=1080,framerate=30/1 \
  ! x264enc speed-preset=superfast bitrate=4000 key-int-max=60 \
  option-string=scenecut=0:open-gop=0 ! video/x-h264,profile=high \
  ! h264parse ! video/x-h264,stream-format=byte-stream,alignment=au"

# --- what this is ---------------------------------------------------------------
glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
{
  echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "source=gst-gpufan $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "gstreamer=$(gst-launch-1.0 --version | sed -n 's/.*GStreamer \([0-9.]*\).*/\1/p' | head -1)"
  echo "glibc=$glibc"
  echo "clip_frames=$clip_frames"
  echo "bench_clip_frames=$bench_clip_frames"
  echo "plugins=${#plugins[@]}"
  echo "libraries=${#libs[@]}"
} >"$dest/BUNDLE-INFO"

size=$(du -sm "$dest" | cut -f1)
log "bundle: $dest ($size MiB unpacked)"
if ((tarball)); then
  tar -C "$out" -czf "$out/gpufan-gpu-bundle.tar.gz" gpufan-gpu-bundle
  packed=$(du -m "$out/gpufan-gpu-bundle.tar.gz" | cut -f1)
  log "tarball: $out/gpufan-gpu-bundle.tar.gz ($packed MiB)"
  ((packed <= 40)) || log "WARNING: larger than the 40 MiB target"
fi
log "on the GPU machine: tar xzf gpufan-gpu-bundle.tar.gz && bash gpufan-gpu-bundle/gpu-suite.sh"
log "  then: bash gpufan-gpu-bundle/gpu-bench.sh"
