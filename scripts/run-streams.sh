#!/usr/bin/env bash
# Many live streams on shared lanes: 8 live test streams (30 fps, a pattern
# each) through one gpufanout/gpufanin pair on 2 CPU lanes, a 9th stream
# added and one removed while playing, every frame checked byte for byte
# against its input (complete, in order, its own stream's). Builds first
# (scripts/setup.sh), then runs build/examples/gpufan-streams; its exit
# status is the verdict.
#
# Arguments go to the program, e.g.:
#   bash scripts/run-streams.sh --streams 12 --seconds 20
#   bash scripts/run-streams.sh --devices auto       # the GPUs, where present
#   bash scripts/run-streams.sh --help
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}

for arg in "$@"; do
  case $arg in
    -h | --help | --help-*) help=1 ;;
  esac
done

bash scripts/setup.sh

program=$build_dir/examples/gpufan-streams
plugin_dir=$build_dir/gst
[[ -x $program ]] || { echo "run-streams: $program was not built" >&2; exit 1; }
ls "$plugin_dir"/libgstgpufan.so >/dev/null 2>&1 ||
  { echo "run-streams: the plugin $plugin_dir/libgstgpufan.so was not built" >&2; exit 1; }

# Our plugin from the build tree; a registry of its own so that the user's
# registry cache is left alone.
export GST_PLUGIN_PATH=$root/$plugin_dir${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}
export GST_REGISTRY=$root/$build_dir/streams.registry

[[ -n ${help:-} ]] && exec "$program" "$@"
echo "run-streams: $program --streams 8 $*"
exec "$program" --streams 8 "$@"
