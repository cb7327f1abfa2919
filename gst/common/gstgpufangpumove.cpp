/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Frames in CUDA memory moved onto one GPU (see gstgpufangpumove.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufangpumove.h"

#include <chrono>

#include "gstgpufancudacontext.h"

/* Streams of a GPU's stream pool the movers may lease. */
static constexpr size_t kCopyStreams = 64;

GstGpuFanGpuMove::~GstGpuFanGpuMove ()
{
  if (pool_) {
    gst_buffer_pool_set_active (pool_, FALSE);
    gst_object_unref (pool_);
  }
  if (pool_caps_)
    gst_caps_unref (pool_caps_);
}

GstBufferPool *
GstGpuFanGpuMove::PoolFor (GstCaps * caps, std::string * why_not)
{
  if (!caps) {
    *why_not = "no caps";
    return nullptr;
  }
  if (pool_caps_ && gst_caps_is_equal (caps, pool_caps_))
    return pool_;
  if (pool_) {
    gst_buffer_pool_set_active (pool_, FALSE);
    gst_clear_object (&pool_);
  }
  pool_ = gst_gpufan_cuda_pool_new (gpu_, caps, kPoolFrames, why_not);
  /* a pool that cannot be made is tried again with the next frame */
  gst_caps_replace (&pool_caps_, pool_ ? caps : nullptr);
  return pool_;
}

void
GstGpuFanGpuMove::Move (GstBuffer ** frame, int from, GstCaps * caps,
    GstAllocator * host_allocator, Outcome * outcome)
{
  *outcome = Outcome ();
  if (from == gpu_)
    return; /* kInPlace */

  std::string why_not;
  GstBuffer * copy = nullptr;
  GstBufferPool * pool = PoolFor (caps, &why_not);
  GstBufferPoolAcquireParams dont_wait = {};
  dont_wait.flags = GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT;
  if (pool
      && gst_buffer_pool_acquire_buffer (pool, &copy, &dont_wait)
          != GST_FLOW_OK) {
    copy = nullptr;
    why_not = "all " + std::to_string (kPoolFrames)
        + " frames of the pool are in use downstream";
  }
  const bool peer = gpufan::cuda::EnablePeerAccess (gpu_, from);
  if (copy) {
    try {
      if (!stream_)
        stream_ = gpufan::cuda::StreamPool::ForDevice (gpu_, kCopyStreams)
                      ->Acquire ();
      if (!peer && !source_streams_[from])
        source_streams_[from]
            = gpufan::cuda::StreamPool::ForDevice (from, kCopyStreams)
                  ->Acquire ();
    } catch (const std::exception & e) {
      why_not = e.what ();
    }
  }
  GstMemory * host = nullptr;
  if (copy && why_not.empty () && !peer) {
    host = host_allocator ? gst_allocator_alloc (host_allocator,
               gst_buffer_get_size (*frame), nullptr)
                          : nullptr;
    if (!host)
      why_not = "no pinned host memory (host-pool-size=0, or the pool is "
                "full) and no peer access between the GPUs";
  }
  const auto start = std::chrono::steady_clock::now ();
  if (copy && why_not.empty ())
    outcome->bytes = gst_gpufan_cuda_copy_frame (*frame, from,
        peer ? nullptr : source_streams_[from].handle (), copy, gpu_,
        stream_.handle (), host, &why_not);
  outcome->ns = std::chrono::duration_cast<std::chrono::nanoseconds> (
      std::chrono::steady_clock::now () - start)
                    .count ();
  if (host)
    gst_memory_unref (host);
  if (outcome->bytes == 0) {
    if (copy)
      gst_buffer_unref (copy);
    outcome->path = gpufan::GpuCopyPath::kSkipped;
    outcome->ns = 0;
    outcome->why_not = "a frame of GPU " + std::to_string (from)
        + " goes uncopied to GPU " + std::to_string (gpu_) + ": " + why_not;
    return;
  }
  gst_buffer_unref (*frame);
  *frame = copy;
  outcome->path
      = peer ? gpufan::GpuCopyPath::kPeer : gpufan::GpuCopyPath::kViaHost;
}
