#!/usr/bin/env bash
# Stages `meson install` of a build directory in a temporary DESTDIR and checks
# what a real install would give, without touching the system:
#   1. the plugin lands in the system GStreamer's plugin directory (pkg-config
#      gstreamer-1.0 pluginsdir) when the prefix is the default one;
#   2. GStreamer loads it from there with no GST_PLUGIN_PATH, and the plugin
#      finds the staged libgpufan the way it would after a real install
#      (RUNPATH, or the loader's own directories), not a copy elsewhere;
#   3. `pkg-config --cflags --libs gpufan` builds a program that runs against
#      the staged libgpufan;
#   4. the gpufan-stats command is in <prefix>/bin and runs.
#
# Usage: check-install.sh BUILD_DIR PREFIX PLUGINDIR_OPTION PROGRAM.cpp
# Environment: CXX (the build's C++ compiler command).
set -euo pipefail

build=$1 prefix=$2 plugindir_option=$3 program=$4
stage=$(mktemp -d "${TMPDIR:-/tmp}/gpufan-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
# The one staged file named $1, as its path after a real install.
installed() {
  local found
  mapfile -t found < <(cd "$root" && find . -name "$1")
  ((${#found[@]} == 1)) || fail "expected one $1 in the install, found ${#found[@]}"
  printf '%s\n' "${found[0]#.}"
}

meson install -C "$build" --no-rebuild --destdir "$root" >"$stage/install.log" 2>&1 ||
  { cat "$stage/install.log" >&2; fail "meson install --destdir failed"; }

# 1. Where the plugin went.
plugin=$(installed libgstgpufan.so)
plugindir=$(dirname "$plugin")
gst_prefix=$(pkg-config --variable=prefix gstreamer-1.0)
gst_pluginsdir=$(pkg-config --variable=pluginsdir gstreamer-1.0)
gst_libdir=$(pkg-config --variable=libdir gstreamer-1.0)
echo "plugin: $plugin"
if [[ -z $plugindir_option && ($prefix == /usr/local || $prefix == "$gst_prefix") ]]; then
  [[ $plugindir == "$gst_pluginsdir" ]] ||
    fail "plugin installed to $plugindir, but GStreamer loads plugins from $gst_pluginsdir"
else
  echo "prefix $prefix, plugindir '$plugindir_option': not the default install, location not checked"
fi

# 2. GStreamer loads it from there alone. The loader searches GStreamer's own
# libdir in a real install; here that directory is staged, so it is named.
libgpufan=$(installed libgpufan.so.0)
libdir=$(dirname "$libgpufan")
loader_path=()
[[ $libdir == "$gst_libdir" ]] && loader_path=("LD_LIBRARY_PATH=$root$libdir")
gst_env=(env -i "PATH=$PATH" "HOME=$stage" "${loader_path[@]}"
  "GST_REGISTRY_1_0=$stage/registry.bin" "GST_PLUGIN_SYSTEM_PATH_1_0=$root$plugindir")
resolved=$("${gst_env[@]}" ldd "$root$plugin" | awk '$1 == "libgpufan.so.0" && $3 != "not" { print $3 }')
[[ $resolved -ef $root$libgpufan ]] ||
  fail "the installed plugin would load libgpufan from '${resolved:-nowhere}', not $libgpufan"
for element in gpufanout gpufanin; do
  "${gst_env[@]}" gst-inspect-1.0 "$element" >"$stage/inspect.txt" 2>&1 ||
    { cat "$stage/inspect.txt" >&2; fail "gst-inspect-1.0 $element: not found in $plugindir"; }
done
grep -q "Filename *$root$plugin\$" "$stage/inspect.txt" ||
  fail "gst-inspect-1.0 shows another file than $plugin"
echo "gst-inspect-1.0 finds gpufanout and gpufanin in $plugindir"

# 3. A program against the staged library, through pkg-config.
pc=$(installed gpufan.pc)
read -ra cxx <<<"${CXX:-c++}"
read -ra flags < <(PKG_CONFIG_PATH="$root$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$root" \
  pkg-config --cflags --libs gpufan)
"${cxx[@]}" -std=c++17 -o "$stage/use-gpufan" "$program" "${flags[@]}" ||
  fail "$(basename "$program") does not build with: pkg-config --cflags --libs gpufan (${flags[*]})"
LD_LIBRARY_PATH="$root$libdir" "$stage/use-gpufan" || fail "the program against libgpufan failed"
# 4. The gpufan-stats command.
tool=$(installed gpufan-stats)
[[ $tool == "$prefix/bin/gpufan-stats" && -x $root$tool ]] ||
  fail "gpufan-stats installed as $tool, expected an executable $prefix/bin/gpufan-stats"
"$root$tool" --help >/dev/null || fail "$tool --help failed"
echo "install: passed"
