/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: the sink pads. What comes out of a lane (buffers, GAP events,
 * the fan-out's markers, EOS, sticky and other events, serialized queries)
 * is turned into Session calls; the lane's thread then outputs what that
 * made releasable (gstgpufanin-output.cpp). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <optional>
#include <string>

static FanInItem *
new_item_unlocked (const PadState & state, GstMiniObject * obj)
{
  auto * item = new FanInItem ();
  item->obj = obj;
  item->lane = state.lane;
  item->SetSticky (state.sticky);
  return item;
}

static GstFlowReturn
not_fed_by_fanout (GstGpuFanIn * self, GstPad * pad, GstMiniObject * obj,
    const std::string & conflict)
{
  gst_mini_object_unref (obj);
  if (!conflict.empty ())
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("%s", conflict.c_str ()),
        ("A gpufanin takes the lanes of one gpufanout: give each gpufanout "
         "its own gpufanin"));
  else
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("%s:%s is not fed by a gpufanout", GST_DEBUG_PAD_NAME (pad)),
        ("Every branch into gpufanin must start at a src pad of one and the "
         "same gpufanout"));
  return GST_FLOW_ERROR;
}

/* An item of @pad's lane. The pad is paired first if need be (asking
 * upstream once). */
bool
gst_gpufan_in_take_item (GstGpuFanIn * self, GstPad * pad,
    GstMiniObject * obj, gpufanin::TakenItem * taken, GstFlowReturn * ret)
{
  GstGpuFanInPrivate * priv = self->priv;
  for (bool asked = false;; asked = true) {
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      auto it = priv->pads.find (pad);
      if (it == priv->pads.end () || priv->output.FlushingUnlocked ()
          || it->second.flushing || (asked && !it->second.paired)) {
        gst_mini_object_unref (obj);
        *ret = GST_FLOW_FLUSHING;
        return false;
      }
      if (it->second.eos) {
        gst_mini_object_unref (obj);
        *ret = GST_FLOW_EOS;
        return false;
      }
      if (it->second.paired) {
        taken->session = it->second.session;
        taken->lane = it->second.lane;
        taken->item = new_item_unlocked (it->second, obj);
        gst_gpufan_in_handler (self).TakeUnlocked (it->second, *taken);
        /* this thread's time pushing output downstream (kOutput) from here */
        taken->timer = it->second.timer;
        break;
      }
    }
    /* not paired yet: ask upstream, then look again (once) */
    std::string conflict;
    if (!gst_gpufan_in_ensure_paired (self, pad, &conflict)) {
      *ret = not_fed_by_fanout (self, pad, obj, conflict);
      return false;
    }
  }
  taken->output_start = taken->session->clock ().NowNs ();
  return true;
}

/* A marker of our fan-out (gst_gpufan_marker_new) came out of a lane: the
 * lane's items up to it that did not come back never will. Consumed (TRUE);
 * FALSE for anything else, a marker of an outer pair included. */
static gboolean
handle_marker (GstGpuFanIn * self, GstPad * pad, GstEvent * event)
{
  GstGpuFanInPrivate * priv = self->priv;
  guint64 session_id = 0, seq = 0;
  guint marker_lane = 0;
  if (!gst_gpufan_marker_parse (event, &session_id, &marker_lane, &seq))
    return FALSE;

  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;
  for (bool asked = false;; asked = true) {
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      auto it = priv->pads.find (pad);
      if (it == priv->pads.end ())
        return FALSE;
      if (it->second.paired) {
        if (it->second.session->id () != session_id)
          return FALSE;
        if (priv->output.FlushingUnlocked () || it->second.flushing
            || it->second.eos) {
          gst_event_unref (event);
          return TRUE;
        }
        session = it->second.session;
        lane = it->second.lane;
        break;
      }
    }
    if (asked || !gst_gpufan_in_ensure_paired (self, pad))
      return FALSE;
  }
  gst_event_unref (event);
  GST_LOG_OBJECT (pad,
      "marker: lane %u's items up to %" G_GUINT64_FORMAT
      " came back or never will",
      lane, seq);
  PendingArrival marker{ lane, seq, gpufan::kNoTime, nullptr };
  marker.marker = true;
  gst_gpufan_in_output_from_lane (self, session, std::move (marker));
  return TRUE;
}

