// SPDX-License-Identifier: LGPL-2.1-or-later
// The window's output: what may leave now, in input order, and the fan-in's
// wait for it.
#include "gpufan/session.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace gpufan {

namespace {

// Longest single WaitOutput sleep; keeps wait_for clear of overflow.
constexpr int64_t kMaxOutputWaitNs = 3600LL * 1'000'000'000LL;

}  // namespace

ReadyBatch Session::TakeReady() {
  ReadyBatch batch;
  TakeReady(&batch);
  return batch;
}

void Session::TakeReady(ReadyBatch *batch) {
  StartBatch(batch);
  std::unique_lock<Mutex> lock(mutex_);
  TakeReadyAndUnlock(lock, batch);
}

void Session::StartBatch(ReadyBatch *batch) {
  batch->items.clear();
  batch->generation = 0;
  batch->latency_grew = false;
}

void Session::TakeReadyAndUnlock(std::unique_lock<Mutex>& lock,
                                 ReadyBatch *batch) {
  TakeReadyUnlocked(batch);
  std::vector<uint32_t> stalled;
  stalled.swap(stalls_to_announce_);
  const bool drained = drain_to_announce_;
  drain_to_announce_ = false;
  // Only for a listener: most sessions keep nothing to release, and this
  // is the output's hot path.
  std::optional<uint64_t> released_through;
  if (!batch->items.empty() &&
      release_listener_set_.load(std::memory_order_relaxed))
    released_through = window_.released_through();
  UnlockAndNotifyAdmit(lock);
  if (!stalled.empty() || drained || released_through)
    Announce(std::move(stalled), drained, released_through);
}

void Session::SetStallListener(std::function<void(uint32_t lane)> listener) {
  std::lock_guard<Mutex> lock(listener_mutex_);
  stall_listener_ = std::move(listener);
}

void Session::SetDrainListener(std::function<void()> listener) {
  std::lock_guard<Mutex> lock(listener_mutex_);
  drain_listener_ = std::move(listener);
}

void Session::SetReleaseListener(std::function<void(uint64_t)> listener) {
  std::lock_guard<Mutex> lock(listener_mutex_);
  release_listener_set_ = static_cast<bool>(listener);
  release_listener_ = std::move(listener);
}

void Session::Announce(std::vector<uint32_t> lanes, bool drained,
                       std::optional<uint64_t> released_through) {
  std::lock_guard<Mutex> lock(listener_mutex_);
  if (stall_listener_) {
    for (uint32_t lane : lanes)
      stall_listener_(lane);
  }
  if (released_through && release_listener_)
    release_listener_(*released_through);
  if (drained && drain_listener_)
    drain_listener_();
}

void Session::TakeReadyUnlocked(ReadyBatch *batch) {
  const int64_t now = clock_->NowNs();
  do {
    window_.PopSettled(batch->items, now);
  } while (ExpireStalledHeadUnlocked(now));
  if (output_due_ns_ != kNoTime && now >= output_due_ns_)
    output_due_ns_ = kNoTime;
  // Taken by another thread than the waiting output: the new head is news.
  if (!batch->items.empty())
    AnnounceHeadUnlocked();
  // Several payloads may share one seq: an item leaves (and stops counting as
  // in flight) once, however many buffers it became.
  bool counted_any = false;
  uint64_t last_seq = 0;
  for (Released& r : batch->items) {
    if (r.lane == kNoLane || (counted_any && r.seq == last_seq))
      continue;
    counted_any = true;
    last_seq = r.seq;
    released_++;
    if (trace_->enabled())
      trace_->Instant(TraceWriter::OutputTrack(),
                      r.payload ? "release" : "release (lost)", now, r.seq);
    DecrementInFlightUnlocked(r.stream);
    if (r.stream != kMainStream)
      CountStreamReleaseUnlocked(r);
  }
  if (counted_any)
    NotifyAdmitUnlocked();
  UpdateAccountedUnlocked(now);
  CheckLatencyUnlocked(batch);
  batch->generation = generation_;
}

void Session::WaitOutput(uint64_t generation) {
  std::unique_lock<Mutex> lock(mutex_);
  WaitOutputUnlocked(lock, generation, std::nullopt);
}

