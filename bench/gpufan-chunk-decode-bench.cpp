// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufan-chunk-decode-bench: chunk-parallel H.264 decoding on N CPU lanes
// against N decoder chains in one process, in the same run (issue 23,
// item 4).
//
//   R(N)  the reference: N independent chains in ONE pipeline, each decoding
//         the whole file:
//           filesrc ! h264parse ! DEC ! fakesink sync=false    (N times)
//   G(N)  gpufan: one stream over N chunk lanes:
//           filesrc ! h264parse config-interval=-1 ! gpufanout name=f
//             chunk=keyframes chunk-frames=K devices=cpu:N
//             gpufanin name=m ! fakesink sync=false
//           f.src_k ! DEC ! m.sink_k                            (k < N)
//   DEC is `avdec_h264 max-threads=1` (one core a decoder; --decoder). G(1),
//   one lane, is the chunking alone: what cutting the stream into chunks
//   (a drain and a reset per chunk) costs without any parallelism.
//
// The input is made once per run, before anything is timed: an H.264
// byte-stream file from videotestsrc (pattern=smpte, horizontal-speed=4:
// moving, so that the decoder has work), x264enc with an IDR frame every
// GOP frames (key-int-max, no scene cuts, no B-frames: closed GOPs), read
// back once to count its frames and keyframes (--input FILE: a file of
// your own).
//
// Each run is a child process of its own (this program again, --child):
// frames per second at steady state, i.e. the frames after the first
// one reaching a sink, over the time from that first buffer to the last
// buffer reaching the sink(s) (pad probes): the pipeline's start and the
// first decoder's initialization are not in it. A run must deliver exactly
// the expected frames (F per chain for R, F for G), and G's output must be
// in PTS order (R's chains each too); anything else fails the run and the
// benchmark. In the same window: the process's CPU time (cores busy, CPU ms
// a frame) and each thread's, and, per decoder (a chain's or a lane's),
// where its streaming thread's time went (wall and on-CPU), from pad probes
// on the decoder:
//   decode   a buffer entered the decoder, until it put the picture out
//   output   the picture's push downstream (into gpufanin, or the fakesink)
//            and the wait for the next input (R: reading and parsing it)
//   query    blocked in a serialized query (ALLOCATION) sent downstream
//            (one that fails runs until the decoder's next event)
//   drain    the chunk's drain (EOS) inside the decoder
//   settle   after the drain, until the branch is reset (the lane waits in
//            gpufanout for the fan-in to have its chunk)
//   between  the reset (FLUSH) until the next chunk's first buffer
//   idle     window time before the decoder's first event or after its last
// Also per decoder: its chunks, ALLOCATION queries and CAPS events, and how
// many distinct buffers it put out (its pool's size: a frame held downstream
// keeps its buffer out of the pool); the process's minor page faults in the
// window (a pool that grows touches fresh memory); the whole process's time,
// start-up included, as timing a gst-launch-1.0 run would see it ("whole").
// --timeline PREFIX writes every decoder event of each G run as CSV.
//
// Runs alternate, R and G for each N in every repetition (which goes first
// alternates too); medians over the repetitions; the ratio G/R of the
// medians, and each repetition's G/R. Timings are never pass/fail.
//
// Output: a table on stdout, JSON (--json FILE).
// Run: GST_PLUGIN_PATH=build/gst build/bench/gpufan-chunk-decode-bench
//        --json out/chunk-decode.json
// Exit status: 0, 1 (a run failed), 2 (usage, or no gpufanout), 77 (no
// avdec_h264, x264enc or h264parse: nothing to measure).

#include <glib/gstdio.h>
#include <gst/gst.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
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
using gpufan_util::Median;
using gpufan_util::NowNs;

// --- CPU time ---

// The CPU clock of thread `tid` of this process (Linux's
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)).
clockid_t ThreadClock(pid_t tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid)) << 3) | 6;
}

int64_t ClockNs(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0)
    return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

pid_t Tid() {
  thread_local const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  return tid;
}

long MinorFaults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

struct ThreadCpu {
  std::string name;
  int64_t cpu_ns = 0;
  long voluntary = 0, involuntary = 0;  // context switches
};

// Every thread of this process: its name, CPU time, context switches.
std::map<pid_t, ThreadCpu> SampleThreads() {
  std::map<pid_t, ThreadCpu> out;
  GDir *dir = g_dir_open("/proc/self/task", 0, nullptr);
  if (!dir)
    return out;
  while (const gchar *entry = g_dir_read_name(dir)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(entry));
    ThreadCpu t;
    t.cpu_ns = ClockNs(ThreadClock(tid));
    if (t.cpu_ns < 0)
      continue;  // it ended meanwhile
    const std::string base = std::string("/proc/self/task/") + entry;
    std::ifstream comm(base + "/comm");
    std::getline(comm, t.name);
    std::ifstream status(base + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0)
        t.voluntary = std::atol(line.c_str() + 24);
      else if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
        t.involuntary = std::atol(line.c_str() + 27);
    }
    out[tid] = t;
  }
  g_dir_close(dir);
  return out;
}

// --- one run (in the child) ---

struct ChildSpec {
  bool gpufan = true;
  guint chains = 1;  // R: decoder chains; G: lanes
  std::string input;
  guint frames = 0;  // in the input
  guint chunk_frames = 60;
  std::string decoder = "avdec_h264 max-threads=1";
  std::string fanout_props;  // more gpufanout properties (experiments)
  std::string timeline;      // G: write every decoder event here (CSV)
};

// What happened at a decoder's pads, in its streaming thread's order.
enum EventKind : uint8_t {
  kIn,          // a buffer at its sink pad
  kOut,         // a buffer at its src pad
  kQueryStart,  // a serialized query leaves its src pad
  kQueryEnd,    // ... and is answered
  kCaps,        // a CAPS event leaves its src pad
  kEosIn,       // EOS at its sink pad (the chunk's drain)
  kEosOut,      // EOS at its src pad (the drain done)
  kFlushStart,  // FLUSH_START at its sink pad (the branch's reset)
  kFlushStop,   // FLUSH_STOP at its sink pad
};

