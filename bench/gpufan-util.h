// SPDX-License-Identifier: LGPL-2.1-or-later
// What the benchmark programs (bench/) and the example programs (examples/)
// each needed again: the clock, medians and percentiles, the machine (CPU,
// GStreamer version, load, timer slack), option parsing, and GStreamer's
// messages and statistics structures. Header only; JSON is json-text.h's.
#pragma once

#include <gst/gst.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace gpufan_util {

// --- time and statistics ---

// Monotonic time in ns.
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// NaN when there is none.
inline double Median(std::vector<double> v) {
  if (v.empty())
    return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Nearest-rank percentile; NaN when there is none.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty())
    return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// `v` printed with `format` (one double); "-" when it is not finite.
inline std::string Fmt(const char *format, double v) {
  if (!std::isfinite(v))
    return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// --- the machine ---

inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

// "1.22.0"
inline std::string GstVersion() {
  guint major, minor, micro, nano;
  gst_version(&major, &minor, &micro, &nano);
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(micro);
}

// The 1-minute load average; NaN when unknown.
inline double LoadAverage() {
  double load[1] = {NAN};
  return getloadavg(load, 1) == 1 ? load[0] : NAN;
}

// A simulated lane is a sleep: let the kernel wake it as close to its
// service time as it can (its default slack is 50 us). Sets the slack of
// this thread, and so of every thread and child process started after it,
// to --timer-slack-ns N (or =N) of argv, else `slack_ns`; returns it. Call
// it before anything starts a thread (option parsing initializes
// GStreamer); argv is only read.
inline gint64 SetTimerSlack(int argc, char **argv, gint64 slack_ns) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--timer-slack-ns=", 0) == 0)
      slack_ns = g_ascii_strtoll(arg.c_str() + 17, nullptr, 10);
    else if (arg == "--timer-slack-ns" && i + 1 < argc)
      slack_ns = g_ascii_strtoll(argv[i + 1], nullptr, 10);
  }
  prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack_ns), 0UL, 0UL, 0UL);
  return slack_ns;
}

// --- options and GStreamer ---

// Parses `entries` and GStreamer's own options out of argv, then
// initializes GStreamer. False, the reason said on stderr (after "PROG: "
// when `prog` is given), when the options are wrong.
inline bool ParseOptions(const GOptionEntry *entries, const char *summary,
                         const char *prog, int *argc, char ***argv) {
  GOptionContext *ctx = g_option_context_new(summary);
  g_option_context_add_main_entries(ctx, entries, nullptr);
  g_option_context_add_group(ctx, gst_init_get_option_group());
  GError *err = nullptr;
  const bool ok = g_option_context_parse(ctx, argc, argv, &err);
  if (!ok) {
    if (prog)
      g_printerr("%s: %s\n", prog, err->message);
    else
      g_printerr("%s\n", err->message);
    g_clear_error(&err);
  }
  g_option_context_free(ctx);
  if (ok)
    gst_init(argc, argv);
  return ok;
}

inline bool HaveFactory(const char *name) {
  GstElementFactory *f = gst_element_factory_find(name);
  if (f)
    gst_object_unref(f);
  return f != nullptr;
}

// The benchmarks' check for the plugin: false, with a hint, when
// gpufanout cannot be made.
inline bool GpufanoutFound() {
  GstElement *probe = gst_element_factory_make("gpufanout", nullptr);
  if (!probe) {
    g_printerr(
        "gpufanout not found: set GST_PLUGIN_PATH to the build's gst/ "
        "directory\n");
    return false;
  }
  gst_object_unref(probe);
  return true;
}

// Prints an error or warning message (after "PROG: ") with its source, text
// and debug detail.
inline void PrintMessage(const char *prog, GstMessage *msg, const char *kind) {
  GError *err = nullptr;
  gchar *debug = nullptr;
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
    gst_message_parse_error(msg, &err, &debug);
  else
    gst_message_parse_warning(msg, &err, &debug);
  g_printerr("%s: %s from %s: %s\n", prog, kind,
             GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)),
             err ? err->message : "(no message)");
  if (debug)
    g_printerr("  debug: %s\n", debug);
  g_clear_error(&err);
  g_free(debug);
}

// "pipeline error: TEXT" of an error message.
inline std::string PipelineError(GstMessage *msg) {
  GError *e = nullptr;
  gst_message_parse_error(msg, &e, nullptr);
  std::string text = std::string("pipeline error: ") + e->message;
  g_error_free(e);
  return text;
}

// Sets `pipeline` to PLAYING; false, the bus's error message printed as
// PrintMessage does, when it refuses.
inline bool StartPlaying(const char *prog, GstElement *pipeline, GstBus *bus) {
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) !=
      GST_STATE_CHANGE_FAILURE)
    return true;
  GstMessage *msg = gst_bus_timed_pop_filtered(bus, 0, GST_MESSAGE_ERROR);
  if (msg) {
    PrintMessage(prog, msg, "error");
    gst_message_unref(msg);
  }
  return false;
}

// An unsigned field of `s` (0 when `s` or the field is missing), whatever
// integer type the element used.
inline guint64 U64(const GstStructure *s, const char *field) {
  const GValue *v = s ? gst_structure_get_value(s, field) : nullptr;
  if (!v)
    return 0;
  if (G_VALUE_HOLDS_UINT64(v))
    return g_value_get_uint64(v);
  if (G_VALUE_HOLDS_UINT(v))
    return g_value_get_uint(v);
  if (G_VALUE_HOLDS_INT64(v))
    return std::max<gint64>(0, g_value_get_int64(v));
  if (G_VALUE_HOLDS_INT(v))
    return std::max(0, g_value_get_int(v));
  return 0;
}

// A double field of `s`; 0 when `s` or the field is missing.
inline double Double(const GstStructure *s, const char *field) {
  gdouble d = 0;
  return s && gst_structure_get_double(s, field, &d) ? d : 0;
}

}  // namespace gpufan_util
