// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufan-bench: gpufanout/gpufanin measured side by side with GStreamer's own
// unordered fan-out (`roundrobin ! queue ! … ! funnel`), in one run, against
// two baselines:
//   baseline  `queue max-size-buffers=Q` (Q = gpufanout's queue-size, 4): as
//             deep as gpufanout's lane queues (a lane of microseconds, as in
//             the overhead scenario, queues up to 4 Q there)
//   stock     a plain `queue` (its defaults: 200 buffers, 10 MB, 1 s), what a
//             user writes
//
// Lanes are simulated by `identity sleep-time` (a lane that sleeps its service
// time per frame, as a device would be busy). Scenarios (see
// docs/performance.md for the method):
//   equal     1, 2, 4, 8 lanes of 5 ms: throughput against the ideal
//   uneven    2/4/8 ms lanes and a 1:10 pair, every policy: throughput against
//             the ideal (sum of the lanes' capacities) and the baseline;
//             latency the reorder window adds; its peak occupancy
//   dynamic   a lane slows down 4x mid-stream and speeds up again: frames
//             until the adaptive policy's shares settle
//   overhead  2 lanes without delay, small frames: ns per buffer, and
//             instructions per buffer under callgrind
// Every run of the pair checks the output order (buffer offsets 0, 1, 2, …
// at the sink) and fails on any reorder or loss. Runs of the pair and of the
// baseline alternate; each configuration is repeated and the medians taken.
//
// Output: a table on stdout, a JSON file (--json), a PNG via bench/plot.py.
// Run: bash bench/run.sh [--quick]   or
//      GST_PLUGIN_PATH=build/gst build/bench/gpufan-bench --json out/bench.json

#include <gst/gst.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench-run.h"
#include "gpufan-util.h"
#include "json-text.h"

namespace {

using gpufan_json::JoinJson;
using gpufan_json::JsonArray;
using gpufan_json::JsonObject;
using gpufan_util::Fmt;
using gpufan_util::Median;
using gpufan_util::NowNs;
using gpufan_util::Percentile;

// --- what to run ---

enum class Kind { kEqual, kUneven, kDynamic, kOverhead };

const char *KindName(Kind k) {
  switch (k) {
    case Kind::kEqual:
      return "equal";
    case Kind::kUneven:
      return "uneven";
    case Kind::kDynamic:
      return "dynamic";
    case Kind::kOverhead:
      return "overhead";
  }
  return "?";
}

// One pipeline run.
struct RunSpec {
  Kind kind = Kind::kEqual;
  bool gpufan = true;        // false: roundrobin ! queue ! … ! funnel
  bool stock_queue = false;  // baseline: a default `queue`, no size set
  std::string policy = "adaptive";
  std::vector<double> lanes_ms;  // service time per lane (0: no delay)
  bool weights = false;          // `weight` = lane speed (for `weighted`)
  guint frames = 1000;
  guint width = 64, height = 64;
  guint queue_size = 4;  // gpufanout queue-size, the baseline's queues
  // Lane `dyn_lane` runs `dyn_factor` times slower from stream frame
  // `dyn_from` until frame `dyn_to`.
  int dyn_lane = -1;
  double dyn_factor = 4.0;
  guint dyn_from = 0, dyn_to = 0;
  bool trace = true;  // per-frame lane and latency probes
  // --smoke: gpufanin never gives a frame up (stall-timeout at its maximum),
  // so that a loaded machine cannot turn a slow frame into a lost one.
  bool wait_for_every_frame = false;
};

struct RunResult {
  bool ok = false;
  std::string error;
  double seconds = 0, fps = 0;
  guint64 frames_out = 0;
  guint64 order_errors = 0;      // a frame other than the next expected one
  guint64 out_of_order = 0;      // a frame older than one already out
  std::vector<int> lane_of;      // per frame (trace)
  std::vector<double> extra_ms;  // fan-in sink -> src, per frame (trace)
  bool have_window_peak = false;
  guint window_peak = 0;
  // Frames that had entered the fan-out when the lane changed speed.
  guint64 change_at[2] = {0, 0};
  bool changed[2] = {false, false};
};

// --- probes ---

struct RunState;

struct LaneProbe {
  RunState *st = nullptr;
  int lane = 0;
  GstElement *identity = nullptr;
};

struct RunState {
  const RunSpec *spec = nullptr;
  RunResult *res = nullptr;
  std::atomic<int64_t> t_first{0};
  std::atomic<int64_t> t_eos{0};
  std::atomic<guint64> entered{0};
  std::mutex out_lock;  // the baseline's funnel pushes from every lane
  guint64 next_expected = 0;
  guint64 max_out = 0;
  std::vector<int64_t> t_in, t_out;
  std::vector<LaneProbe> lanes;
};

guint64 FrameIndex(GstBuffer *buf) {
  return GST_BUFFER_OFFSET(buf);
}

GstPadProbeReturn OnSource(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *st = static_cast<RunState *>(data);
  if (!(GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER))
    return GST_PAD_PROBE_OK;
  // Only the source thread gets here.
  if (st->t_first.load(std::memory_order_relaxed) == 0)
    st->t_first.store(NowNs(), std::memory_order_relaxed);
  st->entered.fetch_add(1, std::memory_order_relaxed);
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn OnSink(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *st = static_cast<RunState *>(data);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS)
      st->t_eos.store(NowNs());
    return GST_PAD_PROBE_OK;
  }
  const guint64 idx = FrameIndex(GST_PAD_PROBE_INFO_BUFFER(info));
  const int64_t now = st->spec->trace ? NowNs() : 0;
  std::lock_guard<std::mutex> lk(st->out_lock);
  RunResult& r = *st->res;
  if (idx != st->next_expected)
    r.order_errors++;
  if (r.frames_out > 0 && idx < st->max_out)
    r.out_of_order++;
  st->max_out = std::max(st->max_out, idx);
  st->next_expected = idx + 1;
  r.frames_out++;
  if (st->spec->trace && idx < st->t_out.size())
    st->t_out[idx] = now;
  return GST_PAD_PROBE_OK;
}

