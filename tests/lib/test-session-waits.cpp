// SPDX-License-Identifier: LGPL-2.1-or-later
// A blocked DispatchItem waits for an event, not for a timer: each event
// that makes room must wake it. The clock is a ManualClock, so no deadline
// can end these waits; a lost wake-up shows as a dispatch that never returns
// (caught by the bound below, far above any scheduling delay).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "gpufan/clock.h"
#include "gpufan/session.h"

namespace gpufan {
namespace {

constexpr auto kLostWakeUp = std::chrono::seconds(20);

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

  // Dispatches on another thread, and gives it time to block (the test holds
  // without it, it only tests less).
  std::future<Dispatch> Blocked() {
    auto f = std::async(std::launch::async,
                        [this] { return session_->DispatchItem(kNoTime); });
    EXPECT_EQ(f.wait_for(std::chrono::milliseconds(50)),
              std::future_status::timeout)
        << "the dispatch did not block";
    return f;
  }

  Dispatch Get(std::future<Dispatch>& f) {
    if (f.wait_for(kLostWakeUp) != std::future_status::ready) {
      ADD_FAILURE() << "a wake-up was lost";
      session_->SetFlushing(true);  // lets the dispatcher (and the test) end
    }
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

}  // namespace
}  // namespace gpufan
