// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanin behind a gpufanout, with test branches in between that decide in
// which order the lanes return (docs/elements.md; scenario numbers: the
// Scenarios of docs/testing.md).
#include <algorithm>
#include <condition_variable>
#include <future>
#include <set>
#include <string>
#include <thread>

#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

FanRigOptions Hold(guint lanes) {
  FanRigOptions o;
  o.lanes = lanes;
  o.mode = Branch::Mode::kHold;
  return o;
}

FanRigOptions Passthrough(guint lanes) {
  FanRigOptions o;
  o.lanes = lanes;
  return o;
}

GstEvent *Eos() {
  return gst_event_new_eos();
}

// Waits until every branch holds an EOS (everything the fan-out sent is held).
::testing::AssertionResult WaitAllHeldEos(FanRig& rig) {
  for (guint i = 0; i < rig.lanes(); i++)
    if (!rig.branch(i).WaitHeldEvent(GST_EVENT_EOS))
      return ::testing::AssertionFailure()
             << "branch " << i
             << " never got EOS: " << rig.branch(i).seen().Summary();
  return ::testing::AssertionSuccess();
}

// The branch whose lane carried item 0 (by data index or GAP timestamp).
guint LaneOfFirstItem(FanRig& rig) {
  for (guint i = 0; i < rig.lanes(); i++)
    for (const Entry& e : rig.branch(i).seen().Snapshot())
      if ((e.is_buffer || e.type() == GST_EVENT_GAP) && e.pts_index == 0)
        return i;
  ADD_FAILURE() << "no lane carried item 0";
  return 0;
}

// Releases every lane except the one carrying item 0, then that one: the
// fan-in gets everything out of order.
void ReleaseFirstItemLast(FanRig& rig) {
  const guint first = LaneOfFirstItem(rig);
  for (guint i = 0; i < rig.lanes(); i++)
    if (i != first)
      rig.branch(i).ReleaseAll();
  std::this_thread::sleep_for(kSettle);
  EXPECT_EQ(rig.out().log().Buffers(), 0u)
      << "the fan-in let items out before item 0 arrived: "
      << rig.out().log().Summary();
  rig.branch(first).ReleaseAll();
}

// Polls the fan-in's statistics (bounded) until lane `id`'s `field` reaches
// `want`; returns the last value seen.
guint64 WaitLaneStat(GstElement *fanin, guint id, const char *field,
                     guint64 want) {
  guint64 value = 0;
  PollUntil([&] {
    GstStructure *s = GetStats(fanin);
    const GstStructure *lane = s ? StatsLaneById(s, id) : nullptr;
    guint64 v = 0;
    if (lane && gst_structure_get_uint64(lane, field, &v))
      value = v;
    if (s)
      gst_structure_free(s);
    return value >= want;
  });
  return value;
}

// The stall tests run with an unreachable stall-timeout until no healthy
// item is pending any more; then it may be as short as the property allows,
// since only the stuck lane's slots can run out.
void ShortenStallTimeout(FanRig& rig) {
  g_object_set(rig.fanin(), "stall-timeout", static_cast<guint64>(GST_MSECOND),
               nullptr);
}

}  // namespace

// ------------------------------------------------------------ properties ---

TEST(GpuFaninProperties, DefaultsRangesAndFlags) {
  GstElement *in = gst_element_factory_make("gpufanin", nullptr);
  ASSERT_NE(in, nullptr);
  GObjectClass *klass = G_OBJECT_GET_CLASS(in);
  GParamSpec *st = g_object_class_find_property(klass, "stall-timeout");
  ASSERT_NE(st, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_UINT64(st)) << G_PARAM_SPEC_TYPE_NAME(st);
  EXPECT_EQ(G_PARAM_SPEC_UINT64(st)->minimum, GST_MSECOND);
  EXPECT_EQ(G_PARAM_SPEC_UINT64(st)->maximum, 3600 * GST_SECOND);
  EXPECT_EQ(G_PARAM_SPEC_UINT64(st)->default_value, 2 * GST_SECOND);
  GParamSpec *stats = g_object_class_find_property(klass, "stats");
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(stats->value_type, GST_TYPE_STRUCTURE);
  EXPECT_FALSE(stats->flags & G_PARAM_WRITABLE);
  gst_object_unref(in);
}

TEST(GpuFaninProperties, StatsAreAnEmptyStructureBeforePairing) {
  GstElement *in = gst_element_factory_make("gpufanin", nullptr);
  ASSERT_NE(in, nullptr);
  GstStructure *s = GetStats(in);
  ASSERT_NE(s, nullptr)
      << "stats must be a structure, not NULL, before pairing";
  EXPECT_EQ(gst_structure_n_fields(s), 0);
  gst_structure_free(s);
  gst_object_unref(in);
}

TEST(GpuFaninPads, RequestNamingLowestFreeAndExplicit) {
  CheckRequestPadNaming("gpufanin", "sink_", 7);
}

TEST(GpuFaninPads, StreamSrcPadsNamingLowestFreeAndExplicit) {
  CheckRequestPadNaming("gpufanin", "src_", 9);
}

TEST(GpuFaninPads, UnknownTemplateRefused) {
  GstElement *in = gst_element_factory_make("gpufanin", nullptr);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(gst_element_request_pad_simple(in, "video_%u"), nullptr);
  EXPECT_EQ(in->numsinkpads, 0);
  gst_object_unref(in);
}

// ----------------------------------------------------------------- order ---

TEST(GpuFaninOrder, LanesReturningOutOfOrderComeOutInInputOrder) {
  for (bool crossed : {false, true}) {
    SCOPED_TRACE(crossed ? "lanes crossed (src_i feeds sink_(n-1-i))"
                         : "lanes straight");
    FanRigOptions o = Hold(3);
    o.crossed = crossed;
    FanRig rig(o);
    ASSERT_TRUE(rig.ok());
    ASSERT_TRUE(rig.Play());
    ASSERT_TRUE(rig.source().Start());
    ASSERT_TRUE(PushRange(rig.source(), 0, 12));
    ASSERT_TRUE(rig.source().PushEvent(Eos()));
    ASSERT_TRUE(WaitAllHeldEos(rig));
    for (guint i = 0; i < rig.lanes(); i++) {
      for (const Entry& e : rig.branch(i).seen().Snapshot())
        if (e.is_buffer) {
          EXPECT_GE(e.n_metas, 1u) << "buffer " << e.index << " has no meta";
        }
    }
    ReleaseFirstItemLast(rig);
    ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
        << rig.out().log().Summary();
    EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 12));
    EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);
  }
}

