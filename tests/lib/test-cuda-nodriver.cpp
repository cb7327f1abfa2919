// SPDX-License-Identifier: LGPL-2.1-or-later
// The public CUDA API when no driver can be loaded: every entry says why,
// nothing crashes, and the device registry falls back to CPU devices with a
// note. The driver is forced away for this whole process (it is looked up
// once), so these tests hold on a GPU machine too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda-driver-private.h"
#include "gpufan/cuda.h"
#include "gpufan/device-registry.h"
#include "gpufan/device.h"

namespace gpufan {
namespace cuda {
namespace {

constexpr char kMissing[] = "/nonexistent/libcuda.so.1";

// Before main(), so before anything can look the driver up.
const bool kDriverForcedAway = setenv("GPUFAN_LIBCUDA", kMissing, 1) == 0;

// The reason every entry must carry.
std::string ExpectedReason() {
#if GPUFAN_HAVE_CUDA
  return std::string(kMissing) + " not found (no NVIDIA driver): ";
#else
  return internal::kNotBuilt;
#endif
}

TEST(CudaNoDriver, NotAvailableAndSaysWhy) {
  ASSERT_TRUE(kDriverForcedAway);
  std::string why;
  EXPECT_FALSE(Available(&why));
  EXPECT_EQ(why.rfind(ExpectedReason(), 0), 0u) << why;
  // Cached, and the same answer without a reason pointer.
  std::string again;
  EXPECT_FALSE(Available(&again));
  EXPECT_EQ(again, why);
  EXPECT_FALSE(Available());
}

TEST(CudaNoDriver, DiscoverFindsNothingAndSaysWhy) {
  std::string why_not;
  Available(&why_not);
  std::string why_none;
  EXPECT_TRUE(Discover(&why_none).empty());
  EXPECT_EQ(why_none, why_not);
  EXPECT_TRUE(Discover().empty());
}

// Runs `call`, which must throw Error carrying the reason and no CUresult.
template <typename Call>
void ExpectUnavailable(Call call, const char *what) {
  SCOPED_TRACE(what);
  try {
    call();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Error::kNoCode);
    EXPECT_NE(std::string(e.what()).find(ExpectedReason()), std::string::npos)
        << e.what();
  }
}

TEST(CudaNoDriver, EveryEntryThrowsTheReason) {
  ExpectUnavailable([] { FreeMemory(0); }, "FreeMemory");
  ExpectUnavailable([] { PrimaryContext::Retain(0); }, "Retain");
  ExpectUnavailable([] { StreamPool::ForDevice(0, 4); }, "ForDevice");
  ExpectUnavailable(
      [] {
        static char buffer[4096];
        RegisterHost(buffer, sizeof buffer);
      },
      "RegisterHost");
  EXPECT_THROW(StreamPool::ForDevice(0, 0), std::invalid_argument);
  EXPECT_THROW(UnregisterHost(nullptr), Error);
  EXPECT_THROW(RegisterHost(nullptr, 0), Error);
}

TEST(CudaNoDriver, RegistryHasCpusAndTheNote) {
  std::string why_not;
  Available(&why_not);
  const DeviceRegistry registry = DeviceRegistry::Discover();
  EXPECT_EQ(registry.gpu_count(), 0u);
  EXPECT_GE(registry.cpu_count(), 1u);
  EXPECT_EQ(registry.gpu_note(), why_not);
  EXPECT_EQ(registry.DefaultForLane(0).kind, DeviceKind::kCpu);
}

}  // namespace
}  // namespace cuda
}  // namespace gpufan
