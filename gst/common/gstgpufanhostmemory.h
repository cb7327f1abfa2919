/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* NUMA-local (and, with CUDA, pinned) host memory for the lanes: a
 * GstAllocator per NUMA node over libgpufan's HostPool, the buffer pool the
 * fan-out proposes upstream, and the staging copy a lane makes when a frame
 * is not in such memory. */
#pragma once

#include <gst/gst.h>

#include <memory>
#include <string>

#include "gpufan/host-pool.h"

/* Memory type of our GstMemory ("GpuFanHostMemory"). */
#define GST_GPUFAN_HOST_MEMORY_TYPE "GpuFanHostMemory"

/* Default bound of each node's pool, in MiB. */
#define GST_GPUFAN_DEFAULT_HOST_POOL_MIB 1024

/* The allocator of NUMA node @node (-1: unknown node, ordinary memory),
 * created on first use and registered with GStreamer (which frees it at
 * gst_deinit()). Its memory is pinned for CUDA when the driver is there.
 * @limit_mib bounds the node's pool; the first caller's value holds while
 * the pool lives. Transfer full. Thread-safe. */
GstAllocator * gst_gpufan_host_allocator_get (gint node, guint limit_mib);

/* TRUE when @mem comes from a host allocator; then @node and @pinned tell
 * where it lives. */
gboolean gst_gpufan_host_memory_info (GstMemory * mem, gint * node,
    gboolean * pinned);

/* TRUE when every memory of @buffer is host-pool memory of @node, and
 * pinned when @need_pinned. */
gboolean gst_gpufan_buffer_is_local (GstBuffer * buffer, gint node,
    gboolean need_pinned);

/* A buffer pool whose buffers come from @allocator: what the fan-out
 * proposes upstream. Transfer full. */
GstBufferPool * gst_gpufan_host_buffer_pool_new (GstAllocator * allocator,
    GstCaps * caps, guint size, guint min_buffers);

/* Copies @buffer (its bytes, flags, timestamps and metas) into one memory
 * from @allocator. Takes @buffer; on failure returns it unchanged and sets
 * @why_not (pool exhausted, ...). @copied says which happened. */
GstBuffer * gst_gpufan_stage_buffer (GstBuffer * buffer,
    GstAllocator * allocator, gboolean * copied, std::string * why_not);

/* The node pool behind @allocator (one of gst_gpufan_host_allocator_get's):
 * what a lane's statistics read its figures from. */
std::shared_ptr<gpufan::HostPool> gst_gpufan_host_allocator_pool (
    GstAllocator * allocator);
