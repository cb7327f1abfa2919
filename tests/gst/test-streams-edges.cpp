// SPDX-License-Identifier: LGPL-2.1-or-later
// Several input streams at their edges: a stream that starts after every
// other ended (or a flushing seek after the end), a stream's flush with its frames
// waiting in the lanes' queues (they are taken out; the other streams keep
// theirs), and a branch that strips our meta and drops frames of streams
// whose PTS are the same (a frame never leaves on another stream's pad). Assertions are on order, counts and events, never
// on timings.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "streams-rig.h"

using namespace gpufan_test;

namespace {

// Frame i of stream k is dropped by the branch.
bool DroppedByBranch(uint64_t k, uint64_t i) {
  return (k == 0 && i % 3 == 0) || (k == 1 && i % 4 == 1);
}

constexpr guint kStreams = 3;
constexpr uint64_t kFrames = 30;

GstPadProbeReturn SwallowMarker(GstPad *, GstPadProbeInfo *info, gpointer) {
  const GstStructure *s =
      gst_event_get_structure(GST_PAD_PROBE_INFO_EVENT(info));
  return s && gst_structure_has_name(s, "GstGpuFanMarker") ? GST_PAD_PROBE_DROP
                                                           : GST_PAD_PROBE_OK;
}

// The branch makes new buffers (no meta) and drops some frames; it passes
// no other event of ours (a branch through an appsink and an appsrc): the
// lane's FIFO order and the PTS alone tell which item came back.
void StripDropAndSwallowMarkers(Branch& branch) {
  branch.SetTransform([](GstBuffer *buffer) -> GstBuffer * {
    const int64_t index = DataIndex(buffer);
    GstBuffer *copy = nullptr;
    if (!DroppedByBranch(static_cast<uint64_t>(index) / kStreamStride,
                         static_cast<uint64_t>(index) % kStreamStride))
      copy = CopyWithoutMetas(buffer);
    gst_buffer_unref(buffer);
    return copy;
  });
  gst_pad_add_probe(branch.src(), GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
                    SwallowMarker, nullptr, nullptr);
}

// Pushes kFrames frames of each of the rig's kStreams streams with the same
// PTS (0, 1, 2... frames), interleaved, then EOS; waits for each src_k's EOS.
void PushSamePtsAndEnd(StreamsRig& rig) {
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < kFrames; i++)
    for (guint k = 0; k < kStreams; k++)
      ASSERT_EQ(rig.Push(k, i), GST_FLOW_OK);
  for (guint k = 0; k < kStreams; k++)
    ASSERT_TRUE(rig.source(k).PushEvent(gst_event_new_eos()));
  for (guint k = 0; k < kStreams; k++)
    ASSERT_TRUE(rig.out(k).log().WaitEvents(GST_EVENT_EOS))
        << rig.out(k).log().Summary();
}

// src_k got only stream k's frames, in order, and none the branch dropped.
void CheckEachStreamsOwn(StreamsRig& rig, bool (*dropped)(uint64_t, uint64_t)) {
  for (guint k = 0; k < kStreams; k++) {
    RecordLog& log = rig.out(k).log();
    const std::vector<int64_t> got = log.BufferIndices();
    EXPECT_TRUE(IsStrictlyIncreasing(got)) << log.Summary();
    for (int64_t index : got) {
      EXPECT_EQ(static_cast<uint64_t>(index) / kStreamStride, k)
          << "src_" << k << " got another stream's frame: " << log.Summary();
      EXPECT_FALSE(dropped(k, static_cast<uint64_t>(index) % kStreamStride))
          << "src_" << k << " got a frame the branch dropped: "
          << log.Summary();
    }
  }
}

