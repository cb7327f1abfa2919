/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: several input streams. gpufanout's sink_%u pad k feeds stream k,
 * which leaves on src_k here (pairing by index). Each stream's frames leave
 * in that stream's order, held back by no other stream (the Session's
 * window releases per stream); its events (stream-start, segment, tags,
 * EOS) come through the window from gpufanout's sink pad, its flushes
 * through the Session's stream flush listener. Downstream of src_k sees:
 * the stream's stream-start, the lanes' caps (what the branches make of
 * the frames), the stream's segment, then its frames and events in order.
 * A src_k that is missing or not linked drops its stream's output (as tee
 * with allow-not-linked), which keeps the other streams going. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include <memory>
#include <mutex>
#include <string>

#include "common/gstgpufanstats.h"

static gpufanin::StreamOutputPtr
find_output (GstGpuFanIn * self, guint32 stream)
{
  std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
  auto it = self->priv->stream_outputs.find (stream);
  return it == self->priv->stream_outputs.end () ? nullptr : it->second;
}

/* An upstream event (a seek, QoS) from downstream of src_k concerns stream
 * k: it goes up the lanes as from the single src pad, marked with the
 * stream, and gpufanout sends it to sink_k's upstream alone. */
static guint32
stream_of_pad (GstGpuFanIn * self, GstPad * pad)
{
  std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
  for (auto & kv : self->priv->stream_outputs)
    if (kv.second->pad == pad)
      return kv.first;
  return 0;
}

static gboolean
stream_src_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  const guint32 stream = stream_of_pad (self, pad);
  if (stream != 0) {
    event = GST_EVENT_CAST (
        gst_mini_object_make_writable (GST_MINI_OBJECT_CAST (event)));
    gst_structure_set (gst_event_writable_structure (event),
        GST_GPUFAN_EVENT_STREAM_FIELD, G_TYPE_UINT, stream, nullptr);
  }
  return gst_gpufan_in_src_event (pad, parent, event);
}

/* An upstream query (duration, position, seeking...) from downstream of
 * src_k concerns stream k: it goes up the lanes one at a time as from the
 * single src pad, marked with the stream, and gpufanout answers it from
 * sink_k's upstream alone. The answer comes back unmarked. */
static gboolean
stream_src_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  if (GST_QUERY_TYPE (query) == GST_QUERY_LATENCY
      || gst_gpufan_is_pair_query (query))
    return gst_gpufan_in_src_query (pad, parent, query);
  const guint32 stream = stream_of_pad (self, pad);
  const bool marked = stream != 0 && gst_gpufan_query_set_stream (query, stream);
  const gboolean res = gst_gpufan_in_src_query (pad, parent, query);
  if (marked)
    gst_gpufan_query_take_stream (query);
  return res;
}

GstPad *
gst_gpufan_in_stream_request_pad (GstGpuFanIn * self, GstPadTemplate * templ,
    const gchar * name)
{
  GstGpuFanInPrivate * priv = self->priv;
  GstPad * pad;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    guint index = 0;
    auto taken = [priv] (guint i) {
      return priv->stream_outputs.count (gst_gpufan_stream_of_index (i)) > 0;
    };
    if (!gst_gpufan_request_pad_index (GST_ELEMENT (self), "src_", name, taken,
            &index))
      return nullptr;
    gchar * pad_name = g_strdup_printf ("src_%u", index);
    pad = gst_pad_new_from_template (templ, pad_name);
    g_free (pad_name);
    priv->streams_out = true;
    gst_gpufan_in_use_handler (self, gpufanin::streams_handler ());
    auto output = std::make_shared<gpufanin::StreamOutput> ();
    output->pad = GST_PAD (gst_object_ref (pad));
    output->index = index;
    priv->stream_outputs[gst_gpufan_stream_of_index (index)] = output;
  }
  gst_pad_set_event_function (pad, GST_DEBUG_FUNCPTR (stream_src_event));
  gst_pad_set_query_function (pad, GST_DEBUG_FUNCPTR (stream_src_query));
  GST_PAD_SET_PROXY_CAPS (pad);
  if (GST_PAD_IS_ACTIVE (self->srcpad))
    gst_pad_set_active (pad, TRUE);
  gst_element_add_pad (GST_ELEMENT (self), pad);
  return pad;
}

