// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufan-streams: many live streams on shared lanes, frame for frame.
//
// N live test sources (videotestsrc is-live=true, 30 fps, a different
// pattern each) enter one gpufanout through its request pads sink_0 ..
// sink_N-1; every stream shares the same lanes (one branch instance per
// lane), and stream k leaves gpufanin on src_k, in its own input order:
//
//   videotestsrc pattern=.. ! capsfilter ! f.sink_k     i.src_k ! queue
//     ! fakesink                                        (for each stream k)
//   gpufanout name=f devices=cpu:2  gpufanin name=i
//   f.src_0 ! videoflip ... ! i.sink_0   f.src_1 ! videoflip ... ! i.sink_1
//
// The lanes' branch costs real CPU but is lossless: pairs of videoflip that
// undo each other (a quarter turn right then left, two horizontal flips), so
// every output frame must equal its input frame byte for byte. Pad probes
// hash each frame where it enters (gpufanout's sink_k) and where it leaves
// (gpufanin's src_k); the program checks, per stream, that the output is
// exactly the input sequence: complete, in order, the stream's own frames
// (none crosses to another stream), then one EOS.
//
// While playing, it adds a stream (sink_N and src_N, its source, linked and
// brought to PLAYING) and removes one of the first N (its source to NULL,
// then its sink pad released: what entered must still come out, then EOS).
// The run ends at EOS of every stream (num-buffers). It prints a table per
// stream and a line per lane (from gpufanout's statistics), and exits 0
// only when every check passed. A watchdog ends a run that hangs (exit
// status 3) instead of waiting forever.
//
// Run it with scripts/run-streams.sh, or:
//   GST_PLUGIN_PATH=build/gst build/examples/gpufan-streams --streams 8

#include <gst/gst.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "gpufan-util.h"
#include "gpufan/device-registry.h"
#include "gpufan/placement.h"

namespace {

using gpufan_util::Double;
using gpufan_util::HaveFactory;
using gpufan_util::U64;

constexpr char kProg[] = "gpufan-streams";

constexpr gint kFps = 30;

struct Options {
  gint streams = 8;
  gint frames = 0;         // per stream; 0: from `seconds`
  gdouble seconds = 10.0;  // of video per stream (at 30 fps)
  gchar *devices = nullptr;
  gint lanes = 0;  // 0: as `devices` says
  gint width = 640;
  gint height = 360;
  gint flips = 2;  // pairs of videoflip per lane
  gint timeout_s = 300;
  gint remove = -1;     // the stream removed while playing (-1: N / 2)
  gint stall_ms = 300;  // the lanes held this long around the removal
  gboolean no_changes = FALSE;
  gboolean verbose = FALSE;
};

// Patterns whose frames differ from one stream to the next (and, moving
// with horizontal-speed, from one frame to the next).
const char *const kPatterns[] = {
    "smpte",    "ball",  "snow",     "checkers-8", "circular",
    "smpte75",  "bar",   "pinwheel", "spokes",     "colors",
    "smpte100", "gamut", "gradient", "checkers-1",
};
constexpr int kPatternCount = G_N_ELEMENTS(kPatterns);

// One frame as a probe saw it.
struct Frame {
  guint64 pts = 0;
  guint64 hash = 0;
  bool operator==(const Frame& o) const {
    return pts == o.pts && hash == o.hash;
  }
  bool operator<(const Frame& o) const {
    return pts != o.pts ? pts < o.pts : hash < o.hash;
  }
};

// One input stream and its output. `in` is written only by the source's
// streaming thread (the probe on gpufanout's sink_k), `out` only by
// gpufanin's output thread (the probe on src_k); the main thread reads them
// once those threads have stopped (the source at NULL, or the pipeline).
struct Stream {
  int index = 0;
  std::string pattern;
  int speed = 1;  // horizontal-speed
  guint64 num_buffers = 0;
  bool added = false;    // added while playing
  bool removed = false;  // removed while playing
  guint64 in_at_removal = 0;
  guint in_flight_at_removal = 0;
  bool ended_before_removal = false;

  GstElement *src = nullptr;     // owned by the pipeline
  GstElement *filter = nullptr;  // owned by the pipeline
  GstPad *fan_sink = nullptr;    // gpufanout's sink_k (a ref until released)
  GstPad *fan_src = nullptr;     // gpufanin's src_k (a ref)

  std::vector<Frame> in, out;
  std::atomic<guint64> n_in{0}, n_out{0};
  std::atomic<bool> in_eos{false};
  std::atomic<int> out_eos{0};            // EOS events seen on src_k
  std::atomic<guint64> out_after_eos{0};  // buffers after the EOS

