/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sink pad: each buffer (or GAP) goes to the lanes the way the mode's
 * dispatcher (gstgpufanout-dispatcher.h) sends it, frame dispatch's here:
 * the Session gives it a lane and it goes into that lane's queue.
 * Serialized events go into every lane's queue; queries that must not
 * overtake the lanes wait for them. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-dispatcher.h"

#include "common/gstgpufancudacontext.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

gint
fanout::origin_gpu_of (GstGpuFanOut * self, GstMiniObject * obj)
{
  /* caps in system memory (the usual case) cost one load per item */
  if (!GST_IS_BUFFER (obj) || self->priv->host_memory_caps.load ())
    return -1;
  return gst_gpufan_cuda_frame_device (GST_BUFFER_CAST (obj));
}

GstFlowReturn
fanout::prepare_dispatch (GstGpuFanOut * self)
{
  GstFlowReturn ret = combine_lane_results (self);
  if (ret != GST_FLOW_OK)
    return ret;
  return probe_lanes (self) ? GST_FLOW_OK : GST_FLOW_ERROR;
}

GstFlowReturn
Dispatcher::RequestLane (gint64 pts, gpufan::Dispatch * d, LanePtr * lane,
    gint origin_gpu, gint64 max_wait_ns)
{
  GstGpuFanOut * self = self_;
  GstGpuFanOutPrivate * priv = self->priv;
  GstFlowReturn ret;

  for (;;) {
    *d = priv->session->DispatchItem (pts, origin_gpu, Stream (), max_wait_ns);
    if (d->status == gpufan::DispatchStatus::kFlushing)
      return GST_FLOW_FLUSHING;
    if (d->status == gpufan::DispatchStatus::kTimedOut)
      return GST_FLOW_CUSTOM_SUCCESS;
    if (d->status == gpufan::DispatchStatus::kNoLanes) {
      ret = CombineLaneResults ();
      if (ret != GST_FLOW_OK)
        return ret;
      std::string why = priv->session->WhyNoLane ();
      if (!why.empty ()) {
        GST_ELEMENT_ERROR (self, STREAM, FAILED,
            ("No lane can take buffers: %s", why.c_str ()), (nullptr));
        return GST_FLOW_ERROR;
      }
      /* no lane can take it although none failed: lanes being deactivated
       * (PAUSED->READY stops src pads first) mean FLUSHING, not NOT_LINKED */
      return any_lane_inactive (self) ? GST_FLOW_FLUSHING : GST_FLOW_NOT_LINKED;
    }

    if (d->lanes_joining)
      ReprobeJoiningLanes ();
    *lane = find_lane (self, d->lane);
    if (*lane)
      return GST_FLOW_OK;
    /* released meanwhile; RemoveLane dropped the item */
  }
}

GstFlowReturn
FrameDispatcher::Chain (GstMiniObject * obj, bool is_buffer, gint64 pts,
    gint64 max_wait_ns)
{
  GstGpuFanOut * self = self_;
  GstGpuFanOutPrivate * priv = self->priv;

  GstFlowReturn ret = PrepareDispatch ();
  if (ret != GST_FLOW_OK) {
    gst_mini_object_unref (obj);
    return ret;
  }
  const gint origin_gpu = origin_gpu_of (self, obj);
  for (;;) {
    gpufan::Dispatch d;
    LanePtr lane;
    ret = RequestLane (pts, &d, &lane, origin_gpu, max_wait_ns);
    if (ret != GST_FLOW_OK) {
      gst_mini_object_unref (obj);
      return ret;
    }

    /* the lane's worker tags it (tag_item): upstream's thread is the one
     * every item passes */
    QueuedItem item (obj, d.seq,
        is_buffer ? ItemKind::kBuffer : ItemKind::kScheduledEvent);
    item.awaited = d.awaited;
    item.caps_epoch = priv->caps_epoch.load ();
    item.stream = Stream ();
    replay_note_dispatched (self, d, item, pts, Stream ());
    if (!Enqueue (lane, std::move (item), d)) {
      if (replay_took_over (self, d)) {
        gst_mini_object_unref (item.Steal ());
        return GST_FLOW_OK;
      }
      /* the lane is being deactivated or released: try another one */
      priv->session->WithdrawItem (d.lane, d.seq);
      priv->session->SetLaneEligible (d.lane, false);
      obj = item.Steal ();
      if (priv->session->flushing ()) {
        gst_mini_object_unref (obj);
        return GST_FLOW_FLUSHING;
      }
      continue;
    }
    GST_LOG_OBJECT (self, "item %" G_GUINT64_FORMAT " -> lane %u", d.seq,
        d.lane);
    maybe_post_interval_stats (self);
    return GST_FLOW_OK;
  }
}

