// SPDX-License-Identifier: LGPL-2.1-or-later
// Several input streams on shared lanes: gpufanout's sink_%u pads and
// gpufanin's src_%u pads. Each stream leaves in its own order, held back by
// no other stream; its events and flushes reach its own src pad only; EOS of
// one stream ends that one only; caps that differ are an error naming the
// streams. Assertions are on order, counts, events and messages, never on
// timings.
#include <atomic>
#include <string>
#include <vector>

#include "streams-rig.h"

using namespace gpufan_test;

namespace {

TEST(Streams, EachStreamLeavesOnItsOwnPadInItsOwnOrder) {
  StreamsRig rig(3, 2, Branch::Mode::kPassthrough, "adaptive");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  for (guint k = 0; k < 3; k++)
    ASSERT_TRUE(rig.source(k).Start());
  for (uint64_t i = 0; i < 40; i++)
    for (guint k = 0; k < 3; k++)
      ASSERT_EQ(rig.Push(k, i), GST_FLOW_OK);
  for (guint k = 0; k < 3; k++) {
    ASSERT_TRUE(rig.out(k).log().WaitBuffers(40)) << rig.out(k).log().Summary();
    EXPECT_EQ(rig.out(k).log().BufferIndices(), Indices(k, 0, 40));
    // Its own events, once each, before its frames.
    EXPECT_EQ(rig.out(k).log().Events(GST_EVENT_STREAM_START), 1u);
    EXPECT_EQ(rig.out(k).log().Events(GST_EVENT_CAPS), 1u);
    EXPECT_EQ(rig.out(k).log().Events(GST_EVENT_SEGMENT), 1u);
  }
  std::vector<Entry> first = rig.out(0).log().Snapshot();
  ASSERT_GE(first.size(), 4u);
  EXPECT_EQ(first[0].type(), GST_EVENT_STREAM_START);
  EXPECT_EQ(first[1].type(), GST_EVENT_CAPS);
  EXPECT_EQ(first[2].type(), GST_EVENT_SEGMENT);
  EXPECT_TRUE(first[3].is_buffer);
  // One branch instance per lane saw every stream's frames.
  EXPECT_EQ(rig.branch(0).seen().Buffers() + rig.branch(1).seen().Buffers(),
            120u);
}

TEST(Streams, StreamsPushingAtOnceLoseNothing) {
  // Four streams' threads dispatch at the same time: each lane must still
  // get its items in the order they were dispatched to it (a lane is FIFO),
  // or an item that comes back proves an earlier one gone that was not.
  constexpr guint kStreams = 4;
  constexpr uint64_t kFrames = 600;
  StreamsRig rig(kStreams, 2, Branch::Mode::kPassthrough, "adaptive");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  for (guint k = 0; k < kStreams; k++)
    ASSERT_TRUE(rig.source(k).Start());
  for (guint k = 0; k < kStreams; k++)
    rig.source(k).PushIndicesAsync(k * kStreamStride, kFrames, true);
  for (guint k = 0; k < kStreams; k++) {
    ASSERT_TRUE(rig.out(k).log().WaitEvents(GST_EVENT_EOS, 1, kLongWait))
        << "stream " << k << ": " << rig.out(k).log().Summary(20);
    EXPECT_EQ(rig.out(k).log().BufferIndices(), Indices(k, 0, kFrames))
        << "stream " << k;
  }
  GstStructure *stats = nullptr;
  g_object_get(rig.fanout(), "stats", &stats, nullptr);
  ASSERT_NE(stats, nullptr);
  const GValue *lanes = gst_structure_get_value(stats, "lanes");
  for (guint i = 0; i < gst_value_array_get_size(lanes); i++) {
    guint64 dropped = 1;
    gst_structure_get_uint64(
        gst_value_get_structure(gst_value_array_get_value(lanes, i)), "dropped",
        &dropped);
    EXPECT_EQ(dropped, 0u) << "lane " << i;
  }
  gst_structure_free(stats);
}

TEST(Streams, APendingFrameHoldsBackOnlyItsOwnStream) {
  // round-robin over two lanes: a0 -> lane 0, b0 -> lane 1 (held), a1 ->
  // lane 0. a1 leaves although b0, dispatched before it, has not come back.
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  rig.branch(1).SetMode(Branch::Mode::kHold);
  ASSERT_TRUE(rig.PlayAndStart());
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_EQ(rig.Push(1, 0), GST_FLOW_OK);
  ASSERT_EQ(rig.Push(0, 1), GST_FLOW_OK);
  ASSERT_TRUE(rig.branch(1).WaitHeldBuffers(1));
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(2)) << rig.out(0).log().Summary();
  EXPECT_EQ(rig.out(0).log().BufferIndices(), Indices(0, 0, 2));
  EXPECT_EQ(rig.out(1).log().Buffers(), 0u);
  // b1 goes to lane 1 too (round-robin: lane 0 took a1): behind b0.
  ASSERT_EQ(rig.Push(1, 1), GST_FLOW_OK);
  ASSERT_TRUE(rig.branch(1).WaitHeldBuffers(2));
  // what it holds goes first, then anything that comes after
  rig.branch(1).ReleaseAll();
  rig.branch(1).SetMode(Branch::Mode::kPassthrough);
  rig.branch(1).ReleaseAll();
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(2)) << rig.out(1).log().Summary();
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 2));
}

