// SPDX-License-Identifier: LGPL-2.1-or-later
// Frames in GPU memory (memory:CUDAMemory) through gpufanout and gpufanin,
// and one CUDA context per GPU for the whole pipeline, with GStreamer's own
// CUDA elements (nvcodec's cudaupload and cudadownload). Run as
// test-cuda-memory-fake over the stand-in driver's two GPUs
// (tests/lib/driver on LD_LIBRARY_PATH, where libgstcuda finds it as
// libcuda.so.1); on a machine with a GPU the same cases run on it, and
// elsewhere they skip.
#include <dlfcn.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

bool HaveCudaElements() {
  GstElementFactory *up = gst_element_factory_find("cudaupload");
  GstElementFactory *down = gst_element_factory_find("cudadownload");
  const bool have = up != nullptr && down != nullptr;
  g_clear_object(&up);
  g_clear_object(&down);
  return have;
}

// The stand-in driver's count of contexts GStreamer made for itself
// (cuCtxCreate), or -1 when the driver is a real one. Loads $GPUFAN_LIBCUDA
// itself (the same instance the elements load later), so that the answer
// does not depend on which test ran first.
int CreatedContexts() {
  static void *library = [] {
    const char *path = g_getenv("GPUFAN_LIBCUDA");
    return path ? dlopen(path, RTLD_NOW) : nullptr;  // kept for the process
  }();
  auto created = library ? reinterpret_cast<int (*)()>(dlsym(
                               library, "gpufan_fake_cuda_created_contexts"))
                         : nullptr;
  return created ? created() : -1;
}

// Every frame reaching `element`.`pad`: its PTS and a hash of its bytes
// (mapped for reading: a frame in CUDA memory is copied down to do it).
struct FrameLog {
  std::mutex lock;
  std::vector<std::pair<GstClockTime, uint64_t>> frames;

  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *log = static_cast<FrameLog *>(data);
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    GstMapInfo map;
    uint64_t hash = 1469598103934665603ull;  // FNV-1a
    if (gst_buffer_map(buffer, &map, GST_MAP_READ)) {
      for (gsize i = 0; i < map.size; i++)
        hash = (hash ^ map.data[i]) * 1099511628211ull;
      gst_buffer_unmap(buffer, &map);
    } else {
      hash = 0;
    }
    std::lock_guard<std::mutex> lk(log->lock);
    log->frames.emplace_back(GST_BUFFER_PTS(buffer), hash);
    return GST_PAD_PROBE_OK;
  }
};

// Plays `description` to EOS and returns the frames sink "out" got.
std::vector<std::pair<GstClockTime, uint64_t>> Frames(
    const std::string& description) {
  SCOPED_TRACE(description);
  LaunchedPipeline p(description);
  EXPECT_TRUE(p.ok());
  if (!p.ok())
    return {};
  FrameLog log;
  p.AddProbe("out", "sink", GST_PAD_PROBE_TYPE_BUFFER, FrameLog::Probe, &log);
  EXPECT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  EXPECT_TRUE(p.Stop());
  std::lock_guard<std::mutex> lk(log.lock);
  return log.frames;
}

constexpr int kFrames = 40;
const std::string kSource =
    "videotestsrc num-buffers=" + std::to_string(kFrames) +
    " pattern=ball ! video/x-raw,format=NV12,width=64,height=48 ! ";

// The frames of the pipeline without a fan: what every fanned one must give.
std::vector<std::pair<GstClockTime, uint64_t>> OneLaneFrames() {
  return Frames(kSource +
                "cudaupload ! video/x-raw(memory:CUDAMemory) ! cudadownload ! "
                "video/x-raw ! fakesink name=out");
}

// Whether gpufanout can place lanes on GPUs 0 and 1.
bool TwoGpus() {
  static const bool two = [] {
    LaunchedPipeline p(
        "fakesrc ! gpufanout name=f devices=0,1 f.src_0 ! fakesink "
        "f.src_1 ! fakesink");
    const bool ok = p.ok() && gst_element_set_state(p.get(), GST_STATE_READY) ==
                                  GST_STATE_CHANGE_SUCCESS;
    p.Stop();
    return ok;
  }();
  return two;
}

