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
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout.h"

#include <gst/video/video.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/placement.h"
#include "gpufan/session.h"
#include "gstgpufancudacontext.h"
#include "gstgpufandevices.h"
#include "gstgpufanhostmemory.h"
#include "gstgpufantaskpool.h"
#include "gstgpufanutils.h"

GST_DEBUG_CATEGORY_STATIC (gst_gpufan_out_debug);
#define GST_CAT_DEFAULT gst_gpufan_out_debug

/* *INDENT-OFF* */
/* Lock order, outermost first: settings_lock, lanes_lock, Lane::lock, a
 * pad's object lock, then the Session's own lock (innermost: Session never
 * calls back into us). No
 * lock of ours is held across a push, a peer query, a pad (de)activation or a
 * blocking Session call (DispatchItem). */
/* *INDENT-ON* */

#define DEFAULT_POLICY GST_GPUFAN_POLICY_ADAPTIVE
#define DEFAULT_QUEUE_SIZE 4
#define DEFAULT_MAX_IN_FLIGHT 0
#define DEFAULT_STATS_INTERVAL 0
#define DEFAULT_WEIGHT 1.0
#define DEFAULT_DEVICES "auto"
#define DEFAULT_MIN_FREE_MEMORY 0
#define DEFAULT_MIN_COMPUTE_CAPABILITY ""
#define DEFAULT_REQUIRE_CODECS 0
#define DEFAULT_PAD_DEVICE -1
#define DEFAULT_HOST_POOL_SIZE GST_GPUFAN_DEFAULT_HOST_POOL_MIB
#define DEFAULT_STAGING GST_GPUFAN_STAGING_AUTO

/* How long a lane worker sleeps at most before it re-checks its state. */
static constexpr auto kLaneWaitSlice = std::chrono::milliseconds (100);
/* A joining lane's branch is probed at least every so many dispatches. */
static constexpr guint kMaxJoiningProbeInterval = 32;

typedef enum {
  GST_GPUFAN_POLICY_ROUND_ROBIN,
  GST_GPUFAN_POLICY_LEAST_LOADED,
  GST_GPUFAN_POLICY_WEIGHTED,
  GST_GPUFAN_POLICY_ADAPTIVE,
} GstGpuFanPolicy;

GType
gst_gpufan_policy_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_POLICY_ROUND_ROBIN,
        "Strict turn over the lanes (waits for the lane in turn)",
        "round-robin" },
    { GST_GPUFAN_POLICY_LEAST_LOADED, "Lane with the fewest buffers in flight",
        "least-loaded" },
    { GST_GPUFAN_POLICY_WEIGHTED,
        "Smooth weighted round-robin over the src pads' weight property",
        "weighted" },
    { GST_GPUFAN_POLICY_ADAPTIVE,
        "Earliest expected completion, learning each lane's speed",
        "adaptive" },
    { 0, nullptr, nullptr },
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanPolicy", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

static gpufan::Policy
policy_from_enum (gint value)
{
  switch (value) {
    case GST_GPUFAN_POLICY_ROUND_ROBIN:
      return gpufan::Policy::kRoundRobin;
    case GST_GPUFAN_POLICY_LEAST_LOADED:
      return gpufan::Policy::kLeastLoaded;
    case GST_GPUFAN_POLICY_WEIGHTED:
      return gpufan::Policy::kWeighted;
    default:
      return gpufan::Policy::kAdaptive;
  }
}

static gint
policy_to_enum (gpufan::Policy policy)
{
  switch (policy) {
    case gpufan::Policy::kRoundRobin:
      return GST_GPUFAN_POLICY_ROUND_ROBIN;
    case gpufan::Policy::kLeastLoaded:
      return GST_GPUFAN_POLICY_LEAST_LOADED;
    case gpufan::Policy::kWeighted:
      return GST_GPUFAN_POLICY_WEIGHTED;
    case gpufan::Policy::kAdaptive:
      break;
  }
  return GST_GPUFAN_POLICY_ADAPTIVE;
}

typedef enum {
  GST_GPUFAN_STAGING_AUTO,
  GST_GPUFAN_STAGING_ALWAYS,
  GST_GPUFAN_STAGING_NEVER,
} GstGpuFanStaging;

#define GST_TYPE_GPUFAN_STAGING (gst_gpufan_staging_get_type ())
static GType
gst_gpufan_staging_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    { GST_GPUFAN_STAGING_AUTO,
        "GPU lanes copy frames that are not in pinned memory of their NUMA "
        "node",
        "auto" },
    { GST_GPUFAN_STAGING_ALWAYS,
        "Every lane copies frames that are not in its NUMA node's pool",
        "always" },
    { GST_GPUFAN_STAGING_NEVER, "No lane copies frames", "never" },
    { 0, nullptr, nullptr },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstGpuFanStaging", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

/* ------------------------------------------------------------------------ */
/* A lane: the queue between the chain function and the lane's worker. */

namespace {

enum class ItemKind {
  kBuffer,         /* a scheduled buffer (has a seq) */
  kScheduledEvent, /* a GAP event, scheduled like a buffer (has a seq) */
  kEvent,          /* a serialized event every lane gets (no seq) */
};

/* Owns one reference to a buffer or event. */
struct QueuedItem {
  GstMiniObject * obj = nullptr;
  guint64 seq = 0;
  ItemKind kind = ItemKind::kEvent;
  bool awaited = false; /* a gpufanin completes it (Dispatch::awaited) */

  QueuedItem () = default;
  QueuedItem (GstMiniObject * o, guint64 s, ItemKind k)
      : obj (o), seq (s), kind (k)
  {
  }
  QueuedItem (QueuedItem && other) noexcept
      : obj (other.obj), seq (other.seq), kind (other.kind),
        awaited (other.awaited)
  {
    other.obj = nullptr;
  }
  QueuedItem & operator= (QueuedItem && other) noexcept
  {
    if (this != &other) {
      if (obj)
        gst_mini_object_unref (obj);
      obj = other.Steal ();
      seq = other.seq;
      kind = other.kind;
      awaited = other.awaited;
    }
    return *this;
  }
  QueuedItem (const QueuedItem &) = delete;
  QueuedItem & operator= (const QueuedItem &) = delete;
  ~QueuedItem ()
  {
    if (obj)
      gst_mini_object_unref (obj);
  }
  GstMiniObject * Steal ()
  {
    GstMiniObject * o = obj;
    obj = nullptr;
    return o;
  }
};

struct Lane {
  Lane (GstGpuFanOut * e, GstPad * p, guint i)
      : element (e), pad (GST_PAD (gst_object_ref (p))), id (i)
  {
  }

  GstGpuFanOut * const element; /* not reffed: the element owns the lane */
  GstPad * const pad;
  const guint id;

  std::mutex lock;
  std::condition_variable cond;
  std::deque<QueuedItem> queue; /* bounded by the Session's lane queue size */
  /* Inactive or flushing: accept nothing. Written under `lock` (the
   * condition variable protocol), atomic so that eligibility can be read
   * without it: the unlink function runs with pad locks held, and the lane
   * lock is taken before pad locks elsewhere. */
  std::atomic<bool> flushing{ true };
  bool busy = false; /* the worker is handling an item */
  bool eos_pushed = false;
  /* The last item the worker pushed, and when an idle stalled lane next
   * sends a marker to see whether its branch answers again (steady ns). */
  guint64 last_seq = 0;
  gint64 next_liveness_ns = 0;

  /* Last flow return of a push on this lane; sticky until relink/flush. */
  std::atomic<GstFlowReturn> last_ret{ GST_FLOW_OK };
  /* Ask the branch whether a gpufanin is at its end before the next item. */
  std::atomic<bool> needs_probe{ true };
  /* Set by the link/unlink functions: an unlinked lane gets no items. */
  std::atomic<bool> linked{ false };
  /* Counts links: a NOT_LINKED from a push that began before the latest
   * link is stale. */
  std::atomic<guint> link_generation{ 0 };

  /* Where the lane runs (under the element's lanes_lock). Placed once per
   * NULL->READY cycle, or earlier when a branch asks for its CUDA context,
   * and kept: a branch that bound to a GPU must not see its lane move. */
  bool placed = false;
  gpufan::Device device;

