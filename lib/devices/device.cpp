// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/device.h"

#include <algorithm>
#include <cstddef>
#include <string>

namespace gpufan {

const char *DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
  }
  return "unknown";
}

const char *SupportName(Support support) {
  switch (support) {
    case Support::kUnknown:
      return "unknown";
    case Support::kNo:
      return "no";
    case Support::kYes:
      return "yes";
  }
  return "unknown";
}

namespace {

constexpr int kMaxComputeCapabilityPart = 99;

// Reads the decimal digits at text[*pos...] (at least one); false when there
// are none or their value is above kMaxComputeCapabilityPart.
bool ReadPart(std::string_view text, size_t *pos, int *value) {
  const size_t begin = *pos;
  int v = 0;
  while (*pos < text.size() && text[*pos] >= '0' && text[*pos] <= '9') {
    // Saturates: any longer number is out of range anyway.
    v = std::min(v * 10 + (text[*pos] - '0'), kMaxComputeCapabilityPart + 1);
    ++*pos;
  }
  *value = v;
  return *pos > begin && v <= kMaxComputeCapabilityPart;
}

}  // namespace

std::optional<ComputeCapability> ParseComputeCapability(std::string_view text) {
  ComputeCapability cc;
  size_t pos = 0;
  if (!ReadPart(text, &pos, &cc.major))
    return std::nullopt;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    if (!ReadPart(text, &pos, &cc.minor))
      return std::nullopt;
  }
  if (pos != text.size())
    return std::nullopt;
  return cc;
}

Device Device::Cpu(int index) {
  Device device;
  device.kind = DeviceKind::kCpu;
  device.index = index;
  device.name = "cpu:" + std::to_string(index);
  return device;
}

std::string Device::Describe() const {
  std::string text = name.empty() ? std::string(DeviceKindName(kind)) + ":" +
                                        std::to_string(index)
                                  : name;
  if (numa_node >= 0)
    text += " (numa " + std::to_string(numa_node) + ")";
  return text;
}

}  // namespace gpufan
