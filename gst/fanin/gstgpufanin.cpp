/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-gpufanin
 * @title: gpufanin
 * @see_also: gpufanout, funnel
 *
 * The other end of gpufanout: takes the branches' outputs on request pads
 * `sink_%u` and pushes them out of its single src pad in the order the
 * buffers entered the fan-out. With several streams (gpufanout's `sink_%u`
 * pads), stream k leaves on the request pad `src_k`, in its own order. It pairs with its fan-out through the
 * branches by itself (no name to set).
 *
 * A frame a branch drops does not stall the output: each lane is FIFO, so a
 * later buffer on the same lane, or the marker event gpufanout pushes behind
 * an item that had not come back when its push returned, proves the earlier
 * one gone, and EOS on a lane proves all its outstanding ones gone. A lane
 * that stops answering is waited for at most #GstGpuFanIn:stall-timeout,
 * then it is stalled: it gets no more items while another lane can take
 * them. Nothing is ever output out of order: what comes back too late is
 * dropped. Caps, segment and other events are sent downstream once. One EOS
 * goes out when every sink pad has EOS and everything before it has been
 * output, or at most #GstGpuFanIn:stall-timeout after gpufanout's input
 * ended and every item was accounted for, when a branch swallowed its EOS or
 * stalled (with a warning naming it); the final `gpufan-stats` element
 * message is posted just before it, in the name of the paired gpufanout
 * (its source is the gpufanout, as for every `gpufan-stats` message). The latency it reports includes what reordering
 * adds (the time items spend in the lanes), and it posts a LATENCY message
 * when that grows.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc num-buffers=300 ! \
 *   gpufanout name=f policy=round-robin  gpufanin name=m ! fakesink \
 *   f.src_0 ! identity ! m.sink_0 \
 *   f.src_1 ! valve drop=true ! m.sink_1 \
 *   f.src_2 ! identity ! m.sink_2
 * ]| Lane 1 drops everything, EOS included: after one stall-timeout it is
 * stalled, the other lanes carry the rest, and the stream ends with every
 * frame of lanes 0 and 2, in order, and a warning naming sink_1.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -m videotestsrc num-buffers=3000 ! \
 *   video/x-raw,width=320,height=240 ! \
 *   gpufanout name=f policy=adaptive  gpufanin name=m ! fakesink \
 *   f.src_0 ! identity sleep-time=2000 ! m.sink_0 \
 *   f.src_1 ! identity sleep-time=4000 ! m.sink_1 \
 *   f.src_2 ! identity sleep-time=8000 ! m.sink_2
 * ]| Three lanes of different speed; all 3000 frames reach fakesink in order.
 */
/* This file: the element and its pads, properties, state changes. The rest
 * of gpufanin, by concern: gstgpufanin-pairing.cpp, gstgpufanin-sink.cpp
 * (what comes out of the lanes), gstgpufanin-output.cpp (the reorder
 * window's output and the src pad's task), gstgpufanin-output.h (the one
 * flow result and its waits), gstgpufanin-eos.cpp, gstgpufanin-latency.cpp;
 * the modes' item handlers (gstgpufanin-handler.h): gstgpufanin-frame.cpp,
 * gstgpufanin-chunk.cpp (and -held.cpp, -chunk-streams.cpp: chunks of several
 * streams), gstgpufanin-streams.cpp; shared
 * state and the lock order in gstgpufanin-private.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"
#include "common/gstgpufanstats.h"

GST_DEBUG_CATEGORY (gst_gpufan_in_debug);

enum {
  PROP_0,
  PROP_STALL_TIMEOUT,
  PROP_STATS,
  PROP_OUTPUT_DEVICE,
  PROP_COPY_HELD,
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink_%u",
    GST_PAD_SINK, GST_PAD_REQUEST, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
/* several input streams: stream k leaves on src_k (gstgpufanin-streams.cpp) */
static GstStaticPadTemplate stream_src_template
    = GST_STATIC_PAD_TEMPLATE ("src_%u", GST_PAD_SRC, GST_PAD_REQUEST,
        GST_STATIC_CAPS_ANY);

