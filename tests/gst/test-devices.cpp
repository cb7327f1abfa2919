// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanout's devices: the devices property and placement hints, their
// errors, the per-lane device fields in the statistics, the worker threads
// bound to a device's CPUs, and CUDA context queries. Tests that need a GPU
// (and GStreamer's nvcodec elements) skip with the reason when none opens.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

constexpr const char *kCaps =
    "video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1";

// The fan-in of every pipeline here, named m: with the default stall-timeout
// (2 s) a frame that a loaded machine delays that long would be missing.
const std::string kFanin =
    "gpufanin name=m stall-timeout=" + std::to_string(kNoStallTimeout);

// videotestsrc ! gpufanout <fanout_props> ! lanes of identity ! gpufanin.
std::string Pipeline(const std::string& fanout_props, int lanes,
                     int buffers = 40) {
  std::string d = "videotestsrc num-buffers=" + std::to_string(buffers) +
                  " ! " + kCaps + " ! gpufanout name=f " + fanout_props + "  " +
                  kFanin + " ! fakesink name=out";
  for (int i = 0; i < lanes; i++)
    d += "  f.src_" + std::to_string(i) + " ! identity name=b" +
         std::to_string(i) + " ! m.sink_" + std::to_string(i);
  return d;
}

bool IsFrom(GstMessage *msg, GstElement *element) {
  return GST_MESSAGE_SRC(msg) == GST_OBJECT(element);
}

size_t CountFrom(LaunchedPipeline& p, GstMessageType type,
                 GstElement *element) {
  return p.bus().Count([type, element](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == type && IsFrom(m, element);
  });
}

// Plays to EOS and returns the fan-out's stats property.
GstStructure *RunAndGetFanoutStats(LaunchedPipeline& p) {
  p.PlayToEos();  // records a failure when it does not get there
  GstStructure *stats = nullptr;
  g_object_get(p.element("f"), "stats", &stats, nullptr);
  return stats;
}

std::string LaneString(const GstStructure *stats, guint lane,
                       const char *field) {
  const GstStructure *l = StatsLane(stats, lane);
  const gchar *v = l ? gst_structure_get_string(l, field) : nullptr;
  return v ? v : "";
}

// Fails the state change to READY and returns the ERROR text.
std::string ReadyError(LaunchedPipeline& p) {
  EXPECT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_FAILURE);
  GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
  EXPECT_NE(err, nullptr) << "no ERROR message";
  return err ? BusLog::ErrorText(err) : "";
}

bool MachineHasGpuLanes() {
  LaunchedPipeline p(Pipeline("", 1, 1));
  GstStructure *stats = RunAndGetFanoutStats(p);
  const bool gpu = stats && LaneString(stats, 0, "device-kind") == "cuda";
  if (stats)
    gst_structure_free(stats);
  return gpu;
}

TEST(Devices, PropertiesHaveTheirDefaults) {
  LaunchedPipeline p(Pipeline("", 1));
  ASSERT_TRUE(p.ok());
  GstElement *f = p.element("f");
  gchar *devices = nullptr, *cc = nullptr;
  guint64 min_free = 1;
  guint codecs = 1;
  g_object_get(f, "devices", &devices, "min-free-memory", &min_free,
               "min-compute-capability", &cc, "require-codecs", &codecs,
               nullptr);
  EXPECT_STREQ(devices, "auto");
  EXPECT_STREQ(cc, "");
  EXPECT_EQ(min_free, 0u);
  EXPECT_EQ(codecs, 0u);
  g_free(devices);
  g_free(cc);

  GstPad *pad = gst_element_get_static_pad(f, "src_0");
  ASSERT_NE(pad, nullptr);
  gint device = 0;
  g_object_get(pad, "device", &device, nullptr);
  EXPECT_EQ(device, -1);
  g_object_set(pad, "device", 3, nullptr);
  g_object_get(pad, "device", &device, nullptr);
  EXPECT_EQ(device, 3);
  gst_object_unref(pad);
}

