/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Several input streams: gpufanout's sink_%u request pads. Every stream's
 * frames share the same lanes (one branch instance per lane, whatever the
 * number of streams); gpufanin's src_%u pad of the same index puts each
 * stream out in its own order.
 *
 * What the lanes' branches see: one stream-start, the caps every stream
 * shares (streams whose caps differ are an error naming them), the first
 * stream's segment, and EOS once every stream has ended (a stream that
 * starts after that starts them again: restart_lanes_locked). Each stream's own
 * serialized events (stream-start, segment, tags, EOS...) bypass the lanes:
 * they go through the Session's window (Session::AttachStreamEvent) and
 * leave on src_<index> after every frame of the stream that came before
 * them. A stream's flush goes to its src pad alone (the Session's stream
 * flush listener, set by gpufanin). In chunk mode each chunk brings its
 * stream's caps and segment to its lane instead (streams may differ in
 * caps): gstgpufanout-chunk-streams.cpp. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-dispatcher.h"

#include <string>
#include <vector>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

/* A leaky stream's frame without a duration waits at most this long. */
#define LEAKY_DEFAULT_WAIT (40 * GST_MSECOND)

static StreamInput *
find_input_unlocked (GstGpuFanOutPrivate * priv, GstGpuFanOutSinkPad * pad)
{
  auto it = priv->inputs.find (pad->index);
  return it == priv->inputs.end () ? nullptr : it->second.get ();
}

gboolean
fanout::main_input_allowed (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (G_LIKELY (priv->main_input_used.load (std::memory_order_relaxed)))
    return TRUE;
  if (priv->stream_inputs_used.load ()) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Data on the sink pad while sink_%%u pads carry streams"),
        ("use either the sink pad (one stream) or sink_%%u pads (several "
         "streams), not both"));
    return FALSE;
  }
  priv->main_input_used = true;
  return TRUE;
}

static void restart_lanes_locked (GstGpuFanOut * self);

/* FALSE (a flow to return in *@ret, an error posted) when data on a
 * sink_%u pad cannot go into the lanes. */
static gboolean
stream_input_allowed (GstGpuFanOut * self, GstFlowReturn * ret = nullptr)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (ret)
    *ret = GST_FLOW_ERROR;
  if (G_UNLIKELY (priv->lanes_ended.load ())) {
    /* data after every stream had ended, without a new stream-start (a
     * flushing seek's): the lanes start again */
    std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
    restart_lanes_locked (self);
  }
  if (G_LIKELY (priv->stream_inputs_used.load (std::memory_order_relaxed)))
    return TRUE;
  if (priv->main_input_used.load ()) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Data on a sink_%%u pad while the sink pad carries a stream"),
        ("use either the sink pad (one stream) or sink_%%u pads (several "
         "streams), not both"));
    return FALSE;
  }
  priv->stream_inputs_used = true;
  return TRUE;
}

/* Every stream ended (with streams_lock held): the lanes end too, so that
 * their branches give back what they hold, and gpufanin can finish. */
static void
maybe_end_lanes_locked (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (priv->lanes_ended || priv->inputs.empty ())
    return;
  for (const auto & kv : priv->inputs)
    if (!kv.second->ended)
      return;
  GST_DEBUG_OBJECT (self, "every stream ended: EOS into the lanes");
  priv->lanes_ended = true;
  priv->session->EndInput ();
  enqueue_event_on_all_lanes_positioned (self, gst_event_new_eos ());
}

/* A sticky event for the lanes (with streams_lock held): into every lane
 * at its place, and kept on the single sink pad, which no stream uses, so
 * that a lane added or restarted later gets it first as with one stream
 * (copy_sticky_events). Takes @event. */
static void
send_to_lanes_locked (GstGpuFanOut * self, GstEvent * event)
{
  gst_pad_store_sticky_event (self->sinkpad, event);
  enqueue_event_on_all_lanes_positioned (self, event);
}

/* @stream's event leaves on gpufanin's src pad of the stream, after the
 * stream's frames dispatched so far. Takes @event. */
static void
attach_to_stream (GstGpuFanOut * self, guint32 stream, GstEvent * event)
{
  self->priv->session->AttachStreamEvent (stream,
      std::make_unique<GstGpuFanStreamEvent> (event));
}

