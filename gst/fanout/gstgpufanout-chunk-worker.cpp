/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Chunk mode at a lane's worker (the chunk item handler): before a chunk's
 * first buffer the chunk-start and force-key-unit events, its buffers
 * pushed, and at its end the drain (EOS), the wait for the fan-in, and the
 * branch's reset (see gstgpufanout-chunk.cpp for the whole of chunk mode). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <gst/video/video.h>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

/* Before chunk @seq's first buffer: what tells the fan-in where its output
 * begins, and what asks an encoder for a keyframe with the stream headers
 * (one the branch resets anyway after a drain; the first chunk's lane may
 * have encoded before). */
static void
push_chunk_start (GstGpuFanOut * self, const LanePtr & lane,
    const QueuedItem & first)
{
  const guint64 session_id = self->priv->session->id ();
  const guint64 seq = first.seq;
  gst_pad_push_event (lane->pad,
      gst_gpufan_chunk_start_new (session_id, lane->id, seq, first.caps_epoch,
          first.segment_epoch));
  GstEvent * fku
      = gst_video_event_new_downstream_force_key_unit (GST_CLOCK_TIME_NONE,
          GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE, TRUE, 0);
  gst_gpufan_event_set_item (fku, session_id, seq);
  gst_pad_push_event (lane->pad, fku);
}

/* After the drain: the branch's elements saw EOS and refuse data until a
 * flush ends; the pair resets them (an encoder starts a new stream with an
 * IDR and its headers), and the segment goes again (a flush resets
 * theirs). An element that drops flushes but passes sticky events (valve
 * drop-mode=forward-sticky-events) passed the EOS, and the pads behind it
 * would refuse everything from now on: when the fan-in did not get the
 * flush, the stream-start goes again, which ends their EOS too. */
static void
reset_branch (GstGpuFanOut * self, const LanePtr & lane, guint64 seq,
    bool settled)
{
  gpufan::FanOutPort & session = *self->priv->session;
  const guint64 session_id = session.id ();
  /* the flush removes it from the pad */
  GstEvent * segment
      = gst_pad_get_sticky_event (lane->pad, GST_EVENT_SEGMENT, 0);
  const guint64 resets = session.LaneResets (lane->id);
  GstEvent * start = gst_event_new_flush_start ();
  gst_gpufan_event_set_item (start, session_id, seq);
  gst_pad_push_event (lane->pad, start);
  GstEvent * stop = gst_event_new_flush_stop (FALSE);
  gst_gpufan_event_set_item (stop, session_id, seq);
  gst_pad_push_event (lane->pad, stop);
  /* (unsettled, the fan-in gets the reset later: nothing to tell) */
  if (settled && session.LaneResets (lane->id) == resets) {
    GstEvent * stream_start
        = gst_pad_get_sticky_event (lane->pad, GST_EVENT_STREAM_START, 0);
    if (stream_start) {
      GST_DEBUG_OBJECT (lane->pad, "the fan-in did not get the reset of "
          "chunk %" G_GUINT64_FORMAT ": stream-start again", seq);
      /* a copy: the pad sends only a sticky event it does not hold */
      gst_pad_push_event (lane->pad, gst_event_copy (stream_start));
      gst_event_unref (stream_start);
    }
  }
  if (segment)
    gst_pad_push_event (lane->pad, segment);
}

/* We or a bin around us are on the way down to READY: a bin changes its
 * children's states from the sinks up, so the branch's elements (and the
 * fan-in) stop before we do, and refuse what our lanes still push. Their
 * targets are set before any child changes. */
static bool
stopping (GstGpuFanOut * self)
{
  bool stop = false;
  GstObject * obj = GST_OBJECT (gst_object_ref (self));
  while (obj && !stop) {
    if (GST_IS_ELEMENT (obj)) {
      GST_OBJECT_LOCK (obj);
      stop = GST_STATE_TARGET (obj) < GST_STATE_PAUSED;
      GST_OBJECT_UNLOCK (obj);
    }
    GstObject * parent = gst_object_get_parent (obj);
    gst_object_unref (obj);
    obj = parent;
  }
  if (obj)
    gst_object_unref (obj);
  return stop;
}

/* The branch refused the drain's EOS while the lane runs: not our flush,
 * deactivation or unlink, so an element of the branch failed (a queue whose
 * downstream returned an error answers EOS with that error). */
