// SPDX-License-Identifier: LGPL-2.1-or-later
// Staging decisions: which lane copies frames into its host pool, and which
// node's pool the fan-out proposes upstream.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/staging.h"

namespace gpufan {
namespace {

Device Gpu(int ordinal, int node) {
  Device d;
  d.kind = DeviceKind::kCuda;
  d.index = ordinal;
  d.numa_node = node;
  return d;
}

Device Cpu(int index, int node) {
  Device d = Device::Cpu(index);
  d.numa_node = node;
  return d;
}

TEST(Staging, AutoStagesGpuLanesOnly) {
  const StagingPlan gpu = PlanStaging(StagingMode::kAuto, Gpu(0, 1), true);
  EXPECT_TRUE(gpu.has_pool);
  EXPECT_TRUE(gpu.stage);
  EXPECT_EQ(gpu.node, 1);
  EXPECT_TRUE(gpu.need_pinned);
  const StagingPlan cpu = PlanStaging(StagingMode::kAuto, Cpu(0, 0), true);
  EXPECT_TRUE(cpu.has_pool);
  EXPECT_FALSE(cpu.stage);
  EXPECT_FALSE(cpu.need_pinned);
}

TEST(Staging, AlwaysStagesEveryLaneNeverNone) {
  EXPECT_TRUE(PlanStaging(StagingMode::kAlways, Cpu(0, 0), true).stage);
  EXPECT_TRUE(PlanStaging(StagingMode::kAlways, Gpu(0, 0), true).stage);
  EXPECT_FALSE(PlanStaging(StagingMode::kNever, Gpu(0, 0), true).stage);
  EXPECT_FALSE(PlanStaging(StagingMode::kNever, Cpu(0, 0), true).stage);
}

TEST(Staging, NoPoolsNoStaging) {
  for (StagingMode mode :
       {StagingMode::kAuto, StagingMode::kAlways, StagingMode::kNever}) {
    const StagingPlan plan = PlanStaging(mode, Gpu(0, 0), false);
    EXPECT_FALSE(plan.has_pool);
    EXPECT_FALSE(plan.stage);
  }
}

TEST(Staging, UnknownNodeIsMinusOne) {
  EXPECT_EQ(PlanStaging(StagingMode::kAuto, Gpu(0, -7), true).node, -1);
  EXPECT_EQ(PlanStaging(StagingMode::kAuto, Gpu(0, -1), true).node, -1);
}

TEST(Staging, CopiesOnlyHostFramesNotInThePool) {
  const StagingPlan plan = PlanStaging(StagingMode::kAuto, Gpu(0, 0), true);
  EXPECT_TRUE(ShouldStageFrame(plan, true, false));
  EXPECT_FALSE(ShouldStageFrame(plan, true, true));    // upstream used the pool
  EXPECT_FALSE(ShouldStageFrame(plan, false, false));  // device memory
  const StagingPlan off = PlanStaging(StagingMode::kNever, Gpu(0, 0), true);
  EXPECT_FALSE(ShouldStageFrame(off, true, false));
}

TEST(Staging, ElectsNoPoolWhenNoLaneStages) {
  EXPECT_FALSE(ElectProposedPool({}).has_value());
  EXPECT_FALSE(
      ElectProposedPool({PlanStaging(StagingMode::kAuto, Cpu(0, 0), true),
                         PlanStaging(StagingMode::kAuto, Gpu(0, 1), false)})
          .has_value());
}

TEST(Staging, ElectsTheNodeOfMostStagingLanes) {
  const std::vector<StagingPlan> lanes = {
      PlanStaging(StagingMode::kAlways, Cpu(0, 0), true),
      PlanStaging(StagingMode::kAlways, Cpu(1, 1), true),
      PlanStaging(StagingMode::kAlways, Cpu(2, 1), true),
  };
  EXPECT_EQ(ElectProposedPool(lanes), std::optional<int>(1));
}

TEST(Staging, OneGpuLaneOutweighsCpuLanes) {
  std::vector<StagingPlan> lanes;
  for (int i = 0; i < 10; ++i)
    lanes.push_back(PlanStaging(StagingMode::kAlways, Cpu(i, 0), true));
  lanes.push_back(PlanStaging(StagingMode::kAlways, Gpu(0, 1), true));
  EXPECT_EQ(ElectProposedPool(lanes), std::optional<int>(1));
  // Between GPU lanes, the count decides again.
  lanes.push_back(PlanStaging(StagingMode::kAlways, Gpu(1, 0), true));
  lanes.push_back(PlanStaging(StagingMode::kAlways, Gpu(2, 0), true));
  EXPECT_EQ(ElectProposedPool(lanes), std::optional<int>(0));
}

TEST(Staging, TiesGoToTheLowestNode) {
  const std::vector<StagingPlan> lanes = {
      PlanStaging(StagingMode::kAuto, Gpu(0, 1), true),
      PlanStaging(StagingMode::kAuto, Gpu(1, 0), true),
      PlanStaging(StagingMode::kAuto, Gpu(2, -1), true),
  };
  EXPECT_EQ(ElectProposedPool(lanes), std::optional<int>(-1));
}

}  // namespace
}  // namespace gpufan