TEST(Streams, AFrameDroppedInOneStreamHoldsNothingBack) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  // lane 1 drops stream 0's frames
  rig.branch(1).SetTransform([](GstBuffer *buffer) -> GstBuffer * {
    if (DataIndex(buffer) < static_cast<int64_t>(kStreamStride)) {
      gst_buffer_unref(buffer);
      return nullptr;
    }
    return buffer;
  });
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < 20; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(20)) << rig.out(1).log().Summary();
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 20));
  // stream 0 keeps its surviving frames, in order
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(rig.out(0).log().WaitEvents(GST_EVENT_EOS));
  EXPECT_TRUE(IsStrictlyIncreasing(rig.out(0).log().BufferIndices()));
  EXPECT_EQ(rig.out(0).log().Buffers() + rig.branch(1).Dropped(), 20u);
}

TEST(Streams, EosOfOneStreamEndsThatStreamOnly) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < 5; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(rig.out(0).log().WaitEvents(GST_EVENT_EOS));
  EXPECT_EQ(rig.out(0).log().BufferIndices(), Indices(0, 0, 5));
  // the lanes did not end: stream 1 goes on
  for (uint64_t i = 5; i < 10; i++)
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(10));
  EXPECT_EQ(rig.out(1).log().Events(GST_EVENT_EOS), 0u);
  EXPECT_EQ(rig.branch(0).seen().Events(GST_EVENT_EOS), 0u);
  ASSERT_TRUE(rig.source(1).PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(rig.out(1).log().WaitEvents(GST_EVENT_EOS));
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 10));
  // every stream ended: the lanes end too, once
  ASSERT_TRUE(rig.branch(0).seen().WaitEvents(GST_EVENT_EOS));
  ASSERT_TRUE(rig.branch(1).seen().WaitEvents(GST_EVENT_EOS));
  EXPECT_EQ(rig.out(0).log().Events(GST_EVENT_EOS), 1u);
  EXPECT_EQ(rig.out(1).log().Events(GST_EVENT_EOS), 1u);
}

