// SPDX-License-Identifier: LGPL-2.1-or-later
// Scheduling policies: exact choice sequences for each policy, and the adaptive
// policy in discrete-event simulations driven by a ManualClock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "gpufan/clock.h"
#include "gpufan/scheduler.h"
#include "gpufan/session.h"

namespace gpufan {
namespace {

constexpr int64_t kMs = 1'000'000;

std::vector<LaneLoad> Lanes(std::initializer_list<uint32_t> ids) {
  std::vector<LaneLoad> lanes;
  for (uint32_t id : ids) {
    LaneLoad l;
    l.lane = id;
    lanes.push_back(l);
  }
  return lanes;
}

// Picks `n` times with idle lanes (nothing ever outstanding).
std::vector<uint32_t> PickIdle(Scheduler& s, const std::vector<LaneLoad>& lanes,
                               int n) {
  std::vector<uint32_t> out;
  for (int i = 0; i < n; ++i) {
    const Pick p = s.Choose(lanes, 0);
    EXPECT_EQ(p.status, PickStatus::kLane);
    out.push_back(p.lane);
  }
  return out;
}

using Seq = std::vector<uint32_t>;

// --- round-robin ---

TEST(RoundRobin, StrictTurn) {
  Scheduler s(Policy::kRoundRobin);
  EXPECT_EQ(PickIdle(s, Lanes({0, 1, 2}), 7), (Seq{0, 1, 2, 0, 1, 2, 0}));
}

TEST(RoundRobin, SparseLaneIdsWrap) {
  Scheduler s(Policy::kRoundRobin);
  EXPECT_EQ(PickIdle(s, Lanes({2, 5, 100}), 5), (Seq{2, 5, 100, 2, 5}));
}

TEST(RoundRobin, WaitsForTheLaneInTurn) {
  Scheduler s(Policy::kRoundRobin);
  auto lanes = Lanes({0, 1, 2});
  EXPECT_EQ(s.Choose(lanes, 0).lane, 0u);
  lanes[1].has_room = false;
  // Lane 1's turn: it is full, so everyone waits, however often we ask.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kWait);
  lanes[1].has_room = true;
  EXPECT_EQ(PickIdle(s, lanes, 3), (Seq{1, 2, 0}));
}

TEST(RoundRobin, SkipsIneligibleLanesAndReportsNone) {
  Scheduler s(Policy::kRoundRobin);
  auto lanes = Lanes({0, 1, 2});
  lanes[1].eligible = false;
  EXPECT_EQ(PickIdle(s, lanes, 4), (Seq{0, 2, 0, 2}));
  for (auto& l : lanes)
    l.eligible = false;
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kNone);
  EXPECT_EQ(s.Choose({}, 0).status, PickStatus::kNone);
}

TEST(RoundRobin, LaneSetChangesKeepTheTurn) {
  Scheduler s(Policy::kRoundRobin);
  EXPECT_EQ(PickIdle(s, Lanes({0, 1, 2}), 2), (Seq{0, 1}));
  s.ResetCursors();
  // Lane 3 appears: the turn goes on from lane 2.
  EXPECT_EQ(PickIdle(s, Lanes({0, 1, 2, 3}), 4), (Seq{2, 3, 0, 1}));
  // Lane 2 vanishes while it is in turn: the next lane above takes it.
  EXPECT_EQ(PickIdle(s, Lanes({0, 1, 3}), 3), (Seq{3, 0, 1}));
}

// --- least-loaded ---

TEST(LeastLoaded, IdleTiesRotate) {
  Scheduler s(Policy::kLeastLoaded);
  EXPECT_EQ(PickIdle(s, Lanes({0, 1, 2}), 7), (Seq{0, 1, 2, 0, 1, 2, 0}));
}

TEST(LeastLoaded, FewestOutstandingWins) {
  Scheduler s(Policy::kLeastLoaded);
  auto lanes = Lanes({0, 1, 2});
  lanes[0].outstanding = 3;
  lanes[1].outstanding = 1;
  lanes[2].outstanding = 2;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);
  // Fill lanes as they are picked: the picks level the load.
  Seq picks;
  for (int i = 0; i < 6; ++i) {
    const Pick p = s.Choose(lanes, 0);
    ASSERT_EQ(p.status, PickStatus::kLane);
    picks.push_back(p.lane);
    for (auto& l : lanes)
      if (l.lane == p.lane)
        l.outstanding++;
  }
  // {3,1,2} -> 1; {3,2,2} tie, rotation after 1 -> 2; {3,2,3} -> 1;
  // {3,3,3} rotation after 1 -> 2; {3,3,4} tie 0/1, after 2 wraps -> 0; -> 1.
  EXPECT_EQ(picks, (Seq{1, 2, 1, 2, 0, 1}));
}

