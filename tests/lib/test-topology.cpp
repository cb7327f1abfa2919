// SPDX-License-Identifier: LGPL-2.1-or-later
// Topology: NUMA logic checked on hwloc XML and synthetic topologies (the
// test machine may have one node), plus sanity checks on this machine.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpufan/device.h"
#include "gpufan/topology.h"

namespace gpufan {
namespace {

#define SKIP_WITHOUT_HWLOC()                               \
  do {                                                     \
    if (!GPUFAN_TEST_HAVE_HWLOC)                           \
      GTEST_SKIP() << "libgpufan was built without hwloc"; \
  } while (0)

std::vector<int> Range(int first, int last) {
  std::vector<int> out;
  for (int i = first; i <= last; ++i)
    out.push_back(i);
  return out;
}

// 2 sockets x (1 NUMA node, 4 cores); GPUs 0000:3b:00.0 under socket 0,
// 0000:af:00.0 behind a switch under socket 1, 0000:17:00.0 on the Machine.
std::shared_ptr<const Topology> TwoSockets() {
  std::ifstream file(GPUFAN_TEST_DATA_DIR "/two-sockets-three-gpus.xml");
  std::stringstream text;
  text << file.rdbuf();
  std::string error;
  auto topology = Topology::FromXml(text.str(), &error);
  EXPECT_NE(topology, nullptr) << error;
  return topology;
}

TEST(PciBusId, Parses) {
  auto a = ParsePciBusId("0000:3b:00.0");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->domain, 0u);
  EXPECT_EQ(a->bus, 0x3bu);
  EXPECT_EQ(a->device, 0u);
  EXPECT_EQ(a->function, 0u);
  // CUDA writes upper case, nvidia-smi an 8-digit domain.
  a = ParsePciBusId("00000001:AF:1f.7");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->domain, 1u);
  EXPECT_EQ(a->bus, 0xafu);
  EXPECT_EQ(a->device, 0x1fu);
  EXPECT_EQ(a->function, 7u);
}

TEST(PciBusId, RejectsMalformed) {
  for (const char *bad :
       {"", "3b:00.0", "0000:3b:00", "0000:3b:00.", "0000:3b:00.8",
        "0000:3b:20.0", "0000:3b:00.0 ", "0000:3bb:00.0", "0000:3g:00.0",
        "000000000:3b:00.0", ":3b:00.0", "0000::00.0", "0000:3b.00.0"})
    EXPECT_FALSE(ParsePciBusId(bad).has_value()) << '"' << bad << '"';
}

TEST(CpuList, RunsBecomeRanges) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({5}), "5");
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(FormatCpuList({0, 2, 4, 5}), "0,2,4-5");
  EXPECT_EQ(FormatCpuList({1, 2, 10, 11, 12, 40}), "1-2,10-12,40");
}

TEST(Topology, SyntheticNodesAndCpus) {
  SKIP_WITHOUT_HWLOC();
  std::string error;
  auto t = Topology::FromSynthetic("pack:2 numa:1 core:4 pu:1", &error);
  ASSERT_NE(t, nullptr) << error;
  EXPECT_FALSE(t->is_this_system());
  EXPECT_EQ(t->numa_node_count(), 2);
  EXPECT_EQ(t->NumaNodes(), (std::vector<int>{0, 1}));
  EXPECT_EQ(t->CpusOfNode(0), Range(0, 3));
  EXPECT_EQ(t->CpusOfNode(1), Range(4, 7));
  EXPECT_TRUE(t->CpusOfNode(2).empty());
  EXPECT_TRUE(t->CpusOfNode(-1).empty());
  EXPECT_EQ(t->AllCpus(), Range(0, 7));
  // A synthetic machine has no PCI devices.
  EXPECT_FALSE(t->LocatePciDevice("0000:3b:00.0").known());
}

TEST(Topology, BadInputsGiveAnError) {
  std::string error;
  EXPECT_EQ(Topology::FromSynthetic("pack:2 banana:3", &error), nullptr);
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_EQ(Topology::FromXml("<topology version=\"2.0\">", &error), nullptr);
  EXPECT_FALSE(error.empty());
  // A null error pointer is allowed.
  EXPECT_EQ(Topology::FromXml("not xml", nullptr), nullptr);
}

