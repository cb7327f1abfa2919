/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Recovery: a lane the fan-out took out (gpufan-lane-failed) is built again
 * after lane-restart-delay, doubled for each earlier failure in its place
 * (gpufan::RecoveryBackoff decides when), as a new lane with a fresh
 * instance of the branch; the failed lane stays out (its elements may be
 * stuck in a push) until the bin stops. One thread per bin, between
 * READY->PAUSED and PAUSED->READY, waits for the earliest rebuild's time or
 * a stop. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbin-private.h"

#include <chrono>
#include <optional>
#include <thread>

#include "gpufan/clock.h"
#include "gpufan/recovery-backoff.h"

#define GST_CAT_DEFAULT gst_gpufan_bin_debug

namespace fanbin {

using Job = gpufan::RecoveryBackoff::Rebuild;

struct Recovery {
  gpufan::Mutex lock;
  gpufan::CondVar cond;
  std::thread thread;
  bool stopping = true;
  /* this run's places, failures and pending rebuilds, in steady-clock ns */
  gpufan::RecoveryBackoff backoff;
  const gpufan::SteadyClock clock;
  /* the lanes replaced this run */
  std::vector<guint> replaced;
};

Recovery *
recovery_new (void)
{
  return new Recovery ();
}

void
recovery_free (Recovery * recovery)
{
  /* stopped and joined by PAUSED->READY; a bin disposed of without it
   * must not leave the thread running */
  {
    std::lock_guard<gpufan::Mutex> lk (recovery->lock);
    recovery->stopping = true;
    recovery->cond.notify_all ();
  }
  if (recovery->thread.joinable ())
    recovery->thread.join ();
  delete recovery;
}

static guint64
restart_delay (GstGpuFanBin * self)
{
  GST_OBJECT_LOCK (self);
  const guint64 delay = self->restart_delay_ns;
  GST_OBJECT_UNLOCK (self);
  return delay;
}

static void schedule (GstGpuFanBin * self, guint lane, guint place);

/* Releases request pad @pad of @element unless it was released already. */
static void
give_back_pad (GstElement * element, GstPad * pad)
{
  GstElement * parent = pad ? gst_pad_get_parent_element (pad) : nullptr;
  if (parent == element)
    gst_element_release_request_pad (element, pad);
  if (parent)
    gst_object_unref (parent);
}

/* Builds a fresh lane in @job's place: under the fan-out's sink stream
 * lock, so that no buffer, serialized event or flush passes the fan-out
 * meanwhile (the new lane sees the stream from a clean point). Not once
 * the input has ended: the new lane would wait for an EOS that has gone
 * by (a failed lane is back at the next start anyway). */
static void
rebuild (GstGpuFanBin * self, const Job & job)
{
  GstPad * sinkpad = gst_element_get_static_pad (self->fanout, "sink");
  GST_PAD_STREAM_LOCK (sinkpad);
  GstEvent * eos = gst_pad_get_sticky_event (sinkpad, GST_EVENT_EOS, 0);
  const bool ended = eos != nullptr;
  if (eos)
    gst_event_unref (eos);
  bool go;
  {
    std::lock_guard<gpufan::Mutex> lk (self->recovery->lock);
    go = !self->recovery->stopping && !ended;
  }
  GST_OBJECT_LOCK (self);
  const std::string branch = self->branch ? self->branch : "";
  GST_OBJECT_UNLOCK (self);
  /* on the failed lane's device, even where `devices` lists fewer lanes */
  GstPad * out = nullptr;
  if (go)
    g_signal_emit_by_name (self->fanout, "request-replacement-pad", job.lane,
        &out);
  GstPad * in
      = out ? gst_element_request_pad_simple (self->fanin, "sink_%u") : nullptr;
  guint lane_id = 0;
  gint gpu = -1;
  std::string bound, error;
  GstElement * lane = nullptr;
  const bool requested = out && in;
  if (requested) {
    g_object_get (out, "lane", &lane_id, nullptr);
    {
      std::lock_guard<gpufan::Mutex> lk (self->recovery->lock);
      self->recovery->backoff.StandIn (lane_id, job.place);
    }
    gpu = placed_gpu (self, lane_id);
    if (branch_for_gpu (branch, gpu, &bound, &error))
      lane = make_lane_branch (self, bound, lane_id, gpu, &error);
  } else if (go) {
    error = "no pad for a new lane";
  }
  std::string link_error;
  const bool built = lane && add_lane (self, lane, out, in, true, &link_error);
  if (lane && !built) {
    error = link_error;
    /* nothing of a lane that did not start stays */
    remove_lane (self, lane_id);
  }
  GST_PAD_STREAM_UNLOCK (sinkpad);
  gst_object_unref (sinkpad);
  /* its request pads go back (remove_lane gave back the linked ones) */
  if (!built) {
    give_back_pad (self->fanout, out);
    give_back_pad (self->fanin, in);
  }
  g_clear_object (&out);
  g_clear_object (&in);
  /* a branch that did not start (not one that cannot be made at all) is
   * tried again, in the same place, for the same failed lane */
  const bool retry = go && lane && !built;
  {
    std::lock_guard<gpufan::Mutex> lk (self->recovery->lock);
    Recovery & r = *self->recovery;
    if (built)
      r.replaced.push_back (job.lane);
    /* the lane that did not start may have posted its own failure: the
     * retry below stands for it (and counts it) */
    if (requested)
      r.backoff.Forget (lane_id);
  }
  if (!go)
    return;

  if (!built) {
    GST_ELEMENT_WARNING (self, CORE, PAD,
        ("Lane %u could not be built again: %s", job.lane, error.c_str ()),
        ("lane-restart-delay: %s", retry ? "tried again later" : "not again"));
    if (retry)
      schedule (self, job.lane, job.place);
    return;
  }
  const std::string device
      = gpu >= 0 ? "cuda:" + std::to_string (gpu) : std::string ("cpu");
  GST_INFO_OBJECT (self, "lane %u failed %u times; rebuilt as lane %u (%s)",
      job.lane, job.failures, lane_id, device.c_str ());
  gst_element_post_message (GST_ELEMENT_CAST (self),
      gst_message_new_element (GST_OBJECT_CAST (self),
          gst_structure_new ("gpufan-lane-restored", "lane", G_TYPE_UINT,
              job.lane, "new-lane", G_TYPE_UINT, lane_id, "device",
              G_TYPE_STRING, device.c_str (), "failures", G_TYPE_UINT,
              job.failures, "delay", G_TYPE_UINT64, (guint64)job.delay_ns,
              nullptr)));
}

static void
recovery_loop (GstGpuFanBin * self)
{
  Recovery & r = *self->recovery;
  std::unique_lock<gpufan::Mutex> lk (r.lock);
  while (!r.stopping) {
    if (!r.backoff.HasPending ()) {
      r.cond.wait (lk);
      continue;
    }
    const std::optional<Job> due = r.backoff.TakeDue (r.clock.NowNs ());
    if (!due) {
      r.cond.wait_until (lk, gpufan::CondVar::TimePoint (
              std::chrono::nanoseconds (r.backoff.NextDueNs ())));
      continue;
    }
    const Job job = *due;
    lk.unlock ();
    /* lane-restart-delay set to 0 meanwhile: failed lanes stay out */
    if (restart_delay (self) > 0)
      rebuild (self, job);
    lk.lock ();
  }
}

void
recovery_start (GstGpuFanBin * self)
{
  Recovery & r = *self->recovery;
  std::lock_guard<gpufan::Mutex> lk (r.lock);
  if (r.thread.joinable ())
    return;
  r.stopping = false;
  r.backoff.Reset ();
  r.replaced.clear ();
  r.thread = std::thread (recovery_loop, self);
}

void
recovery_stop (GstGpuFanBin * self)
{
  Recovery & r = *self->recovery;
  std::lock_guard<gpufan::Mutex> lk (r.lock);
  r.stopping = true;
  r.backoff.DropPending ();
  r.cond.notify_all ();
}

void
recovery_join (GstGpuFanBin * self)
{
  std::thread thread;
  {
    std::lock_guard<gpufan::Mutex> lk (self->recovery->lock);
    thread.swap (self->recovery->thread);
  }
  if (thread.joinable ())
    thread.join ();
  std::vector<guint> replaced;
  {
    std::lock_guard<gpufan::Mutex> lk (self->recovery->lock);
    replaced.swap (self->recovery->replaced);
  }
  for (guint lane : replaced)
    remove_lane (self, lane);
}

void
recovery_lane_failed (GstGpuFanBin * self, guint lane)
{
  guint place;
  {
    std::lock_guard<gpufan::Mutex> lk (self->recovery->lock);
    place = self->recovery->backoff.PlaceOf (lane);
  }
  schedule (self, lane, place);
}

/* Rebuilds failed lane @lane, of @place, after the delay due to the place's
 * failures so far (this one included). */
static void
schedule (GstGpuFanBin * self, guint lane, guint place)
{
  const guint64 base = restart_delay (self);
  if (base == 0)
    return;
  Recovery & r = *self->recovery;
  std::lock_guard<gpufan::Mutex> lk (r.lock);
  if (r.stopping)
    return;
  const Job & job = r.backoff.Schedule (lane, place, (gint64)base,
      r.clock.NowNs ());
  GST_INFO_OBJECT (self,
      "lane %u failed (%u in its place): rebuilt in %" GST_TIME_FORMAT, lane,
      job.failures, GST_TIME_ARGS ((guint64)job.delay_ns));
  r.cond.notify_all ();
}

} // namespace fanbin
