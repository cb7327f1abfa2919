/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_GPUFAN_BIN (gst_gpufan_bin_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanBin, gst_gpufan_bin, GST, GPUFAN_BIN, GstBin);

GST_ELEMENT_REGISTER_DECLARE (gpufanbin);

G_END_DECLS
