// SPDX-License-Identifier: LGPL-2.1-or-later
// gpufanout on its own, against docs/elements.md. Scenario numbers refer to
// the Scenarios of docs/testing.md.
#include <gst/check/gstharness.h>
#include <gst/video/video.h>

#include <algorithm>
#include <set>
#include <string>

#include "gpufan-rig.h"

using namespace gpufan_test;

namespace {

bool WaitAllLanesEos(FanoutRig& rig) {
  for (guint i = 0; i < rig.lanes(); i++)
    if (!rig.lane(i).log().WaitEvents(GST_EVENT_EOS))
      return false;
  return true;
}

void ExpectUintProperty(GObjectClass *klass, const char *name, guint min,
                        guint max, guint def) {
  GParamSpec *p = g_object_class_find_property(klass, name);
  ASSERT_NE(p, nullptr) << "no property " << name;
  ASSERT_TRUE(G_IS_PARAM_SPEC_UINT(p))
      << name << " is " << G_PARAM_SPEC_TYPE_NAME(p);
  EXPECT_EQ(G_PARAM_SPEC_UINT(p)->minimum, min) << name;
  EXPECT_EQ(G_PARAM_SPEC_UINT(p)->maximum, max) << name;
  EXPECT_EQ(G_PARAM_SPEC_UINT(p)->default_value, def) << name;
  EXPECT_TRUE(p->flags & G_PARAM_WRITABLE) << name;
}

std::string PadName(GstPad *pad) {
  gchar *n = gst_pad_get_name(pad);
  std::string s = n ? n : "";
  g_free(n);
  return s;
}

// Index of the first entry with this event type, or -1.
long FirstEvent(const std::vector<Entry>& entries, GstEventType type) {
  for (size_t i = 0; i < entries.size(); i++)
    if (entries[i].type() == type)
      return static_cast<long>(i);
  return -1;
}

long FirstBuffer(const std::vector<Entry>& entries) {
  for (size_t i = 0; i < entries.size(); i++)
    if (entries[i].is_buffer)
      return static_cast<long>(i);
  return -1;
}

// The state of a pad's task; STOPPED when it has none.
GstTaskState PadTaskState(GstPad *pad) {
  GST_OBJECT_LOCK(pad);
  GstTask *task =
      GST_PAD_TASK(pad) ? GST_TASK(gst_object_ref(GST_PAD_TASK(pad))) : nullptr;
  GST_OBJECT_UNLOCK(pad);
  if (!task)
    return GST_TASK_STOPPED;
  GstTaskState state = gst_task_get_state(task);
  gst_object_unref(task);
  return state;
}

const char *TaskStateName(GstTaskState state) {
  switch (state) {
    case GST_TASK_STARTED:
      return "STARTED";
    case GST_TASK_PAUSED:
      return "PAUSED";
    default:
      return "STOPPED";
  }
}

// Stops and joins test threads on every way out of a test (an ASSERT too).
class ThreadGroup {
 public:
  explicit ThreadGroup(std::atomic<bool>& stop) : stop_(stop) {}
  ~ThreadGroup() { JoinAll(); }
  void Add(std::function<void()> fn) { threads_.emplace_back(std::move(fn)); }
  void JoinAll() {
    stop_ = true;
    for (std::thread& t : threads_)
      if (t.joinable())
        t.join();
  }

 private:
  std::atomic<bool>& stop_;
  std::vector<std::thread> threads_;
};

}  // namespace

// ------------------------------------------------------------ properties ---

TEST(GpuFanoutProperties, DefaultsRangesAndFlags) {
  GstElement *f = gst_element_factory_make("gpufanout", nullptr);
  ASSERT_NE(f, nullptr);
  GObjectClass *klass = G_OBJECT_GET_CLASS(f);

  GParamSpec *policy = g_object_class_find_property(klass, "policy");
  ASSERT_NE(policy, nullptr);
  ASSERT_TRUE(G_IS_PARAM_SPEC_ENUM(policy));
  GEnumClass *e = G_PARAM_SPEC_ENUM(policy)->enum_class;
  EXPECT_EQ(e->n_values, 4u);
  for (const char *nick :
       {"round-robin", "least-loaded", "weighted", "adaptive"})
    EXPECT_NE(g_enum_get_value_by_nick(e, nick), nullptr) << nick;
  GEnumValue *def =
      g_enum_get_value(e, G_PARAM_SPEC_ENUM(policy)->default_value);
  ASSERT_NE(def, nullptr);
  EXPECT_STREQ(def->value_nick, "adaptive");
  EXPECT_TRUE(policy->flags & GST_PARAM_MUTABLE_PLAYING)
      << "policy is documented as changeable while PLAYING";

  ExpectUintProperty(klass, "queue-size", 1, 1024, 4);
  ExpectUintProperty(klass, "max-in-flight", 0, 65536, 0);
  ExpectUintProperty(klass, "stats-interval", 0, 3600000, 0);

  GParamSpec *stats = g_object_class_find_property(klass, "stats");
  ASSERT_NE(stats, nullptr);
  EXPECT_TRUE(G_IS_PARAM_SPEC_BOXED(stats));
  EXPECT_EQ(stats->value_type, GST_TYPE_STRUCTURE);
  EXPECT_TRUE(stats->flags & G_PARAM_READABLE);
  EXPECT_FALSE(stats->flags & G_PARAM_WRITABLE) << "stats is read-only";

  gst_object_unref(f);
}

TEST(GpuFanoutProperties, PolicyByNickRoundTrips) {
  GstElement *f = gst_element_factory_make("gpufanout", nullptr);
  ASSERT_NE(f, nullptr);
  GEnumClass *e = G_PARAM_SPEC_ENUM(g_object_class_find_property(
                                        G_OBJECT_GET_CLASS(f), "policy"))
                      ->enum_class;
  for (const char *nick :
       {"round-robin", "least-loaded", "weighted", "adaptive"}) {
    gst_util_set_object_arg(G_OBJECT(f), "policy", nick);
    gint value = -1;
    g_object_get(f, "policy", &value, nullptr);
    GEnumValue *v = g_enum_get_value(e, value);
    ASSERT_NE(v, nullptr);
    EXPECT_STREQ(v->value_nick, nick);
  }
  gst_object_unref(f);
}

