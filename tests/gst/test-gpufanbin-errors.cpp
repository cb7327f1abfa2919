// SPDX-License-Identifier: LGPL-2.1-or-later
// Errors that say what to do (issue 27): caps that do not fit a branch, at
// link time (gpufanbin at READY) and at run time (a lane's push, gpufanin's
// output), name the caps and the element that refused them; properties take
// their values from enums and state their units.
#include <dlfcn.h>
#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>

#include "gpufan-rig.h"
#include "gpufanbin-util.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

// A filter that takes any caps in queries and refuses them when set (an
// encoder that cannot open for them).
gboolean RefuseCaps(GstBaseTransform *, GstCaps *, GstCaps *) {
  return FALSE;
}

void RefuseCapsClassInit(gpointer klass, gpointer) {
  TestElementClassInit(klass, "refuses caps", "Filter");
  GST_BASE_TRANSFORM_CLASS(klass)->set_caps = RefuseCaps;
}

void RegisterRefuseCaps() {
  RegisterTransform("gpufantestrefusecaps", 0, RefuseCapsClassInit, nullptr);
}

// Plays and returns the first ERROR's text (empty on EOS or a timeout).
std::string PlayError(LaunchedPipeline& p) {
  StartPlaying(p);
  GstMessage *m = p.WaitEosOrError(kLongWait);
  std::string text;
  if (m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR)
    text = BusLog::ErrorText(m);
  EXPECT_TRUE(p.Stop());
  return text;
}

const std::string kI420 =
    "videotestsrc num-buffers=5 ! video/x-raw,format=I420,width=16,height=16 "
    "! ";

}  // namespace

TEST(GpuFanBinErrors, ABranchThatCannotTakeTheCapsNamesThemAndTheElement) {
  ExpectReadyFails(
      kI420 +
          "gpufanbin name=bin devices=cpu:2 branch=\"video/x-raw,format=RGB "
          "! identity\" ! fakesink",
      "Lane 0's branch cannot take the caps bin receives: "
      "capsfilter");
  ExpectReadyFails(
      kI420 +
          "gpufanbin name=bin devices=cpu:2 branch=\"video/x-raw,format=RGB "
          "! identity\" ! fakesink",
      " (capsfilter) refuses video/x-raw, format=(string)I420");
  ExpectReadyFails(kI420 +
                       "gpufanbin name=bin devices=cpu:2 branch=\"identity "
                       "name=a ! audioconvert "
                       "name=ac\" ! fakesink",
                   "Lane 0's branch cannot take the caps bin receives: ac "
                   "(audioconvert) refuses video/x-raw, format=(string)I420");
  ExpectReadyFails(
      kI420 + "gpufanbin name=bin devices=cpu:2 branch=audioconvert ! fakesink",
      "(it takes audio/x-raw");
  ExpectReadyFails(kI420 +
                       "gpufanbin name=bin devices=cpu:2 branch=audioconvert ! "
                       "fakesink",
                   "put a converter (e.g. videoconvert) at the branch's "
                   "start, or make upstream give caps it takes");
}

TEST(GpuFanBinErrors, ABranchWhoseOutputDownstreamRefusesSaysSo) {
  ExpectReadyFails(
      kI420 +
          "gpufanbin name=bin devices=cpu:2 branch=\"videoconvert ! "
          "video/x-raw,format=RGB\" ! video/x-raw,format=I420 ! fakesink",
      "Lane 0's branch gives video/x-raw, format=(string)RGB");
  ExpectReadyFails(
      kI420 +
          "gpufanbin name=bin devices=cpu:2 branch=\"videoconvert ! "
          "video/x-raw,format=RGB\" ! video/x-raw,format=I420 ! fakesink",
      "which downstream of bin cannot take (it takes video/x-raw, "
      "format=(string)I420): end the branch with a converter");
  // a branch that passes the caps on: downstream refuses them
  ExpectReadyFails(kI420 +
                       "gpufanbin name=bin devices=cpu:2 branch=identity ! "
                       "video/x-raw,format=RGB ! fakesink",
                   "Lane 0's branch passes on video/x-raw, "
                   "format=(string)I420");
}

