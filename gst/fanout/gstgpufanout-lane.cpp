/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A lane of gpufanout: the bounded queue between the chain function and
 * the lane's worker thread, the worker loop that pushes into the branch, and
 * the lane's flush, results and EOS. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <algorithm>
#include <chrono>

#include "gpufan/cuda.h"

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

static bool
flow_is_fatal (GstFlowReturn ret)
{
  return ret < GST_FLOW_EOS;
}

static gboolean start_lane_task_unlocked (const LanePtr & lane);

/* The lane got the sink pad's current sticky events: it has passed every
 * event placed before the next item (a frame sent again from before them
 * must not come here). Call with the lane lock held. */
static void
note_events_taken_unlocked (GstGpuFanOut * self, const LanePtr & lane)
{
  lane->events_taken_through = std::max (lane->events_taken_through,
      static_cast<guint64> (self->priv->session->NextSeq ()));
}
static void copy_sticky_events (GstGpuFanOut * self, GstPad * srcpad,
    bool with_segment);

/* The one place that says whether a lane takes items. */
static bool
lane_takes_items_unlocked (const LanePtr & lane)
{
  return lane->state == LaneState::kRunning && lane->linked.load ()
      && lane->result == GST_FLOW_OK;
}

/* Every transition ends here: the Session learns whether the lane takes
 * items, the chain function combines the results again, and whoever waits
 * on the lane (its worker, a serialized query) looks again. */
static void
lane_changed_unlocked (GstGpuFanOut * self, const LanePtr & lane)
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
    if (lane->state != LaneState::kRunning)
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
    while (lane->next_order < order && lane->state == LaneState::kRunning) {
      lane->order_waiters++;
      lane->cond.wait (lk);
      lane->order_waiters--;
    }
    lane->next_order = MAX (lane->next_order, order + 1);
    if (lane->state == LaneState::kRunning) {
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

/* The lane takes items, has not failed, and has not passed an event that
 * came after item @seq. */
bool
fanout::lane_takes_replay_unlocked (const LanePtr & lane, guint64 seq)
{
  return lane_takes_items_unlocked (lane) && !lane->failed
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

/* Stops a lane's queue (kInactive or kFlushing); queued items are dropped.
 * (The sticky events among them are not lost: a lane restarting after a
 * flush gets the sink pad's current ones, see lane_restart.) */
void
fanout::lane_stop (GstGpuFanOut * self, const LanePtr & lane, LaneState state)
{
  std::deque<QueuedItem> dropped;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    /* a flush does not wake an inactive lane */
    if (state == LaneState::kInactive || lane->state == LaneState::kRunning)
      lane->state = state;
    dropped.swap (lane->queue);
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
  /* running first, so that an event arriving meanwhile is queued; no
   * buffer comes before lane_changed_unlocked tells the Session */
  lane->state = LaneState::kRunning;
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
      && lane->state == LaneState::kRunning)
    start_lane_task_unlocked (lane);
}

/* A new stream (@all: after PAUSED->READY) or a flush's end (only the
 * results the flush ended: FLUSHING, EOS) clears the lane's sticky result. */
void
fanout::lane_reset_result (GstGpuFanOut * self, const LanePtr & lane, bool all)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  if (all || lane->result == GST_FLOW_FLUSHING || lane->result == GST_FLOW_EOS)
    lane->result = GST_FLOW_OK;
  if (all && lane->failed) {
    lane->failed = false;
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

/* A lane's failure takes it out of the stream: on-lane-error is drop-lane or
 * replay, and it is not an error downstream of gpufanin that came back up
 * the lanes (their pushes return it, and a queue in a branch posts it as its
 * own ERROR). */
static bool
lane_failure_takes_lane_out (GstGpuFanOut * self)
{
  return self->priv->on_lane_error.load () != GST_GPUFAN_LANE_ERROR_FAIL
      && !self->priv->session->output_failed ();
}

/* Whether a lane failing for its error sends its frames again. */
static bool
error_replays (GstGpuFanOut * self)
{
  return self->priv->on_lane_error.load () == GST_GPUFAN_LANE_ERROR_REPLAY
      && replay_on (self);
}

bool
fanout::lane_failed (const LanePtr & lane)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  return lane->failed;
}

static std::string
lane_device (GstGpuFanOut * self, const LanePtr & lane)
{
  for (const auto & l : self->priv->session->Stats ().lanes)
    if (l.lane == lane->id)
      return l.device.Describe ();
  return "?";
}

/* A failed lane on a GPU: if the GPU shows a sticky CUDA error (its
 * contexts are unusable until the process ends), no lane of this process
 * is placed on it again (gpufan::ExcludeGpu). */
static void
exclude_gpu_if_broken (GstGpuFanOut * self, const LanePtr & lane)
{
  gint ordinal = -1;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    if (lane->placed && lane->device.kind == gpufan::DeviceKind::kCuda)
      ordinal = lane->device.index;
  }
  if (ordinal < 0 || !gpufan::GpuExclusion (ordinal).empty ())
    return;
  const std::string sticky = gpufan::cuda::StickyError (ordinal);
  if (sticky.empty ())
    return;
  gpufan::ExcludeGpu (ordinal, sticky);
  GST_ELEMENT_WARNING (self, RESOURCE, FAILED,
      ("GPU %d shows a sticky CUDA error (%s): no lane is placed on it again "
       "in this process",
          ordinal, sticky.c_str ()),
      ("found after lane %u failed", lane->id));
}

