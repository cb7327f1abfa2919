// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufan-streams-bench: several input streams over one gpufanout/gpufanin
// pair (its sink_%u / src_%u pads) against one pair per stream, on the same
// two devices, in one run (issue 14, item 7).
//
//   shared    S streams (videotestsrc ! f.sink_k ... i.src_k ! queue !
//             fakesink) over ONE pair with 2 lanes: 2 branch instances
//   separate  S pairs (videotestsrc ! gpufanout ... gpufanin ! fakesink),
//             each with the same 2 lanes: 2 S branch instances (baseline)
//
// A lane's branch is `identity`; a buffer probe on its sink pad makes it use
// a simulated device: device 0 (the fast one) or device 1 (the slow one).
// A device serves one frame at a time, in the order the frames reach it
// (FIFO), for its service time (a sleep); every branch instance on that
// device waits its turn, as S pipelines on the same two GPUs would. (A plain
// `identity sleep-time`, as in gpufan-bench, would give the S pairs S times
// the hardware.) Ideal throughput: 1/T_fast + 1/T_slow, whatever the number
// of branch instances.
//
// Measured per configuration, each run in a child process of its own (this
// program again, with --child): total throughput (all frames / from the
// first frame entering a fan-out to the last leaving a fan-in); per stream,
// frames per second over the window in which every stream is running
// (from the last stream's first output to the first stream's last output),
// and Jain's fairness index over those; added latency per stream (a probe
// on the fan-out's sink pad and one on the fan-in's src pad, matched by
// PTS: p50/p99/max); the process's peak RSS (VmHWM) and its RSS before the
// pipeline was built; its thread count (/proc/self/status Threads:,
// sampled every 20 ms while playing: maximum). Every stream's output is
// checked: every frame, in order (buffer offsets 0, 1, 2, ...). With live
// sources (is-live=true, 30 fps; --no-live skips) the lanes are not
// saturated: that variant is about latency and cost, not fairness.
//
// The two configurations alternate within every repetition (the first of
// the pair swapping each time); medians over the repetitions; ratios of
// shared to separate. Timings are never pass/fail.
//
// Output: a table on stdout, JSON (--json FILE).
// Run: GST_PLUGIN_PATH=build/gst build/bench/gpufan-streams-bench
//        --json out/streams.json

#include <gst/gst.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench-run.h"
#include "gpufan-util.h"
#include "json-text.h"

namespace {

using gpufan_json::JoinJson;
using gpufan_json::JsonArray;
using gpufan_json::JsonNumber;
using gpufan_json::JsonObject;
using gpufan_util::Fmt;
using gpufan_util::NowNs;
using gpufan_util::Percentile;

// The median of the finite values (a figure a run could not measure is NaN);
// NaN when there is none.
double Median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(),
                         [](double x) { return !std::isfinite(x); }),
          v.end());
  return gpufan_util::Median(std::move(v));
}

// Jain's fairness index: (sum x)^2 / (n sum x^2); 1 when all are equal,
// 1/n when one stream gets everything.
double Jain(const std::vector<double>& x) {
  double sum = 0, sq = 0;
  for (double v : x) {
    sum += v;
    sq += v * v;
  }
  return x.empty() || sq <= 0 ? NAN : sum * sum / (x.size() * sq);
}

// A field of /proc/self/status, in its unit (kB, or a count); -1 if absent.
long ProcStatus(const char *field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':')
      return std::strtol(line.c_str() + n + 1, nullptr, 10);
  }
  return -1;
}

// --- the simulated devices ---

// Serves one frame at a time, first come first served, for `service_us`.
struct Device {
  std::mutex m;
  std::condition_variable cv;
  guint64 next_ticket = 0, serving = 0;
  guint service_us = 0;
  std::atomic<guint64> frames{0};

  void Serve() {
    std::unique_lock<std::mutex> lk(m);
    const guint64 ticket = next_ticket++;
    cv.wait(lk, [&] { return serving == ticket; });
    lk.unlock();
    g_usleep(service_us);
    frames.fetch_add(1, std::memory_order_relaxed);
    lk.lock();
    serving++;
    lk.unlock();
    cv.notify_all();
  }
};

GstPadProbeReturn OnBranch(GstPad *, GstPadProbeInfo *, gpointer data) {
  static_cast<Device *>(data)->Serve();
  return GST_PAD_PROBE_OK;
}

// --- one run (in the child) ---

struct ChildSpec {
  bool shared = true;
  bool live = false;
  guint streams = 8;
  guint frames = 300;  // per stream
  double fast_ms = 4, slow_ms = 8;
  guint width = 64, height = 64;  // GRAY8
  bool wait_for_every_frame = false;
  bool start_barrier = true;  // saturated: every stream's first frame waits
};

