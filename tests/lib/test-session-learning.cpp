// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: what it learns of its lanes. Service times (not queueing, not
// copies; scaled by item units), a worker's wake-up, frames per second, the
// adaptive policy's in-flight limit and choice of lane (copies to a lane's
// GPU weighed in), the latency it adds, and why no lane could take an item.
// Time is a ManualClock.
#include <gtest/gtest.h>

#include "session-test.h"

namespace gpufan {
namespace {

TEST_F(SessionTest, LearnsServiceTimesAndFps) {
  Make(RoundRobin());
  for (int i = 0; i < 10; ++i) {
    const Dispatch a = Send(0);
    const Dispatch b = Send(1);
    clock_->Advance(2 * kMs);
    session_->Arrive(0, a.seq, kNoTime, P("a"));
    clock_->Advance(2 * kMs);
    session_->Arrive(1, b.seq, kNoTime, P("b"));
    session_->TakeReady();
  }
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).service_ns, 2 * kMs);
  EXPECT_EQ(Lane(s, 1).service_ns, 4 * kMs);
  EXPECT_EQ(s.elapsed_ns, 40 * kMs);
  EXPECT_DOUBLE_EQ(Lane(s, 0).fps, 10 / 0.040);
  EXPECT_EQ(Lane(s, 0).device.name, "cpu:0");
  EXPECT_TRUE(Lane(s, 0).claimed);
  EXPECT_TRUE(Lane(s, 0).eligible);
  EXPECT_EQ(s.policy, Policy::kRoundRobin);
}

TEST_F(SessionTest, AdaptiveInFlightLimitFollowsTheSpreadOfLaneSpeeds) {
  Make();
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  clock_->Advance(1 * kMs);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  clock_->Advance(9 * kMs);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  // While the 10 ms lane works on one item the 1 ms lane completes 10, all
  // waiting behind it: 2 x (4 + 2) plus the 9 beyond one per lane.
  EXPECT_EQ(session_->EffectiveMaxInFlight(), 2u * (4 + 2) + 9);
  // Other policies keep the documented base.
  session_->SetPolicy(Policy::kLeastLoaded);
  EXPECT_EQ(session_->EffectiveMaxInFlight(), 2u * (4 + 2));
}

TEST_F(SessionTest, ServiceTimeExcludesQueueingBehindThePreviousItem) {
  Make({}, 1);
  // Two items started together; the second can only begin when the first ends.
  const Dispatch a = Send(0);
  const Dispatch b = Send(0);
  clock_->Advance(3 * kMs);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  clock_->Advance(3 * kMs);
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  EXPECT_EQ(Lane(session_->Stats(), 0).service_ns, 3 * kMs);
}

TEST_F(SessionTest, ItemUnitsScaleTheLearnedServiceTime) {
  Make(RoundRobin(), 1);
  // Chunks of 20 frames where 10 is nominal, 5 ms each: 2.5 ms per nominal
  // chunk.
  for (int i = 0; i < 8; ++i) {
    const Dispatch d = Send(0);
    session_->SetItemUnits(0, d.seq, 20, 10);
    clock_->Advance(5 * kMs);
    session_->Arrive(0, d.seq, kNoTime, P("c"));
    session_->TakeReady();
  }
  EXPECT_EQ(Lane(session_->Stats(), 0).service_ns, 2'500'000);
  // A short chunk is not scaled up: its drain costs what a long one's does.
  for (int i = 0; i < 16; ++i) {
    const Dispatch d = Send(0);
    session_->SetItemUnits(0, d.seq, 2, 10);
    clock_->Advance(3 * kMs);
    session_->Arrive(0, d.seq, kNoTime, P("c"));
    session_->TakeReady();
  }
  EXPECT_EQ(Lane(session_->Stats(), 0).service_ns, 3 * kMs);
}

