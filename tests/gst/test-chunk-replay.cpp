// SPDX-License-Identifier: LGPL-2.1-or-later
// Replay in chunk mode (on-lane-error=replay): a lane that fails mid-chunk
// sends each chunk it held again, whole, to the other lane, and nothing is
// lost or doubled, in order. Two cases: the failing chunk waits behind the
// head (nothing of it left gpufanin), and the failing chunk is the head and
// half of it had left (gpufanin drops as many of the new lane's outputs).
// With identity (one output per frame) and with x264enc threads=1 (the
// same bytes for the same chunk: decoded, the frames match a run without
// the failure).
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

constexpr const char *kHour = "3600000000000";
constexpr int kFrames = 100;
// lane 1 gets chunk 1 (frames 10-19) first, with round-robin
constexpr int64_t kFailAt = 15;

// The frame a PTS index stands for: x264enc (GstVideoEncoder) moves its
// output 1000 hours on, leaving room for DTS before PTS.
int64_t Frame(int64_t pts_index) {
  constexpr int64_t kEncoderOffset = 1000LL * 3600 * 1000;  // in kFrame
  return pts_index % kEncoderOffset;
}

// Two lanes of `branch` (a0 ! BRANCH ! b0), chunks of 10 frames, replay;
// the output through identity o (for the gate) to `sink_chain`.
std::string TwoReplayLanes(const std::string& branch,
                           const std::string& sink_chain) {
  auto lane = [&branch](int i) {
    const std::string n = std::to_string(i);
    return "identity name=a" + n + " ! " + branch + " ! identity name=b" + n;
  };
  return "videotestsrc name=src num-buffers=" + std::to_string(kFrames) +
         " ! video/x-raw,format=I420,width=64,height=64,framerate=1000/1"
         " ! gpufanout name=f devices=cpu:2 policy=round-robin chunk=frames"
         " chunk-frames=10 on-lane-error=replay"
         "  gpufanin name=m stall-timeout=" +
         kHour + " ! identity name=o ! " + sink_chain + "  f.src_0 ! " +
         lane(0) + " ! m.sink_0  f.src_1 ! " + lane(1) + " ! m.sink_1";
}

// Lane 1's element b1 fails at frame kFailAt (its 6th output), as `identity error-after`
// does (an ERROR, then GST_FLOW_ERROR for that buffer and later ones);
// with a gate, only once frame kFailAt - 1 left gpufanin (its chunk heads
// the window and half of it is out).
struct GatedFault {
  RecordLog *gate = nullptr;
  GstElement *element = nullptr;
  std::atomic<bool> struck{false};
  std::atomic<int64_t> outputs{0};  // of lane 1, whose first chunk is 1

  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *self = static_cast<GatedFault *>(data);
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    /* by count: an encoder restarts its timestamps with each chunk */
    if (self->outputs++ < kFailAt - 10)
      return GST_PAD_PROBE_OK;
    if (!self->struck.exchange(true)) {
      if (self->gate)
        self->gate->WaitFor(
            [](const std::vector<Entry>& entries) {
              for (const Entry& e : entries)
                if (e.is_buffer && Frame(e.pts_index) == kFailAt - 1)
                  return true;
              return false;
            },
            kLongWait);
      GST_ELEMENT_ERROR(self->element, STREAM, FAILED,
                        ("injected error at frame %" G_GINT64_FORMAT, kFailAt),
                        (nullptr));
    }
    gst_buffer_unref(buffer);
    GST_PAD_PROBE_INFO_DATA(info) = nullptr;
    GST_PAD_PROBE_INFO_FLOW_RETURN(info) = GST_FLOW_ERROR;
    return GST_PAD_PROBE_HANDLED;
  }
};

// Each decoded frame's md5 (visible pixels) by PTS index.
struct FrameSums {
  std::mutex mutex;
  std::map<int64_t, std::string> md5;
  size_t frames = 0;

  static GstPadProbeReturn Probe(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *self = static_cast<FrameSums *>(data);
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    const std::string sum = VisibleMd5(pad, buffer);
    std::lock_guard<std::mutex> lk(self->mutex);
    self->md5[Frame(PtsIndex(GST_BUFFER_PTS(buffer)))] = sum;
    self->frames++;
    return GST_PAD_PROBE_OK;
  }
};

enum class Where {
  kNotHead,      // lane 0 holds the head chunk back until lane 1 failed
  kHeadHalfOut,  // lane 1's chunk heads the window, 10-14 left
  kNone,         // no failure (the reference run)
};

struct Outcome {
  std::vector<int64_t> out;  // PTS indices after gpufanin
  std::map<int64_t, std::string> decoded;
  size_t decoded_frames = 0;
};

