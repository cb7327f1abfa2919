// SPDX-License-Identifier: LGPL-2.1-or-later
// The deadlines of a stalled lane, on the Session's clock: when the fan-out's
// idle worker sends its next liveness marker, and when a chunk that waits on
// its last-resort stalled lane asks for another lane again. Both are
// stall-timeout, the fan-in's setting: the fan-out never reads it, it asks
// here when something is due.
#include <chrono>

#include "gpufan/session.h"

namespace gpufan {

LivenessMarker Session::CheckLivenessMarker(uint32_t lane, int64_t *due_ns) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || l->marker_due_ns == kNoTime)
    return LivenessMarker::kAnswered;
  const int64_t now = clock_->NowNs();
  if (now < l->marker_due_ns) {
    *due_ns = l->marker_due_ns;
    return LivenessMarker::kWait;
  }
  // Only at its due time does the worker look whether the lane answered
  // meanwhile (it may have stalled again since: then the new stall's time
  // is the due one): one look per stall-timeout, as for the marker.
  if (!l->stalled) {
    l->marker_due_ns = kNoTime;
    return LivenessMarker::kAnswered;
  }
  l->marker_due_ns = now + config_.stall_timeout_ns;
  *due_ns = l->marker_due_ns;
  // Nobody waits for an unclaimed lane's marker: the next look is due anyway.
  return l->claimed ? LivenessMarker::kSend : LivenessMarker::kWait;
}

int64_t Session::LastResortRetryDueNs() const {
  std::lock_guard<Mutex> lock(mutex_);
  return clock_->NowNs() + config_.stall_timeout_ns;
}

std::cv_status Session::WaitUntilDue(CondVar& cv, std::unique_lock<Mutex>& lock,
                                     int64_t due_ns) const {
  if (real_time_clock_) {
    return cv.wait_until(lock, CondVar::TimePoint(std::chrono::nanoseconds(
                                   due_ns)));
  }
  // An injected clock moves by itself: only an event ends the wait, and the
  // clock says whether the time came.
  if (clock_->NowNs() < due_ns)
    cv.wait(lock);
  return clock_->NowNs() >= due_ns ? std::cv_status::timeout
                                   : std::cv_status::no_timeout;
}

}  // namespace gpufan
