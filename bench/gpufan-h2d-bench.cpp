// SPDX-License-Identifier: LGPL-2.1-or-later
// Host-to-device copy bandwidth from pageable memory and from the same memory
// pinned with gpufan::cuda::RegisterHost(): the number behind the pinned
// staging pools. Then device-to-device copy bandwidth on the same GPU, between
// two device buffers of the same size: the ceiling of a copy that stays on
// the device. Each copy is a cuMemcpyHtoDAsync (cuMemcpyDtoDAsync) on one
// non-blocking stream, timed with CUDA events after untimed warm-ups; the
// median of the repetitions is reported. GB/s are 10^9 bytes copied per
// second: a device-to-device copy reads and writes each byte, so its device
// memory traffic is twice its figure. Last, the way gpufan moves a frame
// between GPUs without peer access (gpufan::cuda::CopyPlanesViaHost): down
// into pinned host memory and up into another buffer of the same GPU, as a
// 2D copy of 16 KiB rows; timed on the host clock (it waits for both
// copies), and compared with the pinned H2D figure (via/pinned).
//
// The GPUs are the ones the plugin sees (gpufan::DeviceRegistry), each with
// its NUMA node as hwloc places it (-1, "?" in the table: unknown).
//
//   gpufan-h2d-bench [--device N] [--size-mib S] [--reps R] [--json FILE]
//
// The table: "CUDA driver version: 12.2" (the newest CUDA version the driver
// supports), a line saying what is measured, then per GPU: dev, name, pci,
// numa, size MiB, pageable, pinned, ratio (pinned / pageable), d2d, via-host
// (GB/s) and via/pinned.
// The JSON (--json):
//   {"benchmark": "h2d", "unit": "GB/s (1e9 B/s)", "size_bytes": N,
//    "repetitions": R, "cuda_driver_version": "12.2" (null if unknown),
//    "d2d_note": "...",
//    "devices": [{"ordinal", "name", "uuid", "pci_bus_id", "numa_node",
//                 "pageable_gbps", "pinned_gbps", "ratio", "d2d_gbps",
//                 "via_host_gbps", "via_host_ratio" (via-host / pinned),
//                 "pageable_ms", "pinned_ms", "d2d_ms", "via_host_ms"
//                 (every repetition)}]}
//
// Exit status: 0 measured, 77 no CUDA device (a skip, as meson and automake
// read it), 1 a CUDA error, 2 bad arguments.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cuda-driver-private.h"
#include "gpufan/cuda.h"
#include "gpufan/device-registry.h"
#include "gpufan/device.h"
#include "json-text.h"

namespace {

using gpufan::Device;
using gpufan::cuda::PrimaryContext;
using gpufan::cuda::StreamPool;
using gpufan::cuda::internal::Driver;
using gpufan_json::CloseJsonFile;
using gpufan_json::JsonNumbers;
using gpufan_json::JsonString;
using gpufan_json::OpenJsonFile;

constexpr int kExitSkip = 77;
constexpr int kExitUsage = 2;
constexpr size_t kPage = 4096;
constexpr int kWarmUp = 2;  // first copies pay for lazy driver setup

struct Options {
  int device = -1;  // -1: every device
  size_t size_mib = 64;
  int reps = 20;
  std::string json;
};

struct Result {
  Device device;
  size_t bytes = 0;
  std::vector<double> pageable_ms;
  std::vector<double> pinned_ms;
  std::vector<double> d2d_ms;       // device to device, same GPU
  std::vector<double> via_host_ms;  // down to pinned memory and up again
};

void Usage(FILE *out) {
  std::fprintf(out,
               "usage: gpufan-h2d-bench [--device N] [--size-mib S] "
               "[--reps R] [--json FILE]\n"
               "  --device N    only CUDA device N (default: every device)\n"
               "  --size-mib S  bytes per copy, in MiB (default 64)\n"
               "  --reps R      timed copies per kind (default 20)\n"
               "  --json FILE   also write the results as JSON to FILE\n");
}

// A whole decimal number in [min, max].
bool ParseNumber(const char *text, long min, long max, long *value) {
  errno = 0;
  char *end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
    return false;
  *value = v;
  return true;
}

// false: exit with `*status`.
bool ParseOptions(int argc, char **argv, Options *options, int *status) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      *status = 0;
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: unknown option or missing value\n",
                   arg.c_str());
      Usage(stderr);
      *status = kExitUsage;
      return false;
    }
    const char *value = argv[++i];
    long number = 0;
    bool ok = true;
    if (arg == "--device") {
      ok = ParseNumber(value, 0, 1 << 20, &number);
      options->device = static_cast<int>(number);
    } else if (arg == "--size-mib") {
      ok = ParseNumber(value, 1, 1 << 20, &number);
      options->size_mib = static_cast<size_t>(number);
    } else if (arg == "--reps") {
      ok = ParseNumber(value, 1, 1000000, &number);
      options->reps = static_cast<int>(number);
    } else if (arg == "--json") {
      options->json = value;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "bad option: %s %s\n", arg.c_str(), value);
      Usage(stderr);
      *status = kExitUsage;
      return false;
    }
  }
  return true;
}

