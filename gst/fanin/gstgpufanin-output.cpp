/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanin: the output. Batches leave the reorder window in input order and
 * go downstream with the sticky events they need, pushed by whoever holds
 * output_lock: the streaming thread of the lane whose item made them
 * releasable (frame mode, one input stream, not live), or the src pad's
 * task, which also takes what other events release (a drop proven by EOS, a
 * stall timeout, positioned events) and ends the stream
 * (gstgpufanin-eos.cpp). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanin-private.h"

#include "common/gstgpufancaps.h"
#include "common/gstgpufancudacontext.h"
#include "common/gstgpufandevices.h"
#include "common/gstgpufanhostmemory.h"

#include <mutex>
#include <optional>
#include <string>
#include <vector>

/* Something the output's waits look at changed (with lock held): wakes the
 * task and the serialized queries. */
void
gst_gpufan_in_wake_output_unlocked (GstGpuFanIn * self)
{
  self->priv->output.WakeUnlocked ();
}

/* A new start (activation, the end of a flush, a stop): nothing sent (the
 * flow result is the Output's transitions'). */
void
gst_gpufan_in_restart_output_unlocked (GstGpuFanIn * self)
{
  GstGpuFanInPrivate * priv = self->priv;
  priv->out_segment_valid = false;
  priv->out_has_segment_epoch = false;
  priv->forwarded_seqnums.Clear ();
}

static bool
same_stream (GstEvent * a, GstEvent * b)
{
  const gchar *ida = nullptr, *idb = nullptr;
  gst_event_parse_stream_start (a, &ida);
  gst_event_parse_stream_start (b, &idb);
  return g_strcmp0 (ida, idb) == 0;
}

/* The memory @caps' frames are in: "system memory", or its memory:* caps
 * feature (memory:CUDAMemory, ...). */
static std::string
memory_of (const GstCaps * caps)
{
  GstCapsFeatures * features
      = gst_caps_get_size (caps) ? gst_caps_get_features (caps, 0) : nullptr;
  for (guint i = 0; features && !gst_caps_features_is_any (features)
       && i < gst_caps_features_get_size (features);
       i++) {
    const gchar * feature = gst_caps_features_get_nth (features, i);
    if (g_str_has_prefix (feature, "memory:")
        && g_strcmp0 (feature, GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY) != 0)
      return feature; /* meta:* features say nothing of the memory */
  }
  return "system memory";
}

/* Sends the sticky events @item needs before it: the ones that differ from
 * what downstream has (items), or only the missing ones (attachments). */
