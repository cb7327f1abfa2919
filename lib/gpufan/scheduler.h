// SPDX-License-Identifier: LGPL-2.1-or-later
// Scheduling policies: which lane gets the next item.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "gpufan/prelude.h"

namespace gpufan {

enum class Policy {
  kRoundRobin,   // strict turn over eligible lanes; waits for the lane in turn
  kLeastLoaded,  // fewest outstanding items (queued + being processed)
  kWeighted,     // smooth weighted round-robin over the lanes' static weights
  kAdaptive,     // earliest expected completion with learned service times
};

// A policy's nick ("round-robin", "least-loaded", "weighted", "adaptive")
// and what it does, in a user's words.
struct PolicyInfo {
  Policy policy;
  const char *nick;
  const char *description;
};

// The one table of policies, in the order of Policy's values: a binding's
// enum (the GStreamer element's "policy" property) is built from it, its
// values being static_cast<int>(policy). Static storage; thread-safe.
GPUFAN_API const std::vector<PolicyInfo>& Policies();

// The policy's nick (Policies()); ParsePolicy reads it back.
GPUFAN_API const char *PolicyName(Policy policy);
GPUFAN_API std::optional<Policy> ParsePolicy(std::string_view nick);

// What the scheduler sees of one lane at the moment of a pick.
struct LaneLoad {
  uint32_t lane = 0;         // lane id (the pad index)
  bool eligible = true;      // linked, not failed, not ended
  bool has_room = true;      // its queue can take one more item
  uint32_t outstanding = 0;  // dispatched, not yet completed
  double weight = 1.0;       // kWeighted; <= 0 excludes the lane
  int64_t service_ns = 0;    // learned service time; 0 = not known yet
  int64_t head_started_ns =
      -1;  // when the oldest outstanding item started; -1 none
  // Not started yet: since when the worker could have taken it (its dispatch,
  // or the lane's last completion if later); -1 none or unknown.
  int64_t head_ready_ns = -1;
  // How long an item given to the lane while it is idle waits for its worker
  // to wake up (learned); 0 = not known.
  int64_t wake_ns = 0;
  // kAdaptive: how long moving this item to the lane's device takes first
  // (the lane's learned copy time for an item on another GPU); 0 when it is
  // there already, or not known yet.
  int64_t transfer_ns = 0;
  // kAdaptive: the copies the items already given to the lane still need
  // before their work (not started ones in another GPU's memory).
  int64_t queued_transfer_ns = 0;
};

enum class PickStatus {
  kLane,  // dispatch to Pick::lane now
  kWait,  // lanes exist but the chosen one (or all) has no room: wait, retry
  kNone,  // no eligible lane at all
};

struct Pick {
  PickStatus status = PickStatus::kNone;
  uint32_t lane = 0;  // valid for kLane
};

// Not thread-safe: Session calls it under its lock. Deterministic for a given
// sequence of inputs (no clock, no randomness inside).
class GPUFAN_API Scheduler {
 public:
  explicit Scheduler(Policy policy = Policy::kAdaptive);

  Policy policy() const { return policy_; }
  void SetPolicy(Policy policy);

  // Chooses a lane. `lanes` is ordered by lane id. A kLane result commits the
  // choice (advances round-robin cursors); kWait and kNone change nothing.
  // kAdaptive also answers kWait when a full lane that is not stalled (see
  // StopWaitingAtNs) would finish the item earlier than the best lane with
  // room, counting the wait for its slot; unless that best lane is idle and
  // `in_flight_room` (how many more items the in-flight bound admits) holds
  // what the other lanes complete during its service time: a backlogged
  // stream then keeps slow lanes busy one item at a time instead of leaving
  // them idle, and the window can absorb the wait for their items.
  Pick Choose(const std::vector<LaneLoad>& lanes, int64_t now_ns,
              uint32_t in_flight_room = 0);

  // The service time to expect from a lane now: its learned time (or
  // `fallback_ns` while unknown), or longer while its current item has already
  // run longer than that (the lane slowed down, or stalls).
  static int64_t EffectiveServiceNs(const LaneLoad& lane, int64_t now_ns,
                                    int64_t fallback_ns);