static GstFlowReturn
gst_gpufan_in_chain (GstPad * pad, GstObject * parent, GstBuffer * buffer)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  return gst_gpufan_in_handler (self).Arrive (self, pad,
      GST_MINI_OBJECT_CAST (buffer));
}

static gboolean
gst_gpufan_in_sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  GstGpuFanInPrivate * priv = self->priv;

  /* the mode's own events first (chunk mode: a chunk's start and end) */
  if (gst_gpufan_in_handler (self).HandleEvent (self, pad, event))
    return TRUE;

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START: {
      bool first;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ())
          it->second.StartFlush ();
        first = priv->output.FlushUnlocked ();
      }
      if (!first) {
        gst_event_unref (event);
        return TRUE;
      }
      /* one FLUSH_START downstream, at once; then the task stops */
      gboolean res = gst_pad_push_event (self->srcpad, event);
      priv->output.PauseTask ();
      return res;
    }
    case GST_EVENT_FLUSH_STOP: {
      bool last = false;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          it->second.flushing = false;
          it->second.eos = false;
        }
        bool any_flushing = false;
        for (auto & kv : priv->pads)
          any_flushing |= kv.second.flushing;
        if (!any_flushing && priv->output.FlushingUnlocked ()
            && GST_PAD_IS_ACTIVE (self->srcpad)) {
          last = true;
          priv->output.StartUnlocked ();
          gst_gpufan_in_restart_output_unlocked (self);
        }
      }
      if (!last) {
        gst_event_unref (event);
        return TRUE;
      }
      gboolean res = gst_pad_push_event (self->srcpad, event);
      priv->output.StartTask (gst_gpufan_in_src_loop, self);
      return res;
    }
    case GST_EVENT_EOS: {
      std::shared_ptr<gpufan::FanInPort> session;
      guint lane = 0;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          it->second.eos = true;
          priv->eos_seqnum = gst_event_get_seqnum (event);
          if (it->second.paired) {
            session = it->second.session;
            lane = it->second.lane;
          }
        }
      }
      /* the lane is FIFO: whatever of it came before the EOS and has not
       * come back never will (a stream that started again follows it) */
      if (session)
        session->LaneEnded (lane,
            session->EventPosition (gst_event_get_seqnum (event)));
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        gst_gpufan_in_wake_output_unlocked (self);
      }
      gst_event_unref (event);
      return TRUE;
    }
    case GST_EVENT_STREAM_START:
    case GST_EVENT_CAPS:
    case GST_EVENT_SEGMENT: {
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        auto it = priv->pads.find (pad);
        if (it != priv->pads.end ()) {
          /* a new set: items that came before keep theirs */
          auto events = it->second.sticky
              ? std::make_shared<StickyEvents> (*it->second.sticky)
              : std::make_shared<StickyEvents> ();
          GstEvent ** slot = GST_EVENT_TYPE (event) == GST_EVENT_CAPS
              ? &events->caps
              : GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT
              ? &events->segment
              : &events->stream_start;
          gst_event_replace (slot, event);
          it->second.sticky = std::move (events);
        }
      }
      if (GST_EVENT_TYPE (event) == GST_EVENT_STREAM_START) {
        gst_gpufan_in_ensure_paired (self, pad);
        if (gst_gpufan_in_restart_after_eos (self, pad))
          priv->output.StartTask (gst_gpufan_in_src_loop, self);
      }
      gst_event_unref (event);
      return TRUE;
    }
    case GST_EVENT_GAP:
      /* a GAP stands for data: it takes its place in the order */
      return gst_gpufan_in_handler (self).Arrive (self, pad,
                 GST_MINI_OBJECT_CAST (event))
          == GST_FLOW_OK;
    case GST_EVENT_CUSTOM_DOWNSTREAM_STICKY:
      if (handle_marker (self, pad, event))
        return TRUE;
      break;
    default:
      break;
  }

  /* Any other event comes once per lane: forward it once. */
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (priv->forwarded_seqnums.Seen (gst_event_get_seqnum (event))) {
      gst_event_unref (event);
      return TRUE;
    }
    auto it = priv->pads.find (pad);
    const std::shared_ptr<gpufan::FanInPort> & session = priv->session;
    if (GST_EVENT_IS_SERIALIZED (event) && session && it != priv->pads.end ()) {
      FanInItem * item
          = new_item_unlocked (it->second, GST_MINI_OBJECT_CAST (event));
      item->is_attachment = true;
      /* serialized: it leaves where the fan-out saw it in the buffer order
       * (or after everything in flight, for an event a branch made). Placed
       * before the lock goes: another lane's copy, dropped as seen, may be
       * followed at once by the buffer this event must precede, and that
       * buffer could leave before a placement made later. */
      std::optional<guint64> position
          = session->EventPosition (gst_event_get_seqnum (event));
      session->AttachBefore (position.value_or (G_MAXUINT64),
          gpufan::PayloadPtr (item));
      return TRUE;
    }
  }
  return gst_pad_push_event (self->srcpad, event);
}

