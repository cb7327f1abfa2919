/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's src pads: one per lane. Their pad functions keep the lane
 * in step with activation and linking, and answer what branches ask
 * upstream (the pairing query, a CUDA context, upstream events and
 * queries). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include "common/gstgpufancudacontext.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

G_DEFINE_TYPE (GstGpuFanOutPad, gst_gpufan_out_pad, GST_TYPE_PAD);

static GstGpuFanOut *
pad_get_element (GstPad * pad)
{
  GstObject * parent = gst_object_get_parent (GST_OBJECT (pad));
  return parent ? GST_GPUFAN_OUT (parent) : nullptr;
}

static void
gst_gpufan_out_pad_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstGpuFanOutPad * pad = GST_GPUFAN_OUT_PAD (object);

  switch (prop_id) {
    case PROP_PAD_WEIGHT: {
      gdouble weight = g_value_get_double (value);
      GST_OBJECT_LOCK (pad);
      pad->weight = weight;
      GST_OBJECT_UNLOCK (pad);
      if (GstGpuFanOut * self = pad_get_element (GST_PAD (pad))) {
        self->priv->session->SetLaneWeight (pad->lane, weight);
        gst_object_unref (self);
      }
      break;
    }
    case PROP_PAD_DEVICE:
      GST_OBJECT_LOCK (pad);
      pad->device = g_value_get_int (value);
      GST_OBJECT_UNLOCK (pad);
      if (GstGpuFanOut * self = pad_get_element (GST_PAD (pad))) {
        unplace_lane (self, pad->lane);
        gst_object_unref (self);
      }
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_gpufan_out_pad_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstGpuFanOutPad * pad = GST_GPUFAN_OUT_PAD (object);

  switch (prop_id) {
    case PROP_PAD_WEIGHT:
      GST_OBJECT_LOCK (pad);
      g_value_set_double (value, pad->weight);
      GST_OBJECT_UNLOCK (pad);
      break;
    case PROP_PAD_LANE:
      g_value_set_uint (value, pad->lane);
      break;
    case PROP_PAD_DEVICE:
      GST_OBJECT_LOCK (pad);
      g_value_set_int (value, pad->device);
      GST_OBJECT_UNLOCK (pad);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_gpufan_out_pad_finalize (GObject * object)
{
  GstGpuFanOutPad * pad = GST_GPUFAN_OUT_PAD (object);
  gst_clear_object (&pad->task_pool);
  G_OBJECT_CLASS (gst_gpufan_out_pad_parent_class)->finalize (object);
}

static void
gst_gpufan_out_pad_class_init (GstGpuFanOutPadClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->set_property = gst_gpufan_out_pad_set_property;
  gobject_class->get_property = gst_gpufan_out_pad_get_property;
  gobject_class->finalize = gst_gpufan_out_pad_finalize;

  /**
   * GstGpuFanOutPad:weight:
   *
   * Share of the buffers this lane gets under the `weighted` policy, relative
   * to the other lanes' weights. 0 takes the lane out of `weighted`
   * scheduling.
   */
  g_object_class_install_property (gobject_class, PROP_PAD_WEIGHT,
      g_param_spec_double ("weight", "Weight",
          "Relative share of buffers for this lane under policy=weighted "
          "(0 excludes the lane)",
          0.0, 1000.0, DEFAULT_WEIGHT,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOutPad:lane:
   *
   * The lane id of this pad (its index: `src_3` is lane 3), as used in the
   * statistics.
   */
  g_object_class_install_property (gobject_class, PROP_PAD_LANE,
      g_param_spec_uint ("lane", "Lane", "Lane id of this pad (its index)", 0,
          G_MAXUINT, 0,
          (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  /**
   * GstGpuFanOutPad:device:
   *
   * The CUDA device (GPU ordinal) this lane runs on, overriding the
   * element's #GstGpuFanOut:devices for this lane. -1 follows
   * #GstGpuFanOut:devices. The placement hints still apply: a GPU that fails
   * them is an error, never silently replaced.
   */
  g_object_class_install_property (gobject_class, PROP_PAD_DEVICE,
      g_param_spec_int ("device", "Device",
          "GPU ordinal for this lane (-1 = as the element's devices property "
          "says)",
          -1, G_MAXINT, DEFAULT_PAD_DEVICE,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));
}

static void
gst_gpufan_out_pad_init (GstGpuFanOutPad * pad)
{
  pad->weight = DEFAULT_WEIGHT;
  pad->device = DEFAULT_PAD_DEVICE;
}

/* Pad functions use the pad's back pointer, not @parent: a lane is activated
 * before its pad is added to the element. */
static gboolean
gst_gpufan_out_src_activate_mode (GstPad * pad, GstObject *, GstPadMode mode,
    gboolean active)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT_PAD (pad)->fanout;

  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;

  LanePtr lane = find_lane (self, GST_GPUFAN_OUT_PAD (pad)->lane);
  if (!lane)
    return !active;

  if (active) {
    /* A lane added while streaming gets the current sticky events before it
     * can be picked for its first buffer. (The pad is already out of flushing
     * here, so storing works.) */
    /* A pad activated before it is added (a lane requested while
     * streaming) has no parent to announce its task through, so the task
     * would miss the lane's worker-thread pool: request_new_pad starts it
     * once the pad is added. Until then items wait in the queue. */
    return lane_activate (self, lane, GST_OBJECT_PARENT (pad) != nullptr);
  }

  lane_stop (self, lane, LaneState::kInactive);
  return gst_pad_stop_task (pad);
}

static GstPadLinkReturn
gst_gpufan_out_src_link (GstPad * pad, GstObject *, GstPad * peer)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT_PAD (pad)->fanout;
  if (LanePtr lane = find_lane (self, GST_GPUFAN_OUT_PAD (pad)->lane)) {
    request_probe (self, lane);
    lane_set_linked (self, lane, true);
    /* a lane linked while streaming (placed already): what is linked of
     * its branch is bound now, before it starts, where that can still be */
    bind_lane_branch (self, lane, peer);
  }
  return GST_PAD_LINK_OK;
}

static void
gst_gpufan_out_src_unlink (GstPad * pad, GstObject *)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT_PAD (pad)->fanout;
  if (LanePtr lane = find_lane (self, GST_GPUFAN_OUT_PAD (pad)->lane)) {
    request_probe (self, lane);
    lane_set_linked (self, lane, false);
  }
}

static gboolean
gst_gpufan_out_src_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);

  if (gst_gpufan_is_pair_query (query)) {
    guint depth = gst_gpufan_pair_query_get_depth (query);
    if (depth > 0) {
      /* for a pair around ours: leave our pair and go on upstream */
      gst_gpufan_pair_query_set_depth (query, depth - 1);
      return gst_pad_peer_query (self->sinkpad, query);
    }
    /* a gpufanin asks upstream which lane feeds it */
    gst_gpufan_pair_query_set_session (query, self->priv->session->fanin_port (),
        GST_GPUFAN_OUT_PAD (pad)->lane);
    gst_gpufan_pair_query_set_fanout (query, GST_ELEMENT (self));
    return TRUE;
  }
  if (gst_gpufan_is_cuda_context_query (query))
    return answer_cuda_context_query (self, pad, query);
  /* From gpufanin's src_k (several streams): sink_k's upstream answers. */
  if (guint32 stream = gst_gpufan_query_take_stream (query))
    return forward_upstream_query (self, query, stream);
  return gst_pad_query_default (pad, parent, query);
}

static gboolean
seen_upstream_event (GstGpuFanOut * self, guint32 seqnum)
{
  std::lock_guard<gpufan::Mutex> lk (self->priv->upstream_lock);
  return self->priv->upstream_seqnums.Seen (seqnum);
}

static gboolean
gst_gpufan_out_src_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);

  /* From gpufanin's src_k (several streams): for sink_k's upstream alone.
   * A pipeline's seek comes from every src_k with one seqnum: once per
   * stream. */
  guint stream = 0;
  const GstStructure * s = gst_event_get_structure (event);
  if (s)
    gst_structure_get_uint (s, GST_GPUFAN_EVENT_STREAM_FIELD, &stream);

  /* A seek (or any upstream event) that gpufanin sent up every lane goes
   * upstream once. */
  if (seen_upstream_event (self,
          gst_event_get_seqnum (event) ^ (stream * 0x9E3779B1u))) {
    GST_DEBUG_OBJECT (pad, "dropping duplicate %" GST_PTR_FORMAT, event);
    gst_event_unref (event);
    return TRUE;
  }
  return forward_upstream_event (self, pad, event, stream);
}

void
fanout::install_src_pad_functions (GstPad * pad)
{
  gst_pad_set_activatemode_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_src_activate_mode));
  gst_pad_set_query_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_src_query));
  gst_pad_set_event_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_src_event));
  gst_pad_set_link_function (pad, GST_DEBUG_FUNCPTR (gst_gpufan_out_src_link));
  gst_pad_set_unlink_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_src_unlink));
  GST_PAD_SET_PROXY_CAPS (pad);
}