TEST(Devices, CpuLanesReportTheirDeviceInTheStatistics) {
  LaunchedPipeline p(Pipeline("devices=cpu", 2));
  ASSERT_TRUE(p.ok());
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  for (guint i = 0; i < 2; i++) {
    const GstStructure *lane = StatsLane(stats, i);
    ASSERT_NE(lane, nullptr);
    EXPECT_EQ(LaneString(stats, i, "device-kind"), "cpu");
    EXPECT_EQ(LaneString(stats, i, "device").rfind("cpu:", 0), 0u)
        << LaneString(stats, i, "device");
    gint numa = -2;
    EXPECT_TRUE(gst_structure_get_int(lane, "numa-node", &numa));
    EXPECT_GE(numa, -1);
    EXPECT_TRUE(gst_structure_has_field(lane, "local-cpus"));
    EXPECT_FALSE(LaneString(stats, i, "worker-thread").empty());
    EXPECT_FALSE(gst_structure_has_field(lane, "pci-bus-id"))
        << "a CPU lane has no PCI bus id";
  }
  gst_structure_free(stats);
  // devices=cpu asks for CPU lanes: nothing to warn about.
  EXPECT_EQ(CountFrom(p, GST_MESSAGE_WARNING, p.element("f")), 0u)
      << p.bus().ErrorsText();
}

TEST(Devices, AutoWithoutGpuWarnsOnceAndRunsCpuLanes) {
  if (MachineHasGpuLanes())
    GTEST_SKIP() << "this machine has a GPU";
  LaunchedPipeline p(Pipeline("", 2));
  ASSERT_TRUE(p.ok());
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(LaneString(stats, 0, "device-kind"), "cpu");
  EXPECT_EQ(LaneString(stats, 1, "device-kind"), "cpu");
  gst_structure_free(stats);
  EXPECT_EQ(CountFrom(p, GST_MESSAGE_WARNING, p.element("f")), 1u)
      << p.bus().ErrorsText();
  EXPECT_NE(p.bus().ErrorsText().find("No GPU: running CPU lanes"),
            std::string::npos)
      << p.bus().ErrorsText();
}

TEST(Devices, GpuHintsWithoutAnyGpuStillRunCpuLanes) {
  if (MachineHasGpuLanes())
    GTEST_SKIP() << "this machine has a GPU";
  LaunchedPipeline p(
      Pipeline("min-compute-capability=8.0 require-codecs=nvenc", 1));
  ASSERT_TRUE(p.ok());
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(LaneString(stats, 0, "device-kind"), "cpu");
  gst_structure_free(stats);
}

// Settings that leave a lane without a device: the start fails with an
// error that says what to change.
struct BadSetting {
  const char *name;
  const char *fanout_props;
  int lanes;
  std::vector<const char *> expected;  // substrings of the error
};

class DevicesBadSetting : public ::testing::TestWithParam<BadSetting> {};

TEST_P(DevicesBadSetting, FailsTheStartWithAClearError) {
  const BadSetting& bad = GetParam();
  LaunchedPipeline p(Pipeline(bad.fanout_props, bad.lanes));
  ASSERT_TRUE(p.ok());
  const std::string error = ReadyError(p);
  for (const char *expected : bad.expected)
    EXPECT_NE(error.find(expected), std::string::npos)
        << "no '" << expected << "' in: " << error;
}

INSTANTIATE_TEST_SUITE_P(
    Devices, DevicesBadSetting,
    ::testing::Values(BadSetting{"DevicesTextThatDoesNotParse",
                                 "devices=gpu0",
                                 1,
                                 {"Invalid devices", "gpu0"}},
                      BadSetting{"ComputeCapabilityThatDoesNotParse",
                                 "min-compute-capability=eight",
                                 1,
                                 {"min-compute-capability 'eight'"}},
                      BadSetting{
                          "AMissingGpu", "devices=0,63", 2, {"GPU", "GPU(s)"}},
                      BadSetting{"MoreLanesThanCpuN",
                                 "devices=cpu:1",
                                 2,
                                 {"No device for lane 1", "src_1"}},
                      // Whatever the machine: no GPU has compute capability 99.
                      BadSetting{"ANamedGpuFailingAHint",
                                 "devices=0 min-compute-capability=99.0",
                                 1,
                                 {"GPU 0"}}),
    [](const ::testing::TestParamInfo<BadSetting>& info) {
      return std::string(info.param.name);
    });

TEST(Devices, AGoodValueReplacesABadOne) {
  LaunchedPipeline p(Pipeline("devices=bogus", 1));
  ASSERT_TRUE(p.ok());
  g_object_set(p.element("f"), "devices", "cpu", nullptr);
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  gst_structure_free(stats);
}

