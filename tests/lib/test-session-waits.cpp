// SPDX-License-Identifier: LGPL-2.1-or-later
// A blocked DispatchItem, or the fan-in's WaitOutput, waits for an event,
// not for a timer: each event that makes room, or that the output must act
// on, must wake it. The clock is a ManualClock, so no deadline can end these
// waits; a lost wake-up shows as a call that never returns (caught by the
// bound below, far above any scheduling delay).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include "gpufan/clock.h"
#include "gpufan/session.h"

namespace gpufan {
namespace {

constexpr auto kLostWakeUp = std::chrono::seconds(20);

// Runs `call` on another thread, and gives it time to block (the test holds
// without it, it only tests less).
template <typename Call>
auto StartBlocked(Call call, const char *what) {
  auto f = std::async(std::launch::async, std::move(call));
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(50)),
            std::future_status::timeout)
      << what << " did not block";
  return f;
}

// Whether the blocked call returned before kLostWakeUp.
template <typename T>
bool Returned(std::future<T>& f) {
  if (f.wait_for(kLostWakeUp) == std::future_status::ready)
    return true;
  ADD_FAILURE() << "a wake-up was lost";
  return false;
}

class SessionWaitTest : public ::testing::Test {
 protected:
  // One item per lane queue, round-robin: a full lane in turn blocks.
  void Make(int lanes, bool claim_all) {
    SessionConfig c;
    c.policy = Policy::kRoundRobin;
    c.lane_queue_size = 1;
    session_ = Session::Create(c, std::make_shared<ManualClock>(1));
    for (int i = 0; i < lanes; ++i) {
      session_->AddLane(static_cast<uint32_t>(i), Device::Cpu(i));
      if (claim_all || i == 0)
        session_->ClaimLane(static_cast<uint32_t>(i));
    }
  }

  std::future<Dispatch> Blocked() {
    return StartBlocked([this] { return session_->DispatchItem(kNoTime); },
                        "the dispatch");
  }

  Dispatch Get(std::future<Dispatch>& f) {
    if (!Returned(f))
      session_->SetFlushing(true);  // lets the dispatcher (and the test) end
    return f.get();
  }

  std::shared_ptr<Session> session_;
};

TEST_F(SessionWaitTest, TheWorkerTakingAnItemWakesIt) {
  Make(1, true);
  const Dispatch a = session_->DispatchItem(kNoTime);
  auto blocked = Blocked();
  session_->MarkStarted(0, a.seq);  // the lane's queue has room again
  const Dispatch b = Get(blocked);
  EXPECT_EQ(b.status, DispatchStatus::kOk);
  EXPECT_EQ(b.lane, 0u);
}

TEST_F(SessionWaitTest, ClaimingAJoiningLaneWakesIt) {
  Make(2, false);  // lane 1 is joining: no items while lane 0 can take them
  const Dispatch a = session_->DispatchItem(kNoTime);
  ASSERT_EQ(a.lane, 0u);
  auto blocked = Blocked();
  session_->ClaimLane(1);
  const Dispatch b = Get(blocked);
  EXPECT_EQ(b.status, DispatchStatus::kOk);
  EXPECT_EQ(b.lane, 1u);
}

TEST_F(SessionWaitTest, ALaneBecomingEligibleWakesIt) {
  Make(2, true);
  session_->SetLaneEligible(1, false);
  session_->DispatchItem(kNoTime);
  auto blocked = Blocked();
  session_->SetLaneEligible(1, true);
  EXPECT_EQ(Get(blocked).lane, 1u);
}

TEST_F(SessionWaitTest, EveryWakeOfARunOfEventsArrives) {
  // Notifications are sent once per wait however many events come before
  // the waiter runs: each new wait must be woken again.
  Make(1, true);
  Dispatch d = session_->DispatchItem(kNoTime);
  for (int i = 0; i < 20; ++i) {
    auto blocked = std::async(
        std::launch::async, [this] { return session_->DispatchItem(kNoTime); });
    session_->MarkStarted(0, d.seq);
    session_->OnPushed(0, d.seq, PushOutcome::kDelivered);
    session_->Arrive(0, d.seq, kNoTime, nullptr);
    session_->TakeReady();
    d = Get(blocked);
    ASSERT_EQ(d.status, DispatchStatus::kOk);
  }
}

TEST_F(SessionWaitTest, FlushingWakesIt) {
  Make(1, true);
  session_->DispatchItem(kNoTime);
  auto blocked = Blocked();
  session_->SetFlushing(true);
  EXPECT_EQ(Get(blocked).status, DispatchStatus::kFlushing);
}