  /* The host pool of the device's NUMA node and whether frames are copied
   * into it before they enter the branch. Under staging_lock, a leaf lock
   * never held across a call into GStreamer: the statistics read these
   * from any thread, even from a bus sync handler while `lock` is held. */
  std::mutex staging_lock;
  GstAllocator * allocator = nullptr;
  bool stage = false;
  gint stage_node = -1;
  bool stage_pinned = false;
  std::atomic<guint64> copies{ 0 };
  std::atomic<guint64> copies_skipped{ 0 };

  ~Lane ()
  {
    gst_object_unref (pad);
    if (allocator)
      gst_object_unref (allocator);
  }
};

using LanePtr = std::shared_ptr<Lane>;

} // namespace

struct GstGpuFanOutPrivate {
  /* holds policy, queue-size and max-in-flight (thread-safe) */
  std::shared_ptr<gpufan::Session> session = gpufan::Session::Create (
      gpufan::SessionConfig{ policy_from_enum (DEFAULT_POLICY),
          DEFAULT_QUEUE_SIZE, DEFAULT_MAX_IN_FLIGHT });

  std::atomic<guint> stats_interval_ms{ DEFAULT_STATS_INTERVAL };

  /* Device settings (properties), under settings_lock. */
  std::mutex settings_lock;
  std::string devices_text = DEFAULT_DEVICES;
  /* property values that did not parse, by property: reported at
   * NULL->READY */
  std::map<guint, std::string> settings_errors;
  gpufan::DeviceSpec device_spec;
  gpufan::PlacementHints hints;
  std::string min_compute_capability = DEFAULT_MIN_COMPUTE_CAPABILITY;
  guint require_codecs = DEFAULT_REQUIRE_CODECS;
  guint host_pool_mib = DEFAULT_HOST_POOL_SIZE;
  GstGpuFanStaging staging = DEFAULT_STAGING;
  /* the stream's caps are in system memory (no caps features but
   * memory:SystemMemory): only then is staging or a host pool of use */
  std::atomic<bool> host_memory_caps{ true };
  /* the "No GPU" warning was posted since the last READY->NULL */
  std::atomic<bool> no_gpu_warned{ false };
  /* some lane's needs_probe is set: saves looking at every lane per buffer */
  std::atomic<bool> probe_pending{ true };
  /* While a lane is joining (its branch may not reach the fan-in yet), its
   * branch is probed again every so many dispatches, doubling up to
   * kMaxJoiningProbeInterval; a link resets it. Streaming thread only. */
  guint joining_probe_interval = 1;
  guint dispatches_since_joining_probe = 0;
  std::atomic<bool> reset_joining_probe{ false };

  std::mutex lanes_lock;
  std::map<guint, LanePtr> lanes;

  std::atomic<guint32> caps_epoch{ 0 };
  std::atomic<gint64> last_stats_post_ns{ 0 };
  std::atomic<bool> stats_posted{ false };
  std::atomic<bool> lane_error_posted{ false };

  /* Upstream events come once per lane (gpufanin forwards to all its sink
   * pads): forward each seqnum once. */
  std::mutex upstream_lock;
  GstGpuFanSeqnumMemory upstream_seqnums;
};

struct _GstGpuFanOut {
  GstElement parent;
  GstPad * sinkpad;
  GstGpuFanOutPrivate * priv;
};

struct _GstGpuFanOutPad {
  GstPad parent;
  GstGpuFanOut * fanout; /* not reffed: the element outlives its pads */
  guint lane;
  gdouble weight; /* under the object lock */
  gint device;    /* GPU ordinal, -1: from the element; under the object lock */
  /* Threads for the lane's task, bound to the device's CPUs (or nullptr:
   * GStreamer's default pool). Under the object lock: read when the task is
   * created, with the lane lock held. */
  GstGpuFanTaskPool * task_pool;
};

enum {
  PROP_0,
  PROP_POLICY,
  PROP_QUEUE_SIZE,
  PROP_MAX_IN_FLIGHT,
  PROP_STATS,
  PROP_STATS_INTERVAL,
  PROP_DEVICES,
  PROP_MIN_FREE_MEMORY,
  PROP_MIN_COMPUTE_CAPABILITY,
  PROP_REQUIRE_CODECS,
  PROP_HOST_POOL_SIZE,
  PROP_STAGING,
};

enum {
  PROP_PAD_0,
  PROP_PAD_WEIGHT,
  PROP_PAD_LANE,
  PROP_PAD_DEVICE,
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src_%u",
    GST_PAD_SRC, GST_PAD_REQUEST, GST_STATIC_CAPS_ANY);

#define gst_gpufan_out_parent_class parent_class
G_DEFINE_TYPE (GstGpuFanOut, gst_gpufan_out, GST_TYPE_ELEMENT);
G_DEFINE_TYPE (GstGpuFanOutPad, gst_gpufan_out_pad, GST_TYPE_PAD);

GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (gpufanout, "gpufanout", GST_RANK_NONE,
    GST_TYPE_GPUFAN_OUT,
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_out_debug, "gpufanout", 0,
        "gpufan fan-out"));

/* ------------------------------------------------------------------------ */
/* Pad */

static GstGpuFanOut *
pad_get_element (GstPad * pad)
{
  GstObject * parent = gst_object_get_parent (GST_OBJECT (pad));
  return parent ? GST_GPUFAN_OUT (parent) : nullptr;
}

static void unplace_lane (GstGpuFanOut * self, guint id);

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

/* ------------------------------------------------------------------------ */
/* Lanes */

static LanePtr
find_lane (GstGpuFanOut * self, guint id)
{
  std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
  auto it = self->priv->lanes.find (id);
  return it == self->priv->lanes.end () ? nullptr : it->second;
}

static std::vector<LanePtr>
snapshot_lanes (GstGpuFanOut * self)
{
  std::vector<LanePtr> out;
  std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
  out.reserve (self->priv->lanes.size ());
  for (auto & kv : self->priv->lanes)
    out.push_back (kv.second);
  return out;
}

/* ------------------------------------------------------------------------ */
/* Placement: which device a lane runs on, and its worker threads */

static gint
pad_device (GstPad * pad)
{
  GST_OBJECT_LOCK (pad);
  gint device = GST_GPUFAN_OUT_PAD (pad)->device;
  GST_OBJECT_UNLOCK (pad);
  return device;
}

/* Decides lane @id's device from the settings. Takes settings_lock: call
 * without lanes_lock. */
static gpufan::Placement
compute_placement (GstGpuFanOut * self, guint id, gint pad_gpu)
{
  gpufan::DeviceSpec spec;
  gpufan::PlacementHints hints;
  {
    std::lock_guard<std::mutex> lk (self->priv->settings_lock);
    spec = self->priv->device_spec;
    hints = self->priv->hints;
  }
  return gpufan::PlaceLane (spec, hints,
      gst_gpufan_device_registry ().devices (), id, pad_gpu,
      gst_gpufan_device_free_memory);
}

/* Records @device as lane's, with a task pool bound to the device's CPUs
 * for the lane's next task (the current one, if any, keeps its thread). */
static void
apply_placement (GstGpuFanOut * self, const LanePtr & lane,
    const gpufan::Device & device, guint host_pool_mib,
    GstGpuFanStaging staging)
{
  GstGpuFanTaskPool * pool = nullptr;
  if (!device.local_cpus.empty ())
    pool = gst_gpufan_task_pool_new (device.local_cpus, gst_gpufan_bind_thread);
  GST_OBJECT_LOCK (lane->pad);
  GstGpuFanTaskPool * old = GST_GPUFAN_OUT_PAD (lane->pad)->task_pool;
  GST_GPUFAN_OUT_PAD (lane->pad)->task_pool = pool;
  GST_OBJECT_UNLOCK (lane->pad);
  gst_clear_object (&old);

  GstAllocator * allocator = host_pool_mib
      ? gst_gpufan_host_allocator_get (device.numa_node, host_pool_mib)
      : nullptr;
  {
    std::lock_guard<std::mutex> lk (lane->staging_lock);
    std::swap (lane->allocator, allocator);
    const bool gpu = device.kind == gpufan::DeviceKind::kCuda;
    lane->stage = lane->allocator
        && (staging == GST_GPUFAN_STAGING_ALWAYS
            || (staging == GST_GPUFAN_STAGING_AUTO && gpu));
    lane->stage_node = MAX (device.numa_node, -1);
    /* a GPU needs pinned memory; a CPU lane only local memory */
    lane->stage_pinned = gpu;
  }
  if (allocator)
    gst_object_unref (allocator);

  lane->device = device;
  lane->placed = true;
  self->priv->session->SetLaneDevice (lane->id, device);
  GST_INFO_OBJECT (lane->pad, "lane %u on %s", lane->id,
      device.Describe ().c_str ());
}

