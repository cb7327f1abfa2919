// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/scheduler.h"

#include <algorithm>
#include <limits>

namespace gpufan {

namespace {

// Index in `candidates` (lane ids, ascending) of the first id >= cursor,
// wrapping to the first one: how ties and turns rotate.
size_t RotatedIndex(const std::vector<uint32_t>& candidates, uint32_t cursor) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i] >= cursor)
      return i;
  }
  return 0;
}

// A cursor one past `lane`; wraps to 0 rather than overflowing.
uint32_t After(uint32_t lane) {
  return lane == std::numeric_limits<uint32_t>::max() ? 0 : lane + 1;
}

}  // namespace

const std::vector<PolicyInfo>& Policies() {
  static const std::vector<PolicyInfo> policies = {
      {Policy::kRoundRobin, "round-robin",
       "Strict turn over the lanes (waits for the lane in turn)"},
      {Policy::kLeastLoaded, "least-loaded",
       "Lane with the fewest buffers in flight"},
      {Policy::kWeighted, "weighted",
       "Smooth weighted round-robin over the src pads' weight property"},
      {Policy::kAdaptive, "adaptive",
       "Earliest expected completion, learning each lane's speed"},
  };
  return policies;
}

const char *PolicyName(Policy policy) {
  for (const PolicyInfo& p : Policies()) {
    if (p.policy == policy)
      return p.nick;
  }
  return "unknown";
}

std::optional<Policy> ParsePolicy(std::string_view nick) {
  for (const PolicyInfo& p : Policies()) {
    if (nick == p.nick)
      return p.policy;
  }
  return std::nullopt;
}

Scheduler::Scheduler(Policy policy) : policy_(policy) {}

void Scheduler::SetPolicy(Policy policy) {
  policy_ = policy;
  wrr_current_.clear();
}

void Scheduler::ResetCursors() {
  // The turn and tie cursors are lane ids and stay meaningful when lanes come
  // and go; only the weighted credits belong to a particular lane set.
  wrr_current_.clear();
}

Pick Scheduler::Choose(const std::vector<LaneLoad>& lanes, int64_t now_ns,
                       uint32_t in_flight_room) {
  switch (policy_) {
    case Policy::kRoundRobin:
      return ChooseRoundRobin(lanes);
    case Policy::kLeastLoaded:
      return ChooseLeastLoaded(lanes);
    case Policy::kWeighted:
      return ChooseWeighted(lanes);
    case Policy::kAdaptive:
      return ChooseAdaptive(lanes, now_ns, in_flight_room);
  }
  return {};
}

int64_t Scheduler::EffectiveServiceNs(const LaneLoad& lane, int64_t now_ns,
                                      int64_t fallback_ns) {
  const int64_t t = lane.service_ns > 0 ? lane.service_ns : fallback_ns;
  if (lane.outstanding == 0 || lane.head_started_ns < 0)
    return t;
  // The item in progress has taken longer than the estimate: the items behind
  // it will likely take as long. Reacts within one item where the learned
  // median needs several samples.
  return std::max(t, now_ns - lane.head_started_ns);
}

int64_t Scheduler::ExpectedCompletionNs(const LaneLoad& lane, int64_t now_ns,
                                        int64_t fallback_ns) {
  const int64_t t = EffectiveServiceNs(lane, now_ns, fallback_ns);
  // An idle lane's worker sleeps: the item starts once it woke up.
  if (lane.outstanding == 0)
    return now_ns + lane.wake_ns + t + lane.transfer_ns;
  // A head that has not started is still queued: it needs a full t from now;
  // one that runs past t is assumed to end now.
  const int64_t busy_until = lane.head_started_ns >= 0
                                 ? std::max(now_ns, lane.head_started_ns + t)
                                 : now_ns + t;
  return busy_until + static_cast<int64_t>(lane.outstanding - 1) * t + t +
         lane.queued_transfer_ns + lane.transfer_ns;
}

