// SPDX-License-Identifier: LGPL-2.1-or-later
// Several input streams as people run them: non-live sources straight into
// default sinks, no queue added. Each src_k of gpufanin has its own
// streaming thread, so a sink that prerolls (or blocks for good) holds only
// its own stream (docs/elements.md, "Several input streams"). Assertions are
// on counts, order and messages; the deadlines only catch hangs.
#include <atomic>
#include <string>
#include <vector>

#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

constexpr int kFps = 300;
constexpr const char *kCapsFmt =
    "video/x-raw,format=GRAY8,width=8,height=8,framerate=%d/1";

std::string Caps() {
  gchar *c = g_strdup_printf(kCapsFmt, kFps);
  std::string s(c);
  g_free(c);
  return s;
}

// The frame's index from its PTS (videotestsrc: i / kFps seconds).
int64_t FrameIndex(int64_t pts_index) {
  // PtsIndex counts kFrame (1 ms) steps; round to the nearest frame
  return (pts_index * kFps + 500) / 1000;
}

// Three streams of `frames[k]` frames over two lanes of unequal speed
// (lane 0 sleeps 1 ms a frame), each src_k into `sink` (+ a queue first
// when `queues`).
std::string Description(const std::vector<int>& frames, const std::string& sink,
                        bool queues) {
  std::string d =
      "gpufanout name=f devices=cpu:2 gpufanin name=m "
      "f.src_0 ! identity sleep-time=1000 ! m.sink_0 "
      "f.src_1 ! identity ! m.sink_1 ";
  for (size_t k = 0; k < frames.size(); k++) {
    const std::string i = std::to_string(k);
    d += "videotestsrc name=src" + i + " num-buffers=" +
         std::to_string(frames[k]) + " ! " + Caps() + " ! f.sink_" + i + " ";
    d += "m.src_" + i + " ! " + (queues ? "queue ! " : "") + sink +
         " name=out" + i + " ";
  }
  return d;
}

// Every frame of a stream once, in order, from `first`, then its EOS.
::testing::AssertionResult Complete(RecordLog& log, int first, int frames) {
  std::vector<int64_t> got;
  for (int64_t p : log.BufferPtsIndices())
    got.push_back(FrameIndex(p));
  std::vector<int64_t> want;
  for (int i = first; i < frames; i++)
    want.push_back(i);
  if (got != want)
    return ::testing::AssertionFailure()
           << got.size() << " frames, not " << want.size() << " in order: "
           << log.Summary();
  if (log.Events(GST_EVENT_EOS) != 1)
    return ::testing::AssertionFailure() << "no EOS: " << log.Summary();
  return ::testing::AssertionSuccess();
}

struct StreamsRun {
  explicit StreamsRun(const std::vector<int>& f, const std::string& sink,
               bool queues = false)
      : frames(f), p(Description(f, sink, queues)) {
    for (size_t k = 0; k < frames.size(); k++) {
      const std::string i = std::to_string(k);
      logs.push_back(&p.Record(("out" + i).c_str(), "sink"));
      sources.push_back(&p.Record(("src" + i).c_str(), "src"));
    }
  }
  std::vector<int> frames;
  LaunchedPipeline p;
  std::vector<RecordLog *> logs;     // what each stream's sink got
  std::vector<RecordLog *> sources;  // what each source sent
};

class NonLiveStreams : public ::testing::TestWithParam<bool> {};

TEST_P(NonLiveStreams, ReachDefaultSinksWithoutQueues) {
  const bool sync = GetParam();
  StreamsRun r({300, 900, 300},
        std::string("fakesink sync=") + (sync ? "true" : "false"));
  ASSERT_TRUE(r.p.ok());
  ASSERT_TRUE(r.p.PlayToEos());
  for (size_t k = 0; k < r.frames.size(); k++)
    EXPECT_TRUE(Complete(*r.logs[k], 0, r.frames[k])) << "stream " << k;
  EXPECT_TRUE(r.p.Stop());
}

INSTANTIATE_TEST_SUITE_P(Sync, NonLiveStreams, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "SyncTrue" : "SyncFalse";
                         });

