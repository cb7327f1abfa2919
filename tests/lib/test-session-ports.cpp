// SPDX-License-Identifier: LGPL-2.1-or-later
// The two ports over one Session, and the deadlines the fan-out asks its port
// for instead of reading the fan-in's stall-timeout: a stalled lane's
// liveness markers and a last-resort chunk's retry. Every rule runs on a
// ManualClock: a marker comes due stall-timeout after the stall, then after
// each marker, and not a nanosecond before.
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "gpufan/mutex.h"
#include "port-pair.h"

namespace gpufan {
namespace {

// One lane: it takes every item, stalled or not (the last resort).
class PortsTest : public PortPairTest<1> {
 protected:
  // Lane 0's started item heads the window for stall-timeout: the fan-in's
  // TakeReady gives it up and the lane stalls. Returns the item's seq.
  uint64_t StallLane0() {
    const Dispatch d = out_->DispatchItem(kNoTime);
    EXPECT_EQ(d.lane, 0u);
    out_->MarkStarted(d.lane, d.seq);
    clock_->Advance(kStall);
    ReadyBatch batch;
    in_->TakeReady(&batch);
    EXPECT_TRUE(out_->IsLaneStalled(0));
    return d.seq;
  }

  LivenessMarker Check(uint32_t lane, int64_t *due) {
    *due = kNoTime;
    return out_->CheckLivenessMarker(lane, due);
  }

};

TEST_F(PortsTest, BothPortsSeeOneSession) {
  EXPECT_EQ(out_->id(), in_->id());
  // the pairing hands over the same fan-in port every time
  EXPECT_EQ(out_->fanin_port(), in_);
  out_->DispatchItem(kNoTime);
  EXPECT_EQ(in_->Stats().dispatched, 1u);
  EXPECT_FALSE(in_->WindowEmpty());
}

TEST_F(PortsTest, TheFirstMarkerIsDueStallTimeoutAfterTheStall) {
  StallLane0();
  const int64_t stalled_at = clock_->NowNs();
  int64_t due;
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
  EXPECT_EQ(due, stalled_at + kStall);
  clock_->Advance(kStall - 1);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
  EXPECT_EQ(due, stalled_at + kStall);
  clock_->Advance(1);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kSend);
  EXPECT_EQ(due, stalled_at + 2 * kStall);
}

TEST_F(PortsTest, EachNextMarkerIsDueStallTimeoutAfterTheLast) {
  StallLane0();
  int64_t due;
  clock_->Advance(kStall);
  ASSERT_EQ(Check(0, &due), LivenessMarker::kSend);
  const int64_t sent_at = clock_->NowNs();
  EXPECT_EQ(due, sent_at + kStall);
  clock_->Advance(kStall - 1);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
  // A worker that wakes late sends at once, and the next one is due
  // stall-timeout after this one, not after the missed time.
  clock_->Advance(5 * kMs + 1);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kSend);
  EXPECT_EQ(due, clock_->NowNs() + kStall);
  // one marker per due time
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
}

TEST_F(PortsTest, ALaneThatAnsweredIsSeenAtItsNextDueTimeAndNotBefore) {
  const uint64_t seq = StallLane0();
  int64_t due;
  ASSERT_EQ(Check(0, &due), LivenessMarker::kWait);
  const int64_t first_due = due;
  in_->ProveLane(0, seq);  // a marker came back: the lane answers
  ASSERT_FALSE(out_->IsLaneStalled(0));
  clock_->Advance(kStall - 1);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
  EXPECT_EQ(due, first_due);
  clock_->Advance(1);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kAnswered);
  // the run of markers is over
  clock_->Advance(10 * kStall);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kAnswered);
}

TEST_F(PortsTest, ANewStallAfterAnAnswerStartsAFreshRun) {
  const uint64_t seq = StallLane0();
  in_->ProveLane(0, seq);
  int64_t due;
  clock_->Advance(kStall);
  ASSERT_EQ(Check(0, &due), LivenessMarker::kAnswered);
  clock_->Advance(7 * kMs);
  StallLane0();
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
  EXPECT_EQ(due, clock_->NowNs() + kStall);
}

