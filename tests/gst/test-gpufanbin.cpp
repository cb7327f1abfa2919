// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanbin: a gpufanout, one instance of a branch description per lane and a
// gpufanin, built at READY. The README's launch line, order, the lane count
// from `lanes` and `devices`, the children's properties, clear errors for bad
// branches at READY, lanes rebuilt after NULL, and elements fixed to one GPU
// (nvcodec's per-GPU registration) swapped for their lane's GPU. The last run
// over the stand-in driver's two GPUs (test-gpufanbin-fake-gpus) and skip
// elsewhere.
#include <dlfcn.h>
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
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

// A test element class: ANY caps on an always sink and src pad.
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

// Per lane, in lane order: the factories of its elements, sorted.
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

// Lane i's device kind ("cpu", "cuda") in the bin's statistics.
std::string LaneDeviceKind(GstElement *bin, guint i) {
  GstStructure *stats = GetStats(bin);
  const GstStructure *lane = stats ? StatsLane(stats, i) : nullptr;
  const gchar *kind = lane ? gst_structure_get_string(lane, "device-kind") : 0;
  std::string out = kind ? kind : "";
  if (stats)
    gst_structure_free(stats);
  return out;
}

// Whether GPUs 0 and 1 open here (real ones, or the stand-in driver's).
bool HaveTwoGpus() {
  LaunchedPipeline p(
      "videotestsrc num-buffers=1 ! gpufanbin name=bin devices=0,1 "
      "staging=never branch=identity ! fakesink");
  const bool two = p.ok() &&
                   gst_element_set_state(p.get(), GST_STATE_READY) !=
                       GST_STATE_CHANGE_FAILURE &&
                   LaneDeviceKind(p.element("bin"), 1) == "cuda";
  EXPECT_TRUE(p.Stop());
  return two;
}

// Goes to READY and expects it to fail with an ERROR whose text holds
// `expected`.
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

}  // namespace

// The README's line, as the issue gives it.
TEST(GpuFanBin, ReadmeLaunchLineRuns) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=600 ! gpufanbin name=bin lanes=2 "
      "branch=\"videoconvert ! gaussianblur\" ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(out.Buffers(), 600u);
  EXPECT_EQ(LaneCount(p.element("bin")), 2u);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u);
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

// ------------------------------------- elements fixed to one GPU (nvcodec) ---

namespace {

// A pass-through element whose read-only cuda-device-id is the GPU its
// factory was registered for, as nvcodec registers nvh264dec (GPU 0),
// nvh264device1dec (GPU 1), ...
struct FixedGpuClass {
  GstBaseTransformClass parent;
  guint gpu;
};

void FixedGpuGetProperty(GObject *object, guint, GValue *value, GParamSpec *) {
  const auto *klass =
      reinterpret_cast<FixedGpuClass *>(G_OBJECT_GET_CLASS(object));
  g_value_set_uint(value, klass->gpu);
}

void FixedGpuClassInit(gpointer klass, gpointer data) {
  auto *mine = static_cast<FixedGpuClass *>(klass);
  mine->gpu = GPOINTER_TO_UINT(data);
  G_OBJECT_CLASS(klass)->get_property = FixedGpuGetProperty;
  g_object_class_install_property(
      G_OBJECT_CLASS(klass), 1,
      g_param_spec_uint("cuda-device-id", "CUDA device id", "fixed", 0, 16,
                        mine->gpu, G_PARAM_READABLE));
  TestElementClassInit(klass, "fixed GPU", "Codec/Decoder/Video");
  GST_BASE_TRANSFORM_CLASS(klass)->passthrough_on_same_caps = TRUE;
}

// Registers `factory`, a GstBaseTransform subclass of the given sizes (0:
// the base's) made by `class_init` with `class_data`.
void RegisterTransform(const char *factory, guint16 class_size,
                       GClassInitFunc class_init, gpointer class_data,
                       guint16 instance_size = 0,
                       GInstanceInitFunc instance_init = nullptr) {
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

void RegisterFixedGpu(const char *factory, guint gpu) {
  RegisterTransform(factory, sizeof(FixedGpuClass), FixedGpuClassInit,
                    GUINT_TO_POINTER(gpu));
}

// A pass-through element with a writable device property: `gpu-id` (guint,
// default 0) as DeepStream's elements have, or `cuda-device-id` (gint,
// default -1: ask for a CUDA context) as nvcodec's cudaupload has.
struct DeviceIdElement {
  GstBaseTransform parent;
  gint device;
  // Its device when it started (READY->PAUSED), as DeepStream's elements
  // read gpu-id then; -100 before.
  std::atomic<gint> started_on;
};

gboolean DeviceIdStart(GstBaseTransform *trans) {
  auto *self = reinterpret_cast<DeviceIdElement *>(trans);
  self->started_on = self->device;
  return TRUE;
}

gint StartedOn(GstElement *element) {
  return reinterpret_cast<DeviceIdElement *>(element)->started_on.load();
}

void DeviceIdSetProperty(GObject *object, guint, const GValue *value,
                         GParamSpec *spec) {
  reinterpret_cast<DeviceIdElement *>(object)->device =
      G_IS_PARAM_SPEC_UINT(spec) ? static_cast<gint>(g_value_get_uint(value))
                                 : g_value_get_int(value);
}

void DeviceIdGetProperty(GObject *object, guint, GValue *value,
                         GParamSpec *spec) {
  const gint device = reinterpret_cast<DeviceIdElement *>(object)->device;
  if (G_IS_PARAM_SPEC_UINT(spec))
    g_value_set_uint(value, static_cast<guint>(device));
  else
    g_value_set_int(value, device);
}

void DeviceIdClassInit(gpointer klass, gpointer data) {
  const bool gpu_id = GPOINTER_TO_INT(data) != 0;
  G_OBJECT_CLASS(klass)->set_property = DeviceIdSetProperty;
  G_OBJECT_CLASS(klass)->get_property = DeviceIdGetProperty;
  g_object_class_install_property(
      G_OBJECT_CLASS(klass), 1,
      gpu_id ? g_param_spec_uint("gpu-id", "GPU id", "the GPU", 0, 16, 0,
                                 G_PARAM_READWRITE)
             : g_param_spec_int("cuda-device-id", "CUDA device id",
                                "the GPU, -1: ask for a context", -1, 16, -1,
                                G_PARAM_READWRITE));
  TestElementClassInit(klass, "device id", "Filter/Video");
  GST_BASE_TRANSFORM_CLASS(klass)->passthrough_on_same_caps = TRUE;
  GST_BASE_TRANSFORM_CLASS(klass)->start = DeviceIdStart;
}

void DeviceIdInit(GTypeInstance *instance, gpointer klass) {
  auto *self = reinterpret_cast<DeviceIdElement *>(instance);
  self->device =
      g_object_class_find_property(G_OBJECT_CLASS(klass), "gpu-id") ? 0 : -1;
  self->started_on = -100;
}

void RegisterDeviceId(const char *factory, bool gpu_id) {
  RegisterTransform(factory, 0, DeviceIdClassInit,
                    GINT_TO_POINTER(gpu_id ? 1 : 0), sizeof(DeviceIdElement),
                    DeviceIdInit);
}

gint DeviceOf(GstElement *element, const char *property) {
  GParamSpec *spec =
      g_object_class_find_property(G_OBJECT_GET_CLASS(element), property);
  if (spec == nullptr)
    return -100;
  if (G_IS_PARAM_SPEC_UINT(spec)) {
    guint v = 0;
    g_object_get(element, property, &v, nullptr);
    return static_cast<gint>(v);
  }
  gint v = 0;
  g_object_get(element, property, &v, nullptr);
  return v;
}

class GpuFanBinFixedGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Families as nvcodec names them; "gpufantestonlydec" has no GPU 1 kin.
    RegisterFixedGpu("gpufantestdec", 0);
    RegisterFixedGpu("gpufantestdevice1dec", 1);
    RegisterFixedGpu("gpufantestonlydec", 0);
    RegisterDeviceId("gpufantestgpuid", true);
    RegisterDeviceId("gpufantestcudaid", false);
  }
  void SetUp() override {
    if (!HaveTwoGpus())
      GTEST_SKIP() << "needs two GPUs (test-gpufanbin-fake-gpus runs this "
                      "over the stand-in driver)";
  }
};

}  // namespace

