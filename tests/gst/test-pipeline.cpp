// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanout ! branches ! gpufanin in real pipelines: the user-facing
// promises (order, EOS, statistics, errors) and scenarios 18, 20, 21, 25, 27
// and 28 of docs/testing.md. Delays are pseudo-random but seeded per buffer
// index, so every run asks the same of the elements; assertions are on
// order, counts and messages only, never on how long anything took.
#include <algorithm>
#include <functional>
#include <set>
#include <string>

#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

constexpr const char *kCaps =
    "video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1";

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// identity::handoff: sleep 0..200 µs, chosen by the buffer's index and seed.
void DelayHandoff(GstElement *, GstBuffer *buffer, gpointer seed) {
  const int64_t index = PtsIndex(GST_BUFFER_PTS(buffer));
  g_usleep(SplitMix64(static_cast<uint64_t>(index) ^ GPOINTER_TO_SIZE(seed)) %
           201);
}

// videotestsrc (indexed by a stamper) ! gpufanout ! <branch(i)> ! gpufanin !
// fakesink. Each branch must contain an element named b<i>. The fan-in's
// stall-timeout is out of reach: no test here is about it, and with the
// default (2 s) a frame that a loaded machine delays that long would be
// given up and missing from the output.
std::string FanPipeline(int buffers, int lanes, const std::string& policy,
                        const std::function<std::string(int)>& branch) {
  std::string d = "videotestsrc name=src pattern=black";
  if (buffers > 0)
    d += " num-buffers=" + std::to_string(buffers);
  d += std::string(" ! ") + kCaps + " ! gpufanout name=f policy=" + policy +
       "  gpufanin name=m stall-timeout=" + std::to_string(kNoStallTimeout) +
       " ! fakesink name=out sync=false";
  for (int i = 0; i < lanes; i++) {
    d += "  f.src_" + std::to_string(i) + " ! " + branch(i) + " ! m.sink_" +
         std::to_string(i);
  }
  return d;
}

std::string DelayedIdentity(int lane) {
  return "identity name=b" + std::to_string(lane) + " signal-handoffs=true";
}

void ConnectDelays(LaunchedPipeline& p, int lanes, uint64_t seed) {
  for (int i = 0; i < lanes; i++) {
    GstElement *b = p.element(("b" + std::to_string(i)).c_str());
    ASSERT_NE(b, nullptr);
    g_signal_connect(b, "handoff", G_CALLBACK(DelayHandoff),
                     GSIZE_TO_POINTER(static_cast<gsize>(seed * 131 + i)));
  }
}

// Waits for EOS (failing on ERROR) and returns the final gpufan-stats
// message (the fan-in posts it in the fan-out's name; nullptr with a
// failure if none).
GstMessage *RunToEos(LaunchedPipeline& p) {
  if (!p.PlayToEos())
    return nullptr;
  GstElement *f_el = p.element("f");
  GstMessage *stats = p.bus().WaitFor([f_el](GstMessage *msg) {
    gboolean final = FALSE;
    return BusLog::IsElementMessage(msg, "gpufan-stats") &&
           GST_MESSAGE_SRC(msg) == GST_OBJECT(f_el) &&
           gst_structure_get_boolean(gst_message_get_structure(msg), "final",
                                     &final) &&
           final;
  });
  EXPECT_NE(stats, nullptr) << "no final gpufan-stats message at EOS";
  return stats;
}

// Drops every n-th buffer passing a pad and remembers their indices.
struct DropEveryNth {
  explicit DropEveryNth(int n) : n(n) {}
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *info,
                                 gpointer data) {
    auto *self = static_cast<DropEveryNth *>(data);
    std::lock_guard<std::mutex> lock(self->mutex);
    if (++self->seen % self->n == 0) {
      self->dropped.insert(DataIndex(GST_PAD_PROBE_INFO_BUFFER(info)));
      return GST_PAD_PROBE_DROP;
    }
    return GST_PAD_PROBE_OK;
  }
  const int n;
  std::mutex mutex;
  int seen = 0;
  std::set<int64_t> dropped;
};

