// SPDX-License-Identifier: LGPL-2.1-or-later
// Flushing seeks in chunk mode with a sink that syncs to the clock (issue 24,
// case 3): an H.264 file (closed GOPs of 30) demuxed and decoded by two
// avdec_h264 lanes of gpufanout chunk=frames|keyframes, played to
// fakesink sync=true, one flushing KEY_UNIT seek while chunks are in the
// lanes. Counted by pad probes: every frame that entered gpufanout after the
// seek comes out of gpufanin once, in order, then one EOS, and no lane's EOS
// goes missing.
//
// A lane's thread must never be what the sink holds: gpufanin releases a
// chunk's output whole, a chunk's worth of frames at once, and a lane thread
// pushing them into a syncing sink was held for their duration in real time
// (its next chunk was then given up as stalled, and its EOS came after
// gpufanin had stopped waiting for it). ChunkSeekHeldSink checks that with a
// test clock that only the test moves: while the sink waits on it, every
// lane finishes its chunk (20 runs per mode, a parametrized test: the
// watchdog bounds each run, not the loop). ChunkSeekRealClock plays in real
// time with the default stall-timeout, as the pipeline did.
// Assertions are on counts and order; the deadlines only catch hangs.
#include <glib/gstdio.h>
#include <gst/check/gsttestclock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

constexpr const char *kHour = "3600000000000";
constexpr int kFrames = 300;
constexpr int kGop = 30;
// Real-time play (ChunkSeekRealClock) of the 240 frames after the seek takes
// 4 s: longer than the default stall-timeout (2 s), which the lanes' EOS
// used to miss by nearly as much as the output took.
constexpr int kFps = 60;
constexpr GstClockTime kFrameTime = GST_SECOND / kFps;
constexpr int kSeekFrame = 60;  // a keyframe
// A run takes a second or a few; this only catches a hang.
constexpr Duration kRunDeadline{60000};

// What passes a pad after the seek's FLUSH_STOP: buffer PTS and EOS events.
// (On gpufanout's sink and downstream of gpufanin, the only flush is the
// seek's: the chunks' resets stay between the two.)
struct AfterFlush {
  std::mutex mutex;
  bool flushed = false;
  std::vector<GstClockTime> pts;
  int eos = 0;

  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer user_data) {
    auto *self = static_cast<AfterFlush *>(user_data);
    std::lock_guard<std::mutex> lk(self->mutex);
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
      if (self->flushed)
        self->pts.push_back(GST_BUFFER_PTS(GST_PAD_PROBE_INFO_BUFFER(info)));
      return GST_PAD_PROBE_OK;
    }
    GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
      self->flushed = true;
      self->pts.clear();
      self->eos = 0;
    } else if (GST_EVENT_TYPE(event) == GST_EVENT_EOS && self->flushed) {
      self->eos++;
    }
    return GST_PAD_PROBE_OK;
  }
  void Watch(LaunchedPipeline& p, const char *element, const char *pad) {
    p.AddProbe(
        element, pad,
        static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                     GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                     GST_PAD_PROBE_TYPE_EVENT_FLUSH),
        &AfterFlush::Probe, this);
  }
};

bool Available(const char *name) {
  GstPluginFeature *f = gst_registry_lookup_feature(gst_registry_get(), name);
  if (!f)
    return false;
  gst_object_unref(f);
  return true;
}

// The file every test plays, made once per binary.
class ChunkSeekFile {
 public:
  static const std::string& Path() {
    static ChunkSeekFile file;
    return file.path_;
  }
  static const char *Missing() {
    for (const char *name :
         {"x264enc", "h264parse", "mp4mux", "qtdemux", "avdec_h264"})
      if (!Available(name))
        return name;
    return nullptr;
  }

 private:
  ChunkSeekFile() {
    gchar *name = nullptr;
    gint fd = g_file_open_tmp("gpufan-seek-XXXXXX.mp4", &name, nullptr);
    if (fd < 0)
      return;
    close(fd);
    // closed GOPs of exactly kGop (no scene cuts): chunk=frames with
    // chunk-frames=kGop cuts at the IDRs too
    LaunchedPipeline p(
        "videotestsrc pattern=ball num-buffers=" + std::to_string(kFrames) +
        " ! video/x-raw,format=I420,width=128,height=96,framerate=" +
        std::to_string(kFps) +
        "/1 ! x264enc speed-preset=superfast threads=1 bframes=2"
        " key-int-max=" +
        std::to_string(kGop) +
        " option-string=scenecut=0 ! h264parse ! mp4mux ! filesink"
        " location=" +
        name);
    if (p.ok() && p.PlayToEos())
      path_ = name;
    else
      g_unlink(name);
    g_free(name);
  }
  ~ChunkSeekFile() {
    if (!path_.empty())
      g_unlink(path_.c_str());
  }
  std::string path_;
};