TEST(Streams, AStreamsTagsAndSegmentReachOnlyItsPad) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.PlayAndStart());
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_EQ(rig.Push(1, 0), GST_FLOW_OK);
  GstTagList *tags = gst_tag_list_new(GST_TAG_TITLE, "stream one", nullptr);
  ASSERT_TRUE(rig.source(1).PushEvent(gst_event_new_tag(tags)));
  ASSERT_EQ(rig.Push(1, 1), GST_FLOW_OK);
  ASSERT_EQ(rig.Push(0, 1), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(2));
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(2));
  EXPECT_EQ(rig.out(1).log().Events(GST_EVENT_TAG), 1u);
  EXPECT_EQ(rig.out(0).log().Events(GST_EVENT_TAG), 0u);
  // the tag sits between frames 0 and 1 of its stream
  const std::string summary = rig.out(1).log().Summary();
  EXPECT_NE(summary.find("1000 tag 1001"), std::string::npos) << summary;
  // the branches saw one segment in all, not one per stream
  EXPECT_EQ(rig.branch(0).seen().Events(GST_EVENT_SEGMENT), 1u);
  EXPECT_EQ(rig.branch(0).seen().Events(GST_EVENT_TAG), 0u);
}

TEST(Streams, AStreamsFlushReachesOnlyItsPad) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < 4; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(4));
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_flush_start()));
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_flush_stop(TRUE)));
  ASSERT_TRUE(rig.source(0).PushSegment());
  for (uint64_t i = 10; i < 14; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i - 6), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(8)) << rig.out(0).log().Summary();
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(8)) << rig.out(1).log().Summary();
  EXPECT_EQ(rig.out(0).log().Events(GST_EVENT_FLUSH_START), 1u);
  EXPECT_EQ(rig.out(0).log().Events(GST_EVENT_FLUSH_STOP), 1u);
  EXPECT_EQ(rig.out(1).log().Events(GST_EVENT_FLUSH_START), 0u);
  EXPECT_EQ(rig.out(1).log().Events(GST_EVENT_FLUSH_STOP), 0u);
  EXPECT_EQ(rig.branch(0).seen().Events(GST_EVENT_FLUSH_START), 0u);
  std::vector<int64_t> want = Indices(0, 0, 4);
  for (int64_t i : Indices(0, 10, 4))
    want.push_back(i);
  EXPECT_EQ(rig.out(0).log().BufferIndices(), want);
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 8));
}

TEST(Streams, AStreamsFlushDoesNotWaitForAnotherStreamsBlockedOutput) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.PlayAndStart());
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(1));
  // stream 1's downstream holds gpufanin's output (a sink prerolling)
  rig.out(1).Block();
  ASSERT_EQ(rig.Push(1, 0), GST_FLOW_OK);
  ASSERT_TRUE(PollUntil([&] { return rig.out(1).BlockedInChain() == 1; }));
  // a flushing seek on stream 0 returns meanwhile (each push is bounded)
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_flush_start()));
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_flush_stop(TRUE)));
  ASSERT_TRUE(rig.source(0).PushSegment());
  ASSERT_EQ(rig.Push(0, 7), GST_FLOW_OK);
  EXPECT_TRUE(rig.out(0).log().WaitEvents(GST_EVENT_FLUSH_START));
  rig.out(1).Unblock();
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(2)) << rig.out(0).log().Summary();
  const std::string summary = rig.out(0).log().Summary();
  EXPECT_NE(summary.find("0 flush-start flush-stop segment 7"),
            std::string::npos)
      << summary;
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(1));
  EXPECT_EQ(rig.out(1).log().Events(GST_EVENT_FLUSH_START), 0u);
}

// Counts the custom upstream events named "probe-up" reaching a pad.
GstPadProbeReturn CountProbeUp(GstPad *, GstPadProbeInfo *info,
                               gpointer count) {
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
  if (GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_UPSTREAM &&
      gst_event_has_name(event, "probe-up"))
    static_cast<std::atomic<int> *>(count)->fetch_add(1);
  return GST_PAD_PROBE_OK;
}

