/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Frames in CUDA memory moved onto one GPU: a lane's (gpufanout) or the
 * output's (gpufanin output-device). A frame already there is used in
 * place; one of another GPU is copied into a bounded pool of the GPU's
 * frames, device to device where the GPUs have peer access, else through
 * pinned host memory; one that cannot be copied goes as it is. Each frame's
 * way is told (gpufan::GpuCopyPath) for the statistics. */
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <map>
#include <string>

#include "gpufan/cuda.h"
#include "gpufan/stats.h"

class GstGpuFanGpuMove {
public:
  /* What became of one frame in CUDA memory. */
  struct Outcome {
    gpufan::GpuCopyPath path = gpufan::GpuCopyPath::kInPlace;
    uint64_t bytes = 0;
    int64_t ns = 0;
    std::string why_not; /* kSkipped: why */
  };

  /* Frames a pool holds at most: a frame never waits for one (none free:
   * it goes uncopied, counted). */
  static constexpr guint kPoolFrames = 16;

  explicit GstGpuFanGpuMove (int gpu) : gpu_ (gpu) {}
  ~GstGpuFanGpuMove ();
  GstGpuFanGpuMove (const GstGpuFanGpuMove &) = delete;
  GstGpuFanGpuMove & operator= (const GstGpuFanGpuMove &) = delete;

  int gpu () const { return gpu_; }

  /* @frame (transfer full), in CUDA memory of GPU @from, on this GPU:
   * itself, or its copy. @caps are the frame's (the pool is made for them);
   * @host_allocator gives pinned host memory for a copy through the host
   * (nullptr: none). Not thread-safe: one thread at a time (a lane's, the
   * output's). */
  void Move (GstBuffer ** frame, int from, GstCaps * caps,
      GstAllocator * host_allocator, Outcome * outcome);

private:
  GstBufferPool * PoolFor (GstCaps * caps, std::string * why_not);

  const int gpu_;
  GstBufferPool * pool_ = nullptr;
  GstCaps * pool_caps_ = nullptr;
  gpufan::cuda::StreamPool::Stream stream_; /* on this GPU */
  /* per source GPU, for copies through the host: held, so that their
   * pools (and streams) live as long as this */
  std::map<int, gpufan::cuda::StreamPool::Stream> source_streams_;
};