static bool
drain_refused_by_branch (GstGpuFanOut * self, const LanePtr & lane)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  return lane->accepts_items_unlocked () && lane->linked.load ()
      && !self->priv->session->flushing ();
}

/* The chunk's end: drain the branch, wait until the fan-in has the chunk,
 * reset the branch. A branch that failed without a push telling (an element
 * behind a queue) is found here, before the reset would hide it: the drain's
 * EOS is refused, or the chunk ends at an EOS the branch made itself
 * (Session::EndChunkByBranch). Either fails the lane as a fatal push result
 * does (on-lane-error). */
static void
drain_chunk (GstGpuFanOut * self, const LanePtr & lane, const QueuedItem & end,
    guint link_generation)
{
  gpufan::FanOutPort & session = *self->priv->session;
  auto & chunk = lane->chunk;
  chunk.started = false;
  session.SetItemUnits (lane->id, end.seq, end.chunk_frames,
      self->priv->streaming.chunk_frames);
  const bool claimed = session.IsLaneClaimed (lane->id);
  bool refused = false, stopped = false;
  if (claimed && !chunk.failed) {
    GstEvent * eos = gst_event_new_eos ();
    gst_gpufan_event_set_item (eos, session.id (), end.seq);
    GST_LOG_OBJECT (lane->pad, "draining chunk %" G_GUINT64_FORMAT, end.seq);
    const gint64 drain_start = session_now (self);
    if (!gst_pad_push_event (lane->pad, eos)) {
      if (stopping (self)) {
        /* the branch stopped under it: no failure, which would post an
         * error that the next run finds on the bus; the stop resets the
         * branch */
        GST_DEBUG_OBJECT (lane->pad, "stopping: drain of chunk %"
            G_GUINT64_FORMAT " refused", end.seq);
        stopped = true;
      } else if (drain_refused_by_branch (self, lane)) {
        GST_DEBUG_OBJECT (lane->pad, "the branch refused the drain of chunk %"
            G_GUINT64_FORMAT, end.seq);
        chunk.failed = refused = true;
      }
    }
    lane->timer->Add (gpufan::LaneTime::kPush, drain_start, session_now (self),
        end.seq);
  }
  /* replay: the lane fails before the chunk is settled as failed, so that
   * it goes again */
  if (refused
      && self->priv->on_lane_error.load () == GST_GPUFAN_LANE_ERROR_REPLAY) {
    lane_set_result (self, lane, GST_FLOW_ERROR, link_generation);
    refused = false;
  }
  const gpufan::PushOutcome outcome = chunk.failed
      ? gpufan::PushOutcome::kFailed
      : chunk.delivered ? gpufan::PushOutcome::kDelivered
                        : gpufan::PushOutcome::kDropped;
  /* no marker: the drain's EOS proves what did not come back */
  session.OnPushed (lane->id, end.seq, outcome);
  struct TraceChunk {
    GstGpuFanOut * self;
    const LanePtr & lane;
    guint64 seq;
    ~TraceChunk ()
    {
      lane->timer->Trace ("chunk", lane->chunk.started_ns, session_now (self),
          seq);
    }
  } trace_chunk{ self, lane, end.seq };
  if (refused) {
    lane_set_result (self, lane, GST_FLOW_ERROR, link_generation);
    return;
  }
  if (!claimed || chunk.failed || stopped)
    return;
  if (lane->serial_reset.load ()) {
    /* the reset follows the drain on the wire and cannot overtake it: the
     * lane goes on with its next chunk while this one's output travels
     * (a failed branch shows as the lane's error, the worker closing) */
    {
      std::lock_guard<gpufan::Mutex> lk (lane->lock);
      if (!lane->accepts_items_unlocked ())
        return;
    }
    if (!session.flushing ())
      reset_branch (self, lane, end.seq, false);
    return;
  }
  /* A branch with a queue returns from the EOS push at once: its outputs
   * are out only when the fan-in has the EOS. */
  const gint64 settle_start = session_now (self);
  session.WaitSettled (lane->id, end.seq);
  lane->timer->Add (gpufan::LaneTime::kSettle, settle_start,
      session_now (self), end.seq);
  if (session.ChunkEndedByBranch (lane->id, end.seq)) {
    GST_DEBUG_OBJECT (lane->pad, "the branch ended chunk %" G_GUINT64_FORMAT
        " without its drain", end.seq);
    lane_set_result (self, lane, GST_FLOW_ERROR, link_generation);
    return;
  }
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    /* a flush of our own, or the lane's end, resets the branch anyway */
    if (!lane->accepts_items_unlocked ())
      return;
  }
  if (session.flushing ())
    return;
  reset_branch (self, lane, end.seq, true);
}