TEST(Devices, ThePadDevicePropertyOverridesTheElement) {
  LaunchedPipeline p(Pipeline("devices=cpu", 2));
  ASSERT_TRUE(p.ok());
  GstPad *pad = gst_element_get_static_pad(p.element("f"), "src_1");
  ASSERT_NE(pad, nullptr);
  g_object_set(pad, "device", 63, nullptr);
  gst_object_unref(pad);
  const std::string error = ReadyError(p);
  EXPECT_NE(error.find("src_1's device property names GPU 63"),
            std::string::npos)
      << error;
}

// What a lane's streaming thread looked like from inside.
struct ThreadSeen {
  std::mutex mutex;
  std::set<std::string> names;
  std::set<std::string> affinities;

  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *, gpointer data) {
    auto *self = static_cast<ThreadSeen *>(data);
    char name[32] = {0};
    pthread_getname_np(pthread_self(), name, sizeof name);
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string cpus;
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
          cpus += std::to_string(c) + " ";
    }
    std::lock_guard<std::mutex> lk(self->mutex);
    self->names.insert(name);
    self->affinities.insert(cpus);
    return GST_PAD_PROBE_OK;
  }
};

// "0-2,5" -> "0 1 2 5 "
std::string ExpandCpuList(const std::string& list) {
  std::string out;
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos)
      comma = list.size();
    const std::string item = list.substr(start, comma - start);
    const size_t dash = item.find('-');
    const int lo = std::stoi(item.substr(0, dash));
    const int hi =
        dash == std::string::npos ? lo : std::stoi(item.substr(dash + 1));
    for (int c = lo; c <= hi; c++)
      out += std::to_string(c) + " ";
    start = comma + 1;
  }
  return out;
}

// Restricts the calling thread to CPU 0 for its lifetime.
class PinnedToCpu0 {
 public:
  PinnedToCpu0() {
    pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    ok_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  }
  ~PinnedToCpu0() {
    pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
  }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

TEST(Devices, LaneThreadsRunOnTheirDevicesCpus) {
  LaunchedPipeline p(Pipeline("devices=cpu", 2, 60));
  ASSERT_TRUE(p.ok());
  ThreadSeen seen;
  p.AddProbe("b0", "sink", GST_PAD_PROBE_TYPE_BUFFER, ThreadSeen::Probe, &seen);
  GstStructure *stats = nullptr;
  {
    // The lane's thread starts from this thread: unbound, it would inherit
    // CPU 0 alone; bound, it runs on all of its device's CPUs.
    PinnedToCpu0 pinned;
    ASSERT_TRUE(pinned.ok());
    stats = RunAndGetFanoutStats(p);
  }
  ASSERT_NE(stats, nullptr);
  const std::string local = LaneString(stats, 0, "local-cpus");
  const std::string worker = LaneString(stats, 0, "worker-thread");
  gst_structure_free(stats);

  std::lock_guard<std::mutex> lk(seen.mutex);
  ASSERT_EQ(seen.names.size(), 1u) << "lane 0 ran on several threads";
  if (local.empty()) {
    // No topology (e.g. a build without hwloc): GStreamer's own threads.
    EXPECT_EQ(worker, "default task pool (device CPUs unknown)");
    GTEST_SKIP() << "the device's CPUs are unknown here: threads unbound";
  }
  if (local == "0")
    GTEST_SKIP() << "one CPU: bound and unbound threads look alike";
  EXPECT_EQ(worker, "bound to CPUs " + local);
  ASSERT_EQ(seen.affinities.size(), 1u);
  EXPECT_EQ(*seen.affinities.begin(), ExpandCpuList(local));
}

// Counts the buffers passing a pad whose memory is the fan-out's host pool
// memory, and checks their bytes survive the trip.
struct MemorySeen {
  std::atomic<int> pool{0};
  std::atomic<int> other{0};

  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *self = static_cast<MemorySeen *>(data);
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    bool ours = gst_buffer_n_memory(buffer) > 0;
    for (guint i = 0; i < gst_buffer_n_memory(buffer); i++)
      ours &= gst_memory_is_type(gst_buffer_peek_memory(buffer, i),
                                 "GpuFanHostMemory");
    (ours ? self->pool : self->other)++;
    return GST_PAD_PROBE_OK;
  }
};