TEST(LeastLoaded, FullLanesAreSkippedThenWait) {
  Scheduler s(Policy::kLeastLoaded);
  auto lanes = Lanes({0, 1});
  lanes[0].has_room = false;
  lanes[1].outstanding = 5;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);
  lanes[1].has_room = false;
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kWait);
  lanes[0].eligible = lanes[1].eligible = false;
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kNone);
}

// --- weighted ---

TEST(Weighted, ThreeToOnePattern) {
  Scheduler s(Policy::kWeighted);
  auto lanes = Lanes({0, 1});
  lanes[0].weight = 3;
  lanes[1].weight = 1;
  // Smooth: the light lane is spread out, not bunched.
  EXPECT_EQ(PickIdle(s, lanes, 8), (Seq{0, 0, 1, 0, 0, 0, 1, 0}));
  std::map<uint32_t, int> count;
  for (uint32_t lane : PickIdle(s, lanes, 400))
    count[lane]++;
  EXPECT_EQ(count[0], 300);
  EXPECT_EQ(count[1], 100);
}

TEST(Weighted, NginxFiveOneOne) {
  Scheduler s(Policy::kWeighted);
  auto lanes = Lanes({0, 1, 2});
  lanes[0].weight = 5;
  lanes[1].weight = 1;
  lanes[2].weight = 1;
  EXPECT_EQ(PickIdle(s, lanes, 7), (Seq{0, 0, 1, 0, 2, 0, 0}));
}

TEST(Weighted, ZeroWeightExcludes) {
  Scheduler s(Policy::kWeighted);
  auto lanes = Lanes({0, 1, 2});
  lanes[1].weight = 0;
  lanes[2].weight = -1;
  EXPECT_EQ(PickIdle(s, lanes, 3), (Seq{0, 0, 0}));
  lanes[0].weight = 0;
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kNone);
}

TEST(Weighted, WaitLeavesCreditsAlone) {
  Scheduler s(Policy::kWeighted);
  auto lanes = Lanes({0, 1});
  lanes[0].weight = 3;
  lanes[1].weight = 1;
  EXPECT_EQ(PickIdle(s, lanes, 2), (Seq{0, 0}));
  lanes[1].has_room = false;  // lane 1 is next
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kWait);
  lanes[1].has_room = true;
  EXPECT_EQ(PickIdle(s, lanes, 6), (Seq{1, 0, 0, 0, 1, 0}));
}

TEST(Weighted, VanishedLaneLosesItsCredit) {
  Scheduler s(Policy::kWeighted);
  auto lanes = Lanes({0, 1});
  lanes[0].weight = 1;
  lanes[1].weight = 1;
  EXPECT_EQ(PickIdle(s, lanes, 1), (Seq{0}));
  lanes[1].eligible = false;
  EXPECT_EQ(PickIdle(s, lanes, 2), (Seq{0, 0}));
  lanes[1].eligible = true;
  // Lane 1 comes back with zero credit, lane 0 keeps its -1.
  EXPECT_EQ(PickIdle(s, lanes, 4), (Seq{1, 0, 1, 0}));
}

// --- adaptive ---

TEST(Adaptive, ExpectedCompletion) {
  LaneLoad l;
  l.service_ns = 10;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 110);  // idle
  l.outstanding = 1;
  l.head_started_ns = 95;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99),
            115);  // head ends at 105
  // Overdue head: assume it ends now, and that the lane now takes as long as
  // it has run (50).
  l.head_started_ns = 50;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 150);
  EXPECT_EQ(Scheduler::EffectiveServiceNs(l, 100, 99), 50);
  l.outstanding = 3;
  l.head_started_ns = 95;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 105 + 2 * 10 + 10);
  l.head_started_ns = -1;  // head still queued
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 110 + 2 * 10 + 10);
  l.service_ns = 0;  // unknown: the fallback stands in
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 7), 107 + 2 * 7 + 7);
  // An idle lane's worker wakes up first; a busy one is awake.
  l.wake_ns = 30;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 7), 107 + 2 * 7 + 7);
  l.outstanding = 0;
  l.service_ns = 10;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 100 + 30 + 10);
}

