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

TEST(SessionOps, RandomOperationSequencesOfStreamsKeepTheirOrder) {
  // Items and events of streams 1..3, and flushes of one stream: order
  // within each stream only, every item out once with its stream.
  const Coverage before = g_coverage;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::string failure;
    {
      SeededChoices choices(seed);
      OpsRun run(choices, true);
      failure = run.Run(3000);
    }
    ASSERT_EQ(failure, "") << "seed " << seed;
    ASSERT_EQ(g_live_payloads, 0) << "seed " << seed << ": payloads leaked";
  }
  EXPECT_GT(g_coverage.released - before.released, 30'000u);
  EXPECT_GT(g_coverage.empty - before.empty, 3'000u);
  EXPECT_GT(g_coverage.events - before.events, 1'000u);
  EXPECT_GT(g_coverage.late - before.late, 100u);
  EXPECT_GT(g_coverage.unawaited_out - before.unawaited_out, 500u);
  EXPECT_GT(g_coverage.stream_flushes, 100u);
  // Items that left ahead of an older item of another stream.
  EXPECT_GT(g_coverage.overtakes, 1'000u);
  std::printf(
      "streams: released %llu (empty %llu), events %llu, late %llu, "
      "unawaited out %llu, stream flushes %llu, overtakes %llu\n",
      (unsigned long long)(g_coverage.released - before.released),
      (unsigned long long)(g_coverage.empty - before.empty),
      (unsigned long long)(g_coverage.events - before.events),
      (unsigned long long)(g_coverage.late - before.late),
      (unsigned long long)(g_coverage.unawaited_out - before.unawaited_out),
      (unsigned long long)g_coverage.stream_flushes,
      (unsigned long long)g_coverage.overtakes);
}

}  // namespace
}  // namespace gpufan::ops
