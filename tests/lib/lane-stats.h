// SPDX-License-Identifier: LGPL-2.1-or-later
// Test helpers: one lane's figures in a statistics snapshot, and the counts
// a test expects of it (../lane-counts.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../lane-counts.h"
#include "gpufan/stats.h"

namespace gpufan {

inline const LaneStats& LaneOf(const SessionStats& stats, uint32_t lane) {
  for (const LaneStats& l : stats.lanes)
    if (l.lane == lane)
      return l;
  ADD_FAILURE() << "no lane " << lane;
  return stats.lanes.front();
}

using gpufan_counts::LaneCounts;

// Expects lane `lane` of `stats` to have the counts named in `expected`:
//   ExpectLaneCounts(session_->Stats(), 0, {.completed = 2, .late = 1});
// A failure, at the caller's line, names the lane and each field that
// differs, with the expected and the actual value.
inline void ExpectLaneCounts(const SessionStats& stats, uint32_t lane,
                             const LaneCounts& expected,
                             const char *file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
  const LaneStats *l = nullptr;
  for (const LaneStats& candidate : stats.lanes)
    if (candidate.lane == lane)
      l = &candidate;
  if (!l) {
    ADD_FAILURE_AT(file, line) << "no lane " << lane << " in the statistics";
    return;
  }
  gpufan_counts::ExpectLaneCountsAt(
      file, line, "lane " + std::to_string(lane), expected,
      [l](const gpufan_counts::LaneCountField& f) -> uint64_t {
        const std::string field = f.member;
        if (field == "dispatched") return l->dispatched;
        if (field == "completed") return l->completed;
        if (field == "dropped") return l->dropped;
        if (field == "failed") return l->failed;
        if (field == "timed_out") return l->timed_out;
        if (field == "late") return l->late;
        if (field == "reorder_waits") return l->reorder_waits;
        if (field == "replayed") return l->replayed;
        if (field == "handed_over") return l->handed_over;
        if (field == "stalls") return l->stalls;
        if (field == "markers") return l->markers;
        if (field == "queued") return l->queued;
        if (field == "in_flight") return l->in_flight;
        ADD_FAILURE() << "ExpectLaneCounts: no LaneStats field " << field;
        return 0;
      },
      &gpufan_counts::LaneCountField::member);
}

}  // namespace gpufan