const char *EventName(uint8_t k) {
  static const char *const names[] = {"in",        "out",         "query-start",
                                      "query-end", "caps",        "eos-in",
                                      "eos-out",   "flush-start", "flush-stop"};
  return k < G_N_ELEMENTS(names) ? names[k] : "?";
}

// Where a decoder's time goes: the category of the time from each event to
// the next one (see the header).
enum Split {
  kDecode,
  kOutput,
  kQuery,
  kDrain,
  kSettle,
  kBetween,
  kIdle,
  kSplits
};
const char *const kSplitNames[kSplits] = {"decode", "output",  "query", "drain",
                                          "settle", "between", "idle"};

Split SplitAfter(uint8_t event) {
  switch (event) {
    case kOut:
      return kOutput;
    case kQueryStart:
      return kQuery;
    case kEosIn:
      return kDrain;
    case kEosOut:
      return kSettle;
    case kFlushStart:
    case kFlushStop:
      return kBetween;
    default:  // kIn, kQueryEnd, kCaps
      return kDecode;
  }
}

struct Event {
  uint8_t kind;
  int64_t wall_ns;
  int64_t cpu_ns;  // the streaming thread's CPU clock; -1 from another thread
};

struct Decoder {
  std::mutex m;
  std::vector<Event> events;
  pid_t tid = 0;  // the thread of its first input
  // The memory of each picture it put out: how many it had in use at once
  // (its pool's size), as frames held downstream keep theirs.
  std::set<const void *> memories;
  guint64 in = 0, out = 0, chunks = 0, allocation_queries = 0,
          other_queries = 0, caps = 0;

  void Add(uint8_t kind) {
    const int64_t wall = NowNs();
    std::lock_guard<std::mutex> lk(m);
    if (tid == 0 && kind == kIn)
      tid = Tid();
    const int64_t cpu =
        tid != 0 && Tid() == tid ? ClockNs(CLOCK_THREAD_CPUTIME_ID) : -1;
    events.push_back(Event{kind, wall, cpu});
  }
};

GstPadProbeReturn OnDecoderSink(GstPad *, GstPadProbeInfo *info,
                                gpointer data) {
  auto *d = static_cast<Decoder *>(data);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
    d->Add(kIn);
    d->in++;
    if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DISCONT))
      d->chunks++;  // a chunk's first buffer (and the stream's)
    return GST_PAD_PROBE_OK;
  }
  switch (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info))) {
    case GST_EVENT_EOS:
      d->Add(kEosIn);
      break;
    case GST_EVENT_FLUSH_START:
      d->Add(kFlushStart);
      break;
    case GST_EVENT_FLUSH_STOP:
      d->Add(kFlushStop);
      break;
    default:
      break;
  }
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn OnDecoderSrc(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *d = static_cast<Decoder *>(data);
  const GstPadProbeType type = GST_PAD_PROBE_INFO_TYPE(info);
  if (type & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
    d->Add(kOut);
    d->out++;
    if (gst_buffer_n_memory(buf) > 0)
      d->memories.insert(gst_buffer_peek_memory(buf, 0));
  } else if (type & GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM) {
    GstQuery *q = GST_PAD_PROBE_INFO_QUERY(info);
    if (!GST_QUERY_IS_SERIALIZED(q))
      return GST_PAD_PROBE_OK;
    // Probes see a query on its way out (PUSH) and answered (PULL).
    const bool answered = type & GST_PAD_PROBE_TYPE_PULL;
    d->Add(answered ? kQueryEnd : kQueryStart);
    if (!answered && GST_QUERY_TYPE(q) == GST_QUERY_ALLOCATION)
      d->allocation_queries++;
    else if (!answered)
      d->other_queries++;
  } else if (type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent *e = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(e) == GST_EVENT_CAPS) {
      d->Add(kCaps);
      d->caps++;
    } else if (GST_EVENT_TYPE(e) == GST_EVENT_EOS) {
      d->Add(kEosOut);
    }
  }
  return GST_PAD_PROBE_OK;
}

// The fakesinks: counts, PTS order, and the steady-state window.
struct SinkState {
  std::mutex m;
  guint64 expected_total = 0;  // all sinks together
  guint64 total = 0;
  std::vector<guint64> count;          // per sink
  std::vector<GstClockTime> last_pts;  // per sink
  std::vector<guint64> not_rising;     // per sink: PTS not after the last
  int64_t t_first = 0, t_last = 0;
  int64_t process_cpu_first = 0, process_cpu_last = 0;
  long faults_first = 0, faults_last = 0;  // minor page faults
  std::map<pid_t, ThreadCpu> threads_first, threads_last;
};

struct SinkProbe {
  SinkState *st;
  size_t index;
};

GstPadProbeReturn OnSink(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *p = static_cast<SinkProbe *>(data);
  SinkState& st = *p->st;
  const int64_t now = NowNs();
  const GstClockTime pts = GST_BUFFER_PTS(GST_PAD_PROBE_INFO_BUFFER(info));
  std::lock_guard<std::mutex> lk(st.m);
  guint64& n = st.count[p->index];
  GstClockTime& last = st.last_pts[p->index];
  if (!GST_CLOCK_TIME_IS_VALID(pts) ||
      (n > 0 && (!GST_CLOCK_TIME_IS_VALID(last) || pts <= last)))
    st.not_rising[p->index]++;
  last = pts;
  n++;
  st.total++;
  if (st.total == 1) {
    st.t_first = now;
    st.process_cpu_first = ClockNs(CLOCK_PROCESS_CPUTIME_ID);
    st.threads_first = SampleThreads();
    st.faults_first = MinorFaults();
  }
  if (st.total == st.expected_total) {
    st.t_last = now;
    st.process_cpu_last = ClockNs(CLOCK_PROCESS_CPUTIME_ID);
    st.threads_last = SampleThreads();
    st.faults_last = MinorFaults();
  }
  return GST_PAD_PROBE_OK;
}

std::string Quoted(const std::string& s) {
  gchar *escaped = g_strescape(s.c_str(), nullptr);
  std::string out = std::string("\"") + escaped + "\"";
  g_free(escaped);
  return out;
}

