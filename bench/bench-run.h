// SPDX-License-Identifier: LGPL-2.1-or-later
// What the benchmarks that run each configuration in a child process of its
// own (this program again) share: the child's figures as lines of text, the
// parent's run of a child and its reading of them, the figures of several
// runs, and the machine's JSON. Header only; builds on gpufan-util.h and
// json-text.h.
#pragma once

#include <gst/gst.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gpufan-util.h"
#include "json-text.h"

namespace gpufan_bench {

// A run's figures: each key with one value, or one per stream, lane, ...
using Fields = std::map<std::string, std::vector<double>>;

// The child's side: one line "key v1 v2 ..." a key on stdout. (A run that
// failed prints "error TEXT".)
inline void PrintFields(const Fields& f) {
  for (const auto& [key, values] : f) {
    std::printf("%s", key.c_str());
    for (double v : values)
      std::printf(" %.9g", v);
    std::printf("\n");
  }
}

// The parent's side: one child's run.
struct ChildRun {
  bool ok = false;
  std::string error;
  Fields f;
  double seconds = 0;  // the whole process, from its start to its exit

  // The first value of `key`; NaN when there is none.
  double One(const std::string& key) const {
    auto it = f.find(key);
    return it == f.end() || it->second.empty() ? NAN : it->second[0];
  }
  std::vector<double> Many(const std::string& key) const {
    auto it = f.find(key);
    return it == f.end() ? std::vector<double>() : it->second;
  }
};

// Runs `args` (the program first), waits for its exit, and reads its
// figures; not ok, with the reason, when it could not run, said "error
// TEXT" or exited with a failure.
inline ChildRun RunChild(const std::vector<std::string>& args) {
  ChildRun r;
  std::vector<const gchar *> argv;
  for (const std::string& a : args)
    argv.push_back(a.c_str());
  argv.push_back(nullptr);
  gchar *child_out = nullptr, *child_err = nullptr;
  gint status = 0;
  GError *err = nullptr;
  const int64_t t0 = gpufan_util::NowNs();
  if (!g_spawn_sync(nullptr, const_cast<gchar **>(argv.data()), nullptr,
                    G_SPAWN_DEFAULT, nullptr, nullptr, &child_out, &child_err,
                    &status, &err)) {
    r.error = std::string("cannot run the child: ") + err->message;
    g_clear_error(&err);
    return r;
  }
  r.seconds = (gpufan_util::NowNs() - t0) / 1e9;
  std::istringstream in(child_out ? child_out : "");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("error ", 0) == 0) {
      r.error = line.substr(6);
      continue;
    }
    std::istringstream words(line);
    std::string key, word;
    words >> key;
    std::vector<double> values;
    while (words >> word)
      values.push_back(g_ascii_strtod(word.c_str(), nullptr));
    if (!key.empty())
      r.f[key] = values;
  }
  if (r.error.empty() && !g_spawn_check_wait_status(status, nullptr))
    r.error = "the child failed: " + std::string(child_err ? child_err : "");
  g_free(child_out);
  g_free(child_err);
  r.ok = r.error.empty();
  return r;
}

// `key`'s first value in each run that succeeded.
inline std::vector<double> OkValues(const std::vector<ChildRun>& runs,
                                    const std::string& key) {
  std::vector<double> v;
  for (const ChildRun& r : runs)
    if (r.ok)
      v.push_back(r.One(key));
  return v;
}

// For each i < n (a stream, a lane): `key`'s i-th value in each run that
// succeeded and has one.
inline std::vector<std::vector<double>> PerIndexValues(
    const std::vector<ChildRun>& runs, const std::string& key, size_t n) {
  std::vector<std::vector<double>> out(n);
  for (const ChildRun& r : runs) {
    const std::vector<double> m = r.Many(key);
    for (size_t i = 0; r.ok && i < n && i < m.size(); ++i)
      out[i].push_back(m[i]);
  }
  return out;
}

// A run as JSON: ok, its error, and each figure under its key with '_' for
// '-': an array where `per_index(key)` (a figure per stream, lane, ...) or
// where it has other than one value, else its one number.
inline gpufan_json::JsonObject RunJson(
    const ChildRun& r,
    const std::function<bool(const std::string&)>& per_index) {
  gpufan_json::JsonObject o;
  o.Bool("ok", r.ok);
  if (!r.error.empty())
    o.Str("error", r.error);
  for (const auto& [key, values] : r.f) {
    std::string k = key;
    std::replace(k.begin(), k.end(), '-', '_');
    o.Raw(k, values.size() != 1 || per_index(key)
                 ? gpufan_json::JsonArray(values)
                 : gpufan_json::JsonNumber(values[0]));
  }
  return o;
}

// The machine: CPUs, CPU model, GStreamer, the load average before and
// after the runs.
inline gpufan_json::JsonObject MachineJson(double load_before,
                                           double load_after) {
  gpufan_json::JsonObject machine;
  machine.Num("nproc", sysconf(_SC_NPROCESSORS_ONLN))
      .Str("cpu", gpufan_util::CpuModel())
      .Str("gstreamer", gpufan_util::GstVersion())
      .Num("load_before", load_before)
      .Num("load_after", load_after);
  return machine;
}

}  // namespace gpufan_bench
