// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: item lifecycle, drop inference, stall handling, admission,
// flushing, lanes coming and going. Time is a ManualClock throughout.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpufan/session.h"
#include "lane-stats.h"
#include "tag-payload.h"

namespace gpufan {
namespace {

constexpr int64_t kMs = 1'000'000;

using Strings = std::vector<std::string>;

// "text@seq" for items, "-@seq" for empty entries, "text@e" for attachments.
Strings Describe(const std::vector<Released>& items) {
  Strings d;
  for (const Released& r : items) {
    std::string s = TagText(r);
    s += "@" + (r.lane == kNoLane ? std::string("e") : std::to_string(r.seq));
    d.push_back(s);
  }
  return d;
}

class SessionTest : public ::testing::Test {
 protected:
  void Make(SessionConfig config = {}, int lanes = 2, bool claim = true) {
    config.stall_timeout_ns =
        config.stall_timeout_ns == SessionConfig{}.stall_timeout_ns
            ? 100 * kMs
            : config.stall_timeout_ns;
    session_ = Session::Create(config, clock_);
    for (int i = 0; i < lanes; ++i) {
      session_->AddLane(static_cast<uint32_t>(i), Device::Cpu(i));
      if (claim)
        session_->ClaimLane(static_cast<uint32_t>(i));
    }
  }

  // Adaptive, one claimed lane per entry of `gpus`: lane i on GPU gpus[i].
  void MakeGpuLanes(const std::vector<int>& gpus) {
    Make({}, 0);
    for (size_t i = 0; i < gpus.size(); ++i) {
      Device device;
      device.kind = DeviceKind::kCuda;
      device.index = gpus[i];
      device.name = "GPU " + std::to_string(gpus[i]);
      session_->AddLane(static_cast<uint32_t>(i), device);
      session_->ClaimLane(static_cast<uint32_t>(i));
    }
  }

  // Dispatches and starts one item; expects it on `lane`.
  Dispatch Send(uint32_t lane, int64_t pts = kNoTime) {
    const std::optional<Dispatch> d = session_->TryDispatchItem(pts);
    EXPECT_TRUE(d.has_value());
    if (!d)
      return {};
    EXPECT_EQ(d->status, DispatchStatus::kOk);
    EXPECT_EQ(d->lane, lane);
    session_->MarkStarted(d->lane, d->seq);
    return *d;
  }

  Strings Take() { return Describe(session_->TakeReady().items); }

  const LaneStats& Lane(const SessionStats& s, uint32_t lane) {
    return LaneOf(s, lane);
  }

  std::shared_ptr<ManualClock> clock_ =
      std::make_shared<ManualClock>(1000 * kMs);
  std::shared_ptr<Session> session_;
};

SessionConfig RoundRobin() {
  SessionConfig c;
  c.policy = Policy::kRoundRobin;
  return c;
}

TEST_F(SessionTest, IdsAreUniqueAndPositive) {
  auto a = Session::Create();
  auto b = Session::Create();
  EXPECT_GT(a->id(), 0u);
  EXPECT_NE(a->id(), b->id());
  EXPECT_GT(a->clock().NowNs(), 0);  // SteadyClock by default
}

TEST_F(SessionTest, ConfigurationIsSanitized) {
  Make();
  EXPECT_EQ(session_->policy(), Policy::kAdaptive);
  session_->SetPolicy(Policy::kWeighted);
  EXPECT_EQ(session_->policy(), Policy::kWeighted);
  EXPECT_EQ(session_->EffectiveMaxInFlight(), 2u * (4 + 2));
  session_->SetLaneQueueSize(0);
  EXPECT_EQ(session_->EffectiveMaxInFlight(), 2u * (1 + 2));
  session_->SetMaxInFlight(5);
  EXPECT_EQ(session_->EffectiveMaxInFlight(), 5u);
  session_->SetStallTimeout(-3);
  EXPECT_EQ(session_->stall_timeout_ns(), 1);
  EXPECT_TRUE(session_->HasLane(1));
  EXPECT_FALSE(session_->HasLane(2));
  EXPECT_TRUE(session_->IsLaneClaimed(0));
  EXPECT_FALSE(session_->IsLaneClaimed(7));
}

TEST_F(SessionTest, NoLanes) {
  Make({}, 0);
  EXPECT_EQ(session_->DispatchItem(0).status, DispatchStatus::kNoLanes);
  EXPECT_EQ(session_->TryDispatchItem(0)->status, DispatchStatus::kNoLanes);
  session_->AddLane(0, Device::Cpu(0));
  session_->SetLaneEligible(0, false);
  EXPECT_EQ(session_->DispatchItem(0).status, DispatchStatus::kNoLanes);
  session_->SetLaneEligible(0, true);
  EXPECT_EQ(session_->DispatchItem(0).status, DispatchStatus::kOk);
  // Weighted with only zero weights: no lane either.
  session_->SetPolicy(Policy::kWeighted);
  session_->SetLaneWeight(0, 0.0);
  EXPECT_EQ(session_->DispatchItem(0).status, DispatchStatus::kNoLanes);
}

TEST_F(SessionTest, InOrderRelease) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  const Dispatch c = Send(0);
  EXPECT_EQ(a.seq, 0u);
  EXPECT_EQ(b.seq, 1u);
  EXPECT_EQ(c.seq, 2u);
  EXPECT_TRUE(a.awaited);
  // Lane workers report their pushes; the fan-in completes awaited items.
  session_->OnPushed(0, a.seq, PushOutcome::kDelivered);
  session_->OnPushed(1, b.seq, PushOutcome::kDelivered);
  EXPECT_FALSE(session_->HoldsArrivedFrom(1));
  EXPECT_EQ(session_->Arrive(1, b.seq, kNoTime, P("b")).status,
            ArrivalStatus::kAccepted);
  EXPECT_TRUE(Take().empty());
  // b waits for a: a serialized query behind b on lane 1 must wait too.
  EXPECT_TRUE(session_->HoldsArrivedFrom(1));
  EXPECT_FALSE(session_->HoldsArrivedFrom(0));
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"a@0", "b@1"}));
  EXPECT_FALSE(session_->HoldsArrivedFrom(1));
  EXPECT_FALSE(session_->WindowEmpty());
  session_->Arrive(0, c.seq, kNoTime, P("c"));
  EXPECT_EQ(Take(), (Strings{"c@2"}));
  EXPECT_TRUE(session_->WindowEmpty());
  const SessionStats s = session_->Stats();
  EXPECT_EQ(s.dispatched, 3u);
  EXPECT_EQ(s.released, 3u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(Lane(s, 0).completed, 2u);
  EXPECT_EQ(Lane(s, 1).completed, 1u);
  EXPECT_EQ(Lane(s, 1).reorder_waits, 1u);
  EXPECT_EQ(Lane(s, 0).reorder_waits, 0u);
  EXPECT_EQ(s.window_peak, 3u);
}