std::string Description(const ChildSpec& s) {
  std::ostringstream p;
  const std::string src = "filesrc location=" + Quoted(s.input);
  const std::string sink = " sync=false enable-last-sample=false";
  if (!s.gpufan) {
    for (guint k = 0; k < s.chains; ++k)
      p << src << " ! h264parse ! " << s.decoder << " name=d" << k
        << " ! fakesink name=s" << k << sink << "  ";
    return p.str();
  }
  p << src << " ! h264parse config-interval=-1 ! gpufanout name=f"
    << " chunk=keyframes chunk-frames=" << s.chunk_frames
    << " devices=cpu:" << s.chains << " " << s.fanout_props
    << " gpufanin name=m ! fakesink name=s0" << sink;
  for (guint k = 0; k < s.chains; ++k)
    p << "  f.src_" << k << " ! " << s.decoder << " name=d" << k << " ! m.sink_"
      << k;
  return p.str();
}

void AddProbe(GstElement *pipeline, const std::string& element, const char *pad,
              GstPadProbeType type, GstPadProbeCallback cb, gpointer data) {
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline), element.c_str());
  g_assert(e);
  GstPad *p = gst_element_get_static_pad(e, pad);
  g_assert(p);
  gst_pad_add_probe(p, type, cb, data, nullptr);
  gst_object_unref(p);
  gst_object_unref(e);
}

// A result as lines "key v1 v2 ...", which the parent reads back; "error
// TEXT" when the run failed.
using gpufan_bench::Fields;

// Each thread's figures in the window: "thread-cpu-s:NAME" and so on, summed
// over the threads of one name (the lanes' and chains' threads have names
// of their own).
const char kThreadCpu[] = "thread-cpu-s:";
const char kThreadVoluntary[] = "thread-voluntary-switches:";
const char kThreadInvoluntary[] = "thread-involuntary-switches:";

// Decoder `d`'s time within [t0, t1], per category: wall and on-CPU ns.
void SplitTime(const Decoder& d, int64_t t0, int64_t t1, double wall[kSplits],
               double cpu[kSplits]) {
  std::fill(wall, wall + kSplits, 0.0);
  std::fill(cpu, cpu + kSplits, 0.0);
  const std::vector<Event>& ev = d.events;
  if (ev.empty()) {
    wall[kIdle] = static_cast<double>(t1 - t0);
    return;
  }
  wall[kIdle] += std::max<int64_t>(0, std::min(ev.front().wall_ns, t1) - t0);
  wall[kIdle] += std::max<int64_t>(0, t1 - std::max(ev.back().wall_ns, t0));
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    const int64_t a = ev[i].wall_ns, b = ev[i + 1].wall_ns;
    const int64_t ca = std::max(a, t0), cb = std::min(b, t1);
    if (cb <= ca)
      continue;
    const Split s = SplitAfter(ev[i].kind);
    wall[s] += static_cast<double>(cb - ca);
    // The CPU of the clipped part, pro rata.
    if (ev[i].cpu_ns >= 0 && ev[i + 1].cpu_ns >= 0 && b > a)
      cpu[s] += static_cast<double>(ev[i + 1].cpu_ns - ev[i].cpu_ns) *
                (cb - ca) / (b - a);
  }
}

void WriteTimeline(const std::string& path, const SinkState& st,
                   const std::vector<std::unique_ptr<Decoder>>& decoders) {
  std::ofstream out(path);
  out << "# times in ms from the first buffer at the sink; the last at "
      << Fmt("%.3f", (st.t_last - st.t_first) / 1e6) << "\n"
      << "decoder,event,wall_ms,thread_cpu_ms\n";
  for (size_t k = 0; k < decoders.size(); ++k) {
    const std::vector<Event>& ev = decoders[k]->events;
    const int64_t cpu0 = ev.empty() ? 0 : ev.front().cpu_ns;
    for (const Event& e : ev)
      out << k << "," << EventName(e.kind) << ","
          << Fmt("%.3f", (e.wall_ns - st.t_first) / 1e6) << ","
          << (e.cpu_ns >= 0 ? Fmt("%.3f", (e.cpu_ns - cpu0) / 1e6) : "")
          << "\n";
  }
}

