/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's control interface: action signals through which whoever
 * builds the lanes (gpufanbin, or an application that builds them itself)
 * acts on a lane's branch from outside the stream, without reaching into
 * the element. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-control.h"

#include "gstgpufanout-private.h"

static void
fail_lane (GstGpuFanOut * self, guint lane)
{
  fanout::fail_lane_on_error (self, lane);
}

/* transfer full, as gst_element_request_pad_simple */
static GstPad *
request_replacement_pad (GstGpuFanOut * self, guint lane)
{
  return fanout::request_lane_like (self, lane);
}

void
gst_gpufan_out_install_control_signals (GstGpuFanOutClass * klass)
{
  /**
   * GstGpuFanOut::fail-lane:
   * @fanout: the gpufanout
   * @lane: the lane (its src pad's index)
   *
   * An element of lane @lane's branch posted an ERROR: with
   * #GstGpuFanOut:on-lane-error `drop-lane` or `replay` the lane leaves the
   * stream as if its push had failed, whether or not a push fails. Nothing
   * happens with `fail`, for a lane that already left, or once an error
   * downstream of gpufanin has failed the output. gpufanbin emits it for
   * the ERRORs of its lanes' elements.
   */
  g_signal_new_class_handler ("fail-lane", G_TYPE_FROM_CLASS (klass),
      (GSignalFlags)(G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION),
      G_CALLBACK (fail_lane), nullptr, nullptr, nullptr, G_TYPE_NONE, 1,
      G_TYPE_UINT);

  /**
   * GstGpuFanOut::request-replacement-pad:
   * @fanout: the gpufanout
   * @lane: the failed lane (its src pad's index)
   *
   * A new `src_%u` pad (a new lane) to replace failed lane @lane: placed on
   * @lane's device, or, where that GPU was excluded since, on an eligible
   * one as `devices=auto` would choose, whatever `devices` says about the
   * lane count. gpufanbin uses it to rebuild failed lanes.
   *
   * Returns: (transfer full) (nullable): the new pad (release it with
   * gst_element_release_request_pad()), or %NULL when @lane was never
   * placed or no device can take it.
   */
  g_signal_new_class_handler ("request-replacement-pad",
      G_TYPE_FROM_CLASS (klass),
      (GSignalFlags)(G_SIGNAL_RUN_LAST | G_SIGNAL_ACTION),
      G_CALLBACK (request_replacement_pad), nullptr, nullptr, nullptr,
      GST_TYPE_PAD, 1, G_TYPE_UINT);
}
