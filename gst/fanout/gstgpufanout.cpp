/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-gpufanout
 * @title: gpufanout
 * @see_also: gpufanin, tee, roundrobin
 *
 * Spreads the buffers of one stream over several lanes, one `src_%u` request
 * pad each. Every buffer goes to exactly one lane, chosen by
 * #GstGpuFanOut:policy. Each lane has a bounded queue and its own streaming
 * thread, so the branches run in parallel. A gpufanin at the end of the
 * branches puts the buffers back in input order; it finds this element through
 * the branches by itself.
 *
 * Sticky events reach every lane before its first buffer (lanes requested
 * while playing too), EOS goes into every lane after its queued buffers, and
 * flushes reach every lane.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -m videotestsrc num-buffers=300 ! \
 *     gpufanout name=f policy=adaptive gpufanin name=m ! fakesink \
 *     f.src_0 ! identity sleep-time=2000 ! m.sink_0 \
 *     f.src_1 ! identity sleep-time=4000 ! m.sink_1
 * ]| Two lanes of different speed; output in input order, statistics on the
 * bus as the `gpufan-stats` element message. Every `gpufan-stats` message
 * has gpufanout as its source: the `stats-interval` ones and the final one
 * (which a paired gpufanin posts for it once its output is complete).
 *
 * Several streams share the lanes through request sink pads `sink_%u`
 * (one branch instance per lane, whatever the number of streams): stream k
 * leaves gpufanin's `src_k` in its own order, with its own events; see
 * #GstGpuFanOutSinkPad for its fair share (`weight`), bound and `leaky`.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 gpufanout name=f devices=cpu:2 gpufanin name=m \
 *     f.src_0 ! videoflip video-direction=horiz ! m.sink_0 \
 *     f.src_1 ! videoflip video-direction=horiz ! m.sink_1 \
 *     videotestsrc is-live=true pattern=0 ! f.sink_0  m.src_0 ! queue ! fakesink \
 *     videotestsrc is-live=true pattern=1 ! f.sink_1  m.src_1 ! queue ! fakesink
 * ]| Two live streams over two CPU lanes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-dispatcher.h"
#include "gstgpufanout-control.h"

#include "common/gstgpufandevices.h"

GST_DEBUG_CATEGORY (gst_gpufan_out_debug);
#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src_%u",
    GST_PAD_SRC, GST_PAD_REQUEST, GST_STATIC_CAPS_ANY);
/* several input streams (gstgpufanout-streams.cpp) */
static GstStaticPadTemplate stream_sink_template
    = GST_STATIC_PAD_TEMPLATE ("sink_%u", GST_PAD_SINK, GST_PAD_REQUEST,
        GST_STATIC_CAPS_ANY);

#define gst_gpufan_out_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE (GstGpuFanOut, gst_gpufan_out, GST_TYPE_ELEMENT,
    G_IMPLEMENT_INTERFACE (GST_TYPE_CHILD_PROXY,
        gst_gpufan_out_child_proxy_init));

GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (gpufanout, "gpufanout", GST_RANK_NONE,
    GST_TYPE_GPUFAN_OUT,
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_out_debug, "gpufanout", 0,
        "gpufan fan-out"));

