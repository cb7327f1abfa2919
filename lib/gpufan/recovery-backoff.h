// SPDX-License-Identifier: LGPL-2.1-or-later
// When a failed lane is built again (gpufanbin's lane-restart-delay): a
// policy over times the caller passes in, no clock and no thread of its own.
//
// A rebuilt lane stands in the place of the lane it replaced. A failure is
// rebuilt after the base delay, doubled for each earlier failure in its
// place this run (1x, 2x, 4x, ...), up to 60 s, or the base delay itself if
// that is longer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "gpufan/prelude.h"

namespace gpufan {

// Thread-safety: none; the owner locks.
class GPUFAN_API RecoveryBackoff {
 public:
  // The longest wait before a rebuild, whatever the failures (unless the
  // base delay is longer).
  static constexpr int64_t kMaxDelayNs = 60'000'000'000;

  struct Rebuild {
    unsigned lane = 0;      // the lane that failed
    unsigned place = 0;     // the first lane of its place
    unsigned failures = 0;  // in that place this run, this one included
    int64_t delay_ns = 0;
    int64_t due_ns = 0;
  };

  // The delay for the @failures-th failure (1: the first) in a place.
  static int64_t Delay(int64_t base_ns, unsigned failures);

  // A new run: no places, no failures, nothing pending.
  void Reset();
  // Pending rebuilds are dropped (the run stops); places and counts stay.
  void DropPending() { pending_.clear(); }

  // The place of lane @lane: the one it stands in, else its own.
  unsigned PlaceOf(unsigned lane) const;
  // Lane @new_lane stands in @place from now on.
  void StandIn(unsigned new_lane, unsigned place);

  // Lane @lane of @place failed at @now_ns: one more failure there, and a
  // rebuild due after that failure's delay. @base_ns > 0.
  const Rebuild& Schedule(unsigned lane, unsigned place, int64_t base_ns,
                          int64_t now_ns);
  // The pending rebuilds of lane @lane go, and their failures no longer
  // count (a rebuild that did not start: its retry stands for them).
  void Forget(unsigned lane);

  bool HasPending() const { return !pending_.empty(); }
  // The earliest pending rebuild's due time; HasPending() must be true.
  int64_t NextDueNs() const;
  // The earliest pending rebuild, taken, if it is due at @now_ns.
  std::optional<Rebuild> TakeDue(int64_t now_ns);

 private:
  std::vector<Rebuild>::const_iterator Earliest() const;

  std::vector<Rebuild> pending_;  // at most one per failed lane
  std::map<unsigned, unsigned> place_of_;
  std::map<unsigned, unsigned> failures_;
};

}  // namespace gpufan