// WaitOutput: the output task waits for the generation to move. It must
// move for every head the task has to give up earlier than it would wake,
// and only for those: not once per item.
class OutputWaitTest : public ::testing::Test {
 protected:
  static constexpr int64_t kStallNs = 2'000'000'000;

  void Make(int lanes) {
    SessionConfig c;
    c.policy = Policy::kRoundRobin;
    c.stall_timeout_ns = kStallNs;
    session_ = Session::Create(c, clock_);
    for (int i = 0; i < lanes; ++i) {
      session_->AddLane(static_cast<uint32_t>(i), Device::Cpu(i));
      session_->ClaimLane(static_cast<uint32_t>(i));
    }
  }

  Dispatch Send(uint32_t lane) {
    const Dispatch d = session_->DispatchItem(kNoTime);
    EXPECT_EQ(d.status, DispatchStatus::kOk);
    EXPECT_EQ(d.lane, lane);
    session_->MarkStarted(d.lane, d.seq);
    return d;
  }

  std::future<void> Waiting(uint64_t generation) {
    return StartBlocked(
        [this, generation] { session_->WaitOutput(generation); },
        "the output's wait");
  }

  void ExpectWoken(std::future<void>& f) {
    if (!Returned(f))
      session_->WakeOutput();  // lets the waiter (and the test) end
    f.get();
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(1);
  std::shared_ptr<Session> session_;
};

TEST_F(OutputWaitTest, ADispatchIntoAnEmptyWindowWakesIt) {
  Make(1);
  auto waiting = Waiting(session_->TakeReady().generation);
  const Dispatch a = Send(0);  // the new head: it expires in stall-timeout
  ExpectWoken(waiting);
  clock_->Advance(kStallNs);
  const ReadyBatch batch = session_->TakeReady();
  ASSERT_EQ(batch.items.size(), 1u);
  EXPECT_EQ(batch.items[0].seq, a.seq);
  EXPECT_EQ(batch.items[0].payload, nullptr);  // given up
}

TEST_F(OutputWaitTest, AStalledLanesNewHeadWakesIt) {
  // The output sleeps until a pending head's deadline, and keeps to it after
  // that head left; a stalled lane's item, given up as soon as it heads the
  // window, comes earlier.
  Make(2);
  const Dispatch a = Send(0);
  clock_->Advance(kStallNs);
  ASSERT_EQ(session_->TakeReady().items.size(), 1u);  // a given up
  ASSERT_TRUE(session_->IsLaneStalled(0));
  const Dispatch b = Send(1);  // an active lane first
  session_->SetLaneEligible(1, false);
  auto waiting = Waiting(session_->TakeReady().generation);  // b pending
  Arrival arrival;
  // A lane's thread takes b itself: the window is empty, nothing announced.
  EXPECT_EQ(session_->ArriveAndTakeReady(1, b.seq, kNoTime, nullptr, &arrival)
                .items.size(),
            1u);
  const Dispatch c = Send(0);  // only the stalled lane is left
  ExpectWoken(waiting);
  const ReadyBatch batch = session_->TakeReady();
  ASSERT_EQ(batch.items.size(), 1u);
  EXPECT_EQ(batch.items[0].seq, c.seq);
  EXPECT_EQ(batch.items[0].payload, nullptr);  // given up at once
  EXPECT_NE(a.seq, c.seq);
}

TEST_F(OutputWaitTest, HeadsThatExpireLaterDoNotWakeIt) {
  // The no-delay case: each item comes back and leaves from its lane's thread
  // before the next is dispatched. Waking the output for each new head would
  // cost a thread wake-up per item.
  Make(1);
  Dispatch d = Send(0);
  auto waiting = Waiting(session_->TakeReady().generation);  // d pending
  for (int i = 0; i < 20; ++i) {
    clock_->Advance(1'000'000);
    Arrival arrival;
    ASSERT_EQ(session_->ArriveAndTakeReady(0, d.seq, kNoTime, nullptr, &arrival)
                  .items.size(),
              1u);
    d = Send(0);
  }
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)),
            std::future_status::timeout)
      << "a head that expires later woke the output";
  session_->WakeOutput();
  ExpectWoken(waiting);
}

TEST_F(OutputWaitTest, AWaitBegunWhileFlushingLastsUntilTheFlushEnds) {
  Make(1);
  session_->SetFlushing(true);
  auto waiting = Waiting(session_->TakeReady().generation);
  session_->SetFlushing(false);
  ExpectWoken(waiting);
}

TEST_F(OutputWaitTest, ResetWakesIt) {
  Make(1);
  Send(0);
  auto waiting = Waiting(session_->TakeReady().generation);
  session_->Reset();
  ExpectWoken(waiting);
  EXPECT_TRUE(session_->WindowEmpty());
}

}  // namespace
}  // namespace gpufan
