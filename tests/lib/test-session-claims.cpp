// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: lanes a fan-in awaits (claimed) and lanes it does not (yet):
// unawaited lanes never block the window, items dispatched before a claim
// leave in their turn, an unclaimed lane is no longer awaited. Time is a
// ManualClock.
#include <gtest/gtest.h>

#include "session-test.h"

namespace gpufan {
namespace {

TEST_F(SessionTest, UnawaitedLanesNeverBlockTheWindow) {
  Make(RoundRobin(), 2, false);
  session_->ClaimLane(0);  // lane 1 has no fan-in: it is joining
  // While a claimed lane can take items, a joining one gets none (its first
  // item could not be ordered against the claimed lanes' items).
  const Dispatch a = Send(0);
  EXPECT_TRUE(a.lanes_joining);
  EXPECT_EQ(Lane(session_->Stats(), 1).state, LaneState::kJoining);
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
  ExpectLaneCounts(s, 1, {.completed = 1, .dropped = 1, .failed = 1});
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
  EXPECT_EQ(Lane(s, 0).state, LaneState::kJoining);
  EXPECT_EQ(s.in_flight, 0u);
  // Claimed again, the lane gets items, awaited.
  session_->ClaimLane(0);
  const Dispatch e = Send(0);
  EXPECT_TRUE(e.awaited);
}

}  // namespace
}  // namespace gpufan