// Replaces each buffer by a new one without metas (what a branch that makes
// new buffers does to the fan-out's meta).
GstPadProbeReturn StripMetas(GstPad *, GstPadProbeInfo *info, gpointer) {
  GstBuffer *old = GST_PAD_PROBE_INFO_BUFFER(info);
  GST_PAD_PROBE_INFO_DATA(info) = CopyWithoutMetas(old);
  gst_buffer_unref(old);
  return GST_PAD_PROBE_OK;
}

}  // namespace

// ------------------------------------------------------------ order (18) ---

TEST(PipelineOrder, TenThousandBuffersOverFiveLanesWithRandomDelays) {
  constexpr int kBuffers = 10000;
  constexpr int kLanes = 5;
  LaunchedPipeline p(
      FanPipeline(kBuffers, kLanes, "adaptive", DelayedIdentity));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_NO_FATAL_FAILURE(ConnectDelays(p, kLanes, 18));
  GstMessage *stats = RunToEos(p);
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers)) << "data index";
  EXPECT_TRUE(IsSequence(out.BufferPtsIndices(), 0, kBuffers)) << "PTS";
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  ASSERT_NE(stats, nullptr);
  const GstStructure *s = gst_message_get_structure(stats);
  EXPECT_TRUE(HasStatsShape(s, kLanes));
  EXPECT_EQ(StatsU64(s, "dispatched"), static_cast<guint64>(kBuffers));
  EXPECT_EQ(StatsU64(s, "released"), static_cast<guint64>(kBuffers));
}

class PipelinePolicy : public ::testing::TestWithParam<const char *> {};

TEST_P(PipelinePolicy, PreservesOrderWithRandomDelays) {
  constexpr int kBuffers = 2000;
  constexpr int kLanes = 3;
  LaunchedPipeline p(
      FanPipeline(kBuffers, kLanes, GetParam(), DelayedIdentity));
  ASSERT_TRUE(p.ok());
  for (int i = 0; i < kLanes; i++) {
    GstPad *pad = gst_element_get_static_pad(
        p.element("f"), ("src_" + std::to_string(i)).c_str());
    ASSERT_NE(pad, nullptr);
    g_object_set(pad, "weight", static_cast<gdouble>(i + 1), nullptr);
    gst_object_unref(pad);
  }
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_NO_FATAL_FAILURE(ConnectDelays(p, kLanes, 7));
  GstMessage *stats = RunToEos(p);
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers));
  ASSERT_NE(stats, nullptr);
  const GstStructure *s = gst_message_get_structure(stats);
  EXPECT_STREQ(gst_structure_get_string(s, "policy"), GetParam());
  EXPECT_EQ(StatsU64(s, "released"), static_cast<guint64>(kBuffers));
  for (guint i = 0; i < StatsLaneCount(s); i++)
    EXPECT_GT(StatsU64(StatsLane(s, i), "dispatched"), 0u)
        << "lane " << i << " unused";
}