// A serialized query (here DRAIN) coming out of a branch must not overtake
// what that branch delivered before it: it waits until those buffers have
// left the reorder window, then goes downstream.
TEST(GpuFaninQueries, DrainWaitsForWhatItsLaneDeliveredBefore) {
  FanRig rig(Hold(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 4));  // lane 0: 0, 2; lane 1: 1, 3
  ASSERT_TRUE(rig.branch(0).WaitHeldBuffers(2));
  ASSERT_TRUE(rig.branch(1).WaitHeldBuffers(2));
  const guint first = LaneOfFirstItem(rig);
  const guint other = 1 - first;
  rig.branch(other).ReleaseAll();  // 1 and 3 wait for 0 in the window

  std::promise<std::vector<int64_t>> out_at_return;
  std::thread drain([&] {
    GstQuery *q = gst_query_new_drain();
    gst_pad_peer_query(rig.branch(other).src(), q);
    gst_query_unref(q);
    out_at_return.set_value(rig.out().log().BufferIndices());
  });
  std::future<std::vector<int64_t>> returned = out_at_return.get_future();
  EXPECT_EQ(returned.wait_for(kSettle), std::future_status::timeout)
      << "DRAIN overtook the buffers its lane delivered before it";
  rig.branch(first).ReleaseAll();
  ASSERT_EQ(returned.wait_for(kWait), std::future_status::ready)
      << "DRAIN never returned";
  drain.join();
  const std::vector<int64_t> seen = returned.get();
  EXPECT_TRUE(std::count(seen.begin(), seen.end(), 1) == 1 &&
              std::count(seen.begin(), seen.end(), 3) == 1)
      << "DRAIN returned before its lane's buffers 1 and 3 went out: "
      << rig.out().log().Summary();
}

// Scenario 28 at pad level: the branches replace every buffer by a new one
// without metas; lane FIFO order and PTS must still identify the items.
TEST(GpuFaninOrder, BranchesThatDropTheMetaStillComeOutInOrder) {
  FanRig rig(Hold(2));
  ASSERT_TRUE(rig.ok());
  for (guint i = 0; i < 2; i++) {
    rig.branch(i).SetTransform([](GstBuffer *b) {
      GstBuffer *fresh = CopyWithoutMetas(b);
      gst_buffer_unref(b);
      return fresh;
    });
  }
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 10));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(WaitAllHeldEos(rig));
  for (guint i = 0; i < 2; i++)
    for (const Entry& e : rig.branch(i).seen().Snapshot())
      if (e.is_buffer) {
        ASSERT_EQ(e.n_metas, 0u);
      }
  ReleaseFirstItemLast(rig);
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << rig.out().log().Summary();
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 10));
}

// Scenario 17.
TEST(GpuFaninOrder, GapEventsAreOrderedLikeBuffers) {
  FanRig rig(Hold(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  for (uint64_t i = 0; i < 8; i++) {
    if (i % 2 == 0)
      ASSERT_TRUE(PushRange(rig.source(), i, 1));
    else
      ASSERT_TRUE(
          rig.source().PushEvent(gst_event_new_gap(i * kFrame, kFrame)));
  }
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(WaitAllHeldEos(rig));
  ReleaseFirstItemLast(rig);
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << rig.out().log().Summary();
  EXPECT_TRUE(IsSequence(rig.out().log().DataItemPtsIndices(), 0, 8))
      << rig.out().log().Summary();
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_GAP), 4u);
}

// --------------------------------------------------------- EOS (15, 16) ---

TEST(GpuFaninEos, EosOnlyAfterEveryPadHasEos) {
  FanRig rig(Hold(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 4));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(WaitAllHeldEos(rig));
  rig.branch(0).ReleaseAll();
  rig.branch(1).ReleaseUntil(GST_EVENT_EOS);
  ASSERT_TRUE(rig.out().log().WaitBuffers(4)) << rig.out().log().Summary();
  std::this_thread::sleep_for(kSettle);
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 0u)
      << "EOS while sink_1 is not EOS";

  // A buffer on a pad after its EOS returns EOS.
  EXPECT_EQ(gst_pad_chain(rig.fanin_pad(0), MakeIndexedBuffer(99)),
            GST_FLOW_EOS);

  rig.branch(1).ReleaseAll();
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS));
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 4));
}

TEST(GpuFaninEos, FlushClearsEos) {
  FanRig rig(Passthrough(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 4));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS));

  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_start()));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_stop(TRUE)));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_FLUSH_STOP))
      << rig.out().log().Summary();
  ASSERT_TRUE(rig.source().PushSegment());
  ASSERT_TRUE(PushRange(rig.source(), 4, 4));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS, 2))
      << rig.out().log().Summary();
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 8));
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_FLUSH_START), 1u);
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_FLUSH_STOP), 1u);
}

TEST(GpuFaninEos, ReleasingTheLastNonEosPadEmitsEos) {
  FanRig rig(Hold(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 4));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(WaitAllHeldEos(rig));
  rig.branch(0).ReleaseAll();
  rig.branch(1).ReleaseUntil(GST_EVENT_EOS);
  ASSERT_TRUE(rig.out().log().WaitBuffers(4)) << rig.out().log().Summary();
  std::this_thread::sleep_for(kSettle);
  ASSERT_EQ(rig.out().log().Events(GST_EVENT_EOS), 0u);

  rig.ReleaseFaninPad(1);
  EXPECT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << "no EOS after releasing the only pad without EOS: "
      << rig.out().log().Summary();
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);
}