// Plays two lanes of `branch` with lane 1 failing as `where` says; with
// `decode`, the output is H.264 and is decoded.
void PlayFailing(const std::string& branch, Where where, bool decode,
                 Outcome *run) {
  GatedFault fault;
  FrameSums sums;
  const std::string sink = decode ? "h264parse ! avdec_h264 max-threads=1 ! "
                                    "fakesink name=out sync=false"
                                  : "fakesink name=out sync=false";
  LaunchedPipeline p(TwoReplayLanes(branch, sink));
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("o", "src");
  std::unique_ptr<LaneFault> hold;
  if (where != Where::kNone) {
    fault.element = p.element("b1");
    fault.gate = where == Where::kHeadHalfOut ? &out : nullptr;
    p.AddProbe("b1", "src", GST_PAD_PROBE_TYPE_BUFFER, GatedFault::Probe,
               &fault);
  }
  if (where == Where::kNotHead)
    hold = std::make_unique<LaneFault>(p.element("a0"),
                                       LaneFault::Kind::kBlock, 5);
  if (decode)
    p.AddProbe("out", "sink", GST_PAD_PROBE_TYPE_BUFFER, FrameSums::Probe,
               &sums);
  // A lane element's ERROR before PLAYING fails GstBin's state change
  // (docs/elements.md, "A lane that fails"): played again after it.
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  if (where != Where::kNone) {
    ASSERT_EQ(LaneFailedMessages(p, 1, 1), 1u) << "lane 1 did not fail";
    if (where == Where::kNotHead)
      EXPECT_LE(out.Buffers(), 5u) << "chunk 1 was not held behind the head";
    if (hold)
      hold->Release();
    EXPECT_TRUE(p.Play());
  }
  GstMessage *end = p.bus().WaitFor(
      [](GstMessage *m) { return GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS; },
      kLongWait);
  ASSERT_NE(end, nullptr) << "no EOS: the stream hangs; out: "
                          << out.Summary();
  for (int64_t i : out.BufferPtsIndices())
    run->out.push_back(Frame(i));
  if (where != Where::kNone) {
    EXPECT_EQ(LaneFailedField(p, 1, "lost"), 0u);
    EXPECT_GE(LaneFailedField(p, 1, "replayed"), 1u);
    EXPECT_EQ(LaneFailedMessages(p, 0, 0), 0u);
    GstStructure *stats = GetStats(p.element("f"));
    ASSERT_NE(stats, nullptr);
    const GstStructure *l1 = StatsLaneById(stats, 1);
    ASSERT_NE(l1, nullptr);
    EXPECT_STREQ(gst_structure_get_string(l1, "state"), "failed");
    EXPECT_GE(StatsU64(l1, "handed-over"), 1u) << "the chunk it failed in";
    EXPECT_EQ(SumLanesU64(stats, "replayed"),
              SumLanesU64(stats, "handed-over"));
    EXPECT_EQ(SumLanesU64(stats, "timed-out"), 0u);
    gst_structure_free(stats);
  }
  if (hold)
    hold->Release();
  EXPECT_TRUE(p.Stop());
  std::lock_guard<std::mutex> lk(sums.mutex);
  run->decoded = sums.md5;
  run->decoded_frames = sums.frames;
}

// Every frame once, in order (PTS).
void ExpectEveryFrameOnce(const std::vector<int64_t>& got) {
  EXPECT_TRUE(IsSequence(got, 0, kFrames));
  EXPECT_EQ(got.size(), static_cast<size_t>(kFrames));
}

}  // namespace

TEST(ChunkReplay, IdentityChunkBehindTheHeadGoesAgainWhole) {
  Outcome run;
  PlayFailing("identity", Where::kNotHead, false, &run);
  ExpectEveryFrameOnce(run.out);
}

TEST(ChunkReplay, IdentityHeadChunkHalfOutIsNotSentTwice) {
  Outcome run;
  PlayFailing("identity", Where::kHeadHalfOut, false, &run);
  ExpectEveryFrameOnce(run.out);
}

// Behind a queue the error shows at the drain, or as an EOS the queue
// sends itself after posting its error: the chunk goes again all the same.
TEST(ChunkReplay, AnErrorBehindAQueueLosesNothing) {
  for (Where where : {Where::kNotHead, Where::kHeadHalfOut}) {
    Outcome run;
    PlayFailing("queue", where, false, &run);
    ExpectEveryFrameOnce(run.out);
  }
}

class ChunkReplayX264 : public ::testing::TestWithParam<Where> {};