void
gst_gpufan_in_stream_release_pad (GstGpuFanIn * self, GstPad * pad)
{
  GstGpuFanInPrivate * priv = self->priv;
  /* a push on it in progress returns (FLUSHING) */
  gst_pad_set_active (pad, FALSE);
  gpufanin::StreamOutputPtr gone;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    for (auto it = priv->stream_outputs.begin ();
         it != priv->stream_outputs.end (); ++it) {
      if (it->second->pad == pad) {
        gone = it->second;
        priv->stream_outputs.erase (it);
        break;
      }
    }
  }
  /* an output batch may still hold it: its state goes with the last one */
  gst_element_remove_pad (GST_ELEMENT (self), pad);
}

void
gst_gpufan_in_restart_streams (GstGpuFanIn * self)
{
  std::lock_guard<gpufan::Mutex> out (self->priv->output_lock);
  self->priv->streams_stats_posted = false;
  std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
  for (auto & kv : self->priv->stream_outputs) {
    gpufanin::StreamOutput & o = *kv.second;
    o.Restart ();
    o.stream_start_sent = false;
    gst_clear_event (&o.caps_event);
    gst_clear_caps (&o.caps);
    o.flushing = false;
    o.warned_not_linked = false;
  }
}

/* A stream's flush (from gpufanout's sink pad, through the Session): its src
 * pad alone flushes. FLUSH_START goes out at once (it unblocks a push of
 * ours held downstream), and from then on the stream's output is dropped.
 * Its FLUSH_STOP comes through the window behind what the flush forgot
 * (push_stream_released), so nothing taken before the flush follows it,
 * and no thread waits here for the output. */
static void
stream_flush (GstGpuFanIn * self, guint32 stream, bool start)
{
  if (!start)
    return;
  gpufanin::StreamOutputPtr output = find_output (self, stream);
  if (!output)
    return;
  output->flushing = true;
  gst_pad_push_event (output->pad, gst_event_new_flush_start ());
}

void
gst_gpufan_in_listen_stream_flushes (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, bool listen)
{
  if (!listen) {
    session->SetStreamFlushListener (nullptr);
    return;
  }
  /* cleared before we go (PAUSED->READY, finalize) */
  session->SetStreamFlushListener ([self] (uint32_t stream, bool start) {
    stream_flush (self, stream, start);
  });
}

/* Sends what must precede the stream's next frame: its stream-start, the
 * lanes' caps (@caps_event, may be null), its segment, and the events held
 * until there were caps. */
static void
push_stream_sticky (GstGpuFanIn * self, gpufanin::StreamOutput & o,
    GstEvent * caps_event)
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
 * goes before that one (not at the lanes' end, as with one stream). Under
 * output_lock. */
static void
post_stats_before_last_eos (GstGpuFanIn * self)
{
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::FanInPort> session;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    for (auto & kv : priv->stream_outputs)
      if (!kv.second->eos_sent)
        return;
    session = priv->session;
  }
  if (!session || priv->streams_stats_posted)
    return;
  priv->streams_stats_posted = true;
  gst_element_post_message (GST_ELEMENT (self),
      gst_gpufan_stats_message_new (GST_OBJECT (self), *session));
}

/* One of the stream's own events, in its place among its frames. Takes
 * @event. */
static void
push_stream_event (GstGpuFanIn * self, gpufanin::StreamOutput & o,
    GstEvent * event)
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
      push_stream_sticky (self, o, nullptr);
      o.eos_sent = true;
      post_stats_before_last_eos (self);
      gst_pad_push_event (o.pad, event);
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