Pick Scheduler::ChooseRoundRobin(const std::vector<LaneLoad>& lanes) {
  const LaneLoad *in_turn = nullptr;
  for (const LaneLoad& l : lanes) {
    if (!l.eligible)
      continue;
    if (!in_turn)
      in_turn = &l;  // the wrap-around choice
    if (l.lane >= rr_next_lane_) {
      in_turn = &l;
      break;
    }
  }
  if (!in_turn)
    return {PickStatus::kNone, 0};
  // Strict turn: a full lane makes everyone wait, so the pattern never skews.
  if (!in_turn->has_room)
    return {PickStatus::kWait, 0};
  rr_next_lane_ = After(in_turn->lane);
  return {PickStatus::kLane, in_turn->lane};
}

Pick Scheduler::ChooseLeastLoaded(const std::vector<LaneLoad>& lanes) {
  bool any_eligible = false;
  uint32_t best = std::numeric_limits<uint32_t>::max();
  ties_.clear();
  for (const LaneLoad& l : lanes) {
    if (!l.eligible)
      continue;
    any_eligible = true;
    if (!l.has_room)
      continue;
    if (l.outstanding < best) {
      best = l.outstanding;
      ties_.clear();
    }
    if (l.outstanding == best)
      ties_.push_back(l.lane);
  }
  if (!any_eligible)
    return {PickStatus::kNone, 0};
  if (ties_.empty())
    return {PickStatus::kWait, 0};
  const uint32_t lane = ties_[RotatedIndex(ties_, tie_rotation_)];
  tie_rotation_ = After(lane);
  return {PickStatus::kLane, lane};
}

Pick Scheduler::ChooseWeighted(const std::vector<LaneLoad>& lanes) {
  // Smooth weighted round-robin (nginx): every lane earns its weight, the
  // richest is picked and pays the total. Computed on a copy so that kWait
  // leaves the credits untouched and the same lane is retried.
  std::vector<std::pair<uint32_t, double>> next;
  std::vector<bool> room;
  double total = 0.0;
  for (const LaneLoad& l : lanes) {
    if (!l.eligible || !(l.weight > 0.0))
      continue;
    double credit = 0.0;
    for (const auto& c : wrr_current_) {
      if (c.first == l.lane) {
        credit = c.second;
        break;
      }
    }
    next.emplace_back(l.lane, credit + l.weight);
    room.push_back(l.has_room);
    total += l.weight;
  }
  if (next.empty())
    return {PickStatus::kNone, 0};
  size_t best = 0;
  for (size_t i = 1; i < next.size(); ++i) {
    if (next[i].second > next[best].second)
      best = i;
  }
  if (!room[best])
    return {PickStatus::kWait, 0};
  next[best].second -= total;
  // Lanes that left (or became ineligible) lose their credit here.
  wrr_current_ = std::move(next);
  return {PickStatus::kLane, wrr_current_[best].first};
}