TEST(Streams, AnUpstreamEventFromAStreamsPadReachesOnlyItsSource) {
  std::atomic<int> up0{0}, up1{0};  // outlive the rig (its probes)
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  gst_pad_add_probe(rig.source(0).pad(), GST_PAD_PROBE_TYPE_EVENT_UPSTREAM,
                    CountProbeUp, &up0, nullptr);
  gst_pad_add_probe(rig.source(1).pad(), GST_PAD_PROBE_TYPE_EVENT_UPSTREAM,
                    CountProbeUp, &up1, nullptr);
  ASSERT_TRUE(rig.PlayAndStart());
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_EQ(rig.Push(1, 0), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(1));
  // up every lane, once to stream 1's source only
  gst_pad_push_event(rig.out(1).pad(),
                     gst_event_new_custom(GST_EVENT_CUSTOM_UPSTREAM,
                                          gst_structure_new_empty("probe-up")));
  EXPECT_EQ(up1.load(), 1);
  EXPECT_EQ(up0.load(), 0);
  // the same event (one seqnum) from both pads, as a pipeline's seek: once
  // to each source
  GstEvent *both = gst_event_new_custom(GST_EVENT_CUSTOM_UPSTREAM,
                                        gst_structure_new_empty("probe-up"));
  gst_pad_push_event(rig.out(0).pad(), gst_event_copy(both));
  gst_pad_push_event(rig.out(1).pad(), both);
  EXPECT_EQ(up0.load(), 1);
  EXPECT_EQ(up1.load(), 2);
}

// A source pad's answer to duration and position queries: stream k's
// duration is (k + 1) * 100 frames, its position (k + 1) * 10 frames; it
// says whether the query came with gpufan's stream field (it must not).
gboolean AnswerStreamQuery(GstPad *pad, GstObject *, GstQuery *query) {
  const guint k = GPOINTER_TO_UINT(g_object_get_data(G_OBJECT(pad), "k"));
  const GstStructure *s = gst_query_get_structure(query);
  if (s && gst_structure_has_field(s, "gpufan-stream"))
    return FALSE;
  switch (GST_QUERY_TYPE(query)) {
    case GST_QUERY_DURATION:
      gst_query_set_duration(query, GST_FORMAT_TIME, (k + 1) * 100 * kFrame);
      return TRUE;
    case GST_QUERY_POSITION:
      gst_query_set_position(query, GST_FORMAT_TIME, (k + 1) * 10 * kFrame);
      return TRUE;
    default:
      return FALSE;
  }
}

TEST(Streams, AQueryFromAStreamsPadIsAnsweredByItsSource) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  for (guint k = 0; k < 2; k++) {
    g_object_set_data(G_OBJECT(rig.source(k).pad()), "k", GUINT_TO_POINTER(k));
    gst_pad_set_query_function(rig.source(k).pad(), AnswerStreamQuery);
  }
  ASSERT_TRUE(rig.PlayAndStart());
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_EQ(rig.Push(1, 0), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(1));
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(1));
  // gst_pad_peer_query_* from the collector: a query on gpufanin's src_k
  for (guint k = 0; k < 2; k++) {
    gint64 duration = -1, position = -1;
    EXPECT_TRUE(gst_pad_peer_query_duration(rig.out(k).pad(), GST_FORMAT_TIME,
                                            &duration)) << "stream " << k;
    EXPECT_EQ(duration, static_cast<gint64>((k + 1) * 100 * kFrame))
        << "stream " << k;
    EXPECT_TRUE(gst_pad_peer_query_position(rig.out(k).pad(), GST_FORMAT_TIME,
                                            &position)) << "stream " << k;
    EXPECT_EQ(position, static_cast<gint64>((k + 1) * 10 * kFrame))
        << "stream " << k;
  }
  // the answer comes back without the stream field
  GstQuery *q = gst_query_new_duration(GST_FORMAT_TIME);
  EXPECT_TRUE(gst_pad_peer_query(rig.out(1).pad(), q));
  EXPECT_FALSE(gst_structure_has_field(gst_query_get_structure(q),
                                       "gpufan-stream"));
  gst_query_unref(q);
  // stream 1's pad gone: its queries fail, stream 0's still answer
  rig.ReleaseSinkPad(1);
  gint64 duration = -1;
  EXPECT_FALSE(gst_pad_peer_query_duration(rig.out(1).pad(), GST_FORMAT_TIME,
                                           &duration));
  EXPECT_TRUE(gst_pad_peer_query_duration(rig.out(0).pad(), GST_FORMAT_TIME,
                                          &duration));
  EXPECT_EQ(duration, static_cast<gint64>(100 * kFrame));
}