guint64 LaneU64(const GstStructure *stats, guint lane, const char *field) {
  guint64 v = 0;
  const GstStructure *l = StatsLane(stats, lane);
  if (!l || !gst_structure_get_uint64(l, field, &v))
    ADD_FAILURE() << "lane " << lane << " has no " << field;
  return v;
}

// CPU lanes want their frames in their node's pool only with
// staging=always (GPU lanes always do): then the fan-out proposes it.
TEST(DevicesMemory, UpstreamWritesIntoTheProposedPool) {
  constexpr int kBuffers = 60;
  LaunchedPipeline p(Pipeline("devices=cpu staging=always", 2, kBuffers));
  ASSERT_TRUE(p.ok());
  MemorySeen seen;
  p.AddProbe("f", "sink", GST_PAD_PROBE_TYPE_BUFFER, MemorySeen::Probe, &seen);
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(seen.pool.load(), kBuffers)
      << "videotestsrc did not use the pool the fan-out proposed";
  EXPECT_EQ(seen.other.load(), 0);
  // The pool made a few blocks and reused them; nothing was staged.
  const guint64 allocated = LaneU64(stats, 0, "pool-blocks-allocated");
  EXPECT_GT(allocated, 0u);
  EXPECT_LT(allocated, static_cast<guint64>(kBuffers));
  EXPECT_EQ(LaneU64(stats, 0, "copies") + LaneU64(stats, 1, "copies"), 0u);
  gst_structure_free(stats);
}

TEST(DevicesMemory, CpuLanesLeaveAllocationToUpstreamByDefault) {
  LaunchedPipeline p(Pipeline("devices=cpu", 2, 30));
  ASSERT_TRUE(p.ok());
  MemorySeen seen;
  p.AddProbe("f", "sink", GST_PAD_PROBE_TYPE_BUFFER, MemorySeen::Probe, &seen);
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(seen.pool.load(), 0);
  EXPECT_EQ(seen.other.load(), 30);
  EXPECT_EQ(LaneU64(stats, 0, "copies") + LaneU64(stats, 1, "copies"), 0u);
  gst_structure_free(stats);
}

TEST(DevicesMemory, NoPoolWhenTheHostPoolIsOff) {
  LaunchedPipeline p(
      Pipeline("devices=cpu staging=always host-pool-size=0", 2, 30));
  ASSERT_TRUE(p.ok());
  MemorySeen seen;
  p.AddProbe("f", "sink", GST_PAD_PROBE_TYPE_BUFFER, MemorySeen::Probe, &seen);
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(seen.pool.load(), 0);
  EXPECT_EQ(seen.other.load(), 30);
  EXPECT_FALSE(gst_structure_has_field(StatsLane(stats, 0), "pool-node"));
  gst_structure_free(stats);
}

TEST(DevicesMemory, StagingAlwaysCopiesForeignFramesIntoThePool) {
  constexpr int kBuffers = 50;
  // identity drop-allocation: upstream never sees the proposed pool, so its
  // frames arrive in ordinary memory and every lane must stage them.
  std::string d = std::string("videotestsrc num-buffers=") +
                  std::to_string(kBuffers) + " pattern=ball ! " + kCaps +
                  " ! identity drop-allocation=true ! tee name=t "
                  "t. ! queue ! gpufanout name=f devices=cpu staging=always " +
                  kFanin +
                  " ! fakesink name=out "
                  "f.src_0 ! identity name=b0 ! m.sink_0 "
                  "f.src_1 ! identity name=b1 ! m.sink_1 "
                  "t. ! queue ! fakesink name=reference";
  LaunchedPipeline p(d);
  ASSERT_TRUE(p.ok());
  MemorySeen in_lane0, in_lane1;
  p.AddProbe("b0", "sink", GST_PAD_PROBE_TYPE_BUFFER, MemorySeen::Probe,
             &in_lane0);
  p.AddProbe("b1", "sink", GST_PAD_PROBE_TYPE_BUFFER, MemorySeen::Probe,
             &in_lane1);
  RecordLog& out = p.Record("out", "sink");
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(in_lane0.other.load() + in_lane1.other.load(), 0)
      << "a lane's branch got a frame outside the pool";
  EXPECT_EQ(in_lane0.pool.load() + in_lane1.pool.load(), kBuffers);
  EXPECT_EQ(LaneU64(stats, 0, "copies") + LaneU64(stats, 1, "copies"),
            static_cast<guint64>(kBuffers));
  EXPECT_EQ(out.Buffers(), static_cast<size_t>(kBuffers));
  EXPECT_TRUE(IsStrictlyIncreasing(out.BufferPtsIndices()));
  gst_structure_free(stats);
}

