// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanbin's recovery (issue 12, item 4): a failed lane rebuilt after
// lane-restart-delay takes frames again, one that fails again waits twice as
// long, one that cannot start is tried again, none with a delay of 0.
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

// ---------------------------------------------- recovery (issue 12, item 4)
// ---

// Lane 3 fails; 50 ms later a fresh branch takes its place as lane 4 and
// takes frames; nothing is lost. The next start has four lanes again.
TEST(GpuFanBinRecovery, AFailedLaneIsRebuiltAndTakesFramesAgain) {
  constexpr int kBuffers = 1200;
  // devices=cpu:4 allows four lanes: the rebuilt one (lane 4) runs on the
  // failed lane's device all the same.
  LaunchedPipeline p(
      FourLanes(kBuffers, "devices=cpu:4 lane-restart-delay=50000000"));
  ASSERT_TRUE(p.ok());
  std::unique_ptr<LaneFault> fault =
      FaultInLane(p, 3, LaneFault::Kind::kSilentError, 200);
  ASSERT_NE(fault, nullptr);
  HoldUntilRestored hold{&p, 600, 1};
  p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER, HoldUntilRestored::Probe,
             &hold);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 3, 1), 1u);
  GstMessage *restored = p.bus().WaitFor(IsRestored, kWait);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(RestoredField(restored, "lane"), 3u);
  EXPECT_EQ(RestoredField(restored, "new-lane"), 4u);
  EXPECT_EQ(RestoredField(restored, "failures"), 1u);
  guint64 delay = 0;
  gst_structure_get_uint64(gst_message_get_structure(restored), "delay",
                           &delay);
  EXPECT_EQ(delay, 50 * GST_MSECOND);
  EXPECT_EQ(p.bus().Count(IsRestored), 1u);
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers)) << out.Summary();
  GstStructure *stats = GetStats(p.element("bin"));
  ASSERT_NE(stats, nullptr);
  const GstStructure *lane4 = StatsLaneById(stats, 4);
  ASSERT_NE(lane4, nullptr);
  EXPECT_GT(StatsU64(lane4, "completed"), 50u) << "held until it was back";
  EXPECT_STREQ(gst_structure_get_string(lane4, "device"),
               gst_structure_get_string(StatsLaneById(stats, 3), "device"));
  gst_structure_free(stats);

  // The next start: the replaced lane is gone, four lanes are left.
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS);
  // lane0 to lane2, then no lane3 (lane4 stands in its place)
  EXPECT_EQ(LaneCount(p.element("bin")), 3u);
  GstStructure *ready = GetStats(p.element("bin"));
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(StatsLaneCount(ready), 4u);
  EXPECT_EQ(StatsLaneById(ready, 3), nullptr);
  gst_structure_free(ready);
  ASSERT_TRUE(p.Stop());
}

// lane-restart-delay=0: a failed lane stays out.
TEST(GpuFanBinRecovery, NoRebuildWithADelayOfZero) {
  LaunchedPipeline p(FourLanes(600));
  ASSERT_TRUE(p.ok());
  std::unique_ptr<LaneFault> fault =
      FaultInLane(p, 1, LaneFault::Kind::kSilentError, 100);
  ASSERT_NE(fault, nullptr);
  p.Stamp("src", "src");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  EXPECT_EQ(p.bus().Count(IsRestored), 0u);
  EXPECT_EQ(LaneCount(p.element("bin")), 4u);
}