/* Posts `Every lane has failed (@which)` unless an error of ours went
 * already. Either thread that finds every lane failed (the last lane's
 * lane_fail, the chain function combining the results) returns only once
 * the ERROR is on the bus, so it goes before the source's generic one. The
 * lock is a leaf: nothing else is taken under it. */
static void
post_every_lane_failed (GstGpuFanOut * self, const std::string & which)
{
  static std::mutex lock;
  std::lock_guard<std::mutex> lk (lock);
  if (self->priv->lane_error_posted.exchange (true))
    return;
  GST_ELEMENT_ERROR (self, STREAM, FAILED,
      ("Every lane has failed (%s)", which.c_str ()),
      ("no lane is left to take frames"));
}

/* The lane's branch failed (@reason: a flow return's name, or "stalled")
 * and the lane was marked failed. It takes no more items (its result stays
 * fatal). With @replay the frames it held go to the other lanes
 * (replay_lane), else they are given up at once (Session::SetLaneFailed);
 * what the failed branch still returns comes back late and is dropped.
 * The stream goes on without it, unless no lane is left. */
static void
lane_fail (GstGpuFanOut * self, const LanePtr & lane, const gchar * reason,
    bool replay)
{
  const std::string device = lane_device (self, lane);
  /* a lane that is not linked takes nothing either */
  bool every_lane_failed = true;
  for (const LanePtr & other : fanout::snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (other->lock);
    every_lane_failed &= other->failed || !other->linked.load ();
  }
  /* First on the bus: the Session calls below wake the chain function,
   * which returns the error upstream (where the source posts its generic
   * one). */
  if (every_lane_failed)
    post_every_lane_failed (self, std::string ("the last: lane ")
        + std::to_string (lane->id) + ", device " + device + ", " + reason);

  guint replayed = 0, lost = 0;
  if (replay) {
    replayed = replay_lane (self, lane->id, &lost);
  } else {
    if (chunk_mode_on (self))
      chunk_move_off_failed (self, lane);
    lost = (guint) self->priv->session->SetLaneFailed (lane->id, true);
  }
  /* before gpufan-lane-failed: a rebuild it leads to must not land there.
   * Not after a stall: a hung GPU could hang the question too. */
  if (!g_str_equal (reason, "stalled"))
    exclude_gpu_if_broken (self, lane);

  if (replay)
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("Lane %u (%s:%s, device %s) failed (%s) and leaves the stream; the "
         "%u frames it held go to the other lanes%s",
            lane->id, GST_DEBUG_PAD_NAME (lane->pad), device.c_str (), reason,
            replayed + lost, lost ? " (some could not: lost)" : ""),
        ("lane %u: %s; %u frames sent again, %u lost", lane->id, reason,
            replayed, lost));
  else
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("Lane %u (%s:%s, device %s) failed (%s) and leaves the stream; the "
         "%u frames it held are lost",
            lane->id, GST_DEBUG_PAD_NAME (lane->pad), device.c_str (), reason,
            lost),
        ("lane %u: %s; the frames it held are given up", lane->id, reason));
  gst_element_post_message (GST_ELEMENT_CAST (self),
      gst_message_new_element (GST_OBJECT_CAST (self),
          gst_structure_new ("gpufan-lane-failed", "lane", G_TYPE_UINT,
              lane->id, "device", G_TYPE_STRING, device.c_str (), "reason",
              G_TYPE_STRING, reason, "replayed", G_TYPE_UINT, replayed, "lost",
              G_TYPE_UINT, lost, nullptr)));
}

/* Marks the lane failed (its result fatal) unless it is already; TRUE when
 * this call did. */
