/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A lane of gpufanout: its one state machine, the bounded queue between the
 * chain function and the lane's worker thread, and the lane's start, stop,
 * flush and drain. (Its worker: -lane-worker.cpp; its results and failures:
 * -lane-failure.cpp.) */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <algorithm>
#include <chrono>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

LanePtr
fanout::find_lane (GstGpuFanOut * self, guint id)
{
  std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
  auto it = self->priv->lanes.find (id);
  return it == self->priv->lanes.end () ? nullptr : it->second;
}

std::vector<LanePtr>
fanout::snapshot_lanes (GstGpuFanOut * self)
{
  std::vector<LanePtr> out;
  std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
  out.reserve (self->priv->lanes.size ());
  for (auto & kv : self->priv->lanes)
    out.push_back (kv.second);
  return out;
}

static gboolean start_lane_task_unlocked (const LanePtr & lane);

/* The lane's transition table: kTransitions[event][state] is the state the
 * event moves the lane to. docs/lane-states.md says who causes each. */
namespace {
constexpr size_t kStates = 6;
constexpr size_t kEvents = 10;
using S = LaneState;
/* columns: Inactive, Joining, Running, Stalled, Failed, Flushing */
constexpr LaneState kTransitions[kEvents][kStates] = {
  /* kActivate: a failed lane stays out of service until the next start */
  { S::kRunning, S::kRunning, S::kRunning, S::kStalled, S::kFailed,
      S::kRunning },
  /* kActivateDeferred */
  { S::kJoining, S::kJoining, S::kRunning, S::kStalled, S::kFailed,
      S::kJoining },
  /* kTaskStarted */
  { S::kInactive, S::kRunning, S::kRunning, S::kStalled, S::kFailed,
      S::kFlushing },
  /* kDeactivate */
  { S::kInactive, S::kInactive, S::kInactive, S::kInactive, S::kInactive,
      S::kInactive },
  /* kFlushStart: a flush does not wake an inactive lane, and a failed one
   * gets none (its branch may be stuck in a push for good) */
  { S::kInactive, S::kFlushing, S::kFlushing, S::kFlushing, S::kFailed,
      S::kFlushing },
  /* kFlushStop: the Session's reset forgets stalls too */
  { S::kInactive, S::kJoining, S::kRunning, S::kStalled, S::kFailed,
      S::kRunning },
  /* kStalled */
  { S::kInactive, S::kStalled, S::kStalled, S::kStalled, S::kFailed,
      S::kFlushing },
  /* kCameBack */
  { S::kInactive, S::kJoining, S::kRunning, S::kRunning, S::kFailed,
      S::kFlushing },
  /* kFailed */
  { S::kFailed, S::kFailed, S::kFailed, S::kFailed, S::kFailed,
      S::kFailed },
  /* kNewStart */
  { S::kInactive, S::kJoining, S::kRunning, S::kStalled, S::kInactive,
      S::kFlushing },
};
} // namespace

const gchar *
fanout::lane_state_name (LaneState state)
{
  static const gchar *const names[kStates] = { "inactive", "joining",
    "running", "stalled", "failed", "flushing" };
  return names[static_cast<size_t> (state)];
}

const gchar *
fanout::lane_event_name (LaneEvent event)
{
  static const gchar *const names[kEvents] = { "activate",
    "activate-deferred", "task-started", "deactivate", "flush-start",
    "flush-stop", "stalled", "came-back", "failed", "new-start" };
  return names[static_cast<size_t> (event)];
}

/* Every change of the lane's state goes through here, with its lock held;
 * the caller then tells the Session (lane_changed_unlocked). */
bool
Lane::transition_unlocked (LaneEvent event)
{
  const LaneState to = kTransitions[static_cast<size_t> (event)]
      [static_cast<size_t> (state_)];
  if (to == state_)
    return false;
  GST_DEBUG_OBJECT (pad, "lane %u: %s -> %s (%s)", id,
      lane_state_name (state_), lane_state_name (to), lane_event_name (event));
  state_ = to;
  return true;
}