TEST_F(SessionTest, FifoOrderProvesEarlierItemsDropped) {
  Make({}, 1);
  std::vector<Dispatch> d;
  for (int i = 0; i < 4; ++i) {
    d.push_back(Send(0, i * 40 * kMs));
    session_->OnPushed(0, d.back().seq, PushOutcome::kDelivered);
  }
  // The branch dropped items 0 and 1; item 2 comes out first.
  EXPECT_EQ(session_->Arrive(0, d[2].seq, kNoTime, P("c")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"-@0", "-@1", "c@2"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).dropped, 2u);
  EXPECT_EQ(Lane(s, 0).completed, 1u);
  EXPECT_EQ(Lane(s, 0).in_flight, 1u);
  EXPECT_EQ(s.in_flight, 1u);
  EXPECT_EQ(s.released, 3u);
  // A dropped item that shows up after all is late.
  EXPECT_EQ(session_->Arrive(0, d[0].seq, kNoTime, P("a")).status,
            ArrivalStatus::kLate);
  EXPECT_EQ(Lane(session_->Stats(), 0).late, 1u);
}

TEST_F(SessionTest, PtsMatchesWhenTheSequenceNumberIsLost) {
  Make({}, 1);
  for (int i = 0; i < 4; ++i)
    Send(0, i * 40 * kMs);
  // No meta: matched by pts; item 0 is proven dropped.
  Arrival a = session_->Arrive(0, std::nullopt, 40 * kMs, P("b"));
  EXPECT_EQ(a.status, ArrivalStatus::kAccepted);
  EXPECT_EQ(a.seq, 1u);
  // No meta and no usable pts: the lane's oldest.
  a = session_->Arrive(0, std::nullopt, kNoTime, P("c"));
  EXPECT_EQ(a.seq, 2u);
  // A pts nobody has: still the oldest (the branch retimed it).
  a = session_->Arrive(0, std::nullopt, 7, P("d"));
  EXPECT_EQ(a.seq, 3u);
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1", "c@2", "d@3"}));
  // Nothing outstanding: it cannot be placed, it leaves with the next release.
  a = session_->Arrive(0, std::nullopt, 0, P("x"));
  EXPECT_EQ(a.status, ArrivalStatus::kUnmatched);
  EXPECT_EQ(Take(), (Strings{"x@e"}));
  EXPECT_EQ(session_->Stats().unmatched, 1u);
}

TEST_F(SessionTest, UnmatchedLeavesBeforeThePendingHead) {
  Make({}, 1);
  const Dispatch a = Send(0);
  session_->LaneEnded(0);  // a is gone
  const Dispatch b = Send(0);
  EXPECT_EQ(session_->Arrive(0, 999, kNoTime, P("x")).status,
            ArrivalStatus::kUnmatched);
  // The head (dropped a) has not left yet: x goes right before it.
  EXPECT_EQ(Take(), (Strings{"x@e", "-@0"}));
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  EXPECT_EQ(Take(), (Strings{"b@1"}));
  EXPECT_EQ(a.seq, 0u);
}

TEST_F(SessionTest, StallTimeoutExpiresTheHead) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  EXPECT_TRUE(Take().empty());
  clock_->Advance(100 * kMs - 1);
  EXPECT_TRUE(Take().empty());
  clock_->Advance(1);
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1"}));
  SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).timed_out, 1u);
  EXPECT_EQ(Lane(s, 0).in_flight, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  // It comes back after all: late, dropped by the caller.
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kLate);
  s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).late, 1u);
  EXPECT_TRUE(Take().empty());
}