// On a GPU, or the stand-in driver (test-cuda-memory-fake); skipped
// elsewhere.
class CudaMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveCudaElements())
      GTEST_SKIP() << "no cudaupload/cudadownload (nvcodec found no CUDA "
                      "device; test-cuda-memory-fake runs this over the "
                      "stand-in driver)";
  }
};

// Needs two GPUs (the stand-in has two).
class CudaMemoryTwoGpus : public CudaMemory {
 protected:
  void SetUp() override {
    CudaMemory::SetUp();
    if (!IsSkipped() && !TwoGpus())
      GTEST_SKIP() << "needs two GPUs";
  }
};

// Needs the stand-in driver: what it counts, or its lack of peer access.
class CudaMemoryFake : public CudaMemory {
 protected:
  void SetUp() override {
    CudaMemory::SetUp();
    if (!IsSkipped() && CreatedContexts() < 0)
      GTEST_SKIP() << "needs the stand-in driver (test-cuda-memory-fake)";
  }
};

}  // namespace

// memory:CUDAMemory caps negotiate through both elements: frames uploaded
// upstream stay in CUDA memory through the lanes and out of gpufanin; the
// output is the one-lane pipeline's, frame for frame, in order.
// Two lanes over `devices`, CUDA memory in and out, downloaded.
std::vector<std::pair<GstClockTime, uint64_t>> FannedFrames(
    const char *devices) {
  return Frames(kSource + "cudaupload ! video/x-raw(memory:CUDAMemory) ! " +
                "gpufanout name=f staging=never devices=" + devices +
                " gpufanin name=i ! video/x-raw(memory:CUDAMemory) ! "
                "cudadownload ! video/x-raw ! fakesink name=out "
                "f.src_0 ! queue ! i.sink_0 f.src_1 ! queue ! i.sink_1");
}

TEST_F(CudaMemory, CudaFramesPassBothElementsInOrder) {
  const auto reference = OneLaneFrames();
  ASSERT_EQ(reference.size(), static_cast<size_t>(kFrames));
  EXPECT_EQ(FannedFrames("0,0"), reference);
}

TEST_F(CudaMemoryTwoGpus, CudaFramesPassLanesOnTwoGpusInOrder) {
  EXPECT_EQ(FannedFrames("0,1"), OneLaneFrames());
}

// A lane branch that works on the frames in CUDA memory (down to the host
// and up again on the lane's context) keeps every frame, in order.
TEST_F(CudaMemoryTwoGpus, LanesWorkingOnCudaFramesKeepTheOrder) {
  const auto reference = OneLaneFrames();
  const std::string lane =
      "cudadownload ! video/x-raw ! cudaupload ! "
      "video/x-raw(memory:CUDAMemory)";
  const auto fanned =
      Frames(kSource +
             "cudaupload ! video/x-raw(memory:CUDAMemory) ! gpufanout name=f "
             "staging=never devices=0,1 gpufanin name=i ! cudadownload ! "
             "video/x-raw ! fakesink name=out f.src_0 ! " +
             lane + " ! i.sink_0 f.src_1 ! " + lane + " ! i.sink_1");
  EXPECT_EQ(fanned, reference);
}

// One CUDA context per GPU: an upstream CUDA element asks the fan-out for
// one and gets the lanes' context of its own GPU, even where lane 0 is on
// another GPU or no lane has a CUDA element. Without that answer, it made a
// context of its own (cuCtxCreate), and its frames reached the lanes from
// another context.
TEST_F(CudaMemoryFake, UpstreamSharesTheLanesContextOfItsGpu) {
  for (const std::string lanes :
       {"f.src_0 ! cudadownload ! cudaupload ! i.sink_0 "
        "f.src_1 ! cudadownload ! cudaupload ! i.sink_1",
        "f.src_0 ! queue ! i.sink_0 f.src_1 ! queue ! i.sink_1"}) {
    SCOPED_TRACE(lanes);
    const std::string description =
        kSource +
        "cudaupload cuda-device-id=0 ! video/x-raw(memory:CUDAMemory) ! "
        "gpufanout name=f staging=never devices=1,0 gpufanin name=i ! "
        "cudadownload ! video/x-raw ! fakesink name=out " +
        lanes;
    LaunchedPipeline p(description);
    ASSERT_TRUE(p.ok());
    const int before = CreatedContexts();  // nvcodec's loading made some
    FrameLog log;
    p.AddProbe("out", "sink", GST_PAD_PROBE_TYPE_BUFFER, FrameLog::Probe, &log);
    ASSERT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
    EXPECT_EQ(CreatedContexts() - before, 0)
        << "an element made a CUDA context of its own";
    EXPECT_EQ(log.frames.size(), static_cast<size_t>(kFrames));
    EXPECT_TRUE(p.Stop());
  }
}