double Median(std::vector<double> values) {
  if (values.empty())
    return 0.0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid]
                                : (values[mid - 1] + values[mid]) / 2.0;
}

// 10^9 bytes per second, the unit PCIe and NVLink figures use.
double GBps(size_t bytes, double ms) {
  return ms > 0.0 ? static_cast<double>(bytes) / (ms * 1e-3) / 1e9 : 0.0;
}

// Owners of what one device's run allocates, so that an Error thrown half
// way leaves nothing behind.
struct DeviceMemory {
  const Driver& driver;
  CUdeviceptr ptr = 0;
  ~DeviceMemory() {
    if (ptr != 0)
      driver.cuMemFree_v2(ptr);
  }
};

struct Event {
  const Driver& driver;
  CUevent event = nullptr;
  ~Event() {
    if (event != nullptr)
      driver.cuEventDestroy_v2(event);
  }
};

struct Registration {
  void *p = nullptr;
  ~Registration() {
    if (p == nullptr)
      return;
    try {
      gpufan::cuda::UnregisterHost(p);
    } catch (const gpufan::cuda::Error& e) {
      std::fprintf(stderr, "warning: %s\n", e.what());
    }
  }
};

// Times `reps` copies that `copy()` enqueues on `stream`, after kWarmUp
// untimed ones. Milliseconds per copy.
template <typename Copy>
std::vector<double> TimeCopies(const Driver& driver, CUstream stream, int reps,
                               const Copy& copy) {
  Event start{driver};
  Event stop{driver};
  GPUFAN_CU_CHECK(driver, cuEventCreate(&start.event, 0));
  GPUFAN_CU_CHECK(driver, cuEventCreate(&stop.event, 0));
  for (int i = 0; i < kWarmUp; ++i)
    copy();
  GPUFAN_CU_CHECK(driver, cuStreamSynchronize(stream));

  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    GPUFAN_CU_CHECK(driver, cuEventRecord(start.event, stream));
    copy();
    GPUFAN_CU_CHECK(driver, cuEventRecord(stop.event, stream));
    GPUFAN_CU_CHECK(driver, cuEventSynchronize(stop.event));
    float elapsed = 0.0f;
    GPUFAN_CU_CHECK(driver,
                    cuEventElapsedTime(&elapsed, start.event, stop.event));
    ms.push_back(static_cast<double>(elapsed));
  }
  return ms;
}

