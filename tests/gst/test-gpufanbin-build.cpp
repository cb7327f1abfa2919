// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanbin: a gpufanout, one instance of a branch description per lane and a
// gpufanin, built at READY. The README's launch line, order, caps at the ends
// of a branch, the lane count from `lanes` and `devices`, the children's
// properties, clear errors for bad branches at READY, and lanes rebuilt
// after NULL.
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

// The README's line: CPU lanes asked for, so no "No GPU" warning either.
TEST(GpuFanBin, ReadmeLaunchLineRuns) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=600 ! gpufanbin name=bin devices=cpu:2 "
      "branch=\"videoconvert ! gaussianblur\" ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(out.Buffers(), 600u);
  EXPECT_EQ(LaneCount(p.element("bin")), 2u);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_WARNING), 0u) << p.bus().ErrorsText();
}

TEST(GpuFanBin, FramesLeaveInInputOrder) {
  constexpr int kBuffers = 2000;
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=" + std::to_string(kBuffers) +
      " ! video/x-raw,width=16,height=16 ! gpufanbin name=bin "
      "lanes=3 branch=\"queue max-size-buffers=2 ! identity\" "
      "! fakesink name=out");
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers));
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
}

// Caps at either end of a branch belong to a link in gst-launch syntax; the
// bin makes them capsfilters.
TEST(GpuFanBin, CapsAtTheEndsOfTheBranch) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=30 ! gpufanbin lanes=2 "
      "branch=\"video/x-raw,format=I420 ! videoconvert ! videoscale ! "
      "video/x-raw,format=RGB,width=32,height=24\" ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(out.Buffers(), 30u);
  GstPad *sink = gst_element_get_static_pad(p.element("out"), "sink");
  GstCaps *caps = gst_pad_get_current_caps(sink);
  ASSERT_NE(caps, nullptr);
  const GstStructure *s = gst_caps_get_structure(caps, 0);
  EXPECT_STREQ(gst_structure_get_string(s, "format"), "RGB");
  gint width = 0;
  EXPECT_TRUE(gst_structure_get_int(s, "width", &width));
  EXPECT_EQ(width, 32);
  gst_caps_unref(caps);
  gst_object_unref(sink);
}

TEST(GpuFanBin, LaneCountFollowsLanesThenDevices) {
  struct Case {
    const char *settings;
    guint lanes;
  };
  const guint cpus = std::max(1u, std::thread::hardware_concurrency());
  const std::vector<Case> cases = {
      {"lanes=3", 3},
      {"devices=cpu:4", 4},
      {"devices=cpu:4 lanes=2", 2},
      {"devices=cpu", cpus},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.settings);
    LaunchedPipeline p(std::string("videotestsrc num-buffers=10 ! gpufanbin "
                                   "name=bin branch=identity ") +
                       c.settings + " ! fakesink");
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
    EXPECT_EQ(LaneCount(p.element("bin")), c.lanes);
    GstStructure *stats = GetStats(p.element("bin"));
    ASSERT_NE(stats, nullptr);
    EXPECT_EQ(StatsLaneCount(stats), c.lanes);
    gst_structure_free(stats);
  }
}

// Without a GPU, devices=auto gives one CPU lane per CPU.
TEST(GpuFanBin, AutoMakesOneLanePerGpuElseCpu) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=10 ! gpufanbin name=bin branch=identity ! "
      "fakesink");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  GstStructure *stats = GetStats(p.element("bin"));
  ASSERT_NE(stats, nullptr);
  const guint lanes = StatsLaneCount(stats);
  gst_structure_free(stats);
  EXPECT_EQ(LaneCount(p.element("bin")), lanes);
  if (LaneDeviceKind(p.element("bin"), 0) == "cpu") {
    EXPECT_EQ(lanes, std::max(1u, std::thread::hardware_concurrency()));
  }
}

