// SPDX-License-Identifier: LGPL-2.1-or-later
// The checks of gpufan-streams (gpufan-streams-check.h).
#include "gpufan-streams-check.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "gpufan-util.h"

namespace streams_check {

namespace {

using gpufan_util::U64;

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
  auto *s = static_cast<StreamRecord *>(data);
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

void CountOut(StreamRecord *s, GstBuffer *buf) {
  if (s->out_eos > 0)
    s->out_after_eos++;
  s->out.push_back(FrameOf(buf));
  s->n_out++;
}

// At gpufanin's src_k: what leaves the stream.
GstPadProbeReturn ProbeOut(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *s = static_cast<StreamRecord *>(data);
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


constexpr auto kProbeMask = static_cast<GstPadProbeType>(
    GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
    GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM);

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
Verdict Check(const StreamRecord& s, const std::map<Frame, int>& owner) {
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

}  // namespace

void WatchInput(GstPad *fan_sink, StreamRecord *s) {
  gst_pad_add_probe(fan_sink, kProbeMask, ProbeIn, s, nullptr);
}

void WatchOutput(GstPad *fan_src, StreamRecord *s) {
  gst_pad_add_probe(fan_src, kProbeMask, ProbeOut, s, nullptr);
}

bool Report(const std::vector<const StreamRecord *>& streams) {
  std::map<Frame, int> owner;
  for (const StreamRecord *s : streams)
    for (const Frame& f : s->in)
      owner.emplace(f, s->index);

  g_print(
      "\n  %-6s %-7s %-10s %6s %6s %-8s %-5s %-4s %10s %9s %5s %6s %8s  %s\n",
      "stream", "pad", "pattern", "in", "out", "in order", "own", "EOS",
      "dispatched", "delivered", "lost", "leaky", "wait ms", "");
  bool ok = true;
  for (const StreamRecord *sp : streams) {
    const StreamRecord& s = *sp;
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
  return ok;
}

// --- watchdog ---------------------------------------------------------------

Watchdog::Watchdog(int seconds, std::vector<const StreamRecord *> streams)
    : streams_(std::move(streams)) {
  thread_ = std::thread([this, seconds] { Run(seconds); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    done_ = true;
  }
  cond_.notify_all();
  thread_.join();
}

void Watchdog::Run(int seconds) {
  std::unique_lock<std::mutex> lk(mutex_);
  if (cond_.wait_for(lk, std::chrono::seconds(seconds),
                     [this] { return done_; }))
    return;
  // Only atomics are read here: the other threads may be running.
  g_printerr(
      "gpufan-streams: ERROR: watchdog: the run did not finish in %d s "
      "(raise --timeout?); where each stream was:\n",
      seconds);
  for (const StreamRecord *s : streams_)
    g_printerr("  stream %d: %" G_GUINT64_FORMAT " in%s, %" G_GUINT64_FORMAT
               " out, %d EOS out\n",
               s->index, s->n_in.load(), s->in_eos ? " + EOS" : "",
               s->n_out.load(), s->out_eos.load());
  fflush(stderr);
  _exit(3);
}

}  // namespace streams_check
