// SPDX-License-Identifier: LGPL-2.1-or-later
// Replay with several input streams (issue 26, item 2): gpufanout's sink_%u
// pads, each with its own streaming thread, share the lanes; when a lane's
// branch fails (on-lane-error=replay) or stalls (on-stall=replay), the
// frames it held go to the other lanes, and every stream's frames leave its
// src_k exactly once, in order, with no ERROR and an EOS.
#include <memory>
#include <string>
#include <vector>

#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

constexpr guint kStreams = 3;

// kStreams non-live test sources on sink_k, `lanes` CPU lanes of
// `identity name=inject<i>`, gpufanin's src_k into fakesink out<k> (no
// preroll: gpufanin's output must not wait for a prerolled sink).
std::string StreamsPipeline(int frames, guint lanes,
                            const std::string& fanout_settings,
                            const std::string& fanin_settings) {
  std::string d = "gpufanout name=f devices=cpu policy=round-robin " +
                  fanout_settings + "  gpufanin name=m " + fanin_settings;
  for (guint i = 0; i < lanes; i++) {
    const std::string n = std::to_string(i);
    d += "  f.src_" + n + " ! identity name=inject" + n + " ! m.sink_" + n;
  }
  for (guint k = 0; k < kStreams; k++) {
    const std::string n = std::to_string(k);
    d += "  videotestsrc name=src" + n + " pattern=" + n +
         " num-buffers=" + std::to_string(frames) +
         " ! video/x-raw,format=GRAY8,width=16,height=16 ! f.sink_" + n +
         "  m.src_" + n + " ! fakesink name=out" + n +
         " sync=false async=false";
  }
  return d;
}

// Plays StreamsPipeline(frames, lanes, ...) to EOS with `kind` injected
// into lane `faulty` from frame `at` on (of any stream: every stream's
// frames are numbered from 0): each stream's frames leave its src_k once,
// in order; no ERROR; the faulty lane posts one gpufan-lane-failed message
// and loses nothing; what it handed over, the others replayed.
void ExpectEveryStreamWhole(int frames, guint lanes, guint faulty,
                            LaneFault::Kind kind, int64_t at,
                            const std::string& fanout_settings,
                            const std::string& fanin_settings = "") {
  LaunchedPipeline p(
      StreamsPipeline(frames, lanes, fanout_settings, fanin_settings));
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(gst_element_set_state(p.get(), GST_STATE_READY),
            GST_STATE_CHANGE_SUCCESS);
  const std::string inject = "inject" + std::to_string(faulty);
  LaneFault fault(p.element(inject.c_str()), kind, at);
  std::vector<RecordLog *> outs;
  for (guint k = 0; k < kStreams; k++) {
    const std::string n = std::to_string(k);
    p.Stamp(("src" + n).c_str(), "src");
    outs.push_back(&p.Record(("out" + n).c_str(), "sink"));
  }
  const bool eos = p.PlayToEos();
  EXPECT_TRUE(eos) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_GE(fault.struck(), at) << "the fault never struck";
  for (guint k = 0; k < kStreams; k++) {
    SCOPED_TRACE("stream " + std::to_string(k));
    EXPECT_TRUE(IsSequence(outs[k]->BufferIndices(), 0, frames))
        << outs[k]->Summary(40);
    EXPECT_EQ(outs[k]->Events(GST_EVENT_EOS), 1u);
  }
  EXPECT_EQ(LaneFailedMessages(p, faulty, 1), 1u);
  EXPECT_EQ(LaneFailedField(p, faulty, "lost"), 0u);
  GstStructure *stats = GetStats(p.element("f"));
  ASSERT_NE(stats, nullptr);
  const GstStructure *l = StatsLaneById(stats, faulty);
  ASSERT_NE(l, nullptr);
  EXPECT_STREQ(gst_structure_get_string(l, "state"), "failed");
  EXPECT_GE(StatsU64(l, "handed-over"), 1u) << "the frame it failed on";
  EXPECT_EQ(SumLanesU64(stats, "replayed"), SumLanesU64(stats, "handed-over"));
  EXPECT_EQ(SumLanesU64(stats, "timed-out"), 0u);
  gst_structure_free(stats);
  fault.Release();
  ASSERT_TRUE(p.Stop());
}

}  // namespace

// Three streams, three lanes: lane 1's branch fails at frame 300; the frames
// it held (of every stream) go to lanes 0 and 2.
TEST(StreamsReplay, ALaneThatFailsLosesNoFrameOfAnyStream) {
  ExpectEveryStreamWhole(1000, 3, 1, LaneFault::Kind::kSilentError, 300,
                         "on-lane-error=replay");
}

// Two lanes: the one left takes the failed lane's frames of every stream
// while the three streams' threads keep dispatching to it.
TEST(StreamsReplay, TheLastLaneTakesEveryStreamsFrames) {
  ExpectEveryStreamWhole(800, 2, 0, LaneFault::Kind::kSilentError, 300,
                         "on-lane-error=replay");
}

// The lane fails on the streams' last frames: the other lanes held their
// EOS back, and take its frames.
TEST(StreamsReplay, ALaneFailingAtTheEndLosesNoFrame) {
  ExpectEveryStreamWhole(400, 3, 2, LaneFault::Kind::kSilentError, 398,
                         "on-lane-error=replay");
}

// on-stall=replay: lane 1 blocks for good inside its push at frame 300; it
// fails after stall-timeout (1 s: the blocked lane's wait, not a bound on
// the healthy lanes' speed), and the frames it held of every stream go on
// elsewhere.
TEST(StreamsReplay, AStalledLaneLosesNoFrameOfAnyStream) {
  ExpectEveryStreamWhole(600, 3, 1, LaneFault::Kind::kBlock, 300,
                         "on-stall=replay", "stall-timeout=1000000000");
}
