// SPDX-License-Identifier: LGPL-2.1-or-later
// The machine's NUMA layout (through hwloc when built with it): which CPUs and
// which NUMA node are local to a GPU, thread binding, node-bound memory.
//
// Numbering: NUMA nodes and CPUs are OS indexes (as in
// /sys/devices/system/node/nodeN and /proc/cpuinfo, and as CUDA reports a
// device's NUMA id), never hwloc logical indexes.
//
// Without hwloc (GPUFAN_HAVE_HWLOC == 0) the same API describes an unknown
// machine: no NUMA nodes, unknown localities, binding refused with a reason,
// and AllocateOnNode() hands out ordinary page-aligned memory.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/prelude.h"

namespace gpufan {

// Where a device sits. Plain value type.
struct GPUFAN_API Locality {
  // The single NUMA node local to the device; -1 when unknown, including when
  // the device is attached above several nodes (then no node is "its" node).
  int numa_node = -1;
  // CPUs local to the device (OS indexes, ascending); empty when the device
  // was not found. May be non-empty with numa_node == -1 (several nodes).
  std::vector<int> cpus;

  bool known() const { return numa_node >= 0; }
};

// A PCI address; CUDA's "0000:3B:00.0" and nvidia-smi's "00000000:3B:00.0"
// both parse (hex, case-insensitive, domain up to 8 digits).
struct GPUFAN_API PciAddress {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  unsigned function = 0;
};

// "dddd:bb:dd.f"; std::nullopt when malformed or out of range.
GPUFAN_API std::optional<PciAddress> ParsePciBusId(const std::string& text);

// CPUs (ascending, as Locality and Device hold them) in the kernel's cpulist
// form: "0-3,8" for {0, 1, 2, 3, 8}; empty for none.
GPUFAN_API std::string FormatCpuList(const std::vector<int>& cpus);

// Thread-safety: immutable once created; every method may be called from any
// thread concurrently. Objects are only handed out through shared_ptr.
class GPUFAN_API Topology {
 public:
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  // This machine's topology, loaded on first use (PCI devices included, so
  // GPUs can be located). Never null: when hwloc is missing or fails to load,
  // an unknown topology (see the file comment).
  static std::shared_ptr<const Topology> System();

  // Topologies for tests: an hwloc XML document (as `lstopo --of xml`
  // writes) or a synthetic description ("pack:2 numa:1 core:4 pu:1"). They
  // are never taken for this machine: binding is refused and memory is not
  // bound. nullptr with *error set (when error is not null) on failure,
  // including in a build without hwloc.
  static std::shared_ptr<const Topology> FromXml(const std::string& xml_text,
                                                 std::string *error);
  static std::shared_ptr<const Topology> FromSynthetic(
      const std::string& description, std::string *error);

  // True only for System() when hwloc loaded it: binding calls act on it.
  bool is_this_system() const;

  int numa_node_count() const;
  // NUMA node OS indexes, ascending.
  std::vector<int> NumaNodes() const;
  // CPUs (OS indexes, ascending) local to `node`; empty if there is no such
  // node.
  std::vector<int> CpusOfNode(int node) const;
  // Every CPU the process may use; empty when unknown.
  std::vector<int> AllCpus() const;

  // The locality of a PCI device given as "dddd:bb:dd.f". Unknown (-1, no
  // CPUs) when the id is malformed or the device is not in the topology.
  Locality LocatePciDevice(const std::string& pci_bus_id) const;

  // Sets device.numa_node and device.local_cpus from this topology.
  //  - CUDA devices: from LocatePciDevice(device.pci_bus_id) when the device
  //    is found (numa_node may then be -1: attached above several nodes).
  //  - CPU devices: only on a machine with exactly one NUMA node, where they
  //    get that node and *all* its CPUs, so that a CPU lane's threads stay
  //    free to run on any CPU. With several nodes a CPU lane has no node of
  //    its own and stays unknown (unbound).
  // When the topology cannot tell, the device is left as it was (the CUDA
  // driver may have filled it). Returns whether the device was changed.
  bool FillLocality(Device& device) const;

  // Binds the calling thread to `cpus` (OS indexes). False with *why_not set
  // (when not null) on a topology that is not this machine's, with empty or
  // unknown cpus, where the platform cannot bind threads, or in a build
  // without hwloc. Never aborts.
  bool BindCurrentThread(const std::vector<int>& cpus,
                         std::string *why_not) const;

  // `bytes` (> 0) of page-aligned memory bound to NUMA node `node` (OS
  // index). When it cannot be bound (unknown node, not this machine, no
  // hwloc, binding refused by the OS) the memory is ordinary page-aligned
  // memory and *bound is false. Pages are not touched here. Throws
  // std::bad_alloc when no memory can be had; nullptr for bytes == 0.
  void *AllocateOnNode(size_t bytes, int node, bool *bound) const;
  // Frees what AllocateOnNode() of this same Topology returned, with the same
  // `bytes`. nullptr is ignored.
  void Free(void *p, size_t bytes) const;

  // The node the memory policy of [p, p + bytes) binds it to, when it is
  // bound to exactly one node; -1 otherwise (not bound, several nodes, not
  // this machine). For tests and diagnostics: walks every page.
  int BoundNodeOfArea(const void *p, size_t bytes) const;

 private:
  struct Impl;  // the hwloc topology, or nothing (topology-none.cpp)

  explicit Topology(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufan
