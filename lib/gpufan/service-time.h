// SPDX-License-Identifier: LGPL-2.1-or-later
// Online estimate of a lane's per-item service time: the median of the last
// N samples. A median ignores isolated outliers (a page fault, a context
// switch) yet follows a real change of speed within N/2 + 1 samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpufan/prelude.h"

namespace gpufan {

// Not thread-safe: owned and locked by Session.
class GPUFAN_API ServiceTimeEstimator {
 public:
  static constexpr size_t kDefaultWindow = 15;

  explicit ServiceTimeEstimator(size_t window = kDefaultWindow);

  void AddSample(int64_t ns);  // negative samples are clamped to 0
  bool HasEstimate() const { return count_ > 0; }
  // Median of the samples held (the lower middle one for an even count, so
  // always a real sample); 0 when there is none.
  int64_t EstimateNs() const { return estimate_; }
  size_t sample_count() const { return count_; }
  void Clear();

 private:
  std::vector<int64_t> ring_;
  size_t next_ = 0;
  size_t count_ = 0;
  int64_t estimate_ = 0;
  std::vector<int64_t> sorted_;  // the samples held, ascending
};

}  // namespace gpufan
