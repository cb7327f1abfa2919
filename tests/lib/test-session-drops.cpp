// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: items a branch dropped, proven without waiting for a timeout: by
// FIFO order (a later item of the same lane came back), by a push that
// failed or dropped, by the marker a lane's worker pushes behind an item.
// Time is a ManualClock.
#include <gtest/gtest.h>

#include "session-test.h"

namespace gpufan {
namespace {

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
  ExpectLaneCounts(s, 0, {.completed = 1, .dropped = 2, .in_flight = 1});
  EXPECT_EQ(s.in_flight, 1u);
  EXPECT_EQ(s.released, 3u);
  // A dropped item that shows up after all is late.
  EXPECT_EQ(session_->Arrive(0, d[0].seq, kNoTime, P("a")).status,
            ArrivalStatus::kLate);
  EXPECT_EQ(Lane(session_->Stats(), 0).late, 1u);
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
  ExpectLaneCounts(s, 0, {.failed = 1});
  ExpectLaneCounts(s, 1, {.dropped = 1});
  EXPECT_EQ(s.in_flight, 0u);
}

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
  ExpectLaneCounts(s, 0, {.dropped = 2, .timed_out = 0});
  EXPECT_EQ(s.in_flight, 0u);
}

}  // namespace
}  // namespace gpufan
