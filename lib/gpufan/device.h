// SPDX-License-Identifier: LGPL-2.1-or-later
// Devices a lane can be bound to: CUDA GPUs (found through the driver loaded
// at run time, see cuda.h) and CPU lanes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpufan/prelude.h"

namespace gpufan {

enum class DeviceKind { kCpu, kCuda };

GPUFAN_API const char *DeviceKindName(DeviceKind kind);

// Whether a device has a capability; kUnknown when nothing could tell.
enum class Support { kUnknown, kNo, kYes };

GPUFAN_API const char *SupportName(Support support);

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
