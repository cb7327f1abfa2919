/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's several input streams: sink_%u pads
 * (gstgpufanout-streams.cpp, gstgpufanout-sinkpad.cpp). */
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
/* The Session's id of sink_%u pad @pad's stream (gstgpufanout-sinkpad.cpp) */
guint32 stream_of (GstGpuFanOutSinkPad * pad);
GstPad * stream_request_pad (GstGpuFanOut * self, GstPadTemplate * templ,
    const gchar * name);
void stream_release_pad (GstGpuFanOut * self, GstPad * pad);
/* An upstream event from lane pad @src's branch, once: to sink_k's
 * upstream when gpufanin's src_k sent it (@stream k + 1), else to the
 * single sink pad's. Takes @event. */
gboolean forward_upstream_event (GstGpuFanOut * self, GstPad * src,
    GstEvent * event, guint stream);
/* An upstream query that gpufanin's src_k sent up a lane (@stream k + 1,
 * its mark taken off): sink_k's peer answers it (FALSE when sink_k is
 * gone). The mark is back on the query when it returns, for the next lane
 * that gpufanin may try. */
gboolean forward_upstream_query (GstGpuFanOut * self, GstQuery * query,
    guint32 stream);
/* gstgpufanout-sinkpad.cpp: READY->PAUSED: each sink_%u pad's dispatcher
 * for the run's mode; PAUSED->READY (no buffer flows): their open chunks
 * are forgotten. */
void streams_choose_dispatchers (GstGpuFanOut * self);
void streams_forget_chunks (GstGpuFanOut * self);
/* PAUSED->READY: every stream starts again. */
void streams_reset (GstGpuFanOut * self);
/* Data on the single sink pad: FALSE (an error posted) when sink_%u pads
 * carry streams (one relaxed load once allowed). */
gboolean main_input_allowed (GstGpuFanOut * self);

} // namespace fanout