  GstStructure *stats = nullptr;  // its entry of gpufanout's `streams`
  bool stats_final = false;       // from the statistics at the end
};

struct App {
  Options o;
  gint frames = 0;
  gint lanes = 0;
  std::string devices;
  GstElement *pipeline = nullptr;
  GstElement *fanout = nullptr;  // refs
  GstElement *fanin = nullptr;
  std::vector<std::unique_ptr<Stream>> streams;
  GstStructure *stats = nullptr;  // the last full statistics (owned)
  // Every lane holds its next frame until then (monotonic time, us): the
  // removed stream then has frames in flight when its pad is released.
  std::atomic<gint64> stall_until{0};
};

[[noreturn]] void Fail(const std::string& what) {
  g_printerr("gpufan-streams: ERROR: %s\n", what.c_str());
  std::exit(1);
}

// --- watchdog ---------------------------------------------------------------

// Ends the process when the run has not finished by its deadline, whatever
// the main thread is blocked in (a state change, a pad release, teardown).
class Watchdog {
 public:
  Watchdog(int seconds, const App *app) : app_(app) {
    thread_ = std::thread([this, seconds] { Run(seconds); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(mutex_);
      done_ = true;
    }
    cond_.notify_all();
    thread_.join();
  }

 private:
  void Run(int seconds) {
    std::unique_lock<std::mutex> lk(mutex_);
    if (cond_.wait_for(lk, std::chrono::seconds(seconds),
                       [this] { return done_; }))
      return;
    // Only atomics are read here: the other threads may be running.
    g_printerr(
        "gpufan-streams: ERROR: watchdog: the run did not finish in %d s "
        "(raise --timeout?); where each stream was:\n",
        seconds);
    for (const auto& s : app_->streams)
      g_printerr("  stream %d: %" G_GUINT64_FORMAT " in%s, %" G_GUINT64_FORMAT
                 " out, %d EOS out\n",
                 s->index, s->n_in.load(), s->in_eos ? " + EOS" : "",
                 s->n_out.load(), s->out_eos.load());
    fflush(stderr);
    _exit(3);
  }

  const App *app_;
  std::mutex mutex_;
  std::condition_variable cond_;
  bool done_ = false;
  std::thread thread_;
};

// --- frames and probes
// --------------------------------------------------------

guint64 HashBuffer(GstBuffer *buf) {
  GstMapInfo map;
  if (!gst_buffer_map(buf, &map, GST_MAP_READ))
    return 0;
  // 64-bit words, multiply and fold: fast enough at 30 fps x many streams.
  guint64 h = 0x9e3779b97f4a7c15ull ^ map.size;
  gsize i = 0;
  for (; i + 8 <= map.size; i += 8) {
    guint64 w;
    memcpy(&w, map.data + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < map.size; i++)
    h = (h ^ map.data[i]) * 0x100000001b3ull;
  gst_buffer_unmap(buf, &map);
  return h ^ (h >> 32);
}

Frame FrameOf(GstBuffer *buf) {
  return Frame{GST_BUFFER_PTS(buf), HashBuffer(buf)};
}

// At gpufanout's sink_k: what enters the stream.
GstPadProbeReturn ProbeIn(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *s = static_cast<Stream *>(data);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    s->in.push_back(FrameOf(GST_PAD_PROBE_INFO_BUFFER(info)));
    s->n_in++;
  } else if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList *list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    for (guint i = 0; i < gst_buffer_list_length(list); i++) {
      s->in.push_back(FrameOf(gst_buffer_list_get(list, i)));
      s->n_in++;
    }
  } else if (GST_PAD_PROBE_INFO_TYPE(info) &
             GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS)
      s->in_eos = true;
  }
  return GST_PAD_PROBE_OK;
}

void CountOut(Stream *s, GstBuffer *buf) {
  if (s->out_eos > 0)
    s->out_after_eos++;
  s->out.push_back(FrameOf(buf));
  s->n_out++;
}

// At gpufanin's src_k: what leaves the stream.
GstPadProbeReturn ProbeOut(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *s = static_cast<Stream *>(data);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    CountOut(s, GST_PAD_PROBE_INFO_BUFFER(info));
  } else if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList *list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    for (guint i = 0; i < gst_buffer_list_length(list); i++)
      CountOut(s, gst_buffer_list_get(list, i));
  } else if (GST_PAD_PROBE_INFO_TYPE(info) &
             GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS)
      s->out_eos++;
  }
  return GST_PAD_PROBE_OK;
}

// On gpufanout's src_l (the lane's thread): holds the lane while asked to.
GstPadProbeReturn ProbeLane(GstPad *, GstPadProbeInfo *, gpointer data) {
  auto *app = static_cast<App *>(data);
  const gint64 until = app->stall_until;
  const gint64 now = g_get_monotonic_time();
  if (now < until)
    g_usleep(until - now);
  return GST_PAD_PROBE_OK;
}