TEST(GpuFanoutProperties, SrcPadIsGpuFanoutPadWithWeight) {
  GstElement *f = gst_element_factory_make("gpufanout", nullptr);
  ASSERT_NE(f, nullptr);
  GstPad *pad = gst_element_request_pad_simple(f, "src_%u");
  ASSERT_NE(pad, nullptr);
  EXPECT_STREQ(G_OBJECT_TYPE_NAME(pad), "GstGpuFanOutPad");
  GParamSpec *w =
      g_object_class_find_property(G_OBJECT_GET_CLASS(pad), "weight");
  ASSERT_NE(w, nullptr) << "src pads have no 'weight' property";
  ASSERT_TRUE(G_IS_PARAM_SPEC_DOUBLE(w));
  EXPECT_DOUBLE_EQ(G_PARAM_SPEC_DOUBLE(w)->minimum, 0.0);
  EXPECT_DOUBLE_EQ(G_PARAM_SPEC_DOUBLE(w)->maximum, 1000.0);
  EXPECT_DOUBLE_EQ(G_PARAM_SPEC_DOUBLE(w)->default_value, 1.0);
  g_object_set(pad, "weight", 2.5, nullptr);
  gdouble got = 0;
  g_object_get(pad, "weight", &got, nullptr);
  EXPECT_DOUBLE_EQ(got, 2.5);

  // `lane`: read-only, the lane id used in the statistics (the pad index).
  GParamSpec *lane =
      g_object_class_find_property(G_OBJECT_GET_CLASS(pad), "lane");
  ASSERT_NE(lane, nullptr) << "src pads have no 'lane' property";
  EXPECT_TRUE(G_IS_PARAM_SPEC_UINT(lane));
  EXPECT_FALSE(lane->flags & G_PARAM_WRITABLE);
  GstPad *p7 = gst_element_request_pad_simple(f, "src_7");
  ASSERT_NE(p7, nullptr);
  guint id = 0;
  g_object_get(p7, "lane", &id, nullptr);
  EXPECT_EQ(id, 7u);
  for (GstPad *p : {pad, p7}) {
    gst_element_release_request_pad(f, p);
    gst_object_unref(p);
  }
  gst_object_unref(f);
}

// ------------------------------------------------------- pads (scenario 2) ---

TEST(GpuFanoutPads, RequestNamingLowestFreeAndExplicit) {
  CheckRequestPadNaming("gpufanout", "src_", 100);
}

TEST(GpuFanoutPads, StreamSinkPadsNamingLowestFreeAndExplicit) {
  CheckRequestPadNaming("gpufanout", "sink_", 100);
}

TEST(GpuFanoutPads, UnknownTemplateRefused) {
  GstElement *f = gst_element_factory_make("gpufanout", nullptr);
  ASSERT_NE(f, nullptr);
  // (Duplicate explicit names and foreign templates are refused by the core
  // itself, with a critical, before the element is asked.)
  EXPECT_EQ(gst_element_request_pad_simple(f, "video_%u"), nullptr);
  EXPECT_EQ(gst_element_request_pad_simple(f, "sink"), nullptr);
  EXPECT_EQ(f->numsrcpads, 0);
  EXPECT_EQ(f->numsinkpads, 1);
  gst_object_unref(f);
}

// ------------------------------------------------------ data distribution ---

// Scenario 1: 15 lanes, each `queue ! fakesink`.
TEST(GpuFanoutData, FifteenQueueLanesGetEveryBufferExactlyOnce) {
  constexpr int kLanes = 15;
  constexpr int kBuffers = 600;
  std::string desc =
      "videotestsrc name=src num-buffers=" + std::to_string(kBuffers) +
      " ! video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1"
      " ! gpufanout name=f";
  for (int i = 0; i < kLanes; i++) {
    desc += " f.src_" + std::to_string(i) + " ! queue ! fakesink name=sink" +
            std::to_string(i) + " sync=false";
  }
  LaunchedPipeline p(desc);
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  std::vector<RecordLog *> lanes;
  for (int i = 0; i < kLanes; i++)
    lanes.push_back(&p.Record(("sink" + std::to_string(i)).c_str(), "sink"));
  ASSERT_TRUE(p.Play());
  GstMessage *m = p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr) << "no EOS within the wait";
  ASSERT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_EOS) << p.bus().ErrorsText();

  std::vector<int64_t> all;
  for (int i = 0; i < kLanes; i++) {
    std::vector<int64_t> v = lanes[i]->BufferIndices();
    EXPECT_TRUE(IsStrictlyIncreasing(v)) << "lane " << i << " is not FIFO";
    EXPECT_EQ(lanes[i]->Events(GST_EVENT_EOS), 1u) << "lane " << i;
    std::vector<Entry> entries = lanes[i]->Snapshot();
    ASSERT_FALSE(entries.empty());
    EXPECT_EQ(entries.back().type(), GST_EVENT_EOS)
        << "lane " << i << ": EOS not last";
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_TRUE(IsSequence(all, 0, kBuffers))
      << "every buffer exactly once over all lanes";
}

TEST(GpuFanoutData, RoundRobinGivesEachLaneItsTurn) {
  FanoutRig rig(3, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 30));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  for (guint i = 0; i < 3; i++) {
    std::vector<int64_t> v = rig.lane(i).log().BufferIndices();
    ASSERT_EQ(v.size(), 10u)
        << "lane " << i << ": " << rig.lane(i).log().Summary();
    for (size_t k = 1; k < v.size(); k++)
      EXPECT_EQ(v[k] - v[k - 1], 3)
          << "lane " << i << ": " << rig.lane(i).log().Summary();
  }
  EXPECT_TRUE(IsSequence(rig.AllIndicesSorted(), 0, 30));
}

TEST(GpuFanoutData, WeightedFollowsWeightsAndZeroExcludes) {
  FanoutRig rig(3, "weighted");
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.lane_pad(0), "weight", 1.0, nullptr);
  g_object_set(rig.lane_pad(1), "weight", 0.0, nullptr);
  g_object_set(rig.lane_pad(2), "weight", 3.0, nullptr);
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 40));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  EXPECT_EQ(rig.lane(1).log().Buffers(), 0u)
      << "weight 0 must exclude the lane";
  // Smooth weighted round-robin over 1:3, 40 items.
  EXPECT_EQ(rig.lane(0).log().Buffers(), 10u);
  EXPECT_EQ(rig.lane(2).log().Buffers(), 30u);
  EXPECT_TRUE(IsSequence(rig.AllIndicesSorted(), 0, 40));
}

