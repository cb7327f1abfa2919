// SPDX-License-Identifier: LGPL-2.1-or-later
// Statistics snapshots. Plain values, copied out of Session under its lock.
#pragma once

#include <cstdint>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/scheduler.h"

namespace gpufan {

// Where a lane stands in scheduling.
enum class LaneState {
  kActive,    // gets items
  kInactive,  // not linked, failed, flushing or released: gets no items
  // A fan-in waits for other lanes of the session but has not claimed this
  // one (its branch does not reach it yet): no items while another lane can
  // take them, so that a new lane's first item cannot leave out of turn.
  kJoining,
  // One of its items was the window's head for stall-timeout without coming
  // back: its items were given up together, and it gets no items while
  // another lane can take them, until anything comes back from it.
  kStalled,
};
enum class StallKind {
  kNone,
  kBlocked,  // the lane's push into its branch has not returned
  kSilent,   // the branch took the item; nothing came back (no item, no marker)
};
GPUFAN_API const char *LaneStateName(LaneState state);
GPUFAN_API const char *StallKindName(StallKind kind);

struct LaneStats {
  uint32_t lane = 0;
  Device device;
  double weight = 1.0;
  bool eligible = true;     // linked, not failed, not ended
  bool claimed = false;     // a fan-in waits for this lane's items
  uint64_t dispatched = 0;  // items given to the lane
  uint64_t completed = 0;   // came back (fan-in) or pushed (no fan-in)
  uint64_t dropped =
      0;                // the branch dropped them (proved by FIFO order or EOS)
  uint64_t failed = 0;  // the lane returned an error for them
  uint64_t timed_out = 0;      // the fan-in stopped waiting for them (stall)
  uint64_t late = 0;           // came back after their slot was given up
  uint64_t reorder_waits = 0;  // came back before an earlier item and waited
  LaneState state = LaneState::kActive;
  StallKind stall_kind = StallKind::kNone;  // for kStalled
  uint64_t stalled_seq = 0;                 // the item it stalled on
  int64_t stalled_ns = 0;  // how long ago it stalled (kStalled)
  uint64_t stalls = 0;     // times it was declared stalled
  uint64_t markers = 0;    // markers its worker pushed behind items
  uint32_t queued = 0;     // dispatched, not yet started by the lane worker
  uint32_t in_flight = 0;  // dispatched, not yet completed
  int64_t service_ns = 0;  // learned service time (0: not known yet)
  double fps = 0.0;        // completed / time since the first dispatch
};

struct SessionStats {
  Policy policy = Policy::kAdaptive;
  uint64_t dispatched = 0;
  uint64_t released = 0;   // left the reorder window (items, not events)
  uint64_t unmatched = 0;  // came back with no way to tell which item they were
  uint32_t in_flight = 0;
  uint32_t max_in_flight = 0;
  uint32_t window_occupancy = 0;
  uint32_t window_peak = 0;
  bool input_ended = false;      // the fan-out got EOS
  int64_t added_latency_ns = 0;  // Session::AddedLatencyNs
  int64_t elapsed_ns = 0;        // since the first dispatch
  std::vector<LaneStats> lanes;  // ordered by lane id
};

}  // namespace gpufan