struct StreamTrace {
  std::mutex m;
  std::unordered_map<GstClockTime, int64_t> t_in;  // by PTS
  std::vector<double> latency_ms;
  std::vector<int64_t> out_times;
  std::vector<guint64> out_offsets;
  guint64 frames_in = 0, frames_out = 0;
  guint64 max_offset = 0, reordered = 0, unmatched = 0;
  int64_t first_in = 0;

  // A frame entering the fan-out at `now` (ns); under `m`.
  void In(const GstBuffer *buf, int64_t now) {
    if (frames_in++ == 0)
      first_in = now;
    t_in[GST_BUFFER_PTS(buf)] = now;
  }

  // A frame leaving the fan-in at `now`; under `m`.
  void Out(const GstBuffer *buf, int64_t now) {
    auto it = t_in.find(GST_BUFFER_PTS(buf));
    if (it == t_in.end()) {
      unmatched++;
    } else {
      latency_ms.push_back((now - it->second) / 1e6);
      t_in.erase(it);
    }
    // Older than a frame already out: out of order (a gap is a lost frame).
    if (frames_out > 0 && GST_BUFFER_OFFSET(buf) <= max_offset)
      reordered++;
    max_offset = std::max(max_offset, GST_BUFFER_OFFSET(buf));
    frames_out++;
    out_times.push_back(now);
    out_offsets.push_back(GST_BUFFER_OFFSET(buf));
  }
};

// A buffer probe that hands the buffer and the time to `Record` of the
// StreamTrace `data`, under its lock: OnTrace<&StreamTrace::In> on the way
// in, OnTrace<&StreamTrace::Out> on the way out.
template <void (StreamTrace::*Record)(const GstBuffer *, int64_t)>
GstPadProbeReturn OnTrace(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *t = static_cast<StreamTrace *>(data);
  const int64_t now = NowNs();
  std::lock_guard<std::mutex> lk(t->m);
  (t->*Record)(GST_PAD_PROBE_INFO_BUFFER(info), now);
  return GST_PAD_PROBE_OK;
}

// Every stream's first frame waits here until every stream has one: each
// source has then had its caps and ALLOCATION answered, before any frame
// occupies the lanes. Without it, gpufanout answers a stream's ALLOCATION
// query (serialized) only once every lane is empty, so a stream whose query
// comes after another stream's first frames waits until the lanes go idle,
// i.e. until the streams already running end (docs/performance.md).
struct StartBarrier {
  std::mutex m;
  std::condition_variable cv;
  guint arrived = 0, expected = 0;
  bool open = false;
};

struct BarrierProbe {
  StartBarrier *barrier = nullptr;
  bool passed = false;  // only this stream's thread reads and writes it
};

GstPadProbeReturn OnBarrier(GstPad *, GstPadProbeInfo *, gpointer data) {
  auto *bp = static_cast<BarrierProbe *>(data);
  if (bp->passed)
    return GST_PAD_PROBE_OK;
  bp->passed = true;
  StartBarrier& b = *bp->barrier;
  std::unique_lock<std::mutex> lk(b.m);
  if (++b.arrived >= b.expected) {
    b.open = true;
    b.cv.notify_all();
  }
  // Bounded: a stream that never starts does not hang the run.
  b.cv.wait_for(lk, std::chrono::seconds(30), [&] { return b.open; });
  return GST_PAD_PROBE_OK;
}

std::string Description(const ChildSpec& s) {
  std::ostringstream p;
  const std::string fanin_props =
      s.wait_for_every_frame ? " stall-timeout=3600000000000" : "";
  auto source = [&](guint k) {
    std::ostringstream src;
    src << "videotestsrc name=s" << k
        << " pattern=black num-buffers=" << s.frames
        << " is-live=" << (s.live ? "true" : "false")
        << " ! video/x-raw,format=GRAY8,width=" << s.width
        << ",height=" << s.height << ",framerate=30/1 ! ";
    return src.str();
  };
  const std::string sink =
      "fakesink sync=false enable-last-sample=false async=false";
  if (s.shared) {
    p << "gpufanout name=f devices=cpu gpufanin name=i" << fanin_props;
    for (guint j = 0; j < 2; ++j)
      p << "  f.src_" << j << " ! identity name=b0_" << j
        << " signal-handoffs=false ! i.sink_" << j;
    for (guint k = 0; k < s.streams; ++k)
      p << "  " << source(k) << "f.sink_" << k << "  i.src_" << k
        << " ! queue ! " << sink;
  } else {
    for (guint k = 0; k < s.streams; ++k) {
      p << "  " << source(k) << "gpufanout name=f" << k
        << " devices=cpu gpufanin name=i" << k << fanin_props << " ! " << sink;
      for (guint j = 0; j < 2; ++j)
        p << "  f" << k << ".src_" << j << " ! identity name=b" << k << "_" << j
          << " signal-handoffs=false ! i" << k << ".sink_" << j;
    }
  }
  return p.str();
}

