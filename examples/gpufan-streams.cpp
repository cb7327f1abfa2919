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
// (none crosses to another stream), then one EOS. Those checks, and the
// watchdog below, are in gpufan-streams-check.{h,cpp}: this file is the
// example itself (build the pipeline, add and remove streams, read the
// statistics).
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
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gpufan-streams-check.h"
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

// One input stream: its source and pads, and what the checks record of it
// (its frames in and out, its entry of gpufanout's statistics).
struct Stream : streams_check::StreamRecord {
  int speed = 1;  // horizontal-speed
  guint in_flight_at_removal = 0;

  GstElement *src = nullptr;     // owned by the pipeline
  GstElement *filter = nullptr;  // owned by the pipeline
  GstPad *fan_sink = nullptr;    // gpufanout's sink_k (a ref until released)
  GstPad *fan_src = nullptr;     // gpufanin's src_k (a ref)
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

// --- holding the lanes
// ---------------------------------------------------------

// On gpufanout's src_l (the lane's thread): holds the lane while asked to.
GstPadProbeReturn ProbeLane(GstPad *, GstPadProbeInfo *, gpointer data) {
  auto *app = static_cast<App *>(data);
  const gint64 until = app->stall_until;
  const gint64 now = g_get_monotonic_time();
  if (now < until)
    g_usleep(until - now);
  return GST_PAD_PROBE_OK;
}

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
  streams_check::WatchOutput(s.fan_src, &s);
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
  streams_check::WatchInput(s.fan_sink, &s);
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

// --- reading the statistics
// ---------------------------------------------------

// A line per lane of gpufanout's statistics.
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
    std::vector<const streams_check::StreamRecord *> all;
    for (const auto& s : app.streams)
      all.push_back(s.get());
    streams_check::Watchdog watchdog(o.timeout_s + 30, std::move(all));
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
  // Every stream added (all of them unless --no-changes) checked, frame for
  // frame, then a line per lane.
  std::vector<const streams_check::StreamRecord *> added;
  for (const auto& s : app.streams)
    if (s->fan_src)
      added.push_back(s.get());
  const bool checks = streams_check::Report(added);
  PrintLanes(app.stats);
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
