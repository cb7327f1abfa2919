// SPDX-License-Identifier: LGPL-2.1-or-later
// Devices a lane can be bound to. CPU devices today; the CUDA kind is reserved
// for the GPU issue, which fills in discovery and the fields marked below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpufan/prelude.h"

namespace gpufan {

enum class DeviceKind { kCpu, kCuda };

GPUFAN_API const char *DeviceKindName(DeviceKind kind);

// Plain value type.
struct GPUFAN_API Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;       // CPU lane slot, or CUDA ordinal
  std::string name;    // human readable, e.g. "cpu:0"
  int numa_node = -1;  // -1: unknown
  // CUDA only (filled by the GPU issue): PCI bus id, UUID, memory, capability.
  std::string pci_bus_id;

  static Device Cpu(int index);
  // "cpu:0 (numa ?)" style description for logs and stats.
  std::string Describe() const;
};

// Discovers the devices of this machine.
// Thread-safety: Discover() may be called from any thread; the object is
// immutable afterwards.
class GPUFAN_API DeviceRegistry {
 public:
  // Today: one CPU device per online CPU (std::thread::hardware_concurrency,
  // at least 1). The GPU issue adds CUDA devices ahead of CPU ones.
  static DeviceRegistry Discover();

  const std::vector<Device>& devices() const { return devices_; }
  size_t cpu_count() const;
  size_t gpu_count() const;

  // The device lane `lane_index` gets by default: GPUs round-robin when any
  // exist, else CPU device `lane_index % cpu_count()`.
  Device DefaultForLane(uint32_t lane_index) const;

 private:
  std::vector<Device> devices_;
};

}  // namespace gpufan
