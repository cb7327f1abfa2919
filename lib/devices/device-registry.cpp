// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/device-registry.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "gpufan/cuda.h"
#include "gpufan/placement.h"
#include "gpufan/topology.h"

namespace gpufan {

DeviceRegistry DeviceRegistry::Discover() {
  DeviceRegistry registry;
  registry.devices_ = cuda::Discover(&registry.gpu_note_);
  // hardware_concurrency() may return 0 when it cannot tell: one lane still
  // works.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  registry.devices_.reserve(registry.devices_.size() + cpus);
  for (unsigned i = 0; i < cpus; ++i)
    registry.devices_.push_back(Device::Cpu(static_cast<int>(i)));
  // NUMA node and local CPUs, where the platform tells (hwloc).
  const std::shared_ptr<const Topology> topology = Topology::System();
  for (Device& device : registry.devices_)
    topology->FillLocality(device);
  return registry;
}

size_t DeviceRegistry::cpu_count() const {
  return static_cast<size_t>(std::count_if(
      devices_.begin(), devices_.end(),
      [](const Device& d) { return d.kind == DeviceKind::kCpu; }));
}

size_t DeviceRegistry::gpu_count() const {
  return static_cast<size_t>(std::count_if(
      devices_.begin(), devices_.end(),
      [](const Device& d) { return d.kind == DeviceKind::kCuda; }));
}

Device DeviceRegistry::DefaultForLane(uint32_t lane_index) const {
  // What devices=auto with no hints gives: one rule, in PlaceLane. (It
  // cannot fail: without GPUs it falls back to CPU lanes.)
  return PlaceLane(DeviceSpec{}, PlacementHints{}, devices_, lane_index, -1,
                   nullptr)
      .device;
}

}  // namespace gpufan