TEST(DevicesMemory, StagedFramesKeepTheirBytesAndTimestamps) {
  FanRigOptions options;
  options.lanes = 2;
  FanRig rig(options);
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "devices", "cpu", "staging", 1 /* always */,
               nullptr);
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 40));
  ASSERT_TRUE(rig.out().log().WaitBuffers(40));
  EXPECT_TRUE(IsSequence(rig.out().log().BufferIndices(), 0, 40))
      << "staged copies lost their bytes";
  EXPECT_TRUE(IsSequence(rig.out().log().BufferPtsIndices(), 0, 40))
      << "staged copies lost their timestamps";
  GstStructure *stats = nullptr;
  g_object_get(rig.fanout(), "stats", &stats, nullptr);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(LaneU64(stats, 0, "copies") + LaneU64(stats, 1, "copies"), 40u);
  gst_structure_free(stats);
}

// The fan-out's lane fields live in the session it shares with its fan-in:
// the fan-in's statistics show the same.
TEST(DevicesMemory, TheFaninShowsTheFanoutsLaneFields) {
  LaunchedPipeline p(Pipeline("devices=cpu staging=always", 2, 30));
  ASSERT_TRUE(p.ok());
  GstStructure *out_stats = RunAndGetFanoutStats(p);
  GstStructure *in_stats = nullptr;
  g_object_get(p.element("m"), "stats", &in_stats, nullptr);
  ASSERT_NE(out_stats, nullptr);
  ASSERT_NE(in_stats, nullptr);
  EXPECT_GT(LaneU64(in_stats, 0, "pool-blocks-allocated"), 0u);
  for (guint i = 0; i < 2; i++) {
    EXPECT_FALSE(LaneString(in_stats, i, "worker-thread").empty());
    EXPECT_EQ(LaneString(in_stats, i, "worker-thread"),
              LaneString(out_stats, i, "worker-thread"));
    for (const char *field :
         {"copies", "copies-skipped", "pool-blocks-allocated",
          "pool-blocks-reused", "pool-bytes-reserved", "pool-fallbacks"}) {
      EXPECT_TRUE(gst_structure_has_field(StatsLane(in_stats, i), field))
          << field;
      EXPECT_EQ(LaneU64(in_stats, i, field), LaneU64(out_stats, i, field))
          << field;
    }
    gint in_node = -2, out_node = -3;
    EXPECT_TRUE(
        gst_structure_get_int(StatsLane(in_stats, i), "pool-node", &in_node));
    gst_structure_get_int(StatsLane(out_stats, i), "pool-node", &out_node);
    EXPECT_EQ(in_node, out_node);
    EXPECT_TRUE(gst_structure_has_field(StatsLane(in_stats, i), "pool-pinned"));
  }
  gst_structure_free(out_stats);
  gst_structure_free(in_stats);
}

TEST(Devices, ACudaContextQueryOnACpuLaneGetsNoCudaContext) {
  LaunchedPipeline p(Pipeline("devices=cpu", 1));
  ASSERT_TRUE(p.ok());
  GstPad *pad = gst_element_get_static_pad(p.element("f"), "src_0");
  ASSERT_NE(pad, nullptr);
  GstQuery *query = gst_query_new_context("gst.cuda.context");
  EXPECT_FALSE(gst_pad_query(pad, query))
      << "nothing upstream has a CUDA context to give";
  GstContext *context = nullptr;
  gst_query_parse_context(query, &context);
  EXPECT_EQ(context, nullptr);
  gst_query_unref(query);
  gst_object_unref(pad);
}