/* The lane got the sink pad's current sticky events: it has passed every
 * event placed before the next item (a frame sent again from before them
 * must not come here). Call with the lane lock held. */
static void
note_events_taken_unlocked (GstGpuFanOut * self, const LanePtr & lane)
{
  lane->events_taken_through = std::max (lane->events_taken_through,
      static_cast<guint64> (self->priv->session->NextSeq ()));
}

bool
fanout::lane_takes_items_unlocked (const LanePtr & lane)
{
  const LaneState state = lane->state_unlocked ();
  return (state == LaneState::kRunning || state == LaneState::kJoining
      || state == LaneState::kStalled) && lane->linked.load ()
      && lane->result == GST_FLOW_OK;
}

/* Every transition ends here: the Session learns whether the lane takes
 * items, the chain function combines the results again, and whoever waits
 * on the lane (its worker, a serialized query) looks again. */
void
fanout::lane_changed_unlocked (GstGpuFanOut * self, const LanePtr & lane)
{
  /* first: a dispatch that finds no lane once the Session knows combines
   * the results again, and sees this change */
  self->priv->lane_results_changed = true;
  self->priv->session->SetLaneEligible (lane->id,
      lane_takes_items_unlocked (lane));
  lane->cond.notify_all ();
}

/* Returns FALSE (and leaves @item to be freed) unless the lane runs. */
gboolean
fanout::lane_enqueue (const LanePtr & lane, QueuedItem && item)
{
  bool wake;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    if (!lane->accepts_items_unlocked ())
      return FALSE;
    wake = lane->worker_waiting;
    item.woke_worker = wake && lane->queue.empty ();
    lane->queue.push_back (std::move (item));
  }
  /* after unlocking, so that the worker does not block on the lock at once */
  if (wake)
    lane->cond.notify_all ();
  return TRUE;
}

gboolean
fanout::lane_enqueue_in_turn (const LanePtr & lane, QueuedItem && item,
    guint64 order)
{
  bool wake = false, queued = false, waiters;
  {
    std::unique_lock<gpufan::Mutex> lk (lane->lock);
    /* The thread of the item dispatched to this lane just before is between
     * its dispatch and this call (it never blocks there): its turn first.
     * A lane that stops running ends the wait (its items are withdrawn). */
    while (lane->next_order < order && lane->accepts_items_unlocked ()) {
      lane->order_waiters++;
      lane->cond.wait (lk);
      lane->order_waiters--;
    }
    lane->next_order = MAX (lane->next_order, order + 1);
    if (lane->accepts_items_unlocked ()) {
      wake = lane->worker_waiting;
      item.woke_worker = wake && lane->queue.empty ();
      lane->queue.push_back (std::move (item));
      queued = true;
    }
    waiters = lane->order_waiters > 0;
  }
  if (wake || waiters)
    lane->cond.notify_all ();
  return queued;
}

bool
fanout::event_orders_replay (GstMiniObject * obj)
{
  if (!obj || !GST_IS_EVENT (obj))
    return true;
  switch (GST_EVENT_TYPE (GST_EVENT_CAST (obj))) {
    case GST_EVENT_TAG:
    case GST_EVENT_TOC:
      return false;
    default:
      return true;
  }
}

/* The lane takes items, has not failed, and has not passed an event that
 * came after item @seq. */
bool
fanout::lane_takes_replay_unlocked (const LanePtr & lane, guint64 seq)
{
  return lane_takes_items_unlocked (lane)
      && lane->events_taken_through <= seq;
}

bool
fanout::lane_takes_replay (const LanePtr & lane, guint64 seq)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  return lane_takes_replay_unlocked (lane, seq);
}

gboolean
fanout::lane_enqueue_replay (const LanePtr & lane, QueuedItem && item)
{
  bool wake;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    if (!lane_takes_replay_unlocked (lane, item.seq))
      return FALSE;
    /* past the queue's bound (it was in flight already) */
    auto at = lane->queue.begin ();
    for (auto it = lane->queue.begin (); it != lane->queue.end (); ++it) {
      if (it->kind == ItemKind::kEvent && it->position > item.seq)
        break;
      if (it->kind == ItemKind::kEvent || (it->replayed && it->seq < item.seq))
        at = it + 1;
    }
    item.replayed = true;
    wake = lane->worker_waiting;
    lane->queue.insert (at, std::move (item));
  }
  if (wake)
    lane->cond.notify_all ();
  return TRUE;
}

