// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanout's control interface (docs/elements.md, gpufanout's action
// signals) as an application with hand-built lanes uses it: fail-lane takes
// a lane out as a branch's error would, request-replacement-pad gives a new
// lane on a failed lane's device. gpufanbin's tests cover the same signals
// through the bin.
#include <string>

#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

// Two CPU lanes of a live source, as an application would build them.
const std::string kTwoLanes =
    "videotestsrc is-live=true ! "
    "video/x-raw,format=GRAY8,width=8,height=8,framerate=100/1 ! "
    "gpufanout name=f devices=cpu:2 on-lane-error=drop-lane "
    "gpufanin name=m ! fakesink sync=false "
    "f.src_0 ! queue ! m.sink_0  f.src_1 ! queue ! m.sink_1";

std::string LaneState(GstElement *fanout, guint lane) {
  GstStructure *stats = GetStats(fanout);
  const GstStructure *l = stats ? StatsLaneById(stats, lane) : nullptr;
  const gchar *state = l ? gst_structure_get_string(l, "state") : nullptr;
  std::string out = state ? state : "";
  if (stats)
    gst_structure_free(stats);
  return out;
}

TEST(FanoutControl, FailLaneTakesTheLaneOut) {
  LaunchedPipeline p(kTwoLanes);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.Play());
  GstElement *f = p.element("f");
  g_signal_emit_by_name(f, "fail-lane", 0u);
  GstMessage *m = p.bus().WaitFor([](GstMessage *m) {
    return BusLog::IsElementMessage(m, "gpufan-lane-failed");
  });
  ASSERT_NE(m, nullptr) << p.bus().ErrorsText();
  guint lane = G_MAXUINT;
  gst_structure_get_uint(gst_message_get_structure(m), "lane", &lane);
  EXPECT_EQ(lane, 0u);
  EXPECT_EQ(LaneState(f, 0), "failed");
  EXPECT_NE(LaneState(f, 1), "failed");
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
}

// A failed lane whose pad is then deactivated (as its release does first)
// leaves the Failed state with its fatal result: that result must not stop
// the stream, which goes on on the other lane to its EOS.
TEST(FanoutControl, AFailedLaneThatIsDeactivatedDoesNotStopTheStream) {
  LaunchedPipeline p(
      "videotestsrc is-live=true num-buffers=60 ! "
      "video/x-raw,format=GRAY8,width=8,height=8,framerate=100/1 ! "
      "gpufanout name=f devices=cpu:2 on-lane-error=drop-lane "
      "gpufanin name=m ! fakesink sync=false "
      "f.src_0 ! queue ! m.sink_0  f.src_1 ! queue ! m.sink_1");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.Play());
  GstElement *f = p.element("f");
  g_signal_emit_by_name(f, "fail-lane", 1u);
  ASSERT_NE(p.bus().WaitFor([](GstMessage *m) {
    return BusLog::IsElementMessage(m, "gpufan-lane-failed");
  }),
            nullptr)
      << p.bus().ErrorsText();
  GstPad *src1 = gst_element_get_static_pad(f, "src_1");
  ASSERT_NE(src1, nullptr);
  ASSERT_TRUE(gst_pad_set_active(src1, FALSE));
  gst_object_unref(src1);
  GstMessage *end = p.bus().WaitFor([](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS ||
           GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR;
  });
  ASSERT_NE(end, nullptr) << "neither EOS nor ERROR";
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
}

TEST(FanoutControl, FailLaneDoesNothingWhenLaneErrorsFailTheStream) {
  LaunchedPipeline p(kTwoLanes);
  ASSERT_TRUE(p.ok());
  GstElement *f = p.element("f");
  gst_util_set_object_arg(G_OBJECT(f), "on-lane-error", "fail");
  ASSERT_TRUE(p.Play());
  g_signal_emit_by_name(f, "fail-lane", 0u);
  EXPECT_NE(LaneState(f, 0), "failed");
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
}

TEST(FanoutControl, ReplacementPadIsANewLaneOwnedByTheCaller) {
  LaunchedPipeline p(kTwoLanes);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(SetStateAndWait(p.get(), GST_STATE_READY));  // lanes placed
  GstElement *f = p.element("f");
  GstPad *pad = nullptr;
  g_signal_emit_by_name(f, "request-replacement-pad", 1u, &pad);
  ASSERT_NE(pad, nullptr);
  EXPECT_STREQ(GST_PAD_NAME(pad), "src_2");
  guint lane = G_MAXUINT;
  g_object_get(pad, "lane", &lane, nullptr);
  EXPECT_EQ(lane, 2u);
  gst_element_release_request_pad(f, pad);
  gst_object_unref(pad);  // transfer full: the leaks tracer checks it

  GstPad *none = nullptr;
  g_signal_emit_by_name(f, "request-replacement-pad", 7u, &none);
  EXPECT_EQ(none, nullptr) << "lane 7 was never placed";
}