TEST_F(SessionTest, ExpiredItemWithoutMetaDoesNotTakeTheNextOnesPlace) {
  Make({}, 1);
  const Dispatch a = Send(0, 0);
  clock_->Advance(100 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@0"}));
  // The lane stalled; it is the only one, so it still gets the next item.
  const Dispatch b = Send(0, 40 * kMs);
  // a comes back without its meta: its pts marks it as the expired one
  // (and the lane answers again, so b is waited for as usual).
  const Arrival late = session_->Arrive(0, std::nullopt, 0, P("a"));
  EXPECT_EQ(late.status, ArrivalStatus::kLate);
  EXPECT_EQ(late.seq, a.seq);
  EXPECT_TRUE(Take().empty());
  const Arrival next = session_->Arrive(0, std::nullopt, 40 * kMs, P("b"));
  EXPECT_EQ(next.status, ArrivalStatus::kAccepted);
  EXPECT_EQ(next.seq, b.seq);
  EXPECT_EQ(Take(), (Strings{"b@1"}));
  EXPECT_EQ(Lane(session_->Stats(), 0).late, 1u);
}

TEST_F(SessionTest, StallClockStartsWhenAnItemBecomesHead) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  clock_->Advance(90 * kMs);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  EXPECT_EQ(Take(), (Strings{"a@0"}));
  // b was dispatched 90 ms ago but only became head now: a full timeout.
  clock_->Advance(99 * kMs);
  EXPECT_TRUE(Take().empty());
  clock_->Advance(1 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@1"}));
  EXPECT_EQ(b.seq, 1u);
}

// Chunk mode: a stalled lane's items that have not started are not given up
// behind the stalled one; the fan-out moves them to another lane, with their
// seq, and they leave in order. A started one cannot move.
TEST_F(SessionTest, AStalledLanesUnstartedItemsMoveInsteadOfExpiring) {
  Make(RoundRobin());
  session_->SetChunkMode(true);
  const Dispatch a = Send(0), b = Send(1);
  // queued, not started
  const Dispatch c = *session_->TryDispatchItem(kNoTime);
  const Dispatch d = Send(1);
  ASSERT_EQ(c.lane, 0u);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  clock_->Advance(100 * kMs);
  // a is given up and lane 0 stalls; c, not started, waits
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1"}));
  EXPECT_TRUE(session_->IsLaneStalled(0));
  EXPECT_EQ(session_->MoveUnstarted(a.seq, 0, {1}).status,
            DispatchStatus::kGone);
  const Dispatch mc = session_->MoveUnstarted(c.seq, 0, {0, 1});
  EXPECT_EQ(mc.status, DispatchStatus::kOk);
  EXPECT_EQ(mc.lane, 1u);
  EXPECT_EQ(mc.seq, c.seq);
  // lane 1 arrives d before c (c was queued behind it): c still comes
  session_->Arrive(1, d.seq, kNoTime, P("d"));
  EXPECT_EQ(Take(), Strings{});
  EXPECT_EQ(session_->Arrive(1, c.seq, kNoTime, P("c")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"c@2", "d@3"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).timed_out, 1u);
  EXPECT_EQ(Lane(s, 0).handed_over, 1u);
  EXPECT_EQ(Lane(s, 1).replayed, 1u);
  EXPECT_EQ(s.in_flight, 0u);
}

// Without it (frame mode), they go at once behind the stalled one.
TEST_F(SessionTest, AStalledLanesLaterItemsExpireAtOnceInFrameMode) {
  Make(RoundRobin());
  const Dispatch a = Send(0), b = Send(1);
  const Dispatch c = *session_->TryDispatchItem(kNoTime);
  ASSERT_EQ(a.lane, 0u);
  ASSERT_EQ(c.lane, 0u);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  clock_->Advance(100 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1", "-@2"}));
  EXPECT_EQ(session_->MoveUnstarted(c.seq, 0, {1}).status,
            DispatchStatus::kGone);
}

TEST_F(SessionTest, WaitOutputReturnsAtOnceWhenTheStallDeadlinePassed) {
  Make({}, 1);
  Send(0);
  const uint64_t gen = session_->TakeReady().generation;
  clock_->Advance(100 * kMs);
  session_->WaitOutput(gen, 3600LL * 1000 * kMs);  // would hang if it waited
  EXPECT_EQ(Take(), (Strings{"-@0"}));
}

TEST_F(SessionTest, WaitOutputWakesOnArrival) {
  Make({}, 1);
  const Dispatch a = Send(0);
  const uint64_t gen = session_->TakeReady().generation;
  std::thread arriver([&] { session_->Arrive(0, a.seq, kNoTime, P("a")); });
  // Returns once the generation moves (bounded by the long max wait anyway).
  session_->WaitOutput(gen, 60'000 * kMs);
  arriver.join();
  EXPECT_EQ(Take(), (Strings{"a@0"}));
  // An unchanged generation with a short bound just times out.
  const uint64_t gen2 = session_->TakeReady().generation;
  session_->WaitOutput(gen2, 1 * kMs);
  session_->WakeOutput();
  session_->WaitOutput(gen2, 60'000 * kMs);  // already moved: no wait
}

TEST_F(SessionTest, UnawaitedLanesNeverBlockTheWindow) {
  Make(RoundRobin(), 2, false);
  session_->ClaimLane(0);  // lane 1 has no fan-in: it is joining
  // While a claimed lane can take items, a joining one gets none (its first
  // item could not be ordered against the claimed lanes' items).
  const Dispatch a = Send(0);
  EXPECT_TRUE(a.lanes_joining);
  EXPECT_EQ(Lane(session_->Stats(), 1).state, LaneHealth::kJoining);
  const Dispatch c = Send(0);
  session_->Arrive(0, c.seq, kNoTime, P("c"));  // proves a dropped
  EXPECT_EQ(Take(), (Strings{"-@0", "c@1"}));
  // With the claimed lane gone, the joining one takes items, unawaited:
  // failures and drops count, nothing waits.
  session_->SetLaneEligible(0, false);
  const Dispatch b = Send(1);
  EXPECT_FALSE(b.awaited);
  session_->OnPushed(1, b.seq, PushOutcome::kDelivered);  // completes b
  const Dispatch d = Send(1);
  session_->OnPushed(1, d.seq, PushOutcome::kFailed);
  const Dispatch f = Send(1);
  session_->OnPushed(1, f.seq, PushOutcome::kDropped);
  SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 1).completed, 1u);
  EXPECT_EQ(Lane(s, 1).failed, 1u);
  EXPECT_EQ(Lane(s, 1).dropped, 1u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.window_occupancy, 0u);
}

TEST_F(SessionTest, ArrivalOfAnItemDispatchedBeforeTheClaim) {
  Make({}, 1, false);
  const Dispatch a = Send(0);
  EXPECT_FALSE(a.awaited);
  session_->OnPushed(0, a.seq, PushOutcome::kDelivered);
  session_->ClaimLane(0);
  const Dispatch b = Send(0);
  EXPECT_TRUE(b.awaited);
  // A synchronous branch: b arrives inside its push; then a, via a queue.
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  EXPECT_EQ(Take(), (Strings{"b@1"}));
  // a is older than b, which is out: it can only be dropped, never follow.
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kLate);
  EXPECT_TRUE(Take().empty());
}

TEST_F(SessionTest, AnItemDispatchedBeforeTheClaimLeavesInItsTurn) {
  Make({}, 1, false);
  const Dispatch a = Send(0);
  session_->OnPushed(0, a.seq, PushOutcome::kDelivered);
  session_->ClaimLane(0);
  const Dispatch b = Send(0);
  // b is awaited and not back yet; a (never awaited) comes first: it takes
  // its place ahead of b and leaves at once, b after it.
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"a@e"}));
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  EXPECT_EQ(Take(), (Strings{"b@1"}));
}

