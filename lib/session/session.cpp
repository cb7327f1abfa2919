// SPDX-License-Identifier: LGPL-2.1-or-later
// The session, its configuration and its lanes: what the other session-*.cpp
// files work on, and how a change wakes the threads waiting on it.
#include "gpufan/session.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>

namespace gpufan {

namespace {

std::atomic<uint64_t> g_next_session_id{1};

SessionConfig Sanitized(SessionConfig config) {
  config.lane_queue_size = std::max<uint32_t>(1, config.lane_queue_size);
  config.stall_timeout_ns = std::max<int64_t>(1, config.stall_timeout_ns);
  return config;
}

}  // namespace

std::shared_ptr<Session> Session::Create(const SessionConfig& config,
                                         std::shared_ptr<Clock> clock) {
  if (!clock)
    clock = std::make_shared<SteadyClock>();
  return std::shared_ptr<Session>(new Session(config, std::move(clock)));
}

Session::Session(const SessionConfig& config, std::shared_ptr<Clock> clock)
    : id_(g_next_session_id.fetch_add(1)),
      clock_(std::move(clock)),
      real_time_clock_(dynamic_cast<const SteadyClock *>(clock_.get()) !=
                       nullptr),
      config_(Sanitized(config)),
      scheduler_(config_.policy) {}

Session::~Session() = default;

void Session::SetPolicy(Policy policy) {
  std::lock_guard<Mutex> lock(mutex_);
  config_.policy = policy;
  scheduler_.SetPolicy(policy);
  NotifyAllUnlocked();
}

Policy Session::policy() const {
  std::lock_guard<Mutex> lock(mutex_);
  return config_.policy;
}

void Session::SetLaneQueueSize(uint32_t size) {
  std::lock_guard<Mutex> lock(mutex_);
  config_.lane_queue_size = std::max<uint32_t>(1, size);
  // The in-flight bound follows the new size, down too (the user's choice).
  for (auto& [id, l] : lanes_)
    l.queue_limit_peak = LaneQueueLimitUnlocked(l);
  NotifyAllUnlocked();
}

uint32_t Session::lane_queue_size() const {
  std::lock_guard<Mutex> lock(mutex_);
  return config_.lane_queue_size;
}

uint32_t Session::max_in_flight() const {
  std::lock_guard<Mutex> lock(mutex_);
  return config_.max_in_flight;
}

void Session::SetMaxInFlight(uint32_t limit) {
  std::lock_guard<Mutex> lock(mutex_);
  config_.max_in_flight = limit;
  NotifyAllUnlocked();
}

void Session::SetStallTimeout(int64_t ns) {
  std::lock_guard<Mutex> lock(mutex_);
  config_.stall_timeout_ns = std::max<int64_t>(1, ns);
  NotifyAllUnlocked();
}

int64_t Session::stall_timeout_ns() const {
  std::lock_guard<Mutex> lock(mutex_);
  return config_.stall_timeout_ns;
}

void Session::AddLane(uint32_t lane, const Device& device, double weight) {
  std::lock_guard<Mutex> lock(mutex_);
  // Adding a known lane again only updates its binding: its items stay tracked.
  Lane& l = lanes_[lane];
  if (!l.timer) {
    l.timer = std::make_shared<LaneTimer>(lane, trace_);
    trace_->NameLane(lane);
  }
  l.device = device;
  l.weight = weight;
  l.counters.lane = lane;
  scheduler_.ResetCursors();
  NotifyAllUnlocked();
}

void Session::RemoveLane(uint32_t lane) {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  if (it == lanes_.end())
    return;
  DropAllOutstandingUnlocked(it->second);
  lanes_.erase(it);
  scheduler_.ResetCursors();
  spread_allowance_ = 0;
  UpdateSpreadAllowanceUnlocked();
  NotifyAllUnlocked();
}

std::shared_ptr<LaneTimer> Session::LaneTimerFor(uint32_t lane) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane))
    return l->timer;
  return std::make_shared<LaneTimer>(lane, nullptr);
}