TEST(GpuFanoutData, PolicyChangeWhilePlayingKeepsEveryBuffer) {
  FanoutRig rig(3, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  uint64_t next = 0;
  for (const char *nick :
       {"least-loaded", "weighted", "adaptive", "round-robin"}) {
    ASSERT_TRUE(PushRange(rig.source(), next, 20));
    next += 20;
    gst_util_set_object_arg(G_OBJECT(rig.fanout()), "policy", nick);
  }
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  EXPECT_TRUE(IsSequence(rig.AllIndicesSorted(), 0, next));
}

// Scenario 14.
TEST(GpuFanoutEvents, InitialEventsGoOutWithoutABuffer) {
  FanoutRig rig(2);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  for (guint i = 0; i < 2; i++) {
    RecordLog& log = rig.lane(i).log();
    EXPECT_TRUE(log.WaitEvents(GST_EVENT_SEGMENT))
        << "lane " << i
        << " got no segment without a buffer: " << log.Summary();
    std::vector<Entry> e = log.Snapshot();
    long ss = FirstEvent(e, GST_EVENT_STREAM_START),
         caps = FirstEvent(e, GST_EVENT_CAPS),
         seg = FirstEvent(e, GST_EVENT_SEGMENT);
    EXPECT_TRUE(ss >= 0 && caps > ss && seg > caps)
        << "lane " << i << ": " << log.Summary();
    EXPECT_EQ(log.Buffers(), 0u);
  }
}

// Scenario 8.
TEST(GpuFanoutEvents, LaneAddedMidStreamGetsStickyEventsFirst) {
  FanoutRig rig(1, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 5));
  ASSERT_TRUE(rig.lane(0).log().WaitBuffers(5));

  const guint added = rig.AddLane(true);
  ASSERT_TRUE(PushRange(rig.source(), 5, 20));
  ASSERT_TRUE(rig.lane(added).log().WaitBuffers(1))
      << "the lane added while PLAYING got no buffer (round-robin)";

  std::vector<Entry> e = rig.lane(added).log().Snapshot();
  long first_buffer = FirstBuffer(e);
  long ss = FirstEvent(e, GST_EVENT_STREAM_START),
       caps = FirstEvent(e, GST_EVENT_CAPS),
       seg = FirstEvent(e, GST_EVENT_SEGMENT);
  EXPECT_TRUE(ss >= 0 && caps > ss && seg > caps && first_buffer > seg)
      << "new lane: " << rig.lane(added).log().Summary();
  if (caps >= 0) {
    GstCaps *got;
    gst_event_parse_caps(e[caps].event, &got);
    GstCaps *want = gst_caps_from_string(kTestCaps);
    EXPECT_TRUE(gst_caps_is_equal(got, want));
    gst_caps_unref(want);
  }
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  EXPECT_TRUE(IsSequence(rig.AllIndicesSorted(), 0, 25));
}

TEST(GpuFanoutEvents, SerializedEventReachesEveryLaneInOrder) {
  FanoutRig rig(3, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 6));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_custom(
      GST_EVENT_CUSTOM_DOWNSTREAM, gst_structure_new_empty("test-marker"))));
  ASSERT_TRUE(PushRange(rig.source(), 6, 6));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));

  for (guint i = 0; i < 3; i++) {
    std::vector<Entry> e = rig.lane(i).log().Snapshot();
    const std::string summary = rig.lane(i).log().Summary();
    long marker = FirstEvent(e, GST_EVENT_CUSTOM_DOWNSTREAM);
    ASSERT_GE(marker, 0) << "lane " << i
                         << " never got the marker: " << summary;
    EXPECT_EQ(rig.lane(i).log().Events(GST_EVENT_CUSTOM_DOWNSTREAM), 1u);
    for (long k = 0; k < static_cast<long>(e.size()); k++) {
      if (!e[k].is_buffer)
        continue;
      if (k < marker)
        EXPECT_LT(e[k].index, 6) << "lane " << i << ": " << summary;
      else
        EXPECT_GE(e[k].index, 6) << "lane " << i << ": " << summary;
    }
    EXPECT_EQ(e.back().type(), GST_EVENT_EOS)
        << "lane " << i << ": " << summary;
  }
  EXPECT_TRUE(IsSequence(rig.AllIndicesSorted(), 0, 12));
}

TEST(GpuFanoutEvents, GapEventsGoToOneLaneEach) {
  FanoutRig rig(3, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  for (int i = 0; i < 10; i++)
    ASSERT_TRUE(rig.source().PushEvent(gst_event_new_gap(i * kFrame, kFrame)));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  std::vector<int64_t> gaps;
  for (guint i = 0; i < 3; i++) {
    for (const Entry& e : rig.lane(i).log().Snapshot())
      if (e.type() == GST_EVENT_GAP)
        gaps.push_back(e.index);
  }
  std::sort(gaps.begin(), gaps.end());
  EXPECT_TRUE(IsSequence(gaps, 0, 10))
      << "each GAP must reach exactly one lane";
}

TEST(GpuFanoutEvents, FlushReachesEveryLaneAndDataResumes) {
  FanoutRig rig(3);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 6));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_start()));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_stop(TRUE)));
  for (guint i = 0; i < 3; i++) {
    EXPECT_TRUE(rig.lane(i).log().WaitEvents(GST_EVENT_FLUSH_STOP))
        << "lane " << i;
    EXPECT_EQ(rig.lane(i).log().Events(GST_EVENT_FLUSH_START), 1u)
        << "lane " << i;
  }
  ASSERT_TRUE(rig.source().PushSegment());
  ASSERT_TRUE(PushRange(rig.source(), 6, 6));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  std::vector<int64_t> all = rig.AllIndicesSorted();
  std::set<int64_t> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size()) << "a buffer reached two lanes";
  for (int64_t i = 6; i < 12; i++)
    EXPECT_EQ(unique.count(i), 1u) << "buffer " << i;
}

