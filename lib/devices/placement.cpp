// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/placement.h"

#include <cctype>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>

namespace gpufan {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return s.substr(b, e - b);
}

// A non-negative decimal integer that fits an int, nothing else.
bool ParseCount(const std::string& text, long max, long *out) {
  if (text.empty() || text.size() > 9)
    return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  *out = std::strtol(text.c_str(), nullptr, 10);
  return *out <= max;
}

std::vector<const Device *> OfKind(const std::vector<Device>& devices,
                                   DeviceKind kind) {
  std::vector<const Device *> out;
  for (const Device& d : devices)
    if (d.kind == kind)
      out.push_back(&d);
  return out;
}

const Device *FindGpu(const std::vector<Device>& devices, int ordinal) {
  for (const Device& d : devices)
    if (d.kind == DeviceKind::kCuda && d.index == ordinal)
      return &d;
  return nullptr;
}

Placement Fail(std::string error) {
  Placement p;
  p.error = std::move(error);
  return p;
}

Placement Use(const Device& device) {
  Placement p;
  p.ok = true;
  p.device = device;
  return p;
}

std::string LaneName(uint32_t lane_index) {
  return "src_" + std::to_string(lane_index);
}

// A named GPU must exist and pass the hints.
Placement UseGpu(int ordinal, const std::string& why_this_gpu,
                 const PlacementHints& hints,
                 const std::vector<Device>& available,
                 const FreeMemoryFn& free_memory) {
  const Device *gpu = FindGpu(available, ordinal);
  if (!gpu) {
    const size_t count = OfKind(available, DeviceKind::kCuda).size();
    return Fail(
        why_this_gpu + " names GPU " + std::to_string(ordinal) +
        ", but this machine has " + std::to_string(count) + " GPU(s)" +
        (count ? " (ordinals 0.." + std::to_string(count - 1) + ")" : ""));
  }
  const std::string reason = IneligibleReason(*gpu, hints, free_memory);
  if (!reason.empty())
    return Fail(why_this_gpu + " names GPU " + std::to_string(ordinal) + " (" +
                gpu->name + "), which fails the placement hints: " + reason);
  return Use(*gpu);
}

}  // namespace

bool DeviceSpec::Parse(const std::string& raw, DeviceSpec *spec,
                       std::string *error) {
  const std::string text = Trim(raw);
  DeviceSpec parsed;
  if (text.empty() || text == "auto") {
    *spec = parsed;
    return true;
  }
  if (text.compare(0, 3, "cpu") == 0) {
    parsed.mode = Mode::kCpu;
    const std::string rest = text.substr(3);
    if (!rest.empty()) {
      long count = 0;
      if (rest[0] != ':' ||
          !ParseCount(Trim(rest.substr(1)), 1 << 20, &count) || count < 1) {
        *error = "'" + text + "': expected cpu or cpu:N with N >= 1";
        return false;
      }
      parsed.cpu_lanes = static_cast<uint32_t>(count);
    }
    *spec = parsed;
    return true;
  }
  parsed.mode = Mode::kGpuList;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos)
      comma = text.size();
    const std::string item = Trim(text.substr(start, comma - start));
    long ordinal = 0;
    if (!ParseCount(item, 1 << 16, &ordinal)) {
      *error = "'" + text + "': '" + item +
               "' is not a GPU ordinal (expected auto, a list of GPU "
               "ordinals like 0,1,1, cpu or cpu:N)";
      return false;
    }
    parsed.gpus.push_back(static_cast<int>(ordinal));
    start = comma + 1;
  }
  *spec = parsed;
  return true;
}

std::string DeviceSpec::ToString() const {
  switch (mode) {
    case Mode::kAuto:
      return "auto";
    case Mode::kCpu:
      return cpu_lanes ? "cpu:" + std::to_string(cpu_lanes) : "cpu";
    case Mode::kGpuList:
      break;
  }
  std::string out;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i)
      out += ",";
    out += std::to_string(gpus[i]);
  }
  return out;
}

bool PlacementHints::empty() const {
  return min_free_memory == 0 && min_cc_major == 0 && min_cc_minor == 0 &&
         !need_nvenc && !need_nvdec;
}

std::string PlacementHints::Describe() const {
  std::string out;
  auto add = [&out](const std::string& part) {
    out += (out.empty() ? "" : ", ") + part;
  };
  if (min_free_memory)
    add("free memory >= " + std::to_string(min_free_memory / kMiB) + " MiB");
  if (min_cc_major || min_cc_minor)
    add("compute capability >= " + std::to_string(min_cc_major) + "." +
        std::to_string(min_cc_minor));
  if (need_nvenc)
    add("NVENC");
  if (need_nvdec)
    add("NVDEC");
  return out.empty() ? "none" : out;
}