/* Places the lane unless it is placed already; FALSE with @error set when
 * no device fits. */
static gboolean
place_lane (GstGpuFanOut * self, const LanePtr & lane, std::string * error)
{
  {
    std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
    if (lane->placed)
      return TRUE;
  }
  gpufan::Placement placement
      = compute_placement (self, lane->id, pad_device (lane->pad));
  if (!placement.ok) {
    *error = placement.error;
    return FALSE;
  }
  guint host_pool_mib;
  GstGpuFanStaging staging;
  {
    std::lock_guard<std::mutex> lk (self->priv->settings_lock);
    host_pool_mib = self->priv->host_pool_mib;
    staging = self->priv->staging;
  }
  std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
  if (!lane->placed) /* a concurrent placement won */
    apply_placement (self, lane, placement.device, host_pool_mib, staging);
  return TRUE;
}

/* Lanes are not moved while streaming: a branch bound to a GPU keeps it.
 * Settings changed then take effect at the next start (READY->NULL
 * unplaces every lane). */
static bool
lanes_streaming (GstGpuFanOut * self)
{
  GST_OBJECT_LOCK (self);
  bool streaming = GST_STATE (self) >= GST_STATE_PAUSED
      || GST_STATE_PENDING (self) >= GST_STATE_PAUSED;
  GST_OBJECT_UNLOCK (self);
  if (streaming)
    GST_WARNING_OBJECT (self,
        "device settings changed while streaming take "
        "effect at the next start");
  return streaming;
}

/* The settings changed: the lane is placed again at the next start. */
static void
unplace_lane (GstGpuFanOut * self, guint id)
{
  if (lanes_streaming (self))
    return;
  std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
  auto it = self->priv->lanes.find (id);
  if (it != self->priv->lanes.end ())
    it->second->placed = false;
}

/* Every lane is placed again at its next placement. */
static void
forget_placements (GstGpuFanOut * self)
{
  std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
  for (auto & kv : self->priv->lanes)
    kv.second->placed = false;
}

static void
unplace_all_lanes (GstGpuFanOut * self)
{
  if (!lanes_streaming (self))
    forget_placements (self);
}

/* At NULL->READY: every lane gets its device, or the element fails with
 * a message that says what to change. Running CPU lanes because the
 * machine has no GPU is worth one warning (devices=cpu asks for them). */
static gboolean
place_all_lanes (GstGpuFanOut * self)
{
  std::string settings_error;
  {
    std::lock_guard<std::mutex> lk (self->priv->settings_lock);
    if (!self->priv->settings_errors.empty ())
      settings_error = self->priv->settings_errors.begin ()->second;
  }
  if (!settings_error.empty ()) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("%s", settings_error.c_str ()), (nullptr));
    return FALSE;
  }

  bool cpu_by_default = false;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::string error;
    if (!place_lane (self, lane, &error)) {
      GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
          ("No device for lane %u: %s", lane->id, error.c_str ()),
          ("devices, min-free-memory, min-compute-capability, require-codecs "
           "or the pad's device property exclude every device"));
      return FALSE;
    }
    std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
    cpu_by_default |= lane->device.kind == gpufan::DeviceKind::kCpu;
  }

  bool auto_mode;
  {
    std::lock_guard<std::mutex> lk (self->priv->settings_lock);
    auto_mode = self->priv->device_spec.mode == gpufan::DeviceSpec::Mode::kAuto;
  }
  /* once per start (placement runs at NULL->READY and READY->PAUSED) */
  if (auto_mode && cpu_by_default && !self->priv->no_gpu_warned.exchange (true))
    GST_ELEMENT_WARNING (self, RESOURCE, NOT_FOUND,
        ("No GPU: running CPU lanes (%s)",
            gst_gpufan_no_gpu_reason ().c_str ()),
        ("devices=auto found no CUDA device; set devices=cpu to ask for CPU "
         "lanes and silence this warning"));
  return TRUE;
}

/* Returns FALSE (and leaves @item to be freed) if the lane is flushing. */
static gboolean
lane_enqueue (const LanePtr & lane, QueuedItem && item)
{
  {
    std::lock_guard<std::mutex> lk (lane->lock);
    if (lane->flushing)
      return FALSE;
    lane->queue.push_back (std::move (item));
  }
  /* the worker, or a serialized query waiting; after unlocking, so that the
   * woken thread does not block on the lock at once */
  lane->cond.notify_all ();
  return TRUE;
}

/* Stops (or restarts) a lane's queue; flushed items are dropped. (The sticky
 * events among them are not lost: a lane restarting after a flush gets the
 * sink pad's current ones, see restart_lane.) */
static void
lane_set_flushing (const LanePtr & lane, bool flushing)
{
  std::deque<QueuedItem> dropped;
  {
    std::lock_guard<std::mutex> lk (lane->lock);
    lane->flushing = flushing;
    if (flushing)
      dropped.swap (lane->queue);
    lane->cond.notify_all ();
  }
  /* dropped items are unreffed here, outside the lock */
}

static bool
flow_is_fatal (GstFlowReturn ret)
{
  return ret < GST_FLOW_EOS;
}

static void
lane_update_eligibility (GstGpuFanOut * self, const LanePtr & lane)
{
  self->priv->session->SetLaneEligible (lane->id,
      !lane->flushing.load () && lane->linked.load ()
          && lane->last_ret.load () == GST_FLOW_OK);
}

/* Records a lane's push result; a fatal one is reported once, naming the
 * lane and its device. */
static void
lane_set_result (GstGpuFanOut * self, const LanePtr & lane, GstFlowReturn ret)
{
  lane->last_ret = ret;
  lane_update_eligibility (self, lane);

  if (!flow_is_fatal (ret))
    return;

  /* Once per stream: an error downstream of gpufanin comes back up every
   * lane, and only the first lane that saw it is worth naming. */
  if (!self->priv->lane_error_posted.exchange (true)) {
    gpufan::SessionStats stats = self->priv->session->Stats ();
    std::string device = "?";
    for (const auto & l : stats.lanes)
      if (l.lane == lane->id)
        device = l.device.Describe ();
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Processing branch of lane %u (%s:%s, device %s) failed: %s", lane->id,
            GST_DEBUG_PAD_NAME (lane->pad), device.c_str (),
            gst_flow_get_name (ret)),
        ("push on lane %u returned %s (%d)", lane->id, gst_flow_get_name (ret),
            ret));
  }
}

/* Combines the lanes' sticky results the way tee does: FLUSHING wins, then
 * an error, NOT_LINKED only if every lane is not linked, EOS if no lane can
 * take data and one ended. */
static GstFlowReturn
combine_lane_results (GstGpuFanOut * self)
{
  std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
  if (self->priv->lanes.empty ())
    return GST_FLOW_NOT_LINKED;

  bool any_ok = false, any_eos = false, flushing = false;
  GstFlowReturn fatal = GST_FLOW_OK;
  for (auto & kv : self->priv->lanes) {
    GstFlowReturn r = kv.second->last_ret.load ();
    if (r == GST_FLOW_OK)
      any_ok = true;
    else if (r == GST_FLOW_FLUSHING)
      flushing = true;
    else if (r == GST_FLOW_EOS)
      any_eos = true;
    else if (flow_is_fatal (r))
      fatal = r;
  }
  if (flushing)
    return GST_FLOW_FLUSHING;
  if (fatal != GST_FLOW_OK)
    return fatal;
  if (any_ok)
    return GST_FLOW_OK;
  return any_eos ? GST_FLOW_EOS : GST_FLOW_NOT_LINKED;
}

static void
request_probe (GstGpuFanOut * self, const LanePtr & lane)
{
  lane->needs_probe = true;
  self->priv->probe_pending = true;
  self->priv->reset_joining_probe = true;
}

/* A joining lane gets items only once a fan-in claims it, which it does
 * when the pairing probe through its branch reaches one: probe its branch
 * again now and then (the branch may be completed anywhere along it, so no
 * link of ours announces that). */