// Scenario 16, looped.
TEST(GpuFaninEos, TwoLanesEosAtTheSameMomentGiveExactlyOneEos) {
  for (int iteration = 0; iteration < 500; iteration++) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    FanRig rig(Hold(2));
    ASSERT_TRUE(rig.ok());
    ASSERT_TRUE(rig.Play());
    ASSERT_TRUE(rig.source().Start());
    ASSERT_TRUE(PushRange(rig.source(), 0, 2));
    ASSERT_TRUE(rig.source().PushEvent(Eos()));
    ASSERT_TRUE(WaitAllHeldEos(rig));
    rig.branch(0).ReleaseUntil(GST_EVENT_EOS);
    rig.branch(1).ReleaseUntil(GST_EVENT_EOS);
    ASSERT_TRUE(rig.out().log().WaitBuffers(2));

    std::atomic<int> ready{0};
    auto release = [&](guint lane) {
      ready++;
      while (ready.load() < 2)
        std::this_thread::yield();
      rig.branch(lane).ReleaseAll();
    };
    std::thread a(release, 0), b(release, 1);
    a.join();
    b.join();
    ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
        << rig.out().log().Summary();
    ASSERT_TRUE(rig.Stop());
    ASSERT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u)
        << rig.out().log().Summary();
    ASSERT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 2));
  }
}

// ----------------------------------------------------------- flush (19) ---

TEST(GpuFaninFlush, OneFlushStartAtOnceAndFlushStopAfterEveryLane) {
  FanRigOptions o = Passthrough(2);
  o.capture_flush = true;
  FanRig rig(o);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 4));
  ASSERT_TRUE(rig.out().log().WaitBuffers(4));

  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_start()));
  for (guint i = 0; i < 2; i++)
    ASSERT_TRUE(rig.branch(i).WaitCapturedFlush(GST_EVENT_FLUSH_START))
        << "lane " << i;
  ASSERT_TRUE(rig.branch(0).ForwardCapturedFlush(GST_EVENT_FLUSH_START));
  EXPECT_TRUE(rig.out().log().WaitEvents(GST_EVENT_FLUSH_START))
      << "FLUSH_START must go downstream at once, on the first pad that gets "
         "it";
  ASSERT_TRUE(rig.branch(1).ForwardCapturedFlush(GST_EVENT_FLUSH_START));
  std::this_thread::sleep_for(kSettle);
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_FLUSH_START), 1u);

  for (guint i = 0; i < 2; i++) {
    EXPECT_EQ(gst_pad_chain(rig.fanin_pad(i), MakeIndexedBuffer(50 + i)),
              GST_FLOW_FLUSHING)
        << "push on flushing sink pad " << i;
  }

  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_stop(TRUE)));
  for (guint i = 0; i < 2; i++)
    ASSERT_TRUE(rig.branch(i).WaitCapturedFlush(GST_EVENT_FLUSH_STOP))
        << "lane " << i;
  ASSERT_TRUE(rig.branch(0).ForwardCapturedFlush(GST_EVENT_FLUSH_STOP));
  std::this_thread::sleep_for(kSettle);
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_FLUSH_STOP), 0u)
      << "FLUSH_STOP went out before every lane was flushed";
  ASSERT_TRUE(rig.branch(1).ForwardCapturedFlush(GST_EVENT_FLUSH_STOP));
  EXPECT_TRUE(rig.out().log().WaitEvents(GST_EVENT_FLUSH_STOP));
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_FLUSH_STOP), 1u);

  ASSERT_TRUE(rig.source().PushSegment());
  ASSERT_TRUE(PushRange(rig.source(), 4, 4));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << rig.out().log().Summary();
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 8));
}

// -------------------------------------------------- pads go away (24) ---

// These keep the rig's unreachable stall-timeout: a released pad's items are
// given up by the release itself (docs/elements.md), not by waiting, and no
// healthy item can time out however slow the machine, so the share the other
// lanes deliver is theirs in full.

// The application unlinks a branch from the fan-in, then releases the pad,
// while output runs: the branch's lane becomes NOT_LINKED, the other lanes
// carry on, the output stays ordered and ends with EOS.
TEST(GpuFaninPads, UnlinkingAndReleasingAPadWhileOutputRunsKeepsTheRestGoing) {
  FanRig rig(Passthrough(3));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  rig.source().PushIndicesAsync(0, 300, true);
  ASSERT_TRUE(rig.out().log().WaitBuffers(50));
  ASSERT_TRUE(gst_pad_unlink(rig.branch(2).src(), rig.fanin_pad(2)));
  rig.ReleaseFaninPad(2);
  EXPECT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS, 1, kLongWait))
      << "no EOS after releasing sink of lane 2 mid-stream: "
      << rig.out().log().Summary();
  ASSERT_TRUE(rig.source().WaitAsyncResults(300));
  for (GstFlowReturn r : rig.source().AsyncResults())
    EXPECT_EQ(r, GST_FLOW_OK) << "NOT_LINKED only when every lane is unlinked";
  std::vector<int64_t> out = rig.out().log().BufferIndices();
  EXPECT_TRUE(IsStrictlyIncreasing(out));
  EXPECT_GE(out.size(), 150u) << "lanes 0 and 1 deliver at least their share";
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);
}

// The same without unlinking first: while sink_2 deactivates, lane 2's
// branch gets FLUSHING, which the fan-out passes upstream (documented
// combining, as tee does), so the stream may stop; never an error, and the
// output stays ordered and ends.
TEST(GpuFaninPads, ReleasingALinkedPadWhileOutputRunsKeepsOrderAndEnds) {
  FanRig rig(Passthrough(3));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  rig.source().PushIndicesAsync(0, 300, true);
  ASSERT_TRUE(rig.out().log().WaitBuffers(50));
  rig.ReleaseFaninPad(2);
  EXPECT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS, 1, kLongWait))
      << "no EOS after releasing sink of lane 2 mid-stream: "
      << rig.out().log().Summary();
  ASSERT_TRUE(rig.source().WaitAsyncResults(300));
  for (GstFlowReturn r : rig.source().AsyncResults())
    EXPECT_TRUE(r == GST_FLOW_OK || r == GST_FLOW_FLUSHING ||
                r == GST_FLOW_NOT_LINKED)
        << gst_flow_get_name(r);
  EXPECT_TRUE(IsStrictlyIncreasing(rig.out().log().BufferIndices()));
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);
}