TEST_F(GpuFanBinFixedGpu, ElementsFollowTheirLanesGpu) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=20 ! gpufanbin name=bin devices=0,1,1 "
      "staging=never branch=\"identity ! gpufantestdec\" ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFactories(p.element("bin")),
            (std::vector<std::string>{"gpufantestdec identity",
                                      "gpufantestdevice1dec identity",
                                      "gpufantestdevice1dec identity"}));
  EXPECT_EQ(out.Buffers(), 20u);
}

TEST_F(GpuFanBinFixedGpu, NoFactoryForTheLanesGpuIsAClearError) {
  ExpectReadyFails(
      "videotestsrc ! gpufanbin devices=0,1 staging=never "
      "branch=\"gpufantestonlydec\" ! fakesink",
      "Lane 1 (GPU 1): gpufantestonlydec runs on GPU 0 only, and no element "
      "of its family is registered for GPU 1");
  ExpectReadyFails(
      "videotestsrc ! gpufanbin devices=cpu:1 branch=\"gpufantestdec\" ! "
      "fakesink",
      "Lane 0 (CPU): gpufantestdec runs on GPU 0 only, and this lane is a CPU "
      "lane");
}

// --------------------------- hand-written lanes bound to their GPU (issue 11)

namespace {

// Counts the fan-out's WARNINGs whose text holds `text`.
size_t FanoutWarningsWith(LaunchedPipeline& p, const std::string& text) {
  return p.bus().Count([&text](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           BusLog::ErrorText(m).find(text) != std::string::npos;
  });
}

// At frame `at`, from the source's thread: one more lane on fan-out "f",
// running a new `factory` element named "late", into fan-in "i".
// With `start_first`, the element is brought to the pipeline's state
// before the fan-out's pad is linked to it (too late for a gpu-id);
// otherwise after.
struct AddLaneAt {
  LaunchedPipeline *p;
  int64_t at;
  const char *factory;
  bool start_first = false;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *a = static_cast<AddLaneAt *>(data);
    if (static_cast<int64_t>(
            GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info))) != a->at)
      return GST_PAD_PROBE_OK;
    GstElement *element = gst_element_factory_make(a->factory, "late");
    // the pipeline may still be changing state: it would start the new
    // element with its other children, before it is linked
    gst_element_set_locked_state(element, TRUE);
    gst_bin_add(GST_BIN(a->p->get()), element);
    GstPad *from = gst_element_request_pad_simple(a->p->element("f"), "src_%u");
    GstPad *to = gst_element_request_pad_simple(a->p->element("i"), "sink_%u");
    GstPad *in = gst_element_get_static_pad(element, "sink");
    GstPad *out = gst_element_get_static_pad(element, "src");
    EXPECT_EQ(gst_pad_link(out, to), GST_PAD_LINK_OK);
    if (a->start_first) {
      gst_element_set_locked_state(element, FALSE);
      EXPECT_TRUE(gst_element_sync_state_with_parent(element));
    }
    EXPECT_EQ(gst_pad_link(from, in), GST_PAD_LINK_OK);
    if (!a->start_first) {
      gst_element_set_locked_state(element, FALSE);
      EXPECT_TRUE(gst_element_sync_state_with_parent(element));
    }
    for (GstPad *pad : {from, to, in, out})
      gst_object_unref(pad);
    return GST_PAD_PROBE_OK;
  }
};

}  // namespace