INSTANTIATE_TEST_SUITE_P(
    AllPolicies, PipelinePolicy,
    ::testing::Values("round-robin", "least-loaded", "weighted", "adaptive"),
    [](const ::testing::TestParamInfo<const char *>& info) {
      std::string name = info.param;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// ----------------------------------------------------- the issue's line ---

TEST(PipelineUser, IssueLaunchLineDeliversEveryFrameInOrderAndPostsStats) {
  constexpr int kBuffers = 300;
  LaunchedPipeline p(
      "videotestsrc num-buffers=300 ! video/x-raw,width=320,height=240 ! "
      "gpufanout name=f policy=adaptive  gpufanin name=m ! fakesink name=out "
      "f.src_0 ! identity sleep-time=2000 ! m.sink_0 "
      "f.src_1 ! identity sleep-time=4000 ! m.sink_1 "
      "f.src_2 ! identity sleep-time=8000 ! m.sink_2");
  ASSERT_TRUE(p.ok());
  // The line as the issue has it, but for the stall timeout (see FanPipeline).
  g_object_set(p.element("m"), "stall-timeout", kNoStallTimeout, nullptr);
  RecordLog& out = p.Record("out", "sink");
  GstMessage *stats = RunToEos(p);

  std::vector<int64_t> expected;
  for (int n = 0; n < kBuffers; n++)
    expected.push_back(PtsIndex(gst_util_uint64_scale_int(n, GST_SECOND, 30)));
  EXPECT_EQ(out.BufferPtsIndices(), expected)
      << "frames missing or out of order";
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);

  ASSERT_NE(stats, nullptr);
  const GstStructure *s = gst_message_get_structure(stats);
  EXPECT_TRUE(HasStatsShape(s, 3));
  EXPECT_EQ(SumLanesU64(s, "dispatched"), static_cast<guint64>(kBuffers));
  EXPECT_EQ(StatsU64(s, "released"), static_cast<guint64>(kBuffers));
  for (guint i = 0; i < StatsLaneCount(s); i++)
    EXPECT_GT(StatsU64(StatsLane(s, i), "dispatched"), 0u)
        << "lane " << i << " never ran";

  // gst-launch -m stops printing at EOS: the statistics must come first.
  std::vector<GstMessage *> all =
      p.bus().Matching([](GstMessage *) { return true; });
  auto pos = [&](GstMessage *m) {
    return std::find(all.begin(), all.end(), m) - all.begin();
  };
  GstMessage *eos = p.bus().WaitForType(GST_MESSAGE_EOS);
  EXPECT_LT(pos(stats), pos(eos))
      << "gpufan-stats was posted after the EOS message";
}

// ------------------------------------------------------------- statistics ---

namespace {

bool IsFinal(const GstStructure *s) {
  gboolean final = FALSE;
  return gst_structure_get_boolean(s, "final", &final) && final;
}

// Every gpufan-stats message of `p`, each from `source`, stats-interval's
// first and the one final message last; the final one's counts add up to
// `frames`, and its flat lane fields repeat the nested `lanes` array.
void ExpectStatsFromOneSource(LaunchedPipeline& p, GstElement *source,
                              guint64 frames, guint lanes) {
  std::vector<GstMessage *> all = p.bus().Matching([](GstMessage *m) {
    return BusLog::IsElementMessage(m, "gpufan-stats");
  });
  ASSERT_GE(all.size(), 2u) << "stats-interval posted none before the end";
  for (GstMessage *m : all)
    EXPECT_EQ(GST_MESSAGE_SRC(m), GST_OBJECT(source))
        << "gpufan-stats from " << GST_MESSAGE_SRC_NAME(m) << ", expected "
        << GST_OBJECT_NAME(source);
  size_t finals = 0;
  for (GstMessage *m : all)
    finals += IsFinal(gst_message_get_structure(m)) ? 1 : 0;
  EXPECT_EQ(finals, 1u) << "one final gpufan-stats message";
  const GstStructure *last = gst_message_get_structure(all.back());
  ASSERT_TRUE(IsFinal(last)) << "the final message is the last one";
  for (size_t i = 0; i + 1 < all.size(); i++) {
    const GstStructure *s = gst_message_get_structure(all[i]);
    EXPECT_LE(StatsU64(s, "dispatched"), frames) << "periodic message " << i;
    EXPECT_LE(StatsU64(s, "released"), StatsU64(s, "dispatched"));
  }

  ASSERT_TRUE(HasStatsShape(last, lanes));
  EXPECT_EQ(StatsU64(last, "dispatched"), frames);
  EXPECT_EQ(StatsU64(last, "released"), frames);
  guint in_flight = 1;
  EXPECT_TRUE(gst_structure_get_uint(last, "in-flight", &in_flight));
  EXPECT_EQ(in_flight, 0u);
  EXPECT_EQ(SumLanesU64(last, "dispatched"), frames);
  EXPECT_EQ(SumLanesU64(last, "completed") + SumLanesU64(last, "dropped") +
                SumLanesU64(last, "failed"),
            frames);
  EXPECT_EQ(SumLanesU64(last, "completed"), frames) << "nothing lost here";
  for (guint i = 0; i < lanes; i++) {
    const GstStructure *lane = StatsLane(last, i);
    guint id = 0;
    ASSERT_TRUE(gst_structure_get_uint(lane, "lane", &id));
    const std::string prefix = "lane" + std::to_string(id) + "-";
    for (const char *field : {"dispatched", "completed", "dropped", "failed"})
      EXPECT_EQ(StatsU64(last, (prefix + field).c_str()), StatsU64(lane, field))
          << prefix << field;
    EXPECT_STREQ(gst_structure_get_string(last, (prefix + "state").c_str()),
                 gst_structure_get_string(lane, "state"));
    EXPECT_NE(gst_structure_get_string(last, (prefix + "device").c_str()),
              nullptr);
  }

  // gst-launch -m stops printing at EOS: the final one comes before it.
  std::vector<GstMessage *> msgs =
      p.bus().Matching([](GstMessage *) { return true; });
  GstMessage *eos = p.bus().WaitForType(GST_MESSAGE_EOS);
  EXPECT_LT(std::find(msgs.begin(), msgs.end(), all.back()),
            std::find(msgs.begin(), msgs.end(), eos));
}

}  // namespace

TEST(PipelineStats, PeriodicAndFinalStatsComeFromTheFanoutAndAddUp) {
  constexpr int kBuffers = 120;
  constexpr int kLanes = 3;
  LaunchedPipeline p(
      FanPipeline(kBuffers, kLanes, "round-robin", DelayedIdentity));
  ASSERT_TRUE(p.ok());
  // 1 ms: the first buffer posts one (none was posted before), whatever the
  // machine's speed.
  g_object_set(p.element("f"), "stats-interval", 1u, nullptr);
  ASSERT_TRUE(p.PlayToEos());
  ExpectStatsFromOneSource(p, p.element("f"), kBuffers, kLanes);
}

TEST(PipelineStats, GpufanbinStatsComeFromItsFanout) {
  constexpr int kBuffers = 60;
  LaunchedPipeline p(std::string("videotestsrc num-buffers=") +
                     std::to_string(kBuffers) + " ! " + kCaps +
                     " ! gpufanbin name=b devices=cpu:2 stats-interval=1 "
                     "branch=identity ! fakesink sync=false");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.PlayToEos());
  GstElement *fanout = gst_bin_get_by_name(GST_BIN(p.element("b")), "fanout");
  ASSERT_NE(fanout, nullptr);
  ExpectStatsFromOneSource(p, fanout, kBuffers, 2);
  gst_object_unref(fanout);
}