TEST(GpuFaninPads, ReleasingAPadDuringAFlushKeepsOrderAndEnds) {
  FanRig rig(Passthrough(3));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 21));
  ASSERT_TRUE(rig.out().log().WaitBuffers(21));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_start()));
  rig.ReleaseFaninPad(1);
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_stop(TRUE)));
  ASSERT_TRUE(rig.source().PushSegment());
  rig.source().PushIndicesAsync(100, 60, true);
  EXPECT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS, 1, kLongWait))
      << rig.out().log().Summary();
  ASSERT_TRUE(rig.source().WaitAsyncResults(60));
  std::vector<int64_t> out = rig.out().log().BufferIndices();
  EXPECT_TRUE(IsStrictlyIncreasing(out));
  const size_t after_flush =
      std::count_if(out.begin(), out.end(), [](int64_t i) { return i >= 100; });
  EXPECT_GE(after_flush, 30u) << "two live lanes deliver at least their share";
}

// ------------------------------------------------------- events (26) ---

TEST(GpuFaninEvents, CapsChangeReachesEveryLaneAndGoesOutOncePerChange) {
  const char *caps_b =
      "video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1";
  FanRig rig(Passthrough(3));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start(kTestCaps));
  ASSERT_TRUE(PushRange(rig.source(), 0, 10));
  GstCaps *b = gst_caps_from_string(caps_b);
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_caps(b)));
  ASSERT_TRUE(PushRange(rig.source(), 10, 10));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << rig.out().log().Summary();

  GstCaps *a = gst_caps_from_string(kTestCaps);
  auto caps_of = [](const Entry& e) {
    GstCaps *c;
    gst_event_parse_caps(e.event, &c);
    return c;
  };
  for (guint i = 0; i < 3; i++) {
    std::vector<Entry> seen = rig.branch(i).seen().Snapshot();
    std::vector<GstCaps *> caps;
    bool b_before_new_buffers = true;
    for (const Entry& e : seen) {
      if (e.type() == GST_EVENT_CAPS)
        caps.push_back(caps_of(e));
      if (e.is_buffer && e.index >= 10)
        b_before_new_buffers &=
            !caps.empty() && gst_caps_is_equal(caps.back(), b);
    }
    ASSERT_EQ(caps.size(), 2u)
        << "lane " << i << ": " << rig.branch(i).seen().Summary();
    EXPECT_TRUE(gst_caps_is_equal(caps[0], a)) << "lane " << i;
    EXPECT_TRUE(gst_caps_is_equal(caps[1], b)) << "lane " << i;
    EXPECT_TRUE(b_before_new_buffers) << "lane " << i;
  }

  std::vector<Entry> out = rig.out().log().Snapshot();
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_CAPS), 2u)
      << "one CAPS per change, not per lane switch: "
      << rig.out().log().Summary();
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_SEGMENT), 1u)
      << rig.out().log().Summary();
  GstCaps *current = nullptr;
  for (const Entry& e : out) {
    if (e.type() == GST_EVENT_CAPS)
      current = caps_of(e);
    if (e.is_buffer) {
      ASSERT_NE(current, nullptr) << "buffer " << e.index << " before any caps";
      EXPECT_TRUE(gst_caps_is_equal(current, e.index < 10 ? a : b))
          << "buffer " << e.index << " goes out under the wrong caps";
    }
  }
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 20));
  gst_caps_unref(a);
  gst_caps_unref(b);
}

TEST(GpuFaninEvents, SerializedEventKeepsItsPlaceAndGoesOutOnce) {
  FanRig rig(Hold(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 5));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_custom(
      GST_EVENT_CUSTOM_DOWNSTREAM, gst_structure_new_empty("test-marker"))));
  ASSERT_TRUE(PushRange(rig.source(), 5, 5));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(WaitAllHeldEos(rig));
  ReleaseFirstItemLast(rig);
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << rig.out().log().Summary();
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_CUSTOM_DOWNSTREAM), 1u)
      << rig.out().log().Summary();
  std::vector<Entry> out = rig.out().log().Snapshot();
  bool marker_seen = false;
  for (const Entry& e : out) {
    if (e.type() == GST_EVENT_CUSTOM_DOWNSTREAM)
      marker_seen = true;
    if (e.is_buffer) {
      EXPECT_EQ(marker_seen, e.index >= 5)
          << "marker misplaced: " << rig.out().log().Summary();
    }
  }
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 10));
}

TEST(GpuFaninEvents, OutputTaskPostsStreamStatus) {
  FanRig rig(Passthrough(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 2));
  ASSERT_TRUE(rig.out().log().WaitBuffers(2));
  GstPad *src = gst_element_get_static_pad(rig.fanin(), "src");
  GstMessage *m = rig.bus().WaitFor([src](GstMessage *m) {
    if (GST_MESSAGE_TYPE(m) != GST_MESSAGE_STREAM_STATUS)
      return false;
    GstStreamStatusType type;
    GstElement *owner;
    gst_message_parse_stream_status(m, &type, &owner);
    return type == GST_STREAM_STATUS_TYPE_ENTER &&
           GST_MESSAGE_SRC(m) == GST_OBJECT(src);
  });
  EXPECT_NE(m, nullptr)
      << "no stream-status ENTER from the fan-in's src pad task";
  gst_object_unref(src);
}

// -------------------------------------------------------- drops (21) ---

