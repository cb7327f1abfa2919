// SPDX-License-Identifier: LGPL-2.1-or-later
// Chunk mode (gpufanout chunk=frames|keyframes): runs of buffers go whole to
// one lane, each lane is drained at a chunk's end (an EOS that gpufanin hides,
// then a flush), and gpufanin outputs the chunks' buffers, whatever their
// number, chunk after chunk. With stock elements: identity and queue (sync
// and async lanes), x264enc (N in, N out, reordered, with lookahead), and
// hostile lanes (one that drops everything, one that blocks, one that
// swallows EOS). Assertions are on order, counts, keyframes and events, never
// on timings.
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

constexpr const char *kCaps = "video/x-raw,format=GRAY8,width=64,height=64";
constexpr const char *kHour = "3600000000000";

// What a lane's branch is given, counted at its first element's sink pad.
struct LaneInput {
  std::atomic<int> discont{0};     // buffers flagged DISCONT
  std::atomic<int> force_key{0};   // force-key-unit events
  std::atomic<int> eos{0};         // EOS (the drains and the stream's end)
  std::atomic<int> flush_stop{0};  // FLUSH_STOP (the resets after drains)
  std::atomic<int> segments{0};

  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<LaneInput *>(user_data);
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
      if (GST_BUFFER_FLAG_IS_SET(GST_PAD_PROBE_INFO_BUFFER(info),
                                 GST_BUFFER_FLAG_DISCONT))
        self->discont++;
      return GST_PAD_PROBE_OK;
    }
    GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
    if (gst_video_event_is_force_key_unit(event))
      self->force_key++;
    else if (GST_EVENT_TYPE(event) == GST_EVENT_EOS)
      self->eos++;
    else if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP)
      self->flush_stop++;
    else if (GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT)
      self->segments++;
    return GST_PAD_PROBE_OK;
  }
  void Watch(LaunchedPipeline& p, const char *element) {
    p.AddProbe(
        element, "sink",
        static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                     GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                     GST_PAD_PROBE_TYPE_EVENT_FLUSH),
        &LaneInput::Probe, this);
  }
};

// Groups a lane's (sorted) indices into its runs of consecutive ones.
std::vector<std::pair<int64_t, int64_t>> Runs(std::vector<int64_t> indices) {
  std::sort(indices.begin(), indices.end());
  std::vector<std::pair<int64_t, int64_t>> runs;  // [first, last]
  for (int64_t i : indices) {
    if (!runs.empty() && runs.back().second + 1 == i)
      runs.back().second = i;
    else
      runs.emplace_back(i, i);
  }
  return runs;
}

// Every run of the lane is made of whole chunks (starts at a cut, ends
// right before one or at the end).
::testing::AssertionResult RunsAreWholeChunks(const std::vector<int64_t>& lane,
                                              const std::vector<int64_t>& cuts,
                                              int64_t total) {
  for (auto [first, last] : Runs(lane)) {
    if (!std::binary_search(cuts.begin(), cuts.end(), first))
      return ::testing::AssertionFailure()
             << "a run starts at " << first << ", not at a chunk's start";
    if (last + 1 != total &&
        !std::binary_search(cuts.begin(), cuts.end(), last + 1))
      return ::testing::AssertionFailure()
             << "a run ends at " << last << ", inside a chunk";
  }
  return ::testing::AssertionSuccess();
}

std::vector<int64_t> EveryNth(int64_t n, int64_t total) {
  std::vector<int64_t> cuts;
  for (int64_t i = 0; i < total; i += n)
    cuts.push_back(i);
  return cuts;
}

std::string TwoLanes(int frames, const std::string& fanout_props,
                     const std::string& lane0, const std::string& lane1,
                     const std::string& fanin_props = "") {
  return "videotestsrc name=src num-buffers=" + std::to_string(frames) + " ! " +
         kCaps + " ! gpufanout name=f devices=cpu:2 " + fanout_props +
         "  gpufanin name=m stall-timeout=" +
         (fanin_props.empty() ? std::string(kHour) : fanin_props) +
         " ! fakesink name=out sync=false  f.src_0 ! " + lane0 +
         " ! m.sink_0  f.src_1 ! " + lane1 + " ! m.sink_1";
}

}  // namespace

// ------------------------------------------------------- chunk=frames ---

// One lane with a queue (its drain returns before the outputs are out), one
// without: every frame out once, in order; each lane got whole chunks, each
// starting with DISCONT after a force-key-unit, each drained (one EOS and one
// reset per chunk); nothing of that reaches downstream.
TEST(ChunkFrames, RunsGoWholeToOneLaneDrainedAndComeOutInOrder) {
  constexpr int kFrames = 300, kChunk = 10;
  LaunchedPipeline p(
      TwoLanes(kFrames, "chunk=frames chunk-frames=" + std::to_string(kChunk),
               "queue ! identity name=b0", "identity name=b1"));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  LaneInput in0, in1;
  in0.Watch(p, "b0");
  in1.Watch(p, "b1");
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& b1 = p.Record("b1", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos());

  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kFrames)) << out.Summary();
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  EXPECT_EQ(out.Events(GST_EVENT_FLUSH_START), 0u);
  const std::vector<int64_t> cuts = EveryNth(kChunk, kFrames);
  EXPECT_TRUE(RunsAreWholeChunks(b0.BufferIndices(), cuts, kFrames));
  EXPECT_TRUE(RunsAreWholeChunks(b1.BufferIndices(), cuts, kFrames));

  const int chunks0 = static_cast<int>(b0.Buffers()) / kChunk;
  const int chunks1 = static_cast<int>(b1.Buffers()) / kChunk;
  EXPECT_EQ(chunks0 + chunks1, kFrames / kChunk);
  for (auto [in, chunks] : {std::pair<LaneInput *, int>{&in0, chunks0},
                            std::pair<LaneInput *, int>{&in1, chunks1}}) {
    EXPECT_EQ(in->discont.load(), chunks);
    EXPECT_EQ(in->force_key.load(), chunks);
    // one drain per chunk, and the stream's own EOS
    EXPECT_EQ(in->eos.load(), chunks + 1);
    EXPECT_EQ(in->flush_stop.load(), chunks);
  }
}

