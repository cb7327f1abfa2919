// SPDX-License-Identifier: LGPL-2.1-or-later
// The backoff of lane rebuilds (gpufan/recovery-backoff.h), as
// docs/elements.md ("Rebuilding a failed lane") states it: the base delay,
// doubled for each earlier failure in the same place, up to 60 s or the
// base delay if longer; a rebuilt lane stands in its failed lane's place.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gpufan/recovery-backoff.h"

using gpufan::RecoveryBackoff;

namespace {

constexpr int64_t kSecond = 1'000'000'000;

// The delays of the first @count failures in one place.
std::vector<int64_t> Delays(int64_t base_ns, unsigned count) {
  std::vector<int64_t> delays;
  for (unsigned failures = 1; failures <= count; failures++)
    delays.push_back(RecoveryBackoff::Delay(base_ns, failures) / kSecond);
  return delays;
}

TEST(RecoveryBackoff, DoublesPerFailureUpTo60Seconds) {
  EXPECT_EQ(Delays(1 * kSecond, 9),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 60, 60, 60}));
  EXPECT_EQ(Delays(7 * kSecond, 6),
            (std::vector<int64_t>{7, 14, 28, 56, 60, 60}));
}

TEST(RecoveryBackoff, ABaseDelayOver60SecondsIsNeverDoubled) {
  EXPECT_EQ(Delays(60 * kSecond, 3), (std::vector<int64_t>{60, 60, 60}));
  EXPECT_EQ(Delays(90 * kSecond, 3), (std::vector<int64_t>{90, 90, 90}));
  const int64_t day = 24 * 3600 * kSecond;  // lane-restart-delay's maximum
  EXPECT_EQ(RecoveryBackoff::Delay(day, 1000), day);
}

TEST(RecoveryBackoff, ManyFailuresStayAt60Seconds) {
  EXPECT_EQ(RecoveryBackoff::Delay(1, 4'000'000'000u),
            RecoveryBackoff::kMaxDelayNs);
}

TEST(RecoveryBackoff, ARebuiltLaneFailsInThePlaceOfTheLaneItReplaced) {
  RecoveryBackoff backoff;
  const int64_t base = kSecond;
  EXPECT_EQ(backoff.PlaceOf(1), 1u);
  RecoveryBackoff::Rebuild first = backoff.Schedule(1, 1, base, 0);
  EXPECT_EQ(first.failures, 1u);
  EXPECT_EQ(first.due_ns, 1 * kSecond);

  backoff.StandIn(4, 1);  // lane 4 replaced lane 1
  EXPECT_EQ(backoff.PlaceOf(4), 1u);
  const RecoveryBackoff::Rebuild second =
      backoff.Schedule(4, backoff.PlaceOf(4), base, 10 * kSecond);
  EXPECT_EQ(second.lane, 4u);
  EXPECT_EQ(second.place, 1u);
  EXPECT_EQ(second.failures, 2u);
  EXPECT_EQ(second.delay_ns, 2 * kSecond);
  EXPECT_EQ(second.due_ns, 12 * kSecond);

  // another place counts on its own
  const RecoveryBackoff::Rebuild other = backoff.Schedule(2, 2, base, 0);
  EXPECT_EQ(other.failures, 1u);
  EXPECT_EQ(other.delay_ns, kSecond);
}

TEST(RecoveryBackoff, RebuildsAreTakenWhenDueEarliestFirst) {
  RecoveryBackoff backoff;
  EXPECT_FALSE(backoff.HasPending());
  EXPECT_FALSE(backoff.TakeDue(1000 * kSecond));
  backoff.Schedule(0, 0, 5 * kSecond, 0);
  backoff.Schedule(1, 1, 3 * kSecond, 0);
  EXPECT_EQ(backoff.NextDueNs(), 3 * kSecond);
  EXPECT_FALSE(backoff.TakeDue(3 * kSecond - 1));
  std::optional<RecoveryBackoff::Rebuild> due = backoff.TakeDue(3 * kSecond);
  ASSERT_TRUE(due);
  EXPECT_EQ(due->lane, 1u);
  EXPECT_EQ(backoff.NextDueNs(), 5 * kSecond);
  due = backoff.TakeDue(10 * kSecond);
  ASSERT_TRUE(due);
  EXPECT_EQ(due->lane, 0u);
  EXPECT_FALSE(backoff.HasPending());
}

// A rebuild that did not start is retried in its place; the new lane's own
// failure (posted meanwhile) does not count: the retry stands for it.
TEST(RecoveryBackoff, ForgottenFailuresDoNotCount) {
  RecoveryBackoff backoff;
  const int64_t base = kSecond;
  backoff.Schedule(0, 0, base, 0);
  ASSERT_TRUE(backoff.TakeDue(base));
  backoff.StandIn(3, 0);
  backoff.Schedule(3, backoff.PlaceOf(3), base, base);  // failure 2
  backoff.Forget(3);
  EXPECT_FALSE(backoff.HasPending());
  const RecoveryBackoff::Rebuild retry = backoff.Schedule(0, 0, base, base);
  EXPECT_EQ(retry.failures, 2u);
  EXPECT_EQ(retry.delay_ns, 2 * kSecond);
}

TEST(RecoveryBackoff, ANewRunStartsCountingAgain) {
  RecoveryBackoff backoff;
  backoff.StandIn(5, 0);
  backoff.Schedule(0, 0, kSecond, 0);
  backoff.Schedule(5, 0, kSecond, 0);
  backoff.DropPending();
  EXPECT_FALSE(backoff.HasPending());
  EXPECT_EQ(backoff.Schedule(0, 0, kSecond, 0).failures, 3u);
  backoff.Reset();
  EXPECT_FALSE(backoff.HasPending());
  EXPECT_EQ(backoff.PlaceOf(5), 5u);
  EXPECT_EQ(backoff.Schedule(0, 0, kSecond, 0).failures, 1u);
}

}  // namespace
