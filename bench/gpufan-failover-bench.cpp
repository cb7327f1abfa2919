// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufan-failover-bench: what replay (on-lane-error=replay) costs and how
// fast it recovers, measured in one run against its baseline.
//
//   throughput  gpufanbin, 2 lanes, no error injected: frames per second
//               with on-lane-error=replay against fail (which keeps no
//               reference to the frames), for a pass-through branch
//               (identity) and an in-place one (videobalance, which writes
//               into the frame: with the fan-out's reference the frame is
//               not writable and the branch copies it first). Runs of the
//               two alternate; medians and their ratio.
//   recovery    4 lanes of `identity sleep-time` (a service time S per
//               frame); lane 1 fails on a frame: with an error (identity
//               error-after), and blocked for good inside its push
//               (on-stall=replay, stall-timeout T). Measured: from the
//               failure (the lane-failed message; for the block, from the
//               moment the push blocked) to the failing frame leaving
//               gpufanin. The goal: at most S (plus T for a stall).
//
// Every run checks that every frame left once and in order, and fails if
// not. Output: a table on stdout and JSON (--json FILE).
// Run: GST_PLUGIN_PATH=build/gst build/bench/gpufan-failover-bench [--quick]

#include <gst/gst.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpufan-util.h"
#include "json-text.h"

namespace {

using gpufan_util::NowNs;

// 0 when there is none (gpufan_util::Median: NaN).
double Median(std::vector<double> v) {
  return v.empty() ? 0.0 : gpufan_util::Median(std::move(v));
}

// What the sink saw: each frame's offset and when it arrived.
struct SinkLog {
  std::mutex mutex;
  std::vector<uint64_t> offsets;
  std::vector<int64_t> times;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info, gpointer d) {
    auto *log = static_cast<SinkLog *>(d);
    GstBuffer *b = GST_PAD_PROBE_INFO_BUFFER(info);
    std::lock_guard<std::mutex> lock(log->mutex);
    log->offsets.push_back(GST_BUFFER_OFFSET(b));
    log->times.push_back(NowNs());
    return GST_PAD_PROBE_OK;
  }
  bool InOrder(uint64_t frames) const {
    if (offsets.size() != frames)
      return false;
    for (uint64_t i = 0; i < frames; i++)
      if (offsets[i] != i)
        return false;
    return true;
  }
  int64_t TimeOf(uint64_t offset) const {
    for (size_t i = 0; i < offsets.size(); i++)
      if (offsets[i] == offset)
        return times[i];
    return -1;
  }
};

// Blocks the pushes through a pad from frame `at` on until Open().
struct Block {
  uint64_t at = 0;
  std::mutex mutex;
  std::condition_variable cond;
  bool open = false;
  int64_t blocked_ns = -1;
  uint64_t blocked_frame = 0;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info, gpointer d) {
    auto *b = static_cast<Block *>(d);
    const uint64_t offset = GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info));
    std::unique_lock<std::mutex> lock(b->mutex);
    if (offset < b->at || b->open)
      return GST_PAD_PROBE_OK;
    if (b->blocked_ns < 0) {
      b->blocked_ns = NowNs();
      b->blocked_frame = offset;
    }
    b->cond.wait(lock, [b] { return b->open; });
    return GST_PAD_PROBE_OK;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
    cond.notify_all();
  }
};

// The frames that entered an element (its sink pad), in order.
struct EntryLog {
  std::mutex mutex;
  std::vector<uint64_t> offsets;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info, gpointer d) {
    auto *log = static_cast<EntryLog *>(d);
    std::lock_guard<std::mutex> lock(log->mutex);
    log->offsets.push_back(GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info)));
    return GST_PAD_PROBE_OK;
  }
};

GstElement *LaneElement(GstElement *pipeline, int lane, const char *name) {
  GstElement *bin = gst_bin_get_by_name(GST_BIN(pipeline), "bin");
  const std::string lane_name = "lane" + std::to_string(lane);
  GstElement *l = gst_bin_get_by_name(GST_BIN(bin), lane_name.c_str());
  gst_object_unref(bin);
  if (!l)
    return nullptr;
  GstElement *e = gst_bin_get_by_name(GST_BIN(l), name);
  gst_object_unref(l);
  return e;
}

void AddProbe(GstElement *e, const char *pad_name, GstPadProbeCallback cb,
              gpointer data) {
  GstPad *pad = gst_element_get_static_pad(e, pad_name);
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, cb, data, nullptr);
  gst_object_unref(pad);
}

struct RunResult {
  bool ok = false;         // EOS, every frame once and in order
  double seconds = 0;      // from PLAYING to EOS
  int64_t failed_ns = -1;  // when the lane-failed message was posted
};

