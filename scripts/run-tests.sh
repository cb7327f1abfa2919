#!/usr/bin/env bash
# Build gst-gpufan and run everything that checks it:
#   1. scripts/setup.sh (packages, meson, ninja into build/)
#   2. the static checker (cppcheck on lib/, gst/, examples/): one case,
#      static-analysis
#   3. meson test (GoogleTest suites for lib/ and the elements)
#   3b. the same suites built without the optional back ends (-Dcuda=disabled
#      -Dhwloc=disabled, in build-minimal/): one case, minimal-build
#   3c. the lib and element suites built with AddressSanitizer and
#      UndefinedBehaviorSanitizer (build-asan/), cases named "asan: ..."
#   3d. the lib and element suites built with ThreadSanitizer (build-tsan/),
#      cases named "tsan: ..."
#      Both run through the build's test setup (tests/sanitizers/meson.build:
#      runtime preloads, options, suppressions). A sanitizer report in a
#      test's output is a failed case, e.g.
#      "tsan: gst-gpufan:gst / test-pipeline (ThreadSanitizer: data race)".
#   4. a summary in test cases (scripts/summarize-tests.py); its last line is
#      "N passed, N failed" (", N skipped" when something was skipped).
# Exit status: non-zero when any case failed (or the build failed).
#
# Arguments are passed to every `meson test` (e.g. --suite lib, a test name,
# --repeat 10, --timeout-multiplier 3).
#
# Environment:
#   BUILD_DIR             build directory (default: build)
#   GPUFAN_TEST_PROCESSES parallel test processes (default: 2)
#   GPUFAN_SKIP_CPPCHECK=1    skip the static checker (counted as skipped)
#   GPUFAN_SKIP_MINIMAL=1     skip the build without CUDA/hwloc (skipped)
#   GPUFAN_SKIP_SANITIZERS=1  skip both sanitizer builds (each one skipped
#                             case); or one of them:
#   GPUFAN_SKIP_ASAN=1        skip the ASan+UBSan build (build-asan/)
#   GPUFAN_SKIP_TSAN=1        skip the TSan build (build-tsan/)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
build_dir=${BUILD_DIR:-build}
export BUILD_DIR=$build_dir
results_dir=$build_dir/tests/results
testlog=$build_dir/meson-logs/testlog.json

extra_cases=()
test_args=("$@")

# Each stage starts with say; the wall time of each is listed before the
# summary.
stage_times=()
stage=""
stage_start=$SECONDS
say() {
  if [[ -n $stage ]]; then
    stage_times+=("$(printf '%6ds  %s' $((SECONDS - stage_start)) "$stage")")
  fi
  stage=$*
  stage_start=$SECONDS
  printf '\n=== %s\n' "$*"
}

# 1. Build. A build failure is reported as a failed case, so the summary and
# its last line still come out.
say "setup and build"
build_ok=1
if ! bash scripts/setup.sh; then
  build_ok=0
  extra_cases+=(--case "build=failed")
fi

# 2. Static analysis of lib/, gst/ and examples/. cppcheck sees the sources
# as written (no GStreamer or system headers: missingIncludeSystem), with
# glib's and POSIX's knowledge.
say "static analysis (cppcheck)"
if [[ ${GPUFAN_SKIP_CPPCHECK:-0} == 1 ]]; then
  echo "skipped (GPUFAN_SKIP_CPPCHECK=1)"
  extra_cases+=(--case "static-analysis=skipped")