constexpr auto kProbeMask = static_cast<GstPadProbeType>(
    GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
    GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM);

// --- statistics
// -----------------------------------------------------------------

Stream *StreamOfPad(App& app, const char *pad) {
  guint index = 0;
  if (!pad || sscanf(pad, "sink_%u", &index) != 1)
    return nullptr;
  for (auto& s : app.streams)
    if (s->index == static_cast<int>(index))
      return s.get();
  return nullptr;
}

// Reads gpufanout's `stats` and keeps each stream's entry; a stream that
// has left the statistics (released) keeps its last one.
void UpdateStats(App& app, bool final) {
  GstStructure *stats = nullptr;
  g_object_get(app.fanout, "stats", &stats, nullptr);
  if (!stats)
    return;
  const GValue *streams = gst_structure_get_value(stats, "streams");
  if (streams && GST_VALUE_HOLDS_ARRAY(streams)) {
    for (guint i = 0; i < gst_value_array_get_size(streams); i++) {
      const GValue *v = gst_value_array_get_value(streams, i);
      if (!GST_VALUE_HOLDS_STRUCTURE(v))
        continue;
      const GstStructure *st = gst_value_get_structure(v);
      Stream *s = StreamOfPad(app, gst_structure_get_string(st, "pad"));
      if (!s)
        continue;
      if (s->stats)
        gst_structure_free(s->stats);
      s->stats = gst_structure_copy(st);
      s->stats_final = final;
    }
  }
  if (app.stats)
    gst_structure_free(app.stats);
  app.stats = stats;
}

// --- building the pipeline
// ------------------------------------------------------

std::string LaneBranch(const Options& o) {
  // Each pair restores the frame exactly; a quarter turn right then left
  // (a transpose each: cache-unfriendly, real work), or two mirror images.
  // (videoflip's `method` property is not used: in GStreamer 1.22 setting
  // it from a launch line leaves the element in pass-through.)
  std::string d;
  for (int p = 0; p < o.flips; p++) {
    if (!d.empty())
      d += " ! ";
    d += p % 2 == 0
             ? "videoflip video-direction=90r ! videoflip video-direction=90l"
             : "videoflip video-direction=horiz ! videoflip "
               "video-direction=horiz";
  }
  return d.empty() ? "identity" : d;
}

std::string CapsText(const Options& o) {
  return "video/x-raw,format=RGBA,width=" + std::to_string(o.width) +
         ",height=" + std::to_string(o.height) +
         ",framerate=" + std::to_string(kFps) + "/1";
}

GstElement *Make(const char *factory, const std::string& name) {
  GstElement *e = gst_element_factory_make(factory, name.c_str());
  if (!e)
    Fail(std::string("element '") + factory + "' not found");
  return e;
}

// The running time of the pipeline now (0 before PLAYING).
GstClockTime RunningTime(GstElement *pipeline) {
  GstClock *clock = gst_element_get_clock(pipeline);
  if (!clock)
    return 0;
  const GstClockTime now = gst_clock_get_time(clock);
  gst_object_unref(clock);
  const GstClockTime base = gst_element_get_base_time(pipeline);
  return now > base ? now - base : 0;
}