namespace {

// The messages of debug category `category` at `level` and above, while
// alive.
class DebugLog {
 public:
  DebugLog(const char *category, GstDebugLevel level) : category_(category) {
    gst_debug_set_threshold_for_name(category, level);
    gst_debug_add_log_function(&DebugLog::Log, this, nullptr);
  }
  ~DebugLog() {
    gst_debug_remove_log_function_by_data(this);
    gst_debug_set_threshold_for_name(category_.c_str(), GST_LEVEL_NONE);
  }
  DebugLog(const DebugLog&) = delete;
  DebugLog& operator=(const DebugLog&) = delete;

  size_t CountWith(const std::string& text) {
    std::lock_guard<std::mutex> lk(lock_);
    size_t n = 0;
    for (const std::string& line : lines_)
      n += line.find(text) != std::string::npos;
    return n;
  }

 private:
  static void Log(GstDebugCategory *category, GstDebugLevel, const gchar *,
                  const gchar *, gint, GObject *, GstDebugMessage *message,
                  gpointer data) {
    auto *self = static_cast<DebugLog *>(data);
    if (self->category_ != gst_debug_category_get_name(category))
      return;
    std::lock_guard<std::mutex> lk(self->lock_);
    self->lines_.emplace_back(gst_debug_message_get(message));
  }

  const std::string category_;
  std::mutex lock_;
  std::vector<std::string> lines_;
};

}  // namespace

// Each GPU lane says in the log whether its frames in CUDA memory are used
// in place: those of its own GPU in the lanes' context are; those of
// another GPU are not, and the log says why.
TEST_F(CudaMemoryTwoGpus, EachLaneSaysWhetherItsFramesAreUsedInPlace) {
  DebugLog log("gpufanout", GST_LEVEL_INFO);
  const auto frames =
      Frames(kSource +
             "cudaupload cuda-device-id=0 ! video/x-raw(memory:CUDAMemory) ! "
             "gpufanout name=f staging=never devices=0,1 gpufanin name=i ! "
             "cudadownload ! video/x-raw ! fakesink name=out "
             "f.src_0 ! queue ! i.sink_0 f.src_1 ! queue ! i.sink_1");
  EXPECT_EQ(frames.size(), static_cast<size_t>(kFrames));
  EXPECT_EQ(log.CountWith("frames in the lanes' CUDA context of GPU 0: used "
                          "in place"),
            1u);
  EXPECT_EQ(log.CountWith("frames not in the lane's CUDA context: they are in "
                          "GPU 0's memory and the lane is on GPU 1"),
            1u);
}