// The warning of a lane that leaves says how many frames it held, in
// words that agree with the count.
TEST(FanoutControl, TheWarningCountsTheFramesTheLaneHeld) {
  for (guint held : {1u, 2u}) {
    FanRigOptions o;
    o.mode = Branch::Mode::kHold;
    FanRig rig(o);
    ASSERT_TRUE(rig.ok());
    gst_util_set_object_arg(G_OBJECT(rig.fanout()), "on-lane-error",
                            "replay");
    ASSERT_TRUE(rig.Play());
    ASSERT_TRUE(rig.source().Start());
    // round-robin: 0, 2 on lane 0, 1 on lane 1
    ASSERT_TRUE(PushRange(rig.source(), 0, 2 * held - 1));
    ASSERT_TRUE(rig.branch(0).WaitHeldBuffers(held));
    g_signal_emit_by_name(rig.fanout(), "fail-lane", 0u);
    GstMessage *w = rig.bus().WaitFor([](GstMessage *m) {
      return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
             BusLog::ErrorText(m).find("leaves the stream") !=
                 std::string::npos;
    });
    ASSERT_NE(w, nullptr) << rig.bus().ErrorsText();
    const std::string text = BusLog::ErrorText(w);
    const std::string want =
        held == 1 ? "the 1 frame it held goes to the other lanes"
                  : "the 2 frames it held go to the other lanes";
    EXPECT_NE(text.find(want), std::string::npos) << text;
    // (what lane 1 holds is dropped at the stop)
    ASSERT_TRUE(rig.Stop());
  }
}

// Pad properties in a launch line: gpufanout is a GstChildProxy of its
// pads, so the parser sets `src_0::weight` once the link requested the pad
// (it fails without the interface: no property "src_0::weight").
TEST(FanoutChildProxy, PadPropertiesCanBeSetInALaunchLine) {
  LaunchedPipeline p(
      "gpufanout name=f devices=cpu:2 src_0::weight=3 sink_0::leaky=true "
      "sink_0::weight=2 gpufanin name=m  f.src_0 ! m.sink_0  f.src_1 ! "
      "m.sink_1  videotestsrc num-buffers=30 ! "
      "video/x-raw,width=16,height=16 ! f.sink_0  m.src_0 ! fakesink");
  ASSERT_TRUE(p.ok());
  GstElement *f = p.element("f");
  ASSERT_TRUE(GST_IS_CHILD_PROXY(f));
  GstPad *lane0 = gst_element_get_static_pad(f, "src_0");
  GstPad *lane1 = gst_element_get_static_pad(f, "src_1");
  GstPad *stream0 = gst_element_get_static_pad(f, "sink_0");
  ASSERT_NE(lane0, nullptr);
  ASSERT_NE(lane1, nullptr);
  ASSERT_NE(stream0, nullptr);
  gdouble weight = 0;
  g_object_get(lane0, "weight", &weight, nullptr);
  EXPECT_EQ(weight, 3.0);
  g_object_get(lane1, "weight", &weight, nullptr);
  EXPECT_EQ(weight, 1.0);
  gboolean leaky = FALSE;
  g_object_get(stream0, "leaky", &leaky, "weight", &weight, nullptr);
  EXPECT_TRUE(leaky);
  EXPECT_EQ(weight, 2.0);
  gst_object_unref(lane0);
  gst_object_unref(lane1);
  gst_object_unref(stream0);
  // and from code, by name, as on any child proxy
  gst_child_proxy_set(GST_CHILD_PROXY(f), "src_1::weight", 0.5, nullptr);
  GObject *child = gst_child_proxy_get_child_by_name(GST_CHILD_PROXY(f),
                                                     "src_1");
  ASSERT_NE(child, nullptr);
  g_object_get(child, "weight", &weight, nullptr);
  EXPECT_EQ(weight, 0.5);
  g_object_unref(child);
  EXPECT_EQ(gst_child_proxy_get_children_count(GST_CHILD_PROXY(f)), 4u);
  EXPECT_TRUE(p.PlayToEos());
  EXPECT_TRUE(p.Stop());
}

}  // namespace
