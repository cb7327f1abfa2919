// SPDX-License-Identifier: LGPL-2.1-or-later
// Hostile but ordinary branches, with stock elements: a lane that drops
// frames silently (valve, a DROP probe), one that swallows EOS, one that
// blocks for good, lanes added and removed while playing, a live pipeline
// whose lanes take tens of milliseconds, and settings that leave no lane.
// Every test asserts order, counts and EOS. None depends on the machine's
// speed: where a stall-timeout must fire, only the hostile lane can reach
// it (the healthy lanes deliver inside their pushes, far below it), and
// where it must not, it is an hour.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

constexpr int kFrames = 300;
constexpr const char *kCaps = "video/x-raw,format=GRAY8,width=64,height=64";
constexpr const char *kHour = "3600000000000";

// The reproducer, with lane 1's branch given, named b0..b2.
std::string ThreeLanes(const std::string& policy, const std::string& lane1,
                       const std::string& fanin_props) {
  return std::string("videotestsrc name=src num-buffers=") +
         std::to_string(kFrames) + " ! " + kCaps +
         " ! gpufanout name=f policy=" + policy + "  gpufanin name=m " +
         fanin_props +
         " ! fakesink name=out sync=false"
         "  f.src_0 ! identity name=b0 ! m.sink_0"
         "  f.src_1 ! " +
         lane1 +
         " ! m.sink_1"
         "  f.src_2 ! identity name=b2 ! m.sink_2";
}

// The frames the healthy lanes 0 and 2 delivered, in order.
std::vector<int64_t> HealthyFrames(RecordLog& b0, RecordLog& b2) {
  std::vector<int64_t> all = b0.BufferIndices();
  const std::vector<int64_t> two = b2.BufferIndices();
  all.insert(all.end(), two.begin(), two.end());
  std::sort(all.begin(), all.end());
  return all;
}

GstMessage *FaninMessage(LaunchedPipeline& p, GstMessageType type) {
  GstElement *m = p.element("m");
  return p.bus().WaitFor(
      [m, type](GstMessage *msg) {
        return GST_MESSAGE_TYPE(msg) == type &&
               GST_MESSAGE_SRC(msg) == GST_OBJECT(m);
      },
      Duration(0));
}

// Records the healthy lanes and the output, runs to EOS and checks what
// every test of a dropping lane 1 checks: the output is exactly what the
// healthy lanes delivered, in order, and one EOS ends it. Returns the
// fan-in's final statistics (or nullptr).
GstStructure *RunAndCheckHealthyLanesOut(LaunchedPipeline& p) {
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& b2 = p.Record("b2", "src");
  RecordLog& out = p.Record("out", "sink");
  if (!p.PlayToEos())
    return nullptr;
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(IsStrictlyIncreasing(got));
  EXPECT_EQ(got, HealthyFrames(b0, b2))
      << "a frame a healthy lane delivered is missing";
  EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
  GstStructure *s = GetStats(p.element("m"));
  // Every frame either came out or went to lane 1, which lost it.
  const GstStructure *l1 = s ? StatsLaneById(s, 1) : nullptr;
  EXPECT_NE(l1, nullptr);
  if (l1) {
    EXPECT_EQ(got.size() + StatsU64(l1, "dispatched"),
              static_cast<size_t>(kFrames));
  }
  return s;
}

}  // namespace

// ---------------------------------------------------- 1. silent drops ---

// valve drop=true (drop-mode drop-all) drops buffers, events (our markers
// and EOS too) and refuses serialized queries: nothing the branch does can
// prove a drop. The lane costs one stall-timeout, then it is stalled: out of
// scheduling for every policy, its later items given up at once, and the
// stream ends without its EOS.
TEST(HostileDrops, ValveDropAllCostsOneStallTimeoutForEveryPolicy) {
  for (const char *policy :
       {"round-robin", "weighted", "least-loaded", "adaptive"}) {
    SCOPED_TRACE(policy);
    // 3 s: far above what a healthy identity lane takes on a loaded box.
    LaunchedPipeline p(ThreeLanes(policy, "valve name=b1 drop=true",
                                  "stall-timeout=3000000000"));
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    GstStructure *s = RunAndCheckHealthyLanesOut(p);
    ASSERT_TRUE(HasStatsShape(s, 3));
    const GstStructure *l1 = StatsLaneById(s, 1);
    ASSERT_NE(l1, nullptr);
    EXPECT_STREQ(gst_structure_get_string(l1, "state"), "stalled");
    EXPECT_STREQ(gst_structure_get_string(l1, "stall"), "silent");
    ExpectLaneCounts(l1, {.completed = 0, .stalls = 1});
    EXPECT_GT(StatsU64(l1, "timed-out"), 0u);
    EXPECT_EQ(SumLanesU64(s, "timed-out"), StatsU64(l1, "timed-out"))
        << "only the valve lane may time out";
    gst_structure_free(s);
    GstMessage *warning = FaninMessage(p, GST_MESSAGE_WARNING);
    ASSERT_NE(warning, nullptr) << "no warning names the lane without EOS";
    const std::string text = BusLog::ErrorText(warning);
    EXPECT_NE(text.find("sink_1"), std::string::npos) << text;
    EXPECT_NE(text.find("stalled"), std::string::npos) << text;
  }
}

