// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufan-demo: frame-parallel processing of a real video with gpufanout and
// gpufanin, compared with the same pipeline on a single lane.
//
// Each lane runs a CPU-heavy branch (colour conversion, gaussianblur, JPEG
// encoding); the fan-in restores input order and a Matroska muxer writes a
// playable file. JPEG is intra-only, so encoding inside the lanes is exact:
// the only serial work left after the fan-in is muxing.
//
//   source ! gpufanout name=f policy=adaptive  gpufanin name=m ! matroskamux
//     ! filesink
//   f.src_0 ! videoconvert ! gaussianblur ! videoconvert ! jpegenc ! m.sink_0
//   f.src_1 ! ...
//
// The program runs the pipeline with 1 lane (the baseline) and with N lanes,
// times both, prints the per-lane statistics of gpufanout (its `stats`
// property, or the `gpufan-stats` element message), the speed-up, and checks
// the result: as many frames out as in, in input order, identical to the
// baseline's frames, and the written file decodes to the same frame count.
//
// Run it with scripts/run-demo.sh, or:
//   GST_PLUGIN_PATH=build/gst build/examples/gpufan-demo --lanes 4

#include <gst/gst.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpufan-util.h"

namespace {

using gpufan_util::Double;
using gpufan_util::HaveFactory;
using gpufan_util::U64;

constexpr char kProg[] = "gpufan-demo";

struct Options {
  gchar *input = nullptr;
  // "auto": CUDA branches when GStreamer's CUDA elements are there (nvcodec
  // registers them only when it finds a GPU), else CPU branches.
  gchar *branch = nullptr;
  bool cuda = false;  // resolved from `branch`
  gint lanes = 0;
  gint frames = -1;
  gint width = 640;
  gint height = 360;
  gdouble sigma = 3.0;
  gint quality = 85;
  gchar *policy = nullptr;
  gchar *output = nullptr;
  gint timeout_s = 600;
  gboolean no_baseline = FALSE;
  gboolean plain = FALSE;
  gboolean verbose = FALSE;
};

constexpr gint kDefaultFrames = 300;

// What one run measured.
struct RunResult {
  double seconds = 0;
  guint64 frames_in = 0;
  guint64 frames_out = 0;
  guint64 out_of_order = 0;
  std::vector<guint64> frame_hashes;  // of each output frame, in output order
  GstStructure *stats = nullptr;      // gpufanout's statistics (owned)
};

// Counters updated by pad probes on the streaming threads. Each counter is
// only touched by the one thread that pushes through its pad.
struct Probes {
  guint64 frames_in = 0;
  guint64 frames_out = 0;
  guint64 out_of_order = 0;
  GstClockTime last_pts = GST_CLOCK_TIME_NONE;
  std::vector<guint64> hashes;
  bool hash = true;      // hash each output frame
  guint64 in_limit = 0;  // let this many frames in, then end the input
};

std::string Quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string SourceDescription(const Options& o) {
  std::string d;
  const std::string caps =
      "video/x-raw,format=I420,width=" + std::to_string(o.width) +
      ",height=" + std::to_string(o.height);
  if (o.input) {
    d = "filesrc location=" + Quote(o.input) +
        " ! decodebin ! videoconvert ! videoscale ! capsfilter name=demo_in "
        "caps=" +
        Quote(caps);
  } else {
    d = "videotestsrc pattern=ball num-buffers=" +
        std::to_string(o.frames > 0 ? o.frames : kDefaultFrames) +
        " ! capsfilter name=demo_in caps=" + Quote(caps + ",framerate=30/1");
  }
  return d;
}

std::string LaneDescription(const Options& o) {
  if (o.cuda) {
    // Upload, scale on the lane's GPU (its context comes from gpufanout),
    // download, then the same JPEG encoding as the CPU branch.
    return "videoconvert ! video/x-raw,format=NV12 ! cudaupload ! "
           "cudascale ! video/x-raw(memory:CUDAMemory),width=" +
           std::to_string(o.width / 2) +
           ",height=" + std::to_string(o.height / 2) +
           " ! cudadownload ! videoconvert ! jpegenc quality=" +
           std::to_string(o.quality);
  }
  char sigma[32];
  g_ascii_dtostr(sigma, sizeof(sigma), o.sigma);
  return std::string("videoconvert ! gaussianblur sigma=") + sigma +
         " ! videoconvert ! jpegenc quality=" + std::to_string(o.quality);
}

// lanes == 0: the plain pipeline, without gpufanout/gpufanin.
std::string PipelineDescription(const Options& o, int lanes,
                                const std::string& location) {
  const std::string sink =
      "matroskamux ! filesink name=demo_sink location=" + Quote(location);
  std::string d = SourceDescription(o);
  if (lanes == 0)
    return d + " ! " + LaneDescription(o) + " ! identity name=demo_out ! " +
           sink;
  // The CPU branch asks for CPU lanes: with devices=auto a machine without
  // a GPU would get them too, but with a "No GPU" warning meant for users
  // who expected GPUs.
  d += " ! gpufanout name=f policy=" + std::string(o.policy) +
       (o.cuda ? "" : " devices=cpu") +
       "  gpufanin name=m ! identity name=demo_out ! " + sink;
  for (int i = 0; i < lanes; i++) {
    const std::string n = std::to_string(i);
    d += "  f.src_" + n + " ! " + LaneDescription(o) + " ! m.sink_" + n;
  }
  return d;
}

guint64 HashBuffer(GstBuffer *buf) {
  GstMapInfo map;
  guint64 h = 1469598103934665603ull;  // FNV-1a
  if (!gst_buffer_map(buf, &map, GST_MAP_READ))
    return 0;
  for (gsize i = 0; i < map.size; i++) {
    h ^= map.data[i];
    h *= 1099511628211ull;
  }
  gst_buffer_unmap(buf, &map);
  return h;
}

// Counts input frames; past in_limit, answers EOS upstream so that the
// source stops and sends EOS. (identity eos-after is not exact in 1.22: the
// last frame it lets through varies from run to run.)
GstPadProbeReturn CountIn(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *p = static_cast<Probes *>(data);
  if (!(GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER))
    return GST_PAD_PROBE_OK;
  if (p->in_limit > 0 && p->frames_in >= p->in_limit) {
    gst_buffer_unref(GST_PAD_PROBE_INFO_BUFFER(info));
    GST_PAD_PROBE_INFO_DATA(info) = nullptr;
    GST_PAD_PROBE_INFO_FLOW_RETURN(info) = GST_FLOW_EOS;
    return GST_PAD_PROBE_HANDLED;
  }
  p->frames_in++;
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn CountOut(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *p = static_cast<Probes *>(data);
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buf)
    return GST_PAD_PROBE_OK;
  p->frames_out++;
  const GstClockTime pts = GST_BUFFER_PTS(buf);
  if (GST_CLOCK_TIME_IS_VALID(pts)) {
    if (GST_CLOCK_TIME_IS_VALID(p->last_pts) && pts <= p->last_pts)
      p->out_of_order++;
    p->last_pts = pts;
  }
  if (p->hash)
    p->hashes.push_back(HashBuffer(buf));
  return GST_PAD_PROBE_OK;
}

bool AddProbe(GstElement *pipeline, const char *element, const char *pad,
              GstPadProbeCallback cb, Probes *probes) {
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline), element);
  if (!e)
    return false;
  GstPad *p = gst_element_get_static_pad(e, pad);
  gst_object_unref(e);
  if (!p)
    return false;
  gst_pad_add_probe(p, GST_PAD_PROBE_TYPE_BUFFER, cb, probes, nullptr);
  gst_object_unref(p);
  return true;
}

