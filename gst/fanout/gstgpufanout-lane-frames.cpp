/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The frame item handler of a lane's worker: scheduled buffers and GAPs
 * tagged and pushed, serialized events pushed, and EOS held back while
 * frames may still be replayed. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;


/* With replay on, a lane whose next item is EOS holds it back while frames
 * (or chunks) are still on their way: if a lane fails, its items may come
 * here, and a branch takes nothing after EOS. It lets go once every item
 * has left gpufanin (lanes_note_drained wakes it; an item stuck in a
 * branch leaves at the latest by stall-timeout), and takes one sent again
 * that is queued ahead meanwhile. (A branch that returns frames only at
 * EOS loses them in frame mode anyway: that is chunk mode's job; a chunk
 * ends at its own drain, not at this EOS.) Call with the lane lock held
 * (the Session's is a leaf lock). */
bool
fanout::lane_eos_held_unlocked (GstGpuFanOut * self, const LanePtr & lane)
{
  if (lane->queue.empty () || lane->failed_unlocked () || !replay_on (self))
    return false;
  const QueuedItem & front = lane->queue.front ();
  if (front.kind != ItemKind::kEvent
      || GST_EVENT_TYPE (GST_EVENT_CAST (front.obj)) != GST_EVENT_EOS)
    return false;
  return self->priv->session->AccountedForSinceNs () == gpufan::kNoTime;
}

/* Gives a scheduled item what identifies it at the fan-in: a buffer our
 * GstGpuFanMeta (seq, lane, caps epoch; an outer fan-out's meta, of nested
 * pairs, stays), a GAP event the item fields. Done here rather than in the
 * chain function: upstream's thread is the one every item passes. */
void
fanout::tag_item (GstGpuFanOut * self, const LanePtr & lane, QueuedItem & item)
{
  const guint64 session_id = self->priv->session->id ();
  if (GST_IS_BUFFER (item.obj)) {
    GstBuffer * buffer
        = gst_buffer_make_writable (GST_BUFFER_CAST (item.Steal ()));
    gst_buffer_remove_gpufan_meta (buffer, session_id);
    gst_buffer_add_gpufan_meta (buffer, session_id, item.seq, lane->id,
        item.caps_epoch);
    item.obj = GST_MINI_OBJECT_CAST (buffer);
  } else {
    GstEvent * event = gst_event_make_writable (GST_EVENT_CAST (item.Steal ()));
    gst_gpufan_event_set_item (event, session_id, item.seq);
    item.obj = GST_MINI_OBJECT_CAST (event);
  }
}

/* Pushes a scheduled item (a buffer, or a GAP event) into the branch; the
 * Session learns how the push ended with the next item (note_push). */
static void
push_scheduled_item (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item, GstFlowReturn result, guint link_generation)
{
  if (!start_item (self, lane, item)) {
    /* given up already (its lane stalled) or forgotten (flush): pushing it
     * would only make it late */
    GST_LOG_OBJECT (lane->pad,
        "item %" G_GUINT64_FORMAT " no longer awaited, "
        "not pushed",
        item.seq);
    return;
  }
  lane->last_seq = item.seq;
  tag_item (self, lane, item);

  if (item.kind == ItemKind::kScheduledEvent) {
    /* a GAP the branch refused is a dropped item, not a lane result */
    bool ok = !flow_is_fatal (result)
        && gst_pad_push_event (lane->pad, GST_EVENT_CAST (item.Steal ()));
    note_push (lane, item.seq,
        ok ? gpufan::PushOutcome::kDelivered : gpufan::PushOutcome::kDropped);
    return;
  }

  /* a staging copy is part of the lane's work (its service time) */
  stage_item (lane, item);
  if (flow_is_fatal (result)) {
    /* never feed a failed branch; the item counts as failed */
    note_push (lane, item.seq, gpufan::PushOutcome::kFailed);
    return;
  }
  const gint64 push_start = session_now (self);
  GstFlowReturn ret = gst_pad_push (lane->pad, GST_BUFFER_CAST (item.Steal ()));
  lane->timer->Add (gpufan::LaneTime::kPush, push_start, session_now (self),
      item.seq);
  note_push (lane, item.seq, outcome_of (ret));
  /* one line per frame at LOG: which lane took it, and how its push ended */
  GST_LOG_OBJECT (lane->pad, "item %" G_GUINT64_FORMAT " pushed into lane %u: %s",
      item.seq, lane->id, gst_flow_get_name (ret));
  if (ret != GST_FLOW_OK)
    lane_set_result (self, lane, ret, link_generation);
}

void
fanout::push_lane_event (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item)
{
  GstEvent * event = GST_EVENT_CAST (item.Steal ());
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS) {
    /* before the push: the pipeline's EOS must not overtake the stats */
    {
      std::lock_guard<gpufan::Mutex> lk (lane->lock);
      lane->eos_pushed = true;
    }
    on_lane_eos (self);
  }
  GST_LOG_OBJECT (lane->pad, "pushing %" GST_PTR_FORMAT, event);
  gst_pad_push_event (lane->pad, event);
}

namespace {

/* Each buffer (or GAP) on its own: the lane pushes it tagged, and a stalled
 * lane keeps its queue. */
class FrameItemHandler final : public LaneItemHandler {
public:
  bool waits_before_front_unlocked (GstGpuFanOut * self,
      const LanePtr & lane) const override
  {
    return lane_eos_held_unlocked (self, lane);
  }
  bool holds_front_unlocked (GstGpuFanOut *, const LanePtr &) const override
  {
    return false;
  }
  void handle (GstGpuFanOut * self, const LanePtr & lane, QueuedItem & item,
      GstFlowReturn result, guint link_generation) const override
  {
    if (item.kind == ItemKind::kEvent)
      push_lane_event (self, lane, item);
    else
      push_scheduled_item (self, lane, item, result, link_generation);
  }
  void on_stalled (GstGpuFanOut *, const LanePtr & lane) const override
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane_mark_stalled_unlocked (lane);
  }
  void on_failed_without_replay (GstGpuFanOut *,
      const LanePtr &) const override
  {
  }
};

} // namespace

const LaneItemHandler &
fanout::frame_item_handler ()
{
  static const FrameItemHandler handler;
  return handler;
}

/* The one place where the mode picks the lanes' item handler. */
const LaneItemHandler &
fanout::lane_item_handler_for (GstGpuFanOut * self)
{
  return chunk_mode_on (self) ? chunk_item_handler () : frame_item_handler ();
}

const LaneItemHandler &
fanout::lane_handler (const LanePtr & lane)
{
  const LaneItemHandler * handler = lane->handler.load ();
  return handler ? *handler : frame_item_handler ();
}