// A valve that closes and opens again. Once lane 1 is stalled no policy gives
// it items while lane 0 takes them, so only the marker its idle worker
// sends every stall-timeout (woken by the Session's stall listener, with
// nothing else to wake it) can show that the branch answers again.
TEST(HostileDrops, AnIdleStalledLaneIsReadmittedWhenItsBranchAnswersAgain) {
  LaunchedPipeline p(
      std::string("videotestsrc is-live=true ! ") + kCaps +
      ",framerate=100/1 ! gpufanout name=f policy=adaptive"
      "  gpufanin name=m stall-timeout=300000000 ! fakesink name=out"
      " sync=false  f.src_0 ! identity name=b0 ! m.sink_0"
      "  f.src_1 ! valve name=b1 drop=true ! m.sink_1");
  ASSERT_TRUE(p.ok());
  p.Stamp("f", "sink");
  RecordLog& b0 = p.Record("b0", "src");
  RecordLog& b1 = p.Record("b1", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.Play());
  auto lane1 = [&p](const char *field, std::string *state, guint64 *n) {
    GstStructure *s = GetStats(p.element("m"));
    const GstStructure *l1 = s ? StatsLaneById(s, 1) : nullptr;
    if (l1) {
      *state = gst_structure_get_string(l1, "state");
      *n = StatsU64(l1, field);
    }
    if (s)
      gst_structure_free(s);
    return l1 != nullptr;
  };
  std::string state;
  guint64 n = 0;
  ASSERT_TRUE(PollUntil(
      [&] { return lane1("stalls", &state, &n) && state == "stalled"; },
      kLongWait))
      << "lane 1 never stalled";
  g_object_set(p.element("b1"), "drop", FALSE, nullptr);
  EXPECT_TRUE(PollUntil(
      [&] {
        return lane1("completed", &state, &n) && state != "stalled" && n > 0;
      },
      kLongWait))
      << "lane 1 stayed " << state << " with " << n << " completed";
  gst_element_send_event(p.get(), gst_event_new_eos());
  GstMessage *end = p.WaitEosOrError(kLongWait);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS);
  // Every frame a branch let through came out, in order, unless it came
  // after it had been given up (counted late): none is lost or doubled.
  const std::vector<int64_t> got = out.BufferIndices();
  EXPECT_TRUE(IsStrictlyIncreasing(got));
  std::vector<int64_t> passed = b0.BufferIndices();
  const std::vector<int64_t> one = b1.BufferIndices();
  EXPECT_FALSE(one.empty()) << "nothing passed the reopened valve";
  passed.insert(passed.end(), one.begin(), one.end());
  std::sort(passed.begin(), passed.end());
  EXPECT_TRUE(
      std::includes(passed.begin(), passed.end(), got.begin(), got.end()))
      << "a frame came out that no branch let through";
  GstStructure *s = GetStats(p.element("m"));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(got.size() + SumLanesU64(s, "late"), passed.size());
  gst_structure_free(s);
}

