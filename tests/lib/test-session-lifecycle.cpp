// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: an item's way through it. Ids and configuration, in-order
// release, matching what comes back (sequence number, else PTS), several
// buffers for one item, events between items, reset, a withdrawn item, waits
// for an item to settle, and the end of the input. Time is a ManualClock.
#include <gtest/gtest.h>

#include "session-test.h"

namespace gpufan {
namespace {

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
  ExpectLaneCounts(s, 0, {.completed = 2, .reorder_waits = 0});
  ExpectLaneCounts(s, 1, {.completed = 1, .reorder_waits = 1});
  EXPECT_EQ(s.window_peak, 3u);
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
  ExpectLaneCounts(s, 1, {.completed = 1});
  ExpectLaneCounts(s, 0, {.queued = 0, .in_flight = 0});
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

TEST_F(SessionTest, AWithdrawnItemIsDroppedAndLeavesTheQueue) {
  Make(RoundRobin(), 1);
  const std::optional<Dispatch> d = session_->TryDispatchItem(kNoTime);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(Lane(session_->Stats(), 0).queued, 1u);
  session_->WithdrawItem(0, d->seq);
  const SessionStats s = session_->Stats();
  ExpectLaneCounts(s, 0, {.dropped = 1, .queued = 0});
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
  ExpectLaneCounts(s, 0, {.completed = 1, .failed = 1});
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

}  // namespace
}  // namespace gpufan