TEST(GpuFaninDrops, DroppedFramesDoNotStallTheOutputAndAreCounted) {
  FanRig rig(
      Passthrough(2));  // stall-timeout 30 s: only proof by FIFO/EOS can help
  ASSERT_TRUE(rig.ok());
  auto dropped = std::make_shared<std::vector<int64_t>>();
  auto mutex = std::make_shared<std::mutex>();
  auto seen = std::make_shared<std::atomic<int>>(
      0);  // shared: the branch copies its transform
  rig.branch(1).SetTransform(
      [dropped, mutex, seen](GstBuffer *b) -> GstBuffer * {
        if ((*seen)++ % 2 == 0) {
          std::lock_guard<std::mutex> lock(*mutex);
          dropped->push_back(DataIndex(b));
          gst_buffer_unref(b);
          return nullptr;
        }
        return b;
      });
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 20))
      << "out: " << rig.out().log().Summary()
      << "\nlane 0: " << rig.branch(0).seen().Summary()
      << "\nlane 1: " << rig.branch(1).seen().Summary();
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << "stalled on a dropped frame: " << rig.out().log().Summary();

  std::vector<int64_t> out = rig.out().log().BufferIndices();
  std::set<int64_t> expected;
  for (int64_t i = 0; i < 20; i++)
    expected.insert(i);
  {
    std::lock_guard<std::mutex> lock(*mutex);
    ASSERT_FALSE(dropped->empty());
    for (int64_t d : *dropped)
      expected.erase(d);
  }
  EXPECT_TRUE(IsStrictlyIncreasing(out));
  EXPECT_EQ(std::vector<int64_t>(expected.begin(), expected.end()), out);

  GstStructure *s = GetStats(rig.fanin());
  ASSERT_TRUE(HasStatsShape(s, 2));
  const GstStructure *lane1 = StatsLaneById(s, 1);
  ASSERT_NE(lane1, nullptr);
  ExpectLaneCounts(lane1, {.dropped = dropped->size(), .timed_out = 0});
  EXPECT_EQ(SumLanesU64(s, "completed"), out.size());
  gst_structure_free(s);
}

// Scenario 22: a lane that stops answering costs a bounded wait; the output
// continues past its items, which count as timed out. The fan-out's input
// ended and every item is accounted for, so EOS goes out without waiting
// for the stalled lane's own EOS (with a warning naming it); its items that
// come back after all are late and never go out.
//
// The stall timeout gives up whatever slot is pending when it runs out, so it
// must not run while the test itself holds the live lane (pushing and
// waiting for EOS can take any time on a loaded machine). It starts out
// unreachable and is shortened only once every live item is in the fan-in:
// then the stalled lane's items are the only pending slots, and only they can
// be given up, however slow the machine is.
TEST(GpuFaninStall, AStalledLaneIsSkippedAfterTheStallTimeout) {
  FanRig rig(Hold(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 6));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(WaitAllHeldEos(rig));
  const guint stalled = 1 - LaneOfFirstItem(rig);
  const guint live = 1 - stalled;
  std::vector<int64_t> expected;
  for (const Entry& e : rig.branch(live).seen().Snapshot())
    if (e.is_buffer)
      expected.push_back(e.index);
  // Pushes from this thread: when it returns, the fan-in has every live item
  // (its chain hands them to the window before it returns) and the live EOS.
  rig.branch(live).ReleaseAll();
  ShortenStallTimeout(rig);
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << "no EOS although every item is accounted for: "
      << rig.out().log().Summary();
  EXPECT_EQ(rig.out().log().BufferIndices(), expected);
  const guint64 stalled_items = 6u - expected.size();
  ASSERT_EQ(WaitLaneStat(rig.fanin(), stalled, "timed-out", stalled_items),
            stalled_items)
      << "the stalled lane's items were not all given up";
  GstElement *fanin = rig.fanin();
  GstMessage *warning = rig.bus().WaitFor([fanin](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           GST_MESSAGE_SRC(m) == GST_OBJECT(fanin);
  });
  ASSERT_NE(warning, nullptr) << "no warning names the lane without EOS";
  const std::string text = BusLog::ErrorText(warning);
  EXPECT_NE(text.find("sink_" + std::to_string(stalled)), std::string::npos)
      << text;
  EXPECT_NE(text.find("stalled"), std::string::npos) << text;

  rig.branch(stalled)
      .ReleaseAll();  // they come back after their slots were given up
  EXPECT_EQ(WaitLaneStat(rig.fanin(), stalled, "late", stalled_items),
            stalled_items);
  EXPECT_EQ(rig.out().log().BufferIndices(), expected)
      << "late items must not go out";
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);

  GstStructure *s = GetStats(rig.fanin());
  ASSERT_TRUE(HasStatsShape(s, 2));
  const GstStructure *lane = StatsLaneById(s, stalled);
  ASSERT_NE(lane, nullptr);
  ExpectLaneCounts(lane, {.timed_out = stalled_items,
                          .late = stalled_items,
                          .stalls = 1});
  gst_structure_free(s);
}

// ----------------------------------------------------- stress (scenario 4) ---

// funnel.c test_funnel_stress: one thread requests and releases sink pads
// (half of them linked to a test branch meanwhile) while the two lanes push
// into the fan-in from their own threads, for a second (and at least one
// round of the requester). Nothing is lost or reordered, every push returns
// OK and the stream ends in one EOS.
TEST(GpuFaninStress, RequestAndReleasePadsWhileTwoLanesPush) {
  FanRig rig(Passthrough(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  GstElement *in = rig.fanin();
  std::atomic<bool> stop{false};
  std::atomic<int> cycles{0}, refused{0};
  std::thread requester([&] {
    for (int i = 0; !stop; i++) {
      GstPad *pad = gst_element_request_pad_simple(in, "sink_%u");
      if (!pad) {
        refused++;
        return;
      }
      if (i % 2 == 0) {
        Branch branch("stress");
        if (gst_pad_link(branch.src(), pad) == GST_PAD_LINK_OK)
          gst_pad_unlink(branch.src(), pad);
      }
      gst_element_release_request_pad(in, pad);
      gst_object_unref(pad);
      cycles++;
    }
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      if (thread.joinable())
        thread.join();
    }
  } joiner{stop, requester};

  uint64_t pushed = 0;
  // A second, and then on until the requester has done a round (bounded):
  // how many rounds fit in a second depends on the machine.
  const auto start = std::chrono::steady_clock::now();
  auto go_on = [&] {
    const auto now = std::chrono::steady_clock::now();
    return now < start + std::chrono::seconds(1) ||
           (cycles == 0 && refused == 0 && now < start + kWait);
  };
  while (go_on()) {
    rig.source().PushIndicesAsync(pushed, 50, false);
    pushed += 50;
    ASSERT_TRUE(rig.source().WaitAsyncResults(pushed))
        << "pushes blocked while pads come and go: "
        << rig.out().log().Summary();
  }
  stop = true;
  requester.join();
  EXPECT_EQ(refused.load(), 0) << "a sink_%u request was refused";
  EXPECT_GT(cycles.load(), 0);
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS, 1, kLongWait))
      << rig.out().log().Summary();
  for (GstFlowReturn r : rig.source().AsyncResults())
    ASSERT_EQ(r, GST_FLOW_OK) << gst_flow_get_name(r);
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, pushed));
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);
  EXPECT_EQ(rig.bus().CountType(GST_MESSAGE_ERROR), 0u)
      << rig.bus().ErrorsText();
}

