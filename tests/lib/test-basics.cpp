// SPDX-License-Identifier: LGPL-2.1-or-later
// Clock, devices, policy names and the service-time estimator.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "gpufan/clock.h"
#include "gpufan/device-registry.h"
#include "gpufan/device.h"
#include "gpufan/scheduler.h"
#include "gpufan/service-time.h"

namespace gpufan {
namespace {

TEST(Clock, SteadyClockIsMonotonic) {
  SteadyClock clock;
  const int64_t a = clock.NowNs();
  const int64_t b = clock.NowNs();
  EXPECT_GT(a, 0);
  EXPECT_GE(b, a);
}

TEST(Clock, ManualClockMovesOnlyWhenTold) {
  ManualClock clock(100);
  EXPECT_EQ(clock.NowNs(), 100);
  clock.Advance(50);
  EXPECT_EQ(clock.NowNs(), 150);
  clock.Set(7);
  EXPECT_EQ(clock.NowNs(), 7);
}

TEST(Device, CpuDevice) {
  const Device d = Device::Cpu(3);
  EXPECT_EQ(d.kind, DeviceKind::kCpu);
  EXPECT_EQ(d.index, 3);
  EXPECT_EQ(d.name, "cpu:3");
  EXPECT_EQ(d.Describe(), "cpu:3");
  Device n = d;
  n.numa_node = 1;
  EXPECT_EQ(n.Describe(), "cpu:3 (numa 1)");
  EXPECT_STREQ(DeviceKindName(DeviceKind::kCpu), "cpu");
  EXPECT_STREQ(DeviceKindName(DeviceKind::kCuda), "cuda");
}

TEST(Device, DiscoverHasCpusAndDefaultsWrap) {
  const DeviceRegistry registry = DeviceRegistry::Discover();
  ASSERT_GE(registry.cpu_count(), 1u);
  EXPECT_EQ(registry.devices().size(),
            registry.gpu_count() + registry.cpu_count());
  // GPUs come first and take the default lanes (test-cuda.cpp checks them).
  if (registry.gpu_count() > 0) {
    EXPECT_EQ(registry.gpu_note(), "");
    EXPECT_EQ(registry.devices().front().kind, DeviceKind::kCuda);
    EXPECT_EQ(registry.DefaultForLane(0).kind, DeviceKind::kCuda);
    return;
  }
  // No GPU: a note says why, and lanes wrap over the CPU devices.
  EXPECT_NE(registry.gpu_note(), "");
  const uint32_t n = static_cast<uint32_t>(registry.cpu_count());
  EXPECT_EQ(registry.DefaultForLane(0).index, 0);
  EXPECT_EQ(registry.DefaultForLane(n).index, 0);
  EXPECT_EQ(registry.DefaultForLane(n + 1).index, n > 1 ? 1 : 0);
  EXPECT_EQ(registry.DefaultForLane(n).kind, DeviceKind::kCpu);
}

TEST(Policy, NamesRoundTrip) {
  for (Policy p : {Policy::kRoundRobin, Policy::kLeastLoaded, Policy::kWeighted,
                   Policy::kAdaptive}) {
    const auto parsed = ParsePolicy(PolicyName(p));
    ASSERT_TRUE(parsed.has_value()) << PolicyName(p);
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_STREQ(PolicyName(Policy::kRoundRobin), "round-robin");
  EXPECT_STREQ(PolicyName(Policy::kLeastLoaded), "least-loaded");
  EXPECT_STREQ(PolicyName(Policy::kWeighted), "weighted");
  EXPECT_STREQ(PolicyName(Policy::kAdaptive), "adaptive");
  EXPECT_FALSE(ParsePolicy("fastest").has_value());
  EXPECT_FALSE(ParsePolicy("").has_value());
}

TEST(Policy, OneTableInEnumOrderWithDescriptions) {
  // A binding's enum values are the table's indices: the order is Policy's.
  const std::vector<PolicyInfo>& policies = Policies();
  ASSERT_EQ(policies.size(), 4u);
  for (size_t i = 0; i < policies.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(policies[i].policy), i);
    EXPECT_STREQ(policies[i].nick, PolicyName(policies[i].policy));
    ASSERT_NE(policies[i].description, nullptr);
    EXPECT_GT(std::string(policies[i].description).size(), 0u);
  }
  EXPECT_STREQ(policies[0].nick, "round-robin");
  EXPECT_STREQ(policies[3].nick, "adaptive");
}

TEST(Device, ParsesComputeCapability) {
  const struct {
    const char *text;
    int major, minor;
  } good[] = {{"8.6", 8, 6}, {"8", 8, 0},       {"9.0", 9, 0},
              {"0", 0, 0},   {"99.99", 99, 99}, {"08.06", 8, 6}};
  for (const auto& g : good) {
    const std::optional<ComputeCapability> cc = ParseComputeCapability(g.text);
    ASSERT_TRUE(cc.has_value()) << g.text;
    EXPECT_EQ(cc->major, g.major) << g.text;
    EXPECT_EQ(cc->minor, g.minor) << g.text;
  }
}

TEST(Device, RejectsMalformedComputeCapability) {
  for (const char *bad :
       {"", ".", "8.", ".6", "8.6.1", "8,6", " 8.6", "8.6 ", "+8", "-8", "8.-6",
        "8.+6", "a", "8a", "100", "8.100", "99999999999999999999999",
        "8.99999999999999999999"}) {
    EXPECT_FALSE(ParseComputeCapability(bad).has_value()) << '"' << bad << '"';
  }
}

TEST(ServiceTime, EmptyHasNoEstimate) {
  ServiceTimeEstimator e;
  EXPECT_FALSE(e.HasEstimate());
  EXPECT_EQ(e.EstimateNs(), 0);
  EXPECT_EQ(e.sample_count(), 0u);
}

TEST(ServiceTime, MedianOddAndLowerMedianEven) {
  ServiceTimeEstimator e(5);
  e.AddSample(30);
  EXPECT_EQ(e.EstimateNs(), 30);
  e.AddSample(10);
  EXPECT_EQ(e.EstimateNs(), 10);  // lower middle of {10, 30}
  e.AddSample(20);
  EXPECT_EQ(e.EstimateNs(), 20);
  e.AddSample(40);
  EXPECT_EQ(e.EstimateNs(), 20);  // lower middle of {10, 20, 30, 40}
  EXPECT_EQ(e.sample_count(), 4u);
}

TEST(ServiceTime, RobustToOutliers) {
  ServiceTimeEstimator e(15);
  for (int i = 0; i < 15; ++i)
    e.AddSample(i == 7 ? 500'000'000 : 4'000'000 + i);  // one 500 ms hiccup
  EXPECT_GE(e.EstimateNs(), 4'000'000);
  EXPECT_LE(e.EstimateNs(), 4'000'014);
  // Even several outliers (fewer than half the window) leave it in place.
  for (int i = 0; i < 7; ++i)
    e.AddSample(1);
  EXPECT_GE(e.EstimateNs(), 4'000'000);
  EXPECT_LE(e.EstimateNs(), 4'000'014);
}

TEST(ServiceTime, FollowsARealChangeWithinHalfTheWindow) {
  ServiceTimeEstimator e(15);
  for (int i = 0; i < 15; ++i)
    e.AddSample(2'000'000);
  for (int i = 0; i < 8; ++i)
    e.AddSample(8'000'000);
  EXPECT_EQ(e.EstimateNs(), 8'000'000);
  EXPECT_EQ(e.sample_count(), 15u);
}

TEST(ServiceTime, ClampsNegativeAndClears) {
  ServiceTimeEstimator e(3);
  e.AddSample(-5);
  EXPECT_TRUE(e.HasEstimate());
  EXPECT_EQ(e.EstimateNs(), 0);
  e.Clear();
  EXPECT_FALSE(e.HasEstimate());
  ServiceTimeEstimator zero(0);  // a window of 0 still holds one sample
  zero.AddSample(9);
  EXPECT_EQ(zero.EstimateNs(), 9);
}

}  // namespace
}  // namespace gpufan