// Several streams: gpufanin posts the final message before the last
// stream's EOS, in gpufanout's name too.
TEST(PipelineStats, SeveralStreamsStatsComeFromTheFanout) {
  constexpr int kBuffers = 40;
  std::string d = "gpufanout name=f stats-interval=1 devices=cpu  gpufanin "
                  "name=m stall-timeout=" +
                  std::to_string(kNoStallTimeout);
  for (int k = 0; k < 2; k++) {
    const std::string i = std::to_string(k);
    d += "  videotestsrc num-buffers=" + std::to_string(kBuffers) + " ! " +
         kCaps + " ! f.sink_" + i + "  m.src_" + i +
         " ! fakesink sync=false";
  }
  for (int k = 0; k < 2; k++) {
    const std::string i = std::to_string(k);
    d += "  f.src_" + i + " ! queue ! m.sink_" + i;
  }
  LaunchedPipeline p(d);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.PlayToEos());
  ExpectStatsFromOneSource(p, p.element("f"), 2 * kBuffers, 2);
}

TEST(PipelineUser, GstLaunchPrintsTheStatsMessage) {
  gchar *launch = g_find_program_in_path("gst-launch-1.0");
  if (!launch)
    GTEST_SKIP() << "gst-launch-1.0 not installed";
  std::vector<std::string> args = {"timeout",
                                   "120",
                                   launch,
                                   "-m",
                                   "videotestsrc",
                                   "num-buffers=60",
                                   "!",
                                   "video/x-raw,width=320,height=240",
                                   "!",
                                   "gpufanout",
                                   "name=f",
                                   "policy=adaptive",
                                   "gpufanin",
                                   "name=m",
                                   "!",
                                   "fakesink",
                                   "f.src_0",
                                   "!",
                                   "identity",
                                   "sleep-time=2000",
                                   "!",
                                   "m.sink_0",
                                   "f.src_1",
                                   "!",
                                   "identity",
                                   "sleep-time=4000",
                                   "!",
                                   "m.sink_1",
                                   "f.src_2",
                                   "!",
                                   "identity",
                                   "sleep-time=8000",
                                   "!",
                                   "m.sink_2"};
  g_free(launch);
  std::vector<gchar *> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  gchar **env = g_get_environ();
  env = g_environ_unsetenv(env, "GST_TRACERS");
  env = g_environ_unsetenv(env, "GST_DEBUG");
  gchar *out = nullptr;
  gchar *err = nullptr;
  gint status = -1;
  GError *error = nullptr;
  ASSERT_TRUE(g_spawn_sync(nullptr, argv.data(), env, G_SPAWN_SEARCH_PATH,
                           nullptr, nullptr, &out, &err, &status, &error))
      << (error ? error->message : "");
  g_strfreev(env);
  std::string stdout_text = out ? out : "", stderr_text = err ? err : "";
  g_free(out);
  g_free(err);
  EXPECT_TRUE(g_spawn_check_wait_status(status, nullptr))
      << "gst-launch-1.0 failed\nstdout:\n"
      << stdout_text << "\nstderr:\n"
      << stderr_text;
  EXPECT_NE(stdout_text.find("gpufan-stats"), std::string::npos)
      << "no gpufan-stats in the -m output:\n"
      << stdout_text;
  EXPECT_NE(stdout_text.find("Got EOS"), std::string::npos) << stdout_text;
}

