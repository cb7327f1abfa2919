// SPDX-License-Identifier: LGPL-2.1-or-later
// Test helper: one lane's figures in a statistics snapshot.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "gpufan/stats.h"

namespace gpufan {

inline const LaneStats& LaneOf(const SessionStats& stats, uint32_t lane) {
  for (const LaneStats& l : stats.lanes)
    if (l.lane == lane)
      return l;
  ADD_FAILURE() << "no lane " << lane;
  return stats.lanes.front();
}

}  // namespace gpufan