void AddProbe(GstElement *pipeline, const std::string& element,
              const std::string& pad, GstPadProbeCallback cb, gpointer data) {
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline), element.c_str());
  g_assert(e);
  GstPad *p = gst_element_get_static_pad(e, pad.c_str());
  g_assert(p);
  gst_pad_add_probe(p, GST_PAD_PROBE_TYPE_BUFFER, cb, data, nullptr);
  gst_object_unref(p);
  gst_object_unref(e);
}

// A result as lines "key v1 v2 ...", which the parent reads back; "error
// TEXT" when the run failed.
using gpufan_bench::Fields;
using gpufan_bench::PrintFields;

// A gpufan-stats message with the per-stream figures.
bool IsStreamStats(const GstStructure *s) {
  return s && gst_structure_has_name(s, "gpufan-stats") &&
         gst_structure_has_field(s, "streams");
}

// The final gpufan-stats at EOS: the per-stream figures (shared only).
void ReadStreamStats(const GstStructure *s, Fields *out) {
  const GValue *streams = gst_structure_get_value(s, "streams");
  if (!streams || !GST_VALUE_HOLDS_ARRAY(streams))
    return;
  const char *u64[] = {"dispatched",    "delivered", "lost",         "flushed",
                       "leaky-dropped", "wait-time", "max-wait-time"};
  Fields f;
  for (guint i = 0; i < gst_value_array_get_size(streams); ++i) {
    const GstStructure *st =
        gst_value_get_structure(gst_value_array_get_value(streams, i));
    for (const char *key : u64) {
      guint64 v = 0;
      gst_structure_get_uint64(st, key, &v);
      f[std::string("stats-") + key].push_back(static_cast<double>(v));
    }
    gdouble fps = NAN;
    gst_structure_get_double(st, "fps", &fps);
    f["stats-fps"].push_back(fps);
  }
  for (auto& [k, v] : f)
    (*out)[k] = v;
}

