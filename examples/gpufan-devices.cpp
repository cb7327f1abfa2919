// SPDX-License-Identifier: LGPL-2.1-or-later
// The devices this machine offers to gpufanout, as the plugin sees them
// (gpufan::DeviceRegistry::Discover()): the CUDA GPUs, found through the
// driver loaded at run time ($GPUFAN_LIBCUDA names another library) and
// placed on their NUMA nodes by hwloc, then the CPU devices.
//
//   gpufan-devices [--json FILE]
//
// Text: "GPUs: N", then per GPU:
//   gpu 0: NVIDIA H100 80GB HBM3
//     uuid          GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
//     pci bus id    0000:3b:00.0
//     numa node     0              ("?" when unknown)
//     local cpus    0-31,64-95     ("?" when unknown)
//     total memory  79.1 GiB (84942979072 bytes)
//     compute       9.0
//     nvenc         yes            (yes, no or unknown)
//     nvdec         yes
// then "CPU devices: N", "no GPU: <why>" when there is none, and
// "CUDA driver version: 12.2" when a driver loads (the newest CUDA version it
// supports, as nvidia-smi's "CUDA Version").
//
// JSON (--json FILE), one GPU a line:
//   {"cuda_driver_version": "12.2" or null, "gpu_note": "" or why none,
//    "gpus": [{"index": 0, "name": "...", "uuid": "GPU-...",
//              "pci_bus_id": "0000:3b:00.0", "numa_node": 0 (-1: unknown),
//              "local_cpus": "0-31,64-95" ("": unknown),
//              "total_memory": bytes, "compute_capability": "9.0",
//              "nvenc": "yes", "nvdec": "unknown"}],
//    "cpu_devices": N}
//
// Exit status: 0 listed (also when there is no GPU), 1 FILE cannot be
// written, 2 bad arguments.
#include <cstdio>
#include <string>

#include "cuda-driver-private.h"
#include "gpufan/device-registry.h"
#include "gpufan/device.h"
#include "gpufan/topology.h"
#include "json-text.h"

namespace {

using gpufan::Device;
using gpufan::DeviceKind;
using gpufan::DeviceRegistry;
using gpufan_json::CloseJsonFile;
using gpufan_json::JsonString;
using gpufan_json::OpenJsonFile;

constexpr int kExitUsage = 2;

void Usage(FILE *out) {
  std::fprintf(out,
               "usage: gpufan-devices [--json FILE]\n"
               "  --json FILE   also write the devices as JSON to FILE\n");
}

// The newest CUDA version the loaded driver supports ("12.2"); empty when
// no driver loads, in a build without CUDA, or when the driver does not say.
std::string DriverVersion() {
#if GPUFAN_HAVE_CUDA
  const gpufan::cuda::internal::Driver *driver =
      gpufan::cuda::internal::GlobalDriver();
  int version = 0;
  if (driver != nullptr && driver->cuDriverGetVersion(&version) == CUDA_SUCCESS)
    return gpufan::cuda::internal::FormatDriverVersion(version);
#endif
  return std::string();
}

std::string ComputeCapability(const Device& d) {
  return std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
}

void PrintText(const DeviceRegistry& registry,
               const std::string& driver_version) {
  std::printf("GPUs: %zu\n", registry.gpu_count());
  for (const Device& d : registry.devices()) {
    if (d.kind != DeviceKind::kCuda)
      continue;
    const std::string cpus = gpufan::FormatCpuList(d.local_cpus);
    std::printf("gpu %d: %s\n", d.index, d.name.c_str());
    std::printf("  uuid          %s\n", d.uuid.c_str());
    std::printf("  pci bus id    %s\n", d.pci_bus_id.c_str());
    if (d.numa_node >= 0)
      std::printf("  numa node     %d\n", d.numa_node);
    else
      std::printf("  numa node     ?\n");
    std::printf("  local cpus    %s\n", cpus.empty() ? "?" : cpus.c_str());
    std::printf("  total memory  %.1f GiB (%llu bytes)\n",
                static_cast<double>(d.total_memory) / (1u << 30),
                static_cast<unsigned long long>(d.total_memory));
    std::printf("  compute       %s\n", ComputeCapability(d).c_str());
    std::printf("  nvenc         %s\n", gpufan::SupportName(d.nvenc));
    std::printf("  nvdec         %s\n", gpufan::SupportName(d.nvdec));
  }
  std::printf("CPU devices: %zu\n", registry.cpu_count());
  if (registry.gpu_count() == 0)
    std::printf("no GPU: %s\n", registry.gpu_note().c_str());
  if (!driver_version.empty())
    std::printf("CUDA driver version: %s\n", driver_version.c_str());
}

bool WriteJson(const std::string& path, const DeviceRegistry& registry,
               const std::string& driver_version) {
  FILE *out = OpenJsonFile(path);
  if (out == nullptr)
    return false;
  std::fprintf(
      out, "{\n  \"cuda_driver_version\": %s,\n  \"gpu_note\": %s,\n",
      driver_version.empty() ? "null" : JsonString(driver_version).c_str(),
      JsonString(registry.gpu_note()).c_str());
  std::fprintf(out, "  \"gpus\": [");
  const char *separator = "\n";
  for (const Device& d : registry.devices()) {
    if (d.kind != DeviceKind::kCuda)
      continue;
    std::fprintf(out,
                 "%s    {\"index\": %d, \"name\": %s, \"uuid\": %s, "
                 "\"pci_bus_id\": %s, \"numa_node\": %d, \"local_cpus\": %s, "
                 "\"total_memory\": %llu, \"compute_capability\": %s, "
                 "\"nvenc\": %s, \"nvdec\": %s}",
                 separator, d.index, JsonString(d.name).c_str(),
                 JsonString(d.uuid).c_str(), JsonString(d.pci_bus_id).c_str(),
                 d.numa_node,
                 JsonString(gpufan::FormatCpuList(d.local_cpus)).c_str(),
                 static_cast<unsigned long long>(d.total_memory),
                 JsonString(ComputeCapability(d)).c_str(),
                 JsonString(gpufan::SupportName(d.nvenc)).c_str(),
                 JsonString(gpufan::SupportName(d.nvdec)).c_str());
    separator = ",\n";
  }
  std::fprintf(out, "%s],\n  \"cpu_devices\": %zu\n}\n",
               registry.gpu_count() > 0 ? "\n  " : "", registry.cpu_count());
  return CloseJsonFile(out, path);
}

}  // namespace

int main(int argc, char **argv) {
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      return 0;
    }
    if (arg == "--json" && i + 1 < argc && argv[i + 1][0] != '\0') {
      json = argv[++i];
      continue;
    }
    std::fprintf(stderr, "%s: unknown option or missing value\n", arg.c_str());
    Usage(stderr);
    return kExitUsage;
  }

  const DeviceRegistry registry = DeviceRegistry::Discover();
  const std::string driver_version = DriverVersion();
  PrintText(registry, driver_version);
  if (!json.empty() && !WriteJson(json, registry, driver_version))
    return 1;
  return 0;
}
