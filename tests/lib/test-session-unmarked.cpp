// SPDX-License-Identifier: LGPL-2.1-or-later
// Buffers that come back without our meta, with several streams whose items
// share their PTS (session-unmarked.cpp): each is matched to its own
// stream's item when the lane's arrivals make it certain, else dropped
// (`unmatched`), never given to another stream's item.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpufan/session.h"
#include "tag-payload.h"

namespace gpufan {
namespace {

constexpr int64_t kFrameNs = 40'000'000;

class SessionUnmarkedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SessionConfig c;
    c.policy = Policy::kRoundRobin;
    c.lane_queue_size = 16;
    c.max_in_flight = 64;
    c.stall_timeout_ns = 1'000'000'000;
    session_ = Session::Create(c, std::make_shared<ManualClock>());
    session_->AddLane(0, Device::Cpu(0));
    session_->ClaimLane(0);
    for (uint32_t s = 1; s <= 3; s++)
      session_->AddStream(s);
  }

  // Frame `i` of streams 1, 2, 3 (in that order) into the one lane.
  void SendFrame(int64_t i) {
    for (uint32_t s = 1; s <= 3; s++) {
      const Dispatch d = session_->DispatchItem(i * kFrameNs, -1, s);
      ASSERT_EQ(d.status, DispatchStatus::kOk);
      ASSERT_TRUE(session_->MarkStarted(d.lane, d.seq));
    }
  }

  // A buffer without our meta with frame i's PTS comes back.
  void Return(int64_t i, const std::string& text) {
    session_->Arrive(0, std::nullopt, i * kFrameNs, P(text));
    for (Released& r : session_->TakeReady().items)
      if (r.payload)
        out_[r.stream].push_back(TagText(r));
  }

  std::shared_ptr<Session> session_;
  std::map<uint32_t, std::vector<std::string>> out_;  // by stream
};

TEST_F(SessionUnmarkedTest, EveryFrameOfAPtsBackGoesToItsOwnStream) {
  SendFrame(0);
  SendFrame(1);
  // "a" is stream 1's, "b" stream 2's, "c" stream 3's
  for (const char *text : {"a0", "b0", "c0", "a1", "b1", "c1"})
    Return(text[1] - '0', text);
  EXPECT_EQ(out_[1], (std::vector<std::string>{"a0", "a1"}));
  EXPECT_EQ(out_[2], (std::vector<std::string>{"b0", "b1"}));
  EXPECT_EQ(out_[3], (std::vector<std::string>{"c0", "c1"}));
  EXPECT_EQ(session_->Stats().unmatched, 0u);
}

TEST_F(SessionUnmarkedTest, AnAmbiguousFrameIsDroppedNotGivenToAnotherStream) {
  SendFrame(0);
  SendFrame(1);
  // the branch dropped stream 1's frame 0: b0 and c0 could be any two of
  // the three; frame 1 came back whole
  for (const char *text : {"b0", "c0", "a1", "b1", "c1"})
    Return(text[1] - '0', text);
  EXPECT_EQ(out_[1], (std::vector<std::string>{"a1"}));
  EXPECT_EQ(out_[2], (std::vector<std::string>{"b1"}));
  EXPECT_EQ(out_[3], (std::vector<std::string>{"c1"}));
  EXPECT_EQ(session_->Stats().unmatched, 2u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

TEST_F(SessionUnmarkedTest, TheLanesEndSettlesWhatIsStillAmbiguous) {
  SendFrame(0);
  Return(0, "b0");
  Return(0, "c0");
  EXPECT_TRUE(out_.empty());  // they wait for the lane to tell
  session_->LaneEnded(0);
  for (Released& r : session_->TakeReady().items)
    if (r.payload)
      out_[r.stream].push_back(TagText(r));
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(session_->Stats().unmatched, 2u);
  EXPECT_EQ(session_->Stats().in_flight, 0u);
}

}  // namespace
}  // namespace gpufan
