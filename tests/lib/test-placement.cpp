// SPDX-License-Identifier: LGPL-2.1-or-later
// Device selection and placement hints over made-up device lists: the logic
// the fan-out uses to put lanes on GPUs, tested without one.
#include <gtest/gtest.h>

#include <stdexcept>

#include "gpufan/placement.h"

namespace gpufan {
namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

Device Gpu(int ordinal, int cc_major, int cc_minor,
           uint64_t total = 16 * kGiB) {
  Device d;
  d.kind = DeviceKind::kCuda;
  d.index = ordinal;
  d.name = "Test GPU " + std::to_string(ordinal);
  d.cc_major = cc_major;
  d.cc_minor = cc_minor;
  d.total_memory = total;
  return d;
}

// Two GPUs (7.5 and 9.0), then two CPU devices, as Discover orders them.
std::vector<Device> Machine() {
  std::vector<Device> devices = {Gpu(0, 7, 5), Gpu(1, 9, 0)};
  devices[1].nvenc = Support::kYes;
  devices[0].nvenc = Support::kNo;
  devices.push_back(Device::Cpu(0));
  devices.push_back(Device::Cpu(1));
  return devices;
}

std::vector<Device> CpuOnly() {
  return {Device::Cpu(0), Device::Cpu(1)};
}

// GPU 0 has 1 GiB free, GPU 1 has 8 GiB.
uint64_t FreeMemory(const Device& d) {
  return d.index == 0 ? kGiB : 8 * kGiB;
}

DeviceSpec Spec(const std::string& text) {
  DeviceSpec spec;
  std::string error;
  EXPECT_TRUE(DeviceSpec::Parse(text, &spec, &error)) << text << ": " << error;
  return spec;
}

TEST(DeviceSpec, ParsesEveryForm) {
  EXPECT_EQ(Spec("").mode, DeviceSpec::Mode::kAuto);
  EXPECT_EQ(Spec(" auto ").mode, DeviceSpec::Mode::kAuto);
  DeviceSpec list = Spec("0, 1,1");
  EXPECT_EQ(list.mode, DeviceSpec::Mode::kGpuList);
  EXPECT_EQ(list.gpus, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(Spec("cpu").mode, DeviceSpec::Mode::kCpu);
  EXPECT_EQ(Spec("cpu").cpu_lanes, 0u);
  EXPECT_EQ(Spec("cpu:4").cpu_lanes, 4u);
}

TEST(DeviceSpec, RoundTripsThroughText) {
  for (const char *text : {"auto", "0,1,1", "cpu", "cpu:3", "2"})
    EXPECT_EQ(Spec(text).ToString(), text);
}

TEST(DeviceSpec, RejectsBadTextWithAReason) {
  for (const char *text : {"0,,1", "gpu0", "-1", "cpu:0", "cpu:", "cpux",
                           "cpu:two", "1,", "1.5"}) {
    DeviceSpec spec = Spec("cpu:2");
    std::string error;
    EXPECT_FALSE(DeviceSpec::Parse(text, &spec, &error)) << text;
    EXPECT_NE(error.find(text), std::string::npos) << error;
    EXPECT_EQ(spec.ToString(), "cpu:2") << "a failed parse changed the spec";
  }
}

TEST(Placement, AutoSpreadsLanesOverGpusRoundRobin) {
  const auto machine = Machine();
  for (uint32_t lane = 0; lane < 5; ++lane) {
    Placement p = PlaceLane(Spec("auto"), {}, machine, lane, -1, FreeMemory);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.device.kind, DeviceKind::kCuda);
    EXPECT_EQ(p.device.index, static_cast<int>(lane % 2));
  }
}

TEST(Placement, AutoWithoutGpusGivesCpuLanes) {
  for (uint32_t lane = 0; lane < 3; ++lane) {
    Placement p = PlaceLane(Spec("auto"), {}, CpuOnly(), lane, -1, FreeMemory);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.device.kind, DeviceKind::kCpu);
    EXPECT_EQ(p.device.index, static_cast<int>(lane % 2));
  }
  // GPU hints do not stop CPU lanes where there is no GPU at all.
  PlacementHints hints;
  hints.min_cc_major = 8;
  EXPECT_TRUE(PlaceLane(Spec("auto"), hints, CpuOnly(), 0, -1, FreeMemory).ok);
}

TEST(Placement, ExplicitListAllowsRepeats) {
  const auto machine = Machine();
  const DeviceSpec spec = Spec("1,1,0");
  const int expected[] = {1, 1, 0};
  for (uint32_t lane = 0; lane < 3; ++lane) {
    Placement p = PlaceLane(spec, {}, machine, lane, -1, FreeMemory);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.device.index, expected[lane]);
  }
}

TEST(Placement, ExplicitListErrorsNameTheLaneAndTheFix) {
  Placement past_end = PlaceLane(Spec("0,1"), {}, Machine(), 2, -1, FreeMemory);
  EXPECT_FALSE(past_end.ok);
  EXPECT_NE(past_end.error.find("src_2"), std::string::npos) << past_end.error;

  Placement missing = PlaceLane(Spec("0,5"), {}, Machine(), 1, -1, FreeMemory);
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(missing.error.find("GPU 5"), std::string::npos) << missing.error;
  EXPECT_NE(missing.error.find("2 GPU(s)"), std::string::npos) << missing.error;

  Placement no_gpus = PlaceLane(Spec("0"), {}, CpuOnly(), 0, -1, FreeMemory);
  EXPECT_FALSE(no_gpus.ok);
  EXPECT_NE(no_gpus.error.find("0 GPU(s)"), std::string::npos) << no_gpus.error;
}

