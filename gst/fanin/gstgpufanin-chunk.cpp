/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin, chunk mode: a lane returns a chunk's output between the
 * chunk-start event and the drain's EOS of our fan-out; that output is
 * collected as one item of the window and leaves whole, in the order its
 * lane made it, except the head chunk's, which leaves as it comes. What a
 * chunk holds that is not the head: gstgpufanin-held.cpp.
 *
 * Only the src task pushes in this mode: a chunk leaves whole once the
 * chunks before it are out, a chunk's worth of frames at once, and a
 * lane's thread that pushed it would be held as long as downstream takes
 * (a sync=true sink: the chunk's duration in real time). Its branch would
 * idle meanwhile, its next chunk, heading the window, would be given up as
 * stalled, and its EOS would come after gpufanin stopped waiting for it. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <gst/video/video.h>

#include <optional>
#include <string>
#include <vector>

/* ------------------------------------------------------------------------ */
/* The sink pads: a chunk's start, its output, its end */

/* The paired session of @pad, or null. */
static std::shared_ptr<gpufan::FanInPort>
pad_session (GstGpuFanIn * self, GstPad * pad, guint * lane)
{
  std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
  auto it = self->priv->pads.find (pad);
  if (it == self->priv->pads.end () || !it->second.paired)
    return nullptr;
  *lane = it->second.lane;
  return it->second.session;
}

/* Chunk mode: @event carries the item fields of our fan-out (the drain's EOS,
 * the flush that resets the branch, the force-key-unit before a chunk):
 * TRUE with the chunk's seq. */
static gboolean
is_chunk_event (GstGpuFanIn * self, GstPad * pad, GstEvent * event,
    guint64 * seq)
{
  guint64 session_id = 0;
  if (!gst_gpufan_event_get_item (event, &session_id, seq))
    return FALSE;
  guint lane = 0;
  std::shared_ptr<gpufan::FanInPort> session = pad_session (self, pad, &lane);
  return session && session->id () == session_id;
}

static void
note_lane_reset (GstGpuFanIn * self, GstPad * pad)
{
  guint lane = 0;
  if (std::shared_ptr<gpufan::FanInPort> session = pad_session (self, pad, &lane))
    session->NoteLaneReset (lane);
}

/* The chunk open on @pad ended (its drain's EOS came, or the next chunk
 * began): its output goes into the window as one item. Without an open
 * chunk (its start event was lost), an empty one settles @seq. */
static void
end_chunk (GstGpuFanIn * self, GstPad * pad, std::optional<guint64> seq)
{
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  std::unique_ptr<FanInItem> chunk;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    auto it = priv->pads.find (pad);
    if (it == priv->pads.end () || !it->second.paired
        || priv->output.FlushingUnlocked () || it->second.flushing)
      return;
    session = it->second.session;
    lane = it->second.lane;
    chunk = std::move (it->second.chunk);
    if (chunk && !seq)
      seq = it->second.chunk_seq;
  }
  if (!seq)
    return;
  if (!chunk) {
    chunk.reset (new FanInItem ());
    chunk->lane = lane;
    chunk->chunk.reset (new std::vector<gpufan::PayloadPtr> ());
  }
  GST_LOG_OBJECT (pad, "chunk %" G_GUINT64_FORMAT ": %zu outputs", *seq,
      chunk->chunk->size ());
  gpufan::Arrival arrival = gst_gpufan_in_output_from_lane (self, session,
      PendingArrival{ lane, *seq, gpufan::kNoTime,
          gpufan::PayloadPtr (chunk.release ()) });
  if (arrival.status == gpufan::ArrivalStatus::kLate)
    GST_DEBUG_OBJECT (pad,
        "chunk %" G_GUINT64_FORMAT " came after it was given up: dropped",
        *seq);
}

/* The chunk open on @pad ended at an EOS its branch made itself, not at its
 * drain: an element of the branch gave up on the stream (a queue whose
 * downstream returned an error posts it and sends an EOS of its own). The
 * chunk is lost and its lane failed: the Session gives it up, and the
 * fan-out's worker, waiting for it to settle, takes it as its branch's
 * error. */
static void
end_chunk_by_branch (GstGpuFanIn * self, GstPad * pad)
{
  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  guint64 seq = 0;
  std::unique_ptr<FanInItem> chunk;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
    auto it = self->priv->pads.find (pad);
    if (it == self->priv->pads.end () || !it->second.paired
        || !it->second.chunk)
      return;
    session = it->second.session;
    lane = it->second.lane;
    seq = it->second.chunk_seq;
    chunk = std::move (it->second.chunk);
  }
  GST_WARNING_OBJECT (pad, "chunk %" G_GUINT64_FORMAT " ended without its "
      "drain (an EOS of the branch's own): %zu outputs dropped", seq,
      chunk->chunk->size ());
  session->EndChunkByBranch (lane, seq);
}