// ------------------------------------------------------ latency (scenario 23)
// ---

namespace {

// What a branch answers to a LATENCY query that reaches its src pad from the
// fan-in (a probe on that pad: the branch itself forwards queries).
struct LatencyAnswer {
  gboolean live = FALSE;
  GstClockTime min = 0;
  GstClockTime max = GST_CLOCK_TIME_NONE;
};

GstPadProbeReturn AnswerLatency(GstPad *, GstPadProbeInfo *info,
                                gpointer data) {
  GstQuery *query = GST_PAD_PROBE_INFO_QUERY(info);
  if (GST_QUERY_TYPE(query) != GST_QUERY_LATENCY)
    return GST_PAD_PROBE_OK;
  const auto *answer = static_cast<const LatencyAnswer *>(data);
  gst_query_set_latency(query, answer->live, answer->min, answer->max);
  return GST_PAD_PROBE_HANDLED;
}

void AnswerLatencyOn(GstPad *branch_src, const LatencyAnswer *answer) {
  gst_pad_add_probe(
      branch_src,
      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_QUERY_UPSTREAM |
                                   GST_PAD_PROBE_TYPE_PUSH),
      AnswerLatency, const_cast<LatencyAnswer *>(answer), nullptr);
}

struct Latency {
  bool answered = false;
  gboolean live = FALSE;
  GstClockTime min = 0, max = 0;
};

// A LATENCY query from downstream of the fan-in.
Latency QueryLatency(FanRig& rig) {
  Latency l;
  GstQuery *q = gst_query_new_latency();
  l.answered = gst_pad_peer_query(rig.out().pad(), q);
  if (l.answered)
    gst_query_parse_latency(q, &l.live, &l.min, &l.max);
  gst_query_unref(q);
  return l;
}

std::string Describe(const Latency& l) {
  if (!l.answered)
    return "not answered";
  gchar *min = g_strdup_printf("%" GST_TIME_FORMAT, GST_TIME_ARGS(l.min));
  gchar *max = g_strdup_printf("%" GST_TIME_FORMAT, GST_TIME_ARGS(l.max));
  std::string s =
      std::string(l.live ? "live" : "not live") + " min " + min + " max " + max;
  g_free(min);
  g_free(max);
  return s;
}

}  // namespace

// min = the largest lane min, max = the smallest lane max (NONE if no lane
// has one), live if any lane is; asked again, the answer follows the lanes
// that are there now (a released pad no longer counts, a new one does).
TEST(GpuFaninLatency, LargestLaneMinSmallestLaneMaxFollowingTheLanes) {
  constexpr GstClockTime ms = GST_MSECOND;
  LatencyAnswer answers[3];
  answers[0] = {FALSE, 10 * ms, 100 * ms};
  answers[1] = {TRUE, 30 * ms, 50 * ms};
  answers[2] = {FALSE, 20 * ms, GST_CLOCK_TIME_NONE};
  LatencyAnswer added_answer{FALSE, 40 * ms, 60 * ms};
  FanRig rig(Passthrough(3));
  ASSERT_TRUE(rig.ok());
  for (guint i = 0; i < 3; i++)
    AnswerLatencyOn(rig.branch(i).src(), &answers[i]);
  ASSERT_TRUE(rig.Play());

  Latency l = QueryLatency(rig);
  ASSERT_TRUE(l.answered);
  EXPECT_TRUE(l.live) << "lane 1 is live: " << Describe(l);
  EXPECT_EQ(l.min, 30 * ms) << Describe(l);
  EXPECT_EQ(l.max, 50 * ms) << Describe(l);

  // No lane with a maximum: NONE.
  answers[0].max = answers[1].max = GST_CLOCK_TIME_NONE;
  answers[1].live = FALSE;
  l = QueryLatency(rig);
  ASSERT_TRUE(l.answered);
  EXPECT_FALSE(l.live) << Describe(l);
  EXPECT_EQ(l.min, 30 * ms) << Describe(l);
  EXPECT_EQ(l.max, GST_CLOCK_TIME_NONE) << Describe(l);
  answers[0].max = 100 * ms;
  answers[1].max = 50 * ms;

  // Lane 1 (the largest min, the smallest max) goes away.
  rig.ReleaseFaninPad(1);
  l = QueryLatency(rig);
  ASSERT_TRUE(l.answered);
  EXPECT_EQ(l.min, 20 * ms) << "after releasing sink_1: " << Describe(l);
  EXPECT_EQ(l.max, 100 * ms) << "after releasing sink_1: " << Describe(l);

  // A lane comes: a new sink pad, fed by a branch with more latency.
  GstPad *pad = gst_element_request_pad_simple(rig.fanin(), "sink_%u");
  ASSERT_NE(pad, nullptr);
  {
    Branch added("added");
    AnswerLatencyOn(added.src(), &added_answer);
    ASSERT_EQ(gst_pad_link(added.src(), pad), GST_PAD_LINK_OK);
    l = QueryLatency(rig);
    ASSERT_TRUE(l.answered);
    EXPECT_EQ(l.min, 40 * ms) << "after adding a lane: " << Describe(l);
    EXPECT_EQ(l.max, 60 * ms) << "after adding a lane: " << Describe(l);
    gst_pad_unlink(added.src(), pad);
  }
  gst_element_release_request_pad(rig.fanin(), pad);
  gst_object_unref(pad);
  l = QueryLatency(rig);
  ASSERT_TRUE(l.answered);
  EXPECT_EQ(l.min, 20 * ms)
      << "after releasing the added lane: " << Describe(l);
  EXPECT_EQ(l.max, 100 * ms)
      << "after releasing the added lane: " << Describe(l);
}