// gpufanout's own lanes (no gpufanbin): `gpu-id` left at its default follows
// the lane, also inside a bin; one the user set to another GPU, and a
// `cuda-device-id` set so, are warned about once and kept; a `cuda-device-id`
// at -1 is left to ask for the lane's context.
TEST_F(GpuFanBinFixedGpu, HandWrittenLanesAreBoundToTheirGpu) {
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=20 ! video/x-raw,width=16,height=16 ! "
      "gpufanout name=f devices=0,1 staging=never gpufanin name=i ! "
      "fakesink name=out "
      "f.src_0 ! gpufantestgpuid name=a ! gpufantestgpuid name=u gpu-id=1 ! "
      "gpufantestcudaid name=c0 cuda-device-id=1 ! i.sink_0 "
      "f.src_1 ! ( name=inner queue ! gpufantestgpuid name=b ! "
      "gpufantestcudaid name=c ) ! i.sink_1");
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(DeviceOf(p.element("a"), "gpu-id"), 0);
  EXPECT_EQ(DeviceOf(p.element("u"), "gpu-id"), 1) << "the user's choice";
  EXPECT_EQ(DeviceOf(p.element("c0"), "cuda-device-id"), 1);
  GstElement *inner = p.element("inner");
  ASSERT_NE(inner, nullptr);
  GstElement *b = gst_bin_get_by_name(GST_BIN(inner), "b");
  GstElement *c = gst_bin_get_by_name(GST_BIN(inner), "c");
  ASSERT_TRUE(b != nullptr && c != nullptr);
  EXPECT_EQ(DeviceOf(b, "gpu-id"), 1) << "left at its default: the lane's";
  EXPECT_EQ(StartedOn(b), 1) << "set before it started";
  EXPECT_EQ(DeviceOf(c, "cuda-device-id"), -1) << "asks for a context";
  gst_object_unref(b);
  gst_object_unref(c);
  EXPECT_EQ(FanoutWarningsWith(
                p,
                "Lane 0: u (gpufantestgpuid) has gpu-id=1 but its lane is "
                "on GPU 0"),
            1u);
  EXPECT_EQ(FanoutWarningsWith(p,
                               "Lane 0: c0 (gpufantestcudaid) has "
                               "cuda-device-id=1 but its lane is on GPU 0"),
            1u);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_WARNING), 2u);
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, 20)) << out.Summary();
  EXPECT_TRUE(p.Stop());
}

TEST_F(GpuFanBinFixedGpu, AnElementOfAnotherGpuInAHandWrittenLaneIsAnError) {
  const std::string head =
      "videotestsrc ! gpufanout name=f devices=0,1 staging=never gpufanin "
      "name=i ! fakesink f.src_0 ! identity ! i.sink_0 f.src_1 ! ";
  ExpectReadyFails(head + "gpufantestdec name=d ! i.sink_1",
                   "Lane 1's branch cannot run on its GPU: d (gpufantestdec) "
                   "runs on GPU 0 only, and its lane is on GPU 1: use "
                   "gpufantestdevice1dec in that lane");
  ExpectReadyFails(
      head + "queue ! gpufantestonlydec name=d ! i.sink_1",
      "d (gpufantestonlydec) runs on GPU 0 only, and its lane is "
      "on GPU 1: no element of its family is registered for GPU 1");
}