void Session::WaitOutput(uint64_t generation, int64_t max_wait_ns) {
  std::unique_lock<Mutex> lock(mutex_);
  WaitOutputUnlocked(lock, generation, max_wait_ns);
}

void Session::WaitOutputUnlocked(std::unique_lock<Mutex>& lock,
                                 uint64_t generation,
                                 std::optional<int64_t> max_wait_ns) {
  // Only a moved generation ends the wait: SetFlushing moves it both ways.
  auto moved = [&] {
    return generation_ != generation;
  };
  if (moved() || (max_wait_ns && *max_wait_ns <= 0))
    return;
  std::optional<int64_t> wait_ns;
  if (max_wait_ns)
    wait_ns = std::min(*max_wait_ns, kMaxOutputWaitNs);
  if (window_.HeadPending()) {
    const int64_t due = HeadDueUnlocked();
    if (output_due_ns_ == kNoTime || due < output_due_ns_)
      output_due_ns_ = due;
  }
  if (output_due_ns_ != kNoTime) {
    const int64_t remaining = output_due_ns_ - clock_->NowNs();
    if (remaining <= 0)
      return;  // TakeReady expires the head now (or finds it gone)
    // Only a real-time clock's deadline maps onto a real-time wait; an injected
    // clock moves by itself, so only the caller's bound applies.
    if (real_time_clock_)
      wait_ns = std::min(wait_ns.value_or(kMaxOutputWaitNs), remaining);
  }
  output_waiters_++;
  if (wait_ns)
    output_cv_.wait_for(lock, std::chrono::nanoseconds(*wait_ns), moved);
  else
    output_cv_.wait(lock, moved);
  output_waiters_--;
  output_notified_ = false;
}

int64_t Session::HeadDueUnlocked() const {
  auto it = lanes_.find(window_.head_lane());
  bool at_once = it != lanes_.end() && it->second.stalled;
  // Not one the fan-out moves to another lane (it has not started).
  if (at_once && config_.chunks) {
    const Lane& l = it->second;
    auto item = std::lower_bound(
        l.outstanding.begin(), l.outstanding.end(), window_.head_seq(),
        [](const Outstanding& o, uint64_t s) { return o.seq < s; });
    at_once = item == l.outstanding.end() ||
              item->seq != window_.head_seq() || item->started_ns != kNoTime;
  }
  return window_.head_since_ns() + (at_once ? 0 : config_.stall_timeout_ns);
}

void Session::AnnounceHeadUnlocked() {
  // An output that is not waiting sees the head when it next waits.
  if (output_waiters_ == 0 || !window_.HeadPending())
    return;
  // Every head expires at or after it became the head: the common case
  // (the waiter already sleeps no later) needs no lane lookup.
  if (output_due_ns_ != kNoTime && output_due_ns_ <= window_.head_since_ns())
    return;
  const int64_t due = HeadDueUnlocked();
  if (output_due_ns_ != kNoTime && output_due_ns_ <= due)
    return;
  output_due_ns_ = due;
  generation_++;
  NotifyOutputUnlocked();
}

void Session::WakeOutput() {
  std::lock_guard<Mutex> lock(mutex_);
  generation_++;
  NotifyOutputUnlocked();
}

bool Session::WindowEmpty() const {
  std::lock_guard<Mutex> lock(mutex_);
  return window_.empty();
}

int64_t Session::AccountedForSinceNs() const {
  std::lock_guard<Mutex> lock(mutex_);
  return accounted_since_ns_;
}

void Session::UpdateAccountedUnlocked(int64_t now_ns) {
  if (!input_ended_ || !window_.empty() || accounted_since_ns_ != kNoTime)
    return;
  accounted_since_ns_ = now_ns;
  drain_to_announce_ = true;
  // The fan-in's output task decides on EOS from here on.
  generation_++;
  NotifyOutputUnlocked();
}

bool Session::HoldsArrivedFrom(uint32_t lane) const {
  std::lock_guard<Mutex> lock(mutex_);
  return window_.HoldsArrivedFrom(lane);
}

}  // namespace gpufan
