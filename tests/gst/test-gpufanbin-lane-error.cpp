// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanbin's on-lane-error (issue 12): a lane whose branch fails (an ERROR,
// or GST_FLOW_ERROR alone) leaves and the others go on in order; `fail`
// stops the stream; what is not a lane's failure (a downstream error, a lane
// that cannot start); what a dropped lane reports lost.
#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpufan-rig.h"
#include "gpufanbin-util.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

// After `after` buffers, the pad's pushes return GST_FLOW_ERROR, with no
// ERROR message: a branch that fails silently.
GstPadProbeReturn FailSilently(GstPad *, GstPadProbeInfo *info,
                               gpointer counter) {
  auto *left = static_cast<std::atomic<int> *>(counter);
  if (left->fetch_sub(1) > 0)
    return GST_PAD_PROBE_OK;
  gst_buffer_unref(GST_PAD_PROBE_INFO_BUFFER(info));
  GST_PAD_PROBE_INFO_DATA(info) = nullptr;
  GST_PAD_PROBE_INFO_FLOW_RETURN(info) = GST_FLOW_ERROR;
  return GST_PAD_PROBE_HANDLED;
}

}  // namespace

TEST(GpuFanBinLaneError, ALaneThatErrorsLeavesAndTheOthersGoOnInOrder) {
  constexpr int kBuffers = 2000;
  LaunchedPipeline p(FourLanes(kBuffers, "on-lane-error=drop-lane"));
  ASSERT_TRUE(p.ok());
  GstElement *inject = BuildAndFindInLane(p, 1, "inject");
  ASSERT_NE(inject, nullptr);
  g_object_set(inject, "error-after", 200, nullptr);  // posts an ERROR
  gst_object_unref(inject);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  EXPECT_EQ(WarningsFrom(p, "inject", 1), 1u)
      << "the branch's ERROR, as a WARNING";
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(StrictlyIncreasing(got)) << out.Summary();
  // Lost: the failing frame and what lane 1 had queued behind it, no more.
  GstStructure *stats = GetStats(p.element("bin"));
  ASSERT_NE(stats, nullptr);
  const GstStructure *lane1 = StatsLaneById(stats, 1);
  ASSERT_NE(lane1, nullptr);
  guint queue_limit = 0;
  gst_structure_get_uint(lane1, "queue-limit", &queue_limit);
  EXPECT_STREQ(gst_structure_get_string(lane1, "state"), "failed");
  EXPECT_EQ(StatsU64(lane1, "failed"), 1u) << "the failing frame";
  gst_structure_free(stats);
  EXPECT_LT(got.size(), static_cast<size_t>(kBuffers));
  EXPECT_GE(got.size(), static_cast<size_t>(kBuffers) - 1 - queue_limit);
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
}

TEST(GpuFanBinLaneError, ABranchThatFailsWithoutAMessageLeavesToo) {
  constexpr int kBuffers = 1000;
  LaunchedPipeline p(FourLanes(kBuffers, "on-lane-error=drop-lane"));
  ASSERT_TRUE(p.ok());
  std::atomic<int> left{20};
  GstElement *inject = BuildAndFindInLane(p, 2, "inject");
  ASSERT_NE(inject, nullptr);
  GstPad *pad = gst_element_get_static_pad(inject, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, FailSilently, &left,
                    nullptr);
  gst_object_unref(pad);
  gst_object_unref(inject);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 2, 1), 1u);
  EXPECT_TRUE(StrictlyIncreasing(out.BufferIndices())) << out.Summary();
  EXPECT_GT(out.Buffers(), static_cast<size_t>(kBuffers) / 2);
  ASSERT_TRUE(p.Stop());
}

// With on-stall=replay too: replay on stalls changes nothing for errors.
TEST(GpuFanBinLaneError, FailStopsTheStreamAsBefore) {
  LaunchedPipeline p(FourLanes(1000, "on-lane-error=fail on-stall=replay"));
  ASSERT_TRUE(p.ok());
  GstElement *inject = BuildAndFindInLane(p, 1, "inject");
  ASSERT_NE(inject, nullptr);
  g_object_set(inject, "error-after", 50, nullptr);
  gst_object_unref(inject);
  StartPlaying(p);
  GstMessage *m = p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_ERROR);
  EXPECT_EQ(LaneFailedMessages(p, 1, 0), 0u);
  ASSERT_TRUE(p.Stop());
}