// Before a lane's identity: which lane got the frame; the slowing lane.
GstPadProbeReturn OnLane(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *lp = static_cast<LaneProbe *>(data);
  RunState *st = lp->st;
  const RunSpec& spec = *st->spec;
  const guint64 idx = FrameIndex(GST_PAD_PROBE_INFO_BUFFER(info));
  if (idx < st->res->lane_of.size())
    st->res->lane_of[idx] = lp->lane;
  if (lp->lane == spec.dyn_lane) {
    const double base_us = spec.lanes_ms[lp->lane] * 1000.0;
    for (int phase = 0; phase < 2; ++phase) {
      const guint at = phase == 0 ? spec.dyn_from : spec.dyn_to;
      if (st->res->changed[phase] || idx < at)
        continue;
      st->res->changed[phase] = true;
      st->res->change_at[phase] = st->entered.load();
      const double us = phase == 0 ? base_us * spec.dyn_factor : base_us;
      // This thread is the identity's streaming thread: the next chain call
      // sleeps the new time.
      g_object_set(lp->identity, "sleep-time",
                   static_cast<guint>(std::lround(us)), nullptr);
    }
  }
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn OnFanInSink(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *st = static_cast<RunState *>(data);
  const guint64 idx = FrameIndex(GST_PAD_PROBE_INFO_BUFFER(info));
  if (idx < st->t_in.size())
    st->t_in[idx] = NowNs();
  return GST_PAD_PROBE_OK;
}

// --- one run ---

std::string PipelineDescription(const RunSpec& s) {
  std::ostringstream p;
  p << "videotestsrc name=src pattern=black num-buffers=" << s.frames
    << " ! video/x-raw,format=GRAY8,width=" << s.width << ",height=" << s.height
    << ",framerate=30/1 ! ";
  if (s.gpufan)
    p << "gpufanout name=f policy=" << s.policy
      << " queue-size=" << s.queue_size << " gpufanin name=m"
      << (s.wait_for_every_frame ? " stall-timeout=3600000000000" : "");
  else
    p << "roundrobin name=f funnel name=m";
  p << " ! fakesink name=sink sync=false enable-last-sample=false";
  for (size_t k = 0; k < s.lanes_ms.size(); ++k) {
    p << "  f.src_" << k << " ! ";
    if (!s.gpufan && s.stock_queue)
      p << "queue ! ";
    else if (!s.gpufan)
      p << "queue max-size-buffers=" << s.queue_size
        << " max-size-bytes=0 max-size-time=0 ! ";
    p << "identity name=l" << k << " signal-handoffs=false sleep-time="
      << std::lround(s.lanes_ms[k] * 1000.0) << " ! m.sink_" << k;
  }
  return p.str();
}

void AddProbe(GstElement *pipeline, const char *element, const char *pad,
              GstPadProbeType type, GstPadProbeCallback cb, gpointer data) {
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline), element);
  GstPad *p = gst_element_get_static_pad(e, pad);
  gst_pad_add_probe(p, type, cb, data, nullptr);
  gst_object_unref(p);
  gst_object_unref(e);
}

