// SPDX-License-Identifier: LGPL-2.1-or-later
// Several input streams at their edges: a branch that strips our meta and
// drops frames of streams whose PTS are the same (a frame never leaves on
// another stream's pad). Assertions are on order, counts and events, never
// on timings.
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
      if (whole)
        EXPECT_EQ(delivered.count(static_cast<int64_t>(k * kStreamStride + i)),
                  1u)
            << "frame " << i << " of stream " << k << " (no stream lost it): "
            << log.Summary();
    }
  }
}

TEST(StreamsEdges, AStrippedFrameOfOneLaneNeverLeavesOnAnotherStreamsPad) {
  CheckStrippedDropsStayInTheirStream(1);
}

TEST(StreamsEdges, StrippedFramesOfTwoLanesNeverLeaveOnAnotherStreamsPad) {
  CheckStrippedDropsStayInTheirStream(2);
}

}  // namespace
