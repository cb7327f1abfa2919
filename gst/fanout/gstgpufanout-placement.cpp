/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Placement: which device each lane runs on (at NULL->READY, or when a
 * branch asks for its CUDA context), the lane's worker-thread pool, and the
 * staging copy of frames into the lane's NUMA-local host pool. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanout-private.h"

#include <algorithm>
#include <chrono>

#include "common/gstgpufanbinding.h"
#include "common/gstgpufancudacontext.h"
#include "common/gstgpufangpumove.h"
#include "common/gstgpufandevices.h"
#include "gpufan/cuda.h"

#define GST_CAT_DEFAULT gst_gpufan_out_debug

using namespace fanout;

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
    std::lock_guard<gpufan::Mutex> lk (self->priv->settings_lock);
    spec = self->priv->settings.device_spec;
    hints = self->priv->settings.hints;
  }
  return gpufan::PlaceLane (spec, hints,
      gst_gpufan_device_registry ().devices (), id, pad_gpu,
      gst_gpufan_device_free_memory);
}

/* Records @device as lane's, with a task pool bound to the device's CPUs
 * for the lane's next task (the current one, if any, keeps its thread), and
 * tells the Session what the lane's statistics show of both. */
static void
apply_placement (GstGpuFanOut * self, const LanePtr & lane,
    const gpufan::Device & device, guint host_pool_mib,
    GstGpuFanStaging staging)
{
  GstGpuFanTaskPool * pool = nullptr;
  gpufan::LaneInfo info{ DEFAULT_WORKER_THREAD, nullptr };
  if (!device.local_cpus.empty ()) {
    pool = gst_gpufan_task_pool_new (device.local_cpus, gst_gpufan_bind_thread);
    info.worker_thread = gst_gpufan_task_pool_binding (pool);
  }
  GST_OBJECT_LOCK (lane->pad);
  GstGpuFanTaskPool * old = GST_GPUFAN_OUT_PAD (lane->pad)->task_pool;
  GST_GPUFAN_OUT_PAD (lane->pad)->task_pool = pool;
  GST_OBJECT_UNLOCK (lane->pad);
  gst_clear_object (&old);

  GstAllocator * allocator = host_pool_mib
      ? gst_gpufan_host_allocator_get (device.numa_node, host_pool_mib)
      : nullptr;
  if (allocator)
    info.host_pool = gst_gpufan_host_allocator_pool (allocator);
  {
    std::lock_guard<gpufan::Mutex> lk (lane->staging_lock);
    std::swap (lane->allocator, allocator);
    lane->staging = gpufan::PlanStaging ((gpufan::StagingMode)staging, device,
        lane->allocator != nullptr);
    lane->stages = lane->staging.stage && lane->allocator;
  }
  if (allocator)
    gst_object_unref (allocator);

  lane->device = device;
  lane->placed = true;
  lane->context_checked = false;
  lane->gpu = device.kind == gpufan::DeviceKind::kCuda ? device.index : -1;
  self->priv->session->SetLaneDevice (lane->id, device);
  self->priv->session->SetLaneInfo (lane->id, std::move (info));
  GST_INFO_OBJECT (lane->pad, "lane %u on %s", lane->id,
      device.Describe ().c_str ());
}

/* Places the lane unless it is placed already; FALSE with @error set when
 * no device fits. */
gboolean
fanout::place_lane (GstGpuFanOut * self, const LanePtr & lane,
    std::string * error)
{
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    if (lane->placed)
      return TRUE;
  }
  std::optional<gpufan::Device> like;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    like.swap (self->priv->next_lane_device);
  }
  gpufan::Placement placement = like
      ? gpufan::Placement{ true, *like, "" }
      : compute_placement (self, lane->id, pad_device (lane->pad));
  if (!placement.ok) {
    *error = placement.error;
    /* a GPU asked for where CUDA cannot load: say so, not only "0 GPUs" */
    std::string why_not;
    if (gst_gpufan_device_registry ().gpu_count () == 0
        && !gpufan::cuda::Available (&why_not))
      *error += "; no NVIDIA driver or CUDA device is usable here (" + why_not
          + "): devices=cpu or devices=cpu:N runs CPU lanes";
    return FALSE;
  }
  guint host_pool_mib;
  GstGpuFanStaging staging;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->settings_lock);
    host_pool_mib = self->priv->settings.host_pool_mib;
    staging = self->priv->settings.staging;
  }
  std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
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
void
fanout::unplace_lane (GstGpuFanOut * self, guint id)
{
  if (lanes_streaming (self))
    return;
  std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
  auto it = self->priv->lanes.find (id);
  if (it != self->priv->lanes.end ())
    it->second->placed = false;
}