#define gst_gpufan_in_parent_class parent_class
G_DEFINE_TYPE (GstGpuFanIn, gst_gpufan_in, GST_TYPE_ELEMENT);

GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (gpufanin, "gpufanin", GST_RANK_NONE,
    GST_TYPE_GPUFAN_IN,
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_in_debug, "gpufanin", 0,
        "gpufan fan-in"));

static gboolean
gst_gpufan_in_src_activate_mode (GstPad *, GstObject * parent,
    GstPadMode mode, gboolean active)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);
  GstGpuFanInPrivate * priv = self->priv;

  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;

  if (active) {
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      priv->output.StartUnlocked ();
      gst_gpufan_in_restart_output_unlocked (self);
    }
    return priv->output.StartTask (gst_gpufan_in_src_loop, self);
  }

  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    priv->output.FlushUnlocked ();
  }
  return priv->output.StopTask ();
}

gboolean
gst_gpufan_in_src_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  if (GST_EVENT_TYPE (event) == GST_EVENT_RECONFIGURE)
    GST_GPUFAN_IN (parent)->priv->reconfigure_requested = true;
  /* upstream events go up every branch; the fan-out forwards each once */
  return gst_pad_event_default (pad, parent, event);
}

gboolean
gst_gpufan_in_src_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (parent);

  if (GST_QUERY_TYPE (query) == GST_QUERY_LATENCY)
    return gst_gpufan_in_query_latency (self, query);
  if (gst_gpufan_is_pair_query (query))
    return gst_gpufan_in_cross_pair_query (self, query);
  return gst_pad_query_default (pad, parent, query);
}

void
gst_gpufan_in_use_handler (GstGpuFanIn * self,
    const gpufanin::ItemHandler & handler)
{
  const gpufanin::ItemHandler * current = self->priv->handler.load ();
  do {
    if (current->Rank () >= handler.Rank ())
      return; /* a mode learnt later never undoes one learnt earlier */
  } while (!self->priv->handler.compare_exchange_weak (current, &handler));
  GST_DEBUG_OBJECT (self, "item handler: %s", handler.Name ());
}

/* ------------------------------------------------------------------------ */
/* Request pads */

static GstPad *
gst_gpufan_in_request_new_pad (GstElement * element, GstPadTemplate * templ,
    const gchar * name, const GstCaps *)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (element);
  GstGpuFanInPrivate * priv = self->priv;
  GstPad * pad;

  if (GST_PAD_TEMPLATE_DIRECTION (templ) == GST_PAD_SRC)
    return gst_gpufan_in_stream_request_pad (self, templ, name);

  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    guint index = 0;
    auto taken = [priv] (guint i) {
      for (auto & kv : priv->pads)
        if (kv.second.index == i)
          return true;
      return false;
    };
    if (!gst_gpufan_request_pad_index (element, "sink_", name, taken, &index))
      return nullptr;

    gchar * pad_name = g_strdup_printf ("sink_%u", index);
    pad = gst_pad_new_from_template (templ, pad_name);
    g_free (pad_name);
    PadState state;
    state.index = index;
    priv->pads.emplace (pad, std::move (state));
  }

  gst_gpufan_in_setup_sink_pad (pad);

  if (GST_PAD_IS_ACTIVE (self->srcpad))
    gst_pad_set_active (pad, TRUE);
  gst_element_add_pad (element, pad);
  gst_gpufan_in_lanes_changed (self);
  return pad;
}

static void
gst_gpufan_in_release_pad (GstElement * element, GstPad * pad)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (element);
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::FanInPort> session;
  guint lane = 0;

  if (GST_PAD_DIRECTION (pad) == GST_PAD_SRC) {
    gst_gpufan_in_stream_release_pad (self, pad);
    return;
  }
  gst_pad_set_active (pad, FALSE);
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    auto it = priv->pads.find (pad);
    if (it != priv->pads.end ()) {
      if (it->second.paired) {
        session = it->second.session;
        lane = it->second.lane;
      }
      it->second.ClearSticky ();
      priv->pads.erase (it);
    }
  }
  /* nothing more of that lane can reach us */
  if (session)
    session->UnclaimLane (lane);
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    gst_gpufan_in_wake_output_unlocked (self);
  }
  gst_element_remove_pad (element, pad);
  gst_gpufan_in_lanes_changed (self);
}

