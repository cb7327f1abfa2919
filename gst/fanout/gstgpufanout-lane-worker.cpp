/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A lane's worker: the loop that takes one item at a time and hands it to
 * the lane's item handler, its idle wait, the liveness markers of a stalled
 * lane, and the push reports to the Session. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <algorithm>
#include <chrono>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

gpufan::PushOutcome
fanout::outcome_of (GstFlowReturn ret)
{
  if (ret == GST_FLOW_OK)
    return gpufan::PushOutcome::kDelivered;
  if (flow_is_fatal (ret))
    return gpufan::PushOutcome::kFailed;
  return gpufan::PushOutcome::kDropped;
}

/* Pushes a marker behind item @seq (see gst_gpufan_marker_new): the fan-in
 * proves the item dropped if it gets the marker and not the item. */
void
fanout::push_marker (GstGpuFanOut * self, const LanePtr & lane, guint64 seq)
{
  GST_LOG_OBJECT (lane->pad, "marker behind item %" G_GUINT64_FORMAT, seq);
  gst_pad_push_event (lane->pad,
      gst_gpufan_marker_new (self->priv->session->id (), lane->id, seq));
}

void
fanout::lane_mark_stalled_unlocked (const LanePtr & lane)
{
  /* its first marker is due when the Session says (CheckLivenessMarker) */
  lane->transition_unlocked (LaneEvent::kStalled);
  lane->cond.notify_all ();
}

/* The worker waits for an item or a state other than running. An idle
 * stalled lane sends a marker every stall-timeout (its branch may answer
 * again, as a valve that opens does): its worker also wakes when the
 * Session says the next one is due, TRUE when a marker is to go now. Call
 * with the lane lock held. */
static bool
lane_wait_idle_unlocked (GstGpuFanOut * self, const LanePtr & lane,
    const LaneItemHandler & handler, std::unique_lock<gpufan::Mutex> & lk)
{
  gint64 idle_since = gpufan::kNoTime;
  struct CountIdle {
    GstGpuFanOut * self;
    const LanePtr & lane;
    const gint64 & since;
    ~CountIdle ()
    {
      if (since != gpufan::kNoTime)
        lane->timer->Add (gpufan::LaneTime::kIdle, since, session_now (self));
    }
  } count_idle{ self, lane, idle_since };
  gpufan::FanOutPort & session = *self->priv->session;
  gint64 marker_due = gpufan::kNoTime;
  while ((lane->queue.empty ()
          || handler.waits_before_front_unlocked (self, lane))
      && lane->accepts_items_unlocked ()) {
    if (lane->stalled_unlocked ()) {
      switch (session.CheckLivenessMarker (lane->id, &marker_due)) {
        case gpufan::LivenessMarker::kAnswered:
          /* heard from again */
          lane->transition_unlocked (LaneEvent::kCameBack);
          continue;
        case gpufan::LivenessMarker::kSend:
          return true;
        case gpufan::LivenessMarker::kWait:
          break;
      }
    }
    lane->worker_waiting = true;
    if (idle_since == gpufan::kNoTime)
      idle_since = session_now (self);
    if (lane->stalled_unlocked ())
      session.WaitUntilDue (lane->cond, lk, marker_due);
    else
      lane->cond.wait (lk);
    lane->worker_waiting = false;
  }
  return false;
}

/* The push of @seq returned: the Session learns it with the next item's
 * start (start_item) or at the latest in the worker's next iteration
 * (lane_report_push). */
void
fanout::note_push (const LanePtr & lane, guint64 seq,
    gpufan::PushOutcome outcome)
{
  lane->unreported_push.pending = true;
  lane->unreported_push.seq = seq;
  lane->unreported_push.outcome = outcome;
}

/* Tells the Session how the last push ended; a marker follows the pushed
 * item when the Session asks for one. */
void
fanout::lane_report_push (GstGpuFanOut * self, const LanePtr & lane)
{
  if (!lane->unreported_push.pending)
    return;
  lane->unreported_push.pending = false;
  const guint64 seq = lane->unreported_push.seq;
  if (self->priv->session->OnPushed (lane->id, seq,
          lane->unreported_push.outcome))
    push_marker (self, lane, seq);
}

/* The worker takes @item out of its queue (Session::MarkStarted), reporting
 * the previous push with it. FALSE: the item is no longer awaited. */
bool
fanout::start_item (GstGpuFanOut * self, const LanePtr & lane,
    const QueuedItem & item)
{
  gpufan::FanOutPort & session = *self->priv->session;
  if (!lane->unreported_push.pending)
    return session.MarkStarted (lane->id, item.seq, item.woke_worker);
  lane->unreported_push.pending = false;
  const guint64 pushed = lane->unreported_push.seq;
  bool marker = false;
  const bool tracked = session.MarkStartedAfterPush (lane->id, pushed,
      lane->unreported_push.outcome, item.seq, &marker);
  if (!marker)
    return tracked;
  /* behind the pushed item, and before this one starts */
  push_marker (self, lane, pushed);
  return session.MarkStarted (lane->id, item.seq);
}

/* The lane's streaming thread: one item per call. The task owns a reference
 * to its lane (see start_lane_task), so a released lane outlives its task. */
void
fanout::lane_loop (gpointer user_data)
{
  const LanePtr & lane = *static_cast<LanePtr *> (user_data);
  GstGpuFanOut * self = lane->element;
  const LaneItemHandler & handler = lane_handler (lane);
  QueuedItem item;

  GstFlowReturn result;
  guint link_generation;
  {
    std::unique_lock<gpufan::Mutex> lk (lane->lock);
    /* the last push is reported now unless the next item, queued already,
     * takes the report along (start_item) */
    if (lane->unreported_push.pending
        && (lane->queue.empty () || !lane->accepts_items_unlocked ()
            || (lane->queue.front ().kind != ItemKind::kBuffer
                && lane->queue.front ().kind != ItemKind::kScheduledEvent))) {
      lk.unlock ();
      lane_report_push (self, lane);
      lk.lock ();
    }
    /* the previous item is done: a drain may be waiting for that */
    lane->busy = false;
    if (lane->drain_waiters && lane->queue.empty ())
      lane->cond.notify_all ();
    bool liveness_due = lane_wait_idle_unlocked (self, lane, handler, lk);
    if (!lane->accepts_items_unlocked ()) {
      lk.unlock ();
      GST_DEBUG_OBJECT (lane->pad, "not running, pausing lane task");
      gst_pad_pause_task (lane->pad);
      return;
    }
    if (liveness_due) {
      /* idle and stalled: does the branch answer again? */
      guint64 seq = lane->last_seq;
      lk.unlock ();
      push_marker (self, lane, seq);
      return;
    }
    if (handler.holds_front_unlocked (self, lane)) {
      /* the front may move to another lane: woken when it did, or when
       * the stall listener or the chain function leaves it here */
      lane->worker_waiting = true;
      lane->cond.wait (lk);
      lane->worker_waiting = false;
      return;
    }
    item = std::move (lane->queue.front ());
    lane->queue.pop_front ();
    lane->busy = true;
    if (item.kind == ItemKind::kEvent && event_orders_replay (item.obj))
      lane->events_taken_through
          = std::max (lane->events_taken_through, item.position);
    /* the chain function may wait for room (chunk_enqueue) */
    if (lane->producer_waiting)
      lane->cond.notify_all ();
    result = lane->result;
    link_generation = lane->link_generation;
  }

  handler.handle (self, lane, item, result, link_generation);
  /* busy until the next call takes the lane lock anyway (one lock per
   * item): see the top of this function */
}