// An item in another GPU's memory must be copied to a lane there first:
// its expected completion counts the lane's learned copy time, so the item
// stays on its GPU unless another lane finishes it sooner even after the
// copy.
TEST(Adaptive, AnItemPrefersItsGpuUnlessAnotherFinishesSoonerAfterTheCopy) {
  LaneLoad l;
  l.service_ns = 10;
  l.transfer_ns = 4;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 114);  // idle
  l.outstanding = 1;
  l.head_started_ns = 95;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 119);
  // Items already given to it that still need their copy count theirs.
  l.queued_transfer_ns = 8;
  EXPECT_EQ(Scheduler::ExpectedCompletionNs(l, 100, 99), 127);
  l.queued_transfer_ns = 0;

  constexpr int64_t kMs = 1'000'000;
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  for (LaneLoad& lane : lanes)
    lane.service_ns = 10 * kMs;
  lanes[1].transfer_ns = 3 * kMs;  // the item is on lane 0's GPU
  const int64_t now = 100 * kMs;
  // Both idle: the copy makes lane 1 later.
  EXPECT_EQ(s.Choose(lanes, now).lane, 0u);
  // Lane 0 busy with one item just started: lane 1 finishes in 13 ms, lane
  // 0 in 20 ms: worth the copy.
  lanes[0].outstanding = 1;
  lanes[0].head_started_ns = now;
  EXPECT_EQ(s.Choose(lanes, now).lane, 1u);
  // Its item almost done (started 9 ms ago): lane 0 finishes in 11 ms.
  lanes[0].head_started_ns = now - 9 * kMs;
  EXPECT_EQ(s.Choose(lanes, now).lane, 0u);
}

// Waking a sleeping worker takes time (and upstream's CPU): a lane of
// microseconds that is awake takes items while they would still finish before
// an idle lane's worker woke up and did one.
TEST(Adaptive, AnAwakeLaneOfMicrosecondsTakesItemsBeforeASleepingOneIsWoken) {
  constexpr int64_t kUs = 1000;
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  for (LaneLoad& l : lanes) {
    l.service_ns = 2 * kUs;
    l.wake_ns = 7 * kUs;
  }
  lanes[0].outstanding = 1;
  lanes[0].head_started_ns = 0;
  std::vector<uint32_t> picks;
  for (int i = 0; i < 4; ++i) {
    const Pick p = s.Choose(lanes, 0);
    ASSERT_EQ(p.status, PickStatus::kLane);
    picks.push_back(p.lane);
    if (p.lane == 0)
      lanes[0].outstanding++;
  }
  // Lane 0 (its first item ends at 2 us) would finish a 2nd, 3rd, 4th, 5th
  // item at 4, 6, 8, 10 us; lane 1, asleep, one at 7 + 2 = 9 us: lane 0
  // takes three more, then lane 1 is woken.
  EXPECT_EQ(picks, (std::vector<uint32_t>{0, 0, 0, 1}));
  // Without a learned wake-up the idle lane is taken at once.
  lanes[0].outstanding = 1;
  lanes[1].wake_ns = 0;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);
  // When every lane is idle, each must be woken: the wake-ups do not count,
  // and equal lanes rotate (a longer or stale wake-up leaves no lane out).
  lanes[0].outstanding = 0;
  lanes[0].head_started_ns = -1;
  lanes[0].wake_ns = 1 * kUs;
  lanes[1].wake_ns = 50 * kUs;
  EXPECT_EQ(PickIdle(s, lanes, 4), (std::vector<uint32_t>{0, 1, 0, 1}));
}