static bool
mark_lane_failed (GstGpuFanOut * self, const LanePtr & lane)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  if (lane->failed)
    return false;
  lane->failed = true;
  if (!flow_is_fatal (lane->result))
    lane->result = GST_FLOW_ERROR;
  lane_changed_unlocked (self, lane);
  return true;
}

void
fanout::fail_lane_on_error (GstGpuFanOut * self, guint id)
{
  if (!lane_failure_takes_lane_out (self))
    return;
  LanePtr lane = find_lane (self, id);
  if (lane && mark_lane_failed (self, lane))
    lane_fail (self, lane, gst_flow_get_name (GST_FLOW_ERROR),
        error_replays (self));
}

/* The lane's fatal result stops the stream (on-lane-error=fail, or an
 * error downstream of gpufanin): posted once per stream, since an error
 * downstream comes back up every lane and only the first lane that saw it
 * is worth naming. */
static void
post_branch_error (GstGpuFanOut * self, const LanePtr & lane,
    GstFlowReturn ret)
{
  if (self->priv->lane_error_posted.exchange (true))
    return;
  const std::string device = lane_device (self, lane);
  GST_ELEMENT_ERROR (self, STREAM, FAILED,
      ("Processing branch of lane %u (%s:%s, device %s) failed: %s", lane->id,
          GST_DEBUG_PAD_NAME (lane->pad), device.c_str (),
          gst_flow_get_name (ret)),
      ("push on lane %u returned %s (%d)", lane->id, gst_flow_get_name (ret),
          ret));
}

/* Records the result of a push that began at @link_generation; a fatal
 * one is reported once, naming the lane and its device. */
void
fanout::lane_set_result (GstGpuFanOut * self, const LanePtr & lane,
    GstFlowReturn ret, guint link_generation)
{
  /* Posted before the result is seen: the chain function returns it
   * upstream at once, and the source's generic ERROR must come after the
   * one that names the lane. */
  if (flow_is_fatal (ret) && !lane_failure_takes_lane_out (self)
      && !lane_failed (lane))
    post_branch_error (self, lane, ret);
  bool newly_failed = false;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    /* out of the stream until the next start: its result stays fatal */
    if (lane->failed)
      return;
    /* our own flush, deactivation or release of the lane: not a result the
     * branch gave */
    if (ret == GST_FLOW_FLUSHING && lane->state != LaneState::kRunning)
      return;
    /* relinked during the push: the link's reset wins */
    if (ret == GST_FLOW_NOT_LINKED && link_generation != lane->link_generation)
      return;
    lane->result = ret;
    /* failed with its result, so that the chain function never combines the
     * fatal result of a lane that is leaving */
    if (flow_is_fatal (ret) && !lane->failed
        && lane_failure_takes_lane_out (self)) {
      lane->failed = true;
      newly_failed = true;
    }
    lane_changed_unlocked (self, lane);
  }
  GST_DEBUG_OBJECT (lane->pad, "push returned %s", gst_flow_get_name (ret));

  if (newly_failed) {
    /* lane_set_result runs on the worker, which owns the unreported push:
     * the failing item goes again with the others, or counts as failed
     * (not dropped) before they are given up */
    const bool replay = error_replays (self);
    if (replay)
      lane->unreported_push.pending = false;
    else
      fanout::lane_report_push (self, lane);
    lane_fail (self, lane, gst_flow_get_name (ret), replay);
  }
}

void
fanout::lanes_changed (GstGpuFanOut * self)
{
  self->priv->lane_results_changed = true;
}

/* Combines the lanes' sticky results the way tee does: FLUSHING wins, then
 * an error, NOT_LINKED only if every lane is not linked, EOS if no lane can
 * take data and one ended. Streaming thread: computed again only when a
 * lane changed. */