RunResult RunOnce(const RunSpec& spec) {
  RunResult res;
  RunState st;
  st.spec = &spec;
  st.res = &res;
  if (spec.trace) {
    res.lane_of.assign(spec.frames, -1);
    st.t_in.assign(spec.frames, 0);
    st.t_out.assign(spec.frames, 0);
  }

  GError *err = nullptr;
  const std::string desc = PipelineDescription(spec);
  GstElement *pipeline = gst_parse_launch(desc.c_str(), &err);
  if (!pipeline || err) {
    res.error = std::string("cannot build the pipeline: ") +
                (err ? err->message : "?") + " (" + desc + ")";
    g_clear_error(&err);
    if (pipeline)
      gst_object_unref(pipeline);
    return res;
  }

  AddProbe(pipeline, "src", "src", GST_PAD_PROBE_TYPE_BUFFER, OnSource, &st);
  AddProbe(pipeline, "sink", "sink",
           static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                        GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
           OnSink, &st);
  const size_t n = spec.lanes_ms.size();
  st.lanes.resize(n);  // not resized again: probes keep pointers into it
  GstElement *fanout = gst_bin_get_by_name(GST_BIN(pipeline), "f");
  for (size_t k = 0; k < n; ++k) {
    const std::string name = "l" + std::to_string(k);
    GstElement *identity = gst_bin_get_by_name(GST_BIN(pipeline), name.c_str());
    st.lanes[k] = LaneProbe{&st, static_cast<int>(k), identity};
    if (spec.trace || spec.dyn_lane == static_cast<int>(k))
      AddProbe(pipeline, name.c_str(), "sink", GST_PAD_PROBE_TYPE_BUFFER,
               OnLane, &st.lanes[k]);
    const std::string sink_pad = "sink_" + std::to_string(k);
    if (spec.trace)
      AddProbe(pipeline, "m", sink_pad.c_str(), GST_PAD_PROBE_TYPE_BUFFER,
               OnFanInSink, &st);
    if (spec.gpufan && spec.weights && spec.lanes_ms[k] > 0) {
      const std::string src_pad = "src_" + std::to_string(k);
      GstPad *pad = gst_element_get_static_pad(fanout, src_pad.c_str());
      g_object_set(pad, "weight", 1.0 / spec.lanes_ms[k], nullptr);
      gst_object_unref(pad);
    }
  }
  gst_object_unref(fanout);

  // Generous: ten times what the slowest lane alone would need, at least 60 s.
  double slowest_ms = 0.0;
  for (double ms : spec.lanes_ms)
    slowest_ms =
        std::max(slowest_ms, ms * (spec.dyn_lane >= 0 ? spec.dyn_factor : 1.0));
  const GstClockTime timeout = std::max<GstClockTime>(
      60 * GST_SECOND,
      static_cast<GstClockTime>(10.0 * spec.frames * slowest_ms * GST_MSECOND));

  GstBus *bus = gst_element_get_bus(pipeline);
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE)
    res.error = "the pipeline does not start";
  const GstClockTime deadline = gst_util_get_timestamp() + timeout;
  bool done = !res.error.empty();
  while (!done) {
    const GstClockTime now = gst_util_get_timestamp();
    if (now >= deadline) {
      res.error = "timed out";
      break;
    }
    GstMessage *msg = gst_bus_timed_pop_filtered(
        bus, deadline - now,
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR |
                                    GST_MESSAGE_ELEMENT));
    if (!msg)
      continue;
    switch (GST_MESSAGE_TYPE(msg)) {
      case GST_MESSAGE_EOS:
        done = true;
        break;
      case GST_MESSAGE_ERROR:
        res.error = gpufan_util::PipelineError(msg);
        done = true;
        break;
      default: {
        const GstStructure *s = gst_message_get_structure(msg);
        if (s && gst_structure_has_name(s, "gpufan-stats"))
          res.have_window_peak =
              gst_structure_get_uint(s, "window-peak", &res.window_peak);
        break;
      }
    }
    gst_message_unref(msg);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  for (LaneProbe& lp : st.lanes)
    gst_object_unref(lp.identity);
  gst_object_unref(pipeline);
  if (!res.error.empty())
    return res;

  const int64_t t0 = st.t_first.load(), t1 = st.t_eos.load();
  res.seconds = static_cast<double>(t1 - t0) / 1e9;
  res.fps = res.seconds > 0 ? res.frames_out / res.seconds : 0.0;
  if (spec.trace) {
    for (guint i = 0; i < spec.frames; ++i) {
      if (st.t_in[i] > 0 && st.t_out[i] >= st.t_in[i])
        res.extra_ms.push_back((st.t_out[i] - st.t_in[i]) / 1e6);
    }
  }
  if (res.frames_out != spec.frames)
    res.error = "lost frames: " + std::to_string(res.frames_out) + " of " +
                std::to_string(spec.frames) + " came out";
  else if (spec.gpufan && res.order_errors > 0)
    res.error = std::to_string(res.order_errors) + " frames out of order";
  res.ok = res.error.empty();
  return res;
}

// --- statistics ---

double IdealFps(const std::vector<double>& lanes_ms) {
  double fps = 0;
  for (double ms : lanes_ms)
    fps += ms > 0 ? 1000.0 / ms : 0.0;
  return fps;
}

// What g_usleep(ms) really takes here, per nominal service time: a simulated
// lane cannot be faster than that.
using SleepCalibration = std::map<double, double>;

SleepCalibration CalibrateSleep(const std::vector<double>& ms_values,
                                int samples) {
  SleepCalibration c;
  for (double ms : ms_values) {
    if (ms <= 0 || c.count(ms))
      continue;
    const guint us = static_cast<guint>(std::lround(ms * 1000.0));
    const int64_t t0 = NowNs();
    for (int i = 0; i < samples; ++i)
      g_usleep(us);
    c[ms] = (NowNs() - t0) / 1e6 / samples;
  }
  return c;
}

std::vector<double> Calibrated(const std::vector<double>& lanes_ms,
                               const SleepCalibration& c) {
  std::vector<double> out;
  for (double ms : lanes_ms)
    out.push_back(c.count(ms) ? c.at(ms) : ms);
  return out;
}

// Settling: the first frame i >= from such that, for every window of `w`
// frames starting in [i, i + w], the share of `lane` is within `tol` (a
// fraction of `share`) of `share`. Returns i - from, or -1 if it never
// settles before `until`.
long SettleFrames(const std::vector<int>& lane_of, int lane, guint64 from,
                  guint64 until, double share, guint w, double tol) {
  until = std::min<guint64>(until, lane_of.size());
  if (until < from + 2 * w)
    return -1;
  std::vector<guint> prefix(lane_of.size() + 1, 0);
  for (size_t i = 0; i < lane_of.size(); ++i)
    prefix[i + 1] = prefix[i] + (lane_of[i] == lane ? 1 : 0);
  auto ok = [&](guint64 j) {
    const double s = (prefix[j + w] - prefix[j]) / static_cast<double>(w);
    return std::fabs(s - share) <= tol * share;
  };
  for (guint64 i = from; i + 2 * w <= until; ++i) {
    bool all = true;
    for (guint64 j = i; j <= i + w && all; ++j)
      all = ok(j);
    if (all)
      return static_cast<long>(i - from);
  }
  return -1;
}

// --- scenarios ---

