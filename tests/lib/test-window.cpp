// SPDX-License-Identifier: LGPL-2.1-or-later
// The reorder window: unit cases, then a property test over random
// interleavings of open/arrive/drop/expire/attach/pop.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gpufan/reorder-window.h"
#include "tag-payload.h"

namespace gpufan {
namespace {

// "text@seq/lane" for payloads, "-@seq/lane" for empty entries; lane "e" for
// attachments.
std::vector<std::string> Describe(const std::vector<Released>& out) {
  std::vector<std::string> d;
  for (const Released& r : out) {
    std::string s = TagText(r);
    s += "@" + std::to_string(r.seq) + "/" +
         (r.lane == kNoLane ? "e" : std::to_string(r.lane));
    d.push_back(s);
  }
  return d;
}

std::vector<std::string> Pop(ReorderWindow& w, int64_t now = 0) {
  std::vector<Released> out;
  const size_t n = w.PopSettled(out, now);
  EXPECT_EQ(n, out.size());
  return Describe(out);
}

using Strings = std::vector<std::string>;

TEST(ReorderWindow, ReleasesInSequenceOrder) {
  ReorderWindow w;
  for (uint64_t s = 0; s < 4; ++s)
    w.Open(s, static_cast<uint32_t>(s % 2), 0);
  EXPECT_EQ(w.Arrive(2, P("c")), ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(w.Arrive(1, P("b")), ReorderWindow::ArriveResult::kStored);
  EXPECT_TRUE(Pop(w).empty());
  EXPECT_TRUE(w.HeadPending());
  EXPECT_EQ(w.Arrive(0, P("a")), ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(Pop(w), (Strings{"a@0/0", "b@1/1", "c@2/0"}));
  EXPECT_EQ(w.occupancy(), 1u);
  EXPECT_EQ(w.head_seq(), 3u);
  EXPECT_EQ(w.head_lane(), 1u);
  EXPECT_TRUE(w.IsReleased(1));
  EXPECT_FALSE(w.IsReleased(3));
  EXPECT_TRUE(w.IsOpen(3));
  EXPECT_FALSE(w.IsOpen(1));
  EXPECT_EQ(w.Arrive(3, P("d")), ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(Pop(w), (Strings{"d@3/1"}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.peak_occupancy(), 4u);
}

TEST(ReorderWindow, SparseSequenceNumbers) {
  ReorderWindow w;
  w.Open(10, 0, 0);
  w.Open(13, 1, 0);
  w.Open(20, 0, 0);
  EXPECT_EQ(w.Arrive(12, P("x")), ReorderWindow::ArriveResult::kUnknown);
  w.Arrive(20, P("c"));
  w.Arrive(13, P("b"));
  w.Arrive(10, P("a"));
  EXPECT_EQ(Pop(w), (Strings{"a@10/0", "b@13/1", "c@20/0"}));
  // 12 was never opened; below the release mark it counts as late.
  EXPECT_EQ(w.Arrive(12, P("x")), ReorderWindow::ArriveResult::kLate);
  EXPECT_EQ(w.Arrive(99, P("x")), ReorderWindow::ArriveResult::kUnknown);
}

TEST(ReorderWindow, DropAndExpireLeaveEmptyEntries) {
  ReorderWindow w;
  w.Open(0, 0, 0);
  w.Open(1, 1, 0);
  w.Open(2, 2, 0);
  EXPECT_TRUE(w.Drop(1));
  EXPECT_FALSE(w.Drop(1));
  EXPECT_FALSE(w.Drop(7));
  w.Arrive(2, P("c"));
  EXPECT_EQ(w.head_since_ns(), 0);
  EXPECT_TRUE(w.ExpireHead());
  EXPECT_FALSE(w.ExpireHead());
  EXPECT_EQ(Pop(w, 60), (Strings{"-@0/0", "-@1/1", "c@2/2"}));
  EXPECT_FALSE(w.ExpireHead());  // empty
}

TEST(ReorderWindow, LateArrivalsAreRefused) {
  ReorderWindow w;
  w.Open(0, 0, 0);
  w.Open(1, 0, 0);
  w.Drop(0);
  w.ExpireHead();  // head is dropped already: nothing to expire
  // Still in the window but given up: late, and not kept.
  EXPECT_EQ(w.Arrive(0, P("a")), ReorderWindow::ArriveResult::kLate);
  EXPECT_EQ(Pop(w), (Strings{"-@0/0"}));
  EXPECT_TRUE(w.ExpireHead());
  EXPECT_EQ(w.Arrive(1, P("b")), ReorderWindow::ArriveResult::kLate);
  EXPECT_EQ(Pop(w), (Strings{"-@1/0"}));
  EXPECT_EQ(w.Arrive(1, P("b")), ReorderWindow::ArriveResult::kLate);
}

TEST(ReorderWindow, SeveralPayloadsPerSlot) {
  ReorderWindow w;
  w.Open(5, 3, 0);
  w.Arrive(5, P("a1"));
  w.Arrive(5, P("a2"));
  EXPECT_EQ(Pop(w), (Strings{"a1@5/3", "a2@5/3"}));
}

TEST(ReorderWindow, AttachmentsBeforeTheirSlot) {
  ReorderWindow w;
  w.Open(0, 0, 0);
  w.Open(2, 0, 0);
  w.AttachBefore(0, P("e0"));  // before the head: may leave at once
  w.AttachBefore(1, P("e1"));  // no slot 1: before slot 2
  w.AttachBefore(2, P("e2"));
  w.AttachBefore(3, P("t1"));  // after every open slot
  EXPECT_EQ(Pop(w), (Strings{"e0@0/e"}));
  w.Arrive(2, P("b"));
  EXPECT_TRUE(Pop(w).empty());
  w.Arrive(0, P("a"));
  EXPECT_EQ(Pop(w), (Strings{"a@0/0", "e1@2/e", "e2@2/e", "b@2/0", "t1@3/e"}));
}

TEST(ReorderWindow, TrailingAttachmentsGoBeforeTheNextSlot) {
  ReorderWindow w;
  w.AttachBefore(0, P("t0"));  // empty window: trailing
  w.Open(4, 1, 0);
  w.AttachBefore(9, P("t1"));
  w.Open(5, 1, 0);  // takes t1 along as its leading attachment
  EXPECT_EQ(Pop(w), (Strings{"t0@4/e"}));
  w.Arrive(5, P("b"));
  w.Drop(4);
  EXPECT_EQ(Pop(w), (Strings{"-@4/1", "t1@5/e", "b@5/1"}));
  // Empty window: an attachment leaves at the next pop.
  w.AttachBefore(0, P("t2"));
  EXPECT_EQ(Pop(w), (Strings{"t2@6/e"}));
}

TEST(ReorderWindow, HeadSinceFollowsReleases) {
  ReorderWindow w;
  w.Open(0, 0, 100);
  w.Open(1, 0, 200);
  w.Open(2, 0, 900);
  EXPECT_EQ(w.head_since_ns(), 100);
  w.Arrive(0, P("a"));
  Pop(w, 500);
  EXPECT_EQ(w.head_since_ns(), 500);  // became head at 500, after dispatch
  w.Arrive(1, P("b"));
  Pop(w, 600);
  EXPECT_EQ(w.head_since_ns(), 900);  // dispatched after the release
}

TEST(ReorderWindow, ClearForgetsAndMakesOldSlotsLate) {
  ReorderWindow w;
  w.Open(0, 0, 0);
  w.Open(1, 0, 0);
  w.Arrive(1, P("b"));
  w.AttachBefore(9, P("t"));
  w.Clear();
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(Pop(w).empty());
  EXPECT_EQ(w.peak_occupancy(), 2u);
  EXPECT_EQ(w.Arrive(0, P("a")), ReorderWindow::ArriveResult::kLate);
  w.Open(2, 0, 0);
  w.Arrive(2, P("c"));
  EXPECT_EQ(Pop(w), (Strings{"c@2/0"}));
}

// --- input streams ---

// "text@seq/lane#stream" ("-" for empty entries, lane "e" for attachments).
Strings PopStreams(ReorderWindow& w, int64_t now = 0) {
  std::vector<Released> out;
  const size_t n = w.PopSettled(out, now);
  EXPECT_EQ(n, out.size());
  Strings d = Describe(out);
  for (size_t i = 0; i < out.size(); ++i)
    d[i] += "#" + std::to_string(out[i].stream);
  return d;
}

TEST(ReorderWindowStreams, APendingSlotHoldsBackNoOtherStream) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);
  w.Open(1, 1, 0, 2);
  w.Open(2, 1, 0, 2);
  EXPECT_EQ(w.Arrive(2, P("c")), ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(w.Arrive(1, P("b")), ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(PopStreams(w), (Strings{"b@1/1#2", "c@2/1#2"}));
  // Stream 1's head is still pending: it heads the window (stall handling).
  EXPECT_TRUE(w.HeadPending());
  EXPECT_EQ(w.head_seq(), 0u);
  EXPECT_EQ(w.occupancy(), 1u);  // the released markers do not count
  EXPECT_EQ(w.awaited_occupancy(), 1u);
  EXPECT_FALSE(w.IsOpen(1));
  EXPECT_FALSE(w.IsOpen(2));
  EXPECT_TRUE(w.IsOpen(0));
  EXPECT_EQ(w.Arrive(0, P("a")), ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#1"}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.occupancy(), 0u);
  EXPECT_EQ(w.released_through(), 3u);
  EXPECT_TRUE(w.IsReleased(2));
}

// A stream's own release mark runs ahead of the front's while another
// stream's earlier slot is pending (replay lets its frames go by it).
TEST(ReorderWindowStreams, EachStreamHasItsOwnReleaseMark) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.Open(1, 1, 0, 2);
  w.Open(2, 1, 0, 1);
  w.Open(3, 1, 0, 2);
  EXPECT_EQ(w.SlotStream(2), 1u);
  EXPECT_EQ(w.SlotStream(3), 2u);
  EXPECT_EQ(w.SlotStream(9), kMainStream);  // no such slot
  w.Arrive(1, P("b"));
  w.Arrive(2, P("c"));
  w.Arrive(3, P("d"));
  EXPECT_EQ(PopStreams(w), (Strings{"b@1/1#2", "d@3/1#2"}));
  EXPECT_EQ(w.released_through(), 0u);
  EXPECT_EQ(w.StreamReleasedThrough(2), 4u);
  EXPECT_EQ(w.StreamReleasedThrough(1), 0u);  // slot 2 waits for slot 0
  EXPECT_EQ(w.StreamReleasedThrough(7), 0u);  // a stream it never saw
  w.Arrive(0, P("a"));
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#1", "c@2/1#1"}));
  EXPECT_EQ(w.StreamReleasedThrough(1), 4u);
  EXPECT_EQ(w.StreamReleasedThrough(7), 4u);
}

TEST(ReorderWindowStreams, EachStreamKeepsItsOwnOrder) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.Open(1, 1, 0, 2);
  w.Open(2, 1, 0, 1);  // settled, behind stream 1's pending slot 0
  w.Open(3, 1, 0, 2);
  w.Arrive(3, P("d"));
  w.Arrive(2, P("c"));
  w.Arrive(1, P("b"));
  EXPECT_EQ(PopStreams(w), (Strings{"b@1/1#2", "d@3/1#2"}));
  EXPECT_EQ(w.occupancy(), 2u);
  EXPECT_TRUE(w.IsOpen(2));  // still waits for slot 0
  EXPECT_TRUE(PopStreams(w).empty());
  EXPECT_TRUE(w.Drop(0));
  EXPECT_EQ(PopStreams(w), (Strings{"-@0/0#1", "c@2/1#1"}));
  EXPECT_TRUE(w.empty());
}

TEST(ReorderWindowStreams, MarkersLeaveAsTheFrontSettles) {
  ReorderWindow w;
  w.Open(0, 0, 100, 1);
  w.Open(1, 1, 200, 2);
  w.Open(2, 0, 300, 1);
  w.Arrive(1, P("b"));
  EXPECT_EQ(PopStreams(w, 400), (Strings{"b@1/1#2"}));
  EXPECT_EQ(w.head_seq(), 0u);
  EXPECT_EQ(w.head_since_ns(), 100);
  // A released marker is no slot any more: what comes for it is late.
  EXPECT_EQ(w.Arrive(1, P("again")), ReorderWindow::ArriveResult::kLate);
  EXPECT_FALSE(w.Drop(1));
  EXPECT_FALSE(w.Expire(1));
  EXPECT_FALSE(w.IsPending(1));
  EXPECT_TRUE(w.ExpireHead());
  // The head and the marker behind it leave: slot 2 heads the window from
  // the pop on (it was dispatched at 300).
  EXPECT_EQ(PopStreams(w, 900), (Strings{"-@0/0#1"}));
  EXPECT_EQ(w.occupancy(), 1u);
  EXPECT_TRUE(w.HeadPending());
  EXPECT_EQ(w.head_seq(), 2u);
  EXPECT_EQ(w.head_lane(), 0u);
  EXPECT_EQ(w.head_since_ns(), 900);
  EXPECT_EQ(w.released_through(), 2u);
  EXPECT_TRUE(w.IsReleased(1));
}

TEST(ReorderWindowStreams, AttachmentsAreHeldOnlyByTheirStream) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.Open(1, 1, 0, 2);  // pending
  w.Open(2, 1, 0, 2);
  w.AttachBefore(2, P("e2"), 2);  // behind stream 2's pending slot 1
  w.AttachBefore(2, P("e1"), 1);  // behind stream 1's pending slot 0
  w.AttachBefore(1, P("f2"), 2);  // before slot 1: nothing of stream 2 before
  EXPECT_EQ(PopStreams(w), (Strings{"f2@1/e#2"}));
  w.Arrive(2, P("c"));
  EXPECT_TRUE(PopStreams(w).empty());
  w.Arrive(1, P("b"));
  // Stream 1's slot 0 is still pending: e1 waits, stream 2 goes on.
  EXPECT_EQ(PopStreams(w), (Strings{"b@1/1#2", "e2@2/e#2", "c@2/1#2"}));
  w.Arrive(0, P("a"));
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#1", "e1@2/e#1"}));
  EXPECT_TRUE(w.empty());
}

TEST(ReorderWindowStreams, TrailingAttachmentsAreHeldOnlyByTheirStream) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.Open(1, 1, 0, 2);
  w.AttachBefore(5, P("t1"), 1);
  w.AttachBefore(5, P("t2"), 2);
  w.AttachBefore(5, P("t3"), 3);  // a stream with nothing in the window
  EXPECT_EQ(PopStreams(w), (Strings{"t3@2/e#3"}));
  w.Arrive(1, P("b"));
  EXPECT_EQ(PopStreams(w), (Strings{"b@1/1#2", "t2@2/e#2"}));
  w.Arrive(0, P("a"));
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#1", "t1@2/e#1"}));
  EXPECT_TRUE(w.empty());
}

TEST(ReorderWindowStreams, HeldTrailingAttachmentsGoBeforeALaterSlot) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.AttachBefore(1, P("t1"), 1);
  w.Open(1, 0, 0, 1);  // takes t1 along: it must leave before slot 1
  w.Arrive(1, P("b"));
  EXPECT_TRUE(PopStreams(w).empty());
  w.Arrive(0, P("a"));
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#1", "t1@1/e#1", "b@1/0#1"}));
}

TEST(ReorderWindowStreams, DropStreamForgetsOnlyThatStream) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.Open(1, 1, 0, 2);  // pending
  w.Open(2, 0, 0, 1);  // arrived
  w.Open(3, 1, 0, 2);  // arrived
  w.Open(4, 0, 0, 1);  // dropped already
  w.Arrive(2, P("c"));
  w.Arrive(3, P("d"));
  w.Drop(4);
  w.AttachBefore(3, P("e1"), 1);
  w.AttachBefore(3, P("e2"), 2);
  w.AttachBefore(9, P("t1"), 1);
  w.AttachBefore(9, P("t2"), 2);
  EXPECT_TRUE(PopStreams(w).empty());
  EXPECT_EQ(w.DropStream(1), 2u);  // 0 and 2; 4 was dropped before
  EXPECT_EQ(PopStreams(w), (Strings{"-@0/0#1", "-@2/0#1", "-@4/0#1"}));
  EXPECT_EQ(w.occupancy(), 2u);
  // Stream 2 is untouched.
  EXPECT_EQ(w.DropStream(1), 0u);
  w.Arrive(1, P("b"));
  EXPECT_EQ(PopStreams(w),
            (Strings{"b@1/1#2", "e2@3/e#2", "d@3/1#2", "t2@5/e#2"}));
  EXPECT_TRUE(w.empty());
  // A flushed item that still comes back is late.
  EXPECT_EQ(w.Arrive(2, P("c2")), ReorderWindow::ArriveResult::kLate);
}

TEST(ReorderWindowStreams, ArrivalsForADroppedStreamAreLate) {
  ReorderWindow w;
  w.Open(0, 0, 0, 2);  // pending: keeps the window from moving
  w.Open(1, 0, 0, 1);
  EXPECT_EQ(w.DropStream(1), 1u);
  EXPECT_EQ(w.Arrive(1, P("b")), ReorderWindow::ArriveResult::kLate);
  EXPECT_EQ(PopStreams(w), (Strings{"-@1/0#1"}));
  EXPECT_EQ(w.Arrive(1, P("b")), ReorderWindow::ArriveResult::kLate);
}

TEST(ReorderWindowStreams, InsertedItemsLeaveInTheirStreamsOrder) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.Open(3, 1, 0, 2);
  // Not awaited: placed by seq, held only by its own stream.
  EXPECT_EQ(w.InsertArrived(2, 3, P("x"), 2),
            ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(w.InsertArrived(1, 3, P("y"), 1),
            ReorderWindow::ArriveResult::kStored);
  EXPECT_EQ(w.occupancy(), 4u);
  EXPECT_EQ(w.awaited_occupancy(), 2u);
  EXPECT_EQ(PopStreams(w), (Strings{"x@2/e#2"}));
  EXPECT_EQ(w.occupancy(), 3u);
  EXPECT_EQ(w.awaited_occupancy(), 2u);
  w.Arrive(3, P("d"));
  w.Arrive(0, P("a"));
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#1", "y@1/e#1", "d@3/1#2"}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.awaited_occupancy(), 0u);
}

TEST(ReorderWindowStreams, AnInsertedItemBehindItsStreamsReleaseIsLate) {
  // Stream 2's slot 3 left (stream 1's slot 0 is pending, so it stays as a
  // marker); an unawaited item of stream 2 from before it comes back: it
  // would leave after a later item of its own stream.
  ReorderWindow w;
  w.Open(0, 0, 0, 1);
  w.Open(3, 1, 0, 2);
  w.Arrive(3, P("d"));
  EXPECT_EQ(PopStreams(w), (Strings{"d@3/1#2"}));
  EXPECT_EQ(w.InsertArrived(2, 3, P("x"), 2),
            ReorderWindow::ArriveResult::kLate);
  // One of stream 1 may still take its place.
  EXPECT_EQ(w.InsertArrived(1, 3, P("y"), 1),
            ReorderWindow::ArriveResult::kStored);
  w.Arrive(0, P("a"));
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#1", "y@1/e#1"}));
}

TEST(ReorderWindowStreams, AnInsertedItemBehindItsStreamsEventIsLate) {
  ReorderWindow w;
  w.Open(0, 0, 0, 1);  // pending
  w.Open(3, 1, 0, 2);
  w.AttachBefore(3, P("e"), 2);  // after stream 2's items up to 2
  EXPECT_EQ(PopStreams(w), (Strings{"e@3/e#2"}));
  EXPECT_EQ(w.InsertArrived(2, 3, P("x"), 2),
            ReorderWindow::ArriveResult::kLate);
}

TEST(ReorderWindowStreams, TheMainStreamAloneKeepsGlobalOrder) {
  // kMainStream only: a pending head holds everything (the single-stream
  // window), attachments included.
  ReorderWindow w;
  w.Open(0, 0, 0);
  w.Open(1, 1, 0);
  w.AttachBefore(1, P("e"));
  w.Arrive(1, P("b"));
  EXPECT_TRUE(PopStreams(w).empty());
  EXPECT_EQ(w.occupancy(), 2u);
  w.Arrive(0, P("a"));
  EXPECT_EQ(PopStreams(w), (Strings{"a@0/0#0", "e@1/e#0", "b@1/1#0"}));
}

// --- property test ---

// One expected output entry: an item (or its empty entry) or an attachment.
struct Expected {
  std::string text;  // "-" for an empty (dropped/expired) entry
  bool operator==(const Expected& o) const { return text == o.text; }
};

// Runs one random scenario; returns a failure message or "".
std::string RunScenario(uint32_t seed) {
  std::mt19937 rng(seed);
  const int n = std::uniform_int_distribution<int>(1, 120)(rng);

  ReorderWindow w;
  // Model: per opened slot, the attachments bound before it and its fate.
  struct ModelSlot {
    uint64_t seq;
    std::vector<std::string> before;
    std::vector<std::string> payloads;
    bool given_up = false;  // dropped or expired
    bool settled = false;
    bool released = false;
  };
  std::vector<ModelSlot> model;       // in seq order
  std::vector<std::string> trailing;  // bound to the next slot opened
  std::vector<Released> out;
  uint64_t next_seq = 0;
  int opened = 0;
  int attach_id = 0;
  int64_t now = 0;

  auto first_open_at_or_after = [&](uint64_t seq) -> ModelSlot * {
    for (ModelSlot& m : model)
      if (!m.released && m.seq >= seq)
        return &m;
    return nullptr;
  };
  auto model_pop = [&] {
    // Mirror of what PopSettled releases; used to mark slots released.
    for (ModelSlot& m : model) {
      if (m.released)
        continue;
      if (!m.settled)
        break;
      m.released = true;
    }
  };
  auto open_slots = [&] {
    std::vector<ModelSlot *> v;
    for (ModelSlot& m : model)
      if (!m.released)
        v.push_back(&m);
    return v;
  };

  for (int step = 0; step < 20 * n + 200; ++step) {
    now += std::uniform_int_distribution<int>(0, 3)(rng);
    const int op = std::uniform_int_distribution<int>(0, 99)(rng);
    auto slots = open_slots();
    if (op < 25 && opened < n) {
      next_seq += std::uniform_int_distribution<uint64_t>(1, 3)(rng);  // sparse
      w.Open(next_seq, static_cast<uint32_t>(next_seq % 4), now);
      ModelSlot m{next_seq, std::move(trailing), {}, false, false, false};
      trailing.clear();
      model.push_back(std::move(m));
      opened++;
    } else if (op < 60 && !slots.empty()) {
      ModelSlot *m = slots[std::uniform_int_distribution<size_t>(
          0, slots.size() - 1)(rng)];
      const std::string text = "i" + std::to_string(m->seq) + "." +
                               std::to_string(m->payloads.size());
      const auto r = w.Arrive(m->seq, P(text));
      if (m->given_up) {
        if (r != ReorderWindow::ArriveResult::kLate)
          return "given-up slot accepted an arrival";
      } else {
        if (r != ReorderWindow::ArriveResult::kStored)
          return "arrival not stored";
        m->payloads.push_back(text);
        m->settled = true;
      }
    } else if (op < 68 && !slots.empty()) {
      ModelSlot *m = slots[std::uniform_int_distribution<size_t>(
          0, slots.size() - 1)(rng)];
      const bool pending = !m->settled;
      if (w.Drop(m->seq) != pending)
        return "Drop result mismatch";
      if (pending)
        m->given_up = m->settled = true;
    } else if (op < 71) {
      const bool pending = !slots.empty() && !slots.front()->settled;
      if (w.HeadPending() != pending)
        return "HeadPending mismatch";
      if (w.ExpireHead() != pending)
        return "ExpireHead result mismatch";
      if (pending)
        slots.front()->given_up = slots.front()->settled = true;
    } else if (op < 83) {
      // Attach before a random seq around the live range.
      const uint64_t target =
          std::uniform_int_distribution<uint64_t>(0, next_seq + 4)(rng);
      const std::string text = "e" + std::to_string(attach_id++);
      w.AttachBefore(target, P(text));
      if (ModelSlot *m = first_open_at_or_after(target))
        m->before.push_back(text);
      else
        trailing.push_back(text);
    } else if (op < 86 && !slots.empty()) {
      // A late arrival for an already released slot.
      const auto released =
          std::find_if(model.begin(), model.end(),
                       [](const ModelSlot& m) { return m.released; });
      if (released != model.end() && w.Arrive(released->seq, P("late")) !=
                                         ReorderWindow::ArriveResult::kLate)
        return "arrival after release not late";
    } else {
      // If the window empties, the trailing attachments leave with this pop:
      // still right after every released slot and before the next one opened,
      // which is where the model binds them.
      w.PopSettled(out, now);
      model_pop();
    }
    if (w.occupancy() != open_slots().size())
      return "occupancy mismatch";
  }
  // Settle everything and drain.
  for (ModelSlot *m : open_slots()) {
    if (!m->settled) {
      w.Drop(m->seq);
      m->given_up = m->settled = true;
    }
  }
  w.PopSettled(out, now);
  if (!w.empty())
    return "window not empty after settling everything";

  std::vector<std::string> expected;
  for (const ModelSlot& m : model) {
    for (const std::string& b : m.before)
      expected.push_back(b);
    if (m.payloads.empty())
      expected.push_back("-");
    else
      for (const std::string& p : m.payloads)
        expected.push_back(p);
  }
  for (const std::string& t : trailing)
    expected.push_back(t);

  std::vector<std::string> got;
  uint64_t last_item_seq = 0;
  bool any_item = false;
  for (const Released& r : out) {
    got.push_back(TagText(r));
    if (r.lane != kNoLane) {
      if (any_item && r.seq < last_item_seq)
        return "item seq went backwards";
      any_item = true;
      last_item_seq = r.seq;
      if (r.lane != r.seq % 4)
        return "wrong lane on a released item";
    } else if (!r.payload) {
      return "empty attachment";
    }
  }
  if (got != expected) {
    std::string msg = "order mismatch\n got:";
    for (const auto& g : got)
      msg += " " + g;
    msg += "\n exp:";
    for (const auto& e : expected)
      msg += " " + e;
    return msg;
  }
  return "";
}

TEST(ReorderWindowProperty, RandomInterleavingsKeepOrderAndLoseNothing) {
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    const std::string failure = RunScenario(seed);
    ASSERT_EQ(failure, "") << "seed " << seed;
  }
}

}  // namespace
}  // namespace gpufan
