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
 * bus as the `gpufan-stats` element message.
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

#include "gstgpufanout-private.h"

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
G_DEFINE_TYPE (GstGpuFanOut, gst_gpufan_out, GST_TYPE_ELEMENT);

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
    if (!self->priv->trace_file.empty ())
      return self->priv->trace_file;
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
        ("No trace: %s", error.c_str ()), (nullptr));
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

  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED)
    start_trace (self);

  GstStateChangeReturn ret
      = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE) {
    if (transition == GST_STATE_CHANGE_READY_TO_PAUSED)
      priv->session->StopTrace ();
    return ret;
  }

  if (transition == GST_STATE_CHANGE_READY_TO_NULL) {
    priv->no_gpu_warned = false;
    forget_placements (self);
  }

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    priv->session->StopTrace ();
    /* the pads are inactive: no buffer flows */
    chunk_forget (self);
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
gst_gpufan_out_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (object);
  GstGpuFanOutPrivate * priv = self->priv;

  switch (prop_id) {
    case PROP_POLICY:
      priv->session->SetPolicy (policy_from_enum (g_value_get_enum (value)));
      break;
    case PROP_QUEUE_SIZE:
      priv->session->SetLaneQueueSize (g_value_get_uint (value));
      break;
    case PROP_MAX_IN_FLIGHT:
      priv->session->SetMaxInFlight (g_value_get_uint (value));
      break;
    case PROP_STATS_INTERVAL:
      priv->stats_interval_ms = g_value_get_uint (value);
      break;
    case PROP_DEVICES:
    case PROP_MIN_FREE_MEMORY:
    case PROP_MIN_COMPUTE_CAPABILITY:
    case PROP_REQUIRE_CODECS:
      set_device_setting (self, prop_id, value);
      unplace_all_lanes (self);
      break;
    case PROP_HOST_POOL_SIZE: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      priv->host_pool_mib = g_value_get_uint (value);
    }
      unplace_all_lanes (self);
      break;
    case PROP_STAGING: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      priv->staging = (GstGpuFanStaging)g_value_get_enum (value);
    }
      unplace_all_lanes (self);
      break;
    case PROP_CHUNK:
      priv->chunk_mode = g_value_get_enum (value);
      /* a chunk that has not begun moves off a stalled lane whole */
      priv->session->SetChunkMode (chunk_mode_on (self));
      break;
    case PROP_CHUNK_FRAMES:
      priv->chunk_frames = g_value_get_uint (value);
      break;
    case PROP_ON_LANE_ERROR:
      priv->on_lane_error = g_value_get_enum (value);
      break;
    case PROP_ON_STALL:
      priv->on_stall = g_value_get_enum (value);
      priv->session->SetStallFailsLane (
          priv->on_stall.load () == GST_GPUFAN_STALL_REPLAY);
      break;
    case PROP_TRACE_FILE: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      const gchar * path = g_value_get_string (value);
      priv->trace_file = path ? path : "";
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_gpufan_out_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (object);
  GstGpuFanOutPrivate * priv = self->priv;

  switch (prop_id) {
    case PROP_POLICY:
      g_value_set_enum (value, policy_to_enum (priv->session->policy ()));
      break;
    case PROP_QUEUE_SIZE:
      g_value_set_uint (value, priv->session->lane_queue_size ());
      break;
    case PROP_MAX_IN_FLIGHT:
      g_value_set_uint (value, priv->session->max_in_flight ());
      break;
    case PROP_STATS:
      g_value_take_boxed (value,
          gst_gpufan_stats_to_structure (*priv->session));
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_uint (value, priv->stats_interval_ms.load ());
      break;
    case PROP_DEVICES: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_string (value, priv->devices_text.c_str ());
      break;
    }
    case PROP_MIN_FREE_MEMORY: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_uint64 (value, priv->hints.min_free_memory / (1024 * 1024));
      break;
    }
    case PROP_MIN_COMPUTE_CAPABILITY: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_string (value, priv->min_compute_capability.c_str ());
      break;
    }
    case PROP_REQUIRE_CODECS: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_flags (value, priv->require_codecs);
      break;
    }
    case PROP_HOST_POOL_SIZE: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_uint (value, priv->host_pool_mib);
      break;
    }
    case PROP_STAGING: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_enum (value, priv->staging);
      break;
    }
    case PROP_CHUNK:
      g_value_set_enum (value, priv->chunk_mode.load ());
      break;
    case PROP_CHUNK_FRAMES:
      g_value_set_uint (value, priv->chunk_frames.load ());
      break;
    case PROP_ON_LANE_ERROR:
      g_value_set_enum (value, priv->on_lane_error.load ());
      break;
    case PROP_ON_STALL:
      g_value_set_enum (value, priv->on_stall.load ());
      break;
    case PROP_TRACE_FILE: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_string (value,
          priv->trace_file.empty () ? nullptr : priv->trace_file.c_str ());
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
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
  gst_clear_caps (&self->priv->lanes_caps);
  delete self->priv;
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_gpufan_out_class_init (GstGpuFanOutClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->set_property = gst_gpufan_out_set_property;
  gobject_class->get_property = gst_gpufan_out_get_property;
  gobject_class->finalize = gst_gpufan_out_finalize;

  /**
   * GstGpuFanOut:policy:
   *
   * How the next buffer's lane is chosen. `adaptive` learns each lane's
   * service time from the completions gpufanin reports and picks the lane
   * that should finish the buffer first.
   */
  g_object_class_install_property (gobject_class, PROP_POLICY,
      g_param_spec_enum ("policy", "Policy",
          "How buffers are spread over the lanes", GST_TYPE_GPUFAN_POLICY,
          DEFAULT_POLICY,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:queue-size:
   *
   * Buffers queued per lane in front of the lane's streaming thread. A full
   * lane takes no more buffers; when every lane is full, the fan-out blocks
   * and back-pressure reaches upstream. A lane of microseconds holds more,
   * up to 4 × queue-size while that is under 2 ms of its work (a hand-over
   * per buffer would cost as much as the buffer): its `queue-limit` in the
   * stats.
   */
  g_object_class_install_property (gobject_class, PROP_QUEUE_SIZE,
      g_param_spec_uint ("queue-size", "Queue size",
          "Buffers queued per lane before the lane counts as full (a lane "
          "of microseconds: up to 4x that, while under 2 ms of its work)",
          1, 1024, DEFAULT_QUEUE_SIZE,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:max-in-flight:
   *
   * Buffers dispatched and not yet output by gpufanin (or pushed, without a
   * fan-in): bounds the reorder window and the memory in use. 0 chooses the
   * sum of each lane's deepest queue-limit so far + 2 (lanes × (queue-size +
   * 2) for lanes of milliseconds); with `adaptive`, up to twice that when the
   * lanes' speeds differ (room for the fast lanes while a slow one works).
   */
  g_object_class_install_property (gobject_class, PROP_MAX_IN_FLIGHT,
      g_param_spec_uint ("max-in-flight", "Max in flight",
          "Buffers dispatched but not yet output in order (0 = automatic: "
          "each lane's deepest queue-limit + 2, up to twice that with "
          "adaptive)",
          0, 65536, DEFAULT_MAX_IN_FLIGHT,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:stats:
   *
   * A `gpufan-stats` structure: totals and, in the `lanes` array, one
   * structure per lane (device, dispatched, completed, dropped, failed,
   * timed-out, late, reorder-waits, queued, in-flight, service-time in ns,
   * fps, and where the lane's time went: push-time, idle-time, settle-time,
   * query-time, output-time in ns). See docs/elements.md.
   */
  g_object_class_install_property (gobject_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "Per-lane statistics (gpufan-stats structure)", GST_TYPE_STRUCTURE,
          (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  /**
   * GstGpuFanOut:stats-interval:
   *
   * Also post the `gpufan-stats` element message every so many milliseconds
   * while buffers flow (0: only at EOS).
   */
  g_object_class_install_property (gobject_class, PROP_STATS_INTERVAL,
      g_param_spec_uint ("stats-interval", "Statistics interval",
          "Post a gpufan-stats message every so many ms (0 = only at EOS)", 0,
          3600000, DEFAULT_STATS_INTERVAL,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:devices:
   *
   * Where the lanes run. `auto`: one lane per GPU in pad order, wrapping
   * round when there are more lanes than GPUs (request more pads for more
   * lanes per GPU); CPU lanes, with one warning, where there is no GPU. A
   * list of GPU ordinals such as `0,1,1`: lane N runs on the Nth (repeats
   * put several lanes on one GPU). `cpu`: CPU lanes even when GPUs exist;
   * `cpu:N`: CPU lanes for `src_0` … `src_(N-1)` only (a pad with a
   * higher index has no device).
   *
   * Each CUDA lane answers `gst.cuda.context` queries with its GPU's
   * context, so nvcodec elements in its branch need no `cuda-device-id`.
   */
  g_object_class_install_property (gobject_class, PROP_DEVICES,
      g_param_spec_string ("devices", "Devices",
          "Where the lanes run: auto (every GPU, else CPU lanes), GPU "
          "ordinals one per lane (e.g. 0,1,1), cpu, or cpu:N",
          DEFAULT_DEVICES,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:min-free-memory:
   *
   * Placement hint, a hard filter: only GPUs with at least this much free
   * memory (MiB, read when the lanes are placed) run lanes.
   */
  g_object_class_install_property (gobject_class, PROP_MIN_FREE_MEMORY,
      g_param_spec_uint64 ("min-free-memory", "Minimum free memory",
          "Only GPUs with at least this much free memory, in MiB (0 = any)", 0,
          G_MAXUINT64 / (1024 * 1024), DEFAULT_MIN_FREE_MEMORY,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:min-compute-capability:
   *
   * Placement hint, a hard filter: only GPUs of at least this compute
   * capability (`MAJOR.MINOR`, e.g. `8.0`; empty: any).
   */
  g_object_class_install_property (gobject_class, PROP_MIN_COMPUTE_CAPABILITY,
      g_param_spec_string ("min-compute-capability",
          "Minimum compute "
          "capability",
          "Only GPUs of at least this compute capability, "
          "e.g. 8.0 (empty = any)",
          DEFAULT_MIN_COMPUTE_CAPABILITY,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:require-codecs:
   *
   * Placement hint, a hard filter: only GPUs known to have these video
   * engines (`nvenc`, `nvdec`, or `nvenc+nvdec`). A GPU whose support could
   * not be determined is excluded.
   */
  g_object_class_install_property (gobject_class, PROP_REQUIRE_CODECS,
      g_param_spec_flags ("require-codecs", "Require codecs",
          "Only GPUs with these video engines", GST_TYPE_GPUFAN_CODECS,
          DEFAULT_REQUIRE_CODECS,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:host-pool-size:
   *
   * Bound, in MiB, of the host memory pool of each NUMA node the lanes run
   * on. The pool's memory is bound to the node and, where a CUDA driver is
   * present, pinned (page-locked) for fast copies to the GPUs; it is
   * allocated once and reused. The fan-out proposes it upstream in the
   * allocation query so that upstream writes frames straight into it. When
   * the bound is reached, frames travel in ordinary memory. 0 turns the
   * pools off. The first fan-out to use a node's pool sets its bound.
   */
  g_object_class_install_property (gobject_class, PROP_HOST_POOL_SIZE,
      g_param_spec_uint ("host-pool-size", "Host pool size",
          "Bound of each NUMA node's pinned host pool in MiB (0 = no pools)", 0,
          G_MAXUINT / 2, DEFAULT_HOST_POOL_SIZE,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:staging:
   *
   * When a lane copies a frame into its NUMA node's pool before the branch
   * gets it: `auto`, on GPU lanes when the frame is not in pinned memory of
   * the GPU's node (upstream that took the proposed pool needs no copy);
   * `always`, on every lane when the frame is not in its node's pool (for
   * CPU lanes on multi-socket machines); `never`.
   */
  g_object_class_install_property (gobject_class, PROP_STAGING,
      g_param_spec_enum ("staging", "Staging",
          "When lanes copy frames into their NUMA node's pool",
          GST_TYPE_GPUFAN_STAGING, DEFAULT_STAGING,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:chunk:
   *
   * What goes to one lane at a time. `frame`: each buffer on its own
   * (stateless branches: filters, scalers, inference). `frames`: runs of
   * `chunk-frames` buffers; `keyframes`: runs cut where a keyframe comes
   * (GST_BUFFER_FLAG_DELTA_UNIT clear) after at least `chunk-frames`
   * buffers, for encoded input. A chunk goes whole to one lane, starts with
   * a DISCONT buffer and a force-key-unit event (all headers), and its lane
   * is drained at its end (an EOS that gpufanin hides, then a flush that
   * resets the branch), so that stateful branches (encoders, decoders,
   * trackers) see contiguous streams; gpufanin outputs each chunk's
   * buffers, however many, in the order the lane made them, chunk after
   * chunk. Each lane queues up to 2 x `chunk-frames` buffers. See
   * docs/elements.md, "Chunk mode".
   */
  g_object_class_install_property (gobject_class, PROP_CHUNK,
      g_param_spec_enum ("chunk", "Chunk mode",
          "What goes to one lane at a time: each buffer (frame), runs of "
          "chunk-frames buffers (frames), or runs cut at keyframes "
          "(keyframes), each drained whole in its lane",
          GST_TYPE_GPUFAN_CHUNK_MODE, DEFAULT_CHUNK,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:chunk-frames:
   *
   * Chunk mode: buffers per chunk (`frames`), or the fewest before a
   * keyframe may cut one (`keyframes`). Longer chunks cost an encoder less
   * (fewer keyframes) and add more latency: about a chunk's duration times
   * the lanes.
   */
  g_object_class_install_property (gobject_class, PROP_CHUNK_FRAMES,
      g_param_spec_uint ("chunk-frames", "Chunk frames",
          "Chunk mode: buffers per chunk (frames), or the fewest before a "
          "keyframe cuts one (keyframes)",
          1, 100000, DEFAULT_CHUNK_FRAMES,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

  /**
   * GstGpuFanOut:on-lane-error:
   *
   * What a branch's error (a fatal flow return from a lane, with or without
   * an ERROR message) does. `fail`: the stream fails, as with any element.
   * `drop-lane`: the lane leaves the stream until the next start; the frames
   * it held are lost, the others go on in order. `replay`: the lane leaves
   * too, and the frames it held (dispatched, not yet out of gpufanin) go
   * to the other lanes, so none is lost; to do so the fan-out keeps a
   * reference to each frame until it has left gpufanin (an in-place branch
   * element then copies it before writing). In chunk mode `replay` acts as
   * `drop-lane`. A `gpufan-lane-failed` element message (lane, device,
   * reason, replayed, lost) and a WARNING say so; when every lane has
   * failed, an ERROR. The branch element's own ERROR message still reaches
   * the bus: gpufanbin turns those of its lanes into WARNINGs, an
   * application writing the lanes itself has to ignore them.
   */
  g_object_class_install_property (gobject_class, PROP_ON_LANE_ERROR,
      g_param_spec_enum ("on-lane-error", "On lane error",
          "What a branch's error does: fail the stream (fail), take the lane "
          "out until the next start and go on without the frames it held "
          "(drop-lane), or take it out and send those frames to the other "
          "lanes (replay)",
          GST_TYPE_GPUFAN_LANE_ERROR, DEFAULT_ON_LANE_ERROR,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:on-stall:
   *
   * What a stall does: a lane that returned nothing while one of its frames
   * headed gpufanin's window for stall-timeout. `skip`: that frame is given
   * up, and the lane gets frames again once it answers. `replay`: the lane
   * fails as with on-lane-error (until the next start) and the frames it
   * held go to the other lanes: nothing is lost, at the cost of the lane
   * and of keeping a reference to each frame (see on-lane-error). In chunk
   * mode `replay` fails the lane and drops its chunks.
   */
  g_object_class_install_property (gobject_class, PROP_ON_STALL,
      g_param_spec_enum ("on-stall", "On stall",
          "What a lane that returns nothing for stall-timeout costs: the "
          "frame it stalled on (skip), or the lane, whose frames go to the "
          "other lanes (replay)",
          GST_TYPE_GPUFAN_STALL_ACTION, DEFAULT_ON_STALL,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:trace-file:
   *
   * Writes a trace of the stream to this file from READY->PAUSED to
   * PAUSED->READY: trace-event JSON, which chrome://tracing and
   * https://ui.perfetto.dev open. Two tracks per lane (its worker's pushes,
   * idle waits and chunk settles, each item's dispatch; and what comes out
   * of its branch: arrivals, serialized queries, output pushes) and one for
   * the release in order. Unset, the GPUFAN_TRACE environment variable
   * names the file (a second pair in the process then writes FILE.N.json,
   * N its session). `bench/trace-timeline.py` draws it as a PNG.
   */
  g_object_class_install_property (gobject_class, PROP_TRACE_FILE,
      g_param_spec_string ("trace-file", "Trace file",
          "Write a trace-event JSON trace (chrome://tracing, Perfetto) of "
          "every lane's work to this file while PAUSED or PLAYING (unset: "
          "the GPUFAN_TRACE environment variable, if set)",
          nullptr,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));

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