int RunChild(const ChildSpec& spec) {
  const long rss_idle_kb = ProcStatus("VmRSS");
  const long threads_idle = ProcStatus("Threads");
  Fields out;
  std::string error;

  Device devices[2];
  devices[0].service_us = static_cast<guint>(std::lround(spec.fast_ms * 1000));
  devices[1].service_us = static_cast<guint>(std::lround(spec.slow_ms * 1000));
  std::vector<std::unique_ptr<StreamTrace>> traces;
  for (guint k = 0; k < spec.streams; ++k)
    traces.push_back(std::make_unique<StreamTrace>());

  GError *err = nullptr;
  const std::string desc = Description(spec);
  GstElement *pipeline = gst_parse_launch(desc.c_str(), &err);
  if (!pipeline || err) {
    std::printf("error cannot build the pipeline: %s (%s)\n",
                err ? err->message : "?", desc.c_str());
    return 1;
  }
  const guint pairs = spec.shared ? 1 : spec.streams;
  for (guint p = 0; p < pairs; ++p)
    for (guint j = 0; j < 2; ++j)
      AddProbe(pipeline, "b" + std::to_string(p) + "_" + std::to_string(j),
               "sink", OnBranch, &devices[j]);
  StartBarrier barrier;
  barrier.expected = spec.streams;
  std::vector<BarrierProbe> barrier_probes(spec.streams);
  for (guint k = 0; k < spec.streams; ++k) {
    const std::string n = std::to_string(k);
    barrier_probes[k].barrier = &barrier;
    // Stream k enters f.sink_k and leaves i.src_k of the shared pair, or
    // fk.sink and ik.src of its own.
    const std::string fanout = spec.shared ? "f" : "f" + n;
    const std::string fanin = spec.shared ? "i" : "i" + n;
    const std::string in_pad = spec.shared ? "sink_" + n : "sink";
    const std::string out_pad = spec.shared ? "src_" + n : "src";
    // Before the probe on the way in: a frame's latency starts when the
    // barrier let it go.
    if (spec.start_barrier)
      AddProbe(pipeline, fanout, in_pad, OnBarrier, &barrier_probes[k]);
    AddProbe(pipeline, fanout, in_pad, OnTrace<&StreamTrace::In>,
             traces[k].get());
    AddProbe(pipeline, fanin, out_pad, OnTrace<&StreamTrace::Out>,
             traces[k].get());
  }

  // Generous: ten times what the slow device alone would take.
  const double total = static_cast<double>(spec.frames) * spec.streams;
  const GstClockTime timeout = std::max<GstClockTime>(
      60 * GST_SECOND,
      static_cast<GstClockTime>(10.0 * total * spec.slow_ms * GST_MSECOND));
  GstBus *bus = gst_element_get_bus(pipeline);
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE)
    error = "the pipeline does not start";
  const GstClockTime deadline = gst_util_get_timestamp() + timeout;
  long threads_max = 0;
  std::vector<double> threads_samples;
  long rss_max_kb = 0;
  // The final gpufan-stats message: 0 none, 1 before the EOS message, 2
  // after it.
  int stats_message = 0;
  bool done = !error.empty();
  while (!done) {
    const GstClockTime now = gst_util_get_timestamp();
    if (now >= deadline) {
      error = "timed out";
      break;
    }
    GstMessage *msg = gst_bus_timed_pop_filtered(
        bus, std::min<GstClockTime>(deadline - now, 20 * GST_MSECOND),
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR |
                                    GST_MESSAGE_ELEMENT));
    const long threads = ProcStatus("Threads");
    threads_max = std::max(threads_max, threads);
    rss_max_kb = std::max(rss_max_kb, ProcStatus("VmRSS"));
    threads_samples.push_back(threads);
    if (!msg)
      continue;
    switch (GST_MESSAGE_TYPE(msg)) {
      case GST_MESSAGE_EOS:
        done = true;
        break;
      case GST_MESSAGE_ERROR:
        error = gpufan_util::PipelineError(msg);
        done = true;
        break;
      default: {
        const GstStructure *s = gst_message_get_structure(msg);
        if (IsStreamStats(s)) {
          ReadStreamStats(s, &out);
          stats_message = 1;
        }
        break;
      }
    }
    gst_message_unref(msg);
  }
  // With several streams the final gpufan-stats may follow the EOS message.
  for (int i = 0; error.empty() && spec.shared && stats_message == 0 && i < 50;
       ++i) {
    GstMessage *msg =
        gst_bus_timed_pop_filtered(bus, 20 * GST_MSECOND, GST_MESSAGE_ELEMENT);
    if (!msg)
      continue;
    if (IsStreamStats(gst_message_get_structure(msg)))
      stats_message = 2;
    gst_message_unref(msg);
  }
  if (spec.shared)
    out["stats-message"] = {static_cast<double>(stats_message)};
  if (error.empty() && spec.shared) {
    // The final figures, every stream ended: from the property, which does
    // not depend on when the message comes.
    GstElement *fanout = gst_bin_get_by_name(GST_BIN(pipeline), "f");
    GstStructure *stats = nullptr;
    g_object_get(fanout, "stats", &stats, nullptr);
    if (stats) {
      ReadStreamStats(stats, &out);
      gst_structure_free(stats);
    }
    gst_object_unref(fanout);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  if (!error.empty()) {
    std::printf("error %s\n", error.c_str());
    return 1;
  }

  // Whole run and the window in which every stream is running.
  int64_t t0 = INT64_MAX, t1 = 0, w0 = 0, w1 = INT64_MAX;
  guint64 frames_out = 0;
  for (const auto& t : traces) {
    if (t->out_times.empty()) {
      std::printf("error a stream put nothing out\n");
      return 1;
    }
    t0 = std::min(t0, t->first_in);
    t1 = std::max(t1, t->out_times.back());
    w0 = std::max(w0, t->out_times.front());
    w1 = std::min(w1, t->out_times.back());
    frames_out += t->frames_out;
  }
  out["total-fps"] = {frames_out / ((t1 - t0) / 1e9)};
  out["seconds"] = {(t1 - t0) / 1e9};
  out["window-seconds"] = {(w1 - w0) / 1e9};
  std::vector<double> window_fps, run_fps;
  for (const auto& t : traces) {
    const auto a =
        std::lower_bound(t->out_times.begin(), t->out_times.end(), w0);
    const auto b =
        std::upper_bound(t->out_times.begin(), t->out_times.end(), w1);
    window_fps.push_back(w1 > w0 ? (b - a) / ((w1 - w0) / 1e9) : NAN);
    run_fps.push_back(t->frames_out /
                      ((t->out_times.back() - t->first_in) / 1e9));
    out["first-in-ms"].push_back((t->first_in - t0) / 1e6);
    out["first-out-ms"].push_back((t->out_times.front() - t0) / 1e6);
    out["last-out-ms"].push_back((t->out_times.back() - t0) / 1e6);
    out["frames-in"].push_back(t->frames_in);
    // The first frame (offset) that did not come out; -1: none.
    std::vector<guint64> sorted = t->out_offsets;
    std::sort(sorted.begin(), sorted.end());
    double missing = -1;
    for (guint64 i = 0; i < spec.frames; ++i)
      if (!std::binary_search(sorted.begin(), sorted.end(), i)) {
        missing = static_cast<double>(i);
        break;
      }
    out["first-missing"].push_back(missing);
    out["frames-out"].push_back(t->frames_out);
    out["reordered"].push_back(t->reordered);
    out["lost"].push_back(static_cast<double>(t->frames_in) -
                          static_cast<double>(t->frames_out));
    out["unmatched"].push_back(t->unmatched);
    out["latency-p50-ms"].push_back(Percentile(t->latency_ms, 50));
    out["latency-p99-ms"].push_back(Percentile(t->latency_ms, 99));
    out["latency-max-ms"].push_back(
        t->latency_ms.empty()
            ? NAN
            : *std::max_element(t->latency_ms.begin(), t->latency_ms.end()));
    // A lost frame is a figure (reported, see "lost"); a frame out of
    // order, or one that never entered, fails the run.
    if (t->reordered > 0 && error.empty())
      error = std::to_string(t->reordered) + " frames out of order";
    else if (t->frames_in != spec.frames && error.empty())
      error = "a source sent " + std::to_string(t->frames_in) + " frames";
  }
  const std::vector<double>& first_in = out["first-in-ms"];
  out["start-skew-ms"] = {*std::max_element(first_in.begin(), first_in.end())};
  out["window-fps"] = window_fps;
  out["run-fps"] = run_fps;
  out["jain-window"] = {Jain(window_fps)};
  out["jain-run"] = {Jain(run_fps)};
  out["device-frames"] = {static_cast<double>(devices[0].frames.load()),
                          static_cast<double>(devices[1].frames.load())};
  out["threads-idle"] = {static_cast<double>(threads_idle)};
  out["threads-max"] = {static_cast<double>(threads_max)};
  out["threads-median"] = {Median(threads_samples)};
  out["rss-idle-kb"] = {static_cast<double>(rss_idle_kb)};
  out["rss-max-kb"] = {static_cast<double>(rss_max_kb)};
  out["rss-peak-kb"] = {static_cast<double>(ProcStatus("VmHWM"))};
  PrintFields(out);
  if (!error.empty()) {
    std::printf("error %s\n", error.c_str());
    return 1;
  }
  return 0;
}