static std::string
caps_text (GstCaps * caps)
{
  gchar * text = gst_caps_to_string (caps);
  std::string out = text;
  g_free (text);
  return out;
}

/* @input's new caps (with streams_lock held): the lanes take one caps for
 * every stream. Either they get the new caps (the first, or every other
 * stream has these caps too) or it is an error naming the streams. */
static gboolean
stream_caps_locked (GstGpuFanOut * self, StreamInput * input, GstCaps * caps)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (chunk_mode_on (self)) {
    /* each chunk brings its stream's caps to its lane: streams may differ */
    gst_caps_replace (&input->caps, caps);
    priv->host_memory_caps = caps_in_host_memory (caps);
    return TRUE;
  }
  if (priv->lanes_caps && gst_caps_is_equal (caps, priv->lanes_caps)) {
    gst_caps_replace (&input->caps, caps);
    return TRUE;
  }

  std::string differing;
  StreamInput * other_example = nullptr;
  for (const auto & kv : priv->inputs) {
    StreamInput * other = kv.second.get ();
    if (other == input || other->ended || !other->caps
        || gst_caps_is_equal (other->caps, caps))
      continue;
    differing += (differing.empty () ? "" : ", ") + std::string ("sink_")
        + std::to_string (other->index);
    other_example = other;
  }
  if (other_example) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("The streams' caps differ: sink_%u has other caps than %s; the "
         "lanes' branches take one caps for all streams",
            input->index, differing.c_str ()),
        ("sink_%u: %s; sink_%u: %s. Make the streams' caps equal upstream "
         "(e.g. videoconvert ! videoscale ! capsfilter on each source)",
            input->index, caps_text (caps).c_str (), other_example->index,
            caps_text (other_example->caps).c_str ()));
    return FALSE;
  }
  /* new caps for the lanes: the only stream with caps, or all agree */
  gst_caps_replace (&input->caps, caps);
  gst_caps_replace (&priv->lanes_caps, caps);
  priv->caps_epoch++;
  priv->host_memory_caps = caps_in_host_memory (caps);
  send_to_lanes_locked (self, gst_event_new_caps (caps));
  return TRUE;
}

/* The lanes' own stream-start, once per start (with streams_lock held). */
static void
start_lanes_locked (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (priv->lanes_stream_started)
    return;
  priv->lanes_stream_started = true;
  gchar * id = g_strdup_printf ("%s/lanes", GST_OBJECT_NAME (self));
  GstEvent * start = gst_event_new_stream_start (id);
  g_free (id);
  gst_event_set_group_id (start, gst_util_group_id_next ());
  for (const LanePtr & lane : snapshot_lanes (self))
    request_probe (self, lane);
  send_to_lanes_locked (self, start);
}

/* A flush of @stream: its items still waiting in the lanes' queues never
 * go into a branch (they would only come back late), and the Session
 * forgets them (their window slots drop, in flight goes down as they
 * leave). Other streams' items keep their places. */
static void
lanes_withdraw_stream (GstGpuFanOut * self, guint32 stream)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::vector<QueuedItem> taken;
    std::vector<guint64> chunks;
    {
      std::lock_guard<gpufan::Mutex> lk (lane->lock);
      chunk_withdraw_stream_unlocked (lane, stream, &taken, &chunks);
      auto & queue = lane->queue;
      for (auto it = queue.begin (); it != queue.end ();) {
        const bool scheduled = it->kind == ItemKind::kBuffer
            || it->kind == ItemKind::kScheduledEvent;
        if (scheduled && !it->replayed && it->stream == stream) {
          taken.push_back (std::move (*it));
          it = queue.erase (it);
        } else {
          ++it;
        }
      }
    }
    for (const QueuedItem & item : taken)
      if (item.kind == ItemKind::kBuffer
          || item.kind == ItemKind::kScheduledEvent)
        self->priv->session->WithdrawItem (lane->id, item.seq);
    for (guint64 seq : chunks)
      self->priv->session->WithdrawItem (lane->id, seq);
    if (!taken.empty ())
      GST_DEBUG_OBJECT (lane->pad, "flush of stream %u: %zu queued items "
          "withdrawn", stream, taken.size ());
  }
}

