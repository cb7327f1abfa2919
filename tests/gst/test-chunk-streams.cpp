// SPDX-License-Identifier: LGPL-2.1-or-later
// Chunk mode with several input streams: gpufanout chunk=keyframes with
// sink_0..2 (H.264 streams of different lengths, GOP sizes and sizes)
// sharing two transcoding lanes (avdec_h264 ! x264enc), gpufanin src_0..2.
// Each stream is cut into its own GOP chunks, a lane takes one chunk at a
// time from any stream (with that stream's caps), and each src_k puts out
// its own stream's frames: all of them, in order, with their timestamps,
// an IDR at every chunk start (the lanes' encoders make one nowhere else),
// then EOS. Assertions are on counts, order and keyframes, never on timings.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

// What passes a pad: each buffer's PTS and whether it is an IDR, the EOS.
struct Frames {
  std::mutex mutex;
  std::condition_variable cond;  // a buffer or EOS passed
  std::vector<GstClockTime> pts;
  std::vector<GstClockTime> dts;
  std::vector<bool> idr;
  bool eos = false;
  std::vector<int> widths;  // of each caps event
  int discont = 0;          // buffers flagged DISCONT (a lane: chunk starts)
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<Frames *>(user_data);
    std::lock_guard<std::mutex> lk(self->mutex);
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
      GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
      self->pts.push_back(GST_BUFFER_PTS(buffer));
      self->dts.push_back(GST_BUFFER_DTS(buffer));
      self->idr.push_back(HasH264Nal(buffer, 5));
      self->discont += GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT);
      self->cond.notify_all();
      return GST_PAD_PROBE_OK;
    }
    GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) == GST_EVENT_EOS) {
      self->eos = true;
      self->cond.notify_all();
    } else if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      GstCaps *caps;
      gst_event_parse_caps(event, &caps);
      int width = 0;
      gst_structure_get_int(gst_caps_get_structure(caps, 0), "width", &width);
      self->widths.push_back(width);
    }
    return GST_PAD_PROBE_OK;
  }
};

// The source encoder's timestamps start at 1000 hours (x264enc's minimum
// PTS, with a segment to match); demuxed files start at 0. Moved there, so
// that the lanes' encoders restart theirs at each chunk as they would for a
// file.
constexpr GstClockTime kEncoderStart = 1000 * 3600 * GST_SECOND;
GstPadProbeReturn FromZero(GstPad *, GstPadProbeInfo *info, gpointer) {
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer *buffer =
        gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
    if (GST_BUFFER_PTS(buffer) >= kEncoderStart)
      GST_BUFFER_PTS(buffer) -= kEncoderStart;
    if (GST_BUFFER_DTS_IS_VALID(buffer) &&
        GST_BUFFER_DTS(buffer) >= kEncoderStart)
      GST_BUFFER_DTS(buffer) -= kEncoderStart;
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
    return GST_PAD_PROBE_OK;
  }
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
  if (GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT) {
    GstSegment segment;
    gst_segment_init(&segment, GST_FORMAT_TIME);
    gst_event_unref(event);
    GST_PAD_PROBE_INFO_DATA(info) = gst_event_new_segment(&segment);
  }
  return GST_PAD_PROBE_OK;
}

constexpr GstPadProbeType kWatch = static_cast<GstPadProbeType>(
    GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM);

// Where chunk=keyframes cuts a stream whose IDRs are at `idr`: at its
// first frame, then at the first IDR at least `chunk_frames` after the
// chunk's start.
std::vector<bool> ChunkStarts(const std::vector<bool>& idr,
                              size_t chunk_frames) {
  std::vector<bool> starts(idr.size(), false);
  size_t start = 0;
  for (size_t i = 0; i < idr.size(); ++i) {
    if (i == 0 || (i - start >= chunk_frames && idr[i])) {
      starts[i] = true;
      start = i;
    }
  }
  return starts;
}

struct Stream {
  int frames;
  int gop;  // the source encoder's key-int-max
  int width;
  int height;
};

