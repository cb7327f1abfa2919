#!/usr/bin/env bash
# The measured figures behind docs/scale-out.md: what one item of a remote
# lane weighs, and what moving it over SRT on this machine costs.
#
#   (a) compressed GOP chunks: 1920x1080 at 30 fps from videotestsrc, encoded
#       by x264enc at 4 Mbit/s with an IDR every 60 frames; the bytes of each
#       chunk (an IDR and the frames up to the next IDR, as chunk=keyframes
#       chunk-frames=60 cuts them; bench/scale-out-probe.py), and the
#       encoder's frames per second (the
#       work of a CPU lane that encodes them). Two sources: pattern=ball
#       (a moving ball on black: easy) and pattern=smpte scrolled by
#       horizontal-speed (every pixel moves: hard).
#   (b) raw frame sizes, as GStreamer allocates them (the buffer's size).
#   (c) loopback throughput of `gdppay ! srtsink` -> `srtsrc ! gdpdepay`
#       between two gst-launch-1.0 processes: 1 MB items (chunk-sized) and
#       raw I420 1080p frames. Each figure is a difference of two runs, N_BIG
#       and N_SMALL items, so that process start, connection set-up and SRT's
#       latency cancel out: MB/s = (N_BIG - N_SMALL) * bytes / (t_BIG - t_SMALL).
#       The receiver ends after its Nth buffer (identity eos-after), then the
#       sender is stopped: a GStreamer 1.22 srtsink closes without lingering,
#       so a sender that ends first can take its last megabytes with it.
#       Also run once with SRT's default options, to show what they do to a
#       GDP stream (see docs/scale-out.md).
#   (d) the one-way delay of one item on an idle link (bench/scale-out-probe.py):
#       SRT's latency (TSBPD) plus the transfer.
#
# Prints one line per figure, with the date, the machine and the commands.
# Nothing is judged: there is no pass/fail on a figure.
#
#   bash bench/scale-out-measure.sh            # everything (a few minutes)
#   FRAMES=120 RUNS=1 bash bench/scale-out-measure.sh   # quick
#
# Environment: FRAMES (frames encoded per pattern, a multiple of 60; 300),
# SECTIONS (which of a b c d to run; all), RUNS (throughput runs per figure, the median is printed; 3), N_BIG and
# N_SMALL (items per throughput run; 600 and 50), PORT (first UDP port
# used, up to PORT+410; 17500), SRT_OPTS (the SRT options of the throughput runs).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
frames=${FRAMES:-300}
runs=${RUNS:-3}
n_big=${N_BIG:-600}
n_small=${N_SMALL:-50}
port=${PORT:-17500}
# Without tlpktdrop=0, SRT's live mode drops packets it deems too late and
# gdpdepay then fails ("GDP packet header is of wrong type"); without the
# larger receive buffer and flow window, a bulk transfer stalled here (libsrt
# 1.5.1). See docs/scale-out.md.
sections=${SECTIONS:-a b c d}
srt_opts=${SRT_OPTS:-tlpktdrop=0&rcvbuf=100000000&fc=100000}
python=/usr/bin/python3 # the system's, where PyGObject is
gst=(gst-launch-1.0 -q)