static void
reprobe_joining_lanes (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  if (priv->reset_joining_probe.exchange (false)) {
    priv->joining_probe_interval = 1;
    priv->dispatches_since_joining_probe = 0;
  }
  if (++priv->dispatches_since_joining_probe < priv->joining_probe_interval)
    return;
  priv->dispatches_since_joining_probe = 0;
  priv->joining_probe_interval
      = MIN (priv->joining_probe_interval * 2, kMaxJoiningProbeInterval);
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (lane->linked.load () && !priv->session->IsLaneClaimed (lane->id)) {
      lane->needs_probe = true;
      priv->probe_pending = true;
    }
  }
}

static bool
any_lane_inactive (GstGpuFanOut * self)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (lane->flushing.load ())
      return true;
  }
  return false;
}

/* Before a lane's first item (and after a relink or a new stream), ask its
 * branch whether a gpufanin is at the end; the fan-in claims the lane. */
static void
probe_lanes (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;

  if (!priv->probe_pending.exchange (false))
    return;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (!lane->needs_probe.exchange (false))
      continue;
    if (priv->session->IsLaneClaimed (lane->id))
      continue;
    GstQuery * query = gst_gpufan_pair_query_new (&priv->session, lane->id,
        GST_ELEMENT (self));
    gboolean answered = gst_pad_peer_query (lane->pad, query);
    GST_DEBUG_OBJECT (lane->pad, "pairing probe: %s",
        answered && gst_gpufan_pair_query_claimed (query)
            ? "claimed by a gpufanin"
            : "no gpufanin downstream");
    gst_query_unref (query);
  }
}

/* The fan-out's own per-lane figures: where the lane's thread runs. */
static GstGpuFanLaneDecorator
lane_decorator (GstGpuFanOut * self)
{
  return [self] (guint id, GstStructure * s) {
    LanePtr lane = find_lane (self, id);
    if (!lane)
      return;
    std::string threads = "default task pool (device CPUs unknown)";
    GST_OBJECT_LOCK (lane->pad);
    if (GstGpuFanTaskPool * pool = GST_GPUFAN_OUT_PAD (lane->pad)->task_pool)
      threads = gst_gpufan_task_pool_binding (pool);
    GST_OBJECT_UNLOCK (lane->pad);
    gst_structure_set (s, "worker-thread", G_TYPE_STRING, threads.c_str (),
        "copies", G_TYPE_UINT64, lane->copies.load (), "copies-skipped",
        G_TYPE_UINT64, lane->copies_skipped.load (), nullptr);
    GstAllocator * allocator = nullptr;
    {
      std::lock_guard<std::mutex> lk (lane->staging_lock);
      if (lane->allocator)
        allocator = GST_ALLOCATOR (gst_object_ref (lane->allocator));
    }
    if (allocator) {
      gst_gpufan_host_allocator_stats_to_structure (allocator, s);
      gst_object_unref (allocator);
    }
  };
}

static void
post_stats (GstGpuFanOut * self)
{
  gst_element_post_message (GST_ELEMENT (self),
      gst_gpufan_stats_message_new (GST_OBJECT (self), *self->priv->session));
}

static void
maybe_post_interval_stats (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  guint interval_ms = priv->stats_interval_ms.load ();
  if (interval_ms == 0)
    return;
  gint64 now = priv->session->clock ().NowNs ();
  gint64 last = priv->last_stats_post_ns.load ();
  if (now - last < (gint64)interval_ms * GST_MSECOND)
    return;
  if (priv->last_stats_post_ns.compare_exchange_strong (last, now))
    post_stats (self);
}

/* When every lane is pushing EOS and no gpufanin waits for any of them, the
 * fan-out posts the final statistics itself. */
static void
on_lane_eos (GstGpuFanOut * self)
{
  GstGpuFanOutPrivate * priv = self->priv;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<std::mutex> lk (lane->lock);
    if (!lane->eos_pushed)
      return;
  }
  gpufan::SessionStats stats = priv->session->Stats ();
  for (const auto & l : stats.lanes)
    if (l.claimed)
      return; /* gpufanin posts them */
  if (!priv->stats_posted.exchange (true)) {
    GST_DEBUG_OBJECT (self, "every lane pushed EOS, posting statistics");
    post_stats (self);
  }
}

static gpufan::PushOutcome
outcome_of (GstFlowReturn ret)
{
  if (ret == GST_FLOW_OK)
    return gpufan::PushOutcome::kDelivered;
  if (flow_is_fatal (ret))
    return gpufan::PushOutcome::kFailed;
  return gpufan::PushOutcome::kDropped;
}

/* Copies a frame into the lane's NUMA-local (pinned, for a GPU) pool
 * memory unless it is there already: upstream that used the pool the
 * fan-out proposed needs no copy. A full pool lets the frame through as it
 * is. Frames in device memory (caps features other than system memory:
 * CUDA, GL, DMABuf) are left alone. On the lane's thread, without the lane
 * lock (the item is popped and the lane busy). */
static void
stage_item (const LanePtr & lane, QueuedItem & item)
{
  GstAllocator * allocator = nullptr;
  gint node;
  gboolean need_pinned;
  {
    std::lock_guard<std::mutex> lk (lane->staging_lock);
    if (!lane->stage || !lane->allocator)
      return;
    allocator = GST_ALLOCATOR (gst_object_ref (lane->allocator));
    node = lane->stage_node;
    need_pinned = lane->stage_pinned;
  }
  GstBuffer * buffer = GST_BUFFER_CAST (item.obj);
  if (lane->element->priv->host_memory_caps.load ()
      && !gst_gpufan_buffer_is_local (buffer, node, need_pinned)) {
    gboolean copied;
    std::string why_not;
    item.obj = GST_MINI_OBJECT_CAST (
        gst_gpufan_stage_buffer (GST_BUFFER_CAST (item.Steal ()), allocator,
            &copied, &why_not));
    if (copied) {
      lane->copies++;
    } else {
      lane->copies_skipped++;
      GST_LOG_OBJECT (lane->pad, "frame not staged: %s", why_not.c_str ());
    }
  }
  gst_object_unref (allocator);
}

/* Pushes a marker behind item @seq (see gst_gpufan_marker_new): the fan-in
 * proves the item dropped if it gets the marker and not the item. */
static void
push_marker (GstGpuFanOut * self, const LanePtr & lane, guint64 seq)
{
  GST_LOG_OBJECT (lane->pad, "marker behind item %" G_GUINT64_FORMAT, seq);
  gst_pad_push_event (lane->pad,
      gst_gpufan_marker_new (self->priv->session->id (), lane->id, seq));
}

/* How long an idle lane worker sleeps before it looks again. A stalled lane
 * sends a marker every stall-timeout while idle (its branch may answer
 * again, as a valve that opens does); TRUE in @due when that is now. Call
 * with lane->lock held. */
static std::chrono::nanoseconds
lane_idle_wait_unlocked (GstGpuFanOut * self, const LanePtr & lane, bool * due)
{
  gpufan::Session & session = *self->priv->session;
  *due = false;
  if (!session.IsLaneStalled (lane->id) || !session.IsLaneClaimed (lane->id)) {
    lane->next_liveness_ns = 0;
    return kLaneWaitSlice;
  }
  const gint64 now = session.clock ().NowNs ();
  if (lane->next_liveness_ns == 0)
    lane->next_liveness_ns = now + session.stall_timeout_ns ();
  if (now >= lane->next_liveness_ns) {
    lane->next_liveness_ns = now + session.stall_timeout_ns ();
    *due = true;
    return std::chrono::nanoseconds (0);
  }
  return std::min<std::chrono::nanoseconds> (kLaneWaitSlice,
      std::chrono::nanoseconds (lane->next_liveness_ns - now));
}

/* Pushes a scheduled item (a buffer, or a GAP event) into the branch and
 * tells the session; a marker follows when the session asks for one. */