TEST(GpuFanBinLaneError, EveryLaneFailingIsAnError) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=1000 ! video/x-raw,width=16,height=16 ! "
      "gpufanbin name=bin lanes=2 branch=\"identity error-after=20\" ! "
      "fakesink");
  ASSERT_TRUE(p.ok());
  StartPlaying(p);
  // The first ERROR is ours, before upstream's own "Internal data stream
  // error".
  GstMessage *m = p.bus().WaitForType(GST_MESSAGE_ERROR, kLongWait);
  ASSERT_NE(m, nullptr) << p.bus().ErrorsText();
  EXPECT_NE(BusLog::ErrorText(m).find("Every lane has failed"),
            std::string::npos)
      << p.bus().ErrorsText();
  // Both lanes may fail at once: the other's message may follow the ERROR.
  EXPECT_TRUE(p.bus().WaitForCount(
      [](GstMessage *msg) {
        return BusLog::IsElementMessage(msg, "gpufan-lane-failed");
      },
      2, kLongWait));
  ASSERT_TRUE(p.Stop());
}

// A failing element behind a queue: the queue drops the lane's EOS. The
// fan-in must not wait for it (stall-timeout 300 s: waiting would time out).
TEST(GpuFanBinLaneError, NoEosIsAwaitedFromAFailedLane) {
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=1000 ! video/x-raw,width=16,height=16 "
      "! gpufanbin name=bin lanes=3 policy=round-robin "
      "stall-timeout=300000000000 "
      "branch=\"queue max-size-buffers=4 ! identity name=inject\" ! fakesink "
      "name=out");
  ASSERT_TRUE(p.ok());
  GstElement *inject = BuildAndFindInLane(p, 1, "inject");
  ASSERT_NE(inject, nullptr);
  g_object_set(inject, "error-after", 50, nullptr);
  gst_object_unref(inject);
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  EXPECT_EQ(p.bus().Count([](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           BusLog::ErrorText(m).find("without the EOS") != std::string::npos;
  }),
            0u)
      << "a failed lane's EOS is not missing, it is not awaited";
}

// An error downstream of gpufanin comes back up every lane of `branch`: it
// is not the lanes' failure.
void ExpectADownstreamErrorFailsNoLane(const std::string& branch) {
  SCOPED_TRACE(branch);
  LaunchedPipeline p(
      "videotestsrc num-buffers=1000 ! video/x-raw,width=16,height=16 ! "
      "gpufanbin name=bin lanes=3 branch=\"" +
      branch + "\" ! identity name=down ! fakesink");
  ASSERT_TRUE(p.ok());
  std::atomic<int> left{100};
  GstPad *pad = gst_element_get_static_pad(p.element("down"), "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, FailSilently, &left,
                    nullptr);
  gst_object_unref(pad);
  StartPlaying(p);
  GstMessage *m = p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_ERROR);
  ASSERT_TRUE(p.Stop());
  EXPECT_EQ(p.bus().Count([](GstMessage *msg) {
    return BusLog::IsElementMessage(msg, "gpufan-lane-failed");
  }),
            0u);
}

TEST(GpuFanBinLaneError, ADownstreamErrorFailsNoLane) {
  ExpectADownstreamErrorFailsNoLane("identity");
}

// A queue in the branch posts its own ERROR ("Internal data stream
// error") when downstream fails: that is not the lane's failure either.
TEST(GpuFanBinLaneError, ADownstreamErrorFailsNoLaneEvenThroughAQueue) {
  ExpectADownstreamErrorFailsNoLane("queue max-size-buffers=2 ! identity");
}

// An element of a lane that cannot start fails the start: that stays an
// ERROR (the bin turns only errors while streaming into WARNINGs).
TEST(GpuFanBinLaneError, AStartFailureInALaneStaysAnError) {
  RegisterCannotStart();
  LaunchedPipeline p(
      "videotestsrc num-buffers=10 ! gpufanbin lanes=2 "
      "branch=gpufantestcannotstart ! fakesink");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(gst_element_set_state(p.get(), GST_STATE_PLAYING),
            GST_STATE_CHANGE_FAILURE);
  GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
  ASSERT_NE(err, nullptr) << "the start failure reached the bus as "
                          << p.bus().ErrorsText();
  EXPECT_NE(BusLog::ErrorText(err).find("cannot open the device"),
            std::string::npos);
  EXPECT_TRUE(p.Stop());
}