TEST(Topology, GpuUnderEachSocketIsLocalToItsNode) {
  SKIP_WITHOUT_HWLOC();
  auto t = TwoSockets();
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->is_this_system());
  EXPECT_EQ(t->numa_node_count(), 2);

  Locality l = t->LocatePciDevice("0000:3b:00.0");
  EXPECT_TRUE(l.known());
  EXPECT_EQ(l.numa_node, 0);
  EXPECT_EQ(l.cpus, Range(0, 3));

  // Behind a PCI switch: the climb goes through both bridges.
  l = t->LocatePciDevice("0000:AF:00.0");
  EXPECT_TRUE(l.known());
  EXPECT_EQ(l.numa_node, 1);
  EXPECT_EQ(l.cpus, Range(4, 7));
  EXPECT_EQ(t->LocatePciDevice("00000000:af:00.0").numa_node, 1);
}

TEST(Topology, UnknownDeviceHasUnknownLocality) {
  SKIP_WITHOUT_HWLOC();
  auto t = TwoSockets();
  ASSERT_NE(t, nullptr);
  for (const char *id :
       {"0000:3c:00.0", "0001:3b:00.0", "0000:3b:00.1", "garbage", ""}) {
    const Locality l = t->LocatePciDevice(id);
    EXPECT_FALSE(l.known()) << id;
    EXPECT_EQ(l.numa_node, -1) << id;
    EXPECT_TRUE(l.cpus.empty()) << id;
  }
  // The switch port is a bridge, not a PCI device.
  EXPECT_FALSE(t->LocatePciDevice("0000:ae:00.0").known());
}

TEST(Topology, DeviceAboveBothSocketsHasNoNode) {
  SKIP_WITHOUT_HWLOC();
  auto t = TwoSockets();
  ASSERT_NE(t, nullptr);
  const Locality l = t->LocatePciDevice("0000:17:00.0");
  EXPECT_FALSE(l.known());
  EXPECT_EQ(l.numa_node, -1);
  EXPECT_EQ(l.cpus, Range(0, 7));
}

Device Gpu(const std::string& bus_id) {
  Device d;
  d.kind = DeviceKind::kCuda;
  d.name = "gpu " + bus_id;
  d.pci_bus_id = bus_id;
  return d;
}

TEST(Topology, FillLocalityForGpus) {
  SKIP_WITHOUT_HWLOC();
  auto t = TwoSockets();
  ASSERT_NE(t, nullptr);
  Device d = Gpu("0000:af:00.0");
  EXPECT_TRUE(t->FillLocality(d));
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_EQ(d.local_cpus, Range(4, 7));

  // Found above both nodes: the node is reset to unknown explicitly.
  d = Gpu("0000:17:00.0");
  d.numa_node = 3;
  EXPECT_TRUE(t->FillLocality(d));
  EXPECT_EQ(d.numa_node, -1);
  EXPECT_EQ(d.local_cpus, Range(0, 7));

  // Not found: what someone else (the CUDA driver) said stays.
  d = Gpu("0000:5e:00.0");
  d.numa_node = 1;
  d.local_cpus = {4};
  EXPECT_FALSE(t->FillLocality(d));
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_EQ(d.local_cpus, std::vector<int>{4});
}

TEST(Topology, FillLocalityForCpuLanes) {
  SKIP_WITHOUT_HWLOC();
  // Several nodes: a CPU lane has no node of its own.
  auto two = TwoSockets();
  ASSERT_NE(two, nullptr);
  Device d = Device::Cpu(5);
  EXPECT_FALSE(two->FillLocality(d));
  EXPECT_EQ(d.numa_node, -1);
  EXPECT_TRUE(d.local_cpus.empty());

  // One node: that node and every CPU, never just CPU `index`.
  std::string error;
  auto one = Topology::FromSynthetic("pack:1 numa:1 core:3 pu:2", &error);
  ASSERT_NE(one, nullptr) << error;
  d = Device::Cpu(1);
  EXPECT_TRUE(one->FillLocality(d));
  EXPECT_EQ(d.numa_node, 0);
  EXPECT_EQ(d.local_cpus, Range(0, 5));
}