// --- the parent ---

using RunResult = gpufan_bench::ChildRun;

RunResult SpawnChild(const std::string& exe, const ChildSpec& s,
                     gint64 timer_slack_ns) {
  std::vector<std::string> args = {exe, "--child",
                                   s.shared ? "shared" : "separate"};
  auto option = [&args](const char *name, auto value) {
    args.push_back(name);
    args.push_back(std::to_string(value));
  };
  option("--streams", s.streams);
  option("--frames", s.frames);
  option("--fast-ms", s.fast_ms);
  option("--slow-ms", s.slow_ms);
  option("--width", s.width);
  option("--height", s.height);
  option("--timer-slack-ns", timer_slack_ns);
  args.push_back(s.live ? "--child-live" : "--child-not-live");
  args.push_back(s.wait_for_every_frame ? "--smoke" : "--quick");
  args.push_back(s.start_barrier ? "--quick" : "--no-start-barrier");
  return gpufan_bench::RunChild(args);
}

struct Config {
  std::string label;  // "shared" or "separate"
  ChildSpec spec;
  std::vector<RunResult> runs;

  std::vector<double> Ones(const char *key) const {
    return gpufan_bench::OkValues(runs, key);
  }
  double MedianOf(const char *key) const { return Median(Ones(key)); }
  // Over every stream of every run.
  double Total(const char *key) const {
    double sum = 0;
    for (const RunResult& r : runs)
      for (double v : r.Many(key))
        sum += std::isfinite(v) ? v : 0;
    return sum;
  }
  // Per stream: the median over the runs.
  std::vector<double> PerStream(const char *key) const {
    std::vector<double> out;
    for (const std::vector<double>& v :
         gpufan_bench::PerIndexValues(runs, key, spec.streams))
      out.push_back(Median(v));
    return out;
  }
};

struct Variant {
  std::string name;  // "saturated" or "live"
  bool live = false;
  Config configs[2];  // [0] separate (the baseline), [1] shared
};

double IdealFps(const ChildSpec& s) {
  return 1000.0 / s.fast_ms + 1000.0 / s.slow_ms;
}

}  // namespace