// ------------------------------------------------------ dropping lanes (21)
// ---

TEST(PipelineDrops, DroppingLanesStayOrderedNeverStallAndAreCounted) {
  // Lane 1 loses every third buffer after its identity (a probe drop: the
  // fan-in must prove it gone by FIFO order); lane 2's identity drops at
  // random, and BaseTransform sends a GAP in place of each dropped buffer,
  // so those are delivered as GAPs, not lost.
  constexpr int kBuffers = 1500;
  DropEveryNth every_third(3);
  LaunchedPipeline p(FanPipeline(kBuffers, 3, "round-robin", [](int lane) {
    std::string name = "identity name=b" + std::to_string(lane);
    return lane == 2 ? name + " drop-probability=0.3" : name;
  }));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  p.AddProbe("b1", "src", GST_PAD_PROBE_TYPE_BUFFER, DropEveryNth::Probe,
             &every_third);
  RecordLog& out_of_b2 = p.Record("b2", "src");
  RecordLog& out = p.Record("out", "sink");
  GstMessage *stats = RunToEos(p);

  std::vector<int64_t> items = out.DataItemPtsIndices();  // buffers and GAPs
  EXPECT_TRUE(IsStrictlyIncreasing(items));
  std::set<int64_t> all(items.begin(), items.end());
  all.insert(every_third.dropped.begin(), every_third.dropped.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kBuffers))
      << "frames lost or duplicated";
  EXPECT_EQ(items.size() + every_third.dropped.size(),
            static_cast<size_t>(kBuffers));
  EXPECT_FALSE(every_third.dropped.empty());
  EXPECT_EQ(out.Events(GST_EVENT_GAP), out_of_b2.Events(GST_EVENT_GAP))
      << "every GAP of lane 2 goes out once";
  EXPECT_GT(out_of_b2.Events(GST_EVENT_GAP), 0u);

  ASSERT_NE(stats, nullptr);
  const GstStructure *s = gst_message_get_structure(stats);
  ASSERT_TRUE(HasStatsShape(s, 3));
  const GstStructure *l0 = StatsLaneById(s, 0);
  const GstStructure *l1 = StatsLaneById(s, 1);
  const GstStructure *l2 = StatsLaneById(s, 2);
  ASSERT_TRUE(l0 && l1 && l2);
  EXPECT_EQ(StatsU64(l0, "dropped"), 0u);
  EXPECT_EQ(StatsU64(l1, "dropped"), every_third.dropped.size());
  EXPECT_EQ(StatsU64(l2, "dropped"), 0u)
      << "lane 2 delivered GAPs for its drops";
  EXPECT_EQ(SumLanesU64(s, "timed-out"), 0u);
  EXPECT_EQ(SumLanesU64(s, "completed"), items.size());
}

// ------------------------------------------- branches make new buffers (28)
// ---

TEST(PipelineMeta, BranchesThatDropTheMetaStayInOrder) {
  constexpr int kBuffers = 2000;
  constexpr int kLanes = 3;
  LaunchedPipeline p(
      FanPipeline(kBuffers, kLanes, "adaptive", DelayedIdentity));
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  for (int i = 0; i < kLanes; i++)
    p.AddProbe(("b" + std::to_string(i)).c_str(), "src",
               GST_PAD_PROBE_TYPE_BUFFER, StripMetas, nullptr);
  RecordLog& into_m = p.Record("b0", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_NO_FATAL_FAILURE(ConnectDelays(p, kLanes, 28));
  RunToEos(p);
  for (const Entry& e : into_m.Snapshot())
    if (e.is_buffer) {
      ASSERT_EQ(e.n_metas, 0u) << "the branch still carries a meta";
    }
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers));
}

