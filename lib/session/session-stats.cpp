// SPDX-License-Identifier: LGPL-2.1-or-later
// What the session reports: statistics snapshots, and the latency ordering
// adds to the pipeline.
#include "gpufan/session.h"

#include <algorithm>
#include <utility>

namespace gpufan {

namespace {

// AddedLatencyNs looks at the arrivals of the current and the previous run
// of this many: recent enough to follow the lanes, long enough to see a slow
// lane's items among fast ones.
constexpr uint32_t kSojournRun = 128;

}  // namespace

SessionStats Session::Stats() const {
  std::lock_guard<Mutex> lock(mutex_);
  SessionStats stats;
  stats.policy = config_.policy;
  stats.dispatched = dispatched_;
  stats.released = released_;
  stats.unmatched = unmatched_;
  stats.output_gpu = output_gpu_;
  stats.in_flight = in_flight_;
  stats.max_in_flight = EffectiveMaxInFlightUnlocked();
  stats.window_occupancy = static_cast<uint32_t>(window_.awaited_occupancy());
  stats.window_peak = static_cast<uint32_t>(window_.peak_occupancy());
  stats.input_ended = input_ended_;
  stats.added_latency_ns = AddedLatencyUnlocked();
  const bool any_claimed = AnyClaimedUnlocked();
  const int64_t now = clock_->NowNs();
  stats.elapsed_ns =
      first_dispatch_ns_ == kNoTime ? 0 : clock_->NowNs() - first_dispatch_ns_;
  const double seconds = static_cast<double>(stats.elapsed_ns) / 1e9;
  for (const auto& [id, l] : lanes_) {
    LaneStats s = l.counters;
    s.lane = id;
    s.device = l.device;
    s.weight = l.weight;
    s.eligible = l.eligible;
    s.claimed = l.claimed;
    s.state = StateOfUnlocked(l, any_claimed);
    if (l.stalled) {
      s.stall_kind = l.stall_kind;
      s.stalled_seq = l.stalled_seq;
      s.stalled_ns = now - l.stalled_ns;
    }
    s.queued = l.queued;
    s.queue_limit = LaneQueueLimitUnlocked(l);
    s.in_flight = static_cast<uint32_t>(l.outstanding.size());
    s.service_ns = l.service.EstimateNs();
    s.wake_ns = l.wake.EstimateNs();
    s.time_ns = l.timer->Totals();
    s.fps = seconds > 0.0 ? static_cast<double>(s.completed) / seconds : 0.0;
    s.described = l.described;
    s.worker_thread = l.info.worker_thread;
    if (l.info.host_pool) {
      s.has_host_pool = true;
      s.host_pool_node = l.info.host_pool->node();
      s.host_pool_pins = l.info.host_pool->pins();
      s.host_pool = l.info.host_pool->stats();
    }
    stats.lanes.push_back(std::move(s));
  }
  StreamStatsUnlocked(&stats, now);
  return stats;
}

int64_t Session::AddedLatencyNs() const {
  std::lock_guard<Mutex> lock(mutex_);
  return AddedLatencyUnlocked();
}

void Session::MarkLatencyReported(int64_t ns) {
  std::lock_guard<Mutex> lock(mutex_);
  latency_reported_ns_ = ns;
  latency_announced_ = false;
}

void Session::RecordSojournUnlocked(int64_t ns) {
  sojourn_max_ = std::max(sojourn_max_, ns);
  if (++sojourn_count_ >= kSojournRun) {
    sojourn_max_prev_ = sojourn_max_;
    sojourn_max_ = 0;
    sojourn_count_ = 0;
  }
}

int64_t Session::AddedLatencyUnlocked() const {
  return std::min(std::max(sojourn_max_, sojourn_max_prev_),
                  config_.stall_timeout_ns);
}

void Session::CheckLatencyUnlocked(ReadyBatch *batch) {
  if (latency_announced_)
    return;
  // Small changes are not worth a pipeline-wide latency recalculation.
  const int64_t margin =
      std::max<int64_t>(1'000'000, latency_reported_ns_ / 10);
  if (AddedLatencyUnlocked() > latency_reported_ns_ + margin) {
    latency_announced_ = true;
    batch->latency_grew = true;
  }
}

}  // namespace gpufan