namespace {

guint64 LaneCount(const GstStructure *stats, guint lane, const char *field) {
  const GValue *lanes = gst_structure_get_value(stats, "lanes");
  if (lanes == nullptr || lane >= gst_value_array_get_size(lanes))
    return G_MAXUINT64;
  const GstStructure *l =
      gst_value_get_structure(gst_value_array_get_value(lanes, lane));
  guint64 v = G_MAXUINT64;
  gst_structure_get_uint64(l, field, &v);
  return v;
}

// Plays `description` (fan-out "f") to EOS; its statistics then, and the
// frames sink "out" got.
GstStructure *PlayForStats(
    const std::string& description,
    std::vector<std::pair<GstClockTime, uint64_t>> *got) {
  SCOPED_TRACE(description);
  LaunchedPipeline p(description);
  EXPECT_TRUE(p.ok());
  if (!p.ok())
    return nullptr;
  FrameLog log;
  p.AddProbe("out", "sink", GST_PAD_PROBE_TYPE_BUFFER, FrameLog::Probe, &log);
  EXPECT_TRUE(p.PlayToEos()) << p.bus().ErrorsText();
  GstStructure *stats = nullptr;
  g_object_get(p.element("f"), "stats", &stats, nullptr);
  EXPECT_TRUE(p.Stop());
  std::lock_guard<std::mutex> lk(log.lock);
  *got = log.frames;
  return stats;
}

// NV12 64x48: the bytes of one frame's planes.
constexpr guint64 kFrameBytes = 64 * 48 + 64 * 24;
// The pipelines that count copies exactly keep at most this many frames in
// flight (max-in-flight), fewer than a pool of GPU frames holds
// (GstGpuFanGpuMove::kPoolFrames, 16): no frame then goes uncopied for want
// of a free one, however the threads run.

// Frames uploaded to GPU 0, over lanes on GPUs 0 and 1 (round-robin, at
// most 8 in flight), through gpufanin with `fanin_settings`, downloaded.
std::string TwoGpuLanes(const std::string& fanin_settings) {
  return kSource +
         "cudaupload cuda-device-id=0 ! video/x-raw(memory:CUDAMemory) ! "
         "gpufanout name=f devices=0,1 policy=round-robin max-in-flight=8 "
         "gpufanin name=i " +
         fanin_settings +
         " ! cudadownload ! video/x-raw ! fakesink name=out "
         "f.src_0 ! queue ! i.sink_0 f.src_1 ! queue ! i.sink_1";
}

bool FakePeerAccess() {
  const char *peer = g_getenv("GPUFAN_FAKE_CUDA_PEER");
  return peer != nullptr && g_str_equal(peer, "1");
}

}  // namespace

// A frame of GPU 0 reaching a lane on GPU 1 is copied into the lane's GPU:
// device to device where the GPUs have peer access (test-cuda-memory-peer-
// fake), through the lane's pinned host pool where they have not; a frame of
// the lane's own GPU is used in place. Counted per lane, bytes and all, and
// the output is the one-lane pipeline's, frame for frame.
TEST_F(CudaMemoryTwoGpus, FramesOfAnotherGpuAreCopiedToTheLanesGpu) {
  const auto reference = OneLaneFrames();
  std::vector<std::pair<GstClockTime, uint64_t>> got;
  GstStructure *stats = PlayForStats(TwoGpuLanes(""), &got);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(got, reference);
  // each lane's share depends on when lane 1 joined: count what each got
  const guint64 on_0 = LaneCount(stats, 0, "dispatched");
  const guint64 on_1 = LaneCount(stats, 1, "dispatched");
  ASSERT_EQ(on_0 + on_1, static_cast<guint64>(kFrames));
  ASSERT_GT(on_1, 0u) << "lane 1 got nothing: the test proves nothing";
  EXPECT_EQ(LaneCount(stats, 0, "gpu-in-place"), on_0);
  EXPECT_EQ(LaneCount(stats, 0, "gpu-copy-bytes"), 0u);
  EXPECT_EQ(LaneCount(stats, 1, "gpu-copies-peer") +
                LaneCount(stats, 1, "gpu-copies-via-host"),
            on_1);
  if (CreatedContexts() >= 0) {  // the stand-in: peer access as it was told
    const bool peer = FakePeerAccess();
    EXPECT_EQ(LaneCount(stats, 1, "gpu-copies-peer"), peer ? on_1 : 0u);
  }
  EXPECT_EQ(LaneCount(stats, 1, "gpu-copies-skipped"), 0u);
  EXPECT_EQ(LaneCount(stats, 1, "gpu-copy-bytes"), on_1 * kFrameBytes);
  EXPECT_EQ(LaneCount(stats, 1, "gpu-in-place"), 0u);
  gst_structure_free(stats);
}

