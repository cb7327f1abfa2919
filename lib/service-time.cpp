// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/service-time.h"

#include <algorithm>

namespace gpufan {

ServiceTimeEstimator::ServiceTimeEstimator(size_t window)
    : ring_(std::max<size_t>(1, window), 0) {}

void ServiceTimeEstimator::AddSample(int64_t ns) {
  ring_[next_] = std::max<int64_t>(0, ns);
  next_ = (next_ + 1) % ring_.size();
  count_ = std::min(count_ + 1, ring_.size());
  // Computed here, once per completion, not at every read: the scheduler
  // reads every lane's estimate for every item it dispatches.
  // Until the ring is full the samples held are ring_[0, count_).
  scratch_.assign(ring_.begin(),
                  ring_.begin() + static_cast<std::ptrdiff_t>(count_));
  // Lower median for an even count: always a real sample, and a single high
  // outlier (the usual kind: a stall) never moves it.
  const size_t mid = (count_ - 1) / 2;
  std::nth_element(scratch_.begin(),
                   scratch_.begin() + static_cast<std::ptrdiff_t>(mid),
                   scratch_.end());
  estimate_ = scratch_[mid];
}

void ServiceTimeEstimator::Clear() {
  next_ = 0;
  count_ = 0;
  estimate_ = 0;
}

}  // namespace gpufan