/* Stops a lane's queue (@state kInactive: its pad is deactivated or
 * released; kFlushing: a flush starts); queued items are dropped. (The
 * sticky events among them are not lost: a lane restarting after a flush
 * gets the sink pad's current ones, see lane_restart.) */
void
fanout::lane_stop (GstGpuFanOut * self, const LanePtr & lane, LaneState state)
{
  std::deque<QueuedItem> dropped;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane->transition_unlocked (state == LaneState::kInactive
            ? LaneEvent::kDeactivate : LaneEvent::kFlushStart);
    dropped.swap (lane->queue);
    for (QueuedItem & item : lane->replay_held)
      dropped.push_back (std::move (item));
    lane->replay_held.clear ();
    lane->chunk_moves_pending = false;
    lane_changed_unlocked (self, lane);
  }
  /* dropped items are unreffed here, outside the lock */
}

/* The pad was activated: the lane runs, with the sink pad's sticky events
 * stored before its first buffer; its task starts unless @start_task is
 * FALSE (see gst_gpufan_out_src_activate_mode). */
gboolean
fanout::lane_activate (GstGpuFanOut * self, const LanePtr & lane,
    bool start_task)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  /* the mode's item handler, chosen once per start (chunk mode is set in
   * NULL or READY only) */
  lane->handler = &lane_item_handler_for (self);
  lane->fail_handled = false;
  /* running first, so that an event arriving meanwhile is queued; no
   * buffer comes before lane_changed_unlocked tells the Session */
  lane->transition_unlocked (start_task ? LaneEvent::kActivate
          : LaneEvent::kActivateDeferred);
  copy_sticky_events (self, lane->pad, true);
  note_events_taken_unlocked (self, lane);
  gboolean started = start_task ? start_lane_task_unlocked (lane) : TRUE;
  lane_changed_unlocked (self, lane);
  return started;
}

/* Starts the task that lane_activate left to request_new_pad. */
void
fanout::lane_start_deferred_task (const LanePtr & lane)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  if (GST_PAD_MODE (lane->pad) == GST_PAD_MODE_PUSH
      && lane->accepts_items_unlocked ()) {
    start_lane_task_unlocked (lane);
    lane->transition_unlocked (LaneEvent::kTaskStarted);
  }
}

/* A new stream (@all: after PAUSED->READY) or a flush's end (only the
 * results the flush ended: FLUSHING, EOS) clears the lane's sticky result. */
void
fanout::lane_reset_result (GstGpuFanOut * self, const LanePtr & lane, bool all)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  if (all || lane->result == GST_FLOW_FLUSHING || lane->result == GST_FLOW_EOS)
    lane->result = GST_FLOW_OK;
  if (all) {
    /* the Session may have failed it (on-stall=replay) before we knew */
    lane->transition_unlocked (LaneEvent::kNewStart);
    self->priv->session->SetLaneFailed (lane->id, false);
  }
  lane->eos_pushed = false;
  lane_changed_unlocked (self, lane);
}

void
fanout::lane_set_linked (GstGpuFanOut * self, const LanePtr & lane, bool linked)
{
  if (!linked) {
    /* with pad locks held: no lane lock here (see Lane::linked) */
    lane->linked = false;
    self->priv->session->SetLaneEligible (lane->id, false);
    return;
  }
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  /* a push that ends after this cannot record a stale NOT_LINKED */
  lane->link_generation++;
  if (lane->result == GST_FLOW_NOT_LINKED)
    lane->result = GST_FLOW_OK;
  lane->linked = true;
  lane_changed_unlocked (self, lane);
}


bool
fanout::any_lane_inactive (GstGpuFanOut * self)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    if (!lane->accepts_items_unlocked ())
      return true;
  }
  return false;
}


