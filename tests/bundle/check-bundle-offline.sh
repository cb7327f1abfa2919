#!/usr/bin/env bash
# The GPU bundle runs from itself alone: pack it from this build
# (scripts/gpu-bundle.sh --no-build), unpack it into a clean directory, and
# run it in a network namespace with no network, a mount namespace where the
# system's GStreamer plugin folders are empty, and a bare environment.
#
#   check-bundle-offline.sh SOURCE_DIR BUILD_DIR suite HWLOC_PLUGIN
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
*) fail "unknown mode '$mode' (suite)" ;;
esac