Result Measure(const Device& device, const Options& options) {
  const Driver& driver = gpufan::cuda::internal::RequireDriver();
  Result result;
  result.device = device;
  result.bytes = options.size_mib << 20;

  // Page-aligned, so the pinned run registers exactly these pages. Written
  // once, so the pageable run copies from real pages, not the zero page.
  std::unique_ptr<void, decltype(&std::free)> host(
      std::aligned_alloc(kPage, result.bytes), &std::free);
  if (host == nullptr)
    throw gpufan::cuda::Error("cannot allocate " +
                              std::to_string(result.bytes) +
                              " bytes of host memory");
  std::memset(host.get(), 0xa5, result.bytes);

  const std::shared_ptr<PrimaryContext> context =
      PrimaryContext::Retain(device.index);
  // two streams: the via-host copy comes down on one and goes up on the other
  const std::shared_ptr<StreamPool> pool =
      StreamPool::ForDevice(device.index, 2);
  PrimaryContext::ScopedPush push(*context);
  // Declared after the push: freed while the context is still current.
  StreamPool::Stream stream = pool->Acquire();
  const auto cu_stream = static_cast<CUstream>(stream.handle());
  DeviceMemory target{driver};
  GPUFAN_CU_CHECK(driver, cuMemAlloc_v2(&target.ptr, result.bytes));

  const auto host_to_device = [&] {
    GPUFAN_CU_CHECK(driver, cuMemcpyHtoDAsync_v2(target.ptr, host.get(),
                                                 result.bytes, cu_stream));
  };
  result.pageable_ms =
      TimeCopies(driver, cu_stream, options.reps, host_to_device);
  {
    Registration registration;
    gpufan::cuda::RegisterHost(host.get(), result.bytes);
    registration.p = host.get();
    result.pinned_ms =
        TimeCopies(driver, cu_stream, options.reps, host_to_device);
  }

  // From the buffer the host copies filled to a second one on the same GPU.
  DeviceMemory copy{driver};
  GPUFAN_CU_CHECK(driver, cuMemAlloc_v2(&copy.ptr, result.bytes));
  result.d2d_ms = TimeCopies(driver, cu_stream, options.reps, [&] {
    GPUFAN_CU_CHECK(driver, cuMemcpyDtoDAsync_v2(copy.ptr, target.ptr,
                                                 result.bytes, cu_stream));
  });

  // A frame's way between GPUs without peer access: the host buffer pinned
  // again, the copy as CopyPlanesViaHost makes it (it waits for itself).
  Registration registration;
  gpufan::cuda::RegisterHost(host.get(), result.bytes);
  registration.p = host.get();
  constexpr size_t kRow = 16 << 10;
  gpufan::cuda::Plane2D plane;
  plane.src = copy.ptr;
  plane.dst = target.ptr;
  plane.src_pitch = plane.dst_pitch = plane.width_bytes = kRow;
  plane.height = result.bytes / kRow;
  const std::vector<gpufan::cuda::Plane2D> planes{plane};
  StreamPool::Stream down = pool->Acquire();
  for (int i = 0; i < kWarmUp + options.reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    gpufan::cuda::CopyPlanesViaHost(device.index, down.handle(), device.index,
                                    cu_stream, host.get(), planes);
    const std::chrono::duration<double, std::milli> took =
        std::chrono::steady_clock::now() - start;
    if (i >= kWarmUp)
      result.via_host_ms.push_back(took.count());
  }
  return result;
}

// What a device-to-device figure counts, for the JSON.
constexpr char kD2dNote[] =
    "d2d_gbps counts bytes copied; device memory traffic (read + write) is "
    "twice that";

void PrintTable(const std::vector<Result>& results, int reps,
                const std::string& driver_version) {
  std::printf("CUDA driver version: %s\n",
              driver_version.empty() ? "?" : driver_version.c_str());
  std::printf(
      "H2D and D2D copies, median of %d, GB/s = 10^9 B copied/s "
      "(D2D reads and writes: memory traffic is twice the d2d figure)\n",
      reps);
  std::printf("%-4s %-32s %-13s %4s %9s %10s %8s %7s %8s %9s %11s\n", "dev",
              "name", "pci", "numa", "size MiB", "pageable", "pinned", "ratio",
              "d2d", "via-host", "via/pinned");
  for (const Result& r : results) {
    const double pageable = GBps(r.bytes, Median(r.pageable_ms));
    const double pinned = GBps(r.bytes, Median(r.pinned_ms));
    const std::string numa = r.device.numa_node >= 0
                                 ? std::to_string(r.device.numa_node)
                                 : std::string("?");
    const double via = GBps(r.bytes, Median(r.via_host_ms));
    std::printf(
        "%-4d %-32.32s %-13s %4s %9zu %10.2f %8.2f %7.2f %8.2f %9.2f %11.2f\n",
        r.device.index, r.device.name.c_str(), r.device.pci_bus_id.c_str(),
        numa.c_str(), r.bytes >> 20, pageable, pinned,
        pageable > 0.0 ? pinned / pageable : 0.0,
        GBps(r.bytes, Median(r.d2d_ms)), via,
        pinned > 0.0 ? via / pinned : 0.0);
  }
}

