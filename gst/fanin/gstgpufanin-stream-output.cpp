/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: one input stream's output, pushed by its src_%u pad's own task
 * (see gstgpufanin-stream-output.h). Downstream of src_k sees: the stream's
 * stream-start, the lanes' caps (what the branches make of the frames), the
 * stream's segment, then its frames and events in order. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>

using gpufanin::QueuedRelease;
using gpufanin::StreamOutput;

bool
QueuedRelease::IsFlushStop () const
{
  auto * attached
      = dynamic_cast<GstGpuFanStreamEvent *> (released_.payload.get ());
  return attached && attached->event
      && GST_EVENT_TYPE (attached->event) == GST_EVENT_FLUSH_STOP;
}

/* Sends what must precede the stream's next frame: its stream-start, the
 * lanes' caps (@caps_event, may be null), its segment, and the events held
 * until there were caps. */
static void
push_stream_sticky (GstGpuFanIn * self, StreamOutput & o, GstEvent * caps_event)
{
  /* a sticky event refused by a pad that started flushing meanwhile is not
   * kept there: it counts as not sent */
  auto sent = [&o] (GstEvent * event) {
    return gst_pad_push_event (o.pad, event) || !GST_PAD_IS_FLUSHING (o.pad);
  };
  if (!o.stream_start_sent) {
    /* upstream's own came through the window; none came (the stream began
     * before this pad existed): one of ours */
    gchar * id = g_strdup_printf ("%s/%s", GST_OBJECT_NAME (self),
        GST_OBJECT_NAME (o.pad));
    o.stream_start_sent = sent (gst_event_new_stream_start (id));
    g_free (id);
  }
  if (caps_event && caps_event != o.caps_event) {
    GstCaps * caps;
    gst_event_parse_caps (caps_event, &caps);
    if (o.caps && gst_caps_is_equal (caps, o.caps)) {
      gst_event_replace (&o.caps_event, caps_event);
    } else if (sent (gst_event_ref (caps_event))) {
      gst_caps_replace (&o.caps, caps);
      gst_event_replace (&o.caps_event, caps_event);
    }
  }
  if (!o.caps)
    return; /* segment and the rest wait for caps */
  if (o.segment && !o.segment_sent) {
    gst_pad_push_event (o.pad, gst_event_ref (o.segment));
    o.segment_sent = true;
  }
  for (GstEvent * e : o.held)
    gst_pad_push_event (o.pad, e);
  o.held.clear ();
}

/* The pipeline's EOS follows the last stream's: the gpufan-stats message
 * goes before that one (not at the lanes' end, as with one stream). */
static void
post_stats_before_last_eos (GstGpuFanIn * self)
{
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::FanInPort> session;
  /* until posted: the lanes' end (gst_gpufan_in_finish_stream) may be
   * posting them, and our EOS must follow them */
  std::lock_guard<gpufan::Mutex> st (priv->stats_lock);
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    for (auto & kv : priv->stream_outputs)
      if (!kv.second->eos_sent)
        return;
    session = priv->session;
  }
  if (!session || priv->streams_stats_posted.exchange (true))
    return;
  gst_gpufan_in_post_stats (self, *session);
}

static void
push_stream_eos (GstGpuFanIn * self, StreamOutput & o, GstEvent * eos)
{
  push_stream_sticky (self, o, nullptr);
  o.eos_sent = true;
  post_stats_before_last_eos (self);
  gst_pad_push_event (o.pad, eos);
}

/* One of the stream's own events, in its place among its frames. Takes
 * @event. */
static void
push_stream_event (GstGpuFanIn * self, StreamOutput & o, GstEvent * event)
{
  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_STREAM_START:
      /* a new stream after an EOS flows again (as a pad's EOS flag goes) */
      o.stream_start_sent = true;
      o.eos_sent = false;
      gst_pad_push_event (o.pad, event);
      return;
    case GST_EVENT_SEGMENT:
      gst_event_replace (&o.segment, event);
      gst_event_unref (event);
      o.segment_sent = false;
      if (o.caps)
        push_stream_sticky (self, o, nullptr);
      return;
    case GST_EVENT_EOS:
      push_stream_eos (self, o, event);
      return;
    default:
      if (!o.caps && GST_EVENT_IS_STICKY (event)) {
        o.held.push_back (event);
        return;
      }
      gst_pad_push_event (o.pad, event);
      return;
  }
}

/* Pushes one released item (or one of the stream's events) downstream of
 * its src pad. Not OK only for a fatal flow (an error was posted): the
 * stream's FLUSHING, EOS or NOT_LINKED is its own. */
