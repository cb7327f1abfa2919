// SPDX-License-Identifier: LGPL-2.1-or-later
// Session: admission. Dispatch is bounded by the items in flight and by
// each lane's queue (deeper for a lane of microseconds); a full window
// probes its head's idle lane; a blocked dispatch wakes on a flush, a
// completion, or the last lane's removal. Time is a ManualClock.
#include <gtest/gtest.h>

#include "session-test.h"

namespace gpufan {
namespace {

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
  ExpectLaneCounts(s, 0, {.queued = 2, .in_flight = 3});
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

}  // namespace
}  // namespace gpufan
