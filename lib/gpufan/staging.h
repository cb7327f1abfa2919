// SPDX-License-Identifier: LGPL-2.1-or-later
// Staging: a lane copies a frame into its NUMA node's host pool (pinned, for a
// GPU) before the frame enters its branch, unless the frame is there already.
// The fan-out proposes one node's pool upstream, so that frames are mostly
// made there and need no copy. These are the decisions only, over plain
// values; the copying and the pools themselves are the binding's and
// host-pool.h's.
#pragma once

#include <optional>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/prelude.h"

namespace gpufan {

// The fan-out's `staging` setting (the GStreamer enum's values are
// static_cast<int>(mode)).
enum class StagingMode {
  kAuto,    // GPU lanes copy frames that are not in pinned memory of their node
  kAlways,  // every lane copies frames that are not in its node's pool
  kNever,   // no lane copies frames
};

// What a lane does with its frames, decided when it is placed. Plain value.
struct GPUFAN_API StagingPlan {
  bool has_pool = false;     // the lane has a host pool (the pools are on)
  bool stage = false;        // it copies frames that are not in its pool
  int node = -1;             // the pool's NUMA node, -1: unknown
  bool need_pinned = false;  // a GPU needs pinned memory, a CPU only local
};

// The plan of a lane placed on `device`; `pools_enabled` is false when the
// host pools are off (a pool size of 0). Thread-safety: a pure function.
GPUFAN_API StagingPlan PlanStaging(StagingMode mode, const Device& device,
                                   bool pools_enabled);

// Whether a lane with `plan` copies a frame: it stages, frames travel in
// system memory (not device memory such as CUDA, GL or DMABuf), and this
// frame is not in its pool already (`frame_in_pool`: every memory of it is
// pool memory of plan.node, pinned when plan.need_pinned).
GPUFAN_API bool ShouldStageFrame(const StagingPlan& plan,
                                 bool frames_in_host_memory,
                                 bool frame_in_pool);

// The NUMA node whose pool the fan-out proposes upstream (ALLOCATION query):
// the one most staging lanes use, a lane that needs pinned memory (a GPU
// lane) outweighing any number of the others; ties go to the lowest node
// (-1, unknown, first). std::nullopt when no lane stages into a pool.
// Thread-safety: a pure function.
GPUFAN_API std::optional<int> ElectProposedPool(
    const std::vector<StagingPlan>& lanes);

}  // namespace gpufan
