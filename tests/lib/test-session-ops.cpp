// SPDX-License-Identifier: LGPL-2.1-or-later
// The session operation sequences of session-ops.h, from fixed seeds.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "session-ops.h"

namespace gpufan::ops {
namespace {

TEST(SessionOps, RandomOperationSequencesKeepTheInvariants) {
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    std::string failure;
    {
      SeededChoices choices(seed);
      OpsRun run(choices);
      failure = run.Run(3000);
    }
    ASSERT_EQ(failure, "") << "seed " << seed;
    ASSERT_EQ(g_live_payloads, 0) << "seed " << seed << ": payloads leaked";
  }
  EXPECT_GT(g_coverage.released, 50'000u);
  EXPECT_GT(g_coverage.empty, 5'000u);
  EXPECT_GT(g_coverage.events, 1'000u);
  EXPECT_GT(g_coverage.late, 100u);
  EXPECT_GT(g_coverage.unawaited_out, 1'000u);
  EXPECT_GT(g_coverage.flushes, 100u);
  EXPECT_GT(g_coverage.seqless, 1'000u);
  EXPECT_GT(g_coverage.markers, 1'000u);
  EXPECT_GT(g_coverage.stalls, 100u);
  std::printf(
      "released %llu (empty %llu), events %llu, late %llu, unawaited out %llu, "
      "flushes %llu, "
      "without seq %llu, markers %llu, stalled lanes seen %llu\n",
      (unsigned long long)g_coverage.released,
      (unsigned long long)g_coverage.empty,
      (unsigned long long)g_coverage.events,
      (unsigned long long)g_coverage.late,
      (unsigned long long)g_coverage.unawaited_out,
      (unsigned long long)g_coverage.flushes,
      (unsigned long long)g_coverage.seqless,
      (unsigned long long)g_coverage.markers,
      (unsigned long long)g_coverage.stalls);
}

}  // namespace
}  // namespace gpufan::ops