/* A chunk-start event of our fan-out: what the lane returns from now on is
 * chunk @seq's output. Consumed (TRUE); FALSE for anything else. */
bool
gst_gpufan_in_chunk_start (GstGpuFanIn * self, GstPad * pad, GstEvent * event)
{
  guint64 session_id = 0, seq = 0;
  guint chunk_lane = 0;
  guint32 caps_epoch = 0, segment_epoch = 0;
  if (!gst_gpufan_chunk_start_parse (event, &session_id, &chunk_lane, &seq,
          &caps_epoch, &segment_epoch))
    return FALSE;
  if (!gst_gpufan_in_ensure_paired (self, pad))
    return FALSE;
  guint lane = 0;
  std::shared_ptr<gpufan::FanInPort> session = pad_session (self, pad, &lane);
  if (!session || session->id () != session_id)
    return FALSE;
  gst_event_unref (event);
  gst_gpufan_in_use_handler (self, gpufanin::chunk_handler ());
  /* the previous chunk's drain did not come through: it ended here */
  end_chunk (self, pad, std::nullopt);
  /* sent again after its lane failed: what had left already of it */
  const guint32 skip = session->ChunkOutputsSent (lane, seq);
  std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
  auto it = self->priv->pads.find (pad);
  if (it != self->priv->pads.end ()) {
    it->second.chunk_skip = skip;
    auto * chunk = new FanInItem ();
    chunk->lane = lane;
    chunk->chunk.reset (new std::vector<gpufan::PayloadPtr> ());
    it->second.chunk.reset (chunk);
    it->second.chunk_seq = seq;
    it->second.chunk_caps_epoch = caps_epoch;
    it->second.chunk_segment_epoch = segment_epoch;
  }
  return TRUE;
}


/* Whether @pad's lane is inside a chunk (between its start and its end). */
static bool
in_chunk (GstGpuFanIn * self, GstPad * pad)
{
  std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
  auto it = self->priv->pads.find (pad);
  return it != self->priv->pads.end () && it->second.chunk;
}

/* An output of the chunk @taken joined came: counts as progress; the head
 * chunk's output leaves as it comes. */
static GstFlowReturn
chunk_output (GstGpuFanIn * self, GstPad * pad, gpufanin::TakenItem & taken)
{
  GstGpuFanInPrivate * priv = self->priv;
  const guint64 seq = *taken.chunk_seq;
  switch (taken.session->ChunkOutput (taken.lane, seq)) {
    case gpufan::Session::ChunkState::kHead:
      /* a batch (what is attached before the head leaves before it), then
       * the head chunk's output (stream_head_chunk_locked) */
      gst_gpufan_in_output_now (self, taken.session);
      break;
    case gpufan::Session::ChunkState::kWaiting:
      break;
    case gpufan::Session::ChunkState::kGone: {
      /* given up: what it returns is late; holding it would only keep a
       * branch's buffers from its pool */
      std::vector<gpufan::PayloadPtr> late;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end () && it->second.chunk
            && it->second.chunk_seq == seq)
          late.swap (*it->second.chunk->chunk);
      }
      GST_LOG_OBJECT (pad,
          "chunk %" G_GUINT64_FORMAT " was given up: %zu outputs dropped",
          seq, late.size ());
      break;
    }
  }
  return priv->output.Result ();
}

/* ------------------------------------------------------------------------ */
/* The output: a chunk's parts, the head chunk's output as it comes */

/* Chunk mode: @position in @from as a position in @to, through its running
 * time (rate 1.0 only; FALSE otherwise). Signed: a DTS may lie before the
 * segment's start. */
gboolean
gst_gpufan_in_translate_position (const GstSegment * from,
    const GstSegment * to, GstClockTime * position)
{
  if (!GST_CLOCK_TIME_IS_VALID (*position))
    return TRUE;
  const gint64 running = (gint64)*position
      - (gint64)(from->start + from->offset) + (gint64)from->base;
  const gint64 moved
      = running - (gint64)to->base + (gint64)(to->start + to->offset);
  if (moved < 0)
    return FALSE;
  *position = (GstClockTime)moved;
  return TRUE;
}

/* Chunk mode: an element that restarts after the flush between chunks may
 * also restart its timestamps (GstVideoEncoder rebases each new stream onto
 * its minimum PTS, with a segment to match). A buffer of a chunk whose
 * segment differs from downstream's only by where it starts is moved into
 * downstream's segment, keeping its running time, and that segment is not
 * sent: downstream sees one segment and timestamps that never go back. */