bool Session::StartTrace(const std::string &path, std::string *error) {
  std::lock_guard<Mutex> lock(mutex_);
  if (!trace_->Open(path, clock_->NowNs(), static_cast<uint32_t>(id_), error))
    return false;
  for (const auto& entry : lanes_)
    trace_->NameLane(entry.first);
  return true;
}

void Session::StopTrace() { trace_->Close(); }

bool Session::HasLane(uint32_t lane) const {
  std::lock_guard<Mutex> lock(mutex_);
  return lanes_.count(lane) > 0;
}

void Session::SetLaneWeight(uint32_t lane, double weight) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane)) {
    l->weight = weight;
    NotifyAllUnlocked();
  }
}

void Session::SetLaneDevice(uint32_t lane, const Device& device) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane))
    l->device = device;
}

void Session::SetLaneInfo(uint32_t lane, LaneInfo info) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane)) {
    l->described = true;
    l->info = std::move(info);
  }
}

void Session::SetLaneWorkerThread(uint32_t lane, std::string worker_thread) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane)) {
    l->described = true;
    l->info.worker_thread = std::move(worker_thread);
  }
}

void Session::CountStaging(uint32_t lane, bool copied) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane)) {
    if (copied)
      l->counters.copies++;
    else
      l->counters.copies_skipped++;
  }
}

void GpuFrameCounts::Count(GpuCopyPath path, uint64_t moved, int64_t took) {
  switch (path) {
    case GpuCopyPath::kInPlace:
      in_place++;
      return;
    case GpuCopyPath::kSkipped:
      skipped++;
      return;
    case GpuCopyPath::kPeer:
      peer++;
      break;
    case GpuCopyPath::kViaHost:
      via_host++;
      break;
  }
  bytes += moved;
  ns += took;
}

void Session::CountGpuFrame(uint32_t lane, GpuCopyPath path, uint64_t bytes,
                            int64_t ns) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (l == nullptr)
    return;
  l->counters.gpu.Count(path, bytes, ns);
  if (path != GpuCopyPath::kPeer && path != GpuCopyPath::kViaHost)
    return;
  l->transfer.AddSample(ns);
  // the copy is made at the start of the push of the item being pushed
  // (none, if it is gone meanwhile: its time then counts nowhere)
  if (!l->in_push)
    return;
  for (Outstanding& item : l->outstanding)
    if (item.seq == l->pushing_seq) {
      item.copy_ns += ns;
      break;
    }
}

void Session::CountOutputGpuFrame(GpuCopyPath path, uint64_t bytes,
                                  int64_t ns) {
  std::lock_guard<Mutex> lock(mutex_);
  output_gpu_.Count(path, bytes, ns);
}

void Session::SetLaneEligible(uint32_t lane, bool eligible) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane)) {
    l->eligible = eligible;
    NotifyAllUnlocked();
  }
}

void Session::ClaimLane(uint32_t lane) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || l->claimed)
    return;
  l->claimed = true;
  // A joining lane became active: it may take the item a dispatcher waits
  // with.
  NotifyAdmitUnlocked();
}

void Session::UnclaimLane(uint32_t lane) {
  std::lock_guard<Mutex> lock(mutex_);
  Lane *l = FindLaneUnlocked(lane);
  if (!l || !l->claimed)
    return;
  l->claimed = false;
  // Nothing of it can reach a fan-in any more.
  DropAllOutstandingUnlocked(*l);
}

bool Session::IsLaneClaimed(uint32_t lane) const {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  return it != lanes_.end() && it->second.claimed;
}

bool Session::IsLaneStalled(uint32_t lane) const {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  return it != lanes_.end() && it->second.stalled;
}

void Session::NoteLaneReset(uint32_t lane) {
  std::lock_guard<Mutex> lock(mutex_);
  if (Lane *l = FindLaneUnlocked(lane))
    l->resets++;
}

uint64_t Session::LaneResets(uint32_t lane) const {
  std::lock_guard<Mutex> lock(mutex_);
  auto it = lanes_.find(lane);
  return it != lanes_.end() ? it->second.resets : 0;
}