/* A stream starts (or flushes, or sends data) after every stream had
 * ended and the lanes with them (with streams_lock held): the lanes start
 * again, with a new stream-start, the caps and the segment they had, and
 * the Session's input goes on. */
static void
restart_lanes_locked (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (!priv->lanes_ended)
    return;
  GST_DEBUG_OBJECT (self, "a stream after every stream ended: the lanes "
      "start again");
  priv->lanes_ended = false;
  priv->lanes_stream_started = false;
  restart_input_after_eos (self);
  start_lanes_locked (self);
  if (priv->lanes_caps)
    send_to_lanes_locked (self, gst_event_new_caps (priv->lanes_caps));
  if (GstEvent * segment = gst_pad_get_sticky_event (self->sinkpad,
          GST_EVENT_SEGMENT, 0))
    send_to_lanes_locked (self, segment);
}

static gboolean
stream_sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);
  GstGpuFanOutPrivate * priv = self->priv;
  GstGpuFanOutSinkPad * spad = GST_GPUFAN_OUT_SINK_PAD (pad);
  const guint32 stream = stream_of (spad);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START:
      /* gpufanin's src pad of the stream gets it (the Session's listener) */
      priv->session->FlushStream (stream, true);
      lanes_withdraw_stream (self, stream);
      gst_event_unref (event);
      return TRUE;
    case GST_EVENT_FLUSH_STOP: {
      {
        std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
        if (StreamInput * input = find_input_unlocked (priv, spad))
          input->ended = false;
        /* a flushing seek after every stream ended */
        restart_lanes_locked (self);
      }
      /* what its chain function queued after FLUSH_START (it has returned
       * now: FLUSH_STOP comes on its thread); chunk mode: its open chunk
       * is closed, and withdrawn if it has not begun */
      spad->dispatcher->Cut ();
      lanes_withdraw_stream (self, stream);
      /* the stream's items in the window are forgotten; the FLUSH_STOP
       * leaves src_k behind them, before anything that comes now (gpufanin's
       * output pushes it: a seeking thread must not wait for an output
       * that another stream's downstream may hold) */
      priv->session->FlushStream (stream, false);
      attach_to_stream (self, stream, event);
      return TRUE;
    }
    case GST_EVENT_GAP: {
      if (!stream_input_allowed (self)) {
        gst_event_unref (event);
        return FALSE;
      }
      GstMiniObject * obj = GST_MINI_OBJECT_CAST (event);
      return spad->dispatcher->Chain (obj, false, item_pts (obj))
          == GST_FLOW_OK;
    }
    case GST_EVENT_CAPS: {
      GstCaps * caps;
      gst_event_parse_caps (event, &caps);
      gboolean res = FALSE;
      /* chunk mode: new caps end the stream's chunk */
      spad->dispatcher->Cut ();
      {
        std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
        if (StreamInput * input = find_input_unlocked (priv, spad))
          res = stream_caps_locked (self, input, caps);
      }
      /* what leaves gpufanin carries the lanes' caps, not this event */
      gst_event_unref (event);
      return res;
    }
    case GST_EVENT_STREAM_START: {
      std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
      if (StreamInput * input = find_input_unlocked (priv, spad))
        input->ended = false;
      restart_lanes_locked (self);
      start_lanes_locked (self);
      attach_to_stream (self, stream, event);
      return TRUE;
    }
    case GST_EVENT_SEGMENT: {
      spad->dispatcher->Cut ();
      std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
      /* (chunk mode: each chunk brings its stream's segment) */
      if (!priv->lanes_segment_sent && !chunk_mode_on (self)) {
        /* the lanes' branches get one segment: the first stream's */
        priv->lanes_segment_sent = true;
        send_to_lanes_locked (self, gst_event_copy (event));
      }
      attach_to_stream (self, stream, event);
      return TRUE;
    }
    case GST_EVENT_EOS: {
      /* its lane drains the stream's last chunk */
      spad->dispatcher->Cut ();
      std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
      StreamInput * input = find_input_unlocked (priv, spad);
      if (input)
        input->ended = true;
      attach_to_stream (self, stream, event);
      maybe_end_lanes_locked (self);
      return TRUE;
    }
    default:
      break;
  }
  if (!GST_EVENT_IS_SERIALIZED (event))
    return gst_pad_event_default (pad, parent, event);
  /* tags, custom events: the stream's own */
  attach_to_stream (self, stream, event);
  return TRUE;
}