// The CUDA device id of the GstCudaContext an nvcodec element holds, or -1.
int CudaDeviceOf(GstElement *element) {
  GstQuery *query = gst_query_new_context("gst.cuda.context");
  int device = -1;
  if (gst_element_query(element, query)) {
    GstContext *context = nullptr;
    gst_query_parse_context(query, &context);
    const GstStructure *s =
        context ? gst_context_get_structure(context) : nullptr;
    const GType type = g_type_from_name("GstCudaContext");
    GObject *cuda = nullptr;
    if (s && type &&
        gst_structure_get(s, "gst.cuda.context", type, &cuda, nullptr)) {
      guint id = 0;
      g_object_get(cuda, "cuda-device-id", &id, nullptr);
      device = static_cast<int>(id);
      g_object_unref(cuda);
    }
  }
  gst_query_unref(query);
  return device;
}

// The promise: stock CUDA elements in branch d run on lane d's GPU,
// with no cuda-device-id set anywhere.
TEST(DevicesGpu, NvcodecBranchesRunOnTheirLanesGpu) {
  GstElementFactory *upload = gst_element_factory_find("cudaupload");
  if (!upload)
    GTEST_SKIP() << "no cudaupload element (nvcodec found no CUDA device, or "
                    "gstreamer1.0-plugins-bad lacks nvcodec)";
  gst_object_unref(upload);
  if (!MachineHasGpuLanes())
    GTEST_SKIP() << "no CUDA device opens here";

  // Four lanes: with one GPU all on it, with more spread round-robin.
  constexpr int kLanes = 4;
  std::string d = std::string("videotestsrc num-buffers=40 ! ") +
                  "video/x-raw,format=NV12,width=64,height=64 ! "
                  "gpufanout name=f " +
                  kFanin + " ! fakesink name=out";
  for (int i = 0; i < kLanes; i++) {
    const std::string n = std::to_string(i);
    d += "  f.src_" + n + " ! cudaupload name=u" + n + " ! cudascale ! " +
         "cudadownload ! video/x-raw,format=NV12,width=32,height=32 ! m.sink_" +
         n;
  }
  LaunchedPipeline p(d);
  ASSERT_TRUE(p.ok());
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  for (int i = 0; i < kLanes; i++) {
    const GstStructure *lane = StatsLane(stats, i);
    ASSERT_NE(lane, nullptr);
    gint expected = -1;
    gst_structure_get_int(lane, "device-index", &expected);
    EXPECT_EQ(LaneString(stats, i, "device-kind"), "cuda");
    EXPECT_FALSE(LaneString(stats, i, "pci-bus-id").empty());
    EXPECT_EQ(CudaDeviceOf(p.element(("u" + std::to_string(i)).c_str())),
              expected)
        << "branch " << i << " is not on its lane's GPU";
  }
  gst_structure_free(stats);
}

}  // namespace

namespace {

// ----------------------------------------------- regressions from review ---

// Reads the fan-out's statistics from the streaming-status sync message,
// the way an application that watches its threads might.
void ReadStatsOnStreamStatus(GstBus *, GstMessage *msg, gpointer fanout) {
  if (GST_MESSAGE_TYPE(msg) != GST_MESSAGE_STREAM_STATUS)
    return;
  GstStructure *stats = nullptr;
  g_object_get(G_OBJECT(fanout), "stats", &stats, nullptr);
  if (stats)
    gst_structure_free(stats);
}

TEST(DevicesRegression, StatsFromASyncHandlerWhileLanesStartDoNotDeadlock) {
  LaunchedPipeline p(Pipeline("devices=cpu staging=always", 2, 30));
  ASSERT_TRUE(p.ok());
  GstBus *bus = gst_element_get_bus(p.get());
  gst_bus_enable_sync_message_emission(bus);
  const gulong id =
      g_signal_connect(bus, "sync-message::stream-status",
                       G_CALLBACK(ReadStatsOnStreamStatus), p.element("f"));
  GstStructure *stats = RunAndGetFanoutStats(p);  // bounded waits inside
  EXPECT_NE(stats, nullptr);
  if (stats)
    gst_structure_free(stats);
  EXPECT_TRUE(p.Stop());
  g_signal_handler_disconnect(bus, id);
  gst_bus_disable_sync_message_emission(bus);
  gst_object_unref(bus);
}

TEST(DevicesRegression, ALaneRequestedWhilePlayingGetsItsBoundThread) {
  FanoutRig rig(1);
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "devices", "cpu", nullptr);
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 4));
  rig.AddLane();
  ASSERT_TRUE(PushRange(rig.source(), 4, 20));
  ASSERT_TRUE(rig.lane(1).log().WaitBuffers(1)) << "the new lane got nothing";
  GstStructure *stats = nullptr;
  g_object_get(rig.fanout(), "stats", &stats, nullptr);
  ASSERT_NE(stats, nullptr);
  const std::string local = LaneString(stats, 1, "local-cpus");
  const std::string worker = LaneString(stats, 1, "worker-thread");
  gst_structure_free(stats);
  if (local.empty())
    GTEST_SKIP() << "the device's CPUs are unknown here";
  EXPECT_EQ(worker, "bound to CPUs " + local);
}