TEST(Placement, CpuModeIgnoresGpusAndHonoursItsCount) {
  const auto machine = Machine();
  for (uint32_t lane = 0; lane < 2; ++lane) {
    Placement p = PlaceLane(Spec("cpu:2"), {}, machine, lane, -1, FreeMemory);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.device.kind, DeviceKind::kCpu);
  }
  Placement third = PlaceLane(Spec("cpu:2"), {}, machine, 2, -1, FreeMemory);
  EXPECT_FALSE(third.ok);
  EXPECT_NE(third.error.find("src_2"), std::string::npos) << third.error;
  EXPECT_TRUE(PlaceLane(Spec("cpu"), {}, machine, 7, -1, FreeMemory).ok);
}

TEST(Placement, PadOverrideWinsOverTheSpec) {
  Placement p = PlaceLane(Spec("0,0"), {}, Machine(), 1, 1, FreeMemory);
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.device.index, 1);
  Placement bad = PlaceLane(Spec("auto"), {}, Machine(), 0, 9, FreeMemory);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("device property"), std::string::npos) << bad.error;
}

TEST(Placement, HintsFilterGpusInAuto) {
  PlacementHints cc;
  cc.min_cc_major = 8;
  for (uint32_t lane = 0; lane < 3; ++lane) {
    Placement p = PlaceLane(Spec("auto"), cc, Machine(), lane, -1, FreeMemory);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.device.index, 1) << "GPU 0 (7.5) must be filtered out";
  }

  PlacementHints memory;
  memory.min_free_memory = 2 * kGiB;
  EXPECT_EQ(PlaceLane(Spec("auto"), memory, Machine(), 0, -1, FreeMemory)
                .device.index,
            1);

  PlacementHints nvenc;
  nvenc.need_nvenc = true;
  EXPECT_EQ(
      PlaceLane(Spec("auto"), nvenc, Machine(), 0, -1, FreeMemory).device.index,
      1);
}

TEST(Placement, NoEligibleGpuIsAClearError) {
  PlacementHints hints;
  hints.min_cc_major = 10;
  Placement p = PlaceLane(Spec("auto"), hints, Machine(), 0, -1, FreeMemory);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.error.find("no GPU passes"), std::string::npos) << p.error;
  EXPECT_NE(p.error.find("GPU 0 (Test GPU 0): compute capability 7.5 < 10.0"),
            std::string::npos)
      << p.error;
  EXPECT_NE(p.error.find("GPU 1"), std::string::npos) << p.error;

  // An explicitly named GPU that fails a hint is an error too, not a
  // silent substitution.
  Placement named = PlaceLane(Spec("0"), hints, Machine(), 0, -1, FreeMemory);
  EXPECT_FALSE(named.ok);
  EXPECT_NE(named.error.find("fails the placement hints"), std::string::npos)
      << named.error;
}

TEST(Placement, UnknownCodecSupportFailsACodecHint) {
  Device gpu = Gpu(0, 9, 0);
  PlacementHints hints;
  hints.need_nvdec = true;
  EXPECT_EQ(IneligibleReason(gpu, hints, FreeMemory), "NVDEC not known");
  gpu.nvdec = Support::kNo;
  EXPECT_EQ(IneligibleReason(gpu, hints, FreeMemory), "NVDEC not present");
  gpu.nvdec = Support::kYes;
  EXPECT_EQ(IneligibleReason(gpu, hints, FreeMemory), "");
}

TEST(Placement, UnreadableFreeMemoryMakesAGpuIneligible) {
  PlacementHints hints;
  hints.min_free_memory = 1;
  const FreeMemoryFn broken = [](const Device&) -> uint64_t {
    throw std::runtime_error("cuMemGetInfo: CUDA_ERROR_UNKNOWN");
  };
  EXPECT_EQ(IneligibleReason(Gpu(0, 9, 0), hints, broken),
            "free memory unreadable: cuMemGetInfo: CUDA_ERROR_UNKNOWN");
  // Free memory is only read when a hint asks for it.
  EXPECT_EQ(IneligibleReason(Gpu(0, 9, 0), {}, broken), "");
}

TEST(Placement, HintsDescribeThemselves) {
  PlacementHints hints;
  EXPECT_TRUE(hints.empty());
  EXPECT_EQ(hints.Describe(), "none");
  hints.min_free_memory = 4 * kGiB;
  hints.min_cc_major = 8;
  hints.need_nvdec = true;
  EXPECT_FALSE(hints.empty());
  EXPECT_EQ(hints.Describe(),
            "free memory >= 4096 MiB, compute capability >= 8.0, NVDEC");
}

// A GPU with a sticky error is excluded for the rest of the process:
// `auto` places on the others, a list naming it fails and says why. (GPUs 4
// and 5: the exclusion outlives the test.)
TEST(Placement, AnExcludedGpuIsNeverPlacedOnAgain) {
  const std::vector<Device> machine = {Gpu(4, 9, 0), Gpu(5, 9, 0),
                                       Device::Cpu(0)};
  EXPECT_EQ(GpuExclusion(5), "");
  EXPECT_EQ(PlaceLane(Spec("auto"), {}, machine, 1, -1, nullptr).device.index,
            5);
  ExcludeGpu(5, "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
  ExcludeGpu(5, "a later reason is not kept");
  EXPECT_EQ(GpuExclusion(5), "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
  for (uint32_t lane = 0; lane < 3; lane++)
    EXPECT_EQ(
        PlaceLane(Spec("auto"), {}, machine, lane, -1, nullptr).device.index,
        4);
  const Placement listed = PlaceLane(Spec("5"), {}, machine, 0, -1, nullptr);
  EXPECT_FALSE(listed.ok);
  EXPECT_NE(listed.error.find("sticky CUDA error"), std::string::npos)
      << listed.error;
}

}  // namespace
}  // namespace gpufan
