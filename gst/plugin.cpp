/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * plugin-gpufan:
 *
 * Ordered fan-out/fan-in of a video stream over several GPUs or CPU lanes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <gst/gst.h>

#include "bin/gstgpufanbin.h"
#include "fanin/gstgpufanin.h"
#include "fanout/gstgpufanout.h"
#include "common/gstgpufanutils.h"

static gboolean
plugin_init (GstPlugin * plugin)
{
  GST_DEBUG_CATEGORY_INIT (gst_gpufan_debug, "gpufan", 0, "gpufan glue");

  gboolean ok = FALSE;
  ok |= GST_ELEMENT_REGISTER (gpufanout, plugin);
  ok |= GST_ELEMENT_REGISTER (gpufanin, plugin);
  ok |= GST_ELEMENT_REGISTER (gpufanbin, plugin);
  return ok;
}

GST_PLUGIN_DEFINE (GST_VERSION_MAJOR, GST_VERSION_MINOR, gpufan,
    "Ordered fan-out/fan-in of a stream over several GPUs or CPU lanes",
    plugin_init, PACKAGE_VERSION, GST_LICENSE, GST_PACKAGE_NAME,
    GST_PACKAGE_ORIGIN)