// The time from dispatch to start of an item that woke the lane's sleeping
// worker is a sample of its wake-up, learned like service times; the others
// (queued behind an item, or taken by an awake worker) are not samples.
TEST_F(SessionTest, LearnsTheWakeUpOfALanesWorker) {
  Make(RoundRobin(), 1);
  const Dispatch a = *session_->TryDispatchItem(kNoTime);
  const Dispatch b = *session_->TryDispatchItem(kNoTime);
  const Dispatch c = *session_->TryDispatchItem(kNoTime);
  clock_->Advance(30'000);
  session_->MarkStarted(0, a.seq, /*woken=*/true);
  clock_->Advance(500'000);
  session_->MarkStarted(0, b.seq);
  clock_->Advance(500'000);
  session_->MarkStarted(0, c.seq);
  // Were b and c samples too, the median of 30, 530 and 1030 us would be 530.
  EXPECT_EQ(Lane(session_->Stats(), 0).wake_ns, 30'000);
}

TEST_F(SessionTest, AdaptiveSpreadsOverUnknownLanesThenPrefersTheFastOne) {
  Make({}, 2);
  // No knowledge yet: least-loaded with rotation.
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  clock_->Advance(1 * kMs);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  clock_->Advance(9 * kMs);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  session_->TakeReady();
  // Lane 0 takes 1 ms, lane 1 10 ms: lane 0 gets two (one in progress, one
  // queued: it never runs dry; deeper would only hold items back), then the
  // idle slow lane one, since the in-flight bound holds what lane 0
  // completes meanwhile; then both wait for lane 0.
  std::vector<uint32_t> lanes;
  for (int i = 0; i < 3; ++i)
    lanes.push_back(session_->TryDispatchItem(0)->lane);
  EXPECT_EQ(lanes, (std::vector<uint32_t>{0, 0, 1}));
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
}

// Adaptive learns each lane's time to copy an item from another GPU
// (CountGpuFrame) and counts it for items in another GPU's memory only: an
// item on GPU 0 stays on GPU 0's lane while that lane finishes it sooner
// even behind its queue; an item in host memory, or on GPU 1, does not pay
// it there.
TEST_F(SessionTest, AdaptiveWeighsTheCopyOfAnItemToEachLanesGpu) {
  MakeGpuLanes({0, 1});
  // Both lanes take 10 ms per item.
  for (int i = 0; i < 3; ++i) {
    const Dispatch a = Send(0);
    const Dispatch b = Send(1);
    clock_->Advance(10 * kMs);
    session_->Arrive(0, a.seq, kNoTime, P("a"));
    session_->Arrive(1, b.seq, kNoTime, P("b"));
    session_->TakeReady();
  }
  // Lane 1 copies an item from GPU 0 in 15 ms.
  session_->CountGpuFrame(1, GpuCopyPath::kViaHost, 1000, 15 * kMs);
  // Lane 0 has one item under way: it finishes the next at 20 ms, lane 1 at
  // 10 ms, 25 ms with the copy.
  const Dispatch busy = Send(0);
  (void)busy;
  EXPECT_EQ(session_->TryDispatchItem(kNoTime, 0)->lane, 0u)
      << "an item on GPU 0 stays on GPU 0";
  // Lane 0 now has two: 30 ms; lane 1 still 25 ms with the copy.
  EXPECT_EQ(session_->TryDispatchItem(kNoTime, 0)->lane, 1u)
      << "worth the copy";
  // Lane 1 has one queued now (20 ms; 35 ms with the copy), lane 0 two
  // (30 ms): an item in host memory pays no copy anywhere.
  EXPECT_EQ(session_->TryDispatchItem(kNoTime, -1)->lane, 1u)
      << "host memory: no copy counted";
  EXPECT_EQ(Lane(session_->Stats(), 1).gpu.via_host, 1u);
  EXPECT_EQ(Lane(session_->Stats(), 1).gpu.bytes, 1000u);
}

// The time a lane spends copying an item to its GPU is learned apart (the
// transfer) and kept out of its service time: adaptive adds it only for
// items that need the copy.
TEST_F(SessionTest, ACopyIsNotServiceTime) {
  MakeGpuLanes({1});
  const Dispatch a = Send(0);
  session_->CountGpuFrame(0, GpuCopyPath::kViaHost, 1000, 4 * kMs);
  clock_->Advance(10 * kMs);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  EXPECT_EQ(Lane(session_->Stats(), 0).service_ns, 6 * kMs);
  // In place: nothing to subtract.
  const Dispatch b = Send(0);
  session_->CountGpuFrame(0, GpuCopyPath::kInPlace);
  clock_->Advance(6 * kMs);
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  EXPECT_EQ(Lane(session_->Stats(), 0).service_ns, 6 * kMs);
}

// A branch with a queue: the next item is pushed (and copied, 4 ms) while
// the one before is still worked on; its work begins when that one's ends,
// so its copy costs it nothing: every sample is the 6 ms of work, none
// loses the copy a second time.
TEST_F(SessionTest, ACopyMadeWhileTheBranchWorksCostsNothing) {
  MakeGpuLanes({1});
  for (int i = 0; i < 3; ++i) {
    const Dispatch c = Send(0);
    clock_->Advance(1 * kMs);
    const Dispatch d = Send(0);
    session_->CountGpuFrame(0, GpuCopyPath::kViaHost, 1000, 4 * kMs);
    clock_->Advance(5 * kMs);
    session_->Arrive(0, c.seq, kNoTime, P("c"));
    clock_->Advance(6 * kMs);
    session_->Arrive(0, d.seq, kNoTime, P("d"));
    session_->TakeReady();
  }
  EXPECT_EQ(Lane(session_->Stats(), 0).service_ns, 6 * kMs);
}

// A copy counts on the item being pushed, also when that is not the lane's
// latest started one (an item sent again after its lane failed is pushed
// ahead of the lane's own items, which may be in the branch already).
TEST_F(SessionTest, ACopyCountsOnTheItemBeingPushed) {
  MakeGpuLanes({1});
  const Dispatch a = *session_->TryDispatchItem(kNoTime);
  const Dispatch b = *session_->TryDispatchItem(kNoTime);
  session_->MarkStarted(0, b.seq);  // b went first: a is pushed after it
  session_->MarkStarted(0, a.seq);
  session_->CountGpuFrame(0, GpuCopyPath::kViaHost, 1000, 4 * kMs);  // a's
  clock_->Advance(10 * kMs);
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  EXPECT_EQ(Lane(session_->Stats(), 0).service_ns, 10 * kMs)
      << "b's sample lost a's copy";
}

TEST_F(SessionTest, AddedLatencyFollowsTheTimesItemsSpendInTheLanes) {
  Make(RoundRobin());
  EXPECT_EQ(session_->AddedLatencyNs(), 0);
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  clock_->Advance(30 * kMs);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  clock_->Advance(10 * kMs);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  ReadyBatch batch = session_->TakeReady();
  EXPECT_EQ(session_->AddedLatencyNs(), 40 * kMs);
  EXPECT_TRUE(batch.latency_grew);
  // Said once until the fan-in reports it.
  const Dispatch c = Send(0);
  clock_->Advance(60 * kMs);
  session_->Arrive(0, c.seq, kNoTime, P("c"));
  EXPECT_FALSE(session_->TakeReady().latency_grew);
  session_->MarkLatencyReported(session_->AddedLatencyNs());
  EXPECT_EQ(session_->AddedLatencyNs(), 60 * kMs);
  // Never more than stall-timeout (100 ms here).
  const Dispatch d = Send(1);
  clock_->Advance(95 * kMs);
  session_->Arrive(1, d.seq, kNoTime, P("d"));
  clock_->Advance(90 * kMs);
  const Dispatch e = Send(0);
  clock_->Advance(99 * kMs);
  session_->Arrive(0, e.seq, kNoTime, P("e"));
  EXPECT_TRUE(session_->TakeReady().latency_grew);
  EXPECT_EQ(session_->AddedLatencyNs(), 99 * kMs);
  EXPECT_EQ(session_->Stats().added_latency_ns, 99 * kMs);
}

TEST_F(SessionTest, WhyNoLaneNamesAllZeroWeights) {
  SessionConfig config;
  config.policy = Policy::kWeighted;
  Make(config, 2);
  EXPECT_EQ(session_->WhyNoLane(), "");
  session_->SetLaneWeight(0, 0.0);
  session_->SetLaneWeight(1, 0.0);
  const std::optional<Dispatch> d = session_->TryDispatchItem(kNoTime);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, DispatchStatus::kNoLanes);
  EXPECT_NE(session_->WhyNoLane().find("weight 0"), std::string::npos)
      << session_->WhyNoLane();
}

}  // namespace
}  // namespace gpufan