GstFlowReturn
gst_gpufan_in_push_sticky (GstGpuFanIn * self, FanInItem * item)
{
  GstGpuFanInPrivate * priv = self->priv;

  /* the same event as last time (the usual case) needs no comparing */
  if (item->stream_start
      && (!priv->out_stream_start
          || (!item->is_attachment
              && item->stream_start != priv->out_stream_start
              && !same_stream (item->stream_start, priv->out_stream_start)))) {
    gst_event_replace (&priv->out_stream_start, item->stream_start);
    gst_pad_push_event (self->srcpad, gst_event_ref (item->stream_start));
    priv->out_segment_valid = false;
  }

  if (item->caps && (!priv->out_caps || !item->is_attachment)) {
    GstCaps * caps;
    /* an event with downstream's caps (the usual case): no parsing */
    if (priv->out_caps && priv->out_caps_events.Has (item->caps))
      caps = priv->out_caps;
    else
      gst_event_parse_caps (item->caps, &caps);
    if (!priv->out_caps || !gst_caps_is_equal (caps, priv->out_caps)) {
      if (priv->reconfigure_requested.exchange (false)) {
        priv->renegotiating = true;
        priv->renegotiating_epoch = priv->out_caps_epoch;
      }
      bool same_input = item->has_caps_epoch && priv->out_has_caps_epoch
          && item->caps_epoch == priv->out_caps_epoch;
      bool grace = priv->renegotiating
          && item->caps_epoch <= priv->renegotiating_epoch;
      if (priv->out_caps && same_input && !grace) {
        const std::string memory = memory_of (caps);
        const std::string earlier = memory_of (priv->out_caps);
        if (memory != earlier)
          GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
              ("The lanes deliver frames in different memory (lane %u: %s, "
               "an earlier lane: %s): end every branch in the same memory, "
               "e.g. with cudadownload or cudaupload",
                  item->lane, memory.c_str (), earlier.c_str ()),
              ("lane %u gives %" GST_PTR_FORMAT
               ", an earlier lane gave %" GST_PTR_FORMAT,
                  item->lane, caps, priv->out_caps));
        else
          GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
              ("The lanes produce different caps for the same input"),
              ("lane %u gives %" GST_PTR_FORMAT
               ", an earlier lane gave %" GST_PTR_FORMAT,
                  item->lane, caps, priv->out_caps));
        return GST_FLOW_NOT_NEGOTIATED;
      }
      gst_caps_replace (&priv->out_caps, caps);
      priv->out_caps_events.Clear ();
      if (!gst_pad_push_event (self->srcpad, gst_event_ref (item->caps)))
        GST_DEBUG_OBJECT (self, "downstream refused %" GST_PTR_FORMAT, caps);
    }
    priv->out_caps_events.Add (item->caps);
    if (!item->is_attachment) {
      priv->out_caps_epoch = item->caps_epoch;
      priv->out_has_caps_epoch = item->has_caps_epoch;
      if (priv->renegotiating && item->caps_epoch > priv->renegotiating_epoch)
        priv->renegotiating = false;
    }
  }

  /* an event with downstream's segment: no parsing */
  if (item->segment && (!priv->out_segment_valid || !item->is_attachment)
      && (!priv->out_segment_valid
          || !priv->out_segment_events.Has (item->segment))) {
    const GstSegment * segment;
    gst_event_parse_segment (item->segment, &segment);
    if (!priv->out_segment_valid
        || !gst_segment_is_equal (segment, &priv->out_segment)) {
      gst_segment_copy_into (segment, &priv->out_segment);
      priv->out_segment_events.Clear ();
      priv->out_segment_valid = true;
      gst_pad_push_event (self->srcpad, gst_event_ref (item->segment));
    }
    priv->out_segment_events.Add (item->segment);
  }
  return GST_FLOW_OK;
}

/* output-device N: a frame in CUDA memory of another GPU is copied to GPU N
 * (peer to peer, or through pinned memory of N's NUMA node), so that
 * downstream sees one GPU. Counted in the Session's output-gpu-* fields.
 * Under output_lock. */
void
gst_gpufan_in_move_to_output_device (GstGpuFanIn * self, GstPad * pad,
    GstBuffer ** buffer)
{
  GstGpuFanInPrivate * priv = self->priv;
  const gint device = priv->output_device.load ();
  if (device < 0)
    return; /* not asked for */
  const int from = gst_gpufan_cuda_frame_device (*buffer);
  if (from < 0)
    return; /* not in CUDA memory */
  if (!priv->output_move || priv->output_move->gpu () != device) {
    priv->output_move = std::make_unique<GstGpuFanGpuMove> (device);
    priv->output_move_warned = false;
    gint node = -1;
    for (const gpufan::Device & d : gst_gpufan_device_registry ().devices ())
      if (d.kind == gpufan::DeviceKind::kCuda && d.index == device)
        node = d.numa_node;
    /* the node's pool, as a lane of that GPU would use */
    GstAllocator * allocator = gst_gpufan_host_allocator_get (node,
        GST_GPUFAN_DEFAULT_HOST_POOL_MIB);
    std::swap (priv->output_host_allocator, allocator);
    g_clear_object (&allocator);
  }
  GstCaps * caps = gst_pad_get_current_caps (pad);
  GstGpuFanGpuMove::Outcome outcome;
  priv->output_move->Move (buffer, from, caps, priv->output_host_allocator,
      &outcome);
  if (caps)
    gst_caps_unref (caps);
  std::shared_ptr<gpufan::FanInPort> session;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    session = priv->session;
  }
  if (session)
    session->CountOutputGpuFrame (outcome.path, outcome.bytes, outcome.ns);
  if (!outcome.why_not.empty () && !priv->output_move_warned) {
    /* the user asked for one GPU downstream: say so on the bus, once */
    priv->output_move_warned = true;
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("output-device=%d: %s", device, outcome.why_not.c_str ()),
        ("output-gpu-copies-skipped in the statistics counts such frames"));
  }
}