// The pipeline: two decoder lanes, a syncing sink.
std::string Pipeline(const std::string& mode, const std::string& fanout_props,
                     const std::string& fanin_props) {
  const std::string lane = "avdec_h264 max-threads=1";
  return "filesrc location=" + ChunkSeekFile::Path() +
         " ! qtdemux ! h264parse ! gpufanout name=f devices=cpu:2 chunk=" +
         mode + " chunk-frames=" + std::to_string(kGop) + " " + fanout_props +
         "  gpufanin name=m " + fanin_props +
         " ! fakesink name=out sync=true  f.src_0 ! " + lane +
         " ! m.sink_0  f.src_1 ! " + lane + " ! m.sink_1";
}

// A flushing KEY_UNIT seek to kSeekFrame, under a bounded wait.
::testing::AssertionResult Seek(LaunchedPipeline& p) {
  Source runner;
  bool ok = false;
  if (!runner.Run(
          [&] {
            ok = gst_element_seek_simple(
                p.get(), GST_FORMAT_TIME,
                static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH |
                                          GST_SEEK_FLAG_KEY_UNIT),
                kSeekFrame * kFrameTime);
          },
          kRunDeadline, "flushing seek"))
    return ::testing::AssertionFailure() << "the seek hung";
  if (!ok)
    return ::testing::AssertionFailure() << "the seek was refused";
  return ::testing::AssertionSuccess();
}

// After the stream's end: everything that entered gpufanout after the seek
// came out once, in presentation order, then one EOS; no warning (a lane's
// EOS that did not come, a chunk given up).
void CheckAfterSeek(LaunchedPipeline& p, AfterFlush& in, AfterFlush& out) {
  GstMessage *end = p.WaitEosOrError(kRunDeadline);
  ASSERT_NE(end, nullptr) << "no EOS after the seek";
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_WARNING), 0u) << p.bus().ErrorsText();

  std::lock_guard<std::mutex> lk_in(in.mutex);
  std::lock_guard<std::mutex> lk_out(out.mutex);
  ASSERT_TRUE(in.flushed && out.flushed) << "the seek's flush did not pass";
  // the input in decode order, the output in presentation order
  std::vector<GstClockTime> expected = in.pts;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(in.pts.size(), static_cast<size_t>(kFrames - kSeekFrame))
      << "frames into gpufanout after the seek";
  EXPECT_EQ(out.pts.size(), in.pts.size())
      << "frames after the seek: in " << in.pts.size() << ", out "
      << out.pts.size();
  EXPECT_EQ(out.pts, expected) << "frames lost, repeated or out of order";
  EXPECT_EQ(out.eos, 1);
}

std::string ModeName(const ::testing::TestParamInfo<const char *>& info) {
  return info.param;
}

}  // namespace

// --------------------------------------------------- a held sink clock ---

class ChunkSeekHeldSink
    : public ::testing::TestWithParam<std::tuple<const char *, int>> {};

