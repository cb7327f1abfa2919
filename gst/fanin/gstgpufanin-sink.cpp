/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: the sink pads. What comes out of a lane (buffers, GAP events,
 * the fan-out's markers, EOS, sticky and other events, serialized queries)
 * is turned into Session calls; the lane's thread then outputs what that
 * made releasable (gstgpufanin-output.cpp). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <gst/video/video.h>

#include <optional>
#include <string>

static FanInItem *
new_item_unlocked (const PadState & state, GstMiniObject * obj)
{
  auto * item = new FanInItem ();
  item->obj = obj;
  item->lane = state.lane;
  item->SetSticky (state.sticky);
  return item;
}

static GstFlowReturn
not_fed_by_fanout (GstGpuFanIn * self, GstPad * pad, GstMiniObject * obj,
    const std::string & conflict)
{
  gst_mini_object_unref (obj);
  if (!conflict.empty ())
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("%s", conflict.c_str ()),
        ("A gpufanin takes the lanes of one gpufanout: give each gpufanout "
         "its own gpufanin"));
  else
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("%s:%s is not fed by a gpufanout", GST_DEBUG_PAD_NAME (pad)),
        ("Every branch into gpufanin must start at a src pad of one and the "
         "same gpufanout"));
  return GST_FLOW_ERROR;
}

/* What identifies an item: the sequence number our fan-out gave it (from our
 * session's meta, or a GAP event's fields) and its caps epoch. */
struct ItemId {
  std::optional<guint64> seq;
  guint32 caps_epoch = 0;
  bool has_caps_epoch = false;
  gint64 pts = gpufan::kNoTime;
};

static ItemId
identify_item (GstMiniObject * obj, guint64 session_id)
{
  ItemId id;
  if (GST_IS_BUFFER (obj)) {
    GstBuffer * buffer = GST_BUFFER_CAST (obj);
    if (GST_BUFFER_PTS_IS_VALID (buffer))
      id.pts = (gint64)GST_BUFFER_PTS (buffer);
    if (GstGpuFanMeta * meta
        = gst_buffer_find_gpufan_meta (buffer, session_id)) {
      id.seq = meta->seq;
      id.caps_epoch = meta->caps_epoch;
      id.has_caps_epoch = true;
    }
    return id;
  }
  GstEvent * event = GST_EVENT_CAST (obj);
  GstClockTime ts;
  gst_event_parse_gap (event, &ts, nullptr);
  if (GST_CLOCK_TIME_IS_VALID (ts))
    id.pts = (gint64)ts;
  guint64 event_session = 0, seq = 0;
  if (gst_gpufan_event_get_item (event, &event_session, &seq)
      && event_session == session_id)
    id.seq = seq;
  return id;
}