GstFlowReturn
gst_gpufan_in_push_stream_released (GstGpuFanIn * self,
    gpufan::Released & released, guint64 session_id)
{
  gpufanin::StreamOutputPtr output = find_output (self, released.stream);
  auto * attached
      = dynamic_cast<GstGpuFanStreamEvent *> (released.payload.get ());
  if (output && attached
      && GST_EVENT_TYPE (attached->event) == GST_EVENT_FLUSH_STOP) {
    /* the end of the stream's flush: it starts over (its caps and
     * stream-start stay on the pad) */
    output->Restart ();
    GstEvent * stop = attached->event;
    attached->event = nullptr;
    gst_pad_push_event (output->pad, stop);
    output->flushing = false;
    return GST_FLOW_OK;
  }
  if (!output || output->flushing.load ()) {
    GST_LOG_OBJECT (self, "no output for %s now: dropped",
        gst_gpufan_stream_pad_name (released.stream).c_str ());
    return GST_FLOW_OK;
  }
  gpufanin::StreamOutput & o = *output;
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
    /* the stream's own business: the others go on */
    if (ret == GST_FLOW_NOT_LINKED && !o.warned_not_linked) {
      o.warned_not_linked = true;
      GST_INFO_OBJECT (o.pad, "not linked: the stream's frames are dropped");
    }
    return GST_FLOW_OK;
  }
  GST_ELEMENT_FLOW_ERROR (self, ret);
  return ret;
}

void
gst_gpufan_in_end_streams (GstGpuFanIn * self)
{
  std::vector<gpufanin::StreamOutputPtr> outputs;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
    for (auto & kv : self->priv->stream_outputs)
      outputs.push_back (kv.second);
  }
  for (const gpufanin::StreamOutputPtr & o : outputs) {
    /* one that never carried a stream ends too (with a stream-start of
     * ours), or its downstream would never end */
    if (o->eos_sent)
      continue;
    push_stream_sticky (self, *o, nullptr);
    o->eos_sent = true;
    gst_pad_push_event (o->pad, gst_event_new_eos ());
  }
}

namespace {

/* Several input streams: items of stream k leave out of src_k, those of
 * the single `sink` pad's stream out of src, as in frame mode. */
class StreamsHandler : public gpufanin::ItemHandler {
public:
  const char * Name () const override { return "streams"; }
  int Rank () const override { return 1; }

  GstFlowReturn Arrive (GstGpuFanIn * self, GstPad * pad,
      GstMiniObject * obj) const override
  {
    return gpufanin::frame_handler ().Arrive (self, pad, obj);
  }

  /* a chunk-start all the same (a src_%u requested beside chunk mode) */
  bool HandleEvent (GstGpuFanIn * self, GstPad * pad,
      GstEvent * event) const override
  {
    return gpufanin::frame_handler ().HandleEvent (self, pad, event);
  }

  /* Only once src_%u pads are there: see GstGpuFanInPrivate::streams_out */
  bool OutputFromTask (GstGpuFanIn * self) const override
  {
    return self->priv->streams_out.load ();
  }

  bool PushReleased (GstGpuFanIn * self, gpufan::FanInPort & session,
      gpufan::Released & released, bool * pause) const override
  {
    if (released.stream == gpufan::kMainStream)
      return gpufanin::frame_handler ().PushReleased (self, session, released,
          pause);
    GstFlowReturn ret
        = gst_gpufan_in_push_stream_released (self, released, session.id ());
    if (ret == GST_FLOW_OK)
      return true;
    /* fatal (its error was posted): the output stops */
    session.NoteOutputFailed ();
    {
      std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
      self->priv->output.PushReturnedUnlocked (ret);
    }
    *pause = true;
    return false;
  }
};

} // namespace

const gpufanin::ItemHandler &
gpufanin::streams_handler ()
{
  static const StreamsHandler handler;
  return handler;
}
