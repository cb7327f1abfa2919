/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Recovery: a lane the fan-out took out (gpufan-lane-failed) is built again
 * after lane-restart-delay, doubled for each earlier failure in its place,
 * as a new lane with a fresh instance of the branch; the failed lane stays
 * out (its elements may be stuck in a push) until the bin stops. One
 * thread per bin, between READY->PAUSED and PAUSED->READY, waits for the
 * earliest job's time or a stop. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanbin-private.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#define GST_CAT_DEFAULT gst_gpufan_bin_debug

namespace fanbin {

/* The longest wait before a rebuild, whatever the failures. */
constexpr guint64 kMaxRestartDelayNs = 60 * GST_SECOND;

struct Job {
  guint lane = 0; /* the lane that failed */
  guint slot = 0; /* the first lane of its place */
  guint failures = 0;
  guint64 delay_ns = 0;
  std::chrono::steady_clock::time_point due;
};

struct Recovery {
  gpufan::Mutex lock;
  gpufan::CondVar cond;
  std::thread thread;
  bool stopping = true;
  std::vector<Job> jobs;
  /* this run's places: a rebuilt lane stands in the place of the one it
   * replaced; how often the lanes of a place failed; the lanes replaced */
  std::map<guint, guint> slot_of;
  std::map<guint, guint> failures;
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

static void schedule (GstGpuFanBin * self, guint lane, guint slot);

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
      self->recovery->slot_of[lane_id] = job.slot;
    }
    gpu = placed_gpu (self, lane_id);
    if (branch_for_gpu (branch, gpu, &bound, &error))
      lane = make_lane_branch (self, bound, lane_id, gpu, &error);
  } else if (go) {
    error = "no pad for a new lane";
  }
  const bool built = lane && add_lane (self, lane, out, in, true);
  if (lane && !built) {
    error = "cannot link or start the new branch";
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
    const auto own = std::remove_if (r.jobs.begin (), r.jobs.end (),
        [lane_id, requested] (
            const Job & j) { return requested && j.lane == lane_id; });
    r.failures[job.slot] -= static_cast<guint> (r.jobs.end () - own);
    r.jobs.erase (own, r.jobs.end ());
  }
  if (!go)
    return;

  if (!built) {
    GST_ELEMENT_WARNING (self, CORE, PAD,
        ("Lane %u could not be built again: %s", job.lane, error.c_str ()),
        ("lane-restart-delay: %s", retry ? "tried again later" : "not again"));
    if (retry)
      schedule (self, job.lane, job.slot);
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
              job.failures, "delay", G_TYPE_UINT64, job.delay_ns, nullptr)));
}

static void
recovery_loop (GstGpuFanBin * self)
{
  Recovery & r = *self->recovery;
  std::unique_lock<gpufan::Mutex> lk (r.lock);
  while (!r.stopping) {
    if (r.jobs.empty ()) {
      r.cond.wait (lk);
      continue;
    }
    auto next = std::min_element (r.jobs.begin (), r.jobs.end (),
        [] (const Job & a, const Job & b) { return a.due < b.due; });
    if (std::chrono::steady_clock::now () < next->due) {
      r.cond.wait_until (lk, next->due);
      continue;
    }
    const Job job = *next;
    r.jobs.erase (next);
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
  r.jobs.clear ();
  r.slot_of.clear ();
  r.failures.clear ();
  r.replaced.clear ();
  r.thread = std::thread (recovery_loop, self);
}

void
recovery_stop (GstGpuFanBin * self)
{
  Recovery & r = *self->recovery;
  std::lock_guard<gpufan::Mutex> lk (r.lock);
  r.stopping = true;
  r.jobs.clear ();
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
  guint slot;
  {
    std::lock_guard<gpufan::Mutex> lk (self->recovery->lock);
    auto it = self->recovery->slot_of.find (lane);
    slot = it != self->recovery->slot_of.end () ? it->second : lane;
  }
  schedule (self, lane, slot);
}

/* Rebuilds failed lane @lane, of place @slot, after the delay due to the
 * place's failures so far (this one included). */
static void
schedule (GstGpuFanBin * self, guint lane, guint slot)
{
  const guint64 base = restart_delay (self);
  if (base == 0)
    return;
  Recovery & r = *self->recovery;
  std::lock_guard<gpufan::Mutex> lk (r.lock);
  if (r.stopping)
    return;
  Job job;
  job.lane = lane;
  job.slot = slot;
  job.failures = ++r.failures[job.slot];
  job.delay_ns = base;
  for (guint i = 1; i < job.failures && job.delay_ns < kMaxRestartDelayNs; i++)
    job.delay_ns *= 2;
  job.delay_ns = std::min (job.delay_ns, std::max (base, kMaxRestartDelayNs));
  job.due = std::chrono::steady_clock::now ()
      + std::chrono::nanoseconds (job.delay_ns);
  GST_INFO_OBJECT (self,
      "lane %u failed (%u in its place): rebuilt in %" GST_TIME_FORMAT, lane,
      job.failures, GST_TIME_ARGS (job.delay_ns));
  r.jobs.push_back (job);
  r.cond.notify_all ();
}

} // namespace fanbin
