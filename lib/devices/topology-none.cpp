// SPDX-License-Identifier: LGPL-2.1-or-later
// Topology in a build without hwloc (GPUFAN_HAVE_HWLOC is 0): an unknown
// machine. Lanes then run unbound and pools hand out ordinary memory.
#include "gpufan/topology.h"
#include "topology-private.h"

namespace gpufan {

namespace {

constexpr const char kNoHwloc[] = "libgpufan was built without hwloc";

}  // namespace

struct Topology::Impl {};

Topology::Topology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Topology::~Topology() = default;

std::shared_ptr<const Topology> Topology::System() {
  static const std::shared_ptr<const Topology> system(
      new Topology(std::make_unique<Impl>()));
  return system;
}

std::shared_ptr<const Topology> Topology::FromXml(const std::string&,
                                                  std::string *error) {
  if (error != nullptr)
    *error = kNoHwloc;
  return nullptr;
}

std::shared_ptr<const Topology> Topology::FromSynthetic(const std::string&,
                                                        std::string *error) {
  if (error != nullptr)
    *error = kNoHwloc;
  return nullptr;
}

bool Topology::is_this_system() const {
  return false;
}

int Topology::numa_node_count() const {
  return 0;
}

std::vector<int> Topology::NumaNodes() const {
  return {};
}

std::vector<int> Topology::CpusOfNode(int) const {
  return {};
}

std::vector<int> Topology::AllCpus() const {
  return {};
}

Locality Topology::LocatePciDevice(const std::string&) const {
  return {};
}

bool Topology::BindCurrentThread(const std::vector<int>&,
                                 std::string *why_not) const {
  if (why_not != nullptr)
    *why_not = kNoHwloc;
  return false;
}

void *Topology::AllocateOnNode(size_t bytes, int, bool *bound) const {
  if (bound != nullptr)
    *bound = false;
  if (bytes == 0)
    return nullptr;
  return detail::MapPages(bytes);
}

void Topology::Free(void *p, size_t bytes) const {
  detail::UnmapPages(p, bytes);
}

int Topology::BoundNodeOfArea(const void *, size_t) const {
  return -1;
}

}  // namespace gpufan