std::string SourceOf(int k, const Stream& s) {
  return "videotestsrc name=src_" + std::to_string(k) +
         " num-buffers=" + std::to_string(s.frames) +
         " ! video/x-raw,format=I420,width=" + std::to_string(s.width) +
         ",height=" + std::to_string(s.height) +
         ",framerate=30/1 ! x264enc speed-preset=ultrafast bframes=0"
         " threads=1 key-int-max=" +
         std::to_string(s.gop) +
         " ! h264parse ! video/x-h264,stream-format=byte-stream,alignment=au"
         " ! identity name=in_" +
         std::to_string(k) + " ! f.sink_" + std::to_string(k) + "  m.src_" +
         std::to_string(k) + " ! fakesink name=out_" + std::to_string(k) +
         " sync=false  ";
}

// A lane: a GOP is decoded and encoded again (an IDR only at a chunk's
// start: every chunk restarts the encoder).
std::string Lane(int d, bool queue, int bframes = 0) {
  return "f.src_" + std::to_string(d) + " ! " + (queue ? "queue ! " : "") +
         "avdec_h264 name=dec_" + std::to_string(d) +
         " ! x264enc speed-preset=ultrafast threads=1 bframes=" +
         std::to_string(bframes) +
         " key-int-max=100000 ! video/x-h264,stream-format=byte-stream"
         " ! m.sink_" +
         std::to_string(d) + "  ";
}

// The first element these tests run that is not installed, or null.
const char *MissingElement() {
  for (const char *f : {"x264enc", "avdec_h264", "h264parse"})
    if (!HasFactory(f))
      return f;
  return nullptr;
}

// gpufanout chunk=keyframes (and `props`) on two CPU lanes `lanes`, the
// streams on sink_0.. and src_0..
std::string Launch(const std::string& props, size_t chunk_frames,
                   const std::string& lanes,
                   const std::vector<Stream>& streams) {
  std::string launch = "gpufanout name=f devices=cpu:2 chunk=keyframes " +
                       props + " chunk-frames=" + std::to_string(chunk_frames) +
                       "  gpufanin name=m stall-timeout=3600000000000  " +
                       lanes;
  for (size_t k = 0; k < streams.size(); ++k)
    launch += SourceOf(static_cast<int>(k), streams[k]);
  return launch;
}

// Each stream k's input (from 0, as a file's) and output: in[k], out[k].
void WatchStreams(LaunchedPipeline& p, std::vector<Frames>& in,
                  std::vector<Frames>& out) {
  for (size_t k = 0; k < in.size(); ++k) {
    const std::string in_name = "in_" + std::to_string(k);
    const std::string out_name = "out_" + std::to_string(k);
    p.AddProbe(in_name.c_str(), "sink", kWatch, &FromZero, nullptr);
    p.AddProbe(in_name.c_str(), "src", kWatch, &Frames::Probe, &in[k]);
    p.AddProbe(out_name.c_str(), "sink", kWatch, &Frames::Probe, &out[k]);
  }
}

// Returns the stream's chunks.
int CheckStream(int k, const Stream& s, Frames& in, Frames& out,
                size_t chunk_frames) {
  std::lock_guard<std::mutex> li(in.mutex);
  std::lock_guard<std::mutex> lo(out.mutex);
  SCOPED_TRACE("stream " + std::to_string(k));
  EXPECT_EQ(in.pts.size(), static_cast<size_t>(s.frames));
  EXPECT_EQ(out.pts.size(), in.pts.size());
  if (out.pts.size() != in.pts.size())
    return 0;
  EXPECT_TRUE(out.eos);
  // the stream's own caps (what the lanes made of its frames), whichever
  // lane's branch had other streams' before
  EXPECT_FALSE(out.widths.empty());
  for (int width : out.widths)
    EXPECT_EQ(width, s.width);
  const std::vector<bool> starts = ChunkStarts(in.idr, chunk_frames);
  int chunks = 0;
  for (size_t i = 0; i < out.pts.size(); ++i) {
    // its own frames, in order, in its own segment's times
    EXPECT_EQ(out.pts[i], in.pts[i]) << "frame " << i;
    if (i > 0) {
      EXPECT_GT(out.pts[i], out.pts[i - 1]) << "frame " << i;
    }
    EXPECT_EQ(out.idr[i], starts[i]) << "frame " << i;
    chunks += starts[i];
  }
  // several chunks per stream, or the lanes had nothing to share
  EXPECT_GE(chunks, 3);
  return chunks;
}

}  // namespace