// Requests the stream's pads, adds its source and its sink and links them.
// `playing`: the pipeline runs; the new elements are brought to its state.
void AddStream(App& app, Stream& s, bool playing) {
  const std::string k = std::to_string(s.index);
  // The output first: a src_k that does not exist or is not linked drops
  // what its stream puts out.
  s.fan_src = gst_element_request_pad_simple(app.fanin, ("src_" + k).c_str());
  if (!s.fan_src || g_strcmp0(GST_PAD_NAME(s.fan_src), ("src_" + k).c_str()))
    Fail("gpufanin gave no pad src_" + k);
  GstElement *queue = Make("queue", "out_queue_" + k);
  GstElement *sink = Make("fakesink", "out_sink_" + k);
  g_object_set(sink, "sync", FALSE, "async", FALSE, nullptr);
  gst_bin_add_many(GST_BIN(app.pipeline), queue, sink, nullptr);
  GstPad *qsink = gst_element_get_static_pad(queue, "sink");
  const GstPadLinkReturn out_link = gst_pad_link(s.fan_src, qsink);
  gst_object_unref(qsink);
  if (out_link != GST_PAD_LINK_OK || !gst_element_link(queue, sink))
    Fail("cannot link gpufanin's src_" + k);
  gst_pad_add_probe(s.fan_src, kProbeMask, ProbeOut, &s, nullptr);
  if (playing) {
    gst_element_sync_state_with_parent(sink);
    gst_element_sync_state_with_parent(queue);
  }

  s.fan_sink =
      gst_element_request_pad_simple(app.fanout, ("sink_" + k).c_str());
  if (!s.fan_sink || g_strcmp0(GST_PAD_NAME(s.fan_sink), ("sink_" + k).c_str()))
    Fail("gpufanout gave no pad sink_" + k);
  s.src = Make("videotestsrc", "in_src_" + k);
  g_object_set(s.src, "is-live", TRUE, "num-buffers",
               static_cast<gint>(s.num_buffers), "horizontal-speed", s.speed,
               nullptr);
  gst_util_set_object_arg(G_OBJECT(s.src), "pattern", s.pattern.c_str());
  if (playing) {
    // Frames stamped from now on, paced by the clock (without it the new
    // source would catch up from running time 0 at once).
    g_object_set(s.src, "timestamp-offset",
                 static_cast<gint64>(RunningTime(app.pipeline)), nullptr);
  }
  s.filter = Make("capsfilter", "in_caps_" + k);
  GstCaps *caps = gst_caps_from_string(CapsText(app.o).c_str());
  g_object_set(s.filter, "caps", caps, nullptr);
  gst_caps_unref(caps);
  gst_bin_add_many(GST_BIN(app.pipeline), s.src, s.filter, nullptr);
  GstPad *fsrc = gst_element_get_static_pad(s.filter, "src");
  gst_pad_add_probe(s.fan_sink, kProbeMask, ProbeIn, &s, nullptr);
  const GstPadLinkReturn in_link = gst_pad_link(fsrc, s.fan_sink);
  gst_object_unref(fsrc);
  if (in_link != GST_PAD_LINK_OK || !gst_element_link(s.src, s.filter))
    Fail("cannot link a source to gpufanout's sink_" + k);
  if (playing) {
    gst_element_sync_state_with_parent(s.filter);
    gst_element_sync_state_with_parent(s.src);
  }
}

// Stops the stream's source and releases its sink pad: what entered still
// leaves src_k, then EOS.
void RemoveStream(App& app, Stream& s) {
  s.removed = true;
  s.ended_before_removal = s.in_eos;
  if (app.o.stall_ms > 0) {
    // Hold the lanes, and let the streams' frames queue up for them.
    app.stall_until = g_get_monotonic_time() + app.o.stall_ms * 1000;
    g_usleep(app.o.stall_ms * 1000 / 3);
  }
  // NULL stops the streaming thread (once a push in progress returned).
  gst_element_set_state(s.src, GST_STATE_NULL);
  gst_element_set_state(s.filter, GST_STATE_NULL);
  s.in_at_removal = s.n_in;
  UpdateStats(app, false);  // the last statistics that have the stream
  s.in_flight_at_removal = static_cast<guint>(U64(s.stats, "in-flight"));
  gst_element_release_request_pad(app.fanout, s.fan_sink);
  gst_object_unref(s.fan_sink);
  s.fan_sink = nullptr;
  gst_bin_remove_many(GST_BIN(app.pipeline), s.src, s.filter, nullptr);
  s.src = s.filter = nullptr;
}

void BuildPipeline(App& app) {
  std::string d =
      "gpufanout name=f devices=" + app.devices + "  gpufanin name=i";
  const std::string branch = LaneBranch(app.o);
  for (int l = 0; l < app.lanes; l++) {
    const std::string n = std::to_string(l);
    d += "  f.src_" + n + " ! " + branch + " ! i.sink_" + n;
  }
  if (app.o.verbose)
    g_print("lanes: gst-launch-1.0 %s\n", d.c_str());
  GError *err = nullptr;
  app.pipeline = gst_parse_launch(d.c_str(), &err);
  if (err) {
    g_printerr("gpufan-streams: %s\n  pipeline: %s\n", err->message, d.c_str());
    g_clear_error(&err);
    Fail("could not build the pipeline");
  }
  app.fanout = gst_bin_get_by_name(GST_BIN(app.pipeline), "f");
  app.fanin = gst_bin_get_by_name(GST_BIN(app.pipeline), "i");
  if (!app.fanout || !app.fanin)
    Fail("internal: gpufanout or gpufanin missing");
  for (int l = 0; l < app.lanes; l++) {
    GstPad *pad = gst_element_get_static_pad(
        app.fanout, ("src_" + std::to_string(l)).c_str());
    if (!pad)
      Fail("internal: gpufanout has no src_" + std::to_string(l));
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, ProbeLane, &app, nullptr);
    gst_object_unref(pad);
  }
}

std::unique_ptr<Stream> NewStream(int index, guint64 frames) {
  auto s = std::make_unique<Stream>();
  s->index = index;
  s->pattern = kPatterns[index % kPatternCount];
  s->speed = 1 + index / kPatternCount * 3 + index % 3;
  s->num_buffers = frames;
  return s;
}

