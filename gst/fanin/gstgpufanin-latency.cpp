/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: latency. The lanes' latency plus what reordering adds, and the
 * LATENCY messages that ask the pipeline to query it again. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

/* The lanes' items changed what ordering adds to the latency: the pipeline
 * asks again (gst_gpufan_in_query_latency). Without output_lock held. */
void
gst_gpufan_in_maybe_post_latency (GstGpuFanIn * self)
{
  if (self->priv->latency_post_pending.exchange (false)) {
    GST_DEBUG_OBJECT (self, "reordering adds more latency now");
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_latency (GST_OBJECT (self)));
  }
}

/* min = the largest lane minimum (an item leaves once every earlier one has,
 * and each of those took at most that long), max = the smallest lane maximum,
 * live if any lane is. */
gboolean
gst_gpufan_in_query_latency (GstGpuFanIn * self, GstQuery * query)
{
  gboolean live = FALSE, any = FALSE;
  GstClockTime min = 0, max = GST_CLOCK_TIME_NONE;

  GstIterator * it = gst_element_iterate_sink_pads (GST_ELEMENT (self));
  GValue item = G_VALUE_INIT;
  gboolean done = FALSE;
  while (!done) {
    switch (gst_iterator_next (it, &item)) {
      case GST_ITERATOR_OK: {
        GstPad * pad = GST_PAD (g_value_get_object (&item));
        GstQuery * q = gst_query_new_latency ();
        if (gst_pad_peer_query (pad, q)) {
          gboolean l;
          GstClockTime mn, mx;
          gst_query_parse_latency (q, &l, &mn, &mx);
          any = TRUE;
          live |= l;
          min = MAX (min, mn);
          if (GST_CLOCK_TIME_IS_VALID (mx))
            max = GST_CLOCK_TIME_IS_VALID (max) ? MIN (max, mx) : mx;
        }
        gst_query_unref (q);
        g_value_reset (&item);
        break;
      }
      case GST_ITERATOR_RESYNC:
        live = FALSE;
        any = FALSE;
        min = 0;
        max = GST_CLOCK_TIME_NONE;
        gst_iterator_resync (it);
        break;
      default:
        done = TRUE;
        break;
    }
  }
  g_value_unset (&item);
  gst_iterator_free (it);

  if (!any)
    return FALSE;
  self->priv->live = live;
  /* Ordering holds an item until every earlier one arrived: it adds the
   * longest time items recently spent in the lanes (Session::AddedLatencyNs,
   * at most stall-timeout). */
  std::shared_ptr<gpufan::FanInPort> session;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
    session = self->priv->session;
  }
  if (session) {
    const GstClockTime added = (GstClockTime)session->AddedLatencyNs ();
    session->MarkLatencyReported ((gint64)added);
    min += added;
    if (GST_CLOCK_TIME_IS_VALID (max))
      max += added;
  }
  GST_DEBUG_OBJECT (self,
      "latency: live %d min %" GST_TIME_FORMAT " max %" GST_TIME_FORMAT, live,
      GST_TIME_ARGS (min), GST_TIME_ARGS (max));
  gst_query_set_latency (query, live, min, max);
  return TRUE;
}

/* The latency is the lanes' (see gst_gpufan_in_query_latency): a live pipeline must
 * query it again when they change. */
void
gst_gpufan_in_lanes_changed (GstGpuFanIn * self)
{
  if (GST_STATE (self) == GST_STATE_PLAYING)
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_latency (GST_OBJECT (self)));
}
