# shellcheck shell=bash
# Sourced by the benchmark scripts (stock-compare.sh, chunk-encode.sh): times
# one whole gst-launch-1.0 process.
#
#   bench_timed_run NAME DESCRIPTION DIR PROGRAM
#
# appends "wall user sys" (seconds, bash's `time`) to DIR/NAME.times and the
# process's output to DIR/NAME.log; if the pipeline fails, prints that log
# (naming PROGRAM and NAME) and exits 1.
bench_timed_run() {
  local name=$1 desc=$2 dir=$3 program=$4
  local TIMEFORMAT='%R %U %S'
  # shellcheck disable=SC2086  # the description is split into words
  { time gst-launch-1.0 -q $desc >"$dir/$name.log" 2>&1; } 2>>"$dir/$name.times" ||
    { echo "$program: pipeline $name failed:" >&2; cat "$dir/$name.log" >&2; exit 1; }
}