GstBusSyncReply RecordFailure(GstBus *, GstMessage *msg, gpointer d) {
  const GstStructure *s = gst_message_get_structure(msg);
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ELEMENT && s &&
      gst_structure_has_name(s, "gpufan-lane-failed")) {
    auto *failed = static_cast<std::atomic<int64_t> *>(d);
    int64_t none = -1;
    failed->compare_exchange_strong(none, NowNs());
  }
  return GST_BUS_PASS;
}

// Plays `description` (a videotestsrc named src, gpufanbin named bin, a sink
// named out) to EOS. `prepare` runs in READY (the lanes exist),
// `before_stop` before it goes to NULL (a blocked push must end first).
RunResult Play(
    const std::string& description, uint64_t frames, SinkLog *log,
    const std::function<void(GstElement *)>& prepare,
    const std::function<void()>& before_stop = [] {}) {
  RunResult r;
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &error);
  if (!pipeline) {
    std::fprintf(stderr, "failover-bench: %s\n", error->message);
    g_clear_error(&error);
    return r;
  }
  std::atomic<int64_t> failed{-1};
  GstBus *bus = gst_element_get_bus(pipeline);
  gst_bus_set_sync_handler(bus, RecordFailure, &failed, nullptr);
  gst_element_set_state(pipeline, GST_STATE_READY);
  GstElement *out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  AddProbe(out, "sink", SinkLog::Probe, log);
  gst_object_unref(out);
  prepare(pipeline);
  const int64_t start = NowNs();
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstMessage *msg = gst_bus_timed_pop_filtered(
      bus, 120 * GST_SECOND,
      static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  r.seconds = static_cast<double>(NowNs() - start) / 1e9;
  r.ok =
      msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS && log->InOrder(frames);
  if (msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
    GError *err = nullptr;
    gst_message_parse_error(msg, &err, nullptr);
    std::fprintf(stderr, "failover-bench: ERROR %s\n", err->message);
    g_clear_error(&err);
  }
  if (msg)
    gst_message_unref(msg);
  r.failed_ns = failed.load();
  before_stop();
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  return r;
}

struct ThroughputRow {
  std::string branch;
  double fail_fps = 0, replay_fps = 0;
  bool ok = true;
};

ThroughputRow Throughput(const std::string& branch, uint64_t frames, int reps) {
  ThroughputRow row;
  row.branch = branch;
  std::vector<double> fail, replay;
  for (int i = 0; i < reps; i++) {
    for (const char *mode : {"fail", "replay"}) {
      const std::string d =
          "videotestsrc num-buffers=" + std::to_string(frames) +
          " ! video/x-raw,format=I420,width=1280,height=720 ! gpufanbin "
          "name=bin lanes=2 on-lane-error=" +
          mode + " branch=\"" + branch + "\" ! fakesink name=out";
      SinkLog log;
      const RunResult r = Play(d, frames, &log, [](GstElement *) {});
      row.ok &= r.ok;
      (std::string(mode) == "fail" ? fail : replay)
          .push_back(static_cast<double>(frames) / r.seconds);
    }
  }
  row.fail_fps = Median(fail);
  row.replay_fps = Median(replay);
  return row;
}

struct RecoveryRow {
  std::string fault;
  double service_ms = 0, stall_timeout_ms = 0;
  std::vector<double> ms;  // failure to the failing frame out, per run
  bool ok = true;
};

constexpr int kServiceUs = 5000;

std::string FourSlowLanes(uint64_t frames, const std::string& settings) {
  return "videotestsrc name=src num-buffers=" + std::to_string(frames) +
         " ! video/x-raw,width=64,height=64 ! gpufanbin name=bin lanes=4 "
         "policy=round-robin " +
         settings + " branch=\"identity name=work sleep-time=" +
         std::to_string(kServiceUs) + "\" ! fakesink name=out";
}

RecoveryRow RecoverFromError(uint64_t frames, int reps) {
  RecoveryRow row;
  row.fault = "error";
  row.service_ms = kServiceUs / 1000.0;
  for (int i = 0; i < reps; i++) {
    SinkLog log;
    EntryLog entered;
    const RunResult r =
        Play(FourSlowLanes(frames, ""), frames, &log, [&](GstElement *p) {
          GstElement *work = LaneElement(p, 1, "work");
          g_object_set(work, "error-after", static_cast<gint>(frames / 8),
                       nullptr);
          AddProbe(work, "sink", EntryLog::Probe, &entered);
          gst_object_unref(work);
        });
    row.ok &= r.ok && r.failed_ns >= 0;
    // The failing frame: the last lane 1 took (the error stops it there).
    if (r.ok && r.failed_ns >= 0 && !entered.offsets.empty()) {
      const int64_t out = log.TimeOf(entered.offsets.back());
      row.ms.push_back(static_cast<double>(out - r.failed_ns) / 1e6);
    }
  }
  return row;
}