static void
push_scheduled_item (GstGpuFanOut * self, const LanePtr & lane,
    QueuedItem & item)
{
  gpufan::Session & session = *self->priv->session;
  if (!session.MarkStarted (lane->id, item.seq)) {
    /* given up already (its lane stalled) or forgotten (flush): pushing it
     * would only make it late */
    GST_LOG_OBJECT (lane->pad,
        "item %" G_GUINT64_FORMAT " no longer awaited, "
        "not pushed",
        item.seq);
    return;
  }
  lane->last_seq = item.seq;

  if (item.kind == ItemKind::kScheduledEvent) {
    /* a GAP the branch refused is a dropped item, not a lane result */
    bool ok = !flow_is_fatal (lane->last_ret.load ())
        && gst_pad_push_event (lane->pad, GST_EVENT_CAST (item.Steal ()));
    if (session.OnPushed (lane->id, item.seq,
            ok ? gpufan::PushOutcome::kDelivered
               : gpufan::PushOutcome::kDropped))
      push_marker (self, lane, item.seq);
    return;
  }

  /* a staging copy is part of the lane's work (its service time) */
  stage_item (lane, item);
  if (flow_is_fatal (lane->last_ret.load ())) {
    /* never feed a failed branch; the item counts as failed */
    session.OnPushed (lane->id, item.seq, gpufan::PushOutcome::kFailed);
    return;
  }
  guint link_generation = lane->link_generation.load ();
  GstFlowReturn ret = gst_pad_push (lane->pad, GST_BUFFER_CAST (item.Steal ()));
  if (session.OnPushed (lane->id, item.seq, outcome_of (ret)))
    push_marker (self, lane, item.seq);
  if (ret == GST_FLOW_FLUSHING) {
    /* our own flush, deactivation or release of this lane: not a result
     * the branch gave */
    std::lock_guard<std::mutex> lk (lane->lock);
    if (lane->flushing)
      ret = GST_FLOW_OK;
  }
  if (ret != GST_FLOW_OK) {
    GST_DEBUG_OBJECT (lane->pad, "push returned %s", gst_flow_get_name (ret));
    lane_set_result (self, lane, ret);
    if (ret == GST_FLOW_NOT_LINKED
        && link_generation != lane->link_generation.load ()) {
      /* relinked during the push: the link's reset wins */
      GstFlowReturn expected = GST_FLOW_NOT_LINKED;
      lane->last_ret.compare_exchange_strong (expected, GST_FLOW_OK);
      lane_update_eligibility (self, lane);
    }
  }
}

/* The lane's streaming thread: one item per call. The task owns a reference
 * to its lane (see start_lane_task), so a released lane outlives its task. */
static void
lane_loop (gpointer user_data)
{
  const LanePtr & lane = *static_cast<LanePtr *> (user_data);
  GstGpuFanOut * self = lane->element;
  QueuedItem item;

  {
    std::unique_lock<std::mutex> lk (lane->lock);
    bool liveness_due = false;
    while (lane->queue.empty () && !lane->flushing && !liveness_due)
      lane->cond.wait_for (lk,
          lane_idle_wait_unlocked (self, lane, &liveness_due));
    if (lane->flushing) {
      lk.unlock ();
      GST_DEBUG_OBJECT (lane->pad, "flushing, pausing lane task");
      gst_pad_pause_task (lane->pad);
      return;
    }
    if (lane->queue.empty ()) {
      /* idle and stalled: does the branch answer again? */
      guint64 seq = lane->last_seq;
      lk.unlock ();
      push_marker (self, lane, seq);
      return;
    }
    item = std::move (lane->queue.front ());
    lane->queue.pop_front ();
    lane->busy = true;
  }

  switch (item.kind) {
    case ItemKind::kEvent: {
      GstEvent * event = GST_EVENT_CAST (item.Steal ());
      if (GST_EVENT_TYPE (event) == GST_EVENT_EOS) {
        /* before the push: the pipeline's EOS must not overtake the stats */
        {
          std::lock_guard<std::mutex> lk (lane->lock);
          lane->eos_pushed = true;
        }
        on_lane_eos (self);
      }
      GST_LOG_OBJECT (lane->pad, "pushing %" GST_PTR_FORMAT, event);
      gst_pad_push_event (lane->pad, event);
      break;
    }
    case ItemKind::kScheduledEvent:
    case ItemKind::kBuffer:
      push_scheduled_item (self, lane, item);
      break;
  }

  {
    std::lock_guard<std::mutex> lk (lane->lock);
    lane->busy = false;
  }
  lane->cond.notify_all ();
}

/* Stores the sink pad's sticky events on a lane's pad, in their order, so
 * that they go out before its next buffer. EOS never; the segment only for a
 * new lane (after a flush a new segment follows). */
static void
copy_sticky_events (GstGpuFanOut * self, GstPad * srcpad, bool with_segment)
{
  struct Ctx {
    GstPad * pad;
    bool with_segment;
  } ctx = { srcpad, with_segment };
  gst_pad_sticky_events_foreach (
      self->sinkpad,
      [] (GstPad *, GstEvent ** event, gpointer user_data) -> gboolean {
        auto * c = static_cast<Ctx *> (user_data);
        GstEventType type = GST_EVENT_TYPE (*event);
        if (type != GST_EVENT_EOS
            && (type != GST_EVENT_SEGMENT || c->with_segment))
          gst_pad_store_sticky_event (c->pad, *event);
        return TRUE;
      },
      &ctx);
}

/* Starts (or resumes) the lane's task. A new task gets its own reference to
 * the lane; a paused task is resumed with the reference it has (GStreamer
 * ignores the data of a restart). Call with lane->lock held. (Starting a task
 * posts a stream-status message synchronously: a bus sync handler must not
 * call back into this element.) */
static gboolean
start_lane_task_unlocked (const LanePtr & lane)
{
  GST_OBJECT_LOCK (lane->pad);
  bool has_task = GST_PAD_TASK (lane->pad) != nullptr;
  GST_OBJECT_UNLOCK (lane->pad);
  if (has_task)
    return gst_pad_start_task (lane->pad, lane_loop, nullptr, nullptr);
  return gst_pad_start_task (lane->pad, lane_loop, new LanePtr (lane),
      [] (gpointer data) { delete static_cast<LanePtr *> (data); });
}

/* Restarts the lane after a flush unless its pad is not active (any more).
 * Under the lane lock, so that it cannot race with deactivation, which sets
 * flushing under the same lock before it stops the task. */
static void
restart_lane (GstGpuFanOut * self, const LanePtr & lane)
{
  {
    std::lock_guard<std::mutex> lk (lane->lock);
    if (GST_PAD_MODE (lane->pad) != GST_PAD_MODE_PUSH)
      return;
    lane->flushing = false;
    /* what the flush dropped from the queue (caps, tags, ...) still holds:
     * the task is paused here, so nothing can be stored out of order */
    copy_sticky_events (self, lane->pad, false);
    if (!start_lane_task_unlocked (lane))
      return;
  }
  lane_update_eligibility (self, lane);
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
    gboolean started;
    {
      std::lock_guard<std::mutex> lk (lane->lock);
      /* not flushing first, so that an event arriving meanwhile is queued;
       * the lane gets no buffer before lane_update_eligibility below */
      lane->flushing = false;
      copy_sticky_events (self, pad, true);
      /* A pad activated before it is added (a lane requested while
       * streaming) has no parent to announce its task through, so the task
       * would miss the lane's worker-thread pool: request_new_pad starts it
       * once the pad is added. Until then items wait in the queue. */
      started
          = GST_OBJECT_PARENT (pad) ? start_lane_task_unlocked (lane) : TRUE;
    }
    lane_update_eligibility (self, lane);
    return started;
  }

  lane_set_flushing (lane, true);
  lane_update_eligibility (self, lane);
  return gst_pad_stop_task (pad);
}

static GstPadLinkReturn
gst_gpufan_out_src_link (GstPad * pad, GstObject *, GstPad *)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT_PAD (pad)->fanout;
  if (LanePtr lane = find_lane (self, GST_GPUFAN_OUT_PAD (pad)->lane)) {
    /* first the generation: a push ending after it cannot record a stale
     * NOT_LINKED over the reset below */
    lane->link_generation++;
    GstFlowReturn expected = GST_FLOW_NOT_LINKED;
    lane->last_ret.compare_exchange_strong (expected, GST_FLOW_OK);
    request_probe (self, lane);
    lane->linked = true;
    lane_update_eligibility (self, lane);
  }
  return GST_PAD_LINK_OK;
}

