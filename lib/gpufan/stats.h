// SPDX-License-Identifier: LGPL-2.1-or-later
// Statistics snapshots. Plain values, copied out of Session under its lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/host-pool.h"
#include "gpufan/lane-time.h"
#include "gpufan/scheduler.h"

namespace gpufan {

// Where a lane stands in scheduling: its health as the Session sees it (the
// strings of LaneHealthName are what statistics print). Not the fan-out's own
// lane state machine, which tracks its pad and worker.
enum class LaneHealth {
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
  // Its branch failed and the fan-out took it out of the stream
  // (on-lane-error=drop-lane): no items, and nothing more is awaited from it
  // (its EOS included) until the next start.
  kFailed,
};
enum class StallKind {
  kNone,
  kBlocked,  // the lane's push into its branch has not returned
  kSilent,   // the branch took the item; nothing came back (no item, no marker)
};
GPUFAN_API const char *LaneHealthName(LaneHealth state);
GPUFAN_API const char *StallKindName(StallKind kind);

// What the fan-out knows of a lane beyond scheduling: where its worker runs
// and the host pool it stages frames into. Set on the session
// (Session::SetLaneInfo) so that every element paired through it shows the
// same lane fields. Plain value type.
struct LaneInfo {
  std::string worker_thread;  // where the lane's worker thread runs
  // The pool the lane stages frames into (staging.h); null: none.
  std::shared_ptr<const HostPool> host_pool;
};

// How a frame in GPU memory reached the GPU it was wanted on: its lane's
// (Session::CountGpuFrame) or the fan-in's output device
// (Session::CountOutputGpuFrame).
enum class GpuCopyPath {
  kInPlace,  // it was there already: no copy
  kPeer,     // device to device, with peer access
  kViaHost,  // down to pinned host memory and up again
  kSkipped,  // not copied (no pool buffer free, the copy failed)
};

// Frames in GPU memory by the way they reached their GPU: already there
// (used in place), copied peer to peer or through pinned host memory (with
// the bytes moved and the time it took), or let through uncopied (no pool
// frame free, the copy failed).
struct GpuFrameCounts {
  uint64_t in_place = 0;
  uint64_t peer = 0;
  uint64_t via_host = 0;
  uint64_t skipped = 0;
  uint64_t bytes = 0;
  int64_t ns = 0;

  void Count(GpuCopyPath path, uint64_t moved, int64_t took);
};

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
  uint64_t replayed = 0;       // items sent to it again after their lane failed
  uint64_t handed_over = 0;    // items it held when it failed, sent again
  LaneHealth state = LaneHealth::kActive;
  StallKind stall_kind = StallKind::kNone;  // for kStalled
  uint64_t stalled_seq = 0;                 // the item it stalled on
  int64_t stalled_ns = 0;    // how long ago it stalled (kStalled)
  uint64_t stalls = 0;       // times it was declared stalled
  uint64_t markers = 0;      // markers its worker pushed behind items
  uint32_t queued = 0;       // dispatched, not yet started by the lane worker
  uint32_t queue_limit = 0;  // how many its queue holds now (LaneQueueLimit)
  uint32_t in_flight = 0;    // dispatched, not yet completed
  int64_t service_ns = 0;    // learned service time (0: not known yet)
  int64_t wake_ns = 0;  // learned wake-up of its idle worker (0: not known)
  double fps = 0.0;     // completed / time since the first dispatch
  // Where its threads' time went, in ns, by LaneTime (lane-time.h).
  LaneTimeTotals time_ns{};
  // What the fan-out told (Session::SetLaneInfo, CountStaging); `described`
  // false: nothing yet, and the fields below are empty.
  bool described = false;
  std::string worker_thread;
  uint64_t copies = 0;          // frames copied into the lane's host pool
  uint64_t copies_skipped = 0;  // frames that could not be (pool full, ...)
  // Frames in GPU memory (memory:CUDAMemory) the lane got, and how they
  // reached its GPU (Session::CountGpuFrame).
  GpuFrameCounts gpu;
  bool has_host_pool = false;
  int host_pool_node = -1;  // the pool's NUMA node, -1: unknown
  bool host_pool_pins = false;
  HostPoolStats host_pool;  // read when the statistics were taken
};

// One input stream of a fan-out with several (its request sink pads;
// Session::AddStream).
struct StreamStats {
  uint32_t stream = 0;
  double weight = 1.0;
  uint32_t max_in_flight = 0;  // its own bound (0: only the session's)
  uint64_t dispatched = 0;     // frames given to a lane
  uint64_t delivered = 0;      // frames that left the window (came back)
  uint64_t lost = 0;  // given up in the window: dropped by a branch, stalled,
                      // or forgotten by a flush of the stream
  uint64_t flushed = 0;  // of `lost`: forgotten by a flush
  uint64_t leaky_dropped =
      0;                    // dropped before dispatch (leaky: waited too long)
  uint32_t in_flight = 0;   // dispatched, not yet out of the window
  int64_t wait_ns = 0;      // admission: total time its frames waited
  int64_t max_wait_ns = 0;  // admission: the longest wait
  // From admission until it left the window, over `delivered` frames: the
  // mean and the longest (0 before the first).
  int64_t latency_ns = 0;
  int64_t max_latency_ns = 0;
  int64_t latency_total_ns = 0;  // the sum the mean comes from
  double fps = 0.0;         // dispatched / time since its first dispatch
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
  GpuFrameCounts output_gpu;     // frames moved to the fan-in's output-device
  std::vector<LaneStats> lanes;  // ordered by lane id
  // The input streams (several sink pads), ordered by stream id; empty for
  // one stream.
  std::vector<StreamStats> streams;
};

}  // namespace gpufan