// valve drop-mode=forward-sticky-events drops buffers but forwards sticky
// events: the marker behind each item (a sticky event) proves its drop at
// once. stall-timeout is an hour: only the proof can end this stream.
TEST(HostileDrops, ValveForwardingStickyEventsIsProvenWithoutATimeout) {
  for (const char *policy : {"round-robin", "adaptive"}) {
    SCOPED_TRACE(policy);
    LaunchedPipeline p(ThreeLanes(
        policy, "valve name=b1 drop=true drop-mode=forward-sticky-events",
        std::string("stall-timeout=") + kHour));
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    GstStructure *s = RunAndCheckHealthyLanesOut(p);
    ASSERT_TRUE(HasStatsShape(s, 3));
    const GstStructure *l1 = StatsLaneById(s, 1);
    ASSERT_NE(l1, nullptr);
    EXPECT_EQ(SumLanesU64(s, "timed-out"), 0u);
    EXPECT_EQ(StatsU64(l1, "dropped"), StatsU64(l1, "dispatched"));
    EXPECT_GT(StatsU64(l1, "markers"), 0u);
    EXPECT_STREQ(gst_structure_get_string(l1, "state"), "active");
    gst_structure_free(s);
  }
}

namespace {

GstPadProbeReturn DropBuffer(GstPad *, GstPadProbeInfo *, gpointer) {
  return GST_PAD_PROBE_DROP;
}

}  // namespace

// A pad probe that drops every buffer of lane 1 (events pass): proven by
// the markers, with and without a queue (an async boundary) in the branch.
TEST(HostileDrops, AProbeDroppingEveryBufferIsProvenWithoutATimeout) {
  for (const char *branch : {"identity name=b1", "queue ! identity name=b1"}) {
    SCOPED_TRACE(branch);
    LaunchedPipeline p(ThreeLanes("round-robin", branch,
                                  std::string("stall-timeout=") + kHour));
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    p.AddProbe("b1", "src", GST_PAD_PROBE_TYPE_BUFFER, DropBuffer, nullptr);
    GstStructure *s = RunAndCheckHealthyLanesOut(p);
    ASSERT_TRUE(HasStatsShape(s, 3));
    EXPECT_EQ(SumLanesU64(s, "timed-out"), 0u);
    EXPECT_EQ(StatsU64(StatsLaneById(s, 1), "dropped"), kFrames / 3u);
    gst_structure_free(s);
  }
}

// Lanes with a queue whose branches deliver everything: the markers behind
// their items come back after the items and prove nothing (no frame lost,
// none timed out).
TEST(HostileDrops, AsyncLanesThatDeliverLoseNothing) {
  LaunchedPipeline p(
      std::string("videotestsrc name=src num-buffers=") +
      std::to_string(kFrames) + " ! " + kCaps +
      " ! gpufanout name=f  gpufanin name=m stall-timeout=" + kHour +
      " ! fakesink name=out sync=false"
      "  f.src_0 ! queue ! identity ! m.sink_0"
      "  f.src_1 ! queue max-size-buffers=2 ! identity ! m.sink_1");
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& out = p.Record("out", "sink");
  ASSERT_TRUE(p.PlayToEos());
  EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kFrames));
  GstStructure *s = GetStats(p.element("m"));
  ASSERT_TRUE(HasStatsShape(s, 2));
  EXPECT_EQ(SumLanesU64(s, "dropped"), 0u);
  EXPECT_EQ(SumLanesU64(s, "timed-out"), 0u);
  EXPECT_EQ(SumLanesU64(s, "completed"), static_cast<guint64>(kFrames));
  gst_structure_free(s);
}

// ---------------------------------------------------- 2. swallowed EOS ---

namespace {

GstPadProbeReturn DropEos(GstPad *, GstPadProbeInfo *info, gpointer) {
  return GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS
             ? GST_PAD_PROBE_DROP
             : GST_PAD_PROBE_OK;
}

}  // namespace

// Lane 1 delivers every buffer but swallows EOS: once the fan-out's input
// ended and every item came back, the stream ends stall-timeout later, with
// a warning naming the lane. Every frame comes out.
TEST(HostileEos, ALaneThatSwallowsEosEndsTheStreamAfterStallTimeout) {
  for (const char *policy : {"round-robin", "adaptive"}) {
    SCOPED_TRACE(policy);
    LaunchedPipeline p(
        ThreeLanes(policy, "identity name=b1", "stall-timeout=2000000000"));
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    p.AddProbe("b1", "src", GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, DropEos,
               nullptr);
    RecordLog& out = p.Record("out", "sink");
    ASSERT_TRUE(p.PlayToEos());
    EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, kFrames));
    EXPECT_EQ(out.Events(GST_EVENT_EOS), 1u);
    GstMessage *warning = FaninMessage(p, GST_MESSAGE_WARNING);
    ASSERT_NE(warning, nullptr);
    const std::string text = BusLog::ErrorText(warning);
    EXPECT_NE(text.find("sink_1 (lane 1, no EOS within stall-timeout)"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("sink_0"), std::string::npos) << text;
    GstStructure *s = GetStats(p.element("m"));
    ASSERT_TRUE(HasStatsShape(s, 3));
    EXPECT_EQ(SumLanesU64(s, "timed-out"), 0u);
    EXPECT_TRUE(gst_structure_has_field(s, "input-ended"));
    gst_structure_free(s);
  }
}

