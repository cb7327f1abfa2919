// SPDX-License-Identifier: LGPL-2.1-or-later
// ExpectLaneCounts (lane-stats.h, ../lane-counts.h), the helper the Session
// tests assert lane counts with: it checks the fields named and no other,
// and a difference fails naming the lane, the field and both values.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "gpufan/stats.h"
#include "lane-stats.h"

namespace gpufan {
namespace {

// Lane 0: 2 completed, 1 dropped, 1 in flight; lane 1: nothing yet.
SessionStats TwoLanes() {
  SessionStats stats;
  LaneStats lane;
  lane.lane = 0;
  lane.completed = 2;
  lane.dropped = 1;
  lane.in_flight = 1;
  stats.lanes.push_back(lane);
  lane = LaneStats{};
  lane.lane = 1;
  stats.lanes.push_back(lane);
  return stats;
}

TEST(LaneCounts, OnlyTheNamedFieldsAreChecked) {
  ExpectLaneCounts(TwoLanes(), 0, {.completed = 2});
  ExpectLaneCounts(TwoLanes(), 0, {.completed = 2, .dropped = 1});
  ExpectLaneCounts(TwoLanes(), 1, {.completed = 0, .in_flight = 0});
}

TEST(LaneCounts, ADifferenceNamesTheLaneTheFieldAndBothValues) {
  EXPECT_NONFATAL_FAILURE(
      ExpectLaneCounts(TwoLanes(), 0, {.completed = 3, .dropped = 1}),
      "lane 0 counts differ:\n  completed: expected 3, actual 2");
  // Every field that differs, in one failure.
  EXPECT_NONFATAL_FAILURE(
      ExpectLaneCounts(TwoLanes(), 1, {.dropped = 1, .in_flight = 2}),
      "lane 1 counts differ:\n  dropped: expected 1, actual 0\n"
      "  in_flight: expected 2, actual 0");
  EXPECT_NONFATAL_FAILURE(ExpectLaneCounts(TwoLanes(), 7, {.completed = 0}),
                          "no lane 7");
}

}  // namespace
}  // namespace gpufan