TEST(Adaptive, PicksEarliestCompletion) {
  // Lanes of microseconds: their queues are not held short (see below).
  constexpr int64_t kUs = 1000;
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1, 2});
  lanes[0].service_ns = 8 * kUs;
  lanes[1].service_ns = 2 * kUs;
  lanes[2].service_ns = 4 * kUs;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);
  lanes[1].outstanding = 2;
  lanes[1].head_started_ns = 0;            // ends at 2, then 2 more: 6 us
  EXPECT_EQ(s.Choose(lanes, 0).lane, 2u);  // 4 us
  lanes[2].has_room = false;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);  // 6 < 8
}

TEST(Adaptive, KeepsOneItemQueuedBehindALongOne) {
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  lanes[0].service_ns = 4 * kMs;
  lanes[1].service_ns = 4 * kMs;
  lanes[0].outstanding = 2;  // one in progress, one queued: never runs dry
  lanes[0].head_started_ns = 0;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);
  lanes[1].outstanding = 2;
  lanes[1].head_started_ns = 0;
  // Both have queue room, but a third item would only wait behind them.
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kWait);
  lanes[1].outstanding = 1;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);
}

TEST(Adaptive, UnknownLanesAreTriedOptimistically) {
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  lanes[0].service_ns = 5 * kMs;
  lanes[0].outstanding = 1;
  lanes[0].head_started_ns = 0;
  // Lane 1 unknown: scored with 5 ms, idle -> wins.
  EXPECT_EQ(s.Choose(lanes, 1 * kMs).lane, 1u);
}

TEST(Adaptive, WithoutKnowledgeBehavesLikeLeastLoaded) {
  // Past the wait for a first sample (or with nothing out yet), adaptive
  // picks as least-loaded does while no lane has a service time.
  Scheduler adaptive(Policy::kAdaptive);
  Scheduler least(Policy::kLeastLoaded);
  auto lanes = Lanes({0, 1, 2});
  for (auto& l : lanes)
    l.head_started_ns = 0;
  const int64_t now = Scheduler::kFirstSampleWaitNs;
  for (int i = 0; i < 12; ++i) {
    lanes[static_cast<size_t>(i) % 3].outstanding =
        static_cast<uint32_t>(i % 4);
    lanes[1].has_room = i % 5 != 0;
    const Pick a = adaptive.Choose(lanes, now + i);
    const Pick b = least.Choose(lanes, now + i);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.lane, b.lane);
  }
}

TEST(Adaptive, AnUnknownLaneTakesOneItemUntilItsFirstSample) {
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  EXPECT_EQ(PickIdle(s, lanes, 2), (Seq{0, 1}));
  for (auto& l : lanes) {
    l.outstanding = 1;
    l.head_started_ns = 0;
  }
  // Neither has come back: wait, not fill the queues blind.
  EXPECT_EQ(s.Choose(lanes, kMs).status, PickStatus::kWait);
  // Lane 0 came back after 1 ms; lane 1 is still unknown and busy.
  lanes[0].outstanding = 0;
  lanes[0].service_ns = kMs;
  EXPECT_EQ(s.Choose(lanes, kMs).lane, 0u);
  lanes[0].outstanding = 5;
  lanes[0].has_room = false;
  lanes[0].head_started_ns = kMs;
  EXPECT_EQ(s.Choose(lanes, 2 * kMs).status, PickStatus::kWait);
  // A branch that needs several items before it returns one still gets them.
  EXPECT_EQ(s.Choose(lanes, Scheduler::kFirstSampleWaitNs).lane, 1u);
}

// Chunk lanes: two long items start a moment apart. The first lane's comes
// back and that lane takes the next item; the one after goes to the second
// lane (whose first item is about to come back), not behind the first
// lane's again: waiting for a first sample costs no extra slot.
TEST(Adaptive, ALaneAwaitingItsFirstSampleIsNotPassedOverForALongItem) {
  constexpr int64_t kChunk = 60 * kMs;
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  lanes[0].service_ns = kChunk;  // its first chunk came back at 60 ms
  lanes[0].outstanding = 1;      // and the next started at once
  lanes[0].head_started_ns = kChunk;
  lanes[1].outstanding = 1;  // started 2 ms after lane 0's first
  lanes[1].head_started_ns = 2 * kMs;
  // Lane 0 would finish the item at 180 ms, lane 1 (assumed as fast) at
  // 122 ms: wait for lane 1's sample.
  EXPECT_EQ(s.Choose(lanes, kChunk + kMs).status, PickStatus::kWait);
  // Its sample came (after 60 ms): it takes the item.
  lanes[1].outstanding = 0;
  lanes[1].head_started_ns = -1;
  lanes[1].service_ns = kChunk;
  EXPECT_EQ(s.Choose(lanes, 62 * kMs).lane, 1u);
  // A lane far slower than assumed is waited for no longer than twice the
  // known lanes' time since its item started.
  lanes[1].outstanding = 1;
  lanes[1].head_started_ns = 2 * kMs;
  lanes[1].service_ns = 0;
  EXPECT_EQ(s.Choose(lanes, 2 * kMs + 2 * kChunk + kMs).lane, 0u);
}