// ---------------------------------------------------- 3. blocked lane ---

namespace {

// Blocks the streaming thread of the pad it is on from the `after`-th
// buffer until Open(): a probe that never returns, as far as the
// pipeline can tell.
struct Gate {
  explicit Gate(int after_buffers) : after(after_buffers) {}
  static GstPadProbeReturn Probe(GstPad *, GstPadProbeInfo *, gpointer data) {
    auto *g = static_cast<Gate *>(data);
    std::unique_lock<std::mutex> lock(g->mutex);
    if (++g->seen > g->after) {
      g->blocked = true;
      g->cond.notify_all();
      g->cond.wait(lock, [g] { return g->open; });
    }
    return GST_PAD_PROBE_OK;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
    cond.notify_all();
  }
  const int after;
  std::mutex mutex;
  std::condition_variable cond;
  int seen = 0;
  bool blocked = false;
  bool open = false;
};

// Opens the gate before the pipeline goes to NULL (declared after it).
struct GateOpener {
  Gate& gate;
  ~GateOpener() { gate.Open(); }
};

}  // namespace

// Lane 1's streaming thread blocks inside a push for good: after 10 frames
// under the policies that share frames by turn, on its first under those
// that share by load (how many frames those give a lane depends on its
// speed). Every policy takes the lane out of scheduling after
// stall-timeout, and EOS still arrives; the stats say which lane and why.
TEST(HostileBlocked, ABlockedLaneIsSkippedByEveryPolicyAndEosArrives) {
  for (const char *policy :
       {"round-robin", "weighted", "least-loaded", "adaptive"}) {
    SCOPED_TRACE(policy);
    const bool by_turn = std::string(policy) == "round-robin" ||
                         std::string(policy) == "weighted";
    Gate gate(by_turn ? 10 : 0);
    LaunchedPipeline p(
        ThreeLanes(policy, "identity name=b1", "stall-timeout=2000000000"));
    ASSERT_TRUE(p.ok());
    GateOpener opener{gate};
    p.Stamp("src", "src");
    p.AddProbe("b1", "src", GST_PAD_PROBE_TYPE_BUFFER, Gate::Probe, &gate);
    RecordLog& b0 = p.Record("b0", "src");
    RecordLog& b2 = p.Record("b2", "src");
    RecordLog& out = p.Record("out", "sink");
    RecordLog& b1 = p.Record("b1", "src");
    ASSERT_TRUE(p.PlayToEos()) << out.Summary();
    // What came out: lane 1's frames that passed before it blocked, and
    // every frame of the healthy lanes, in order.
    std::vector<int64_t> expected = HealthyFrames(b0, b2);
    for (int64_t i : b1.BufferIndices())
      expected.push_back(i);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(out.BufferIndices(), expected);
    EXPECT_EQ(b1.Buffers(), static_cast<size_t>(gate.after));
    GstStructure *s = GetStats(p.element("m"));
    ASSERT_TRUE(HasStatsShape(s, 3));
    const GstStructure *l1 = StatsLaneById(s, 1);
    ASSERT_NE(l1, nullptr);
    EXPECT_STREQ(gst_structure_get_string(l1, "state"), "stalled");
    EXPECT_STREQ(gst_structure_get_string(l1, "stall"), "blocked");
    const char *why = gst_structure_get_string(l1, "stall-reason");
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::string(why).find("has not returned from the push"),
              std::string::npos)
        << why;
    EXPECT_EQ(StatsU64(StatsLaneById(s, 0), "timed-out"), 0u);
    EXPECT_EQ(StatsU64(StatsLaneById(s, 2), "timed-out"), 0u);
    gst_structure_free(s);
    gate.Open();
    ASSERT_TRUE(p.Stop());
  }
}

// ------------------------------------------ 4. lanes joining and leaving ---