/* A buffer or a GAP event came out of a lane: into the reorder window. */
static GstFlowReturn
handle_item (GstGpuFanIn * self, GstPad * pad, GstMiniObject * obj)
{
  GstGpuFanInPrivate * priv = self->priv;

  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  std::shared_ptr<gpufan::LaneTimer> timer;
  FanInItem * item = nullptr;
  std::optional<guint64> chunk_seq;
  obj = gst_gpufan_in_hold_chunk_output (self, pad, obj);
  for (bool asked = false;; asked = true) {
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      auto it = priv->pads.find (pad);
      if (it == priv->pads.end () || priv->flushing || it->second.flushing
          || (asked && !it->second.paired)) {
        gst_mini_object_unref (obj);
        return GST_FLOW_FLUSHING;
      }
      if (it->second.eos) {
        gst_mini_object_unref (obj);
        return GST_FLOW_EOS;
      }
      if (it->second.paired) {
        session = it->second.session;
        lane = it->second.lane;
        timer = it->second.timer;
        item = new_item_unlocked (it->second, obj);
        if (it->second.chunk) {
          /* part of a chunk's output: it leaves with the chunk */
          /* its input's caps epoch: lanes must agree on the caps of one
           * input (gst_gpufan_in_push_sticky) */
          item->caps_epoch = it->second.chunk_caps_epoch;
          item->has_caps_epoch = true;
          item->segment_epoch = it->second.chunk_segment_epoch;
          it->second.chunk->chunk->emplace_back (item);
          chunk_seq = it->second.chunk_seq;
        }
        break;
      }
    }
    /* not paired yet: ask upstream, then look again (once) */
    std::string conflict;
    if (!gst_gpufan_in_ensure_paired (self, pad, &conflict))
      return not_fed_by_fanout (self, pad, obj, conflict);
  }
  /* this thread's time pushing output downstream (the lane's kOutput) */
  const gint64 output_start = session->clock ().NowNs ();
  struct CountOutput {
    const std::shared_ptr<gpufan::FanInPort> & session;
    const std::shared_ptr<gpufan::LaneTimer> & timer;
    gint64 start;
    ~CountOutput ()
    {
      timer->Add (gpufan::LaneTime::kOutput, start, session->clock ().NowNs ());
    }
  } count_output{ session, timer, output_start };
  if (chunk_seq) {
    /* counts as progress; the head chunk's output leaves as it comes */
    switch (session->ChunkOutput (lane, *chunk_seq)) {
      case gpufan::Session::ChunkState::kHead:
        gst_gpufan_in_stream_chunk (self, session);
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
              && it->second.chunk_seq == *chunk_seq)
            late.swap (*it->second.chunk->chunk);
        }
        GST_LOG_OBJECT (pad,
            "chunk %" G_GUINT64_FORMAT " was given up: %zu outputs dropped",
            *chunk_seq, late.size ());
        break;
      }
    }
    return priv->src_ret.load ();
  }
  ItemId id = identify_item (obj, session->id ());
  item->caps_epoch = id.caps_epoch;
  item->has_caps_epoch = id.has_caps_epoch;

  /* this thread pushes what it makes releasable: the task is not woken */
  gpufan::Arrival arrival = gst_gpufan_in_output_from_lane (self, session,
      PendingArrival{ lane, id.seq, id.pts, gpufan::PayloadPtr (item) });
  if (arrival.status == gpufan::ArrivalStatus::kLate)
    GST_DEBUG_OBJECT (pad,
        "item %" G_GUINT64_FORMAT " came after its slot was given up: "
        "dropped",
        arrival.seq);

  /* downstream's result goes upstream, as queue does */
  return priv->src_ret.load ();
}

/* A marker of our fan-out (gst_gpufan_marker_new) came out of a lane: the
 * lane's items up to it that did not come back never will. Consumed (TRUE);
 * FALSE for anything else, a marker of an outer pair included. */