say() { printf '%s\n' "$*"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
now() { date +%s.%N; }
want() { [[ " $sections " == *" $1 "* ]]; }

say "# scale-out figures"
say "date: $(date -u +%Y-%m-%dT%H:%MZ)"
say "machine: nproc=$(nproc), CPU \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')\", load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
say "software: GStreamer $(gst-launch-1.0 --version | sed -n 's/^GStreamer //p'), libsrt $(dpkg-query -W -f='${Version}' 'libsrt1.5-gnutls' 2>/dev/null || echo '?'), x264 $(dpkg-query -W -f='${Version}' 'libx264-164' 2>/dev/null || echo '?')"

# (a) GOP chunks, counted by a pad probe (bench/scale-out-probe.py chunks).
if want a; then
say ""
say "## (a) compressed GOP chunks: 1920x1080 30 fps, x264enc bitrate=4000 key-int-max=60 speed-preset=veryfast, $frames frames"
for src in "pattern=smpte horizontal-speed=8" "pattern=ball"; do
  say "$("$python" "$here/scale-out-probe.py" chunks --frames "$frames" --source "$src" 2>&1 | tail -1)"
done
say "  command: python3 bench/scale-out-probe.py chunks --frames $frames --source 'PATTERN'"
say "  (its pipeline: videotestsrc PATTERN num-buffers=$frames ! video/x-raw,format=I420,width=1920,height=1080,framerate=30/1 ! x264enc bitrate=4000 key-int-max=60 speed-preset=veryfast ! h264parse ! fakesink)"
fi

# (b) raw frame sizes: the size of the buffer videotestsrc allocates.
if want b; then
say ""
say "## (b) raw frame sizes (bytes of one buffer)"
for caps in "format=I420,width=1920,height=1080" "format=NV12,width=1920,height=1080" \
  "format=BGRx,width=1920,height=1080" "format=I420,width=1280,height=720" \
  "format=I420,width=3840,height=2160"; do
  size=$(gst-launch-1.0 -v videotestsrc num-buffers=1 ! "video/x-raw,$caps" \
    ! fakesink silent=false 2>&1 | sed -n 's/.*chain.*fakesink0:sink) (\([0-9]*\) bytes.*/\1/p' | head -1)
  say "raw $caps: $size bytes"
done
say "  command: gst-launch-1.0 -v videotestsrc num-buffers=1 ! video/x-raw,CAPS ! fakesink silent=false"
fi

# (c) throughput. One run: the listener (receiver) first, then the caller
# (sender, an endless source); the time from the sender's start to the
# receiver's end. Prints seconds, or "fail" (timeout, or the receiver's error).
srt_run() { # port n opts source...
  local port=$1 n=$2 opts=$3
  shift 3
  local t0 t1 rx tx rc
  # A stalled transfer ends at this deadline and reads "fail".
  timeout 90 "${gst[@]}" srtsrc uri="srt://127.0.0.1:$port?mode=listener${opts:+&$opts}" ! gdpdepay \
    ! identity eos-after="$n" ! fakesink sync=false >/dev/null 2>&1 &
  rx=$!
  # The listener is bound once gst-launch reaches PLAYING; a caller started
  # earlier retries (auto-reconnect), so this only saves a retry.
  sleep 0.3
  t0=$(now)
  "${gst[@]}" "$@" ! gdppay ! srtsink uri="srt://127.0.0.1:$port${opts:+?$opts}" sync=false \
    >/dev/null 2>&1 &
  tx=$!
  wait "$rx"
  rc=$?
  t1=$(now)
  kill "$tx" 2>/dev/null
  wait "$tx" 2>/dev/null
  if ((rc != 0)); then echo fail; else echo "$t1 - $t0" | bc; fi
}

# Median MB/s over $runs pairs of runs; prints "MB/s items/s (runs: ...)".
# Each run has a port of its own, from BASE up (a port just closed may
# still be held by the last run's SRT sockets).
throughput() { # base bytes opts source...
  local p=$1 bytes=$2 opts=$3
  shift 3
  local i big small rates=()
  for ((i = 0; i < runs; i++)); do
    big=$(srt_run $((p + 4 * i)) "$n_big" "$opts" "$@")
    small=$(srt_run $((p + 4 * i + 2)) "$n_small" "$opts" "$@")
    if [[ $big == fail || $small == fail ]]; then
      rates+=(fail)
    else
      rates+=("$(echo "scale=1; ($n_big - $n_small) * $bytes / ($big - $small) / 1000000" | bc)")
    fi
  done
  local ok
  ok=$(printf '%s\n' "${rates[@]}" | grep -v fail | median)
  if [[ $ok == nan ]]; then
    echo "failed in every run (${rates[*]})"
  else
    echo "$ok MB/s = $(echo "scale=2; $ok * 8 / 1000" | bc) Gbit/s = $(echo "scale=1; $ok * 1000000 / $bytes" | bc) items/s (runs: ${rates[*]})"
  fi
}

if want c; then
say ""
say "## (c) loopback gdppay ! srtsink -> srtsrc ! gdpdepay, two gst-launch-1.0 processes ($n_big and $n_small items, median of $runs)"
one_mb=(fakesrc sizetype=fixed sizemax=1000000 filltype=zero ! capsfilter caps=application/x-test)
# shellcheck disable=SC2054  # the commas are the caps' own
raw=(videotestsrc pattern=black ! video/x-raw,format=I420,width=1920,height=1080,framerate=30/1)
say "1 MB items, SRT options $srt_opts: $(throughput "$port" 1000000 "$srt_opts" "${one_mb[@]}")"
say "raw I420 1080p frames (3110400 bytes), SRT options $srt_opts: $(throughput $((port + 100)) 3110400 "$srt_opts" "${raw[@]}")"
say "1 MB items, SRT options $srt_opts&maxbw=250000000 (2 Gbit/s; the default cap is 1 Gbit/s): $(throughput $((port + 200)) 1000000 "$srt_opts&maxbw=250000000" "${one_mb[@]}")"
# SRT's defaults and file mode, once each: what they do to this transfer.
p=$((port + 300))
for opts in "" "transtype=file"; do
  p=$((p + 2))
  d=$(srt_run "$p" "$n_big" "$opts" "${one_mb[@]}")
  say "1 MB items, SRT options '${opts:-(defaults)}', $n_big items: $([[ $d == fail ]] && echo "failed (the receiver did not get them all within 90 s, or stopped on an error)" || echo "arrived in $d s")"
done
say "  receiver: gst-launch-1.0 srtsrc uri=\"srt://127.0.0.1:PORT?mode=listener&OPTS\" ! gdpdepay ! identity eos-after=N ! fakesink sync=false"
say "  sender:   gst-launch-1.0 SOURCE ! gdppay ! srtsink uri=\"srt://127.0.0.1:PORT?OPTS\" sync=false"
say "  SOURCE (1 MB items): ${one_mb[*]}"
say "  SOURCE (raw frames): ${raw[*]}"
fi

# (d) one item's delay.
if want d; then
say ""
say "## (d) one-way delay of one item on an idle link (median of 20)"
p=$((port + 400))
for args in "--latency 125 --bytes 1000000" "--latency 20 --bytes 1000000" \
  "--latency 125 --bytes 3110400" "--latency 20 --bytes 3110400"; do
  p=$((p + 2))
  # shellcheck disable=SC2086  # the arguments' words
  say "$("$python" "$here/scale-out-probe.py" delay --port "$p" --srt-options "$srt_opts" $args 2>&1 | tail -1)"
done
say "  command: python3 bench/scale-out-probe.py delay --latency L --bytes B --srt-options '$srt_opts'"
fi
say ""
say "load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