Pick Scheduler::ChooseAdaptive(const std::vector<LaneLoad>& loads,
                               int64_t now_ns, uint32_t in_flight_room) {
  // A lane with no sample yet takes one item and waits for it to come back
  // before it takes more: a slow lane must not fill its queue before its speed
  // is known (the items behind would wait for all of it). After
  // kFirstSampleWaitNs it takes items anyway: a branch may need several items
  // before it returns one (an encoder's look-ahead). A single lane has
  // nothing to choose from: it always takes its queue's worth.
  view_.assign(loads.begin(), loads.end());
  awaiting_sample_.assign(view_.size(), false);
  const auto eligible = std::count_if(
      view_.begin(), view_.end(), [](const LaneLoad& l) { return l.eligible; });
  for (size_t i = 0; i < view_.size(); ++i) {
    LaneLoad& l = view_[i];
    if (eligible > 1 && l.has_room && l.service_ns <= 0 && l.outstanding > 0 &&
        !(l.head_started_ns >= 0 &&
          now_ns - l.head_started_ns >= kFirstSampleWaitNs)) {
      l.has_room = false;
      awaiting_sample_[i] = true;
    }
    // A lane with an item in progress and one behind it never runs dry; a
    // deeper queue only holds items back if the lane slows down. Lanes of
    // microseconds keep their queue (it batches the hand-overs).
    if (QueueHorizonReached(l.outstanding, l.service_ns))
      l.has_room = false;
  }
  // An idle lane's wake-up counts against an awake lane only. When every
  // lane is idle, each would have to be woken: they rotate as before, and a
  // lane whose learned wake-up is a little longer (or stale) is not left out
  // for good.
  const bool any_awake = std::any_of(
      view_.begin(), view_.end(),
      [](const LaneLoad& l) { return l.eligible && l.outstanding > 0; });
  if (!any_awake) {
    for (LaneLoad& l : view_)
      l.wake_ns = 0;
  }
  const std::vector<LaneLoad>& lanes = view_;
  // Unknown lanes are scored with the fastest known time: optimistic, so a new
  // lane gets items and thereby a measurement.
  int64_t fallback = 0;
  for (const LaneLoad& l : lanes) {
    if (l.eligible && l.service_ns > 0 &&
        (fallback == 0 || l.service_ns < fallback))
      fallback = l.service_ns;
  }
  if (fallback == 0)
    return ChooseLeastLoaded(lanes);

  bool any_eligible = false;
  int64_t best = std::numeric_limits<int64_t>::max();
  // The earliest a full lane could finish the item if we waited for it to free
  // a slot: waiting holds up the items behind this one for at most the rest of
  // that lane's current item, at most one service time.
  int64_t best_if_waiting = std::numeric_limits<int64_t>::max();
  ties_.clear();
  for (size_t i = 0; i < lanes.size(); ++i) {
    const LaneLoad& l = lanes[i];
    if (!l.eligible)
      continue;
    any_eligible = true;
    const int64_t score = ExpectedCompletionNs(l, now_ns, fallback);
    if (awaiting_sample_[i]) {
      // Not full: it waits only for its first sample, and the item would go
      // right behind what it holds. So it finishes the item at `score`, no
      // slot to wait for (a lane of long items, a chunk lane, that started
      // a moment after another is not passed over for its first sample).
      if (now_ns < StopWaitingAtNs(l.head_started_ns >= 0 ? l.head_started_ns
                                                          : l.head_ready_ns,
                                   fallback))
        best_if_waiting = std::min(best_if_waiting, score);
      continue;
    }
    if (!l.has_room) {
      // Only a lane that is not stalled: it must never hold up the others.
      // Its head has started, or is about to (the worker takes it as soon as
      // the lane is free).
      const int64_t since =
          l.head_started_ns >= 0 ? l.head_started_ns : l.head_ready_ns;
      if (since >= 0 &&
          now_ns < StopWaitingAtNs(since,
                                   l.service_ns > 0 ? l.service_ns : fallback))
        best_if_waiting = std::min(
            best_if_waiting, score + EffectiveServiceNs(l, now_ns, fallback));
      continue;
    }
    if (score < best) {
      best = score;
      ties_.clear();
    }
    if (score == best)
      ties_.push_back(l.lane);
  }
  if (!any_eligible)
    return {PickStatus::kNone, 0};
  if (ties_.empty())
    return {PickStatus::kWait, 0};
  const uint32_t lane = ties_[RotatedIndex(ties_, tie_rotation_)];
  if (best > best_if_waiting) {
    // Waiting for a full lane finishes this item earlier. Without that wait,
    // an always-ready upstream fills every queue, the slowest lane's included,
    // and items wait in the reorder window for its deep queue. But an idle
    // lane left idle while upstream is ahead is capacity lost for good: it
    // takes one item if the window can hold what the others complete
    // meanwhile.
    const auto it =
        std::find_if(lanes.begin(), lanes.end(),
                     [lane](const LaneLoad& l) { return l.lane == lane; });
    if (it->outstanding > 0)
      return {PickStatus::kWait, 0};
    const double t =
        static_cast<double>(EffectiveServiceNs(*it, now_ns, fallback));
    double others = 0.0;
    for (const LaneLoad& l : lanes) {
      if (l.eligible && l.lane != lane)
        others +=
            t / static_cast<double>(EffectiveServiceNs(l, now_ns, fallback));
    }
    if (others + 1.0 > in_flight_room)
      return {PickStatus::kWait, 0};
  }
  tie_rotation_ = After(lane);
  return {PickStatus::kLane, lane};
}

}  // namespace gpufan