GstFlowReturn
gst_gpufan_in_push_item (GstGpuFanIn * self, FanInItem * item,
    guint64 session_id)
{
  GstFlowReturn ret = gst_gpufan_in_push_sticky (self, item);
  if (ret != GST_FLOW_OK)
    return ret;

  /* our identification stays inside the pair */
  GstMiniObject * obj = item->obj;
  item->obj = nullptr;
  if (GST_IS_BUFFER (obj)) {
    GstBuffer * buffer = GST_BUFFER_CAST (obj);
    if (gst_buffer_find_gpufan_meta (buffer, session_id)) {
      buffer = gst_buffer_make_writable (buffer);
      gst_buffer_remove_gpufan_meta (buffer, session_id);
    }
    gst_gpufan_in_move_to_output_device (self, self->srcpad, &buffer);
    return gst_pad_push (self->srcpad, buffer);
  }
  GstEvent * event = GST_EVENT_CAST (obj);
  if (GST_EVENT_TYPE (event) == GST_EVENT_GAP)
    event = gst_gpufan_event_clear_item (event);
  gst_pad_push_event (self->srcpad, event);
  return GST_FLOW_OK;
}

/* The output batch taken from the window has gone downstream (or been
 * dropped): wakes serialized queries waiting for it (wait_lane_released).
 * Called with output_lock held: batches_started moves only in this thread.
 * No lock per batch unless a query waits: a waiter counts itself before it
 * reads batches_done, so it sees this store or is seen here. */
static void
mark_batch_done (GstGpuFanInPrivate * priv)
{
  priv->batches_done.store (priv->batches_started);
  if (priv->batch_waiters.load () > 0) {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    priv->cond.notify_all ();
  }
}

/* Puts @arrival into the window without taking anything out; @wake_output:
 * the src task takes what it made releasable. */
static gpufan::Arrival
hand_over (const std::shared_ptr<gpufan::FanInPort> & session,
    PendingArrival * arrival, bool wake_output = false)
{
  if (arrival->marker) {
    session->ProveLane (arrival->lane, *arrival->seq);
    return gpufan::Arrival{};
  }
  return session->Arrive (arrival->lane, arrival->seq, arrival->pts,
      std::move (arrival->payload), wake_output);
}

/* A push downstream returned @ret (not OK) for @item: the output stops as
 * GstQueue's does (downstream's EOS ends it quietly). */
void
gst_gpufan_in_output_failed (GstGpuFanIn * self, gpufan::FanInPort & session,
    GstFlowReturn ret, FanInItem * item, bool * pause)
{
  GstGpuFanInPrivate * priv = self->priv;
  GST_DEBUG_OBJECT (self, "push returned %s", gst_flow_get_name (ret));
  /* before the lanes can see it (the result): their fan-out must not blame
   * their branches */
  if (ret < GST_FLOW_EOS)
    session.NoteOutputFailed ();
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    priv->output.PushReturnedUnlocked (ret);
  }
  if (ret == GST_FLOW_NOT_LINKED || ret < GST_FLOW_EOS) {
    GstCaps * offered = nullptr;
    GstElement * refuser = ret == GST_FLOW_NOT_NEGOTIATED
        ? gst_gpufan_caps_refuser (self->srcpad, &offered)
        : nullptr;
    if (refuser) {
      /* downstream refused the lanes' caps */
      const std::string who = gst_gpufan_element_text (refuser);
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
          ("Downstream of %s did not take the lanes' caps: %s refused %s: "
           "end the branches with a converter (e.g. videoconvert), or put "
           "one after %s",
              GST_OBJECT_NAME (self), who.c_str (),
              gst_gpufan_caps_text (offered).c_str (), GST_OBJECT_NAME (self)),
          ("%s refused %" GST_PTR_FORMAT, who.c_str (), offered));
      gst_object_unref (refuser);
      gst_caps_unref (offered);
    } else if (ret != GST_FLOW_NOT_NEGOTIATED || !item->caps) {
      GST_ELEMENT_FLOW_ERROR (self, ret);
    }
    gst_pad_push_event (self->srcpad, gst_event_new_eos ());
  }
  /* downstream's EOS: the window drains on, our EOS still goes out */
  if (ret != GST_FLOW_EOS)
    *pause = true;
}

