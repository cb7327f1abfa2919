// SPDX-License-Identifier: LGPL-2.1-or-later
// The values a Session (gpufan/session.h) and its ports (gpufan/fanout-port.h,
// gpufan/fanin-port.h) take and return: its configuration, what a dispatch,
// a push and an arrival come to, the batches the fan-in takes, the liveness
// markers of a stalled lane and the end-of-stream decision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpufan/reorder-window.h"
#include "gpufan/scheduler.h"
#include "gpufan/stats.h"

namespace gpufan {

struct SessionConfig {
  Policy policy = Policy::kAdaptive;
  uint32_t lane_queue_size =
      4;  // items queued per lane before it counts as full
  // (a lane of microseconds queues more: Scheduler::LaneQueueLimit)
  // 0: automatic, the sum over lanes of (the deepest queue limit the lane has
  // had + 2), which is lanes * (lane_queue_size + 2) for lanes of
  // milliseconds; with kAdaptive, plus, for
  // lanes of different speeds, the items the faster lanes complete while the
  // slowest works on one (at most as much again; it grows as the speeds are
  // learned and shrinks only when a lane is removed). When the limit is reached
  // while the window waits for a head whose lane is idle (its branch may have
  // dropped it), that lane still gets items, up to lane_queue_size + 1
  // outstanding and as many in flight beyond the limit: only a later item on
  // a FIFO lane proves the drop.
  uint32_t max_in_flight = 0;
  int64_t stall_timeout_ns =
      2'000'000'000;  // fan-in's bounded wait for a head item
  // on-stall=replay: a lane whose head waited stall-timeout fails (its items
  // are sent again, see FailLaneForReplay) instead of losing that item.
  bool stall_fails_lane = false;
  // on-lane-error=replay: a chunk its branch ended without its drain
  // (EndChunkByBranch) stays the lane's, to be sent again when the lane
  // fails, instead of being given up.
  bool errors_replay = false;
  // Chunk mode: an item is a chunk of the frames NoteChunkFrame counts
  // (SetLaneFailed counts those lost). The fan-out moves a stalled lane's
  // items that have not started to other lanes (MoveUnstarted): such an
  // item is not given up as soon as it heads the window (a stalled lane's
  // items otherwise are: they wait behind the one given up), but waits
  // stall-timeout like any head.
  bool chunks = false;
};

// An item a failed lane held, to be sent again (FailLaneForReplay).
struct ReplayItem {
  uint64_t seq = 0;
  int64_t pts_ns = kNoTime;
  uint32_t stream = kMainStream;  // the input stream it belongs to
  // Chunk mode: the frames that went to the lane, and the chunk's outputs
  // that already left the fan-in (on this lane and those it failed on
  // before): its next lane's first that many outputs are not sent again.
  uint32_t frames = 0;
  uint32_t sent = 0;
};

enum class DispatchStatus {
  kOk,
  kFlushing,  // SetFlushing(true) while waiting
  kNoLanes,   // no eligible lane
  kGone,      // Redispatch: the item is no longer awaited (it arrived or was
              // given up meanwhile)
  kTimedOut,  // DispatchItem's max_wait_ns passed first (the item is not
              // recorded)
};

struct Dispatch {
  DispatchStatus status = DispatchStatus::kNoLanes;
  uint32_t lane = kNoLane;
  uint64_t seq = 0;
  bool awaited = false;  // a fan-in waits for this item (the lane is claimed)
  // Some eligible lane is joining (a fan-in claimed other lanes, not this
  // one yet): the fan-out should probe its branch again.
  bool lanes_joining = false;
  // The lane was stalled when it was picked: no other lane could take the
  // item (a stalled lane is the policies' last resort).
  bool last_resort = false;
  // Its place among the items dispatched to `lane` since the lane was added
  // or the session Reset (0, 1, 2...): several threads that dispatch (one
  // per input stream) must hand their items to the lane in this order, or
  // the lane would not be FIFO by seq.
  uint64_t lane_order = 0;
};

enum class PushOutcome {
  kDelivered,  // the branch took it
  kDropped,    // flushing / not linked: not delivered, not an error
  kFailed,     // the branch returned an error
};

enum class ArrivalStatus {
  kAccepted,   // stored in the window (or matched an unawaited item)
  kLate,       // its slot had been given up: drop it
  kUnmatched,  // no outstanding item matches: it is attached to the next
               // release
};

struct Arrival {
  ArrivalStatus status = ArrivalStatus::kAccepted;
  uint64_t seq = 0;
};

struct ReadyBatch {
  std::vector<Released> items;  // in output order
  uint64_t generation = 0;      // pass to WaitOutput
  // AddedLatencyNs() grew past what was last reported (MarkLatencyReported):
  // the fan-in should tell the pipeline (once until the next report).
  bool latency_grew = false;
};

// The idle worker of a stalled lane, each time it wakes: a marker it sends
// shows the branch alive again once it comes back (FanOutPort::
// CheckLivenessMarker).
enum class LivenessMarker {
  kWait,      // not due yet (or the lane is not claimed): wait until *due_ns
  kSend,      // due: push a marker now; the next is due stall-timeout later
  kAnswered,  // the lane answered since it stalled: it is no longer stalled
};

// One input of the fan-in (a sink pad) as the end-of-stream decision sees it
// (FanInPort::DecideEndOfStream).
struct EosInput {
  bool ended = false;   // its EOS came
  bool paired = false;  // it is paired with `lane`
  uint32_t lane = kNoLane;
};

// Why an input's EOS is missing when the stream ends without it.
enum class MissingEos {
  kStalled,      // its lane stalled: it was waited for already
  kNotInTime,    // no EOS within stall-timeout after the input ended
  kNeverPaired,  // it never paired with a lane
};

struct MissingInput {
  size_t input = 0;  // its index in DecideEndOfStream's `inputs`
  MissingEos why = MissingEos::kNotInTime;
  // kStalled: how, on which item, and how long ago (as LaneStats has them)
  StallKind stall_kind = StallKind::kNone;
  uint64_t stalled_seq = 0;
  int64_t stalled_ns = 0;
};

struct EndOfStream {
  bool ends = false;
  // !ends: when to decide again unless something wakes the caller first
  // (kNoTime: only an event can change the answer).
  int64_t recheck_ns = kNoTime;
  // ends: the inputs whose EOS never came, in input order (a failed lane's
  // input sends nothing more and is not named).
  std::vector<MissingInput> missing;
};

}  // namespace gpufan