struct Options {
  gboolean quick = FALSE;
  gboolean smoke = FALSE;
  gint reps = 0;
  gchar *json = nullptr;
  gchar *only = nullptr;  // comma-separated scenario names or kinds
  gboolean callgrind = FALSE;
  gboolean no_callgrind = FALSE;
  gint queue_size = 4;
  gint64 timer_slack_ns = 1;
  // internal: one overhead run, for callgrind
  gchar *single = nullptr;     // "gpufan", "baseline" or "stock"
  gchar *lanes_csv = nullptr;  // the dynamic scenario's lane per frame
  gint frames = 0;
};

// One configuration of a scenario: a baseline or the pair with a policy.
struct Config {
  std::string label;  // "baseline", "stock" or the policy
  RunSpec spec;
  std::vector<RunResult> runs;

  std::vector<double> Fps() const {
    std::vector<double> v;
    for (const RunResult& r : runs)
      if (r.ok)
        v.push_back(r.fps);
    return v;
  }
};

struct Scenario {
  std::string name;
  Kind kind;
  std::string title;
  std::vector<double> lanes_ms;
  guint frames = 0;
  double ideal_fps = 0;  // 0: no ideal (overhead)
  // The ideal with the lanes' measured sleep times (SleepCalibration).
  double achievable_fps = 0;
  std::vector<Config> configs;  // [0] the baseline, [1] stock, then gpufan
};

Scenario MakeScenario(const std::string& name, Kind kind,
                      const std::string& title,
                      const std::vector<double>& lanes_ms, guint frames,
                      const std::vector<std::string>& policies,
                      const Options& opt) {
  Scenario sc;
  sc.name = name;
  sc.kind = kind;
  sc.title = title;
  sc.lanes_ms = lanes_ms;
  sc.frames = frames;
  sc.ideal_fps = IdealFps(lanes_ms);
  RunSpec base;
  base.kind = kind;
  base.lanes_ms = lanes_ms;
  base.frames = frames;
  base.queue_size = static_cast<guint>(opt.queue_size);
  base.wait_for_every_frame = opt.smoke;
  if (kind == Kind::kOverhead) {
    base.width = base.height = 16;
    base.trace = false;
    sc.ideal_fps = 0;
  }
  Config baseline{"baseline", base, {}};
  baseline.spec.gpufan = false;
  sc.configs.push_back(baseline);
  Config stock{"stock", base, {}};
  stock.spec.gpufan = false;
  stock.spec.stock_queue = true;
  sc.configs.push_back(stock);
  for (const std::string& p : policies) {
    Config c{p, base, {}};
    c.spec.policy = p;
    c.spec.weights = p == "weighted";
    sc.configs.push_back(c);
  }
  return sc;
}

std::vector<Scenario> MakeScenarios(const Options& opt) {
  // Frame counts: normal runs last about 2 s per pair run on ideal lanes.
  const double scale = opt.smoke ? 0.1 : opt.quick ? 0.3 : 1.0;
  auto frames = [&](double n) {
    return static_cast<guint>(std::max(50.0, std::round(n * scale)));
  };
  const std::vector<std::string> all = {"round-robin", "least-loaded",
                                        "weighted", "adaptive"};
  std::vector<Scenario> out;
  for (int lanes : {1, 2, 4, 8}) {
    out.push_back(MakeScenario("equal-" + std::to_string(lanes) + "x5ms",
                               Kind::kEqual, std::to_string(lanes) + " x 5 ms",
                               std::vector<double>(lanes, 5.0),
                               frames(400.0 * lanes), {"adaptive"}, opt));
  }
  out.push_back(MakeScenario("uneven-2-4-8ms", Kind::kUneven, "2/4/8 ms",
                             {2.0, 4.0, 8.0}, frames(2000), all, opt));
  out.push_back(MakeScenario("uneven-1-10ms", Kind::kUneven, "1/10 ms",
                             {1.0, 10.0}, frames(1500), all, opt));
  {
    const guint n = frames(2400);
    Scenario sc =
        MakeScenario("dynamic-2x4ms", Kind::kDynamic, "2 x 4 ms, one 4x slower",
                     {4.0, 4.0}, n, {"adaptive"}, opt);
    for (Config& c : sc.configs) {
      c.spec.dyn_lane = 1;
      c.spec.dyn_factor = 4.0;
      c.spec.dyn_from = n / 3;
      c.spec.dyn_to = 2 * n / 3;
    }
    out.push_back(sc);
  }
  out.push_back(MakeScenario("overhead-2x0ms", Kind::kOverhead,
                             "2 lanes, no delay, 16x16", {0.0, 0.0},
                             opt.smoke   ? 2000
                             : opt.quick ? 50000
                                         : 200000,
                             {"adaptive"}, opt));
  if (opt.only) {
    std::vector<Scenario> kept;
    gchar **names = g_strsplit(opt.only, ",", -1);
    for (Scenario& sc : out) {
      for (gchar **n = names; *n; ++n)
        if (sc.name == *n || std::string(KindName(sc.kind)) == *n) {
          kept.push_back(std::move(sc));
          break;
        }
    }
    g_strfreev(names);
    out = std::move(kept);
  }
  return out;
}

// --- callgrind ---

struct Callgrind {
  bool ran = false;
  std::string note;
  double baseline_ir = NAN, stock_ir = NAN, gpufan_ir = NAN;  // per buffer
};