// Without a gpufanin, nothing would hide a drain's EOS from a sink: lanes no
// fan-in claimed are not drained, and the stream ends once.
TEST(ChunkFrames, LanesWithoutAFaninAreNotDrained) {
  constexpr int kFrames = 100;
  LaunchedPipeline p(std::string("videotestsrc name=src num-buffers=") +
                     std::to_string(kFrames) + " ! " + kCaps +
                     " ! gpufanout name=f devices=cpu:2 chunk=frames "
                     "chunk-frames=10"
                     "  f.src_0 ! fakesink name=s0 sync=false"
                     "  f.src_1 ! fakesink name=s1 sync=false");
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& s0 = p.Record("s0", "sink");
  RecordLog& s1 = p.Record("s1", "sink");
  ASSERT_TRUE(p.PlayToEos());
  EXPECT_EQ(s0.Buffers() + s1.Buffers(), static_cast<size_t>(kFrames));
  EXPECT_EQ(s0.Events(GST_EVENT_EOS), 1u);
  EXPECT_EQ(s1.Events(GST_EVENT_EOS), 1u);
  const std::vector<int64_t> cuts = EveryNth(10, kFrames);
  EXPECT_TRUE(RunsAreWholeChunks(s0.BufferIndices(), cuts, kFrames));
  EXPECT_TRUE(RunsAreWholeChunks(s1.BufferIndices(), cuts, kFrames));
}

// ---------------------------------------------------- chunk=keyframes ---

namespace {

// Marks every buffer a delta unit except every `interval`-th (a GOP).
struct GopMarker {
  int interval = 7;
  std::atomic<int> next{0};
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<GopMarker *>(user_data);
    GstBuffer *buffer =
        gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
    if (self->next++ % self->interval != 0)
      GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
    else
      GST_BUFFER_FLAG_UNSET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
    return GST_PAD_PROBE_OK;
  }
};

}  // namespace

// Keyframes every 7 buffers, chunks of at least 10: each chunk is cut at the
// first keyframe after 10 buffers, i.e. every 14.
TEST(ChunkKeyframes, ChunksAreCutAtTheFirstKeyframeAfterChunkFrames) {
  constexpr int kFrames = 280;
  LaunchedPipeline p(TwoLanes(kFrames, "chunk=keyframes chunk-frames=10",
                              "identity name=b0", "queue ! identity name=b1"));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  GopMarker gop;
  p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER, &GopMarker::Probe, &gop);
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& b1 = p.Record("b1", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos());
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kFrames)) << out.Summary();
  const std::vector<int64_t> cuts = EveryNth(14, kFrames);
  EXPECT_TRUE(RunsAreWholeChunks(b0.BufferIndices(), cuts, kFrames));
  EXPECT_TRUE(RunsAreWholeChunks(b1.BufferIndices(), cuts, kFrames));
  EXPECT_GT(b0.Buffers(), 0u);
  EXPECT_GT(b1.Buffers(), 0u);
}

// ------------------------------------------------ a stateful encoder ---

namespace {

struct EncodedOut {
  std::mutex mutex;
  std::vector<bool> keyframe;
  std::vector<bool> sps;
  std::vector<GstClockTime> dts;
  int segments = 0;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<EncodedOut *>(user_data);
    std::lock_guard<std::mutex> lk(self->mutex);
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
      if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_SEGMENT)
        self->segments++;
      return GST_PAD_PROBE_OK;
    }
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    self->keyframe.push_back(
        !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT));
    self->dts.push_back(GST_BUFFER_DTS(buffer));
    self->sps.push_back(HasH264Nal(buffer, 7));
    return GST_PAD_PROBE_OK;
  }
};


}  // namespace

// x264enc with B-frames and lookahead holds frames until it is drained: each
// chunk's output is complete (as many buffers as frames), starts with a
// keyframe carrying the stream headers (in-band: byte-stream) and has no
// other; decode timestamps never go back.
TEST(ChunkEncoder, X264ChunksAreCompleteAndEachStartsWithAKeyframe) {
  if (!HasFactory("x264enc"))
    GTEST_SKIP() << "x264enc (gstreamer1.0-plugins-ugly) is not installed";
  constexpr int kFrames = 120, kChunk = 20;
  const std::string enc =
      "x264enc speed-preset=ultrafast bframes=2 key-int-max=1000 threads=1"
      " ! video/x-h264,stream-format=byte-stream";
  LaunchedPipeline p(
      "videotestsrc num-buffers=" + std::to_string(kFrames) +
      " ! video/x-raw,format=I420,width=64,height=64,framerate=30/1"
      " ! gpufanout name=f devices=cpu:2 chunk=frames chunk-frames=" +
      std::to_string(kChunk) + "  gpufanin name=m stall-timeout=" + kHour +
      " ! fakesink name=out sync=false"
      "  f.src_0 ! queue ! " +
      enc + " ! m.sink_0  f.src_1 ! " + enc + " ! m.sink_1");
  ASSERT_TRUE(p.ok());
  EncodedOut encoded;
  p.AddProbe("out", "sink",
             static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                          GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
             &EncodedOut::Probe, &encoded);
  ASSERT_TRUE(p.PlayToEos());
  std::lock_guard<std::mutex> lk(encoded.mutex);
  ASSERT_EQ(encoded.keyframe.size(), static_cast<size_t>(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(encoded.keyframe[i], i % kChunk == 0) << "output " << i;
    EXPECT_EQ(encoded.sps[i], i % kChunk == 0) << "output " << i;
  }
  // Each chunk's encoder restarts its timestamps after the flush; the fan-in
  // moves them back into one segment.
  for (int i = 1; i < kFrames; ++i)
    EXPECT_GT(encoded.dts[i], encoded.dts[i - 1]) << "output " << i;
  EXPECT_EQ(encoded.segments, 1);
}

// ------------------------------------------------------ hostile lanes ---

// A lane whose branch drops every buffer: its chunks come back empty at
// their drain, and the rest of the stream is not held up (the stall-timeout
// is an hour).
TEST(ChunkHostile, ALaneThatDropsWholeChunksDoesNotStallTheRest) {
  constexpr int kFrames = 200;
  LaunchedPipeline p(TwoLanes(kFrames, "chunk=frames chunk-frames=10",
                              "identity name=b0",
                              "identity name=b1 drop-probability=1.0"));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos());
  EXPECT_EQ(out.BufferIndices(), b0.BufferIndices());
  EXPECT_TRUE(IsStrictlyIncreasing(out.BufferIndices()));
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
}

