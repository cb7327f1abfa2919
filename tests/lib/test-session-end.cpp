// SPDX-License-Identifier: LGPL-2.1-or-later
// The end-of-stream decision the fan-in asks its port for (docs/ordering.md,
// "When the stream ends"), on a ManualClock: the stream ends when every input
// has its EOS and the window is empty; once the fan-out's input ended and
// every item is accounted for, it waits at most stall-timeout for the lanes'
// EOS, not at all for a stalled lane's, and a failed lane's is not missed.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "port-pair.h"

namespace gpufan {
namespace {

class EndOfStreamTest : public PortPairTest<2> {
 protected:
  // Two inputs, paired with lanes 0 and 1; `ended` says which have EOS.
  static std::vector<EosInput> Inputs(bool first_ended, bool second_ended) {
    return {EosInput{first_ended, true, 0}, EosInput{second_ended, true, 1}};
  }

  EndOfStream Decide(const std::vector<EosInput>& inputs) {
    return in_->DecideEndOfStream(inputs);
  }

};

TEST_F(EndOfStreamTest, WithoutInputsItNeverEnds) {
  out_->EndInput();
  clock_->Advance(10 * kStall);
  const EndOfStream end = Decide({});
  EXPECT_FALSE(end.ends);
  EXPECT_EQ(end.recheck_ns, kNoTime);
}

TEST_F(EndOfStreamTest, EveryInputsEosAndAnEmptyWindowEndIt) {
  EXPECT_TRUE(in_->MayEndStream(true));
  const EndOfStream end = Decide(Inputs(true, true));
  EXPECT_TRUE(end.ends);
  EXPECT_TRUE(end.missing.empty());
}

TEST_F(EndOfStreamTest, AnItemInTheWindowHoldsItBack) {
  out_->DispatchItem(kNoTime);
  EXPECT_FALSE(in_->MayEndStream(true));
  EXPECT_FALSE(Decide(Inputs(true, true)).ends);
}

TEST_F(EndOfStreamTest, WhileTheInputGoesOnOnlyEveryEosEndsIt) {
  EXPECT_FALSE(in_->MayEndStream(false));
  clock_->Advance(10 * kStall);
  const EndOfStream end = Decide(Inputs(true, false));
  EXPECT_FALSE(end.ends);
  EXPECT_EQ(end.recheck_ns, kNoTime);  // only an event changes that
}

TEST_F(EndOfStreamTest, OnceAccountedForALanesEosIsAwaitedStallTimeout) {
  out_->EndInput();  // nothing in flight: accounted for from now
  const int64_t since = clock_->NowNs();
  EXPECT_EQ(in_->AccountedForSinceNs(), since);
  EXPECT_TRUE(in_->MayEndStream(false));
  EndOfStream end = Decide(Inputs(true, false));
  EXPECT_FALSE(end.ends);
  EXPECT_EQ(end.recheck_ns, since + kStall);
  clock_->Advance(kStall - 1);
  EXPECT_FALSE(Decide(Inputs(true, false)).ends);
  clock_->Advance(1);
  end = Decide(Inputs(true, false));
  ASSERT_TRUE(end.ends);
  ASSERT_EQ(end.missing.size(), 1u);
  EXPECT_EQ(end.missing[0].input, 1u);
  EXPECT_EQ(end.missing[0].why, MissingEos::kNotInTime);
}

TEST_F(EndOfStreamTest, TheWaitFollowsTheStallTimeoutTheFanInSets) {
  in_->SetStallTimeout(30 * kMs);
  out_->EndInput();
  EXPECT_EQ(Decide(Inputs(false, true)).recheck_ns,
            clock_->NowNs() + 30 * kMs);
}

TEST_F(EndOfStreamTest, AStalledLanesInputIsNotWaitedFor) {
  const Dispatch d = out_->DispatchItem(kNoTime);
  ASSERT_EQ(d.lane, 0u);
  out_->MarkStarted(d.lane, d.seq);
  out_->OnPushed(d.lane, d.seq, PushOutcome::kDelivered);
  clock_->Advance(kStall);
  ReadyBatch batch;
  in_->TakeReady(&batch);  // the head is given up: lane 0 stalls
  ASSERT_TRUE(out_->IsLaneStalled(0));
  out_->EndInput();
  clock_->Advance(5 * kMs);
  const EndOfStream end = Decide(Inputs(false, true));
  ASSERT_TRUE(end.ends);  // at once: it was waited for already
  ASSERT_EQ(end.missing.size(), 1u);
  const MissingInput& m = end.missing[0];
  EXPECT_EQ(m.input, 0u);
  EXPECT_EQ(m.why, MissingEos::kStalled);
  EXPECT_EQ(m.stall_kind, StallKind::kSilent);
  EXPECT_EQ(m.stalled_seq, d.seq);
  EXPECT_EQ(m.stalled_ns, 5 * kMs);
}

TEST_F(EndOfStreamTest, AStalledLaneDoesNotCutTheOthersWaitShort) {
  const Dispatch d = out_->DispatchItem(kNoTime);
  out_->MarkStarted(d.lane, d.seq);
  clock_->Advance(kStall);
  ReadyBatch batch;
  in_->TakeReady(&batch);
  ASSERT_TRUE(out_->IsLaneStalled(0));
  out_->EndInput();
  const EndOfStream end = Decide(Inputs(false, false));
  EXPECT_FALSE(end.ends);
  EXPECT_EQ(end.recheck_ns, clock_->NowNs() + kStall);
}

TEST_F(EndOfStreamTest, AFailedLanesInputIsNeitherAwaitedNorNamed) {
  out_->SetLaneFailed(1, true);
  out_->EndInput();
  const EndOfStream end = Decide(Inputs(true, false));
  EXPECT_TRUE(end.ends);
  EXPECT_TRUE(end.missing.empty());
}

TEST_F(EndOfStreamTest, AnUnpairedInputIsAwaitedThenNamed) {
  out_->EndInput();
  const std::vector<EosInput> inputs = {EosInput{true, true, 0},
                                        EosInput{false, false, kNoLane}};
  EXPECT_FALSE(Decide(inputs).ends);
  clock_->Advance(kStall);
  const EndOfStream end = Decide(inputs);
  ASSERT_TRUE(end.ends);
  ASSERT_EQ(end.missing.size(), 1u);
  EXPECT_EQ(end.missing[0].input, 1u);
  EXPECT_EQ(end.missing[0].why, MissingEos::kNeverPaired);
}

}  // namespace
}  // namespace gpufan