RecoveryRow RecoverFromBlock(uint64_t frames, int reps, int stall_ms) {
  RecoveryRow row;
  row.fault = "block";
  row.service_ms = kServiceUs / 1000.0;
  row.stall_timeout_ms = stall_ms;
  for (int i = 0; i < reps; i++) {
    SinkLog log;
    Block block;
    block.at = frames / 2;
    const std::string settings =
        "on-stall=replay stall-timeout=" +
        std::to_string(static_cast<int64_t>(stall_ms) * 1000000);
    const RunResult r = Play(
        FourSlowLanes(frames, settings), frames, &log,
        [&](GstElement *p) {
          GstElement *work = LaneElement(p, 1, "work");
          AddProbe(work, "src", Block::Probe, &block);
          gst_object_unref(work);
        },
        [&block] { block.Open(); });
    row.ok &= r.ok && block.blocked_ns >= 0;
    if (r.ok && block.blocked_ns >= 0) {
      const int64_t out = log.TimeOf(block.blocked_frame);
      row.ms.push_back(static_cast<double>(out - block.blocked_ns) / 1e6);
    }
  }
  return row;
}

}  // namespace

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  bool quick = false;
  std::string json_path;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  const int reps = quick ? 1 : 5;
  const uint64_t frames = quick ? 60 : 600;
  const uint64_t recovery_frames = quick ? 80 : 400;

  std::vector<ThroughputRow> throughput;
  for (const char *branch : {"identity", "videobalance saturation=0.5"})
    throughput.push_back(Throughput(branch, frames, reps));
  std::vector<RecoveryRow> recovery;
  recovery.push_back(RecoverFromError(recovery_frames, reps));
  recovery.push_back(RecoverFromBlock(recovery_frames, reps, 200));

  bool ok = true;
  std::printf("throughput, 2 lanes, %llu frames 1280x720 I420, median of %d\n",
              static_cast<unsigned long long>(frames), reps);
  std::printf("%-30s %12s %12s %8s\n", "branch", "fail fps", "replay fps",
              "ratio");
  for (const ThroughputRow& t : throughput) {
    ok &= t.ok;
    std::printf("%-30s %12.1f %12.1f %8.3f%s\n", t.branch.c_str(), t.fail_fps,
                t.replay_fps, t.replay_fps / t.fail_fps,
                t.ok ? "" : "  (ORDER/LOSS CHECK FAILED)");
  }
  std::printf("\nrecovery, 4 lanes of %.1f ms: failure -> failing frame out\n",
              kServiceUs / 1000.0);
  std::printf("%-8s %12s %12s %10s %10s\n", "fault", "median ms", "max ms",
              "goal ms", "runs");
  for (const RecoveryRow& r : recovery) {
    ok &= r.ok;
    const double goal = r.service_ms + r.stall_timeout_ms;
    const double max =
        r.ms.empty() ? 0.0 : *std::max_element(r.ms.begin(), r.ms.end());
    std::printf("%-8s %12.2f %12.2f %10.1f %10zu%s\n", r.fault.c_str(),
                Median(r.ms), max, goal, r.ms.size(),
                r.ok ? "" : "  (ORDER/LOSS CHECK FAILED)");
  }

  if (!json_path.empty()) {
    FILE *f = gpufan_json::OpenJsonFile(json_path);
    if (!f)
      return 1;
    std::fprintf(f, "{\n  \"quick\": %s,\n  \"ok\": %s,\n  \"throughput\": [",
                 quick ? "true" : "false", ok ? "true" : "false");
    for (size_t i = 0; i < throughput.size(); i++) {
      const ThroughputRow& t = throughput[i];
      std::fprintf(f,
                   "%s\n    {\"branch\": %s, \"frames\": %llu, \"reps\": %d, "
                   "\"fail_fps\": %.3f, \"replay_fps\": %.3f, \"ratio\": "
                   "%.4f, \"ok\": %s}",
                   i ? "," : "", gpufan_json::JsonString(t.branch).c_str(),
                   static_cast<unsigned long long>(frames), reps, t.fail_fps,
                   t.replay_fps, t.replay_fps / t.fail_fps,
                   t.ok ? "true" : "false");
    }
    std::fprintf(f, "\n  ],\n  \"recovery\": [");
    for (size_t i = 0; i < recovery.size(); i++) {
      const RecoveryRow& r = recovery[i];
      std::fprintf(f,
                   "%s\n    {\"fault\": %s, \"service_ms\": %.3f, "
                   "\"stall_timeout_ms\": %.3f, \"ms\": %s, \"ok\": %s}",
                   i ? "," : "", gpufan_json::JsonString(r.fault).c_str(),
                   r.service_ms, r.stall_timeout_ms,
                   gpufan_json::JsonNumbers(r.ms).c_str(),
                   r.ok ? "true" : "false");
    }
    std::fprintf(f, "\n  ]\n}\n");
    std::fclose(f);
  }
  return ok ? 0 : 1;
}
