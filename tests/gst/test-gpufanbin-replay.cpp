// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanbin's replay (issue 12, items 2 and 3): the frames a failed or
// stalled lane held are sent again to the others and leave once, in order,
// with their own caps; markers prove the replayed frames a lane dropped; a
// bad frame is given up after two lanes; on-stall=skip still gives a blocked
// frame up; a flushing seek passes a stuck failed lane.
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

namespace {

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