std::optional<double> CallgrindTotal(const std::string& exe,
                                     const std::string& which, guint frames,
                                     std::string *note) {
  gchar *dir = g_dir_make_tmp("gpufan-bench-XXXXXX", nullptr);
  if (!dir) {
    *note = "no temporary directory";
    return std::nullopt;
  }
  const std::string out = std::string(dir) + "/callgrind.out";
  const std::string out_arg = "--callgrind-out-file=" + out;
  const std::string frames_arg = std::to_string(frames);
  const gchar *argv[] = {"valgrind",  "--tool=callgrind", out_arg.c_str(),
                         exe.c_str(), "--single",         which.c_str(),
                         "--frames",  frames_arg.c_str(), nullptr};
  gint status = 0;
  GError *err = nullptr;
  gchar *child_err = nullptr;
  std::optional<double> total;
  if (!g_spawn_sync(nullptr, const_cast<gchar **>(argv), nullptr,
                    G_SPAWN_SEARCH_PATH, nullptr, nullptr, nullptr, &child_err,
                    &status, &err)) {
    *note = std::string("valgrind did not run: ") + err->message;
    g_clear_error(&err);
  } else if (!g_spawn_check_wait_status(status, nullptr)) {
    *note = "valgrind run failed: " + std::string(child_err ? child_err : "");
  } else {
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("summary:", 0) == 0 || line.rfind("totals:", 0) == 0) {
        total = std::strtod(line.c_str() + line.find(':') + 1, nullptr);
        break;
      }
    }
    if (!total)
      *note = "no instruction total in the callgrind output";
  }
  g_free(child_err);
  std::remove(out.c_str());
  rmdir(dir);
  g_free(dir);
  return total;
}

Callgrind RunCallgrind(const Options& opt) {
  Callgrind cg;
  gchar *valgrind = g_find_program_in_path("valgrind");
  if (!valgrind) {
    cg.note = "skipped: valgrind not installed (apt-get install valgrind)";
    return cg;
  }
  g_free(valgrind);
  gchar *exe = g_file_read_link("/proc/self/exe", nullptr);
  // The difference of two run lengths removes the start-up cost.
  const guint n1 = opt.quick ? 1000 : 2000, n2 = opt.quick ? 5000 : 20000;
  for (const std::string which : {"baseline", "stock", "gpufan"}) {
    std::optional<double> a = CallgrindTotal(exe, which, n1, &cg.note);
    std::optional<double> b =
        a ? CallgrindTotal(exe, which, n2, &cg.note) : std::nullopt;
    if (!b)
      break;
    (which == "gpufan"  ? cg.gpufan_ir
     : which == "stock" ? cg.stock_ir
                        : cg.baseline_ir) = (*b - *a) / (n2 - n1);
  }
  g_free(exe);
  cg.ran = std::isfinite(cg.gpufan_ir) && std::isfinite(cg.baseline_ir) &&
           std::isfinite(cg.stock_ir);
  if (cg.ran)
    cg.note = "valgrind --tool=callgrind, (I(" + std::to_string(n2) + ") - I(" +
              std::to_string(n1) + ")) / " + std::to_string(n2 - n1) +
              ", all threads";
  return cg;
}

// Mean real duration of g_usleep(us): how exact a simulated lane is.
// --- report ---

struct Summary {
  double median_fps = NAN;
  double of_ideal = NAN;
  double of_achievable = NAN;
  double vs_baseline = NAN;
  double vs_stock = NAN;
  double lat_median_ms = NAN, lat_p99_ms = NAN, lat_max_ms = NAN;
  double window_peak = NAN;
  double ns_per_buffer = NAN;
  double out_of_order = NAN;      // median count per run
  std::vector<double> settle[2];  // dynamic: frames, per run (-1: never)
};

Summary Summarize(const Scenario& sc, const Config& c, double baseline_fps,
                  double stock_fps) {
  Summary s;
  s.median_fps = Median(c.Fps());
  if (sc.ideal_fps > 0) {
    s.of_ideal = s.median_fps / sc.ideal_fps;
    s.of_achievable = s.median_fps / sc.achievable_fps;
  }
  s.vs_baseline = s.median_fps / baseline_fps;
  s.vs_stock = s.median_fps / stock_fps;
  if (sc.kind == Kind::kOverhead)
    s.ns_per_buffer = 1e9 / s.median_fps;
  std::vector<double> med, p99, mx, peak, ooo;
  for (const RunResult& r : c.runs) {
    if (!r.ok)
      continue;
    ooo.push_back(static_cast<double>(r.out_of_order));
    if (!r.extra_ms.empty()) {
      med.push_back(Median(r.extra_ms));
      p99.push_back(Percentile(r.extra_ms, 99));
      mx.push_back(*std::max_element(r.extra_ms.begin(), r.extra_ms.end()));
    }
    if (r.have_window_peak)
      peak.push_back(r.window_peak);
    if (sc.kind == Kind::kDynamic && c.spec.gpufan) {
      // Ideal share of the changing lane while it is slow and after.
      const int d = c.spec.dyn_lane;
      std::vector<double> slowed = c.spec.lanes_ms;
      slowed[d] *= c.spec.dyn_factor;
      const double slow_share = 1000.0 / slowed[d] / IdealFps(slowed);
      const double fast_share =
          1000.0 / c.spec.lanes_ms[d] / IdealFps(c.spec.lanes_ms);
      const guint w = std::min<guint>(100, c.spec.frames / 12);
      s.settle[0].push_back(SettleFrames(r.lane_of, d, r.change_at[0],
                                         r.change_at[1], slow_share, w, 0.10));
      s.settle[1].push_back(SettleFrames(r.lane_of, d, r.change_at[1],
                                         c.spec.frames, fast_share, w, 0.10));
    }
  }
  s.lat_median_ms = Median(med);
  s.lat_p99_ms = Median(p99);
  s.lat_max_ms = mx.empty() ? NAN : *std::max_element(mx.begin(), mx.end());
  s.window_peak =
      peak.empty() ? NAN : *std::max_element(peak.begin(), peak.end());
  s.out_of_order = Median(ooo);
  return s;
}