// A lane linked while the stream runs is bound when the fan-out's pad is
// linked to it: an element linked before it starts starts on its lane's GPU;
// one started first cannot be bound, and a warning says so. An element
// fixed to another GPU there stops the stream with the same clear error.
TEST_F(GpuFanBinFixedGpu, ALaneLinkedWhilePlayingIsBound) {
  const std::string line =
      "videotestsrc name=src num-buffers=200 ! "
      "video/x-raw,width=16,height=16 ! gpufanout name=f devices=auto "
      "staging=never policy=round-robin gpufanin name=i ! fakesink name=out "
      "f.src_0 ! identity ! i.sink_0";
  {
    LaunchedPipeline p(line);
    ASSERT_TRUE(p.ok());
    AddLaneAt add{&p, 10, "gpufantestgpuid"};
    p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER, AddLaneAt::Probe, &add);
    p.Stamp("src", "src");
    RecordLog& out = p.Record("out", "sink");
    ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
    ASSERT_NE(p.element("late"), nullptr);
    EXPECT_EQ(StartedOn(p.element("late")), 1)
        << "devices=auto put the second lane on GPU 1";
    EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, 200)) << out.Summary();
    EXPECT_TRUE(p.Stop());
  }
  {
    LaunchedPipeline p(line);
    ASSERT_TRUE(p.ok());
    AddLaneAt add{&p, 10, "gpufantestgpuid", /*start_first=*/true};
    p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER, AddLaneAt::Probe, &add);
    ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
    ASSERT_NE(p.element("late"), nullptr);
    EXPECT_EQ(StartedOn(p.element("late")), 0);
    EXPECT_EQ(DeviceOf(p.element("late"), "gpu-id"), 0) << "left as it ran";
    EXPECT_EQ(FanoutWarningsWith(p,
                                 "Lane 1: late (gpufantestgpuid) started "
                                 "on GPU 0 before its lane (on GPU 1) "
                                 "could set its gpu-id"),
              1u);
    EXPECT_TRUE(p.Stop());
  }
  LaunchedPipeline p(line);
  ASSERT_TRUE(p.ok());
  AddLaneAt add{&p, 10, "gpufantestdec"};
  p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER, AddLaneAt::Probe, &add);
  // the error may come before PLAYING is reached: no wait for the state
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(BusLog::ErrorText(err).find(
                "Lane 1's branch cannot run on its GPU: late (gpufantestdec) "
                "runs on GPU 0 only, and its lane is on GPU 1: use "
                "gpufantestdevice1dec"),
            std::string::npos)
      << BusLog::ErrorText(err);
  EXPECT_TRUE(p.Stop());
}

// gpufanbin binds each lane's instance before it starts: `gpu-id` follows.
TEST_F(GpuFanBinFixedGpu, GpufanbinSetsGpuIdBeforeTheBranchStarts) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=20 ! gpufanbin name=bin devices=0,1 "
      "staging=never branch=\"gpufantestgpuid name=g\" ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS);
  for (gint lane = 0; lane < 2; lane++) {
    GstElement *branch = gst_bin_get_by_name(
        GST_BIN(p.element("bin")), ("lane" + std::to_string(lane)).c_str());
    ASSERT_NE(branch, nullptr);
    GstElement *g = gst_bin_get_by_name(GST_BIN(branch), "g");
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(DeviceOf(g, "gpu-id"), lane);
    gst_object_unref(g);
    gst_object_unref(branch);
  }
  EXPECT_TRUE(p.Stop());
}

// ------------------------------------------------- on-lane-error (issue 12)
// ---

namespace {

bool StrictlyIncreasing(const std::vector<int64_t>& v) {
  for (size_t i = 1; i < v.size(); i++)
    if (v[i] <= v[i - 1])
      return false;
  return true;
}

// Builds the lanes (READY) and returns lane `lane`'s element `name` (a ref),
// for a test to make it fail.
GstElement *BuildAndFindInLane(LaunchedPipeline& p, guint lane,
                               const char *name);

// The element named `name` in lane `lane` of bin "bin" (a ref).
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

// Builds the lanes (READY) and injects `kind` from frame `at` on into lane
// `lane`'s element named inject; nullptr when there is no such element.
std::unique_ptr<LaneFault> FaultInLane(LaunchedPipeline& p, guint lane,
                                       LaneFault::Kind kind, int64_t at) {
  GstElement *inject = BuildAndFindInLane(p, lane, "inject");
  if (!inject)
    return nullptr;
  auto fault = std::make_unique<LaneFault>(inject, kind, at);
  gst_object_unref(inject);
  return fault;
}

// The first ERROR whose text holds `text` (other ERRORs may come first).
GstMessage *WaitForError(LaunchedPipeline& p, const std::string& text) {
  return p.bus().WaitFor(
      [&text](GstMessage *msg) {
        return GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR &&
               BusLog::ErrorText(msg).find(text) != std::string::npos;
      },
      kLongWait);
}

// Sets the pipeline PLAYING without waiting for it: in tests whose branch
// fails early, the error may come before PLAYING is reached.
void StartPlaying(LaunchedPipeline& p) {
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
}

// WARNING messages whose source is named `name`, once `expected` of them
// came (gpufanbin posts a lane's ERROR as a WARNING once the lane is out:
// the stream may end first).
size_t WarningsFrom(LaunchedPipeline& p, const char *name, size_t expected) {
  auto from = [name](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           g_str_equal(GST_OBJECT_NAME(GST_MESSAGE_SRC(m)), name);
  };
  if (expected > 0)
    p.bus().WaitForCount(from, expected, kLongWait);
  return p.bus().Count(from);
}

// A pass-through element that cannot start (READY->PAUSED posts an ERROR):
// always while g_refusals is negative, else that many more times.
std::atomic<int> g_refusals{-1};

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

void RegisterCannotStart() {
  RegisterTransform("gpufantestcannotstart", 0, CannotStartClassInit, nullptr);
}

// After `after` buffers, the pushes on the pad return GST_FLOW_ERROR.
GstPadProbeReturn FailSilently(GstPad *, GstPadProbeInfo *info,
                               gpointer counter);

// A pipeline of 4 lanes of `identity name=inject`, round-robin so that each
// lane gets a quarter of the buffers whatever the machine's speed. Failed
// lanes are not rebuilt unless `settings` says so (lane-restart-delay).
std::string FourLanes(int buffers, const char *settings = "") {
  return "videotestsrc name=src num-buffers=" + std::to_string(buffers) +
         " ! video/x-raw,width=16,height=16 ! gpufanbin name=bin lanes=4 "
         "policy=round-robin lane-restart-delay=0 " +
         settings + " branch=\"identity name=inject\" ! fakesink name=out";
}

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

// Chunk mode: a lane that fails mid-chunk leaves; its chunk is lost, the
// others' chunks go on whole and in order.
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
  EXPECT_TRUE(StrictlyIncreasing(got)) << out.Summary();
  EXPECT_LT(got.size(), static_cast<size_t>(kBuffers));
  EXPECT_GT(got.size(), static_cast<size_t>(kBuffers) / 2);
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  EXPECT_EQ(p.bus().Count([](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           BusLog::ErrorText(m).find("without the EOS") != std::string::npos;
  }),
            0u);
}