// A flush drops the buffers a lane had queued, but not the sticky events
// queued with them (GstQueue stores those on its src pad): the lane's next
// buffer still goes out under the latest caps.
TEST(GpuFanoutEvents, StickyEventsQueuedAtAFlushAreNotLost) {
  const char *caps_b =
      "video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1";
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  rig.lane(1).Block();
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start(kTestCaps));
  ASSERT_TRUE(PushRange(rig.source(), 0, 2));
  ASSERT_TRUE(rig.lane(1).log().WaitBuffers(
      1));  // lane 1's worker now waits in buffer 1
  GstCaps *b = gst_caps_from_string(caps_b);
  ASSERT_TRUE(rig.source().PushEvent(
      gst_event_new_caps(b)));  // queued behind it on lane 1
  ASSERT_TRUE(rig.lane(0).log().WaitEvents(GST_EVENT_CAPS, 2));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_start()));
  rig.lane(1).Unblock();
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_stop(TRUE)));
  ASSERT_TRUE(rig.source().PushSegment());
  ASSERT_TRUE(PushRange(rig.source(), 2, 4));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  for (guint i = 0; i < 2; i++) {
    GstCaps *current = nullptr;
    for (const Entry& e : rig.lane(i).log().Snapshot()) {
      if (e.type() == GST_EVENT_CAPS)
        gst_event_parse_caps(e.event, &current);
      if (e.is_buffer && e.index >= 2) {
        ASSERT_NE(current, nullptr);
        EXPECT_TRUE(gst_caps_is_equal(current, b))
            << "lane " << i << ": buffer " << e.index
            << " after the flush went out under "
            << "the old caps: " << rig.lane(i).log().Summary();
      }
    }
  }
  gst_caps_unref(b);
}

// Scenario 13.
TEST(GpuFanoutEvents, EachLaneWorkerPostsStreamStatus) {
  FanoutRig rig(3);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 6));
  std::set<const void *> tasks;
  for (guint i = 0; i < 3; i++) {
    GstPad *pad = rig.lane_pad(i);
    GstMessage *m = rig.bus().WaitFor([pad](GstMessage *m) {
      if (GST_MESSAGE_TYPE(m) != GST_MESSAGE_STREAM_STATUS)
        return false;
      GstStreamStatusType type;
      GstElement *owner;
      gst_message_parse_stream_status(m, &type, &owner);
      return type == GST_STREAM_STATUS_TYPE_ENTER &&
             GST_MESSAGE_SRC(m) == GST_OBJECT(pad);
    });
    ASSERT_NE(m, nullptr) << "no stream-status ENTER from " << PadName(pad);
    GstStreamStatusType type;
    GstElement *owner = nullptr;
    gst_message_parse_stream_status(m, &type, &owner);
    EXPECT_EQ(owner, rig.fanout());
    const GValue *obj = gst_message_get_stream_status_object(m);
    ASSERT_NE(obj, nullptr);
    ASSERT_TRUE(G_VALUE_HOLDS(obj, GST_TYPE_TASK));
    tasks.insert(g_value_get_object(obj));
  }
  EXPECT_EQ(tasks.size(), 3u) << "one task per lane";
}

// ------------------------------------------------- flow returns (scenario 5)
// ---

TEST(GpuFanoutFlow, OneFlushingLaneGivesFlushingThenAFlushRecovers) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  rig.lane(1).SetFlow(GST_FLOW_FLUSHING);
  EXPECT_TRUE(PushUntil(rig.source(), 0, 40, GST_FLOW_FLUSHING).has_value())
      << "the chain never returned FLUSHING while lane 1 returns FLUSHING";

  rig.lane(1).SetFlow(GST_FLOW_OK);
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_start()));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_stop(TRUE)));
  ASSERT_TRUE(rig.source().PushSegment());
  ASSERT_TRUE(PushRange(rig.source(), 100, 10));
  EXPECT_TRUE(rig.lane(1).log().WaitFor([](const std::vector<Entry>& e) {
    return std::any_of(e.begin(), e.end(), [](const Entry& x) {
      return x.is_buffer && x.index >= 100;
    });
  })) << "lane 1 gets no data after the flush";
}

TEST(GpuFanoutFlow, OneErrorLaneGivesErrorAndAnErrorMessageNamingTheLane) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  rig.lane(1).SetFlow(GST_FLOW_ERROR);
  std::optional<uint64_t> n = PushUntil(rig.source(), 0, 40, GST_FLOW_ERROR);
  ASSERT_TRUE(n.has_value())
      << "the chain never returned ERROR while lane 1 returns ERROR";
  std::optional<GstFlowReturn> again = rig.source().PushIndex(*n);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, GST_FLOW_ERROR)
      << "a lane's error is sticky until relink/flush";

  GstMessage *m = rig.bus().WaitFor([&](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR &&
           GST_MESSAGE_SRC(m) == GST_OBJECT(rig.fanout());
  });
  ASSERT_NE(m, nullptr) << "no ERROR message from gpufanout; bus: "
                        << rig.bus().ErrorsText();
  std::string text = BusLog::ErrorText(m);
  EXPECT_NE(text.find("lane 1"), std::string::npos) << text;
  EXPECT_NE(text.find("src_1"), std::string::npos) << text;
}

TEST(GpuFanoutFlow, NotLinkedOnlyWhenEveryLaneIsUnlinkedAndRelinkRecovers) {
  FanoutRig rig(0, "round-robin");
  ASSERT_TRUE(rig.ok());
  rig.AddLane(true);
  rig.AddLane(false);  // lane 1 never linked
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 20));

  rig.UnlinkLane(0);
  EXPECT_TRUE(PushUntil(rig.source(), 20, 40, GST_FLOW_NOT_LINKED).has_value())
      << "no NOT_LINKED with every lane unlinked";

  ASSERT_TRUE(rig.LinkLane(0));
  std::optional<uint64_t> n = PushUntil(rig.source(), 100, 20, GST_FLOW_OK);
  ASSERT_TRUE(n.has_value()) << "no recovery after relinking lane 0";
  ASSERT_TRUE(PushRange(rig.source(), 200, 5));
  EXPECT_TRUE(rig.lane(0).log().WaitFor([](const std::vector<Entry>& e) {
    return std::any_of(e.begin(), e.end(), [](const Entry& x) {
      return x.is_buffer && x.index >= 200;
    });
  }));
}

TEST(GpuFanoutFlow, EosOnlyWhenEveryLaneReturnedEos) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  rig.lane(1).SetFlow(GST_FLOW_EOS);
  ASSERT_TRUE(PushRange(rig.source(), 0, 20));
  rig.lane(0).SetFlow(GST_FLOW_EOS);
  EXPECT_TRUE(PushUntil(rig.source(), 20, 40, GST_FLOW_EOS).has_value())
      << "no EOS with every lane returning EOS";
}

