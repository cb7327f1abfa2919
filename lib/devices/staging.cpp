// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/staging.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace gpufan {

namespace {

// A lane that needs pinned memory outweighs any realistic number of lanes
// that do not.
constexpr int64_t kPinnedVote = 1000;

}  // namespace

StagingPlan PlanStaging(StagingMode mode, const Device& device,
                        bool pools_enabled) {
  StagingPlan plan;
  const bool gpu = device.kind == DeviceKind::kCuda;
  plan.has_pool = pools_enabled;
  plan.stage = pools_enabled && (mode == StagingMode::kAlways ||
                                 (mode == StagingMode::kAuto && gpu));
  plan.node = std::max(device.numa_node, -1);
  plan.need_pinned = gpu;
  return plan;
}

bool ShouldStageFrame(const StagingPlan& plan, bool frames_in_host_memory,
                      bool frame_in_pool) {
  return plan.has_pool && plan.stage && frames_in_host_memory && !frame_in_pool;
}

std::optional<int> ElectProposedPool(const std::vector<StagingPlan>& lanes) {
  // Only lanes that want their frames in the pool make the fan-out propose it.
  std::map<int, int64_t> votes;
  for (const StagingPlan& lane : lanes) {
    if (lane.has_pool && lane.stage)
      votes[lane.node] += lane.need_pinned ? kPinnedVote : 1;
  }
  std::optional<int> best;
  int64_t best_votes = 0;
  for (const auto& [node, count] : votes) {
    if (count > best_votes) {
      best = node;
      best_votes = count;
    }
  }
  return best;
}

}  // namespace gpufan
