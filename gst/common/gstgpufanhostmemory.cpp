/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gstgpufanhostmemory.h"

#include <gst/video/video.h>

#include <cstring>
#include <memory>
#include <mutex>

#include "gpufan/cuda.h"
#include "gpufan/host-pool.h"
#include "gpufan/topology.h"

GST_DEBUG_CATEGORY_STATIC (gst_gpufan_host_memory_debug);
#define GST_CAT_DEFAULT gst_gpufan_host_memory_debug

namespace {

struct HostMemory {
  GstMemory mem;
  gpufan::HostBlock block; /* a share points into its parent's block */
  /* Start of the memory's region (what map returns, before the offset):
   * block.data moved up to the requested alignment. */
  guint8 * region = nullptr;
};

} // namespace

#define GST_TYPE_GPUFAN_HOST_ALLOCATOR (gst_gpufan_host_allocator_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanHostAllocator, gst_gpufan_host_allocator, GST,
    GPUFAN_HOST_ALLOCATOR, GstAllocator);

struct _GstGpuFanHostAllocator {
  GstAllocator parent;
  gint node;
  std::shared_ptr<gpufan::HostPool> * pool; /* set once, at creation */
};

G_DEFINE_TYPE (GstGpuFanHostAllocator, gst_gpufan_host_allocator,
    GST_TYPE_ALLOCATOR);

static GstMemory *
host_memory_alloc (GstAllocator * allocator, gsize size,
    GstAllocationParams * params)
{
  auto * self = GST_GPUFAN_HOST_ALLOCATOR (allocator);
  /* blocks are page-aligned: any alignment up to a page comes free */
  const gsize align = params->align;
  const gsize slack = align + 1 > gpufan::HostPool::PageSize () ? align : 0;
  const gsize maxsize = params->prefix + size + params->padding;

  gpufan::HostBlock block;
  try {
    block = (*self->pool)->Acquire (maxsize + slack);
  } catch (const std::exception & e) {
    /* Past the pool's bound (or out of memory) frames travel in ordinary
     * memory: a buffer pool that failed here would stop the stream. */
    if ((*self->pool)->RecordFallback () == 0)
      GST_WARNING_OBJECT (self, "host pool full, using ordinary memory: %s",
          e.what ());
    return gst_allocator_alloc (nullptr, size, params);
  }

  gsize shift = 0;
  if (slack) {
    guintptr p = (guintptr)block.data;
    shift = ((p + align) & ~(guintptr)align) - p;
  }
  auto * mem = new HostMemory ();
  mem->block = block;
  /* as the system allocator does: the region starts aligned, the prefix
   * follows */
  mem->region = static_cast<guint8 *> (block.data) + shift;
  gst_memory_init (GST_MEMORY_CAST (mem), params->flags, allocator, nullptr,
      maxsize, align, params->prefix, size);
  if (params->prefix && (params->flags & GST_MEMORY_FLAG_ZERO_PREFIXED))
    memset (mem->region, 0, params->prefix);
  if (params->padding && (params->flags & GST_MEMORY_FLAG_ZERO_PADDED))
    memset (mem->region + params->prefix + size, 0, params->padding);
  return GST_MEMORY_CAST (mem);
}

static void
host_memory_free (GstAllocator * allocator, GstMemory * memory)
{
  auto * self = GST_GPUFAN_HOST_ALLOCATOR (allocator);
  auto * mem = reinterpret_cast<HostMemory *> (memory);
  if (!memory->parent) {
    try {
      (*self->pool)->Release (mem->block);
    } catch (const std::exception & e) {
      GST_ERROR_OBJECT (self, "cannot give a block back: %s", e.what ());
    }
  }
  delete mem;
}

static gpointer
host_memory_map (GstMemory * memory, gsize, GstMapFlags)
{
  return reinterpret_cast<HostMemory *> (memory)->region;
}

static void
host_memory_unmap (GstMemory *)
{
}

static GstMemory *
host_memory_share (GstMemory * memory, gssize offset, gssize size)
{
  auto * mem = reinterpret_cast<HostMemory *> (memory);
  GstMemory * parent = memory->parent ? memory->parent : memory;
  if (size == -1)
    size = memory->size - offset;

  auto * share = new HostMemory ();
  share->block = mem->block;
  share->region = mem->region;
  gst_memory_init (GST_MEMORY_CAST (share),
      (GstMemoryFlags)(GST_MINI_OBJECT_FLAGS (parent)
          | GST_MINI_OBJECT_FLAG_LOCK_READONLY),
      memory->allocator, parent, memory->maxsize, memory->align,
      memory->offset + offset, size);
  return GST_MEMORY_CAST (share);
}

static void
gst_gpufan_host_allocator_finalize (GObject * object)
{
  auto * self = GST_GPUFAN_HOST_ALLOCATOR (object);
  delete self->pool;
  G_OBJECT_CLASS (gst_gpufan_host_allocator_parent_class)->finalize (object);
}

static void
gst_gpufan_host_allocator_class_init (GstGpuFanHostAllocatorClass * klass)
{
  G_OBJECT_CLASS (klass)->finalize = gst_gpufan_host_allocator_finalize;
  GST_ALLOCATOR_CLASS (klass)->alloc = host_memory_alloc;
  GST_ALLOCATOR_CLASS (klass)->free = host_memory_free;
  GST_DEBUG_CATEGORY_INIT (gst_gpufan_host_memory_debug, "gpufanhostmemory", 0,
      "gpufan NUMA-local, pinned host memory");
}