// --- running
// ----------------------------------------------------------------------

// Runs to EOS of every stream, adding and removing a stream on the way.
// False on an error or when the time is up.
bool Run(App& app, Stream *add, Stream *remove) {
  GstBus *bus = gst_element_get_bus(app.pipeline);
  const gint64 start = g_get_monotonic_time();
  const gint64 deadline = start + gint64{app.o.timeout_s} * G_USEC_PER_SEC;
  if (!gpufan_util::StartPlaying(kProg, app.pipeline, bus)) {
    gst_object_unref(bus);
    g_printerr("gpufan-streams: ERROR: the pipeline refused to start\n");
    return false;
  }
  // The first stream paces the changes (it is never the one removed).
  const Stream& pace = *app.streams[0];
  const guint64 add_at = std::max<guint64>(1, app.frames / 3);
  const guint64 remove_at = std::max<guint64>(2, app.frames / 2);
  gint64 last_stats = start;
  bool ok = true, eos = false;
  while (!eos && ok) {
    const gint64 now = g_get_monotonic_time();
    if (now >= deadline) {
      g_printerr(
          "gpufan-streams: ERROR: no EOS after %d s (raise --timeout?)\n",
          app.o.timeout_s);
      ok = false;
      break;
    }
    GstMessage *msg = gst_bus_timed_pop_filtered(
        bus, 50 * GST_MSECOND,
        static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_EOS |
                                    GST_MESSAGE_WARNING));
    if (msg) {
      switch (GST_MESSAGE_TYPE(msg)) {
        case GST_MESSAGE_ERROR:
          gpufan_util::PrintMessage(kProg, msg, "error");
          ok = false;
          break;
        case GST_MESSAGE_WARNING:
          gpufan_util::PrintMessage(kProg, msg, "warning");
          break;
        case GST_MESSAGE_EOS:
          eos = true;
          break;
        default:
          break;
      }
      gst_message_unref(msg);
    }
    if (!ok || eos)
      break;
    const double t = (g_get_monotonic_time() - start) / 1e6;
    if (add && !add->fan_sink && pace.n_in >= add_at) {
      g_print(
          "  %6.2f s  adding stream %d (sink_%d, src_%d, pattern %s, "
          "%" G_GUINT64_FORMAT " frames)\n",
          t, add->index, add->index, add->index, add->pattern.c_str(),
          add->num_buffers);
      AddStream(app, *add, true);
    }
    if (remove && !remove->removed && pace.n_in >= remove_at) {
      g_print(
          "  %6.2f s  removing stream %d: its source to NULL, then "
          "sink_%d released\n",
          t, remove->index, remove->index);
      RemoveStream(app, *remove);
      g_print("  %6.2f s  stream %d removed after %" G_GUINT64_FORMAT
              " frames in (%u in flight at its release)\n",
              (g_get_monotonic_time() - start) / 1e6, remove->index,
              remove->in_at_removal, remove->in_flight_at_removal);
    }
    if (g_get_monotonic_time() - last_stats >= 250 * G_TIME_SPAN_MILLISECOND) {
      UpdateStats(app, false);
      last_stats = g_get_monotonic_time();
    }
  }
  if (eos) {
    g_print("  %6.2f s  EOS of every stream\n",
            (g_get_monotonic_time() - start) / 1e6);
    UpdateStats(app, true);
  }
  gst_object_unref(bus);
  return ok && eos;
}

// --- checks
// -------------------------------------------------------------------------

struct Verdict {
  bool exact = false;     // out == in
  bool complete = false;  // as many out as in
  bool in_order = false;  // what came out came in that order
  guint64 foreign = 0;    // frames out that are not the stream's own
  std::string why;        // the first difference
};

// `owner`: each input frame's stream, for naming a frame that crossed.
Verdict Check(const Stream& s, const std::map<Frame, int>& owner) {
  Verdict v;
  v.exact = s.out == s.in;
  v.complete = s.out.size() == s.in.size();
  // In order: each output frame is an input frame later than the one before.
  std::map<Frame, size_t> position;
  for (size_t i = 0; i < s.in.size(); i++)
    position.emplace(s.in[i], i);
  v.in_order = true;
  size_t last = 0;
  bool any = false;
  for (size_t i = 0; i < s.out.size(); i++) {
    auto it = position.find(s.out[i]);
    if (it == position.end()) {
      v.foreign++;
      if (v.why.empty()) {
        auto o = owner.find(s.out[i]);
        v.why = "output frame " + std::to_string(i) +
                (o != owner.end() && o->second != s.index
                     ? " is stream " + std::to_string(o->second) + "'s"
                     : " was never input");
      }
      continue;
    }
    if (any && it->second <= last) {
      v.in_order = false;
      if (v.why.empty())
        v.why = "output frame " + std::to_string(i) + " is input frame " +
                std::to_string(it->second) + ", after input frame " +
                std::to_string(last);
    }
    last = it->second;
    any = true;
  }
  if (v.why.empty() && !v.exact) {
    // Name the missing frames (input index and time), the first few.
    std::map<Frame, size_t> out_pos;
    for (size_t i = 0; i < s.out.size(); i++)
      out_pos.emplace(s.out[i], i);
    size_t missing = 0;
    std::string which;
    for (size_t i = 0; i < s.in.size(); i++) {
      if (out_pos.count(s.in[i]))
        continue;
      if (++missing <= 8)
        which += (which.empty() ? "" : ", ") + std::to_string(i) + " (" +
                 std::to_string(s.in[i].pts / GST_MSECOND) + " ms)";
    }
    v.why = std::to_string(missing) + " input frame(s) missing: " + which;
  }
  return v;
}