TEST(DevicesRegression, SettingsChangedInReadyTakeEffect) {
  LaunchedPipeline p(Pipeline("devices=cpu", 2));
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS);
  g_object_set(p.element("f"), "devices", "cpu:1", nullptr);
  EXPECT_EQ(gst_element_set_state(p.get(), GST_STATE_PAUSED),
            GST_STATE_CHANGE_FAILURE);
  GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(BusLog::ErrorText(err).find("src_1"), std::string::npos)
      << BusLog::ErrorText(err);
}

TEST(DevicesRegression, AGoodValueDoesNotHideAnotherPropertysBadOne) {
  LaunchedPipeline p(Pipeline("devices=bogus min-compute-capability=8.0", 1));
  ASSERT_TRUE(p.ok());
  const std::string error = ReadyError(p);
  EXPECT_NE(error.find("bogus"), std::string::npos) << error;
}

TEST(DevicesRegression, AFullHostPoolFallsBackToOrdinaryMemory) {
  // 1 MiB holds three 320x240 RGBA frames: the rest must still flow.
  constexpr int kBuffers = 40;
  LaunchedPipeline p(
      "videotestsrc num-buffers=40 ! "
      "video/x-raw,format=RGBA,width=320,height=240,framerate=1000/1 ! "
      "gpufanout name=f devices=cpu staging=always host-pool-size=1 " +
      kFanin +
      " ! fakesink name=out "
      "f.src_0 ! identity name=b0 ! m.sink_0 "
      "f.src_1 ! identity name=b1 ! m.sink_1");
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(out.Buffers(), static_cast<size_t>(kBuffers));
  EXPECT_GT(LaneU64(stats, 0, "pool-fallbacks"), 0u)
      << "the pool never ran full: the test proves nothing";
  gst_structure_free(stats);
}

TEST(DevicesRegression, PageAlignedAllocationsKeepTheirBookkeeping) {
  LaunchedPipeline p(Pipeline("devices=cpu staging=always", 1));
  ASSERT_TRUE(p.ok());
  GstStructure *stats = RunAndGetFanoutStats(p);
  ASSERT_NE(stats, nullptr);
  gint node = -1;
  gst_structure_get_int(StatsLane(stats, 0), "pool-node", &node);
  gst_structure_free(stats);
  const std::string name = node >= 0
                               ? "GpuFanHostMemory-node" + std::to_string(node)
                               : std::string("GpuFanHostMemory-node-unknown");
  GstAllocator *allocator = gst_allocator_find(name.c_str());
  ASSERT_NE(allocator, nullptr) << name;
  for (gsize align : {gsize(63), gsize(4095), gsize(8191)}) {
    GstAllocationParams params;
    gst_allocation_params_init(&params);
    params.align = align;
    params.prefix = 16;
    GstMemory *mem = gst_allocator_alloc(allocator, 100, &params);
    ASSERT_NE(mem, nullptr);
    EXPECT_GE(mem->maxsize, mem->offset + mem->size) << "align " << align;
    GstMapInfo map;
    ASSERT_TRUE(gst_memory_map(mem, &map, GST_MAP_WRITE));
    // As with the system allocator: the region (before the prefix) is
    // aligned.
    EXPECT_EQ(reinterpret_cast<guintptr>(map.data - mem->offset) & align, 0u)
        << "align " << align;
    EXPECT_EQ(map.size, 100u);
    memset(map.data, 0xab, map.size);
    gst_memory_unmap(mem, &map);
    gst_memory_unref(mem);
  }
  gst_object_unref(allocator);
}

}  // namespace