/* Takes one batch from the window (after putting @arrival's item into it,
 * under the same Session lock) and pushes it downstream. Called with
 * output_lock held. Returns FALSE when nothing left the window; *generation
 * is the TakeReady's (for WaitOutput). *pause is set when a flow error
 * stopped the output: the caller pauses the task once it released
 * output_lock. */
static bool
output_batch_locked (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, PendingArrival * arrival,
    gpufan::Arrival * arrived, guint64 * generation, bool * pause)
{
  GstGpuFanInPrivate * priv = self->priv;

  bool stopped;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    stopped = priv->output.HaltedUnlocked ();
    if (!stopped)
      ++priv->batches_started;
  }
  if (stopped) {
    /* no output now; a flush resets the window */
    if (arrival)
      *arrived = hand_over (session, arrival);
    *generation = 0;
    return false;
  }
  gpufan::ReadyBatch & batch = priv->out_batch;
  if (!arrival)
    session->TakeReady (&batch);
  else if (arrival->marker)
    session->ProveLaneAndTakeReady (arrival->lane, *arrival->seq, &batch);
  else
    session->ArriveAndTakeReady (arrival->lane, arrival->seq, arrival->pts,
        std::move (arrival->payload), arrived, &batch);
  if (batch.latency_grew)
    priv->latency_post_pending = true;

  const gpufanin::ItemHandler & handler = gst_gpufan_in_handler (self);
  for (gpufan::Released & released : batch.items) {
    /* one line per frame at LOG: each item as it leaves the window */
    GST_LOG_OBJECT (self, "item %" G_GUINT64_FORMAT " of lane %d, stream %u: %s",
        released.seq, released.lane == gpufan::kNoLane ? -1 : (gint) released.lane,
        released.stream, released.payload ? "released" : "lost");
    if (!released.payload)
      continue; /* dropped or given up: counted by the session */
    if (released.stream != gpufan::kMainStream)
      gst_gpufan_in_note_stream_event (priv, released);
    if (!handler.PushReleased (self, *session, released, pause))
      break; /* the output stopped: the rest of the batch is dropped */
  }
  /* what no stream's output took gives its stream slot back */
  for (gpufan::Released & released : batch.items) {
    if (released.holds_stream_slot) {
      released.holds_stream_slot = false;
      session->StreamOutputDone (released.stream);
    }
  }
  handler.AfterBatch (self, session, pause);
  mark_batch_done (priv);
  *generation = batch.generation;
  const bool any = !batch.items.empty ();
  batch.items.clear (); /* its storage serves the next batch */
  return any;
}

/* Outputs from the calling thread (a lane's): @arrival (or nothing) into
 * the window, then what may leave goes downstream from here, unless another
 * thread holds the output (that one takes it too: it looks at
 * output_pending once it let go). Never waits for the output: a push blocked
 * downstream must not hold a lane. */