GstFlowReturn
fanout::combine_lane_results (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (!priv->lane_results_changed.load (std::memory_order_acquire)
      || !priv->lane_results_changed.exchange (false))
    return priv->combined_result;

  std::unique_lock<gpufan::Mutex> lk (priv->lanes_lock);
  bool any_ok = false, any_eos = false, flushing = false;
  size_t failed_lanes = 0;
  std::string failed_ids;
  GstFlowReturn fatal = GST_FLOW_OK;
  for (auto & kv : priv->lanes) {
    GstFlowReturn r;
    {
      std::lock_guard<gpufan::Mutex> lane_lk (kv.second->lock);
      r = kv.second->result;
      /* a lane out of service counts as gone */
      if (kv.second->failed) {
        failed_lanes++;
        failed_ids += (failed_ids.empty () ? "" : ", ")
            + std::to_string (kv.first);
        continue;
      }
    }
    if (r == GST_FLOW_OK)
      any_ok = true;
    else if (r == GST_FLOW_FLUSHING)
      flushing = true;
    else if (r == GST_FLOW_EOS)
      any_eos = true;
    else if (flow_is_fatal (r))
      fatal = r;
  }
  GstFlowReturn combined;
  const bool every_lane_failed = failed_lanes > 0 && !any_ok && !flushing
      && fatal == GST_FLOW_OK && !any_eos;
  if (every_lane_failed)
    combined = GST_FLOW_ERROR; /* every lane failed or is not linked */
  else if (priv->lanes.empty ())
    combined = GST_FLOW_NOT_LINKED;
  else if (flushing)
    combined = GST_FLOW_FLUSHING;
  else if (fatal != GST_FLOW_OK)
    combined = fatal;
  else if (any_ok)
    combined = GST_FLOW_OK;
  else
    combined = any_eos ? GST_FLOW_EOS : GST_FLOW_NOT_LINKED;
  priv->combined_result = combined;
  lk.unlock ();
  /* the last lane's lane_fail may not have posted yet: the error upstream
   * is ours, and our ERROR goes before the source's */
  if (every_lane_failed)
    post_every_lane_failed (self, "lanes " + failed_ids);
  return combined;
}

bool
fanout::any_lane_inactive (GstGpuFanOut * self)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    if (lane->state != LaneState::kRunning)
      return true;
  }
  return false;
}

static gpufan::PushOutcome
outcome_of (GstFlowReturn ret)
{
  if (ret == GST_FLOW_OK)
    return gpufan::PushOutcome::kDelivered;
  if (flow_is_fatal (ret))
    return gpufan::PushOutcome::kFailed;
  return gpufan::PushOutcome::kDropped;
}

/* Pushes a marker behind item @seq (see gst_gpufan_marker_new): the fan-in
 * proves the item dropped if it gets the marker and not the item. */
static void
push_marker (GstGpuFanOut * self, const LanePtr & lane, guint64 seq)
{
  GST_LOG_OBJECT (lane->pad, "marker behind item %" G_GUINT64_FORMAT, seq);
  gst_pad_push_event (lane->pad,
      gst_gpufan_marker_new (self->priv->session->id (), lane->id, seq));
}

void
fanout::lane_note_stalled (GstGpuFanOut * self, guint id)
{
  LanePtr lane = find_lane (self, id);
  if (!lane)
    return;
  /* on-stall=replay: the stall failed the lane (SessionConfig::
   * stall_fails_lane), and its frames go to the others */
  if (self->priv->session->IsLaneFailed (id)) {
    if (mark_lane_failed (self, lane))
      lane_fail (self, lane, "stalled", replay_on (self));
    return;
  }
  if (chunk_mode_on (self)) {
    chunk_move_off_stalled (self, lane);
    return;
  }
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  lane_mark_stalled_unlocked (self, lane);
}

void
fanout::lane_mark_stalled_unlocked (GstGpuFanOut *, const LanePtr & lane)
{
  /* its first marker is due when the Session says (CheckLivenessMarker) */
  lane->stalled = true;
  lane->cond.notify_all ();
}

void
fanout::lanes_note_drained (GstGpuFanOut * self)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane->cond.notify_all ();
  }
}

/* With replay on, a lane whose next item is EOS holds it back while frames
 * are still on their way: if a lane fails, its frames may come here, and a
 * branch takes nothing after EOS. It lets go once every frame has left
 * gpufanin (lanes_note_drained wakes it; a frame stuck in a branch leaves
 * at the latest by stall-timeout), and takes a frame sent again that is
 * queued ahead meanwhile. (A branch that returns frames only at EOS loses
 * them in frame mode anyway: that is chunk mode's job.) Call with the lane
 * lock held (the Session's is a leaf lock). */
static bool
eos_held_unlocked (GstGpuFanOut * self, const LanePtr & lane)
{
  if (lane->queue.empty () || lane->failed || !replay_on (self))
    return false;
  const QueuedItem & front = lane->queue.front ();
  if (front.kind != ItemKind::kEvent
      || GST_EVENT_TYPE (GST_EVENT_CAST (front.obj)) != GST_EVENT_EOS)
    return false;
  return self->priv->session->AccountedForSinceNs () == gpufan::kNoTime;
}

/* The worker waits for an item or a state other than running. An idle
 * stalled lane sends a marker every stall-timeout (its branch may answer
 * again, as a valve that opens does): its worker also wakes when the
 * Session says the next one is due, TRUE when a marker is to go now. Call
 * with the lane lock held. */
