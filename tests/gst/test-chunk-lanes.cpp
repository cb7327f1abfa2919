// SPDX-License-Identifier: LGPL-2.1-or-later
// Chunk mode keeps every lane working at once: a lane whose chunk is not the
// head of gpufanin's window must not wait for the head. Reproduced on CPU
// lanes with a decoder-like element (gpufantestpooldec): its output buffers
// come from a bounded pool of its own, as a hardware decoder's surfaces do,
// and with query-each-chunk it sends an ALLOCATION query before each chunk's
// first output, as a decoder that renegotiates after a flush does.
//
// Whether the lanes work at once is seen without timings: each lane's
// element stops at a rendezvous after producing its `meet-after`-th output
// and waits there for every other lane's. If some lane can only go on once
// another lane's chunk has left the window, they never all meet: the
// rendezvous gives up after a deadline that only a hang reaches, and the
// test fails. Output order and counts are checked as everywhere.
#include <gst/base/gstbasetransform.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "gpufan-rig.h"
#include "gst-test-util.h"

using namespace gpufan_test;

namespace {

constexpr const char *kCaps = "video/x-raw,format=GRAY8,width=64,height=64";
constexpr const char *kHour = "3600000000000";

// Where the lanes' elements meet (one per test).
class Rendezvous {
 public:
  void Reset(int expected) {
    std::lock_guard<std::mutex> lk(mutex_);
    expected_ = expected;
    arrived_ = 0;
    met_ = false;
    gave_up_ = false;
  }
  // Waits for every expected party; false when the deadline came first.
  bool Meet() {
    std::unique_lock<std::mutex> lk(mutex_);
    if (gave_up_)
      return false;  // too late: the ones before gave up
    if (++arrived_ == expected_) {
      met_ = true;
      cond_.notify_all();
      return true;
    }
    // a hang's deadline: far beyond any loaded machine's scheduling
    const bool met = cond_.wait_for(lk, std::chrono::seconds(20),
                                    [this] { return met_ || gave_up_; });
    if (!met_)
      gave_up_ = true;  // the others stop waiting too
    cond_.notify_all();
    return met && met_;
  }
  bool met() const {
    std::lock_guard<std::mutex> lk(mutex_);
    return met_;
  }
  int arrived() const {
    std::lock_guard<std::mutex> lk(mutex_);
    return arrived_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cond_;
  int expected_ = 0;
  int arrived_ = 0;
  bool met_ = false;
  bool gave_up_ = false;
};

Rendezvous g_rendezvous;

// gpufantestpooldec: copies each input into an output buffer of its own
// pool (pool-size buffers at most: 0, unbounded), meets the other lanes
// after its meet-after-th output (0: never), and with query-each-chunk
// renegotiates after every FLUSH_STOP (a chunk's reset).
struct PoolDec {
  GstBaseTransform parent;
  guint pool_size;
  guint meet_after;
  gboolean query_each_chunk;
  guint outputs;
  guint allocation_queries;
};

enum { PROP_POOL_SIZE = 1, PROP_MEET_AFTER, PROP_QUERY_EACH_CHUNK };

void PoolDecSetProperty(GObject *object, guint id, const GValue *value,
                        GParamSpec *pspec) {
  auto *self = reinterpret_cast<PoolDec *>(object);
  switch (id) {
    case PROP_POOL_SIZE:
      self->pool_size = g_value_get_uint(value);
      break;
    case PROP_MEET_AFTER:
      self->meet_after = g_value_get_uint(value);
      break;
    case PROP_QUERY_EACH_CHUNK:
      self->query_each_chunk = g_value_get_boolean(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
  }
}

void PoolDecGetProperty(GObject *object, guint id, GValue *value,
                        GParamSpec *pspec) {
  auto *self = reinterpret_cast<PoolDec *>(object);
  switch (id) {
    case PROP_POOL_SIZE:
      g_value_set_uint(value, self->pool_size);
      break;
    case PROP_MEET_AFTER:
      g_value_set_uint(value, self->meet_after);
      break;
    case PROP_QUERY_EACH_CHUNK:
      g_value_set_boolean(value, self->query_each_chunk);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
  }
}

// Whatever downstream proposes, the outputs come from a pool of our own,
// bounded as a decoder's surfaces are.
gboolean PoolDecDecideAllocation(GstBaseTransform *trans, GstQuery *query) {
  auto *self = reinterpret_cast<PoolDec *>(trans);
  GST_OBJECT_LOCK(trans);
  self->allocation_queries++;
  GST_OBJECT_UNLOCK(trans);
  GstCaps *caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  GstVideoInfo info;
  if (!caps || !gst_video_info_from_caps(&info, caps))
    return FALSE;
  GstBufferPool *pool = gst_buffer_pool_new();
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, static_cast<guint>(info.size),
                                    0, self->pool_size);
  gst_buffer_pool_set_config(pool, config);
  while (gst_query_get_n_allocation_pools(query) > 0)
    gst_query_remove_nth_allocation_pool(query, 0);
  gst_query_add_allocation_pool(query, pool, static_cast<guint>(info.size), 0,
                                self->pool_size);
  gst_object_unref(pool);
  return TRUE;
}

GstFlowReturn PoolDecTransform(GstBaseTransform *trans, GstBuffer *in,
                               GstBuffer *out) {
  auto *self = reinterpret_cast<PoolDec *>(trans);
  GstMapInfo from, to;
  if (!gst_buffer_map(in, &from, GST_MAP_READ))
    return GST_FLOW_ERROR;
  if (!gst_buffer_map(out, &to, GST_MAP_WRITE)) {
    gst_buffer_unmap(in, &from);
    return GST_FLOW_ERROR;
  }
  memcpy(to.data, from.data, std::min(from.size, to.size));
  gst_buffer_unmap(out, &to);
  gst_buffer_unmap(in, &from);
  if (++self->outputs == self->meet_after)
    g_rendezvous.Meet();
  return GST_FLOW_OK;
}

gboolean PoolDecSinkEvent(GstBaseTransform *trans, GstEvent *event) {
  auto *self = reinterpret_cast<PoolDec *>(trans);
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP && self->query_each_chunk)
    gst_pad_mark_reconfigure(GST_BASE_TRANSFORM_SRC_PAD(trans));
  return GST_BASE_TRANSFORM_CLASS(
             g_type_class_peek_parent(G_OBJECT_GET_CLASS(trans)))
      ->sink_event(trans, event);
}

void PoolDecClassInit(gpointer klass, gpointer) {
  GObjectClass *object_class = G_OBJECT_CLASS(klass);
  object_class->set_property = PoolDecSetProperty;
  object_class->get_property = PoolDecGetProperty;
  const auto flags =
      static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_property(
      object_class, PROP_POOL_SIZE,
      g_param_spec_uint("pool-size", "Pool size", "0: unbounded", 0, 64, 0,
                        flags));
  g_object_class_install_property(
      object_class, PROP_MEET_AFTER,
      g_param_spec_uint("meet-after", "Meet after", "0: never", 0, G_MAXUINT, 0,
                        flags));
  g_object_class_install_property(
      object_class, PROP_QUERY_EACH_CHUNK,
      g_param_spec_boolean("query-each-chunk", "Query each chunk",
                           "renegotiate after each flush", FALSE, flags));
  static GstStaticPadTemplate sink = GST_STATIC_PAD_TEMPLATE(
      "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS("video/x-raw"));
  static GstStaticPadTemplate src = GST_STATIC_PAD_TEMPLATE(
      "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS("video/x-raw"));
  gst_element_class_add_static_pad_template(GST_ELEMENT_CLASS(klass), &sink);
  gst_element_class_add_static_pad_template(GST_ELEMENT_CLASS(klass), &src);
  gst_element_class_set_static_metadata(GST_ELEMENT_CLASS(klass),
                                        "bounded-pool decoder",
                                        "Codec/Decoder/Video", "test", "test");
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  trans_class->passthrough_on_same_caps = FALSE;
  trans_class->decide_allocation = PoolDecDecideAllocation;
  trans_class->transform = PoolDecTransform;
  trans_class->sink_event = PoolDecSinkEvent;
}

void RegisterPoolDec() {
  static std::once_flag once;
  std::call_once(once, [] {
    GTypeQuery query;
    g_type_query(GST_TYPE_BASE_TRANSFORM, &query);
    GTypeInfo info = {};
    info.class_size = static_cast<guint16>(query.class_size);
    info.class_init = PoolDecClassInit;
    info.instance_size = sizeof(PoolDec);
    const GType type =
        g_type_register_static(GST_TYPE_BASE_TRANSFORM, "GpuFanTestPoolDec",
                               &info, static_cast<GTypeFlags>(0));
    gst_element_register(nullptr, "gpufantestpooldec", GST_RANK_NONE, type);
  });
}

// `frames` frames over `lanes` lanes in chunks of `chunk` (round-robin:
// lane i gets chunks i, i + lanes, ...); lane i's element is d<i> with
// `lane_props(i)`.
template <typename Props>
std::string ChunkPipeline(int frames, int lanes, int chunk,
                          const Props& lane_props) {
  std::string d =
      "videotestsrc name=src num-buffers=" + std::to_string(frames) + " ! " +
      kCaps +
      ",framerate=30/1 ! gpufanout name=f chunk=frames "
      "chunk-frames=" +
      std::to_string(chunk) +
      " policy=round-robin devices=cpu:" + std::to_string(lanes) +
      " gpufanin name=m stall-timeout=" + kHour +
      " ! fakesink name=out sync=false";
  for (int i = 0; i < lanes; i++)
    d += "  f.src_" + std::to_string(i) + " ! gpufantestpooldec name=d" +
         std::to_string(i) + " " + lane_props(i) + " ! m.sink_" +
         std::to_string(i);
  return d;
}

class ChunkLanes : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { RegisterPoolDec(); }

  // Plays `p` to EOS: every lane met the others (`what` says where), and
  // the output is every frame in order.
  static void ExpectAllMetInOrder(LaunchedPipeline& p, int lanes, int frames,
                                  const char *what) {
    ASSERT_TRUE(p.ok());
    p.Stamp("src", "src");
    RecordLog& out = p.Record("out", "sink");
    ASSERT_TRUE(p.PlayToEos());
    EXPECT_TRUE(g_rendezvous.met())
        << g_rendezvous.arrived() << " of " << lanes << " lanes " << what
        << " while the head chunk worked";
    EXPECT_TRUE(IsSequence(out.BufferIndices(), 0, frames)) << out.Summary();
  }
};

}  // namespace

// (a) The outputs gpufanin holds for a chunk that is not the head must not
// keep the branch's bounded pool: every lane, the head's and the others',
// produces more outputs than its pool holds while the head still works.
TEST_P(ChunkLanes, ALaneWhosePoolIsBoundedKeepsWorkingBehindTheHead) {
  const int lanes = GetParam();
  constexpr int kChunk = 8, kPool = 3;
  const int frames = kChunk * lanes * 3;
  g_rendezvous.Reset(lanes);
  LaunchedPipeline p(ChunkPipeline(frames, lanes, kChunk, [](int) {
    return "pool-size=" + std::to_string(kPool) +
           " meet-after=" + std::to_string(kPool + 3);
  }));
  ExpectAllMetInOrder(p, lanes, frames, "got past their pool's size");
}

// (b) A chunk's start does not wait for the lane's earlier chunks to leave
// the window: lane 1 finishes its first chunk while the head (lane 0's)
// still works, and its decoder's ALLOCATION query before the next chunk is
// answered at once.
TEST_P(ChunkLanes, AChunkStartDoesNotWaitForTheWindow) {
  const int lanes = GetParam();
  constexpr int kChunk = 8;
  const int frames = kChunk * lanes * 3;
  g_rendezvous.Reset(lanes);
  // lane 0 meets inside its first chunk (the head); every other lane
  // inside its second, after a renegotiation
  LaunchedPipeline p(ChunkPipeline(frames, lanes, kChunk, [](int i) {
    return std::string("query-each-chunk=true meet-after=") +
           std::to_string(i == 0 ? 4 : kChunk + 2);
  }));
  ExpectAllMetInOrder(p, lanes, frames, "reached their rendezvous");
  for (int i = 1; i < lanes; i++) {
    const std::string name = "d" + std::to_string(i);
    auto *d = reinterpret_cast<PoolDec *>(p.element(name.c_str()));
    // the renegotiations happened: one per chunk after the first
    EXPECT_GE(d->allocation_queries, 2u) << name;
  }
}

// The trace shows it too: with gpufanout's trace-file, every lane's track
// has a push span (its element inside its chunk's work) at one same moment;
// and the lanes' time split is in the statistics.
TEST_P(ChunkLanes, TheTraceShowsEveryLaneInsideItsChunkAtOnce) {
  const int lanes = GetParam();
  constexpr int kChunk = 8, kPool = 3;
  const int frames = kChunk * lanes * 3;
  const std::string trace = ::testing::TempDir() + "gpufan-chunk-lanes-" +
                            std::to_string(::getpid()) + ".json";
  g_rendezvous.Reset(lanes);
  std::string description = ChunkPipeline(frames, lanes, kChunk, [](int) {
    return "pool-size=" + std::to_string(kPool) +
           " query-each-chunk=true meet-after=" +
           std::to_string(kChunk + kPool + 2);
  });
  description.replace(description.find("gpufanout name=f"),
                      strlen("gpufanout name=f"),
                      "gpufanout name=f trace-file=" + trace);
  {
    LaunchedPipeline p(description);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.PlayToEos());
    EXPECT_TRUE(g_rendezvous.met())
        << g_rendezvous.arrived() << " of " << lanes << " lanes met";
    GstStructure *stats = GetStats(p.element("f"));
    ASSERT_NE(stats, nullptr);
    ASSERT_TRUE(HasStatsShape(stats, static_cast<guint>(lanes)));
    for (int i = 0; i < lanes; i++)
      EXPECT_GT(StatsU64(StatsLane(stats, i), "push-time"), 0u) << i;
    gst_structure_free(stats);
  }  // NULL: the trace is complete