/* ------------------------------------------------------------------------ */
/* Element */

static GstStateChangeReturn
gst_gpufan_in_change_state (GstElement * element, GstStateChange transition)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (element);
  GstGpuFanInPrivate * priv = self->priv;

  GstStateChangeReturn ret
      = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE)
    return ret;

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    std::shared_ptr<gpufan::FanInPort> session;
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      session = priv->session;
    }
    /* outside our lock: a listener running takes it */
    if (session)
      gst_gpufan_in_listen_stream_flushes (self, session, false);
    gst_gpufan_in_restart_streams (self);
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    for (auto & kv : priv->pads) {
      kv.second.eos = false;
      kv.second.flushing = false;
      kv.second.ClearSticky ();
      kv.second.chunk.reset (); /* chunk mode's, if any */
      /* paired again at the next start: the fan-out may have changed */
      kv.second.paired = false;
      kv.second.session.reset ();
    }
    priv->session.reset ();
    priv->batches_done = priv->batches_started;
    priv->cond.notify_all ();
    priv->eos_seqnum = GST_SEQNUM_INVALID;
    priv->renegotiating = false;
    gst_clear_event (&priv->out_stream_start);
    gst_clear_caps (&priv->out_caps);
    priv->out_caps_events.Clear ();
    priv->out_segment_events.Clear ();
    priv->out_has_caps_epoch = false;
    priv->out_has_segment_epoch = false;
    gst_gpufan_in_restart_output_unlocked (self);
  }
  return ret;
}