namespace {

// Blocks the buffer pushes through a pad from the `at`-th on, until Release.
struct Blocker {
  int at = 15;
  std::atomic<int> seen{0};
  std::mutex mutex;
  std::condition_variable cond;
  bool released = false;
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *,
                                 gpointer user_data) {
    auto *self = static_cast<Blocker *>(user_data);
    if (self->seen++ < self->at)
      return GST_PAD_PROBE_OK;
    std::unique_lock<std::mutex> lk(self->mutex);
    self->cond.wait(lk, [self] { return self->released; });
    return GST_PAD_PROBE_OK;
  }
  void Release() {
    std::lock_guard<std::mutex> lk(mutex);
    released = true;
    cond.notify_all();
  }
};

// Drops the EOS events passing a pad.
GstPadProbeReturn DropEos(GstPad *, GstPadProbeInfo *info, gpointer) {
  return GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS
             ? GST_PAD_PROBE_DROP
             : GST_PAD_PROBE_OK;
}

}  // namespace

// A lane that blocks in the middle of a chunk: the chunk is given up after
// stall-timeout without progress, the fan-out cuts it short and sends the
// rest of the stream to the other lane; what comes out is in order and
// everything the healthy lane processed is there.
namespace {

// Every index below `total` but those of [first, first + n).
std::vector<int64_t> AllBut(int64_t total, int64_t first, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < total; i++)
    if (i < first || i >= first + n)
      v.push_back(i);
  return v;
}

// The runs of indices below `total` that `got` lacks, for a failure's text.
std::string Missing(const std::vector<int64_t>& got, int64_t total) {
  std::vector<int64_t> missing;
  for (int64_t i = 0; i < total; i++)
    if (!std::binary_search(got.begin(), got.end(), i))
      missing.push_back(i);
  std::string text = "missing:";
  for (auto [first, last] : Runs(missing))
    text += " " + std::to_string(first) + "-" + std::to_string(last);
  return text;
}

// Round-robin over 2 lanes, chunks of 10, lane 1 blocking on its
// `block_at`-th buffer (its second chunk, frames 30-39), directly or behind
// a queue (then its worker is not blocked, the lane goes silent). Lane 1's
// queue fills with later chunks, and the chain function waits for room in
// it with a chunk of its own. Only the blocked chunk's rest is lost: the chunks
// queued for lane 1 that had not begun, the one being filled included, go
// to lane 0 whole once lane 1 stalls.
void BlockMidChunk(int block_at, const std::string& mode, bool queue) {
  constexpr int kFrames = 200;
  LaunchedPipeline p(TwoLanes(
      kFrames, "chunk=" + mode + " chunk-frames=10 policy=round-robin",
      "identity name=b0",
      std::string(queue ? "queue ! " : "") + "identity name=b1",
      "2000000000"));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  Blocker blocker;
  blocker.at = block_at;
  p.AddProbe("b1", "sink", GST_PAD_PROBE_TYPE_BUFFER, &Blocker::Probe,
             &blocker);
  RecordLog& out = p.Record("out", "sink");
  GstMessage *end = (p.Play(), p.WaitEosOrError(kLongWait));
  blocker.Release();
  ASSERT_NE(end, nullptr) << "no EOS";
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  // its output before the block comes out when the chunk is given up
  const int64_t blocked = 20 + block_at;
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_EQ(got, AllBut(kFrames, blocked, 40 - blocked))
      << Missing(got, kFrames);
  GstStructure *s = GetStats(p.element("m"));
  ASSERT_NE(s, nullptr);
  const GstStructure *l1 = StatsLaneById(s, 1);
  ASSERT_NE(l1, nullptr);
  EXPECT_EQ(StatsU64(l1, "timed-out"), 1u);
  gst_structure_free(s);
}

}  // namespace

TEST(ChunkHostile, ALaneThatBlocksMidChunkCostsOneStallTimeout) {
  BlockMidChunk(15, "frames", false);
}

// The chunk that finds the blocked lane full was given to it before the lane
// stalled: once it stalls, the whole chunk goes to the other lane.
TEST(ChunkHostile, AFreshChunkWaitingForABlockedLaneGoesElsewhere) {
  BlockMidChunk(11, "frames", false);
}

TEST(ChunkHostile, ChunksQueuedForABlockedLaneGoElsewhereKeyframes) {
  BlockMidChunk(15, "keyframes", false);
}