namespace {

// One lane added while playing: identity between a new src_%u of the
// fan-out and a new sink_%u of the fan-in.
struct ChurnLane {
  GstElement *identity = nullptr;
  GstPad *src = nullptr;   // the fan-out's request pad
  GstPad *sink = nullptr;  // the fan-in's request pad
};

ChurnLane AddLane(GstElement *pipeline, GstElement *f, GstElement *m,
                  bool fanout_side_first) {
  ChurnLane l;
  l.identity = gst_element_factory_make("identity", nullptr);
  g_object_set(l.identity, "sleep-time", 300u, nullptr);
  gst_bin_add(GST_BIN(pipeline), l.identity);
  gst_element_sync_state_with_parent(l.identity);
  GstPad *in = gst_element_get_static_pad(l.identity, "sink");
  GstPad *out = gst_element_get_static_pad(l.identity, "src");
  auto link_fanout = [&] {
    l.src = gst_element_request_pad_simple(f, "src_%u");
    EXPECT_EQ(gst_pad_link(l.src, in), GST_PAD_LINK_OK);
  };
  auto link_fanin = [&] {
    l.sink = gst_element_request_pad_simple(m, "sink_%u");
    EXPECT_EQ(gst_pad_link(out, l.sink), GST_PAD_LINK_OK);
  };
  // Either end may complete the branch; the lane joins the order once the
  // fan-in claims it, whichever came last.
  if (fanout_side_first) {
    link_fanout();
    link_fanin();
  } else {
    link_fanin();
    link_fanout();
  }
  gst_object_unref(in);
  gst_object_unref(out);
  return l;
}

// As an application removes a branch: release the fan-out's pad (no more
// items into it), then the branch, then the fan-in's pad.
void RemoveLane(GstElement *pipeline, GstElement *f, GstElement *m,
                ChurnLane& l) {
  gst_element_release_request_pad(f, l.src);
  gst_object_unref(l.src);
  gst_element_set_state(l.identity, GST_STATE_NULL);
  gst_element_release_request_pad(m, l.sink);
  gst_object_unref(l.sink);
  gst_bin_remove(GST_BIN(pipeline), l.identity);
}

}  // namespace

// Lanes requested, linked (from either end first), unlinked and released
// while frames flow at full speed: every frame that comes out comes out in
// order, none twice, and the stream ends.
TEST(HostileChurn, LanesAddedAndRemovedWhilePlayingKeepTheOrder) {
  constexpr int kChurnFrames = 3000;
  for (const char *policy : {"round-robin", "adaptive"}) {
    SCOPED_TRACE(policy);
    LaunchedPipeline p(std::string("videotestsrc name=src num-buffers=") +
                       std::to_string(kChurnFrames) + " ! " + kCaps +
                       " ! gpufanout name=f policy=" + policy +
                       "  gpufanin name=m ! fakesink name=out sync=false"
                       "  f.src_0 ! identity sleep-time=300 ! m.sink_0");
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    RecordLog& out = p.Record("out", "sink");
    GstElement *f = p.element("f");
    GstElement *m = p.element("m");
    ASSERT_TRUE(p.Play());
    std::vector<ChurnLane> added;
    int round = 0;
    while (out.Events(GST_EVENT_EOS) == 0 && round < 400) {
      if (added.size() < 3 || round % 3 != 0) {
        added.push_back(AddLane(p.get(), f, m, round % 2 == 0));
      } else {
        RemoveLane(p.get(), f, m, added.front());
        added.erase(added.begin());
      }
      round++;
      std::this_thread::sleep_for(Duration(3));
    }
    ASSERT_TRUE(out.WaitEvents(GST_EVENT_EOS, 1, kLongWait))
        << p.bus().ErrorsText() << "\n"
        << out.Summary();
    const std::vector<int64_t> got = out.BufferIndices();
    EXPECT_TRUE(IsStrictlyIncreasing(got)) << out.Summary();
    EXPECT_GT(got.size(), 0u);
    EXPECT_LE(got.size(), static_cast<size_t>(kChurnFrames));
    EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
    ASSERT_TRUE(p.Stop());
    for (ChurnLane& l : added)
      RemoveLane(p.get(), f, m, l);
  }
}

// -------------------------------------------------------------- latency ---

