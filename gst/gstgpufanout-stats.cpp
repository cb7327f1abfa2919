/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Statistics: the gpufan-stats message, per-lane fields of the fan-out
 * (worker threads, copies, host pool) and the final post at EOS. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

/* The fan-out's own per-lane figures: where the lane's thread runs. */
GstGpuFanLaneDecorator
fanout::lane_decorator (GstGpuFanOut * self)
{
  return [self] (guint id, GstStructure * s) {
    LanePtr lane = find_lane (self, id);
    if (!lane)
      return;
    std::string threads = "default task pool (device CPUs unknown)";
    GST_OBJECT_LOCK (lane->pad);
    if (GstGpuFanTaskPool * pool = GST_GPUFAN_OUT_PAD (lane->pad)->task_pool)
      threads = gst_gpufan_task_pool_binding (pool);
    GST_OBJECT_UNLOCK (lane->pad);
    gst_structure_set (s, "worker-thread", G_TYPE_STRING, threads.c_str (),
        "copies", G_TYPE_UINT64, lane->copies.load (), "copies-skipped",
        G_TYPE_UINT64, lane->copies_skipped.load (), nullptr);
    GstAllocator * allocator = nullptr;
    {
      std::lock_guard<std::mutex> lk (lane->staging_lock);
      if (lane->allocator)
        allocator = GST_ALLOCATOR (gst_object_ref (lane->allocator));
    }
    if (allocator) {
      gst_gpufan_host_allocator_stats_to_structure (allocator, s);
      gst_object_unref (allocator);
    }
  };
}

static void
post_stats (GstGpuFanOut * self)
{
  gst_element_post_message (GST_ELEMENT (self),
      gst_gpufan_stats_message_new (GST_OBJECT (self), *self->priv->session));
}

void
fanout::maybe_post_interval_stats (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  guint interval_ms = priv->stats_interval_ms.load ();
  if (interval_ms == 0)
    return;
  gint64 now = priv->session->clock ().NowNs ();
  gint64 last = priv->last_stats_post_ns.load ();
  if (now - last < (gint64)interval_ms * GST_MSECOND)
    return;
  if (priv->last_stats_post_ns.compare_exchange_strong (last, now))
    post_stats (self);
}

/* When every lane is pushing EOS and no gpufanin waits for any of them, the
 * fan-out posts the final statistics itself. */
void
fanout::on_lane_eos (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<std::mutex> lk (lane->lock);
    if (!lane->eos_pushed)
      return;
  }
  gpufan::SessionStats stats = priv->session->Stats ();
  for (const auto & l : stats.lanes)
    if (l.claimed)
      return; /* gpufanin posts them */
  if (!priv->stats_posted.exchange (true)) {
    GST_DEBUG_OBJECT (self, "every lane pushed EOS, posting statistics");
    post_stats (self);
  }
}