// Behind a queue the worker is not blocked: the lane goes silent, and its
// worker begins no chunk that could still move.
TEST(ChunkHostile, ChunksQueuedForALaneBlockedBehindAQueueGoElsewhere) {
  BlockMidChunk(15, "frames", true);
  BlockMidChunk(11, "keyframes", true);
}

// A valve that drops everything, its drains included: its first chunk is
// lost (the valve's), and no other once the lane stalls.
TEST(ChunkHostile, AValveDroppingEverythingLosesOnlyItsFirstChunk) {
  for (const char *mode : {"frames", "keyframes"}) {
    constexpr int kFrames = 200;
    LaunchedPipeline p(TwoLanes(
        kFrames,
        std::string("chunk=") + mode + " chunk-frames=10 policy=round-robin",
        "identity name=b0", "valve drop=true", "2000000000"));
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    RecordLog& out = p.Record("out", "sink");
    ExpectLog missing_eos("without the EOS of");
    ASSERT_TRUE(p.PlayToEos()) << mode;
    const std::vector<int64_t> got = out.BufferIndices();
    EXPECT_EQ(got, AllBut(kFrames, 10, 10)) << mode << Missing(got, kFrames);
  }
}

// A valve that drops buffers but forwards sticky events passes the drains'
// EOS and eats the resets' flushes: each of its chunks comes back empty (the
// valve's loss) and nothing else is lost or waits.
// (transform-to-gap: the same, with GAPs in place of the buffers.)
TEST(ChunkHostile, AValveForwardingStickyEventsLosesOnlyWhatItDrops) {
  for (const char *mode : {"frames", "keyframes", "gap"}) {
    constexpr int kFrames = 200;
    const bool gap = std::string(mode) == "gap";
    LaunchedPipeline p(TwoLanes(
        kFrames,
        std::string("chunk=") + (gap ? "frames" : mode) +
            " chunk-frames=10 policy=round-robin",
        "identity name=b0",
        std::string("valve drop=true drop-mode=") +
            (gap ? "transform-to-gap" : "forward-sticky-events")));
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    RecordLog& b0 = p.Record("b0", "src");
    RecordLog& out = p.Record("out", "sink");
    ASSERT_TRUE(p.PlayToEos()) << mode;
    const std::vector<int64_t> got = out.BufferIndices();
    EXPECT_EQ(got, b0.BufferIndices()) << mode << Missing(got, kFrames);
    // round-robin: lane 1 had every other chunk
    EXPECT_EQ(got.size(), static_cast<size_t>(kFrames / 2)) << mode;
    EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  }
}

// A lane that swallows EOS cannot be drained: each of its chunks is given up
// after stall-timeout, in order, and the stream still ends.
TEST(ChunkHostile, ALaneThatSwallowsTheDrainStillLetsTheStreamEnd) {
  constexpr int kFrames = 60;
  LaunchedPipeline p(TwoLanes(kFrames, "chunk=frames chunk-frames=10",
                              "identity name=b0", "identity name=b1",
                              "2000000000"));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  p.AddProbe("b1", "src", GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, &DropEos,
             nullptr);
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& out = p.Record("out", "sink");
  ExpectLog missing_eos("without the EOS of");
  ASSERT_TRUE(p.PlayToEos());
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(IsStrictlyIncreasing(got));
  const std::vector<int64_t> healthy = b0.BufferIndices();
  EXPECT_TRUE(
      std::includes(got.begin(), got.end(), healthy.begin(), healthy.end()));
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
}

// Lanes whose encoders disagree on the caps of one input (here, profiles):
// a clear error, not a stream whose headers change from chunk to chunk.
TEST(ChunkEncoder, LanesThatDisagreeOnTheCapsOfOneInputAreAnError) {
  if (!HasFactory("x264enc"))
    GTEST_SKIP() << "x264enc (gstreamer1.0-plugins-ugly) is not installed";
  const std::string enc = "x264enc speed-preset=ultrafast threads=1";
  LaunchedPipeline p(
      "videotestsrc num-buffers=80"
      " ! video/x-raw,format=I420,width=64,height=64,framerate=30/1"
      " ! gpufanout name=f devices=cpu:2 chunk=frames chunk-frames=10"
      " policy=round-robin  gpufanin name=m ! fakesink sync=false"
      "  f.src_0 ! " +
      enc + " ! video/x-h264,profile=baseline ! m.sink_0  f.src_1 ! " + enc +
      " ! video/x-h264,profile=high ! m.sink_1");
  ASSERT_TRUE(p.ok());
  // the error may come while the pipeline prerolls: the state change then
  // fails, and that is not what is tested
  p.Play();
  GstMessage *end = p.WaitEosOrError(kLongWait);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_ERROR);
  EXPECT_NE(BusLog::ErrorText(end).find("different caps"), std::string::npos)
      << BusLog::ErrorText(end);
}

namespace {

// Sleeps once, on the `at`-th buffer through a pad, for `ms`.
struct Hiccup {
  int at = 15;
  int ms = 2000;
  std::atomic<int> seen{0};
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *,
                                 gpointer user_data) {
    auto *self = static_cast<Hiccup *>(user_data);
    if (self->seen++ == self->at)
      g_usleep(static_cast<gulong>(self->ms) * 1000);
    return GST_PAD_PROBE_OK;
  }
};

}  // namespace