// Scenario 6 (with GstHarness: upstream is the harness, no src pads at all).
TEST(GpuFanoutFlow, NoLanesGivesNotLinkedAndKeepsTheBufferIntact) {
  GstHarness *h = gst_harness_new_with_padnames("gpufanout", "sink", nullptr);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, kTestCaps);
  GstBuffer *buffer = MakeIndexedBuffer(0);
  gst_buffer_ref(buffer);
  EXPECT_EQ(gst_harness_push(h, buffer), GST_FLOW_NOT_LINKED);
  EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(buffer), 1)
      << "the chain must drop its ref only";
  EXPECT_EQ(DataIndex(buffer), 0);
  gst_buffer_unref(buffer);
  // Ownership given away: the leaks tracer checks it is freed.
  EXPECT_EQ(gst_harness_push(h, MakeIndexedBuffer(1)), GST_FLOW_NOT_LINKED);
  gst_harness_teardown(h);
}

// ------------------------------------------------------- back-pressure ---

TEST(GpuFanoutFlow, BlockedLaneBoundsAcceptedBuffersByQueueSize) {
  FanoutRig rig(1, "round-robin");
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "queue-size", 2u, "max-in-flight", 100u, nullptr);
  rig.lane(0).Block();
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  rig.source().PushIndicesAsync(0, 10, false);
  ASSERT_TRUE(rig.lane(0).log().WaitBuffers(1));
  ASSERT_TRUE(rig.source().WaitAsyncResults(2));
  std::this_thread::sleep_for(kSettle);
  const size_t accepted = rig.source().AsyncResults().size();
  // One buffer in the branch, queue-size queued, one more of slack for an
  // implementation that dequeues before pushing.
  EXPECT_GE(accepted, 2u);
  EXPECT_LE(accepted, 4u)
      << "queue-size=2 does not bound what a blocked lane accepts";
  rig.lane(0).Unblock();
  ASSERT_TRUE(rig.source().WaitAsyncResults(10))
      << "pushes stay blocked after unblocking";
  for (GstFlowReturn r : rig.source().AsyncResults())
    EXPECT_EQ(r, GST_FLOW_OK);
  ASSERT_TRUE(rig.lane(0).log().WaitBuffers(10));
  EXPECT_TRUE(IsSequence(rig.lane(0).log().BufferIndices(), 0, 10));
}

TEST(GpuFanoutFlow, MaxInFlightBoundsAcceptedBuffers) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "queue-size", 8u, "max-in-flight", 3u, nullptr);
  rig.lane(0).Block();
  rig.lane(1).Block();
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  rig.source().PushIndicesAsync(0, 10, false);
  ASSERT_TRUE(rig.lane(0).log().WaitBuffers(1));
  ASSERT_TRUE(rig.lane(1).log().WaitBuffers(1));
  ASSERT_TRUE(rig.source().WaitAsyncResults(3));
  std::this_thread::sleep_for(kSettle);
  EXPECT_EQ(rig.source().AsyncResults().size(), 3u)
      << "max-in-flight=3 must hold the 4th buffer back";
  rig.lane(0).Unblock();
  rig.lane(1).Unblock();
  ASSERT_TRUE(rig.source().WaitAsyncResults(10));
  for (GstFlowReturn r : rig.source().AsyncResults())
    EXPECT_EQ(r, GST_FLOW_OK);
}

// ------------------------------------------------------- allocation (7) ---

TEST(GpuFanoutQueries, AllocationQueryAggregatesLanesPlusInFlight) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "max-in-flight", 8u, nullptr);
  rig.lane(0).SetAllocationAnswer(
      1000, 2, 10, {GST_VIDEO_META_API_TYPE, GST_VIDEO_CROP_META_API_TYPE});
  rig.lane(1).SetAllocationAnswer(2000, 3, 0, {GST_VIDEO_META_API_TYPE});
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());

  GstCaps *caps = gst_caps_from_string(kTestCaps);
  bool answered = false;
  GstQuery *q =
      rig.source().PeerQuery(gst_query_new_allocation(caps, TRUE), &answered);
  gst_caps_unref(caps);
  ASSERT_NE(q, nullptr) << "the allocation query did not return";
  EXPECT_TRUE(answered) << "allocation query refused";
  ASSERT_GE(gst_query_get_n_allocation_pools(q), 1u);
  guint size = 0, min = 0, max = 0;
  gst_query_parse_nth_allocation_pool(q, 0, nullptr, &size, &min, &max);
  EXPECT_EQ(size, 2000u) << "largest size of the lanes";
  EXPECT_EQ(min, 3u + 8u) << "largest min-buffers + max-in-flight";
  EXPECT_TRUE(max == 0 || max >= min) << "max " << max << " < min " << min;
  EXPECT_TRUE(
      gst_query_find_allocation_meta(q, GST_VIDEO_META_API_TYPE, nullptr))
      << "a meta every lane supports must be kept";
  EXPECT_FALSE(
      gst_query_find_allocation_meta(q, GST_VIDEO_CROP_META_API_TYPE, nullptr))
      << "a meta one lane lacks must be dropped";
  gst_query_unref(q);
}

// Scenario 9: serialized queries racing a FLUSH_START (as a seek does it:
// FLUSH_START from another thread, FLUSH_STOP once the streaming thread is
// back), looped. Every query must return; data flows afterwards.
TEST(GpuFanoutQueries, QueriesRacingFlushStartNeverHang) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  for (guint i = 0; i < 2; i++)
    rig.lane(i).SetAllocationAnswer(64, 1, 0, {});
  rig.lane(1).Block();  // a busy lane: drain has something to wait for
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  GstCaps *caps = gst_caps_from_string(kTestCaps);
  for (int i = 0; i < 100; i++) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    rig.source().PushIndicesAsync(static_cast<uint64_t>(i) * 2, 2, false);
    std::atomic<bool> returned{false};
    std::thread querier([&] {
      bool answered = false;
      GstQuery *q = (i % 2) ? gst_query_new_drain()
                            : gst_query_new_allocation(caps, TRUE);
      GstQuery *r = rig.source().PeerQuery(q, &answered);
      if (r) {
        returned = true;
        gst_query_unref(r);
      }
    });
    if (i % 3 == 0)
      std::this_thread::yield();
    EXPECT_TRUE(
        gst_pad_push_event(rig.source().pad(), gst_event_new_flush_start()));
    querier.join();
    ASSERT_TRUE(returned) << "a query hung across FLUSH_START";
    ASSERT_TRUE(rig.source().PushEvent(gst_event_new_flush_stop(TRUE)));
    ASSERT_TRUE(rig.source().PushSegment());
  }
  gst_caps_unref(caps);
  rig.lane(1).Unblock();
  ASSERT_TRUE(PushRange(rig.source(), 1000, 6));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
}