  // Every lane's push spans, from the trace-event JSON: a sweep over their
  // starts and ends finds a moment where all lanes are inside one.
  std::ifstream in(trace);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  ASSERT_NE(json.find("]}"), std::string::npos) << "the trace was not closed";
  std::vector<std::pair<double, int>> edges;  // (time, +lane+1 / -(lane+1))
  const std::string key = "{\"ph\":\"X\",\"name\":\"push\"";
  for (size_t at = json.find(key); at != std::string::npos;
       at = json.find(key, at + 1)) {
    const size_t tid = json.find("\"tid\":", at) + 6;
    const size_t ts = json.find("\"ts\":", at) + 5;
    const size_t dur = json.find("\"dur\":", at) + 6;
    const int track = std::stoi(json.substr(tid));
    const double start = std::stod(json.substr(ts));
    const double end = start + std::stod(json.substr(dur));
    const int lane = (track - 1) / 2;  // TraceWriter::LaneTrack
    edges.emplace_back(start, lane + 1);
    edges.emplace_back(end, -(lane + 1));
  }
  std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  std::vector<int> inside(static_cast<size_t>(lanes), 0);
  int busy = 0, most_busy = 0;
  for (const auto& [time, edge] : edges) {
    int& n = inside.at(static_cast<size_t>(std::abs(edge) - 1));
    const int before = n;
    n += edge > 0 ? 1 : -1;
    busy += (n > 0) - (before > 0);
    most_busy = std::max(most_busy, busy);
  }
  EXPECT_EQ(most_busy, lanes) << "lanes pushing at once at most";
  std::remove(trace.c_str());
}

INSTANTIATE_TEST_SUITE_P(Lanes, ChunkLanes, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Lanes";
                         });