// ------------------------------------------- replay (issue 12, item 2, 3) ---

namespace {

guint LaneFailedField(LaunchedPipeline& p, guint lane, const char *field) {
  guint value = 0;
  p.bus().Count([&](GstMessage *m) {
    if (!BusLog::IsElementMessage(m, "gpufan-lane-failed"))
      return false;
    const GstStructure *s = gst_message_get_structure(m);
    guint got = G_MAXUINT;
    gst_structure_get_uint(s, "lane", &got);
    if (got == lane)
      gst_structure_get_uint(s, field, &value);
    return false;
  });
  return value;
}

bool IsRestored(GstMessage *m) {
  return BusLog::IsElementMessage(m, "gpufan-lane-restored");
}

}  // namespace

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

namespace {

guint RestoredField(GstMessage *m, const char *field) {
  guint value = G_MAXUINT;
  gst_structure_get_uint(gst_message_get_structure(m), field, &value);
  return value;
}

// Holds the source at frame `at` until the bus has `n` restored messages
// (bounded: the test fails rather than hangs).
struct HoldUntilRestored {
  LaunchedPipeline *p;
  int64_t at;
  size_t n;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *h = static_cast<HoldUntilRestored *>(data);
    if (static_cast<int64_t>(
            GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info))) == h->at)
      h->p->bus().WaitForCount(IsRestored, h->n, kLongWait);
    return GST_PAD_PROBE_OK;
  }
};

struct InjectedFault {
  guint lane;
  LaneFault::Kind kind;
  int64_t at;  // frame number
};

// FourLanes(frames, settings) with `faults`, played to EOS: every frame
// leaves once, in order, with no ERROR; each faulty lane posts one
// lane-failed message and loses nothing, the others post none; what the
// failed lanes handed over went to the others. Lane `slow_lane` (if any)
// sleeps 3 ms per frame. With `restored`, the source waits at 4/5 of the
// frames until that many failed lanes were rebuilt.
void ExpectNoFrameLost(int frames, const std::string& settings,
                       const std::vector<InjectedFault>& faults,
                       int slow_lane = -1, size_t restored = 0) {
  LaunchedPipeline p(FourLanes(frames, settings.c_str()));
  ASSERT_TRUE(p.ok());
  HoldUntilRestored hold{&p, frames * 4 / 5, restored};
  if (restored > 0)
    p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER,
               HoldUntilRestored::Probe, &hold);
  if (slow_lane >= 0) {
    GstElement *slow =
        BuildAndFindInLane(p, static_cast<guint>(slow_lane), "inject");
    ASSERT_NE(slow, nullptr);
    g_object_set(slow, "sleep-time", 3000, nullptr);
    gst_object_unref(slow);
  }
  std::vector<std::unique_ptr<LaneFault>> injected;
  size_t errors = 0;
  for (const InjectedFault& f : faults) {
    injected.push_back(FaultInLane(p, f.lane, f.kind, f.at));
    ASSERT_NE(injected.back(), nullptr);
    errors += f.kind == LaneFault::Kind::kError;
  }
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(WarningsFrom(p, "inject", errors), errors)
      << "each branch's ERROR, as a WARNING";
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, frames)) << out.Summary();
  EXPECT_EQ(out.Buffers(), static_cast<size_t>(frames));
  GstStructure *stats = GetStats(p.element("bin"));
  ASSERT_NE(stats, nullptr);
  for (guint lane = 0; lane < 4; lane++) {
    SCOPED_TRACE("lane " + std::to_string(lane));
    const bool faulty =
        std::any_of(faults.begin(), faults.end(),
                    [lane](const InjectedFault& f) { return f.lane == lane; });
    EXPECT_EQ(LaneFailedMessages(p, lane, faulty ? 1 : 0), faulty ? 1u : 0u);
    if (!faulty)
      continue;
    EXPECT_EQ(LaneFailedField(p, lane, "lost"), 0u);
    const GstStructure *l = StatsLaneById(stats, lane);
    EXPECT_STREQ(gst_structure_get_string(l, "state"), "failed");
    EXPECT_GE(StatsU64(l, "handed-over"), 1u) << "the frame it failed on";
  }
  EXPECT_EQ(SumLanesU64(stats, "replayed"), SumLanesU64(stats, "handed-over"));
  EXPECT_EQ(SumLanesU64(stats, "timed-out"), 0u);
  gst_structure_free(stats);
  EXPECT_EQ(p.bus().Count(IsRestored), restored);
  for (auto& f : injected)
    f->Release();
  ASSERT_TRUE(p.Stop());
}

}  // namespace

// The default: a lane that errors leaves, and the frames it held go to the
// others: nothing lost.
TEST(GpuFanBinReplay, ALaneThatErrorsLosesNoFrame) {
  ExpectNoFrameLost(2000, "", {{1, LaneFault::Kind::kError, 200}});
}