// The lane rebuilt in a failed lane's place fails too: the next rebuild in
// that place waits twice as long.
TEST(GpuFanBinRecovery, ALaneThatFailsAgainWaitsTwiceAsLong) {
  constexpr int kBuffers = 1200;
  LaunchedPipeline p(FourLanes(kBuffers, "lane-restart-delay=20000000"));
  ASSERT_TRUE(p.ok());
  std::unique_ptr<LaneFault> first =
      FaultInLane(p, 3, LaneFault::Kind::kSilentError, 200);
  ASSERT_NE(first, nullptr);
  // At frame 400 the source waits for lane 3's rebuild (lane 4) and makes
  // it fail from frame 500 on; at frame 800 it waits for lane 4's.
  struct Second {
    LaunchedPipeline *p;
    std::unique_ptr<LaneFault> fault;
  } second{&p, nullptr};
  p.AddProbe(
      "src", "src", GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *s = static_cast<Second *>(data);
        const guint64 frame =
            GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info));
        if (frame == 400 &&
            s->p->bus().WaitForCount(IsRestored, 1, kLongWait)) {
          GstElement *lane4 = LaneElement(*s->p, 4, "inject");
          if (lane4) {
            s->fault = std::make_unique<LaneFault>(
                lane4, LaneFault::Kind::kSilentError, 500);
            gst_object_unref(lane4);
          }
        }
        if (frame == 800)
          s->p->bus().WaitForCount(IsRestored, 2, kLongWait);
        return GST_PAD_PROBE_OK;
      },
      &second);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  ASSERT_NE(second.fault, nullptr) << "lane 4 was not built";
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  std::vector<GstMessage *> restored;
  p.bus().Count([&restored](GstMessage *m) {
    if (IsRestored(m))
      restored.push_back(m);
    return false;
  });
  ASSERT_EQ(restored.size(), 2u);
  guint64 delays[2] = {0, 0};
  for (int i = 0; i < 2; i++)
    gst_structure_get_uint64(gst_message_get_structure(restored[i]), "delay",
                             &delays[i]);
  EXPECT_EQ(RestoredField(restored[0], "lane"), 3u);
  EXPECT_EQ(RestoredField(restored[0], "failures"), 1u);
  EXPECT_EQ(delays[0], 20 * GST_MSECOND);
  EXPECT_EQ(RestoredField(restored[1], "lane"), 4u);
  EXPECT_EQ(RestoredField(restored[1], "new-lane"), 5u);
  EXPECT_EQ(RestoredField(restored[1], "failures"), 2u);
  EXPECT_EQ(delays[1], 40 * GST_MSECOND);
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers)) << out.Summary();
  ASSERT_TRUE(p.Stop());
}

// The first rebuild cannot start (its element refuses): nothing of it
// stays, it counts as a failure in that place, and the next try, twice as
// late, succeeds. The pipeline stops cleanly.
TEST(GpuFanBinRecovery, ARebuildThatCannotStartIsTriedAgain) {
  RegisterCannotStart();
  g_refusals = 0;
  constexpr int kBuffers = 1000;
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=" + std::to_string(kBuffers) +
      " ! video/x-raw,width=16,height=16 ! gpufanbin name=bin lanes=4 "
      "policy=round-robin lane-restart-delay=20000000 branch=\"identity "
      "name=inject ! gpufantestcannotstart\" ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  std::unique_ptr<LaneFault> fault =
      FaultInLane(p, 3, LaneFault::Kind::kSilentError, 200);
  ASSERT_NE(fault, nullptr);
  // At frame 100 the next branch to start (the first rebuild) refuses; at
  // frame 600 the source waits for the rebuild after it.
  p.AddProbe(
      "src", "src", GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *pipeline = static_cast<LaunchedPipeline *>(data);
        const guint64 frame =
            GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info));
        if (frame == 100)
          g_refusals = 1;
        if (frame == 600)
          pipeline->bus().WaitForCount(IsRestored, 1, kLongWait);
        return GST_PAD_PROBE_OK;
      },
      &p);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  g_refusals = -1;
  EXPECT_EQ(p.bus().Count([](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           BusLog::ErrorText(m).find("could not be built") != std::string::npos;
  }),
            1u);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers)) << out.Summary();
  GstMessage *restored = p.bus().WaitFor(IsRestored, kWait);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(RestoredField(restored, "failures"), 2u);
  guint64 delay = 0;
  gst_structure_get_uint64(gst_message_get_structure(restored), "delay",
                           &delay);
  EXPECT_EQ(delay, 40 * GST_MSECOND);
  // Four lanes stream, the failed one stays (until the stop); the lane
  // that could not start left nothing.
  GstStructure *stats = GetStats(p.element("bin"));
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(StatsLaneCount(stats), 5u);
  gst_structure_free(stats);
  EXPECT_EQ(gst_element_set_state(p.get(), GST_STATE_NULL),
            GST_STATE_CHANGE_SUCCESS);
}