TEST(PipelineMeta, VideoconvertBranchesStayInOrder) {
  constexpr int kBuffers = 1000;
  constexpr int kLanes = 3;
  LaunchedPipeline p(FanPipeline(kBuffers, kLanes, "adaptive", [](int lane) {
    return DelayedIdentity(lane) + " ! videoconvert ! video/x-raw,format=I420";
  }));
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  ASSERT_NO_FATAL_FAILURE(ConnectDelays(p, kLanes, 29));
  RunToEos(p);
  EXPECT_TRUE(IsSequence(out.BufferPtsIndices(), 0, kBuffers));
  EXPECT_EQ(out.Events(GST_EVENT_CAPS), 1u) << out.Summary(20);
}

// --------------------------------------------------- state cycling (25) ---

namespace {
std::string CyclingPipeline() {
  return FanPipeline(0, 3, "adaptive", [](int lane) {
    std::string id = "identity name=b" + std::to_string(lane);
    return lane == 1 ? "queue max-size-buffers=4 ! " + id : id;
  });
}
}  // namespace

TEST(PipelineStates, NullPlayingCycles) {
  LaunchedPipeline p(CyclingPipeline());
  ASSERT_TRUE(p.ok());
  IndexStamper& stamp = p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  for (int cycle = 0; cycle < 25; cycle++) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    stamp.Reset();
    out.Clear();
    ASSERT_TRUE(p.Play());
    ASSERT_TRUE(out.WaitBuffers(30)) << out.Summary(20);
    ASSERT_TRUE(p.Stop());
    std::vector<int64_t> got = out.BufferIndices();
    ASSERT_TRUE(IsSequence(got, 0, got.size()));
  }
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
}

TEST(PipelineStates, ReadyPlayingCycles) {
  LaunchedPipeline p(CyclingPipeline());
  ASSERT_TRUE(p.ok());
  IndexStamper& stamp = p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  for (int cycle = 0; cycle < 15; cycle++) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    stamp.Reset();
    out.Clear();
    ASSERT_TRUE(p.Play());
    ASSERT_TRUE(out.WaitBuffers(30)) << out.Summary(20);
    ASSERT_TRUE(SetStateAndWait(p.get(), GST_STATE_READY));
    std::vector<int64_t> got = out.BufferIndices();
    ASSERT_TRUE(IsSequence(got, 0, got.size()));
  }
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
}

TEST(PipelineStates, PausedPlayingCyclesKeepTheStreamGoing) {
  LaunchedPipeline p(CyclingPipeline());
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  size_t target = 0;
  for (int cycle = 0; cycle < 15; cycle++) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    ASSERT_TRUE(p.Play());
    target += 20;
    ASSERT_TRUE(out.WaitBuffers(target)) << out.Summary(20);
    ASSERT_TRUE(SetStateAndWait(p.get(), GST_STATE_PAUSED));
  }
  ASSERT_TRUE(p.Stop());
  std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(IsSequence(got, 0, got.size()))
      << "a gap or reordering across pauses";
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
}

// ------------------------------------------------ flushing seeks (20) ---

namespace {

// Hundreds of flushing seeks on videotestsrc ! gpufanout ! lanes ! gpufanin
// ! fakesink (some lanes with a queue, so flushes meet data in flight), then
// one more seek with a stop position: the stream ends in EOS (never ERROR),
// with exactly that segment's frames, in order, after the last FLUSH_STOP.
void FlushingSeeks(int lanes, int seeks) {
  LaunchedPipeline p(FanPipeline(0, lanes, "adaptive", [](int lane) {
    std::string id = "identity name=b" + std::to_string(lane);
    return lane % 2 ? "queue max-size-buffers=4 ! " + id : id;
  }));
  ASSERT_TRUE(p.ok());
  RecordLog& out = p.Record("out", "sink");
  CheckFlushingSeeks(p, out, seeks, 20, 50);
}

}  // namespace