static void
retime_chunk_item (GstGpuFanInPrivate * priv, FanInItem * item)
{
  /* a chunk of another input segment (the input's segment changed) brings
   * its own segment downstream */
  const bool same_input_segment = priv->out_has_segment_epoch
      && priv->out_segment_epoch == item->segment_epoch;
  if (!same_input_segment || !item->segment || !priv->out_segment_valid
      || !GST_IS_BUFFER (item->obj)
      || priv->out_segment_events.Has (item->segment))
    return;
  const GstSegment * segment;
  gst_event_parse_segment (item->segment, &segment);
  const GstSegment * out = &priv->out_segment;
  if (gst_segment_is_equal (segment, out) || segment->format != GST_FORMAT_TIME
      || out->format != GST_FORMAT_TIME || segment->rate != 1.0
      || out->rate != 1.0 || segment->applied_rate != out->applied_rate)
    return;
  GstBuffer * buffer = GST_BUFFER_CAST (item->obj);
  GstClockTime pts = GST_BUFFER_PTS (buffer), dts = GST_BUFFER_DTS (buffer);
  if (!gst_gpufan_in_translate_position (segment, out, &pts)
      || !gst_gpufan_in_translate_position (segment, out, &dts))
    return; /* before downstream's segment: the segment goes as it is */
  buffer = gst_buffer_make_writable (buffer);
  GST_BUFFER_PTS (buffer) = pts;
  GST_BUFFER_DTS (buffer) = dts;
  item->obj = GST_MINI_OBJECT_CAST (buffer);
  item->segment = nullptr;
}

/* Pushes the buffers and events of a chunk's output, in the order its lane
 * made them. *@failed: the one whose push failed. */
static GstFlowReturn
push_chunk_parts (GstGpuFanIn * self, std::vector<gpufan::PayloadPtr> & parts,
    guint64 session_id, FanInItem ** failed)
{
  for (gpufan::PayloadPtr & part : parts) {
    auto * sub = static_cast<FanInItem *> (part.get ());
    retime_chunk_item (self->priv, sub);
    GstFlowReturn ret = gst_gpufan_in_push_item (self, sub, session_id);
    self->priv->out_segment_epoch = sub->segment_epoch;
    self->priv->out_has_segment_epoch = true;
    if (ret != GST_FLOW_OK) {
      *failed = sub;
      return ret;
    }
  }
  return GST_FLOW_OK;
}

/* Chunk mode: the window's head is a chunk whose lane is still returning its
 * output. What it returned so far goes downstream now, in its turn (nothing
 * is ahead of the head), instead of waiting for the chunk's drain: a chunk
 * longer than a branch's buffer pool would otherwise never be drained (its
 * elements wait for buffers the fan-in holds), and its frames leave earlier.
 * Called with output_lock held, after a batch. */
static void
stream_head_chunk_locked (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, bool * pause)
{
  GstGpuFanInPrivate * priv = self->priv;
  if (*pause)
    return;
  std::optional<guint64> head = session->PendingHeadSeq ();
  if (!head)
    return;
  std::vector<gpufan::PayloadPtr> parts, late;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (priv->output.HaltedUnlocked ())
      return;
    for (auto & kv : priv->pads) {
      PadState & state = kv.second;
      if (!state.chunk || state.chunk->chunk->empty () || !state.paired
          || state.session != session)
        continue;
      /* they leave now, what a failure of the lane does not lose, unless
       * the lane failed meanwhile (then they are late) */
      if (state.chunk_seq == *head
          && session->NoteChunkStreamed (state.lane, *head,
              state.chunk->chunk->size ()))
        parts.swap (*state.chunk->chunk);
      else if (!session->IsOpen (state.chunk_seq)) {
        /* given up (this batch may have done it): its output is late, and
         * holding it would keep a branch's buffers from its pool */
        for (gpufan::PayloadPtr & p : *state.chunk->chunk)
          late.push_back (std::move (p));
        state.chunk->chunk->clear ();
      }
    }
  }
  if (parts.empty ())
    return;
  /* several streams: to the head chunk's stream's src pad */
  const guint32 stream = session->ItemStream (*head);
  if (stream != gpufan::kMainStream) {
    gst_gpufan_in_push_stream_chunk_parts (self, stream, *head, parts);
    return;
  }
  FanInItem * failed = nullptr;
  GstFlowReturn ret = push_chunk_parts (self, parts, session->id (), &failed);
  if (ret != GST_FLOW_OK)
    gst_gpufan_in_output_failed (self, *session, ret, failed, pause);
}


namespace {

class ChunkHandler : public gpufanin::ItemHandler {
public:
  const char * Name () const override { return "chunk"; }
  int Rank () const override { return 2; }

  GstFlowReturn Arrive (GstGpuFanIn * self, GstPad * pad,
      GstMiniObject * obj) const override
  {
    obj = gst_gpufan_in_hold_chunk_output (self, pad, obj);
    gpufanin::TakenItem taken;
    GstFlowReturn ret;
    if (!gst_gpufan_in_take_item (self, pad, obj, &taken, &ret))
      return ret;
    if (taken.chunk_seq)
      return chunk_output (self, pad, taken);
    /* outside a chunk: an item of its own */
    return gst_gpufan_in_arrive_item (self, pad, taken);
  }

