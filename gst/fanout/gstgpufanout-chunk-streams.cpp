/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Chunk mode with several input streams (sink_%u pads). Each stream is cut
 * into chunks of its own: its own open chunk, cut rule (from its caps) and
 * cuts at its caps, segment and EOS. The lanes are shared: a lane takes
 * one chunk at a time while a stream fills it (Session::EndChunkFill), from
 * any stream, and a chunk moves only to a lane that no stream fills.
 *
 * Chunks of different streams may differ in caps and segment, so the lanes
 * get no caps or segment from the streams (gstgpufanout-streams.cpp): a
 * chunk's first item carries its stream's, and the lane's worker sends them
 * before the chunk's start where its branch has others (after the previous
 * chunk's drain and reset, so that a decoder or encoder in the branch
 * starts the chunk with its stream's format). gpufanin puts each chunk's
 * output out of its stream's src_k. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-dispatcher.h"

#include <algorithm>
#include <set>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

namespace {

class StreamChunkDispatcher final : public StreamTurns<ChunkDispatcher> {
public:
  StreamChunkDispatcher (GstGpuFanOut * self, GstPad * pad, guint32 stream)
      : StreamTurns (stream, self, pad)
  {
  }

protected:
  void PrepareFirst (QueuedItem & item) override
  {
    /* what the stream's pad holds now: the caps and segment its buffers
     * came with (each change closed the previous chunk) */
    item.chunk_caps = gst_pad_get_sticky_event (pad_, GST_EVENT_CAPS, 0);
    item.chunk_segment = gst_pad_get_sticky_event (pad_, GST_EVENT_SEGMENT, 0);
  }
};

} // namespace

std::unique_ptr<Dispatcher>
fanout::make_stream_chunk_dispatcher (GstGpuFanOut * self, GstPad * pad,
    guint32 stream)
{
  return std::make_unique<StreamChunkDispatcher> (self, pad, stream);
}

void
fanout::chunk_send_stream_events (const LanePtr & lane,
    const QueuedItem & first)
{
  if (first.chunk_caps) {
    GstCaps * caps;
    gst_event_parse_caps (first.chunk_caps, &caps);
    GstCaps * current = gst_pad_get_current_caps (lane->pad);
    const bool same = current && gst_caps_is_equal (current, caps);
    gst_clear_caps (&current);
    if (!same) {
      GST_DEBUG_OBJECT (lane->pad, "chunk %" G_GUINT64_FORMAT " of stream %u "
          "has other caps: %" GST_PTR_FORMAT, first.seq, first.stream, caps);
      gst_pad_push_event (lane->pad, gst_event_ref (first.chunk_caps));
    }
  }
  if (first.chunk_segment) {
    const GstSegment * segment;
    gst_event_parse_segment (first.chunk_segment, &segment);
    GstEvent * current
        = gst_pad_get_sticky_event (lane->pad, GST_EVENT_SEGMENT, 0);
    bool same = false;
    if (current) {
      const GstSegment * had;
      gst_event_parse_segment (current, &had);
      same = gst_segment_is_equal (had, segment);
      gst_event_unref (current);
    }
    if (!same)
      gst_pad_push_event (lane->pad, gst_event_ref (first.chunk_segment));
  }
}

void
fanout::chunk_withdraw_stream_unlocked (const LanePtr & lane, guint32 stream,
    std::vector<QueuedItem> * taken, std::vector<guint64> * seqs)
{
  auto & queue = lane->queue;
  std::set<guint64> whole;
  for (const QueuedItem & item : queue) {
    if (item.kind == ItemKind::kChunkBuffer && item.chunk_first
        && item.stream == stream)
      whole.insert (item.seq);
  }
  /* only closed ones: the chain function's open chunk is closed at the
   * flush's end (FLUSH_STOP cuts it), and withdrawn then */
  std::set<guint64> closed;
  for (const QueuedItem & item : queue) {
    if (item.kind == ItemKind::kChunkEnd && whole.count (item.seq))
      closed.insert (item.seq);
  }
  if (closed.empty ())
    return;
  for (auto it = queue.begin (); it != queue.end ();) {
    const bool chunk_item = it->kind == ItemKind::kChunkBuffer
        || it->kind == ItemKind::kChunkEnd;
    if (chunk_item && closed.count (it->seq)) {
      taken->push_back (std::move (*it));
      it = queue.erase (it);
    } else {
      ++it;
    }
  }
  seqs->insert (seqs->end (), closed.begin (), closed.end ());
  /* a chain function waiting for room looks again */
  lane->cond.notify_all ();
}