std::unique_ptr<Dispatcher>
fanout::make_frame_dispatcher (GstGpuFanOut * self)
{
  return std::make_unique<FrameDispatcher> (self);
}

gint64
fanout::item_pts (GstMiniObject * obj)
{
  GstClockTime ts = GST_CLOCK_TIME_NONE;
  if (GST_IS_BUFFER (obj))
    ts = GST_BUFFER_PTS (GST_BUFFER_CAST (obj));
  else
    gst_event_parse_gap (GST_EVENT_CAST (obj), &ts, nullptr);
  return GST_CLOCK_TIME_IS_VALID (ts) ? (gint64)ts : gpufan::kNoTime;
}

static GstFlowReturn
gst_gpufan_out_chain (GstPad *, GstObject * parent, GstBuffer * buffer)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);
  if (!main_input_allowed (self)) {
    gst_buffer_unref (buffer);
    return GST_FLOW_ERROR;
  }
  GstMiniObject * obj = GST_MINI_OBJECT_CAST (buffer);
  return self->priv->dispatcher->Chain (obj, true, item_pts (obj));
}

static GstFlowReturn
gst_gpufan_out_chain_list (GstPad * pad, GstObject * parent,
    GstBufferList * list)
{
  GstFlowReturn ret = GST_FLOW_OK;
  guint n = gst_buffer_list_length (list);
  for (guint i = 0; i < n && ret == GST_FLOW_OK; i++) {
    GstBuffer * buffer = gst_buffer_ref (gst_buffer_list_get (list, i));
    ret = gst_gpufan_out_chain (pad, parent, buffer);
  }
  gst_buffer_list_unref (list);
  return ret;
}

static void
enqueue_event_on_all_lanes (GstGpuFanOut * self, GstEvent * event,
    guint64 position)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    /* a failed lane takes nothing (its worker may be stuck: its queue
     * would only grow) */
    if (lane_failed (lane))
      continue;
    QueuedItem item (GST_MINI_OBJECT_CAST (gst_event_ref (event)), 0,
        ItemKind::kEvent);
    item.position = position;
    lane_enqueue (lane, std::move (item));
  }
  gst_event_unref (event);
}

void
fanout::enqueue_event_on_all_lanes_positioned (GstGpuFanOut * self,
    GstEvent * event)
{
  const guint64 position
      = self->priv->session->MarkEventPosition (gst_event_get_seqnum (event));
  enqueue_event_on_all_lanes (self, event, position);
}

void
fanout::restart_input_after_eos (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  priv->stats_posted = false;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (lane->lock);
    lane->eos_pushed = false;
  }
  priv->session->RestartInput ();
}

/* A flush goes into every lane but one that had failed when it began: that
 * lane takes nothing more, and its branch may be stuck in a push for good
 * (a flush would wait for it); gpufanin's pad for it never starts flushing.
 * A lane that got the FLUSH_START gets the FLUSH_STOP. Takes @event. */
static gboolean
forward_flush (GstGpuFanOut * self, GstEvent * event)
{
  const bool start = GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_START;
  gboolean res = TRUE, any = FALSE;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    bool send;
    {
      std::lock_guard<gpufan::Mutex> lk (lane->lock);
      if (start)
        lane->flush_started = !lane->failed_unlocked ();
      send = lane->flush_started;
      if (!start)
        lane->flush_started = false;
    }
    if (!send)
      continue;
    const gboolean pushed
        = gst_pad_push_event (lane->pad, gst_event_ref (event));
    res = any ? (res || pushed) : pushed;
    any = TRUE;
  }
  gst_event_unref (event);
  return res;
}

