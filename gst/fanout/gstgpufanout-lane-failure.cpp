/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A lane's results and failures: the branch's push results, a lane taken
 * out of the stream (on-lane-error, on-stall=replay), the results combined
 * for the chain function, and the Session's health listener. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <string>

#include "common/gstgpufancaps.h"
#include "gpufan/cuda.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

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
  return lane->failed_unlocked ();
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
    every_lane_failed &= other->failed_unlocked () || !other->linked.load ();
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
    lane_handler (lane).on_failed_without_replay (self, lane);
    lost = (guint) self->priv->session->SetLaneFailed (lane->id, true);
  }
  /* before gpufan-lane-failed: a rebuild it leads to must not land there.
   * Not after a stall: a hung GPU could hang the question too. */
  if (!g_str_equal (reason, "stalled"))
    exclude_gpu_if_broken (self, lane);

  if (replay)
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("Lane %u (%s:%s, device %s) failed (%s) and leaves the stream; the "
         "%u %s it held go%s to the other lanes%s",
            lane->id, GST_DEBUG_PAD_NAME (lane->pad), device.c_str (), reason,
            replayed + lost, replayed + lost == 1 ? "frame" : "frames",
            replayed + lost == 1 ? "es" : "",
            lost ? " (some could not: lost)" : ""),
        ("lane %u: %s; %u frames sent again, %u lost", lane->id, reason,
            replayed, lost));
  else
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("Lane %u (%s:%s, device %s) failed (%s) and leaves the stream; the "
         "%u %s it held %s lost",
            lane->id, GST_DEBUG_PAD_NAME (lane->pad), device.c_str (), reason,
            lost, lost == 1 ? "frame" : "frames", lost == 1 ? "is" : "are"),
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
  if (!lane->transition_unlocked (LaneEvent::kFailed))
    return false;
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
  GstCaps * offered = nullptr;
  GstElement * refuser = ret == GST_FLOW_NOT_NEGOTIATED
      ? gst_gpufan_caps_refuser (lane->pad, &offered)
      : nullptr;
  if (refuser) {
    const std::string who = gst_gpufan_element_text (refuser);
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("The branch of lane %u (%s:%s) did not take its caps: %s refused "
         "%s: put a converter (e.g. videoconvert) in front of it, or make "
         "upstream give caps it takes",
            lane->id, GST_DEBUG_PAD_NAME (lane->pad), who.c_str (),
            gst_gpufan_caps_text (offered).c_str ()),
        ("%s refused %" GST_PTR_FORMAT, who.c_str (), offered));
    gst_object_unref (refuser);
    gst_caps_unref (offered);
    return;
  }
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
    if (lane->failed_unlocked ())
      return;
    /* our own flush, deactivation or release of the lane: not a result the
     * branch gave */
    if (ret == GST_FLOW_FLUSHING && !lane->accepts_items_unlocked ())
      return;
    /* relinked during the push: the link's reset wins */
    if (ret == GST_FLOW_NOT_LINKED && link_generation != lane->link_generation)
      return;
    lane->result = ret;
    /* failed with its result, so that the chain function never combines the
     * fatal result of a lane that is leaving */
    if (flow_is_fatal (ret) && lane_failure_takes_lane_out (self))
      newly_failed = lane->transition_unlocked (LaneEvent::kFailed);
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
      if (kv.second->failed_unlocked ()) {
        failed_lanes++;
        failed_ids += (failed_ids.empty () ? "" : ", ")
            + std::to_string (kv.first);
        continue;
      }
      /* a lane that left (deactivated or released) with a fatal result:
       * its failure was handled when it came (a failed lane that is
       * released leaves the Failed state), and it speaks for the stream no
       * more */
      if (kv.second->state_unlocked () == LaneState::kInactive
          && flow_is_fatal (r))
        continue;
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


/* The one way the Session's view of a lane's health reaches it: a stall,
 * or a failure the stall caused. */
void
fanout::lane_note_health (GstGpuFanOut * self, guint id)
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
  lane_handler (lane).on_stalled (self, lane);
}