// One lane that pauses far longer than the stall-timeout: its chunk is given
// up and the lane stalled, the last resort of every chunk after it; when it
// answers again, the stream goes on to its end, in order, and no chunk is
// left counted in the lane's queue (a chunk given to a stalled lane waits for
// room in it, it is not lost on the way).
TEST(ChunkHostile, TheOnlyLanePausingLongerThanTheStallTimeoutRecovers) {
  constexpr int kFrames = 120;
  LaunchedPipeline p(
      std::string("videotestsrc name=src num-buffers=") +
      std::to_string(kFrames) + " ! " + kCaps +
      " ! gpufanout name=f devices=cpu:1 chunk=frames chunk-frames=10"
      " policy=least-loaded  gpufanin name=m stall-timeout=100000000"
      " ! fakesink name=out sync=false  f.src_0 ! identity name=b0 ! m.sink_0");
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  Hiccup hiccup;
  p.AddProbe("b0", "sink", GST_PAD_PROBE_TYPE_BUFFER, &Hiccup::Probe, &hiccup);
  RecordLog& out = p.Record("out", "sink");
  ExpectLog missing_eos("without the EOS of");
  ASSERT_TRUE(p.PlayToEos());
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(IsStrictlyIncreasing(got));
  EXPECT_FALSE(got.empty());
  if (!got.empty()) {
    EXPECT_EQ(got.back(), kFrames - 1) << "the stream did not go on";
  }
  GstStructure *s = GetStats(p.element("f"));
  ASSERT_NE(s, nullptr);
  const GstStructure *l0 = StatsLaneById(s, 0);
  ASSERT_NE(l0, nullptr);
  guint queued = 1;
  EXPECT_TRUE(gst_structure_get_uint(l0, "queued", &queued));
  EXPECT_EQ(queued, 0u);
  gst_structure_free(s);
}

namespace {

// Gives every buffer through a pad a buffer of a pool of `max` (a copy),
// waiting for one to come back when all are out: a branch whose element
// allocates from a small pool, as hardware decoders and converters do.
struct SmallPool {
  GstBufferPool *pool = nullptr;
  explicit SmallPool(guint max) {
    pool = gst_buffer_pool_new();
    GstStructure *config = gst_buffer_pool_get_config(pool);
    gst_buffer_pool_config_set_params(config, nullptr, 64 * 64, 0, max);
    gst_buffer_pool_set_config(pool, config);
    gst_buffer_pool_set_active(pool, TRUE);
  }
  ~SmallPool() {
    gst_buffer_pool_set_active(pool, FALSE);
    gst_object_unref(pool);
  }
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<SmallPool *>(user_data);
    GstBuffer *in = GST_PAD_PROBE_INFO_BUFFER(info);
    GstBuffer *out = nullptr;
    if (gst_buffer_pool_acquire_buffer(self->pool, &out, nullptr) !=
        GST_FLOW_OK)
      return GST_PAD_PROBE_DROP;  // flushing: the test is over
    gst_buffer_copy_into(out, in, GST_BUFFER_COPY_METADATA, 0, -1);
    GstMapInfo map;
    if (gst_buffer_map(out, &map, GST_MAP_WRITE)) {
      gst_buffer_extract(in, 0, map.data,
                         MIN(map.size, gst_buffer_get_size(in)));
      gst_buffer_unmap(out, &map);
    }
    gst_buffer_unref(in);
    GST_PAD_PROBE_INFO_DATA(info) = out;
    return GST_PAD_PROBE_OK;
  }
};

// Ends the pools' waits before the pipeline goes down (declared after it,
// so destroyed first): a hung test must not hang its teardown too.
struct FlushPoolsFirst {
  std::vector<SmallPool *> pools;
  ~FlushPoolsFirst() {
    for (SmallPool *p : pools)
      gst_buffer_pool_set_flushing(p->pool, TRUE);
  }
};

}  // namespace

// Lanes whose branch takes its buffers from a pool of 4, chunks of 10: the
// head chunk's output goes downstream as it comes (the fan-in does not hold
// it until the drain, which would never come), and a later chunk's lane waits
// for its pool until its chunk is the head. Everything out, in order.
TEST(ChunkFrames, BranchesWithPoolsSmallerThanAChunkDoNotDeadlock) {
  constexpr int kFrames = 200;
  SmallPool pool0(4), pool1(4);
  LaunchedPipeline p(TwoLanes(kFrames, "chunk=frames chunk-frames=10",
                              "identity name=b0", "queue ! identity name=b1"));
  ASSERT_TRUE(p.ok());
  FlushPoolsFirst flush{{&pool0, &pool1}};
  p.Stamp("src", "src");
  p.AddProbe("b0", "src", GST_PAD_PROBE_TYPE_BUFFER, &SmallPool::Probe, &pool0);
  p.AddProbe("b1", "src", GST_PAD_PROBE_TYPE_BUFFER, &SmallPool::Probe, &pool1);
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos());
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kFrames)) << out.Summary();
}

// -------------------------------------------------------------- seeks ---

// Flushing seeks while chunks are in their lanes, some lanes draining, some
// waiting for the fan-in to have their chunk: none hangs, and after the last
// seek its segment comes out whole, in order, with one EOS.
TEST(ChunkSeek, FlushingSeeksWhileChunksAreInTheLanes) {
  constexpr int kSeeks = 60, kLast = 50;
  LaunchedPipeline p(
      std::string(
          "videotestsrc name=src pattern=black"
          " ! video/x-raw,format=GRAY8,width=16,height=16,"
          "framerate=1000/1"
          " ! gpufanout name=f devices=cpu:3 chunk=frames chunk-frames=7"
          "  gpufanin name=m stall-timeout=") +
      kHour +
      " ! fakesink name=out sync=false"
      "  f.src_0 ! identity ! m.sink_0"
      "  f.src_1 ! queue max-size-buffers=4 ! identity ! m.sink_1"
      "  f.src_2 ! queue ! identity ! m.sink_2");
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  // the chunks' own flushes stay inside the pair: one out per seek
  CheckFlushingSeeks(p, out, kSeeks, 10, kLast);
}

// ------------------------------------------- lane errors (issue 24, 5) ---