// Through `lanes` lanes whose branch strips, drops and swallows markers:
// each stream's own frames, and every frame whose PTS no stream lost (all of
// them came back: which is which is certain).
void CheckStrippedDropsStayInTheirStream(guint lanes) {
  StreamsRig rig(kStreams, lanes, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  for (guint i = 0; i < lanes; i++)
    StripDropAndSwallowMarkers(rig.branch(i));
  PushSamePtsAndEnd(rig);
  if (::testing::Test::HasFatalFailure())
    return;
  CheckEachStreamsOwn(rig, DroppedByBranch);
  for (guint k = 0; k < kStreams; k++) {
    RecordLog& log = rig.out(k).log();
    std::set<int64_t> delivered;
    for (int64_t index : log.BufferIndices())
      delivered.insert(index);
    for (uint64_t i = 0; i < kFrames; i++) {
      bool whole = true;
      for (guint other = 0; other < kStreams; other++)
        whole &= !DroppedByBranch(other, i);
      if (whole) {
        EXPECT_EQ(delivered.count(static_cast<int64_t>(k * kStreamStride + i)),
                  1u)
            << "frame " << i << " of stream " << k << " (no stream lost it): "
            << log.Summary();
      }
    }
  }
}

TEST(StreamsEdges, AStrippedFrameOfOneLaneNeverLeavesOnAnotherStreamsPad) {
  CheckStrippedDropsStayInTheirStream(1);
}

TEST(StreamsEdges, StrippedFramesOfTwoLanesNeverLeaveOnAnotherStreamsPad) {
  CheckStrippedDropsStayInTheirStream(2);
}

// A branch whose first buffer waits in its chain until the test opens it
// (bounded), so that what comes after waits in the lane's queue; it records
// the index of every buffer it is given.
class GatedBranch {
 public:
  explicit GatedBranch(Branch& branch) : state_(std::make_shared<State>()) {
    auto state = state_;
    branch.SetTransform([state](GstBuffer *buffer) {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->seen.push_back(DataIndex(buffer));
      state->cond.notify_all();
      state->cond.wait_for(lock, std::chrono::seconds(60),
                           [&] { return state->open; });
      return buffer;
    });
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->cond.wait_for(lock, std::chrono::seconds(60),
                                 [&] { return !state_->seen.empty(); });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->open = true;
    state_->cond.notify_all();
  }
  std::vector<int64_t> Seen() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->seen;
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cond;
    bool open = false;
    std::vector<int64_t> seen;
  };
  std::shared_ptr<State> state_;
};

TEST(StreamsEdges, AStreamsFlushTakesItsFramesOutOfTheLaneQueues) {
  StreamsRig rig(2, 1, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "queue-size", 16u, "max-in-flight", 64u, nullptr);
  GatedBranch gate(rig.branch(0));
  ASSERT_TRUE(rig.PlayAndStart());
  // frame 0 of stream 0 enters the branch; the others wait in the queue
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_TRUE(gate.WaitEntered());
  for (uint64_t i = 0; i < 4; i++) {
    if (i > 0) {
      ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    }
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_flush_start()));
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_flush_stop(TRUE)));
  ASSERT_TRUE(rig.source(0).PushSegment());
  for (uint64_t i = 10; i < 14; i++)
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
  gate.Open();
  for (guint k = 0; k < 2; k++)
    ASSERT_TRUE(rig.source(k).PushEvent(gst_event_new_eos()));
  for (guint k = 0; k < 2; k++)
    ASSERT_TRUE(rig.out(k).log().WaitEvents(GST_EVENT_EOS))
        << rig.out(k).log().Summary();

  // frame 0 was in the branch: it came back late and was dropped; 1 to 3
  // never went into it
  EXPECT_EQ(rig.out(0).log().BufferIndices(), Indices(0, 10, 4))
      << rig.out(0).log().Summary();
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 4))
      << rig.out(1).log().Summary();
  std::vector<int64_t> want = {0};
  for (int64_t i : Indices(1, 0, 4))
    want.push_back(i);
  for (int64_t i : Indices(0, 10, 4))
    want.push_back(i);
  EXPECT_EQ(gate.Seen(), want);

  GstStructure *stats = nullptr;
  g_object_get(rig.fanin(), "stats", &stats, nullptr);
  ASSERT_NE(stats, nullptr);
  guint in_flight = 1;
  EXPECT_TRUE(gst_structure_get_uint(stats, "in-flight", &in_flight));
  EXPECT_EQ(in_flight, 0u);
  gst_structure_free(stats);
}

// Stream k's frames first..first+count-1, then its EOS.
void PushFramesAndEos(StreamsRig& rig, guint k, uint64_t first,
                      uint64_t count) {
  for (uint64_t i = first; i < first + count; i++)
    ASSERT_EQ(rig.Push(k, i), GST_FLOW_OK);
  ASSERT_TRUE(rig.source(k).PushEvent(gst_event_new_eos()));
}

// Streams 0 and 1: frames 0..4 and EOS each, out of their src pads.
void PlayTwoStreamsToTheirEnd(StreamsRig& rig) {
  ASSERT_TRUE(rig.PlayAndStart());
  for (guint k = 0; k < 2; k++)
    PushFramesAndEos(rig, k, 0, 5);
  for (guint k = 0; k < 2; k++)
    ASSERT_TRUE(rig.out(k).log().WaitEvents(GST_EVENT_EOS))
        << rig.out(k).log().Summary();
}