static GstFlowReturn
stream_chain (GstPad * pad, GstObject * parent, GstBuffer * buffer)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);
  GstGpuFanOutSinkPad * spad = GST_GPUFAN_OUT_SINK_PAD (pad);
  GstFlowReturn refused;
  if (!stream_input_allowed (self, &refused)) {
    gst_buffer_unref (buffer);
    return refused;
  }
  GST_OBJECT_LOCK (spad);
  const bool leaky = spad->leaky;
  GST_OBJECT_UNLOCK (spad);
  gint64 max_wait = -1;
  if (leaky)
    max_wait = GST_BUFFER_DURATION_IS_VALID (buffer)
        ? (gint64)GST_BUFFER_DURATION (buffer)
        : (gint64)LEAKY_DEFAULT_WAIT;
  GstMiniObject * obj = GST_MINI_OBJECT_CAST (buffer);
  GstFlowReturn ret
      = spad->dispatcher->Chain (obj, true, item_pts (obj), max_wait);
  if (ret == GST_FLOW_CUSTOM_SUCCESS) {
    /* leaky: it waited its duration for a lane */
    self->priv->session->CountLeakyDrop (stream_of (spad));
    GST_LOG_OBJECT (pad, "dropped a frame that waited too long for a lane");
    return GST_FLOW_OK;
  }
  return ret;
}

static GstFlowReturn
stream_chain_list (GstPad * pad, GstObject * parent, GstBufferList * list)
{
  GstFlowReturn ret = GST_FLOW_OK;
  guint n = gst_buffer_list_length (list);
  for (guint i = 0; i < n && ret == GST_FLOW_OK; i++)
    ret = stream_chain (pad, parent,
        gst_buffer_ref (gst_buffer_list_get (list, i)));
  gst_buffer_list_unref (list);
  return ret;
}

static gboolean
stream_sink_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  /* The single sink pad's serialized queries wait until the lanes have
   * taken what came before them; with other streams keeping the lanes busy
   * that may never be. ALLOCATION (sent when a stream starts) is answered
   * at once: every stream has the lanes' caps. */
  if (GST_QUERY_TYPE (query) == GST_QUERY_ALLOCATION)
    return aggregate_allocation (GST_GPUFAN_OUT (parent), query);
  return sink_query (pad, parent, query);
}

static gboolean
stream_activate_mode (GstPad * pad, GstObject *, GstPadMode mode,
    gboolean active)
{
  /* not its parent: a pad requested while playing is activated before it
   * is added */
  GstGpuFanOut * self = GST_GPUFAN_OUT_SINK_PAD (pad)->fanout;
  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;
  /* wakes the stream's chain function blocked in DispatchItem so the pad
   * can stop; nothing to pass on to gpufanin */
  self->priv->session->FlushStream (stream_of (GST_GPUFAN_OUT_SINK_PAD (pad)),
      !active, false);
  return TRUE;
}

gboolean
fanout::forward_upstream_event (GstGpuFanOut * self, GstPad * src,
    GstEvent * event, guint stream)
{
  if (stream == 0)
    return gst_pad_event_default (src, GST_OBJECT (self), event);
  gchar * name = g_strdup_printf ("sink_%u", stream - 1);
  GstPad * sink = gst_element_get_static_pad (GST_ELEMENT (self), name);
  g_free (name);
  if (!sink) {
    gst_event_unref (event);
    return FALSE; /* the stream's pad went away */
  }
  const gboolean res = gst_pad_push_event (sink, event);
  gst_object_unref (sink);
  return res;
}