static GstPad *
gst_gpufan_out_request_new_pad (GstElement * element, GstPadTemplate * templ,
    const gchar * name, const GstCaps *)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (element);
  GstGpuFanOutPrivate * priv = self->priv;
  guint index = 0;

  if (GST_PAD_TEMPLATE_DIRECTION (templ) == GST_PAD_SINK)
    return stream_request_pad (self, templ, name);

  GstPad * pad;
  LanePtr lane;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->lanes_lock);
    auto taken = [priv] (guint i) { return priv->lanes.count (i) > 0; };
    if (!gst_gpufan_request_pad_index (element, "src_", name, taken, &index))
      return nullptr;

    gchar * pad_name = g_strdup_printf ("src_%u", index);
    pad = GST_PAD (g_object_new (GST_TYPE_GPUFAN_OUT_PAD, "name", pad_name,
        "direction", GST_PAD_SRC, "template", templ, nullptr));
    g_free (pad_name);
    GST_GPUFAN_OUT_PAD (pad)->fanout = self;
    GST_GPUFAN_OUT_PAD (pad)->lane = index;

    lane = std::make_shared<Lane> (self, pad, index);
    priv->lanes[index] = lane;
    priv->probe_pending = true; /* its needs_probe starts set */
    /* a first guess until the lane is placed (NULL->READY) */
    priv->session->AddLane (index,
        gst_gpufan_device_registry ().DefaultForLane (index), DEFAULT_WEIGHT);
    lane->timer = priv->session->LaneTimerFor (index);
    /* what its statistics show until it is placed */
    priv->session->SetLaneInfo (index, { DEFAULT_WORKER_THREAD, nullptr });
    /* no items until the pad is active */
    priv->session->SetLaneEligible (index, false);
  }
  lanes_changed (self);

  /* Lanes are placed at NULL->READY; one requested later is placed now. */
  GST_OBJECT_LOCK (self);
  bool started = GST_STATE (self) >= GST_STATE_READY;
  GST_OBJECT_UNLOCK (self);
  std::string error;
  if (started && !place_lane (self, lane, &error)) {
    GST_ELEMENT_WARNING (self, RESOURCE, NOT_FOUND,
        ("No device for a new lane %u: %s", index, error.c_str ()), (nullptr));
    {
      std::lock_guard<gpufan::Mutex> lk (priv->lanes_lock);
      priv->lanes.erase (index);
    }
    priv->session->RemoveLane (index);
    lanes_changed (self);
    gst_object_unref (gst_object_ref_sink (pad));
    return nullptr;
  }

  install_src_pad_functions (pad);

  GST_DEBUG_OBJECT (self, "new lane %u", index);

  if (GST_PAD_IS_ACTIVE (self->sinkpad))
    gst_pad_set_active (pad, TRUE);
  gst_element_add_pad (element, pad);
  /* the task deferred by activation (see src_activate_mode) */
  lane_start_deferred_task (lane);
  return pad;
}

static void
gst_gpufan_out_release_pad (GstElement * element, GstPad * pad)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (element);
  if (GST_IS_GPUFAN_OUT_SINK_PAD (pad)) {
    stream_release_pad (self, pad);
    return;
  }
  guint id = GST_GPUFAN_OUT_PAD (pad)->lane;

  GST_DEBUG_OBJECT (self, "releasing lane %u", id);
  /* no new items for it while its task is being stopped */
  self->priv->session->SetLaneEligible (id, false);
  LanePtr lane = find_lane (self, id);
  if (lane)
    lane_stop (self, lane, LaneState::kInactive);
  gst_pad_set_active (pad, FALSE);
  /* a task left on an inactive pad would keep the lane (and the pad) alive */
  gst_pad_stop_task (pad);

  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    self->priv->lanes.erase (id);
  }
  self->priv->session->RemoveLane (id);
  lanes_changed (self);
  gst_element_remove_pad (element, pad);
}

/* The trace file: the property's, else GPUFAN_TRACE's. Several pairs in one
 * process with GPUFAN_TRACE: the first to start takes the name, the others
 * write FILE.<session>.json beside it. */
static std::string
trace_path (GstGpuFanOut * self)
{
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->settings_lock);
    if (!self->priv->settings.trace_file.empty ())
      return self->priv->settings.trace_file;
  }
  const gchar * env = g_getenv ("GPUFAN_TRACE");
  if (!env || !*env)
    return "";
  static std::mutex taken_lock;
  static guint64 taken_by = 0; /* the session that writes the plain name */
  const guint64 id = self->priv->session->id ();
  {
    std::lock_guard<std::mutex> lk (taken_lock);
    if (taken_by == 0)
      taken_by = id;
    if (taken_by == id)
      return env;
  }
  std::string path = env;
  const std::string ext = ".json";
  if (path.size () > ext.size ()
      && path.compare (path.size () - ext.size (), ext.size (), ext) == 0)
    path.resize (path.size () - ext.size ());
  return path + "." + std::to_string (id) + ext;
}