TEST(GpuFanBinReplay, ABranchThatFailsWithoutAMessageLosesNoFrame) {
  ExpectNoFrameLost(1000, "", {{2, LaneFault::Kind::kSilentError, 100}});
}

// on-stall=replay: a lane blocked for good inside its push is failed after
// stall-timeout and its frames go on elsewhere; EOS still comes.
TEST(GpuFanBinReplay, ABlockedLaneFailsOnStallAndLosesNoFrame) {
  ExpectNoFrameLost(600, "on-stall=replay stall-timeout=300000000",
                    {{2, LaneFault::Kind::kBlock, 300}});
}

// A slow lane fails on its last frames, when the others are done: they
// held their EOS back, and take its frames.
TEST(GpuFanBinReplay, ALaneFailingAtTheEndLosesNoFrame) {
  ExpectNoFrameLost(400, "", {{1, LaneFault::Kind::kError, 393}}, 1);
}

// Drops every frame whose number ends in 3, silently (no GAP, no error).
GstPadProbeReturn DropEveryTenth(GstPad *, GstPadProbeInfo *info, gpointer) {
  const int64_t frame =
      PtsIndex(GST_BUFFER_PTS(GST_PAD_PROBE_INFO_BUFFER(info)));
  return frame % 10 == 3 ? GST_PAD_PROBE_DROP : GST_PAD_PROBE_OK;
}

// Lane 2 drops frames silently, replayed ones included, while lane 1
// fails: every frame leaves in order or is proven dropped by a marker,
// none given up after a stall timeout (300 s: a wait would fail the test).
TEST(GpuFanBinReplay, DroppedReplayedFramesAreProvenByTheirMarker) {
  constexpr int kBuffers = 2000;
  LaunchedPipeline p(FourLanes(kBuffers, "stall-timeout=300000000000"));
  ASSERT_TRUE(p.ok());
  GstElement *failing = BuildAndFindInLane(p, 1, "inject");
  GstElement *dropping = LaneElement(p, 2, "inject");
  ASSERT_TRUE(failing && dropping);
  LaneFault fault(failing, LaneFault::Kind::kSilentError, 300);
  GstPad *pad = gst_element_get_static_pad(dropping, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, DropEveryTenth, nullptr,
                    nullptr);
  gst_object_unref(pad);
  gst_object_unref(failing);
  gst_object_unref(dropping);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  EXPECT_TRUE(StrictlyIncreasing(out.BufferIndices())) << out.Summary();
  GstStructure *stats = GetStats(p.element("bin"));
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(SumLanesU64(stats, "timed-out"), 0u);
  EXPECT_GT(StatsU64(StatsLaneById(stats, 2), "dropped"), 0u);
  EXPECT_EQ(out.Buffers() + SumLanesU64(stats, "dropped"),
            static_cast<size_t>(kBuffers));
  gst_structure_free(stats);
}

// The case: 4 lanes, 5,000 frames; lane 1 errors at frame 200,
// lane 2 blocks for good at frame 1,000, lane 3 fails silently at frame
// 3,000, and each is rebuilt 50 ms later (the source waits for the three
// at frame 4,000). Every frame leaves once, in order, with no ERROR and one
// lane-failed message per failure.
TEST(GpuFanBinReplay, ThreeFailuresInFiveThousandFramesLoseNothing) {
  ExpectNoFrameLost(
      5000,
      "on-stall=replay stall-timeout=2000000000 lane-restart-delay=50000000",
      {{1, LaneFault::Kind::kError, 200},
       {2, LaneFault::Kind::kBlock, 1000},
       {3, LaneFault::Kind::kSilentError, 3000}},
      -1, 3);
}

// on-stall=skip (the default) still gives the blocked frame up.
TEST(GpuFanBinReplay, SkipGivesTheStalledFrameUp) {
  constexpr int kBuffers = 400;
  LaunchedPipeline p(FourLanes(kBuffers, "stall-timeout=300000000"));
  ASSERT_TRUE(p.ok());
  std::unique_ptr<LaneFault> fault =
      FaultInLane(p, 2, LaneFault::Kind::kBlock, 200);
  ASSERT_NE(fault, nullptr);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 2, 0), 0u);
  EXPECT_TRUE(StrictlyIncreasing(out.BufferIndices())) << out.Summary();
  EXPECT_LT(out.Buffers(), static_cast<size_t>(kBuffers));
  fault->Release();
  ASSERT_TRUE(p.Stop());
}

// One bad frame (every lane fails on it) costs that frame and two lanes
// (the one it failed on first, and the one it was sent to), not the stream.
TEST(GpuFanBinReplay, ABadFrameIsGivenUpAfterFailingTwoLanes) {
  constexpr int kBuffers = 400;
  LaunchedPipeline p(FourLanes(kBuffers));
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS);
  std::vector<std::unique_ptr<LaneFault>> faults;
  for (guint lane = 0; lane < 4; lane++) {
    GstElement *inject = LaneElement(p, lane, "inject");
    ASSERT_NE(inject, nullptr);
    faults.push_back(std::make_unique<LaneFault>(
        inject, LaneFault::Kind::kError, 100, /*only=*/true));
    gst_object_unref(inject);
  }
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  auto failed = [](GstMessage *m) {
    return BusLog::IsElementMessage(m, "gpufan-lane-failed");
  };
  EXPECT_TRUE(p.bus().WaitForCount(failed, 2, kLongWait));
  EXPECT_EQ(p.bus().Count(failed), 2u);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < kBuffers; i++)
    if (i != 100)
      expected.push_back(i);
  EXPECT_EQ(out.BufferIndices(), expected) << out.Summary();
}