TEST_F(PortsTest, AStallBeforeTheWorkerLookedStartsAFreshRun) {
  const uint64_t seq = StallLane0();
  int64_t due;
  ASSERT_EQ(Check(0, &due), LivenessMarker::kWait);
  // It answers, and stalls again before the worker looked at its due time:
  // the first marker of the new stall is due stall-timeout after it.
  in_->ProveLane(0, seq);
  clock_->Advance(3 * kMs);
  StallLane0();
  const int64_t stalled_again_at = clock_->NowNs();
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
  EXPECT_EQ(due, stalled_again_at + kStall);
  clock_->Advance(kStall);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kSend);
}

TEST_F(PortsTest, AnUnclaimedStalledLaneSendsNoMarkerButKeepsLooking) {
  StallLane0();
  out_->UnclaimLane(0);
  ASSERT_TRUE(out_->IsLaneStalled(0));
  int64_t due;
  clock_->Advance(kStall);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kWait);
  EXPECT_EQ(due, clock_->NowNs() + kStall);
  in_->ClaimLane(0);
  clock_->Advance(kStall);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kSend);
}

TEST_F(PortsTest, MarkersFollowTheStallTimeoutTheFanInSets) {
  StallLane0();
  int64_t due;
  in_->SetStallTimeout(30 * kMs);
  clock_->Advance(kStall);  // the first was due by the timeout of the stall
  ASSERT_EQ(Check(0, &due), LivenessMarker::kSend);
  EXPECT_EQ(due, clock_->NowNs() + 30 * kMs);
}

TEST_F(PortsTest, AnUnknownOrNeverStalledLaneHasNoMarkers) {
  int64_t due;
  EXPECT_EQ(Check(0, &due), LivenessMarker::kAnswered);
  EXPECT_EQ(Check(7, &due), LivenessMarker::kAnswered);
  StallLane0();
  out_->RemoveLane(0);
  EXPECT_EQ(Check(0, &due), LivenessMarker::kAnswered);
}

TEST_F(PortsTest, ALastResortChunkRetriesStallTimeoutFromNow) {
  EXPECT_EQ(out_->LastResortRetryDueNs(), clock_->NowNs() + kStall);
  clock_->Advance(3 * kMs);
  EXPECT_EQ(out_->LastResortRetryDueNs(), clock_->NowNs() + kStall);
  in_->SetStallTimeout(40 * kMs);
  EXPECT_EQ(out_->LastResortRetryDueNs(), clock_->NowNs() + 40 * kMs);
}

// On an injected clock, a due time that came ends the wait at once; one
// that has not waits for the caller's notification (not for real time).
TEST_F(PortsTest, WaitUntilDueOnTheSessionsClock) {
  Mutex mutex;
  CondVar cv;
  std::unique_lock<Mutex> lock(mutex);
  const int64_t due = out_->LastResortRetryDueNs();
  clock_->Advance(kStall);
  EXPECT_EQ(out_->WaitUntilDue(cv, lock, due), std::cv_status::timeout);

  bool told = false;
  std::thread notifier([&] {
    std::lock_guard<Mutex> l(mutex);
    told = true;
    cv.notify_all();
  });
  std::cv_status status = std::cv_status::timeout;
  while (!told)
    status = out_->WaitUntilDue(cv, lock, clock_->NowNs() + 1000 * kStall);
  lock.unlock();
  notifier.join();
  EXPECT_EQ(status, std::cv_status::no_timeout);
}

// The real-time Session maps the due time onto a real-time wait.
TEST(PortsRealTime, WaitUntilDueEndsAtTheDueTime) {
  SessionConfig c;
  c.stall_timeout_ns = 20 * kMs;
  std::shared_ptr<FanOutPort> out = FanOutPort::Create(c);
  Mutex mutex;
  CondVar cv;
  std::unique_lock<Mutex> lock(mutex);
  const int64_t due = out->LastResortRetryDueNs();
  std::cv_status status = std::cv_status::no_timeout;
  while (status != std::cv_status::timeout)
    status = out->WaitUntilDue(cv, lock, due);
  EXPECT_GE(out->clock().NowNs(), due);
}

}  // namespace
}  // namespace gpufan