// Three H.264 streams of different lengths, GOPs and frame sizes (so their
// chunks' caps differ) on two shared lanes, one with a queue: each src_k
// gets its stream's frames, whole and in order, an IDR at each chunk start.
TEST(ChunkStreams, StreamsAreCutIntoTheirOwnChunksOnSharedLanes) {
  if (const char *missing = MissingElement())
    GTEST_SKIP() << missing << " is not installed";
  const std::vector<Stream> streams = {
      {90, 10, 64, 64}, {60, 15, 96, 64}, {42, 7, 64, 48}};
  constexpr size_t kChunkFrames = 6;
  // what the probes write into outlives the pipeline: an assertion that
  // returns early leaves its streaming threads running until it is gone
  std::vector<Frames> in(streams.size()), out(streams.size());
  Frames lanes[2];
  // round-robin: every lane gets chunks (a lane being filled is skipped)
  LaunchedPipeline p(Launch("policy=round-robin", kChunkFrames,
                            Lane(0, true) + Lane(1, false), streams));
  ASSERT_TRUE(p.ok());
  WatchStreams(p, in, out);
  p.AddProbe("dec_0", "sink", kWatch, &Frames::Probe, &lanes[0]);
  p.AddProbe("dec_1", "sink", kWatch, &Frames::Probe, &lanes[1]);
  ASSERT_TRUE(p.PlayToEos());
  int chunks = 0;
  for (size_t k = 0; k < streams.size(); ++k)
    chunks += CheckStream(static_cast<int>(k), streams[k], in[k], out[k],
                          kChunkFrames);
  // each chunk went whole to one lane (a DISCONT first), and both lanes
  // took some
  std::lock_guard<std::mutex> l0(lanes[0].mutex);
  std::lock_guard<std::mutex> l1(lanes[1].mutex);
  EXPECT_EQ(lanes[0].discont + lanes[1].discont, chunks);
  EXPECT_GT(lanes[0].discont, 0);
  EXPECT_GT(lanes[1].discont, 0);
}

// One stream on sink_0 alone in chunk mode: its src_0 gets it (the
// several-streams path with one stream), and the single-stream properties
// hold.
TEST(ChunkStreams, OneStreamOnASinkPadOfItsOwn) {
  if (const char *missing = MissingElement())
    GTEST_SKIP() << missing << " is not installed";
  const Stream s{40, 8, 64, 64};
  constexpr size_t kChunkFrames = 8;
  Frames in, out;  // outlive the pipeline (its threads write into them)
  LaunchedPipeline p(
      Launch("", kChunkFrames, Lane(0, true) + Lane(1, true), {s}));
  ASSERT_TRUE(p.ok());
  p.AddProbe("in_0", "sink", kWatch, &FromZero, nullptr);
  p.AddProbe("in_0", "src", kWatch, &Frames::Probe, &in);
  p.AddProbe("out_0", "sink", kWatch, &Frames::Probe, &out);
  ASSERT_TRUE(p.PlayToEos());
  CheckStream(0, s, in, out, kChunkFrames);
}

// Lanes whose encoders reorder (B-frames) and so restart their timestamps
// at each chunk (GstVideoEncoder rebases a new stream onto its minimum PTS):
// each src_k's frames are its own, in its segment's times (the same PTS
// as its input's), decode timestamps never go back, an IDR at every chunk
// start.
TEST(ChunkStreams, ReorderingLanesKeepEachStreamsTimes) {
  if (const char *missing = MissingElement())
    GTEST_SKIP() << missing << " is not installed";
  const std::vector<Stream> streams = {{48, 8, 64, 64}, {30, 10, 96, 64}};
  constexpr size_t kChunkFrames = 8;
  // outlive the pipeline (its threads write into them)
  std::vector<Frames> in(streams.size()), out(streams.size());
  LaunchedPipeline p(
      Launch("", kChunkFrames, Lane(0, true, 2) + Lane(1, false, 2), streams));
  ASSERT_TRUE(p.ok());
  WatchStreams(p, in, out);
  ASSERT_TRUE(p.PlayToEos());
  for (size_t k = 0; k < streams.size(); ++k) {
    SCOPED_TRACE("stream " + std::to_string(k));
    std::lock_guard<std::mutex> li(in[k].mutex);
    std::lock_guard<std::mutex> lo(out[k].mutex);
    ASSERT_EQ(out[k].pts.size(), in[k].pts.size());
    EXPECT_TRUE(out[k].eos);
    std::vector<GstClockTime> sorted = out[k].pts;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, in[k].pts);
    const std::vector<bool> starts = ChunkStarts(in[k].idr, kChunkFrames);
    for (size_t i = 0; i < out[k].pts.size(); ++i) {
      // chunks keep their length: a chunk's first output is its IDR
      EXPECT_EQ(out[k].idr[i], starts[i]) << "output " << i;
      // (before the stream's start, a B-frame stream's first decode times
      // are unset: they would lie before its segment)
      if (i > 0 && GST_CLOCK_TIME_IS_VALID(out[k].dts[i - 1])) {
        EXPECT_GT(out[k].dts[i], out[k].dts[i - 1]) << "output " << i;
      }
      if (i >= 2) {
        EXPECT_TRUE(GST_CLOCK_TIME_IS_VALID(out[k].dts[i])) << "output " << i;
      }
    }
  }
}