// Scenario 12: a lane's sink goes to NULL while data is queued: the stream
// may stop (FLUSHING), but nobody posts an ERROR and shutdown works.
TEST(GpuFanoutStress, LaneSinkGoingToNullPostsNoError) {
  LaunchedPipeline p(
      "videotestsrc name=src ! "
      "video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1"
      " ! gpufanout name=f policy=round-robin"
      "  f.src_0 ! queue ! fakesink name=s0 sync=false"
      "  f.src_1 ! queue max-size-buffers=50 ! fakesink name=s1 sync=false");
  ASSERT_TRUE(p.ok());
  RecordLog& s0 = p.Record("s0", "sink");
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(s0.WaitBuffers(50));
  GstElement *s1 = p.element("s1");
  gst_element_set_locked_state(s1, TRUE);
  EXPECT_NE(gst_element_set_state(s1, GST_STATE_NULL),
            GST_STATE_CHANGE_FAILURE);
  std::this_thread::sleep_for(kSettle);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  ASSERT_TRUE(p.Stop());
  gst_element_set_locked_state(s1, FALSE);
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
}

// ------------------------------------------------- lanes come and go (3) ---

TEST(GpuFanoutStress, RequestAndReleaseLanesWhilePlayingEndsInEos) {
  LaunchedPipeline p(
      "videotestsrc name=src ! "
      "video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1"
      " ! gpufanout name=f  f.src_0 ! queue ! fakesink name=sink sync=false");
  ASSERT_TRUE(p.ok());
  p.Stamp("src", "src");
  RecordLog& sink = p.Record("sink", "sink");
  ASSERT_TRUE(p.Play());
  ASSERT_TRUE(sink.WaitBuffers(10));
  GstElement *f = p.element("f");
  for (int i = 0; i < 2000; i++) {
    GstPad *pad = gst_element_request_pad_simple(f, "src_%u");
    ASSERT_NE(pad, nullptr) << "iteration " << i;
    {
      PadCollector lane("stress");
      if (i % 2 == 0) {
        ASSERT_EQ(gst_pad_link(pad, lane.pad()), GST_PAD_LINK_OK);
        if (i % 100 == 0)
          lane.log().WaitBuffers(1, Duration(50));
        gst_pad_unlink(pad, lane.pad());
      }
      gst_element_release_request_pad(f, pad);
    }
    gst_object_unref(pad);
  }
  const size_t before_eos = sink.Buffers();
  ASSERT_TRUE(gst_element_send_event(p.get(), gst_event_new_eos()));
  GstMessage *m = p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr) << "no EOS after the stress";
  EXPECT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_EOS) << p.bus().ErrorsText();
  EXPECT_EQ(p.bus().CountType(GST_MESSAGE_ERROR), 0u) << p.bus().ErrorsText();
  EXPECT_GE(sink.Buffers(), before_eos);
  EXPECT_TRUE(IsStrictlyIncreasing(sink.BufferIndices()));
}

// ------------------------------------------------------------------ stats ---

TEST(GpuFanoutStats, PropertyHasDocumentedFieldsAndCounts) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 10));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));

  GstStructure *s = GetStats(rig.fanout());
  ASSERT_TRUE(HasStatsShape(s, 2));
  EXPECT_STREQ(gst_structure_get_string(s, "policy"), "round-robin");
  EXPECT_EQ(StatsU64(s, "dispatched"), 10u);
  EXPECT_EQ(SumLanesU64(s, "dispatched"), 10u);
  EXPECT_EQ(SumLanesU64(s, "completed"), 10u)
      << "no fan-in: pushed items count as completed";
  EXPECT_EQ(SumLanesU64(s, "failed"), 0u);
  EXPECT_EQ(StatsU64(s, "released"), 0u)
      << "released counts the reorder window: 0 without a fan-in";
  guint in_flight = 99, max_in_flight = 0;
  gst_structure_get_uint(s, "in-flight", &in_flight);
  gst_structure_get_uint(s, "max-in-flight", &max_in_flight);
  EXPECT_EQ(in_flight, 0u);
  guint queue_limits = 0;
  for (guint i = 0; i < 2; i++) {
    guint queue_limit = 0;
    gst_structure_get_uint(StatsLane(s, i), "queue-limit", &queue_limit);
    EXPECT_GE(queue_limit, 4u) << "lane " << i << ": at least queue-size";
    EXPECT_LE(queue_limit, 16u) << "lane " << i << ": at most 4 x queue-size";
    queue_limits += queue_limit;
  }
  // auto: each lane's deepest queue limit so far + 2 (it never shrinks)
  EXPECT_GE(max_in_flight, queue_limits + 2u * 2u);
  EXPECT_LE(max_in_flight, 2u * (16u + 2u));
  for (guint i = 0; i < 2; i++) {
    const GstStructure *lane = StatsLane(s, i);
    guint id = 99;
    gst_structure_get_uint(lane, "lane", &id);
    EXPECT_EQ(id, i);
    const char *device = gst_structure_get_string(lane, "device");
    EXPECT_TRUE(device && *device) << "lane " << i << " has no device name";
    gdouble weight = 0;
    gst_structure_get_double(lane, "weight", &weight);
    EXPECT_DOUBLE_EQ(weight, 1.0);
    EXPECT_EQ(StatsU64(lane, "dispatched"), 5u) << "round-robin over 2 lanes";
    gboolean claimed = TRUE;
    gst_structure_get_boolean(lane, "claimed", &claimed);
    EXPECT_FALSE(claimed) << "no fan-in claims lane " << i;
  }
  gst_structure_free(s);
}