TEST_F(SessionTest, UnawaitedItemArrivingInsideItsPush) {
  Make({}, 1, false);
  const Dispatch a = Send(0);
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kAccepted);
  session_->OnPushed(0, a.seq, PushOutcome::kDelivered);  // already complete
  EXPECT_EQ(Take(), (Strings{"a@e"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).completed, 1u);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST_F(SessionTest, FailedAndDroppedPushesOfAwaitedItems) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  const Dispatch c = Send(0);
  session_->OnPushed(0, a.seq, PushOutcome::kFailed);
  session_->OnPushed(1, b.seq, PushOutcome::kDropped);
  session_->OnPushed(0, c.seq, PushOutcome::kDelivered);
  session_->Arrive(0, c.seq, kNoTime, P("c"));
  EXPECT_EQ(Take(), (Strings{"-@0", "-@1", "c@2"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).failed, 1u);
  EXPECT_EQ(Lane(s, 1).dropped, 1u);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST_F(SessionTest, SeveralBuffersForOneItemCountOnce) {
  Make({}, 1);
  const Dispatch a = Send(0);
  session_->Arrive(0, a.seq, kNoTime, P("a1"));
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a2")).status,
            ArrivalStatus::kAccepted);
  EXPECT_EQ(Take(), (Strings{"a1@0", "a2@0"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(s.released, 1u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(Lane(s, 0).completed, 1u);
  // One more after it left: late.
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a3")).status,
            ArrivalStatus::kLate);
}

TEST_F(SessionTest, AdmissionIsBoundedByInFlight) {
  SessionConfig c = RoundRobin();
  c.max_in_flight = 3;
  Make(c);
  // Dispatched, not started: the lane workers are busy.
  const Dispatch a = *session_->TryDispatchItem(0);
  const Dispatch b = *session_->TryDispatchItem(0);
  session_->TryDispatchItem(0);
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
  // b arrives but cannot leave before a: still in flight.
  session_->MarkStarted(1, b.seq);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  EXPECT_TRUE(Take().empty());
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
  session_->MarkStarted(0, a.seq);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  EXPECT_EQ(Take(), (Strings{"a@0", "b@1"}));
  EXPECT_TRUE(session_->TryDispatchItem(0).has_value());
  EXPECT_TRUE(session_->TryDispatchItem(0).has_value());
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
  EXPECT_EQ(session_->Stats().max_in_flight, 3u);
}

TEST_F(SessionTest, FullWindowProbesTheIdleLaneOfItsHead) {
  SessionConfig c = RoundRobin();
  c.max_in_flight = 2;
  c.lane_queue_size = 2;
  Make(c);
  const Dispatch a = Send(0);  // its branch drops it
  const Dispatch b = Send(1);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  EXPECT_TRUE(Take().empty());
  // Full, and lane 0 is idle with only the head outstanding: one more item
  // goes to lane 0 whatever the policy says, since only it can prove the drop.
  std::optional<Dispatch> probe = session_->TryDispatchItem(0);
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ(probe->lane, 0u);
  // Not started yet: no further probe.
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
  session_->MarkStarted(0, probe->seq);
  // The probe was dropped as well: one more, then the lane is at its bound
  // (lane_queue_size + 1 outstanding).
  std::optional<Dispatch> probe2 = session_->TryDispatchItem(0);
  ASSERT_TRUE(probe2.has_value());
  EXPECT_EQ(probe2->lane, 0u);
  session_->MarkStarted(0, probe2->seq);
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
  EXPECT_EQ(Lane(session_->Stats(), 0).in_flight, 3u);
  // The second probe comes out: the head and the first probe were dropped.
  session_->Arrive(0, probe2->seq, kNoTime, P("p"));
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1", "-@2", "p@3"}));
  EXPECT_EQ(session_->Stats().in_flight, 0u);
  EXPECT_EQ(a.seq, 0u);
}

TEST_F(SessionTest, NoProbeWhileTheHeadLaneHasQueuedWork) {
  SessionConfig c = RoundRobin();
  c.max_in_flight = 2;
  Make(c);
  session_->TryDispatchItem(0);  // lane 0, not started
  const Dispatch b = Send(1);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
}

TEST_F(SessionTest, AdmissionIsBoundedByLaneQueues) {
  SessionConfig c;
  c.lane_queue_size = 2;
  Make(c, 1);
  const Dispatch a = *session_->TryDispatchItem(0);
  session_->TryDispatchItem(0);
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
  EXPECT_EQ(Lane(session_->Stats(), 0).queued, 2u);
  session_->MarkStarted(0, a.seq);  // the worker took one
  EXPECT_TRUE(session_->TryDispatchItem(0).has_value());
  EXPECT_FALSE(session_->TryDispatchItem(0).has_value());
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).queued, 2u);
  EXPECT_EQ(Lane(s, 0).in_flight, 3u);
}

// A lane of microseconds queues more than queue-size (a hand-over per item
// would cost as much as the item); one of milliseconds does not. The
// automatic in-flight bound follows.
TEST_F(SessionTest, ALaneOfMicrosecondsQueuesDeeper) {
  for (const int64_t service : {int64_t{10'000}, int64_t{500'000}, kMs}) {
    SessionConfig c = RoundRobin();
    c.lane_queue_size = 2;
    Make(c, 1);
    EXPECT_EQ(Lane(session_->Stats(), 0).queue_limit, 2u) << "not measured";
    const Dispatch a = Send(0);
    clock_->Advance(service);
    session_->Arrive(0, a.seq, kNoTime, P("a"));
    session_->TakeReady();
    uint32_t queued = 0;
    while (session_->TryDispatchItem(0).has_value())
      queued++;
    // 10 us: 2 ms of work is 200 items, 4 x queue-size at most; 0.5 ms: 4
    // items; 1 ms: queue-size.
    const uint32_t expected = service == kMs ? 2u : service == 10'000 ? 8u : 4u;
    EXPECT_EQ(queued, expected) << "service " << service << " ns";
    const SessionStats s = session_->Stats();
    EXPECT_EQ(Lane(s, 0).queue_limit, expected);
    EXPECT_EQ(s.max_in_flight, expected + 2u);
  }
}

TEST_F(SessionTest, FlushingWakesABlockedDispatch) {
  SessionConfig c;
  c.max_in_flight = 1;
  Make(c, 1);
  // Not started: the lane is busy, so nothing may go past the limit.
  session_->TryDispatchItem(0);
  auto blocked =
      std::async(std::launch::async, [&] { return session_->DispatchItem(0); });
  // Give it a chance to block; correctness does not depend on it.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  session_->SetFlushing(true);
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  EXPECT_EQ(blocked.get().status, DispatchStatus::kFlushing);
  EXPECT_TRUE(session_->flushing());
  EXPECT_EQ(session_->TryDispatchItem(0)->status, DispatchStatus::kFlushing);
  session_->SetFlushing(false);
  session_->Reset();
  EXPECT_EQ(session_->DispatchItem(0).status, DispatchStatus::kOk);
}

TEST_F(SessionTest, CompletionWakesABlockedDispatch) {
  SessionConfig c;
  c.max_in_flight = 1;
  Make(c, 1);
  // Not started: the lane is busy, so nothing may go past the limit.
  const Dispatch a = *session_->TryDispatchItem(0);
  auto blocked =
      std::async(std::launch::async, [&] { return session_->DispatchItem(0); });
  session_->MarkStarted(0, a.seq);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  session_->TakeReady();
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  const Dispatch b = blocked.get();
  EXPECT_EQ(b.status, DispatchStatus::kOk);
  EXPECT_EQ(b.seq, 1u);
}

TEST_F(SessionTest, RemovingTheLastLaneWakesABlockedDispatch) {
  SessionConfig c;
  c.max_in_flight = 1;
  Make(c, 1);
  // Not started: the lane is busy, so nothing may go past the limit.
  session_->TryDispatchItem(0);
  auto blocked =
      std::async(std::launch::async, [&] { return session_->DispatchItem(0); });
  session_->RemoveLane(0);
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  EXPECT_EQ(blocked.get().status, DispatchStatus::kNoLanes);
}

TEST_F(SessionTest, ResetForgetsItemsButKeepsCountersAndSequence) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  session_->AttachBefore(5, P("event"));
  session_->Reset();
  SessionStats s = session_->Stats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.window_occupancy, 0u);
  EXPECT_EQ(s.dispatched, 2u);
  EXPECT_EQ(Lane(s, 1).completed, 1u);
  EXPECT_EQ(Lane(s, 0).in_flight, 0u);
  EXPECT_EQ(Lane(s, 0).queued, 0u);
  EXPECT_TRUE(Take().empty());
  EXPECT_TRUE(session_->WindowEmpty());
  // Workers still finishing old items are ignored; old arrivals are late.
  session_->OnPushed(0, a.seq, PushOutcome::kDelivered);
  session_->MarkStarted(0, a.seq);
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a")).status,
            ArrivalStatus::kLate);
  const Dispatch c = Send(0);
  EXPECT_EQ(c.seq, 2u);
  session_->Arrive(0, c.seq, kNoTime, P("c"));
  EXPECT_EQ(Take(), (Strings{"c@2"}));
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

