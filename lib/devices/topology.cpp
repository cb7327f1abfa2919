// SPDX-License-Identifier: LGPL-2.1-or-later
// The parts of Topology that do not depend on the back end.
#include "gpufan/topology.h"

#include <sys/mman.h>

#include <cctype>
#include <new>

#include "topology-private.h"

namespace gpufan {

namespace {

// Hex digits of `text` from *pos up to (not including) `stop` or the end;
// false unless 1..max_digits digits were read.
bool ReadHex(const std::string& text, size_t *pos, char stop, size_t max_digits,
             unsigned *value) {
  unsigned v = 0;
  size_t digits = 0;
  while (*pos < text.size() && text[*pos] != stop) {
    const char c = text[*pos];
    if (!std::isxdigit(static_cast<unsigned char>(c)) || digits == max_digits)
      return false;
    v = v * 16 +
        static_cast<unsigned>(
            std::isdigit(static_cast<unsigned char>(c))
                ? c - '0'
                : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
    ++digits;
    ++*pos;
  }
  *value = v;
  return digits > 0;
}

}  // namespace

std::optional<PciAddress> ParsePciBusId(const std::string& text) {
  PciAddress a;
  size_t pos = 0;
  // Separators are checked after each field: ReadHex stops at them.
  if (!ReadHex(text, &pos, ':', 8, &a.domain) || pos >= text.size())
    return std::nullopt;
  ++pos;
  if (!ReadHex(text, &pos, ':', 2, &a.bus) || pos >= text.size())
    return std::nullopt;
  ++pos;
  if (!ReadHex(text, &pos, '.', 2, &a.device) || pos >= text.size())
    return std::nullopt;
  ++pos;
  if (!ReadHex(text, &pos, '\0', 1, &a.function) || pos != text.size())
    return std::nullopt;
  // PCI allows 32 devices of 8 functions per bus.
  if (a.device > 31 || a.function > 7)
    return std::nullopt;
  return a;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!out.empty())
      out += ",";
    out += std::to_string(cpus[i]);
    if (j > i)
      out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

bool Topology::FillLocality(Device& device) const {
  switch (device.kind) {
    case DeviceKind::kCuda: {
      Locality locality = LocatePciDevice(device.pci_bus_id);
      if (locality.cpus.empty())
        return false;
      device.numa_node = locality.numa_node;
      device.local_cpus = std::move(locality.cpus);
      return true;
    }
    case DeviceKind::kCpu: {
      if (numa_node_count() != 1)
        return false;
      std::vector<int> cpus = AllCpus();
      if (cpus.empty())
        return false;
      device.numa_node = NumaNodes().front();
      device.local_cpus = std::move(cpus);
      return true;
    }
  }
  return false;
}

namespace detail {

void *MapPages(size_t bytes) {
  const int prot = PROT_READ | PROT_WRITE;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  // fd -1 is what MAP_ANONYMOUS asks for.
  // cppcheck-suppress invalidFunctionArg
  void *p = mmap(nullptr, bytes, prot, flags, -1, 0);
  if (p == MAP_FAILED)
    throw std::bad_alloc();
  return p;
}

void UnmapPages(void *p, size_t bytes) {
  if (p != nullptr)
    munmap(p, bytes);
}

}  // namespace detail

}  // namespace gpufan
