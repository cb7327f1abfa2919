// SPDX-License-Identifier: LGPL-2.1-or-later
// Devices a lane can be bound to: CUDA GPUs and CPU lanes, as plain values.
// Finding them is DeviceRegistry's (device-registry.h); this header depends
// on nothing else of the library, so every other part can use it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufan/prelude.h"

namespace gpufan {

enum class DeviceKind { kCpu, kCuda };

GPUFAN_API const char *DeviceKindName(DeviceKind kind);

// Whether a device has a capability; kUnknown when nothing could tell.
enum class Support { kUnknown, kNo, kYes };

GPUFAN_API const char *SupportName(Support support);

// A CUDA compute capability. Plain value type.
struct GPUFAN_API ComputeCapability {
  int major = 0;
  int minor = 0;
};

// "8.6", or "8" (minor 0): decimal digits, each part at most 99 (leading
// zeros allowed). std::nullopt for anything else: empty, signs, spaces, a
// dot without digits after it, a third part.
GPUFAN_API std::optional<ComputeCapability> ParseComputeCapability(
    std::string_view text);

// Plain value type.
struct GPUFAN_API Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;       // CPU lane slot, or CUDA ordinal
  std::string name;    // human readable, e.g. "cpu:0", "NVIDIA H100 80GB HBM3"
  int numa_node = -1;  // -1: unknown (the platform did not say)
  // CPUs local to the device (its NUMA node's cpuset); empty: unknown, and
  // worker threads are then left unbound.
  std::vector<int> local_cpus;

  // CUDA only.
  std::string pci_bus_id;     // "0000:3b:00.0" (domain:bus:device.function)
  std::string uuid;           // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  uint64_t total_memory = 0;  // bytes; free memory is read at run time
  int cc_major = 0;           // compute capability
  int cc_minor = 0;
  Support nvenc = Support::kUnknown;
  Support nvdec = Support::kUnknown;

  static Device Cpu(int index);
  // "cpu:0 (numa ?)" style description for logs and stats.
  std::string Describe() const;
};

}  // namespace gpufan