int MedianSettle(const std::vector<double>& v) {
  // The lower median; a run that never settled (-1) counts as the worst.
  std::vector<double> w = v;
  for (double& x : w)
    if (x < 0)
      x = 1e18;
  if (w.empty())
    return -1;
  std::sort(w.begin(), w.end());
  const double m = w[(w.size() - 1) / 2];
  return m < 1e18 ? static_cast<int>(m) : -1;
}

}  // namespace

int main(int argc, char **argv) {
  Options opt;
  // A lane is a sleep: let the kernel wake it as close to its service time
  // as it can (the default slack is 50 us, 1 % of a 5 ms lane). Set before
  // anything starts a thread (option parsing initializes GStreamer): every
  // thread of both pipelines inherits it.
  opt.timer_slack_ns =
      gpufan_util::SetTimerSlack(argc, argv, opt.timer_slack_ns);
  GOptionEntry entries[] = {
      {"quick", 0, 0, G_OPTION_ARG_NONE, &opt.quick,
       "Fewer frames and 2 repetitions (about a minute)", nullptr},
      {"smoke", 0, 0, G_OPTION_ARG_NONE, &opt.smoke,
       "A few hundred frames, 1 repetition, no callgrind (seconds; for tests)",
       nullptr},
      {"reps", 0, 0, G_OPTION_ARG_INT, &opt.reps,
       "Repetitions per configuration (default 5; --quick 2; --smoke 1)", "N"},
      {"json", 0, 0, G_OPTION_ARG_FILENAME, &opt.json,
       "Write the results to FILE as JSON", "FILE"},
      {"only", 0, 0, G_OPTION_ARG_STRING, &opt.only,
       "Run only these scenarios or kinds (comma-separated: equal, uneven, "
       "dynamic, overhead, or a scenario name)",
       "LIST"},
      {"callgrind", 0, 0, G_OPTION_ARG_NONE, &opt.callgrind,
       "Also count instructions under callgrind in --quick mode", nullptr},
      {"no-callgrind", 0, 0, G_OPTION_ARG_NONE, &opt.no_callgrind,
       "Never run callgrind", nullptr},
      {"queue-size", 0, 0, G_OPTION_ARG_INT, &opt.queue_size,
       "gpufanout queue-size and the baseline's queue max-size-buffers "
       "(default 4; the stock baseline keeps queue's defaults)",
       "N"},
      {"lanes-csv", 0, 0, G_OPTION_ARG_FILENAME, &opt.lanes_csv,
       "Write the lane of every frame of the dynamic scenario's last adaptive "
       "run to FILE (frame,lane; and the frames at the speed changes)",
       "FILE"},
      {"timer-slack-ns", 0, 0, G_OPTION_ARG_INT64, &opt.timer_slack_ns,
       "Timer slack of every thread (default 1; the kernel's default is "
       "50000): how close to its service time a sleeping lane wakes",
       "NS"},
      {"single", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &opt.single,
       "One overhead run of 'gpufan', 'baseline' or 'stock' (for callgrind)",
       "WHICH"},
      {"frames", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &opt.frames,
       "Frames of the --single run", "N"},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  if (!gpufan_util::ParseOptions(
          entries, "- gpufanout/gpufanin against roundrobin ! queue ! funnel",
          nullptr, &argc, &argv) ||
      !gpufan_util::GpufanoutFound())
    return 2;

  if (opt.single) {
    RunSpec spec;
    spec.kind = Kind::kOverhead;
    spec.gpufan = g_strcmp0(opt.single, "gpufan") == 0;
    spec.stock_queue = g_strcmp0(opt.single, "stock") == 0;
    if (!spec.gpufan && !spec.stock_queue &&
        g_strcmp0(opt.single, "baseline") != 0) {
      g_printerr("--single: 'gpufan', 'baseline' or 'stock'\n");
      return 2;
    }
    spec.lanes_ms = {0.0, 0.0};
    spec.width = spec.height = 16;
    spec.trace = false;
    spec.frames = opt.frames > 0 ? opt.frames : 10000;
    RunResult r = RunOnce(spec);
    if (!r.ok)
      g_printerr("%s\n", r.error.c_str());
    return r.ok ? 0 : 1;
  }

  const int reps = opt.reps > 0 ? opt.reps : opt.smoke ? 1 : opt.quick ? 2 : 5;
  const char *mode = opt.smoke ? "smoke" : opt.quick ? "quick" : "full";
  const double load_before = gpufan_util::LoadAverage();
  std::vector<Scenario> scenarios = MakeScenarios(opt);
  std::vector<double> service_ms;
  for (const Scenario& sc : scenarios) {
    for (double ms : sc.lanes_ms) {
      service_ms.push_back(ms);
      if (sc.kind == Kind::kDynamic)
        service_ms.push_back(ms * sc.configs[0].spec.dyn_factor);
    }
  }
  const SleepCalibration sleep = CalibrateSleep(service_ms, opt.smoke   ? 3
                                                            : opt.quick ? 10
                                                                        : 30);
  std::string sleep_note;
  for (const auto& [ms, real] : sleep)
    sleep_note += Fmt(" %g", ms) + Fmt("->%.3f", real);
  g_print("gpufan-bench (%s): %d repetition(s); load %.2f\n", mode, reps,
          load_before);
  g_print("g_usleep, nominal->measured ms:%s\n", sleep_note.c_str());
  for (Scenario& sc : scenarios) {
    const std::vector<double> real = Calibrated(sc.lanes_ms, sleep);
    sc.achievable_fps = IdealFps(real);
    if (sc.kind == Kind::kDynamic) {
      // Each part of the stream at the capacity of the lanes then.
      const RunSpec& d = sc.configs[0].spec;
      auto phases = [&](const std::vector<double>& lanes,
                        const std::vector<double>& slowed) {
        const double a = d.dyn_from, b = d.dyn_to - d.dyn_from,
                     c = d.frames - d.dyn_to;
        return d.frames / ((a + c) / IdealFps(lanes) + b / IdealFps(slowed));
      };
      std::vector<double> slowed = sc.lanes_ms;
      slowed[d.dyn_lane] *= d.dyn_factor;
      sc.ideal_fps = phases(sc.lanes_ms, slowed);
      sc.achievable_fps = phases(real, Calibrated(slowed, sleep));
    }
  }
  bool all_ok = true;
  bool order_ok = true;
  for (Scenario& sc : scenarios) {
    g_print("%s:", sc.name.c_str());
    for (int rep = 0; rep < reps; ++rep) {
      // Alternate: the baselines, then each policy, in every repetition.
      for (Config& c : sc.configs) {
        RunResult r = RunOnce(c.spec);
        if (!r.ok) {
          all_ok = false;
          if (c.spec.gpufan && r.order_errors > 0)
            order_ok = false;
          g_printerr("\n  %s run %d FAILED: %s\n", c.label.c_str(), rep,
                     r.error.c_str());
        }
        g_print(" %s", r.ok ? "." : "x");
        if (opt.lanes_csv && sc.kind == Kind::kDynamic && c.spec.gpufan &&
            r.ok) {
          std::ofstream csv(opt.lanes_csv);
          csv << "# slowed at frame " << r.change_at[0] << ", restored at "
              << r.change_at[1] << "\nframe,lane\n";
          for (size_t i = 0; i < r.lane_of.size(); ++i)
            csv << i << "," << r.lane_of[i] << "\n";
        }
        c.runs.push_back(std::move(r));
      }
    }
    g_print("\n");
  }

  Callgrind cg;
  const bool want_cg =
      !opt.no_callgrind && !opt.smoke && (!opt.quick || opt.callgrind) &&
      std::any_of(scenarios.begin(), scenarios.end(),
                  [](const Scenario& s) { return s.kind == Kind::kOverhead; });
  if (want_cg) {
    g_print("callgrind: counting instructions per buffer (slow)...\n");
    cg = RunCallgrind(opt);
  } else {
    const bool overhead = std::any_of(
        scenarios.begin(), scenarios.end(),
        [](const Scenario& s) { return s.kind == Kind::kOverhead; });
    cg.note = opt.smoke || opt.no_callgrind ? "skipped"
              : !overhead                   ? "skipped: no overhead scenario"
                          : "skipped in --quick mode (--callgrind runs it)";
  }
  const double load_after = gpufan_util::LoadAverage();

  // Table and JSON.
  g_print("\n%-16s %-13s %9s %8s %8s %7s %7s %8s %8s %6s %s\n", "scenario",
          "pipeline", "fps", "of ideal", "of real", "x base", "x stock",
          "lat p50", "lat p99", "peak", "notes");
  g_print("%-16s %-13s %9s %8s %8s %7s %7s %8s %8s %6s\n", "", "", "(median)",
          "", "sleeps", "", "", "(ms)", "(ms)", "window");
  std::vector<std::string> json_scenarios;
  for (const Scenario& sc : scenarios) {
    const double baseline_fps = Median(sc.configs[0].Fps());
    const double stock_fps = Median(sc.configs[1].Fps());
    std::vector<std::string> json_configs;
    for (const Config& c : sc.configs) {
      const Summary s = Summarize(sc, c, baseline_fps, stock_fps);
      std::string notes;
      if (sc.kind == Kind::kOverhead)
        notes = Fmt("%.0f ns/buffer", s.ns_per_buffer);
      if (!c.spec.gpufan && s.out_of_order > 0)
        notes += (notes.empty() ? "" : ", ") +
                 Fmt("%.0f frames out of order", s.out_of_order);
      if (sc.kind == Kind::kDynamic && c.spec.gpufan) {
        const int a = MedianSettle(s.settle[0]), b = MedianSettle(s.settle[1]);
        notes += "settles in " +
                 (a < 0 ? std::string("never") : std::to_string(a)) + " / " +
                 (b < 0 ? std::string("never") : std::to_string(b)) +
                 " frames (slow-down / speed-up)";
      }
      g_print(
          "%-16s %-13s %9s %8s %8s %7s %7s %8s %8s %6s %s\n", sc.name.c_str(),
          c.label.c_str(), Fmt("%.1f", s.median_fps).c_str(),
          Fmt("%.1f%%", 100 * s.of_ideal).c_str(),
          Fmt("%.1f%%", 100 * s.of_achievable).c_str(),
          Fmt("%.2f", s.vs_baseline).c_str(), Fmt("%.2f", s.vs_stock).c_str(),
          Fmt("%.2f", s.lat_median_ms).c_str(),
          Fmt("%.2f", s.lat_p99_ms).c_str(), Fmt("%.0f", s.window_peak).c_str(),
          notes.c_str());

      std::vector<std::string> runs;
      for (const RunResult& r : c.runs) {
        JsonObject o;
        o.Bool("ok", r.ok)
            .Num("fps", r.fps)
            .Num("seconds", r.seconds)
            .Num("frames_out", r.frames_out)
            .Num("order_errors", r.order_errors)
            .Num("out_of_order", r.out_of_order);
        if (!r.error.empty())
          o.Str("error", r.error);
        if (r.have_window_peak)
          o.Num("window_peak", r.window_peak);
        if (!r.extra_ms.empty())
          o.Num("latency_p50_ms", Median(r.extra_ms))
              .Num("latency_p99_ms", Percentile(r.extra_ms, 99));
        if (sc.kind == Kind::kDynamic)
          o.Num("changed_at_frame", r.change_at[0])
              .Num("restored_at_frame", r.change_at[1]);
        runs.push_back(o.str());
      }
      bool config_order_ok = true;
      for (const RunResult& r : c.runs)
        config_order_ok = config_order_ok && r.order_errors == 0 &&
                          r.frames_out == c.spec.frames;
      JsonObject o;
      o.Str("label", c.label)
          .Str("pipeline", c.spec.gpufan ? "gpufan" : "baseline")
          .Num("median_fps", s.median_fps)
          .Num("of_ideal", s.of_ideal)
          .Num("of_achievable", s.of_achievable)
          .Num("vs_baseline", s.vs_baseline)
          .Num("vs_stock", s.vs_stock)
          .Raw("fps", JsonArray(c.Fps()))
          .Bool("ordered", config_order_ok)
          .Num("out_of_order_median", s.out_of_order);
      if (c.spec.gpufan)
        o.Str("policy", c.spec.policy);
      else
        o.Str("queue", c.spec.stock_queue
                           ? "queue"
                           : "queue max-size-buffers=" +
                                 std::to_string(c.spec.queue_size) +
                                 " max-size-bytes=0 max-size-time=0");
      if (std::isfinite(s.lat_median_ms))
        o.Num("latency_p50_ms", s.lat_median_ms)
            .Num("latency_p99_ms", s.lat_p99_ms)
            .Num("latency_max_ms", s.lat_max_ms);
      if (std::isfinite(s.window_peak))
        o.Num("window_peak", s.window_peak);
      if (sc.kind == Kind::kOverhead) {
        o.Num("ns_per_buffer", s.ns_per_buffer);
        o.Num("callgrind_ir_per_buffer", c.spec.gpufan        ? cg.gpufan_ir
                                         : c.spec.stock_queue ? cg.stock_ir
                                                              : cg.baseline_ir);
      }
      if (sc.kind == Kind::kDynamic && c.spec.gpufan)
        o.Raw("settle_frames_slowdown", JsonArray(s.settle[0]))
            .Raw("settle_frames_speedup", JsonArray(s.settle[1]))
            .Num("settle_frames_slowdown_median", MedianSettle(s.settle[0]))
            .Num("settle_frames_speedup_median", MedianSettle(s.settle[1]));
      o.Raw("runs", JoinJson(runs, "        "));
      json_configs.push_back(o.str());
    }
    std::vector<double> lanes = sc.lanes_ms;
    JsonObject o;
    o.Str("name", sc.name)
        .Str("kind", KindName(sc.kind))
        .Str("title", sc.title)
        .Raw("lanes_ms", JsonArray(lanes))
        .Num("frames", sc.frames)
        .Num("ideal_fps", sc.ideal_fps > 0 ? sc.ideal_fps : NAN)
        .Num("achievable_fps", sc.ideal_fps > 0 ? sc.achievable_fps : NAN)
        .Raw("configs", JoinJson(json_configs, "      "));
    json_scenarios.push_back(o.str());
  }
  g_print("callgrind: %s\n", cg.note.c_str());
  if (cg.ran)
    g_print(
        "  instructions per buffer: baseline %.0f, stock %.0f, gpufan %.0f\n",
        cg.baseline_ir, cg.stock_ir, cg.gpufan_ir);
  g_print("load average: %.2f before, %.2f after\n", load_before, load_after);

  if (opt.json) {
    JsonObject machine = gpufan_bench::MachineJson(load_before, load_after);
    machine.Raw("usleep_ms", [&] {
      JsonObject o;
      for (const auto& [ms, real] : sleep)
        o.Num(Fmt("%g", ms), real);
      return o.str();
    }());
    JsonObject callgrind;
    callgrind.Bool("ran", cg.ran)
        .Str("note", cg.note)
        .Num("baseline_ir_per_buffer", cg.baseline_ir)
        .Num("stock_ir_per_buffer", cg.stock_ir)
        .Num("gpufan_ir_per_buffer", cg.gpufan_ir);
    JsonObject root;
    root.Str("mode", mode)
        .Num("reps", reps)
        .Num("queue_size", opt.queue_size)
        .Num("timer_slack_ns", static_cast<double>(opt.timer_slack_ns))
        .Bool("ok", all_ok)
        .Bool("order_ok", order_ok)
        .Raw("machine", machine.str())
        .Raw("callgrind", callgrind.str())
        .Raw("scenarios", JoinJson(json_scenarios, "    "));
    std::ofstream out(opt.json);
    out << root.str() << "\n";
    if (!out) {
      g_printerr("cannot write %s\n", opt.json);
      return 1;
    }
    g_print("wrote %s\n", opt.json);
  }
  g_free(opt.json);
  g_free(opt.only);
  g_free(opt.single);
  g_free(opt.lanes_csv);
  if (!order_ok)
    g_printerr("gpufan-bench: OUTPUT ORDER CHECK FAILED\n");
  return all_ok ? 0 : 1;
}