[[noreturn]] void Fail(const std::string& what) {
  g_printerr("gpufan-demo: ERROR: %s\n", what.c_str());
  std::exit(1);
}

// Runs a pipeline to EOS, or fails on error or after timeout_s.
// Returns the wall-clock seconds from PLAYING to EOS. When `stats` is
// given, the last `gpufan-stats` element message is stored there.
double RunToEos(GstElement *pipeline, int timeout_s, const char *label,
                GstStructure **stats) {
  GstBus *bus = gst_element_get_bus(pipeline);
  const gint64 start = g_get_monotonic_time();
  const gint64 deadline = start + gint64{timeout_s} * G_USEC_PER_SEC;
  // StartPlaying prints why (the error message on the bus).
  if (!gpufan_util::StartPlaying(kProg, pipeline, bus))
    Fail(std::string(label) + ": the pipeline refused to start");
  double seconds = -1;
  while (seconds < 0) {
    const gint64 now = g_get_monotonic_time();
    if (now >= deadline) {
      gst_element_set_state(pipeline, GST_STATE_NULL);
      Fail(std::string(label) + ": no EOS after " + std::to_string(timeout_s) +
           " s (raise --timeout?)");
    }
    GstMessage *msg = gst_bus_timed_pop_filtered(
        bus, (deadline - now) * GST_USECOND,
        static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_EOS |
                                    GST_MESSAGE_WARNING | GST_MESSAGE_ELEMENT));
    if (!msg)
      continue;
    switch (GST_MESSAGE_TYPE(msg)) {
      case GST_MESSAGE_ERROR:
        gpufan_util::PrintMessage(kProg, msg, "error");
        gst_message_unref(msg);
        gst_element_set_state(pipeline, GST_STATE_NULL);
        Fail(std::string(label) + ": the pipeline failed");
      case GST_MESSAGE_WARNING:
        gpufan_util::PrintMessage(kProg, msg, "warning");
        break;
      case GST_MESSAGE_ELEMENT: {
        const GstStructure *s = gst_message_get_structure(msg);
        if (stats && s && gst_structure_has_name(s, "gpufan-stats")) {
          if (*stats)
            gst_structure_free(*stats);
          *stats = gst_structure_copy(s);
        }
        break;
      }
      case GST_MESSAGE_EOS:
        seconds = (g_get_monotonic_time() - start) / 1e6;
        break;
      default:
        break;
    }
    gst_message_unref(msg);
  }
  gst_object_unref(bus);
  return seconds;
}