GstPadProbeReturn DropEos(GstPad *, GstPadProbeInfo *info, gpointer) {
  return GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS
             ? GST_PAD_PROBE_DROP
             : GST_PAD_PROBE_OK;
}

TEST(Streams, ALaneThatSwallowsEosHoldsBackNoStreamsEnd) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  gst_pad_add_probe(rig.branch(1).src(), GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
                    DropEos, nullptr, nullptr);
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < 10; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.source(0).PushEvent(gst_event_new_eos()));
  ASSERT_TRUE(rig.source(1).PushEvent(gst_event_new_eos()));
  for (guint k = 0; k < 2; k++) {
    ASSERT_TRUE(rig.out(k).log().WaitEvents(GST_EVENT_EOS))
        << rig.out(k).log().Summary();
    EXPECT_EQ(rig.out(k).log().BufferIndices(), Indices(k, 0, 10));
    EXPECT_EQ(rig.out(k).log().Events(GST_EVENT_EOS), 1u);
  }
}

TEST(Streams, ALaneAddedWhileStreamsPlayGetsTheirCapsFirst) {
  StreamsRig rig(2, 1, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < 4; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.AddLane());
  for (uint64_t i = 4; i < 20; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  for (guint k = 0; k < 2; k++) {
    ASSERT_TRUE(rig.out(k).log().WaitBuffers(20)) << rig.out(k).log().Summary();
    EXPECT_EQ(rig.out(k).log().BufferIndices(), Indices(k, 0, 20));
  }
  // the new lane took frames, each after the lanes' stream-start, caps and
  // segment
  std::vector<Entry> seen = rig.branch(1).seen().Snapshot();
  ASSERT_GE(seen.size(), 4u) << rig.branch(1).seen().Summary();
  EXPECT_EQ(seen[0].type(), GST_EVENT_STREAM_START);
  EXPECT_EQ(seen[1].type(), GST_EVENT_CAPS);
  EXPECT_EQ(seen[2].type(), GST_EVENT_SEGMENT);
  EXPECT_GT(rig.branch(1).seen().Buffers(), 0u);
}

TEST(Streams, ABranchThatMakesNewBuffersKeepsEachStreamApart) {
  // lane 1 copies each frame into a new buffer without our meta: its items
  // are matched by PTS (the streams' PTS are the same) and FIFO order
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  rig.branch(1).SetTransform([](GstBuffer *buffer) {
    GstBuffer *copy = CopyWithoutMetas(buffer);
    gst_buffer_unref(buffer);
    return copy;
  });
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < 30; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  for (guint k = 0; k < 2; k++) {
    ASSERT_TRUE(rig.out(k).log().WaitBuffers(30)) << rig.out(k).log().Summary();
    EXPECT_EQ(rig.out(k).log().BufferIndices(), Indices(k, 0, 30));
  }
}

TEST(Streams, CapsThatDifferAreAnErrorNamingTheStreams) {
  StreamsRig rig(2, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source(0).Start());
  // (a refused sticky event still counts as sent upstream: no return to
  // check; the error says it)
  rig.source(1).Start(
      "video/x-raw,format=GRAY8,width=8,height=8,framerate=1000/1");
  GstMessage *error = rig.bus().WaitFor(
      [](GstMessage *m) { return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR; });
  ASSERT_NE(error, nullptr);
  GError *err = nullptr;
  gst_message_parse_error(error, &err, nullptr);
  const std::string text = err->message;
  g_error_free(err);
  EXPECT_NE(text.find("sink_1"), std::string::npos) << text;
  EXPECT_NE(text.find("sink_0"), std::string::npos) << text;
}

TEST(Streams, DataOnBothKindsOfSinkPadIsAnError) {
  StreamsRig rig(1, 2, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  Source single;
  GstPad *sink = gst_element_get_static_pad(rig.fanout(), "sink");
  ASSERT_TRUE(single.LinkTo(sink));
  gst_object_unref(sink);
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source(0).Start());
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_TRUE(single.Start());
  EXPECT_EQ(single.PushIndex(0), GST_FLOW_ERROR);
  GstMessage *error = rig.bus().WaitFor(
      [](GstMessage *m) { return GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR; });
  ASSERT_NE(error, nullptr);
  EXPECT_TRUE(rig.Stop());
}

// A src_k that no stream k feeds would never get a frame, and its sink
// would hold the preroll: an error naming the pad, not a hang.
TEST(Streams, ASrcPadWithoutItsStreamIsAnErrorNamingIt) {
  const std::string caps = "video/x-raw,width=16,height=16,framerate=30/1";
  LaunchedPipeline p(
      "gpufanout name=f devices=cpu gpufanin name=m  f.src_0 ! m.sink_0  "
      "f.src_1 ! m.sink_1  videotestsrc num-buffers=30 ! " +
      caps + " ! f.sink_0  m.src_0 ! fakesink  videotestsrc num-buffers=30 ! " +
      caps + " ! f.sink_1  m.src_1 ! fakesink  m.src_5 ! fakesink");
  ASSERT_TRUE(p.ok());
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  GstMessage *m = p.WaitEosOrError(kLongWait);
  ASSERT_NE(m, nullptr) << "no EOS nor ERROR: the pipeline hangs";
  ASSERT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_ERROR);
  EXPECT_NE(BusLog::ErrorText(m).find(
                "m:src_5 has no stream: gpufanout 'f' has no sink_5"),
            std::string::npos)
      << BusLog::ErrorText(m);
  EXPECT_TRUE(p.Stop());
}