TEST(PipelineSeek, HundredsOfFlushingSeeksWithTwoLanes) {
  FlushingSeeks(2, 300);
}

TEST(PipelineSeek, HundredsOfFlushingSeeksWithManyLanes) {
  FlushingSeeks(8, 200);
}

// ---------------------------------------------- one blocked lane (27) ---

namespace {

// identity::handoff that blocks lane 1's thread on the first buffer with a
// data index >= `from`, until Open() (bounded).
struct HandoffGate {
  std::mutex mutex;
  std::condition_variable cond;
  bool open = false;
  int64_t from = 0;
  int64_t blocked_at = -1;

  static void Handoff(GstElement *, GstBuffer *buffer, gpointer data) {
    auto *self = static_cast<HandoffGate *>(data);
    const int64_t index = DataIndex(buffer);
    std::unique_lock<std::mutex> lock(self->mutex);
    if (index < self->from || self->blocked_at >= 0)
      return;
    self->blocked_at = index;
    self->cond.notify_all();
    self->cond.wait_for(lock, kLongWait, [self] { return self->open; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
    cond.notify_all();
  }
};

}  // namespace

// Lane 1's branch blocks on one buffer. The other lanes keep receiving
// buffers until the in-flight bound is reached (the blocked item holds the
// output back, so everything after it stays in flight); then upstream is
// held: what was accepted and has not come out is at least max-in-flight and
// at most max-in-flight plus one lane queue (docs/elements.md). Unblocked,
// everything comes out in order.
TEST(PipelineBackpressure, OneBlockedLaneDoesNotStallTheOthersBeyondTheWindow) {
  constexpr int kBuffers = 300;
  constexpr guint kMaxInFlight = 12;
  constexpr guint kQueueSize = 2;
  HandoffGate gate;  // outlives the pipeline
  gate.from = 20;
  LaunchedPipeline p(FanPipeline(kBuffers, 3, "least-loaded", [](int lane) {
    return "identity name=b" + std::to_string(lane) +
           (lane == 1 ? " signal-handoffs=true" : "");
  }));
  ASSERT_TRUE(p.ok());
  struct Opener {  // opens the gate before the pipeline goes down
    HandoffGate& gate;
    ~Opener() { gate.Open(); }
  } opener{gate};
  g_object_set(p.element("f"), "max-in-flight", kMaxInFlight, "queue-size",
               kQueueSize, nullptr);
  IndexStamper& stamp = p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  RecordLog& lane0 = p.Record("b0", "src");
  RecordLog& lane2 = p.Record("b2", "src");
  g_signal_connect(p.element("b1"), "handoff", G_CALLBACK(HandoffGate::Handoff),
                   &gate);
  ASSERT_TRUE(p.Play());

  int64_t blocked_at;
  {
    std::unique_lock<std::mutex> lock(gate.mutex);
    ASSERT_TRUE(
        gate.cond.wait_for(lock, kWait, [&] { return gate.blocked_at >= 0; }))
        << "lane 1 never got a buffer >= " << gate.from;
    blocked_at = gate.blocked_at;
  }
  // How soon each of these happens depends on the machine, so the test waits
  // for each (bounded). What comes before the blocked item comes out:
  ASSERT_TRUE(out.WaitBuffers(static_cast<size_t>(blocked_at)))
      << "the output did not reach the blocked item: " << out.Summary(20);
  // the other lanes keep receiving until the in-flight bound is reached, and
  // then upstream is held inside the push of one more (stamped) buffer:
  const uint64_t at_bound =
      static_cast<uint64_t>(blocked_at) + kMaxInFlight + 1;
  ASSERT_TRUE(PollUntil([&] { return stamp.count() >= at_bound; }))
      << "the other lanes stopped before the in-flight bound: " << stamp.count()
      << " buffers stamped, lane 1 blocked at " << blocked_at;
  // both of them:
  for (RecordLog *lane : {&lane0, &lane2}) {
    EXPECT_TRUE(lane->WaitFor([&](const std::vector<Entry>& entries) {
      return std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
        return e.is_buffer && e.index > blocked_at;
      });
    })) << "lane "
        << (lane == &lane0 ? 0 : 2)
        << " got nothing after lane 1 blocked: " << lane->Summary(20);
  }
  // Then upstream stays held: the stamp count stops moving (a settle, so it
  // can only miss an excess on a slow machine, never invent one).
  uint64_t pushed = stamp.count();
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  for (;;) {
    std::this_thread::sleep_for(kSettle);
    const uint64_t now = stamp.count();
    if (now == pushed)
      break;
    pushed = now;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "upstream is never held back with lane 1 blocked";
  }
  ASSERT_LT(pushed, static_cast<uint64_t>(kBuffers))
      << "everything was accepted: no bound";
  // The last stamped buffer is the one upstream is blocked in pushing.
  const uint64_t accepted = pushed - 1;
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(IsSequence(got, 0, static_cast<size_t>(blocked_at)))
      << "the output must stop right before the blocked item";
  const uint64_t in_flight = accepted - got.size();
  EXPECT_GE(in_flight, kMaxInFlight)
      << "the other lanes stopped before the in-flight bound";
  EXPECT_LE(in_flight, kMaxInFlight + kQueueSize)
      << "more accepted than max-in-flight (+ one lane queue)";
  GstStructure *s = GetStats(p.element("f"));
  ASSERT_NE(s, nullptr);
  guint stats_in_flight = 0, peak = 0;
  gst_structure_get_uint(s, "in-flight", &stats_in_flight);
  gst_structure_get_uint(s, "window-peak", &peak);
  EXPECT_LE(stats_in_flight, kMaxInFlight + kQueueSize);
  EXPECT_LE(peak, kMaxInFlight + kQueueSize);
  gst_structure_free(s);