TEST_F(SessionTest, EventPositions) {
  Make(RoundRobin());
  EXPECT_FALSE(session_->EventPosition(1).has_value());
  EXPECT_EQ(session_->MarkEventPosition(1), 0u);
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  EXPECT_EQ(session_->MarkEventPosition(2), 2u);
  const Dispatch c = Send(0);
  EXPECT_EQ(session_->EventPosition(1), 0u);
  EXPECT_EQ(session_->EventPosition(2), 2u);
  // The fan-in places events at their positions.
  session_->AttachBefore(*session_->EventPosition(2), P("caps"));
  session_->AttachBefore(*session_->EventPosition(1), P("segment"));
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  session_->Arrive(0, c.seq, kNoTime, P("c"));
  EXPECT_EQ(Take(), (Strings{"segment@e", "a@0", "b@1", "caps@e", "c@2"}));
  // Only the last 64 are kept.
  for (uint32_t key = 100; key < 200; ++key)
    session_->MarkEventPosition(key);
  EXPECT_FALSE(session_->EventPosition(1).has_value());
  EXPECT_FALSE(session_->EventPosition(135).has_value());
  EXPECT_EQ(session_->EventPosition(136), 3u);
  EXPECT_EQ(session_->EventPosition(199), 3u);
}

TEST_F(SessionTest, EventAfterEverythingLeavesAfterTheLastItem) {
  Make({}, 1);
  const Dispatch a = Send(0);
  session_->AttachBefore(session_->MarkEventPosition(9), P("eos"));
  EXPECT_TRUE(Take().empty());
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  EXPECT_EQ(Take(), (Strings{"a@0", "eos@e"}));
}

TEST_F(SessionTest, RemoveLaneWithOutstandingItems) {
  Make(RoundRobin(), 3);
  std::vector<Dispatch> d;
  for (int i = 0; i < 6; ++i)
    d.push_back(Send(static_cast<uint32_t>(i % 3)));
  session_->Arrive(0, d[0].seq, kNoTime, P("a"));
  session_->Arrive(2, d[2].seq, kNoTime, P("c"));
  session_->RemoveLane(1);
  EXPECT_FALSE(session_->HasLane(1));
  EXPECT_EQ(Take(), (Strings{"a@0", "-@1", "c@2"}));
  session_->Arrive(0, d[3].seq, kNoTime, P("d"));
  session_->Arrive(2, d[5].seq, kNoTime, P("f"));
  EXPECT_EQ(Take(), (Strings{"d@3", "-@4", "f@5"}));
  SessionStats s = session_->Stats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.lanes.size(), 2u);
  // A late arrival on the removed lane is refused.
  EXPECT_EQ(session_->Arrive(1, d[1].seq, kNoTime, P("b")).status,
            ArrivalStatus::kLate);
  // The turn continues over the remaining lanes.
  EXPECT_EQ(Send(0).seq, 6u);
  EXPECT_EQ(Send(2).seq, 7u);
  EXPECT_EQ(Send(0).seq, 8u);
}

TEST_F(SessionTest, LaneEndedDropsItsOutstandingItems) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  const Dispatch c = Send(0);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  session_->LaneEnded(0);
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1", "-@2"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).dropped, 2u);
  EXPECT_EQ(Lane(s, 0).queued, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(a.seq + c.seq, 2u);
}

// on-lane-error=drop-lane: the item inside the failed push counts as failed,
// what the lane had behind it as dropped; the lane gets no items, shows as
// failed, survives a flush (Reset), and is back once the fan-out says so.
TEST_F(SessionTest, AFailedLaneGivesUpItsItemsAndTakesNoMore) {
  Make(RoundRobin());
  const Dispatch a = Send(0);  // inside its push (MarkStarted)
  const Dispatch b = Send(1);
  const Dispatch c = Send(0);  // queued behind a
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  session_->SetLaneFailed(0, true);
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1", "-@2"}));
  SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).state, LaneHealth::kFailed);
  EXPECT_EQ(Lane(s, 0).failed + Lane(s, 0).dropped, 2u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(a.seq + c.seq, 2u);
  // Every item goes to lane 1 now, a flush included.
  EXPECT_EQ(Send(1).seq, 3u);
  session_->Reset();
  EXPECT_EQ(Lane(session_->Stats(), 0).state, LaneHealth::kFailed);
  EXPECT_EQ(Send(1).lane, 1u);
  session_->SetLaneFailed(0, false);
  EXPECT_NE(Lane(session_->Stats(), 0).state, LaneHealth::kFailed);
}

TEST_F(SessionTest, AnOutputFailureIsNotedUntilReset) {
  Make(RoundRobin());
  EXPECT_FALSE(session_->output_failed());
  session_->NoteOutputFailed();
  EXPECT_TRUE(session_->output_failed());
  session_->Reset();
  EXPECT_FALSE(session_->output_failed());
}

// Replay: a failed lane's items go to other lanes and leave in order.
TEST_F(SessionTest, AFailedLanesItemsAreSentAgainAndLeaveInOrder) {
  Make(RoundRobin(), 3);
  const Dispatch a = Send(0), b = Send(1), c = Send(2), d = Send(0),
                 e = Send(1);
  const std::vector<ReplayItem> replay = session_->FailLaneForReplay(0);
  ASSERT_EQ(replay.size(), 2u);
  EXPECT_EQ(replay[0].seq, a.seq);
  EXPECT_EQ(replay[1].seq, d.seq);
  // The soonest to finish: lane 2 holds one item, lane 1 two.
  const Dispatch ra = session_->Redispatch(a.seq, 0, kNoTime, {1, 2});
  EXPECT_EQ(ra.status, DispatchStatus::kOk);
  EXPECT_EQ(ra.lane, 2u);
  // Not to a failed lane, even when allowed.
  const Dispatch rd = session_->Redispatch(d.seq, 0, kNoTime, {0, 1});
  EXPECT_EQ(rd.lane, 1u);
  EXPECT_TRUE(session_->MarkStarted(2, a.seq));
  EXPECT_TRUE(session_->MarkStarted(1, d.seq));
  // What the failed lane still returns is late: its copy comes elsewhere.
  EXPECT_EQ(session_->Arrive(0, a.seq, kNoTime, P("a0")).status,
            ArrivalStatus::kLate);
  // c and e were queued before the replayed items: their arrival proves
  // nothing about them, and e's proves b (pushed before e) dropped.
  session_->Arrive(2, c.seq, kNoTime, P("c"));
  session_->Arrive(1, e.seq, kNoTime, P("e"));
  EXPECT_EQ(Take(), Strings{});
  session_->Arrive(2, a.seq, kNoTime, P("a"));
  session_->Arrive(1, d.seq, kNoTime, P("d"));
  EXPECT_EQ(Take(), (Strings{"a@0", "-@1", "c@2", "d@3", "e@4"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).state, LaneHealth::kFailed);
  EXPECT_EQ(Lane(s, 0).handed_over, 2u);
  EXPECT_EQ(Lane(s, 0).late, 1u);
  EXPECT_EQ(Lane(s, 1).replayed, 1u);
  EXPECT_EQ(Lane(s, 2).replayed, 1u);
  EXPECT_EQ(Lane(s, 1).dropped, 1u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(b.seq, 1u);
}

// The fan-out queues a replayed item ahead of the lane's own: the marker
// behind it proves only it, and a marker behind one of the lane's own items
// proves no replayed item (it may be pushed later).
TEST_F(SessionTest, MarkersProveReplayedItemsOnlyByTheirOwnMarker) {
  Make(RoundRobin(), 3);
  const Dispatch a = Send(0), b = Send(1), c = Send(2), d = Send(0);
  EXPECT_EQ(b.seq, 1u);
  session_->FailLaneForReplay(0);
  EXPECT_EQ(session_->Redispatch(d.seq, 0, kNoTime, {1}).lane, 1u);
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {1}).lane, 1u);
  const Dispatch e = Send(1);
  // d goes first, ahead of b: its marker proves d alone.
  EXPECT_TRUE(session_->MarkStarted(1, d.seq));
  EXPECT_TRUE(session_->OnPushed(1, d.seq, PushOutcome::kDelivered));
  session_->ProveLane(1, d.seq);
  session_->Arrive(2, c.seq, kNoTime, P("c"));
  EXPECT_EQ(Take(), (Strings{}));  // a and b are pending
  EXPECT_EQ(Lane(session_->Stats(), 1).dropped, 1u);
  session_->ProveLane(1, e.seq);  // e's marker: b was pushed before e, a not
  EXPECT_EQ(Take(), (Strings{}));
  EXPECT_EQ(Lane(session_->Stats(), 1).dropped, 3u);
  session_->ProveLane(1, a.seq);
  EXPECT_EQ(Take(), (Strings{"-@0", "-@1", "c@2", "-@3", "-@4"}));
  EXPECT_EQ(Lane(session_->Stats(), 1).dropped, 4u);
}

