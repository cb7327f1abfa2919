#!/usr/bin/env bash
# The main job: process a video through gpufanout/gpufanin across CPU lanes
# (one per CPU, at least 2) and compare with one lane. Builds first
# (scripts/setup.sh), writes out/gpufan-demo.mkv, then decodes it back with
# gst-launch-1.0 to show that it plays.
#
# Arguments go to the demo program, e.g.:
#   bash scripts/run-demo.sh --lanes 4 --frames 600
#   bash scripts/run-demo.sh --input movie.mp4 --sigma 2
#   bash scripts/run-demo.sh --help
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}

bash scripts/setup.sh

demo=$build_dir/examples/gpufan-demo
plugin_dir=$build_dir/gst
[[ -x $demo ]] || { echo "run-demo: $demo was not built" >&2; exit 1; }
ls "$plugin_dir"/libgstgpufan.so >/dev/null 2>&1 ||
  { echo "run-demo: the plugin $plugin_dir/libgstgpufan.so was not built" >&2; exit 1; }

# Our plugin from the build tree; a registry of its own so that the user's
# registry cache is left alone.
export GST_PLUGIN_PATH=$root/$plugin_dir${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}
export GST_REGISTRY=$root/$build_dir/demo.registry

output=out/gpufan-demo.mkv
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    -o | --output) output=${args[i + 1]:-$output} ;;
    --output=*) output=${args[i]#--output=} ;;
    -h | --help | --help-*) exec "$demo" "$@" ;;
  esac
done
mkdir -p "$(dirname "$output")"

echo "run-demo: $demo ${args[*]}"
"$demo" --output "$output" "$@"

# Independent check with the stock tools: the file demuxes and decodes.
echo
echo "run-demo: decoding $output with gst-launch-1.0"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if gst-launch-1.0 filesrc location="$output" ! matroskademux ! jpegdec \
    ! fakesink silent=false -v >"$log" 2>&1; then
  frames=$(grep -c 'last-message = chain' "$log" || true)
else
  frames=0
  tail -5 "$log" >&2
fi
if ((frames > 0)); then
  echo "run-demo: $output plays: $frames frames decoded (play it: gst-launch-1.0 playbin uri=file://$(realpath "$output"))"
else
  echo "run-demo: ERROR: $output does not decode" >&2
  exit 1
fi