static gboolean
gst_gpufan_out_sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);
  GstGpuFanOutPrivate * priv = self->priv;

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START: {
      priv->session->SetFlushing (true);
      std::vector<LanePtr> lanes = snapshot_lanes (self);
      for (const LanePtr & lane : lanes)
        lane_stop (self, lane, LaneState::kFlushing);
      gboolean res = forward_flush (self, event);
      /* the pushes the lanes were blocked in have returned by now (not a
       * failed lane's: it gets no flush, and may be stuck for good) */
      for (const LanePtr & lane : lanes) {
        std::unique_lock<gpufan::Mutex> lk (lane->lock);
        const bool flushed = lane->flush_started;
        lk.unlock ();
        if (flushed)
          gst_pad_pause_task (lane->pad);
      }
      return res;
    }
    case GST_EVENT_FLUSH_STOP: {
      /* serialized: no buffer flows now */
      priv->dispatcher->Forget ();
      priv->session->Reset ();
      replay_forget (self);
      std::vector<LanePtr> lanes = snapshot_lanes (self);
      for (const LanePtr & lane : lanes) {
        lane_reset_result (self, lane, false);
        /* as the Session's lane orders (Reset) */
        std::lock_guard<gpufan::Mutex> lk (lane->lock);
        lane->next_order = 0;
      }
      priv->stats_posted = false;
      gboolean res = forward_flush (self, event);
      priv->session->SetFlushing (false);
      /* only lanes whose pad is still active restart (not during
       * PAUSED->READY) */
      for (const LanePtr & lane : lanes)
        lane_restart (self, lane);
      return res;
    }
    case GST_EVENT_GAP: {
      /* a GAP stands for data: it is scheduled on one lane like a buffer */
      GstMiniObject * obj = GST_MINI_OBJECT_CAST (event);
      return priv->dispatcher->Chain (obj, false, item_pts (obj))
          == GST_FLOW_OK;
    }
    case GST_EVENT_CAPS: {
      /* a chunk is one stream for its branch: new caps end it */
      priv->dispatcher->Cut ();
      priv->caps_epoch++;
      GstCaps * caps;
      gst_event_parse_caps (event, &caps);
      priv->host_memory_caps = caps_in_host_memory (caps);
      break;
    }
    case GST_EVENT_STREAM_START:
      if (priv->session->input_ended ())
        restart_input_after_eos (self);
      for (const LanePtr & lane : snapshot_lanes (self))
        request_probe (self, lane);
      break;
    case GST_EVENT_SEGMENT:
      priv->dispatcher->Cut ();
      priv->segment_epoch++;
      break;
    case GST_EVENT_EOS:
      /* its lane drains the last chunk before the EOS */
      priv->dispatcher->Cut ();
      /* the fan-in need not wait forever for a lane's own EOS (a branch
       * may swallow it) once every item is accounted for */
      priv->session->EndInput ();
      break;
    default:
      break;
  }

  if (!GST_EVENT_IS_SERIALIZED (event))
    return gst_pad_event_default (pad, parent, event);

  /* Serialized events travel in every lane's queue, behind its buffers. */
  enqueue_event_on_all_lanes_positioned (self, event);
  return TRUE;
}

gboolean
fanout::sink_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);

  if (gst_gpufan_is_pair_query (query))
    return forward_pair_query_downstream (self, query);

  if (GST_QUERY_IS_SERIALIZED (query) && !wait_lanes_drained (self))
    return FALSE;

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_ALLOCATION:
      return aggregate_allocation (self, query);
    case GST_QUERY_DRAIN:
      return drain_all_lanes (self, query);
    case GST_QUERY_CONTEXT:
      if (gst_gpufan_is_cuda_context_query (query)
          && answer_upstream_cuda_context_query (self, pad, query))
        return TRUE;
      return gst_pad_query_default (pad, parent, query);
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

static gboolean
gst_gpufan_out_sink_activate_mode (GstPad *, GstObject * parent,
    GstPadMode mode, gboolean active)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);

  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;
  /* wakes a chain function blocked in DispatchItem so the pad can stop */
  self->priv->session->SetFlushing (!active);
  /* or in chunk mode's wait for room in a lane (chunk_enqueue) */
  if (!active) {
    for (const LanePtr & lane : snapshot_lanes (self)) {
      std::lock_guard<gpufan::Mutex> lk (lane->lock);
      lane->cond.notify_all ();
    }
  }
  return TRUE;
}

void
fanout::install_sink_pad_functions (GstPad * pad)
{
  gst_pad_set_chain_function (pad, GST_DEBUG_FUNCPTR (gst_gpufan_out_chain));
  gst_pad_set_chain_list_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_chain_list));
  gst_pad_set_event_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_sink_event));
  gst_pad_set_query_function (pad, GST_DEBUG_FUNCPTR (sink_query));
  gst_pad_set_activatemode_function (pad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_sink_activate_mode));
  GST_PAD_SET_PROXY_CAPS (pad);
}