  // Adaptive score of one lane: the expected completion time of one more item,
  // max(now, busy_until) + (outstanding - 1)^+ * t + t + queued_transfer_ns
  // + transfer_ns, where
  // busy_until is when the item in progress should end and t the
  // EffectiveServiceNs; for an idle lane now + wake_ns + t + transfer_ns (its
  // worker sleeps). So an item prefers lanes where it is already, unless
  // another lane finishes it sooner even after the copy.
  // `fallback_ns` stands in for an unknown service time. Exposed for tests and
  // for the stats.
  static int64_t ExpectedCompletionNs(const LaneLoad& lane, int64_t now_ns,
                                      int64_t fallback_ns);

  // kAdaptive waits for a full lane only until its current item has run for
  // kStallFactor service times: a median service time is exceeded by half the
  // items, so one service time would give up on healthy lanes; a lane past
  // this point may be stalled and must not hold up the others.
  static constexpr int64_t kStallFactor = 2;
  // kAdaptive gives a lane with no learned service time one item, then waits
  // this long for it to come back before it gives it more.
  static constexpr int64_t kFirstSampleWaitNs = 100'000'000;
  // kAdaptive gives a lane with two items out (one in progress, one queued)
  // more only while they amount to less than this much expected work: a
  // deeper queue adds no throughput to a lane of milliseconds, only items
  // stuck behind it when it slows down. A lane of microseconds keeps its
  // queue limit: there, the queue batches the hand-overs.
  static constexpr int64_t kQueueHorizonNs = 2'000'000;
  // How many items a lane's queue holds: queue-size, and for a lane of
  // microseconds more, up to kFastLaneQueueFactor times queue-size while they
  // amount to less than kQueueHorizonNs of expected work. A hand-over between
  // threads costs about what such a lane's item does; a deeper queue lets the
  // worker take several per wake-up (a default `queue` holds 200). A lane of
  // milliseconds (or one not yet measured) keeps queue-size, and so does the
  // memory its items hold.
  static constexpr uint32_t kFastLaneQueueFactor = 4;
  static uint32_t LaneQueueLimit(uint32_t queue_size, int64_t service_ns) {
    if (service_ns <= 0)
      return queue_size;
    const int64_t within_horizon = kQueueHorizonNs / service_ns;
    const int64_t deepest = static_cast<int64_t>(queue_size) *
                            static_cast<int64_t>(kFastLaneQueueFactor);
    return static_cast<uint32_t>(std::clamp<int64_t>(
        within_horizon, static_cast<int64_t>(queue_size), deepest));
  }
  static bool QueueHorizonReached(uint32_t outstanding, int64_t service_ns) {
    return service_ns > 0 && outstanding >= 2 &&
           static_cast<int64_t>(outstanding) * service_ns >= kQueueHorizonNs;
  }
  static int64_t StopWaitingAtNs(int64_t head_started_ns, int64_t service_ns) {
    return head_started_ns + kStallFactor * service_ns;
  }

  // Drops per-lane cursor state (call when the lane set changes).
  void ResetCursors();

 private:
  Pick ChooseRoundRobin(const std::vector<LaneLoad>& lanes);
  Pick ChooseLeastLoaded(const std::vector<LaneLoad>& lanes);
  Pick ChooseWeighted(const std::vector<LaneLoad>& lanes);
  Pick ChooseAdaptive(const std::vector<LaneLoad>& lanes, int64_t now_ns,
                      uint32_t in_flight_room);

  Policy policy_;
  uint32_t rr_next_lane_ = 0;  // lane id whose turn it is (or the next above)
  uint32_t tie_rotation_ = 0;  // spreads ties in least-loaded and adaptive
  std::vector<std::pair<uint32_t, double>> wrr_current_;  // lane id -> credit
  std::vector<uint32_t> ties_;  // scratch for the picks, reused
  std::vector<LaneLoad> view_;  // kAdaptive's view of the lanes, reused
  // kAdaptive: view_[i] has no room only until its first sample comes back
  // (its queue is not full), reused
  std::vector<bool> awaiting_sample_;
};

}  // namespace gpufan