TEST(GpuFanBinErrors, ALaneThatRefusesCapsAtRunTimeNamesTheElement) {
  RegisterRefuseCaps();
  LaunchedPipeline p(kI420 +
                     "gpufanout name=f devices=cpu:1 gpufanin name=m ! "
                     "fakesink  f.src_0 ! identity ! gpufantestrefusecaps "
                     "name=picky ! m.sink_0");
  ASSERT_TRUE(p.ok());
  const std::string error = PlayError(p);
  EXPECT_NE(error.find("The branch of lane 0 (f:src_0) did not take its caps: "
                       "picky (gpufantestrefusecaps) refused video/x-raw, "
                       "format=(string)I420, width=(int)16"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("put a converter (e.g. videoconvert) in front of it"),
            std::string::npos)
      << error;
}

TEST(GpuFanBinErrors, DownstreamThatRefusesTheLanesCapsIsNamed) {
  RegisterRefuseCaps();
  LaunchedPipeline p(kI420 +
                     "gpufanout name=f devices=cpu:1 gpufanin name=m ! "
                     "gpufantestrefusecaps name=picky ! fakesink  f.src_0 ! "
                     "identity ! m.sink_0");
  ASSERT_TRUE(p.ok());
  const std::string error = PlayError(p);
  EXPECT_NE(error.find("Downstream of m did not take the lanes' caps: picky "
                       "(gpufantestrefusecaps) refused video/x-raw, "
                       "format=(string)I420"),
            std::string::npos)
      << error;
}

// Every property that takes one of a fixed set of words is an enum (or
// flags), on the elements and as gpufanbin forwards it, so gst-inspect lists
// the values; the free-form strings are the ones below.
TEST(GpuFanBinErrors, WordPropertiesAreEnumsAndTimesStateTheirUnit) {
  for (const char *factory : {"gpufanout", "gpufanin", "gpufanbin"}) {
    GstElement *e = gst_element_factory_make(factory, nullptr);
    ASSERT_NE(e, nullptr);
    guint n = 0;
    GParamSpec **specs =
        g_object_class_list_properties(G_OBJECT_GET_CLASS(e), &n);
    for (guint i = 0; i < n; i++) {
      const std::string name = specs[i]->name;
      SCOPED_TRACE(std::string(factory) + "::" + name);
      if (G_IS_PARAM_SPEC_STRING(specs[i])) {
        EXPECT_TRUE(name == "name" || name == "devices" ||
                    name == "min-compute-capability" || name == "trace-file" ||
                    name == "branch" || name == "lane-properties")
            << "a new string property: an enum if it takes fixed words";
      }
      for (const char *word : {"policy", "staging", "chunk", "on-lane-error",
                               "on-stall", "copy-held"}) {
        if (name == word) {
          EXPECT_TRUE(G_IS_PARAM_SPEC_ENUM(specs[i]));
        }
      }
      if (name == "require-codecs") {
        EXPECT_TRUE(G_IS_PARAM_SPEC_FLAGS(specs[i]));
      }
      const std::string nick = g_param_spec_get_nick(specs[i]);
      if (name == "stats-interval") {
        EXPECT_NE(nick.find("(ms)"), std::string::npos) << nick;
      }
      if (name == "stall-timeout" || name == "lane-restart-delay") {
        EXPECT_NE(nick.find("(ns)"), std::string::npos) << nick;
        EXPECT_TRUE(G_IS_PARAM_SPEC_UINT64(specs[i]));
      }
    }
    g_free(specs);
    gst_object_unref(gst_object_ref_sink(e));
  }
}

// Free-form strings that do not parse: the error lists what is accepted.
TEST(GpuFanBinErrors, BadFreeFormValuesListWhatIsAccepted) {
  const std::string head = kI420 + "gpufanbin lanes=1 branch=identity ";
  ExpectReadyFails(head + "devices=gpu0 ! fakesink",
                   "expected auto, a list of GPU ordinals like 0,1,1, cpu or "
                   "cpu:N");
  ExpectReadyFails(head + "min-compute-capability=eight ! fakesink",
                   "Invalid min-compute-capability 'eight': expected "
                   "MAJOR.MINOR, e.g. 8.6");
}

// A GPU ordinal where no driver loads says so, and how to run CPU lanes;
// with a driver (the stand-in's two GPUs) the text stays the count's.
TEST(GpuFanBinErrors, AGpuOrdinalWithoutADriverSaysNoDriverWasFound) {
  const char *path = g_getenv("GPUFAN_LIBCUDA");
  void *driver = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  const bool has_driver = driver != nullptr;
  if (driver)
    dlclose(driver);
  const std::string line =
      kI420 + "gpufanbin devices=5 branch=identity ! fakesink";
  if (has_driver) {
    ExpectReadyFails(line,
                     "devices=5 (src_0) names GPU 5, but this machine "
                     "has ");
    LaunchedPipeline p(line);
    ASSERT_TRUE(p.ok());
    gst_element_set_state(p.get(), GST_STATE_READY);
    GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
    ASSERT_NE(err, nullptr);
    EXPECT_EQ(BusLog::ErrorText(err).find("no NVIDIA driver"),
              std::string::npos);
    EXPECT_TRUE(p.Stop());
    return;
  }
  // why there is none: no driver, or (a build without CUDA) no support
  ExpectReadyFails(line,
                   "No device for lane 0: devices=5 (src_0) names GPU 5, but "
                   "this machine has 0 GPU(s); no NVIDIA driver or CUDA device "
                   "is usable here (");
  LaunchedPipeline p(line);
  ASSERT_TRUE(p.ok());
  gst_element_set_state(p.get(), GST_STATE_READY);
  GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
  ASSERT_NE(err, nullptr);
  const std::string text = BusLog::ErrorText(err);
  EXPECT_TRUE(text.find("(libcuda.so.1 not found (no NVIDIA driver)") !=
                  std::string::npos ||
              text.find("(built without CUDA support") != std::string::npos)
      << text;
  EXPECT_TRUE(p.Stop());
  ExpectReadyFails(line, "): devices=cpu or devices=cpu:N runs CPU lanes");
}

// A lane's weight (src_%u) and a stream's (sink_%u) share their range: 0
// excludes a lane, and makes a stream a background one.
TEST(GpuFanBinErrors, LaneAndStreamWeightsShareTheirRange) {
  GstElement *f = gst_element_factory_make("gpufanout", nullptr);
  ASSERT_NE(f, nullptr);
  GstPad *src = gst_element_request_pad_simple(f, "src_%u");
  GstPad *sink = gst_element_request_pad_simple(f, "sink_%u");
  ASSERT_NE(src, nullptr);
  ASSERT_NE(sink, nullptr);
  GParamSpec *lane =
      g_object_class_find_property(G_OBJECT_GET_CLASS(src), "weight");
  GParamSpec *stream =
      g_object_class_find_property(G_OBJECT_GET_CLASS(sink), "weight");
  ASSERT_NE(lane, nullptr);
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(G_PARAM_SPEC_DOUBLE(lane)->minimum,
            G_PARAM_SPEC_DOUBLE(stream)->minimum);
  EXPECT_EQ(G_PARAM_SPEC_DOUBLE(lane)->maximum,
            G_PARAM_SPEC_DOUBLE(stream)->maximum);
  g_object_set(sink, "weight", 0.0, nullptr);
  gdouble weight = -1;
  g_object_get(sink, "weight", &weight, nullptr);
  EXPECT_EQ(weight, 0.0);
  gst_element_release_request_pad(f, sink);
  gst_element_release_request_pad(f, src);
  gst_object_unref(sink);
  gst_object_unref(src);
  gst_object_unref(gst_object_ref_sink(f));
}

// A trace file that cannot be written: a WARNING that says what trace-file
// takes, and the stream goes on.
TEST(GpuFanBinErrors, ATraceFileThatCannotBeWrittenSaysWhatItTakes) {
  LaunchedPipeline p(kI420 +
                     "gpufanout name=f devices=cpu:1 "
                     "trace-file=/nonexistent-gpufan-dir/t.json gpufanin "
                     "name=m ! fakesink  f.src_0 ! identity ! m.sink_0");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.PlayToEos());
  EXPECT_NE(p.bus().ErrorsText().find("No trace: cannot write the trace "
                                      "/nonexistent-gpufan-dir/t.json"),
            std::string::npos)
      << p.bus().ErrorsText();
  EXPECT_NE(p.bus().ErrorsText().find(
                "trace-file (or GPUFAN_TRACE) takes the path of a file that "
                "can be written, in a folder that exists"),
            std::string::npos)
      << p.bus().ErrorsText();
}