// x264enc threads=1 encodes a chunk to the same bytes on either lane (each
// chunk starts from the branch's reset): the failing lane's chunk, sent
// again (and spliced after the outputs that had left), decodes to the same
// frames as a run without the failure.
TEST_P(ChunkReplayX264, DecodesToTheSameFramesAsWithoutTheFailure) {
  for (const char *f : {"x264enc", "h264parse", "avdec_h264"})
    if (!HasFactory(f))
      GTEST_SKIP() << f << " is not installed";
  const std::string enc =
      "x264enc threads=1 speed-preset=ultrafast key-int-max=1000"
      " ! video/x-h264,stream-format=byte-stream";
  Outcome reference, failing;
  PlayFailing(enc, Where::kNone, true, &reference);
  ASSERT_EQ(reference.decoded.size(), static_cast<size_t>(kFrames));
  PlayFailing(enc, GetParam(), true, &failing);
  ExpectEveryFrameOnce(failing.out);
  EXPECT_EQ(failing.decoded_frames, static_cast<size_t>(kFrames));
  int differ = 0;
  for (const auto& [pts, md5] : reference.decoded) {
    auto it = failing.decoded.find(pts);
    if ((it == failing.decoded.end() || it->second != md5) && differ++ < 3)
      ADD_FAILURE() << "frame " << pts << " decodes differently";
  }
  EXPECT_EQ(differ, 0);
}

INSTANTIATE_TEST_SUITE_P(Where, ChunkReplayX264,
                         ::testing::Values(Where::kNotHead,
                                           Where::kHeadHalfOut),
                         [](const auto& info) {
                           return std::string(info.param == Where::kNotHead
                                                  ? "ChunkBehindTheHead"
                                                  : "HeadChunkHalfOut");
                         });

namespace {

// A TAG event ahead of every 10th frame from the source, as h264parse's
// bitrate tags come mid-stream.
GstPadProbeReturn TagEveryChunk(GstPad *pad, GstPadProbeInfo *info,
                                gpointer) {
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  const int64_t frame = PtsIndex(GST_BUFFER_PTS(buffer));
  if (frame > 0 && frame % 10 == 5) {
    GstTagList *tags = gst_tag_list_new(GST_TAG_BITRATE, guint(frame), nullptr);
    gst_pad_push_event(pad, gst_event_new_tag(tags));
  }
  return GST_PAD_PROBE_OK;
}

}  // namespace

namespace {

// on-stall=replay, a non-live source that runs ahead: lane 0 blocks for good
// in its first chunk while several whole chunks pile up behind it, and lane
// 1 passes the TAG events that came after them. When lane 0 is failed for
// its stall, each chunk it held goes to lane 1 (a TAG changes nothing a
// chunk is made of, and gpufanin places it by its position): every frame
// once, in order, and none counted lost.
void PlayWithLane0Stalling(int kAll) {
  LaunchedPipeline p(
      "videotestsrc name=src num-buffers=" + std::to_string(kAll) +
      " ! video/x-raw,format=I420,width=64,height=64,framerate=1000/1"
      " ! gpufanout name=f devices=cpu:2 policy=round-robin chunk=frames"
      " chunk-frames=10 on-stall=replay"
      "  gpufanin name=m stall-timeout=1000000000 ! identity name=o"
      " ! fakesink sync=false"
      "  f.src_0 ! identity name=a0 ! m.sink_0"
      "  f.src_1 ! identity name=a1 ! m.sink_1");
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("o", "src");
  p.AddProbe("src", "src", GST_PAD_PROBE_TYPE_BUFFER, TagEveryChunk, nullptr);
  LaneFault hold(p.element("a0"), LaneFault::Kind::kBlock, 5);
  // its preroll waits for lane 0's stall
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_EQ(LaneFailedMessages(p, 0, 1), 1u) << "lane 0 did not fail";
  GstMessage *end = p.bus().WaitFor(
      [](GstMessage *m) { return GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS; },
      kLongWait);
  ASSERT_NE(end, nullptr) << "no EOS: the stream hangs; out: "
                          << out.Summary();
  EXPECT_EQ(LaneFailedField(p, 0, "lost"), 0u);
  // at least the chunk it blocked in (how many more piled up behind it
  // within the stall depends on the machine's speed)
  EXPECT_GE(LaneFailedField(p, 0, "replayed"), 10u);
  const std::vector<int64_t> got = out.BufferPtsIndices();
  EXPECT_TRUE(IsSequence(got, 0, kAll));
  EXPECT_EQ(got.size(), static_cast<size_t>(kAll));
  hold.Release();
  EXPECT_TRUE(p.Stop());
}

}  // namespace

TEST(ChunkReplay, EveryChunkQueuedOnAStalledLaneGoesAgainPastTags) {
  PlayWithLane0Stalling(200);
}

// The stream's end: lane 1 has its EOS queued (and took every chunk of its
// own) long before lane 0 is failed for its stall. It holds its EOS back
// while chunks may still be sent again, so lane 0's chunks still go there.
TEST(ChunkReplay, ALaneFailingAfterTheInputEndedLosesNoChunk) {
  PlayWithLane0Stalling(40);
}