/* Every lane is placed again at its next placement. */
void
fanout::forget_placements (GstGpuFanOut * self)
{
  std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
  for (auto & kv : self->priv->lanes)
    kv.second->placed = false;
}

void
fanout::unplace_all_lanes (GstGpuFanOut * self)
{
  if (!lanes_streaming (self))
    forget_placements (self);
}

/* At NULL->READY: every lane gets its device, or the element fails with
 * a message that says what to change. Running CPU lanes because the
 * machine has no GPU is worth one warning (devices=cpu asks for them). */
gboolean
fanout::place_all_lanes (GstGpuFanOut * self)
{
  std::string settings_error;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->settings_lock);
    if (!self->priv->settings.settings_errors.empty ())
      settings_error = self->priv->settings.settings_errors.begin ()->second;
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
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    cpu_by_default |= lane->device.kind == gpufan::DeviceKind::kCpu;
  }

  for (const LanePtr & lane : snapshot_lanes (self))
    if (!bind_lane_branch (self, lane))
      return FALSE;

  bool auto_mode;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->settings_lock);
    auto_mode = self->priv->settings.device_spec.mode == gpufan::DeviceSpec::Mode::kAuto;
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

gboolean
fanout::bind_lane_branch (GstGpuFanOut * self, const LanePtr & lane,
    GstPad * peer)
{
  gint gpu;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    if (!lane->placed || lane->device.kind != gpufan::DeviceKind::kCuda)
      return TRUE;
    gpu = lane->device.index;
  }
  std::string error;
  for (GstElement * element :
      gst_gpufan_elements_downstream (lane->pad, peer)) {
    const GstGpuFanBinding bound = gst_gpufan_bind_element (element, gpu);
    gst_object_unref (element);
    if (!bound.done.empty ())
      GST_INFO_OBJECT (lane->pad, "%s", bound.done.c_str ());
    if (!bound.warning.empty ())
      GST_ELEMENT_WARNING (self, CORE, NEGOTIATION,
          ("Lane %u: %s", lane->id, bound.warning.c_str ()),
          ("the lane's GPU comes from devices or the pad's device property"));
    if (!bound.error.empty () && error.empty ())
      error = bound.error;
  }
  if (!error.empty ())
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("Lane %u's branch cannot run on its GPU: %s", lane->id,
            error.c_str ()),
        ("the lane's GPU comes from devices or the pad's device property"));
  return error.empty ();
}

/* Copies a frame into the lane's NUMA-local (pinned, for a GPU) pool
 * memory unless it is there already: upstream that used the pool the
 * fan-out proposed needs no copy. A full pool lets the frame through as it
 * is. Frames in device memory (caps features other than system memory:
 * CUDA, GL, DMABuf) are left alone. On the lane's thread, without the lane
 * lock (the item is popped and the lane busy). */
/* Once per placement, on a GPU lane's first frame: if it is in CUDA memory,
 * says in the log whether it is used in place (it is in the lanes' context
 * of the lane's GPU) or why not. */
static void
note_frame_context (const LanePtr & lane, GstBuffer * buffer)
{
  if (lane->context_checked.load (std::memory_order_relaxed))
    return;
  lane->context_checked = true;
  const gint gpu = lane->gpu.load ();
  std::string why_not;
  if (gpu < 0 || !gst_gpufan_cuda_frame_context (buffer, gpu, &why_not))
    return; /* not a GPU lane, or not a frame in CUDA memory */
  if (why_not.empty ())
    GST_INFO_OBJECT (lane->pad,
        "frames in the lanes' CUDA context of GPU %d: used in place", gpu);
  else
    GST_INFO_OBJECT (lane->pad, "frames not in the lane's CUDA context: %s",
        why_not.c_str ());
}

/* A frame in CUDA memory of another GPU is copied into the lane's GPU
 * (GstGpuFanGpuMove), through the lane's NUMA-local pinned host pool where
 * the GPUs have no peer access; one of the lane's GPU is used in place.
 * Counted either way (the statistics' gpu-* fields). On the lane's thread. */