TEST(Topology, FakeTopologiesNeverBind) {
  SKIP_WITHOUT_HWLOC();
  auto t = TwoSockets();
  ASSERT_NE(t, nullptr);
  std::string why;
  EXPECT_FALSE(t->BindCurrentThread({0, 1}, &why));
  EXPECT_NE(why.find("not describe this machine"), std::string::npos) << why;

  bool bound = true;
  void *p = t->AllocateOnNode(1 << 20, 1, &bound);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(bound);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  static_cast<char *>(p)[(1 << 20) - 1] = 1;
  EXPECT_EQ(t->BoundNodeOfArea(p, 1 << 20), -1);
  t->Free(p, 1 << 20);
}

TEST(Topology, SystemIsSane) {
  auto system = Topology::System();
  ASSERT_NE(system, nullptr);
  EXPECT_EQ(system, Topology::System());
  if (!GPUFAN_TEST_HAVE_HWLOC) {
    EXPECT_FALSE(system->is_this_system());
    EXPECT_EQ(system->numa_node_count(), 0);
    EXPECT_TRUE(system->AllCpus().empty());
    EXPECT_FALSE(system->LocatePciDevice("0000:3b:00.0").known());
    std::string why;
    EXPECT_FALSE(system->BindCurrentThread({0}, &why));
    EXPECT_NE(why.find("without hwloc"), std::string::npos) << why;
    std::string error;
    EXPECT_EQ(Topology::FromSynthetic("pack:1 pu:1", &error), nullptr);
    EXPECT_NE(error.find("without hwloc"), std::string::npos) << error;
    return;
  }
  EXPECT_TRUE(system->is_this_system());
  EXPECT_GE(system->numa_node_count(), 1);
  const std::vector<int> cpus = system->AllCpus();
  ASSERT_GE(cpus.size(), 1u);
  size_t on_nodes = 0;
  for (int node : system->NumaNodes())
    on_nodes += system->CpusOfNode(node).size();
  EXPECT_GE(on_nodes, cpus.size());

  Device d = Device::Cpu(0);
  EXPECT_EQ(system->FillLocality(d), system->numa_node_count() == 1);
  if (system->numa_node_count() == 1) {
    EXPECT_EQ(d.numa_node, system->NumaNodes().front());
    EXPECT_EQ(d.local_cpus, cpus);
  }
}

TEST(Topology, BindsThreadsOnThisSystem) {
  SKIP_WITHOUT_HWLOC();
  auto system = Topology::System();
  std::string why;
  EXPECT_FALSE(system->BindCurrentThread({}, &why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(system->BindCurrentThread({1 << 20}, &why));
  EXPECT_FALSE(system->BindCurrentThread({-1}, &why));
  // In a thread of its own, so that the test's threads keep their affinity.
  bool bound = false;
  std::thread([&] {
    bound = system->BindCurrentThread(system->AllCpus(), &why);
  }).join();
  EXPECT_TRUE(bound) << why;
}

TEST(Topology, AllocatesOnThisSystemsNodes) {
  auto system = Topology::System();
  constexpr size_t kBytes = 2 << 20;
  EXPECT_EQ(system->AllocateOnNode(0, 0, nullptr), nullptr);
  bool bound = true;
  // A node that does not exist: ordinary memory.
  void *p = system->AllocateOnNode(kBytes, 4095, &bound);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(bound);
  static_cast<char *>(p)[kBytes - 1] = 1;
  system->Free(p, kBytes);
  system->Free(nullptr, kBytes);
  if (!GPUFAN_TEST_HAVE_HWLOC)
    return;
  const int node = system->NumaNodes().front();
  p = system->AllocateOnNode(kBytes, node, &bound);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(bound);
  EXPECT_EQ(system->BoundNodeOfArea(p, kBytes), node);
  system->Free(p, kBytes);
}

}  // namespace
}  // namespace gpufan