TEST_F(SessionTest, AReplayWithNowhereToGoIsGivenUp) {
  Make(RoundRobin(), 2);
  const Dispatch a = Send(0), b = Send(1);
  session_->FailLaneForReplay(0);
  session_->FailLaneForReplay(1);
  // Nothing allowed, or only failed lanes: no lane.
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {}).status,
            DispatchStatus::kNoLanes);
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {0, 1}).status,
            DispatchStatus::kNoLanes);
  session_->GiveUpReplay(0, a.seq);
  session_->GiveUpReplay(1, b.seq);
  EXPECT_EQ(Take(), (Strings{"-@0", "-@1"}));
  // Once it left, a replay of it is refused as gone.
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {0, 1}).status,
            DispatchStatus::kGone);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

// A lane that could not queue its replayed item: sent again elsewhere, the
// item moves (the first lane's queue count goes back).
TEST_F(SessionTest, ARedispatchedItemMoves) {
  Make(RoundRobin(), 3);
  const Dispatch a = Send(0);
  session_->FailLaneForReplay(0);
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {1}).lane, 1u);
  EXPECT_EQ(session_->Redispatch(a.seq, 1, kNoTime, {2}).lane, 2u);
  SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 1).queued, 0u);
  EXPECT_EQ(Lane(s, 1).replayed, 0u);
  EXPECT_EQ(Lane(s, 2).queued, 1u);
  session_->Arrive(2, a.seq, kNoTime, P("a"));
  EXPECT_EQ(Take(), (Strings{"a@0"}));
}

// Two threads send one item on: the one whose lane failed under it (B)
// takes it over; the other (A), whose chosen lane refused it, finds it no
// longer its own and leaves it be. Nothing goes out twice.
TEST_F(SessionTest, OnlyTheHolderOfAReplayedItemSendsItOn) {
  Make(RoundRobin(), 3);
  const Dispatch a = Send(0);
  session_->FailLaneForReplay(0);
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {1}).lane, 1u);  // A
  const std::vector<ReplayItem> b = session_->FailLaneForReplay(1);  // B
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(session_->Redispatch(a.seq, 1, kNoTime, {2}).lane, 2u);
  // A's lane 1 refused it (failed): A tries to move it on.
  EXPECT_EQ(session_->Redispatch(a.seq, 1, kNoTime, {2}).status,
            DispatchStatus::kGone);
  EXPECT_EQ(Lane(session_->Stats(), 2).queued, 1u);
  session_->Arrive(2, a.seq, kNoTime, P("a"));
  EXPECT_EQ(Take(), (Strings{"a@0"}));
}