// Frames a failing lane held before a caps change go to a lane that has
// not passed the change, ahead of it: each leaves with the caps it came in
// with. Lane 2 is slow (50 ms a frame), so it lags the others by several
// frames; lane 1 fails on frame kChange - 3 once the source has passed the
// change, when the fast lanes have taken it.
TEST(GpuFanBinReplay, ReplayedFramesKeepTheirCaps) {
  constexpr int kBuffers = 240;
  constexpr int kChange = 120;
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=" + std::to_string(kBuffers) +
      " ! capsfilter name=cf caps=video/x-raw,width=16,height=16 ! gpufanbin "
      "name=bin lanes=4 policy=round-robin branch=\"identity name=inject\" "
      "! fakesink name=out");
  ASSERT_TRUE(p.ok());
  GstElement *failing = BuildAndFindInLane(p, 1, "inject");
  GstElement *slow = LaneElement(p, 2, "inject");
  ASSERT_TRUE(failing && slow);
  g_object_set(slow, "sleep-time", 50000, nullptr);
  gst_object_unref(slow);
  struct Change {
    GstElement *capsfilter;
    std::mutex mutex;
    std::condition_variable cond;
    bool changed = false;  // the new caps are set
    bool queued = false;   // ... and went into every lane's queue
  } change;
  change.capsfilter = p.element("cf");
  // At frame kChange the source switches to 32x32. Its ALLOCATION query
  // for the new caps comes after the CAPS event went into the lanes'
  // queues (and waits for the lanes to drain).
  p.AddProbe(
      "src", "src",
      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                   GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM),
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *c = static_cast<Change *>(data);
        std::lock_guard<std::mutex> lock(c->mutex);
        if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
          if (GST_BUFFER_OFFSET(GST_PAD_PROBE_INFO_BUFFER(info)) ==
              static_cast<guint64>(kChange) - 1) {
            GstCaps *caps =
                gst_caps_from_string("video/x-raw,width=32,height=32");
            g_object_set(c->capsfilter, "caps", caps, nullptr);
            gst_caps_unref(caps);
            c->changed = true;
          }
        } else if (c->changed && GST_QUERY_TYPE(GST_PAD_PROBE_INFO_QUERY(
                                     info)) == GST_QUERY_ALLOCATION) {
          c->queued = true;
          c->cond.notify_all();
        }
        return GST_PAD_PROBE_OK;
      },
      &change);
  // Lane 1's push of frame kChange - 3 fails once the change is queued
  // (bounded: a hang would fail the test, not block it).
  GstPad *pad = gst_element_get_static_pad(failing, "src");
  gst_pad_add_probe(
      pad, GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *c = static_cast<Change *>(data);
        GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
        if (PtsIndex(GST_BUFFER_PTS(buffer)) != kChange - 3)
          return GST_PAD_PROBE_OK;
        std::unique_lock<std::mutex> lock(c->mutex);
        c->cond.wait_for(lock, kLongWait, [c] { return c->queued; });
        gst_buffer_unref(buffer);
        GST_PAD_PROBE_INFO_DATA(info) = nullptr;
        GST_PAD_PROBE_INFO_FLOW_RETURN(info) = GST_FLOW_ERROR;
        return GST_PAD_PROBE_HANDLED;
      },
      &change, nullptr);
  gst_object_unref(pad);
  gst_object_unref(failing);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  EXPECT_EQ(LaneFailedField(p, 1, "lost"), 0u);
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers)) << out.Summary();
  // Each buffer leaves under the caps of its input: 16 wide before the
  // change, 32 after.
  int width = 0;
  for (const Entry& e : out.Snapshot()) {
    if (e.type() == GST_EVENT_CAPS) {
      GstCaps *caps;
      gst_event_parse_caps(e.event, &caps);
      gst_structure_get_int(gst_caps_get_structure(caps, 0), "width", &width);
    } else if (e.is_buffer) {
      const int frame = static_cast<int>(e.index);
      ASSERT_EQ(width, frame < kChange ? 16 : 32) << "frame " << frame;
    }
  }
}

// Upstream allocates from a pool of 8 buffers: the references replay keeps
// go back as frames leave gpufanin, not at the next dispatch (which would
// wait for a buffer forever).
TEST(GpuFanBinReplay, KeptFramesGoBackToABoundedPool) {
  constexpr int kBuffers = 200;
  LaunchedPipeline p(
      "appsrc name=src format=time block=true "
      "caps=video/x-raw,format=GRAY8,width=16,height=16,framerate=30/1 ! "
      "gpufanbin name=bin lanes=4 branch=identity ! fakesink name=out");
  ASSERT_TRUE(p.ok());
  GstBufferPool *pool = gst_buffer_pool_new();
  GstStructure *config = gst_buffer_pool_get_config(pool);
  GstCaps *caps = gst_caps_from_string(
      "video/x-raw,format=GRAY8,width=16,height=16,framerate=30/1");
  gst_buffer_pool_config_set_params(config, caps, 256, 8, 8);
  gst_caps_unref(caps);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  RecordLog& out = p.Record("out", "sink");
  StartPlaying(p);  // prerolls once the first buffer comes
  GstElement *src = p.element("src");
  std::thread pusher([pool, src] {
    for (int i = 0; i < kBuffers; i++) {
      GstBuffer *buffer = nullptr;
      if (gst_buffer_pool_acquire_buffer(pool, &buffer, nullptr) != GST_FLOW_OK)
        return;  // set flushing: the pipeline hung
      GST_BUFFER_PTS(buffer) = static_cast<GstClockTime>(i) * GST_SECOND / 30;
      GstFlowReturn ret;
      g_signal_emit_by_name(src, "push-buffer", buffer, &ret);
      gst_buffer_unref(buffer);
    }
    GstFlowReturn ret;
    g_signal_emit_by_name(src, "end-of-stream", &ret);
  });
  const bool eos = out.WaitEvents(GST_EVENT_EOS, 1, kLongWait);
  gst_buffer_pool_set_flushing(pool, TRUE);
  pusher.join();
  EXPECT_TRUE(eos) << "stuck after " << out.Buffers() << " buffers";
  EXPECT_EQ(out.Buffers(), static_cast<size_t>(kBuffers));
  ASSERT_TRUE(p.Stop());
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
}

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

