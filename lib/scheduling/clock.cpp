// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/clock.h"

#include <chrono>

namespace gpufan {

int64_t SteadyClock::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace gpufan
