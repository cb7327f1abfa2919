// SPDX-License-Identifier: LGPL-2.1-or-later
// The devices of this machine: CUDA GPUs (found through the driver loaded at
// run time, see cuda.h) with their NUMA locality (topology.h), then CPU
// devices. Apart from device.h so that the device value type does not depend
// on the back ends that find devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/prelude.h"

namespace gpufan {

// Discovers the devices of this machine.
// Thread-safety: Discover() may be called from any thread; the object is
// immutable afterwards.
class GPUFAN_API DeviceRegistry {
 public:
  // The CUDA devices (cuda::Discover(), ordered by ordinal) first, then one
  // CPU device per online CPU (std::thread::hardware_concurrency, at least
  // 1).
  static DeviceRegistry Discover();

  const std::vector<Device>& devices() const { return devices_; }
  size_t cpu_count() const;
  size_t gpu_count() const;
  // Why there is no GPU ("libcuda.so.1 not found (no NVIDIA driver): ...",
  // "built without CUDA support ..."): the text for the one warning a user
  // should see. Empty when there are GPUs.
  const std::string& gpu_note() const { return gpu_note_; }

  // The device lane `lane_index` gets by default: GPUs round-robin when any
  // exist, else CPU device `lane_index % cpu_count()`.
  Device DefaultForLane(uint32_t lane_index) const;

 private:
  std::vector<Device> devices_;
  std::string gpu_note_;
};

}  // namespace gpufan