static void
start_trace (GstGpuFanOut * self)
{
  const std::string path = trace_path (self);
  if (path.empty ())
    return;
  std::string error;
  if (self->priv->session->StartTrace (path, &error))
    GST_INFO_OBJECT (self, "tracing to %s", path.c_str ());
  else
    GST_ELEMENT_WARNING (self, RESOURCE, OPEN_WRITE,
        ("No trace: %s; trace-file (or GPUFAN_TRACE) takes the path of a "
         "file that can be written, in a folder that exists; the stream goes "
         "on without a trace",
            error.c_str ()),
        (nullptr));
}

/* The metrics-port server (gstgpufanmetrics.h): its own thread takes the
 * statistics, never a streaming thread. A port that cannot be bound is a
 * warning: the stream goes on without metrics. */
static void
start_metrics (GstGpuFanOut * self)
{
  guint port;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->settings_lock);
    port = self->priv->settings.metrics_port;
  }
  if (port == 0 || self->priv->metrics_server)
    return;
  gpufan::StatsView view = *self->priv->session;
  GError * error = nullptr;
  self->priv->metrics_server = gst_gpufan_metrics_server_start (port,
      [view] () { return view.Stats (); }, &error);
  if (self->priv->metrics_server) {
    GST_INFO_OBJECT (self, "serving metrics at http://127.0.0.1:%u/metrics",
        port);
  } else {
    GST_ELEMENT_WARNING (self, RESOURCE, OPEN_READ_WRITE,
        ("No metrics: cannot listen on 127.0.0.1:%u (metrics-port)", port),
        ("%s", error ? error->message : "unknown error"));
    g_clear_error (&error);
  }
}

static void
stop_metrics (GstGpuFanOut * self)
{
  gst_gpufan_metrics_server_stop (self->priv->metrics_server);
  self->priv->metrics_server = nullptr;
}

static GstStateChangeReturn
gst_gpufan_out_change_state (GstElement * element, GstStateChange transition)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (element);
  GstGpuFanOutPrivate * priv = self->priv;

  /* before the lanes' tasks exist: their threads depend on the device.
   * Again at READY->PAUSED, for settings changed in READY. */
  if ((transition == GST_STATE_CHANGE_NULL_TO_READY
          || transition == GST_STATE_CHANGE_READY_TO_PAUSED)
      && !place_all_lanes (self))
    return GST_STATE_CHANGE_FAILURE;

  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED) {
    /* the pads are not active yet: no buffer flows */
    take_settings_snapshot (self);
    start_trace (self);
    start_metrics (self);
  }

  GstStateChangeReturn ret
      = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE) {
    if (transition == GST_STATE_CHANGE_READY_TO_PAUSED) {
      priv->session->StopTrace ();
      stop_metrics (self);
    }
    return ret;
  }

  if (transition == GST_STATE_CHANGE_READY_TO_NULL) {
    priv->no_gpu_warned = false;
    forget_placements (self);
  }

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    priv->session->StopTrace ();
    stop_metrics (self);
    /* the pads are inactive: no buffer flows */
    priv->dispatcher->Forget ();
    priv->segment_epoch = 0;
    priv->session->Reset ();
    replay_forget (self);
    for (const LanePtr & lane : snapshot_lanes (self)) {
      lane_reset_result (self, lane, true);
      {
        /* as the Session's lane orders (Reset) */
        std::lock_guard<gpufan::Mutex> lk (lane->lock);
        lane->next_order = 0;
      }
      /* pairing is found again at the next start: the fan-in may be gone */
      priv->session->UnclaimLane (lane->id);
      request_probe (self, lane);
    }
    priv->stats_posted = false;
    priv->lane_error_posted = false;
    priv->caps_epoch = 0;
    streams_reset (self);
  }
  return ret;
}

/* The lane's task entered its thread (ENTER, posted from that thread once
 * the pool has bound it): the lane's statistics say how it went. */
static void
note_worker_thread (GstGpuFanOut * self, GstGpuFanOutPad * pad, GstTask * task)
{
  GstTaskPool * pool = gst_task_get_pool (task);
  if (GST_IS_GPUFAN_TASK_POOL (pool))
    self->priv->session->SetLaneWorkerThread (pad->lane,
        gst_gpufan_task_pool_binding (GST_GPUFAN_TASK_POOL (pool)));
  if (pool)
    gst_object_unref (pool);
}