RunResult RunPipeline(const Options& o, int lanes, const std::string& location,
                      const char *label) {
  const std::string desc = PipelineDescription(o, lanes, location);
  if (o.verbose)
    g_print("%s pipeline:\n  gst-launch-1.0 %s\n", label, desc.c_str());
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch(desc.c_str(), &err);
  if (err) {
    // A parse error (e.g. an unknown element or property) is fatal even
    // when gst_parse_launch returned a partial pipeline.
    g_printerr("gpufan-demo: error: %s\n  pipeline: %s\n", err->message,
               desc.c_str());
    g_clear_error(&err);
    if (pipeline)
      gst_object_unref(pipeline);
    Fail(std::string(label) + ": could not build the pipeline");
  }

  Probes probes;
  if (o.input && o.frames > 0)
    probes.in_limit = static_cast<guint64>(o.frames);
  if (!AddProbe(pipeline, "demo_in", "src", CountIn, &probes) ||
      !AddProbe(pipeline, "demo_out", "src", CountOut, &probes))
    Fail("internal: probe elements missing");

  RunResult r;
  r.seconds = RunToEos(pipeline, o.timeout_s, label, &r.stats);
  if (lanes > 0) {
    // The property gives the final numbers when no message came (e.g. the
    // fan-in posts it only in some versions).
    GstElement *f = gst_bin_get_by_name(GST_BIN(pipeline), "f");
    if (f && !r.stats &&
        g_object_class_find_property(G_OBJECT_GET_CLASS(f), "stats"))
      g_object_get(f, "stats", &r.stats, nullptr);
    if (f)
      gst_object_unref(f);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);

  r.frames_in = probes.frames_in;
  r.frames_out = probes.frames_out;
  r.out_of_order = probes.out_of_order;
  r.frame_hashes = std::move(probes.hashes);
  return r;
}

void PrintLaneTable(const GstStructure *stats) {
  if (!stats) {
    g_print("  (gpufanout posted no statistics)\n");
    return;
  }
  const gchar *policy = gst_structure_get_string(stats, "policy");
  g_print("  policy %s, dispatched %" G_GUINT64_FORMAT
          ", released %" G_GUINT64_FORMAT ", max-in-flight %" G_GUINT64_FORMAT
          ", window peak %" G_GUINT64_FORMAT "\n",
          policy ? policy : "?", U64(stats, "dispatched"),
          U64(stats, "released"), U64(stats, "max-in-flight"),
          U64(stats, "window-peak"));
  const GValue *lanes = gst_structure_get_value(stats, "lanes");
  if (!lanes || !GST_VALUE_HOLDS_ARRAY(lanes)) {
    g_print("  (no per-lane statistics)\n");
    return;
  }
  // Frames in GPU memory: how they reached their lane's GPU (only shown
  // where a lane got any).
  auto gpu_frames = [](const GstStructure *l) {
    return U64(l, "gpu-in-place") + U64(l, "gpu-copies-peer") +
           U64(l, "gpu-copies-via-host") + U64(l, "gpu-copies-skipped");
  };
  bool gpu = false;
  for (guint i = 0; i < gst_value_array_get_size(lanes); i++) {
    const GValue *v = gst_value_array_get_value(lanes, i);
    gpu |= GST_VALUE_HOLDS_STRUCTURE(v) &&
           gpu_frames(gst_value_get_structure(v)) > 0;
  }
  g_print("  %4s  %-16s %10s %10s %8s %11s %8s", "lane", "device", "dispatched",
          "completed", "dropped", "service ms", "fps");
  // Where each lane's time went (ms): its worker pushing into the branch,
  // waiting for input, waiting for a chunk to settle; its branch's thread
  // blocked in gpufanin on a serialized query, pushing output downstream.
  static const char *const kTimes[] = {"push", "idle", "settle", "query",
                                       "output"};
  for (const char *t : kTimes)
    g_print(" %7s", (std::string(t) + " ms").c_str());
  if (gpu)
    g_print(" %8s %6s %9s %8s", "in place", "peer", "via host", "copy MB");
  g_print("\n");
  for (guint i = 0; i < gst_value_array_get_size(lanes); i++) {
    const GValue *v = gst_value_array_get_value(lanes, i);
    if (!GST_VALUE_HOLDS_STRUCTURE(v))
      continue;
    const GstStructure *l = gst_value_get_structure(v);
    const gchar *device = gst_structure_get_string(l, "device");
    g_print("  %4" G_GUINT64_FORMAT "  %-16s %10" G_GUINT64_FORMAT
            " %10" G_GUINT64_FORMAT " %8" G_GUINT64_FORMAT " %11.2f %8.1f",
            U64(l, "lane"), device ? device : "?", U64(l, "dispatched"),
            U64(l, "completed"), U64(l, "dropped"),
            U64(l, "service-time") / 1e6, Double(l, "fps"));
    for (const char *t : kTimes)
      g_print(" %7.0f", U64(l, (std::string(t) + "-time").c_str()) / 1e6);
    if (gpu)
      g_print(" %8" G_GUINT64_FORMAT " %6" G_GUINT64_FORMAT
              " %9" G_GUINT64_FORMAT " %8.1f",
              U64(l, "gpu-in-place"), U64(l, "gpu-copies-peer"),
              U64(l, "gpu-copies-via-host"), U64(l, "gpu-copy-bytes") / 1e6);
    g_print("\n");
  }
}

// Decodes a written file and counts its frames: proves it is playable.
guint64 DecodeAndCount(const std::string& location, int timeout_s) {
  const std::string desc = "filesrc location=" + Quote(location) +
                           " ! matroskademux ! jpegdec ! identity "
                           "name=demo_out ! fakesink";
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch(desc.c_str(), &err);
  if (err) {
    g_printerr("gpufan-demo: error: %s\n", err->message);
    g_clear_error(&err);
    if (pipeline)
      gst_object_unref(pipeline);
    Fail("could not build the decode pipeline");
  }
  Probes probes;
  probes.hash = false;
  AddProbe(pipeline, "demo_out", "src", CountOut, &probes);
  RunToEos(pipeline, timeout_s, "decode", nullptr);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return probes.frames_out;
}

// lanes == 0: the plain pipeline (one branch, no statistics).
void PrintRun(const char *label, int lanes, const RunResult& r) {
  g_print("\n%s: %d lane%s, %.2f s, %" G_GUINT64_FORMAT
          " frames in, %" G_GUINT64_FORMAT " out, %.1f fps\n",
          label, std::max(lanes, 1), lanes > 1 ? "s" : "", r.seconds,
          r.frames_in, r.frames_out,
          r.seconds > 0 ? r.frames_out / r.seconds : 0.0);
  if (lanes > 0)
    PrintLaneTable(r.stats);
}

bool HaveFactories(std::initializer_list<const char *> names) {
  return std::all_of(names.begin(), names.end(), HaveFactory);
}