  gate.Open();
  GstMessage *stats = RunToEos(p);
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kBuffers));
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(SumLanesU64(gst_message_get_structure(stats), "timed-out"), 0u);
  EXPECT_EQ(StatsU64(gst_message_get_structure(stats), "released"),
            static_cast<guint64>(kBuffers));
}

// ----------------------------------------------------------------- errors ---

TEST(PipelineErrors, UnknownPolicyIsAParseError) {
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(
      "videotestsrc ! gpufanout name=f policy=bogus  f.src_0 ! fakesink",
      &error);
  ASSERT_NE(error, nullptr) << "policy=bogus was accepted";
  EXPECT_EQ(error->domain, GST_PARSE_ERROR);
  const std::string message = error->message;
  EXPECT_NE(message.find("policy"), std::string::npos) << message;
  EXPECT_NE(message.find("bogus"), std::string::npos) << message;
  g_clear_error(&error);
  if (pipeline)
    gst_object_unref(pipeline);
}

TEST(PipelineErrors, BranchErrorPostsAnErrorNamingTheLane) {
  LaunchedPipeline p(
      "videotestsrc num-buffers=50 ! " + std::string(kCaps) +
      " ! gpufanout name=f policy=round-robin  gpufanin name=m ! fakesink"
      "  f.src_0 ! identity ! m.sink_0  f.src_1 ! identity error-after=3 ! "
      "m.sink_1");
  ASSERT_TRUE(p.ok());
  // The error may come before PLAYING is reached: the state change may fail.
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstElement *f = p.element("f");
  GstMessage *m = p.bus().WaitFor([f](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR &&
           GST_MESSAGE_SRC(m) == GST_OBJECT(f);
  });
  ASSERT_NE(m, nullptr) << "gpufanout posted no ERROR for lane 1; bus: "
                        << p.bus().ErrorsText();
  const std::string text = BusLog::ErrorText(m);
  EXPECT_NE(text.find("lane 1"), std::string::npos) << text;
  EXPECT_NE(text.find("src_1"), std::string::npos) << text;
}

TEST(PipelineErrors, FaninWithoutFanoutPostsAnError) {
  LaunchedPipeline p("videotestsrc num-buffers=5 ! gpufanin name=m ! fakesink");
  ASSERT_TRUE(p.ok());
  // The error may come before PLAYING is reached: the state change may fail.
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *m = p.WaitEosOrError(kWait);
  ASSERT_NE(m, nullptr) << "neither ERROR nor EOS: the fan-in hangs";
  EXPECT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_ERROR)
      << "a fan-in without a fan-out must fail";
  EXPECT_EQ(GST_MESSAGE_SRC(m), GST_OBJECT(p.element("m")));
}
