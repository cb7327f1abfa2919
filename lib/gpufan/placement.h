// SPDX-License-Identifier: LGPL-2.1-or-later
// Which device each lane runs on: the `devices` setting of the fan-out, the
// placement hints (hard filters), and the per-lane override. Pure logic over
// a list of devices, so it is tested without a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/prelude.h"

namespace gpufan {

// The `devices` setting. Plain value type.
//   "auto" (or "")  every GPU that passes the hints, lanes spread over them
//                   round-robin; CPU lanes when the machine has no GPU.
//   "0,1,1"         GPU ordinals, one per lane in pad order; repeats put
//                   several lanes on one GPU.
//   "cpu"           CPU lanes only, as many as are requested, even when GPUs
//                   exist.
//   "cpu:N"         CPU lanes for the lane ids (pad indices) 0..N-1 only
//                   (N >= 1): placing a lane with a higher id fails. It
//                   limits the lanes, it does not create any.
struct GPUFAN_API DeviceSpec {
  enum class Mode { kAuto, kGpuList, kCpu };

  Mode mode = Mode::kAuto;
  std::vector<int> gpus;   // kGpuList
  uint32_t cpu_lanes = 0;  // kCpu: lane ids below it are allowed; 0 = any

  // Returns false with a message naming the bad part; *spec is untouched
  // then.
  static bool Parse(const std::string& text, DeviceSpec *spec,
                    std::string *error);
  // The canonical text ("auto", "0,1,1", "cpu", "cpu:4"); Parse(ToString())
  // gives the same spec.
  std::string ToString() const;
};

// Hard filters on GPUs. A GPU that fails one is never used. Plain value type.
struct GPUFAN_API PlacementHints {
  uint64_t min_free_memory = 0;  // bytes, read at placement time
  int min_cc_major = 0;          // minimum compute capability
  int min_cc_minor = 0;
  bool need_nvenc = false;  // a GPU whose encoder support is unknown fails
  bool need_nvdec = false;

  bool empty() const;
  std::string Describe() const;  // "free memory >= 4096 MiB, cc >= 8.0"
};

// Reads a GPU's free memory in bytes at the time of the call; may throw.
using FreeMemoryFn = std::function<uint64_t(const Device&)>;

// GPUs found broken in this process (a sticky CUDA error: no context on the
// device works again until the process ends, see cuda::StickyError): no
// lane is placed on them again. Process-wide; thread-safe. The first reason
// given is kept.
GPUFAN_API void ExcludeGpu(int ordinal, const std::string& why);
// Why GPU `ordinal` was excluded, or "".
GPUFAN_API std::string GpuExclusion(int ordinal);

// Why `device` fails the hints, or "" when it is eligible. CPU devices are
// always eligible (the hints are about GPUs); an excluded GPU (ExcludeGpu)
// never is. An exception from `free_memory` makes the device ineligible,
// with its message as the reason.
GPUFAN_API std::string IneligibleReason(const Device& device,
                                        const PlacementHints& hints,
                                        const FreeMemoryFn& free_memory);

struct GPUFAN_API Placement {
  bool ok = false;
  Device device;      // when ok
  std::string error;  // when !ok: what to change, in a user's words
};

// Places lane `lane_index`. `pad_gpu` >= 0 overrides the spec for this lane
// with that GPU ordinal (the pad's `device` property); -1 follows the spec.
// `available` is what DeviceRegistry::Discover found (GPUs and CPU devices).
// Thread-safety: a pure function; `free_memory` is called on this thread.
GPUFAN_API Placement PlaceLane(const DeviceSpec& spec,
                               const PlacementHints& hints,
                               const std::vector<Device>& available,
                               uint32_t lane_index, int pad_gpu,
                               const FreeMemoryFn& free_memory);

}  // namespace gpufan
