#!/usr/bin/env bash
# Prepare a Debian 12 machine to build gst-gpufan, run its tests and the demo:
# install the packages it needs (only when one is missing), then configure
# build/ with meson and build it with ninja.
#
# Idempotent: a second run skips apt entirely and only re-runs meson and
# ninja (seconds). Installing packages needs root; when everything is already
# installed any user can run it.
#
# Environment:
#   BUILD_DIR           build directory (default: build, under the repo root)
#   GPUFAN_MESON_ARGS   extra arguments for `meson setup`
#   GPUFAN_SKIP_BUILD=1 install packages and configure only, do not run ninja
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

# Every package exists in Debian 12 (bookworm) main.
packages=(
  meson                             # build system (pulls python3)
  ninja-build
  pkg-config
  g++                               # C++17 compiler
  libgstreamer1.0-dev               # gstreamer-1.0, -base, -check (GstHarness)
  libgstreamer-plugins-base1.0-dev  # gstreamer-video-1.0
  gstreamer1.0-tools                # gst-launch-1.0, gst-inspect-1.0
  gstreamer1.0-plugins-base         # videotestsrc, videoconvert, decodebin
  gstreamer1.0-plugins-good         # jpegenc/jpegdec, matroskamux/demux
  gstreamer1.0-plugins-bad          # gaussianblur (gaudieffects), for the demo
  gstreamer1.0-plugins-ugly         # x264enc: encoders in chunk-mode lanes (tests, examples, bench)
  gstreamer1.0-libav                # avdec_h264: decoders in lanes, checking encoded output
  libffmpeg-nvenc-dev               # ffnvcodec: CUDA driver API types (libcuda is loaded at run time)
  libhwloc-dev                      # NUMA topology, thread binding, node-bound memory
  libhwloc-plugins                  # foreign hwloc plugins the bundle must not load (test gpu-bundle-offline)
  libgtest-dev                      # GoogleTest
  cppcheck                          # static checker run by run-tests.sh
  clang-format                      # formatter (.clang-format)
  python3                           # scripts/summarize-tests.py
  python3-gst-1.0                   # PyGObject + GStreamer overrides: examples/python, its test
  python3-prometheus-client         # OpenMetrics parser: tests/python/scrape_metrics.py
  python3-yaml                      # YAML parser: tests/deploy/check-manifests.py
  stress-ng                         # CPU load for scripts/loaded-runs.sh (flakiness runs)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  log "all ${#packages[@]} packages installed; skipping apt"
else
  log "missing packages: ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    die "not root and these packages are missing: ${missing[*]}
       run this script as root (or: sudo apt-get install ${missing[*]})"
  fi
  [[ -r /etc/debian_version ]] || die "this script expects Debian 12 (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-q -o DPkg::Lock::Timeout=600)
  "${sudo[@]}" apt-get "${apt_opts[@]}" update ||
    die "apt-get update failed (network or sources.list?)"
  "${sudo[@]}" apt-get "${apt_opts[@]}" install -y --no-install-recommends \
    "${missing[@]}" || die "apt-get install failed for: ${missing[*]}"
  for p in "${missing[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      die "package $p is still not installed after apt-get install"
  done
  log "installed: ${missing[*]}"
fi

# Tests and examples are features that default to auto; ask for them
# explicitly so that a missing dependency fails here instead of silently
# building no tests.
meson_args=(-Dtests=enabled -Dexamples=enabled)
# shellcheck disable=SC2206  # word splitting is wanted
[[ -n ${GPUFAN_MESON_ARGS:-} ]] && meson_args+=($GPUFAN_MESON_ARGS)

if [[ -f $build_dir/meson-private/coredata.dat ]]; then
  log "meson setup --reconfigure $build_dir"
  meson setup --reconfigure "$build_dir" "${meson_args[@]}" >"$build_dir/setup.log" 2>&1 || {
    cat "$build_dir/setup.log" >&2
    die "meson setup --reconfigure $build_dir failed"
  }
else
  log "meson setup $build_dir"
  mkdir -p "$build_dir"
  meson setup "$build_dir" "${meson_args[@]}" >"$build_dir/setup.log" 2>&1 || {
    cat "$build_dir/setup.log" >&2
    die "meson setup $build_dir failed"
  }
fi

if [[ ${GPUFAN_SKIP_BUILD:-0} == 1 ]]; then
  log "GPUFAN_SKIP_BUILD=1: not building"
  exit 0
fi

log "ninja -C $build_dir"
ninja -C "$build_dir" || die "build failed (ninja -C $build_dir)"
log "done"