else
  mapfile -t sources < <(find lib gst examples -name '*.cpp' 2>/dev/null | sort)
  suppressions=()
  [[ -f .cppcheck-suppressions ]] &&
    suppressions=(--suppressions-list=.cppcheck-suppressions)
  if ((${#sources[@]} == 0)); then
    echo "no sources yet"
    extra_cases+=(--case "static-analysis=passed")
  elif cppcheck --quiet --error-exitcode=1 \
      --std=c++17 --language=c++ --library=gtk --library=posix \
      --enable=warning,performance,portability \
      --inline-suppr --suppress=missingIncludeSystem \
      "${suppressions[@]}" \
      --template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
      -I lib -I lib/devices -I gst -j "$(nproc)" "${sources[@]}"; then
    echo "clean (${#sources[@]} files)"
    extra_cases+=(--case "static-analysis=passed")
  else
    echo "cppcheck found problems (see above)"
    extra_cases+=(--case "static-analysis=failed")
  fi
fi

# 3. Tests. Stale reports from an earlier run must not count.
mkdir -p "$results_dir"
rm -f "$results_dir"/*.xml "$testlog"
if ((build_ok)); then
  say "meson test"
  meson test -C "$build_dir" --print-errorlogs \
    --num-processes "${GPUFAN_TEST_PROCESSES:-2}" "${test_args[@]}"
  # Its exit status is not needed: every test it ran is in testlog.json, and
  # a missing testlog.json (meson failed before running anything) counts as
  # a failed case in the summary.
fi

# 3b. The plugin must build, load and pass without the CUDA headers and
# without hwloc (a machine that has neither): the whole suite again, in a
# build of its own.
say "build and tests without CUDA and hwloc (build-minimal)"
if [[ ${GPUFAN_SKIP_MINIMAL:-0} == 1 ]] || ((!build_ok)); then
  echo "skipped"
  extra_cases+=(--case "minimal-build (no CUDA, no hwloc)=skipped")
elif BUILD_DIR=build-minimal \
    GPUFAN_MESON_ARGS="-Dcuda=disabled -Dhwloc=disabled ${GPUFAN_MESON_ARGS:-}" \
    bash scripts/setup.sh &&
    meson test -C build-minimal --print-errorlogs \
      --num-processes "${GPUFAN_TEST_PROCESSES:-2}" "${test_args[@]}"; then
  extra_cases+=(--case "minimal-build (no CUDA, no hwloc)=passed")
else
  extra_cases+=(--case "minimal-build (no CUDA, no hwloc)=failed")
fi

# 3c, 3d. The lib and element suites under the sanitizers, each in a build of
# its own (no examples or benchmarks: they are not run there). The build's
# default test setup (tests/sanitizers/meson.build) preloads the runtime and
# sets its options; a report fails the program, and summarize-tests.py also
# counts any report it finds in a test's output.
summary_runs=()
sanitizer_run() {  # NAME (asan|tsan) TITLE SKIP_VARIABLE MESON_ARGS...
  local name=$1 title=$2 skip=$3
  shift 3
  local dir=build-$name
  say "$title ($dir)"
  if [[ ${GPUFAN_SKIP_SANITIZERS:-0} == 1 || ${!skip:-0} == 1 ]]; then
    echo "skipped (GPUFAN_SKIP_SANITIZERS=1 or $skip=1)"
    extra_cases+=(--case "$name: $title=skipped")
    return
  fi
  if ((!build_ok)); then
    echo "skipped (the main build failed)"
    extra_cases+=(--case "$name: $title=skipped")
    return
  fi
  mkdir -p "$dir/tests/results"
  rm -f "$dir"/tests/results/*.xml "$dir/meson-logs/testlog-$name.json"
  if ! BUILD_DIR=$dir GPUFAN_MESON_ARGS="$* ${GPUFAN_MESON_ARGS:-}" \
      bash scripts/setup.sh; then
    extra_cases+=(--case "$name: build=failed")
    return
  fi
  local suites=(--suite lib --suite gst)
  # the lane worker's input path, fed corrupted GDP (tests/python)
  [[ $name == asan ]] && suites+=(--suite worker-fuzz)
  meson test -C "$dir" --setup "$name" "${suites[@]}" \
    --print-errorlogs --num-processes "${GPUFAN_TEST_PROCESSES:-2}" "${test_args[@]}"
  summary_runs+=(--run "$name" "$dir/tests/results" "$dir/meson-logs/testlog-$name.json")
}
sanitizer_run asan "ASan+UBSan build and tests" GPUFAN_SKIP_ASAN \
  -Db_sanitize=address,undefined -Db_lundef=false -Dexamples=disabled
sanitizer_run tsan "TSan build and tests" GPUFAN_SKIP_TSAN \
  -Db_sanitize=thread -Db_lundef=false -Dexamples=disabled

# 4. Summary.
say "summary"
printf 'stage times (total %ds):\n' "$SECONDS"
printf '%s\n' "${stage_times[@]}"
summary_args=(--results "$results_dir" --testlog "$testlog" "${summary_runs[@]}")
((build_ok)) || summary_args+=(--no-testlog-ok)
# Nothing may be printed after this: its last line is the verdict.
python3 scripts/summarize-tests.py "${summary_args[@]}" "${extra_cases[@]}"