TEST(Streams, ALeakyStreamDropsWhatWaitsLongerThanItsDuration) {
  StreamsRig rig(2, 1, Branch::Mode::kHold);
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.sink_pad(1), "leaky", TRUE, "max-in-flight", 1u, nullptr);
  ASSERT_TRUE(rig.PlayAndStart());
  // the branch holds the leaky stream's first frame: its own bound is full
  ASSERT_EQ(rig.Push(1, 0), GST_FLOW_OK);
  ASSERT_TRUE(rig.branch(0).WaitHeldBuffers(1));
  // its next frames (1 ms each) are dropped, not blocking
  for (uint64_t i = 1; i < 4; i++)
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  GstStructure *stats = nullptr;
  g_object_get(rig.fanout(), "stats", &stats, nullptr);
  ASSERT_NE(stats, nullptr);
  const GValue *streams = gst_structure_get_value(stats, "streams");
  ASSERT_NE(streams, nullptr) << gst_structure_to_string(stats);
  ASSERT_EQ(gst_value_array_get_size(streams), 2u);
  const GstStructure *leaky =
      gst_value_get_structure(gst_value_array_get_value(streams, 1));
  guint64 dropped = 0, dispatched = 0;
  EXPECT_TRUE(gst_structure_get_uint64(leaky, "leaky-dropped", &dropped));
  EXPECT_TRUE(gst_structure_get_uint64(leaky, "dispatched", &dispatched));
  EXPECT_STREQ(gst_structure_get_string(leaky, "pad"), "sink_1");
  EXPECT_EQ(dropped, 3u);
  EXPECT_EQ(dispatched, 1u);
  gst_structure_free(stats);
  // the other stream is not held by it
  rig.branch(0).SetMode(Branch::Mode::kPassthrough);
  rig.branch(0).ReleaseAll();
  for (uint64_t i = 0; i < 3; i++)
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(3));
  EXPECT_EQ(rig.out(0).log().BufferIndices(), Indices(0, 0, 3));
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(1));
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 1));
}

