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
}

int64_t ServiceTimeEstimator::EstimateNs() const {
  if (count_ == 0)
    return 0;
  // Until the ring is full the samples held are ring_[0, count_).
  std::vector<int64_t> held(
      ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(count_));
  // Lower median for an even count: always a real sample, and a single high
  // outlier (the usual kind: a stall) never moves it.
  const size_t mid = (count_ - 1) / 2;
  std::nth_element(held.begin(),
                   held.begin() + static_cast<std::ptrdiff_t>(mid), held.end());
  return held[mid];
}

void ServiceTimeEstimator::Clear() {
  next_ = 0;
  count_ = 0;
}

}  // namespace gpufan
