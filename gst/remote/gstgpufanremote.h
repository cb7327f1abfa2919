/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_GPUFAN_REMOTE (gst_gpufan_remote_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanRemote, gst_gpufan_remote, GST, GPUFAN_REMOTE,
    GstBin)

GST_ELEMENT_REGISTER_DECLARE (gpufanremote);

G_END_DECLS
