// SPDX-License-Identifier: LGPL-2.1-or-later
// What the fan-out tells the session about its lanes (LaneInfo, staging
// counts) and how it shows in every reader's statistics.
#include <gtest/gtest.h>

#include <memory>

#include "gpufan/clock.h"
#include "gpufan/host-pool.h"
#include "gpufan/session.h"
#include "lane-stats.h"

namespace gpufan {
namespace {

constexpr size_t kMiB = 1024 * 1024;

std::shared_ptr<Session> TwoLanes() {
  auto session =
      Session::Create(SessionConfig{}, std::make_shared<ManualClock>(1));
  session->AddLane(0, Device::Cpu(0));
  session->AddLane(1, Device::Cpu(1));
  return session;
}

TEST(SessionLanes, UndescribedLanesShowNoInfo) {
  auto session = TwoLanes();
  const SessionStats stats = session->Stats();
  const LaneStats& l = LaneOf(stats, 0);
  EXPECT_FALSE(l.described);
  EXPECT_EQ(l.worker_thread, "");
  EXPECT_FALSE(l.has_host_pool);
  EXPECT_EQ(l.copies, 0u);
}

TEST(SessionLanes, InfoAndPoolFiguresShowInTheStats) {
  auto session = TwoLanes();
  auto pool = std::make_shared<HostPool>(-1, nullptr, 4 * kMiB, nullptr);
  session->SetLaneInfo(1, LaneInfo{"cpus 0-3", pool});
  const HostBlock block = pool->Acquire(1000);
  pool->RecordFallback();

  const SessionStats stats = session->Stats();
  EXPECT_FALSE(LaneOf(stats, 0).described);
  const LaneStats& l = LaneOf(stats, 1);
  EXPECT_TRUE(l.described);
  EXPECT_EQ(l.worker_thread, "cpus 0-3");
  EXPECT_TRUE(l.has_host_pool);
  EXPECT_EQ(l.host_pool_node, -1);
  EXPECT_FALSE(l.host_pool_pins);
  // Read when the statistics are taken, not when the info was set.
  EXPECT_EQ(l.host_pool.blocks_allocated, 1u);
  EXPECT_EQ(l.host_pool.blocks_in_use, 1u);
  EXPECT_EQ(l.host_pool.fallbacks, 1u);
  pool->Release(block);
}

TEST(SessionLanes, WorkerThreadChangesAloneKeepThePool) {
  auto session = TwoLanes();
  auto pool = std::make_shared<HostPool>(-1, nullptr, 4 * kMiB, nullptr);
  session->SetLaneInfo(0, LaneInfo{"not started", pool});
  session->SetLaneWorkerThread(0, "bound to CPUs 0-3");
  session->SetLaneWorkerThread(1, "unbound: no CPUs");  // undescribed lane
  session->SetLaneWorkerThread(9, "nowhere");           // no such lane
  const SessionStats stats = session->Stats();
  EXPECT_EQ(LaneOf(stats, 0).worker_thread, "bound to CPUs 0-3");
  EXPECT_TRUE(LaneOf(stats, 0).has_host_pool);
  EXPECT_TRUE(LaneOf(stats, 1).described);
  EXPECT_EQ(LaneOf(stats, 1).worker_thread, "unbound: no CPUs");
  EXPECT_FALSE(LaneOf(stats, 1).has_host_pool);
  EXPECT_EQ(stats.lanes.size(), 2u);
}

TEST(SessionLanes, StagingIsCountedPerLane) {
  auto session = TwoLanes();
  session->CountStaging(0, true);
  session->CountStaging(0, true);
  session->CountStaging(0, false);
  session->CountStaging(7, true);  // no such lane: ignored
  const SessionStats stats = session->Stats();
  EXPECT_EQ(LaneOf(stats, 0).copies, 2u);
  EXPECT_EQ(LaneOf(stats, 0).copies_skipped, 1u);
  EXPECT_EQ(LaneOf(stats, 1).copies, 0u);
}

TEST(SessionLanes, InfoSurvivesResetAndGoesWithTheLane) {
  auto session = TwoLanes();
  session->SetLaneInfo(0, LaneInfo{"cpu 0", nullptr});
  session->SetLaneInfo(9, LaneInfo{"nowhere", nullptr});  // no such lane
  session->Reset();
  EXPECT_EQ(LaneOf(session->Stats(), 0).worker_thread, "cpu 0");
  EXPECT_EQ(session->Stats().lanes.size(), 2u);
  session->RemoveLane(0);
  session->AddLane(0, Device::Cpu(0));
  EXPECT_FALSE(LaneOf(session->Stats(), 0).described);
}

}  // namespace
}  // namespace gpufan