namespace {

// The stream's end for an application that does not stop on its lane
// elements' ERRORs (docs/elements.md, "A lane that fails"): EOS, or an ERROR
// from an element that is not one of `branch`.
GstMessage *WaitForEnd(LaunchedPipeline& p,
                       const std::vector<std::string>& branch) {
  return p.bus().WaitFor(
      [&branch](GstMessage *m) {
        if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS)
          return true;
        if (GST_MESSAGE_TYPE(m) != GST_MESSAGE_ERROR)
          return false;
        const std::string name = GST_OBJECT_NAME(GST_MESSAGE_SRC(m));
        return std::find(branch.begin(), branch.end(), name) == branch.end();
      },
      kLongWait);
}

// Plays a pipeline whose lane 1 fails with drop-lane, as an application
// that writes its lanes itself must (docs/elements.md, "A lane that
// fails"): a lane element's ERROR that comes before PLAYING (on a loaded
// machine it may) fails GstBin's state change, so it plays again once the
// lane has failed.
void PlayThroughLaneOneFailing(LaunchedPipeline& p) {
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_EQ(LaneFailedMessages(p, 1, 1), 1u) << "lane 1's error went unnoticed";
  EXPECT_TRUE(p.Play());
}

// What a lane error mid-chunk costs with drop-lane, from the frames seen
// at each lane's end (`lane0`, `lane1`, each in whole chunks of `chunk`
// frames but the failing one) and at the output: lane 0's frames and lane
// 1's chunks before the failing one (which holds `failing`) are out, in
// order; of the failing chunk, at most the frames lane 1 returned (an
// element before the failing one may still drain its frames through it),
// never the failing frame, and its rest that had not gone to lane 1 yet
// (lane 0 takes it); nothing else.
void ExpectFailingChunkLost(const std::vector<int64_t>& lane0,
                            const std::vector<int64_t>& lane1,
                            const std::vector<int64_t>& out, int64_t failing,
                            int64_t chunk) {
  const int64_t chunk_start = failing - failing % chunk;
  std::vector<int64_t> kept(lane0);
  for (int64_t i : lane1) {
    EXPECT_LT(i, chunk_start + chunk) << "lane 1 took a chunk after failing";
    if (i < chunk_start)
      kept.push_back(i);
  }
  std::sort(kept.begin(), kept.end());
  std::vector<int64_t> out_kept;
  for (int64_t i : out) {
    const bool from_lane0 =
        std::find(lane0.begin(), lane0.end(), i) != lane0.end();
    if (i >= chunk_start && i < chunk_start + chunk && !from_lane0) {
      EXPECT_NE(i, failing) << "the failing frame came out";
      EXPECT_TRUE(std::find(lane1.begin(), lane1.end(), i) != lane1.end())
          << "frame " << i << " came out, but not out of lane 1";
    } else {
      out_kept.push_back(i);
    }
  }
  EXPECT_TRUE(IsStrictlyIncreasing(out));
  EXPECT_EQ(out_kept, kept) << "lost beyond the failing chunk";
}

// The chunks a lane's frames (`indices`) came in, for chunks of `chunk`
// frames cut from frame 0 (the rest of a chunk that went elsewhere when its
// lane failed is one more).
uint64_t ChunksOf(const std::vector<int64_t>& indices, int64_t chunk) {
  std::vector<int64_t> starts;
  for (int64_t i : indices)
    starts.push_back(i / chunk);
  std::sort(starts.begin(), starts.end());
  return std::unique(starts.begin(), starts.end()) - starts.begin();
}

// The lane statistics after lane 1 failed in its `chunks1`-th chunk (from
// 1), lane 0 having done `chunks0` (its own and those it took over): lane 1
// is failed, its failing chunk counted failed and nothing given up for want
// of time.
void ExpectLaneOneFailedInStats(GstElement *fanout, uint64_t chunks0,
                                uint64_t chunks1) {
  GstStructure *s = GetStats(fanout);
  ASSERT_NE(s, nullptr);
  const GstStructure *l0 = StatsLaneById(s, 0);
  const GstStructure *l1 = StatsLaneById(s, 1);
  ASSERT_NE(l0, nullptr);
  ASSERT_NE(l1, nullptr);
  EXPECT_STREQ(gst_structure_get_string(l0, "state"), "active");
  EXPECT_STREQ(gst_structure_get_string(l1, "state"), "failed");
  ExpectLaneCounts(l0, {.completed = chunks0,
                        .dropped = 0,
                        .failed = 0,
                        .timed_out = 0});
  // failed: the failing chunk
  ExpectLaneCounts(l1, {.completed = chunks1 - 1, .failed = 1, .timed_out = 0});
  // (handed over: chunks queued behind the failing one went to lane 0)
  EXPECT_EQ(StatsU64(l1, "dispatched"),
            StatsU64(l1, "completed") + StatsU64(l1, "failed") +
                StatsU64(l1, "dropped") + StatsU64(l1, "handed-over"));
  EXPECT_EQ(StatsU64(l1, "handed-over"), StatsU64(l0, "replayed"));
  gst_structure_free(s);
}

}  // namespace