TEST(StreamsEdges, AStreamThatStartsAfterEveryOtherEndedIsDelivered) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  GstPad *main_src = gst_element_get_static_pad(rig.fanin(), "src");
  ProbeRecorder main_out(main_src);
  gst_object_unref(main_src);
  // the pipeline stops before main_out goes: its probe may still be running
  struct StopFirst {
    StreamsRig& rig;
    ~StopFirst() { EXPECT_TRUE(rig.Stop()); }
  } stop_first{rig};
  PlayTwoStreamsToTheirEnd(rig);
  if (::testing::Test::HasFatalFailure())
    return;
  // every stream ended: the lanes too, and gpufanin's src
  ASSERT_TRUE(main_out.log().WaitEvents(GST_EVENT_EOS))
      << main_out.log().Summary();

  ASSERT_TRUE(rig.AddStream());
  ASSERT_TRUE(rig.source(2).Start());
  PushFramesAndEos(rig, 2, 0, 5);
  // (src_2, requested while gpufanin ended, may have had a stream-start and
  // an EOS of ours before its stream's)
  ASSERT_TRUE(rig.out(2).log().WaitFor([](const std::vector<Entry>& e) {
    return !e.empty() && e.back().type() == GST_EVENT_EOS && e.size() > 1 &&
           e[e.size() - 2].is_buffer;
  })) << rig.out(2).log().Summary();
  EXPECT_EQ(rig.out(2).log().BufferIndices(), Indices(2, 0, 5))
      << rig.out(2).log().Summary();
  // the lanes ended again; gpufanin's src had a new stream-start first
  ASSERT_TRUE(main_out.log().WaitEvents(GST_EVENT_EOS, 2))
      << main_out.log().Summary();
  EXPECT_EQ(main_out.log().Events(GST_EVENT_STREAM_START), 2u)
      << main_out.log().Summary();
  for (guint k = 0; k < 2; k++) {
    EXPECT_EQ(rig.out(k).log().BufferIndices(), Indices(k, 0, 5));
    EXPECT_EQ(rig.out(k).log().Events(GST_EVENT_EOS), 1u);
  }
  GstStructure *stats = nullptr;
  g_object_get(rig.fanin(), "stats", &stats, nullptr);
  ASSERT_NE(stats, nullptr);
  gboolean ended = FALSE;
  EXPECT_TRUE(gst_structure_get_boolean(stats, "input-ended", &ended));
  EXPECT_TRUE(ended);
  gst_structure_free(stats);
}

TEST(StreamsEdges, AFlushingSeekOnEveryStreamAfterTheEndDeliversAgain) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  PlayTwoStreamsToTheirEnd(rig);
  if (::testing::Test::HasFatalFailure())
    return;

  // the seek: each stream flushes, then goes on from frame 3
  for (guint k = 0; k < 2; k++) {
    ASSERT_TRUE(rig.source(k).PushEvent(gst_event_new_flush_start()));
    ASSERT_TRUE(rig.source(k).PushEvent(gst_event_new_flush_stop(TRUE)));
    ASSERT_TRUE(rig.source(k).PushSegment());
  }
  for (guint k = 0; k < 2; k++)
    PushFramesAndEos(rig, k, 3, 5);
  for (guint k = 0; k < 2; k++) {
    RecordLog& log = rig.out(k).log();
    ASSERT_TRUE(log.WaitEvents(GST_EVENT_EOS, 2)) << log.Summary();
    std::vector<int64_t> want = Indices(k, 0, 5);
    for (int64_t i : Indices(k, 3, 5))
      want.push_back(i);
    EXPECT_EQ(log.BufferIndices(), want) << log.Summary();
    EXPECT_EQ(log.Events(GST_EVENT_FLUSH_STOP), 1u) << log.Summary();
  }
}

TEST(StreamsEdges, OneStreamStartingAgainAfterItsEosIsDelivered) {
  // the single sink pad: a new stream-start after EOS
  FanRig rig;
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  for (uint64_t first : {0, 5}) {
    ASSERT_TRUE(rig.source().Start());
    for (uint64_t i = first; i < first + 5; i++)
      ASSERT_EQ(rig.source().PushIndex(i), GST_FLOW_OK);
    ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
    ASSERT_TRUE(rig.out().log().WaitEvents(GST_EVENT_EOS, first == 0 ? 1 : 2))
        << rig.out().log().Summary();
  }
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 10))
      << rig.out().log().Summary();
  EXPECT_EQ(rig.out().log().Events(GST_EVENT_STREAM_START), 2u)
      << rig.out().log().Summary();
}

}  // namespace