// A frame whose push fails on the lane it was sent again to is given up:
// one bad frame must not take every lane out in turn.
TEST_F(SessionTest, AReplayedItemThatFailsASecondLaneIsGivenUp) {
  Make(RoundRobin(), 3);
  const Dispatch a = Send(0);
  session_->FailLaneForReplay(0);
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {1}).lane, 1u);
  EXPECT_TRUE(session_->MarkStarted(1, a.seq));  // inside lane 1's push
  EXPECT_TRUE(session_->FailLaneForReplay(1).empty());
  EXPECT_EQ(Take(), (Strings{"-@0"}));
  EXPECT_EQ(Lane(session_->Stats(), 1).failed, 1u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

// on-stall=replay: a head that waited stall-timeout fails its lane instead
// of being given up; the listener is told, and the lane's items go on
// elsewhere with a fresh timeout. Nobody taking it over: given up after
// one more timeout.
TEST_F(SessionTest, AStalledLaneFailsAndItsHeadWaitsForItsReplay) {
  SessionConfig config = RoundRobin();
  config.stall_fails_lane = true;
  Make(config, 2);
  std::vector<uint32_t> told;
  session_->SetStallListener([&told](uint32_t lane) { told.push_back(lane); });
  const Dispatch a = Send(0), b = Send(1), c = Send(0);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  clock_->Advance(150 * kMs);
  EXPECT_EQ(Take(), Strings{});
  EXPECT_EQ(told, std::vector<uint32_t>{0});
  EXPECT_TRUE(session_->IsLaneFailed(0));
  const std::vector<ReplayItem> replay = session_->FailLaneForReplay(0);
  ASSERT_EQ(replay.size(), 2u);
  clock_->Advance(90 * kMs);
  EXPECT_EQ(session_->Redispatch(a.seq, 0, kNoTime, {1}).lane, 1u);
  EXPECT_EQ(session_->Redispatch(c.seq, 0, kNoTime, {1}).lane, 1u);
  clock_->Advance(90 * kMs);  // the replayed head got a whole timeout
  EXPECT_EQ(Take(), Strings{});
  session_->Arrive(1, a.seq, kNoTime, P("a"));
  session_->Arrive(1, c.seq, kNoTime, P("c"));
  EXPECT_EQ(Take(), (Strings{"a@0", "b@1", "c@2"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).stalls, 1u);
  EXPECT_EQ(Lane(s, 0).timed_out, 0u);

  // Nobody replays: the head waits one more timeout, then is given up.
  Make(config, 2);
  Send(0);
  clock_->Advance(150 * kMs);
  EXPECT_EQ(Take(), Strings{});
  clock_->Advance(150 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@0"}));
}

TEST_F(SessionTest, UnclaimedLaneIsNoLongerAwaited) {
  Make(RoundRobin());
  Send(0);  // seq 0, awaited, never comes back
  const Dispatch b = Send(1);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  session_->UnclaimLane(0);  // its fan-in pad was released
  EXPECT_FALSE(session_->IsLaneClaimed(0));
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1"}));
  // Lane 1 is still claimed: lane 0 gets no items until it is claimed again.
  const Dispatch d = Send(1);
  session_->Arrive(1, d.seq, kNoTime, P("d"));
  EXPECT_EQ(Take(), (Strings{"d@2"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).dropped, 1u);
  EXPECT_EQ(Lane(s, 0).state, LaneHealth::kJoining);
  EXPECT_EQ(s.in_flight, 0u);
  // Claimed again, the lane gets items, awaited.
  session_->ClaimLane(0);
  const Dispatch e = Send(0);
  EXPECT_TRUE(e.awaited);
}

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

// --------------------------------------------------- hostile branches ---

TEST_F(SessionTest, OnPushedAsksForAMarkerOnlyWhileTheItemIsOut) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  // A synchronous branch delivered it inside the push: no marker.
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  EXPECT_FALSE(session_->OnPushed(0, a.seq, PushOutcome::kDelivered));
  // Not back when the push returns: a marker follows it.
  const Dispatch b = Send(1);
  EXPECT_TRUE(session_->OnPushed(1, b.seq, PushOutcome::kDelivered));
  // A push that failed or was not delivered needs none.
  const Dispatch c = Send(0);
  EXPECT_FALSE(session_->OnPushed(0, c.seq, PushOutcome::kDropped));
  EXPECT_EQ(Lane(session_->Stats(), 1).markers, 1u);
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

// The worker reports a push with the next item's start: the same answers as
// OnPushed and then MarkStarted.
TEST_F(SessionTest, MarkStartedAfterPushIsOnPushedThenMarkStarted) {
  Make(RoundRobin(), 1);
  const Dispatch a = *session_->TryDispatchItem(kNoTime);
  const Dispatch b = *session_->TryDispatchItem(kNoTime);
  const Dispatch c = *session_->TryDispatchItem(kNoTime);
  const Dispatch d = *session_->TryDispatchItem(kNoTime);
  session_->MarkStarted(0, a.seq);
  bool marker = false;
  // a came back inside its push: no marker, and b starts.
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  EXPECT_TRUE(session_->MarkStartedAfterPush(0, a.seq, PushOutcome::kDelivered,
                                             b.seq, &marker));
  EXPECT_FALSE(marker);
  EXPECT_EQ(Lane(session_->Stats(), 0).queued, 2u);
  // b was not back when its push returned: a marker goes behind it, and c
  // does not start before it (a branch blocked on the marker is not blocked
  // on c).
  EXPECT_FALSE(session_->MarkStartedAfterPush(0, b.seq, PushOutcome::kDelivered,
                                              c.seq, &marker));
  EXPECT_TRUE(marker);
  SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).queued, 2u) << "c is still queued";
  EXPECT_EQ(Lane(s, 0).markers, 1u);
  EXPECT_TRUE(session_->MarkStarted(0, c.seq));
  // An item forgotten by a flush is not started.
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  session_->Arrive(0, c.seq, kNoTime, P("c"));
  session_->Reset();
  EXPECT_FALSE(session_->MarkStartedAfterPush(0, c.seq, PushOutcome::kDelivered,
                                              d.seq, &marker));
  EXPECT_FALSE(marker);
  EXPECT_EQ(Lane(session_->Stats(), 0).markers, 1u);
}

TEST_F(SessionTest, AMarkerProvesTheItemsBeforeItDropped) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  const Dispatch c = Send(0);
  const Dispatch d = Send(1);
  for (const Dispatch& x : {a, b, c, d})
    session_->OnPushed(x.lane, x.seq, PushOutcome::kDelivered);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  session_->Arrive(1, d.seq, kNoTime, P("d"));
  // Lane 0's branch dropped a silently; the marker behind it proves it at
  // once (no stall-timeout), and only it: c is still out.
  session_->ProveLane(0, a.seq);
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1"}));
  // The marker behind c proves c too.
  const ReadyBatch batch = session_->ProveLaneAndTakeReady(0, c.seq);
  EXPECT_EQ(Describe(batch.items), (Strings{"-@2", "d@3"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).dropped, 2u);
  EXPECT_EQ(Lane(s, 0).timed_out, 0u);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST_F(SessionTest, AStalledLaneIsSkippedByEveryPolicyUntilItAnswers) {
  for (Policy policy : {Policy::kRoundRobin, Policy::kWeighted,
                        Policy::kLeastLoaded, Policy::kAdaptive}) {
    SCOPED_TRACE(PolicyName(policy));
    SessionConfig config;
    config.policy = policy;
    Make(config, 2);
    // Round-robin starts at lane 0; the others may pick either lane first.
    std::optional<Dispatch> a = session_->TryDispatchItem(kNoTime);
    ASSERT_TRUE(a && a->status == DispatchStatus::kOk);
    session_->MarkStarted(a->lane, a->seq);
    const uint32_t stuck = a->lane, live = 1 - stuck;
    // The branch never returns from the push: a stays the head.
    clock_->Advance(100 * kMs);
    EXPECT_EQ(Take(), (Strings{"-@0"}));
    SessionStats s = session_->Stats();
    EXPECT_EQ(Lane(s, stuck).state, LaneHealth::kStalled);
    EXPECT_EQ(Lane(s, stuck).stall_kind, StallKind::kBlocked);
    EXPECT_EQ(Lane(s, stuck).stalled_seq, a->seq);
    EXPECT_TRUE(session_->IsLaneStalled(stuck));
    // Every later item goes to the other lane.
    for (int i = 0; i < 6; ++i) {
      const Dispatch x = Send(live);
      session_->OnPushed(live, x.seq, PushOutcome::kDelivered);
      session_->Arrive(live, x.seq, kNoTime, P("x"));
    }
    EXPECT_EQ(Take().size(), 6u);
    // The push returns at last: a marker that comes back shows the lane
    // alive, and it is scheduled again.
    EXPECT_TRUE(session_->OnPushed(stuck, a->seq, PushOutcome::kDelivered));
    session_->ProveLane(stuck, a->seq);
    EXPECT_EQ(Lane(session_->Stats(), stuck).state, LaneHealth::kActive);
    bool stuck_got_one = false;
    for (int i = 0; i < 4 && !stuck_got_one; ++i) {
      std::optional<Dispatch> x = session_->TryDispatchItem(kNoTime);
      ASSERT_TRUE(x && x->status == DispatchStatus::kOk);
      session_->MarkStarted(x->lane, x->seq);
      session_->OnPushed(x->lane, x->seq, PushOutcome::kDelivered);
      session_->Arrive(x->lane, x->seq, kNoTime, P("y"));
      stuck_got_one = x->lane == stuck;
    }
    EXPECT_TRUE(stuck_got_one);
    EXPECT_EQ(Lane(session_->Stats(), stuck).stalls, 1u);
  }
}

TEST_F(SessionTest, AStalledLanesLaterItemsAreGivenUpWithoutAWaitEach) {
  Make(RoundRobin(), 2);
  std::vector<Dispatch> items;
  for (int i = 0; i < 6; ++i) {
    items.push_back(Send(static_cast<uint32_t>(i % 2)));
    // Lane 1's branch takes everything and returns nothing (a valve that
    // drops buffers and events alike); lane 0 is healthy.
    session_->OnPushed(items.back().lane, items.back().seq,
                       PushOutcome::kDelivered);
    if (i % 2 == 0)
      session_->Arrive(0, items.back().seq, kNoTime, P("ok"));
  }
  EXPECT_EQ(Take(), (Strings{"ok@0"}));
  // One stall-timeout for the lane, not one per item.
  clock_->Advance(100 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@1", "ok@2", "-@3", "ok@4", "-@5"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 1).timed_out, 3u);
  EXPECT_EQ(Lane(s, 1).state, LaneHealth::kStalled);
  EXPECT_EQ(Lane(s, 1).stall_kind, StallKind::kSilent);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST_F(SessionTest, AStalledLaneIsTheLastResort) {
  Make({}, 1);
  const Dispatch a = Send(0);
  clock_->Advance(100 * kMs);
  Take();
  EXPECT_TRUE(session_->IsLaneStalled(0));
  // The only lane: it still gets items (a slow lane must not end the
  // stream), and they are given up at once while it stays silent.
  const Dispatch b = Send(0);
  EXPECT_EQ(Take(), (Strings{"-@1"}));
  EXPECT_EQ(a.seq + 1, b.seq);
}

TEST_F(SessionTest, TheInputEndsAndEveryItemIsAccountedFor) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  const Dispatch b = Send(1);
  EXPECT_FALSE(session_->input_ended());
  session_->EndInput();
  EXPECT_TRUE(session_->input_ended());
  EXPECT_EQ(session_->AccountedForSinceNs(), kNoTime);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  clock_->Advance(5 * kMs);
  session_->Arrive(1, b.seq, kNoTime, P("b"));
  const uint64_t gen = session_->TakeReady().generation;
  EXPECT_EQ(session_->AccountedForSinceNs(), clock_->NowNs());
  // Becoming accounted for moved the generation: the fan-in's output task,
  // waiting on an older one, looks at once.
  EXPECT_GT(gen, 0u);
  EXPECT_TRUE(session_->Stats().input_ended);
  session_->Reset();
  EXPECT_FALSE(session_->input_ended());
  EXPECT_EQ(session_->AccountedForSinceNs(), kNoTime);
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

namespace gpufan {
namespace {

// Chunk mode: a chunk is one item that takes long; each sign of progress
// starts its stall clock again, so only a silent one is given up.
TEST_F(SessionTest, ProgressRestartsTheStallClockOfTheHead) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  clock_->Advance(90 * kMs);
  session_->NoteProgress(0, a.seq);
  clock_->Advance(90 * kMs);
  EXPECT_TRUE(Take().empty()) << "progress 90 ms ago: not due";
  // Progress of another item, or on another lane, is not the head's.
  session_->NoteProgress(1, a.seq);
  session_->NoteProgress(0, a.seq + 1);
  clock_->Advance(10 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@0"}));
  EXPECT_EQ(Lane(session_->Stats(), 0).timed_out, 1u);
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

TEST_F(SessionTest, AWithdrawnItemIsDroppedAndLeavesTheQueue) {
  Make(RoundRobin(), 1);
  const std::optional<Dispatch> d = session_->TryDispatchItem(kNoTime);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(Lane(session_->Stats(), 0).queued, 1u);
  session_->WithdrawItem(0, d->seq);
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).queued, 0u);
  EXPECT_EQ(Lane(s, 0).dropped, 1u);
  EXPECT_EQ(Take(), (Strings{"-@0"}));
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

TEST_F(SessionTest, WaitSettledEndsWhenTheItemArrivesOrTheSessionFlushes) {
  Make(RoundRobin());
  const Dispatch a = Send(0);
  std::future<bool> settled = std::async(
      std::launch::async, [&] { return session_->WaitSettled(0, a.seq); });
  EXPECT_EQ(settled.wait_for(std::chrono::milliseconds(50)),
            std::future_status::timeout);
  session_->Arrive(0, a.seq, kNoTime, P("a"));
  EXPECT_TRUE(settled.get());
  // Already settled: at once.
  EXPECT_TRUE(session_->WaitSettled(0, a.seq));

  const Dispatch b = Send(1);
  std::future<bool> flushed = std::async(
      std::launch::async, [&] { return session_->WaitSettled(1, b.seq); });
  session_->SetFlushing(true);
  EXPECT_FALSE(flushed.get());
  session_->SetFlushing(false);

  std::future<bool> ineligible = std::async(
      std::launch::async, [&] { return session_->WaitSettled(1, b.seq); });
  session_->SetLaneEligible(1, false);
  EXPECT_FALSE(ineligible.get());
}

TEST_F(SessionTest, WaitSettledEndsWhenTheItemIsGivenUp) {
  Make(RoundRobin(), 1);
  const Dispatch a = Send(0);
  std::future<bool> settled = std::async(
      std::launch::async, [&] { return session_->WaitSettled(0, a.seq); });
  clock_->Advance(100 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@0"}));
  EXPECT_TRUE(settled.get());
}

// The fan-in found chunk a ended by an EOS of its branch's own: a waiting
// worker wakes, the chunk counts failed and leaves the window empty, and
// the worker can tell it from a chunk that came back (b).
TEST_F(SessionTest, AChunkTheBranchEndedIsFailedAndSettled) {
  Make(RoundRobin(), 1);
  const Dispatch a = Send(0);
  const Dispatch b = Send(0);
  std::future<bool> settled = std::async(
      std::launch::async, [&] { return session_->WaitSettled(0, a.seq); });
  session_->EndChunkByBranch(0, a.seq);
  EXPECT_TRUE(settled.get());
  EXPECT_TRUE(session_->ChunkEndedByBranch(0, a.seq));
  session_->Arrive(0, b.seq, kNoTime, P("b"));
  EXPECT_TRUE(session_->WaitSettled(0, b.seq));
  EXPECT_FALSE(session_->ChunkEndedByBranch(0, b.seq));
  EXPECT_EQ(Take(), (Strings{"-@0", "b@1"}));
  const SessionStats s = session_->Stats();
  EXPECT_EQ(Lane(s, 0).failed, 1u);
  EXPECT_EQ(Lane(s, 0).completed, 1u);
}

}  // namespace
}  // namespace gpufan
