// SPDX-License-Identifier: LGPL-2.1-or-later
// The gpufanbin tests' shared helpers (gpufanbin-util.h).
#include "gpufanbin-util.h"

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gst-test-util.h"

namespace gpufan_test {

void TestElementClassInit(gpointer klass, const char *longname,
                          const char *classification) {
  static GstStaticPadTemplate sink = GST_STATIC_PAD_TEMPLATE(
      "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
  static GstStaticPadTemplate src = GST_STATIC_PAD_TEMPLATE(
      "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
  gst_element_class_add_static_pad_template(GST_ELEMENT_CLASS(klass), &sink);
  gst_element_class_add_static_pad_template(GST_ELEMENT_CLASS(klass), &src);
  gst_element_class_set_static_metadata(GST_ELEMENT_CLASS(klass), longname,
                                        classification, "test", "test");
}

std::vector<std::string> LaneFactories(GstElement *bin) {
  std::vector<std::string> out;
  for (guint i = 0;; i++) {
    const std::string name = "lane" + std::to_string(i);
    GstElement *lane = gst_bin_get_by_name(GST_BIN(bin), name.c_str());
    if (!lane)
      break;
    std::vector<std::string> names;
    GstIterator *it = gst_bin_iterate_elements(GST_BIN(lane));
    GValue item = G_VALUE_INIT;
    while (gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
      GstElement *e = GST_ELEMENT(g_value_get_object(&item));
      GstElementFactory *f = gst_element_get_factory(e);
      if (f)
        names.push_back(GST_OBJECT_NAME(f));
      g_value_reset(&item);
    }
    g_value_unset(&item);
    gst_iterator_free(it);
    gst_object_unref(lane);
    std::sort(names.begin(), names.end());  // the bin's order is its own
    std::string factories;
    for (const std::string& n : names)
      factories += (factories.empty() ? "" : " ") + n;
    out.push_back(factories);
  }
  return out;
}

guint LaneCount(GstElement *bin) {
  return static_cast<guint>(LaneFactories(bin).size());
}

std::string LaneDeviceKind(GstElement *bin, guint i) {
  GstStructure *stats = GetStats(bin);
  const GstStructure *lane = stats ? StatsLane(stats, i) : nullptr;
  const gchar *kind = lane ? gst_structure_get_string(lane, "device-kind") : 0;
  std::string out = kind ? kind : "";
  if (stats)
    gst_structure_free(stats);
  return out;
}


void ExpectReadyFails(const std::string& description,
                      const std::string& expected) {
  SCOPED_TRACE(description);
  LaunchedPipeline p(description);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_FAILURE);
  GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
  ASSERT_NE(err, nullptr) << "no ERROR posted";
  EXPECT_NE(BusLog::ErrorText(err).find(expected), std::string::npos)
      << BusLog::ErrorText(err);
  EXPECT_TRUE(p.Stop());
}

void RegisterTransform(const char *factory, guint16 class_size,
                       GClassInitFunc class_init, gpointer class_data,
                       guint16 instance_size,
                       GInstanceInitFunc instance_init) {
  const std::string type_name = std::string("GpuFanTest_") + factory;
  if (g_type_from_name(type_name.c_str()))
    return;  // registered by an earlier repetition (--gtest_repeat)
  GTypeQuery query;
  g_type_query(GST_TYPE_BASE_TRANSFORM, &query);
  GTypeInfo info = {};
  info.class_size = class_size ? class_size : query.class_size;
  info.class_init = class_init;
  info.class_data = class_data;
  info.instance_size =
      instance_size ? instance_size : static_cast<guint16>(query.instance_size);
  info.instance_init = instance_init;
  const GType type =
      g_type_register_static(GST_TYPE_BASE_TRANSFORM, type_name.c_str(), &info,
                             static_cast<GTypeFlags>(0));
  ASSERT_TRUE(gst_element_register(nullptr, factory, GST_RANK_NONE, type));
}

bool StrictlyIncreasing(const std::vector<int64_t>& v) {
  for (size_t i = 1; i < v.size(); i++)
    if (v[i] <= v[i - 1])
      return false;
  return true;
}

GstElement *LaneElement(LaunchedPipeline& p, guint lane, const char *name) {
  GstElement *bin = gst_bin_get_by_name(
      GST_BIN(p.element("bin")), ("lane" + std::to_string(lane)).c_str());
  if (!bin)
    return nullptr;
  GstElement *e = gst_bin_get_by_name(GST_BIN(bin), name);
  gst_object_unref(bin);
  return e;
}

GstElement *BuildAndFindInLane(LaunchedPipeline& p, guint lane,
                               const char *name) {
  if (gst_element_set_state(p.get(), GST_STATE_READY) !=
      GST_STATE_CHANGE_SUCCESS)
    return nullptr;
  return LaneElement(p, lane, name);
}

std::unique_ptr<LaneFault> FaultInLane(LaunchedPipeline& p, guint lane,
                                       LaneFault::Kind kind, int64_t at) {
  GstElement *inject = BuildAndFindInLane(p, lane, "inject");
  if (!inject)
    return nullptr;
  auto fault = std::make_unique<LaneFault>(inject, kind, at);
  gst_object_unref(inject);
  return fault;
}

GstMessage *WaitForError(LaunchedPipeline& p, const std::string& text) {
  return p.bus().WaitFor(
      [&text](GstMessage *msg) {
        return GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR &&
               BusLog::ErrorText(msg).find(text) != std::string::npos;
      },
      kLongWait);
}

void StartPlaying(LaunchedPipeline& p) {
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
}

size_t WarningsFrom(LaunchedPipeline& p, const char *name, size_t expected) {
  auto from = [name](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           g_str_equal(GST_OBJECT_NAME(GST_MESSAGE_SRC(m)), name);
  };
  if (expected > 0)
    p.bus().WaitForCount(from, expected, kLongWait);
  return p.bus().Count(from);
}

std::atomic<int> g_refusals{-1};

namespace {

gboolean CannotStart(GstBaseTransform *trans) {
  int left = g_refusals.load();
  while (left > 0 && !g_refusals.compare_exchange_weak(left, left - 1)) {}
  if (left == 0)
    return TRUE;
  GST_ELEMENT_ERROR(trans, RESOURCE, OPEN_READ, ("cannot open the device"),
                    (nullptr));
  return FALSE;
}

void CannotStartClassInit(gpointer klass, gpointer) {
  TestElementClassInit(klass, "cannot start", "Filter");
  GST_BASE_TRANSFORM_CLASS(klass)->start = CannotStart;
}

}  // namespace

void RegisterCannotStart() {
  RegisterTransform("gpufantestcannotstart", 0, CannotStartClassInit, nullptr);
}

std::string FourLanes(int buffers, const char *settings) {
  return "videotestsrc name=src num-buffers=" + std::to_string(buffers) +
         " ! video/x-raw,width=16,height=16 ! gpufanbin name=bin lanes=4 "
         "policy=round-robin lane-restart-delay=0 " +
         settings + " branch=\"identity name=inject\" ! fakesink name=out";
}

bool IsRestored(GstMessage *m) {
  return BusLog::IsElementMessage(m, "gpufan-lane-restored");
}

guint RestoredField(GstMessage *m, const char *field) {
  guint value = G_MAXUINT;
  gst_structure_get_uint(gst_message_get_structure(m), field, &value);
  return value;
}

}  // namespace gpufan_test