// A stream whose downstream blocks holds only itself: what left the window
// for it waits at its own output, within its bound, and no other stream
// waits for it.
TEST(Streams, AStreamWhoseDownstreamBlocksHoldsBackOnlyItself) {
  StreamsRig rig(2, 1, Branch::Mode::kPassthrough);
  ASSERT_TRUE(rig.ok());
  g_object_set(rig.fanout(), "max-in-flight", 2u, nullptr);
  ASSERT_TRUE(rig.PlayAndStart());
  rig.out(0).Block();
  ASSERT_EQ(rig.Push(0, 0), GST_FLOW_OK);
  ASSERT_TRUE(PollUntil([&] { return rig.out(0).BlockedInChain() == 1; }));
  // stream 1 flows, many times the in-flight bound, past stream 0's block
  for (uint64_t i = 0; i < 20; i++)
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(20));
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 20));
  // stream 0 admits one more (its output holds the blocked frame and this
  // one: its bound), then waits for its own output
  ASSERT_EQ(rig.Push(0, 1), GST_FLOW_OK);
  rig.out(0).Unblock();
  ASSERT_EQ(rig.Push(0, 2), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(3));
  EXPECT_EQ(rig.out(0).log().BufferIndices(), Indices(0, 0, 3));
}

TEST(Streams, ReleasingAStreamsPadEndsItAfterItsFrames) {
  StreamsRig rig(2, 2, Branch::Mode::kHold);
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.PlayAndStart());
  for (uint64_t i = 0; i < 3; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.branch(0).WaitHeldBuffers(3));
  ASSERT_TRUE(rig.branch(1).WaitHeldBuffers(3));
  // stream 1 goes while its frames are in the branches
  rig.ReleaseSinkPad(1);
  for (guint i = 0; i < 2; i++) {
    rig.branch(i).ReleaseAll();
    rig.branch(i).SetMode(Branch::Mode::kPassthrough);
    rig.branch(i).ReleaseAll();
  }
  ASSERT_TRUE(rig.out(1).log().WaitEvents(GST_EVENT_EOS))
      << rig.out(1).log().Summary();
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 3));
  // stream 0 goes on; the lanes did not end
  for (uint64_t i = 3; i < 6; i++)
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(6));
  EXPECT_EQ(rig.out(0).log().BufferIndices(), Indices(0, 0, 6));
  EXPECT_EQ(rig.out(0).log().Events(GST_EVENT_EOS), 0u);
}

TEST(Streams, AStreamAddedWhilePlayingFlows) {
  StreamsRig rig(1, 2, Branch::Mode::kPassthrough, "adaptive");
  ASSERT_TRUE(rig.ok());
  ASSERT_TRUE(rig.Play());
  ASSERT_TRUE(rig.source(0).Start());
  for (uint64_t i = 0; i < 5; i++)
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
  ASSERT_TRUE(rig.AddStream());
  ASSERT_TRUE(rig.source(1).Start());
  for (uint64_t i = 5; i < 10; i++) {
    ASSERT_EQ(rig.Push(0, i), GST_FLOW_OK);
    ASSERT_EQ(rig.Push(1, i - 5), GST_FLOW_OK);
  }
  ASSERT_TRUE(rig.out(0).log().WaitBuffers(10));
  ASSERT_TRUE(rig.out(1).log().WaitBuffers(5));
  EXPECT_EQ(rig.out(0).log().BufferIndices(), Indices(0, 0, 10));
  EXPECT_EQ(rig.out(1).log().BufferIndices(), Indices(1, 0, 5));
}

}  // namespace