bool WriteJson(const std::string& path, const std::vector<Result>& results,
               const Options& options, const std::string& driver_version) {
  FILE *out = OpenJsonFile(path);
  if (out == nullptr)
    return false;
  std::fprintf(
      out,
      "{\n  \"benchmark\": \"h2d\",\n  \"unit\": \"GB/s (1e9 B/s)\","
      "\n  \"size_bytes\": %zu,\n  \"repetitions\": %d,\n"
      "  \"cuda_driver_version\": %s,\n  \"d2d_note\": %s,\n"
      "  \"devices\": [",
      options.size_mib << 20, options.reps,
      driver_version.empty() ? "null" : JsonString(driver_version).c_str(),
      JsonString(kD2dNote).c_str());
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const double pageable = GBps(r.bytes, Median(r.pageable_ms));
    const double pinned = GBps(r.bytes, Median(r.pinned_ms));
    const double via = GBps(r.bytes, Median(r.via_host_ms));
    std::fprintf(
        out,
        "%s\n    {\"ordinal\": %d, \"name\": %s, \"uuid\": %s, "
        "\"pci_bus_id\": %s, \"numa_node\": %d,\n"
        "     \"pageable_gbps\": %.4f, \"pinned_gbps\": %.4f, "
        "\"ratio\": %.4f, \"d2d_gbps\": %.4f,\n"
        "     \"via_host_gbps\": %.4f, \"via_host_ratio\": %.4f,\n"
        "     \"pageable_ms\": %s,\n     \"pinned_ms\": %s,\n"
        "     \"d2d_ms\": %s,\n     \"via_host_ms\": %s}",
        i > 0 ? "," : "", r.device.index, JsonString(r.device.name).c_str(),
        JsonString(r.device.uuid).c_str(),
        JsonString(r.device.pci_bus_id).c_str(), r.device.numa_node, pageable,
        pinned, pageable > 0.0 ? pinned / pageable : 0.0,
        GBps(r.bytes, Median(r.d2d_ms)), via, pinned > 0.0 ? via / pinned : 0.0,
        JsonNumbers(r.pageable_ms).c_str(), JsonNumbers(r.pinned_ms).c_str(),
        JsonNumbers(r.d2d_ms).c_str(), JsonNumbers(r.via_host_ms).c_str());
  }
  std::fprintf(out, "\n  ]\n}\n");
  return CloseJsonFile(out, path);
}

}  // namespace

int main(int argc, char **argv) {
  Options options;
  int status = 0;
  if (!ParseOptions(argc, argv, &options, &status))
    return status;

  // As the plugin sees them: with their NUMA nodes (cuda::Discover() alone
  // leaves those unknown).
  const gpufan::DeviceRegistry registry = gpufan::DeviceRegistry::Discover();
  std::vector<Device> devices;
  std::copy_if(registry.devices().begin(), registry.devices().end(),
               std::back_inserter(devices), [](const Device& d) {
                 return d.kind == gpufan::DeviceKind::kCuda;
               });
  if (devices.empty()) {
    std::printf("no CUDA device: %s\n", registry.gpu_note().c_str());
    return kExitSkip;
  }
  if (options.device >= 0) {
    const auto it = std::find_if(
        devices.begin(), devices.end(),
        [&](const Device& d) { return d.index == options.device; });
    if (it == devices.end()) {
      std::fprintf(stderr, "no CUDA device %d (%zu found)\n", options.device,
                   devices.size());
      return kExitUsage;
    }
    devices = {*it};
  }

  std::vector<Result> results;
  std::string driver_version;
  try {
    const Driver& driver = gpufan::cuda::internal::RequireDriver();
    int version = 0;
    GPUFAN_CU_CHECK(driver, cuDriverGetVersion(&version));
    driver_version = gpufan::cuda::internal::FormatDriverVersion(version);
    for (const Device& device : devices)
      results.push_back(Measure(device, options));
  } catch (const gpufan::cuda::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  PrintTable(results, options.reps, driver_version);
  if (!options.json.empty() &&
      !WriteJson(options.json, results, options, driver_version))
    return 1;
  return 0;
}