  void TakeUnlocked (PadState & state,
      gpufanin::TakenItem & taken) const override
  {
    if (!state.chunk)
      return;
    /* part of a chunk's output: it leaves with the chunk, with its input's
     * caps epoch (lanes must agree on the caps of one input:
     * gst_gpufan_in_push_sticky) */
    FanInItem * item = taken.item;
    taken.item = nullptr;
    taken.chunk_seq = state.chunk_seq;
    if (state.chunk_skip > 0) {
      /* it left from the lane the chunk failed on */
      state.chunk_skip--;
      taken.dropped.reset (item);
      return;
    }
    item->caps_epoch = state.chunk_caps_epoch;
    item->has_caps_epoch = true;
    item->segment_epoch = state.chunk_segment_epoch;
    state.chunk->chunk->emplace_back (item);
  }

  bool HandleEvent (GstGpuFanIn * self, GstPad * pad,
      GstEvent * event) const override
  {
    guint64 chunk_seq = 0;
    switch (GST_EVENT_TYPE (event)) {
      case GST_EVENT_FLUSH_START:
      case GST_EVENT_FLUSH_STOP:
      case GST_EVENT_EOS:
      case GST_EVENT_CUSTOM_DOWNSTREAM:
        if (!is_chunk_event (self, pad, event, &chunk_seq))
          break;
        /* the drain's EOS ends the chunk; the flush that resets the branch
         * and the force-key-unit before a chunk stay inside (the fan-out
         * learns that its reset got through) */
        if (GST_EVENT_TYPE (event) == GST_EVENT_EOS)
          end_chunk (self, pad, chunk_seq);
        else if (GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_STOP)
          note_lane_reset (self, pad);
        gst_event_unref (event);
        return true;
      default:
        break;
    }
    switch (GST_EVENT_TYPE (event)) {
      case GST_EVENT_EOS:
        /* an EOS without our fields in the middle of a chunk is not its
         * drain (the drain passes on the fan-out's EOS, and the fan-out's
         * own EOS comes after every drain): the branch ended the chunk
         * itself */
        if (!in_chunk (self, pad))
          return false;
        end_chunk_by_branch (self, pad);
        gst_event_unref (event);
        return true;
      case GST_EVENT_CUSTOM_DOWNSTREAM:
        if (gst_gpufan_in_chunk_start (self, pad, event))
          return true;
        /* inside a chunk: an encoder's answer to the chunk's own request
         * (every chunk starts with a keyframe anyway) */
        if (!gst_video_event_is_force_key_unit (event) || !in_chunk (self, pad))
          return false;
        gst_event_unref (event);
        return true;
      default:
        return false;
    }
  }

  bool QueryPassesUnlocked (const PadState & state,
      GstQuery * query) const override
  {
    /* The branch was drained and reset for this chunk, and what the lane
     * delivered before is whole in the window. A decoder that renegotiates
     * at the chunk's start would otherwise wait here until the lane's
     * earlier chunks left, that is until every chunk before them on other
     * lanes was done: the lanes would take turns. An ALLOCATION answer
     * changes nothing of the held buffers. */
    return state.chunk && GST_QUERY_TYPE (query) == GST_QUERY_ALLOCATION;
  }

  bool OutputFromTask (GstGpuFanIn *) const override { return true; }

  bool PushReleased (GstGpuFanIn * self, gpufan::FanInPort & session,
      gpufan::Released & released, bool * pause) const override
  {
    if (released.stream != gpufan::kMainStream) {
      /* to its stream's own output thread */
      gst_gpufan_in_push_stream_chunk (self, released);
      return true;
    }
    auto * item = static_cast<FanInItem *> (released.payload.get ());
    FanInItem * failed = item;
    /* a chunk's output, in the order its lane made it, or an item of its
     * own (an event, an output outside a chunk) */
    GstFlowReturn ret = item->chunk
        ? push_chunk_parts (self, *item->chunk, session.id (), &failed)
        : gst_gpufan_in_push_item (self, item, session.id ());
    if (ret == GST_FLOW_OK)
      return true;
    gst_gpufan_in_output_failed (self, session, ret, failed, pause);
    return false;
  }

  void AfterBatch (GstGpuFanIn * self,
      const std::shared_ptr<gpufan::FanInPort> & session,
      bool * pause) const override
  {
    stream_head_chunk_locked (self, session, pause);
  }
};

} // namespace

const gpufanin::ItemHandler &
gpufanin::chunk_handler ()
{
  static const ChunkHandler handler;
  return handler;
}