static gpufan::Arrival
output_from_this_thread (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, PendingArrival * arrival)
{
  GstGpuFanInPrivate * priv = self->priv;
  gpufan::Arrival arrived;
  PendingArrival * pending = arrival;

  if (priv->live.load () || gst_gpufan_in_handler (self).OutputFromTask (self)) {
    /* The task takes it: the arrival (or WakeOutput) moves WaitOutput's
     * generation. */
    if (arrival)
      arrived = hand_over (session, arrival, true);
    else
      session->WakeOutput ();
    priv->output_pending = true;
    return arrived;
  }

  std::unique_lock<gpufan::Mutex> out (priv->output_lock, std::try_to_lock);
  if (!out.owns_lock ()) {
    if (arrival)
      arrived = hand_over (session, arrival);
    priv->output_pending = true;
    /* the holder may have let go before it could see output_pending */
    if (!out.try_lock ())
      return arrived;
    pending = nullptr;
  }
  for (;;) {
    priv->output_pending = false;
    bool pause = false;
    guint64 generation;
    output_batch_locked (self, session, pending, &arrived, &generation, &pause);
    pending = nullptr;
    out.unlock ();
    gst_gpufan_in_maybe_post_latency (self);
    if (pause) {
      /* the task stops as it would have after its own push (pausing it
       * waits for its iteration, so it must not stay asleep) */
      {
        std::lock_guard<gpufan::Mutex> lk (priv->lock);
        priv->output.WakeUnlocked ();
      }
      priv->output.PauseTask ();
      return arrived;
    }
    if (!priv->output_pending.load () || !out.try_lock ())
      return arrived;
  }
}

gpufan::Arrival
gst_gpufan_in_output_from_lane (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session, PendingArrival && arrival)
{
  return output_from_this_thread (self, session, &arrival);
}

void
gst_gpufan_in_output_now (GstGpuFanIn * self,
    const std::shared_ptr<gpufan::FanInPort> & session)
{
  output_from_this_thread (self, session, nullptr);
}

void
gst_gpufan_in_src_loop (gpointer user_data)
{
  GstGpuFanIn * self = GST_GPUFAN_IN (user_data);
  GstGpuFanInPrivate * priv = self->priv;
  std::shared_ptr<gpufan::FanInPort> session;

  /* Each iteration begins with the check of the result that the last
   * one's wait ended with. */
  {
    std::unique_lock<gpufan::Mutex> lk (priv->lock);
    if (priv->output.HaltedUnlocked ()) {
      lk.unlock ();
      priv->output.PauseTask ();
      return;
    }
    session = priv->session;
    if (!session) {
      if (gst_gpufan_in_all_pads_eos_unlocked (priv)) {
        lk.unlock ();
        std::lock_guard<gpufan::Mutex> out (priv->output_lock);
        gst_gpufan_in_finish_stream (self, nullptr);
        return;
      }
      /* nothing to output before a pad pairs (pair_pad notifies) */
      while (!priv->session && !gst_gpufan_in_all_pads_eos_unlocked (priv))
        if (!priv->output.WaitUnlocked (lk)) {
          lk.unlock ();
          priv->output.PauseTask ();
          return;
        }
      return;
    }
  }

  bool pause = false;
  guint64 generation = 0;
  gint64 eos_deadline = gpufan::kNoTime;
  {
    std::unique_lock<gpufan::Mutex> out (priv->output_lock);
    priv->output_pending = false;
    bool more = output_batch_locked (self, session, nullptr, nullptr,
        &generation, &pause);
    std::string missing;
    if (!more && !pause
        && gst_gpufan_in_stream_ends_now (self, session, &missing,
            &eos_deadline)) {
      gst_gpufan_in_finish_stream (self, session, missing);
      return;
    }
    out.unlock ();
    gst_gpufan_in_maybe_post_latency (self);
    if (more)
      return; /* more may be ready: the next iteration looks */
  }
  if (pause) {
    priv->output.PauseTask ();
    return;
  }
  if (priv->output_pending.load ())
    return; /* came while we held the output: go again */
  {
    /* A flush or stop that woke the output before the batch read its
     * generation moved nothing the wait below would see: look at the state
     * after the batch (the next iteration pauses). */
    std::lock_guard<gpufan::Mutex> lk (priv->lock);
    if (priv->output.HaltedUnlocked ())
      return;
  }
  /* Until the generation moves past the batch's (WaitOutput: this also
   * covers a new head and the fan-out's flush ending), a pending head's stall
   * deadline (WaitOutput's own), or the deadline for the lanes' EOS. */
  if (eos_deadline == gpufan::kNoTime)
    session->WaitOutput (generation);
  else
    session->WaitOutput (generation,
        MAX (eos_deadline - session->clock ().NowNs (), 0));
}