namespace {

// Stream 0's input: held at its `hold_at`-th frame (so that its seek comes
// mid-stream, however fast the machine) until the seek's FLUSH_START
// passes, which ends the hold (the seek waits for this thread).
struct HeldInput {
  std::mutex mutex;
  std::condition_variable cond;
  int hold_at = 0;
  int seen = 0;
  bool holding = false;
  bool flushing = false;
  bool stop = false;  // the held frame is refused (FLUSHING): its source stops
  // Whether the hold came (bounded).
  bool WaitHolding() {
    std::unique_lock<std::mutex> lk(mutex);
    return cond.wait_for(lk, kLongWait, [this] { return holding; });
  }
  // The held frame is refused and nothing is held any more.
  void Stop() {
    std::lock_guard<std::mutex> lk(mutex);
    stop = true;
    hold_at = 0;
    cond.notify_all();
  }
  // Stops the hold when the test ends (an assertion that failed included),
  // or the pipeline could not stop.
  struct Release {
    HeldInput& held;
    ~Release() { held.Stop(); }
  };
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<HeldInput *>(user_data);
    std::unique_lock<std::mutex> lk(self->mutex);
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
      if (++self->seen == self->hold_at) {
        self->holding = true;
        self->cond.notify_all();
        self->cond.wait(lk, [self] { return self->flushing || self->stop; });
        if (self->stop) {
          gst_buffer_unref(GST_PAD_PROBE_INFO_BUFFER(info));
          GST_PAD_PROBE_INFO_FLOW_RETURN(info) = GST_FLOW_FLUSHING;
          return GST_PAD_PROBE_HANDLED;
        }
      }
    } else if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) ==
               GST_EVENT_FLUSH_START) {
      self->flushing = true;
      self->cond.notify_all();
    }
    return GST_PAD_PROBE_OK;
  }
};

// What passes a sink after its last FLUSH_STOP.
struct AfterFlush {
  Frames frames;
  std::atomic<int> flush_stops{0};
  static GstPadProbeReturn Probe(GstPad *pad, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<AfterFlush *>(user_data);
    if (!(GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) &&
        GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) ==
            GST_EVENT_FLUSH_STOP) {
      std::lock_guard<std::mutex> lk(self->frames.mutex);
      self->flush_stops++;
      self->frames.pts.clear();
      self->frames.dts.clear();
      self->frames.idr.clear();
      return GST_PAD_PROBE_OK;
    }
    return Frames::Probe(pad, info, &self->frames);
  }
};

}  // namespace