int RunChild(const ChildSpec& spec) {
  const int64_t t_start = NowNs();
  const std::string desc = Description(spec);
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch(desc.c_str(), &err);
  if (!pipeline || err) {
    std::printf("error cannot build the pipeline: %s (%s)\n",
                err ? err->message : "?", desc.c_str());
    return 1;
  }
  const size_t sinks = spec.gpufan ? 1 : spec.chains;
  SinkState st;
  st.expected_total = static_cast<guint64>(spec.frames) * sinks;
  st.count.assign(sinks, 0);
  st.last_pts.assign(sinks, GST_CLOCK_TIME_NONE);
  st.not_rising.assign(sinks, 0);
  std::vector<SinkProbe> sink_probes(sinks);
  for (size_t k = 0; k < sinks; ++k) {
    sink_probes[k] = SinkProbe{&st, k};
    AddProbe(pipeline, "s" + std::to_string(k), "sink",
             GST_PAD_PROBE_TYPE_BUFFER, OnSink, &sink_probes[k]);
  }
  std::vector<std::unique_ptr<Decoder>> decoders;
  for (guint k = 0; k < spec.chains; ++k) {
    decoders.push_back(std::make_unique<Decoder>());
    decoders.back()->events.reserve(spec.frames * 3 + 1000);
    const std::string name = "d" + std::to_string(k);
    AddProbe(pipeline, name, "sink",
             static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                          GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                          GST_PAD_PROBE_TYPE_EVENT_FLUSH),
             OnDecoderSink, decoders.back().get());
    AddProbe(pipeline, name, "src",
             static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                          GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                          GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM),
             OnDecoderSrc, decoders.back().get());
    // A query's answer: a probe of its own (one for pushed data does not
    // see it). GStreamer calls it only for a query that succeeded: a failed
    // one (fakesink answers no ALLOCATION) counts until the decoder's next
    // event.
    AddProbe(pipeline, name, "src",
             static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM |
                                          GST_PAD_PROBE_TYPE_PULL),
             OnDecoderSrc, decoders.back().get());
  }

  // Generous: 50 ms a frame, at least 2 minutes.
  const GstClockTime timeout = std::max<GstClockTime>(
      120 * GST_SECOND, st.expected_total * 50 * GST_MSECOND);
  std::string error;
  GstBus *bus = gst_element_get_bus(pipeline);
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE)
    error = "the pipeline does not start";
  const GstClockTime deadline = gst_util_get_timestamp() + timeout;
  while (error.empty()) {
    const GstClockTime now = gst_util_get_timestamp();
    if (now >= deadline) {
      error = "timed out";
      break;
    }
    GstMessage *msg = gst_bus_timed_pop_filtered(
        bus, deadline - now,
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    if (!msg)
      continue;
    const bool eos = GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS;
    if (!eos)
      error = gpufan_util::PipelineError(msg);
    gst_message_unref(msg);
    if (eos)
      break;
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);

  // Exact counts and order, or no figure.
  for (size_t k = 0; k < sinks && error.empty(); ++k) {
    if (st.count[k] != spec.frames)
      error = "sink " + std::to_string(k) + " got " +
              std::to_string(st.count[k]) + " frames, not " +
              std::to_string(spec.frames);
    else if (st.not_rising[k] > 0)
      error = "sink " + std::to_string(k) + ": " +
              std::to_string(st.not_rising[k]) +
              " frames not in PTS order (or without a PTS)";
  }
  if (error.empty() && (st.t_last <= st.t_first || spec.frames < 2))
    error = "no steady-state window (fewer than 2 frames?)";
  if (!error.empty()) {
    std::printf("error %s\n", error.c_str());
    return 1;
  }

  Fields out;
  const double window_ns = static_cast<double>(st.t_last - st.t_first);
  out["seconds"] = {window_ns / 1e9};
  // Building the pipeline (the plugins' loading included) until the first
  // frame reaches a sink: not in the window.
  out["start-seconds"] = {(st.t_first - t_start) / 1e9};
  out["fps"] = {(st.expected_total - 1) / (window_ns / 1e9)};
  out["frames"] = {static_cast<double>(st.expected_total)};
  out["process-cpu-s"] = {(st.process_cpu_last - st.process_cpu_first) / 1e9};
  // Fresh memory touched in the window (a pool that grows, a frame copied).
  out["minor-faults"] = {static_cast<double>(st.faults_last - st.faults_first)};
  for (const std::unique_ptr<Decoder>& d : decoders) {
    double wall[kSplits], cpu[kSplits];
    SplitTime(*d, st.t_first, st.t_last, wall, cpu);
    double max_query_ns = 0;
    for (size_t i = 0; i + 1 < d->events.size(); ++i)
      if (d->events[i].kind == kQueryStart)
        max_query_ns = std::max<double>(
            max_query_ns, d->events[i + 1].wall_ns - d->events[i].wall_ns);
    for (int s = 0; s < kSplits; ++s) {
      out[std::string("split-") + kSplitNames[s]].push_back(wall[s] / 1e9);
      out[std::string("split-") + kSplitNames[s] + "-cpu"].push_back(cpu[s] /
                                                                     1e9);
    }
    out["decoder-in"].push_back(d->in);
    out["decoder-out"].push_back(d->out);
    out["decoder-chunks"].push_back(d->chunks);
    out["decoder-allocation-queries"].push_back(d->allocation_queries);
    out["decoder-other-queries"].push_back(d->other_queries);
    out["decoder-caps"].push_back(d->caps);
    out["decoder-buffers"].push_back(d->memories.size());
    out["decoder-query-max-ms"].push_back(max_query_ns / 1e6);
  }
  // Each thread's CPU within the window (the threads alive at both ends).
  for (const auto& [tid, last] : st.threads_last) {
    auto it = st.threads_first.find(tid);
    if (it == st.threads_first.end())
      continue;
    std::string name = last.name;
    std::replace(name.begin(), name.end(), ' ', '_');
    auto add = [&](const char *prefix, double v) {
      std::vector<double>& sum = out[prefix + name];
      sum.resize(1);
      sum[0] += v;
    };
    add(kThreadCpu, (last.cpu_ns - it->second.cpu_ns) / 1e9);
    add(kThreadVoluntary, last.voluntary - it->second.voluntary);
    add(kThreadInvoluntary, last.involuntary - it->second.involuntary);
  }
  gpufan_bench::PrintFields(out);
  if (!spec.timeline.empty())
    WriteTimeline(spec.timeline, st, decoders);
  return 0;
}

// --- the parent ---

using RunResult = gpufan_bench::ChildRun;

RunResult SpawnChild(const std::string& exe, const ChildSpec& s) {
  std::vector<std::string> args = {exe,
                                   "--child",
                                   s.gpufan ? "gpufan" : "reference",
                                   "--child-chains",
                                   std::to_string(s.chains),
                                   "--input",
                                   s.input,
                                   "--child-frames",
                                   std::to_string(s.frames),
                                   "--chunk-frames",
                                   std::to_string(s.chunk_frames),
                                   "--decoder",
                                   s.decoder,
                                   "--fanout-props",
                                   s.fanout_props};
  if (!s.timeline.empty()) {
    args.push_back("--timeline");
    args.push_back(s.timeline);
  }
  RunResult r = gpufan_bench::RunChild(args);
  // The whole process, start-up and teardown included (what timing a
  // gst-launch-1.0 run would see).
  r.f["process-seconds"] = {r.seconds};
  return r;
}

struct Config {
  ChildSpec spec;
  std::vector<RunResult> runs;