TEST(Adaptive, EqualIdleLanesRotate) {
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1, 2});
  for (auto& l : lanes)
    l.service_ns = kMs;
  EXPECT_EQ(PickIdle(s, lanes, 6), (Seq{0, 1, 2, 0, 1, 2}));
}

TEST(Adaptive, WaitsForAFullLaneThatWouldFinishMuchEarlier) {
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  lanes[0].service_ns = 2 * kMs;  // full: 3 outstanding, head started at 0
  lanes[0].has_room = false;
  lanes[0].outstanding = 3;
  lanes[0].head_started_ns = 0;
  lanes[1].service_ns = 20 * kMs;  // idle but slow
  // Lane 0 would finish it at 8 ms (10 ms counting the wait for a slot);
  // lane 1 at 20 ms: better to wait.
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kWait);
  // A slow lane that is close enough is used rather than left idle.
  lanes[1].service_ns = 8 * kMs;
  EXPECT_EQ(s.Choose(lanes, 0).lane, 1u);
  // A full lane whose current item has run for more than twice its service
  // time may be stalled: never wait for it. Less is ordinary variation.
  lanes[1].service_ns = 20 * kMs;
  EXPECT_EQ(s.Choose(lanes, 3 * kMs).status, PickStatus::kWait);
  EXPECT_EQ(s.Choose(lanes, 5 * kMs).lane, 1u);
}

TEST(Adaptive, AnIdleSlowLaneTakesAnItemWhenTheWindowHasRoom) {
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0, 1});
  lanes[0].service_ns = 1 * kMs;  // full: 5 outstanding
  lanes[0].has_room = false;
  lanes[0].outstanding = 5;
  lanes[0].head_started_ns = 0;
  lanes[1].service_ns = 10 * kMs;  // idle, 10x slower
  // Waiting for lane 0 finishes the item at 6 ms, lane 1 at 10 ms; but while
  // lane 1 works the other lane completes 10 items, which the window must
  // hold: with room for 11 more items in flight, lane 1 is used.
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kWait);
  EXPECT_EQ(s.Choose(lanes, 0, 10).status, PickStatus::kWait);
  EXPECT_EQ(s.Choose(lanes, 0, 11).lane, 1u);
  // Only an idle lane: a slow lane never queues behind its own item.
  lanes[1].outstanding = 1;
  lanes[1].head_started_ns = 0;
  EXPECT_EQ(s.Choose(lanes, 0, 100).status, PickStatus::kWait);
}

TEST(Adaptive, WaitAndNone) {
  Scheduler s(Policy::kAdaptive);
  auto lanes = Lanes({0});
  lanes[0].service_ns = kMs;
  lanes[0].has_room = false;
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kWait);
  lanes[0].eligible = false;
  EXPECT_EQ(s.Choose(lanes, 0).status, PickStatus::kNone);
}

TEST(Scheduler, SetPolicySwitches) {
  Scheduler s(Policy::kWeighted);
  EXPECT_EQ(s.policy(), Policy::kWeighted);
  s.SetPolicy(Policy::kRoundRobin);
  EXPECT_EQ(s.policy(), Policy::kRoundRobin);
  EXPECT_EQ(PickIdle(s, Lanes({0, 1}), 3), (Seq{0, 1, 0}));
}

// --- discrete-event simulation of a Session with the adaptive policy ---

struct FakePayload : Payload {
  explicit FakePayload(uint64_t s) : seq(s) {}
  uint64_t seq;
};

