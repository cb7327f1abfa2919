/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin, frame mode (the default): each buffer or GAP event a lane
 * returns is one item of the window, identified by the sequence number the
 * fan-out gave it, and leaves by itself out of the src pad. The lane's
 * thread that delivered it outputs what it made releasable. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <optional>

/* What identifies an item: the sequence number our fan-out gave it (from our
 * session's meta, or a GAP event's fields) and its caps epoch. */
struct ItemId {
  std::optional<guint64> seq;
  guint32 caps_epoch = 0;
  bool has_caps_epoch = false;
  gint64 pts = gpufan::kNoTime;
};

static ItemId
identify_item (GstMiniObject * obj, guint64 session_id)
{
  ItemId id;
  if (GST_IS_BUFFER (obj)) {
    GstBuffer * buffer = GST_BUFFER_CAST (obj);
    if (GST_BUFFER_PTS_IS_VALID (buffer))
      id.pts = (gint64)GST_BUFFER_PTS (buffer);
    if (GstGpuFanMeta * meta
        = gst_buffer_find_gpufan_meta (buffer, session_id)) {
      id.seq = meta->seq;
      id.caps_epoch = meta->caps_epoch;
      id.has_caps_epoch = true;
    }
    return id;
  }
  GstEvent * event = GST_EVENT_CAST (obj);
  GstClockTime ts;
  gst_event_parse_gap (event, &ts, nullptr);
  if (GST_CLOCK_TIME_IS_VALID (ts))
    id.pts = (gint64)ts;
  guint64 event_session = 0, seq = 0;
  if (gst_gpufan_event_get_item (event, &event_session, &seq)
      && event_session == session_id)
    id.seq = seq;
  return id;
}

GstFlowReturn
gst_gpufan_in_arrive_item (GstGpuFanIn * self, GstPad * pad,
    gpufanin::TakenItem & taken)
{
  const ItemId id = identify_item (taken.item->obj, taken.session->id ());
  taken.item->caps_epoch = id.caps_epoch;
  taken.item->has_caps_epoch = id.has_caps_epoch;

  /* this thread pushes what it makes releasable: the task is not woken */
  gpufan::Arrival arrival = gst_gpufan_in_output_from_lane (self,
      taken.session,
      PendingArrival{
          taken.lane, id.seq, id.pts, gpufan::PayloadPtr (taken.item) });
  taken.item = nullptr;
  if (arrival.status == gpufan::ArrivalStatus::kLate)
    GST_DEBUG_OBJECT (pad,
        "item %" G_GUINT64_FORMAT " came after its slot was given up: "
        "dropped",
        arrival.seq);

  /* downstream's result goes upstream, as queue does */
  return self->priv->output.Result ();
}

namespace {

class FrameHandler : public gpufanin::ItemHandler {
public:
  const char * Name () const override { return "frame"; }
  int Rank () const override { return 0; }

  GstFlowReturn Arrive (GstGpuFanIn * self, GstPad * pad,
      GstMiniObject * obj) const override
  {
    gpufanin::TakenItem taken;
    GstFlowReturn ret;
    if (!gst_gpufan_in_take_item (self, pad, obj, &taken, &ret))
      return ret;
    return gst_gpufan_in_arrive_item (self, pad, taken);
  }

  bool HandleEvent (GstGpuFanIn * self, GstPad * pad,
      GstEvent * event) const override
  {
    /* our fan-out's first chunk-start: chunk mode from now on (a lane gets
     * its chunk's start before anything else of the chunk) */
    return gst_gpufan_in_chunk_start (self, pad, event);
  }

  bool PushReleased (GstGpuFanIn * self, gpufan::FanInPort & session,
      gpufan::Released & released, bool * pause) const override
  {
    if (G_UNLIKELY (released.stream != gpufan::kMainStream)) {
      /* a stream the fan-out got after we paired (a sink_%u it was given
       * since): the streams handler from now on */
      gst_gpufan_in_use_handler (self, gpufanin::streams_handler ());
      return gpufanin::streams_handler ().PushReleased (self, session,
          released, pause);
    }
    auto * item = static_cast<FanInItem *> (released.payload.get ());
    GstFlowReturn ret = gst_gpufan_in_push_item (self, item, session.id ());
    if (ret == GST_FLOW_OK)
      return true;
    gst_gpufan_in_output_failed (self, session, ret, item, pause);
    return false;
  }
};

} // namespace

const gpufanin::ItemHandler &
gpufanin::frame_handler ()
{
  static const FrameHandler handler;
  return handler;
}