// A failed lane is out until the next start, then takes frames again.
TEST(GpuFanBinLaneError, AFailedLaneIsBackAfterARestart) {
  LaunchedPipeline p(FourLanes(400));
  ASSERT_TRUE(p.ok());
  GstElement *inject = BuildAndFindInLane(p, 1, "inject");
  ASSERT_NE(inject, nullptr);
  g_object_set(inject, "error-after", 20, nullptr);
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  ASSERT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS);
  g_object_set(inject, "error-after", -1, nullptr);
  gst_object_unref(inject);
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(out.WaitEvents(GST_EVENT_EOS, 2, kLongWait)) << out.Summary();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u) << "no second failure";
  GstStructure *stats = GetStats(p.element("bin"));
  ASSERT_NE(stats, nullptr);
  const GstStructure *lane1 = StatsLaneById(stats, 1);
  ASSERT_NE(lane1, nullptr);
  EXPECT_STRNE(gst_structure_get_string(lane1, "state"), "failed");
  EXPECT_GT(StatsU64(lane1, "completed"), 90u) << "a quarter of 400 again";
  gst_structure_free(stats);
  ASSERT_TRUE(p.Stop());
}

// gpufanout alone: its only linked lane fails beside a request pad nobody
// linked. No lane is left: the fan-out's ERROR, not upstream's not-linked.
TEST(GpuFanBinLaneError, TheLastLinkedLaneFailingIsAnError) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=200 ! video/x-raw,width=16,height=16 ! "
      "gpufanout name=f on-lane-error=drop-lane  gpufanin name=m ! fakesink "
      "f.src_0 ! identity error-after=20 ! m.sink_0");
  ASSERT_TRUE(p.ok());
  GstElement *fanout = p.element("f");
  // Released after the pipeline stops, whatever the test's outcome.
  std::unique_ptr<GstPad, std::function<void(GstPad *)>> unlinked(
      gst_element_request_pad_simple(fanout, "src_%u"), [fanout](GstPad *pad) {
        gst_element_release_request_pad(fanout, pad);
        gst_object_unref(pad);
      });
  ASSERT_NE(unlinked, nullptr);
  StartPlaying(p);
  GstMessage *m = WaitForError(p, "Every lane has failed");
  EXPECT_NE(m, nullptr) << p.bus().ErrorsText();
  EXPECT_TRUE(p.Stop());
}

// Chunk mode: a lane that fails mid-chunk leaves; with gpufanbin's replay
// its chunks go again whole to the others, and every frame comes out once,
// in order (before chunk mode's replay, its chunk was lost).
TEST(GpuFanBinLaneError, AFailedLaneInChunkModeLeaves) {
  constexpr int kBuffers = 600;
  LaunchedPipeline p(FourLanes(kBuffers, "chunk=frames chunk-frames=10"));
  ASSERT_TRUE(p.ok());
  GstElement *inject = BuildAndFindInLane(p, 1, "inject");
  ASSERT_NE(inject, nullptr);
  g_object_set(inject, "error-after", 35, nullptr);  // in its 4th chunk
  gst_object_unref(inject);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  EXPECT_EQ(WarningsFrom(p, "inject", 1), 1u);
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(IsSequence(got, 0, kBuffers)) << out.Summary();
  EXPECT_EQ(LaneFailedField(p, 1, "lost"), 0u);
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  EXPECT_EQ(p.bus().Count([](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           BusLog::ErrorText(m).find("without the EOS") != std::string::npos;
  }),
            0u);
}

// The lost count of a dropped lane's gpufan-lane-failed is what did not come
// out: the frames it held in frame mode, its chunks' frames in chunk mode
// (it said 0 before). No stall or restart muddies the count here.
TEST(GpuFanBinLaneError, ADroppedLanesLostCountIsWhatDidNotComeOut) {
  for (const char *settings :
       {"", "chunk=frames chunk-frames=10", "chunk=keyframes chunk-frames=10"}) {
    constexpr int kBuffers = 600;
    LaunchedPipeline p(FourLanes(
        kBuffers, (std::string("on-lane-error=drop-lane ") + settings).c_str()));
    ASSERT_TRUE(p.ok());
    GstElement *inject = BuildAndFindInLane(p, 1, "inject");
    ASSERT_NE(inject, nullptr);
    g_object_set(inject, "error-after", 35, nullptr);  // mid-chunk
    gst_object_unref(inject);
    p.Stamp("src", "src");
    RecordLog& out = p.Record("out", "sink");
    ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
    EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u) << settings;
    const std::vector<int64_t> got = out.BufferIndices();
    EXPECT_TRUE(StrictlyIncreasing(got)) << out.Summary();
    ASSERT_LT(got.size(), static_cast<size_t>(kBuffers)) << settings;
    std::string missing;
    for (int64_t i = 0, k = 0; i < kBuffers; i++) {
      if (k < static_cast<int64_t>(got.size()) && got[k] == i)
        k++;
      else
        missing += " " + std::to_string(i);
    }
    EXPECT_EQ(LaneFailedField(p, 1, "lost"), kBuffers - got.size())
        << settings << "; missing:" << missing;
  }
}
