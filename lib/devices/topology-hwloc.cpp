// SPDX-License-Identifier: LGPL-2.1-or-later
// Topology on top of hwloc (built when GPUFAN_HAVE_HWLOC is 1).
#include <hwloc.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "gpufan/topology.h"
#include "topology-private.h"

namespace gpufan {

namespace {

// RAII for hwloc bitmaps.
struct BitmapDeleter {
  void operator()(hwloc_bitmap_s *b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

Bitmap NewBitmap() {
  Bitmap b(hwloc_bitmap_alloc());
  if (!b)
    throw std::bad_alloc();
  return b;
}

std::vector<int> ToVector(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  // An infinite set (never the case for loaded cpusets) would not end.
  if (set == nullptr || hwloc_bitmap_weight(set) < 0)
    return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i))
    out.push_back(i);
  return out;
}

std::string Errno(const char *what) {
  return std::string(what) + ": " + std::strerror(errno);
}

}  // namespace

struct Topology::Impl {
  // nullptr: hwloc could not load this machine's topology; every query then
  // answers "unknown".
  hwloc_topology_t topology = nullptr;
  bool this_system = false;

  ~Impl() {
    if (topology != nullptr)
      hwloc_topology_destroy(topology);
  }

  // Loads with `configure` (which selects the source) run in between init and
  // load; nullptr with *error on failure.
  template <typename Configure>
  static std::unique_ptr<Impl> Load(Configure configure, std::string *error) {
    auto impl = std::make_unique<Impl>();
    if (hwloc_topology_init(&impl->topology) != 0) {
      impl->topology = nullptr;
      if (error != nullptr)
        *error = Errno("hwloc_topology_init");
      return nullptr;
    }
    // GPUs are PCI devices: keep the I/O objects that matter (GPUs, NICs,
    // storage and the bridges above them).
    hwloc_topology_set_io_types_filter(impl->topology,
                                       HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    std::string why;
    if (!configure(impl->topology, &why)) {
      if (error != nullptr)
        *error = why;
      return nullptr;
    }
    if (hwloc_topology_load(impl->topology) != 0) {
      if (error != nullptr)
        *error = Errno("hwloc could not load the topology");
      return nullptr;
    }
    // XML and synthetic topologies come with no-op binding hooks that
    // "succeed": ask hwloc whether binding really acts on this machine.
    impl->this_system = hwloc_topology_is_thissystem(impl->topology) != 0;
    return impl;
  }
};

Topology::Topology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Topology::~Topology() = default;

std::shared_ptr<const Topology> Topology::System() {
  // Loaded once: a full load with PCI discovery takes milliseconds.
  static const std::shared_ptr<const Topology> system = [] {
    std::unique_ptr<Impl> impl = Impl::Load(
        [](hwloc_topology_t, std::string *) { return true; }, nullptr);
    if (!impl)
      impl = std::make_unique<Impl>();
    return std::shared_ptr<const Topology>(new Topology(std::move(impl)));
  }();
  return system;
}

std::shared_ptr<const Topology> Topology::FromXml(const std::string& xml_text,
                                                  std::string *error) {
  std::unique_ptr<Impl> impl = Impl::Load(
      [&xml_text](hwloc_topology_t t, std::string *why) {
        // The size counts the terminating NUL.
        if (hwloc_topology_set_xmlbuffer(
                t, xml_text.c_str(), static_cast<int>(xml_text.size() + 1)) !=
            0) {
          *why = Errno("hwloc rejected the XML topology");
          return false;
        }
        return true;
      },
      error);
  if (!impl)
    return nullptr;
  return std::shared_ptr<const Topology>(new Topology(std::move(impl)));
}

std::shared_ptr<const Topology> Topology::FromSynthetic(
    const std::string& description, std::string *error) {
  std::unique_ptr<Impl> impl = Impl::Load(
      [&description](hwloc_topology_t t, std::string *why) {
        if (hwloc_topology_set_synthetic(t, description.c_str()) != 0) {
          *why =
              "hwloc rejected the synthetic topology \"" + description + "\"";
          return false;
        }
        return true;
      },
      error);
  if (!impl)
    return nullptr;
  return std::shared_ptr<const Topology>(new Topology(std::move(impl)));
}

bool Topology::is_this_system() const {
  return impl_->topology != nullptr && impl_->this_system;
}

int Topology::numa_node_count() const {
  if (impl_->topology == nullptr)
    return 0;
  return hwloc_get_nbobjs_by_type(impl_->topology, HWLOC_OBJ_NUMANODE);
}

std::vector<int> Topology::NumaNodes() const {
  if (impl_->topology == nullptr)
    return {};
  return ToVector(hwloc_topology_get_topology_nodeset(impl_->topology));
}

std::vector<int> Topology::CpusOfNode(int node) const {
  if (impl_->topology == nullptr || node < 0)
    return {};
  hwloc_obj_t obj = hwloc_get_numanode_obj_by_os_index(
      impl_->topology, static_cast<unsigned>(node));
  if (obj == nullptr)
    return {};
  return ToVector(obj->cpuset);
}

std::vector<int> Topology::AllCpus() const {
  if (impl_->topology == nullptr)
    return {};
  return ToVector(hwloc_topology_get_allowed_cpuset(impl_->topology));
}

Locality Topology::LocatePciDevice(const std::string& pci_bus_id) const {
  Locality locality;
  const std::optional<PciAddress> address = ParsePciBusId(pci_bus_id);
  if (impl_->topology == nullptr || !address)
    return locality;
  hwloc_obj_t pcidev =
      hwloc_get_pcidev_by_busid(impl_->topology, address->domain, address->bus,
                                address->device, address->function);
  if (pcidev == nullptr)
    return locality;
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(impl_->topology, pcidev);
  if (ancestor == nullptr)
    return locality;
  locality.cpus = ToVector(ancestor->cpuset);
  // A device under the Machine (or a group of sockets) is as close to one of
  // their nodes as to the others: no node is its own.
  if (ancestor->nodeset != nullptr &&
      hwloc_bitmap_weight(ancestor->nodeset) == 1)
    locality.numa_node = hwloc_bitmap_first(ancestor->nodeset);
  return locality;
}

bool Topology::BindCurrentThread(const std::vector<int>& cpus,
                                 std::string *why_not) const {
  auto refuse = [why_not](std::string why) {
    if (why_not != nullptr)
      *why_not = std::move(why);
    return false;
  };
  if (impl_->topology == nullptr)
    return refuse("hwloc could not load this machine's topology");
  if (!impl_->this_system)
    return refuse("the topology does not describe this machine");
  if (cpus.empty())
    return refuse("no CPUs to bind to");
  const hwloc_topology_support *support =
      hwloc_topology_get_support(impl_->topology);
  if (support == nullptr || support->cpubind == nullptr ||
      !support->cpubind->set_thisthread_cpubind)
    return refuse("this platform cannot bind threads");
  Bitmap set = NewBitmap();
  for (int cpu : cpus) {
    if (cpu < 0)
      return refuse("negative CPU index " + std::to_string(cpu));
    hwloc_bitmap_set(set.get(), static_cast<unsigned>(cpu));
  }
  // Only CPUs the process may use: binding to others fails or, worse, is
  // silently narrowed by the kernel.
  if (!hwloc_bitmap_isincluded(
          set.get(), hwloc_topology_get_allowed_cpuset(impl_->topology)))
    return refuse("CPUs not available to this process");
  if (hwloc_set_cpubind(impl_->topology, set.get(), HWLOC_CPUBIND_THREAD) != 0)
    return refuse(Errno("hwloc_set_cpubind"));
  return true;
}

void *Topology::AllocateOnNode(size_t bytes, int node, bool *bound) const {
  if (bound != nullptr)
    *bound = false;
  if (bytes == 0)
    return nullptr;
  if (impl_->topology == nullptr)
    return detail::MapPages(bytes);
  const bool known_node =
      node >= 0 && hwloc_get_numanode_obj_by_os_index(
                       impl_->topology, static_cast<unsigned>(node)) != nullptr;
  if (impl_->this_system && known_node) {
    Bitmap nodeset = NewBitmap();
    hwloc_bitmap_only(nodeset.get(), static_cast<unsigned>(node));
    // STRICT: fail rather than hand back unbound memory that we would then
    // report as bound.
    void *p = hwloc_alloc_membind(
        impl_->topology, bytes, nodeset.get(), HWLOC_MEMBIND_BIND,
        HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
    if (p != nullptr) {
      if (bound != nullptr)
        *bound = true;
      return p;
    }
  }
  // hwloc_alloc() pairs with hwloc_free() like hwloc_alloc_membind() does,
  // so Free() needs no record of which one was used.
  void *p = hwloc_alloc(impl_->topology, bytes);
  if (p == nullptr)
    throw std::bad_alloc();
  return p;
}

void Topology::Free(void *p, size_t bytes) const {
  if (p == nullptr)
    return;
  if (impl_->topology == nullptr)
    detail::UnmapPages(p, bytes);
  else
    hwloc_free(impl_->topology, p, bytes);
}

int Topology::BoundNodeOfArea(const void *p, size_t bytes) const {
  if (impl_->topology == nullptr || !impl_->this_system || p == nullptr ||
      bytes == 0)
    return -1;
  Bitmap nodeset = NewBitmap();
  hwloc_membind_policy_t policy;
  if (hwloc_get_area_membind(impl_->topology, p, bytes, nodeset.get(), &policy,
                             HWLOC_MEMBIND_BYNODESET) != 0)
    return -1;
  if (policy != HWLOC_MEMBIND_BIND || hwloc_bitmap_weight(nodeset.get()) != 1)
    return -1;
  return hwloc_bitmap_first(nodeset.get());
}

}  // namespace gpufan