static void
gst_gpufan_out_src_unlink (GstPad * pad, GstObject *)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT_PAD (pad)->fanout;
  if (LanePtr lane = find_lane (self, GST_GPUFAN_OUT_PAD (pad)->lane)) {
    request_probe (self, lane);
    lane->linked = false;
    lane_update_eligibility (self, lane);
  }
}

/* A branch element (cudaupload, nvh264enc, ...) asks for its CUDA context:
 * it gets its lane's device. Branch elements ask while the fan-out may
 * still be in NULL, so the lane is placed now if it is not yet. */
static gboolean
answer_cuda_context_query (GstGpuFanOut * self, GstPad * pad, GstQuery * query)
{
  LanePtr lane = find_lane (self, GST_GPUFAN_OUT_PAD (pad)->lane);
  std::string why_not;
  if (!lane || !place_lane (self, lane, &why_not)) {
    GST_WARNING_OBJECT (pad, "no device to answer a CUDA context query: %s",
        why_not.c_str ());
    return FALSE;
  }
  gpufan::Device device;
  {
    std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
    device = lane->device;
  }
  if (device.kind != gpufan::DeviceKind::kCuda) {
    /* a CPU lane has no CUDA context to give; upstream may have one */
    return gst_pad_query_default (pad, GST_OBJECT (self), query);
  }
  if (!gst_gpufan_answer_cuda_context_query (query, device.index, &why_not)) {
    GST_WARNING_OBJECT (pad,
        "cannot give lane %u the context of CUDA "
        "device %d: %s",
        lane->id, device.index, why_not.c_str ());
    return FALSE;
  }
  GST_DEBUG_OBJECT (pad, "gave the branch CUDA device %d", device.index);
  return TRUE;
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
    gst_gpufan_pair_query_set_session (query, self->priv->session,
        GST_GPUFAN_OUT_PAD (pad)->lane);
    gst_gpufan_pair_query_set_fanout (query, GST_ELEMENT (self));
    return TRUE;
  }
  if (gst_gpufan_is_cuda_context_query (query))
    return answer_cuda_context_query (self, pad, query);
  return gst_pad_query_default (pad, parent, query);
}

static gboolean
seen_upstream_event (GstGpuFanOut * self, guint32 seqnum)
{
  std::lock_guard<std::mutex> lk (self->priv->upstream_lock);
  return self->priv->upstream_seqnums.Seen (seqnum);
}

static gboolean
gst_gpufan_out_src_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);

  /* A seek (or any upstream event) that gpufanin sent up every lane goes
   * upstream once. */
  if (seen_upstream_event (self, gst_event_get_seqnum (event))) {
    GST_DEBUG_OBJECT (pad, "dropping duplicate %" GST_PTR_FORMAT, event);
    gst_event_unref (event);
    return TRUE;
  }
  return gst_pad_event_default (pad, parent, event);
}

/* ------------------------------------------------------------------------ */
/* Sink pad */

static GstFlowReturn
dispatch_item (GstGpuFanOut * self, GstMiniObject * obj, bool is_buffer,
    gint64 pts)
{
  GstGpuFanOutPrivate * priv = self->priv;

  GstFlowReturn ret = combine_lane_results (self);
  if (ret != GST_FLOW_OK) {
    gst_mini_object_unref (obj);
    return ret;
  }

  probe_lanes (self);

  for (;;) {
    gpufan::Dispatch d = priv->session->DispatchItem (pts);
    if (d.status == gpufan::DispatchStatus::kFlushing) {
      gst_mini_object_unref (obj);
      return GST_FLOW_FLUSHING;
    }
    if (d.status == gpufan::DispatchStatus::kNoLanes) {
      gst_mini_object_unref (obj);
      ret = combine_lane_results (self);
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

    if (d.lanes_joining)
      reprobe_joining_lanes (self);
    LanePtr lane = find_lane (self, d.lane);
    if (!lane)
      continue; /* released meanwhile; RemoveLane dropped it */

    guint64 session_id = priv->session->id ();
    if (is_buffer) {
      GstBuffer * buffer = gst_buffer_make_writable (GST_BUFFER_CAST (obj));
      /* a meta of an outer fan-out (nested pairs) stays */
      gst_buffer_remove_gpufan_meta (buffer, session_id);
      gst_buffer_add_gpufan_meta (buffer, session_id, d.seq, d.lane,
          priv->caps_epoch.load ());
      obj = GST_MINI_OBJECT_CAST (buffer);
    } else {
      GstEvent * event = gst_event_make_writable (GST_EVENT_CAST (obj));
      gst_gpufan_event_set_item (event, session_id, d.seq);
      obj = GST_MINI_OBJECT_CAST (event);
    }

    QueuedItem item (obj, d.seq,
        is_buffer ? ItemKind::kBuffer : ItemKind::kScheduledEvent);
    item.awaited = d.awaited;
    if (!lane_enqueue (lane, std::move (item))) {
      /* the lane is being deactivated or released: try another one */
      priv->session->OnPushed (d.lane, d.seq, gpufan::PushOutcome::kDropped);
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

static GstFlowReturn
gst_gpufan_out_chain (GstPad *, GstObject * parent, GstBuffer * buffer)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (parent);
  gint64 pts = GST_BUFFER_PTS_IS_VALID (buffer)
      ? (gint64)GST_BUFFER_PTS (buffer)
      : gpufan::kNoTime;
  return dispatch_item (self, GST_MINI_OBJECT_CAST (buffer), true, pts);
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
enqueue_event_on_all_lanes (GstGpuFanOut * self, GstEvent * event)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    QueuedItem item (GST_MINI_OBJECT_CAST (gst_event_ref (event)), 0,
        ItemKind::kEvent);
    lane_enqueue (lane, std::move (item));
  }
  gst_event_unref (event);
}

static gboolean caps_in_host_memory (GstCaps * caps);

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
        lane_set_flushing (lane, true);
      gboolean res = gst_pad_event_default (pad, parent, event);
      /* the pushes the lanes were blocked in have returned by now */
      for (const LanePtr & lane : lanes)
        gst_pad_pause_task (lane->pad);
      return res;
    }
    case GST_EVENT_FLUSH_STOP: {
      priv->session->Reset ();
      std::vector<LanePtr> lanes = snapshot_lanes (self);
      for (const LanePtr & lane : lanes) {
        GstFlowReturn r = lane->last_ret.load ();
        if (r == GST_FLOW_FLUSHING || r == GST_FLOW_EOS)
          lane->last_ret = GST_FLOW_OK;
        std::lock_guard<std::mutex> lk (lane->lock);
        lane->eos_pushed = false;
      }
      priv->stats_posted = false;
      gboolean res = gst_pad_event_default (pad, parent, event);
      priv->session->SetFlushing (false);
      /* only lanes whose pad is still active restart (not during
       * PAUSED->READY) */
      for (const LanePtr & lane : lanes)
        restart_lane (self, lane);
      return res;
    }
    case GST_EVENT_GAP: {
      /* a GAP stands for data: it is scheduled on one lane like a buffer */
      GstClockTime ts;
      gst_event_parse_gap (event, &ts, nullptr);
      gint64 pts = GST_CLOCK_TIME_IS_VALID (ts) ? (gint64)ts : gpufan::kNoTime;
      return dispatch_item (self, GST_MINI_OBJECT_CAST (event), false, pts)
          == GST_FLOW_OK;
    }
    case GST_EVENT_CAPS: {
      priv->caps_epoch++;
      GstCaps * caps;
      gst_event_parse_caps (event, &caps);
      priv->host_memory_caps = caps_in_host_memory (caps);
      break;
    }
    case GST_EVENT_STREAM_START:
      for (const LanePtr & lane : snapshot_lanes (self))
        request_probe (self, lane);
      break;
    case GST_EVENT_EOS:
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
  priv->session->MarkEventPosition (gst_event_get_seqnum (event));
  enqueue_event_on_all_lanes (self, event);
  return TRUE;
}

/* A pairing probe of an outer fan-out enters our pair: it crosses it through
 * one lane (our fan-in passes it on with the depth back down). */
static gboolean
forward_pair_query_downstream (GstGpuFanOut * self, GstQuery * query)
{
  gst_gpufan_pair_query_set_depth (query,
      gst_gpufan_pair_query_get_depth (query) + 1);
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (lane->linked.load ())
      return gst_pad_peer_query (lane->pad, query);
  }
  return FALSE;
}

