// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: lanes going away and replay. A lane removed, ended or failed
// gives up its items or hands them over; replayed items (FailLaneForReplay,
// Redispatch) leave in order, are proven dropped only by their own marker,
// are sent on only by their holder, and are given up after failing a second
// lane; stall_fails_lane keeps a stalled head for its replay. Time is a
// ManualClock.
#include <gtest/gtest.h>

#include "session-test.h"

namespace gpufan {
namespace {

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
  ExpectLaneCounts(s, 0, {.dropped = 2, .queued = 0});
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
  EXPECT_EQ(Lane(s, 0).state, LaneState::kFailed);
  EXPECT_EQ(Lane(s, 0).failed + Lane(s, 0).dropped, 2u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(a.seq + c.seq, 2u);
  // Every item goes to lane 1 now, a flush included.
  EXPECT_EQ(Send(1).seq, 3u);
  session_->Reset();
  EXPECT_EQ(Lane(session_->Stats(), 0).state, LaneState::kFailed);
  EXPECT_EQ(Send(1).lane, 1u);
  session_->SetLaneFailed(0, false);
  EXPECT_NE(Lane(session_->Stats(), 0).state, LaneState::kFailed);
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
  EXPECT_EQ(Lane(s, 0).state, LaneState::kFailed);
  ExpectLaneCounts(s, 0, {.late = 1, .handed_over = 2});
  ExpectLaneCounts(s, 1, {.dropped = 1, .replayed = 1});
  ExpectLaneCounts(s, 2, {.replayed = 1});
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
  ExpectLaneCounts(s, 1, {.replayed = 0, .queued = 0});
  ExpectLaneCounts(s, 2, {.queued = 1});
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
  ExpectLaneCounts(s, 0, {.timed_out = 0, .stalls = 1});

  // Nobody replays: the head waits one more timeout, then is given up.
  Make(config, 2);
  Send(0);
  clock_->Advance(150 * kMs);
  EXPECT_EQ(Take(), Strings{});
  clock_->Advance(150 * kMs);
  EXPECT_EQ(Take(), (Strings{"-@0"}));
}

}  // namespace
}  // namespace gpufan