static void
move_to_lane_gpu (const LanePtr & lane, QueuedItem & item)
{
  const gint gpu = lane->gpu.load (std::memory_order_relaxed);
  if (gpu < 0)
    return; /* a CPU lane: the branch takes what comes */
  const int from = gst_gpufan_cuda_frame_device (GST_BUFFER_CAST (item.obj));
  if (from < 0)
    return; /* not in CUDA memory: nothing to move */
  if (!lane->gpu_move || lane->gpu_move->gpu () != gpu)
    lane->gpu_move = std::make_unique<GstGpuFanGpuMove> (gpu);
  GstAllocator * allocator = nullptr;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->staging_lock);
    if (lane->allocator)
      allocator = GST_ALLOCATOR (gst_object_ref (lane->allocator));
  }
  GstCaps * caps = gst_pad_get_current_caps (lane->pad);
  GstBuffer * frame = GST_BUFFER_CAST (item.Steal ());
  GstGpuFanGpuMove::Outcome outcome;
  lane->gpu_move->Move (&frame, from, caps, allocator, &outcome);
  item.obj = GST_MINI_OBJECT_CAST (frame);
  if (caps)
    gst_caps_unref (caps);
  g_clear_object (&allocator);
  lane->element->priv->session->CountGpuFrame (lane->id, outcome.path,
      outcome.bytes, outcome.ns);
  if (!outcome.why_not.empty () && !lane->gpu_copy_warned) {
    lane->gpu_copy_warned = true;
    GST_WARNING_OBJECT (lane->pad, "%s", outcome.why_not.c_str ());
  }
}

void
fanout::stage_item (const LanePtr & lane, QueuedItem & item)
{
  if (item.kind == ItemKind::kBuffer) {
    note_frame_context (lane, GST_BUFFER_CAST (item.obj));
    move_to_lane_gpu (lane, item);
  }
  if (!lane->stages.load (std::memory_order_relaxed))
    return;
  GstAllocator * allocator = nullptr;
  gpufan::StagingPlan plan;
  {
    std::lock_guard<gpufan::Mutex> lk (lane->staging_lock);
    if (!lane->staging.stage || !lane->allocator)
      return;
    allocator = GST_ALLOCATOR (gst_object_ref (lane->allocator));
    plan = lane->staging;
  }
  GstBuffer * buffer = GST_BUFFER_CAST (item.obj);
  const bool host_frames = lane->element->priv->host_memory_caps.load ();
  if (gpufan::ShouldStageFrame (plan, host_frames,
          host_frames
              && gst_gpufan_buffer_is_local (buffer, plan.node,
                  plan.need_pinned))) {
    gboolean copied;
    std::string why_not;
    item.obj = GST_MINI_OBJECT_CAST (
        gst_gpufan_stage_buffer (GST_BUFFER_CAST (item.Steal ()), allocator,
            &copied, &why_not));
    lane->element->priv->session->CountStaging (lane->id, copied);
    if (!copied)
      GST_LOG_OBJECT (lane->pad, "frame not staged: %s", why_not.c_str ());
  }
  gst_object_unref (allocator);
}

/* A branch element (cudaupload, nvh264enc, ...) asks for its CUDA context:
 * it gets its lane's device. Branch elements ask while the fan-out may
 * still be in NULL, so the lane is placed now if it is not yet. */
gboolean
fanout::answer_cuda_context_query (GstGpuFanOut * self, GstPad * pad,
    GstQuery * query)
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
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
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

gboolean
fanout::answer_upstream_cuda_context_query (GstGpuFanOut * self, GstPad * sink,
    GstQuery * query)
{
  std::string who;
  gint device = gst_gpufan_upstream_cuda_device (sink, &who);
  if (device == -2)
    return FALSE;
  if (device == -3) {
    /* which of them asks cannot be told: a wrong GPU's context would be
     * refused, and the asker would look no further */
    GST_INFO_OBJECT (self,
        "upstream CUDA elements on several GPUs (%s): their context queries "
        "are left to the lanes",
        who.c_str ());
    return FALSE;
  }
  std::vector<gint> lane_gpus; /* in lane order */
  for (const LanePtr & lane : snapshot_lanes (self)) {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    if (lane->placed && lane->device.kind == gpufan::DeviceKind::kCuda)
      lane_gpus.push_back (lane->device.index);
  }
  if (device == -1) { /* it takes any GPU: the first lane's */
    if (lane_gpus.empty ())
      return FALSE;
    device = lane_gpus.front ();
  }
  std::string why_not;
  if (!gst_gpufan_answer_cuda_context_query (query, device, &why_not)) {
    GST_INFO_OBJECT (self,
        "upstream %s cannot share the lanes' CUDA context of GPU %d: %s",
        who.c_str (), device, why_not.c_str ());
    return FALSE;
  }
  if (std::find (lane_gpus.begin (), lane_gpus.end (), device)
      != lane_gpus.end ())
    GST_INFO_OBJECT (self,
        "upstream %s shares GPU %d's context with the lanes there: its "
        "frames reach them in place",
        who.c_str (), device);
  else
    GST_INFO_OBJECT (self,
        "upstream %s gets GPU %d's context, but no lane is on GPU %d: its "
        "frames reach the lanes in another GPU's memory",
        who.c_str (), device, device);
  return TRUE;
}

