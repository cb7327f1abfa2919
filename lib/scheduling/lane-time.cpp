// SPDX-License-Identifier: LGPL-2.1-or-later
// Lane time totals and the trace-event writer (gpufan/lane-time.h).
#include "gpufan/lane-time.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <mutex>

namespace gpufan {

const char *LaneTimeName(LaneTime what) {
  switch (what) {
    case LaneTime::kPush:
      return "push";
    case LaneTime::kIdle:
      return "idle";
    case LaneTime::kSettle:
      return "settle";
    case LaneTime::kQuery:
      return "query";
    case LaneTime::kOutput:
      return "output";
  }
  return "?";
}

TraceWriter::~TraceWriter() {
  Close();
}

bool TraceWriter::Open(const std::string& path, int64_t origin_ns,
                       uint32_t process, std::string *error,
                       uint64_t max_events) {
  Close();
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file) {
    if (error)
      *error = "cannot write the trace " + path + ": " + std::strerror(errno);
    return false;
  }
  std::lock_guard<Mutex> lock(mutex_);
  file_ = file;
  path_ = path;
  origin_ns_ = origin_ns;
  process_ = process;
  events_ = 0;
  max_events_ = max_events;
  named_lanes_ = 0;
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", file_);
  std::fprintf(file_,
               "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRIu32
               ",\"args\":{\"name\":\"gpufan session %" PRIu32 "\"}}",
               process_, process_);
  NameTrackUnlocked(OutputTrack(), "output (release in order)");
  enabled_.store(true, std::memory_order_relaxed);
  return true;
}

void TraceWriter::Close() {
  std::lock_guard<Mutex> lock(mutex_);
  enabled_.store(false, std::memory_order_relaxed);
  if (!file_)
    return;
  std::fputs("\n]}\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

std::string TraceWriter::path() const {
  std::lock_guard<Mutex> lock(mutex_);
  return path_;
}

void TraceWriter::NameTrackUnlocked(uint32_t track, const std::string& name) {
  std::fprintf(file_,
               ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRIu32
               ",\"tid\":%" PRIu32 ",\"args\":{\"name\":\"%s\"}}",
               process_, track, name.c_str());
  // sorted by track id, so that a lane's two tracks stand together
  std::fprintf(
      file_,
      ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%" PRIu32
      ",\"tid\":%" PRIu32 ",\"args\":{\"sort_index\":%" PRIu32 "}}",
      process_, track, track);
}

void TraceWriter::NameLane(uint32_t lane) {
  std::lock_guard<Mutex> lock(mutex_);
  if (!file_)
    return;
  if (lane < 64) {
    if (named_lanes_ & (uint64_t{1} << lane))
      return;
    named_lanes_ |= uint64_t{1} << lane;
  }
  NameTrackUnlocked(LaneTrack(lane), "lane " + std::to_string(lane));
  NameTrackUnlocked(LaneOutTrack(lane),
                    "lane " + std::to_string(lane) + " out of branch");
}

bool TraceWriter::BeginEventUnlocked() {
  if (!file_)
    return false;
  if (events_ == max_events_) {
    std::fprintf(file_,
                 ",\n{\"ph\":\"i\",\"s\":\"g\",\"name\":\"trace full: %" PRIu64
                 " events, the rest not written\",\"pid\":%" PRIu32
                 ",\"tid\":0,\"ts\":0}",
                 max_events_, process_);
    events_++;
    enabled_.store(false, std::memory_order_relaxed);
    return false;
  }
  if (events_ > max_events_)
    return false;
  events_++;
  return true;
}

// Microseconds with ns precision, as the format wants.
static void PrintUs(FILE *file, int64_t ns) {
  if (ns < 0) {
    std::fputc('-', file);
    ns = -ns;
  }
  std::fprintf(file, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

static void PrintArgs(FILE *file, uint64_t seq) {
  if (seq != TraceWriter::kNoSeq)
    std::fprintf(file, ",\"args\":{\"seq\":%" PRIu64 "}", seq);
  std::fputc('}', file);
}

bool TraceWriter::BeginLineUnlocked(const char *phase, const char *name,
                                    uint32_t track, int64_t ns) {
  if (!BeginEventUnlocked())
    return false;
  std::fprintf(file_,
               ",\n{%s,\"name\":\"%s\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32
               ",\"ts\":",
               phase, name, process_, track);
  PrintUs(file_, ns - origin_ns_);
  return true;
}

void TraceWriter::Span(uint32_t track, const char *name, int64_t start_ns,
                       int64_t end_ns, uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  if (!BeginLineUnlocked("\"ph\":\"X\"", name, track, start_ns))
    return;
  std::fputs(",\"dur\":", file_);
  PrintUs(file_, end_ns > start_ns ? end_ns - start_ns : 0);
  PrintArgs(file_, seq);
}

void TraceWriter::Instant(uint32_t track, const char *name, int64_t ns,
                          uint64_t seq) {
  std::lock_guard<Mutex> lock(mutex_);
  if (BeginLineUnlocked("\"ph\":\"i\",\"s\":\"t\"", name, track, ns))
    PrintArgs(file_, seq);
}

void LaneTimer::Add(LaneTime what, int64_t start_ns, int64_t end_ns,
                    uint64_t seq) {
  if (end_ns > start_ns)
    ns_[static_cast<int>(what)].fetch_add(end_ns - start_ns,
                                          std::memory_order_relaxed);
  if (!tracing())
    return;
  const bool out_of_branch =
      what == LaneTime::kQuery || what == LaneTime::kOutput;
  trace_->Span(out_of_branch ? TraceWriter::LaneOutTrack(lane_)
                             : TraceWriter::LaneTrack(lane_),
               LaneTimeName(what), start_ns, end_ns, seq);
}

void LaneTimer::Trace(const char *name, int64_t start_ns, int64_t end_ns,
                      uint64_t seq) {
  if (tracing())
    trace_->Span(TraceWriter::LaneTrack(lane_), name, start_ns, end_ns, seq);
}

LaneTimeTotals LaneTimer::Totals() const {
  LaneTimeTotals totals{};
  for (int i = 0; i < kLaneTimeCount; i++)
    totals[i] = ns_[i].load(std::memory_order_relaxed);
  return totals;
}

}  // namespace gpufan
