/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_GPUFAN_IN (gst_gpufan_in_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanIn, gst_gpufan_in, GST, GPUFAN_IN, GstElement);

GST_ELEMENT_REGISTER_DECLARE (gpufanin);

G_END_DECLS