// A branch error behind a queue in the middle of a keyframes chunk: the
// queue takes the flow return, and the drain's flush would clear it. With
// drop-lane the lane fails as in frame mode: a gpufan-lane-failed message,
// the lane failed in the statistics, its failing chunk lost (and the chunks
// queued behind it), every other frame out in order, then EOS.
TEST(ChunkLaneError, AnErrorBehindAQueueMidChunkFailsTheLane) {
  constexpr int kFrames = 300, kChunk = 10, kErrorAfter = 45;
  LaunchedPipeline p(
      TwoLanes(kFrames,
               "policy=round-robin chunk=keyframes chunk-frames=10 "
               "on-lane-error=drop-lane",
               "queue name=q0 ! identity name=b0",
               "queue name=q1 ! identity name=b1 error-after=" +
                   std::to_string(kErrorAfter)));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& in1 = p.Record("b1", "sink");
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& b1 = p.Record("b1", "src");
  RecordLog& out = p.Record("out", "sink");
  PlayThroughLaneOneFailing(p);
  GstMessage *end = WaitForEnd(p, {"q0", "q1", "b0", "b1"});
  ASSERT_NE(end, nullptr) << "no EOS: the stream hangs";
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u) << "lane 1's error went unnoticed";
  EXPECT_EQ(LaneFailedMessages(p, 0, 0), 0u);
  const std::vector<int64_t> into1 = in1.BufferIndices();
  ASSERT_GE(into1.size(), static_cast<size_t>(kErrorAfter));
  const int64_t failing = into1[kErrorAfter - 1];
  ExpectFailingChunkLost(b0.BufferIndices(), b1.BufferIndices(),
                         out.BufferIndices(), failing, kChunk);
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  ExpectLaneOneFailedInStats(p.element("f"),
                             ChunksOf(b0.BufferIndices(), kChunk),
                             kErrorAfter / kChunk + 1);
  EXPECT_TRUE(p.Stop());
}

// A lane that fails mid-chunk with chunks queued behind it that had not
// begun (its queue holds two chunks' worth): they go to the other lane when
// it can take them at a chunk boundary (not while the chain function fills a
// chunk of its own there: then they are lost). So only whole chunks of lane
// 1 are missing besides the failing chunk's rest, and gpufan-lane-failed's
// lost is exactly what is missing.
TEST(ChunkLaneError, ChunksQueuedBehindAFailingOneMoveOrCountLost) {
  constexpr int kFrames = 200;
  for (const char *mode : {"frames", "keyframes"}) {
    LaunchedPipeline p(TwoLanes(
        kFrames,
        std::string("policy=round-robin chunk-frames=10 on-lane-error=drop-lane"
                    " chunk=") +
            mode,
        "identity name=b0", "identity name=b1 error-after=15"));
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    RecordLog& out = p.Record("out", "sink");
    PlayThroughLaneOneFailing(p);
    GstMessage *end = WaitForEnd(p, {"b0", "b1"});
    ASSERT_NE(end, nullptr) << "no EOS: the stream hangs";
    EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
    EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u);
    // lane 1 had 10-19, then 30-39, and fails at its 15th frame (34)
    const std::vector<int64_t> got = out.BufferIndices();
    EXPECT_TRUE(IsStrictlyIncreasing(got));
    // missing: 34 (the failing frame) and what lane 1 held of its chunk
    // (30-33 come out when the chunk headed the window, its rest that was
    // not queued yet goes to lane 0), and whole chunks of lane 1 (10-19 was
    // its first, so 50-59, 70-79, ...) that could not move
    EXPECT_EQ(std::count(got.begin(), got.end(), 34), 0);
    for (auto [first, last] : Runs([&] {
           std::vector<int64_t> missing;
           for (int64_t i = 0; i < kFrames; i++)
             if ((i < 30 || i >= 40) &&
                 !std::binary_search(got.begin(), got.end(), i))
               missing.push_back(i);
           return missing;
         }())) {
      EXPECT_EQ(first % 20, 10) << mode << Missing(got, kFrames);
      EXPECT_EQ(last % 20, 19) << mode << Missing(got, kFrames);
    }
    guint lost = 0;
    p.bus().Count([&lost](GstMessage *m) {
      if (BusLog::IsElementMessage(m, "gpufan-lane-failed"))
        gst_structure_get_uint(gst_message_get_structure(m), "lost", &lost);
      return false;
    });
    EXPECT_EQ(lost, kFrames - got.size()) << mode << Missing(got, kFrames);
    EXPECT_TRUE(p.Stop());
  }
}

// The same error with on-lane-error=fail: the stream fails with the
// fan-out's ERROR naming the lane, as in frame mode, instead of going on.
TEST(ChunkLaneError, AnErrorBehindAQueueMidChunkFailsTheStreamWithFail) {
  constexpr int kFrames = 300;
  LaunchedPipeline p(
      TwoLanes(kFrames, "policy=round-robin chunk=keyframes chunk-frames=10",
               "queue name=q0 ! identity name=b0",
               "queue name=q1 ! identity name=b1 error-after=45"));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  p.Play();
  GstMessage *end = WaitForEnd(p, {"q0", "q1", "b0", "b1"});
  ASSERT_NE(end, nullptr) << "neither EOS nor ERROR: the stream hangs";
  ASSERT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_ERROR)
      << "the stream went on past lane 1's error";
  EXPECT_EQ(GST_MESSAGE_SRC(end), GST_OBJECT(p.element("f")))
      << p.bus().ErrorsText();
  const std::string text = BusLog::ErrorText(end);
  EXPECT_NE(text.find("lane 1"), std::string::npos) << text;
  EXPECT_EQ(LaneFailedMessages(p, 1, 0), 0u);
  EXPECT_LT(out.Buffers(), static_cast<size_t>(kFrames));
  EXPECT_TRUE(p.Stop());
}