static gboolean
handle_marker (GstGpuFanIn * self, GstPad * pad, GstEvent * event)
{
  GstGpuFanInPrivate * priv = self->priv;
  guint64 session_id = 0, seq = 0;
  guint marker_lane = 0;
  if (!gst_gpufan_marker_parse (event, &session_id, &marker_lane, &seq))
    return FALSE;

  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  for (bool asked = false;; asked = true) {
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      auto it = priv->pads.find (pad);
      if (it == priv->pads.end ())
        return FALSE;
      if (it->second.paired) {
        if (it->second.session->id () != session_id)
          return FALSE;
        if (priv->flushing || it->second.flushing || it->second.eos) {
          gst_event_unref (event);
          return TRUE;
        }
        session = it->second.session;
        lane = it->second.lane;
        break;
      }
    }
    if (asked || !gst_gpufan_in_ensure_paired (self, pad))
      return FALSE;
  }
  gst_event_unref (event);
  GST_LOG_OBJECT (pad,
      "marker: lane %u's items up to %" G_GUINT64_FORMAT
      " came back or never will",
      lane, seq);
  PendingArrival marker{ lane, seq, gpufan::kNoTime, nullptr };
  marker.marker = true;
  gst_gpufan_in_output_from_lane (self, session, std::move (marker));
  return TRUE;
}

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
    if (it == priv->pads.end () || !it->second.paired || priv->flushing
        || it->second.flushing)
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
static gboolean
handle_chunk_start (GstGpuFanIn * self, GstPad * pad, GstEvent * event)
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
  self->priv->chunks_seen = true;
  /* the previous chunk's drain did not come through: it ended here */
  end_chunk (self, pad, std::nullopt);
  std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
  auto it = self->priv->pads.find (pad);
  if (it != self->priv->pads.end ()) {
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

static GstFlowReturn
gst_gpufan_in_chain (GstPad * pad, GstObject * parent, GstBuffer * buffer)
{
  return handle_item (GST_GPUFAN_IN (parent), pad,
      GST_MINI_OBJECT_CAST (buffer));
}

static gboolean
gst_gpufan_in_sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  GstGpuFanInPrivate * priv = self->priv;

  guint64 chunk_seq = 0;
  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START:
    case GST_EVENT_FLUSH_STOP:
    case GST_EVENT_EOS:
    case GST_EVENT_CUSTOM_DOWNSTREAM:
      if (!is_chunk_event (self, pad, event, &chunk_seq))
        break;
      /* chunk mode: the drain's EOS ends the chunk; the flush that resets
       * the branch and the force-key-unit before a chunk stay inside (the
       * fan-out learns that its reset got through) */
      if (GST_EVENT_TYPE (event) == GST_EVENT_EOS)
        end_chunk (self, pad, chunk_seq);
      else if (GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_STOP)
        note_lane_reset (self, pad);
      gst_event_unref (event);
      return TRUE;
    default:
      break;
  }

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START: {
      bool first;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          it->second.flushing = true;
          it->second.chunk.reset ();
        }
        first = !priv->flushing;
        priv->flushing = true;
        gst_gpufan_in_wake_output_unlocked (self);
      }
      if (!first) {
        gst_event_unref (event);
        return TRUE;
      }
      /* one FLUSH_START downstream, at once; then the task stops */
      gboolean res = gst_pad_push_event (self->srcpad, event);
      gst_pad_pause_task (self->srcpad);
      return res;
    }
    case GST_EVENT_FLUSH_STOP: {
      bool last = false;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          it->second.flushing = false;
          it->second.eos = false;
        }
        bool any_flushing = false;
        for (auto & kv : priv->pads)
          any_flushing |= kv.second.flushing;
        if (!any_flushing && priv->flushing
            && GST_PAD_IS_ACTIVE (self->srcpad)) {
          last = true;
          priv->flushing = false;
          gst_gpufan_in_restart_output_unlocked (self);
        }
      }
      if (!last) {
        gst_event_unref (event);
        return TRUE;
      }
      gboolean res = gst_pad_push_event (self->srcpad, event);
      gst_pad_start_task (self->srcpad, gst_gpufan_in_src_loop, self, nullptr);
      return res;
    }
    case GST_EVENT_EOS: {
      /* an EOS without our fields in the middle of a chunk is not its
       * drain (the drain passes on the fan-out's EOS, and the fan-out's own
       * EOS comes after every drain): the branch ended the chunk itself */
      bool open_chunk;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        open_chunk = it != priv->pads.end () && it->second.chunk;
      }
      if (open_chunk) {
        end_chunk_by_branch (self, pad);
        gst_event_unref (event);
        return TRUE;
      }
      std::shared_ptr<gpufan::FanInPort> session;
      guint lane = 0;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          it->second.eos = true;
          priv->eos_seqnum = gst_event_get_seqnum (event);
          if (it->second.paired) {
            session = it->second.session;
            lane = it->second.lane;
          }
        }
      }
      /* the lane is FIFO: whatever of it has not come back never will */
      if (session)
        session->LaneEnded (lane);
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        gst_gpufan_in_wake_output_unlocked (self);
      }
      gst_event_unref (event);
      return TRUE;
    }
    case GST_EVENT_STREAM_START:
    case GST_EVENT_CAPS:
    case GST_EVENT_SEGMENT: {
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          /* a new set: items that came before keep theirs */
          auto events = it->second.sticky
              ? std::make_shared<StickyEvents> (*it->second.sticky)
              : std::make_shared<StickyEvents> ();
          GstEvent ** slot = GST_EVENT_TYPE (event) == GST_EVENT_CAPS
              ? &events->caps
              : GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT
              ? &events->segment
              : &events->stream_start;
          gst_event_replace (slot, event);
          it->second.sticky = std::move (events);
        }
      }
      if (GST_EVENT_TYPE (event) == GST_EVENT_STREAM_START)
        gst_gpufan_in_ensure_paired (self, pad);
      gst_event_unref (event);
      return TRUE;
    }
    case GST_EVENT_GAP:
      /* a GAP stands for data: it takes its place in the order */
      return handle_item (self, pad, GST_MINI_OBJECT_CAST (event))
          == GST_FLOW_OK;
    case GST_EVENT_CUSTOM_DOWNSTREAM_STICKY:
      if (handle_marker (self, pad, event))
        return TRUE;
      break;
    case GST_EVENT_CUSTOM_DOWNSTREAM:
      if (handle_chunk_start (self, pad, event))
        return TRUE;
      if (gst_video_event_is_force_key_unit (event)) {
        /* inside a chunk: an encoder's answer to the chunk's own request
         * (every chunk starts with a keyframe anyway) */
        bool in_chunk;
        {
          std::lock_guard<gpufan::Mutex> lk (priv->lock);
          auto it = priv->pads.find (pad);
          in_chunk = it != priv->pads.end () && it->second.chunk;
        }
        if (in_chunk) {
          gst_event_unref (event);
          return TRUE;
        }
      }
      break;
    default:
      break;
  }

  /* Any other event comes once per lane: forward it once. */
  std::shared_ptr<gpufan::FanInPort> session;
  FanInItem * item = nullptr;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (priv->forwarded_seqnums.Seen (gst_event_get_seqnum (event))) {
      gst_event_unref (event);
      return TRUE;
    }
    auto it = priv->pads.find (pad);
    session = priv->session;
    if (GST_EVENT_IS_SERIALIZED (event) && session && it != priv->pads.end ()) {
      item = new_item_unlocked (it->second, GST_MINI_OBJECT_CAST (event));
      item->is_attachment = true;
    }
  }
  if (!item)
    return gst_pad_push_event (self->srcpad, event);

  /* serialized: it leaves where the fan-out saw it in the buffer order (or
   * after everything in flight, for an event a branch made) */
  std::optional<guint64> position
      = session->EventPosition (gst_event_get_seqnum (event));
  session->AttachBefore (position.value_or (G_MAXUINT64),
      gpufan::PayloadPtr (item));
  return TRUE;
}