int main(int argc, char **argv) {
  gboolean smoke = FALSE, quick = FALSE, no_live = FALSE;
  gboolean no_start_barrier = FALSE;
  gboolean child_live = FALSE, child_not_live = FALSE;
  gint reps = 0, streams = 8, frames = 0, live_frames = 0;
  gint width = 64, height = 64;
  gdouble fast_ms = 4.0, slow_ms = 8.0;
  gint64 timer_slack_ns = 1;
  gchar *json = nullptr, *child = nullptr;
  // As gpufan-bench: a lane is a sleep; wake it as close to its service time
  // as the kernel can. Set before any thread starts (children inherit it).
  timer_slack_ns = gpufan_util::SetTimerSlack(argc, argv, timer_slack_ns);
  GOptionEntry entries[] = {
      {"quick", 0, 0, G_OPTION_ARG_NONE, &quick,
       "Fewer frames and 2 repetitions", nullptr},
      {"smoke", 0, 0, G_OPTION_ARG_NONE, &smoke,
       "A few frames per stream, 1 repetition, fast devices, fan-ins that "
       "wait for every frame (seconds; for tests)",
       nullptr},
      {"reps", 0, 0, G_OPTION_ARG_INT, &reps,
       "Repetitions per configuration (default 5; --quick 2; --smoke 1)", "N"},
      {"json", 0, 0, G_OPTION_ARG_FILENAME, &json,
       "Write the results to FILE as JSON", "FILE"},
      {"streams", 0, 0, G_OPTION_ARG_INT, &streams, "Input streams (default 8)",
       "S"},
      {"frames", 0, 0, G_OPTION_ARG_INT, &frames,
       "Frames per stream, saturated variant (default 300; --quick 120; "
       "--smoke 20)",
       "N"},
      {"live-frames", 0, 0, G_OPTION_ARG_INT, &live_frames,
       "Frames per stream, live variant (default 150; --quick 60; --smoke 8)",
       "N"},
      {"fast-ms", 0, 0, G_OPTION_ARG_DOUBLE, &fast_ms,
       "Service time of the fast device (default 4; --smoke 1)", "MS"},
      {"slow-ms", 0, 0, G_OPTION_ARG_DOUBLE, &slow_ms,
       "Service time of the slow device (default 8; --smoke 2)", "MS"},
      {"width", 0, 0, G_OPTION_ARG_INT, &width,
       "Frame width (GRAY8; default 64)", "W"},
      {"height", 0, 0, G_OPTION_ARG_INT, &height, "Frame height (default 64)",
       "H"},
      {"no-live", 0, 0, G_OPTION_ARG_NONE, &no_live,
       "Skip the variant with live sources", nullptr},
      {"no-start-barrier", 0, 0, G_OPTION_ARG_NONE, &no_start_barrier,
       "Saturated variant: let every stream start when its source does "
       "(by default every stream's first frame waits until each stream has "
       "one: see docs/performance.md)",
       nullptr},
      {"timer-slack-ns", 0, 0, G_OPTION_ARG_INT64, &timer_slack_ns,
       "Timer slack of every thread (default 1; the kernel's is 50000)", "NS"},
      {"child", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &child,
       "Run one configuration, 'shared' or 'separate', print its figures",
       "WHICH"},
      {"child-live", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &child_live,
       "The child's sources are live", nullptr},
      {"child-not-live", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE,
       &child_not_live, "The child's sources are not live", nullptr},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  if (!gpufan_util::ParseOptions(
          entries,
          "- S streams over one gpufanout/gpufanin pair against S pairs",
          nullptr, &argc, &argv))
    return 2;
  if (streams < 1 || fast_ms <= 0 || slow_ms <= 0 || width < 1 || height < 1) {
    g_printerr("--streams, --width, --height >= 1; --fast-ms, --slow-ms > 0\n");
    return 2;
  }
  if (smoke && !child && fast_ms == 4.0 && slow_ms == 8.0) {
    fast_ms = 1.0;
    slow_ms = 2.0;
  }

  if (!gpufan_util::GpufanoutFound())
    return 2;

  // What every run has in common, the child's and the parent's.
  ChildSpec common;
  common.streams = static_cast<guint>(streams);
  common.fast_ms = fast_ms;
  common.slow_ms = slow_ms;
  common.width = static_cast<guint>(width);
  common.height = static_cast<guint>(height);
  common.wait_for_every_frame = smoke;

  if (child) {
    ChildSpec spec = common;
    spec.shared = g_strcmp0(child, "shared") == 0;
    spec.live = child_live;
    spec.frames = static_cast<guint>(std::max(frames, 1));
    spec.start_barrier = !no_start_barrier;
    const int rc = RunChild(spec);
    std::fflush(stdout);
    g_free(child);
    return rc;
  }

  const int n_reps = reps > 0 ? reps : smoke ? 1 : quick ? 2 : 5;
  const char *mode = smoke ? "smoke" : quick ? "quick" : "full";
  const guint sat_frames = frames > 0 ? frames : smoke ? 20 : quick ? 120 : 300;
  const guint lv_frames = live_frames > 0 ? live_frames
                          : smoke         ? 8
                          : quick         ? 60
                                          : 150;
  gchar *exe = g_file_read_link("/proc/self/exe", nullptr);
  std::vector<Variant> variants;
  for (bool live : {false, true}) {
    if (live && no_live)
      continue;
    Variant v;
    v.name = live ? "live" : "saturated";
    v.live = live;
    for (int c = 0; c < 2; ++c) {
      Config& cfg = v.configs[c];
      cfg.label = c == 0 ? "separate" : "shared";
      cfg.spec = common;
      cfg.spec.shared = c == 1;
      cfg.spec.live = live;
      cfg.spec.frames = live ? lv_frames : sat_frames;
      cfg.spec.start_barrier = !live && !no_start_barrier;
    }
    variants.push_back(std::move(v));
  }

  const double load_before = gpufan_util::LoadAverage();
  g_print(
      "gpufan-streams-bench (%s): %d streams of %dx%d GRAY8, devices of %g "
      "and %g ms, %d repetition(s); load %.2f\n",
      mode, streams, width, height, fast_ms, slow_ms, n_reps, load_before);
  bool all_ok = true;
  for (Variant& v : variants) {
    g_print("%s:", v.name.c_str());
    for (int rep = 0; rep < n_reps; ++rep) {
      for (int i = 0; i < 2; ++i) {
        Config& c = v.configs[(i + rep) % 2];  // who goes first alternates
        RunResult r = SpawnChild(exe, c.spec, timer_slack_ns);
        if (!r.ok) {
          all_ok = false;
          g_printerr("\n  %s %s run %d FAILED: %s\n", v.name.c_str(),
                     c.label.c_str(), rep, r.error.c_str());
        }
        g_print(" %s", r.ok ? "." : "x");
        c.runs.push_back(std::move(r));
      }
    }
    g_print("\n");
  }
  const double load_after = gpufan_util::LoadAverage();
  g_free(exe);

  std::vector<std::string> json_variants;
  for (const Variant& v : variants) {
    const Config& base = v.configs[0];
    const double ideal = IdealFps(base.spec);
    const double demand = v.live ? 30.0 * streams : NAN;
    g_print("\n%s (%u frames per stream; ideal %.1f frames/s%s):\n",
            v.name.c_str(), base.spec.frames, ideal,
            v.live ? Fmt(", demand %.0f frames/s", demand).c_str() : "");
    g_print("%-9s %9s %7s %8s %8s %9s %9s %8s %8s %8s\n", "config", "fps",
            "x sep", "Jain", "Jain", "p99 ms", "p99 ms", "threads", "RSS MB",
            "RSS MB");
    g_print("%-9s %9s %7s %8s %8s %9s %9s %8s %8s %8s\n", "", "(total)", "",
            "(window)", "(run)", "(median)", "(worst)", "(max)", "(peak)",
            "(added)");
    std::vector<std::string> json_configs;
    const double base_fps = base.MedianOf("total-fps");
    const double base_threads = base.MedianOf("threads-max");
    const double base_rss = base.MedianOf("rss-peak-kb");
    for (const Config& c : v.configs) {
      const double fps = c.MedianOf("total-fps");
      const std::vector<double> p99 = c.PerStream("latency-p99-ms");
      const double rss_peak = c.MedianOf("rss-peak-kb");
      const double rss_idle = c.MedianOf("rss-idle-kb");
      const double threads = c.MedianOf("threads-max");
      double worst_p99 = NAN;
      for (double x : p99)
        worst_p99 = std::isfinite(worst_p99) ? std::max(worst_p99, x) : x;
      g_print("%-9s %9s %7s %8s %8s %9s %9s %8s %8s %8s\n", c.label.c_str(),
              Fmt("%.1f", fps).c_str(), Fmt("%.2f", fps / base_fps).c_str(),
              Fmt("%.3f", c.MedianOf("jain-window")).c_str(),
              Fmt("%.3f", c.MedianOf("jain-run")).c_str(),
              Fmt("%.1f", Median(p99)).c_str(), Fmt("%.1f", worst_p99).c_str(),
              Fmt("%.0f", threads).c_str(),
              Fmt("%.1f", rss_peak / 1024).c_str(),
              Fmt("%.1f", (rss_peak - rss_idle) / 1024).c_str());
      g_print("  p99 per stream (ms):");
      for (double x : p99)
        g_print(" %s", Fmt("%.1f", x).c_str());
      g_print("\n  fps per stream (window):");
      for (double x : c.PerStream("window-fps"))
        g_print(" %s", Fmt("%.1f", x).c_str());
      g_print("\n  start skew %s ms (median)",
              Fmt("%.1f", c.MedianOf("start-skew-ms")).c_str());
      const double lost = c.Total("lost");
      if (lost > 0)
        g_print("; LOST FRAMES: %.0f of %.0f (all runs)", lost,
                c.Total("frames-in"));
      g_print("\n");

      // Scalars as numbers, per-stream figures as arrays.
      auto per_stream = [](const std::string& key) {
        return key.rfind("stats-", 0) == 0 || key == "window-fps" ||
               key == "run-fps" || key.rfind("latency-", 0) == 0 ||
               key.rfind("frames-", 0) == 0 || key.rfind("first-", 0) == 0 ||
               key == "last-out-ms" || key == "reordered" || key == "lost" ||
               key == "unmatched";
      };
      std::vector<std::string> runs;
      for (const RunResult& r : c.runs)
        runs.push_back(gpufan_bench::RunJson(r, per_stream).str());
      bool ordered = !c.runs.empty();
      for (const RunResult& r : c.runs)
        ordered = ordered && r.ok;
      JsonObject o;
      o.Str("label", c.label)
          .Num("branch_instances", 2.0 * (c.spec.shared ? 1 : c.spec.streams))
          .Num("frames_per_stream", c.spec.frames)
          .Num("total_fps", fps)
          .Num("of_ideal", fps / ideal)
          .Num("vs_separate", fps / base_fps)
          .Raw("total_fps_runs", JsonArray(c.Ones("total-fps")))
          .Num("jain_window", c.MedianOf("jain-window"))
          .Num("jain_run", c.MedianOf("jain-run"))
          .Raw("window_fps_per_stream", JsonArray(c.PerStream("window-fps")))
          .Raw("latency_p50_ms_per_stream",
               JsonArray(c.PerStream("latency-p50-ms")))
          .Raw("latency_p99_ms_per_stream", JsonArray(p99))
          .Raw("latency_max_ms_per_stream",
               JsonArray(c.PerStream("latency-max-ms")))
          .Num("latency_p99_ms_median", Median(p99))
          .Num("latency_p99_ms_worst", worst_p99)
          .Num("threads_max", threads)
          .Num("threads_vs_separate", threads / base_threads)
          .Num("threads_idle", c.MedianOf("threads-idle"))
          .Num("rss_peak_kb", rss_peak)
          .Num("rss_idle_kb", rss_idle)
          .Num("rss_added_kb", rss_peak - rss_idle)
          .Num("rss_vs_separate", rss_peak / base_rss)
          .Bool("in_order", ordered && c.Total("reordered") == 0)
          .Num("frames_lost", c.Total("lost"))
          .Num("frames_in", c.Total("frames-in"))
          .Bool("start_barrier", c.spec.start_barrier)
          .Num("start_skew_ms", c.MedianOf("start-skew-ms"));
      if (c.spec.shared) {
        o.Raw("stats_delivered", JsonArray(c.PerStream("stats-delivered")))
            .Raw("stats_lost", JsonArray(c.PerStream("stats-lost")))
            .Raw("stats_leaky_dropped",
                 JsonArray(c.PerStream("stats-leaky-dropped")))
            .Raw("stats_wait_time_ns",
                 JsonArray(c.PerStream("stats-wait-time")))
            .Raw("stats_message", JsonArray(c.Ones("stats-message")));
      }
      o.Raw("runs", JoinJson(runs, "        "));
      json_configs.push_back(o.str());
    }
    JsonObject o;
    o.Str("name", v.name)
        .Bool("live", v.live)
        .Num("ideal_fps", ideal)
        .Num("demand_fps", demand)
        .Raw("configs", JoinJson(json_configs, "      "));
    json_variants.push_back(o.str());
  }
  g_print("load average: %.2f before, %.2f after\n", load_before, load_after);

  if (json) {
    const JsonObject machine =
        gpufan_bench::MachineJson(load_before, load_after);
    JsonObject root;
    root.Str("mode", mode)
        .Num("reps", n_reps)
        .Num("streams", streams)
        .Raw("devices_ms", JsonArray({fast_ms, slow_ms}))
        .Str("frame",
             std::to_string(width) + "x" + std::to_string(height) + " GRAY8")
        .Num("timer_slack_ns", static_cast<double>(timer_slack_ns))
        .Bool("ok", all_ok)
        .Raw("machine", machine.str())
        .Raw("variants", JoinJson(json_variants, "    "));
    if (!gpufan_json::WriteJsonFile(json, root.str()))
      return 1;
  }
  g_free(json);
  return all_ok ? 0 : 1;
}