void PrintLanes(const GstStructure *stats) {
  const GValue *lanes =
      stats ? gst_structure_get_value(stats, "lanes") : nullptr;
  if (!lanes || !GST_VALUE_HOLDS_ARRAY(lanes)) {
    g_print("  (no per-lane statistics)\n");
    return;
  }
  for (guint i = 0; i < gst_value_array_get_size(lanes); i++) {
    const GValue *v = gst_value_array_get_value(lanes, i);
    if (!GST_VALUE_HOLDS_STRUCTURE(v))
      continue;
    const GstStructure *l = gst_value_get_structure(v);
    const gchar *device = gst_structure_get_string(l, "device");
    g_print("  lane %" G_GUINT64_FORMAT " on %s: dispatched %" G_GUINT64_FORMAT
            ", completed %" G_GUINT64_FORMAT ", dropped %" G_GUINT64_FORMAT
            ", service %.2f ms/frame, %.1f fps\n",
            U64(l, "lane"), device ? device : "?", U64(l, "dispatched"),
            U64(l, "completed"), U64(l, "dropped"),
            U64(l, "service-time") / 1e6, Double(l, "fps"));
  }
}

// Prints the table and returns whether every check passed.
bool Report(App& app) {
  std::map<Frame, int> owner;
  for (const auto& s : app.streams)
    for (const Frame& f : s->in)
      owner.emplace(f, s->index);

  g_print(
      "\n  %-6s %-7s %-10s %6s %6s %-8s %-5s %-4s %10s %9s %5s %6s %8s  %s\n",
      "stream", "pad", "pattern", "in", "out", "in order", "own", "EOS",
      "dispatched", "delivered", "lost", "leaky", "wait ms", "");
  bool ok = true;
  for (const auto& sp : app.streams) {
    const Stream& s = *sp;
    if (!s.fan_src)
      continue;  // never added (--no-changes)
    const Verdict v = Check(s, owner);
    const bool eos_ok = s.out_eos == 1 && s.out_after_eos == 0;
    // Every frame of a stream that was not removed entered (num-buffers).
    const bool entered_ok = s.removed
                                ? s.in_at_removal == s.n_in && !s.in.empty()
                                : s.n_in == s.num_buffers && s.in_eos;
    const bool have_stats = s.stats != nullptr;
    const guint64 lost = U64(s.stats, "lost");
    const guint64 leaky = U64(s.stats, "leaky-dropped");
    // The final statistics must agree; a released stream's last entry was
    // taken at its release, with frames still in flight.
    bool stats_ok = have_stats && lost == 0 && leaky == 0;
    if (stats_ok && s.stats_final)
      stats_ok = U64(s.stats, "dispatched") == s.in.size() &&
                 U64(s.stats, "delivered") == s.out.size();
    const bool pass = v.exact && v.in_order && v.foreign == 0 && eos_ok &&
                      entered_ok && stats_ok;
    ok = ok && pass;

    std::string note;
    if (s.added)
      note = "added while playing";
    if (s.removed)
      note = std::string("removed while playing") +
             (s.ended_before_removal ? " (had already ended)" : "") +
             "; statistics as at its release";
    g_print("  %-6d sink_%-2d %-10s %6zu %6zu %-8s %-5s %-4s", s.index, s.index,
            s.pattern.c_str(), s.in.size(), s.out.size(),
            v.in_order && v.complete ? "yes" : "NO",
            v.foreign == 0 ? "yes" : "NO",
            eos_ok ? "yes" : (s.out_eos == 0 ? "NO" : "BAD"));
    if (have_stats)
      g_print(" %10" G_GUINT64_FORMAT " %9" G_GUINT64_FORMAT
              " %5" G_GUINT64_FORMAT " %6" G_GUINT64_FORMAT " %8.1f",
              U64(s.stats, "dispatched"), U64(s.stats, "delivered"), lost,
              leaky, U64(s.stats, "wait-time") / 1e6);
    else
      g_print(" %10s %9s %5s %6s %8s", "-", "-", "-", "-", "-");
    g_print("  %s\n", pass ? "ok" : "FAILED");
    if (!note.empty())
      g_print("  %6s %s\n", "", note.c_str());
    if (!pass) {
      if (!v.why.empty())
        g_print("  %6s %s\n", "", v.why.c_str());
      if (!eos_ok)
        g_print("  %6s %d EOS on src_%d, %" G_GUINT64_FORMAT
                " frames after it (expected one EOS, last)\n",
                "", s.out_eos.load(), s.index, s.out_after_eos.load());
      if (!entered_ok)
        g_print("  %6s %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                " frames entered%s\n",
                "", s.n_in.load(), s.num_buffers,
                s.in_eos ? "" : ", no EOS entered");
      if (!have_stats)
        g_print("  %6s not in gpufanout's statistics (`streams`)\n", "");
      else if (!stats_ok)
        g_print("  %6s statistics disagree: lost %" G_GUINT64_FORMAT
                ", leaky-dropped %" G_GUINT64_FORMAT
                ", dispatched %" G_GUINT64_FORMAT
                " (%zu in), delivered %" G_GUINT64_FORMAT " (%zu out)\n",
                "", lost, leaky, U64(s.stats, "dispatched"), s.in.size(),
                U64(s.stats, "delivered"), s.out.size());
    }
  }
  g_print("\n");
  PrintLanes(app.stats);
  return ok;
}