std::string Session::WhyNoLane() const {
  std::lock_guard<Mutex> lock(mutex_);
  bool any_eligible = false, any_weight = false;
  for (const auto& [id, l] : lanes_) {
    if (!l.eligible)
      continue;
    any_eligible = true;
    any_weight |= l.weight > 0.0;
  }
  if (any_eligible && !any_weight && config_.policy == Policy::kWeighted)
    return "policy=weighted, and every linked lane has weight 0 (a src pad's "
           "weight property must be above 0)";
  return {};
}

Session::Lane *Session::FindLaneUnlocked(uint32_t lane) {
  auto it = lanes_.find(lane);
  return it == lanes_.end() ? nullptr : &it->second;
}

std::deque<Session::Outstanding>::iterator Session::FindOutstandingUnlocked(
    Lane& lane, uint64_t seq) {
  // Ascending by seq (RecordDispatchUnlocked appends the next one): the
  // front is the usual answer, one before it is gone (a push reported after
  // its item came back), a binary search finds the rest (a deep queue holds
  // hundreds).
  auto& items = lane.outstanding;
  if (items.empty() || seq < items.front().seq)
    return items.end();
  if (items.front().seq == seq)
    return items.begin();
  auto it = std::lower_bound(
      items.begin(), items.end(), seq,
      [](const Outstanding& o, uint64_t s) { return o.seq < s; });
  return it != items.end() && it->seq == seq ? it : items.end();
}

void Session::SetFlushing(bool flushing) {
  std::lock_guard<Mutex> lock(mutex_);
  flushing_ = flushing;
  NotifyAllUnlocked();
}

bool Session::flushing() const {
  std::lock_guard<Mutex> lock(mutex_);
  return flushing_;
}

void Session::Reset() {
  std::lock_guard<Mutex> lock(mutex_);
  window_.Clear();
  for (auto& [id, l] : lanes_) {
    l.outstanding.clear();
    l.unmarked.clear();
    l.expired.clear();
    l.replay_markers.clear();
    l.queued = 0;
    l.next_order = 0;
    l.filling.reset();
    // Idle time across the flush is not service time.
    l.last_completion_ns = kNoTime;
    // A flush unblocks branches: every lane gets a fresh start.
    l.in_push = false;
    l.stalled = false;
    l.stall_kind = StallKind::kNone;
  }
  in_flight_ = 0;
  for (auto& [id, stream] : streams_)
    stream.in_flight = 0;
  unawaited_streams_.clear();
  input_ended_ = false;
  output_failed_ = false;
  accounted_since_ns_ = kNoTime;
  output_due_ns_ = kNoTime;  // no head left to wait for
  NotifyAllUnlocked();
}

// A notification reaches the waiters once, however many events come before
// they run: every notify_all with a waiter is a system call.
bool Session::ClaimAdmitNotifyUnlocked() {
  if (admit_waiters_ == 0 || admit_notified_)
    return false;
  admit_notified_ = true;
  return true;
}

void Session::NotifyAdmitUnlocked() {
  if (!ClaimAdmitNotifyUnlocked())
    return;
  if (defer_admit_notify_)
    admit_notify_deferred_ = true;
  else
    admit_cv_.notify_all();
}

void Session::UnlockAndNotifyAdmit(std::unique_lock<Mutex>& lock) {
  defer_admit_notify_ = false;
  const bool notify = admit_notify_deferred_;
  admit_notify_deferred_ = false;
  lock.unlock();
  if (notify)
    admit_cv_.notify_all();
}

void Session::NotifyOutputUnlocked() {
  if (output_waiters_ > 0 && !output_notified_) {
    output_notified_ = true;
    output_cv_.notify_all();
  }
}

void Session::NotifyAllUnlocked() {
  generation_++;
  NotifyAdmitUnlocked();
  NotifyOutputUnlocked();
  NotifySettledUnlocked();
}

}  // namespace gpufan