// ------------------------------------------- stall mid-stream (scenario 22)
// ---

// Lane 1's branch gets stuck inside one item mid-stream (as a kernel that
// does not return would), its later items queued behind it. After
// stall-timeout the lane is stalled: the output continues past its items,
// which count as timed-out, and the stream ends with EOS although lane 1's
// own EOS is still queued behind the stuck item. When the branch comes back,
// only the stuck item is late: the ones still queued were given up and are
// not pushed.
//
// Lane 1 is blocked for real (its branch waits on a gate the test opens), so
// the timeout is not what stalls it. Lane 0 delivers from its own thread, at
// whatever speed the machine allows: the timeout stays unreachable until
// lane 0 has delivered everything, and only then becomes short, when lane 1's
// stuck items are the only pending slots.
TEST(GpuFaninStall, ABranchStuckMidStreamIsSkippedAndItsItemsComeBackLate) {
  constexpr uint64_t kItems = 10;  // all accepted: < max-in-flight, queue-size
  FanRig rig(Passthrough(2));
  ASSERT_TRUE(rig.ok());
  struct Gate {
    std::mutex mutex;
    std::condition_variable cond;
    bool open = false;
    int64_t stuck_at = -1;
  };
  auto gate = std::make_shared<Gate>();
  rig.branch(1).SetTransform([gate](GstBuffer *b) -> GstBuffer * {
    const int64_t index = DataIndex(b);
    std::unique_lock<std::mutex> lock(gate->mutex);
    if (index >= 4 && gate->stuck_at < 0) {
      gate->stuck_at = index;
      gate->cond.notify_all();
      gate->cond.wait_for(lock, kLongWait, [&] { return gate->open; });
    }
    return b;
  });
  struct Opener {  // before the rig's teardown, on every way out
    std::shared_ptr<Gate> gate;
    void Open() {
      std::lock_guard<std::mutex> lock(gate->mutex);
      gate->open = true;
      gate->cond.notify_all();
    }
    ~Opener() { Open(); }
  } opener{gate};

  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, kItems));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  int64_t stuck_at;
  {
    std::unique_lock<std::mutex> lock(gate->mutex);
    ASSERT_TRUE(gate->cond.wait_for(lock, kWait, [&] {
      return gate->stuck_at >= 0;
    })) << "lane 1 never got an item >= 4";
    stuck_at = gate->stuck_at;
  }
  // Round-robin over two lanes: lane 1 carries every other item.
  std::vector<int64_t> expected;
  guint64 stuck_items = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(kItems); i++) {
    if (i >= stuck_at && (i - stuck_at) % 2 == 0)
      stuck_items++;
    else
      expected.push_back(i);
  }
  // Lane 0's branch sees its EOS only after the fan-in's chain has taken each
  // of lane 0's items (one thread pushes them all, in order); lane 1's items
  // before the stuck one went through before its branch got stuck.
  ASSERT_TRUE(rig.branch(0).seen().WaitEvents(GST_EVENT_EOS))
      << "lane 0 never delivered everything: "
      << rig.branch(0).seen().Summary();
  ShortenStallTimeout(rig);
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS))
      << "no EOS while lane 1 is stuck: " << rig.out().log().Summary();
  EXPECT_EQ(rig.out().log().BufferIndices(), expected);
  EXPECT_EQ(WaitLaneStat(rig.fanin(), 1, "timed-out", stuck_items), stuck_items)
      << "the stuck lane's items were not all given up";
  GstStructure *s = GetStats(rig.fanin());
  ASSERT_TRUE(HasStatsShape(s, 2));
  const GstStructure *lane1 = StatsLaneById(s, 1);
  ASSERT_NE(lane1, nullptr);
  EXPECT_STREQ(gst_structure_get_string(lane1, "state"), "stalled");
  EXPECT_STREQ(gst_structure_get_string(lane1, "stall"), "blocked");
  gst_structure_free(s);

  opener.Open();
  EXPECT_EQ(WaitLaneStat(rig.fanin(), 1, "late", 1), 1u);
  EXPECT_EQ(rig.out().log().BufferIndices(), expected)
      << "late items must not go out";
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_EOS), 1u);
  s = GetStats(rig.fanin());
  ASSERT_TRUE(HasStatsShape(s, 2));
  lane1 = StatsLaneById(s, 1);
  const GstStructure *lane0 = StatsLaneById(s, 0);
  ASSERT_TRUE(lane0 && lane1);
  EXPECT_EQ(StatsU64(lane1, "timed-out"), stuck_items);
  EXPECT_EQ(StatsU64(lane0, "timed-out"), 0u);
  EXPECT_EQ(SumLanesU64(s, "completed"), expected.size());
  gst_structure_free(s);
}

// ------------------------------------------------------------------ stats ---