/* A serialized query must not overtake what the lanes still hold (their
 * branch may not even have its caps yet): wait until every lane's queue is
 * empty and its worker idle. Flush-aware; FALSE if a lane is flushing. */
static gboolean
wait_lanes_drained (GstGpuFanOut * self)
{
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::unique_lock<std::mutex> lk (lane->lock);
    /* a stalled lane's branch may never return what it holds */
    while (!lane->flushing && (lane->busy || !lane->queue.empty ())
        && !self->priv->session->IsLaneStalled (lane->id))
      lane->cond.wait_for (lk, kLaneWaitSlice);
  }
  /* a lane being released or deactivated holds nothing any more; only our
   * own flush fails the query */
  return !self->priv->session->flushing ();
}

/* DRAIN: every branch must drain, not only the first that answers. */
static gboolean
drain_all_lanes (GstGpuFanOut * self, GstQuery * query)
{
  gboolean res = TRUE;
  for (const LanePtr & lane : snapshot_lanes (self)) {
    if (lane->linked.load ())
      res &= gst_pad_peer_query (lane->pad, query);
  }
  return res;
}

/* TRUE when @caps describe frames in system memory. */
static gboolean
caps_in_host_memory (GstCaps * caps)
{
  if (!caps || gst_caps_is_any (caps) || gst_caps_is_empty (caps))
    return TRUE;
  for (guint i = 0; i < gst_caps_get_size (caps); i++) {
    GstCapsFeatures * f = gst_caps_get_features (caps, i);
    if (f && !gst_caps_features_is_any (f)
        && !gst_caps_features_is_equal (f,
            GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY))
      return FALSE;
  }
  return TRUE;
}

/* The host allocator of the NUMA node most lanes are on (GPU lanes count
 * first: they need pinned memory), or nullptr when the pools are off. */
static GstAllocator *
proposed_allocator (GstGpuFanOut * self)
{
  std::map<GstAllocator *, int> votes;
  std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
  for (auto & kv : self->priv->lanes) {
    const LanePtr & lane = kv.second;
    std::lock_guard<std::mutex> lane_lk (lane->staging_lock);
    /* only lanes that want their frames in the pool (GPU lanes, or any lane
     * with staging=always) make the fan-out propose it */
    if (lane->allocator && lane->stage)
      votes[lane->allocator] += lane->stage_pinned ? 1000 : 1;
  }
  GstAllocator * best = nullptr;
  int best_votes = 0;
  for (auto & v : votes) {
    if (v.second > best_votes) {
      best = v.first;
      best_votes = v.second;
    }
  }
  return best ? GST_ALLOCATOR (gst_object_ref (best)) : nullptr;
}

/* Allocation: tee's aggregation over the lanes (largest size, largest
 * min-buffers, common metas), plus the buffers that can be in flight. */
static gboolean
aggregate_allocation (GstGpuFanOut * self, GstQuery * query)
{
  GstCaps * caps;
  gboolean need_pool;
  gst_query_parse_allocation (query, &caps, &need_pool);

  GstAllocationParams params;
  gst_allocation_params_init (&params);
  guint size = 0, min_buffers = 0, answered = 0;

  for (const LanePtr & lane : snapshot_lanes (self)) {
    GstQuery * q = gst_query_new_allocation (caps, need_pool);
    if (!gst_pad_peer_query (lane->pad, q)) {
      GST_DEBUG_OBJECT (lane->pad, "no allocation answer from this lane");
      gst_query_unref (q);
      continue;
    }

    for (guint i = 0; i < gst_query_get_n_allocation_params (q); i++) {
      GstAllocationParams p;
      gst_query_parse_nth_allocation_param (q, i, nullptr, &p);
      params.align = MAX (params.align, p.align);
      params.prefix = MAX (params.prefix, p.prefix);
      params.padding = MAX (params.padding, p.padding);
    }
    if (gst_query_get_n_allocation_pools (q) > 0) {
      guint s, m;
      gst_query_parse_nth_allocation_pool (q, 0, nullptr, &s, &m, nullptr);
      size = MAX (size, s);
      min_buffers = MAX (min_buffers, m);
    }

    /* keep only the metas every lane supports */
    if (answered == 0) {
      for (guint i = 0; i < gst_query_get_n_allocation_metas (q); i++) {
        const GstStructure * mp;
        GType api = gst_query_parse_nth_allocation_meta (q, i, &mp);
        gst_query_add_allocation_meta (query, api, mp);
      }
    } else {
      for (guint i = 0; i < gst_query_get_n_allocation_metas (query);) {
        GType api = gst_query_parse_nth_allocation_meta (query, i, nullptr);
        if (!gst_query_find_allocation_meta (q, api, nullptr))
          gst_query_remove_nth_allocation_meta (query, i);
        else
          i++;
      }
    }
    answered++;
    gst_query_unref (q);
  }

  GstAllocator * allocator
      = caps_in_host_memory (caps) ? proposed_allocator (self) : nullptr;
  if (answered == 0 && !allocator)
    return TRUE; /* upstream uses its defaults */

  if (params.align || params.prefix || params.padding || allocator)
    gst_query_add_allocation_param (query, allocator, &params);

  GstVideoInfo info;
  if (caps && gst_video_info_from_caps (&info, caps))
    size = MAX (size, (guint)GST_VIDEO_INFO_SIZE (&info));
  if (size) {
    /* every buffer in flight is held by a lane queue or a branch */
    min_buffers += self->priv->session->EffectiveMaxInFlight ();
    /* upstream writes straight into the lanes' NUMA-local (pinned) memory,
     * so that no lane has to stage a copy */
    GstBufferPool * pool = (allocator && need_pool)
        ? gst_gpufan_host_buffer_pool_new (allocator, caps, size, min_buffers)
        : nullptr;
    gst_query_add_allocation_pool (query, pool, size, min_buffers, 0);
    if (pool)
      gst_object_unref (pool);
  }
  if (allocator)
    gst_object_unref (allocator);
  return TRUE;
}

static gboolean
gst_gpufan_out_sink_query (GstPad * pad, GstObject * parent, GstQuery * query)
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
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Request pads */

static GstPad *
gst_gpufan_out_request_new_pad (GstElement * element, GstPadTemplate * templ,
    const gchar * name, const GstCaps *)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (element);
  GstGpuFanOutPrivate * priv = self->priv;
  guint index = 0;

  GstPad * pad;
  LanePtr lane;
  {
    std::lock_guard<std::mutex> lk (priv->lanes_lock);
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
    /* no items until the pad is active */
    priv->session->SetLaneEligible (index, false);
  }

  /* Lanes are placed at NULL->READY; one requested later is placed now. */
  GST_OBJECT_LOCK (self);
  bool started = GST_STATE (self) >= GST_STATE_READY;
  GST_OBJECT_UNLOCK (self);
  std::string error;
  if (started && !place_lane (self, lane, &error)) {
    GST_ELEMENT_WARNING (self, RESOURCE, NOT_FOUND,
        ("No device for a new lane %u: %s", index, error.c_str ()), (nullptr));
    {
      std::lock_guard<std::mutex> lk (priv->lanes_lock);
      priv->lanes.erase (index);
    }
    priv->session->RemoveLane (index);
    gst_object_unref (gst_object_ref_sink (pad));
    return nullptr;
  }

  gst_pad_set_activatemode_function (pad, gst_gpufan_out_src_activate_mode);
  gst_pad_set_query_function (pad, gst_gpufan_out_src_query);
  gst_pad_set_event_function (pad, gst_gpufan_out_src_event);
  gst_pad_set_link_function (pad, gst_gpufan_out_src_link);
  gst_pad_set_unlink_function (pad, gst_gpufan_out_src_unlink);
  GST_PAD_SET_PROXY_CAPS (pad);

  GST_DEBUG_OBJECT (self, "new lane %u", index);

  if (GST_PAD_IS_ACTIVE (self->sinkpad))
    gst_pad_set_active (pad, TRUE);
  gst_element_add_pad (element, pad);
  {
    /* the task deferred by activation (see src_activate_mode) */
    std::lock_guard<std::mutex> lk (lane->lock);
    if (GST_PAD_MODE (pad) == GST_PAD_MODE_PUSH && !lane->flushing)
      start_lane_task_unlocked (lane);
  }
  return pad;
}