// Lanes are sequential workers with a service time each; upstream pushes as
// fast as the session admits (or at a fixed interval). Default queue and
// in-flight limits: what a user gets. Completions come back
// through the fan-in path (claimed lanes) and are released in order.
class Simulation {
 public:
  using ServiceFn =
      std::function<int64_t(uint32_t lane, uint64_t started_index)>;

  Simulation(Policy policy, std::vector<int64_t> service_ns,
             ServiceFn fn = nullptr)
      : clock_(std::make_shared<ManualClock>(0)), fn_(std::move(fn)) {
    SessionConfig config;
    config.policy = policy;
    config.stall_timeout_ns = 1'000'000 * kMs;
    session_ = Session::Create(config, clock_);
    for (uint32_t i = 0; i < service_ns.size(); ++i) {
      session_->AddLane(i, Device::Cpu(static_cast<int>(i)));
      session_->ClaimLane(i);
      Lane lane;
      lane.service_ns = service_ns[i];
      lanes_.push_back(std::move(lane));
    }
  }

  // Runs until `total` items were released. `interval_ns` > 0 spaces upstream
  // items; 0 means upstream always has one ready.
  void Run(uint64_t total, int64_t interval_ns = 0) {
    int64_t next_arrival = 0;
    while (released_.size() < total) {
      while (dispatch_lane_.size() < total && clock_->NowNs() >= next_arrival) {
        const std::optional<Dispatch> d =
            session_->TryDispatchItem(next_arrival);
        if (!d)
          break;
        ASSERT_EQ(d->status, DispatchStatus::kOk);
        ASSERT_TRUE(d->awaited);
        dispatch_lane_.push_back(d->lane);
        lanes_[d->lane].queue.push_back(d->seq);
        StartIfIdle(d->lane);
        if (interval_ns > 0)
          next_arrival += interval_ns;
      }
      // Advance to the next event: a completion or the next upstream item.
      int64_t next = std::numeric_limits<int64_t>::max();
      for (const Lane& l : lanes_)
        if (l.busy)
          next = std::min(next, l.done_at);
      if (interval_ns > 0 && dispatch_lane_.size() < total &&
          next_arrival > clock_->NowNs())
        next = std::min(next, next_arrival);
      ASSERT_NE(next, std::numeric_limits<int64_t>::max())
          << "simulation stuck";
      clock_->Set(next);
      for (uint32_t i = 0; i < lanes_.size(); ++i) {
        Lane& l = lanes_[i];
        if (!l.busy || l.done_at != next)
          continue;
        l.busy = false;
        const Arrival a = session_->Arrive(
            i, l.current, kNoTime, std::make_unique<FakePayload>(l.current));
        arrived_at_[l.current] = next;
        ASSERT_EQ(a.status, ArrivalStatus::kAccepted);
        session_->OnPushed(i, l.current, PushOutcome::kDelivered);
        last_completion_ns_ = next;
        StartIfIdle(i);
      }
      ReadyBatch batch = session_->TakeReady();
      for (Released& r : batch.items) {
        ASSERT_NE(r.payload, nullptr);
        ASSERT_EQ(static_cast<FakePayload *>(r.payload.get())->seq,
                  released_.size());
        released_.push_back(r.seq);
        waits_.push_back(clock_->NowNs() - arrived_at_[r.seq]);
      }
    }
  }

  // Items dispatched to each lane among dispatches [from, to).
  std::vector<int> Shares(size_t from, size_t to) const {
    std::vector<int> count(lanes_.size(), 0);
    for (size_t i = from; i < to && i < dispatch_lane_.size(); ++i)
      count[dispatch_lane_[i]]++;
    return count;
  }

