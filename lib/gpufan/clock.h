// SPDX-License-Identifier: LGPL-2.1-or-later
// Time source for the library. All times are monotonic nanoseconds (int64_t).
// Tests inject a ManualClock so that scheduling and timeouts are deterministic.
#pragma once

#include <atomic>
#include <cstdint>

#include "gpufan/prelude.h"

namespace gpufan {

// Thread-safety: implementations must be safe to call from any thread.
class GPUFAN_API Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
};

// std::chrono::steady_clock.
class GPUFAN_API SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override;
};

// A clock that moves only when told to. Thread-safe.
class GPUFAN_API ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 0) : now_(start_ns) {}
  int64_t NowNs() const override { return now_.load(); }
  void Set(int64_t ns) { now_.store(ns); }
  void Advance(int64_t ns) { now_.fetch_add(ns); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace gpufan