  std::vector<double> Ones(const char *key) const {
    return gpufan_bench::OkValues(runs, key);
  }
  double MedianOf(const char *key) const { return Median(Ones(key)); }
  // Per decoder: the median over the runs.
  std::vector<double> PerDecoder(const std::string& key) const {
    std::vector<double> out;
    for (const std::vector<double>& v :
         gpufan_bench::PerIndexValues(runs, key, spec.chains))
      out.push_back(Median(v));
    return out;
  }
  // `f` of each run that succeeded.
  std::vector<double> PerRun(double (*f)(const RunResult&)) const {
    std::vector<double> v;
    for (const RunResult& r : runs)
      if (r.ok)
        v.push_back(f(r));
    return v;
  }
  std::vector<double> CoresBusy() const {
    return PerRun([](const RunResult& r) {
      return r.One("process-cpu-s") / r.One("seconds");
    });
  }
  // Frames a second of the whole process (start-up included).
  std::vector<double> WholeFps() const {
    return PerRun([](const RunResult& r) {
      return r.One("frames") / r.One("process-seconds");
    });
  }
  std::vector<double> CpuMsPerFrame() const {
    return PerRun([](const RunResult& r) {
      return 1e3 * r.One("process-cpu-s") / r.One("frames");
    });
  }
};

struct Pair {
  guint n = 1;
  Config ref, fan;
};

// Makes the input: `frames` of videotestsrc through x264enc into `path`.
bool MakeInput(const std::string& path, guint frames, guint width, guint height,
               guint bitrate, guint gop) {
  std::ostringstream p;
  p << "videotestsrc num-buffers=" << frames
    << " pattern=smpte horizontal-speed=4 ! video/x-raw,format=I420,width="
    << width << ",height=" << height << ",framerate=30/1"
    << " ! x264enc speed-preset=veryfast bitrate=" << bitrate
    << " key-int-max=" << gop << " bframes=0 option-string=scenecut=0"
    << " ! video/x-h264,stream-format=byte-stream,alignment=au"
    << " ! filesink location=" << Quoted(path);
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch(p.str().c_str(), &err);
  if (!pipeline || err) {
    g_printerr("cannot make the input: %s\n", err ? err->message : "?");
    g_clear_error(&err);
    return false;
  }
  GstBus *bus = gst_element_get_bus(pipeline);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstMessage *msg = gst_bus_timed_pop_filtered(
      bus, GST_CLOCK_TIME_NONE,
      static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool ok = msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS;
  if (msg && !ok)
    gpufan_util::PrintMessage("gpufan-chunk-decode-bench", msg, "error");
  if (msg)
    gst_message_unref(msg);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  return ok;
}

struct Counts {
  guint64 frames = 0, keyframes = 0, bytes = 0;
};

GstPadProbeReturn OnCount(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *c = static_cast<Counts *>(data);
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
  c->frames++;
  c->bytes += gst_buffer_get_size(buf);
  if (!GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_DELTA_UNIT))
    c->keyframes++;
  return GST_PAD_PROBE_OK;
}

// The input's access units and keyframes, as h264parse sees them.
bool CountInput(const std::string& path, Counts *c) {
  const std::string desc = "filesrc location=" + Quoted(path) +
                           " ! h264parse ! video/x-h264,alignment=au"
                           " ! fakesink name=s sync=false";
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch(desc.c_str(), &err);
  if (!pipeline || err) {
    g_clear_error(&err);
    return false;
  }
  AddProbe(pipeline, "s", "sink", GST_PAD_PROBE_TYPE_BUFFER, OnCount, c);
  GstBus *bus = gst_element_get_bus(pipeline);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstMessage *msg = gst_bus_timed_pop_filtered(
      bus, GST_CLOCK_TIME_NONE,
      static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool ok = msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS;
  if (msg)
    gst_message_unref(msg);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  return ok && c->frames > 0;
}

// "MIN-MAX" of `v`, each printed with `format`; "-" when it is empty.
std::string Range(const std::vector<double>& v, const char *format) {
  if (v.empty())
    return "-";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return Fmt(format, *lo) + "-" + Fmt(format, *hi);
}

// "1,2,4" -> {1, 2, 4}; empty on a malformed list.
std::vector<guint> ParseLanes(const char *text) {
  std::vector<guint> out;
  gchar **parts = g_strsplit(text, ",", -1);
  for (gchar **p = parts; *p; ++p) {
    gchar *end = nullptr;
    const guint64 v = g_ascii_strtoull(*p, &end, 10);
    if (end == *p || *end != '\0' || v < 1 || v > 64) {
      out.clear();
      break;
    }
    out.push_back(static_cast<guint>(v));
  }
  g_strfreev(parts);
  return out;
}

// Per thread name, the median over the runs of its `prefix` figure (the
// CPU seconds in the window, ...).
std::map<std::string, double> ThreadFigure(const Config& c,
                                           const std::string& prefix) {
  std::map<std::string, std::vector<double>> per_name;
  for (const RunResult& r : c.runs)
    for (const auto& [key, values] : r.f)
      if (r.ok && key.rfind(prefix, 0) == 0 && !values.empty())
        per_name[key.substr(prefix.size())].push_back(values[0]);
  std::map<std::string, double> out;
  for (const auto& [name, v] : per_name)
    out[name] = Median(v);
  return out;
}

std::string ConfigJson(const Config& c) {
  std::vector<std::string> runs;
  for (const RunResult& r : c.runs)
    runs.push_back(gpufan_bench::RunJson(r, [](const std::string& key) {
                     return key.rfind("split-", 0) == 0 ||
                            key.rfind("decoder-", 0) == 0;
                   }).str());
  JsonObject split;
  for (int s = 0; s < kSplits; ++s) {
    const std::string key = std::string("split-") + kSplitNames[s];
    split.Raw(kSplitNames[s], JsonArray(c.PerDecoder(key)));
    split.Raw(std::string(kSplitNames[s]) + "_cpu",
              JsonArray(c.PerDecoder(key + "-cpu")));
  }
  JsonObject threads;
  for (const auto& [name, cpu] : ThreadFigure(c, kThreadCpu))
    threads.Num(name, cpu);
  bool all_ok = !c.runs.empty();
  for (const RunResult& r : c.runs)
    all_ok = all_ok && r.ok;
  JsonObject o;
  o.Str("pipeline", Description(c.spec))
      .Bool("ok", all_ok)
      .Num("frames_per_run", static_cast<double>(c.spec.frames) *
                                 (c.spec.gpufan ? 1 : c.spec.chains))
      .Num("fps_median", c.MedianOf("fps"))
      .Raw("fps", JsonArray(c.Ones("fps")))
      .Num("seconds_median", c.MedianOf("seconds"))
      .Num("process_seconds_median", c.MedianOf("process-seconds"))
      .Num("start_seconds_median", c.MedianOf("start-seconds"))
      .Num("whole_process_fps_median", Median(c.WholeFps()))
      .Num("cores_busy_median", Median(c.CoresBusy()))
      .Num("cpu_ms_per_frame_median", Median(c.CpuMsPerFrame()))
      .Raw("decoder_frames", JsonArray(c.PerDecoder("decoder-out")))
      .Raw("decoder_chunks", JsonArray(c.PerDecoder("decoder-chunks")))
      .Raw("decoder_allocation_queries",
           JsonArray(c.PerDecoder("decoder-allocation-queries")))
      .Raw("decoder_caps_events", JsonArray(c.PerDecoder("decoder-caps")))
      .Raw("split_s_median", split.str())
      .Raw("thread_cpu_s_median", threads.str())
      .Raw("runs", JoinJson(runs, "        "));
  return o.str();
}

// Per decoder, its split as percentages of the window and its on-CPU share.
void PrintSplit(const char *label, const Config& c) {
  const double window = c.MedianOf("seconds");
  g_print("  %s:\n", label);
  for (guint k = 0; k < c.spec.chains; ++k) {
    g_print("    %s %u:", c.spec.gpufan ? "lane" : "chain", k);
    double on_cpu = 0;
    for (int s = 0; s < kSplits; ++s) {
      const std::string key = std::string("split-") + kSplitNames[s];
      const double v = c.PerDecoder(key)[k];
      on_cpu += c.PerDecoder(key + "-cpu")[k];
      g_print(" %s %s", kSplitNames[s],
              Fmt("%.1f%%", 100 * v / window).c_str());
    }
    g_print(
        " | on CPU %s; %s frames, %s chunks, %s ALLOCATION queries "
        "(longest %s ms), %s caps\n",
        Fmt("%.1f%%", 100 * on_cpu / window).c_str(),
        Fmt("%.0f", c.PerDecoder("decoder-out")[k]).c_str(),
        Fmt("%.0f", c.PerDecoder("decoder-chunks")[k]).c_str(),
        Fmt("%.0f", c.PerDecoder("decoder-allocation-queries")[k]).c_str(),
        Fmt("%.1f", c.PerDecoder("decoder-query-max-ms")[k]).c_str(),
        Fmt("%.0f", c.PerDecoder("decoder-caps")[k]).c_str());
  }
  g_print("    threads (CPU s in the window, median):");
  for (const auto& [name, cpu] : ThreadFigure(c, kThreadCpu))
    if (cpu >= 0.005)
      g_print(" %s %.2f", name.c_str(), cpu);
  g_print("\n");
}

}  // namespace

