// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanbin's lane-properties: one setting for every lane's branch, by the
// element's name in the branch or by its factory, at READY and while
// playing; clear errors naming what did not fit. And one lane's element
// from a launch line (lane1::i::...), as for any bin.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>

#include "gpufan-rig.h"
#include "gpufanbin-util.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

guint SleepTime(LaunchedPipeline& p, guint lane, const char *name) {
  GstElement *e = LaneElement(p, lane, name);
  EXPECT_NE(e, nullptr) << "lane " << lane << " has no " << name;
  if (!e)
    return 0;
  guint us = 0;
  g_object_get(e, "sleep-time", &us, nullptr);
  gst_object_unref(e);
  return us;
}

}  // namespace

TEST(GpuFanBinLaneProperties, EveryLaneGetsTheSettingsAtReady) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=20 ! gpufanbin name=bin devices=cpu:3 "
      "branch=\"identity name=i ! identity name=j\" "
      "lane-properties=\"i::sleep-time=7, identity::signal-handoffs=false\" ! "
      "fakesink");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS)
      << p.bus().ErrorsText();
  for (guint lane = 0; lane < 3; lane++) {
    EXPECT_EQ(SleepTime(p, lane, "i"), 7u);
    EXPECT_EQ(SleepTime(p, lane, "j"), 0u);  // only i was named
    // by factory name: both identities of the lane
    for (const char *name : {"i", "j"}) {
      GstElement *e = LaneElement(p, lane, name);
      ASSERT_NE(e, nullptr);
      gboolean handoffs = TRUE;
      g_object_get(e, "signal-handoffs", &handoffs, nullptr);
      EXPECT_FALSE(handoffs) << "lane " << lane << " " << name;
      gst_object_unref(e);
    }
  }
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
}

TEST(GpuFanBinLaneProperties, ChangedWhilePlayingReachesEveryLane) {
  LaunchedPipeline p(
      "videotestsrc is-live=true ! video/x-raw,width=16,height=16 ! "
      "gpufanbin name=bin devices=cpu:2 branch=\"identity name=i\" ! "
      "fakesink");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.Play()) << p.bus().ErrorsText();
  g_object_set(p.element("bin"), "lane-properties", "i::sleep-time=3", nullptr);
  EXPECT_EQ(SleepTime(p, 0, "i"), 3u);
  EXPECT_EQ(SleepTime(p, 1, "i"), 3u);
  // a setting that names nothing: a WARNING that says so, the stream goes on
  g_object_set(p.element("bin"), "lane-properties", "nosuch::sleep-time=9",
               nullptr);
  GstMessage *warning = p.bus().WaitFor([](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           BusLog::ErrorText(m).find("lane-properties") != std::string::npos;
  });
  ASSERT_NE(warning, nullptr);
  EXPECT_NE(BusLog::ErrorText(warning).find(
                "lane-properties: nosuch::sleep-time names nothing in lane0's "
                "branch"),
            std::string::npos)
      << BusLog::ErrorText(warning);
  EXPECT_EQ(SleepTime(p, 0, "i"), 3u);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u);
  EXPECT_TRUE(p.Stop());
}

TEST(GpuFanBinLaneProperties, BadSettingsFailAtReadyWithAClearError) {
  const std::string head =
      "videotestsrc ! gpufanbin devices=cpu:2 branch=\"identity name=i\" ";
  ExpectReadyFails(head + "lane-properties=\"q::sleep-time=1\" ! fakesink",
                   "lane-properties: q::sleep-time names nothing in lane0's "
                   "branch: give the element a name in branch");
  ExpectReadyFails(head +
                       "lane-properties=\"i::no-such-property=1\" ! "
                       "fakesink",
                   "i::no-such-property names nothing");
  ExpectReadyFails(head + "lane-properties=\"i::sleep-time=slow\" ! fakesink",
                   "lane-properties: cannot set i::sleep-time in lane0: "
                   "\"slow\" is not a guint");
  ExpectReadyFails(head + "lane-properties=\"i::sleep-time=-5\" ! fakesink",
                   "cannot set i::sleep-time in lane0: \"-5\" is negative and "
                   "the property is a guint");
  ExpectReadyFails(head + "lane-properties=\"=,=\" ! fakesink",
                   "Bad lane-properties \"=,=\": write "
                   "ELEMENT::PROPERTY=VALUE");
}

// gst-launch sets a lane's child property once the bin has built the lane
// (the parser waits for the child to be added).
TEST(GpuFanBinLaneProperties, OneLaneFromTheLaunchLine) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=5 ! gpufanbin name=bin devices=cpu:2 "
      "branch=\"identity name=i\" lane1::i::sleep-time=4 ! fakesink");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS)
      << p.bus().ErrorsText();
  EXPECT_EQ(SleepTime(p, 0, "i"), 0u);
  EXPECT_EQ(SleepTime(p, 1, "i"), 4u);
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
}