static void
gst_gpufan_in_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (object);
  GstGpuFanInPrivate * priv = self->priv;

  switch (prop_id) {
    case PROP_STALL_TIMEOUT: {
      std::lock_guard<gpufan::Mutex> lk (priv->lock);
      priv->stall_timeout = g_value_get_uint64 (value);
      if (priv->session)
        priv->session->SetStallTimeout ((gint64)priv->stall_timeout.load ());
      /* the task's deadlines follow it */
      gst_gpufan_in_wake_output_unlocked (self);
      break;
    }
    case PROP_OUTPUT_DEVICE:
      priv->output_device = g_value_get_int (value);
      break;
    case PROP_COPY_HELD:
      priv->copy_held = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_gpufan_in_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (object);
  GstGpuFanInPrivate * priv = self->priv;

  switch (prop_id) {
    case PROP_STALL_TIMEOUT:
      g_value_set_uint64 (value, priv->stall_timeout.load ());
      break;
    case PROP_OUTPUT_DEVICE:
      g_value_set_int (value, priv->output_device.load ());
      break;
    case PROP_COPY_HELD:
      g_value_set_enum (value, priv->copy_held.load ());
      break;
    case PROP_STATS: {
      std::shared_ptr<gpufan::FanInPort> session;
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        session = priv->session;
      }
      g_value_take_boxed (value,
          session ? gst_gpufan_stats_to_structure (*session)
                  : gst_structure_new_empty (GST_GPUFAN_STATS_NAME));
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_gpufan_in_finalize (GObject * object)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (object);
  g_clear_object (&self->priv->output_host_allocator);
  if (self->priv->session)
    gst_gpufan_in_listen_stream_flushes (self, self->priv->session, false);
  delete self->priv;
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_gpufan_in_class_init (GstGpuFanInClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->set_property = gst_gpufan_in_set_property;
  gobject_class->get_property = gst_gpufan_in_get_property;
  gobject_class->finalize = gst_gpufan_in_finalize;

  /**
   * GstGpuFanIn:stall-timeout:
   *
   * How long (ns) the output waits for the next buffer in order when its lane
   * does not deliver it. Then the output goes on without it (the buffer is
   * counted as timed-out, and dropped if it comes later) and the lane is
   * stalled: no more items while another lane can take them, until anything
   * comes back from it. Also the longest wait for the lanes' EOS once
   * gpufanout's input ended and every item is accounted for.
   */
  g_object_class_install_property (gobject_class, PROP_STALL_TIMEOUT,
      g_param_spec_uint64 ("stall-timeout", "Stall timeout (ns)",
          "Longest wait in nanoseconds for the next buffer in order before "
          "the output goes on without it and stops feeding its lane; also "
          "the longest wait for a lane's EOS after every item is accounted "
          "for",
          GST_MSECOND, 3600 * GST_SECOND, DEFAULT_STALL_TIMEOUT,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanIn:stats:
   *
   * The paired gpufanout's `gpufan-stats` structure (an empty one before the
   * fan-in is paired).
   */
  g_object_class_install_property (gobject_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "Per-lane statistics of the paired gpufanout (gpufan-stats)",
          GST_TYPE_STRUCTURE,
          (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  /**
   * GstGpuFanIn:output-device:
   *
   * The GPU that frames in CUDA memory (memory:CUDAMemory) leave on, so
   * that downstream sees one GPU: a frame a lane delivers in another GPU's
   * memory is copied to this one, peer to peer where the GPUs have peer
   * access, else through pinned memory of its NUMA node (counted in the
   * statistics' output-gpu-* fields). -1: frames leave in the memory their
   * lane gave them. Frames in system memory are never touched.
   */
  g_object_class_install_property (gobject_class, PROP_OUTPUT_DEVICE,
      g_param_spec_int ("output-device", "Output device",
          "GPU that frames in CUDA memory leave on: another GPU's are copied "
          "to it (-1: as the lanes deliver them)",
          -1, 1023, -1,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanIn:copy-held:
   *
   * Chunk mode: the outputs of a chunk that is not the head of the window
   * wait here until every earlier chunk is out. Held that long, buffers of
   * a branch's bounded pool (a decoder's output surfaces) would stop the
   * branch, and its lane would idle until the head's lane finished. `auto`
   * holds a copy of such a buffer (in memory of the same kind: a CUDA frame
   * stays on its GPU) and lets the branch have its own back; `always`
   * copies every held output (for pools that do not say they are bounded);
   * `never` holds the branch's buffers. Outputs of the head chunk leave as
   * they come and are never copied.
   */
  g_object_class_install_property (gobject_class, PROP_COPY_HELD,
      g_param_spec_enum ("copy-held", "Copy held outputs",
          "Chunk mode: hold copies of the outputs a chunk that is not the "
          "head returns, so that a branch with a bounded pool keeps working "
          "(auto: outputs of bounded pools only)",
          GST_TYPE_GPUFAN_HELD_COPY, GST_GPUFAN_HELD_COPY_AUTO,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_HELD_COPY, (GstPluginAPIFlags)0);

  element_class->request_new_pad
      = GST_DEBUG_FUNCPTR (gst_gpufan_in_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR (gst_gpufan_in_release_pad);
  element_class->change_state = GST_DEBUG_FUNCPTR (gst_gpufan_in_change_state);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_add_static_pad_template (element_class,
      &stream_src_template);

  gst_element_class_set_static_metadata (element_class, "GPU fan-in", "Generic",
      "Merges the lanes of a gpufanout back into one stream, in input order "
      "(src), or into each of its streams (src_%u)",
      "gst-gpufan developers");
  gst_element_class_add_static_metadata (element_class,
      GST_ELEMENT_METADATA_DOC_URI, GST_GPUFAN_DOCS_URL "#gpufanin");
}

static void
gst_gpufan_in_init (GstGpuFanIn * self)
{
  self->priv = new GstGpuFanInPrivate ();
  gst_segment_init (&self->priv->out_segment, GST_FORMAT_UNDEFINED);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  self->priv->output.SetPad (self->srcpad);
  gst_pad_set_activatemode_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_src_activate_mode));
  gst_pad_set_event_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_src_event));
  gst_pad_set_query_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_in_src_query));
  GST_PAD_SET_PROXY_CAPS (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
}