TEST(GpuFanoutStats, WithoutFaninTheFanoutPostsStatsAtEos) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 10));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  GstMessage *m = rig.bus().WaitFor([](GstMessage *m) {
    return BusLog::IsElementMessage(m, "gpufan-stats");
  });
  ASSERT_NE(m, nullptr)
      << "no gpufan-stats message after every lane pushed EOS";
  EXPECT_EQ(GST_MESSAGE_SRC(m), GST_OBJECT(rig.fanout()));
  const GstStructure *s = gst_message_get_structure(m);
  EXPECT_TRUE(HasStatsShape(s, 2));
  EXPECT_EQ(StatsU64(s, "dispatched"), 10u);
}

TEST(GpuFanoutStats, StatsIntervalPostsPeriodically) {
  FanoutRig rig(1);
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "stats-interval", 20u, nullptr);
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  // Buffers keep flowing for longer than the interval several times over
  // (whether the element posts from a timer or from the data path).
  for (uint64_t i = 0; i < 6; i++) {
    ASSERT_TRUE(PushRange(rig.source(), i, 1));
    std::this_thread::sleep_for(Duration(30));
  }
  auto is_stats = [](GstMessage *m) {
    return BusLog::IsElementMessage(m, "gpufan-stats");
  };
  EXPECT_TRUE(rig.bus().WaitForCount(is_stats, 2))
      << "stats-interval=20 posted " << rig.bus().Count(is_stats)
      << " messages";
}

// Scenario 4 (funnel.c test_funnel_stress): one thread requests and releases
// src pads while two threads push into the sink pad, for a second (and at
// least one round each). Two lanes stay linked throughout, so every push
// returns OK; each pusher's buffers stay FIFO on those lanes, none is
// duplicated, and the stream ends in EOS.
TEST(GpuFanoutStress, RequestAndReleasePadsWhileTwoThreadsPush) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());

  constexpr int64_t kSecondPusher = int64_t{1} << 40;  // its index range
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> pushed[2];
  pushed[0] = pushed[1] = 0;
  std::atomic<int> cycles{0};
  std::mutex mutex;
  std::vector<std::string> problems;
  auto problem = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    problems.push_back(what);
  };
  GstElement *f = rig.fanout();
  GstPad *upstream = rig.source().pad();
  {
    ThreadGroup threads(stop);
    for (int k = 0; k < 2; k++) {
      threads.Add([&, k] {
        for (uint64_t i = 0; !stop; i++) {
          GstFlowReturn r =
              gst_pad_push(upstream, MakeIndexedBuffer(k * kSecondPusher + i));
          pushed[k]++;
          if (r != GST_FLOW_OK) {
            problem("pusher " + std::to_string(k) + ", buffer " +
                    std::to_string(i) + ": " + gst_flow_get_name(r));
            return;
          }
        }
      });
    }
    threads.Add([&] {
      for (int i = 0; !stop; i++) {
        GstPad *pad = gst_element_request_pad_simple(f, "src_%u");
        if (!pad) {
          problem("src_%u request refused");
          return;
        }
        {
          PadCollector lane("stress");
          if (i % 2 == 0 && gst_pad_link(pad, lane.pad()) == GST_PAD_LINK_OK) {
            if (i % 8 == 0)
              lane.log().WaitBuffers(1, Duration(2));
            gst_pad_unlink(pad, lane.pad());
          }
          gst_element_release_request_pad(f, pad);
        }
        gst_object_unref(pad);
        cycles++;
      }
    });
    // A second, and then on until each thread has done a round (bounded):
    // how many rounds fit in a second depends on the machine.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    PollUntil([&] {
      std::lock_guard<std::mutex> lock(mutex);
      return !problems.empty() ||
             (cycles > 0 && pushed[0] > 0 && pushed[1] > 0);
    });
  }  // stops and joins the three threads

  EXPECT_TRUE(problems.empty())
      << problems.size()
      << " problem(s), first: " << (problems.empty() ? "" : problems[0]);
  EXPECT_GT(cycles.load(), 0);
  EXPECT_GT(pushed[0].load(), 0u);
  EXPECT_GT(pushed[1].load(), 0u);
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  for (guint i = 0; i < 2; i++) {
    std::vector<int64_t> first, second;
    for (int64_t x : rig.lane(i).log().BufferIndices())
      (x >= kSecondPusher ? second : first).push_back(x);
    EXPECT_TRUE(IsStrictlyIncreasing(first)) << "lane " << i << ", pusher 0";
    EXPECT_TRUE(IsStrictlyIncreasing(second)) << "lane " << i << ", pusher 1";
  }
  std::vector<int64_t> all = rig.AllIndicesSorted();
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), all.size())
      << "a buffer reached a lane twice";
  EXPECT_GT(all.size(), 0u);
  EXPECT_EQ(rig.bus().CountType(GST_MESSAGE_ERROR), 0u)
      << rig.bus().ErrorsText();
}