static GstFlowReturn
push_released (GstGpuFanIn * self, StreamOutput & o,
    gpufan::Released & released, guint64 session_id)
{
  auto * attached
      = dynamic_cast<GstGpuFanStreamEvent *> (released.payload.get ());
  if (attached && GST_EVENT_TYPE (attached->event) == GST_EVENT_FLUSH_STOP) {
    /* the end of the stream's flush: it starts over (its caps and
     * stream-start stay on the pad) */
    o.Restart ();
    GstEvent * stop = attached->event;
    attached->event = nullptr;
    gst_pad_push_event (o.pad, stop);
    o.flushing = false;
    return GST_FLOW_OK;
  }
  if (o.flushing.load ()) {
    GST_LOG_OBJECT (o.pad, "flushing: dropped");
    return GST_FLOW_OK;
  }
  if (attached) {
    GstEvent * event = attached->event;
    attached->event = nullptr;
    if (!o.eos_sent || GST_EVENT_TYPE (event) == GST_EVENT_STREAM_START)
      push_stream_event (self, o, event);
    else
      gst_event_unref (event);
    return GST_FLOW_OK;
  }

  auto * item = static_cast<FanInItem *> (released.payload.get ());
  if (o.eos_sent)
    return GST_FLOW_OK; /* a frame after its stream's EOS: none should be */
  push_stream_sticky (self, o, item->caps);
  GstMiniObject * obj = item->obj;
  item->obj = nullptr;
  GstFlowReturn ret = GST_FLOW_OK;
  if (GST_IS_BUFFER (obj)) {
    GstBuffer * buffer = GST_BUFFER_CAST (obj);
    if (gst_buffer_find_gpufan_meta (buffer, session_id)) {
      buffer = gst_buffer_make_writable (buffer);
      gst_buffer_remove_gpufan_meta (buffer, session_id);
    }
    gst_gpufan_in_move_to_output_device (self, o.pad, &buffer);
    ret = gst_pad_push (o.pad, buffer);
  } else {
    gst_pad_push_event (o.pad,
        gst_gpufan_event_clear_item (GST_EVENT_CAST (obj)));
  }
  if (ret >= GST_FLOW_EOS || ret == GST_FLOW_NOT_LINKED
      || ret == GST_FLOW_FLUSHING) {
    if (ret == GST_FLOW_NOT_LINKED && !o.warned_not_linked) {
      o.warned_not_linked = true;
      GST_INFO_OBJECT (o.pad, "not linked: the stream's frames are dropped");
    }
    return GST_FLOW_OK;
  }
  GST_ELEMENT_FLOW_ERROR (self, ret);
  return ret;
}

/* The stream's task: one queued item per iteration. */
static void
stream_output_loop (gpointer user_data)
{
  StreamOutput & o = *static_cast<StreamOutput *> (user_data);
  GstGpuFanIn * self = o.element;
  std::optional<QueuedRelease> next;
  {
    std::unique_lock<gpufan::Mutex> lk (o.queue_lock);
    while (o.queue.empty () && !o.stopping)
      o.queue_cond.wait (lk);
    if (o.stopping) {
      lk.unlock ();
      gst_pad_pause_task (o.pad);
      return;
    }
    next.emplace (std::move (o.queue.front ()));
    o.queue.pop_front ();
  }
  if (next->end ()) {
    if (!o.eos_sent)
      push_stream_eos (self, o, gst_event_new_eos ());
    return;
  }
  const GstFlowReturn ret
      = push_released (self, o, next->released (), next->session_id ());
  next.reset (); /* its stream slot goes back now */
  if (ret == GST_FLOW_OK)
    return;
  /* fatal (its error was posted): the whole output stops, as with one
   * stream */
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::FanInPort> session;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    session = priv->session;
    priv->output.PushReturnedUnlocked (ret);
  }
  if (session)
    session->NoteOutputFailed ();
  gst_pad_pause_task (o.pad);
}

gboolean
gst_gpufan_in_stream_output_activate (GstPad * pad, GstObject *,
    GstPadMode mode, gboolean active)
{
  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;
  /* the output outlives its pad's activity: release_pad deactivates first */
  auto * o = static_cast<StreamOutput *> (GST_PAD_CAST (pad)->activatemodedata);
  if (active) {
    {
      std::lock_guard<gpufan::Mutex> lk (o->queue_lock);
      o->stopping = false;
    }
    return gst_pad_start_task (pad, stream_output_loop, o, nullptr);
  }
  std::deque<QueuedRelease> dropped;
  {
    std::lock_guard<gpufan::Mutex> lk (o->queue_lock);
    o->stopping = true;
    dropped.swap (o->queue);
    o->queue_cond.notify_all ();
  }
  dropped.clear (); /* their slots go back (outside our lock) */
  /* a push of the task held downstream returns: the pad is flushing */
  return gst_pad_stop_task (pad);
}

void
gst_gpufan_in_stream_output_enqueue (StreamOutput & o, QueuedRelease && item)
{
  std::unique_lock<gpufan::Mutex> lk (o.queue_lock);
  if (o.stopping)
    return; /* @item is dropped by our caller, outside our lock */
  o.queue.push_back (std::move (item));
  o.queue_cond.notify_one ();
}

void
gst_gpufan_in_stream_output_flush (StreamOutput & o)
{
  std::deque<QueuedRelease> dropped;
  {
    std::lock_guard<gpufan::Mutex> lk (o.queue_lock);
    std::deque<QueuedRelease> kept;
    for (QueuedRelease & q : o.queue)
      (q.end () || q.IsFlushStop () ? kept : dropped).push_back (std::move (q));
    o.queue.swap (kept);
  }
}
