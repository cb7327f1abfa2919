/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The remote lane's payloader: every buffer, caps and event that reaches it
 * goes out at once as one GDP 1.0 packet (what gdpdepay reads), in the order
 * it came. gdppay does not fit a lane: it holds every packet after a sticky
 * event (a chunk's segment, a tag) until the next buffer, so an EOS or a
 * marker with no buffer behind it never leaves, and it sends EOS on
 * downstream instead of onto the wire. Used by gpufanremote and by
 * gpufan-lane-worker (which registers it under a name of its own). */
#pragma once

#include <gst/gst.h>

/* A custom event's type on the wire: a field of its structure. */
#define GST_GPUFAN_WIRE_TYPE_FIELD "gpufan-wire-type"
/* The structure name of a custom event that had none. */
#define GST_GPUFAN_WIRE_EVENT "GstGpuFanWireEvent"

/* A new payloader element (floating). */
GstElement * gst_gpufan_wire_pay_new (void);

/* Its GType (registered on first use; the name is
 * GPUFAN_WIRE_PAY_TYPE_NAME, so that a worker that also loads the plugin
 * holds two types). */
GType gst_gpufan_wire_pay_get_type (void);
