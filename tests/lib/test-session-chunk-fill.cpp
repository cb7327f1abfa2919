// SPDX-License-Identifier: LGPL-2.1-or-later
// Chunk mode with several input streams: a lane takes one chunk at a time
// while a stream fills it (Session::EndChunkFill). Another stream's chunk
// goes to a lane that is not being filled, or waits for one.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gpufan/session.h"

namespace gpufan {
namespace {

class ChunkFillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SessionConfig c;
    c.policy = Policy::kRoundRobin;
    c.lane_queue_size = 8;
    c.chunks = true;
    session_ = Session::Create(c, clock_);
    for (uint32_t i = 0; i < 2; ++i) {
      session_->AddLane(i, Device::Cpu(static_cast<int>(i)));
      session_->ClaimLane(i);
    }
  }
  // A chunk of `stream` if a lane has room now (max_wait 0: no waiting).
  Dispatch Open(uint32_t stream) {
    return session_->DispatchItem(kNoTime, -1, stream, 0);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Session> session_;
};

TEST_F(ChunkFillTest, ALaneBeingFilledTakesNoOtherChunk) {
  const Dispatch a = Open(1);
  const Dispatch b = Open(2);
  ASSERT_EQ(a.status, DispatchStatus::kOk);
  ASSERT_EQ(b.status, DispatchStatus::kOk);
  EXPECT_NE(a.lane, b.lane);
  // both lanes are filled: a third stream's chunk waits
  EXPECT_EQ(Open(3).status, DispatchStatus::kTimedOut);
  // another stream's seq does not end the fill
  session_->EndChunkFill(a.lane, b.seq);
  EXPECT_EQ(Open(3).status, DispatchStatus::kTimedOut);
  session_->EndChunkFill(a.lane, a.seq);
  const Dispatch c = Open(3);
  ASSERT_EQ(c.status, DispatchStatus::kOk);
  EXPECT_EQ(c.lane, a.lane);
  // the fan-in learns each chunk's stream (its output's src_k)
  EXPECT_EQ(session_->ItemStream(a.seq), 1u);
  EXPECT_EQ(session_->ItemStream(c.seq), 3u);
}

TEST_F(ChunkFillTest, AWithdrawnChunkEndsItsFill) {
  const Dispatch a = Open(1);
  const Dispatch b = Open(2);
  ASSERT_EQ(b.status, DispatchStatus::kOk);
  session_->WithdrawItem(a.lane, a.seq);
  const Dispatch c = Open(3);
  ASSERT_EQ(c.status, DispatchStatus::kOk);
  EXPECT_EQ(c.lane, a.lane);
}

TEST_F(ChunkFillTest, AMovedChunkFillsItsNewLane) {
  const Dispatch a = Open(1);
  ASSERT_EQ(a.status, DispatchStatus::kOk);
  const uint32_t other = a.lane == 0 ? 1 : 0;
  const Dispatch moved =
      session_->MoveUnstarted(a.seq, a.lane, std::vector<uint32_t>{other});
  ASSERT_EQ(moved.status, DispatchStatus::kOk);
  EXPECT_EQ(moved.lane, other);
  // the old lane is free, the new one filled
  const Dispatch b = Open(2);
  ASSERT_EQ(b.status, DispatchStatus::kOk);
  EXPECT_EQ(b.lane, a.lane);
  EXPECT_EQ(Open(3).status, DispatchStatus::kTimedOut);
  session_->EndChunkFill(other, a.seq);
  EXPECT_EQ(Open(3).lane, other);
}

TEST_F(ChunkFillTest, AChunkBeingFilledMovesOnlyToALaneNotFilled) {
  const Dispatch a = Open(1);
  const Dispatch b = Open(2);
  ASSERT_EQ(b.status, DispatchStatus::kOk);
  EXPECT_EQ(
      session_->MoveUnstarted(a.seq, a.lane, std::vector<uint32_t>{b.lane})
          .status,
      DispatchStatus::kNoLanes);
}

TEST_F(ChunkFillTest, OneStreamFillsNothing) {
  // the single sink pad's chunks: one chain function, one open chunk
  const Dispatch a = Open(kMainStream);
  const Dispatch b = Open(kMainStream);
  const Dispatch c = Open(kMainStream);
  EXPECT_EQ(a.status, DispatchStatus::kOk);
  EXPECT_EQ(b.status, DispatchStatus::kOk);
  EXPECT_EQ(c.status, DispatchStatus::kOk);
}

}  // namespace
}  // namespace gpufan
