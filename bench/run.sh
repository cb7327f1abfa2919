#!/usr/bin/env bash
# Build (scripts/setup.sh) and run the benchmark: gpufanout/gpufanin against
# roundrobin ! queue ! funnel. Writes out/bench.json, out/bench.txt (the
# table) and out/bench.png (the plot, when matplotlib is there).
#
#   bash bench/run.sh            # full: 5 repetitions, callgrind (~15 min)
#   bash bench/run.sh --quick    # about a minute
#   bash bench/run.sh --only uneven --reps 3   # any gpufan-bench option
#
# Environment: BUILD_DIR (default build), OUT_DIR (default out).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}
out_dir=${OUT_DIR:-out}

BUILD_DIR=$build_dir bash scripts/setup.sh

# Optional tools: the plot (matplotlib) and the instruction counts (valgrind).
optional=()
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || optional+=(python3-matplotlib)
command -v valgrind >/dev/null || optional+=(valgrind)
if ((${#optional[@]})) && [[ $(id -u) -eq 0 ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends \
    "${optional[@]}" || echo "run.sh: could not install ${optional[*]}; going on" >&2
fi
mkdir -p "$out_dir"

export GST_PLUGIN_PATH="$root/$build_dir/gst"
"$build_dir/bench/gpufan-bench" --json "$out_dir/bench.json" "$@" |
  tee "$out_dir/bench.txt"

# The Debian interpreter first: python3-matplotlib installs there.
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import matplotlib' 2>/dev/null; then
    exec "$py" bench/plot.py "$out_dir/bench.json" "$out_dir/bench.png"
  fi
done
echo "run.sh: no plot: matplotlib is missing (apt-get install python3-matplotlib)," \
  "then: python3 bench/plot.py $out_dir/bench.json $out_dir/bench.png" >&2