// Prints `hint` for each missing element; false when one is missing.
bool CheckFactoryGroup(std::initializer_list<const char *> names,
                       const char *hint) {
  bool ok = true;
  for (const char *name : names) {
    if (!HaveFactory(name)) {
      g_printerr("gpufan-demo: ERROR: element '%s' not found%s\n", name, hint);
      ok = false;
    }
  }
  return ok;
}

bool CheckFactories() {
  const bool stock = CheckFactoryGroup(
      {"videotestsrc", "videoconvert", "gaussianblur", "jpegenc", "jpegdec",
       "matroskamux", "matroskademux"},
      " (install gstreamer1.0-plugins-base/-good/-bad: scripts/setup.sh)");
  const bool ours = CheckFactoryGroup(
      {"gpufanout", "gpufanin"},
      ": build the plugin (ninja -C build) and set GST_PLUGIN_PATH=build/gst");
  return stock && ours;
}

}  // namespace

int main(int argc, char **argv) {
  // Line by line, so that progress and errors interleave right in logs.
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  const GOptionEntry entries[] = {
      {"input", 'i', 0, G_OPTION_ARG_FILENAME, &o.input,
       "Video file to process (decoded with decodebin; default: "
       "videotestsrc pattern=ball)",
       "FILE"},
      {"branch", 'b', 0, G_OPTION_ARG_STRING, &o.branch,
       "Lane branch: cpu (gaussianblur + jpegenc), cuda (cudaupload ! "
       "cudascale ! cudadownload + jpegenc), auto: cuda where GStreamer's "
       "CUDA elements find a GPU (auto)",
       "B"},
      {"lanes", 'l', 0, G_OPTION_ARG_INT, &o.lanes,
       "Lanes of the parallel run (default: number of CPUs, at least 2)", "N"},
      {"frames", 'n', 0, G_OPTION_ARG_INT, &o.frames,
       "Frames to process (default: 300 for the test source, the whole file "
       "for --input)",
       "N"},
      {"width", 0, 0, G_OPTION_ARG_INT, &o.width, "Frame width (640)", "W"},
      {"height", 0, 0, G_OPTION_ARG_INT, &o.height, "Frame height (360)", "H"},
      {"sigma", 0, 0, G_OPTION_ARG_DOUBLE, &o.sigma,
       "gaussianblur sigma: the work per frame (3.0)", "S"},
      {"quality", 0, 0, G_OPTION_ARG_INT, &o.quality, "JPEG quality (85)", "Q"},
      {"policy", 'p', 0, G_OPTION_ARG_STRING, &o.policy,
       "gpufanout policy: round-robin, least-loaded, weighted, adaptive "
       "(adaptive)",
       "P"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &o.output,
       "Output file of the parallel run (out/gpufan-demo.mkv); the baseline "
       "writes *-1lane.mkv beside it",
       "FILE"},
      {"timeout", 't', 0, G_OPTION_ARG_INT, &o.timeout_s,
       "Seconds one pipeline may run before the demo gives up (600)", "S"},
      {"no-baseline", 0, 0, G_OPTION_ARG_NONE, &o.no_baseline,
       "Skip the 1-lane baseline", nullptr},
      {"plain", 0, 0, G_OPTION_ARG_NONE, &o.plain,
       "Also time the branch without gpufanout/gpufanin (plugin overhead)",
       nullptr},
      {"verbose", 'v', 0, G_OPTION_ARG_NONE, &o.verbose,
       "Print the pipelines (as gst-launch-1.0 lines)", nullptr},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  if (!gpufan_util::ParseOptions(
          entries,
          "- process a video across parallel lanes with gpufanout/gpufanin",
          kProg, &argc, &argv))
    return 1;

  if (!o.policy)
    o.policy = g_strdup("adaptive");
  if (!o.output)
    o.output = g_strdup("out/gpufan-demo.mkv");
  if (o.lanes <= 0)
    o.lanes = std::max(2u, g_get_num_processors());
  if (o.width <= 0 || o.height <= 0 || o.timeout_s <= 0 || o.lanes > 1024)
    Fail("bad --width/--height/--timeout/--lanes");
  if (o.input && !g_file_test(o.input, G_FILE_TEST_IS_REGULAR))
    Fail(std::string("no such file: ") + o.input);
  if (!CheckFactories())
    Fail("required elements are missing");
  const std::string branch = o.branch ? o.branch : "auto";
  const bool have_cuda =
      HaveFactories({"cudaupload", "cudascale", "cudadownload"});
  if (branch == "cuda" && !have_cuda)
    Fail(
        "--branch cuda: GStreamer's CUDA elements are missing (no GPU "
        "found by nvcodec, or no NVIDIA driver)");
  if (branch != "auto" && branch != "cpu" && branch != "cuda")
    Fail("bad --branch (cpu, cuda or auto)");
  o.cuda = branch == "cuda" || (branch == "auto" && have_cuda);

  std::string output = o.output;
  gchar *dir = g_path_get_dirname(output.c_str());
  if (g_mkdir_with_parents(dir, 0755) != 0)
    Fail(std::string("cannot create ") + dir);
  g_free(dir);
  std::string stem = output;
  if (g_str_has_suffix(stem.c_str(), ".mkv"))
    stem.resize(stem.size() - 4);
  const std::string baseline_output = stem + "-1lane.mkv";

  if (o.cuda)
    g_print(
        "gpufan-demo: %s, %dx%d, CUDA branch (cudaupload ! cudascale ! "
        "cudadownload) + jpegenc per lane, lanes on the GPUs, policy %s\n",
        o.input ? o.input : "videotestsrc pattern=ball", o.width, o.height,
        o.policy);
  else
    g_print(
        "gpufan-demo: %s, %dx%d, gaussianblur sigma=%.2f + jpegenc per "
        "lane, policy %s, %u CPUs\n",
        o.input ? o.input : "videotestsrc pattern=ball", o.width, o.height,
        o.sigma, o.policy, g_get_num_processors());

  bool ok = true;
  RunResult plain;
  if (o.plain) {
    plain = RunPipeline(o, 0, stem + "-plain.mkv", "plain");
    PrintRun("plain (no gpufan elements)", 0, plain);
  }
  RunResult base;
  if (!o.no_baseline) {
    base = RunPipeline(o, 1, baseline_output, "baseline");
    PrintRun("baseline", 1, base);
  }
  RunResult par = RunPipeline(o, o.lanes, output, "parallel");
  PrintRun("parallel", o.lanes, par);

  g_print("\nresult:\n");
  if (!o.no_baseline && par.seconds > 0) {
    g_print("  speed-up %d lanes vs 1 lane: %.2fx (%.2f s -> %.2f s)\n",
            o.lanes, base.seconds / par.seconds, base.seconds, par.seconds);
  }
  if (o.plain && par.seconds > 0) {
    g_print("  speed-up %d lanes vs plain branch: %.2fx\n", o.lanes,
            plain.seconds / par.seconds);
  }
  const bool counts_ok = par.frames_out == par.frames_in && par.frames_in > 0;
  g_print("  output frames == input frames: %s (%" G_GUINT64_FORMAT
          " of %" G_GUINT64_FORMAT ")\n",
          counts_ok ? "yes" : "NO", par.frames_out, par.frames_in);
  ok = ok && counts_ok;
  g_print("  output in input order: %s (%" G_GUINT64_FORMAT
          " timestamps out of order)\n",
          par.out_of_order == 0 ? "yes" : "NO", par.out_of_order);
  ok = ok && par.out_of_order == 0;
  if (!o.no_baseline) {
    const bool same = par.frame_hashes == base.frame_hashes;
    g_print("  frames identical to the 1-lane run: %s\n", same ? "yes" : "NO");
    ok = ok && same;
  }
  const guint64 decoded = DecodeAndCount(output, o.timeout_s);
  g_print("  %s decodes to %" G_GUINT64_FORMAT " frames: %s\n", output.c_str(),
          decoded,
          decoded == par.frames_in ? "playable, complete" : "INCOMPLETE");
  ok = ok && decoded == par.frames_in;

  if (par.stats)
    gst_structure_free(par.stats);
  if (base.stats)
    gst_structure_free(base.stats);
  if (plain.stats)
    gst_structure_free(plain.stats);
  g_free(o.input);
  g_free(o.policy);
  g_free(o.output);
  gst_deinit();
  if (!ok)
    g_printerr("gpufan-demo: FAILED: see the checks above\n");
  return ok ? 0 : 1;
}