// A lane blocked for good fails on its stall (on-stall=replay); a flushing
// seek then leaves that lane alone (a flush would wait for its push) and
// completes, and the stream reaches EOS.
TEST(GpuFanBinReplay, AFlushingSeekPassesAStuckFailedLane) {
  LaunchedPipeline p(
      FourLanes(3000, "on-stall=replay stall-timeout=200000000"));
  ASSERT_TRUE(p.ok());
  std::unique_ptr<LaneFault> block =
      FaultInLane(p, 2, LaneFault::Kind::kBlock, 100);
  ASSERT_NE(block, nullptr);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  StartPlaying(p);
  ASSERT_TRUE(p.bus().WaitFor(
      [](GstMessage *m) {
        return BusLog::IsElementMessage(m, "gpufan-lane-failed");
      },
      kLongWait));
  EXPECT_TRUE(gst_element_seek_simple(
      p.get(), GST_FORMAT_TIME, static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH),
      0));
  EXPECT_TRUE(out.WaitEvents(GST_EVENT_EOS, 1, kLongWait)) << out.Summary();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_GE(out.Events(GST_EVENT_FLUSH_STOP), 1u);
  block->Release();
  ASSERT_TRUE(p.Stop());
}

// Over the stand-in driver only (it can be told to show a sticky error):
// lane 0 fails on GPU 0, which then shows CUDA_ERROR_ILLEGAL_ADDRESS; GPU 0
// is excluded for the rest of the process, so the lane rebuilt in its
// place (lane 2, which devices=auto would put on GPU 0) runs on GPU 1.
// (Last of its suite: the exclusion outlives it.)
// While alive, the stand-in driver's DEVICE answers with a sticky CUDA error
// CODE. Through the driver's own setter, never the environment: lane threads
// ask the driver while the test sets it.
class FakeCudaSticky {
 public:
  FakeCudaSticky(int device, int code) {
    const char *path = g_getenv("GPUFAN_LIBCUDA");
    // Already loaded by the back end: RTLD_NOLOAD only finds it.
    void *library = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    if (library == nullptr)
      return;
    set_ = reinterpret_cast<void (*)(int, int)>(
        dlsym(library, "gpufan_fake_cuda_set_sticky"));
    dlclose(library);  // drops only the reference RTLD_NOLOAD took
    if (set_ != nullptr)
      set_(device, code);
  }
  ~FakeCudaSticky() {
    if (set_ != nullptr)
      set_(-1, 0);
  }
  FakeCudaSticky(const FakeCudaSticky&) = delete;
  FakeCudaSticky& operator=(const FakeCudaSticky&) = delete;
  bool ok() const { return set_ != nullptr; }

 private:
  void (*set_)(int, int) = nullptr;
};

TEST_F(GpuFanBinFixedGpu, ZzAGpuWithAStickyErrorIsNotUsedAgain) {
  if (!g_getenv("GPUFAN_LIBCUDA"))
    GTEST_SKIP() << "needs the stand-in driver to show a sticky error";
  constexpr int kBuffers = 600;
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=" + std::to_string(kBuffers) +
      " ! video/x-raw,width=16,height=16 ! gpufanbin name=bin lanes=2 "
      "devices=auto staging=never policy=round-robin "
      "lane-restart-delay=20000000 branch=\"identity name=inject\" ! fakesink "
      "name=out");
  ASSERT_TRUE(p.ok());
  std::unique_ptr<LaneFault> fault =
      FaultInLane(p, 0, LaneFault::Kind::kSilentError, 100);
  ASSERT_NE(fault, nullptr);
  ASSERT_EQ(LaneDeviceKind(p.element("bin"), 0), "cuda");
  HoldUntilRestored hold{&p, 300, 1};
  p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER, HoldUntilRestored::Probe,
             &hold);
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  FakeCudaSticky sticky(0, 700);
  ASSERT_TRUE(sticky.ok()) << "the stand-in driver has no sticky setter";
  ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().Count([](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
           BusLog::ErrorText(m).find("GPU 0 shows a sticky CUDA error") !=
               std::string::npos;
  }),
            1u);
  GstMessage *restored = p.bus().WaitFor(IsRestored, kWait);
  ASSERT_NE(restored, nullptr);
  EXPECT_STREQ(
      gst_structure_get_string(gst_message_get_structure(restored), "device"),
      "cuda:1");
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers)) << out.Summary();
  ASSERT_TRUE(p.Stop());
}