namespace {

std::mutex exclusions_mutex;
std::map<int, std::string>& Exclusions() {
  static std::map<int, std::string> exclusions;  // under exclusions_mutex
  return exclusions;
}

}  // namespace

void ExcludeGpu(int ordinal, const std::string& why) {
  std::lock_guard<std::mutex> lock(exclusions_mutex);
  Exclusions().emplace(ordinal, why);
}

std::string GpuExclusion(int ordinal) {
  std::lock_guard<std::mutex> lock(exclusions_mutex);
  auto it = Exclusions().find(ordinal);
  return it == Exclusions().end() ? "" : it->second;
}

std::string IneligibleReason(const Device& device, const PlacementHints& hints,
                             const FreeMemoryFn& free_memory) {
  if (device.kind != DeviceKind::kCuda)
    return "";
  const std::string excluded = GpuExclusion(device.index);
  if (!excluded.empty())
    return "not used again in this process after a sticky CUDA error: " +
           excluded;
  if (device.cc_major < hints.min_cc_major ||
      (device.cc_major == hints.min_cc_major &&
       device.cc_minor < hints.min_cc_minor))
    return "compute capability " + std::to_string(device.cc_major) + "." +
           std::to_string(device.cc_minor) + " < " +
           std::to_string(hints.min_cc_major) + "." +
           std::to_string(hints.min_cc_minor);
  if (hints.need_nvenc && device.nvenc != Support::kYes)
    return std::string("NVENC ") +
           (device.nvenc == Support::kNo ? "not present" : "not known");
  if (hints.need_nvdec && device.nvdec != Support::kYes)
    return std::string("NVDEC ") +
           (device.nvdec == Support::kNo ? "not present" : "not known");
  if (hints.min_free_memory) {
    uint64_t free_bytes = 0;
    try {
      free_bytes = free_memory ? free_memory(device) : 0;
    } catch (const std::exception& e) {
      return std::string("free memory unreadable: ") + e.what();
    }
    if (free_bytes < hints.min_free_memory)
      return std::to_string(free_bytes / kMiB) + " MiB free < " +
             std::to_string(hints.min_free_memory / kMiB) + " MiB";
  }
  return "";
}

Placement PlaceLane(const DeviceSpec& spec, const PlacementHints& hints,
                    const std::vector<Device>& available, uint32_t lane_index,
                    int pad_gpu, const FreeMemoryFn& free_memory) {
  if (pad_gpu >= 0)
    return UseGpu(pad_gpu, LaneName(lane_index) + "'s device property", hints,
                  available, free_memory);

  switch (spec.mode) {
    case DeviceSpec::Mode::kGpuList:
      if (lane_index >= spec.gpus.size())
        return Fail("devices=" + spec.ToString() + " names " +
                    std::to_string(spec.gpus.size()) + " lane(s), but " +
                    LaneName(lane_index) +
                    " was requested: add a GPU to the list or set the "
                    "pad's device property");
      return UseGpu(
          spec.gpus[lane_index],
          "devices=" + spec.ToString() + " (" + LaneName(lane_index) + ")",
          hints, available, free_memory);

    case DeviceSpec::Mode::kCpu: {
      if (spec.cpu_lanes && lane_index >= spec.cpu_lanes)
        return Fail("devices=" + spec.ToString() + " allows " +
                    std::to_string(spec.cpu_lanes) + " CPU lane(s), but " +
                    LaneName(lane_index) + " was requested");
      break;
    }

    case DeviceSpec::Mode::kAuto: {
      const std::vector<const Device *> gpus =
          OfKind(available, DeviceKind::kCuda);
      if (gpus.empty())
        break;  // CPU lanes
      std::vector<const Device *> eligible;
      std::string rejected;
      for (const Device *gpu : gpus) {
        const std::string reason = IneligibleReason(*gpu, hints, free_memory);
        if (reason.empty())
          eligible.push_back(gpu);
        else
          rejected += (rejected.empty() ? "" : "; ") + std::string("GPU ") +
                      std::to_string(gpu->index) + " (" + gpu->name +
                      "): " + reason;
      }
      if (eligible.empty())
        return Fail("no GPU passes the placement hints (" + hints.Describe() +
                    "): " + rejected);
      return Use(*eligible[lane_index % eligible.size()]);
    }
  }

  const std::vector<const Device *> cpus = OfKind(available, DeviceKind::kCpu);
  if (cpus.empty())
    return Use(Device::Cpu(0));
  return Use(*cpus[lane_index % cpus.size()]);
}

}  // namespace gpufan