/* A serialized query (drain, allocation, ...) from a branch must not overtake
 * what that branch delivered before it: wait until all of it has left the
 * window, and then until the output batch that took it has been pushed.
 * Flush-aware; FALSE when flushing or when the output has stopped. Woken by
 * the end of every output batch (mark_batch_done: items leave the window
 * only in a batch, a flow error is set in one) and by
 * gst_gpufan_in_wake_output_unlocked (flush, a released pad, deactivation);
 * pairing notifies too. A flush of the fan-out empties the window
 * unannounced, but its FLUSH_START reaches this pad through the lane. */
static gboolean
wait_lane_released (GstGpuFanIn * self, GstPad * pad, GstQuery * query)
{
  GstGpuFanInPrivate * priv = self->priv;
  std::unique_lock<gpufan::Mutex> lk (priv->lock);
  guint64 last_batch = 0;
  bool out_of_window = false;
  /* counted before batches_done is read (see mark_batch_done) */
  priv->batch_waiters++;
  /* and the wait is the lane's kQuery time */
  struct Uncount {
    GstGpuFanInPrivate * priv;
    std::shared_ptr<gpufan::FanInPort> session;
    std::shared_ptr<gpufan::LaneTimer> timer;
    gint64 start = 0;
    ~Uncount ()
    {
      priv->batch_waiters--;
      if (timer)
        timer->Add (gpufan::LaneTime::kQuery, start,
            session->clock ().NowNs ());
    }
  } uncount{ priv, nullptr, nullptr };
  for (;;) {
    auto it = priv->pads.find (pad);
    if (it == priv->pads.end () || priv->flushing || it->second.flushing
        || priv->src_ret.load () != GST_FLOW_OK)
      return FALSE;
    if (!it->second.paired)
      return TRUE;
    /* Chunk mode: the branch was drained and reset for this chunk, and
     * what the lane delivered before is whole in the window. A decoder
     * that renegotiates at the chunk's start would otherwise wait here
     * until the lane's earlier chunks left, that is until every chunk
     * before them on other lanes was done: the lanes would take turns. An
     * ALLOCATION answer changes nothing of the held buffers. */
    if (it->second.chunk && GST_QUERY_TYPE (query) == GST_QUERY_ALLOCATION)
      return TRUE;
    if (!uncount.timer) {
      uncount.session = it->second.session;
      uncount.timer = it->second.timer;
      uncount.start = uncount.session->clock ().NowNs ();
    }
    if (!out_of_window
        && !it->second.session->HoldsArrivedFrom (it->second.lane)) {
      out_of_window = true;
      last_batch = priv->batches_started;
    }
    if (out_of_window && priv->batches_done >= last_batch)
      return TRUE;
    priv->cond.wait (lk);
  }
}

static gboolean
gst_gpufan_in_sink_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);

  if (gst_gpufan_is_pair_query (query))
    return gst_gpufan_in_answer_pair_query (self, pad, query);
  if (GST_QUERY_IS_SERIALIZED (query) && !wait_lane_released (self, pad,
          query))
    return FALSE;
  return gst_pad_query_default (pad, parent, query);
}

void
gst_gpufan_in_setup_sink_pad (GstPad * pad)
{
  gst_pad_set_chain_function (pad, GST_DEBUG_FUNCPTR (gst_gpufan_in_chain));
  gst_pad_set_event_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_sink_event));
  gst_pad_set_query_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_sink_query));
  GST_PAD_SET_PROXY_CAPS (pad);
}
