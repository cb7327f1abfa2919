// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/service-time.h"

#include <algorithm>

namespace gpufan {

ServiceTimeEstimator::ServiceTimeEstimator(size_t window)
    : ring_(std::max<size_t>(1, window), 0) {
  sorted_.reserve(ring_.size());
}

void ServiceTimeEstimator::AddSample(int64_t ns) {
  ns = std::max<int64_t>(0, ns);
  // sorted_ holds the samples of the ring in order: the sample that leaves
  // the ring leaves it, the new one goes in its place. Computed here, once
  // per completion, not at every read: the scheduler reads every lane's
  // estimate for every item it dispatches.
  if (count_ == ring_.size())
    sorted_.erase(
        std::lower_bound(sorted_.begin(), sorted_.end(), ring_[next_]));
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), ns), ns);
  ring_[next_] = ns;
  next_ = (next_ + 1) % ring_.size();
  count_ = std::min(count_ + 1, ring_.size());
  // Lower median for an even count: always a real sample, and a single high
  // outlier (the usual kind: a stall) never moves it.
  estimate_ = sorted_[(count_ - 1) / 2];
}

void ServiceTimeEstimator::Clear() {
  next_ = 0;
  count_ = 0;
  estimate_ = 0;
  sorted_.clear();
}

}  // namespace gpufan