static void
gst_gpufan_out_release_pad (GstElement * element, GstPad * pad)
{
  GstGpuFanOut * self = GST_GPUFAN_OUT (element);
  guint id = GST_GPUFAN_OUT_PAD (pad)->lane;

  GST_DEBUG_OBJECT (self, "releasing lane %u", id);
  /* no new items for it while its task is being stopped */
  self->priv->session->SetLaneEligible (id, false);
  LanePtr lane = find_lane (self, id);
  if (lane)
    lane_set_flushing (lane, true);
  gst_pad_set_active (pad, FALSE);
  /* a task left on an inactive pad would keep the lane (and the pad) alive */
  gst_pad_stop_task (pad);

  {
    std::lock_guard<std::mutex> lk (self->priv->lanes_lock);
    self->priv->lanes.erase (id);
  }
  self->priv->session->RemoveLane (id);
  gst_element_remove_pad (element, pad);
}

/* ------------------------------------------------------------------------ */
/* Element */

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

  GstStateChangeReturn ret
      = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
  if (ret == GST_STATE_CHANGE_FAILURE)
    return ret;

  if (transition == GST_STATE_CHANGE_READY_TO_NULL) {
    priv->no_gpu_warned = false;
    forget_placements (self);
  }

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    priv->session->Reset ();
    for (const LanePtr & lane : snapshot_lanes (self)) {
      lane->last_ret = GST_FLOW_OK;
      /* pairing is found again at the next start: the fan-in may be gone */
      priv->session->UnclaimLane (lane->id);
      request_probe (self, lane);
      std::lock_guard<std::mutex> lk (lane->lock);
      lane->eos_pushed = false;
    }
    priv->stats_posted = false;
    priv->lane_error_posted = false;
    priv->caps_epoch = 0;
  }
  return ret;
}

/* Parses a device setting into priv (under settings_lock). A value that
 * does not parse is kept as text and fails the next NULL->READY with a
 * message naming it: gst-launch users see it, a g_warning they might not. */
static void
set_device_setting (GstGpuFanOut * self, guint prop_id, const GValue * value)
{
  GstGpuFanOutPrivate * priv = self->priv;
  std::lock_guard<std::mutex> lk (priv->settings_lock);
  std::string error;
  switch (prop_id) {
    case PROP_DEVICES: {
      const gchar * text = g_value_get_string (value);
      priv->devices_text = text ? text : DEFAULT_DEVICES;
      gpufan::DeviceSpec spec;
      if (gpufan::DeviceSpec::Parse (priv->devices_text, &spec, &error))
        priv->device_spec = spec;
      else
        error = "Invalid devices " + error;
      break;
    }
    case PROP_MIN_FREE_MEMORY:
      priv->hints.min_free_memory = g_value_get_uint64 (value) * 1024 * 1024;
      break;
    case PROP_MIN_COMPUTE_CAPABILITY: {
      const gchar * text = g_value_get_string (value);
      priv->min_compute_capability = text ? text : "";
      gint major = 0, minor = 0;
      if (priv->min_compute_capability.empty ()
          || gst_gpufan_parse_compute_capability (text, &major, &minor)) {
        priv->hints.min_cc_major = major;
        priv->hints.min_cc_minor = minor;
      } else {
        error = "Invalid min-compute-capability '"
            + priv->min_compute_capability
            + "': expected MAJOR.MINOR, "
              "e.g. 8.6";
      }
      break;
    }
    case PROP_REQUIRE_CODECS:
      priv->require_codecs = g_value_get_flags (value);
      priv->hints.need_nvenc = priv->require_codecs & GST_GPUFAN_CODEC_NVENC;
      priv->hints.need_nvdec = priv->require_codecs & GST_GPUFAN_CODEC_NVDEC;
      break;
  }
  /* a good value clears its own property's error, not another's */
  if (error.empty ()) {
    priv->settings_errors.erase (prop_id);
  } else {
    priv->settings_errors[prop_id] = error;
    GST_WARNING_OBJECT (self, "%s", error.c_str ());
  }
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
    if (type == GST_STREAM_STATUS_TYPE_CREATE && object
        && G_VALUE_HOLDS (object, GST_TYPE_TASK)) {
      GstGpuFanOutPad * pad = GST_GPUFAN_OUT_PAD (GST_MESSAGE_SRC (message));
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
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      priv->host_pool_mib = g_value_get_uint (value);
    }
      unplace_all_lanes (self);
      break;
    case PROP_STAGING: {
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      priv->staging = (GstGpuFanStaging)g_value_get_enum (value);
    }
      unplace_all_lanes (self);
      break;
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
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      g_value_set_string (value, priv->devices_text.c_str ());
      break;
    }
    case PROP_MIN_FREE_MEMORY: {
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      g_value_set_uint64 (value, priv->hints.min_free_memory / (1024 * 1024));
      break;
    }
    case PROP_MIN_COMPUTE_CAPABILITY: {
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      g_value_set_string (value, priv->min_compute_capability.c_str ());
      break;
    }
    case PROP_REQUIRE_CODECS: {
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      g_value_set_flags (value, priv->require_codecs);
      break;
    }
    case PROP_HOST_POOL_SIZE: {
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      g_value_set_uint (value, priv->host_pool_mib);
      break;
    }
    case PROP_STAGING: {
      std::lock_guard<std::mutex> lk (priv->settings_lock);
      g_value_set_enum (value, priv->staging);
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
  gst_gpufan_unregister_lane_decorator (self->priv->session.get ());
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
   * and back-pressure reaches upstream.
   */
  g_object_class_install_property (gobject_class, PROP_QUEUE_SIZE,
      g_param_spec_uint ("queue-size", "Queue size",
          "Buffers queued per lane before the lane counts as full", 1, 1024,
          DEFAULT_QUEUE_SIZE,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:max-in-flight:
   *
   * Buffers dispatched and not yet output by gpufanin (or pushed, without a
   * fan-in): bounds the reorder window and the memory in use. 0 chooses
   * lanes × (queue-size + 2); with `adaptive`, up to twice that when the
   * lanes' speeds differ (room for the fast lanes while a slow one works).
   */
  g_object_class_install_property (gobject_class, PROP_MAX_IN_FLIGHT,
      g_param_spec_uint ("max-in-flight", "Max in flight",
          "Buffers dispatched but not yet output in order (0 = automatic: "
          "lanes x (queue-size + 2), up to twice that with adaptive)",
          0, 65536, DEFAULT_MAX_IN_FLIGHT,
          (GParamFlags)(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
              | GST_PARAM_MUTABLE_PLAYING)));

  /**
   * GstGpuFanOut:stats:
   *
   * A `gpufan-stats` structure: totals and, in the `lanes` array, one
   * structure per lane (device, dispatched, completed, dropped, failed,
   * timed-out, late, reorder-waits, queued, in-flight, service-time in ns,
   * fps). See docs/elements.md.
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
   * `cpu:N`: at most N of them.
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

  element_class->request_new_pad
      = GST_DEBUG_FUNCPTR (gst_gpufan_out_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR (gst_gpufan_out_release_pad);
  element_class->change_state = GST_DEBUG_FUNCPTR (gst_gpufan_out_change_state);
  element_class->post_message = GST_DEBUG_FUNCPTR (gst_gpufan_out_post_message);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template_with_gtype (element_class,
      &src_template, GST_TYPE_GPUFAN_OUT_PAD);

  gst_element_class_set_static_metadata (element_class, "GPU fan-out",
      "Generic",
      "Spreads buffers over parallel lanes (one per GPU, or CPU lanes); "
      "gpufanin restores their order",
      "gst-gpufan developers");

  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_POLICY, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_CODECS, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_STAGING, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api (GST_TYPE_GPUFAN_OUT_PAD, (GstPluginAPIFlags)0);
}

static void
gst_gpufan_out_init (GstGpuFanOut * self)
{
  self->priv = new GstGpuFanOutPrivate ();
  /* the fan-in's statistics show our per-lane fields too */
  gst_gpufan_register_lane_decorator (self->priv->session.get (),
      lane_decorator (self));

  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_chain));
  gst_pad_set_chain_list_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_chain_list));
  gst_pad_set_event_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_sink_event));
  gst_pad_set_query_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_sink_query));
  gst_pad_set_activatemode_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_gpufan_out_sink_activate_mode));
  GST_PAD_SET_PROXY_CAPS (self->sinkpad);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
}