// The sink syncs to a test clock that stands still after the seek: it holds
// whichever thread pushes gpufanin's output in its clock wait for the
// seek's first frame. Meanwhile each lane drains the chunk it is on (its
// drain's EOS reaches gpufanin); a lane whose thread the sink held never
// would. Then the sink stops syncing, its wait is released, and the stream
// plays out.
TEST_P(ChunkSeekHeldSink, EveryLaneFinishesItsChunkWhileTheSinkWaits) {
  if (const char *missing = ChunkSeekFile::Missing())
    GTEST_SKIP() << missing << " is not installed";
  ASSERT_FALSE(ChunkSeekFile::Path().empty()) << "no input file";
  const std::string mode = std::get<0>(GetParam());
  // round-robin: the chunk after the head one is on the other lane
  LaunchedPipeline p(Pipeline(mode, "policy=round-robin",
                              std::string("stall-timeout=") + kHour));
  ASSERT_TRUE(p.ok());
  GstClock *clock = gst_test_clock_new();
  gst_pipeline_use_clock(GST_PIPELINE(p.get()), clock);
  struct Unref {
    GstClock *clock;
    ~Unref() { gst_object_unref(clock); }
  } unref{clock};
  AfterFlush in, out;
  in.Watch(p, "f", "sink");
  out.Watch(p, "out", "sink");
  RecordLog& played = p.Record("out", "sink");
  RecordLog& lane0 = p.Record("m", "sink_0");
  RecordLog& lane1 = p.Record("m", "sink_1");
  ASSERT_TRUE(p.Play());
  // Before the seek, one clock wait of the sink at a time: 20 frames played
  // and a chunk drained in each lane, so that both decoders have negotiated
  // (a decoder's first ALLOCATION query is serialized downstream: a sink
  // holding a push holds it too, whatever gpufanin does). Until then the
  // stream is far from its end: the sink waits again.
  while (played.Buffers() < 20 || lane0.Events(GST_EVENT_EOS) < 1 ||
         lane1.Events(GST_EVENT_EOS) < 1) {
    ASSERT_TRUE(gst_test_clock_timed_wait_for_multiple_pending_ids(
        GST_TEST_CLOCK(clock), 1, kRunDeadline.count(), nullptr))
        << "the sink does not wait on the clock: " << played.Summary(40);
    ASSERT_TRUE(gst_test_clock_crank(GST_TEST_CLOCK(clock)));
  }

  const size_t before0 = lane0.Events(GST_EVENT_EOS);
  const size_t before1 = lane1.Events(GST_EVENT_EOS);
  ASSERT_TRUE(Seek(p));
  // the clock stands still: the sink holds the push of the seek's first
  // frame (the wait of before the seek ended with its flush)
  ASSERT_TRUE(gst_test_clock_timed_wait_for_multiple_pending_ids(
      GST_TEST_CLOCK(clock), 1, kRunDeadline.count(), nullptr))
      << "the sink does not wait on the clock after the seek: "
      << played.Summary(40);
  EXPECT_TRUE(lane0.WaitEvents(GST_EVENT_EOS, before0 + 1))
      << "lane 0 did not finish its chunk while the sink waited";
  EXPECT_TRUE(lane1.WaitEvents(GST_EVENT_EOS, before1 + 1))
      << "lane 1 did not finish its chunk while the sink waited";
  // the rest plays without the clock, from the push the sink holds on
  g_object_set(p.element("out"), "sync", FALSE, nullptr);
  ASSERT_TRUE(gst_test_clock_crank(GST_TEST_CLOCK(clock)));
  CheckAfterSeek(p, in, out);
}

INSTANTIATE_TEST_SUITE_P(
    Runs, ChunkSeekHeldSink,
    ::testing::Combine(::testing::Values("frames", "keyframes"),
                       ::testing::Range(0, 20)),
    [](const ::testing::TestParamInfo<ChunkSeekHeldSink::ParamType>& info) {
      return std::string(std::get<0>(info.param)) + "_" +
             std::to_string(std::get<1>(info.param));
    });

// ------------------------------------------------------ the real clock ---

class ChunkSeekRealClock : public ::testing::TestWithParam<const char *> {};

// The case: real-time play after the seek (4 s) with gpufanin's
// default stall-timeout (2 s). The lanes' EOS come once their last chunks
// left the window, not once the sink played them.
TEST_P(ChunkSeekRealClock,
       ThePlayAfterTheSeekIsWholeWithTheDefaultStallTimeout) {
  if (const char *missing = ChunkSeekFile::Missing())
    GTEST_SKIP() << missing << " is not installed";
  ASSERT_FALSE(ChunkSeekFile::Path().empty()) << "no input file";
  LaunchedPipeline p(Pipeline(GetParam(), "", ""));
  ASSERT_TRUE(p.ok());
  AfterFlush in, out;
  in.Watch(p, "f", "sink");
  out.Watch(p, "out", "sink");
  RecordLog& played = p.Record("out", "sink");
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(played.WaitBuffers(10, kRunDeadline)) << played.Summary(40);
  ASSERT_TRUE(Seek(p));
  CheckAfterSeek(p, in, out);
}

INSTANTIATE_TEST_SUITE_P(Modes, ChunkSeekRealClock,
                         ::testing::Values("frames", "keyframes"), ModeName);
