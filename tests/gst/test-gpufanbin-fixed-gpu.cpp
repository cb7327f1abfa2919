// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanbin and gpufanout lanes on GPUs: elements fixed to one GPU
// (nvcodec's per-GPU registration) swapped for their lane's GPU, hand-written
// lanes bound to their GPU (issue 11), and a GPU that showed a sticky error
// not used again. They run over the stand-in driver's two GPUs
// (test-gpufanbin-fake-gpus) and skip elsewhere.
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
#include "gpufanbin-util.h"
#include "gst-test-util.h"

using namespace gpufan_test;

// ------------------------------------- elements fixed to one GPU (nvcodec) ---

namespace {

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
