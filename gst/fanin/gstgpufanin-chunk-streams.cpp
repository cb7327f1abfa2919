/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin, chunk mode with several input streams: each chunk's output
 * leaves out of its stream's src_k, in the order its lane made it, after
 * the stream's earlier chunks and events, through the stream's output
 * (gst_gpufan_in_push_stream_released: src_k's own thread, never waiting
 * for downstream). A chunk is one item of the window; each of its outputs
 * goes to the stream's output as an item of its own, and the chunk's
 * stream slot goes with its last output. The head chunk's output leaves as
 * it comes, as with one stream.
 *
 * An element that restarts its timestamps after a chunk's reset
 * (GstVideoEncoder rebases every new stream onto its minimum PTS, with a
 * segment to match) has them moved back into its stream's segment, running
 * time kept: src_k sends the stream's own segment (it came through the
 * window), and the outputs' timestamps are in it. Called under
 * output_lock, which keeps the streams' segments (out_stream_segments). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <vector>

void
gst_gpufan_in_note_stream_event (GstGpuFanInPrivate * priv,
    const gpufan::Released & released)
{
  auto * attached
      = dynamic_cast<GstGpuFanStreamEvent *> (released.payload.get ());
  if (!attached || !attached->event)
    return;
  if (GST_EVENT_TYPE (attached->event) == GST_EVENT_SEGMENT) {
    const GstSegment * segment;
    gst_event_parse_segment (attached->event, &segment);
    priv->out_stream_segments[released.stream] = *segment;
  } else if (GST_EVENT_TYPE (attached->event) == GST_EVENT_FLUSH_STOP) {
    priv->out_stream_segments.erase (released.stream);
  }
}

/* @part's timestamps, in the segment its lane gave it, moved into its
 * stream's segment (time format, rate 1.0; left as they are otherwise). */
static void
to_stream_segment (GstGpuFanInPrivate * priv, guint32 stream, FanInItem * part)
{
  auto it = priv->out_stream_segments.find (stream);
  if (it == priv->out_stream_segments.end () || !part->segment
      || !GST_IS_BUFFER (part->obj))
    return;
  const GstSegment * from;
  gst_event_parse_segment (part->segment, &from);
  const GstSegment * to = &it->second;
  if (gst_segment_is_equal (from, to) || from->format != GST_FORMAT_TIME
      || to->format != GST_FORMAT_TIME || from->rate != 1.0 || to->rate != 1.0)
    return;
  GstBuffer * buffer = GST_BUFFER_CAST (part->obj);
  GstClockTime pts = GST_BUFFER_PTS (buffer), dts = GST_BUFFER_DTS (buffer);
  if (!gst_gpufan_in_translate_position (from, to, &pts))
    return;
  /* a reordering encoder's first decode times at the stream's start lie
   * before its segment (the encoder's own segment was moved to fit them):
   * they are left unset */
  if (!gst_gpufan_in_translate_position (from, to, &dts))
    dts = GST_CLOCK_TIME_NONE;
  buffer = gst_buffer_make_writable (buffer);
  GST_BUFFER_PTS (buffer) = pts;
  GST_BUFFER_DTS (buffer) = dts;
  part->obj = GST_MINI_OBJECT_CAST (buffer);
}

/* Each of @parts (outputs of item @like's chunk) to the stream's output;
 * the last takes @like's stream slot when @with_slot. */
static void
push_parts (GstGpuFanIn * self, gpufan::Released & like,
    std::vector<gpufan::PayloadPtr> & parts, bool with_slot)
{
  for (size_t i = 0; i < parts.size (); i++) {
    to_stream_segment (self->priv, like.stream,
        static_cast<FanInItem *> (parts[i].get ()));
    gpufan::Released part;
    part.payload = std::move (parts[i]);
    part.seq = like.seq;
    part.lane = like.lane;
    part.stream = like.stream;
    part.opened_ns = like.opened_ns;
    if (with_slot && i + 1 == parts.size ()) {
      part.holds_stream_slot = like.holds_stream_slot;
      like.holds_stream_slot = false;
    }
    gst_gpufan_in_push_stream_released (self, part);
  }
  parts.clear ();
}

void
gst_gpufan_in_push_stream_chunk (GstGpuFanIn * self,
    gpufan::Released & released)
{
  auto * item = dynamic_cast<FanInItem *> (released.payload.get ());
  if (!item || !item->chunk) {
    /* one of the stream's events, or an output outside a chunk */
    gst_gpufan_in_push_stream_released (self, released);
    return;
  }
  /* (an empty chunk's slot goes back with the batch) */
  push_parts (self, released, *item->chunk, true);
}

void
gst_gpufan_in_push_stream_chunk_parts (GstGpuFanIn * self, guint32 stream,
    guint64 seq, std::vector<gpufan::PayloadPtr> & parts)
{
  gpufan::Released like;
  like.seq = seq;
  like.stream = stream;
  push_parts (self, like, parts, false);
}
