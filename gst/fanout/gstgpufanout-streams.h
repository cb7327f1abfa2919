/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's several input streams: sink_%u pads
 * (gstgpufanout-streams.cpp). */
#pragma once

#include <gst/gst.h>

#include "gstgpufanout.h"

namespace fanout {

/* One input stream of several: a sink_%u pad (gstgpufanout-streams.cpp).
 * Under GstGpuFanOutPrivate::streams_lock. */
struct StreamInput {
  guint index = 0;          /* sink_<index> */
  guint32 stream = 0;       /* its id in the Session */
  GstCaps * caps = nullptr; /* its current caps */
  bool ended = false;       /* EOS came (until a flush or a new start) */

  StreamInput () = default;
  StreamInput (const StreamInput &) = delete;
  StreamInput & operator= (const StreamInput &) = delete;
  ~StreamInput () { gst_clear_caps (&caps); }
};

/* Several input streams (gstgpufanout-streams.cpp) */
GstPad * stream_request_pad (GstGpuFanOut * self, GstPadTemplate * templ,
    const gchar * name);
void stream_release_pad (GstGpuFanOut * self, GstPad * pad);
/* PAUSED->READY: every stream starts again. */
void streams_reset (GstGpuFanOut * self);
/* Data on the single sink pad: FALSE (an error posted) when sink_%u pads
 * carry streams. */
gboolean main_input_allowed (GstGpuFanOut * self);

} // namespace fanout