/* A lane's pad announces its new task before starting it: the task gets
 * the lane's worker-thread pool (bound to the device's CPUs). */
static gboolean
gst_gpufan_out_post_message (GstElement * element, GstMessage * message)
{
  GstStreamStatusType type;
  GstElement * owner;
  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_STREAM_STATUS
      && GST_IS_GPUFAN_OUT_PAD (GST_MESSAGE_SRC (message))) {
    gst_message_parse_stream_status (message, &type, &owner);
    const GValue * object = gst_message_get_stream_status_object (message);
    GstGpuFanOutPad * pad = GST_GPUFAN_OUT_PAD (GST_MESSAGE_SRC (message));
    if (type == GST_STREAM_STATUS_TYPE_CREATE && object
        && G_VALUE_HOLDS (object, GST_TYPE_TASK)) {
      GST_OBJECT_LOCK (pad);
      GstGpuFanTaskPool * pool = pad->task_pool
          ? GST_GPUFAN_TASK_POOL (gst_object_ref (pad->task_pool))
          : nullptr;
      GST_OBJECT_UNLOCK (pad);
      if (pool) {
        gst_task_set_pool (GST_TASK (g_value_get_object (object)),
            GST_TASK_POOL (pool));
        gst_object_unref (pool);
      }
    } else if (type == GST_STREAM_STATUS_TYPE_ENTER && object
        && G_VALUE_HOLDS (object, GST_TYPE_TASK)) {
      note_worker_thread (GST_GPUFAN_OUT (element), pad,
          GST_TASK (g_value_get_object (object)));
    }
  }
  return GST_ELEMENT_CLASS (parent_class)->post_message (element, message);
}

static void
gst_gpufan_out_finalize (GObject * object)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (object);
  /* the Session may outlive us (a gpufanin holds it) */
  self->priv->session->SetStallListener (nullptr);
  self->priv->session->SetDrainListener (nullptr);
  self->priv->session->SetReleaseListener (nullptr);
  replay_forget (self);
  stop_metrics (self);
  gst_clear_caps (&self->priv->lanes_caps);
  delete self->priv;
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_gpufan_out_class_init (GstGpuFanOutClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->finalize = gst_gpufan_out_finalize;
  gst_gpufan_out_install_control_signals (klass);
  gst_gpufan_out_install_child_proxy (klass);

  install_properties (gobject_class);

  element_class->request_new_pad
      = GST_DEBUG_FUNCPTR (gst_gpufan_out_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR (gst_gpufan_out_release_pad);
  element_class->change_state = GST_DEBUG_FUNCPTR (gst_gpufan_out_change_state);
  element_class->post_message = GST_DEBUG_FUNCPTR (gst_gpufan_out_post_message);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template_with_gtype (element_class,
      &src_template, GST_TYPE_GPUFAN_OUT_PAD);
  gst_element_class_add_static_pad_template_with_gtype (element_class,
      &stream_sink_template, GST_TYPE_GPUFAN_OUT_SINK_PAD);

  gst_element_class_set_static_metadata (element_class, "GPU fan-out",
      "Generic",
      "Spreads buffers over parallel lanes (one per GPU, or CPU lanes), from "
      "one stream (sink) or several sharing the lanes (sink_%u); gpufanin "
      "restores each stream's order",
      "gst-gpufan developers");
  gst_element_class_add_static_metadata (element_class,
      GST_ELEMENT_METADATA_DOC_URI, GST_GPUFAN_DOCS_URL "#gpufanout");

  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_POLICY, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_CODECS, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_STAGING, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_CHUNK_MODE,
      (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_OUT_PAD, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_OUT_SINK_PAD,
      (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_STALL_ACTION,
      (GstPluginAPIFlags)0);
}

static void
gst_gpufan_out_init (GstGpuFanOut * self)
{
  self->priv = new GstGpuFanOutPrivate ();
  take_settings_snapshot (self);
  /* an idle stalled lane's worker starts its liveness markers */
  self->priv->session->SetStallListener (
      [self] (guint lane) { lane_note_health (self, lane); });
  /* a lane holding its EOS back for replay lets it go */
  self->priv->session->SetDrainListener (
      [self] () { lanes_note_drained (self); });

  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  install_sink_pad_functions (self->sinkpad);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
}