/* Parses a device setting into priv (under settings_lock). A value that
 * does not parse is kept as text and fails the next NULL->READY with a
 * message naming it: gst-launch users see it, a g_warning they might not. */
void
fanout::set_device_setting (GstGpuFanOut * self, guint prop_id,
    const GValue * value)
{
  GstGpuFanOutPrivate * priv = self->priv;
  std::lock_guard<gpufan::Mutex> lk (priv->settings_lock);
  std::string error;
  switch (prop_id) {
    case PROP_DEVICES: {
      const gchar * text = g_value_get_string (value);
      priv->settings.devices_text = text ? text : DEFAULT_DEVICES;
      gpufan::DeviceSpec spec;
      if (gpufan::DeviceSpec::Parse (priv->settings.devices_text, &spec, &error))
        priv->settings.device_spec = spec;
      else
        error = "Invalid devices " + error;
      break;
    }
    case PROP_MIN_FREE_MEMORY:
      priv->settings.hints.min_free_memory = g_value_get_uint64 (value) * 1024 * 1024;
      break;
    case PROP_MIN_COMPUTE_CAPABILITY: {
      const gchar * text = g_value_get_string (value);
      priv->settings.min_compute_capability = text ? text : "";
      gint major = 0, minor = 0;
      if (priv->settings.min_compute_capability.empty ()
          || gst_gpufan_parse_compute_capability (text, &major, &minor)) {
        priv->settings.hints.min_cc_major = major;
        priv->settings.hints.min_cc_minor = minor;
      } else {
        error = "Invalid min-compute-capability '"
            + priv->settings.min_compute_capability
            + "': expected MAJOR.MINOR, "
              "e.g. 8.6";
      }
      break;
    }
    case PROP_REQUIRE_CODECS:
      priv->settings.require_codecs = g_value_get_flags (value);
      priv->settings.hints.need_nvenc = priv->settings.require_codecs & GST_GPUFAN_CODEC_NVENC;
      priv->settings.hints.need_nvdec = priv->settings.require_codecs & GST_GPUFAN_CODEC_NVDEC;
      break;
  }
  /* a good value clears its own property's error, not another's */
  if (error.empty ()) {
    priv->settings.settings_errors.erase (prop_id);
  } else {
    priv->settings.settings_errors[prop_id] = error;
    GST_WARNING_OBJECT (self, "%s", error.c_str ());
  }
}

GstPad *
fanout::request_lane_like (GstGpuFanOut * self, guint like)
{
  gpufan::Device device;
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    auto it = self->priv->lanes.find (like);
    if (it == self->priv->lanes.end () || !it->second->placed)
      return nullptr;
    device = it->second->device;
  }
  if (device.kind == gpufan::DeviceKind::kCuda
      && !gpufan::GpuExclusion (device.index).empty ()) {
    gpufan::PlacementHints hints;
    {
      std::lock_guard<gpufan::Mutex> lk (self->priv->settings_lock);
      hints = self->priv->settings.hints;
    }
    gpufan::Placement other = gpufan::PlaceLane (gpufan::DeviceSpec (), hints,
        gst_gpufan_device_registry ().devices (), like, -1,
        gst_gpufan_device_free_memory);
    if (!other.ok)
      return nullptr;
    device = other.device;
  }
  {
    std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
    self->priv->next_lane_device = device;
  }
  GstPad * pad = gst_element_request_pad_simple (GST_ELEMENT (self), "src_%u");
  std::lock_guard<gpufan::Mutex> lk (self->priv->lanes_lock);
  self->priv->next_lane_device.reset ();
  return pad;
}
