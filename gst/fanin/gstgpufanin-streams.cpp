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
  gpufanin::StreamOutput * output_ptr;
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
    output->element = self;
    output->pad = GST_PAD (gst_object_ref (pad));
    output->index = index;
    output->stream = gst_gpufan_stream_of_index (index);
    priv->stream_outputs[gst_gpufan_stream_of_index (index)] = output;
    output_ptr = output.get ();
  }
  gst_pad_set_event_function (pad, GST_DEBUG_FUNCPTR (stream_src_event));
  gst_pad_set_query_function (pad, GST_DEBUG_FUNCPTR (stream_src_query));
  gst_pad_set_activatemode_function_full (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_stream_output_activate), output_ptr,
      nullptr);
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
  /* unblocks a push of the stream's task held downstream */
  gst_pad_push_event (output->pad, gst_event_new_flush_start ());
  gst_gpufan_in_stream_output_flush (*output);
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

void
gst_gpufan_in_push_stream_released (GstGpuFanIn * self,
    gpufan::Released & released)
{
  gpufanin::StreamOutputPtr output;
  std::shared_ptr<gpufan::FanInPort> session;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lock);
    auto it = self->priv->stream_outputs.find (released.stream);
    if (it != self->priv->stream_outputs.end ())
      output = it->second;
    session = self->priv->session;
  }
  gpufanin::QueuedRelease item (std::move (released), session);
  if (!output) {
    GST_LOG_OBJECT (self, "no output for %s now: dropped",
        gst_gpufan_stream_pad_name (item.released ().stream).c_str ());
    return;
  }
  gst_gpufan_in_stream_output_enqueue (*output, std::move (item));
}

void
gst_gpufan_in_end_streams_unlocked (GstGpuFanIn * self)
{
  /* gst_gpufan_in_finish_stream posted the statistics just before */
  if (!self->priv->stream_outputs.empty ())
    self->priv->streams_stats_posted = true;
  /* one that never carried a stream ends too (with a stream-start of
   * ours), or its downstream would never end; after what its queue holds
   * (under the lock: before any item of a stream that starts again) */
  for (auto & kv : self->priv->stream_outputs)
    gst_gpufan_in_stream_output_enqueue (*kv.second,
        gpufanin::QueuedRelease::End ());
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
    /* to its stream's task: never waits for downstream */
    gst_gpufan_in_push_stream_released (self, released);
    return true;
  }
};

} // namespace

const gpufanin::ItemHandler &
gpufanin::streams_handler ()
{
  static const StreamsHandler handler;
  return handler;
}
