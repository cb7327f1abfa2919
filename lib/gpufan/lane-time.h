// SPDX-License-Identifier: LGPL-2.1-or-later
// Where a lane's time goes, and a trace of it.
//
// A lane's wall time splits into what its threads were doing:
//   kPush    the fan-out's worker inside a push into the branch (the branch
//            working on that thread, or blocked further down)
//   kIdle    the worker waiting for input (its queue empty)
//   kSettle  chunk mode: the worker waiting, after a chunk's drain, for the
//            fan-in to have all of the chunk
//   kQuery   the branch's thread blocked in the fan-in on a serialized query
//            (ALLOCATION, DRAIN) until what the lane delivered before it left
//   kOutput  the branch's thread pushing released output downstream (the
//            fan-in's output runs on whichever lane thread made it
//            releasable)
// A branch without a queue runs on the worker's thread: its kQuery and
// kOutput then lie inside kPush.
//
// TraceWriter writes the same spans, and each item's dispatch, start,
// arrival and release, as trace-event JSON (the format chrome://tracing and
// Perfetto open): one process per session, two tracks per lane (its worker,
// and what comes out of its branch) and one for the output.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "gpufan/mutex.h"
#include "gpufan/prelude.h"

namespace gpufan {

enum class LaneTime : int { kPush, kIdle, kSettle, kQuery, kOutput };
constexpr int kLaneTimeCount = 5;
GPUFAN_API const char *LaneTimeName(LaneTime what);

// The per-lane totals, in ns, in LaneTime order.
using LaneTimeTotals = std::array<int64_t, kLaneTimeCount>;

// Thread-safe. Writes as it goes (stdio's buffer), never holding more than
// one event; stops after `max_events` (the file says so) so that a long
// stream cannot fill the disk.
class GPUFAN_API TraceWriter {
 public:
  static constexpr uint64_t kDefaultMaxEvents = 2'000'000;
  TraceWriter() = default;
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Starts a new file at `path` (closing any open one); times are written
  // relative to `origin_ns`. False with *error set when it cannot be made.
  bool Open(const std::string& path, int64_t origin_ns, uint32_t process,
            std::string *error, uint64_t max_events = kDefaultMaxEvents);
  // Ends the JSON and closes the file; nothing is written after.
  void Close();
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  std::string path() const;

  // Track ids: the output, then two per lane.
  static uint32_t OutputTrack() { return 0; }
  static uint32_t LaneTrack(uint32_t lane) { return 2 * lane + 1; }
  static uint32_t LaneOutTrack(uint32_t lane) { return 2 * lane + 2; }
  void NameLane(uint32_t lane);

  // A span [start_ns, end_ns] and an instant at `ns`; `seq` is the item's
  // (kNoSeq: none).
  static constexpr uint64_t kNoSeq = UINT64_MAX;
  void Span(uint32_t track, const char *name, int64_t start_ns, int64_t end_ns,
            uint64_t seq = kNoSeq);
  void Instant(uint32_t track, const char *name, int64_t ns,
               uint64_t seq = kNoSeq);

 private:
  void NameTrackUnlocked(uint32_t track, const std::string& name);
  bool BeginEventUnlocked();
  // An event's line up to its "ts" value; false when nothing is written.
  bool BeginLineUnlocked(const char *phase, const char *name, uint32_t track,
                         int64_t ns);

  mutable Mutex mutex_;
  std::atomic<bool> enabled_{false};
  FILE *file_ = nullptr;
  std::string path_;
  int64_t origin_ns_ = 0;
  uint32_t process_ = 0;
  uint64_t events_ = 0;
  uint64_t max_events_ = kDefaultMaxEvents;
  uint64_t named_lanes_ = 0;  // bit per lane < 64 already named
};

// One lane's time totals (lock-free) and the session's trace. Shared by
// the Session and the threads that time the lane (Session::LaneTimer):
// adding a span costs an atomic add, and a locked write while tracing.
class GPUFAN_API LaneTimer {
 public:
  LaneTimer(uint32_t lane, std::shared_ptr<TraceWriter> trace)
      : lane_(lane), trace_(std::move(trace)) {}
  uint32_t lane() const { return lane_; }
  // `what` lasted from `start_ns` to `end_ns` (the session clock's).
  void Add(LaneTime what, int64_t start_ns, int64_t end_ns,
           uint64_t seq = TraceWriter::kNoSeq);
  // A span that is not one of the totals' (a chunk from its start to its
  // reset), on the lane's worker track.
  void Trace(const char *name, int64_t start_ns, int64_t end_ns, uint64_t seq);
  bool tracing() const { return trace_ && trace_->enabled(); }
  LaneTimeTotals Totals() const;

 private:
  const uint32_t lane_;
  const std::shared_ptr<TraceWriter> trace_;
  std::array<std::atomic<int64_t>, kLaneTimeCount> ns_{};
};

}  // namespace gpufan
