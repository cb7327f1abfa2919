/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Statistics: the gpufan-stats message, at an interval and the final post
 * at EOS. Every one has the fan-out as its source: with a gpufanin paired,
 * that one posts the final message in our name once its window is drained
 * (gst_gpufan_in_post_stats). (The fan-out's per-lane fields, worker
 * threads, copies and host pool, are in the Session:
 * gstgpufanout-placement.cpp sets them.) */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"
#include "common/gstgpufanstats.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

static void
post_stats (GstGpuFanOut * self, gboolean is_final)
{
  gst_element_post_message (GST_ELEMENT (self),
      gst_gpufan_stats_message_new (GST_OBJECT (self), *self->priv->session,
          is_final));
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
    post_stats (self, FALSE);
}

/* When every lane is pushing EOS and no gpufanin waits for any of them, the
 * fan-out posts the final statistics itself. */
void
fanout::on_lane_eos (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    if (!lane->eos_pushed)
      return;
  }
  gpufan::SessionStats stats = priv->session->Stats ();
  for (const auto & l : stats.lanes)
    if (l.claimed)
      return; /* gpufanin posts them */
  if (!priv->stats_posted.exchange (true)) {
    GST_DEBUG_OBJECT (self, "every lane pushed EOS, posting statistics");
    post_stats (self, TRUE);
  }
}