// A flushing seek on the pipeline, mid-stream: every stream goes on from
// the seek position, complete and in order.
TEST(NonLiveStreamsSeek, AFlushingSeekMidStreamDeliversEachStreamFromThere) {
  StreamsRun r({300, 900, 300}, "fakesink sync=true");
  ASSERT_TRUE(r.p.ok());
  ASSERT_TRUE(r.p.Play());
  ASSERT_TRUE(r.logs[1]->WaitBuffers(30, kLongWait)) << r.logs[1]->Summary();
  constexpr int kSeekFrame = 150;
  ASSERT_TRUE(gst_element_seek_simple(
      r.p.get(), GST_FORMAT_TIME,
      static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_ACCURATE),
      kSeekFrame * GST_SECOND / kFps));
  GstMessage *m = r.p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr) << "no EOS nor ERROR after the seek: a hang";
  ASSERT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_EOS) << BusLog::ErrorText(m);
  // what came after the stream's last FLUSH_STOP (basesrc's num-buffers
  // counts on across a seek: the source's own record says how many)
  auto after_flush = [](RecordLog& log, bool *flushed, size_t *eos) {
    std::vector<int64_t> after;
    *flushed = false;
    *eos = 0;
    for (const Entry& e : log.Snapshot()) {
      if (e.type() == GST_EVENT_FLUSH_STOP) {
        *flushed = true;
        after.clear();
        *eos = 0;
      } else if (e.is_buffer) {
        after.push_back(FrameIndex(e.pts_index));
      } else if (e.type() == GST_EVENT_EOS) {
        (*eos)++;
      }
    }
    return after;
  };
  for (size_t k = 0; k < r.frames.size(); k++) {
    bool flushed, src_flushed;
    size_t eos, src_eos;
    const std::vector<int64_t> after = after_flush(*r.logs[k], &flushed, &eos);
    const std::vector<int64_t> sent =
        after_flush(*r.sources[k], &src_flushed, &src_eos);
    EXPECT_TRUE(flushed) << "stream " << k << ": " << r.logs[k]->Summary();
    ASSERT_FALSE(sent.empty()) << "stream " << k;
    EXPECT_EQ(sent.front(), kSeekFrame) << "stream " << k;
    EXPECT_EQ(after, sent) << "stream " << k << ": " << after.size()
                           << " frames after the flush of " << sent.size();
    EXPECT_EQ(eos, 1u) << "stream " << k;
  }
  EXPECT_TRUE(r.p.Stop());
}

// Blocks every buffer after the first `pass` for good (until the pad
// flushes at the stop).
GstPadProbeReturn BlockAfter(GstPad *, GstPadProbeInfo *, gpointer data) {
  auto *left = static_cast<std::atomic<int> *>(data);
  return left->fetch_sub(1) > 0 ? GST_PAD_PROBE_PASS : GST_PAD_PROBE_OK;
}

class ABlockedSink : public ::testing::TestWithParam<bool> {};

// One stream's sink blocked for good holds back no other stream.
TEST_P(ABlockedSink, LeavesTheOtherStreamsComplete) {
  const bool queues = GetParam();
  StreamsRun r({300, 300, 300}, "fakesink sync=false", queues);
  ASSERT_TRUE(r.p.ok());
  std::atomic<int> left{50};
  r.p.AddProbe("out1", "sink",
               static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BLOCK |
                                            GST_PAD_PROBE_TYPE_BUFFER),
               BlockAfter, &left);
  // PAUSED is reached (stream 1 prerolled on its first frame)
  ASSERT_TRUE(r.p.Play());
  EXPECT_TRUE(r.logs[0]->WaitEvents(GST_EVENT_EOS, 1, kLongWait));
  EXPECT_TRUE(r.logs[2]->WaitEvents(GST_EVENT_EOS, 1, kLongWait));
  EXPECT_TRUE(Complete(*r.logs[0], 0, 300));
  EXPECT_TRUE(Complete(*r.logs[2], 0, 300));
  EXPECT_TRUE(r.p.Stop());  // the stop flushes the blocked pad
}

INSTANTIATE_TEST_SUITE_P(Queues, ABlockedSink, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "WithQueues" : "WithoutQueues";
                         });

// Many runs of three 1,000-frame streams with queues: none hangs (a run that
// hung at preroll once in a few before each src_k had its own thread).
TEST(NonLiveStreamsRepeated, FiftyRunsWithQueuesNeverHang) {
  for (int run = 0; run < 50; run++) {
    StreamsRun r({1000, 1000, 1000}, "fakesink sync=false", true);
    ASSERT_TRUE(r.p.ok());
    ASSERT_TRUE(r.p.PlayToEos()) << "run " << run;
    for (size_t k = 0; k < r.frames.size(); k++)
      ASSERT_TRUE(Complete(*r.logs[k], 0, 1000))
          << "run " << run << ", stream " << k;
    ASSERT_TRUE(r.p.Stop());
  }
}

}  // namespace