// With no pinned host pool (host-pool-size=0) and no peer access there is
// no way to copy: the frames go to the lane as they are, counted as
// skipped, and the output is still complete and right.
TEST_F(CudaMemoryFake, AFrameThatCannotBeCopiedGoesAsItIs) {
  if (FakePeerAccess())
    GTEST_SKIP() << "needs GPUs without peer access";
  const auto reference = OneLaneFrames();
  std::vector<std::pair<GstClockTime, uint64_t>> got;
  GstStructure *stats = PlayForStats(
      kSource +
          "cudaupload cuda-device-id=0 ! video/x-raw(memory:CUDAMemory) ! "
          "gpufanout name=f devices=1 host-pool-size=0 gpufanin name=i ! "
          "cudadownload ! video/x-raw ! fakesink name=out "
          "f.src_0 ! queue ! i.sink_0",
      &got);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(got, reference);
  EXPECT_EQ(LaneCount(stats, 0, "gpu-copies-skipped"),
            static_cast<guint64>(kFrames));
  EXPECT_EQ(LaneCount(stats, 0, "gpu-copies-via-host"), 0u);
  gst_structure_free(stats);
}

namespace {

guint64 Count(const GstStructure *stats, const char *field) {
  guint64 v = G_MAXUINT64;
  gst_structure_get_uint64(stats, field, &v);
  return v;
}

}  // namespace

// gpufanin output-device=0: the frames lane 1 delivers on GPU 1 are copied
// back to GPU 0, lane 0's leave as they are; downstream gets every frame
// right, in order. Without it (-1, the default) the output copies nothing.
TEST_F(CudaMemoryTwoGpus, OutputDeviceCopiesFramesOfOtherGpusToIt) {
  const auto reference = OneLaneFrames();
  for (const int output : {0, -1}) {
    SCOPED_TRACE(output);
    std::vector<std::pair<GstClockTime, uint64_t>> got;
    GstStructure *stats = PlayForStats(
        TwoGpuLanes("output-device=" + std::to_string(output)), &got);
    ASSERT_NE(stats, nullptr);
    EXPECT_EQ(got, reference);
    // lane 1's frames are on GPU 1 (copied there), lane 0's on GPU 0
    const guint64 on_0 = LaneCount(stats, 0, "dispatched");
    const guint64 on_1 = LaneCount(stats, 1, "dispatched");
    ASSERT_GT(on_1, 0u) << "lane 1 got nothing: the test proves nothing";
    ASSERT_EQ(LaneCount(stats, 1, "gpu-copies-skipped"), 0u);
    const guint64 copied = Count(stats, "output-gpu-copies-peer") +
                           Count(stats, "output-gpu-copies-via-host");
    EXPECT_EQ(copied, output == 0 ? on_1 : 0u);
    EXPECT_EQ(Count(stats, "output-gpu-in-place"), output == 0 ? on_0 : 0u);
    EXPECT_EQ(Count(stats, "output-gpu-copy-bytes"),
              output == 0 ? on_1 * kFrameBytes : 0u);
    EXPECT_EQ(Count(stats, "output-gpu-copies-skipped"), 0u);
    gst_structure_free(stats);
  }
}

// Lanes whose branches end in different memory (one in CUDA memory, one
// downloaded to system memory) are refused with a message that says so.
TEST_F(CudaMemory, LanesEndingInDifferentMemoryAreAClearError) {
  LaunchedPipeline p(kSource +
                     "cudaupload ! video/x-raw(memory:CUDAMemory) ! "
                     "gpufanout name=f devices=0,0 policy=round-robin "
                     "gpufanin name=i ! fakesink name=out "
                     "f.src_0 ! queue ! i.sink_0 "
                     "f.src_1 ! cudadownload ! video/x-raw ! i.sink_1");
  ASSERT_TRUE(p.ok());
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *err = p.bus().WaitForType(GST_MESSAGE_ERROR);
  ASSERT_NE(err, nullptr);
  const std::string text = BusLog::ErrorText(err);
  EXPECT_NE(text.find("The lanes deliver frames in different memory"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("memory:CUDAMemory"), std::string::npos) << text;
  EXPECT_NE(text.find("system memory"), std::string::npos) << text;
  EXPECT_TRUE(p.Stop());
}