  int64_t last_completion_ns() const { return last_completion_ns_; }
  // How long released items waited in the reorder window: the p-th
  // percentile (nearest rank).
  int64_t WaitPercentile(double p) const {
    std::vector<int64_t> w = waits_;
    std::sort(w.begin(), w.end());
    const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * w.size()));
    return w.empty() ? 0 : w[std::max<size_t>(rank, 1) - 1];
  }
  Session& session() { return *session_; }

 private:
  struct Lane {
    int64_t service_ns = 0;
    std::deque<uint64_t> queue;
    bool busy = false;
    uint64_t current = 0;
    int64_t done_at = 0;
    uint64_t started = 0;
  };

  void StartIfIdle(uint32_t lane) {
    Lane& l = lanes_[lane];
    if (l.busy || l.queue.empty())
      return;
    l.current = l.queue.front();
    l.queue.pop_front();
    l.busy = true;
    session_->MarkStarted(lane, l.current);
    const int64_t t = fn_ ? fn_(lane, l.started) : l.service_ns;
    l.started++;
    l.done_at = clock_->NowNs() + t;
  }

  std::shared_ptr<ManualClock> clock_;
  ServiceFn fn_;
  std::shared_ptr<Session> session_;
  std::vector<Lane> lanes_;
  std::vector<uint32_t> dispatch_lane_;
  std::vector<uint64_t> released_;
  std::map<uint64_t, int64_t> arrived_at_;  // seq -> when it came back
  std::vector<int64_t> waits_;              // per released item
  int64_t last_completion_ns_ = 0;
};

TEST(AdaptiveSimulation, SharesFollowSpeedAndThroughputIsNearCapacity) {
  Simulation sim(Policy::kAdaptive, {2 * kMs, 4 * kMs, 8 * kMs});
  const uint64_t total = 700;
  sim.Run(total);
  const std::vector<int> shares = sim.Shares(0, total);
  // Capacities 1/2 : 1/4 : 1/8 per ms = 4 : 2 : 1 -> 400 : 200 : 100.
  EXPECT_NEAR(shares[0], 400, 20);
  EXPECT_NEAR(shares[1], 200, 20);
  EXPECT_NEAR(shares[2], 100, 20);
  const double capacity_per_ms = 1.0 / 2 + 1.0 / 4 + 1.0 / 8;
  const double achieved_per_ms =
      static_cast<double>(total) /
      (static_cast<double>(sim.last_completion_ns()) / kMs);
  EXPECT_GE(achieved_per_ms, 0.95 * capacity_per_ms);
  const SessionStats stats = sim.session().Stats();
  EXPECT_EQ(stats.released, total);
  EXPECT_EQ(stats.in_flight, 0u);
  EXPECT_EQ(stats.lanes[0].service_ns, 2 * kMs);
  EXPECT_EQ(stats.lanes[1].service_ns, 4 * kMs);
  EXPECT_EQ(stats.lanes[2].service_ns, 8 * kMs);
}

TEST(AdaptiveSimulation, ReorderWaitStaysBelowTheSlowestServiceTime) {
  Simulation sim(Policy::kAdaptive, {2 * kMs, 4 * kMs, 8 * kMs});
  sim.Run(700);
  EXPECT_LE(sim.WaitPercentile(99), 8 * kMs);
}

TEST(AdaptiveSimulation, UsesTheSlowLaneOfATenfoldPair) {
  // Capacities 1/1 + 1/10 per ms: the 10 ms lane adds a tenth, which the
  // default limits let it add (it takes an item whenever it is idle).
  Simulation sim(Policy::kAdaptive, {1 * kMs, 10 * kMs});
  const uint64_t total = 1100;
  sim.Run(total);
  const std::vector<int> shares = sim.Shares(0, total);
  EXPECT_NEAR(shares[1], 100, 10);
  const double achieved_per_ms =
      static_cast<double>(total) /
      (static_cast<double>(sim.last_completion_ns()) / kMs);
  EXPECT_GE(achieved_per_ms, 0.95 * 1.1);
  EXPECT_LE(sim.WaitPercentile(99), 10 * kMs);
}

TEST(AdaptiveSimulation, RebalancesWhenALaneSlowsDown) {
  // Three equal 4 ms lanes; lane 0 becomes 4x slower from its 90th item on,
  // around dispatch 270.
  bool slowed = false;
  Simulation sim(Policy::kAdaptive, {4 * kMs, 4 * kMs, 4 * kMs},
                 [&](uint32_t lane, uint64_t started) {
                   if (lane == 0 && started >= 90) {
                     slowed = true;
                     return 16 * kMs;
                   }
                   return 4 * kMs;
                 });
  sim.Run(300);
  ASSERT_TRUE(slowed);
  const std::vector<int> before = sim.Shares(0, 270);
  EXPECT_NEAR(before[0], 90, 3);
  sim.Run(700);
  // Within 50 items of the change the lane's share has dropped to about its
  // capacity share: 1/16 / (1/16 + 2/4) = 1/9.
  const std::vector<int> after = sim.Shares(320, 700);
  EXPECT_LE(after[0], 380 * 0.16);
  EXPECT_GE(after[0], 380 * 0.06);
}