// A live source and lanes of 20, 30 and 40 ms: gpufanin adds what its lanes
// take to the latency it reports, and says when that grew (a LATENCY
// message), so that a sync=true sink does not see late frames once the
// pipeline recalculated. Asserts only lower bounds that hold on any
// machine: a lane never takes less than its sleep.
TEST(HostileLatency, ReorderingAddsTheLanesServiceTimesToTheLatency) {
  LaunchedPipeline p(
      "videotestsrc name=src is-live=true num-buffers=60 ! "
      "video/x-raw,format=GRAY8,width=64,height=64,framerate=50/1 ! "
      "gpufanout name=f policy=round-robin  gpufanin name=m ! "
      "fakesink name=out sync=true"
      "  f.src_0 ! identity sleep-time=20000 ! m.sink_0"
      "  f.src_1 ! identity sleep-time=30000 ! m.sink_1"
      "  f.src_2 ! identity sleep-time=40000 ! m.sink_2");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.Play());
  GstElement *m = p.element("m");
  GstMessage *latency = p.bus().WaitFor([m](GstMessage *msg) {
    return GST_MESSAGE_TYPE(msg) == GST_MESSAGE_LATENCY &&
           GST_MESSAGE_SRC(msg) == GST_OBJECT(m);
  });
  ASSERT_NE(latency, nullptr) << "gpufanin never said its latency grew";
  ASSERT_TRUE(gst_bin_recalculate_latency(GST_BIN(p.get())));
  GstQuery *q = gst_query_new_latency();
  ASSERT_TRUE(gst_element_query(p.get(), q));
  gboolean live = FALSE;
  GstClockTime min = 0, max = 0;
  gst_query_parse_latency(q, &live, &min, &max);
  gst_query_unref(q);
  EXPECT_TRUE(live);
  EXPECT_GE(min, 40 * GST_MSECOND)
      << "reported " << GST_TIME_AS_MSECONDS(min) << " ms";
  GstStructure *s = GetStats(m);
  ASSERT_NE(s, nullptr);
  EXPECT_GE(StatsU64(s, "added-latency"), 20 * GST_MSECOND);
  gst_structure_free(s);
  GstMessage *end = p.WaitEosOrError(kLongWait);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS) << p.bus().ErrorsText();
}

// ---------------------------------------------------------- clear errors ---

// Every lane's weight is 0 under policy=weighted: the error says that, not
// the source's "not-linked".
TEST(HostileErrors, AllWeightsZeroSaysWhichSettingLeavesNoLane) {
  LaunchedPipeline p(std::string("videotestsrc num-buffers=10 ! ") + kCaps +
                     " ! gpufanout name=f policy=weighted  gpufanin name=m ! "
                     "fakesink  f.src_0 ! identity ! m.sink_0"
                     "  f.src_1 ! identity ! m.sink_1");
  ASSERT_TRUE(p.ok());
  for (const char *name : {"src_0", "src_1"}) {
    GstPad *pad = gst_element_get_static_pad(p.element("f"), name);
    ASSERT_NE(pad, nullptr);
    g_object_set(pad, "weight", 0.0, nullptr);
    gst_object_unref(pad);
  }
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *end = p.WaitEosOrError(kWait);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_ERROR);
  EXPECT_EQ(GST_MESSAGE_SRC(end), GST_OBJECT(p.element("f")));
  const std::string text = BusLog::ErrorText(end);
  EXPECT_NE(text.find("policy=weighted"), std::string::npos) << text;
  EXPECT_NE(text.find("weight 0"), std::string::npos) << text;
}

// Two fan-outs feed one fan-in: the error names both.
TEST(HostileErrors, TwoFanoutsIntoOneFaninNameBoth) {
  LaunchedPipeline p(std::string("gpufanin name=m ! fakesink"
                                 "  videotestsrc num-buffers=10 ! ") +
                     kCaps +
                     " ! gpufanout name=f1  f1.src_0 ! identity ! m.sink_0"
                     "  videotestsrc num-buffers=10 ! " +
                     kCaps +
                     " ! gpufanout name=f2  f2.src_0 ! identity ! m.sink_1");
  ASSERT_TRUE(p.ok());
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *end = p.WaitEosOrError(kWait);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_ERROR);
  const std::string text = BusLog::ErrorText(end);
  EXPECT_NE(text.find("'f1'"), std::string::npos) << text;
  EXPECT_NE(text.find("'f2'"), std::string::npos) << text;
  EXPECT_EQ(text.find("is not fed by a gpufanout"), std::string::npos) << text;
}