static void
gst_gpufan_host_allocator_init (GstGpuFanHostAllocator * self)
{
  GstAllocator * allocator = GST_ALLOCATOR (self);
  allocator->mem_type = GST_GPUFAN_HOST_MEMORY_TYPE;
  allocator->mem_map = host_memory_map;
  allocator->mem_unmap = host_memory_unmap;
  allocator->mem_share = host_memory_share;
  /* mem_copy and mem_is_span: GstAllocator's fallbacks (map and copy) */
  self->node = -1;
}

GstAllocator *
gst_gpufan_host_allocator_get (gint node, guint limit_mib)
{
  static std::mutex lock;
  std::lock_guard<std::mutex> lk (lock);

  node = MAX (node, -1);
  gchar * name = node >= 0
      ? g_strdup_printf ("%s-node%d", GST_GPUFAN_HOST_MEMORY_TYPE, node)
      : g_strdup (GST_GPUFAN_HOST_MEMORY_TYPE "-node-unknown");
  GstAllocator * found = gst_allocator_find (name);
  if (found) {
    g_free (name);
    return found;
  }

  auto * self = GST_GPUFAN_HOST_ALLOCATOR (
      g_object_new (GST_TYPE_GPUFAN_HOST_ALLOCATOR, nullptr));
  self->node = node;
  /* pinned for every context (PORTABLE) when a CUDA driver is there */
  std::shared_ptr<gpufan::Pinner> pinner = gpufan::cuda::MakeHostPinner ();
  self->pool = new std::shared_ptr<gpufan::HostPool> (
      gpufan::HostPool::ForNode (node, gpufan::Topology::System (),
          (size_t)limit_mib * 1024 * 1024, pinner));
  GST_INFO ("host allocator %s: pool of %u MiB, %s", name, limit_mib,
      pinner ? "pinned for CUDA" : "not pinned (no CUDA driver)");
  /* GStreamer owns registered allocators and frees them at gst_deinit() */
  gst_object_ref_sink (self);
  gst_allocator_register (name, GST_ALLOCATOR (self));
  GstAllocator * registered = gst_allocator_find (name);
  g_free (name); /* gst_allocator_register copied it */
  return registered;
}

gboolean
gst_gpufan_host_memory_info (GstMemory * mem, gint * node, gboolean * pinned)
{
  if (!mem->allocator || !GST_IS_GPUFAN_HOST_ALLOCATOR (mem->allocator))
    return FALSE;
  *node = GST_GPUFAN_HOST_ALLOCATOR (mem->allocator)->node;
  *pinned = reinterpret_cast<HostMemory *> (mem)->block.pinned;
  return TRUE;
}

gboolean
gst_gpufan_buffer_is_local (GstBuffer * buffer, gint node, gboolean need_pinned)
{
  const guint n = gst_buffer_n_memory (buffer);
  if (n == 0)
    return FALSE;
  for (guint i = 0; i < n; i++) {
    gint mem_node;
    gboolean pinned;
    if (!gst_gpufan_host_memory_info (gst_buffer_peek_memory (buffer, i),
            &mem_node, &pinned)
        || mem_node != node || (need_pinned && !pinned))
      return FALSE;
  }
  return TRUE;
}

GstBufferPool *
gst_gpufan_host_buffer_pool_new (GstAllocator * allocator, GstCaps * caps,
    guint size, guint min_buffers)
{
  GstVideoInfo info;
  const bool video = caps && gst_video_info_from_caps (&info, caps);
  GstBufferPool * pool
      = video ? gst_video_buffer_pool_new () : gst_buffer_pool_new ();
  GstStructure * config = gst_buffer_pool_get_config (pool);
  /* max 0: the node pool's byte bound holds memory in check; a buffer
   * count bound here could starve elements that hold many frames
   * (encoders with look-ahead) and deadlock the pipeline */
  gst_buffer_pool_config_set_params (config, caps, size, min_buffers, 0);
  gst_buffer_pool_config_set_allocator (config, allocator, nullptr);
  if (video)
    gst_buffer_pool_config_add_option (config,
        GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config (pool, config)) {
    gst_object_unref (pool);
    return nullptr;
  }
  return pool;
}

GstBuffer *
gst_gpufan_stage_buffer (GstBuffer * buffer, GstAllocator * allocator,
    gboolean * copied, std::string * why_not)
{
  *copied = FALSE;
  const gsize size = gst_buffer_get_size (buffer);
  GstMemory * mem
      = size ? gst_allocator_alloc (allocator, size, nullptr) : nullptr;
  gint node;
  gboolean pinned;
  if (!mem || !gst_gpufan_host_memory_info (mem, &node, &pinned)) {
    /* a copy into ordinary memory would gain nothing */
    if (mem)
      gst_memory_unref (mem);
    *why_not = size ? "the node's host pool is full" : "empty buffer";
    return buffer;
  }
  GstMapInfo map;
  if (!gst_memory_map (mem, &map, GST_MAP_WRITE)) {
    gst_memory_unref (mem);
    *why_not = "cannot map host memory";
    return buffer;
  }
  gst_buffer_extract (buffer, 0, map.data, size);
  gst_memory_unmap (mem, &map);

  GstBuffer * out = gst_buffer_new ();
  gst_buffer_copy_into (out, buffer, GST_BUFFER_COPY_METADATA, 0, -1);
  gst_buffer_append_memory (out, mem);
  gst_buffer_unref (buffer);
  *copied = TRUE;
  return out;
}

std::shared_ptr<gpufan::HostPool>
gst_gpufan_host_allocator_pool (GstAllocator * allocator)
{
  return *GST_GPUFAN_HOST_ALLOCATOR (allocator)->pool;
}
