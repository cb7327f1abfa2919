// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: an item that does not come back. The stall timeout gives up the
// head (its clock starting when it becomes head, restarted by progress), a
// stalled lane's other items move or are given up, a stalled lane is
// skipped by every policy until it answers, and WaitOutput's deadline.
// Time is a ManualClock.
#include <gtest/gtest.h>

#include "session-test.h"

namespace gpufan {
namespace {

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
  ExpectLaneCounts(s, 0, {.timed_out = 1, .in_flight = 0});
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
  ExpectLaneCounts(s, 0, {.timed_out = 1, .handed_over = 1});
  ExpectLaneCounts(s, 1, {.replayed = 1});
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
    EXPECT_EQ(Lane(s, stuck).state, LaneState::kStalled);
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
    EXPECT_EQ(Lane(session_->Stats(), stuck).state, LaneState::kActive);
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
  EXPECT_EQ(Lane(s, 1).state, LaneState::kStalled);
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

}  // namespace
}  // namespace gpufan