void
fanout::lanes_note_drained (GstGpuFanOut * self)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane->cond.notify_all ();
  }
}


/* Stores the sink pad's sticky events on a lane's pad, in their order, so
 * that they go out before its next buffer. EOS never; the segment only for a
 * new lane (after a flush a new segment follows). */
void
fanout::copy_sticky_events (GstGpuFanOut * self, GstPad * srcpad,
    bool with_segment)
{
  struct Ctx {
    GstPad * pad;
    bool with_segment;
  } ctx = { srcpad, with_segment };
  gst_pad_sticky_events_foreach (
      self->sinkpad,
      [] (GstPad *, GstEvent ** event, gpointer user_data) -> gboolean {
        auto * c = static_cast<Ctx *> (user_data);
        GstEventType type = GST_EVENT_TYPE (*event);
        if (type != GST_EVENT_EOS
            && (type != GST_EVENT_SEGMENT || c->with_segment))
          gst_pad_store_sticky_event (c->pad, *event);
        return TRUE;
      },
      &ctx);
}

/* Starts (or resumes) the lane's task. A new task gets its own reference to
 * the lane; a paused task is resumed with the reference it has (GStreamer
 * ignores the data of a restart). Call with lane->lock held. (Starting a task
 * posts a stream-status message synchronously: a bus sync handler must not
 * call back into this element.) */
static gboolean
start_lane_task_unlocked (const LanePtr & lane)
{
  GST_OBJECT_LOCK (lane->pad);
  bool has_task = GST_PAD_TASK (lane->pad) != nullptr;
  GST_OBJECT_UNLOCK (lane->pad);
  if (has_task)
    return gst_pad_start_task (lane->pad, fanout::lane_loop, nullptr, nullptr);
  return gst_pad_start_task (lane->pad, fanout::lane_loop, new LanePtr (lane),
      [] (gpointer data) { delete static_cast<LanePtr *> (data); });
}

/* Restarts the lane after a flush unless its pad is not active (any more).
 * Under the lane lock, so that it cannot race with deactivation, which
 * makes the lane inactive under the same lock before it stops the task. */
void
fanout::lane_restart (GstGpuFanOut * self, const LanePtr & lane)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  /* a failed lane got no flush, but the flush dropped its queue and its
   * worker may have paused */
  if (GST_PAD_MODE (lane->pad) != GST_PAD_MODE_PUSH
      || (lane->state_unlocked () != LaneState::kFlushing
          && !lane->failed_unlocked ()))
    return;
  lane->transition_unlocked (LaneEvent::kFlushStop);
  /* what the flush dropped from the queue (caps, tags, ...) still holds:
   * the task is paused here, so nothing can be stored out of order */
  copy_sticky_events (self, lane->pad, false);
  note_events_taken_unlocked (self, lane);
  if (!start_lane_task_unlocked (lane))
    lane->transition_unlocked (LaneEvent::kDeactivate);
  lane_changed_unlocked (self, lane);
}

/* A serialized query must not overtake what the lanes still hold (their
 * branch may not even have its caps yet): wait until every lane's queue is
 * empty and its worker idle. Flush-aware; FALSE if a lane is flushing. */
gboolean
fanout::wait_lanes_drained (GstGpuFanOut * self)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::unique_lock<gpufan::Mutex> lk (lane->lock);
    /* a stalled lane's branch may never return what it holds */
    lane->drain_waiters++;
    while ((lane->state_unlocked () == LaneState::kRunning
            || lane->state_unlocked () == LaneState::kJoining)
        && (lane->busy || !lane->queue.empty ()))
      lane->cond.wait (lk);
    lane->drain_waiters--;
  }
  /* a lane being released or deactivated holds nothing any more; only our
   * own flush fails the query */
  return !self->priv->session->flushing ();
}

/* DRAIN: every branch must drain, not only the first that answers. */
gboolean
fanout::drain_all_lanes (GstGpuFanOut * self, GstQuery * query)
{
  gboolean res = TRUE;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (lane->linked.load () && !lane_failed (lane))
      res &= gst_pad_peer_query (lane->pad, query);
  }
  return res;
}