// Lanes for `devices` as gpufanbin counts them: one per GPU (auto; one per
// CPU without a GPU), one per listed ordinal, N for cpu:N.
int LanesFor(const std::string& devices) {
  gpufan::DeviceSpec spec;
  std::string error;
  if (!gpufan::DeviceSpec::Parse(devices, &spec, &error))
    Fail("bad --devices '" + devices + "': " + error);
  const gpufan::DeviceRegistry registry = gpufan::DeviceRegistry::Discover();
  const int cpus = std::max<int>(1, static_cast<int>(registry.cpu_count()));
  switch (spec.mode) {
    case gpufan::DeviceSpec::Mode::kGpuList:
      return static_cast<int>(spec.gpus.size());
    case gpufan::DeviceSpec::Mode::kCpu:
      return spec.cpu_lanes > 0 ? static_cast<int>(spec.cpu_lanes) : cpus;
    case gpufan::DeviceSpec::Mode::kAuto:
    default:
      return registry.gpu_count() > 0 ? static_cast<int>(registry.gpu_count())
                                      : cpus;
  }
}

}  // namespace

int main(int argc, char **argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  App app;
  Options& o = app.o;
  const GOptionEntry entries[] = {
      {"streams", 's', 0, G_OPTION_ARG_INT, &o.streams,
       "Live streams at the start (8); one more is added while playing", "N"},
      {"frames", 'n', 0, G_OPTION_ARG_INT, &o.frames,
       "Frames per stream (default: --seconds x 30)", "N"},
      {"seconds", 'd', 0, G_OPTION_ARG_DOUBLE, &o.seconds,
       "Seconds of video per stream, at 30 fps (10)", "S"},
      {"devices", 0, 0, G_OPTION_ARG_STRING, &o.devices,
       "gpufanout's devices: cpu:N, cpu, auto (the GPUs where present), or "
       "GPU ordinals 0,1 (cpu:2)",
       "D"},
      {"lanes", 'l', 0, G_OPTION_ARG_INT, &o.lanes,
       "Lanes (default: as --devices says: N for cpu:N, one per GPU for "
       "auto)",
       "N"},
      {"width", 0, 0, G_OPTION_ARG_INT, &o.width, "Frame width (640)", "W"},
      {"height", 0, 0, G_OPTION_ARG_INT, &o.height, "Frame height (360)", "H"},
      {"flips", 0, 0, G_OPTION_ARG_INT, &o.flips,
       "Pairs of videoflip in each lane's branch: the work per frame (2)", "N"},
      {"remove", 0, 0, G_OPTION_ARG_INT, &o.remove,
       "The stream removed while playing (default: streams / 2)", "K"},
      {"stall", 0, 0, G_OPTION_ARG_INT, &o.stall_ms,
       "Hold every lane this long while the stream is removed, so that it "
       "has frames in flight then (300; 0: no hold)",
       "MS"},
      {"no-changes", 0, 0, G_OPTION_ARG_NONE, &o.no_changes,
       "Neither add nor remove a stream while playing", nullptr},
      {"timeout", 't', 0, G_OPTION_ARG_INT, &o.timeout_s,
       "Seconds before the watchdog fails the run (300)", "S"},
      {"verbose", 'v', 0, G_OPTION_ARG_NONE, &o.verbose,
       "Print the lanes' pipeline", nullptr},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  if (!gpufan_util::ParseOptions(entries,
                                 "- many live streams over shared "
                                 "gpufanout/gpufanin lanes, checked frame for "
                                 "frame",
                                 kProg, &argc, &argv))
    return 1;

  app.devices = o.devices ? o.devices : "cpu:2";
  g_free(o.devices);
  o.devices = nullptr;
  app.frames =
      o.frames > 0 ? o.frames : static_cast<gint>(o.seconds * kFps + 0.5);
  if (o.streams < 1 || o.streams > 63 || app.frames < 6 || o.width < 16 ||
      o.height < 16 || o.flips < 0 || o.flips > 16 || o.timeout_s <= 0 ||
      o.stall_ms < 0 || o.stall_ms > 10000)
    Fail(
        "bad --streams (1..63), --frames (6 or more), --width/--height, "
        "--flips (0..16), --stall (0..10000) or --timeout");
  if (o.remove < 0)
    o.remove = o.streams / 2;
  const bool changes = !o.no_changes && o.streams >= 2;
  if (changes && (o.remove < 1 || o.remove >= o.streams))
    Fail("--remove: one of streams 1 .. streams-1 (stream 0 paces the run)");
  for (const char *f :
       {"videotestsrc", "capsfilter", "videoflip", "queue", "fakesink"})
    if (!HaveFactory(f))
      Fail(std::string("element '") + f +
           "' not found (gstreamer1.0-plugins-base/-good: scripts/setup.sh)");
  if (!HaveFactory("gpufanout") || !HaveFactory("gpufanin"))
    Fail(
        "gpufanout/gpufanin not found: build the plugin (ninja -C build) and "
        "set GST_PLUGIN_PATH=build/gst");
  app.lanes = o.lanes > 0 ? o.lanes : LanesFor(app.devices);
  if (app.lanes < 1 || app.lanes > 64)
    Fail("bad lane count " + std::to_string(app.lanes));

  BuildPipeline(app);
  for (int k = 0; k < o.streams; k++)
    app.streams.push_back(NewStream(k, app.frames));
  Stream *add = nullptr, *remove = nullptr;
  if (changes) {
    // Added at a third of the run, it ends about with the others.
    app.streams.push_back(
        NewStream(o.streams, std::max<guint64>(3, app.frames / 2)));
    add = app.streams.back().get();
    add->added = true;
    remove = app.streams[o.remove].get();
  }
  for (auto& s : app.streams)
    if (&*s != add)
      AddStream(app, *s, false);

  g_print(
      "gpufan-streams: %d live streams of %d frames (%.1f s at %d fps), "
      "%dx%d RGBA, patterns",
      o.streams, app.frames, app.frames / static_cast<double>(kFps), kFps,
      o.width, o.height);
  for (int k = 0; k < o.streams; k++)
    g_print("%s%s", k ? "," : " ", app.streams[k]->pattern.c_str());
  g_print("\n  %d lanes (devices=%s), each: %s\n", app.lanes,
          app.devices.c_str(), LaneBranch(o).c_str());
  if (changes)
    g_print("  while playing: add stream %d (%" G_GUINT64_FORMAT
            " frames), remove stream %d\n",
            add->index, add->num_buffers, remove->index);

  bool ok;
  {
    // Past the run's own deadline: time for a stuck teardown to be seen.
    Watchdog watchdog(o.timeout_s + 30, &app);
    ok = Run(app, add, remove);
    gst_element_set_state(app.pipeline, GST_STATE_NULL);
  }
  if (changes && !add->fan_sink) {
    g_printerr("gpufan-streams: ERROR: stream %d was never added\n",
               add->index);
    ok = false;
  }
  if (changes && !remove->removed) {
    g_printerr("gpufan-streams: ERROR: stream %d was never removed\n",
               remove->index);
    ok = false;
  }
  const bool checks = Report(app);
  ok = ok && checks;

  for (auto& s : app.streams) {
    if (s->fan_sink)
      gst_object_unref(s->fan_sink);
    if (s->fan_src)
      gst_object_unref(s->fan_src);
    if (s->stats)
      gst_structure_free(s->stats);
  }
  if (app.stats)
    gst_structure_free(app.stats);
  gst_object_unref(app.fanout);
  gst_object_unref(app.fanin);
  gst_object_unref(app.pipeline);
  gst_deinit();
  if (ok)
    g_print("\ngpufan-streams: every stream passed\n");
  else
    g_printerr("\ngpufan-streams: FAILED: see above\n");
  return ok ? 0 : 1;
}