TEST(GpuFaninStats, PairedFaninReportsTheFanoutStatsAndPostsThemAtEosForIt) {
  FanRig rig(Passthrough(2));
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 10));
  ASSERT_TRUE(rig.source().PushEvent(Eos()));
  ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS));

  GstStructure *s = GetStats(rig.fanin());
  ASSERT_TRUE(HasStatsShape(s, 2));
  EXPECT_EQ(StatsU64(s, "dispatched"), 10u);
  EXPECT_EQ(StatsU64(s, "released"), 10u);
  EXPECT_EQ(SumLanesU64(s, "completed"), 10u);
  EXPECT_EQ(SumLanesU64(s, "dropped"), 0u);
  EXPECT_EQ(StatsU64(s, "unmatched"), 0u);
  for (guint i = 0; i < StatsLaneCount(s); i++) {
    gboolean claimed = FALSE;
    gst_structure_get_boolean(StatsLane(s, i), "claimed", &claimed);
    EXPECT_TRUE(claimed) << "the fan-in waits for lane " << i;
  }
  gst_structure_free(s);

  auto stats_from = [](GstElement *e) {
    return [e](GstMessage *m) {
      return BusLog::IsElementMessage(m, "gpufan-stats") &&
             GST_MESSAGE_SRC(m) == GST_OBJECT(e);
    };
  };
  // The fan-in decides when they are final, but posts them in the fan-out's
  // name: every gpufan-stats message has the one source.
  GstMessage *m = rig.bus().WaitFor(stats_from(rig.fanout()));
  ASSERT_NE(m, nullptr)
      << "no gpufan-stats element message from the fan-out at EOS";
  EXPECT_TRUE(HasStatsShape(gst_message_get_structure(m), 2));
  EXPECT_EQ(StatsU64(gst_message_get_structure(m), "released"), 10u);
  gboolean final = FALSE;
  EXPECT_TRUE(gst_structure_get_boolean(gst_message_get_structure(m), "final",
                                        &final) &&
              final);
  EXPECT_EQ(rig.bus().Count(stats_from(rig.fanout())), 1u);
  EXPECT_EQ(rig.bus().Count(stats_from(rig.fanin())), 0u)
      << "the fan-in posts the statistics in the fan-out's name only";
}

// ----------------------------------------------------------------- errors ---

TEST(GpuFaninErrors, DataNotFromAFanoutPostsAnErrorAndDoesNotHang) {
  PipelineRig rig;
  GstElement *in = rig.AddElement("gpufanin", "fanin");
  ASSERT_NE(in, nullptr);
  auto source = std::make_unique<Source>();
  auto out = std::make_unique<PadCollector>("out");
  GstPad *sink = gst_element_request_pad_simple(in, "sink_%u");
  ASSERT_NE(sink, nullptr);
  GstPad *src = gst_element_get_static_pad(in, "src");
  EXPECT_TRUE(source->LinkTo(sink));
  EXPECT_EQ(gst_pad_link(src, out->pad()), GST_PAD_LINK_OK);
  gst_object_unref(src);
  EXPECT_TRUE(rig.Play());
  EXPECT_TRUE(source->Start());
  std::optional<GstFlowReturn> r = source->PushIndex(0);
  EXPECT_TRUE(r.has_value()) << "the push hung";
  GstMessage *m = rig.bus().WaitFor([in](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR &&
           GST_MESSAGE_SRC(m) == GST_OBJECT(in);
  });
  EXPECT_NE(m, nullptr)
      << "no ERROR from a fan-in fed by something that is not a gpufanout";
  EXPECT_TRUE(rig.Stop());
  source.reset();
  out.reset();
  gst_element_release_request_pad(in, sink);
  gst_object_unref(sink);
}

TEST(GpuFaninErrors, LanesWithDifferentCapsForTheSameInputPostAnError) {
  FanRig rig(Passthrough(2));
  ASSERT_TRUE(rig.ok());
  rig.branch(1).SetCapsOverride(
      "video/x-raw,format=GRAY8,width=2,height=2,framerate=1000/1");
  ASSERT_TRUE(rig.Play());
  rig.source().Start();
  for (uint64_t i = 0; i < 6; i++)
    ASSERT_TRUE(rig.source().PushIndex(i).has_value());
  GstMessage *m = rig.bus().WaitFor([&](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR &&
           GST_MESSAGE_SRC(m) == GST_OBJECT(rig.fanin());
  });
  EXPECT_NE(m, nullptr)
      << "no ERROR from the fan-in for lanes with different caps; bus: "
      << rig.bus().ErrorsText();
}

namespace {

// Plays a launch line and expects its first ERROR, within a deadline that
// only a hang reaches, to hold `expected` (never EOS, never a hang).
void ExpectFirstError(const std::string& description,
                      const std::string& expected) {
  SCOPED_TRACE(description);
  LaunchedPipeline p(description);
  ASSERT_TRUE(p.ok());
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *m = p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr) << "no EOS nor ERROR: the pipeline hangs";
  ASSERT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_ERROR);
  EXPECT_NE(BusLog::ErrorText(m).find(expected), std::string::npos)
      << BusLog::ErrorText(m);
  EXPECT_TRUE(p.Stop());
}

}  // namespace

// A lane that ends at a plain sink beside the fan-in would never get a frame
// (the fan-in claims the other lanes) and its sink would hold the preroll:
// an error naming the lane's pad before the first frame, not a hang.
TEST(GpuFaninErrors, ALaneEndingBesideTheFaninIsAnErrorNamingItsPad) {
  ExpectFirstError(
      "videotestsrc num-buffers=100 ! gpufanout name=f devices=cpu "
      "gpufanin name=m ! fakesink  f.src_0 ! m.sink_0 "
      "f.src_1 ! queue ! fakesink name=beside",
      "Lane 1's branch (f:src_1) ends at beside, not at the gpufanin that "
      "the other lanes reach: link it to a sink pad of that gpufanin, or "
      "release f:src_1");
}

// A tee in a lane with an output into each of two fan-in pads.
TEST(GpuFaninErrors, ALaneWithTwoOutputsIntoTheFaninIsAnError) {
  ExpectFirstError(
      "videotestsrc num-buffers=100 ! gpufanout name=f devices=cpu "
      "gpufanin name=m ! fakesink  f.src_0 ! tee name=t "
      "t. ! queue ! m.sink_0  t. ! queue ! m.sink_1",
      "Lane 0's branch (f:src_0) ends at 2 gpufanin sink pads");
}

// -------------------------------------------------------- generic states ---

TEST(GpuFaninStates, StateCyclesWithAndWithoutPads) {
  CycleStatesWithAndWithoutPads("gpufanin", "sink_%u");
}
