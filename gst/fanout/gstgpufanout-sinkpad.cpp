/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's sink_%u pads (several input streams, see
 * gstgpufanout-streams.cpp): the pad class, its properties, and the
 * dispatcher it owns (frame dispatch here, chunks in
 * gstgpufanout-chunk-streams.cpp), chosen for each run's mode. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-dispatcher.h"

#include <vector>

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

G_DEFINE_TYPE (GstGpuFanOutSinkPad, gst_gpufan_out_sink_pad, GST_TYPE_PAD);

guint32
fanout::stream_of (GstGpuFanOutSinkPad * pad)
{
  return gst_gpufan_stream_of_index (pad->index);
}

static void
gst_gpufan_out_sink_pad_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstGpuFanOutSinkPad * pad = GST_GPUFAN_OUT_SINK_PAD (object);
  GST_OBJECT_LOCK (pad);
  switch (prop_id) {
    case PROP_SINK_PAD_WEIGHT:
      pad->weight = g_value_get_double (value);
      break;
    case PROP_SINK_PAD_MAX_IN_FLIGHT:
      pad->max_in_flight = g_value_get_uint (value);
      break;
    case PROP_SINK_PAD_LEAKY:
      pad->leaky = g_value_get_boolean (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  const gdouble weight = pad->weight;
  const guint max_in_flight = pad->max_in_flight;
  GST_OBJECT_UNLOCK (pad);
  /* a pad made by the element (not before it set fanout) */
  if (!pad->fanout)
    return;
  gpufan::FanOutPort & session = *pad->fanout->priv->session;
  if (prop_id == PROP_SINK_PAD_WEIGHT)
    session.SetStreamWeight (stream_of (pad), weight);
  else if (prop_id == PROP_SINK_PAD_MAX_IN_FLIGHT)
    session.SetStreamMaxInFlight (stream_of (pad), max_in_flight);
}

static void
gst_gpufan_out_sink_pad_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstGpuFanOutSinkPad * pad = GST_GPUFAN_OUT_SINK_PAD (object);
  GST_OBJECT_LOCK (pad);
  switch (prop_id) {
    case PROP_SINK_PAD_WEIGHT:
      g_value_set_double (value, pad->weight);
      break;
    case PROP_SINK_PAD_MAX_IN_FLIGHT:
      g_value_set_uint (value, pad->max_in_flight);
      break;
    case PROP_SINK_PAD_LEAKY:
      g_value_set_boolean (value, pad->leaky);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (pad);
}

static void
gst_gpufan_out_sink_pad_finalize (GObject * object)
{
  delete GST_GPUFAN_OUT_SINK_PAD (object)->dispatcher;
  G_OBJECT_CLASS (gst_gpufan_out_sink_pad_parent_class)->finalize (object);
}

static void
gst_gpufan_out_sink_pad_class_init (GstGpuFanOutSinkPadClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  gobject_class->finalize = gst_gpufan_out_sink_pad_finalize;
  gobject_class->set_property = gst_gpufan_out_sink_pad_set_property;
  gobject_class->get_property = gst_gpufan_out_sink_pad_get_property;

  /**
   * GstGpuFanOutSinkPad:weight:
   *
   * The stream's share of the lanes while they are saturated: streams that
   * wait are admitted in fair order (start-time fair queueing), a stream of
   * weight 2 getting twice the frames of a stream of weight 1. A stream that
   * was idle joins level with the others: its frames do not queue behind
   * another stream's backlog. 0 (the minimum of a lane's weight too): a
   * background stream, admitted only while no stream of weight above 0
   * waits.
   */
  g_object_class_install_property (gobject_class, PROP_SINK_PAD_WEIGHT,
      g_param_spec_double ("weight", "Weight",
          "The stream's share of the lanes while they are saturated "
          "(fair queueing over the streams that wait; 0: only while no "
          "stream of weight above 0 waits)",
          0.0, 1000.0, 1.0,
          (GParamFlags)(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING
              | G_PARAM_STATIC_STRINGS)));
  /**
   * GstGpuFanOutSinkPad:max-in-flight:
   *
   * At most this many of the stream's frames in flight (queued for a lane,
   * in a branch, waiting in gpufanin to leave in order, or waiting to leave
   * its src_k); 0: the element's max-in-flight bounds those in the lanes
   * and the window, and those waiting to leave src_k on their own. The
   * element's range (at most 65536).
   */
  g_object_class_install_property (gobject_class, PROP_SINK_PAD_MAX_IN_FLIGHT,
      g_param_spec_uint ("max-in-flight", "Max in flight",
          "At most this many of the stream's frames in flight, those waiting "
          "to leave gpufanin's src_k included (0: the element's "
          "max-in-flight bounds them)",
          0, 65536, 0,
          (GParamFlags)(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING
              | G_PARAM_STATIC_STRINGS)));
  /**
   * GstGpuFanOutSinkPad:leaky:
   *
   * For live sources: a frame that cannot be given to a lane within its
   * duration (40 ms when it has none) is dropped instead of holding the
   * source back, so that the stream keeps up with its clock when the lanes
   * are saturated. Counted in the statistics (`leaky-dropped`).
   */
  g_object_class_install_property (gobject_class, PROP_SINK_PAD_LEAKY,
      g_param_spec_boolean ("leaky", "Leaky",
          "Drop a frame that cannot be given to a lane within its duration "
          "(40 ms without one) instead of holding the source back",
          FALSE,
          (GParamFlags)(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING
              | G_PARAM_STATIC_STRINGS)));
}

static void
gst_gpufan_out_sink_pad_init (GstGpuFanOutSinkPad * pad)
{
  pad->weight = 1.0;
  pad->max_in_flight = 0;
  pad->leaky = FALSE;
  pad->dispatcher = nullptr;
}

namespace {

/* A sink_%u pad's frames: frame dispatch, but the streaming thread's state
 * (combined result, probes) is shared by the streams' threads under
 * streams_lock, and each lane's queue is filled in the order the Session
 * gave (lane_enqueue_in_turn), whichever stream's thread comes first. */
class StreamDispatcher final : public StreamTurns<FrameDispatcher> {
public:
  StreamDispatcher (GstGpuFanOut * self, guint32 stream)
      : StreamTurns (stream, self)
  {
  }

protected:
  gboolean Enqueue (const LanePtr & lane, QueuedItem && item,
      const gpufan::Dispatch & d) override
  {
    return lane_enqueue_in_turn (lane, std::move (item), d.lane_order);
  }
};

} // namespace

std::unique_ptr<Dispatcher>
fanout::make_stream_dispatcher (GstGpuFanOut * self, GstPad * pad,
    guint32 stream)
{
  if (chunk_mode_on (self))
    return make_stream_chunk_dispatcher (self, pad, stream);
  return std::make_unique<StreamDispatcher> (self, stream);
}

/* @self's sink_%u pads, reffed. */
static std::vector<GstPad *>
stream_pads (GstGpuFanOut * self)
{
  std::vector<GstPad *> pads;
  GST_OBJECT_LOCK (self);
  for (GList * l = GST_ELEMENT (self)->sinkpads; l; l = l->next)
    if (GST_IS_GPUFAN_OUT_SINK_PAD (l->data))
      pads.push_back (GST_PAD (gst_object_ref (l->data)));
  GST_OBJECT_UNLOCK (self);
  return pads;
}

void
fanout::streams_forget_chunks (GstGpuFanOut * self)
{
  for (GstPad * pad : stream_pads (self)) {
    GST_GPUFAN_OUT_SINK_PAD (pad)->dispatcher->Forget ();
    gst_object_unref (pad);
  }
}

void
fanout::streams_choose_dispatchers (GstGpuFanOut * self)
{
  /* no buffer flows (READY->PAUSED): each sink_%u pad gets the way of the
   * mode this run has */
  for (GstPad * pad : stream_pads (self)) {
    GstGpuFanOutSinkPad * spad = GST_GPUFAN_OUT_SINK_PAD (pad);
    delete spad->dispatcher;
    spad->dispatcher
        = make_stream_dispatcher (self, pad, stream_of (spad)).release ();
    gst_object_unref (pad);
  }
}
