/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_GPUFAN_OUT (gst_gpufan_out_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanOut, gst_gpufan_out, GST, GPUFAN_OUT,
    GstElement);

#define GST_TYPE_GPUFAN_OUT_PAD (gst_gpufan_out_pad_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanOutPad, gst_gpufan_out_pad, GST, GPUFAN_OUT_PAD,
    GstPad);

#define GST_TYPE_GPUFAN_OUT_SINK_PAD (gst_gpufan_out_sink_pad_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanOutSinkPad, gst_gpufan_out_sink_pad, GST,
    GPUFAN_OUT_SINK_PAD, GstPad);

#define GST_TYPE_GPUFAN_POLICY (gst_gpufan_policy_get_type ())
GType gst_gpufan_policy_get_type (void);

GST_ELEMENT_REGISTER_DECLARE (gpufanout);

G_END_DECLS