TEST(AdaptiveSimulation, IdleCapacityGoesToTheFastestLane) {
  // Upstream delivers an item every 3 ms; the 2 ms lane alone keeps up.
  Simulation adaptive(Policy::kAdaptive, {8 * kMs, 2 * kMs});
  adaptive.Run(200, 3 * kMs);
  const std::vector<int> shares = adaptive.Shares(10, 200);
  EXPECT_GE(shares[1], 190 * 0.95);

  // Round-robin sends half of them to the slow lane.
  Simulation rr(Policy::kRoundRobin, {8 * kMs, 2 * kMs});
  rr.Run(200, 3 * kMs);
  EXPECT_EQ(rr.Shares(0, 200)[0], 100);
}

}  // namespace
}  // namespace gpufan

namespace gpufan {
namespace {

// Session::PolicyTurnsUnlocked bisects for the moment the adaptive policy stops
// waiting for a full lane: between events its answer must turn once, from
// kWait to a lane, and stay turned. A fast lane full (queue of 4, its head
// running since 0) and a slow idle lane, asked at every 10 µs up to the fast
// lane's stop-waiting moment.
TEST(AdaptiveWait, BetweenEventsTheAnswerTurnsAtMostOnce) {
  for (int64_t slow : {2'000'000, 5'000'000, 20'000'000}) {
    for (uint32_t room : {1u, 4u, 16u}) {
      SCOPED_TRACE("slow lane " + std::to_string(slow) + " ns, room " +
                   std::to_string(room));
      LaneLoad fast;
      fast.lane = 0;
      fast.has_room = false;
      fast.outstanding = 4;
      fast.service_ns = 1'000'000;
      fast.head_started_ns = 0;
      LaneLoad idle;
      idle.lane = 1;
      idle.service_ns = slow;
      const std::vector<LaneLoad> loads{fast, idle};
      const int64_t stop = Scheduler::StopWaitingAtNs(0, fast.service_ns);
      int turns = 0;
      bool waiting = true;
      for (int64_t t = 0; t <= stop; t += 10'000) {
        Scheduler s(Policy::kAdaptive);
        const bool waits = s.Choose(loads, t, room).status == PickStatus::kWait;
        if (waits != waiting) {
          turns++;
          waiting = waits;
        }
        EXPECT_FALSE(waits && turns > 0) << "waits again at " << t;
      }
      EXPECT_EQ(turns, 1) << "the slow lane never got the item before " << stop
                          << " ns";
    }
  }
}

TEST(LaneQueue, QueueSizeUnlessTheLaneIsOfMicroseconds) {
  constexpr int64_t kUs = 1000;
  // Not measured yet, or a lane of milliseconds: queue-size.
  EXPECT_EQ(Scheduler::LaneQueueLimit(4, 0), 4u);
  EXPECT_EQ(Scheduler::LaneQueueLimit(4, 1000 * kUs), 4u);
  EXPECT_EQ(Scheduler::LaneQueueLimit(4, 40 * kUs * 1000), 4u);
  // Deeper while the queue holds under kQueueHorizonNs (2 ms) of work...
  EXPECT_EQ(Scheduler::LaneQueueLimit(4, 200 * kUs), 10u);
  EXPECT_EQ(Scheduler::LaneQueueLimit(4, 250 * kUs), 8u);
  // ...at most kFastLaneQueueFactor times queue-size.
  EXPECT_EQ(Scheduler::LaneQueueLimit(4, 1 * kUs), 16u);
  EXPECT_EQ(Scheduler::LaneQueueLimit(1, 1), 4u);
  EXPECT_EQ(Scheduler::LaneQueueLimit(1024, 1), 4096u);
}

}  // namespace
}  // namespace gpufan