/* A serialized query (drain, allocation, ...) from a branch must not overtake
 * what that branch delivered before it: wait until all of it has left the
 * window, and then until the output batch that took it has been pushed.
 * Flush-aware; FALSE once the output's result is not OK. Woken by
 * the end of every output batch (mark_batch_done: items leave the window
 * only in a batch, a flow error is set in one) and by
 * gst_gpufan_in_wake_output_unlocked (flush, a released pad, deactivation);
 * pairing notifies too. A flush of the fan-out empties the window
 * unannounced, but its FLUSH_START reaches this pad through the lane. */
static gboolean
wait_lane_released (GstGpuFanIn * self, GstPad * pad, GstQuery * query)
{
  GstGpuFanInPrivate * priv = self->priv;
  std::unique_lock<gpufan::Mutex> lk (priv->lock);
  guint64 last_batch = 0;
  bool out_of_window = false;
  /* counted before batches_done is read (see mark_batch_done) */
  priv->batch_waiters++;
  /* and the wait is the lane's kQuery time */
  struct Uncount {
    GstGpuFanInPrivate * priv;
    std::shared_ptr<gpufan::FanInPort> session;
    std::shared_ptr<gpufan::LaneTimer> timer;
    gint64 start = 0;
    ~Uncount ()
    {
      priv->batch_waiters--;
      if (timer)
        timer->Add (gpufan::LaneTime::kQuery, start,
            session->clock ().NowNs ());
    }
  } uncount{ priv, nullptr, nullptr };
  /* the output's result, checked before the first wait and after each */
  for (bool ok = priv->output.Result () == GST_FLOW_OK; ok;
       ok = priv->output.WaitUnlocked (lk)) {
    auto it = priv->pads.find (pad);
    if (it == priv->pads.end () || it->second.flushing)
      return FALSE;
    if (!it->second.paired
        || gst_gpufan_in_handler (self).QueryPassesUnlocked (it->second,
            query))
      return TRUE;
    if (!uncount.timer) {
      uncount.session = it->second.session;
      uncount.timer = it->second.timer;
      uncount.start = uncount.session->clock ().NowNs ();
    }
    if (!out_of_window
        && !it->second.session->HoldsArrivedFrom (it->second.lane)) {
      out_of_window = true;
      last_batch = priv->batches_started;
    }
    if (out_of_window && priv->batches_done >= last_batch)
      return TRUE;
  }
  return FALSE;
}

static gboolean
gst_gpufan_in_sink_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);

  if (gst_gpufan_is_pair_query (query))
    return gst_gpufan_in_answer_pair_query (self, pad, query);
  if (GST_QUERY_IS_SERIALIZED (query) && !wait_lane_released (self, pad,
          query))
    return FALSE;
  return gst_pad_query_default (pad, parent, query);
}

void
gst_gpufan_in_setup_sink_pad (GstPad * pad)
{
  gst_pad_set_chain_function (pad, GST_DEBUG_FUNCPTR (gst_gpufan_in_chain));
  gst_pad_set_event_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_sink_event));
  gst_pad_set_query_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_sink_query));
  GST_PAD_SET_PROXY_CAPS (pad);
}