static bool
lane_wait_idle_unlocked (GstGpuFanOut * self, const LanePtr & lane,
    std::unique_lock<gpufan::Mutex> & lk)
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
  while ((lane->queue.empty () || eos_held_unlocked (self, lane))
      && lane->state == LaneState::kRunning) {
    if (lane->stalled) {
      switch (session.CheckLivenessMarker (lane->id, &marker_due)) {
        case gpufan::LivenessMarker::kAnswered:
          lane->stalled = false; /* heard from again */
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
    if (lane->stalled)
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
static void
note_push (const LanePtr & lane, guint64 seq, gpufan::PushOutcome outcome)
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
static bool
start_item (GstGpuFanOut * self, const LanePtr & lane, const QueuedItem & item)
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
  if (ret != GST_FLOW_OK)
    lane_set_result (self, lane, ret, link_generation);
}

/* The lane's streaming thread: one item per call. The task owns a reference
 * to its lane (see start_lane_task), so a released lane outlives its task. */
static void
lane_loop (gpointer user_data)
{
  const LanePtr & lane = *static_cast<LanePtr *> (user_data);
  GstGpuFanOut * self = lane->element;
  QueuedItem item;

  GstFlowReturn result;
  guint link_generation;
  {
    std::unique_lock<gpufan::Mutex> lk (lane->lock);
    /* the last push is reported now unless the next item, queued already,
     * takes the report along (start_item) */
    if (lane->unreported_push.pending
        && (lane->queue.empty () || lane->state != LaneState::kRunning
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
    bool liveness_due = lane_wait_idle_unlocked (self, lane, lk);
    if (lane->state != LaneState::kRunning) {
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
    if (chunk_begin_held_unlocked (self, lane)) {
      /* the chunk may move to another lane: woken when it did, or when
       * the stall listener or the chain function leaves it here */
      lane->worker_waiting = true;
      lane->cond.wait (lk);
      lane->worker_waiting = false;
      return;
    }
    item = std::move (lane->queue.front ());
    lane->queue.pop_front ();
    lane->busy = true;
    if (item.kind == ItemKind::kEvent)
      lane->events_taken_through
          = std::max (lane->events_taken_through, item.position);
    /* chunk mode: the chain function waits for room (chunk_enqueue) */
    if (lane->producer_waiting)
      lane->cond.notify_all ();
    result = lane->result;
    link_generation = lane->link_generation;
  }

  switch (item.kind) {
    case ItemKind::kEvent: {
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
      break;
    }
    case ItemKind::kScheduledEvent:
    case ItemKind::kBuffer:
      push_scheduled_item (self, lane, item, result, link_generation);
      break;
    case ItemKind::kChunkBuffer:
    case ItemKind::kChunkEnd:
      chunk_push_item (self, lane, item, result, link_generation);
      break;
  }
  /* busy until the next call takes the lane lock anyway (one lock per
   * item): see the top of this function */
}

/* Stores the sink pad's sticky events on a lane's pad, in their order, so
 * that they go out before its next buffer. EOS never; the segment only for a
 * new lane (after a flush a new segment follows). */
static void
copy_sticky_events (GstGpuFanOut * self, GstPad * srcpad, bool with_segment)
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
    return gst_pad_start_task (lane->pad, lane_loop, nullptr, nullptr);
  return gst_pad_start_task (lane->pad, lane_loop, new LanePtr (lane),
      [] (gpointer data) { delete static_cast<LanePtr *> (data); });
}

/* Restarts the lane after a flush unless its pad is not active (any more).
 * Under the lane lock, so that it cannot race with deactivation, which
 * makes the lane inactive under the same lock before it stops the task. */
void
fanout::lane_restart (GstGpuFanOut * self, const LanePtr & lane)
{
  std::lock_guard<gpufan::Mutex> lk (lane->lock);
  if (GST_PAD_MODE (lane->pad) != GST_PAD_MODE_PUSH
      || lane->state != LaneState::kFlushing)
    return;
  lane->state = LaneState::kRunning;
  /* what the flush dropped from the queue (caps, tags, ...) still holds:
   * the task is paused here, so nothing can be stored out of order */
  copy_sticky_events (self, lane->pad, false);
  note_events_taken_unlocked (self, lane);
  if (!start_lane_task_unlocked (lane))
    lane->state = LaneState::kInactive;
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
    while (lane->state == LaneState::kRunning
        && (lane->busy || !lane->queue.empty ()) && !lane->stalled
        && !lane->failed)
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