gboolean
fanout::forward_upstream_query (GstGpuFanOut * self, GstQuery * query,
    guint32 stream)
{
  GstPad * sink = gst_element_get_static_pad (GST_ELEMENT (self),
      gst_gpufan_stream_pad_name (stream).c_str ());
  const gboolean res = sink && gst_pad_peer_query (sink, query);
  if (sink)
    gst_object_unref (sink);
  gst_gpufan_query_set_stream (query, stream);
  return res;
}

GstPad *
fanout::stream_request_pad (GstGpuFanOut * self, GstPadTemplate * templ,
    const gchar * name)
{
  GstGpuFanOutPrivate * priv = self->priv;
  guint index = 0;
  GstPad * pad;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
    auto taken = [priv] (guint i) { return priv->inputs.count (i) > 0; };
    if (!gst_gpufan_request_pad_index (GST_ELEMENT (self), "sink_", name, taken,
            &index))
      return nullptr;
    gchar * pad_name = g_strdup_printf ("sink_%u", index);
    pad = GST_PAD (g_object_new (GST_TYPE_GPUFAN_OUT_SINK_PAD, "name", pad_name,
        "direction", GST_PAD_SINK, "template", templ, nullptr));
    g_free (pad_name);
    GstGpuFanOutSinkPad * spad = GST_GPUFAN_OUT_SINK_PAD (pad);
    spad->fanout = self;
    spad->index = index;
    spad->dispatcher
        = make_stream_dispatcher (self, pad, stream_of (spad)).release ();
    auto input = std::make_unique<StreamInput> ();
    input->index = index;
    input->stream = stream_of (spad);
    priv->inputs[index] = std::move (input);
    priv->session->AddStream (stream_of (spad), 1.0);
  }

  /* the single sink pad's queries (allocation, drain, context...) */
  install_sink_pad_functions (pad);
  gst_pad_set_chain_function (pad, GST_DEBUG_FUNCPTR (stream_chain));
  gst_pad_set_chain_list_function (pad, GST_DEBUG_FUNCPTR (stream_chain_list));
  gst_pad_set_event_function (pad, GST_DEBUG_FUNCPTR (stream_sink_event));
  gst_pad_set_query_function (pad, GST_DEBUG_FUNCPTR (stream_sink_query));
  gst_pad_set_activatemode_function (pad,
      GST_DEBUG_FUNCPTR (stream_activate_mode));

  GST_DEBUG_OBJECT (self, "new stream on sink_%u", index);
  if (GST_PAD_IS_ACTIVE (self->sinkpad))
    gst_pad_set_active (pad, TRUE);
  gst_element_add_pad (GST_ELEMENT (self), pad);
  return pad;
}

void
fanout::stream_release_pad (GstGpuFanOut * self, GstPad * pad)
{
  GstGpuFanOutPrivate * priv = self->priv;
  GstGpuFanOutSinkPad * spad = GST_GPUFAN_OUT_SINK_PAD (pad);
  const guint32 stream = stream_of (spad);

  GST_DEBUG_OBJECT (self, "releasing stream sink_%u", spad->index);
  /* wakes its chain function, then waits for it to return */
  gst_pad_set_active (pad, FALSE);
  /* chunk mode: its open chunk goes whole to its lane, which drains it
   * (the lane would stay filled by it) */
  spad->dispatcher->Cut ();
  {
    std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
    StreamInput * input = find_input_unlocked (priv, spad);
    /* its frames in flight still leave, then its src pad ends */
    if (input && !input->ended && priv->stream_inputs_used.load ())
      attach_to_stream (self, stream, gst_event_new_eos ());
    priv->inputs.erase (spad->index);
    maybe_end_lanes_locked (self);
  }
  priv->session->RemoveStream (stream);
  gst_element_remove_pad (GST_ELEMENT (self), pad);
}

void
fanout::streams_reset (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  streams_forget_chunks (self);
  std::lock_guard<gpufan::Mutex> lk (priv->streams_lock);
  priv->lanes_stream_started = false;
  gst_clear_caps (&priv->lanes_caps);
  priv->lanes_segment_sent = false;
  priv->lanes_ended = false;
  for (auto & kv : priv->inputs) {
    kv.second->ended = false;
    gst_clear_caps (&kv.second->caps);
  }
  priv->main_input_used = false;
  priv->stream_inputs_used = false;
}
