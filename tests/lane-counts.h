// SPDX-License-Identifier: LGPL-2.1-or-later
// Test helper: the counts a test expects of one lane, checked in one go.
//
//   ExpectLaneCounts(stats, 1, {.completed = 2, .dropped = 1, .failed = 0});
//
// Only the fields named are checked; they are named in the order declared
// below. A lane that differs is one failure, at the caller's line, listing
// every field that differs with its expected and actual value. The lib tests
// read a gpufan::SessionStats (tests/lib/lane-stats.h), the element tests a
// gpufan-stats structure (tests/gst/gst-test-util.h); both go through
// ExpectLaneCountsAt below. No dependency beyond GoogleTest.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

namespace gpufan_counts {

// Expected counts of one lane; a field left out is not checked. (The
// default member initializers keep -Wmissing-field-initializers quiet for
// the fields a designated initializer leaves out.)
struct LaneCounts {
  std::optional<uint64_t> dispatched = {};
  std::optional<uint64_t> completed = {};
  std::optional<uint64_t> dropped = {};
  std::optional<uint64_t> failed = {};
  std::optional<uint64_t> timed_out = {};
  std::optional<uint64_t> late = {};
  std::optional<uint64_t> reorder_waits = {};
  std::optional<uint64_t> replayed = {};
  std::optional<uint64_t> handed_over = {};
  std::optional<uint64_t> stalls = {};
  std::optional<uint64_t> markers = {};
  std::optional<uint64_t> queued = {};
  std::optional<uint64_t> in_flight = {};
};

// One field of LaneCounts: its name in C++ (gpufan::LaneStats) and in the
// gpufan-stats structure's lane entries.
struct LaneCountField {
  const char *member;
  const char *stats_name;
  std::optional<uint64_t> LaneCounts::*expected;
};

inline constexpr LaneCountField kLaneCountFields[] = {
    {"dispatched", "dispatched", &LaneCounts::dispatched},
    {"completed", "completed", &LaneCounts::completed},
    {"dropped", "dropped", &LaneCounts::dropped},
    {"failed", "failed", &LaneCounts::failed},
    {"timed_out", "timed-out", &LaneCounts::timed_out},
    {"late", "late", &LaneCounts::late},
    {"reorder_waits", "reorder-waits", &LaneCounts::reorder_waits},
    {"replayed", "replayed", &LaneCounts::replayed},
    {"handed_over", "handed-over", &LaneCounts::handed_over},
    {"stalls", "stalls", &LaneCounts::stalls},
    {"markers", "markers", &LaneCounts::markers},
    {"queued", "queued", &LaneCounts::queued},
    {"in_flight", "in-flight", &LaneCounts::in_flight},
};

// Compares `expected` with the lane's counts, `actual(field)` reading one
// (as a uint64_t). `lane` names the lane in the failure ("lane 1"); `name`
// picks which name of each field the failure shows. One failure at
// file:line for all the fields that differ.
template <typename Actual>
void ExpectLaneCountsAt(const char *file, int line, const std::string& lane,
                        const LaneCounts& expected, Actual actual,
                        const char *LaneCountField::*name) {
  std::ostringstream diffs;
  for (const LaneCountField& f : kLaneCountFields) {
    const std::optional<uint64_t>& want = expected.*f.expected;
    if (!want)
      continue;
    const uint64_t got = actual(f);
    if (got != *want)
      diffs << "\n  " << f.*name << ": expected " << *want << ", actual "
            << got;
  }
  if (!diffs.str().empty())
    ADD_FAILURE_AT(file, line) << lane << " counts differ:" << diffs.str();
}

}  // namespace gpufan_counts