// H.264 in keyframes chunks (an IDR every 10 frames) decoded in the lanes,
// the error after lane 1's decoder, behind a queue: as with raw frames, the
// lane fails and its failing chunk is lost, nothing else.
TEST(ChunkLaneError, AnErrorAfterADecoderMidChunkFailsTheLane) {
  for (const char *f : {"x264enc", "h264parse", "avdec_h264"})
    if (!HasFactory(f))
      GTEST_SKIP() << f << " is not installed";
  constexpr int kFrames = 200, kChunk = 10, kErrorAfter = 45;
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=" + std::to_string(kFrames) +
      " ! video/x-raw,format=I420,width=64,height=64,framerate=1000/1"
      " ! x264enc speed-preset=ultrafast key-int-max=10 bframes=0 threads=1"
      " ! video/x-h264,stream-format=byte-stream ! h264parse"
      " ! gpufanout name=f devices=cpu:2 policy=round-robin chunk=keyframes"
      " chunk-frames=10 on-lane-error=drop-lane"
      "  gpufanin name=m stall-timeout=" +
      kHour +
      " ! fakesink name=out sync=false"
      "  f.src_0 ! queue name=q0 ! avdec_h264 name=d0 ! identity name=b0"
      " ! m.sink_0"
      "  f.src_1 ! queue name=q1 ! avdec_h264 name=d1 ! identity name=b1"
      " error-after=" +
      std::to_string(kErrorAfter) + " ! m.sink_1");
  ASSERT_TRUE(p.ok());
  RecordLog& in1 = p.Record("b1", "sink");
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& b1 = p.Record("b1", "src");
  RecordLog& out = p.Record("out", "sink");
  PlayThroughLaneOneFailing(p);
  GstMessage *end = WaitForEnd(p, {"q0", "q1", "d0", "d1", "b0", "b1"});
  ASSERT_NE(end, nullptr) << "no EOS: the stream hangs";
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 1), 1u) << "lane 1's error went unnoticed";
  const std::vector<int64_t> into1 = in1.BufferPtsIndices();
  ASSERT_GE(into1.size(), static_cast<size_t>(kErrorAfter));
  const int64_t failing = into1[kErrorAfter - 1];
  ExpectFailingChunkLost(b0.BufferPtsIndices(), b1.BufferPtsIndices(),
                         out.BufferPtsIndices(), failing, kChunk);
  ExpectLaneOneFailedInStats(p.element("f"),
                             ChunksOf(b0.BufferPtsIndices(), kChunk),
                             kErrorAfter / kChunk + 1);
  EXPECT_TRUE(p.Stop());
}

// ---------------------------- a lane error before preroll (issue 24, 6) ---

namespace {

// Two x264enc lanes in chunks of 10 (lookahead: an encoder holds its frames
// until the drain, so the sink has not prerolled when lane 1 fails), lane 1
// failing at its first frame, before its encoder, with `on_lane_error`.
std::string X264LanesFailingEarly(const char *on_lane_error, int frames) {
  const std::string enc = "x264enc threads=1";
  return "videotestsrc name=src num-buffers=" + std::to_string(frames) +
         " ! video/x-raw,format=I420,width=64,height=64,framerate=1000/1"
         " ! gpufanout name=f devices=cpu:2 policy=round-robin chunk=frames"
         " chunk-frames=10 on-lane-error=" +
         on_lane_error + "  gpufanin name=m stall-timeout=" + kHour +
         " ! fakesink name=out sync=false"
         "  f.src_0 ! " +
         enc +
         " name=e0 ! m.sink_0  f.src_1 ! identity name=b1 error-after=1 ! " +
         enc + " name=e1 ! m.sink_1";
}

}  // namespace

// drop-lane: lane 1's ERROR came before PLAYING, so GstBin failed the
// pipeline's state change (as for any ERROR): the sink prerolls and waits
// for PLAYING. An application that plays on after its lane's ERROR (as
// docs/elements.md says) gets the rest of the stream from lane 0: every
// frame lane 0's encoder took, encoded, and EOS.
TEST(LaneErrorBeforePreroll, X264LanesDropLaneGoOnWhenPlayedAgain) {
  if (!HasFactory("x264enc"))
    GTEST_SKIP() << "x264enc (gstreamer1.0-plugins-ugly) is not installed";
  constexpr int kFrames = 200;
  LaunchedPipeline p(X264LanesFailingEarly("drop-lane", kFrames));
  ASSERT_TRUE(p.ok());
  RecordLog& in0 = p.Record("e0", "sink");
  RecordLog& in1 = p.Record("b1", "sink");
  RecordLog& out = p.Record("out", "sink");
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_EQ(LaneFailedMessages(p, 1, 1), 1u);
  EXPECT_TRUE(p.Play());
  GstMessage *end = WaitForEnd(p, {"b1", "e1"});
  ASSERT_NE(end, nullptr) << "neither EOS nor ERROR: the stream hangs; in "
                          << in0.Buffers() << "+" << in1.Buffers() << ", out "
                          << out.Buffers();
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 0, 0), 0u);
  EXPECT_EQ(in1.Buffers(), 1u) << "lane 1 took frames after failing";
  EXPECT_EQ(out.Buffers(), in0.Buffers()) << "lane 0's frames, encoded";
  // lost: lane 1's chunk, and one queued behind it at most
  EXPECT_GE(in0.Buffers(), static_cast<size_t>(kFrames) - 20);
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  EXPECT_TRUE(p.Stop());
}

// fail: the stream fails with the fan-out's ERROR naming the lane, the
// first ERROR that is not the lane element's (before the source's).
TEST(LaneErrorBeforePreroll, X264LanesFailStopTheStream) {
  if (!HasFactory("x264enc"))
    GTEST_SKIP() << "x264enc (gstreamer1.0-plugins-ugly) is not installed";
  LaunchedPipeline p(X264LanesFailingEarly("fail", 200));
  ASSERT_TRUE(p.ok());
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *end = WaitForEnd(p, {"b1", "e1"});
  ASSERT_NE(end, nullptr) << "neither EOS nor ERROR: the stream hangs";
  ASSERT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_ERROR) << p.bus().ErrorsText();
  EXPECT_EQ(GST_MESSAGE_SRC(end), GST_OBJECT(p.element("f")))
      << p.bus().ErrorsText();
  EXPECT_EQ(LaneFailedMessages(p, 1, 0), 0u);
  EXPECT_TRUE(p.Stop());
}