// A flushing seek on one stream's source in the middle of it, while its
// chunks are in the lanes (its flush reaches sink_0 and src_0 alone):
// stream 0 plays its first second again, whole and in order, an IDR at each
// of its chunk starts; stream 1 is not disturbed; both end.
TEST(ChunkStreams, AFlushingSeekOnOneStreamLeavesTheOtherWhole) {
  if (const char *missing = MissingElement())
    GTEST_SKIP() << missing << " is not installed";
  const std::vector<Stream> streams = {{120, 10, 64, 64}, {60, 12, 96, 64}};
  constexpr size_t kChunkFrames = 10;
  HeldInput held;  // outlives the pipeline: its thread may wait in it
  held.hold_at = 45;
  AfterFlush out0;  // these too: its threads write into them
  Frames in1, out1;
  LaunchedPipeline p(
      Launch("", kChunkFrames, Lane(0, true) + Lane(1, false), streams));
  ASSERT_TRUE(p.ok());
  // a failed assertion ends the hold, or the pipeline could not stop
  HeldInput::Release release{held};
  const auto flushes =
      static_cast<GstPadProbeType>(kWatch | GST_PAD_PROBE_TYPE_EVENT_FLUSH);
  p.AddProbe("in_0", "sink", kWatch, &FromZero, nullptr);
  p.AddProbe("in_1", "sink", kWatch, &FromZero, nullptr);
  p.AddProbe("in_0", "src", flushes, &HeldInput::Probe, &held);
  p.AddProbe("out_0", "sink", flushes, &AfterFlush::Probe, &out0);
  p.AddProbe("in_1", "src", kWatch, &Frames::Probe, &in1);
  p.AddProbe("out_1", "sink", kWatch, &Frames::Probe, &out1);
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(held.WaitHolding());
  // Back to the start, 30 frames (3 chunks) to play. Sent to the source
  // itself: a seek from downstream of src_0 goes up the lanes' branches,
  // which refuse it while they are reset between two chunks (a moment that
  // no test can choose).
  constexpr int kAfterSeek = 30;
  ASSERT_TRUE(gst_element_seek(
      p.element("src_0"), 1.0, GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH,
      GST_SEEK_TYPE_SET, 0, GST_SEEK_TYPE_SET,
      gst_util_uint64_scale(kAfterSeek, GST_SECOND, 30)));
  GstMessage *msg = p.WaitEosOrError(kLongWait);
  ASSERT_NE(msg, nullptr);
  EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
  {
    Frames& after = out0.frames;
    std::lock_guard<std::mutex> la(after.mutex);
    EXPECT_EQ(out0.flush_stops.load(), 1);
    ASSERT_EQ(after.pts.size(), static_cast<size_t>(kAfterSeek));
    EXPECT_TRUE(after.eos);
    for (size_t i = 0; i < after.pts.size(); ++i) {
      EXPECT_EQ(after.pts[i], gst_util_uint64_scale(i, GST_SECOND, 30))
          << "frame " << i;
      // the source's encoder restarted at the seek: its IDRs, every 10
      EXPECT_EQ(after.idr[i], i % kChunkFrames == 0) << "frame " << i;
    }
  }
  CheckStream(1, streams[1], in1, out1, kChunkFrames);
}

// Stopped (READY) while stream 0's chunk is open on a lane (its source held
// in the middle of a chunk, stream 1 ended), then played again: the second
// run is whole (no lane stays taken by the first run's open chunk, and no
// error of the first run's stop is left on the bus).
TEST(ChunkStreams, StoppedWithAnOpenChunkThenAWholeRun) {
  if (const char *missing = MissingElement())
    GTEST_SKIP() << missing << " is not installed";
  const std::vector<Stream> streams = {{60, 10, 64, 64}, {50, 10, 96, 64}};
  constexpr size_t kChunkFrames = 10;
  HeldInput held;     // outlives the pipeline: its thread may wait in it
  held.hold_at = 16;  // frames 10..14 make the open chunk
  // these too: its threads write into them
  std::vector<Frames> in(streams.size()), out(streams.size());
  LaunchedPipeline p(
      Launch("", kChunkFrames, Lane(0, true) + Lane(1, false), streams));
  ASSERT_TRUE(p.ok());
  HeldInput::Release release{held};
  WatchStreams(p, in, out);
  p.AddProbe("in_0", "src", kWatch, &HeldInput::Probe, &held);
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(held.WaitHolding());
  {
    // stream 1 ended (its last chunk's lane may still be returning from
    // that chunk's drain: the stop comes under it, which is no failure)
    std::unique_lock<std::mutex> lk(out[1].mutex);
    ASSERT_TRUE(
        out[1].cond.wait_for(lk, kLongWait, [&] { return out[1].eos; }));
  }
  held.Stop();  // and the next run is not held
  ASSERT_TRUE(SetStateAndWait(p.get(), GST_STATE_READY));
  for (size_t k = 0; k < streams.size(); ++k) {
    std::lock_guard<std::mutex> li(in[k].mutex);
    std::lock_guard<std::mutex> lo(out[k].mutex);
    in[k].pts.clear(), in[k].dts.clear(), in[k].idr.clear();
    out[k].pts.clear(), out[k].dts.clear(), out[k].idr.clear();
    out[k].widths.clear();
    out[k].eos = false;
  }
  ASSERT_TRUE(p.PlayToEos());
  for (size_t k = 0; k < streams.size(); ++k)
    CheckStream(static_cast<int>(k), streams[k], in[k], out[k], kChunkFrames);
}
