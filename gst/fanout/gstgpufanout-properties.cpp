/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's properties: their specs, and how they write and read the
 * settings (gstgpufanout-settings.h); the streaming side's copy of them. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-dispatcher.h"

#include "common/gstgpufanstats.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

static void
set_property (GObject * object, guint prop_id,
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
      priv->settings.host_pool_mib = g_value_get_uint (value);
    }
      unplace_all_lanes (self);
      break;
    case PROP_STAGING: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      priv->settings.staging = (GstGpuFanStaging)g_value_get_enum (value);
    }
      unplace_all_lanes (self);
      break;
    case PROP_CHUNK: {
      /* taken at the next READY->PAUSED (take_settings_snapshot), by the
       * element and its Session together */
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      priv->settings.streaming.chunk_mode = g_value_get_enum (value);
      break;
    }
    case PROP_CHUNK_FRAMES: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      priv->settings.streaming.chunk_frames = g_value_get_uint (value);
      break;
    }
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
      priv->settings.trace_file = path ? path : "";
      break;
    }
    case PROP_METRICS_PORT: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      priv->settings.metrics_port = g_value_get_uint (value);
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
get_property (GObject * object, guint prop_id, GValue * value,
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
      g_value_set_string (value, priv->settings.devices_text.c_str ());
      break;
    }
    case PROP_MIN_FREE_MEMORY: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_uint64 (value, priv->settings.hints.min_free_memory / (1024 * 1024));
      break;
    }
    case PROP_MIN_COMPUTE_CAPABILITY: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_string (value, priv->settings.min_compute_capability.c_str ());
      break;
    }
    case PROP_REQUIRE_CODECS: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_flags (value, priv->settings.require_codecs);
      break;
    }
    case PROP_HOST_POOL_SIZE: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_uint (value, priv->settings.host_pool_mib);
      break;
    }
    case PROP_STAGING: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_enum (value, priv->settings.staging);
      break;
    }
    case PROP_CHUNK: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_enum (value, priv->settings.streaming.chunk_mode);
      break;
    }
    case PROP_CHUNK_FRAMES: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_uint (value, priv->settings.streaming.chunk_frames);
      break;
    }
    case PROP_ON_LANE_ERROR:
      g_value_set_enum (value, priv->on_lane_error.load ());
      break;
    case PROP_ON_STALL:
      g_value_set_enum (value, priv->on_stall.load ());
      break;
    case PROP_TRACE_FILE: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_string (value,
          priv->settings.trace_file.empty () ? nullptr : priv->settings.trace_file.c_str ());
      break;
    }
    case PROP_METRICS_PORT: {
      std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
      g_value_set_uint (value, priv->settings.metrics_port);
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

void
fanout::take_settings_snapshot (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  {
    std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
    priv->streaming = priv->settings.streaming;
  }
  /* the single sink pad's mode for this run, and the Session's: a chunk
   * that has not begun moves off a stalled lane whole */
  const bool chunks = priv->streaming.chunk_mode != GST_GPUFAN_CHUNK_FRAME;
  priv->session->SetChunkMode (chunks);
  priv->dispatcher = chunks ? make_chunk_dispatcher (self)
      : make_frame_dispatcher (self);
  streams_choose_dispatchers (self);
}

void
fanout::install_properties (GObjectClass * gobject_class)
{
  gobject_class->set_property = set_property;
  gobject_class->get_property = get_property;

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
          "How many buffers wait in each lane's queue before the lane counts "
          "as full and gets no more (a lane that takes microseconds a buffer "
          "may queue up to 4 times this, as long as that is under 2 ms of "
          "its work)",
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
   * while buffers flow (0: only at EOS), with `final` FALSE; the one at
   * the end has `final` TRUE. Each has this element as its source.
   */
  g_object_class_install_property (gobject_class, PROP_STATS_INTERVAL,
      g_param_spec_uint ("stats-interval", "Statistics interval (ms)",
          "Post a gpufan-stats message every so many milliseconds (0 = only "
          "at EOS)",
          0, 3600000, DEFAULT_STATS_INTERVAL,
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

  /**
   * GstGpuFanOut:metrics-port:
   *
   * Serves the statistics (the stats property's) in the OpenMetrics text
   * format at http://127.0.0.1:PORT/metrics while PAUSED or PLAYING, for
   * Prometheus and the like (docs/elements.md, "Metrics"). 0: no server. A
   * port that cannot be bound is a warning, not an error.
   */
  g_object_class_install_property (gobject_class, PROP_METRICS_PORT,
      g_param_spec_uint ("metrics-port", "Metrics port",
          "Serve the statistics in the OpenMetrics text format at "
          "http://127.0.0.1:PORT/metrics while PAUSED or PLAYING (0: off)",
          0, G_MAXUINT16, DEFAULT_METRICS_PORT,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_READY)));
}
