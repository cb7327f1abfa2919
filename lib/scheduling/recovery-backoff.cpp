// SPDX-License-Identifier: LGPL-2.1-or-later
#include "gpufan/recovery-backoff.h"

#include <algorithm>

namespace gpufan {

int64_t RecoveryBackoff::Delay(int64_t base_ns, unsigned failures) {
  int64_t delay = base_ns;
  for (unsigned i = 1; i < failures && delay < kMaxDelayNs; i++)
    delay *= 2;
  return std::min(delay, std::max(base_ns, kMaxDelayNs));
}

void RecoveryBackoff::Reset() {
  pending_.clear();
  place_of_.clear();
  failures_.clear();
}

unsigned RecoveryBackoff::PlaceOf(unsigned lane) const {
  auto it = place_of_.find(lane);
  return it != place_of_.end() ? it->second : lane;
}

void RecoveryBackoff::StandIn(unsigned new_lane, unsigned place) {
  place_of_[new_lane] = place;
}

const RecoveryBackoff::Rebuild& RecoveryBackoff::Schedule(unsigned lane,
                                                          unsigned place,
                                                          int64_t base_ns,
                                                          int64_t now_ns) {
  Rebuild rebuild;
  rebuild.lane = lane;
  rebuild.place = place;
  rebuild.failures = ++failures_[place];
  rebuild.delay_ns = Delay(base_ns, rebuild.failures);
  rebuild.due_ns = now_ns + rebuild.delay_ns;
  pending_.push_back(rebuild);
  return pending_.back();
}

void RecoveryBackoff::Forget(unsigned lane) {
  const auto own =
      std::remove_if(pending_.begin(), pending_.end(),
                     [lane](const Rebuild& r) { return r.lane == lane; });
  for (auto it = own; it != pending_.end(); ++it)
    failures_[it->place]--;
  pending_.erase(own, pending_.end());
}

std::vector<RecoveryBackoff::Rebuild>::const_iterator
RecoveryBackoff::Earliest() const {
  return std::min_element(
      pending_.begin(), pending_.end(),
      [](const Rebuild& a, const Rebuild& b) { return a.due_ns < b.due_ns; });
}

int64_t RecoveryBackoff::NextDueNs() const {
  return Earliest()->due_ns;
}

std::optional<RecoveryBackoff::Rebuild> RecoveryBackoff::TakeDue(
    int64_t now_ns) {
  if (pending_.empty())
    return std::nullopt;
  const auto next = Earliest();
  if (now_ns < next->due_ns)
    return std::nullopt;
  const Rebuild rebuild = *next;
  pending_.erase(next);
  return rebuild;
}

}  // namespace gpufan