void
fanout::chunk_push_item (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item, GstFlowReturn result, guint link_generation)
{
  gpufan::FanOutPort & session = *self->priv->session;
  auto & chunk = lane->chunk;

  if (item.kind == ItemKind::kChunkEnd) {
    if (chunk.started && chunk.seq == item.seq)
      drain_chunk (self, lane, item, link_generation);
    return;
  }

  if (item.chunk_first) {
    lane_report_push (self, lane);
    chunk.seq = item.seq;
    chunk.delivered = false;
    chunk.failed = flow_is_fatal (result);
    chunk.started = session.MarkStarted (lane->id, item.seq, item.woke_worker);
    chunk.started_ns = session_now (self);
    if (!chunk.started) {
      GST_LOG_OBJECT (lane->pad,
          "chunk %" G_GUINT64_FORMAT " no longer awaited, not pushed",
          item.seq);
      return;
    }
    lane->last_seq = item.seq;
    if (!chunk.failed) {
      chunk_send_stream_events (lane, item);
      push_chunk_start (self, lane, item);
    }
  } else if (!chunk.started || chunk.seq != item.seq) {
    return; /* the rest of a chunk that was given up */
  }

  /* never feed a failed branch */
  if (chunk.failed || flow_is_fatal (result)) {
    chunk.failed = true;
    return;
  }
  tag_item (self, lane, item);
  if (GST_IS_EVENT (item.obj)) {
    /* a GAP */
    if (gst_pad_push_event (lane->pad, GST_EVENT_CAST (item.Steal ())))
      chunk.delivered = true;
  } else {
    stage_item (lane, item);
    GstBuffer * buffer = GST_BUFFER_CAST (item.Steal ());
    if (item.chunk_first) {
      buffer = gst_buffer_make_writable (buffer);
      GST_BUFFER_FLAG_SET (buffer, GST_BUFFER_FLAG_DISCONT);
    }
    const gint64 push_start = session_now (self);
    GstFlowReturn ret = gst_pad_push (lane->pad, buffer);
    lane->timer->Add (gpufan::LaneTime::kPush, push_start, session_now (self),
        item.seq);
    if (ret == GST_FLOW_OK)
      chunk.delivered = true;
    else {
      chunk.failed |= flow_is_fatal (ret);
      lane_set_result (self, lane, ret, link_generation);
    }
  }
  session.NoteProgress (lane->id, item.seq);
}

namespace {

/* Chunk mode at the lane's worker: a chunk's buffers pushed, its end
 * drained; a chunk that may still move is not begun; a stalled or failed
 * lane's chunks that have not begun go to other lanes whole. */
class ChunkItemHandler final : public LaneItemHandler {
public:
  bool waits_before_front_unlocked (GstGpuFanOut * self,
      const LanePtr & lane) const override
  {
    return lane_eos_held_unlocked (self, lane);
  }
  bool holds_front_unlocked (GstGpuFanOut * self,
      const LanePtr & lane) const override
  {
    return chunk_begin_held_unlocked (self, lane);
  }
  void handle (GstGpuFanOut * self, const LanePtr & lane, QueuedItem & item,
      GstFlowReturn result, guint link_generation) const override
  {
    if (item.kind == ItemKind::kEvent)
      push_lane_event (self, lane, item);
    else
      chunk_push_item (self, lane, item, result, link_generation);
  }
  void on_stalled (GstGpuFanOut * self, const LanePtr & lane) const override
  {
    chunk_move_off_stalled (self, lane);
  }
  void on_failed_without_replay (GstGpuFanOut * self,
      const LanePtr & lane) const override
  {
    chunk_move_off_failed (self, lane);
  }
};

} // namespace

const LaneItemHandler &
fanout::chunk_item_handler ()
{
  static const ChunkItemHandler handler;
  return handler;
}