int main(int argc, char **argv) {
  gboolean smoke = FALSE, quick = FALSE, keep_input = FALSE;
  gint reps = 0, frames = 0, width = 0, height = 0, bitrate = 0, gop = 60;
  gint chunk_frames = 60, child_chains = 1, child_frames = 0;
  gchar *json = nullptr, *lanes_text = nullptr, *input = nullptr;
  gchar *decoder = nullptr, *fanout_props = nullptr, *child = nullptr;
  gchar *timeline = nullptr;
  GOptionEntry entries[] = {
      {"smoke", 0, 0, G_OPTION_ARG_NONE, &smoke,
       "240 frames of 640x360, 2 repetitions (seconds; for tests)", nullptr},
      {"quick", 0, 0, G_OPTION_ARG_NONE, &quick, "900 frames, 3 repetitions",
       nullptr},
      {"reps", 0, 0, G_OPTION_ARG_INT, &reps,
       "Repetitions (default 5; --quick 3; --smoke 2)", "R"},
      {"lanes", 0, 0, G_OPTION_ARG_STRING, &lanes_text,
       "The N to measure, comma-separated (default 1,2)", "LIST"},
      {"frames", 0, 0, G_OPTION_ARG_INT, &frames,
       "Frames in the input (default 1800; --quick 900; --smoke 240)", "F"},
      {"width", 0, 0, G_OPTION_ARG_INT, &width,
       "Input width (default 1280; --smoke 640)", "W"},
      {"height", 0, 0, G_OPTION_ARG_INT, &height,
       "Input height (default 720; --smoke 360)", "H"},
      {"bitrate", 0, 0, G_OPTION_ARG_INT, &bitrate,
       "x264enc bitrate, kbit/s (default 8000; --smoke 2000)", "KBPS"},
      {"gop", 0, 0, G_OPTION_ARG_INT, &gop,
       "Frames from one IDR frame to the next (default 60)", "G"},
      {"chunk-frames", 0, 0, G_OPTION_ARG_INT, &chunk_frames,
       "gpufanout chunk-frames (default 60)", "K"},
      {"input", 0, 0, G_OPTION_ARG_FILENAME, &input,
       "Decode this H.264 byte-stream file instead of making one", "FILE"},
      {"keep-input", 0, 0, G_OPTION_ARG_NONE, &keep_input,
       "Do not delete the input made", nullptr},
      {"decoder", 0, 0, G_OPTION_ARG_STRING, &decoder,
       "The decoder element, with its properties (default "
       "'avdec_h264 max-threads=1')",
       "DESC"},
      {"fanout-props", 0, 0, G_OPTION_ARG_STRING, &fanout_props,
       "More gpufanout properties for G (e.g. 'queue-size=8')", "PROPS"},
      {"timeline", 0, 0, G_OPTION_ARG_FILENAME, &timeline,
       "Write every decoder event of each G run to PREFIX-gN-rR.csv", "PREFIX"},
      {"json", 0, 0, G_OPTION_ARG_FILENAME, &json,
       "Write the results to FILE as JSON", "FILE"},
      {"child", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &child,
       "Run one configuration, 'reference' or 'gpufan', print its figures",
       "WHICH"},
      {"child-chains", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &child_chains,
       "The child's chains or lanes", "N"},
      {"child-frames", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &child_frames,
       "The frames in the child's input", "F"},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  const char *prog = "gpufan-chunk-decode-bench";
  if (!gpufan_util::ParseOptions(
          entries,
          "- chunk-parallel H.264 decoding on N CPU lanes against N decoder "
          "chains in one process",
          prog, &argc, &argv))
    return 2;
  const std::string decoder_desc =
      decoder ? decoder : "avdec_h264 max-threads=1";
  const std::string props = fanout_props ? fanout_props : "";

  if (child) {
    ChildSpec spec;
    spec.gpufan = g_strcmp0(child, "gpufan") == 0;
    spec.chains = static_cast<guint>(std::max(child_chains, 1));
    spec.input = input ? input : "";
    spec.frames = static_cast<guint>(std::max(child_frames, 0));
    spec.chunk_frames = static_cast<guint>(std::max(chunk_frames, 1));
    spec.decoder = decoder_desc;
    spec.fanout_props = props;
    spec.timeline = timeline ? timeline : "";
    const int rc = RunChild(spec);
    std::fflush(stdout);
    return rc;
  }

  // Nothing to measure without them: a skip (77), not a failure. (Without
  // the plugin the build is broken: a failure.)
  if (!gpufan_util::GpufanoutFound())
    return 2;
  const std::string decoder_factory =
      decoder_desc.substr(0, decoder_desc.find(' '));
  for (const char *factory :
       {decoder_factory.c_str(), "x264enc", "h264parse"}) {
    if (input && g_strcmp0(factory, "x264enc") == 0)
      continue;
    if (!gpufan_util::HaveFactory(factory)) {
      g_print("%s: skipped: no %s element (%s)\n", prog, factory,
              g_strcmp0(factory, "x264enc") == 0 ? "gstreamer1.0-plugins-ugly"
              : g_strcmp0(factory, "h264parse") == 0
                  ? "gstreamer1.0-plugins-bad"
                  : "gstreamer1.0-libav, for avdec_h264");
      return 77;
    }
  }

  const std::vector<guint> lanes = ParseLanes(lanes_text ? lanes_text : "1,2");
  const int n_reps = reps > 0 ? reps : smoke ? 2 : quick ? 3 : 5;
  const char *mode = smoke ? "smoke" : quick ? "quick" : "full";
  const guint n_frames = frames > 0 ? frames : smoke ? 240 : quick ? 900 : 1800;
  const guint w = width > 0 ? width : smoke ? 640 : 1280;
  const guint h = height > 0 ? height : smoke ? 360 : 720;
  const guint kbps = bitrate > 0 ? bitrate : smoke ? 2000 : 8000;
  if (lanes.empty() || gop < 1 || chunk_frames < 1) {
    g_printerr(
        "%s: --lanes takes a list such as 1,2,4; --gop and "
        "--chunk-frames >= 1\n",
        prog);
    return 2;
  }

  // The input, made (or counted) before anything is timed.
  std::string dir, path;
  if (input) {
    path = input;
  } else {
    GError *err = nullptr;
    gchar *tmp = g_dir_make_tmp("gpufan-chunk-decode-XXXXXX", &err);
    if (!tmp) {
      g_printerr("%s: %s\n", prog, err->message);
      g_clear_error(&err);
      return 1;
    }
    dir = tmp;
    g_free(tmp);
    path = dir + "/input.h264";
    g_print(
        "making the input: %u frames %ux%u, x264enc %u kbit/s, an IDR "
        "frame every %d...\n",
        n_frames, w, h, kbps, gop);
    if (!MakeInput(path, n_frames, w, h, kbps, static_cast<guint>(gop)))
      return 1;
  }
  Counts counts;
  if (!CountInput(path, &counts)) {
    g_printerr("%s: %s: no H.264 access unit could be read\n", prog,
               path.c_str());
    return 1;
  }
  if (!input && counts.frames != n_frames) {
    g_printerr("%s: the input has %" G_GUINT64_FORMAT " frames, not %u\n", prog,
               counts.frames, n_frames);
    return 1;
  }

  gchar *exe = g_file_read_link("/proc/self/exe", nullptr);
  std::vector<Pair> pairs;
  for (guint n : lanes) {
    Pair p;
    p.n = n;
    for (Config *c : {&p.ref, &p.fan}) {
      c->spec.gpufan = c == &p.fan;
      c->spec.chains = n;
      c->spec.input = path;
      c->spec.frames = static_cast<guint>(counts.frames);
      c->spec.chunk_frames = static_cast<guint>(chunk_frames);
      c->spec.decoder = decoder_desc;
      c->spec.fanout_props = props;
    }
    pairs.push_back(std::move(p));
  }

  const double load_before = gpufan_util::LoadAverage();
  g_print("%s (%s): %" G_GUINT64_FORMAT " frames (%" G_GUINT64_FORMAT
          " keyframes, %.1f MB) %s, %s; chunk-frames %d; %d repetition(s); "
          "%ld CPUs; load %.2f\n",
          prog, mode, counts.frames, counts.keyframes, counts.bytes / 1e6,
          input ? path.c_str()
                : Fmt("%.0f", w).append("x").append(std::to_string(h)).c_str(),
          decoder_desc.c_str(), chunk_frames, n_reps,
          sysconf(_SC_NPROCESSORS_ONLN), load_before);
  // Untimed: the page cache, the libraries, the plugin's first load.
  {
    ChildSpec warm = pairs.back().fan.spec;
    RunResult r = SpawnChild(exe, warm);
    if (!r.ok) {
      g_printerr("%s: the warm-up run (G, %u lanes) failed: %s\n", prog,
                 warm.chains, r.error.c_str());
      return 1;
    }
  }
  bool all_ok = true;
  std::vector<double> loads;
  for (int rep = 0; rep < n_reps; ++rep) {
    loads.push_back(gpufan_util::LoadAverage());
    g_print("rep %d (load %.2f):", rep + 1, loads.back());
    for (Pair& p : pairs) {
      for (int i = 0; i < 2; ++i) {
        Config& c = (i + rep) % 2 == 0 ? p.ref : p.fan;  // who goes first
        ChildSpec spec = c.spec;
        if (timeline && c.spec.gpufan)
          spec.timeline = std::string(timeline) + "-g" + std::to_string(p.n) +
                          "-r" + std::to_string(rep + 1) + ".csv";
        RunResult r = SpawnChild(exe, spec);
        if (!r.ok) {
          all_ok = false;
          g_printerr("\n  %s(%u) run %d FAILED: %s\n",
                     c.spec.gpufan ? "G" : "R", p.n, rep + 1, r.error.c_str());
        }
        g_print(" %s%u %s", c.spec.gpufan ? "G" : "R", p.n,
                r.ok ? Fmt("%.1f", r.One("fps")).c_str() : "FAILED");
        c.runs.push_back(std::move(r));
      }
    }
    g_print("\n");
  }
  const double load_after = gpufan_util::LoadAverage();
  g_free(exe);
  if (!input && !keep_input) {
    g_remove(path.c_str());
    g_rmdir(dir.c_str());
  } else if (!input) {
    g_print("input kept: %s\n", path.c_str());
  }

  g_print("\n%-3s %-24s %9s %15s %6s %11s %6s %7s %9s %6s\n", "N",
          "configuration", "frames/s", "runs", "G/R", "G/R runs", "cores",
          "CPU ms", "whole", "G/R");
  g_print("%-3s %-24s %9s %15s %6s %11s %6s %7s %9s %6s\n", "", "", "(median)",
          "(min-max)", "", "(min-max)", "busy", "a frame", "process", "whole");
  std::vector<std::string> json_pairs;
  for (const Pair& p : pairs) {
    const double ref_fps = p.ref.MedianOf("fps");
    const double fan_fps = p.fan.MedianOf("fps");
    const double whole_ratio =
        Median(p.fan.WholeFps()) / Median(p.ref.WholeFps());
    std::vector<double> ratios;
    for (size_t i = 0; i < p.ref.runs.size() && i < p.fan.runs.size(); ++i)
      if (p.ref.runs[i].ok && p.fan.runs[i].ok)
        ratios.push_back(p.fan.runs[i].One("fps") / p.ref.runs[i].One("fps"));
    for (const Config *c : {&p.ref, &p.fan}) {
      const bool fan = c->spec.gpufan;
      const std::string label =
          std::string(fan ? "G " : "R ") + std::to_string(p.n) +
          (fan ? (p.n == 1 ? " chunk lane" : " chunk lanes")
               : (p.n == 1 ? " decoder chain" : " decoder chains"));
      g_print("%-3u %-24s %9s %15s %6s %11s %6s %7s %9s %6s\n", p.n,
              label.c_str(), Fmt("%.1f", c->MedianOf("fps")).c_str(),
              Range(c->Ones("fps"), "%.1f").c_str(),
              fan ? Fmt("%.3f", fan_fps / ref_fps).c_str() : "",
              fan ? Range(ratios, "%.3f").c_str() : "",
              Fmt("%.2f", Median(c->CoresBusy())).c_str(),
              Fmt("%.2f", Median(c->CpuMsPerFrame())).c_str(),
              Fmt("%.1f", Median(c->WholeFps())).c_str(),
              fan ? Fmt("%.3f", whole_ratio).c_str() : "");
    }
    json_pairs.push_back(JsonObject()
                             .Num("n", p.n)
                             .Num("ratio", fan_fps / ref_fps)
                             .Raw("ratio_runs", JsonArray(ratios))
                             .Num("ratio_runs_median", Median(ratios))
                             .Num("ratio_whole_process", whole_ratio)
                             .Raw("reference", ConfigJson(p.ref))
                             .Raw("gpufan", ConfigJson(p.fan))
                             .str());
  }
  g_print(
      "\nWhere each decoder's streaming thread spent the window (median "
      "over the runs, %% of the window; see the header):\n");
  for (const Pair& p : pairs) {
    PrintSplit(("R, " + std::to_string(p.n) + " chains").c_str(), p.ref);
    PrintSplit(("G, " + std::to_string(p.n) + " lanes").c_str(), p.fan);
  }
  double load_min = NAN, load_max = NAN;
  for (double l : loads) {
    load_min = std::isfinite(load_min) ? std::min(load_min, l) : l;
    load_max = std::isfinite(load_max) ? std::max(load_max, l) : l;
  }
  g_print(
      "load average: %.2f before, %.2f after (%.2f-%.2f at the "
      "repetitions' starts)\n",
      load_before, load_after, load_min, load_max);

  if (json) {
    JsonObject machine = gpufan_bench::MachineJson(load_before, load_after);
    machine.Raw("load_at_reps", JsonArray(loads));
    JsonObject in;
    in.Str("file", input ? path : "")
        .Num("frames", counts.frames)
        .Num("keyframes", counts.keyframes)
        .Num("bytes", counts.bytes);
    if (!input)
      in.Num("width", w)
          .Num("height", h)
          .Num("bitrate_kbps", kbps)
          .Num("gop", gop)
          .Str("source",
               "videotestsrc pattern=smpte horizontal-speed=4 ! "
               "x264enc speed-preset=veryfast bframes=0 "
               "option-string=scenecut=0");
    JsonObject root;
    root.Str("mode", mode)
        .Num("reps", n_reps)
        .Str("decoder", decoder_desc)
        .Num("chunk_frames", chunk_frames)
        .Str("fanout_props", props)
        .Bool("ok", all_ok)
        .Raw("input", in.str())
        .Raw("machine", machine.str())
        .Raw("results", JoinJson(json_pairs, "    "));
    if (!gpufan_json::WriteJsonFile(json, root.str()))
      return 1;
  }
  g_free(json);
  g_free(lanes_text);
  g_free(input);
  g_free(decoder);
  g_free(fanout_props);
  g_free(timeline);
  if (!all_ok)
    g_printerr(
        "%s: A RUN FAILED (a wrong frame count, frames out of PTS "
        "order, or an error)\n",
        prog);
  return all_ok ? 0 : 1;
}