// Scenario 10: a FLUSH_STOP that arrives while the element goes PAUSED->READY
// (its src pads are deactivated first, the sink pad is still active) must not
// restart a lane worker. First that window on its own (the src pads
// deactivated by hand, as GstElement does before the sink pad), then the real
// state change racing flushes from another thread, looped.
TEST(GpuFanoutStates, FlushStopDuringPausedToReadyDoesNotRestartAWorker) {
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 0, 4));
  ASSERT_TRUE(SetStateAndWait(rig.pipeline(), GST_STATE_PAUSED));
  // A FLUSH_START that reaches a test sink whose FLUSH_STOP is then stopped
  // by the inactive lane leaves it flushing; a real downstream element is
  // reset by its own state change, the test sinks are reset by hand.
  auto reset_lane_sinks = [&rig] {
    for (guint i = 0; i < 2; i++) {
      gst_pad_set_active(rig.lane(i).pad(), FALSE);
      gst_pad_set_active(rig.lane(i).pad(), TRUE);
    }
  };
  for (guint i = 0; i < 2; i++)
    ASSERT_TRUE(gst_pad_set_active(rig.lane_pad(i), FALSE));
  // (The flush events cannot reach the inactive lanes: their result is moot.)
  rig.source().PushEvent(gst_event_new_flush_start());
  rig.source().PushEvent(gst_event_new_flush_stop(TRUE));
  for (guint i = 0; i < 2; i++) {
    const GstTaskState state = PadTaskState(rig.lane_pad(i));
    EXPECT_EQ(state, GST_TASK_STOPPED)
        << "FLUSH_STOP restarted lane " << i
        << "'s worker on an inactive pad: " << TaskStateName(state);
  }
  ASSERT_TRUE(SetStateAndWait(rig.pipeline(), GST_STATE_READY));
  for (guint i = 0; i < 2; i++) {
    const GstTaskState state = PadTaskState(rig.lane_pad(i));
    EXPECT_EQ(state, GST_TASK_STOPPED)
        << "lane " << i << "'s worker runs in READY: " << TaskStateName(state);
  }

  GstPad *upstream = rig.source().pad();
  for (int iteration = 0; iteration < 1000; iteration++) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    reset_lane_sinks();
    ASSERT_TRUE(rig.Play());
    ASSERT_TRUE(rig.source().Start());
    ASSERT_TRUE(PushRange(rig.source(), 0, 2));
    std::atomic<bool> go{false};
    std::thread flusher([&] {
      while (!go)
        std::this_thread::yield();
      for (int k = 0; k < 4; k++) {
        gst_pad_push_event(upstream, gst_event_new_flush_start());
        gst_pad_push_event(upstream, gst_event_new_flush_stop(TRUE));
      }
    });
    go = true;
    const bool ready = SetStateAndWait(rig.pipeline(), GST_STATE_READY);
    flusher.join();
    ASSERT_TRUE(ready);
    for (guint i = 0; i < 2; i++) {
      const GstTaskState state = PadTaskState(rig.lane_pad(i));
      ASSERT_EQ(state, GST_TASK_STOPPED)
          << "a FLUSH_STOP during PAUSED->READY restarted lane " << i
          << "'s worker on its deactivated pad (task " << TaskStateName(state)
          << " in READY)";
    }
  }

  // Still works afterwards.
  reset_lane_sinks();
  for (guint i = 0; i < 2; i++)
    rig.lane(i).log().Clear();
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());
  ASSERT_TRUE(PushRange(rig.source(), 100, 4));
  ASSERT_TRUE(rig.source().PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(WaitAllLanesEos(rig));
  EXPECT_TRUE(IsSequence(rig.AllIndicesSorted(), 100, 4));
  EXPECT_EQ(rig.bus().CountType(GST_MESSAGE_ERROR), 0u)
      << rig.bus().ErrorsText();
}

// Scenario 11 (queue MR 5023): upstream allocates from a fixed-size pool and
// blocks in acquire once every pool buffer is queued on lane 1, whose branch
// is stuck; the branch then returns ERROR. The lane's queued buffers must go
// back to the pool, so upstream wakes up, and its next push returns ERROR.
TEST(GpuFanoutFlow, ErrorLaneReleasesUpstreamBlockedInPoolAcquire) {
  constexpr guint kPoolSize = 3;  // < queue-size: lane 1 alone drains the pool
  FanoutRig rig(2, "round-robin");
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "queue-size", 4u, nullptr);
  GstBufferPool *pool = gst_buffer_pool_new();
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, nullptr, 16, kPoolSize, kPoolSize);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  // Runs before the rig's teardown: deactivating the pool wakes an acquire
  // that would otherwise keep the pushing thread (and so the test) waiting.
  std::unique_ptr<GstBufferPool, void (*)(GstBufferPool *)> pool_guard(
      pool, [](GstBufferPool *p) {
        gst_buffer_pool_set_active(p, FALSE);
        gst_object_unref(p);
      });
  rig.lane(1).SetFlow(GST_FLOW_ERROR);
  rig.lane(1).Block();
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source().Start());

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acquiring{0}, acquired{0};
  std::atomic<bool> finished{false};
  std::mutex mutex;
  std::vector<GstFlowReturn> results;
  GstPad *upstream = rig.source().pad();
  ThreadGroup threads(stop);
  threads.Add([&] {
    for (uint64_t i = 0; i < 64 && !stop; i++) {
      GstBuffer *buffer = nullptr;
      acquiring++;
      if (gst_buffer_pool_acquire_buffer(pool, &buffer, nullptr) != GST_FLOW_OK)
        break;  // the pool was deactivated: the test is over
      acquired++;
      WriteIndex(buffer, i);
      GstFlowReturn r = gst_pad_push(upstream, buffer);
      {
        std::lock_guard<std::mutex> lock(mutex);
        results.push_back(r);
      }
      if (r != GST_FLOW_OK)
        break;
    }
    finished = true;
  });

  ASSERT_TRUE(
      PollUntil([&] { return rig.lane(1).BlockedInChain() == 1; }, kWait))
      << "lane 1 never got a buffer";
  // The precondition: every pool buffer sits in lane 1's queue and upstream
  // waits in acquire (not in the chain).
  ASSERT_TRUE(PollUntil(
      [&] {
        return acquiring.load() == acquired.load() + 1 &&
               acquired.load() >= kPoolSize;
      },
      kWait))
      << "upstream never blocked in acquire (" << acquired.load()
      << " acquired)";
  std::this_thread::sleep_for(kSettle);
  const uint64_t before = acquired.load();
  ASSERT_EQ(acquiring.load(), before + 1) << "upstream is not in acquire";
  ASSERT_FALSE(finished.load());

  rig.lane(1).Unblock();  // its chain returns ERROR now
  EXPECT_TRUE(PollUntil([&] { return finished.load(); }, kWait))
      << "upstream is still blocked in acquire after lane 1 returned ERROR ("
      << acquired.load() << " acquired, " << before << " before)";
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_FALSE(results.empty());
    EXPECT_EQ(results.back(), GST_FLOW_ERROR)
        << "the push after the lane's error returned "
        << gst_flow_get_name(results.back());
    for (size_t i = 0; i + 1 < results.size(); i++)
      EXPECT_EQ(results[i], GST_FLOW_OK) << "push " << i;
  }
  EXPECT_GT(acquired.load(), before) << "no buffer came back to the pool";
  EXPECT_NE(rig.bus().WaitFor([&](GstMessage *m) {
    return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR &&
           GST_MESSAGE_SRC(m) == GST_OBJECT(rig.fanout());
  }),
            nullptr)
      << "no ERROR message for lane 1";
}

// -------------------------------------------------------- generic states ---

TEST(GpuFanoutStates, StateCyclesWithAndWithoutPads) {
  CycleStatesWithAndWithoutPads("gpufanout", "src_%u");
}
