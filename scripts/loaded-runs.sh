#!/usr/bin/env bash
# Flakiness check: runs the element suites (`meson test --suite gst`) N times
# in a row while `stress-ng --cpu 2` keeps two CPUs busy, and counts the runs
# that passed. No test outcome may depend on the machine's speed, so every
# run must pass (docs/testing.md).
#
# Usage: bash scripts/loaded-runs.sh [N]        (N: runs, default 20)
# On a shared machine: nice -n 10 bash scripts/loaded-runs.sh 20 (stress-ng
# and the tests inherit the same niceness, so they compete as equals).
#
# Environment:
#   BUILD_DIR          build directory (default: build, under the repo root)
#   GPUFAN_LOAD_CPUS   stress-ng CPU workers (default: 2)
#   GPUFAN_SUITES      meson test suites to run (default: gst)
#   GPUFAN_TEST_NICE   run the tests this much nicer than stress-ng (default
#                      0; 19 starves them, a harsher check)
# Anything else in the environment reaches the test binaries, e.g.
# GTEST_SHUFFLE=1 to run each binary's tests in a new order every run.
#
# Prints one line per run, then `N runs: N passed, N failed`; the exit status
# is non-zero when a run failed. The meson log of each failed run is kept in
# $BUILD_DIR/loaded-runs/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}
runs=${1:-20}
cpus=${GPUFAN_LOAD_CPUS:-2}
test_nice=${GPUFAN_TEST_NICE:-0}
read -r -a suites <<<"${GPUFAN_SUITES:-gst}"

die() { printf 'loaded-runs: ERROR: %s\n' "$*" >&2; exit 1; }

[[ $runs =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, not '$runs'"
[[ $cpus =~ ^[1-9][0-9]*$ ]] || die "GPUFAN_LOAD_CPUS must be a positive number"
[[ $test_nice =~ ^([0-9]|1[0-9])$ ]] || die "GPUFAN_TEST_NICE must be 0..19"
command -v stress-ng >/dev/null ||
  die "stress-ng is not installed (bash scripts/setup.sh installs it)"
[[ -f $build_dir/build.ninja ]] ||
  die "no build in $build_dir (bash scripts/setup.sh builds it)"

suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done

logs=$build_dir/loaded-runs
rm -rf "$logs"
mkdir -p "$logs"

# Build before the load starts; the runs themselves do not rebuild.
ninja -C "$build_dir" >"$logs/ninja.txt" 2>&1 || {
  tail -n 30 "$logs/ninja.txt" >&2
  die "build failed (ninja -C $build_dir)"
}

stress_pid=
stop_stress() {
  if [[ -n $stress_pid ]]; then
    kill "$stress_pid" 2>/dev/null || true
    wait "$stress_pid" 2>/dev/null || true
    stress_pid=
  fi
}
trap stop_stress EXIT
trap 'stop_stress; exit 130' INT TERM

stress-ng --cpu "$cpus" --quiet &
stress_pid=$!
printf 'loaded-runs: %s runs of suite(s) %s under stress-ng --cpu %s (tests at nice +%s)\n' \
  "$runs" "${suites[*]}" "$cpus" "$test_nice"

passed=0
failed=0
for ((i = 1; i <= runs; i++)); do
  kill -0 "$stress_pid" 2>/dev/null || die "stress-ng is no longer running"
  start=$SECONDS
  if nice -n "$test_nice" meson test -C "$build_dir" --no-rebuild \
    "${suite_args[@]}" >"$logs/meson-output.txt" 2>&1; then
    passed=$((passed + 1))
    printf 'run %d/%d: passed (%d s)\n' "$i" "$runs" $((SECONDS - start))
  else
    failed=$((failed + 1))
    cp "$build_dir/meson-logs/testlog.txt" "$logs/run-$i-testlog.txt" 2>/dev/null || true
    cp "$logs/meson-output.txt" "$logs/run-$i-output.txt"
    # The failed GoogleTest cases, else the failed meson tests.
    what=$(grep -ahE '^\[  FAILED  \] [A-Za-z_]' "$logs/run-$i-testlog.txt" 2>/dev/null |
      sed -E 's/^\[  FAILED  \] //; s/ \(.*//' | sort -u | tr '\n' ' ' || true)
    [[ -n $what ]] || what=$(grep -aE ' (FAIL|TIMEOUT|ERROR) ' "$logs/run-$i-output.txt" |
      sed -E 's/^ *[0-9]+\/[0-9]+ //; s/ +/ /g' | tr '\n' ';' || true)
    printf 'run %d/%d: FAILED (%d s): %s\n' "$i" "$runs" $((SECONDS - start)) "$what"
  fi
done
rm -f "$logs/meson-output.txt"

printf '%d runs: %d passed, %d failed\n' "$runs" "$passed" "$failed"
((failed == 0))