TEST(GpuFanBin, PropertiesAreTheChildrens) {
  GstElement *bin = gst_element_factory_make("gpufanbin", nullptr);
  ASSERT_NE(bin, nullptr);
  g_object_set(bin, "policy", 0, "queue-size", 7u, "stall-timeout",
               guint64{123456789}, "devices", "cpu:2", "chunk-frames", 12u,
               nullptr);
  GstElement *fanout = gst_bin_get_by_name(GST_BIN(bin), "fanout");
  GstElement *fanin = gst_bin_get_by_name(GST_BIN(bin), "fanin");
  ASSERT_NE(fanout, nullptr);
  ASSERT_NE(fanin, nullptr);
  guint queue_size = 0, chunk_frames = 0;
  guint64 stall = 0;
  gchar *devices = nullptr;
  g_object_get(fanout, "queue-size", &queue_size, "devices", &devices,
               "chunk-frames", &chunk_frames, nullptr);
  g_object_get(fanin, "stall-timeout", &stall, nullptr);
  EXPECT_EQ(queue_size, 7u);
  EXPECT_STREQ(devices, "cpu:2");
  EXPECT_EQ(chunk_frames, 12u);
  EXPECT_EQ(stall, guint64{123456789});
  g_free(devices);
  // And read back through the bin.
  guint64 stall_back = 0;
  g_object_get(bin, "stall-timeout", &stall_back, nullptr);
  EXPECT_EQ(stall_back, guint64{123456789});
  // The copies keep the children's ranges.
  GParamSpec *mine =
      g_object_class_find_property(G_OBJECT_GET_CLASS(bin), "queue-size");
  GParamSpec *theirs =
      g_object_class_find_property(G_OBJECT_GET_CLASS(fanout), "queue-size");
  ASSERT_NE(mine, nullptr);
  ASSERT_NE(theirs, nullptr);
  EXPECT_EQ(G_PARAM_SPEC_UINT(mine)->maximum,
            G_PARAM_SPEC_UINT(theirs)->maximum);
  EXPECT_EQ(G_PARAM_SPEC_UINT(mine)->default_value,
            G_PARAM_SPEC_UINT(theirs)->default_value);
  gst_object_unref(fanout);
  gst_object_unref(fanin);
  gst_object_unref(bin);
}

TEST(GpuFanBin, BadBranchesFailAtReadyWithAClearError) {
  const std::string head = "videotestsrc ! gpufanbin lanes=2 ";
  ExpectReadyFails(head + "! fakesink", "gpufanbin has no branch");
  ExpectReadyFails(head + "branch=\"  \" ! fakesink",
                   "gpufanbin has no branch");
  ExpectReadyFails(head + "branch=\"videoconvert ! nosuchelement\" ! fakesink",
                   "Bad branch description: no element \"nosuchelement\"");
  ExpectReadyFails(head + "branch=\"videoconvert !\" ! fakesink",
                   "Bad branch description");
  ExpectReadyFails(head + "branch=fakesink ! fakesink",
                   "one unlinked input and one unlinked output (it has no "
                   "output)");
  ExpectReadyFails(head + "branch=videotestsrc ! fakesink",
                   "(it has no input)");
  // a tee with two outputs: the second would lead nowhere
  ExpectReadyFails(head +
                       "branch=\"tee name=t t. ! queue ! identity "
                       "t. ! queue ! identity\" ! fakesink",
                   "one unlinked input and one unlinked output (it has 2 "
                   "outputs)");
  ExpectReadyFails(
      "videotestsrc ! gpufanbin devices=gpu0 branch=identity ! fakesink",
      "Bad devices setting: 'gpu0'");
  // lanes beyond what devices allows: the error names lanes, not a pad
  ExpectReadyFails(
      "videotestsrc ! gpufanbin lanes=3 devices=cpu:2 branch=identity ! "
      "fakesink",
      "lanes=3 asks for more lanes than devices=cpu:2 allows (2 CPU lanes): "
      "set lanes=2 (or lanes=0, one per device), or devices=cpu:3");
  ExpectReadyFails(
      "videotestsrc ! gpufanbin lanes=2 devices=gpu0 branch=identity ! "
      "fakesink",
      "Bad devices setting: 'gpu0'");
}

// A branch or lane count changed in NULL takes effect at the next start.
TEST(GpuFanBin, LanesAreRebuiltAfterNull) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=20 ! gpufanbin name=bin lanes=2 "
      "branch=identity ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFactories(p.element("bin")),
            (std::vector<std::string>{"identity", "identity"}));
  ASSERT_TRUE(p.Stop());
  EXPECT_EQ(LaneCount(p.element("bin")), 0u) << "lanes left after NULL";
  g_object_set(p.element("bin"), "lanes", 3u, "branch", "queue", nullptr);
  RecordLog& out = p.Record("out", "sink");
  // The bus still holds the first run's EOS: wait for the sink's.
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(out.WaitEvents(GST_EVENT_EOS, 1, kLongWait)) << out.Summary();
  EXPECT_EQ(LaneFactories(p.element("bin")),
            (std::vector<std::string>{"queue", "queue", "queue"}));
  EXPECT_EQ(out.Buffers(), 20u);
}
